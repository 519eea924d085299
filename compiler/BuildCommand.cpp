// truenoc build SPEC -o OUT.tnb [-j N] [--targets sm_80,sm_90] [--ptxas PATH] [--ptx-only] [--no-ir]
//   [--line-info] [--ptxas-timeout SECONDS] [--modules target|kernel] [--depfile FILE]
// spec -> one instance per kernel -> per target: compile::compile (verifier, -O2, PTX) -> ptxas
// once per module of a target's kernels (up to 1 MiB of PTX; or once per kernel), in parallel ->
// bundle (cubins, the ptxas version, optional PTX, the compiled IR unless turned off; compressed in
// parallel) and depfile, written all or nothing (compiler/Output.h).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

#include "backends/bundle/Bundle.h"
#include "backends/ptx/Ptx.h"
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
  std::optional<std::string> modules;  // "target" or "kernel", overriding the spec's
};


// A (kernel, target) pair on its way into the bundle.
struct Unit {
  size_t kernel;  // index into spec.kernels
  bundle::Target target;
  std::string ptx;  // this kernel's own PTX
  std::string ir;   // the module as compiled, printed; empty when the bundle carries no IR
  // What the PTX was emitted from and its register assignment, kept only when the kernels of a
  // target are joined into one module (modules = "target" with cubins).
  ir::Module compiled;
  std::vector<passes::RegisterAssignment> registers;
  bundle::Resources resources;  // ptxas -v
  size_t job = 0;  // index into the jobs: the one whose cubin holds this kernel
};

// One ptxas run: one kernel's PTX, or a module, the PTX of several kernels of one target together.
struct Job {
  std::string name;  // the kernel's, or BUNDLE.N for a module (also ptxas's file names)
  bundle::Target target;
  std::vector<size_t> units;  // indices into the units, in spec order
  std::string ptx;
  ptxas::Output out;
  bool ran = false;  // false when the build stopped before this job's ptxas
  bool isModule() const { return units.size() > 1; }
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

// -j: how many kernels compile, ptxas processes run or compression threads run at once (default:
// one per CPU).
unsigned parallelism(const BuildOpts& o) { return o.jobs ? o.jobs : std::max(1u, std::thread::hardware_concurrency()); }

// Calls work(i) for i = 0 .. n - 1, up to `threads` at once (this thread among them, and fewer
// where no more threads can be started), each i once, in no set order; work returns false to
// start no further i. An exception ends the loop and is rethrown here after every thread ended.
template <class Work>
void parallelFor(size_t n, unsigned threads, Work work) {
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::exception_ptr thrown;
  auto worker = [&] {
    try {
      for (size_t i = next++; i < n; i = next++)
        if (!work(i)) next = n;
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!thrown) thrown = std::current_exception();
      next = n;
    }
  };
  std::vector<std::thread> pool;
  try {
    for (size_t t = 1; t < std::min<size_t>(threads, n); ++t) pool.emplace_back(worker);
  } catch (const std::system_error&) {
    // The threads started so far and this one do the work.
  }
  worker();
  for (std::thread& t : pool) t.join();
  if (thrown) std::rethrow_exception(thrown);
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

// The PTX of one module holding every unit of `members` (of one target), each kernel emitted as it
// was alone; nullopt (with the emitter's errors printed) when it cannot be emitted.
std::optional<std::string> modulePtx(std::vector<Unit>& units, const std::vector<size_t>& members, bool lineInfo) {
  ir::Module merged;
  merged.target = units[members.front()].target;
  merged.ptx = 0;
  std::vector<passes::RegisterAssignment> registers;
  for (size_t i : members) {
    merged.absorb(std::move(units[i].compiled));
    for (passes::RegisterAssignment& r : units[i].registers) registers.push_back(std::move(r));
  }
  ir::Diagnostics d;
  std::optional<std::string> ptx = ptx::emit(merged, {.kernel = {}, .registers = registers, .lineInfo = lineInfo}, d);
  printDiagnostics(d);
  return ptx;
}

// The PTX a module of a target holds at most, unless one kernel is larger (modules = "target"):
// ptxas assembles the modules of a target in parallel, about a second each, so that a bundle with
// one target and many kernels builds on many cores; a target's kernels in spec order, cut where
// the next kernel would pass this. It depends on the PTX alone, not on -j or the machine.
constexpr size_t kModulePtxBytes = size_t{1} << 20;

// The ptxas jobs: for each target its kernels in modules of at most kModulePtxBytes of PTX
// (modules = "target"; a module of one kernel is that kernel's own job), or one job per unit. A
// target's modules are named BUNDLE.1, BUNDLE.2 ... (ptxas's file names: a kernel's name has no
// dot). Every unit gets its job's index.
std::vector<Job> jobsOf(const spec::Spec& spec, spec::Spec::Modules modules, std::vector<Unit>& units) {
  std::vector<Job> jobs;
  for (const bundle::Target& target : spec.targets) {
    std::vector<size_t> members;  // of the module being filled
    size_t ptxBytes = 0;
    unsigned parts = 0;  // modules of this target so far
    auto flush = [&] {
      for (size_t i : members) units[i].job = jobs.size();
      if (members.size() == 1) {
        jobs.push_back({spec.kernels[units[members[0]].kernel].name, target, members, units[members[0]].ptx, {}, false});
      } else if (members.size() > 1) {
        jobs.push_back({spec.name + "." + std::to_string(++parts), target, members, {}, {}, false});
      }
      members.clear();
      ptxBytes = 0;
    };
    for (size_t i = 0; i < units.size(); ++i) {
      if (units[i].target != target) continue;
      if (modules == spec::Spec::Modules::PerKernel || ptxBytes + units[i].ptx.size() > kModulePtxBytes) flush();
      members.push_back(i);
      ptxBytes += units[i].ptx.size();
    }
    flush();
  }
  return jobs;
}

// ptxas over every job, -j at a time, in one temporary folder. false when a signal arrived (the
// caller re-raises it); failures are left in the jobs.
bool runJobs(const BuildOpts& o, const std::string& ptxasPath, const spec::Spec& spec, const std::vector<Unit>& units,
             std::vector<Job>& jobs) {
  ptxas::TempDir tmp;
  if (!tmp.ok()) {
    printErrorf("%s", tmp.error().c_str());
    return false;
  }
  std::atomic<size_t> done{0};
  std::mutex mu;  // progress lines
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  parallelFor(jobs.size(), parallelism(o), [&](size_t i) {
    Job& j = jobs[i];
    ptxas::Job job{j.name, j.target, j.ptx, o.lineInfo || spec.debug, {}};
    if (j.isModule())
      for (size_t u : j.units) job.entries.push_back(spec.kernels[units[u].kernel].name);
    j.out = ptxas::assemble(ptxasPath, tmp.path(), job, o.ptxasTimeout);
    j.ran = true;
    size_t n = ++done;
    if (tty && !j.out.interrupted) {
      std::lock_guard<std::mutex> lock(mu);
      std::string what = !j.out.ok       ? "failed"
                         : j.isModule() ? std::to_string(j.units.size()) + " kernels in one module"
                                        : std::to_string(j.out.resources[0].registers) + " registers";
      std::fprintf(stderr, "[%zu/%zu] ptxas %s %s: %s\n", n, jobs.size(), j.name.c_str(), j.target.name().c_str(), what.c_str());
    }
    return !j.out.timedOut;  // a ptxas that hangs once likely hangs on every job: start no more
  });
  return ptxas::interruptedBy() == 0;
}

// "a, b, c": the kernels of a job.
std::string kernelList(const spec::Spec& spec, const std::vector<Unit>& units, const Job& job) {
  std::string out;
  for (size_t u : job.units) out += (out.empty() ? "" : ", ") + spec.kernels[units[u].kernel].name;
  return out;
}

// After a module's ptxas failed: each of its kernels alone, so that the error names the kernels
// that fail (as a build of one module per kernel would). false when a signal arrived.
bool explainModuleFailure(const BuildOpts& o, const std::string& ptxasPath, const spec::Spec& spec,
                          const std::vector<Unit>& units, const Job& module) {
  std::vector<Job> alone;
  for (size_t u : module.units) alone.push_back({spec.kernels[units[u].kernel].name, module.target, {u}, units[u].ptx, {}, false});
  if (!runJobs(o, ptxasPath, spec, units, alone)) return false;
  bool named = false;
  for (const Job& j : alone)
    if (j.ran && !j.out.ok) {
      printPtxasFailure(j.name, j.target, j.out);
      named = true;
    }
  if (!named)
    printErrorf("ptxas failed for the %s module of kernels %s, which each assemble alone (build with --modules kernel):\n%s",
                module.target.name().c_str(), kernelList(spec, units, module).c_str(), module.out.log.c_str());
  return true;
}

// ptxas for every unit, as modules say. false when one failed (with a message) or a signal
// arrived (without one: the caller re-raises it).
bool assembleAll(const BuildOpts& o, const std::string& ptxasPath, const spec::Spec& spec, spec::Spec::Modules modules,
                 std::vector<Unit>& units, std::vector<Job>& jobs) {
  jobs = jobsOf(spec, modules, units);
  for (Job& j : jobs) {
    if (!j.isModule()) continue;
    std::optional<std::string> ptx = modulePtx(units, j.units, o.lineInfo || spec.debug);
    if (!ptx) {
      printErrorf("cannot emit the PTX of the %s module", j.target.name().c_str());
      return false;
    }
    j.ptx = std::move(*ptx);
  }
  if (!runJobs(o, ptxasPath, spec, units, jobs)) return false;

  bool failed = false;
  for (const Job& j : jobs) {
    if (!j.ran) {
      failed = true;
      continue;
    }
    if (!j.out.ok) {
      failed = true;
      if (!j.isModule()) printPtxasFailure(j.name, j.target, j.out);
      else if (j.out.timedOut)
        printErrorf("the %s module of kernels %s: %s; raise the limit with --ptxas-timeout SECONDS", j.target.name().c_str(),
                    kernelList(spec, units, j).c_str(), j.out.log.c_str());
      else if (!explainModuleFailure(o, ptxasPath, spec, units, j)) return false;
      continue;
    }
    for (size_t e = 0; e < j.units.size(); ++e) units[j.units[e]].resources = j.out.resources[e];
  }
  if (failed) return false;
  for (const Unit& u : units) {
    const spec::KernelSpec& k = spec.kernels[u.kernel];
    const bundle::Resources& r = u.resources;
    if (r.spillStores == 0 && r.spillLoads == 0) continue;
    ir::Diagnostic d{k.allowSpills ? ir::Severity::Warning : ir::Severity::Error, spec.file, k.loc,
                     "kernel '" + k.name + "' spills registers on " + u.target.name() + " (" + describe(r) + ")" +
                         (k.allowSpills ? "; allowed by allow_spills" : "; set allow_spills = true in its [[kernel]] entry to accept")};
    printDiagnostic(d);
    failed = failed || !k.allowSpills;
  }
  return !failed;
}

// One kernel compiled for every target of the spec: its units, in target order, and what it
// reports, which the caller prints in spec order.
struct KernelBuild {
  std::vector<Unit> units;
  std::vector<ir::Diagnostics> reports;  // instantiation's, then one per target compiled
  std::string failure;  // "kernel 'K' failed to build for T", where no error says why
  bool failed = false;
};

// Compiles kernel `ki` (instantiated as `inst`) for every target of the spec into `out`, up to the
// first target where it fails (the others would mostly repeat its errors). Runs in a worker
// thread: it reads the spec and the instances and writes only `out`.
void compileKernel(const spec::Spec& spec, size_t ki, const std::vector<spec::TargetedInstance>& inst,
                   const compile::Options& options, bool withIr, bool joinModules, KernelBuild& out) {
  const spec::KernelSpec& k = spec.kernels[ki];
  for (const bundle::Target& target : spec.targets) {
    ir::Diagnostics& td = out.reports.emplace_back();
    auto own = std::find_if(inst.begin(), inst.end(), [&](const spec::TargetedInstance& t) {
      return std::find(t.targets.begin(), t.targets.end(), target) != t.targets.end();
    });
    ir::Module m = own->instance.module;
    compile::Output compiled = compile::compile(m, target, options, td);
    // A diagnostic from inside a template's sources is followed by the entry that made it.
    if (k.tmpl && (td.hasErrors() || td.warnings() != 0)) spec::noteTemplateEntry(spec, k, "built for " + target.name(), td);
    if (!compiled.ptx || td.hasErrors()) {
      if (!td.hasErrors()) out.failure = "kernel '" + k.name + "' failed to build for " + target.name();
      out.failed = true;
      return;
    }
    Unit u{ki, target, std::move(*compiled.ptx), withIr ? ir::print(m) : std::string(), {}, {}, {}, 0};
    if (joinModules) {
      u.compiled = std::move(m);
      u.registers = std::move(compiled.registers);
    }
    out.units.push_back(std::move(u));
  }
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

  // Each kernel is instantiated once (signature, launch rule, IR), in spec order (a .tir file's
  // errors go with the first kernel that reads it), then compiled for every target, -j kernels at
  // once; what each reports is printed in spec order, kernel by kernel (deterministic). A kernel
  // that fails does not stop the others: every kernel's errors are reported, then nothing is
  // written.
  std::vector<std::vector<spec::TargetedInstance>> instances(spec->kernels.size());
  std::vector<KernelBuild> built(spec->kernels.size());
  spec::TirCache tirs;
  for (size_t ki = 0; ki < spec->kernels.size(); ++ki) {
    built[ki].reports.emplace_back();
    std::optional<std::vector<spec::TargetedInstance>> inst =
        spec::instantiateForTargets(*spec, spec->kernels[ki], tirs, built[ki].reports.back());
    if (inst) instances[ki] = std::move(*inst);
    else built[ki].failed = true;
  }
  compile::Options options = spec::compileOptions(*spec);
  options.lineInfo = options.lineInfo || o.lineInfo;
  const bool withIr = spec->ir && !o.noIr;
  const spec::Spec::Modules modules = o.modules ? *spec::parseModules(*o.modules) : spec->modules;
  const bool joinModules = modules == spec::Spec::Modules::PerTarget && !o.ptxOnly;
  parallelFor(spec->kernels.size(), parallelism(o), [&](size_t ki) {
    if (!built[ki].failed) compileKernel(*spec, ki, instances[ki], options, withIr, joinModules, built[ki]);
    return true;
  });
  std::vector<Unit> units;
  bool failed = false;
  for (KernelBuild& b : built) {
    for (const ir::Diagnostics& d : b.reports) printDiagnostics(d);
    if (!b.failure.empty()) printErrorf("%s", b.failure.c_str());
    failed = failed || b.failed;
    for (Unit& u : b.units) units.push_back(std::move(u));
  }
  if (failed) return kInputError;

  std::string ptxasVersion;
  std::vector<Job> jobs;
  if (!o.ptxOnly) {
    if (!assembleAll(o, ptxasPath, *spec, modules, units, jobs)) return kInputError;
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
  for (size_t ki = 0; ki < spec->kernels.size(); ++ki) {
    // The first instance serves the targets no variant lists (spec::instantiateForTargets); members
    // whose parameters and launch rule are the first's (fp8_decode's) need no variant.
    const std::vector<spec::TargetedInstance>& own = instances[ki];
    in.kernels.push_back({spec->kernels[ki].name, own[0].instance.params, own[0].instance.launch, {}});
    for (size_t v = 1; v < own.size(); ++v)
      if (own[v].instance.params != own[0].instance.params || !(own[v].instance.launch == own[0].instance.launch))
        in.kernels.back().variants.push_back({own[v].targets, own[v].instance.params, own[v].instance.launch});
  }
  std::vector<std::optional<uint32_t>> moduleOf(jobs.size());  // a job's index among in.modules
  for (size_t j = 0; j < jobs.size(); ++j)
    if (jobs[j].isModule()) {
      moduleOf[j] = static_cast<uint32_t>(in.modules.size());
      in.modules.push_back({jobs[j].target, std::move(jobs[j].out.cubin)});
    }
  for (Unit& u : units) {
    bundle::KernelInput& k = in.kernels[u.kernel];
    if (!o.ptxOnly && moduleOf[u.job])
      k.payloads.push_back({u.target, bundle::PayloadKind::Cubin, u.resources, {}, moduleOf[u.job]});
    else if (!o.ptxOnly)
      k.payloads.push_back({u.target, bundle::PayloadKind::Cubin, u.resources, std::move(jobs[u.job].out.cubin), {}});
    if (in.ptxFallback) k.payloads.push_back({u.target, bundle::PayloadKind::Ptx, {}, std::move(u.ptx)});
    if (in.ir) k.payloads.push_back({u.target, bundle::PayloadKind::Ir, {}, std::move(u.ir)});
  }
  auto bytes = bundle::write(in, {.threads = parallelism(o)});
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
  return {"build", "Compile a kernel spec (TOML) into a .tnb bundle of cubins", [](Options& cli) {
            auto o = std::make_shared<BuildOpts>();
            cli.option("SPEC", o->spec, "Kernel spec (.toml), or - for stdin").required();
            cli.option("-o,--output", o->output, "Output bundle (.tnb), or - for stdout").required();
            cli.option("-j,--jobs", o->jobs, "Kernels compiled, ptxas runs and compression threads at once (default: one per CPU)").range(1, 1024);
            cli.option("--targets", o->targets, "Comma-separated targets, overriding the spec's (e.g. sm_80,sm_90)");
            addPtxasOptions(cli, o->ptxas, o->ptxasTimeout);
            cli.flag("--ptx-only", o->ptxOnly, "Skip ptxas: bundle PTX only (loaded by driver JIT)");
            cli.flag("--no-ir", o->noIr, "Leave out each kernel's compiled IR (which the CPU simulator runs; spec key 'ir')");
            cli.flag("--line-info", o->lineInfo,
                     "Map PTX and cubins to source lines (.tir lines, template builder calls) for "
                     "profilers; on by default with the spec's 'debug = true'");
            cli.option("--modules", o->modules,
                       "Cubins per target holding its kernels, up to 1 MiB of PTX each, each loaded as one driver "
                       "module (target, the default), or one per kernel (kernel); overrides the spec's 'modules'")
                .oneOf({"target", "kernel"});
            cli.option("--depfile", o->depfile, "Also write a Makefile-syntax depfile naming the spec and its .tir files");
            return std::function<int()>([o] { return runBuild(*o); });
          }};
}

}  // namespace tn::cli
