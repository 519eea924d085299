// The compile spine: the one path from a verified-or-not module to PTX for one target, shared by
// `truenoc build` (per kernel and target), `emit-ptx`, `explain`, `opt` (which stops before PTX)
// and the library tests:
//   retarget -> verify -> pipeline (-O0/-O1/-O2, or none) -> verify -> emit PTX.
// The pipeline's register assignment (register-liveness, tile-validation) is computed once per
// kernel and handed to the emitter.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "backends/bundle/Target.h"
#include "ir/Diagnostics.h"
#include "ir/IR.h"
#include "passes/Pass.h"

namespace tn::compile {

enum class Level : uint8_t { None, O0, O1, O2 };  // None: verify and emit only (emit-ptx)

struct Options {
  Level level = Level::O2;
  bool fpContract = true;       // --fp-contract=fast; the spec's fp_contract
  bool remarks = false;         // checkers and analyses also report their findings as notes
  bool reuseRegisters = true;   // false: every value gets registers of its own (--no-reg-reuse)
  std::string kernel;           // emit only this kernel ("" = all)
  bool lineInfo = false;        // .file/.loc directives (--line-info; the spec's debug = true)
};

// Sets m's target and raises its PTX ISA version to at least the first that supports it.
void retarget(ir::Module& m, bundle::Target target);

// The pass options of o, and a runner for m over PTX's register file.
passes::PassOptions passOptions(const Options& o);
passes::PassRunner makeRunner(ir::Module& m, ir::Diagnostics& diags, const passes::PassOptions& options,
                              passes::AfterPassHook after = {});
// Runs the pipeline of `level` on the runner's module; false when the runner was stopped.
bool runPipeline(passes::PassRunner& r, Level level);

struct Output {
  std::optional<std::string> ptx;                      // absent when the module does not verify or cannot be emitted
  std::vector<passes::RegisterAssignment> registers;   // per kernel of the compiled module
};

// The spine for one target: retargets m, verifies it, runs the pipeline, verifies the result and
// emits PTX. m is left as compiled. Errors and checker findings go to diags; a checker's error
// does not stop the PTX (explain reports it as a finding), so a caller that builds for real
// looks at diags.hasErrors() too.
Output compile(ir::Module& m, bundle::Target target, const Options& o, ir::Diagnostics& diags);

}  // namespace tn::compile
