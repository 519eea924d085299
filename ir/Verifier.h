// The IR verifier: checks every invariant listed at the top of ir/Verifier.cpp and reports all
// violations (not just the first) through the diagnostics engine.
#pragma once

#include "ir/Diagnostics.h"
#include "ir/IR.h"

namespace tn::ir {

// Verifies every kernel of m against m's target (sm, ptx). Returns true when no error was found.
bool verify(const Module& m, Diagnostics& diags);
bool verifyKernel(const Module& m, const Kernel& k, Diagnostics& diags);
// The lowest target on which every instruction of m exists (ops and type gates, as invariant 7
// checks): sm_90a when m uses an op of that architecture alone (wgmma, setmaxnreg).
Target requiredTarget(const Module& m);

}  // namespace tn::ir
