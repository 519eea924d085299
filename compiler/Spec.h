// Kernel specs: the TOML files `truenoc build` reads (docs/specs.md). Loading checks the whole
// schema and reports every problem as spec.toml:line:col; instantiation turns one [[kernel]]
// entry into an IR module, once for all targets, with its bundle signature and launch rule.
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backends/bundle/LaunchRule.h"
#include "backends/bundle/Target.h"
#include "compiler/Compile.h"
#include "ir/Diagnostics.h"
#include "ir/IR.h"
#include "kernels/Template.h"

namespace tn::spec {

enum class FpContract { Fast, Off };

// A launch-rule expression with where it was written. `exact` when the text is a plain one-line
// string in the spec, so a column inside it maps to spec column loc.col + column.
struct ExprSource {
  bundle::Expr expr;
  ir::SourceLoc loc;
  bool exact = false;
};

struct KernelSpec {
  std::string name;       // the kernel's name in the bundle
  ir::SourceLoc loc;      // the [[kernel]] entry
  ir::SourceLoc nameLoc;  // where the name comes from (name, template or kernel key)
  bool allowSpills = false;
  // ptxas hints that override the kernel's own (docs/specs.md); checked for range when loaded.
  std::optional<unsigned> minnctapersm, maxnreg;
  ir::SourceLoc minnctapersmLoc;
  // elements = { x = "bf16", ... }: element types of pointer parameters that the kernel's IR
  // does not tell (docs/specs.md); checked against the parameters when the kernel is built.
  struct Element {
    std::string param;
    bundle::ParamType::Scalar scalar;
    ir::SourceLoc loc;
  };
  std::vector<Element> elements;
  // extents = { x = "rows * cols", ... } (tir only; templates bring their own): how many elements
  // each pointer's buffer holds for a launch (docs/specs.md), checked when the kernel is built.
  struct Extent {
    std::string param;
    ExprSource extent;
  };
  std::vector<Extent> extents;

  // template = "..."
  const kernels::Template* tmpl = nullptr;
  kernels::Options options;
  ir::SourceLoc templateLoc;

  // tir = "..."
  std::string tirPath;     // as the compiler opens it (relative to the spec's folder)
  std::string tirKernel;   // the kernel to take from the file
  ir::SourceLoc tirLoc;
  std::vector<uint32_t> block;
  ir::SourceLoc blockLoc;
  std::vector<ExprSource> grid;
  ExprSource dynamicShared;
  // tensor_maps = { a_map = { source = "a", element = "bf16", ... } }: the rules that fill the
  // kernel's tmap parameters (docs/specs.md), each with where it was written.
  struct TensorMap {
    bundle::TensorMapRule rule;
    ir::SourceLoc loc;
  };
  std::vector<TensorMap> tensorMaps;
};

struct Spec {
  std::string file;  // display name used in diagnostics
  std::string name;
  std::vector<bundle::Target> targets;  // bundle::defaultTargets() unless the spec names them
  bool ptxFallback = false;
  bool ir = true;  // store each kernel's compiled IR, for the CPU simulator (docs/bundle-format.md)
  FpContract fpContract = FpContract::Fast;
  bool debug = false;  // line info in PTX and cubins (as `build --line-info`)
  // One cubin per target holding every kernel (one driver module to load), or one per kernel
  // (assembled in parallel, loaded one by one): the spec's `modules`, `build --modules`.
  enum class Modules : uint8_t { PerTarget, PerKernel } modules = Modules::PerTarget;
  std::vector<KernelSpec> kernels;
};

// Parses and checks a spec. `file` is the display name for diagnostics, `baseDir` the folder
// that tir paths are relative to ("" = current directory). Reports every error it finds.
std::optional<Spec> parseSpec(std::string_view text, const std::string& file, const std::string& baseDir,
                              ir::Diagnostics& diags, std::span<const kernels::Template> templates = kernels::templates());

// One [[kernel]] entry instantiated: a module holding exactly that kernel (named as in the spec;
// compile::compile retargets a copy per target), its bundle signature and its checked launch rule.
struct Instance {
  ir::Module module;
  std::vector<bundle::Param> params;
  bundle::LaunchRule launch;
};

// Parsed .tir files, shared by every target's instantiation.
class TirCache {
 public:
  const ir::Module* get(const std::string& path, const std::string& specFile, ir::SourceLoc loc, ir::Diagnostics& diags);

 private:
  std::map<std::string, std::optional<ir::Module>> modules_;
};

std::optional<Instance> instantiate(const Spec& spec, const KernelSpec& k, TirCache& tirs, ir::Diagnostics& diags);
// A template with `options` instantiated as a [[kernel]] entry of its own would be (named after
// the template): list-templates' signatures, and the tests that go over every template.
std::optional<Instance> instantiateTemplate(const kernels::Template& t, const kernels::Options& options,
                                            ir::Diagnostics& diags);

// An instance and the spec targets whose code it is.
struct TargetedInstance {
  Instance instance;
  std::vector<bundle::Target> targets;
};
// What `truenoc build` instantiates for a [[kernel]] entry: one instance for every target, or,
// for a template whose options build per target (Template::alternatives, mainloop = "auto"), one
// per alternative that some target takes, the first being the lowest target's. Also checks that
// every target runs its instance (templateFitsTargets) and that the instances' caller-visible
// parameters are alike, merging their pointer use. Errors go to diags.
std::optional<std::vector<TargetedInstance>> instantiateForTargets(const Spec& spec, const KernelSpec& k, TirCache& tirs,
                                                                   ir::Diagnostics& diags);

// "target" or "kernel" (the spec's `modules`, `build --modules`); nullopt for anything else.
std::optional<Spec::Modules> parseModules(std::string_view text);

// How `truenoc build` compiles a spec's kernels (and the library tests, exactly so): the -O2
// pipeline with the spec's fp_contract.
compile::Options compileOptions(const Spec& spec);
// "template 'rmsnorm' with dtype=bf16": a template entry and its options that differ from the defaults.
std::string describeInstance(const KernelSpec& k);
// After errors inside a template's sources (its builder calls), a note at the spec entry that
// names the instance: "spec.toml:L:C: note: in template 'rmsnorm' with dtype=bf16, <what>".
void noteTemplateEntry(const Spec& spec, const KernelSpec& k, const std::string& what, ir::Diagnostics& diags);
// Whether a template instance's ops exist on every target of the spec; if not, one error at the
// entry's template key names the options that differ from the defaults, the SM the kernel needs
// and the targets below it ("template 'rmsnorm' with dtype=bf16 needs sm_80 (target sm_75)").
bool templateFitsTargets(const Spec& spec, const KernelSpec& k, const ir::Module& built, ir::Diagnostics& diags);

// The bundle signature of a kernel: its parameters' names, types and alignments.
std::vector<bundle::Param> signatureOf(const ir::Kernel& k);
// A parameter's IR type as a bundle records it.
bundle::ParamType paramTypeOf(ir::Type t);

}  // namespace tn::spec
