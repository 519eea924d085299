// The compilation target: an SM number and the arch-specific flag (`sm_90a`). One value type for
// the whole tree: the .tir parser, the verifier, specs, the commands, the bundle and the runtime
// all parse, print, order and check targets through it. Part of the vocabulary library
// (truenoc_vocab), which depends on nothing, so the IR and the runtime can both use it.
#pragma once

#include <optional>
#if __cplusplus >= 202002L
#include <compare>
#include <span>
#endif
#include <string>
#include <string_view>

namespace tn::bundle {

struct Target {
  unsigned sm = 80;           // 90 for sm_90 and sm_90a
  bool archSpecific = false;  // sm_90a: code that runs on exactly that architecture

  // "sm_XY" / "sm_XYZ", optionally followed by 'a'; no leading zero. Syntax only: a target a
  // newer truenoc knows still parses (bundles keep what they were built for).
  static std::optional<Target> parse(std::string_view text);
  // parse() and supported() together; on failure, `why` says what is wrong and lists the
  // supported targets (the message every command prints for a bad --target).
  static std::optional<Target> parseSupported(std::string_view text, std::string& why);

  std::string name() const;  // "sm_90a"
  // Assembled by this ptxas (13.0): sm_75 ... sm_121 and their `a` variants from sm_90a on.
  bool supported() const;
  // The lowest PTX ISA version (x10) ptxas accepts for this target (sm_90a needs 8.0).
  unsigned minPtx() const;

  bool operator==(const Target& o) const { return sm == o.sm && archSpecific == o.archSpecific; }
  // Architecture order, the arch-specific variant right after its base: sm_90 < sm_90a < sm_100.
#if __cplusplus >= 202002L
  auto operator<=>(const Target& o) const {
    if (auto c = sm <=> o.sm; c != 0) return c;
    return archSpecific <=> o.archSpecific;
  }
#else  // the runtime's C++17 consumers
  bool operator!=(const Target& o) const { return !(*this == o); }
  bool operator<(const Target& o) const { return sm != o.sm ? sm < o.sm : archSpecific < o.archSpecific; }
  bool operator>(const Target& o) const { return o < *this; }
  bool operator<=(const Target& o) const { return !(o < *this); }
  bool operator>=(const Target& o) const { return !(*this < o); }
#endif
};

// "sm_75, sm_80, ..., sm_121a", for messages.
std::string supportedTargetsText();
#if __cplusplus >= 202002L  // the compiler's; the runtime's headers stay C++17
// Every supported target, in order.
std::span<const Target> supportedTargets();
// The targets a spec builds when it names none: sm_80, sm_86, sm_89, sm_90.
std::span<const Target> defaultTargets();
#endif

}  // namespace tn::bundle
