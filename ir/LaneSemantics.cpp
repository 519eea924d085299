// The lane semantics that are not performance-critical (ir/LaneSemantics.h): the general float op
// with every modifier and format, and the conversions.
//
// How results are rounded:
//   f32, f64   computed natively; a directed rounding mode (.rz/.rm/.rp) is applied by switching
//              the host FPU's rounding mode around the operation (operands pass through volatile
//              so the compiler cannot move the operation across the switch).
//   f16, bf16  computed in double with round-to-odd (round toward zero, then set the last bit if
//              the result was inexact), then rounded to the target with ir/Float16.h. Double has
//              more than 2p+2 bits for both formats, so this double rounding is exact.
//   .approx    computed in double with the C library, then rounded to nearest.
#include "ir/LaneSemantics.h"

#include <cfenv>

namespace tn::ir::lane {

namespace {

int fenvMode(RoundMode m) {
  switch (m) {
    case RoundMode::Zero: return FE_TOWARDZERO;
    case RoundMode::Down: return FE_DOWNWARD;
    case RoundMode::Up: return FE_UPWARD;
    default: return FE_TONEAREST;
  }
}

// The host rounds in mode m while this lives (round-to-nearest is the mode outside).
class Rounding {
 public:
  explicit Rounding(RoundMode m) : directed_(m != RoundMode::NearestEven) {
    if (directed_) std::fesetround(fenvMode(m));
  }
  ~Rounding() {
    if (directed_) std::fesetround(FE_TONEAREST);
  }
  Rounding(const Rounding&) = delete;
  Rounding& operator=(const Rounding&) = delete;

 private:
  bool directed_;
};

// An IEEE operation in F under rounding mode m.
template <class F>
F arithIn(Arith op, F a, F b, F c, RoundMode m) {
  volatile F va = a, vb = b, vc = c;
  Rounding mode(m);
  volatile F r = 0;
  switch (op) {
    case Arith::Add: r = arith<Arith::Add, F>(va, vb, vc); break;
    case Arith::Sub: r = arith<Arith::Sub, F>(va, vb, vc); break;
    case Arith::Mul: r = arith<Arith::Mul, F>(va, vb, vc); break;
    case Arith::Fma: r = arith<Arith::Fma, F>(va, vb, vc); break;
    case Arith::Div: r = arith<Arith::Div, F>(va, vb, vc); break;
    case Arith::Sqrt: r = arith<Arith::Sqrt, F>(va, vb, vc); break;
    case Arith::Rcp: r = arith<Arith::Rcp, F>(va, vb, vc); break;
  }
  return r;
}

// Sets the last bit of an inexact finite double: rounding to odd.
double toOdd(double r, bool inexact) {
  return inexact && std::isfinite(r) ? std::bit_cast<double>(std::bit_cast<uint64_t>(r) | 1) : r;
}

// The operation in double, rounded to odd: exact results stay, inexact ones get their last bit set.
double arithOdd(Arith op, double a, double b, double c) {
  std::feclearexcept(FE_INEXACT);
  double r = arithIn<double>(op, a, b, c, RoundMode::Zero);
  return toOdd(r, std::fetestexcept(FE_INEXACT));
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

// rcp.approx.ftz.f64 and rsqrt.approx.ftz.f64 as the PTX ISA defines them (Floating Point
// Instructions: rcp.approx.ftz.f64, rsqrt.approx.ftz.f64): computed on the upper 32 bits of a
// (1.11.20 format) into d[63:32], with d[31:0] = 0. Subnormal inputs and results flush to
// sign-preserving zero (+-subnormal gives +-Inf); a NaN result (NaN operand, rsqrt below -0) is
// 0x7FFFFFFF00000000. The GPU approximates the 20 result bits; here they are truncated from double.
uint64_t upperWordApprox(Op op, uint64_t a) {
  constexpr uint64_t kHigh = 0xFFFFFFFF00000000;
  double x = std::bit_cast<double>(a & kHigh);
  if (std::fpclassify(x) == FP_SUBNORMAL) x = std::copysign(0.0, x);
  double r = op == Op::Rsqrt ? 1.0 / std::sqrt(x) : 1.0 / x;
  if (std::isnan(r)) return kHigh & canonicalNan(Scalar::F64);
  if (std::fpclassify(r) == FP_SUBNORMAL) r = std::copysign(0.0, r);
  return std::bit_cast<uint64_t>(r) & kHigh;
}

// A float result as the GPU writes it: canonical NaN, .ftz flush, .sat clamp to [0, 1] (NaN and
// -0 become +0).
uint64_t finish(Scalar s, FloatMods m, uint64_t r) {
  r = canonicalize(s, r);
  if (m.ftz) r = flushSubnormal(s, r);
  if (m.sat) {
    double v = toDouble(s, r);
    if (std::isnan(v) || v <= 0) r = 0;
    else if (v > 1) r = fromDouble(s, 1.0, RoundMode::NearestEven);
  }
  return r;
}

// min/max on any format: the PTX rule on the exact values; the result is one of the operands,
// so converting it back is exact.
uint64_t minMaxOf(Scalar s, bool isMax, uint64_t a, uint64_t b) {
  double x = toDouble(s, a), y = toDouble(s, b);
  return fromDouble(s, isMax ? minMax<true>(x, y) : minMax<false>(x, y), RoundMode::NearestEven);
}

// ---- conversions ---------------------------------------------------------------------------------

// An integer source as a 128-bit value (sign-extended for signed types).
__int128 intValue(Scalar s, uint64_t b) {
  unsigned w = scalarBits(s);
  if (Type::of(s).isSigned()) return signExtend(b, w);
  return b & lowMask(w);
}

// A magnitude converted to F in rounding mode m.
template <class F>
F fromMagnitude(uint64_t mag, RoundMode m) {
  volatile uint64_t vm = mag;
  Rounding mode(m);
  volatile F r = static_cast<F>(static_cast<uint64_t>(vm));
  return r;
}

uint64_t intToFloat(Scalar from, Scalar to, Mod round, uint64_t a) {
  __int128 v = intValue(from, a);
  RoundMode m = roundingOf(round);
  bool neg = v < 0;
  uint64_t mag = static_cast<uint64_t>(neg ? -v : v);
  // The magnitude is rounded; toward -inf/+inf swap for negative values.
  RoundMode magMode = m;
  if (neg && m == RoundMode::Down) magMode = RoundMode::Up;
  else if (neg && m == RoundMode::Up) magMode = RoundMode::Down;
  if (to == Scalar::F32) {
    float f = fromMagnitude<float>(mag, magMode);
    return std::bit_cast<uint32_t>(neg ? -f : f);
  }
  if (to == Scalar::F64) {
    double d = fromMagnitude<double>(mag, magMode);
    return std::bit_cast<uint64_t>(neg ? -d : d);
  }
  // f16/bf16: the magnitude in double rounded to odd (exact below 2^53), then rounded once more.
  std::feclearexcept(FE_INEXACT);
  double d = fromMagnitude<double>(mag, RoundMode::Zero);
  d = toOdd(d, std::fetestexcept(FE_INEXACT));
  return fromDouble(to, neg ? -d : d, m);
}

// x rounded to an integral value by an integer rounding modifier (no modifier: toward zero).
double roundIntegral(Mod round, double x) {
  switch (round) {
    case Mod::Rni: case Mod::Rn: return std::nearbyint(x);
    case Mod::Rmi: case Mod::Rm: return std::floor(x);
    case Mod::Rpi: case Mod::Rp: return std::ceil(x);
    default: return std::trunc(x);
  }
}

// cvt.ftz flushes only .f32 sources and results (PTX ISA, cvt: ".ftz ... applies only to single
// precision (.f32) inputs and results"); f16 and bf16 subnormals are kept.
uint64_t cvtFlush(Scalar s, bool ftz, uint64_t b) { return ftz && s == Scalar::F32 ? flushSubnormal(s, b) : b; }

uint64_t floatToInt(Scalar from, Scalar to, FloatMods m, uint64_t a) {
  a = cvtFlush(from, m.ftz, a);
  unsigned w = scalarBits(to);
  // PTX ISA, cvt, float-to-integer: NaN gives 0 unless the source is .f64 or the destination is
  // 64 bits wide; then 1 << (w - 1) (MININT signed, (MAXINT >> 1) + 1 unsigned).
  if (isNan(from, a)) return from == Scalar::F64 || w == 64 ? uint64_t{1} << (w - 1) : 0;
  double x = roundIntegral(m.round, toDouble(from, a));
  bool isSigned = Type::of(to).isSigned();
  double hi = std::ldexp(1.0, isSigned ? static_cast<int>(w) - 1 : static_cast<int>(w));
  double lo = isSigned ? -hi : 0.0;
  __int128 v;
  if (x >= hi) v = static_cast<__int128>(hi) - 1;
  else if (x < lo) v = static_cast<__int128>(lo);
  else v = static_cast<__int128>(x);
  return static_cast<uint64_t>(v) & lowMask(w);
}

uint64_t floatToFloat(Scalar from, Scalar to, FloatMods m, uint64_t a) {
  a = cvtFlush(from, m.ftz, a);
  if (to != Scalar::F32) m.ftz = false;  // so finish() keeps f16/bf16/f64 subnormal results
  if (isNan(from, a)) return finish(to, m, canonicalNan(to));
  double x = toDouble(from, a);
  uint64_t r;
  switch (m.round) {
    case Mod::Rni: case Mod::Rzi: case Mod::Rmi: case Mod::Rpi:
      r = fromDouble(to, roundIntegral(m.round, x), RoundMode::NearestEven);
      break;
    default:
      r = fromDouble(to, x, roundingOf(m.round));
      break;
  }
  return finish(to, m, r);
}

}  // namespace

uint64_t fromDouble(Scalar s, double v, RoundMode m) {
  switch (s) {
    case Scalar::F16: return f64ToF16(v, m);
    case Scalar::BF16: return f64ToBf16(v, m);
    case Scalar::F32: {
      volatile double vv = v;
      Rounding mode(m);
      volatile float r = static_cast<float>(vv);
      return std::bit_cast<uint32_t>(static_cast<float>(r));
    }
    default: return std::bit_cast<uint64_t>(v);
  }
}

uint64_t floatOp(Op op, Scalar s, FloatMods m, uint64_t a, uint64_t b, uint64_t c) {
  if (m.ftz) {
    a = flushSubnormal(s, a);
    b = flushSubnormal(s, b);
    c = flushSubnormal(s, c);
  }
  switch (op) {
    case Op::Min: case Op::Max: return finish(s, m, minMaxOf(s, op == Op::Max, a, b));
    case Op::Neg: return finish(s, m, a ^ signBit(s));
    case Op::Abs:
      // PTX ISA, abs: "For abs.f64, NaN input is passed through unchanged": the payload stays (the
      // sign bit is cleared, as abs does to any input). Other formats give an unspecified NaN,
      // modelled as the canonical one (docs/interpreter.md, "Where the PTX ISA leaves results open").
      if (s == Scalar::F64 && isNan(s, a)) return a & ~signBit(s);
      return finish(s, m, a & ~signBit(s));
    default: break;
  }
  bool isApprox = m.round == Mod::Approx || m.round == Mod::Full;
  // rcp.approx.f64 exists only with .ftz; rsqrt.approx.f64 without .ftz is the full-width one.
  if (s == Scalar::F64 && isApprox && (op == Op::Rcp || (op == Op::Rsqrt && m.ftz))) return upperWordApprox(op, a);
  double x = toDouble(s, a), y = toDouble(s, b), z = toDouble(s, c);
  switch (op) {
    case Op::Ex2: case Op::Lg2: case Op::Sin: case Op::Cos: case Op::Tanh: case Op::Rsqrt:
      return finish(s, m, fromDouble(s, approx(op, x), RoundMode::NearestEven));
    case Op::Div: case Op::Rcp: case Op::Sqrt:
      if (isApprox) {
        double v = op == Op::Div ? x / y : approx(op, x);
        if (op == Op::Div && m.round == Mod::Approx && s == Scalar::F32) approxDivUnderflows(x, y, v);
        return finish(s, m, fromDouble(s, v, RoundMode::NearestEven));
      }
      break;
    default: break;
  }
  RoundMode mode = roundingOf(m.round);
  Arith o = arithOf(op);
  uint64_t r;
  if (s == Scalar::F64) {
    r = std::bit_cast<uint64_t>(arithIn<double>(o, x, y, z, mode));
  } else if (s == Scalar::F32) {
    r = std::bit_cast<uint32_t>(
        arithIn<float>(o, static_cast<float>(x), static_cast<float>(y), static_cast<float>(z), mode));
  } else {
    r = fromDouble(s, arithOdd(o, x, y, z), mode);
  }
  return finish(s, m, r);
}

uint64_t convert(Scalar from, Scalar to, FloatMods m, uint64_t a) {
  bool fromFloat = Type::of(from).isFloat(), toFloat = Type::of(to).isFloat();
  if (fromFloat && toFloat) return floatToFloat(from, to, m, a);
  if (fromFloat) return floatToInt(from, to, m, a);
  if (toFloat) return finish(to, m, intToFloat(from, to, m.round, a));
  return withConvertInt(from, to, m.sat, [a]<class L>() { return L::eval(a); });
}

}  // namespace tn::ir::lane
