// truenoc build SPEC -o OUT.tnb [-j N] [--targets sm_80,sm_90] [--ptxas PATH] [--ptx-only] [--no-ir]
//   [--line-info] [--ptxas-timeout SECONDS] [--depfile FILE]
// spec -> one instance per kernel -> per target: compile::compile (verifier, -O2, PTX) -> ptxas
// (parallel) -> bundle (cubins, the ptxas version, optional PTX, the compiled IR unless turned
// off) and depfile, written all or nothing (compiler/Output.h).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <mutex>
#include <thread>

#include "backends/bundle/Bundle.h"
#include "backends/ptx/Ptxas.h"
#include "compiler/Command.h"
#include "compiler/Compile.h"
#include "compiler/Spec.h"
#include "ir/Printer.h"


namespace tn::cli {

namespace {

struct BuildOpts {
  std::string spec, output, ptxas, depfile;
  std::optional<std::string> targets;  // given, even if empty
  unsigned jobs = 0;
  unsigned ptxasTimeout = ptxas::kDefaultTimeoutSeconds;
  bool ptxOnly = false;
  bool noIr = false;
  bool lineInfo = false;  // also on with the spec's debug = true
};


// A (kernel, target) pair on its way into the bundle.
struct Unit {
  size_t kernel;  // index into spec.kernels
  bundle::Target target;
  std::string ptx;
  std::string ir;  // the module as compiled, printed; empty when the bundle carries no IR
  ptxas::Output out;
  bool ran = false;  // false when the build stopped before this unit's ptxas
};

std::optional<std::vector<bundle::Target>> parseTargetList(const std::string& list) {
  std::vector<bundle::Target> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::optional<bundle::Target> t = parseTargetOption(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start), "--targets");
    if (!t) return std::nullopt;
    if (std::find(out.begin(), out.end(), *t) == out.end()) out.push_back(*t);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string describe(const bundle::Resources& r) {
  return std::to_string(r.registers) + " registers, " + std::to_string(r.spillStores) + " bytes spill stores, " +
         std::to_string(r.spillLoads) + " bytes spill loads";
}

// A path in a Makefile-syntax depfile (as CMake's DEPFILE and Ninja read them).
std::string depPath(const std::string& path) {
  std::string out;
  for (char c : std::filesystem::absolute(path).lexically_normal().string()) {
    if (c == ' ' || c == '#') out += '\\';
    if (c == '$') out += '$';
    out += c;
  }
  return out;
}

// The files a build reads: the spec, then each .tir file once.
std::vector<std::string> inputsOf(const BuildOpts& o, const spec::Spec& spec) {
  std::vector<std::string> files = {o.spec};
  for (const spec::KernelSpec& k : spec.kernels)
    if (!k.tirPath.empty() && std::find(files.begin(), files.end(), k.tirPath) == files.end()) files.push_back(k.tirPath);
  return files;
}

// "OUT: SPEC TIR..." so that build systems rerun the build when the spec or a .tir file changes.
std::string depfileText(const BuildOpts& o, const std::vector<std::string>& inputs) {
  std::string text = depPath(o.output) + ":";
  if (o.spec != "-") text += " " + depPath(o.spec);
  for (size_t i = 1; i < inputs.size(); ++i) text += " \\\n  " + depPath(inputs[i]);
  return text + "\n";
}

// The bundle and, with --depfile, the depfile; their bytes are filled in at the end.
std::vector<io::OutputFile> outputsOf(const BuildOpts& o) {
  std::vector<io::OutputFile> out = {{o.output, "-o", {}}};
  if (!o.depfile.empty()) out.push_back({o.depfile, "--depfile", {}});
  return out;
}

// ptxas per (kernel, target), -j at a time, in one temporary folder. false when one failed (with
// a message) or a signal arrived (without one: the caller re-raises it).
bool assembleAll(const BuildOpts& o, const std::string& ptxasPath, const spec::Spec& spec, std::vector<Unit>& units) {
  ptxas::TempDir tmp;
  if (!tmp.ok()) {
    printErrorf("%s", tmp.error().c_str());
    return false;
  }
  unsigned jobs = o.jobs ? o.jobs : std::max(1u, std::thread::hardware_concurrency());
  jobs = std::min<unsigned>(jobs, static_cast<unsigned>(units.size()));
  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  std::mutex mu;  // progress lines and `thrown`
  std::exception_ptr thrown;
  bool tty = ::isatty(STDERR_FILENO) == 1;
  auto worker = [&] {
    // An exception must not end a thread (std::terminate): the first is rethrown after the join.
    try {
      for (size_t i = next++; i < units.size(); i = next++) {
        Unit& u = units[i];
        u.out = ptxas::assemble(ptxasPath, tmp.path(), {spec.kernels[u.kernel].name, u.target, u.ptx, o.lineInfo || spec.debug},
                               o.ptxasTimeout);
        u.ran = true;
        // A ptxas that hangs once likely hangs on every unit: start no more.
        if (u.out.timedOut) next = units.size();
        size_t n = ++done;
        if (tty && !u.out.interrupted) {
          std::lock_guard<std::mutex> lock(mu);
          std::fprintf(stderr, "[%zu/%zu] ptxas %s %s: %s\n", n, units.size(), spec.kernels[u.kernel].name.c_str(), u.target.name().c_str(),
                       u.out.ok ? (std::to_string(u.out.resources.registers) + " registers").c_str() : "failed");
        }
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!thrown) thrown = std::current_exception();
      next = units.size();
    }
  };
  std::vector<std::thread> pool;
  for (unsigned j = 1; j < jobs; ++j) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  if (thrown) std::rethrow_exception(thrown);
  if (ptxas::interruptedBy()) return false;

  bool failed = false;
  for (const Unit& u : units) {
    const spec::KernelSpec& k = spec.kernels[u.kernel];
    if (!u.ran) {
      failed = true;
      continue;
    }
    if (!u.out.ok) {
      printPtxasFailure(k.name, u.target, u.out);
      failed = true;
      continue;
    }
    const bundle::Resources& r = u.out.resources;
    if (r.spillStores == 0 && r.spillLoads == 0) continue;
    ir::Diagnostic d{k.allowSpills ? ir::Severity::Warning : ir::Severity::Error, spec.file, k.loc,
                     "kernel '" + k.name + "' spills registers on " + u.target.name() + " (" + describe(r) + ")" +
                         (k.allowSpills ? "; allowed by allow_spills" : "; set allow_spills = true in its [[kernel]] entry to accept")};
    std::fprintf(stderr, "%s\n", ir::formatDiagnostic(d).c_str());
    failed = failed || !k.allowSpills;
  }
  return !failed;
}

int runBuild(const BuildOpts& o) {
  if (o.output == "-" && !o.depfile.empty()) {
    printErrorf("--depfile needs the bundle in a file, which its rule names; -o is '-' (standard output)");
    return kUsageError;
  }
  std::optional<std::vector<bundle::Target>> targets;
  if (o.targets && !(targets = parseTargetList(*o.targets))) return kUsageError;
  auto text = readInput(o.spec);
  if (!text) return kInputError;
  std::string display = o.spec == "-" ? "<stdin>" : o.spec;
  std::string baseDir = o.spec == "-" ? "" : std::filesystem::path(o.spec).parent_path().string();
  ir::Diagnostics sd;
  auto spec = spec::parseSpec(*text, display, baseDir, sd);
  printDiagnostics(sd);
  if (!spec) return kInputError;
  const std::vector<std::string> inputs = inputsOf(o, *spec);
  std::vector<io::OutputFile> outputs = outputsOf(o);
  if (!checkOutputs(outputs, inputs)) return kInputError;
  if (targets) spec->targets = *targets;

  std::string ptxasPath;
  if (!o.ptxOnly) {
    std::string why;
    auto found = ptxas::find(o.ptxas, why);
    if (!found) {
      printErrorf("%s; pass --ptxas PATH, set CUDA_HOME, or build a PTX-only bundle with --ptx-only", why.c_str());
      return kInputError;
    }
    ptxasPath = *found;
  }

  // Each kernel is instantiated once (signature, launch rule, IR), then compiled per target in
  // spec order, kernel by kernel (deterministic diagnostics order). A kernel that fails does not
  // stop the others: every kernel's errors are reported, then nothing is written.
  std::vector<Unit> units;
  std::vector<spec::Instance> instances(spec->kernels.size());
  spec::TirCache tirs;
  compile::Options options = spec::compileOptions(*spec);
  options.lineInfo = options.lineInfo || o.lineInfo;
  bool withIr = spec->ir && !o.noIr;
  bool failed = false;
  for (size_t ki = 0; ki < spec->kernels.size(); ++ki) {
    const spec::KernelSpec& k = spec->kernels[ki];
    ir::Diagnostics d;
    std::optional<spec::Instance> inst = spec::instantiate(*spec, k, tirs, d);
    printDiagnostics(d);
    ir::Diagnostics fit;
    if (!inst || (k.tmpl && !spec::templateFitsTargets(*spec, k, inst->module, fit))) {
      printDiagnostics(fit);
      failed = true;
      continue;
    }
    for (const bundle::Target& target : spec->targets) {
      ir::Diagnostics td;
      ir::Module m = inst->module;
      compile::Output out = compile::compile(m, target, options, td);
      if (k.tmpl && td.hasErrors()) spec::noteTemplateEntry(*spec, k, "built for " + target.name(), td);
      printDiagnostics(td);
      if (!out.ptx || td.hasErrors()) {
        if (!td.hasErrors())
          printErrorf("kernel '%s' failed to build for %s", k.name.c_str(), target.name().c_str());
        failed = true;
        break;  // the other targets would mostly repeat the same errors
      }
      units.push_back({ki, target, std::move(*out.ptx), withIr ? ir::print(m) : std::string(), {}});
    }
    instances[ki] = std::move(*inst);
  }
  if (failed) return kInputError;

  std::string ptxasVersion;
  if (!o.ptxOnly) {
    if (!assembleAll(o, ptxasPath, *spec, units)) return kInputError;
    std::string why;
    std::optional<std::string> version = ptxas::version(ptxasPath, why, o.ptxasTimeout);
    if (!version) {
      printErrorf("cannot tell which ptxas version assembled the cubins: %s", why.c_str());
      return kInputError;
    }
    ptxasVersion = *version;
  }

  bundle::BundleInput in;
  in.name = spec->name;
  in.targets = spec->targets;
  in.ptxFallback = spec->ptxFallback || o.ptxOnly;
  in.ir = withIr;
  in.ptxasVersion = ptxasVersion;
  in.producer = std::string("truenoc ") + TRUENOC_VERSION;
  for (size_t ki = 0; ki < spec->kernels.size(); ++ki)
    in.kernels.push_back({spec->kernels[ki].name, instances[ki].params, instances[ki].launch, {}});
  for (Unit& u : units) {
    bundle::KernelInput& k = in.kernels[u.kernel];
    if (!o.ptxOnly) k.payloads.push_back({u.target, bundle::PayloadKind::Cubin, u.out.resources, std::move(u.out.cubin)});
    if (in.ptxFallback) k.payloads.push_back({u.target, bundle::PayloadKind::Ptx, {}, std::move(u.ptx)});
    if (in.ir) k.payloads.push_back({u.target, bundle::PayloadKind::Ir, {}, std::move(u.ir)});
  }
  auto bytes = bundle::write(in);
  if (!bytes) {
    printErrorf("cannot write the bundle: %s", bytes.error().message.c_str());
    return kInputError;
  }
  outputs[0].bytes = *bytes;
  const std::string depfile = o.depfile.empty() ? std::string() : depfileText(o, inputs);
  if (!o.depfile.empty()) outputs[1].bytes = depfile;
  return writeOutputs(outputs, inputs) ? kOk : kInputError;
}

}  // namespace

Command buildCommand() {
  return {"build", "Compile a kernel spec (TOML) into a .tnb bundle of cubins", [](CLI::App& app) {
            auto o = std::make_shared<BuildOpts>();
            app.add_option("SPEC", o->spec, "Kernel spec (.toml), or - for stdin")->required();
            app.add_option("-o,--output", o->output, "Output bundle (.tnb), or - for stdout")->required();
            app.add_option("-j,--jobs", o->jobs, "Parallel ptxas jobs (default: one per CPU)")->check(CLI::Range(1u, 1024u));
            app.add_option("--targets", o->targets, "Comma-separated targets, overriding the spec's (e.g. sm_80,sm_90)");
            addPtxasOptions(app, o->ptxas, o->ptxasTimeout);
            app.add_flag("--ptx-only", o->ptxOnly, "Skip ptxas: bundle PTX only (loaded by driver JIT)");
            app.add_flag("--no-ir", o->noIr, "Leave out each kernel's compiled IR (which the CPU simulator runs; spec key 'ir')");
            app.add_flag("--line-info", o->lineInfo,
                         "Map PTX and cubins to source lines (.tir lines, template builder calls) for "
                         "profilers; on by default with the spec's 'debug = true'");
            app.add_option("--depfile", o->depfile, "Also write a Makefile-syntax depfile naming the spec and its .tir files");
            return std::function<int()>([o] { return runBuild(*o); });
          }};
}

}  // namespace tn::cli
