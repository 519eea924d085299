#include "ir/Diagnostics.h"

namespace tn::ir {

std::string formatDiagnostic(const Diagnostic& d) {
  std::string out;
  if (!d.file.empty()) out += displayText(d.file) + ":";
  if (d.loc.known()) out += std::to_string(d.loc.line) + ":" + std::to_string(d.loc.col) + ":";
  if (!out.empty()) out += " ";
  out += d.severity == Severity::Error ? "error: " : d.severity == Severity::Warning ? "warning: " : "note: ";
  out += displayText(d.message);
  return out;
}

namespace {

// The length of the valid UTF-8 sequence at the start of `s` (2 to 4 bytes), or 0: no overlong
// forms, no surrogates, nothing above U+10FFFF.
size_t utf8Sequence(std::string_view s) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  unsigned char b0 = byte(0);
  size_t n = b0 >= 0xC2 && b0 <= 0xDF ? 2 : b0 >= 0xE0 && b0 <= 0xEF ? 3 : b0 >= 0xF0 && b0 <= 0xF4 ? 4 : 0;
  if (n == 0 || s.size() < n) return 0;
  for (size_t i = 1; i < n; ++i)
    if ((byte(i) & 0xC0) != 0x80) return 0;
  if (b0 == 0xE0 && byte(1) < 0xA0) return 0;   // overlong
  if (b0 == 0xED && byte(1) > 0x9F) return 0;   // surrogate
  if (b0 == 0xF0 && byte(1) < 0x90) return 0;   // overlong
  if (b0 == 0xF4 && byte(1) > 0x8F) return 0;   // above U+10FFFF
  return n;
}

}  // namespace

std::string displayText(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c >= 0x20 && c < 0x7F) || c == '\n' || c == '\t') {
      out += static_cast<char>(c);
      ++i;
    } else if (size_t n = c >= 0x80 ? utf8Sequence(text.substr(i)) : 0) {
      out.append(text.substr(i, n));
      i += n;
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
      ++i;
    }
  }
  return out;
}

}  // namespace tn::ir
