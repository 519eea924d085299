// The canonical text form of the IR (.tir). The parser reads back exactly what this prints.
#pragma once

#include <string>

#include "ir/IR.h"

namespace tn::ir {

std::string print(const Module& m);
std::string print(const Module& m, const Kernel& k);
// A constant's literal as the printer writes it (decimal when exact, else 0x bits).
std::string constLiteral(Type t, uint64_t bits);

// Stable, unique display names of a kernel's values and blocks (shared with diagnostics).
class NameTable {
 public:
  explicit NameTable(const Kernel& k);
  const std::string& value(ValueId v) const { return values_[v.index]; }
  const std::string& block(BlockId b) const { return blocks_[b.index]; }

 private:
  std::vector<std::string> values_;
  std::vector<std::string> blocks_;
};

}  // namespace tn::ir
