// The kernel library's contract (docs/kernels.md) checked over every built-in template and every
// choice of its string and boolean options (every combination, or for a template with more than
// kMaxCombinations of them each value of each option with the others at their defaults): problem
// sizes reach the kernel only at run time (the launch rule reads them from parameters), and two
// instantiations with the same options compile to byte-identical PTX whatever they are named and
// whatever sizes they will be launched with. A combination the template refuses (an error at the
// spec entry, such as gemm's s8 input with an f32 output) is skipped.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "compiler/Compile.h"
#include "compiler/Spec.h"
#include "ir/Verifier.h"
#include "kernels/Library.h"
#include "kernels/Template.h"

namespace {

using namespace tn;

std::string diagnosticsText(const ir::Diagnostics& diags) {
  std::string out;
  for (const ir::Diagnostic& d : diags.all()) out += ir::formatDiagnostic(d) + "\n";
  return out;
}

constexpr size_t kMaxCombinations = 128;

// The choices of an option as TOML values (none for integers: they keep their default).
std::vector<std::string> choicesOf(const kernels::OptionSpec& o) {
  std::vector<std::string> values;
  if (o.type == kernels::OptionType::String)
    for (const std::string& c : o.choices) values.push_back("\"" + c + "\"");
  if (o.type == kernels::OptionType::Bool) values = {"true", "false"};
  return values;
}

// Every combination of the template's string choices and booleans, or, past kMaxCombinations,
// each choice of each option alone.
std::vector<std::string> optionTables(const kernels::Template& t) {
  std::vector<std::string> tables{""};
  size_t combinations = 1;
  for (const kernels::OptionSpec& o : t.options) combinations *= std::max<size_t>(choicesOf(o).size(), 1);
  if (combinations > kMaxCombinations) {
    tables.clear();
    for (const kernels::OptionSpec& o : t.options)
      for (const std::string& v : choicesOf(o)) tables.push_back(o.name + " = " + v);
    return tables;
  }
  for (const kernels::OptionSpec& o : t.options) {
    std::vector<std::string> values = choicesOf(o);
    if (values.empty()) continue;
    std::vector<std::string> next;
    for (const std::string& prefix : tables)
      for (const std::string& v : values) next.push_back(prefix + (prefix.empty() ? "" : ", ") + o.name + " = " + v);
    tables = std::move(next);
  }
  return tables;
}

// Kernel `name` of the spec instantiated once: whether the template refuses its options (its only
// errors are at the entry), else the oldest target it runs on (sm_89 for fp8 tensor cores, say).
struct Probe {
  bool refused = false;
  unsigned sm = 0;
};
Probe probe(const spec::Spec& s, const std::string& name) {
  for (const spec::KernelSpec& k : s.kernels) {
    if (k.name != name) continue;
    ir::Diagnostics diags;
    spec::TirCache tirs;
    if (std::optional<spec::Instance> inst = spec::instantiate(s, k, tirs, diags))
      return {false, ir::requiredTarget(inst->module).sm};
    for (const ir::Diagnostic& d : diags.all())
      if (d.file != "contract.toml" || d.message.find("template '" + k.tmpl->name + "': ") != 0) return {};
    return {diags.hasErrors(), 0};
  }
  return {};
}

// PTX of kernel `name` of the spec for `target`, with the kernel's name replaced by KERNEL.
std::string ptxOf(const spec::Spec& s, const std::string& name, bundle::Target target, bool* gridFollowsSizes) {
  const spec::KernelSpec* ks = nullptr;
  for (const spec::KernelSpec& k : s.kernels)
    if (k.name == name) ks = &k;
  REQUIRE(ks);
  ir::Diagnostics diags;
  spec::TirCache tirs;
  std::optional<spec::Instance> inst = spec::instantiate(s, *ks, tirs, diags);
  INFO(diagnosticsText(diags));
  REQUIRE(inst.has_value());
  // The grid reads the sizes, or is one block (moe_align: one block loops over the whole problem).
  bool oneBlock = true;
  *gridFollowsSizes = false;
  for (const bundle::Expr& g : inst->launch.grid) {
    *gridFollowsSizes |= !g.refs().empty();
    oneBlock = oneBlock && g.constantValue() == uint64_t{1};
  }
  *gridFollowsSizes |= oneBlock;
  std::optional<std::string> ptx = compile::compile(inst->module, target, spec::compileOptions(s), diags).ptx;
  REQUIRE(ptx.has_value());
  REQUIRE_FALSE(diags.hasErrors());
  std::string text = *ptx;
  for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 6)) text.replace(at, name.size(), "KERNEL");
  return text;
}

}  // namespace

TEST_CASE("library contract: sizes are run-time parameters and instantiations are byte-identical") {
  size_t checked = 0, skipped = 0;
  for (const kernels::Template& t : kernels::templates()) {
    for (const std::string& options : optionTables(t)) {
      CAPTURE(t.name);
      CAPTURE(options);
      std::string text = "[bundle]\nname = \"contract\"\ntargets = [\"sm_80\", \"sm_90\"]\n";
      for (const char* name : {"kfirst", "ksecond"})
        text += "[[kernel]]\ntemplate = \"" + t.name + "\"\nname = \"" + name + "\"\noptions = { " + options + " }\n";
      ir::Diagnostics diags;
      std::optional<spec::Spec> s = spec::parseSpec(text, "contract.toml", "", diags);
      INFO(diagnosticsText(diags));
      REQUIRE(s.has_value());
      const Probe first = probe(*s, "kfirst");
      if (first.refused) {
        CHECK(probe(*s, "ksecond").refused);
        ++skipped;
        continue;
      }
      // An sm_90a member (mainloop = "wgmma") is built for sm_90a alone, one that needs a newer
      // target than sm_80 (fp8 tensor cores: sm_89) for that target and sm_90.
      const bool sm90a = options.find("mainloop = \"wgmma\"") != std::string::npos;
      const unsigned oldest = std::max(80u, first.sm);
      const std::vector<bundle::Target> targets =
          sm90a ? std::vector<bundle::Target>{{90, true}} : std::vector<bundle::Target>{{oldest, false}, {90, false}};
      for (bundle::Target target : targets) {
        bool firstReads = false, secondReads = false;
        std::string a = ptxOf(*s, "kfirst", target, &firstReads);
        std::string b = ptxOf(*s, "ksecond", target, &secondReads);
        CHECK(a == b);
        // Instantiated again under the same name: the same PTX (checked on the first target alone).
        if (target == targets.front()) CHECK(a == ptxOf(*s, "kfirst", target, &firstReads));
        // The grid follows from size parameters (or is one block): nothing about the problem is
        // baked in.
        CHECK(firstReads);
        ++checked;
      }
    }
  }
  MESSAGE(checked << " (template, options, target) instantiations compared, " << skipped
                  << " option combinations refused by their template");
  CHECK(checked >= 2 * kernels::templates().size());
}

// lib::blockCombine reports misuse (here: no reqntid, a 64-bit value, too small a scratch) as an
// error at the template author's call, not inside the library.
TEST_CASE("library contract: blockCombine reports misuse at its caller") {
  for (int misuse = 0; misuse < 3; ++misuse) {
    CAPTURE(misuse);
    ir::Module m = kernels::lib::newModule();
    ir::KernelBuilder kb(m, "bad");
    if (misuse != 0) kb.reqntid(256);
    ir::Value tid = kb.tid(ir::Mod::X, "tid");
    ir::Value v = misuse == 1 ? kb.cvt(tid, ir::Type::u64()) : tid;
    ir::SharedArray scratch = kb.shared("scratch", ir::Type::u32(), misuse == 2 ? 4 : 8);
    const unsigned line = __LINE__ + 1;
    kernels::lib::blockCombine(kb, {v}, tid, scratch, [&](const auto& a, const auto& b) { return std::vector{kb.max(a[0], b[0])}; });
    REQUIRE(kb.diagnostics().all().size() == 1);
    const ir::Diagnostic& d = kb.diagnostics().all().front();
    CHECK(d.loc.line == line);
    CHECK(d.file.find("library_contract_test.cpp") != std::string::npos);
    CHECK(d.message.find("blockCombine needs a 1-D reqntid") == 0);
  }
}
