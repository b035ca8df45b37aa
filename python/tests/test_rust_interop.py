"""The Python front against ferry's command-line tools (Rust): a Python publisher feeding
`ferry echo`, and `ferry pub` feeding a Python subscriber, over shared memory and UDP."""

import json

import numpy as np
import pytest

import ferry
from conftest import finish, pattern, start, wait_subscribed

TRANSPORTS = ["shm", "udp"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_python_publisher_feeds_ferry_echo(ferry_bin, domain, transport):
    count, sizes = 40, [1, 16, 300, 5000, 200_000]
    echo = start(
        [str(ferry_bin), "echo", "topic", "--count", str(count), "--json", "--timeout", "20",
         "--transport", transport, "--domain", domain],
    )
    try:
        qos = ferry.Qos(transport=transport, max_message_size=max(sizes))
        pub = ferry.Node("py-test", domain=domain).publisher("topic", qos)
        wait_subscribed(pub, echo, "ferry echo")
        for i in range(count):
            pub.send(pattern(i, sizes[i % len(sizes)]))
    finally:
        out = finish(echo)
    lines = [json.loads(line) for line in out.splitlines()]
    assert len(lines) == count
    for i, line in enumerate(lines):
        size = sizes[i % len(sizes)]
        assert (line["seq"], line["size"], line["skipped"]) == (i, size, 0)
        assert line["head"] == pattern(i, size)[:16].tobytes().hex()


def ferry_pub_payload(seq: int, size: int) -> np.ndarray:
    """What `ferry pub` sends: every byte the sequence number's low byte, and the sequence
    number (u64, little endian) first when the message has room for it."""
    data = np.full(size, seq & 0xFF, dtype=np.uint8)
    if size >= 8:
        data[:8] = np.frombuffer(np.uint64(seq).tobytes(), np.uint8)
    return data


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("size", [5, 4096, 1 << 20])
def test_ferry_pub_feeds_a_python_subscriber(ferry_bin, domain, transport, size):
    count = 25
    qos = ferry.Qos(transport=transport, wait="block", max_message_size=size)
    sub = ferry.Node("py-test", domain=domain).subscriber("topic", qos)
    publisher = start(
        [str(ferry_bin), "pub", "topic", "--size", str(size), "--rate", "0", "--count",
         str(count), "--wait-subscribers", "1", "--transport", transport, "--domain", domain],
    )
    try:
        for i in range(count):
            with sub.recv(timeout=20) as s:
                assert (s.seq, len(s), s.skipped) == (i, size, 0)
                assert np.array_equal(s.array(), ferry_pub_payload(i, size))
    finally:
        finish(publisher)
