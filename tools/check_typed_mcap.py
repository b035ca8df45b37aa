#!/usr/bin/env python3
"""Reads a recording of a typed ferry topic with the official `mcap` Python package and its
decoders (`mcap-ros2-support` for ROS 2 CDR, `mcap-protobuf-support` for protobuf), and checks
that every message's fields equal what was published.

    check_typed_mcap.py FILE --topic TOPIC --messages N --schema-name NAME --expect JSON
                        [--encoding cdr|protobuf]

JSON is the message as `ferry pub --json` was given it; every message of TOPIC must decode to
it, field by field (a field it leaves out is not compared), with the channel's schema named NAME
in `ros2msg` with message encoding `cdr`, or in `protobuf` with `protobuf`. Bytes compare as
their base64 text, as the JSON gives them. Exits non-zero with the first difference.
"""

import argparse
import base64
import json
import math
import sys

from mcap.reader import make_reader


def fail(message):
    print(f"check_typed_mcap: {message}", file=sys.stderr)
    sys.exit(1)


def compare(path, expected, got):
    """Checks `got` (a decoded ROS 2 message, or a value in it) against `expected`."""
    if isinstance(expected, dict) and hasattr(got, "keys"):
        # A protobuf map.
        if set(got.keys()) != set(expected.keys()):
            fail(f"{path}: keys {sorted(got.keys())}, published {sorted(expected.keys())}")
        for key, want in expected.items():
            compare(f"{path}[{key!r}]", want, got[key])
    elif isinstance(expected, dict):
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
    elif isinstance(got, bytes):
        if base64.b64encode(got).decode() != expected:
            fail(f"{path}: {got!r}, published {expected!r} (base64)")
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
    parser.add_argument("--encoding", choices=["cdr", "protobuf"], default="cdr")
    args = parser.parse_args()
    if args.encoding == "cdr":
        from mcap_ros2.decoder import DecoderFactory

        schema_encoding = "ros2msg"
    else:
        from mcap_protobuf.decoder import DecoderFactory

        schema_encoding = "protobuf"
    expected = json.loads(args.expect)

    count = 0
    with open(args.file, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        for schema, channel, _message, decoded in reader.iter_decoded_messages(
            topics=[args.topic]
        ):
            if schema is None or schema.name != args.schema_name:
                fail(f"schema {schema and schema.name!r}, expected {args.schema_name!r}")
            if schema.encoding != schema_encoding or channel.message_encoding != args.encoding:
                fail(
                    f"encodings {schema.encoding}/{channel.message_encoding}, "
                    f"not {schema_encoding}/{args.encoding}"
                )
            compare(f"message {count}", expected, decoded)
            count += 1
    if count != args.messages:
        fail(f"{count} messages on {args.topic}, expected {args.messages}")
    print(f"check_typed_mcap: {count} messages of {args.schema_name}, every field as published")


if __name__ == "__main__":
    main()
