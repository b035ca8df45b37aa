"""Publishes a float32 array per cycle, written in place in the ring (zero copy).

Run the subscriber first, in another terminal (same host: shm or auto; two hosts: udp, with
FERRY_PEERS=<the other host's address> on both):

    python examples/python/sub.py --transport shm
    python examples/python/pub.py --transport shm --count 100
"""

import argparse
import time

import numpy as np

import ferry


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topic", default="example/points")
    ap.add_argument("--transport", choices=["auto", "shm", "udp"], default="auto")
    ap.add_argument("--points", type=int, default=100_000, help="float32 values per message")
    ap.add_argument("--count", type=int, default=50)
    ap.add_argument("--rate", type=float, default=10.0, help="messages per second")
    ap.add_argument("--domain", default=None)
    args = ap.parse_args()

    node = ferry.Node("py-example-pub", domain=args.domain)
    qos = ferry.Qos(transport=args.transport, max_message_size=4 * args.points)
    with node.publisher(args.topic, qos) as pub:
        deadline = time.monotonic() + 10
        while pub.subscriber_count == 0:
            if time.monotonic() > deadline:
                raise SystemExit("no subscriber within 10 s: start sub.py first")
            time.sleep(0.01)
        base = np.linspace(0.0, 1.0, args.points, dtype=np.float32)
        start = time.monotonic()
        for i in range(args.count):
            with pub.loan(4 * args.points) as loan:
                # Written straight into the ring through a temporary array: no copy, and no view
                # left over when the loan is sent.
                np.add(base, np.float32(i), out=loan.array(np.float32))
                loan.send()
            time.sleep(max(0.0, start + (i + 1) / args.rate - time.monotonic()))
        print(f"sent {args.count} messages of {args.points} float32 on {args.topic!r}")


if __name__ == "__main__":
    main()
