// argmax (and its split pair argmax_partial + argmax_merge), sample_cutoff, logit_penalties,
// transpose and kv_scatter (test/library/rowops.toml) against C++ references. argmax, the
// penalties and the two copies are exact: every comparison here is bit for bit, no tolerance
// (kv_scatter's fp8 codes against ir/Float8.h's); sampling is checked by its distribution.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <numeric>

#include "ir/Float8.h"
#include "library_harness.h"

using namespace tn::libtest;
using tn::ir::Fp8Format;
using tn::ir::fp8Code;
using tn::ir::fp8Value;

namespace {

constexpr Dtype kDtypes[] = {Dtype::F32, Dtype::BF16, Dtype::F16};

std::string kernelName(const char* base, Dtype d) { return std::string(base) + "_" + dtypeName(d); }

// First index of the maximum, NaN above every number (the first NaN), -0 == +0.
uint32_t refArgmax(const float* v, uint32_t n) {
  uint32_t best = 0;
  for (uint32_t i = 1; i < n && !std::isnan(v[best]); ++i)
    if (std::isnan(v[i]) || v[i] > v[best]) best = i;
  return best;
}

// Random storage bits (any pattern, NaNs included: the copies must not care).
std::vector<std::byte> randomBytes(std::mt19937& rng, size_t n) {
  std::vector<std::byte> out(n);
  for (std::byte& b : out) b = static_cast<std::byte>(rng() & 0xFF);
  return out;
}

}  // namespace

// ---- argmax ---------------------------------------------------------------------------------

// Rows of random values with planted specials; the reference reads the values the kernel reads
// (rounded to the storage type, which also makes ties common in bf16).
LIBRARY_TEST("argmax random rows with ties and specials", argmaxRandom) {
  std::mt19937 rng(seed());
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (Dtype d : kDtypes) {
    for (uint32_t cols : {1u, 2u, 7u, 8u, 31u, 33u, 256u, 1000u, 1024u, 4097u}) {
      const uint32_t rows = 12;
      std::vector<float> x = uniform(rng, size_t(rows) * cols, -4.0f, 4.0f);
      std::uniform_int_distribution<uint32_t> pick(0, cols - 1);
      auto rowOf = [&](uint32_t r) { return x.begin() + size_t(r) * cols; };
      // 0: random; 1: all equal; 2: all -inf; 3: a tie of the maximum at two places;
      // 4: one NaN; 5: two NaNs and +inf; 6: NaN first; 7: NaN last; 8: -0 and +0 the maximum;
      // 9: max at the end; 10: all +inf; 11: negative NaN (sign bit set) among numbers.
      std::fill(rowOf(1), rowOf(2), 0.5f);
      std::fill(rowOf(2), rowOf(3), -inf);
      {
        uint32_t a = pick(rng), b = pick(rng);
        rowOf(3)[a] = 9.0f;
        rowOf(3)[b] = 9.0f;
      }
      rowOf(4)[pick(rng)] = nan;
      rowOf(5)[pick(rng)] = inf;
      rowOf(5)[pick(rng)] = nan;
      rowOf(5)[pick(rng)] = nan;
      rowOf(6)[0] = nan;
      rowOf(7)[cols - 1] = nan;
      std::fill(rowOf(8), rowOf(9), -1.0f);
      rowOf(8)[pick(rng)] = -0.0f;
      rowOf(8)[pick(rng)] = 0.0f;
      rowOf(9)[cols - 1] = 5.0f;
      std::fill(rowOf(10), rowOf(11), inf);
      rowOf(11)[pick(rng)] = -nan;
      x = roundTo(d, x);
      for (uint32_t misalign : {0u, uint32_t(dtypeBytes(d))}) {
        std::vector<uint32_t> index(rows, 0xDEADBEEFu);
        Outputs out = r.run(Call("rowops", kernelName("argmax", d))
                                .buffer("x", encode(d, x), misalign)
                                .buffer("index", index)
                                .scalar("rows", rows)
                                .scalar("cols", cols));
        std::vector<uint32_t> got = out.get<uint32_t>("index");
        for (uint32_t row = 0; row < rows; ++row)
          CHECK_MESSAGE(got[row] == refArgmax(&x[size_t(row) * cols], cols),
                        dtypeName(d) << " cols=" << cols << " row " << row << " misalign " << misalign << " (seed " << seed()
                                     << ")");
      }
    }
  }
}

LIBRARY_TEST("argmax empty rows and no rows", argmaxEmpty) {
  for (Dtype d : kDtypes) {
    // cols = 0 writes nothing; rows = 0 launches nothing.
    std::vector<uint32_t> index(3, 0xDEADBEEFu);
    Outputs out = r.run(Call("rowops", kernelName("argmax", d))
                            .buffer("x", std::vector<std::byte>(16))
                            .buffer("index", index)
                            .scalar("rows", 3u)
                            .scalar("cols", 0u));
    CHECK(out.get<uint32_t>("index") == index);
    out = r.run(Call("rowops", kernelName("argmax", d))
                    .buffer("x", std::vector<std::byte>(16))
                    .buffer("index", index)
                    .scalar("rows", 0u)
                    .scalar("cols", 5u));
    CHECK(out.get<uint32_t>("index") == index);
  }
}

// The maximum in each thread's last strided slot and in the unrolled tail: a row just longer than
// one sweep of the block (256 threads x 4 loads, times the vector width).
LIBRARY_TEST("argmax position sweep", argmaxSweep) {
  std::mt19937 rng(seed());
  for (Dtype d : kDtypes) {
    uint32_t cols = d == Dtype::F32 ? 4096 + 4 : 8192 + 8;
    std::vector<uint32_t> where = {0, 1, 255, 256, 1023, 1024, cols / 2, cols - 9, cols - 1};
    const uint32_t rows = static_cast<uint32_t>(where.size());
    std::vector<float> x = roundTo(d, uniform(rng, size_t(rows) * cols, -1.0f, 1.0f));
    for (uint32_t row = 0; row < rows; ++row) x[size_t(row) * cols + where[row]] = 2.0f;
    std::vector<uint32_t> index(rows, 0xDEADBEEFu);
    Outputs out = r.run(Call("rowops", kernelName("argmax", d))
                            .buffer("x", encode(d, x))
                            .buffer("index", index)
                            .scalar("rows", rows)
                            .scalar("cols", cols));
    std::vector<uint32_t> got = out.get<uint32_t>("index");
    for (uint32_t row = 0; row < rows; ++row) CHECK_MESSAGE(got[row] == where[row], dtypeName(d) << " row " << row);
  }
}

// ---- argmax_partial + argmax_merge ----------------------------------------------------------

namespace {

constexpr uint32_t kArgmaxChunk = 1024;  // argmax_partial's elements per (row, chunk); its summary

// argmax's order key: IEEE order as unsigned order, -0 == +0, every NaN the same and highest.
uint32_t refKey(float v) {
  if (std::isnan(v)) return 0xFFFFFFFFu;
  if (v == 0.0f) return 0x80000000u;
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return (b & 0x80000000u) ? ~b : b | 0x80000000u;
}

struct Split {
  std::vector<uint32_t> partial, index;
};

// argmax_partial then argmax_merge, as a caller runs them.
Split runSplit(Runner& r, Dtype d, const std::vector<float>& x, uint32_t rows, uint32_t cols, uint32_t misalign = 0) {
  uint32_t chunks = (cols + kArgmaxChunk - 1) / kArgmaxChunk;
  std::vector<uint32_t> partial(std::max<size_t>(1, size_t(rows) * chunks * 2), 0xDEADBEEFu);
  Outputs part = r.run(Call("rowops", kernelName("argmax_partial", d))
                           .buffer("x", encode(d, x), misalign)
                           .buffer("partial", partial)
                           .scalar("rows", rows)
                           .scalar("cols", cols));
  partial = part.get<uint32_t>("partial");
  std::vector<uint32_t> index(std::max<uint32_t>(1, rows), 0xDEADBEEFu);
  Outputs merged = r.run(Call("rowops", "argmax_merge")
                             .buffer("partial", partial)
                             .buffer("index", index)
                             .scalar("rows", rows)
                             .scalar("cols", cols));
  return {partial, merged.get<uint32_t>("index")};
}

// Each chunk's pair (the chunk's first maximum and its key) and each row's index, exactly.
void checkSplit(const Split& got, const std::vector<float>& x, uint32_t rows, uint32_t cols, const std::string& what) {
  uint32_t chunks = (cols + kArgmaxChunk - 1) / kArgmaxChunk;
  for (uint32_t row = 0; row < rows; ++row) {
    const float* xr = &x[size_t(row) * cols];
    for (uint32_t c = 0; c < chunks; ++c) {
      uint32_t begin = c * kArgmaxChunk, want = begin + refArgmax(xr + begin, std::min(cols - begin, kArgmaxChunk));
      const uint32_t* pair = &got.partial[(size_t(row) * chunks + c) * 2];
      CHECK_MESSAGE((pair[0] == refKey(xr[want]) && pair[1] == want),
                    what << " row " << row << " chunk " << c << ": (" << pair[0] << ", " << pair[1] << ") want ("
                         << refKey(xr[want]) << ", " << want << ")");
    }
    CHECK_MESSAGE(got.index[row] == refArgmax(xr, cols), what << " row " << row);
  }
}

}  // namespace

// Rows with planted specials, placed in different chunks where the row has several.
LIBRARY_TEST("argmax_partial + argmax_merge across chunks", argmaxSplit) {
  std::mt19937 rng(seed());
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (Dtype d : kDtypes) {
    for (uint32_t cols : {1u, 33u, 4096u, 4097u, 10000u, 3 * kArgmaxChunk + 5}) {
      const uint32_t rows = 9;  // 8 special rows and one random: argmax_merge's second block has one row
      std::vector<float> x = uniform(rng, size_t(rows) * cols, -4.0f, 4.0f);
      auto rowOf = [&](uint32_t r) { return x.begin() + size_t(r) * cols; };
      // An early position (first chunk) and a late one (last chunk, after the early one).
      std::uniform_int_distribution<uint32_t> early(0, std::min(cols, kArgmaxChunk) - 1);
      uint32_t lastStart = (cols - 1) / kArgmaxChunk * kArgmaxChunk;
      auto late = [&] { return std::uniform_int_distribution<uint32_t>(lastStart, cols - 1)(rng); };
      // 0: the maximum in two chunks (the first must win); 1: +inf early, NaN late; 2: all -inf;
      // 3: NaNs in two chunks; 4: -0 early, +0 late, among negatives; 5: +0 early, -0 late;
      // 6: the maximum at the last element; 7: a negative NaN late among numbers; 8: random.
      rowOf(0)[late()] = 9.0f;
      rowOf(0)[early(rng)] = 9.0f;
      rowOf(1)[early(rng)] = inf;
      rowOf(1)[late()] = nan;
      std::fill(rowOf(2), rowOf(3), -inf);
      rowOf(3)[late()] = nan;
      rowOf(3)[early(rng)] = nan;
      std::fill(rowOf(4), rowOf(6), -1.0f);
      rowOf(4)[late()] = 0.0f;
      rowOf(4)[early(rng)] = -0.0f;
      rowOf(5)[late()] = -0.0f;
      rowOf(5)[early(rng)] = 0.0f;
      rowOf(6)[cols - 1] = 5.0f;
      rowOf(7)[late()] = -nan;
      x = roundTo(d, x);
      std::string what = std::string(dtypeName(d)) + " cols=" + std::to_string(cols) + " (seed " + std::to_string(seed()) + ")";
      checkSplit(runSplit(r, d, x, rows, cols), x, rows, cols, what);
      // Shifted x takes the scalar path on the GPU (the interpreter ignores the shift).
      if (r.honoursMisalign())
        checkSplit(runSplit(r, d, x, rows, cols, uint32_t(dtypeBytes(d))), x, rows, cols, what + " misaligned");
    }
  }
}

LIBRARY_TEST("argmax_partial + argmax_merge empty", argmaxSplitEmpty) {
  const std::vector<float> x(16, 1.0f);
  for (Dtype d : kDtypes) {
    // cols = 0 and rows = 0 launch nothing: index keeps its contents.
    CHECK(runSplit(r, d, x, 3, 0).index == std::vector<uint32_t>(3, 0xDEADBEEFu));
    CHECK(runSplit(r, d, x, 0, 5).index == std::vector<uint32_t>(1, 0xDEADBEEFu));
  }
}

// A 128k vocabulary at decode batch sizes (the case the pair is for), with the maximum planted
// in one of the last chunks and a tie later still.
LIBRARY_GPU_TEST("argmax_partial + argmax_merge vocabulary rows", argmaxSplitVocab) {
  std::mt19937 rng(seed());
  const uint32_t cols = 128256;
  // Vocabulary-long rows are the point; on the simulator fewer of them.
  const std::vector<uint32_t> rowCounts = simulatedGpu() ? std::vector<uint32_t>{1, 4} : std::vector<uint32_t>{1, 4, 33};
  for (Dtype d : kDtypes)
    for (uint32_t rows : rowCounts) {
      std::vector<float> x = roundTo(d, uniform(rng, size_t(rows) * cols, -8.0f, 8.0f));
      for (uint32_t row = 0; row < rows; ++row) {
        x[size_t(row) * cols + cols - 2000 - row] = 20.0f;
        x[size_t(row) * cols + cols - 1] = 20.0f;
      }
      std::string what = std::string(dtypeName(d)) + " rows=" + std::to_string(rows) + " (seed " + std::to_string(seed()) + ")";
      checkSplit(runSplit(r, d, x, rows, cols), x, rows, cols, what);
      checkSplit(runSplit(r, d, x, rows, cols, uint32_t(dtypeBytes(d))), x, rows, cols, what + " misaligned");
    }
}

// ---- sampling (the sample option of argmax and argmax_partial) ------------------------------

namespace {

// Per-row temperatures and seeds (the per_row kernels, which all take a cutoff).
struct PerRow {
  std::vector<float> temperature;
  std::vector<uint32_t> seed;
};

// The sample kernel's index per row: one block per row (argmax_<d>_sample), or the f32 pair
// (argmax_partial_f32_sample, then argmax_merge); with `cut`, their cutoff kernels
// (..._sample_cutoff) given those thresholds; with `perRow` (and cut), the per_row ones
// (..._sample_cutoff_per_row), t and seedArg unused.
std::vector<uint32_t> runSample(Runner& r, Dtype d, const std::vector<float>& x, uint32_t rows, uint32_t cols, float t,
                                uint32_t seedArg, bool split = false, const std::vector<float>* cut = nullptr,
                                const PerRow* perRow = nullptr) {
  const std::string suffix = cut ? (perRow ? "_sample_cutoff_per_row" : "_sample_cutoff") : "_sample";
  std::vector<uint32_t> index(rows, 0xDEADBEEFu);
  auto withCut = [&](Call& c) -> Call& {
    if (perRow) c.buffer("temperature", perRow->temperature).buffer("seed", perRow->seed);
    else c.scalar("temperature", t).scalar("seed", seedArg);
    if (cut) c.buffer("cutoff", *cut);
    return c;
  };
  if (!split)
    return r.run(withCut(Call("rowops", kernelName("argmax", d) + suffix)
                             .buffer("x", encode(d, x))
                             .buffer("index", index)
                             .scalar("rows", rows)
                             .scalar("cols", cols)))
        .get<uint32_t>("index");
  const uint32_t chunks = (cols + kArgmaxChunk - 1) / kArgmaxChunk;
  Outputs part = r.run(withCut(Call("rowops", "argmax_partial_f32" + suffix)
                                   .buffer("x", x)
                                   .buffer("partial", std::vector<uint32_t>(size_t(rows) * chunks * 2, 0xDEADBEEFu))
                                   .scalar("rows", rows)
                                   .scalar("cols", cols)));
  return r.run(Call("rowops", "argmax_merge")
                   .buffer("partial", part.get<uint32_t>("partial"))
                   .buffer("index", index)
                   .scalar("rows", rows)
                   .scalar("cols", cols))
      .get<uint32_t>("index");
}

}  // namespace

// A temperature of 0 (or below, or NaN) is the argmax, NaN and ties included; the pair samples
// exactly what one block does (the noise hashes the element's index in the row, whichever chunk
// reads it), on rows of one and of several chunks.
LIBRARY_TEST("argmax sample: temperature 0 is the argmax, the pair samples as one block", argmaxSampleExact) {
  std::mt19937 rng(seed());
  for (uint32_t cols : {7u, 1000u, 3 * kArgmaxChunk + 5}) {
    const uint32_t rows = 4;
    std::vector<float> x = uniform(rng, size_t(rows) * cols, -4.0f, 4.0f);
    x[size_t(1) * cols + cols / 2] = std::numeric_limits<float>::quiet_NaN();
    x[size_t(2) * cols + cols - 1] = 9.0f;
    x[size_t(2) * cols] = 9.0f;
    for (float t : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN()}) {
      std::vector<uint32_t> got = runSample(r, Dtype::F32, x, rows, cols, t, 7);
      for (uint32_t row = 0; row < rows; ++row)
        CHECK_MESSAGE(got[row] == refArgmax(&x[size_t(row) * cols], cols), "cols " << cols << " t " << t << " row " << row);
    }
    for (float t : {0.5f, 3.0f})
      CHECK_MESSAGE(runSample(r, Dtype::F32, x, rows, cols, t, 99, true) == runSample(r, Dtype::F32, x, rows, cols, t, 99),
                    "cols " << cols << " t " << t << " (seed " << seed() << ")");
  }
}

// The samples of many rows with the same logits follow softmax(x / T): a chi-square test of the
// counts at a significance of about 1e-6, on the scalar path (6 columns), the vector path (8 f32
// columns) and bf16; another seed gives other samples.
LIBRARY_TEST("argmax sample draws from softmax(x / temperature)", argmaxSampleDistribution) {
  const uint32_t rows = 1000;
  struct Case {
    Dtype d;
    std::vector<float> logits;
    float t;
  };
  const Case cases[] = {{Dtype::F32, {1.0f, 0.5f, 0.0f, -0.5f, 2.0f, 1.5f}, 0.5f},
                        {Dtype::F32, {0.0f, 0.25f, -1.0f, 0.5f, 0.75f, -0.25f, 1.0f, 0.125f}, 0.5f},
                        {Dtype::BF16, {3.0f, 2.0f, 1.0f, 0.0f, -1.0f, 2.5f, 1.5f, 0.5f}, 1.0f}};
  for (const Case& c : cases) {
    const uint32_t cols = uint32_t(c.logits.size());
    std::vector<float> x;
    for (uint32_t row = 0; row < rows; ++row) x.insert(x.end(), c.logits.begin(), c.logits.end());
    const uint32_t seedArg = uint32_t(seed());
    std::vector<uint32_t> got = runSample(r, c.d, x, rows, cols, c.t, seedArg);
    std::vector<double> count(cols, 0.0), p(cols);
    double sum = 0, chi2 = 0;
    for (uint32_t i = 0; i < cols; ++i) sum += p[i] = std::exp(double(c.logits[i]) / c.t);
    for (uint32_t i : got)
      if (i < cols) count[i] += 1;
    for (uint32_t i = 0; i < cols; ++i) chi2 += std::pow(count[i] - rows * p[i] / sum, 2) / (rows * p[i] / sum);
    // The 1 - 1e-6 quantiles of chi-square with 5 and 7 degrees of freedom: 35.9 and 39.4.
    CHECK_MESSAGE(chi2 < (cols == 6 ? 35.9 : 39.4), dtypeName(c.d) << " cols " << cols << ": chi-square " << chi2
                                                                    << " (seed " << seed() << ")");
    CHECK(std::all_of(got.begin(), got.end(), [&](uint32_t i) { return i < cols; }));
    CHECK_MESSAGE(runSample(r, c.d, x, rows, cols, c.t, seedArg + 1) != got, "another seed, the same samples");
  }
}

// ---- sample_cutoff, and argmax's sample with cutoff -----------------------------------------

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

struct Filters {
  float t;
  uint32_t k;
  float p, minP;
};

// sample_cutoff_split's cutoff: `call` (every argument but work and step) launched once a step,
// work carried from one launch to the next; it starts as garbage, which step 0 must not read.
constexpr uint32_t kSplitChunk = 1024, kSplitSteps = 10, kSplitWorkFixed = 2072;
std::vector<float> runCutoffSplit(Runner& r, const Call& call, uint32_t rows, uint32_t cols) {
  const uint32_t chunks = (cols + kSplitChunk - 1) / kSplitChunk;
  std::vector<uint32_t> work(size_t(rows) * (kSplitWorkFixed + chunks) * 2, 0xA5A5A5A5u);
  std::vector<float> cutoff(rows, 12345.0f);
  for (uint32_t step = 0; step < kSplitSteps; ++step) {
    Outputs out = r.run(Call(call).buffer("work", work).buffer("cutoff", cutoff).scalar("step", step));
    work = out.get<uint32_t>("work");
    std::vector<float> now = out.get<float>("cutoff");
    if (step + 1 < kSplitSteps)
      CHECK_MESSAGE(std::memcmp(now.data(), cutoff.data(), 4 * rows) == 0, "step " << step << " wrote cutoff");
    cutoff = now;
  }
  return cutoff;
}

// sample_cutoff's thresholds, which sample_cutoff_split's must equal bit for bit on the first
// five rows (unless `split` is false: the split kernel's ten launches cost the interpreter
// several times one's).
std::vector<float> runCutoff(Runner& r, Dtype d, const std::vector<float>& x, uint32_t rows, uint32_t cols, Filters f,
                             uint32_t misalign = 0, bool split = true) {
  auto args = [&](Call c, uint32_t n) {
    return c.buffer("x", encode(d, std::vector<float>(x.begin(), x.begin() + ptrdiff_t(n) * cols)), misalign)
        .scalar("rows", n)
        .scalar("cols", cols)
        .scalar("temperature", f.t)
        .scalar("top_k", f.k)
        .scalar("top_p", f.p)
        .scalar("min_p", f.minP);
  };
  std::vector<float> got =
      r.run(args(Call("rowops", kernelName("sample_cutoff", d)), rows).buffer("cutoff", std::vector<float>(rows, 12345.0f)))
          .get<float>("cutoff");
  if (!split) return got;
  const uint32_t some = std::min(rows, 5u);
  std::vector<float> other = runCutoffSplit(r, args(Call("rowops", kernelName("sample_cutoff_split", d)), some), some, cols);
  CHECK_MESSAGE(std::memcmp(got.data(), other.data(), 4 * some) == 0,
                "sample_cutoff_split differs: " << dtypeName(d) << " cols " << cols << " t " << f.t << " k " << f.k
                                                << " p " << f.p << " min_p " << f.minP << " misalign " << misalign);
  return got;
}

// sample_cutoff's threshold in double, from the definition: the k-th largest value; the value at
// which the probabilities (renormalized over what top_k kept), summed from the largest, reach
// top_p; max + T ln(min_p). `ambiguous` marks a row where a running sum or a value lies so close
// to a threshold that the kernel's f32 arithmetic (ex2.approx, lg2.approx, the rounding of the
// target) may decide either way.
struct RefCut {
  double cut;
  bool ambiguous = false;
};
RefCut refCutoff(const float* x, uint32_t n, Filters f) {
  if (!(f.t > 0)) return {-kInf};
  const float mx = x[refArgmax(x, n)];
  if (!std::isfinite(mx)) return {mx};
  std::vector<float> v(x, x + n);
  std::sort(v.begin(), v.end(), std::greater<>());
  RefCut out{-kInf};
  const double vk = f.k > 0 && f.k < n ? v[f.k - 1] : -kInf;
  out.cut = vk;
  auto weight = [&](float y) { return std::exp((double(y) - mx) / f.t); };
  if (f.p < 1.0f) {
    double total = 0;
    for (float y : v)
      if (y >= vk) total += weight(y);
    const double target = std::max(0.0, double(f.p)) * total, tol = 1e-6 * total;
    double cum = 0;
    for (size_t i = 0; i < n && v[i] >= vk; ++i) {
      double before = cum;
      cum += weight(v[i]);
      if (cum >= target) {
        bool tiedBelow = i + 1 < n && v[i + 1] == v[i], tiedAbove = i > 0 && v[i - 1] == v[i];
        out.ambiguous = f.p > 0 && ((!tiedBelow && std::abs(cum - target) < tol) || (!tiedAbove && std::abs(before - target) < tol));
        out.cut = std::max(out.cut, double(v[i]));
        break;
      }
    }
  }
  if (f.minP > 0) {
    const double tau = mx + f.t * std::log(std::min(1.0, double(f.minP)));
    for (float y : v) out.ambiguous |= y != mx && std::abs(y - tau) < 1e-5 * (1 + std::abs(tau));
    out.cut = std::max(out.cut, tau);
  }
  return out;
}

// Rows of logits: random ones at several spreads, and rows with masked (-inf) entries.
std::vector<float> logitRows(std::mt19937& rng, uint32_t rows, uint32_t cols) {
  std::vector<float> x;
  for (uint32_t row = 0; row < rows; ++row) {
    float spread = 1.0f + float(row % 4) * 3.0f;
    std::vector<float> v = uniform(rng, cols, -spread, spread);
    if (row % 5 == 4)
      for (uint32_t j = 0; j < cols; j += 3) v[j] = -kInf;
    x.insert(x.end(), v.begin(), v.end());
  }
  return x;
}

}  // namespace

// Every combination of the three filters (each off, mild, strict, at its edges and out of range)
// on random rows: the kernel keeps exactly the elements the definition keeps (rows too close to a
// threshold for f32 to decide are skipped, and there are few of them); top_k alone gives the
// k-th largest value bit for bit; bf16 rows are full of ties, all kept; the scalar path too.
LIBRARY_TEST("sample_cutoff keeps what top-k, top-p and min-p keep", sampleCutoffFilters) {
  std::mt19937 rng(seed());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  unsigned checked = 0, skipped = 0;
  for (Dtype d : {Dtype::F32, Dtype::BF16})
    for (uint32_t cols : {1u, 7u, 64u, 1000u, 4099u}) {
      const uint32_t rows = 10;
      std::vector<float> x = roundTo(d, logitRows(rng, rows, cols));
      std::vector<Filters> filters = {{1.0f, 0, 1.0f, 0.0f},         {0.7f, 5, 1.0f, 0.0f},  {1.0f, cols - 1, 1.0f, 0.0f},
                                      {1.0f, cols, 1.0f, 0.0f},      {1.0f, 0, 0.9f, 0.0f},  {2.0f, 0, 0.5f, 0.0f},
                                      {1.0f, 0, 0.0f, 0.0f},         {1.0f, 0, -1.0f, 0.0f}, {1.0f, 0, nan, 0.0f},
                                      {0.5f, 0, 1.0f, 0.1f},         {1.0f, 0, 1.0f, 1.0f},  {1.0f, 0, 1.0f, 3.0f},
                                      {1.0f, 0, 1.0f, nan},          {1.0f, 40, 0.8f, 0.0f}, {1.5f, 20, 0.95f, 0.05f},
                                      {1.0f, 3, 0.99f, 0.3f}};
      for (size_t i = 0; i < filters.size(); ++i)
        for (uint32_t misalign : {0u, uint32_t(dtypeBytes(d))}) {
          const Filters& f = filters[i];
          if (misalign && cols < 1000) continue;
          // The split kernel over one chunk (7), and five with a short last one (4099, misaligned
          // in f32: the scalar path), under no filter, each alone, and together.
          const bool someFilters = i == 0 || i == 1 || i == 4 || i == 9 || i == 13 || i == 14 || i == 15;
          const bool split = someFilters && (cols == 7 || (cols == 4099 && (misalign == 0 || d == Dtype::F32)));
          std::vector<float> got = runCutoff(r, d, x, rows, cols, f, misalign, split);
          for (uint32_t row = 0; row < rows; ++row) {
            const float* xr = &x[size_t(row) * cols];
            RefCut want = refCutoff(xr, cols, f);
            if (want.ambiguous) {
              ++skipped;
              continue;
            }
            ++checked;
            uint32_t differ = 0;
            for (uint32_t j = 0; j < cols; ++j) differ += (xr[j] >= got[row]) != (xr[j] >= want.cut);
            CHECK_MESSAGE(differ == 0, dtypeName(d) << " cols " << cols << " row " << row << " t " << f.t << " k " << f.k
                                                    << " p " << f.p << " min_p " << f.minP << ": cutoff " << got[row]
                                                    << ", want " << want.cut << ", " << differ << " elements differ (seed "
                                                    << seed() << ")");
            if (f.k > 0 && f.k < cols && !(f.p < 1.0f) && !(f.minP > 0)) {
              std::vector<float> v(xr, xr + cols);
              std::nth_element(v.begin(), v.begin() + (f.k - 1), v.end(), std::greater<>());
              CHECK_MESSAGE(got[row] == v[f.k - 1], "top_k alone gives the k-th largest value: cols " << cols << " row " << row);
            }
          }
        }
    }
  CHECK_MESSAGE(skipped * 20 < checked, skipped << " of " << checked + skipped << " rows too close to call");
}

// Rows without a finite maximum, temperatures that do not sample, empty rows.
LIBRARY_TEST("sample_cutoff: specials", sampleCutoffSpecials) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const uint32_t cols = 37;
  std::vector<float> x(size_t(4) * cols, 0.25f);
  x[3] = 2.0f;
  x[cols + 5] = nan;                                   // row 1: a NaN
  x[2 * cols + 9] = kInf;                              // row 2: +inf
  std::fill(x.begin() + 3 * cols, x.end(), -kInf);     // row 3: all -inf
  const Filters strict{1.0f, 2, 0.5f, 0.5f};
  std::vector<float> got = runCutoff(r, Dtype::F32, x, 4, cols, strict);
  // top_k and top_p keep the tied 0.25s; min_p's threshold 2 + ln 0.5 only the maximum.
  CHECK(got[0] == doctest::Approx(2.0 + std::log(0.5)).epsilon(1e-6));
  CHECK(std::isnan(got[1]));
  CHECK(got[2] == kInf);
  CHECK(got[3] == -kInf);
  for (float t : {0.0f, -1.0f, nan}) {
    got = runCutoff(r, Dtype::F32, x, 4, cols, {t, 2, 0.5f, 0.5f});
    CHECK_MESSAGE(std::all_of(got.begin(), got.end(), [](float c) { return c == -kInf; }), "temperature " << t);
  }
  // Filters that exclude nothing: -inf.
  got = runCutoff(r, Dtype::F32, x, 1, cols, {1.0f, 0, 1.0f, 0.0f});
  CHECK(got[0] == -kInf);
  // cols = 0 writes nothing.
  got = runCutoff(r, Dtype::F32, {0.0f}, 3, 0, strict);
  CHECK(std::all_of(got.begin(), got.end(), [](float c) { return c == 12345.0f; }));
}


// The sampler with a cutoff never draws below it, the pair draws what one block does, and the
// draws follow softmax(x / T) renormalized over what the filters keep (a chi-square test at a
// significance of about 1e-6); temperature 0 is still the argmax.
LIBRARY_TEST("argmax sample with cutoff draws from the filtered distribution", argmaxSampleCutoff) {
  std::mt19937 rng(seed());
  {
    const uint32_t rows = 12, cols = 2 * kArgmaxChunk + 77;
    std::vector<float> x = logitRows(rng, rows, cols);
    const Filters f{0.8f, 30, 0.9f, 0.02f};
    std::vector<float> cut = runCutoff(r, Dtype::F32, x, rows, cols, f);
    std::vector<uint32_t> one = runSample(r, Dtype::F32, x, rows, cols, f.t, 5, false, &cut);
    CHECK(runSample(r, Dtype::F32, x, rows, cols, f.t, 5, true, &cut) == one);
    for (uint32_t row = 0; row < rows; ++row)
      CHECK_MESSAGE((one[row] < cols && x[size_t(row) * cols + one[row]] >= cut[row]), "row " << row);
    std::vector<uint32_t> argmax = runSample(r, Dtype::F32, x, rows, cols, 0.0f, 5, false, &cut);
    for (uint32_t row = 0; row < rows; ++row) CHECK(argmax[row] == refArgmax(&x[size_t(row) * cols], cols));
  }
  {
    // A cutoff is exact: values at it are drawn, those one ulp below never.
    const uint32_t rows = 200, cols = 2 * kArgmaxChunk;
    std::vector<float> x(size_t(rows) * cols, 1.0f), cut(rows, 1.0f);
    for (size_t i = 1; i < x.size(); i += 2) x[i] = std::nextafter(1.0f, 0.0f);
    for (bool split : {false, true}) {
      std::vector<uint32_t> got = runSample(r, Dtype::F32, x, rows, cols, 1.0f, 11, split, &cut);
      CHECK_MESSAGE(std::all_of(got.begin(), got.end(), [&](uint32_t i) { return i < cols && i % 2 == 0; }), "split " << split);
    }
  }
  const uint32_t rows = 1000;
  const std::vector<float> logits = {2.0f, 1.5f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, 1.75f, -3.0f, 0.25f};
  const uint32_t cols = uint32_t(logits.size());
  std::vector<float> x;
  for (uint32_t row = 0; row < rows; ++row) x.insert(x.end(), logits.begin(), logits.end());
  const Filters f{1.0f, 7, 0.9f, 0.1f};  // top_k 7 drops -0.5, -1 and -3; top_p 0.25 and 0; min_p (2 + ln 0.1) nothing more
  std::vector<float> cut = runCutoff(r, Dtype::F32, x, rows, cols, f, 0, false);
  CHECK(cut[0] == 0.5f);
  std::vector<uint32_t> got = runSample(r, Dtype::F32, x, rows, cols, f.t, uint32_t(seed()), false, &cut);
  std::vector<double> count(cols, 0.0), p(cols, 0.0);
  double sum = 0, chi2 = 0;
  for (uint32_t i = 0; i < cols; ++i)
    if (logits[i] >= 0.5f) sum += p[i] = std::exp(double(logits[i]));
  for (uint32_t i : got) count[std::min(i, cols - 1)] += 1;
  for (uint32_t i = 0; i < cols; ++i) {
    if (p[i] == 0) {
      CHECK_MESSAGE(count[i] == 0, "drew excluded element " << i);
      continue;
    }
    chi2 += std::pow(count[i] - rows * p[i] / sum, 2) / (rows * p[i] / sum);
  }
  // The 1 - 1e-6 quantile of chi-square with 4 degrees of freedom: 33.4.
  CHECK_MESSAGE(chi2 < 33.4, "chi-square " << chi2 << " (seed " << seed() << ")");
}

// ---- logit_penalties --------------------------------------------------------------------------

namespace {

struct Penalty {
  float repetition, frequency, presence;
};

// The penalties on the f32 values of the logits, from the definition: for every distinct id
// below cols among the row's n tokens, the repetition penalty, then count * frequency + presence
// (rounded once) subtracted.
std::vector<float> refPenalties(std::vector<float> x, const std::vector<uint32_t>& tokens, uint32_t rows, uint32_t cols,
                                uint32_t n, Penalty p) {
  for (uint32_t row = 0; row < rows; ++row) {
    std::map<uint32_t, uint32_t> count;
    for (uint32_t i = 0; i < n; ++i)
      if (uint32_t t = tokens[size_t(row) * n + i]; t < cols) ++count[t];
    for (auto [t, c] : count) {
      float& v = x[size_t(row) * cols + t];
      v = v > 0 ? v / p.repetition : v * p.repetition;
      v -= std::fma(float(c), p.frequency, p.presence);
    }
  }
  return x;
}

}  // namespace

// Histories with many repeats (ids from a narrow range, so that the hash table's probes collide),
// padding ids at and past cols, empty histories; each logit is exact (f32 division and fma, then
// the storage type's rounding), every other element's bits untouched. The tables in shared memory
// and in global memory (table = "global": a workspace of garbage the kernel must clear, and a
// history of 20000 ids, past what shared memory holds on any GPU).
LIBRARY_TEST("logit_penalties: repetition, frequency and presence", logitPenalties) {
  std::mt19937 rng(seed());
  const Penalty penalties[] = {{1.3f, 0.25f, 0.5f}, {0.8f, 0.0f, 0.0f}, {1.0f, -0.1f, 1.0f}, {1.0f, 0.0f, 0.0f}};
  for (bool global : {false, true})
  for (Dtype d : kDtypes)
    for (uint32_t cols : {7u, 1000u, 32000u})
      for (uint32_t n : {0u, 1u, 17u, 300u, 2000u, 5000u, 20000u}) {
        if (n == 5000 && (d != Dtype::F32 || cols != 32000)) continue;  // a table past 48 KiB once
        if (n == 20000 && (!global || d != Dtype::F32 || cols != 32000)) continue;
        const uint32_t rows = 3;
        std::vector<float> x = roundTo(d, uniform(rng, size_t(rows) * cols, -3.0f, 3.0f));
        x[0] = 0.0f;
        if (cols > 1) x[1] = -0.0f;
        std::vector<uint32_t> tokens(size_t(rows) * n);
        const uint32_t range = std::max(2u, std::min(cols, n / 3 + 2));  // repeats in every row
        std::uniform_int_distribution<uint32_t> id(0, range - 1), pad(0, 9);
        for (size_t i = 0; i < tokens.size(); ++i) {
          uint32_t k = pad(rng);
          tokens[i] = k == 0 ? 0xFFFFFFFFu : k == 1 ? cols : id(rng);
        }
        if (n > 0) tokens[0] = 0, tokens[size_t(n) * (rows - 1)] = cols - 1;
        if (n == 17 && cols == 32000) {
          // Row 1: ids whose home slot (the kernel's hash, t * 0x9E3779B1 mod 2^32 mod 2n + 1) is
          // the table's last, so that their probes wrap around to slot 0.
          const uint32_t slots = 2 * n + 1;
          for (uint32_t t = 0, k = 0; t < cols && k < n; ++t)
            if (t * 0x9E3779B1u % slots == slots - 1) tokens[n + k++] = t;
        }
        const Penalty& p = penalties[(cols + n) % std::size(penalties)];
        Call call("rowops", kernelName(global ? "logit_penalties_global" : "logit_penalties", d));
        call.buffer("logits", encode(d, x)).buffer("tokens", tokens);
        if (global) call.buffer("table", std::vector<uint32_t>(size_t(rows) * (2 * n + 1) * 2, 0x5A5A5A5Au));
        call.scalar("rows", rows)
            .scalar("cols", cols)
            .scalar("n", n)
            .scalar("repetition", p.repetition)
            .scalar("frequency", p.frequency)
            .scalar("presence", p.presence);
        std::vector<std::byte> got = r.run(call).get<std::byte>("logits");
        std::vector<std::byte> want = encode(d, refPenalties(x, tokens, rows, cols, n, p));
        size_t differ = 0, first = 0;
        for (size_t i = 0; i < got.size(); ++i)
          if (got[i] != want[i] && differ++ == 0) first = i / dtypeBytes(d);
        CHECK_MESSAGE(differ == 0, (global ? "global table, " : "") << dtypeName(d) << " cols " << cols << " n " << n << ": " << differ
                                               << " bytes differ, the first in element " << first << " (seed " << seed()
                                               << ")");
      }
}

// ---- token_bitmask ------------------------------------------------------------------------------

// Masks of every kind of byte (all allowed, none, mixed) over rows whose lengths are not
// multiples of 8 or 32 (the tails, and rows that are not 16-byte aligned after the first, which
// take the element path) and whose length is: every logit whose bit is 0 is -inf, the others keep
// their bits (NaN and -0 among them).
LIBRARY_TEST("token_bitmask: logits whose bit is 0 become -inf, the others are untouched", tokenBitmask) {
  std::mt19937 rng(seed());
  for (Dtype d : kDtypes)
    for (uint32_t cols : {1u, 7u, 8u, 31u, 32u, 33u, 1000u, 2048u, 4101u, 32000u}) {
      const uint32_t rows = 3, words = (cols + 31) / 32;
      std::vector<float> x = roundTo(d, uniform(rng, size_t(rows) * cols, -3.0f, 3.0f));
      x[0] = std::numeric_limits<float>::quiet_NaN();
      if (cols > 1) x[1] = -0.0f;
      std::vector<uint32_t> mask(size_t(rows) * words);
      std::uniform_int_distribution<int> kind(0, 3);
      for (uint32_t& w : mask)
        for (unsigned b = 0; b < 4; ++b) {
          const int k = kind(rng);  // a byte of zeros, of ones, or random bits
          const uint32_t byte = k == 0 ? 0u : k == 1 ? 0xFFu : static_cast<uint32_t>(rng() & 0xFFu);
          w |= byte << (8 * b);
        }
      mask[0] |= 1u;  // element 0 (the NaN) allowed, element 1 (-0) masked
      mask[0] &= ~2u;
      std::vector<std::byte> before = encode(d, x);
      std::vector<std::byte> got = r.run(Call("rowops", kernelName("token_bitmask", d))
                                             .buffer("logits", before)
                                             .buffer("mask", mask)
                                             .scalar("rows", rows)
                                             .scalar("cols", cols))
                                       .get<std::byte>("logits");
      // The input's own bytes where allowed (NaN payloads too), -inf's elsewhere.
      std::vector<std::byte> wantBytes = before;
      const std::vector<std::byte> inf = encode(d, {-std::numeric_limits<float>::infinity()});
      const size_t bytes = dtypeBytes(d);
      for (uint32_t row = 0; row < rows; ++row)
        for (uint32_t j = 0; j < cols; ++j)
          if (!(mask[size_t(row) * words + j / 32] >> (j % 32) & 1u))
            std::copy_n(inf.begin(), bytes, wantBytes.begin() + (size_t(row) * cols + j) * bytes);
      size_t differ = 0, firstAt = 0;
      for (size_t i = 0; i < got.size(); ++i)
        if (got[i] != wantBytes[i] && differ++ == 0) firstAt = i / bytes;
      CHECK_MESSAGE(differ == 0, dtypeName(d) << " cols " << cols << ": " << differ << " bytes differ, the first in element "
                                             << firstAt << " (seed " << seed() << ")");
    }
}

// indices: block row y masks row indices[y] of the logits and of the mask; an index at or past
// batch is skipped, rows not listed keep their bits.
LIBRARY_TEST("token_bitmask indices: only the listed rows", tokenBitmaskIndices) {
  std::mt19937 rng(seed());
  for (uint32_t cols : {33u, 4101u}) {
    const uint32_t batch = 5, words = (cols + 31) / 32;
    const std::vector<uint32_t> indices = {3, 0, 7, 4};
    std::vector<float> x = roundTo(Dtype::BF16, uniform(rng, size_t(batch) * cols, -3.0f, 3.0f));
    std::vector<uint32_t> mask(size_t(batch) * words);
    for (uint32_t& w : mask) w = static_cast<uint32_t>(rng()) & static_cast<uint32_t>(rng());  // about 3 in 4 masked
    const std::vector<std::byte> before = encode(Dtype::BF16, x);
    std::vector<std::byte> got = r.run(Call("rowops", "token_bitmask_bf16_indices")
                                           .buffer("logits", before)
                                           .buffer("mask", mask)
                                           .buffer("indices", indices)
                                           .scalar("rows", uint32_t(indices.size()))
                                           .scalar("cols", cols)
                                           .scalar("batch", batch))
                                     .get<std::byte>("logits");
    std::vector<float> want = x;
    for (uint32_t row : indices)
      for (uint32_t j = 0; row < batch && j < cols; ++j)
        if (!(mask[size_t(row) * words + j / 32] >> (j % 32) & 1u)) want[size_t(row) * cols + j] = -kInf;
    CHECK_MESSAGE(got == encode(Dtype::BF16, want), "cols " << cols << " (seed " << seed() << ")");
  }
}

// ---- logit_bias ---------------------------------------------------------------------------------

// Rows of distinct ids in random order, ids at and past cols among them (padding), biases in
// [-100, 100] and -inf; n = 0. Each biased logit is x + b in f32 rounded once to the storage
// type, every other element's bits untouched.
LIBRARY_TEST("logit_bias: each row's own token biases", logitBias) {
  std::mt19937 rng(seed());
  for (Dtype d : kDtypes)
    for (uint32_t cols : {7u, 1000u, 32000u})
      for (uint32_t n : {0u, 1u, 9u, 300u}) {
        const uint32_t rows = 3, count = std::min(n, cols + 5);
        std::vector<float> x = roundTo(d, uniform(rng, size_t(rows) * cols, -3.0f, 3.0f));
        std::vector<uint32_t> ids;
        std::vector<float> bias = uniform(rng, size_t(rows) * count, -100.0f, 100.0f);
        for (uint32_t row = 0; row < rows; ++row) {
          std::vector<uint32_t> all(cols + 5);
          std::iota(all.begin(), all.end(), 0u);
          std::shuffle(all.begin(), all.end(), rng);
          ids.insert(ids.end(), all.begin(), all.begin() + count);
        }
        if (!bias.empty()) bias[0] = -kInf;
        std::vector<float> want = x;
        for (uint32_t row = 0; row < rows; ++row)
          for (uint32_t i = 0; i < count; ++i) {
            const uint32_t id = ids[size_t(row) * count + i];
            if (id < cols) want[size_t(row) * cols + id] = roundTo(d, {x[size_t(row) * cols + id] + bias[size_t(row) * count + i]})[0];
          }
        std::vector<std::byte> got = r.run(Call("rowops", kernelName("logit_bias", d))
                                               .buffer("logits", encode(d, x))
                                               .buffer("ids", ids)
                                               .buffer("bias", bias)
                                               .scalar("rows", rows)
                                               .scalar("cols", cols)
                                               .scalar("n", count))
                                         .get<std::byte>("logits");
        CHECK_MESSAGE(got == encode(d, want), dtypeName(d) << " cols " << cols << " n " << count << " (seed " << seed() << ")");
      }
}

// ---- per_row: a batch whose rows sample differently -----------------------------------------

// Per-row temperatures, seeds, filters and penalties (per_row = true). A row's draw depends on
// its own seed, temperature and logits only, not on its place in the batch (the rows permuted,
// the same draws), and the split pair draws what one block does; temperature 0 rows are the
// argmax beside sampling ones; rows of one seed and temperature over identical logits follow
// softmax(x / T) (chi-square at about 1e-6); sample_cutoff and logit_penalties give row by row
// exactly what their scalar kernels give for that row's parameters.
LIBRARY_TEST("per_row sampling parameters", perRowSampling) {
  std::mt19937 rng(seed());
  const uint32_t cols = kArgmaxChunk + 300;
  {
    const uint32_t rows = 6;
    std::vector<float> x = logitRows(rng, rows, cols), cut(rows, -kInf);
    PerRow pr{{0.7f, 0.0f, 2.0f, 1.0f, -1.0f, 0.3f}, {11, 12, 13, 14, 15, 16}};
    std::vector<uint32_t> one = runSample(r, Dtype::F32, x, rows, cols, 0, 0, false, &cut, &pr);
    CHECK(runSample(r, Dtype::F32, x, rows, cols, 0, 0, true, &cut, &pr) == one);
    CHECK(one[1] == refArgmax(&x[size_t(1) * cols], cols));
    CHECK(one[4] == refArgmax(&x[size_t(4) * cols], cols));
    // The rows in reverse order (logits, temperatures and seeds): the same draws, reversed.
    std::vector<float> xr;
    PerRow rev;
    for (uint32_t row = rows; row-- > 0;) {
      xr.insert(xr.end(), x.begin() + size_t(row) * cols, x.begin() + size_t(row + 1) * cols);
      rev.temperature.push_back(pr.temperature[row]);
      rev.seed.push_back(pr.seed[row]);
    }
    std::vector<uint32_t> back = runSample(r, Dtype::F32, xr, rows, cols, 0, 0, false, &cut, &rev);
    std::reverse(back.begin(), back.end());
    CHECK(back == one);
  }
  {
    // 600 rows of the same logits: the even rows at T = 0.5, the odd ones at T = 2, every row its
    // own seed.
    const std::vector<float> logits = {1.0f, 0.5f, 0.0f, -0.5f, 2.0f, 1.5f};
    const uint32_t rows = 600, n = uint32_t(logits.size());
    std::vector<float> x, cut(rows, -kInf);
    PerRow pr;
    for (uint32_t row = 0; row < rows; ++row) {
      x.insert(x.end(), logits.begin(), logits.end());
      pr.temperature.push_back(row % 2 ? 2.0f : 0.5f);
      pr.seed.push_back(uint32_t(seed()) * 7919u + row);
    }
    std::vector<uint32_t> got = runSample(r, Dtype::F32, x, rows, n, 0, 0, false, &cut, &pr);
    for (unsigned parity = 0; parity < 2; ++parity) {
      const double t = parity ? 2.0 : 0.5;
      std::vector<double> count(n, 0.0), p(n);
      double sum = 0, chi2 = 0;
      for (uint32_t i = 0; i < n; ++i) sum += p[i] = std::exp(logits[i] / t);
      for (uint32_t row = parity; row < rows; row += 2) count[std::min(got[row], n - 1)] += 1;
      for (uint32_t i = 0; i < n; ++i) chi2 += std::pow(count[i] - 300 * p[i] / sum, 2) / (300 * p[i] / sum);
      CHECK_MESSAGE(chi2 < 35.9, "T " << t << ": chi-square " << chi2 << " (seed " << seed() << ")");  // 5 dof, 1 - 1e-6
    }
  }
  {
    const uint32_t rows = 5;
    std::vector<float> x = logitRows(rng, rows, cols);
    // Each filter decides some row: min_p rows 0 and 2, top_k row 1, top_p row 4; row 3 does not sample.
    const Filters f[rows] = {{1.0f, 0, 1.0f, 0.5f}, {0.5f, 7, 1.0f, 0.0f}, {2.0f, 0, 1.0f, 0.2f}, {0.0f, 3, 0.5f, 0.5f},
                             {1.3f, 0, 0.8f, 0.05f}};
    std::vector<float> t, p, mp;
    std::vector<uint32_t> k;
    for (const Filters& g : f) t.push_back(g.t), k.push_back(g.k), p.push_back(g.p), mp.push_back(g.minP);
    auto args = [&](Call c) {
      return c.buffer("x", x)
          .scalar("rows", rows)
          .scalar("cols", cols)
          .buffer("temperature", t)
          .buffer("top_k", k)
          .buffer("top_p", p)
          .buffer("min_p", mp);
    };
    std::vector<float> got =
        r.run(args(Call("rowops", "sample_cutoff_f32_per_row")).buffer("cutoff", std::vector<float>(rows, 12345.0f)))
            .get<float>("cutoff");
    std::vector<float> split = runCutoffSplit(r, args(Call("rowops", "sample_cutoff_split_f32_per_row")), rows, cols);
    for (uint32_t row = 0; row < rows; ++row) {
      const float want = runCutoff(r, Dtype::F32, x, rows, cols, f[row], 0, false)[row];
      CHECK_MESSAGE(std::memcmp(&got[row], &want, 4) == 0, "row " << row << ": " << got[row] << ", want " << want);
      CHECK_MESSAGE(std::memcmp(&split[row], &want, 4) == 0, "split row " << row << ": " << split[row] << ", want " << want);
    }
  }
  {
    const uint32_t rows = 4, n = 50, vocab = 300;
    std::vector<float> x = roundTo(Dtype::BF16, uniform(rng, size_t(rows) * vocab, -3.0f, 3.0f));
    std::vector<uint32_t> tokens(size_t(rows) * n);
    std::uniform_int_distribution<uint32_t> id(0, 40);
    for (uint32_t& tk : tokens) tk = id(rng);
    const Penalty pen[rows] = {{1.3f, 0.25f, 0.5f}, {1.0f, 0.0f, 0.0f}, {0.8f, -0.1f, 1.0f}, {2.0f, 1.0f, 0.0f}};
    std::vector<float> rep, freq, pres;
    for (const Penalty& q : pen) rep.push_back(q.repetition), freq.push_back(q.frequency), pres.push_back(q.presence);
    std::vector<std::byte> got = r.run(Call("rowops", "logit_penalties_bf16_per_row")
                                           .buffer("logits", encode(Dtype::BF16, x))
                                           .buffer("tokens", tokens)
                                           .scalar("rows", rows)
                                           .scalar("cols", vocab)
                                           .scalar("n", n)
                                           .buffer("repetition", rep)
                                           .buffer("frequency", freq)
                                           .buffer("presence", pres))
                                     .get<std::byte>("logits");
    for (uint32_t row = 0; row < rows; ++row) {
      std::vector<std::byte> want = encode(Dtype::BF16, refPenalties(x, tokens, rows, vocab, n, pen[row]));
      CHECK_MESSAGE(std::equal(got.begin() + row * vocab * 2, got.begin() + (row + 1) * vocab * 2, want.begin() + row * vocab * 2),
                    "row " << row);
    }
  }
}

// ---- transpose ------------------------------------------------------------------------------

namespace {

void checkTranspose(Runner& r, Dtype d, uint32_t rows, uint32_t cols, std::mt19937& rng, uint32_t misalign = 0) {
  size_t e = dtypeBytes(d), n = size_t(rows) * cols;
  std::vector<std::byte> x = randomBytes(rng, n * e);
  std::vector<std::byte> y(n * e, std::byte{0xA5});
  Outputs out = r.run(Call("rowops", kernelName("transpose", d))
                          .buffer("x", x, misalign)
                          .buffer("y", y, misalign)
                          .scalar("rows", rows)
                          .scalar("cols", cols));
  std::vector<std::byte> got = out.get<std::byte>("y");
  REQUIRE(got.size() == n * e);
  size_t bad = 0;
  for (uint32_t i = 0; i < rows; ++i)
    for (uint32_t j = 0; j < cols; ++j)
      if (std::memcmp(&got[(size_t(j) * rows + i) * e], &x[(size_t(i) * cols + j) * e], e) != 0) ++bad;
  CHECK_MESSAGE(bad == 0, std::string(dtypeName(d)) << " " << rows << "x" << cols << " misalign " << misalign << ": " << bad << " elements wrong (seed " << seed() << ")");
}

}  // namespace

LIBRARY_TEST("transpose odd shapes", transposeShapes) {
  std::mt19937 rng(seed());
  for (Dtype d : kDtypes) {
    for (auto [rows, cols] : std::vector<std::pair<uint32_t, uint32_t>>{
             {1, 1}, {31, 33}, {33, 31}, {32, 32}, {64, 96}, {65, 100}, {1, 4097}, {4097, 1}, {0, 7}, {7, 0}})
      checkTranspose(r, d, rows, cols, rng);
    checkTranspose(r, d, 65, 100, rng, uint32_t(dtypeBytes(d)));
  }
}

// The 16-byte path needs x, y 16-byte aligned and rows, cols multiples of the vector width
// (4 f32, 8 bf16/f16). Shapes that meet it, with partial tiles (40, 72, 200 are not multiples
// of the 32/64 tile) and several tiles per side; shapes that meet it for f32 only (4x12, 12x20);
// and the same aligned shapes with shifted buffers, which the GPU runs on the scalar path.
LIBRARY_TEST("transpose vector path and its fallback", transposeVector) {
  std::mt19937 rng(seed());
  const std::vector<std::pair<uint32_t, uint32_t>> shapes{{8, 8},   {32, 32}, {64, 96},  {128, 40}, {40, 128},
                                                          {72, 200}, {136, 64}, {4, 12}, {12, 20}, {8, 4104}};
  for (Dtype d : kDtypes) {
    for (auto [rows, cols] : shapes) checkTranspose(r, d, rows, cols, rng);
    for (uint32_t misalign : {4u, uint32_t(dtypeBytes(d)) + 8}) {
      checkTranspose(r, d, 64, 96, rng, misalign);
      checkTranspose(r, d, 72, 200, rng, misalign);
    }
  }
}

// More tile rows than grid y can hold: blocks loop over the rest. Tiles are 32 (f32) or 64
// (bf16/f16) rows high; 8 columns take the vector path, 3 the scalar one.
LIBRARY_GPU_TEST("transpose beyond 65535 tile rows", transposeTall) {
  std::mt19937 rng(seed());
  // Billions of simulated instructions per launch: the simulator runs one (f32, 3 columns).
  const bool sim = simulatedGpu();
  for (Dtype d : kDtypes)
    for (uint32_t cols : {3u, 8u})
      if (!sim || (d == Dtype::F32 && cols == 3)) checkTranspose(r, d, 65535u * (d == Dtype::F32 ? 32 : 64) + 40, cols, rng);
}

// ---- kv_scatter -----------------------------------------------------------------------------

namespace {

void checkScatter(Runner& r, Dtype d, uint32_t row, const std::vector<uint32_t>& positions, uint32_t cacheRows,
                  std::mt19937& rng, uint32_t misalign = 0) {
  size_t e = dtypeBytes(d), rowBytes = row * e;
  uint32_t tokens = static_cast<uint32_t>(positions.size());
  std::vector<std::byte> kNew = randomBytes(rng, tokens * rowBytes), vNew = randomBytes(rng, tokens * rowBytes);
  std::vector<std::byte> kCache = randomBytes(rng, cacheRows * rowBytes), vCache = randomBytes(rng, cacheRows * rowBytes);
  Outputs out = r.run(Call("rowops", kernelName("kv_scatter", d))
                          .buffer("k_new", kNew, misalign)
                          .buffer("v_new", vNew)
                          .buffer("k_cache", kCache)
                          .buffer("v_cache", vCache, misalign)
                          .buffer("positions", positions)
                          .scalar("tokens", tokens)
                          .scalar("row", row));
  // The expected caches: untouched rows keep their bits, written rows take the new ones; positions
  // from 2^31 on (padding tokens' -1) write nothing.
  for (uint32_t t = 0; t < tokens; ++t) {
    if (positions[t] >= 0x80000000u) continue;
    std::copy_n(kNew.begin() + t * rowBytes, rowBytes, kCache.begin() + positions[t] * rowBytes);
    std::copy_n(vNew.begin() + t * rowBytes, rowBytes, vCache.begin() + positions[t] * rowBytes);
  }
  std::string what = std::string(dtypeName(d)) + " row=" + std::to_string(row) + " tokens=" + std::to_string(tokens) +
                     " misalign=" + std::to_string(misalign) + " (seed " + std::to_string(seed()) + ")";
  CHECK_MESSAGE(out.get<std::byte>("k_cache") == kCache, "k_cache " << what);
  CHECK_MESSAGE(out.get<std::byte>("v_cache") == vCache, "v_cache " << what);
}

}  // namespace

LIBRARY_TEST("kv_scatter rows and positions", kvScatter) {
  std::mt19937 rng(seed());
  for (Dtype d : kDtypes) {
    for (uint32_t row : {1u, 3u, 8u, 33u, 128u, 1024u, 1027u, 2048u, 4100u}) {
      const uint32_t cacheRows = 11;
      std::vector<uint32_t> all(cacheRows);
      std::iota(all.begin(), all.end(), 0u);
      std::shuffle(all.begin(), all.end(), rng);
      // Five distinct positions out of order; the other six cache rows must stay as they were.
      std::vector<uint32_t> positions(all.begin(), all.begin() + 5);
      checkScatter(r, d, row, positions, cacheRows, rng);
      checkScatter(r, d, row, positions, cacheRows, rng, 4);
      checkScatter(r, d, row, {}, cacheRows, rng);  // tokens = 0 launches nothing
      // Padding tokens (slot -1, and any position from 2^31 on) are skipped.
      checkScatter(r, d, row, {positions[0], 0xFFFFFFFFu, positions[1], 0x80000000u}, cacheRows, rng);
    }
  }
}

// More tokens than grid y can hold: blocks loop over the rest.
LIBRARY_GPU_TEST("kv_scatter beyond 65535 tokens", kvScatterMany) {
  std::mt19937 rng(seed());
  std::vector<uint32_t> positions(70000);
  std::iota(positions.begin(), positions.end(), 0u);
  std::shuffle(positions.begin(), positions.end(), rng);
  for (Dtype d : kDtypes) checkScatter(r, d, 24, positions, 70003, rng);
}

// ---- kv_scatter into fp8 caches ----------------------------------------------------------------

namespace {

// Values for the codes: every magnitude from below the smallest subnormal to beyond the largest
// finite value (times `scale`), the ties between neighbouring codes, and -0, infinities, NaN.
std::vector<float> fp8Inputs(std::mt19937& rng, Fp8Format f, Dtype d, size_t n, float scale) {
  const double largest = fp8Value(f, f == Fp8Format::E4M3 ? 0x7E : 0x7B);
  std::uniform_real_distribution<double> exponent(std::log2(largest) - 30, std::log2(largest) + 2), unit(0, 1);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    double x;
    switch (i % 8) {
      case 0: {  // halfway between two neighbouring positive codes
        const uint8_t c = uint8_t(rng() % (f == Fp8Format::E4M3 ? 0x7E : 0x7B));
        x = (fp8Value(f, c) + fp8Value(f, uint8_t(c + 1))) / 2;
        break;
      }
      case 1: x = fp8Value(f, uint8_t(rng() % 0x7B)); break;  // a code's value exactly
      case 2: {
        const float special[] = {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                                 -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                                 float(largest) * 1.03f, float(largest) * 1.1f};
        v[i] = special[rng() % std::size(special)];
        continue;
      }
      default: x = std::exp2(exponent(rng)) * (unit(rng) < 0.5 ? -1 : 1);
    }
    v[i] = float(x * (rng() & 1 ? -1 : 1)) * scale;
  }
  return roundTo(d, v);
}

void checkScatterFp8(Runner& r, const char* kernel, Dtype d, Fp8Format f, uint32_t row,
                     const std::vector<uint32_t>& positions, uint32_t cacheRows, std::mt19937& rng,
                     uint32_t misalign = 0) {
  const uint32_t tokens = static_cast<uint32_t>(positions.size());
  const float kScale = 0.75f, vScale = 3.0f;  // x / 3 is rarely exact: the division's rounding counts
  const std::vector<float> k = fp8Inputs(rng, f, d, size_t(tokens) * row, kScale);
  const std::vector<float> v = fp8Inputs(rng, f, d, size_t(tokens) * row, vScale);
  std::vector<std::byte> kCache = randomBytes(rng, size_t(cacheRows) * row), vCache = randomBytes(rng, size_t(cacheRows) * row);
  Outputs out = r.run(Call("rowops", kernel)
                          .buffer("k_new", encode(d, k), misalign)
                          .buffer("v_new", encode(d, v))
                          .buffer("k_cache", kCache)
                          .buffer("v_cache", vCache, misalign)
                          .buffer("positions", positions)
                          .scalar("tokens", tokens)
                          .scalar("row", row)
                          .scalar("k_scale", kScale)
                          .scalar("v_scale", vScale));
  // Written rows hold the codes of x / scale (an f32 division, as the kernel's div.rn), the others
  // keep their bytes.
  for (uint32_t t = 0; t < tokens; ++t)
    for (uint32_t e = 0; e < row && positions[t] < 0x80000000u; ++e) {
      kCache[size_t(positions[t]) * row + e] = std::byte{fp8Code(f, k[size_t(t) * row + e] / kScale)};
      vCache[size_t(positions[t]) * row + e] = std::byte{fp8Code(f, v[size_t(t) * row + e] / vScale)};
    }
  const std::string what = std::string(kernel) + " row=" + std::to_string(row) + " tokens=" + std::to_string(tokens) +
                           " misalign=" + std::to_string(misalign) + " (seed " + std::to_string(seed()) + ")";
  const std::vector<std::byte> gotK = out.get<std::byte>("k_cache"), gotV = out.get<std::byte>("v_cache");
  for (size_t i = 0; i < kCache.size(); ++i)
    if (gotK[i] != kCache[i] || gotV[i] != vCache[i]) {
      const size_t t = i / row, e = i % row;
      FAIL_CHECK(what << ": cache row " << t << " element " << e << ": k code " << int(gotK[i]) << " (want "
                      << int(kCache[i]) << "), v code " << int(gotV[i]) << " (want " << int(vCache[i]) << ")");
      break;
    }
}

}  // namespace

LIBRARY_TEST("kv_scatter into fp8 caches: nearest codes, ties to even, saturation, specials", kvScatterFp8) {
  std::mt19937 rng(seed());
  struct Kernel {
    const char* name;
    Dtype d;
    Fp8Format f;
  };
  for (const Kernel& k : {Kernel{"kv_scatter_bf16_fp8_e4m3", Dtype::BF16, Fp8Format::E4M3},
                          Kernel{"kv_scatter_f16_fp8_e4m3", Dtype::F16, Fp8Format::E4M3},
                          Kernel{"kv_scatter_f32_fp8_e5m2", Dtype::F32, Fp8Format::E5M2}})
    for (uint32_t row : {3u, 8u, 128u, 1027u, 2048u}) {
      std::vector<uint32_t> positions = {6, 0, 9, 0xFFFFFFFFu, 2, 4};  // -1: a padding token, skipped
      checkScatterFp8(r, k.name, k.d, k.f, row, positions, 11, rng);
      checkScatterFp8(r, k.name, k.d, k.f, row, positions, 11, rng, 4);  // the scalar path on the GPU
      checkScatterFp8(r, k.name, k.d, k.f, row, {}, 11, rng);
    }
}
