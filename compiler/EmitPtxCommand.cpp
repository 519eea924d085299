// truenoc emit-ptx FILE --target sm_XY [--kernel NAME] [--no-reg-reuse] [--no-checks] [--line-info] [-o OUT]
// The module as written (no optimization), verified, checked as `build` checks it (the -O0
// pipeline: barrier-safety, tile-validation with the target's limits, register-liveness) and
// emitted. A checker's error refuses the PTX; --no-checks skips the checkers
// (compile::Level::None).
#include <memory>

#include "compiler/Command.h"
#include "compiler/Compile.h"

namespace tn::cli {

Command emitPtxCommand() {
  return {"emit-ptx", "Verify a .tir module and emit PTX for one target", [](Options& cli) {
            struct Opts {
              std::string input, output = "-", target, kernel;
              bool noRegReuse = false, noChecks = false, lineInfo = false;
            };
            auto o = std::make_shared<Opts>();
            cli.option("FILE", o->input, "Input .tir file, or - for stdin").required();
            cli.option("--target", o->target, "Target architecture (sm_75 ... sm_121, sm_90a ... sm_121a)").required();
            cli.option("--kernel", o->kernel, "Emit only this kernel");
            cli.flag("--no-reg-reuse", o->noRegReuse,
                     "Give every value registers of its own instead of sharing names between values "
                     "with disjoint live ranges");
            cli.flag("--no-checks", o->noChecks,
                     "Skip the checks build runs (barrier safety, shared memory and threads against the "
                     "target's limits, register pressure) and emit what verifies");
            cli.flag("--line-info", o->lineInfo,
                     "Map each PTX instruction to its .tir line with .file/.loc directives (for profilers)");
            cli.option("-o,--output", o->output, "Output file, or - for stdout").showDefault();
            return std::function<int()>([o] {
              std::optional<bundle::Target> target = parseTargetOption(o->target, "--target");
              if (!target) return int(kUsageError);
              ir::Diagnostics diags;
              auto mod = loadModule(o->input, diags);
              if (!mod) return int(kInputError);
              if (!o->kernel.empty()) {
                const ir::Kernel* chosen = mod->findKernel(o->kernel);
                if (!chosen) {
                  printError("no kernel named '" + o->kernel + "'");
                  return int(kInputError);
                }
                // The kernel alone, so that only its own findings count.
                ir::Kernel one = *chosen;
                mod->kernels.assign(1, std::move(one));
              }
              compile::Options co;
              co.level = o->noChecks ? compile::Level::None : compile::Level::O0;
              co.reuseRegisters = !o->noRegReuse;
              co.lineInfo = o->lineInfo;
              ir::Diagnostics cd;
              compile::Output out = compile::compile(*mod, *target, co, cd);
              printDiagnostics(cd);
              if (!out.ptx || cd.hasErrors()) return int(kInputError);
              const std::string inputs[] = {o->input};
              return writeOutput(o->output, *out.ptx, "-o", inputs) ? int(kOk) : int(kInputError);
            });
          }};
}

}  // namespace tn::cli
