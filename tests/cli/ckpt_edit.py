#!/usr/bin/env python3
"""Edits a loopkit checkpoint (format 2, or 1) and recomputes its CRC, as an
attacker or a careless tool would: the edit then reaches the checks behind
the checksum. Used by tests/cli/resume.sh.

    ckpt_edit.py IN OUT EDIT...
    ckpt_edit.py IN --dump


EDIT is FIELD=VALUE, where FIELD is one of progress.epoch, progress.batch,
progress.global_step, progress.accum, rng (VALUE 0: all four words zero),
loop.metrics_rows, loop.flags, loop.epoch_losses; or NAME[INDEX]=VALUE for
element INDEX of tensor NAME, written in the tensor's dtype. --dump prints every tensor, state included,
one element a line as `loopkit dump` prints parameters (NAME[INDEX] VALUE):
what tests/cli/sequential.sh compares batch norm's running statistics by."""
import struct
import sys
import zlib

PROGRESS = ["progress.epoch", "progress.batch", "progress.global_step",
            "progress.accum"]
LOOP = {"loop.metrics_rows": 0, "loop.flags": 1, "loop.epoch_losses": 3}
DTYPES = {1: ("<f", 4), 2: ("<d", 8), 3: ("<i", 4)}


def tensors(buf, pos):
    """(name, dtype, data offset, numel) of every tensor record."""
    (count,) = struct.unpack_from("<Q", buf, pos)
    pos += 8
    out = []
    for _ in range(count):
        _kind, dtype, ndim, name_len = struct.unpack_from("<IIII", buf, pos)
        pos += 16
        shape = struct.unpack_from("<%dQ" % ndim, buf, pos)
        pos += 8 * ndim
        name = bytes(buf[pos:pos + name_len]).decode()
        pos += name_len
        numel = 1
        for d in shape:
            numel *= d
        out.append((name, dtype, pos, numel))
        pos += numel * DTYPES[dtype][1]
    return out


def main():
    src, dst, edits = sys.argv[1], sys.argv[2], sys.argv[3:]
    buf = bytearray(open(src, "rb").read())
    assert buf[:8] == b"LOOPKIT\0", "not a loopkit checkpoint"
    (version,) = struct.unpack_from("<I", buf, 8)
    assert version in (1, 2), "format %d, this edits 1 and 2" % version
    loop = 20 + 64
    pos = loop
    if version == 2:
        (n_latest,) = struct.unpack_from("<Q", buf, loop + 40)
        pos = loop + 48
        for _ in range(n_latest):
            (n,) = struct.unpack_from("<I", buf, pos)
            pos += 4 + n + 8
    records = tensors(buf, pos)
    if dst == "--dump":
        for name, dtype, at, numel in records:
            fmt, size = DTYPES[dtype]
            for i in range(numel):
                (v,) = struct.unpack_from(fmt, buf, at + i * size)
                print("%s[%d] %s" % (name, i, v if dtype == 3 else
                                     "%.9g" % v if dtype == 1 else "%.17g" % v))
        return
    for edit in edits:
        field, value = edit.split("=", 1)
        if field in PROGRESS:
            struct.pack_into("<Q", buf, 20 + 8 * PROGRESS.index(field),
                             int(value))
        elif field == "rng":
            for i in range(4):
                struct.pack_into("<Q", buf, 52 + 8 * i, int(value))
        elif field == "loop.metrics_rows" and version == 1:
            # format 1 kept it as the host's state tensor
            _, _, at, _ = [r for r in records if r[0] == "host.metrics_rows"][0]
            struct.pack_into("<d", buf, at, float(value))
        elif field in LOOP:
            assert version == 2, "format 1 has no %s" % field
            struct.pack_into("<Q", buf, loop + 8 * LOOP[field], int(value))
        elif field.endswith("]") and "[" in field:
            name, index = field[:-1].split("[")
            index = int(index)
            match = [r for r in records if r[0] == name]
            assert match, "no tensor %s; there are: %s" % (
                name, ", ".join(r[0] for r in records))
            _, dtype, at, numel = match[0]
            assert index < numel, "%s has %d elements" % (name, numel)
            fmt, size = DTYPES[dtype]
            struct.pack_into(fmt, buf, at + index * size,
                             int(value) if dtype == 3 else float(value))
        else:
            sys.exit("unknown field %s" % field)
    struct.pack_into("<I", buf, len(buf) - 4,
                     zlib.crc32(bytes(buf[:-4])) & 0xffffffff)
    open(dst, "wb").write(buf)


main()
