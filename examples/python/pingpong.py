"""Shared-memory ping-pong between two Python processes: the Python front's one-way latency,
with the payload work of `ferry lab latency` (the sender writes every byte of the message into
the ring, the receiver checks every byte of it), to set beside the Rust figure:

    python examples/python/pingpong.py --sizes 32,1M --samples 2000 --pin 0,1
    ferry lab latency --transport shm-spin --sizes 32,1M --samples 2000 --rounds 1 --pin 0,1

Round trips run on two topics (ping, pong) with reliable delivery and spinning waits; the
one-way latency is half the round trip. Each size goes the way a Python program would send it.
Messages up to 256 bytes are sent from bytes (`Publisher.send`: the extension copies them into
the ring) and read as a copy (`--read copy`, the default: `Subscriber.recv_bytes`) or in place
(`--read view`: a memoryview of the sample; the previous sample goes back to the ring on the
next `recv`). Larger ones are written into a loan and checked in the sample through numpy
arrays (no copy either way). Message seq carries byte (seq % 255) + 1, shifted by 128 for pongs,
as in the lab. `--floor` adds the same round trips between two plain Python processes over one
shared mmap, no ferry: what the Python work alone costs.
"""

import argparse
import json
import os
import subprocess
import sys
import time

import ferry

SMALL = 256  # memoryview comparison goes item by item: numpy is faster above this
PONG_SHIFT = 128


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


class Payload:
    """The payloads of one size: up to SMALL the 256 fills as bytes (the small-message loops
    send and compare them inline), above it written and checked through numpy arrays."""

    def __init__(self, size: int):
        self.size = size
        if size <= SMALL:
            self.fills = [bytes([b]) * size for b in range(256)]
        else:
            import numpy as np

            self.np = np
            self.words = [np.uint64(int.from_bytes(bytes([b]) * 8, "little")) for b in range(256)]
            self.equal = np.empty(size // 8, dtype=bool)  # the check's result, made once

    def write(self, loan, byte: int) -> None:
        self.np.frombuffer(loan, self.np.uint8).fill(byte)

    def check(self, sample, byte: int) -> bool:
        if len(sample) != self.size:
            return False
        words = self.np.frombuffer(sample, self.np.uint64, count=self.size // 8)
        ok = bool(self.np.equal(words, self.words[byte], out=self.equal).all())
        tail = self.size % 8
        if tail:
            rest = self.np.frombuffer(sample, self.np.uint8)[-tail:]
            ok = ok and bool((rest == byte).all())
        return ok


def endpoints(domain: str, max_size: int, main: bool):
    qos = ferry.Qos(transport="shm", wait="spin", max_message_size=max_size)
    node = ferry.Node("py-pingpong-main" if main else "py-pingpong-peer", domain=domain)
    out, inp = ("ping", "pong") if main else ("pong", "ping")
    pub, sub = node.publisher(out, qos), node.subscriber(inp, qos)
    deadline = time.monotonic() + 10
    while not (sub.publisher_count >= 1 and pub.subscriber_count >= 1):
        if time.monotonic() > deadline:
            raise SystemExit("the two processes did not meet within 10 s")
        time.sleep(0.001)
    return pub, sub


def peer(domain: str, sizes, counts, read: str) -> None:
    pub, sub = endpoints(domain, max(sizes), main=False)
    seq = 0
    for size, count in zip(sizes, counts):
        payload = Payload(size)
        if size <= SMALL:
            seq = peer_small(pub, sub, payload.fills, seq, count, read)
            continue
        write, check, loan, recv = payload.write, payload.check, pub.loan, sub.recv
        for _ in range(count):
            ping, pong = seq % 255 + 1, (seq + PONG_SHIFT) % 255 + 1
            with recv(timeout=30) as sample:
                if not check(sample, ping):
                    raise SystemExit(f"ping {seq} is corrupt")
            out = loan(size)
            write(out, pong)
            out.send()
            seq += 1


def peer_small(pub, sub, fills, seq: int, count: int, read: str) -> int:
    """The peer's loop for small messages: the bench's loop, inlined."""
    send = pub.send
    if read == "copy":
        recv = sub.recv_bytes
        for _ in range(count):
            if recv(timeout=30) != fills[seq % 255 + 1]:
                raise SystemExit(f"ping {seq} is corrupt")
            send(fills[(seq + PONG_SHIFT) % 255 + 1])
            seq += 1
        return seq
    recv, view = sub.recv, memoryview
    for _ in range(count):
        sample = recv(timeout=30)
        if view(sample) != fills[seq % 255 + 1]:
            raise SystemExit(f"ping {seq} is corrupt")
        send(fills[(seq + PONG_SHIFT) % 255 + 1])
        seq += 1
    return seq  # the last sample goes back to the ring with the next recv


def main_small(pub, sub, fills, seq: int, warmup: int, count: int, read: str):
    """Round trips of small messages: sent from bytes, read as a copy (`recv_bytes`) or
    checked in place through a memoryview of the sample."""
    send, clock = pub.send, time.perf_counter_ns
    one_way = []
    if read == "copy":
        recv = sub.recv_bytes
        for i in range(count):
            ping, pong = fills[seq % 255 + 1], fills[(seq + PONG_SHIFT) % 255 + 1]
            start = clock()
            send(ping)
            if recv(timeout=30) != pong:
                raise SystemExit(f"pong {seq} is corrupt")
            took = clock() - start
            if i >= warmup:
                one_way.append(took / 2)
            seq += 1
        return seq, one_way
    recv, view = sub.recv, memoryview
    for i in range(count):
        ping, pong = fills[seq % 255 + 1], fills[(seq + PONG_SHIFT) % 255 + 1]
        start = clock()
        send(ping)
        sample = recv(timeout=30)
        if view(sample) != pong:
            raise SystemExit(f"pong {seq} is corrupt")
        took = clock() - start
        if i >= warmup:
            one_way.append(took / 2)
        seq += 1
    return seq, one_way


def floor(sizes, counts, warmups, pin: str, read: str):
    """The same round trips between two plain Python processes over one shared mmap, with no
    middleware: the payload work and the spinning alone, Python's own floor. The header holds the
    ping and pong sequence numbers (u64), each payload has its own area."""
    import mmap

    size = max(sizes)
    shared = mmap.mmap(-1, 64 + 2 * size)  # anonymous and shared: the child sees it after fork
    seqs = memoryview(shared)[:16].cast("Q")
    ping_area = memoryview(shared)[64:64 + size]
    pong_area = memoryview(shared)[64 + size:64 + 2 * size]
    pid = os.fork()
    if pid == 0:  # the peer: wait for ping n, check it, write pong n
        if pin != "none":
            os.sched_setaffinity(0, {int(pin.split(",")[1])})
        seq = 0
        for size, count in zip(sizes, counts):
            payload = Payload(size)
            if size <= SMALL:  # inlined, as in the ferry loop
                ping, pong, fills = ping_area[:size], pong_area[:size], payload.fills
                got = ping.tobytes if read == "copy" else (lambda: ping)
                for _ in range(count):
                    while seqs[0] != seq + 1:
                        pass
                    if got() != fills[seq % 255 + 1]:
                        os._exit(1)
                    pong[:] = fills[(seq + PONG_SHIFT) % 255 + 1]
                    seqs[1] = seq + 1
                    seq += 1
                continue
            for _ in range(count):
                while seqs[0] != seq + 1:
                    pass
                if not payload.check(ping_area[:size], seq % 255 + 1):
                    os._exit(1)
                payload.write(pong_area[:size], (seq + PONG_SHIFT) % 255 + 1)
                seqs[1] = seq + 1
                seq += 1
        os._exit(0)
    rows, seq, clock = [], 0, time.perf_counter_ns
    for size, warmup, count in zip(sizes, warmups, counts):
        payload = Payload(size)
        ping, pong = ping_area[:size], pong_area[:size]
        one_way = []
        if size <= SMALL:
            seq, one_way = floor_small(seqs, ping, pong, payload.fills, seq, warmup, count, read)
            rows.append(summary("python-mmap-spin", size, sorted(one_way)))
            continue
        for i in range(count):
            start = clock()
            payload.write(ping, seq % 255 + 1)
            seqs[0] = seq + 1
            while seqs[1] != seq + 1:
                pass
            if not payload.check(pong, (seq + PONG_SHIFT) % 255 + 1):
                raise SystemExit(f"pong {seq} is corrupt")
            took = clock() - start
            if i >= warmup:
                one_way.append(took / 2)
            seq += 1
        one_way.sort()
        rows.append(summary("python-mmap-spin", size, one_way))
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise SystemExit("the peer found a corrupt ping")
    return rows


def floor_small(seqs, ping, pong, fills, seq: int, warmup: int, count: int, read: str):
    """The floor's round trips of small messages: the loop of `main_small`, over the mmap."""
    clock, one_way = time.perf_counter_ns, []
    got = pong.tobytes if read == "copy" else (lambda: pong)
    for i in range(count):
        out, back = fills[seq % 255 + 1], fills[(seq + PONG_SHIFT) % 255 + 1]
        start = clock()
        ping[:] = out
        seqs[0] = seq + 1
        while seqs[1] != seq + 1:
            pass
        if got() != back:
            raise SystemExit(f"pong {seq} is corrupt")
        took = clock() - start
        if i >= warmup:
            one_way.append(took / 2)
        seq += 1
    return seq, one_way


def summary(transport: str, size: int, one_way) -> dict:
    return {
        "transport": transport, "size_bytes": size, "samples": len(one_way),
        "p50_ns": percentile(one_way, 0.50), "p90_ns": percentile(one_way, 0.90),
        "p99_ns": percentile(one_way, 0.99), "min_ns": one_way[0],
    }


def percentile(sorted_ns, q: float) -> float:
    return sorted_ns[min(len(sorted_ns) - 1, int(q * len(sorted_ns)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="32,1M")
    ap.add_argument("--samples", type=int, default=2000, help="recorded round trips per size")
    ap.add_argument("--warmup", type=int, default=200, help="at least; raised to fill the ring")
    ap.add_argument("--pin", default="0,1", help="CPUs of this process and of the peer, or none")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--floor", action="store_true",
                    help="also the same ping-pong over a plain shared mmap, without ferry")
    ap.add_argument("--read", choices=["copy", "view"], default="copy",
                    help="how messages up to 256 bytes are read: a copy (recv_bytes) or in place "
                         "through a memoryview of the sample")
    ap.add_argument("--peer", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.peer:
        domain, sizes, counts = args.peer
        if args.pin != "none":
            os.sched_setaffinity(0, {int(args.pin.split(",")[1])})
        peer(domain, [int(s) for s in sizes.split(",")], [int(c) for c in counts.split(",")],
             args.read)
        return

    sizes = [parse_size(s) for s in args.sizes.split(",")]
    # Enough warm-up to write the whole ring once (its default capacity: 2 x the largest
    # record, rounded up to a power of two, at least 64 KiB), as the lab does.
    ring = max(64 << 10, 1 << (2 * (max(sizes) + 16) - 1).bit_length())
    warmups = [max(args.warmup, ring // (16 + (s + 7) // 8 * 8) + 1) for s in sizes]
    counts = [w + args.samples for w in warmups]
    domain = f"pingpong{os.getpid()}"
    if args.pin != "none":
        os.sched_setaffinity(0, {int(args.pin.split(",")[0])})
    child = subprocess.Popen(
        [sys.executable, __file__, "--pin", args.pin, "--read", args.read, "--peer", domain,
         ",".join(map(str, sizes)), ",".join(map(str, counts))],
    )
    rows = []
    try:
        pub, sub = endpoints(domain, max(sizes), main=True)
        seq = 0
        clock = time.perf_counter_ns
        for size, warmup, count in zip(sizes, warmups, counts):
            payload = Payload(size)
            if size <= SMALL:
                seq, one_way = main_small(pub, sub, payload.fills, seq, warmup, count, args.read)
                rows.append(summary("python-shm-spin", size, sorted(one_way)))
                continue
            write, check, loan, recv = payload.write, payload.check, pub.loan, sub.recv
            one_way = []
            for i in range(count):
                ping, pong = seq % 255 + 1, (seq + PONG_SHIFT) % 255 + 1
                start = clock()
                out = loan(size)
                write(out, ping)
                out.send()
                with recv(timeout=30) as sample:
                    if not check(sample, pong):
                        raise SystemExit(f"pong {seq} is corrupt")
                took = clock() - start
                if i >= warmup:
                    one_way.append(took / 2)
                seq += 1
            one_way.sort()
            rows.append(summary("python-shm-spin", size, one_way))
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=5)
    if args.floor:
        rows += floor(sizes, counts, warmups, args.pin, args.read)
    for r in rows:
        print(f"{r['transport']}  {r['size_bytes']:>8} B  p50 {r['p50_ns'] / 1e3:8.2f} µs  "
              f"p90 {r['p90_ns'] / 1e3:8.2f} µs  p99 {r['p99_ns'] / 1e3:8.2f} µs")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
