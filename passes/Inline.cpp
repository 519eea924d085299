// inline -- does: replaces every `call @f(args)` in the kernels by a copy of f's blocks (f's
// parameters become the arguments, each `ret %v` a branch to the call's continuation block,
// whose parameter is the call's result), then drops the module's device functions.
// requires: a verified module (calls name existing functions, no recursion).
// guarantees: no call and no function is left; every other pass may assume none. Cloned
// instructions keep their source locations (the function's lines in the .tir file).
#include <algorithm>
#include <string>
#include <unordered_set>

#include "passes/Passes.h"

namespace tn::passes {

namespace {

using ir::BlockId;
using ir::InstId;
using ir::ValueId;

class Inliner {
 public:
  Inliner(ir::Kernel& k, const ir::Module& m) : k_(k), m_(m) {
    for (const ir::Block& b : k.blocks) blockNames_.insert(b.name);
  }

  // Inlines the call at position `pos` of block `b`; returns the blocks it added, in the order
  // they should follow `b`: the function's, then the continuation.
  std::vector<BlockId> inlineAt(BlockId b, size_t pos) {
    const ir::Inst call = k_.inst(k_.block(b).insts[pos]);
    const ir::Kernel& f = m_.functions[static_cast<size_t>(call.symbol)];

    // The continuation: what followed the call, with the call's result as its parameter.
    BlockId cont = k_.addBlock(freshBlockName(f.name + ".ret"), call.loc);
    {
      std::vector<InstId>& insts = k_.block(b).insts;
      k_.block(cont).insts.assign(insts.begin() + static_cast<std::ptrdiff_t>(pos) + 1, insts.end());
      insts.resize(pos);
    }
    if (call.result) {
      ir::ValueInfo& r = k_.value(call.result);
      r.kind = ir::DefKind::BlockParam;
      r.owner = cont.index;
      k_.block(cont).params.push_back(call.result);
    }

    // f's blocks and values, renamed into the kernel. Results are allocated before any operand
    // is mapped: a use may come before its definition in block order.
    std::vector<ValueId> value(f.values.size());
    for (size_t i = 0; i < f.params.size(); ++i) value[f.params[i].value.index] = call.operands[i];
    std::vector<BlockId> block(f.blocks.size());
    for (size_t fb = 0; fb < f.blocks.size(); ++fb) {
      const ir::Block& src = f.blocks[fb];
      block[fb] = k_.addBlock(freshBlockName(f.name + "." + src.name), src.loc);
      for (ValueId p : src.params) value[p.index] = k_.addBlockParam(block[fb], f.typeOf(p), f.value(p).name);
      for (InstId id : src.insts) {
        const ir::Inst& in = f.inst(id);
        if (in.result) value[in.result.index] = k_.addValue(f.typeOf(in.result), f.value(in.result).name, ir::DefKind::Inst, 0);
      }
    }
    for (size_t fb = 0; fb < f.blocks.size(); ++fb) {
      for (InstId id : f.blocks[fb].insts) {
        ir::Inst in = f.inst(id);
        for (ValueId& v : in.operands) v = value[v.index];
        for (ir::BlockCall& s : in.succs) {
          s.block = block[s.block.index];
          for (ValueId& v : s.args) v = value[v.index];
        }
        if (in.op == ir::Op::Ret) {
          in.op = ir::Op::Br;
          in.succs = {ir::BlockCall{cont, in.operands}};
          in.operands.clear();
        }
        if (in.result) in.result = value[in.result.index];
        place(block[fb], std::move(in));
      }
    }

    ir::Inst jump;
    jump.op = ir::Op::Br;
    jump.loc = call.loc;
    jump.succs = {ir::BlockCall{block[0], {}}};
    place(b, std::move(jump));
    block.push_back(cont);
    return block;
  }

 private:
  void place(BlockId b, ir::Inst in) {
    InstId id(static_cast<uint32_t>(k_.insts.size()));
    if (in.result) k_.value(in.result).owner = id.index;
    k_.insts.push_back(std::move(in));
    k_.block(b).insts.push_back(id);
  }

  std::string freshBlockName(const std::string& want) {
    std::string name = want;
    for (unsigned n = 1; blockNames_.contains(name); ++n) name = want + "." + std::to_string(n);
    blockNames_.insert(name);
    return name;
  }

  ir::Kernel& k_;
  const ir::Module& m_;
  std::unordered_set<std::string> blockNames_;
};

// Puts the blocks in the order `layout` lists them (a permutation of their indices).
void relayout(ir::Kernel& k, const std::vector<uint32_t>& layout) {
  std::vector<uint32_t> position(layout.size());
  std::vector<ir::Block> blocks;
  blocks.reserve(layout.size());
  for (size_t i = 0; i < layout.size(); ++i) {
    position[layout[i]] = static_cast<uint32_t>(i);
    blocks.push_back(std::move(k.blocks[layout[i]]));
  }
  k.blocks = std::move(blocks);
  for (size_t b = 0; b < k.blocks.size(); ++b) {
    for (ValueId p : k.blocks[b].params) k.value(p).owner = static_cast<uint32_t>(b);
    for (InstId i : k.blocks[b].insts)
      for (ir::BlockCall& s : k.inst(i).succs) s.block = BlockId(position[s.block.index]);
  }
}

}  // namespace

bool inlineFunctions(ir::Module& m, ir::Diagnostics& diags) {
  unsigned before = diags.errors();
  auto report = [&](ir::SourceLoc loc, std::string message) {
    diags.report(ir::Severity::Error, m.fileName(loc), loc, std::move(message));
  };
  // Bounds a call graph the verifier did not see (recursion never ends): far above any real kernel.
  constexpr size_t kMaxInlined = 100000;
  for (ir::Kernel& k : m.kernels) {
    Inliner inliner(k, m);
    size_t inlined = 0;
    std::vector<uint32_t> layout(k.blocks.size());  // each inlined body right after its call
    for (uint32_t b = 0; b < layout.size(); ++b) layout[b] = b;
    // Blocks added by inlining are appended, so this walk also inlines the calls they contain.
    for (uint32_t b = 0; b < k.blocks.size(); ++b) {
      for (size_t pos = 0; pos < k.blocks[b].insts.size(); ++pos) {
        const ir::Inst& in = k.inst(k.blocks[b].insts[pos]);
        if (in.op != ir::Op::Call) continue;
        if (in.symbol < 0 || static_cast<size_t>(in.symbol) >= m.functions.size()) {
          report(in.loc, "inline: 'call' names no function of the module");
          return false;
        }
        if (++inlined > kMaxInlined) {
          report(in.loc, "inline: more than " + std::to_string(kMaxInlined) + " calls inlined into kernel '@" + k.name +
                             "' (recursive functions?)");
          return false;
        }
        std::vector<BlockId> added = inliner.inlineAt(BlockId(b), pos);
        auto at = std::find(layout.begin(), layout.end(), b) + 1;
        for (BlockId a : added) at = layout.insert(at, a.index) + 1;
      }
    }
    if (inlined) relayout(k, layout);
  }
  m.functions.clear();
  return diags.errors() == before;
}

bool inlineCalls(PassContext& ctx) {
  if (ctx.module.functions.empty()) return false;
  inlineFunctions(ctx.module, ctx.diags);
  return true;
}

}  // namespace tn::passes
