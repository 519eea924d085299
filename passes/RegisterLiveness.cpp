// register-liveness -- does: liveness with block params, peak pressure per register class, register assignment (see .h).
// requires: SSA dominance (a verified kernel); computes CFG, dominators and liveness itself.
// guarantees: the IR is not changed; warns above 255 predicted registers; --remarks reports pressure and names.
#include "passes/RegisterLiveness.h"

#include <algorithm>

#include "ir/Dominance.h"
#include "ir/Printer.h"
#include "passes/Analysis.h"
#include "passes/Passes.h"

namespace tn::passes {

namespace {

// Colors of one class: first fit of `count` consecutive free registers.
struct ClassPool {
  std::vector<bool> busy;
  uint32_t take(uint8_t count) {
    for (uint32_t start = 0;; ++start) {
      bool fits = true;
      for (uint32_t i = start; i < start + count && fits; ++i) fits = i >= busy.size() || !busy[i];
      if (!fits) continue;
      if (busy.size() < start + count) busy.resize(start + count, false);
      for (uint32_t i = start; i < start + count; ++i) busy[i] = true;
      return start;
    }
  }
  void give(uint32_t start, uint8_t count) {
    for (uint32_t i = start; i < start + count && i < busy.size(); ++i) busy[i] = false;
  }
};

}  // namespace

// Per value, from each block that reads it before any definition there, backwards over the
// predecessors until its definition: the least solution of the dataflow equations, in time
// proportional to the live ranges (not values x blocks). Values are taken in increasing order,
// so every list comes out sorted.
Liveness computeLiveness(const ir::Kernel& k, const ir::DominatorTree& cfg) {
  size_t nb = k.blocks.size(), nv = k.values.size();
  Liveness lv;
  lv.liveIn.resize(nb);
  lv.liveOut.resize(nb);
  // The block defining each value (parameters, results; kernel parameters on the entry), and the
  // blocks reading it before defining it (operands and branch arguments).
  constexpr uint32_t kNone = BlockId::kNone;
  std::vector<uint32_t> defBlock(nv, kNone);
  std::vector<std::pair<uint32_t, uint32_t>> reads;  // (value, block), then grouped by value
  std::vector<uint32_t> stamp(nv, kNone);  // stamp[v] == b: v is defined or already read in b
  for (BlockId b : cfg.reversePostOrder()) {
    auto def = [&](ValueId v) {
      defBlock[v.index] = b.index;
      stamp[v.index] = b.index;
    };
    auto use = [&](ValueId v) {
      if (v.index >= nv || stamp[v.index] == b.index) return;
      stamp[v.index] = b.index;
      reads.push_back({v.index, b.index});
    };
    if (b.index == 0)
      for (const ir::KernelParam& p : k.params) def(p.value);
    for (ValueId p : k.block(b).params) def(p);
    for (InstId id : k.block(b).insts) {
      const ir::Inst& in = k.inst(id);
      for (ValueId v : in.operands) use(v);
      for (const ir::BlockCall& c : in.succs)
        for (ValueId v : c.args) use(v);
      if (in.result) def(in.result);
    }
  }
  std::vector<uint32_t> readerStart(nv + 1, 0), readers(reads.size());
  for (auto [v, b] : reads) ++readerStart[v + 1];
  for (size_t v = 0; v < nv; ++v) readerStart[v + 1] += readerStart[v];
  std::vector<uint32_t> at(readerStart.begin(), readerStart.end() - 1);
  for (auto [v, b] : reads) readers[at[v]++] = b;
  std::vector<uint32_t> inStamp(nb, kNone), outStamp(nb, kNone);
  std::vector<uint32_t> work;
  for (uint32_t v = 0; v < nv; ++v) {
    ValueId value(v);
    for (uint32_t i = readerStart[v]; i < readerStart[v + 1]; ++i) {
      uint32_t b = readers[i];
      inStamp[b] = v;
      lv.liveIn[b].push_back(value);
      work.push_back(b);
    }
    while (!work.empty()) {
      uint32_t x = work.back();
      work.pop_back();
      for (BlockId p : cfg.predecessors(BlockId(x))) {
        if (!cfg.reachable(p) || outStamp[p.index] == v) continue;
        outStamp[p.index] = v;
        lv.liveOut[p.index].push_back(value);
        if (defBlock[v] == p.index || inStamp[p.index] == v) continue;
        inStamp[p.index] = v;
        lv.liveIn[p.index].push_back(value);
        work.push_back(p.index);
      }
    }
  }
  return lv;
}

RegisterAssignment assignRegisters(const ir::Kernel& k, const RegisterFile& file) {
  RegisterAssignment ra;
  ra.regs.assign(k.values.size(), Reg{});
  if (k.blocks.empty()) return ra;
  ir::DominatorTree cfg(k);
  Liveness lv = computeLiveness(k, cfg);
  unsigned peakUnits = 0;

  // Constants take registers in the assignment (the emitter may materialize them) but not in
  // the prediction: ptxas folds them into instructions as immediates or rematerializes them.
  std::vector<bool> isConst(k.values.size(), false);
  for (const ir::Block& blk : k.blocks)
    for (InstId id : blk.insts)
      if (k.inst(id).op == ir::Op::Const && k.inst(id).result) isConst[k.inst(id).result.index] = true;

  // Per value, stamped with the block being walked: live-out of it, read in it (and where last).
  std::vector<uint32_t> outMark(k.values.size(), BlockId::kNone), lastMark(k.values.size(), BlockId::kNone);
  std::vector<size_t> lastAt(k.values.size(), 0);
  // Scratch shared by the blocks: each starts with empty pools.
  std::array<ClassPool, RegisterFile::kMaxClasses> pools;
  std::vector<ValueId> entryDefs, reads;
  auto walkBlock = [&](BlockId b) {
    for (ClassPool& p : pools) std::fill(p.busy.begin(), p.busy.end(), false);
    std::array<uint32_t, RegisterFile::kMaxClasses> live{};
    unsigned units = 0;  // 32-bit registers live now, constants excluded
    auto weight = [&](ValueId v, const Reg& r) { return isConst[v.index] ? 0u : r.count * file.units[r.cls]; };
    auto occupy = [&](ValueId v) {
      const Reg& r = ra.regs[v.index];
      if (!r.count) return;
      ClassPool& p = pools[r.cls];
      if (p.busy.size() < r.index + r.count) p.busy.resize(r.index + r.count, false);
      for (uint32_t i = r.index; i < r.index + r.count; ++i) p.busy[i] = true;
      live[r.cls] += r.count;
      units += weight(v, r);
    };
    auto release = [&](ValueId v) {
      const Reg& r = ra.regs[v.index];
      if (!r.count) return;
      pools[r.cls].give(r.index, r.count);
      live[r.cls] -= r.count;
      units -= weight(v, r);
    };
    auto define = [&](ValueId v) {
      ir::Type t = k.typeOf(v);
      Reg r{file.classOf(t), 0, t.lanes};
      r.index = pools[r.cls].take(r.count);
      ra.regs[v.index] = r;
      live[r.cls] += r.count;
      units += weight(v, r);
      ra.counts[r.cls] = std::max(ra.counts[r.cls], r.index + r.count);
    };
    // `extra`: the constants the current instruction reads, rematerialized right there.
    auto notePeak = [&](unsigned extra) {
      for (size_t c = 0; c < file.classes; ++c) ra.peak[c] = std::max(ra.peak[c], live[c]);
      peakUnits = std::max(peakUnits, units + extra);
    };

    for (ValueId v : lv.liveIn[b.index]) occupy(v);
    for (ValueId v : lv.liveOut[b.index]) outMark[v.index] = b.index;
    auto out = [&](ValueId v) { return outMark[v.index] == b.index; };

    // Last reader of each value in this block (instruction index); values read by nobody here
    // and not live-out die at their definition.
    const ir::Block& blk = k.block(b);
    auto read = [&](ValueId v, size_t i) {
      lastMark[v.index] = b.index;
      lastAt[v.index] = i;
    };
    for (size_t i = 0; i < blk.insts.size(); ++i) {
      const ir::Inst& ins = k.inst(blk.insts[i]);
      for (ValueId v : ins.operands) read(v, i);
      for (const ir::BlockCall& c : ins.succs)
        for (ValueId v : c.args) read(v, i);
    }
    auto lastReadAt = [&](ValueId v, size_t i) { return lastMark[v.index] == b.index && lastAt[v.index] == i; };
    auto deadOnArrival = [&](ValueId v) { return lastMark[v.index] != b.index && !out(v); };

    entryDefs.clear();
    if (b.index == 0)
      for (const ir::KernelParam& p : k.params) entryDefs.push_back(p.value);
    for (ValueId p : blk.params) entryDefs.push_back(p);
    for (ValueId v : entryDefs) define(v);
    notePeak(0);
    for (ValueId v : entryDefs)
      if (deadOnArrival(v)) release(v);

    for (size_t i = 0; i < blk.insts.size(); ++i) {
      const ir::Inst& ins = k.inst(blk.insts[i]);
      // A tied result (wgmma's D) takes its operand's registers when this is that operand's last
      // read: the registers pass from one value to the other without being freed.
      ValueId tied;
      if (int t = ir::tiedOperand(ins); t >= 0 && ins.result) {
        ValueId acc = ins.operands[t];
        if (ra.regs[acc.index].count && lastReadAt(acc, i) && !out(acc)) tied = acc;
      }
      if (tied) ra.regs[ins.result.index] = ra.regs[tied.index];
      else if (ins.result) define(ins.result);
      reads.assign(ins.operands.begin(), ins.operands.end());
      for (const ir::BlockCall& c : ins.succs) reads.insert(reads.end(), c.args.begin(), c.args.end());
      std::sort(reads.begin(), reads.end());
      reads.erase(std::unique(reads.begin(), reads.end()), reads.end());
      unsigned constants = 0;
      for (ValueId v : reads)
        if (isConst[v.index] && ra.regs[v.index].count)
          constants += ra.regs[v.index].count * file.units[ra.regs[v.index].cls];
      notePeak(constants);
      for (ValueId v : reads)
        if (lastReadAt(v, i) && !out(v) && v != ins.result && v != tied) release(v);
      if (ins.result && deadOnArrival(ins.result)) release(ins.result);
    }
  };

  std::vector<std::pair<BlockId, size_t>> stack{{BlockId(0), 0}};
  walkBlock(BlockId(0));
  while (!stack.empty()) {
    auto& [b, next] = stack.back();
    std::span<const BlockId> kids = cfg.children(b);
    if (next < kids.size()) {
      BlockId child = kids[next++];
      walkBlock(child);
      stack.push_back({child, 0});
      continue;
    }
    stack.pop_back();
  }
  ra.predicted = peakUnits;
  return ra;
}

bool registerLiveness(PassContext& ctx) {
  const RegisterFile& file = ctx.registers;
  for (size_t ki = 0; ki < ctx.module.kernels.size(); ++ki) {
    const ir::Kernel& k = ctx.module.kernels[ki];
    const RegisterAssignment& ra = ctx.registersOf(ki);
    if (ra.predicted > 255)
      ctx.report(ir::Severity::Warning, k.loc,
                 "kernel @" + k.name + " has about " + std::to_string(ra.predicted) +
                     " registers per thread live at its peak (in IR order); a thread can address 255, so ptxas "
                     "must reorder it or spill to local memory");
    if (!ctx.options.remarks) continue;
    std::string peak, declared;
    for (size_t c = 0; c < file.classes; ++c) {
      peak += (c ? ", " : "") + std::string(file.names[c]) + " " + std::to_string(ra.peak[c]);
      if (ra.counts[c])
        declared += " " + std::string(file.prefixes[c]) + "<" + std::to_string(ra.counts[c]) + ">";
    }
    ctx.report(ir::Severity::Note, k.loc,
               "kernel @" + k.name + ": peak live registers " + peak + "; declared" +
                   (declared.empty() ? " none" : declared) + "; predicted " + std::to_string(ra.predicted) +
                   " registers per thread");
    ir::NameTable names(k);
    std::string list;
    auto add = [&](ValueId v) {
      const Reg& r = ra.regs[v.index];
      if (!r.count) return;
      list += (list.empty() ? "" : ", ") + ("%" + names.value(v)) + " -> " + std::string(file.prefixes[r.cls]) +
              std::to_string(r.index);
      if (r.count > 1) list += ".." + std::string(file.prefixes[r.cls]) + std::to_string(r.index + r.count - 1);
    };
    for (const ir::KernelParam& p : k.params) add(p.value);
    for (const ir::Block& b : k.blocks) {
      for (ValueId p : b.params) add(p);
      for (InstId id : b.insts)
        if (k.inst(id).result) add(k.inst(id).result);
    }
    ctx.report(ir::Severity::Note, k.loc, "kernel @" + k.name + " registers: " + (list.empty() ? "none" : list));
  }
  return false;
}

}  // namespace tn::passes
