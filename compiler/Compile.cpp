#include "compiler/Compile.h"

#include <algorithm>

#include "backends/ptx/Ptx.h"
#include "backends/ptx/Registers.h"
#include "ir/Verifier.h"

namespace tn::compile {

void retarget(ir::Module& m, bundle::Target target) {
  m.target = target;
  m.ptx = std::max(m.ptx, target.minPtx());
}

passes::PassOptions passOptions(const Options& o) {
  passes::PassOptions po;
  po.fpContract = o.fpContract;
  po.remarks = o.remarks;
  return po;
}

passes::PassRunner makeRunner(ir::Module& m, ir::Diagnostics& diags, const passes::PassOptions& options,
                              passes::AfterPassHook after) {
  return passes::PassRunner(m, diags, options, ptx::registerFile(), std::move(after));
}

bool runPipeline(passes::PassRunner& r, Level level) {
  switch (level) {
    case Level::None: return true;
    case Level::O0: return passes::runO0(r);
    case Level::O1: return passes::runO1(r);
    case Level::O2: return passes::runO2(r);
  }
  return true;
}

Output compile(ir::Module& m, bundle::Target target, const Options& o, ir::Diagnostics& diags) {
  Output out;
  retarget(m, target);
  if (!ir::verify(m, diags)) return out;
  passes::PassOptions po = passOptions(o);
  passes::PassRunner runner = makeRunner(m, diags, po);
  runPipeline(runner, o.level);
  // At every level: the emitter sees no calls.
  runner.run("inline");
  // At every level, also without a pipeline: the emitter relies on it for what PTX lacks.
  runner.run("legalize");
  if (!ir::verify(m, diags)) return out;
  out.registers = runner.takeAssignments();
  ptx::EmitOptions eo;
  eo.kernel = o.kernel;
  eo.lineInfo = o.lineInfo;
  if (o.reuseRegisters) eo.registers = out.registers;
  out.ptx = ptx::emit(m, eo, diags);
  return out;
}

}  // namespace tn::compile
