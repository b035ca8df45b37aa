"""Ctrl-C interrupts a recv blocked with no publisher: the wait runs in slices of at most
50 ms between which Python looks at its signals."""

import pytest

from conftest import interrupt, read_line, start_peer, stop_child


@pytest.mark.parametrize("wait", ["block", "spin", "adaptive"])
def test_sigint_interrupts_a_blocked_recv_within_a_second(domain, wait):
    peer = start_peer("block", wait, domain, "quiet")
    try:
        assert read_line(peer.stdout, 20, "the child started").strip() == "ready"
        took, out = interrupt(peer, "recv returned with no publisher")
    finally:
        stop_child(peer)
    assert peer.returncode == 3 and "interrupted" in out, peer.stderr.read()
    assert took < 1.0, f"exit {took:.3f} s after SIGINT"
