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

float halfToFloat(uint16_t h, int expBits, int mantBits) {
  const uint32_t expMask = (1u << expBits) - 1;
  bool neg = (h >> (expBits + mantBits)) & 1;
  uint32_t exp = (h >> mantBits) & expMask;
  uint32_t mant = h & ((1u << mantBits) - 1);
  const int bias = (1 << (expBits - 1)) - 1;
  float v;
  if (exp == expMask) v = mant ? std::nanf("") : INFINITY;
  else if (exp == 0) v = std::ldexp(static_cast<float>(mant), 1 - bias - mantBits);
  else v = std::ldexp(static_cast<float>(mant + (1u << mantBits)), static_cast<int>(exp) - bias - mantBits);
  return neg ? -v : v;
}
}  // namespace

uint16_t f64ToF16(double d, RoundMode mode) { return roundToHalf(d, 5, 10, mode); }
uint16_t f64ToBf16(double d, RoundMode mode) { return roundToHalf(d, 8, 7, mode); }
uint16_t f32ToF16(float f, RoundMode mode) { return roundToHalf(f, 5, 10, mode); }
uint16_t f32ToBf16(float f, RoundMode mode) { return roundToHalf(f, 8, 7, mode); }
float f16ToF32(uint16_t h) { return halfToFloat(h, 5, 10); }
float bf16ToF32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

}  // namespace tn::ir
