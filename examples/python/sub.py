"""Receives the arrays pub.py publishes and reads them in place (zero copy); Ctrl-C stops it.

    python examples/python/sub.py --transport shm [--count 100]
"""

import argparse

import numpy as np

import ferry


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topic", default="example/points")
    ap.add_argument("--transport", choices=["auto", "shm", "udp"], default="auto")
    ap.add_argument("--count", type=int, default=None, help="stop after N messages")
    ap.add_argument("--timeout", type=float, default=None, help="give up after S seconds")
    ap.add_argument("--domain", default=None)
    args = ap.parse_args()

    node = ferry.Node("py-example-sub", domain=args.domain)
    qos = ferry.Qos(transport=args.transport, wait="block", max_message_size=64 << 20)
    with node.subscriber(args.topic, qos) as sub:
        print(f"waiting on {args.topic!r} ({args.transport})", flush=True)
        received = 0
        try:
            while args.count is None or received < args.count:
                # The sample is the publisher's message in place; the `with` block hands it
                # back to the ring (no view of it may outlive the block).
                with sub.recv(timeout=args.timeout) as sample:
                    points = sample.array(np.float32)
                    first, mean = float(points[0]), float(points.mean())
                    del points
                received += 1
                print(f"seq {sample.seq}: {len(sample) // 4} points, first {first:.1f}, "
                      f"mean {mean:.3f}", flush=True)
        except KeyboardInterrupt:
            pass
        except ferry.TimeoutError as e:
            raise SystemExit(str(e))
        print(f"received {received}")


if __name__ == "__main__":
    main()
