#!/usr/bin/env python3
"""Reads a TensorBoard event file back, trusting nothing in it, for
tests/cli/tensorboard.sh. It needs python3 alone: TFRecord framing and
protocol buffers' wire format are decoded here by hand, with the field
numbers of tensorboard's public protos (compat/proto/event.proto,
summary.proto, tensor.proto, tensor_shape.proto, types.proto):

  Event:        wall_time 1 (double), step 2 (int64), file_version 3
                (string), summary 5 (Summary)
  Summary:      value 1 (repeated Value)
  Value:        tag 1 (string), simple_value 2 (float), tensor 8
                (TensorProto), metadata 9 (SummaryMetadata)
  SummaryMetadata: plugin_data 1 (PluginData: plugin_name 1, content 2)
  TensorProto:  dtype 1 (enum; DT_STRING = 7), tensor_shape 2
                (TensorShapeProto: dim 2, Dim: size 1), string_val 8

Every record's length and both masked CRC-32Cs are checked (CRC-32C is
computed here bit by bit, from its definition), the file must end on a
record's end, and every message must decode exactly to its end.

  tfevents.py FILE                 one line per event (see show())
  tfevents.py FILE --text N        the Nth text summary's string, raw
  tfevents.py FILE --rows CSV      checks the scalar events against
                                   metrics.csv: event i is row i, same
                                   step, one scalar per set cell, tagged
                                   with its column, equal to the cell
                                   rounded to float32
  tfevents.py FILE --protobuf      decodes every event again with the
                                   protobuf library (python3-protobuf),
                                   from descriptors built here; exit 77
                                   when it is not installed
Exit status 0 when all is well, 1 with a message otherwise."""
import math
import struct
import sys


class Bad(Exception):
    pass


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283


def records(blob):
    at = 0
    while at < len(blob):
        if len(blob) - at < 12:
            raise Bad("record at byte %d: %d bytes left, a header is 12"
                      % (at, len(blob) - at))
        head = blob[at:at + 8]
        (length,) = struct.unpack("<Q", head)
        (hcrc,) = struct.unpack("<I", blob[at + 8:at + 12])
        if hcrc != masked(head):
            raise Bad("record at byte %d: length CRC %08x, expected %08x"
                      % (at, hcrc, masked(head)))
        end = at + 12 + length
        if end + 4 > len(blob):
            raise Bad("record at byte %d: length %d runs past the end"
                      % (at, length))
        data = blob[at + 12:end]
        (dcrc,) = struct.unpack("<I", blob[end:end + 4])
        if dcrc != masked(data):
            raise Bad("record at byte %d: data CRC %08x, expected %08x"
                      % (at, dcrc, masked(data)))
        yield data
        at = end + 4


def varint(buf, at):
    shift = value = 0
    while True:
        if at >= len(buf):
            raise Bad("varint runs past the end")
        b = buf[at]
        at += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise Bad("varint longer than 10 bytes")


def fields(buf):
    """(number, wire type, value) of every field of a message."""
    at = 0
    while at < len(buf):
        key, at = varint(buf, at)
        number, wt = key >> 3, key & 7
        if wt == 0:
            value, at = varint(buf, at)
        elif wt == 1:
            if at + 8 > len(buf):
                raise Bad("fixed64 runs past the end")
            value, at = buf[at:at + 8], at + 8
        elif wt == 2:
            n, at = varint(buf, at)
            if at + n > len(buf):
                raise Bad("field %d: %d bytes run past the end" % (number, n))
            value, at = buf[at:at + n], at + n
        elif wt == 5:
            if at + 4 > len(buf):
                raise Bad("fixed32 runs past the end")
            value, at = buf[at:at + 4], at + 4
        else:
            raise Bad("field %d: wire type %d" % (number, wt))
        yield number, wt, value


def one_of(buf, expect, what):
    """The fields of BUF as a dict number -> [values]; EXPECT maps every
    allowed number to its wire type."""
    out = {}
    for number, wt, value in fields(buf):
        if number not in expect:
            raise Bad("%s: unexpected field %d" % (what, number))
        if wt != expect[number]:
            raise Bad("%s: field %d has wire type %d, expected %d"
                      % (what, number, wt, expect[number]))
        out.setdefault(number, []).append(value)
    return out


def single(d, number, what):
    v = d.get(number, [])
    if len(v) > 1:
        raise Bad("%s: field %d given %d times" % (what, number, len(v)))
    return v[0] if v else None


def value_of(buf):
    v = one_of(buf, {1: 2, 2: 5, 8: 2, 9: 2}, "Summary.Value")
    tag = single(v, 1, "Value.tag")
    if tag is None:
        raise Bad("a Summary.Value without a tag")
    tag = tag.decode("utf-8")
    simple = single(v, 2, "Value.simple_value")
    tensor = single(v, 8, "Value.tensor")
    if (simple is None) == (tensor is None):
        raise Bad("value %s: simple_value or tensor, exactly one" % tag)
    if simple is not None:
        if 9 in v:
            raise Bad("scalar %s has metadata" % tag)
        return ("scalar", tag, struct.unpack("<f", simple)[0])
    meta = one_of(single(v, 9, "Value.metadata") or b"", {1: 2},
                  "SummaryMetadata")
    plugin = one_of(single(meta, 1, "plugin_data") or b"", {1: 2, 2: 2},
                    "PluginData")
    name = (single(plugin, 1, "plugin_name") or b"").decode()
    if name != "text" or single(plugin, 2, "content") not in (None, b""):
        raise Bad("tensor value %s: plugin %r, expected text" % (tag, name))
    t = one_of(tensor, {1: 0, 2: 2, 8: 2}, "TensorProto")
    if single(t, 1, "dtype") != 7:
        raise Bad("text %s: dtype %r, expected DT_STRING (7)"
                  % (tag, single(t, 1, "dtype")))
    shape = one_of(single(t, 2, "tensor_shape") or b"", {2: 2},
                   "TensorShapeProto")
    dims = [single(one_of(d, {1: 0}, "Dim"), 1, "Dim.size")
            for d in shape.get(2, [])]
    strings = t.get(8, [])
    if dims != [1] or len(strings) != 1:
        raise Bad("text %s: shape %r with %d strings, expected [1] and 1"
                  % (tag, dims, len(strings)))
    return ("text", tag, strings[0].decode("utf-8"))


def events(path):
    with open(path, "rb") as f:
        blob = f.read()
    out = []
    last_time = -math.inf
    for i, data in enumerate(records(blob)):
        e = one_of(data, {1: 1, 2: 0, 3: 2, 5: 2}, "Event %d" % i)
        wall = single(e, 1, "wall_time")
        if wall is None:
            raise Bad("event %d has no wall_time" % i)
        wall = struct.unpack("<d", wall)[0]
        if not wall >= last_time or not wall > 1e9:
            raise Bad("event %d: wall_time %r after %r" % (i, wall, last_time))
        last_time = wall
        step = single(e, 2, "step") or 0
        if step >= 1 << 63:
            raise Bad("event %d: negative step" % i)
        version = single(e, 3, "file_version")
        summary = single(e, 5, "summary")
        if (version is None) == (summary is None):
            raise Bad("event %d: file_version or summary, exactly one" % i)
        if (version is not None) != (i == 0):
            raise Bad("event %d: the file version is the first event's, "
                      "and its only" % i)
        if version is not None:
            out.append(("file_version", step, version.decode()))
            continue
        s = one_of(summary, {1: 2}, "Summary")
        values = [value_of(v) for v in s.get(1, [])]
        if not values:
            raise Bad("event %d: an empty summary" % i)
        out.append(("summary", step, values))
    if not out:
        raise Bad("no events")
    if out[0][2] != "brain.Event:2":
        raise Bad("file_version %r, expected brain.Event:2" % (out[0][2],))
    return out


def show(evs):
    for kind, step, what in evs:
        if kind == "file_version":
            print("file_version %s" % what)
            continue
        for v in what:
            if v[0] == "scalar":
                print("scalar %d %s %r" % (step, v[1], v[2]))
            else:
                print("text %d %s %d" % (step, v[1], len(v[2])))


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def same(a, b):
    return a == b or (math.isnan(a) and math.isnan(b))


def against(evs, csv):
    with open(csv) as f:
        lines = f.read().splitlines()
    header = lines[0].split(",")
    rows = [line.split(",") for line in lines[1:]]
    scalars = [(step, what) for kind, step, what in evs
               if kind == "summary" and what[0][0] == "scalar"]
    for step, what in scalars:
        if any(v[0] != "scalar" for v in what):
            raise Bad("step %d: scalars and text in one event" % step)
    if len(scalars) != len(rows):
        raise Bad("%d scalar events, %d rows in %s"
                  % (len(scalars), len(rows), csv))
    for i, ((step, what), row) in enumerate(zip(scalars, rows)):
        if step != int(row[0]):
            raise Bad("event of row %d: step %d, the row's is %s"
                      % (i + 1, step, row[0]))
        want = [(header[c], f32(float(row[c])))
                for c in range(2, len(header)) if c < len(row) and row[c]]
        got = [(v[1], v[2]) for v in what]
        if len(got) != len(want) or not all(
                g[0] == w[0] and same(g[1], w[1]) for g, w in zip(got, want)):
            raise Bad("row %d (step %d): events hold %r, metrics.csv %r"
                      % (i + 1, step, got, want))
    print("%d rows, %d scalars" % (len(rows),
                                   sum(len(w) for _, w in scalars)))


def with_protobuf(path):
    """The same file through the protobuf library, from descriptors made
    here with the public field numbers: an independent decoder."""
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool
        from google.protobuf import message_factory
    except ImportError:
        print("python3-protobuf is not installed")
        sys.exit(77)
    F = descriptor_pb2.FieldDescriptorProto
    fd = descriptor_pb2.FileDescriptorProto(name="ev.proto", package="t",
                                            syntax="proto3")

    def msg(name, *fs, parent=None):
        m = (parent.nested_type if parent else fd.message_type).add(name=name)
        for fname, number, ftype, label, tname in fs:
            f = m.field.add(name=fname, number=number, type=ftype,
                            label=label)
            if tname:
                f.type_name = tname
        return m

    O, R = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    msg("Dim", ("size", 1, F.TYPE_INT64, O, None))
    msg("Shape", ("dim", 2, F.TYPE_MESSAGE, R, ".t.Dim"))
    msg("Tensor", ("dtype", 1, F.TYPE_INT32, O, None),
        ("tensor_shape", 2, F.TYPE_MESSAGE, O, ".t.Shape"),
        ("string_val", 8, F.TYPE_BYTES, R, None))
    msg("PluginData", ("plugin_name", 1, F.TYPE_STRING, O, None),
        ("content", 2, F.TYPE_BYTES, O, None))
    msg("Meta", ("plugin_data", 1, F.TYPE_MESSAGE, O, ".t.PluginData"))
    msg("Value", ("tag", 1, F.TYPE_STRING, O, None),
        ("simple_value", 2, F.TYPE_FLOAT, O, None),
        ("tensor", 8, F.TYPE_MESSAGE, O, ".t.Tensor"),
        ("metadata", 9, F.TYPE_MESSAGE, O, ".t.Meta"))
    msg("Summary", ("value", 1, F.TYPE_MESSAGE, R, ".t.Value"))
    msg("Event", ("wall_time", 1, F.TYPE_DOUBLE, O, None),
        ("step", 2, F.TYPE_INT64, O, None),
        ("file_version", 3, F.TYPE_STRING, O, None),
        ("summary", 5, F.TYPE_MESSAGE, O, ".t.Summary"))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    desc = pool.FindMessageTypeByName("t.Event")
    if hasattr(message_factory, "GetMessageClass"):
        Event = message_factory.GetMessageClass(desc)
    else:
        Event = message_factory.MessageFactory(pool).GetPrototype(desc)
    with open(path, "rb") as f:
        blob = f.read()
    mine = events(path)
    n = 0
    for i, data in enumerate(records(blob)):
        e = Event()
        e.ParseFromString(data)
        if e.UnknownFields() if hasattr(e, "UnknownFields") else False:
            raise Bad("event %d: fields protobuf does not know" % i)
        kind, step, what = mine[i]
        if e.step != step:
            raise Bad("event %d: protobuf reads step %d, we %d"
                      % (i, e.step, step))
        if kind == "file_version":
            if e.file_version != what:
                raise Bad("event %d: file_version differs" % i)
            continue
        for v, w in zip(e.summary.value, what):
            if v.tag != w[1]:
                raise Bad("event %d: tag %r, we %r" % (i, v.tag, w[1]))
            if w[0] == "scalar" and not same(v.simple_value, w[2]):
                raise Bad("event %d: %s = %r, we %r"
                          % (i, v.tag, v.simple_value, w[2]))
            if w[0] == "text" and (
                    v.tensor.dtype != 7 or
                    v.metadata.plugin_data.plugin_name != "text" or
                    v.tensor.string_val[0].decode() != w[2]):
                raise Bad("event %d: text %s differs" % (i, v.tag))
        if len(e.summary.value) != len(what):
            raise Bad("event %d: %d values, we %d"
                      % (i, len(e.summary.value), len(what)))
        n += 1
    print("protobuf agrees on %d events" % (n + 1))


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    path = argv[1]
    try:
        evs = events(path)
        if len(argv) == 2:
            show(evs)
        elif argv[2] == "--text":
            texts = [v[2] for kind, _, what in evs if kind == "summary"
                     for v in what if v[0] == "text"]
            sys.stdout.write(texts[int(argv[3])])
        elif argv[2] == "--rows":
            against(evs, argv[3])
        elif argv[2] == "--protobuf":
            with_protobuf(path)
        else:
            sys.exit(__doc__)
    except (Bad, OSError, UnicodeDecodeError, IndexError, ValueError) as e:
        print("%s: %s" % (path, e))
        sys.exit(1)


if __name__ == "__main__":
    main(sys.argv)
