#!/usr/bin/env python3
"""Reads a recording of `ferry record` with the official `mcap` Python package and checks it.

    check_mcap.py FILE --topic TOPIC --messages N [--type bytes|u32]

Every message of TOPIC: a CDR-framed payload (encapsulation header 00 01 00 00, then the element
count, then the payload), the schema ferry_msgs/msg/Bytes or U32Array in ros2msg, sequence
numbers in order, publish_time equal to log_time; the metadata records `ferry` and
`ferry.topic` (with the same message count). Exits non-zero with a message on the first
difference.
"""

import argparse
import struct
import sys

from mcap.reader import make_reader


def fail(message):
    print(f"check_mcap: {message}", file=sys.stderr)
    sys.exit(1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--messages", type=int, required=True)
    parser.add_argument("--type", choices=["bytes", "u32"], default="bytes")
    args = parser.parse_args()
    schema_name, element = {
        "bytes": ("ferry_msgs/msg/Bytes", 1),
        "u32": ("ferry_msgs/msg/U32Array", 4),
    }[args.type]

    with open(args.file, "rb") as f:
        reader = make_reader(f)
        summary = reader.get_summary()
        if summary is None:
            fail("no summary section: the file was not closed")
        count = 0
        last_sequence = {}
        for schema, channel, message in reader.iter_messages(topics=[args.topic]):
            if schema is None or schema.name != schema_name or schema.encoding != "ros2msg":
                fail(f"schema {schema!r}, expected {schema_name} in ros2msg")
            if channel.message_encoding != "cdr":
                fail(f"message encoding {channel.message_encoding!r}")
            data = message.data
            if data[:4] != b"\x00\x01\x00\x00":
                fail(f"message {count}: encapsulation header {data[:4]!r}")
            (elements,) = struct.unpack_from("<I", data, 4)
            if elements * element != len(data) - 8:
                fail(f"message {count}: {elements} elements in {len(data) - 8} bytes")
            if message.publish_time != message.log_time:
                fail(f"message {count}: publish_time differs from log_time")
            previous = last_sequence.get(channel.id)
            if previous is not None and message.sequence != (previous + 1) % 2**32:
                fail(f"message {count}: sequence {message.sequence} after {previous}")
            last_sequence[channel.id] = message.sequence
            count += 1
        if count != args.messages:
            fail(f"{count} messages on {args.topic}, expected {args.messages}")

        metadata = {}
        for record in reader.iter_metadata():
            metadata.setdefault(record.name, []).append(record.metadata)
        if "ferry" not in metadata:
            fail(f"no `ferry` metadata record (found {sorted(metadata)})")
        topics = [m for m in metadata.get("ferry.topic", []) if m.get("topic") == args.topic]
        if len(topics) != 1 or int(topics[0]["messages"]) != count:
            fail(f"ferry.topic metadata for {args.topic}: {topics}")
        stats = summary.statistics
        print(
            f"check_mcap: {args.file}: {count} messages on {args.topic} "
            f"({stats.message_count if stats else '?'} in the file), "
            f"{len(summary.chunk_indexes)} chunks, metadata {sorted(metadata)}: ok"
        )


if __name__ == "__main__":
    main()
