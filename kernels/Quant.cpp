// Quantized weights in ggml's GGUF block layouts (Q4_0, Q8_0, Q4_K, Q5_K, Q6_K, specified in
// ../shared/docs/ggml-quant-formats.md; Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K, IQ4_XS in
// docs/quant-formats.md):
// dequantize, embedding (which also gathers plain tables), quantize_q8_1, gemv_q, the fused decode
// kernels gemv_q_swiglu and rmsnorm_quantize_q8_1, and gemm_q for prefill on the int8 tensor cores
// (docs/kernels.md). Every kernel decodes weights in groups of 8 consecutive elements of a block.
// Most blocks are only 2-byte aligned in a row (18, 22, 34, 110 and 210 bytes), so quant bytes are read
// with 16-bit loads, two to a 32-bit word (llama.cpp's get_int_b2), and single scale bytes with
// 8-bit loads; MXFP4's 17-byte blocks are read byte by byte. No access ever needs more alignment
// of a block than its size gives every block of a row, except on paths that a run-time test of the
// base pointer chose: q4_k/q5_k blocks by 16-byte loads, q6_k and mxfp4 quants by aligned words.
// The decode follows ggml's fp32 operation order with explicit .rn rounding, which keeps
// fma-fusion and ptxas from contracting D*q - M: dequantize is bit-exact with dequantize_row_*.
// gemv_q with q8_1 activations keeps the quants as bytes and multiplies them with dp4a.
#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <tuple>

#include "kernels/Library.h"
#include "kernels/QuantGrids.h"

namespace tn::kernels::lib {

namespace {

using ir::Mod;
using ir::Op;
using ir::Scalar;
using ir::Type;

enum class Fmt : uint8_t {
  Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS,
  IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M,
  Q1_0, Q2_0, TQ1_0, TQ2_0, NVFP4,
};

struct FmtInfo {
  Fmt fmt;
  const char* name;
  unsigned qk;     // elements per block
  unsigned bytes;  // bytes per block
};

constexpr FmtInfo kFormats[] = {
    {Fmt::Q4_0, "q4_0", 32, 18},     {Fmt::Q4_1, "q4_1", 32, 20},   {Fmt::Q5_0, "q5_0", 32, 22},
    {Fmt::Q5_1, "q5_1", 32, 24},     {Fmt::Q8_0, "q8_0", 32, 34},   {Fmt::IQ4_NL, "iq4_nl", 32, 18},
    {Fmt::MXFP4, "mxfp4", 32, 17},   {Fmt::Q2_K, "q2_k", 256, 84},  {Fmt::Q3_K, "q3_k", 256, 110},
    {Fmt::Q4_K, "q4_k", 256, 144},   {Fmt::Q5_K, "q5_k", 256, 176}, {Fmt::Q6_K, "q6_k", 256, 210},
    {Fmt::IQ4_XS, "iq4_xs", 256, 136}, {Fmt::IQ2_XXS, "iq2_xxs", 256, 66}, {Fmt::IQ2_XS, "iq2_xs", 256, 74},
    {Fmt::IQ2_S, "iq2_s", 256, 82},    {Fmt::IQ3_XXS, "iq3_xxs", 256, 98}, {Fmt::IQ3_S, "iq3_s", 256, 110},
    {Fmt::IQ1_S, "iq1_s", 256, 50},    {Fmt::IQ1_M, "iq1_m", 256, 56},     {Fmt::Q1_0, "q1_0", 128, 18},
    {Fmt::Q2_0, "q2_0", 64, 18},       {Fmt::TQ1_0, "tq1_0", 256, 54},     {Fmt::TQ2_0, "tq2_0", 256, 66},
    {Fmt::NVFP4, "nvfp4", 64, 36},
};

// The grid formats: groups of 8 (IQ3: 4) values are entries of a fixed table (kernels/QuantGrids.h).
bool gridFormat(const FmtInfo& f) { return f.fmt >= Fmt::IQ2_XXS && f.fmt <= Fmt::IQ1_M; }

// Formats with an integer scale per 16 values under a super-block d (gemm_q applies the two of a
// block of 32 in s32 on two mma of half-zeroed fragments); q2_k also an integer min per 16
// values under a super-block dmin.
bool halfScaled(const FmtInfo& f) {
  return f.fmt == Fmt::Q6_K || f.fmt == Fmt::Q3_K || f.fmt == Fmt::Q2_K || f.fmt == Fmt::IQ2_XS ||
         f.fmt == Fmt::IQ2_S || f.fmt == Fmt::IQ1_M;
}

// Formats whose quants decode to signed bytes (q8_0's, and the 4-bit codes of the formats with a
// table of values).
bool signedQuants(const FmtInfo& f) {
  return f.fmt == Fmt::Q8_0 || f.fmt == Fmt::IQ4_NL || f.fmt == Fmt::MXFP4 || f.fmt == Fmt::IQ4_XS ||
         f.fmt == Fmt::NVFP4 || gridFormat(f);
}

// Formats whose weights are scale * q plus an offset per block (q2_k: per 16 values; IntGroup::min).
bool withMins(const FmtInfo& f) {
  return f.fmt == Fmt::Q4_1 || f.fmt == Fmt::Q5_1 || f.fmt == Fmt::Q2_K || f.fmt == Fmt::Q4_K || f.fmt == Fmt::Q5_K;
}

std::vector<std::string> formatNames() {
  std::vector<std::string> names;
  for (const FmtInfo& f : kFormats) names.push_back(f.name);
  return names;
}

const FmtInfo& formatOption(const Options& o) {
  for (const FmtInfo& f : kFormats)
    if (o.text("format") == f.name) return f;
  return kFormats[0];  // checkOption has refused anything else
}

OptionSpec formatSpec() {
  return choiceOption("format", "q4_k", formatNames(), "ggml block format of the quantized weights (GGUF layout)");
}

constexpr unsigned kGroup = 8;  // elements decoded together
constexpr unsigned kBlock = 256;

unsigned log2u(unsigned v) { return static_cast<unsigned>(std::countr_zero(v)); }

// ---- reading a block ----------------------------------------------------------------------

Value at(KernelBuilder& kb, Value p, Value off) { return kb.ptradd(p, kb.cvt(off, Type::u64())); }
Value at(KernelBuilder& kb, Value p, unsigned off) { return off == 0 ? p : kb.ptradd(p, kb.u64(off)); }
Value asB32(KernelBuilder& kb, Value v) { return kb.bitcast(v, Type::of(Scalar::B32)); }

// How a kernel reads its weights: once (gemv_q, dequantize: evict-first) or again by other
// blocks (gemm_q's token tiles: kept in the caches). Non-coherent either way.
enum class Reuse : uint8_t { Once, Again };

Value loadWeights(KernelBuilder& kb, Value ptr, Type t, Reuse reuse, std::string_view name = {}) {
  return reuse == Reuse::Once ? kb.load(ptr, t, {Mod::Cs, Mod::NcMod}, name) : kb.load(ptr, t, {Mod::NcMod}, name);
}

// The value widened to u32 (s32 for s8).
template <class Off>
Value ldQ(KernelBuilder& kb, Value p, Off off, Scalar t, Reuse reuse = Reuse::Once) {
  Type wide = t == Scalar::S8 ? Type::of(Scalar::S32) : Type::u32();
  return kb.cvt(loadWeights(kb, at(kb, p, off), Type::of(t), reuse), wide);
}

// How a block's bytes are read: by loads no wider than every block of a row is aligned (2 bytes;
// MXFP4's 17-byte blocks 1), or by aligned words where a run-time test allowed them (wordReads).
enum class Reads : uint8_t { Narrow, Words };

// How bytes8 reads its 8 bytes: 16-bit loads (off even, the block 2-byte aligned), 8-bit loads,
// one 8-byte load (blk + off 8-byte aligned), or the aligned 32-bit words that hold them (the
// tensor 4-byte aligned: two words, or three when blk + off is not a multiple of 4; those read
// at most 3 bytes on either side, which must lie in the tensor), joined by prmt.
enum class Bytes8 : uint8_t { Halves, Single, Pair, Window };

// Bytes r .. r + 7 of three consecutive words as two, sel = 0x3210 + 0x1111 r (prmt's selector).
std::vector<Value> joinWords(KernelBuilder& kb, Value w0, Value w1, Value w2, Value sel) {
  return {kb.bitcast(kb.prmt(asB32(kb, w0), asB32(kb, w1), sel, Mod::None, "lo8"), Type::u32()),
          kb.bitcast(kb.prmt(asB32(kb, w1), asB32(kb, w2), sel, Mod::None, "hi8"), Type::u32())};
}

// joinWords's selector for bytes from address p on.
Value skewSelector(KernelBuilder& kb, Value p) {
  Value r = kb.cvt(kb.bitcast(p, Type::u64()) & uint64_t{3}, Type::u32()).named("skew");
  return asB32(kb, kb.u32(0x3210) + r * 0x1111u);
}

// A block read by word windows at offsets that are multiples of 4, which all share its skew: the
// aligned address at or below it and the selector, computed once.
struct Skewed {
  Value base, sel;
};
Skewed skewed(KernelBuilder& kb, Value blk) { return {assumeAligned(kb, blk, 4, "blk_word"), skewSelector(kb, blk)}; }

// Bytes [off, off + 8) of a Skewed block (off a multiple of 4) from the three words at its aligned
// address + off, which reach up to 4 bytes past the 8 (they must lie in the tensor).
std::vector<Value> bytes8(KernelBuilder& kb, const Skewed& b, Value off, Reuse reuse) {
  Value a = at(kb, b.base, off);
  return joinWords(kb, loadWeights(kb, a, Type::u32(), reuse), loadWeights(kb, at(kb, a, 4u), Type::u32(), reuse),
                   loadWeights(kb, at(kb, a, 8u), Type::u32(), reuse), b.sel);
}

// Bytes [off, off + 8) of a block as two little-endian 32-bit words.
std::vector<Value> bytes8(KernelBuilder& kb, Value blk, Value off, Reuse reuse, Bytes8 how = Bytes8::Halves) {
  Value p = at(kb, blk, off);
  if (how == Bytes8::Pair) {
    Value v = loadWeights(kb, assumeAligned(kb, p, 8, "q8.a"), Type::of(Scalar::U32, 2), reuse, "q8");
    return {kb.extract(v, 0), kb.extract(v, 1)};
  }
  if (how == Bytes8::Window) {
    // The words holding bytes p and p + 7; a middle one when they are two apart.
    Value first = assumeAligned(kb, p, 4, "first_word"), last = assumeAligned(kb, at(kb, p, 7u), 4, "last_word");
    return joinWords(kb, loadWeights(kb, first, Type::u32(), reuse), loadWeights(kb, at(kb, first, 4u), Type::u32(), reuse),
                     loadWeights(kb, last, Type::u32(), reuse), skewSelector(kb, p));
  }
  std::vector<Value> words;
  for (unsigned w = 0; w < 2; ++w) {
    if (how == Bytes8::Halves) {
      words.push_back(ldQ(kb, p, 4 * w, Scalar::U16, reuse) | (ldQ(kb, p, 4 * w + 2, Scalar::U16, reuse) << 16u));
      continue;
    }
    Value word = ldQ(kb, p, 4 * w, Scalar::U8, reuse);
    for (unsigned b = 1; b < 4; ++b) word = word | (ldQ(kb, p, 4 * w + b, Scalar::U8, reuse) << (8 * b));
    words.push_back(word);
  }
  return words;
}

// The values of the formats with a table of 16 (ggml's kvalues_iq4nl and kvalues_mxfp4, the
// latter E2M1's values doubled).
constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// The 4-bit codes in the bytes of q (each 0..15) replaced by their signed bytes in `table`. The
// codes are packed into a prmt selector; two prmt look up the table's halves by each code's low
// three bits (its fourth masked: in a selector it would replicate a sign), and a third takes each
// byte from the half that the code's fourth bit names.
Value lookup16(KernelBuilder& kb, Value q, const int8_t (&table)[16]) {
  auto word = [&](unsigned i) {
    uint32_t w = 0;
    for (unsigned b = 0; b < 4; ++b) w |= uint32_t(uint8_t(table[4 * i + b])) << (8 * b);
    return kb.b32(w);
  };
  auto bits = [&](Value v) { return kb.bitcast(v, Type::of(Scalar::B32)); };
  // Codes of bytes 0 and 1 in byte 0, of bytes 2 and 3 in byte 2; the selector's nibbles 0..3.
  Value codes = kb.prmt(bits(q | (q >> 4u)), kb.b32(0), kb.b32(0x4420), Mod::None, "codes");
  Value low3 = codes & kb.b32(0x7777), high = codes & kb.b32(0x8888);
  Value lo = kb.prmt(word(0), word(1), low3, Mod::None, "lo"), hi = kb.prmt(word(2), word(3), low3, Mod::None, "hi");
  Value pick = (high >> 1u) | kb.b32(0x3210);
  return kb.bitcast(kb.prmt(lo, hi, pick, Mod::None, "looked_up"), Type::u32());
}

// Bits 4w .. 4w + 3 of the 32-bit word h (w = 0 or 1 past `first`) spread to bit 0 of the bytes of
// a word: the fifth bits of four consecutive q5_0/q5_1 quants (element i's is bit i of qh).
Value fifthBits(Value h, Value first, unsigned w) {
  Value nibble = ((h >> (w == 0 ? first : first + 4u)) & 15u).named("qh4");
  // Copies of the nibble 7 bits apart (no overlap): bit b of copy b lands on bit 8b.
  return (nibble * 0x00204081u) & 0x01010101u;
}

// ggml_e8m0_to_fp32_half: 2^(e - 128) from MXFP4's E8M0 scale byte e (subnormal for e < 2).
Value e8m0Half(KernelBuilder& kb, Value e) {
  Value bits = kb.select((e < 2u).named("subnormal"), kb.u32(0x00200000) << e, (e - 1u) << 23u, "scale_bits");
  return kb.bitcast(bits, Type::f32(), "scale");
}

// ---- the grid formats ----------------------------------------------------------------------
// An entry of a grid is a prmt selector: the code of value i in nibble i. prmt then turns codes
// into the values' bytes, four at a time, from a word (or two) of the format's values.

// The format's grid as a table of selectors (u32: 8 values; IQ3's u16: 4), declared once a kernel.
ir::Table gridTable(KernelBuilder& kb, const FmtInfo& f) {
  struct Grid {
    const char* name;
    const uint16_t* codes;
    size_t entries;
    unsigned bits;  // per code
  };
  namespace g = quantgrid;
  const Grid grid = f.fmt == Fmt::IQ2_XXS  ? Grid{"iq2xxs_grid", g::kIq2xxs, std::size(g::kIq2xxs), 2}
                    : f.fmt == Fmt::IQ2_XS ? Grid{"iq2xs_grid", g::kIq2xs, std::size(g::kIq2xs), 2}
                    : f.fmt == Fmt::IQ2_S  ? Grid{"iq2s_grid", g::kIq2s, std::size(g::kIq2s), 2}
                    : f.fmt == Fmt::IQ3_XXS ? Grid{"iq3xxs_grid", g::kIq3xxs, std::size(g::kIq3xxs), 3}
                    : f.fmt == Fmt::IQ3_S  ? Grid{"iq3s_grid", g::kIq3s, std::size(g::kIq3s), 3}
                                           : Grid{"iq1s_grid", g::kIq1s, std::size(g::kIq1s), 2};
  const unsigned values = 16 / grid.bits;
  // Declared by an earlier group's decode in this kernel: the selectors are not built again.
  if (int i = kb.kernel().findTable(grid.name); i >= 0) return {i, kb.kernel().tables[static_cast<size_t>(i)].elem};
  std::vector<uint64_t> selectors(grid.entries);
  for (size_t e = 0; e < grid.entries; ++e)
    for (unsigned v = 0; v < values; ++v)
      selectors[e] |= uint64_t((grid.codes[e] >> (grid.bits * v)) & ((1u << grid.bits) - 1)) << (4 * v);
  return kb.table(grid.name, values == 8 ? Type::u32() : Type::of(Scalar::U16), std::move(selectors));
}

// Up to 4 bytes as a b32 word, the first lowest (each the low byte of an int; the rest 0).
template <class T, size_t N>
Value byteWord(KernelBuilder& kb, const T (&v)[N]) {
  static_assert(N <= 4);
  uint32_t w = 0;
  for (unsigned b = 0; b < N; ++b) w |= uint32_t(uint8_t(v[b])) << (8 * b);
  return kb.b32(w);
}

// The 8 values of an entry of a 3-code grid (IQ2, IQ1): `valueWord`'s bytes picked by the codes.
std::array<Value, 2> gridBytes8(KernelBuilder& kb, Value entry, Value valueWord) {
  Value sel = asB32(kb, entry), zero = kb.b32(0);
  return {kb.bitcast(kb.prmt(valueWord, zero, sel, Mod::None, "grid_lo"), Type::u32()),
          kb.bitcast(kb.prmt(valueWord, zero, asB32(kb, entry >> 16u), Mod::None, "grid_hi"), Type::u32())};
}

// The 4 values of an entry of an 8-code grid (IQ3): bytes of {hi, lo} picked by the codes.
Value gridBytes4(KernelBuilder& kb, Value entry, const uint8_t (&values)[8]) {
  const uint8_t lo[4] = {values[0], values[1], values[2], values[3]}, hi[4] = {values[4], values[5], values[6], values[7]};
  Value sel = asB32(kb, kb.cvt(entry, Type::u32()));
  return kb.bitcast(kb.prmt(byteWord(kb, lo), byteWord(kb, hi), sel, Mod::None, "grid"), Type::u32());
}

// The bytes of x negated where bit b of the 4-bit s is set. No byte of x is 0, so no byte borrows.
Value negateBytes(Value x, Value s) {
  Value m = ((s * 0x00204081u) & 0x01010101u).named("neg");  // bit b to bit 0 of byte b
  return (x ^ (m * 0xFFu)) + m;
}

// ggml's ksigns_iq2xs: 7 sign bits and an eighth that makes their number even.
Value signs8(KernelBuilder& kb, Value s7) { return s7 | ((kb.popc(asB32(kb, s7)) & 1u) << 7u); }

// q8_1 blocks (quantize_q8_1's output): half d, half s = d * sum(q), 32 int8 from byte 4.
constexpr unsigned kQ81Bytes = 36;

// The d of the q8_1 block at xb, as f32.
Value q81Scale(KernelBuilder& kb, Value xb) {
  return f16BitsToF32(kb, kb.cvt(kb.load(xb, Type::of(Scalar::U16), {Mod::NcMod}), Type::u32()));
}

Value mulRn(KernelBuilder& kb, Value a, Value b) { return kb.op(Op::Mul, Type::f32(), {a, b}, {Mod::Rn}); }
Value subRn(KernelBuilder& kb, Value a, Value b) { return kb.op(Op::Sub, Type::f32(), {a, b}, {Mod::Rn}); }
Value toF32(KernelBuilder& kb, Value i) { return kb.cvt(i, Type::f32()); }

// The 8 quants of group j (elements 8j .. 8j+7 of the block at blk) as two words of 4 bytes,
// unsigned (0..63) except the signed bytes of q8_0 and the table formats, and how they map to weights:
// w = scale * (q - intOffset), or for the formats with a min, round(scale * q) - min.
struct IntGroup {
  Value q[2];
  Value scale;
  int intOffset = 0;
  Value min;  // q4_1, q5_1 (-m), q2_k, q4_k, q5_k only
  // The formats with a scale per 16 values (halfScaled): scale = d * subScale (s32), apart for
  // gemm_q's integer scaling; q2_k also min = dmin * subMin.
  Value d, subScale, dmin, subMin;
};

// A q4_k/q5_k sub-block's scale and min as f32, D = d * sc and M = dmin * m (ggml's order), from
// get_scale_min_k4's bytes A[s%4], B[s%4], C[s%4] of the block's 12 scale bytes.
std::pair<Value, Value> scaleMinK4(KernelBuilder& kb, Value d, Value dmin, Value s, Value a, Value b, Value c) {
  Value high = (s >= 4u).named("high_sub");
  Value sc = kb.select(high, (c & 15u) | ((a >> 6u) << 4u), a & 63u, "sc");
  Value m = kb.select(high, (c >> 4u) | ((b >> 6u) << 4u), b & 63u, "m");
  return {mulRn(kb, d, toF32(kb, sc)), mulRn(kb, dmin, toF32(kb, m))};
}

// The 16 bytes at p (16-byte aligned) by one load, as four words.
std::vector<Value> words16(KernelBuilder& kb, Value p, Reuse reuse, std::string_view name) {
  Value v = loadWeights(kb, p, Type::of(Scalar::U32, 4), reuse, name);
  std::vector<Value> w;
  for (unsigned i = 0; i < 4; ++i) w.push_back(kb.extract(v, i));
  return w;
}

// Sub-block s's D and M (scaleMinK4) from the first 16 bytes of its q4_k or q5_k block (words16):
// d and dmin, then the 12 scale bytes, get_scale_min_k4's A[4], B[4], C[4], as words 1..3.
std::pair<Value, Value> scaleMinK4(KernelBuilder& kb, const std::vector<Value>& head, Value s) {
  Value d = f16BitsToF32(kb, head[0] & 0xFFFFu), dmin = f16BitsToF32(kb, head[0] >> 16u);
  Value shift = (s & 3u) << 3u;
  return scaleMinK4(kb, d, dmin, s, (head[1] >> shift) & 0xFFu, (head[2] >> shift) & 0xFFu, (head[3] >> shift) & 0xFFu);
}

// ggml_ue4m3_to_fp32, NVFP4's scale from its byte x: (1 + m/8) 2^(e - 7) / 2 for an exponent
// field e > 0, m 2^-9 / 2 for e = 0, and 0 for x = 0x7F (bit 7 is not read: 0xFF is 240).
Value ue4m3Half(KernelBuilder& kb, Value x) {
  Value e = ((x >> 3u) & 15u).named("ue4m3_e"), m = (x & 7u).named("ue4m3_m");
  Value normal = kb.bitcast(((e + 119u) << 23u) | (m << 20u), Type::f32(), "normal");
  Value subnormal = mulRn(kb, toF32(kb, m), kb.f32(std::ldexp(1.0f, -10)));
  return kb.select(x == 0x7Fu, kb.f32(0.0f), kb.select(e == 0u, subnormal, normal), "scale");
}

// The 2-bit fields of the byte b (value i at bits 2i) in the bytes of a word.
Value spread2(Value b) {
  Value nibbles = (b | (b << 12u)) & 0x000F000Fu;  // nibble 0 in byte 0, nibble 1 in byte 2
  return (nibbles | (nibbles << 6u)) & 0x03030303u;
}

// Base-3 digit n of each byte b of w (TQ1_0 packs 5 a byte, digit n first scaled into the top):
// ((b 3^n mod 256) 3) >> 8, for the even and the odd bytes in 16-bit lanes, which never carry.
Value ternaryDigits(KernelBuilder& kb, Value w, Value n) {
  Value pow3 = kb.bitcast(kb.prmt(kb.b32(0x1B090301), kb.b32(0x51), asB32(kb, n), Mod::None, "pow3"), Type::u32()) & 0xFFu;
  auto digit = [&](Value lanes) { return ((((lanes * pow3) & 0x00FF00FFu) * 3u) >> 8u) & 0x00FF00FFu; };
  return digit(w & 0x00FF00FFu) | (digit((w >> 8u) & 0x00FF00FFu) << 8u);
}

// The grid formats' weights: the integer scale 2 ls + 1 (s32, which gemm_q applies per 16 values
// where the format has them) under the f32 unit `unit` (d / 8, d / 4 or d; exact).
void oddScale(KernelBuilder& kb, IntGroup& g, Value unit, Value ls) {
  g.d = unit;
  g.subScale = kb.bitcast((ls << 1u) + 1u, Type::of(Scalar::S32));
  g.scale = mulRn(kb, g.d, toF32(kb, g.subScale));
}

// The distance from a group of 8 values to the group whose values are the high nibbles of the same
// bytes, in the formats where the two also share their scale (and min), so that one read of the
// bytes decodes both (decodeInt's `high`); 0 in the others. In a block the groups pair up as j and
// j + P for the j whose bit log2(P) is 0.
unsigned nibblePartner(const FmtInfo& f) {
  switch (f.fmt) {
    case Fmt::Q4_0:
    case Fmt::Q4_1:
    case Fmt::Q5_0:
    case Fmt::Q5_1:
    case Fmt::IQ4_NL:
    case Fmt::MXFP4:
    case Fmt::IQ4_XS: return 2;
    case Fmt::NVFP4: return 1;
    default: return 0;
  }
}

// Group j of the block at blk; with `high` (formats with a nibblePartner P, j a low group: bit
// log2(P) of j clear), also group j + P into *high, from the same loads.
IntGroup decodeInt(KernelBuilder& kb, const FmtInfo& f, Value blk, Value j, Reuse reuse = Reuse::Once,
                   Reads reads = Reads::Narrow, IntGroup* high = nullptr) {
  IntGroup g;
  const bool words = reads == Reads::Words;
  auto masked = [&](std::vector<Value> w, Value shift, uint32_t mask) {
    for (unsigned i = 0; i < 2; ++i) g.q[i] = (w[i] >> shift) & mask;
  };
  // The 4-bit quants of the bytes w: the nibbles at `shift` (0 or 4), or with `high` the low ones
  // and the high ones for *high.
  auto nibbles = [&](const std::vector<Value>& w, Value shift) {
    if (!high) return masked(w, shift, 0x0F0F0F0Fu);
    for (unsigned i = 0; i < 2; ++i) g.q[i] = w[i] & 0x0F0F0F0Fu, high->q[i] = (w[i] >> 4u) & 0x0F0F0F0Fu;
  };
  // The quants replaced by their values in a format's table of 16 (lookup16).
  auto lookup = [&](const int8_t (&table)[16]) {
    for (Value& q : g.q) q = lookup16(kb, q, table);
    if (high)
      for (Value& q : high->q) q = lookup16(kb, q, table);
  };
  // q5_0, q5_1: the group's fifth bits from the 32-bit qh at byte qhAt (value i's is bit i).
  auto addFifthBits = [&](unsigned qhAt) {
    Value qh = ldQ(kb, blk, qhAt, Scalar::U16, reuse) | (ldQ(kb, blk, qhAt + 2u, Scalar::U16, reuse) << 16u);
    Value first = j << 3u;
    for (unsigned i = 0; i < 2; ++i) g.q[i] = g.q[i] | (fifthBits(qh, first, i) << 4u);
    if (high)
      for (unsigned i = 0; i < 2; ++i) high->q[i] = high->q[i] | (fifthBits(qh, first + 16u, i) << 4u);
  };
  switch (f.fmt) {
    case Fmt::Q4_0: {
      // Group j < 2: low nibbles of qs[8j..]; j >= 2: high nibbles of qs[8(j-2)..].
      g.scale = f16BitsToF32(kb, ldQ(kb, blk, 0u, Scalar::U16, reuse));
      nibbles(bytes8(kb, blk, ((j & 1u) << 3u) + 2u, reuse), (j >> 1u) << 2u);
      g.intOffset = 8;
      break;
    }
    case Fmt::Q4_1:
    case Fmt::Q5_1: {
      // half d, half m, (q5_1: the 32 fifth bits,) nibbles as q4_0's; w = d q + m, so min = -m.
      g.scale = f16BitsToF32(kb, ldQ(kb, blk, 0u, Scalar::U16, reuse));
      g.min = kb.neg(f16BitsToF32(kb, ldQ(kb, blk, 2u, Scalar::U16, reuse)), "neg_m");
      const unsigned qsAt = f.fmt == Fmt::Q4_1 ? 4 : 8;
      nibbles(bytes8(kb, blk, ((j & 1u) << 3u) + qsAt, reuse), (j >> 1u) << 2u);
      if (f.fmt == Fmt::Q5_1) addFifthBits(4u);
      break;
    }
    case Fmt::Q5_0: {
      // half d, the 32 fifth bits (bytes 2..5), nibbles as q4_0's from byte 6; w = d (q - 16).
      g.scale = f16BitsToF32(kb, ldQ(kb, blk, 0u, Scalar::U16, reuse));
      nibbles(bytes8(kb, blk, ((j & 1u) << 3u) + 6u, reuse), (j >> 1u) << 2u);
      addFifthBits(2u);
      g.intOffset = 16;
      break;
    }
    case Fmt::Q8_0: {
      g.scale = f16BitsToF32(kb, ldQ(kb, blk, 0u, Scalar::U16, reuse));
      std::vector<Value> w = bytes8(kb, blk, (j << 3u) + 2u, reuse);
      g.q[0] = w[0], g.q[1] = w[1];
      break;
    }
    case Fmt::IQ4_NL:
    case Fmt::MXFP4: {
      // iq4_nl: half d; mxfp4: the E8M0 byte e, scale 2^(e - 128). Then nibbles as q4_0's, each a
      // code of the format's table of 16 signed values; w = scale * value.
      const bool mx = f.fmt == Fmt::MXFP4;
      g.scale = mx ? e8m0Half(kb, ldQ(kb, blk, 0u, Scalar::U8, reuse))
                   : f16BitsToF32(kb, ldQ(kb, blk, 0u, Scalar::U16, reuse));
      const Bytes8 how = !mx ? Bytes8::Halves : words ? Bytes8::Window : Bytes8::Single;
      nibbles(bytes8(kb, blk, ((j & 1u) << 3u) + (mx ? 1u : 2u), reuse, how), (j >> 1u) << 2u);
      lookup(mx ? kMxfp4Values : kIq4nlValues);
      break;
    }
    case Fmt::IQ4_XS: {
      // half d, u16 scales_h, scales_l[4], qs[128]. Sub-block s (32 values) has the 6-bit scale
      // ls: nibble s % 2 of scales_l[s / 2], bits 2s and 2s + 1 of scales_h above it; its values
      // are d (ls - 32) times iq4_nl's table at the nibbles of qs[16 s ..], laid out as q4_0's.
      Value s = (j >> 2u).named("sub"), jj = (j & 3u).named("grp_in_sub");
      Value lo = ldQ(kb, blk, (s >> 1u) + 4u, Scalar::U8, reuse), hi = ldQ(kb, blk, 2u, Scalar::U16, reuse);
      Value ls = ((lo >> ((s & 1u) << 2u)) & 15u) | (((hi >> (s << 1u)) & 3u) << 4u);
      Value d = f16BitsToF32(kb, ldQ(kb, blk, 0u, Scalar::U16, reuse));
      g.scale = mulRn(kb, d, toF32(kb, kb.bitcast(ls, Type::of(Scalar::S32)) - 32));
      nibbles(bytes8(kb, blk, (s << 4u) + ((jj & 1u) << 3u) + 8u, reuse), (jj >> 1u) << 2u);
      lookup(kIq4nlValues);
      break;
    }
    case Fmt::IQ2_XXS:
    case Fmt::IQ2_XS:
    case Fmt::IQ2_S: {
      // Group l of sub-block s (32 values) is one grid entry of 8 values with 8 signs; w = d (0.5
      // + ls) / 4 value = d/8 (2 ls + 1) value. iq2_xxs: half d, then per sub-block 4 index bytes
      // and a u32 of 4 x 7 sign bits (signs8) with ls in its top 4. iq2_xs: half d, u16 qs[32]
      // (a 9-bit index, 7 sign bits), scales[8] (an ls nibble per 16 values). iq2_s: half d,
      // qs[32] (the index's low 8 bits), signs[32], qh[8] (2 high bits per index), scales[8].
      Value s = (j >> 2u).named("sub"), l = (j & 3u).named("grp_in_sub");
      Value d = f16BitsToF32(kb, ldQ(kb, blk, 0u, Scalar::U16, reuse));
      Value index, signs, ls;
      if (f.fmt == Fmt::IQ2_XXS) {
        Value at = (s << 3u) + 2u;
        index = ldQ(kb, blk, at + l, Scalar::U8, reuse);
        Value aux = ldQ(kb, blk, at + 4u, Scalar::U16, reuse) | (ldQ(kb, blk, at + 6u, Scalar::U16, reuse) << 16u);
        signs = signs8(kb, (aux >> (l * 7u)) & 127u);
        ls = aux >> 28u;
      } else if (f.fmt == Fmt::IQ2_XS) {
        Value w = ldQ(kb, blk, (j << 1u) + 2u, Scalar::U16, reuse);
        index = w & 511u;
        signs = signs8(kb, w >> 9u);
        ls = (ldQ(kb, blk, s + 66u, Scalar::U8, reuse) >> ((l >> 1u) << 2u)) & 15u;
      } else {
        Value qh = ldQ(kb, blk, s + 66u, Scalar::U8, reuse);
        index = ldQ(kb, blk, j + 2u, Scalar::U8, reuse) | (((qh >> (l << 1u)) & 3u) << 8u);
        signs = ldQ(kb, blk, j + 34u, Scalar::U8, reuse);
        ls = (ldQ(kb, blk, s + 74u, Scalar::U8, reuse) >> ((l >> 1u) << 2u)) & 15u;
      }
      std::array<Value, 2> x = gridBytes8(kb, kb.table_ld(gridTable(kb, f), index, "entry"),
                                          byteWord(kb, quantgrid::kIq2Values));
      g.q[0] = negateBytes(x[0], signs & 15u), g.q[1] = negateBytes(x[1], signs >> 4u);
      oddScale(kb, g, mulRn(kb, d, kb.f32(0.125f)), ls);
      break;
    }
    case Fmt::IQ3_XXS:
    case Fmt::IQ3_S: {
      // Group l of sub-block s is two grid entries of 4 values, with 8 signs. iq3_xxs: half d,
      // qs[64] (8 index bytes per sub-block), then per sub-block a u32 of 4 x 7 sign bits with ls
      // in its top 4: w = d (0.5 + ls) / 2 value = d/4 (2 ls + 1) value. iq3_s: half d, qs[64]
      // (the indexes' low 8 bits), qh[8] (their 9th bits), signs[32], scales[4] (an ls nibble per
      // sub-block): w = d (2 ls + 1) value.
      const bool xxs = f.fmt == Fmt::IQ3_XXS;
      Value s = (j >> 2u).named("sub"), l = (j & 3u).named("grp_in_sub");
      Value d = f16BitsToF32(kb, ldQ(kb, blk, 0u, Scalar::U16, reuse));
      Value pair = ldQ(kb, blk, (s << 3u) + (l << 1u) + 2u, Scalar::U16, reuse);
      Value i0 = pair & 0xFFu, i1 = pair >> 8u, signs, ls;
      if (xxs) {
        Value at = (s << 2u) + 66u;
        Value aux = ldQ(kb, blk, at, Scalar::U16, reuse) | (ldQ(kb, blk, at + 2u, Scalar::U16, reuse) << 16u);
        signs = signs8(kb, (aux >> (l * 7u)) & 127u);
        ls = aux >> 28u;
        d = mulRn(kb, d, kb.f32(0.25f));
      } else {
        Value qh = ldQ(kb, blk, s + 66u, Scalar::U8, reuse) >> (l << 1u);
        i0 = i0 | ((qh & 1u) << 8u), i1 = i1 | (((qh >> 1u) & 1u) << 8u);
        signs = ldQ(kb, blk, (s << 2u) + l + 74u, Scalar::U8, reuse);
        ls = (ldQ(kb, blk, (s >> 1u) + 106u, Scalar::U8, reuse) >> ((s & 1u) << 2u)) & 15u;
      }
      ir::Table grid = gridTable(kb, f);
      const auto& values = xxs ? quantgrid::kIq3xxsValues : quantgrid::kIq3sValues;
      g.q[0] = negateBytes(gridBytes4(kb, kb.table_ld(grid, i0, "entry0"), values), signs & 15u);
      g.q[1] = negateBytes(gridBytes4(kb, kb.table_ld(grid, i1, "entry1"), values), signs >> 4u);
      oddScale(kb, g, d, ls);
      break;
    }
    case Fmt::IQ1_S:
    case Fmt::IQ1_M: {
      // Group l of sub-block s is one grid entry of 8 values in {-1, 0, 1} (an 11-bit index),
      // shifted by delta = +-1/8: w = dl (value + delta) = dl/8 (8 value +- 1), dl = d (2 ls + 1).
      // iq1_s: half d, qs[32] (the index's low 8 bits), u16 qh[8]: per sub-block 3 high index bits
      // per group, ls in bits 12..14 and delta's sign in bit 15. iq1_m: qs[32], qh[16] (a nibble
      // per group: 3 high index bits, then delta's sign), u16 scales[4]: a 3-bit ls per 16 values,
      // and the 16 bits of d in the words' top nibbles.
      const bool m = f.fmt == Fmt::IQ1_M;
      Value s = (j >> 2u).named("sub"), l = (j & 3u).named("grp_in_sub");
      Value index = ldQ(kb, blk, j + (m ? 0u : 2u), Scalar::U8, reuse), hi, negative, ls, d;
      if (!m) {
        Value qh = ldQ(kb, blk, (s << 1u) + 34u, Scalar::U16, reuse);
        hi = (qh >> (l * 3u)) & 7u, negative = qh >> 15u, ls = (qh >> 12u) & 7u;
        d = f16BitsToF32(kb, ldQ(kb, blk, 0u, Scalar::U16, reuse));
      } else {
        Value nibble = ldQ(kb, blk, (j >> 1u) + 32u, Scalar::U8, reuse) >> ((l & 1u) << 2u);
        hi = nibble & 7u, negative = (nibble >> 3u) & 1u;
        std::vector<Value> sc;
        for (unsigned w = 0; w < 4; ++w) sc.push_back(ldQ(kb, blk, 48u + 2 * w, Scalar::U16, reuse));
        Value scaleWord = ldQ(kb, blk, ((s >> 1u) << 1u) + 48u, Scalar::U16, reuse);
        ls = (scaleWord >> ((s & 1u) * 6u + (l >> 1u) * 3u)) & 7u;
        d = f16BitsToF32(kb, (sc[0] >> 12u) | ((sc[1] >> 8u) & 0xF0u) | ((sc[2] >> 4u) & 0xF00u) | (sc[3] & 0xF000u));
      }
      int8_t plus[3], minus[3];
      for (unsigned c = 0; c < 3; ++c)
        plus[c] = int8_t(8 * quantgrid::kIq1Values[c] + 1), minus[c] = int8_t(8 * quantgrid::kIq1Values[c] - 1);
      Value values = kb.select(negative != 0u, byteWord(kb, minus), byteWord(kb, plus), "iq1_values");
      std::array<Value, 2> x = gridBytes8(kb, kb.table_ld(gridTable(kb, f), index | (hi << 8u), "entry"), values);
      g.q[0] = x[0], g.q[1] = x[1];
      oddScale(kb, g, mulRn(kb, d, kb.f32(0.125f)), ls);
      break;
    }
    case Fmt::Q1_0:
    case Fmt::Q2_0:
    case Fmt::TQ1_0:
    case Fmt::TQ2_0: {
      // Values d (q - 1): q1_0 (128 values): half d, qs[16], q twice bit i % 8 of qs[i / 8] (so w is
      // d or -d). q2_0 (64): half d, qs[16], q bits 2(i % 4) of qs[i / 4]. tq2_0 (256): qs[64], half
      // d at 64, value 128 h + 32 l + m bits 2l of qs[32 h + m]. tq1_0 (256): qs[48], qh[4], half d
      // at 52, q base-3 digit n of a byte: value v < 160 digit v / 32 of qs[v % 32], v < 240 digit
      // (v - 160) / 16 of qs[32 + v % 16], else digit (v - 240) / 4 of qh[v % 4].
      g.intOffset = 1;
      if (f.fmt == Fmt::Q1_0) {
        Value b = ldQ(kb, blk, j + 2u, Scalar::U8, reuse);
        for (unsigned i = 0; i < 2; ++i) g.q[i] = ((((b >> (4 * i)) & 15u) * 0x00204081u) & 0x01010101u) << 1u;
      } else if (f.fmt == Fmt::Q2_0) {
        Value two = ldQ(kb, blk, (j << 1u) + 2u, Scalar::U16, reuse);
        g.q[0] = spread2(two & 0xFFu), g.q[1] = spread2(two >> 8u);
      } else if (f.fmt == Fmt::TQ2_0) {
        Value half = j >> 4u, l = (j >> 2u) & 3u, m0 = (j & 3u) << 3u;
        masked(bytes8(kb, blk, (half << 5u) + m0, reuse), l << 1u, 0x03030303u);
      } else {
        Value first = (j < 20u).named("first_part"), third = (j >= 30u).named("qh_part");
        Value off = kb.select(first, (j & 3u) << 3u, kb.select(third, kb.u32(48), (((j - 20u) & 1u) << 3u) + 32u));
        Value n = kb.select(first, j >> 2u, kb.select(third, (j - 30u) << 1u, (j - 20u) >> 1u), "digit");
        auto word = [&](Value at) { return ldQ(kb, blk, at, Scalar::U16, reuse) | (ldQ(kb, blk, at + 2u, Scalar::U16, reuse) << 16u); };
        // Values 4 .. 7 of the group: the next 4 bytes, or qh's next digit.
        g.q[0] = ternaryDigits(kb, word(off), n);
        g.q[1] = ternaryDigits(kb, word(kb.select(third, off, off + 4u)), kb.select(third, n + 1u, n));
      }
      const unsigned dAt = f.fmt == Fmt::TQ1_0 ? 52 : f.fmt == Fmt::TQ2_0 ? 64 : 0;
      g.scale = f16BitsToF32(kb, ldQ(kb, blk, dAt, Scalar::U16, reuse));
      break;
    }
    case Fmt::NVFP4: {
      // d[4] (a UE4M3 scale per 16 values), qs[32]: values 16s + i (i < 8) are the low nibbles of
      // qs[8s + i], 16s + 8 + i the high ones, E2M1 codes whose doubled values are mxfp4's table;
      // w = value * ue4m3(d[s]) / 2.
      Value sb = (j >> 1u).named("sub");
      g.scale = ue4m3Half(kb, ldQ(kb, blk, sb, Scalar::U8, reuse));
      nibbles(bytes8(kb, blk, (sb << 3u) + 4u, reuse), (j & 1u) << 2u);
      lookup(kMxfp4Values);
      break;
    }
    case Fmt::Q4_K:
    case Fmt::Q5_K: {
      Value s = (j >> 2u).named("sub");  // sub-block of 32
      Value l0 = (j & 3u) << 3u;
      if (words) {
        // The block 16-byte aligned: d, dmin and the scale bytes by one load, quants by 8-byte ones.
        blk = assumeAligned16(kb, blk, "blk.a");
        std::tie(g.scale, g.min) = scaleMinK4(kb, words16(kb, blk, reuse, "head"), s);
      } else {
        Value d = f16BitsToF32(kb, ldQ(kb, blk, 0u, Scalar::U16, reuse));
        Value dmin = f16BitsToF32(kb, ldQ(kb, blk, 2u, Scalar::U16, reuse));
        // get_scale_min_k4: bytes A[s%4], B[s%4], C[s%4] of the 12 scale bytes at offset 4.
        Value k4 = s & 3u;
        Value a = ldQ(kb, blk, k4 + 4u, Scalar::U8, reuse), b = ldQ(kb, blk, k4 + 8u, Scalar::U8, reuse);
        Value c = ldQ(kb, blk, k4 + 12u, Scalar::U8, reuse);
        std::tie(g.scale, g.min) = scaleMinK4(kb, d, dmin, s, a, b, c);
      }
      const Bytes8 how = words ? Bytes8::Pair : Bytes8::Halves;
      unsigned qsAt = f.fmt == Fmt::Q4_K ? 16 : 48;
      masked(bytes8(kb, blk, ((s >> 1u) << 5u) + l0 + qsAt, reuse, how), (s & 1u) << 2u, 0x0F0F0F0Fu);
      if (f.fmt == Fmt::Q5_K) {
        // qh[l]: bit s is the 5th bit of element l of sub-block s.
        std::vector<Value> h = bytes8(kb, blk, l0 + 16u, reuse, how);
        for (unsigned i = 0; i < 2; ++i) g.q[i] = g.q[i] | (((h[i] >> s) & 0x01010101u) << 4u);
      }
      break;
    }
    case Fmt::Q2_K:
    case Fmt::Q3_K: {
      // Element i0 = 8j: half n = j/16, shift 2jj with jj = (j/4)%4, l0 = 8(j%4): the 2-bit
      // quants (qs[32n + l0 ..] >> 2jj) & 3, qs from byte 16 (q2_k) or 32 (q3_k); scale i0/16 = j/2.
      const bool q2 = f.fmt == Fmt::Q2_K;
      Value n = j >> 4u, jj = (j >> 2u) & 3u, l0 = (j & 3u) << 3u;
      masked(bytes8(kb, blk, (n << 5u) + l0 + (q2 ? 16u : 32u), reuse), jj << 1u, 0x03030303u);
      if (q2) {
        // scales[16], qs[64], half d, half dmin: D = d (sc & 15), M = dmin (sc >> 4), w = D q - M.
        Value sc = ldQ(kb, blk, j >> 1u, Scalar::U8, reuse);
        g.d = f16BitsToF32(kb, ldQ(kb, blk, 80u, Scalar::U16, reuse));
        g.dmin = f16BitsToF32(kb, ldQ(kb, blk, 82u, Scalar::U16, reuse));
        g.subScale = kb.bitcast(sc & 15u, Type::of(Scalar::S32));
        g.subMin = kb.bitcast(sc >> 4u, Type::of(Scalar::S32));
        g.scale = mulRn(kb, g.d, toF32(kb, g.subScale));
        g.min = mulRn(kb, g.dmin, toF32(kb, g.subMin));
        break;
      }
      // hmask[32], qs[64], scales[12], half d: the high bit 4n + jj of hmask[l0 ..];
      // w = d (sc - 32) (q - 4) with q = low | high << 2 and sc the 6-bit scale s = j/2: nibble
      // s/8 of byte s%8 of scales, bits 2(s/4) of byte 8 + s%4 above it.
      std::vector<Value> hm = bytes8(kb, blk, l0, reuse);
      Value bit = ((n << 2u) + jj).named("hbit");
      for (unsigned i = 0; i < 2; ++i) g.q[i] = g.q[i] | (((hm[i] >> bit) & 0x01010101u) << 2u);
      Value sub = (j >> 1u).named("scale_idx");
      Value low = (ldQ(kb, blk, (sub & 7u) + 96u, Scalar::U8, reuse) >> ((sub >> 3u) << 2u)) & 15u;
      Value high = (ldQ(kb, blk, (sub & 3u) + 104u, Scalar::U8, reuse) >> ((sub >> 2u) << 1u)) & 3u;
      Value sc = kb.bitcast(low | (high << 4u), Type::of(Scalar::S32)) - 32;
      Value d = f16BitsToF32(kb, ldQ(kb, blk, 108u, Scalar::U16, reuse));
      g.scale = mulRn(kb, d, toF32(kb, sc));
      g.d = d, g.subScale = sc;
      g.intOffset = 4;
      break;
    }
    case Fmt::Q6_K: {
      // Element i0 = 8j: half h = j/16, k = (j/4)%4, l0 = 8(j%4); scale i0/16 = j/2.
      Value h = j >> 4u, kq = (j >> 2u) & 3u, l0 = (j & 3u) << 3u;
      // Words: the offsets are multiples of 8, so both windows have the block's skew; they read from
      // 2 bytes before the 8 (an odd block, 2 mod 4: its previous block is in the tensor) to 4 past
      // them, inside the block (ql's end at 132, qh's at 196 of 210).
      Value qlAt = (h << 6u) + ((kq & 1u) << 5u) + l0, qhAt = (h << 5u) + l0 + 128u;
      std::vector<Value> lo, hi;
      if (words) {
        const Skewed sb = skewed(kb, blk);
        lo = bytes8(kb, sb, qlAt, reuse), hi = bytes8(kb, sb, qhAt, reuse);
      } else {
        lo = bytes8(kb, blk, qlAt, reuse), hi = bytes8(kb, blk, qhAt, reuse);
      }
      masked(lo, (kq >> 1u) << 2u, 0x0F0F0F0Fu);
      for (unsigned i = 0; i < 2; ++i) g.q[i] = g.q[i] | (((hi[i] >> (kq << 1u)) & 0x03030303u) << 4u);
      Value sc = ldQ(kb, blk, (j >> 1u) + 192u, Scalar::S8, reuse);
      Value d = f16BitsToF32(kb, ldQ(kb, blk, 208u, Scalar::U16, reuse));
      g.scale = mulRn(kb, d, toF32(kb, sc));
      g.d = d, g.subScale = sc;
      g.intOffset = 32;
      break;
    }
  }
  if (high) {
    // The partner's scale, min and offset are the group's.
    IntGroup partner = g;
    partner.q[0] = high->q[0], partner.q[1] = high->q[1];
    *high = partner;
  }
  return g;
}

// A group's 8 weights as f32, exactly as ggml's dequantize_row_* computes them.
std::vector<Value> weightsOf(KernelBuilder& kb, const FmtInfo& f, const IntGroup& g) {
  std::vector<Value> y;
  for (unsigned i = 0; i < kGroup; ++i) {
    Value w = kb.bitcast(g.q[i / 4], Type::of(Scalar::S32));
    unsigned at = 8 * (i % 4);
    // Byte i: sign-extended for signed quants (arithmetic shift), the others are below 64.
    Value q = signedQuants(f) ? (at == 24 ? w : w << (24u - at)) >> 24u : (at == 0 ? w : w >> at) & 0xFF;
    if (g.intOffset) q = q - g.intOffset;
    Value v = mulRn(kb, g.scale, toF32(kb, q));
    y.push_back(g.min.valid() ? subRn(kb, v, g.min) : v);
  }
  return y;
}

// Elements 8j .. 8j+7 of the block at blk as f32.
std::vector<Value> decode8(KernelBuilder& kb, const FmtInfo& f, Value blk, Value j, Reads reads = Reads::Narrow) {
  return weightsOf(kb, f, decodeInt(kb, f, blk, j, Reuse::Once, reads));
}

// A 16-byte chunk of a q4_k or q5_k block, read by 16-byte loads (the block 16-byte aligned): chunk
// c holds values 16h .. 16h + 15 (h = c % 2) of sub-blocks 2p and 2p + 1 (p = c / 2), the low and
// high nibbles of qs bytes 16c .. 16c + 15 (and for q5_k their fifth bits from bytes 16h .. 16h + 15
// of qh). q[e][j]: values 16h + 4j .. 16h + 4j + 3 of sub-block 2p + e as bytes (0..31); w = D q - M.
struct WideChunk {
  Value q[2][4];
  Value D[2], M[2];
};

WideChunk wideChunk(KernelBuilder& kb, const FmtInfo& f, Value blk, Value p, Value h, Reuse reuse = Reuse::Once) {
  std::vector<Value> head = words16(kb, blk, reuse, "chunk");
  unsigned qsAt = f.fmt == Fmt::Q4_K ? 16 : 48;
  std::vector<Value> qs = words16(kb, at(kb, blk, (((p << 1u) + h) << 4u) + qsAt), reuse, "chunk");
  std::vector<Value> qh;
  if (f.fmt == Fmt::Q5_K) qh = words16(kb, at(kb, blk, (h << 4u) + 16u), reuse, "chunk");
  WideChunk c;
  for (unsigned e = 0; e < 2; ++e) {
    Value s = ((p << 1u) + e).named("sub");
    std::tie(c.D[e], c.M[e]) = scaleMinK4(kb, head, s);
    for (unsigned j = 0; j < 4; ++j) {
      Value v = (e == 0 ? qs[j] : qs[j] >> 4u) & 0x0F0F0F0Fu;
      if (f.fmt == Fmt::Q5_K) v = v | (((qh[j] >> s) & 0x01010101u) << 4u);
      c.q[e][j] = v;
    }
  }
  return c;
}

// Group g of a tensor whose rows are whole blocks: its block's address and its index in the block.
std::pair<Value, Value> groupBlock(KernelBuilder& kb, const FmtInfo& f, Value base, Value g) {
  unsigned perBlock = f.qk / kGroup;
  Value blk = kb.ptradd(base, kb.mul_wide(g >> log2u(perBlock), kb.u32(f.bytes)), "blk");
  return {blk, (g & (perBlock - 1)).named("grp")};
}

// The alignment of a tensor's base that lets decodeInt read blocks of format f by words
// (Reads::Words: q4_k and q5_k by 16- and 8-byte loads, their blocks multiples of 16 bytes; q6_k
// and mxfp4 by 32-bit windows); 0 where it reads none.
unsigned wordAlignment(const FmtInfo& f) {
  switch (f.fmt) {
    case Fmt::Q4_K:
    case Fmt::Q5_K: return 16;
    case Fmt::Q6_K:
    case Fmt::MXFP4: return 4;
    default: return 0;
  }
}

// Whether tensors of format f at `bases`, each `bytes` long (u32: only its low bits count), may
// be read by words: every base aligned so, and for mxfp4, whose windows pass a block's end by up
// to 3 bytes, each tensor a multiple of 4 bytes long, so that none leaves its tensor. One test a
// launch, so that the threads of a warp take the same path.
Value wordReads(KernelBuilder& kb, const FmtInfo& f, std::initializer_list<Value> bases, Value bytes) {
  Value ok = allAligned(kb, bases, wordAlignment(f), "word_aligned");
  if (f.fmt != Fmt::MXFP4) return ok;
  return (ok & ((bytes & 3u) == 0u)).named("word_reads");
}

// decode8 of group j of the block at blk, by words where `words` (wordReads) holds.
std::vector<Value> decode8Fast(KernelBuilder& kb, const FmtInfo& f, Value blk, Value j, Value words) {
  if (wordAlignment(f) == 0) return decode8(kb, f, blk, j);
  return kb.if_else(
      words, [&] { return decode8(kb, f, blk, j, Reads::Words); }, [&] { return decode8(kb, f, blk, j); },
      {.label = "reads"});
}

// ---- dequantize -----------------------------------------------------------------------------

std::optional<ir::Module> buildDequantize(const Options& o, ir::Diagnostics& diags) {
  const FmtInfo& f = formatOption(o);
  Storage s = storageOption(o);
  ir::Module m = newModule();
  KernelBuilder kb(m, "dequantize");
  Value q = kb.param(kGlobalPtr, "q");
  Value y = kb.param(kGlobalPtr, "y");
  Value rows = kb.param(Type::u32(), "rows");
  Value k = kb.param(Type::u32(), "k");
  kb.reqntid(kBlock);
  // Rows are whole blocks stored back to back, so the tensor is one sequence of groups.
  Value g = kb.mad(kb.ctaid(Mod::X), kb.u32(kBlock), kb.tid(Mod::X), "g");
  Value groups = (rows * (k >> 3u)).named("groups");
  kb.if_then(
      (g < groups).named("has_group"),
      [&] {
        auto [blk, j] = groupBlock(kb, f, q, g);
        Value bytes = ((groups >> log2u(f.qk / kGroup)) * f.bytes).named("q_bytes");
        std::vector<Value> v = decode8Fast(kb, f, blk, j, wordReads(kb, f, {q}, bytes));
        Value py = kb.ptradd(y, kb.mul_wide(g, kb.u32(kGroup * bytesOf(s))), "py");
        kb.if_else(
            allAligned(kb, {y}, 16),
            [&] {
              Value pa = assumeAligned16(kb, py, "py.a");
              unsigned per = vecElems(s);
              for (unsigned i = 0; i < kGroup; i += per)
                storeVecF32(kb, i == 0 ? pa : kb.ptradd(pa, kb.u64(16 * (i / per))),
                            std::span<const Value>(v).subspan(i, per), s);
            },
            [&] {
              for (unsigned i = 0; i < kGroup; ++i) storeF32(kb, kb.ptradd(py, kb.u64(i * bytesOf(s))), v[i], s);
            },
            {.label = "store"});
      },
      "group");
  kb.ret();
  return finish(kb, m, diags);
}

// ---- embedding ------------------------------------------------------------------------------
// y row t = row ids[t] of table (rows x k): a plain f32/bf16/f16 table, or ggml blocks decoded as
// dequantize decodes them (bit-exact). One thread per 8 elements of y; an id outside the table
// gives a row of NaN, and nothing is read for it.

// Stores the 8 values of group `gi` of y's row starting at `yrow`: 16-byte vectors when `vector`
// (k a multiple of 8, y 16-byte aligned), else element by element below k.
void storeGroup(KernelBuilder& kb, Storage s, Value yrow, Value gi, Value k, Value vector, const std::vector<Value>& v) {
  Value py = kb.ptradd(yrow, kb.mul_wide(gi, kb.u32(kGroup * bytesOf(s))), "py");
  kb.if_else(
      vector,
      [&] {
        Value pa = assumeAligned16(kb, py, "py.a");
        const unsigned per = vecElems(s);
        for (unsigned i = 0; i < kGroup; i += per)
          storeVecF32(kb, i == 0 ? pa : kb.ptradd(pa, kb.u64(16 * (i / per))), std::span<const Value>(v).subspan(i, per), s);
      },
      [&] {
        for (unsigned i = 0; i < kGroup; ++i)
          kb.if_then(((gi << 3u) + i < k).named("in_row"),
                     [&] { storeF32(kb, kb.ptradd(py, kb.u64(i * bytesOf(s))), v[i], s); }, "element");
      },
      {.label = "store"});
}

std::optional<ir::Module> buildEmbedding(const Options& o, ir::Diagnostics& diags) {
  const std::string format = o.text("format");
  const bool plain = format == "f32" || format == "bf16" || format == "f16";
  const Storage s = storageOption(o);  // y
  ir::Module m = newModule();
  KernelBuilder kb(m, "embedding");
  Value table = kb.param(kGlobalPtr, "table");
  Value ids = kb.param(kGlobalPtr, "ids");
  Value y = kb.param(kGlobalPtr, "y");
  Value n = kb.param(Type::u32(), "n");
  Value rows = kb.param(Type::u32(), "rows");
  Value k = kb.param(Type::u32(), "k");
  const bool pairs = o.flag("pairs");
  Value slots = pairs ? kb.max(kb.param(Type::u32(), "slots"), kb.u32(1), "slots_or_1") : Value();
  kb.reqntid(kBlock);
  Value g = kb.mad(kb.ctaid(Mod::X), kb.u32(kBlock), kb.tid(Mod::X), "g");
  Value perRow = ((k + (kGroup - 1)) >> 3u).named("groups_per_row");
  kb.if_then(
      (g < (n * perRow).named("groups")).named("has_group"),
      [&] {
        Value t = (g / perRow).named("token"), gi = (g - t * perRow).named("gi");
        Value id = kb.load(kb.index(ids, t, 4), Type::u32(), {Mod::NcMod}, "id");
        if (pairs) id = (id / slots).named("token");  // (moe_align's padding, 0xFFFFFFFF, past any table)
        Value whole = ((k & (kGroup - 1)) == 0u).named("whole_groups");
        Value nan = kb.f32(std::numeric_limits<float>::quiet_NaN());
        std::vector<Value> v = kb.if_else(
            (id < rows).named("in_table"),
            [&] {
              if (!plain) {
                const FmtInfo& f = formatOption(o);
                auto [blk, j] = groupBlock(kb, f, table, (id * perRow + gi).named("src_group"));
                Value bytes = (rows * (k / f.qk) * f.bytes).named("table_bytes");
                return decode8Fast(kb, f, blk, j, wordReads(kb, f, {table}, bytes));
              }
              const Storage ts = storageOption(o, "format");
              Value src = kb.index(table, (kb.mul_wide(id, k) + kb.cvt(gi << 3u, Type::u64())).named("src_elem"),
                                   bytesOf(ts), "src");
              return kb.if_else(
                  (whole & allAligned(kb, {table}, 16)).named("vector_load"),
                  [&] {
                    Value sa = assumeAligned16(kb, src, "src.a");
                    std::vector<Value> out;
                    for (unsigned i = 0; i < kGroup; i += vecElems(ts))
                      for (Value e : loadVecF32(kb, i == 0 ? sa : kb.ptradd(sa, kb.u64(16 * (i / vecElems(ts)))), ts, true))
                        out.push_back(e);
                    return out;
                  },
                  [&] {
                    // Elements past k read the row's last element (never past the table) and are not stored.
                    std::vector<Value> out;
                    Value last = ((k - 1u) - (gi << 3u)).named("last_in_group");
                    for (unsigned i = 0; i < kGroup; ++i)
                      out.push_back(loadF32(kb, kb.index(src, kb.min(kb.u32(i), last), bytesOf(ts)), ts, true, "e"));
                    return out;
                  },
                  {.label = "load"});
            },
            [&] { return std::vector<Value>(kGroup, nan); }, {.label = "row"});
        Value yrow = kb.index(y, kb.mul_wide(t, k), bytesOf(s), "yrow");
        storeGroup(kb, s, yrow, gi, k, (whole & allAligned(kb, {y}, 16)).named("vector_store"), v);
      },
      "group");
  kb.ret();
  return finish(kb, m, diags);
}

// ---- quantize_q8_1 --------------------------------------------------------------------------

Value toHalfBits(KernelBuilder& kb, Value v) {
  Value h = kb.cvt(v, Type::of(Scalar::F16));
  return kb.cvt(kb.bitcast(h, Type::of(Scalar::U16)), Type::u32());
}

// ggml's quantize_row_q8_1_ref of a block of 32 values: d = amax/127, q = roundf(x * (1/d))
// (round half away from zero), s = half(d * sum(q)). Its parts: d and the factor 1/d (0 for d = 0)
// from the block's largest |x|, q of one value (s32), and the block's head word from d and sum(q).
struct Q81Scale {
  Value d, id;
};
Q81Scale q81ScaleOf(KernelBuilder& kb, Value amax) {
  Value d = kb.op(Op::Div, Type::f32(), {amax, kb.f32(127.0f)}, {Mod::Rn}, "d");
  Value inv = kb.op(Op::Div, Type::f32(), {kb.f32(1.0f), d}, {Mod::Rn}, "inv");
  return {d, kb.select((d != 0.0f).named("nonzero"), inv, kb.f32(0.0f), "id")};
}
Value q81Quant(KernelBuilder& kb, Value v, Value id) {
  Value t = mulRn(kb, v, id);
  // roundf: truncate, then step away from zero when the dropped fraction is at least 1/2
  // (t - trunc(t) is exact for |t| < 2^23; here |t| <= 127).
  Value qt = kb.cvt(t, Type::of(Scalar::S32), "qt");
  Value frac = subRn(kb, t, toF32(kb, qt));
  return kb.select((frac >= 0.5f).named("up"), qt + 1, kb.select((frac <= -0.5f).named("down"), qt - 1, qt), "q");
}
Value q81Head(KernelBuilder& kb, Value d, Value sum) {
  Value sv = mulRn(kb, toF32(kb, sum), d);
  return toHalfBits(kb, d) | (toHalfBits(kb, sv) << 16u);
}

// One block of 32 values, one per lane of a converged warp (v: the lane's value, stored at the
// 36-byte block py, 4-byte aligned).
void quantizeBlockQ81(KernelBuilder& kb, Value v, Value lane, Value py) {
  const Q81Scale sc = q81ScaleOf(kb, kb.warp_reduce_max(kb.abs(v), "amax"));
  Value qv = q81Quant(kb, v, sc.id);
  Value sum = kb.warp_reduce_sum(qv, "qsum");
  // Four lanes' bytes make one 32-bit word.
  Value b = kb.bitcast(qv, Type::u32()) & 0xFFu;
  Value word = b | (kb.shfl(Mod::Down, b, 1) << 8u) | (kb.shfl(Mod::Down, b, 2) << 16u) |
               (kb.shfl(Mod::Down, b, 3) << 24u);
  kb.if_then((lane & 3u) == 0u, [&] { kb.store(kb.ptradd(py, kb.cvt(lane + 4u, Type::u64())), word); }, "qs");
  kb.if_then(lane == 0u, [&] { kb.store(py, q81Head(kb, sc.d, sum)); }, "ds");
}

// The q8_1 blocks of a row held in registers (RowInRegs: V = vecElems(s) values a slot, 4 or 8):
// a block is 32 / V consecutive vectors, the same slot of neighbouring lanes, so its largest |x|
// and sum(q) are butterflies over those lanes; each lane stores its V quants (V / 4 words at
// 4 + V·p in the block, p its place there) and the block's first lane the head. The blocks
// below `blocks` (cols / 32; a slot of a block past it stores nothing) are ggml's bytes, as
// quantizeBlockQ81's.
void quantizeQ81InRegs(KernelBuilder& kb, const RowInRegs& y, Value yrow, Value blocks) {
  const unsigned V = vecElems(y.s), lanes = 32 / V;
  for (unsigned k = 0; k < y.bytes.size(); ++k)
    kb.if_then(y.warpHas[k], [&] {  // a slot no lane of the warp has inside the row: skipped by the warp
      const std::vector<Value> v = y.values(kb, k);
      Value amax = kb.abs(v[0]);
      for (unsigned i = 1; i < V; ++i) amax = kb.max(amax, kb.abs(v[i]));
      const Q81Scale sc = q81ScaleOf(kb, kb.warp_reduce(Op::Max, amax, lanes, "amax"));
      std::vector<Value> q;
      for (Value x : v) q.push_back(q81Quant(kb, x, sc.id));
      Value sum = q[0];
      for (unsigned i = 1; i < V; ++i) sum = sum + q[i];
      sum = kb.warp_reduce(Op::Add, sum, lanes, "qsum");
      Value b = (y.chunk[k] >> static_cast<uint32_t>(std::countr_zero(lanes))).named("qblock");
      Value place = (y.chunk[k] & (lanes - 1)).named("place");
      kb.if_then((b < blocks).named("has_block"), [&] {
        Value py = kb.ptradd(yrow, kb.mul_wide(b, kb.u32(kQ81Bytes)), "py");
        for (unsigned w = 0; w < V / 4; ++w) {
          Value word = kb.bitcast(q[4 * w], Type::u32()) & 0xFFu;
          for (unsigned i = 1; i < 4; ++i) word = word | ((kb.bitcast(q[4 * w + i], Type::u32()) & 0xFFu) << (8 * i));
          kb.store(kb.ptradd(py, kb.cvt(place * V + (4 + 4 * w), Type::u64())), word.named("qs"));
        }
        kb.if_then(place == 0u, [&] { kb.store(py, q81Head(kb, sc.d, sum)); }, "ds");
      }, "store_block");
    }, "slot" + std::to_string(k));
}

std::optional<ir::Module> buildQuantizeQ81(const Options& o, ir::Diagnostics& diags) {
  Storage s = storageOption(o);
  ir::Module m = newModule();
  KernelBuilder kb(m, "quantize_q8_1");
  Value x = kb.param(kGlobalPtr, "x");
  Value y = kb.param(kGlobalPtr, "y");
  Value n = kb.param(Type::u32(), "n");
  kb.reqntid(kBlock);
  Value tid = kb.tid(Mod::X, "tid");
  Value lane = (tid & 31u).named("lane");
  Value blockIdx = kb.mad(kb.ctaid(Mod::X), kb.u32(kBlock / 32), tid >> 5u, "qblock");
  kb.if_then(
      (blockIdx < (n >> 5u)).named("has_block"),  // warp-uniform: the shuffles stay converged
      [&] {
        Value e = kb.mad(blockIdx, kb.u32(32), lane, "e");
        Value v = loadF32(kb, kb.index(x, e, bytesOf(s), "px"), s, true, "v");
        quantizeBlockQ81(kb, v, lane, kb.ptradd(y, kb.mul_wide(blockIdx, kb.u32(kQ81Bytes)), "py"));
      },
      "block");
  kb.ret();
  return finish(kb, m, diags);
}

// ---- rmsnorm_quantize_q8_1 -------------------------------------------------------------------

// rmsnorm (kernels/Norms.cpp) of each row, then quantize_q8_1 of the result, in one launch: one
// block of 256 threads per row. 1 / rms is rmsnorm's, computed by rmsnorm's own code
// (rmsnormFused), and each value is rounded to dtype as rmsnorm stores it, so the blocks equal the
// unfused pair's byte for byte when rmsnorm's y would be 16-byte aligned too (its alignment picks
// rmsnorm's path; docs/kernels.md). Where the row fits in registers and x and weight are 16-byte
// aligned, x is read once and the blocks come from rmsnorm's y in registers, 4 or 8 lanes a block
// (quantizeQ81InRegs); otherwise, after a pass for 1 / rms, each warp quantizes blocks of 32 of the
// row a value a lane, re-reading x (an L2 hit).
std::optional<ir::Module> buildRmsnormQuantizeQ81(const Options& o, ir::Diagnostics& diags) {
  Storage s = storageOption(o);
  unsigned bytes = bytesOf(s);
  const std::optional<unsigned> slots = normSlots(o, s, diags);
  if (!slots) return std::nullopt;
  ir::Module m = newModule();
  KernelBuilder kb(m, "rmsnorm_quantize_q8_1");
  Value x = kb.param(kGlobalPtr, "x");
  Value weight = kb.param(kGlobalPtr, "weight");
  Value y = kb.param(kGlobalPtr, "y");
  kb.param(Type::u32(), "rows");
  Value cols = kb.param(Type::u32(), "cols");
  Value eps = kb.param(Type::f32(), "eps");
  kb.reqntid(kBlock);
  // As rmsnorm: the row in registers without spills (64 values a thread for bf16 by default).
  kb.minnctapersm(normMinBlocks(s, *slots));
  ir::SharedArray scratch = kb.shared("scratch", Type::f32(), 2 * (kBlock / 32));
  Value tid = kb.tid(Mod::X, "tid");
  Value row = kb.ctaid(Mod::X, "row");
  Value xrow = kb.index(x, kb.mul_wide(row, cols), bytes, "xrow");
  Value blocks = (cols >> 5u).named("qblocks");
  Value yrow = kb.ptradd(y, kb.mul_wide(row, blocks * kQ81Bytes), "yrow");
  rmsnormFused(
      kb, s, tid, xrow, weight, cols, eps, allAligned(kb, {x, weight}, 16), scratch, *slots,
      [&](const RowInRegs& normed) { quantizeQ81InRegs(kb, normed, yrow, blocks); },
      [&](Value inv) {
        Value lane = (tid & 31u).named("lane");
        // Warp-uniform trip counts: the quantizer's shuffles stay converged.
        kb.for_range(
            tid >> 5u, blocks, kb.u32(kBlock / 32), {},
            [&](Value b, std::span<Value>) {
              Value e = kb.mad(b, kb.u32(32), lane, "e");
              Value xv = loadF32(kb, kb.index(xrow, e, bytes), s, true, "xv");
              Value wv = loadF32(kb, kb.index(weight, e, bytes), s, true, "wv");
              Value v = roundToStorage(kb, (xv * inv) * wv, s);  // as rmsnorm's store leaves it
              quantizeBlockQ81(kb, v, lane, kb.ptradd(yrow, kb.mul_wide(b, kb.u32(kQ81Bytes)), "py"));
              return std::vector<Value>{};
            },
            {.label = "quantize", .iv = "b"});
      });
  kb.ret();
  return finish(kb, m, diags);
}

// ---- gemv_q ---------------------------------------------------------------------------------

constexpr unsigned kWarpsPerBlock = kBlock / 32;

// Rows of w a warp takes (the rows_per_warp option). Each lane decodes the weights of all of them
// at the same positions of k and multiplies each x value it loads with every one: at ntok >= 2 the
// ntok columns of x that a row reads (f32 at ntok 8: 32 bytes per weight, against 0.56 bytes of
// q4_k) outweigh its weights many times over, so sharing them between rows cuts the bytes the SMs
// read from L2, for more registers. The default (0) is 2 where the registers stay moderate (at
// most 70 at ntok 8 on sm_90a): gemv_q at ntok >= 2, but not q4_k/q5_k's 16-byte path with
// f32/bf16 x, which holds 16 decoded weights a row (124 registers at ntok 8), nor gemv_q_swiglu,
// which holds two matrices' (112-214 registers for q4_k f32, 128 for q4_k q8_1 at ntok 4).
unsigned rowsPerWarp(const Options& o, bool swiglu) {
  unsigned r = static_cast<unsigned>(o.integer("rows_per_warp"));
  if (r) return r;
  const Fmt fmt = formatOption(o).fmt;
  const bool wideF32 = (fmt == Fmt::Q4_K || fmt == Fmt::Q5_K) && o.text("activation") != "q8_1";
  return o.integer("ntok") >= 2 && !swiglu && !wideF32 ? 2 : 1;
}

// Warps that share a warp's rows (the warps_per_row option), each taking every W-th group (or
// 16-byte block chunk) of k; their sums meet in shared memory. A decode step (ntok 1) is one
// vector against the whole of w: with one warp a row, a warp walks a row of 14336 values alone,
// a load in flight at a time, while the SMs hold fewer warps than they could; splitting k over
// 4 warps (llama.cpp's mmvq does the same at one column) puts four times the loads in flight.
// The default (0) is 4 at ntok 1 and 1 beyond, where the ntok columns already give each warp
// several loads a group. An option value that is not a power of two up to 8 reads as 1 here;
// buildGemvQ refuses it.
unsigned warpsPerRow(const Options& o) {
  const auto w = static_cast<unsigned>(o.integer("warps_per_row"));
  if (w == 0) return o.integer("ntok") == 1 ? 4 : 1;
  return std::has_single_bit(w) && w <= kWarpsPerBlock ? w : 1;
}

// y[t*m + r] = sum_c deq(W)[r][c] * x[t*k + c] for t < ntok: warpsPerRow warps per rowsPerWarp
// rows, each lane decoding groups of 8 weights in registers (the dequantize decode, bit-exact) and
// multiplying them with every column of x, accumulating in f32; a warp reduction per column ends a
// warp's part, and with several warps a row their parts are added in shared memory, in order.
// gemv_q_swiglu reads two matrices, gate and up, in the same pass (each group of x is loaded
// once for both) and writes silu(gate.x) * (up.x) (or the glu option's activation of gate.x).
std::optional<ir::Module> buildGemvQ(const Options& o, bool swiglu, ir::Diagnostics& diags) {
  const FmtInfo& f = formatOption(o);
  bool q81 = o.text("activation") == "q8_1";
  Storage s = q81 ? Storage::F32 : storageOption(o, "activation");
  Storage out = swiglu ? storageOption(o, "out_dtype") : Storage::F32;
  unsigned ntok = static_cast<unsigned>(o.integer("ntok"));
  const unsigned R = rowsPerWarp(o, swiglu);
  const auto wOption = static_cast<unsigned>(o.integer("warps_per_row"));
  if (wOption != 0 && (!std::has_single_bit(wOption) || wOption > kWarpsPerBlock)) {
    diags.report(ir::Severity::Error, "", {},
                 "warps_per_row must be 1, 2, 4 or 8 (or 0: 4 at ntok 1, else 1), not " + std::to_string(wOption));
    return std::nullopt;
  }
  const unsigned W = warpsPerRow(o);
  ir::Module m = newModule();
  KernelBuilder kb(m, swiglu ? "gemv_q_swiglu" : "gemv_q");
  std::vector<Value> ws;
  if (swiglu) {
    ws.push_back(kb.param(kGlobalPtr, "gate"));
    ws.push_back(kb.param(kGlobalPtr, "up"));
  } else {
    ws.push_back(kb.param(kGlobalPtr, "w"));
  }
  unsigned mats = static_cast<unsigned>(ws.size());
  Value x = kb.param(kGlobalPtr, "x");
  Value y = kb.param(kGlobalPtr, "y");
  // f32 biases of y's rows (gemv_q_swiglu: of g and of u), added before the activation.
  std::vector<Value> biases;
  if (o.flag("bias"))
    for (const char* name : swiglu ? std::vector<const char*>{"gate_bias", "up_bias"}
                                   : std::vector<const char*>{"bias"})
      biases.push_back(kb.param(kGlobalPtr, name));
  const bool experts = o.flag("experts");
  Value ids = experts ? kb.param(kGlobalPtr, "ids") : Value();
  Value rows = kb.param(Type::u32(), "m");
  Value k = kb.param(Type::u32(), "k");
  kb.reqntid(kBlock);
  // Mixture of experts (decode): block row y is pair p = ctaid.y, which multiplies expert ids[p]
  // of the n_experts matrices (each m x k, one after another) by x's row p / slots into y's row
  // p. An id past the experts reads no weights and gives a row of NaN (`known`, below).
  Value known;
  if (experts) {
    if (ntok != 1) {
      diags.report(ir::Severity::Error, "", {},
                   "experts multiplies one x row a pair (each pair its own expert's weights): it needs ntok = 1, "
                   "not " + std::to_string(ntok));
      return std::nullopt;
    }
    const ExpertPair e = expertPair(kb, ids);
    known = e.known;
    // The expert's matrices start m * rowBytes apart.
    Value expertBytes = kb.mul_wide(rows, ((k >> log2u(f.qk)) * f.bytes).named("row_bytes"), "expert_bytes");
    for (Value& w : ws) w = kb.ptradd(w, kb.cvt(e.expert, Type::u64()) * expertBytes, "expert_w");
    for (Value& b : biases) b = kb.index(b, kb.mul_wide(e.expert, rows), 4, "expert_bias");
    const unsigned xBlockBytes = q81 ? kQ81Bytes : 32 * bytesOf(s);  // x's bytes per 32 values
    x = kb.ptradd(x, kb.mul_wide(e.xRow, (k >> 5u) * xBlockBytes), "pair_x");
    y = kb.ptradd(y, kb.mul_wide(e.pair, rows * bytesOf(out)), "pair_y");
  }
  // q4_k and q5_k have a path of 16-byte weight loads (wideLoop below).
  const bool wide = f.fmt == Fmt::Q4_K || f.fmt == Fmt::Q5_K;
  // For gemv_q_swiglu q5_k with q8_1 x at ntok 1 alone, ptxas 13.0 (sm_90, sm_90a) budgets itself
  // 40 registers and spills 8 bytes (not when the PTX's register names are unshared: emit-ptx
  // --no-reg-reuse); 48 was room enough for a group a lane an iteration, 64 is for 4 (48 spilled
  // 20 bytes). q6_k's the same since its path of word reads (4 bytes on sm_90a). Every other
  // kernel keeps ptxas's own count.
  if (swiglu && q81 && ntok == 1 && (f.fmt == Fmt::Q5_K || f.fmt == Fmt::Q6_K) && R == 1) kb.maxnreg(64);
  Value tid = kb.tid(Mod::X, "tid");
  Value lane = (tid & 31u).named("lane");
  // The warp's rows: row0, row0 + 1, ..., row0 + R - 1 (neighbours in memory); with W warps a row
  // group, warp `part` of group `group` of the block.
  Value inBlock = (tid >> 5u).named("warp_in_block");
  Value part = W == 1 ? Value() : (inBlock & (W - 1)).named("part");
  Value group = W == 1 ? inBlock : (inBlock >> log2u(W)).named("group");
  Value warp = kb.mad(kb.ctaid(Mod::X), kb.u32(kWarpsPerBlock / W), group, R == 1 ? "row0" : "warp");
  Value row0 = R == 1 ? warp : (warp * R).named("row0");
  // The first iteration of a warp's part of k, in units of the loop's step (32 lanes, or 4 blocks
  // of 8 chunks), and the step of all W parts.
  auto first = [&](Value start, unsigned step) { return W == 1 ? start : (start + part * step).named("first"); };
  // Every warp's sums: the products of its part of k (all of k when W is 1), a value per row,
  // matrix and column (sums[(ri * mats + mi) * ntok + t]). With several warps a row, a group past
  // m reads the last row, so that every warp of the block reaches the barrier that adds them.
  auto products = [&](Value firstRow) {
    Value rowBytes = ((k >> log2u(f.qk)) * f.bytes).named("row_bytes");
    // The weight rows, row by row and matrix by matrix: wrows[ri * mats + mi]. A row past m
    // reads the last row (every load valid) and is not written.
    std::vector<Value> wrows;
    for (unsigned ri = 0; ri < R; ++ri) {
      Value r = ri == 0 ? firstRow : kb.min(row0 + ri, rows - 1u, "row");
      for (Value w : ws) wrows.push_back(kb.ptradd(w, kb.mul_wide(r, rowBytes), "wrow"));
    }
    const unsigned nw = static_cast<unsigned>(wrows.size());
    Value groups = (k >> 3u).named("groups");
    // k is a multiple of 32; saying so in the bits lets tile-validation prove x's vectors aligned.
    Value kx = ((k >> 5u) << 5u).named("kx");
    // Accumulator of weight row wi and column t: acc[wi * ntok + t].
    std::vector<Value> zero(size_t(nw) * ntok, kb.f32(0.0f, "zero"));
    // A lane's unit of work: a group of 8 values, or at ntok 1 and 2 in the formats with a
    // nibblePartner P the pair of groups whose values are the low and the high nibbles of the same
    // bytes (q4_0's groups j and j + 2), decoded from one read of those bytes and their scale: q4_0
    // 5 loads for 16 values instead of 10, as many bytes a load as q8_0. Unit u is then groups
    // lowGroup(u) and lowGroup(u) + P. Beyond ntok 2 the ntok columns of x a group reads outweigh
    // its weights, and a pair's 16 decoded weights a row cost registers (q4_0 f32 ntok 8: 64 -> 92).
    const unsigned P = ntok <= 2 ? nibblePartner(f) : 0;
    const unsigned perUnit = P ? 2 : 1;
    Value units = P ? (groups >> 1u).named("units") : groups;
    auto lowGroup = [&](Value u) {
      if (!P) return u;
      if (P == 1) return (u << 1u).named("g_low");
      return (((u >> log2u(P)) << log2u(2 * P)) | (u & (P - 1))).named("g_low");
    };
    // Units a lane takes an iteration, all their loads first. At ntok 1 a group is ~4.5 bytes of
    // weights a lane (q4_0), so one at a time left a warp ~150 bytes in flight: 4 units (as pairs
    // 36 bytes of q4_0 a lane, as 4 groups of q8_0), but 2 pairs for gemv_q_swiglu with f32/bf16 x,
    // whose two matrices' decoded weights take the registers. At ntok 2 two groups (one pair), and
    // one beyond, where each group's ntok columns of x are loads enough. The units are u, u + 32 W,
    // ... (as the iterations before took them), so every sum adds its products in the same order as
    // without the unrolling; a unit past the row reads unit u again and adds nothing.
    const unsigned unroll = ntok == 1 ? (P && swiglu && !q81 ? 2 : 4) : ntok == 2 ? 2 / perUnit : 1;
    // body(gs, valid) for the `count` indices g, g + stride, ... below `bound` (an index past it
    // reads g's data again, and valid[u], unset for g itself, is false).
    auto unrolled = [&](Value g, Value bound, unsigned stride, unsigned count, auto&& body) {
      std::vector<Value> gs = {g}, valid = {Value()};
      for (unsigned u = 1; u < count; ++u) {
        Value gu = (g + stride * u).named("g_next");
        valid.push_back((gu < bound).named("in_row"));
        gs.push_back(kb.select(valid.back(), gu, g, "g_read"));
      }
      return body(gs, valid);
    };
    // The weights of each unit whose low group is in gs, in every row: out[u][wi] = decode(block, j)
    // of group gs[u] of wrows[wi] (a unit's groups).
    auto decodeGroups = [&](const std::vector<Value>& gs, auto&& decode) {
      std::vector<std::vector<decltype(decode(Value(), Value()))>> out(gs.size());
      for (size_t u = 0; u < gs.size(); ++u)
        for (Value wrow : wrows) {
          auto [blk, j] = groupBlock(kb, f, wrow, gs[u]);
          out[u].push_back(decode(blk, j));
        }
      return out;
    };
    // sum (the group's products added to acc), or acc where the group lies past the row.
    auto addIf = [&](Value in, Value acc, Value sum) { return in.valid() ? kb.select(in, sum, acc, "acc") : sum; };
    // The loop of the two group paths: `unroll` units a lane an iteration, each row's weights of
    // them decoded by decode(block, j) (the unit's groups, j's first) first, then body(g, low, in,
    // weights, next) adds group g's products (weights[wi]: row wi's) to the sums in `next`, group
    // by group (low: the unit's first group, whose q8_1 block of x is g's).
    auto groupLoop = [&](const char* label, auto&& decode, auto&& body) {
      return kb.for_range(
          first(lane, 32), units, kb.u32(32 * W * unroll), zero,
          [&](Value u0, std::span<Value> acc) {
            return unrolled(u0, units, 32 * W, unroll, [&](const std::vector<Value>& us, const std::vector<Value>& valid) {
              std::vector<Value> gs;
              for (Value u : us) gs.push_back(lowGroup(u));
              auto weights = decodeGroups(gs, decode);
              std::vector<Value> next(acc.begin(), acc.end());
              for (unsigned u = 0; u < unroll; ++u)
                for (unsigned h = 0; h < perUnit; ++h) {
                  std::vector<std::decay_t<decltype(weights[u][0][0])>> rowsOf;
                  for (const auto& w : weights[u]) rowsOf.push_back(w[h]);
                  body(h == 0 ? gs[u] : (gs[u] + P).named("g_high"), gs[u], valid[u], rowsOf, next);
                }
              return next;
            });
          },
          {.label = label, .iv = P ? "u" : "g"});
    };
    // A unit's groups from one read: group j of the block at blk, and with a partner group j + P.
    auto unitGroups = [&](Value blk, Value j, Reads reads) {
      std::vector<IntGroup> out(1);
      IntGroup high;
      out[0] = decodeInt(kb, f, blk, j, Reuse::Once, reads, P ? &high : nullptr);
      if (P) out.push_back(high);
      return out;
    };
    // x's groups are 8 elements (32 or 16 bytes), 16-byte aligned whenever x is.
    auto loop = [&](bool vector, Reads reads) {
      Value xa = vector ? assumeAligned16(kb, x, "x.a") : x;
      auto decode = [&](Value blk, Value j) {
        std::vector<std::vector<Value>> out;
        for (const IntGroup& g : unitGroups(blk, j, reads)) out.push_back(weightsOf(kb, f, g));
        return out;
      };
      return groupLoop(vector ? "vec" : "scalar", decode,
                       [&](Value g, Value, Value in, const std::vector<std::vector<Value>>& wv, std::vector<Value>& next) {
        for (unsigned t = 0; t < ntok; ++t) {
          Value e = kb.mad(kb.u32(t), kx, g << 3u, "e");
          Value px = kb.index(xa, e, bytesOf(s), "px");
          std::vector<Value> xv;
          if (vector) {
            unsigned per = vecElems(s);
            for (unsigned i = 0; i < kGroup; i += per) {
              std::vector<Value> part = loadVecF32(kb, i == 0 ? px : kb.ptradd(px, kb.u64(16 * (i / per))), s, true, "x");
              xv.insert(xv.end(), part.begin(), part.end());
            }
          } else {
            for (unsigned i = 0; i < kGroup; ++i)
              xv.push_back(loadF32(kb, kb.ptradd(px, kb.u64(i * bytesOf(s))), s, true, "x"));
          }
          for (unsigned wi = 0; wi < nw; ++wi) {
            Value& a = next[wi * ntok + t];
            Value sum = a;
            for (unsigned i = 0; i < kGroup; ++i) sum = kb.fma(wv[wi][i], xv[i], sum);
            a = addIf(in, a, sum);
          }
        }
      });
    };
    // q8_1 activations: x holds ntok columns of k/32 blocks of 36 bytes (4-byte aligned).
    // Group g's 8 int8 are bytes 4 + 8(g%4) of block g/4: two 32-bit loads, two dp4a.
    auto dp4aLoop = [&](Reads reads) {
      Value xblocks = (k >> 5u).named("xblocks");
      Value ones = kb.s32(0x01010101, "ones");
      Value izero = kb.s32(0, "izero");
      auto decode = [&](Value blk, Value j) { return unitGroups(blk, j, reads); };
      return groupLoop("dp4a", decode, [&](Value g, Value low, Value in, const std::vector<IntGroup>& wq,
                                           std::vector<Value>& next) {
        for (unsigned t = 0; t < ntok; ++t) {
          // The unit's groups share one block of x, and so its address and scale.
          Value xb = kb.ptradd(x, kb.mul_wide(kb.mad(kb.u32(t), xblocks, low >> 2u), kb.u32(kQ81Bytes)), "xb");
          Value pa = kb.ptradd(xb, kb.cvt(((g & 3u) << 3u) + 4u, Type::u64()), "pa");
          Value a0 = kb.load(pa, Type::of(Scalar::S32), {Mod::NcMod}, "a0");
          Value a1 = kb.load(kb.ptradd(pa, kb.u64(4)), Type::of(Scalar::S32), {Mod::NcMod}, "a1");
          Value d8 = q81Scale(kb, xb);
          Value suma;
          if (wq[0].intOffset || wq[0].min.valid()) suma = kb.dp4a(ones, a1, kb.dp4a(ones, a0, izero), "suma");
          for (unsigned wi = 0; wi < nw; ++wi) {
            const IntGroup& q = wq[wi];
            Value q0 = kb.bitcast(q.q[0], Type::of(Scalar::S32)), q1 = kb.bitcast(q.q[1], Type::of(Scalar::S32));
            Value sumi = kb.dp4a(q1, a1, kb.dp4a(q0, a0, izero), "sumi");
            if (q.intOffset) sumi = sumi - suma * q.intOffset;
            Value part = q.scale * toF32(kb, sumi);
            if (q.min.valid()) part = part - q.min * toF32(kb, suma);
            Value& a = next[wi * ntok + t];
            a = addIf(in, a, kb.fma(d8, part, a));
          }
        }
      });
    };
    // q4_k and q5_k rows 16-byte aligned (and x too for f32/bf16): lane l takes chunk l % 8
    // (wideChunk) of blocks l / 8, l / 8 + 4, ...: 32 values from two or three 16-byte
    // loads of weights (plus the block's head) instead of 4 groups of 9 narrow loads, so a
    // warp keeps several times the bytes in flight for the same registers.
    auto wideLoop = [&] {
      Value kblocks = (k >> 8u).named("kblocks");
      Value c = (lane & 7u).named("chunk");
      Value p = (c >> 1u).named("pair"), h = (c & 1u).named("half");
      std::vector<Value> wa;
      for (Value wrow : wrows) wa.push_back(assumeAligned16(kb, wrow, "wrow.a"));
      Value xa = q81 ? x : assumeAligned16(kb, x, "x.a");
      Value xblocks = (k >> 5u).named("xblocks");
      Value ones = kb.s32(0x01010101, "ones");
      Value izero = kb.s32(0, "izero");
      // Block bi's products (its chunks wc, of every row) added to the sums in `next` (not where
      // `in`, when given, is false).
      auto addBlock = [&](Value bi, const std::vector<WideChunk>& wc, Value in, std::vector<Value>& next) {
        for (unsigned e = 0; e < 2; ++e) {
          Value sb = ((bi << 3u) + (p << 1u) + e).named("x_block");  // x's block of 32 values
          // The f32 weights of this half, shared by the columns.
          std::vector<std::vector<Value>> wv(nw);
          if (!q81)
            for (unsigned wi = 0; wi < nw; ++wi)
              for (unsigned i = 0; i < 16; ++i) {
                Value q = (wc[wi].q[e][i / 4] >> (8 * (i % 4))) & 0xFFu;
                wv[wi].push_back(subRn(kb, mulRn(kb, wc[wi].D[e], toF32(kb, q)), wc[wi].M[e]));
              }
          for (unsigned t = 0; t < ntok; ++t) {
            if (!q81) {
              Value px = kb.index(xa, kb.mad(kb.u32(t), kx, (sb << 5u) + (h << 4u)), bytesOf(s), "px");
              std::vector<Value> xv;
              for (unsigned i = 0; i < 16; i += vecElems(s)) {
                std::vector<Value> part = loadVecF32(kb, i == 0 ? px : kb.ptradd(px, kb.u64(i * bytesOf(s))), s, true, "x");
                xv.insert(xv.end(), part.begin(), part.end());
              }
              for (unsigned wi = 0; wi < nw; ++wi) {
                Value& a = next[wi * ntok + t];
                Value sum = a;
                for (unsigned i = 0; i < 16; ++i) sum = kb.fma(wv[wi][i], xv[i], sum);
                a = addIf(in, a, sum);
              }
              continue;
            }
            Value xb = kb.ptradd(x, kb.mul_wide(kb.mad(kb.u32(t), xblocks, sb), kb.u32(kQ81Bytes)), "xb");
            Value pa = kb.ptradd(xb, kb.cvt((h << 4u) + 4u, Type::u64()), "pa");
            std::vector<Value> xw;
            for (unsigned j = 0; j < 4; ++j)
              xw.push_back(kb.load(j == 0 ? pa : kb.ptradd(pa, kb.u64(4 * j)), Type::of(Scalar::S32), {Mod::NcMod}, "xw"));
            Value d8 = q81Scale(kb, xb);
            Value suma = izero;
            for (Value v : xw) suma = kb.dp4a(ones, v, suma, "suma");
            for (unsigned wi = 0; wi < nw; ++wi) {
              Value sumi = izero;
              for (unsigned j = 0; j < 4; ++j)
                sumi = kb.dp4a(kb.bitcast(wc[wi].q[e][j], Type::of(Scalar::S32)), xw[j], sumi, "sumi");
              Value part = wc[wi].D[e] * toF32(kb, sumi) - wc[wi].M[e] * toF32(kb, suma);
              Value& a = next[wi * ntok + t];
              a = addIf(in, a, kb.fma(d8, part, a));
            }
          }
        }
      };
      // Blocks a lane takes an iteration, bi and bi + 4 W, their loads first (the sums add in the
      // same order as one block an iteration): 2 for one row of q8_1 x at ntok 1 (sm_90a, q4_k:
      // loads in flight a lane 7 -> 14, q5_k 6 -> 10); with f32 x or two matrices (swiglu) ptxas
      // kept no more in flight that way, so 1.
      const unsigned blocksAtOnce = ntok == 1 && q81 && nw == 1 ? 2 : 1;
      return kb.for_range(
          first(lane >> 3u, 4), kblocks, kb.u32(4 * W * blocksAtOnce), zero,
          [&](Value b0, std::span<Value> acc) {
            return unrolled(b0, kblocks, 4 * W, blocksAtOnce, [&](const std::vector<Value>& bs, const std::vector<Value>& valid) {
              std::vector<std::vector<WideChunk>> wcs(bs.size());
              for (size_t u = 0; u < bs.size(); ++u)
                for (Value wr : wa)
                  wcs[u].push_back(wideChunk(kb, f, kb.ptradd(wr, kb.mul_wide(bs[u], kb.u32(f.bytes)), "blk"), p, h));
              std::vector<Value> next(acc.begin(), acc.end());
              for (size_t u = 0; u < bs.size(); ++u) addBlock(bs[u], wcs[u], valid[u], next);
              return next;
            });
          },
          {.label = "wide", .iv = "bi"});
    };
    auto groupPaths = [&](Reads reads) {
      return q81 ? dp4aLoop(reads)
                 : kb.if_else(allAligned(kb, {x}, 16), [&] { return loop(true, reads); },
                              [&] { return loop(false, reads); }, {.label = "path"});
    };
    // q6_k and mxfp4 by aligned words (decodeInt's Reads::Words) where wordReads allows, each
    // matrix (an expert's: its own) m rows long.
    auto narrow = [&] {
      if (wordAlignment(f) != 4) return groupPaths(Reads::Narrow);
      Value bytes = (rows * rowBytes).named("w_bytes");
      Value ok = swiglu ? wordReads(kb, f, {ws[0], ws[1]}, bytes) : wordReads(kb, f, {ws[0]}, bytes);
      return kb.if_else(ok, [&] { return groupPaths(Reads::Words); }, [&] { return groupPaths(Reads::Narrow); },
                        {.label = "reads"});
    };
    std::vector<Value> sums;
    if (wide) {
      Value aligned = allAligned(kb, {ws[0], q81 ? ws[0] : x}, 16, "wide_ok");
      if (swiglu) aligned = aligned & allAligned(kb, {ws[1]}, 16);
      sums = kb.if_else(aligned, wideLoop, narrow, {.label = "weights"});
    } else {
      sums = narrow();
    }
    return sums;
  };
  // y of row ri and column t from `value(a)`, the row's total of sums index a, written when the row
  // is below m, by lane 0 when `lane0` is given (W 1: inside has_row, so its row 0 is below m).
  auto write = [&](unsigned ri, unsigned t, const std::function<Value(unsigned)>& value, Value lane0) {
    Value r = ri == 0 ? row0 : (row0 + ri).named("row");
    const unsigned a = ri * mats * ntok + t;
    Value total = value(a);
    Value up = swiglu ? value(a + ntok) : Value();
    if (swiglu && biases.empty()) total = gluUnit(kb, o.text("glu"), total, up);
    Value writer = !lane0.valid() ? (r < rows).named("writer") : ri == 0 ? lane0 : (lane0 & (r < rows)).named("writer");
    kb.if_then(
        writer,
        [&] {
          Value v = total;
          if (!biases.empty()) {
            auto bias = [&](unsigned i) {
              return kb.load(kb.index(biases[i], r, 4), Type::f32(), {Mod::NcMod}, "bias");
            };
            v = v + bias(0);
            if (swiglu) v = gluUnit(kb, o.text("glu"), v, up + bias(1));
          }
          storeF32(kb, kb.index(y, kb.mad(kb.u32(t), rows, r), bytesOf(out), "py"), v, out);
        },
        "write");
  };
  // The sums of a warp's part, NaN for a pair whose expert is unknown (no weights read).
  auto sumsOf = [&](Value firstRow) {
    if (!experts) return products(firstRow);
    const size_t count = size_t(R) * mats * ntok;
    return kb.if_else(
        known, [&] { return products(firstRow); },
        [&] { return std::vector<Value>(count, kb.f32(std::numeric_limits<float>::quiet_NaN(), "nan")); },
        {.label = "expert"});
  };
  if (W == 1) {
    kb.if_then(
        (row0 < rows).named("has_row"),
        [&] {
          std::vector<Value> sums = sumsOf(row0);
          for (unsigned ri = 0; ri < R; ++ri)
            for (unsigned t = 0; t < ntok; ++t)
              write(ri, t, [&](unsigned a) { return kb.warp_reduce_sum(sums[a], "total"); }, lane == 0u);
        },
        "row");
  } else {
    std::vector<Value> sums = sumsOf(kb.min(row0, rows - 1u, "row_read"));
    // Each warp's totals at partials[warp_in_block * n + a]; the group's first warp adds its W
    // warps' in order.
    const auto n = static_cast<unsigned>(sums.size());
    ir::SharedArray partials = kb.shared("partials", Type::f32(), uint64_t{kWarpsPerBlock} * n);
    Value base = kb.shared_addr(partials, "partials");
    std::vector<Value> totals;
    for (Value v : sums) totals.push_back(kb.warp_reduce_sum(v, "part_total"));
    kb.if_then(
        (lane == 0u).named("leader"),
        [&] {
          for (unsigned a = 0; a < n; ++a) kb.store(kb.index(base, kb.mad(inBlock, kb.u32(n), kb.u32(a)), 4), totals[a]);
        },
        "stage");
    kb.bar_sync();
    kb.if_then(
        ((lane == 0u) & (part == 0u)).named("adder"),
        [&] {
          auto added = [&](unsigned a) {
            Value total;
            for (unsigned w = 0; w < W; ++w) {
              Value v = kb.load(kb.index(base, kb.mad(inBlock + w, kb.u32(n), kb.u32(a)), 4), Type::f32(), {}, "part");
              total = total.valid() ? total + v : v;
            }
            return total;
          };
          for (unsigned ri = 0; ri < R; ++ri)
            for (unsigned t = 0; t < ntok; ++t) write(ri, t, added, Value());
        },
        "add");
  }
  kb.ret();
  return finish(kb, m, diags);
}

// ---- gemm_q ---------------------------------------------------------------------------------

constexpr unsigned kQTileM = 64, kQThreads = 128, kQWarps = kQThreads / 32;
// Tokens a tile (the tile_n option): 32 (warps 4 x 1, each 16 rows x 32 tokens; with experts
// moe_align's tiles of 32 pairs), or 64 (warps 2 x 2, each 32 rows x 32 tokens).
constexpr unsigned kQTileNExperts = 32;
// A stage is 8 blocks of 32 values of K (256: one k-quant block, 8 q4_0/q8_0 blocks).
constexpr unsigned kQSub = 8;
// A tile row: the stage's 256 quants as int8, then 16 bytes of padding. The 272-byte stride puts
// the same 16-byte chunk of 8 consecutive rows in 8 distinct bank groups (ldmatrix row reads),
// and a warp's staging stores fill 256 consecutive bytes of one row: both free of bank conflicts.
// (A swizzle would save the padding, but its XOR of a loop counter with the lane would hide the
// addresses from tile-validation's bank-conflict check.)
constexpr unsigned kQRowBytes = 32 * kQSub + 16;
// Per-row scale arrays: kQSub words a row, padded to an odd stride so that the reads of 8
// consecutive rows (or tokens 2 apart) at one block fall in distinct banks.
constexpr unsigned kQScaleStride = kQSub + 1;
// Weight rows (a lane's: with pairs of groups, every other row of the warp's) and tokens a warp
// stages between loop tests, their loads in flight together. (8 rows gave q6_k no more loads in
// flight on sm_90a than 4: 24 of 80 against 22-32 of 40, at 78 registers.)
constexpr unsigned kQRowUnroll = 4, kQTokenUnroll = 8;

// Y (ntok x m, f32) = X W^T for ggml-quantized W (m x k, any format) and q8_1 activations X
// (ntok rows of k/32 blocks, as quantize_q8_1 writes them). Block: 4 warps, a 64 (rows of W) x 32
// (tokens) tile of Y, warp w rows 16w .. 16w + 15 and all 32 tokens: 4 mma tiles of 16x8; or with
// tile_n = 64 a 64 x 64 tile, warp w rows 32 (w % 2) .. + 31 and tokens 32 (w / 2) .. + 31: 2 x 4
// tiles, one A fragment serving 4 of them and one B fragment 2.
// K advances a stage of 8 blocks of 32 values at a time. Staging: a warp decodes one row at a
// time, lane l the 8 values 8l .. 8l + 7 of the stage (decodeInt's group; q4_0's q - 8 and
// the like made signed bytes), so the lanes' loads cover the row's bytes of the stage
// together (a few cache sectors per load, the scales one); in the formats of two nibble groups a
// byte two rows at a time, lane l a pair of groups (below, "Pairs of groups"). Tokens likewise,
// lane l the bytes 8(l % 4) .. + 7 of the stage's q8_1 block l / 4. Quants go to shared memory as int8, the scales
// as f32 beside (and for the formats with mins those and each token's sum of quants per block). Then per
// block of 32: one mma.sync m16n8k32 (s8, s32 from zero) per tile gives the block's integer dot
// products, scaled into f32 accumulators: d_w d_x sum, or d_x (D sum - M sum_a) with a min.
// q6_k, q3_k and q2_k have an integer scale per 16 values, two in a block of 32: two mma per
// tile, on the A fragment with its K 16..31 registers zeroed and with its K 0..15 registers
// zeroed, give the halves' sums, combined exactly in s32 as sc_0 sum_0 + sc_1 sum_1 (at most 2^24
// in magnitude, so exact in f32 too), then scaled by d_w d_x; q2_k's integer mins per 16 values
// likewise meet the token's sums of quants over the halves, m_0 sum_a0 + m_1 sum_a1, times dmin.
// Rows and tokens past the edges, and blocks past k in the last stage, stage clamped copies
// (their results are not stored, or their blocks not multiplied).
std::optional<ir::Module> buildGemmQ(const Options& o, ir::Diagnostics& diags) {
  const FmtInfo& f = formatOption(o);
  ir::Module m = newModule();
  KernelBuilder kb(m, "gemm_q");
  const bool experts = o.flag("experts");
  // The warps' grid over the tile (warpsM x warpsN), and each warp's rows: mFrags A fragments of 16.
  const auto tileN = static_cast<unsigned>(o.integer("tile_n"));
  if (experts && tileN != kQTileNExperts) {
    diags.report(ir::Severity::Error, "", {},
                 "experts take tile_n = 32, the tiles of moe_align's default tile, not " + std::to_string(tileN));
    return std::nullopt;
  }
  const unsigned warpsN = tileN / 32, warpsM = kQWarps / warpsN;
  const unsigned warpRows = kQTileM / warpsM, mFrags = warpRows / 16;
  Value w = kb.param(kGlobalPtr, "w");
  Value x = kb.param(kGlobalPtr, "x");
  Value y = kb.param(kGlobalPtr, "y");
  Value bias = o.flag("bias") ? kb.param(kGlobalPtr, "bias") : Value();  // f32, one a row of w
  Value sorted = experts ? kb.param(kGlobalPtr, "sorted") : Value();
  Value tileExperts = experts ? kb.param(kGlobalPtr, "tile_experts") : Value();
  Value rows = kb.param(Type::u32(), "m");
  Value k = kb.param(Type::u32(), "k");
  Value ntok, nExperts, slots;
  if (experts) {
    nExperts = kb.param(Type::u32(), "n_experts");
    kb.param(Type::u32(), "pairs");  // the grid's height (moeTiles)
    slots = kb.max(kb.param(Type::u32(), "slots"), kb.u32(1), "slots_or_1");
  } else {
    ntok = kb.param(Type::u32(), "ntok");
  }
  kb.reqntid(kQThreads);
  // 64 x 64 tiles take 39-45 KB of shared memory: two blocks an SM on sm_86/sm_89 (100 KB), three
  // on sm_80, three or four on sm_90 (there by registers); each does twice a 64 x 32 block's mmas per
  // staged weight byte.
  if (tileN == 64) kb.minnctapersm(2);
  ir::SharedArray wq = kb.shared("wq", Type::of(Scalar::B32), kQTileM * kQRowBytes / 4, 128);
  ir::SharedArray xq = kb.shared("xq", Type::of(Scalar::B32), tileN * kQRowBytes / 4, 128);
  // q6_k, q3_k, q2_k (halfScales): wd holds each row's d (one k-quant block a stage), wsc the
  // integer scales of the 16-value halves (half h of block s of row r at r * (2 kQSub + 1) + 2s + h;
  // q2_k's as 16-bit words, the scale in the low byte, the min in the high: its mins and the
  // tokens' sums over halves would otherwise take it past 33 KiB, where sm_86/sm_89 hold two blocks
  // an SM, not three). nvfp4 (halfF32): wsc holds the halves' f32 scales, and there is no wd.
  const bool halfScales = halfScaled(f), halfF32 = f.fmt == Fmt::NVFP4, halves = halfScales || halfF32;
  ir::SharedArray wd;
  if (!halfF32) wd = kb.shared("wd", Type::f32(), halfScales ? kQTileM : kQTileM * kQScaleStride);
  ir::SharedArray xd = kb.shared("xd", Type::f32(), tileN * kQScaleStride);
  constexpr unsigned kScStride = 2 * kQSub + 1;
  // The mins (W: per block, or with halfScales each row's dmin) and the tokens' sums of quants
  // per block (X; with halfScales per half: q2_k).
  const bool withMin = withMins(f);
  const bool halfMins = halfScales && withMin;  // q2_k
  ir::SharedArray wmin, xsum;
  if (withMin) {
    wmin = kb.shared("wmin", Type::f32(), halfScales ? kQTileM : kQTileM * kQScaleStride);
    xsum = kb.shared("xsum", Type::of(Scalar::S32), tileN * (halfScales ? kScStride : kQScaleStride));
  }
  ir::SharedArray wsc;
  const unsigned scShift = halfMins ? 1 : 2;  // log2 of wsc's element bytes
  const Scalar scType = halfMins ? Scalar::U16 : halfF32 ? Scalar::F32 : Scalar::S32;
  if (halves) wsc = kb.shared("wsc", Type::of(scType), kQTileM * kScStride);
  Value tid = kb.tid(Mod::X, "tid");
  Value lane = (tid & 31u).named("lane"), warp = (tid >> 5u).named("warp");
  Value m0 = (kb.ctaid(Mod::X) * kQTileM).named("m0");
  Value n0 = (kb.ctaid(Mod::Y) * tileN).named("n0");
  Value blocks = (k >> 5u).named("kblocks");
  Value rowBytes = ((k >> log2u(f.qk)) * f.bytes).named("row_bytes");
  // Experts: tile y of moe_align's output, rows n0 .. n0 + 31 of `sorted`: their pairs (shared
  // memory, for the stores' y rows) and x rows (p / slots, 0 for padding: the staging's, found
  // once here rather than in every stage), and the tile's expert, whose matrix w becomes. A tile
  // past the last does nothing; an unknown expert's pairs get rows of NaN.
  Value tilePairs, tileRows;
  if (experts) {
    Value expert = kb.load(kb.index(tileExperts, kb.ctaid(Mod::Y), 4), Type::u32(), {Mod::NcMod}, "expert");
    kb.if_then((expert == kNoExpert).named("no_tile"), [&] { kb.ret(); }, "no_tile");
    tilePairs = kb.shared_addr(kb.shared("tile_pairs", Type::u32(), tileN), "tile_pairs");
    tileRows = kb.shared_addr(kb.shared("tile_x_rows", Type::u32(), tileN), "tile_x_rows");
    kb.if_then(tid < tileN, [&] {
      Value pair = kb.load(kb.index(sorted, n0 + tid, 4), Type::u32(), {Mod::NcMod}, "pair");
      kb.store(kb.index(tilePairs, tid, 4), pair);
      kb.store(kb.index(tileRows, tid, 4), kb.select(pair == kNoExpert, kb.u32(0), pair / slots, "x_row"));
    }, "tile_pairs");
    kb.bar_sync();
    kb.if_then((expert >= nExperts).named("unknown_expert"), [&] {
      kb.for_range(tid, kb.u32(kQTileM * tileN), kQThreads, [&](Value i) {
        Value pair = kb.load(kb.index(tilePairs, i >> log2u(kQTileM), 4), Type::u32(), "pair");
        Value row = (m0 + (i & (kQTileM - 1))).named("row");
        kb.if_then(((pair != kNoExpert) & (row < rows)).named("in"), [&] {
          kb.store(kb.index(y, kb.mad(pair, rows, row), 4, "py"), kb.f32(std::numeric_limits<float>::quiet_NaN()));
        }, "nan_row");
      }, {.label = "unknown", .iv = "i"});
      kb.ret();
    }, "unknown_expert");
    w = kb.ptradd(w, kb.mul_wide(expert, rows) * kb.cvt(rowBytes, Type::u64()), "w_expert");
    if (bias.valid()) bias = kb.index(bias, kb.mul_wide(expert, rows), 4, "bias_expert");
  }
  // x's row of tile row t: the token's (t clamped to the last), or the pair's p / slots (padding: 0).
  auto xRowOf = [&](Value t) {
    return experts ? kb.load(kb.index(tileRows, t, 4), Type::u32(), "x_row") : kb.min(n0 + t, ntok - 1u);
  };

  const unsigned perBlock = f.qk / 32;  // 32-value blocks of K per ggml block
  Value sub = (lane >> 2u).named("sub"), quarter = (lane & 3u).named("quarter");
  // Each array's address, taken once here (ptxas would otherwise materialize it again in each
  // predicated store).
  std::map<int, Value> sharedBase;
  for (const ir::SharedArray* a : {&wq, &xq, &wd, &xd, &wmin, &xsum, &wsc})
    if (a->valid()) sharedBase[a->index] = kb.shared_addr(*a);
  auto sharedAt = [&](const ir::SharedArray& a, Value byteOff) { return kb.ptradd(sharedBase.at(a.index), byteOff); };
  // A staged row of a tile (or token): row first + u of it, first the loop iteration's (its
  // multiples computed once an iteration, u's constant offsets folded into the accesses).
  struct StagedRow {
    Value first;
    unsigned u;
  };
  auto rowIndex = [&](StagedRow r) { return r.u ? (r.first + r.u).named("r") : r.first; };
  auto rowTimes = [&](StagedRow r, unsigned bytes) { return r.u ? r.first * bytes + r.u * bytes : r.first * bytes; };
  // Byte offset of the scale (and min) of block s of tile row r (with halfScales, the row's d).
  auto wdAtRow = [&](StagedRow r, Value s) {
    return halfScales ? rowTimes(r, 4) : rowTimes(r, 4 * kQScaleStride) + (s << 2u);
  };
  auto wdAt = [&](Value r, Value s) { return wdAtRow(StagedRow{r, 0}, s); };
  // Pairs of groups (the formats whose groups j and j + 2 are the low and high nibbles of the same
  // bytes under one scale: nibblePartner 2): a lane decodes both from one read of their bytes (as
  // gemv_q does), so 16 lanes stage a row of the stage: lanes 16h' .. 16h' + 15 the tile rows of
  // parity h', lane l the groups l % 2 and l % 2 + 2 of the stage's block (l % 16) / 2, 16 bytes by
  // one store. The two are not neighbours in K: the tiles hold each block's 4 groups in the order
  // 0, 2, 1, 3, the tokens' as the weights', which leaves every block's dot product as it was.
  // (nvfp4's pairs, j and j + 1, would store their 16-value scales from two rows at once, 17 words
  // apart: a bank conflict; it stages a group a lane.)
  const unsigned P = nibblePartner(f) == 2 ? 2 : 0;
  Value pairRow, pairBlock, pairHalf;
  if (P) {
    pairRow = (lane >> 4u).named("pair_row");
    pairBlock = ((lane & 15u) >> 1u).named("pair_block");
    pairHalf = (lane & 1u).named("pair_half");
  }
  // Where the lane's 8 bytes of a tile (or token) row go: group `quarter` of the stage's block
  // `sub`, bytes 8l .. 8l + 7 of the stage, or with pairs in the tiles' order of groups.
  Value chunkAt = P ? ((sub << 5u) + ((quarter & 1u) << 4u) + ((quarter >> 1u) << 3u)).named("chunk_at") : lane << 3u;
  auto storeWords = [&](const ir::SharedArray& tile, StagedRow r, const std::vector<Value>& words) {
    kb.store(sharedAt(tile, rowTimes(r, kQRowBytes) + chunkAt), kb.pack(Type::of(Scalar::U32, 2), words, "chunk"));
  };
  // fn(r) for the tile rows (or tokens) base + step i, i < count, `unroll` of them per iteration.
  auto forRows = [&](Value base, unsigned count, unsigned unroll, auto&& fn, unsigned step = 1) {
    kb.for_range(kb.u32(0), kb.u32(count), kb.u32(unroll), [&](Value i) {
      Value first = (step == 1 ? base + i : base + i * step).named("r");
      for (unsigned u = 0; u < unroll; ++u) fn(StagedRow{first, u * step});
    }, {.label = "stage_rows", .iv = "i"});
  };
  // The same with fn(r, p) for rows (tokens) of a tile that lies inside the matrix: p = first + i
  // stride, the row's pointer carried from row to row (no clamp, no product a row).
  auto forRowPointers = [&](Value base, unsigned count, unsigned unroll, Value first, Value stride, auto&& fn,
                            unsigned step = 1) {
    kb.for_range(kb.u32(0), kb.u32(count), kb.u32(unroll), {first}, [&](Value i, std::span<Value> carried) {
      Value ptr = carried[0], r = (step == 1 ? base + i : base + i * step).named("r");
      for (unsigned u = 0; u < unroll; ++u) {
        fn(StagedRow{r, u * step}, ptr);
        ptr = kb.ptradd(ptr, stride, "next_row");
      }
      return std::vector<Value>{ptr};
    }, {.label = "stage_rows", .iv = "i"});
  };
  // Whether the block's rows of w (tokens of x) all lie inside the matrix: the staging's fast path.
  Value rowsInside = ((m0 + kQTileM) <= rows).named("rows_inside");
  Value tokensInside = experts ? Value() : ((n0 + tileN) <= ntok).named("tokens_inside");
  Value rowStride = kb.cvt(rowBytes, Type::u64()), tokenStride = kb.cvt(blocks * kQ81Bytes, Type::u64());
  // q4_k, q5_k with w 16-byte aligned: a stage is one block of each row, which 8 lanes read by
  // 16-byte loads (wideChunk), 4 rows at a time. Lane l's chunk c = l % 8 holds values
  // 16h .. 16h + 15 of sub-blocks 2p and 2p + 1 (p = c / 2, h = c % 2): two 16-byte stores into
  // the tile row, the one of sub-block 2p + (p / 2) first, which puts the 8 lanes of a row in
  // 8 distinct bank groups; lanes with h = 0 store the scales and mins of both sub-blocks.
  const bool wide = f.fmt == Fmt::Q4_K || f.fmt == Fmt::Q5_K;
  // q6_k and mxfp4 by aligned words where wordReads allows (each expert's matrix m rows long).
  Value wordsOk = wordAlignment(f) == 4 ? wordReads(kb, f, {w}, (rows * rowBytes).named("w_bytes")) : Value();
  Value wideOk, p, h, swap, wa;  // the same in every stage
  if (wide) {
    wideOk = allAligned(kb, {w}, 16, "wide_ok");
    Value c = (lane & 7u).named("chunk");
    p = (c >> 1u).named("pair"), h = (c & 1u).named("half");
    swap = ((p >> 1u) == 1u).named("swap");
    wa = assumeAligned16(kb, w, "w.a");
  }
  auto wideRows = [&](Value b0) {
    Value blkOff = kb.mul_wide(b0 >> 3u, kb.u32(f.bytes));
    // Lanes 8q .. 8q + 7 read row i + q of the warp's 16.
    for (unsigned i = 0; i < kQTileM / kQWarps; i += 4) {
      Value r = ((warp << 4u) + (lane >> 3u) + i).named("r");
      Value wrow = kb.ptradd(wa, kb.mul_wide(kb.min(m0 + r, rows - 1u), rowBytes), "wrow");
      WideChunk wc = wideChunk(kb, f, kb.ptradd(wrow, blkOff, "blk"), p, h, Reuse::Again);
      for (unsigned e = 0; e < 2; ++e) {
        // Sub-block 2p + (e ^ p / 2).
        std::vector<Value> words;
        for (unsigned j = 0; j < 4; ++j) words.push_back(kb.select(swap, wc.q[1 - e][j], wc.q[e][j]));
        Value sb = (p << 1u) + (e == 0 ? (p >> 1u) : ((p >> 1u) ^ 1u));
        kb.store(sharedAt(wq, r * kQRowBytes + (sb << 5u) + (h << 4u)), kb.pack(Type::of(Scalar::U32, 4), words, "chunk16"));
      }
      kb.if_then((h == 0u).named("w_scale"), [&] {
        for (unsigned e = 0; e < 2; ++e) {
          Value at = wdAt(r, (p << 1u) + e);
          kb.store(sharedAt(wd, at), wc.D[e]);
          kb.store(sharedAt(wmin, at), wc.M[e]);
        }
      }, "wd");
    }
  };
  auto stage = [&](Value b0) {
    // The lane's block of 32 (clamped to the last).
    Value b = kb.min(b0 + sub, blocks - 1u).named("b");
    constexpr unsigned kRowsPerWarp = kQTileM / kQWarps;
    auto groupRows = [&](Reads reads) {
      // The lane's group (with pairs: the low group of its pair) in the ggml block, and its block
      // of 32 in the stage.
      Value bw = P ? kb.min(b0 + pairBlock, blocks - 1u).named("b_pair") : b;
      Value blockInStage = P ? pairBlock : sub;
      Value blkOff = kb.mul_wide(bw >> log2u(perBlock), kb.u32(f.bytes));
      Value j = (((bw & (perBlock - 1)) << 2u) + (P ? pairHalf : quarter)).named("j");
      // q - intOffset byte by byte without borrows (q < 128): ((q | 0x80) - off) ^ 0x80.
      auto signedWords = [&](const IntGroup& g) {
        std::vector<Value> words;
        const uint32_t off = 0x01010101u * uint32_t(g.intOffset);
        for (Value v : g.q) words.push_back(g.intOffset ? (((v | 0x80808080u) - off) ^ 0x80808080u) : v);
        return words;
      };
      // Row r of the tile, whose block of the stage is at blk.
      auto row = [&](StagedRow r, Value blk) {
        IntGroup high;
        IntGroup g = decodeInt(kb, f, blk, j, Reuse::Again, reads, P ? &high : nullptr);
        std::vector<Value> words = signedWords(g);
        if (P) {
          std::vector<Value> hi = signedWords(high);
          words.insert(words.end(), hi.begin(), hi.end());
          Value at = rowTimes(r, kQRowBytes) + (pairBlock << 5u) + (pairHalf << 4u);
          kb.store(sharedAt(wq, at), kb.pack(Type::of(Scalar::U32, 4), words, "pair_chunk"));
        } else {
          storeWords(wq, r, words);
        }
        // halves: groups 2h, 2h + 1 of a block are the 16 values of its scale h (and min).
        if (halves)
          kb.if_then((quarter & 1u) == 0u, [&] {
            Value at = rowTimes(r, kScStride << scShift) + ((lane >> 1u) << scShift);
            if (!halfMins) {
              kb.store(sharedAt(wsc, at), halfF32 ? g.scale : g.subScale);
              return;
            }
            Value both = kb.bitcast(g.subScale | (g.subMin << 8u), Type::u32(), "sc_min");
            kb.store(sharedAt(wsc, at), kb.cvt(both, Type::of(Scalar::U16)));
          }, "wsc");
        if (!halfF32)
          kb.if_then(((halfScales ? lane : P ? pairHalf : quarter) == 0u).named("w_scale"), [&] {
            Value at = wdAtRow(r, blockInStage);
            kb.store(sharedAt(wd, at), halfScales ? g.d : g.scale);
            if (withMin) kb.store(sharedAt(wmin, at), halfScales ? g.dmin : g.min);
          }, "wd");
      };
      // The warp's rows: all 16 a lane, or with pairs every other one from pairRow.
      const unsigned step = P ? 2 : 1;
      Value base = P ? (warp * kRowsPerWarp + pairRow).named("pair_base") : warp * kRowsPerWarp;
      kb.if_else(
          rowsInside,
          [&] {
            Value first = kb.ptradd(kb.ptradd(w, kb.mul_wide(m0 + base, rowBytes)), blkOff, "first_blk");
            Value stride = P ? (rowStride * uint64_t{2}).named("pair_stride") : rowStride;
            forRowPointers(base, kRowsPerWarp / step, kQRowUnroll, first, stride, row, step);
          },
          [&] {
            forRows(base, kRowsPerWarp / step, kQRowUnroll, [&](StagedRow r) {
              Value wrow = kb.ptradd(w, kb.mul_wide(kb.min(m0 + rowIndex(r), rows - 1u), rowBytes), "wrow");
              row(r, kb.ptradd(wrow, blkOff, "blk"));
            }, step);
          },
          {.label = "w_rows"});
    };
    if (wide) {
      kb.if_else(wideOk, [&] { wideRows(b0); }, [&] { groupRows(Reads::Narrow); }, {.label = "w_path"});
    } else if (wordsOk.valid()) {
      kb.if_else(wordsOk, [&] { groupRows(Reads::Words); }, [&] { groupRows(Reads::Narrow); }, {.label = "w_reads"});
    } else {
      groupRows(Reads::Narrow);
    }
    const unsigned tokensPerWarp = tileN / kQWarps;
    Value xBlk = kb.mul_wide(b, kb.u32(kQ81Bytes));
    // Token t of the tile, whose block of the stage is at xb.
    auto token = [&](StagedRow t, Value xb) {
      std::vector<Value> xw;
      for (unsigned i = 0; i < 2; ++i)
        xw.push_back(kb.load(at(kb, xb, (quarter << 3u) + (4u + 4 * i)), Type::u32(), {Mod::NcMod}, "xw"));
      storeWords(xq, t, xw);
      Value at = rowTimes(t, 4 * kQScaleStride) + (sub << 2u);
      Value sum;
      if (withMin) {
        Value ones = kb.s32(0x01010101, "ones");
        sum = kb.s32(0, "izero");
        for (Value v : xw) sum = kb.dp4a(ones, kb.bitcast(v, Type::of(Scalar::S32)), sum, "xsum");
        // The block's sum over its 4 lanes, or with halfScales each half's over 2 (q2_k's mins).
        for (unsigned off : halfScales ? std::vector<unsigned>{1u} : std::vector<unsigned>{1u, 2u})
          sum = sum + kb.shfl(Mod::Bfly, sum, off, "xsum.other");
        if (halfScales)
          kb.if_then((quarter & 1u) == 0u, [&] {
            kb.store(sharedAt(xsum, rowTimes(t, 4 * kScStride) + (((sub << 1u) + (quarter >> 1u)) << 2u)), sum);
          }, "xsum");
      }
      kb.if_then((quarter == 0u).named("x_scale"), [&] {
        Value d = q81Scale(kb, xb);
        kb.store(sharedAt(xd, at), d);
        if (withMin && !halfScales) kb.store(sharedAt(xsum, at), sum);
      }, "xd");
    };
    Value base = warp * tokensPerWarp;
    auto clamped = [&] {
      forRows(base, tokensPerWarp, kQTokenUnroll, [&](StagedRow t) {
        Value xrow = kb.ptradd(x, kb.mul_wide(xRowOf(rowIndex(t)), blocks * kQ81Bytes), "xrow");
        token(t, kb.ptradd(xrow, xBlk, "xb"));
      });
    };
    if (experts) {
      clamped();
      return;
    }
    kb.if_else(
        tokensInside,
        [&] {
          Value first = kb.ptradd(kb.ptradd(x, kb.mul_wide(n0 + base, blocks * kQ81Bytes)), xBlk, "first_xb");
          forRowPointers(base, tokensPerWarp, kQTokenUnroll, first, tokenStride, token);
        },
        clamped, {.label = "x_rows"});
  };

  // The warp's rows (of the tile) and tokens.
  Value warpRow = ((warpsM == kQWarps ? warp : warp & (warpsM - 1)) * warpRows).named("warp_row");
  Value warpTok = warpsN == 1 ? kb.u32(0) : ((warp >> log2u(warpsM)) << 5u).named("warp_tok");
  // ldmatrix x4 addresses in block 0: A (rows of W, fragment f 16 rows further): matrix q is rows
  // 8(q & 1) .. + 7, bytes 16(q >> 1) ..; B (tokens): matrices 2j', 2j' + 1 are bytes 0 .. 15 and
  // 16 .. 31 of tokens 8j .. 8j + 7. Block s is 32 s bytes further.
  Value q = (lane >> 3u).named("q"), l7 = (lane & 7u).named("lane7");
  Value aOff = ((warpRow + l7 + ((q & 1u) << 3u)) * kQRowBytes + ((q >> 1u) << 4u)).named("a_frag");
  Value bOff = ((warpTok + l7 + ((q >> 1u) << 3u)) * kQRowBytes + ((q & 1u) << 4u)).named("b_frag");
  Value g = (lane >> 2u).named("g"), t = (lane & 3u).named("t");
  Value izero = kb.s32(0, "izero");
  Value accZero = kb.pack(Type::of(Scalar::S32, 4), {izero, izero, izero, izero}, "acc_zero");
  constexpr unsigned kTiles = 4;  // of 8 tokens: a warp's 32
  // Accumulator of A fragment f, token tile j, element 2h + c: row 16f + g + 8h of the warp's,
  // token 8j + 2t + c of the warp's.
  auto accIndex = [&](unsigned f, unsigned j, unsigned h, unsigned c) { return ((f * kTiles + j) * 2 + h) * 2 + c; };
  // The products of block s of the stage, added to the accumulators.
  auto multiply = [&](Value s, std::span<Value> carried) {
    std::vector<Value> fb;
    for (unsigned jp = 0; jp < kTiles / 2; ++jp) {
      Value quad = kb.ldmatrix(sharedAt(xq, bOff + (s << 5u) + jp * 16 * kQRowBytes), 4, false, "fb");
      for (unsigned first : {0u, 2u})
        fb.push_back(kb.pack(Type::of(Scalar::B32, 2), {kb.extract(quad, first), kb.extract(quad, first + 1)}, "frag_b"));
    }
    // Each token's d_x (and sums of quants) of the block: tile j, column c.
    Value dx[kTiles][2], suma[kTiles][2], halfSums[kTiles][2][2];
    for (unsigned j = 0; j < kTiles; ++j)
      for (unsigned c = 0; c < 2; ++c) {
        Value tok = warpTok + (t << 1u) + (8 * j + c);
        Value at = (tok * kQScaleStride + s) << 2u;
        dx[j][c] = kb.load(sharedAt(xd, at), Type::f32(), "dx");
        if (halfMins)
          for (unsigned kh = 0; kh < 2; ++kh)
            halfSums[j][c][kh] =
                kb.load(sharedAt(xsum, (tok * kScStride + (s << 1u) + kh) << 2u), Type::of(Scalar::S32), "suma");
        else if (withMin)
          suma[j][c] = toF32(kb, kb.load(sharedAt(xsum, at), Type::of(Scalar::S32), "suma"));
      }
    std::vector<Value> next(carried.begin(), carried.end());
    for (unsigned f = 0; f < mFrags; ++f) {
      Value fa = kb.ldmatrix(sharedAt(wq, aOff + (s << 5u) + f * 16 * kQRowBytes), 4, false, "fa");
      // q6_k: registers 0, 1 of the A fragment hold K 0 .. 15, registers 2, 3 K 16 .. 31.
      std::vector<Value> fas = {fa};
      if (halves) {
        Value z = kb.b32(0, "bzero");
        fas = {kb.pack(Type::of(Scalar::B32, 4), {kb.extract(fa, 0), kb.extract(fa, 1), z, z}, "fa_lo"),
               kb.pack(Type::of(Scalar::B32, 4), {z, z, kb.extract(fa, 2), kb.extract(fa, 3)}, "fa_hi")};
      }
      // Rows g and g + 8 of the fragment.
      Value dw[2], mw[2], sc[2][2], mi[2][2];
      for (unsigned h = 0; h < 2; ++h) {
        Value row = warpRow + g + (16 * f + 8 * h);
        Value at = wdAt(row, s);
        if (!halfF32) dw[h] = kb.load(sharedAt(wd, at), Type::f32(), "dw");
        if (withMin) mw[h] = kb.neg(kb.load(sharedAt(wmin, at), Type::f32(), "mw"), "minus_mw");
        if (halves)
          for (unsigned kh = 0; kh < 2; ++kh) {
            Value half = (row * kScStride + (s << 1u) + kh) << scShift;
            if (!halfMins) {
              sc[h][kh] = kb.load(sharedAt(wsc, half), Type::of(scType), "sc");
              continue;
            }
            Value both = kb.bitcast(kb.cvt(kb.load(sharedAt(wsc, half), Type::of(Scalar::U16), "sc_min"), Type::u32()),
                                    Type::of(Scalar::S32));
            sc[h][kh] = both & 0xFF, mi[h][kh] = both >> 8u;
          }
      }
      for (unsigned j = 0; j < kTiles; ++j) {
        std::vector<Value> sums;
        for (Value a : fas) sums.push_back(kb.mma(Mod::M16n8k32, Scalar::S8, a, fb[j], accZero, "sumi"));
        auto blockSum = [&](unsigned e, unsigned h) {
          if (!halfScales) return kb.extract(sums[0], e);
          return kb.extract(sums[0], e) * sc[h][0] + kb.extract(sums[1], e) * sc[h][1];
        };
        for (unsigned c = 0; c < 2; ++c)
          for (unsigned h = 0; h < 2; ++h) {
            Value& a = next[accIndex(f, j, h, c)];
            if (halfF32) {  // nvfp4: each half's f32 scale on its own sum
              for (unsigned kh = 0; kh < 2; ++kh)
                a = kb.fma(mulRn(kb, sc[h][kh], dx[j][c]), toF32(kb, kb.extract(sums[kh], 2 * h + c)), a);
              continue;
            }
            Value sumi = toF32(kb, blockSum(2 * h + c, h));
            // q2_k: the halves' integer mins times the token's sums over them, exact in s32.
            Value sa = halfMins ? toF32(kb, halfSums[j][c][0] * mi[h][0] + halfSums[j][c][1] * mi[h][1]) : suma[j][c];
            // D sum - M sum_a as one fma (the product M sum_a rounded, then the difference).
            if (withMin) a = kb.fma(dx[j][c], kb.fma(dw[h], sumi, mulRn(kb, mw[h], sa)), a);
            else a = kb.fma(mulRn(kb, dw[h], dx[j][c]), sumi, a);
          }
      }
    }
    return next;
  };
  std::vector<Value> init(4 * kTiles * mFrags, kb.f32(0.0f, "zero"));
  std::vector<Value> acc = kb.for_range(
      kb.u32(0), blocks, kb.u32(kQSub), init,
      [&](Value b0, std::span<Value> carried) {
        stage(b0);
        kb.bar_sync();
        Value inStage = kb.min(blocks - b0, kb.u32(kQSub)).named("in_stage");
        std::vector<Value> next = kb.for_range(kb.u32(0), inStage, kb.u32(1), {carried.begin(), carried.end()},
                                               multiply, {.label = "kblock", .iv = "s"});
        kb.bar_sync();  // the next stage overwrites the tiles
        return next;
      },
      {.label = "stages", .iv = "b0"});
  for (unsigned f = 0; f < mFrags; ++f) {
    // The biases of the thread's two rows of the fragment (a row past m reads the last; it is not stored).
    Value rowBias[2];
    if (bias.valid())
      for (unsigned h = 0; h < 2; ++h)
        rowBias[h] = kb.load(kb.index(bias, kb.min(m0 + warpRow + g + (16 * f + 8 * h), rows - 1u), 4), Type::f32(),
                             {Mod::NcMod}, "row_bias");
    for (unsigned j = 0; j < kTiles; ++j)
      for (unsigned h = 0; h < 2; ++h)
        for (unsigned c = 0; c < 2; ++c) {
          Value row = (m0 + warpRow + g + (16 * f + 8 * h)).named("row");
          Value tok = (warpTok + (t << 1u) + (8 * j + c)).named("tok");
          if (experts) tok = kb.load(kb.index(tilePairs, tok, 4), Type::u32(), "pair");
          else tok = (n0 + tok).named("tok");
          Value in = experts ? (tok != kNoExpert) : (tok < ntok);
          Value v = acc[accIndex(f, j, h, c)];
          if (bias.valid()) v = v + rowBias[h];
          kb.if_then(((row < rows) & in).named("in"), [&] { kb.store(kb.index(y, kb.mad(tok, rows, row), 4, "py"), v); },
                     "write");
        }
  }
  kb.ret();
  return finish(kb, m, diags);
}

// gemv_q and gemv_q_swiglu: kWarpsPerBlock / warpsPerRow groups of rowsPerWarp rows of w per block;
// with experts a block row per pair.
LaunchRule gemvQLaunch(const Options& o, bool swiglu) {
  std::vector<Expr> grid = {ceilDiv(Expr::param("m"), kWarpsPerBlock / warpsPerRow(o) * rowsPerWarp(o, swiglu))};
  if (o.flag("experts")) grid.push_back(Expr::param("pairs"));
  return LaunchRule{{kBlock}, grid, 0};
}

}  // namespace

namespace {

const Expr rows = Expr::param("rows"), k = Expr::param("k");

// The bytes of `count` rows of `values` values each in ggml blocks of format f (values a
// multiple of the block), and the same in q8_1 blocks (32 values in 36 bytes).
Expr blockBytes(const FmtInfo& f, const Expr& count, const Expr& values) { return count * (values / f.qk) * f.bytes; }
Expr q81Bytes(const Expr& count, const Expr& values) {
  const Expr one = (values / 32) * 36;
  return count == Expr(1) ? one : count * one;
}

}  // namespace

void addQuant(std::vector<Template>& out) {
  out.push_back({
      "dequantize",
      "y = the f32 values of rows x k ggml-quantized weights q (GGUF layout, k a multiple of the block), "
      "stored as dtype; bit-exact with ggml's dequantize_row_*; one thread per 8 elements",
      {formatSpec(), dtypeOption("dtype", "storage type of y")},
      buildDequantize,
      [](const Options&) {
        return LaunchRule{{kBlock}, {ceilDiv(Expr::param("rows") * (Expr::param("k") / kGroup), kBlock)}, 0};
      },
  });
  out.back().elements = allElements({blockElements({"q"}), storageElements({"y"})});
  out.back().extents = [](const Options& o) {
    return Template::Extents{{"q", blockBytes(formatOption(o), rows, k)}, {"y", rows * k}};
  };
  std::vector<std::string> tableFormats = {"f32", "bf16", "f16"};
  for (const std::string& f : formatNames()) tableFormats.push_back(f);
  out.push_back({
      "embedding",
      "y[t*k + j] = table[ids[t]*k + j] for t < n, j < k (u32 ids, table rows x k): a plain table, or ggml blocks "
      "(GGUF layout, k a multiple of the block) decoded bit-exactly as dequantize does; an id >= rows gives a row "
      "of NaN and reads nothing; one thread per 8 elements",
      {choiceOption("format", "f32", tableFormats, "storage of the table: a float type, or a ggml block format"),
       dtypeOption("dtype", "storage type of y"),
       option("pairs", false,
              "the ids are (token, slot) pairs, as moe_align's sorted holds them: row t is table row ids[t] / slots "
              "(the u32 parameter slots after k; 0 reads as 1), so that a grouped gemm's A gathers the tokens' "
              "activations; a padding entry 0xFFFFFFFF gives a row of NaN")},
      buildEmbedding,
      [](const Options&) {
        return LaunchRule{{kBlock}, {ceilDiv(Expr::param("n") * ceilDiv(Expr::param("k"), kGroup), kBlock)}, 0};
      },
  });
  out.back().elements = [](const Options& o) {
    Template::ElementTypes e = storageElements({"y"})(o);
    const std::string& f = o.text("format");
    e.push_back({"table", f == "f32" ? Scalar::F32 : f == "bf16" ? Scalar::BF16 : f == "f16" ? Scalar::F16 : Scalar::U8});
    e.push_back({"ids", Scalar::U32});
    return e;
  };
  out.back().extents = [](const Options& o) {
    const Expr n = Expr::param("n");
    bool plain = false;
    for (const char* f : {"f32", "bf16", "f16"}) plain = plain || o.text("format") == f;
    return Template::Extents{{"table", plain ? rows * k : blockBytes(formatOption(o), rows, k)}, {"ids", n}, {"y", n * k}};
  };
  out.push_back({
      "quantize_q8_1",
      "y = x (n values, n a multiple of 32) as ggml q8_1 blocks (half d, half s = d * sum(q), 32 int8), "
      "bit-exact with ggml's quantize_row_q8_1_ref; one warp per block",
      {choiceOption("dtype", "f32", {"f32", "bf16"}, "storage type of x")},
      buildQuantizeQ81,
      [](const Options&) { return LaunchRule{{kBlock}, {ceilDiv(Expr::param("n"), kBlock)}, 0}; },
  });
  out.back().elements = allElements({storageElements({"x"}), blockElements({"y"})});
  out.back().extents = [](const Options&) {
    const Expr n = Expr::param("n");
    return Template::Extents{{"x", n}, {"y", q81Bytes(Expr(1), n)}};  // 36 bytes a block of 32
  };
  OptionSpec ntok = intOption("ntok", 1, 1, 8, "activation columns per launch (x is ntok x k, y ntok x m)");
  OptionSpec activation = choiceOption("activation", "f32", {"f32", "bf16", "q8_1"},
                                       "x as f32 or bf16 values (dequantized weights, f32 products), or as q8_1 "
                                       "blocks from quantize_q8_1 (integer products by dp4a)");
  OptionSpec rowsPerWarpOpt = intOption("rows_per_warp", 0, 0, 4,
                                        "rows of w per warp, sharing each load of x, for more registers (0: 2 for "
                                        "gemv_q at ntok >= 2 but not q4_k/q5_k with f32/bf16 x, else 1)");
  OptionSpec warpsPerRowOpt = intOption("warps_per_row", 0, 0, kWarpsPerBlock,
                                        "warps sharing a warp's rows, each taking every warps_per_row-th part of k, "
                                        "their sums added in shared memory: 1, 2, 4 or 8 (0: 4 at ntok 1, else 1)");
  OptionSpec expertsOpt = option(
      "experts", false,
      "mixture of experts (decode, ntok 1): w (gate, up) holds n_experts matrices of m x k one after another; "
      "block row p < pairs multiplies expert ids[p] by x's row p / slots into y's row p (the parameters ids, "
      "n_experts, pairs and slots; an id >= n_experts gives a row of NaN and reads no weights)");
  OptionSpec biasOpt = option("bias", false,
                              "add f32 biases to y's rows: the parameter bias after y (gemv_q_swiglu: gate_bias and "
                              "up_bias, to g and u before the activation), m values, with experts n_experts x m "
                              "(the pair's expert's row)");
  // Weights as ggml blocks; x as the activation's floats or q8_1 blocks; experts' ids u32; biases f32.
  auto gemvQElements = [](const Options& o) {
    const std::string& a = o.text("activation");
    return Template::ElementTypes{{"w", Scalar::U8},
                                  {"gate", Scalar::U8},
                                  {"up", Scalar::U8},
                                  {"x", a == "q8_1" ? Scalar::U8 : a == "bf16" ? Scalar::BF16 : Scalar::F32},
                                  {"ids", Scalar::U32},
                                  {"bias", Scalar::F32},
                                  {"gate_bias", Scalar::F32},
                                  {"up_bias", Scalar::F32}};
  };
  // w, gate and up m x k in blocks (n_experts of them); x ntok x k values or q8_1 blocks (experts:
  // ceil_div(pairs, slots) rows); y ntok x m (experts: pairs x m).
  auto gemvQExtents = [](const Options& o) {
    const Expr m = Expr::param("m");
    const Expr xRow = o.text("activation") == "q8_1" ? q81Bytes(Expr(1), k) : k;
    if (o.flag("experts")) {
      const Expr pairs = Expr::param("pairs");
      const Expr w = Expr::param("n_experts") * blockBytes(formatOption(o), m, k);
      const Expr b = Expr::param("n_experts") * m;
      return Template::Extents{{"w", w},
                               {"gate", w},
                               {"up", w},
                               {"ids", pairs},
                               {"x", ceilDiv(pairs, max(Expr::param("slots"), Expr(1))) * xRow},
                               {"y", pairs * m},
                               {"bias", b},
                               {"gate_bias", b},
                               {"up_bias", b}};
    }
    const uint64_t ntok = static_cast<uint64_t>(o.integer("ntok"));
    auto tokens = [&](const Expr& e) { return ntok == 1 ? e : Expr(ntok) * e; };
    const Expr w = blockBytes(formatOption(o), m, k);
    return Template::Extents{{"w", w},          {"gate", w},      {"up", w},      {"x", tokens(xRow)},
                             {"y", tokens(m)}, {"bias", m}, {"gate_bias", m}, {"up_bias", m}};
  };
  std::string layout = "warps_per_row warps per rows_per_warp rows, " + std::to_string(kWarpsPerBlock) +
                       " warps per block of " + std::to_string(kBlock) + " threads";
  out.push_back({
      "gemv_q",
      "y[t*m + i] = sum_j deq(w)[i][j] * x[t*k + j] for ggml-quantized w (m x k, GGUF layout) and t < ntok; "
      "weights dequantized in registers and f32 products, or (q8_1 x) dp4a on the quants; f32 accumulation, "
      "y f32; " + layout,
      {formatSpec(), ntok, activation, rowsPerWarpOpt, warpsPerRowOpt, expertsOpt, biasOpt},
      [](const Options& o, ir::Diagnostics& d) { return buildGemvQ(o, false, d); },
      [](const Options& o) { return gemvQLaunch(o, false); },
  });
  out.back().elements = gemvQElements;
  out.back().extents = gemvQExtents;
  out.push_back({
      "gemv_q_swiglu",
      "y[t*m + i] = silu(g) * u with g = sum_j deq(gate)[i][j] * x[t*k + j], u the same of up (LLaMA's "
      "silu(gate_proj) * up_proj; both m x k, one format) for t < ntok, in one pass over both matrices (glu: "
      "gelu(g) * u, GeGLU: Gemma's); the products as gemv_q's; " + layout,
      {formatSpec(), ntok, activation, choiceOption("out_dtype", "f32", {"f32", "bf16"}, "storage type of y"), rowsPerWarpOpt,
       warpsPerRowOpt, expertsOpt, gluOption(), biasOpt},
      [](const Options& o, ir::Diagnostics& d) { return buildGemvQ(o, true, d); },
      [](const Options& o) { return gemvQLaunch(o, true); },
  });
  out.back().elements = allElements({gemvQElements, storageElements({"y"}, "out_dtype")});
  out.back().extents = gemvQExtents;
  out.push_back({
      "gemm_q",
      "y[t*m + i] = sum_j deq(w)[i][j] * xq[t][j] for ggml-quantized w (m x k, GGUF layout) and "
      "ntok tokens of q8_1 activations (prefill): int8 mma.sync m16n8k32 per 32-value block (q2_k, q3_k, q6_k: "
      "one per 16-value half, the halves' s32 sums times their integer scales), s32 sums scaled by the blocks' d "
      "(and mins) into f32; 64 x tile_n tiles of y per block of 128 threads",
      {choiceOption("format", "q8_0", formatNames(), "ggml block format of the quantized weights (GGUF layout)"),
       intOption("tile_n", 32, 32, 64,
                 "tokens per block: 32, or 64 (fewer instructions per mma, twice the shared memory and half the "
                 "blocks: for long prefills; experts take 32)",
                 32),
       option("experts", false,
              "mixture of experts (prefill, a grouped GEMM): w holds n_experts matrices of m x k one after another; "
              "the parameters sorted and tile_experts (after y and bias: moe_align's output with tile = 32) and "
              "n_experts, pairs and slots (after k, in place of ntok); block row t multiplies expert "
              "tile_experts[t] by x's rows p / slots for the pairs p of sorted[32 t ..] into y's rows p (an "
              "unknown expert gives rows of NaN; padding and tiles past the last, nothing)"),
       option("bias", false,
              "add bias[i] to y's column i: f32, the parameter bias after y, m values (with experts n_experts x m, "
              "the tile's expert's row)")},
      buildGemmQ,
      [](const Options& o) {
        const Expr tokens = o.flag("experts") ? moeTiles(kQTileNExperts)
                                              : ceilDiv(Expr::param("ntok"), static_cast<unsigned>(o.integer("tile_n")));
        return LaunchRule{{kQThreads}, {ceilDiv(Expr::param("m"), kQTileM), tokens}, 0};
      },
  });
  out.back().elements = allElements({blockElements({"w", "x"}), u32Elements({"sorted", "tile_experts"}),
                                      [](const Options&) { return Template::ElementTypes{{"bias", Scalar::F32}}; }});
  out.back().extents = [](const Options& o) {
    const Expr m = Expr::param("m"), w = blockBytes(formatOption(o), m, k);
    if (o.flag("experts")) {
      const Expr pairs = Expr::param("pairs"), tiles = moeTiles(kQTileNExperts);
      return Template::Extents{{"w", Expr::param("n_experts") * w},
                               {"x", q81Bytes(ceilDiv(pairs, max(Expr::param("slots"), Expr(1))), k)},
                               {"y", pairs * m},
                               {"sorted", tiles * Expr(kQTileNExperts)},
                               {"tile_experts", tiles},
                               {"bias", Expr::param("n_experts") * m}};
    }
    const Expr ntok = Expr::param("ntok");
    return Template::Extents{{"w", w}, {"x", q81Bytes(ntok, k)}, {"y", ntok * m}, {"bias", m}};
  };
  out.push_back({
      "rmsnorm_quantize_q8_1",
      "y = quantize_q8_1(rmsnorm(x) * weight) per row (x rows x cols, cols a multiple of 32; y rows x cols/32 "
      "q8_1 blocks): the blocks of rmsnorm followed by quantize_q8_1 (same dtype) when rmsnorm takes the "
      "same path; one block of 256 threads per row",
      {choiceOption("dtype", "f32", {"f32", "bf16"}, "storage type of x and weight (the normalized value is "
                                                      "rounded to it, as rmsnorm stores it)"),
       maxColsOption()},
      buildRmsnormQuantizeQ81,
      [](const Options&) { return LaunchRule{{kBlock}, {Expr::param("rows")}, 0}; },
  });
  out.back().elements = allElements({storageElements({"x", "weight"}), blockElements({"y"})});
  out.back().extents = [](const Options&) {
    const Expr cols = Expr::param("cols");
    return Template::Extents{{"x", rows * cols}, {"weight", cols}, {"y", q81Bytes(rows, cols)}};
  };
}

}  // namespace tn::kernels::lib
