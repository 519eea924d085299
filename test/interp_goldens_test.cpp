// Every runnable kernel of the lit PTX goldens (lit-tests/emit-ptx/*.tir, read from the source
// tree; errors*.tir hold no runnable kernels) in the interpreter against a C++ reference, on
// random inputs (a fresh seed per run, printed on failure; TRUENOC_TEST_SEED=N replays one) and
// odd launch sizes. Most goldens store one value or none, so the tests also probe the values the
// kernel computes (interp_harness.h: stored per thread just before the block's terminator) and
// check each one: conversions, fast math, integer ops, atomics, comparisons, special registers,
// warp collectives and vector accesses, value by value. A value computed from other probed
// values is checked on the interpreter's own inputs, so an approximation's tolerance does not
// spread. The last test asserts that the goldens covered are exactly the goldens present.
#include <doctest/doctest.h>

#include <array>
#include <bit>
#include <cfenv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iterator>
#include <set>

#include "interp_harness.h"
#include "ir/Float16.h"
#include "ir/Float8.h"
#include "ir/LaneSemantics.h"
#include "mma_reference.h"

namespace {

using namespace tn::harness;
using tn::interp::ErrorKind;

// ---- which goldens have a test ------------------------------------------------------------

std::set<std::pair<std::string, std::string>>& registeredGoldens() {
  static std::set<std::pair<std::string, std::string>> all;
  return all;
}
bool registerGolden(const char* file, const char* kernel) {
  registeredGoldens().insert({file, kernel});
  return true;
}

// A test case for one golden kernel; registering it lets the coverage test find it.
#define GOLDEN_TEST_CASE(FILE, KERNEL)                                                                    \
  [[maybe_unused]] static const bool DOCTEST_ANONYMOUS(kGoldenRegistered) = registerGolden(FILE, KERNEL); \
  TEST_CASE("interp golden: " FILE " @" KERNEL)

// A GOLDEN_TEST_CASE whose body gets `Session& s` for the kernel (its random seed is reported
// with every failure of the body); s.forEach runs and checks its launches.
#define GOLDEN_TEST(FILE, KERNEL) GOLDEN_TEST_BODY(FILE, KERNEL, DOCTEST_ANONYMOUS(goldenBody))
#define GOLDEN_TEST_BODY(FILE, KERNEL, BODY) \
  static void BODY(Session& s);              \
  GOLDEN_TEST_CASE(FILE, KERNEL) {           \
    Session s(FILE, KERNEL);                 \
    INFO("random seed " << s.seed);          \
    BODY(s);                                 \
  }                                          \
  static void BODY(Session& s)

// Kernels of the goldens that the interpreter cannot load (and why); they have a test that
// checks the refusal.
const std::set<std::pair<std::string, std::string>> kNotRunnable = {};

// ---- checking ---------------------------------------------------------------------------

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// Collects mismatches of one launch and reports them together (the first few in full).
class Checker {
 public:
  Checker(const Probes& probes, const Outcome& outcome) : probes_(probes) {
    if (!probes.empty()) probeBuf_ = &outcome.buffers.at("probe");
  }
  ~Checker() {
    if (std::uncaught_exceptions() == 0)
      CHECK_MESSAGE(failures_ == 0, failures_ << " mismatches; the first ones:\n" << first_);
  }

  void fail(const std::string& msg) {
    if (++failures_ <= 12) first_ += msg + "\n";
  }
  void expect(bool ok, const std::string& what) {
    if (!ok) fail(what);
  }
  void bits(const std::string& what, uint64_t got, uint64_t want) {
    if (got != want) fail(what + ": got " + hex(got) + ", want " + hex(want));
  }
  // Probe `name` of thread t, lane `lane` (a vector's element).
  uint64_t probe(uint64_t t, const std::string& name, unsigned lane = 0) const {
    return probes_.bits(*probeBuf_, t, name, lane);
  }
  float probeF32(uint64_t t, const std::string& name, unsigned lane = 0) const { return f32From(probe(t, name, lane)); }
  double probeF64(uint64_t t, const std::string& name, unsigned lane = 0) const {
    return f64From(probe(t, name, lane));
  }
  // Probe against exact bits (want truncated to the probe's width).
  void exact(uint64_t t, const std::string& name, uint64_t want, unsigned lane = 0) {
    unsigned width = probes_.types[probes_.index(name)].element().bits();
    if (width < 64) want &= (uint64_t{1} << width) - 1;
    bits("thread " + std::to_string(t) + " %" + name + (lane ? "[" + std::to_string(lane) + "]" : ""),
         probe(t, name, lane), want);
  }
  // Probe within `ulps` of want; a NaN must be the canonical NaN.
  void nearF32(uint64_t t, const std::string& name, double want, uint64_t ulps) {
    near(t, name, probeF32(t, name), static_cast<float>(want), ulps);
  }
  void near(uint64_t t, const std::string& name, float got, float want, uint64_t ulps) {
    std::string what = "thread " + std::to_string(t) + " %" + name;
    if (std::isnan(want)) return bits(what, bitsOf(got), kCanonicalNaN32);
    if (ulpDistance(got, want) > ulps)
      fail(what + ": got " + hex(bitsOf(got)) + " (" + std::to_string(got) + "), want " + hex(bitsOf(want)) + " (" +
           std::to_string(want) + ") within " + std::to_string(ulps) + " ulp");
  }
  void nearF64(uint64_t t, const std::string& name, double want, uint64_t ulps) {
    double got = probeF64(t, name);
    std::string what = "thread " + std::to_string(t) + " %" + name;
    if (std::isnan(want)) return bits(what, bitsOf(got), kCanonicalNaN64);
    if (ulpDistance(got, want) > ulps) fail(what + ": got " + hex(bitsOf(got)) + ", want " + hex(bitsOf(want)));
  }
  // Every thread of the launch stored all its probes.
  void complete(uint64_t threads) {
    if (probes_.empty()) return;
    for (uint64_t t = 0; t < threads; ++t)
      if (!probes_.complete(*probeBuf_, t)) fail("thread " + std::to_string(t) + " did not store all its probes");
  }

 private:
  const Probes& probes_;
  const std::vector<std::byte>* probeBuf_ = nullptr;
  unsigned failures_ = 0;
  std::string first_;
};

// One golden kernel with its probes, its module and the launches of its scenario.
struct Session {
  const GoldenCase& golden;
  unsigned seed;
  std::mt19937 rng;
  Probes probes;
  tn::ir::Module module;
  std::vector<Run> runs;

  Session(const std::string& file, const std::string& kernel)
      : golden(goldenCase(file, kernel)), seed(testSeed()), rng(seed), module(instrumentedGolden(golden, probes)) {
    runs = golden.runs(rng);
  }
  // Runs one launch; it must succeed.
  Outcome run(const Run& r) const {
    Outcome o = execute(module, golden.kernel, r, probes);
    INFO((o.error ? o.error->text() : ""));
    REQUIRE_FALSE(o.error);
    return o;
  }
  // Runs every launch (each must succeed) and calls check(run, outcome) on it.
  template <class Check>
  void forEach(Check&& check) const {
    for (const Run& r : runs) {
      INFO(describe(r));
      check(r, run(r));
    }
  }
};

// A fault the launch must report, as the full text FILE:LINE:COL: error: MESSAGE. The location
// is that of `needle`'s first occurrence in the golden (the op name follows "= ").
std::string faultAt(const std::string& file, const std::string& needle, const std::string& message) {
  std::string path = std::string(TRUENOC_SOURCE_DIR) + "/lit-tests/emit-ptx/" + file;
  std::ifstream in(path);
  std::string line;
  for (unsigned n = 1; std::getline(in, line); ++n) {
    size_t at = line.find(needle);
    if (at == std::string::npos) continue;
    size_t op = line.find("= ", at);
    size_t col = (op == std::string::npos ? at : op + 2) + 1;
    return path + ":" + std::to_string(n) + ":" + std::to_string(col) + ": error: " + message;
  }
  FAIL("'" << needle << "' not found in " << path);
  return {};
}

// ---- scalar references ----------------------------------------------------------------------

// Float to integer with the PTX rules: round as given, saturate to the range; NaN gives 0, or
// 1 << 63 into 64 bits (no golden converts an f64, which gives 1 << (width - 1) into any width).
int64_t toInt(double v, int64_t lo, int64_t hi) {
  if (std::isnan(v)) return hi == INT64_MAX ? INT64_MIN : 0;
  if (v <= static_cast<double>(lo)) return lo;
  if (v >= static_cast<double>(hi)) return hi;
  return static_cast<int64_t>(v);
}

// PTX .sat on a float result: clamp to [+0, 1]; NaN and -0 give +0.
float saturate(float v) {
  if (std::isnan(v) || v <= 0.0f) return 0.0f;
  return v > 1.0f ? 1.0f : v;
}

uint16_t bf16Add(uint16_t a, uint16_t b, bool subtract = false) {
  double x = decodeHalf(a, kBF16), y = decodeHalf(b, kBF16);
  return encodeHalf(roundToOdd([&] { return subtract ? opaque(x) - opaque(y) : opaque(x) + opaque(y); }), kBF16);
}
uint16_t bf16Mul(uint16_t a, uint16_t b) {
  // The product of two 8-bit significands is exact in double.
  return encodeHalf(decodeHalf(a, kBF16) * decodeHalf(b, kBF16), kBF16);
}
// PTX min on 16-bit floats: a NaN operand gives the other one, -0 is below +0.
uint16_t halfMin(uint16_t a, uint16_t b, HalfFormat f) {
  bool na = isHalfNaN(a, f), nb = isHalfNaN(b, f);
  if (na && nb) return kCanonicalNaN16;
  if (na) return b;
  if (nb) return a;
  double x = decodeHalf(a, f), y = decodeHalf(b, f);
  if (x == y) return (a & 0x8000) ? a : b;
  return x < y ? a : b;
}

// ---- atomics: the interpreter's schedule replayed ------------------------------------------

// atomics.tir updates the same bytes with atomics of different types, so its results depend on
// the order of the updates. The interpreter's order is documented (docs/interpreter.md): blocks
// one after another, the warps of a block one after another up to a barrier (this kernel has
// none), and within a warp each instruction for all lanes in lane order. The reference replays
// that order; a GPU may interleave differently.
struct AtomicsReference {
  std::array<uint8_t, 8> g{};
  std::array<uint8_t, 4> any{};
  // Per thread, in linear order: the probed values.
  std::vector<std::map<std::string, uint64_t>> probes;

  template <class T>
  static T load(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  template <class T>
  static void store(uint8_t* p, T v) {
    std::memcpy(p, &v, sizeof v);
  }

  void simulate(const Run& run) {
    std::vector<uint32_t> g0 = run.inputArray<uint32_t>("g");
    std::memcpy(g.data(), g0.data(), 8);
    std::vector<uint32_t> any0 = run.inputArray<uint32_t>("any");
    std::memcpy(any.data(), any0.data(), 4);
    const float x = run.get<float>("x");
    const double d = run.get<double>("d");
    const uint16_t h = run.get<uint16_t>("h");
    const uint32_t k = run.get<uint32_t>("k"), mask = run.get<uint32_t>("mask");
    const int64_t j = run.get<int64_t>("j");
    const uint64_t perBlock = run.threadsPerBlock();
    for (uint64_t block = 0; block < run.cfg.grid.total(); ++block) {
      std::array<uint8_t, 64> s{};
      for (uint64_t warp = 0; warp * 32 < perBlock; ++warp) {
        const uint64_t lanes = std::min<uint64_t>(32, perBlock - warp * 32);
        std::vector<std::map<std::string, uint64_t>> v(lanes);
        auto each = [&](auto f) {
          for (uint64_t l = 0; l < lanes; ++l) f(v[l]);
        };
        each([&](auto& p) {  // atom.add.f32 on global memory flushes subnormal inputs and results
          uint32_t old = load<uint32_t>(g.data());
          p["a"] = old;
          store(g.data(), gpuBits(ftz(ftz(f32From(old)) + ftz(x))));
        });
        each([&](auto& p) {
          uint64_t old = load<uint64_t>(g.data());
          p["b"] = old;
          store(g.data(), gpuBits(f64From(old) + d));
        });
        each([&](auto& p) {  // two f16 values add exactly in double
          uint16_t old = load<uint16_t>(g.data());
          p["c"] = old;
          store(g.data(), encodeHalf(decodeHalf(old, kF16) + decodeHalf(h, kF16), kF16));
        });
        each([&](auto& p) {
          uint32_t old = load<uint32_t>(s.data());
          p["e"] = old;
          store(s.data(), old + k);
        });
        each([&](auto& p) {
          int64_t old = load<int64_t>(g.data());
          p["f"] = static_cast<uint64_t>(old);
          store(g.data(), std::max(old, j));
        });
        each([&](auto& p) {
          p["fi"] =
              static_cast<uint32_t>(toInt(std::trunc(static_cast<double>(f32From(p["a"]))), INT32_MIN, INT32_MAX));
        });
        each([&](auto& p) {
          int32_t old = load<int32_t>(s.data());
          p["m"] = static_cast<uint32_t>(old);
          store(s.data(), std::min(old, static_cast<int32_t>(p["fi"])));
        });
        each([&](auto& p) {
          p["n"] = load<uint32_t>(g.data());
          store(g.data(), static_cast<uint32_t>(p["a"]));
        });
        each([&](auto& p) {
          uint32_t old = load<uint32_t>(s.data());
          p["o"] = old;
          store(s.data(), old & mask);
        });
        each([&](auto& p) {
          uint32_t old = load<uint32_t>(g.data());
          p["q"] = old;
          store(g.data(), old >= k ? 0u : old + 1);
        });
        each([&](auto& p) {
          uint32_t old = load<uint32_t>(s.data());
          p["r"] = old;
          store(s.data(), (old == 0 || old > k) ? k : old - 1);
        });
        each([&](auto& p) {
          uint32_t old = load<uint32_t>(any.data());
          p["t"] = old;
          store(any.data(), old + static_cast<uint32_t>(p["fi"]));
        });
        each([&](auto& p) {
          uint32_t old = load<uint32_t>(g.data());
          p["cas"] = old;
          if (old == k) store(g.data(), static_cast<uint32_t>(p["e"]));
        });
        each([&](auto& p) { p["j2"] = static_cast<uint64_t>(j); });
        each([&](auto& p) {
          uint64_t old = load<uint64_t>(s.data());
          p["cas64"] = old;
          if (old == static_cast<uint64_t>(j)) store(s.data(), static_cast<uint64_t>(j));
        });
        each([&](auto& p) { p["hb"] = p["c"]; });
        each([&](auto& p) {
          uint16_t old = load<uint16_t>(any.data());
          p["cas16"] = old;
          if (old == static_cast<uint16_t>(p["hb"])) store(any.data(), static_cast<uint16_t>(p["hb"]));
        });
        for (auto& p : v) probes.push_back(std::move(p));
      }
    }
  }
};

}  // namespace

// ---- atomics.tir -------------------------------------------------------------------------------

GOLDEN_TEST("atomics.tir", "atomics") {
  s.forEach([&](const Run& run, const Outcome& o) {
    AtomicsReference ref;
    ref.simulate(run);
    Checker chk(s.probes, o);
    chk.complete(run.threads());
    for (uint64_t t = 0; t < run.threads(); ++t)
      for (const auto& [name, want] : ref.probes[t]) chk.exact(t, name, want);
    std::vector<uint32_t> g = o.array<uint32_t>("g"), any = o.array<uint32_t>("any");
    chk.bits("g[0]", g[0], AtomicsReference::load<uint32_t>(ref.g.data()));
    chk.bits("g[1]", g[1], AtomicsReference::load<uint32_t>(ref.g.data() + 4));
    chk.bits("any[0]", any[0], AtomicsReference::load<uint32_t>(ref.any.data()));
  });
}

// ---- bf16-sm90.tir -----------------------------------------------------------------------------

// bf16 arithmetic is checked with an independent codec: sums are rounded to odd in double, then
// to bf16 (correct since 53 >= 8 + 2); products of bf16 values are exact in double; fma.rz is
// truncated in double and then to bf16 (truncations compose).
GOLDEN_TEST("bf16-sm90.tir", "bf16_math") {
  s.forEach([&](const Run& run, const Outcome& o) {
    const uint16_t a = run.get<uint16_t>("a"), b = run.get<uint16_t>("b"), h = run.get<uint16_t>("h");
    const int32_t i = run.get<int32_t>("i");
    const uint16_t sum = bf16Add(a, b), diff = bf16Add(a, b, true), prod = bf16Mul(sum, diff);
    const uint16_t exact = bf16Add(prod, a);
    const double A = decodeHalf(a, kBF16), B = decodeHalf(b, kBF16), E = decodeHalf(exact, kBF16);
    const uint16_t fused = encodeHalf(withRounding(FE_TOWARDZERO, [&] { return opaque(A) * opaque(B) + opaque(E); }),
                                      kBF16, Rounding::Zero);
    const uint16_t low = halfMin(fused, a, kBF16);
    const uint16_t mag = isHalfNaN(low, kBF16) ? kCanonicalNaN16 : static_cast<uint16_t>(low & 0x7FFF);
    const uint32_t wide = gpuBits(static_cast<float>(decodeHalf(mag, kBF16)));
    const uint16_t fromInt = encodeHalf(i, kBF16), fromHalf = encodeHalf(decodeHalf(h, kF16), kBF16);
    const bool less = decodeHalf(fromInt, kBF16) < decodeHalf(fromHalf, kBF16);
    const uint16_t pick = less ? a : b;
    Checker chk(s.probes, o);
    chk.complete(run.threads());
    // Every thread adds the same value to %acc, so the sum does not depend on the order; the old
    // values returned are the partial sums in the interpreter's thread order.
    uint16_t acc = run.inputArray<uint16_t>("acc")[0];
    for (uint64_t t = 0; t < run.threads(); ++t) {
      chk.exact(t, "sum", sum);
      chk.exact(t, "diff", diff);
      chk.exact(t, "prod", prod);
      chk.exact(t, "exact", exact);
      chk.exact(t, "fused", fused);
      chk.exact(t, "low", low);
      chk.exact(t, "mag", mag);
      chk.exact(t, "wide", wide);
      chk.exact(t, "whole", static_cast<uint32_t>(toInt(std::trunc(A), INT32_MIN, INT32_MAX)));
      chk.exact(t, "from_int", fromInt);
      chk.exact(t, "from_half", fromHalf);
      chk.exact(t, "to_half", encodeHalf(A, kF16));
      chk.exact(t, "less", less);
      chk.exact(t, "pick", pick);
      chk.exact(t, "old", acc);
      acc = bf16Add(acc, pick);
    }
    chk.bits("acc", o.array<uint16_t>("acc")[0], acc);
    chk.bits("out", o.array<uint32_t>("out")[0], wide);
  });
}

// ---- constants-specials.tir --------------------------------------------------------------------

GOLDEN_TEST("constants-specials.tir", "constants") {
  // The bits of each constant of the golden, as its type holds them.
  const std::pair<const char*, uint64_t> want[] = {
      {"t", 1}, {"f", 0}, {"a", 200}, {"b", 0xFF}, {"c", 0xFF}, {"d", 0xFFFF}, {"e", 0x8000}, {"g", 0xFFFFFFFF},
      {"h", 0x80000000}, {"i", ~uint64_t{0}}, {"j", uint64_t{1} << 63}, {"k", 0xDEADBEEF}, {"l", 0x3F800000},
      {"m", 0xBF000000}, {"n", bitsOf(0.1)}, {"o", 0x3C00}, {"q", 0xC000}, {"r", 0x7BFF}, {"s", 0x7FC00000}};
  s.forEach([&](const Run& run, const Outcome& o) {
    Checker chk(s.probes, o);
    chk.complete(run.threads());
    for (uint64_t t = 0; t < run.threads(); ++t)
      for (auto [name, bits] : want) chk.exact(t, name, bits);
    chk.bits("out", o.array<uint32_t>("out")[0], 0xFFFFFFFF);
  });
}

GOLDEN_TEST("constants-specials.tir", "specials") {
  s.forEach([&](const Run& run, const Outcome& o) {
    Checker chk(s.probes, o);
    chk.complete(run.threads());
    const tn::ir::Dim3 grid = run.cfg.grid, block = run.cfg.block;
    const uint64_t perBlock = block.total();
    for (uint64_t t = 0; t < run.threads(); ++t) {
      uint64_t b = t / perBlock, in = t % perBlock;
      chk.exact(t, "tx", in % block.x);
      chk.exact(t, "ty", in / block.x % block.y);
      chk.exact(t, "tz", in / (block.x * block.y));
      chk.exact(t, "nx", block.x);
      chk.exact(t, "ny", block.y);
      chk.exact(t, "cx", b % grid.x);
      chk.exact(t, "cz", b / (grid.x * grid.y));
      chk.exact(t, "gx", grid.x);
      chk.exact(t, "gy", grid.y);
      chk.exact(t, "lane", in % 32);
      chk.exact(t, "warp", in / 32);
    }
    // Every thread stores its warp index to out[0]; in the interpreter's order (blocks, then
    // warps, one after another) the last warp of the block stores last.
    chk.bits("out", o.array<uint32_t>("out")[0], (perBlock - 1) / 32);
  });
}

GOLDEN_TEST("constants-specials.tir", "fence") {
  s.forEach([&](const Run& run, const Outcome& o) {
    // No outputs: membar.cta, bar.sync and ret run once per thread, and every warp gets past
    // the barrier.
    CHECK(o.stats.threads == run.threads());
    CHECK(o.stats.instructions == 3 * run.threads());
  });
}

// ---- conversions.tir ---------------------------------------------------------------------------

GOLDEN_TEST("conversions.tir", "floats") {
  s.forEach([&](const Run& run, const Outcome& o) {
    const float x = run.get<float>("x");
    const uint16_t h = run.get<uint16_t>("h");
    const double d = run.get<double>("d");
    const float f1 = static_cast<float>(decodeHalf(h, kF16)), f2 = static_cast<float>(d);
    const float f3 = withRounding(FE_DOWNWARD, [&] { return static_cast<float>(opaque(d)); });
    Checker chk(s.probes, o);
    chk.complete(run.threads());
    for (uint64_t t = 0; t < run.threads(); ++t) {
      chk.exact(t, "h1", encodeHalf(x, kF16));
      chk.exact(t, "h2", encodeHalf(x, kF16, Rounding::Zero));
      chk.exact(t, "b1", encodeHalf(x, kBF16));
      chk.exact(t, "b2", encodeHalf(x, kBF16, Rounding::Zero));
      chk.exact(t, "f1", gpuBits(f1));
      chk.exact(t, "f2", gpuBits(f2));
      chk.exact(t, "f3", gpuBits(f3));
      chk.exact(t, "d1", gpuBits(static_cast<double>(x)));
      chk.exact(t, "d2", gpuBits(static_cast<double>(ftz(x))));
      chk.exact(t, "h3", encodeHalf(d, kF16));
      chk.exact(t, "f4", gpuBits(std::nearbyint(x)));
      chk.exact(t, "f5", gpuBits(saturate(x)));
      chk.exact(t, "h4", encodeHalf(std::trunc(decodeHalf(h, kF16)), kF16));
      chk.exact(t, "sum", gpuBits(f1 + f2));
    }
    chk.bits("out", o.array<uint32_t>("out")[0], gpuBits(f1 + f2));
  });
}

GOLDEN_TEST("conversions.tir", "ints_and_floats") {
  s.forEach([&](const Run& run, const Outcome& o) {
    const float x = run.get<float>("x");
    const uint16_t h = run.get<uint16_t>("h");
    const int32_t i = run.get<int32_t>("i");
    const uint64_t u = run.get<uint64_t>("u");
    const uint8_t byte = run.get<uint8_t>("byte");
    const int8_t sbyte = run.get<int8_t>("sbyte");
    const uint32_t bitsIn = run.get<uint32_t>("bits");
    // u64 -> f64 toward zero: keep the top 53 significant bits.
    const int drop = std::max(0, 64 - std::countl_zero(u) - 53);
    const double f = static_cast<double>((u >> drop) << drop);
    const uint32_t q = i < 0 ? 0u : static_cast<uint32_t>(i);
    Checker chk(s.probes, o);
    chk.complete(run.threads());
    for (uint64_t t = 0; t < run.threads(); ++t) {
      chk.exact(t, "a", static_cast<uint64_t>(toInt(std::trunc(static_cast<double>(x)), INT32_MIN, INT32_MAX)));
      chk.exact(t, "b", static_cast<uint64_t>(toInt(std::nearbyint(static_cast<double>(x)), 0, 255)));
      chk.exact(t, "c", static_cast<uint64_t>(toInt(std::floor(static_cast<double>(ftz(x))), INT64_MIN, INT64_MAX)));
      chk.exact(t, "d", static_cast<uint64_t>(toInt(std::trunc(decodeHalf(h, kF16)), INT16_MIN, INT16_MAX)));
      chk.exact(t, "e", gpuBits(static_cast<float>(i)));
      chk.exact(t, "f", bitsOf(f));
      chk.exact(t, "g", encodeHalf(i, kF16));
      chk.exact(t, "k", gpuBits(static_cast<float>(bitsIn)));
      chk.exact(t, "l", byte);
      chk.exact(t, "m", static_cast<uint32_t>(static_cast<int32_t>(sbyte)));
      chk.exact(t, "n", static_cast<uint16_t>(i));
      chk.exact(t, "o", static_cast<uint32_t>(i));
      chk.exact(t, "q", q);
      chk.exact(t, "r", byte);
      chk.exact(t, "s", u);
      chk.exact(t, "t", static_cast<uint64_t>(std::clamp(i, -128, 127)));
      chk.exact(t, "v", bitsIn);
    }
    chk.bits("out", o.array<uint32_t>("out")[0], q);
  });
}

GOLDEN_TEST("conversions.tir", "bitcasts") {
  s.forEach([&](const Run& run, const Outcome& o) {
    Checker chk(s.probes, o);
    chk.complete(run.threads());
    for (uint64_t t = 0; t < run.threads(); ++t) {
      chk.exact(t, "xb", run.scalarBits("x"));
      chk.exact(t, "hb", run.scalarBits("h"));
      chk.exact(t, "db", run.scalarBits("d"));
      chk.exact(t, "back", run.scalarBits("x"));
      chk.exact(t, "hp", run.scalarBits("h"));
    }
    // The pointer went through u64 and back, so the store still lands in out[0].
    chk.bits("out", o.array<uint32_t>("out")[0], run.get<uint32_t>("x"));
  });
}

// ---- bitcast-vectors.tir -----------------------------------------------------------------------

// Each kernel loads its vectors from the start of src, so every bitcast is src's first bytes read
// as one little-endian scalar (Checker::exact keeps the probe's width of them), and the kernel's
// last store leaves the first `stored` of them in dst.
void checkPackedLoads(Session& s, const std::vector<std::string>& names, unsigned stored) {
  s.forEach([&](const Run& run, const Outcome& o) {
    const uint64_t first = run.inputArray<uint64_t>("src")[0];
    const uint64_t mask = stored == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * stored)) - 1;
    const uint64_t before = run.inputArray<uint64_t>("dst")[0];
    Checker chk(s.probes, o);
    chk.complete(run.threads());
    for (uint64_t t = 0; t < run.threads(); ++t)
      for (const std::string& name : names) chk.exact(t, name, first);
    chk.bits("dst", o.array<uint64_t>("dst")[0], (before & ~mask) | (first & mask));
  });
}

GOLDEN_TEST("bitcast-vectors.tir", "bytes") { checkPackedLoads(s, {"h", "w", "f"}, 4); }
GOLDEN_TEST("bitcast-vectors.tir", "halves") { checkPackedLoads(s, {"w", "f", "d"}, 8); }
GOLDEN_TEST("bitcast-vectors.tir", "words") { checkPackedLoads(s, {"d", "q"}, 8); }

// ---- bit-ops.tir -------------------------------------------------------------------------------

// prmt from the PTX ISA's tables, written out independently of ir/LaneSemantics.h: for each mode
// and c[1:0], the source byte of result bytes 3, 2, 1, 0.
uint32_t referencePrmt(uint32_t a, uint32_t b, uint32_t c, int mode) {
  static const int kTables[6][4][4] = {
      {{3, 2, 1, 0}, {4, 3, 2, 1}, {5, 4, 3, 2}, {6, 5, 4, 3}},  // f4e
      {{5, 6, 7, 0}, {6, 7, 0, 1}, {7, 0, 1, 2}, {0, 1, 2, 3}},  // b4e
      {{0, 0, 0, 0}, {1, 1, 1, 1}, {2, 2, 2, 2}, {3, 3, 3, 3}},  // rc8
      {{3, 2, 1, 0}, {3, 2, 1, 1}, {3, 2, 2, 2}, {3, 3, 3, 3}},  // ecl
      {{0, 0, 0, 0}, {1, 1, 1, 0}, {2, 2, 1, 0}, {3, 2, 1, 0}},  // ecr
      {{1, 0, 1, 0}, {3, 2, 3, 2}, {1, 0, 1, 0}, {3, 2, 3, 2}},  // rc16
  };
  uint8_t bytes[8];
  for (int i = 0; i < 4; ++i) {
    bytes[i] = static_cast<uint8_t>(a >> (8 * i));
    bytes[4 + i] = static_cast<uint8_t>(b >> (8 * i));
  }
  uint32_t d = 0;
  for (int i = 0; i < 4; ++i) {
    uint32_t v;
    if (mode < 0) {
      unsigned sel = (c >> (4 * i)) & 0xF;
      v = bytes[sel & 7];
      if (sel & 8) v = (v & 0x80) ? 0xFF : 0;
    } else {
      v = bytes[kTables[mode][c & 3][3 - i]];
    }
    d |= v << (8 * i);
  }
  return d;
}

// lop3 as the sum of its minterms, bit by bit.
uint32_t referenceLop3(uint32_t a, uint32_t b, uint32_t c, uint8_t lut) {
  uint32_t d = 0;
  for (int bit = 0; bit < 32; ++bit) {
    unsigned index = ((a >> bit) & 1) << 2 | ((b >> bit) & 1) << 1 | ((c >> bit) & 1);
    d |= static_cast<uint32_t>((lut >> index) & 1) << bit;
  }
  return d;
}

GOLDEN_TEST("bit-ops.tir", "bits") {
  s.forEach([&](const Run& run, const Outcome& o) {
    const std::vector<uint32_t> x = run.inputArray<uint32_t>("x");
    const std::vector<uint32_t> out = o.array<uint32_t>("out");
    REQUIRE(out.size() == run.threads() * 8);
    for (uint64_t t = 0; t < run.threads(); ++t) {
      uint32_t a = x[2 * t], b = x[2 * t + 1], c = b >> 16;
      uint32_t p[7];
      for (int m = -1; m < 6; ++m) p[m + 1] = referencePrmt(a, b, c, m);
      const uint32_t want[8] = {p[0] ^ p[1], p[2] ^ p[3], p[4] ^ p[5], p[6] ^ referenceLop3(a, b, c, 0x96),
                                referenceLop3(a, b, c, 0xE8), referenceLop3(a, b, c, 0xCA), p[0], p[1]};
      for (int i = 0; i < 8; ++i) {
        INFO("thread " << t << " word " << i << " a 0x" << std::hex << a << " b 0x" << b);
        CHECK(out[8 * t + i] == want[i]);
      }
    }
  });
}

// ---- table.tir ---------------------------------------------------------------------------------

GOLDEN_TEST("table.tir", "first") {
  s.forEach([&](const Run& run, const Outcome& o) {
    const uint32_t i = run.get<uint32_t>("i");
    CHECK(o.array<uint32_t>("out")[0] == i * i);  // the table of squares
  });
}

GOLDEN_TEST("table.tir", "second") {
  s.forEach([&](const Run& run, const Outcome& o) {
    const uint64_t i = run.get<uint32_t>("i");
    const uint64_t wide = i % 2 ? ~uint64_t{0} : 0x0123456789ABCDEFull, half = i % 2 ? 0xFFFF : 1;
    CHECK(o.array<uint64_t>("out")[0] == wide + i * i + half);
  });
}

// ---- cvt-tf32.tir ------------------------------------------------------------------------------

// cvt.rna.tf32.f32 written out independently of ir/LaneSemantics.h: the value rounded to a
// multiple of its tf32 spacing (2^(e-10) for |x| in [2^e, 2^(e+1)), 2^-136 below 2^-126), halves
// away from zero; past the largest tf32 infinity; a NaN's low 13 bits cleared (what an H200 does).
uint32_t referenceTf32(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  if (std::isnan(f)) return bits & ~((1u << 13) - 1);
  if (std::isinf(f)) return bits;
  double x = f;
  int e = 0;
  std::frexp(x, &e);  // |x| = m 2^e, m in [0.5, 1)
  const double spacing = std::fabs(x) < std::ldexp(1.0, -126) ? std::ldexp(1.0, -136) : std::ldexp(1.0, e - 11);
  double r = std::copysign(std::floor(std::fabs(x) / spacing + 0.5) * spacing, x);
  uint32_t maxBits = 0x7F7FE000u;
  float maxTf32;
  std::memcpy(&maxTf32, &maxBits, 4);
  if (std::fabs(r) > maxTf32) r = std::copysign(INFINITY, x);
  float out = static_cast<float>(r);  // exact: r has at most 11 significant bits
  uint32_t ob;
  std::memcpy(&ob, &out, 4);
  return ob;
}

GOLDEN_TEST("cvt-tf32.tir", "tf32") {
  s.forEach([&](const Run& run, const Outcome& o) {
    const std::vector<uint32_t> x = run.inputArray<uint32_t>("x");
    const std::vector<uint32_t> before = run.inputArray<uint32_t>("out");
    const std::vector<uint32_t> out = o.array<uint32_t>("out");
    const uint64_t n = run.scalarBits("n");
    REQUIRE(out.size() == x.size());
    for (size_t t = 0; t < x.size(); ++t) {
      INFO("thread " << t << " x 0x" << std::hex << x[t]);
      CHECK(out[t] == (t < n ? referenceTf32(x[t]) : before[t]));
    }
  });
}

// ---- cvt-fp8.tir -------------------------------------------------------------------------------

// cvt.f16x2 written out independently of ir/LaneSemantics.h: each code's value from its fields
// (ir/Float8.h), rounded to f16 by ir/Float16.h (exact: every fp8 value is an f16); NaN the
// canonical NaN.
uint32_t referenceFp8Pair(tn::ir::Fp8Format f, uint16_t codes) {
  auto half = [&](uint8_t code) -> uint32_t {
    const double v = tn::ir::fp8Value(f, code);
    return std::isnan(v) ? 0x7FFFu : tn::ir::f64ToF16(v);
  };
  return half(uint8_t(codes >> 8)) << 16 | half(uint8_t(codes & 0xFF));
}

GOLDEN_TEST("cvt-fp8.tir", "fp8") {
  s.forEach([&](const Run& run, const Outcome& o) {
    const std::vector<uint16_t> x = run.inputArray<uint16_t>("x");
    const uint64_t n = run.scalarBits("n");
    for (const auto& output : {std::pair{"e4", tn::ir::Fp8Format::E4M3}, std::pair{"e5", tn::ir::Fp8Format::E5M2}}) {
      const char* name = output.first;
      const tn::ir::Fp8Format format = output.second;
      const std::vector<uint32_t> before = run.inputArray<uint32_t>(name), out = o.array<uint32_t>(name);
      for (size_t t = 0; t < out.size() && t < x.size(); ++t) {
        INFO(name << " thread " << t << " codes 0x" << std::hex << x[t]);
        CHECK(out[t] == (t < n ? referenceFp8Pair(format, x[t]) : before[t]));
      }
    }
  });
}

// Every pair of codes of both formats, on the lane semantics the interpreter and const-fold share.
TEST_CASE("interp: cvt.f16x2 converts every pair of fp8 codes exactly") {
  for (const tn::ir::Fp8Format f : {tn::ir::Fp8Format::E4M3, tn::ir::Fp8Format::E5M2}) {
    size_t wrong = 0;
    for (uint32_t codes = 0; codes < 0x10000; ++codes)
      wrong += tn::ir::lane::cvtF16x2Fp8(f == tn::ir::Fp8Format::E4M3, codes) != referenceFp8Pair(f, uint16_t(codes));
    CHECK_MESSAGE(wrong == 0, (f == tn::ir::Fp8Format::E4M3 ? "e4m3" : "e5m2") << ": " << wrong << " pairs differ");
  }
}

// ---- cp-async.tir ------------------------------------------------------------------------------

GOLDEN_TEST("cp-async.tir", "stage") {
  s.forEach([&](const Run& run, const Outcome& o) {
    const std::vector<uint32_t> src = run.inputArray<uint32_t>("src");
    const std::vector<uint32_t> dst = o.array<uint32_t>("dst");
    const uint32_t n = static_cast<uint32_t>(run.scalarBits("n"));
    std::vector<uint32_t> want(224);
    for (uint32_t t = 0; t < 32; ++t) {
      uint32_t u = t ^ 1;
      for (uint32_t i = 0; i < 4; ++i) want[4 * t + i] = src[4 * u + i];
      for (uint32_t i = 0; i < 2; ++i) {  // bytes past src-size n are zero-filled
        uint32_t w = src[128 + 2 * u + i];
        uint32_t kept = n >= 4 * (i + 1) ? 4 : n > 4 * i ? n - 4 * i : 0;
        want[128 + 2 * t + i] = kept == 4 ? w : w & ((1u << (8 * kept)) - 1);
      }
      want[192 + t] = src[192 + u];
    }
    for (size_t i = 0; i < want.size(); ++i) {
      INFO("word " << i << " n " << n);
      CHECK(dst[i] == want[i]);
    }
  });
  SUBCASE("fault: src-size 9 exceeds the 8-byte copy") {
    Run big = s.runs.front();
    big.scalars = {{"n", 9}};
    Outcome o = execute(s.module, "stage", big, s.probes);
    REQUIRE(o.error);
    CHECK(o.error->kind == ErrorKind::AsyncCopy);
    CHECK(o.error->text() == faultAt("cp-async.tir", "cp.async.ca %t8",
                                     "cp.async src-size 9 exceeds the copy size of 8 bytes (undefined in PTX) in "
                                     "kernel 'stage', block (0,0,0) thread (0,0,0)"));
  }
}

// ---- mbarrier.tir ------------------------------------------------------------------------------

// Every block copies src into its own 32 words of dst.
GOLDEN_TEST("mbarrier.tir", "handoff") {
  s.forEach([&](const Run& run, const Outcome& o) {
    std::vector<uint32_t> src = run.inputArray<uint32_t>("src"), want;
    for (uint32_t b = 0; b < run.cfg.grid.x; ++b) want.insert(want.end(), src.begin(), src.end());
    CHECK(o.array<uint32_t>("dst") == want);
  });
}

// ---- named-barrier.tir -------------------------------------------------------------------------

// Warp 1 copies out the words warp 0 staged, its lanes' thread indices, into the block's 32 words.
GOLDEN_TEST("named-barrier.tir", "handoff") {
  s.forEach([&](const Run& run, const Outcome& o) {
    std::vector<uint32_t> want(32 * run.cfg.grid.x);
    for (uint32_t t = 0; t < want.size(); ++t) want[t] = t % 32;
    CHECK(o.array<uint32_t>("out") == want);
  });
  SUBCASE("fault: warp 1 waits for more threads than ever arrive") {
    Run more = s.runs.front();
    more.scalars = {{"n", 64}};
    Outcome o = execute(s.module, "handoff", more, s.probes);
    REQUIRE(o.error);
    CHECK(o.error->kind == ErrorKind::Deadlock);
    const std::string text = o.error->text();
    CHECK(text.starts_with(faultAt("named-barrier.tir", "bar.named.sync 2",
                                   "deadlock: the block's threads all wait and no named barrier they wait at can "
                                   "complete; warp 1 waits at bar.named.sync 2 (")));
    CHECK(text.ends_with("), 32 of its 64 threads arrived; 32 threads of the block have exited in kernel 'handoff', "
                         "block (0,0,0) thread (32,0,0)"));
  }
}

// ---- tmap-param.tir ----------------------------------------------------------------------------

GOLDEN_TEST("tmap-param.tir", "copy") {
  s.forEach([&](const Run& run, const Outcome& o) {
    CHECK(o.array<uint32_t>("dst") == run.inputArray<uint32_t>("src"));
  });
}

// ---- tma.tir -----------------------------------------------------------------------------------

// out = 2 in on the tensor's elements; the padding past each row's extent keeps its bits.
GOLDEN_TEST("tma.tir", "tile_scale") {
  s.forEach([&](const Run& run, const Outcome& o) {
    const std::vector<float> in = run.inputArray<float>("in");
    const std::vector<uint32_t> before = run.inputArray<uint32_t>("out");
    const std::vector<uint32_t> out = o.array<uint32_t>("out");
    const uint64_t cols = run.tensorMaps[0].desc.dims[0], stride = run.tensorMaps[0].desc.strides[0] / 4;
    REQUIRE(out.size() == in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      INFO("element " << i % stride << ", row " << i / stride);
      CHECK(out[i] == (i % stride < cols ? gpuBits(in[i] + in[i]) : before[i]));
    }
  });
}

// ---- tma-3d.tir --------------------------------------------------------------------------------

// out = in on the box's in-bounds elements (row padding and plane padding excluded); the rest of
// out keeps its bits.
GOLDEN_TEST("tma-3d.tir", "planes") {
  s.forEach([&](const Run& run, const Outcome& o) {
    const std::vector<uint32_t> in = run.inputArray<uint32_t>("in"), before = run.inputArray<uint32_t>("out");
    const std::vector<uint32_t> out = o.array<uint32_t>("out");
    const tn::interp::TensorMapDesc& d = run.tensorMaps[0].desc;
    auto scalar = [&](const char* name) {
      for (const auto& [n, bits] : run.scalars)
        if (n == name) return static_cast<int64_t>(static_cast<int32_t>(bits));
      FAIL("no scalar " << name);
      return int64_t{0};
    };
    const int64_t x = scalar("x"), y = scalar("y"), z = scalar("z");
    const uint64_t stride = d.strides[0] / 4, plane = d.strides[1] / 4;
    REQUIRE(out.size() == in.size());
    size_t copied = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      const int64_t p = static_cast<int64_t>(i / plane), r = static_cast<int64_t>(i % plane / stride),
                    c = static_cast<int64_t>(i % plane % stride);
      const bool inTensor = c < static_cast<int64_t>(d.dims[0]) && r < static_cast<int64_t>(d.dims[1]) && i % plane < stride * d.dims[1];
      const bool inBox = c >= x && c < x + 8 && r >= y && r < y + 4 && p >= z && p < z + 16;
      INFO("element " << c << ", row " << r << ", plane " << p);
      CHECK(out[i] == (inTensor && inBox ? in[i] : before[i]));
      copied += inTensor && inBox;
    }
    MESSAGE("copied " << copied << " elements");
  });
}

// ---- warpgroup.tir -----------------------------------------------------------------------------

GOLDEN_TEST("warpgroup.tir", "split") {
  s.forEach([&](const Run&, const Outcome& o) {
    std::vector<uint32_t> want(256);
    for (uint32_t t = 0; t < 256; ++t) want[t] = t;
    CHECK(o.array<uint32_t>("out") == want);
  });
  SUBCASE("fault: setmaxnreg is .sync.aligned, a partial warp is divergent") {
    Run partial = s.runs.front();
    partial.cfg.block.x = 144;  // warp 4 holds 16 threads
    Outcome o = execute(s.module, "split", partial, s.probes);
    REQUIRE(o.error);
    CHECK(o.error->kind == ErrorKind::DivergentBarrier);
    CHECK(o.error->text() == faultAt("warpgroup.tir", "setmaxnreg.inc 232",
                                     "divergent setmaxnreg.inc: it needs all 32 lanes of warp 4 converged, but only 16 "
                                     "arrive (the block's threads fill only 16 lanes of the warp) in kernel 'split', "
                                     "block (0,0,0) thread (128,0,0)"));
  }
}

// ---- wgmma.tir ---------------------------------------------------------------------------------

// D = A·B over K = 64 in double against the interpreter's f32 (the 4 k-steps accumulate in f32
// with one rounding per product-add: each term may add one f32 rounding of the running sum).
// A is 64 x 64 row-major, or its transpose with trans_a; B is N x 64 K-major (Bt[n][k]), or
// 64 x N with trans_b.
void checkWgmmaGolden(const Session& s, HalfFormat format, unsigned n, bool transB, bool transA = false) {
  s.forEach([&](const Run& run, const Outcome& o) {
    std::vector<uint16_t> a = run.inputArray<uint16_t>("a"), b = run.inputArray<uint16_t>("b");
    std::vector<float> d = o.array<float>("d");
    REQUIRE(d.size() == 64 * n);
    unsigned bad = 0;
    for (unsigned m = 0; m < 64; ++m)
      for (unsigned j = 0; j < n; ++j) {
        double want = 0, magnitude = 0;
        for (unsigned k = 0; k < 64; ++k) {
          double x = decodeHalf(transA ? a[k * 64 + m] : a[m * 64 + k], format);
          double y = decodeHalf(transB ? b[k * n + j] : b[j * 64 + k], format);
          want += x * y;
          magnitude += std::fabs(x * y);
        }
        double tolerance = 64 * std::ldexp(magnitude, -24);
        if (std::fabs(d[m * n + j] - want) > tolerance && ++bad <= 5)
          CHECK_MESSAGE(false, "D[" << m << "][" << j << "] = " << d[m * n + j] << ", want " << want << " +- "
                                    << tolerance);
      }
    CHECK(bad == 0);
  });
}

GOLDEN_TEST("wgmma.tir", "gemm_bf16_n64") { checkWgmmaGolden(s, kBF16, 64, false); }
GOLDEN_TEST("wgmma.tir", "gemm_f16_n128_tb") { checkWgmmaGolden(s, kF16, 128, true); }
GOLDEN_TEST("wgmma.tir", "gemm_bf16_n256_rega") { checkWgmmaGolden(s, kBF16, 256, false); }
GOLDEN_TEST("wgmma.tir", "kloop_bf16_n128") { checkWgmmaGolden(s, kBF16, 128, false); }
GOLDEN_TEST("wgmma.tir", "gemm_bf16_n64_ta") { checkWgmmaGolden(s, kBF16, 64, false, true); }

// ---- wgmma-fp8.tir -----------------------------------------------------------------------------

// D = A·Bᵀ over K = 128 codes in double against the interpreter's f32 (the products are exact in
// f32; each of the 128 adds may round the running sum once).
void checkWgmmaFp8Golden(const Session& s, tn::ir::Fp8Format format) {
  s.forEach([&](const Run& run, const Outcome& o) {
    std::vector<uint8_t> a = run.inputArray<uint8_t>("a"), b = run.inputArray<uint8_t>("b");
    std::vector<float> d = o.array<float>("d");
    REQUIRE(d.size() == 64 * 64);
    unsigned bad = 0;
    for (unsigned m = 0; m < 64; ++m)
      for (unsigned j = 0; j < 64; ++j) {
        double want = 0, magnitude = 0;
        for (unsigned k = 0; k < 128; ++k) {
          double x = tn::ir::fp8Value(format, a[m * 128 + k]), y = tn::ir::fp8Value(format, b[j * 128 + k]);
          want += x * y;
          magnitude += std::fabs(x * y);
        }
        double tolerance = 128 * std::ldexp(magnitude, -24);
        if (std::fabs(d[m * 64 + j] - want) > tolerance && ++bad <= 5)
          CHECK_MESSAGE(false, "D[" << m << "][" << j << "] = " << d[m * 64 + j] << ", want " << want << " +- "
                                    << tolerance);
      }
    CHECK(bad == 0);
  });
}

GOLDEN_TEST("wgmma-fp8.tir", "gemm_e4m3_n64") { checkWgmmaFp8Golden(s, tn::ir::Fp8Format::E4M3); }
GOLDEN_TEST("wgmma-fp8.tir", "gemm_e5m2_n64") { checkWgmmaFp8Golden(s, tn::ir::Fp8Format::E5M2); }

// ---- mma-fp8.tir -------------------------------------------------------------------------------

GOLDEN_TEST("mma-fp8.tir", "mma_fp8") {
  using tn::mmaref::Form;
  s.forEach([&](const Run& run, const Outcome& o) {
    const std::vector<uint32_t> a = run.inputArray<uint32_t>("a"), b = run.inputArray<uint32_t>("b"),
                                c = run.inputArray<uint32_t>("c");
    const std::vector<uint32_t> got = o.array<uint32_t>("d");
    REQUIRE(got.size() == 512);
    const Form forms[] = {Form::E4m3F32, Form::E5m2F32, Form::E4m3E5m2F32, Form::E5m2E4m3F32};
    for (unsigned f = 0; f < 4; ++f) {
      const std::vector<uint32_t> want = tn::mmaref::mma(forms[f], a, b, c);
      for (unsigned i = 0; i < 128; ++i) {
        INFO("format " << f << " lane " << i / 4 << " word " << i % 4);
        CHECK(hex(got[128 * f + i]) == hex(want[i]));
      }
    }
  });
}

// ---- dynamic-shared.tir ------------------------------------------------------------------------

GOLDEN_TEST("dynamic-shared.tir", "scale") {
  s.forEach([&](const Run& run, const Outcome& o) {
    Checker chk(s.probes, o);
    chk.complete(run.threads());
    const uint32_t perBlock = run.cfg.block.x;
    for (uint64_t t = 0; t < run.threads(); ++t) {
      uint32_t tid = static_cast<uint32_t>(t % perBlock);
      chk.exact(t, "v", 0);  // shared memory starts zeroed for every block
      chk.exact(t, "off", 4 * tid);
      chk.exact(t, "goff", 4 * tid);
    }
    std::vector<uint32_t> before = run.inputArray<uint32_t>("data"), after = o.array<uint32_t>("data");
    for (size_t i = 0; i < before.size(); ++i)
      chk.bits("data[" + std::to_string(i) + "]", after[i], i < perBlock ? 0 : before[i]);
  });
  SUBCASE("faults: a block wider than @tile.lo, dynamic shared memory smaller than the block") {
    // Thread 32's store lands on @param_n, which follows @tile.lo: its pointer came from
    // @tile.lo's shared.addr, so the interpreter reports it there, not only thread 33's past the
    // end of @param_n.
    Run wide = s.runs.back();
    wide.buffers = {{"data", std::vector<std::byte>(64 * 4)}};
    wide.cfg.block.x = 34;
    wide.cfg.dynamicShared = 34 * 4;
    Outcome o = execute(s.module, "scale", wide, s.probes);
    REQUIRE(o.error);
    CHECK(o.error->kind == ErrorKind::OutOfBounds);
    CHECK(o.error->text() == faultAt("dynamic-shared.tir", "st %lslot",
                                     "out-of-bounds st.shared of 4 bytes at offset 0 of '@param_n' (4 bytes) through a "
                                     "pointer into '@tile.lo' (128 bytes) in kernel 'scale', block (0,0,0) thread (32,0,0)"));
    Run small = wide;
    small.cfg.block.x = 8;
    small.cfg.dynamicShared = 7 * 4;
    o = execute(s.module, "scale", small, s.probes);
    REQUIRE(o.error);
    CHECK(o.error->kind == ErrorKind::OutOfBounds);
    CHECK(o.error->text() == faultAt("dynamic-shared.tir", "%v = ld",
                                     "out-of-bounds ld.shared of 4 bytes at offset 28 of '@smem' (28 bytes) in kernel "
                                     "'scale', block (0,0,0) thread (7,0,0)"));
  }
}

GOLDEN_TEST("dynamic-shared.tir", "copy") {
  s.forEach([&](const Run& run, const Outcome& o) {
    Checker chk(s.probes, o);
    chk.complete(run.threads());
    std::vector<uint32_t> data = run.inputArray<uint32_t>("data");
    for (uint64_t t = 0; t < run.threads(); ++t) chk.exact(t, "v", data[0]);
    CHECK(o.array<uint32_t>("data") == data);
  });
  SUBCASE("fault: no dynamic shared memory") {
    Run none = s.runs.front();
    none.cfg.dynamicShared = 0;
    Outcome o = execute(s.module, "copy", none, s.probes);
    REQUIRE(o.error);
    CHECK(o.error->kind == ErrorKind::OutOfBounds);
  }
}

// ---- fast-math.tir -----------------------------------------------------------------------------

// Tolerances: the approximate ops (ex2, lg2, sin, cos, tanh, rsqrt, rcp/sqrt/div .approx and
// .full) are computed by the interpreter in double and rounded to f32 (docs/interpreter.md:
// correctly rounded, within 1 ulp where the double result sits on a rounding boundary), so they
// are compared within 1 ulp of the double-precision reference; rsqrt.approx.f64 (1/sqrt in
// double, two roundings) within 2 ulp; rcp.approx.ftz.f64 is defined on the upper 32 bits only,
// relative error below 2^-20 twice (input and result truncated to 20 fraction bits), checked as
// 2^-18. Everything else (rn/rz/rm/rp arithmetic, fma, .exact, .ftz, .sat) is exact.
GOLDEN_TEST("fast-math.tir", "fast_math") {
  s.forEach([&](const Run& run, const Outcome& o) {
    const float x = run.get<float>("x"), y = run.get<float>("y");
    const double d = run.get<double>("d");
    const uint16_t h = run.get<uint16_t>("h");
    const double X = x, H = decodeHalf(h, kF16);
    const float fx = ftz(x), fy = ftz(y);
    Checker chk(s.probes, o);
    chk.complete(run.threads());
    for (uint64_t t = 0; t < run.threads(); ++t) {
      chk.near(t, "e", chk.probeF32(t, "e"), ftz(static_cast<float>(std::exp2(static_cast<double>(fx)))), 1);
      chk.nearF32(t, "l", std::log2(X), 1);
      chk.nearF32(t, "s", std::sin(X), 1);
      chk.near(t, "c", chk.probeF32(t, "c"), ftz(static_cast<float>(std::cos(static_cast<double>(fx)))), 1);
      chk.nearF32(t, "t", std::tanh(X), 1);
      chk.exact(t, "r1", gpuBits(1.0f / x));
      chk.near(t, "r2", chk.probeF32(t, "r2"), ftz(1.0f / fx), 1);
      chk.exact(t, "r3", gpuBits(withRounding(FE_TOWARDZERO, [&] { return 1.0 / opaque(d); })));
      {  // rcp.approx.ftz.f64
        double got = chk.probeF64(t, "r4"), dz = std::fpclassify(d) == FP_SUBNORMAL ? std::copysign(0.0, d) : d;
        double want = 1.0 / dz;
        std::string what = "thread " + std::to_string(t) + " %r4 = " + hex(bitsOf(got));
        chk.expect((bitsOf(got) & 0xFFFFFFFF) == 0, what + ": the low 32 bits must be 0");
        if (std::isnan(want))
          chk.expect(std::isnan(got), what + ": want NaN");
        else if (std::isinf(want) || want == 0)
          chk.expect(got == want && std::signbit(got) == std::signbit(want), what + ": want " + hex(bitsOf(want)));
        else if (std::fabs(want) < std::ldexp(1.0, -1021))
          chk.expect(got == 0 || std::fabs(got - want) <= std::ldexp(std::fabs(want), -18),
                     what + ": want about " + std::to_string(want));
        else
          chk.expect(std::fabs(got - want) <= std::ldexp(std::fabs(want), -18),
                     what + ": want about " + hex(bitsOf(want)));
      }
      chk.nearF32(t, "q1", 1.0 / std::sqrt(X), 1);
      chk.nearF64(t, "q2", 1.0 / std::sqrt(d), 2);
      chk.exact(t, "s1", gpuBits(std::sqrt(x)));
      chk.near(t, "s2", chk.probeF32(t, "s2"), ftz(std::sqrt(fx)), 1);
      chk.exact(t, "s3", gpuBits(withRounding(FE_DOWNWARD, [&] { return std::sqrt(opaque(d)); })));
      chk.exact(t, "v1", gpuBits(x / y));
      {  // div.approx: correctly rounded for |y| <= 2^126; above it zero, or NaN for an infinite x
        float got = chk.probeF32(t, "v2");
        if (std::fabs(y) > 0x1p126f && !std::isnan(y)) {
          std::string what = "thread " + std::to_string(t) + " %v2 = " + hex(bitsOf(got));
          if (std::isinf(x) || std::isnan(x))
            chk.bits(what, bitsOf(got), kCanonicalNaN32);
          else
            chk.expect(got == 0, what + ": want 0");
        } else {
          chk.near(t, "v2", got, x / y, 1);
        }
      }
      chk.near(t, "v3", chk.probeF32(t, "v3"), ftz(fx / fy), 1);
      chk.exact(t, "v4", gpuBits(d / d));
      // The rest: exact, from the probed inputs of each op.
      const float e = chk.probeF32(t, "e"), l = chk.probeF32(t, "l"), sn = chk.probeF32(t, "s");
      const float c = chk.probeF32(t, "c"), th = chk.probeF32(t, "t");
      chk.exact(t, "f1", gpuBits(std::fma(x, y, e)));
      {  // fma.rz.ftz.sat: the product is exact in double; truncating twice truncates once
        const double L = ftz(l);
        float r = withRounding(FE_TOWARDZERO,
                               [&] { return static_cast<float>(opaque(static_cast<double>(fx)) * fy + opaque(L)); });
        chk.exact(t, "f2", gpuBits(saturate(ftz(r))));
      }
      const uint16_t f3 = encodeHalf(H * H + H, kF16);  // h*h + h is exact in double for any f16 h
      chk.exact(t, "f3", f3);
      const float m1 = chk.probeF32(t, "m1"), a1 = chk.probeF32(t, "a1"), a2 = chk.probeF32(t, "a2");
      chk.exact(t, "m1", gpuBits(x * y));
      chk.exact(t, "a1", gpuBits(m1 + sn));
      chk.exact(t, "a2", gpuBits(withRounding(FE_TOWARDZERO, [&] { return opaque(a1) - opaque(c); })));
      chk.exact(t, "a3", gpuBits(saturate(ftz(ftz(a2) + ftz(th)))));
      chk.exact(t, "a4", encodeHalf(decodeHalf(static_cast<uint16_t>(chk.probe(t, "f3")), kF16) + H, kF16));
      chk.exact(t, "m2", gpuBits(withRounding(FE_UPWARD, [&] { return opaque(d) * opaque(d); })));
    }
    const float a2 = chk.probeF32(0, "a2"), th = chk.probeF32(0, "t");
    chk.bits("out", o.array<uint32_t>("out")[0], gpuBits(saturate(ftz(ftz(a2) + ftz(th)))));
  });
}

// ---- guarded-store.tir -------------------------------------------------------------------------

GOLDEN_TEST("guarded-store.tir", "guarded_store") {
  s.forEach([&](const Run& run, const Outcome& o) {
    Checker chk(s.probes, o);
    const uint32_t n = run.get<uint32_t>("n"), value = run.get<uint32_t>("value");
    std::vector<uint32_t> before = run.inputArray<uint32_t>("out"), after = o.array<uint32_t>("out");
    for (uint32_t i = 0; i < before.size(); ++i)
      chk.bits("out[" + std::to_string(i) + "]", after[i], i < n && i < run.cfg.block.x ? value : before[i]);
  });
}

GOLDEN_TEST("guarded-store.tir", "guarded_parity") {
  s.forEach([&](const Run& run, const Outcome& o) {
    Checker chk(s.probes, o);
    const uint32_t n = run.get<uint32_t>("n"), value = run.get<uint32_t>("value");
    std::vector<uint32_t> before = run.inputArray<uint32_t>("out"), after = o.array<uint32_t>("out");
    for (uint32_t i = 0; i < before.size(); ++i) {
      uint32_t want = i < n && i < run.cfg.block.x ? (i % 2 == 0 ? value : 0u - value) : before[i];  // neg wraps
      chk.bits("out[" + std::to_string(i) + "]", after[i], want);
    }
  });
}

// ---- integer.tir -------------------------------------------------------------------------------

GOLDEN_TEST("integer.tir", "integer") {
  auto dp4a = [](uint32_t a, uint32_t b, uint32_t c, bool isSigned) {
    uint32_t sum = c;
    for (int i = 0; i < 4; ++i) {
      uint32_t x = (a >> (8 * i)) & 0xFF, y = (b >> (8 * i)) & 0xFF;
      int32_t p = isSigned ? static_cast<int8_t>(x) * static_cast<int8_t>(y) : static_cast<int32_t>(x * y);
      sum += static_cast<uint32_t>(p);
    }
    return sum;
  };
  s.forEach([&](const Run& run, const Outcome& o) {
    const uint32_t a = run.get<uint32_t>("a"), f = run.get<uint32_t>("f");
    const int32_t b = run.get<int32_t>("b");
    const int16_t c = run.get<int16_t>("c");
    const uint64_t d = run.get<uint64_t>("d"), e = run.get<uint64_t>("e");
    const uint8_t g = run.get<uint8_t>("g");
    const uint32_t dp = dp4a(static_cast<uint32_t>(b), static_cast<uint32_t>(b), static_cast<uint32_t>(b), true);
    Checker chk(s.probes, o);
    chk.complete(run.threads());
    for (uint64_t t = 0; t < run.threads(); ++t) {
      chk.exact(t, "m1", a * a);
      chk.exact(t, "m2", static_cast<uint64_t>((int64_t{b} * b) >> 32));
      chk.exact(t, "m3", static_cast<uint32_t>(int32_t{c} * c));
      chk.exact(t, "m4", e * e + e);
      chk.exact(t, "m5", uint64_t{a} * a);
      chk.exact(t, "q1", 1);
      chk.exact(t, "q2", 0);
      chk.exact(t, "s1", static_cast<uint32_t>(std::clamp<int64_t>(int64_t{b} + b, INT32_MIN, INT32_MAX)));
      chk.exact(t, "s2", 0);
      chk.exact(t, "n1", static_cast<uint16_t>(c));
      chk.exact(t, "n2", d);
      chk.exact(t, "n3", 0 - e);
      chk.exact(t, "n4", b < 0 ? 0u - static_cast<uint32_t>(b) : static_cast<uint32_t>(b));
      chk.exact(t, "h1", f << 5);
      chk.exact(t, "h2", f >> 5);
      chk.exact(t, "h3", static_cast<uint32_t>(b >> 5));
      chk.exact(t, "h4", d >> 5);
      chk.exact(t, "h5", static_cast<uint16_t>(static_cast<uint16_t>(c) << 5));
      chk.exact(t, "c1", static_cast<uint32_t>(std::popcount(f)));
      chk.exact(t, "c2", static_cast<uint32_t>(std::countl_zero(d)));
      chk.exact(t, "o1", f);
      chk.exact(t, "o2", a);
      chk.exact(t, "o3", 0);
      chk.exact(t, "o4", ~f);
      chk.exact(t, "o5", g);
      chk.exact(t, "o6", static_cast<uint8_t>(~g));
      chk.exact(t, "dp", dp);
      chk.exact(t, "du", dp4a(a, a, a, false));
      chk.exact(t, "sub", 0);
      chk.exact(t, "sum", static_cast<uint16_t>(2 * c));
    }
    chk.bits("out", o.array<uint32_t>("out")[0], dp);
  });
  SUBCASE("fault: %b = 0 divides by zero") {
    Run zero = s.runs.front();
    for (auto& [name, bits] : zero.scalars)
      if (name == "b") bits = 0;
    Outcome o = execute(s.module, "integer", zero, s.probes);
    REQUIRE(o.error);
    CHECK(o.error->kind == ErrorKind::DivisionByZero);
    CHECK(o.error->text() ==
          faultAt("integer.tir", "%q1 = div",
                  "integer division by zero in div.s32 in kernel 'integer', block (0,0,0) thread (0,0,0)"));
  }
}

// ---- kernel-select.tir and target-sm90a.tir ----------------------------------------------------

namespace {

// @first and @id store tid.x to out[0] from every thread; in the interpreter's order (blocks,
// warps, lanes one after another) the last thread of the last block stores last.
void checkTidStore(const Session& s) {
  s.forEach([&](const Run& run, const Outcome& o) {
    Checker chk(s.probes, o);
    chk.complete(run.threads());
    for (uint64_t t = 0; t < run.threads(); ++t) chk.exact(t, "t", t % run.threadsPerBlock() % run.cfg.block.x);
    chk.bits("out", o.array<uint32_t>("out")[0], run.cfg.block.x - 1);
  });
}

}  // namespace

GOLDEN_TEST("kernel-select.tir", "first") { checkTidStore(s); }

GOLDEN_TEST("target-sm90a.tir", "id") { checkTidStore(s); }

GOLDEN_TEST("kernel-select.tir", "second") {
  s.forEach([&](const Run& run, const Outcome& o) {
    Checker chk(s.probes, o);
    chk.complete(run.threads());
    for (uint64_t t = 0; t < run.threads(); ++t) chk.exact(t, "v", 0);  // dynamic shared memory starts zeroed
    chk.bits("out", o.array<uint32_t>("out")[0], 0);
  });
}

// ---- kernel-hints.tir --------------------------------------------------------------------------

namespace {

// minnctapersm and maxnreg are hints to ptxas; the kernels compute what they would without them:
// every thread loads x[0] and stores it to y[0].
void checkCopyFirst(const Session& s) {
  s.forEach([&](const Run& run, const Outcome& o) {
    Checker chk(s.probes, o);
    chk.complete(run.threads());
    const uint32_t x = run.inputArray<uint32_t>("x")[0];
    for (uint64_t t = 0; t < run.threads(); ++t) chk.exact(t, "v", x);
    chk.bits("y", o.array<uint32_t>("y")[0], x);
  });
}

}  // namespace

GOLDEN_TEST("kernel-hints.tir", "copy") { checkCopyFirst(s); }
GOLDEN_TEST("kernel-hints.tir", "exact") { checkCopyFirst(s); }
GOLDEN_TEST("kernel-hints.tir", "capped") { checkCopyFirst(s); }

// ---- loop-carried.tir --------------------------------------------------------------------------

GOLDEN_TEST("loop-carried.tir", "fib") {
  s.forEach([&](const Run& run, const Outcome& o) {
    uint32_t a = 0, b = 1;
    for (uint32_t i = 0; i < run.get<uint32_t>("steps"); ++i) {
      uint32_t next = a + b;
      a = b;
      b = next;
    }
    CHECK(o.array<uint32_t>("out")[0] == a);
  });
}

GOLDEN_TEST("loop-carried.tir", "swap") {
  s.forEach([&](const Run& run, const Outcome& o) {
    // do { i++; if (i < rounds) swap(x, y); else break; } — the result is y.
    uint32_t x = run.get<uint32_t>("x0"), y = run.get<uint32_t>("y0");
    for (uint32_t i = 1; i < run.get<uint32_t>("rounds"); ++i) std::swap(x, y);
    CHECK(o.array<uint32_t>("out")[0] == y);  // moved, never computed on: the bits survive, NaN payloads too
  });
}

GOLDEN_TEST("loop-carried.tir", "rotate") {
  s.forEach([&](const Run& run, const Outcome& o) {
    uint32_t a = run.get<uint32_t>("a0"), b = run.get<uint32_t>("b0"), c = run.get<uint32_t>("c0");
    for (int32_t k = run.get<int32_t>("count"); k > 0; --k) {
      uint32_t t = a;
      a = b;
      b = c;
      c = t;
    }
    CHECK(o.array<uint32_t>("out")[0] == a);
  });
}

// ---- output-file.tir ---------------------------------------------------------------------------

GOLDEN_TEST("output-file.tir", "fill") {
  s.forEach([&](const Run& run, const Outcome& o) {
    CHECK(o.array<uint32_t>("out")[0] == run.get<uint32_t>("value"));
  });
}

// ---- reg-reuse.tir ----------------------------------------------------------------------------

GOLDEN_TEST("reg-reuse.tir", "squares") {
  s.forEach([&](const Run& run, const Outcome& o) {
    const float x = run.get<float>("x"), y = run.get<float>("y");
    std::vector<uint32_t> out = o.array<uint32_t>("out");
    CHECK(out[0] == gpuBits(x * x));
    CHECK(out[1] == gpuBits(y * y));
  });
}

// ---- setp-selp.tir -----------------------------------------------------------------------------

GOLDEN_TEST("setp-selp.tir", "compare") {
  s.forEach([&](const Run& run, const Outcome& o) {
    const uint32_t u = run.get<uint32_t>("u"), x = run.get<uint32_t>("x");
    const int32_t sv = run.get<int32_t>("s");
    const double d = run.get<double>("d");
    const uint16_t h = run.get<uint16_t>("h");
    const bool p1 = u < 7, p2 = sv >= -3, p3 = true, p4 = false;
    const bool p5 = std::isnan(f32From(x)), p6 = std::isnan(d);  // x < x only when unordered
    const bool p7 = false, p8 = true;                            // h > h never; x == x or unordered
    const bool any = p1 || p2, both = any && p3, flip = both != p4, none = !flip;
    Checker chk(s.probes, o);
    chk.complete(run.threads());
    for (uint64_t t = 0; t < run.threads(); ++t) {
      const bool ps[] = {p1, p2, p3, p4, p5, p6, p7, p8};
      for (int i = 0; i < 8; ++i) chk.exact(t, "p" + std::to_string(i + 1), ps[i]);
      chk.exact(t, "any", any);
      chk.exact(t, "both", both);
      chk.exact(t, "flip", flip);
      chk.exact(t, "none", none);
      chk.exact(t, "f", x);  // selp moves bits: a NaN keeps its payload
      chk.exact(t, "g", run.scalarBits("d"));
      chk.exact(t, "i", none ? u : 7u);
      chk.exact(t, "j", h);
      chk.exact(t, "k", run.get<uint8_t>("c"));
    }
    // x goes to out[0] when u < 7, else to alt[0]; the other buffer keeps its value.
    chk.bits("out", o.array<uint32_t>("out")[0], p1 ? x : run.inputArray<uint32_t>("out")[0]);
    chk.bits("alt", o.array<uint32_t>("alt")[0], p1 ? run.inputArray<uint32_t>("alt")[0] : x);
  });
}

// ---- shared-barrier.tir ------------------------------------------------------------------------

GOLDEN_TEST("shared-barrier.tir", "reverse") {
  s.forEach([&](const Run& run, const Outcome& o) {
    Checker chk(s.probes, o);
    std::vector<uint32_t> before = run.inputArray<uint32_t>("data"), after = o.array<uint32_t>("data");
    for (size_t i = 0; i < before.size(); ++i)
      chk.bits("data[" + std::to_string(i) + "]", after[i], before[i / 128 * 128 + 127 - i % 128]);
  });
  SUBCASE("the race check reports every thread's store to @flag") {
    // All 128 threads store tid.x to @flag[0] with no barrier between: a write-write race (on a
    // GPU, one of the values survives; nothing reads it).
    Run checked = s.runs.front();
    checked.opts.checkRaces = true;
    Outcome o = execute(s.module, "reverse", checked, s.probes);
    REQUIRE(o.error);
    CHECK(o.error->kind == ErrorKind::SharedRace);
  }
  SUBCASE("a block of another size than reqntid(128) is refused") {
    Run other = s.runs.front();
    other.cfg.block.x = 127;
    Outcome o = execute(s.module, "reverse", other, s.probes);
    REQUIRE(o.error);
    CHECK(o.error->text() == "error: block (127,1,1) does not match the kernel's reqntid (128,1,1)");
  }
}

// ---- vadd.tir ----------------------------------------------------------------------------------

GOLDEN_TEST("vadd.tir", "vadd") {
  s.forEach([&](const Run& run, const Outcome& o) {
    Checker chk(s.probes, o);
    std::vector<float> a = run.inputArray<float>("a"), b = run.inputArray<float>("b"), c = o.array<float>("c");
    for (size_t i = 0; i < a.size(); ++i) chk.bits("c[" + std::to_string(i) + "]", bitsOf(c[i]), gpuBits(a[i] + b[i]));
  });
}

// ---- vector-access.tir -------------------------------------------------------------------------

GOLDEN_TEST("vector-access.tir", "vectors") {
  s.forEach([&](const Run& run, const Outcome& o) {
    const std::vector<uint32_t> src = run.inputArray<uint32_t>("src");
    // The loop adds pair i of src to the accumulator and swaps its lanes every iteration.
    uint32_t acc0 = src[3], acc1 = src[0];
    for (uint32_t i = 0; i < run.get<uint32_t>("n"); ++i) {
      uint32_t n0 = gpuBits(f32From(acc0) + f32From(src[2 * i]));
      uint32_t n1 = gpuBits(f32From(acc1) + f32From(src[2 * i + 1]));
      acc0 = n1;
      acc1 = n0;
    }
    Checker chk(s.probes, o);
    chk.complete(run.threads());
    for (uint64_t t = 0; t < run.threads(); ++t) {
      for (unsigned l = 0; l < 4; ++l) chk.exact(t, "v4", src[l], l);
      chk.exact(t, "x", src[0]);
      chk.exact(t, "w", src[3]);
      chk.exact(t, "pair", src[3], 0);
      chk.exact(t, "pair", src[0], 1);
      chk.exact(t, "acc", acc0, 0);
      chk.exact(t, "acc", acc1, 1);
      for (unsigned l = 0; l < 4; ++l) chk.exact(t, "halves", 0, l);  // @stage starts zeroed
      chk.exact(t, "d2", uint64_t{src[1]} << 32 | src[0], 0);
      chk.exact(t, "d2", uint64_t{src[3]} << 32 | src[2], 1);
      for (unsigned l = 0; l < 4; ++l) chk.exact(t, "bytes", (src[0] >> (8 * l)) & 0xFF, l);
    }
    // dst: bytes 0..3 from the v4.u8 store (over acc's lane 0), 4..7 acc lane 1, 8..15 untouched,
    // 16..31 the v4.f32, 32..47 the v2.f64 (both copies of src[0..16)).
    std::vector<uint32_t> before = run.inputArray<uint32_t>("dst"), dst = o.array<uint32_t>("dst");
    const uint32_t want[12] = {src[0], acc1,   before[2], before[3], src[0], src[1],
                               src[2], src[3], src[0],    src[1],    src[2], src[3]};
    for (int i = 0; i < 12; ++i) chk.bits("dst[" + std::to_string(i) + "]", dst[i], want[i]);
  });
}

// The parameters' lanes as a launch passes them: out gets v's 16 bytes, then w's lane 3 over its
// bytes 16..23, then b's two bytes over v's first.
GOLDEN_TEST("vector-access.tir", "vector_params") {
  s.forEach([&](const Run& run, const Outcome& o) {
    const std::vector<uint32_t> v = run.vectorLanes<uint32_t>("v");
    const std::vector<uint64_t> w = run.vectorLanes<uint64_t>("w");
    const std::vector<uint8_t> b = run.vectorLanes<uint8_t>("b");
    std::vector<uint32_t> before = run.inputArray<uint32_t>("out"), out = o.array<uint32_t>("out");
    Checker chk(s.probes, o);
    chk.complete(run.threads());
    for (uint64_t t = 0; t < run.threads(); ++t) chk.exact(t, "x", w[3]);
    const uint32_t want[8] = {(v[0] & 0xFFFF0000u) | b[0] | uint32_t(b[1]) << 8, v[1], v[2], v[3],
                              uint32_t(w[3]), uint32_t(w[3] >> 32), before[6], before[7]};
    for (int i = 0; i < 8; ++i) chk.bits("out[" + std::to_string(i) + "]", out[i], want[i]);
  });
}

// ---- warp-reduce.tir ---------------------------------------------------------------------------

GOLDEN_TEST("warp-reduce.tir", "warp_sum") {
  s.forEach([&](const Run& run, const Outcome& o) {
    const std::vector<uint32_t> x = run.inputArray<uint32_t>("x");
    // Every warp reads x[lane]: the same values in every warp.
    uint32_t r16[32], r8[32], s4[32], r4[32];
    auto add = [](uint32_t a, uint32_t b) { return gpuBits(f32From(a) + f32From(b)); };
    for (unsigned l = 0; l < 32; ++l) r16[l] = add(x[l], x[l ^ 16]);
    for (unsigned l = 0; l < 32; ++l) r8[l] = add(r16[l], r16[l ^ 8]);
    for (unsigned l = 0; l < 32; ++l) s4[l] = l + 4 <= 31 ? r8[l + 4] : r8[l];  // down past the clamp keeps its own
    for (unsigned l = 0; l < 32; ++l) r4[l] = add(r8[l], s4[l]);
    Checker chk(s.probes, o);
    chk.complete(run.threads());
    for (uint64_t t = 0; t < run.threads(); ++t) {
      unsigned l = t % 32;
      chk.exact(t, "v", x[l]);
      chk.exact(t, "r16", r16[l]);
      chk.exact(t, "r8", r8[l]);
      chk.exact(t, "s4", s4[l]);
      chk.exact(t, "r4", r4[l]);
      chk.exact(t, "total", r4[0]);
      chk.exact(t, "up", l == 0 ? 0 : l - 1);  // up by 1 with clamp 0: lane 0 keeps its own value
      chk.exact(t, "first", l == 0);
      chk.exact(t, "votes", 1);  // only lane 0 votes true
      chk.exact(t, "any", 1);
      chk.exact(t, "every", 0);
      chk.exact(t, "same", 0);
      chk.exact(t, "flag", 0);
    }
    // With any lane other than 0, the flag is false in full warps: nothing is written.
    CHECK(o.array<uint32_t>("sums") == run.inputArray<uint32_t>("sums"));
  });
  SUBCASE("fault: a partial warp is named by the full membermask") {
    Run partial = s.runs.front();
    partial.cfg.block.x = 33;
    Outcome o = execute(s.module, "warp_sum", partial, s.probes);
    REQUIRE(o.error);
    CHECK(o.error->kind == ErrorKind::CollectiveMask);
    CHECK(o.error->text() ==
          faultAt("warp-reduce.tir", "%s16 = shfl",
                  "shfl.sync.bfly membermask 0xffffffff names lane 1, which does not exist (the block has "
                  "33 threads) in kernel 'warp_sum', block (0,0,0) thread (32,0,0)"));
  }
}

GOLDEN_TEST("tensor-cores.tir", "tensor_cores") {
  using tn::mmaref::Form;
  s.forEach([&](const Run& run, const Outcome& o) {
    const std::vector<uint32_t> a = run.inputArray<uint32_t>("a"), b = run.inputArray<uint32_t>("b"),
                                c = run.inputArray<uint32_t>("c");
    std::vector<uint32_t> want = run.inputArray<uint32_t>("d");
    // Region r of d is 128 words, 4 per lane; `used` of them are stored.
    auto expect = [&](unsigned region, const std::vector<uint32_t>& words, unsigned used) {
      for (unsigned l = 0; l < 32; ++l)
        for (unsigned w = 0; w < used; ++w) want[128 * region + 4 * l + w] = words[4 * l + w];
    };
    const Form forms[] = {Form::Bf16F32, Form::F16F32, Form::F16F16, Form::Tf32F32, Form::S8S32, Form::U8S32};
    for (unsigned f = 0; f < 6; ++f) expect(f, tn::mmaref::mma(forms[f], a, b, c), forms[f] == Form::F16F16 ? 2 : 4);
    // Row R of the shared tile is lane R's A fragment, 8 b16 elements.
    std::vector<std::vector<uint16_t>> rows(32, std::vector<uint16_t>(8));
    for (unsigned r = 0; r < 32; ++r)
      for (unsigned k = 0; k < 8; ++k) rows[r][k] = static_cast<uint16_t>(a[4 * r + k / 2] >> (16 * (k % 2)));
    expect(6, tn::mmaref::ldmatrix(rows, 4, false), 4);
    expect(7, tn::mmaref::ldmatrix(rows, 2, true), 2);
    expect(8, tn::mmaref::ldmatrix(rows, 1, false), 1);
    std::vector<uint32_t> packs(128);
    for (unsigned l = 0; l < 32; ++l) {
      float x = f32From(c[4 * l]), y = f32From(c[4 * l + 1]);
      using tn::ir::RoundMode;
      packs[4 * l] = uint32_t{tn::ir::f32ToBf16(x)} << 16 | tn::ir::f32ToBf16(y);
      packs[4 * l + 1] = uint32_t{tn::ir::f32ToF16(x, RoundMode::Zero)} << 16 | tn::ir::f32ToF16(y, RoundMode::Zero);
    }
    expect(9, packs, 2);
    std::vector<uint32_t> got = o.array<uint32_t>("d");
    for (size_t i = 0; i < want.size(); ++i) {
      INFO("region " << i / 128 << " lane " << (i % 128) / 4 << " word " << i % 4);
      CHECK(got[i] == want[i]);
    }
  });
  SUBCASE("fault: a block of 16 threads is not a full warp") {
    Run partial = s.runs.front();
    partial.cfg.block.x = 16;
    Outcome o = execute(s.module, "tensor_cores", partial, s.probes);
    REQUIRE(o.error);
    CHECK(o.error->kind == ErrorKind::DivergentBarrier);
    CHECK(o.error->text() ==
          faultAt("tensor-cores.tir", "%d0 = mma",
                  "divergent mma: it needs all 32 lanes of warp 0 converged, but only 16 arrive (the block's "
                  "threads fill only 16 lanes of the warp) in kernel 'tensor_cores', block (0,0,0) thread (0,0,0)"));
  }
}

// ---- coverage ----------------------------------------------------------------------------------

TEST_CASE("interp golden: every kernel of every lit PTX golden has an interpreter test") {
  namespace fs = std::filesystem;
  std::set<std::pair<std::string, std::string>> present;
  const fs::path dir = fs::path(TRUENOC_SOURCE_DIR) / "lit-tests" / "emit-ptx";
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    std::string file = e.path().filename().string();
    if (e.path().extension() != ".tir" || file.rfind("errors", 0) == 0) continue;
    tn::ir::Module m = parseSourceFile("lit-tests/emit-ptx/" + file);
    for (const tn::ir::Kernel& k : m.kernels) present.insert({file, k.name});
  }
  auto list = [](const std::set<std::pair<std::string, std::string>>& s) {
    std::string out;
    for (const auto& [f, k] : s) out += "  " + f + " @" + k + "\n";
    return out;
  };
  std::set<std::pair<std::string, std::string>> tested = registeredGoldens(), missing, stale;
  std::set_difference(present.begin(), present.end(), tested.begin(), tested.end(),
                      std::inserter(missing, missing.end()));
  std::set_difference(tested.begin(), tested.end(), present.begin(), present.end(), std::inserter(stale, stale.end()));
  INFO("golden kernels without an interpreter test:\n" << list(missing));
  INFO("tests of golden kernels that no longer exist:\n" << list(stale));
  CHECK(missing.empty());
  CHECK(stale.empty());
  CHECK(present.count({"vadd.tir", "vadd"}) == 1);  // the directory was found and read
  // The scenarios that the -O0/-O2 equivalence test runs are those of the runnable kernels.
  std::set<std::pair<std::string, std::string>> scenarios, runnable;
  for (const GoldenCase& c : goldenCases()) scenarios.insert({c.file, c.kernel});
  std::set_difference(present.begin(), present.end(), kNotRunnable.begin(), kNotRunnable.end(),
                      std::inserter(runnable, runnable.end()));
  CHECK(scenarios == runnable);
}
