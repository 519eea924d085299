"""Every case that truenoc_bench_kernels --check lists (lines `ok   OP SHAPE DTYPE ...`) goes
through tools/bench/torch_ref.py's make_case with a stand-in torch: a case must either have a
PyTorch reference or be skipped by name, never raise (the first H100 run of the benchmark lost its
PyTorch column to a q8_1 row that raised KeyError). Prints the counts."""
import os
import sys
from unittest import mock

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools", "bench"))
import torch_ref  # noqa: E402

with_ref = skipped = 0
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) < 4 or parts[0] != "ok":
        continue
    op, shape, dtype = parts[1:4]
    case = torch_ref.make_case(mock.MagicMock(), op, shape, dtype)
    if case is None:
        skipped += 1
    else:
        with_ref += 1
print(f"torch_ref: {with_ref} cases with a PyTorch reference, {skipped} without")
