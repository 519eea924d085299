#include "passes/Uniformity.h"

#include <algorithm>

#include "ir/Printer.h"
#include "passes/Joins.h"
#include "passes/Sweeps.h"

namespace tn::passes {

using ir::Mod;
using ir::Op;

// ---- uniformity -------------------------------------------------------------------------------

namespace {

// What both scopes' solvers read: the graphs, and for each value the positions that read it.
// A position is a block's parameters (slot 0) or its instruction j (slot j + 1), numbered by the
// block's place in reverse post-order; branch decisions come after all of them.
struct Context {
  Context(const Kernel& k, const ir::DominatorTree& cfg, const PostDominatorTree& pdom)
      : k(k), cfg(cfg), cdeps(controlDependences(k, cfg, pdom)), dependents(k.blocks.size()), scc(k, cfg),
        pos(k), users(k), joins(k, cfg, pdom, scc), readerStart(k.values.size() + 1, 0) {
    for (size_t x = 0; x < cdeps.size(); ++x)
      for (BlockId d : cdeps[x]) dependents[d.index].push_back(BlockId(static_cast<uint32_t>(x)));
    // Readers of each value: instructions reading it, the parameters of blocks it is passed to,
    // the decision of a cbr on it. Counted first, then filled (one array for all values).
    for (int fill = 0; fill < 2; ++fill) {
      std::vector<uint32_t> at(readerStart.begin(), readerStart.end() - 1);
      auto add = [&](ValueId v, uint64_t p) {
        if (v.index >= k.values.size()) return;
        if (fill) readerPos[at[v.index]++] = p;
        else ++readerStart[v.index + 1];
      };
      for (uint32_t r = 0; r < cfg.reversePostOrder().size(); ++r) {
        const ir::Block& blk = k.block(cfg.reversePostOrder()[r]);
        for (size_t j = 0; j < blk.insts.size(); ++j) {
          const ir::Inst& in = k.inst(blk.insts[j]);
          for (ValueId v : in.operands) add(v, slotPos(r, j + 1));
          for (const ir::BlockCall& c : in.succs)
            for (ValueId v : c.args) add(v, slotPos(cfg.rpoIndex(c.block), 0));
          if (in.op == Op::Cbr && !in.operands.empty() && j + 1 == blk.insts.size())
            add(in.operands[0], branchPos(r));
        }
      }
      if (!fill) {
        for (size_t v = 0; v < k.values.size(); ++v) readerStart[v + 1] += readerStart[v];
        readerPos.resize(readerStart.back());
      }
    }
  }

  static uint64_t slotPos(uint32_t rpo, size_t slot) { return (uint64_t{rpo} << 32) | slot; }
  static uint64_t branchPos(uint32_t rpo) { return (uint64_t{1} << 63) | (uint64_t{rpo} << 32); }

  const Kernel& k;
  const ir::DominatorTree& cfg;
  std::vector<std::vector<BlockId>> cdeps, dependents;  // dependents[d]: the blocks whose deps hold d
  StrongComponents scc;
  InstPositions pos;
  UserLists users;
  JoinFinder joins;
  std::vector<uint32_t> readerStart;  // readers of value v: readerPos[readerStart[v] .. readerStart[v + 1])
  std::vector<uint64_t> readerPos;
};

// The fixed point, as a round-robin over the blocks in reverse post-order (parameters, then
// instructions), then over their branches, repeated until a round changes nothing; Sweeps
// replays it visiting only what can change. The first reason found for a value is its origin.
class Solver {
 public:
  Solver(Context& cx, Scope scope, const ThreadLayout& layout, ThreadEval* eval)
      : cx_(cx), k_(cx.k), cfg_(cx.cfg), scope_(scope), layout_(layout), eval_(eval) {
    size_t nv = k_.values.size(), nb = k_.blocks.size();
    d_.value.assign(nv, false);
    d_.origin.assign(nv, ValueId());
    d_.branch.assign(nb, false);
    d_.control.assign(nb, false);
    d_.cause.assign(nb, BlockId());
    taint_.assign(k_.insts.size(), ValueId());
    paramTaint_.assign(nv, ValueId());
    joined_.assign(nb, ValueId());
    processed_.assign(nb, false);
    exited_.assign(cx.scc.cyclic.size(), false);
    seen_.assign(nb, 0);
  }

  Divergence run() {
    const std::vector<BlockId>& rpo = cfg_.reversePostOrder();
    for (uint32_t r = 0; r < rpo.size(); ++r) {
      sweeps_.at(Context::slotPos(r, 0));
      visitParams(rpo[r]);
      for (size_t j = 0; j < k_.block(rpo[r]).insts.size(); ++j) {
        sweeps_.at(Context::slotPos(r, j + 1));
        visitInst(k_.block(rpo[r]).insts[j]);
      }
    }
    for (uint32_t r = 0; r < rpo.size(); ++r) {
      sweeps_.at(Context::branchPos(r));
      visitBranch(rpo[r]);
    }
    for (uint64_t pos; sweeps_.next(pos);) {
      BlockId b = rpo[static_cast<uint32_t>(pos >> 32) & 0x7FFFFFFFu];
      auto slot = static_cast<uint32_t>(pos);
      if (pos >> 63) visitBranch(b);
      else if (slot == 0) visitParams(b);
      else visitInst(k_.block(b).insts[slot - 1]);
    }
    computeControl();
    return std::move(d_);
  }

 private:
  // Marks v divergent with origin o, and revisits what reads v.
  void mark(ValueId v, ValueId o) {
    if (d_.value[v.index]) return;
    d_.value[v.index] = true;
    d_.origin[v.index] = o.valid() ? o : v;
    for (uint32_t i = cx_.readerStart[v.index]; i < cx_.readerStart[v.index + 1]; ++i) sweeps_.touch(cx_.readerPos[i]);
  }
  void touchParams(BlockId b) {
    if (cfg_.reachable(b)) sweeps_.touch(Context::slotPos(cfg_.rpoIndex(b), 0));
  }
  void taint(InstId id, ValueId why) {
    if (taint_[id.index].valid()) return;
    taint_[id.index] = why;
    BlockId b = cx_.pos.block[id.index];
    if (!b.valid() || !cfg_.reachable(b)) return;
    uint32_t r = cfg_.rpoIndex(b);
    sweeps_.touch(Context::slotPos(r, cx_.pos.index[id.index] + 1));
    if (k_.inst(id).op == Op::Cbr) sweeps_.touch(Context::branchPos(r));
  }
  void taintParam(ValueId p, ValueId why) {
    if (paramTaint_[p.index].valid()) return;
    paramTaint_[p.index] = why;
    touchParams(BlockId(k_.value(p).owner));
  }

  // Whether the op itself produces values that differ within the scope.
  bool isSource(const ir::Inst& in) const {
    switch (in.op) {
      case Op::Tid: {
        Mod d = in.mod(ir::ModGroup::Dim);
        unsigned extent = d == Mod::X ? layout_.dims.x : d == Mod::Y ? layout_.dims.y : layout_.dims.z;
        bool known = d == Mod::X ? layout_.known : d == Mod::Y ? layout_.hasY : layout_.hasZ;
        return !(known && extent == 1);
      }
      case Op::Warpid:
      case Op::VoteSync:
        return scope_ != Scope::Warp;
      case Op::ShflSync:
        if (scope_ == Scope::Warp && in.has(Mod::Idx) && in.operands.size() > 1 && !d_.value[in.operands[1].index])
          return false;
        return true;
      case Op::Ld:
        // ld.global.nc reads memory that stays unchanged while the kernel runs (PTX's contract for
        // the non-coherent path): from a uniform address every thread gets the same value. The
        // address's own divergence still flows in as an operand.
        return !(in.has(Mod::NcMod) && !in.operands.empty() && !d_.value[in.operands[0].index]);
      default:
        return ir::hasFlag(in.op, ir::OF_DIVERGENT);
    }
  }

  // The thread evaluator shows v is the same in every thread of each warp (each warpgroup).
  bool groupConstant(ValueId v) const {
    const size_t group = scope_ == Scope::Warp ? 32 : scope_ == Scope::Warpgroup ? 128 : 0;
    if (!group || !eval_ || !layout_.known) return false;
    const ThreadValue* tv = eval_->get(v);
    if (!tv) return false;
    for (size_t base = 0; base < tv->perThread.size(); base += group) {
      size_t end = std::min(base + group, tv->perThread.size());
      for (size_t i = base + 1; i < end; ++i)
        if (tv->perThread[i] != tv->perThread[base]) return false;
    }
    return true;
  }

  void visitParams(BlockId b) {
    const ir::Block& blk = k_.block(b);
    for (size_t i = 0; i < blk.params.size(); ++i) {
      ValueId p = blk.params[i];
      if (d_.value[p.index]) continue;
      ValueId why;
      if (joined_[b.index].valid()) why = joined_[b.index];
      if (!why.valid() && paramTaint_[p.index].valid()) why = paramTaint_[p.index];
      for (BlockId pred : cfg_.predecessors(b)) {
        if (why.valid()) break;
        const ir::Inst* term = cfg_.reachable(pred) ? k_.terminator(pred) : nullptr;
        if (!term) continue;
        for (const ir::BlockCall& c : term->succs)
          if (c.block == b && i < c.args.size() && d_.value[c.args[i].index]) why = d_.origin[c.args[i].index];
      }
      if (why.valid()) mark(p, why);
    }
  }

  void visitInst(InstId id) {
    const ir::Inst& in = k_.inst(id);
    if (!in.result || d_.value[in.result.index]) return;
    ValueId why;
    if (isSource(in)) why = in.result;
    // shfl.idx from a warp-uniform lane over the whole warp (a constant clamp operand without
    // segment bits) hands every lane the same value: a broadcast, warp-uniform whatever the value
    // shuffled (isSource has checked the lane).
    std::optional<uint64_t> clamp = in.operands.size() > 2 ? constBits(k_, in.operands[2]) : std::nullopt;
    const bool broadcast = in.op == Op::ShflSync && !isSource(in) && clamp && (*clamp & 0x1F00u) == 0;
    for (size_t i = broadcast ? 1 : 0; i < in.operands.size(); ++i) {
      ValueId o = in.operands[i];
      if (!why.valid() && d_.value[o.index]) why = d_.origin[o.index];
    }
    // The evaluator sees data only: it can clear data divergence, not a loop-exit taint.
    bool tainted = taint_[id.index].valid();
    if (!why.valid() && tainted) why = taint_[id.index];
    if (why.valid() && (tainted || !groupConstant(in.result))) mark(in.result, why);
  }

  // A newly divergent branch: its joins and, if it decides a loop exit, the loop's outputs.
  void visitBranch(BlockId b) {
    const ir::Block& blk = k_.block(b);
    if (blk.insts.empty() || processed_[b.index]) return;
    InstId tid = blk.insts.back();
    const ir::Inst& term = k_.inst(tid);
    if (term.op != Op::Cbr || term.operands.empty()) return;
    ValueId cond = term.operands[0];
    ValueId why = d_.value[cond.index] ? d_.origin[cond.index] : taint_[tid.index];
    if (!why.valid()) return;
    processed_[b.index] = true;
    d_.branch[b.index] = true;
    for (BlockId j : cx_.joins.joins(b, term))
      if (!joined_[j.index].valid()) {
        joined_[j.index] = why;
        touchParams(j);
      }
    loopExits(b, why);
  }

  // If b sits on a cycle that some threads leave because of b's decision (directly, or from a
  // block whose execution depends on it), values of the cycle read after it are divergent. The
  // cycle is b's strongly connected component; once one branch of it has tainted what leaves
  // it, another one would only find the same things tainted already.
  void loopExits(BlockId b, ValueId why) {
    if (!cx_.scc.onCycle(b)) return;
    uint32_t c = cx_.scc.component[b.index];
    if (exited_[c]) return;
    auto inCycleBlock = [&](BlockId x) { return x.valid() && cx_.scc.component[x.index] == c; };
    // Is a block that (transitively) depends on b in the cycle, with an edge out of it?
    bool exits = false;
    uint32_t stamp = ++stamp_;
    std::vector<BlockId> work{b};
    seen_[b.index] = stamp;
    while (!work.empty() && !exits) {
      BlockId x = work.back();
      work.pop_back();
      if (inCycleBlock(x))
        for (BlockId s : cfg_.successors(x)) exits = exits || !inCycleBlock(s);
      for (BlockId y : cx_.dependents[x.index])
        if (seen_[y.index] != stamp) {
          seen_[y.index] = stamp;
          work.push_back(y);
        }
    }
    if (!exits) return;
    exited_[c] = true;
    auto inCycle = [&](ValueId v) {
      return inCycleBlock(definingBlock(k_, v, cx_.pos)) && k_.value(v).kind != ir::DefKind::KernelParam;
    };
    // Arguments leaving the cycle along an exit edge.
    for (BlockId x : cx_.scc.members[c])
      for (InstId id : k_.block(x).insts)
        for (const ir::BlockCall& call : k_.inst(id).succs) {
          if (inCycleBlock(call.block)) continue;
          const ir::Block& target = k_.block(call.block);
          for (size_t i = 0; i < call.args.size() && i < target.params.size(); ++i)
            if (inCycle(call.args[i])) taintParam(target.params[i], why);
        }
    // Instructions outside the cycle reading its values; a branch among them passes the taint on
    // to its targets' parameters.
    auto readOutside = [&](ValueId v) {
      for (InstId u : cx_.users[v]) {
        BlockId ub = cx_.pos.block[u.index];
        if (inCycleBlock(ub)) continue;
        taint(u, why);
        if (k_.block(ub).insts.back() != u) continue;
        for (const ir::BlockCall& call : k_.inst(u).succs)
          for (size_t i = 0; i < call.args.size() && i < k_.block(call.block).params.size(); ++i)
            if (inCycle(call.args[i])) taintParam(k_.block(call.block).params[i], why);
      }
    };
    for (BlockId x : cx_.scc.members[c]) {
      for (ValueId p : k_.block(x).params) readOutside(p);
      for (InstId id : k_.block(x).insts)
        if (k_.inst(id).result) readOutside(k_.inst(id).result);
    }
  }

  // Control divergence: the same round-robin over the blocks, each taking the first of its
  // control dependences that is a divergent branch or itself control-divergent.
  void computeControl() {
    const std::vector<BlockId>& rpo = cfg_.reversePostOrder();
    Sweeps sweeps;
    auto visit = [&](uint32_t r) {
      BlockId x = rpo[r];
      if (d_.control[x.index]) return;
      for (BlockId br : cx_.cdeps[x.index]) {
        BlockId cause = d_.branch[br.index] ? br : d_.control[br.index] ? d_.cause[br.index] : BlockId();
        if (!cause.valid()) continue;
        d_.control[x.index] = true;
        d_.cause[x.index] = cause;
        for (BlockId y : cx_.dependents[x.index])
          if (cfg_.reachable(y)) sweeps.touch(cfg_.rpoIndex(y));
        break;
      }
    };
    for (uint32_t r = 0; r < rpo.size(); ++r) {
      sweeps.at(r);
      visit(r);
    }
    for (uint64_t r; sweeps.next(r);) visit(static_cast<uint32_t>(r));
  }

  Context& cx_;
  const Kernel& k_;
  const ir::DominatorTree& cfg_;
  Scope scope_;
  const ThreadLayout& layout_;
  ThreadEval* eval_;
  Divergence d_;
  Sweeps sweeps_;
  std::vector<ValueId> taint_;       // per inst: reads a value leaving a divergently-exited loop
  std::vector<ValueId> paramTaint_;  // per block param: receives such a value on an exit edge
  std::vector<ValueId> joined_;      // per block: a join of a divergent branch (its params diverge)
  std::vector<bool> processed_;
  std::vector<bool> exited_;         // per strongly connected component: its exits are tainted
  std::vector<uint32_t> seen_;       // per block: stamp of the last search that reached it
  uint32_t stamp_ = 0;
};

}  // namespace

Uniformity analyzeUniformity(const Kernel& k, const ir::DominatorTree& cfg, const PostDominatorTree& pdom,
                             Scopes scopes) {
  Uniformity u;
  u.layout = ThreadLayout::of(k);
  Context cx(k, cfg, pdom);
  u.block = Solver(cx, Scope::Block, u.layout, nullptr).run();
  if (scopes == Scopes::BlockOnly) return u;
  ThreadEval eval(k, u.layout, [&](ValueId v) { return !u.block.value[v.index]; });
  u.warp = Solver(cx, Scope::Warp, u.layout, &eval).run();
  auto hasWarpgroupOp = [&] {
    for (const ir::Block& b : k.blocks)
      for (InstId id : b.insts)
        if (isWarpgroupOp(k.inst(id).op)) return true;
    return false;
  };
  if (hasWarpgroupOp()) u.warpgroup = Solver(cx, Scope::Warpgroup, u.layout, &eval).run();
  return u;
}

bool isWarpgroupOp(ir::Op op) {
  switch (op) {
    case Op::SetMaxNRegInc:
    case Op::SetMaxNRegDec:
    case Op::WgmmaFence:
    case Op::WgmmaCommit:
    case Op::WgmmaWait:
    case Op::WgmmaMma:
      return true;
    default:
      return false;
  }
}

std::string lineCol(ir::SourceLoc loc) { return std::to_string(loc.line) + ":" + std::to_string(loc.col); }

std::string describeSource(const Kernel& k, ValueId v) {
  const ir::Inst* in = definingInst(k, v);
  if (!in) return "'%" + ir::NameTable(k).value(v) + "'";
  std::string s(ir::info(in->op).name);
  for (Mod m : in->mods)
    if (m != Mod::None) s += "." + std::string(ir::modName(m));
  return s + " at " + lineCol(in->loc);
}

}  // namespace tn::passes
