"""The examples in examples/python run as their docstrings say."""

import json
import select
import subprocess
import sys

import pytest

from conftest import HERE, REPO, child_env, start

EXAMPLES = REPO / "examples" / "python"


@pytest.mark.parametrize("transport", ["shm", "udp"])
def test_pub_and_sub_in_two_processes(domain, transport):
    common = ["--transport", transport, "--domain", domain, "--topic", "example"]
    sub = start(
        [sys.executable, str(EXAMPLES / "sub.py"), *common, "--count", "5", "--timeout", "20"],
    )
    try:
        ready, _, _ = select.select([sub.stdout], [], [], 20)
        assert ready and sub.stdout.readline().startswith("waiting on"), sub.stderr.read()
        pub = subprocess.run(
            [sys.executable, str(EXAMPLES / "pub.py"), *common, "--count", "5", "--rate",
             "200", "--points", "5000"],
            capture_output=True, text=True, timeout=60, env=child_env(),
        )
        assert pub.returncode == 0, pub.stderr
        out, err = sub.communicate(timeout=30)
    finally:
        if sub.poll() is None:
            sub.kill()
            sub.wait(timeout=5)
    assert sub.returncode == 0, err
    lines = out.splitlines()
    assert lines[-1] == "received 5"
    assert lines[0].startswith("seq 0: 5000 points, first 0.0, mean 0.500")
    assert lines[4].startswith("seq 4: 5000 points, first 4.0, mean 4.500")


def test_analyse_prints_the_lab_results():
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "analyse.py"), str(HERE / "data" / "results.json")],
        capture_output=True, text=True, timeout=60, env=child_env(),
    )
    assert done.returncode == 0, done.stderr
    assert "== latency" in done.stdout and "shm-spin" in done.stdout


@pytest.mark.parametrize("read", ["copy", "view"])
def test_pingpong_measures_with_every_byte_checked(tmp_path, read):
    out = tmp_path / "rows.json"
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "pingpong.py"), "--sizes", "32,300,70K",
         "--samples", "50", "--warmup", "10", "--pin", "none", "--floor", "--read", read,
         "--json", str(out)],
        capture_output=True, text=True, timeout=120, env=child_env(),
    )
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())["rows"]
    got = {(r["transport"], r["size_bytes"]) for r in rows}
    assert got == {(t, s) for t in ("python-shm-spin", "python-mmap-spin")
                   for s in (32, 300, 70 << 10)}
    for r in rows:
        assert r["samples"] == 50 and 0 < r["min_ns"] <= r["p50_ns"] <= r["p99_ns"], r
