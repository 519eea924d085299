// The PTX emitter: one linear walk over a verified module, per-op format entries.
#pragma once

#include <optional>
#include <span>
#include <string>

#include "ir/Diagnostics.h"
#include "ir/IR.h"
#include "passes/RegisterLiveness.h"

namespace tn::ptx {

struct EmitOptions {
  std::string kernel;  // emit only this kernel ("" = all)
  // Register names: register-liveness's assignment per kernel of the module (computed over
  // registerFile() for the module as it is), so that values with disjoint live ranges share one
  // (fewer .reg declarations); empty gives every value registers of its own (--no-reg-reuse).
  std::span<const passes::RegisterAssignment> registers;
  // Source lines for profilers and debuggers: a `.file` per source file of the module and a
  // `.loc FILE LINE COL` before the PTX of each instruction whose line differs from the last
  // one's (the .tir line, or the builder call site of a template).
  bool lineInfo = false;
};

// Emits PTX for m's target (m.target, m.ptx); m must have passed ir::verify. An op or
// type that cannot be emitted for that target is an error naming op, type and target; then
// nullopt is returned. The output depends only on m and opts (byte-stable). compile::compile()
// is the usual way here: it runs the pipeline and hands its register assignment over.
std::optional<std::string> emit(const ir::Module& m, const EmitOptions& opts, ir::Diagnostics& diags);

}  // namespace tn::ptx
