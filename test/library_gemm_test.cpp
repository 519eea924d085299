// gemm (kernels/Gemm.cpp, spec test/library/gemm.toml), the SIMT f32 member, against a
// double-precision reference: every layout of A and B, both tile sizes, every epilogue, odd sizes
// (1x1x1, 17x33x65, 130x258x72: partial tiles in M, N and K, an odd number of K steps),
// strided batches, k = 0, beta = 0 over a C full of NaN (C must not be read), and leading
// dimensions larger than the matrices.
#include <cmath>
#include <limits>

#include "library_harness.h"

using namespace tn::libtest;

namespace {

enum class Act { None, Relu, Gelu, GeluErf, Silu };

struct Variant {
  const char* kernel;
  bool aCol, bCol, bias, residual;
  Act act;
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

// Runs one problem and checks every element of C (and that C's padding is untouched).
void checkGemm(Runner& r, std::mt19937& rng, const Variant& v, const Problem& p) {
  const uint32_t lda = (v.aCol ? p.m : p.k) + p.pad, ldb = (v.bCol ? p.k : p.n) + p.pad, ldc = p.n + p.pad;
  const uint64_t sa = uint64_t(v.aCol ? p.k : p.m) * lda, sb = uint64_t(v.bCol ? p.n : p.k) * ldb,
                 sc = uint64_t(p.m) * ldc;
  auto sized = [](uint64_t n) { return std::max<uint64_t>(n, 1); };  // a buffer is never empty
  std::vector<float> a = uniform(rng, sized(sa * p.batch)), b = uniform(rng, sized(sb * p.batch));
  std::vector<float> c = uniform(rng, sized(sc * p.batch));
  if (p.beta == 0.0f)  // C must not be read: NaN would show in every element
    for (size_t i = 0; i < c.size(); ++i)
      if (i % ldc < p.n) c[i] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> bias = uniform(rng, sized(p.n)), res = uniform(rng, sized(sc * p.batch));
  Call call("gemm", v.kernel);
  call.buffer("a", a).buffer("b", b).buffer("c", c);
  if (v.bias) call.buffer("bias", bias);
  if (v.residual) call.buffer("residual", res);
  call.scalar("m", p.m).scalar("n", p.n).scalar("k", p.k).scalar("lda", lda).scalar("ldb", ldb).scalar("ldc", ldc);
  call.scalar("batch", p.batch).scalar("stride_a", sa).scalar("stride_b", sb).scalar("stride_c", sc);
  call.scalar("alpha", p.alpha).scalar("beta", p.beta);
  Outputs out = r.run(call);
  std::vector<float> got = out.get<float>("c");
  REQUIRE(got.size() == c.size());
  std::string what = std::string(v.kernel) + " m=" + std::to_string(p.m) + " n=" + std::to_string(p.n) +
                     " k=" + std::to_string(p.k) + " batch=" + std::to_string(p.batch) + " pad=" + std::to_string(p.pad);
  std::vector<float> gotIn;
  std::vector<double> want;
  double worst = 0;
  for (uint32_t z = 0; z < p.batch; ++z)
    for (uint32_t i = 0; i < p.m; ++i)
      for (uint32_t j = 0; j < p.n; ++j) {
        double sum = 0, mag = 0;
        for (uint32_t kk = 0; kk < p.k; ++kk) {
          double x = a[z * sa + (v.aCol ? uint64_t(kk) * lda + i : uint64_t(i) * lda + kk)];
          double y = b[z * sb + (v.bCol ? uint64_t(j) * ldb + kk : uint64_t(kk) * ldb + j)];
          sum += x * y;
          mag += std::fabs(x * y);
        }
        const uint64_t at = z * sc + uint64_t(i) * ldc + j;
        double pre = p.alpha * sum + (p.beta != 0.0f ? p.beta * double(c[at]) : 0.0) + (v.bias ? bias[j] : 0.0);
        double y = activate(v.act, pre) + (v.residual ? res[at] : 0.0);
        gotIn.push_back(got[at]);
        want.push_back(y);
        // f32 products accumulated by fma in K order: |error| <= k * 2^-24 * sum|a b| (first
        // order), scaled by alpha; the epilogue adds a few roundings of the result's size, and
        // the activations' own error (ex2/rcp.approx: a few ulp of their argument's size).
        worst = std::max(worst, std::fabs(p.alpha) * (p.k + 2) * std::ldexp(1.0, -24) * mag);
      }
  // The activations are within ~1e-6 relative of the reference (docs/kernels.md).
  expectClose(gotIn, want, worst + 1e-6, 4e-6, what);
  for (size_t i = 0; i < got.size(); ++i)
    if (i % ldc >= p.n || i >= sc * p.batch) CHECK_MESSAGE(std::isnan(got[i]) == std::isnan(c[i]), what << " padding at " << i);
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
  if (r.fast() && !simulatedGpu()) checkGemm(r, rng, kRR, {1000, 1000, 1000});
}
