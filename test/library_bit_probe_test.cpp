// prmt and lop3 on hardware against the IR's semantics (ir/LaneSemantics.h, which the interpreter
// runs), with the golden kernel of lit-tests/emit-ptx/bit-ops.tir (spec test/library/bit_probes.toml):
// thread t reads the pair (a, b) = x[2t], x[2t + 1], takes c = b >> 16, and stores eight words of
// the generic prmt, its six modes and three lop3 truth tables (some XORed in pairs, as the golden
// kernel stores them). On the interpreter the test pins the semantics to the golden kernel; on a
// GPU ("gpu library: bit probe …") a failure is a place where PTX's prmt or lop3 and ours disagree.
// Also cvt.tf32 (spec bit_probes.toml) and cvt.f16x2 (spec fp8_probes.toml).
#include <array>
#include <random>
#include <sstream>

#include "ir/LaneSemantics.h"
#include "library_harness.h"

using namespace tn::libtest;
using tn::ir::Mod;

namespace {

constexpr unsigned kThreads = 256;  // the spec's block

// The eight words thread t stores, from the IR's semantics.
std::array<uint32_t, 8> expected(uint32_t a, uint32_t b) {
  namespace lane = tn::ir::lane;
  const uint32_t c = b >> 16;
  auto prmt = [&](Mod mode) { return lane::prmt(a, b, c, mode); };
  const uint32_t generic = prmt(Mod::None), f4e = prmt(Mod::F4e);
  return {generic ^ f4e,
          prmt(Mod::B4e) ^ prmt(Mod::Rc8),
          prmt(Mod::Ecl) ^ prmt(Mod::Ecr),
          prmt(Mod::Rc16) ^ lane::lop3(a, b, c, 0x96),
          lane::lop3(a, b, c, 0xE8),
          lane::lop3(a, b, c, 0xCA),
          generic,
          f4e};
}

}  // namespace

LIBRARY_TEST("bit probe: prmt in every mode and with sign replication, lop3, against the IR's semantics", bitProbe) {
  std::mt19937 rng(seed());
  std::vector<uint32_t> x(2 * kThreads);
  for (uint32_t& v : x) v = static_cast<uint32_t>(rng());
  // Threads 0..3 pin every mode selector c & 3, 4..7 the generic form copying and sign-replicating
  // bytes of both words with both signs; the rest are random.
  for (uint32_t s = 0; s < 4; ++s) x[2 * s + 1] = (x[2 * s + 1] & ~0x00030000u) | s << 16;
  const uint32_t selectors[4] = {0x3210, 0x7654, 0xBA98, 0xFEDC};
  for (uint32_t i = 0; i < 4; ++i) {
    x[2 * (4 + i)] = 0x80FF7F01u ^ (i * 0x01010101u);
    x[2 * (4 + i) + 1] = selectors[i] << 16 | 0x807Fu;
  }
  Outputs out = r.run(Call("bit_probes", "bits").buffer("x", x).buffer("out", std::vector<uint32_t>(8 * kThreads, 0xdeadbeefu)));
  std::vector<uint32_t> got = out.get<uint32_t>("out");
  REQUIRE(got.size() == 8 * kThreads);
  static const char* const kWords[8] = {"prmt ^ prmt.f4e", "prmt.b4e ^ prmt.rc8", "prmt.ecl ^ prmt.ecr",
                                        "prmt.rc16 ^ lop3 0x96", "lop3 0xe8", "lop3 0xca", "prmt", "prmt.f4e"};
  unsigned bad = 0;
  std::ostringstream first;
  for (unsigned t = 0; t < kThreads; ++t) {
    std::array<uint32_t, 8> want = expected(x[2 * t], x[2 * t + 1]);
    for (unsigned w = 0; w < 8; ++w)
      if (got[8 * t + w] != want[w] && ++bad <= 5)
        first << "\n  thread " << t << " (a 0x" << std::hex << x[2 * t] << ", b 0x" << x[2 * t + 1] << ") " << kWords[w]
              << " = 0x" << got[8 * t + w] << ", want 0x" << want[w] << std::dec;
  }
  CHECK_MESSAGE(bad == 0, bad << " of " << 8 * kThreads << " words differ" << first.str());
}

// cvt.tf32 (PTX cvt.rna.tf32.f32) on hardware against lane::roundTf32, with the golden kernel of
// lit-tests/emit-ptx/cvt-tf32.tir: ties either way (away from zero), values just under and over
// a tie, the largest f32 and tf32 (to infinity or kept), infinities, NaNs with payloads,
// subnormals, zeros, then random bits. PTX calls tf32's layout implementation-defined: a failure
// here is where the GPU's rounding or NaN differs from the interpreter's model (which then changes).
LIBRARY_TEST("bit probe: cvt.tf32 rounds to nearest with ties away, against the IR's semantics", tf32Probe) {
  std::mt19937 rng(seed());
  std::vector<uint32_t> x = {0x3F801000u, 0x3F800FFFu, 0x3F801001u, 0xBF801000u, 0x3F803000u, 0xBF803000u,
                             0x7F7FFFFFu, 0x7F7FE000u, 0x7F7FEFFFu, 0x7F7FF000u, 0xFF7FF000u, 0x7F800000u,
                             0xFF800000u, 0x7FC00000u, 0x7FC00001u, 0xFFC01234u, 0x7F800001u, 0x00000001u,
                             0x00001000u, 0x807FFFFFu, 0x00000000u, 0x80000000u};
  while (x.size() < kThreads) x.push_back(static_cast<uint32_t>(rng()));
  Outputs out = r.run(Call("bit_probes", "tf32")
                          .buffer("x", x)
                          .buffer("out", std::vector<uint32_t>(kThreads, 0xdeadbeefu))
                          .scalar("n", kThreads));
  std::vector<uint32_t> got = out.get<uint32_t>("out");
  REQUIRE(got.size() == kThreads);
  unsigned bad = 0;
  std::ostringstream first;
  for (unsigned t = 0; t < kThreads; ++t) {
    const uint32_t want = static_cast<uint32_t>(tn::ir::lane::roundTf32(x[t]));
    if (got[t] != want && ++bad <= 5)
      first << "\n  cvt.tf32 0x" << std::hex << x[t] << " = 0x" << got[t] << ", want 0x" << want << std::dec;
  }
  CHECK_MESSAGE(bad == 0, bad << " of " << kThreads << " values differ" << first.str());
}

// cvt.f16x2 (PTX cvt.rn.f16x2.e4m3x2 and .e5m2x2) on hardware against lane::cvtF16x2Fp8, with the
// golden kernel of lit-tests/emit-ptx/cvt-fp8.tir: every pair of codes of both formats. PTX does
// not say which NaN a NaN code gives: a failure only on NaN codes is the GPU's NaN differing from
// the interpreter's canonical one (which then changes).
LIBRARY_TEST("bit probe: cvt.f16x2 converts every pair of fp8 codes as the IR's semantics", fp8Probe) {
  constexpr uint32_t kPairs = 65536;
  std::vector<uint16_t> x(kPairs);
  for (uint32_t i = 0; i < kPairs; ++i) x[i] = static_cast<uint16_t>(i);
  Outputs out = r.run(Call("fp8_probes", "fp8")
                          .buffer("x", x)
                          .buffer("e4", std::vector<uint32_t>(kPairs, 0xdeadbeefu))
                          .buffer("e5", std::vector<uint32_t>(kPairs, 0xdeadbeefu))
                          .scalar("n", kPairs));
  for (const bool e4m3 : {true, false}) {
    const std::vector<uint32_t> got = out.get<uint32_t>(e4m3 ? "e4" : "e5");
    REQUIRE(got.size() == kPairs);
    unsigned bad = 0;
    std::ostringstream first;
    for (uint32_t i = 0; i < kPairs; ++i) {
      const uint32_t want = static_cast<uint32_t>(tn::ir::lane::cvtF16x2Fp8(e4m3, i));
      if (got[i] != want && ++bad <= 5)
        first << "\n  codes 0x" << std::hex << i << " = 0x" << got[i] << ", want 0x" << want << std::dec;
    }
    CHECK_MESSAGE(bad == 0, (e4m3 ? "e4m3: " : "e5m2: ") << bad << " of " << kPairs << " pairs differ" << first.str());
  }
}
