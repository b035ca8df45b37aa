#!/usr/bin/env python3
"""Writes reading.pb: the FileDescriptorSet of reading.proto, built field by field with the
Python protobuf package (no protoc needed). Run it again after changing reading.proto."""

import pathlib

from google.protobuf import descriptor_pb2 as d

F = d.FieldDescriptorProto


def field(name, number, kind, label=F.LABEL_OPTIONAL, type_name=None, json_name=None):
    f = F(name=name, number=number, type=kind, label=label)
    if type_name:
        f.type_name = type_name
    f.json_name = json_name or "".join(
        p if i == 0 else p.capitalize() for i, p in enumerate(name.split("_"))
    )
    return f


proto = d.FileDescriptorProto(name="reading.proto", package="ferry.test", syntax="proto3")
inner = proto.message_type.add(name="Inner")
inner.field.extend([
    field("label", 1, F.TYPE_STRING),
    field("count", 2, F.TYPE_INT32),
    field("next", 3, F.TYPE_MESSAGE, type_name=".ferry.test.Inner"),
])
reading = proto.message_type.add(name="Reading")
kind = reading.enum_type.add(name="Kind")
for i, n in enumerate(["KIND_UNKNOWN", "KIND_SLOW", "KIND_FAST"]):
    kind.value.add(name=n, number=i)
entry = reading.nested_type.add(name="TagsEntry")
entry.options.map_entry = True
entry.field.extend([field("key", 1, F.TYPE_STRING), field("value", 2, F.TYPE_INT32)])
reading.field.extend([
    field("frame_id", 1, F.TYPE_STRING),
    field("stamp_ns", 2, F.TYPE_INT64),
    field("x", 3, F.TYPE_DOUBLE),
    field("values", 4, F.TYPE_FLOAT, label=F.LABEL_REPEATED),
    field("kind", 5, F.TYPE_ENUM, type_name=".ferry.test.Reading.Kind"),
    field("inner", 6, F.TYPE_MESSAGE, type_name=".ferry.test.Inner"),
    field("tags", 7, F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
          type_name=".ferry.test.Reading.TagsEntry"),
    field("raw", 8, F.TYPE_BYTES),
])
out = pathlib.Path(__file__).with_name("reading.pb")
out.write_bytes(d.FileDescriptorSet(file=[proto]).SerializeToString())
print(f"wrote {out}")
