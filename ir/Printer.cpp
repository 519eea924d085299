#include "ir/Printer.h"

#include <bit>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_set>

#include "ir/Float16.h"

namespace tn::ir {

// The sets hold views of the kernel's names and of the table's own strings, which stay put:
// values_ and blocks_ are sized before any of them is filled.
NameTable::NameTable(const Kernel& k) {
  std::unordered_set<std::string_view> taken(k.values.size());
  for (const ValueInfo& v : k.values)
    if (!v.name.empty()) taken.insert(v.name);
  std::unordered_set<std::string_view> used(k.values.size());
  unsigned next = 0;
  values_.resize(k.values.size());
  for (size_t i = 0; i < k.values.size(); ++i) {
    const std::string& want = k.values[i].name;
    if (!want.empty() && used.insert(want).second) {
      values_[i] = want;
      continue;
    }
    std::string base = want.empty() ? "" : want + ".";
    std::string fresh;
    do fresh = base + std::to_string(next++);
    while (taken.contains(fresh) || used.contains(fresh));
    values_[i] = std::move(fresh);
    used.insert(values_[i]);
  }
  std::unordered_set<std::string_view> usedBlocks(k.blocks.size());
  unsigned nextBlock = 0;
  blocks_.resize(k.blocks.size());
  for (size_t i = 0; i < k.blocks.size(); ++i) {
    const std::string& want = k.blocks[i].name;
    if (!want.empty() && usedBlocks.insert(want).second) {
      blocks_[i] = want;
      continue;
    }
    std::string fresh;
    do fresh = "bb" + std::to_string(nextBlock++);
    while (usedBlocks.contains(fresh));
    blocks_[i] = std::move(fresh);
    usedBlocks.insert(blocks_[i]);
  }
}

namespace {

std::string hexBits(uint64_t bits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%" PRIX64, bits);
  return buf;
}

// Shortest "%.Ng" that reads back to exactly `v` at the given precision, or "" if none.
std::string exactDecimal(double v, bool asFloat) {
  if (!std::isfinite(v)) return "";
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (asFloat ? std::strtof(buf, nullptr) == static_cast<float>(v) : std::strtod(buf, nullptr) == v) {
      std::string s = buf;
      if (s.find_first_of(".en") == std::string::npos) s += ".0";
      return s;
    }
  }
  return "";
}

std::string dimText(const Dim3& d) {
  std::string s = std::to_string(d.x);
  if (d.y != 1 || d.z != 1) s += ", " + std::to_string(d.y);
  if (d.z != 1) s += ", " + std::to_string(d.z);
  return s;
}

std::string callText(const BlockCall& c, const NameTable& names) {
  std::string s = "^" + names.block(c.block);
  if (!c.args.empty()) {
    s += "(";
    for (size_t i = 0; i < c.args.size(); ++i) s += (i ? ", %" : "%") + names.value(c.args[i]);
    s += ")";
  }
  return s;
}

// lop3's truth table in hex (0x96 reads as a xor b xor c), any other immediate in decimal.
std::string immText(const Inst& in) {
  if (in.op != Op::Lop3) return std::to_string(in.imm);
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", static_cast<unsigned>(in.imm & 0xFF));
  return buf;
}

void printInst(std::string& out, const Module& m, const Kernel& k, const Inst& in, const NameTable& names) {
  out += "  ";
  if (in.result) out += "%" + names.value(in.result) + " = ";
  out += info(in.op).name;
  for (Mod m : in.mods)
    if (m != Mod::None) out += "." + std::string(modName(m));
  bool first = true;
  auto sep = [&] {
    out += first ? " " : ", ";
    first = false;
  };
  if (in.op == Op::Call) {
    sep();
    bool known = in.symbol >= 0 && static_cast<size_t>(in.symbol) < m.functions.size();
    out += "@" + (known ? m.functions[in.symbol].name : std::string("?")) + "(";
    for (size_t i = 0; i < in.operands.size(); ++i) out += (i ? ", %" : "%") + names.value(in.operands[i]);
    out += ")";
  } else if (in.op == Op::TableLd) {
    sep();
    bool known = in.symbol >= 0 && static_cast<size_t>(in.symbol) < k.tables.size();
    out += "@" + (known ? k.tables[in.symbol].name : std::string("?"));
  } else if (in.symbol >= 0 && static_cast<size_t>(in.symbol) < k.shared.size()) {
    sep();
    out += "@" + k.shared[in.symbol].name;
  }
  if (in.op == Op::Const && in.type) {
    sep();
    out += constLiteral(*in.type, in.imm);
  }
  // An immediate other than const's, where PTX writes it (literalPosition).
  size_t immAt = literalPosition(in.op, in.operands.size());
  for (size_t i = 0; in.op != Op::Call && i <= in.operands.size(); ++i) {
    if (i == immAt && in.op != Op::Const && (info(in.op).flags & OF_IMM)) {
      sep();
      out += immText(in);
    }
    if (i == in.operands.size()) break;
    sep();
    out += "%" + names.value(in.operands[i]);
  }
  for (const BlockCall& c : in.succs) {
    sep();
    out += callText(c, names);
  }
  if (in.type) {
    out += " : ";
    if (in.srcType) out += typeName(*in.srcType) + " -> ";
    out += typeName(*in.type);
  }
  out += "\n";
}

}  // namespace

std::string constLiteral(Type t, uint64_t bits) {
  switch (t.scalar) {
    case Scalar::F32: {
      std::string s = exactDecimal(std::bit_cast<float>(static_cast<uint32_t>(bits)), true);
      return s.empty() ? hexBits(bits) : s;
    }
    case Scalar::F64: {
      std::string s = exactDecimal(std::bit_cast<double>(bits), false);
      return s.empty() ? hexBits(bits) : s;
    }
    case Scalar::F16:
    case Scalar::BF16: {
      auto h = static_cast<uint16_t>(bits);
      float f = t.scalar == Scalar::F16 ? f16ToF32(h) : bf16ToF32(h);
      // Printed in float precision; the parser rounds it back to the same half value.
      std::string s = exactDecimal(f, true);
      return s.empty() || std::isnan(f) ? hexBits(bits) : s;
    }
    case Scalar::Pred: return bits ? "1" : "0";
    default:
      break;
  }
  if (t.isSigned()) {
    unsigned w = t.bits();
    int64_t v = w == 64 ? static_cast<int64_t>(bits)
                        : static_cast<int64_t>(bits << (64 - w)) >> (64 - w);
    return std::to_string(v);
  }
  return std::to_string(bits);
}

std::string print(const Module& m, const Kernel& k) {
  NameTable names(k);
  std::string out = (k.function ? "func @" : "kernel @") + k.name + "(";
  for (size_t i = 0; i < k.params.size(); ++i) {
    const KernelParam& p = k.params[i];
    if (i) out += ", ";
    out += "%" + names.value(p.value) + ": " + typeName(k.typeOf(p.value));
    if (p.align) out += " align " + std::to_string(p.align);
  }
  out += ")";
  if (k.returns) out += " -> " + typeName(*k.returns);
  if (k.reqntid) out += " reqntid(" + dimText(*k.reqntid) + ")";
  if (k.maxntid) out += " maxntid(" + dimText(*k.maxntid) + ")";
  if (k.minnctapersm) out += " minnctapersm(" + std::to_string(*k.minnctapersm) + ")";
  if (k.maxnreg) out += " maxnreg(" + std::to_string(*k.maxnreg) + ")";
  out += " {\n";
  for (const SharedDecl& s : k.shared) {
    out += "  shared @" + s.name + ": " + typeName(s.elem) + "[";
    if (!s.dynamic) out += std::to_string(s.count);
    out += "] align " + std::to_string(s.align) + "\n";
  }
  for (const TableDecl& t : k.tables) {
    out += "  table @" + t.name + ": " + typeName(t.elem) + "[" + std::to_string(t.values.size()) + "] = [";
    const size_t perLine = t.elem.bits() == 64 ? 6 : 10;
    for (size_t i = 0; i < t.values.size(); ++i) {
      if (i % perLine == 0) out += "\n   ";
      out += " " + hexBits(t.values[i]) + (i + 1 < t.values.size() ? "," : "");
    }
    out += "\n  ]\n";
  }
  for (size_t b = 0; b < k.blocks.size(); ++b) {
    const Block& blk = k.blocks[b];
    out += "^" + names.block(BlockId(static_cast<uint32_t>(b)));
    if (!blk.params.empty()) {
      out += "(";
      for (size_t i = 0; i < blk.params.size(); ++i) {
        if (i) out += ", ";
        out += "%" + names.value(blk.params[i]) + ": " + typeName(k.typeOf(blk.params[i]));
      }
      out += ")";
    }
    out += ":\n";
    for (InstId id : blk.insts) printInst(out, m, k, k.inst(id), names);
  }
  out += "}\n";
  return out;
}

std::string print(const Module& m) {
  std::string out = "target " + m.target.name() + "\n";
  out += "ptx " + std::to_string(m.ptx / 10) + "." + std::to_string(m.ptx % 10) + "\n";
  for (const Kernel& f : m.functions) out += "\n" + print(m, f);
  for (const Kernel& k : m.kernels) out += "\n" + print(m, k);
  return out;
}

}  // namespace tn::ir
