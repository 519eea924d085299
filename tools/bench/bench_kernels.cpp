// tools/bench kernel-library section (a benchmark, not a test): effective bandwidth of the
// library's kernels (tools/bench/kernels.toml) against a device-to-device copy of comparable
// size, and for f32 GEMV against cuBLAS SGEMV (dlopen'ed; the column stays empty without it),
// for gemv_q against our dequantize to bf16 followed by cublasGemmEx (checked to agree first).
// GEMM is compute-bound: it is reported in TFLOP/s (TOPS for s8) beside cuBLAS, in its own table,
// after a check that both give the same C: f32 against SGEMM (no TF32), tf32, bf16, f16 and s8
// against cublasGemmEx (TF32 compute, f32 compute, s32 compute).
// Each timed launch reads cold data: a case's buffers are rotated among enough copies that the
// bytes the launches touch exceed the L2 several times (a KV cache, of which a launch writes a
// few rows, is one buffer shared by the copies). 3 warm-up launches, then the median of N
// launches timed between events.
// Bytes count every tensor once: bytes read + bytes written, whatever the kernel re-reads.
//   truenoc_bench_kernels BUNDLE.tnb [--csv FILE] [--quick] [--reps N] [--check]
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backends/bundle/Bundle.h"
#include "ir/Float16.h"
#include "ir/Float8.h"
#include "truenort/Bundle.h"

using namespace truenort;

namespace {

const char* const kUsage =
    "usage: truenoc_bench_kernels BUNDLE.tnb [--csv FILE] [--quick] [--reps N] [--only OP[/DTYPE],...] [--check]\n"
    "  BUNDLE.tnb   the bench bundle (build/bin/bench_kernels.tnb, from tools/bench/kernels.toml)\n"
    "  --csv FILE   also write the table as CSV, each row as it is measured (input of tools/bench/torch_ref.py)\n"
    "  --quick      small sizes and 5 repetitions: a smoke run\n"
    "  --reps N     timed launches per measurement (default 30; the median is reported)\n"
    "  --only OP    measure (with --check: check) only the cases whose op starts with OP (e.g.\n"
    "               gemm_q, under a profiler); a comma-separated list takes the cases of each,\n"
    "               OP/DTYPE those of that dtype (gemm/s8)\n"
    "  --check      check every case's launches against the bundle's signatures (parameter\n"
    "               names, order, types) and list the cases with their byte counts; then, if a\n"
    "               device is there (a GPU, or TRUENORT_DRIVER=sim), run every case once at\n"
    "               tiny sizes and check that it completes, and the results of f32 GEMV, GEMM,\n"
    "               attention, gemv_q and gemm_q against the CPU\n";

constexpr int kWarmup = 3;
constexpr int kDeviceAttributeL2CacheSize = 38;  // CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE

[[noreturn]] void die(const std::string& what, const Error& e) {
  std::fprintf(stderr, "error: %s: %s\n", what.c_str(), e.describe().c_str());
  std::exit(1);
}

template <class T>
T must(Result<T> r, const std::string& what) {
  if (!r) die(what, r.error());
  return std::move(r.value());
}

void must(Status s, const std::string& what) {
  if (!s) die(what, s.error());
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// ---- cases --------------------------------------------------------------------------------

// Random in [-1, 1) as f32, bf16 or f16, random s8, random finite E4M3 codes (fp8 caches), zeros
// (outputs), u32 row indices (kv_scatter positions), u32 i * range (Strided: attention's cache
// offsets) or range (Constant: its lengths), or random u32 below range, repeats allowed (Ids: the
// experts of a prompt's tokens).
enum class Fill { F32, BF16, F16, S8, E4M3, Mxfp4, Zero, Positions, Strided, Constant, Ids };

struct Buffer {
  size_t bytes;
  Fill fill;
  uint32_t range = 0;   // Positions: distinct random rows in [0, range); Strided, Constant, Ids: see Fill
  bool shared = false;  // one allocation for every buffer set (a cache the case touches a little of)
};

// A kernel argument: one of the case's buffers, or a scalar, with the name of the parameter it
// is meant for (--check compares it with the bundle's signature).
struct ArgSpec {
  std::string param;
  int buffer = -1;
  Arg scalar{};
};
ArgSpec buf(const char* param, int i) { return {param, i, {}}; }
template <class T>
ArgSpec val(const char* param, T v) {
  return {param, -1, arg(v)};
}

struct Launch {
  std::string kernel;
  std::vector<ArgSpec> args;
};

struct Case {
  std::string op, shape, dtype;
  std::vector<Buffer> buffers;
  std::vector<Launch> launches;  // one op may be several launches (long softmax rows)
  double bytes = 0;              // read + written, each tensor once
  uint32_t gemvM = 0, gemvK = 0;  // f32 gemv: also timed with cuBLAS on buffers 0 (w), 1 (x), 2 (y)
  // gemv: checked against the CPU on buffers 0 (w), 1 (x), 2 (y), each f32 or bf16 (--check).
  struct Gemv {
    uint32_t m, k;
    bool wBf16, xBf16;
    float fp8Scale = 0;  // w holds E4M3 codes times this (w_scale), not f32 or bf16
  };
  std::optional<Gemv> gemv{};
  // gemm: buffers 0 (a, m x k), 1 (b: k x n for f32, else n x k), 2 (c, m x n), each gemmBatch
  // matrices one after the other; dtype names the member (gemmMember).
  uint32_t gemmM = 0, gemmN = 0, gemmK = 0, gemmBatch = 1;
  // gemm over fp8 B (op gemm_fp8): buffer 1 holds E4M3 codes, and gemmB (filled from them by
  // deriveBuffers) their bf16 values, the B that cuBLAS and the CPU check multiply; fp8 A too
  // (op gemm_w8a8): buffer 0 holds codes and gemmA their bf16 values.
  bool gemmCodes = false, gemmCodesA = false;
  int gemmA = 0, gemmB = 1;
  // gemv_q: the second reference, our dequantize to bf16 (refLaunches) then cublasGemmEx of
  // those weights (buffer refW) with the activations rounded to bf16 (refX, from the f32 x in
  // buffer refSrcX, its q8_1 blocks in the next) into refY; y = the last buffer of the case, just
  // before refW. gemv_q_swiglu: also the up weights (refW2) into refY2, then our swiglu
  // (refThen) of refY and refY2 into refOut.
  std::vector<Launch> refLaunches{};
  uint32_t refM = 0, refK = 0, refNtok = 0;
  int refW = -1, refX = -1, refY = -1, refSrcX = 1;
  int refW2 = -1, refY2 = -1, refOut = -1;
  std::vector<Launch> refThen{};
  int refCompared() const { return refOut >= 0 ? refOut : refY; }
  // A fused kernel whose reference is its unfused chain of our own kernels (refLaunches, no
  // cuBLAS; refM 0): buffer `first` (the kernel's output) must equal `second` (the chain's) byte
  // for byte.
  std::pair<int, int> refEqual{-1, -1};
  double flops() const { return 2.0 * gemmM * gemmN * gemmK * gemmBatch; }
  // Attention: the problem, for the check of sampled output rows against a CPU reference, and
  // the FLOPs of prefill (its table reports TFLOP/s beside the bandwidth).
  struct Attention {
    bool decode;
    uint32_t batch, seqQ, seqK, qHeads, kvHeads, dim;
    bool causal;
    uint32_t window = 0;  // sliding window: the last `window` keys up to a row's own (0: all)
    bool bias = false;    // prefill: a seq_q x seq_k bf16 bias shared by every sequence and head, buffer 4
    float fp8Scale = 0;   // decode: K and V are E4M3 codes times this (k_scale = v_scale), not bf16
    uint32_t vDim = 0;    // decode, mla: V is the first vDim elements of K's rows (no V buffer), o vDim a head
    uint32_t vHead = 0;   // prefill: V (buffer 2) and o vHead elements a head, not dim
  };
  std::optional<Attention> attention = std::nullopt;
  double attentionFlops = 0;
};

// The gemm members measured. f32 multiplies row-major A and B (cuBLAS SGEMM's best case among
// row-major layouts); the tensor-core members B column-major, as x W^T for a weight W kept n x k
// (PyTorch's Linear), the layout inference uses and cuBLAS's tensor-core kernels prefer.
struct GemmMember {
  const char* dtype;
  unsigned inBytes, outBytes;
  Fill fill;
  int cudaIn, cudaOut, compute;  // cudaDataType_t and cublasComputeType_t of cublasGemmEx
};
constexpr GemmMember kGemmMembers[] = {
    {"f32", 4, 4, Fill::F32, 0, 0, 68},
    {"tf32", 4, 4, Fill::F32, 0, 0, 77},   // CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32
    {"bf16", 2, 2, Fill::BF16, 14, 14, 68},  // CUDA_R_16BF, CUBLAS_COMPUTE_32F
    {"f16", 2, 2, Fill::F16, 2, 2, 68},      // CUDA_R_16F
    {"s8", 1, 4, Fill::S8, 3, 10, 72},       // CUDA_R_8I -> CUDA_R_32I, CUBLAS_COMPUTE_32I
};
// The dequantize-then-cuBLAS reference of gemv_q: bf16 weights and activations, f32 y and compute.
constexpr GemmMember kDequantRef = {"bf16", 2, 4, Fill::BF16, 14, 0, 68};  // CUDA_R_16BF -> CUDA_R_32F
const GemmMember& gemmMember(const std::string& dtype) {
  for (const GemmMember& g : kGemmMembers)
    if (dtype == g.dtype) return g;
  return kGemmMembers[0];
}

size_t sizeOf(const std::string& dtype) { return dtype == "f32" ? 4 : 2; }
Fill fillOf(const std::string& dtype) { return dtype == "f32" ? Fill::F32 : Fill::BF16; }
std::string dims(uint64_t a, uint64_t b) { return std::to_string(a) + "x" + std::to_string(b); }

// Below this many rows `softmax`, `rmsnorm`, `layernorm` and `argmax` (a block or a warp per row)
// leave SMs idle and the split pairs (softmax_partial + softmax_merge, rmsnorm_partial +
// rmsnorm_merge, layernorm_partial + layernorm_merge, argmax_partial + argmax_merge) spread each
// row over several blocks; with many rows one block per row is better (the softmax and norm pairs
// read x twice, and a large x no longer fits in L2).
constexpr uint32_t kFewRows = 256;

// A row op's case; `name` may add a kernel variant's suffix to the op (layernorm_c4096: the
// layernorm_c4096_DTYPE kernel, one launch whatever the row count).
Case rowCase(const std::string& name, const std::string& dtype, uint32_t rows, uint32_t cols) {
  Case c{name, dims(rows, cols), dtype, {}, {}, 0, 0, 0};
  size_t es = sizeOf(dtype), n = size_t(rows) * cols;
  Fill f = fillOf(dtype);
  std::string k = name + "_" + dtype;
  const std::string op = name == "sample_filtered_block" ? "sample_filtered" : name.substr(0, name.find("_c4096"));
  const bool few = rows < kFewRows && op == name;  // the split pairs
  const float eps = 1e-5f;
  if (op == "softmax" && few) {
    // Few rows, too few blocks for one per row: the split pair (docs/kernels.md). Pass 1 writes
    // per-chunk (max, sum) pairs, pass 2 merges and writes y. The stats buffer allows chunks as
    // small as 32 elements (the template's are 4096).
    size_t stats = size_t(rows) * ((cols + 31) / 32) * 8;
    c.buffers = {{n * es, f}, {stats, Fill::Zero}, {n * es, Fill::Zero}};
    c.launches = {{"softmax_partial_" + dtype, {buf("x", 0), buf("stats", 1), val("rows", rows), val("cols", cols)}},
                  {"softmax_merge_" + dtype,
                   {buf("x", 0), buf("stats", 1), buf("y", 2), val("rows", rows), val("cols", cols)}}};
    c.bytes = 2.0 * n * es;
  } else if (op == "softmax") {
    c.buffers = {{n * es, f}, {n * es, Fill::Zero}};
    c.launches = {{k, {buf("x", 0), buf("y", 1), val("rows", rows), val("cols", cols)}}};
    c.bytes = 2.0 * n * es;
  } else if (op == "layernorm" && few) {  // the split pair, stats as for softmax's
    size_t stats = size_t(rows) * ((cols + 31) / 32) * 8;
    c.buffers = {{n * es, f}, {cols * es, f}, {cols * es, f}, {stats, Fill::Zero}, {n * es, Fill::Zero}};
    c.launches = {{"layernorm_partial_" + dtype, {buf("x", 0), buf("stats", 3), val("rows", rows), val("cols", cols)}},
                  {"layernorm_merge_" + dtype,
                   {buf("x", 0), buf("gamma", 1), buf("beta", 2), buf("stats", 3), buf("y", 4), val("rows", rows),
                    val("cols", cols), val("eps", eps)}}};
    c.bytes = 2.0 * n * es + 2.0 * cols * es;
  } else if (op == "layernorm") {
    c.buffers = {{n * es, f}, {cols * es, f}, {cols * es, f}, {n * es, Fill::Zero}};
    c.launches = {{k,
                   {buf("x", 0), buf("gamma", 1), buf("beta", 2), buf("y", 3), val("rows", rows), val("cols", cols),
                    val("eps", eps)}}};
    c.bytes = 2.0 * n * es + 2.0 * cols * es;
  } else if (op == "residual_rmsnorm") {  // residual is read and written (h = x + residual)
    c.buffers = {{n * es, f}, {n * es, f}, {cols * es, f}, {n * es, Fill::Zero}};
    c.launches = {{k,
                   {buf("x", 0), buf("residual", 1), buf("weight", 2), buf("y", 3), val("rows", rows),
                    val("cols", cols), val("eps", eps)}}};
    c.bytes = 4.0 * n * es + 1.0 * cols * es;
  } else if ((op == "argmax" || op == "argmax_sample") && few) {
    // Few rows: the split pair, each row spread over ceil_div(cols, 1024) blocks; the partial
    // buffer allows chunks as small as 32 elements (the template's are 1024). argmax_sample: the
    // sample option's kernels, a sample of softmax(x / 0.8).
    const bool sample = op == "argmax_sample";
    size_t partial = size_t(rows) * ((cols + 31) / 32) * 8;
    c.buffers = {{n * es, f}, {partial, Fill::Zero}, {size_t(rows) * 4, Fill::Zero}};
    std::vector<ArgSpec> args{buf("x", 0), buf("partial", 1), val("rows", rows), val("cols", cols)};
    if (sample) args.insert(args.end(), {val("temperature", 0.8f), val("seed", 1234u)});
    c.launches = {{(sample ? "argmax_sample_partial_" : "argmax_partial_") + dtype, args},
                  {"argmax_merge", {buf("partial", 1), buf("index", 2), val("rows", rows), val("cols", cols)}}};
    c.bytes = 1.0 * n * es + 4.0 * rows;
  } else if (op == "argmax" || op == "argmax_sample") {  // u32 indices out
    c.buffers = {{n * es, f}, {size_t(rows) * 4, Fill::Zero}};
    std::vector<ArgSpec> args{buf("x", 0), buf("index", 1), val("rows", rows), val("cols", cols)};
    if (op == "argmax_sample") args.insert(args.end(), {val("temperature", 0.8f), val("seed", 1234u)});
    c.launches = {{k, args}};
    c.bytes = 1.0 * n * es + 4.0 * rows;
  } else if (op == "sample_filtered") {
    // Sampling with top_k 50, top_p 0.9 and min_p 0.05 at temperature 0.8: sample_cutoff writes
    // each row's threshold, then argmax's sample with cutoff draws (few rows: its split pair).
    // Few rows take sample_cutoff_split's ten launches (sample_filtered_block: sample_cutoff's one
    // block a row beside them).
    const bool fewRows = rows < kFewRows;
    c.buffers = {{n * es, f}, {size_t(rows) * 4, Fill::Zero}, {size_t(rows) * 4, Fill::Zero}};
    const std::vector<ArgSpec> filters{val("temperature", 0.8f), val("top_k", 50u), val("top_p", 0.9f), val("min_p", 0.05f)};
    if (fewRows && name == op) {
      const uint32_t chunk = 2048;  // the template's default
      c.buffers.push_back({size_t(rows) * (2072 + (cols + chunk - 1) / chunk) * 8, Fill::Zero});
      for (uint32_t step = 0; step < 10; ++step) {
        std::vector<ArgSpec> args{buf("x", 0), buf("cutoff", 1), buf("work", 3), val("rows", rows), val("cols", cols)};
        args.insert(args.end(), filters.begin(), filters.end());
        args.push_back(val("step", step));
        c.launches.push_back({"sample_cutoff_split_" + dtype, args});
      }
    } else {
      std::vector<ArgSpec> args{buf("x", 0), buf("cutoff", 1), val("rows", rows), val("cols", cols)};
      args.insert(args.end(), filters.begin(), filters.end());
      c.launches = {{"sample_cutoff_" + dtype, args}};
    }
    if (fewRows) {
      size_t partial = size_t(rows) * ((cols + 31) / 32) * 8;
      c.buffers.push_back({partial, Fill::Zero});
      const int p = int(c.buffers.size()) - 1;
      c.launches.push_back({"argmax_sample_cutoff_partial_" + dtype,
                            {buf("x", 0), buf("partial", p), val("rows", rows), val("cols", cols),
                             val("temperature", 0.8f), val("seed", 1234u), buf("cutoff", 1)}});
      c.launches.push_back({"argmax_merge", {buf("partial", p), buf("index", 2), val("rows", rows), val("cols", cols)}});
    } else {
      c.launches.push_back({"argmax_sample_cutoff_" + dtype,
                            {buf("x", 0), buf("index", 2), val("rows", rows), val("cols", cols), val("temperature", 0.8f),
                             val("seed", 1234u), buf("cutoff", 1)}});
    }
    c.bytes = 2.0 * n * es + 8.0 * rows;  // x read by each kernel once from DRAM (the passes mostly hit L2)
  } else if (op == "transpose") {
    c.buffers = {{n * es, f}, {n * es, Fill::Zero}};
    c.launches = {{k, {buf("x", 0), buf("y", 1), val("rows", rows), val("cols", cols)}}};
    c.bytes = 2.0 * n * es;
  } else if (few) {  // rmsnorm, few rows: the split pair, stats as for softmax's
    size_t stats = size_t(rows) * ((cols + 31) / 32) * 8;
    c.buffers = {{n * es, f}, {cols * es, f}, {stats, Fill::Zero}, {n * es, Fill::Zero}};
    c.launches = {{"rmsnorm_partial_" + dtype, {buf("x", 0), buf("stats", 2), val("rows", rows), val("cols", cols)}},
                  {"rmsnorm_merge_" + dtype,
                   {buf("x", 0), buf("weight", 1), buf("stats", 2), buf("y", 3), val("rows", rows), val("cols", cols),
                    val("eps", eps)}}};
    c.bytes = 2.0 * n * es + 1.0 * cols * es;
  } else {  // rmsnorm
    c.buffers = {{n * es, f}, {cols * es, f}, {n * es, Fill::Zero}};
    c.launches = {{k, {buf("x", 0), buf("weight", 1), buf("y", 2), val("rows", rows), val("cols", cols),
                       val("eps", eps)}}};
    c.bytes = 2.0 * n * es + 1.0 * cols * es;
  }
  return c;
}

// Elementwise ops over n elements; `op` is the kernel name without the dtype (gelu_tanh, ...).
Case elementwiseCase(const std::string& op, const std::string& dtype, uint32_t n) {
  Case c{op, std::to_string(n), dtype, {}, {}, 0, 0, 0};
  size_t bytes = size_t(n) * sizeOf(dtype);
  Fill f = fillOf(dtype);
  std::string k = op + "_" + dtype;
  if (op == "add" || op == "mul") {
    c.buffers = {{bytes, f}, {bytes, f}, {bytes, Fill::Zero}};
    c.launches = {{k, {buf("a", 0), buf("b", 1), buf("y", 2), val("n", n)}}};
    c.bytes = 3.0 * bytes;
  } else if (op == "swiglu") {
    c.buffers = {{bytes, f}, {bytes, f}, {bytes, Fill::Zero}};
    c.launches = {{k, {buf("gate", 0), buf("up", 1), buf("y", 2), val("n", n)}}};
    c.bytes = 3.0 * bytes;
  } else if (op == "scale") {
    c.buffers = {{bytes, f}, {bytes, Fill::Zero}};
    c.launches = {{k, {buf("x", 0), buf("y", 1), val("alpha", 1.5f), val("n", n)}}};
    c.bytes = 2.0 * bytes;
  } else if (op == "residual_add") {  // y += x: y is read and written
    c.buffers = {{bytes, f}, {bytes, f}};
    c.launches = {{k, {buf("y", 0), buf("x", 1), val("n", n)}}};
    c.bytes = 3.0 * bytes;
  } else {  // relu, gelu_*, silu
    c.buffers = {{bytes, f}, {bytes, Fill::Zero}};
    c.launches = {{k, {buf("x", 0), buf("y", 1), val("n", n)}}};
    c.bytes = 2.0 * bytes;
  }
  return c;
}

// gemv: f32 or bf16 weights with f32 x and y (op gemv), or bf16 weights, x and y (op gemv_xbf16,
// PyTorch's torch.mv in bf16: the same bytes).
Case gemvCase(const std::string& weight, uint32_t m, uint32_t k, bool xBf16 = false) {
  Case c{xBf16 ? "gemv_xbf16" : "gemv", dims(m, k), weight, {}, {}, 0, 0, 0};
  const size_t w = size_t(m) * k * sizeOf(weight), x = xBf16 ? 2 : 4;
  c.buffers = {{w, fillOf(weight)}, {size_t(k) * x, xBf16 ? Fill::BF16 : Fill::F32}, {size_t(m) * x, Fill::Zero}};
  c.launches = {{"gemv_" + weight + (xBf16 ? "_xbf16" : ""), {buf("w", 0), buf("x", 1), buf("y", 2), val("m", m), val("k", k)}}};
  c.bytes = double(w) + double(x) * (k + m);
  if (weight == "f32") {
    c.gemvM = m;
    c.gemvK = k;
  }
  c.gemv = Case::Gemv{m, k, weight == "bf16", xBf16};
  return c;
}

// gemv over fp8 weights (op gemv_fp8): E4M3 codes with one scale (1/448) for the tensor, bf16 x
// and y, beside the gemv_xbf16 row of the same shape (twice the weight bytes) and PyTorch's bf16
// mv of the same problem.
Case gemvFp8Case(uint32_t m, uint32_t k) {
  Case c{"gemv_fp8", dims(m, k), "bf16", {}, {}, 0, 0, 0};
  const size_t w = size_t(m) * k;
  const float scale = 1.0f / 448;
  c.buffers = {{w, Fill::E4M3}, {size_t(k) * 2, Fill::BF16}, {size_t(m) * 2, Fill::Zero}};
  c.launches = {{"gemv_e4m3_xbf16", {buf("w", 0), buf("x", 1), buf("y", 2), val("m", m), val("k", k), val("w_scale", scale)}}};
  c.bytes = double(w) + 2.0 * (k + m);
  c.gemv = Case::Gemv{m, k, false, true, scale};
  return c;
}

// quantize_fp8 (op quantize_fp8): bf16 weights to E4M3 codes with a scale per row (the row's
// largest |x| / 448), as a bf16 checkpoint is quantized at load time; bytes: x once, the codes and
// the scales (the kernel reads x once, into registers, where the row fits its max_cols). Beside
// PyTorch's amax, division and cast to float8_e4m3fn. `variant`: "_c4096", the kernel for rows of
// at most 4096 elements (fewer registers, more blocks an SM).
Case quantizeFp8Case(uint32_t rows, uint32_t cols, const std::string& variant = "") {
  Case c{"quantize_fp8" + variant, dims(rows, cols), "bf16", {}, {}, 0, 0, 0};
  const size_t n = size_t(rows) * cols;
  c.buffers = {{n * 2, Fill::BF16}, {n, Fill::Zero}, {size_t(rows) * 4, Fill::Zero}};
  c.launches = {{"quantize_e4m3" + variant + "_bf16",
                 {buf("x", 0), buf("codes", 1), buf("scales", 2), val("rows", rows), val("cols", cols)}}};
  c.bytes = 3.0 * double(n) + 4.0 * rows;
  return c;
}

// ggml-quantized weights (kernels/Quant.cpp). A weight buffer is random halves in every 2-byte
// slot, so every block scale is finite and in [-1, 1] (blocks start at even offsets).
struct QuantFormat {
  const char* name;
  uint32_t qk, bytes;
};
constexpr QuantFormat kQuantFormats[] = {{"q4_0", 32, 18},     {"q8_0", 32, 34},     {"q4_k", 256, 144},
                                         {"q5_k", 256, 176},   {"q6_k", 256, 210},   {"mxfp4", 32, 17},
                                         {"iq2_xxs", 256, 66}, {"iq3_xxs", 256, 98}, {"iq1_s", 256, 50},
                                         {"nvfp4", 64, 36}};

// How a format's weights are filled: random halves in every 2-byte slot (every scale finite; an
// nvfp4 UE4M3 scale byte is a half's low byte or its high one, 0x3C or less, or that with bit 7,
// which the format does not read), or for mxfp4 random codes under E8M0 scales of 2^-7 .. 2^-2
// (Fill::Mxfp4).
Fill weightFill(const QuantFormat& f) { return std::string(f.name) == "mxfp4" ? Fill::Mxfp4 : Fill::F16; }

// The dequantize-then-cuBLAS reference of a case whose buffer 0 is W (m x k), buffer 1 the f32 x
// (ntok x k) and last buffer y (ntok x m, f32): its buffers go after y.
void addDequantRef(Case& c, const QuantFormat& f, uint32_t m, uint32_t k, uint32_t ntok) {
  int ref = int(c.buffers.size());
  c.buffers.push_back({size_t(m) * k * 2, Fill::Zero});
  c.buffers.push_back({size_t(ntok) * k * 2, Fill::Zero});
  c.buffers.push_back({size_t(ntok) * m * 4, Fill::Zero});
  c.refLaunches = {{std::string("dequantize_") + f.name + "_bf16", {buf("q", 0), buf("y", ref), val("rows", m), val("k", k)}}};
  c.refM = m, c.refK = k, c.refNtok = ntok;
  c.refW = ref, c.refX = ref + 1, c.refY = ref + 2;
}

// gemv_q_swiglu's reference (buffers 0 gate, 1 up, 2 the f32 x, y last): addDequantRef's of the
// gate weights, and the up weights dequantized and multiplied likewise, then silu(gate) * up by
// our swiglu kernel, whose `gate` is the factor and `up` the silu's argument (docs/kernels.md):
// swiglu(gate = up product, up = gate product). The unfused chain, dequantize + cuBLAS.
void addSwigluRef(Case& c, const QuantFormat& f, uint32_t m, uint32_t k, uint32_t ntok) {
  addDequantRef(c, f, m, k, ntok);
  c.refSrcX = 2;
  const int more = int(c.buffers.size());
  c.buffers.push_back({size_t(m) * k * 2, Fill::Zero});
  c.buffers.push_back({size_t(ntok) * m * 4, Fill::Zero});
  c.buffers.push_back({size_t(ntok) * m * 4, Fill::Zero});
  c.refW2 = more, c.refY2 = more + 1, c.refOut = more + 2;
  c.refLaunches.push_back({std::string("dequantize_") + f.name + "_bf16", {buf("q", 1), buf("y", more), val("rows", m), val("k", k)}});
  c.refThen = {{"swiglu_f32", {buf("gate", c.refY2), buf("up", c.refY), buf("y", c.refOut), val("n", ntok * m)}}};
}

// y = W x for ntok columns (gemv_q): f32 x, or "q8_1": x quantized by quantize_q8_1 first, that
// launch included in the time and its bytes in the count. W's bytes dominate the count. The
// reference: W dequantized to bf16 by our dequantize, then cublasGemmEx (bf16 x), both timed.
// rowsPerWarp and warpsPerRow 0 take the template's defaults; others the kernel built with that
// rows_per_warp or warps_per_row (op and kernel names end in _rN or _wN).
Case gemvQCase(const QuantFormat& f, const std::string& act, uint32_t m, uint32_t k, uint32_t ntok,
               unsigned rowsPerWarp = 0, unsigned warpsPerRow = 0) {
  const std::string r = (rowsPerWarp ? "_r" + std::to_string(rowsPerWarp) : "") +
                        (warpsPerRow ? "_w" + std::to_string(warpsPerRow) : "");
  Case c{std::string("gemv_q_") + f.name + r, dims(m, k) + ":" + std::to_string(ntok), act, {}, {}, 0, 0, 0};
  size_t w = size_t(m) * (k / f.qk) * f.bytes, x = size_t(ntok) * k * 4, y = size_t(ntok) * m * 4;
  std::string n = "_n" + std::to_string(ntok) + r;
  if (act == "f32") {
    c.buffers = {{w, weightFill(f)}, {x, Fill::F32}, {y, Fill::Zero}};
    c.launches = {{std::string("gemv_q_") + f.name + n, {buf("w", 0), buf("x", 1), buf("y", 2), val("m", m), val("k", k)}}};
    c.bytes = double(w) + double(x) + double(y);
  } else {
    size_t xq = size_t(ntok) * (k / 32) * 36;
    c.buffers = {{w, weightFill(f)}, {x, Fill::F32}, {xq, Fill::Zero}, {y, Fill::Zero}};
    c.launches = {{"quantize_q8_1_f32", {buf("x", 1), buf("y", 2), val("n", ntok * k)}},
                  {std::string("gemv_q_") + f.name + "_q8_1" + n,
                   {buf("w", 0), buf("x", 2), buf("y", 3), val("m", m), val("k", k)}}};
    c.bytes = double(w) + double(x) + 2.0 * double(xq) + double(y);
  }
  addDequantRef(c, f, m, k, ntok);
  return c;
}

// Prefill (gemm_q): ntok tokens quantized by quantize_q8_1 (in the time), then the int8 mma
// product; the same dequantize-then-cublasGemmEx reference as gemv_q. tile64: the tile_n = 64
// kernel (op gemm_q64_FORMAT).
Case gemmQCase(const QuantFormat& f, uint32_t m, uint32_t k, uint32_t ntok, bool tile64 = false) {
  Case c{std::string(tile64 ? "gemm_q64_" : "gemm_q_") + f.name, dims(m, k) + ":" + std::to_string(ntok), "q8_1",
         {}, {}, 0, 0, 0};
  size_t w = size_t(m) * (k / f.qk) * f.bytes, x = size_t(ntok) * k * 4, xq = size_t(ntok) * (k / 32) * 36,
         y = size_t(ntok) * m * 4;
  c.buffers = {{w, weightFill(f)}, {x, Fill::F32}, {xq, Fill::Zero}, {y, Fill::Zero}};
  c.launches = {{"quantize_q8_1_f32", {buf("x", 1), buf("y", 2), val("n", ntok * k)}},
                {std::string("gemm_q_") + f.name + (tile64 ? "_t64" : ""),
                 {buf("w", 0), buf("x", 2), buf("y", 3), val("m", m), val("k", k), val("ntok", ntok)}}};
  c.bytes = double(w) + double(x) + 2.0 * double(xq) + double(y);
  addDequantRef(c, f, m, k, ntok);
  return c;
}

// The fused gate+up projection (gemv_q_swiglu): two m x k matrices, one pass.
Case gemvQSwigluCase(const QuantFormat& f, const std::string& act, uint32_t m, uint32_t k, uint32_t ntok) {
  Case c{std::string("gemv_q_swiglu_") + f.name, dims(m, k) + ":" + std::to_string(ntok), act, {}, {}, 0, 0, 0};
  size_t w = size_t(m) * (k / f.qk) * f.bytes, x = size_t(ntok) * k * 4, y = size_t(ntok) * m * 4;
  std::string kernel = std::string("gemv_q_swiglu_") + f.name + (act == "f32" ? "" : "_q8_1") + "_n" + std::to_string(ntok);
  if (act == "f32") {
    c.buffers = {{w, weightFill(f)}, {w, weightFill(f)}, {x, Fill::F32}, {y, Fill::Zero}};
    c.launches = {{kernel, {buf("gate", 0), buf("up", 1), buf("x", 2), buf("y", 3), val("m", m), val("k", k)}}};
    c.bytes = 2.0 * double(w) + double(x) + double(y);
  } else {
    size_t xq = size_t(ntok) * (k / 32) * 36;
    c.buffers = {{w, weightFill(f)}, {w, weightFill(f)}, {x, Fill::F32}, {xq, Fill::Zero}, {y, Fill::Zero}};
    c.launches = {{"quantize_q8_1_f32", {buf("x", 2), buf("y", 3), val("n", ntok * k)}},
                  {kernel, {buf("gate", 0), buf("up", 1), buf("x", 3), buf("y", 4), val("m", m), val("k", k)}}};
    c.bytes = 2.0 * double(w) + double(x) + 2.0 * double(xq) + double(y);
  }
  addSwigluRef(c, f, m, k, ntok);
  return c;
}

// A mixture-of-experts layer's expert products at decode (gemv_q / gemv_q_swiglu with experts):
// `tokens` tokens of `slots` pairs each, every pair a distinct expert of `experts` (so each expert
// matrix a launch reads is read once); the fused gate+up projection on x shared by a token's
// pairs (slots), or the down projection on each pair's own row (slots 1). f32 x, or "q8_1": x
// quantized first, in the time. The bytes: the experts' matrices the pairs read, x, y and the ids.
Case gemvQExpertsCase(const QuantFormat& f, const std::string& act, bool swiglu, uint32_t experts, uint32_t m,
                      uint32_t k, uint32_t tokens, uint32_t slots) {
  const uint32_t pairs = tokens * slots, xrows = swiglu ? tokens : pairs;
  Case c{std::string(swiglu ? "gemv_q_experts_swiglu_" : "gemv_q_experts_") + f.name,
         std::to_string(experts) + "x" + dims(m, k) + ":" + std::to_string(pairs), act, {}, {}, 0, 0, 0};
  const size_t one = size_t(m) * (k / f.qk) * f.bytes, x = size_t(xrows) * k * 4, y = size_t(pairs) * m * 4;
  const size_t xq = size_t(xrows) * (k / 32) * 36;
  const std::string kernel = std::string(swiglu ? "gemv_q_experts_swiglu_" : "gemv_q_experts_") + f.name +
                             (act == "f32" ? "" : "_q8_1");
  const int mats = swiglu ? 2 : 1;
  for (int i = 0; i < mats; ++i) c.buffers.push_back({one * experts, weightFill(f)});
  const int xb = mats, xqb = mats + 1, yb = act == "f32" ? mats + 1 : mats + 2, idb = yb + 1;
  c.buffers.push_back({x, Fill::F32});
  if (act != "f32") c.buffers.push_back({xq, Fill::Zero});
  c.buffers.push_back({y, Fill::Zero});
  c.buffers.push_back({size_t(pairs) * 4, Fill::Positions, experts});
  if (act != "f32") c.launches.push_back({"quantize_q8_1_f32", {buf("x", xb), buf("y", xqb), val("n", xrows * k)}});
  std::vector<ArgSpec> args;
  if (swiglu) args = {buf("gate", 0), buf("up", 1)};
  else args = {buf("w", 0)};
  for (ArgSpec a : {buf("x", act == "f32" ? xb : xqb), buf("y", yb), buf("ids", idb), val("m", m), val("k", k),
                    val("n_experts", experts), val("pairs", pairs), val("slots", swiglu ? slots : 1u)})
    args.push_back(a);
  c.launches.push_back({kernel, args});
  c.bytes = double(pairs) * mats * double(one) + double(x) + (act == "f32" ? 0.0 : 2.0 * double(xq)) + double(y) +
            4.0 * pairs;
  return c;
}

// The tiles moe_align may fill (docs/kernels.md): ceil_div(pairs, tile) + min(experts + 1, pairs).
size_t moeTiles(uint32_t pairs, uint32_t experts, uint32_t tile) {
  return (size_t(pairs) + tile - 1) / tile + std::min<size_t>(size_t(experts) + 1, pairs);
}

// A prompt's (token, slot) pairs grouped by expert (moe_align, tiles of 32): `tokens` tokens of
// `slots` random experts of `experts` each. The bytes: the ids read, sorted and tile_experts
// written.
Case moeAlignCase(uint32_t experts, uint32_t tokens, uint32_t slots) {
  const uint32_t pairs = tokens * slots;
  const size_t tiles = moeTiles(pairs, experts, 32);
  Case c{"moe_align", std::to_string(experts) + "x" + std::to_string(pairs), "u32", {}, {}, 0, 0, 0};
  c.buffers = {{size_t(pairs) * 4, Fill::Ids, experts}, {tiles * 32 * 4, Fill::Zero}, {tiles * 4, Fill::Zero}};
  c.launches = {{"moe_align", {buf("ids", 0), buf("sorted", 1), buf("tile_experts", 2), val("pairs", pairs),
                               val("n_experts", experts)}}};
  c.bytes = 4.0 * pairs + 4.0 * double(tiles) * 33;
  return c;
}

// A mixture-of-experts layer's expert product at prefill (gemm_q with experts): `tokens` tokens
// of `slots` random experts each, x quantized (quantize_q8_1), the pairs grouped (moe_align) and
// the grouped GEMM, all three in the time; the gate (or up) projection, x shared by a token's
// pairs. The bytes: every expert's matrix once, x, its q8_1 blocks twice, y, the ids and the
// grouping.
Case gemmQExpertsCase(const QuantFormat& f, uint32_t experts, uint32_t m, uint32_t k, uint32_t tokens, uint32_t slots) {
  const uint32_t pairs = tokens * slots;
  const size_t tiles = moeTiles(pairs, experts, 32);
  Case c{std::string("gemm_q_experts_") + f.name, std::to_string(experts) + "x" + dims(m, k) + ":" + std::to_string(pairs),
         "q8_1", {}, {}, 0, 0, 0};
  const size_t one = size_t(m) * (k / f.qk) * f.bytes, x = size_t(tokens) * k * 4, xq = size_t(tokens) * (k / 32) * 36,
               y = size_t(pairs) * m * 4;
  c.buffers = {{one * experts, weightFill(f)}, {x, Fill::F32},     {xq, Fill::Zero},
               {y, Fill::Zero},            {size_t(pairs) * 4, Fill::Ids, experts},
               {tiles * 32 * 4, Fill::Zero}, {tiles * 4, Fill::Zero}};
  c.launches = {{"quantize_q8_1_f32", {buf("x", 1), buf("y", 2), val("n", tokens * k)}},
                {"moe_align", {buf("ids", 4), buf("sorted", 5), buf("tile_experts", 6), val("pairs", pairs),
                               val("n_experts", experts)}},
                {std::string("gemm_q_experts_") + f.name,
                 {buf("w", 0), buf("x", 2), buf("y", 3), buf("sorted", 5), buf("tile_experts", 6), val("m", m),
                  val("k", k), val("n_experts", experts), val("pairs", pairs), val("slots", slots)}}};
  c.bytes = double(one) * experts + double(x) + 2.0 * double(xq) + double(y) + 4.0 * pairs + 4.0 * double(tiles) * 33;
  return c;
}

// rmsnorm fused into the q8_1 quantization of the activations (rmsnorm_quantize_q8_1). The
// reference: our rmsnorm then quantize_q8_1, whose blocks the fused kernel's equal byte for byte.
// `variant`: both kernels' max_cols ("_c4096": rows of at most 4096 in registers).
Case rmsnormQ81Case(const std::string& dtype, uint32_t rows, uint32_t cols, const std::string& variant = "") {
  Case c{"rmsnorm_quantize_q8_1" + variant, dims(rows, cols), dtype, {}, {}, 0, 0, 0};
  size_t es = sizeOf(dtype), n = size_t(rows) * cols, yq = n / 32 * 36;
  c.buffers = {{n * es, fillOf(dtype)}, {cols * es, fillOf(dtype)}, {yq, Fill::Zero}, {n * es, Fill::Zero}, {yq, Fill::Zero}};
  c.launches = {{"rmsnorm_quantize_q8_1" + variant + "_" + dtype,
                 {buf("x", 0), buf("weight", 1), buf("y", 2), val("rows", rows), val("cols", cols), val("eps", 1e-5f)}}};
  c.refLaunches = {{"rmsnorm" + variant + "_" + dtype, {buf("x", 0), buf("weight", 1), buf("y", 3), val("rows", rows),
                                                        val("cols", cols), val("eps", 1e-5f)}},
                   {"quantize_q8_1_" + dtype, {buf("x", 3), buf("y", 4), val("n", uint32_t(n))}}};
  c.refEqual = {2, 4};
  c.bytes = double(n * es) + double(cols * es) + double(yq);
  return c;
}

// rmsnorm fused into the fp8 quantization of a W8A8 gemm's activations (rmsnorm_quantize_fp8:
// bf16, E4M3, a scale per token), against its unfused chain, our rmsnorm + quantize_fp8 (codes
// compared byte for byte); bytes: x, weight, the codes and the scales. `variant` as rmsnormQ81Case's.
Case rmsnormFp8Case(uint32_t rows, uint32_t cols, const std::string& variant = "") {
  Case c{"rmsnorm_quantize_fp8" + variant, dims(rows, cols), "bf16", {}, {}, 0, 0, 0};
  const size_t n = size_t(rows) * cols;
  c.buffers = {{n * 2, Fill::BF16}, {cols * 2u, Fill::BF16}, {n, Fill::Zero}, {size_t(rows) * 4, Fill::Zero},
               {n * 2, Fill::Zero}, {n, Fill::Zero}, {size_t(rows) * 4, Fill::Zero}};
  c.launches = {{"rmsnorm_quantize_e4m3" + variant + "_bf16", {buf("x", 0), buf("weight", 1), buf("codes", 2),
                                                               buf("scales", 3), val("rows", rows), val("cols", cols),
                                                               val("eps", 1e-5f)}}};
  c.refLaunches = {{"rmsnorm" + variant + "_bf16", {buf("x", 0), buf("weight", 1), buf("y", 4), val("rows", rows),
                                                    val("cols", cols), val("eps", 1e-5f)}},
                   {"quantize_e4m3" + variant + "_bf16",
                    {buf("x", 4), buf("codes", 5), buf("scales", 6), val("rows", rows), val("cols", cols)}}};
  c.refEqual = {2, 5};
  c.bytes = 2.0 * double(n) + 2.0 * cols + double(n) + 4.0 * rows;
  return c;
}

// swiglu fused into the fp8 quantization of a W8A8 down projection's activations
// (swiglu_quantize_fp8: bf16, E4M3, a scale per token), against its unfused chain, our swiglu +
// quantize_fp8 (codes compared byte for byte); bytes: gate, up, the codes and the scales.
Case swigluFp8Case(uint32_t rows, uint32_t cols) {
  Case c{"swiglu_quantize_fp8", dims(rows, cols), "bf16", {}, {}, 0, 0, 0};
  const size_t n = size_t(rows) * cols;
  c.buffers = {{n * 2, Fill::BF16}, {n * 2, Fill::BF16}, {n, Fill::Zero}, {size_t(rows) * 4, Fill::Zero},
               {n * 2, Fill::Zero}, {n, Fill::Zero}, {size_t(rows) * 4, Fill::Zero}};
  c.launches = {{"swiglu_quantize_e4m3_bf16", {buf("gate", 0), buf("up", 1), buf("codes", 2), buf("scales", 3),
                                               val("rows", rows), val("cols", cols), val("ld", cols)}}};
  c.refLaunches = {{"swiglu_bf16", {buf("gate", 0), buf("up", 1), buf("y", 4), val("n", rows * cols)}},
                   {"quantize_e4m3_bf16", {buf("x", 4), buf("codes", 5), buf("scales", 6), val("rows", rows), val("cols", cols)}}};
  c.refEqual = {2, 5};
  c.bytes = 4.0 * double(n) + double(n) + 4.0 * rows;
  return c;
}

// A fused kernel's output against its unfused chain's, byte for byte: "" when equal.
std::string compareBytes(const DeviceMemory& ours, const DeviceMemory& ref, size_t bytes) {
  std::vector<uint8_t> a(bytes), b(bytes);
  must(ours.download(a.data(), bytes), "download");
  must(ref.download(b.data(), bytes), "download");
  for (size_t i = 0; i < bytes; ++i)
    if (a[i] != b[i])
      return "byte " + std::to_string(i) + " is " + std::to_string(a[i]) + ", the unfused chain's " + std::to_string(b[i]);
  return "";
}

// The m x k weights dequantized to bf16 (what a bf16 GEMM would take).
Case dequantizeCase(const QuantFormat& f, uint32_t m, uint32_t k) {
  Case c{std::string("dequantize_") + f.name, dims(m, k), "bf16", {}, {}, 0, 0, 0};
  size_t w = size_t(m) * (k / f.qk) * f.bytes, y = size_t(m) * k * 2;
  c.buffers = {{w, weightFill(f)}, {y, Fill::Zero}};
  c.launches = {{std::string("dequantize_") + f.name + "_bf16", {buf("q", 0), buf("y", 1), val("rows", m), val("k", k)}}};
  c.bytes = double(w) + double(y);
  return c;
}

// embedding: `tokens` rows gathered from a table of `rows` x k (bf16, or q4_k blocks) into bf16 y,
// at distinct random ids. The table is shared by the buffer sets: a launch reads only its rows.
Case embeddingCase(const std::string& format, uint32_t tokens, uint32_t rows, uint32_t k) {
  Case c{"embedding", dims(tokens, rows) + "x" + std::to_string(k), format, {}, {}, 0, 0, 0};
  const bool q4k = format == "q4_k";
  const size_t rowBytes = q4k ? size_t(k) / 256 * 144 : size_t(k) * 2;
  // q4_k blocks as random halves in every 2-byte slot: every scale finite (as gemv_q's cases).
  c.buffers = {{size_t(rows) * rowBytes, q4k ? Fill::F16 : Fill::BF16, 0, true},
               {size_t(tokens) * 4, Fill::Positions, rows},
               {size_t(tokens) * k * 2, Fill::Zero}};
  c.launches = {{"embedding_" + format + "_bf16",
                 {buf("table", 0), buf("ids", 1), buf("y", 2), val("n", tokens), val("rows", rows), val("k", k)}}};
  c.bytes = double(tokens) * (rowBytes + 2.0 * k + 4);  // the rows read, y written, the ids
  return c;
}

// Sampling's penalties on `rows` rows of a `cols` vocabulary, `n` tokens seen per row (distinct
// random ids). The logits are shared by the buffer sets: a launch touches only the ids' elements.
// `global`: the hash tables in a global workspace (table = "global", one for every buffer set, as
// a caller reuses it), not counted in the bytes: the same work as the shared tables.
Case penaltiesCase(uint32_t rows, uint32_t cols, uint32_t n, bool global = false) {
  Case c{global ? "logit_penalties_global" : "logit_penalties", dims(rows, cols) + "x" + std::to_string(n), "f32",
         {}, {}, 0, 0, 0};
  c.buffers = {{size_t(rows) * cols * 4, Fill::F32, 0, true}, {size_t(rows) * n * 4, Fill::Positions, cols}};
  Launch launch{global ? "logit_penalties_global_f32" : "logit_penalties_f32", {buf("logits", 0), buf("tokens", 1)}};
  if (global) {
    c.buffers.push_back({size_t(rows) * (2 * size_t(n) + 1) * 8, Fill::Zero, 0, true});
    launch.args.push_back(buf("table", 2));
  }
  launch.args.insert(launch.args.end(), {val("rows", rows), val("cols", cols), val("n", n), val("repetition", 1.3f),
                                         val("frequency", 0.25f), val("presence", 0.5f)});
  c.launches = {launch};
  c.bytes = 12.0 * rows * n;  // the ids, and their logits read and written
  return c;
}

// Speculative decoding's verification of k drafts for each of `rows` requests over a `cols`
// vocabulary, in its heaviest form: target rows of zeros, so that every request rejects its first
// draft and its block reads that position's target and draft rows whole (the residual's draw,
// then p's fallback in the same pass). The bytes: those two rows a request.
Case specVerifyCase(uint32_t rows, uint32_t cols, uint32_t k) {
  Case c{"spec_verify", dims(rows, cols) + "x" + std::to_string(k), "f32", {}, {}, 0, 0, 0};
  c.buffers = {{size_t(rows) * (k + 1) * cols * 4, Fill::Zero},
               {size_t(rows) * k * cols * 4, Fill::F32},
               {size_t(rows) * k * 4, Fill::Positions, cols},
               {size_t(rows) * (k + 1) * 4, Fill::Zero},
               {size_t(rows) * 4, Fill::Zero}};
  c.launches = {{"spec_verify_f32",
                 {buf("target", 0), buf("draft_probs", 1), buf("draft", 2), buf("out", 3), buf("emitted", 4),
                  val("rows", rows), val("k", k), val("cols", cols), val("seed", 7u)}}};
  c.bytes = 8.0 * rows * cols;
  return c;
}

// Constrained decoding's allowed-token bitmask on `rows` rows of a `cols` vocabulary: random
// mask bits (about half the logits set to -inf).
Case bitmaskCase(uint32_t rows, uint32_t cols) {
  Case c{"token_bitmask", dims(rows, cols), "f32", {}, {}, 0, 0, 0};
  const size_t words = (size_t(cols) + 31) / 32;
  c.buffers = {{size_t(rows) * cols * 4, Fill::F32}, {size_t(rows) * words * 4, Fill::S8}};
  c.launches = {{"token_bitmask_f32", {buf("logits", 0), buf("mask", 1), val("rows", rows), val("cols", cols)}}};
  // The mask's random bytes mix allowed and masked tokens: every logit read and written back
  // (before the thirty-fifth session, 4 bytes a logit: only the masked ones were written).
  c.bytes = 8.0 * rows * cols + 4.0 * rows * words;
  return c;
}

// A mixture-of-experts layer's router at decode, a row of f32 logits per token: Mixtral's (8
// experts, softmax, top 2, normalized) or DeepSeek-V3's (op moe_route_v3: 256 experts, sigmoid with
// the correction bias, the best 4 of 8 groups by their top-2 sums, top 8, times 2.5).
Case moeRouteCase(bool v3, uint32_t rows) {
  const uint32_t n = v3 ? 256 : 8, k = v3 ? 8 : 2;
  Case c{v3 ? "moe_route_v3" : "moe_route", dims(rows, n), "f32", {}, {}, 0, 0, 0};
  c.buffers = {{size_t(rows) * n * 4, Fill::F32}, {size_t(n) * 4, Fill::F32}, {size_t(rows) * k * 4, Fill::Zero},
               {size_t(rows) * k * 4, Fill::Zero}};
  std::vector<ArgSpec> args = {buf("logits", 0)};
  if (v3) args.push_back(buf("bias", 1));
  for (ArgSpec a : {buf("ids", 2), buf("weights", 3), val("rows", rows), val("n", n), val("scale", v3 ? 2.5f : 1.0f)})
    args.push_back(a);
  c.launches = {{v3 ? "moe_route_v3" : "moe_route_softmax_k2", args}};
  c.bytes = 4.0 * rows * n + (v3 ? 4.0 * n : 0.0) + 8.0 * rows * k;  // logits (and bias) read, ids and weights written
  return c;
}

// The combine of `slots` f32 expert rows of `cols` per token into a bf16 residual stream.
Case moeCombineCase(uint32_t rows, uint32_t cols, uint32_t slots) {
  Case c{"moe_combine", dims(rows, cols) + "x" + std::to_string(slots), "bf16", {}, {}, 0, 0, 0};
  const size_t h = size_t(rows) * slots * cols * 4, y = size_t(rows) * cols * 2;
  c.buffers = {{h, Fill::F32}, {size_t(rows) * slots * 4, Fill::F32}, {y, Fill::Zero}, {y, Fill::BF16}};
  c.launches = {{"moe_combine_bf16", {buf("h", 0), buf("weights", 1), buf("y", 2), buf("residual", 3), val("rows", rows),
                                      val("cols", cols), val("slots", slots)}}};
  c.bytes = double(h) + 4.0 * rows * slots + 2.0 * double(y);
  return c;
}

// `tokens` new rows of `row` elements each into k and v caches of `cacheRows` rows, at distinct
// random positions. The caches are shared by the buffer sets: a launch touches only its rows.
Case kvScatterCase(const std::string& dtype, uint32_t tokens, uint32_t row, uint32_t cacheRows) {
  Case c{"kv_scatter", dims(tokens, row) + "x" + std::to_string(cacheRows), dtype, {}, {}, 0, 0, 0};
  size_t fresh = size_t(tokens) * row * sizeOf(dtype), cache = size_t(cacheRows) * row * sizeOf(dtype);
  Fill f = fillOf(dtype);
  c.buffers = {{fresh, f},
               {fresh, f},
               {cache, Fill::Zero, 0, true},
               {cache, Fill::Zero, 0, true},
               {size_t(tokens) * 4, Fill::Positions, cacheRows}};
  c.launches = {{"kv_scatter_" + dtype,
                 {buf("k_new", 0), buf("v_new", 1), buf("k_cache", 2), buf("v_cache", 3), buf("positions", 4),
                  val("tokens", tokens), val("row", row)}}};
  c.bytes = 4.0 * fresh + 4.0 * tokens;  // k_new, v_new read; as many cache bytes written; positions
  return c;
}

// C = A B, dense (lda = k, ldb = n for f32 and k for the others, ldc = n), alpha 1, beta 0. The
// tensor-core members run their 64-row-tile kernel for m <= 64 (the bundle's gemm_DTYPE_m64);
// `wgmma` runs the sm_90a member instead (gemm_wg_DTYPE: its tensor maps built by the runtime), reported as op gemm_wgmma beside cuBLAS the same way. `split`: the split_k entry of
// the same member (kernel NAME_split, op gemm[_wgmma]_splitk) with splitsFor()'s splits and a
// zeroed workspace (every launch leaves its counters zero). `batch` > 1: that many problems of the
// shape packed one after the other (op gemm[_wgmma]_batched, shape BATCHxMxNxK), against cuBLAS's
// strided-batched GEMM.
constexpr uint32_t kSms = 132;  // an H100 SXM's
struct GemmTile {
  uint32_t m, n, perSm;  // the bench entry's tile and the blocks an SM holds (registers, shared memory)
};
GemmTile gemmTile(const std::string& dtype, uint32_t m, bool wgmma) {
  if (wgmma) return {128, 256, 1};
  if (dtype == "f32") return {128, 128, 1};
  return {m <= 64 ? 64u : 128u, 128, 2};
}
// Splits that bring a launch's blocks (tiles x splits) near one wave of the GPU, with at least 256
// values of K a split and at most 16 splits.
uint32_t splitsFor(const GemmTile& t, uint32_t m, uint32_t n, uint32_t k) {
  const uint32_t tiles = ((m + t.m - 1) / t.m) * ((n + t.n - 1) / t.n);
  return std::clamp<uint32_t>(kSms * t.perSm / tiles, 1, std::clamp<uint32_t>(k / 256, 1, 16));
}
Case gemmCase(const std::string& dtype, uint32_t m, uint32_t n, uint32_t k, bool wgmma = false, bool split = false,
              uint32_t batch = 1) {
  const GemmMember& g = gemmMember(dtype);
  Case c{std::string(wgmma ? "gemm_wgmma" : "gemm") + (split ? "_splitk" : "") + (batch > 1 ? "_batched" : ""),
         (batch > 1 ? std::to_string(batch) + "x" : "") + dims(m, n) + "x" + std::to_string(k), dtype, {}, {}, 0, 0, 0};
  size_t a = size_t(m) * k * g.inBytes * batch, b = size_t(k) * n * g.inBytes * batch,
         cc = size_t(m) * n * g.outBytes * batch;
  c.buffers = {{a, g.fill}, {b, g.fill}, {cc, Fill::Zero}};
  const bool f32 = dtype == "f32";
  std::string kernel = wgmma ? "gemm_wg_" + dtype : "gemm_" + dtype + (!f32 && m <= 64 ? "_m64" : "");
  ArgSpec alpha = dtype == "s8" ? val("alpha", int32_t{1}) : val("alpha", 1.0f);
  ArgSpec beta = dtype == "s8" ? val("beta", int32_t{0}) : val("beta", 0.0f);
  std::vector<ArgSpec> args = {buf("a", 0), buf("b", 1), buf("c", 2), val("m", m), val("n", n), val("k", k),
                               val("lda", k), val("ldb", f32 ? n : k), val("ldc", n)};
  args.insert(args.end(), {val("batch", batch), val("stride_a", uint64_t{m} * k), val("stride_b", uint64_t{k} * n),
                           val("stride_c", uint64_t{m} * n), alpha, beta});
  if (split) {
    const GemmTile t = gemmTile(dtype, m, wgmma);
    const uint32_t splits = splitsFor(t, m, n, k);
    const size_t tiles = size_t((m + t.m - 1) / t.m) * ((n + t.n - 1) / t.n);
    c.buffers.push_back({4 * tiles * (256 + size_t(splits) * t.m * t.n), Fill::Zero});
    args.insert(args.end(), {val("splits", splits), buf("workspace", 3)});
    kernel += "_split";
  }
  c.launches = {{kernel, args}};
  c.bytes = double(a) + double(b) + double(cc);
  c.gemmM = m;
  c.gemmN = n;
  c.gemmK = k;
  c.gemmBatch = batch;
  return c;
}

// gemm over fp8 weights (op gemm_fp8, gemm_wgmma_fp8): bf16 A times E4M3 codes B (n x k, x W^T),
// bf16 C, alpha 1: the kernel gemm_e4m3_bf16 (gemm_e4m3_bf16_m64 for m <= 64) or
// gemm_wg_e4m3_bf16, against cuBLAS's bf16 GEMM of the codes' values (exact in bf16) in the same
// layout, which reads twice the bytes of B.
Case gemmFp8Case(uint32_t m, uint32_t n, uint32_t k, bool wgmma = false) {
  Case c = gemmCase("bf16", m, n, k, wgmma);
  c.op = wgmma ? "gemm_wgmma_fp8" : "gemm_fp8";
  const size_t b = size_t(n) * k;
  c.buffers[1] = {b, Fill::E4M3};
  c.buffers.push_back({b * 2, Fill::Zero});
  c.launches[0].kernel = wgmma ? "gemm_wg_e4m3_bf16" : std::string("gemm_e4m3_bf16") + (m <= 64 ? "_m64" : "");
  c.bytes -= double(b);
  c.gemmCodes = true;
  c.gemmB = 3;
  return c;
}

// gemm over fp8 A and B (op gemm_w8a8, gemm_wgmma_w8a8; W8A8): E4M3 codes A (m x k) and B (n x k),
// bf16 C, alpha 1: the kernel gemm_w8a8 (gemm_w8a8_m64 for m <= 64) or gemm_wg_w8a8, against
// cuBLAS's bf16 GEMM of the codes' values, which reads twice the bytes of A and B (torch_ref.py
// adds PyTorch's torch._scaled_mm, cuBLASLt's fp8 GEMM, where PyTorch is present).
Case gemmW8a8Case(uint32_t m, uint32_t n, uint32_t k, bool wgmma = false) {
  Case c = gemmFp8Case(m, n, k, wgmma);
  c.op = wgmma ? "gemm_wgmma_w8a8" : "gemm_w8a8";
  const size_t a = size_t(m) * k;
  c.buffers[0] = {a, Fill::E4M3};
  c.buffers.push_back({a * 2, Fill::Zero});
  c.launches[0].kernel = wgmma ? "gemm_wg_w8a8" : std::string("gemm_w8a8") + (m <= 64 ? "_m64" : "");
  c.bytes -= double(a);
  c.gemmCodesA = true;
  c.gemmA = 4;
  return c;
}

// ... with block scales (op gemm_wgmma_w8a8_blocks: scale_block = 128, tile_n 128, the kernel
// gemm_wg_w8a8_blocks): a_scales per row and 128-wide K group and b_scales per 128 x 128 block,
// all 1.0 so that the same cuBLAS reference holds; what applying them as each group completes
// costs against the unscaled wgmma rows.
Case gemmW8a8BlocksCase(uint32_t m, uint32_t n, uint32_t k) {
  Case c = gemmW8a8Case(m, n, k, true);
  c.op = "gemm_wgmma_w8a8_blocks";
  const size_t groups = (k + 127) / 128, bScales = (n + 127) / 128 * groups * 4, aScales = m * groups * 4;
  const uint32_t one = 0x3f800000u;  // 1.0f
  c.buffers.push_back({bScales, Fill::Constant, one});
  c.buffers.push_back({aScales, Fill::Constant, one});
  Launch& l = c.launches[0];
  l.kernel = "gemm_wg_w8a8_blocks";
  l.args.insert(l.args.begin() + 3, {buf("b_scales", 5), buf("a_scales", 6)});
  c.bytes += double(bScales + aScales);
  return c;
}

// Buffers a case computes from others once they are filled: the bf16 values of gemm_fp8's B
// codes (and gemm_w8a8's A codes).
void deriveBuffers(const Case& c, const std::vector<const DeviceMemory*>& set) {
  auto values = [&](size_t from, size_t to, const char* what) {
    std::vector<uint8_t> codes(set[from]->bytes());
    must(set[from]->download(codes.data(), codes.size()), "download codes");
    std::vector<uint16_t> v(codes.size());
    for (size_t i = 0; i < codes.size(); ++i)
      v[i] = tn::ir::f32ToBf16(float(tn::ir::fp8Value(tn::ir::Fp8Format::E4M3, codes[i])));
    must(set[to]->upload(v.data(), v.size() * 2), what);
  };
  if (c.gemmCodes) values(1, size_t(c.gemmB), "upload bf16 B");
  if (c.gemmCodesA) values(0, size_t(c.gemmA), "upload bf16 A");
}

// In place on q (tokens x qHeads x headDim) and k (tokens x kHeads x headDim), positions from 0.
Case ropeCase(const std::string& layout, const std::string& dtype, uint32_t tokens, uint32_t qHeads, uint32_t kHeads,
              uint32_t headDim) {
  Case c{"rope_" + layout, dims(tokens, qHeads) + "x" + dims(kHeads, headDim), dtype, {}, {}, 0, 0, 0};
  size_t q = size_t(tokens) * qHeads * headDim * sizeOf(dtype), k = size_t(tokens) * kHeads * headDim * sizeOf(dtype);
  c.buffers = {{q, fillOf(dtype)}, {k, fillOf(dtype)}};
  c.launches = {{"rope_" + layout + "_" + dtype,
                 {buf("q", 0), buf("k", 1), val("tokens", tokens), val("q_heads", qHeads), val("k_heads", kHeads),
                  val("head_dim", headDim), val("pos_offset", 0u), val("theta", 10000.0f)}}};
  c.bytes = 2.0 * (double(q) + double(k));
  return c;
}

// Decode attention (attention_decode + attention_decode_merge, bf16, head_dim 128, group 4):
// one query token for each of `batch` sequences of `context` cached positions, kv_heads = q_heads
// / 4. Splits along the sequence bring the blocks (kv_heads x a group's blocks x splits x batch)
// to about 528, 4 per SM of an H100 (decodeSplits); or, with `len`, splits of that many positions (op attention_decode_lenN: against
// the 528 blocks, the split_len of 256-1024 that docs/kernels.md suggests at batch 1, where 528
// blocks leave about 63 positions a block at context 4096). Bytes: K and V (what the kernel
// streams; q, o and the workspace are small). paged (op attention_decode_paged): the same cache
// read through a block table of 16-row pages in order (context a multiple of 16), to show what
// paging costs.
// window (op attention_decode_windowW): a sliding window of W positions, whose splits (about 528
// blocks again) cover the window only; bytes: the window's K and V. fp8 (op attention_decode_fp8):
// K and V E4M3 codes (1 byte an element) scaled by k_scale = v_scale = 1/448, decoded as the
// device's code does (cvt.f16x2 from sm_89 on); fp8Integer (op attention_decode_fp8_integer) the
// same by integer instructions (fp8_decode = "integer"), to weigh the two. group 16 (op
// attention_decode_g16): 16 query heads a kv head (Llama-3.1-405B's, Qwen3-235B's), which two
// blocks of 8 heads share, each reading the kv head's K and V.
enum class Fp8Cache { None, Auto, Integer };
// Decode attention's splits of `span` positions: as many as bring the grid (xBlocks blocks a split
// of a sequence) to about 528 blocks, 4 per SM of an H100, at least 128 positions each; or splits
// of `len` positions. {splits, split_len}.
std::pair<uint32_t, uint32_t> decodeSplits(uint32_t xBlocks, uint32_t batch, uint32_t span, uint32_t len = 0) {
  const uint32_t splits = len ? (span + len - 1) / len
                              : std::clamp<uint32_t>((528 + xBlocks * batch - 1) / (xBlocks * batch), 1, (span + 127) / 128);
  return {splits, (span + splits - 1) / splits};
}
Case attentionDecodeCase(uint32_t batch, uint32_t context, uint32_t qHeads, uint32_t len = 0, bool paged = false,
                         uint32_t window = 0, Fp8Cache fp8Cache = Fp8Cache::None, uint32_t group = 4) {
  const bool fp8 = fp8Cache != Fp8Cache::None;
  const uint32_t kvHeads = qHeads / group, dim = 128, pageSize = 16, pages = context / pageSize;
  const uint32_t span = window ? std::min(window, context) : context;
  // A block takes 8 heads of 128 (kernels/Attention.cpp): a larger group is ceil(group / 8) blocks.
  const auto [splits, splitLen] = decodeSplits(kvHeads * ((group + 7) / 8), batch, span, len);
  Case c{len ? "attention_decode_len" + std::to_string(len)
         : paged ? "attention_decode_paged"
         : window ? "attention_decode_window" + std::to_string(window)
         : fp8    ? (fp8Cache == Fp8Cache::Integer ? "attention_decode_fp8_integer" : "attention_decode_fp8")
         : group != 4 ? "attention_decode_g" + std::to_string(group)
                  : "attention_decode",
         std::to_string(batch) + "x" + std::to_string(context) + "x" + dims(qHeads, kvHeads) + "x" +
                                 std::to_string(dim),
         "bf16", {}, {}, 0, 0, 0};
  const size_t q = size_t(batch) * qHeads * dim * 2, cache = size_t(batch) * context * kvHeads * dim * (fp8 ? 1 : 2);
  const size_t partial = size_t(batch) * qHeads * splits * dim * 4, stats = size_t(batch) * qHeads * splits * 4;
  const Fill cacheFill = fp8 ? Fill::E4M3 : Fill::BF16;
  const float fp8Scale = fp8 ? 1.0f / 448 : 0.0f;
  c.buffers = {{q, Fill::BF16},           {cache, cacheFill},          {cache, cacheFill},
               {batch * 4u, Fill::Strided, context}, {batch * 4u, Fill::Constant, context},
               {partial, Fill::Zero},     {stats, Fill::Zero},         {q, Fill::Zero}};
  std::vector<ArgSpec> args = {buf("q", 0), buf("k_cache", 1), buf("v_cache", 2), buf(paged ? "block_table" : "offsets", 3),
                               buf("lengths", 4), buf("partial", 5), buf("stats", 6), val("batch", batch),
                               val("kv_heads", kvHeads), val("splits", splits), val("split_len", splitLen)};
  if (paged) {
    c.buffers[3] = {size_t(batch) * pages * 4, Fill::Strided, 1};  // page i of the table is page i of the cache
    args.push_back(val("max_pages", pages));
  }
  args.push_back(val("scale", 1.0f / std::sqrt(float(dim))));
  if (fp8) args.push_back(val("k_scale", fp8Scale)), args.push_back(val("v_scale", fp8Scale));
  if (window) args.push_back(val("window", window));
  const std::string kernel = paged    ? "attention_decode_bf16_d128_g4_p16"
                             : window ? "attention_decode_bf16_d128_g4_window"
                             : fp8    ? (fp8Cache == Fp8Cache::Integer ? "attention_decode_bf16_d128_g4_e4m3_integer"
                                                                       : "attention_decode_bf16_d128_g4_e4m3")
                                      : "attention_decode_bf16_d128_g" + std::to_string(group);
  c.launches = {{kernel, args},
                {"attention_decode_merge_bf16_d128",
                 {buf("partial", 5), buf("stats", 6), buf("o", 7), val("batch", batch), val("q_heads", qHeads),
                  val("splits", splits)}}};
  c.bytes = 2.0 * double(cache) * span / context;
  c.attention = Case::Attention{true, batch, 1, context, qHeads, kvHeads, dim, false, window, false, fp8Scale};
  return c;
}

// Multi-head latent attention at decode (attention_decode with mla, op attention_decode_mla):
// DeepSeek-V3's absorbed form on one GPU of eight, 16 query heads over one latent cache of rows of
// 512 + 64 bf16 elements, V the latent part; a block per head (16 blocks read each split of the
// cache, from L2 after the first), splits bringing the blocks to about 528. Bytes: the cache once.
Case attentionDecodeMlaCase(uint32_t batch, uint32_t context, uint32_t qHeads) {
  const uint32_t dim = 512, kdim = dim + 64;
  const auto [splits, splitLen] = decodeSplits(qHeads, batch, context);  // a block a head
  Case c{"attention_decode_mla", std::to_string(batch) + "x" + std::to_string(context) + "x" + dims(qHeads, 1) + "x" +
                                     std::to_string(dim),
         "bf16", {}, {}, 0, 0, 0};
  const size_t q = size_t(batch) * qHeads * kdim * 2, cache = size_t(batch) * context * kdim * 2;
  const size_t partial = size_t(batch) * qHeads * splits * dim * 4, stats = size_t(batch) * qHeads * splits * 4;
  c.buffers = {{q, Fill::BF16},      {cache, Fill::BF16},  {batch * 4u, Fill::Strided, context},
               {batch * 4u, Fill::Constant, context}, {partial, Fill::Zero}, {stats, Fill::Zero},
               {size_t(batch) * qHeads * dim * 2, Fill::Zero}};
  c.launches = {{"attention_decode_bf16_mla512_g16",
                 {buf("q", 0), buf("k_cache", 1), buf("offsets", 2), buf("lengths", 3), buf("partial", 4),
                  buf("stats", 5), val("batch", batch), val("kv_heads", 1u), val("splits", splits),
                  val("split_len", splitLen), val("scale", 1.0f / std::sqrt(float(kdim)))}},
                {"attention_decode_merge_bf16_d512",
                 {buf("partial", 4), buf("stats", 5), buf("o", 6), val("batch", batch), val("q_heads", qHeads),
                  val("splits", splits)}}};
  c.bytes = double(cache);
  c.attention = Case::Attention{true, batch, 1, context, qHeads, 1, kdim, false, 0, false, 0.0f, dim};
  return c;
}

// Flash-attention prefill (attention_prefill, bf16): `batch` sequences of `seq` tokens, `heads`
// query and kv heads, keys = queries. Bytes: q, k, v and o once; FLOPs 4 batch heads seq^2 dim,
// half of it causal (the masked half is not computed). wgmma: the sm_90a member (its tensor maps
// filled by the runtime), op attention_prefill_wgmma[_causal]. varlen (wgmma only): the same
// problem as packed sequences of equal lengths (offsets seq apart), the same memory layout, op
// attention_prefill_wgmma_varlen[_causal]. paged (head_dim 128): k and v read through a block
// table of 16-row pages in order (seq a multiple of 16), the same memory layout, op
// attention_prefill[_wgmma]_paged[_causal]. bias (neither varlen nor paged): an additive bias of
// seq x seq elements (bf16) that every sequence and head shares (strides 0), as a mask given to
// SDPA, op attention_prefill[_wgmma]_bias[_causal]. fp8 (paged only): k and v E4M3 codes scaled by
// k_scale = v_scale = 1/448, op attention_prefill[_wgmma]_paged_fp8[_causal].
Case attentionPrefillCase(uint32_t batch, uint32_t heads, uint32_t seq, uint32_t dim, bool causal, bool wgmma = false,
                          bool varlen = false, bool paged = false, bool bias = false, bool fp8 = false) {
  const std::string suffix = std::string(wgmma ? "_wgmma" : "") + (varlen ? "_varlen" : "") + (paged ? "_paged" : "") +
                             (fp8 ? "_fp8" : "") + (bias ? "_bias" : "") + (causal ? "_causal" : "");
  Case c{"attention_prefill" + suffix, std::to_string(batch) + "x" + std::to_string(heads) + "x" + dims(seq, dim),
         "bf16", {}, {}, 0, 0, 0};
  const size_t t = size_t(batch) * seq * heads * dim * 2, kv = fp8 ? t / 2 : t;
  const Fill kvFill = fp8 ? Fill::E4M3 : Fill::BF16;
  const float fp8Scale = fp8 ? 1.0f / 448 : 0.0f;
  c.buffers = {{t, Fill::BF16}, {kv, kvFill}, {kv, kvFill}, {t, Fill::Zero}};
  const std::string kernel = "attention_prefill" + std::string(wgmma ? "_wg" : "") + "_bf16_d" + std::to_string(dim) +
                             (varlen ? "_varlen" : "") + (causal ? "_causal" : "") + (paged ? "_p16" : "") +
                             (bias ? "_bias" : "") + (fp8 ? "_e4m3" : "");
  const float scale = 1.0f / std::sqrt(float(dim));
  if (varlen) {
    for (Fill f : {Fill::Strided, Fill::Constant, Fill::Strided, Fill::Constant}) c.buffers.push_back({batch * 4u, f, seq});
    c.launches = {{kernel,
                   {buf("q", 0), buf("k", 1), buf("v", 2), buf("o", 3), buf("q_offsets", 4), buf("q_lengths", 5),
                    buf("kv_offsets", 6), buf("kv_lengths", 7), val("batch", batch), val("max_seq_q", seq),
                    val("q_rows", batch * seq), val("kv_rows", batch * seq), val("q_heads", heads),
                    val("kv_heads", heads), val("scale", scale)}}};
  } else if (paged) {
    const uint32_t pages = seq / 16;
    c.buffers.push_back({size_t(batch) * pages * 4, Fill::Strided, 1});  // page i of the table is page i of k and v
    std::vector<ArgSpec> args = {buf("q", 0), buf("k", 1), buf("v", 2), buf("o", 3), buf("block_table", 4),
                                 val("batch", batch), val("seq_q", seq), val("seq_k", seq)};
    if (wgmma) args.push_back(val("kv_rows", batch * seq));  // the tensor maps' extent
    for (ArgSpec a : {val("max_pages", pages), val("q_heads", heads), val("kv_heads", heads), val("scale", scale)})
      args.push_back(a);
    if (fp8) args.push_back(val("k_scale", fp8Scale)), args.push_back(val("v_scale", fp8Scale));
    c.launches = {{kernel, args}};
  } else {
    std::vector<ArgSpec> args = {buf("q", 0), buf("k", 1), buf("v", 2), buf("o", 3)};
    if (bias) {
      c.buffers.push_back({size_t(seq) * seq * 2, Fill::BF16});
      args.push_back(buf("bias", 4));
    }
    for (ArgSpec a : {val("batch", batch), val("seq_q", seq), val("seq_k", seq), val("kv_stride", seq),
                      val("q_heads", heads), val("kv_heads", heads), val("scale", scale)})
      args.push_back(a);
    if (bias)
      for (ArgSpec a : {val("bias_batch_stride", 0u), val("bias_head_stride", 0u), val("bias_row_stride", seq)})
        args.push_back(a);
    c.launches = {{kernel, args}};
  }
  c.bytes = 2.0 * double(t) + 2.0 * double(kv) + (bias ? 2.0 * seq * seq : 0.0);
  c.attention = Case::Attention{false, batch, seq, seq, heads, heads, dim, causal, 0, bias, fp8Scale};
  c.attentionFlops = 4.0 * batch * heads * double(seq) * seq * dim / (causal ? 2.0 : 1.0);
  return c;
}

// DeepSeek-V3's multi-head latent attention at prefill (attention_prefill with v_head_dim, op
// attention_prefill[_wgmma]_mla[_causal]): the latent expanded into one GPU's 16 heads of eight's
// 128, q and k heads of 192 elements (128 + 64 rope), v and o of 128. Bytes: q, k, v and o once;
// FLOPs 2 batch heads seq^2 (192 + 128), half of it causal.
Case attentionPrefillMlaCase(uint32_t batch, uint32_t heads, uint32_t seq, bool causal, bool wgmma) {
  const uint32_t dim = 192, vdim = 128;
  const std::string suffix = causal ? "_causal" : "";
  Case c{std::string("attention_prefill") + (wgmma ? "_wgmma" : "") + "_mla" + suffix, std::to_string(batch) + "x" + std::to_string(heads) + "x" + dims(seq, dim),
         "bf16", {}, {}, 0, 0, 0};
  const size_t qk = size_t(batch) * seq * heads * dim * 2, vo = size_t(batch) * seq * heads * vdim * 2;
  c.buffers = {{qk, Fill::BF16}, {qk, Fill::BF16}, {vo, Fill::BF16}, {vo, Fill::Zero}};
  c.launches = {{std::string("attention_prefill") + (wgmma ? "_wg" : "") + "_bf16_d192_v128" + suffix,
                 {buf("q", 0), buf("k", 1), buf("v", 2), buf("o", 3), val("batch", batch), val("seq_q", seq),
                  val("seq_k", seq), val("kv_stride", seq), val("q_heads", heads), val("kv_heads", heads),
                  val("scale", 1.0f / std::sqrt(float(dim)))}}};
  c.bytes = 2.0 * double(qk) + 2.0 * double(vo);
  c.attention = Case::Attention{false, batch, seq, seq, heads, heads, dim, causal, 0, false, 0.0f, 0, vdim};
  c.attentionFlops = 2.0 * batch * heads * double(seq) * seq * (dim + vdim) / (causal ? 2.0 : 1.0);
  return c;
}

// Full: the measured sizes. Quick: a smoke run on a GPU. Tiny: every launch path at sizes the
// simulated driver runs in seconds (--check on a device), with odd sizes and the split paths.
enum class Sizes { Full, Quick, Tiny };

std::vector<Case> cases(Sizes sizes) {
  const bool full = sizes == Sizes::Full, tiny = sizes == Sizes::Tiny;
  auto pick = [&](uint32_t f, uint32_t q, uint32_t t) { return full ? f : tiny ? t : q; };
  std::vector<Case> out;
  std::vector<std::pair<uint32_t, uint32_t>> rows = {{8192, 8192}, {4096, 4096}, {32, 32768}};
  if (sizes == Sizes::Quick) rows = {{1024, 1024}, {4, 32768}};
  if (tiny) rows = {{40, 300}, {3, 9000}};
  const uint32_t n = pick(1u << 26, 1u << 20, 5000);
  for (const char* op : {"softmax", "layernorm", "rmsnorm"})
    for (auto [r, c] : rows) out.push_back(rowCase(op, "f32", r, c));
  for (const char* op : {"add", "mul", "scale", "residual_add", "relu", "gelu_tanh", "gelu_erf", "silu", "swiglu"})
    out.push_back(elementwiseCase(op, "f32", n));
  for (const char* op : {"add", "silu", "swiglu"}) out.push_back(elementwiseCase(op, "bf16", n));
  out.push_back(gemvCase("f32", pick(8192, 1024, 70), pick(8192, 1024, 300)));
  out.push_back(gemvCase("bf16", pick(14336, 1024, 70), pick(4096, 4096, 512)));
  out.push_back(gemvCase("bf16", pick(14336, 1024, 70), pick(4096, 4096, 512), true));
  out.push_back(gemvFp8Case(pick(14336, 1024, 70), pick(4096, 4096, 512)));
  out.push_back(quantizeFp8Case(pick(14336, 1024, 70), pick(4096, 4096, 300)));
  out.push_back(quantizeFp8Case(pick(14336, 1024, 70), pick(4096, 4096, 300), "_c4096"));

  // The norms and GELUs in bf16, and the fused residual + rmsnorm.
  const uint32_t normSide = pick(4096, 1024, 100), big = pick(8192, 1024, 100);
  for (const char* op : {"layernorm", "rmsnorm"}) out.push_back(rowCase(op, "bf16", normSide, normSide));
  // The same rows by the kernels for rows of at most 4096 elements (max_cols), f32 and bf16.
  for (const char* op : {"layernorm_c4096", "rmsnorm_c4096"})
    for (const char* dt : {"f32", "bf16"}) out.push_back(rowCase(op, dt, normSide, normSide));
  for (const char* op : {"gelu_tanh", "gelu_erf"}) out.push_back(elementwiseCase(op, "bf16", n));
  out.push_back(rowCase("residual_rmsnorm", "f32", big, big));
  // argmax: one decode-time row of a 128k vocabulary (LLaMA 3's 128256), a batch of 64, a square.
  const uint32_t vocab = pick(128256, 128256, 5000);
  for (auto [r, c] : std::vector<std::pair<uint32_t, uint32_t>>{{1, vocab}, {pick(64, 4, 3), vocab}, {big, big}})
    out.push_back(rowCase("argmax", "f32", r, c));
  // Sampling (argmax's sample option: Gumbel noise on every logit) beside PyTorch's softmax +
  // multinomial: one decode-time row of the 128k vocabulary (the split pair), and a batch of 256
  // over LLaMA 2's 32000 (one block a row).
  out.push_back(rowCase("argmax_sample", "f32", 1, vocab));
  out.push_back(rowCase("argmax_sample", "f32", pick(256, 256, 3), pick(32000, 32000, 700)));
  // The same with top-k, top-p and min-p (sample_cutoff first), beside PyTorch's sort-based filters;
  // one row by sample_cutoff_split's ten launches, and by sample_cutoff's one block.
  out.push_back(rowCase("sample_filtered", "f32", 1, vocab));
  out.push_back(rowCase("sample_filtered_block", "f32", 1, vocab));
  out.push_back(rowCase("sample_filtered", "f32", pick(256, 256, 3), pick(32000, 32000, 700)));
  // Repetition, frequency and presence penalties over 2048 tokens seen by each of 32 sequences.
  out.push_back(penaltiesCase(pick(32, 32, 3), vocab, pick(2048, 2048, 40)));
  // A long context's 32768 ids for each of 8 sequences: past shared memory, the global tables.
  out.push_back(penaltiesCase(pick(8, 8, 2), vocab, pick(32768, 32768, 300), true));
  // Speculative decoding: 4 drafts for each of 32 requests verified, each rejecting its first.
  out.push_back(specVerifyCase(pick(32, 32, 3), vocab, pick(4, 4, 2)));
  // A grammar's allowed-token bitmask over a decode batch of 64 rows of the 128k vocabulary.
  out.push_back(bitmaskCase(pick(64, 64, 3), vocab));
  // Mixture of experts at decode: the router of one token and of a batch of 64, and the combine of
  // DeepSeek-V3's 8 expert rows of 7168 and Mixtral's 2 of 4096.
  for (bool v3 : {false, true})
    for (uint32_t rows : {1u, pick(64, 64, 3)}) out.push_back(moeRouteCase(v3, rows));
  out.push_back(moeCombineCase(pick(64, 64, 3), pick(7168, 7168, 300), 8));
  out.push_back(moeCombineCase(pick(64, 64, 3), pick(4096, 4096, 300), 2));
  // Mixture of experts at prefill: the grouping of a 4096-token prompt's pairs, Mixtral's (8
  // experts, top 2) and DeepSeek-V3's (256, top 8).
  out.push_back(moeAlignCase(8, pick(4096, 4096, 37), 2));
  out.push_back(moeAlignCase(256, pick(4096, 4096, 37), 8));
  for (const char* dt : {"f32", "bf16"}) out.push_back(rowCase("transpose", dt, big, big));
  // KV cache append, 8 KV heads x 128: a decode step of 32 sequences, and a 4096-token prefill.
  out.push_back(kvScatterCase("bf16", pick(32, 32, 4), 1024, pick(32768, 32768, 64)));
  out.push_back(kvScatterCase("bf16", pick(4096, 256, 16), 1024, pick(65536, 4096, 64)));
  // Token embeddings of LLaMA-3-8B's vocabulary: a decode batch and a prefill chunk; bf16 and q4_k.
  for (const char* format : {"bf16", "q4_k"})
    for (uint32_t tokens : {pick(32, 32, 5), pick(2048, 256, 17)})
      out.push_back(embeddingCase(format, tokens, pick(128256, 4096, 40), pick(4096, 4096, 512)));
  // LLaMA-style GQA attention: 32 query heads, 8 KV heads of 128.
  for (const char* dt : {"f32", "bf16"}) out.push_back(ropeCase("neox", dt, pick(4096, 256, 3), 32, 8, 128));
  // Quantized weights: the decode shapes of LLaMA-3-8B (and its 128k vocabulary) per format,
  // ntok 1, 4 and 8, both activation paths; dequantize on the same shapes.
  {
    std::vector<std::pair<uint32_t, uint32_t>> mk = {{4096, 4096}};
    if (full) mk = {{4096, 4096}, {14336, 4096}, {4096, 14336}, {128256, 4096}};
    if (tiny) mk = {{9, 512}};
    std::vector<uint32_t> ntoks = full ? std::vector<uint32_t>{1, 4, 8} : std::vector<uint32_t>{1, 8};
    for (const QuantFormat& f : kQuantFormats)
      for (auto [m, k] : mk) {
        for (const char* act : {"f32", "q8_1"})
          for (uint32_t t : ntoks) out.push_back(gemvQCase(f, act, m, k, t));
        out.push_back(dequantizeCase(f, m, k));
      }
    // rows_per_warp beside the template's default (2 for these), to settle it: q8_0 with 1 and 4
    // rows a warp, q4_k with q8_1 x with 1 (4 takes it to 128 registers); and q4_k with f32 x,
    // whose 16-byte path takes 1 by default, with 2 (the H200 measured that path's time growing
    // with ntok as if each column were a launch of its own).
    if (full || tiny)
      for (uint32_t t : full ? std::vector<uint32_t>{4, 8} : std::vector<uint32_t>{8}) {
        const uint32_t m = full ? 14336 : 9, k = full ? 4096 : 512;
        for (const char* act : {"f32", "q8_1"})
          for (unsigned rpw : {1u, 4u}) out.push_back(gemvQCase(kQuantFormats[1], act, m, k, t, rpw));
        out.push_back(gemvQCase(kQuantFormats[2], "q8_1", m, k, t, 1));
        out.push_back(gemvQCase(kQuantFormats[2], "f32", m, k, t, 2));
      }
    // warps_per_row beside the template's default (4 at ntok 1), to settle it: 1 (one warp a row)
    // and 8, on the 16-byte q4_k path (f32 and q8_1 x), q6_k and q4_0 with q8_1 x, for a tall and
    // a wide matrix.
    if (full || tiny) {
      std::vector<std::pair<uint32_t, uint32_t>> shapes = {{9, 512}};
      if (full) shapes = {{14336, 4096}, {4096, 14336}};
      const std::vector<std::pair<size_t, const char*>> paths = {{2, "f32"}, {2, "q8_1"}, {4, "q8_1"}, {0, "q8_1"}};
      for (auto [m, k] : shapes)
        for (auto [fi, act] : paths)
          for (unsigned wpr : {1u, 8u}) out.push_back(gemvQCase(kQuantFormats[fi], act, m, k, 1, 0, wpr));
    }
    // The fused decode kernels: LLaMA-3-8B's gate and up projections (14336 x 4096 each), and
    // rmsnorm + quantization of the decode tokens' activations (and of a prefill's).
    uint32_t ffn = pick(14336, 14336, 9), hidden = pick(4096, 4096, 512);
    for (const QuantFormat& f : kQuantFormats)
      for (const char* act : {"f32", "q8_1"})
        for (uint32_t t : ntoks) out.push_back(gemvQSwigluCase(f, act, ffn, hidden, t));
    // Mixture of experts at decode: Mixtral-8x7B's experts (8 of 14336 x 4096 gate and up, 4096 x
    // 14336 down; q4_k), one token (2 pairs) and four (8 pairs: every expert once).
    // (Tiny: 256 x 256 experts, k a whole q4_k block.)
    const uint32_t expertFfn = pick(14336, 14336, 256), expertHidden = pick(4096, 4096, 256);
    for (uint32_t tokens : {1u, 4u}) {
      out.push_back(gemvQExpertsCase(kQuantFormats[2], "q8_1", true, 8, expertFfn, expertHidden, tokens, 2));
      out.push_back(gemvQExpertsCase(kQuantFormats[2], "f32", false, 8, expertHidden, expertFfn, tokens, 2));
    }
    // gpt-oss-20b's experts: 32 of 2880 x 2880 for gate, up and down in MXFP4, top 4 (the fused
    // gate+up with the clamped SwiGLU, the down projection), one token and four (16 distinct
    // experts). (Tiny: 96 x 96.)
    const QuantFormat& mxfp4 = kQuantFormats[5];
    const uint32_t ossDim = pick(2880, 2880, 96);
    for (uint32_t tokens : {1u, 4u}) {
      out.push_back(gemvQExpertsCase(mxfp4, "q8_1", true, 32, ossDim, ossDim, tokens, 4));
      out.push_back(gemvQExpertsCase(mxfp4, "q8_1", false, 32, ossDim, ossDim, tokens, 4));
    }
    for (const char* dt : {"f32", "bf16"})
      for (uint32_t r : {pick(8, 8, 3), pick(4096, 1024, 5)}) out.push_back(rmsnormQ81Case(dt, r, hidden));
    for (uint32_t r : {pick(8, 8, 3), pick(4096, 1024, 5)}) out.push_back(rmsnormFp8Case(r, hidden));
    // A prefill's, by the kernels for rows of at most 4096 (max_cols; their unfused chain's too).
    for (const char* dt : {"f32", "bf16"}) out.push_back(rmsnormQ81Case(dt, pick(4096, 1024, 5), hidden, "_c4096"));
    out.push_back(rmsnormFp8Case(pick(4096, 1024, 5), hidden, "_c4096"));
    for (uint32_t r : {pick(8, 8, 3), pick(4096, 1024, 5)}) out.push_back(swigluFp8Case(r, ffn));
    // Prefill: a 512-token prompt (tiny: edges of a 2 x 2 grid of tiles) against LLaMA-3-8B's
    // weights.
    for (const QuantFormat& f : kQuantFormats) {
      // 64 x 64 tiles for a format of each staging path (tiny: two token tiles, the second partial).
      const std::string name = f.name;
      const bool tile64 = name == "q4_0" || name == "q8_0" || name == "q4_k" || name == "q6_k";
      if (tiny) {
        out.push_back(gemmQCase(f, 70, 512, 37));
        if (tile64) out.push_back(gemmQCase(f, 70, 512, 83, true));
        continue;
      }
      for (auto [m, k] : full ? mk : std::vector<std::pair<uint32_t, uint32_t>>{{4096, 4096}}) {
        out.push_back(gemmQCase(f, m, k, pick(512, 128, 37)));
        if (tile64) out.push_back(gemmQCase(f, m, k, pick(512, 128, 37), true));
      }
    }
    // Mixture of experts at prefill: Mixtral-8x7B's gate projection (8 experts of 14336 x 4096,
    // q4_k) for a 512-token prompt, top 2 (1024 pairs, about 128 an expert).
    out.push_back(gemmQExpertsCase(kQuantFormats[2], 8, expertFfn, expertHidden, pick(512, 512, 37), 2));
    // gpt-oss-20b's gate projection at prefill: 512 tokens, top 4 of 32 MXFP4 experts.
    out.push_back(gemmQExpertsCase(mxfp4, 32, ossDim, ossDim, pick(512, 512, 37), 4));
  }
  // Attention. Decode: batch 1, 8, 32 x context 512, 4096, 32768, 32 query heads of 128 over 8
  // kv heads. Prefill: batch 4 x 16 heads x seq 1024, 4096 x head_dim 64, 128, causal and not.
  {
    std::vector<uint32_t> batches = {1, 8, 32}, contexts = {512, 4096, 32768}, seqs = {1024, 4096};
    if (!full) batches = {1, 8}, contexts = {4096}, seqs = {1024};
    if (tiny) batches = {2}, contexts = {70}, seqs = {70};
    for (uint32_t b : batches)
      for (uint32_t ctx : contexts) out.push_back(attentionDecodeCase(b, ctx, tiny ? 8 : 32));
    // Longer splits beside the 528-block ones, to choose between them (docs/status.md).
    if (full)
      for (uint32_t b : {1u, 8u})
        for (uint32_t ctx : {4096u, 32768u})
          for (uint32_t len : {256u, 1024u}) out.push_back(attentionDecodeCase(b, ctx, 32, len));
    if (tiny) out.push_back(attentionDecodeCase(2, 70, 8, 32));
    // Paged, beside the contiguous rows at context 4096.
    for (uint32_t b : batches) out.push_back(attentionDecodeCase(b, tiny ? 64 : 4096, tiny ? 8 : 32, 0, true));
    // A sliding window of 4096 positions (Mistral's) in a context of 32768: what the window's K and
    // V cost, against the copy of those bytes.
    for (uint32_t b : batches) out.push_back(attentionDecodeCase(b, tiny ? 70 : full ? 32768 : 4096, tiny ? 8 : 32, 0, false, tiny ? 40 : full ? 4096 : 1024));
    // fp8 (E4M3) caches, beside the bf16 rows of the same shapes: half the bytes to stream.
    for (uint32_t b : batches)
      for (uint32_t ctx : contexts) out.push_back(attentionDecodeCase(b, ctx, tiny ? 8 : 32, 0, false, 0, Fp8Cache::Auto));
    // The same decoded by integer instructions (what older targets' code does), at one context.
    for (uint32_t b : batches)
      out.push_back(attentionDecodeCase(b, tiny ? 70 : 4096, tiny ? 8 : 32, 0, false, 0, Fp8Cache::Integer));
    // 16 query heads a kv head (Llama-3.1-405B's 128 over 8, one GPU's share of 8: 16 over 1).
    for (uint32_t b : batches)
      for (uint32_t ctx : contexts) out.push_back(attentionDecodeCase(b, ctx, 16, 0, false, 0, Fp8Cache::None, 16));
    // DeepSeek-V3's latent attention on one GPU of eight (16 heads).
    for (uint32_t b : batches)
      for (uint32_t ctx : contexts) out.push_back(attentionDecodeMlaCase(b, ctx, 16));
    for (uint32_t dim : {64u, 128u, 256u})
      for (uint32_t seq : seqs)
        for (bool causal : {false, true}) out.push_back(attentionPrefillCase(tiny ? 1 : 4, tiny ? 2 : 16, seq, dim, causal));
    // DeepSeek-V3's latent attention at prefill, both members: q and k heads of 192, v heads of 128.
    for (bool wgmma : {false, true})
      for (uint32_t seq : seqs)
        for (bool causal : {false, true})
          out.push_back(attentionPrefillMlaCase(tiny ? 1 : 4, tiny ? 2 : 16, seq, causal, wgmma));
    // Paged k and v beside the contiguous mma.sync rows at head_dim 128.
    for (uint32_t seq : seqs)
      for (bool causal : {false, true})
        out.push_back(attentionPrefillCase(tiny ? 1 : 4, tiny ? 2 : 16, tiny ? 64 : seq, 128, causal, false, false, true));
    // And over E4M3 codes (chunked prefill against an fp8 cache): converted as the tiles are staged.
    for (uint32_t seq : seqs)
      for (bool causal : {false, true})
        out.push_back(attentionPrefillCase(tiny ? 1 : 4, tiny ? 2 : 16, tiny ? 64 : seq, 128, causal, false, false, true,
                                           false, true));
    // The sm_90a member at head_dim 128 (issue 15's goal: >= 0.90 x SDPA at seq 4096), and at 256
    // (key tiles of 64).
    for (uint32_t dim : {128u, 256u})
      for (uint32_t seq : seqs)
        for (bool causal : {false, true})
          out.push_back(attentionPrefillCase(tiny ? 1 : 4, tiny ? 2 : 16, seq, dim, causal, true));
    // Both members with an additive bias (a shared seq x seq mask), beside the rows above and SDPA
    // given the same mask.
    for (bool wgmma : {false, true})
      for (uint32_t seq : seqs) out.push_back(attentionPrefillCase(tiny ? 1 : 4, tiny ? 2 : 16, seq, 128, false, wgmma, false, false, true));
    // Its varlen form on the same problems (equal lengths), beside it.
    for (uint32_t seq : seqs)
      for (bool causal : {false, true})
        out.push_back(attentionPrefillCase(tiny ? 2 : 4, tiny ? 2 : 16, seq, 128, causal, true, true));
    // Its paged form (pages of 16 rows: 8 TMA boxes a key tile), beside it; and over E4M3 codes.
    for (bool fp8 : {false, true})
      for (uint32_t seq : seqs)
        for (bool causal : {false, true})
          out.push_back(
              attentionPrefillCase(tiny ? 1 : 4, tiny ? 2 : 16, tiny ? 80 : seq, 128, causal, true, false, true, false, fp8));
  }
  // GEMM per member: squares, and the inference shapes (M tokens against LLaMA-3-8B-sized
  // weights). Tiny: odd sizes (lda = k = 65 takes the path through registers, k = 72 cp.async).
  // The wgmma members (bf16, f16) repeat the squares and the inference shapes from M = 128 on
  // (issue 15's goals); tiny: odd sizes whose leading dimensions TMA takes (multiples of 8).
  for (const GemmMember& g : kGemmMembers) {
    const bool wgmma = std::strcmp(g.dtype, "bf16") == 0 || std::strcmp(g.dtype, "f16") == 0;
    if (tiny) {
      out.push_back(gemmCase(g.dtype, 17, 33, 65));
      out.push_back(gemmCase(g.dtype, 130, 258, 72));
      if (wgmma) out.push_back(gemmCase(g.dtype, 130, 258, 72, true));
      if (std::strcmp(g.dtype, "bf16") == 0 || std::strcmp(g.dtype, "f32") == 0) {
        out.push_back(gemmCase(g.dtype, 17, 33, 600, false, true));
        if (wgmma) out.push_back(gemmCase(g.dtype, 130, 258, 600, true, true));
      }
      if (std::strcmp(g.dtype, "bf16") == 0) {
        out.push_back(gemmCase(g.dtype, 70, 130, 72, false, false, 3));
        out.push_back(gemmCase(g.dtype, 70, 130, 72, true, false, 3));
        // fp8 B: code by code (k = 65), by 8-byte loads (k = 72), and through TMA (rows of 80
        // codes: TMA's 16-byte multiples).
        out.push_back(gemmFp8Case(17, 33, 65));
        out.push_back(gemmFp8Case(130, 258, 72));
        out.push_back(gemmFp8Case(130, 258, 80, true));
        // fp8 A and B: each layout's cp.async path (k = 72, 17 x 33 rows through registers at k = 65),
        // and the wgmma member (rows of 80 codes).
        out.push_back(gemmW8a8Case(17, 33, 65));
        out.push_back(gemmW8a8Case(130, 258, 72));
        out.push_back(gemmW8a8Case(130, 258, 80, true));
        out.push_back(gemmW8a8BlocksCase(130, 258, 304));
      }
      continue;
    }
    // Strided batches (bf16): many small problems, as attention-like or grouped layers have them.
    if (std::strcmp(g.dtype, "bf16") == 0)
      for (bool wg : {false, true})
        for (auto [batch, side] : full ? std::vector<std::pair<uint32_t, uint32_t>>{{32, 512}, {8, 2048}}
                                       : std::vector<std::pair<uint32_t, uint32_t>>{{32, 512}})
          out.push_back(gemmCase(g.dtype, side, side, side, wg, false, batch));
    for (bool wg : {false, true}) {
      if (wg && !wgmma) continue;
      for (uint32_t side : full ? std::vector<uint32_t>{512, 1024, 2048, 4096, 8192} : std::vector<uint32_t>{512})
        out.push_back(gemmCase(g.dtype, side, side, side, wg));
      std::vector<uint32_t> ms = full ? std::vector<uint32_t>{1, 8, 16, 32, 64, 128, 512} : std::vector<uint32_t>{1, 64};
      if (wg) ms = full ? std::vector<uint32_t>{128, 256, 512} : std::vector<uint32_t>{128};
      std::vector<std::pair<uint32_t, uint32_t>> nk = {{4096, 4096}};
      if (full) nk = {{4096, 4096}, {14336, 4096}, {4096, 14336}, {128256, 4096}};
      for (auto [n, k] : nk)
        for (uint32_t m : ms) {
          out.push_back(gemmCase(g.dtype, m, n, k, wg));
          // split_k beside it where the tiles leave SMs idle (bf16 and f32 members).
          const bool splitMember = std::strcmp(g.dtype, "bf16") == 0 || std::strcmp(g.dtype, "f32") == 0;
          if (splitMember && splitsFor(gemmTile(g.dtype, m, wg), m, n, k) > 1)
            out.push_back(gemmCase(g.dtype, m, n, k, wg, true));
        }
    }
    // fp8 weights (E4M3 B) beside the bf16 member, prefill-sized M against LLaMA-3-8B-sized weights.
    if (std::strcmp(g.dtype, "bf16") == 0)
      for (auto [n, k] : full ? std::vector<std::pair<uint32_t, uint32_t>>{{4096, 4096}, {14336, 4096}, {4096, 14336}}
                              : std::vector<std::pair<uint32_t, uint32_t>>{{4096, 4096}})
        for (uint32_t m : full ? std::vector<uint32_t>{16, 64, 128, 512, 4096} : std::vector<uint32_t>{64, 512}) {
          out.push_back(gemmFp8Case(m, n, k));
          if (m >= 128) out.push_back(gemmFp8Case(m, n, k, true));
          // W8A8: fp8 activations too, on the fp8 tensor cores; and with block scales.
          out.push_back(gemmW8a8Case(m, n, k));
          if (m >= 128) out.push_back(gemmW8a8Case(m, n, k, true));
          if (m >= 512) out.push_back(gemmW8a8BlocksCase(m, n, k));
        }
  }
  return out;
}

// ---- cuBLAS, loaded at run time ---------------------------------------------------------------

// The few cuBLAS entry points used, declared here so that the benchmark needs no CUDA toolkit.
// cuBLAS runs on the CUDA runtime's context for device 0, which is the device's primary context:
// the one truenort::Context retains, so both see the same memory and streams.
struct Cublas {
  using Handle = void*;
  int (*create)(Handle*) = nullptr;
  int (*destroy)(Handle) = nullptr;
  int (*setStream)(Handle, CUstream) = nullptr;
  int (*sgemv)(Handle, int trans, int m, int n, const float* alpha, const float* a, int lda, const float* x, int incx,
               const float* beta, float* y, int incy) = nullptr;
  int (*sgemm)(Handle, int transa, int transb, int m, int n, int k, const float* alpha, const float* a, int lda,
               const float* b, int ldb, const float* beta, float* c, int ldc) = nullptr;
  int (*gemmEx)(Handle, int transa, int transb, int m, int n, int k, const void* alpha, const void* a, int atype,
                int lda, const void* b, int btype, int ldb, const void* beta, void* c, int ctype, int ldc, int compute,
                int algo) = nullptr;  // optional: the tensor-core members' reference
  // optional: the batched cases' reference (cublasSgemmStridedBatched, cublasGemmStridedBatchedEx)
  int (*sgemmBatched)(Handle, int transa, int transb, int m, int n, int k, const float* alpha, const float* a, int lda,
                      long long sa, const float* b, int ldb, long long sb, const float* beta, float* c, int ldc,
                      long long sc, int count) = nullptr;
  int (*gemmBatchedEx)(Handle, int transa, int transb, int m, int n, int k, const void* alpha, const void* a, int atype,
                       int lda, long long sa, const void* b, int btype, int ldb, long long sb, const void* beta, void* c,
                       int ctype, int ldc, long long sc, int count, int compute, int algo) = nullptr;
  static constexpr int kOpN = 0;  // CUBLAS_OP_N
  static constexpr int kOpT = 1;  // CUBLAS_OP_T
  void* lib = nullptr;
  Handle handle = nullptr;
  std::string name, why;  // the library loaded, or why none could be used

  bool load(const Context& ctx, const Stream& stream) {
    std::vector<std::string> names = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
    if (const char* env = std::getenv("TRUENOC_CUBLAS")) names.insert(names.begin(), env);
    for (const std::string& n : names) {
      if ((lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL))) {
        name = n;
        break;
      }
      const char* e = dlerror();
      why += (why.empty() ? "" : "; ") + std::string(e ? e : n + ": not found");
    }
    if (!lib) return false;
    // Only the _v2 names: the unsuffixed cublasSgemv is the legacy, handle-less API.
    create = reinterpret_cast<decltype(create)>(dlsym(lib, "cublasCreate_v2"));
    destroy = reinterpret_cast<decltype(destroy)>(dlsym(lib, "cublasDestroy_v2"));
    setStream = reinterpret_cast<decltype(setStream)>(dlsym(lib, "cublasSetStream_v2"));
    sgemv = reinterpret_cast<decltype(sgemv)>(dlsym(lib, "cublasSgemv_v2"));
    sgemm = reinterpret_cast<decltype(sgemm)>(dlsym(lib, "cublasSgemm_v2"));
    gemmEx = reinterpret_cast<decltype(gemmEx)>(dlsym(lib, "cublasGemmEx"));
    sgemmBatched = reinterpret_cast<decltype(sgemmBatched)>(dlsym(lib, "cublasSgemmStridedBatched"));
    gemmBatchedEx = reinterpret_cast<decltype(gemmBatchedEx)>(dlsym(lib, "cublasGemmStridedBatchedEx"));
    if (!create || !destroy || !setStream || !sgemv || !sgemm) {
      why = name + " lacks cublasCreate_v2/cublasSetStream_v2/cublasSgemv_v2/cublasSgemm_v2";
      return false;
    }
    must(ctx.make_current(), "make the context current for cuBLAS");
    if (int st = create(&handle); st != 0) {
      why = "cublasCreate_v2 returned status " + std::to_string(st);
      handle = nullptr;
      return false;
    }
    if (int st = setStream(handle, stream.handle()); st != 0) {
      why = "cublasSetStream_v2 returned status " + std::to_string(st);
      return false;
    }
    return true;
  }

  // y = W x for row-major W (m x k): W is the column-major k x m matrix A, so y = A^T x.
  bool gemv(CUdeviceptr w, CUdeviceptr x, CUdeviceptr y, uint32_t m, uint32_t k) const {
    const float one = 1.0f, zero = 0.0f;
    return sgemv(handle, kOpT, int(k), int(m), &one, reinterpret_cast<const float*>(w), int(k),
                 reinterpret_cast<const float*>(x), 1, &zero, reinterpret_cast<float*>(y), 1) == 0;
  }

  // The case's C = A B in cuBLAS's column-major terms, C^T = B^T A^T. f32: row-major A (m x k) and
  // B (k x n), SGEMM. The others: B given as W (n x k, row-major), so C^T = W A^T: cublasGemmEx
  // with W transposed. batch > 1: that many problems packed one after the other (strided batched).
  bool gemm(const GemmMember& g, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, uint32_t m, uint32_t n, uint32_t k,
            uint32_t batch = 1) const {
    const float one = 1.0f, zero = 0.0f;
    const int32_t ione = 1, izero = 0;
    const long long sa = (long long)m * k, sb = (long long)k * n, sc = (long long)m * n;
    if (std::string_view(g.dtype) == "f32") {
      if (batch > 1)
        return sgemmBatched && sgemmBatched(handle, kOpN, kOpN, int(n), int(m), int(k), &one,
                                            reinterpret_cast<const float*>(b), int(n), sb,
                                            reinterpret_cast<const float*>(a), int(k), sa, &zero,
                                            reinterpret_cast<float*>(c), int(n), sc, int(batch)) == 0;
      return sgemm(handle, kOpN, kOpN, int(n), int(m), int(k), &one, reinterpret_cast<const float*>(b), int(n),
                   reinterpret_cast<const float*>(a), int(k), &zero, reinterpret_cast<float*>(c), int(n)) == 0;
    }
    const bool ints = g.compute == 72;
    const void* alpha = ints ? static_cast<const void*>(&ione) : &one;
    const void* beta = ints ? static_cast<const void*>(&izero) : &zero;
    if (batch > 1)
      return gemmBatchedEx && gemmBatchedEx(handle, kOpT, kOpN, int(n), int(m), int(k), alpha,
                                            reinterpret_cast<const void*>(b), g.cudaIn, int(k), sb,
                                            reinterpret_cast<const void*>(a), g.cudaIn, int(k), sa, beta,
                                            reinterpret_cast<void*>(c), g.cudaOut, int(n), sc, int(batch), g.compute,
                                            -1) == 0;
    if (!gemmEx) return false;
    return gemmEx(handle, kOpT, kOpN, int(n), int(m), int(k), alpha, reinterpret_cast<const void*>(b), g.cudaIn,
                  int(k), reinterpret_cast<const void*>(a), g.cudaIn, int(k), beta, reinterpret_cast<void*>(c),
                  g.cudaOut, int(n), g.compute, -1) == 0;  // CUBLAS_GEMM_DEFAULT
  }

  ~Cublas() {
    if (handle) destroy(handle);
    // lib stays loaded: cuBLAS may still have teardown registered with the CUDA runtime.
  }
};

// ---- measurement -------------------------------------------------------------------------------

struct Bench {
  const Context& ctx;
  const Stream& stream;
  int reps;
  size_t coldBytes;  // rotate buffer sets until this many bytes are touched between reuses

  // Enough copies of a set whose launch touches `touchBytes` to exceed coldBytes, the copies'
  // `allocBytes` together within a quarter of free memory. Small sets need many: the last ones
  // filled would otherwise still be in the L2 when timed.
  int setsFor(double touchBytes, double allocBytes) const {
    size_t freeB = 0, total = 0;
    must(ctx.make_current(), "make the context current");
    (void)ctx.driver().cuMemGetInfo(&freeB, &total);
    double want = std::ceil(double(coldBytes) / std::max(touchBytes, 1.0));
    double fit = std::floor(double(freeB) / 4 / std::max(allocBytes, 1.0));
    return int(std::clamp(std::min(want, fit), 1.0, 1024.0));
  }
  int setsFor(double setBytes) const { return setsFor(setBytes, setBytes); }

  // Median milliseconds of enqueue(set): 3 warm-up calls, then `reps` calls each between two events.
  double time(const std::function<bool(int)>& enqueue, int sets) const {
    for (int i = 0; i < kWarmup; ++i)
      if (!enqueue(i % sets)) return -1;
    std::vector<Event> start, end;
    for (int r = 0; r < reps; ++r) {
      start.push_back(must(Event::create(ctx), "event"));
      end.push_back(must(Event::create(ctx), "event"));
    }
    for (int r = 0; r < reps; ++r) {
      must(start[r].record(stream), "event record");
      if (!enqueue((kWarmup + r) % sets)) return -1;
      must(end[r].record(stream), "event record");
    }
    must(stream.synchronize(), "stream sync");
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) ms.push_back(must(Event::elapsed_ms(start[r], end[r]), "elapsed time"));
    return median(ms);
  }
};

void fillBuffer(const DeviceMemory& m, Fill f, uint32_t range, std::mt19937& rng, const Stream& stream) {
  if (f == Fill::Zero) {
    must(m.fill_async(0, stream), "fill");
    return;
  }
  if (f == Fill::Strided || f == Fill::Constant) {
    std::vector<uint32_t> v(m.bytes() / 4);
    for (size_t i = 0; i < v.size(); ++i) v[i] = f == Fill::Strided ? uint32_t(i) * range : range;
    must(m.upload(v.data(), v.size() * 4), "upload");
    return;
  }
  if (f == Fill::Ids) {
    std::vector<uint32_t> v(m.bytes() / 4);
    for (uint32_t& id : v) id = std::uniform_int_distribution<uint32_t>(0, range - 1)(rng);
    must(m.upload(v.data(), v.size() * 4), "upload");
    return;
  }
  if (f == Fill::Positions) {  // a partial Fisher-Yates shuffle of [0, range)
    size_t count = m.bytes() / 4;
    if (count > range) {
      std::fprintf(stderr, "error: %zu positions cannot be distinct rows of %u\n", count, range);
      std::exit(1);
    }
    std::vector<uint32_t> rows(range);
    for (uint32_t i = 0; i < range; ++i) rows[i] = i;
    for (size_t i = 0; i < count; ++i)
      std::swap(rows[i], rows[std::uniform_int_distribution<size_t>(i, range - 1)(rng)]);
    must(m.upload(rows.data(), count * 4), "upload");
    return;
  }
  if (f == Fill::Mxfp4) {  // whole 17-byte blocks a chunk: random codes, E8M0 scales 121 .. 126
    const size_t chunk = std::min(m.bytes(), (size_t{4} << 20) / 17 * 17);
    std::vector<unsigned char> host(chunk);
    std::uniform_int_distribution<int> byte(0, 255), scale(121, 126);
    for (size_t i = 0; i < chunk; ++i) host[i] = static_cast<unsigned char>(i % 17 == 0 ? scale(rng) : byte(rng));
    for (size_t off = 0; off < m.bytes(); off += chunk)
      must(m.upload(host.data(), std::min(chunk, m.bytes() - off), off), "upload");
    return;
  }
  // One chunk of random values, repeated over the buffer.
  const size_t chunk = std::min(size_t{4} << 20, (m.bytes() + 3) / 4 * 4);
  std::vector<unsigned char> host(chunk);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  for (size_t i = 0; i < chunk; i += 4) {
    float v[2] = {d(rng), d(rng)};
    if (f == Fill::F32) {
      std::memcpy(&host[i], &v[0], 4);
    } else if (f == Fill::S8) {
      for (size_t j = 0; j < 4; ++j) host[i + j] = static_cast<unsigned char>(byte(rng));
    } else if (f == Fill::E4M3) {  // 0x7F and 0xFF are NaN
      for (size_t j = 0; j < 4; ++j) host[i + j] = static_cast<unsigned char>(byte(rng) % 127 | (byte(rng) & 0x80));
    } else {  // two bf16 (the high halves) or f16
      uint32_t b0, b1;
      std::memcpy(&b0, &v[0], 4);
      std::memcpy(&b1, &v[1], 4);
      uint16_t h[2] = {uint16_t(b0 >> 16), uint16_t(b1 >> 16)};
      if (f == Fill::F16) h[0] = tn::ir::f32ToF16(v[0]), h[1] = tn::ir::f32ToF16(v[1]);
      std::memcpy(&host[i], h, 4);
    }
  }
  for (size_t off = 0; off < m.bytes(); off += chunk)
    must(m.upload(host.data(), std::min(chunk, m.bytes() - off), off), "upload");
}

// --check: each launch's arguments against the bundle's signature of its kernel, by parameter
// name and type, so that a case cannot pass a buffer in the wrong place.
// A GEMV's y (buffer 2) against a double-precision reference from its w and x (f32 weights).
std::string checkGemv(const std::deque<DeviceMemory>& mem, const Case::Gemv& g) {
  // Buffer i as f32 values (bf16 widened exactly; fp8 weights: the codes' values times the scale).
  auto values = [&](size_t i, size_t count, bool bf16) {
    std::vector<float> out(count);
    if (i == 0 && g.fp8Scale != 0) {
      std::vector<uint8_t> raw(count);
      must(mem[i].download(raw.data(), count), "download");
      for (size_t j = 0; j < count; ++j) out[j] = float(tn::ir::fp8Value(tn::ir::Fp8Format::E4M3, raw[j]) * g.fp8Scale);
      return out;
    }
    if (!bf16) {
      must(mem[i].download(out.data(), count * 4), "download");
      return out;
    }
    std::vector<uint16_t> raw(count);
    must(mem[i].download(raw.data(), count * 2), "download");
    for (size_t j = 0; j < count; ++j) out[j] = tn::ir::bf16ToF32(raw[j]);
    return out;
  };
  const std::vector<float> w = values(0, size_t(g.m) * g.k, g.wBf16), x = values(1, g.k, g.xBf16), y = values(2, g.m, g.xBf16);
  // As for the comparison with cuBLAS, and y's rounding to bf16.
  const double tol = 1e-3 * std::sqrt(double(g.k));
  for (uint32_t i = 0; i < g.m; ++i) {
    double ref = 0;
    for (uint32_t j = 0; j < g.k; ++j) ref += double(w[size_t(i) * g.k + j]) * x[j];
    if (!(std::fabs(y[i] - ref) <= tol + (g.xBf16 ? std::ldexp(std::fabs(ref), -8) : 0.0)))
      return "y[" + std::to_string(i) + "] = " + std::to_string(y[i]) + ", reference " + std::to_string(ref);
  }
  return "";
}

// Attention: 16 sampled output rows (sequence, query head, query row) against a double-precision
// reference from the case's bf16 q, K and V (and bias), downloading only the rows they need. The weights are
// f32 (decode) or rounded to bf16 as mma inputs (prefill): each off by at most 2^-9 relative, so
// an output row by 2^-9 max|v|, plus its rounding to bf16 (2^-9 of |o|). A row of the wrong head
// or position is off by ~|o|.
std::string checkAttention(const std::vector<const DeviceMemory*>& mem, const Case::Attention& a) {
  auto bf16s = [&](const DeviceMemory& m, size_t first, size_t count) {
    std::vector<uint16_t> raw(count);
    must(m.download(raw.data(), count * 2, first * 2), "download");
    return raw;
  };
  const uint32_t D = a.dim, group = a.qHeads / a.kvHeads;                          // q and K
  const uint32_t OD = a.vDim ? a.vDim : a.vHead ? a.vHead : D, VW = a.vHead ? a.vHead : D;  // o; V's rows
  const double scale = 1.0 / std::sqrt(double(D));
  const DeviceMemory& out = *mem[a.decode ? (a.vDim ? 6 : 7) : 3];
  for (uint32_t s = 0; s < 16; ++s) {
    const uint32_t b = s % a.batch, h = (s * 7) % a.qHeads, i = (s * 131) % a.seqQ, kv = h / group;
    const size_t row = (size_t(b) * a.seqQ + i) * a.qHeads + h;  // q and o: [batch, seq_q, q_heads, D]
    const int64_t last = a.causal || a.decode ? int64_t(i) + a.seqK - a.seqQ : int64_t(a.seqK) - 1;
    const int64_t from = a.window && last + 1 > a.window ? last + 1 - a.window : 0;  // the window's first key
    const size_t keys = size_t(std::max<int64_t>(last + 1, 0));
    const std::vector<uint16_t> q = bf16s(*mem[0], row * D, D), o = bf16s(out, row * OD, OD);
    // K and V (rows of `width` elements a head) as doubles: bf16, or E4M3 codes times their scale.
    auto cache = [&](const DeviceMemory& m, uint32_t width) {
      const size_t count = keys * a.kvHeads * width, first = size_t(b) * a.seqK * a.kvHeads * width;
      std::vector<double> out(count);
      if (a.fp8Scale == 0) {
        const std::vector<uint16_t> raw = bf16s(m, first, count);
        for (size_t e = 0; e < count; ++e) out[e] = tn::ir::bf16ToF32(raw[e]);
        return out;
      }
      std::vector<uint8_t> raw(count);
      must(m.download(raw.data(), count, first), "download");
      for (size_t e = 0; e < count; ++e) out[e] = tn::ir::fp8Value(tn::ir::Fp8Format::E4M3, raw[e]) * a.fp8Scale;
      return out;
    };
    const std::vector<double> k = cache(*mem[1], D), v = a.vDim ? k : cache(*mem[2], VW);
    auto at = [&](const std::vector<double>& t, size_t j, uint32_t d, uint32_t width) {
      return t[(j * a.kvHeads + kv) * width + d];
    };
    const std::vector<uint16_t> bias = a.bias ? bf16s(*mem[4], size_t(i) * a.seqK, keys) : std::vector<uint16_t>();
    std::vector<double> p(keys);
    double mx = -INFINITY, sum = 0;
    for (size_t j = 0; j < keys; ++j) {
      if (int64_t(j) < from) {  // before the window: weight 0
        p[j] = -INFINITY;
        continue;
      }
      double dot = 0;
      for (uint32_t d = 0; d < D; ++d) dot += double(tn::ir::bf16ToF32(q[d])) * at(k, j, d, D);
      mx = std::max(mx, p[j] = dot * scale + (a.bias ? tn::ir::bf16ToF32(bias[j]) : 0.0));
    }
    for (double& x : p) sum += x = std::exp(x - mx);
    for (uint32_t d = 0; d < OD; ++d) {
      double want = 0;
      for (size_t j = 0; j < keys; ++j) want += p[j] * at(v, j, d, VW);
      want = keys ? want / sum : 0.0;
      const double got = tn::ir::bf16ToF32(o[d]);
      if (!(std::fabs(got - want) <= std::ldexp(1.0, -9) * (1.0 + std::fabs(want)) + 1e-6))
        return "o[sequence " + std::to_string(b) + ", row " + std::to_string(i) + ", head " + std::to_string(h) + "][" +
               std::to_string(d) + "] = " + std::to_string(got) + ", reference " + std::to_string(want);
    }
  }
  return "";
}

// --check on a device (a GPU, or the simulated driver in CI): every case's launches once at tiny
// sizes. A launch the runtime refuses or the device faults (on the simulator: any out-of-bounds
// access, shared race or barrier error its checks find) fails the check, as does a wrong f32 GEMV.
// `count` elements of one of a gemm's matrices as doubles: an input (A, B) or C.
std::vector<double> gemmValues(const DeviceMemory& mem, size_t count, const GemmMember& g, bool output) {
  const unsigned bytes = output ? g.outBytes : g.inBytes;
  std::vector<unsigned char> raw(count * bytes);
  must(mem.download(raw.data(), raw.size()), "download");
  std::vector<double> out(count);
  const std::string_view dt = g.dtype;
  for (size_t i = 0; i < count; ++i) {
    const unsigned char* p = &raw[i * bytes];
    uint16_t h;
    float f;
    int32_t s32;
    if (bytes == 4 && dt == "s8") std::memcpy(&s32, p, 4), out[i] = s32;
    else if (bytes == 4) std::memcpy(&f, p, 4), out[i] = f;
    else if (bytes == 1) out[i] = static_cast<int8_t>(*p);
    else std::memcpy(&h, p, 2), out[i] = dt == "f16" ? tn::ir::f16ToF32(h) : tn::ir::bf16ToF32(h);
  }
  return out;
}

// Two C matrices of the same product, uniform [-1, 1) inputs: |c| ~ sqrt(k / 9), and f32
// summation orders differ by ~2^-24 * sqrt(k) * |c| (1e-4 at k = 14336); tf32 inputs rounded
// (cuBLAS) or truncated (ours) to 10 fraction bits differ by ~2^-10 per product; a bf16 or f16 C
// adds one rounding on each side (2^-7, 2^-10 of |c|); s8 products sum exactly in s32. A wrong
// element is off by ~|c|.
// magnitude (W8A8: sum |a b| per element, else empty): the fp8 tensor cores are reported to keep
// about 14 bits of their sums (docs/kernels.md, "Accuracy"), so 2^-9 of it is allowed on top.
std::string compareGemm(const std::vector<double>& got, const std::vector<double>& want, uint32_t n, uint32_t k,
                        const GemmMember& g, const std::vector<double>& magnitude = {}) {
  const std::string_view dt = g.dtype;
  const double abs = dt == "s8" ? 0.0 : (dt == "tf32" ? 4e-3 : 1e-3) * std::sqrt(double(k));
  const double rel = dt == "bf16" ? std::ldexp(1.0, -7) : dt == "f16" ? std::ldexp(1.0, -10) : 0.0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <=
          abs + rel * std::fabs(want[i]) + (magnitude.empty() ? 0.0 : std::ldexp(magnitude[i], -9))))
      return "c[" + std::to_string(i / n) + "][" + std::to_string(i % n) + "] = " + std::to_string(got[i]) +
             ", reference " + std::to_string(want[i]);
  return "";
}

// An upper bound of Σ_k |a b| for every element of a W8A8 C (A m x k, B n x k, both as their bf16
// values), cheap enough for the benchmark's full shapes: |a_i|·|b_j| (Cauchy–Schwarz), from the
// rows' 2-norms, about k · rms(a) · rms(b). compareGemm allows 2^-9 of it, which stays under what a
// wrong element is off by (~sqrt(k) · rms(a) · rms(b)) while k < 2^18: 8 times under at k = 4096.
std::vector<double> gemmMagnitudeBound(const DeviceMemory& aMem, const DeviceMemory& bMem, const GemmMember& g,
                                       uint32_t m, uint32_t n, uint32_t k, uint32_t batch) {
  const size_t sa = size_t(m) * k, sb = size_t(n) * k;
  const std::vector<double> a = gemmValues(aMem, sa * batch, g, false), b = gemmValues(bMem, sb * batch, g, false);
  auto norms = [k](const std::vector<double>& v) {
    std::vector<double> out(v.size() / k);
    for (size_t r = 0; r < out.size(); ++r) {
      double sum = 0;
      for (uint32_t kk = 0; kk < k; ++kk) sum += v[r * k + kk] * v[r * k + kk];
      out[r] = std::sqrt(sum);
    }
    return out;
  };
  const std::vector<double> na = norms(a), nb = norms(b);
  std::vector<double> bound(size_t(m) * n * batch);
  for (uint32_t z = 0; z < batch; ++z)
    for (uint32_t i = 0; i < m; ++i)
      for (uint32_t j = 0; j < n; ++j) bound[(size_t(z) * m + i) * n + j] = na[size_t(z) * m + i] * nb[size_t(z) * n + j];
  return bound;
}

// C against a double-precision product of the case's A and B (B is k x n for f32, n x k else).
std::string checkGemm(const std::deque<DeviceMemory>& mem, const GemmMember& g, uint32_t m, uint32_t n, uint32_t k,
                      uint32_t batch, size_t aIndex, size_t bIndex) {
  const bool f32 = std::string_view(g.dtype) == "f32";
  const size_t sa = size_t(m) * k, sb = size_t(k) * n, sc = size_t(m) * n;
  std::vector<double> a = gemmValues(mem[aIndex], sa * batch, g, false), b = gemmValues(mem[bIndex], sb * batch, g, false);
  std::vector<double> c = gemmValues(mem[2], sc * batch, g, true), want(c.size(), 0.0), magnitude;
  const bool fp8Mma = aIndex != 0;  // W8A8: A's values derived from codes
  if (fp8Mma) magnitude.assign(c.size(), 0.0);
  for (uint32_t z = 0; z < batch; ++z)
    for (uint32_t i = 0; i < m; ++i)
      for (uint32_t j = 0; j < n; ++j)
        for (uint32_t kk = 0; kk < k; ++kk) {
          const double p = a[z * sa + size_t(i) * k + kk] * b[z * sb + (f32 ? size_t(kk) * n + j : size_t(j) * k + kk)];
          want[z * sc + size_t(i) * n + j] += p;
          if (fp8Mma) magnitude[z * sc + size_t(i) * n + j] += std::fabs(p);
        }
  return compareGemm(c, want, n, k, g, magnitude);
}

// The n activations the dequantize reference multiplies, rounded to bf16: x (f32), or, given the
// q8_1 blocks of a case with q8_1 activations (its buffer 2, written by its launches, which must
// have run), the values its kernel multiplies, q * d. Against x itself, q8_1's
// half-step errors (amax/254 each) add up to about 2% of the rms of y at k = 512 and over 3% in
// the tail of 14336 x 8 outputs: a tolerance for them could not tell a wrong element.
std::vector<uint16_t> refActivations(size_t n, const DeviceMemory& x, const DeviceMemory* xq8) {
  std::vector<uint16_t> out(n);
  if (!xq8) {
    std::vector<float> f(n);
    must(x.download(f.data(), n * 4), "download x");
    for (size_t i = 0; i < n; ++i) out[i] = tn::ir::f32ToBf16(f[i]);
    return out;
  }
  constexpr size_t kBlock = 32, kBytes = 36;  // half d, half s, 32 x int8
  std::vector<uint8_t> q(n / kBlock * kBytes);
  must(xq8->download(q.data(), q.size()), "download q8_1 x");
  for (size_t b = 0; b < n / kBlock; ++b) {
    uint16_t dBits;
    std::memcpy(&dBits, &q[b * kBytes], 2);
    const float d = tn::ir::f16ToF32(dBits);
    for (size_t j = 0; j < kBlock; ++j)
      out[b * kBlock + j] = tn::ir::f32ToBf16(float(static_cast<int8_t>(q[b * kBytes + 4 + j])) * d);
  }
  return out;
}

// gemv_q and gemm_q against dequantize + cublasGemmEx on the same weights and activations
// (refActivations): the reference rounds the weights and activations to bf16 (2^-9 relative each,
// random in sign: ~2^-8.5 of the rms of y over a row); a wrong element is off by about the rms of
// y, so 3% of it separates the two.
std::string compareDequantRef(const std::vector<float>& ours, const std::vector<float>& ref) {
  double ss = 0;
  for (float v : ref) ss += double(v) * v;
  const double tol = 0.03 * std::sqrt(ss / double(std::max<size_t>(ref.size(), 1)));
  for (size_t i = 0; i < ref.size(); ++i)
    if (!(std::fabs(double(ours[i]) - ref[i]) <= tol))
      return "y[" + std::to_string(i) + "] = " + std::to_string(ours[i]) + ", reference " + std::to_string(ref[i]) +
             " (tolerance " + std::to_string(tol) + ")";
  return "";
}

double rmsOf(const std::vector<double>& v) {
  double ss = 0;
  for (double x : v) ss += x * x;
  return std::sqrt(ss / double(std::max<size_t>(v.size(), 1)));
}

// gemv_q_swiglu, y = silu(g) * u, against a reference's y and its two products g and u: each
// product may be off by compareDequantRef's 3% of its rms, which moves y by up to
// |silu'(g)| <= 1.1 times g's share times |u| plus |silu(g)| times u's. (3% of y's rms would be
// too tight where a large g meets a large u: y's rms is dominated by a few such elements.)
std::string compareSwigluRef(const std::vector<float>& ours, const std::vector<float>& ref, const std::vector<double>& g,
                             const std::vector<double>& u) {
  const double dg = 0.03 * rmsOf(g), du = 0.03 * rmsOf(u);
  for (size_t i = 0; i < ref.size(); ++i) {
    const double silu = g[i] / (1.0 + std::exp(-g[i])), tol = 1.1 * dg * std::fabs(u[i]) + std::fabs(silu) * du + 1e-30;
    if (!(std::fabs(double(ours[i]) - ref[i]) <= tol))
      return "y[" + std::to_string(i) + "] = " + std::to_string(ours[i]) + ", reference " + std::to_string(ref[i]) +
             " (tolerance " + std::to_string(tol) + ")";
  }
  return "";
}

// The dequantize reference on the CPU (--check on a device, where cuBLAS is not): the product
// cublasGemmEx computes, of our dequantize's bf16 weights (refW) and refActivations, in double,
// against the case's y with compareDequantRef. With a second product (gemv_q_swiglu), the chain's
// last launches (refThen) run too, on the two products put where cuBLAS would put them, and
// their output is compared as the GPU run compares it: `launch` runs one.
std::string checkDequantRef(const std::deque<DeviceMemory>& mem, const Case& c,
                            const std::function<std::string(const Launch&)>& launch) {
  const size_t m = c.refM, k = c.refK, ntok = c.refNtok, src = size_t(c.refSrcX);
  std::vector<uint16_t> x = refActivations(ntok * k, mem[src], c.dtype == "q8_1" ? &mem[src + 1] : nullptr);
  std::vector<float> ours(ntok * m), ref(ntok * m);
  must(mem[size_t(c.refW) - 1].download(ours.data(), ours.size() * 4), "download y");
  auto product = [&](int weights) {
    std::vector<uint16_t> w(m * k);
    must(mem[size_t(weights)].download(w.data(), w.size() * 2), "download dequantized w");
    std::vector<double> y(ntok * m);
    for (size_t t = 0; t < ntok; ++t)
      for (size_t i = 0; i < m; ++i)
        for (size_t j = 0; j < k; ++j) y[t * m + i] += double(tn::ir::bf16ToF32(w[i * k + j])) * tn::ir::bf16ToF32(x[t * k + j]);
    return y;
  };
  std::vector<double> y = product(c.refW);
  if (c.refW2 < 0) {
    for (size_t i = 0; i < y.size(); ++i) ref[i] = float(y[i]);
    return compareDequantRef(ours, ref);
  }
  std::vector<double> up = product(c.refW2);  // swiglu: silu(gate) * up
  for (size_t i = 0; i < y.size(); ++i) ref[i] = float(y[i] / (1.0 + std::exp(-y[i])) * up[i]);
  if (std::string why = compareSwigluRef(ours, ref, y, up); !why.empty()) return why;
  std::vector<float> g32(y.begin(), y.end()), u32(up.begin(), up.end()), chained(y.size());
  must(mem[size_t(c.refY)].upload(g32.data(), g32.size() * 4), "upload the gate product");
  must(mem[size_t(c.refY2)].upload(u32.data(), u32.size() * 4), "upload the up product");
  for (const Launch& l : c.refThen)
    if (std::string why = launch(l); !why.empty()) return why;
  must(mem[size_t(c.refOut)].download(chained.data(), chained.size() * 4), "download the chain's y");
  if (std::string why = compareSwigluRef(ours, chained, y, up); !why.empty()) return "the reference chain: " + why;
  return "";
}

// --only: (op prefix, dtype or empty) pairs, from "OP[/DTYPE],..."; no pair takes every case.
struct CasePicker {
  std::vector<std::pair<std::string, std::string>> picks;
  explicit CasePicker(const std::string& only) {
    for (size_t at = 0; !only.empty() && at <= only.size();) {
      const size_t end = std::min(only.find(',', at), only.size());
      const std::string item = only.substr(at, end - at);
      const size_t slash = item.find('/');
      picks.emplace_back(item.substr(0, slash), slash == std::string::npos ? "" : item.substr(slash + 1));
      at = end + 1;
    }
  }
  bool all() const { return picks.empty(); }
  static bool matches(const std::pair<std::string, std::string>& pick, const Case& c) {
    return c.op.starts_with(pick.first) && (pick.second.empty() || c.dtype == pick.second);
  }
  bool operator()(const Case& c) const {
    return picks.empty() || std::any_of(picks.begin(), picks.end(), [&](const auto& p) { return matches(p, c); });
  }
};

int runTinyCases(const Context& ctx, const std::string& path, const CasePicker& picked) {
  Stream stream = must(Stream::create(ctx), "stream");
  Bundle bundle = must(Bundle::load_file(ctx, path), "load " + path);
  std::printf("running %s at tiny sizes on %s (sm_%u)\n", picked.all() ? "every case" : "the cases of --only",
              ctx.name().c_str(), ctx.sm());
  std::mt19937 rng(12345);
  int bad = 0;
  for (const Case& c : cases(Sizes::Tiny)) {
    if (!picked(c)) continue;
    std::string label = c.op + " " + c.shape + " " + c.dtype, why;
    std::deque<DeviceMemory> mem;
    for (const Buffer& b : c.buffers) {
      mem.push_back(must(DeviceMemory::allocate(ctx, b.bytes), "allocate for " + label));
      fillBuffer(mem.back(), b.fill, b.range, rng, stream);
    }
    must(stream.synchronize(), "fill");
    std::vector<const DeviceMemory*> set;
    for (const DeviceMemory& m : mem) set.push_back(&m);
    deriveBuffers(c, set);
    // The reference's own launches (dequantize) run too; cuBLAS is not there (checkDequantRef
    // runs what follows it, refThen, on the products it computes).
    auto launch = [&](const Launch& l) -> std::string {
      auto k = bundle.kernel(l.kernel);
      if (!k) return k.error().describe();
      std::vector<Arg> args;
      for (const ArgSpec& a : l.args) args.push_back(a.buffer >= 0 ? arg(mem[size_t(a.buffer)].ptr()) : a.scalar);
      if (Status st = k.value().launch_args(stream, args); !st) return st.error().describe();
      if (Status st = stream.synchronize(); !st) return st.error().describe();
      return "";
    };
    std::vector<Launch> all = c.launches;
    all.insert(all.end(), c.refLaunches.begin(), c.refLaunches.end());
    for (const Launch& l : all)
      if (why = launch(l); !why.empty()) break;
    if (why.empty() && c.gemv) why = checkGemv(mem, *c.gemv);
    if (why.empty() && c.gemmM)
      why = checkGemm(mem, gemmMember(c.dtype), c.gemmM, c.gemmN, c.gemmK, c.gemmBatch, size_t(c.gemmA), size_t(c.gemmB));
    if (why.empty() && c.refM) why = checkDequantRef(mem, c, launch);
    if (why.empty() && c.refEqual.first >= 0)
      why = compareBytes(mem[size_t(c.refEqual.first)], mem[size_t(c.refEqual.second)], c.buffers[size_t(c.refEqual.first)].bytes);
    if (why.empty() && c.attention) {
      std::vector<const DeviceMemory*> set;
      for (const DeviceMemory& m : mem) set.push_back(&m);
      why = checkAttention(set, *c.attention);
    }
    std::printf("%s %-40s %s\n", why.empty() ? "ran " : "FAIL", label.c_str(), why.c_str());
    bad += !why.empty();
  }
  if (bad) std::printf("%d case(s) failed on the device\n", bad);
  return bad ? 1 : 0;
}

int checkCases(const std::string& path, bool quick, const CasePicker& picked) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto reader =
      tn::bundle::Reader::open(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  if (!reader) {
    std::fprintf(stderr, "error: %s: %s\n", path.c_str(), reader.error().message.c_str());
    return 1;
  }
  const tn::bundle::Manifest& manifest = reader.value().manifest();
  int bad = 0;
  for (const Case& c : cases(quick ? Sizes::Quick : Sizes::Full)) {
    if (!picked(c)) continue;
    std::string label = c.op + " " + c.shape + " " + c.dtype, why, calls;
    std::vector<Launch> all = c.launches;
    all.insert(all.end(), c.refLaunches.begin(), c.refLaunches.end());
    all.insert(all.end(), c.refThen.begin(), c.refThen.end());
    for (size_t li = 0; li < all.size(); ++li) {
      const Launch& l = all[li];
      const tn::bundle::KernelInfo* k = manifest.find(l.kernel);
      if (!k) {
        why = l.kernel + " is not in the bundle";
        break;
      }
      std::vector<ParamInfo> params;
      std::vector<Arg> args;
      for (const tn::bundle::Param& p : k->params)
        if (p.type.scalar != tn::bundle::ParamType::Scalar::TensorMap)  // the runtime fills tensor maps
          params.push_back({p.name, p.type, argKindOf(p.type).value_or(Arg::Kind::Pointer)});
      for (const ArgSpec& a : l.args) {
        if (a.buffer >= int(c.buffers.size())) why = l.kernel + ": argument " + a.param + " names no buffer";
        args.push_back(a.buffer >= 0 ? arg(CUdeviceptr{0}) : a.scalar);
      }
      if (Status st = checkSignature(params, args, l.kernel); !st) why = st.error().describe();
      for (size_t i = 0; why.empty() && i < params.size(); ++i)
        if (params[i].name != l.args[i].param)
          why = l.kernel + ": parameter " + std::to_string(i) + " is " + params[i].name + ", the case passes " +
                l.args[i].param;
      if (!why.empty()) break;
    }
    // What runs: the case's launches, then its reference (our launches around cuBLAS's products).
    // A kernel launched several times in a row (sample_cutoff_split's steps) is named once, "K x10".
    for (size_t li = 0, n = 1; li < c.launches.size(); li += n) {
      for (n = 1; li + n < c.launches.size() && c.launches[li + n].kernel == c.launches[li].kernel;) ++n;
      calls += (li ? " + " : "") + c.launches[li].kernel + (n > 1 ? " x" + std::to_string(n) : "");
    }
    for (size_t li = 0; li < c.refLaunches.size(); ++li) calls += (li ? " + " : ", ref: ") + c.refLaunches[li].kernel;
    if (c.refM) calls += c.refW2 >= 0 ? " + 2 cublasGemmEx" : " + cublasGemmEx";
    for (const Launch& l : c.refThen) calls += " + " + l.kernel;
    if (why.empty()) {
      std::printf("ok   %-40s %10.3f MB  %s\n", label.c_str(), c.bytes / 1e6, calls.c_str());
    } else {
      std::printf("FAIL %-40s %s\n", label.c_str(), why.c_str());
      ++bad;
    }
  }
  if (bad) {
    std::printf("%d case(s) do not match the bundle\n", bad);
    return 1;
  }
  auto ctx = Context::create(0);
  if (!ctx) {
    std::printf("no device (%s): the cases were not run\n", ctx.error().describe().c_str());
    return 0;
  }
  return runTinyCases(ctx.value(), path, picked);
}

struct Row {
  std::string op, shape, dtype;
  double bytes = 0, oursUs = 0, oursGbs = 0, copyGbs = 0;
  std::optional<double> refGbs;
  double tflops = 0;  // attention prefill
};

struct GemmRow {
  std::string op, dtype, shape;
  double oursUs = 0, oursTflops = 0;
  std::optional<double> refTflops;
};

std::string fmt(double v, const char* f = "%.3f") {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  std::string bundlePath, csv, only;
  bool quick = false, check = false;
  int reps = -1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* opt) -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "error: %s needs a value\n%s", opt, kUsage);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--csv") {
      csv = value("--csv");
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--only") {
      only = value("--only");
    } else if (a == "--check") {
      check = true;
    } else if (a == "--reps") {
      std::string v = value("--reps");
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1 || n > 100000) {
        std::fprintf(stderr, "error: --reps needs a positive integer, not '%s'\n%s", v.c_str(), kUsage);
        return 2;
      }
      reps = int(n);
    } else if (a.size() > 1 && a[0] == '-') {
      std::fprintf(stderr, "error: unknown option '%s'\n%s", a.c_str(), kUsage);
      return 2;
    } else if (bundlePath.empty()) {
      bundlePath = a;
    } else {
      std::fprintf(stderr, "error: more than one bundle given ('%s', '%s')\n%s", bundlePath.c_str(), a.c_str(), kUsage);
      return 2;
    }
  }
  if (bundlePath.empty()) {
    std::fprintf(stderr, "error: no bundle given\n%s", kUsage);
    return 2;
  }
  if (!std::ifstream(bundlePath).good()) {
    std::fprintf(stderr, "error: cannot read %s\n", bundlePath.c_str());
    return 1;
  }
  const std::vector<Case> all = cases(quick ? Sizes::Quick : Sizes::Full);
  const CasePicker picked(only);
  for (const auto& pick : picked.picks)
    if (std::none_of(all.begin(), all.end(), [&](const Case& c) { return CasePicker::matches(pick, c); })) {
      std::fprintf(stderr, "error: --only: no case's op starts with '%s'%s%s\n", pick.first.c_str(),
                   pick.second.empty() ? "" : " with dtype ", pick.second.c_str());
      return 2;
    }
  if (check) return checkCases(bundlePath, quick, picked);
  if (reps < 0) reps = quick ? 5 : 30;

  Context ctx = must(Context::create(0), "context");
  const Driver& drv = ctx.driver();
  Stream stream = must(Stream::create(ctx), "stream");
  Bundle bundle = must(Bundle::load_file(ctx, bundlePath, {.eager = true}), "load " + bundlePath);
  int l2 = 0;
  if (drv.cuDeviceGetAttribute(&l2, kDeviceAttributeL2CacheSize, ctx.device()) != cu::SUCCESS || l2 <= 0)
    l2 = 50 << 20;
  Bench bench{ctx, stream, reps, size_t(l2) * 4};
  std::printf("kernel benchmark on %s (sm_%u), L2 %d MB, median of %d launches after %d warm-up, cold inputs\n",
              ctx.name().c_str(), ctx.sm(), l2 >> 20, reps, kWarmup);

  Cublas cublas;
  bool haveCublas = cublas.load(ctx, stream);
  if (haveCublas)
    std::printf("reference: cuBLAS SGEMV, SGEMM and %s from %s\n",
                cublas.gemmEx ? "GemmEx" : "no GemmEx (the tensor-core rows stay without one)", cublas.name.c_str());
  else std::printf("reference: cuBLAS not available (%s); its column stays empty\n", cublas.why.c_str());

  std::mt19937 rng(12345);
  std::vector<Row> rows;
  // The CSV gets each row as it is measured, so that a run cut off by a time limit keeps the rows
  // it measured (tools/bench/torch_ref.py adds PyTorch's column to what is there).
  std::ofstream csvOut;
  if (!csv.empty()) {
    csvOut.open(csv);
    csvOut << "op,shape,dtype,bytes,ours_us,ours_gbs,copy_gbs,ref_gbs,ours_over_copy,ours_over_ref,ours_tflops\n"
           << std::flush;
    if (!csvOut) {
      std::fprintf(stderr, "error: cannot write %s\n", csv.c_str());
      return 1;
    }
  }
  std::vector<GemmRow> gemmRows;
  int failures = 0;
  for (const Case& c : all) {
    if (!picked(c)) continue;
    std::string label = c.op + " " + c.shape + " " + c.dtype;
    std::vector<Kernel> kernels;
    std::string missing;
    for (const Launch& l : c.launches) {
      auto k = bundle.kernel(l.kernel);
      if (k) kernels.push_back(k.value());
      else missing = l.kernel + ": " + k.error().describe();
    }
    if (!missing.empty()) {
      std::printf("skip %s: %s\n", label.c_str(), missing.c_str());
      ++failures;
      continue;
    }

    // Shared buffers are allocated once; a launch then touches c.bytes of the set, not all of it.
    double setBytes = 0;
    bool anyShared = false;
    for (const Buffer& b : c.buffers) {
      if (!b.shared) setBytes += double(b.bytes);
      anyShared |= b.shared;
    }
    int sets = bench.setsFor(anyShared ? c.bytes : setBytes, setBytes);
    std::deque<DeviceMemory> owned;
    auto allocate = [&](const Buffer& b) {
      owned.push_back(must(DeviceMemory::allocate(ctx, b.bytes), "allocate for " + label));
      fillBuffer(owned.back(), b.fill, b.range, rng, stream);
      return &owned.back();
    };
    std::vector<DeviceMemory*> shared(c.buffers.size(), nullptr);
    for (size_t i = 0; i < c.buffers.size(); ++i)
      if (c.buffers[i].shared) shared[i] = allocate(c.buffers[i]);
    std::vector<std::vector<DeviceMemory*>> mem(sets);
    for (auto& set : mem)
      for (size_t i = 0; i < c.buffers.size(); ++i) set.push_back(shared[i] ? shared[i] : allocate(c.buffers[i]));
    // The arguments of every launch of every set (and of the reference's launches), built once.
    std::vector<std::vector<std::vector<Arg>>> args(sets), refArgs(sets), refThenArgs(sets);
    for (int s = 0; s < sets; ++s)
      for (auto [launches, out] : {std::pair{&c.launches, &args[s]}, std::pair{&c.refLaunches, &refArgs[s]},
                                   std::pair{&c.refThen, &refThenArgs[s]}})
        for (const Launch& l : *launches) {
          std::vector<Arg> a;
          for (const ArgSpec& spec : l.args)
            a.push_back(spec.buffer >= 0 ? arg(mem[s][spec.buffer]->ptr()) : spec.scalar);
          out->push_back(std::move(a));
        }
    must(stream.synchronize(), "fill");
    for (const auto& set : mem) deriveBuffers(c, {set.begin(), set.end()});

    // gemv_q's second reference: dequantize to bf16, then cublasGemmEx on x rounded to bf16 (for
    // q8_1 activations the timed runs multiply x too, and the comparison the kernel's q8_1 values).
    bool haveDequantRef = c.refM && haveCublas && cublas.gemmEx;
    std::vector<Kernel> refKernels, refThenKernels;
    for (auto [launches, out] : {std::pair{&c.refLaunches, &refKernels}, std::pair{&c.refThen, &refThenKernels}})
      for (const Launch& l : *launches) {
        auto k = bundle.kernel(l.kernel);
        if (k) out->push_back(k.value());
        else haveDequantRef = false;
      }
    const size_t srcX = size_t(c.refSrcX);
    if (haveDequantRef) {
      for (int s = 0; s < sets; ++s) {  // x itself: the q8_1 blocks are not written yet
        std::vector<uint16_t> xb = refActivations(size_t(c.refNtok) * c.refK, *mem[s][srcX], nullptr);
        must(mem[s][size_t(c.refX)]->upload(xb.data(), xb.size() * 2), "upload bf16 x");
      }
    }
    auto enqueueRef = [&](int s) {
      for (size_t i = 0; i < refKernels.size(); ++i)
        if (!refKernels[i].launch_args(stream, refArgs[s][i])) return false;
      const CUdeviceptr x = mem[s][size_t(c.refX)]->ptr();
      if (!cublas.gemm(kDequantRef, x, mem[s][size_t(c.refW)]->ptr(), mem[s][size_t(c.refY)]->ptr(), c.refNtok, c.refM, c.refK))
        return false;
      if (c.refW2 >= 0 &&
          !cublas.gemm(kDequantRef, x, mem[s][size_t(c.refW2)]->ptr(), mem[s][size_t(c.refY2)]->ptr(), c.refNtok, c.refM, c.refK))
        return false;
      for (size_t i = 0; i < refThenKernels.size(); ++i)
        if (!refThenKernels[i].launch_args(stream, refThenArgs[s][i])) return false;
      return true;
    };

    // GEMM: the same C as cuBLAS before anything is timed.
    const GemmMember& member = gemmMember(c.dtype);
    bool haveRef = haveCublas && (c.dtype == "f32" || cublas.gemmEx);
    if (c.gemmM && haveRef) {
      const size_t count = size_t(c.gemmM) * c.gemmN * c.gemmBatch;
      must(kernels[0].launch_args(stream, args[0][0]), "launch " + label);
      must(stream.synchronize(), "sync");
      std::vector<double> ours = gemmValues(*mem[0][2], count, member, true);
      if (!cublas.gemm(member, mem[0][size_t(c.gemmA)]->ptr(), mem[0][size_t(c.gemmB)]->ptr(), mem[0][2]->ptr(), c.gemmM, c.gemmN, c.gemmK,
                       c.gemmBatch)) {
        std::printf("cuBLAS failed for %s: no reference\n", label.c_str());
        haveRef = false;
      }
      must(stream.synchronize(), "sync");
      std::vector<double> ref = gemmValues(*mem[0][2], count, member, true);
      // W8A8: the fp8 tensor cores' sums against cuBLAS's f32 ones.
      const std::vector<double> magnitude =
          haveRef && c.gemmCodesA ? gemmMagnitudeBound(*mem[0][size_t(c.gemmA)], *mem[0][size_t(c.gemmB)], member,
                                                       c.gemmM, c.gemmN, c.gemmK, c.gemmBatch)
                                  : std::vector<double>{};
      std::string why = haveRef ? compareGemm(ours, ref, c.gemmN, c.gemmK, member, magnitude) : "";
      if (!why.empty()) {
        std::printf("WARNING %s: ours and cuBLAS differ: %s\n", label.c_str(), why.c_str());
        ++failures;
      }
    }

    // Attention: sampled rows against a CPU reference before anything is timed.
    if (c.attention) {
      for (size_t i = 0; i < kernels.size(); ++i) must(kernels[i].launch_args(stream, args[0][i]), "launch " + label);
      must(stream.synchronize(), "sync");
      std::string why = checkAttention(std::vector<const DeviceMemory*>(mem[0].begin(), mem[0].end()), *c.attention);
      if (!why.empty()) {
        std::printf("WARNING %s: wrong against the CPU reference: %s\n", label.c_str(), why.c_str());
        ++failures;
      }
    }

    Status launchError;
    double ms = bench.time(
        [&](int s) {
          for (size_t i = 0; i < kernels.size(); ++i)
            if (Status st = kernels[i].launch_args(stream, args[s][i]); !st) {
              launchError = st;
              return false;
            }
          return true;
        },
        sets);
    if (ms < 0) die("launch " + label, launchError.error());

    if (c.gemmM) {
      GemmRow g{c.op, c.dtype, c.shape, ms * 1e3, c.flops() / (ms * 1e9), std::nullopt};
      if (haveRef) {
        double cms = bench.time(
            [&](int s) {
              return cublas.gemm(member, mem[s][size_t(c.gemmA)]->ptr(), mem[s][size_t(c.gemmB)]->ptr(), mem[s][2]->ptr(), c.gemmM, c.gemmN,
                                 c.gemmK, c.gemmBatch);
            },
            sets);
        if (cms > 0) g.refTflops = c.flops() / (cms * 1e9);
      }
      gemmRows.push_back(g);
      mem.clear();
      owned.clear();
      ctx.pool().trim();
      // Each row's ratio is printed as it is measured, so that a run cut off by a time limit keeps it.
      std::printf("  measured %-40s %9.1f us  (%d buffer sets)  %.2f TFLOP/s, ours/ref %s\n", label.c_str(), g.oursUs,
                  sets, g.oursTflops, g.refTflops ? fmt(g.oursTflops / *g.refTflops).c_str() : "-");
      std::fflush(stdout);
      continue;
    }

    Row row{c.op, c.shape, c.dtype, c.bytes, ms * 1e3, c.bytes / (ms * 1e6), 0, std::nullopt};
    row.tflops = c.attentionFlops / (ms * 1e9);

    if (c.gemvM && haveCublas) {
      const uint32_t m = c.gemvM, k = c.gemvK;
      double cms = bench.time(
          [&](int s) { return cublas.gemv(mem[s][0]->ptr(), mem[s][1]->ptr(), mem[s][2]->ptr(), m, k); }, sets);
      if (cms < 0) {
        std::printf("cuBLAS SGEMV failed for %s\n", label.c_str());
      } else {
        row.refGbs = c.bytes / (cms * 1e6);
        // Same inputs, two answers: a wrong kernel would make the comparison meaningless.
        std::vector<float> ours(m), ref(m);
        must(kernels[0].launch_args(stream, args[0][0]), "launch " + label);
        must(stream.synchronize(), "sync");
        must(mem[0][2]->download(ours.data(), m * 4), "download");
        (void)cublas.gemv(mem[0][0]->ptr(), mem[0][1]->ptr(), mem[0][2]->ptr(), m, k);
        must(stream.synchronize(), "sync");
        must(mem[0][2]->download(ref.data(), m * 4), "download");
        double worst = 0;
        for (uint32_t i = 0; i < m; ++i) worst = std::max(worst, double(std::fabs(ours[i] - ref[i])));
        // Uniform [-1, 1) inputs: |y| ~ sqrt(k / 9), and the two summation orders differ by
        // ~2^-24 * sqrt(k) * |y| (1e-4 at k = 8192); a wrong element is off by ~|y|.
        double tol = 1e-3 * std::sqrt(double(k));
        if (!(worst <= tol)) {
          std::printf("WARNING %s: ours and cuBLAS differ by up to %g (tolerance %g)\n", label.c_str(), worst, tol);
          ++failures;
        }
      }
    }
    if (haveDequantRef) {
      // Same weights and x, two answers, before the reference is timed.
      const size_t count = size_t(c.refNtok) * c.refM;
      std::vector<float> ours(count), ref(count);
      for (size_t i = 0; i < kernels.size(); ++i) must(kernels[i].launch_args(stream, args[0][i]), "launch " + label);
      must(stream.synchronize(), "sync");
      must(mem[0][size_t(c.refW) - 1]->download(ours.data(), count * 4), "download");
      if (c.dtype == "q8_1") {
        std::vector<uint16_t> xb = refActivations(size_t(c.refNtok) * c.refK, *mem[0][srcX], mem[0][srcX + 1]);
        must(mem[0][size_t(c.refX)]->upload(xb.data(), xb.size() * 2), "upload bf16 q8_1 x");
      }
      if (!enqueueRef(0) || !stream.synchronize()) {
        std::printf("dequantize + cuBLAS failed for %s: no reference\n", label.c_str());
      } else {
        must(mem[0][size_t(c.refCompared())]->download(ref.data(), count * 4), "download");
        std::string why;
        if (c.refW2 >= 0) {  // swiglu: the tolerance from the reference's two products
          std::vector<float> gf(count), uf(count);
          must(mem[0][size_t(c.refY)]->download(gf.data(), count * 4), "download");
          must(mem[0][size_t(c.refY2)]->download(uf.data(), count * 4), "download");
          why = compareSwigluRef(ours, ref, std::vector<double>(gf.begin(), gf.end()), std::vector<double>(uf.begin(), uf.end()));
        } else {
          why = compareDequantRef(ours, ref);
        }
        if (!why.empty()) {
          std::printf("WARNING %s: ours and dequantize + cuBLAS differ: %s\n", label.c_str(), why.c_str());
          ++failures;
        }
        double rms = bench.time(enqueueRef, sets);
        if (rms > 0) row.refGbs = c.bytes / (rms * 1e6);
      }
    }
    // A fused kernel against its unfused chain of our own kernels: the same bytes, then the chain
    // timed as the reference.
    if (c.refEqual.first >= 0 && refKernels.size() == c.refLaunches.size()) {
      auto enqueueChain = [&](int s) {
        for (size_t i = 0; i < refKernels.size(); ++i)
          if (!refKernels[i].launch_args(stream, refArgs[s][i])) return false;
        return true;
      };
      for (size_t i = 0; i < kernels.size(); ++i) must(kernels[i].launch_args(stream, args[0][i]), "launch " + label);
      if (!enqueueChain(0) || !stream.synchronize()) {
        std::printf("the unfused chain failed for %s: no reference\n", label.c_str());
      } else {
        const auto [ours, ref] = c.refEqual;
        if (std::string why = compareBytes(*mem[0][size_t(ours)], *mem[0][size_t(ref)], c.buffers[size_t(ours)].bytes);
            !why.empty()) {
          std::printf("WARNING %s: ours and the unfused chain differ: %s\n", label.c_str(), why.c_str());
          ++failures;
        }
        double rms = bench.time(enqueueChain, sets);
        if (rms > 0) row.refGbs = c.bytes / (rms * 1e6);
      }
    }
    mem.clear();
    owned.clear();

    // A device-to-device copy moving as many bytes (half read, half written), also cold.
    size_t half = std::max<size_t>(size_t(c.bytes / 2) / 256 * 256, 256);
    int copySets = bench.setsFor(2.0 * double(half));
    std::vector<std::pair<DeviceMemory, DeviceMemory>> copies;
    for (int s = 0; s < copySets; ++s) {
      DeviceMemory src = must(DeviceMemory::allocate(ctx, half), "allocate copy source");
      DeviceMemory dst = must(DeviceMemory::allocate(ctx, half), "allocate copy target");
      must(src.fill_async(1, stream), "fill");
      copies.emplace_back(std::move(src), std::move(dst));
    }
    double copyMs = bench.time(
        [&](int s) {
          return drv.cuMemcpyDtoDAsync(copies[s].second.ptr(), copies[s].first.ptr(), half, stream.handle()) ==
                 cu::SUCCESS;
        },
        copySets);
    if (copyMs < 0) {
      std::fprintf(stderr, "error: cuMemcpyDtoDAsync failed\n");
      return 1;
    }
    row.copyGbs = 2.0 * double(half) / (copyMs * 1e6);
    copies.clear();
    must(stream.synchronize(), "sync");
    ctx.pool().trim();
    rows.push_back(row);
    if (csvOut.is_open()) {
      csvOut << row.op << "," << row.shape << "," << row.dtype << "," << fmt(row.bytes, "%.0f") << ","
             << fmt(row.oursUs) << "," << fmt(row.oursGbs, "%.2f") << "," << fmt(row.copyGbs, "%.2f") << ","
             << (row.refGbs ? fmt(*row.refGbs, "%.2f") : "") << "," << fmt(row.oursGbs / row.copyGbs, "%.4f") << ","
             << (row.refGbs ? fmt(row.oursGbs / *row.refGbs, "%.4f") : "") << ","
             << (row.tflops > 0 ? fmt(row.tflops, "%.2f") : "") << "\n"
             << std::flush;
      if (!csvOut) {
        std::fprintf(stderr, "error: cannot write %s\n", csv.c_str());
        return 1;
      }
    }
    std::printf("  measured %-40s %9.1f us  (%d buffer sets)  ours/copy %.3f, ours/ref %s\n", label.c_str(),
                row.oursUs, sets, row.oursGbs / row.copyGbs, row.refGbs ? fmt(row.oursGbs / *row.refGbs).c_str() : "-");
    std::fflush(stdout);
  }

  std::printf("\n%-22s %-16s %-6s %10s %10s %10s %10s %10s\n", "op", "shape", "dtype", "ours GB/s", "copy GB/s",
              "ref GB/s", "ours/copy", "ours/ref");
  for (const Row& r : rows) {
    std::printf("%-22s %-16s %-6s %10.1f %10.1f %10s %10.3f %10s\n", r.op.c_str(), r.shape.c_str(), r.dtype.c_str(),
                r.oursGbs, r.copyGbs, r.refGbs ? fmt(*r.refGbs, "%.1f").c_str() : "-", r.oursGbs / r.copyGbs,
                r.refGbs ? fmt(r.oursGbs / *r.refGbs).c_str() : "-");
  }
  std::printf("ref: cuBLAS SGEMV (gemv f32); gemv_q, gemm_q: our dequantize to bf16 + cublasGemmEx (bf16 x, f32 y); "
              "gemv_q_swiglu: two of those + our swiglu; rmsnorm_quantize_q8_1 (_fp8): our rmsnorm + quantize_q8_1 (quantize_fp8); "
              "the same bytes counted; GB/s = (bytes read + bytes written) / median time; attention decode counts K "
              "and V only\n");
  if (std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.tflops > 0; })) {
    std::printf("\n%-26s %-18s %12s %12s\n", "op", "shape (BxHxSxD)", "ours us", "ours TFLOP/s");
    for (const Row& r : rows)
      if (r.tflops > 0) std::printf("%-26s %-18s %12.1f %12.2f\n", r.op.c_str(), r.shape.c_str(), r.oursUs, r.tflops);
    std::printf("TFLOP/s = 4 B H S^2 D (causal: half) / median time; tools/bench/torch_ref.py adds PyTorch SDPA's\n");
  }
  if (!gemmRows.empty()) {
    std::printf("\n%-16s %-22s %12s %12s %12s %10s\n", "op", "shape (MxNxK)", "ours us", "ours TFLOP/s",
                "ref TFLOP/s", "ours/ref");
    for (const GemmRow& g : gemmRows)
      std::printf("%-16s %-22s %12.1f %12.2f %12s %10s\n", (g.op + " " + g.dtype).c_str(), g.shape.c_str(), g.oursUs,
                  g.oursTflops, g.refTflops ? fmt(*g.refTflops, "%.2f").c_str() : "-",
                  g.refTflops ? fmt(g.oursTflops / *g.refTflops).c_str() : "-");
    std::printf("ref: f32 cuBLAS SGEMM (no TF32), A and B row-major; tf32, bf16, f16, s8 cublasGemmEx (TF32, f32, f32, "
                "s32 compute), B column-major (x W^T); gemm[_wgmma]_fp8: E4M3 B (ours) against cublasGemmEx of its "
                "bf16 values; gemm[_wgmma]_w8a8[_blocks]: E4M3 A and B (block scales of 1) against cublasGemmEx of their "
                "bf16 values; TFLOP/s (s8: TOPS) = 2 M N K / median time\n");
  }
  if (failures) std::printf("%d case(s) skipped or failed\n", failures);
  return failures ? 1 : 0;
}
