"""ferry.WaitSet: one thread waiting on many subscribers, servers and clients."""

import threading
import time

import pytest

import ferry
from conftest import meet


def qos(transport: str) -> ferry.Qos:
    return ferry.Qos(transport=transport, wait="block", max_message_size=1024)


@pytest.mark.parametrize("transport", ["shm", "udp"])
def test_a_wait_set_says_which_subscriber_has_a_message(domain, transport):
    node = ferry.Node("py-ws", domain=domain)
    subs = [node.subscriber(f"t{i}", qos(transport)) for i in range(3)]
    pubs = [node.publisher(f"t{i}", qos(transport)) for i in range(3)]
    for s, p in zip(subs, pubs):
        meet(s, p, 20)
    ws = ferry.WaitSet()
    assert ws.wait(subs, timeout=0.05) == []

    def later():
        time.sleep(0.05)
        pubs[2].send(b"to two")

    t = threading.Thread(target=later)
    t.start()
    assert ws.wait(subs, timeout=20) == [2]
    t.join()
    assert subs[2].recv_bytes(timeout=5) == b"to two"
    assert subs[0].try_recv() is None


def test_a_wait_set_wakes_a_server_and_then_its_client(domain):
    node = ferry.Node("py-ws", domain=domain)
    server = node.server("svc", qos("shm"))
    sub = node.subscriber("quiet", qos("shm"))
    client = node.client("svc", qos("shm"))
    assert client.wait_for_server(20)
    ws = ferry.WaitSet()
    request = client.send_request(b"ping")
    assert ws.wait([sub, server], timeout=20) == [1]
    r = server.try_recv_request()
    assert r is not None and r.data == b"ping"
    assert r.respond(b"pong")
    assert ws.wait([sub, client], timeout=20) == [1]
    got = client.try_recv_response()
    assert got == (request, b"pong")


def test_a_wait_set_refuses_what_it_cannot_wait_on(domain):
    ws = ferry.WaitSet()
    with pytest.raises(TypeError, match="Subscriber, Server and Client"):
        ws.wait([object()], timeout=0)
