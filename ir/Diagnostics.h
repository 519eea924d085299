// Source locations and the diagnostics engine shared by the parser, verifier and passes.
// Library code reports here; only the CLI decides how (and whether) to print.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tn::ir {

// file is an index into the owning Module's file table (0 = unknown); line/col are 1-based.
struct SourceLoc {
  uint32_t file = 0;
  uint32_t line = 0;
  uint32_t col = 0;
  bool known() const { return line != 0; }
  bool operator==(const SourceLoc&) const = default;
};

enum class Severity : uint8_t { Note, Warning, Error };

struct Diagnostic {
  Severity severity;
  std::string file;  // resolved file name ("" when unknown)
  SourceLoc loc;
  std::string message;
};

class Diagnostics {
 public:
  void report(Severity sev, std::string file, SourceLoc loc, std::string message) {
    if (sev == Severity::Error) ++errors_;
    if (sev == Severity::Warning) ++warnings_;
    diags_.push_back({sev, std::move(file), loc, std::move(message)});
  }
  const std::vector<Diagnostic>& all() const { return diags_; }
  unsigned errors() const { return errors_; }
  unsigned warnings() const { return warnings_; }
  bool hasErrors() const { return errors_ != 0; }
  void clear() { diags_.clear(); errors_ = warnings_ = 0; }

 private:
  std::vector<Diagnostic> diags_;
  unsigned errors_ = 0;
  unsigned warnings_ = 0;
};

// "file:line:col: error: message" (the location part is dropped when unknown), both parts
// through displayText.
std::string formatDiagnostic(const Diagnostic& d);

// `text` safe to print on a terminal: valid UTF-8, newlines and tabs as they are; every other
// control byte (NUL included), DEL and every byte that is not part of a valid UTF-8 sequence as
// \xNN.
std::string displayText(std::string_view text);

}  // namespace tn::ir
