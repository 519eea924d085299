// Floating-point semantics of the interpreter: f16/bf16/f32/f64 arithmetic with PTX rounding
// modifiers, .ftz and .sat, PTX min/max NaN rules, comparisons, the approximate functions and
// every cvt. NaN results are the canonical NaN the GPU produces (all-ones payload, sign clear).
//
// How results are rounded:
//   f32, f64   computed natively; a directed rounding mode (.rz/.rm/.rp) is applied by switching
//              the host FPU's rounding mode around the operation (operands pass through volatile
//              so the compiler cannot move the operation across the switch).
//   f16, bf16  computed in double with round-to-odd (round toward zero, then set the last bit if
//              the result was inexact), then rounded to the target with ir/Float16.h. Double has
//              more than 2p+2 bits for both formats, so this double rounding is exact.
//   .approx    computed in double with the C library, then rounded to nearest; see
//              docs/interpreter.md for how that compares with the hardware's error bounds.
// The engine runs every launch in round-to-nearest, so the fast paths need no mode switch.
#include <bit>
#include <cfenv>
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/interp/InterpImpl.h"
#include "ir/FloatCompare.h"
#include "ir/Float16.h"

namespace tn::interp::detail {

namespace {

using ir::Mod;
using ir::Op;
using ir::RoundMode;
using ir::Scalar;

constexpr uint64_t kNanF32 = 0x7FFFFFFF;
constexpr uint64_t kNanF64 = 0x7FFFFFFFFFFFFFFF;
constexpr uint64_t kNanHalf = 0x7FFF;

uint64_t canonicalNan(Scalar s) {
  switch (s) {
    case Scalar::F32: return kNanF32;
    case Scalar::F64: return kNanF64;
    default: return kNanHalf;
  }
}

uint64_t signBit(Scalar s) {
  switch (s) {
    case Scalar::F32: return uint64_t{1} << 31;
    case Scalar::F64: return uint64_t{1} << 63;
    default: return uint64_t{1} << 15;
  }
}

double toDouble(Scalar s, uint64_t b) {
  switch (s) {
    case Scalar::F16: return ir::f16ToF32(static_cast<uint16_t>(b));
    case Scalar::BF16: return ir::bf16ToF32(static_cast<uint16_t>(b));
    case Scalar::F32: return std::bit_cast<float>(static_cast<uint32_t>(b));
    default: return std::bit_cast<double>(b);
  }
}

// Subnormal inputs/results of f16, bf16 and f32 become sign-preserving zero under .ftz.
uint64_t flushSubnormal(Scalar s, uint64_t b) {
  uint64_t expMask = 0, mantMask = 0;
  switch (s) {
    case Scalar::F16: expMask = 0x7C00; mantMask = 0x03FF; break;
    case Scalar::BF16: expMask = 0x7F80; mantMask = 0x007F; break;
    case Scalar::F32: expMask = 0x7F800000; mantMask = 0x007FFFFF; break;
    default: return b;
  }
  return ((b & expMask) == 0 && (b & mantMask) != 0) ? (b & signBit(s)) : b;
}

bool isNan(Scalar s, uint64_t b) {
  switch (s) {
    case Scalar::F16: return (b & 0x7C00) == 0x7C00 && (b & 0x03FF);
    case Scalar::BF16: return (b & 0x7F80) == 0x7F80 && (b & 0x007F);
    default: return std::isnan(toDouble(s, b));
  }
}

int fenvMode(RoundMode m) {
  switch (m) {
    case RoundMode::Zero: return FE_TOWARDZERO;
    case RoundMode::Down: return FE_DOWNWARD;
    case RoundMode::Up: return FE_UPWARD;
    default: return FE_TONEAREST;
  }
}

RoundMode roundModeOf(Mod m) {
  switch (m) {
    case Mod::Rz: case Mod::Rzi: return RoundMode::Zero;
    case Mod::Rm: case Mod::Rmi: return RoundMode::Down;
    case Mod::Rp: case Mod::Rpi: return RoundMode::Up;
    default: return RoundMode::NearestEven;
  }
}

enum class Arith : uint8_t { Add, Sub, Mul, Fma, Div, Sqrt, Rcp };

template <class F>
F arith(Arith op, F a, F b, F c) {
  volatile F va = a, vb = b, vc = c;
  volatile F r = 0;
  switch (op) {
    case Arith::Add: r = va + vb; break;
    case Arith::Sub: r = va - vb; break;
    case Arith::Mul: r = va * vb; break;
    case Arith::Fma: r = std::fma(static_cast<F>(va), static_cast<F>(vb), static_cast<F>(vc)); break;
    case Arith::Div: r = va / vb; break;
    case Arith::Sqrt: r = std::sqrt(static_cast<F>(va)); break;
    case Arith::Rcp: r = F(1) / va; break;
  }
  return r;
}

// An IEEE operation in F under rounding mode m.
template <class F>
F arithRounded(Arith op, F a, F b, F c, RoundMode m) {
  if (m == RoundMode::NearestEven) return arith(op, a, b, c);
  std::fesetround(fenvMode(m));
  F r = arith(op, a, b, c);
  std::fesetround(FE_TONEAREST);
  return r;
}

// The operation in double, rounded to odd: exact results stay, inexact ones get their last bit set.
double arithOdd(Arith op, double a, double b, double c) {
  std::feclearexcept(FE_INEXACT);
  std::fesetround(FE_TOWARDZERO);
  double r = arith(op, a, b, c);
  std::fesetround(FE_TONEAREST);
  if (std::fetestexcept(FE_INEXACT) && std::isfinite(r)) r = std::bit_cast<double>(std::bit_cast<uint64_t>(r) | 1);
  return r;
}

// Rounds v (exact, or rounded to odd in double) into format s.
uint64_t fromDouble(Scalar s, double v, RoundMode m) {
  switch (s) {
    case Scalar::F16: return ir::f64ToF16(v, m);
    case Scalar::BF16: return ir::f64ToBf16(v, m);
    case Scalar::F32: {
      if (m == RoundMode::NearestEven) return std::bit_cast<uint32_t>(static_cast<float>(v));
      std::fesetround(fenvMode(m));
      volatile double vv = v;
      volatile float r = static_cast<float>(vv);
      std::fesetround(FE_TONEAREST);
      return std::bit_cast<uint32_t>(static_cast<float>(r));
    }
    default: return std::bit_cast<uint64_t>(v);
  }
}

// min/max as PTX defines them: a NaN operand is ignored, two NaNs give NaN, -0 < +0.
uint64_t minMax(Scalar s, bool isMax, uint64_t a, uint64_t b) {
  bool na = isNan(s, a), nb = isNan(s, b);
  if (na && nb) return canonicalNan(s);
  if (na) return b;
  if (nb) return a;
  double x = toDouble(s, a), y = toDouble(s, b);
  if (x == y) {
    bool aNeg = (a & signBit(s)) != 0;
    return (aNeg != isMax) ? a : b;
  }
  return ((x < y) != isMax) ? a : b;
}

double approx(Op op, double x) {
  switch (op) {
    case Op::Ex2: return std::exp2(x);
    case Op::Lg2: return std::log2(x);
    case Op::Sin: return std::sin(x);
    case Op::Cos: return std::cos(x);
    case Op::Tanh: return std::tanh(x);
    case Op::Rsqrt: return 1.0 / std::sqrt(x);
    case Op::Rcp: return 1.0 / x;
    case Op::Sqrt: return std::sqrt(x);
    default: return x;
  }
}

// div.approx.f32 computes a * (1/b); for 2^126 < |b| < 2^128 the reciprocal underflows, so the
// result is a sign-preserving zero (NaN for an infinite or NaN a), as the PTX ISA specifies.
bool approxDivUnderflows(double x, double y, double& r) {
  if (!(std::fabs(y) > 0x1p126) || std::isinf(y)) return false;
  r = std::isfinite(x) ? (std::signbit(x) != std::signbit(y) ? -0.0 : 0.0) : std::nan("");
  return true;
}

// rcp.approx.ftz.f64 as the PTX ISA defines it: the reciprocal of the upper 32 bits of a (1.11.20
// format), kept to its upper 32 bits; subnormals flush, NaN gives 0x7FFFFFFF00000000. (The GPU
// approximates those 20 mantissa bits; here they are 1/x truncated.)
uint64_t grossReciprocal(uint64_t a) {
  constexpr uint64_t kHigh = 0xFFFFFFFF00000000;
  double x = std::bit_cast<double>(a & kHigh);
  if (std::isnan(x)) return kHigh & kNanF64;
  if (x == 0 || std::fpclassify(x) == FP_SUBNORMAL) return std::bit_cast<uint64_t>(std::copysign(INFINITY, x));
  double r = 1.0 / x;
  if (std::fpclassify(r) == FP_SUBNORMAL) r = std::copysign(0.0, r);
  return std::bit_cast<uint64_t>(r) & kHigh;
}

Arith arithOf(Op op) {
  switch (op) {
    case Op::Add: return Arith::Add;
    case Op::Sub: return Arith::Sub;
    case Op::Mul: return Arith::Mul;
    case Op::Fma: return Arith::Fma;
    case Op::Div: return Arith::Div;
    case Op::Sqrt: return Arith::Sqrt;
    default: return Arith::Rcp;
  }
}

uint64_t finish(const Code& k, Scalar s, uint64_t r) {
  if (isNan(s, r)) r = canonicalNan(s);
  if (k.ftz) r = flushSubnormal(s, r);
  if (k.sat) {
    double v = toDouble(s, r);
    if (std::isnan(v) || v <= 0) r = 0;  // NaN and -0 become +0
    else if (v > 1) r = fromDouble(s, 1.0, RoundMode::NearestEven);
  }
  return r;
}

// Every float-typed arithmetic op, with all modifiers; the general (slower) path.
uint64_t floatOp(const Code& k, uint64_t a, uint64_t b, uint64_t c) {
  Scalar s = k.scalar;
  if (k.ftz) {
    a = flushSubnormal(s, a);
    b = flushSubnormal(s, b);
    c = flushSubnormal(s, c);
  }
  switch (k.op) {
    case Op::Min: case Op::Max: return finish(k, s, minMax(s, k.op == Op::Max, a, b));
    case Op::Neg: return finish(k, s, a ^ signBit(s));
    case Op::Abs: return finish(k, s, a & ~signBit(s));
    default: break;
  }
  bool isApprox = k.round == Mod::Approx || k.round == Mod::Full;
  if (k.op == Op::Rcp && isApprox && s == Scalar::F64) return grossReciprocal(a);
  double x = toDouble(s, a), y = toDouble(s, b), z = toDouble(s, c);
  switch (k.op) {
    case Op::Ex2: case Op::Lg2: case Op::Sin: case Op::Cos: case Op::Tanh: case Op::Rsqrt:
      return finish(k, s, fromDouble(s, approx(k.op, x), RoundMode::NearestEven));
    case Op::Div: case Op::Rcp: case Op::Sqrt:
      if (isApprox) {
        double v = k.op == Op::Div ? x / y : approx(k.op, x);
        if (k.op == Op::Div && k.round == Mod::Approx && s == Scalar::F32) approxDivUnderflows(x, y, v);
        return finish(k, s, fromDouble(s, v, RoundMode::NearestEven));
      }
      break;
    default: break;
  }
  RoundMode m = roundModeOf(k.round);
  Arith op = arithOf(k.op);
  uint64_t r;
  if (s == Scalar::F64) {
    r = std::bit_cast<uint64_t>(arithRounded<double>(op, x, y, z, m));
  } else if (s == Scalar::F32) {
    r = std::bit_cast<uint32_t>(arithRounded<float>(op, static_cast<float>(x), static_cast<float>(y),
                                                     static_cast<float>(z), m));
  } else {
    r = fromDouble(s, arithOdd(op, x, y, z), m);
  }
  return finish(k, s, r);
}

struct GenericFloat {
  static uint64_t eval(const Code& k, uint64_t a) { return floatOp(k, a, 0, 0); }
  static uint64_t eval(const Code& k, uint64_t a, uint64_t b) { return floatOp(k, a, b, 0); }
  static uint64_t eval(const Code& k, uint64_t a, uint64_t b, uint64_t c) { return floatOp(k, a, b, c); }
};

// The decoder only accepts setp with a comparison modifier, so value_or never applies.
bool compare(Mod cmp, double a, double b) { return ir::floatCompare(cmp, a, b).value_or(false); }

struct GenericSetp {
  static uint64_t eval(const Code& k, uint64_t a, uint64_t b) {
    if (k.ftz) {
      a = flushSubnormal(k.scalar, a);
      b = flushSubnormal(k.scalar, b);
    }
    return compare(k.mode, toDouble(k.scalar, a), toDouble(k.scalar, b));
  }
};

// ---- fast paths: f32/f64, round to nearest, no .sat ---------------------------------------------
template <class F>
struct Native;
template <>
struct Native<float> {
  static float in(uint64_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b)); }
  static uint64_t out(float f) { return f != f ? kNanF32 : std::bit_cast<uint32_t>(f); }
  static float flush(float f) { return std::fpclassify(f) == FP_SUBNORMAL ? std::copysign(0.0f, f) : f; }
};
template <>
struct Native<double> {
  static double in(uint64_t b) { return std::bit_cast<double>(b); }
  static uint64_t out(double f) { return f != f ? kNanF64 : std::bit_cast<uint64_t>(f); }
  static double flush(double f) { return f; }
};

template <class F, bool Ftz>
F inF(uint64_t b) {
  F f = Native<F>::in(b);
  if constexpr (Ftz) f = Native<F>::flush(f);
  return f;
}
template <class F, bool Ftz>
uint64_t outF(F f) {
  if constexpr (Ftz) f = Native<F>::flush(f);
  return Native<F>::out(f);
}

template <class F, bool Ftz>
struct FastAdd {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b) { return outF<F, Ftz>(inF<F, Ftz>(a) + inF<F, Ftz>(b)); }
};
template <class F, bool Ftz>
struct FastSub {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b) { return outF<F, Ftz>(inF<F, Ftz>(a) - inF<F, Ftz>(b)); }
};
template <class F, bool Ftz>
struct FastMul {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b) { return outF<F, Ftz>(inF<F, Ftz>(a) * inF<F, Ftz>(b)); }
};
template <class F, bool Ftz>
struct FastDiv {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b) { return outF<F, Ftz>(inF<F, Ftz>(a) / inF<F, Ftz>(b)); }
};
template <bool Ftz>
struct FastDivApprox {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b) {
    float x = inF<float, Ftz>(a), y = inF<float, Ftz>(b);
    double r;
    if (approxDivUnderflows(x, y, r)) return Native<float>::out(static_cast<float>(r));
    return outF<float, Ftz>(x / y);
  }
};
template <class F, bool Ftz>
struct FastFma {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b, uint64_t c) {
    return outF<F, Ftz>(std::fma(inF<F, Ftz>(a), inF<F, Ftz>(b), inF<F, Ftz>(c)));
  }
};
template <class F, bool Ftz, bool IsMax>
struct FastMinMax {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b) {
    F x = inF<F, Ftz>(a), y = inF<F, Ftz>(b);
    if (x != x) return Native<F>::out(y);  // y, or the canonical NaN when both are NaN
    if (y != y) return Native<F>::out(x);
    if (x == y) return Native<F>::out(std::signbit(x) != IsMax ? x : y);
    return Native<F>::out((x < y) != IsMax ? x : y);
  }
};
// ex2, lg2, sin, cos, tanh, rsqrt and the approximate rcp/sqrt, in double, rounded to nearest.
template <class F, bool Ftz, Op O>
struct FastUnary {
  static uint64_t eval(const Code&, uint64_t a) { return outF<F, Ftz>(static_cast<F>(approx(O, inF<F, Ftz>(a)))); }
};
template <class F, bool Ftz, Mod Cmp>
struct FastSetp {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b) { return compare(Cmp, inF<F, Ftz>(a), inF<F, Ftz>(b)); }
};

template <class F, bool Ftz>
ComputeFn fastSetp(Mod cmp) {
  switch (cmp) {
#define TN_CMP(M) \
  case Mod::M: return &binaryLoop<FastSetp<F, Ftz, Mod::M>>;
    TN_CMP(Eq) TN_CMP(Ne) TN_CMP(Lt) TN_CMP(Le) TN_CMP(Gt) TN_CMP(Ge) TN_CMP(Equ) TN_CMP(Neu) TN_CMP(Ltu)
    TN_CMP(Leu) TN_CMP(Gtu) TN_CMP(Geu) TN_CMP(Num) TN_CMP(Nan)
#undef TN_CMP
    default: return nullptr;
  }
}

template <class F, bool Ftz>
ComputeFn fastFloat(const Code& k) {
  bool rn = k.round == Mod::None || k.round == Mod::Rn;
  bool approxOk = rn || k.round == Mod::Approx || k.round == Mod::Full;
  switch (k.op) {
    case Op::Add: return rn ? &binaryLoop<FastAdd<F, Ftz>> : nullptr;
    case Op::Sub: return rn ? &binaryLoop<FastSub<F, Ftz>> : nullptr;
    case Op::Mul: return rn ? &binaryLoop<FastMul<F, Ftz>> : nullptr;
    case Op::Fma: return rn ? &ternaryLoop<FastFma<F, Ftz>> : nullptr;
    case Op::Div:
      if constexpr (std::is_same_v<F, float>)
        if (k.round == Mod::Approx) return &binaryLoop<FastDivApprox<Ftz>>;
      return approxOk ? &binaryLoop<FastDiv<F, Ftz>> : nullptr;
    case Op::Min: return &binaryLoop<FastMinMax<F, Ftz, false>>;
    case Op::Max: return &binaryLoop<FastMinMax<F, Ftz, true>>;
    case Op::Setp: return fastSetp<F, Ftz>(k.mode);
    case Op::Sqrt: return approxOk ? &unaryLoop<FastUnary<F, Ftz, Op::Sqrt>> : nullptr;
    case Op::Rcp:
      if (std::is_same_v<F, double> && k.round == Mod::Approx) return nullptr;  // the gross f64 form
      return approxOk ? &unaryLoop<FastUnary<F, Ftz, Op::Rcp>> : nullptr;
    case Op::Rsqrt: return &unaryLoop<FastUnary<F, Ftz, Op::Rsqrt>>;
    case Op::Ex2: return &unaryLoop<FastUnary<F, Ftz, Op::Ex2>>;
    case Op::Lg2: return &unaryLoop<FastUnary<F, Ftz, Op::Lg2>>;
    case Op::Sin: return &unaryLoop<FastUnary<F, Ftz, Op::Sin>>;
    case Op::Cos: return &unaryLoop<FastUnary<F, Ftz, Op::Cos>>;
    case Op::Tanh: return &unaryLoop<FastUnary<F, Ftz, Op::Tanh>>;
    default: return nullptr;
  }
}

// ---- conversions ----------------------------------------------------------------------------------
bool isSignedInt(Scalar s) { return s >= Scalar::S8 && s <= Scalar::S64; }
bool isFloatScalar(Scalar s) { return s == Scalar::F16 || s == Scalar::BF16 || s == Scalar::F32 || s == Scalar::F64; }

uint64_t widthMask(unsigned bits) { return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1; }

// An integer source as a 128-bit value (sign-extended for signed types).
__int128 intValue(Scalar s, uint64_t b) {
  unsigned w = ir::scalarBits(s);
  if (isSignedInt(s) && w < 64) return static_cast<int64_t>(b << (64 - w)) >> (64 - w);
  if (isSignedInt(s)) return static_cast<int64_t>(b);
  return b & widthMask(w);
}

uint64_t saturateInt(Scalar to, __int128 v) {
  unsigned w = ir::scalarBits(to);
  __int128 lo = 0, hi = static_cast<__int128>(widthMask(w));
  if (isSignedInt(to)) {
    hi = (static_cast<__int128>(1) << (w - 1)) - 1;
    lo = -hi - 1;
  }
  if (v < lo) v = lo;
  if (v > hi) v = hi;
  return static_cast<uint64_t>(v) & widthMask(w);
}

// Converts a magnitude to F under rounding mode m.
template <class F>
F fromMagnitude(uint64_t mag, RoundMode m) {
  if (m == RoundMode::NearestEven) return static_cast<F>(mag);
  std::fesetround(fenvMode(m));
  volatile uint64_t vm = mag;
  volatile F r = static_cast<F>(static_cast<uint64_t>(vm));
  std::fesetround(FE_TONEAREST);
  return r;
}

uint64_t intToFloat(const Code& k, uint64_t a) {
  __int128 v = intValue(k.srcScalar, a);
  RoundMode m = roundModeOf(k.round);
  bool neg = v < 0;
  uint64_t mag = static_cast<uint64_t>(neg ? -v : v);
  // The magnitude is rounded; toward -inf/+inf swap for negative values.
  RoundMode magMode = m;
  if (neg && m == RoundMode::Down) magMode = RoundMode::Up;
  else if (neg && m == RoundMode::Up) magMode = RoundMode::Down;
  if (k.scalar == Scalar::F32) {
    float f = fromMagnitude<float>(mag, magMode);
    return std::bit_cast<uint32_t>(neg ? -f : f);
  }
  if (k.scalar == Scalar::F64) {
    double d = fromMagnitude<double>(mag, magMode);
    return std::bit_cast<uint64_t>(neg ? -d : d);
  }
  // f16/bf16: the magnitude in double rounded to odd (exact below 2^53), then rounded once more.
  std::feclearexcept(FE_INEXACT);
  double d = fromMagnitude<double>(mag, RoundMode::Zero);
  if (std::fetestexcept(FE_INEXACT)) d = std::bit_cast<double>(std::bit_cast<uint64_t>(d) | 1);
  return fromDouble(k.scalar, neg ? -d : d, m);
}

uint64_t floatToInt(const Code& k, uint64_t a) {
  if (k.ftz) a = flushSubnormal(k.srcScalar, a);
  double x = toDouble(k.srcScalar, a);
  if (std::isnan(x)) return 0;
  switch (k.round) {
    case Mod::Rni: case Mod::Rn: x = std::nearbyint(x); break;
    case Mod::Rmi: case Mod::Rm: x = std::floor(x); break;
    case Mod::Rpi: case Mod::Rp: x = std::ceil(x); break;
    default: x = std::trunc(x); break;
  }
  unsigned w = ir::scalarBits(k.scalar);
  double hi = std::ldexp(1.0, isSignedInt(k.scalar) ? static_cast<int>(w) - 1 : static_cast<int>(w));
  double lo = isSignedInt(k.scalar) ? -hi : 0.0;
  __int128 v;
  if (x >= hi) v = static_cast<__int128>(hi) - 1;
  else if (x < lo) v = static_cast<__int128>(lo);
  else v = static_cast<__int128>(x);
  return saturateInt(k.scalar, v);
}

uint64_t floatToFloat(const Code& k, uint64_t a) {
  Scalar from = k.srcScalar, to = k.scalar;
  if (k.ftz) a = flushSubnormal(from, a);
  if (isNan(from, a)) return finish(k, to, canonicalNan(to));
  double x = toDouble(from, a);
  uint64_t r;
  switch (k.round) {
    case Mod::Rni: case Mod::Rzi: case Mod::Rmi: case Mod::Rpi: {
      double i = k.round == Mod::Rni ? std::nearbyint(x)
                 : k.round == Mod::Rzi ? std::trunc(x)
                 : k.round == Mod::Rmi ? std::floor(x)
                                        : std::ceil(x);
      r = fromDouble(to, i, RoundMode::NearestEven);
      break;
    }
    default:
      r = fromDouble(to, x, roundModeOf(k.round));
      break;
  }
  return finish(k, to, r);
}

struct CvtOp {
  static uint64_t eval(const Code& k, uint64_t a) {
    bool fromF = isFloatScalar(k.srcScalar), toF = isFloatScalar(k.scalar);
    if (fromF && toF) return floatToFloat(k, a);
    if (fromF) return floatToInt(k, a);
    if (toF) return finish(k, k.scalar, intToFloat(k, a));
    __int128 v = intValue(k.srcScalar, a);
    if (k.sat) return saturateInt(k.scalar, v);
    return static_cast<uint64_t>(v) & widthMask(ir::scalarBits(k.scalar));
  }
};

}  // namespace

ComputeFn selectFloat(const Code& k, std::string& why) {
  bool fastEligible = !k.sat && (k.scalar == Scalar::F32 || (k.scalar == Scalar::F64 && !k.ftz));
  if (fastEligible) {
    ComputeFn fn = k.scalar == Scalar::F64 ? fastFloat<double, false>(k)
                   : k.ftz               ? fastFloat<float, true>(k)
                                         : fastFloat<float, false>(k);
    if (fn) return fn;
  }
  switch (k.op) {
    case Op::Setp:
      if (k.mode == Mod::None) break;
      return &binaryLoop<GenericSetp>;
    case Op::Neg: case Op::Abs: case Op::Ex2: case Op::Lg2: case Op::Rcp: case Op::Rsqrt: case Op::Sqrt:
    case Op::Sin: case Op::Cos: case Op::Tanh:
      return &unaryLoop<GenericFloat>;
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Min: case Op::Max:
      return &binaryLoop<GenericFloat>;
    case Op::Fma:
      return &ternaryLoop<GenericFloat>;
    default: break;
  }
  why = "'" + std::string(ir::info(k.op).name) + "' has no floating-point semantics for " +
        std::string(ir::scalarName(k.scalar));
  return nullptr;
}

ComputeFn selectCvt(const Code& k, std::string& why) {
  if (k.srcScalar == Scalar::Pred || k.srcScalar == Scalar::Ptr || k.lanes != 1) {
    why = "cvt from " + std::string(ir::scalarName(k.srcScalar)) + " is not supported";
    return nullptr;
  }
  return &unaryLoop<CvtOp>;
}

uint64_t floatAtomic(const Code& k, uint64_t old, uint64_t b, bool ftz) {
  Code add;
  add.op = k.mode == Mod::AAdd ? Op::Add : k.mode == Mod::AMin ? Op::Min : Op::Max;
  add.scalar = k.scalar;
  add.round = Mod::Rn;
  add.ftz = ftz && k.scalar == Scalar::F32;
  return floatOp(add, old, b, 0);
}

}  // namespace tn::interp::detail
