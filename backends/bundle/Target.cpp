#include "backends/bundle/Target.h"

#include <algorithm>
#include <array>

namespace tn::bundle {

namespace {

struct Row {
  Target target;
  unsigned minPtx;  // found by assembling an empty kernel with ptxas 13.0 at each PTX version
};

constexpr Row kSupported[] = {
    {{75, false}, 63},  {{80, false}, 70},  {{86, false}, 71},  {{87, false}, 74},  {{88, false}, 74},
    {{89, false}, 78},  {{90, false}, 78},  {{90, true}, 80},   {{100, false}, 86}, {{100, true}, 86},
    {{103, false}, 88}, {{103, true}, 88},  {{110, false}, 90}, {{110, true}, 90},  {{120, false}, 87},
    {{120, true}, 87},  {{121, false}, 88}, {{121, true}, 88},
};

constexpr Target kDefaults[] = {{80, false}, {86, false}, {89, false}, {90, false}};

const Row* rowOf(const Target& t) {
  for (const Row& r : kSupported)
    if (r.target == t) return &r;
  return nullptr;
}

}  // namespace

std::optional<Target> Target::parse(std::string_view t) {
  if (!t.starts_with("sm_")) return std::nullopt;
  t.remove_prefix(3);
  Target out;
  out.archSpecific = !t.empty() && t.back() == 'a';
  if (out.archSpecific) t.remove_suffix(1);
  if (t.size() < 2 || t.size() > 3 || t[0] == '0') return std::nullopt;
  out.sm = 0;
  for (char c : t) {
    if (c < '0' || c > '9') return std::nullopt;
    out.sm = out.sm * 10 + static_cast<unsigned>(c - '0');
  }
  return out;
}

std::optional<Target> Target::parseSupported(std::string_view text, std::string& why) {
  std::optional<Target> t = parse(text);
  if (t && t->supported()) return t;
  why = (t ? "unsupported target '" : "invalid target '") + std::string(text) + "' (supported: " + supportedTargetsText() + ")";
  return std::nullopt;
}

std::string Target::name() const { return "sm_" + std::to_string(sm) + (archSpecific ? "a" : ""); }

bool Target::supported() const { return rowOf(*this) != nullptr; }

unsigned Target::minPtx() const {
  if (const Row* r = rowOf(*this)) return r->minPtx;
  // Not assembled here: the newest version known for an older architecture.
  unsigned best = 60;
  for (const Row& r : kSupported)
    if (r.target.sm <= sm) best = std::max(best, r.minPtx);
  return best;
}

std::span<const Target> supportedTargets() {
  static const auto all = [] {
    std::array<Target, std::size(kSupported)> a{};
    std::transform(std::begin(kSupported), std::end(kSupported), a.begin(), [](const Row& r) { return r.target; });
    return a;
  }();
  return all;
}

std::string supportedTargetsText() {
  std::string out;
  for (const Target& t : supportedTargets()) out += (out.empty() ? "" : ", ") + t.name();
  return out;
}

std::span<const Target> defaultTargets() { return kDefaults; }

}  // namespace tn::bundle
