"""Shared helpers of the Python front's tests: unique domains, the `ferry` command-line binary,
child processes with bounded waits. Every wait in these tests has a bound."""

from __future__ import annotations

import itertools
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional, Tuple

import pytest

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
PEER = HERE / "peer.py"

_counter = itertools.count()


#: The longest one test may take. A blocked recv looks at signals every 50 ms, so the alarm
#: ends a hung test with an exception rather than hanging the run.
TEST_LIMIT_S = 90


class TestTookTooLong(Exception):
    pass


@pytest.fixture(autouse=True)
def bounded():
    def expire(signum, frame):
        raise TestTookTooLong(f"the test ran past {TEST_LIMIT_S} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, TEST_LIMIT_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def domain(request) -> str:
    """A domain of this test alone, so that tests (and other runs on the host) never meet."""
    return f"py{os.getpid()}-{next(_counter)}"


def _target_dirs() -> List[Path]:
    dirs = []
    if os.environ.get("CARGO_TARGET_DIR"):
        dirs.append(Path(os.environ["CARGO_TARGET_DIR"]))
    dirs.append(REPO / "target")
    return dirs


def find_ferry_binary() -> Optional[Path]:
    """`ferry` from FERRY_BIN, else the newest of target/{debug,release}/ferry."""
    if os.environ.get("FERRY_BIN"):
        return Path(os.environ["FERRY_BIN"])
    found = [
        d / profile / "ferry"
        for d in _target_dirs()
        for profile in ("debug", "release")
        if (d / profile / "ferry").is_file()
    ]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


@pytest.fixture(scope="session")
def ferry_bin() -> Path:
    """The `ferry` command-line binary; built with cargo (bounded) when none is there."""
    found = find_ferry_binary()
    if found is None:
        if shutil.which("cargo") is None:
            pytest.skip("no ferry binary (set FERRY_BIN, or build with cargo build -p ferry-cli)")
        subprocess.run(
            ["cargo", "build", "--locked", "-p", "ferry-cli"],
            cwd=REPO,
            check=True,
            timeout=900,
        )
        found = find_ferry_binary()
    assert found is not None and found.is_file(), "cargo build -p ferry-cli made no ferry binary"
    return found


def child_env() -> dict:
    env = dict(os.environ)
    env.pop("FERRY_DOMAIN", None)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def start(args: List[str], env: Optional[dict] = None, **kwargs) -> subprocess.Popen:
    """A child with text pipes (no standard input), in child_env() unless `env` is given."""
    return subprocess.Popen(
        args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env() if env is None else env,
        **kwargs,
    )


def start_peer(*args: str, **kwargs) -> subprocess.Popen:
    """`python tests/peer.py ARGS` with text pipes."""
    return start([sys.executable, str(PEER), *args], **kwargs)


def read_line(stream, timeout: float, what: str) -> str:
    """A line of a child's output, waiting at most `timeout` s for it (`what` names it)."""
    ready, _, _ = select.select([stream], [], [], timeout)
    assert ready, f"{what} within {timeout} s"
    return stream.readline()


def stop_child(proc: subprocess.Popen):
    """Kills a child still running (a test that failed left it)."""
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=10)


def interrupt(peer: subprocess.Popen, returned: str) -> Tuple[float, str]:
    """Ctrl-C to a child blocked in a wait nothing ends: 0.3 s after it said it waits (well into
    the wait; `returned` says what failed if it no longer waits), SIGINT, then its exit (5 s at
    the most). Returns the seconds from the signal to the exit, and the child's output."""
    time.sleep(0.3)
    assert peer.poll() is None, returned
    sent = time.monotonic()
    peer.send_signal(signal.SIGINT)
    peer.wait(timeout=5)
    return time.monotonic() - sent, peer.stdout.read()


def meet(sub, pub, timeout: float = 10.0):
    """Waits until a subscriber and a publisher see each other."""
    deadline = time.monotonic() + timeout
    while not (sub.publisher_count >= 1 and pub.subscriber_count >= 1):
        assert time.monotonic() < deadline, (
            f"publisher and subscriber did not meet in {timeout:g} s"
        )
        time.sleep(0.002)


def met_pair(domain: str, topic: str, qos, name: str = "py-test"):
    """A subscriber and a publisher of `topic` (`qos` both) on one node, once the two have met."""
    import ferry

    node = ferry.Node(name, domain=domain)
    sub = node.subscriber(topic, qos)
    pub = node.publisher(topic, qos)
    meet(sub, pub)
    return sub, pub


def wait_subscribed(pub, child: subprocess.Popen, who: str, timeout: float = 10.0):
    """Waits until `child` (`who`) subscribed to `pub`, failing at once if it exits first."""
    deadline = time.monotonic() + timeout
    while pub.subscriber_count < 1:
        assert time.monotonic() < deadline, f"{who} did not attach within {timeout:g} s"
        assert child.poll() is None, child.stderr.read()
        time.sleep(0.005)


def finish(proc: subprocess.Popen, timeout: float = 30.0) -> str:
    """Waits (bounded) for a child that must succeed; returns its standard output."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate(timeout=10)
        raise AssertionError(f"{proc.args} did not finish within {timeout} s\n{err}")
    assert proc.returncode == 0, f"{proc.args} failed ({proc.returncode}):\n{err}"
    return out


def pattern(seq: int, size: int):
    """The payload of message `seq`: byte k is (seq + k) mod 251 (a prime, so that no two
    neighbouring messages or offsets agree), made with numpy."""
    import numpy as np

    return ((np.arange(size, dtype=np.uint64) + seq) % 251).astype(np.uint8)
