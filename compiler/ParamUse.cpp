// Pointer-parameter use (compiler/ParamUse.h): which values derive from which pointer parameter,
// then what the memory operations do through them.
//
// A value derives from parameter p when it is p, or the result of an instruction that is not a
// load (ptradd, bitcast to u64 and back, integer arithmetic on it, select, shuffle, ...) with an
// operand that derives from p, or a block parameter that receives such a value; but not an `and`
// with a constant below 4096 (a pointer's low bits, its skew from an alignment: a small integer,
// never an address, such as the byte selectors of the quantized kernels' aligned words). That
// over-approximates (a comparison of p with something derives from p), which only matters for
// escapes: an address that derives from p makes a load a read of p and a store a write of p;
// a value that derives from p stored to memory, or given to an atomic, is an escape, and then
// nothing is known (`embed` does not make such a pointer const). A TMA store writes through a
// tensor map, whose pointer parameter only the launch rule names: every pointer escapes.
//
// The element type is the one scalar of the typed accesses through p: floats and signed integers
// (f16, bf16, f32, f64, s8..s64; vectors count by lane). Unsigned and bits accesses move raw
// data (a bf16 row read as u16, or as v4.u32 words) and do not decide it; no typed access, or
// two different ones, leave it unknown.
#include "compiler/ParamUse.h"

#include <algorithm>
#include <bitset>

#include "backends/bundle/Bundle.h"
#include "ir/Ops.h"

namespace tn::spec {

namespace {

using Origins = std::bitset<bundle::kMaxParams>;

bool isTypedElement(ir::Scalar s) {
  switch (s) {
    case ir::Scalar::F16: case ir::Scalar::BF16: case ir::Scalar::F32: case ir::Scalar::F64:
    case ir::Scalar::S8: case ir::Scalar::S16: case ir::Scalar::S32: case ir::Scalar::S64:
      return true;
    default:
      return false;
  }
}

}  // namespace

void analyzeParamUse(const ir::Kernel& k, std::vector<bundle::Param>& params) {
  const size_t np = std::min(k.params.size(), params.size());
  std::vector<Origins> from(k.values.size());
  bool anyPointer = false;
  for (size_t i = 0; i < np && i < bundle::kMaxParams; ++i)
    if (k.typeOf(k.params[i].value).isPtr()) {
      from[k.params[i].value.index].set(i);
      anyPointer = true;
    }
  if (!anyPointer) return;

  // Constants below 4096, by value id: an `and` with one keeps only a pointer's low bits.
  std::vector<bool> lowMask(k.values.size(), false);
  for (const ir::Block& b : k.blocks)
    for (ir::InstId id : b.insts) {
      const ir::Inst& in = k.inst(id);
      if (in.op == ir::Op::Const && in.result.valid() && in.imm < 4096) lowMask[in.result.index] = true;
    }
  auto lowBits = [&](const ir::Inst& in) {
    return in.op == ir::Op::And &&
           std::any_of(in.operands.begin(), in.operands.end(), [&](ir::ValueId v) { return lowMask[v.index]; });
  };

  // Propagate to a fixpoint (block parameters may receive values from later blocks).
  for (bool changed = true; changed;) {
    changed = false;
    auto merge = [&](ir::ValueId to, const Origins& o) {
      Origins& t = from[to.index];
      if ((t | o) != t) {
        t |= o;
        changed = true;
      }
    };
    for (const ir::Block& b : k.blocks)
      for (ir::InstId id : b.insts) {
        const ir::Inst& in = k.inst(id);
        for (const ir::BlockCall& c : in.succs) {
          const ir::Block& to = k.block(c.block);
          for (size_t a = 0; a < c.args.size() && a < to.params.size(); ++a) merge(to.params[a], from[c.args[a].index]);
        }
        if (!in.result.valid() || (ir::info(in.op).flags & ir::OF_MEMREAD) || lowBits(in)) continue;
        Origins o;
        for (ir::ValueId v : in.operands) o |= from[v.index];
        if (o.any()) merge(in.result, o);
      }
  }

  std::vector<uint32_t> access(np, 0);
  std::vector<std::optional<ir::Scalar>> element(np);
  std::vector<bool> conflicting(np, false);
  auto each = [&](const Origins& o, auto&& f) {
    if (o.none()) return;
    for (size_t i = 0; i < np; ++i)
      if (o.test(i)) f(i);
  };
  auto touch = [&](ir::ValueId addr, uint32_t bits, std::optional<ir::Type> type) {
    each(from[addr.index], [&](size_t i) {
      access[i] |= bits;
      if (!type || !isTypedElement(type->scalar)) return;
      if (element[i] && *element[i] != type->scalar) conflicting[i] = true;
      element[i] = type->scalar;
    });
  };
  auto escape = [&](ir::ValueId v) { each(from[v.index], [&](size_t i) { access[i] |= bundle::kPtrEscapes; }); };
  for (const ir::Block& b : k.blocks)
    for (ir::InstId id : b.insts) {
      const ir::Inst& in = k.inst(id);
      switch (in.op) {
        case ir::Op::Ld:
        case ir::Op::Ldmatrix:
          touch(in.operands[0], bundle::kPtrRead, in.type);
          break;
        case ir::Op::St:
          touch(in.operands[0], bundle::kPtrWritten, in.type);
          escape(in.operands[1]);
          break;
        case ir::Op::Atom:
        case ir::Op::AtomCas:
          touch(in.operands[0], bundle::kPtrRead | bundle::kPtrWritten, in.type);
          for (size_t o = 1; o < in.operands.size(); ++o) escape(in.operands[o]);
          break;
        case ir::Op::CpAsync:  // dst (shared), src (global): raw bytes
          touch(in.operands[0], bundle::kPtrWritten, std::nullopt);
          touch(in.operands[1], bundle::kPtrRead, std::nullopt);
          break;
        case ir::Op::TmaStore: case ir::Op::TmaStore3d:  // writes through a tensor map, whose pointer only the launch rule names
          for (const ir::KernelParam& p : k.params) escape(p.value);
          break;
        default:
          break;
      }
    }
  for (size_t i = 0; i < np; ++i) {
    if (!params[i].type.isPointer()) continue;
    params[i].access = access[i];
    params[i].element.reset();
    if (element[i] && !conflicting[i] && !(access[i] & bundle::kPtrEscapes))
      params[i].element = static_cast<bundle::ParamType::Scalar>(static_cast<unsigned>(*element[i]) + 1);
  }
}

void addTensorMapUse(const ir::Kernel& k, const bundle::LaunchRule& rule, std::vector<bundle::Param>& params) {
  auto indexOf = [&](const std::string& name) {
    size_t i = 0;
    while (i < params.size() && params[i].name != name) ++i;
    return i;
  };
  for (const bundle::TensorMapRule& m : rule.tensorMaps) {
    const size_t map = indexOf(m.param), source = indexOf(m.source);
    if (map >= params.size() || source >= params.size() || map >= k.params.size()) continue;  // checkRule reports these
    const ir::ValueId mapValue = k.params[map].value;
    uint32_t bits = 0;
    for (const ir::Block& b : k.blocks)
      for (ir::InstId id : b.insts) {
        const ir::Inst& in = k.inst(id);
        if (std::find(in.operands.begin(), in.operands.end(), mapValue) == in.operands.end()) continue;
        bits |= ir::info(in.op).name.ends_with(".store") ? bundle::kPtrWritten : bundle::kPtrRead;
      }
    bundle::Param& p = params[source];
    p.access |= bits;
    if (bits && !p.element && !(p.access & bundle::kPtrEscapes)) p.element = m.element;
  }
}

}  // namespace tn::spec
