"""Lent memory: a sample or loan is handed back only once no view of it exists, and its
memory used afterwards raises instead of reading or writing the ring."""

import ctypes
import gc
import io
import time

import numpy as np
import pytest

import ferry


def meet(sub, pub):
    deadline = time.monotonic() + 10
    while not (sub.publisher_count >= 1 and pub.subscriber_count >= 1):
        assert time.monotonic() < deadline, "publisher and subscriber did not meet in 10 s"
        time.sleep(0.002)


@pytest.fixture
def pair(domain):
    qos = ferry.Qos(transport="shm", max_message_size=1024)
    node = ferry.Node("py-test", domain=domain)
    sub = node.subscriber("life", qos)
    pub = node.publisher("life", qos)
    meet(sub, pub)
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
    for i in range(3):
        pub.send(bytes([i]))
    first = sub.recv(timeout=5)
    second = sub.recv(timeout=5)  # no view of `first`: it is released
    assert first.released and not second.released
    view = memoryview(second)
    with pytest.raises(ferry.BufferInUseError, match="one sample at a time"):
        sub.recv(timeout=5)
    assert bytes(view) == b"\x01"
    view.release()
    assert bytes(sub.recv(timeout=5)) == b"\x02"


def test_recv_array_in_a_loop_lets_each_array_go(pair):
    pub, sub = pair
    for i in range(10):
        pub.send(np.full(8, i, np.uint16))
    for i in range(10):
        a = sub.recv_array(np.uint16, timeout=5)
        assert a.tolist() == [i] * 8
        del a  # without it, the next recv_array refuses (the array still reads this sample)


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
