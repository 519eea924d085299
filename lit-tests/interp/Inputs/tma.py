#!/usr/bin/env python3
"""Inputs and checks of lit-tests/interp/tma*.tir, computed independently of the interpreter.

  tma.py tensor FILE E COLS ROWS STRIDE      a tensor of E-byte elements, element (r, c) =
                                             r*COLS + c + 1 (mod 2^(8E)); row padding 0xEE bytes
  tma.py load DUMP E COLS ROWS X Y B0 B1 SWIZZLE BASE
                                             DUMP holds shared memory from address BASE on after a
                                             TMA load of the B0 x B1 box at (X, Y): checks every
                                             box element at its swizzled address (TC§4.5), zero
                                             outside the tensor
  tma.py store OUT E COLS ROWS STRIDE X Y B0 B1 SWIZZLE BASE
                                             OUT is the tensor after a TMA store of the box at
                                             (X, Y) from a tile whose word i held i + 1 (tile at
                                             BASE): in-bounds elements hold the tile's, the rest
                                             (padding and elements outside the box) is unchanged
  tma.py ring OUT K [BLOCKS]                 the ring kernel's output: 16 x 8K u32 tensor copied,
                                             once per block
  tma.py tensor3 FILE E COLS ROWS PLANES STRIDE PLANESTRIDE
  tma.py load3 DUMP E COLS ROWS PLANES X Y Z B0 B1 B2 SWIZZLE BASE
  tma.py store3 OUT E COLS ROWS PLANES STRIDE PLANESTRIDE X Y Z B0 B1 B2 SWIZZLE BASE
                                             the same for a 3-D tensor of PLANES planes PLANESTRIDE
                                             bytes apart, element (p, r, c) = (p*ROWS + r)*COLS +
                                             c + 1, and a B0 x B1 x B2 box at (X, Y, Z) laid out
                                             plane after plane
"""
import sys

MODE = {"none": 0, "32": 1, "64": 2, "128": 3}


def swizzle(a, mode):
    # 128B: a ^ (((a >> 7) & 7) << 4); 64B: & 3; 32B: & 1 (TC§4.5)
    if mode == 0:
        return a
    return a ^ (((a >> 7) & ((1 << mode) - 1)) << 4)


def value(r, c, cols, e, p=0, rows=0):
    return ((p * rows + r) * cols + c + 1) % (1 << (8 * e))


def tensor_bytes(e, cols, rows, planes, stride, plane_stride):
    out = bytearray(b"\xee" * (plane_stride * (planes - 1) + stride * rows))
    for p in range(planes):
        for r in range(rows):
            for c in range(cols):
                at = p * plane_stride + r * stride + c * e
                out[at:at + e] = value(r, c, cols, e, p, rows).to_bytes(e, "little")
    return out


def tensor(path, e, cols, rows, stride, planes=1, plane_stride=0):
    open(path, "wb").write(tensor_bytes(e, cols, rows, planes, stride, plane_stride))


def box(b0, b1, b2):
    """Box elements (i, j, k) with their linear index, i fastest."""
    for k in range(b2):
        for j in range(b1):
            for i in range(b0):
                yield i, j, k, i + b0 * (j + b1 * k)


def load(dump, e, cols, rows, x, y, b0, b1, mode, base, planes=1, z=0, b2=1):
    data = open(dump, "rb").read()
    bad = zeros = 0
    for i, j, k, linear in box(b0, b1, b2):
        phys = swizzle(base + e * linear, mode) - base
        got = int.from_bytes(data[phys:phys + e], "little")
        inside = 0 <= x + i < cols and 0 <= y + j < rows and 0 <= z + k < planes
        want = value(y + j, x + i, cols, e, z + k, rows) if inside else 0
        zeros += not inside
        if got != want:
            bad += 1
            if bad <= 5:
                print("box element (%d, %d, %d) at 0x%x: got %d, expected %d" % (i, j, k, base + phys, got, want))
    print("load: %d elements, %d zero-filled, %d wrong" % (b0 * b1 * b2, zeros, bad))
    return bad == 0


def store(path, e, cols, rows, stride, x, y, b0, b1, mode, base, planes=1, plane_stride=0, z=0, b2=1):
    data = open(path, "rb").read()
    tile = bytearray()
    for w in range(8192 // 4):
        tile += (w + 1).to_bytes(4, "little")
    want = tensor_bytes(e, cols, rows, planes, stride, plane_stride)
    stored = 0
    for i, j, k, linear in box(b0, b1, b2):
        if 0 <= x + i < cols and 0 <= y + j < rows and 0 <= z + k < planes:
            phys = swizzle(base + e * linear, mode) - base
            at = (z + k) * plane_stride + (y + j) * stride + (x + i) * e
            want[at:at + e] = tile[phys:phys + e]
            stored += 1
    bad = sum(1 for a, b in zip(data, want) if a != b) + abs(len(data) - len(want))
    print("store: %d elements stored, %d bytes wrong" % (stored, bad))
    return bad == 0


def ring(path, k, blocks=1):
    data = open(path, "rb").read()
    want = b"".join(value(r, c, 16, 4).to_bytes(4, "little") for r in range(8 * k) for c in range(16)) * blocks
    print("ring: %d tiles, %s" % (k, "ok" if data == want else "wrong"))
    return data == want


def main(argv):
    cmd, args = argv[1], argv[2:]
    n = lambda i: int(args[i], 0)
    if cmd == "tensor":
        tensor(args[0], n(1), n(2), n(3), n(4))
        return 0
    if cmd == "load":
        return 0 if load(args[0], n(1), n(2), n(3), n(4), n(5), n(6), n(7), MODE[args[8]], n(9)) else 1
    if cmd == "store":
        return 0 if store(args[0], n(1), n(2), n(3), n(4), n(5), n(6), n(7), n(8), MODE[args[9]], n(10)) else 1
    if cmd == "tensor3":
        tensor(args[0], n(1), n(2), n(3), n(5), n(4), n(6))
        return 0
    if cmd == "load3":
        return 0 if load(args[0], n(1), n(2), n(3), n(5), n(6), n(8), n(9), MODE[args[11]], n(12), n(4), n(7),
                         n(10)) else 1
    if cmd == "store3":
        return 0 if store(args[0], n(1), n(2), n(3), n(5), n(7), n(8), n(10), n(11), MODE[args[13]], n(14), n(4),
                          n(6), n(9), n(12)) else 1
    if cmd == "ring":
        return 0 if ring(args[0], n(1), n(2) if len(args) > 2 else 1) else 1
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
