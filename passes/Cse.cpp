// cse -- does: replaces a pure op by an identical one (commutative operands in either order) that dominates it.
// requires: SSA dominance (a verified kernel); computes the dominator tree itself.
// guarantees: only OF_PURE ops merge (never memory ops or collectives, nor a wgmma accumulator); the replaced ops are removed.
#include <algorithm>
#include <unordered_set>

#include "ir/Dominance.h"
#include "passes/Analysis.h"
#include "passes/Passes.h"
#include "passes/Rewrite.h"

namespace tn::passes {

namespace {

uint64_t typeCode(const std::optional<ir::Type>& t) {
  if (!t) return 0xFFFFFF;
  return (uint64_t{static_cast<uint8_t>(t->scalar)} << 16) | (uint64_t{t->lanes} << 8) | static_cast<uint8_t>(t->space);
}

// Operand i, with the two operands of a commutative op in increasing order.
ValueId operandOf(const ir::Inst& in, size_t i) {
  if (ir::hasFlag(in.op, ir::OF_COMM) && in.operands.size() >= 2 && i < 2 && in.operands[1] < in.operands[0])
    return in.operands[1 - i];
  return in.operands[i];
}

// Instructions are their own keys: equal when op, types, modifiers, immediate, symbol and
// operands (commutative ones in either order) are. The table holds instruction ids.
struct SameKey {
  const ir::Kernel* k;
  size_t operator()(uint32_t id) const {
    const ir::Inst& in = k->insts[id];
    uint64_t h = static_cast<uint64_t>(in.op) * 0x9E3779B97F4A7C15u;
    auto mix = [&](uint64_t x) { h = (h ^ x) * 0xBF58476D1CE4E5B9u + (h >> 29); };
    mix(typeCode(in.type));
    mix(typeCode(in.srcType));
    mix(in.imm);
    mix(static_cast<uint64_t>(static_cast<int64_t>(in.symbol)));
    for (ir::Mod m : in.mods) mix(static_cast<uint64_t>(m));
    for (size_t i = 0; i < in.operands.size(); ++i) mix(operandOf(in, i).index);
    return static_cast<size_t>(h);
  }
  bool operator()(uint32_t a, uint32_t b) const {
    const ir::Inst& x = k->insts[a];
    const ir::Inst& y = k->insts[b];
    if (x.op != y.op || typeCode(x.type) != typeCode(y.type) || typeCode(x.srcType) != typeCode(y.srcType) ||
        x.imm != y.imm || x.symbol != y.symbol || x.mods != y.mods || x.operands.size() != y.operands.size())
      return false;
    for (size_t i = 0; i < x.operands.size(); ++i)
      if (operandOf(x, i) != operandOf(y, i)) return false;
    return true;
  }
};

bool cseKernel(ir::Kernel& k) {
  ir::DominatorTree cfg(k);
  if (k.blocks.empty()) return false;
  SameKey same{&k};
  std::unordered_set<uint32_t, SameKey, SameKey> available(k.insts.size(), same, same);
  std::vector<bool> dead(k.insts.size(), false);
  bool changed = false;
  // A wgmma accumulator has one use, which takes its registers (ir::tiedOperand): an equal value
  // stays a value of its own.
  std::vector<bool> tied(k.values.size(), false);
  for (const ir::Inst& in : k.insts)
    if (int t = ir::tiedOperand(in); t >= 0) tied[in.operands[t].index] = true;
  // Replacements are applied as the walk reaches each use (every use of a value lies in the
  // dominator subtree of its definition) and once more at the end for unreachable blocks.
  Replacements repl(k);

  // Pre-order walk of the dominator tree; each block's additions (the tail of `added` from
  // its frame's mark) are undone when it is left. An instruction in the table is never
  // rewritten again, so its key stays what it was when it went in.
  struct Frame {
    BlockId block;
    size_t next = 0;
    size_t mark = 0;
  };
  std::vector<Frame> stack;
  std::vector<uint32_t> added;
  auto enter = [&](BlockId b) {
    stack.push_back({b, 0, added.size()});
    for (ir::InstId id : k.block(b).insts) {
      ir::Inst& in = k.inst(id);
      repl.rewrite(in);
      if (!ir::hasFlag(in.op, ir::OF_PURE) || !in.result || tied[in.result.index]) continue;
      auto [it, inserted] = available.insert(id.index);
      if (inserted) {
        added.push_back(id.index);
        continue;
      }
      repl.add(in.result, k.insts[*it].result);
      dead[id.index] = true;
      changed = true;
    }
  };
  enter(BlockId(0));
  while (!stack.empty()) {
    Frame& top = stack.back();
    std::span<const BlockId> kids = cfg.children(top.block);
    if (top.next < kids.size()) {
      enter(kids[top.next++]);
      continue;
    }
    for (size_t i = top.mark; i < added.size(); ++i) available.erase(added[i]);
    added.resize(top.mark);
    stack.pop_back();
  }
  if (!changed) return false;
  repl.rewriteAll(k);
  eraseInsts(k, dead);
  return true;
}

}  // namespace

bool cse(PassContext& ctx) {
  return rewriteEachKernel(ctx, cseKernel);
}

}  // namespace tn::passes
