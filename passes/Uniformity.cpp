#include "passes/Uniformity.h"

#include <algorithm>

#include "ir/Printer.h"

namespace tn::passes {

using ir::Mod;
using ir::Op;

// ---- uniformity -------------------------------------------------------------------------------

namespace {

class Solver {
 public:
  Solver(const Kernel& k, const ir::DominatorTree& cfg, const std::vector<std::vector<BlockId>>& cdeps, Scope scope,
         const ThreadLayout& layout, ThreadEval* eval)
      : k_(k), cfg_(cfg), cdeps_(cdeps), scope_(scope), layout_(layout), eval_(eval) {
    size_t nv = k.values.size(), nb = k.blocks.size();
    d_.value.assign(nv, false);
    d_.origin.assign(nv, ValueId());
    d_.branch.assign(nb, false);
    d_.control.assign(nb, false);
    d_.cause.assign(nb, BlockId());
    taint_.assign(k.insts.size(), ValueId());
    paramTaint_.assign(nv, ValueId());
    joined_.assign(nb, ValueId());
    processed_.assign(nb, false);
  }

  Divergence run() {
    for (bool changed = true; changed;) {
      changed = false;
      for (BlockId b : cfg_.reversePostOrder()) changed |= visitBlock(b);
      for (BlockId b : cfg_.reversePostOrder()) changed |= visitBranch(b);
    }
    computeControl();
    return std::move(d_);
  }

 private:
  // Marks v divergent with origin o; true when that is new.
  bool mark(ValueId v, ValueId o) {
    if (d_.value[v.index]) return false;
    d_.value[v.index] = true;
    d_.origin[v.index] = o.valid() ? o : v;
    return true;
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
        return scope_ == Scope::Block;
      case Op::ShflSync:
        if (scope_ == Scope::Warp && in.has(Mod::Idx) && in.operands.size() > 1 && !d_.value[in.operands[1].index])
          return false;
        return true;
      default:
        return ir::hasFlag(in.op, ir::OF_DIVERGENT);
    }
  }

  // The thread evaluator shows v is the same in every thread of each warp.
  bool warpConstant(ValueId v) const {
    if (scope_ != Scope::Warp || !eval_ || !layout_.known) return false;
    const ThreadValue* tv = eval_->get(v);
    if (!tv) return false;
    for (size_t base = 0; base < tv->perThread.size(); base += 32) {
      size_t end = std::min(base + 32, tv->perThread.size());
      for (size_t i = base + 1; i < end; ++i)
        if (tv->perThread[i] != tv->perThread[base]) return false;
    }
    return true;
  }

  bool visitBlock(BlockId b) {
    bool changed = false;
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
      if (why.valid()) changed |= mark(p, why);
    }
    for (InstId id : blk.insts) {
      const ir::Inst& in = k_.inst(id);
      if (!in.result || d_.value[in.result.index]) continue;
      ValueId why;
      if (isSource(in)) why = in.result;
      for (ValueId o : in.operands)
        if (!why.valid() && d_.value[o.index]) why = d_.origin[o.index];
      // The evaluator sees data only: it can clear data divergence, not a loop-exit taint.
      bool tainted = taint_[id.index].valid();
      if (!why.valid() && tainted) why = taint_[id.index];
      if (why.valid() && (tainted || !warpConstant(in.result))) changed |= mark(in.result, why);
    }
    return changed;
  }

  // A newly divergent branch: its joins and, if it decides a loop exit, the loop's outputs.
  bool visitBranch(BlockId b) {
    const ir::Block& blk = k_.block(b);
    if (blk.insts.empty() || processed_[b.index]) return false;
    InstId tid = blk.insts.back();
    const ir::Inst& term = k_.inst(tid);
    if (term.op != Op::Cbr || term.operands.empty()) return false;
    ValueId cond = term.operands[0];
    ValueId why = d_.value[cond.index] ? d_.origin[cond.index] : taint_[tid.index];
    if (!why.valid()) return false;
    processed_[b.index] = true;
    d_.branch[b.index] = true;
    for (BlockId j : joins(b, term))
      if (!joined_[j.index].valid()) joined_[j.index] = why;
    loopExits(b, why);
    return true;
  }

  // Blocks reached from the two successors of b by paths that only meet there (labels
  // propagated in reverse post-order; a block whose labelled predecessors disagree is a join).
  std::vector<BlockId> joins(BlockId b, const ir::Inst& term) const {
    std::vector<BlockId> out;
    if (term.succs[0].block == term.succs[1].block) return {term.succs[0].block};
    size_t nb = k_.blocks.size();
    constexpr uint32_t kNone = BlockId::kNone;
    std::vector<uint32_t> label(nb, kNone);
    std::vector<bool> isJoin(nb, false);
    std::vector<bool> from = reachableFrom(k_, cfg_, b);
    for (const ir::BlockCall& c : term.succs)
      if (c.block != b) label[c.block.index] = c.block.index;
    for (bool changed = true; changed;) {
      changed = false;
      for (BlockId x : cfg_.reversePostOrder()) {
        if (x == b || !from[x.index] || x == term.succs[0].block || x == term.succs[1].block) continue;
        uint32_t want = kNone;
        bool disagree = false;
        for (BlockId p : cfg_.predecessors(x)) {
          if (p == b || label[p.index] == kNone) continue;
          if (want == kNone) want = label[p.index];
          else if (want != label[p.index]) disagree = true;
        }
        if (disagree || isJoin[x.index]) {
          isJoin[x.index] = true;
          want = x.index;
        }
        if (want != label[x.index]) {
          label[x.index] = want;
          changed = true;
        }
      }
    }
    // A successor that the other successor's paths also reach is a join as well.
    for (const ir::BlockCall& c : term.succs) {
      BlockId s = c.block;
      for (BlockId p : cfg_.predecessors(s))
        if (p != b && label[p.index] != BlockId::kNone && label[p.index] != s.index) isJoin[s.index] = true;
    }
    for (size_t x = 0; x < nb; ++x)
      if (isJoin[x]) out.push_back(BlockId(static_cast<uint32_t>(x)));
    return out;
  }

  // If b sits on a cycle that some threads leave because of b's decision (directly, or from a
  // block whose execution depends on it), values of the cycle read after it are divergent.
  void loopExits(BlockId b, ValueId why) {
    std::vector<bool> cycle = cycleThrough(k_, cfg_, b);
    if (!cycle[b.index]) return;
    // Blocks whose execution depends on b, transitively.
    size_t nb = k_.blocks.size();
    std::vector<bool> influenced(nb, false);
    influenced[b.index] = true;
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t x = 0; x < nb; ++x) {
        if (influenced[x]) continue;
        for (BlockId d : cdeps_[x])
          if (influenced[d.index]) {
            influenced[x] = changed = true;
            break;
          }
      }
    }
    bool exits = false;
    for (size_t x = 0; x < nb && !exits; ++x) {
      if (!cycle[x] || !influenced[x]) continue;
      for (BlockId s : cfg_.successors(BlockId(static_cast<uint32_t>(x))))
        if (!cycle[s.index]) exits = true;
    }
    if (!exits) return;
    InstPositions pos(k_);
    auto inCycle = [&](ValueId v) {
      BlockId db = definingBlock(k_, v, pos);
      return db.valid() && cycle[db.index] && k_.value(v).kind != ir::DefKind::KernelParam;
    };
    for (size_t x = 0; x < nb; ++x) {
      const ir::Block& blk = k_.blocks[x];
      for (InstId id : blk.insts) {
        const ir::Inst& in = k_.inst(id);
        if (!cycle[x]) {
          for (ValueId o : in.operands)
            if (inCycle(o) && !taint_[id.index].valid()) taint_[id.index] = why;
          for (const ir::BlockCall& c : in.succs)
            for (ValueId a : c.args)
              if (inCycle(a) && !taint_[id.index].valid()) taint_[id.index] = why;
          continue;
        }
        // Arguments leaving the cycle along an exit edge.
        for (const ir::BlockCall& c : in.succs) {
          if (cycle[c.block.index]) continue;
          const ir::Block& target = k_.block(c.block);
          for (size_t i = 0; i < c.args.size() && i < target.params.size(); ++i)
            if (inCycle(c.args[i]) && !paramTaint_[target.params[i].index].valid())
              paramTaint_[target.params[i].index] = why;
        }
      }
      // A branch outside the cycle reading a cycle value passes the taint to its targets' params.
      if (!cycle[x] && !blk.insts.empty() && taint_[blk.insts.back().index].valid()) {
        for (const ir::BlockCall& c : k_.inst(blk.insts.back()).succs)
          for (size_t i = 0; i < c.args.size() && i < k_.block(c.block).params.size(); ++i)
            if (inCycle(c.args[i])) {
              ValueId p = k_.block(c.block).params[i];
              if (!paramTaint_[p.index].valid()) paramTaint_[p.index] = why;
            }
      }
    }
  }

  void computeControl() {
    for (bool changed = true; changed;) {
      changed = false;
      for (BlockId x : cfg_.reversePostOrder()) {
        if (d_.control[x.index]) continue;
        for (BlockId br : cdeps_[x.index]) {
          BlockId cause = d_.branch[br.index] ? br : d_.control[br.index] ? d_.cause[br.index] : BlockId();
          if (!cause.valid()) continue;
          d_.control[x.index] = true;
          d_.cause[x.index] = cause;
          changed = true;
          break;
        }
      }
    }
  }

  const Kernel& k_;
  const ir::DominatorTree& cfg_;
  const std::vector<std::vector<BlockId>>& cdeps_;
  Scope scope_;
  const ThreadLayout& layout_;
  ThreadEval* eval_;
  Divergence d_;
  std::vector<ValueId> taint_;       // per inst: reads a value leaving a divergently-exited loop
  std::vector<ValueId> paramTaint_;  // per block param: receives such a value on an exit edge
  std::vector<ValueId> joined_;      // per block: a join of a divergent branch (its params diverge)
  std::vector<bool> processed_;
};

}  // namespace

Uniformity analyzeUniformity(const Kernel& k, const ir::DominatorTree& cfg, const PostDominatorTree& pdom) {
  Uniformity u;
  u.layout = ThreadLayout::of(k);
  std::vector<std::vector<BlockId>> cdeps = controlDependences(k, cfg, pdom);
  u.block = Solver(k, cfg, cdeps, Scope::Block, u.layout, nullptr).run();
  ThreadEval eval(k, u.layout, [&](ValueId v) { return !u.block.value[v.index]; });
  u.warp = Solver(k, cfg, cdeps, Scope::Warp, u.layout, &eval).run();
  return u;
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
