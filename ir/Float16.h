// Bit-exact f16 and bf16 conversions (IEEE round-to-nearest-even and PTX's other modes).
#pragma once

#include <cstdint>

namespace tn::ir {

enum class RoundMode : uint8_t { NearestEven, Zero, Down, Up };

uint16_t f32ToF16(float f, RoundMode mode = RoundMode::NearestEven);
uint16_t f32ToBf16(float f, RoundMode mode = RoundMode::NearestEven);
uint16_t f64ToF16(double d, RoundMode mode = RoundMode::NearestEven);
uint16_t f64ToBf16(double d, RoundMode mode = RoundMode::NearestEven);
float f16ToF32(uint16_t h);
float bf16ToF32(uint16_t h);

}  // namespace tn::ir
