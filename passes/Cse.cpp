// cse -- does: replaces a pure op by an identical one (commutative operands in either order) that dominates it.
// requires: SSA dominance (a verified kernel); computes the dominator tree itself.
// guarantees: only OF_PURE ops merge (never memory ops or collectives); the replaced ops are removed.
#include <algorithm>
#include <map>

#include "ir/Dominance.h"
#include "passes/Analysis.h"
#include "passes/Passes.h"
#include "passes/Rewrite.h"

namespace tn::passes {

namespace {

using Key = std::vector<uint64_t>;

uint64_t typeCode(const std::optional<ir::Type>& t) {
  if (!t) return 0xFFFFFF;
  return (uint64_t{static_cast<uint8_t>(t->scalar)} << 16) | (uint64_t{t->lanes} << 8) | static_cast<uint8_t>(t->space);
}

Key keyOf(const ir::Inst& in) {
  Key key{static_cast<uint64_t>(in.op), typeCode(in.type), typeCode(in.srcType), in.imm,
          static_cast<uint64_t>(static_cast<int64_t>(in.symbol))};
  for (ir::Mod m : in.mods) key.push_back(static_cast<uint64_t>(m));
  std::vector<ValueId> ops = in.operands;
  if (ir::hasFlag(in.op, ir::OF_COMM) && ops.size() >= 2 && ops[1] < ops[0]) std::swap(ops[0], ops[1]);
  for (ValueId v : ops) key.push_back(v.index);
  return key;
}

bool cseKernel(ir::Kernel& k) {
  ir::DominatorTree cfg(k);
  if (k.blocks.empty()) return false;
  std::map<Key, ValueId> available;
  std::vector<bool> dead(k.insts.size(), false);
  bool changed = false;
  // Replacements are applied as the walk reaches each use (every use of a value lies in the
  // dominator subtree of its definition) and once more at the end for unreachable blocks.
  std::vector<ValueId> repl(k.values.size());
  auto resolve = [&](ValueId v) { return repl[v.index].valid() ? repl[v.index] : v; };
  auto rewrite = [&](ir::Inst& in) {
    for (ValueId& v : in.operands) v = resolve(v);
    for (ir::BlockCall& c : in.succs)
      for (ValueId& v : c.args) v = resolve(v);
  };

  // Pre-order walk of the dominator tree; each block's additions are undone when it is left.
  struct Frame {
    BlockId block;
    size_t next = 0;
    std::vector<Key> added;
  };
  std::vector<Frame> stack;
  auto enter = [&](BlockId b) {
    Frame f{b, 0, {}};
    for (ir::InstId id : k.block(b).insts) {
      ir::Inst& in = k.inst(id);
      rewrite(in);
      if (!ir::hasFlag(in.op, ir::OF_PURE) || !in.result) continue;
      Key key = keyOf(in);
      auto [it, inserted] = available.try_emplace(key, in.result);
      if (inserted) {
        f.added.push_back(std::move(key));
        continue;
      }
      repl[in.result.index] = it->second;
      dead[id.index] = true;
      changed = true;
    }
    stack.push_back(std::move(f));
  };
  enter(BlockId(0));
  while (!stack.empty()) {
    Frame& top = stack.back();
    std::span<const BlockId> kids = cfg.children(top.block);
    if (top.next < kids.size()) {
      enter(kids[top.next++]);
      continue;
    }
    for (const Key& key : top.added) available.erase(key);
    stack.pop_back();
  }
  if (!changed) return false;
  for (ir::Block& b : k.blocks)
    for (ir::InstId id : b.insts) rewrite(k.inst(id));
  eraseInsts(k, dead);
  return true;
}

}  // namespace

bool cse(PassContext& ctx) {
  return rewriteEachKernel(ctx, cseKernel);
}

}  // namespace tn::passes
