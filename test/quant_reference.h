// A C++ reference for ggml's quantized formats, written from ../shared/docs/ggml-quant-formats.md
// and docs/quant-formats.md: the block layouts, dequantization as ggml's reference computes it (bit for bit), q8_1
// quantization, random blocks, and the mins that error bounds need. Shared by the
// quantized-weight tests (test/library_quant_test.cpp) and the mixture-of-experts tests
// (test/library_moe_test.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ir/Float16.h"

namespace tn::quantref {

struct Format {
  const char* name;
  unsigned qk, bytes;
  std::vector<unsigned> halves;  // byte offsets of the block's half fields
  bool e8m0 = false;             // byte 0 is an E8M0 scale (mxfp4)
};

// The formats of ../shared/testdata/quant first (tests name them by index), then those whose
// vectors are in test/data/quant (docs/quant-formats.md).
inline const Format kFormats[] = {
    {"q4_0", 32, 18, {0}},   {"q8_0", 32, 34, {0}},      {"q4_k", 256, 144, {0, 2}}, {"q5_k", 256, 176, {0, 2}},
    {"q6_k", 256, 210, {208}}, {"q4_1", 32, 20, {0, 2}}, {"q5_0", 32, 22, {0}},      {"q5_1", 32, 24, {0, 2}},
    {"iq4_nl", 32, 18, {0}}, {"mxfp4", 32, 17, {}, true},     {"iq4_xs", 256, 136, {0}},
    {"q2_k", 256, 84, {80, 82}}, {"q3_k", 256, 110, {108}},
};
constexpr size_t kSharedFormats = 5;  // kFormats[0 .. 5) have vectors in ../shared/testdata/quant

// Formats whose weights are d q + m (q4_1, q5_1) or D q - M (q4_k, q5_k): a min apart from the scale.
inline bool hasMins(const Format& f) {
  const std::string n = f.name;
  return n == "q4_1" || n == "q5_1" || n == "q2_k" || n == "q4_k" || n == "q5_k";
}

// ggml's kvalues_iq4nl and kvalues_mxfp4 (E2M1's values doubled).
inline const int8_t kIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
inline const int8_t kMxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// ggml_e8m0_to_fp32_half: 2^(e - 128), subnormal for e < 2.
inline float e8m0Half(uint8_t e) {
  uint32_t bits = e < 2 ? 0x00200000u << e : uint32_t(e - 1) << 23;
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

inline float h2f(const uint8_t* p) { return tn::ir::f16ToF32(uint16_t(p[0] | p[1] << 8)); }

// D*q - M rounded twice, as ggml's reference build (no FMA) computes it.
inline float mulSub(float d, float q, float m) {
  volatile float p = d * q;
  return p - m;
}

// q*d + m rounded twice (q4_1, q5_1), likewise.
inline float mulAdd(float q, float d, float m) {
  volatile float p = q * d;
  return p + m;
}

inline void refDequantBlock(const Format& f, const uint8_t* b, float* y) {
  std::string n = f.name;
  if (n == "q4_0") {
    float d = h2f(b);
    for (int j = 0; j < 16; ++j) {
      y[j] = float((b[2 + j] & 15) - 8) * d;
      y[j + 16] = float((b[2 + j] >> 4) - 8) * d;
    }
  } else if (n == "q4_1" || n == "q5_1" || n == "q5_0") {
    // Element j's quant: nibble j % 16 of qs (low for j < 16), and for q5 bit j of qh.
    const bool min = n != "q5_0", five = n != "q4_1";
    float d = h2f(b), m = min ? h2f(b + 2) : 0.0f;
    const uint8_t* qh = b + (min ? 4 : 2);
    const uint8_t* qs = b + (n == "q4_1" ? 4 : n == "q5_0" ? 6 : 8);
    uint32_t h = uint32_t(qh[0]) | uint32_t(qh[1]) << 8 | uint32_t(qh[2]) << 16 | uint32_t(qh[3]) << 24;
    for (int j = 0; j < 32; ++j) {
      int q = j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
      if (five) q |= int((h >> j) & 1) << 4;
      y[j] = min ? mulAdd(float(q), d, m) : float(q - 16) * d;
    }
  } else if (n == "iq4_nl" || n == "mxfp4") {
    const bool mx = n == "mxfp4";
    const int8_t* table = mx ? kMxfp4 : kIq4nl;
    float d = mx ? e8m0Half(b[0]) : h2f(b);
    const uint8_t* qs = b + (mx ? 1 : 2);
    for (int j = 0; j < 32; ++j) y[j] = float(table[j < 16 ? qs[j] & 15 : qs[j - 16] >> 4]) * d;
  } else if (n == "q2_k" || n == "q3_k") {
    // Value i: n = i / 128, j = (i % 128) / 32, l = i % 32; 2 bits (qs[32n + l] >> 2j) & 3.
    const bool q2 = n == "q2_k";
    const uint8_t* qs = b + (q2 ? 16 : 32);
    for (int i = 0; i < 256; ++i) {
      const int h = i / 128, j = (i % 128) / 32, l = i % 32, t = i / 16;
      int q = (qs[32 * h + l] >> (2 * j)) & 3;
      if (q2) {
        volatile float dl = h2f(b + 80) * float(b[t] & 15), ml = h2f(b + 82) * float(b[t] >> 4);
        y[i] = mulSub(dl, float(q), ml);
      } else {
        q += ((b[l] >> (4 * h + j)) & 1) << 2;
        const int sc = ((b[96 + t % 8] >> (4 * (t / 8))) & 15) | (((b[104 + t % 4] >> (2 * (t / 4))) & 3) << 4);
        volatile float dl = h2f(b + 108) * float(sc - 32);
        y[i] = dl * float(q - 4);
      }
    }
  } else if (n == "iq4_xs") {
    float d = h2f(b);
    const int scalesH = b[2] | b[3] << 8;
    for (int s = 0; s < 8; ++s) {
      const int ls = ((b[4 + s / 2] >> (4 * (s % 2))) & 15) | (((scalesH >> (2 * s)) & 3) << 4);
      volatile float dl = d * float(ls - 32);
      const uint8_t* qs = b + 8 + 16 * s;
      for (int j = 0; j < 32; ++j) y[32 * s + j] = dl * float(kIq4nl[j < 16 ? qs[j] & 15 : qs[j - 16] >> 4]);
    }
  } else if (n == "q8_0") {
    float d = h2f(b);
    for (int j = 0; j < 32; ++j) y[j] = float(int8_t(b[2 + j])) * d;
  } else if (n == "q4_k" || n == "q5_k") {
    float d = h2f(b), dmin = h2f(b + 2);
    const uint8_t* sc = b + 4;
    bool q5 = n == "q5_k";
    const uint8_t* qh = b + 16;
    const uint8_t* qs = b + (q5 ? 48 : 16);
    for (int i = 0; i < 256; ++i) {
      int s = i / 32, l = i % 32;
      int scale, min;
      if (s < 4) {
        scale = sc[s] & 63;
        min = sc[s + 4] & 63;
      } else {
        scale = (sc[s + 4] & 15) | ((sc[s - 4] >> 6) << 4);
        min = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
      }
      int byte = qs[32 * (s / 2) + l];
      int q = (s % 2 == 0) ? (byte & 15) : (byte >> 4);
      if (q5) q += 16 * ((qh[l] >> s) & 1);
      float D = d * float(scale), M = dmin * float(min);
      y[i] = mulSub(D, float(q), M);
    }
  } else {  // q6_k
    float d = h2f(b + 208);
    for (int i = 0; i < 256; ++i) {
      int h = i / 128, r = i % 128, k = r / 32, l = r % 32;
      int lb = b[64 * h + 32 * (k & 1) + l];
      int lo = k < 2 ? (lb & 15) : (lb >> 4);
      int hi = (b[128 + 32 * h + l] >> (2 * k)) & 3;
      int q = (lo | (hi << 4)) - 32;
      volatile float ds = d * float(int8_t(b[192 + i / 16]));
      y[i] = ds * float(q);
    }
  }
}

inline std::vector<float> refDequant(const Format& f, const std::vector<uint8_t>& q) {
  size_t blocks = q.size() / f.bytes;
  std::vector<float> y(blocks * f.qk);
  for (size_t b = 0; b < blocks; ++b) refDequantBlock(f, q.data() + b * f.bytes, y.data() + b * f.qk);
  return y;
}

// ggml's quantize_row_q8_1_ref.
inline std::vector<uint8_t> refQuantizeQ81(const std::vector<float>& x) {
  std::vector<uint8_t> out(x.size() / 32 * 36);
  for (size_t b = 0; b < x.size() / 32; ++b) {
    const float* v = x.data() + 32 * b;
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(v[j]));
    float d = amax / 127;
    float id = d != 0 ? 1.0f / d : 0.0f;
    int sum = 0;
    uint8_t* o = out.data() + 36 * b;
    for (int j = 0; j < 32; ++j) {
      volatile float t = v[j] * id;
      int q = int(std::roundf(t));
      o[4 + j] = uint8_t(int8_t(q));
      sum += q;
    }
    volatile float s = float(sum) * d;
    uint16_t dh = tn::ir::f32ToF16(d), sh = tn::ir::f32ToF16(s);
    o[0] = uint8_t(dh), o[1] = uint8_t(dh >> 8), o[2] = uint8_t(sh), o[3] = uint8_t(sh >> 8);
  }
  return out;
}

// A random half: mostly normal values of either sign, sometimes 0 or a subnormal.
inline uint16_t randomHalf(std::mt19937& rng) {
  unsigned pick = rng() % 16;
  if (pick == 0) return 0;
  if (pick == 1) return uint16_t((rng() & 0x83FF) | 1);
  float v = std::ldexp(float(rng() % 4096 + 1) / 4096.0f, -int(rng() % 10));
  return tn::ir::f32ToF16(rng() % 2 ? -v : v);
}

// Random blocks: random quant bytes, random halves, and an E8M0 scale of 2^-18 .. 2^-3 (the
// dequantize test sets the extremes itself).
inline std::vector<uint8_t> randomBlocks(std::mt19937& rng, const Format& f, size_t blocks) {
  std::vector<uint8_t> q(blocks * f.bytes);
  for (uint8_t& b : q) b = uint8_t(rng());
  for (size_t b = 0; b < blocks; ++b) {
    for (unsigned off : f.halves) {
      uint16_t h = randomHalf(rng);
      q[b * f.bytes + off] = uint8_t(h), q[b * f.bytes + off + 1] = uint8_t(h >> 8);
    }
    if (f.e8m0) q[b * f.bytes] = uint8_t(110 + rng() % 16);
  }
  return q;
}

// The values of q8_1 blocks: float(q) * fp32(d).
inline std::vector<float> dequantQ81(const std::vector<uint8_t>& blocks) {
  std::vector<float> x(blocks.size() / 36 * 32);
  for (size_t c = 0; c < x.size(); ++c) {
    const uint8_t* b = blocks.data() + 36 * (c / 32);
    x[c] = float(int8_t(b[4 + c % 32])) * h2f(b);
  }
  return x;
}

// |M| of each element for the formats with a min (dmin * m for the k-quants, m for q4_1 and q5_1;
// 0 for the other formats): the dequantized weight is round(D q) - M (or + m), whose two terms the
// q8_1 path keeps apart.
inline std::vector<float> refMins(const Format& f, const std::vector<uint8_t>& q) {
  std::vector<float> mins(q.size() / f.bytes * f.qk, 0.0f);
  if (!hasMins(f)) return mins;
  if (f.qk == 32) {  // q4_1, q5_1: m, the half at byte 2
    for (size_t i = 0; i < mins.size(); ++i) mins[i] = std::fabs(h2f(q.data() + i / 32 * f.bytes + 2));
    return mins;
  }
  if (std::string(f.name) == "q2_k") {  // dmin (the half at byte 82) times the high nibble of scale i / 16
    for (size_t i = 0; i < mins.size(); ++i) {
      const uint8_t* blk = q.data() + i / 256 * f.bytes;
      mins[i] = std::fabs(h2f(blk + 82) * float(blk[i % 256 / 16] >> 4));
    }
    return mins;
  }
  for (size_t b = 0; b < q.size() / f.bytes; ++b) {
    const uint8_t* blk = q.data() + b * f.bytes;
    const uint8_t* sc = blk + 4;
    for (int s = 0; s < 8; ++s) {
      int m = s < 4 ? sc[s + 4] & 63 : (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
      for (int l = 0; l < 32; ++l) mins[b * 256 + 32 * s + l] = std::fabs(h2f(blk + 2) * float(m));
    }
  }
  return mins;
}

}  // namespace tn::quantref
