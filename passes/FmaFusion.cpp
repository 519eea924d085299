// fma-fusion -- does: contracts float mul + add/sub (either order, a*b-c, c-a*b) into fma, negating as needed.
// requires: --fp-contract=fast (PassOptions::fpContract); with off it does nothing.
// guarantees: never across .exact or explicit rounding; a product fuses only when all its uses can (the mul then goes).
#include <algorithm>

#include "passes/Analysis.h"
#include "passes/Passes.h"
#include "passes/Rewrite.h"

namespace tn::passes {

namespace {

using ir::Mod;
using ir::ModGroup;
using ir::Op;

bool contractible(const ir::Inst& in) {
  return in.type && in.type->isFloat() && !in.type->isVector() && in.mod(ModGroup::Round) == Mod::None &&
         !in.has(Mod::ExactMod);
}

// True when `use` is an add/sub that can absorb the product `mul` (read exactly once).
bool absorbs(const ir::Inst& use, const ir::Inst& mul) {
  if (use.op != Op::Add && use.op != Op::Sub) return false;
  if (!contractible(use) || *use.type != *mul.type || use.has(Mod::FtzMod) != mul.has(Mod::FtzMod)) return false;
  return std::count(use.operands.begin(), use.operands.end(), mul.result) == 1;
}

// Places -v just before `before`: a negated constant, or a neg instruction.
ValueId negateBefore(ir::Kernel& k, Insertions& negations, InstId before, ValueId v, ir::SourceLoc loc) {
  ir::Type t = k.typeOf(v);
  ir::Inst in;
  if (auto bits = constBits(k, v)) {
    in = constInst(t, *bits ^ (uint64_t{1} << (t.bits() - 1)), loc);
  } else {
    in.op = Op::Neg;
    in.type = t;
    in.operands = {v};
    in.loc = loc;
  }
  InstId id = createInst(k, std::move(in));
  negations.before(before, id);
  return k.inst(id).result;
}

bool fuseKernel(ir::Kernel& k) {
  UserLists users(k);
  Insertions negations;
  std::vector<bool> dead(k.insts.size(), false);
  bool changed = false;
  for (size_t bi = 0; bi < k.blocks.size(); ++bi) {
    for (size_t ii = 0; ii < k.blocks[bi].insts.size(); ++ii) {
      InstId mid = k.blocks[bi].insts[ii];
      if (k.inst(mid).op != Op::Mul || !contractible(k.inst(mid)) || k.inst(mid).has(Mod::SatMod)) continue;
      std::span<const InstId> uses = users[k.inst(mid).result];
      if (uses.empty()) continue;
      bool all = std::all_of(uses.begin(), uses.end(), [&](InstId u) { return absorbs(k.inst(u), k.inst(mid)); });
      if (!all) continue;
      ValueId a = k.inst(mid).operands[0], b = k.inst(mid).operands[1], p = k.inst(mid).result;
      for (InstId uid : uses) {
        ir::SourceLoc loc = k.inst(uid).loc;
        bool productFirst = k.inst(uid).operands[0] == p;
        ValueId c = k.inst(uid).operands[productFirst ? 1 : 0];
        ValueId fa = a;
        if (k.inst(uid).op == Op::Sub) {
          ValueId& negated = productFirst ? c : fa;
          negated = negateBefore(k, negations, uid, negated, loc);
        }
        ir::Inst& use = k.inst(uid);
        use.op = Op::Fma;
        use.operands = {fa, b, c};
        changed = true;
      }
      dead[mid.index] = true;
    }
  }
  if (changed) {
    negations.apply(k);
    dead.resize(k.insts.size(), false);
    eraseInsts(k, dead);
  }
  return changed;
}

}  // namespace

bool fmaFusion(PassContext& ctx) {
  if (!ctx.options.fpContract) return false;
  return rewriteEachKernel(ctx, fuseKernel);
}

}  // namespace tn::passes
