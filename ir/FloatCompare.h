// PTX setp on floating-point values, shared by the interpreter and const-fold so that the two can
// never disagree: ordered comparisons are false when either operand is NaN, the unordered `u`
// forms are true then, and num/nan test for NaN. nullopt for a modifier that is no comparison.
#pragma once

#include <cmath>
#include <optional>

#include "ir/Ops.h"

namespace tn::ir {

inline std::optional<bool> floatCompare(Mod cmp, double a, double b) {
  const bool unordered = std::isnan(a) || std::isnan(b);
  switch (cmp) {
    case Mod::Eq: return !unordered && a == b;
    case Mod::Ne: return !unordered && a != b;
    case Mod::Lt: return !unordered && a < b;
    case Mod::Le: return !unordered && a <= b;
    case Mod::Gt: return !unordered && a > b;
    case Mod::Ge: return !unordered && a >= b;
    case Mod::Equ: return unordered || a == b;
    case Mod::Neu: return unordered || a != b;
    case Mod::Ltu: return unordered || a < b;
    case Mod::Leu: return unordered || a <= b;
    case Mod::Gtu: return unordered || a > b;
    case Mod::Geu: return unordered || a >= b;
    case Mod::Num: return !unordered;
    case Mod::Nan: return unordered;
    default: return std::nullopt;
  }
}

}  // namespace tn::ir
