#!/usr/bin/env python3
"""Writes, lies about and lists safetensors files for tests/cli/
safetensors.sh, with nothing but the standard library.

    st_tool.py write OUT SPEC...      SPEC is NAME:DTYPE:SHAPE:FILL, SHAPE
                                      like 8x4 (or - for a scalar), FILL a
                                      number or "ramp" (element i is
                                      ((37 i) mod 101 - 50) / 64)
    st_tool.py lie IN OUT HOW         HOW: oob, size, dtype, overlap, hole,
                                      truncate, dup (each about the last
                                      tensor by offsets, dup about the
                                      first two)
    st_tool.py tensors FILE           name dtype shape sha256 of its bytes,
                                      a line each, sorted by name
    st_tool.py meta FILE              key=value, a line each, sorted
"""
import hashlib
import json
import struct
import sys

SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4,
         "U8": 1}
PACK = {"F64": "<d", "F32": "<f", "I64": "<q", "I32": "<i", "U8": "<B"}


def read(path):
    buf = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", buf, 0)
    header = json.loads(buf[8:8 + n].decode("utf-8"))
    return header, buf[8 + n:]


def write(path, header, data):
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-(8 + len(text)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def cmd_write(out, specs):
    header, data = {}, b""
    for spec in specs:
        name, dtype, shape, fill = spec.rsplit(":", 3)
        dims = [] if shape == "-" else [int(d) for d in shape.split("x")]
        numel = 1
        for d in dims:
            numel *= d
        values = [((37 * i) % 101 - 50) / 64 if fill == "ramp" else float(fill)
                  for i in range(numel)]
        if dtype in PACK:
            blob = b"".join(struct.pack(PACK[dtype], v if dtype[0] == "F"
                                        else int(v)) for v in values)
        else:  # F16, BF16: the bytes only matter for their count
            blob = b"\0" * (numel * SIZES[dtype])
        header[name] = {"dtype": dtype, "shape": dims,
                        "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    write(out, header, data)


def cmd_lie(src, dst, how):
    header, data = read(src)
    names = sorted((k for k in header if k != "__metadata__"),
                   key=lambda k: header[k]["data_offsets"])
    last = header[names[-1]]
    b, e = last["data_offsets"]
    if how == "oob":  # the last tensor past the end of the buffer
        last["data_offsets"] = [b + 8, e + 8]
    elif how == "size":  # a shape that is not the bytes it has
        last["shape"] = last["shape"][:-1] + [last["shape"][-1] + 1]
    elif how == "dtype":
        last["dtype"] = "F31"
    elif how == "overlap":  # the last tensor starts 4 bytes early
        last["data_offsets"] = [b - 4, e - 4]
        data = data[:-4]
    elif how == "hole":  # 4 unused bytes before the last tensor
        last["data_offsets"] = [b + 4, e + 4]
        data = data[:b] + b"\0\0\0\0" + data[b:]
    elif how == "truncate":  # the header stays, the data is cut
        data = data[:-4]
    elif how == "dup":  # json.dumps cannot write a key twice: by hand
        text = json.dumps(header, separators=(",", ":"))
        text = text.replace('"%s":' % names[1], '"%s":' % names[0], 1)
        raw = text.encode("utf-8")
        with open(dst, "wb") as f:
            f.write(struct.pack("<Q", len(raw)) + raw + data)
        return
    else:
        sys.exit("unknown lie " + how)
    write(dst, header, data)


def cmd_tensors(path):
    header, data = read(path)
    for name in sorted(k for k in header if k != "__metadata__"):
        t = header[name]
        b, e = t["data_offsets"]
        print(name, t["dtype"], "x".join(str(d) for d in t["shape"]) or "-",
              hashlib.sha256(data[b:e]).hexdigest())


def cmd_meta(path):
    header, _ = read(path)
    for k, v in sorted(header.get("__metadata__", {}).items()):
        print("%s=%s" % (k, v))


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "write":
        cmd_write(args[0], args[1:])
    elif cmd == "lie":
        cmd_lie(*args)
    elif cmd == "tensors":
        cmd_tensors(args[0])
    elif cmd == "meta":
        cmd_meta(args[0])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
