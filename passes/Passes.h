// The entry point of every pass, one per file (passes/<Name>.cpp, CLI name in kebab case).
// Each returns true when it changed the module; the registry in Registry.cpp lists them.
#pragma once

#include "passes/Pass.h"

namespace tn::passes {

bool constFold(PassContext& ctx);         // const-fold
bool strengthReduce(PassContext& ctx);    // strength-reduce
bool cse(PassContext& ctx);               // cse
bool dce(PassContext& ctx);               // dce
bool fmaFusion(PassContext& ctx);         // fma-fusion
bool barrierSafety(PassContext& ctx);     // barrier-safety
bool tileValidation(PassContext& ctx);    // tile-validation
bool registerLiveness(PassContext& ctx);  // register-liveness
bool legalize(PassContext& ctx);          // legalize
bool inlineCalls(PassContext& ctx);       // inline

// The inline pass outside a pipeline (the interpreter, spec instantiation): inlines every call
// of a verified module's kernels and drops its functions. False when it reported an error.
bool inlineFunctions(ir::Module& m, ir::Diagnostics& diags);

}  // namespace tn::passes
