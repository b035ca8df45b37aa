"""ferry: publish/subscribe between processes, over shared memory on one host and UDP across
hosts, with zero-copy samples and loans.

    import ferry
    node = ferry.Node("writer")
    pub = node.publisher("sensors/lidar", ferry.Qos(transport="shm"))
    pub.send(b"hello")

    sub = ferry.Node("reader").subscriber("sensors/lidar")
    with sub.recv(timeout=1.0) as sample:    # a read-only buffer over the ring, no copy
        print(sample.seq, bytes(sample))

A subscriber lends one sample at a time and a publisher one loan at a time; a sample or loan
cannot be handed back while memoryviews or numpy arrays of it exist (ferry.BufferInUseError),
and its memory used after that raises ferry.ReleasedError. `ferry.lab.load` reads the lab's
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
