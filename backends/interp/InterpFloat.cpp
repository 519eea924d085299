// The interpreter's lane loops for floating-point ops and every cvt. The semantics are those of
// ir/LaneSemantics.h; this file picks, per decoded op, the loop that instantiates them: a fast
// path for f32/f64 without .sat whose arithmetic is rounded to nearest (or approximate), and the
// general lane::floatOp / lane::convert for everything else. The engine runs every launch in
// round-to-nearest, so the fast paths need no mode switch.
#include <type_traits>

#include "backends/interp/InterpImpl.h"
#include "ir/LaneSemantics.h"

namespace tn::interp::detail {

namespace {

using ir::Mod;
using ir::Op;
using ir::Scalar;
namespace lane = ir::lane;

lane::FloatMods modsOf(const Code& k) { return {k.round, k.ftz, k.sat}; }

// Every float-typed arithmetic op with all modifiers: the general (slower) path.
struct GenericFloat {
  static uint64_t eval(const Code& k, uint64_t a) { return lane::floatOp(k.op, k.scalar, modsOf(k), a); }
  static uint64_t eval(const Code& k, uint64_t a, uint64_t b) { return lane::floatOp(k.op, k.scalar, modsOf(k), a, b); }
  static uint64_t eval(const Code& k, uint64_t a, uint64_t b, uint64_t c) {
    return lane::floatOp(k.op, k.scalar, modsOf(k), a, b, c);
  }
};

struct GenericSetp {
  static uint64_t eval(const Code& k, uint64_t a, uint64_t b) { return lane::floatSetp(k.mode, k.scalar, k.ftz, a, b); }
};

// ---- fast paths: f32/f64, no .sat, rounded to nearest or approximate ----------------------------
template <lane::Arith O, class F, bool Ftz>
struct FastArith {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b) {
    return lane::store<F, Ftz>(lane::arith<O, F>(lane::load<F, Ftz>(a), lane::load<F, Ftz>(b), F(0)));
  }
  static uint64_t eval(const Code&, uint64_t a, uint64_t b, uint64_t c) {
    return lane::store<F, Ftz>(lane::arith<O, F>(lane::load<F, Ftz>(a), lane::load<F, Ftz>(b), lane::load<F, Ftz>(c)));
  }
};
template <bool Ftz>
struct FastDivApprox {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b) {
    float x = lane::load<float, Ftz>(a), y = lane::load<float, Ftz>(b);
    double r;
    if (lane::approxDivUnderflows(x, y, r)) return lane::store<float, false>(static_cast<float>(r));
    return lane::store<float, Ftz>(x / y);
  }
};
template <class F, bool Ftz, bool IsMax>
struct FastMinMax {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b) {
    return lane::store<F, Ftz>(lane::minMax<IsMax>(lane::load<F, Ftz>(a), lane::load<F, Ftz>(b)));
  }
};
// ex2, lg2, sin, cos, tanh, rsqrt and the approximate rcp/sqrt, in double, rounded to nearest.
template <class F, bool Ftz, Op O>
struct FastApprox {
  static uint64_t eval(const Code&, uint64_t a) {
    return lane::store<F, Ftz>(static_cast<F>(lane::approx(O, lane::load<F, Ftz>(a))));
  }
};
template <class F, bool Ftz, Mod Cmp>
struct FastSetp {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b) {
    return lane::floatCompare(Cmp, lane::load<F, Ftz>(a), lane::load<F, Ftz>(b)).value_or(false);
  }
};

template <class F, bool Ftz>
ComputeFn fastSetp(Mod cmp) {
  switch (cmp) {
#define TN_CMP(M) \
  case Mod::M: return &lanesLoop<FastSetp<F, Ftz, Mod::M>, 2>;
    TN_CMP(Eq) TN_CMP(Ne) TN_CMP(Lt) TN_CMP(Le) TN_CMP(Gt) TN_CMP(Ge) TN_CMP(Equ) TN_CMP(Neu) TN_CMP(Ltu)
    TN_CMP(Leu) TN_CMP(Gtu) TN_CMP(Geu) TN_CMP(Num) TN_CMP(Nan)
#undef TN_CMP
    default: return nullptr;
  }
}

template <class F, bool Ftz>
ComputeFn fastFloat(const Code& k) {
  using lane::Arith;
  bool rn = k.round == Mod::None || k.round == Mod::Rn;
  bool approxOk = rn || k.round == Mod::Approx || k.round == Mod::Full;
  switch (k.op) {
    case Op::Add: return rn ? &lanesLoop<FastArith<Arith::Add, F, Ftz>, 2> : nullptr;
    case Op::Sub: return rn ? &lanesLoop<FastArith<Arith::Sub, F, Ftz>, 2> : nullptr;
    case Op::Mul: return rn ? &lanesLoop<FastArith<Arith::Mul, F, Ftz>, 2> : nullptr;
    case Op::Fma: return rn ? &lanesLoop<FastArith<Arith::Fma, F, Ftz>, 3> : nullptr;
    case Op::Div:
      if constexpr (std::is_same_v<F, float>)
        if (k.round == Mod::Approx) return &lanesLoop<FastDivApprox<Ftz>, 2>;
      return approxOk ? &lanesLoop<FastArith<Arith::Div, F, Ftz>, 2> : nullptr;
    case Op::Min: return &lanesLoop<FastMinMax<F, Ftz, false>, 2>;
    case Op::Max: return &lanesLoop<FastMinMax<F, Ftz, true>, 2>;
    case Op::Setp: return fastSetp<F, Ftz>(k.mode);
    case Op::Sqrt: return approxOk ? &lanesLoop<FastApprox<F, Ftz, Op::Sqrt>, 1> : nullptr;
    case Op::Rcp:
      if (std::is_same_v<F, double> && k.round == Mod::Approx) return nullptr;  // the gross f64 form
      return approxOk ? &lanesLoop<FastApprox<F, Ftz, Op::Rcp>, 1> : nullptr;
    case Op::Rsqrt: return &lanesLoop<FastApprox<F, Ftz, Op::Rsqrt>, 1>;
    case Op::Ex2: return &lanesLoop<FastApprox<F, Ftz, Op::Ex2>, 1>;
    case Op::Lg2: return &lanesLoop<FastApprox<F, Ftz, Op::Lg2>, 1>;
    case Op::Sin: return &lanesLoop<FastApprox<F, Ftz, Op::Sin>, 1>;
    case Op::Cos: return &lanesLoop<FastApprox<F, Ftz, Op::Cos>, 1>;
    case Op::Tanh: return &lanesLoop<FastApprox<F, Ftz, Op::Tanh>, 1>;
    default: return nullptr;
  }
}

// ---- conversions ---------------------------------------------------------------------------------
struct CvtFloat {
  static uint64_t eval(const Code& k, uint64_t a) { return lane::convert(k.srcScalar, k.scalar, modsOf(k), a); }
};

struct CvtPack {
  static uint64_t eval(const Code& k, uint64_t hi, uint64_t lo) { return lane::convertPack(k.scalar, k.round, hi, lo); }
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
      return &lanesLoop<GenericSetp, 2>;
    case Op::Neg: case Op::Abs: case Op::Ex2: case Op::Lg2: case Op::Rcp: case Op::Rsqrt: case Op::Sqrt:
    case Op::Sin: case Op::Cos: case Op::Tanh:
      return &lanesLoop<GenericFloat, 1>;
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Min: case Op::Max:
      return &lanesLoop<GenericFloat, 2>;
    case Op::Fma:
      return &lanesLoop<GenericFloat, 3>;
    default: break;
  }
  why = "'" + std::string(ir::info(k.op).name) + "' has no floating-point semantics for " +
        std::string(ir::scalarName(k.scalar));
  return nullptr;
}

// Integer -> integer conversions get a loop per type pair (they index memory in hot loops); the
// others go through lane::convert.
ComputeFn selectCvt(const Code& k, std::string& why) {
  if (k.op == Op::CvtPack) return &lanesLoop<CvtPack, 2>;
  if (k.srcScalar == Scalar::Pred || k.srcScalar == Scalar::Ptr || k.lanes != 1) {
    why = "cvt from " + std::string(ir::scalarName(k.srcScalar)) + " is not supported";
    return nullptr;
  }
  auto loop = []<class L>() -> ComputeFn { return laneLoop<L>(); };
  if (!ir::Type::of(k.srcScalar).isFloat() && !ir::Type::of(k.scalar).isFloat())
    if (ComputeFn fn = lane::withConvertInt(k.srcScalar, k.scalar, k.sat, loop)) return fn;
  return &lanesLoop<CvtFloat, 1>;
}

uint64_t floatAtomic(const Code& k, uint64_t old, uint64_t b, bool ftz) {
  Op op = k.mode == Mod::AAdd ? Op::Add : k.mode == Mod::AMin ? Op::Min : Op::Max;
  return lane::floatOp(op, k.scalar, {Mod::Rn, ftz && k.scalar == Scalar::F32, false}, old, b);
}

}  // namespace tn::interp::detail
