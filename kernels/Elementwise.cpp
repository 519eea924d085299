// The elementwise and activation templates (docs/kernels.md): add, mul, scale, residual_add,
// relu, gelu, silu, swiglu. One generator builds them all; they differ only in their parameters
// and the f32 function applied to each element.
#include <functional>
#include <numbers>

#include "kernels/Library.h"

namespace tn::kernels::lib {

using ir::Mod;
using ir::Op;
using ir::Type;

namespace {

enum class Role { In, Out, InOut, Scalar };  // read-only tensor, output, in-place tensor, f32
struct Param {
  const char* name;
  Role role;
};

// The per-element math over the f32 values of the In/InOut tensors and the scalars, in
// parameter order.
using ElementFn = std::function<Value(KernelBuilder&, std::span<const Value>)>;

struct Elementwise {
  const char* name;
  const char* summary;
  std::vector<Param> params;  // then n: u32
  std::function<ElementFn(const Options&)> fn;
  bool hasApprox = false;
};

// Thread t owns the 16 bytes at byte offset 16t of every tensor: elements [tV, tV + V) with
// V = vecElems(dtype). Offsets and element indices are 64-bit, so any u32 n is safe.
std::optional<ir::Module> build(const Elementwise& e, const Options& o, ir::Diagnostics& diags) {
  const Storage s = storageOption(o);
  const unsigned block = static_cast<unsigned>(o.integer("block"));
  const unsigned V = vecElems(s), bytes = bytesOf(s);
  const ElementFn fn = e.fn(o);
  ir::Module m = newModule();
  KernelBuilder kb(m, e.name);
  std::vector<Value> params;
  for (const Param& p : e.params) params.push_back(kb.param(p.role == Role::Scalar ? Type::f32() : kGlobalPtr, p.name));
  Value n = kb.param(Type::u32(), "n");
  kb.reqntid(block);

  Value t = kb.mad(kb.ctaid(Mod::X, "ctaid"), kb.u32(block), kb.tid(Mod::X, "tid"), "t");
  Value first = kb.mul_wide(t, kb.u32(V), "first");
  Value n64 = kb.cvt(n, Type::u64(), "n64");
  kb.if_then(
      (first < n64).named("live"),
      [&] {
        Value off = kb.mul_wide(t, kb.u32(16), "off");
        std::vector<Value> bases, ptrs;  // per parameter (invalid for scalars); the pointers
        for (size_t i = 0; i < params.size(); ++i) {
          bool ptr = e.params[i].role != Role::Scalar;
          bases.push_back(ptr ? kb.ptradd(params[i], off, std::string(e.params[i].name) + ".base") : Value());
          if (ptr) ptrs.push_back(params[i]);
        }
        Value aligned = ptrs.size() == 2 ? allAligned(kb, {ptrs[0], ptrs[1]}, 16)
                                         : allAligned(kb, {ptrs[0], ptrs[1], ptrs[2]}, 16);
        Value left = (n64 - first).named("left");
        Value vec = (aligned & (left >= uint64_t{V})).named("vec");
        // fn's value for one element, load(i) giving tensor parameter i's value there.
        auto apply = [&](const std::function<Value(size_t)>& load) {
          std::vector<Value> args;
          for (size_t i = 0; i < params.size(); ++i) {
            Role r = e.params[i].role;
            if (r == Role::Scalar) args.push_back(params[i]);
            else if (r != Role::Out) args.push_back(load(i));
          }
          return fn(kb, args);
        };
        size_t out = 0;
        while (e.params[out].role != Role::Out && e.params[out].role != Role::InOut) ++out;
        auto vecBase = [&](size_t i) { return kb.ptradd(assumeAligned16(kb, params[i]), off); };
        kb.if_else(
            vec,
            [&] {
              std::vector<std::vector<Value>> lanes(params.size());
              for (size_t i = 0; i < params.size(); ++i)
                if (e.params[i].role == Role::In || e.params[i].role == Role::InOut)
                  lanes[i] = loadVecF32(kb, vecBase(i), s, e.params[i].role == Role::In, e.params[i].name);
              std::vector<Value> ys;
              for (unsigned k = 0; k < V; ++k) ys.push_back(apply([&](size_t i) { return lanes[i][k]; }));
              storeVecF32(kb, vecBase(out), ys, s);
            },
            [&] {
              Value count = kb.cvt(kb.min(left, kb.u64(V)), Type::u32(), "count");
              kb.for_range(0u, count, 1u, [&](Value k) {
                Value y = apply([&](size_t i) {
                  return loadF32(kb, kb.index(bases[i], k, bytes), s, e.params[i].role == Role::In, e.params[i].name);
                });
                storeF32(kb, kb.index(bases[out], k, bytes), y, s);
              });
            },
            {.label = "vec"});
      },
      "live");
  kb.ret();
  return finish(kb, m, diags);
}

std::vector<Elementwise> elementwiseKernels() {
  using Args = std::span<const Value>;
  auto fixed = [](Value (*f)(KernelBuilder&, Args)) {
    return [f](const Options&) -> ElementFn { return f; };
  };
  return {
      {"add", "y = a + b", {{"a", Role::In}, {"b", Role::In}, {"y", Role::Out}},
       fixed([](KernelBuilder&, Args v) { return v[0] + v[1]; })},
      {"mul", "y = a * b", {{"a", Role::In}, {"b", Role::In}, {"y", Role::Out}},
       fixed([](KernelBuilder&, Args v) { return v[0] * v[1]; })},
      {"scale", "y = alpha * x", {{"x", Role::In}, {"y", Role::Out}, {"alpha", Role::Scalar}},
       fixed([](KernelBuilder&, Args v) { return v[1] * v[0]; })},
      {"residual_add", "y += x, in place", {{"y", Role::InOut}, {"x", Role::In}},
       fixed([](KernelBuilder&, Args v) { return v[0] + v[1]; })},
      {"relu", "y = max(x, 0) (NaN stays NaN)", {{"x", Role::In}, {"y", Role::Out}},
       fixed([](KernelBuilder& kb, Args v) { return relu(kb, v[0]); })},
      {"silu", "y = x * sigmoid(x)", {{"x", Role::In}, {"y", Role::Out}},
       fixed([](KernelBuilder& kb, Args v) { return silu(kb, v[0]); })},
      {"swiglu", "y = gate * silu(up)", {{"gate", Role::In}, {"up", Role::In}, {"y", Role::Out}},
       fixed([](KernelBuilder& kb, Args v) { return v[0] * silu(kb, v[1]); })},
      {"gelu", "y = gelu(x) in the tanh form or the erf form (option approx)",
       {{"x", Role::In}, {"y", Role::Out}},
       [](const Options& o) -> ElementFn {
         if (o.text("approx") == "erf") return [](KernelBuilder& kb, Args v) { return geluErf(kb, v[0]); };
         return [](KernelBuilder& kb, Args v) { return geluTanh(kb, v[0]); };
       },
       true},
  };
}

}  // namespace

void addElementwise(std::vector<Template>& out) {
  for (const Elementwise& e : elementwiseKernels()) {
    Template t;
    t.name = e.name;
    t.summary = std::string(e.summary) +
                ", for n elements; each thread handles 16 bytes of every tensor, with one vector access each when all "
                "are 16-byte aligned";
    t.options = {dtypeOption(), {"block", OptionType::Int, int64_t{256}, "threads per block", 32, 1024, 32, {}}};
    if (e.hasApprox) {
      OptionSpec a;
      a.name = "approx";
      a.type = OptionType::String;
      a.defaultValue = std::string("tanh");
      a.doc = "\"tanh\": 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))); \"erf\": 0.5x(1 + erf(x/sqrt(2)))";
      a.choices = {"tanh", "erf"};
      t.options.push_back(a);
    }
    t.build = [e](const Options& o, ir::Diagnostics& diags) { return build(e, o, diags); };
    t.launch = [](const Options& o) {
      uint32_t block = static_cast<uint32_t>(o.integer("block"));
      uint64_t perBlock = uint64_t{block} * vecElems(storageOption(o));
      return LaunchRule{{block}, {ceilDiv(Expr::param("n"), perBlock)}, 0};
    };
    out.push_back(std::move(t));
  }
}

}  // namespace tn::kernels::lib
