// The elementwise and activation templates (docs/kernels.md): add, mul, scale, residual_add,
// relu, gelu, silu, swiglu (GeGLU by its glu option). One generator builds them all; they differ
// only in their parameters and the f32 function applied to each element (and swiglu's inputs may
// be rows ld elements apart: its rows option).
#include <algorithm>
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
  std::vector<Param> params;  // then n: u32 (with rows: rows, cols, ld)
  std::function<ElementFn(const Options&)> fn;
  bool hasApprox = false;
  bool hasGlu = false;   // the option glu (gluOption)
  bool hasRows = false;  // the option rows: the inputs as rows ld elements apart (stridedRows)
};

// Inputs as rows (option rows): parameters rows, cols, ld in place of n; the output is rows x cols
// contiguous, input row r starts r * ld elements from its base (the halves of a fused
// gate-and-up projection's output: gate and up at column 0 and cols of rows of ld = 2 cols).
bool stridedRows(const Options& o) { return o.all().count("rows") && o.flag("rows"); }

// 16-byte vectors per thread: two, a block apart (a warp's accesses stay contiguous), so that
// the fixed cost of a thread (indices, the alignment test, the bounds) is spread over twice the
// elements and twice the loads are in flight.
constexpr unsigned kVectors = 2;

// Block b's thread t owns vectors v_k = b * block * kVectors + t + k * block (k < kVectors) of
// every tensor: elements [v_k V, v_k V + V), V = vecElems(dtype). Vector indices fit in u32 for
// every u32 n (n / V < 2^30); byte offsets are 64-bit.
std::optional<ir::Module> build(const Elementwise& e, const Options& o, ir::Diagnostics& diags) {
  const Storage s = storageOption(o);
  const unsigned block = static_cast<unsigned>(o.integer("block"));
  const unsigned V = vecElems(s), bytes = bytesOf(s);
  const ElementFn fn = e.fn(o);
  ir::Module m = newModule();
  KernelBuilder kb(m, e.name);
  std::vector<Value> params;
  for (const Param& p : e.params) params.push_back(kb.param(p.role == Role::Scalar ? Type::f32() : kGlobalPtr, p.name));
  const bool rows = stridedRows(o);
  Value cols, ld, n;
  if (rows) {
    Value r = kb.param(Type::u32(), "rows");
    cols = kb.param(Type::u32(), "cols");
    ld = kb.param(Type::u32(), "ld");
    n = (r * cols).named("n");
  } else {
    n = kb.param(Type::u32(), "n");
  }
  kb.reqntid(block);

  Value v0 = kb.mad(kb.ctaid(Mod::X, "ctaid"), kb.u32(block * kVectors), kb.tid(Mod::X, "tid"), "v0");
  Value full = (n / V).named("full");                     // whole vectors
  Value nvec = (full + kb.select(n % V != 0u, kb.u32(1), kb.u32(0))).named("nvec");
  std::vector<Value> vs;
  for (unsigned k = 0; k < kVectors; ++k) vs.push_back(k == 0 ? v0 : (v0 + k * block).named("v"));
  kb.if_then(
      (v0 < nvec).named("live"),
      [&] {
        std::vector<Value> ptrs;
        for (size_t i = 0; i < params.size(); ++i)
          if (e.params[i].role != Role::Scalar) ptrs.push_back(params[i]);
        Value aligned = ptrs.size() == 2 ? allAligned(kb, {ptrs[0], ptrs[1]}, 16)
                                         : allAligned(kb, {ptrs[0], ptrs[1], ptrs[2]}, 16);
        Value vec = (aligned & (vs.back() < full)).named("vec");
        // Rows: the vectors stay within a row, and a row's start is a whole vector, when cols and
        // ld are multiples of V.
        if (rows) vec = (vec & (((cols | ld) % V) == 0u)).named("vec");
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
        kb.if_else(
            vec,
            [&] {
              // Every vector's loads first, then the math and the stores.
              std::vector<Value> aligned16(params.size());
              for (size_t i = 0; i < params.size(); ++i)
                if (e.params[i].role != Role::Scalar) aligned16[i] = assumeAligned16(kb, params[i]);
              // An input's vector of output vector v: with rows, vector c of row r (v = r cols/V + c)
              // is vector c of its row, r ld/V from the base.
              std::vector<Value> inVs = vs;
              if (rows) {
                Value colsV = (cols / V).named("cols_v"), ldV = (ld / V).named("ld_v");
                for (Value& v : inVs) {
                  Value r = (v / colsV).named("row");
                  v = (kb.mul_wide(r, ldV) + kb.cvt(v - r * colsV, Type::u64())).named("in_v");
                }
              }
              auto at = [&](size_t i, unsigned k) {
                return kb.index(aligned16[i], e.params[i].role == Role::In ? inVs[k] : vs[k], 16);
              };
              std::vector<std::vector<std::vector<Value>>> lanes(kVectors, std::vector<std::vector<Value>>(params.size()));
              for (unsigned k = 0; k < kVectors; ++k)
                for (size_t i = 0; i < params.size(); ++i)
                  if (e.params[i].role == Role::In || e.params[i].role == Role::InOut)
                    lanes[k][i] = loadVecF32(kb, at(i, k), s, e.params[i].role == Role::In, e.params[i].name);
              for (unsigned k = 0; k < kVectors; ++k) {
                std::vector<Value> ys;
                for (unsigned j = 0; j < V; ++j) ys.push_back(apply([&](size_t i) { return lanes[k][i][j]; }));
                storeVecF32(kb, at(out, k), ys, s);
              }
            },
            [&] {
              for (unsigned k = 0; k < kVectors; ++k)
                kb.if_then((vs[k] < nvec).named("has"), [&] {
                  Value first = (vs[k] * V).named("first");
                  Value count = kb.min(n - first, kb.u32(V), "count");
                  kb.for_range(0u, count, 1u, [&](Value j) {
                    Value flat = (first + j).named("elem");
                    Value idx = kb.cvt(flat, Type::u64());
                    // With rows, element c of row r (flat = r cols + c) at r ld + c of an input.
                    Value inIdx = idx;
                    if (rows) {
                      Value r = (flat / cols).named("row");
                      inIdx = (kb.mul_wide(r, ld) + kb.cvt(flat - r * cols, Type::u64())).named("in_elem");
                    }
                    Value y = apply([&](size_t i) {
                      return loadF32(kb, kb.index(params[i], e.params[i].role == Role::In ? inIdx : idx, bytes), s,
                                     e.params[i].role == Role::In, e.params[i].name);
                    });
                    storeF32(kb, kb.index(params[out], idx, bytes), y, s);
                  });
                }, "scalar");
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
      {"swiglu", "y = gate * silu(up), or with glu gate * gelu(up) (GeGLU) or gpt-oss's clamped form",
       {{"gate", Role::In}, {"up", Role::In}, {"y", Role::Out}},
       [](const Options& o) -> ElementFn {
         return [glu = o.text("glu")](KernelBuilder& kb, Args v) { return gluUnit(kb, glu, v[1], v[0]); };
       },
       false, true, true},
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
                ", for n elements; each thread handles two 16-byte pieces of every tensor, a block apart, with "
                "vector accesses when all are 16-byte aligned";
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
    if (e.hasGlu) t.options.push_back(gluOption());
    if (e.hasRows)
      t.options.push_back(option("rows", false,
                                 "gate and up as rows: the parameters rows, cols and ld in place of n; y is rows x "
                                 "cols, row r of gate and of up starts r * ld elements from its base (the halves of a "
                                 "fused gate-and-up projection's output, ld = 2 cols), rows * cols < 2^32"));
    t.build = [e](const Options& o, ir::Diagnostics& diags) { return build(e, o, diags); };
    t.launch = [](const Options& o) {
      uint32_t block = static_cast<uint32_t>(o.integer("block"));
      uint64_t perBlock = uint64_t{block} * kVectors * vecElems(storageOption(o));
      const Expr n = stridedRows(o) ? Expr::param("rows") * Expr::param("cols") : Expr::param("n");
      return LaunchRule{{block}, {ceilDiv(n, perBlock)}, 0};
    };
    std::vector<std::string> tensors, inputs;
    for (const auto& p : e.params) {
      if (p.role != Role::Scalar) tensors.push_back(p.name);
      if (p.role == Role::In) inputs.push_back(p.name);
    }
    t.extents = [tensors, inputs, flat = sameExtent(tensors, Expr::param("n"))](const Options& o) {
      if (!stridedRows(o)) return flat(o);
      const Expr rows = Expr::param("rows"), cols = Expr::param("cols");
      Template::Extents out;
      for (const std::string& name : tensors) {
        const bool in = std::find(inputs.begin(), inputs.end(), name) != inputs.end();
        out.push_back({name, in ? stridedSpan({{rows, Expr::param("ld")}}, cols) : rows * cols});
      }
      return out;
    };
    t.elements = storageElements(std::move(tensors));
    out.push_back(std::move(t));
  }
}

}  // namespace tn::kernels::lib
