#!/usr/bin/python3
"""Writes the .npy and .npz files that tests/cli/npy.sh and tests/test_npy
read, with Debian's numpy 1.24 (python3-numpy):

    /usr/bin/python3 tests/data/npy/make.py [DIR]    # default: its own dir

The output is committed, so the tests never need numpy. Every file is a
few KB. The same numbers are written in several encodings (float32,
float64, big-endian, version 2.0 and 3.0 headers, .npz stored and
deflated), so that the tests can check that each trains to the same bits.
"""
import io
import os
import struct
import sys

import numpy as np

out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
os.makedirs(out, exist_ok=True)
here = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(17)


def path(name):
    return os.path.join(out, name)


def save(name, a, version=None):
    if version is None:
        np.save(path(name), a, allow_pickle=False)
    else:
        with open(path(name), "wb") as f:
            np.lib.format.write_array(f, a, version=version, allow_pickle=False)


def raw(name, data):
    with open(path(name), "wb") as f:
        f.write(data)


def npy_bytes(a, version=None):
    b = io.BytesIO()
    np.lib.format.write_array(b, a, version=version, allow_pickle=False)
    return b.getvalue()


def header(d, version=1, data=b""):
    """A .npy file with the header dict text D, padded as numpy pads."""
    text = d.encode("latin1")
    fixed = 10 if version == 1 else 12
    pad = -(fixed + len(text) + 1) % 64
    text += b" " * pad + b"\n"
    size = struct.pack("<H" if version == 1 else "<I", len(text))
    return b"\x93NUMPY" + bytes([version, 0]) + size + text + data


# ---- three blobs in 4 dimensions: training, validation and test files ----
def blobs(n):
    y = np.arange(n) % 3
    centres = np.array([[0, 0, 0, 0], [3, 3, 0, 0], [0, 3, 3, 3]], np.float32)
    x = centres[y] + rng.normal(0, 0.7, (n, 4)).astype(np.float32)
    # exactly representable in float32, whatever the encoding
    return x.astype(np.float32), y.astype(np.int64)


x, y = blobs(90)
vx, vy = blobs(30)
tx, ty = blobs(30)
save("x.npy", x)  # '<f4'
save("y.npy", y)  # '<i8'
save("val_x.npy", vx)
save("val_y.npy", vy)
save("test_x.npy", tx)
save("test_y.npy", ty)
save("x_f8.npy", x.astype(np.float64))  # '<f8'
save("x_be.npy", x.astype(">f4"))  # '>f4'
save("x_be8.npy", x.astype(">f8"))  # '>f8'
save("y_i4.npy", y.astype(np.int32))  # '<i4'
save("y_u1.npy", y.astype(np.uint8))  # '|u1'
save("y_be.npy", y.astype(">i8"))  # '>i8'
save("y_be4.npy", y.astype(">i4"))  # '>i4'
save("y_col.npy", y.reshape(-1, 1))  # (90, 1)
save("x_v2.npy", x, version=(2, 0))
save("x_v3.npy", x, version=(3, 0))
save("x_fortran.npy", np.asfortranarray(x))
save("x_i8.npy", np.arange(90 * 4, dtype=np.int64).reshape(90, 4) % 7)

np.savez(path("data.npz"), x_train=x, y_train=y, x_val=vx, y_val=vy,
         x_test=tx, y_test=ty)
np.savez_compressed(path("data_c.npz"), x_train=x, y_train=y, x_val=vx,
                    y_val=vy, x_test=tx, y_test=ty)
np.savez(path("xy.npz"), x=x, y=y)
np.savez(path("only_x.npz"), x_train=x, notes=np.zeros(3, np.float32))
np.savez(path("other.npz"), a=x, b=y)

# ---- images: bars across or down, 6x6, uint8 and float32 (N, 1, 6, 6) ----
n_img = 48
img = rng.integers(0, 60, (n_img, 6, 6)).astype(np.uint8)
img_y = (np.arange(n_img) % 2).astype(np.uint8)
for i in range(n_img):
    k = rng.integers(0, 6)
    if img_y[i]:
        img[i, :, k] = 255
    else:
        img[i, k, :] = 255
save("img_u1.npy", img)
save("img_y.npy", img_y)
# what normalize = scale makes of the bytes: x / 255 in float32
save("img_f4.npy", (img.astype(np.float32) / np.float32(255)).reshape(n_img, 1, 6, 6))

# ---- regression: 40 samples of 3 features, one or two targets ----
rx = rng.normal(0, 1, (40, 3)).astype(np.float32)
w = np.array([[1.5, -2.0], [0.5, 1.0], [-1.0, 0.25]], np.float32)
ry = (rx @ w).astype(np.float32)
save("reg_x.npy", rx)
save("reg_y.npy", ry[:, 0].copy())  # (40,) '<f4'
save("reg_y2.npy", ry.astype(np.float64))  # (40, 2) '<f8'

# ---- the iris data of tests/data/sklearn-iris.csv, as csv reads it ----
iris = np.loadtxt(os.path.join(here, "..", "sklearn-iris.csv"), delimiter=",",
                  skiprows=1)
save("iris_x.npy", iris[:, :-1])  # float64, as csv's strtod
save("iris_y.npy", iris[:, -1].astype(np.int64))

# ---- what is refused ----
save("bad_c8.npy", np.zeros((4, 2), np.complex64))  # descr '<c8'
save("bad_struct.npy", np.zeros(4, dtype=[("a", "<f4"), ("b", "<i4")]))
save("bad_scalar.npy", np.float32(1.5))  # shape ()
save("bad_empty.npy", np.zeros((0, 4), np.float32))
save("bad_3d_labels.npy", np.zeros((90, 2), np.int64))
good = npy_bytes(x)
raw("bad_truncated.npy", good[:-8])
raw("bad_trailing.npy", good + b"\0\0\0\0")
raw("bad_magic.npy", b"x,y\n1,2\n")
raw("bad_version.npy", good[:6] + bytes([9, 0]) + good[8:])
raw("bad_hlen.npy", good[:8] + struct.pack("<H", 60000) + good[10:])
raw("bad_noshape.npy", header("{'descr': '<f4', 'fortran_order': False, }"))
raw("bad_shape.npy",
    header("{'descr': '<f4', 'fortran_order': False, 'shape': (90, 'a'), }"))
raw("bad_key.npy", header("{'descr': '<f4', 'fortran_order': False, "
                          "'shape': (2,), 'extra': 1, }", data=bytes(8)))
raw("bad_fortran_value.npy",
    header("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }",
           data=bytes(8)))
y_neg = y.copy()
y_neg[7] = -1
save("y_neg.npy", y_neg)
x_nan = x.copy()
x_nan[7, 2] = np.nan
save("x_nan.npy", x_nan)
x_big = x.astype(np.float64)
x_big[11, 3] = 1e300  # beyond float32
save("x_big.npy", x_big)
y_short = y[:80].copy()
save("y_short.npy", y_short)
save("x_3feat.npy", x[:, :3].copy())
save("y_float.npy", y.astype(np.float32))
