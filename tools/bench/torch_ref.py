#!/usr/bin/env python3
"""PyTorch reference for the kernel benchmark (tools/bench/bench_kernels.cpp).

Reads the benchmark's CSV, times the same op, shape and dtype with PyTorch on the GPU (CUDA
events, median after warm-up, inputs rotated among enough copies to exceed the L2 like the
benchmark does), writes a merged CSV with torch GB/s and ours/torch, and prints the merged table.
GB/s uses the benchmark's byte count (each tensor once), so the ratios compare times.

    tools/bench/torch_ref.py BENCH.csv [-o MERGED.csv] [--reps N]

Without torch or without a CUDA device it says so and exits 0.
"""
import argparse
import csv
import math
import statistics
import sys

WARMUP = 3
EPS = 1e-5
ROPE_THETA = 10000.0
MAX_SETS = 1024  # as the benchmark: small sets need many copies to leave the L2


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("csv", help="CSV written by truenoc_bench_kernels --csv")
    p.add_argument("-o", "--output", help="merged CSV (default: BENCH-torch.csv beside the input)")
    p.add_argument("--reps", type=int, default=30, help="timed runs per op (default 30; the median is reported)")
    a = p.parse_args()
    if a.reps < 1:
        p.error("--reps must be positive")
    return a


def read_rows(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    need = {"op", "shape", "dtype", "bytes", "ours_gbs"}
    if rows and not need <= set(rows[0]):
        sys.exit(f"error: {path} lacks the columns {sorted(need - set(rows[0]))}")
    return rows


def make_case(torch, op, shape, dtype):
    """(make_inputs, run[, touched]): make_inputs() builds one set of tensors, run(set) does the op
    once; touched, when given, is the bytes one run moves where that is not the set's size (the
    set shares tensors it only partly touches, like kv_scatter's caches)."""
    if op in ("layernorm_c4096", "rmsnorm_c4096", "quantize_fp8_c4096"):  # our kernels for rows of at most 4096: the same op
        op = op[:-len("_c4096")]
    if op == "sample_filtered_block":  # sample_cutoff's one block a row: the same op
        op = "sample_filtered"
    if op == "logit_penalties_global":  # the hash tables in a global workspace: the same op
        op = "logit_penalties"
    if op.startswith(("gemv_q_", "gemm_q_", "gemm_q64_", "dequantize_", "rmsnorm_quantize_", "swiglu_quantize_")) or \
            dtype not in ("f32", "bf16"):
        return None  # ggml-quantized weights, q8_1 blocks, fused quantizations: PyTorch has no kernel for them
    F = torch.nn.functional
    dev = "cuda"
    dt = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
    dims = [int(d) for d in shape.split("x")]

    def rand(*size, t=dt):
        return torch.rand(*size, device=dev, dtype=torch.float32).mul_(2).sub_(1).to(t)

    if op in ("gemv", "gemv_xbf16", "gemv_fp8"):
        m, k = dims
        # PyTorch has no mixed bf16 x f32 mv: with bf16 weights x is bf16 too (as in F.linear; our
        # gemv_xbf16 rows read the same bytes, our gemv bf16 rows an f32 x). gemv_fp8: the same
        # problem over bf16 weights (twice our fp8 rows' weight bytes).
        xt = torch.float32 if dtype == "f32" else dt
        return (lambda: (rand(m, k), rand(k, t=xt))), (lambda s: torch.mv(s[0], s[1]))

    if op == "quantize_fp8":
        rows, cols = dims
        if not hasattr(torch, "float8_e4m3fn"):
            return None  # a PyTorch without fp8 types

        def quantize(x):
            scale = x.abs().amax(dim=1, keepdim=True).float() / 448
            return (x.float() / torch.where(scale == 0, torch.ones_like(scale), scale)).to(torch.float8_e4m3fn), scale

        return (lambda: (rand(rows, cols),)), (lambda s: quantize(s[0]))

    def rms_norm(x, w):
        if hasattr(F, "rms_norm"):
            return F.rms_norm(x, (x.shape[-1],), w, EPS)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w

    if op == "moe_route":
        # Mixtral's router: softmax, top 2, the pair renormalized.
        rows, n = dims

        def route(s):
            w, ids = torch.topk(torch.softmax(s[0], dim=-1), 2, dim=-1)
            return ids, w / w.sum(dim=-1, keepdim=True)

        return (lambda: (rand(rows, n),)), route
    if op == "moe_combine":
        # f32 expert rows, weighted and summed per token, plus the bf16 residual.
        rows, cols, slots = dims
        return (lambda: (rand(rows, slots, cols, t=torch.float32), rand(rows, slots, 1, t=torch.float32),
                         rand(rows, cols))), (
            lambda s: ((s[0] * s[1]).sum(dim=1) + s[2].float()).to(dt))
    if op in ("softmax", "layernorm", "rmsnorm", "residual_rmsnorm", "argmax", "argmax_sample", "sample_filtered",
              "transpose"):
        rows, cols = dims
        if op == "softmax":
            return (lambda: (rand(rows, cols),)), (lambda s: torch.softmax(s[0], dim=-1))
        if op == "layernorm":
            return (lambda: (rand(rows, cols), rand(cols), rand(cols))), (
                lambda s: F.layer_norm(s[0], (cols,), s[1], s[2], EPS))
        if op == "residual_rmsnorm":
            # Two kernels in PyTorch: residual += x in place (the cheapest way to leave h in the
            # residual, rather than h = x + r; r.copy_(h)), then the norm re-reads h.
            def residual_rmsnorm(s):
                s[1].add_(s[0])
                return rms_norm(s[1], s[2])

            return (lambda: (rand(rows, cols), rand(rows, cols), rand(cols))), residual_rmsnorm
        if op == "argmax":  # int64 indices: 8 bytes a row where ours writes 4, negligible
            return (lambda: (rand(rows, cols),)), (lambda s: torch.argmax(s[0], dim=-1))
        if op == "argmax_sample":  # a sample of softmax(x / 0.8), as a sampler in PyTorch draws it
            return (lambda: (rand(rows, cols),)), (
                lambda s: torch.multinomial(torch.softmax(s[0] / 0.8, dim=-1), 1))
        if op == "sample_filtered":  # top_k 50, top_p 0.9, min_p 0.05 at 0.8 by sorting, as PyTorch samplers do
            def sample_filtered(s):
                v, order = torch.sort(s[0] / 0.8, dim=-1, descending=True)
                v[..., 50:] = float("-inf")
                p = torch.softmax(v, dim=-1)
                p = p.masked_fill(torch.cumsum(p, dim=-1) - p > 0.9, 0)
                p = p.masked_fill(p < 0.05 * p[..., :1], 0)
                return order.gather(-1, torch.multinomial(p, 1))

            return (lambda: (rand(rows, cols),)), sample_filtered
        if op == "transpose":
            return (lambda: (rand(rows, cols),)), (lambda s: s[0].t().contiguous())
        return (lambda: (rand(rows, cols), rand(cols))), (lambda s: rms_norm(s[0], s[1]))
    # _lenN: other splits; _paged: the same cache through a block table: the same problem.
    # _windowW: a sliding window; PyTorch attends to the window's W rows, all it needs to read.
    if op.startswith("attention_decode_window"):
        batch, ctx, q_heads, kv_heads, dim = dims
        group, rows = q_heads // kv_heads, min(int(op[len("attention_decode_window"):]), ctx)
        return (lambda: (rand(batch, kv_heads, group, dim), rand(batch, kv_heads, rows, dim),
                         rand(batch, kv_heads, rows, dim))), (
            lambda s: F.scaled_dot_product_attention(s[0], s[1], s[2]))
    # _mla: DeepSeek's absorbed latent attention; SDPA with the latent and rope parts as keys and
    # the latent part as values (a view of the keys).
    if op == "attention_decode_mla":
        batch, ctx, q_heads, kv_heads, dim = dims
        return (lambda: (rand(batch, kv_heads, q_heads // kv_heads, dim + 64), rand(batch, kv_heads, ctx, dim + 64))), (
            lambda s: F.scaled_dot_product_attention(s[0], s[1], s[1][..., :dim]))
    # _fp8: the same problem over bf16 caches (what PyTorch would read without an fp8 cache).
    if op in ("attention_decode", "attention_decode_paged", "attention_decode_fp8",
              "attention_decode_fp8_integer", "attention_decode_g16") or op.startswith("attention_decode_len"):
        # One query token per sequence, q_heads / kv_heads of them per kv head. SDPA on [B, KH, G,
        # D] queries against [B, KH, ctx, D] keys: the group's heads become query rows of one kv
        # head (no mask, so the same softmax), with no copy of K and V for grouped-query heads.
        batch, ctx, q_heads, kv_heads, dim = dims
        group = q_heads // kv_heads
        return (lambda: (rand(batch, kv_heads, group, dim), rand(batch, kv_heads, ctx, dim),
                         rand(batch, kv_heads, ctx, dim))), (
            lambda s: F.scaled_dot_product_attention(s[0], s[1], s[2]))
    if op in ("attention_prefill", "attention_prefill_causal", "attention_prefill_wgmma",
              "attention_prefill_wgmma_causal", "attention_prefill_wgmma_varlen",
              "attention_prefill_wgmma_varlen_causal", "attention_prefill_paged", "attention_prefill_paged_causal",
              "attention_prefill_wgmma_paged", "attention_prefill_wgmma_paged_causal", "attention_prefill_paged_fp8",
              "attention_prefill_paged_fp8_causal", "attention_prefill_wgmma_paged_fp8",
              "attention_prefill_wgmma_paged_fp8_causal"):  # _fp8: SDPA over bf16 k and v, the same problem
        batch, heads, seq, dim = dims
        causal = op.endswith("_causal")
        return (lambda: (rand(batch, heads, seq, dim), rand(batch, heads, seq, dim), rand(batch, heads, seq, dim))), (
            lambda s: F.scaled_dot_product_attention(s[0], s[1], s[2], is_causal=causal))
    # _mla: DeepSeek's latent attention at prefill, q and k heads of dim (192), v heads of 128.
    if op in ("attention_prefill_mla", "attention_prefill_mla_causal", "attention_prefill_wgmma_mla",
              "attention_prefill_wgmma_mla_causal"):
        batch, heads, seq, dim = dims
        causal = op.endswith("_causal")
        return (lambda: (rand(batch, heads, seq, dim), rand(batch, heads, seq, dim), rand(batch, heads, seq, 128))), (
            lambda s: F.scaled_dot_product_attention(s[0], s[1], s[2], is_causal=causal))
    if op in ("attention_prefill_bias", "attention_prefill_wgmma_bias"):  # SDPA with the same float mask
        batch, heads, seq, dim = dims
        return (lambda: (rand(batch, heads, seq, dim), rand(batch, heads, seq, dim), rand(batch, heads, seq, dim),
                         rand(seq, seq))), (
            lambda s: F.scaled_dot_product_attention(s[0], s[1], s[2], attn_mask=s[3]))
    if op == "embedding":
        tokens, rows, k = dims
        # One table for every input set, as in the benchmark: a run reads only `tokens` rows of it.
        table = rand(rows, k)
        return ((lambda: (torch.randperm(rows, device=dev)[:tokens],)), (lambda s: F.embedding(s[0], table)),
                tokens * k * 2 * table.element_size() + 8 * tokens)  # rows read, y written; int64 ids
    if op == "logit_penalties":
        rows, cols, n = dims
        # vLLM's PyTorch penalties: counts over the whole vocabulary by scatter_add, then every
        # logit rewritten. One logits tensor for every input set, as in the benchmark.
        logits = rand(rows, cols)

        def penalize(s):
            counts = torch.zeros(rows, cols, device=dev, dtype=logits.dtype).scatter_add_(1, s[0], s[1])
            seen = counts > 0
            rep = torch.where(seen, 1.3, 1.0)
            logits.copy_(torch.where(logits > 0, logits / rep, logits * rep) - 0.25 * counts - 0.5 * seen)

        def tokens():
            return torch.randint(0, cols, (rows, n), device=dev), torch.ones(rows, n, device=dev, dtype=logits.dtype)

        return tokens, penalize, 12 * rows * n
    if op == "token_bitmask":
        rows, cols = dims
        words = (cols + 31) // 32
        # xgrammar's PyTorch fallback: the bits unpacked to a bool mask, then masked_fill_.
        logits = rand(rows, cols)
        shifts = torch.arange(32, device=dev, dtype=torch.int32)

        def apply(s):
            allowed = ((s[0].unsqueeze(-1) >> shifts) & 1).bool().view(rows, words * 32)[:, :cols]
            logits.masked_fill_(~allowed, float("-inf"))

        def mask():
            return (torch.randint(-2 ** 31, 2 ** 31 - 1, (rows, words), device=dev, dtype=torch.int32),)

        return mask, apply, 4 * rows * cols + 4 * rows * words
    if op == "kv_scatter":
        tokens, row, cache_rows = dims
        # One pair of caches for every input set, as in the benchmark: a run writes only `tokens`
        # rows of them. Positions are distinct random rows, int64 as index_copy_ wants.
        k_cache = torch.zeros(cache_rows, row, device=dev, dtype=dt)
        v_cache = torch.zeros(cache_rows, row, device=dev, dtype=dt)

        def scatter(s):
            k_cache.index_copy_(0, s[2], s[0])
            v_cache.index_copy_(0, s[2], s[1])

        def new_rows():
            return rand(tokens, row), rand(tokens, row), torch.randperm(cache_rows, device=dev)[:tokens]

        fresh = tokens * row * k_cache.element_size()
        return new_rows, scatter, 4 * fresh + 8 * tokens  # k, v read, as many bytes written; positions
    if op == "rope_neox":
        tokens, q_heads, k_heads, head_dim = dims
        # The usual PyTorch formulation (Hugging Face's LLaMA: x * cos + rotate_half(x) * sin, out
        # of place). cos/sin are computed once, outside the timed region, as real implementations
        # cache them: PyTorch then reads small tables where our kernel computes every angle, so it
        # does less work than ours.
        inv_freq = 1.0 / ROPE_THETA ** (torch.arange(0, head_dim, 2, device=dev, dtype=torch.float32) / head_dim)
        angles = torch.outer(torch.arange(tokens, device=dev, dtype=torch.float32), inv_freq)
        emb = torch.cat((angles, angles), dim=-1)[:, None, :]  # tokens x 1 x head_dim
        cos, sin = emb.cos().to(dt), emb.sin().to(dt)

        def rotate_half(x):
            x1, x2 = x.chunk(2, dim=-1)
            return torch.cat((-x2, x1), dim=-1)

        def rope(s):
            return s[0] * cos + rotate_half(s[0]) * sin, s[1] * cos + rotate_half(s[1]) * sin

        return (lambda: (rand(tokens, q_heads, head_dim), rand(tokens, k_heads, head_dim))), rope
    if op in ("gemm_w8a8", "gemm_wgmma_w8a8", "gemm_wgmma_w8a8_blocks"):
        # W8A8 (E4M3 A and B, bf16 C): PyTorch's fp8 GEMM, torch._scaled_mm (cuBLASLt's), with unit
        # scales and B column-major as ours (x W^T); for the block-scaled rows too (their scales are
        # 1: PyTorch has no 128-block scaling of its own). The benchmark's own reference is
        # cuBLAS's bf16 GEMM of the codes' values.
        m, n, k = dims
        if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
            return None  # a PyTorch without fp8 GEMMs
        one = torch.ones((), device=dev, dtype=torch.float32)

        def codes(rows, cols):
            return rand(rows, cols, t=torch.float32).mul_(448).to(torch.float8_e4m3fn)

        return (lambda: (codes(m, k), codes(n, k))), (
            lambda s: torch._scaled_mm(s[0], s[1].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
    if len(dims) != 1:
        return None  # no PyTorch equivalent written for it (the other GEMMs have cuBLAS as theirs)
    (n,) = dims
    unary = {
        "scale": lambda x: x * 1.5,
        "relu": torch.relu,
        "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
        "gelu_erf": lambda x: F.gelu(x, approximate="none"),
        "silu": F.silu,
    }
    if op in unary:
        f = unary[op]
        return (lambda: (rand(n),)), (lambda s: f(s[0]))
    binary = {
        "add": lambda a, b: a + b,
        "mul": lambda a, b: a * b,
        "swiglu": lambda gate, up: gate * F.silu(up),
        "residual_add": lambda y, x: y.add_(x),
    }
    if op in binary:
        f = binary[op]
        return (lambda: (rand(n), rand(n))), (lambda s: f(s[0], s[1]))
    return None


def time_op(torch, make_inputs, run, set_bytes, touch_bytes, cold_bytes, reps):
    """Median milliseconds of run(), rotating input sets so that each run reads cold data."""
    free, _ = torch.cuda.mem_get_info()
    sets = max(1, min(MAX_SETS, math.ceil(cold_bytes / max(touch_bytes, 1)), int(free / 4 // max(set_bytes, 1))))
    inputs = [make_inputs() for _ in range(sets)]
    for i in range(WARMUP):
        run(inputs[i % sets])
    start = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    end = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for r in range(reps):
        s = inputs[(WARMUP + r) % sets]
        start[r].record()
        run(s)
        end[r].record()
    torch.cuda.synchronize()
    ms = statistics.median(a.elapsed_time(b) for a, b in zip(start, end))
    del inputs
    torch.cuda.empty_cache()
    return ms


def fmt(v, spec=".1f"):
    return "-" if v is None or v == "" else format(float(v), spec)


def ratio(a, b):
    try:
        return float(a) / float(b)
    except (TypeError, ValueError, ZeroDivisionError):
        return None


def print_table(rows):
    cols = ["op", "shape", "dtype", "ours GB/s", "copy GB/s", "cuBLAS GB/s", "torch GB/s", "ours/copy",
            "ours/cuBLAS", "ours/torch"]
    print(f"{cols[0]:<16} {cols[1]:<16} {cols[2]:<6}" + "".join(f" {c:>11}" for c in cols[3:]))
    for r in rows:
        cells = [fmt(r.get("ours_gbs")), fmt(r.get("copy_gbs")), fmt(r.get("ref_gbs")), fmt(r.get("torch_gbs")),
                 fmt(r.get("ours_over_copy"), ".3f"), fmt(r.get("ours_over_ref"), ".3f"),
                 fmt(r.get("ours_over_torch"), ".3f")]
        print(f"{r['op']:<16} {r['shape']:<16} {r['dtype']:<6}" + "".join(f" {c:>11}" for c in cells))
    print("GB/s = (bytes read + bytes written, each tensor once) / median time; cuBLAS: SGEMV for gemv f32, "
          "dequantize to bf16 + cublasGemmEx for gemv_q; attention_decode: K and V bytes; torch: SDPA for attention")


def main():
    a = parse_args()
    rows = read_rows(a.csv)
    out_path = a.output or (a.csv[:-4] if a.csv.endswith(".csv") else a.csv) + "-torch.csv"
    try:
        import torch
    except ImportError as e:
        print(f"torch_ref: PyTorch is not installed ({e}); no torch column")
        return 0
    if not torch.cuda.is_available():
        print(f"torch_ref: PyTorch {torch.__version__} sees no CUDA device; no torch column")
        return 0
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 0) or (50 << 20)
    cold = 4 * l2
    print(f"torch_ref: PyTorch {torch.__version__} on {props.name}, median of {a.reps} runs after {WARMUP} warm-up")
    for r in rows:
        case = make_case(torch, r["op"], r["shape"], r["dtype"])
        r["torch_gbs"] = r["ours_over_torch"] = ""
        if case is None:
            print(f"torch_ref: no PyTorch equivalent for {r['op']}; skipped")
            continue
        make_inputs, run = case[:2]
        sample = make_inputs()
        set_bytes = sum(t.numel() * t.element_size() for t in sample)
        touch_bytes = case[2] if len(case) > 2 else set_bytes
        del sample
        try:
            ms = time_op(torch, make_inputs, run, set_bytes, touch_bytes, cold, a.reps)
        except RuntimeError as e:  # e.g. an op this PyTorch lacks for the dtype
            print(f"torch_ref: {r['op']} {r['shape']} {r['dtype']} failed: {e}")
            continue
        torch_gbs = float(r["bytes"]) / (ms * 1e6)
        r["torch_gbs"] = f"{torch_gbs:.2f}"
        q = ratio(r["ours_gbs"], torch_gbs)
        r["ours_over_torch"] = "" if q is None else f"{q:.4f}"
    fields = list(rows[0].keys()) if rows else ["op", "shape", "dtype", "torch_gbs", "ours_over_torch"]
    with open(out_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    print()
    print_table(rows)
    print(f"merged CSV: {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
