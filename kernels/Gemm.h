// The gemm family's shared pieces: its options, its parameters and its epilogue. The template
// (kernels/Gemm.cpp) builds the SIMT f32 member itself and the tensor-core members (tf32, bf16,
// f16, s8, u8, fp8) with buildGemmTensorCore (kernels/GemmTc.cpp). docs/kernels.md has the contract.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "kernels/Library.h"

namespace tn::kernels::lib::gemm {

// The SIMT member's block, and the tensor-core members' default: 256 threads.
inline constexpr unsigned kThreads = 256;

enum class Layout : uint8_t { Row, Col };
enum class Activation : uint8_t { None, Relu, Gelu, GeluErf, Silu };
// The element type of A and B. F32 is the SIMT member; Tf32 stores f32 and multiplies on the
// tensor cores as tf32; E4M3 and E5M2 are fp8 codes (u8) that the tensor cores multiply as such
// (sm_89+ mma.sync, sm_90a wgmma) into f32.
enum class Input : uint8_t { F32, Tf32, BF16, F16, S8, U8, E4M3, E5M2 };
// The element type of C, bias and residual: a float storage type, or s32 for s8/u8.
enum class Output : uint8_t { F32, BF16, F16, S32 };

struct Config {
  Input in;
  Output out;
  Layout a, b;
  unsigned tileM, tileN, stages, warps;
  bool bias, residual;
  Activation act;
  bool wgmma = false;  // mainloop = "wgmma": the sm_90a member (kernels/GemmWgmma.cpp)
  unsigned blocks = 0; // wgmma: the persistent grid's cap
  bool splitK = false;  // split_k: K split over `splits` blocks per tile, the parameters splits and workspace
  Fp8 bCodes = Fp8::None;  // b_dtype: B holds fp8 codes, converted to A's type as they are staged (mma.sync, bf16/f16)
  Fp8 bFormat = Fp8::None; // an fp8 dtype: the format of B's codes (b_dtype; auto: A's), alike or mixed
  bool bScales = false;    // b_scales: column j of A B times b_scales[j] (a pointer after bias and residual)
  bool aScales = false;    // a_scales: row i of A B times a_scales[i] (fp8 A; the pointer after b_scales)
  unsigned scaleBlock = 0; // scale_block: 0, or 128: a_scales and b_scales per 128-wide K group (wgmma, fp8)
  bool fp8Cvt = false;     // fp8 codes decoded by cvt.f16x2 (sm_89+), else by integer instructions
  bool experts = false;    // experts: a grouped GEMM, B (bias, b_scales) the M tile's expert's
  bool integer() const { return out == Output::S32; }
  // Whether the epilogue scales rows by a_scales and columns by b_scales (block scales are applied
  // in the K loop instead).
  bool rowScales() const { return aScales && scaleBlock == 0; }
  bool columnScales() const { return bScales && scaleBlock == 0; }
  // The format of fp8 A (dtype fp8_e4m3 / fp8_e5m2; B's is bFormat), or Fp8::None.
  Fp8 codes() const { return in == Input::E4M3 ? Fp8::E4M3 : in == Input::E5M2 ? Fp8::E5M2 : Fp8::None; }
};

// The options' values; nullopt with an error in diags when they do not go together (an s8 input
// with an f32 output, gelu on integers).
std::optional<Config> configOf(const Options& o, ir::Diagnostics* diags = nullptr);
// The b_dtype option of a bf16 or f16 dtype (W8A16): the format of B's fp8 codes, converted as they
// are staged, or Fp8::None (also with an fp8 dtype, whose B the tensor cores take as codes).
Fp8 bCodesOf(const Options& o);

// The kernel's parameters, declared in the documented order: a, b, c, [bias], [residual],
// [b_scales], [a_scales], [tile_experts], m, n, k, lda, ldb, ldc, batch, stride_a, stride_b, stride_c,
// [n_experts], alpha, beta (s32 for integer members), the same for every mainloop; split_k adds
// splits (u32) and workspace at the end.
struct Params {
  Value a, b, c, bias, residual, bScales, aScales;
  Value m, n, k, lda, ldb, ldc;
  Value batch, strideA, strideB, strideC;
  Value alpha, beta;
  Value splits, workspace;
  Value tileExperts, nExperts;  // experts
};
Params declareParams(KernelBuilder& kb, const Config& c);

// p + z * stride elements of `bytes` bytes: batch z's matrix.
Value batchBase(KernelBuilder& kb, Value p, Value stride, Value z, unsigned bytes, std::string_view name);

// Stores a thread's results: the elements of C at rows[i] x cols[j] (row-major acc[i * cols.size()
// + j], f32 or s32) become act(alpha * acc + beta * C + bias) + residual (acc scaled by b_scales[j]
// and a_scales[i] where the kernel has them), written where row < m and col < n. C is not read when beta is 0. z: the batch index, or an invalid Value when not batched.
// With `first`, acc holds whole rows from element `first` of that grid on.
void storeResults(KernelBuilder& kb, const Config& c, const Params& p, Value z, const std::vector<Value>& rows,
                  const std::vector<Value>& cols, const std::vector<Value>& acc, size_t first = 0);

// Split-K (split_k; docs/kernels.md): the `splits` blocks of a tile each multiply a share of K
// and leave their partial product in `workspace`; each thread counts its arrival on its own
// counter (atom.inc, wrapping to 0 again), and the thread that arrives last at a tile's
// accumulator slot sums the partials in split order, so the result does not depend on which
// block finished last. Workspace: per tile kSplitCounters u32 counters, zero before the first
// launch (every launch leaves them zero), then per tile and split `threads` x acc.size() words.
inline constexpr unsigned kSplitCounters = 256;  // the most threads of a tile that hold accumulators

struct Split {
  Value count;  // max(splits, 1); invalid without split_k
  Value index;  // this block's (or work unit's) split
  Value tile;   // the tile's number over the launch (invalid: a batched member's, from ctaid) ...
  Value tiles;  // ... and how many there are
};
struct StepRange {
  Value first, count;
};
// The z index of a batched member's block: its batch, and its split when c.splitK (z = batch *
// splits + split).
std::pair<Value, Split> batchAndSplit(KernelBuilder& kb, const Config& c, const Params& p);
// Split s.index's share of `steps` K steps: the first `steps % count` splits take one more. All
// of them without split_k.
StepRange splitSteps(KernelBuilder& kb, const Split& s, Value steps);
// Stores a thread's `count` accumulators (accumulator i is acc(i)) through store(first, n, at),
// which stores accumulators first .. first + n - 1, accumulator i being at(i): all of them at
// once without split_k or with splits 1; else the thread writes them as its split's partial and
// counts its arrival, and the thread that arrives last sums every split's partial and stores the
// sums `chunk` at a time. `thread` < `threads` (at most kSplitCounters) is the thread among those
// holding the tile's accumulators. Accumulators are asked for where they are used, so that a
// member can hand out the lanes of a vector one at a time.
using AccFn = std::function<Value(size_t)>;
using StoreFn = std::function<void(size_t first, size_t n, const AccFn& at)>;
void reduceSplits(KernelBuilder& kb, const Config& c, const Params& p, const Split& s, unsigned threads,
                  Value thread, size_t count, const AccFn& acc, size_t chunk, const StoreFn& store);
// at(first) ... at(first + count - 1).
std::vector<Value> valuesOf(size_t first, size_t count, const AccFn& at);

// The tensor-core members (c.in other than F32).
std::optional<ir::Module> buildGemmTensorCore(const Config& c, ir::Diagnostics& diags);
// The wgmma members (c.wgmma: bf16/f16, fp8 K-major; sm_90a) and their launch rule, tensor maps included.
std::optional<ir::Module> buildGemmWgmma(const Config& c, ir::Diagnostics& diags);
LaunchRule wgmmaLaunchRule(const Config& c);

}  // namespace tn::kernels::lib::gemm
