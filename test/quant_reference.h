// A C++ reference for ggml's quantized formats, written from ../shared/docs/ggml-quant-formats.md
// and docs/quant-formats.md: the block layouts, dequantization as ggml's reference computes it (bit for bit), q8_1
// quantization, random blocks, and the mins that error bounds need; the grid formats decode
// through kernels/QuantGrids.h. Shared by the quantized-weight tests (test/library_quant_test.cpp) and the
// mixture-of-experts tests (test/library_moe_test.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ir/Float16.h"
#include "kernels/QuantGrids.h"

namespace tn::quantref {

struct Format {
  const char* name;
  unsigned qk, bytes;
  std::vector<unsigned> halves;  // byte offsets of the block's half fields
  bool e8m0 = false;             // byte 0 is an E8M0 scale (mxfp4)
  int splitHalf = -1;            // iq1_m: byte offset of four 16-bit words whose top nibbles make the half d
  bool ue4m3 = false;            // bytes 0 .. 3 are UE4M3 scales, one per 16 values (nvfp4)
};

// The formats of ../shared/testdata/quant first (tests name them by index), then those whose
// vectors are in test/data/quant (docs/quant-formats.md): the grid formats, then the ternary and
// 1- and 2-bit formats and nvfp4.
inline const Format kFormats[] = {
    {"q4_0", 32, 18, {0}},   {"q8_0", 32, 34, {0}},      {"q4_k", 256, 144, {0, 2}}, {"q5_k", 256, 176, {0, 2}},
    {"q6_k", 256, 210, {208}}, {"q4_1", 32, 20, {0, 2}}, {"q5_0", 32, 22, {0}},      {"q5_1", 32, 24, {0, 2}},
    {"iq4_nl", 32, 18, {0}}, {"mxfp4", 32, 17, {}, true},     {"iq4_xs", 256, 136, {0}},
    {"q2_k", 256, 84, {80, 82}}, {"q3_k", 256, 110, {108}},
    {"iq2_xxs", 256, 66, {0}}, {"iq2_xs", 256, 74, {0}},  {"iq2_s", 256, 82, {0}},  {"iq3_xxs", 256, 98, {0}},
    {"iq3_s", 256, 110, {0}},  {"iq1_s", 256, 50, {0}},   {"iq1_m", 256, 56, {}, false, 48},
    {"q1_0", 128, 18, {0}},    {"q2_0", 64, 18, {0}},     {"tq1_0", 256, 54, {52}}, {"tq2_0", 256, 66, {64}},
    {"nvfp4", 64, 36, {}, false, -1, true},
};
constexpr size_t kFirstGridFormat = 13, kEndGridFormat = 20;  // kFormats[13 .. 20): iq2_xxs .. iq1_m
constexpr size_t kSharedFormats = 5;  // kFormats[0 .. 5) have vectors in ../shared/testdata/quant

// Formats whose weights are d q + m (q4_1, q5_1) or D q - M (q4_k, q5_k): a min apart from the scale.
inline bool hasMins(const Format& f) {
  const std::string n = f.name;
  return n == "q4_1" || n == "q5_1" || n == "q2_k" || n == "q4_k" || n == "q5_k";
}

// ggml's kvalues_iq4nl and kvalues_mxfp4 (E2M1's values doubled; nvfp4's too).
inline const int8_t kIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
inline const int8_t kMxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// ggml_e8m0_to_fp32_half: 2^(e - 128), subnormal for e < 2.
inline float e8m0Half(uint8_t e) {
  uint32_t bits = e < 2 ? 0x00200000u << e : uint32_t(e - 1) << 23;
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

// ggml_ue4m3_to_fp32: half the E4M3 value of bits 0..6, bit 7 ignored, except that 0x7F (E4M3's NaN) is 0
// and 0xFF is not (240). Exact: a subnormal m 2^-10, else (8 + m) 2^(e - 11).
inline float ue4m3Half(uint8_t x) {
  if (x == 0 || x == 0x7F) return 0.0f;
  const int e = (x >> 3) & 15, m = x & 7;
  return e == 0 ? std::ldexp(float(m), -10) : std::ldexp(float(8 + m), e - 11);
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

inline uint16_t le16(const uint8_t* p) { return uint16_t(p[0] | p[1] << 8); }
inline uint32_t le32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

// iq1_m's d: the top nibbles of its four scale words, lowest word first.
inline float iq1mScale(const uint8_t* scales) {
  uint16_t h = 0;
  for (int k = 0; k < 4; ++k) h |= uint16_t(scales[2 * k + 1] >> 4) << 4 * k;
  return tn::ir::f16ToF32(h);
}

inline bool isGridFormat(const Format& f) {
  return std::any_of(kFormats + kFirstGridFormat, kFormats + kEndGridFormat,
                     [&](const Format& g) { return std::string(g.name) == f.name; });
}

// The grid formats: group g (values 8g .. 8g + 7, in sub-block s = g / 4 of 32 values) is one grid entry (IQ3:
// two of 4 values). IQ2 and IQ3 values are (dl * grid) * (+-1) with a sign bit per value; IQ1 values are
// dl * (grid + delta) with delta = +-1/8 per group. dl is computed as ggml does, per 32 or per 16 values.
inline void refDequantGrid(const std::string& n, const uint8_t* b, float* y) {
  namespace qg = tn::quantgrid;
  const float d = n == "iq1_m" ? iq1mScale(b + 48) : h2f(b);
  for (int g = 0; g < 32; ++g) {
    const int s = g / 4, l = g % 4;
    float* out = y + 8 * g;
    if (n == "iq1_s" || n == "iq1_m") {
      float dl;
      unsigned idx;
      bool negDelta;
      if (n == "iq1_s") {  // qh word s: index bits 8..10 of group l at 3l, scale at 12, delta sign at 15
        const unsigned qh = le16(b + 34 + 2 * s);
        dl = d * float(2 * ((qh >> 12) & 7) + 1);
        idx = b[2 + g] | ((qh >> 3 * l) & 7) << 8;
        negDelta = qh & 0x8000;
      } else {  // nibble g % 2 of qh[g / 2]: index bits 8..10, delta sign; 3-bit scales per 16 values
        const unsigned nib = (b[32 + g / 2] >> 4 * (g % 2)) & 15;
        const unsigned word = le16(b + 48 + 2 * (s / 2));
        dl = d * float(2 * ((word >> (6 * (s % 2) + 3 * (l / 2))) & 7) + 1);
        idx = b[g] | (nib & 7) << 8;
        negDelta = nib & 8;
      }
      const float delta = negDelta ? -0.125f : 0.125f;
      const uint64_t grid = qg::iq1sEntry(idx);
      for (int j = 0; j < 8; ++j) out[j] = dl * (float(int8_t(grid >> 8 * j)) + delta);
      continue;
    }
    float dl;
    uint64_t grid;
    unsigned signs;        // bit j negates value j
    if (n == "iq2_xxs") {  // sub-block s: 4 index bytes, then a word of 4 sign indices and the scale
      const uint32_t w = le32(b + 6 + 8 * s);
      dl = d * (0.5f + float(w >> 28)) * 0.25f;
      grid = qg::iq2xxsEntry(b[2 + 8 * s + l]);
      signs = qg::ksign((w >> 7 * l) & 127);
    } else if (n == "iq2_xs") {  // a 16-bit word per group: 9 index bits, 7 sign bits
      const unsigned w = le16(b + 2 + 2 * g);
      dl = d * (0.5f + float((b[66 + s] >> 4 * (l / 2)) & 15)) * 0.25f;
      grid = qg::iq2xsEntry(w & 511);
      signs = qg::ksign(w >> 9);
    } else if (n == "iq2_s") {  // index bytes, sign bytes, qh (index bits 8, 9), scales
      dl = d * (0.5f + float((b[74 + s] >> 4 * (l / 2)) & 15)) * 0.25f;
      grid = qg::iq2sEntry(b[2 + g] | ((b[66 + s] >> 2 * l) & 3) << 8);
      signs = b[34 + g];
    } else if (n == "iq3_xxs") {  // index bytes, then per sub-block a word of 4 sign indices and the scale
      const uint32_t w = le32(b + 66 + 4 * s);
      dl = d * (0.5f + float(w >> 28)) * 0.5f;
      grid = qg::iq3xxsEntry(b[2 + 2 * g]) | uint64_t(qg::iq3xxsEntry(b[3 + 2 * g])) << 32;
      signs = qg::ksign((w >> 7 * l) & 127);
    } else {  // iq3_s: index bytes, qh (index bit 8 of each entry), sign bytes, scale nibbles
      const unsigned qh = b[66 + s];
      dl = d * float(1 + 2 * ((b[106 + s / 2] >> 4 * (s % 2)) & 15));
      grid = qg::iq3sEntry(b[2 + 2 * g] | ((qh >> 2 * l) & 1) << 8) |
             uint64_t(qg::iq3sEntry(b[3 + 2 * g] | ((qh >> (2 * l + 1)) & 1) << 8)) << 32;
      signs = b[74 + g];
    }
    for (int j = 0; j < 8; ++j) out[j] = dl * float(uint8_t(grid >> 8 * j)) * ((signs >> j) & 1 ? -1.0f : 1.0f);
  }
}

inline void refDequantBlock(const Format& f, const uint8_t* b, float* y) {
  std::string n = f.name;
  if (isGridFormat(f)) {
    refDequantGrid(n, b, y);
  } else if (n == "q4_0") {
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
  } else if (n == "q1_0") {  // value v: bit v % 8 of byte 2 + v / 8, d when set, else -d
    const float d = h2f(b);
    for (int v = 0; v < 128; ++v) y[v] = (b[2 + v / 8] >> v % 8) & 1 ? d : -d;
  } else if (n == "q2_0" || n == "tq2_0") {
    // 2-bit codes q, (q - 1) d: q2_0's value v at bits 2(v % 4) of byte 2 + v / 4; tq2_0's (n = v / 128,
    // j = (v % 128) / 32, l = v % 32) at bits 2j of byte 32n + l, d at the end.
    const bool t = n == "tq2_0";
    const float d = h2f(b + (t ? 64 : 0));
    for (int v = 0; v < int(f.qk); ++v) {
      const int q = t ? (b[32 * (v / 128) + v % 32] >> 2 * (v % 128 / 32)) & 3 : (b[2 + v / 4] >> 2 * (v % 4)) & 3;
      y[v] = float(q - 1) * d;
    }
  } else if (n == "tq1_0") {
    // Five base-3 digits a byte (four in qh), the byte a fixed-point fraction of 3^5: digit k of byte c is
    // ((c 3^k mod 256) 3) >> 8. Value v: digit v / 32 of byte v % 32 (v < 160), digit (v - 160) / 16 of
    // byte 32 + v % 16 (v < 240), digit (v - 240) / 4 of byte 48 + v % 4; d at byte 52.
    const float d = h2f(b + 52);
    const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    for (int v = 0; v < 256; ++v) {
      const int byte = v < 160 ? v % 32 : v < 240 ? 32 + v % 16 : 48 + v % 4;
      const int k = v < 160 ? v / 32 : v < 240 ? (v - 160) / 16 : (v - 240) / 4;
      const uint8_t c = uint8_t(b[byte] * pow3[k]);
      y[v] = float(((c * 3) >> 8) - 1) * d;
    }
  } else if (n == "nvfp4") {
    // Sub-block s = v / 16: scale byte s, codes in bytes 4 + 8s .. 4 + 8s + 7, value 16s + j in the low
    // nibble of byte 4 + 8s + j and 16s + 8 + j in its high nibble.
    for (int v = 0; v < 64; ++v) {
      const uint8_t c = b[4 + 8 * (v / 16) + v % 8];
      y[v] = float(kMxfp4[v % 16 < 8 ? c & 15 : c >> 4]) * ue4m3Half(b[v / 16]);
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

// Random blocks: random quant bytes, random halves (iq1_m's d too), and an E8M0 scale of 2^-18 .. 2^-3 (the
// dequantize test sets the extremes itself). nvfp4's UE4M3 scales keep their random mantissa and take an
// exponent field of 0 .. 9: E4M3 values m 2^-9 (subnormal, 0 for m = 0) or 2^-6 .. 1.875 2^2, of which ggml's
// scale is half. Bit 7 stays clear, as ggml's quantizer leaves it: its CPU code ignores it, its CUDA code
// reads a sign.
inline std::vector<uint8_t> randomBlocks(std::mt19937& rng, const Format& f, size_t blocks) {
  std::vector<uint8_t> q(blocks * f.bytes);
  for (uint8_t& b : q) b = uint8_t(rng());
  for (size_t b = 0; b < blocks; ++b) {
    for (unsigned off : f.halves) {
      uint16_t h = randomHalf(rng);
      q[b * f.bytes + off] = uint8_t(h), q[b * f.bytes + off + 1] = uint8_t(h >> 8);
    }
    if (f.e8m0) q[b * f.bytes] = uint8_t(110 + rng() % 16);
    for (int s = 0; f.ue4m3 && s < 4; ++s) {
      uint8_t& sc = q[b * f.bytes + s];
      sc = uint8_t((sc & 7) | (rng() % 10) << 3);
    }
    if (f.splitHalf >= 0) {
      uint16_t h = randomHalf(rng);
      for (int k = 0; k < 4; ++k) {
        uint8_t& hi = q[b * f.bytes + f.splitHalf + 2 * k + 1];
        hi = uint8_t((hi & 15) | ((h >> 4 * k) & 15) << 4);
      }
    }
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
