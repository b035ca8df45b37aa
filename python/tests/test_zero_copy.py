"""Zero copy: a sample is a view of the publisher's ring, and a loan is the ring itself."""


import numpy as np
import pytest

import ferry
from conftest import met_pair


def address(buffer) -> int:
    return np.frombuffer(buffer, np.uint8).__array_interface__["data"][0]


@pytest.fixture
def shm_pair(domain):
    qos = ferry.Qos(transport="shm", max_message_size=4096, ring_capacity=1 << 16)
    sub, pub = met_pair(domain, "zc", qos)
    return pub, sub


def test_views_of_one_sample_share_its_memory(shm_pair):
    pub, sub = shm_pair
    pub.send(b"x" * 100)
    with sub.recv(timeout=5) as s:
        a, b = s.array(), np.frombuffer(s, np.uint8)
        m = memoryview(s)
        assert address(a) == address(b) == address(m)
        assert m.readonly and not a.flags.writeable and s.views == 3
        with pytest.raises(ValueError):
            a[0] = 1
        with pytest.raises(TypeError):
            m[0] = 1
        del a, b
        m.release()
        assert s.views == 0


def test_samples_are_read_in_place_where_the_ring_holds_them(shm_pair):
    """Consecutive messages lie one record apart in the ring (16-byte header + payload, padded
    to 8): the subscriber's views move through the ring with them. A copy would not."""
    pub, sub = shm_pair
    size = 100
    record = 16 + (size + 7) // 8 * 8
    addresses = []
    for i in range(5):
        pub.send(bytes([i]) * size)
        with sub.recv(timeout=5) as s:
            addresses.append(address(s))
            assert bytes(s) == bytes([i]) * size
    steps = {b - a for a, b in zip(addresses, addresses[1:])}
    assert steps == {record}, addresses


def test_loans_are_the_ring_and_what_is_written_is_what_arrives(shm_pair):
    pub, sub = shm_pair
    size = 200
    record = 16 + (size + 7) // 8 * 8
    loan_addresses = []
    for i in range(4):
        loan = pub.loan(size)
        assert len(loan) == size
        view = memoryview(loan)
        assert not view.readonly
        view[:] = bytes((i + k) % 256 for k in range(size))
        loan_addresses.append(address(view))
        view.release()
        loan.send()
        with sub.recv(timeout=5) as s:
            assert bytes(s) == bytes((i + k) % 256 for k in range(size))
    steps = {b - a for a, b in zip(loan_addresses, loan_addresses[1:])}
    assert steps == {record}, loan_addresses


def test_a_loan_array_written_through_a_temporary(shm_pair):
    pub, sub = shm_pair
    values = np.linspace(0.0, 1.0, 64)
    with pub.loan(values.nbytes) as loan:
        loan.array(np.float64)[:] = values
        loan.send()
    got = sub.recv_array(np.float64, timeout=5)
    assert np.array_equal(got, values)
