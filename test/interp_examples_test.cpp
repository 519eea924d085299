// The two example kernels (examples/vadd.tir, examples/row_sum.tir) in the interpreter against a
// C++ reference on fresh random inputs (the seed is printed on failure) and odd sizes, plus the
// interpreter's speed on row_sum 256x4096 (reported, not asserted: see docs/interpreter.md).
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backends/interp/Interp.h"
#include "interp_harness.h"
#include "ir/Parser.h"
#include "ir/Verifier.h"

namespace {

using tn::interp::Interpreter;

tn::ir::Module loadExample(const std::string& name) { return tn::harness::parseSourceFile("examples/" + name); }

std::vector<float> randomFloats(std::mt19937& rng, size_t n) {
  std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// row_sum's summation order, replayed on the CPU: per-thread strided sums, a butterfly over each
// warp, the eight warp sums staged and combined by a second butterfly in warp 0.
float rowSumReference(const float* row, uint32_t cols) {
  float acc[256];
  for (uint32_t t = 0; t < 256; ++t) {
    acc[t] = 0.0f;
    for (uint32_t i = t; i < cols; i += 256) acc[t] += row[i];
  }
  float warpSum[8];
  for (uint32_t w = 0; w < 8; ++w) {
    float v[32];
    for (uint32_t l = 0; l < 32; ++l) v[l] = acc[w * 32 + l];
    for (uint32_t off : {16u, 8u, 4u, 2u, 1u}) {
      float next[32];
      for (uint32_t l = 0; l < 32; ++l) next[l] = v[l] + v[l ^ off];
      std::copy(next, next + 32, v);
    }
    warpSum[w] = v[0];
  }
  float v[32];
  for (uint32_t l = 0; l < 32; ++l) v[l] = l < 8 ? warpSum[l] : 0.0f;
  for (uint32_t off : {4u, 2u, 1u}) {
    float next[32];
    for (uint32_t l = 0; l < 32; ++l) next[l] = v[l] + v[l ^ off];
    std::copy(next, next + 32, v);
  }
  return v[0];
}

void runRowSum(Interpreter& vm, const std::vector<float>& x, uint32_t rows, uint32_t cols) {
  REQUIRE_FALSE(vm.bindArray("x", x));
  REQUIRE_FALSE(vm.bindArray("y", std::vector<float>(rows, 0.0f)));
  REQUIRE_FALSE(vm.setScalar("cols", cols));
  auto err = vm.launch({{rows, 1, 1}, {256, 1, 1}, 0});
  INFO((err ? err->text() : ""));
  REQUIRE_FALSE(err);
}

}  // namespace

TEST_CASE("interp: vadd matches the C++ reference on random inputs and odd sizes") {
  const unsigned seed = std::random_device{}();
  INFO("random seed " << seed);
  std::mt19937 rng(seed);
  tn::ir::Module m = loadExample("vadd.tir");
  for (uint32_t n : {1u, 31u, 33u, 4097u}) {
    CAPTURE(n);
    std::vector<float> a = randomFloats(rng, n), b = randomFloats(rng, n);
    Interpreter vm;
    REQUIRE_FALSE(vm.load(m, "vadd"));
    REQUIRE_FALSE(vm.bindArray("a", a));
    REQUIRE_FALSE(vm.bindArray("b", b));
    REQUIRE_FALSE(vm.bindArray("c", std::vector<float>(n, 0.0f)));
    REQUIRE_FALSE(vm.setScalar("n", n));
    uint32_t grid = (n + 255) / 256;
    auto err = vm.launch({{grid, 1, 1}, {256, 1, 1}, 0});
    INFO((err ? err->text() : ""));
    REQUIRE_FALSE(err);
    std::vector<float> c = vm.read<float>("c");
    size_t mismatches = 0;
    for (uint32_t i = 0; i < n; ++i)
      if (std::bit_cast<uint32_t>(c[i]) != std::bit_cast<uint32_t>(a[i] + b[i])) ++mismatches;
    CHECK(mismatches == 0);
    CHECK(vm.stats().blocks == grid);
    CHECK(vm.stats().threads == grid * 256);
  }
}

TEST_CASE("interp: row_sum matches the C++ reference on random inputs and odd sizes") {
  const unsigned seed = std::random_device{}();
  INFO("random seed " << seed);
  std::mt19937 rng(seed);
  tn::ir::Module m = loadExample("row_sum.tir");
  const uint32_t rows = 3;
  for (uint32_t cols : {1u, 31u, 257u, 1000u}) {
    CAPTURE(cols);
    std::vector<float> x = randomFloats(rng, size_t(rows) * cols);
    Interpreter vm;
    REQUIRE_FALSE(vm.load(m, "row_sum"));
    runRowSum(vm, x, rows, cols);
    std::vector<float> y = vm.read<float>("y");
    for (uint32_t r = 0; r < rows; ++r) {
      CAPTURE(r);
      float want = rowSumReference(x.data() + size_t(r) * cols, cols);
      CHECK(std::bit_cast<uint32_t>(y[r]) == std::bit_cast<uint32_t>(want));
      // And close to the exact sum: |error| <= cols * 2^-23 * sum|x| bounds any summation order.
      double exact = 0, magnitude = 0;
      for (uint32_t i = 0; i < cols; ++i) {
        exact += x[size_t(r) * cols + i];
        magnitude += std::fabs(x[size_t(r) * cols + i]);
      }
      CHECK(std::fabs(y[r] - exact) <= cols * 0x1p-23 * magnitude + 1e-30);
    }
  }
}

TEST_CASE("interp: row_sum reports a block size other than its reqntid") {
  tn::ir::Module m = loadExample("row_sum.tir");
  Interpreter vm;
  REQUIRE_FALSE(vm.load(m, "row_sum"));
  REQUIRE_FALSE(vm.bindArray("x", std::vector<float>(128, 1.0f)));
  REQUIRE_FALSE(vm.bindArray("y", std::vector<float>(1, 0.0f)));
  REQUIRE_FALSE(vm.setScalar("cols", 128u));
  auto err = vm.launch({{1, 1, 1}, {128, 1, 1}, 0});
  REQUIRE(err);
  CHECK(err->kind == tn::interp::ErrorKind::Setup);
  CHECK(err->text() == "error: block (128,1,1) does not match the kernel's reqntid (256,1,1)");
}

TEST_CASE("interp: speed of row_sum on 256x4096") {
  tn::ir::Module m = loadExample("row_sum.tir");
  const uint32_t rows = 256, cols = 4096;
  std::mt19937 rng(1);
  std::vector<float> x = randomFloats(rng, size_t(rows) * cols);
  Interpreter vm;
  REQUIRE_FALSE(vm.load(m, "row_sum"));
  runRowSum(vm, x, rows, cols);
  const tn::interp::Stats& st = vm.stats();
  std::vector<float> y = vm.read<float>("y");
  CHECK(std::bit_cast<uint32_t>(y[rows - 1]) == std::bit_cast<uint32_t>(rowSumReference(x.data() + size_t(rows - 1) * cols, cols)));
  MESSAGE("row_sum 256x4096: " << st.instructions << " thread instructions (" << st.warpInstructions
                               << " warp steps) in " << st.seconds << " s = "
                               << static_cast<uint64_t>(st.instructions / st.seconds / 1e6) << " M instructions/s");
  CHECK(st.instructions > 0);
}
