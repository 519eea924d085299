// Probes of the mma.sync and ldmatrix fragment layouts (../shared/docs/tensor-cores.md §1.3, §1.4,
// §2.2, and §8 points 2 and 7), with the golden kernel of lit-tests/emit-ptx/tensor-cores.tir
// (spec test/library/tc_probes.toml): each lane loads its raw A, B and C registers, every mma
// form runs on them, and an ldmatrix x4, x2.trans and x1 reads the A registers back from a shared
// tile. The host packs logical matrices of small integers into registers by TC's formulas and
// expects D = A·B + C exactly, so a register the hardware reads or writes elsewhere shows as an
// element named below. On the interpreter the probes pin truenoc's model of the formulas; on a GPU
// ("gpu library: tc probe …") a failure is a place where the model and the hardware disagree.
#include <bit>
#include <cmath>
#include <functional>
#include <sstream>

#include "ir/Float16.h"
#include "ir/Float8.h"
#include "library_harness.h"

using namespace tn::libtest;

namespace {

// The kernel's output regions: 512 bytes each, lane l's registers at 16 l.
enum Region : unsigned { Bf16F32, F16F32, F16F16, Tf32F32, S8S32, U8S32, Ldm4, Ldm2Trans, Ldm1, kRegions = 10 };

struct Registers {
  std::vector<uint32_t> a = std::vector<uint32_t>(128), b = std::vector<uint32_t>(64), c = std::vector<uint32_t>(128);
};

std::vector<uint32_t> run(Runner& r, const Registers& regs) {
  Outputs out = r.run(Call("tc_probes", "tensor_cores")
                          .buffer("a", regs.a)
                          .buffer("b", regs.b)
                          .buffer("c", regs.c)
                          .buffer("d", std::vector<uint32_t>(kRegions * 128, 0xdeadbeefu)));
  std::vector<uint32_t> d = out.get<uint32_t>("d");
  REQUIRE(d.size() == kRegions * 128);
  return d;
}

uint32_t word(const std::vector<uint32_t>& d, Region region, unsigned lane, unsigned i) {
  return d[region * 128 + lane * 4 + i];
}
uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }
float fromBits(uint32_t u) { return std::bit_cast<float>(u); }
uint32_t pair(uint16_t lo, uint16_t hi) { return lo | uint32_t(hi) << 16; }

// Checks a 16 x 8 accumulator fragment (TC§1.3: D[m][n] in lane 4 (m % 8) + n / 2, register
// 2 (m / 8) + n % 2) against want(m, n), each element read by `got` from the stored registers.
void expectD(const std::vector<uint32_t>& d, const std::string& what,
             const std::function<double(unsigned, unsigned)>& want,
             const std::function<double(const std::vector<uint32_t>&, unsigned, unsigned)>& got) {
  unsigned bad = 0;
  std::ostringstream first;
  for (unsigned m = 0; m < 16; ++m)
    for (unsigned n = 0; n < 8; ++n) {
      const double g = got(d, 4 * (m % 8) + n / 2, 2 * (m / 8) + n % 2);
      if (g != want(m, n) && ++bad <= 5)
        first << "\n  D[" << m << "][" << n << "] = " << g << ", want " << want(m, n);
    }
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " of 128 outputs differ" << first.str());
}

std::function<double(const std::vector<uint32_t>&, unsigned, unsigned)> f32At(Region region) {
  return [region](const std::vector<uint32_t>& d, unsigned lane, unsigned i) {
    return double(fromBits(word(d, region, lane, i)));
  };
}

// ldmatrix (TC§2.2): matrix j's row ρ is tile row 8 j + ρ, which lane 8 j + ρ stored from its A
// registers, so its 16-bit element κ is half κ % 2 of that lane's A word κ / 2.
uint16_t tileElement(const Registers& regs, unsigned j, unsigned rho, unsigned kappa) {
  const uint32_t w = regs.a[(8 * j + rho) * 4 + kappa / 2];
  return static_cast<uint16_t>(kappa % 2 ? w >> 16 : w & 0xffff);
}

void expectLdmatrix(const std::vector<uint32_t>& d, const Registers& regs) {
  unsigned bad = 0;
  std::ostringstream first;
  auto check = [&](const char* form, Region region, unsigned matrices, bool trans) {
    for (unsigned l = 0; l < 32; ++l)
      for (unsigned j = 0; j < matrices; ++j) {
        const unsigned q = l / 4, e = 2 * (l % 4);
        const uint32_t want = trans ? pair(tileElement(regs, j, e, q), tileElement(regs, j, e + 1, q))
                                    : pair(tileElement(regs, j, q, e), tileElement(regs, j, q, e + 1));
        const uint32_t got = word(d, region, l, j);
        if (got != want && ++bad <= 5)
          first << "\n  " << form << " lane " << l << " register " << j << " = 0x" << std::hex << got << ", want 0x"
                << want << std::dec;
      }
  };
  check("ldmatrix.x4", Ldm4, 4, false);
  check("ldmatrix.x2.trans", Ldm2Trans, 2, true);
  check("ldmatrix.x1", Ldm1, 1, false);
  CHECK_MESSAGE(bad == 0, "ldmatrix: " << bad << " registers differ from TC§2.2" << first.str());
}

int smallInt(std::mt19937& rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

}  // namespace

LIBRARY_TEST("tc probe: mma m16n8k16 bf16 and f16 fragments (TC§1.3), ldmatrix x4, x2.trans, x1 (TC§2.2)", tcHalf) {
  std::mt19937 rng(seed());
  for (bool f16 : {false, true}) {
    for (bool f16Acc : {false, true}) {
      if (f16Acc && !f16) continue;  // the IR's f16 accumulator form takes f16 operands
      // Integers: every product and sum is exact in f32 (and |D| < 2048 in f16).
      double A[16][16], B[16][8], C[16][8];
      for (auto& row : A)
        for (double& v : row) v = smallInt(rng, -8, 8);
      for (auto& row : B)
        for (double& v : row) v = smallInt(rng, -8, 8);
      for (auto& row : C)
        for (double& v : row) v = smallInt(rng, -64, 64);
      auto h = [&](double v) { return f16 ? tn::ir::f64ToF16(v) : tn::ir::f64ToBf16(v); };
      Registers regs;
      for (unsigned l = 0; l < 32; ++l) {
        const unsigned g = l / 4, t = l % 4;
        for (unsigned i = 0; i < 4; ++i) {  // A: row g + 8 (i & 1), columns 2t + 8 (i >> 1) and + 1
          const unsigned m = g + 8 * (i & 1), k = 2 * t + 8 * (i >> 1);
          regs.a[l * 4 + i] = pair(h(A[m][k]), h(A[m][k + 1]));
        }
        for (unsigned i = 0; i < 2; ++i)  // B: k = 2t + 8i and + 1, column g
          regs.b[l * 2 + i] = pair(h(B[2 * t + 8 * i][g]), h(B[2 * t + 8 * i + 1][g]));
        for (unsigned i = 0; i < 4; ++i) {  // C: row g + 8 (i >> 1), column 2t + (i & 1)
          const unsigned m = g + 8 * (i >> 1), n = 2 * t + (i & 1);
          regs.c[l * 4 + i] = bits(float(C[m][n]));
        }
        if (f16Acc)  // f16 accumulators: register i holds row g + 8 i, columns 2t and 2t + 1
          for (unsigned i = 0; i < 2; ++i)
            regs.c[l * 4 + i] = pair(tn::ir::f64ToF16(C[g + 8 * i][2 * t]), tn::ir::f64ToF16(C[g + 8 * i][2 * t + 1]));
      }
      std::vector<uint32_t> d = run(r, regs);
      auto want = [&](unsigned m, unsigned n) {
        double s = C[m][n];
        for (unsigned k = 0; k < 16; ++k) s += A[m][k] * B[k][n];
        return s;
      };
      if (f16Acc) {
        expectD(d, "mma.m16n8k16 f16 -> f16", want, [](const std::vector<uint32_t>& dd, unsigned lane, unsigned i) {
          const uint32_t w = word(dd, F16F16, lane, i / 2);
          return double(tn::ir::f16ToF32(static_cast<uint16_t>(i % 2 ? w >> 16 : w & 0xffff)));
        });
      } else {
        expectD(d, f16 ? "mma.m16n8k16 f16 -> f32" : "mma.m16n8k16 bf16 -> f32", want,
                f32At(f16 ? F16F32 : Bf16F32));
      }
      expectLdmatrix(d, regs);
    }
  }
}

LIBRARY_TEST("tc probe: mma m16n8k8 tf32 fragments (TC§1.4) and unrounded f32 inputs (TC§8 point 2)", tcTf32) {
  std::mt19937 rng(seed());
  // Pass 0: integers, exact. Pass 1: A = ±(1 + 2^-11 + 2^-20) (not a tf32 value: below tf32's 10
  // fraction bits), B one-hot (B[k][n] = 1 for k = n), C = 0: D[m][n] is A[m][n] as the tensor
  // core read it. The interpreter clears the low 13 bits (TC§1.4's recommendation), giving ±1;
  // rounding to nearest would give ±(1 + 2^-10).
  for (unsigned pass = 0; pass < 2; ++pass) {
    double A[16][8], B[8][8], C[16][8];
    const double odd = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -20);
    for (unsigned m = 0; m < 16; ++m)
      for (unsigned k = 0; k < 8; ++k) A[m][k] = pass ? (smallInt(rng, 0, 1) ? odd : -odd) : smallInt(rng, -8, 8);
    for (unsigned k = 0; k < 8; ++k)
      for (unsigned n = 0; n < 8; ++n) B[k][n] = pass ? (k == n) : smallInt(rng, -8, 8);
    for (auto& row : C)
      for (double& v : row) v = pass ? 0 : smallInt(rng, -64, 64);
    Registers regs;
    for (unsigned l = 0; l < 32; ++l) {
      const unsigned g = l / 4, t = l % 4;
      for (unsigned i = 0; i < 4; ++i) regs.a[l * 4 + i] = bits(float(A[g + 8 * (i & 1)][t + 4 * (i >> 1)]));
      for (unsigned i = 0; i < 2; ++i) regs.b[l * 2 + i] = bits(float(B[t + 4 * i][g]));
      for (unsigned i = 0; i < 4; ++i) regs.c[l * 4 + i] = bits(float(C[g + 8 * (i >> 1)][2 * t + (i & 1)]));
    }
    std::vector<uint32_t> d = run(r, regs);
    auto tf32 = [](double v) { return double(fromBits(bits(float(v)) & ~0x1fffu)); };
    expectD(
        d, pass ? "mma.m16n8k8 tf32 on f32 inputs not rounded to tf32 (truncated?)" : "mma.m16n8k8 tf32",
        [&](unsigned m, unsigned n) {
          double s = C[m][n];
          for (unsigned k = 0; k < 8; ++k) s += tf32(A[m][k]) * tf32(B[k][n]);
          return s;
        },
        f32At(Tf32F32));
  }
}

LIBRARY_TEST("tc probe: mma m16n8k32 s8 and u8 fragments", tcInt8) {
  // PTX's m16n8k32 .s8/.u8 layout: A register i holds row g + 8 (i & 1), columns 4t + 16 (i >> 1)
  // .. + 3 (byte b = column + b); B register i holds k = 4t + 16 i .. + 3 of column g; C as f32's.
  std::mt19937 rng(seed());
  uint8_t A[16][32], B[32][8];
  int32_t C[16][8];
  for (auto& row : A)
    for (uint8_t& v : row) v = static_cast<uint8_t>(smallInt(rng, 0, 255));
  for (auto& row : B)
    for (uint8_t& v : row) v = static_cast<uint8_t>(smallInt(rng, 0, 255));
  for (auto& row : C)
    for (int32_t& v : row) v = smallInt(rng, -100000, 100000);
  Registers regs;
  for (unsigned l = 0; l < 32; ++l) {
    const unsigned g = l / 4, t = l % 4;
    for (unsigned i = 0; i < 4; ++i) {
      const unsigned m = g + 8 * (i & 1), k = 4 * t + 16 * (i >> 1);
      regs.a[l * 4 + i] = A[m][k] | A[m][k + 1] << 8 | A[m][k + 2] << 16 | uint32_t(A[m][k + 3]) << 24;
    }
    for (unsigned i = 0; i < 2; ++i) {
      const unsigned k = 4 * t + 16 * i;
      regs.b[l * 2 + i] = B[k][g] | B[k + 1][g] << 8 | B[k + 2][g] << 16 | uint32_t(B[k + 3][g]) << 24;
    }
    for (unsigned i = 0; i < 4; ++i) regs.c[l * 4 + i] = static_cast<uint32_t>(C[g + 8 * (i >> 1)][2 * t + (i & 1)]);
  }
  std::vector<uint32_t> d = run(r, regs);
  for (bool s8 : {true, false}) {
    const Region region = s8 ? S8S32 : U8S32;
    expectD(
        d, s8 ? "mma.m16n8k32 s8" : "mma.m16n8k32 u8",
        [&](unsigned m, unsigned n) {
          double s = C[m][n];
          for (unsigned k = 0; k < 32; ++k)
            s += s8 ? double(int8_t(A[m][k])) * int8_t(B[k][n]) : double(A[m][k]) * B[k][n];
          return s;
        },
        [region](const std::vector<uint32_t>& dd, unsigned lane, unsigned i) {
          return double(static_cast<int32_t>(word(dd, region, lane, i)));
        });
  }
}

// mma.m16n8k32 over fp8 codes (sm_89+; spec fp8_probes.toml, the golden kernel of
// lit-tests/emit-ptx/mma-fp8.tir): the s8 form's fragments (TC§1.3 with four 8-bit elements a
// register: A[g + 8(r&1)][4t + j + 16(r>>1)] in byte j of register r of lane 4g + t, B[4t + j +
// 16r][g]), codes of small integers, which both formats hold exactly, so D = A·B + C is exact
// whatever the hardware keeps of its sums. The kernel writes its four forms' D to regions 0 to 3:
// e4m3, e5m2, e4m3 x e5m2 (.b_e5m2) and e5m2 x e4m3 (.b_e4m3). Each form gets a launch with A's
// and B's codes in its formats, and only its region is checked (the others read the same bits as
// other formats). The mixed forms also show that the hardware decodes each operand in its own
// format: read in the other format, the codes are other values (E4M3's 1.0, 0x38, is E5M2's 0.5).
LIBRARY_TEST("tc probe: mma m16n8k32 e4m3 and e5m2 fragments (the s8 layout), alike and mixed", tcFp8) {
  using tn::ir::Fp8Format;
  struct Form {
    const char* name;
    Fp8Format a, b;
  };
  const Form forms[] = {{"mma.m16n8k32.e4m3", Fp8Format::E4M3, Fp8Format::E4M3},
                        {"mma.m16n8k32.e5m2", Fp8Format::E5M2, Fp8Format::E5M2},
                        {"mma.m16n8k32.e4m3.b_e5m2", Fp8Format::E4M3, Fp8Format::E5M2},
                        {"mma.m16n8k32.e5m2.b_e4m3", Fp8Format::E5M2, Fp8Format::E4M3}};
  std::mt19937 rng(seed());
  for (unsigned f = 0; f < 4; ++f) {
    int A[16][32], B[32][8];
    float C[16][8];
    for (auto& row : A)
      for (int& v : row) v = smallInt(rng, -4, 4);
    for (auto& row : B)
      for (int& v : row) v = smallInt(rng, -4, 4);
    for (auto& row : C)
      for (float& v : row) v = float(smallInt(rng, -64, 64));
    Registers regs;
    auto code = [&](Fp8Format format, int v) { return uint32_t{tn::ir::fp8Code(format, float(v))}; };
    for (unsigned l = 0; l < 32; ++l) {
      const unsigned g = l / 4, t = l % 4;
      for (unsigned r = 0; r < 4; ++r)
        for (unsigned j = 0; j < 4; ++j)
          regs.a[4 * l + r] |= code(forms[f].a, A[g + 8 * (r & 1)][4 * t + j + 16 * (r >> 1)]) << (8 * j);
      for (unsigned r = 0; r < 2; ++r)
        for (unsigned j = 0; j < 4; ++j) regs.b[2 * l + r] |= code(forms[f].b, B[4 * t + j + 16 * r][g]) << (8 * j);
      for (unsigned i = 0; i < 4; ++i) regs.c[4 * l + i] = bits(C[g + 8 * (i >> 1)][2 * t + (i & 1)]);
    }
    Outputs out = r.run(Call("fp8_probes", "mma_fp8")
                            .buffer("a", regs.a)
                            .buffer("b", regs.b)
                            .buffer("c", regs.c)
                            .buffer("d", std::vector<uint32_t>(512, 0xdeadbeefu)));
    std::vector<uint32_t> d = out.get<uint32_t>("d");
    REQUIRE(d.size() == 512);
    expectD(d, forms[f].name,
            [&](unsigned m, unsigned n) {
              double sum = C[m][n];
              for (unsigned k = 0; k < 32; ++k) sum += double(A[m][k]) * B[k][n];
              return sum;
            },
            f32At(Region(f)));
  }
}
