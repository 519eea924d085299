// Verifier and emitter agree: every one-op kernel the verifier accepts for a target compiles as
// `truenoc emit-ptx` does (legalize, then the emitter) and ptxas accepts the PTX. The sweep is
// every op of ir/Ops.def with scalar operands x every element type it allows (and every source
// type for cvt) x every combination of its modifiers x sm_75, sm_80, sm_90; the accepted kernels
// of a target are assembled as one module. Without ptxas only the emitter half runs (a visible
// message says so). Kernels legalize changed also run in the interpreter before and after.
// docs/robustness.md, "Verifier and emitter agreement".
#include <doctest/doctest.h>

#include <cstdlib>

#include "backends/ptx/Ptxas.h"
#include "compiler/Compile.h"
#include "interp_harness.h"
#include "ir/Verifier.h"
#include "passes/Rewrite.h"

namespace {

using namespace tn;
using ir::Mod;
using ir::ModGroup;
using ir::Op;
using ir::Scalar;
using ir::Type;

std::vector<Type> scalarTypes() {
  std::vector<Type> ts;
  for (unsigned s = 0; s < static_cast<unsigned>(Scalar::Ptr); ++s) ts.push_back(Type::of(static_cast<Scalar>(s)));
  return ts;
}

// Every choice of modifiers the op accepts: per group none (unless required) or one of its mods.
std::vector<std::array<Mod, ir::kModGroups>> modifierChoices(const ir::OpInfo& oi) {
  std::vector<std::array<Mod, ir::kModGroups>> out(1);
  for (size_t g = 0; g < ir::kModGroups; ++g) {
    if (!(oi.mods & (1u << g))) continue;
    std::vector<Mod> options;
    if (!(oi.required & (1u << g))) options.push_back(Mod::None);
    for (unsigned m = 1; m <= static_cast<unsigned>(Mod::ExactMod); ++m)
      if (static_cast<size_t>(ir::modGroup(static_cast<Mod>(m))) == g) options.push_back(static_cast<Mod>(m));
    std::vector<std::array<Mod, ir::kModGroups>> next;
    for (const auto& base : out)
      for (Mod m : options) {
        next.push_back(base);
        next.back()[g] = m;
      }
    out = std::move(next);
  }
  return out;
}

// A kernel with one `op` on parameters of the types its operand letters ask for, or nullopt when
// the op's operands are not scalars of that kind (pack, extract, shared.addr, control flow).
std::optional<ir::Kernel> oneOpKernel(Op op, Type t, std::optional<Type> s, const std::array<Mod, ir::kModGroups>& mods,
                                      const std::string& name) {
  const ir::OpInfo& oi = ir::info(op);
  if (oi.flags & (ir::OF_TERMINATOR | ir::OF_SYMBOL | ir::OF_IMM | ir::OF_VARIADIC)) return std::nullopt;
  ir::Kernel k;
  k.name = name;
  ir::Inst in;
  in.op = op;
  in.type = t;
  in.srcType = s;
  in.mods = mods;
  for (char rule : oi.operands) {
    Type pt = t;
    switch (rule) {
      case 'T': break;
      case 'S': pt = *s; break;
      case 'p': pt = Type::pred(); break;
      case 'P': pt = Type::ptr(ir::AddrSpace::Global); break;
      case 'i': pt = Type::u32(); break;
      case 'o': pt = Type::u64(); break;
      default: return std::nullopt;
    }
    in.operands.push_back(k.addParam(pt, "a" + std::to_string(in.operands.size())));
  }
  ir::BlockId entry = k.addBlock("entry");
  std::optional<Type> rt = ir::resultTypeFor(in);
  ir::InstId def = k.append(entry, in, rt, "r");
  // A pure op's result is stored, so that neither ptxas nor the comparison below sees dead code.
  if (rt && (oi.flags & ir::OF_PURE)) {
    ir::Inst st;
    st.op = Op::St;
    st.type = rt->isPred() ? Type::u32() : *rt;
    st.operands = {k.addParam(Type::ptr(ir::AddrSpace::Global), "out"), k.inst(def).result};
    if (rt->isPred()) {
      ir::Inst one = tn::passes::constInst(Type::u32(), 1, {}), zero = tn::passes::constInst(Type::u32(), 0, {});
      ir::Inst sel;
      sel.op = Op::Selp;
      sel.type = Type::u32();
      sel.operands = {k.inst(k.append(entry, one, Type::u32())).result, k.inst(k.append(entry, zero, Type::u32())).result,
                      st.operands[1]};
      st.operands[1] = k.inst(k.append(entry, sel, Type::u32())).result;
    }
    k.append(entry, st);
  }
  ir::Inst ret;
  ret.op = Op::Ret;
  k.append(entry, ret);
  return k;
}

// The kernels of the sweep the verifier accepts for `target`.
ir::Module acceptedKernels(bundle::Target target) {
  ir::Module m;
  compile::retarget(m, target);
  auto consider = [&](Op op, Type t, std::optional<Type> s, const std::array<Mod, ir::kModGroups>& mods) {
    auto k = oneOpKernel(op, t, s, mods, "k" + std::to_string(m.kernels.size()));
    if (!k) return;
    ir::Diagnostics d;
    if (ir::verifyKernel(m, *k, d)) m.kernels.push_back(std::move(*k));
  };
  for (size_t o = 0; o < ir::allOps().size(); ++o) {
    Op op = static_cast<Op>(o);
    const ir::OpInfo& oi = ir::info(op);
    if (oi.types == ir::TC_NONE) continue;
    auto choices = modifierChoices(oi);
    for (Type t : scalarTypes()) {
      if (!ir::typeInClasses(t, oi.types)) continue;
      for (const auto& mods : choices) {
        if (!(oi.flags & ir::OF_SRCTYPE)) consider(op, t, std::nullopt, mods);
        else
          for (Type s : scalarTypes()) consider(op, t, s, mods);
      }
    }
  }
  return m;
}

// Runs kernel k alone in the interpreter on one thread with the scalar arguments of `seed`.
harness::Outcome interpret(const ir::Module& m, const ir::Kernel& k, uint32_t seed) {
  ir::Module one;
  one.target = m.target;
  one.ptx = m.ptx;
  one.kernels = {k};
  std::mt19937 rng(seed);
  harness::Run run = harness::detail::launch("sweep", {1, 1, 1}, {1, 1, 1});
  for (const ir::KernelParam& p : k.params) {
    Type t = k.typeOf(p.value);
    const std::string& name = k.value(p.value).name;
    if (t.isPtr()) run.buffer(name, std::vector<uint64_t>(1, 0));
    else run.bits(name, harness::randomBits(rng, t.isPred() ? 1 : t.bits()));
  }
  return harness::execute(one, k.name, run);
}

}  // namespace

TEST_CASE("every kernel the verifier accepts emits PTX that ptxas accepts") {
  std::string why;
  std::optional<std::string> ptxas = ptxas::find("", why);
  if (!ptxas) MESSAGE("ptxas not found (" << why << "): checking the emitter only");
  for (unsigned sm : {75u, 80u, 90u}) {
    bundle::Target target{sm, false};
    ir::Module m = acceptedKernels(target);
    INFO(target.name() << ": " << m.kernels.size() << " kernels");
    CHECK(m.kernels.size() > 500);  // the sweep reaches past the trivial cases
    ir::Diagnostics d;
    compile::Options o;
    o.level = compile::Level::None;
    const ir::Module original = m;
    compile::Output out = compile::compile(m, target, o, d);
    INFO(harness::diagnosticsText(d));
    REQUIRE(out.ptx.has_value());
    // Legalized kernels (the only change at Level::None) compute what they did before.
    unsigned compared = 0;
    for (size_t i = 0; i < m.kernels.size(); ++i) {
      if (m.kernels[i].insts.size() == original.kernels[i].insts.size()) continue;
      for (uint32_t seed = 1; seed <= 8; ++seed) {
        harness::Outcome before = interpret(original, original.kernels[i], seed * 7919 + sm);
        harness::Outcome after = interpret(m, m.kernels[i], seed * 7919 + sm);
        INFO(ir::print(original, original.kernels[i]) << "legalized:\n" << ir::print(m, m.kernels[i]));
        CHECK(before.error.has_value() == after.error.has_value());
        CHECK(before.buffers == after.buffers);
        ++compared;
      }
    }
    CHECK(compared > 0);
    MESSAGE(target.name() << ": " << m.kernels.size() << " kernels, " << compared << " interpreter runs compared");
    if (!ptxas) continue;
    ptxas::TempDir dir;
    REQUIRE(dir.ok());
    ptxas::Output as = ptxas::assemble(*ptxas, dir.path(), {.kernel = m.kernels.front().name, .target = target, .ptx = *out.ptx, .resources = false});
    INFO(as.log.substr(0, 4000));
    CHECK(as.ok);
  }
}
