// Every pointer a built-in template takes has an element type in the bundle (so that `embed`
// types it and the Python package checks tensors against it) without a spec's `elements`: from
// the kernel's typed accesses, or declared by the template (Template::elements) where the kernel
// moves raw bits. Swept over each option's values, alone and beside each boolean option.
#include <doctest/doctest.h>

#include <set>

#include "compiler/ParamUse.h"
#include "compiler/Spec.h"
#include "ir/Type.h"

namespace {

using namespace tn;

// Option sets of `t` to build: the defaults; each string option's every choice, and each
// integer option at 16 and at its maximum where the schema takes them; each of those with each
// boolean option turned on.
std::vector<kernels::Options> sweep(const kernels::Template& t) {
  std::vector<kernels::Options> base{t.defaults()};
  for (const kernels::OptionSpec& o : t.options) {
    std::vector<kernels::OptionValue> values;
    if (o.type == kernels::OptionType::String)
      for (const std::string& c : o.choices) values.emplace_back(c);
    if (o.type == kernels::OptionType::Int)
      for (int64_t v : {int64_t{16}, o.max}) values.emplace_back(v);
    for (const kernels::OptionValue& v : values) {
      if (v == o.defaultValue || kernels::checkOption(o, v)) continue;
      kernels::Options opts = t.defaults();
      opts.set(o.name, v);
      base.push_back(opts);
    }
  }
  std::vector<kernels::Options> out;
  for (const kernels::Options& b : base) {
    out.push_back(b);
    for (const kernels::OptionSpec& o : t.options)
      if (o.type == kernels::OptionType::Bool && !b.flag(o.name)) {
        kernels::Options opts = b;
        opts.set(o.name, true);
        out.push_back(opts);
      }
  }
  return out;
}

std::string describe(const kernels::Template& t, const kernels::Options& o) {
  std::string s = t.name;
  for (const auto& [name, value] : o.all()) s += " " + name + "=" + kernels::optionValueText(value);
  return s;
}

}  // namespace

TEST_CASE("templates: every pointer parameter of every built-in template has an element type") {
  // Scratch space the caller sizes in bytes and never reads: no element type to check.
  const std::set<std::string> scratch = {"workspace"};
  for (const kernels::Template& t : kernels::templates()) {
    size_t built = 0;
    for (const kernels::Options& options : sweep(t)) {
      spec::Spec s;
      s.file = "spec.toml";
      s.name = "b";
      spec::KernelSpec k;
      k.name = t.name;
      k.tmpl = &t;
      k.options = options;
      spec::TirCache tirs;
      ir::Diagnostics d;
      auto inst = spec::instantiate(s, k, tirs, d);
      if (!inst) continue;  // options that do not go together
      ++built;
      const std::string what = describe(t, options);
      for (const bundle::Param& p : inst->params)
        if (p.type.isPointer() && !scratch.count(p.name) && !(p.access & bundle::kPtrEscapes))
          CHECK_MESSAGE(p.element.has_value(), what << ": pointer '" << p.name << "' has no element type");

      // What the template declares agrees with what the kernel's typed accesses say, but for ggml
      // blocks (u8), whose int8 quants and f16 scales the kernel reads as such.
      if (!t.elements) continue;
      const ir::Kernel& kernel = inst->module.kernels.front();
      std::vector<bundle::Param> own = spec::signatureOf(kernel);
      spec::analyzeParamUse(kernel, own);
      for (const std::pair<std::string, ir::Scalar>& declared : t.elements(options))
        for (const bundle::Param& p : own)
          if (p.name == declared.first && p.element && declared.second != ir::Scalar::U8)
            CHECK_MESSAGE(static_cast<unsigned>(*p.element) == static_cast<unsigned>(declared.second) + 1,
                          what << ": '" << p.name << "' is declared " << ir::scalarName(declared.second)
                               << " but accessed as " << bundle::ParamType{*p.element}.name());
    }
    CHECK_MESSAGE(built > 0, t.name << ": no option set of the sweep builds");
  }
}
