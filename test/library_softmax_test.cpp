// softmax, softmax_partial and softmax_merge (kernels/Softmax.cpp) against a double-precision
// reference on the inputs rounded to the storage type.
#include <algorithm>
#include <limits>

#include "library_harness.h"

using namespace tn::libtest;

namespace {

constexpr uint32_t kChunk = 4096;  // softmax_partial's elements per (row, chunk); its summary
const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

const Dtype kDtypes[] = {Dtype::F32, Dtype::BF16, Dtype::F16};

std::string kernel(const char* base, Dtype d) { return std::string(base) + "_" + dtypeName(d); }

// Softmax of one row in double; NaN everywhere when the row holds a NaN or +inf or is all
// -inf (the kernels' documented behaviour, as in PyTorch).
std::vector<double> refRow(const float* x, uint32_t cols) {
  double m = -std::numeric_limits<double>::infinity();
  bool nan = false;
  for (uint32_t j = 0; j < cols; ++j) {
    nan = nan || std::isnan(x[j]) || x[j] == kInf;
    m = std::max(m, double(x[j]));
  }
  if (nan || m == -std::numeric_limits<double>::infinity()) return std::vector<double>(cols, std::nan(""));
  std::vector<double> e(cols);
  double sum = 0;
  for (uint32_t j = 0; j < cols; ++j) sum += e[j] = std::exp(double(x[j]) - m);
  for (double& v : e) v /= sum;
  return e;
}

std::vector<double> reference(const std::vector<float>& x, uint32_t rows, uint32_t cols) {
  std::vector<double> out;
  for (uint32_t r = 0; r < rows; ++r) {
    std::vector<double> row = refRow(x.data() + size_t(r) * cols, cols);
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

// Per element: ex2.approx (2 ulp on the GPU), the rounding of x - max and of the scaling by
// log2(e) (relative |x - max| * 2^-24 each, under 1e-5 wherever the result is above the abs
// term) and a sum of at most a few dozen terms per thread: 1e-5 relative. bf16/f16: one
// rounding of the output on top, and for f16 half a subnormal step (2^-25) absolute.
double relTol(Dtype d) { return 1e-5 + roundoff(d); }
double absTol(Dtype d) { return 1e-12 + (d == Dtype::F16 ? std::ldexp(1.0, -25) : 0.0); }

void expectSoftmax(const std::vector<float>& got, const std::vector<float>& x, uint32_t rows, uint32_t cols, Dtype d,
                   const std::string& what) {
  std::vector<double> want = reference(x, rows, cols);
  expectClose(got, want, absTol(d), relTol(d), what);
  // Each finite row sums to 1: the errors above are relative, so their sum is at most relTol,
  // plus the absolute f16 underflow error of every element.
  for (uint32_t r = 0; r < rows; ++r) {
    if (std::isnan(want[size_t(r) * cols])) continue;
    double sum = 0;
    for (uint32_t j = 0; j < cols; ++j) sum += got[size_t(r) * cols + j];
    CHECK_MESSAGE(std::fabs(sum - 1.0) <= relTol(d) + cols * absTol(d),
                  what << ": row " << r << " sums to " << sum << " (seed " << seed() << ")");
  }
}

std::vector<float> runSoftmax(Runner& r, Dtype d, const std::vector<float>& x, uint32_t rows, uint32_t cols,
                              uint32_t misalignX = 0, uint32_t misalignY = 0) {
  std::vector<float> y(x.size(), kNaN);
  Outputs out = r.run(Call("softmax", kernel("softmax", d))
                          .buffer("x", encode(d, x), misalignX)
                          .buffer("y", encode(d, y), misalignY)
                          .scalar("rows", rows)
                          .scalar("cols", cols));
  return decode(d, out.get<std::byte>("y"));
}

struct Long {
  std::vector<float> y, stats;
};

// softmax_partial then softmax_merge, as a caller runs them.
Long runLong(Runner& r, Dtype d, const std::vector<float>& x, uint32_t rows, uint32_t cols, uint32_t misalign = 0) {
  uint32_t chunks = (cols + kChunk - 1) / kChunk;
  std::vector<float> stats(std::max<size_t>(1, size_t(rows) * chunks * 2), kNaN);
  Outputs part = r.run(Call("softmax", kernel("softmax_partial", d))
                           .buffer("x", encode(d, x), misalign)
                           .buffer("stats", stats)
                           .scalar("rows", rows)
                           .scalar("cols", cols));
  stats = part.get<float>("stats");
  std::vector<float> y(std::max<size_t>(1, x.size()), kNaN);
  Outputs merged = r.run(Call("softmax", kernel("softmax_merge", d))
                             .buffer("x", encode(d, x), misalign)
                             .buffer("stats", stats)
                             .buffer("y", encode(d, y), misalign)
                             .scalar("rows", rows)
                             .scalar("cols", cols));
  return {decode(d, merged.get<std::byte>("y")), stats};
}

// Each chunk's (max, sum of e^(x - max)): the max exactly, the sum to 1e-5 relative (the
// element bound above; NaN chunks give NaN, all -inf chunks (-inf, 0)).
void expectStats(const std::vector<float>& stats, const std::vector<float>& x, uint32_t rows, uint32_t cols,
                 const std::string& what) {
  uint32_t chunks = (cols + kChunk - 1) / kChunk;
  std::vector<float> gotM, gotS;
  std::vector<double> wantM, wantS;
  for (uint32_t r = 0; r < rows; ++r)
    for (uint32_t c = 0; c < chunks; ++c) {
      double m = -std::numeric_limits<double>::infinity();
      bool nan = false;
      uint32_t end = std::min(cols, (c + 1) * kChunk);
      for (uint32_t j = c * kChunk; j < end; ++j) {
        float v = x[size_t(r) * cols + j];
        nan = nan || std::isnan(v) || v == kInf;
        if (!std::isnan(v)) m = std::max(m, double(v));
      }
      double s = 0;
      for (uint32_t j = c * kChunk; j < end; ++j)
        if (m != -std::numeric_limits<double>::infinity()) s += std::exp(double(x[size_t(r) * cols + j]) - m);
      gotM.push_back(stats[(size_t(r) * chunks + c) * 2]);
      gotS.push_back(stats[(size_t(r) * chunks + c) * 2 + 1]);
      wantM.push_back(m);
      wantS.push_back(nan ? std::nan("") : s);
    }
  expectClose(gotM, wantM, 0, 0, what + " chunk max");
  expectClose(gotS, wantS, 0, 1e-5, what + " chunk sum");
}

// Rows of special values, cycling through the kinds below; `big` is the storage type's
// "huge" magnitude (1e30, or 6e4 for f16, whose largest finite value is 65504).
std::vector<float> extremeRows(std::mt19937& rng, uint32_t rows, uint32_t cols, Dtype d) {
  float big = d == Dtype::F16 ? 6e4f : 1e30f;
  std::uniform_int_distribution<uint32_t> at(0, cols - 1);
  std::vector<float> x = uniform(rng, size_t(rows) * cols, -1.0f, 1.0f);
  for (uint32_t r = 0; r < rows; ++r) {
    float* row = x.data() + size_t(r) * cols;
    std::vector<float> u = uniform(rng, cols, -1.0f, 1.0f);
    switch (r % 9) {
      case 0:  // huge magnitudes of both signs
        for (uint32_t j = 0; j < cols; ++j) row[j] = u[j] * big;
        break;
      case 1:  // near 1e4: a naive e^x overflows
        for (uint32_t j = 0; j < cols; ++j) row[j] = (d == Dtype::F16 ? 6e3f : 1e4f) + 10.0f * u[j];
        break;
      case 2:  // all equal: 1/cols each
        std::fill(row, row + cols, 3.25f);
        break;
      case 3:  // -inf entries get weight 0 (one finite entry at least)
        for (uint32_t j = 0; j < cols; ++j)
          if (u[j] < 0.0f) row[j] = -kInf;
        row[at(rng)] = 0.5f;
        break;
      case 4:  // all -inf: NaN
        std::fill(row, row + cols, -kInf);
        break;
      case 5:  // a NaN: NaN row
        row[at(rng)] = kNaN;
        break;
      case 6:  // +inf: NaN row
        row[at(rng)] = kInf;
        break;
      case 7:  // one dominant entry: nearly one-hot
        row[at(rng)] = 40.0f;
        break;
      case 8:  // far below zero
        for (uint32_t j = 0; j < cols; ++j) row[j] = -(d == Dtype::F16 ? 3e4f : 1e20f) + u[j] * 1e3f;
        break;
    }
  }
  return x;
}

std::string label(const char* what, Dtype d, uint32_t rows, uint32_t cols) {
  return std::string(what) + " " + dtypeName(d) + " " + std::to_string(rows) + "x" + std::to_string(cols);
}

}  // namespace

// Warp mode (cols <= 1024) and block mode, vector (cols a multiple of 4 or 8) and scalar paths,
// partial blocks of rows, and misaligned buffers (scalar path; on the GPU only).
LIBRARY_TEST("softmax sizes", softmaxSizes) {
  std::mt19937 rng(seed());
  const std::pair<uint32_t, uint32_t> shapes[] = {{1, 1},    {3, 31},   {5, 33},   {9, 100},  {17, 64},
                                                  {33, 1000}, {4, 999},  {3, 1020}, {2, 1024}, {2, 1025}, {2, 2056}, {3, 4097},
                                                  {2, 4096},  {1, 8200}};
  for (Dtype d : kDtypes)
    for (auto [rows, cols] : shapes) {
      std::vector<float> x = roundTo(d, uniform(rng, size_t(rows) * cols, -8.0f, 8.0f));
      expectSoftmax(runSoftmax(r, d, x, rows, cols), x, rows, cols, d, label("softmax", d, rows, cols));
      if (r.honoursMisalign()) {
        expectSoftmax(runSoftmax(r, d, x, rows, cols, 4, 4), x, rows, cols, d, label("softmax misaligned", d, rows, cols));
        expectSoftmax(runSoftmax(r, d, x, rows, cols, 0, 4), x, rows, cols, d, label("softmax y misaligned", d, rows, cols));
      }
    }
  // Random shapes on both sides of the mode threshold.
  std::uniform_int_distribution<uint32_t> rowDist(1, 12), colDist(1, 3000);
  for (int k = 0; k < 8; ++k)
    for (Dtype d : kDtypes) {
      uint32_t rows = rowDist(rng), cols = colDist(rng);
      if (k % 2 == 0) cols -= cols % 8;  // the vector path too
      cols = std::max(cols, 1u);
      std::vector<float> x = roundTo(d, uniform(rng, size_t(rows) * cols, -8.0f, 8.0f));
      expectSoftmax(runSoftmax(r, d, x, rows, cols), x, rows, cols, d, label("softmax", d, rows, cols));
    }
  if (r.fast())
    for (Dtype d : kDtypes)
      for (auto [rows, cols] : {std::pair<uint32_t, uint32_t>{4096, 4096}, {1000, 1000}, {64, 32768}}) {
        std::vector<float> x = roundTo(d, uniform(rng, size_t(rows) * cols, -8.0f, 8.0f));
        expectSoftmax(runSoftmax(r, d, x, rows, cols), x, rows, cols, d, label("softmax", d, rows, cols));
      }
}

// The one-pass path (the row kept in registers: cols <= 8192 f32, 16384 bf16/f16, 16-byte vectors)
// at its bound, one vector past it (two passes), and one element past it (the scalar path), with
// ordinary and extreme rows.
LIBRARY_TEST("softmax one-pass bound", softmaxOnePassBound) {
  std::mt19937 rng(seed());
  for (Dtype d : kDtypes) {
    uint32_t bound = d == Dtype::F32 ? 8192 : 16384, vec = d == Dtype::F32 ? 4 : 8;
    for (uint32_t cols : {bound, bound + vec, bound + 1, bound - vec}) {
      std::vector<float> x = roundTo(d, uniform(rng, size_t(2) * cols, -8.0f, 8.0f));
      expectSoftmax(runSoftmax(r, d, x, 2, cols), x, 2, cols, d, label("softmax", d, 2, cols));
    }
    std::vector<float> x = roundTo(d, extremeRows(rng, 9, bound, d));
    expectSoftmax(runSoftmax(r, d, x, 9, bound), x, 9, bound, d, label("softmax extreme", d, 9, bound));
  }
}

LIBRARY_TEST("softmax extreme values", softmaxExtreme) {
  std::mt19937 rng(seed());
  for (Dtype d : kDtypes)
    for (uint32_t cols : {100u, 2000u, 7u}) {
      uint32_t rows = 9;
      std::vector<float> x = roundTo(d, extremeRows(rng, rows, cols, d));
      expectSoftmax(runSoftmax(r, d, x, rows, cols), x, rows, cols, d, label("softmax extreme", d, rows, cols));
    }
}

LIBRARY_TEST("softmax empty", softmaxEmpty) {
  // Nothing is launched, so the sentinel survives.
  for (Dtype d : kDtypes)
    for (auto [rows, cols] : {std::pair<uint32_t, uint32_t>{0, 5}, {3, 0}}) {
      std::vector<float> y{42.0f};
      Outputs out = r.run(Call("softmax", kernel("softmax", d))
                              .buffer("x", encode(d, y))
                              .buffer("y", encode(d, y))
                              .scalar("rows", rows)
                              .scalar("cols", cols));
      CHECK(decode(d, out.get<std::byte>("y")) == y);
      Long l = runLong(r, d, {}, rows, cols);
      CHECK(std::isnan(l.y[0]));
      CHECK(std::isnan(l.stats[0]));
    }
}

LIBRARY_TEST("softmax long rows", softmaxLong) {
  std::mt19937 rng(seed());
  const std::pair<uint32_t, uint32_t> shapes[] = {{1, 1}, {2, 4097}, {3, 10000}, {2, 8192}, {1, 3 * 4096 + 8}, {2, 33}, {4, 20000}};
  for (Dtype d : kDtypes)
    for (auto [rows, cols] : shapes) {
      std::vector<float> x = roundTo(d, uniform(rng, size_t(rows) * cols, -8.0f, 8.0f));
      Long l = runLong(r, d, x, rows, cols);
      expectStats(l.stats, x, rows, cols, label("softmax_partial", d, rows, cols));
      expectSoftmax(l.y, x, rows, cols, d, label("softmax_partial+merge", d, rows, cols));
      if (r.honoursMisalign() && cols % 8 == 0)
        expectSoftmax(runLong(r, d, x, rows, cols, 4).y, x, rows, cols, d,
                      label("softmax_partial+merge misaligned", d, rows, cols));
    }
  if (r.fast())
    for (Dtype d : kDtypes) {
      uint32_t rows = 8, cols = 1u << 20;
      std::vector<float> x = roundTo(d, uniform(rng, size_t(rows) * cols, -8.0f, 8.0f));
      expectSoftmax(runLong(r, d, x, rows, cols).y, x, rows, cols, d, label("softmax_partial+merge", d, rows, cols));
    }
}

// Special values spread over the chunks of long rows: a chunk that is all -inf, or holds the
// row's only NaN, must still decide the whole row.
LIBRARY_TEST("softmax long rows extreme values", softmaxLongExtreme) {
  std::mt19937 rng(seed());
  for (Dtype d : kDtypes) {
    uint32_t rows = 9, cols = 4096 + 100;
    std::vector<float> x = roundTo(d, extremeRows(rng, rows, cols, d));
    // Row 3 (-inf entries): its whole first chunk -inf, so that chunk's pair is (-inf, 0).
    std::fill(x.begin() + 3 * cols, x.begin() + 3 * cols + kChunk, -kInf);
    x[3 * cols + kChunk + 5] = 1.0f;
    Long l = runLong(r, d, x, rows, cols);
    expectStats(l.stats, x, rows, cols, label("softmax_partial extreme", d, rows, cols));
    expectSoftmax(l.y, x, rows, cols, d, label("softmax_partial+merge extreme", d, rows, cols));
  }
}
