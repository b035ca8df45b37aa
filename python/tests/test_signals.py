"""Ctrl-C interrupts a recv blocked with no publisher: the wait runs in slices of at most
50 ms between which Python looks at its signals."""

import select
import signal
import time

import pytest

from conftest import start_peer


@pytest.mark.parametrize("wait", ["block", "spin", "adaptive"])
def test_sigint_interrupts_a_blocked_recv_within_a_second(domain, wait):
    peer = start_peer("block", wait, domain, "quiet")
    try:
        ready, _, _ = select.select([peer.stdout], [], [], 20)
        assert ready, "the child did not start within 20 s"
        assert peer.stdout.readline().strip() == "ready"
        time.sleep(0.3)  # well into recv()
        assert peer.poll() is None, "recv returned with no publisher"
        sent = time.monotonic()
        peer.send_signal(signal.SIGINT)
        peer.wait(timeout=5)
        took = time.monotonic() - sent
        out = peer.stdout.read()
    finally:
        if peer.poll() is None:
            peer.kill()
            peer.wait(timeout=5)
    assert peer.returncode == 3 and "interrupted" in out, peer.stderr.read()
    assert took < 1.0, f"exit {took:.3f} s after SIGINT"
