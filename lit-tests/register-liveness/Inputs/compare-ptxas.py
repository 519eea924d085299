#!/usr/bin/env python3
"""Predicted registers (register-liveness, after -O2) beside ptxas's count for sm_90 (sm_90a for its modules).

Usage: compare-ptxas.py TRUENOC "PTXAS ARGS..." SRCROOT
Prints one line per kernel and a summary; exits non-zero when a prediction is outside
    predicted <= 2 * ptxas + 8    and    ptxas <= 2 * predicted + 24
except for the kernels listed in OUTLIERS, which must instead be predicted far ABOVE ptxas
(IR-order pressure of independent loads that ptxas reorders).
"""
import glob
import os
import re
import subprocess
import sys

DIRS = ["examples", "lit-tests/fma-fusion", "lit-tests/dce", "lit-tests/const-fold", "lit-tests/cse",
        "lit-tests/strength-reduce", "lit-tests/barrier-safety", "lit-tests/tile-validation",
        "lit-tests/register-liveness", "lit-tests/pipeline"]
OUTLIERS = {("lit-tests/tile-validation/registers.tir", "wide"), ("lit-tests/register-liveness/spill.tir", "wide")}


def run(cmd, stdin=None):
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True)


def main():
    truenoc, ptxas, root = sys.argv[1], sys.argv[2].split()[0], sys.argv[3]
    files = sorted(f for d in DIRS for f in glob.glob(os.path.join(root, d, "*.tir")))
    inside = outside = outliers = failures = 0
    for path in files:
        rel = os.path.relpath(path, root)
        opt = run([truenoc, "opt", "-O2", "--remarks", path])
        if opt.returncode != 0:
            continue  # a negative test: -O2 rejects it
        predicted = dict(re.findall(r"note: kernel @(\w+): peak live registers .*; predicted (\d+) registers", opt.stderr))
        # A module of arch-specific sm_90a ops (wgmma, setmaxnreg) exists on sm_90a only.
        sm = "sm_90a" if re.search(r"^target sm_90a$", opt.stdout, re.M) else "sm_90"
        ptx = run([truenoc, "emit-ptx", "-", "--target", sm], opt.stdout)
        asm = run([ptxas, f"-arch={sm}", "-v", "-o", os.devnull, "-"], ptx.stdout) if ptx.returncode == 0 else None
        if asm is None or asm.returncode != 0:
            print(f"FAILED to assemble: {rel}")
            failures += 1
            continue
        used = dict(re.findall(r"Compiling entry function '(\w+)'.*?Used (\d+) registers", asm.stderr, re.S))
        for kernel, p in sorted(predicted.items()):
            p, u = int(p), int(used.get(kernel, -1))
            if (rel, kernel) in OUTLIERS:
                ok = p > 2 * u + 8
                outliers += ok
                verdict = "expected outlier (ptxas reorders)" if ok else "OUTLIER NO LONGER OFF"
            else:
                ok = u >= 0 and p <= 2 * u + 8 and u <= 2 * p + 24
                inside += ok
                verdict = "ok" if ok else "OUTSIDE BOUND"
            outside += not ok
            print(f"{rel:50} @{kernel:16} predicted {p:4}  ptxas {u:4}  {verdict}")
    print(f"register prediction: {inside} kernels within bound, {outliers} expected outliers, "
          f"{outside} outside, {failures} not assembled")
    return 1 if outside or failures else 0


if __name__ == "__main__":
    sys.exit(main())
