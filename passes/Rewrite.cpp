#include "passes/Rewrite.h"

#include <algorithm>

namespace tn::passes {

void Replacements::rewrite(ir::Inst& in) const {
  for (ir::ValueId& v : in.operands) v = resolve(v);
  for (ir::BlockCall& c : in.succs)
    for (ir::ValueId& v : c.args) v = resolve(v);
}

void Replacements::rewriteAll(ir::Kernel& k) const {
  for (ir::Block& b : k.blocks)
    for (ir::InstId id : b.insts) rewrite(k.inst(id));
}

ir::InstId createInst(ir::Kernel& k, ir::Inst in, std::string name) {
  ir::InstId id(static_cast<uint32_t>(k.insts.size()));
  if (auto rt = ir::resultTypeFor(in)) in.result = k.addValue(*rt, std::move(name), ir::DefKind::Inst, id.index);
  k.insts.push_back(std::move(in));
  return id;
}

void Insertions::apply(ir::Kernel& k) {
  if (pending_.empty()) return;
  std::stable_sort(pending_.begin(), pending_.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<bool> target(k.insts.size(), false);
  for (const auto& [at, id] : pending_) target[at.index] = true;
  std::vector<ir::InstId> placed;
  for (ir::Block& b : k.blocks) {
    if (std::none_of(b.insts.begin(), b.insts.end(), [&](ir::InstId i) { return target[i.index]; })) continue;
    placed.clear();
    for (ir::InstId i : b.insts) {
      if (target[i.index]) {
        auto first = std::lower_bound(pending_.begin(), pending_.end(), i,
                                      [](const auto& p, ir::InstId x) { return p.first < x; });
        for (auto it = first; it != pending_.end() && it->first == i; ++it) placed.push_back(it->second);
      }
      placed.push_back(i);
    }
    b.insts = placed;
  }
  pending_.clear();
}

ir::Inst constInst(ir::Type t, uint64_t bits, ir::SourceLoc loc) {
  ir::Inst in;
  in.op = ir::Op::Const;
  in.type = t;
  in.imm = bits & lowMask(t.isPred() ? 1 : t.bits());
  in.loc = loc;
  return in;
}

void makeConst(ir::Inst& in, ir::Type t, uint64_t bits) {
  in.op = ir::Op::Const;
  in.type = t;
  in.srcType.reset();
  in.mods = {};
  in.operands.clear();
  in.succs.clear();
  in.symbol = -1;
  in.imm = bits & lowMask(t.isPred() ? 1 : t.bits());
}

void eraseInsts(ir::Kernel& k, const std::vector<bool>& dead) {
  for (ir::Block& b : k.blocks)
    std::erase_if(b.insts, [&](ir::InstId id) { return id.index < dead.size() && dead[id.index]; });
}

}  // namespace tn::passes
