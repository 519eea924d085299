// layernorm, rmsnorm and residual_rmsnorm (kernels/Norms.cpp, spec test/library/norms.toml)
// against double-precision references on the inputs as stored, in every storage type, at odd
// shapes (both access paths), with misaligned buffers, and at extreme values: rows with a large
// mean, constant rows, magnitudes whose squares overflow f32, all-zero rows and rows where eps
// dominates.
#include <algorithm>
#include <cmath>
#include <limits>

#include "library_harness.h"

using namespace tn::libtest;

namespace {

constexpr Dtype kDtypes[] = {Dtype::F32, Dtype::BF16, Dtype::F16};
const double kU32 = std::ldexp(1.0, -24);
// rsqrt.approx.f32's relative error on the GPU (the interpreter rounds 1/sqrt correctly).
const double kRsqrt = std::exp2(-22.9);
// f32 statistics and scaling, relative: summation over <= 4097 terms in per-thread chains of
// <= 17 plus an 8-level tree, the division by cols and a few multiplies (about 30 u, with room).
const double kF32Rel = 1e-5;

struct Shape {
  uint32_t rows, cols, misalign;
};
// Vector-path and scalar-path lengths; misalign 4 (GPU only) forces the scalar path.
const Shape kShapes[] = {{1, 1, 0}, {3, 31, 0}, {2, 33, 0}, {2, 256, 0}, {3, 4097, 0}, {4, 1000, 0}, {4, 1000, 4}, {2, 1024, 4}};

std::string kernelName(const char* t, Dtype d) { return std::string(t) + "_" + dtypeName(d); }

std::string label(const char* t, Dtype d, uint32_t rows, uint32_t cols, const std::string& what = "") {
  return kernelName(t, d) + " " + std::to_string(rows) + "x" + std::to_string(cols) + (what.empty() ? "" : " " + what);
}

// y before the launch: NaN everywhere, so an element the kernel does not write fails the check.
std::vector<std::byte> unwritten(Dtype d, size_t n) {
  return encode(d, std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()));
}

// Half the smallest f16 subnormal step: the absolute error of rounding a tiny result to f16.
double storageAbs(Dtype d) { return d == Dtype::F16 ? std::ldexp(1.0, -25) : 0.0; }

std::vector<float> slice(const std::vector<float>& v, size_t row, size_t cols) {
  return {v.begin() + row * cols, v.begin() + (row + 1) * cols};
}

// x, gamma, beta as stored; returns y.
std::vector<float> runLayernorm(Runner& r, Dtype d, uint32_t rows, uint32_t cols, const std::vector<float>& x,
                                const std::vector<float>& gamma, const std::vector<float>& beta, float eps,
                                uint32_t misalign = 0, const std::string& variant = "") {
  Outputs out = r.run(Call("norms", kernelName(("layernorm" + variant).c_str(), d))
                          .buffer("x", encode(d, x), misalign)
                          .buffer("gamma", encode(d, gamma), misalign)
                          .buffer("beta", encode(d, beta))
                          .buffer("y", unwritten(d, size_t(rows) * cols), misalign)
                          .scalar("rows", rows)
                          .scalar("cols", cols)
                          .scalar("eps", eps));
  return decode(d, out.get<std::byte>("y"));
}

// Compares each row of y with the double reference. Tolerance per row: the f32 mean is off by a
// few roundings at the scale of the row's largest |x| (16 u * max|x|, which times rstd * |gamma|
// is an absolute error of y: this is what makes a large-mean row hard, and what E[x^2] - E[x]^2
// in f32 would exceed by orders of magnitude); everything else is relative, kF32Rel + rsqrt's
// error of the row's scale max(|gamma * xhat| + |beta|) (absolute, as gamma * xhat + beta can
// cancel) plus one rounding of y to the storage type.
void checkLayernorm(Dtype d, uint32_t rows, uint32_t cols, const std::vector<float>& x, const std::vector<float>& gamma,
                    const std::vector<float>& beta, float eps, const std::vector<float>& y, const std::string& what) {
  double maxG = 0;
  for (float g : gamma) maxG = std::max(maxG, std::fabs(double(g)));
  for (uint32_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0, maxX = 0;
    for (uint32_t c = 0; c < cols; ++c) mean += x[r * cols + c];
    mean /= cols;
    for (uint32_t c = 0; c < cols; ++c) {
      double dev = x[r * cols + c] - mean;
      var += dev * dev;
      maxX = std::max(maxX, std::fabs(double(x[r * cols + c])));
    }
    var /= cols;
    double rstd = 1.0 / std::sqrt(var + double(eps));
    std::vector<double> want(cols);
    double scale = 0;
    for (uint32_t c = 0; c < cols; ++c) {
      double xhat = (x[r * cols + c] - mean) * rstd;
      want[c] = xhat * gamma[c] + beta[c];
      scale = std::max(scale, std::fabs(xhat * gamma[c]) + std::fabs(double(beta[c])));
    }
    double abs = maxG * rstd * 16 * kU32 * maxX + (kF32Rel + kRsqrt) * scale + storageAbs(d);
    expectClose(slice(y, r, cols), want, abs, kF32Rel + kRsqrt + roundoff(d), what + " row " + std::to_string(r));
  }
}

// y = x / sqrt(mean(x^2) + eps) * weight in double. Nothing cancels, so the tolerance is relative:
// kF32Rel + rsqrt's error, plus one rounding of y to the storage type.
void checkRmsnorm(Dtype d, uint32_t rows, uint32_t cols, const std::vector<float>& x, const std::vector<float>& weight,
                  float eps, const std::vector<float>& y, const std::string& what) {
  std::vector<double> want(size_t(rows) * cols);
  for (uint32_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (uint32_t c = 0; c < cols; ++c) ss += double(x[r * cols + c]) * x[r * cols + c];
    double inv = 1.0 / std::sqrt(ss / cols + double(eps));
    for (uint32_t c = 0; c < cols; ++c) want[r * cols + c] = x[r * cols + c] * inv * weight[c];
  }
  expectClose(y, want, storageAbs(d), kF32Rel + kRsqrt + roundoff(d), what);
}

std::vector<float> runRmsnorm(Runner& r, Dtype d, uint32_t rows, uint32_t cols, const std::vector<float>& x,
                              const std::vector<float>& weight, float eps, uint32_t misalign = 0,
                              const std::string& variant = "") {
  Outputs out = r.run(Call("norms", kernelName(("rmsnorm" + variant).c_str(), d))
                          .buffer("x", encode(d, x))
                          .buffer("weight", encode(d, weight), misalign)
                          .buffer("y", unwritten(d, size_t(rows) * cols), misalign)
                          .scalar("rows", rows)
                          .scalar("cols", cols)
                          .scalar("eps", eps));
  return decode(d, out.get<std::byte>("y"));
}

// h = x + residual in f32, rounded to the storage type (what the kernel stores back).
std::vector<float> residualSum(Dtype d, const std::vector<float>& x, const std::vector<float>& residual) {
  std::vector<float> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = x[i] + residual[i];
  return roundTo(d, h);
}

// Runs residual_rmsnorm; returns y and replaces residual with what the kernel left there.
std::vector<float> runResidualRmsnorm(Runner& r, Dtype d, uint32_t rows, uint32_t cols, const std::vector<float>& x,
                                      std::vector<float>& residual, const std::vector<float>& weight, float eps,
                                      uint32_t misalign = 0, const std::string& variant = "") {
  Outputs out = r.run(Call("norms", kernelName(("residual_rmsnorm" + variant).c_str(), d))
                          .buffer("x", encode(d, x), misalign)
                          .buffer("residual", encode(d, residual), misalign)
                          .buffer("weight", encode(d, weight))
                          .buffer("y", unwritten(d, size_t(rows) * cols))
                          .scalar("rows", rows)
                          .scalar("cols", cols)
                          .scalar("eps", eps));
  residual = decode(d, out.get<std::byte>("residual"));
  return decode(d, out.get<std::byte>("y"));
}

// rmsnorm_partial's elements per (row, chunk); its summary says so.
constexpr uint32_t kChunk = 4096;

struct Split {
  std::vector<float> y, stats;
};

// NORM_partial then NORM_merge, as a caller runs them: y and the chunk sums. perColumn: the
// merge's per-column tensors by name (the first one misaligned with x and y).
Split runSplit(Runner& r, const char* norm, Dtype d, uint32_t rows, uint32_t cols, const std::vector<float>& x,
               const std::vector<std::pair<const char*, std::vector<float>>>& perColumn, float eps, uint32_t misalign) {
  const uint32_t chunks = (cols + kChunk - 1) / kChunk;
  std::vector<float> stats(std::max<size_t>(1, size_t(rows) * chunks * 2), std::numeric_limits<float>::quiet_NaN());
  Outputs part = r.run(Call("norms", kernelName((std::string(norm) + "_partial").c_str(), d))
                           .buffer("x", encode(d, x), misalign)
                           .buffer("stats", stats)
                           .scalar("rows", rows)
                           .scalar("cols", cols));
  stats = part.get<float>("stats");
  Call merge("norms", kernelName((std::string(norm) + "_merge").c_str(), d));
  merge.buffer("x", encode(d, x), misalign);
  for (size_t i = 0; i < perColumn.size(); ++i)
    merge.buffer(perColumn[i].first, encode(d, perColumn[i].second), i == 0 ? misalign : 0);
  Outputs out = r.run(merge.buffer("stats", stats)
                          .buffer("y", unwritten(d, size_t(rows) * cols), misalign)
                          .scalar("rows", rows)
                          .scalar("cols", cols)
                          .scalar("eps", eps));
  return {decode(d, out.get<std::byte>("y")), stats};
}

Split runRmsnormSplit(Runner& r, Dtype d, uint32_t rows, uint32_t cols, const std::vector<float>& x,
                      const std::vector<float>& weight, float eps, uint32_t misalign = 0) {
  return runSplit(r, "rmsnorm", d, rows, cols, x, {{"weight", weight}}, eps, misalign);
}

Split runLayernormSplit(Runner& r, Dtype d, uint32_t rows, uint32_t cols, const std::vector<float>& x,
                        const std::vector<float>& gamma, const std::vector<float>& beta, float eps, uint32_t misalign = 0) {
  return runSplit(r, "layernorm", d, rows, cols, x, {{"gamma", gamma}, {"beta", beta}}, eps, misalign);
}

// Each chunk's sums of d = x - (the row's first element) and d^2, to kF32Rel of the sum of |d| and of d^2.
void expectChunkDeviations(const std::vector<float>& stats, const std::vector<float>& x, uint32_t rows, uint32_t cols,
                           const std::string& what) {
  const uint32_t chunks = (cols + kChunk - 1) / kChunk;
  for (uint32_t r = 0; r < rows; ++r)
    for (uint32_t c = 0; c < chunks; ++c) {
      double s1 = 0, a1 = 0, s2 = 0;
      for (uint32_t i = c * kChunk; i < std::min(cols, (c + 1) * kChunk); ++i) {
        const double dv = double(x[size_t(r) * cols + i]) - x[size_t(r) * cols];
        s1 += dv, a1 += std::fabs(dv), s2 += dv * dv;
      }
      const size_t at = (size_t(r) * chunks + c) * 2;
      INFO(what << " row " << r << " chunk " << c);
      CHECK(std::fabs(stats[at] - s1) <= kF32Rel * a1);
      CHECK(std::fabs(stats[at + 1] - s2) <= kF32Rel * s2);
    }
}

// Each chunk's sums of squares: the plain one to kF32Rel (a chunk is at most 4096 terms), and
// where it overflowed, the scaled one to kF32Rel of the sum times 2^-180.
void expectChunkSums(const std::vector<float>& stats, const std::vector<float>& x, uint32_t rows, uint32_t cols,
                     const std::string& what) {
  const uint32_t chunks = (cols + kChunk - 1) / kChunk;
  for (uint32_t r = 0; r < rows; ++r)
    for (uint32_t c = 0; c < chunks; ++c) {
      double ss = 0;
      for (uint32_t i = c * kChunk; i < std::min(cols, (c + 1) * kChunk); ++i) ss += double(x[size_t(r) * cols + i]) * x[size_t(r) * cols + i];
      const float plain = stats[(size_t(r) * chunks + c) * 2], scaled = stats[(size_t(r) * chunks + c) * 2 + 1];
      const std::string at = what + " row " + std::to_string(r) + " chunk " + std::to_string(c);
      if (ss < std::numeric_limits<float>::max()) {
        CHECK_MESSAGE(std::fabs(plain - ss) <= kF32Rel * ss, at << ": plain " << plain << ", want " << ss);
      } else {
        CHECK_MESSAGE(plain == std::numeric_limits<float>::infinity(), at);
        const double want = std::ldexp(ss, -180);
        CHECK_MESSAGE(std::fabs(scaled - want) <= kF32Rel * want, at << ": scaled " << scaled << ", want " << want);
      }
    }
}

}  // namespace

// ---- layernorm --------------------------------------------------------------------------------

LIBRARY_TEST("norms layernorm shapes", layernormShapes) {
  std::mt19937 rng(seed());
  for (Dtype d : kDtypes)
    for (Shape s : kShapes) {
      size_t n = size_t(s.rows) * s.cols;
      // Rows with a nonzero mean, so that the centring matters.
      auto x = roundTo(d, uniform(rng, n, -1.0f, 3.0f));
      auto gamma = roundTo(d, uniform(rng, s.cols, 0.5f, 1.5f)), beta = roundTo(d, uniform(rng, s.cols));
      auto y = runLayernorm(r, d, s.rows, s.cols, x, gamma, beta, 1e-5f, s.misalign);
      checkLayernorm(d, s.rows, s.cols, x, gamma, beta, 1e-5f, y,
                     label("layernorm", d, s.rows, s.cols, "misalign " + std::to_string(s.misalign)));
    }
}

LIBRARY_TEST("norms layernorm large mean", layernormLargeMean) {
  std::mt19937 rng(seed());
  for (Dtype d : kDtypes) {
    // 1e4 plus noise of a few storage ulps' worth of resolution: spread 1 (f32), 64 (f16), 512 (bf16).
    float spread = d == Dtype::F32 ? 1.0f : d == Dtype::F16 ? 64.0f : 512.0f;
    for (uint32_t cols : {33u, 1024u, 4097u}) {
      uint32_t rows = 2;
      auto x = roundTo(d, uniform(rng, size_t(rows) * cols, 1e4f - spread, 1e4f + spread));
      auto gamma = roundTo(d, uniform(rng, cols, 0.5f, 1.5f)), beta = roundTo(d, uniform(rng, cols));
      auto y = runLayernorm(r, d, rows, cols, x, gamma, beta, 1e-5f);
      checkLayernorm(d, rows, cols, x, gamma, beta, 1e-5f, y, label("layernorm", d, rows, cols, "mean 1e4"));
    }
  }
}

LIBRARY_TEST("norms layernorm constant and zero rows", layernormConstant) {
  std::mt19937 rng(seed());
  for (Dtype d : kDtypes)
    for (uint32_t cols : {1u, 33u, 256u, 1000u, 4097u}) {
      // Row 0 all zero, row 1 one random constant, row 2 a large constant: the variance is exactly
      // 0, so y = 0 * rsqrt(eps) * gamma + beta = beta exactly, whatever eps.
      uint32_t rows = 3;
      std::vector<float> x(size_t(rows) * cols, 0.0f);
      float c1 = roundTo(d, uniform(rng, 1, -100.0f, 100.0f))[0], c2 = d == Dtype::F16 ? 60000.0f : -3e30f;
      std::fill(x.begin() + cols, x.begin() + 2 * cols, c1);
      std::fill(x.begin() + 2 * cols, x.end(), roundTo(d, {c2})[0]);
      auto gamma = roundTo(d, uniform(rng, cols, -2.0f, 2.0f)), beta = roundTo(d, uniform(rng, cols));
      for (float eps : {1e-5f, 1.0f}) {
        auto y = runLayernorm(r, d, rows, cols, x, gamma, beta, eps);
        std::vector<double> want;
        for (uint32_t i = 0; i < rows; ++i) want.insert(want.end(), beta.begin(), beta.end());
        // Exact: every merge of equal means is exact and x - mean is 0.
        expectClose(y, want, 0, 0, label("layernorm", d, rows, cols, "constant rows eps " + std::to_string(eps)));
      }
    }
}

LIBRARY_TEST("norms layernorm eps and empty problems", layernormEps) {
  std::mt19937 rng(seed());
  for (Dtype d : kDtypes) {
    // Spread 1e-3 against eps 1e-2: eps dominates the variance, so y shrinks towards beta.
    uint32_t rows = 2, cols = 300;
    auto x = roundTo(d, uniform(rng, size_t(rows) * cols, -1e-3f, 1e-3f));
    auto gamma = roundTo(d, uniform(rng, cols, 0.5f, 1.5f)), beta = roundTo(d, uniform(rng, cols));
    auto y = runLayernorm(r, d, rows, cols, x, gamma, beta, 1e-2f);
    checkLayernorm(d, rows, cols, x, gamma, beta, 1e-2f, y, label("layernorm", d, rows, cols, "eps 1e-2"));
    // No rows: nothing is launched. No columns: blocks run and write nothing.
    CHECK(runLayernorm(r, d, 0, 7, {}, roundTo(d, uniform(rng, 7)), roundTo(d, uniform(rng, 7)), 1e-5f).empty());
    CHECK(runLayernorm(r, d, 3, 0, {}, {}, {}, 1e-5f).empty());
  }
}

// ---- rmsnorm and residual_rmsnorm ---------------------------------------------------------------

LIBRARY_TEST("norms rmsnorm shapes", rmsnormShapes) {
  std::mt19937 rng(seed());
  for (Dtype d : kDtypes)
    for (Shape s : kShapes) {
      auto x = roundTo(d, uniform(rng, size_t(s.rows) * s.cols, -2.0f, 2.0f));
      auto weight = roundTo(d, uniform(rng, s.cols, -1.5f, 1.5f));
      auto y = runRmsnorm(r, d, s.rows, s.cols, x, weight, 1e-6f, s.misalign);
      checkRmsnorm(d, s.rows, s.cols, x, weight, 1e-6f, y,
                   label("rmsnorm", d, s.rows, s.cols, "misalign " + std::to_string(s.misalign)));
    }
}

// Magnitudes whose sum of squares overflows f32 (1e18: 4097 squares of 1e36; 1e30; 1e38, near
// the f32 maximum) next to an ordinary row: the kernel's scaled second sum takes over, so the
// result stays finite and as accurate as for ordinary rows. f16 cannot overflow (65504^2 * 2^32
// < 2^128); its largest values are tested instead.
LIBRARY_TEST("norms rmsnorm large magnitudes", rmsnormLarge) {
  std::mt19937 rng(seed());
  for (Dtype d : kDtypes)
    for (uint32_t cols : {33u, 1024u, 4097u}) {
      std::vector<float> magnitudes = d == Dtype::F16 ? std::vector<float>{1.0f, 6e4f} : std::vector<float>{1.0f, 1e18f, 1e30f, 1e38f};
      uint32_t rows = uint32_t(magnitudes.size());
      std::vector<float> x;
      for (float m : magnitudes) {
        auto row = uniform(rng, cols, -m, m);
        x.insert(x.end(), row.begin(), row.end());
      }
      x = roundTo(d, x);
      auto weight = roundTo(d, uniform(rng, cols, -1.5f, 1.5f));
      auto y = runRmsnorm(r, d, rows, cols, x, weight, 1e-6f);
      checkRmsnorm(d, rows, cols, x, weight, 1e-6f, y, label("rmsnorm", d, rows, cols, "large magnitudes"));
      std::vector<float> residual = roundTo(d, std::vector<float>(x.size(), 0.0f));
      auto y2 = runResidualRmsnorm(r, d, rows, cols, x, residual, weight, 1e-6f);
      checkRmsnorm(d, rows, cols, x, weight, 1e-6f, y2, label("residual_rmsnorm", d, rows, cols, "large magnitudes"));
    }
}

LIBRARY_TEST("norms rmsnorm eps, zero rows and empty problems", rmsnormEps) {
  std::mt19937 rng(seed());
  for (Dtype d : kDtypes)
    for (uint32_t cols : {1u, 300u, 1024u}) {
      // Row 0 all zero: y = 0 * rsqrt(eps) * weight = 0. Row 1 of size 1e-3 against eps 1e-2:
      // eps dominates the mean square and scales y down tenfold.
      uint32_t rows = 2;
      std::vector<float> x(cols, 0.0f);
      auto small = uniform(rng, cols, -1e-3f, 1e-3f);
      x.insert(x.end(), small.begin(), small.end());
      x = roundTo(d, x);
      auto weight = roundTo(d, uniform(rng, cols, -1.5f, 1.5f));
      auto y = runRmsnorm(r, d, rows, cols, x, weight, 1e-2f);
      checkRmsnorm(d, rows, cols, x, weight, 1e-2f, y, label("rmsnorm", d, rows, cols, "eps 1e-2"));
      CHECK(std::all_of(y.begin(), y.begin() + cols, [](float v) { return v == 0.0f; }));
    }
  for (Dtype d : kDtypes) {
    CHECK(runRmsnorm(r, d, 0, 9, {}, roundTo(d, uniform(rng, 9)), 1e-6f).empty());
    CHECK(runRmsnorm(r, d, 2, 0, {}, {}, 1e-6f).empty());
    std::vector<float> residual;
    CHECK(runResidualRmsnorm(r, d, 0, 9, {}, residual, roundTo(d, uniform(rng, 9)), 1e-6f).empty());
  }
}

LIBRARY_TEST("norms residual_rmsnorm shapes", residualRmsnormShapes) {
  std::mt19937 rng(seed());
  for (Dtype d : kDtypes)
    for (Shape s : kShapes) {
      size_t n = size_t(s.rows) * s.cols;
      auto x = roundTo(d, uniform(rng, n, -2.0f, 2.0f)), residual = roundTo(d, uniform(rng, n, -2.0f, 2.0f));
      auto weight = roundTo(d, uniform(rng, s.cols, -1.5f, 1.5f));
      std::vector<float> h = residualSum(d, x, residual);
      auto y = runResidualRmsnorm(r, d, s.rows, s.cols, x, residual, weight, 1e-6f, s.misalign);
      std::string what = label("residual_rmsnorm", d, s.rows, s.cols, "misalign " + std::to_string(s.misalign));
      // One f32 add and one rounding to the storage type: the stored h is exact.
      expectClose(residual, std::vector<double>(h.begin(), h.end()), 0, 0, what + " residual");
      // The statistics are those of h as stored.
      checkRmsnorm(d, s.rows, s.cols, h, weight, 1e-6f, y, what);
    }
}

// The one-pass path (the row kept in registers: cols <= 8192 f32, 16384 bf16/f16, 16-byte
// vectors; with max_cols, `bound`) of the kernels NAME`variant`_DTYPE at its bound, one vector
// past it (two passes) and one element past it (the scalar path): random rows, a row with a large
// mean and a constant row (layernorm), rows whose sum of squares overflows (rmsnorm,
// residual_rmsnorm).
void checkOnePassBound(Runner& r, std::mt19937& rng, Dtype d, uint32_t bound, const std::string& variant) {
  const uint32_t vec = d == Dtype::F32 ? 4 : 8;
  for (uint32_t cols : {bound, bound + vec, bound + 1}) {
    const std::string base = "layernorm" + variant;
    uint32_t rows = 3;
    float spread = d == Dtype::F32 ? 1.0f : d == Dtype::F16 ? 64.0f : 512.0f;
    std::vector<float> x = uniform(rng, cols, -1.0f, 3.0f), big = uniform(rng, cols, 1e4f - spread, 1e4f + spread);
    x.insert(x.end(), big.begin(), big.end());
    x.resize(size_t(rows) * cols, -7.5f);
    x = roundTo(d, x);
    auto gamma = roundTo(d, uniform(rng, cols, 0.5f, 1.5f)), beta = roundTo(d, uniform(rng, cols));
    auto y = runLayernorm(r, d, rows, cols, x, gamma, beta, 1e-5f, 0, variant);
    checkLayernorm(d, rows, cols, x, gamma, beta, 1e-5f, y, label(base.c_str(), d, rows, cols));
    // The constant row: exactly beta.
    expectClose(slice(y, 2, cols), std::vector<double>(beta.begin(), beta.end()), 0, 0,
                label(base.c_str(), d, rows, cols, "constant row"));

    float m = d == Dtype::F16 ? 6e4f : 1e30f;
    std::vector<float> xr = uniform(rng, cols, -2.0f, 2.0f), huge = uniform(rng, cols, -m, m);
    xr.insert(xr.end(), huge.begin(), huge.end());
    xr = roundTo(d, xr);
    auto weight = roundTo(d, uniform(rng, cols, -1.5f, 1.5f));
    checkRmsnorm(d, 2, cols, xr, weight, 1e-6f, runRmsnorm(r, d, 2, cols, xr, weight, 1e-6f, 0, variant),
                 label(("rmsnorm" + variant).c_str(), d, 2, cols, "large magnitudes"));
    auto residual = roundTo(d, uniform(rng, xr.size(), -2.0f, 2.0f));
    std::vector<float> h = residualSum(d, xr, residual);
    auto y2 = runResidualRmsnorm(r, d, 2, cols, xr, residual, weight, 1e-6f, 0, variant);
    const std::string res = "residual_rmsnorm" + variant;
    expectClose(residual, std::vector<double>(h.begin(), h.end()), 0, 0, label(res.c_str(), d, 2, cols, "residual"));
    checkRmsnorm(d, 2, cols, h, weight, 1e-6f, y2, label(res.c_str(), d, 2, cols, "large magnitudes"));
  }
}

LIBRARY_TEST("norms one-pass bound", normsOnePassBound) {
  std::mt19937 rng(seed());
  for (Dtype d : kDtypes) checkOnePassBound(r, rng, d, d == Dtype::F32 ? 8192 : 16384, "");
}

// max_cols = 1024 (test/library/norms.toml): one 16-byte vector a thread, so rows of up to 1024
// f32 or 2048 bf16/f16 elements in registers; max_cols = 4096 in bf16: two.
LIBRARY_TEST("norms one-pass bound with max_cols", normsMaxCols) {
  std::mt19937 rng(seed());
  for (Dtype d : kDtypes) checkOnePassBound(r, rng, d, d == Dtype::F32 ? 1024 : 2048, "_c1024");
  checkOnePassBound(r, rng, Dtype::BF16, 4096, "_c4096");
}

// Big problems on the GPU only: long rows (many iterations per thread) and many rows.
LIBRARY_GPU_TEST("norms big", normsBig) {
  std::mt19937 rng(seed());
  // Long and odd rows are the point; on the simulator fewer of them.
  const bool sim = simulatedGpu();
  for (Dtype d : kDtypes)
    for (Shape s : {Shape{sim ? 2u : 64u, 65536, 0}, Shape{sim ? 16u : 2048u, 4096, 0}, Shape{sim ? 4u : 512u, 8191, 0}}) {
      size_t n = size_t(s.rows) * s.cols;
      auto x = roundTo(d, uniform(rng, n, -1.0f, 3.0f));
      auto gamma = roundTo(d, uniform(rng, s.cols, 0.5f, 1.5f)), beta = roundTo(d, uniform(rng, s.cols));
      auto y = runLayernorm(r, d, s.rows, s.cols, x, gamma, beta, 1e-5f);
      checkLayernorm(d, s.rows, s.cols, x, gamma, beta, 1e-5f, y, label("layernorm", d, s.rows, s.cols));
      y = runRmsnorm(r, d, s.rows, s.cols, x, gamma, 1e-6f);
      checkRmsnorm(d, s.rows, s.cols, x, gamma, 1e-6f, y, label("rmsnorm", d, s.rows, s.cols));
      auto residual = roundTo(d, uniform(rng, n));
      std::vector<float> h = residualSum(d, x, residual);
      y = runResidualRmsnorm(r, d, s.rows, s.cols, x, residual, gamma, 1e-6f);
      expectClose(residual, std::vector<double>(h.begin(), h.end()), 0, 0, label("residual_rmsnorm", d, s.rows, s.cols, "residual"));
      checkRmsnorm(d, s.rows, s.cols, h, gamma, 1e-6f, y, label("residual_rmsnorm", d, s.rows, s.cols));
    }
}

// ---- rmsnorm_partial + rmsnorm_merge ------------------------------------------------------------

// Rows split into 4096-element chunks: one chunk, several with a short last one, exact multiples,
// odd lengths (the scalar path) and, on the GPU, misaligned buffers.
LIBRARY_TEST("norms rmsnorm split shapes", rmsnormSplitShapes) {
  std::mt19937 rng(seed());
  const std::pair<uint32_t, uint32_t> shapes[] = {{1, 1}, {2, 33}, {3, 4097}, {2, 8192}, {1, 3 * kChunk + 8}, {4, 10001}, {2, 4095}};
  for (Dtype d : kDtypes)
    for (auto [rows, cols] : shapes) {
      auto x = roundTo(d, uniform(rng, size_t(rows) * cols, -2.0f, 2.0f));
      auto weight = roundTo(d, uniform(rng, cols, -1.5f, 1.5f));
      Split out = runRmsnormSplit(r, d, rows, cols, x, weight, 1e-6f);
      expectChunkSums(out.stats, x, rows, cols, label("rmsnorm_partial", d, rows, cols));
      checkRmsnorm(d, rows, cols, x, weight, 1e-6f, out.y, label("rmsnorm_partial+merge", d, rows, cols));
      if (r.honoursMisalign() && cols % 8 == 0)
        checkRmsnorm(d, rows, cols, x, weight, 1e-6f, runRmsnormSplit(r, d, rows, cols, x, weight, 1e-6f, 4).y,
                     label("rmsnorm_partial+merge", d, rows, cols, "misaligned"));
    }
  if (r.fast())
    for (Dtype d : kDtypes) {
      uint32_t rows = 8, cols = 1u << 20;
      auto x = roundTo(d, uniform(rng, size_t(rows) * cols, -2.0f, 2.0f));
      auto weight = roundTo(d, uniform(rng, cols, -1.5f, 1.5f));
      checkRmsnorm(d, rows, cols, x, weight, 1e-6f, runRmsnormSplit(r, d, rows, cols, x, weight, 1e-6f).y,
                   label("rmsnorm_partial+merge", d, rows, cols));
    }
}

// Sums of squares that overflow f32 in every chunk of a row, or in one chunk only (its neighbours'
// plain sums stay finite; the row's total overflows, so every block of the row takes the scaled
// sums): finite results as accurate as for ordinary rows. Zero rows, eps, and empty problems.
LIBRARY_TEST("norms rmsnorm split large magnitudes, zero rows and empty problems", rmsnormSplitLarge) {
  std::mt19937 rng(seed());
  for (Dtype d : kDtypes) {
    const uint32_t cols = 2 * kChunk + 100;
    std::vector<float> magnitudes = d == Dtype::F16 ? std::vector<float>{1.0f, 6e4f} : std::vector<float>{1.0f, 1e18f, 1e30f, 1e38f};
    std::vector<float> x;
    for (float m : magnitudes) {
      auto row = uniform(rng, cols, -m, m);
      x.insert(x.end(), row.begin(), row.end());
    }
    // One huge chunk (the middle one) in an ordinary row.
    std::vector<float> mixed = uniform(rng, cols, -2.0f, 2.0f);
    const float huge = d == Dtype::F16 ? 6e4f : 1e30f;
    for (uint32_t i = kChunk; i < 2 * kChunk; ++i) mixed[i] = uniform(rng, 1, -huge, huge)[0];
    x.insert(x.end(), mixed.begin(), mixed.end());
    // A zero row: y = 0.
    x.resize(x.size() + cols, 0.0f);
    const uint32_t rows = uint32_t(x.size() / cols);
    x = roundTo(d, x);
    auto weight = roundTo(d, uniform(rng, cols, -1.5f, 1.5f));
    Split out = runRmsnormSplit(r, d, rows, cols, x, weight, 1e-6f);
    expectChunkSums(out.stats, x, rows, cols, label("rmsnorm_partial", d, rows, cols, "large magnitudes"));
    checkRmsnorm(d, rows, cols, x, weight, 1e-6f, out.y, label("rmsnorm_partial+merge", d, rows, cols, "large magnitudes"));
    CHECK(std::all_of(out.y.end() - cols, out.y.end(), [](float v) { return v == 0.0f; }));
    // eps dominating a row of size 1e-3.
    auto small = roundTo(d, uniform(rng, size_t(2) * cols, -1e-3f, 1e-3f));
    checkRmsnorm(d, 2, cols, small, weight, 1e-2f, runRmsnormSplit(r, d, 2, cols, small, weight, 1e-2f).y,
                 label("rmsnorm_partial+merge", d, 2, cols, "eps 1e-2"));
    // No rows or no columns: an empty grid, nothing launched or written.
    CHECK(runRmsnormSplit(r, d, 0, 9, {}, roundTo(d, uniform(rng, 9)), 1e-6f).y.empty());
    CHECK(runRmsnormSplit(r, d, 2, 0, {}, {}, 1e-6f).y.empty());
  }
}

// ---- layernorm_partial + layernorm_merge --------------------------------------------------------

// The split pair against the same reference as layernorm, at the split shapes of rmsnorm's, with
// rows whose mean is far from zero (the deviations from the row's first element keep them exact)
// and constant rows (y = beta), and, on the GPU, misaligned buffers.
LIBRARY_TEST("norms layernorm split shapes, large means and constant rows", layernormSplit) {
  std::mt19937 rng(seed());
  const std::pair<uint32_t, uint32_t> shapes[] = {{1, 1}, {2, 33}, {3, 4097}, {2, 8192}, {1, 3 * kChunk + 8}, {4, 10001}, {2, 4095}};
  for (Dtype d : kDtypes)
    for (auto [rows, cols] : shapes) {
      auto x = uniform(rng, size_t(rows) * cols, -2.0f, 2.0f);
      // Row 1 (where there is one) sits on a large mean; the last row is constant when rows > 2.
      if (rows > 1)
        for (uint32_t c = 0; c < cols; ++c) x[cols + c] += d == Dtype::F16 ? 1000.0f : 3000.0f;
      if (rows > 2) std::fill(x.end() - cols, x.end(), 1.25f);
      x = roundTo(d, x);
      auto gamma = roundTo(d, uniform(rng, cols, -1.5f, 1.5f));
      auto beta = roundTo(d, uniform(rng, cols, -0.5f, 0.5f));
      Split out = runLayernormSplit(r, d, rows, cols, x, gamma, beta, 1e-5f);
      expectChunkDeviations(out.stats, x, rows, cols, label("layernorm_partial", d, rows, cols));
      checkLayernorm(d, rows, cols, x, gamma, beta, 1e-5f, out.y, label("layernorm_partial+merge", d, rows, cols));
      if (rows > 2)
        CHECK(std::equal(out.y.end() - cols, out.y.end(), beta.begin()));
      if (r.honoursMisalign() && cols % 8 == 0)
        checkLayernorm(d, rows, cols, x, gamma, beta, 1e-5f, runLayernormSplit(r, d, rows, cols, x, gamma, beta, 1e-5f, 4).y,
                       label("layernorm_partial+merge", d, rows, cols, "misaligned"));
    }
  for (Dtype d : kDtypes) {
    // No rows or no columns: an empty grid, nothing launched or written.
    CHECK(runLayernormSplit(r, d, 0, 9, {}, roundTo(d, uniform(rng, 9)), roundTo(d, uniform(rng, 9)), 1e-5f).y.empty());
    CHECK(runLayernormSplit(r, d, 2, 0, {}, {}, {}, 1e-5f).y.empty());
  }
  if (r.fast())
    for (Dtype d : kDtypes) {
      uint32_t rows = 8, cols = 1u << 20;
      auto x = roundTo(d, uniform(rng, size_t(rows) * cols, -2.0f, 2.0f));
      auto gamma = roundTo(d, uniform(rng, cols, -1.5f, 1.5f)), beta = roundTo(d, uniform(rng, cols, -0.5f, 0.5f));
      checkLayernorm(d, rows, cols, x, gamma, beta, 1e-5f, runLayernormSplit(r, d, rows, cols, x, gamma, beta, 1e-5f).y,
                     label("layernorm_partial+merge", d, rows, cols));
    }
}
