#include "backends/bundle/ParamType.h"

#include <array>
#include <string_view>

namespace tn::bundle {

namespace {

constexpr std::array<std::string_view, 21> kScalarNames = {"pred", "b8",  "b16", "b32",  "b64", "u8",  "u16",
                                                           "u32",  "u64", "s8",  "s16",  "s32", "s64", "f16",
                                                           "bf16", "f32", "f64", "ptr", "tmap", "e4m3", "e5m2"};
constexpr std::array<std::string_view, 6> kSpaceNames = {"", "generic", "global", "shared", "param", "local"};

unsigned index(ParamType::Scalar s) { return static_cast<unsigned>(s) - 1; }

}  // namespace

uint32_t ParamType::code() const {
  return static_cast<uint32_t>(scalar) | uint32_t{lanes} << 8 | static_cast<uint32_t>(space) << 16;
}

std::optional<ParamType> ParamType::decode(uint32_t code) {
  uint32_t s = code & 0xFF, lanes = (code >> 8) & 0xFF, space = (code >> 16) & 0xFF;
  if (code >> 24 || s < 1 || s > kScalarNames.size() || space >= kSpaceNames.size()) return std::nullopt;
  ParamType t{static_cast<Scalar>(s), static_cast<uint8_t>(lanes), static_cast<Space>(space)};
  if (isFp8(t.scalar)) return std::nullopt;  // element types only
  bool pointer = t.scalar == Scalar::Ptr;
  if (pointer != (t.space != Space::None)) return std::nullopt;
  bool vector = (lanes == 2 || lanes == 4) && !pointer && t.scalar != Scalar::Pred && t.scalar != Scalar::TensorMap;
  if (lanes != 1 && !vector) return std::nullopt;
  return t;
}

std::string ParamType::name() const {
  if (!decode(code())) return "<invalid parameter type " + std::to_string(code()) + ">";
  if (isPointer()) return "ptr." + std::string(kSpaceNames[static_cast<unsigned>(space)]);
  std::string s(kScalarNames[index(scalar)]);
  return lanes == 1 ? s : "v" + std::to_string(lanes) + "." + s;
}

unsigned ParamType::integerBytes() const {
  if (lanes != 1 || scalar < Scalar::B8 || scalar > Scalar::S64) return 0;
  return 1u << ((static_cast<unsigned>(scalar) - static_cast<unsigned>(Scalar::B8)) % 4);
}

unsigned scalarBytes(ParamType::Scalar s) {
  using S = ParamType::Scalar;
  if (s >= S::B8 && s <= S::S64) return 1u << ((static_cast<unsigned>(s) - static_cast<unsigned>(S::B8)) % 4);
  if (isFp8(s)) return 1;
  return s == S::F16 || s == S::BF16 ? 2 : s == S::F32 ? 4 : s == S::F64 ? 8 : 0;
}

bool isFp8(ParamType::Scalar s) { return s == ParamType::Scalar::E4M3 || s == ParamType::Scalar::E5M2; }

bool isElementType(ParamType::Scalar s) {
  const unsigned v = static_cast<unsigned>(s);
  return v >= 1 && v <= kScalarNames.size() && s != ParamType::Scalar::Ptr && s != ParamType::Scalar::TensorMap;
}

std::string elementName(ParamType::Scalar s) {
  if (!isElementType(s)) return "<invalid element type " + std::to_string(static_cast<unsigned>(s)) + ">";
  return std::string(kScalarNames[index(s)]);
}

bool ParamType::isSignedInteger() const { return lanes == 1 && scalar >= Scalar::S8 && scalar <= Scalar::S64; }

}  // namespace tn::bundle
