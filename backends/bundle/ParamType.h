// A kernel parameter's type as bundles record it: a scalar kind, a lane count (1, 2 or 4) and, for
// pointers, an address space. It is stored in the manifest as one number (code()), and decode()
// is the one place that number is read back: launch rules, the runtime, embed and inspect all
// take the decoded value, never a type name. Part of the vocabulary library (truenoc_vocab).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tn::bundle {

struct ParamType {
  // Numbered as the manifest stores them: never renumber, only append.
  enum class Scalar : uint8_t {
    Pred = 1,
    B8, B16, B32, B64,
    U8, U16, U32, U64,
    S8, S16, S32, S64,
    F16, BF16, F32, F64,
    Ptr,
    TensorMap,  // `tmap`: filled by the runtime from the launch rule's tensor-map declaration
    // fp8 codes (docs/kernels.md, "fp8"): element types only, a pointer's elements (bundle format
    // 10), never a parameter's own type: the kernel moves them as bytes.
    E4M3, E5M2,
  };
  enum class Space : uint8_t { None = 0, Generic, Global, Shared, Param, Local };

  Scalar scalar = Scalar::U32;
  uint8_t lanes = 1;           // 1, 2 or 4; pointers and predicates: 1
  Space space = Space::None;   // pointers only

  // The manifest's encoding: scalar | lanes << 8 | space << 16.
  uint32_t code() const;
  // The one decoder: the type of a manifest code, or nullopt for a code no truenoc writes.
  static std::optional<ParamType> decode(uint32_t code);
  bool valid() const { return decode(code()).has_value(); }

  // The IR's spelling: "u32", "v4.f32", "ptr.global".
  std::string name() const;
  bool isPointer() const { return scalar == Scalar::Ptr; }
  // Byte width of an integer or bits scalar (u/s/b, one lane), 0 for anything else: the types
  // a launch rule may read.
  unsigned integerBytes() const;
  bool isSignedInteger() const;

  bool operator==(const ParamType& o) const { return scalar == o.scalar && lanes == o.lanes && space == o.space; }
  bool operator!=(const ParamType& o) const { return !(*this == o); }
};

// Bytes of one element of scalar s (b/u/s 8..64, f16, bf16, f32, f64, e4m3, e5m2); 0 for pred,
// ptr and tmap.
unsigned scalarBytes(ParamType::Scalar s);

// A pointer's element type as inspect, embed and errors spell it ("bf16", "e4m3"); the scalars a
// pointer may point to are every one but ptr and tmap.
std::string elementName(ParamType::Scalar s);
bool isElementType(ParamType::Scalar s);
bool isFp8(ParamType::Scalar s);

}  // namespace tn::bundle
