// Value types of the kernel IR: scalars, small vectors and address-space-qualified pointers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tn::ir {

enum class Scalar : uint8_t {
  Pred,
  B8, B16, B32, B64,
  U8, U16, U32, U64,
  S8, S16, S32, S64,
  F16, BF16, F32, F64,
  Ptr,
  TensorMap,  // `tmap`: a kernel parameter holding a TMA tensor map (128 opaque bytes; docs/hopper.md)
};

enum class AddrSpace : uint8_t { Generic, Global, Shared, Param, Local };

// A type is a scalar kind, a lane count (1, 2 or 4; f32 also 8, 16, 32, 64 or 128: the wide
// wgmma accumulators, allowed only where the verifier says) and, for pointers, an address space.
struct Type {
  Scalar scalar = Scalar::Pred;
  uint8_t lanes = 1;
  AddrSpace space = AddrSpace::Generic;

  static constexpr Type of(Scalar s, uint8_t lanes = 1) { return Type{s, lanes, AddrSpace::Generic}; }
  static constexpr Type ptr(AddrSpace as) { return Type{Scalar::Ptr, 1, as}; }
  static constexpr Type pred() { return of(Scalar::Pred); }
  static constexpr Type u32() { return of(Scalar::U32); }
  static constexpr Type s32() { return of(Scalar::S32); }
  static constexpr Type u64() { return of(Scalar::U64); }
  static constexpr Type f32() { return of(Scalar::F32); }

  bool operator==(const Type&) const = default;

  bool isVector() const { return lanes > 1; }
  bool isWide() const { return lanes > 4; }  // a wgmma accumulator vector (v8.f32 .. v128.f32)
  bool isPred() const { return scalar == Scalar::Pred && lanes == 1; }
  bool isPtr() const { return scalar == Scalar::Ptr; }
  bool isFloat() const;     // scalar f16/bf16/f32/f64 (any lane count)
  bool isInt() const;       // u*/s* (not b*)
  bool isSigned() const;    // s*
  bool isBits() const;      // b*
  Type element() const { return Type{scalar, 1, space}; }
  Type withLanes(uint8_t n) const { return Type{scalar, n, space}; }
  unsigned bits() const;    // bit width of one lane; pointers: 64, or 32 for shared/local
  unsigned bytes() const { return bits() * lanes / 8; }
};

unsigned scalarBits(Scalar s);
std::string_view scalarName(Scalar s);
std::string_view spaceName(AddrSpace as);
std::string typeName(Type t);  // text form: "f32", "v4.f32", "ptr.global"
std::optional<Type> parseType(std::string_view text);
// Unsigned/signed/bits integer scalar of the given width, or nullopt.
std::optional<Type> intType(unsigned bits, char kind /* 'u', 's' or 'b' */);

}  // namespace tn::ir
