#include "ir/Builder.h"

#include <array>
#include <bit>
#include <cmath>
#include <limits>

#include "ir/Float16.h"

namespace tn::ir {

namespace {

// The project root, derived from this file's own path (ROOT/ir/Builder.cpp): the project's
// kernels record root-relative file names, so locations (and anything built from them) do not
// depend on where the tree is checked out.
const std::string& projectRoot() {
  static const std::string root = [] {
    std::string self = Here::current().file_name();
    size_t cut = self.rfind("ir/Builder.cpp");
    return cut == std::string::npos ? std::string() : self.substr(0, cut);
  }();
  return root;
}

std::string displayPath(std::string_view file) {
  const std::string& root = projectRoot();
  if (!root.empty() && file.starts_with(root)) file.remove_prefix(root.size());
  return std::string(file);
}

uint64_t widthMask(Type t) {
  unsigned w = t.isPred() ? 1 : t.bits();
  return w >= 64 ? ~uint64_t{0} : (uint64_t{1} << w) - 1;
}

uint64_t floatBits(Type t, double d) {
  switch (t.scalar) {
    case Scalar::F32: return std::bit_cast<uint32_t>(static_cast<float>(d));
    case Scalar::F64: return std::bit_cast<uint64_t>(d);
    case Scalar::F16: return f64ToF16(d);
    case Scalar::BF16: return f64ToBf16(d);
    default: return 0;
  }
}

// "prefix.tag", or "" when the prefix is empty (an unnamed helper leaves its values unnamed).
std::string derived(std::string_view prefix, std::string_view tag) {
  if (prefix.empty()) return {};
  return std::string(prefix) + "." + std::string(tag);
}

std::string opText(Op op) { return "'" + std::string(info(op).name) + "'"; }

// The fp8 formats of an mma or wgmma: A's, and B's where it differs (the Fp8B group).
void setFp8Formats(Inst& in, Mod aFormat, Mod bFormat) {
  in.setMod(aFormat);
  if (bFormat != aFormat) in.setMod(bFormat == Mod::E4m3Mod ? Mod::BE4m3Mod : Mod::BE5m2Mod);
}

}  // namespace

// ---- Value and Operand ------------------------------------------------------------------------

Value Value::named(std::string_view name) const {
  if (valid()) builder_->rename(*this, name);
  return *this;
}

uint64_t Operand::bitsAs(Type t) const {
  if (t.isFloat()) {
    double d = isFloat_ ? real_ : isSigned_ ? static_cast<double>(static_cast<int64_t>(bits_)) : static_cast<double>(bits_);
    return floatBits(t, d);
  }
  if (t.isPred()) return (isFloat_ ? real_ != 0 : bits_ != 0) ? 1 : 0;
  uint64_t v = bits_;
  if (isFloat_) {
    double r = std::trunc(real_);
    v = std::isfinite(r) && std::fabs(r) < 9.2e18 ? static_cast<uint64_t>(static_cast<int64_t>(r)) : 0;
  }
  return v & widthMask(t);
}

// ---- construction, diagnostics, blocks ------------------------------------------------------

KernelBuilder::KernelBuilder(Module& m, std::string_view name, Here loc) : module_(m), kernelIndex_(m.kernels.size()) {
  bool duplicate = m.findKernel(name) != nullptr;
  m.kernels.emplace_back();
  Kernel& k = kernel();
  k.name = std::string(name);
  k.loc = at(loc);
  if (duplicate) error(loc, "duplicate kernel '@" + std::string(name) + "'");
  insert_ = newBlock("entry", loc);
}

SourceLoc KernelBuilder::at(const Here& loc) {
  return {module_.fileId(displayPath(loc.file_name())), loc.line(), loc.column()};
}

void KernelBuilder::error(const Here& loc, std::string message) {
  diags_.report(Severity::Error, displayPath(loc.file_name()), at(loc), std::move(message));
}

void KernelBuilder::rename(Value v, std::string_view name) {
  if (v.builder() == this) kernel().value(v.id()).name = std::string(name);
}

Value KernelBuilder::param(Type t, std::string_view name, unsigned align, Here loc) {
  if (align != 0 && (!t.isPtr() || !std::has_single_bit(align))) {
    error(loc, "parameter alignment must be a power of two on a pointer parameter");
    align = 0;
  }
  return makeValue(kernel().addParam(t, std::string(name), align));
}

SharedArray KernelBuilder::shared(std::string_view name, Type elem, uint64_t count, unsigned align, Here loc) {
  Kernel& k = kernel();
  if (k.findShared(name) >= 0) error(loc, "duplicate shared array '@" + std::string(name) + "'");
  if (elem.isPtr() || elem.isPred()) error(loc, "shared arrays hold data types, not '" + typeName(elem) + "'");
  if (align != 0 && !std::has_single_bit(align)) error(loc, "shared alignment must be a power of two");
  SharedDecl d;
  d.name = std::string(name);
  d.elem = elem;
  d.count = count;
  d.dynamic = count == 0;
  d.align = align ? align : elem.bytes();
  d.loc = at(loc);
  k.shared.push_back(d);
  return {static_cast<int>(k.shared.size() - 1), elem, count};
}

SharedArray KernelBuilder::shared_dynamic(std::string_view name, Type elem, unsigned align, Here loc) {
  return shared(name, elem, 0, align, loc);
}

Table KernelBuilder::table(std::string_view name, Type elem, std::vector<uint64_t> values, Here loc) {
  Kernel& k = kernel();
  if (int i = k.findTable(name); i >= 0) {
    const TableDecl& d = k.tables[static_cast<size_t>(i)];
    if (d.elem != elem || d.values != values) error(loc, "table '@" + std::string(name) + "' declared again with other contents");
    return {i, d.elem};
  }
  TableDecl d;
  d.name = std::string(name);
  d.elem = elem;
  d.values = std::move(values);
  d.loc = at(loc);
  k.tables.push_back(std::move(d));
  return {static_cast<int>(k.tables.size() - 1), elem};
}

void KernelBuilder::reqntid(unsigned x, unsigned y, unsigned z) { kernel().reqntid = Dim3{x, y, z}; }
void KernelBuilder::maxntid(unsigned x, unsigned y, unsigned z) { kernel().maxntid = Dim3{x, y, z}; }
void KernelBuilder::minnctapersm(unsigned blocks) { kernel().minnctapersm = blocks; }
void KernelBuilder::maxnreg(unsigned registers) { kernel().maxnreg = registers; }

std::string KernelBuilder::freshLabel(std::string_view label, std::initializer_list<std::string_view> suffixes) {
  for (unsigned n = 1;; ++n) {
    std::string cand(label);
    if (n > 1) cand += std::to_string(n);
    bool free = true;
    for (std::string_view s : suffixes) free = free && !blockNames_.contains(cand + std::string(s));
    if (!free) continue;
    for (std::string_view s : suffixes) blockNames_.insert(cand + std::string(s));
    return cand;
  }
}

BlockId KernelBuilder::newBlock(std::string name, const Here& loc) {
  blockNames_.insert(name);
  return kernel().addBlock(std::move(name), at(loc));
}

BlockId KernelBuilder::block(std::string_view name, Here loc) { return newBlock(freshLabel(name, {""}), loc); }

Value KernelBuilder::block_param(BlockId b, Type t, std::string_view name) {
  return makeValue(kernel().addBlockParam(b, t, std::string(name)));
}

std::vector<Value> KernelBuilder::block_params(BlockId b) {
  std::vector<Value> out;
  for (ValueId v : kernel().block(b).params) out.push_back(makeValue(v));
  return out;
}

bool KernelBuilder::terminated() const {
  return module_.kernels[kernelIndex_].terminator(insert_) != nullptr;
}

// ---- appending instructions -------------------------------------------------------------------

bool KernelBuilder::checkOperand(Value v, const Here& loc) {
  if (!v.valid()) {
    error(loc, "use of an empty Value (a default-constructed handle or the result of a failed builder call)");
    return false;
  }
  if (v.builder() != this) {
    error(loc, "use of a value that belongs to another kernel builder");
    return false;
  }
  return true;
}

Value KernelBuilder::append(Inst in, std::string_view name, const Here& loc) {
  Kernel& k = kernel();
  if (terminated())
    error(loc, opText(in.op) + " added after the terminator of block ^" + k.block(insert_).name);
  in.loc = at(loc);
  std::optional<Type> rt = resultTypeFor(in);
  InstId id = k.append(insert_, std::move(in), rt, std::string(name));
  ValueId result = k.inst(id).result;
  return result ? makeValue(result) : Value();
}

Value KernelBuilder::emit(Inst in, const std::vector<Value>& operands, std::string_view name, const Here& loc) {
  for (const Value& v : operands)
    if (!checkOperand(v, loc)) return Value();
  for (const Value& v : operands) in.operands.push_back(v.id());
  return append(std::move(in), name, loc);
}

// The shape the text format needs (operand count, type annotation, modifier groups); type rules
// beyond that are the verifier's.
Value KernelBuilder::op(Op code, std::optional<Type> type, const std::vector<Value>& operands, Mods mods,
                        std::string_view name, Here loc) {
  return op_imm(code, type, operands, 0, mods, name, loc);
}

Value KernelBuilder::op_imm(Op code, std::optional<Type> type, const std::vector<Value>& operands, uint64_t imm,
                            Mods mods, std::string_view name, Here loc) {
  const OpInfo& oi = info(code);
  Inst in;
  in.op = code;
  in.imm = imm;
  if (oi.types != TC_NONE) {
    if (!type) {
      error(loc, opText(code) + " needs a type");
      return Value();
    }
    in.type = type;
  } else if (type) {
    error(loc, opText(code) + " takes no type");
    return Value();
  }
  if ((oi.flags & OF_SRCTYPE) && !operands.empty()) in.srcType = operands[0].type();
  if (!(oi.flags & OF_VARIADIC) && !operandCountFits(oi, operands.size())) {
    error(loc, opText(code) + " takes " + std::to_string(oi.operands.size()) + " operand(s), got " +
                   std::to_string(operands.size()));
    return Value();
  }
  if ((oi.flags & OF_VARIADIC) && type && operands.size() != type->lanes) {
    error(loc, opText(code) + " of " + typeName(*type) + " takes " + std::to_string(type->lanes) + " operands, got " +
                   std::to_string(operands.size()));
    return Value();
  }
  for (Mod m : mods) {
    if (m == Mod::None) continue;
    ModGroup g = modGroup(m);
    if (!(oi.mods & (1u << static_cast<unsigned>(g)))) {
      error(loc, opText(code) + " does not take modifier '." + std::string(modName(m)) + "'");
      return Value();
    }
    if (in.mod(g) != Mod::None) {
      error(loc, "conflicting modifier '." + std::string(modName(m)) + "' (" + std::string(modGroupName(g)) +
                     " already given)");
      return Value();
    }
    in.setMod(m);
  }
  for (size_t g = 0; g < kModGroups; ++g) {
    if ((oi.required & (1u << g)) && in.mods[g] == Mod::None) {
      error(loc, opText(code) + " needs a ." + std::string(modGroupName(static_cast<ModGroup>(g))) + " modifier");
      return Value();
    }
  }
  return emit(std::move(in), operands, name, loc);
}

// ---- control flow -------------------------------------------------------------------------------

void KernelBuilder::br(BlockId target, const std::vector<Value>& args, Here loc) {
  if (!target.valid() || target.index >= kernel().blocks.size()) {
    error(loc, "branch to an unknown block");
    return;
  }
  BlockCall call{target, {}};
  for (const Value& v : args) {
    if (!checkOperand(v, loc)) return;
    call.args.push_back(v.id());
  }
  Inst in;
  in.op = Op::Br;
  in.succs.push_back(std::move(call));
  append(std::move(in), {}, loc);
}

void KernelBuilder::cbr(Value cond, BlockId ifTrue, BlockId ifFalse, Here loc) { cbr(cond, ifTrue, {}, ifFalse, {}, loc); }

void KernelBuilder::cbr(Value cond, BlockId ifTrue, const std::vector<Value>& trueArgs, BlockId ifFalse,
                        const std::vector<Value>& falseArgs, Here loc) {
  Inst in;
  in.op = Op::Cbr;
  for (auto [target, args] : {std::pair{ifTrue, &trueArgs}, std::pair{ifFalse, &falseArgs}}) {
    if (!target.valid() || target.index >= kernel().blocks.size()) {
      error(loc, "branch to an unknown block");
      return;
    }
    BlockCall call{target, {}};
    for (const Value& v : *args) {
      if (!checkOperand(v, loc)) return;
      call.args.push_back(v.id());
    }
    in.succs.push_back(std::move(call));
  }
  emit(std::move(in), {cond}, {}, loc);
}

void KernelBuilder::ret(Here loc) {
  Inst in;
  in.op = Op::Ret;
  append(std::move(in), {}, loc);
}

std::vector<Value> KernelBuilder::forRangeImpl(Operand begin, Operand end, Operand step, std::vector<Value> init,
                                               const LoopBody& body, const LoopNames& names, const Here& loc) {
  // The induction variable has the type of the first bound given as a Value (else u32).
  Type t = Type::u32();
  for (const Operand* o : {&begin, &end, &step}) {
    if (!o->isLiteral()) {
      t = o->value().type();
      break;
    }
  }
  bool okInputs = true;
  for (const Operand* o : {&begin, &end, &step}) {
    if (o->isLiteral()) continue;
    okInputs = checkOperand(o->value(), loc) && okInputs;
    if (o->value().type() != t) {
      error(loc, "for_range bounds differ in type (" + typeName(t) + " and " + typeName(o->value().type()) + ")");
      okInputs = false;
    }
  }
  for (const Value& v : init) okInputs = checkOperand(v, loc) && okInputs;
  if (!okInputs) return init;

  std::string label = freshLabel(names.label, {"", ".body", ".exit"});
  Value first = materialize(begin, t, label + ".begin", loc);
  Value last = materialize(end, t, label + ".end", loc);
  Value inc = materialize(step, t, label + ".step", loc);

  BlockId header = newBlock(label, loc);
  Value iv = block_param(header, t, names.iv);
  std::vector<Value> carried;
  for (size_t k = 0; k < init.size(); ++k)
    carried.push_back(block_param(header, init[k].type(), k < names.carried.size() ? names.carried[k] : ""));
  std::vector<Value> entryArgs{first};
  entryArgs.insert(entryArgs.end(), init.begin(), init.end());
  br(header, entryArgs, loc);

  set_insert_point(header);
  Value more = setp(Mod::Lt, iv, last, label + ".cond", loc);
  BlockId bodyBlock = newBlock(label + ".body", loc);
  set_insert_point(bodyBlock);
  std::vector<Value> next = body(iv, carried);
  if (next.size() != carried.size()) {
    error(loc, "for_range body returned " + std::to_string(next.size()) + " value(s) for " +
                   std::to_string(carried.size()) + " carried value(s)");
  } else {
    for (size_t k = 0; k < next.size(); ++k)
      if (next[k].valid() && next[k].type() != carried[k].type())
        error(loc, "for_range carried value " + std::to_string(k) + " changes type from " +
                       typeName(carried[k].type()) + " to " + typeName(next[k].type()));
  }
  // A body that ends in ret leaves the loop instead of taking the back edge.
  if (!terminated()) {
    std::vector<Value> backArgs{add(iv, inc, label + ".next", loc)};
    backArgs.insert(backArgs.end(), next.begin(), next.end());
    br(header, backArgs, loc);
  }
  BlockId exitBlock = newBlock(label + ".exit", loc);
  set_insert_point(header);
  cbr(more, bodyBlock, exitBlock, loc);
  set_insert_point(exitBlock);
  return carried;
}

void KernelBuilder::ifThenBlocks(Value cond, const std::function<void()>& fn, const std::string& thenName,
                                 const std::string& endName, const Here& loc) {
  if (!checkOperand(cond, loc)) return;
  BlockId from = insert_;
  BlockId thenBlock = newBlock(thenName, loc);
  set_insert_point(thenBlock);
  fn();
  bool fallsThrough = !terminated();
  BlockId endBlock = newBlock(endName, loc);
  if (fallsThrough) br(endBlock, {}, loc);
  set_insert_point(from);
  cbr(cond, thenBlock, endBlock, loc);
  set_insert_point(endBlock);
}

void KernelBuilder::ifThenImpl(Value cond, const std::function<void()>& fn, std::string_view label, const Here& loc) {
  std::string l = freshLabel(label, {".then", ".end"});
  ifThenBlocks(cond, fn, l + ".then", l + ".end", loc);
}

std::vector<Value> KernelBuilder::ifElseImpl(Value cond, const Branch& thenFn, const Branch& elseFn,
                                             const IfNames& names, const Here& loc) {
  if (!checkOperand(cond, loc)) return {};
  std::string l = freshLabel(names.label, {".then", ".else", ".end"});
  BlockId from = insert_;
  struct Arm {
    BlockId start, end;
    std::vector<Value> values;
    bool fallsThrough = false;
  };
  auto build = [&](const std::string& name, const Branch& fn) {
    Arm arm;
    arm.start = newBlock(name, loc);
    set_insert_point(arm.start);
    arm.values = fn();
    arm.end = insert_;
    arm.fallsThrough = !terminated();
    for (const Value& v : arm.values) arm.fallsThrough = checkOperand(v, loc) && arm.fallsThrough;
    return arm;
  };
  Arm thenArm = build(l + ".then", thenFn);
  Arm elseArm = build(l + ".else", elseFn);
  if (thenArm.fallsThrough && elseArm.fallsThrough) {
    bool same = thenArm.values.size() == elseArm.values.size();
    for (size_t k = 0; same && k < thenArm.values.size(); ++k)
      same = thenArm.values[k].type() == elseArm.values[k].type();
    if (!same) {
      auto shape = [](const std::vector<Value>& vs) {
        std::string s = "(";
        for (size_t k = 0; k < vs.size(); ++k) s += (k ? ", " : "") + typeName(vs[k].type());
        return s + ")";
      };
      error(loc, "if_else branches yield different values: " + shape(thenArm.values) + " and " +
                     shape(elseArm.values));
      elseArm.fallsThrough = false;
    }
  }
  const Arm* shape = thenArm.fallsThrough ? &thenArm : elseArm.fallsThrough ? &elseArm : nullptr;
  BlockId endBlock = newBlock(l + ".end", loc);
  std::vector<Value> results;
  if (shape)
    for (size_t k = 0; k < shape->values.size(); ++k)
      results.push_back(block_param(endBlock, shape->values[k].type(),
                                    k < names.results.size() ? names.results[k] : ""));
  for (const Arm* arm : {&thenArm, &elseArm}) {
    if (!arm->fallsThrough) continue;
    set_insert_point(arm->end);
    br(endBlock, arm->values, loc);
  }
  set_insert_point(from);
  cbr(cond, thenArm.start, elseArm.start, loc);
  set_insert_point(endBlock);
  return results;
}

// ---- constants ----------------------------------------------------------------------------------

Value KernelBuilder::const_bits(Type t, uint64_t bits, std::string_view name, Here loc) {
  Inst in;
  in.op = Op::Const;
  in.type = t;
  in.imm = t.isFloat() ? bits : bits & widthMask(t);
  return append(std::move(in), name, loc);
}

Value KernelBuilder::constant(Type t, double v, std::string_view name, Here loc) {
  return const_bits(t, Operand(v, loc).bitsAs(t), name, loc);
}

Value KernelBuilder::materialize(const Operand& o, Type t, std::string_view name, const Here& loc) {
  return o.isLiteral() ? const_bits(t, o.bitsAs(t), name, loc) : o.value();
}

Value KernelBuilder::pred(bool v, std::string_view n, Here l) { return const_bits(Type::pred(), v, n, l); }
Value KernelBuilder::u8(uint8_t v, std::string_view n, Here l) { return const_bits(Type::of(Scalar::U8), v, n, l); }
Value KernelBuilder::u16(uint16_t v, std::string_view n, Here l) { return const_bits(Type::of(Scalar::U16), v, n, l); }
Value KernelBuilder::u32(uint32_t v, std::string_view n, Here l) { return const_bits(Type::u32(), v, n, l); }
Value KernelBuilder::u64(uint64_t v, std::string_view n, Here l) { return const_bits(Type::u64(), v, n, l); }
Value KernelBuilder::s8(int8_t v, std::string_view n, Here l) {
  return const_bits(Type::of(Scalar::S8), static_cast<uint64_t>(v), n, l);
}
Value KernelBuilder::s16(int16_t v, std::string_view n, Here l) {
  return const_bits(Type::of(Scalar::S16), static_cast<uint64_t>(v), n, l);
}
Value KernelBuilder::s32(int32_t v, std::string_view n, Here l) {
  return const_bits(Type::s32(), static_cast<uint64_t>(v), n, l);
}
Value KernelBuilder::s64(int64_t v, std::string_view n, Here l) {
  return const_bits(Type::of(Scalar::S64), static_cast<uint64_t>(v), n, l);
}
Value KernelBuilder::b16(uint16_t v, std::string_view n, Here l) { return const_bits(Type::of(Scalar::B16), v, n, l); }
Value KernelBuilder::b32(uint32_t v, std::string_view n, Here l) { return const_bits(Type::of(Scalar::B32), v, n, l); }
Value KernelBuilder::b64(uint64_t v, std::string_view n, Here l) { return const_bits(Type::of(Scalar::B64), v, n, l); }
Value KernelBuilder::f16(float v, std::string_view n, Here l) { return const_bits(Type::of(Scalar::F16), f32ToF16(v), n, l); }
Value KernelBuilder::bf16(float v, std::string_view n, Here l) {
  return const_bits(Type::of(Scalar::BF16), f32ToBf16(v), n, l);
}
Value KernelBuilder::f32(float v, std::string_view n, Here l) {
  return const_bits(Type::f32(), std::bit_cast<uint32_t>(v), n, l);
}
Value KernelBuilder::f64(double v, std::string_view n, Here l) {
  return const_bits(Type::of(Scalar::F64), std::bit_cast<uint64_t>(v), n, l);
}

// ---- special registers ----------------------------------------------------------------------

Value KernelBuilder::special(Op code, Mod dim, std::string_view name, const Here& loc) {
  if (dim == Mod::None) return op(code, Type::u32(), {}, {}, name, loc);
  return op(code, Type::u32(), {}, {dim}, name, loc);
}

Value KernelBuilder::tid(Mod dim, std::string_view n, Here l) { return special(Op::Tid, dim, n, l); }
Value KernelBuilder::ntid(Mod dim, std::string_view n, Here l) { return special(Op::Ntid, dim, n, l); }
Value KernelBuilder::ctaid(Mod dim, std::string_view n, Here l) { return special(Op::Ctaid, dim, n, l); }
Value KernelBuilder::nctaid(Mod dim, std::string_view n, Here l) { return special(Op::Nctaid, dim, n, l); }
Value KernelBuilder::laneid(std::string_view n, Here l) { return special(Op::Laneid, Mod::None, n, l); }

Value KernelBuilder::table_ld(Table t, Value index, std::string_view name, Here loc) {
  if (!t.valid() || static_cast<size_t>(t.index) >= kernel().tables.size()) {
    error(loc, "table_ld of an unknown table");
    return Value();
  }
  Inst in;
  in.op = Op::TableLd;
  in.type = t.elem;
  in.symbol = t.index;
  return emit(std::move(in), {index}, name, loc);
}

Value KernelBuilder::shared_addr(SharedArray s, std::string_view name, Here loc) {
  if (!s.valid() || static_cast<size_t>(s.index) >= kernel().shared.size()) {
    error(loc, "shared_addr of an unknown shared array");
    return Value();
  }
  Inst in;
  in.op = Op::SharedAddr;
  in.type = Type::ptr(AddrSpace::Shared);
  in.symbol = s.index;
  return append(std::move(in), name, loc);
}

// ---- arithmetic, bits, comparison, conversion -------------------------------------------------

Value KernelBuilder::add(Value a, Value b, std::string_view n, Here l) { return op(Op::Add, a.type(), {a, b}, {}, n, l); }
Value KernelBuilder::sub(Value a, Value b, std::string_view n, Here l) { return op(Op::Sub, a.type(), {a, b}, {}, n, l); }
Value KernelBuilder::mul(Value a, Value b, std::string_view n, Here l) { return op(Op::Mul, a.type(), {a, b}, {}, n, l); }
Value KernelBuilder::div(Value a, Value b, std::string_view n, Here l) { return op(Op::Div, a.type(), {a, b}, {}, n, l); }
Value KernelBuilder::rem(Value a, Value b, std::string_view n, Here l) { return op(Op::Rem, a.type(), {a, b}, {}, n, l); }
Value KernelBuilder::min(Value a, Value b, std::string_view n, Here l) { return op(Op::Min, a.type(), {a, b}, {}, n, l); }
Value KernelBuilder::max(Value a, Value b, std::string_view n, Here l) { return op(Op::Max, a.type(), {a, b}, {}, n, l); }
Value KernelBuilder::mul_hi(Value a, Value b, std::string_view n, Here l) {
  return op(Op::MulHi, a.type(), {a, b}, {}, n, l);
}
Value KernelBuilder::mul_wide(Value a, Value b, std::string_view n, Here l) {
  return op(Op::MulWide, a.type(), {a, b}, {}, n, l);
}
Value KernelBuilder::mad(Value a, Value b, Value c, std::string_view n, Here l) {
  return op(Op::Mad, a.type(), {a, b, c}, {}, n, l);
}
Value KernelBuilder::fma(Value a, Value b, Value c, std::string_view n, Here l) {
  return op(Op::Fma, a.type(), {a, b, c}, {}, n, l);
}
Value KernelBuilder::neg(Value a, std::string_view n, Here l) { return op(Op::Neg, a.type(), {a}, {}, n, l); }
Value KernelBuilder::abs(Value a, std::string_view n, Here l) { return op(Op::Abs, a.type(), {a}, {}, n, l); }
Value KernelBuilder::bit_and(Value a, Value b, std::string_view n, Here l) {
  return op(Op::And, a.type(), {a, b}, {}, n, l);
}
Value KernelBuilder::bit_or(Value a, Value b, std::string_view n, Here l) { return op(Op::Or, a.type(), {a, b}, {}, n, l); }
Value KernelBuilder::bit_xor(Value a, Value b, std::string_view n, Here l) {
  return op(Op::Xor, a.type(), {a, b}, {}, n, l);
}
Value KernelBuilder::bit_not(Value a, std::string_view n, Here l) { return op(Op::Not, a.type(), {a}, {}, n, l); }
Value KernelBuilder::shl(Value a, Value s, std::string_view n, Here l) { return op(Op::Shl, a.type(), {a, s}, {}, n, l); }
Value KernelBuilder::shr(Value a, Value s, std::string_view n, Here l) { return op(Op::Shr, a.type(), {a, s}, {}, n, l); }
Value KernelBuilder::popc(Value a, std::string_view n, Here l) { return op(Op::Popc, a.type(), {a}, {}, n, l); }
Value KernelBuilder::clz(Value a, std::string_view n, Here l) { return op(Op::Clz, a.type(), {a}, {}, n, l); }
Value KernelBuilder::dp4a(Value a, Value b, Value c, std::string_view n, Here l) {
  return op(Op::Dp4a, a.type(), {a, b, c}, {}, n, l);
}

Value KernelBuilder::prmt(Value a, Value b, Value selector, Mod mode, std::string_view n, Here l) {
  if (mode == Mod::None) return op(Op::Prmt, a.type(), {a, b, selector}, {}, n, l);
  return op(Op::Prmt, a.type(), {a, b, selector}, {mode}, n, l);
}
Value KernelBuilder::lop3(Value a, Value b, Value c, uint8_t lut, std::string_view n, Here l) {
  return op_imm(Op::Lop3, a.type(), {a, b, c}, lut, {}, n, l);
}

Value KernelBuilder::setp(Mod cmp, Value a, Value b, std::string_view n, Here l) {
  return op(Op::Setp, a.type(), {a, b}, {cmp}, n, l);
}
Value KernelBuilder::select(Value cond, Value t, Value f, std::string_view n, Here l) {
  return op(Op::Selp, t.type(), {t, f, cond}, {}, n, l);
}

Value KernelBuilder::cvt(Value v, Type to, std::string_view name, Here loc) {
  Type from = v.type();
  Mod round = Mod::None;
  if (from.isFloat() && !to.isFloat())
    round = Mod::Rzi;
  else if (!from.isFloat() && to.isFloat())
    round = Mod::Rn;
  else if (from.isFloat() && to.isFloat() && to.scalar != from.scalar && to.bits() <= from.bits())
    round = Mod::Rn;
  return op(Op::Cvt, to, {v}, {round}, name, loc);
}
Value KernelBuilder::cvt(Value v, Type to, Mods mods, std::string_view n, Here l) { return op(Op::Cvt, to, {v}, mods, n, l); }
Value KernelBuilder::bitcast(Value v, Type to, std::string_view n, Here l) { return op(Op::Bitcast, to, {v}, {}, n, l); }
Value KernelBuilder::pack(Type vec, const std::vector<Value>& lanes, std::string_view n, Here l) {
  return op(Op::Pack, vec, lanes, {}, n, l);
}

Value KernelBuilder::extract(Value vec, unsigned lane, std::string_view name, Here loc) {
  if (lane >= vec.type().lanes) {
    error(loc, "extract of lane " + std::to_string(lane) + " from " + typeName(vec.type()));
    return Value();
  }
  Inst in;
  in.op = Op::Extract;
  in.type = vec.type();
  in.imm = lane;
  return emit(std::move(in), {vec}, name, loc);
}

// ---- tensor cores -------------------------------------------------------------------------------

Value KernelBuilder::mma(Mod shape, Scalar inType, Value a, Value b, Value c, std::string_view name, Here loc) {
  if (!checkOperand(c, loc)) return Value();
  Type acc = c.type() == mmaAccFragment(Scalar::F16) ? Type::of(Scalar::F16) : c.type().element();
  Inst in;
  in.op = Op::Mma;
  in.type = acc;
  in.srcType = Type::of(inType);
  in.setMod(shape);
  return emit(std::move(in), {a, b, c}, name, loc);
}

Value KernelBuilder::mma_fp8(Mod aFormat, Mod bFormat, Value a, Value b, Value c, std::string_view name, Here loc) {
  if (!checkOperand(c, loc)) return Value();
  Inst in;
  in.op = Op::Mma;
  in.type = c.type().element();
  in.srcType = Type::of(Scalar::B8);
  in.setMod(Mod::M16n8k32);
  setFp8Formats(in, aFormat, bFormat);
  return emit(std::move(in), {a, b, c}, name, loc);
}

Value KernelBuilder::ldmatrix(Value p, unsigned matrices, bool trans, std::string_view n, Here l) {
  if (matrices != 1 && matrices != 2 && matrices != 4) {
    error(l, "ldmatrix loads 1, 2 or 4 matrices, not " + std::to_string(matrices));
    return Value();
  }
  Type t = Type::of(Scalar::B32, static_cast<uint8_t>(matrices));
  return trans ? op(Op::Ldmatrix, t, {p}, {Mod::TransMod}, n, l) : op(Op::Ldmatrix, t, {p}, {}, n, l);
}

Value KernelBuilder::cvt_pack(Scalar to, Value hi, Value lo, Mod round, std::string_view n, Here l) {
  return op(Op::CvtPack, Type::of(to), {hi, lo}, {round}, n, l);
}

Value KernelBuilder::cvt_tf32(Value x, std::string_view n, Here l) { return op(Op::CvtTf32, Type::f32(), {x}, {}, n, l); }
Value KernelBuilder::cvt_f16x2_fp8(Value codes, Mod format, std::string_view n, Here l) {
  return op(Op::CvtF16x2Fp8, codes.type(), {codes}, {format}, n, l);
}

// ---- pointers -----------------------------------------------------------------------------------

Value KernelBuilder::ptradd(Value p, Value off, std::string_view n, Here l) {
  return op(Op::PtrAdd, p.type(), {p, off}, {}, n, l);
}

Value KernelBuilder::byteOffset(Operand index, unsigned elemBytes, AddrSpace space, const std::string& offName,
                                const std::string& scaleName, const Here& loc) {
  unsigned width = Type::ptr(space).bits();
  if (elemBytes == 0) {
    error(loc, "element size must be positive");
    return Value();
  }
  if (index.isLiteral()) {
    Type t = width == 64 ? Type::u64() : Type::u32();
    return const_bits(t, index.bitsAs(t) * elemBytes, offName, loc);
  }
  Value i = index.value();
  if (!checkOperand(i, loc)) return Value();
  Type it = i.type();
  if (it.isVector() || !(it.isInt() || it.isBits())) {
    error(loc, "an index must be an integer, not " + typeName(it));
    return Value();
  }
  char kind = it.isSigned() ? 's' : 'u';
  if (it.isBits()) i = bitcast(i, *intType(it.bits(), 'u'), {}, loc);
  // Bring the index to 32 bits or to the pointer width, whichever is larger than it.
  if (i.type().bits() < 32 || i.type().bits() > width) i = cvt(i, *intType(32, kind), {}, loc);
  Type wide = *intType(width, kind);
  if (i.type().bits() == width) {
    if (elemBytes == 1) return i;
    return mul(i, const_bits(i.type(), elemBytes, scaleName, loc), offName, loc);
  }
  if (elemBytes == 1) return cvt(i, wide, offName, loc);
  return mul_wide(i, const_bits(i.type(), elemBytes, scaleName, loc), offName, loc);
}

Value KernelBuilder::byte_offset(Operand index, unsigned elemBytes, AddrSpace space, std::string_view name, Here loc) {
  return byteOffset(index, elemBytes, space, std::string(name), derived(name, "scale"), loc);
}

Value KernelBuilder::index(Value ptr, Operand idx, unsigned elemBytes, std::string_view name, Here loc) {
  if (!checkOperand(ptr, loc)) return Value();
  if (!ptr.type().isPtr()) {
    error(loc, "index needs a pointer, not " + typeName(ptr.type()));
    return Value();
  }
  Value off = byteOffset(idx, elemBytes, ptr.type().space, derived(name, "off"), derived(name, "scale"), loc);
  return ptradd(ptr, off, name, loc);
}

// ---- fast math ----------------------------------------------------------------------------------

Value KernelBuilder::math(Op code, Value a, Mod round, std::string_view name, const Here& loc) {
  return op(code, a.type(), {a}, {round}, name, loc);
}

Value KernelBuilder::ex2(Value a, std::string_view n, Here l) { return math(Op::Ex2, a, Mod::Approx, n, l); }
Value KernelBuilder::lg2(Value a, std::string_view n, Here l) { return math(Op::Lg2, a, Mod::Approx, n, l); }
Value KernelBuilder::sin(Value a, std::string_view n, Here l) { return math(Op::Sin, a, Mod::Approx, n, l); }
Value KernelBuilder::cos(Value a, std::string_view n, Here l) { return math(Op::Cos, a, Mod::Approx, n, l); }
Value KernelBuilder::tanh(Value a, std::string_view n, Here l) { return math(Op::Tanh, a, Mod::Approx, n, l); }
Value KernelBuilder::rsqrt(Value a, std::string_view n, Here l) { return math(Op::Rsqrt, a, Mod::Approx, n, l); }
Value KernelBuilder::rcp(Value a, std::string_view n, Here l) { return math(Op::Rcp, a, Mod::Rn, n, l); }
Value KernelBuilder::sqrt(Value a, std::string_view n, Here l) { return math(Op::Sqrt, a, Mod::Rn, n, l); }

// ---- memory, synchronization, warp collectives ---------------------------------------------------

Value KernelBuilder::load(Value p, Type t, std::string_view n, Here l) { return op(Op::Ld, t, {p}, {}, n, l); }
Value KernelBuilder::load(Value p, Type t, Mods mods, std::string_view n, Here l) { return op(Op::Ld, t, {p}, mods, n, l); }
void KernelBuilder::store(Value p, Value v, Mods mods, Here l) { op(Op::St, v.type(), {p, v}, mods, {}, l); }
Value KernelBuilder::atom(Mod atomOp, Value p, Value v, std::string_view n, Here l) {
  return op(Op::Atom, v.type(), {p, v}, {atomOp}, n, l);
}
Value KernelBuilder::atom_cas(Value p, Value expected, Value desired, std::string_view n, Here l) {
  return op(Op::AtomCas, expected.type(), {p, expected, desired}, {}, n, l);
}
void KernelBuilder::membar(Mod level, Here l) { op(Op::Membar, std::nullopt, {}, {level}, {}, l); }
void KernelBuilder::bar_sync(Here l) { op(Op::BarSync, std::nullopt, {}, {}, {}, l); }
void KernelBuilder::bar_named_sync(unsigned id, uint32_t count, Here l) { bar_named_sync(id, u32(count, {}, l), l); }
void KernelBuilder::bar_named_sync(unsigned id, Value count, Here l) {
  op_imm(Op::BarNamedSync, std::nullopt, {count}, id, {}, {}, l);
}
void KernelBuilder::bar_named_arrive(unsigned id, uint32_t count, Here l) { bar_named_arrive(id, u32(count, {}, l), l); }
void KernelBuilder::bar_named_arrive(unsigned id, Value count, Here l) {
  op_imm(Op::BarNamedArrive, std::nullopt, {count}, id, {}, {}, l);
}

void KernelBuilder::cp_async(Value dst, Value src, unsigned bytes, Mod cache, Here l) {
  op_imm(Op::CpAsync, std::nullopt, {dst, src}, bytes, {cache}, {}, l);
}
void KernelBuilder::cp_async(Value dst, Value src, unsigned bytes, Value srcSize, Mod cache, Here l) {
  op_imm(Op::CpAsync, std::nullopt, {dst, src, srcSize}, bytes, {cache}, {}, l);
}
void KernelBuilder::cp_async_commit_group(Here l) { op(Op::CpAsyncCommit, std::nullopt, {}, {}, {}, l); }
void KernelBuilder::cp_async_wait_group(unsigned pending, Here l) {
  op_imm(Op::CpAsyncWait, std::nullopt, {}, pending, {}, {}, l);
}
void KernelBuilder::cp_async_wait_all(Here l) { op(Op::CpAsyncWaitAll, std::nullopt, {}, {}, {}, l); }

void KernelBuilder::mbarrier_init(Value bar, Value count, Here l) { op(Op::MbarInit, std::nullopt, {bar, count}, {}, {}, l); }
void KernelBuilder::mbarrier_arrive(Value bar, Here l) { op(Op::MbarArrive, std::nullopt, {bar}, {}, {}, l); }
void KernelBuilder::mbarrier_arrive_expect_tx(Value bar, Value bytes, Here l) {
  op(Op::MbarArriveTx, std::nullopt, {bar, bytes}, {}, {}, l);
}
Value KernelBuilder::mbarrier_try_wait_parity(Value bar, Value parity, std::string_view n, Here l) {
  return op(Op::MbarTryWait, std::nullopt, {bar, parity}, {}, n, l);
}
Value KernelBuilder::elect_sync(Value mask, std::string_view n, Here l) { return op(Op::ElectSync, std::nullopt, {mask}, {}, n, l); }
void KernelBuilder::fence_proxy_async(Here l) { op(Op::FenceProxyAsync, std::nullopt, {}, {}, {}, l); }

void KernelBuilder::tma_load_2d(Value dst, Value tmap, Value c0, Value c1, Value bar, Here l) {
  op(Op::TmaLoad, std::nullopt, {dst, tmap, c0, c1, bar}, {}, {}, l);
}
void KernelBuilder::tma_store_2d(Value tmap, Value c0, Value c1, Value src, Here l) {
  op(Op::TmaStore, std::nullopt, {tmap, c0, c1, src}, {}, {}, l);
}
void KernelBuilder::tma_load_3d(Value dst, Value tmap, Value c0, Value c1, Value c2, Value bar, Here l) {
  op(Op::TmaLoad3d, std::nullopt, {dst, tmap, c0, c1, c2, bar}, {}, {}, l);
}
void KernelBuilder::tma_store_3d(Value tmap, Value c0, Value c1, Value c2, Value src, Here l) {
  op(Op::TmaStore3d, std::nullopt, {tmap, c0, c1, c2, src}, {}, {}, l);
}
void KernelBuilder::bulk_commit_group(Here l) { op(Op::BulkCommit, std::nullopt, {}, {}, {}, l); }
void KernelBuilder::bulk_wait_group_read(unsigned pending, Here l) {
  op_imm(Op::BulkWaitRead, std::nullopt, {}, pending, {}, {}, l);
}
void KernelBuilder::setmaxnreg(bool increase, unsigned count, Here l) {
  op_imm(increase ? Op::SetMaxNRegInc : Op::SetMaxNRegDec, std::nullopt, {}, count, {}, {}, l);
}
void KernelBuilder::wgmma_fence(Here l) { op(Op::WgmmaFence, std::nullopt, {}, {}, {}, l); }
void KernelBuilder::wgmma_commit_group(Here l) { op(Op::WgmmaCommit, std::nullopt, {}, {}, {}, l); }
void KernelBuilder::wgmma_wait_group(unsigned pending, Here l) {
  op_imm(Op::WgmmaWait, std::nullopt, {}, pending, {}, {}, l);
}

Value KernelBuilder::wgmma_mma_async(unsigned n, Scalar inType, Value acc, Value a, Value bDesc, Value scaleD,
                                     bool transA, bool transB, std::string_view name, Here loc) {
  if (!checkOperand(acc, loc)) return Value();
  Inst in;
  in.op = Op::WgmmaMma;
  in.type = acc.type();
  in.srcType = Type::of(inType);
  in.imm = n;
  if (transA) in.setMod(Mod::TransAMod);
  if (transB) in.setMod(Mod::TransBMod);
  return emit(std::move(in), {acc, a, bDesc, scaleD}, name, loc);
}

Value KernelBuilder::wgmma_mma_async_fp8(unsigned n, Mod aFormat, Mod bFormat, Value acc, Value aDesc, Value bDesc,
                                         Value scaleD, std::string_view name, Here loc) {
  if (!checkOperand(acc, loc)) return Value();
  Inst in;
  in.op = Op::WgmmaMma;
  in.type = acc.type();
  in.srcType = Type::of(Scalar::B8);
  in.imm = n;
  setFp8Formats(in, aFormat, bFormat);
  return emit(std::move(in), {acc, aDesc, bDesc, scaleD}, name, loc);
}

// TC§4.4: bits 13-0 encode(start), 29-16 encode(LBO), 45-32 encode(SBO), 63-62 the swizzle
// (1 = 128B, 2 = 64B, 3 = 32B), where encode(x) = (x & 0x3FFFF) >> 4. Only the start address is
// a run-time value; the rest is one constant.
Value KernelBuilder::wgmma_descriptor(Value start, unsigned lbo, unsigned sbo, unsigned swizzleBytes,
                                      std::string_view name, Here loc) {
  if (!checkOperand(start, loc)) return Value();
  uint64_t code = swizzleBytes == 128 ? 1 : swizzleBytes == 64 ? 2 : swizzleBytes == 32 ? 3 : 0;
  if (swizzleBytes != 0 && code == 0) {
    error(loc, "wgmma_descriptor: the swizzle is 0, 32, 64 or 128 bytes, not " + std::to_string(swizzleBytes));
    return Value();
  }
  for (unsigned bytes : {lbo, sbo})
    if (bytes % 16 || bytes >= (1u << 18)) {
      error(loc, "wgmma_descriptor: a byte offset is a multiple of 16 below 2^18, not " + std::to_string(bytes));
      return Value();
    }
  std::string base = name.empty() ? std::string("desc") : std::string(name);
  Value addr = start.type().isPtr() ? bitcast(start, Type::u32(), base + ".addr", loc) : start;
  Value field = shr(bit_and(addr, u32(0x3FFFF, {}, loc), {}, loc), u32(4, {}, loc), base + ".start", loc);
  uint64_t rest = uint64_t{lbo >> 4} << 16 | uint64_t{sbo >> 4} << 32 | code << 62;
  return bit_or(cvt(field, Type::of(Scalar::B64), {}, loc), b64(rest, {}, loc), name, loc);
}

Value KernelBuilder::shfl_sync(Mod mode, Value v, Value laneOrOffset, Value clamp, Value memberMask,
                               std::string_view n, Here l) {
  return op(Op::ShflSync, v.type(), {v, laneOrOffset, clamp, memberMask}, {mode}, n, l);
}

Value KernelBuilder::shfl(Mod mode, Value v, uint32_t laneOrOffset, std::string_view name, Here loc) {
  Value mask = b32(0xFFFFFFFFu, derived(name, "mask"), loc);
  Value clamp = b32(mode == Mod::Up ? 0 : 31, derived(name, "clamp"), loc);
  Value k = b32(laneOrOffset, derived(name, "lane"), loc);
  return shfl_sync(mode, v, k, clamp, mask, name, loc);
}

Value KernelBuilder::vote_sync(Mod mode, Value p, Value memberMask, std::string_view n, Here l) {
  Type t = mode == Mod::Ballot ? Type::of(Scalar::B32) : Type::pred();
  return op(Op::VoteSync, t, {p, memberMask}, {mode}, n, l);
}

Value KernelBuilder::vote(Mod mode, Value p, std::string_view name, Here loc) {
  return vote_sync(mode, p, b32(0xFFFFFFFFu, derived(name, "mask"), loc), name, loc);
}

// ---- reductions -----------------------------------------------------------------------------------

struct KernelBuilder::ShuffleConsts {
  Value mask, clamp;
  std::array<Value, 5> offsets;  // [k] = 1 << k, made on first use
};

bool KernelBuilder::checkReduction(Op combine, Value v, const Here& loc) {
  if (!checkOperand(v, loc)) return false;
  if (combine != Op::Add && combine != Op::Max && combine != Op::Min) {
    error(loc, "reductions combine with 'add', 'max' or 'min', not " + opText(combine));
    return false;
  }
  if (!typeInClasses(v.type(), TC_32)) {
    error(loc, "warp shuffles move 32-bit values, not " + typeName(v.type()));
    return false;
  }
  return true;
}

Value KernelBuilder::butterfly(Op combine, Value v, unsigned width, ShuffleConsts& sc, const std::string& prefix,
                               char shuffleTag, char partialTag, const std::string& finalName, const Here& loc) {
  Value acc = v;
  for (unsigned off = width / 2; off >= 1; off /= 2) {
    Value& k = sc.offsets[std::countr_zero(off)];
    std::string o = std::to_string(off);
    if (!k.valid()) k = b32(off, derived(prefix, "o" + o), loc);
    Value moved = shfl_sync(Mod::Bfly, acc, k, sc.clamp, sc.mask, derived(prefix, shuffleTag + o), loc);
    acc = op(combine, acc.type(), {acc, moved}, {}, off == 1 ? finalName : derived(prefix, partialTag + o), loc);
  }
  return acc;
}

Value KernelBuilder::warp_reduce(Op combine, Value v, unsigned width, std::string_view name, Here loc) {
  if (!checkReduction(combine, v, loc)) return Value();
  if (width == 0 || width > 32 || !std::has_single_bit(width)) {
    error(loc, "warp_reduce width must be a power of two up to 32, not " + std::to_string(width));
    return Value();
  }
  std::string prefix(name);
  ShuffleConsts sc{b32(0xFFFFFFFFu, derived(prefix, "mask"), loc), b32(31, derived(prefix, "clamp"), loc), {}};
  return butterfly(combine, v, width, sc, prefix, 's', 'r', prefix, loc);
}

Value KernelBuilder::warp_reduce_sum(Value v, std::string_view n, Here l) { return warp_reduce(Op::Add, v, 32, n, l); }
Value KernelBuilder::warp_reduce_max(Value v, std::string_view n, Here l) { return warp_reduce(Op::Max, v, 32, n, l); }

Value KernelBuilder::identity(Op combine, Type t, std::string_view name, const Here& loc) {
  unsigned w = t.bits();
  if (combine == Op::Add) return const_bits(t, 0, name, loc);
  bool max = combine == Op::Max;
  if (t.isFloat()) return constant(t, max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity(), name, loc);
  if (t.isSigned()) {
    uint64_t lowest = uint64_t{1} << (w - 1);
    return const_bits(t, max ? lowest : lowest - 1, name, loc);
  }
  return const_bits(t, max ? 0 : ~uint64_t{0}, name, loc);
}

Value KernelBuilder::block_reduce(Op combine, Value v, SharedArray scratch, std::string_view name, Here loc) {
  if (!checkReduction(combine, v, loc)) return Value();
  const Kernel& k = kernel();
  if (!scratch.valid() || static_cast<size_t>(scratch.index) >= k.shared.size()) {
    error(loc, "block_reduce needs a shared scratch array of this kernel");
    return Value();
  }
  if (!k.reqntid || k.reqntid->y != 1 || k.reqntid->z != 1) {
    error(loc, "block_reduce needs a 1-D block size fixed by reqntid");
    return Value();
  }
  unsigned warps = (k.reqntid->x + 31) / 32;
  if (scratch.elem != v.type() || scratch.count < warps) {
    error(loc, "block_reduce scratch must be " + typeName(v.type()) + "[" + std::to_string(warps) + "] or larger, not " +
                   typeName(scratch.elem) + "[" + std::to_string(scratch.count) + "]");
    return Value();
  }
  std::string prefix(name);
  std::string label = freshLabel(prefix.empty() ? "reduce" : prefix, {".stage", ".combine"});
  Type t = v.type();
  unsigned bytes = t.bytes();

  ShuffleConsts sc{b32(0xFFFFFFFFu, derived(prefix, "mask"), loc), b32(31, derived(prefix, "clamp"), loc), {}};
  Value warpResult = butterfly(combine, v, 32, sc, prefix, 's', 'r', derived(prefix, "warp"), loc);
  Value tidx = tid(Mod::X, derived(prefix, "tid"), loc);
  Value lane = bit_and(tidx, u32(31, derived(prefix, "c31"), loc), derived(prefix, "lane"), loc);
  Value warp = shr(tidx, u32(5, derived(prefix, "c5"), loc), derived(prefix, "warpid"), loc);
  Value base = shared_addr(scratch, derived(prefix, "base"), loc);
  Value leader = setp(Mod::Eq, lane, u32(0, derived(prefix, "c0"), loc), derived(prefix, "leader"), loc);
  ifThenBlocks(
      leader, [&] { store(index(base, warp, bytes, derived(prefix, "slot"), loc), warpResult, {}, loc); },
      label + ".stage", label + ".combine", loc);
  bar_sync(loc);

  // Every group of `width` lanes reads all partials, so every lane ends with the result.
  unsigned width = std::bit_ceil(warps);
  Value part;
  if (width == 1) {
    part = load(base, t, derived(prefix, "part"), loc);
  } else {
    Value idx = width == 32 ? lane : bit_and(lane, u32(width - 1, derived(prefix, "cw"), loc), derived(prefix, "idx"), loc);
    if (warps == width) {
      part = load(index(base, idx, bytes, derived(prefix, "pslot"), loc), t, derived(prefix, "part"), loc);
    } else {
      Value inRange = setp(Mod::Lt, idx, u32(warps, derived(prefix, "warps"), loc), derived(prefix, "in_range"), loc);
      Value safe = min(idx, u32(warps - 1, derived(prefix, "last"), loc), derived(prefix, "safe"), loc);
      Value raw = load(index(base, safe, bytes, derived(prefix, "pslot"), loc), t, derived(prefix, "raw"), loc);
      part = select(inRange, raw, identity(combine, t, derived(prefix, "identity"), loc), derived(prefix, "part"), loc);
    }
  }
  return butterfly(combine, part, width, sc, prefix, 't', 'u', prefix, loc);
}

Value KernelBuilder::block_reduce_sum(Value v, SharedArray s, std::string_view n, Here l) {
  return block_reduce(Op::Add, v, s, n, l);
}
Value KernelBuilder::block_reduce_max(Value v, SharedArray s, std::string_view n, Here l) {
  return block_reduce(Op::Max, v, s, n, l);
}

// ---- operators ----------------------------------------------------------------------------------

Value KernelBuilder::binary(Op code, Operand a, Operand b, Mods mods, const Here& loc) {
  // Shift amounts are u32; otherwise a literal takes the type of the value beside it.
  bool shift = code == Op::Shl || code == Op::Shr;
  Type t = a.isLiteral() ? (shift ? a.literalType() : b.value().type()) : a.value().type();
  Value x = materialize(a, t, {}, loc);
  Value y = materialize(b, shift ? Type::u32() : t, {}, loc);
  return op(code, t, {x, y}, mods, {}, loc);
}

Value KernelBuilder::compare(Mod cmp, Operand a, Operand b, const Here& loc) {
  Type t = a.isLiteral() ? b.value().type() : a.value().type();
  Value x = materialize(a, t, {}, loc);
  Value y = materialize(b, t, {}, loc);
  return setp(cmp, x, y, {}, loc);
}

Value KernelBuilder::unary(Op code, Value a, const Here& loc) { return op(code, a.type(), {a}, {}, {}, loc); }

namespace {

KernelBuilder* owner(const Operand& a, const Operand& b) {
  if (!a.isLiteral() && a.value().builder()) return a.value().builder();
  if (!b.isLiteral() && b.value().builder()) return b.value().builder();
  return nullptr;
}

Value bin(Op code, const Value& a, const Operand& b) {
  Operand left(a, b.loc());
  KernelBuilder* kb = owner(left, b);
  return kb ? kb->binary(code, left, b, {}, b.loc()) : Value();
}

Value cmp(Mod c, const Value& a, const Operand& b) {
  Operand left(a, b.loc());
  KernelBuilder* kb = owner(left, b);
  return kb ? kb->compare(c, left, b, b.loc()) : Value();
}

}  // namespace

namespace detail {
Value literalLeft(Op code, Operand lit, Operand v) {
  KernelBuilder* kb = owner(lit, v);
  return kb ? kb->binary(code, lit, v, {}, v.loc()) : Value();
}
Value literalCompare(Mod c, Operand lit, Operand v) {
  KernelBuilder* kb = owner(lit, v);
  return kb ? kb->compare(c, lit, v, v.loc()) : Value();
}
}  // namespace detail

Value operator+(const Value& a, Operand b) { return bin(Op::Add, a, b); }
Value operator-(const Value& a, Operand b) { return bin(Op::Sub, a, b); }
Value operator*(const Value& a, Operand b) { return bin(Op::Mul, a, b); }
Value operator/(const Value& a, Operand b) { return bin(Op::Div, a, b); }
Value operator%(const Value& a, Operand b) { return bin(Op::Rem, a, b); }
Value operator&(const Value& a, Operand b) { return bin(Op::And, a, b); }
Value operator|(const Value& a, Operand b) { return bin(Op::Or, a, b); }
Value operator^(const Value& a, Operand b) { return bin(Op::Xor, a, b); }
Value operator<<(const Value& a, Operand b) { return bin(Op::Shl, a, b); }
Value operator>>(const Value& a, Operand b) { return bin(Op::Shr, a, b); }
Value operator<(const Value& a, Operand b) { return cmp(Mod::Lt, a, b); }
Value operator<=(const Value& a, Operand b) { return cmp(Mod::Le, a, b); }
Value operator>(const Value& a, Operand b) { return cmp(Mod::Gt, a, b); }
Value operator>=(const Value& a, Operand b) { return cmp(Mod::Ge, a, b); }
Value operator==(const Value& a, Operand b) { return cmp(Mod::Eq, a, b); }
Value operator!=(const Value& a, Operand b) { return cmp(Mod::Ne, a, b); }

Value operator-(Operand a) {
  KernelBuilder* kb = owner(a, a);
  return kb ? kb->unary(Op::Neg, a.value(), a.loc()) : Value();
}

Value operator~(Operand a) {
  KernelBuilder* kb = owner(a, a);
  return kb ? kb->unary(Op::Not, a.value(), a.loc()) : Value();
}

Value operator!(Operand a) {
  KernelBuilder* kb = owner(a, a);
  if (!kb) return Value();
  if (!a.value().type().isPred()) {
    kb->error(a.loc(), "'!' negates a pred, not " + typeName(a.value().type()) + " (use '~' for bitwise not)");
    return Value();
  }
  return kb->unary(Op::Not, a.value(), a.loc());
}

}  // namespace tn::ir
