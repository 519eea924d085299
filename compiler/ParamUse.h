// What a kernel does through each pointer parameter: reads, writes, lets the pointer escape
// (stores it to memory or hands it to an atomic as a value), and the element type of its typed
// loads and stores. The bundle records it (docs/bundle-format.md, "Pointer use"); `truenoc embed`
// makes read-only pointers `const T*`, the runtime's Python package checks tensors against it.
#pragma once

#include <vector>

#include "backends/bundle/LaunchRule.h"
#include "ir/IR.h"

namespace tn::spec {

// Fills access and element of every pointer parameter of `params` (the signature of k, in
// order); other parameters keep 0.
void analyzeParamUse(const ir::Kernel& k, std::vector<bundle::Param>& params);

}  // namespace tn::spec
