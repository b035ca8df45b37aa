"""The other process of the Python front's tests.

    peer.py pub TRANSPORT DOMAIN TOPIC COUNT SIZE[,SIZE...]
        waits (10 s at most) for a subscriber, then sends COUNT messages through loans, message
        i of size SIZES[i % len(SIZES)] holding conftest.pattern(i, size); prints "sent N".
    peer.py sub TRANSPORT DOMAIN TOPIC COUNT SIZE[,SIZE...]
        receives COUNT messages (10 s each at most) and checks every byte; prints "ok N".
    peer.py block WAIT DOMAIN TOPIC
        prints "ready", then waits in recv() with no publisher, until a signal.
    peer.py hold TRANSPORT DOMAIN SERVICE
        serves SERVICE and prints "ready"; prints "holding" at the first request, and answers
        none (until killed).
    peer.py callblock DOMAIN SERVICE
        serves SERVICE in a thread that answers nothing, prints "ready" once a call of its own
        is under way, and exits with status 3 ("interrupted") when Ctrl-C ends the call.
"""

import signal
import sys
import time

import numpy as np

sys.path.insert(0, __import__("os").path.dirname(__file__))
import ferry  # noqa: E402
from conftest import pattern  # noqa: E402


def qos(transport: str, sizes) -> ferry.Qos:
    return ferry.Qos(transport=transport, wait="block", max_message_size=max(max(sizes), 1))


def publish(transport, domain, topic, count, sizes):
    pub = ferry.Node("py-peer-pub", domain=domain).publisher(topic, qos(transport, sizes))
    deadline = time.monotonic() + 10
    while pub.subscriber_count < 1:
        if time.monotonic() > deadline:
            sys.exit("no subscriber within 10 s")
        time.sleep(0.005)
    for i in range(count):
        size = sizes[i % len(sizes)]
        with pub.loan(size) as loan:
            loan.array(np.uint8)[:] = pattern(i, size)
            loan.send()
    print(f"sent {count}", flush=True)
    pub.close()


def subscribe(transport, domain, topic, count, sizes):
    sub = ferry.Node("py-peer-sub", domain=domain).subscriber(topic, qos(transport, sizes))
    print("ready", flush=True)
    for i in range(count):
        size = sizes[i % len(sizes)]
        with sub.recv(timeout=10) as s:
            assert s.seq == i, f"message {i} arrived as {s.seq}"
            assert len(s) == size, f"message {i}: {len(s)} bytes, expected {size}"
            got = np.frombuffer(s, np.uint8)
            bad = np.flatnonzero(got != pattern(i, size))
            assert bad.size == 0, f"message {i}: byte {bad[:1]} differs"
            del got
    print(f"ok {count}", flush=True)


def block(wait, domain, topic):
    # A process started in the background by a non-interactive shell inherits SIGINT ignored,
    # and Python then raises no KeyboardInterrupt: what is tested is ferry's waiting, so the
    # handler is Python's own here whatever the parent did.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sub = ferry.Node("py-peer-block", domain=domain).subscriber(
        topic, ferry.Qos(transport="shm", wait=wait)
    )
    print("ready", flush=True)
    try:
        sub.recv()
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(3)
    sys.exit("recv returned with no publisher")


def hold(transport, domain, service):
    qos = ferry.Qos(transport=transport, wait="block", max_message_size=1 << 20)
    server = ferry.Node("py-peer-hold", domain=domain).server(service, qos)
    print("ready", flush=True)
    server.recv_request(timeout=60)
    print("holding", flush=True)
    time.sleep(60)
    sys.exit("held a request for 60 s without being killed")


def callblock(domain, service):
    import threading

    signal.signal(signal.SIGINT, signal.default_int_handler)
    node = ferry.Node("py-peer-callblock", domain=domain)
    server = node.server(service, ferry.Qos(transport="shm"))
    got = threading.Event()

    def take_one():
        server.recv_request(timeout=30)
        got.set()

    threading.Thread(target=take_one, daemon=True).start()
    client = node.client(service, ferry.Qos(transport="shm"))
    if not client.wait_for_server(20):
        sys.exit("the server did not take requests within 20 s")
    client.send_request(b"first")
    if not got.wait(20):
        sys.exit("the server did not receive within 20 s")
    threading.Timer(0.2, lambda: print("ready", flush=True)).start()
    try:
        client.call(b"never answered")
    except KeyboardInterrupt:
        print(f"interrupted, pending {client.pending}", flush=True)
        sys.exit(3)
    sys.exit("call returned without an answer")


def main(argv):
    role = argv[0]
    if role == "block":
        block(*argv[1:4])
        return
    if role == "hold":
        hold(*argv[1:4])
        return
    if role == "callblock":
        callblock(*argv[1:3])
        return
    transport, domain, topic, count, sizes = argv[1:6]
    sizes = [int(s) for s in sizes.split(",")]
    {"pub": publish, "sub": subscribe}[role](transport, domain, topic, int(count), sizes)


if __name__ == "__main__":
    main(sys.argv[1:])
