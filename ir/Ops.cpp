#include "ir/Ops.h"

#include <array>

namespace tn::ir {

namespace {
constexpr OpInfo kOps[] = {
#define OP(Id, Name, Operands, Result, Types, Flags, Mods, Required, MinSM, MinPTX) \
  {Name, Operands, Result, Types, Flags, Mods, Required, MinSM, MinPTX},
#include "ir/Ops.def"
};

constexpr TypeGate kGates[] = {
#define TYPE_GATE(OpId, Which, S, MinSM, MinPTX) {Op::OpId, Which, Scalar::S, MinSM, MinPTX},
#include "ir/Ops.def"
};

struct ModInfo {
  std::string_view name;
  ModGroup group;
};
constexpr ModInfo kMods[] = {
    {"", ModGroup::Count},
#define MOD(Id, Text, Group) {Text, ModGroup::Group},
#include "ir/Ops.def"
};

constexpr std::string_view kGroupNames[] = {
#define MODGROUP(Id) #Id,
#include "ir/Ops.def"
};
}  // namespace

const OpInfo& info(Op op) { return kOps[static_cast<size_t>(op)]; }
std::span<const OpInfo> allOps() { return kOps; }
std::span<const TypeGate> typeGates() { return kGates; }

std::optional<Op> opByName(std::string_view name) {
  for (size_t i = 0; i < std::size(kOps); ++i)
    if (kOps[i].name == name) return static_cast<Op>(i);
  return std::nullopt;
}

std::string_view modName(Mod m) { return kMods[static_cast<size_t>(m)].name; }
ModGroup modGroup(Mod m) { return kMods[static_cast<size_t>(m)].group; }
std::string_view modGroupName(ModGroup g) { return kGroupNames[static_cast<size_t>(g)]; }

std::optional<Mod> modByName(std::string_view name) {
  for (size_t i = 1; i < std::size(kMods); ++i)
    if (kMods[i].name == name) return static_cast<Mod>(i);
  return std::nullopt;
}

bool typeInClasses(Type t, uint32_t mask) {
  if (t.isVector()) {
    if (!(mask & TC_VEC)) return false;
    return !t.isPtr() && t.scalar != Scalar::Pred;
  }
  Scalar s = t.scalar;
  unsigned bits = t.bits();
  if ((mask & TC_I) && t.isInt()) return true;
  if ((mask & TC_B) && t.isBits()) return true;
  if ((mask & TC_F) && t.isFloat()) return true;
  if ((mask & TC_P) && t.isPred()) return true;
  if ((mask & TC_PTR) && t.isPtr()) return true;
  if ((mask & TC_U32) && s == Scalar::U32) return true;
  if ((mask & TC_SINT) && t.isSigned()) return true;
  if ((mask & TC_F32) && s == Scalar::F32) return true;
  if ((mask & TC_F64) && s == Scalar::F64) return true;
  if ((mask & TC_I16) && t.isInt() && bits == 16) return true;
  if ((mask & TC_I32) && t.isInt() && bits == 32) return true;
  if ((mask & TC_B16) && (t.isInt() || t.isBits()) && bits == 16) return true;
  if ((mask & TC_B32) && (t.isInt() || t.isBits()) && bits == 32) return true;
  if ((mask & TC_B64) && (t.isInt() || t.isBits()) && bits == 64) return true;
  if ((mask & TC_32) && !t.isPtr() && bits == 32) return true;
  return false;
}

}  // namespace tn::ir
