// Internal to the PTX backend: the state of emitting one kernel. Ptx.cpp owns the structure
// (symbols, registers, the block walk, branches and their parallel copies); PtxOps.cpp owns the
// per-op formats (KernelEmitter::emitInst).
#pragma once

#include <array>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ir/Diagnostics.h"
#include "ir/IR.h"
#include "ir/Printer.h"
#include "backends/ptx/Registers.h"

namespace tn::ptx::detail {

inline RegClass regClass(ir::Type t) { return regClassOf(t); }
// The mov type of a register class ("b16", "f32", "pred", ...).
inline std::string_view movType(RegClass c) { return regClassName(c); }
// The PTX type of one lane in memory and in .param declarations: f16/bf16 as b16, pointers as
// u64/u32 by width, everything else under its own name.
std::string memType(ir::Type t);

// PTX symbol names of one kernel: the entry, its parameters and its shared arrays.
struct KernelSymbols {
  std::string entry;
  std::vector<std::string> params;  // by parameter index
  std::vector<std::string> shared;  // by Kernel::shared index
  std::vector<std::string> tables;  // by Kernel::tables index (one name for tables alike in content)
};

class KernelEmitter {
 public:
  // assigned: register-liveness's assignment to name registers after (values with disjoint live
  // ranges share one); null gives every value registers of its own.
  KernelEmitter(const ir::Module& m, const ir::Kernel& k, const KernelSymbols& syms, const ir::NameTable& names,
                const passes::RegisterAssignment* assigned, ir::Diagnostics& diags);
  // Appends the kernel's PTX to out; false (with diagnostics) when something cannot be emitted.
  bool run(std::string& out);
  bool lineInfo = false;  // EmitOptions::lineInfo

 private:
  struct Move {
    RegClass cls;
    uint32_t dst, src;
  };

  // ---- structure (Ptx.cpp) ----
  bool checkSignature();
  void assignRegisters();
  void assignShared();
  void assignNaive();
  void assignValue(ir::ValueId v);
  void emitParamLoads();
  bool tensorMapUsed(ir::ValueId v) const;
  void emitTerminator(size_t block, const ir::Inst& in);
  std::vector<Move> edgeMoves(const ir::BlockCall& call) const;
  void emitParallelCopy(std::vector<Move> moves);
  std::string edgeLabel(size_t from, ir::BlockId to);
  std::string regDecls() const;
  void emitLoc(const ir::Inst& in);

  // ---- per-op formats (PtxOps.cpp) ----
  void emitInst(const ir::Inst& in);
  void emitConst(const ir::Inst& in, ir::Type t);
  void emitCvt(const ir::Inst& in, ir::Type s, ir::Type t);
  void emitBitcast(const ir::Inst& in, ir::Type s, ir::Type t);
  void emitMemory(const ir::Inst& in, ir::Type t);
  void emitTensorCore(const ir::Inst& in, ir::Type t);  // mma, ldmatrix, cvt.pack
  void emitWgmma(const ir::Inst& in, ir::Type t);
  // The state space a memory op addresses, as a PTX qualifier (".global", "" for generic).
  std::string spaceOf(ir::ValueId ptr) const;

  // ---- output helpers ----
  std::string reg(ir::ValueId v, unsigned lane = 0) const;
  std::string regs(ir::ValueId v) const;  // "%f1" or "{%f1, %f2}" for vectors
  std::string regName(RegClass c, uint32_t n) const;
  uint32_t temp(RegClass c);
  void line(const std::string& text);
  void label(const std::string& name);
  // `opcode d, a, b, ...;` over the result and the operands of `in`.
  void plain(const ir::Inst& in, const std::string& opcode);
  bool fail(const ir::Inst& in, const std::string& reason);
  bool failAt(ir::SourceLoc loc, const std::string& what, const std::string& reason);
  std::string target() const;

  const ir::Module& m_;
  const ir::Kernel& k_;
  const KernelSymbols& syms_;
  const ir::NameTable& names_;
  const passes::RegisterAssignment* assigned_;
  ir::Diagnostics& diags_;
  bool ok_ = true;
  ir::SourceLoc lastLoc_;  // of the last .loc written
  std::string pendingLoc_;  // a .loc that line() writes before the next instruction line
  ir::SourceLoc pendingAt_;

  std::array<uint32_t, kRegClasses> next_{1, 1, 1, 1, 1, 1};
  std::array<uint32_t, kRegClasses> temps_{};  // cycle-breaking temporary per class (0 = none)
  std::vector<uint32_t> base_;                  // first register of each value (lanes follow)
  std::vector<uint32_t> paramRaw_;              // register each parameter is loaded into
                                                // (its own register when names are reused)
  std::vector<std::string> labels_;             // per block
  std::set<std::string> labelNames_;
  std::string body_;
};

}  // namespace tn::ptx::detail
