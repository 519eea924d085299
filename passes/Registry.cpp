// The pass registry, the runner and the -O pipelines, written as plain code.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "passes/Passes.h"

namespace tn::passes {

const std::vector<PassInfo>& allPasses() {
  static const std::vector<PassInfo> table = [] {
    std::vector<PassInfo> t = {
        {"barrier-safety", "uniformity analysis: barriers and warp collectives under divergent control, shared races",
         PassKind::Checker, barrierSafety},
        {"const-fold", "fold constant integer and float ops (IEEE-exact only), constant branches and selects",
         PassKind::Transform, constFold},
        {"cse", "remove pure ops recomputed where an equal one dominates", PassKind::Transform, cse},
        {"dce", "remove unreachable blocks, unused pure ops and unused block parameters", PassKind::Transform, dce},
        {"fma-fusion", "contract float mul + add/sub into fma (honours --fp-contract, .exact, rounding modifiers)",
         PassKind::Transform, fmaFusion},
        {"inline", "inline every call of a device function into the kernels, then drop the functions",
         PassKind::Transform, inlineCalls},
        {"legalize", "rewrite what PTX lacks for the target (8-bit arithmetic, half div, bf16 conversions) into what it has",
         PassKind::Transform, legalize},
        {"register-liveness", "liveness, peak register pressure per PTX class and register assignment",
         PassKind::Analysis, registerLiveness},
        {"strength-reduce", "integer mul, unsigned div/rem by powers of two to shl/shr/and", PassKind::Transform,
         strengthReduce},
        {"tile-validation", "per-target limits, shared footprint, occupancy, vector alignment, bank conflicts",
         PassKind::Checker, tileValidation},
    };
    std::sort(t.begin(), t.end(), [](const PassInfo& a, const PassInfo& b) { return a.name < b.name; });
    return t;
  }();
  return table;
}

const PassInfo* findPass(std::string_view name) {
  for (const PassInfo& p : allPasses())
    if (p.name == name) return &p;
  return nullptr;
}

const RegisterAssignment& PassContext::registersOf(size_t index) {
  assignments.resize(module.kernels.size());
  if (!assignments[index]) assignments[index] = assignRegisters(module.kernels[index], registers);
  return *assignments[index];
}

PassRunner::PassRunner(ir::Module& m, ir::Diagnostics& diags, const PassOptions& options, const RegisterFile& registers,
                       AfterPassHook after)
    : ctx_{m, diags, options, registers}, after_(std::move(after)) {}

std::vector<RegisterAssignment> PassRunner::takeAssignments() {
  std::vector<RegisterAssignment> out;
  for (size_t i = 0; i < ctx_.module.kernels.size(); ++i) {
    ctx_.registersOf(i);
    out.push_back(std::move(*ctx_.assignments[i]));
  }
  ctx_.assignments.clear();
  return out;
}

bool PassRunner::run(std::string_view name, bool* changed) {
  if (changed) *changed = false;
  if (stopped_) return false;
  const PassInfo* pass = findPass(name);
  if (!pass) {
    ctx_.diags.report(ir::Severity::Error, "", {}, "unknown pass '" + std::string(name) + "'");
    stopped_ = true;
    return false;
  }
  auto start = std::chrono::steady_clock::now();
  bool did = pass->run(ctx_);
  if (did) ctx_.assignments.clear();  // computed for the module as it was
  std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  auto it = std::find_if(stats_.begin(), stats_.end(), [&](const PassStat& s) { return s.name == name; });
  if (it == stats_.end()) {
    stats_.push_back({std::string(name), 0, 0, 0});
    it = stats_.end() - 1;
  }
  ++it->runs;
  it->changes += did ? 1 : 0;
  it->seconds += took.count();
  if (changed) *changed = did;
  if (after_ && !after_(*pass, did)) stopped_ = true;
  return !stopped_;
}

namespace {

// The clean-up passes until none of them changes anything. Each round can only shrink or
// simplify the IR, so this terminates; the bound is a guard, reached by no known input.
bool cleanUp(PassRunner& r) {
  constexpr int kMaxRounds = 32;
  for (int round = 0; round < kMaxRounds; ++round) {
    bool any = false;
    for (const char* name : {"const-fold", "strength-reduce", "cse", "dce"}) {
      bool changed = false;
      if (!r.run(name, &changed)) return false;
      any = any || changed;
    }
    if (!any) return true;
  }
  return true;
}

bool checks(PassRunner& r) {
  return r.run("barrier-safety") && r.run("tile-validation") && r.run("register-liveness");
}

}  // namespace

bool runO0(PassRunner& r) { return r.run("inline") && checks(r); }

bool runO1(PassRunner& r) { return r.run("inline") && cleanUp(r) && checks(r); }

bool runO2(PassRunner& r) { return r.run("inline") && cleanUp(r) && r.run("fma-fusion") && cleanUp(r) && checks(r); }

bool runPasses(PassRunner& r, const std::vector<std::string>& names) {
  for (const std::string& n : names)
    if (!r.run(n)) return false;
  return true;
}


std::string formatTimingReport(const std::vector<PassStat>& stats) {
  double total = 0;
  unsigned runs = 0;
  for (const PassStat& s : stats) {
    total += s.seconds;
    runs += s.runs;
  }
  char line[160];
  std::string out = "===--- truenoc pass timing report ---===\n";
  std::snprintf(line, sizeof line, "  %-20s %6s %8s %12s %7s\n", "pass", "runs", "changed", "wall (ms)", "share");
  out += line;
  for (const PassStat& s : stats) {
    double share = total > 0 ? 100.0 * s.seconds / total : 0.0;
    std::snprintf(line, sizeof line, "  %-20s %6u %8u %12.3f %6.1f%%\n", s.name.c_str(), s.runs, s.changes,
                  s.seconds * 1e3, share);
    out += line;
  }
  std::snprintf(line, sizeof line, "  %-20s %6u %8s %12.3f %6.1f%%\n", "total", runs, "", total * 1e3, 100.0);
  out += line;
  return out;
}

}  // namespace tn::passes
