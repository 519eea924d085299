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
// Adds what the kernel does through each tensor map of `rule` to the map's source pointer: read
// where a cp.async.bulk.tensor load names the map, written where a store does; and the map's
// element type when the pointer's own accesses tell none and it does not escape.
void addTensorMapUse(const ir::Kernel& k, const bundle::LaunchRule& rule, std::vector<bundle::Param>& params);

}  // namespace tn::spec
