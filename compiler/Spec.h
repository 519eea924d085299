// Kernel specs: the TOML files `truenoc build` reads (docs/specs.md). Loading checks the whole
// schema and reports every problem as spec.toml:line:col; instantiation turns one [[kernel]]
// entry into an IR module for one target, with its bundle signature and launch rule.
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backends/bundle/LaunchRule.h"
#include "ir/Diagnostics.h"
#include "ir/IR.h"
#include "kernels/Template.h"

namespace tn::spec {

enum class FpContract { Fast, Off };

// The targets a spec gets when it names none.
const std::vector<std::string>& defaultTargets();
// Targets ptxas 13 assembles for; anything else is an unknown target.
bool isKnownTarget(std::string_view target);

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
};

struct Spec {
  std::string file;  // display name used in diagnostics
  std::string name;
  std::vector<std::string> targets;
  ir::SourceLoc targetsLoc;
  bool ptxFallback = false;
  FpContract fpContract = FpContract::Fast;
  std::vector<KernelSpec> kernels;
};

// Parses and checks a spec. `file` is the display name for diagnostics, `baseDir` the folder
// that tir paths are relative to ("" = current directory). Reports every error it finds.
std::optional<Spec> parseSpec(std::string_view text, const std::string& file, const std::string& baseDir,
                              ir::Diagnostics& diags, std::span<const kernels::Template> templates = kernels::templates());

// One [[kernel]] entry built for one target: a module holding exactly that kernel (named as in
// the spec, retargeted), its bundle signature and its checked launch rule.
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

std::optional<Instance> instantiate(const Spec& spec, const KernelSpec& k, const std::string& target, TirCache& tirs,
                                    ir::Diagnostics& diags);

// The one place an instance is optimized, for `truenoc build` and the library tests alike:
// verify it for its target, run the -O2 pipeline (clean-up, fma-fusion under the spec's
// fp_contract, the checkers) and verify the result. Returns false when an error was reported.
bool optimize(ir::Module& m, const Spec& spec, ir::Diagnostics& diags);

// The bundle signature of a kernel: its parameters' names, IR type names and alignments.
std::vector<bundle::Param> signatureOf(const ir::Kernel& k);

}  // namespace tn::spec
