// The kernel library's contract (docs/kernels.md) checked over every built-in template and every
// choice of its string and boolean options: problem sizes reach the kernel only at run time (the
// launch rule reads them from parameters), and two instantiations with the same options compile
// to byte-identical PTX whatever they are named and whatever sizes they will be launched with.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "backends/Ptx.h"
#include "compiler/Spec.h"
#include "kernels/Template.h"

namespace {

using namespace tn;

std::string diagnosticsText(const ir::Diagnostics& diags) {
  std::string out;
  for (const ir::Diagnostic& d : diags.all()) out += ir::formatDiagnostic(d) + "\n";
  return out;
}

// Every combination of the template's string choices and booleans; integers keep their default.
std::vector<std::string> optionTables(const kernels::Template& t) {
  std::vector<std::string> tables{""};
  for (const kernels::OptionSpec& o : t.options) {
    std::vector<std::string> values;
    if (o.type == kernels::OptionType::String)
      for (const std::string& c : o.choices) values.push_back("\"" + c + "\"");
    if (o.type == kernels::OptionType::Bool) values = {"true", "false"};
    if (values.empty()) continue;
    std::vector<std::string> next;
    for (const std::string& prefix : tables)
      for (const std::string& v : values) next.push_back(prefix + (prefix.empty() ? "" : ", ") + o.name + " = " + v);
    tables = std::move(next);
  }
  return tables;
}

// PTX of kernel `name` of the spec for `target`, with the kernel's name replaced by KERNEL.
std::string ptxOf(const spec::Spec& s, const std::string& name, const std::string& target, bool* launchReadsParams) {
  const spec::KernelSpec* ks = nullptr;
  for (const spec::KernelSpec& k : s.kernels)
    if (k.name == name) ks = &k;
  REQUIRE(ks);
  ir::Diagnostics diags;
  spec::TirCache tirs;
  std::optional<spec::Instance> inst = spec::instantiate(s, *ks, target, tirs, diags);
  INFO(diagnosticsText(diags));
  REQUIRE(inst.has_value());
  REQUIRE(spec::optimize(inst->module, s, diags));
  *launchReadsParams = false;
  for (const bundle::Expr& g : inst->launch.grid) *launchReadsParams |= !g.refs().empty();
  std::optional<std::string> ptx = ptx::emit(inst->module, {}, diags);
  REQUIRE(ptx.has_value());
  std::string text = *ptx;
  for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 6)) text.replace(at, name.size(), "KERNEL");
  return text;
}

}  // namespace

TEST_CASE("library contract: sizes are run-time parameters and instantiations are byte-identical") {
  size_t checked = 0;
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
      for (const char* target : {"sm_80", "sm_90"}) {
        bool firstReads = false, secondReads = false;
        std::string first = ptxOf(*s, "kfirst", target, &firstReads);
        std::string second = ptxOf(*s, "ksecond", target, &secondReads);
        CHECK(first == second);
        CHECK(first == ptxOf(*s, "kfirst", target, &firstReads));
        // The grid follows from size parameters: nothing about the problem is baked in.
        CHECK(firstReads);
        ++checked;
      }
    }
  }
  MESSAGE(checked << " (template, options, target) instantiations compared");
  CHECK(checked >= 2 * kernels::templates().size());
}
