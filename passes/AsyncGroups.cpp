// asyncGroups -- does: a forward dataflow of the number of committed, not yet waited-for cp.async
// groups per thread (commit_group: +1, wait_group N: at most N, wait_all: 0; joins take the maximum).
// requires: a kernel with blocks; guarantees: an upper bound over all paths, or "unbounded".
#include "passes/AsyncGroups.h"

#include <algorithm>

#include "ir/Dominance.h"

namespace tn::passes {

namespace {
constexpr unsigned kUnbounded = 64;  // more groups in flight than any pipeline keeps: a count that only grows
}

AsyncGroups asyncGroups(const ir::Kernel& k) {
  AsyncGroups r;
  for (const ir::Inst& in : k.insts)
    if (in.op == ir::Op::CpAsync || in.op == ir::Op::CpAsyncCommit || in.op == ir::Op::CpAsyncWait ||
        in.op == ir::Op::CpAsyncWaitAll)
      r.used = true;
  if (!r.used || k.blocks.empty()) return r;
  ir::DominatorTree cfg(k);
  std::vector<int> in(k.blocks.size(), -1);  // groups in flight at block entry; -1: not reached yet
  in[0] = 0;
  unsigned peak = 0;
  for (bool changed = true; changed;) {
    changed = false;
    for (ir::BlockId b : cfg.reversePostOrder()) {
      if (in[b.index] < 0) continue;
      unsigned n = static_cast<unsigned>(in[b.index]);
      for (ir::InstId id : k.block(b).insts) {
        const ir::Inst& x = k.inst(id);
        if (x.op == ir::Op::CpAsyncCommit) n = std::min(n + 1, kUnbounded);
        else if (x.op == ir::Op::CpAsyncWait) n = std::min<unsigned>(n, static_cast<unsigned>(x.imm));
        else if (x.op == ir::Op::CpAsyncWaitAll) n = 0;
        peak = std::max(peak, n);
      }
      for (ir::BlockId s : cfg.successors(b))
        if (static_cast<int>(n) > in[s.index]) {
          in[s.index] = static_cast<int>(n);
          changed = true;
        }
    }
  }
  if (peak < kUnbounded) r.maxInFlight = peak;
  return r;
}

}  // namespace tn::passes
