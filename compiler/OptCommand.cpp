// truenoc opt FILE [-o OUT]: parse, verify and print a .tir module.
#include "compiler/Command.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

namespace tn::cli {

Command optCommand() {
  return {"opt", "Parse, verify and print a .tir module (reads stdin for '-')", [](CLI::App& app) {
            auto input = std::make_shared<std::string>();
            auto output = std::make_shared<std::string>("-");
            app.add_option("FILE", *input, "Input .tir file, or - for stdin")->required();
            app.add_option("-o,--output", *output, "Output file, or - for stdout")->capture_default_str();
            return std::function<int()>([input, output] {
              ir::Diagnostics diags;
              auto mod = loadModule(*input, diags);
              if (!mod) return int(kInputError);
              ir::Diagnostics vd;
              ir::verify(*mod, vd);
              printDiagnostics(vd);
              if (vd.hasErrors()) return int(kInputError);
              return writeOutput(*output, ir::print(*mod)) ? int(kOk) : int(kInputError);
            });
          }};
}

}  // namespace tn::cli
