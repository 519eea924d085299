// The gemm family's shared pieces: its options, its parameters and its epilogue. The template
// (kernels/Gemm.cpp) builds the SIMT f32 member itself and the tensor-core members (tf32, bf16,
// f16, s8, u8) with buildGemmTensorCore (kernels/GemmTc.cpp). docs/kernels.md has the contract.
#pragma once

#include <optional>
#include <vector>

#include "kernels/Library.h"

namespace tn::kernels::lib::gemm {

// The SIMT member's block, and the tensor-core members' default: 256 threads.
inline constexpr unsigned kThreads = 256;

enum class Layout : uint8_t { Row, Col };
enum class Activation : uint8_t { None, Relu, Gelu, GeluErf, Silu };
// The element type of A and B. F32 is the SIMT member; Tf32 stores f32 and multiplies on the
// tensor cores as tf32.
enum class Input : uint8_t { F32, Tf32, BF16, F16, S8, U8 };
// The element type of C, bias and residual: a float storage type, or s32 for s8/u8.
enum class Output : uint8_t { F32, BF16, F16, S32 };

struct Config {
  Input in;
  Output out;
  Layout a, b;
  unsigned tileM, tileN, stages, warps;
  bool bias, residual;
  Activation act;
  bool wgmma = false;  // mainloop = "wgmma": the sm_90a member (kernels/GemmWgmma.cpp), not batched
  unsigned blocks = 0; // wgmma: the persistent grid's cap
  bool integer() const { return out == Output::S32; }
};

// The options' values; nullopt with an error in diags when they do not go together (an s8 input
// with an f32 output, gelu on integers).
std::optional<Config> configOf(const Options& o, ir::Diagnostics* diags = nullptr);

// The kernel's parameters, declared in the documented order: a, b, c, [bias], [residual], m, n,
// k, lda, ldb, ldc, batch, stride_a, stride_b, stride_c, alpha, beta (s32 for integer members);
// the wgmma members have no batch, stride_a, stride_b and stride_c.
struct Params {
  Value a, b, c, bias, residual;
  Value m, n, k, lda, ldb, ldc;
  Value strideA, strideB, strideC;
  Value alpha, beta;
};
Params declareParams(KernelBuilder& kb, const Config& c);

// p + z * stride elements of `bytes` bytes: batch z's matrix.
Value batchBase(KernelBuilder& kb, Value p, Value stride, Value z, unsigned bytes, std::string_view name);

// Stores a thread's results: the elements of C at rows[i] x cols[j] (row-major acc[i * cols.size()
// + j], f32 or s32) become act(alpha * acc + beta * C + bias) + residual, written where row < m and
// col < n. C is not read when beta is 0. z: the batch index, or an invalid Value when not batched.
void storeResults(KernelBuilder& kb, const Config& c, const Params& p, Value z, const std::vector<Value>& rows,
                  const std::vector<Value>& cols, const std::vector<Value>& acc);

// The tensor-core members (c.in other than F32).
std::optional<ir::Module> buildGemmTensorCore(const Config& c, ir::Diagnostics& diags);
// The wgmma members (c.wgmma: bf16/f16, sm_90a) and their launch rule, tensor maps included.
std::optional<ir::Module> buildGemmWgmma(const Config& c, ir::Diagnostics& diags);
LaunchRule wgmmaLaunchRule(const Config& c);

}  // namespace tn::kernels::lib::gemm
