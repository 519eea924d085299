// truenoc opt FILE [-o OUT] [--passes=a,b,c | -O0 | -O1 | -O2] [--print-after=NAME]...
//   [--print-after-all] [--verify-each] [--time-passes] [--fp-contract=fast|off]
//   [--target sm_XY] [--remarks]
// Parses and verifies a .tir module, runs passes, prints the result. IR dumps and the timing
// table go to stderr; each dump is a complete module in the .tir format after a comment line.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <sstream>

#include "compiler/Command.h"
#include "compiler/Compile.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/Pass.h"

namespace tn::cli {

namespace {

struct OptOptions {
  std::string input;
  std::string output = "-";
  std::string passes;
  int level = -1;
  std::vector<std::string> printAfter;
  bool printAfterAll = false;
  bool verifyEach = false;
  bool timePasses = false;
  bool remarks = false;
  std::string fpContract = "fast";
  std::string target;
};

std::string passList() {
  std::string s;
  for (const passes::PassInfo& p : passes::allPasses()) s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}

// One line per registered pass for --help: name, kind, what it does.
std::string passHelp() {
  std::string s = "Comma-separated passes to run in order:";
  for (const passes::PassInfo& p : passes::allPasses()) {
    const char* kind = p.kind == passes::PassKind::Transform ? "transform"
                       : p.kind == passes::PassKind::Checker ? "checker"
                                                             : "analysis";
    s += "\n  " + std::string(p.name) + " (" + kind + "): " + std::string(p.summary);
  }
  return s;
}

std::optional<std::vector<std::string>> splitPasses(const std::string& text) {
  std::vector<std::string> names;
  std::stringstream ss(text);
  for (std::string name; std::getline(ss, name, ',');) {
    if (name.empty()) {
      printErrorf("empty pass name in --passes '%s'", text.c_str());
      return std::nullopt;
    }
    if (!passes::findPass(name)) {
      printErrorf("unknown pass '%s' (known passes: %s)", name.c_str(), passList().c_str());
      return std::nullopt;
    }
    names.push_back(name);
  }
  if (names.empty()) {
    printErrorf("--passes needs at least one pass (known passes: %s)", passList().c_str());
    return std::nullopt;
  }
  return names;
}

int runOpt(const OptOptions& o) {
  std::optional<std::vector<std::string>> names;
  if (!o.passes.empty() && !(names = splitPasses(o.passes))) return kUsageError;
  for (const std::string& p : o.printAfter)
    if (!passes::findPass(p)) {
      printErrorf("--print-after names unknown pass '%s' (known passes: %s)", p.c_str(),
                   passList().c_str());
      return kUsageError;
    }
  std::optional<bundle::Target> target;
  if (!o.target.empty() && !(target = parseTargetOption(o.target, "--target"))) return kUsageError;
  ir::Diagnostics diags;
  auto mod = loadModule(o.input, diags);
  if (!mod) return kInputError;
  if (target) compile::retarget(*mod, *target);
  ir::Diagnostics vd;
  ir::verify(*mod, vd);
  printDiagnostics(vd);
  if (vd.hasErrors()) return kInputError;

  compile::Options co;
  co.fpContract = o.fpContract == "fast";
  co.remarks = o.remarks;
  // No -O and no --passes: parse, verify and print only.
  co.level = o.level == 0 ? compile::Level::O0 : o.level == 1 ? compile::Level::O1 : o.level == 2 ? compile::Level::O2 : compile::Level::None;
  passes::PassOptions options = compile::passOptions(co);
  ir::Diagnostics pd;
  size_t shown = 0;
  auto flush = [&] {
    for (; shown < pd.all().size(); ++shown) printDiagnostic(pd.all()[shown]);
  };
  std::map<std::string, unsigned, std::less<>> runs;
  auto after = [&](const passes::PassInfo& pass, bool changed) {
    flush();
    unsigned n = ++runs[std::string(pass.name)];
    bool dump = o.printAfterAll || std::find(o.printAfter.begin(), o.printAfter.end(), pass.name) != o.printAfter.end();
    if (dump)
      std::fprintf(stderr, "// -----// IR after %s (run %u, %s) //----- //\n%s", std::string(pass.name).c_str(), n,
                   changed ? "changed" : "unchanged", ir::print(*mod).c_str());
    if (o.verifyEach) {
      ir::Diagnostics ev;
      if (!ir::verify(*mod, ev)) {
        printDiagnostics(ev);
        printErrorf("the IR is invalid after pass '%s' (run %u)", std::string(pass.name).c_str(), n);
        return false;
      }
    }
    return true;
  };
  passes::PassRunner runner = compile::makeRunner(*mod, pd, options, after);
  bool ok = names ? passes::runPasses(runner, *names) : compile::runPipeline(runner, co.level);
  flush();
  if (o.timePasses) std::fputs(passes::formatTimingReport(runner.stats()).c_str(), stderr);
  if (!ok || pd.hasErrors()) return kInputError;
  const std::string inputs[] = {o.input};
  return writeOutput(o.output, ir::print(*mod), "-o", inputs) ? kOk : kInputError;
}

}  // namespace

Command optCommand() {
  return {"opt", "Parse, verify, optimize and check a .tir module, print it (reads stdin for '-')",
          [](Options& cli) {
            auto o = std::make_shared<OptOptions>();
            cli.option("FILE", o->input, "Input .tir file, or - for stdin").required();
            cli.option("-o,--output", o->output, "Output file, or - for stdout").showDefault();
            Option passesOpt = cli.option("--passes", o->passes, passHelp());
            cli.option("-O", o->level,
                       "Pipeline: 0 = checks only, 1 = clean-ups + checks, 2 = clean-ups + fma-fusion + checks")
                .range(0, 2)
                .excludes(passesOpt);
            cli.option("--print-after", o->printAfter,
                       "Print the IR to stderr after each run of this pass (repeatable)");
            cli.flag("--print-after-all", o->printAfterAll, "Print the IR to stderr after every pass");
            cli.flag("--verify-each", o->verifyEach, "Verify the IR after every pass; stop at the first failure");
            cli.flag("--time-passes", o->timePasses, "Print a table of pass run times to stderr");
            cli.option("--fp-contract", o->fpContract, "Contract float mul+add into fma: fast (default) or off")
                .oneOf({"fast", "off"})
                .showDefault();
            cli.option("--target", o->target, "Override the module target (sm_75 ... sm_121, sm_90a ... sm_121a)");
            cli.flag("--remarks", o->remarks, "Also report analysis results (pressure, occupancy, uniformity) as notes");
            return std::function<int()>([o] { return runOpt(*o); });
          }};
}

}  // namespace tn::cli
