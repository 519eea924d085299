#include "passes/Rewrite.h"

#include <algorithm>

namespace tn::passes {

void replaceAllUses(ir::Kernel& k, ir::ValueId from, ir::ValueId to) {
  for (ir::Block& b : k.blocks)
    for (ir::InstId id : b.insts) {
      ir::Inst& in = k.inst(id);
      std::replace(in.operands.begin(), in.operands.end(), from, to);
      for (ir::BlockCall& c : in.succs) std::replace(c.args.begin(), c.args.end(), from, to);
    }
}

ir::InstId createInst(ir::Kernel& k, ir::Inst in, std::string name) {
  ir::InstId id(static_cast<uint32_t>(k.insts.size()));
  if (auto rt = ir::resultTypeFor(in)) in.result = k.addValue(*rt, std::move(name), ir::DefKind::Inst, id.index);
  k.insts.push_back(std::move(in));
  return id;
}

void insertInst(ir::Kernel& k, ir::BlockId b, size_t pos, ir::InstId id) {
  std::vector<ir::InstId>& insts = k.block(b).insts;
  insts.insert(insts.begin() + static_cast<std::ptrdiff_t>(std::min(pos, insts.size())), id);
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
