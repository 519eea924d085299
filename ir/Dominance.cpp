#include "ir/Dominance.h"

#include <algorithm>
#include <utility>

namespace tn::ir {

namespace {

// Offsets for lists of the given lengths (start[x + 1] - start[x] = count[x]).
std::vector<uint32_t> offsets(const std::vector<uint32_t>& count) {
  std::vector<uint32_t> start(count.size() + 1, 0);
  for (size_t x = 0; x < count.size(); ++x) start[x + 1] = start[x] + count[x];
  return start;
}

}  // namespace

std::vector<uint32_t> immediateDominators(const Digraph& g, uint32_t root) {
  constexpr uint32_t kNone = BlockId::kNone;
  const uint32_t n = g.size();
  std::vector<uint32_t> idom(n, kNone);
  if (root >= n) return idom;

  // Depth-first numbering from 1 (0 = not reached); vertex[i] is the node numbered i, parent
  // the number of its tree parent.
  std::vector<uint32_t> number(n, 0), vertex{kNone, root}, parent{0, 0};
  std::vector<std::pair<uint32_t, uint32_t>> stack{{root, g.start[root]}};
  number[root] = 1;
  while (!stack.empty()) {
    auto& [x, next] = stack.back();
    if (next == g.start[x + 1]) {
      stack.pop_back();
      continue;
    }
    uint32_t y = g.targets[next++];
    if (y >= n || number[y]) continue;
    number[y] = static_cast<uint32_t>(vertex.size());
    vertex.push_back(y);
    parent.push_back(number[x]);
    stack.push_back({y, g.start[y]});
  }
  const uint32_t count = static_cast<uint32_t>(vertex.size() - 1);
  // Predecessors by number, flat.
  std::vector<uint32_t> predCount(count + 1, 0);
  for (uint32_t i = 1; i <= count; ++i)
    for (uint32_t y : g.out(vertex[i]))
      if (y < n && number[y]) ++predCount[number[y]];
  std::vector<uint32_t> predStart = offsets(predCount), preds(predStart.back());
  for (uint32_t i = 1; i <= count; ++i)
    for (uint32_t y : g.out(vertex[i]))
      if (y < n && number[y]) preds[predStart[number[y]] + --predCount[number[y]]] = i;

  // Everything below works on depth-first numbers; buckets are linked lists through bucketNext.
  std::vector<uint32_t> semi(count + 1), label(count + 1), ancestor(count + 1, 0), dom(count + 1, 0);
  std::vector<uint32_t> bucketHead(count + 1, 0), bucketNext(count + 1, 0);
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
    for (uint32_t i = predStart[w]; i < predStart[w + 1]; ++i) semi[w] = std::min(semi[w], semi[eval(preds[i])]);
    bucketNext[w] = bucketHead[semi[w]];
    bucketHead[semi[w]] = w;
    uint32_t p = parent[w];
    ancestor[w] = p;
    for (uint32_t v = bucketHead[p]; v; v = bucketNext[v]) {
      uint32_t u = eval(v);
      dom[v] = semi[u] < semi[v] ? u : p;
    }
    bucketHead[p] = 0;
  }
  for (uint32_t w = 2; w <= count; ++w)
    if (dom[w] != semi[w]) dom[w] = dom[dom[w]];
  idom[root] = root;
  for (uint32_t w = 2; w <= count; ++w) idom[vertex[w]] = vertex[dom[w]];
  return idom;
}

DominatorTree::DominatorTree(const Kernel& k) {
  const uint32_t n = static_cast<uint32_t>(k.blocks.size());
  rpoIndex_.assign(n, kUnreached);
  idom_.assign(n, BlockId());
  pre_.assign(n, 0);
  post_.assign(n, 0);
  // Distinct successors in first-seen order, then predecessors in block order.
  Digraph graph;
  graph.start.reserve(n + 1);
  std::vector<uint32_t> predCount(n, 0);
  for (uint32_t b = 0; b < n; ++b) {
    size_t first = graph.targets.size();
    if (const Inst* term = k.terminator(BlockId(b)))
      for (const BlockCall& c : term->succs) {
        if (!c.block.valid() || c.block.index >= n) continue;
        if (std::find(graph.targets.begin() + static_cast<std::ptrdiff_t>(first), graph.targets.end(), c.block.index) !=
            graph.targets.end())
          continue;
        graph.targets.push_back(c.block.index);
        ++predCount[c.block.index];
      }
    graph.start.push_back(static_cast<uint32_t>(graph.targets.size()));
  }
  succStart_ = graph.start;
  succ_.reserve(graph.targets.size());
  for (uint32_t s : graph.targets) succ_.push_back(BlockId(s));
  predStart_ = offsets(predCount);
  pred_.resize(predStart_.back());
  std::vector<uint32_t> fill(predStart_.begin(), predStart_.end() - 1);
  for (uint32_t b = 0; b < n; ++b)
    for (uint32_t s : graph.out(b)) pred_[fill[s]++] = BlockId(b);
  childStart_.assign(n + 1, 0);
  if (n == 0) return;

  // Iterative depth-first search from the entry; post-order, then reversed.
  std::vector<bool> seen(n, false);
  std::vector<std::pair<uint32_t, uint32_t>> stack{{0, graph.start[0]}};
  seen[0] = true;
  while (!stack.empty()) {
    auto& [b, next] = stack.back();
    if (next < graph.start[b + 1]) {
      uint32_t s = graph.targets[next++];
      if (!seen[s]) {
        seen[s] = true;
        stack.push_back({s, graph.start[s]});
      }
      continue;
    }
    rpo_.push_back(BlockId(b));
    stack.pop_back();
  }
  std::reverse(rpo_.begin(), rpo_.end());
  for (size_t i = 0; i < rpo_.size(); ++i) rpoIndex_[rpo_[i].index] = static_cast<uint32_t>(i);

  std::vector<uint32_t> idom = immediateDominators(graph, 0);
  std::vector<uint32_t> childCount(n, 0);
  for (BlockId b : rpo_)
    if (b.index != 0) {
      idom_[b.index] = BlockId(idom[b.index]);
      ++childCount[idom[b.index]];
    }
  childStart_ = offsets(childCount);
  child_.resize(childStart_.back());
  fill.assign(childStart_.begin(), childStart_.end() - 1);
  for (BlockId b : rpo_)
    if (b.index != 0) child_[fill[idom[b.index]]++] = b;

  // Pre/post numbers of the dominator tree: a dominates b iff a's interval encloses b's.
  uint32_t clock = 0;
  std::vector<std::pair<uint32_t, uint32_t>> walk{{0, childStart_[0]}};
  pre_[0] = clock++;
  while (!walk.empty()) {
    auto& [b, next] = walk.back();
    if (next < childStart_[b + 1]) {
      uint32_t c = child_[next++].index;
      pre_[c] = clock++;
      walk.push_back({c, childStart_[c]});
      continue;
    }
    post_[b] = clock++;
    walk.pop_back();
  }
}

}  // namespace tn::ir
