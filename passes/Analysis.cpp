#include "passes/Analysis.h"

#include <algorithm>

namespace tn::passes {

namespace {
constexpr uint32_t kNone = BlockId::kNone;
}

InstPositions::InstPositions(const Kernel& k) : block(k.insts.size()), index(k.insts.size(), kNone) {
  for (size_t b = 0; b < k.blocks.size(); ++b)
    for (size_t i = 0; i < k.blocks[b].insts.size(); ++i) {
      InstId id = k.blocks[b].insts[i];
      block[id.index] = BlockId(static_cast<uint32_t>(b));
      index[id.index] = static_cast<uint32_t>(i);
    }
}

// Dominators of the reverse CFG (ir::immediateDominators). Node n (= blocks.size()) is the
// virtual exit.
PostDominatorTree::PostDominatorTree(const Kernel& k, const ir::DominatorTree& cfg, EndlessLoops endless) {
  uint32_t n = static_cast<uint32_t>(k.blocks.size());
  exit_ = n;
  // Reverse-graph successors of x are x's reachable CFG predecessors; the exit's are its
  // attached blocks, in block order.
  std::vector<std::vector<uint32_t>> rsucc(n + 1);
  std::vector<bool> attached(n, false);
  for (BlockId b : cfg.reversePostOrder()) {
    for (BlockId p : cfg.predecessors(b))
      if (cfg.reachable(p)) rsucc[b.index].push_back(p.index);
    if (cfg.successors(b).empty()) attached[b.index] = true;
  }
  // Blocks that cannot reach a `ret` (endless loops) are attached to the exit, latest in RPO
  // first, until every reachable block is on the reverse graph (unless they are left out). A
  // block attached reaches everything its reverse search reaches, so the search only grows and
  // one pass backwards over the RPO finds each next one.
  std::vector<bool> seen(n + 1, false);
  std::vector<uint32_t> work;
  auto search = [&](uint32_t from) {
    if (seen[from]) return;
    seen[from] = true;
    work.push_back(from);
    while (!work.empty()) {
      uint32_t x = work.back();
      work.pop_back();
      for (uint32_t y : rsucc[x])
        if (!seen[y]) {
          seen[y] = true;
          work.push_back(y);
        }
    }
  };
  seen[n] = true;
  for (uint32_t b = 0; b < n; ++b)
    if (attached[b]) search(b);
  for (auto it = cfg.reversePostOrder().rbegin(); it != cfg.reversePostOrder().rend(); ++it) {
    if (seen[it->index]) continue;
    if (endless == EndlessLoops::LeaveOut) break;
    attached[it->index] = true;
    search(it->index);
  }
  for (uint32_t b = 0; b < n; ++b)
    if (attached[b]) rsucc[n].push_back(b);
  ipdom_ = ir::immediateDominators(rsucc, n);
}

std::vector<std::vector<BlockId>> controlDependences(const Kernel& k, const ir::DominatorTree& cfg,
                                                     const PostDominatorTree& pdom) {
  std::vector<std::vector<BlockId>> deps(k.blocks.size());
  for (BlockId a : cfg.reversePostOrder()) {
    uint32_t stop = pdom.ipdom_[a.index];
    for (BlockId s : cfg.successors(a)) {
      uint32_t x = s.index;
      while (x != stop && x != pdom.exit_ && x != kNone) {
        std::vector<BlockId>& d = deps[x];
        if (d.empty() || d.back() != a) d.push_back(a);  // a's entries are added together
        x = pdom.ipdom_[x];
      }
    }
  }
  for (auto& d : deps) std::sort(d.begin(), d.end());
  return deps;
}

std::vector<std::vector<BlockId>> dominatorChildren(const Kernel& k, const ir::DominatorTree& cfg) {
  std::vector<std::vector<BlockId>> children(k.blocks.size());
  for (BlockId b : cfg.reversePostOrder())
    if (cfg.idom(b).valid()) children[cfg.idom(b).index].push_back(b);
  return children;
}

std::vector<bool> reachableFrom(const Kernel& k, const ir::DominatorTree& cfg, BlockId from) {
  std::vector<bool> seen(k.blocks.size(), false);
  std::vector<BlockId> work(cfg.successors(from).begin(), cfg.successors(from).end());
  while (!work.empty()) {
    BlockId b = work.back();
    work.pop_back();
    if (seen[b.index]) continue;
    seen[b.index] = true;
    for (BlockId s : cfg.successors(b)) work.push_back(s);
  }
  return seen;
}

std::vector<bool> cycleThrough(const Kernel& k, const ir::DominatorTree& cfg, BlockId b) {
  std::vector<bool> forward = reachableFrom(k, cfg, b);
  std::vector<bool> onCycle(k.blocks.size(), false);
  if (!forward[b.index]) return onCycle;
  // Backward search from b over predecessors, restricted to blocks reachable from b.
  std::vector<BlockId> work{b};
  while (!work.empty()) {
    BlockId x = work.back();
    work.pop_back();
    if (onCycle[x.index]) continue;
    onCycle[x.index] = true;
    for (BlockId p : cfg.predecessors(x))
      if (forward[p.index]) work.push_back(p);
  }
  return onCycle;
}

const ir::Inst* definingInst(const Kernel& k, ValueId v) {
  const ir::ValueInfo& vi = k.value(v);
  if (vi.kind != ir::DefKind::Inst || vi.owner >= k.insts.size()) return nullptr;
  return &k.insts[vi.owner];
}

BlockId definingBlock(const Kernel& k, ValueId v, const InstPositions& pos) {
  const ir::ValueInfo& vi = k.value(v);
  switch (vi.kind) {
    case ir::DefKind::KernelParam: return BlockId(0);
    case ir::DefKind::BlockParam: return BlockId(vi.owner);
    case ir::DefKind::Inst: return vi.owner < pos.block.size() ? pos.block[vi.owner] : BlockId();
  }
  return BlockId();
}

std::optional<uint64_t> constBits(const Kernel& k, ValueId v) {
  const ir::Inst* in = definingInst(k, v);
  if (!in || in->op != ir::Op::Const) return std::nullopt;
  return in->imm;
}

std::vector<std::vector<InstId>> userLists(const Kernel& k) {
  std::vector<std::vector<InstId>> users(k.values.size());
  for (const ir::Block& b : k.blocks)
    for (InstId id : b.insts) {
      const ir::Inst& in = k.inst(id);
      for (ValueId v : in.operands) users[v.index].push_back(id);
      for (const ir::BlockCall& c : in.succs)
        for (ValueId v : c.args) users[v.index].push_back(id);
    }
  return users;
}

}  // namespace tn::passes
