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

// Dominators of the reverse CFG (ir::immediateDominators).
PostDominatorTree::PostDominatorTree(const Kernel& k, const ir::DominatorTree& cfg, EndlessLoops endless) {
  uint32_t n = static_cast<uint32_t>(k.blocks.size());
  exit_ = n;
  // Blocks that cannot reach a `ret` (endless loops) are attached to the exit, latest in RPO
  // first, until every reachable block is on the reverse graph (unless they are left out). A
  // block attached reaches everything its reverse search reaches, so the search only grows and
  // one pass backwards over the RPO finds each next one. Reverse-graph successors of a block
  // are its reachable CFG predecessors.
  std::vector<bool> attached(n, false);
  for (BlockId b : cfg.reversePostOrder())
    if (cfg.successors(b).empty()) attached[b.index] = true;
  std::vector<bool> seen(n + 1, false);
  std::vector<uint32_t> work;
  auto search = [&](uint32_t from) {
    if (seen[from]) return;
    seen[from] = true;
    work.push_back(from);
    while (!work.empty()) {
      uint32_t x = work.back();
      work.pop_back();
      for (BlockId p : cfg.predecessors(BlockId(x)))
        if (cfg.reachable(p) && !seen[p.index]) {
          seen[p.index] = true;
          work.push_back(p.index);
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
  // The reverse graph; node n is the virtual exit, followed by the attached blocks.
  ir::Digraph rev;
  rev.start.reserve(n + 2);
  for (uint32_t b = 0; b < n; ++b) {
    if (cfg.reachable(BlockId(b)))
      for (BlockId p : cfg.predecessors(BlockId(b)))
        if (cfg.reachable(p)) rev.targets.push_back(p.index);
    rev.start.push_back(static_cast<uint32_t>(rev.targets.size()));
  }
  for (uint32_t b = 0; b < n; ++b)
    if (attached[b]) rev.targets.push_back(b);
  rev.start.push_back(static_cast<uint32_t>(rev.targets.size()));
  ipdom_ = ir::immediateDominators(rev, n);
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

StrongComponents::StrongComponents(const Kernel& k, const ir::DominatorTree& cfg) {
  size_t n = k.blocks.size();
  component.assign(n, kNone);
  std::vector<uint32_t> index(n, kNone), low(n, 0);
  std::vector<bool> onStack(n, false);
  std::vector<uint32_t> open;  // Tarjan's stack
  std::vector<std::pair<uint32_t, size_t>> dfs;
  uint32_t clock = 0;
  for (BlockId root : cfg.reversePostOrder()) {
    if (index[root.index] != kNone) continue;
    dfs.push_back({root.index, 0});
    index[root.index] = low[root.index] = clock++;
    open.push_back(root.index);
    onStack[root.index] = true;
    while (!dfs.empty()) {
      auto& [x, next] = dfs.back();
      std::span<const BlockId> out = cfg.successors(BlockId(x));
      if (next < out.size()) {
        uint32_t y = out[next++].index;
        if (index[y] == kNone) {
          index[y] = low[y] = clock++;
          open.push_back(y);
          onStack[y] = true;
          dfs.push_back({y, 0});
        } else if (onStack[y]) {
          low[x] = std::min(low[x], index[y]);
        }
        continue;
      }
      uint32_t done = x;
      dfs.pop_back();
      if (!dfs.empty()) low[dfs.back().first] = std::min(low[dfs.back().first], low[done]);
      if (low[done] != index[done]) continue;
      uint32_t c = static_cast<uint32_t>(members.size());
      members.emplace_back();
      for (uint32_t y = kNone; y != done;) {
        y = open.back();
        open.pop_back();
        onStack[y] = false;
        component[y] = c;
        members.back().push_back(BlockId(y));
      }
      std::span<const BlockId> succ = cfg.successors(BlockId(done));
      cyclic.push_back(members.back().size() > 1 || std::find(succ.begin(), succ.end(), BlockId(done)) != succ.end());
    }
  }
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

UserLists::UserLists(const Kernel& k) : start_(k.values.size() + 1, 0) {
  auto eachRead = [&](auto&& f) {
    for (const ir::Block& b : k.blocks)
      for (InstId id : b.insts) {
        const ir::Inst& in = k.inst(id);
        for (ValueId v : in.operands) f(v, id);
        for (const ir::BlockCall& c : in.succs)
          for (ValueId v : c.args) f(v, id);
      }
  };
  eachRead([&](ValueId v, InstId) { ++start_[v.index + 1]; });
  for (size_t v = 0; v < k.values.size(); ++v) start_[v + 1] += start_[v];
  inst_.resize(start_.back());
  std::vector<uint32_t> at(start_.begin(), start_.end() - 1);
  eachRead([&](ValueId v, InstId id) { inst_[at[v.index]++] = id; });
}

}  // namespace tn::passes
