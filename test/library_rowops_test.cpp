// argmax, transpose and kv_scatter (test/library/rowops.toml) against C++ references. argmax
// and the two copies are exact: every comparison here is bit for bit, no tolerance.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>

#include "library_harness.h"

using namespace tn::libtest;

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
  for (Dtype d : kDtypes)
    for (uint32_t cols : {3u, 8u}) checkTranspose(r, d, 65535u * 64 + 40, cols, rng);
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
  // The expected caches: untouched rows keep their bits, written rows take the new ones.
  for (uint32_t t = 0; t < tokens; ++t) {
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
