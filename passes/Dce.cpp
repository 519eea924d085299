// dce -- does: drops unreachable blocks, unneeded pure ops and block params (mark and sweep), tables no
//   table.ld reads; same-edge cbr -> br.
// requires: branch targets naming existing blocks; nothing else.
// guarantees: only OF_PURE ops and unused block parameters disappear; invalidates the CFG when it drops blocks.
#include <algorithm>

#include "ir/Dominance.h"
#include "passes/Analysis.h"
#include "passes/Passes.h"
#include "passes/Rewrite.h"

namespace tn::passes {

namespace {

// Drops the tables that no table.ld of the kernel's blocks reads, renumbering the others' reads.
bool dropUnreadTables(ir::Kernel& k) {
  std::vector<bool> read(k.tables.size(), false);
  for (const ir::Block& b : k.blocks)
    for (ir::InstId id : b.insts) {
      const ir::Inst& in = k.inst(id);
      if (in.op == ir::Op::TableLd && in.symbol >= 0 && static_cast<size_t>(in.symbol) < read.size()) read[in.symbol] = true;
    }
  if (std::find(read.begin(), read.end(), false) == read.end()) return false;
  std::vector<int32_t> renumbered(k.tables.size(), -1);
  std::vector<ir::TableDecl> kept;
  for (size_t t = 0; t < k.tables.size(); ++t)
    if (read[t]) {
      renumbered[t] = static_cast<int32_t>(kept.size());
      kept.push_back(std::move(k.tables[t]));
    }
  k.tables = std::move(kept);
  for (ir::Inst& in : k.insts)  // the pool: instructions removed earlier keep no stale index
    if (in.op == ir::Op::TableLd && in.symbol >= 0 && static_cast<size_t>(in.symbol) < renumbered.size())
      in.symbol = renumbered[in.symbol];
  return true;
}

bool dceKernel(ir::Kernel& k) {
  bool changed = false;
  ir::DominatorTree cfg(k);
  std::vector<bool> keep(k.blocks.size());
  for (size_t b = 0; b < k.blocks.size(); ++b) keep[b] = cfg.reachable(BlockId(static_cast<uint32_t>(b)));
  if (std::find(keep.begin(), keep.end(), false) != keep.end()) {
    k.compactBlocks(keep);
    changed = true;
  }

  // A cbr whose edges go to the same block with the same arguments does not branch.
  for (ir::Block& b : k.blocks) {
    if (b.insts.empty()) continue;
    ir::Inst& term = k.inst(b.insts.back());
    if (term.op != ir::Op::Cbr || term.succs.size() != 2) continue;
    if (term.succs[0].block != term.succs[1].block || term.succs[0].args != term.succs[1].args) continue;
    term.op = ir::Op::Br;
    term.operands.clear();
    term.succs.pop_back();
    changed = true;
  }

  // Mark: side-effecting instructions are roots; a live block parameter makes the matching
  // argument of every branch to its block live.
  std::vector<bool> live(k.values.size(), false);
  std::vector<ValueId> work;
  auto need = [&](ValueId v) {
    if (v.index < live.size() && !live[v.index]) {
      live[v.index] = true;
      work.push_back(v);
    }
  };
  // Branches into each block, to find the arguments of a live parameter.
  std::vector<std::vector<ir::InstId>> branchesTo(k.blocks.size());
  for (ir::Block& b : k.blocks)
    for (ir::InstId id : b.insts) {
      const ir::Inst& in = k.inst(id);
      for (const ir::BlockCall& c : in.succs) {
        if (c.block.index >= k.blocks.size()) continue;
        std::vector<ir::InstId>& into = branchesTo[c.block.index];
        if (into.empty() || into.back() != id) into.push_back(id);
      }
      if (!ir::hasFlag(in.op, ir::OF_PURE))
        for (ValueId v : in.operands) need(v);
    }
  while (!work.empty()) {
    ValueId v = work.back();
    work.pop_back();
    const ir::ValueInfo& vi = k.value(v);
    if (vi.kind == ir::DefKind::Inst) {
      if (const ir::Inst* def = definingInst(k, v))
        for (ValueId o : def->operands) need(o);
    } else if (vi.kind == ir::DefKind::BlockParam && vi.owner < k.blocks.size()) {
      const ir::Block& blk = k.blocks[vi.owner];
      size_t slot = std::find(blk.params.begin(), blk.params.end(), v) - blk.params.begin();
      for (ir::InstId id : branchesTo[vi.owner])
        for (const ir::BlockCall& c : k.inst(id).succs)
          if (c.block.index == vi.owner && slot < c.args.size()) need(c.args[slot]);
    }
  }

  // Sweep.
  std::vector<bool> dead(k.insts.size(), false);
  bool anyDead = false;
  for (ir::Block& b : k.blocks)
    for (ir::InstId id : b.insts) {
      const ir::Inst& in = k.inst(id);
      if (ir::hasFlag(in.op, ir::OF_PURE) && in.result && !live[in.result.index]) dead[id.index] = anyDead = true;
    }
  if (anyDead) {
    eraseInsts(k, dead);
    changed = true;
  }
  for (size_t b = 0; b < k.blocks.size(); ++b) {
    std::vector<ValueId>& params = k.blocks[b].params;
    std::vector<bool> drop(params.size());
    bool any = false;
    for (size_t i = 0; i < params.size(); ++i) any |= (drop[i] = !live[params[i].index]);
    if (!any) continue;
    changed = true;
    for (ir::InstId id : branchesTo[b])
      for (ir::BlockCall& c : k.inst(id).succs) {
        if (c.block.index != b) continue;
        std::vector<ValueId> kept;
        for (size_t i = 0; i < c.args.size(); ++i)
          if (i >= drop.size() || !drop[i]) kept.push_back(c.args[i]);
        c.args = std::move(kept);
      }
    std::vector<ValueId> kept;
    for (size_t i = 0; i < params.size(); ++i)
      if (!drop[i]) kept.push_back(params[i]);
    params = std::move(kept);
  }
  return dropUnreadTables(k) || changed;
}

}  // namespace

bool dce(PassContext& ctx) {
  return rewriteEachKernel(ctx, dceKernel);
}

}  // namespace tn::passes
