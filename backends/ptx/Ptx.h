// The PTX emitter: one linear walk over a verified module, per-op format entries.
#pragma once

#include <optional>
#include <string>

#include "ir/Diagnostics.h"
#include "ir/IR.h"

namespace tn::ptx {

struct EmitOptions {
  std::string kernel;  // emit only this kernel ("" = all)
  // Name registers after register-liveness's assignment, so that values with disjoint live
  // ranges share one (fewer .reg declarations); false gives every value registers of its own.
  bool reuseRegisters = true;
};

// Emits PTX for m's target (m.sm, m.archSpecific, m.ptx); m must have passed ir::verify. An op or
// type that cannot be emitted for that target is an error naming op, type and target; then
// nullopt is returned. The output depends only on m and opts (byte-stable).
std::optional<std::string> emit(const ir::Module& m, const EmitOptions& opts, ir::Diagnostics& diags);

}  // namespace tn::ptx
