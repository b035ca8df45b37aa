"""ferry.topics() and ferry.stats(): the live topics and their counters, as dicts with the keys
of `ferry topics --json` / `ferry stats --json`."""

import json
import subprocess
import time

import ferry
from conftest import child_env


def test_topics_and_stats_show_this_process(domain):
    qos = ferry.Qos(transport="shm")
    node = ferry.Node("py-admin", domain=domain)
    sub = node.subscriber("watched", qos)
    pub = node.publisher("watched", qos)
    deadline = time.monotonic() + 10
    while not (sub.publisher_count and pub.subscriber_count):
        assert time.monotonic() < deadline
        time.sleep(0.002)
    for _ in range(3):
        pub.send(b"12345")
        sub.recv(timeout=5).release()

    (topic,) = ferry.topics(domain)
    assert (topic["domain"], topic["topic"], topic["transport"]) == (domain, "watched", "shm")
    (p,) = topic["publishers"]
    (s,) = topic["subscribers"]
    assert p["node"] == s["node"] == "py-admin"
    assert p["alive"] and p["delivery"] == "reliable"
    assert (p["sent"], p["bytes"]) == (3, 15)
    assert (s["received"], s["bytes"], s["lost"]) == (3, 15, 0)
    assert p["refused"]["total"] == 0 and "malformed" in s["refused"]

    (stats,) = ferry.stats("watched", domain=domain)
    assert stats["publishers"][0]["sent"] == 3
    assert ferry.stats("no-such-topic", domain=domain) == []


def test_the_keys_are_those_of_the_command_line(ferry_bin, domain):
    pub = ferry.Node("py-admin", domain=domain).publisher("keys", ferry.Qos(transport="shm"))
    sub = ferry.Node("py-admin", domain=domain).subscriber("keys", ferry.Qos(transport="shm"))
    sub.publisher_count
    out = subprocess.run(
        [str(ferry_bin), "stats", "--json", "--domain", domain],
        capture_output=True, text=True, timeout=30, env=child_env(), check=True,
    ).stdout
    (cli,) = json.loads(out)
    (ours,) = ferry.stats(domain=domain)

    def keys(d):
        return {k: keys(v) if isinstance(v, dict) else None for k, v in d.items()}

    assert keys(ours).keys() == keys(cli).keys()
    assert keys(ours["publishers"][0]) == keys(cli["publishers"][0])
    assert keys(ours["subscribers"][0]) == keys(cli["subscribers"][0])
    del pub, sub
