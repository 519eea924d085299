"""gemm_q's instruction budget on one target, read from the SASS (nvdisasm) of a bundle of q8_0
kernels with 64 x 32 tiles (gemm_q_t32) and 64 x 64 tiles (gemm_q_t64). Usage: gemm-q-budget.py
SRCROOT TRUENOC NVDISASM BUNDLE TARGET. For each kernel it prints the mmas of its per-block loop,
the loads in flight of its token loop and the instructions a stage costs a warp per m16n8k32
product (docs/kernels.md, "gemm_q"): 4 iterations of the weight rows' loop (16 rows a warp, 4 an
iteration), tile_n / 32 of the tokens' (8 an iteration), 8 of the per-block loop, over the stage's
mmas. The loops are those of the path for tiles inside the matrix, the first of each pair in code
order. Exits 1 when a figure passes its bound."""
import os
import sys
import tempfile

srcroot, truenoc, nvdisasm, bundle, target = sys.argv[1:6]
sys.path.insert(0, os.path.join(srcroot, "tools"))
import sass_report  # noqa: E402

# Bounds: today's figures (ptxas 13.0, sm_90a: 33.2 and 25.6) and a little room for ptxas's choices.
BOUNDS = {"gemm_q_t32": (4, 35.0), "gemm_q_t64": (8, 27.0)}

with tempfile.TemporaryDirectory() as tmp:  # one module holds both kernels
    text = sass_report.cubin_sass(bundle, "gemm_q_t32", target, truenoc, nvdisasm, tmp)

failed = False
for kernel, (mmas, bound) in BOUNDS.items():
    insts, labels = sass_report.parse_sass(sass_report.function_sass(text, kernel))
    every = sass_report.all_loops(insts, labels)
    # The innermost loops (the stage loop holds the others).
    loops = sorted(lp for lp in every if not any(o != lp and lp[0] <= o[0] and o[1] <= lp[1] for o in every))
    staging = [(lo, hi) for lo, hi in loops if sass_report.global_loads(insts, lo, hi)]
    per_block = [(lo, hi) for lo, hi in loops if any(i.base == "IMMA" for i in insts[lo:hi + 1])
                 and not sass_report.global_loads(insts, lo, hi)]
    if len(staging) != 4 or len(per_block) != 1:
        print(f"{kernel}: expected 4 staging loops and 1 per-block loop, found {len(staging)} and {len(per_block)}")
        failed = True
        continue
    (w_lo, w_hi), (t_lo, t_hi) = staging[0], staging[2]
    m_lo, m_hi = per_block[0]
    imma = sum(1 for i in insts[m_lo:m_hi + 1] if i.base == "IMMA")
    tile_n = 32 if kernel.endswith("t32") else 64
    stage = 4 * (w_hi - w_lo + 1) + tile_n // 32 * (t_hi - t_lo + 1) + 8 * (m_hi - m_lo + 1)
    per_product = stage / (8 * imma)
    in_flight = sass_report.in_flight(insts, t_lo, t_hi)
    loads = len(sass_report.global_loads(insts, t_lo, t_hi))
    print(f"{kernel}: {imma} mma a block, token loads in flight {in_flight} of {loads}, "
          f"{per_product:.1f} instructions a product")
    if imma != mmas or in_flight != loads or per_product > bound:
        print(f"{kernel}: over its budget ({mmas} mma a block, every token load in flight, at most {bound})")
        failed = True
sys.exit(1 if failed else 0)
