"""`await sub.recv_async()`: the wait is the event loop's (a file descriptor it watches), so
other tasks run while a subscriber waits; over shared memory and UDP, with a timeout."""

import asyncio

import pytest

import ferry
from conftest import meet, met_pair


@pytest.mark.parametrize("transport", ["shm", "udp"])
def test_recv_async_waits_on_the_event_loop_while_other_tasks_run(domain, transport):
    qos = ferry.Qos(transport=transport, wait="block", max_message_size=1024)
    sub, pub = met_pair(domain, "a", qos, name="py-async")
    while sub.try_event() is not None:
        pass

    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.005)
                ticks += 1

        t = asyncio.create_task(ticker())
        got = []
        for i in range(20):
            # The message comes 30 ms later, from the loop itself: recv_async must not block it.
            asyncio.get_running_loop().call_later(0.03, pub.send, f"m{i}".encode())
            before = ticks
            sample = await sub.recv_async(timeout=10)
            got.append(bytes(sample))
            assert ticks > before, "the loop ran other tasks while the subscriber waited"
        t.cancel()
        return got

    assert asyncio.run(main()) == [f"m{i}".encode() for i in range(20)]


def test_recv_async_times_out_and_a_waiting_message_comes_at_once(domain):
    qos = ferry.Qos(transport="shm", wait="block")
    sub, pub = met_pair(domain, "t", qos, name="py-async")

    async def main():
        with pytest.raises(ferry.TimeoutError, match="within 0.1 s"):
            await sub.recv_async(timeout=0.1)
        pub.send(b"already here")
        return bytes(await sub.recv_async(timeout=0))

    assert asyncio.run(main()) == b"already here"
    # Another call after a wait works as before (the arming ended).
    pub.send(b"next")
    assert sub.recv_bytes(timeout=5) == b"next"


def test_missed_deadlines_and_events_do_not_end_or_spin_the_wait(domain, monkeypatch):
    """A subscriber whose deadline passes (a queued event) still sleeps until a message: it
    arms once per period or so, not in a loop."""
    qos = ferry.Qos(transport="shm", wait="block", deadline=0.01)
    node = ferry.Node("py-async", domain=domain)
    sub = node.subscriber("d", qos)
    pub = node.publisher("d", ferry.Qos(transport="shm"))
    meet(sub, pub)
    arms = 0
    arm = ferry.Subscriber._arm

    def counted(self):
        nonlocal arms
        arms += 1
        return arm(self)

    monkeypatch.setattr(ferry.Subscriber, "_arm", counted)

    async def main():
        asyncio.get_running_loop().call_later(0.3, pub.send, b"late")
        return bytes(await sub.recv_async(timeout=10))

    assert asyncio.run(main()) == b"late"
    assert sub.deadline_missed > 0
    # Waking once per 10 ms period (and for the liveness look) is some tens in 0.3 s; a loop
    # that spun on the queued events would arm thousands of times.
    assert 0 < arms < 500, arms
