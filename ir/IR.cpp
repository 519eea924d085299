#include "ir/IR.h"

#include <algorithm>

namespace tn::ir {

ValueId Kernel::addValue(Type t, std::string name, DefKind kind, uint32_t owner) {
  values.push_back({t, std::move(name), kind, owner});
  return ValueId(static_cast<uint32_t>(values.size() - 1));
}

ValueId Kernel::addParam(Type t, std::string name, unsigned align) {
  ValueId v = addValue(t, std::move(name), DefKind::KernelParam, static_cast<uint32_t>(params.size()));
  params.push_back({v, align});
  return v;
}

BlockId Kernel::addBlock(std::string name, SourceLoc l) {
  blocks.push_back({std::move(name), {}, {}, l});
  return BlockId(static_cast<uint32_t>(blocks.size() - 1));
}

ValueId Kernel::addBlockParam(BlockId b, Type t, std::string name) {
  ValueId v = addValue(t, std::move(name), DefKind::BlockParam, b.index);
  blocks[b.index].params.push_back(v);
  return v;
}

InstId Kernel::append(BlockId b, Inst in, std::optional<Type> resultType, std::string name) {
  InstId id(static_cast<uint32_t>(insts.size()));
  if (resultType) in.result = addValue(*resultType, std::move(name), DefKind::Inst, id.index);
  insts.push_back(std::move(in));
  blocks[b.index].insts.push_back(id);
  return id;
}

const Inst* Kernel::terminator(BlockId b) const {
  const Block& blk = blocks[b.index];
  if (blk.insts.empty()) return nullptr;
  const Inst& last = insts[blk.insts.back().index];
  return hasFlag(last.op, OF_TERMINATOR) ? &last : nullptr;
}

int Kernel::findShared(std::string_view n) const {
  for (size_t i = 0; i < shared.size(); ++i)
    if (shared[i].name == n) return static_cast<int>(i);
  return -1;
}

int Kernel::findTable(std::string_view n) const {
  for (size_t i = 0; i < tables.size(); ++i)
    if (tables[i].name == n) return static_cast<int>(i);
  return -1;
}

void Kernel::compactBlocks(const std::vector<bool>& keep) {
  std::vector<uint32_t> remap(blocks.size(), BlockId::kNone);
  std::vector<Block> kept;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (!keep[i]) continue;
    remap[i] = static_cast<uint32_t>(kept.size());
    kept.push_back(std::move(blocks[i]));
  }
  blocks = std::move(kept);
  for (size_t b = 0; b < blocks.size(); ++b) {
    for (ValueId p : blocks[b].params) values[p.index].owner = static_cast<uint32_t>(b);
    for (InstId i : blocks[b].insts)
      for (BlockCall& s : insts[i.index].succs) s.block = BlockId(remap[s.block.index]);
  }
}

uint32_t Module::fileId(const std::string& name) {
  for (size_t i = 0; i < files.size(); ++i)
    if (files[i] == name) return static_cast<uint32_t>(i);
  files.push_back(name);
  return static_cast<uint32_t>(files.size() - 1);
}

void Module::absorb(Module&& from) {
  std::vector<uint32_t> fileMap(from.files.size());
  for (size_t i = 0; i < from.files.size(); ++i) fileMap[i] = fileId(from.files[i]);
  auto remap = [&](SourceLoc& loc) { loc.file = loc.file < fileMap.size() ? fileMap[loc.file] : 0; };
  auto move = [&](std::vector<Kernel>& src, std::vector<Kernel>& dst) {
    for (Kernel& k : src) {
      remap(k.loc);
      for (Block& b : k.blocks) remap(b.loc);
      for (Inst& in : k.insts) remap(in.loc);
      for (SharedDecl& s : k.shared) remap(s.loc);
      for (TableDecl& t : k.tables) remap(t.loc);
      dst.push_back(std::move(k));
    }
    src.clear();
  };
  move(from.kernels, kernels);
  move(from.functions, functions);
  ptx = std::max(ptx, from.ptx);
}

Kernel* Module::findKernel(std::string_view name) {
  for (Kernel& k : kernels)
    if (k.name == name) return &k;
  return nullptr;
}

Type mmaAccFragment(Scalar acc) { return acc == Scalar::F16 ? Type::of(Scalar::B32, 2) : Type::of(acc, 4); }

bool mmaFormExists(Mod shape, Scalar in, Type acc, Mod fp8) {
  if (acc.isVector()) return false;
  if (fp8 != Mod::None || in == Scalar::B8)
    return fp8 != Mod::None && in == Scalar::B8 && shape == Mod::M16n8k32 && acc.scalar == Scalar::F32;
  switch (shape) {
    case Mod::M16n8k16:
      return (in == Scalar::BF16 && acc.scalar == Scalar::F32) || (in == Scalar::F16 && acc.scalar == Scalar::F32) ||
             (in == Scalar::F16 && acc.scalar == Scalar::F16);
    case Mod::M16n8k8: return in == Scalar::F32 && acc.scalar == Scalar::F32;
    case Mod::M16n8k32: return (in == Scalar::S8 || in == Scalar::U8) && acc.scalar == Scalar::S32;
    default: return false;
  }
}

std::optional<Type> resultTypeFor(const Inst& in) {
  const OpInfo& oi = info(in.op);
  if (oi.result == '-') return std::nullopt;
  if (oi.result == 'p') return Type::pred();
  if (oi.result == 'U') return Type::u32();
  if (!in.type) return std::nullopt;
  Type t = *in.type;
  switch (oi.result) {
    case 'T': return t;
    case 'E': return t.element();
    case 'F': return mmaAccFragment(t.scalar);
    case 'B': return Type::of(Scalar::B32);
    case 'W': {
      auto w = intType(t.bits() * 2, t.isSigned() ? 's' : 'u');
      return w;
    }
    default: return std::nullopt;
  }
}

}  // namespace tn::ir
