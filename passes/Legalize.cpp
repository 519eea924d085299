// legalize -- does: rewrites ops PTX lacks for the module's target into ones it has: 8-bit integer arithmetic and compares in 16 bits, f16/bf16 div and f16 min/max before sm_80 in f32, cvt to bf16 and from bf16 with .sat (or to 8 bits) through f32, cvt.pack to f16 before sm_80 as two cvt.
// requires: a verified module with its target set; compile() runs it after every pipeline, right before the emitter.
// guarantees: every lane computes the same bits as before (the rounding argument is in docs/passes.md); running it again changes nothing.
#include "passes/Passes.h"
#include "passes/Rewrite.h"

namespace tn::passes {

namespace {

using ir::Inst;
using ir::Mod;
using ir::ModGroup;
using ir::Op;
using ir::Scalar;
using ir::Type;

// f16's smallest normal is 2^-14 and f32's 2^-126: scaled by 2^-112, exactly the f16 subnormals
// become f32 subnormals, which an f32 .ftz op flushes (PTX has no f16 flush outside arithmetic).
constexpr uint64_t kF32TwoPowMinus112 = 0x07800000;
constexpr uint64_t kF32TwoPow112 = 0x77800000;

bool isHalf(Type t) { return t.scalar == Scalar::F16 || t.scalar == Scalar::BF16; }
bool isByteInt(Type t) { return !t.isVector() && (t.isInt() || t.isBits()) && t.bits() == 8; }

bool widensBytes(Op op) {
  switch (op) {
    case Op::Add: case Op::Sub: case Op::Mul: case Op::MulHi: case Op::Mad: case Op::Div: case Op::Rem:
    case Op::Min: case Op::Max: case Op::Neg: case Op::Abs: case Op::Shl: case Op::Shr: case Op::Setp:
      return true;
    default: return false;
  }
}

class KernelLegalizer {
 public:
  KernelLegalizer(ir::Kernel& k, unsigned sm) : k_(k), sm_(sm) {}

  bool run() {
    bool changed = false;
    for (ir::Block& b : k_.blocks) {
      out_.clear();
      for (ir::InstId id : b.insts) {
        changed |= lower(id);
        out_.push_back(id);
      }
      b.insts = out_;
    }
    return changed;
  }

 private:
  // Rewrites instruction `id` in place (keeping its result) after appending what it now reads.
  bool lower(ir::InstId id) {
    Inst in = k_.inst(id);  // a copy: emitting new instructions may move the pool
    if (!in.type || in.type->isVector()) return false;
    loc_ = in.loc;
    Type t = *in.type;
    if (isByteInt(t) && widensBytes(in.op)) return widenByte(id, in);
    if (in.op == Op::Div && isHalf(t)) return halfThroughF32(id, in);
    if ((in.op == Op::Min || in.op == Op::Max) && t.scalar == Scalar::F16 && sm_ < 80) return halfThroughF32(id, in);
    if (in.op == Op::Cvt) return lowerCvt(id, in);
    if (in.op == Op::CvtPack && sm_ < 80) return packHalves(id, in);
    return false;
  }

  ir::ValueId emit(Inst in) {
    in.loc = loc_;
    ir::InstId id = createInst(k_, std::move(in));
    out_.push_back(id);
    return k_.inst(id).result;
  }
  ir::ValueId op(Op o, Type t, std::vector<ir::ValueId> operands, Mod m1 = Mod::None, Mod m2 = Mod::None) {
    Inst in;
    in.op = o;
    in.type = t;
    in.operands = std::move(operands);
    if (m1 != Mod::None) in.setMod(m1);
    if (m2 != Mod::None) in.setMod(m2);
    return emit(std::move(in));
  }
  ir::ValueId cvt(Type to, Type from, ir::ValueId v, Mod round = Mod::None) {
    Inst in;
    in.op = Op::Cvt;
    in.type = to;
    in.srcType = from;
    in.operands = {v};
    if (round != Mod::None) in.setMod(round);
    return emit(std::move(in));
  }
  ir::ValueId constant(Type t, uint64_t bits) { return emit(constInst(t, bits, loc_)); }
  ir::ValueId bitcast(Type to, Type from, ir::ValueId v) {
    Inst in;
    in.op = Op::Bitcast;
    in.type = to;
    in.srcType = from;
    in.operands = {v};
    return emit(std::move(in));
  }
  // A half value as f32, exactly. cvt.f32.bf16 needs sm_90, but bf16 is the upper half of an f32.
  ir::ValueId toF32(ir::ValueId v, Type t) {
    if (t.scalar != Scalar::BF16) return cvt(Type::f32(), t, v);
    Type b16 = *ir::intType(16, 'b'), b32 = *ir::intType(32, 'b');
    ir::ValueId wide = cvt(b32, b16, bitcast(b16, t, v));
    return bitcast(Type::f32(), b32, op(Op::Shl, b32, {wide, constant(Type::u32(), 16)}));
  }
  // Turns the original instruction into `cvt{mods}.to.from v`, keeping its result.
  void becomeCvt(ir::InstId id, Type from, ir::ValueId v, std::array<Mod, ir::kModGroups> mods = {}) {
    Inst& in = k_.inst(id);
    in.op = Op::Cvt;
    in.srcType = from;
    in.operands = {v};
    in.mods = mods;
  }

  // 16-bit arithmetic on sign- or zero-extended operands agrees with the 8-bit op on the low byte
  // (wrap-around, shifts past 8 bits, MIN / -1), so truncating the result back is exact. mul.hi is
  // the upper byte of the 16-bit product, which always fits.
  bool widenByte(ir::InstId id, const Inst& in) {
    Type t = *in.type;
    Type w = *ir::intType(16, t.isSigned() ? 's' : t.isBits() ? 'b' : 'u');
    const std::string_view rules = ir::info(in.op).operands;
    std::vector<ir::ValueId> wide;
    for (size_t i = 0; i < in.operands.size(); ++i)
      wide.push_back(rules[i] == 'T' ? cvt(w, t, in.operands[i]) : in.operands[i]);
    if (in.op == Op::Setp) {
      Inst& s = k_.inst(id);
      s.type = w;
      s.operands = wide;
      return true;
    }
    ir::ValueId r;
    if (in.op == Op::MulHi) {
      r = op(Op::Shr, w, {op(Op::Mul, w, wide), constant(Type::u32(), 8)});
    } else {
      Inst copy = in;
      copy.type = w;
      copy.operands = wide;
      copy.result = {};
      r = emit(std::move(copy));
    }
    becomeCvt(id, w, r);
    return true;
  }

  // x * 2^-112 with .ftz: zero for an f16 subnormal x, exact otherwise.
  ir::ValueId flushScaled(ir::ValueId x32) {
    return op(Op::Mul, Type::f32(), {x32, constant(Type::f32(), kF32TwoPowMinus112)}, Mod::Rn, Mod::FtzMod);
  }

  // div and min/max of halves in f32. The operands convert exactly; f32 division rounded once
  // and then to the half type gives the correctly rounded quotient (24 >= 2 * 11 + 2 bits for
  // nearest, and any directed mode rounds the same way twice); min/max return an operand. With
  // .ftz (f16 only) both operands are scaled so that f16 subnormals flush, and the result is
  // flushed the same way after rounding.
  bool halfThroughF32(ir::InstId id, const Inst& in) {
    Type t = *in.type, f = Type::f32();
    bool ftz = in.has(Mod::FtzMod);
    std::vector<ir::ValueId> ops;
    for (ir::ValueId v : in.operands) ops.push_back(ftz ? flushScaled(toF32(v, t)) : toF32(v, t));
    if (in.op != Op::Div) {
      ir::ValueId m = op(in.op, f, ops);
      if (ftz) m = op(Op::Mul, f, {m, constant(f, kF32TwoPow112)}, Mod::Rn);
      becomeCvt(id, f, m, roundMods(Mod::Rn));
      return true;
    }
    Mod round = in.mod(ModGroup::Round) == Mod::None ? Mod::Rn : in.mod(ModGroup::Round);
    ir::ValueId q = op(Op::Div, f, ops, round);
    if (ftz) {
      ir::ValueId r = flushScaled(cvt(f, t, cvt(t, f, q, round)));
      q = op(Op::Mul, f, {r, constant(f, kF32TwoPow112)}, Mod::Rn);
      round = Mod::Rn;  // q is a half value now: the last conversion is exact
    }
    becomeCvt(id, f, q, roundMods(round));
    return true;
  }

  static std::array<Mod, ir::kModGroups> roundMods(Mod round) {
    std::array<Mod, ir::kModGroups> mods{};
    mods[static_cast<size_t>(ModGroup::Round)] = round;
    return mods;
  }

  // v rounded to `to` with round-to-odd: truncate, then set the lowest bit when that was inexact.
  // A value rounded to odd with at least two more bits than the final format rounds from there as
  // the exact value would, in every mode, so it is a safe first step of a double rounding.
  ir::ValueId roundToOdd(ir::ValueId v, Type from, Type to) {
    ir::ValueId r = cvt(to, from, v, Mod::Rz);
    ir::ValueId back = from.isFloat() ? cvt(from, to, r) : cvt(from, to, r, Mod::Rzi);
    ir::ValueId inexact = op(Op::Setp, from, {back, v}, Mod::Ne);
    Type b = *ir::intType(to.bits(), 'b');
    ir::ValueId sticky = op(Op::Selp, b, {constant(b, 1), constant(b, 0), inexact});
    return bitcast(to, b, op(Op::Or, b, {bitcast(b, to, r), sticky}));
  }

  // v as an f32 from which one more rounding gives the correctly rounded bf16 (or any narrower) value.
  ir::ValueId toF32ForNarrowing(ir::ValueId v, Type s) {
    Type f32 = Type::f32(), f64 = Type::of(Scalar::F64);
    if (s.scalar == Scalar::F16 || s.bits() <= 16) return cvt(f32, s, v);  // exact
    if (s.scalar == Scalar::F64) return roundToOdd(v, f64, f32);
    ir::ValueId d = s.bits() == 32 ? cvt(f64, s, v) : roundToOdd(v, s, f64);
    return roundToOdd(d, f64, f32);
  }

  // PTX converts to bf16 only from f32 before sm_90, never between bf16 and 8-bit integers, and
  // has no .sat conversion from bf16; bf16 -> f32 is exact, so the rest goes through f32.
  bool lowerCvt(ir::InstId id, const Inst& in) {
    Type s = *in.srcType, t = *in.type;
    if (t.scalar == Scalar::BF16 && s.scalar != Scalar::F32 && (sm_ < 90 || s.bits() == 8)) {
      becomeCvt(id, Type::f32(), toF32ForNarrowing(in.operands[0], s), in.mods);
      return true;
    }
    if (s.scalar == Scalar::BF16 && (in.has(Mod::SatMod) || t.bits() == 8)) {
      becomeCvt(id, Type::f32(), toF32(in.operands[0], s), in.mods);
      return true;
    }
    return false;
  }

  // cvt.pack.RND %hi, %lo : f32 -> f16 (PTX's f16x2 form is sm_80+): each half rounded by its
  // own cvt, the same rounding, then {hi, lo} assembled in a b32.
  bool packHalves(ir::InstId id, const Inst& in) {
    Type half = *in.type, b16 = *ir::intType(16, 'b'), b32 = *ir::intType(32, 'b');
    Mod round = in.mod(ir::ModGroup::Round);
    auto bits = [&](ir::ValueId v) { return cvt(b32, b16, bitcast(b16, half, cvt(half, Type::f32(), v, round))); };
    ir::ValueId hi = bits(in.operands[0]), lo = bits(in.operands[1]);
    ir::ValueId high = op(Op::Shl, b32, {hi, constant(Type::u32(), 16)});
    Inst& out = k_.inst(id);
    out.op = Op::Or;
    out.type = b32;
    out.srcType.reset();
    out.operands = {high, lo};
    out.mods = {};
    return true;
  }

  ir::Kernel& k_;
  unsigned sm_;
  std::vector<ir::InstId> out_;
  ir::SourceLoc loc_;
};

}  // namespace

bool legalize(PassContext& ctx) {
  unsigned sm = ctx.module.target.sm;
  return rewriteEachKernel(ctx, [sm](ir::Kernel& k) { return KernelLegalizer(k, sm).run(); });
}

}  // namespace tn::passes
