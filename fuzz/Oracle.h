// What a fuzzer does when an input breaks a property the code promises (not a sanitizer
// report): print what broke and the diagnostics behind it, then abort, which libFuzzer records
// as a crash with the input saved.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "ir/Diagnostics.h"

namespace tn::fuzz {

[[noreturn]] inline void broken(const std::string& what, const ir::Diagnostics& diags) {
  std::fprintf(stderr, "%s\n", what.c_str());
  for (const ir::Diagnostic& d : diags.all()) std::fprintf(stderr, "  %s\n", ir::formatDiagnostic(d).c_str());
  std::abort();
}

}  // namespace tn::fuzz
