// A reference for mma and ldmatrix that the interpreter's tests compare with: whole matrices
// gathered from per-lane registers with the inverse layout formulas ("element X is held by lane L
// in register R"), the product D = A·B + C computed element by element, and D scattered back the
// same way. The interpreter goes the other way (lane and register to element), so the two agree
// only when both follow PTX's tables. Float sums use docs/interpreter.md's order: C first, then one
// f32 fma per k; with small-integer inputs every order gives the same bits.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "ir/Float16.h"
#include "ir/Float8.h"

namespace tn::mmaref {

// E4m3E5m2F32, E5m2E4m3F32: the mixed fp8 forms, A's format first.
enum class Form { Bf16F32, F16F32, F16F16, Tf32F32, S8S32, U8S32, E4m3F32, E5m2F32, E4m3E5m2F32, E5m2E4m3F32 };

inline bool isFp8(Form f) {
  return f == Form::E4m3F32 || f == Form::E5m2F32 || f == Form::E4m3E5m2F32 || f == Form::E5m2E4m3F32;
}

// Elements per 32-bit A/B register: tf32 1, f16/bf16 2, s8/u8 and fp8 codes 4 (K is 8 times that).
inline unsigned perReg(Form f) {
  return f == Form::Tf32F32 ? 1 : (f == Form::S8S32 || f == Form::U8S32 || isFp8(f)) ? 4 : 2;
}

// a[4·lane + r], b[2·lane + r] and c[4·lane + r] are the registers of the fragments (an f16
// accumulator uses c[4·lane + 0..1]). Returns 4 words per lane (2 used for f16).
inline std::vector<uint32_t> mma(Form f, const std::vector<uint32_t>& a, const std::vector<uint32_t>& b,
                                 const std::vector<uint32_t>& c) {
  const unsigned e = perReg(f), K = 8 * e, width = 32 / e;
  const uint32_t mask = width == 32 ? 0xFFFFFFFFu : (1u << width) - 1;
  // A[m][k] (16 x K): lane 4(m%8) + (k%4e)/e, register m/8 + 2(k/4e), element k%e.
  auto elemA = [&](unsigned m, unsigned k) {
    unsigned lane = 4 * (m % 8) + (k % (4 * e)) / e, r = m / 8 + 2 * (k / (4 * e));
    return (a[4 * lane + r] >> (width * (k % e))) & mask;
  };
  // B[k][n] (K x 8): lane 4n + (k%4e)/e, register k/4e, element k%e.
  auto elemB = [&](unsigned k, unsigned n) {
    unsigned lane = 4 * n + (k % (4 * e)) / e, r = k / (4 * e);
    return (b[2 * lane + r] >> (width * (k % e))) & mask;
  };
  // C[m][n]: lane 4(m%8) + n/2, element 2(m/8) + n%2.
  auto cLane = [](unsigned m, unsigned n) { return 4 * (m % 8) + n / 2; };
  auto cElem = [](unsigned m, unsigned n) { return 2 * (m / 8) + n % 2; };
  // An element of A (b false) or B (b true).
  auto value = [&](uint32_t bits, bool b) -> float {
    auto code = [&](ir::Fp8Format format) {
      return static_cast<float>(ir::fp8Value(format, static_cast<uint8_t>(bits)));
    };
    switch (f) {
      case Form::Bf16F32: return std::bit_cast<float>(bits << 16);
      case Form::Tf32F32: return std::bit_cast<float>(bits & 0xFFFFE000u);
      case Form::E4m3F32: return code(ir::Fp8Format::E4M3);
      case Form::E5m2F32: return code(ir::Fp8Format::E5M2);
      case Form::E4m3E5m2F32: return code(b ? ir::Fp8Format::E5M2 : ir::Fp8Format::E4M3);
      case Form::E5m2E4m3F32: return code(b ? ir::Fp8Format::E4M3 : ir::Fp8Format::E5M2);
      default: return ir::f16ToF32(static_cast<uint16_t>(bits));
    }
  };
  std::vector<uint32_t> d(128, 0);
  for (unsigned m = 0; m < 16; ++m)
    for (unsigned n = 0; n < 8; ++n) {
      unsigned lane = cLane(m, n), i = cElem(m, n);
      if (f == Form::S8S32 || f == Form::U8S32) {
        int64_t sum = static_cast<int32_t>(c[4 * lane + i]);
        for (unsigned k = 0; k < K; ++k) {
          int64_t x = elemA(m, k), y = elemB(k, n);
          if (f == Form::S8S32) x = static_cast<int8_t>(x), y = static_cast<int8_t>(y);
          sum += x * y;
        }
        d[4 * lane + i] = static_cast<uint32_t>(sum);  // wraps around
        continue;
      }
      float sum = f == Form::F16F16 ? ir::f16ToF32(static_cast<uint16_t>(c[4 * lane + i / 2] >> (16 * (i % 2))))
                                    : std::bit_cast<float>(c[4 * lane + i]);
      for (unsigned k = 0; k < K; ++k) sum = std::fma(value(elemA(m, k), false), value(elemB(k, n), true), sum);
      if (f == Form::F16F16)
        d[4 * lane + i / 2] |= uint32_t{ir::f32ToF16(sum)} << (16 * (i % 2));
      else
        d[4 * lane + i] = std::bit_cast<uint32_t>(sum);
    }
  return d;
}

// ldmatrix of `count` matrices: rows[8j + ρ][κ] is element κ of row ρ of matrix j. Returns 4
// words per lane: M_j[ρ][κ] goes to register j of lane 4ρ + κ/2, half κ%2, or with trans to lane
// 4κ + ρ/2, half ρ%2.
inline std::vector<uint32_t> ldmatrix(const std::vector<std::vector<uint16_t>>& rows, unsigned count, bool trans) {
  std::vector<uint32_t> d(128, 0);
  for (unsigned j = 0; j < count; ++j)
    for (unsigned rho = 0; rho < 8; ++rho)
      for (unsigned kappa = 0; kappa < 8; ++kappa) {
        unsigned lane = trans ? 4 * kappa + rho / 2 : 4 * rho + kappa / 2;
        unsigned half = trans ? rho % 2 : kappa % 2;
        d[4 * lane + j] |= uint32_t{rows[8 * j + rho][kappa]} << (16 * half);
      }
  return d;
}

}  // namespace tn::mmaref
