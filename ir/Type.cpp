#include "ir/Type.h"

#include <array>
#include <iterator>

namespace tn::ir {

namespace {
struct ScalarInfo {
  std::string_view name;
  unsigned bits;
};
constexpr std::array<ScalarInfo, 19> kScalars = {{
    {"pred", 1}, {"b8", 8}, {"b16", 16}, {"b32", 32}, {"b64", 64},
    {"u8", 8}, {"u16", 16}, {"u32", 32}, {"u64", 64},
    {"s8", 8}, {"s16", 16}, {"s32", 32}, {"s64", 64},
    {"f16", 16}, {"bf16", 16}, {"f32", 32}, {"f64", 64},
    {"ptr", 64}, {"tmap", 1024},
}};
constexpr std::array<std::string_view, 5> kSpaces = {"generic", "global", "shared", "param", "local"};
}  // namespace

unsigned scalarBits(Scalar s) { return kScalars[static_cast<size_t>(s)].bits; }
std::string_view scalarName(Scalar s) { return kScalars[static_cast<size_t>(s)].name; }
std::string_view spaceName(AddrSpace as) { return kSpaces[static_cast<size_t>(as)]; }

bool Type::isFloat() const {
  return scalar == Scalar::F16 || scalar == Scalar::BF16 || scalar == Scalar::F32 || scalar == Scalar::F64;
}
bool Type::isInt() const { return scalar >= Scalar::U8 && scalar <= Scalar::S64; }
bool Type::isSigned() const { return scalar >= Scalar::S8 && scalar <= Scalar::S64; }
bool Type::isBits() const { return scalar >= Scalar::B8 && scalar <= Scalar::B64; }

unsigned Type::bits() const {
  if (scalar == Scalar::Ptr) return (space == AddrSpace::Shared || space == AddrSpace::Local) ? 32 : 64;
  return scalarBits(scalar);
}

std::string typeName(Type t) {
  std::string out;
  if (t.lanes > 1) out = "v" + std::to_string(t.lanes) + ".";
  out += scalarName(t.scalar);
  if (t.isPtr()) {
    out += ".";
    out += spaceName(t.space);
  }
  return out;
}

std::optional<Type> parseType(std::string_view text) {
  uint8_t lanes = 1;
  if (text.size() > 3 && text[0] == 'v') {
    size_t dot = text.find('.');
    std::string_view count = text.substr(1, dot == std::string_view::npos ? 0 : dot - 1);
    static constexpr std::string_view kCounts[] = {"2", "4", "8", "16", "32", "64", "128"};
    for (size_t i = 0; i < std::size(kCounts); ++i)
      if (count == kCounts[i]) lanes = static_cast<uint8_t>(2u << i);
    if (lanes == 1) return std::nullopt;
    text.remove_prefix(dot + 1);
    if (lanes > 4 && text != "f32") return std::nullopt;  // wide vectors are f32 accumulators only
  }
  if (text.starts_with("ptr.")) {
    if (lanes != 1) return std::nullopt;
    std::string_view sp = text.substr(4);
    for (size_t i = 0; i < kSpaces.size(); ++i)
      if (kSpaces[i] == sp) return Type::ptr(static_cast<AddrSpace>(i));
    return std::nullopt;
  }
  for (size_t i = 0; i < kScalars.size(); ++i) {
    auto s = static_cast<Scalar>(i);
    if (kScalars[i].name != text || s == Scalar::Ptr) continue;
    if (lanes > 1 && (s == Scalar::Pred || s == Scalar::TensorMap)) return std::nullopt;
    return Type::of(s, lanes);
  }
  return std::nullopt;
}

std::optional<Type> intType(unsigned bits, char kind) {
  int idx = bits == 8 ? 0 : bits == 16 ? 1 : bits == 32 ? 2 : bits == 64 ? 3 : -1;
  if (idx < 0) return std::nullopt;
  Scalar base = kind == 'u' ? Scalar::U8 : kind == 's' ? Scalar::S8 : Scalar::B8;
  return Type::of(static_cast<Scalar>(static_cast<int>(base) + idx));
}

}  // namespace tn::ir
