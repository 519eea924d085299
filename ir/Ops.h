// Op codes, modifiers and the per-op descriptors generated from ir/Ops.def.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "ir/Type.h"

namespace tn::ir {

enum class Op : uint8_t {
#define OP(Id, ...) Id,
#include "ir/Ops.def"
};

enum class ModGroup : uint8_t {
#define MODGROUP(Id) Id,
#include "ir/Ops.def"
  Count
};
constexpr size_t kModGroups = static_cast<size_t>(ModGroup::Count);

// Modifier keywords; None (0) means "group absent" in an instruction's modifier slots.
enum class Mod : uint8_t {
  None,
#define MOD(Id, Text, Group) Id,
#include "ir/Ops.def"
};

// Bit masks of modifier groups, named MG_<Group>.
enum : uint32_t {
#define MODGROUP(Id) MG_##Id = 1u << static_cast<unsigned>(ModGroup::Id),
#include "ir/Ops.def"
};

// Classes of the annotated type T.
enum : uint32_t {
  TC_NONE = 0,
  TC_I = 1u << 0,     // u8..u64, s8..s64
  TC_B = 1u << 1,     // b8..b64
  TC_F = 1u << 2,     // f16, bf16, f32, f64
  TC_P = 1u << 3,     // pred
  TC_PTR = 1u << 4,   // pointers
  TC_VEC = 1u << 5,   // vectors of 2 or 4 lanes (of any non-pred scalar), and the wide f32 ones
  TC_U32 = 1u << 6,   // exactly u32
  TC_SINT = 1u << 7,  // s8..s64
  TC_F32 = 1u << 8,   // exactly f32
  TC_F64 = 1u << 9,   // exactly f64
  TC_I16 = 1u << 10,  // u16/s16
  TC_I32 = 1u << 11,  // u32/s32
  TC_B32 = 1u << 12,  // b32 (also u32/s32)
  TC_B64 = 1u << 13,  // b64 (also u64/s64)
  TC_32 = 1u << 14,   // any 32-bit scalar: b32/u32/s32/f32
  TC_B16 = 1u << 15,  // b16 (also u16/s16)
};

// Op flags.
enum : uint32_t {
  OF_PURE = 1u << 0,        // no side effects: may be removed when unused, CSE'd
  OF_COMM = 1u << 1,        // commutative in its first two operands
  OF_MEMREAD = 1u << 2,
  OF_MEMWRITE = 1u << 3,
  OF_BARRIER = 1u << 4,     // block-wide synchronization
  OF_DIVERGENT = 1u << 5,   // result may differ between threads of a block
  OF_CONVERGENT = 1u << 6,  // must not be moved across control flow
  OF_TERMINATOR = 1u << 7,
  OF_SYMBOL = 1u << 8,      // carries @symbol (a shared-memory declaration, or table.ld's table)
  OF_IMM = 1u << 9,         // carries an immediate (const value, extract lane)
  OF_VARIADIC = 1u << 10,   // operand count = lanes of T
  OF_SRCTYPE = 1u << 11,    // annotated as `: S -> T`
  OF_OPTLAST = 1u << 12,    // the last operand letter may be left out (cp.async's src-size)
  OF_SM90A = 1u << 13,      // exists on sm_90a only (an arch-specific op: not on sm_90, nor on sm_100)
};

struct OpInfo {
  std::string_view name;
  std::string_view operands;  // see OperandRule letters in docs/ir.md
  char result;
  uint32_t types;
  uint32_t flags;
  uint32_t mods;
  uint32_t required;
  unsigned minSM;
  unsigned minPTX;  // x10: 78 = PTX ISA 7.8
};

struct TypeGate {
  Op op;
  char which;  // 'T' annotated type, 'S' source type
  Scalar scalar;
  unsigned minSM;
  unsigned minPTX;
};

const OpInfo& info(Op op);
std::span<const OpInfo> allOps();
std::span<const TypeGate> typeGates();
std::optional<Op> opByName(std::string_view name);

std::string_view modName(Mod m);
ModGroup modGroup(Mod m);
std::string_view modGroupName(ModGroup g);
// All modifiers sharing a spelling (e.g. "add" is only an atom op); first match wins.
std::optional<Mod> modByName(std::string_view name);

// True when T belongs to one of the classes in `mask`.
bool typeInClasses(Type t, uint32_t mask);

inline bool hasFlag(Op op, uint32_t f) { return (info(op).flags & f) != 0; }
// Where the own literal of an OF_IMM op (other than const, whose value comes first) sits among its
// operands, as in PTX: cp.async's size after the two pointers, a named barrier's ID first, the
// others' after all `operands` of the instruction.
inline size_t literalPosition(Op op, size_t operands) {
  if (op == Op::CpAsync) return 2;
  if (op == Op::BarNamedSync || op == Op::BarNamedArrive) return 0;
  return operands;
}

// Whether an instruction of op may have n operands (OF_VARIADIC ops: checked against T instead).
inline bool operandCountFits(const OpInfo& oi, size_t n) {
  return n == oi.operands.size() || ((oi.flags & OF_OPTLAST) && n + 1 == oi.operands.size());
}

}  // namespace tn::ir
