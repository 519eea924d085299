// The compile spine's pass runner keeps one register assignment per kernel: tile-validation,
// register-liveness and the emitter share it, and it matches a fresh computation on the result.
#include <doctest/doctest.h>

#include <tuple>

#include "backends/ptx/Ptx.h"
#include "backends/ptx/Registers.h"
#include "compiler/Compile.h"
#include "ir/Parser.h"
#include "kernels/Examples.h"

namespace {

using namespace tn;

// PTX's register file, counting how often the assignment asks for a value's class.
unsigned classQueries = 0;
passes::RegisterFile countingFile() {
  passes::RegisterFile f = ptx::registerFile();
  f.classOf = [](ir::Type t) {
    ++classQueries;
    return ptx::registerFile().classOf(t);
  };
  return f;
}

}  // namespace

TEST_CASE("compile: the register assignment is computed once per kernel in a -O2 run") {
  for (ir::Module (*build)() : {kernels::buildRowSumModule, kernels::buildVaddModule}) {
    ir::Module m = build();
    const passes::RegisterFile file = countingFile();
    ir::Diagnostics diags;
    compile::Options o;
    passes::PassOptions po = compile::passOptions(o);
    passes::PassRunner runner(m, diags, po, file);
    classQueries = 0;
    REQUIRE(compile::runPipeline(runner, compile::Level::O2));
    REQUIRE_FALSE(diags.hasErrors());
    std::vector<passes::RegisterAssignment> kept = runner.takeAssignments();
    const unsigned pipelineQueries = classQueries;
    REQUIRE(kept.size() == m.kernels.size());

    // One computation's worth of queries: tile-validation computed the assignment, and
    // register-liveness and the hand-over to the emitter reused it.
    classQueries = 0;
    passes::RegisterAssignment fresh = passes::assignRegisters(m.kernels[0], file);
    CHECK(classQueries > 0);
    CHECK(pipelineQueries == classQueries);
    CHECK(kept[0].predicted == fresh.predicted);
    CHECK(kept[0].counts == fresh.counts);
    REQUIRE(kept[0].regs.size() == fresh.regs.size());
    for (size_t v = 0; v < fresh.regs.size(); ++v) {
      CHECK(kept[0].regs[v].cls == fresh.regs[v].cls);
      CHECK(kept[0].regs[v].index == fresh.regs[v].index);
      CHECK(kept[0].regs[v].count == fresh.regs[v].count);
    }
  }
}

TEST_CASE("compile: a pass that changes the module drops the kept assignment") {
  const char* text = R"(target sm_80
kernel @k(%out: ptr.global) {
^entry:
  %a = const 2 : u32
  %b = const 3 : u32
  %c = add %a, %b : u32
  st %out, %c : u32
  ret
}
)";
  ir::Diagnostics pd;
  std::optional<ir::Module> parsed = ir::parseModule(text, "k.tir", pd);
  REQUIRE(parsed.has_value());
  ir::Module& m = *parsed;
  const passes::RegisterFile file = countingFile();
  ir::Diagnostics diags;
  passes::PassOptions po;
  passes::PassRunner runner(m, diags, po, file);
  REQUIRE(runner.run("tile-validation"));  // computes and keeps it for the unoptimized kernel
  bool changed = false;
  REQUIRE(runner.run("const-fold", &changed));
  REQUIRE(changed);  // add 2, 3 folds
  classQueries = 0;
  std::vector<passes::RegisterAssignment> kept = runner.takeAssignments();
  CHECK(classQueries > 0);  // recomputed for the changed module
  passes::RegisterAssignment fresh = passes::assignRegisters(m.kernels[0], file);
  CHECK(kept[0].predicted == fresh.predicted);
  CHECK(kept[0].counts == fresh.counts);
}

TEST_CASE("compile: absorbed kernels emit as they do alone, their source files renumbered") {
  // Two kernels compiled apart, from different files, joined into one module as `build` does for
  // one module per target: each kernel's PTX body is its own, and each .loc names its own file.
  auto compiled = [](const char* text, const char* file) {
    ir::Diagnostics d;
    std::optional<ir::Module> m = ir::parseModule(text, file, d);
    REQUIRE(m);
    compile::Options o;
    o.lineInfo = true;
    compile::Output out = compile::compile(*m, bundle::Target{90, false}, o, d);
    REQUIRE(out.ptx);
    REQUIRE_FALSE(d.hasErrors());
    return std::make_tuple(std::move(*m), std::move(out.registers), *out.ptx);
  };
  const char* kernelA = "kernel @a(%p: ptr.global) {\n^entry:\n  %x = tid.x : u32\n  st %p, %x : u32\n  ret\n}\n";
  const char* kernelB = "ptx 8.0\n\nkernel @b(%p: ptr.global) {\n^entry:\n  %y = ctaid.x : u32\n  st %p, %y : u32\n  ret\n}\n";
  auto [a, aRegs, aPtx] = compiled(kernelA, "a.tir");
  auto [b, bRegs, bPtx] = compiled(kernelB, "b.tir");
  ir::Module merged;
  merged.target = a.target;
  merged.absorb(std::move(a));
  merged.absorb(std::move(b));
  CHECK(merged.kernels.size() == 2);
  CHECK(merged.ptx == 80);  // the higher version
  CHECK(merged.fileName(merged.kernels[1].insts.front().loc) == "b.tir");
  std::vector<passes::RegisterAssignment> regs = std::move(aRegs);
  for (auto& r : bRegs) regs.push_back(std::move(r));
  ir::Diagnostics d;
  std::optional<std::string> ptx = ptx::emit(merged, {.kernel = {}, .registers = regs, .lineInfo = true}, d);
  REQUIRE(ptx);
  CHECK(ptx->find(".file 1 \"a.tir\"\n.file 2 \"b.tir\"\n") != std::string::npos);
  // b's body is the one it has alone, but for its file number.
  std::string body = bPtx.substr(bPtx.find(".visible .entry b("));
  for (size_t at = body.find(".loc 1 "); at != std::string::npos; at = body.find(".loc 1 ", at)) body[at + 5] = '2';
  CHECK(ptx->find(body) != std::string::npos);
  CHECK(ptx->find(aPtx.substr(aPtx.find(".visible .entry a("))) != std::string::npos);
}
