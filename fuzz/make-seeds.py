#!/usr/bin/env python3
"""Writes the hand-made seeds of fuzz/corpus/ (run from the top directory:
python3 fuzz/make-seeds.py). The committed corpus is these seeds plus what
`fuzz_TARGET -merge=1` kept from longer runs; see fuzz/README.md.

Input layouts are those the targets document at their top."""
import gzip
import os
import struct
import zlib

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def out(target, name, data):
    d = os.path.join(TOP, "fuzz", "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


# Options of fuzz_data.h: batch_size (8), limit (4), val_split (1), seed (1),
# flags (1).
def data_opts(bs, limit=0, val=0, seed=0, flags=0):
    return struct.pack("<qIBBB", bs, limit, val, seed, flags)


# ---- config ----------------------------------------------------------------
out("config", "basic",
    b"# a comment\n[loop]\nmax_epochs = 2 ; comment\nseed=7\n\n"
    b"[plugins]\nstep = rosenbrock\noptimizer = sgd\n"
    b"[sgd]\nlr = 0.01\nbetas = 0.9,0.999\n")
out("config", "bom-crlf", b"\xef\xbb\xbf[a]\r\nk = v\r\n[ b ]\r\n  x-1 = a#b\r\n")
out("config", "sets",
    b"[loop]\nseed = 1\n\0loop.seed=2\0plugins.step = x\0a.b=c d\0bad\0.k=v")
out("config", "errors", b"[loop]\nk = 1\nk = 2\n")
out("config", "empty-section", b"[only]\n[x]\ny = \t1\n")

# ---- checkpoint -------------------------------------------------------------
def ckpt_body(tensors, progress=(1, 2, 3, 0), rng=(5, 6, 7, 8)):
    b = struct.pack("<4Q", *progress) + struct.pack("<4Q", *rng)
    b += struct.pack("<Q", len(tensors))
    for kind, dtype, shape, name, data in tensors:
        b += struct.pack("<4I", kind, dtype, len(shape), len(name))
        b += b"".join(struct.pack("<Q", s) for s in shape) + name + data
    return b


def ckpt_file(body):
    length = 20 + len(body) + 4
    head = b"LOOPKIT\0" + struct.pack("<IQ", 1, length)
    crc = zlib.crc32(head + body) & 0xFFFFFFFF
    return head + body + struct.pack("<I", crc)


F32, F64, I32 = 1, 2, 3  # lk_dtype
with open(os.path.join(TOP, "include", "loopkit", "tensor.h")) as f:
    src = f.read()
assert "LK_F32" in src
mixed = ckpt_body([
    (1, F64, [2], b"x", struct.pack("<2d", -1.2, 1.0)),
    (1, F32, [2, 2], b"w", struct.pack("<4f", 1, 2, 3, 4)),
    (1, I32, [], b"count", struct.pack("<i", 3)),
    (2, F64, [2], b"sgd.momentum.x", struct.pack("<2d", 0.5, -0.5)),
    (2, F32, [0], b"empty", b""),
])
out("checkpoint", "mixed-file", b"\0" + ckpt_file(mixed))
out("checkpoint", "mixed-body", b"\1" + mixed)
out("checkpoint", "empty-body", b"\1" + ckpt_body([]))
# The train-* seeds are real files, made (with the plugins built) by
#   loopkit train examples/adam.ini --quiet --out /tmp/ck/a \
#     --set loop.max_steps=2
#   loopkit train examples/rosenbrock.ini --quiet --out /tmp/ck/b \
#     --set loop.max_steps=2 --set rosenbrock.dtype=f32 --set rosenbrock.n=3
for name in ("a", "b"):
    p = "/tmp/ck/%s/checkpoints/last.ckpt" % name
    if os.path.exists(p):  # from `loopkit train` (see README)
        with open(p, "rb") as f:
            data = f.read()
        out("checkpoint", "train-%s" % name, b"\0" + data)
        out("checkpoint", "train-%s-body" % name, b"\1" + data[20:-4])


# ---- idx -------------------------------------------------------------------
def idx_images(n, r, c):
    return struct.pack(">4I", 0x803, n, r, c) + bytes(
        (i * 37 + 11) & 0xFF for i in range(n * r * c))


def idx_labels(n):
    return struct.pack(">2I", 0x801, n) + bytes(i % 10 for i in range(n))


def idx_input(files, opts):
    head = opts + struct.pack("<3H", *(len(f) for f in files[:3]))
    return head + b"".join(files)


plain = [idx_images(5, 2, 3), idx_labels(5), idx_images(2, 2, 3), idx_labels(2)]
out("idx", "plain", idx_input(plain, data_opts(2, flags=1 | 4)))  # scale
out("idx", "standard-val",
    idx_input(plain, data_opts(3, limit=4, val=64, seed=3, flags=2 | 8)))
gz = [gzip.compress(f, mtime=0) for f in plain]
out("idx", "gzip", idx_input(gz, data_opts(4, flags=1)))

# ---- csv -------------------------------------------------------------------
def csv_input(train, test=None, opts=None, delim=b",", label=-1):
    flags_test = 64 if test is not None else 0
    o = bytearray(opts)
    o[14] |= flags_test
    return (bytes(o) + delim + struct.pack("<bH", label, len(train)) + train +
            (test or b""))


out("csv", "header-int",
    csv_input(b"a,b,label\n1,2,0\n3.5,-4,1\n\n5e3, 6 ,2\r\n7,8,1\n",
              b"a,b,label\n1,1,1\n", data_opts(2, flags=1 | 4 | 8 | 16)))
out("csv", "float-standard",
    csv_input(b"1;2;0.5\n3;4;1.5\n5;6;2.5\n", None,
              data_opts(1, val=100, flags=8 * 0 | 32 | 2), delim=b";",
              label=0))
out("csv", "tab-errors",
    csv_input(b"x\ty\n1\t\n", None, data_opts(1, flags=4 | 8), delim=b"\t"))
# Standard normalization with a training std of 7e-46 takes the test
# file's 3e38 beyond f32: refused (tests/test_data.c, normalize_overflow).
out("csv", "normalize-inf",
    csv_input(b"0,0\n1e-45,0\n", b"3e38,0\n", data_opts(1, flags=8 | 32)))

# ---- safetensors -------------------------------------------------------------
# Mode byte (fuzz_safetensors.c): bit 0 set, the JSON header up to a NUL and
# then the data buffer (the target adds the length); clear, a whole file;
# bit 1, read through a mapped file.
def st_file(header, data, pad=True):
    text = header.encode("utf-8")
    if pad:
        text += b" " * (-(8 + len(text)) % 8)
    return struct.pack("<Q", len(text)) + text + data


def st_wrapped(header, data, mapped=False):
    return bytes([1 | (2 if mapped else 0)]) + header.encode("utf-8") + b"\0" + data


two = ('{"__metadata__":{"format":"pt","step":"3"},'
       '"layer0.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},'
       '"layer0.bias":{"dtype":"F64","shape":[2],"data_offsets":[16,32]}}')
two_data = struct.pack("<4f2d", 1, -2, 0.5, 3, 0.25, -1e300)
out("safetensors", "file", b"\0" + st_file(two, two_data))
out("safetensors", "file-mapped", b"\2" + st_file(two, two_data))
out("safetensors", "wrapped", st_wrapped(two, two_data))
out("safetensors", "every-dtype", st_wrapped(
    '{"a":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]},'
    '"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},'
    '"c":{"dtype":"I16","shape":[1],"data_offsets":[2,4]},'
    '"d":{"dtype":"BF16","shape":[1],"data_offsets":[4,6]},'
    '"e":{"dtype":"F16","shape":[],"data_offsets":[6,8]},'
    '"f":{"dtype":"I32","shape":[1],"data_offsets":[8,12]},'
    '"g":{"dtype":"U64","shape":[1,1],"data_offsets":[12,20]},'
    '"h":{"dtype":"C64","shape":[0,5],"data_offsets":[20,20]},'
    '"i":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[20,24]}}',
    bytes(range(24))))
out("safetensors", "escapes", st_wrapped(
    '{"\\u00e9\\ud83d\\ude00\\n\\"x\\\\": {"shape" : [ 1 ] , "dtype":"I8",'
    '"data_offsets":[0,1]} , "__metadata__" : {"k\\t":"v\\/"}}  ', b"\x07"))
out("safetensors", "empty", st_wrapped("{}", b""))
out("safetensors", "lying", st_wrapped(
    '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
    '"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}', bytes(12)))
# torch's own file (tests/torch/safetensors_reference.py), whole.
with open(os.path.join(TOP, "tests", "data", "st_torch_mlp.safetensors"), "rb") as f:
    out("safetensors", "torch-mlp", b"\0" + f.read())


# ---- npy: numpy's own files (tests/data/npy, written by numpy 1.24) --------
def npy_file(name):
    with open(os.path.join(TOP, "tests", "data", "npy", name), "rb") as f:
        return f.read()


# Mode byte (bits 0-1: 0 header, 1 zip, 2 plugin; the rest the seed), then
# for the plugin: batch_size - 1, limit, val_split x 256, test_split x 512,
# flags, the u16 length of x, x, y.
def npy_plugin(x, y=b"", bs=8, limit=0, val=0, test=0, flags=0, seed=0):
    return (bytes([2 | seed << 2, bs - 1, limit, val, test, flags]) +
            struct.pack("<H", len(x)) + x + y)


out("npy", "header-f4", b"\0" + npy_file("x.npy"))
out("npy", "header-be8", b"\0" + npy_file("x_be8.npy"))
out("npy", "header-v3", b"\0" + npy_file("x_v3.npy"))
out("npy", "header-fortran", b"\0" + npy_file("x_fortran.npy"))
out("npy", "zip-stored", b"\1" + npy_file("data.npz"))
out("npy", "zip-deflated", b"\1" + npy_file("data_c.npz"))
out("npy", "plugin-pair", npy_plugin(npy_file("x.npy"), npy_file("y.npy"),
                                     val=40, test=30, flags=1 | 3 << 2))
out("npy", "plugin-images", npy_plugin(npy_file("img_u1.npy"),
                                       npy_file("img_y.npy"), bs=16,
                                       flags=2 | 1 << 4))
out("npy", "plugin-targets", npy_plugin(npy_file("reg_x.npy"),
                                        npy_file("reg_y2.npy"), limit=20,
                                        flags=2 << 2, seed=3))
out("npy", "plugin-npz", npy_plugin(npy_file("data_c.npz"), flags=1 | 1 << 6))
out("npy", "plugin-npz-xy", npy_plugin(npy_file("xy.npz"), flags=2 << 4))
out("npy", "plugin-nan", npy_plugin(npy_file("x_nan.npy"),
                                    npy_file("y_col.npy"), flags=1))
