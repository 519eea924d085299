// Parser for the .tir text format (grammar in docs/ir.md). Stops at the first syntax error and
// reports it as file:line:col; semantic checks are the verifier's job.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "ir/Diagnostics.h"
#include "ir/IR.h"

namespace tn::ir {

std::optional<Module> parseModule(std::string_view text, const std::string& fileName, Diagnostics& diags);

// Parses a constant literal for type t ("1.5", "-3", "0x7FC00000"); nullopt when it does not fit.
std::optional<uint64_t> parseConstLiteral(std::string_view text, Type t);

}  // namespace tn::ir
