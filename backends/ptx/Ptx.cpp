// PTX emitter, structure half: module header, symbol names, kernel signatures, register names
// (register-liveness's assignment, or one register per value), and one linear walk over the
// blocks in layout order in which branches write their block arguments as parallel copies.
// The per-op formats are in PtxOps.cpp.
// Requires: a verified module (types, operand counts, terminators, the target gates of Ops.def).
// Guarantees: byte-stable output; whatever PTX cannot express is an error naming op, type and
// target, and then no PTX at all.
#include "backends/ptx/Ptx.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "backends/ptx/PtxEmitter.h"
#include "ir/Printer.h"

namespace tn::ptx {

namespace detail {

namespace {

size_t idx(RegClass c) { return static_cast<size_t>(c); }

bool isIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool isIdentChar(char c) { return isIdentStart(c) || (c >= '0' && c <= '9') || c == '_' || c == '$'; }

// PTX identifiers: a letter then [A-Za-z0-9_$]*, or '_'/'$' then at least one of those.
bool isPtxIdentifier(std::string_view s) {
  if (s.empty() || !std::all_of(s.begin(), s.end(), isIdentChar)) return false;
  return isIdentStart(s[0]) || ((s[0] == '_' || s[0] == '$') && s.size() > 1);
}

// IR names may contain '.', which PTX identifiers cannot.
std::string sanitize(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (!isIdentChar(c) || c == '$') c = '_';
  return out;
}

std::string unique(const std::string& base, std::set<std::string>& used) {
  if (used.insert(base).second) return base;
  for (unsigned i = 1;; ++i) {
    std::string name = base + "_" + std::to_string(i);
    if (used.insert(name).second) return name;
  }
}

}  // namespace

std::string memType(ir::Type t) {
  if (t.isPred()) return "u8";  // PTX has no predicate parameters or memory: a byte, nonzero = true
  if (t.isPtr()) return t.bits() == 64 ? "u64" : "u32";
  if (t.scalar == ir::Scalar::F16 || t.scalar == ir::Scalar::BF16) return "b16";
  return std::string(ir::scalarName(t.scalar));
}

KernelEmitter::KernelEmitter(const ir::Module& m, const ir::Kernel& k, const KernelSymbols& syms,
                             const ir::NameTable& names, const passes::RegisterAssignment* assigned,
                             ir::Diagnostics& diags)
    : m_(m), k_(k), syms_(syms), names_(names), assigned_(assigned), diags_(diags) {}

std::string KernelEmitter::target() const { return m_.target.name(); }

bool KernelEmitter::failAt(ir::SourceLoc loc, const std::string& what, const std::string& reason) {
  diags_.report(ir::Severity::Error, m_.fileName(loc), loc, "cannot emit " + what + " for " + target() + ": " + reason);
  ok_ = false;
  return false;
}

bool KernelEmitter::fail(const ir::Inst& in, const std::string& reason) {
  std::string what = "'" + std::string(ir::info(in.op).name);
  for (ir::Mod m : in.mods)
    if (m != ir::Mod::None) what += "." + std::string(ir::modName(m));
  what += "'";
  if (in.type) {
    what += " on ";
    if (in.srcType) what += ir::typeName(*in.srcType) + " -> ";
    what += ir::typeName(*in.type);
  }
  return failAt(in.loc, what, reason);
}

std::string KernelEmitter::regName(RegClass c, uint32_t n) const {
  std::string s(regClassPrefix(c));
  s += std::to_string(n);
  return s;
}

std::string KernelEmitter::reg(ir::ValueId v, unsigned lane) const {
  return regName(regClass(k_.typeOf(v)), base_[v.index] + lane);
}

std::string KernelEmitter::regs(ir::ValueId v) const {
  ir::Type t = k_.typeOf(v);
  if (!t.isVector()) return reg(v);
  std::string s = "{";
  for (unsigned i = 0; i < t.lanes; ++i) s += (i ? ", " : "") + reg(v, i);
  return s + "}";
}

uint32_t KernelEmitter::temp(RegClass c) {
  if (!temps_[idx(c)]) temps_[idx(c)] = next_[idx(c)]++;
  return temps_[idx(c)];
}

void KernelEmitter::line(const std::string& text) {
  if (!pendingLoc_.empty()) {  // the .loc of the instruction this line belongs to (emitLoc)
    body_ += '\t' + pendingLoc_ + '\n';
    pendingLoc_.clear();
    lastLoc_ = pendingAt_;
  }
  body_ += '\t';
  body_ += text;
  body_ += '\n';
}
void KernelEmitter::label(const std::string& name) {
  body_ += name;
  body_ += ":\n";
}

void KernelEmitter::plain(const ir::Inst& in, const std::string& opcode) {
  std::string s = opcode + " " + reg(in.result);
  for (ir::ValueId v : in.operands) s += ", " + reg(v);
  line(s + ";");
}

// What PTX cannot express about the signature: both thread-count attributes on one entry
// (ptxas rejects the pair even when they agree). Predicate parameters travel as bytes.
bool KernelEmitter::checkSignature() {
  if (k_.reqntid && k_.maxntid)
    failAt(k_.loc, "kernel '@" + k_.name + "'", "PTX allows .reqntid or .maxntid on an entry, not both");
  return ok_;
}

void KernelEmitter::assignRegisters() {
  base_.assign(k_.values.size(), 0);
  paramRaw_.assign(k_.params.size(), 0);
  if (assigned_) assignShared();
  else assignNaive();
}

// register-liveness numbers from 0 and the emitter from 1. Its guarantees are what the walk
// relies on: a result never shares a register with its own operands (pack writes lane by lane),
// a block parameter never with a value live into its block (so an edge's copies clobber
// nothing the target reads), and kernel parameters hold their register from the entry on, so
// each is loaded straight into it and a global pointer is converted in place. Values in
// unreachable blocks have no assigned register and get fresh ones above the assignment.
void KernelEmitter::assignShared() {
  const passes::RegisterAssignment& ra = *assigned_;
  for (size_t c = 0; c < kRegClasses; ++c) next_[c] = ra.counts[c] + 1;
  auto place = [&](ir::ValueId v) {
    const passes::Reg& r = ra.regs[v.index];
    if (r.count) base_[v.index] = r.index + 1;
    else assignValue(v);
  };
  for (size_t i = 0; i < k_.params.size(); ++i) {
    place(k_.params[i].value);
    paramRaw_[i] = base_[k_.params[i].value.index];
  }
  for (const ir::Block& b : k_.blocks) {
    for (ir::ValueId p : b.params) place(p);
    for (ir::InstId id : b.insts)
      if (k_.inst(id).result) place(k_.inst(id).result);
  }
}

// One register per value, numbered in order: parameters first (their param-space loads, then
// the global-space pointers converted from them), then block parameters and results in layout
// order. `emit-ptx --no-reg-reuse` shows it.
void KernelEmitter::assignNaive() {
  for (size_t i = 0; i < k_.params.size(); ++i) {
    ir::Type t = k_.typeOf(k_.params[i].value);
    paramRaw_[i] = next_[idx(regClass(t))];
    next_[idx(regClass(t))] += t.lanes;
  }
  for (size_t i = 0; i < k_.params.size(); ++i) {
    ir::ValueId v = k_.params[i].value;
    if (k_.typeOf(v) == ir::Type::ptr(ir::AddrSpace::Global))
      assignValue(v);
    else
      base_[v.index] = paramRaw_[i];
  }
  std::vector<ir::InstId> tied;
  for (const ir::Block& b : k_.blocks) {
    for (ir::ValueId p : b.params) assignValue(p);
    for (ir::InstId id : b.insts) {
      if (!k_.inst(id).result) continue;
      if (ir::tiedOperand(k_.inst(id)) >= 0) tied.push_back(id);
      else assignValue(k_.inst(id).result);
    }
  }
  // A tied result (wgmma's D) names its accumulator's registers; an accumulator may itself be
  // a tied result defined later in layout order, hence the walk up the chain.
  auto resolve = [&](auto& self, ir::ValueId v) -> uint32_t {
    const ir::ValueInfo& vi = k_.value(v);
    if (vi.kind == ir::DefKind::Inst && !base_[v.index]) {
      const ir::Inst& in = k_.insts[vi.owner];
      base_[v.index] = self(self, in.operands[ir::tiedOperand(in)]);
    }
    return base_[v.index];
  };
  for (ir::InstId id : tied) resolve(resolve, k_.inst(id).result);
}

void KernelEmitter::assignValue(ir::ValueId v) {
  ir::Type t = k_.typeOf(v);
  base_[v.index] = next_[idx(regClass(t))];
  next_[idx(regClass(t))] += t.lanes;
}

// Vector parameters load lane by lane: a .v4 load of 64-bit lanes would exceed 16 bytes.
// With shared names a global pointer is converted in its own register (paramRaw_ == base_).
// A tensor map stays in param space: its register holds the generic address of the 128 bytes, as
// nvcc materializes a __grid_constant__ CUtensorMap (TC§5.1); only a used one needs it, and
// cvta.param needs PTX ISA 7.7, which the TMA ops using it exceed.
void KernelEmitter::emitParamLoads() {
  for (size_t i = 0; i < k_.params.size(); ++i) {
    ir::Type t = k_.typeOf(k_.params[i].value);
    if (t.scalar == ir::Scalar::TensorMap) {
      if (!tensorMapUsed(k_.params[i].value)) continue;
      std::string r = regName(RegClass::B64, paramRaw_[i]);
      line("mov.b64 " + r + ", " + syms_.params[i] + ";");
      line("cvta.param.u64 " + r + ", " + r + ";");
      continue;
    }
    if (t.isPred()) {
      std::string byte = regName(RegClass::B16, temp(RegClass::B16));
      line("ld.param.u8 " + byte + ", [" + syms_.params[i] + "];");
      line("setp.ne.b16 " + regName(RegClass::Pred, paramRaw_[i]) + ", " + byte + ", 0;");
      continue;
    }
    for (unsigned l = 0; l < t.lanes; ++l) {
      std::string at = syms_.params[i] + (l ? "+" + std::to_string(l * t.element().bytes()) : "");
      line("ld.param." + memType(t.element()) + " " + regName(regClass(t), paramRaw_[i] + l) + ", [" + at + "];");
    }
  }
  for (size_t i = 0; i < k_.params.size(); ++i) {
    ir::ValueId v = k_.params[i].value;
    if (k_.typeOf(v) == ir::Type::ptr(ir::AddrSpace::Global))
      line("cvta.to.global.u64 " + reg(v) + ", " + regName(RegClass::B64, paramRaw_[i]) + ";");
  }
}

bool KernelEmitter::tensorMapUsed(ir::ValueId v) const {
  for (const ir::Block& b : k_.blocks)
    for (ir::InstId id : b.insts)
      for (ir::ValueId o : k_.inst(id).operands)
        if (o == v) return true;
  return false;
}

std::vector<KernelEmitter::Move> KernelEmitter::edgeMoves(const ir::BlockCall& call) const {
  std::vector<Move> moves;
  const ir::Block& target = k_.block(call.block);
  size_t n = std::min(target.params.size(), call.args.size());
  for (size_t i = 0; i < n; ++i) {
    ir::ValueId param = target.params[i];
    ir::Type t = k_.typeOf(param);
    for (unsigned l = 0; l < t.lanes; ++l) {
      Move mv{regClass(t), base_[param.index] + l, base_[call.args[i].index] + l};
      if (mv.dst != mv.src) moves.push_back(mv);
    }
  }
  return moves;
}

// Sequentializes simultaneous moves: a move goes once no pending move still reads its
// destination; when only cycles remain, one destination is saved in the class's temporary and
// its readers read the temporary instead, which turns that cycle into a chain.
void KernelEmitter::emitParallelCopy(std::vector<Move> moves) {
  auto write = [&](RegClass c, uint32_t dst, uint32_t src) {
    line("mov." + std::string(movType(c)) + " " + regName(c, dst) + ", " + regName(c, src) + ";");
  };
  while (!moves.empty()) {
    auto ready = std::find_if(moves.begin(), moves.end(), [&](const Move& mv) {
      return std::none_of(moves.begin(), moves.end(),
                          [&](const Move& o) { return &o != &mv && o.cls == mv.cls && o.src == mv.dst; });
    });
    if (ready != moves.end()) {
      write(ready->cls, ready->dst, ready->src);
      moves.erase(ready);
      continue;
    }
    Move& first = moves.front();
    uint32_t t = temp(first.cls);
    write(first.cls, t, first.dst);
    for (Move& o : moves)
      if (o.cls == first.cls && o.src == first.dst) o.src = t;
  }
}

std::string KernelEmitter::edgeLabel(size_t from, ir::BlockId to) {
  return unique(labels_[from] + "_to_" + labels_[to.index].substr(4), labelNames_);
}

// A branch writes its arguments into the target's parameter registers on that edge only.
// A conditional branch whose both edges carry moves routes the taken edge through a label of
// its own; a branch to the next block in layout without moves falls through.
void KernelEmitter::emitTerminator(size_t block, const ir::Inst& in) {
  ir::BlockId next(static_cast<uint32_t>(block + 1));
  auto bra = [&](ir::BlockId to) {
    if (to != next) line("bra.uni " + labels_[to.index] + ";");
  };
  if (in.op == ir::Op::Ret) {
    line("ret;");
    return;
  }
  if (in.op == ir::Op::Br) {
    emitParallelCopy(edgeMoves(in.succs[0]));
    bra(in.succs[0].block);
    return;
  }
  const ir::BlockCall& taken = in.succs[0];
  const ir::BlockCall& other = in.succs[1];
  std::string p = reg(in.operands[0]);
  std::vector<Move> takenMoves = edgeMoves(taken), otherMoves = edgeMoves(other);
  if (takenMoves.empty() && (!otherMoves.empty() || taken.block != next || other.block == next)) {
    line("@" + p + " bra " + labels_[taken.block.index] + ";");
    emitParallelCopy(otherMoves);
    bra(other.block);
  } else if (otherMoves.empty()) {
    line("@!" + p + " bra " + labels_[other.block.index] + ";");
    emitParallelCopy(takenMoves);
    bra(taken.block);
  } else {
    std::string edge = edgeLabel(block, taken.block);
    line("@" + p + " bra " + edge + ";");
    emitParallelCopy(otherMoves);
    line("bra.uni " + labels_[other.block.index] + ";");
    label(edge);
    emitParallelCopy(takenMoves);
    bra(taken.block);
  }
}

std::string KernelEmitter::regDecls() const {
  std::string s;
  for (size_t c = 0; c < kRegClasses; ++c)
    if (next_[c] > 1)
      s += "\t.reg ." + std::string(regClassName(RegClass(c))) + " " +
           std::string(regClassPrefix(RegClass(c))) + "<" + std::to_string(next_[c]) + ">;\n";
  return s;
}

// `.file` numbers are the module's file table indices (emit() declares every named file). The
// `.loc` waits for the instruction's first PTX line: one that emits nothing (a branch to the next
// block) leaves no `.loc` behind.
void KernelEmitter::emitLoc(const ir::Inst& in) {
  if (!in.loc.known() || in.loc.file == 0 || in.loc.file >= m_.files.size() || m_.files[in.loc.file].empty()) return;
  pendingLoc_.clear();
  if (in.loc.file == lastLoc_.file && in.loc.line == lastLoc_.line) return;
  pendingLoc_ = ".loc " + std::to_string(in.loc.file) + " " + std::to_string(in.loc.line) + " " + std::to_string(in.loc.col);
  pendingAt_ = in.loc;
}

bool KernelEmitter::run(std::string& out) {
  if (!checkSignature()) return false;
  assignRegisters();
  labels_.clear();
  for (size_t b = 0; b < k_.blocks.size(); ++b)
    labels_.push_back(unique("$L__" + sanitize(names_.block(ir::BlockId(static_cast<uint32_t>(b)))), labelNames_));

  // The entry block is never a branch target (a verifier invariant), so it needs no label.
  emitParamLoads();
  for (size_t b = 0; b < k_.blocks.size(); ++b) {
    if (b != 0) label(labels_[b]);
    for (ir::InstId id : k_.blocks[b].insts) {
      const ir::Inst& in = k_.inst(id);
      if (lineInfo) emitLoc(in);
      if (ir::hasFlag(in.op, ir::OF_TERMINATOR))
        emitTerminator(b, in);
      else
        emitInst(in);
    }
  }
  if (!ok_) return false;

  for (size_t i = 0; i < k_.shared.size(); ++i) {
    const ir::SharedDecl& s = k_.shared[i];
    if (s.dynamic) out += ".extern .shared .align " + std::to_string(s.align) + " .b8 " + syms_.shared[i] + "[];\n";
  }
  out += ".visible .entry " + syms_.entry + "(";
  for (size_t i = 0; i < k_.params.size(); ++i) {
    ir::Type t = k_.typeOf(k_.params[i].value);
    out += i ? ",\n\t.param ." : "\n\t.param .";
    if (t.isVector() || t.scalar == ir::Scalar::TensorMap)  // a tensor map: .align 128 .b8 name[128]
      out += "align " + std::to_string(t.bytes()) + " .b8 " + syms_.params[i] + "[" + std::to_string(t.bytes()) + "]";
    else
      out += memType(t) + " " + syms_.params[i];
  }
  out += k_.params.empty() ? ")\n" : "\n)\n";
  auto dims = [](const ir::Dim3& d) {
    return std::to_string(d.x) + ", " + std::to_string(d.y) + ", " + std::to_string(d.z) + "\n";
  };
  if (k_.reqntid) out += ".reqntid " + dims(*k_.reqntid);
  if (k_.maxntid) out += ".maxntid " + dims(*k_.maxntid);
  if (k_.minnctapersm) out += ".minnctapersm " + std::to_string(*k_.minnctapersm) + "\n";
  if (k_.maxnreg) out += ".maxnreg " + std::to_string(*k_.maxnreg) + "\n";
  out += "{\n" + regDecls();
  for (size_t i = 0; i < k_.shared.size(); ++i) {
    const ir::SharedDecl& s = k_.shared[i];
    if (!s.dynamic)
      out += "\t.shared .align " + std::to_string(s.align) + " .b8 " + syms_.shared[i] + "[" +
             std::to_string(s.bytes()) + "];\n";
  }
  out += body_ + "}\n";
  return true;
}

}  // namespace detail

namespace {

// A file name as a PTX string literal's contents: backslashes and quotes escaped, control
// characters (which no real path holds) dropped.
std::string quotedPath(const std::string& path) {
  std::string s;
  for (char c : path) {
    if (c == '\\' || c == '"') s += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) s += c;
  }
  return s;
}

// A table's initialized .global array.
std::string tableDecl(const ir::TableDecl& t, const std::string& symbol) {
  const unsigned bytes = t.elem.bytes();
  std::string out = ".global .align " + std::to_string(bytes) + " .b" + std::to_string(8 * bytes) + " " + symbol + "[" +
                    std::to_string(t.values.size()) + "] = {";
  char buf[24];
  for (size_t i = 0; i < t.values.size(); ++i) {
    std::snprintf(buf, sizeof buf, "0x%llX", static_cast<unsigned long long>(t.values[i]));
    out += (i % 8 == 0 ? "\n\t" : " ") + std::string(buf) + (i + 1 < t.values.size() ? "," : "");
  }
  return out + "\n};\n";
}

}  // namespace

std::optional<std::string> emit(const ir::Module& m, const EmitOptions& opts, ir::Diagnostics& diags) {
  std::string tgt = m.target.name();
  auto version = [](unsigned v) { return std::to_string(v / 10) + "." + std::to_string(v % 10); };
  unsigned needPtx = m.target.minPtx();
  if (m.ptx < needPtx) {
    diags.report(ir::Severity::Error, "", {},
                 "cannot emit PTX ISA " + version(m.ptx) + " for " + tgt + ": the target needs PTX ISA " +
                     version(needPtx) + " or later");
    return std::nullopt;
  }
  if (!opts.registers.empty() && opts.registers.size() != m.kernels.size()) {
    diags.report(ir::Severity::Error, "", {},
                 "cannot emit PTX: " + std::to_string(opts.registers.size()) + " register assignments for " +
                     std::to_string(m.kernels.size()) + " kernels");
    return std::nullopt;
  }
  bool found = opts.kernel.empty();
  for (const ir::Kernel& k : m.kernels) found = found || k.name == opts.kernel;
  if (!found) {
    diags.report(ir::Severity::Error, "", {}, "no kernel named '@" + opts.kernel + "'");
    return std::nullopt;
  }

  // Symbols are named over the whole module, so that one kernel reads the same whether it is
  // emitted alone or with the others. Dynamic shared arrays are module-scope in PTX; every
  // name is prefixed with its kernel's and made unique.
  std::set<std::string> used;
  for (const ir::Kernel& k : m.kernels) used.insert(k.name);
  std::vector<detail::KernelSymbols> syms(m.kernels.size());
  std::vector<ir::NameTable> nameTables;
  nameTables.reserve(m.kernels.size());
  for (size_t i = 0; i < m.kernels.size(); ++i) {
    const ir::Kernel& k = m.kernels[i];
    const ir::NameTable& names = nameTables.emplace_back(k);
    syms[i].entry = k.name;
    for (const ir::KernelParam& p : k.params)
      syms[i].params.push_back(detail::unique(k.name + "_param_" + detail::sanitize(names.value(p.value)), used));
    for (const ir::SharedDecl& s : k.shared)
      syms[i].shared.push_back(detail::unique(k.name + "_" + detail::sanitize(s.name), used));
  }
  // Tables are module-scope .global arrays; tables alike in element type and values (a grid
  // several kernels of a module look up) share the first one's array.
  std::map<std::pair<std::string, std::vector<uint64_t>>, std::string> tableByContent;
  for (size_t i = 0; i < m.kernels.size(); ++i)
    for (const ir::TableDecl& t : m.kernels[i].tables) {
      auto [it, fresh] = tableByContent.try_emplace({ir::typeName(t.elem), t.values});
      if (fresh) it->second = detail::unique(m.kernels[i].name + "_" + detail::sanitize(t.name), used);
      syms[i].tables.push_back(it->second);
    }

  std::set<std::string> declaredTables;
  unsigned errorsBefore = diags.errors();
  std::string out = "// Generated by truenoc\n\n.version " + version(m.ptx) + "\n.target " + tgt + "\n.address_size 64\n";
  if (opts.lineInfo) {
    out += "\n";
    for (size_t f = 1; f < m.files.size(); ++f)
      if (!m.files[f].empty()) out += ".file " + std::to_string(f) + " \"" + quotedPath(m.files[f]) + "\"\n";
  }
  for (size_t i = 0; i < m.kernels.size(); ++i) {
    const ir::Kernel& k = m.kernels[i];
    if (!opts.kernel.empty() && k.name != opts.kernel) continue;
    if (!detail::isPtxIdentifier(k.name)) {
      diags.report(ir::Severity::Error, m.fileName(k.loc), k.loc,
                   "cannot emit kernel '@" + k.name + "' for " + tgt + ": '" + k.name +
                       "' is not a PTX identifier (a letter, then letters, digits, '_' or '$')");
      continue;
    }
    out += "\n";
    for (size_t t = 0; t < k.tables.size(); ++t)
      if (declaredTables.insert(syms[i].tables[t]).second) out += tableDecl(k.tables[t], syms[i].tables[t]);
    detail::KernelEmitter emitter(m, k, syms[i], nameTables[i], opts.registers.empty() ? nullptr : &opts.registers[i], diags);
    emitter.lineInfo = opts.lineInfo;
    emitter.run(out);
  }
  if (diags.errors() != errorsBefore) return std::nullopt;
  return out;
}

}  // namespace tn::ptx
