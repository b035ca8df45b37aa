"""Lent memory: a sample or loan is handed back only once no view of it exists, and its
memory used afterwards raises instead of reading or writing the ring."""

import ctypes
import gc
import io

import numpy as np
import pytest

import ferry
from conftest import meet, met_pair


@pytest.fixture
def pair(domain):
    qos = ferry.Qos(transport="shm", max_message_size=1024)
    sub, pub = met_pair(domain, "life", qos)
    return pub, sub


def test_memory_used_after_release_raises(pair):
    pub, sub = pair
    pub.send(b"abc")
    s = sub.recv(timeout=5)
    s.release()
    assert s.released
    s.release()  # idempotent
    for use in (bytes, memoryview, lambda x: np.frombuffer(x, np.uint8), lambda x: x.array()):
        with pytest.raises(ferry.ReleasedError, match="released"):
            use(s)
    assert isinstance(ferry.ReleasedError("x"), ValueError)
    assert (s.seq, len(s)) == (0, 3)  # what was said about it stays readable


def test_release_is_refused_while_a_view_exists(pair):
    pub, sub = pair
    pub.send(b"abcdef")
    s = sub.recv(timeout=5)
    arr = s.array()
    with pytest.raises(ferry.BufferInUseError, match="a view of the sample"):
        s.release()
    assert isinstance(ferry.BufferInUseError("x"), BufferError)
    assert bytes(arr) == b"abcdef"  # the view still reads the message
    del arr
    s.release()


def test_a_with_block_releases_and_a_view_kept_past_it_is_refused(pair):
    pub, sub = pair
    pub.send(b"1")
    with sub.recv(timeout=5) as s:
        assert bytes(s) == b"1"
    assert s.released
    pub.send(b"2")
    with pytest.raises(ferry.BufferInUseError):
        with sub.recv(timeout=5) as s:
            kept = memoryview(s)
    kept.release()
    s.release()


def test_the_next_recv_releases_the_previous_sample_unless_viewed(pair):
    pub, sub = pair
    for i in range(5):
        pub.send(bytes([i]))
    first = sub.recv(timeout=5)
    second = sub.recv(timeout=5)  # no view of `first`: it is released
    assert first.released and not second.released
    view = memoryview(second)
    # Viewed, `second` is kept (max_held 2: it and the next one) and the next comes.
    third = sub.recv(timeout=5)
    assert bytes(view) == b"\x01" and not second.released
    view3 = memoryview(third)
    with pytest.raises(ferry.BufferInUseError, match="max_held"):
        sub.recv(timeout=5)
    assert (bytes(view), bytes(view3)) == (b"\x01", b"\x02")
    view.release()
    # The kept one goes back at the next call, now that its view is gone.
    fourth = sub.recv(timeout=5)
    assert second.released and not third.released
    view3.release()
    assert bytes(fourth) == b"\x03"
    assert bytes(sub.recv(timeout=5)) == b"\x04"
    assert third.released


def test_max_held_1_lends_one_sample_at_a_time(domain):
    qos = ferry.Qos(transport="shm", max_held=1)
    assert qos.max_held == 1 and ferry.Qos().max_held == 2
    node = ferry.Node("py-test", domain=domain)
    sub = node.subscriber("one", qos)
    pub = node.publisher("one", qos)
    meet(sub, pub)
    pub.send(b"a")
    pub.send(b"b")
    view = memoryview(sub.recv(timeout=5))
    with pytest.raises(ferry.BufferInUseError, match="max_held"):
        sub.recv(timeout=5)
    view.release()
    assert bytes(sub.recv(timeout=5)) == b"b"
    with pytest.raises(ferry.FerryError, match="max_held"):
        node.subscriber("one", ferry.Qos(max_held=0))


@pytest.mark.parametrize("transport", ["shm", "udp"])
def test_the_natural_numpy_loop_runs_1000_times(domain, transport):
    """`b = np.frombuffer(sub.recv())` in a loop: each pass still holds the last array when it
    receives the next (the name is rebound only afterwards)."""
    qos = ferry.Qos(transport=transport, wait="block", max_message_size=4096)
    sub, pub = met_pair(domain, "loop", qos)
    sums = []
    b = None
    for i in range(1000):
        pub.send(np.full(64, i, np.uint32))
        b = np.frombuffer(sub.recv(timeout=10), np.uint32)
        sums.append(int(b.sum()))
    assert sums == [64 * i for i in range(1000)]
    assert b[0] == 999


def test_recv_array_in_a_loop_lets_each_array_go(pair):
    pub, sub = pair
    for i in range(10):
        pub.send(np.full(8, i, np.uint16))
    for i in range(10):
        a = sub.recv_array(np.uint16, timeout=5)
        assert a.tolist() == [i] * 8
        del a  # not needed (the subscriber keeps a viewed sample: max_held 2), but tidy


def test_a_sample_keeps_its_subscriber_alive(domain):
    qos = ferry.Qos(transport="shm")
    node = ferry.Node("py-test", domain=domain)
    pub = node.publisher("alive", qos)
    sub = node.subscriber("alive", qos)
    meet(sub, pub)
    pub.send(b"kept")
    sample = sub.recv(timeout=5)
    del sub
    gc.collect()
    assert bytes(sample) == b"kept"


def test_close_refuses_while_viewed_and_then_ends_the_subscriber(pair):
    pub, sub = pair
    pub.send(b"z")
    s = sub.recv(timeout=5)
    v = memoryview(s)
    with pytest.raises(ferry.BufferInUseError):
        sub.close()
    # A kept sample with a view also keeps it open.
    pub.send(b"y")
    t = sub.recv(timeout=5)
    assert bytes(v) == b"z" and bytes(t) == b"y"
    with pytest.raises(ferry.BufferInUseError):
        sub.close()
    v.release()
    sub.close()
    assert sub.closed and s.released
    with pytest.raises(ferry.FerryError, match="closed"):
        sub.recv(timeout=0.1)


def test_a_loan_is_not_sent_while_viewed_and_not_usable_after(pair):
    pub, sub = pair
    loan = pub.loan(4)
    arr = loan.array(np.uint8)
    arr[:] = [1, 2, 3, 4]
    with pytest.raises(ferry.BufferInUseError, match="change a message subscribers are reading"):
        loan.send()
    del arr
    loan.send()
    assert loan.released
    with pytest.raises(ferry.ReleasedError, match="sent or discarded"):
        memoryview(loan)
    with pytest.raises(ferry.ReleasedError):
        loan.send()
    assert bytes(sub.recv(timeout=5)) == b"\x01\x02\x03\x04"


def test_an_unsent_loan_is_discarded(pair):
    pub, sub = pair
    with pub.loan(3) as loan:
        memoryview(loan)[:] = b"no!"
    assert loan.released
    loan2 = pub.loan(3)
    pending = pub.loan(5)  # a publisher lends one loan at a time: loan2 is discarded
    assert loan2.released and not pending.released
    with pytest.raises(ferry.ReleasedError):
        loan2.send()
    del pending  # dropped: discarded
    pub.send(b"yes")
    with sub.recv(timeout=5) as s:
        assert bytes(s) == b"yes" and s.seq == 0
    assert sub.try_recv() is None


def test_a_read_only_sample_refuses_a_writable_view(pair):
    pub, sub = pair
    pub.send(b"ro")
    with sub.recv(timeout=5) as s:
        with pytest.raises(ValueError):
            np.frombuffer(s, np.uint8).setflags(write=True)
        with pytest.raises(TypeError, match="not writable"):
            (ctypes.c_char * 2).from_buffer(s)
        with pytest.raises(TypeError, match="read-write"):
            io.BytesIO(b"xx").readinto(s)  # asks for a writable buffer: refused
        assert s.views == 0
