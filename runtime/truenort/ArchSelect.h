// Which code of a bundle runs on a device: a pure function, tested without a GPU.
//   1. a cubin for exactly the device's sm_XY (or sm_XYa when the device is that architecture and
//      the bundle has an arch-specific cubin for it);
//   2. else the cubin of the highest sm_XZ with Z <= Y of the same major (never an `a` cubin:
//      arch-specific code runs only on its exact architecture);
//   3. else PTX, only if the bundle carries it, the caller allowed JIT, and the PTX target is not
//      newer than the device; this is counted as a JIT event by the caller;
//   4. else an error naming the device's SM and the bundle's targets.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "backends/bundle/Target.h"
#include "truenort/Result.h"

namespace truenort {

// The compiler's own target type (sm number, arch-specific flag; parse, name, order): the
// runtime reads targets exactly as the bundle writer wrote them.
using Target = tn::bundle::Target;

struct CodeEntry {
  Target target;
  bool is_ptx = false;
};

struct Selection {
  size_t index = 0;  // into the entries given
  bool jit = false;  // true when PTX was chosen
};

// device: the device's compute capability as major*10+minor. Arch-specific cubins are chosen
// only when exactly matching (the device of an sm_90 GPU runs sm_90a code).
Result<Selection> selectCode(unsigned device_sm, const std::vector<CodeEntry>& entries, bool allow_jit,
                             const std::string& kernel = {});

}  // namespace truenort
