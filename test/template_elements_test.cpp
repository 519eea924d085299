// Every pointer a built-in template takes has an element type in the bundle (so that `embed`
// types it and the Python package checks tensors against it) without a spec's `elements`: from
// the kernel's typed accesses, or declared by the template (Template::elements) where the kernel
// moves raw bits. And an extent (Template::extents: the elements its tensor holds), but for the
// listed ones whose size no parameter says. Swept over each option's values, alone and beside
// the boolean options. (That extents are not larger than what the kernels' tests allocate: the
// gpu-sim suite runs every launch with the runtime's extent checks on.)
#include <doctest/doctest.h>

#include <set>

#include "compiler/ParamUse.h"
#include "compiler/Spec.h"
#include "ir/Type.h"

namespace {

using namespace tn;

// Option sets of `t` to build: the defaults; each string option's every choice, and each
// integer option at 16 and at its maximum where the schema takes them; each of those alone, with
// each boolean option turned on and with all of them on; and the defaults with each pair of
// boolean options on.
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
  std::vector<std::string> flags;
  for (const kernels::OptionSpec& o : t.options)
    if (o.type == kernels::OptionType::Bool) flags.push_back(o.name);
  auto with = [](kernels::Options o, std::initializer_list<std::string> on) {
    for (const std::string& f : on) o.set(f, true);
    return o;
  };
  std::vector<kernels::Options> out;
  for (const kernels::Options& b : base) {
    out.push_back(b);
    for (const std::string& f : flags) out.push_back(with(b, {f}));
    kernels::Options all = b;
    for (const std::string& f : flags) all.set(f, true);
    out.push_back(all);
  }
  for (size_t i = 0; i < flags.size(); ++i)  // pairs of flags over the defaults
    for (size_t j = i + 1; j < flags.size(); ++j) out.push_back(with(t.defaults(), {flags[i], flags[j]}));
  return out;
}

std::string describe(const kernels::Template& t, const kernels::Options& o) {
  std::string s = t.name;
  for (const auto& [name, value] : o.all()) s += " " + name + "=" + kernels::optionValueText(value);
  return s;
}

}  // namespace

TEST_CASE("templates: every pointer parameter of every built-in template has an element type and an extent") {
  // Scratch space the caller sizes in bytes and never reads: no element type to check.
  const std::set<std::string> scratch = {"workspace"};
  // The pointers without an extent: caches written or read at positions no parameter bounds, the
  // rows of varlen or paged attention on the mma.sync members (which take no row counts), and a
  // bias broadcast by its strides.
  const std::set<std::string> unsized = {
      "attention_decode k_cache", "attention_decode v_cache", "attention_prefill bias", "attention_prefill k",
      "attention_prefill lse",    "attention_prefill o",      "attention_prefill q",    "attention_prefill v",
      "kv_scatter k_cache",       "kv_scatter v_cache"};
  std::set<std::string> without, escaping;
  for (const kernels::Template& t : kernels::templates()) {
    size_t built = 0;
    for (const kernels::Options& options : sweep(t)) {
      ir::Diagnostics d;
      auto inst = spec::instantiateTemplate(t, options, d);
      if (!inst) continue;  // options that do not go together
      ++built;
      const std::string what = describe(t, options);
      for (const bundle::Param& p : inst->params) {
        if (p.type.isPointer() && (p.access & bundle::kPtrEscapes)) escaping.insert(t.name + " " + p.name);
        if (p.type.isPointer() && !scratch.count(p.name) && !(p.access & bundle::kPtrEscapes)) {
          CHECK_MESSAGE(p.element.has_value(), what << ": pointer '" << p.name << "' has no element type");
          if (!p.extent) without.insert(t.name + " " + p.name);
        }
      }

      // What the template declares agrees with what the kernel's typed accesses say, but for ggml
      // blocks (u8), whose int8 quants and f16 scales the kernel reads as such.
      if (!t.elements) continue;
      const ir::Kernel& kernel = inst->module.kernels.front();
      std::vector<bundle::Param> own = spec::signatureOf(kernel);
      spec::analyzeParamUse(kernel, own);
      for (const auto& [name, declared] : t.elements(options))
        for (const bundle::Param& p : own)
          if (p.name == name && p.element && declared.scalar != bundle::ParamType::Scalar::U8)
            CHECK_MESSAGE(*p.element == declared.scalar, what << ": '" << p.name << "' is declared "
                                                              << bundle::elementName(declared.scalar) << " but accessed as "
                                                              << bundle::elementName(*p.element));
    }
    CHECK_MESSAGE(built > 0, t.name << ": no option set of the sweep builds");
  }
  for (const std::string& w : without) CHECK_MESSAGE(unsized.count(w), w << " has no extent");
  // No pointer of a built-in template escapes (a value derived from it stored: then nothing is
  // known of it, not its element type nor its extent, and embed does not make it const).
  for (const std::string& e : escaping) CHECK_MESSAGE(false, e << " escapes");
  for (const std::string& u : unsized) CHECK_MESSAGE(without.count(u), u << " has an extent now: take it off the list");
}
