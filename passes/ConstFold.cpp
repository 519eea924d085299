// const-fold -- does: folds int/pred/float ops on constants, integer identities, selp, extract(pack), constant cbr.
// requires: a parsed kernel; walks the reachable blocks in reverse post-order (dce removes the unreachable ones).
// guarantees: GPU-identical bits: IEEE round-to-nearest, no approx ops, NaN results, .sat, subnormal .ftz or x/0.
#include <algorithm>
#include <bit>
#include <cmath>
#include <span>
#include <vector>

#include "ir/Dominance.h"
#include "ir/Float16.h"
#include "ir/FloatCompare.h"
#include "passes/Analysis.h"
#include "passes/IntEval.h"
#include "passes/Passes.h"
#include "passes/Rewrite.h"

namespace tn::passes {

namespace {

using ir::Mod;
using ir::Op;
using ir::Scalar;
using ir::Type;

// ---- floats ---------------------------------------------------------------------------------

double toDouble(Scalar s, uint64_t bits) {
  switch (s) {
    case Scalar::F16: return ir::f16ToF32(static_cast<uint16_t>(bits));
    case Scalar::BF16: return ir::bf16ToF32(static_cast<uint16_t>(bits));
    case Scalar::F32: return std::bit_cast<float>(static_cast<uint32_t>(bits));
    default: return std::bit_cast<double>(bits);
  }
}

std::optional<ir::RoundMode> roundMode(Mod m) {
  switch (m) {
    case Mod::None:
    case Mod::Rn: return ir::RoundMode::NearestEven;
    case Mod::Rz: return ir::RoundMode::Zero;
    case Mod::Rm: return ir::RoundMode::Down;
    case Mod::Rp: return ir::RoundMode::Up;
    default: return std::nullopt;
  }
}

// Rounds the exact-or-once-rounded double v to type s. f32 and f64 only round to nearest
// here; f16/bf16 take every IEEE mode (ir/Float16.h).
std::optional<uint64_t> fromDouble(Scalar s, double v, ir::RoundMode mode) {
  switch (s) {
    case Scalar::F16: return ir::f64ToF16(v, mode);
    case Scalar::BF16: return ir::f64ToBf16(v, mode);
    case Scalar::F32:
      if (mode != ir::RoundMode::NearestEven) return std::nullopt;
      return std::bit_cast<uint32_t>(static_cast<float>(v));
    default:
      if (mode != ir::RoundMode::NearestEven) return std::nullopt;
      return std::bit_cast<uint64_t>(v);
  }
}

bool isNan(Scalar s, uint64_t bits) { return std::isnan(toDouble(s, bits)); }

bool isSubnormal(Scalar s, uint64_t bits) {
  double v = toDouble(s, bits);
  if (v == 0 || !std::isfinite(v)) return false;
  double smallest = s == Scalar::F16    ? 0x1p-14
                    : s == Scalar::BF16 ? 0x1p-126
                    : s == Scalar::F32  ? 0x1p-126
                                        : 0x1p-1022;
  return std::fabs(v) < smallest;
}

// One IEEE operation on doubles holding values of type s, rounded once to s. For f16, bf16
// and f32, + - * / and sqrt computed in double and rounded again are correctly rounded (53 >=
// 2p+2 for p = 11, 8, 24); f64 is computed directly.
std::optional<uint64_t> floatArith(Op op, Scalar s, std::span<const double> x, ir::RoundMode mode) {
  // Directed modes are only exact after a double operation that did not round: check with
  // two-sum for + and -; products of halves are always exact; / and sqrt are never folded.
  bool directed = mode != ir::RoundMode::NearestEven;
  auto exactSum = [](double a, double b, double r) {
    double bb = r - a;
    return std::isfinite(r) && (a - (r - bb)) + (b - bb) == 0;
  };
  double r = 0;
  switch (op) {
    case Op::Add:
      r = x[0] + x[1];
      if (directed && !exactSum(x[0], x[1], r)) return std::nullopt;
      break;
    case Op::Sub:
      r = x[0] - x[1];
      if (directed && !exactSum(x[0], -x[1], r)) return std::nullopt;
      break;
    case Op::Mul: r = x[0] * x[1]; break;
    case Op::Div:
    case Op::Sqrt:
    case Op::Rcp:
      if (directed) return std::nullopt;
      r = op == Op::Div ? x[0] / x[1] : op == Op::Sqrt ? std::sqrt(x[0]) : 1.0 / x[0];
      break;
    case Op::Fma:
      if ((s == Scalar::F32 || s == Scalar::F64) && directed) return std::nullopt;
      if (s == Scalar::F32)
        return std::bit_cast<uint32_t>(std::fma(static_cast<float>(x[0]), static_cast<float>(x[1]),
                                                static_cast<float>(x[2])));
      if (s == Scalar::F64) return std::bit_cast<uint64_t>(std::fma(x[0], x[1], x[2]));
      {
        // Halves: the product is exact in double; fold only when the sum is exact too (two-sum),
        // so that the single rounding below is the fma's only one.
        double p = x[0] * x[1];
        r = p + x[2];
        if (!exactSum(p, x[2], r)) return std::nullopt;
      }
      break;
    default: return std::nullopt;
  }
  return fromDouble(s, r, mode);  // f32 and f64 only take round-to-nearest there
}

// A float -> integer conversion with PTX semantics: round as asked, clamp to the range, NaN -> 0.
std::optional<uint64_t> floatToInt(double v, Mod round, Type t) {
  switch (round) {
    case Mod::Rni: v = std::nearbyint(v); break;
    case Mod::Rzi: v = std::trunc(v); break;
    case Mod::Rmi: v = std::floor(v); break;
    case Mod::Rpi: v = std::ceil(v); break;
    default: return std::nullopt;
  }
  if (std::isnan(v)) return 0;
  unsigned w = t.bits();
  if (t.isSigned()) {
    double lo = -std::ldexp(1.0, static_cast<int>(w) - 1), hi = std::ldexp(1.0, static_cast<int>(w) - 1);
    if (v <= lo) return static_cast<uint64_t>(signExtend(uint64_t{1} << (w - 1), w)) & lowMask(w);
    if (v >= hi) return lowMask(w - 1);
    return static_cast<uint64_t>(static_cast<int64_t>(v)) & lowMask(w);
  }
  double hi = std::ldexp(1.0, static_cast<int>(w));
  if (v <= 0) return 0;
  if (v >= hi) return lowMask(w);
  return static_cast<uint64_t>(v);
}

std::optional<uint64_t> foldCvt(const ir::Inst& in, uint64_t x) {
  Type s = *in.srcType, t = *in.type;
  if (s.isVector() || t.isVector() || s.isPtr() || t.isPtr() || s.isPred() || t.isPred()) return std::nullopt;
  if (in.has(Mod::SatMod)) return std::nullopt;
  Mod round = in.mod(ir::ModGroup::Round);
  bool ftz = in.has(Mod::FtzMod);
  if (!s.isFloat() && !t.isFloat()) {
    if (round != Mod::None) return std::nullopt;
    return convertInt(x, s, t);
  }
  if (s.isFloat()) {
    if (ftz && isSubnormal(s.scalar, x)) return std::nullopt;
    double v = toDouble(s.scalar, x);
    if (!t.isFloat()) return floatToInt(v, round, t);  // NaN converts to 0
    if (std::isnan(v)) return std::nullopt;
    if (round == Mod::Rni || round == Mod::Rzi || round == Mod::Rmi || round == Mod::Rpi) {
      if (s != t) return std::nullopt;
      auto r = floatToInt(v, round, Type::of(Scalar::S64));
      if (!r || std::fabs(v) >= 0x1p62) return std::nullopt;
      double rounded = static_cast<double>(static_cast<int64_t>(*r));
      if (rounded == 0) rounded = std::copysign(0.0, v);
      return fromDouble(t.scalar, rounded, ir::RoundMode::NearestEven);
    }
    auto mode = roundMode(round);
    if (!mode) return std::nullopt;
    auto r = fromDouble(t.scalar, v, *mode);  // widening is exact; narrowing rounds once
    if (!r || (ftz && isSubnormal(t.scalar, *r))) return std::nullopt;
    return r;
  }
  // Integer -> float: exact in double first, then one rounding.
  auto mode = roundMode(round);
  if (!mode) return std::nullopt;
  double v;
  if (s.isSigned()) {
    int64_t i = signExtend(x, s.bits());
    v = static_cast<double>(i);
    if (v >= 0x1p63 || static_cast<int64_t>(v) != i) return std::nullopt;
  } else {
    uint64_t u = x & lowMask(s.bits());
    v = static_cast<double>(u);
    if (v >= 0x1p64 || static_cast<uint64_t>(v) != u) return std::nullopt;
  }
  auto r = fromDouble(t.scalar, v, *mode);
  if (!r || (ftz && isSubnormal(t.scalar, *r))) return std::nullopt;
  return r;
}

std::optional<uint64_t> foldFloat(const ir::Inst& in, Type t, std::span<const uint64_t> x) {
  Scalar s = t.scalar;
  if (in.has(Mod::SatMod)) return std::nullopt;
  bool ftz = in.has(Mod::FtzMod);
  // NaN inputs give NaN results (not folded), except in comparisons, which are exact.
  for (uint64_t b : x)
    if ((in.op != Op::Setp && isNan(s, b)) || (ftz && isSubnormal(s, b))) return std::nullopt;
  std::vector<double> d;
  for (uint64_t b : x) d.push_back(toDouble(s, b));
  Mod round = in.mod(ir::ModGroup::Round);
  std::optional<uint64_t> r;
  switch (in.op) {
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Fma:
    case Op::Div: {
      auto mode = roundMode(round);
      if (!mode) return std::nullopt;
      r = floatArith(in.op, s, d, *mode);
      break;
    }
    case Op::Sqrt:
    case Op::Rcp:
      if (round != Mod::Rn) return std::nullopt;  // approx (and directed modes) are not folded
      r = floatArith(in.op, s, d, ir::RoundMode::NearestEven);
      break;
    case Op::Min:
    case Op::Max:
      if (d[0] == 0 && d[1] == 0 && std::signbit(d[0]) != std::signbit(d[1])) return std::nullopt;
      r = fromDouble(s, in.op == Op::Min ? std::fmin(d[0], d[1]) : std::fmax(d[0], d[1]),
                     ir::RoundMode::NearestEven);
      break;
    case Op::Neg: r = x[0] ^ (uint64_t{1} << (t.bits() - 1)); break;
    case Op::Abs: r = x[0] & lowMask(t.bits() - 1); break;
    case Op::Setp: {
      auto c = ir::floatCompare(in.mod(ir::ModGroup::Cmp), d[0], d[1]);
      if (!c) return std::nullopt;
      return *c ? 1 : 0;
    }
    default: return std::nullopt;
  }
  if (!r || isNan(s, *r) || (ftz && isSubnormal(s, *r))) return std::nullopt;
  return r;
}

std::optional<uint64_t> fold(const ir::Inst& in, std::span<const uint64_t> x) {
  if (!in.type || in.type->isVector() || in.type->isPtr()) return std::nullopt;
  Type t = *in.type;
  if (in.op == Op::Cvt) return foldCvt(in, x[0]);
  if (in.op == Op::Bitcast) {
    if (!in.srcType || in.srcType->isVector() || in.srcType->isPtr() || in.srcType->bits() != t.bits())
      return std::nullopt;
    return x[0] & lowMask(t.bits());
  }
  if (t.isFloat()) return foldFloat(in, t, x);
  if (t.isInt() || t.isBits() || t.isPred()) return evalInt(in, t, x);
  return std::nullopt;
}

// An operand the result simply equals (integer identities, selp), or nullopt.
std::optional<ValueId> identity(const ir::Kernel& k, const ir::Inst& in) {
  if (in.op == Op::Selp) {
    if (in.operands[0] == in.operands[1]) return in.operands[0];
    if (auto p = constBits(k, in.operands[2])) return in.operands[*p & 1 ? 0 : 1];
    return std::nullopt;
  }
  if (in.op == Op::Extract) {
    const ir::Inst* def = definingInst(k, in.operands[0]);
    if (def && def->op == Op::Pack && in.imm < def->operands.size()) return def->operands[in.imm];
    return std::nullopt;
  }
  if (!in.type || in.type->isVector() || !(in.type->isInt() || in.type->isBits() || in.type->isPred()))
    return std::nullopt;
  if (std::any_of(in.mods.begin(), in.mods.end(), [](Mod m) { return m != Mod::None; })) return std::nullopt;
  if (in.operands.size() != 2) return std::nullopt;
  uint64_t m = lowMask(in.type->isPred() ? 1 : in.type->bits());
  auto a = constBits(k, in.operands[0]), b = constBits(k, in.operands[1]);
  auto is = [&](const std::optional<uint64_t>& c, uint64_t v) { return c && (*c & m) == (v & m); };
  ValueId x = in.operands[0], y = in.operands[1];
  switch (in.op) {
    case Op::Add:
    case Op::Or:
    case Op::Xor:
      if (is(b, 0)) return x;
      if (is(a, 0)) return y;
      break;
    case Op::Sub:
    case Op::Shl:
    case Op::Shr:
      if (is(b, 0)) return x;
      break;
    case Op::Mul:
      if (is(b, 1)) return x;
      if (is(a, 1)) return y;
      break;
    case Op::Div:
      if (is(b, 1)) return x;
      break;
    case Op::And:
      if (is(b, ~uint64_t{0})) return x;
      if (is(a, ~uint64_t{0})) return y;
      break;
    default: break;
  }
  return std::nullopt;
}

// A constant the result equals whatever the other operand is (x*0, x&0, x|~0), or nullopt.
std::optional<uint64_t> absorbing(const ir::Kernel& k, const ir::Inst& in) {
  if (!in.type || in.type->isVector() || !(in.type->isInt() || in.type->isBits() || in.type->isPred()))
    return std::nullopt;
  if (std::any_of(in.mods.begin(), in.mods.end(), [](Mod m) { return m != Mod::None; })) return std::nullopt;
  if (in.operands.size() != 2) return std::nullopt;
  uint64_t m = lowMask(in.type->isPred() ? 1 : in.type->bits());
  for (ValueId v : in.operands) {
    auto c = constBits(k, v);
    if (!c) continue;
    if ((in.op == Op::Mul || in.op == Op::And) && (*c & m) == 0) return 0;
    if (in.op == Op::Or && (*c & m) == m) return m;
  }
  return std::nullopt;
}

bool foldKernel(ir::Kernel& k) {
  ir::DominatorTree cfg(k);
  bool changed = false;
  std::vector<bool> dead(k.insts.size(), false);
  for (BlockId b : cfg.reversePostOrder()) {
    for (ir::InstId id : k.block(b).insts) {
      ir::Inst& in = k.inst(id);
      if (in.op == Op::Cbr && in.succs.size() == 2) {
        if (auto p = constBits(k, in.operands[0])) {
          ir::BlockCall keep = in.succs[*p & 1 ? 0 : 1];
          in.op = Op::Br;
          in.operands.clear();
          in.succs = {std::move(keep)};
          changed = true;
        }
        continue;
      }
      if (!ir::hasFlag(in.op, ir::OF_PURE) || !in.result || in.op == Op::Const) continue;
      ir::Type rt = k.typeOf(in.result);
      std::vector<uint64_t> x;
      for (ValueId v : in.operands) {
        auto c = constBits(k, v);
        if (!c) break;
        x.push_back(*c);
      }
      if (!in.operands.empty() && x.size() == in.operands.size() && in.op != Op::Selp) {
        if (auto r = fold(in, x)) {
          makeConst(in, rt, *r);
          changed = true;
          continue;
        }
      }
      if (auto c = absorbing(k, in)) {
        makeConst(in, rt, *c);
        changed = true;
        continue;
      }
      if (auto v = identity(k, in)) {
        replaceAllUses(k, in.result, *v);
        dead[id.index] = true;
        changed = true;
      }
    }
  }
  if (changed) eraseInsts(k, dead);
  return changed;
}

}  // namespace

bool constFold(PassContext& ctx) {
  return rewriteEachKernel(ctx, foldKernel);
}

}  // namespace tn::passes
