// strength-reduce -- does: integer mul by 2^k -> shl; unsigned div by 2^k -> shr, rem by 2^k -> and (2^k - 1).
// requires: a parsed kernel; constants are recognised by their `const` definition.
// guarantees: bit-identical results; leaves signed div/rem, modifiers, vectors and multipliers 0 and 1 alone.
#include <algorithm>
#include <bit>

#include "passes/Analysis.h"
#include "passes/Passes.h"
#include "passes/Rewrite.h"

namespace tn::passes {

namespace {

// log2 of the constant v when it is a power of two >= 2 of an integer type t.
std::optional<unsigned> powerOfTwo(const ir::Kernel& k, ValueId v, ir::Type t) {
  auto bits = constBits(k, v);
  if (!bits) return std::nullopt;
  uint64_t c = *bits & lowMask(t.bits());
  if (c < 2 || !std::has_single_bit(c)) return std::nullopt;
  return static_cast<unsigned>(std::countr_zero(c));
}

bool reduceKernel(ir::Kernel& k) {
  bool changed = false;
  Insertions shifts;  // each new constant goes just before its instruction
  for (size_t b = 0; b < k.blocks.size(); ++b) {
    for (size_t i = 0; i < k.blocks[b].insts.size(); ++i) {
      ir::InstId id = k.blocks[b].insts[i];
      const ir::Inst& in = k.inst(id);
      if (in.op != ir::Op::Mul && in.op != ir::Op::Div && in.op != ir::Op::Rem) continue;
      if (!in.type || !in.type->isInt() || in.type->isVector() || in.operands.size() != 2) continue;
      if (std::any_of(in.mods.begin(), in.mods.end(), [](ir::Mod m) { return m != ir::Mod::None; })) continue;
      ir::Type t = *in.type;
      if (in.op != ir::Op::Mul && t.isSigned()) continue;
      ValueId x = in.operands[0];
      auto k2 = powerOfTwo(k, in.operands[1], t);
      if (!k2 && in.op == ir::Op::Mul) {
        k2 = powerOfTwo(k, in.operands[0], t);
        x = in.operands[1];
      }
      if (!k2) continue;
      ir::Op op = in.op;
      ir::Inst amount = op == ir::Op::Rem ? constInst(t, (uint64_t{1} << *k2) - 1, in.loc)
                                          : constInst(ir::Type::u32(), *k2, in.loc);
      ir::InstId cid = createInst(k, std::move(amount));  // may move the pool: `in` is stale now
      ValueId c = k.inst(cid).result;
      ir::Inst& rewritten = k.inst(id);
      rewritten.op = op == ir::Op::Mul ? ir::Op::Shl : op == ir::Op::Div ? ir::Op::Shr : ir::Op::And;
      rewritten.operands = {x, c};
      shifts.before(id, cid);
      changed = true;
    }
  }
  shifts.apply(k);
  return changed;
}

}  // namespace

bool strengthReduce(PassContext& ctx) {
  return rewriteEachKernel(ctx, reduceKernel);
}

}  // namespace tn::passes
