// const-fold -- does: folds int/pred/float ops on constants, integer identities, selp, extract(pack), cvt round trips, constant cbr.
// requires: a parsed kernel; walks the reachable blocks in reverse post-order (dce removes the unreachable ones).
// guarantees: GPU-identical bits (ir/LaneSemantics.h); never approx ops, NaN results, .sat, .ftz subnormals or x/0.
#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "ir/Dominance.h"
#include "ir/LaneSemantics.h"
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
namespace lane = ir::lane;

// ---- floats: what is folded (docs/passes.md); the values are those of ir/LaneSemantics.h -----------

bool isHalf(Scalar s) { return s == Scalar::F16 || s == Scalar::BF16; }
bool isDirected(Mod m) { return m == Mod::Rz || m == Mod::Rm || m == Mod::Rp; }
bool isIntegerRounding(Mod m) { return m == Mod::Rni || m == Mod::Rzi || m == Mod::Rmi || m == Mod::Rpi; }

// a + b is exact in double (two-sum).
bool exactSum(double a, double b) {
  double r = a + b, bb = r - a;
  return std::isfinite(r) && (a - (r - bb)) + (b - bb) == 0;
}

// Whether float op `op` in rounding `round` is folded on the non-NaN operands x: round-to-nearest
// arithmetic, sqrt.rn and rcp.rn; a directed mode only on halves, and for + - only where the
// double result is exact; fma on halves only where the double sum is exact; min/max unless the
// operands are zeros of opposite signs; never the approximate ops.
bool folds(Op op, Scalar s, Mod round, std::span<const uint64_t> x) {
  bool nearest = round == Mod::None || round == Mod::Rn;
  bool halfDirected = isHalf(s) && isDirected(round);
  auto d = [&](size_t i) { return lane::toDouble(s, x[i]); };
  switch (op) {
    case Op::Add: return nearest || (halfDirected && exactSum(d(0), d(1)));
    case Op::Sub: return nearest || (halfDirected && exactSum(d(0), -d(1)));
    case Op::Mul: return nearest || halfDirected;
    case Op::Div: return nearest;
    case Op::Fma: return (nearest || halfDirected) && (!isHalf(s) || exactSum(d(0) * d(1), d(2)));
    case Op::Sqrt:
    case Op::Rcp: return round == Mod::Rn;
    case Op::Min:
    case Op::Max: return !(d(0) == 0 && d(1) == 0 && std::signbit(d(0)) != std::signbit(d(1)));
    case Op::Neg:
    case Op::Abs: return true;
    default: return false;
  }
}

std::optional<uint64_t> foldFloat(const ir::Inst& in, Type t, std::span<const uint64_t> x) {
  Scalar s = t.scalar;
  if (in.has(Mod::SatMod)) return std::nullopt;
  bool ftz = in.has(Mod::FtzMod);
  // NaN inputs give NaN results (not folded), except in comparisons, which are exact.
  for (uint64_t b : x)
    if ((in.op != Op::Setp && lane::isNan(s, b)) || (ftz && lane::isSubnormal(s, b))) return std::nullopt;
  if (in.op == Op::Setp) return lane::floatSetp(in.mod(ir::ModGroup::Cmp), s, ftz, x[0], x[1]) ? 1 : 0;
  Mod round = in.mod(ir::ModGroup::Round);
  if (!folds(in.op, s, round, x)) return std::nullopt;
  // .ftz changes nothing where no input or result is subnormal, and only those are folded.
  uint64_t r = lane::floatOp(in.op, s, {round, false, false}, x[0], x.size() > 1 ? x[1] : 0, x.size() > 2 ? x[2] : 0);
  if (lane::isNan(s, r) || (ftz && lane::isSubnormal(s, r))) return std::nullopt;
  return r;
}

// The integer bits x of type s are exactly a double.
bool exactInDouble(uint64_t x, Type s) {
  if (s.isSigned()) {
    int64_t i = lane::signExtend(x, s.bits());
    double v = static_cast<double>(i);
    return v < 0x1p63 && static_cast<int64_t>(v) == i;
  }
  uint64_t u = x & lowMask(s.bits());
  double v = static_cast<double>(u);
  return v < 0x1p64 && static_cast<uint64_t>(v) == u;
}

// cvt: between integers; float -> integer (NaN included: lane::convert has the PTX rule); float ->
// float except from NaN, f32/f64 results only to nearest, to an integral value only within a type
// and below 2^62; integer -> float when the integer is exactly a double. No .sat, no subnormal
// source or result under .ftz.
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
  bool floatRounding = round == Mod::None || round == Mod::Rn || (isDirected(round) && isHalf(t.scalar));
  if (s.isFloat()) {
    if (ftz && lane::isSubnormal(s.scalar, x)) return std::nullopt;
    if (!t.isFloat()) {
      if (!isIntegerRounding(round)) return std::nullopt;
    } else if (lane::isNan(s.scalar, x)) {
      return std::nullopt;
    } else if (isIntegerRounding(round)) {
      if (s != t || std::fabs(lane::toDouble(s.scalar, x)) >= 0x1p62) return std::nullopt;
    } else if (!floatRounding) {
      return std::nullopt;
    }
  } else if (!floatRounding || !exactInDouble(x, s)) {
    return std::nullopt;
  }
  uint64_t r = lane::convert(s.scalar, t.scalar, {round, false, false}, x);
  if (t.isFloat() && ftz && lane::isSubnormal(t.scalar, r)) return std::nullopt;
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
  if (in.op == Op::CvtTf32) return lane::isNan(Scalar::F32, x[0]) ? std::nullopt : std::optional(lane::roundTf32(x[0]));
  if (in.op == Op::CvtPack) {
    if (lane::isNan(Scalar::F32, x[0]) || lane::isNan(Scalar::F32, x[1])) return std::nullopt;
    return lane::convertPack(t.scalar, in.mod(ir::ModGroup::Round), x[0], x[1]);
  }
  if (t.isFloat()) return foldFloat(in, t, x);
  if (t.isInt() || t.isBits() || t.isPred()) return evalInt(in, t, x);
  return std::nullopt;
}

// cvt back from a widening cvt: x : T -> U -> T gives x when T -> U is exact (an integer
// sign- or zero-extended, a float to a wider float) and neither cvt saturates or flushes. A float
// x qualifies only when a cvt produced it: then it is already rounded to T and a NaN in it is
// the canonical one that the round trip writes (a loaded NaN's payload would change).
std::optional<ValueId> roundTrip(const ir::Kernel& k, const ir::Inst& in) {
  const ir::Inst* wide = definingInst(k, in.operands[0]);
  if (!wide || wide->op != Op::Cvt || !in.type || !wide->srcType || *wide->srcType != *in.type) return std::nullopt;
  for (const ir::Inst* c : {&in, wide})
    if (c->has(Mod::SatMod) || c->has(Mod::FtzMod)) return std::nullopt;
  Type t = *in.type, u = *wide->type;
  if (t.isVector() || u.isVector() || u.bits() < t.bits()) return std::nullopt;
  if (t.isInt() && u.isInt() && in.mod(ir::ModGroup::Round) == Mod::None) return wide->operands[0];
  if (!t.isFloat() || !u.isFloat() || u.bits() == t.bits()) return std::nullopt;
  Mod round = in.mod(ir::ModGroup::Round);
  if (isIntegerRounding(round) || wide->mod(ir::ModGroup::Round) != Mod::None) return std::nullopt;
  const ir::Inst* source = definingInst(k, wide->operands[0]);
  if (!source || source->op != Op::Cvt || !source->srcType || !source->srcType->isFloat()) return std::nullopt;
  return wide->operands[0];
}

// An operand the result simply equals (integer identities, selp, a cvt undoing a widening cvt),
// or nullopt.
std::optional<ValueId> identity(const ir::Kernel& k, const ir::Inst& in) {
  if (in.op == Op::Cvt) return roundTrip(k, in);
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
  Replacements repl(k);
  for (BlockId b : cfg.reversePostOrder()) {
    for (ir::InstId id : k.block(b).insts) {
      ir::Inst& in = k.inst(id);
      repl.rewrite(in);
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
      // A table's element at a constant index inside it (past the end stays: a fault to report).
      if (in.op == Op::TableLd && x.size() == 1 && in.symbol >= 0 && static_cast<size_t>(in.symbol) < k.tables.size() &&
          static_cast<uint32_t>(x[0]) < k.tables[in.symbol].values.size()) {
        makeConst(in, rt, k.tables[in.symbol].values[static_cast<uint32_t>(x[0])]);
        changed = true;
        continue;
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
        if (*v != in.result) repl.add(in.result, *v);
        dead[id.index] = true;
        changed = true;
      }
    }
  }
  if (changed) {
    repl.rewriteAll(k);
    eraseInsts(k, dead);
  }
  return changed;
}

}  // namespace

bool constFold(PassContext& ctx) {
  return rewriteEachKernel(ctx, foldKernel);
}

}  // namespace tn::passes
