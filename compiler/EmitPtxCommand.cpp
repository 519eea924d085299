// truenoc emit-ptx FILE --target sm_XY [--kernel NAME] [--no-reg-reuse] [-o OUT]
#include <algorithm>

#include "backends/ptx/Ptx.h"
#include "compiler/Command.h"
#include "ir/Verifier.h"

namespace tn::cli {

// Retargets a parsed module: the PTX ISA version becomes at least what the target needs.
bool retarget(ir::Module& m, const std::string& target) {
  auto t = ir::parseTarget(target);
  if (!t) {
    std::fprintf(stderr, "error: invalid target '%s' (expected sm_XY, e.g. sm_90)\n", target.c_str());
    return false;
  }
  m.sm = t->first;
  m.archSpecific = t->second;
  m.ptx = std::max(m.ptx, ir::minPtxForTarget(m.sm, m.archSpecific));
  return true;
}

Command emitPtxCommand() {
  return {"emit-ptx", "Verify a .tir module and emit PTX for one target", [](CLI::App& app) {
            struct Opts {
              std::string input, output = "-", target, kernel;
              bool noRegReuse = false;
            };
            auto o = std::make_shared<Opts>();
            app.add_option("FILE", o->input, "Input .tir file, or - for stdin")->required();
            app.add_option("--target", o->target, "Target architecture (sm_75 ... sm_121, sm_90a)")->required();
            app.add_option("--kernel", o->kernel, "Emit only this kernel");
            app.add_flag("--no-reg-reuse", o->noRegReuse,
                         "Give every value registers of its own instead of sharing names between values "
                         "with disjoint live ranges");
            app.add_option("-o,--output", o->output, "Output file, or - for stdout")->capture_default_str();
            return std::function<int()>([o] {
              ir::Diagnostics diags;
              auto mod = loadModule(o->input, diags);
              if (!mod) return int(kInputError);
              if (!retarget(*mod, o->target)) return int(kUsageError);
              if (!o->kernel.empty() && !mod->findKernel(o->kernel)) {
                std::fprintf(stderr, "error: no kernel named '%s'\n", o->kernel.c_str());
                return int(kInputError);
              }
              ir::Diagnostics vd;
              ir::verify(*mod, vd);
              printDiagnostics(vd);
              if (vd.hasErrors()) return int(kInputError);
              ir::Diagnostics ed;
              ptx::EmitOptions eo;
              eo.kernel = o->kernel;
              eo.reuseRegisters = !o->noRegReuse;
              auto ptx = ptx::emit(*mod, eo, ed);
              printDiagnostics(ed);
              if (!ptx) return int(kInputError);
              return writeOutput(o->output, *ptx) ? int(kOk) : int(kInputError);
            });
          }};
}

}  // namespace tn::cli
