#include "ir/Float16.h"

#include <bit>
#include <cmath>

namespace tn::ir {

namespace {
// Rounds |x| into a binary format with `expBits` exponent and `mantBits` fraction bits.
// NaN becomes the canonical 0x7FFF pattern that NVIDIA's cvt produces.
uint16_t roundToHalf(double x, int expBits, int mantBits, RoundMode mode) {
  const uint32_t expMask = (1u << expBits) - 1;
  const uint16_t sign = std::signbit(x) ? static_cast<uint16_t>(1u << (expBits + mantBits)) : 0;
  if (std::isnan(x)) return 0x7FFF;
  const uint32_t infBits = expMask << mantBits;
  const uint32_t maxFinite = infBits - 1;
  if (std::isinf(x)) return static_cast<uint16_t>(sign | infBits);
  double a = std::fabs(x);
  if (a == 0.0) return sign;
  const int bias = (1 << (expBits - 1)) - 1;
  int ex = 0;
  std::frexp(a, &ex);
  int e = ex - 1;  // a in [2^e, 2^(e+1))
  bool subnormal = e < 1 - bias;
  int quantumExp = subnormal ? 1 - bias - mantBits : e - mantBits;
  double q = std::ldexp(a, -quantumExp);
  double n = std::floor(q);
  double frac = q - n;
  bool negative = sign != 0;
  bool up = false;
  switch (mode) {
    case RoundMode::NearestEven: up = frac > 0.5 || (frac == 0.5 && std::fmod(n, 2.0) == 1.0); break;
    case RoundMode::Zero: up = false; break;
    case RoundMode::Down: up = negative && frac > 0; break;
    case RoundMode::Up: up = !negative && frac > 0; break;
  }
  if (up) n += 1;
  uint64_t bits = subnormal ? static_cast<uint64_t>(n)
                            : (static_cast<uint64_t>(e + bias - 1) << mantBits) + static_cast<uint64_t>(n);
  if (bits >= infBits) {
    bool toInf = mode == RoundMode::NearestEven || (mode == RoundMode::Up && !negative) ||
                 (mode == RoundMode::Down && negative);
    bits = toInf ? infBits : maxFinite;
  }
  return static_cast<uint16_t>(sign | bits);
}

}  // namespace

uint16_t f64ToF16(double d, RoundMode mode) { return roundToHalf(d, 5, 10, mode); }
uint16_t f64ToBf16(double d, RoundMode mode) { return roundToHalf(d, 8, 7, mode); }
uint16_t f32ToF16(float f, RoundMode mode) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (bits >> 16) & 0x8000u, magnitude = bits & 0x7FFFFFFFu;
  // The general path for NaN, the other modes and results below f16's smallest normal, 2^-14.
  if (mode != RoundMode::NearestEven || magnitude < 0x38800000u || magnitude > 0x7F800000u)
    return roundToHalf(f, 5, 10, mode);
  if (magnitude >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // 65520 and up
  // Rebias the exponent, then round the 13 dropped bits as f32ToBf16 rounds its 16.
  const uint32_t r = magnitude - ((127u - 15u) << 23);
  return static_cast<uint16_t>(sign | ((r + 0xFFFu + ((r >> 13) & 1u)) >> 13));
}
uint16_t f32ToBf16(float f, RoundMode mode) {
  if (mode != RoundMode::NearestEven || std::isnan(f)) return roundToHalf(f, 8, 7, mode);
  // bf16 is f32's upper half: add half a unit of the kept part, less one where it is even, and
  // the carry rounds to nearest, ties to even, up to infinity past the largest finite value.
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}
// By bits, not ldexp: the interpreter's tensor-core ops convert every f16 operand through here.
float f16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t mant = h & 0x3FFu;
  float v;
  if (exp == 0x1F) v = mant ? std::nanf("") : INFINITY;
  else if (exp == 0) v = static_cast<float>(mant) * 0x1p-24f;  // subnormal: exact in f32
  else return std::bit_cast<float>(sign | ((exp + 127 - 15) << 23) | (mant << 13));
  return sign ? -v : v;
}
float bf16ToF32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

}  // namespace tn::ir
