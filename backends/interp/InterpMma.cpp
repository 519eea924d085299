// Tensor-core semantics of the interpreter: mma and ldmatrix over one full warp, with the fragment
// layouts of the PTX ISA (docs/tensor-cores.md in the shared notes, sections 1 and 2; summarized in
// docs/interpreter.md). The engine checks that the warp is full and converged and locates the
// ldmatrix rows in shared memory; these functions only move and compute bits.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/interp/InterpImpl.h"
#include "ir/Float16.h"
#include "ir/LaneSemantics.h"

namespace tn::interp::detail {

namespace {

using ir::Mod;
using ir::Scalar;

// Register r (a 32-bit lane of a fragment vector) of warp lane l. A vector's lanes are packed
// little-endian into its 64-bit slots, as pack and extract see them.
uint32_t fragReg(uint64_t* regs, uint32_t slot, unsigned r, uint32_t l) {
  return static_cast<uint32_t>(slotPtr(regs, slot + r / 2)[l] >> (32 * (r % 2)));
}

void setFragReg(uint64_t* regs, uint32_t slot, unsigned r, uint32_t l, uint32_t v) {
  uint64_t& s = slotPtr(regs, slot + r / 2)[l];
  unsigned shift = 32 * (r % 2);
  s = (s & ~(uint64_t{0xFFFFFFFFu} << shift)) | (uint64_t{v} << shift);
}

// An A/B element as f32 (exact for every type: tf32 after dropping its low bits, fp8 codes through
// cvt.f16x2's exact decoding).
float floatElement(Scalar s, Mod fp8, uint32_t bits) {
  if (s == Scalar::B8) return ir::f16ToF32(static_cast<uint16_t>(ir::lane::fp8ToF16(fp8 == Mod::E4m3Mod, bits & 0xFF)));
  switch (s) {
    case Scalar::BF16: return ir::bf16ToF32(static_cast<uint16_t>(bits));
    case Scalar::F16: return ir::f16ToF32(static_cast<uint16_t>(bits));
    default: return std::bit_cast<float>(bits & 0xFFFFE000u);  // tf32: the low 13 bits are ignored
  }
}

}  // namespace

// D = A·B + C for m16n8kK. With e = 32 / (element bits) elements per A/B register (tf32 1, f16 and
// bf16 2, s8, u8 and fp8 codes 4) and K = 8e, lane l (g = l/4, t = l%4) holds, element j of register r at
// bits [j*32/e, (j+1)*32/e):
//   A[g + 8(r&1)][e*t + j + 4e(r>>1)]   r < 4
//   B[e*t + j + 4e*r][g]                r < 2
//   C[g + 8(i>>1)][2t + (i&1)]          element i < 4: register i, or for f16 half i&1 of register i/2
// Floats: each D element starts from C (exact in f32) and adds the products in k order with one
// f32 fma each (exact product, one rounding per step); f16 results round to nearest once at the
// end. Integers: s32 arithmetic that wraps around.
// Cloned for CPUs with fma instructions: std::fma is then one instruction instead of a libm call.
[[gnu::target_clones("fma", "default")]] void mmaWarp(uint64_t* regs, const Code& k) {
  const Scalar in = k.srcScalar, acc = k.scalar;
  const unsigned e = in == Scalar::S8 || in == Scalar::U8 || in == Scalar::B8 ? 4 : in == Scalar::F32 ? 1 : 2;
  const unsigned K = 8 * e, width = 32 / e;
  const uint32_t mask = width == 32 ? 0xFFFFFFFFu : (1u << width) - 1;
  uint32_t a[16][32], b[32][8], c[16][8];
  for (uint32_t l = 0; l < kWarpSize; ++l) {
    const unsigned g = l / 4, t = l % 4;
    for (unsigned r = 0; r < 4; ++r)
      for (unsigned j = 0; j < e; ++j)
        a[g + 8 * (r & 1)][e * t + j + 4 * e * (r >> 1)] =
            mask & (fragReg(regs, k.src[0], r, l) >> (j * width));
    for (unsigned r = 0; r < 2; ++r)
      for (unsigned j = 0; j < e; ++j)
        b[e * t + j + 4 * e * r][g] =
            mask & (fragReg(regs, k.src[1], r, l) >> (j * width));
    for (unsigned i = 0; i < 4; ++i)
      c[g + 8 * (i >> 1)][2 * t + (i & 1)] =
          acc == Scalar::F16 ? (fragReg(regs, k.src[2], i / 2, l) >> (16 * (i & 1))) & 0xFFFFu
                             : fragReg(regs, k.src[2], i, l);
  }
  // Float operands widened once each, not once per product.
  float af[16][32], bf[32][8];
  if (acc != Scalar::S32) {
    for (unsigned m = 0; m < 16; ++m)
      for (unsigned kk = 0; kk < K; ++kk) af[m][kk] = floatElement(in, k.mode, a[m][kk]);
    for (unsigned kk = 0; kk < K; ++kk)
      for (unsigned n = 0; n < 8; ++n) bf[kk][n] = floatElement(in, k.modeB, b[kk][n]);
  }
  uint32_t d[16][8];
  for (unsigned m = 0; m < 16; ++m)
    for (unsigned n = 0; n < 8; ++n) {
      if (acc == Scalar::S32) {
        uint32_t sum = c[m][n];
        for (unsigned kk = 0; kk < K; ++kk) {
          int32_t x = in == Scalar::S8 ? static_cast<int8_t>(a[m][kk]) : static_cast<int32_t>(a[m][kk]);
          int32_t y = in == Scalar::S8 ? static_cast<int8_t>(b[kk][n]) : static_cast<int32_t>(b[kk][n]);
          sum += static_cast<uint32_t>(x) * static_cast<uint32_t>(y);
        }
        d[m][n] = sum;
        continue;
      }
      float sum = acc == Scalar::F16 ? ir::f16ToF32(static_cast<uint16_t>(c[m][n])) : std::bit_cast<float>(c[m][n]);
      for (unsigned kk = 0; kk < K; ++kk) sum = std::fma(af[m][kk], bf[kk][n], sum);
      d[m][n] = acc == Scalar::F16 ? ir::f32ToF16(sum) : std::bit_cast<uint32_t>(sum);
    }
  for (uint32_t l = 0; l < kWarpSize; ++l) {
    const unsigned g = l / 4, t = l % 4;
    if (acc == Scalar::F16) {
      for (unsigned r = 0; r < 2; ++r)
        setFragReg(regs, k.dst, r, l, d[g + 8 * r][2 * t] | (d[g + 8 * r][2 * t + 1] << 16));
    } else {
      for (unsigned i = 0; i < 4; ++i) setFragReg(regs, k.dst, i, l, d[g + 8 * (i >> 1)][2 * t + (i & 1)]);
    }
  }
}

// rows[8j + ρ] is row ρ (16 bytes, 8 b16 elements) of matrix j, as lane 8j + ρ addressed it.
// Without .trans lane l's register j is {M_j[l/4][2(l%4)], M_j[l/4][2(l%4)+1]} (low, high); with
// .trans it is {M_j[2(l%4)][l/4], M_j[2(l%4)+1][l/4]}.
void ldmatrixWarp(uint64_t* regs, const Code& k, const std::byte* const* rows) {
  auto element = [&](unsigned matrix, unsigned row, unsigned col) {
    uint16_t v;
    std::memcpy(&v, rows[8 * matrix + row] + 2 * col, 2);
    return uint32_t{v};
  };
  const bool trans = k.mode == Mod::TransMod;
  // A b32 result leaves the upper half of its slot: clear it, as every other result is zero-extended.
  if (k.lanes == 1) std::fill_n(slotPtr(regs, k.dst), kWarpSize, uint64_t{0});
  for (uint32_t l = 0; l < kWarpSize; ++l)
    for (unsigned j = 0; j < k.lanes; ++j) {
      uint32_t lo = trans ? element(j, 2 * (l % 4), l / 4) : element(j, l / 4, 2 * (l % 4));
      uint32_t hi = trans ? element(j, 2 * (l % 4) + 1, l / 4) : element(j, l / 4, 2 * (l % 4) + 1);
      setFragReg(regs, k.dst, j, l, lo | (hi << 16));
    }
}

}  // namespace tn::interp::detail

// ---- wgmma (TC§4) ---------------------------------------------------------------------------------

namespace tn::interp::detail {

WgmmaDescriptor decodeWgmmaDescriptor(uint64_t desc) {
  WgmmaDescriptor d;
  d.start = static_cast<uint32_t>(desc & 0x3FFF) << 4;
  d.lbo = static_cast<uint32_t>((desc >> 16) & 0x3FFF) << 4;
  d.sbo = static_cast<uint32_t>((desc >> 32) & 0x3FFF) << 4;
  d.baseOffset = static_cast<unsigned>((desc >> 49) & 7);
  const unsigned code = static_cast<unsigned>(desc >> 62);
  d.swizzle = code == 1 ? 128 : code == 2 ? 64 : code == 3 ? 32 : 0;
  return d;
}

// TC§4.3's canonical layouts in bytes (e-byte elements: T = 16 / e per 16-byte unit, and a K step
// of 32 / e elements is 32 bytes), then TC§4.5's swizzle of the absolute address.
uint32_t wgmmaElementAddress(const WgmmaDescriptor& d, bool mnMajor, unsigned x, unsigned k, uint32_t e) {
  const uint32_t T = 16 / e, S = d.swizzle;
  uint32_t off;
  if (!mnMajor && !S) off = (x % 8) * 16 + (x / 8) * d.sbo + (k % T) * e + (k / T) * d.lbo;
  else if (!mnMajor) off = (x % 8) * S + (x / 8) * d.sbo + k * e;
  else if (!S) off = (x % T) * e + (x / T) * d.sbo + (k % 8) * 16 + (k / 8) * d.lbo;
  else off = (x % (S / e)) * e + (x / (S / e)) * d.lbo + (k % 8) * S + (k / 8) * d.sbo;
  const uint32_t a = d.start + off;
  const uint32_t lines = S == 128 ? 7 : S == 64 ? 3 : S == 32 ? 1 : 0;
  return a ^ (((a >> 7) & lines) << 4);
}

// Each D element starts from C (or 0 without scale-d) and adds the K products (16, or 32 of fp8
// codes) in k order with one f32 fma each: the mma model's numerics.
[[gnu::target_clones("fma", "default")]] void wgmmaProduct(Scalar in, Mod fp8A, Mod fp8B, unsigned n, unsigned K,
                                                           const uint16_t* a, const uint16_t* b, const uint32_t* c,
                                                           bool scaleD, uint32_t* d) {
  std::vector<float> av(64 * K), bv(K * n);
  for (unsigned i = 0; i < 64 * K; ++i) av[i] = floatElement(in, fp8A, a[i]);
  for (unsigned i = 0; i < K * n; ++i) bv[i] = floatElement(in, fp8B, b[i]);
  for (unsigned m = 0; m < 64; ++m)
    for (unsigned j = 0; j < n; ++j) {
      float sum = scaleD ? std::bit_cast<float>(c[m * n + j]) : 0.0f;
      for (unsigned kk = 0; kk < K; ++kk) sum = std::fma(av[m * K + kk], bv[kk * n + j], sum);
      d[m * n + j] = std::bit_cast<uint32_t>(sum);
    }
}

}  // namespace tn::interp::detail
