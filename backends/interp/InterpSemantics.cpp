// Integer, bit, predicate and data-movement semantics of the interpreter, and the choice of lane
// loop for every pure op (floating point lives in InterpFloat.cpp). Registers hold a value's bits
// zero-extended to 64; every result is truncated to its type's width, so integer arithmetic wraps
// as on the GPU. Shifts follow PTX: an amount >= the width gives 0 (or the sign fill for a signed
// shr); div/rem of the most negative value by -1 wrap; division by zero is a fault.
#include <bit>
#include <limits>
#include <type_traits>

#include "backends/interp/InterpImpl.h"

namespace tn::interp::detail {

uint64_t floatAtomic(const Code& k, uint64_t old, uint64_t b, bool ftz);

namespace {

using ir::Mod;
using ir::Op;
using ir::Scalar;

template <class T>
using Unsigned = std::make_unsigned_t<T>;
// Arithmetic happens in an unsigned type at least 32 bits wide: no promotion to int, no UB.
template <class T>
using Wrap = std::conditional_t<(sizeof(T) <= 4), uint32_t, uint64_t>;
template <class T>
constexpr unsigned kBits = sizeof(T) * 8;

template <class T>
T sv(uint64_t b) {
  return static_cast<T>(static_cast<Unsigned<T>>(b));
}
template <class T>
Wrap<T> wv(uint64_t b) {
  return static_cast<Wrap<T>>(static_cast<Unsigned<T>>(b));
}
template <class T>
uint64_t out(uint64_t v) {
  return static_cast<Unsigned<T>>(v);
}

template <class T>
uint64_t saturate(bool overflow, T r, bool positive) {
  if (!overflow) return out<T>(static_cast<Unsigned<T>>(r));
  return out<T>(static_cast<Unsigned<T>>(positive ? std::numeric_limits<T>::max() : std::numeric_limits<T>::min()));
}

template <class T>
struct IAdd {
  static uint64_t eval(const Code& k, uint64_t a, uint64_t b) {
    if (k.sat) {
      T r;
      bool o = __builtin_add_overflow(sv<T>(a), sv<T>(b), &r);
      return saturate<T>(o, r, std::is_signed_v<T> ? sv<T>(b) > 0 : true);
    }
    return out<T>(wv<T>(a) + wv<T>(b));
  }
};
template <class T>
struct ISub {
  static uint64_t eval(const Code& k, uint64_t a, uint64_t b) {
    if (k.sat) {
      T r;
      bool o = __builtin_sub_overflow(sv<T>(a), sv<T>(b), &r);
      return saturate<T>(o, r, std::is_signed_v<T> ? sv<T>(b) < 0 : false);
    }
    return out<T>(wv<T>(a) - wv<T>(b));
  }
};
template <class T>
struct IMul {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b) { return out<T>(wv<T>(a) * wv<T>(b)); }
};
template <class T>
struct IMad {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b, uint64_t c) { return out<T>(wv<T>(a) * wv<T>(b) + wv<T>(c)); }
};
template <class T>
struct IMulHi {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b) {
    if constexpr (sizeof(T) == 8) {
      using Wide = std::conditional_t<std::is_signed_v<T>, __int128, unsigned __int128>;
      return out<T>(static_cast<uint64_t>((static_cast<Wide>(sv<T>(a)) * sv<T>(b)) >> 64));
    } else {
      using Wide = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
      return out<T>(static_cast<uint64_t>((static_cast<Wide>(sv<T>(a)) * sv<T>(b)) >> kBits<T>));
    }
  }
};
template <class T>
struct IMulWide {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b) {
    using Wide = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
    uint64_t p = static_cast<uint64_t>(static_cast<Wide>(sv<T>(a)) * sv<T>(b));
    return kBits<T> == 32 ? p : p & 0xFFFFFFFFu;
  }
};
template <class T>
struct IMin {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b) { return sv<T>(a) < sv<T>(b) ? a : b; }
};
template <class T>
struct IMax {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b) { return sv<T>(a) > sv<T>(b) ? a : b; }
};
template <class T>
struct INeg {
  static uint64_t eval(const Code&, uint64_t a) { return out<T>(Wrap<T>(0) - wv<T>(a)); }
};
template <class T>
struct IAbs {
  static uint64_t eval(const Code&, uint64_t a) {
    if constexpr (std::is_signed_v<T>)
      if (sv<T>(a) < 0) return out<T>(Wrap<T>(0) - wv<T>(a));
    return a;
  }
};
template <class T>
struct IAnd {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b) { return a & b; }
};
template <class T>
struct IOr {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b) { return a | b; }
};
template <class T>
struct IXor {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b) { return a ^ b; }
};
template <class T>
struct INot {
  static uint64_t eval(const Code&, uint64_t a) { return out<T>(~a); }
};
template <class T>
struct IShl {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b) {
    uint32_t n = static_cast<uint32_t>(b);
    return n >= kBits<T> ? 0 : out<T>(wv<T>(a) << n);
  }
};
template <class T>
struct IShr {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b) {
    uint32_t n = static_cast<uint32_t>(b);
    if constexpr (std::is_signed_v<T>) {
      if (n >= kBits<T>) n = kBits<T> - 1;
      return out<T>(static_cast<uint64_t>(static_cast<int64_t>(sv<T>(a)) >> n));
    } else {
      return n >= kBits<T> ? 0 : (a >> n);
    }
  }
};
template <class T>
struct IPopc {
  static uint64_t eval(const Code&, uint64_t a) { return static_cast<uint64_t>(std::popcount(static_cast<Unsigned<T>>(a))); }
};
template <class T>
struct IClz {
  static uint64_t eval(const Code&, uint64_t a) { return static_cast<uint64_t>(std::countl_zero(static_cast<Unsigned<T>>(a))); }
};
template <class T, Mod Cmp>
struct ISetp {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b) {
    T x = sv<T>(a), y = sv<T>(b);
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
template <class T>
struct IDp4a {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b, uint64_t c) {
    using Byte = std::conditional_t<std::is_signed_v<T>, int8_t, uint8_t>;
    int64_t sum = 0;
    for (unsigned i = 0; i < 4; ++i)
      sum += static_cast<int64_t>(static_cast<Byte>(a >> (8 * i))) * static_cast<Byte>(b >> (8 * i));
    return out<T>(wv<T>(c) + static_cast<Wrap<T>>(static_cast<uint64_t>(sum)));
  }
};

template <class T, bool Rem>
int divLoop(uint64_t* regs, uint32_t mask, const Code& k) {
  uint64_t* d = slotPtr(regs, k.dst);
  const uint64_t* a = slotPtr(regs, k.src[0]);
  const uint64_t* b = slotPtr(regs, k.src[1]);
  for (uint32_t m = mask; m; m &= m - 1)
    if (sv<T>(b[std::countr_zero(m)]) == 0) return std::countr_zero(m);
  forLanes(mask, [&](uint32_t l) {
    T x = sv<T>(a[l]), y = sv<T>(b[l]);
    if (std::is_signed_v<T> && y == T(-1)) {
      d[l] = Rem ? 0 : out<T>(Wrap<T>(0) - wv<T>(a[l]));  // MIN / -1 wraps to MIN
      return;
    }
    d[l] = out<T>(static_cast<Unsigned<T>>(Rem ? x % y : x / y));
  });
  return -1;
}

struct PredAnd {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b) { return a & b & 1; }
};
struct PredOr {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b) { return (a | b) & 1; }
};
struct PredXor {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b) { return (a ^ b) & 1; }
};
struct PredNot {
  static uint64_t eval(const Code&, uint64_t a) { return (a & 1) ^ 1; }
};
struct Selp {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b, uint64_t c) { return (c & 1) ? a : b; }
};
struct PtrAdd64 {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b) { return (a & ~kOffsetMask) | ((a + b) & kOffsetMask); }
};
struct PtrAdd32 {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b) { return static_cast<uint32_t>(a + b); }
};

bool is32BitSpace(ir::AddrSpace s) { return s == ir::AddrSpace::Shared || s == ir::AddrSpace::Local; }

// Same-size bitcasts copy bits. Between pointers of different widths, a shared offset becomes a
// generic pointer tagged as shared, and back.
struct Bitcast {
  static uint64_t eval(const Code& k, uint64_t a) {
    if (k.srcScalar != Scalar::Ptr || k.scalar != Scalar::Ptr) return a;
    bool from32 = is32BitSpace(k.srcSpace), to32 = is32BitSpace(k.space);
    if (from32 && !to32) return k.srcSpace == ir::AddrSpace::Shared ? (kSharedTag << kTagShift) | a : a;
    if (!from32 && to32) return static_cast<uint32_t>(a);
    return a;
  }
};

int packLoop(uint64_t* regs, uint32_t mask, const Code& k) {
  const unsigned eb = ir::scalarBits(k.scalar);
  const unsigned slots = (k.lanes * eb + 63) / 64;
  const uint64_t elemMask = eb >= 64 ? ~uint64_t{0} : (uint64_t{1} << eb) - 1;
  forLanes(mask, [&](uint32_t l) {
    uint64_t v[4] = {0, 0, 0, 0};
    for (unsigned i = 0; i < k.lanes; ++i) {
      unsigned bit = i * eb;
      v[bit / 64] |= (slotPtr(regs, k.src[i])[l] & elemMask) << (bit % 64);
    }
    for (unsigned s = 0; s < slots; ++s) slotPtr(regs, k.dst + s)[l] = v[s];
  });
  return -1;
}

int extractLoop(uint64_t* regs, uint32_t mask, const Code& k) {
  const unsigned eb = ir::scalarBits(k.scalar);
  const unsigned bit = static_cast<unsigned>(k.imm) * eb;
  const uint64_t elemMask = eb >= 64 ? ~uint64_t{0} : (uint64_t{1} << eb) - 1;
  uint64_t* d = slotPtr(regs, k.dst);
  const uint64_t* a = slotPtr(regs, k.src[0] + bit / 64);
  forLanes(mask, [&](uint32_t l) { d[l] = (a[l] >> (bit % 64)) & elemMask; });
  return -1;
}

// Calls pick.template operator()<T>() with the C++ integer type of scalar s.
template <class Pick>
ComputeFn byIntType(Scalar s, Pick pick) {
  switch (s) {
    case Scalar::U8: case Scalar::B8: return pick.template operator()<uint8_t>();
    case Scalar::U16: case Scalar::B16: return pick.template operator()<uint16_t>();
    case Scalar::U32: case Scalar::B32: return pick.template operator()<uint32_t>();
    case Scalar::U64: case Scalar::B64: return pick.template operator()<uint64_t>();
    case Scalar::S8: return pick.template operator()<int8_t>();
    case Scalar::S16: return pick.template operator()<int16_t>();
    case Scalar::S32: return pick.template operator()<int32_t>();
    case Scalar::S64: return pick.template operator()<int64_t>();
    default: return nullptr;
  }
}

template <template <class> class Op>
ComputeFn unary(Scalar s) {
  return byIntType(s, []<class T>() -> ComputeFn { return &unaryLoop<Op<T>>; });
}
template <template <class> class Op>
ComputeFn binary(Scalar s) {
  return byIntType(s, []<class T>() -> ComputeFn { return &binaryLoop<Op<T>>; });
}
template <template <class> class Op>
ComputeFn ternary(Scalar s) {
  return byIntType(s, []<class T>() -> ComputeFn { return &ternaryLoop<Op<T>>; });
}

ComputeFn intSetp(Scalar s, Mod cmp) {
  return byIntType(s, [cmp]<class T>() -> ComputeFn {
    switch (cmp) {
      case Mod::Eq: return &binaryLoop<ISetp<T, Mod::Eq>>;
      case Mod::Ne: return &binaryLoop<ISetp<T, Mod::Ne>>;
      case Mod::Lt: return &binaryLoop<ISetp<T, Mod::Lt>>;
      case Mod::Le: return &binaryLoop<ISetp<T, Mod::Le>>;
      case Mod::Gt: return &binaryLoop<ISetp<T, Mod::Gt>>;
      case Mod::Ge: return &binaryLoop<ISetp<T, Mod::Ge>>;
      default: return nullptr;
    }
  });
}

ComputeFn predOp(Op op) {
  switch (op) {
    case Op::And: return &binaryLoop<PredAnd>;
    case Op::Or: return &binaryLoop<PredOr>;
    case Op::Xor: return &binaryLoop<PredXor>;
    case Op::Not: return &unaryLoop<PredNot>;
    default: return nullptr;
  }
}

ComputeFn intOp(const Code& k) {
  Scalar s = k.scalar;
  switch (k.op) {
    case Op::Add: return binary<IAdd>(s);
    case Op::Sub: return binary<ISub>(s);
    case Op::Mul: return binary<IMul>(s);
    case Op::MulHi: return binary<IMulHi>(s);
    case Op::MulWide: return binary<IMulWide>(s);
    case Op::Mad: return ternary<IMad>(s);
    case Op::Div: return byIntType(s, []<class T>() -> ComputeFn { return &divLoop<T, false>; });
    case Op::Rem: return byIntType(s, []<class T>() -> ComputeFn { return &divLoop<T, true>; });
    case Op::Min: return binary<IMin>(s);
    case Op::Max: return binary<IMax>(s);
    case Op::Neg: return unary<INeg>(s);
    case Op::Abs: return unary<IAbs>(s);
    case Op::And: return binary<IAnd>(s);
    case Op::Or: return binary<IOr>(s);
    case Op::Xor: return binary<IXor>(s);
    case Op::Not: return unary<INot>(s);
    case Op::Shl: return binary<IShl>(s);
    case Op::Shr: return binary<IShr>(s);
    case Op::Popc: return unary<IPopc>(s);
    case Op::Clz: return unary<IClz>(s);
    case Op::Setp: return intSetp(s, k.mode);
    case Op::Dp4a: return ternary<IDp4a>(s);
    default: return nullptr;
  }
}

}  // namespace

ComputeFn selectCompute(const Code& k, std::string& why) {
  ComputeFn fn = nullptr;
  switch (k.op) {
    case Op::Cvt: return selectCvt(k, why);
    case Op::Bitcast: fn = &unaryLoop<Bitcast>; break;
    case Op::PtrAdd: fn = is32BitSpace(k.space) ? &binaryLoop<PtrAdd32> : &binaryLoop<PtrAdd64>; break;
    case Op::Pack: fn = &packLoop; break;
    case Op::Extract: fn = &extractLoop; break;
    case Op::Selp: fn = &ternaryLoop<Selp>; break;
    default:
      if (k.scalar == Scalar::F16 || k.scalar == Scalar::BF16 || k.scalar == Scalar::F32 || k.scalar == Scalar::F64)
        return selectFloat(k, why);
      fn = k.scalar == Scalar::Pred ? predOp(k.op) : intOp(k);
      break;
  }
  if (!fn)
    why = "'" + std::string(ir::info(k.op).name) + (k.mode != Mod::None ? "." + std::string(ir::modName(k.mode)) : "") +
          "' has no semantics for type " + std::string(ir::scalarName(k.scalar));
  return fn;
}

uint64_t atomicResult(const Code& k, uint64_t old, uint64_t b, uint64_t c, bool ftz) {
  const Scalar s = k.scalar;
  const unsigned bits = ir::scalarBits(s);
  const uint64_t mask = bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  if (k.op == Op::AtomCas) return (old & mask) == (b & mask) ? c : old;
  if (k.mode == Mod::AExch) return b;
  bool isFloat = s == Scalar::F16 || s == Scalar::BF16 || s == Scalar::F32 || s == Scalar::F64;
  if (isFloat) return floatAtomic(k, old, b, ftz);
  bool isSigned = s >= Scalar::S8 && s <= Scalar::S64;
  auto sext = [&](uint64_t v) {
    return bits >= 64 ? static_cast<int64_t>(v) : static_cast<int64_t>(v << (64 - bits)) >> (64 - bits);
  };
  switch (k.mode) {
    case Mod::AAdd: return (old + b) & mask;
    case Mod::AAnd: return old & b;
    case Mod::AOr: return old | b;
    case Mod::AXor: return old ^ b;
    case Mod::AMin: return (isSigned ? sext(old) < sext(b) : old < b) ? old : b;
    case Mod::AMax: return (isSigned ? sext(old) > sext(b) : old > b) ? old : b;
    case Mod::AInc: return old >= b ? 0 : (old + 1) & mask;
    case Mod::ADec: return (old == 0 || old > b) ? b : old - 1;
    default: return old;
  }
}

}  // namespace tn::interp::detail
