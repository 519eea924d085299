// The spec loader and kernel instantiation, with a test template registry that has every option
// type (the lit tests in lit-tests/spec/ cover the diagnostics of the built-in templates).
#include <doctest/doctest.h>

#include "compiler/Spec.h"
#include "ir/Builder.h"

namespace {

using namespace tn;

// fill(out, n): a template with an integer, a boolean and a string option.
std::vector<bundle::Target> targets(std::initializer_list<const char*> names) {
  std::vector<bundle::Target> out;
  for (const char* n : names) out.push_back(*bundle::Target::parse(n));
  return out;
}

std::vector<kernels::Template> testTemplates() {
  kernels::Template fill;
  fill.name = "fill";
  fill.summary = "out[i] = value for i < n";
  fill.options = {
      {"block", kernels::OptionType::Int, int64_t{128}, "threads per block", 32, 1024, 32, {}},
      {"wide", kernels::OptionType::Bool, false, "use 64-bit element counts", INT64_MIN, INT64_MAX, 1, {}},
      {"dtype", kernels::OptionType::String, std::string("f32"), "element type", INT64_MIN, INT64_MAX, 1, {"f32", "u32"}},
  };
  fill.build = [](const kernels::Options& o, ir::Diagnostics&) -> std::optional<ir::Module> {
    ir::Module m;
    ir::KernelBuilder kb(m, "fill");
    kb.param(ir::Type::ptr(ir::AddrSpace::Global), "out");
    kb.param(o.flag("wide") ? ir::Type::u64() : ir::Type::u32(), "n");
    kb.param(o.text("dtype") == "f32" ? ir::Type::f32() : ir::Type::u32(), "value");
    kb.maxntid(static_cast<unsigned>(o.integer("block")));
    kb.ret();
    return m;
  };
  fill.launch = [](const kernels::Options& o) {
    uint32_t block = static_cast<uint32_t>(o.integer("block"));
    return bundle::LaunchRule{{block}, {ceilDiv(bundle::Expr::param("n"), block)}, 0};
  };
  return {fill};
}

struct Loaded {
  std::optional<spec::Spec> spec;
  std::vector<std::string> errors;
};

Loaded load(const std::string& text, const std::vector<kernels::Template>& templates) {
  ir::Diagnostics d;
  Loaded out;
  out.spec = spec::parseSpec(text, "spec.toml", "", d, templates);
  for (const ir::Diagnostic& diag : d.all()) out.errors.push_back(ir::formatDiagnostic(diag));
  return out;
}

}  // namespace

TEST_CASE("spec: template options of every type, defaults and overrides") {
  auto templates = testTemplates();
  Loaded l = load(R"(
[bundle]
name = "fills"
targets = ["sm_90", "sm_80"]
ptx_fallback = true
fp_contract = "off"

[[kernel]]
template = "fill"

[[kernel]]
template = "fill"
name = "fill_wide"
allow_spills = true
[kernel.options]
block = 256
wide = true
dtype = "u32"
)",
                  templates);
  REQUIRE(l.errors.empty());
  REQUIRE(l.spec);
  const spec::Spec& s = *l.spec;
  CHECK(s.name == "fills");
  CHECK(s.targets == targets({"sm_90", "sm_80"}));
  CHECK(s.ptxFallback);
  CHECK(s.fpContract == spec::FpContract::Off);
  REQUIRE(s.kernels.size() == 2);
  CHECK(s.kernels[0].name == "fill");
  CHECK(s.kernels[0].options.integer("block") == 128);
  CHECK_FALSE(s.kernels[0].options.flag("wide"));
  CHECK(s.kernels[0].options.text("dtype") == "f32");
  CHECK_FALSE(s.kernels[0].allowSpills);
  CHECK(s.kernels[1].name == "fill_wide");
  CHECK(s.kernels[1].allowSpills);
  CHECK(s.kernels[1].options.integer("block") == 256);
  CHECK(s.kernels[1].options.flag("wide"));
  CHECK(s.kernels[1].options.text("dtype") == "u32");

  spec::TirCache tirs;
  ir::Diagnostics d;
  auto inst = spec::instantiate(s, s.kernels[1], tirs, d);
  REQUIRE(inst);
  CHECK(d.all().empty());
  REQUIRE(inst->module.kernels.size() == 1);
  CHECK(inst->module.kernels[0].name == "fill_wide");
  using PT = bundle::ParamType;
  CHECK(inst->params == std::vector<bundle::Param>{{"out", PT{PT::Scalar::Ptr, 1, PT::Space::Global}, 0},
                                                   {"n", PT{PT::Scalar::U64}, 0},
                                                   {"value", PT{PT::Scalar::U32}, 0}});
  CHECK(bundle::describe(inst->launch) == "block [256], grid [ceil_div(n, 256)], dynamic_shared 0");
}

TEST_CASE("spec: option type and value errors name the option and the spec location") {
  auto templates = testTemplates();
  Loaded l = load(R"([bundle]
name = "b"
[[kernel]]
template = "fill"
options = { wide = 1, dtype = "f64", block = true }
)",
                  templates);
  CHECK_FALSE(l.spec);
  CHECK(l.errors == std::vector<std::string>{
                        "spec.toml:5:20: error: option 'wide' must be a boolean, not an integer",
                        "spec.toml:5:31: error: option 'dtype' must be one of \"f32\", \"u32\", not \"f64\"",
                        "spec.toml:5:46: error: option 'block' must be an integer, not a boolean",
                    });
}

TEST_CASE("spec: a template whose launch rule does not fit its kernel is reported at the entry") {
  auto templates = testTemplates();
  templates[0].launch = [](const kernels::Options&) {
    return bundle::LaunchRule{{512}, {ceilDiv(bundle::Expr::param("count"), 512)}, 0};
  };
  Loaded l = load("[bundle]\nname = \"b\"\n[[kernel]]\ntemplate = \"fill\"\n", templates);
  REQUIRE(l.spec);
  spec::TirCache tirs;
  ir::Diagnostics d;
  CHECK_FALSE(spec::instantiate(*l.spec, l.spec->kernels[0], tirs, d));
  REQUIRE(d.all().size() == 1);
  CHECK(ir::formatDiagnostic(d.all()[0]) ==
        "spec.toml:4:12: error: template 'fill' launch rule grid[0]: 'count' is not a parameter of the kernel");

  templates[0].launch = [](const kernels::Options&) { return bundle::LaunchRule{{512}, {bundle::Expr::param("n")}, 0}; };
  l = load("[bundle]\nname = \"b\"\n[[kernel]]\ntemplate = \"fill\"\n", templates);
  REQUIRE(l.spec);
  ir::Diagnostics d2;
  CHECK_FALSE(spec::instantiate(*l.spec, l.spec->kernels[0], tirs, d2));
  REQUIRE(d2.all().size() == 1);
  CHECK(ir::formatDiagnostic(d2.all()[0]) ==
        "spec.toml:4:12: error: block [512, 1, 1] has more threads than the maxntid [128, 1, 1] of kernel 'fill' allows");
}

TEST_CASE("spec: default and arch-specific targets") {
  auto templates = testTemplates();
  Loaded l = load("[bundle]\nname = \"b\"\n[[kernel]]\ntemplate = \"fill\"\n", templates);
  REQUIRE(l.spec);
  CHECK(l.spec->targets == targets({"sm_80", "sm_86", "sm_89", "sm_90"}));
  CHECK(l.spec->fpContract == spec::FpContract::Fast);
  CHECK_FALSE(l.spec->ptxFallback);
  l = load("[bundle]\nname = \"b\"\ntargets = [\"sm_80\", \"sm_90\", \"sm_90a\"]\n[[kernel]]\ntemplate = \"fill\"\n", templates);
  REQUIRE(l.spec);
  CHECK(l.spec->targets == targets({"sm_80", "sm_90", "sm_90a"}));
  // Each target compiles with a PTX ISA version it accepts: sm_90a needs 8.0, sm_90 7.8.
  spec::TirCache tirs;
  ir::Diagnostics id;
  auto inst = spec::instantiate(*l.spec, l.spec->kernels[0], tirs, id);
  REQUIRE(inst);
  for (auto [target, ptx] : {std::pair{"sm_80", 70u}, {"sm_90", 78u}, {"sm_90a", 80u}}) {
    ir::Module m = inst->module;
    ir::Diagnostics d;
    compile::Output out = compile::compile(m, *bundle::Target::parse(target), spec::compileOptions(*l.spec), d);
    CHECK_MESSAGE(out.ptx.has_value(), target);
    CHECK(m.ptx == ptx);
    CHECK(out.ptx->find(std::string(".target ") + target + "\n") != std::string::npos);
  }
}

TEST_CASE("spec: the registry refuses a generator's template with a taken or malformed name, or no build") {
  // Refusals leave the registry as it was (a generator's templates are added in its own process).
  const size_t before = kernels::templates().size();
  kernels::Template t = *kernels::findTemplate(kernels::templates(), "vadd");
  CHECK(kernels::addTemplate(t) == "a template named 'vadd' already exists");
  t.name = "2x";
  CHECK(kernels::addTemplate(t) == "template name '2x' is not an identifier");
  t.name = "my_vadd";
  t.build = nullptr;
  CHECK(kernels::addTemplate(t) == "template 'my_vadd' needs a build and a launch function");
  CHECK(kernels::templates().size() == before);
}

TEST_CASE("spec: an error inside a template's source is followed by a note at the spec entry naming the instance") {
  kernels::Template t;
  t.name = "broken";
  t.options = {{"block", kernels::OptionType::Int, int64_t{256}, "threads", 32, 1024, 32, {}},
               {"mode", kernels::OptionType::String, std::string("a"), "mode", 0, 0, 1, {"a", "b"}}};
  t.build = [](const kernels::Options&, ir::Diagnostics& d) -> std::optional<ir::Module> {
    d.report(ir::Severity::Error, "gen/broken.cpp", ir::SourceLoc{1, 12, 7}, "a builder call failed");
    return std::nullopt;
  };
  t.launch = [](const kernels::Options&) { return kernels::LaunchRule{}; };
  spec::Spec s;
  s.file = "spec.toml";
  spec::KernelSpec k;
  k.name = "broken";
  k.tmpl = &t;
  k.options = t.defaults();
  k.options.set("mode", std::string("b"));
  k.templateLoc = ir::SourceLoc{0, 9, 12};
  spec::TirCache tirs;
  ir::Diagnostics d;
  CHECK_FALSE(spec::instantiate(s, k, tirs, d));
  REQUIRE(d.all().size() == 2);
  CHECK(ir::formatDiagnostic(d.all()[0]) == "gen/broken.cpp:12:7: error: a builder call failed");
  CHECK(ir::formatDiagnostic(d.all()[1]) == "spec.toml:9:12: note: in template 'broken' with mode=b, instantiated here");
}

TEST_CASE("spec: the built-in templates build with their defaults on every default target") {
  for (const kernels::Template& t : kernels::templates()) {
    ir::Diagnostics d;
    auto inst = spec::instantiateTemplate(t, t.defaults(), d);
    CHECK_MESSAGE(inst.has_value(), t.name);
    CHECK(d.all().empty());
    if (!inst) continue;
    for (const bundle::Target& target : bundle::defaultTargets()) {
      ir::Module m = inst->module;
      ir::Diagnostics cd;
      compile::Output out = compile::compile(m, target, spec::compileOptions(spec::Spec{}), cd);
      CHECK_MESSAGE(out.ptx.has_value(), t.name << " on " << target.name());
      CHECK_FALSE(cd.hasErrors());
    }
  }
}

// A template whose options build per target (Template::alternatives, as mainloop = "auto"): path
// "auto" builds "fast" (an sm_90a-only kernel of another launch rule) where it runs, and itself
// elsewhere; "odd" makes the two members' caller-visible parameters differ.
TEST_CASE("spec: a template's alternatives give each target the first member it runs, with one signature") {
  auto templates = testTemplates();
  kernels::Template& fill = templates[0];
  fill.options.push_back({"path", kernels::OptionType::String, std::string("base"), "which member", INT64_MIN,
                          INT64_MAX, 1, {"base", "fast", "auto", "odd"}});
  fill.build = [](const kernels::Options& o, ir::Diagnostics&) -> std::optional<ir::Module> {
    ir::Module m;
    ir::KernelBuilder kb(m, "fill");
    ir::Value out = kb.param(ir::Type::ptr(ir::AddrSpace::Global), "out");
    kb.param(ir::Type::u32(), o.text("path") == "odd" ? "count" : "n");
    if (o.text("path") == "fast") kb.wgmma_fence();  // sm_90a only
    else kb.store(out, kb.u32(1));  // the base member writes through out, the fast one does not
    kb.ret();
    return m;
  };
  fill.launch = [](const kernels::Options& o) {
    const bool fast = o.text("path") == "fast";
    return bundle::LaunchRule{{fast ? 384u : 128u}, {fast ? bundle::Expr(1) : bundle::Expr::param(o.text("path") == "odd" ? "count" : "n")}, 0};
  };
  fill.alternatives = [](const kernels::Options& o) -> std::vector<kernels::Options> {
    if (o.text("path") != "auto" && o.text("path") != "odd") return {};
    kernels::Options fast = o;
    fast.set("path", std::string("fast"));
    return {fast, o};
  };
  auto instances = [&](const char* targetList, const char* path, std::vector<std::string>& errors) {
    Loaded l = load(std::string("[bundle]\nname = \"b\"\ntargets = [") + targetList +
                        "]\n[[kernel]]\ntemplate = \"fill\"\noptions = { path = \"" + path + "\" }\n",
                    templates);
    REQUIRE(l.spec);
    spec::TirCache tirs;
    ir::Diagnostics d;
    auto out = spec::instantiateForTargets(*l.spec, l.spec->kernels[0], tirs, d);
    for (const ir::Diagnostic& diag : d.all()) errors.push_back(ir::formatDiagnostic(diag));
    return out;
  };
  std::vector<std::string> errors;
  // Targets in any order: the member of the lowest target comes first.
  auto two = instances("\"sm_90a\", \"sm_80\", \"sm_90\"", "auto", errors);
  REQUIRE(two);
  CHECK(errors.empty());
  REQUIRE(two->size() == 2);
  CHECK((*two)[0].targets == targets({"sm_80", "sm_90"}));
  CHECK((*two)[1].targets == targets({"sm_90a"}));
  CHECK((*two)[0].instance.launch.block == std::vector<uint32_t>{128});
  CHECK((*two)[1].instance.launch.block == std::vector<uint32_t>{384});
  // One signature: `out` is written by one member, so both record the write.
  CHECK((*two)[0].instance.params == (*two)[1].instance.params);
  CHECK((*two)[1].instance.params[0].access == bundle::kPtrWritten);
  // No sm_90a target: the base member alone; sm_90a alone: the fast one.
  auto base = instances("\"sm_80\"", "auto", errors);
  REQUIRE((base && base->size() == 1));
  CHECK((*base)[0].instance.launch.block == std::vector<uint32_t>{128});
  auto fast = instances("\"sm_90a\"", "auto", errors);
  REQUIRE((fast && fast->size() == 1));
  CHECK((*fast)[0].instance.launch.block == std::vector<uint32_t>{384});
  // Members whose parameters differ are one error at the entry.
  CHECK_FALSE(instances("\"sm_80\", \"sm_90a\"", "odd", errors));
  CHECK(errors == std::vector<std::string>{
                      "spec.toml:5:12: error: template 'fill' with path=odd builds kernels of different parameters for "
                      "sm_90a (out: ptr.global, n: u32) and sm_80 (out: ptr.global, count: u32)",
                  });
}
