// Probes of the sm_90a machinery (spec test/library/hopper_probes.toml): what
// ../shared/docs/tensor-cores.md §8 leaves to be confirmed on hardware, asked with operands whose
// values say where they came from. On the interpreter (and the simulated driver) the probes pin
// truenoc's model of TC's formulas; on an H100 ("gpu library: hopper probe …") a failure names
// the element the hardware put elsewhere, which is where the model and the hardware disagree.
//   - wgmma (TC§4, §8 point 7): the goldens of lit-tests/emit-ptx/wgmma.tir, every form (K- and
//     MN-major descriptors, A from registers, trans_a, a k-loop), with D = A·B encoding each
//     output's row and column, then A = I reading each row's own k, then random operands
//     against a double reference.
//   - TMA with the 128-byte swizzle (TC§4.5, §8 point 5): one box at the tensor's edges, its
//     shared bytes as they lie, zero fill outside, and the phase completing with the filled bytes.
//   - elect.sync (TC§8 point 6): the lane it picks from a full mask and from lanes 4-7.
//   - A TMA load and store over a tensor that is not a multiple of the box (lit-tests/emit-ptx/tma.tir).
#include <cmath>
#include <cstring>
#include <sstream>

#include "ir/Float16.h"
#include "library_harness.h"

using namespace tn::libtest;

namespace {

struct WgmmaForm {
  const char* kernel;
  unsigned n;
  bool f16;     // else bf16
  bool transA;  // A given as its transpose: a[k * 64 + m]
  bool transB;  // B given as 64 x N (b[k * n + j]); else as N x 64, K-major (b[j * 64 + k])
};

constexpr WgmmaForm kForms[] = {
    {"gemm_bf16_n64", 64, false, false, false},       {"gemm_f16_n128_tb", 128, true, false, true},
    {"gemm_bf16_n256_rega", 256, false, false, false}, {"kloop_bf16_n128", 128, false, false, false},
    {"gemm_bf16_n64_ta", 64, false, true, false},
};

uint16_t half(const WgmmaForm& f, double v) { return f.f16 ? tn::ir::f64ToF16(v) : tn::ir::f64ToBf16(v); }
double value(const WgmmaForm& f, uint16_t h) { return f.f16 ? tn::ir::f16ToF32(h) : tn::ir::bf16ToF32(h); }

// Runs the form on A (64 x 64) and B (64 x N) given as functions of (m, k) and (k, j), in the
// kernel's storage order; returns D (64 x N, row-major) and the operands as stored.
struct WgmmaRun {
  std::vector<uint16_t> a, b;
  std::vector<float> d;
};
template <class FA, class FB>
WgmmaRun runWgmma(Runner& r, const WgmmaForm& f, FA aOf, FB bOf) {
  WgmmaRun w{std::vector<uint16_t>(64 * 64), std::vector<uint16_t>(64 * f.n), {}};
  for (unsigned m = 0; m < 64; ++m)
    for (unsigned k = 0; k < 64; ++k) w.a[f.transA ? k * 64 + m : m * 64 + k] = half(f, aOf(m, k));
  for (unsigned k = 0; k < 64; ++k)
    for (unsigned j = 0; j < f.n; ++j) w.b[f.transB ? k * f.n + j : j * 64 + k] = half(f, bOf(k, j));
  Outputs out = r.run(Call("hopper_probes", f.kernel)
                          .buffer("a", w.a)
                          .buffer("b", w.b)
                          .buffer("d", std::vector<float>(64 * f.n, -1.0f)));
  w.d = out.get<float>("d");
  REQUIRE(w.d.size() == 64 * f.n);
  return w;
}

// Where D[m][j] is not `want(m, j)`, says what the value decodes to (at most five places).
template <class Want, class Decode>
void expectEncoded(const WgmmaForm& f, const std::vector<float>& d, Want want, Decode decode, const char* pass) {
  unsigned bad = 0;
  std::ostringstream first;
  for (unsigned m = 0; m < 64; ++m)
    for (unsigned j = 0; j < f.n; ++j)
      if (d[m * f.n + j] != want(m, j) && ++bad <= 5)
        first << "\n  D[" << m << "][" << j << "] = " << d[m * f.n + j] << ", want " << want(m, j) << ": "
              << decode(d[m * f.n + j]);
  CHECK_MESSAGE(bad == 0, f.kernel << ", " << pass << ": " << bad << " of " << 64 * f.n << " outputs differ"
                                   << first.str());
}

}  // namespace

LIBRARY_TEST("hopper probe: wgmma's operand and accumulator layouts (TC§4, §8 point 7)", hopperWgmma) {
  std::mt19937 rng(seed());
  for (const WgmmaForm& f : kForms) {
    INFO(f.kernel);
    // Rows and columns: A = [m, 1, 0...] and B's rows 0 and 1 = [1...], [64 j...], so D[m][j] =
    // m + 64 j exactly (at most 16383: exact in bf16 operands and the f32 sum).
    WgmmaRun rc = runWgmma(
        r, f, [](unsigned m, unsigned k) { return k == 0 ? double(m) : k == 1 ? 1.0 : 0.0; },
        [](unsigned k, unsigned j) { return k == 0 ? 1.0 : k == 1 ? 64.0 * j : 0.0; });
    expectEncoded(
        f, rc.d, [](unsigned m, unsigned j) { return float(m + 64 * j); },
        [](float v) {
          const long i = std::lround(v);
          return v == float(i) && i >= 0 ? "the value of D[" + std::to_string(i % 64) + "][" + std::to_string(i / 64) + "]"
                                         : std::string("no element's value");
        },
        "D = m + 64 j");
    // K: A = I and B[k][j] = k, so D[m][j] = m, read from k = m in every k-step of K = 64.
    WgmmaRun k = runWgmma(
        r, f, [](unsigned m, unsigned kk) { return m == kk ? 1.0 : 0.0; },
        [](unsigned kk, unsigned) { return double(kk); });
    expectEncoded(
        f, k.d, [](unsigned m, unsigned) { return float(m); },
        [](float v) { return "row m took B's row k = " + std::to_string(std::lround(v)) + " (A = I)"; }, "A = I");
    // Random operands against a double reference; each of the 64 product-adds may round once in f32.
    std::uniform_real_distribution<double> dist(-2.0, 2.0);
    std::vector<double> av(64 * 64), bv(64 * f.n);
    for (double& v : av) v = dist(rng);
    for (double& v : bv) v = dist(rng);
    WgmmaRun rnd = runWgmma(
        r, f, [&](unsigned m, unsigned kk) { return av[m * 64 + kk]; },
        [&](unsigned kk, unsigned j) { return bv[kk * f.n + j]; });
    std::vector<double> want(64 * f.n);
    for (unsigned m = 0; m < 64; ++m)
      for (unsigned j = 0; j < f.n; ++j) {
        double sum = 0;
        for (unsigned kk = 0; kk < 64; ++kk)
          sum += value(f, half(f, av[m * 64 + kk])) * value(f, half(f, bv[kk * f.n + j]));
        want[m * f.n + j] = sum;
      }
    // |terms| <= 4, so every partial sum is at most 256: 64 additions, each off by at most one
    // f32 ulp of 256 (2^-16) even if the hardware truncates where the interpreter rounds.
    expectClose(rnd.d, want, 64 * std::ldexp(1.0, -16), 0.0, std::string(f.kernel) + " random");
  }
}

namespace {

// The 128-byte swizzle of TC§4.5: within each 1024-byte atom of eight 128-byte rows, the
// 16-byte chunk c of row r lands at chunk c ^ (r % 8).
uint32_t swizzle128(uint32_t offset) { return offset ^ (((offset >> 7) & 7) << 4); }

}  // namespace

LIBRARY_TEST("hopper probe: a TMA box with the 128-byte swizzle at a tensor's edges; elect.sync's lane", hopperTma) {
  // The tensor: rows of ld = 64 16-bit elements (128 bytes), element (x, y) = 1 + 64 y + x, so a
  // zero is fill and any other value names its source.
  struct Box {
    int32_t x0, y0;
    uint32_t cols, rows;
  };
  for (const Box& box : {Box{0, 0, 64, 16}, Box{0, 8, 64, 20}, Box{-8, 3, 50, 16}, Box{16, -5, 40, 9}}) {
    INFO("box at (" << box.x0 << ", " << box.y0 << ") of a " << box.cols << " x " << box.rows << " tensor");
    constexpr uint32_t ld = 64;
    std::vector<uint16_t> in(size_t{ld} * box.rows);
    for (uint32_t y = 0; y < box.rows; ++y)
      for (uint32_t x = 0; x < ld; ++x) in[y * ld + x] = static_cast<uint16_t>(1 + 64 * y + x);
    Outputs out = r.run(Call("hopper_probes", "tma_swizzle")
                            .buffer("in", in)
                            .buffer("tile_out", std::vector<uint16_t>(1024, 0xffff))
                            .buffer("flags", std::vector<uint32_t>(9, 0xffffffffu))
                            .scalar("x0", box.x0)
                            .scalar("y0", box.y0)
                            .scalar("cols", box.cols)
                            .scalar("rows", box.rows)
                            .scalar("ld", ld));
    std::vector<uint16_t> tile = out.get<uint16_t>("tile_out");
    std::vector<uint32_t> flags = out.get<uint32_t>("flags");
    REQUIRE(tile.size() == 1024);
    REQUIRE(flags.size() == 9);
    CHECK_MESSAGE(flags[0] == 1, "the mbarrier phase did not complete: the zero-filled bytes did not count "
                                 "toward complete_tx (TC§8 point 5)");
    unsigned bad = 0;
    for (uint32_t y = 0; y < 16; ++y)
      for (uint32_t x = 0; x < 64; ++x) {
        const int64_t gx = int64_t{box.x0} + x, gy = int64_t{box.y0} + y;
        const bool inside = gx >= 0 && gy >= 0 && gx < box.cols && gy < box.rows;
        const uint16_t want = inside ? static_cast<uint16_t>(1 + 64 * gy + gx) : 0;
        const uint16_t got = tile[swizzle128(y * 128 + x * 2) / 2];
        if (got != want && ++bad <= 5)
          CHECK_MESSAGE(false, "box element (" << x << ", " << y << ") at shared byte " << swizzle128(y * 128 + x * 2)
                                               << " holds " << got << ", want " << want);
      }
    CHECK(bad == 0);
    // The interpreter's elect.sync picks the lowest lane of the mask (docs/ir.md); PTX leaves it open.
    for (unsigned w = 0; w < 4; ++w) {
      CHECK_MESSAGE(flags[1 + w] == 0, "warp " << w << ": elect.sync over all lanes picked lane " << flags[1 + w]);
      CHECK_MESSAGE(flags[5 + w] == 4, "warp " << w << ": elect.sync over lanes 4-7 picked lane " << flags[5 + w]);
    }
  }
}

LIBRARY_TEST("hopper probe: a TMA load and store over a 40 x 70 f32 tensor in 16 x 32 boxes", hopperTmaStore) {
  std::mt19937 rng(seed());
  std::vector<float> in = uniform(rng, 40 * 70, -100.0f, 100.0f);
  Outputs out = r.run(Call("hopper_probes", "tile_scale").buffer("in", in).buffer("out", std::vector<float>(40 * 70, NAN)));
  std::vector<float> got = out.get<float>("out");
  std::vector<double> want(in.size());
  for (size_t i = 0; i < in.size(); ++i) want[i] = 2.0 * in[i];
  expectClose(got, want, 0.0, 0.0, "out = 2 in");
}
