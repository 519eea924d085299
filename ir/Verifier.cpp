// The IR verifier. It checks the invariants below on every kernel and reports every violation it
// finds (never only the first) as "file:line:col: error: message", in source order.
//
// Invariants:
//  1. Structure: a kernel has at least one block; every block ends with exactly one terminator
//     (br, cbr or ret) and holds none before its end; br has one target and cbr two, each naming
//     an existing block; the entry block (blocks[0]) has no parameters and is not a branch target.
//  2. Types and operands: the annotated type T (and the source type S of cvt/bitcast) is present
//     exactly when the op takes it, and T is in the op's type classes; operand count and types
//     follow the op's operand letters (pack: lanes-of-T operands of T's element type); the result
//     value exists exactly when the op has a result, typed by the result rule; extract's lane is
//     below T's lane count; const's T is a scalar non-pointer; modifiers belong to groups the op
//     accepts, and required groups are present.
//  3. Modifiers fit the type (as ptxas accepts them): IEEE rounding (rn rz rm rp) only on float
//     arithmetic (f16 add/sub/mul/fma and bf16 add/sub/mul: rn only), and on cvt to a float from
//     an integer or from a wider or different float; integer rounding (rni rzi rmi rpi) only on
//     cvt from a float to an integer or to the same float type; approx/full only where PTX has
//     them (ex2 lg2 rsqrt sin cos tanh: approx; rcp sqrt: approx or rn..rp, but sqrt.approx is
//     f32 only and rcp.approx.f64 needs ftz; div f32: approx, full or rn..rp; other float div:
//     rn..rp; integer div: none); ftz only with f32 or f16 (cvt: an f32 side; f64: rcp.approx
//     and rsqrt.approx only); sat only on f32/f16 add/sub/mul/fma, s32 add/sub, and cvt to an
//     integer, f16, f32 or f64; unordered compares (equ..geu, num, nan) only for floats, and
//     b-types compare with eq/ne only; exact only on float add/sub/mul; the atom operation fits
//     the type (add: u32 s32 u64 f32 f64 f16 bf16; min/max: u32 s32 u64 s64; and/or/xor: b32
//     b64; inc/dec: u32; exch: b32 b64 u32 s32 u64 f32); cache operators fit the access (ld: ca
//     cg cs lu cv; st: wb cg cs wt); ld.nc reads global pointers only; volatile excludes cache
//     operators and nc, and addresses neither local nor param memory; ld.nc takes no .lu or .cv;
//     atom.cas is 16 bits wide or wider; ld/st move at most 16 bytes.
//  4. SSA dominance: every used value is defined, and every use is dominated by its definition
//     (same block: defined earlier; branch arguments are used at the end of the branching block).
//     In unreachable blocks only the existence of the definition is checked.
//  5. Every branch passes exactly as many arguments as its target has parameters, each of the
//     parameter's type.
//  6. Address spaces: ld/st/atom/atom.cas take a pointer; st and atoms never write param space;
//     atoms use global, shared or generic pointers; ptradd's offset is as wide as the pointer;
//     shared.addr names an existing shared array and yields ptr.shared; table.ld names a table of
//     its kernel and is annotated with the table's element type.
//  7. Target: an op, or an op on a type listed by TYPE_GATE, needs the module's sm and PTX ISA
//     to reach its minimums; the module's PTX ISA is at least the first that supports its sm
//     (checked once per module by verify()).
//  8. Kernel attributes: reqntid/maxntid have x, y <= 1024, z <= 64 and at most 1024 threads in
//     total; reqntid fits maxntid in every dimension; minnctapersm is 1..32 and comes with reqntid
//     or maxntid (ptxas ignores it without one); maxnreg is 1..255; at most one dynamic shared array; shared
//     alignment >= element size; parameter alignments are powers of two and only on pointers;
//     tables have distinct names, u16/u32/u64/b16/b32/b64 elements, 1 .. 2^20 of them, each value
//     within its element's width.
//  9. Special ops: vote.sync.ballot yields b32 and all/any/uni yield pred; shfl.sync is 32-bit;
//     cvt's S is a scalar integer/bits/float type and differs from T, except for a float cvt that
//     rounds to integral, saturates or flushes subnormals; bitcast keeps the total bit width and never involves pred.
// 10. Tensor cores: mma's shape and `S -> T` are one of PTX's forms (docs/ir.md) and its operands are
//     the A (v4.b32), B (v2.b32) and accumulator fragments; ldmatrix yields b32, v2.b32 or v4.b32
//     through a shared pointer; cvt.pack packs two f32 into f16x2 or bf16x2 with .rn or .rz.
// 11. Asynchronous copies and bit ops: cp.async.bulk.tensor's destination, source and mbarrier
//     are ptr.shared; cp.async copies 4, 8 or 16 bytes (its immediate) from a
//     ptr.global to a ptr.shared with .ca, or 16 bytes with .cg; a constant src-size is at most
//     the copy size; lop3's truth table fits in 8 bits. (Alignment of the two addresses is a
//     dataflow fact: tile-validation proves it or reports it, the interpreter checks it per copy.)
// 13. Wide vectors (v8.f32 .. v128.f32, the wgmma accumulators) appear only as the result and
//     accumulator operand of wgmma.mma_async, the operand of extract, the result of pack, block
//     parameters and branch arguments: never as kernel or function parameters, shared elements,
//     or any other operand or result. wgmma.mma_async multiplies bf16 or f16 at N = 8, 16, ...,
//     256 into a v(N/2).f32 accumulator that has no use but this wgmma (its result takes the
//     accumulator's registers); its A operand is a b64 descriptor or the v4.b32 register
//     fragment, which cannot be transposed.
// 12. Device functions: a call names a function of the module, passes one argument of each
//     parameter's type and is annotated with the type the function returns (none: no result);
//     ret passes back exactly the function's return value (none in kernels); no function calls
//     itself, directly or through others.
// 13. Tensor maps: a 'tmap' value is a kernel parameter and nothing else (not a device function's
//     parameter or return type, a block parameter, a shared element, a cvt/bitcast type), and is
//     used only as the tensor-map operand of the cp.async.bulk.tensor ops (operand letter 'M').
#include "ir/Verifier.h"

#include <algorithm>
#include <bit>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ir/Dominance.h"
#include "ir/Printer.h"

namespace tn::ir {

namespace {

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }
std::string quoted(Type t) { return quoted(typeName(t)); }
std::string ptxText(unsigned v) { return "PTX ISA " + std::to_string(v / 10) + "." + std::to_string(v % 10); }
bool isScalar(Type t, Scalar s) { return t.scalar == s && t.lanes == 1; }
bool isIeeeRound(Mod m) { return m >= Mod::Rn && m <= Mod::Rp; }
bool isIntRound(Mod m) { return m >= Mod::Rni && m <= Mod::Rpi; }
bool isUnordered(Mod m) { return m >= Mod::Equ && m <= Mod::Nan; }
bool isTensorMap(Type t) { return t.scalar == Scalar::TensorMap; }
constexpr std::string_view kTensorMapUse = "a 'tmap' value is only the tensor-map operand of cp.async.bulk.tensor";

// The op as written in the text form: name plus modifiers ("shfl.sync.bfly").
std::string opText(const Inst& in) {
  std::string s(info(in.op).name);
  for (Mod m : in.mods)
    if (m != Mod::None) s += "." + std::string(modName(m));
  return s;
}

// "a", "a or b", "a, b or c".
std::string joinOr(const std::vector<std::string>& parts) {
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) s += (i == 0 ? "" : i + 1 == parts.size() ? " or " : ", ") + parts[i];
  return s;
}

std::string classText(uint32_t mask) {
  static constexpr std::pair<uint32_t, const char*> kNames[] = {
      {TC_I, "integer"}, {TC_B, "bits"}, {TC_F, "float"}, {TC_P, "pred"}, {TC_PTR, "pointer"},
      {TC_VEC, "vector"}, {TC_U32, "u32"}, {TC_SINT, "signed integer"}, {TC_F32, "f32"},
      {TC_F64, "f64"}, {TC_I16, "16-bit integer"}, {TC_I32, "32-bit integer"},
      {TC_B16, "16-bit integer or bits"}, {TC_B32, "32-bit integer or bits"}, {TC_B64, "64-bit integer or bits"},
      {TC_32, "32-bit scalar"}};
  std::vector<std::string> parts;
  for (auto [bit, name] : kNames)
    if (mask & bit) parts.push_back(name);
  return joinOr(parts);
}

// The element types each atom operation accepts (PTX ISA, atom; exch of u/s/f types is emitted
// as its b-type).
std::vector<Scalar> atomTypes(Mod op) {
  using S = Scalar;
  switch (op) {
    case Mod::AAdd: return {S::U32, S::S32, S::U64, S::F32, S::F64, S::F16, S::BF16};
    case Mod::AMin:
    case Mod::AMax: return {S::U32, S::S32, S::U64, S::S64};
    case Mod::AAnd:
    case Mod::AOr:
    case Mod::AXor: return {S::B32, S::B64};
    case Mod::AInc:
    case Mod::ADec: return {S::U32};
    default: return {S::B32, S::B64, S::U32, S::S32, S::U64, S::F32};
  }
}

class KernelVerifier {
 public:
  KernelVerifier(const Module& m, const Kernel& k, Diagnostics& d) : m_(m), k_(k), d_(d), dom_(k) {}
  void run();

 private:
  void error(SourceLoc loc, std::string msg) { d_.report(Severity::Error, m_.fileName(loc), loc, std::move(msg)); }
  bool validValue(ValueId v) const { return v.valid() && v.index < k_.values.size(); }
  bool validBlock(BlockId b) const { return b.valid() && b.index < k_.blocks.size(); }
  // Display names are only needed for messages: built on the first one.
  const NameTable& names() const {
    if (!names_) names_.emplace(k_);
    return *names_;
  }
  std::string val(ValueId v) const { return quoted("%" + names().value(v)); }
  std::string blk(BlockId b) const { return quoted("^" + names().block(b)); }
  // The annotated type, as "'f32'" or, for cvt/bitcast, "'s32 -> f32'".
  std::string typeText(const Inst& in) const {
    return in.srcType ? quoted(typeName(*in.srcType) + " -> " + typeName(*in.type)) : quoted(*in.type);
  }

  void recordDefinitions();
  void checkAttributes();
  void checkTensorMapTypes();
  void checkBlock(BlockId b);
  bool checkTypes(const Inst& in);
  void checkOperands(const Inst& in);
  void checkModifierGroups(const Inst& in);
  void checkModifiers(const Inst& in);
  std::string roundProblem(const Inst& in, Mod r) const;
  std::string cvtRoundProblem(const Inst& in, Mod r) const;
  void checkMemory(const Inst& in);
  void checkSpecial(const Inst& in);
  void checkTensorCore(const Inst& in);
  void checkWgmma(const Inst& in);
  bool checkWide(const Inst& in);  // true when it reported a misplaced wide vector
  void checkAsyncAndBits(const Inst& in);
  void checkTarget(const Inst& in);
  void checkBranches(const Inst& in);
  bool checkSignature(const Inst& in);
  // `what` names the use ("operand 2 of 'add'"); it is only built when there is an error.
  template <class Describe>
  void checkUse(ValueId v, BlockId useBlock, size_t usePos, SourceLoc loc, const Describe& what);

  const Module& m_;
  const Kernel& k_;
  Diagnostics& d_;
  mutable std::optional<NameTable> names_;
  DominatorTree dom_;
  // Where each value is defined: its block (none for kernel parameters, which are defined
  // everywhere) and its position there (kParamPos for parameters).
  static constexpr int kParamPos = -1;
  std::vector<bool> defined_;
  std::vector<BlockId> defBlock_;
  std::vector<int> defPos_;
  std::vector<uint32_t> uses_;  // per value: operand and branch-argument uses (wgmma's accumulator)
};

void KernelVerifier::run() {
  checkAttributes();
  if (k_.blocks.empty()) {
    error(k_.loc, "kernel '@" + k_.name + "' has no blocks");
    return;
  }
  recordDefinitions();
  checkTensorMapTypes();
  for (uint32_t b = 0; b < k_.blocks.size(); ++b) checkBlock(BlockId(b));
}

// ---- 13. tensor maps ----------------------------------------------------------------------------

// Where a 'tmap' type may not be written (block parameters: checkBlock; operands: the operand letters).
void KernelVerifier::checkTensorMapTypes() {
  const std::string where = k_.function ? "device function '@" + k_.name + "'" : "kernel '@" + k_.name + "'";
  if (k_.function)
    for (const KernelParam& p : k_.params)
      if (validValue(p.value) && isTensorMap(k_.typeOf(p.value)))
        error(k_.loc, "parameter " + val(p.value) + " of " + where +
                          " is a 'tmap': tensor maps are kernel parameters only (the runtime fills them at launch)");
  if (k_.returns && isTensorMap(*k_.returns)) error(k_.loc, where + " cannot return a 'tmap'");
  for (const SharedDecl& s : k_.shared)
    if (isTensorMap(s.elem)) error(s.loc, "shared array '@" + s.name + "' cannot hold 'tmap' elements");
}

void KernelVerifier::recordDefinitions() {
  defined_.assign(k_.values.size(), false);
  defBlock_.assign(k_.values.size(), BlockId());
  defPos_.assign(k_.values.size(), kParamPos);
  uses_.assign(k_.values.size(), 0);
  for (const Block& blk : k_.blocks)
    for (InstId id : blk.insts) {
      if (id.index >= k_.insts.size()) continue;
      const Inst& in = k_.inst(id);
      for (ValueId v : in.operands)
        if (validValue(v)) ++uses_[v.index];
      for (const BlockCall& c : in.succs)
        for (ValueId v : c.args)
          if (validValue(v)) ++uses_[v.index];
    }
  auto define = [&](ValueId v, BlockId b, int pos) {
    if (!validValue(v) || defined_[v.index]) return;
    defined_[v.index] = true;
    defBlock_[v.index] = b;
    defPos_[v.index] = pos;
  };
  for (const KernelParam& p : k_.params) define(p.value, BlockId(), kParamPos);
  for (uint32_t b = 0; b < k_.blocks.size(); ++b) {
    const Block& blk = k_.blocks[b];
    for (ValueId p : blk.params) define(p, BlockId(b), kParamPos);
    for (size_t i = 0; i < blk.insts.size(); ++i)
      if (blk.insts[i].index < k_.insts.size()) define(k_.inst(blk.insts[i]).result, BlockId(b), static_cast<int>(i));
  }
}

// ---- 8. kernel attributes -----------------------------------------------------------------------

void KernelVerifier::checkAttributes() {
  auto checkDim = [&](const std::optional<Dim3>& d, const char* what) {
    if (!d) return;
    const unsigned dims[3] = {d->x, d->y, d->z};
    const unsigned limits[3] = {1024, 1024, 64};
    for (int i = 0; i < 3; ++i)
      if (dims[i] > limits[i])
        error(k_.loc, std::string(what) + " " + "xyz"[i] + " = " + std::to_string(dims[i]) + " exceeds the limit of " +
                          std::to_string(limits[i]));
    uint64_t total = uint64_t{d->x} * d->y * d->z;
    if (total > 1024)
      error(k_.loc, std::string(what) + " asks for " + std::to_string(total) + " threads; a block holds at most 1024");
  };
  checkDim(k_.reqntid, "reqntid");
  checkDim(k_.maxntid, "maxntid");
  if (k_.reqntid && k_.maxntid) {
    const unsigned req[3] = {k_.reqntid->x, k_.reqntid->y, k_.reqntid->z};
    const unsigned max[3] = {k_.maxntid->x, k_.maxntid->y, k_.maxntid->z};
    for (int i = 0; i < 3; ++i)
      if (req[i] > max[i])
        error(k_.loc, std::string("reqntid ") + "xyz"[i] + " = " + std::to_string(req[i]) + " exceeds maxntid " +
                          "xyz"[i] + " = " + std::to_string(max[i]));
  }
  if (k_.minnctapersm) {
    if (*k_.minnctapersm < 1 || *k_.minnctapersm > 32)
      error(k_.loc, "minnctapersm(" + std::to_string(*k_.minnctapersm) + ") must be between 1 and 32 blocks per SM");
    if (!k_.reqntid && !k_.maxntid)
      error(k_.loc, "minnctapersm needs reqntid or maxntid: the register limit it implies depends on the block size");
  }
  if (k_.maxnreg && (*k_.maxnreg < 1 || *k_.maxnreg > 255))
    error(k_.loc, "maxnreg(" + std::to_string(*k_.maxnreg) + ") must be between 1 and 255 registers per thread");
  for (const KernelParam& p : k_.params) {
    if (!p.align || !validValue(p.value)) continue;
    if (!std::has_single_bit(p.align))
      error(k_.loc, "parameter " + val(p.value) + " has alignment " + std::to_string(p.align) +
                        ", which is not a power of two");
    if (!k_.typeOf(p.value).isPtr())
      error(k_.loc, "parameter " + val(p.value) + " of type " + quoted(k_.typeOf(p.value)) +
                        " cannot take an alignment (only pointers can)");
  }
  for (const KernelParam& p : k_.params)
    if (validValue(p.value) && k_.typeOf(p.value).isWide())
      error(k_.loc, "parameter " + val(p.value) + " has the wide type " + quoted(k_.typeOf(p.value)) +
                        ", which only wgmma accumulators may have (not parameters)");
  const SharedDecl* firstDynamic = nullptr;
  for (const SharedDecl& s : k_.shared) {
    if (s.dynamic) {
      if (firstDynamic)
        error(s.loc, "shared array '@" + s.name + "' is the second dynamic one (after '@" + firstDynamic->name +
                         "'); a kernel has at most one");
      else
        firstDynamic = &s;
    }
    if (s.elem.isWide())
      error(s.loc, "shared array '@" + s.name + "' has the wide element type " + quoted(s.elem) +
                       ", which only wgmma accumulators may have");
    if (s.align < s.elem.bytes())
      error(s.loc, "shared array '@" + s.name + "' has alignment " + std::to_string(s.align) + ", below the " +
                       std::to_string(s.elem.bytes()) + "-byte size of its element type " + quoted(s.elem));
  }
  for (size_t i = 0; i < k_.tables.size(); ++i) {
    const TableDecl& t = k_.tables[i];
    const std::string what = "table '@" + t.name + "'";
    if (k_.function) error(t.loc, what + ": device functions declare no tables (a kernel's table.ld looks them up)");
    if (k_.findTable(t.name) != static_cast<int>(i)) error(t.loc, what + " is declared twice");
    if (!isTableElement(t.elem)) {
      error(t.loc, what + " holds " + quoted(t.elem) + "; tables hold u16, u32, u64, b16, b32 or b64 elements");
      continue;
    }
    if (t.values.empty() || t.values.size() > kMaxTableElements)
      error(t.loc, what + " has " + std::to_string(t.values.size()) + " elements (1 .. " +
                       std::to_string(kMaxTableElements) + ")");
    if (t.elem.bits() < 64 && std::any_of(t.values.begin(), t.values.end(), [&](uint64_t v) { return v >> t.elem.bits(); }))
      error(t.loc, what + " has a value wider than its element type " + quoted(t.elem));
  }
}

// ---- 1. structure, and the per-instruction walk -----------------------------------------------

void KernelVerifier::checkBlock(BlockId b) {
  const Block& block = k_.block(b);
  if (b.index == 0 && !block.params.empty()) error(block.loc, "entry block " + blk(b) + " cannot have parameters");
  for (ValueId p : block.params)
    if (validValue(p) && isTensorMap(k_.typeOf(p)))
      error(block.loc, "block parameter " + val(p) + " of " + blk(b) + " is a 'tmap'; " + std::string(kTensorMapUse) +
                           " and comes straight from a kernel parameter");
  if (!k_.terminator(b))
    error(block.loc, "block " + blk(b) + " does not end with a terminator (br, cbr or ret)");
  for (size_t pos = 0; pos < block.insts.size(); ++pos) {
    if (block.insts[pos].index >= k_.insts.size()) {
      error(block.loc, "block " + blk(b) + " lists an instruction that does not exist");
      continue;
    }
    const Inst& in = k_.inst(block.insts[pos]);
    if (hasFlag(in.op, OF_TERMINATOR) && pos + 1 < block.insts.size())
      error(in.loc, "terminator " + quoted(opText(in)) + " is not the last instruction of block " + blk(b));
    if (!checkWide(in) && checkTypes(in)) {
      checkOperands(in);
      checkModifierGroups(in);
      checkModifiers(in);
      checkMemory(in);
      checkSpecial(in);
      checkAsyncAndBits(in);
      checkTarget(in);
    }
    checkBranches(in);
    for (size_t i = 0; i < in.operands.size(); ++i)
      checkUse(in.operands[i], b, pos, in.loc,
               [&] { return "operand " + std::to_string(i + 1) + " of " + quoted(opText(in)); });
    for (const BlockCall& c : in.succs)
      for (size_t i = 0; i < c.args.size(); ++i)
        checkUse(c.args[i], b, pos, in.loc, [&] {
          return "argument " + std::to_string(i + 1) + " of " + quoted(opText(in)) +
                 (validBlock(c.block) ? " to " + blk(c.block) : std::string());
        });
  }
}

// ---- 2. types, operands and results -----------------------------------------------------------

bool KernelVerifier::checkTypes(const Inst& in) {
  const OpInfo& oi = info(in.op);
  auto op = [&] { return quoted(opText(in)); };
  if (in.op == Op::Call) return checkSignature(in);
  if ((oi.types != TC_NONE) != in.type.has_value()) {
    error(in.loc, op() + (in.type ? " takes no type annotation" : " needs a type annotation"));
    return false;
  }
  if (((oi.flags & OF_SRCTYPE) != 0) != in.srcType.has_value()) {
    error(in.loc, op() + (in.srcType ? " takes no source type" : " needs a source type (': S -> T')"));
    return false;
  }
  if (in.srcType && isTensorMap(*in.srcType)) {
    error(in.loc, op() + " cannot convert a 'tmap' (" + std::string(kTensorMapUse) + ")");
    return false;
  }
  if (in.type && !typeInClasses(*in.type, oi.types)) {
    error(in.loc, op() + " does not accept type " + quoted(*in.type) + " (expected " + classText(oi.types) + ")");
    return false;
  }
  std::optional<Type> want = resultTypeFor(in);
  if (want && !in.result) {
    error(in.loc, op() + " has no result value");
  } else if (!want && in.result) {
    error(in.loc, op() + " produces no result, but defines " + (validValue(in.result) ? val(in.result) : "a value"));
  } else if (want && validValue(in.result) && k_.typeOf(in.result) != *want) {
    error(in.loc, "result " + val(in.result) + " of " + op() + " has type " + quoted(k_.typeOf(in.result)) +
                      ", expected " + quoted(*want));
  }
  return true;
}

void KernelVerifier::checkOperands(const Inst& in) {
  if (in.op == Op::Ret) return void(checkSignature(in));
  const OpInfo& oi = info(in.op);
  bool variadic = (oi.flags & OF_VARIADIC) != 0;
  size_t want = variadic ? in.type->lanes : oi.operands.size();
  auto op = [&] { return quoted(opText(in)); };
  if (!variadic && operandCountFits(oi, in.operands.size())) want = in.operands.size();
  if (in.operands.size() != want) {
    error(in.loc, op() + (variadic ? " of " + quoted(*in.type) : std::string()) + " takes " + std::to_string(want) +
                      " operand(s), got " + std::to_string(in.operands.size()));
    return;
  }
  for (size_t i = 0; i < want; ++i) {
    ValueId v = in.operands[i];
    if (!validValue(v)) continue;  // reported as a use of an undefined value
    Type t = k_.typeOf(v);
    char letter = variadic ? '*' : oi.operands[i];
    if (isTensorMap(t) != (letter == 'M')) {
      error(in.loc, "operand " + std::to_string(i + 1) + " of " + op() + " (" + val(v) + ") " +
                        (letter == 'M' ? "has type " + quoted(t) + ", expected a 'tmap' kernel parameter"
                                       : "is a 'tmap'; " + std::string(kTensorMapUse)));
      continue;
    }
    std::string expected;
    switch (letter) {
      case 'T': if (t != *in.type) expected = quoted(*in.type); break;
      case 'S': if (t != *in.srcType) expected = quoted(*in.srcType); break;
      case '*': if (t != in.type->element()) expected = quoted(in.type->element()); break;
      case 'p': if (!t.isPred()) expected = "'pred'"; break;
      case 'P': if (!t.isPtr()) expected = "a pointer"; break;
      case 'i':
        if (!isScalar(t, Scalar::U32) && !isScalar(t, Scalar::S32) && !isScalar(t, Scalar::B32))
          expected = "'u32', 's32' or 'b32'";
        break;
      case 'o': if (t.isVector() || !(t.isInt() || t.isBits())) expected = "an integer offset"; break;
      case 'a': if (t != kMmaAFragment) expected = quoted(kMmaAFragment) + " (the A fragment)"; break;
      case 'b': if (t != kMmaBFragment) expected = quoted(kMmaBFragment) + " (the B fragment)"; break;
      case 'G': if (t != *in.type) expected = quoted(*in.type) + " (the accumulator, as annotated)"; break;
      case 'A':
        if (!isScalar(t, Scalar::B64) && t != kMmaAFragment)
          expected = "'b64' (a matrix descriptor) or " + quoted(kMmaAFragment) + " (the A fragment)";
        break;
      case 'd': if (!isScalar(t, Scalar::B64)) expected = "'b64' (a matrix descriptor)"; break;
      case 'F': {
        Type acc = mmaAccFragment(in.type->scalar);
        if (t != acc) expected = quoted(acc) + " (the accumulator fragment)";
        break;
      }
      default: break;
    }
    if (!expected.empty())
      error(in.loc, "operand " + std::to_string(i + 1) + " of " + op() + " (" + val(v) + ") has type " + quoted(t) +
                        ", expected " + expected);
  }
  if (in.op == Op::Extract && in.imm >= in.type->lanes)
    error(in.loc, op() + " lane " + std::to_string(in.imm) + " is out of range for " + quoted(*in.type) + " (" +
                      std::to_string(in.type->lanes) + " lanes)");
}

// ---- 3. modifiers -----------------------------------------------------------------------------

void KernelVerifier::checkModifierGroups(const Inst& in) {
  const OpInfo& oi = info(in.op);
  for (size_t g = 0; g < kModGroups; ++g) {
    if (in.mods[g] != Mod::None && !(oi.mods & (1u << g)))
      error(in.loc, quoted(oi.name) + " does not take modifier '." + std::string(modName(in.mods[g])) + "'");
    if ((oi.required & (1u << g)) && in.mods[g] == Mod::None)
      error(in.loc, quoted(oi.name) + " needs a modifier of group " + std::string(modGroupName(static_cast<ModGroup>(g))));
  }
}

// Why rounding modifier r is invalid on in (not cvt), or "" when it is valid.
std::string KernelVerifier::roundProblem(const Inst& in, Mod r) const {
  Type t = *in.type;
  bool half = t.scalar == Scalar::F16 || t.scalar == Scalar::BF16;
  switch (in.op) {
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Fma:
      if (!isIeeeRound(r)) return "expected .rn, .rz, .rm or .rp";
      if (!t.isFloat()) return "rounding needs a float type";
      if (half && r != Mod::Rn && !(in.op == Op::Fma && t.scalar == Scalar::BF16))
        return typeName(t) + " " + std::string(info(in.op).name) + " rounds with .rn only";
      return "";
    case Op::Div:
      if (!t.isFloat()) return "integer division takes no rounding modifier";
      if (isScalar(t, Scalar::F32)) {
        return isIeeeRound(r) || r == Mod::Approx || r == Mod::Full ? ""
                                                                     : "expected .approx, .full, .rn, .rz, .rm or .rp";
      }
      return isIeeeRound(r) ? "" : "expected .rn, .rz, .rm or .rp";
    case Op::Rcp:
    case Op::Sqrt:
      if (!isIeeeRound(r) && r != Mod::Approx) return "expected .approx, .rn, .rz, .rm or .rp";
      if (r == Mod::Approx && in.op == Op::Sqrt && !isScalar(t, Scalar::F32)) return "sqrt.approx exists for f32 only";
      if (r == Mod::Approx && isScalar(t, Scalar::F64) && in.mod(ModGroup::Ftz) == Mod::None)
        return "rcp.approx on f64 exists only as rcp.approx.ftz.f64";
      return "";
    case Op::CvtPack: return r == Mod::Rn || r == Mod::Rz ? "" : "packed conversions round with .rn or .rz";
    default:  // ex2, lg2, rsqrt, sin, cos, tanh
      return r == Mod::Approx ? "" : "only .approx exists";
  }
}

// cvt rounding (PTX ISA, cvt): float rounding where precision may be lost (integer or wider or
// different float source, float destination); integer rounding from a float to an integer or to
// the same float type.
std::string KernelVerifier::cvtRoundProblem(const Inst& in, Mod r) const {
  Type s = *in.srcType, t = *in.type;
  if (isIeeeRound(r)) {
    if (!t.isFloat())
      return s.isFloat() ? "float-to-integer conversions round with .rni, .rzi, .rmi or .rpi"
                         : "integer conversions take no rounding modifier";
    if (s.isFloat() && (t.bits() > s.bits() || s == t)) return "this float conversion is exact and takes no rounding";
    return "";
  }
  if (isIntRound(r)) {
    if (!s.isFloat()) return "rounding to an integral value needs a float source";
    if (t.isFloat() && t != s) return "rounding to an integral float needs the same source and destination type";
    return "";
  }
  return "expected .rn, .rz, .rm, .rp, .rni, .rzi, .rmi or .rpi";
}

void KernelVerifier::checkModifiers(const Inst& in) {
  if (!in.type) return;  // untyped ops (branches, bar.sync, membar) have no type-dependent modifiers
  Type t = *in.type;
  auto name = [&] { return quoted(info(in.op).name); };
  // Groups the op does not accept were reported by checkModifierGroups.
  auto mod = [&](ModGroup g) { return info(in.op).mods & (1u << static_cast<unsigned>(g)) ? in.mod(g) : Mod::None; };
  auto bad = [&](Mod m, const std::string& why) {
    error(in.loc, name() + " does not allow '." + std::string(modName(m)) + "' on " + typeText(in) + " (" + why + ")");
  };
  bool f32 = isScalar(t, Scalar::F32) || (in.srcType && isScalar(*in.srcType, Scalar::F32));
  bool f16 = isScalar(t, Scalar::F16);
  bool approx64 = (in.op == Op::Rcp || in.op == Op::Rsqrt) && in.has(Mod::Approx) && isScalar(t, Scalar::F64);
  if (Mod r = mod(ModGroup::Round); r != Mod::None) {
    std::string why = in.op == Op::Cvt ? cvtRoundProblem(in, r) : roundProblem(in, r);
    if (!why.empty()) bad(r, why);
  }
  if (Mod m = mod(ModGroup::Ftz); m != Mod::None) {
    if (in.op == Op::Cvt && !f32) bad(m, ".ftz on cvt needs an f32 source or destination");
    if (in.op != Op::Cvt && !f32 && !f16 && !approx64)
      bad(m, ".ftz needs f32 or f16, or f64 rcp.approx/rsqrt.approx");
  }
  if (Mod m = mod(ModGroup::Sat); m != Mod::None) {
    bool ok = in.op == Op::Cvt ? t.isInt() || (t.isFloat() && t.scalar != Scalar::BF16)
                               : isScalar(t, Scalar::F32) || f16 ||
                                     (isScalar(t, Scalar::S32) && (in.op == Op::Add || in.op == Op::Sub));
    if (!ok)
      bad(m, in.op == Op::Cvt ? "saturation needs an integer, f16, f32 or f64 destination"
                              : "saturation applies to f32 and f16, and to s32 add and sub");
  }
  if (Mod m = mod(ModGroup::Exact); m != Mod::None && !t.isFloat()) bad(m, ".exact marks float arithmetic only");
  if (Mod c = mod(ModGroup::Cmp); c != Mod::None) {
    if (isUnordered(c) && !t.isFloat()) bad(c, "unordered comparisons need a float type");
    if (t.isBits() && c != Mod::Eq && c != Mod::Ne) bad(c, "bit types compare with .eq or .ne only");
  }
  if (Mod a = mod(ModGroup::AtomOp); a != Mod::None) {
    std::vector<std::string> names;
    bool fits = false;
    for (Scalar s : atomTypes(a)) {
      fits = fits || isScalar(t, s);
      names.emplace_back(scalarName(s));
    }
    if (!fits) bad(a, "atom." + std::string(modName(a)) + " takes " + joinOr(names));
  }
  if (Mod c = mod(ModGroup::Cache); c != Mod::None) {
    bool load = c == Mod::Ca || c == Mod::Cg || c == Mod::Cs || c == Mod::Lu || c == Mod::Cv;
    bool store = c == Mod::Wb || c == Mod::Cg || c == Mod::Cs || c == Mod::Wt;
    if (in.op == Op::Ld && !load)
      error(in.loc, "'ld' does not allow '." + std::string(modName(c)) + "' (loads take .ca, .cg, .cs, .lu or .cv)");
    if (in.op == Op::St && !store)
      error(in.loc, "'st' does not allow '." + std::string(modName(c)) + "' (stores take .wb, .cg, .cs or .wt)");
  }
  if (mod(ModGroup::Volatile) != Mod::None)
    for (ModGroup g : {ModGroup::Cache, ModGroup::Nc})
      if (mod(g) != Mod::None)
        error(in.loc, quoted(opText(in)) + ": '.volatile' cannot be combined with '." +
                          std::string(modName(mod(g))) + "'");
}

// ---- 6. memory and address spaces -------------------------------------------------------------

void KernelVerifier::checkMemory(const Inst& in) {
  auto op = [&] { return quoted(opText(in)); };
  bool access = in.op == Op::Ld || in.op == Op::St || in.op == Op::Atom || in.op == Op::AtomCas;
  if (access && !in.operands.empty() && validValue(in.operands[0]) && k_.typeOf(in.operands[0]).isPtr()) {
    ValueId p = in.operands[0];
    AddrSpace as = k_.typeOf(p).space;
    auto ptr = [&] { return val(p) + " is " + quoted(k_.typeOf(p)); };
    if (in.op == Op::St && as == AddrSpace::Param) error(in.loc, op() + " cannot write param space: " + ptr());
    if ((in.op == Op::Atom || in.op == Op::AtomCas) && as != AddrSpace::Global && as != AddrSpace::Shared &&
        as != AddrSpace::Generic)
      error(in.loc, op() + " needs a global, shared or generic pointer, but " + ptr());
    if (in.op == Op::Ld && in.has(Mod::NcMod) && as != AddrSpace::Global)
      error(in.loc, op() + " reads global memory only, but " + ptr());
    if (in.has(Mod::VolatileMod) && (as == AddrSpace::Local || as == AddrSpace::Param))
      error(in.loc, op() + " addresses global, shared or generic memory only (PTX volatile), but " + ptr());
  }
  auto onTarget = [&] { return op() + " on " + quoted(*in.type) + " for " + m_.target.name() + ": "; };
  if (in.op == Op::AtomCas && in.type->bits() == 8)
    error(in.loc, onTarget() + "PTX has no 8-bit atom.cas; use a 16-bit or wider type");
  if ((in.op == Op::Ld || in.op == Op::St) && in.type->bytes() > 16)
    error(in.loc, onTarget() + "PTX vector loads and stores move at most 16 bytes");
  if (in.op == Op::Ld && in.has(Mod::NcMod) && (in.has(Mod::Lu) || in.has(Mod::Cv)))
    error(in.loc, onTarget() + "PTX .nc loads take only the .ca, .cg or .cs cache operators");
  if (in.op == Op::PtrAdd && in.operands.size() == 2 && validValue(in.operands[1])) {
    Type off = k_.typeOf(in.operands[1]);
    if (!off.isVector() && (off.isInt() || off.isBits()) && off.bits() != in.type->bits())
      error(in.loc, op() + " offset " + val(in.operands[1]) + " is " + quoted(off) + ", but " + quoted(*in.type) +
                        " offsets are " + std::to_string(in.type->bits()) + "-bit");
  }
  if (in.op == Op::SharedAddr) {
    if (in.symbol < 0 || static_cast<size_t>(in.symbol) >= k_.shared.size())
      error(in.loc, op() + " names no shared array of '@" + k_.name + "'");
    if (*in.type != Type::ptr(AddrSpace::Shared))
      error(in.loc, op() + " yields 'ptr.shared', not " + quoted(*in.type));
  }
  if (in.op == Op::TableLd) {
    if (in.symbol < 0 || static_cast<size_t>(in.symbol) >= k_.tables.size())
      error(in.loc, op() + " names no table of '@" + k_.name + "'");
    else if (*in.type != k_.tables[in.symbol].elem)
      error(in.loc, op() + " is annotated " + quoted(*in.type) + ", but table '@" + k_.tables[in.symbol].name +
                        "' holds " + quoted(k_.tables[in.symbol].elem));
  }
}

// ---- 9. special ops ---------------------------------------------------------------------------

void KernelVerifier::checkSpecial(const Inst& in) {
  if (!in.type) return;
  auto op = [&] { return quoted(opText(in)); };
  Type t = *in.type;
  if (in.op == Op::VoteSync) {
    Type want = in.has(Mod::Ballot) ? Type::of(Scalar::B32) : Type::pred();
    if (t != want) error(in.loc, op() + " yields " + quoted(want) + ", not " + quoted(t));
  }
  if (in.op == Op::Cvt) {
    Type s = *in.srcType;
    if (s.isVector() || s.isPtr() || s.isPred())
      error(in.loc, op() + " source type " + quoted(s) + " is not a scalar integer, bits or float type");
    else if (s == t && !(t.isFloat() && (isIntRound(in.mod(ModGroup::Round)) || in.has(Mod::SatMod) ||
                                         in.has(Mod::FtzMod))))
      error(in.loc, op() + " from " + quoted(s) + " to " + quoted(t) +
                        " converts nothing (a same-type float cvt needs .rni, .rzi, .rmi, .rpi, .sat or .ftz)");
  }
  if (in.op == Op::Mma || in.op == Op::Ldmatrix || in.op == Op::CvtPack) checkTensorCore(in);
  if (in.op == Op::WgmmaMma) checkWgmma(in);
  if (in.op == Op::Bitcast) {
    Type s = *in.srcType;
    if (s.scalar == Scalar::Pred)
      error(in.loc, op() + " cannot convert from 'pred'");
    else if (s.bits() * s.lanes != t.bits() * t.lanes)
      error(in.loc, op() + " from " + quoted(s) + " (" + std::to_string(s.bits() * s.lanes) + " bits) to " + quoted(t) +
                        " (" + std::to_string(t.bits() * t.lanes) + " bits) changes the width");
  }
}

// ---- 10. tensor cores --------------------------------------------------------------------------

// B's own fp8 format (b_e4m3, b_e5m2) on mma and wgmma: only beside A's, and only when it differs
// (one spelling per form: B takes A's format unless told otherwise).
std::optional<std::string> fp8BProblem(const Inst& in) {
  const Mod b = in.mod(ModGroup::Fp8B), a = in.mod(ModGroup::Fp8);
  if (b == Mod::None) return std::nullopt;
  if (a == Mod::None)
    return "gives B's fp8 format (." + std::string(modName(b)) + ") without A's: write A's (.e4m3 or .e5m2) before it";
  if (fp8FormatOfB(in) == a)
    return "repeats A's format in ." + std::string(modName(b)) + "; B takes A's format unless it differs: leave it out";
  return std::nullopt;
}

void KernelVerifier::checkTensorCore(const Inst& in) {
  auto op = [&] { return quoted(opText(in)); };
  Type t = *in.type;
  if (auto why = in.op == Op::Mma ? fp8BProblem(in) : std::nullopt) error(in.loc, op() + " " + *why);
  if (in.op == Op::Mma) {
    if (!mmaFormExists(in.mod(ModGroup::Shape), in.srcType->scalar, t, in.mod(ModGroup::Fp8)))
      error(in.loc, op() + " has no form " + typeText(in) +
                        " (m16n8k16: bf16 -> f32, f16 -> f32, f16 -> f16; m16n8k8: f32 -> f32, multiplied as tf32; "
                        "m16n8k32: s8 -> s32, u8 -> s32; m16n8k32.e4m3 and .e5m2: b8 -> f32)");
  } else if (in.op == Op::Ldmatrix) {
    if (t.scalar != Scalar::B32)
      error(in.loc, op() + " yields 'b32', 'v2.b32' or 'v4.b32' (one register per 8x8 matrix), not " + quoted(t));
    if (!in.operands.empty() && validValue(in.operands[0]) && k_.typeOf(in.operands[0]).isPtr() &&
        k_.typeOf(in.operands[0]).space != AddrSpace::Shared)
      error(in.loc, op() + " reads shared memory only, but " + val(in.operands[0]) + " is " +
                        quoted(k_.typeOf(in.operands[0])));
  } else if ((t.scalar != Scalar::F16 && t.scalar != Scalar::BF16) || t.isVector() ||
             !isScalar(*in.srcType, Scalar::F32)) {
    error(in.loc, op() + " converts 'f32 -> f16' or 'f32 -> bf16' (two f32 into one b32), not " + typeText(in));
  }
}

// ---- 13. wide vectors and wgmma -----------------------------------------------------------------

bool KernelVerifier::checkWide(const Inst& in) {
  // Only the lane counts the text form has (8 ... 128, powers of two): IR built in C++ could hold
  // others, which the printer would write and no parser read back (a bundle's IR included).
  auto oddLanes = [](Type t) { return t.isWide() && !std::has_single_bit(unsigned{t.lanes}); };
  const Type resultType = validValue(in.result) ? k_.typeOf(in.result) : Type{};
  if ((in.type && oddLanes(*in.type)) || oddLanes(resultType)) {
    error(in.loc, quoted(opText(in)) + " has the wide type " +
                      quoted(in.type && oddLanes(*in.type) ? *in.type : resultType) +
                      "; truenoc's wide vectors have 8, 16, 32, 64 or 128 lanes (a wgmma's N is then a power of two)");
    return true;
  }
  auto refuse = [&](Type t, const std::string& where) {
    error(in.loc, where + " of " + quoted(opText(in)) + " has the wide type " + quoted(t) +
                      "; wide vectors are allowed only as wgmma.mma_async's accumulator and result, extract's " +
                      "operand, pack's result, block parameters and branch arguments");
    return true;
  };
  bool wideResult = in.op == Op::WgmmaMma || in.op == Op::Pack;
  bool wideOperand0 = in.op == Op::WgmmaMma || in.op == Op::Extract;
  for (size_t i = 0; i < in.operands.size(); ++i)
    if (validValue(in.operands[i]) && k_.typeOf(in.operands[i]).isWide() && !(i == 0 && wideOperand0))
      return refuse(k_.typeOf(in.operands[i]), "operand " + std::to_string(i + 1) + " (" + val(in.operands[i]) + ")");
  if (validValue(in.result) && k_.typeOf(in.result).isWide() && !wideResult)
    return refuse(k_.typeOf(in.result), "result " + val(in.result));
  if (in.srcType && in.srcType->isWide()) return refuse(*in.srcType, "the source type");
  if (in.type && in.type->isWide() && !wideResult && !wideOperand0) return refuse(*in.type, "the annotated type");
  return false;
}

void KernelVerifier::checkWgmma(const Inst& in) {
  auto op = [&] { return quoted(opText(in)); };
  if (auto why = fp8BProblem(in)) error(in.loc, op() + " " + *why);
  Scalar s = in.srcType->scalar;
  const bool fp8 = in.mod(ModGroup::Fp8) != Mod::None;
  if (fp8 && (s != Scalar::B8 || in.srcType->isVector()))
    error(in.loc, op() + " multiplies fp8 codes, 'b8', not " + quoted(*in.srcType));
  else if (!fp8 && ((s != Scalar::BF16 && s != Scalar::F16) || in.srcType->isVector()))
    error(in.loc, op() + " multiplies 'bf16' or 'f16' elements (or 'b8' fp8 codes with .e4m3 or .e5m2), not " +
                      quoted(*in.srcType));
  if (fp8 && (in.has(Mod::TransAMod) || in.has(Mod::TransBMod)))
    error(in.loc, op() + " reads fp8 operands K-major only; trans_a and trans_b are for bf16 and f16");
  uint64_t n = in.imm;
  if (n < 8 || n > 256 || n % 8) {
    error(in.loc, op() + " has N = " + std::to_string(n) + "; N is a multiple of 8 from 8 to 256");
  } else if (*in.type != Type::of(Scalar::F32, static_cast<uint8_t>(std::min<uint64_t>(n / 2, 255)))) {
    error(in.loc, op() + " with N = " + std::to_string(n) + " accumulates into 'v" + std::to_string(n / 2) +
                      ".f32', not " + quoted(*in.type) +
                      (std::has_single_bit(n) ? "" : " (truenoc's wide vectors have 8, 16, 32, 64 or 128 lanes)"));
  }
  if (in.operands.size() != 4) return;
  if (fp8 && validValue(in.operands[1]) && k_.typeOf(in.operands[1]) == kMmaAFragment)
    error(in.loc, op() + " reads fp8 A from registers (" + val(in.operands[1]) +
                      "), which truenoc does not model; give A by a descriptor");
  if (in.has(Mod::TransAMod) && validValue(in.operands[1]) && k_.typeOf(in.operands[1]) == kMmaAFragment)
    error(in.loc, op() + " reads A from registers (" + val(in.operands[1]) +
                      "), which cannot be transposed; trans_a needs a descriptor");
  ValueId acc = in.operands[0];
  if (validValue(acc) && uses_[acc.index] != 1)
    error(in.loc, "the accumulator " + val(acc) + " of " + op() + " has " + std::to_string(uses_[acc.index]) +
                      " uses; it must have this wgmma as its only use (the result takes its registers)");
}

// ---- 11. asynchronous copies and bit ops --------------------------------------------------------

void KernelVerifier::checkAsyncAndBits(const Inst& in) {
  auto op = [&] { return quoted(opText(in)); };
  if (in.op == Op::SetMaxNRegInc || in.op == Op::SetMaxNRegDec) {
    if (in.imm < 24 || in.imm > 256 || in.imm % 8)
      error(in.loc, op() + " sets " + std::to_string(in.imm) + " registers, but the count must be a multiple of 8 from 24 to 256");
    // ptxas drops a setmaxnreg (C7508) unless it knows the register count at entry.
    if (!k_.maxnreg && !(k_.minnctapersm && (k_.reqntid || k_.maxntid)))
      error(in.loc, op() + " needs the kernel's register count at entry: give the kernel maxnreg(N), or " +
                        "minnctapersm(N) with reqntid or maxntid (ptxas ignores it otherwise)");
  }
  if (in.op == Op::Lop3 && in.imm > 0xFF)
    error(in.loc, op() + " truth table " + std::to_string(in.imm) + " does not fit in 8 bits");
  if (in.op == Op::BarNamedSync || in.op == Op::BarNamedArrive) {
    if (in.imm < 1 || in.imm > 15)
      error(in.loc, op() + " names barrier " + std::to_string(in.imm) + "; named barriers are 1 to 15 (0 is bar.sync's)");
    // A literal count is checked here; one computed at run time by the interpreter.
    if (in.operands.size() == 1 && validValue(in.operands[0])) {
      const ValueInfo& v = k_.value(in.operands[0]);
      if (v.kind == DefKind::Inst && k_.inst(InstId{v.owner}).op == Op::Const) {
        uint64_t n = k_.inst(InstId{v.owner}).imm;
        if (n < 32 || n > 1024 || n % 32)
          error(in.loc, op() + " counts " + std::to_string(n) + " threads; the count is a multiple of 32 from 32 to 1024");
        else if (const std::optional<Dim3>& block = k_.reqntid ? k_.reqntid : k_.maxntid; block && n > (block->total() + 31) / 32 * 32)
          error(in.loc, op() + " counts " + std::to_string(n) + " threads, more than the block's " +
                            std::to_string(block->total()));
      }
    }
  }
  if (in.op == Op::TmaLoad || in.op == Op::TmaStore || in.op == Op::TmaLoad3d || in.op == Op::TmaStore3d) {
    // dst and bar (load), src (store): shared addresses, as the PTX spells them (.shared::cluster, ::cta).
    using Slot = std::pair<size_t, const char*>;
    static constexpr Slot load[] = {{0, "destination"}, {4, "mbarrier"}}, store[] = {{3, "source"}};
    static constexpr Slot load3[] = {{0, "destination"}, {5, "mbarrier"}}, store3[] = {{4, "source"}};
    const std::span<const Slot> slots = in.op == Op::TmaLoad     ? std::span<const Slot>(load)
                                        : in.op == Op::TmaStore  ? std::span<const Slot>(store)
                                        : in.op == Op::TmaLoad3d ? std::span<const Slot>(load3)
                                                                 : std::span<const Slot>(store3);
    for (auto [i, what] : slots) {
      if (in.operands.size() <= i || !validValue(in.operands[i])) continue;
      Type t = k_.typeOf(in.operands[i]);
      if (t.isPtr() && t.space != AddrSpace::Shared)
        error(in.loc, op() + " " + what + " " + val(in.operands[i]) + " is " + quoted(t) + ", expected 'ptr.shared'");
    }
    return;
  }
  if (in.op == Op::MbarInit || in.op == Op::MbarArrive || in.op == Op::MbarArriveTx || in.op == Op::MbarTryWait) {
    if (!in.operands.empty() && validValue(in.operands[0]) && k_.typeOf(in.operands[0]).isPtr() &&
        k_.typeOf(in.operands[0]).space != AddrSpace::Shared)
      error(in.loc, op() + " takes the mbarrier's ptr.shared address, but " + val(in.operands[0]) + " is " +
                        quoted(k_.typeOf(in.operands[0])));
    return;
  }
  if (in.op != Op::CpAsync) return;
  Mod cache = in.mod(ModGroup::Cache);
  if (cache != Mod::None && cache != Mod::Ca && cache != Mod::Cg)
    error(in.loc, op() + ": cp.async takes the cache operator .ca or .cg, not '." + std::string(modName(cache)) + "'");
  if (in.imm != 4 && in.imm != 8 && in.imm != 16)
    error(in.loc, op() + " copies 4, 8 or 16 bytes, not " + std::to_string(in.imm));
  else if (cache == Mod::Cg && in.imm != 16)
    error(in.loc, op() + " copies " + std::to_string(in.imm) + " bytes, but cp.async.cg copies 16 bytes only; use .ca");
  auto space = [&](size_t i, AddrSpace want, const char* what) {
    if (in.operands.size() <= i || !validValue(in.operands[i])) return;
    Type t = k_.typeOf(in.operands[i]);
    if (t.isPtr() && t.space != want)
      error(in.loc, op() + " " + what + " " + val(in.operands[i]) + " is " + quoted(t) + ", expected " +
                        quoted(Type::ptr(want)));
  };
  space(0, AddrSpace::Shared, "destination");
  space(1, AddrSpace::Global, "source");
  if (in.operands.size() == 3 && validValue(in.operands[2])) {
    const ValueInfo& vi = k_.value(in.operands[2]);
    if (vi.kind == DefKind::Inst && vi.owner < k_.insts.size()) {
      const Inst& def = k_.insts[vi.owner];
      bool sized = in.imm == 4 || in.imm == 8 || in.imm == 16;
      if (def.op == Op::Const && def.type && !def.type->isFloat() && def.type->bits() == 32 && sized) {
        int64_t n = def.type->isSigned() ? static_cast<int32_t>(def.imm) : static_cast<int64_t>(def.imm & 0xFFFFFFFF);
        if (n < 0 || n > static_cast<int64_t>(in.imm))
          error(in.loc, op() + " src-size " + std::to_string(n) + " is outside 0.." + std::to_string(in.imm) +
                            " (the copy size)");
      }
    }
  }
}

// ---- 7. target gating -------------------------------------------------------------------------

void KernelVerifier::checkTarget(const Inst& in) {
  auto fits = [&](unsigned sm, unsigned ptx) { return m_.target.sm >= sm && m_.ptx >= ptx; };
  const OpInfo& oi = info(in.op);
  if ((oi.flags & OF_SM90A) && !(m_.target == Target{90, true} && m_.ptx >= oi.minPTX)) {
    error(in.loc, quoted(opText(in)) + " requires sm_90a and " + ptxText(oi.minPTX) + " (it is specific to that " +
                      "architecture), but the module targets " + m_.target.name() + " with " + ptxText(m_.ptx));
    return;
  }
  std::string what;
  unsigned needSM = oi.minSM, needPTX = oi.minPTX;
  if (fits(oi.minSM, oi.minPTX)) {
    for (const TypeGate& g : typeGates()) {
      std::optional<Type> gated = g.which == 'S' ? in.srcType : in.type;
      if (g.op != in.op || !gated || gated->scalar != g.scalar || fits(g.minSM, g.minPTX)) continue;
      needSM = g.minSM;
      needPTX = g.minPTX;
      what = in.op == Op::Mma ? " on fp8 codes"
                              : (in.op == Op::Cvt ? (g.which == 'S' ? " from " : " to ") : " on ") + quoted(*gated);
      break;
    }
    if (what.empty()) return;
  }
  error(in.loc, quoted(opText(in)) + what + " requires " + Target{needSM, false}.name() + " and " + ptxText(needPTX) +
                    ", but the module targets " + m_.target.name() + " with " + ptxText(m_.ptx));
}

// ---- 12. device functions -----------------------------------------------------------------------

// call's operands, type and result follow its callee; ret passes back what the function returns
// (its type annotation and result are checked like any op's). Returns false: the other
// per-instruction checks do not apply to a call.
bool KernelVerifier::checkSignature(const Inst& in) {
  auto typeList = [&](const Kernel& f) {
    std::string s;
    for (const KernelParam& p : f.params) s += (s.empty() ? "" : ", ") + typeName(f.typeOf(p.value));
    return "(" + s + ")";
  };
  if (in.op == Op::Ret) {
    size_t want = k_.returns ? 1 : 0;
    std::string where = k_.function ? "function '@" + k_.name + "'" : "a kernel";
    if (in.operands.size() != want) {
      error(in.loc, "'ret' in " + where + " takes " + std::to_string(want) + " operand(s), got " +
                        std::to_string(in.operands.size()));
    } else if (want && validValue(in.operands[0]) && k_.typeOf(in.operands[0]) != *k_.returns) {
      error(in.loc, "'ret' passes " + val(in.operands[0]) + " of type " + quoted(k_.typeOf(in.operands[0])) + ", but " +
                        where + " returns " + quoted(*k_.returns));
    }
    return false;
  }
  if (in.symbol < 0 || static_cast<size_t>(in.symbol) >= m_.functions.size()) {
    error(in.loc, "'call' names no function of the module");
    return false;
  }
  const Kernel& f = m_.functions[in.symbol];
  std::string callee = "'@" + f.name + "'";
  if (in.operands.size() != f.params.size()) {
    error(in.loc, "call to " + callee + " passes " + std::to_string(in.operands.size()) + " argument(s); it takes " +
                      std::to_string(f.params.size()) + " " + typeList(f));
    return false;
  }
  for (size_t i = 0; i < in.operands.size(); ++i) {
    if (!validValue(in.operands[i])) continue;
    Type have = k_.typeOf(in.operands[i]), need = f.typeOf(f.params[i].value);
    if (have != need)
      error(in.loc, "argument " + std::to_string(i + 1) + " of the call to " + callee + " (" + val(in.operands[i]) +
                        ") has type " + quoted(have) + ", expected " + quoted(need));
  }
  if (in.type != f.returns)
    error(in.loc, "call to " + callee + (f.returns ? " returns " + quoted(*f.returns) : std::string(" returns nothing")) +
                      ", but is annotated " + (in.type ? quoted(*in.type) : std::string("with no type")));
  else if (in.type.has_value() != in.result.valid())
    error(in.loc, "call to " + callee + (in.type ? " needs a result value" : " has no result to define"));
  if (in.op == Op::Call && k_.function && &f == &k_)
    error(in.loc, "function " + callee + " calls itself; device functions are inlined and cannot recurse");
  return false;
}

// ---- 1 and 5. branch targets and arguments ----------------------------------------------------

void KernelVerifier::checkBranches(const Inst& in) {
  auto op = [&] { return quoted(opText(in)); };
  size_t want = in.op == Op::Br ? 1 : in.op == Op::Cbr ? 2 : 0;
  if (in.succs.size() != want) {
    error(in.loc, op() + " takes " + std::to_string(want) + " branch target(s), got " + std::to_string(in.succs.size()));
    return;
  }
  for (const BlockCall& c : in.succs) {
    if (!validBlock(c.block)) {
      error(in.loc, op() + " branches to a block that does not exist");
      continue;
    }
    const Block& target = k_.block(c.block);
    if (c.block.index == 0) error(in.loc, op() + " branches to the entry block " + blk(c.block) + ", which cannot be a target");
    if (c.args.size() != target.params.size()) {
      error(in.loc, op() + " passes " + std::to_string(c.args.size()) + " argument(s) to " + blk(c.block) + ", which takes " +
                        std::to_string(target.params.size()));
      continue;
    }
    for (size_t i = 0; i < c.args.size(); ++i) {
      if (!validValue(c.args[i]) || !validValue(target.params[i])) continue;
      Type have = k_.typeOf(c.args[i]), need = k_.typeOf(target.params[i]);
      if (have != need)
        error(in.loc, "argument " + std::to_string(i + 1) + " of " + op() + " to " + blk(c.block) + " (" + val(c.args[i]) +
                          ") has type " + quoted(have) + ", but parameter " + val(target.params[i]) + " is " +
                          quoted(need));
    }
  }
}

// ---- 4. SSA dominance -------------------------------------------------------------------------

template <class Describe>
void KernelVerifier::checkUse(ValueId v, BlockId useBlock, size_t usePos, SourceLoc loc, const Describe& what) {
  if (!validValue(v) || !defined_[v.index]) {
    error(loc, what() + " uses " + (validValue(v) ? val(v) + ", which is not defined" : std::string("an invalid value")));
    return;
  }
  BlockId def = defBlock_[v.index];
  if (!def.valid() || !dom_.reachable(useBlock)) return;  // kernel parameter, or unreachable use
  if (def == useBlock) {
    if (defPos_[v.index] >= static_cast<int>(usePos)) error(loc, what() + " uses " + val(v) + " before its definition");
  } else if (!dom_.dominates(def, useBlock)) {
    error(loc, what() + " uses " + val(v) + ", whose definition in " + blk(def) + " does not dominate " + blk(useBlock));
  }
}

// Recursion through other functions (a calling b calling a): a depth-first walk of the call graph.
void checkNoRecursion(const Module& m, Diagnostics& diags) {
  enum class Mark : uint8_t { New, Open, Done };
  std::vector<Mark> mark(m.functions.size(), Mark::New);
  auto visit = [&](auto& self, size_t f) -> void {
    mark[f] = Mark::Open;
    const Kernel& fn = m.functions[f];
    for (const Inst& in : fn.insts) {
      if (in.op != Op::Call || in.symbol < 0 || static_cast<size_t>(in.symbol) >= m.functions.size()) continue;
      auto g = static_cast<size_t>(in.symbol);
      if (mark[g] == Mark::Open && g != f)
        diags.report(Severity::Error, m.fileName(in.loc), in.loc,
                     "call to '@" + m.functions[g].name + "' from '@" + fn.name +
                         "' is recursive; device functions are inlined and cannot recurse");
      else if (mark[g] == Mark::New)
        self(self, g);
    }
    mark[f] = Mark::Done;
  };
  for (size_t f = 0; f < m.functions.size(); ++f)
    if (mark[f] == Mark::New) visit(visit, f);
}

}  // namespace

bool verifyKernel(const Module& m, const Kernel& k, Diagnostics& diags) {
  unsigned before = diags.errors();
  KernelVerifier(m, k, diags).run();
  return diags.errors() == before;
}

Target requiredTarget(const Module& m) {
  unsigned need = 0;
  bool archSpecific = false;
  auto visit = [&](const Kernel& k) {
    for (const Block& b : k.blocks)
      for (InstId id : b.insts) {
        const Inst& in = k.inst(id);
        need = std::max(need, info(in.op).minSM);
        archSpecific = archSpecific || (info(in.op).flags & OF_SM90A);
        for (const TypeGate& g : typeGates()) {
          std::optional<Type> gated = g.which == 'S' ? in.srcType : in.type;
          if (g.op == in.op && gated && gated->scalar == g.scalar) need = std::max(need, g.minSM);
        }
      }
  };
  for (const Kernel& f : m.functions) visit(f);
  for (const Kernel& k : m.kernels) visit(k);
  return archSpecific ? Target{90, true} : Target{need, false};
}

bool verify(const Module& m, Diagnostics& diags) {
  unsigned before = diags.errors();
  if (unsigned need = m.target.minPtx(); m.ptx < need) {
    SourceLoc loc = m.kernels.empty() ? SourceLoc{} : m.kernels.front().loc;
    diags.report(Severity::Error, m.fileName(loc), loc,
                 ptxText(m.ptx) + " does not support " + m.target.name() + " (it needs " +
                     ptxText(need) + " or later)");
  }
  for (const Kernel& f : m.functions) verifyKernel(m, f, diags);
  for (const Kernel& k : m.kernels) verifyKernel(m, k, diags);
  checkNoRecursion(m, diags);
  return diags.errors() == before;
}

}  // namespace tn::ir
