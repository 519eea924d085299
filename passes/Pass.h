// The pass pipeline: a context every pass receives, the registry of named passes (so that
// `truenoc opt --passes=a,b` can pick them), a runner that times passes and calls the CLI's
// hooks after each one, and the -O0/-O1/-O2 pipelines, each written as plain code.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/Diagnostics.h"
#include "ir/IR.h"
#include "passes/RegisterLiveness.h"

namespace tn::passes {

struct PassOptions {
  bool fpContract = true;  // --fp-contract=fast (default) lets fma-fusion contract mul+add
  bool remarks = false;    // analyses and checkers also report their findings as notes
};

// What a pass works on. Passes read the target from module.target and its register file from
// `registers` (the backend's, e.g. ptx::registerFile()). Analyses they need (CFG, dominators,
// uniformity, liveness) are computed by the pass itself; the one exception is the register
// assignment, which register-liveness, tile-validation and then the emitter all read: it is kept
// here per kernel, and PassRunner::run drops it whenever a pass reports that it changed the module.
struct PassContext {
  ir::Module& module;
  ir::Diagnostics& diags;
  const PassOptions& options;
  const RegisterFile& registers;
  std::vector<std::optional<RegisterAssignment>> assignments{};  // by kernel index; empty = none kept

  // The register assignment of kernel `index` of the module as it is now.
  const RegisterAssignment& registersOf(size_t index);

  void report(ir::Severity sev, ir::SourceLoc loc, std::string message) const {
    diags.report(sev, module.fileName(loc), loc, std::move(message));
  }
};

// A pass returns true when it changed the module. Checkers and analyses never change it.
using PassFn = bool (*)(PassContext&);

// Runs a per-kernel rewrite over every kernel of the module; true when any kernel changed.
template <class F>
bool rewriteEachKernel(PassContext& ctx, F&& rewrite) {
  bool changed = false;
  for (ir::Kernel& k : ctx.module.kernels) changed |= rewrite(k);
  return changed;
}

enum class PassKind : uint8_t { Transform, Checker, Analysis };

struct PassInfo {
  std::string_view name;     // the CLI name, also the file name and the lit-tests folder
  std::string_view summary;  // one line for --help
  PassKind kind;
  PassFn run;
};

// Every registered pass, sorted by name.
const std::vector<PassInfo>& allPasses();
const PassInfo* findPass(std::string_view name);

struct PassStat {
  std::string name;
  unsigned runs = 0;
  unsigned changes = 0;  // runs that changed the module
  double seconds = 0;
};

// Called after each pass run with whether it changed the module; returning false stops the
// pipeline (the CLI uses it for --print-after, --verify-each and printing diagnostics).
using AfterPassHook = std::function<bool(const PassInfo& pass, bool changed)>;

class PassRunner {
 public:
  PassRunner(ir::Module& m, ir::Diagnostics& diags, const PassOptions& options, const RegisterFile& registers,
             AfterPassHook after = {});

  // Runs one registered pass. Returns false when the pipeline must stop: the hook said so or the
  // name is unknown (reported as an error). `changed`, when given, receives whether the module changed.
  bool run(std::string_view name, bool* changed = nullptr);
  bool stopped() const { return stopped_; }
  // Per-pass statistics in order of first run (for --time-passes).
  const std::vector<PassStat>& stats() const { return stats_; }
  // The register assignment of every kernel of the module as it is now: the ones the passes
  // computed, and the others computed here. The runner gives them up.
  std::vector<RegisterAssignment> takeAssignments();

 private:
  PassContext ctx_;
  AfterPassHook after_;
  std::vector<PassStat> stats_;
  bool stopped_ = false;
};

// The pipelines. Each returns false when the runner was stopped; errors reported by checkers
// do not stop them (every checker reports), the caller looks at the diagnostics.
// Each starts with inline (device functions into the kernels; nothing when there are none).
//   -O0: barrier-safety, tile-validation, register-liveness (checks only, the IR is untouched)
//   -O1: clean-up to a fixed point (const-fold, strength-reduce, cse, dce), then the checks
//   -O2: clean-up, fma-fusion, clean-up again, then the checks. Running it twice changes nothing.
bool runO0(PassRunner& r);
bool runO1(PassRunner& r);
bool runO2(PassRunner& r);
// Runs the named passes in order.
bool runPasses(PassRunner& r, const std::vector<std::string>& names);

// The --time-passes table: one line per pass (runs, runs that changed the IR, wall time, share).
std::string formatTimingReport(const std::vector<PassStat>& stats);

}  // namespace tn::passes
