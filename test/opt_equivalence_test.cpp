// -O0 against -O2 (with the default --fp-contract=fast) in the interpreter, on the same fresh
// random inputs (the seed is printed on failure; TRUENOC_TEST_SEED=N replays one) and odd sizes:
// both examples (examples/*.tir, their builder modules in kernels/Examples.h and their
// templates) and every runnable kernel of the lit PTX
// goldens, with the probes of test/interp_goldens_test.cpp so that the values the goldens
// compute but do not store are compared too. The library templates of docs/kernels.md are
// checked at -O0 and -O2 against their references by their own tests (LIBRARY_TEST).
//
// Tolerance: every -O2 pass except fma-fusion keeps results bit-identical (const-fold folds a
// float op only when the result is the GPU's bits; cse, dce and strength-reduce do not change
// values), so integer results must be identical and float results may differ only where
// fma-fusion contracted a product: fma(a, b, c) and a*b + c differ by at most the rounding of
// the product, |a*b| * 2^-24 for f32, which then propagates. Each kernel states the bound that
// follows for its float outputs; where -O2 has no more fma ops than -O0 (nothing contracted),
// its float results must be bit-identical as well.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "interp_harness.h"
#include "kernels/Examples.h"
#include "kernels/Template.h"
#include "compiler/Compile.h"

namespace {

using namespace tn::harness;

struct Compiled {
  tn::ir::Module o0, o2;
  unsigned contractions = 0;  // fma ops in -O2 beyond those of -O0
};

// Instructions of m that are op (all instructions when op is empty).
unsigned countOps(const tn::ir::Module& m, std::optional<tn::ir::Op> op = std::nullopt) {
  unsigned n = 0;
  for (const tn::ir::Kernel& k : m.kernels)
    for (const tn::ir::Block& b : k.blocks)
      for (tn::ir::InstId i : b.insts) n += !op || k.inst(i).op == *op;
  return n;
}

// Runs -O0 and -O2 on two copies of m; both must succeed without errors and verify.
bool runPipeline(tn::ir::Module& m, tn::compile::Level level, tn::ir::Diagnostics& d) {
  tn::compile::Options o;
  o.level = level;
  tn::passes::PassOptions options = tn::compile::passOptions(o);
  tn::passes::PassRunner r = tn::compile::makeRunner(m, d, options);
  // -O2 is legalized as compile() does before emission, so that the lowering is compared too.
  bool ok = tn::compile::runPipeline(r, level) && (level == tn::compile::Level::O0 || r.run("legalize"));
  return ok && !d.hasErrors();
}

Compiled compile(const tn::ir::Module& m) {
  Compiled c{m, m};
  tn::ir::Diagnostics d0, d2;
  bool ok0 = runPipeline(c.o0, tn::compile::Level::O0, d0);
  INFO("-O0:\n" << diagnosticsText(d0));
  REQUIRE(ok0);
  bool ok2 = runPipeline(c.o2, tn::compile::Level::O2, d2);
  INFO("-O2:\n" << diagnosticsText(d2));
  REQUIRE(ok2);
  for (const tn::ir::Module* out : {&c.o0, &c.o2}) {
    tn::ir::Diagnostics v;
    tn::ir::verify(*out, v);
    INFO(diagnosticsText(v) << tn::ir::print(*out));
    REQUIRE_FALSE(v.hasErrors());
  }
  unsigned f0 = countOps(c.o0, tn::ir::Op::Fma), f2 = countOps(c.o2, tn::ir::Op::Fma);
  c.contractions = f2 > f0 ? f2 - f0 : 0;
  return c;
}

struct Pair {
  Outcome o0, o2;
};

// Runs one launch on both modules; both must succeed.
Pair runBoth(const Compiled& c, const std::string& kernel, const Run& run, const Probes& probes = {}) {
  Pair p{execute(c.o0, kernel, run, probes), execute(c.o2, kernel, run, probes)};
  INFO("-O0: " << (p.o0.error ? p.o0.error->text() : "ok"));
  INFO("-O2: " << (p.o2.error ? p.o2.error->text() : "ok"));
  REQUIRE_FALSE(p.o0.error);
  REQUIRE_FALSE(p.o2.error);
  return p;
}

// The index of the first byte where two buffers differ, or -1.
long firstDifference(const std::vector<std::byte>& a, const std::vector<std::byte>& b) {
  if (a.size() != b.size()) return 0;
  auto [x, y] = std::mismatch(a.begin(), a.end(), b.begin());
  return x == a.end() ? -1 : static_cast<long>(x - a.begin());
}

// ---- examples and templates ------------------------------------------------------------------

// The float outputs of a kernel and the bound on |O0 - O2| per element that contraction allows.
struct FloatOutput {
  std::string buffer;
  std::function<double(const Run&, size_t index)> bound;
};

// How to run one kernel of the examples or the kernel library.
struct Setup {
  std::function<std::vector<Run>(std::mt19937&, const tn::ir::Kernel&)> runs;
  std::vector<FloatOutput> floats;  // every other buffer is compared byte for byte
};

bool hasParam(const tn::ir::Kernel& k, const std::string& name) {
  return std::any_of(k.params.begin(), k.params.end(),
                     [&](const tn::ir::KernelParam& p) { return k.value(p.value).name == name; });
}

std::vector<float> uniformFloats(std::mt19937& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

const std::map<std::string, Setup>& setups() {
  static const std::map<std::string, Setup> all = {
      {"vadd",
       {[](std::mt19937& rng, const tn::ir::Kernel& k) {
          std::vector<Run> runs;
          const uint32_t block = k.maxntid ? k.maxntid->x : 256;
          for (uint32_t n : {1u, 31u, 33u, 1001u, 4097u}) {
            Run r;
            r.label = "vadd n=" + std::to_string(n);
            r.cfg = {{(n + block - 1) / block, 1, 1}, {block, 1, 1}, 0};
            r.buffer("a", uniformFloats(rng, n, -100, 100)).buffer("b", uniformFloats(rng, n, -100, 100));
            r.buffer("c", std::vector<float>(n, std::nanf(""))).bits("n", n);
            runs.push_back(std::move(r));
          }
          return runs;
        },
        // c = a + b has no product: nothing to contract, so no difference is allowed.
        {{"c", [](const Run&, size_t) { return 0.0; }}}}},
      {"row_sum",
       {[](std::mt19937& rng, const tn::ir::Kernel& k) {
          std::vector<Run> runs;
          for (auto [rows, cols] :
               std::vector<std::pair<uint32_t, uint32_t>>{{1, 1}, {3, 31}, {2, 33}, {3, 257}, {2, 1001}}) {
            Run r;
            r.label = "row_sum " + std::to_string(rows) + "x" + std::to_string(cols);
            r.cfg = {{rows, 1, 1}, {256, 1, 1}, 0};
            r.buffer("x", uniformFloats(rng, size_t{rows} * cols, -100, 100));
            r.buffer("y", std::vector<float>(rows, std::nanf(""))).bits("cols", cols);
            if (hasParam(k, "rows")) r.bits("rows", rows);
            runs.push_back(std::move(r));
          }
          return runs;
        },
        // Only additions: nothing to contract, so the results must be bit-identical. The bound
        // if a product were ever contracted into the sum: each contraction shifts one rounding
        // of a partial sum by at most 2^-24 of it (<= sum |x|), and an element passes through
        // at most cols/256 + 8 roundings (its thread's chain, then 5 + 3 butterfly steps):
        // (cols/256 + 8) * 2^-24 * sum |x|, under 1e-5 * sum |x| for rows below 40000.
        {{"y",
          [](const Run& r, size_t row) {
            std::vector<float> x = r.inputArray<float>("x");
            uint32_t cols = r.get<uint32_t>("cols");
            double magnitude = 0;
            for (uint32_t i = 0; i < cols; ++i) magnitude += std::fabs(x[row * cols + i]);
            return (cols / 256.0 + 8) * 0x1p-24 * magnitude;
          }}}}},
  };
  return all;
}

// Runs setup `name` on m (kernel `kernel`) at -O0 and -O2 and compares the outputs.
void checkEquivalent(const tn::ir::Module& m, const std::string& kernel, const std::string& name) {
  auto it = setups().find(name);
  REQUIRE_MESSAGE(it != setups().end(), "no equivalence setup for '" << name << "'");
  const Setup& setup = it->second;
  const tn::ir::Kernel* k = nullptr;
  for (const tn::ir::Kernel& kk : m.kernels)
    if (kk.name == kernel) k = &kk;
  REQUIRE(k);
  Compiled c = compile(m);
  const unsigned seed = testSeed();
  INFO("random seed " << seed);
  std::mt19937 rng(seed);
  for (const Run& run : setup.runs(rng, *k)) {
    INFO(describe(run));
    Pair p = runBoth(c, kernel, run);
    for (const auto& [buffer, bytes0] : p.o0.buffers) {
      CAPTURE(buffer);
      const std::vector<std::byte>& bytes2 = p.o2.buffers.at(buffer);
      auto fo = std::find_if(setup.floats.begin(), setup.floats.end(),
                             [&](const FloatOutput& f) { return f.buffer == buffer; });
      if (fo == setup.floats.end() || c.contractions == 0) {
        CHECK(firstDifference(bytes0, bytes2) == -1);
        continue;
      }
      std::vector<float> y0 = p.o0.array<float>(buffer), y2 = p.o2.array<float>(buffer);
      size_t bad = 0;
      for (size_t i = 0; i < y0.size(); ++i)
        if (!(std::fabs(double{y0[i]} - y2[i]) <= fo->bound(run, i))) ++bad;
      CHECK(bad == 0);
    }
  }
}

}  // namespace

TEST_CASE("opt equivalence: -O0 and -O2 agree on the examples") {
  for (std::string name : {"vadd", "row_sum"}) {
    CAPTURE(name);
    checkEquivalent(parseSourceFile("examples/" + name + ".tir"), name, name);
  }
}

TEST_CASE("opt equivalence: -O0 and -O2 agree on the builder modules of kernels/Examples.h") {
  checkEquivalent(tn::kernels::buildVaddModule(), "vadd", "vadd");
  checkEquivalent(tn::kernels::buildRowSumModule(), "row_sum", "row_sum");
}

// The library's own templates (docs/kernels.md) run their tests at -O0 and at -O2 against a
// reference instead (LIBRARY_TEST in test/library_harness.h); the example templates run here.
TEST_CASE("opt equivalence: -O0 and -O2 agree on the example templates") {
  for (const char* name : {"vadd", "row_sum"}) {
    const tn::kernels::Template* t = tn::kernels::findTemplate(tn::kernels::templates(), name);
    REQUIRE(t);
    CAPTURE(t->name);
    tn::ir::Diagnostics diags;
    std::optional<tn::ir::Module> m = t->build(t->defaults(), diags);
    INFO(diagnosticsText(diags));
    REQUIRE(m);
    REQUIRE(m->kernels.size() == 1);
    checkEquivalent(*m, m->kernels.front().name, t->name);
  }
}

TEST_CASE("opt equivalence: -O0 and -O2 agree on every runnable kernel of the lit PTX goldens") {
  const unsigned seed = testSeed();
  INFO("random seed " << seed);
  std::mt19937 rng(seed);
  std::set<std::string> files;
  unsigned instructions0 = 0, instructions2 = 0;
  for (const GoldenCase& g : goldenCases()) {
    INFO(g.file << " @" << g.kernel);
    files.insert(g.file);
    const std::vector<Run> runs = g.runs(rng);
    // Once as written (-O2 may drop what is not stored), once with the probes added before the
    // passes (-O2 must keep every probed value and compute it the same way).
    for (bool probed : {false, true}) {
      CAPTURE(probed);
      Probes probes;
      tn::ir::Module m = parseSourceFile("lit-tests/emit-ptx/" + g.file);
      if (probed) probes = addProbes(m, g.kernel, g.probeBlock, g.probes);
      // Each kernel is compiled alone: the checkers must not see its neighbours in the file.
      std::erase_if(m.kernels, [&](const tn::ir::Kernel& k) { return k.name != g.kernel; });
      Compiled c = compile(m);
      instructions0 += countOps(c.o0);
      instructions2 += countOps(c.o2);
      // No golden has a product that fma-fusion may contract (their float multiplies are
      // .exact, explicitly rounded or feed an .exact add), so the tolerance is zero: every byte
      // of every buffer, probes included, must be the same.
      CHECK(c.contractions == 0);
      for (const Run& run : runs) {
        INFO(describe(run));
        Pair p = runBoth(c, g.kernel, run, probes);
        for (const auto& [buffer, bytes0] : p.o0.buffers) {
          CAPTURE(buffer);
          long at = firstDifference(bytes0, p.o2.buffers.at(buffer));
          CHECK(at == -1);
        }
      }
    }
  }
  CHECK(files.size() >= 15);
  // -O2 did rewrite the goldens, so the runs above compared different code.
  CHECK(instructions2 < instructions0);
}
