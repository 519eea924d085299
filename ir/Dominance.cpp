#include "ir/Dominance.h"

#include <algorithm>
#include <utility>

namespace tn::ir {

std::vector<uint32_t> immediateDominators(const std::vector<std::vector<uint32_t>>& succs, uint32_t root) {
  constexpr uint32_t kNone = BlockId::kNone;
  const size_t n = succs.size();
  std::vector<uint32_t> idom(n, kNone);
  if (root >= n) return idom;

  // Depth-first numbering from 1 (0 = not reached); vertex[i] is the node numbered i, parent
  // the number of its tree parent.
  std::vector<uint32_t> number(n, 0), vertex{kNone}, parent{0};
  std::vector<std::pair<uint32_t, size_t>> stack{{root, 0}};
  number[root] = 1;
  vertex.push_back(root);
  parent.push_back(0);
  while (!stack.empty()) {
    auto& [x, next] = stack.back();
    if (next == succs[x].size()) {
      stack.pop_back();
      continue;
    }
    uint32_t y = succs[x][next++];
    if (y >= n || number[y]) continue;
    number[y] = static_cast<uint32_t>(vertex.size());
    vertex.push_back(y);
    parent.push_back(number[x]);
    stack.push_back({y, 0});
  }
  const uint32_t count = static_cast<uint32_t>(vertex.size() - 1);
  std::vector<std::vector<uint32_t>> preds(count + 1);
  for (uint32_t i = 1; i <= count; ++i)
    for (uint32_t y : succs[vertex[i]])
      if (y < n && number[y]) preds[number[y]].push_back(i);

  // Everything below works on depth-first numbers.
  std::vector<uint32_t> semi(count + 1), label(count + 1), ancestor(count + 1, 0), dom(count + 1, 0);
  std::vector<std::vector<uint32_t>> bucket(count + 1);
  for (uint32_t i = 0; i <= count; ++i) semi[i] = label[i] = i;
  std::vector<uint32_t> path;
  // The vertex of least semidominator on the forest path to v, compressing that path.
  auto eval = [&](uint32_t v) {
    if (!ancestor[v]) return v;
    for (uint32_t x = v; ancestor[ancestor[x]]; x = ancestor[x]) path.push_back(x);
    while (!path.empty()) {
      uint32_t x = path.back();
      path.pop_back();
      uint32_t a = ancestor[x];
      if (semi[label[a]] < semi[label[x]]) label[x] = label[a];
      ancestor[x] = ancestor[a];
    }
    return label[v];
  };
  for (uint32_t w = count; w >= 2; --w) {
    for (uint32_t v : preds[w]) semi[w] = std::min(semi[w], semi[eval(v)]);
    bucket[semi[w]].push_back(w);
    uint32_t p = parent[w];
    ancestor[w] = p;
    for (uint32_t v : bucket[p]) {
      uint32_t u = eval(v);
      dom[v] = semi[u] < semi[v] ? u : p;
    }
    bucket[p].clear();
  }
  for (uint32_t w = 2; w <= count; ++w)
    if (dom[w] != semi[w]) dom[w] = dom[dom[w]];
  idom[root] = root;
  for (uint32_t w = 2; w <= count; ++w) idom[vertex[w]] = vertex[dom[w]];
  return idom;
}

DominatorTree::DominatorTree(const Kernel& k) {
  size_t n = k.blocks.size();
  succs_.resize(n);
  preds_.resize(n);
  rpoIndex_.assign(n, kUnreached);
  idom_.assign(n, BlockId());
  pre_.assign(n, 0);
  post_.assign(n, 0);
  for (size_t b = 0; b < n; ++b) {
    const Inst* term = k.terminator(BlockId(static_cast<uint32_t>(b)));
    if (!term) continue;
    for (const BlockCall& c : term->succs) {
      if (!c.block.valid() || c.block.index >= n) continue;
      std::vector<BlockId>& out = succs_[b];
      if (std::find(out.begin(), out.end(), c.block) != out.end()) continue;
      out.push_back(c.block);
      preds_[c.block.index].push_back(BlockId(static_cast<uint32_t>(b)));
    }
  }
  if (n == 0) return;

  // Iterative depth-first search from the entry; post-order, then reversed.
  std::vector<bool> seen(n, false);
  std::vector<std::pair<BlockId, size_t>> stack{{BlockId(0), 0}};
  seen[0] = true;
  while (!stack.empty()) {
    auto& [b, next] = stack.back();
    if (next < succs_[b.index].size()) {
      BlockId s = succs_[b.index][next++];
      if (!seen[s.index]) {
        seen[s.index] = true;
        stack.push_back({s, 0});
      }
      continue;
    }
    rpo_.push_back(b);
    stack.pop_back();
  }
  std::reverse(rpo_.begin(), rpo_.end());
  for (size_t i = 0; i < rpo_.size(); ++i) rpoIndex_[rpo_[i].index] = static_cast<uint32_t>(i);

  std::vector<std::vector<uint32_t>> graph(n);
  for (size_t b = 0; b < n; ++b)
    for (BlockId s : succs_[b]) graph[b].push_back(s.index);
  std::vector<uint32_t> idom = immediateDominators(graph, 0);
  for (BlockId b : rpo_)
    if (b.index != 0) idom_[b.index] = BlockId(idom[b.index]);

  // Pre/post numbers of the dominator tree: a dominates b iff a's interval encloses b's.
  std::vector<std::vector<uint32_t>> children(n);
  for (BlockId b : rpo_)
    if (idom_[b.index].valid()) children[idom_[b.index].index].push_back(b.index);
  uint32_t clock = 0;
  std::vector<std::pair<uint32_t, size_t>> walk{{0, 0}};
  pre_[0] = clock++;
  while (!walk.empty()) {
    auto& [b, next] = walk.back();
    if (next < children[b].size()) {
      uint32_t c = children[b][next++];
      pre_[c] = clock++;
      walk.push_back({c, 0});
      continue;
    }
    post_[b] = clock++;
    walk.pop_back();
  }
}

}  // namespace tn::ir
