"""ferry: publish/subscribe between processes, over shared memory on one host and UDP across
hosts, with zero-copy samples and loans.

    import ferry
    # A subscriber gets what is published after it starts: it comes first.
    sub = ferry.Node("reader").subscriber("sensors/lidar")
    pub = ferry.Node("writer").publisher("sensors/lidar", ferry.Qos(transport="shm"))
    pub.send(b"hello")
    with sub.recv(timeout=1.0) as sample:    # a read-only buffer over the ring, no copy
        print(sample.seq, bytes(sample))

A subscriber lends its samples in place; one that still has memoryviews or numpy arrays when
the next is received is kept, up to Qos(max_held=) samples (2 by default), so that
`b = np.frombuffer(sub.recv())` in a loop works; past that, and for a publisher's loan (one at a
time), ferry.BufferInUseError says why. Memory of a sample or loan used after it was handed back
raises ferry.ReleasedError. In asyncio, `await sub.recv_async(timeout)` waits on the event loop
(the subscriber's wake-ups reach it through a file descriptor; no thread waits). `ferry.lab.load` reads the lab's
results.json into pandas DataFrames.

Typed topics: `ferry.Qos(topic_type=ferry.TopicType("sensor_msgs/msg/Imu", "cdr", schema))`
declares what a topic's bytes are (a ROS 2 definition with CDR, a protobuf FileDescriptorSet, JSON);
`pub.send_message(dict)` encodes a message, `sub.recv_message()` decodes one into a dict, beside
the raw bytes; an end of another type is refused, naming both.

Services (request/response): `node.server("map/tile")` receives requests and answers each,
`node.client("map/tile").call(b"tile 4 7", timeout=1.0)` sends one and returns its response
(a copy, as bytes); ferry.NoServerError, ferry.ServerGoneError and ferry.TooLargeError say what
went wrong.
"""

from ._ferry import (
    BufferInUseError,
    Client,
    FerryError,
    Loan,
    NoServerError,
    Node,
    Publisher,
    Qos,
    ReleasedError,
    ReplyTo,
    Request,
    Sample,
    Server,
    ServerGoneError,
    Subscriber,
    TimeoutError,
    TopicType,
    TooLargeError,
    WaitSet,
    __version__,
    stats,
    topics,
)
from . import lab


async def _recv_async(self, timeout=None):
    """Waits for the next message in asyncio (forever if `timeout` is None) and lends it as a
    Sample; raises ferry.TimeoutError when `timeout` seconds pass first. The wait is the event
    loop's: the subscriber's wake-ups reach it through a file descriptor (`loop.add_reader`), so
    other tasks run meanwhile and no thread is held. One wait at a time per subscriber."""
    import asyncio

    loop = asyncio.get_running_loop()
    end = None if timeout is None else loop.time() + timeout
    while True:
        sample = self.try_recv()
        if sample is not None:
            return sample
        if end is not None and loop.time() >= end:
            raise TimeoutError(f"no message on topic {self.topic!r} within {timeout} s")
        armed = self._arm()
        if armed is None:
            continue
        fd, until = armed
        woken = loop.create_future()

        def wake():
            if not woken.done():
                woken.set_result(None)

        loop.add_reader(fd, wake)
        try:
            waits = [w for w in (until, None if end is None else end - loop.time()) if w is not None]
            try:
                await asyncio.wait_for(woken, max(0.0, min(waits)) if waits else None)
            except asyncio.TimeoutError:
                pass
        finally:
            loop.remove_reader(fd)
            self._disarm()


Subscriber.recv_async = _recv_async

__all__ = [
    "BufferInUseError",
    "Client",
    "FerryError",
    "Loan",
    "NoServerError",
    "Node",
    "Publisher",
    "Qos",
    "ReleasedError",
    "ReplyTo",
    "Request",
    "Sample",
    "Server",
    "ServerGoneError",
    "Subscriber",
    "TimeoutError",
    "TooLargeError",
    "TopicType",
    "WaitSet",
    "__version__",
    "lab",
    "stats",
    "topics",
]
