// Internals of the interpreter shared by its three parts: the decoder (InterpDecode.cpp: IR ->
// compact program), the lane loops that instantiate the op semantics of ir/LaneSemantics.h
// (InterpSemantics.cpp integer/bit/data movement, InterpFloat.cpp floating point and conversions)
// and the engine (InterpEngine.cpp: warps, reconvergence stack, memory, barriers, collectives,
// checks).
#pragma once

#include <bit>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backends/interp/Interp.h"
#include "ir/IR.h"

namespace tn::interp::detail {

constexpr uint32_t kWarpSize = 32;
constexpr uint32_t kFullMask = 0xFFFFFFFFu;
constexpr uint32_t kExitBlock = 0xFFFFFFFFu;  // the virtual exit that joins every `ret`

// A 64-bit pointer is (tag << 48) | offset: tag = buffer index + 1 (0 = no buffer), offset a
// signed 48-bit byte offset, so every access can be bounds-checked. Shared pointers are plain
// 32-bit offsets into the block's shared memory; a generic pointer into shared memory carries
// kSharedTag.
constexpr unsigned kTagShift = 48;
constexpr uint64_t kOffsetMask = (uint64_t{1} << kTagShift) - 1;
constexpr uint64_t kSharedTag = 0xFFFF;

inline uint64_t pointerTag(uint64_t p) { return p >> kTagShift; }
inline int64_t pointerOffset(uint64_t p) { return static_cast<int64_t>(p << (64 - kTagShift)) >> (64 - kTagShift); }

enum class Kind : uint8_t { Compute, Special, Ld, St, Atom, Bar, NamedBar, Shfl, Vote, Mma, Ldmatrix, Nop, Br, Cbr, Ret,
                            AsyncCopy, AsyncCommit, AsyncWait, Mbarrier, MbarWait, Elect,
                            Warpgroup,  // setmaxnreg, wgmma.fence/mma_async/commit_group/wait_group: the 4 warps of a warpgroup together
                            TmaLoad, TmaStore, BulkCommit, BulkWait, ProxyFence,
                            Table };  // table.ld: imm is the index in Program::tables

struct Code;
// A pure op over the lanes in `mask` of a warp's register file. Returns the first lane that
// faulted (integer division by zero) or -1.
using ComputeFn = int (*)(uint64_t* regs, uint32_t mask, const Code& k);

// Copies one block argument into a block parameter (slots = 64-bit register slots per lane).
struct Move {
  uint32_t dst, src, slots;
};

// A branch target: the block, where its code starts and the argument moves to perform.
struct Edge {
  uint32_t block = 0;
  uint32_t pc = 0;
  uint32_t moveBegin = 0, moveEnd = 0;
  bool staged = false;  // an argument is also a parameter of the target: copy through a buffer
};

// One decoded instruction. Register operands are slot indices: value v of a lane lives in
// regs[(slot(v) + i) * 32 + lane] for i < slots(v).
struct Code {
  Kind kind = Kind::Nop;
  ir::Op op = ir::Op::Ret;
  ir::Scalar scalar = ir::Scalar::Pred;     // element scalar of the annotated type T
  ir::Scalar srcScalar = ir::Scalar::Pred;  // S of cvt/bitcast
  uint8_t lanes = 1;                        // lanes of T
  ir::Mod round = ir::Mod::None;
  ir::Mod mode = ir::Mod::None;             // cmp, dim, shfl, vote, atom operation, mma shape, ldmatrix .trans, fp8 format
  ir::Mod modeB = ir::Mod::None;            // mma, wgmma over fp8 codes: B's format (ir::fp8FormatOfB)
  bool ftz = false;
  bool sat = false;
  ir::AddrSpace space = ir::AddrSpace::Generic;     // memory ops: space of the pointer operand
  ir::AddrSpace srcSpace = ir::AddrSpace::Generic;  // bitcast between pointers
  uint8_t bytes = 0;                                // memory ops: access size (cp.async: cp-size)
  bool srcSize = false;                             // cp.async: src[2] holds a src-size
  bool isVolatile = false;                          // ld/st .volatile: not a data race (PTX memory model)
  bool nc = false;                                  // ld.nc: the memory must not be written during the launch
  ComputeFn fn = nullptr;
  uint32_t dst = 0;
  uint32_t src[6] = {0, 0, 0, 0, 0, 0};
  uint64_t imm = 0;
  uint32_t inst = 0;   // InstId, for diagnostics
  uint32_t block = 0;  // the block this instruction ends (branches)
  Edge edge[2];
  uint8_t nsrc = 0;    // register operands in src (at most 6)
  bool wgWrite = false;  // writes the accumulator or A registers of some wgmma.mma_async
  uint8_t wgmma = 0;     // wgmma.mma_async: kWgTransA | kWgTransB | kWgRegA
};
constexpr uint8_t kWgTransA = 1, kWgTransB = 2, kWgRegA = 4;

struct SharedArray {
  std::string name;
  uint32_t start = 0;
  uint64_t bytes = 0;  // static arrays; dynamic ones take their size from the launch
  bool dynamic = false;
};

struct ParamSlot {
  std::string name;
  ir::Type type;
  uint32_t slot = 0;
  uint32_t slots = 1;  // a vector wider than 8 bytes: more than one
};

struct Program {
  std::string kernel;
  std::vector<std::string> files;
  std::vector<ir::SourceLoc> locs;  // per InstId
  std::vector<ir::Op> ops;          // per InstId: its op, for diagnostics naming another instruction
  std::vector<Code> code;
  std::vector<Move> moves;
  std::vector<uint32_t> blockStart;  // per block: index of its first Code
  std::vector<uint32_t> ipdom;       // per block: immediate post-dominator or kExitBlock
  std::vector<uint8_t> reachesSync;  // per block: some path from it runs bar.sync or a warp collective
  uint32_t slots = 0;                // register slots per lane
  std::vector<std::pair<uint32_t, uint64_t>> constants;  // (slot, bits) preloaded in every warp
  std::vector<ParamSlot> params;
  std::vector<SharedArray> shared;  // static arrays in layout order, then the dynamic ones
  std::vector<ir::TableDecl> tables;  // the kernel's tables (table.ld), copied
  // Per register slot: for a ptr.shared value that every definition derives from one array's
  // shared.addr (through ptradd, selp, bitcast and block arguments), that array's index in
  // `shared`; -1 otherwise. An access through it must stay inside that array.
  std::vector<int32_t> sharedOrigin;
  // Per parameter (in `params` order): some plain st writes global memory through a pointer
  // derived from it. writesAnywhere: some st writes through a global or generic pointer whose
  // parameter the IR does not say (a loaded pointer, an integer). With --check-races, loads of
  // memory no st can write go unrecorded, since nothing in the launch can race with them.
  std::vector<uint8_t> paramWritten;
  bool writesAnywhere = false;
  uint32_t staticSharedEnd = 0;
  uint32_t dynamicSharedStart = 0;
  std::optional<ir::Dim3> reqntid, maxntid;
  bool asyncCopies = false;  // the kernel has cp.async or its waits: the engine tracks copies and groups
  bool namedBarriers = false;  // bar.named.sync/arrive: the engine keeps their phases
  // Kernels with wgmma.mma_async: per register slot, kWgOperand (an accumulator or A register
  // operand of some wgmma) and kWgResult (its result); per branch move, whether it writes an
  // operand with something other than a wgmma result (accumulator chaining through a loop).
  std::vector<uint8_t> wgSlot;
  std::vector<uint8_t> wgMoveWrites;
  bool tmaLoads = false;     // cp.async.bulk.tensor loads: the engine tracks their destination bytes
  bool bulkStores = false;   // TMA stores or bulk groups: the engine tracks their sources and proxy fences
};
constexpr uint8_t kWgOperand = 1, kWgResult = 2;

// Decodes kernel k of m into p; an error when the kernel is malformed or uses what the
// interpreter cannot run.
std::optional<Error> decode(const ir::Module& m, const ir::Kernel& k, Program& p);

// Picks the lane loop of a pure op (Kind::Compute); nullptr with `why` set when the op/type
// combination has no semantics.
ComputeFn selectCompute(const Code& k, std::string& why);
ComputeFn selectFloat(const Code& k, std::string& why);  // float-typed arithmetic and setp
ComputeFn selectCvt(const Code& k, std::string& why);

// Tensor cores (InterpMma.cpp), over all 32 lanes of a warp the engine found full and converged:
// D = A·B + C, and ldmatrix's scatter of 8·lanes rows of 16 bytes (rows[8j + r]: row r of matrix j).
void mmaWarp(uint64_t* regs, const Code& k);
void ldmatrixWarp(uint64_t* regs, const Code& k, const std::byte* const* rows);

// wgmma (InterpMma.cpp, TC§4): a matrix descriptor's fields (TC§4.4), the swizzled shared address
// of element (x, k) of an operand read through it (x = m of A or n of B; k < K; elements of 2
// bytes, K = 16, or fp8 codes of 1, K = 32; mnMajor: trans), and D (64 x n) = A (64 x K) · B (K x n)
// (+ C) on element bits: a[m·K + k], b[k·n + j], c and d[m·n + j] (f32).
struct WgmmaDescriptor {
  uint32_t start = 0, lbo = 0, sbo = 0;
  unsigned baseOffset = 0, swizzle = 0;  // swizzle in bytes: 0 (none), 32, 64 or 128
};
WgmmaDescriptor decodeWgmmaDescriptor(uint64_t desc);
uint32_t wgmmaElementAddress(const WgmmaDescriptor& d, bool mnMajor, unsigned x, unsigned k, uint32_t elementBytes = 2);
// fp8A, fp8B: the operands' fp8 formats (Mod::E4m3Mod, E5m2Mod) when `in` is b8.
void wgmmaProduct(ir::Scalar in, ir::Mod fp8A, ir::Mod fp8B, unsigned n, unsigned K, const uint16_t* a,
                  const uint16_t* b, const uint32_t* c, bool scaleD, uint32_t* d);

// Read-modify-write of one atomic: the new memory value for `old` and operands b (and c for cas).
// Float atomics round to nearest even; `ftz` flushes f32 subnormals (atom.add.f32 on global).
uint64_t atomicResult(const Code& k, uint64_t old, uint64_t b, uint64_t c, bool ftz);

struct GlobalBuffer {
  std::string name;
  std::vector<std::byte>* bytes = nullptr;
};

// Where global pointers point: tagged offsets into buffers, or device addresses into `device`;
// and the launch's tensor maps, which a tmap parameter's value indexes.
struct GlobalMemory {
  std::span<GlobalBuffer> buffers;
  const DeviceMemory* device = nullptr;
  std::span<const TensorMapDesc> tensorMaps;
};

// Runs one launch of p. paramBits holds each parameter's value (pointers already encoded).
std::optional<Error> execute(const Program& p, std::span<const uint64_t> paramBits, std::span<const uint64_t> vectorWords,
                             GlobalMemory memory,
                             const LaunchConfig& cfg, const Options& opts, Stats& stats);

// ---- lane loops shared by the semantics files --------------------------------------------------
inline uint64_t* slotPtr(uint64_t* regs, uint32_t slot) { return regs + static_cast<size_t>(slot) * kWarpSize; }

template <class Fn>
inline void forLanes(uint32_t mask, Fn&& fn) {
  if (mask == kFullMask) {
    for (uint32_t l = 0; l < kWarpSize; ++l) fn(l);
  } else {
    for (uint32_t m = mask; m; m &= m - 1) fn(static_cast<uint32_t>(std::countr_zero(m)));
  }
}

// The loop of a pure op over N operands: Op::eval(const Code&, uint64_t...) -> uint64_t computes
// one lane from the operands' bits.
template <class Op, size_t N>
int lanesLoop(uint64_t* regs, uint32_t mask, const Code& k) {
  uint64_t* d = slotPtr(regs, k.dst);
  return [&]<size_t... I>(std::index_sequence<I...>) {
    const uint64_t* src[] = {slotPtr(regs, k.src[I])...};
    forLanes(mask, [&](uint32_t l) { d[l] = Op::eval(k, src[I][l]...); });
    return -1;
  }(std::make_index_sequence<N>{});
}

// An op L of ir/LaneSemantics.h (L::eval(uint64_t...), no modifiers to read) as an Op of the loops.
template <class L>
struct Lanes {
  template <class... Bits>
  static uint64_t eval(const Code&, Bits... x) { return L::eval(x...); }
};

// div/rem: a zero divisor in any lane is a fault, reported before any lane is written.
template <class L>
int divisionLoop(uint64_t* regs, uint32_t mask, const Code& k) {
  uint64_t* d = slotPtr(regs, k.dst);
  const uint64_t* a = slotPtr(regs, k.src[0]);
  const uint64_t* b = slotPtr(regs, k.src[1]);
  for (uint32_t m = mask; m; m &= m - 1)
    if (L::byZero(b[std::countr_zero(m)])) return std::countr_zero(m);
  forLanes(mask, [&](uint32_t l) { d[l] = L::eval(a[l], b[l]); });
  return -1;
}

// The lane loop of op L of ir/LaneSemantics.h.
template <class L>
ComputeFn laneLoop() {
  if constexpr (L::divides) return &divisionLoop<L>;
  else return &lanesLoop<Lanes<L>, L::arity>;
}

}  // namespace tn::interp::detail
