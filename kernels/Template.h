// Kernel templates: named, documented kernel generators that a spec's [[kernel]] entry
// instantiates with typed options. A template declares its option schema (with defaults and
// docs), builds one kernel with the IR builder and states its launch rule over the kernel's
// parameters. A template does not see the target: the compiler instantiates it once and
// retargets the module for each target (or once per alternative option set, below). Adding a template is a function returning a Template
// in its kernels/*.cpp file plus one line in the list in kernels/Templates.cpp; a project adds its
// own through a generator (addTemplate, docs/generators.md).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "backends/bundle/LaunchRule.h"
#include "ir/Diagnostics.h"
#include "ir/IR.h"

namespace tn::kernels {

enum class OptionType : uint8_t { Int, Bool, String };
using OptionValue = std::variant<int64_t, bool, std::string>;

std::string_view optionTypeName(OptionType t);
std::string optionValueText(const OptionValue& v);  // TOML spelling: 256, true, "f32"

struct OptionSpec {
  std::string name;
  OptionType type = OptionType::Int;
  OptionValue defaultValue;
  std::string doc;
  // Int: inclusive range and a required divisor; String: the accepted values (empty = any).
  int64_t min = std::numeric_limits<int64_t>::min();
  int64_t max = std::numeric_limits<int64_t>::max();
  int64_t multipleOf = 1;
  std::vector<std::string> choices;
};

// Checks v against the schema entry; returns a message for the spec diagnostic when it fails.
std::optional<std::string> checkOption(const OptionSpec& spec, const OptionValue& v);

// The option values of one instantiation, defaults filled in.
class Options {
 public:
  void set(const std::string& name, OptionValue v) { values_[name] = std::move(v); }
  int64_t integer(const std::string& name) const { return std::get<int64_t>(values_.at(name)); }
  bool flag(const std::string& name) const { return std::get<bool>(values_.at(name)); }
  const std::string& text(const std::string& name) const { return std::get<std::string>(values_.at(name)); }
  const std::map<std::string, OptionValue>& all() const { return values_; }

 private:
  std::map<std::string, OptionValue> values_;
};

using bundle::Expr;
using bundle::LaunchRule;

struct Template {
  std::string name;
  std::string summary;
  std::vector<OptionSpec> options;
  // Builds a module holding exactly one kernel; problems go to diags.
  std::function<std::optional<ir::Module>(const Options&, ir::Diagnostics&)> build;
  // The launch rule over the kernel's parameters (Expr::param("n"), ceilDiv, min, ...); the
  // compiler checks it against the kernel's signature.
  std::function<LaunchRule(const Options&)> launch;
  // Optional, for options that build different code for different targets (gemm's and
  // attention_prefill's mainloop = "auto"): the complete option sets to build, most specific
  // first. Each target of a spec takes the first whose kernel it can run (an arch-specific kernel
  // only its own target), and one bundle kernel holds them all (bundle variants,
  // docs/bundle-format.md): their parameters must be alike but for tmap ones. Empty (or no
  // function): the options as given, for every target.
  std::function<std::vector<Options>(const Options&)> alternatives = {};
  // Optional: the element types of the kernel's pointer parameters, for those its typed accesses
  // cannot tell (u32 ids and counts, elements copied bit for bit, bf16 read as 16-bit words) or
  // would tell wrongly (ggml blocks, u8, whose int8 quants it loads as s8). They take precedence
  // over the typed accesses; the bundle records them as it does a spec's `elements` (typed
  // launchers, the Python package's checks), and a spec's `elements` must agree. Names the options
  // leave out of the signature are ignored. Every built-in template declares all of its tensors
  // (test/template_elements_test.cpp).
  // An element type: an IR scalar, or what the IR has no type for (fp8 codes, which kernels move
  // as bytes: bundle::ParamType::Scalar::E4M3 or E5M2).
  struct Element {
    bundle::ParamType::Scalar scalar;
    Element(ir::Scalar s) : scalar(static_cast<bundle::ParamType::Scalar>(static_cast<unsigned>(s) + 1)) {}
    Element(bundle::ParamType::Scalar s) : scalar(s) {}
  };
  using ElementTypes = std::vector<std::pair<std::string, Element>>;
  std::function<ElementTypes(const Options&)> elements = {};
  // Optional: how many elements (of the declared or accessed element type; ggml blocks: bytes)
  // each pointer's buffer must hold for a launch, over the kernel's integer parameters: the
  // tensor's shape as the template documents it, no less than a launch of those sizes touches
  // (the gpu-sim suite confines every launch to it) and no more than its caller must allocate.
  // The bundle records them (Param::extent); the Python package and the generated launchers check
  // tensors of known size against them, the runtime, when asked, the allocations behind pointers
  // (docs/runtime.md). Names the options leave out of the signature are ignored.
  using Extents = std::vector<std::pair<std::string, Expr>>;
  std::function<Extents(const Options&)> extents = {};

  Options defaults() const;
};

// The registered templates, sorted by name: the built-in ones and those added by addTemplate.
std::span<const Template> templates();
// Registers a template beside the built-in ones (a generator's own, docs/generators.md). Call it
// before anything reads templates(): it invalidates the spans returned so far. Returns why a
// template is refused (a name that is not an identifier or is taken, no build or launch function).
std::optional<std::string> addTemplate(Template t);
const Template* findTemplate(std::span<const Template> all, std::string_view name);
// The names of `all` close to `name` (for "did you mean"): those containing it (3 characters or
// more) and those within a third of its length of edits of it, in the order of `all`.
std::vector<std::string> similarTemplates(std::span<const Template> all, std::string_view name);

}  // namespace tn::kernels
