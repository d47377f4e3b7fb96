"""npy.py: a small .npy array for tests/cli/onnx.sh, without numpy.

    python3 npy.py OUT.npy f4|i8|i4 D0,D1,... normal|int:K SEED

normal: N(0, 1) values; int:K: whole numbers in [0, K) (class labels,
tokens). Little-endian, C order; deterministic in SEED."""
import random
import struct
import sys


def main(out, dtype, shape, kind, seed):
    dims = [int(d) for d in shape.split(',')]
    count = 1
    for d in dims:
        count *= d
    rng = random.Random(int(seed))
    if kind == 'normal':
        values = [rng.gauss(0, 1) for _ in range(count)]
    else:
        k = int(kind.split(':')[1])
        values = [rng.randrange(k) for _ in range(count)]
    code = {'f4': 'f', 'i8': 'q', 'i4': 'i'}[dtype]
    header = "{'descr': '<%s', 'fortran_order': False, 'shape': (%s), }" % (
        dtype, ''.join('%d, ' % d for d in dims))
    header += ' ' * (63 - (10 + len(header)) % 64) + '\n'
    with open(out, 'wb') as f:
        f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(header)))
        f.write(header.encode('latin1'))
        f.write(struct.pack('<%d%s' % (count, code), *values))


if __name__ == '__main__':
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    main(*sys.argv[1:])
