// gemm (kernels/Gemm.cpp, spec test/library/gemm.toml), the SIMT f32 member, against a
// double-precision reference: every layout of A and B, both tile sizes, every epilogue, odd sizes
// (1x1x1, 17x33x65, 130x258x72: partial tiles in M, N and K, an odd number of K steps),
// strided batches, k = 0, beta = 0 over a C full of NaN (C must not be read), and leading
// dimensions larger than the matrices.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "ir/Float8.h"
#include "library_harness.h"

using namespace tn::libtest;

namespace {

enum class Act { None, Relu, Gelu, GeluErf, Silu };
// A and B's element type, and C's (with bias and residual).
enum class In { F32, Tf32, BF16, F16, S8, U8, E4M3, E5M2 };
enum class Out { F32, BF16, F16, S32 };

struct Variant {
  const char* kernel;
  bool aCol, bCol, bias, residual;
  Act act;
  In in = In::F32;
  Out out = Out::F32;
  const char* spec = "gemm";
  bool splitK = false;  // split_k: the splits and workspace parameters
  uint32_t tileM = 128, tileN = 128;
  const char* target = "";  // whose code the interpreter runs (Call::target)
  int codes = -1;        // fp8 B (b_dtype): an ir::Fp8Format, -1 for none
  bool bScales = false;  // b_scales: one f32 per column of C
  bool aScales = false;  // a_scales: one f32 per row of C (fp8 A)
  bool blockScales = false;  // scale_block = 128: a_scales per row and 128-wide K group, b_scales per 128 x 128 block
  bool experts = false;  // experts: B, bias and b_scales the M tile's expert's (Problem::experts of them)
};

constexpr Variant kRR{"gemm_rr", false, false, false, false, Act::None};
constexpr Variant kRC{"gemm_rc", false, true, false, false, Act::None};
constexpr Variant kCR{"gemm_cr", true, false, false, false, Act::None};
constexpr Variant kCC{"gemm_cc", true, true, false, false, Act::None};
constexpr Variant kBiasGeluRes{"gemm_bias_gelu_res", false, false, true, true, Act::Gelu};
constexpr Variant kBiasRelu{"gemm_bias_relu", false, true, true, false, Act::Relu};
constexpr Variant kSilu{"gemm_silu", true, false, false, false, Act::Silu};
constexpr Variant kGeluErfRes{"gemm_gelu_erf_res", false, false, false, true, Act::GeluErf};

struct Problem {
  uint32_t m, n, k, batch = 1;
  uint32_t pad = 0;      // extra elements per leading dimension
  float alpha = 1.0f, beta = 0.0f;
  bool align = false;    // leading dimensions rounded up to 16 elements (the cp.async path)
  uint32_t splits = 0;   // split_k members: the splits argument
  uint32_t gap = 0;      // elements between one batch's matrices and the next's
  bool shareA = false, shareB = false;  // stride_a or stride_b 0: one matrix for every batch
  bool specials = false;  // fp8 B: +inf, -inf (E5M2; E4M3 has none) and NaN codes among B's
  uint32_t experts = 0;   // experts members: B's planes; each M tile's expert random, some none or unknown
};

double activate(Act a, double x) {
  switch (a) {
    case Act::None: return x;
    case Act::Relu: return x < 0 ? 0.0 : x;
    case Act::Gelu: return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case Act::GeluErf: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Act::Silu: return x / (1 + std::exp(-x));
  }
  return x;
}

bool integer(In in) { return in == In::S8 || in == In::U8; }
// The format of fp8 A and B (dtype fp8_*), or -1.
int fp8Of(In in) { return in == In::E4M3 ? int(tn::ir::Fp8Format::E4M3) : in == In::E5M2 ? int(tn::ir::Fp8Format::E5M2) : -1; }
Dtype storage(Out o) { return o == Out::BF16 ? Dtype::BF16 : o == Out::F16 ? Dtype::F16 : Dtype::F32; }

// n elements of type `in` (the bytes the kernel reads) and the values they hold.
struct Matrix {
  std::vector<std::byte> bytes;
  std::vector<double> values;
};
Matrix codes(std::mt19937& rng, tn::ir::Fp8Format f, size_t n);
Matrix inputs(std::mt19937& rng, In in, size_t n) {
  if (fp8Of(in) >= 0) return codes(rng, tn::ir::Fp8Format(fp8Of(in)), n);
  Matrix mx;
  if (integer(in)) {
    std::uniform_int_distribution<int> pick(0, 255);
    for (size_t i = 0; i < n; ++i) {
      auto byte = static_cast<uint8_t>(pick(rng));
      mx.bytes.push_back(std::byte{byte});
      mx.values.push_back(in == In::S8 ? static_cast<int8_t>(byte) : byte);
    }
    return mx;
  }
  const Dtype d = in == In::BF16 ? Dtype::BF16 : in == In::F16 ? Dtype::F16 : Dtype::F32;
  mx.bytes = encode(d, uniform(rng, n));
  for (float v : decode(d, mx.bytes)) mx.values.push_back(v);
  return mx;
}
constexpr int kE5M2Format = int(tn::ir::Fp8Format::E5M2);

// n fp8 codes of every finite value (NaN and infinities left out) and their values.
Matrix codes(std::mt19937& rng, tn::ir::Fp8Format f, size_t n) {
  Matrix mx;
  std::uniform_int_distribution<int> pick(0, 255);
  while (mx.values.size() < n) {
    const auto code = static_cast<uint8_t>(pick(rng));
    const double x = tn::ir::fp8Value(f, code);
    if (!std::isfinite(x)) continue;
    mx.bytes.push_back(std::byte{code});
    mx.values.push_back(x);
  }
  return mx;
}
// n elements of C's type; integers small enough that nothing wraps.
Matrix outputs(std::mt19937& rng, Out out, size_t n) {
  Matrix mx;
  if (out == Out::S32) {
    std::uniform_int_distribution<int32_t> pick(-1000, 1000);
    std::vector<int32_t> v(n);
    for (int32_t& x : v) x = pick(rng);
    mx.bytes.resize(n * 4);
    std::memcpy(mx.bytes.data(), v.data(), mx.bytes.size());
    mx.values.assign(v.begin(), v.end());
    return mx;
  }
  mx.bytes = encode(storage(out), uniform(rng, n));
  for (float v : decode(storage(out), mx.bytes)) mx.values.push_back(v);
  return mx;
}

// Runs one problem and checks every element of C (and that C's padding is untouched).
void checkGemm(Runner& r, std::mt19937& rng, const Variant& v, const Problem& p) {
  auto ld = [&](uint32_t d) { return p.align ? (d + p.pad + 15) / 16 * 16 : d + p.pad; };
  const uint32_t lda = ld(v.aCol ? p.m : p.k), ldb = ld(v.bCol ? p.k : p.n), ldc = ld(p.n);
  const uint64_t oneA = uint64_t(v.aCol ? p.k : p.m) * lda, oneB = uint64_t(v.bCol ? p.n : p.k) * ldb,
                 oneC = uint64_t(p.m) * ldc;
  const uint64_t sa = p.shareA ? 0 : oneA + p.gap, sb = p.shareB ? 0 : oneB + p.gap, sc = oneC + p.gap;
  // The batches' span (a buffer is never empty); experts: B's planes are the experts'.
  auto sizedOf = [&](uint64_t one, uint64_t stride, uint32_t planes) {
    return std::max<uint64_t>(stride * std::max(planes, 1u) - stride + one, 1);
  };
  auto sized = [&](uint64_t one, uint64_t stride) { return sizedOf(one, stride, p.batch); };
  const uint32_t bPlanesAll = v.experts ? p.experts : p.batch;
  const bool ints = v.out == Out::S32;
  Matrix a = inputs(rng, v.in, sized(oneA, sa));
  Matrix b = v.codes < 0 ? inputs(rng, v.in, sizedOf(oneB, sb, bPlanesAll))
                         : codes(rng, tn::ir::Fp8Format(v.codes), sizedOf(oneB, sb, bPlanesAll));
  // Experts: M tile t multiplies expert tileExperts[t]; every third tile from the second none (left
  // alone), the fourth an unknown expert (NaN).
  const uint32_t mTiles = (p.m + v.tileM - 1) / v.tileM;
  std::vector<uint32_t> tileExperts(std::max(mTiles, 1u));
  for (uint32_t t = 0; t < mTiles; ++t)
    tileExperts[t] = t % 3 == 1 ? 0xFFFFFFFFu : t == 3 ? p.experts + 3 : uint32_t(rng() % std::max(p.experts, 1u));
  auto expertOf = [&](uint32_t i) { return v.experts ? tileExperts[i / v.tileM] : 0u; };
  const int bFormat = v.codes >= 0 ? v.codes : fp8Of(v.in);
  if (p.specials && p.k > 0) {
    // +inf at the first K of the last stage of 32 (the one a chunk past K would read again if
    // the kernel did not zero it: 0 times inf is NaN), -inf and NaN anywhere.
    const bool e5 = bFormat == kE5M2Format;
    std::uniform_int_distribution<uint32_t> pickK(0, p.k - 1), pickN(0, p.n - 1);
    const uint32_t at[3][2] = {{(p.k - 1) / 32 * 32, p.n / 2}, {pickK(rng), pickN(rng)}, {pickK(rng), pickN(rng)}};
    const uint8_t special[3] = {uint8_t(e5 ? 0x7C : 0x7F), uint8_t(e5 ? 0xFC : 0xFF), uint8_t(e5 ? 0x7E : 0x7F)};
    for (int i = 0; i < 3; ++i) {
      const uint64_t index = v.bCol ? uint64_t(at[i][1]) * ldb + at[i][0] : uint64_t(at[i][0]) * ldb + at[i][1];
      b.bytes[index] = std::byte{special[i]};
      b.values[index] = tn::ir::fp8Value(tn::ir::Fp8Format(bFormat), special[i]);
    }
  }
  std::vector<float> scales(size_t(p.n) * std::max(v.experts ? p.experts : 1u, 1u));  // b_scales: powers of two and others
  for (size_t j = 0; j < scales.size(); ++j) scales[j] = std::ldexp(1.0f + float(j % 7) / 8.0f, int(j % 5) - 6);
  // a_scales: batch z's rows after the others' (another pattern); block scales: per row (of each
  // batch) and 128-wide K group, and per 128 x 128 block of each batch's B (or of the one B).
  const uint32_t groups = (p.k + 127) / 128, nBlocks = (p.n + 127) / 128,
                 bPlanes = v.experts ? std::max(p.experts, 1u) : p.shareB ? 1 : std::max(p.batch, 1u);
  std::vector<float> rowScales(std::max<size_t>(size_t(p.batch) * p.m * (v.blockScales ? groups : 1), 1));
  for (size_t i = 0; i < rowScales.size(); ++i) rowScales[i] = std::ldexp(1.0f + float(i % 5) / 4.0f, int(i % 3) - 9);
  if (v.blockScales) {
    scales.assign(std::max<size_t>(size_t(bPlanes) * nBlocks * groups, 1), 0.0f);
    for (size_t i = 0; i < scales.size(); ++i) scales[i] = std::ldexp(1.0f + float(i % 7) / 8.0f, int(i % 4) - 5);
  }
  Matrix c = outputs(rng, v.out, sized(oneC, sc));
  if (p.beta == 0.0f && !ints) {  // C must not be read: NaN would show in every element
    std::vector<float> nan = decode(storage(v.out), c.bytes);
    for (size_t i = 0; i < nan.size(); ++i)
      if (i % ldc < p.n) nan[i] = std::numeric_limits<float>::quiet_NaN();
    c.bytes = encode(storage(v.out), nan);
  }
  Matrix bias = outputs(rng, v.out, v.experts ? std::max<uint64_t>(uint64_t(p.n) * p.experts, 1) : sized(p.n, 0)),
         res = outputs(rng, v.out, sized(oneC, sc));
  Call call(v.spec, v.kernel);
  call.target(v.target);
  call.buffer("a", a.bytes).buffer("b", b.bytes).buffer("c", c.bytes);
  if (v.bias) call.buffer("bias", bias.bytes);
  if (v.residual) call.buffer("residual", res.bytes);
  if (v.bScales) call.buffer("b_scales", scales);
  if (v.aScales) call.buffer("a_scales", rowScales);
  if (v.experts) call.buffer("tile_experts", tileExperts).scalar("n_experts", p.experts);
  call.scalar("m", p.m).scalar("n", p.n).scalar("k", p.k).scalar("lda", lda).scalar("ldb", ldb).scalar("ldc", ldc);
  call.scalar("batch", p.batch).scalar("stride_a", sa).scalar("stride_b", sb).scalar("stride_c", sc);
  if (ints)
    call.scalar("alpha", static_cast<int32_t>(p.alpha)).scalar("beta", static_cast<int32_t>(p.beta));
  else
    call.scalar("alpha", p.alpha).scalar("beta", p.beta);
  // split_k: the counters zero and the partials' words holding garbage the kernel must not read.
  const uint64_t tiles = uint64_t((p.m + v.tileM - 1) / v.tileM) * ((p.n + v.tileN - 1) / v.tileN) * p.batch;
  const uint64_t counters = p.splits > 1 ? tiles * 256 : 0;
  if (v.splitK) {
    std::vector<uint32_t> workspace(p.splits > 1 ? counters + tiles * p.splits * v.tileM * v.tileN : 1, 0x7fc00001u);
    std::fill(workspace.begin(), workspace.begin() + counters, 0u);
    call.scalar("splits", p.splits).buffer("workspace", workspace);
  }
  Outputs out = r.run(call);
  if (v.splitK) {
    std::vector<uint32_t> workspace = out.get<uint32_t>("workspace");
    size_t nonzero = std::count_if(workspace.begin(), workspace.begin() + counters, [](uint32_t x) { return x != 0; });
    CHECK_MESSAGE(nonzero == 0,
                  v.kernel << " splits=" << p.splits << ": " << nonzero << " split counters left nonzero");
  }
  std::vector<std::byte> gotBytes = out.get<std::byte>("c");
  REQUIRE(gotBytes.size() == c.bytes.size());
  std::vector<float> got;
  std::vector<int32_t> gotInt(ints ? gotBytes.size() / 4 : 0);
  if (ints)
    std::memcpy(gotInt.data(), gotBytes.data(), gotBytes.size());
  else
    got = decode(storage(v.out), gotBytes);
  std::string what = std::string(v.kernel) + " m=" + std::to_string(p.m) + " n=" + std::to_string(p.n) +
                     " k=" + std::to_string(p.k) + " batch=" + std::to_string(p.batch) + " pad=" + std::to_string(p.pad) +
                     (p.gap ? " gap=" + std::to_string(p.gap) : "") + (p.shareA ? " stride_a=0" : "") +
                     (p.shareB ? " stride_b=0" : "") +
                     (p.align ? " (leading dimensions of 16)" : "") +
                     (v.splitK ? " splits=" + std::to_string(p.splits) : "") + (*v.target ? " (" + std::string(v.target) + " code)" : "") +
                     (v.experts ? " experts=" + std::to_string(p.experts) : "");
  std::vector<float> gotIn;
  std::vector<double> want;
  double worst = 0;
  size_t intMismatches = 0;
  for (uint32_t z = 0; z < p.batch; ++z)
    for (uint32_t i = 0; i < p.m; ++i)
      for (uint32_t j = 0; j < p.n; ++j) {
        // Experts: B's plane (and bias's and b_scales' row) the row's tile's expert; a tile of
        // none is left alone (checked with the padding below), an unknown expert's is NaN.
        const uint32_t expert = expertOf(i), bz = v.experts ? expert : z;
        if (expert == 0xFFFFFFFFu) continue;
        if (v.experts && expert >= p.experts) {
          gotIn.push_back(got[z * sc + uint64_t(i) * ldc + j]);
          want.push_back(std::numeric_limits<double>::quiet_NaN());
          continue;
        }
        double sum = 0, mag = 0;
        for (uint32_t kk = 0; kk < p.k; ++kk) {
          double x = a.values[z * sa + (v.aCol ? uint64_t(kk) * lda + i : uint64_t(i) * lda + kk)];
          double y = b.values[bz * sb + (v.bCol ? uint64_t(j) * ldb + kk : uint64_t(kk) * ldb + j)];
          // Block scales: the product's K group's a_scales[z][i][g] * b_scales[zb][j / 128][g].
          const double blockScale =
              v.blockScales ? double(rowScales[(size_t(z) * p.m + i) * groups + kk / 128]) *
                                  scales[(size_t(v.experts ? expert : p.shareB ? 0 : z) * nBlocks + j / 128) * groups + kk / 128]
                            : 1.0;
          sum += blockScale * x * y;
          mag += std::fabs(blockScale * x * y);
        }
        const uint64_t at = z * sc + uint64_t(i) * ldc + j;
        const bool perRowCol = !v.blockScales;
        const size_t col = size_t(v.experts ? expert : 0) * p.n + j;
        const double scale = p.alpha * (v.bScales && perRowCol ? scales[col] : 1.0) *
                             (v.aScales && perRowCol ? rowScales[size_t(z) * p.m + i] : 1.0);
        double pre = scale * sum + (p.beta != 0.0f ? p.beta * c.values[at] : 0.0) + (v.bias ? bias.values[col] : 0.0);
        double y = activate(v.act, pre) + (v.residual ? res.values[at] : 0.0);
        if (ints) {
          if (gotInt[at] != static_cast<int32_t>(y) && ++intMismatches <= 5)
            FAIL_CHECK(what << ": c[" << at << "] = " << gotInt[at] << ", want " << y);
          continue;
        }
        gotIn.push_back(got[at]);
        want.push_back(y);
        // Products exact (f32: by fma; tf32, bf16, f16: on the tensor cores), accumulated in f32:
        // |error| <= (k + 2) * 2^-24 * sum|a b| (first order), scaled by alpha; tf32 rounds each
        // input to 10 fraction bits first (2^-11 relative each), 2^-10 * sum|a b| more (inputs
        // truncated instead, as mma alone does, would be off by up to twice that, all one way). The epilogue adds a few
        // roundings of the result's size, and the activations' own error (ex2/rcp.approx: a few
        // ulp of their argument's size).
        // fp8 A and B: the interpreter adds in f32 as for the others, but the fp8 tensor cores are
        // reported to keep about 14 bits of the sum (docs/kernels.md, "Accuracy"): 2^-13 of
        // sum|a b| for each mma or wgmma k-step of 32 codes is allowed on top.
        const double perProduct = (p.k + 2) * std::ldexp(1.0, -24) + (v.in == In::Tf32 ? std::ldexp(1.0, -10) : 0.0) +
                                  (fp8Of(v.in) >= 0 ? (p.k + 31) / 32 * std::ldexp(1.0, -13) : 0.0);
        if (std::isfinite(mag)) worst = std::max(worst, std::fabs(scale) * perProduct * mag);  // else checked exactly
      }
  CHECK_MESSAGE(intMismatches == 0, what << ": " << intMismatches << " elements differ");
  // The activations are within ~1e-6 relative of the reference (docs/kernels.md); a bf16 or f16
  // C adds its rounding.
  if (!ints) expectClose(gotIn, want, worst + 1e-6, 4e-6 + roundoff(storage(v.out)), what);
  const size_t elem = ints ? 4 : dtypeBytes(storage(v.out));
  for (size_t i = 0; i < gotBytes.size() / elem; ++i)
    if (i / sc >= p.batch || i % sc >= oneC || i % sc % ldc >= p.n || expertOf(uint32_t(i % sc / ldc)) == 0xFFFFFFFFu)
      CHECK_MESSAGE(std::memcmp(&gotBytes[i * elem], &c.bytes[i * elem], elem) == 0, what << " padding at " << i);
}

const Problem kOdd[] = {{1, 1, 1}, {17, 33, 65}, {130, 258, 72}};

}  // namespace

LIBRARY_TEST("gemm f32 layouts at odd sizes", gemmLayouts) {
  std::mt19937 rng(seed());
  for (const Variant* v : {&kRR, &kRC, &kCR, &kCC})
    for (const Problem& p : kOdd) checkGemm(r, rng, *v, p);
}

LIBRARY_TEST("gemm f32 epilogues", gemmEpilogues) {
  std::mt19937 rng(seed());
  for (const Variant* v : {&kBiasGeluRes, &kBiasRelu, &kSilu, &kGeluErfRes}) {
    checkGemm(r, rng, *v, {17, 33, 65, 1, 0, 0.5f, 0.0f});
    checkGemm(r, rng, *v, {70, 129, 9, 1, 3, -1.25f, 0.75f});
  }
}

LIBRARY_TEST("gemm f32 alpha, beta, batches, padding and k = 0", gemmBatched) {
  std::mt19937 rng(seed());
  checkGemm(r, rng, kRR, {33, 70, 24, 3, 5, 2.0f, -0.5f});   // batched, padded, beta != 0
  checkGemm(r, rng, kCC, {65, 65, 17, 2, 1, 1.0f, 1.0f});
  checkGemm(r, rng, kRC, {20, 30, 0, 2, 0, 1.0f, 0.5f});     // k = 0: C = beta C
  checkGemm(r, rng, kCR, {20, 30, 0, 1, 0, 1.0f, 0.0f});     // k = 0, beta = 0: C = 0
  checkGemm(r, rng, kBiasRelu, {8, 300, 40, 1, 0, 1.0f, 0.0f});
  if (r.fast()) checkGemm(r, rng, kRR, {1000, 1000, 1000});
}

// The tensor-core members. Each layout pair appears with the cp.async path (leading dimensions
// of 16 elements; partial chunks at the edges of K, M and N) and the path through registers
// (odd leading dimensions), for every element type.
namespace {

constexpr Variant kTf32RR{"tf32_rr", false, false, false, false, Act::None, In::Tf32, Out::F32};
constexpr Variant kTf32CC{"tf32_cc", true, true, false, false, Act::None, In::Tf32, Out::F32};
constexpr Variant kBf16RR{"bf16_rr", false, false, false, false, Act::None, In::BF16, Out::BF16};
constexpr Variant kBf16RC{"bf16_rc", false, true, false, false, Act::None, In::BF16, Out::BF16};
constexpr Variant kBf16CR{"bf16_cr_f32", true, false, false, false, Act::None, In::BF16, Out::F32};
constexpr Variant kBf16CC{"bf16_cc_bias_gelu_res", true, true, true, true, Act::Gelu, In::BF16, Out::BF16};
constexpr Variant kF16RC{"f16_rc_bias_relu", false, true, true, false, Act::Relu, In::F16, Out::F16};
constexpr Variant kF16CR{"f16_cr_f32_silu", true, false, false, false, Act::Silu, In::F16, Out::F32};
constexpr Variant kS8RC{"s8_rc", false, true, false, false, Act::None, In::S8, Out::S32};
constexpr Variant kS8RR{"s8_rr_bias_relu_res", false, false, true, true, Act::Relu, In::S8, Out::S32};
constexpr Variant kU8CC{"u8_cc", true, true, false, false, Act::None, In::U8, Out::S32};
constexpr Variant kU8RC{"u8_rc", false, true, false, false, Act::None, In::U8, Out::S32};
// The remaining layouts of each type; "w4": blocks of 4 warps.
constexpr Variant kTf32RCw4{"tf32_rc_w4", false, true, false, false, Act::None, In::Tf32, Out::F32};
constexpr Variant kTf32CR{"tf32_cr", true, false, false, false, Act::None, In::Tf32, Out::F32};
constexpr Variant kBf16RCw4{"bf16_rc_w4", false, true, false, false, Act::None, In::BF16, Out::F32};
constexpr Variant kF16RRw4{"f16_rr_w4", false, false, false, false, Act::None, In::F16, Out::F16};
constexpr Variant kF16CC{"f16_cc", true, true, false, false, Act::None, In::F16, Out::F16};
constexpr Variant kS8CR{"s8_cr", true, false, false, false, Act::None, In::S8, Out::S32};
constexpr Variant kS8CCw4{"s8_cc_w4", true, true, false, false, Act::None, In::S8, Out::S32};
constexpr Variant kU8RR{"u8_rr", false, false, false, false, Act::None, In::U8, Out::S32};
constexpr Variant kU8CR{"u8_cr_bias_relu_res", true, false, true, true, Act::Relu, In::U8, Out::S32};

void checkPaths(Runner& r, std::mt19937& rng, const Variant& v, float alpha = 1.0f, float beta = 0.0f) {
  for (const Problem& p : kOdd) {
    checkGemm(r, rng, v, {p.m, p.n, p.k, 1, 0, alpha, beta});
    checkGemm(r, rng, v, {p.m, p.n, p.k, 1, 0, alpha, beta, true});
  }
}

}  // namespace

LIBRARY_TEST("gemm tf32 layouts and paths", gemmTf32) {
  std::mt19937 rng(seed());
  for (const Variant* v : {&kTf32RR, &kTf32CC, &kTf32RCw4, &kTf32CR}) checkPaths(r, rng, *v);
}

LIBRARY_TEST("gemm bf16 and f16 layouts, paths and epilogues", gemmBf16) {
  std::mt19937 rng(seed());
  for (const Variant* v : {&kBf16RR, &kBf16RC, &kBf16CR, &kBf16RCw4, &kF16RRw4, &kF16CC}) checkPaths(r, rng, *v);
  for (const Variant* v : {&kBf16CC, &kF16RC, &kF16CR}) checkPaths(r, rng, *v, -1.25f, 0.75f);
}

LIBRARY_TEST("gemm s8 and u8 layouts, paths and epilogues", gemmInt8) {
  std::mt19937 rng(seed());
  for (const Variant* v : {&kS8RC, &kU8CC, &kU8RC, &kS8CR, &kS8CCw4, &kU8RR}) checkPaths(r, rng, *v);
  checkPaths(r, rng, kS8RR, 3.0f, -2.0f);
  checkPaths(r, rng, kU8CR, -1.0f, 1.0f);
}

LIBRARY_TEST("gemm tensor cores: batches, padding and k = 0", gemmTcBatched) {
  std::mt19937 rng(seed());
  checkGemm(r, rng, kBf16RR, {33, 70, 40, 3, 5, 2.0f, -0.5f, true});  // batched, cp.async path
  checkGemm(r, rng, kF16CR, {33, 70, 40, 2, 3, 1.0f, 1.0f});          // batched, through registers
  checkGemm(r, rng, kTf32CC, {65, 65, 17, 2, 1, 1.0f, 1.0f, true});
  checkGemm(r, rng, kS8RC, {20, 30, 100, 2, 0, 1.0f, 1.0f, true});
  checkGemm(r, rng, kBf16RC, {20, 30, 0, 2, 0, 1.0f, 0.5f});  // k = 0: C = beta C
  checkGemm(r, rng, kU8CC, {20, 30, 0, 1, 0, 1.0f, 0.0f});    // k = 0, beta = 0: C = 0
  if (r.fast()) checkGemm(r, rng, kBf16RC, {1000, 1000, 1000, 1, 0, 1.0f, 0.0f, true});
}

// The wgmma members (sm_90a; test/library/gemm90.toml): TMA needs 16-byte rows, so leading
// dimensions are multiples of 16 elements here. Sizes that are not multiples of the 128 x 64 and
// 64 x tile_n boxes, several tiles per block (blocks < tiles), k = 0 and k below one box.
namespace {

constexpr Variant kWgBf16RR{"wg_bf16_rr", false, false, false, false, Act::None, In::BF16, Out::BF16, "gemm90"};
constexpr Variant kWgBf16RC{"wg_bf16_rc_n256", false, true, false, false, Act::None, In::BF16, Out::BF16, "gemm90"};
constexpr Variant kWgBf16CR{"wg_bf16_cr_f32", true, false, false, false, Act::None, In::BF16, Out::F32, "gemm90"};
constexpr Variant kWgBf16CC{"wg_bf16_cc_bias_gelu_res", true, true, true, true, Act::Gelu, In::BF16, Out::BF16, "gemm90"};
constexpr Variant kWgF16RC{"wg_f16_rc_bias_relu", false, true, true, false, Act::Relu, In::F16, Out::F16, "gemm90"};
constexpr Variant kWgF16RR{"wg_f16_rr_n256_f32", false, false, false, false, Act::None, In::F16, Out::F32, "gemm90"};

}  // namespace

LIBRARY_TEST("gemm wgmma (sm_90a): layouts, odd sizes, persistent tiles and epilogues", gemmWgmma) {
  std::mt19937 rng(seed());
  for (const Variant* v : {&kWgBf16RR, &kWgBf16RC, &kWgBf16CR, &kWgF16RR}) {
    checkGemm(r, rng, *v, {1, 1, 1, 1, 0, 1.0f, 0.0f, true});
    checkGemm(r, rng, *v, {17, 33, 65, 1, 0, 1.0f, 0.0f, true});
    checkGemm(r, rng, *v, {130, 258, 72, 1, 3, 1.0f, 0.0f, true});
  }
  checkGemm(r, rng, kWgBf16CC, {130, 70, 40, 1, 0, -1.25f, 0.75f, true});
  checkGemm(r, rng, kWgF16RC, {70, 129, 136, 1, 5, 2.0f, -0.5f, true});
  checkGemm(r, rng, kWgBf16RR, {20, 30, 0, 1, 0, 1.0f, 0.5f, true});  // k = 0: C = beta C
  checkGemm(r, rng, kWgBf16RC, {300, 40, 16, 1, 0, 1.0f, 0.0f, true});
  if (r.fast()) checkGemm(r, rng, kWgBf16RC, {1000, 1000, 1000, 1, 0, 1.0f, 0.0f, true});
}

// Strided batches on the wgmma members: every batch's tiles in one persistent grid, A and B read
// through 3-D tensor maps (the batch their third coordinate), C, bias and residual offset by the
// epilogue. Packed batches, gaps of 8 elements between them, one A or one B for every batch
// (stride 0), and a single batch whose strides TMA could not take (odd: ignored, as one matrix
// has no next one).
LIBRARY_TEST("gemm wgmma (sm_90a): strided batches", gemmWgmmaBatched) {
  std::mt19937 rng(seed());
  checkGemm(r, rng, kWgBf16RR, {70, 129, 72, 3, 0, 1.0f, 0.0f, true});
  checkGemm(r, rng, kWgBf16CC, {33, 70, 40, 4, 0, -1.25f, 0.75f, true, 0, 8});
  checkGemm(r, rng, kWgF16RC, {17, 33, 100, 3, 0, 2.0f, -0.5f, true, 0, 0, true});
  checkGemm(r, rng, kWgBf16CR, {17, 33, 100, 3, 0, 1.0f, 0.0f, true, 0, 8, false, true});
  checkGemm(r, rng, kWgF16RR, {130, 20, 8, 2, 0, 1.0f, 0.0f, true});  // a 256-wide tile, two M tiles a batch
  checkGemm(r, rng, kWgBf16RC, {20, 30, 16, 1, 0, 1.0f, 0.0f, true, 0, 3});
  checkGemm(r, rng, kWgBf16RR, {20, 30, 0, 3, 0, 1.0f, 0.5f, true, 0, 8});  // k = 0: C = beta C in every batch
}

// split_k (test/library/gemm.toml, gemm90.toml): K shared by `splits` blocks per tile through the
// workspace. Splits 0 and 1 (no split), 2 and 3 at odd sizes with a short last K step, more
// splits than K steps (empty splits add zeros), k = 0 (every split empty: C = beta C), batches
// (z = batch * splits + split), beta over C and epilogues applied once after the sum; every
// launch leaves the workspace's counters zero.
namespace {

constexpr Variant kSplitF32{"split_f32_bias_res", false, false, true, true, Act::None, In::F32, Out::F32, "gemm", true, 128, 64};
constexpr Variant kSplitBf16{"split_bf16_rc", false, true, false, false, Act::None, In::BF16, Out::BF16, "gemm", true};
constexpr Variant kSplitF16{"split_f16_cr_w4_silu", true, false, false, false, Act::Silu, In::F16, Out::F32, "gemm", true, 64, 64};
constexpr Variant kSplitS8{"split_s8_rc_relu", false, true, false, false, Act::Relu, In::S8, Out::S32, "gemm", true};
constexpr Variant kWgSplitBf16{"wg_split_bf16_rr", false, false, false, false, Act::None, In::BF16, Out::BF16, "gemm90", true};
constexpr Variant kWgSplitF16{"wg_split_f16_rc_n256_bias", false, true, true, false, Act::None, In::F16, Out::F16, "gemm90", true, 128, 256};

void checkSplits(Runner& r, std::mt19937& rng, const Variant& v) {
  const bool align = v.in != In::F32;  // the tensor-core members' cp.async path; wgmma needs it
  for (uint32_t splits : {0u, 1u, 2u, 3u}) checkGemm(r, rng, v, {70, 129, 300, 1, 0, 1.0f, 0.0f, align, splits});
  // Integral alpha and beta: the s8 member's are s32.
  checkGemm(r, rng, v, {17, 33, 40, 1, 1, -1.0f, 2.0f, align, 7});  // more splits than K steps
  checkGemm(r, rng, v, {20, 30, 0, 1, 0, 1.0f, -1.0f, align, 3});   // k = 0: C = beta C
  checkGemm(r, rng, v, {33, 70, 100, 3, 2, 2.0f, -1.0f, align, 2});
}

}  // namespace

LIBRARY_TEST("gemm split_k: SIMT and mma.sync members", gemmSplitK) {
  std::mt19937 rng(seed());
  for (const Variant* v : {&kSplitF32, &kSplitBf16, &kSplitF16, &kSplitS8}) checkSplits(r, rng, *v);
}

LIBRARY_TEST("gemm split_k: wgmma members (sm_90a)", gemmSplitKWgmma) {
  std::mt19937 rng(seed());
  for (const Variant* v : {&kWgSplitBf16, &kWgSplitF16}) checkSplits(r, rng, *v);
}

// mainloop = "auto" (test/library/mainloop_auto.toml, targets sm_80 and sm_90a): one kernel, the
// wgmma member in the sm_90a code and an mma.sync member with its parameters (batched alike) in the
// sm_80 code, each launched by its own rule. The interpreter runs both targets' code on the same
// problems; a GPU runs the code the runtime selects for it (the wgmma member on an H100).
namespace {

constexpr Variant kAutoBf16CR{"auto_bf16_cr_bias", true, false, true, false, Act::None, In::BF16, Out::BF16, "mainloop_auto"};
constexpr Variant kAutoF16RC{"auto_f16_rc_split", false, true, false, false, Act::None, In::F16, Out::F32, "mainloop_auto", true};

}  // namespace

LIBRARY_TEST("gemm mainloop auto: the sm_80 and sm_90a code of one kernel", gemmAuto) {
  std::mt19937 rng(seed());
  for (const std::string& target : codeTargets(r, {"sm_80", "sm_90a"})) {
    Variant bf16 = kAutoBf16CR, f16 = kAutoF16RC;
    bf16.target = f16.target = target.c_str();
    checkGemm(r, rng, bf16, {17, 33, 65, 1, 0, 1.0f, 0.0f, true});
    checkGemm(r, rng, bf16, {130, 258, 72, 1, 3, -1.25f, 0.75f, true});  // several tiles per block (wgmma)
    checkGemm(r, rng, bf16, {20, 30, 0, 1, 0, 1.0f, 0.5f, true});         // k = 0: C = beta C
    checkGemm(r, rng, f16, {70, 129, 300, 1, 0, 1.0f, 0.0f, true, 3});
    checkGemm(r, rng, f16, {33, 20, 40, 1, 1, 2.0f, -1.0f, true, 0});
    checkGemm(r, rng, bf16, {33, 70, 40, 3, 0, 1.0f, 0.5f, true, 0, 8});  // batches on both targets' code
    checkGemm(r, rng, f16, {20, 129, 100, 2, 0, 1.0f, 0.0f, true, 2, 0, false, true});
  }
}

// fp8 B (b_dtype; test/library/gemm.toml): codes of every finite value converted to A's type as
// they are staged. Each layout on the 8-byte path (leading dimensions of 16, and K along a row
// or N along a k row a multiple of 8: chunks of 8 codes wholly inside or outside) and element by
// element (odd sizes and leading dimensions); per-column scales, alpha and beta, an epilogue,
// batches and split_k. The sm_90 code decodes by cvt.f16x2, the sm_80 code by integer
// instructions: both run.
namespace {

constexpr int kE4M3 = int(tn::ir::Fp8Format::E4M3), kE5M2 = kE5M2Format;
constexpr Variant kFp8RC{"fp8_rc_e4m3_scales", false, true, false, false, Act::None, In::BF16, Out::BF16, "gemm", false, 128, 128, "", kE4M3, true};
constexpr Variant kFp8RR{"fp8_rr_e5m2_f32", false, false, false, false, Act::None, In::F16, Out::F32, "gemm", false, 128, 128, "", kE5M2};
constexpr Variant kFp8CR{"fp8_cr_e4m3_f16_bias_relu", true, false, true, false, Act::Relu, In::F16, Out::F16, "gemm", false, 64, 128, "", kE4M3};
constexpr Variant kFp8CC{"fp8_cc_e5m2_w4_scales", true, true, false, false, Act::None, In::BF16, Out::F32, "gemm", false, 64, 64, "", kE5M2, true};
constexpr Variant kFp8Split{"fp8_split_f16_rc_scales", false, true, false, false, Act::None, In::F16, Out::F16, "gemm", true, 128, 128, "", kE4M3, true};

}  // namespace

LIBRARY_TEST("gemm fp8 B: layouts, paths, scales and both decodings", gemmFp8) {
  std::mt19937 rng(seed());
  for (const std::string& target : codeTargets(r, {"sm_80", "sm_90"}))
    for (Variant v : {kFp8RC, kFp8RR, kFp8CR, kFp8CC}) {
      v.target = target.c_str();
      for (const Problem& p : kOdd) checkGemm(r, rng, v, {p.m, p.n, p.k, 1, 0, 1.0f, 0.0f});
      // The 8-byte path: K and N multiples of 8 (a partial tile in each), aligned leading dimensions.
      checkGemm(r, rng, v, {33, 136, 72, 1, 0, 1.0f, 0.0f, true});
      checkGemm(r, rng, v, {70, 72, 136, 1, 3, -1.25f, 0.75f, true});
      checkGemm(r, rng, v, {17, 24, 40, 3, 0, 2.0f, -0.5f, true, 0, 8});  // batches, gaps of 8 codes
      checkGemm(r, rng, v, {17, 24, 40, 3, 0, 1.0f, 0.0f, true, 0, 0, false, true});  // one B for every batch
      checkGemm(r, rng, v, {20, 16, 0, 1, 0, 1.0f, 0.5f, true});          // k = 0: C = beta C
      // Infinities and NaN reach their columns as they would in the reference, on both paths.
      checkGemm(r, rng, v, {70, 72, 136, 1, 0, 1.0f, 0.0f, true, 0, 0, false, false, true});
      checkGemm(r, rng, v, {17, 33, 65, 1, 1, 1.0f, 0.0f, false, 0, 0, false, false, true});
    }
}

LIBRARY_TEST("gemm fp8 B: split_k", gemmFp8SplitK) {
  std::mt19937 rng(seed());
  for (const std::string& target : codeTargets(r, {"sm_80", "sm_90"})) {
    Variant v = kFp8Split;
    v.target = target.c_str();
    checkSplits(r, rng, v);
  }
}

// fp8 B on the wgmma member (test/library/gemm90.toml): the codes by TMA, converted into the B tile
// by the producer's other warps. Leading dimensions of 16 elements (TMA's 16-byte rows of codes);
// odd sizes, several tiles per block, batches, infinities and NaN; and mainloop = "auto", whose
// sm_90a code is this member and whose sm_80 code the mma.sync member decoding by integers.
namespace {

constexpr Variant kWgFp8RC{"wg_fp8_rc_e4m3_n256_scales", false, true, false, false, Act::None, In::BF16, Out::BF16, "gemm90", false, 128, 256, "", kE4M3, true};
constexpr Variant kWgFp8RR{"wg_fp8_rr_e5m2_f16_f32", false, false, false, false, Act::None, In::F16, Out::F32, "gemm90", false, 128, 128, "", kE5M2};
constexpr Variant kWgFp8Integer{"wg_fp8_rc_e5m2_integer_bias", false, true, true, false, Act::None, In::BF16, Out::BF16, "gemm90", false, 128, 128, "", kE5M2};
constexpr Variant kWgFp8Split{"wg_fp8_split_rc_e4m3_scales", false, true, false, false, Act::None, In::F16, Out::F16, "gemm90", true, 128, 128, "", kE4M3, true};
constexpr Variant kAutoFp8{"auto_fp8_bf16_rc_scales", false, true, false, false, Act::None, In::BF16, Out::BF16, "mainloop_auto", false, 128, 128, "", kE4M3, true};

}  // namespace

LIBRARY_TEST("gemm fp8 B on wgmma (sm_90a): layouts, odd sizes, batches, specials", gemmFp8Wgmma) {
  std::mt19937 rng(seed());
  for (const Variant* v : {&kWgFp8RC, &kWgFp8RR, &kWgFp8Integer}) {
    checkGemm(r, rng, *v, {1, 1, 1, 1, 0, 1.0f, 0.0f, true});
    checkGemm(r, rng, *v, {17, 33, 65, 1, 0, 1.0f, 0.0f, true});
    checkGemm(r, rng, *v, {130, 258, 72, 1, 3, -1.25f, 0.75f, true});
    checkGemm(r, rng, *v, {33, 70, 40, 3, 0, 2.0f, 0.0f, true, 0, 16});  // batches, gaps of 16
    checkGemm(r, rng, *v, {33, 70, 40, 3, 0, 1.0f, 0.0f, true, 0, 0, false, true});  // one B for every batch
    checkGemm(r, rng, *v, {20, 30, 0, 1, 0, 1.0f, 0.5f, true});          // k = 0: C = beta C
    checkGemm(r, rng, *v, {70, 72, 136, 1, 0, 1.0f, 0.0f, true, 0, 0, false, false, true});
  }
  checkSplits(r, rng, kWgFp8Split);
}

LIBRARY_TEST("gemm fp8 B, mainloop auto: the sm_80 and sm_90a code of one kernel", gemmFp8Auto) {
  std::mt19937 rng(seed());
  for (const std::string& target : codeTargets(r, {"sm_80", "sm_90a"})) {
    Variant v = kAutoFp8;
    v.target = target.c_str();
    checkGemm(r, rng, v, {17, 33, 65, 1, 0, 1.0f, 0.0f, true});
    checkGemm(r, rng, v, {130, 258, 72, 1, 3, -1.25f, 0.75f, true});
    checkGemm(r, rng, v, {33, 70, 40, 3, 0, 1.0f, 0.5f, true, 0, 16});
  }
}

// fp8 A and B (dtype fp8_e4m3 / fp8_e5m2, W8A8; test/library/gemm_fp8.toml, sm_89 and sm_90a, and
// gemm90.toml): codes of every finite value multiplied by the fp8 tensor cores. Every layout on
// both staging paths (cp.async for K-major operands with leading dimensions of 16, element by
// element otherwise), per-token and per-channel scales, epilogues, batches, k = 0, infinities and
// NaN among B's codes, split_k; the wgmma member (K-major operands); and mainloop = "auto", whose
// sm_89 code is the mma.sync member and whose sm_90a code the wgmma member.
namespace {

constexpr Variant kW8RC{"w8_rc_e4m3_f16_scales", false, true, false, false, Act::None, In::E4M3, Out::F16, "gemm_fp8", false, 128, 128, "", -1, true, true};
constexpr Variant kW8RR{"w8_rr_e5m2_f32", false, false, false, false, Act::None, In::E5M2, Out::F32, "gemm_fp8"};
constexpr Variant kW8CR{"w8_cr_e4m3_bias_relu", true, false, true, false, Act::Relu, In::E4M3, Out::BF16, "gemm_fp8", false, 64, 128};
constexpr Variant kW8CC{"w8_cc_e5m2_w4_res", true, true, false, true, Act::None, In::E5M2, Out::BF16, "gemm_fp8", false, 64, 64};
constexpr Variant kW8Split{"w8_split_e4m3_rc_scales", false, true, false, false, Act::None, In::E4M3, Out::BF16, "gemm_fp8", true, 128, 128, "", -1, true, true};
constexpr Variant kW8Auto{"w8_auto_e4m3_rc_scales", false, true, false, false, Act::None, In::E4M3, Out::BF16, "gemm_fp8", false, 128, 128, "", -1, true, true};
constexpr Variant kWgW8N256{"wg_w8_e4m3_n256_scales", false, true, false, false, Act::None, In::E4M3, Out::BF16, "gemm90", false, 128, 256, "", -1, true, true};
constexpr Variant kWgW8Gelu{"wg_w8_e5m2_f32_bias_gelu", false, true, true, false, Act::Gelu, In::E5M2, Out::F32, "gemm90"};
constexpr Variant kWgW8Split{"wg_w8_split_e4m3_scales", false, true, false, false, Act::None, In::E4M3, Out::BF16, "gemm90", true, 128, 128, "", -1, true, true};

}  // namespace

LIBRARY_TEST("gemm fp8 A and B (W8A8): layouts, paths, scales, epilogues", gemmW8A8) {
  std::mt19937 rng(seed());
  for (const Variant* v : {&kW8RC, &kW8RR, &kW8CR, &kW8CC}) {
    for (const Problem& p : kOdd) checkGemm(r, rng, *v, {p.m, p.n, p.k, 1, 0, 1.0f, 0.0f});
    checkGemm(r, rng, *v, {33, 136, 72, 1, 0, 1.0f, 0.0f, true});               // the cp.async path
    checkGemm(r, rng, *v, {70, 72, 136, 1, 3, -1.25f, 0.75f, true});
    checkGemm(r, rng, *v, {17, 24, 40, 3, 0, 2.0f, -0.5f, true, 0, 16});       // batches, gaps of 16 codes
    checkGemm(r, rng, *v, {20, 16, 0, 1, 0, 1.0f, 0.5f, true});                // k = 0: C = beta C
    checkGemm(r, rng, *v, {70, 72, 136, 1, 0, 1.0f, 0.0f, true, 0, 0, false, false, true});  // inf and NaN
  }
  checkSplits(r, rng, kW8Split);
}

LIBRARY_TEST("gemm fp8 A and B (W8A8) on wgmma (sm_90a): odd sizes, batches, scales, split_k", gemmW8A8Wgmma) {
  std::mt19937 rng(seed());
  for (const Variant* v : {&kWgW8N256, &kWgW8Gelu}) {
    checkGemm(r, rng, *v, {1, 1, 1, 1, 0, 1.0f, 0.0f, true});
    checkGemm(r, rng, *v, {17, 33, 65, 1, 0, 1.0f, 0.0f, true});
    checkGemm(r, rng, *v, {130, 258, 200, 1, 3, -1.25f, 0.75f, true});  // two k blocks of 128, the second partial
    checkGemm(r, rng, *v, {33, 70, 40, 3, 0, 2.0f, 0.0f, true, 0, 16});  // batches, gaps of 16
    checkGemm(r, rng, *v, {33, 70, 40, 3, 0, 1.0f, 0.0f, true, 0, 0, false, true});  // one B for every batch
    checkGemm(r, rng, *v, {20, 30, 0, 1, 0, 1.0f, 0.5f, true});  // k = 0: C = beta C
    checkGemm(r, rng, *v, {70, 72, 136, 1, 0, 1.0f, 0.0f, true, 0, 0, false, false, true});
  }
  checkSplits(r, rng, kWgW8Split);
}

// Mixed formats (b_dtype the other format: PTX's .e4m3.e5m2 and .e5m2.e4m3 mma and wgmma): A's
// codes of one format, B's of the other, on mma.sync (both staging paths, per-token and
// per-channel scales, an epilogue, block scales) and wgmma (scales; block scales).
namespace {

constexpr Variant kW8MixedRC{"w8_rc_e4m3_e5m2_scales", false, true, false, false, Act::None, In::E4M3, Out::BF16, "gemm_fp8", false, 128, 128, "", kE5M2, true, true};
constexpr Variant kW8MixedCR{"w8_cr_e5m2_e4m3_bias_f32", true, false, true, false, Act::None, In::E5M2, Out::F32, "gemm_fp8", false, 64, 128, "", kE4M3};
constexpr Variant kW8MixedBlocks{"w8_blocks_rc_e4m3_e5m2", false, true, false, false, Act::None, In::E4M3, Out::BF16, "gemm_fp8", false, 64, 128, "", kE5M2, true, true, true};
constexpr Variant kWgW8Mixed{"wg_w8_e5m2_e4m3_scales", false, true, false, false, Act::None, In::E5M2, Out::BF16, "gemm90", false, 128, 128, "", kE4M3, true, true};
constexpr Variant kWgW8MixedBlocks{"wg_w8_e4m3_e5m2_blocks", false, true, false, false, Act::None, In::E4M3, Out::BF16, "gemm90", false, 128, 128, "", kE5M2, true, true, true};

}  // namespace

LIBRARY_TEST("gemm fp8 A and B of mixed formats (E4M3 x E5M2, E5M2 x E4M3): mma.sync and wgmma", gemmW8A8Mixed) {
  std::mt19937 rng(seed());
  for (const Variant* v : {&kW8MixedRC, &kW8MixedCR}) {
    for (const Problem& p : kOdd) checkGemm(r, rng, *v, {p.m, p.n, p.k, 1, 0, 1.0f, 0.0f});
    checkGemm(r, rng, *v, {70, 72, 136, 1, 3, -1.25f, 0.75f, true});  // the cp.async path
    checkGemm(r, rng, *v, {17, 24, 40, 3, 0, 2.0f, -0.5f, true, 0, 16});  // batches
    checkGemm(r, rng, *v, {70, 72, 136, 1, 0, 1.0f, 0.0f, true, 0, 0, false, false, true});  // inf and NaN in B
  }
  checkGemm(r, rng, kW8MixedBlocks, {70, 258, 320, 1, 0, -1.25f, 0.75f, true});
  for (const Variant* v : {&kWgW8Mixed, &kWgW8MixedBlocks}) {
    checkGemm(r, rng, *v, {17, 33, 65, 1, 0, 1.0f, 0.0f, true});
    checkGemm(r, rng, *v, {130, 258, 300, 1, 3, -1.25f, 0.75f, true});
    checkGemm(r, rng, *v, {33, 70, 40, 3, 0, 2.0f, 0.0f, true, 0, 16});
  }
}

LIBRARY_TEST("gemm fp8 A and B (W8A8), mainloop auto: the sm_89 and sm_90a code of one kernel", gemmW8A8Auto) {
  std::mt19937 rng(seed());
  for (const std::string& target : codeTargets(r, {"sm_89", "sm_90a"})) {
    Variant v = kW8Auto;
    v.target = target.c_str();
    checkGemm(r, rng, v, {17, 33, 65, 1, 0, 1.0f, 0.0f, true});
    checkGemm(r, rng, v, {130, 258, 200, 1, 3, -1.25f, 0.75f, true});
    checkGemm(r, rng, v, {33, 70, 40, 3, 0, 1.0f, 0.5f, true, 0, 16});
  }
}

// Block scales (scale_block = 128, test/library/gemm90.toml, sm_90a): a_scales per row and 128-wide
// K group, b_scales per 128 x 128 block of B, as DeepSeek-V3's fp8 checkpoints scale them; each
// group's sums scaled as it completes. K of one partial group, of several with a partial last
// one, n across three 128-column blocks, batches (each with its own scales, or one B and its
// scales for all), several tiles a block, split_k (a split's groups are its own).
namespace {

constexpr Variant kWgW8Blocks{"wg_w8_e4m3_blocks", false, true, false, false, Act::None, In::E4M3, Out::BF16, "gemm90", false, 128, 128, "", -1, true, true, true};
constexpr Variant kWgW8BlocksSplit{"wg_w8_e5m2_blocks_split_f32", false, true, false, false, Act::None, In::E5M2, Out::F32, "gemm90", true, 128, 128, "", -1, true, true, true};

}  // namespace

// ... on mma.sync (test/library/gemm_fp8.toml: sm_89 and sm_90a code), where a group is two stages
// of 64 codes: groups split between two splits, a stage count of either parity, every layout's
// staging; and mainloop auto's two members.
namespace {

constexpr Variant kW8BlocksRC{"w8_blocks_rc_e4m3", false, true, false, false, Act::None, In::E4M3, Out::BF16, "gemm_fp8", false, 64, 128, "", -1, true, true, true};
constexpr Variant kW8BlocksCR{"w8_blocks_cr_e5m2_w4_bias", true, false, true, false, Act::None, In::E5M2, Out::F32, "gemm_fp8", false, 64, 64, "", -1, true, true, true};
constexpr Variant kW8BlocksSplit{"w8_blocks_split_e4m3", false, true, false, false, Act::None, In::E4M3, Out::BF16, "gemm_fp8", true, 64, 128, "", -1, true, true, true};
constexpr Variant kW8BlocksAuto{"w8_blocks_auto_e4m3", false, true, false, false, Act::None, In::E4M3, Out::BF16, "gemm_fp8", false, 128, 128, "", -1, true, true, true};

}  // namespace

LIBRARY_TEST("gemm fp8 A and B with block scales on mma.sync and mainloop auto", gemmW8A8BlocksMma) {
  std::mt19937 rng(seed());
  for (const Variant* v : {&kW8BlocksRC, &kW8BlocksCR}) {
    for (const Problem& p : kOdd) checkGemm(r, rng, *v, {p.m, p.n, p.k, 1, 0, 1.0f, 0.0f});
    checkGemm(r, rng, *v, {70, 258, 320, 1, 0, -1.25f, 0.75f, true});  // 5 stages: the last group half full
    checkGemm(r, rng, *v, {33, 140, 256, 3, 0, 1.0f, 0.0f, true, 0, 16});  // batches with scales of their own
    checkGemm(r, rng, *v, {33, 140, 200, 2, 0, 1.0f, 0.0f, true, 0, 0, false, true});  // one B for every batch
    checkGemm(r, rng, *v, {20, 30, 0, 1, 0, 1.0f, 0.5f, true});  // k = 0: C = beta C
  }
  checkSplits(r, rng, kW8BlocksSplit);
  for (const std::string& target : codeTargets(r, {"sm_89", "sm_90a"})) {
    Variant v = kW8BlocksAuto;
    v.target = target.c_str();
    checkGemm(r, rng, v, {130, 258, 304, 1, 3, 1.0f, 0.0f, true});
    checkGemm(r, rng, v, {33, 70, 200, 2, 0, 2.0f, 0.5f, true, 0, 16});
  }
}

LIBRARY_TEST("gemm fp8 A and B with block scales (scale_block 128, wgmma sm_90a)", gemmW8A8Blocks) {
  std::mt19937 rng(seed());
  checkGemm(r, rng, kWgW8Blocks, {1, 1, 1, 1, 0, 1.0f, 0.0f, true});
  checkGemm(r, rng, kWgW8Blocks, {17, 33, 65, 1, 0, 1.0f, 0.0f, true});
  checkGemm(r, rng, kWgW8Blocks, {130, 258, 300, 1, 3, -1.25f, 0.75f, true});  // 3 groups, 3 column blocks
  checkGemm(r, rng, kWgW8Blocks, {33, 70, 200, 3, 0, 2.0f, 0.0f, true, 0, 16});  // batches, gaps of 16
  checkGemm(r, rng, kWgW8Blocks, {33, 140, 256, 3, 0, 1.0f, 0.0f, true, 0, 0, false, true});  // one B for every batch
  checkGemm(r, rng, kWgW8Blocks, {20, 30, 0, 1, 0, 1.0f, 0.5f, true});  // k = 0: C = beta C
  checkSplits(r, rng, kWgW8BlocksSplit);
}

// quantize_fp8 feeds the W8A8 gemm (test/library/gemv.toml's quantize_fp8 kernels): activations X
// (m x k) and weights W (n x k, x W^T) quantized on the device, a scale per row of each (per token,
// per output channel), multiplied by the mma.sync or wgmma member (mainloop auto); then X by
// groups of 128 columns (scales = "group") against W quantized by 128 x 128 blocks on the host, on
// the block-scaled wgmma member. C is within the codes' rounding (E4M3: 2^-4 of each value, so
// about 2^-3 of each product) of X W^T.
LIBRARY_TEST("quantize_fp8 feeds the W8A8 gemm: per token and channel, and by groups and blocks", quantizeW8A8) {
  std::mt19937 rng(seed());
  const uint32_t m = 40, n = 136, k = 304, groups = (k + 127) / 128, nBlocks = (n + 127) / 128;  // rows of 16-byte multiples (TMA)
  std::vector<float> x = uniform(rng, size_t(m) * k), w = uniform(rng, size_t(n) * k);
  for (uint32_t i = 0; i < m; ++i)
    for (uint32_t kk = 0; kk < k; ++kk) x[size_t(i) * k + kk] *= std::ldexp(1.0f, int(kk / 128) * 3 - int(i % 4));
  auto quantize = [&](const char* kernel, const std::vector<float>& v, uint32_t rows, size_t scales) {
    return r.run(Call("gemv", kernel)
                     .buffer("x", encode(Dtype::F32, v))
                     .buffer("codes", std::vector<uint8_t>(v.size()))
                     .buffer("scales", std::vector<float>(scales))
                     .scalar("rows", rows)
                     .scalar("cols", k));
  };
  // Rounds of X W^T: sum |x w| times the codes' rounding (2^-4 + 2^-4 + their product) and the
  // fp8 tensor cores' and bf16 C's allowances.
  auto check = [&](const std::vector<std::byte>& got, const std::string& what) {
    std::vector<float> c = decode(Dtype::BF16, got), gotIn;
    std::vector<double> want;
    double worst = 0;
    for (uint32_t i = 0; i < m; ++i)
      for (uint32_t j = 0; j < n; ++j) {
        double sum = 0, mag = 0;
        for (uint32_t kk = 0; kk < k; ++kk) {
          sum += double(x[size_t(i) * k + kk]) * w[size_t(j) * k + kk];
          mag += std::fabs(double(x[size_t(i) * k + kk]) * w[size_t(j) * k + kk]);
        }
        want.push_back(sum);
        gotIn.push_back(c[size_t(i) * n + j]);
        worst = std::max(worst, mag * (std::ldexp(1.0, -3) + std::ldexp(1.0, -8) + (k + 31) / 32 * std::ldexp(1.0, -13)));
      }
    expectClose(gotIn, want, worst, roundoff(Dtype::BF16), what);
  };
  auto gemm = [&](const char* spec, const char* kernel, const std::vector<std::byte>& a, const std::vector<std::byte>& b,
                  const std::vector<float>& aScales, const std::vector<float>& bScales, const char* target) {
    Call call(spec, kernel);
    call.target(target);
    call.buffer("a", a).buffer("b", b).buffer("c", encode(Dtype::BF16, std::vector<float>(size_t(m) * n)));
    call.buffer("b_scales", bScales).buffer("a_scales", aScales);
    call.scalar("m", m).scalar("n", n).scalar("k", k).scalar("lda", k).scalar("ldb", k).scalar("ldc", n);
    call.scalar("batch", 1u).scalar("stride_a", uint64_t{0}).scalar("stride_b", uint64_t{0}).scalar("stride_c", uint64_t{0});
    call.scalar("alpha", 1.0f).scalar("beta", 0.0f);
    return r.run(call).get<std::byte>("c");
  };
  Outputs qx = quantize("quantize_e4m3_rows_f32", x, m, m), qw = quantize("quantize_e4m3_rows_f32", w, n, n);
  for (const std::string& target : codeTargets(r, {"sm_89", "sm_90a"}))
    check(gemm("gemm_fp8", "w8_auto_e4m3_rc_scales", qx.get<std::byte>("codes"), qw.get<std::byte>("codes"),
               qx.get<float>("scales"), qw.get<float>("scales"), target.c_str()),
          "per token and channel (" + target + " code)");
  // W by 128 x 128 blocks on the host: each block's largest |w| / 448, its codes the nearest.
  std::vector<float> bScales(size_t(nBlocks) * groups);
  std::vector<std::byte> wCodes(size_t(n) * k);
  for (uint32_t jb = 0; jb < nBlocks; ++jb)
    for (uint32_t g = 0; g < groups; ++g) {
      float amax = 0;
      for (uint32_t j = jb * 128; j < std::min(n, jb * 128 + 128); ++j)
        for (uint32_t kk = g * 128; kk < std::min(k, g * 128 + 128); ++kk) amax = std::fmax(amax, std::fabs(w[size_t(j) * k + kk]));
      const float scale = amax / 448.0f;
      bScales[size_t(jb) * groups + g] = scale;
      for (uint32_t j = jb * 128; j < std::min(n, jb * 128 + 128); ++j)
        for (uint32_t kk = g * 128; kk < std::min(k, g * 128 + 128); ++kk)
          wCodes[size_t(j) * k + kk] = std::byte{tn::ir::fp8Code(tn::ir::Fp8Format::E4M3, w[size_t(j) * k + kk] / scale)};
    }
  Outputs gx = quantize("quantize_e4m3_groups_f32", x, m, size_t(m) * groups);
  check(gemm("gemm90", "wg_w8_e4m3_blocks", gx.get<std::byte>("codes"), wCodes, gx.get<float>("scales"), bScales, ""),
        "by groups and blocks");
}

// Experts (MoE prefill; test/library/gemm.toml): each M tile multiplies its expert's B (bias and
// b_scales rows), a tile of none leaves C alone, an unknown expert's tile is NaN; odd sizes (a
// partial last tile), both staging paths, alpha and beta; the mainloop auto kernel's code on sm_80
// and sm_90a (the mma.sync member in both).
namespace {

constexpr Variant kExpertsBf16RC{"experts_bf16_rc", false, true, false, false, Act::None, In::BF16, Out::BF16, "gemm",
                                 false, 64, 64, "", -1, false, false, false, true};
constexpr Variant kExpertsF16Bias{"experts_f16_rr_bias_silu_w4", false, false, true, false, Act::Silu, In::F16, Out::F16,
                                  "gemm", false, 64, 64, "", -1, false, false, false, true};
constexpr Variant kExpertsFp8{"experts_bf16_fp8_rc_scales", false, true, false, false, Act::None, In::BF16, Out::BF16, "gemm",
                              false, 64, 128, "", kE4M3, true, false, false, true};
constexpr Variant kWgExpertsBias{"wgmma_experts_bf16_rc_bias", false, true, true, false, Act::None, In::BF16, Out::BF16,
                                  "gemm90", false, 128, 128, "", -1, false, false, false, true};
constexpr Variant kWgExpertsFp8{"wgmma_experts_f16_fp8_rr_scales", false, false, false, false, Act::None, In::F16, Out::F16,
                                "gemm90", false, 128, 128, "", kE4M3, true, false, false, true};
constexpr Variant kWgExpertsBlocks{"wgmma_experts_w8_blocks", false, true, false, false, Act::None, In::E4M3, Out::BF16,
                                    "gemm90", false, 128, 128, "", -1, true, true, true, true};
constexpr Variant kExpertsBlocks{"experts_w8_blocks_rc_e4m3", false, true, false, false, Act::None, In::E4M3, Out::BF16,
                                 "gemm_fp8", false, 64, 128, "", -1, true, true, true, true};
constexpr Variant kExpertsBlocksAuto{"experts_w8_blocks_auto_e4m3", false, true, false, false, Act::None, In::E4M3,
                                     Out::BF16, "gemm_fp8", false, 128, 128, "", -1, true, true, true, true};
constexpr Variant kExpertsAuto{"auto_experts_bf16_rc", false, true, false, false, Act::None, In::BF16, Out::BF16,
                               "mainloop_auto", false, 128, 128, "", -1, false, false, false, true};

// An experts problem with leading dimensions of 16.
Problem expertsProblem(uint32_t m, uint32_t n, uint32_t k, uint32_t experts) {
  Problem p{m, n, k};
  p.experts = experts;
  p.align = true;
  return p;
}

// Each of `targets`' code of a mainloop auto kernel with experts (on a GPU, the device's).
void checkAutoExperts(Runner& r, std::mt19937& rng, const Variant& autoKernel, const std::vector<std::string>& targets,
                      const Problem& p) {
  for (const std::string& target : codeTargets(r, targets)) {
    Variant v = autoKernel;
    v.target = target.c_str();
    checkGemm(r, rng, v, p);
  }
}

}  // namespace

LIBRARY_TEST("gemm experts: each M tile its expert's B, bias and scales; tiles of none and unknown experts", gemmExperts) {
  std::mt19937 rng(seed());
  for (const Variant* v : {&kExpertsBf16RC, &kExpertsF16Bias, &kExpertsFp8}) {
    // 6 tiles of 64 (the last partial): experts, none (tiles 1 and 4), an unknown one (3).
    Problem p{6 * 64 - 7, 72, 80};
    p.experts = 3;
    checkGemm(r, rng, *v, p);
    p.align = true;
    p.alpha = -1.25f;
    p.beta = 0.5f;
    checkGemm(r, rng, *v, p);
    Problem one{40, 130, 96, 1, 3};  // one tile, padded leading dimensions
    one.experts = 1;
    checkGemm(r, rng, *v, one);
  }
  checkAutoExperts(r, rng, kExpertsAuto, {"sm_80", "sm_90a"}, expertsProblem(6 * 128 - 100, 40, 64, 4));
}

// wgmma (sm_90a): persistent blocks walking tiles of experts, of none (skipped by the producer,
// the converters and the consumers alike) and of an unknown expert; B the expert's plane of a
// 3-D tensor map (stride_b apart), bias and b_scales its rows.
LIBRARY_TEST("gemm experts on wgmma (sm_90a): persistent tiles of experts, bias, fp8 weights with scales, block scales", gemmExpertsWgmma) {
  std::mt19937 rng(seed());
  for (const Variant* v : {&kWgExpertsBias, &kWgExpertsFp8, &kWgExpertsBlocks}) {
    Problem p = expertsProblem(6 * 128 - 3, 200, 136, 5);
    checkGemm(r, rng, *v, p);
    p.alpha = 0.5f;
    p.beta = -1.0f;
    p.n = 40;
    checkGemm(r, rng, *v, p);
  }
}

// Experts with fp8 block scales (DeepSeek-V3's experts, test/library/gemm_fp8.toml): each tile's
// expert's 128 x 128 block scales of B; on mma.sync (tiles of 64 rows), and mainloop auto's sm_89
// (mma.sync, tiles of 128 rows and 64 columns) and sm_90a (wgmma) code, both over tiles of 128.
LIBRARY_TEST("gemm experts with fp8 block scales: mma.sync and mainloop auto", gemmExpertsBlocks) {
  std::mt19937 rng(seed());
  checkGemm(r, rng, kExpertsBlocks, expertsProblem(6 * 64 - 5, 260, 300, 3));
  checkAutoExperts(r, rng, kExpertsBlocksAuto, {"sm_89", "sm_90a"}, expertsProblem(6 * 128 - 70, 200, 256, 4));
}

