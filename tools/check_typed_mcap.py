#!/usr/bin/env python3
"""Reads a recording of a typed ferry topic with the official `mcap` Python package and its ROS 2
decoder (`mcap-ros2-support`), and checks that every message's fields equal what was published.

    check_typed_mcap.py FILE --topic TOPIC --messages N --schema-name NAME --expect JSON

JSON is the message as `ferry pub --json` was given it (a field it leaves out is zero, false or
empty, as ferry encodes it); every message of TOPIC must decode to it, field by field, with the
channel's schema named NAME in `ros2msg` and its message encoding `cdr`. Exits non-zero with the
first difference.
"""

import argparse
import json
import math
import sys

from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory


def fail(message):
    print(f"check_typed_mcap: {message}", file=sys.stderr)
    sys.exit(1)


def compare(path, expected, got):
    """Checks `got` (a decoded ROS 2 message, or a value in it) against `expected`."""
    if isinstance(expected, dict):
        for key, want in expected.items():
            if not hasattr(got, key):
                fail(f"{path}.{key}: the decoded message has no such field")
            compare(f"{path}.{key}", want, getattr(got, key))
    elif isinstance(expected, list):
        items = list(got)
        if len(items) != len(expected):
            fail(f"{path}: {len(items)} elements, published {len(expected)}")
        for i, (want, have) in enumerate(zip(expected, items)):
            compare(f"{path}[{i}]", want, have)
    elif isinstance(expected, float) or isinstance(got, float):
        if not math.isclose(float(got), float(expected), rel_tol=1e-6, abs_tol=1e-9):
            fail(f"{path}: {got!r}, published {expected!r}")
    elif got != expected:
        fail(f"{path}: {got!r}, published {expected!r}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--messages", type=int, required=True)
    parser.add_argument("--schema-name", required=True)
    parser.add_argument("--expect", required=True)
    args = parser.parse_args()
    expected = json.loads(args.expect)

    count = 0
    with open(args.file, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        for schema, channel, _message, decoded in reader.iter_decoded_messages(
            topics=[args.topic]
        ):
            if schema is None or schema.name != args.schema_name:
                fail(f"schema {schema and schema.name!r}, expected {args.schema_name!r}")
            if schema.encoding != "ros2msg" or channel.message_encoding != "cdr":
                fail(f"encodings {schema.encoding}/{channel.message_encoding}, not ros2msg/cdr")
            compare(f"message {count}", expected, decoded)
            count += 1
    if count != args.messages:
        fail(f"{count} messages on {args.topic}, expected {args.messages}")
    print(f"check_typed_mcap: {count} messages of {args.schema_name}, every field as published")


if __name__ == "__main__":
    main()
