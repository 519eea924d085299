// fp8 codes on the host (OCP E4M3 and E5M2, docs/kernels.md "fp8 KV caches"): a code's value
// from the format's fields, and x's code by a search for the nearest finite value. Written for
// clarity, not speed: the references of the tests and the benchmark, independent of the
// kernels' bit manipulation (kernels/Fp8.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace tn::ir {

enum class Fp8Format : uint8_t { E4M3, E5M2 };

// The value of a code: sign, exponent and mantissa fields; E4M3 has NaN at 0x7F/0xFF and no
// infinities, E5M2 IEEE's infinities and NaNs at the all-ones exponent.
inline double fp8Value(Fp8Format f, uint8_t code) {
  const bool e4 = f == Fp8Format::E4M3;
  const unsigned mbits = e4 ? 3 : 2, bias = e4 ? 7 : 15;
  const unsigned e = (code & 0x7F) >> mbits, m = code & ((1u << mbits) - 1);
  const double sign = code & 0x80 ? -1.0 : 1.0;
  if (e4 && e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  if (!e4 && e == 31) return m ? std::numeric_limits<double>::quiet_NaN() : sign * std::numeric_limits<double>::infinity();
  if (e == 0) return sign * std::ldexp(double(m), 1 - int(bias) - int(mbits));
  return sign * std::ldexp(1.0 + double(m) / double(1u << mbits), int(e) - int(bias));
}

// The code of x: the nearest finite value (ties to the even code), beyond the largest finite
// value (infinities included) that value, NaN 0x7F; the sign bit is x's (so -0 and small
// negatives give 0x80).
inline uint8_t fp8Code(Fp8Format f, float x) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t largest = f == Fp8Format::E4M3 ? 0x7E : 0x7B;
  const double a = std::fabs(double(x));
  uint8_t best = 0;
  double bestDistance = a;
  for (uint8_t c = 1; c <= largest; ++c) {
    const double d = std::fabs(fp8Value(f, c) - a);
    if (d < bestDistance || (d == bestDistance && (c & 1) == 0)) {
      best = c;
      bestDistance = d;
    }
  }
  if (a >= fp8Value(f, largest)) best = largest;
  return uint8_t(best | (std::signbit(x) ? 0x80 : 0));
}

}  // namespace tn::ir
