// The simulator's tensor-map format: what the simulated driver's cuTensorMapEncodeTiled writes
// into the 128 opaque bytes of a CUtensorMap, and what the interpreter's cp.async.bulk.tensor
// reads back (docs/hopper.md §3). The hardware format is undocumented; this one is truenoc's own
// and never leaves the process. The enumerations keep the driver's numbering (TC§5.1).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>

namespace tn::interp {

inline constexpr uint32_t kTensorMapMagic = 0x50414D54u;  // "TMAP"
inline constexpr size_t kTensorMapBytes = 128;
using TensorMapBytes = std::array<std::byte, kTensorMapBytes>;

struct TensorMapDesc {
  uint32_t magic = kTensorMapMagic;
  uint8_t dataType = 0;      // CUtensorMapDataType: 6 f16, 7 f32, 9 bf16, ...
  uint8_t rank = 0;          // 1 .. 5
  uint8_t interleave = 0;    // CUtensorMapInterleave: 0 none
  uint8_t swizzle = 0;       // CUtensorMapSwizzle: 0 none, 1 32B, 2 64B, 3 128B
  uint8_t l2Promotion = 0;   // CUtensorMapL2promotion
  uint8_t oobFill = 0;       // CUtensorMapFloatOOBfill: 0 zeros
  uint8_t elementBytes = 0;  // bytes of one element of dataType
  uint8_t reserved = 0;
  uint64_t address = 0;      // the global address (the interpreter's tagged pointer)
  uint64_t dims[5] = {};     // elements per dimension, innermost first
  uint64_t strides[4] = {};  // byte strides of dimensions 1 .. rank-1
  uint32_t box[5] = {};      // box extent per dimension, in elements
  uint8_t elementStrides[5] = {};
};
static_assert(sizeof(TensorMapDesc) <= kTensorMapBytes);

inline TensorMapBytes encodeTensorMap(const TensorMapDesc& d) {
  TensorMapBytes out{};
  std::memcpy(out.data(), &d, sizeof d);
  return out;
}

// The description stored in `bytes`, or nullopt when they were not written by encodeTensorMap
// (a tensor map the simulated driver never encoded).
inline std::optional<TensorMapDesc> decodeTensorMap(const TensorMapBytes& bytes) {
  TensorMapDesc d;
  std::memcpy(&d, bytes.data(), sizeof d);
  if (d.magic != kTensorMapMagic || d.rank < 1 || d.rank > 5) return std::nullopt;
  return d;
}

}  // namespace tn::interp
