// docs/ir.md describes every op of the table, and nothing that is not in it.
#include <doctest/doctest.h>

#include <fstream>
#include <set>
#include <string>

#include "ir/Ops.h"

TEST_CASE("docs/ir.md op table matches ir/Ops.def") {
  std::ifstream in(std::string(TRUENOC_SOURCE_DIR) + "/docs/ir.md");
  REQUIRE(in.good());
  std::set<std::string> documented;
  bool inOps = false;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("## ")) inOps = line == "## Ops";
    if (line.starts_with("Type gates")) inOps = false;
    if (!inOps || !line.starts_with("| `")) continue;
    size_t end = line.find('`', 3);
    REQUIRE(end != std::string::npos);
    std::string name = line.substr(3, end - 3);
    CHECK_MESSAGE(documented.insert(name).second, "documented twice: " << name);
  }
  std::set<std::string> table;
  for (const auto& op : tn::ir::allOps()) table.insert(std::string(op.name));
  for (const auto& name : table) CHECK_MESSAGE(documented.contains(name), "op missing from docs/ir.md: " << name);
  for (const auto& name : documented) CHECK_MESSAGE(table.contains(name), "docs/ir.md documents unknown op: " << name);
  CHECK(table.size() == documented.size());
}
