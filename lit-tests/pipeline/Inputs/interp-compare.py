#!/usr/bin/env python3
"""-O0 and -O2 compute the same bytes on the CPU interpreter (truenoc interp).

Usage: interp-compare.py TRUENOC SRCROOT WORKDIR
Each case runs a kernel once as parsed (-O0: checks only) and once after -O2 (with
--fp-contract=off, since contraction legitimately changes float results) on fresh random
inputs, and compares the output buffers byte for byte. The seed is printed for reproduction.
"""
import os
import random
import struct
import subprocess
import sys


def main():
    truenoc, root, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    seed = random.SystemRandom().randrange(1 << 32)
    rng = random.Random(seed)

    def floats(n):
        return struct.pack(f"<{n}f", *[rng.uniform(-4, 4) for _ in range(n)])

    def zeros(n):
        return bytes(n)

    rows, cols = 8, rng.randrange(200, 600)
    n = rng.randrange(700, 1100)
    cases = [
        ("examples/vadd.tir", "vadd", "4", "256", {"a": floats(1024), "b": floats(1024), "c": zeros(4096)},
         {"n": n}, ["c"]),
        ("examples/row_sum.tir", "row_sum", str(rows), "256", {"x": floats(rows * cols), "y": zeros(4 * rows)},
         {"cols": cols}, ["y"]),
        ("lit-tests/const-fold/semantics.tir", "semantics", "1", "1", {"out": zeros(8 * 491)}, {}, ["out"]),
        ("lit-tests/strength-reduce/semantics.tir", "semantics", "1", "128", {"out": zeros(8 * 14 * 128)},
         {"scale": rng.randrange(1, 1 << 32), "bias": rng.randrange(1 << 32)}, ["out"]),
    ]
    failures = 0
    for path, kernel, grid, block, buffers, scalars, outs in cases:
        results = {}
        for level in ("-O0", "-O2"):
            opt = subprocess.run([truenoc, "opt", level, "--fp-contract=off", os.path.join(root, path)],
                                 capture_output=True, text=True)
            if opt.returncode != 0:
                print(f"{path}: opt {level} failed:\n{opt.stderr}")
                return 1
            cmd = [truenoc, "interp", "-", "--kernel", kernel, "--grid", grid, "--block", block]
            for name, data in buffers.items():
                f = os.path.join(work, f"{name}.in")
                with open(f, "wb") as fh:
                    fh.write(data)
                cmd += ["--arg", f"{name}=@{f}"]
            for name, value in scalars.items():
                cmd += ["--arg", f"{name}={value}"]
            for name in outs:
                cmd += ["--out", f"{name}={os.path.join(work, name + level + '.out')}"]
            run = subprocess.run(cmd, input=opt.stdout, capture_output=True, text=True)
            if run.returncode != 0:
                print(f"{path}: interp {level} failed:\n{run.stderr}")
                return 1
            results[level] = [open(os.path.join(work, name + level + ".out"), "rb").read() for name in outs]
        same = results["-O0"] == results["-O2"]
        failures += not same
        print(f"{path} @{kernel}: {'identical' if same else 'DIFFERENT'}")
    print(f"interp -O0 vs -O2: {len(cases) - failures} of {len(cases)} kernels identical (seed {seed})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
