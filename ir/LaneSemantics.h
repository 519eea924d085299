// Lane semantics: what one GPU thread computes for each integer and floating-point op of the ops
// table (ir/Ops.def) and for every cvt, as the PTX ISA defines it -- wrap-around, .sat, shifts,
// division, rounding modes, canonical NaN, .ftz and the min/max NaN rules. const-fold (through
// passes/IntEval.h) and the interpreter both instantiate these definitions, so a folded constant
// and an interpreted lane cannot differ; const-fold alone decides which results it may fold.
//
// A value is a bit pattern in a uint64_t: operands are read at their type's width (higher bits
// are ignored) and results come back zero-extended. The inline templates here are what the
// interpreter's lane loops instantiate per type; the general float op (every modifier, every
// format) and the conversions are in LaneSemantics.cpp. Directed rounding switches the host
// FPU's mode around one operation and expects round-to-nearest outside it.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>

#include "ir/Float16.h"
#include "ir/Ops.h"

namespace tn::ir::lane {

// ---- bits ----------------------------------------------------------------------------------------

constexpr uint64_t lowMask(unsigned bits) { return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1; }

// The low w bits of `bits` read as a signed number.
constexpr int64_t signExtend(uint64_t bits, unsigned w) {
  if (w >= 64) return static_cast<int64_t>(bits);
  uint64_t m = uint64_t{1} << (w - 1);
  return static_cast<int64_t>(((bits & lowMask(w)) ^ m) - m);
}

// ---- integers ------------------------------------------------------------------------------------
// T is the C++ type of an IR integer type (int8_t .. uint64_t; the b-types are unsigned), or bool
// for pred, which only has the bit ops. Every op is a struct with a static eval(uint64_t...) and
// its arity; arithmetic happens in an unsigned type at least 32 bits wide (no promotion to int, no
// signed overflow), so it wraps as on the GPU.

template <class T>
using Unsigned = std::make_unsigned_t<T>;
template <class T>
using Wrap = std::conditional_t<(sizeof(T) <= 4), uint32_t, uint64_t>;
template <class T>
constexpr unsigned kBits = std::is_same_v<T, bool> ? 1 : sizeof(T) * 8;

template <class T>
constexpr T valueOf(uint64_t b) {
  return static_cast<T>(static_cast<Unsigned<T>>(b));
}
template <class T>
constexpr Wrap<T> wrapped(uint64_t b) {
  return static_cast<Wrap<T>>(static_cast<Unsigned<T>>(b));
}
// The bits of a result, truncated to T's width.
template <class T>
constexpr uint64_t bitsOf(uint64_t v) {
  return v & lowMask(kBits<T>);
}

struct Unary {
  static constexpr unsigned arity = 1;
  static constexpr bool divides = false;
};
struct Binary {
  static constexpr unsigned arity = 2;
  static constexpr bool divides = false;
};
struct Ternary {
  static constexpr unsigned arity = 3;
  static constexpr bool divides = false;
};

template <class T>
struct Add : Binary {
  static uint64_t eval(uint64_t a, uint64_t b) { return bitsOf<T>(wrapped<T>(a) + wrapped<T>(b)); }
};
template <class T>
struct Sub : Binary {
  static uint64_t eval(uint64_t a, uint64_t b) { return bitsOf<T>(wrapped<T>(a) - wrapped<T>(b)); }
};
// add.sat / sub.sat: clamp to T's range instead of wrapping.
template <class T>
struct AddSat : Binary {
  static uint64_t eval(uint64_t a, uint64_t b) {
    T r;
    if (!__builtin_add_overflow(valueOf<T>(a), valueOf<T>(b), &r)) return bitsOf<T>(static_cast<uint64_t>(r));
    bool up = !std::is_signed_v<T> || valueOf<T>(b) > 0;
    return bitsOf<T>(static_cast<uint64_t>(up ? std::numeric_limits<T>::max() : std::numeric_limits<T>::min()));
  }
};
template <class T>
struct SubSat : Binary {
  static uint64_t eval(uint64_t a, uint64_t b) {
    T r;
    if (!__builtin_sub_overflow(valueOf<T>(a), valueOf<T>(b), &r)) return bitsOf<T>(static_cast<uint64_t>(r));
    bool up = std::is_signed_v<T> && valueOf<T>(b) < 0;
    return bitsOf<T>(static_cast<uint64_t>(up ? std::numeric_limits<T>::max() : std::numeric_limits<T>::min()));
  }
};
template <class T>
struct Mul : Binary {
  static uint64_t eval(uint64_t a, uint64_t b) { return bitsOf<T>(wrapped<T>(a) * wrapped<T>(b)); }
};
template <class T>
struct Mad : Ternary {
  static uint64_t eval(uint64_t a, uint64_t b, uint64_t c) {
    return bitsOf<T>(wrapped<T>(a) * wrapped<T>(b) + wrapped<T>(c));
  }
};
// The upper half of the double-width product, signed or unsigned by T.
template <class T>
struct MulHi : Binary {
  static uint64_t eval(uint64_t a, uint64_t b) {
    if constexpr (sizeof(T) == 8) {
      using Wide = std::conditional_t<std::is_signed_v<T>, __int128, unsigned __int128>;
      return static_cast<uint64_t>((static_cast<Wide>(valueOf<T>(a)) * valueOf<T>(b)) >> 64);
    } else {
      using Wide = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
      return bitsOf<T>(static_cast<uint64_t>((static_cast<Wide>(valueOf<T>(a)) * valueOf<T>(b)) >> kBits<T>));
    }
  }
};
// The whole double-width product (T is 16 or 32 bits wide).
template <class T>
struct MulWide : Binary {
  static uint64_t eval(uint64_t a, uint64_t b) {
    using Wide = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
    return static_cast<uint64_t>(static_cast<Wide>(valueOf<T>(a)) * valueOf<T>(b)) & lowMask(2 * kBits<T>);
  }
};
// div and rem truncate toward zero (the remainder takes the dividend's sign). A zero divisor has
// no defined result (the caller checks byZero first); the most negative value divided by -1 is
// not specified by PTX either: eval wraps it to itself with remainder 0, and `specified` says so.
template <class T, bool IsRem>
struct Division : Binary {
  static constexpr bool divides = true;
  static bool byZero(uint64_t b) { return valueOf<T>(b) == 0; }
  static bool specified(uint64_t a, uint64_t b) {
    if (byZero(b)) return false;
    if constexpr (std::is_signed_v<T>) return !(valueOf<T>(b) == -1 && valueOf<T>(a) == std::numeric_limits<T>::min());
    return true;
  }
  static uint64_t eval(uint64_t a, uint64_t b) {
    T x = valueOf<T>(a), y = valueOf<T>(b);
    if (std::is_signed_v<T> && y == T(-1)) return IsRem ? 0 : bitsOf<T>(Wrap<T>(0) - wrapped<T>(a));
    return bitsOf<T>(static_cast<Unsigned<T>>(IsRem ? x % y : x / y));
  }
};
template <class T>
using Div = Division<T, false>;
template <class T>
using Rem = Division<T, true>;
template <class T>
struct Min : Binary {
  static uint64_t eval(uint64_t a, uint64_t b) { return bitsOf<T>(valueOf<T>(a) < valueOf<T>(b) ? a : b); }
};
template <class T>
struct Max : Binary {
  static uint64_t eval(uint64_t a, uint64_t b) { return bitsOf<T>(valueOf<T>(a) > valueOf<T>(b) ? a : b); }
};
// neg and abs wrap: abs(MIN) = MIN.
template <class T>
struct Neg : Unary {
  static uint64_t eval(uint64_t a) { return bitsOf<T>(Wrap<T>(0) - wrapped<T>(a)); }
};
template <class T>
struct Abs : Unary {
  static uint64_t eval(uint64_t a) {
    if constexpr (std::is_signed_v<T>)
      if (valueOf<T>(a) < 0) return bitsOf<T>(Wrap<T>(0) - wrapped<T>(a));
    return bitsOf<T>(a);
  }
};
template <class T>
struct And : Binary {
  static uint64_t eval(uint64_t a, uint64_t b) { return bitsOf<T>(a & b); }
};
template <class T>
struct Or : Binary {
  static uint64_t eval(uint64_t a, uint64_t b) { return bitsOf<T>(a | b); }
};
template <class T>
struct Xor : Binary {
  static uint64_t eval(uint64_t a, uint64_t b) { return bitsOf<T>(a ^ b); }
};
template <class T>
struct Not : Unary {
  static uint64_t eval(uint64_t a) { return bitsOf<T>(~a); }
};
// Shift amounts are u32; an amount >= the width gives 0, or the sign fill for a signed shr.
template <class T>
struct Shl : Binary {
  static uint64_t eval(uint64_t a, uint64_t b) {
    uint32_t n = static_cast<uint32_t>(b);
    return n >= kBits<T> ? 0 : bitsOf<T>(wrapped<T>(a) << n);
  }
};
template <class T>
struct Shr : Binary {
  static uint64_t eval(uint64_t a, uint64_t b) {
    uint32_t n = static_cast<uint32_t>(b);
    if constexpr (std::is_signed_v<T>) {
      if (n >= kBits<T>) n = kBits<T> - 1;
      return bitsOf<T>(static_cast<uint64_t>(static_cast<int64_t>(valueOf<T>(a)) >> n));
    } else {
      return n >= kBits<T> ? 0 : bitsOf<T>(a) >> n;
    }
  }
};
template <class T>
struct Popc : Unary {
  static uint64_t eval(uint64_t a) { return static_cast<uint64_t>(std::popcount(static_cast<Unsigned<T>>(a))); }
};
template <class T>
struct Clz : Unary {
  static uint64_t eval(uint64_t a) { return static_cast<uint64_t>(std::countl_zero(static_cast<Unsigned<T>>(a))); }
};
// The four byte pairs multiplied (signed for s32, unsigned for u32), summed, added to c, wrapping.
template <class T>
struct Dp4a : Ternary {
  static uint64_t eval(uint64_t a, uint64_t b, uint64_t c) {
    using Byte = std::conditional_t<std::is_signed_v<T>, int8_t, uint8_t>;
    int64_t sum = 0;
    for (unsigned i = 0; i < 4; ++i)
      sum += static_cast<int64_t>(static_cast<Byte>(a >> (8 * i))) * static_cast<Byte>(b >> (8 * i));
    return bitsOf<T>(wrapped<T>(c) + static_cast<Wrap<T>>(static_cast<uint64_t>(sum)));
  }
};
// setp on integers: signed or unsigned by T; 1 or 0.
template <class T, Mod Cmp>
struct Compare : Binary {
  static uint64_t eval(uint64_t a, uint64_t b) {
    T x = valueOf<T>(a), y = valueOf<T>(b);
    switch (Cmp) {
      case Mod::Eq: return x == y;
      case Mod::Ne: return x != y;
      case Mod::Lt: return x < y;
      case Mod::Le: return x <= y;
      case Mod::Gt: return x > y;
      default: return x >= y;
    }
  }
};
// cvt between integer types: sign- or zero-extends by From's signedness, then truncates to To or,
// with .sat, clamps to To's range.
template <class From, class To, bool Sat>
struct ConvertInt : Unary {
  static uint64_t eval(uint64_t a) {
    constexpr To lo = std::numeric_limits<To>::min(), hi = std::numeric_limits<To>::max();
    From v = valueOf<From>(a);
    if constexpr (Sat) {
      if (std::cmp_less(v, lo)) return bitsOf<To>(static_cast<uint64_t>(lo));
      if (std::cmp_greater(v, hi)) return bitsOf<To>(static_cast<uint64_t>(hi));
    }
    return bitsOf<To>(static_cast<uint64_t>(v));
  }
};

// ---- Bit permutation and logic: prmt, lop3 -------------------------------------------------------
// The mode and the truth table are run-time parameters (one loop per op, not 256 instances).

// prmt.b32{.mode} d, a, b, c (PTX ISA, prmt): the bytes of {b, a} are numbered 0..7 from a's lowest.
// Without a mode, selector nibble i of c picks d's byte i: its low 3 bits name the source byte, its
// msb replicates that byte's sign bit instead. With a mode, c[1:0] picks one of four fixed patterns.
inline uint32_t prmt(uint32_t a, uint32_t b, uint32_t c, Mod mode) {
  const uint64_t src = uint64_t{b} << 32 | a;
  auto byte = [&](unsigned i) { return static_cast<uint32_t>(src >> (8 * (i & 7))) & 0xFF; };
  const unsigned s = c & 3;
  uint32_t d = 0;
  for (unsigned i = 0; i < 4; ++i) {
    uint32_t v;
    switch (mode) {
      case Mod::F4e: v = byte(s + i); break;
      case Mod::B4e: v = byte(s - i); break;
      case Mod::Rc8: v = byte(s); break;
      case Mod::Ecl: v = byte(i > s ? i : s); break;
      case Mod::Ecr: v = byte(i < s ? i : s); break;
      case Mod::Rc16: v = byte((s & 1) * 2 + (i & 1)); break;
      default: {
        unsigned sel = (c >> (4 * i)) & 0xF;
        v = byte(sel);
        if (sel & 8) v = (v & 0x80) ? 0xFF : 0;
        break;
      }
    }
    d |= v << (8 * i);
  }
  return d;
}

// lop3.b32 d, a, b, c, lut: bit j of d is bit (a_j << 2 | b_j << 1 | c_j) of lut, which makes lut
// the result of the function on a = 0xF0, b = 0xCC, c = 0xAA.
inline uint32_t lop3(uint32_t a, uint32_t b, uint32_t c, uint8_t lut) {
  uint32_t d = 0;
  for (unsigned m = 0; m < 8; ++m)
    if ((lut >> m) & 1) d |= ((m & 4) ? a : ~a) & ((m & 2) ? b : ~b) & ((m & 1) ? c : ~c);
  return d;
}

// Calls pick.template operator()<T>() with the C++ type of integer, bits or pred scalar s; a
// value-initialized result (nullptr, nullopt) for any other scalar.
template <class Pick>
auto withIntType(Scalar s, Pick&& pick) -> decltype(pick.template operator()<uint32_t>()) {
  switch (s) {
    case Scalar::Pred: return pick.template operator()<bool>();
    case Scalar::U8: case Scalar::B8: return pick.template operator()<uint8_t>();
    case Scalar::U16: case Scalar::B16: return pick.template operator()<uint16_t>();
    case Scalar::U32: case Scalar::B32: return pick.template operator()<uint32_t>();
    case Scalar::U64: case Scalar::B64: return pick.template operator()<uint64_t>();
    case Scalar::S8: return pick.template operator()<int8_t>();
    case Scalar::S16: return pick.template operator()<int16_t>();
    case Scalar::S32: return pick.template operator()<int32_t>();
    case Scalar::S64: return pick.template operator()<int64_t>();
    default: return {};
  }
}

// Calls pick.template operator()<L>() with the lane semantics L of integer op `op` on T (`cmp`:
// setp's comparison; `sat` picks the clamping add/sub); a value-initialized result when the op
// has none on T (pred has only and/or/xor/not).
template <class T, class Pick>
auto withIntOp(Op op, Mod cmp, bool sat, Pick&& pick) -> decltype(pick.template operator()<And<T>>()) {
#define TN_LANE(...) return pick.template operator()<__VA_ARGS__>()
  switch (op) {
    case Op::And: TN_LANE(And<T>);
    case Op::Or: TN_LANE(Or<T>);
    case Op::Xor: TN_LANE(Xor<T>);
    case Op::Not: TN_LANE(Not<T>);
    default: break;
  }
  if constexpr (!std::is_same_v<T, bool>) {
    switch (op) {
      case Op::Add: if (sat) TN_LANE(AddSat<T>); TN_LANE(Add<T>);
      case Op::Sub: if (sat) TN_LANE(SubSat<T>); TN_LANE(Sub<T>);
      case Op::Mul: TN_LANE(Mul<T>);
      case Op::MulHi: TN_LANE(MulHi<T>);
      case Op::MulWide: TN_LANE(MulWide<T>);
      case Op::Mad: TN_LANE(Mad<T>);
      case Op::Div: TN_LANE(Div<T>);
      case Op::Rem: TN_LANE(Rem<T>);
      case Op::Min: TN_LANE(Min<T>);
      case Op::Max: TN_LANE(Max<T>);
      case Op::Neg: TN_LANE(Neg<T>);
      case Op::Abs: TN_LANE(Abs<T>);
      case Op::Shl: TN_LANE(Shl<T>);
      case Op::Shr: TN_LANE(Shr<T>);
      case Op::Popc: TN_LANE(Popc<T>);
      case Op::Clz: TN_LANE(Clz<T>);
      case Op::Dp4a: TN_LANE(Dp4a<T>);
      case Op::Setp:
        switch (cmp) {
          case Mod::Eq: TN_LANE(Compare<T, Mod::Eq>);
          case Mod::Ne: TN_LANE(Compare<T, Mod::Ne>);
          case Mod::Lt: TN_LANE(Compare<T, Mod::Lt>);
          case Mod::Le: TN_LANE(Compare<T, Mod::Le>);
          case Mod::Gt: TN_LANE(Compare<T, Mod::Gt>);
          case Mod::Ge: TN_LANE(Compare<T, Mod::Ge>);
          default: break;
        }
        break;
      default: break;
    }
  }
#undef TN_LANE
  return {};
}

// Calls pick.template operator()<L>() with the ConvertInt of integer or bits scalars from -> to.
template <class Pick,
          class R = decltype(std::declval<Pick>().template operator()<ConvertInt<uint32_t, uint32_t, false>>())>
R withConvertInt(Scalar from, Scalar to, bool sat, Pick&& pick) {
  return withIntType(from, [&]<class From>() {
    return withIntType(to, [&]<class To>() -> R {
      if constexpr (std::is_same_v<From, bool> || std::is_same_v<To, bool>) return {};
      else if (sat) return pick.template operator()<ConvertInt<From, To, true>>();
      else return pick.template operator()<ConvertInt<From, To, false>>();
    });
  });
}

// ---- floating-point formats ----------------------------------------------------------------------
// s is f16, bf16, f32 or f64.

constexpr unsigned floatBits(Scalar s) { return s == Scalar::F64 ? 64 : s == Scalar::F32 ? 32 : 16; }
constexpr unsigned mantissaBits(Scalar s) {
  return s == Scalar::F64 ? 52 : s == Scalar::F32 ? 23 : s == Scalar::BF16 ? 7 : 10;
}
constexpr uint64_t signBit(Scalar s) { return uint64_t{1} << (floatBits(s) - 1); }
constexpr uint64_t exponentMask(Scalar s) { return lowMask(floatBits(s) - 1) & ~lowMask(mantissaBits(s)); }

constexpr bool isNan(Scalar s, uint64_t b) { return (b & lowMask(floatBits(s) - 1)) > exponentMask(s); }
constexpr bool isSubnormal(Scalar s, uint64_t b) {
  return (b & exponentMask(s)) == 0 && (b & lowMask(mantissaBits(s))) != 0;
}
// The NaN written for a NaN result: sign clear, all other bits set (the GPU's for f32 arithmetic;
// where the PTX ISA leaves a NaN open, docs/interpreter.md lists it).
constexpr uint64_t canonicalNan(Scalar s) { return lowMask(floatBits(s) - 1); }
constexpr uint64_t canonicalize(Scalar s, uint64_t b) { return isNan(s, b) ? canonicalNan(s) : b; }
// .ftz: a subnormal f16/bf16/f32 input or result becomes a zero of its sign; f64 keeps subnormals.
constexpr uint64_t flushSubnormal(Scalar s, uint64_t b) {
  return s != Scalar::F64 && isSubnormal(s, b) ? b & signBit(s) : b;
}

// The exact value of float bits b of format s.
inline double toDouble(Scalar s, uint64_t b) {
  switch (s) {
    case Scalar::F16: return f16ToF32(static_cast<uint16_t>(b));
    case Scalar::BF16: return bf16ToF32(static_cast<uint16_t>(b));
    case Scalar::F32: return std::bit_cast<float>(static_cast<uint32_t>(b));
    default: return std::bit_cast<double>(b);
  }
}

// The IEEE rounding of a float-rounding modifier (.rn .rz .rm .rp) or of the matching integer
// rounding (.rni .rzi .rmi .rpi); nearest-even for no modifier and for .approx/.full.
constexpr RoundMode roundingOf(Mod m) {
  switch (m) {
    case Mod::Rz: case Mod::Rzi: return RoundMode::Zero;
    case Mod::Rm: case Mod::Rmi: return RoundMode::Down;
    case Mod::Rp: case Mod::Rpi: return RoundMode::Up;
    default: return RoundMode::NearestEven;
  }
}

// Rounds v into format s in mode m: exact when v is representable, correctly rounded when v is
// exact or rounded to odd in double (f64 takes v as it is).
uint64_t fromDouble(Scalar s, double v, RoundMode m);

// ---- floating-point operations -------------------------------------------------------------------

// The correctly rounded IEEE operations of the ops table.
enum class Arith : uint8_t { Add, Sub, Mul, Fma, Div, Sqrt, Rcp };

template <Arith O, class F>
inline F arith(F a, F b, F c) {
  switch (O) {
    case Arith::Add: return a + b;
    case Arith::Sub: return a - b;
    case Arith::Mul: return a * b;
    case Arith::Fma: return std::fma(a, b, c);
    case Arith::Div: return a / b;
    case Arith::Sqrt: return std::sqrt(a);
    default: return F(1) / a;
  }
}

// PTX min/max: a NaN operand is ignored (two NaNs give NaN), and -0 orders below +0.
template <bool IsMax, class F>
inline F minMax(F x, F y) {
  if (x != x) return y;
  if (y != y) return x;
  if (x == y) return std::signbit(x) != IsMax ? x : y;
  return (x < y) != IsMax ? x : y;
}

// PTX setp on floats: the ordered comparisons are false when an operand is NaN, the unordered
// `u` forms true; num and nan test for NaN. nullopt for a modifier that is no comparison.
inline std::optional<bool> floatCompare(Mod cmp, double a, double b) {
  const bool unordered = std::isnan(a) || std::isnan(b);
  switch (cmp) {
    case Mod::Eq: return !unordered && a == b;
    case Mod::Ne: return !unordered && a != b;
    case Mod::Lt: return !unordered && a < b;
    case Mod::Le: return !unordered && a <= b;
    case Mod::Gt: return !unordered && a > b;
    case Mod::Ge: return !unordered && a >= b;
    case Mod::Equ: return unordered || a == b;
    case Mod::Neu: return unordered || a != b;
    case Mod::Ltu: return unordered || a < b;
    case Mod::Leu: return unordered || a <= b;
    case Mod::Gtu: return unordered || a > b;
    case Mod::Geu: return unordered || a >= b;
    case Mod::Num: return !unordered;
    case Mod::Nan: return unordered;
    default: return std::nullopt;
  }
}

// The approximate functions (ex2 lg2 sin cos tanh rsqrt, and rcp/sqrt/div under .approx/.full)
// are computed in double with the C library: a model of the hardware's, which is only as accurate
// as the PTX ISA's error bounds (docs/interpreter.md). const-fold never folds them.
inline double approx(Op op, double x) {
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
inline bool approxDivUnderflows(double x, double y, double& r) {
  if (!(std::fabs(y) > 0x1p126) || std::isinf(y)) return false;
  r = std::isfinite(x) ? (std::signbit(x) != std::signbit(y) ? -0.0 : 0.0) : std::nan("");
  return true;
}

// f32 and f64 operands and results as host floats (the interpreter's fast paths): load reads an
// operand (flushed under .ftz), store writes a result (canonical NaN, flushed under .ftz).
template <class F>
constexpr Scalar kScalarOf = std::is_same_v<F, float> ? Scalar::F32 : Scalar::F64;
template <class F>
using FloatBits = std::conditional_t<std::is_same_v<F, float>, uint32_t, uint64_t>;

template <class F, bool Ftz>
inline F load(uint64_t b) {
  if constexpr (Ftz) b = flushSubnormal(kScalarOf<F>, b);
  return std::bit_cast<F>(static_cast<FloatBits<F>>(b));
}
template <class F, bool Ftz>
inline uint64_t store(F f) {
  uint64_t b = std::bit_cast<FloatBits<F>>(f);
  if constexpr (Ftz) b = flushSubnormal(kScalarOf<F>, b);
  return canonicalize(kScalarOf<F>, b);
}

// The modifiers of a float op or cvt: rounding (float or integer rounding, .approx, .full), .ftz
// and .sat (clamp a float result to [0, 1], NaN to +0).
struct FloatMods {
  Mod round = Mod::None;
  bool ftz = false;
  bool sat = false;
};

// One float-typed op of the ops table (add sub mul fma div min max neg abs sqrt rcp rsqrt ex2 lg2
// sin cos tanh) on format s with every modifier; unused operands are ignored.
uint64_t floatOp(Op op, Scalar s, FloatMods m, uint64_t a, uint64_t b = 0, uint64_t c = 0);

// setp on format s (.ftz flushes the operands first).
inline bool floatSetp(Mod cmp, Scalar s, bool ftz, uint64_t a, uint64_t b) {
  if (ftz) {
    a = flushSubnormal(s, a);
    b = flushSubnormal(s, b);
  }
  return floatCompare(cmp, toDouble(s, a), toDouble(s, b)).value_or(false);
}

// Every cvt between integer and float scalars: integer -> integer as ConvertInt; integer -> float
// rounds in the given mode (default .rn); float -> integer rounds with .rni/.rzi/.rmi/.rpi
// (default .rzi), saturates to the range, and maps NaN to 0, or to 1 << (width - 1) from f64 or
// into 64 bits; float -> float rounds in the given mode, or to an integral value with .rni...rpi.
// .ftz flushes only f32 sources and results.
uint64_t convert(Scalar from, Scalar to, FloatMods m, uint64_t a);

// cvt.pack: f32 `hi` and `lo` converted to `to` (f16 or bf16) as cvt does with `round` (.rn or
// .rz), packed into a b32 in PTX's order: the first source, hi, goes to bits 31:16.
// cvt.tf32 (PTX cvt.rna.tf32.f32): the f32 rounded to 10 fraction bits, to nearest with ties away
// from zero, in an f32 whose low 13 bits are zero; a magnitude past the largest tf32 becomes
// infinity. A NaN loses its low 13 bits, not rounded: sign and high payload stay, and a NaN whose
// payload lies in those bits alone becomes an infinity. PTX calls tf32's layout
// implementation-defined; the GPU probe test/library_bit_probe_test.cpp checks this model, and an
// H200 gave exactly this on 2026-11-30 (0x7FC00001 to 0x7FC00000, 0xFFC01234 to 0xFFC00000,
// 0x7F800001 to 0x7F800000).
constexpr uint64_t roundTf32(uint64_t f32) {
  if (isNan(Scalar::F32, f32)) return f32 & 0xFFFFE000u;
  return ((f32 & 0xFFFFFFFFu) + 0x1000u) & 0xFFFFE000u;
}

// cvt.f16x2 (PTX cvt.rn.f16x2.e4m3x2 / .e5m2x2): one fp8 code (0 ... 255) as f16 bits, exactly
// (every E4M3 and E5M2 value is an f16); NaN codes give the canonical NaN (the interpreter's model:
// PTX does not say which NaN), E5M2's infinities infinities. E5M2 is f16's upper byte.
constexpr uint64_t fp8ToF16(bool e4m3, uint32_t code) {
  const uint32_t sign = (code & 0x80u) << 8, mag = code & 0x7Fu;
  if (!e4m3) return mag > 0x7Cu ? canonicalNan(Scalar::F16) : code << 8;
  if (mag == 0x7Fu) return canonicalNan(Scalar::F16);
  const uint32_t e = mag >> 3, m = mag & 7u;
  if (e != 0) return sign | (e + 8) << 10 | m << 7;  // exponent e - 7, rebiased by 15
  if (m == 0) return sign;
  // A subnormal code m 2^-9: normal in f16, its leading bit moved to the implicit one.
  uint32_t shift = 0, mm = m;
  while (!(mm & 8u)) mm <<= 1, ++shift;
  return sign | (9 - shift) << 10 | (mm & 7u) << 7;
}
// The two codes of a 16-bit value: bits 15:8 to bits 31:16 of the b32, bits 7:0 to 15:0.
constexpr uint64_t cvtF16x2Fp8(bool e4m3, uint64_t codes) {
  return fp8ToF16(e4m3, (codes >> 8) & 0xFFu) << 16 | fp8ToF16(e4m3, codes & 0xFFu);
}

inline uint64_t convertPack(Scalar to, Mod round, uint64_t hi, uint64_t lo) {
  FloatMods m{round, false, false};
  return (convert(Scalar::F32, to, m, hi) << 16) | convert(Scalar::F32, to, m, lo);
}

}  // namespace tn::ir::lane
