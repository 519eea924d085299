// truenoc emit-ptx FILE --target sm_XY [--kernel NAME] [--no-reg-reuse] [-o OUT]
// The module as written, verified and emitted with no pipeline (compile::Level::None).
#include "compiler/Command.h"
#include "compiler/Compile.h"

namespace tn::cli {

Command emitPtxCommand() {
  return {"emit-ptx", "Verify a .tir module and emit PTX for one target", [](CLI::App& app) {
            struct Opts {
              std::string input, output = "-", target, kernel;
              bool noRegReuse = false;
            };
            auto o = std::make_shared<Opts>();
            app.add_option("FILE", o->input, "Input .tir file, or - for stdin")->required();
            app.add_option("--target", o->target, "Target architecture (sm_75 ... sm_121, sm_90a ... sm_121a)")->required();
            app.add_option("--kernel", o->kernel, "Emit only this kernel");
            app.add_flag("--no-reg-reuse", o->noRegReuse,
                         "Give every value registers of its own instead of sharing names between values "
                         "with disjoint live ranges");
            app.add_option("-o,--output", o->output, "Output file, or - for stdout")->capture_default_str();
            return std::function<int()>([o] {
              std::optional<bundle::Target> target = parseTargetOption(o->target, "--target");
              if (!target) return int(kUsageError);
              ir::Diagnostics diags;
              auto mod = loadModule(o->input, diags);
              if (!mod) return int(kInputError);
              if (!o->kernel.empty() && !mod->findKernel(o->kernel)) {
                std::fprintf(stderr, "error: no kernel named '%s'\n", o->kernel.c_str());
                return int(kInputError);
              }
              compile::Options co;
              co.level = compile::Level::None;
              co.kernel = o->kernel;
              co.reuseRegisters = !o->noRegReuse;
              ir::Diagnostics cd;
              compile::Output out = compile::compile(*mod, *target, co, cd);
              printDiagnostics(cd);
              if (!out.ptx) return int(kInputError);
              const std::string inputs[] = {o->input};
              return writeOutput(o->output, *out.ptx, "-o", inputs) ? int(kOk) : int(kInputError);
            });
          }};
}

}  // namespace tn::cli
