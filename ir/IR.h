// The kernel IR: modules own kernels; kernels own blocks, instructions and values, all addressed by
// small typed indices (ValueId, BlockId, InstId). SSA with block parameters instead of phis.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "backends/bundle/Target.h"
#include "ir/Diagnostics.h"
#include "ir/Ops.h"
#include "ir/Type.h"

namespace tn::ir {

template <class Tag>
struct Id {
  static constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
  uint32_t index = kNone;
  constexpr Id() = default;
  constexpr explicit Id(uint32_t i) : index(i) {}
  constexpr bool valid() const { return index != kNone; }
  constexpr explicit operator bool() const { return valid(); }
  constexpr bool operator==(const Id&) const = default;
  constexpr auto operator<=>(const Id&) const = default;
};
using ValueId = Id<struct ValueTag>;
using BlockId = Id<struct BlockTag>;
using InstId = Id<struct InstTag>;

enum class DefKind : uint8_t { KernelParam, BlockParam, Inst };

struct ValueInfo {
  Type type;
  std::string name;  // without '%'; may be empty (the printer then numbers it)
  DefKind kind = DefKind::Inst;
  uint32_t owner = 0;  // kernel param index, BlockId or InstId, by kind
};

struct BlockCall {
  BlockId block;
  std::vector<ValueId> args;
};

struct Inst {
  Op op = Op::Ret;
  std::optional<Type> type;     // the annotated type T (absent for br/cbr/ret/bar.sync/...)
  std::optional<Type> srcType;  // S of `: S -> T` (cvt, bitcast)
  std::array<Mod, kModGroups> mods{};
  ValueId result;
  std::vector<ValueId> operands;
  uint64_t imm = 0;       // const: the value's bits; extract: the lane
  int32_t symbol = -1;    // shared.addr: index into Kernel::shared; call: into Module::functions
  std::vector<BlockCall> succs;  // br: 1, cbr: 2 (taken, not taken)
  SourceLoc loc;

  Mod mod(ModGroup g) const { return mods[static_cast<size_t>(g)]; }
  bool has(Mod m) const { return mods[static_cast<size_t>(modGroup(m))] == m; }
  void setMod(Mod m) { mods[static_cast<size_t>(modGroup(m))] = m; }
  void clearMod(ModGroup g) { mods[static_cast<size_t>(g)] = Mod::None; }
};

struct Block {
  std::string name;  // without '^'
  std::vector<ValueId> params;
  std::vector<InstId> insts;  // the last one is the terminator in a well-formed block
  SourceLoc loc;
};

struct KernelParam {
  ValueId value;
  unsigned align = 0;  // pointer params: guaranteed alignment in bytes (0 = unknown)
};

struct SharedDecl {
  std::string name;  // without '@'
  Type elem;
  uint64_t count = 0;  // elements; 0 with dynamic = true: extern, sized at launch
  bool dynamic = false;
  unsigned align = 4;
  SourceLoc loc;
  uint64_t bytes() const { return count * elem.bytes(); }
};

// A read-only table of constants a kernel looks up by index (`table @name: u32[N] = [...]`,
// `table.ld`): in PTX an initialized module-scope .global array. Elements are 16-, 32- or 64-bit
// unsigned or untyped; values holds each element's bits.
inline constexpr uint64_t kMaxTableElements = uint64_t{1} << 20;
// What a table may hold: u16, u32, u64, b16, b32 or b64.
inline bool isTableElement(Type t) { return !t.isVector() && (t.isBits() || (t.isInt() && !t.isSigned())) && t.bits() >= 16; }
struct TableDecl {
  std::string name;  // without '@'
  Type elem;
  std::vector<uint64_t> values;
  SourceLoc loc;
};

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
  unsigned total() const { return x * y * z; }
  bool operator==(const Dim3&) const = default;
};

// A kernel, or a device function (`func @name(...) -> T`, function = true): the same body of
// blocks, called from kernels with `call` and inlined into them by the inline pass.
struct Kernel {
  std::string name;
  bool function = false;
  std::optional<Type> returns;  // functions: the type `ret` passes back, if any
  std::vector<KernelParam> params;
  std::vector<SharedDecl> shared;
  std::vector<TableDecl> tables;
  std::optional<Dim3> reqntid;
  std::optional<Dim3> maxntid;
  // Hints to ptxas (PTX .minnctapersm / .maxnreg): at least this many blocks resident per SM,
  // which caps the registers per thread; at most this many registers per thread.
  std::optional<unsigned> minnctapersm;
  std::optional<unsigned> maxnreg;
  std::vector<Block> blocks;  // layout order; blocks[0] is the entry block
  std::vector<Inst> insts;    // pool, addressed by InstId (removed insts just leave blocks)
  std::vector<ValueInfo> values;
  SourceLoc loc;

  Inst& inst(InstId id) { return insts[id.index]; }
  const Inst& inst(InstId id) const { return insts[id.index]; }
  Block& block(BlockId id) { return blocks[id.index]; }
  const Block& block(BlockId id) const { return blocks[id.index]; }
  ValueInfo& value(ValueId id) { return values[id.index]; }
  const ValueInfo& value(ValueId id) const { return values[id.index]; }
  Type typeOf(ValueId id) const { return values[id.index].type; }

  ValueId addValue(Type t, std::string name, DefKind kind, uint32_t owner);
  ValueId addParam(Type t, std::string name, unsigned align = 0);
  BlockId addBlock(std::string name, SourceLoc loc = {});
  ValueId addBlockParam(BlockId b, Type t, std::string name);
  // Appends `in` to block b; gives it a result value of `resultType` when set.
  InstId append(BlockId b, Inst in, std::optional<Type> resultType = std::nullopt, std::string name = {});
  const Inst* terminator(BlockId b) const;
  int findShared(std::string_view name) const;
  int findTable(std::string_view name) const;
  // Drops blocks for which keep[b] is false and renumbers branch targets.
  void compactBlocks(const std::vector<bool>& keep);
};

using bundle::Target;

struct Module {
  Target target;           // sm_80 unless the text or the caller says otherwise
  unsigned ptx = 70;       // PTX ISA version x10
  std::vector<Kernel> kernels;
  std::vector<Kernel> functions;  // device functions, until the inline pass empties the list
  std::vector<std::string> files{""};  // SourceLoc::file indexes this; [0] = unknown

  uint32_t fileId(const std::string& name);
  const std::string& fileName(SourceLoc loc) const { return files[loc.file < files.size() ? loc.file : 0]; }
  Kernel* findKernel(std::string_view name);
  // Moves `from`'s kernels (and device functions) after this module's, their source locations
  // renumbered into this module's file table; the PTX ISA version becomes the higher of the two.
  // For one PTX module of kernels compiled one by one (`truenoc build`'s module per target).
  void absorb(Module&& from);
};

// Tensor-core fragments (docs/ir.md, "Tensor cores"): mma's A and B operands are 32-bit registers
// of packed elements; its accumulator holds f32 or s32 elements one per register, f16 two per b32.
inline constexpr Type kMmaAFragment = Type::of(Scalar::B32, 4);
inline constexpr Type kMmaBFragment = Type::of(Scalar::B32, 2);
Type mmaAccFragment(Scalar acc);
// Whether PTX has mma of this shape multiplying `in` elements into accumulator type `acc`; with an
// fp8 format (Mod::E4m3Mod, E5m2Mod) `in` is b8, the codes: m16n8k32 into f32 only.
bool mmaFormExists(Mod shape, Scalar in, Type acc, Mod fp8 = Mod::None);
// The fp8 format of an mma's or wgmma's B operand (Mod::E4m3Mod, E5m2Mod): the Fp8B group's where
// it has one (a mixed form), else A's, the Fp8 group's (Mod::None when the op has no format).
inline Mod fp8FormatOfB(const Inst& in) {
  switch (in.mod(ModGroup::Fp8B)) {
    case Mod::BE4m3Mod: return Mod::E4m3Mod;
    case Mod::BE5m2Mod: return Mod::E5m2Mod;
    default: return in.mod(ModGroup::Fp8);
  }
}

// The operand whose registers an instruction's result takes (wgmma.mma_async writes D in place
// of its accumulator, which has no other use), or -1: register assignment and the emitter tie them.
inline int tiedOperand(const Inst& in) { return in.op == Op::WgmmaMma && !in.operands.empty() ? 0 : -1; }

// Result type of an instruction under the table's result rule, or nullopt when none/invalid.
std::optional<Type> resultTypeFor(const Inst& in);

}  // namespace tn::ir
