// The cp.async pipeline depth of a kernel, statically: the most groups a thread can have committed
// and not yet waited for at any point (what `truenoc explain` reports as the pipeline depth).
#pragma once

#include <optional>

#include "ir/IR.h"

namespace tn::passes {

struct AsyncGroups {
  bool used = false;           // the kernel has cp.async, commit_group, wait_group or wait_all
  std::optional<unsigned> maxInFlight;  // nullopt: unbounded (a loop commits more than it waits for)
};

AsyncGroups asyncGroups(const ir::Kernel& k);

}  // namespace tn::passes
