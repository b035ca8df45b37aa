"""Publishing and receiving: in one process, and between two Python processes over shared
memory and UDP, every byte checked."""

import os
import signal
import subprocess
import threading
import time

import numpy as np
import pytest

import ferry
from conftest import finish, met_pair, pattern, start_peer

TRANSPORTS = ["shm", "udp"]


def wait_for(cond, what, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"{what} within {timeout} s"
        time.sleep(0.005)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_bytes_round_trip_in_one_process(domain, transport):
    qos = ferry.Qos(transport=transport, wait="block", max_message_size=4096)
    node = ferry.Node("py-test", domain=domain)
    assert node.domain == domain and node.name == "py-test"
    sub = node.subscriber("data", qos)
    pub = node.publisher("data", qos)
    # The subscriber attaches to the publisher's ring (or learns its address) when it looks.
    wait_for(lambda: sub.publisher_count >= 1 and pub.subscriber_count >= 1, "the two meet")
    for i, payload in enumerate([b"hello", b"", bytes(range(256)) * 16, bytearray(b"xy")]):
        pub.send(payload)
        with sub.recv(timeout=5) as s:
            assert s.seq == i
            assert len(s) == len(payload)
            assert bytes(s) == bytes(payload)
    assert pub.sent == 4


def test_recv_times_out_with_ferry_timeout_error(domain):
    sub = ferry.Node("py-test", domain=domain).subscriber("none", ferry.Qos(transport="shm"))
    start = time.monotonic()
    with pytest.raises(ferry.TimeoutError) as e:
        sub.recv(timeout=0.2)
    took = time.monotonic() - start
    assert 0.15 < took < 2.0
    assert isinstance(e.value, TimeoutError) and isinstance(e.value, ferry.FerryError)
    assert "within 0.2 s" in str(e.value)
    assert sub.try_recv() is None


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_recv_bytes_copies_each_message(domain, transport):
    qos = ferry.Qos(transport=transport, wait="block", max_message_size=4096)
    sub, pub = met_pair(domain, "data", qos)
    pub.send(b"first")
    held = sub.recv(timeout=5)  # a sample lent before: recv_bytes hands it back
    payloads = [b"hello", b"", bytes(range(256)) * 16]
    for payload in payloads:
        pub.send(payload)
        got = sub.recv_bytes(timeout=5)
        assert type(got) is bytes and got == payload
    assert held.released
    with pytest.raises(ferry.TimeoutError, match="within 0.1 s"):
        sub.recv_bytes(timeout=0.1)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_timeout_past_what_the_clock_counts_waits_for_the_message(domain, transport):
    qos = ferry.Qos(transport=transport, wait="block", max_message_size=64)
    sub, pub = met_pair(domain, "data", qos)
    # Sent once the receive below is waiting: 1e19 s is past what a deadline can count. (The
    # receive looks at signals every 50 ms: the test's alarm, conftest.py, bounds it.)
    timer = threading.Timer(0.1, lambda: pub.send(b"late"))
    timer.start()
    try:
        assert sub.recv_bytes(timeout=1e19) == b"late"
    finally:
        timer.join(5)


def test_recv_bytes_is_refused_while_a_view_of_the_last_sample_lives(domain):
    qos = ferry.Qos(transport="shm", max_held=1)
    sub, pub = met_pair(domain, "data", qos)
    pub.send(b"one")
    pub.send(b"two")
    sample = sub.recv(timeout=5)
    view = memoryview(sample)
    with pytest.raises(ferry.BufferInUseError):
        sub.recv_bytes(timeout=5)
    assert bytes(view) == b"one"  # still valid: nothing was handed back
    view.release()
    assert sub.recv_bytes(timeout=5) == b"two"


def test_iteration_yields_samples(domain):
    qos = ferry.Qos(transport="shm")
    sub, pub = met_pair(domain, "it", qos)
    for i in range(5):
        pub.send(bytes([i]) * 3)
    seen = []
    for s in sub:
        seen.append(bytes(s))
        if len(seen) == 5:
            break
    assert seen == [bytes([i]) * 3 for i in range(5)]


def test_send_array_and_recv_array(domain):
    qos = ferry.Qos(transport="shm", max_message_size=1 << 16)
    sub, pub = met_pair(domain, "arr", qos)
    for dtype in (np.uint8, np.int16, np.uint32, np.float32, np.float64, np.complex128):
        sent = (np.arange(24) * 3).astype(dtype).reshape(4, 6)
        pub.send_array(sent)
        got = sub.recv_array(dtype, timeout=5)
        assert got.dtype == dtype and not got.flags.writeable
        assert np.array_equal(got.reshape(4, 6), sent)
        del got  # hands the sample back before the next recv
    with pytest.raises(TypeError, match="C-contiguous"):
        pub.send_array(np.zeros((4, 6))[:, ::2])


def test_recv_array_refuses_a_bad_dtype_before_it_takes_a_message(domain):
    qos = ferry.Qos(transport="shm", max_message_size=1 << 16)
    sub, pub = met_pair(domain, "dt", qos)
    pub.send(b"abc")
    with pytest.raises(TypeError):
        sub.recv_array("notadtype", timeout=5)
    # The message is still there, and one that does not fit the dtype says it was taken.
    with pytest.raises(ValueError, match="3 bytes.*4-byte.*it was taken"):
        sub.recv_array(np.uint32, timeout=5)
    pub.send(b"abcd")
    assert sub.recv_array(np.uint32, timeout=5).tobytes() == b"abcd"


def test_qos_is_checked():
    with pytest.raises(ValueError, match="transport must be one of"):
        ferry.Qos(transport="tcp")
    with pytest.raises(ValueError, match="seconds"):
        ferry.Qos(send_timeout=-1)
    q = ferry.Qos(transport="udp", delivery="latest", wait="spin", max_message_size=100)
    assert (q.transport, q.delivery, q.wait, q.max_message_size) == ("udp", "latest", "spin", 100)


def test_ferry_errors_carry_ferrys_messages(domain):
    node = ferry.Node("py-test", domain=domain)
    with pytest.raises(ferry.FerryError, match="invalid node name"):
        ferry.Node("")
    pub = node.publisher("small", ferry.Qos(transport="shm", max_message_size=8))
    with pytest.raises(ferry.FerryError, match="exceeds this publisher's maximum") as e:
        pub.send(b"123456789")
    # In Python's words, not Rust's.
    assert "raise Qos(max_message_size=...)" in str(e.value), e.value
    with pytest.raises(ferry.FerryError) as e:
        node.publisher(".hidden")
    assert "Node.server and Node.client" in str(e.value) and "::" not in str(e.value), e.value
    with pytest.raises(ferry.FerryError, match="max_message_size"):
        node.publisher("zero", ferry.Qos(transport="shm", max_message_size=0))


def test_a_waiting_recv_lets_other_threads_run(domain):
    """recv waits with the GIL released: a Python thread keeps counting meanwhile."""
    sub = ferry.Node("py-test", domain=domain).subscriber("gil", ferry.Qos(transport="shm"))
    counts = []
    stop = threading.Event()

    def count():
        n = 0
        while not stop.is_set():
            n += 1
        counts.append(n)

    t = threading.Thread(target=count)
    t.start()
    try:
        with pytest.raises(ferry.TimeoutError):
            sub.recv(timeout=0.3)
    finally:
        stop.set()
        t.join(timeout=5)
    assert counts and counts[0] > 10_000


def test_one_subscriber_serves_one_thread_at_a_time(domain):
    sub = ferry.Node("py-test", domain=domain).subscriber("busy", ferry.Qos(transport="shm"))
    errors = []

    def waiter():
        try:
            sub.recv(timeout=1.0)
        except ferry.TimeoutError:
            pass
        except ferry.FerryError as e:  # pragma: no cover - the other thread got there first
            errors.append(e)

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.2)
    with pytest.raises(ferry.FerryError, match="in use by another thread"):
        sub.recv(timeout=0.1)
    t.join(timeout=5)
    assert not errors


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_two_python_processes_every_byte(domain, transport):
    """A Python publisher process feeds this process's subscriber; every byte is checked."""
    sizes = [1, 7, 100, 4096, 70_000, 1 << 20]
    count = 60
    qos = ferry.Qos(transport=transport, wait="block", max_message_size=max(sizes))
    sub = ferry.Node("py-test", domain=domain).subscriber("two", qos)
    peer = start_peer("pub", transport, domain, "two", str(count), ",".join(map(str, sizes)))
    try:
        for i in range(count):
            size = sizes[i % len(sizes)]
            with sub.recv(timeout=10) as s:
                assert (s.seq, len(s)) == (i, size)
                assert np.array_equal(s.array(), pattern(i, size))
    finally:
        out = finish(peer)
    assert out.strip() == f"sent {count}"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_this_process_publishes_to_a_python_subscriber_process(domain, transport):
    sizes = [3, 1000, 1 << 16]
    count = 30
    qos = ferry.Qos(transport=transport, wait="block", max_message_size=max(sizes))
    pub = ferry.Node("py-test", domain=domain).publisher("back", qos)
    peer = start_peer("sub", transport, domain, "back", str(count), ",".join(map(str, sizes)))
    try:
        wait_for(lambda: pub.subscriber_count >= 1, "the subscriber process attached")
        for i in range(count):
            pub.send_array(pattern(i, sizes[i % len(sizes)]))
    finally:
        out = finish(peer)
    assert out.split() == ["ready", "ok", str(count)]


def test_a_full_ring_waits_with_the_gil_released_then_times_out(domain):
    """A reliable publisher whose subscriber reads nothing fills the ring; the next send waits
    (other Python threads run meanwhile) and raises ferry.TimeoutError at send_timeout."""
    qos = ferry.Qos(transport="shm", max_message_size=8192, ring_capacity=1 << 16,
                    send_timeout=0.3)
    sub, pub = met_pair(domain, "full", qos)
    payload = bytes(8192)
    sent = 0
    with pytest.raises(ferry.TimeoutError, match="did not make room") as raised:
        while sent < 100:
            counts = []
            stop = threading.Event()
            t = threading.Thread(target=lambda: counts.append(sum(1 for _ in iter(stop.is_set, True))))
            t.start()
            try:
                pub.send(payload)
            finally:
                stop.set()
                t.join(timeout=5)
            sent += 1
    assert 6 <= sent < 100
    # The error names the subscriber that holds the ring (this process's).
    assert f"(pid {os.getpid()})" in str(raised.value), str(raised.value)
    assert counts and counts[0] > 1000, "the other thread ran while send waited"
    # Reading makes room again.
    sub.recv(timeout=5).release()
    pub.send(payload)


FILL_AND_BLOCK = """
import signal, sys, ferry
# Python's own Ctrl-C, whatever this process inherited (a job started in the background
# ignores SIGINT, and Python then keeps it ignored).
signal.signal(signal.SIGINT, signal.default_int_handler)
node = ferry.Node("sig", domain=sys.argv[1])
qos = ferry.Qos(transport="shm", max_message_size=4096, ring_capacity=1 << 16, send_timeout=30.0)
sub, pub = node.subscriber("full", qos), node.publisher("full", qos)
print("READY", flush=True)
try:
    while True:
        pub.send(bytes(4000))
except KeyboardInterrupt:
    print("INTERRUPTED", flush=True)
# The subscriber goes first: a publisher closed before it would wait for it to read.
sub.close()
pub.close()
"""


def test_ctrl_c_ends_a_send_that_waits_for_room(domain):
    """A send waiting for a subscriber that reads nothing (send_timeout 30 s) ends at Ctrl-C
    with KeyboardInterrupt, as a receive does, not when the send timeout runs out."""
    import sys
    child = subprocess.Popen([sys.executable, "-c", FILL_AND_BLOCK, domain],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        import select
        assert select.select([child.stdout], [], [], 20)[0], "the child never got ready"
        assert child.stdout.readline().strip() == "READY"
        time.sleep(1.0)  # the ring is full within microseconds; the send waits
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=15)
    finally:
        child.kill()
    assert "INTERRUPTED" in out, (out, err)
    assert child.returncode == 0, err


def test_a_rate_cap_paces_a_udp_publisher_and_a_tiny_one_is_refused(domain):
    """`max_rate` reaches the publisher: 16 messages of 64 KiB at 40 Mbit/s cannot be handed out
    in less than about 0.21 s, however fast the machine (a lower bound the pacer sets, not a
    speed); every one arrives intact and the publisher's counters show the pacer at work."""
    node = ferry.Node("py-test", domain=domain)
    assert ferry.Qos().max_rate is None
    with pytest.raises(ferry.FerryError, match="max_rate"):
        node.publisher("capped", ferry.Qos(transport="udp", max_rate=1000))
    with pytest.raises(OverflowError):
        ferry.Qos(max_rate=-1)
    cap = 40_000_000
    qos = ferry.Qos(transport="udp", max_message_size=64 << 10, send_timeout=30, max_rate=cap)
    assert qos.max_rate == cap
    sub = node.subscriber("capped", ferry.Qos(transport="udp", max_message_size=64 << 10))
    pub = node.publisher("capped", qos)
    wait_for(lambda: sub.publisher_count >= 1 and pub.subscriber_count >= 1, "the two meet")
    count, size = 16, 64 << 10
    start = time.monotonic()
    for i in range(count):
        pub.send(bytes([i]) * size)
    elapsed = time.monotonic() - start
    # Frames on the wire are at least the payload; the first quantum (1 ms) may leave at once.
    floor = count * size * 8 / cap - 0.002
    assert elapsed >= 0.95 * floor, f"{count} x {size} B in {elapsed:.3f} s under {cap} bit/s"
    for i in range(count):
        assert sub.recv_bytes(timeout=30) == bytes([i]) * size
    # The counters are published by the endpoint's next pass, shortly after.
    capped = lambda: [p for p in ferry.topics(domain)[0]["publishers"] if p["sent"] == count]
    wait_for(capped, "the counters")
    (p,) = capped()
    assert p["paced_waits"] > 0
    assert 0 < p["pacing_rate_bytes_per_s"] <= cap // 8
    # The congestion controller's estimate of another flow's queue is published with its
    # other figures.
    assert "foreign_queue_ns" in p and "min_rtt_ns" in p


def test_multicast_reaches_every_subscriber_through_the_group(domain):
    """`multicast` sends each message once to a group (here on the loopback interface) that
    every subscriber joins: both get every message intact, on the group's port."""
    import os

    group = f"239.255.78.1:{30_000 + os.getpid() % 20_000}"
    qos = ferry.Qos(
        transport="udp", wait="block", max_message_size=1000,
        multicast=group, multicast_interface="127.0.0.1",
    )
    assert (qos.multicast, qos.multicast_interface, qos.multicast_ttl) == (group, "127.0.0.1", 1)
    assert ferry.Qos().multicast is None and ferry.Qos().multicast_ttl is None
    node = ferry.Node("py-test", domain=domain)
    subs = [node.subscriber("mc", qos), node.subscriber("mc", qos)]
    pub = node.publisher("mc", qos)
    wait_for(
        lambda: all(s.publisher_count >= 1 for s in subs) and pub.subscriber_count >= 2,
        "the three meet",
    )
    count = 50
    for i in range(count):
        pub.send(bytes([i]) * 1000)
        # One at a time: each message leaves alone, not packed with the next.
        for s in subs:
            assert s.recv_bytes(timeout=10) == bytes([i]) * 1000
    # Both subscribers receive on the group's port (unicast ones each have a port of their own).
    port = group.rsplit(":", 1)[1]
    found = ferry.topics(domain)[0]["subscribers"]
    assert [s["udp"].rsplit(":", 1)[1] for s in found] == [port, port], found


def test_bad_multicast_settings_are_value_errors():
    for kwargs, says in [
        ({"multicast": "239.255.1.1"}, "is not address:port"),
        ({"multicast": "239.255.1.1:7400", "multicast_interface": "eth0"}, "not an IPv4 address"),
        ({"multicast": "[ff02::1]:7400", "multicast_interface": "127.0.0.1"}, "interface index"),
        ({"multicast": "239.255.1.1:7400", "multicast_ttl": 300}, "at most 255"),
        ({"multicast_interface": "127.0.0.1"}, "without a multicast group"),
    ]:
        with pytest.raises(ValueError, match=says):
            ferry.Qos(**kwargs)


def events_until_gone(sub, timeout=10.0):
    """The subscriber's events up to and including a "gone" one (bounded)."""
    events = []
    deadline = time.monotonic() + timeout
    while not any(e[0] == "gone" for e in events):
        assert time.monotonic() < deadline, f"no gone event: {events}"
        sub.try_recv()
        time.sleep(0.02)
        while (e := sub.try_event()) is not None:
            events.append(e)
    return events


def test_publisher_events_and_a_deadline(domain):
    qos = ferry.Qos(transport="shm", wait="block", deadline=0.01)
    assert qos.deadline == pytest.approx(0.01)
    node = ferry.Node("py-events", domain=domain)
    sub = node.subscriber("ev", qos)
    pub = node.publisher("ev", qos)
    wait_for(lambda: sub.publisher_count >= 1, "the subscriber attaches")
    pub.send(b"x")
    assert sub.recv_bytes(timeout=5) == b"x"
    pub.close()
    # The subscriber learns the publisher left, and counts the periods without a message.
    events = events_until_gone(sub)
    appeared = [e for e in events if e[0] == "appeared"]
    gone = [e for e in events if e[0] == "gone"]
    assert len(appeared) == 1 and appeared[0][1].startswith("shm:")
    assert gone == [("gone", appeared[0][1], "closed")]
    assert sub.try_recv() is None
    with pytest.raises(ferry.TimeoutError):
        sub.recv(timeout=0.1)
    missed = sub.deadline_missed
    assert missed > 0
    while (e := sub.try_event()) is not None:
        events.append(e)
    assert ("deadline-missed", missed) in events
    assert sub.events_dropped == 0
    with pytest.raises(ferry.FerryError, match="deadline"):
        node.subscriber("ev2", ferry.Qos(deadline=0.0))


def test_a_udp_publisher_killed_is_gone_after_the_lease(domain, ferry_bin):
    assert ferry.Qos().lease == pytest.approx(3.0)
    qos = ferry.Qos(transport="udp", wait="block", lease=0.5)
    assert qos.lease == pytest.approx(0.5)
    node = ferry.Node("py-lease", domain=domain)
    sub = node.subscriber("lease", qos)
    pub = subprocess.Popen(
        [str(ferry_bin), "pub", "lease", "--transport", "udp", "--rate", "50", "--domain", domain],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        assert sub.recv_bytes(timeout=20) is not None
    finally:
        pub.send_signal(signal.SIGKILL)
        pub.wait(timeout=10)
    # Killed: no goodbye comes, and after the lease without a word it is gone, silent.
    events = events_until_gone(sub)
    gone = [e for e in events if e[0] == "gone"]
    assert gone[0][2] == "silent", events
    with pytest.raises(ferry.FerryError, match="lease"):
        node.subscriber("lease2", ferry.Qos(transport="udp", lease=0.1))


def test_a_subscriber_that_starts_late_gets_the_history_then_live_ones(domain):
    keep = ferry.Qos(transport="shm", history=5, max_message_size=64)
    assert keep.history == 5
    node = ferry.Node("py-history", domain=domain)
    pub = node.publisher("hist", keep)
    for i in range(100):
        pub.send(i.to_bytes(8, "little"))
    sub = node.subscriber("hist", ferry.Qos(transport="shm", history=3, max_message_size=64))
    got = [int.from_bytes(sub.recv_bytes(timeout=5), "little") for _ in range(3)]
    assert got == [97, 98, 99]
    assert sub.try_recv() is None
    pub.send((100).to_bytes(8, "little"))
    assert int.from_bytes(sub.recv_bytes(timeout=5), "little") == 100
    # Over UDP too: a joiner gets the last ones kept, then the live ones.
    udp = ferry.Qos(transport="udp", history=3, max_message_size=64)
    upub = node.publisher("hist-udp", udp)
    for i in range(50):
        upub.send(i.to_bytes(8, "little"))
    usub = node.subscriber("hist-udp", udp)
    got = [int.from_bytes(usub.recv_bytes(timeout=10), "little") for _ in range(3)]
    assert got == [47, 48, 49]
    with pytest.raises(ferry.FerryError, match="over UDP"):
        node.subscriber("hist-udp", ferry.Qos(transport="udp", history=10_000))
