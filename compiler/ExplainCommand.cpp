// truenoc explain FILE [--target sm_XY] [--kernel NAME] [--dyn-shared BYTES] [--ptxas PATH]
//   [--ptxas-timeout SECONDS] [--json]
// A resource and hazard report per kernel, on the IR that `truenoc build` compiles (after -O2):
// predicted registers (register-liveness), shared memory, block size, an occupancy estimate from
// passes/TargetLimits, the findings of the checkers (barrier-safety, tile-validation, ...), and,
// when ptxas is found, what `ptxas -v` reports for the same PTX. Findings are part of the report,
// not failures: the exit status is 1 only for input errors (unreadable, invalid IR, no such kernel,
// PTX that cannot be emitted or that ptxas rejects) and 2 for command-line mistakes.
#include <algorithm>
#include <cstdio>
#include <memory>

#include "backends/ptx/Ptxas.h"
#include "backends/ptx/Registers.h"
#include "compiler/Command.h"
#include "compiler/Compile.h"
#include "ir/Verifier.h"
#include "passes/AsyncGroups.h"
#include "passes/TargetLimits.h"

namespace tn::cli {

namespace {

struct ExplainOptions {
  std::string input, target, kernel, ptxas;
  unsigned ptxasTimeout = ptxas::kDefaultTimeoutSeconds;
  int64_t dynShared = -1;  // bytes of dynamic shared memory per block; -1 = not given
  bool json = false;
};

using passes::Occupancy;
constexpr unsigned kUnlimited = Occupancy::kUnlimited;

struct KernelReport {
  std::string name;
  unsigned threads = 0;   // 0: unknown
  std::string blockAttr;  // "reqntid" (exact) or "maxntid" (an upper bound)
  ir::Dim3 block;
  passes::RegisterAssignment regs;
  std::optional<unsigned> minnctapersm, maxnreg, registerLimit;  // the kernel's hints and the limit they set
  unsigned staticShared = 0;
  bool hasDynamic = false;
  std::optional<Occupancy> occupancy, ptxasOccupancy;
  std::vector<ir::Diagnostic> findings;
  bool ptxasRan = false;  // false: ptxas was not found, or not run (hasErrors)
  bool hasErrors = false;  // a finding is an error: ptxas is not run
  bundle::Resources resources;
  passes::AsyncGroups async;  // the cp.async pipeline depth
};

std::string dims(const ir::Dim3& d) {
  return std::to_string(d.x) + ", " + std::to_string(d.y) + ", " + std::to_string(d.z);
}

std::string severityName(ir::Severity s) {
  return s == ir::Severity::Error ? "error" : s == ir::Severity::Warning ? "warning" : "note";
}

std::string jsonString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

unsigned dynamicBytes(const ExplainOptions& o) { return o.dynShared > 0 ? static_cast<unsigned>(o.dynShared) : 0; }

std::string sharedText(const KernelReport& r, const ExplainOptions& o) {
  std::string s = std::to_string(r.staticShared) + " bytes static";
  if (!r.hasDynamic) return s + ", no dynamic";
  if (o.dynShared >= 0) return s + " + " + std::to_string(o.dynShared) + " bytes dynamic (--dyn-shared)";
  return s + " + dynamic set at launch (not counted; give --dyn-shared BYTES)";
}

std::string count(unsigned n) { return n == kUnlimited ? "unlimited" : std::to_string(n); }

std::string occupancyText(const Occupancy& c, unsigned threads) {
  return std::to_string(c.blocks) + " blocks of " + std::to_string(threads) + " threads per SM, " +
         std::to_string(c.warps) + " of " + std::to_string(c.maxWarps) + " warps (" + std::to_string(c.percent) +
         "%), limited by " + c.limitedBy + "\n      blocks allowed by registers " + std::to_string(c.byRegisters) +
         " (" + std::to_string(c.registers) + " per thread, allocated as " + std::to_string((c.registers + 7) / 8 * 8) +
         "), shared memory " + count(c.byShared) + " (" + std::to_string(c.sharedPerBlock) +
         " bytes per block with the reservation), warps " + std::to_string(c.byWarps) + ", blocks " +
         std::to_string(c.byBlocks) + "\n";
}

std::string textReport(const std::vector<KernelReport>& reports, const std::string& target, const ExplainOptions& o) {
  std::string out;
  for (const KernelReport& r : reports) {
    if (!out.empty()) out += "\n";
    out += "kernel @" + r.name + " on " + target + " (IR after -O2)\n";
    if (!r.threads)
      out += "  block size: unknown (no reqntid or maxntid)\n";
    else
      out += "  block size: " + std::string(r.blockAttr == "maxntid" ? "at most " : "") + std::to_string(r.threads) +
             " threads (" + r.blockAttr + " " + dims(r.block) + ")\n";
    out += "  registers: " + std::to_string(r.regs.predicted) +
           " per thread predicted (32-bit registers live at the peak, in IR order)\n";
    if (r.registerLimit) {
      std::string hints;
      if (r.minnctapersm)
        hints = "minnctapersm " + std::to_string(*r.minnctapersm) + " x " + std::to_string(r.threads) + " threads";
      if (r.maxnreg) hints += (hints.empty() ? "" : ", ") + std::string("maxnreg ") + std::to_string(*r.maxnreg);
      out += "  register limit: " + std::to_string(*r.registerLimit) + " per thread (" + hints + ")\n";
    }
    out += "  peak live values by class (constants included):";
    for (size_t c = 0; c < ptx::kRegClasses; ++c)
      out += (c ? ", " : " ") + std::string(ptx::regClassName(ptx::RegClass(c))) + " " +
             std::to_string(r.regs.peak[c]);
    out += "\n  shared memory: " + sharedText(r, o) + "\n";
    out += "  occupancy: " + (r.occupancy ? occupancyText(*r.occupancy, r.threads) : "unknown without a block size\n");
    if (r.async.used)
      out += "  cp.async pipeline: " +
             (r.async.maxInFlight ? "at most " + std::to_string(*r.async.maxInFlight) +
                                        " groups in flight per thread (committed, not yet waited for)\n"
                                  : std::string("unbounded: a loop commits groups that no wait_group bounds\n"));
    if (!r.ptxasRan) {
      out += r.hasErrors ? "  ptxas: not run (a finding is an error)\n" : "  ptxas: not found\n";
    } else {
      const bundle::Resources& res = r.resources;
      out += "  ptxas -v: " + std::to_string(res.registers) + " registers, " + std::to_string(res.spillStores) +
             " bytes spill stores, " + std::to_string(res.spillLoads) + " bytes spill loads, " +
             std::to_string(res.stackBytes) + " bytes stack frame, " + std::to_string(res.sharedBytes) +
             " bytes smem\n";
      out += "  occupancy with ptxas's registers: " +
             (r.ptxasOccupancy ? occupancyText(*r.ptxasOccupancy, r.threads) : "unknown without a block size\n");
    }
    out += "  findings: " + std::string(r.findings.empty() ? "none" : std::to_string(r.findings.size())) + "\n";
    for (const ir::Diagnostic& d : r.findings) out += "    " + ir::formatDiagnostic(d) + "\n";
  }
  return out;
}

std::string jsonOccupancy(const std::optional<Occupancy>& c) {
  if (!c) return "null";
  return "{\"blocks_per_sm\": " + std::to_string(c->blocks) + ", \"warps_per_sm\": " + std::to_string(c->warps) +
         ", \"max_warps_per_sm\": " + std::to_string(c->maxWarps) + ", \"percent\": " + std::to_string(c->percent) +
         ", \"limited_by\": " + jsonString(c->limitedBy) +
         ", \"registers_per_thread\": " + std::to_string(c->registers) +
         ", \"shared_per_block\": " + std::to_string(c->sharedPerBlock) +
         ", \"blocks_by\": {\"registers\": " + std::to_string(c->byRegisters) +
         ", \"shared_memory\": " + (c->byShared == kUnlimited ? std::string("null") : std::to_string(c->byShared)) +
         ", \"warps\": " + std::to_string(c->byWarps) + ", \"blocks\": " + std::to_string(c->byBlocks) + "}}";
}

std::string jsonReport(const std::vector<KernelReport>& reports, const std::string& file, const std::string& target,
                       const ExplainOptions& o) {
  std::string out = "{\n  \"file\": " + jsonString(file) + ",\n  \"target\": " + jsonString(target) +
                    ",\n  \"pipeline\": \"-O2\",\n  \"kernels\": [";
  for (size_t i = 0; i < reports.size(); ++i) {
    const KernelReport& r = reports[i];
    out += i ? ",\n" : "\n";
    out += "    {\n      \"name\": " + jsonString(r.name) + ",\n";
    out += "      \"block\": " +
           (r.threads ? "{\"threads\": " + std::to_string(r.threads) + ", \"from\": " + jsonString(r.blockAttr) +
                            ", \"dims\": [" + dims(r.block) + "]}"
                      : std::string("null")) +
           ",\n";
    out += "      \"registers\": {\"predicted\": " + std::to_string(r.regs.predicted) + ", \"peak\": {";
    for (size_t c = 0; c < ptx::kRegClasses; ++c)
      out += (c ? ", " : "") + jsonString(ptx::regClassName(ptx::RegClass(c))) + ": " +
             std::to_string(r.regs.peak[c]);
    out += "}, \"limit\": " + (r.registerLimit ? std::to_string(*r.registerLimit) : std::string("null")) +
           ", \"minnctapersm\": " + (r.minnctapersm ? std::to_string(*r.minnctapersm) : std::string("null")) +
           ", \"maxnreg\": " + (r.maxnreg ? std::to_string(*r.maxnreg) : std::string("null")) + "},\n";
    std::string dynamic = !r.hasDynamic ? "0" : o.dynShared >= 0 ? std::to_string(o.dynShared) : "null";
    out += "      \"shared\": {\"static\": " + std::to_string(r.staticShared) + ", \"dynamic\": " + dynamic + "},\n";
    out += "      \"occupancy\": " + jsonOccupancy(r.occupancy) + ",\n";
    out += "      \"cp_async\": " +
           (!r.async.used ? std::string("null")
                          : "{\"max_groups_in_flight\": " +
                                (r.async.maxInFlight ? std::to_string(*r.async.maxInFlight) : std::string("null")) + "}") +
           ",\n";
    if (!r.ptxasRan) {
      out += r.hasErrors ? "      \"ptxas\": {\"status\": \"not run\"},\n" : "      \"ptxas\": {\"status\": \"not found\"},\n";
    } else {
      const bundle::Resources& res = r.resources;
      out += "      \"ptxas\": {\"status\": \"ok\", \"registers\": " + std::to_string(res.registers) +
             ", \"spill_stores\": " + std::to_string(res.spillStores) +
             ", \"spill_loads\": " + std::to_string(res.spillLoads) + ", \"stack\": " + std::to_string(res.stackBytes) +
             ", \"shared\": " + std::to_string(res.sharedBytes) +
             ", \"occupancy\": " + jsonOccupancy(r.ptxasOccupancy) + "},\n";
    }
    out += "      \"findings\": [";
    for (size_t j = 0; j < r.findings.size(); ++j) {
      const ir::Diagnostic& d = r.findings[j];
      out += (j ? ",\n        " : "\n        ") + std::string("{\"severity\": ") +
             jsonString(severityName(d.severity)) + ", \"file\": " + jsonString(d.file) +
             ", \"line\": " + std::to_string(d.loc.line) + ", \"column\": " + std::to_string(d.loc.col) +
             ", \"message\": " + jsonString(d.message) + "}";
    }
    out += r.findings.empty() ? "]\n" : "\n      ]\n";
    out += "    }";
  }
  return out + "\n  ]\n}\n";
}

int runExplain(const ExplainOptions& o) {
  std::optional<bundle::Target> chosen;
  if (!o.target.empty() && !(chosen = parseTargetOption(o.target, "--target"))) return kUsageError;
  ir::Diagnostics diags;
  auto mod = loadModule(o.input, diags);
  if (!mod) return kInputError;
  if (chosen) compile::retarget(*mod, *chosen);
  if (!o.kernel.empty() && !mod->findKernel(o.kernel)) {
    printErrorf("no kernel named '%s'", o.kernel.c_str());
    return kInputError;
  }
  ir::Diagnostics vd;
  ir::verify(*mod, vd);
  printDiagnostics(vd);
  if (vd.hasErrors()) return kInputError;

  std::string why;
  // --ptxas, else the same search as `truenoc build` (ptxas::searchFolders).
  std::optional<std::string> ptxasPath = ptxas::find(o.ptxas, why);
  if (!ptxasPath && !o.ptxas.empty()) {
    printErrorf("%s", why.c_str());
    return kUsageError;
  }
  std::unique_ptr<ptxas::TempDir> tmp;
  if (ptxasPath) {
    tmp = std::make_unique<ptxas::TempDir>();
    if (!tmp->ok()) {
      printErrorf("%s", tmp->error().c_str());
      return kInputError;
    }
  }

  std::string target = mod->target.name();
  const passes::TargetLimits& limits = passes::limitsFor(mod->target.sm);
  std::vector<KernelReport> reports;
  bool errorFound = false;  // the report is written in full, then the exit status is 1
  for (const ir::Kernel& original : mod->kernels) {
    if (!o.kernel.empty() && original.name != o.kernel) continue;
    // The kernel alone, so that the checkers' findings are its own.
    ir::Module one = *mod;
    one.kernels.assign(1, original);
    // A checker's error is a finding here, not a failure; emission problems are input errors.
    ir::Diagnostics found;
    compile::Output compiled = compile::compile(one, one.target, compile::Options{}, found);
    const ir::Kernel& k = one.kernels[0];

    KernelReport r;
    r.name = k.name;
    r.findings = found.all();
    if (!compiled.registers.empty()) r.regs = std::move(compiled.registers[0]);
    r.staticShared = passes::staticSharedBytes(k);
    r.async = passes::asyncGroups(k);
    r.hasDynamic = std::any_of(k.shared.begin(), k.shared.end(), [](const ir::SharedDecl& s) { return s.dynamic; });
    if (k.reqntid || k.maxntid) {
      r.blockAttr = k.reqntid ? "reqntid" : "maxntid";
      r.block = k.reqntid ? *k.reqntid : *k.maxntid;
      r.threads = r.block.total();
    }
    r.minnctapersm = k.minnctapersm;
    r.maxnreg = k.maxnreg;
    r.registerLimit = passes::registerLimit(limits, k);
    unsigned dynamic = r.hasDynamic ? dynamicBytes(o) : 0;
    unsigned registers = r.registerLimit ? std::min(r.regs.predicted, *r.registerLimit) : r.regs.predicted;
    if (r.threads) r.occupancy = passes::estimateOccupancy(limits, r.threads, registers, r.staticShared + dynamic);

    // Emitted whether or not ptxas runs: a kernel without PTX is an input error either way.
    if (!compiled.ptx) {
      printDiagnostics(found);
      return kInputError;
    }
    // A kernel a checker refuses is one build refuses: its report has no ptxas column.
    r.hasErrors = found.hasErrors();
    errorFound = errorFound || r.hasErrors;
    if (ptxasPath && !r.hasErrors) {
      ptxas::Output out = ptxas::assemble(*ptxasPath, tmp->path(), {k.name, one.target, *compiled.ptx}, o.ptxasTimeout);
      if (!out.ok) {
        printPtxasFailure(k.name, one.target, out);
        return kInputError;
      }
      r.ptxasRan = true;
      r.resources = out.resources[0];
      if (r.threads)
        r.ptxasOccupancy = passes::estimateOccupancy(limits, r.threads, r.resources.registers, r.resources.sharedBytes + dynamic);
    }
    reports.push_back(std::move(r));
  }
  tmp.reset();  // ptxas is done: signals take their default action again while the report is written
  std::string file = o.input == "-" ? "<stdin>" : o.input;
  std::string report = o.json ? jsonReport(reports, file, target, o) : textReport(reports, target, o);
  return writeOutput("-", report) && !errorFound ? kOk : kInputError;
}

}  // namespace

Command explainCommand() {
  return {"explain", "Report registers, shared memory, occupancy and hazards per kernel, beside ptxas -v",
          [](Options& cli) {
            auto o = std::make_shared<ExplainOptions>();
            cli.option("FILE", o->input, "Input .tir file, or - for stdin").required();
            cli.option("--target", o->target,
                       "Target architecture (sm_75 ... sm_121, sm_90a ... sm_121a); default: the module's");
            cli.option("--kernel", o->kernel, "Explain only this kernel");
            cli.option("--dyn-shared", o->dynShared,
                       "Bytes of dynamic shared memory per block, counted for kernels that declare dynamic arrays")
                .range(0, UINT32_MAX);
            addPtxasOptions(cli, o->ptxas, o->ptxasTimeout);
            cli.flag("--json", o->json, "Print JSON instead of text");
            return std::function<int()>([o] { return runExplain(*o); });
          }};
}

}  // namespace tn::cli
