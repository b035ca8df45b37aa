"""Services (request/response) from Python: a client and a server on two threads, requests in
flight matched by id, the errors a client sees (no server, a server killed, a time out, a
request too large), Ctrl-C in a call, and Python against ferry's command-line server and
client (Rust), over shared memory and UDP."""

import signal
import subprocess
import threading
import time
from contextlib import contextmanager

import numpy as np
import pytest

import ferry
from conftest import child_env, interrupt, pattern, read_line, start, start_peer, stop_child

TRANSPORTS = ["shm", "udp"]


def qos(transport: str, size: int = 1 << 16) -> ferry.Qos:
    return ferry.Qos(transport=transport, wait="block", max_message_size=size)


@contextmanager
def serving(server: ferry.Server, handle):
    """Runs `handle(request)` for each request `server` receives, on a thread of its own, until
    the block ends; an exception of the thread is raised here."""
    stop = threading.Event()
    failures = []

    def run():
        try:
            while not stop.is_set():
                try:
                    request = server.recv_request(timeout=0.05)
                except ferry.TimeoutError:
                    continue
                handle(request)
        except BaseException as e:  # noqa: B036 (reported by the test's thread)
            failures.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)
        assert not thread.is_alive(), "the server's thread did not stop within 10 s"
    if failures:
        raise failures[0]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_calls_between_two_threads(domain, transport):
    node = ferry.Node("py-svc", domain=domain)
    server = node.server("echo", qos(transport))
    client = node.client("echo", qos(transport))
    seen = []

    def handle(r):
        seen.append((r.client, r.id, r.reply_to, len(r)))
        assert r.respond(r.data[::-1]) is True
        assert r.answered
        with pytest.raises(ferry.FerryError, match="answered already"):
            r.respond(b"twice")

    with serving(server, handle):
        assert client.wait_for_server(20), "the server took no requests within 20 s"
        assert client.has_server
        sizes = [0, 1, 100, 4096, 60_000]
        for i, size in enumerate(sizes):
            body = pattern(i, size).tobytes()
            assert client.call(body, timeout=20) == body[::-1]
        # Any C-contiguous buffer is a request.
        assert client.call(bytearray(b"abc"), timeout=20) == b"cba"
        assert client.call(memoryview(b"abcd")[1:], timeout=20) == b"dcb"
        ints = np.arange(8, dtype="<i4")
        # The bytes of little-endian ints reversed are the ints reversed, big-endian.
        got = client.call_array(ints, ">i4", timeout=20)
        assert np.array_equal(got, ints[::-1])
        got[0] = 7  # a copy of the client's own: writable
        assert client.pending == 0
        assert client.try_recv_response() is None
    assert [s[0] for s in seen] == [client.id] * len(seen)
    assert [s[1] for s in seen] == list(range(len(seen)))
    assert [s[3] for s in seen[: len(sizes)]] == sizes
    assert len({s[2] for s in seen}) == len(seen)
    assert server.client_count == 1
    assert "echo" in repr(client) and "echo" in repr(server)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_fifty_requests_in_flight_matched_by_id(domain, transport):
    count = 50
    node = ferry.Node("py-svc", domain=domain)
    server = node.server("many", qos(transport))
    client = node.client("many", qos(transport))
    held = []

    def handle(r):
        held.append(r.reply_to)
        if len(held) == count:
            # Answered later, through what each request left, last first.
            bodies = {rt: b"answer %d" % rt.request for rt in held}
            assert len(bodies) == count, "every ReplyTo is its own key"
            for rt in reversed(held):
                assert server.respond(rt, bodies[rt]) is True

    with serving(server, handle):
        assert client.wait_for_server(20)
        ids = [client.send_request(b"question %d" % i) for i in range(count)]
        assert ids == list(range(count))
        assert client.pending == count
        answers = [client.recv_response(timeout=20) for _ in range(count)]
    assert [rid for rid, _ in answers] == ids[::-1]
    for rid, body in answers:
        assert body == b"answer %d" % rid
    assert client.pending == 0
    assert client.try_recv_response() is None
    with pytest.raises(ferry.FerryError, match="pending"):
        client.recv_response(timeout=1)


def test_a_call_keeps_the_responses_to_other_requests(domain):
    node = ferry.Node("py-svc", domain=domain)
    server = node.server("keep", qos("shm"))
    client = node.client("keep", qos("shm"))
    with serving(server, lambda r: r.respond(b"re " + r.data)):
        assert client.wait_for_server(20)
        ids = [client.send_request(b"%d" % i) for i in range(10)]
        # Answered in order: the ten come before the call's own, and are kept for later.
        assert client.call(b"now", timeout=20) == b"re now"
        assert client.pending == 10
        got = [client.recv_response(timeout=20) for _ in ids]
    assert got == [(i, b"re %d" % i) for i in ids]
    assert client.pending == 0


def test_a_call_times_out_and_its_late_answer_is_dropped(domain):
    node = ferry.Node("py-svc", domain=domain)
    server = node.server("slow", qos("shm"))
    client = node.client("slow", qos("shm"))
    late = []

    def handle(r):
        if r.data == b"slow":
            late.append(r.reply_to)
            return
        for rt in late:
            assert server.respond(rt, b"too late") is True
        r.respond(r.data.upper())

    with serving(server, handle):
        assert client.wait_for_server(20)
        start = time.monotonic()
        with pytest.raises(ferry.TimeoutError) as e:
            client.call(b"slow", timeout=0.3)
        took = time.monotonic() - start
        assert 0.25 < took < 5, took
        assert e.value.request == 0 and e.value.service == "slow"
        assert isinstance(e.value, TimeoutError)
        assert client.pending == 0
        # The late answer comes before this call's own, and is dropped.
        assert client.call(b"next", timeout=20) == b"NEXT"
        assert late, "the slow request reached the server"
        assert client.pending == 0
        assert client.try_recv_response() is None


def test_no_server_is_an_error_at_once(domain):
    node = ferry.Node("py-svc", domain=domain)
    client = node.client("nobody", qos("shm"))
    assert not client.has_server
    start = time.monotonic()
    with pytest.raises(ferry.NoServerError) as e:
        client.call(b"anyone?", timeout=10)
    assert time.monotonic() - start < 1.0
    assert isinstance(e.value, ConnectionError) and isinstance(e.value, ferry.FerryError)
    assert e.value.service == "nobody"
    assert "wait_for_server" in str(e.value)
    with pytest.raises(ferry.NoServerError):
        client.send_request(b"anyone?")
    assert client.pending == 0
    start = time.monotonic()
    assert client.wait_for_server(0.2) is False
    assert 0.15 < time.monotonic() - start < 2.0


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_server_gone_when_its_process_is_killed(domain, transport):
    peer = start_peer("hold", transport, domain, "doomed")
    try:
        assert read_line(peer.stdout, 20, "the server started").strip() == "ready"
        client = ferry.Node("py-svc", domain=domain).client("doomed", qos(transport))
        assert client.wait_for_server(20), "the server took no requests within 20 s"
        first = [client.send_request(b"one"), client.send_request(b"two")]

        def kill_when_held():
            if read_line(peer.stdout, 20, "the server holds a request").strip() == "holding":
                time.sleep(0.3)  # the call below is waiting by then
                peer.send_signal(signal.SIGKILL)

        killer = threading.Thread(target=kill_when_held, daemon=True)
        killer.start()
        start = time.monotonic()
        with pytest.raises(ferry.ServerGoneError) as e:
            client.call(b"three", timeout=30)
        assert time.monotonic() - start < 15
        killer.join(timeout=20)
        assert peer.wait(timeout=10) == -signal.SIGKILL
        assert e.value.request == 2 and isinstance(e.value, ConnectionError)
        # The other two pending requests end the same way, one error each.
        ended = []
        for _ in first:
            with pytest.raises(ferry.ServerGoneError) as e:
                client.recv_response(timeout=10)
            ended.append(e.value.request)
        assert sorted(ended) == first
        assert client.pending == 0
    finally:
        stop_child(peer)


def test_too_large_requests_and_responses(domain):
    node = ferry.Node("py-svc", domain=domain)
    server = node.server("small", qos("shm", 100))
    client = node.client("small", qos("shm", 1000))

    def handle(r):
        if r.data == b"big answer":
            with pytest.raises(ferry.TooLargeError) as e:
                r.respond(bytes(200))
            assert (e.value.len, e.value.max) == (200, 100)
            assert not r.answered
        r.respond(b"ok")

    with serving(server, handle):
        assert client.wait_for_server(20)
        # Beyond the client's own limit: refused before it is sent.
        with pytest.raises(ferry.TooLargeError) as e:
            client.send_request(bytes(2000))
        assert (e.value.len, e.value.max, e.value.request) == (2000, 1000, None)
        assert isinstance(e.value, ValueError)
        # Within the client's, beyond the server's: the server refuses it.
        with pytest.raises(ferry.TooLargeError) as e:
            client.call(bytes(500), timeout=20)
        assert (e.value.len, e.value.max, e.value.request) == (500, 100, 0)
        assert client.call(b"big answer", timeout=20) == b"ok"
        assert client.pending == 0


def test_one_server_per_service_and_close(domain):
    node = ferry.Node("py-svc", domain=domain)
    first = node.server("only", qos("shm"))
    with pytest.raises(ferry.FerryError):
        node.server("only", qos("shm"))
    first.close()
    assert first.closed
    with pytest.raises(ferry.FerryError, match="closed"):
        first.try_recv_request()
    with node.server("only", qos("shm")) as again:
        assert not again.closed and again.try_recv_request() is None
        with pytest.raises(TypeError):
            again.respond(42, b"x")
    assert again.closed
    with node.client("only", qos("shm")) as client:
        assert not client.closed
    assert client.closed
    with pytest.raises(ferry.FerryError, match="closed"):
        client.call(b"x", timeout=1)
    with pytest.raises(ferry.FerryError, match="invalid service"):
        node.client(".hidden")


def test_ctrl_c_interrupts_a_call_within_a_second(domain):
    peer = start_peer("callblock", domain, "unanswered")
    try:
        assert read_line(peer.stdout, 20, "the call started").strip() == "ready"
        took, out = interrupt(peer, "call returned without an answer")
    finally:
        stop_child(peer)
    assert peer.returncode == 3, peer.stderr.read()
    # The interrupted call's request is given up; the one sent before is still pending.
    assert "interrupted, pending 1" in out
    assert took < 1.0, f"exit {took:.3f} s after SIGINT"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_python_client_calls_ferry_serve(ferry_bin, domain, transport):
    sizes = [0, 5, 4096, 300_000]
    serve = start(
        [str(ferry_bin), "serve", "rust-echo", "--echo", "--quiet", "--count", str(len(sizes)),
         "--transport", transport, "--domain", domain],
    )
    try:
        line = read_line(serve.stderr, 20, "ferry serve started")
        assert "serving" in line, line
        client = ferry.Node("py-svc", domain=domain).client(
            "rust-echo", qos(transport, max(sizes))
        )
        assert client.wait_for_server(20), "ferry serve took no requests within 20 s"
        for i, size in enumerate(sizes):
            body = pattern(i, size)
            assert client.call(body, timeout=20) == body.tobytes()
        out, err = serve.communicate(timeout=30)
        assert serve.returncode == 0, err
        assert f"answered {len(sizes)} requests" in err
    finally:
        stop_child(serve)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_ferry_call_calls_a_python_server(ferry_bin, domain, transport):
    server = ferry.Node("py-svc", domain=domain).server("py-upper", qos(transport))
    with serving(server, lambda r: r.respond(r.data.upper())):
        done = subprocess.run(
            [str(ferry_bin), "call", "py-upper", "--data", "hello ferry", "--count", "3",
             "--wait-server", "20", "--timeout", "20", "--transport", transport,
             "--domain", domain],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
            env=child_env(),
        )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3, done.stdout
    for i, line in enumerate(lines):
        assert line.startswith(f"response {i} (11 bytes)") and '"HELLO FERRY"' in line, line
