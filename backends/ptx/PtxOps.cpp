// PTX emitter, per-op half: one small case per op of ir/Ops.def choosing the PTX spelling for the
// annotated type and modifiers. The verifier has already matched modifiers to types as ptxas
// accepts them; the errors here are what PTX lacks beyond that (8-bit arithmetic, half-precision
// division, bf16 conversions before sm_90, ...). Nothing is dropped silently.
#include <cinttypes>
#include <cstdio>

#include "backends/ptx/PtxEmitter.h"

namespace tn::ptx::detail {

using ir::Inst;
using ir::Mod;
using ir::ModGroup;
using ir::Op;
using ir::Scalar;
using ir::Type;

namespace {

std::string modText(Mod m) { return m == Mod::None ? "" : "." + std::string(ir::modName(m)); }
bool isHalf(Type t) { return t.scalar == Scalar::F16 || t.scalar == Scalar::BF16; }
std::string bitsOf(Type t) { return std::to_string(t.bits()); }
// Name of a PTX type for arithmetic on t (u32, s16, f16, ...); pointers by width.
std::string typeSuffix(Type t) {
  if (t.isPtr()) return "u" + bitsOf(t);
  return std::string(ir::scalarName(t.scalar));
}
// Bit type of the register holding t (8-bit values live in 16-bit registers).
std::string regBits(Type t) { return t.bits() < 16 ? "b16" : "b" + bitsOf(t); }
// cvt has no b types; a bits operand converts as unsigned.
std::string cvtType(Type t) { return t.isBits() ? "u" + bitsOf(t) : typeSuffix(t); }
// Whether every value of integer type s fits integer type t, so that .sat cannot change a cvt.
bool intFits(Type s, Type t) {
  if (s.isSigned() && !t.isSigned()) return false;
  return t.bits() > s.bits() || (t.bits() == s.bits() && s.isSigned() == t.isSigned());
}

const char* kNo8Bit = "PTX has no 8-bit arithmetic; widen to 16 bits with cvt first";

// The A and B types of an mma or wgmma over fp8 codes: "e4m3.e4m3", or a mixed form "e4m3.e5m2".
std::string fp8Types(const ir::Inst& in) {
  return std::string(ir::modName(in.mod(ModGroup::Fp8))) + "." + std::string(ir::modName(ir::fp8FormatOfB(in)));
}

}  // namespace

std::string KernelEmitter::spaceOf(ir::ValueId ptr) const {
  ir::AddrSpace as = k_.typeOf(ptr).space;
  return as == ir::AddrSpace::Generic ? "" : "." + std::string(ir::spaceName(as));
}

// One case per op. Modifiers the verifier has matched to the type are written in PTX order
// (.rnd .ftz .sat); what remains to check here is what PTX lacks beyond the ops table.
void KernelEmitter::emitInst(const Inst& in) {
  Type t = in.type.value_or(Type::pred());
  std::string name(ir::info(in.op).name);
  std::string dim = modText(in.mod(ModGroup::Dim));
  std::string round = modText(in.mod(ModGroup::Round));
  std::string ftzSat = modText(in.mod(ModGroup::Ftz)) + modText(in.mod(ModGroup::Sat));
  bool byte = t.bits() == 8 && !t.isVector();
  switch (in.op) {
    case Op::Const: emitConst(in, t); return;
    case Op::Tid: line("mov.u32 " + reg(in.result) + ", %tid" + dim + ";"); return;
    case Op::Ntid: line("mov.u32 " + reg(in.result) + ", %ntid" + dim + ";"); return;
    case Op::Ctaid: line("mov.u32 " + reg(in.result) + ", %ctaid" + dim + ";"); return;
    case Op::Nctaid: line("mov.u32 " + reg(in.result) + ", %nctaid" + dim + ";"); return;
    case Op::Laneid: line("mov.u32 " + reg(in.result) + ", %laneid;"); return;
    case Op::Warpid: line("mov.u32 " + reg(in.result) + ", %warpid;"); return;
    case Op::SharedAddr: line("mov.u32 " + reg(in.result) + ", " + syms_.shared[in.symbol] + ";"); return;
    case Op::TableLd:  // element i of the table's .global array, through the read-only cache
      line("{");
      line(".reg .b64 %tn_tbl;");
      line("mov.u64 %tn_tbl, " + syms_.tables[in.symbol] + ";");
      line("mad.wide.u32 %tn_tbl, " + reg(in.operands[0]) + ", " + std::to_string(t.bytes()) + ", %tn_tbl;");
      line("ld.global.nc." + memType(t) + " " + reg(in.result) + ", [%tn_tbl];");
      line("}");
      return;
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
      if (byte) return void(fail(in, kNo8Bit));
      if (t.isInt()) {
        plain(in, name + (in.op == Op::Mul ? ".lo" : "") + ftzSat + "." + typeSuffix(t));
        return;
      }
      // Always an explicit rounding: ptxas may contract a mul and an add that have none into an fma
      // (PTX ISA, add/mul: "mul/add sequences with no rounding modifiers may be optimized to use
      // fused-multiply-add instructions"), so only fma-fusion makes fmas, and .exact and
      // fp_contract = "off" hold in the cubin.
      if (round.empty()) round = ".rn";
      plain(in, name + round + ftzSat + "." + typeSuffix(t));
      return;
    case Op::MulHi:
    case Op::MulWide:
    case Op::Rem:
      if (byte) return void(fail(in, kNo8Bit));
      plain(in, name + "." + typeSuffix(t));
      return;
    case Op::Mad:
      if (byte) return void(fail(in, kNo8Bit));
      plain(in, "mad.lo." + typeSuffix(t));
      return;
    case Op::Fma: plain(in, "fma" + (round.empty() ? ".rn" : round) + ftzSat + "." + typeSuffix(t)); return;
    case Op::Div:
      if (byte) return void(fail(in, kNo8Bit));
      if (isHalf(t)) return void(fail(in, "PTX has no half-precision division; divide in f32"));
      if (t.isFloat() && round.empty()) round = ".rn";
      plain(in, "div" + round + ftzSat + "." + typeSuffix(t));
      return;
    case Op::Min:
    case Op::Max:
      if (byte) return void(fail(in, kNo8Bit));
      if (isHalf(t) && m_.target.sm < 80) return void(fail(in, "PTX " + name + "." + typeSuffix(t) + " needs sm_80"));
      plain(in, name + ftzSat + "." + typeSuffix(t));
      return;
    case Op::Neg:
    case Op::Abs:
      if (byte) return void(fail(in, kNo8Bit));
      plain(in, name + ftzSat + "." + typeSuffix(t));
      return;
    // Bitwise ops are exact on the low 8 bits of a 16-bit register, so 8-bit types are fine.
    case Op::And:
    case Op::Or:
    case Op::Xor:
    case Op::Not: plain(in, name + "." + (t.isPred() ? "pred" : regBits(t))); return;
    case Op::Shl:
    case Op::Shr:
      if (byte) return void(fail(in, kNo8Bit));
      if (in.op == Op::Shl || t.isBits()) plain(in, name + ".b" + bitsOf(t));
      else plain(in, name + "." + typeSuffix(t));
      return;
    case Op::Popc:
    case Op::Clz: plain(in, name + ".b" + bitsOf(t)); return;
    // Bit permutation and logic: prmt, lop3
    case Op::Prmt: plain(in, "prmt.b32" + modText(in.mod(ModGroup::Prmt))); return;
    case Op::Lop3: {
      char lut[8];
      std::snprintf(lut, sizeof lut, "0x%02" PRIX64, in.imm & 0xFF);
      line("lop3.b32 " + reg(in.result) + ", " + reg(in.operands[0]) + ", " + reg(in.operands[1]) + ", " +
           reg(in.operands[2]) + ", " + lut + ";");
      return;
    }
    case Op::Setp:
      if (byte) return void(fail(in, kNo8Bit));
      plain(in, "setp" + modText(in.mod(ModGroup::Cmp)) + ftzSat + "." + typeSuffix(t));
      return;
    case Op::Selp:
      plain(in, "selp." + (t.scalar == Scalar::F32 || t.scalar == Scalar::F64 ? typeSuffix(t) : regBits(t)));
      return;
    case Op::Cvt: emitCvt(in, *in.srcType, t); return;
    case Op::Bitcast: emitBitcast(in, *in.srcType, t); return;
    case Op::PtrAdd: plain(in, "add.s" + bitsOf(t)); return;
    case Op::Pack:
      for (unsigned l = 0; l < t.lanes; ++l)
        line("mov." + std::string(movType(regClass(t))) + " " + reg(in.result, l) + ", " + reg(in.operands[l]) + ";");
      return;
    case Op::Extract:
      line("mov." + std::string(movType(regClass(t))) + " " + reg(in.result) + ", " +
           reg(in.operands[0], static_cast<unsigned>(in.imm)) + ";");
      return;
    case Op::Ex2:
    case Op::Lg2:
    case Op::Rcp:
    case Op::Rsqrt:
    case Op::Sqrt:
    case Op::Sin:
    case Op::Cos:
    case Op::Tanh: plain(in, name + round + ftzSat + "." + typeSuffix(t)); return;
    case Op::Dp4a: plain(in, t.isSigned() ? "dp4a.s32.s32" : "dp4a.u32.u32"); return;
    case Op::Ld:
    case Op::St: emitMemory(in, t); return;
    case Op::Atom: {
      // atom.add on f16/bf16 exists only in its non-flushing form; exch moves bits.
      Mod op = in.mod(ModGroup::AtomOp);
      std::string ty = op == Mod::AExch ? "b" + bitsOf(t) : (isHalf(t) ? "noftz." : "") + typeSuffix(t);
      line("atom" + spaceOf(in.operands[0]) + modText(op) + "." + ty + " " + reg(in.result) + ", [" +
           reg(in.operands[0]) + "], " + reg(in.operands[1]) + ";");
      return;
    }
    case Op::AtomCas:
      if (byte) return void(fail(in, "PTX has no 8-bit atom.cas; use a 16-bit or wider type"));
      line("atom" + spaceOf(in.operands[0]) + ".cas.b" + bitsOf(t) + " " + reg(in.result) + ", [" +
           reg(in.operands[0]) + "], " + reg(in.operands[1]) + ", " + reg(in.operands[2]) + ";");
      return;
    case Op::Membar: line("membar" + modText(in.mod(ModGroup::Level)) + ";"); return;
    // Asynchronous copies: cp.async
    case Op::CpAsync:
      line("cp.async" + modText(in.mod(ModGroup::Cache)) + ".shared.global [" + reg(in.operands[0]) + "], [" +
           reg(in.operands[1]) + "], " + std::to_string(in.imm) +
           (in.operands.size() == 3 ? ", " + reg(in.operands[2]) : std::string()) + ";");
      return;
    case Op::CpAsyncCommit: line("cp.async.commit_group;"); return;
    case Op::CpAsyncWait: line("cp.async.wait_group " + std::to_string(in.imm) + ";"); return;
    case Op::CpAsyncWaitAll: line("cp.async.wait_all;"); return;
    case Op::MbarInit: line("mbarrier.init.shared.b64 [" + reg(in.operands[0]) + "], " + reg(in.operands[1]) + ";"); return;
    case Op::MbarArrive: line("mbarrier.arrive.shared.b64 _, [" + reg(in.operands[0]) + "];"); return;
    case Op::MbarArriveTx:
      line("mbarrier.arrive.expect_tx.shared.b64 _, [" + reg(in.operands[0]) + "], " + reg(in.operands[1]) + ";");
      return;
    case Op::MbarTryWait:
      line("mbarrier.try_wait.parity.shared.b64 " + reg(in.result) + ", [" + reg(in.operands[0]) + "], " +
           reg(in.operands[1]) + ";");
      return;
    case Op::ElectSync: line("elect.sync _|" + reg(in.result) + ", " + reg(in.operands[0]) + ";"); return;
    case Op::FenceProxyAsync: line("fence.proxy.async.shared::cta;"); return;
    case Op::TmaLoad: case Op::TmaLoad3d: {  // TC§5.2; .shared::cluster is the destination PTX ISA 8.0 has (::cta needs 8.6)
      const size_t rank = in.op == Op::TmaLoad ? 2 : 3;
      std::string coords;
      for (size_t i = 0; i < rank; ++i) coords += (i ? ", " : "") + reg(in.operands[2 + i]);
      line("cp.async.bulk.tensor." + std::to_string(rank) + "d.shared::cluster.global.mbarrier::complete_tx::bytes [" +
           reg(in.operands[0]) + "], [" + reg(in.operands[1]) + ", {" + coords + "}], [" + reg(in.operands[2 + rank]) + "];");
      return;
    }
    case Op::TmaStore: case Op::TmaStore3d: {
      const size_t rank = in.op == Op::TmaStore ? 2 : 3;
      std::string coords;
      for (size_t i = 0; i < rank; ++i) coords += (i ? ", " : "") + reg(in.operands[1 + i]);
      line("cp.async.bulk.tensor." + std::to_string(rank) + "d.global.shared::cta.bulk_group [" + reg(in.operands[0]) +
           ", {" + coords + "}], [" + reg(in.operands[1 + rank]) + "];");
      return;
    }
    case Op::BulkCommit: line("cp.async.bulk.commit_group;"); return;
    case Op::BulkWaitRead: line("cp.async.bulk.wait_group.read " + std::to_string(in.imm) + ";"); return;
    case Op::SetMaxNRegInc: case Op::SetMaxNRegDec:
      line(std::string(ir::info(in.op).name) + ".sync.aligned.u32 " + std::to_string(in.imm) + ";");
      return;
    case Op::WgmmaFence: line("wgmma.fence.sync.aligned;"); return;
    case Op::WgmmaCommit: line("wgmma.commit_group.sync.aligned;"); return;
    case Op::WgmmaWait: line("wgmma.wait_group.sync.aligned " + std::to_string(in.imm) + ";"); return;
    case Op::WgmmaMma: emitWgmma(in, t); return;
    case Op::BarSync: line("bar.sync 0;"); return;
    case Op::BarNamedSync: case Op::BarNamedArrive: {
      // barrier.sync/arrive without .aligned (bar.sync is barrier.sync.aligned): the warps taking
      // part may reach the barrier at different instructions, as warp-specialized code does
      // (compute-sanitizer's synccheck reports the .aligned form reached from two places). A
      // literal count stays a literal (one register fewer, and ptxas sees it).
      const ir::ValueInfo& c = k_.value(in.operands[0]);
      bool literal = c.kind == ir::DefKind::Inst && k_.inst(ir::InstId{c.owner}).op == Op::Const;
      line(std::string(in.op == Op::BarNamedSync ? "barrier.sync " : "barrier.arrive ") + std::to_string(in.imm) + ", " +
           (literal ? std::to_string(k_.inst(ir::InstId{c.owner}).imm) : reg(in.operands[0])) + ";");
      return;
    }
    case Op::ShflSync: plain(in, "shfl.sync" + modText(in.mod(ModGroup::Shfl)) + ".b32"); return;
    case Op::VoteSync:
      plain(in, "vote.sync" + modText(in.mod(ModGroup::Vote)) + (t.isPred() ? ".pred" : ".b32"));
      return;
    case Op::Mma:
    case Op::Ldmatrix:
    case Op::CvtPack: emitTensorCore(in, t); return;
    case Op::CvtTf32: plain(in, "cvt.rna.tf32.f32"); return;
    case Op::CvtF16x2Fp8:
      plain(in, std::string("cvt.rn.f16x2.") + (in.mod(ModGroup::Fp8) == Mod::E4m3Mod ? "e4m3x2" : "e5m2x2"));
      return;
    case Op::Br:
    case Op::Cbr:
    case Op::Ret: return;  // terminators: the block walk writes them with their moves
    case Op::Call: return void(fail(in, "a call reached the emitter: device functions are inlined first (the inline pass)"));
  }
}

// Constants are materialized where they are defined: floats as their exact bits (0f/0d/0x),
// integers in decimal, 8-bit ones through the 16-bit register that holds them.
void KernelEmitter::emitConst(const Inst& in, Type t) {
  char buf[48];
  std::string d = reg(in.result);
  switch (t.scalar) {
    case Scalar::Pred: line("mov.pred " + d + ", " + (in.imm ? "1;" : "0;")); return;
    case Scalar::F32: std::snprintf(buf, sizeof buf, "0f%08" PRIX32, static_cast<uint32_t>(in.imm)); break;
    case Scalar::F64: std::snprintf(buf, sizeof buf, "0d%016" PRIX64, in.imm); break;
    case Scalar::F16:
    case Scalar::BF16:
      std::snprintf(buf, sizeof buf, "0x%04" PRIX32, static_cast<uint32_t>(in.imm & 0xFFFF));
      line("mov.b16 " + d + ", " + buf + ";");
      return;
    default:
      if (t.isSigned()) {
        unsigned shift = 64 - t.bits();
        std::snprintf(buf, sizeof buf, "%" PRId64, static_cast<int64_t>(in.imm << shift) >> shift);
      } else {
        std::snprintf(buf, sizeof buf, "%" PRIu64, in.imm);
      }
      break;
  }
  std::string ty = t.bits() == 8 ? std::string(1, typeSuffix(t)[0]) + "16" : typeSuffix(t);
  line("mov." + ty + " " + d + ", " + buf + ";");
}

// Defaults where PTX requires a rounding: int -> float and narrowing float -> float round to
// nearest (.rn), float -> int truncates (.rzi); widening and int -> int conversions take none.
// An int -> int .sat that cannot clip is dropped (ptxas rejects it there), and a same-size int
// conversion without .sat is a move.
void KernelEmitter::emitCvt(const Inst& in, Type s, Type t) {
  bool sf = s.isFloat(), tf = t.isFloat();
  std::string round = modText(in.mod(ModGroup::Round));
  std::string ftz = modText(in.mod(ModGroup::Ftz)), sat = modText(in.mod(ModGroup::Sat));
  if (!sf && !tf) {
    if (intFits(s, t)) sat.clear();
    if (sat.empty() && s.bits() == t.bits()) plain(in, "mov." + regBits(t));
    else plain(in, "cvt" + sat + "." + cvtType(t) + "." + cvtType(s));
    return;
  }
  if (t.scalar == Scalar::BF16 && s.scalar != Scalar::F32 && m_.target.sm < 90)
    return void(fail(in, "PTX converts to bf16 only from f32 before sm_90"));
  if ((t.scalar == Scalar::BF16 && s.bits() == 8) || (s.scalar == Scalar::BF16 && t.bits() == 8))
    return void(fail(in, "PTX has no conversion between bf16 and 8-bit integers; go through a 16-bit integer"));
  if (s.scalar == Scalar::BF16 && !sat.empty()) return void(fail(in, "PTX has no .sat conversion from bf16"));
  if (round.empty() && (!sf || (tf && s != t && t.bits() <= s.bits()))) round = ".rn";
  if (round.empty() && !tf) round = ".rzi";
  if (round.empty() && ftz.empty() && sat.empty() && s == t) plain(in, "mov." + regBits(t));
  else plain(in, "cvt" + round + ftz + sat + "." + cvtType(t) + "." + cvtType(s));
}

// A scalar bitcast is a move. A vector source packs into the scalar with lane 0 in the lowest
// bits (the interpreter's layout, and the order of PTX's {a, b} vector operand): 16- and 32-bit
// lanes with one mov; 8-bit lanes live in 16-bit registers whose upper byte may hold anything (a
// sign-extending load), so prmt takes the low byte of each.
void KernelEmitter::emitBitcast(const Inst& in, Type s, Type t) {
  if (!s.isVector()) return plain(in, "mov." + regBits(t));
  ir::ValueId v = in.operands[0];
  std::string d = reg(in.result);
  if (s.bits() != 8) return line("mov.b" + bitsOf(t) + " " + d + ", " + regs(v) + ";");
  auto pair = [&](unsigned l) { return "{" + reg(v, l) + ", " + reg(v, l + 1) + "}"; };
  std::string lo = regName(RegClass::B32, temp(RegClass::B32));
  line("mov.b32 " + lo + ", " + pair(0) + ";");
  if (s.lanes == 2) {
    line("prmt.b32 " + lo + ", " + lo + ", 0, 0x4420;");  // bytes 0 and 2 (each lane's low byte), zeros
    line("cvt.u16.u32 " + d + ", " + lo + ";");
    return;
  }
  line("mov.b32 " + d + ", " + pair(2) + ";");
  line("prmt.b32 " + d + ", " + lo + ", " + d + ", 0x6420;");  // bytes 0 and 2 of each pair
}

// ld and st: ld{.volatile}{.space}{.cop}{.nc}{.vN}.type, st{.volatile}{.space}{.cop}{.vN}.type.
void KernelEmitter::emitMemory(const Inst& in, Type t) {
  ir::ValueId p = in.operands[0];
  ir::AddrSpace as = k_.typeOf(p).space;
  Mod cache = in.mod(ModGroup::Cache);
  bool nc = in.mod(ModGroup::Nc) != Mod::None, vol = in.mod(ModGroup::Volatile) != Mod::None;
  if (t.bytes() > 16) return void(fail(in, "PTX vector loads and stores move at most 16 bytes"));
  if (vol && (as == ir::AddrSpace::Local || as == ir::AddrSpace::Param))
    return void(fail(in, "PTX volatile accesses address global, shared or generic memory"));
  if (nc && (cache == Mod::Lu || cache == Mod::Cv))
    return void(fail(in, "PTX .nc loads take only the .ca, .cg or .cs cache operators"));
  std::string op = std::string(in.op == Op::Ld ? "ld" : "st") + (vol ? ".volatile" : "") + spaceOf(p) +
                   modText(cache) + (nc ? ".nc" : "");
  if (t.isVector()) op += ".v" + std::to_string(t.lanes);
  op += "." + memType(t.element());
  if (in.op == Op::Ld)
    line(op + " " + regs(in.result) + ", [" + reg(p) + "];");
  else
    line(op + " [" + reg(p) + "], " + regs(in.operands[1]) + ";");
}

// ---- Tensor cores: mma, ldmatrix, packed conversions -------------------------------------------
// Fragments are vectors whose lanes are the instruction's registers, so `regs` writes them as
// PTX's {..} lists. mma on f16 accumulates into .f16x2 data held in .b32 registers, which PTX
// allows; tf32 operands are the f32 bits, which mma reads as tf32 (ignoring the low 13 bits).
// cvt.pack keeps PTX's operand order: the first source goes to the upper half.
void KernelEmitter::emitTensorCore(const Inst& in, Type t) {
  if (in.op == Op::CvtPack) {
    plain(in, "cvt" + modText(in.mod(ModGroup::Round)) + "." + typeSuffix(t) + "x2.f32");
    return;
  }
  if (in.op == Op::Ldmatrix) {
    std::string d = reg(in.result, 0);
    for (unsigned l = 1; l < t.lanes; ++l) d += ", " + reg(in.result, l);
    line("ldmatrix.sync.aligned.m8n8.x" + std::to_string(t.lanes) + modText(in.mod(ModGroup::Trans)) +
         ".shared.b16 {" + d + "}, [" + reg(in.operands[0]) + "];");
    return;
  }
  Scalar s = in.srcType->scalar;
  if (!ir::mmaFormExists(in.mod(ModGroup::Shape), s, t, in.mod(ModGroup::Fp8)))
    return void(fail(in, "PTX has no mma" + modText(in.mod(ModGroup::Shape)) + " from " +
                             std::string(ir::scalarName(s)) + " to " + typeSuffix(t)));
  std::string ab = in.mod(ModGroup::Fp8) != Mod::None         ? fp8Types(in)
                   : in.mod(ModGroup::Shape) == Mod::M16n8k8 ? "tf32.tf32"
                                                             : typeSuffix(Type::of(s)) + "." + typeSuffix(Type::of(s));
  std::string acc = typeSuffix(t);
  line("mma.sync.aligned" + modText(in.mod(ModGroup::Shape)) + ".row.col." + acc + "." + ab + "." + acc +
       " " + regs(in.result) + ", " + regs(in.operands[0]) + ", " + regs(in.operands[1]) + ", " +
       regs(in.operands[2]) + ";");
}

// wgmma.mma_async writes D into its accumulator's registers (register assignment ties them), so
// nothing sits between the program's wgmma.fence and the wgmma. Only in unreachable code, where
// values get registers of their own, is the accumulator copied first.
void KernelEmitter::emitWgmma(const Inst& in, Type t) {
  ir::ValueId acc = in.operands[0], a = in.operands[1];
  if (base_[acc.index] != base_[in.result.index])
    for (unsigned l = 0; l < t.lanes; ++l) line("mov.f32 " + reg(in.result, l) + ", " + reg(acc, l) + ";");
  // fp8 (K-major operands only): k32 and no transpose immediates.
  const bool fp8 = in.mod(ModGroup::Fp8) != Mod::None;
  std::string ab = fp8 ? fp8Types(in) : typeSuffix(*in.srcType) + "." + typeSuffix(*in.srcType);
  bool regA = k_.typeOf(a).isVector();
  std::string s = "wgmma.mma_async.sync.aligned.m64n" + std::to_string(in.imm) + (fp8 ? "k32" : "k16") + ".f32." + ab +
                  " " + regs(in.result) + ", " + regs(a) + ", " + reg(in.operands[2]) + ", " +
                  reg(in.operands[3]) + ", 1, 1";
  if (!fp8) {
    if (!regA) s += in.has(Mod::TransAMod) ? ", 1" : ", 0";
    s += in.has(Mod::TransBMod) ? ", 1" : ", 0";
  }
  s += ";";
  line(s);
}

}  // namespace tn::ptx::detail
