#include "ir/Diagnostics.h"

namespace tn::ir {

std::string formatDiagnostic(const Diagnostic& d) {
  std::string out;
  if (!d.file.empty()) out += d.file + ":";
  if (d.loc.known()) out += std::to_string(d.loc.line) + ":" + std::to_string(d.loc.col) + ":";
  if (!out.empty()) out += " ";
  out += d.severity == Severity::Error ? "error: " : d.severity == Severity::Warning ? "warning: " : "note: ";
  out += d.message;
  return out;
}

}  // namespace tn::ir
