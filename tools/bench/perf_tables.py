#!/usr/bin/env python3
"""Markdown tables, one per kernel family, from a tools/gpu-check.sh log folder: the kernel
benchmark's three tables (bench-kernels.log: GB/s against the copy and cuBLAS, attention prefill
TFLOP/s, GEMM TFLOP/s against cuBLAS), PyTorch's column where torch_ref.py ran
(bench-kernels-torch.csv), and the runtime benchmark (bench-runtime.csv).

    python3 tools/bench/perf_tables.py LOG_DIR > docs/performance-h100.md
"""
import csv
import os
import sys

FAMILIES = [  # (title, test on the op name), first match wins
    ("Softmax and norms", lambda op: op in ("softmax", "layernorm", "rmsnorm", "residual_rmsnorm")),
    ("Elementwise", lambda op: op in ("add", "mul", "scale", "residual_add", "relu", "gelu_tanh", "gelu_erf",
                                      "silu", "swiglu")),
    ("GEMV", lambda op: op == "gemv"),
    ("Row operations", lambda op: op in ("argmax", "transpose", "kv_scatter", "rope_neox")),
    ("Quantized: gemv_q, gemv_q_swiglu, dequantize, rmsnorm_quantize_q8_1",
     lambda op: op.startswith(("gemv_q", "dequantize_", "rmsnorm_quantize"))),
    ("Quantized: gemm_q (prefill, 512 tokens)", lambda op: op.startswith("gemm_q")),
    ("Attention decode", lambda op: op.startswith("attention_decode")),
    ("Attention prefill (bandwidth view)", lambda op: op.startswith("attention_prefill")),
]


def tables_of(log):
    """Each table of the log as (header line, [rows as lists of fields]); a table starts at a
    line beginning with 'op ' and ends at the first line that is not a row."""
    out, cur = [], None
    for line in open(log):
        line = line.rstrip("\n")
        if line.startswith("op "):
            cur = (line, [])
            out.append(cur)
        elif cur is not None:
            if not line.strip() or line.startswith(("ref:", "TFLOP", "GB/s")):
                cur = None
            else:
                cur[1].append(line.split())
    return out


def num(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def cell(v, spec=".1f"):
    return "–" if v is None else format(v, spec)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    tables = tables_of(os.path.join(d, "bench-kernels.log"))
    torch = {}
    tpath = os.path.join(d, "bench-kernels-torch.csv")
    if os.path.exists(tpath):
        for r in csv.DictReader(open(tpath)):
            torch[(r["op"], r["shape"], r["dtype"])] = (num(r.get("torch_gbs")), num(r.get("ours_over_torch")))
    rt = os.path.join(d, "bench-runtime.csv")
    if os.path.exists(rt):
        print("### Runtime\n")
        print("| measure | truenort | reference | ratio |\n|---|---|---|---|")
        for r in csv.DictReader(open(rt)):
            print(f"| {r['measure']} | {r['truenort']} | {r['reference'] or '–'} | {r['ratio'] or '–'} |")
        print()
    bw = next((rows for head, rows in tables if "ours GB/s" in head), [])
    for title, test in FAMILIES:
        rows = [r for r in bw if test(r[0])]
        if not rows:
            continue
        print(f"### {title}\n")
        print("| op | shape | dtype | ours GB/s | copy GB/s | ours/copy | cuBLAS GB/s | ours/cuBLAS | PyTorch GB/s "
              "| ours/PyTorch |\n|---|---|---|---|---|---|---|---|---|---|")
        for op, shape, dtype, ours, copy, ref, over_copy, over_ref in rows:
            tg, tr = torch.get((op, shape, dtype), (None, None))
            print(f"| {op} | {shape} | {dtype} | {ours} | {copy} | {over_copy} | {ref.replace('-', '–')} "
                  f"| {over_ref.replace('-', '–')} | {cell(tg)} | {cell(tr, '.3f')} |")
        print()
    att = next((rows for head, rows in tables if "BxHxSxD" in head), [])
    if att:
        print("### Attention prefill (TFLOP/s = 4·B·H·S²·D, causal half; PyTorch: SDPA)\n")
        print("| op | B×H×S×D | ours µs | ours TFLOP/s | ours/PyTorch |\n|---|---|---|---|---|")
        for op, shape, us, tflops in att:
            _, tr = torch.get((op, shape, "bf16"), (None, None))
            print(f"| {op} | {shape} | {us} | {tflops} | {cell(tr, '.3f')} |")
        print()
    gemm = next((rows for head, rows in tables if "MxNxK" in head), [])
    if gemm:
        print("### GEMM (TFLOP/s, s8: TOPS; reference: cuBLAS, f32 SGEMM without TF32, others cublasGemmEx)\n")
        print("| op | dtype | M×N×K | ours µs | ours TFLOP/s | cuBLAS TFLOP/s | ours/cuBLAS |\n|---|---|---|---|---|---|---|")
        for op, dtype, shape, us, ours, ref, ratio in gemm:
            print(f"| {op} | {dtype} | {shape} | {us} | {ours} | {ref} | {ratio} |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
