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
"""

from ._ferry import (
    BufferInUseError,
    FerryError,
    Loan,
    Node,
    Publisher,
    Qos,
    ReleasedError,
    Sample,
    Subscriber,
    TimeoutError,
    __version__,
    stats,
    topics,
)
from . import lab

__all__ = [
    "BufferInUseError",
    "FerryError",
    "Loan",
    "Node",
    "Publisher",
    "Qos",
    "ReleasedError",
    "Sample",
    "Subscriber",
    "TimeoutError",
    "__version__",
    "lab",
    "stats",
    "topics",
]
