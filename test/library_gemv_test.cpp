// gemv (kernels/Gemv.cpp, spec test/library/gemv.toml) for every weight and activation type,
// strided rows and batches, against a double-precision reference: shapes that take the vector
// main loop, its tail and the scalar path, k = 0, m = 0 and batch = 0, and (on the GPU)
// misaligned w and x; fp8 weights (every finite code, a scale per tensor or per row) decoded both
// ways (the sm_90 code's cvt.f16x2, the sm_80 code's integer instructions); quantize_fp8, which
// makes such codes and their scales, bit for bit against ir/Float8.h, and feeding gemv.
#include <cstring>
#include <limits>

#include "ir/Float8.h"
#include "library_harness.h"

using namespace tn::libtest;
using tn::ir::Fp8Format;

namespace {

struct Variant {
  const char* kernel;
  Dtype w, x;  // weight (unused with fp8 weights); x and y
  bool strided = false, batched = false;
  bool fp8 = false;  // w holds codes of `format`, scaled by w_scale or (rowScales) w_scales
  Fp8Format format = Fp8Format::E4M3;
  bool rowScales = false;
  bool bias = false;  // f32 bias[i] added to y[i]
};

constexpr Variant kF32{"gemv_f32", Dtype::F32, Dtype::F32};
constexpr Variant kBf16{"gemv_bf16", Dtype::BF16, Dtype::F32};
constexpr Variant kF16{"gemv_f16", Dtype::F16, Dtype::F32};
constexpr Variant kBf16Bf16{"gemv_bf16_bf16", Dtype::BF16, Dtype::BF16};
constexpr Variant kF32F16{"gemv_f32_f16", Dtype::F32, Dtype::F16};  // 8 bytes of x per vector of w
constexpr Variant kBf16Strided{"gemv_bf16_strided", Dtype::BF16, Dtype::F32, true};
constexpr Variant kF32Batched{"gemv_f32_batched", Dtype::F32, Dtype::F32, false, true};
constexpr Variant kF16Bf16StridedBatched{"gemv_f16_bf16_strided_batched", Dtype::F16, Dtype::BF16, true, true};
constexpr Variant kE4m3{"gemv_e4m3", Dtype::F32, Dtype::F32, false, false, true, Fp8Format::E4M3};
constexpr Variant kE5m2Rows{"gemv_e5m2_bf16_rows_strided", Dtype::F32, Dtype::BF16, true, false, true, Fp8Format::E5M2, true};
constexpr Variant kBf16Bias{.kernel = "gemv_bf16_bf16_bias", .w = Dtype::BF16, .x = Dtype::BF16, .bias = true};
constexpr Variant kE4m3RowsBias{
    .kernel = "gemv_e4m3_rows_bias", .w = Dtype::F32, .x = Dtype::F32, .fp8 = true, .rowScales = true, .bias = true};

struct Problem {
  uint32_t m, k;
  uint32_t pad = 0;       // strided: ldw = k + pad
  uint32_t batch = 1;     // batched
  uint32_t gap = 0;       // batched: elements between one batch's w, x, y and the next's
  uint32_t misalign = 0;  // bytes w and x are shifted by on the GPU (the scalar path)
};

// y = W x for every batch; the elements of y between batches must keep their sentinel. fp8: w
// random finite codes, each row's values times its scale (the tensor's 1/448, or per row).
// `target`: whose code the interpreter runs (Call::target).
void checkGemv(Runner& r, std::mt19937& rng, const Variant& v, const Problem& p, const char* target = "") {
  const uint32_t ldw = v.strided ? p.k + p.pad : p.k, batch = v.batched ? p.batch : 1;
  const size_t strideW = size_t(p.m) * ldw + p.gap, strideX = size_t(p.k) + p.gap, strideY = size_t(p.m) + p.gap;
  const float sentinel = -7.0f;
  std::vector<float> w;
  std::vector<std::byte> wBytes;
  std::vector<float> scales(std::max<uint32_t>(p.m, 1), 1.0f);
  if (v.fp8) {
    std::vector<uint8_t> codes(batch * strideW);
    for (uint8_t& c : codes) {
      do c = uint8_t(rng() & 0xFF);
      while (!std::isfinite(tn::ir::fp8Value(v.format, c)));
      w.push_back(float(tn::ir::fp8Value(v.format, c)));
    }
    wBytes.resize(codes.size());
    if (!codes.empty()) std::memcpy(wBytes.data(), codes.data(), codes.size());
    const float unit = float(1.0 / tn::ir::fp8Value(v.format, v.format == Fp8Format::E4M3 ? 0x7E : 0x7B));
    for (float& s : scales) s = v.rowScales ? unit * (0.5f + float(rng() % 1000) / 1000.0f) : unit;
  } else {
    w = roundTo(v.w, uniform(rng, batch * strideW));
    wBytes = encode(v.w, w);
  }
  std::vector<float> x = roundTo(v.x, uniform(rng, batch * strideX));
  std::vector<float> bias(std::max<uint32_t>(p.m, 1), 0.0f);
  Call call("gemv", v.kernel);
  call.target(target);
  if (v.bias) call.buffer("bias", bias = uniform(rng, std::max<uint32_t>(p.m, 1), -4.0f, 4.0f));
  if (v.fp8 && v.rowScales) call.buffer("w_scales", scales);
  if (v.fp8 && !v.rowScales) call.scalar("w_scale", scales[0]);
  call.buffer("w", wBytes, p.misalign)
      .buffer("x", encode(v.x, x), p.misalign)
      .buffer("y", encode(v.x, std::vector<float>(batch * strideY, sentinel)))
      .scalar("m", p.m)
      .scalar("k", p.k);
  if (v.strided) call.scalar("ldw", ldw);
  if (v.batched)
    call.scalar("batch", batch)
        .scalar("stride_w", uint32_t(strideW))
        .scalar("stride_x", uint32_t(strideX))
        .scalar("stride_y", uint32_t(strideY));
  Outputs out = r.run(call);
  std::vector<float> got = decode(v.x, out.get<std::byte>("y"));
  REQUIRE(got.size() == batch * strideY);
  const std::string what = std::string(v.kernel) + " m=" + std::to_string(p.m) + " k=" + std::to_string(p.k) +
                           " ldw=" + std::to_string(ldw) + " batch=" + std::to_string(batch) +
                           " misalign=" + std::to_string(p.misalign) + (*target ? std::string(" (") + target + " code)" : "");
  for (uint32_t b = 0; b < batch; ++b)
    for (size_t i = 0; i < strideY; ++i) {
      const size_t at = b * strideY + i;
      if (i >= p.m) {
        expectClose({got[at]}, {sentinel}, 0, 0, what + " gap after batch " + std::to_string(b));
        continue;
      }
      // f32 accumulation in any order (per-lane fma chains, then a warp tree): a product passes
      // through at most k fmas/adds with nonzero operands plus k - 1 additions of partial sums,
      // so |error| <= ~2k * 2^-24 * sum|w x| (first order); then y's rounding to its type.
      double want = 0, mag = 0;
      for (uint32_t j = 0; j < p.k; ++j) {
        double prod = double(w[b * strideW + i * ldw + j]) * double(x[b * strideX + j]) * scales[i];
        want += prod;
        mag += std::fabs(prod);
      }
      double tol = 2.0 * std::max<uint32_t>(p.k, 1) * std::ldexp(1.0, -24) * mag * (1 + roundoff(v.x));
      // A bias: one rounding more, 2^-24 (|sum| + |bias|), doubled.
      if (v.bias) tol += std::ldexp(std::fabs(want) + std::fabs(bias[i]), -23), want += bias[i];
      expectClose({got[at]}, {want}, tol, roundoff(v.x), what + " batch " + std::to_string(b) + " row " + std::to_string(i));
    }
}

const Problem kShapes[] = {{1, 1}, {3, 31}, {33, 33}, {5, 4097}, {64, 1000}, {7, 4096}, {9, 1032}};

}  // namespace

LIBRARY_TEST("gemv f32 shapes", gemvF32Shapes) {
  std::mt19937 rng(seed());
  for (const Problem& p : kShapes) checkGemv(r, rng, kF32, p);
  checkGemv(r, rng, kF32, {3, 0});  // k = 0: y = 0
  if (r.fast()) checkGemv(r, rng, kF32, {1000, 8192});
}

LIBRARY_TEST("gemv bf16 shapes", gemvBf16Shapes) {
  std::mt19937 rng(seed());
  for (const Problem& p : kShapes) checkGemv(r, rng, kBf16, p);
  checkGemv(r, rng, kBf16, {3, 0});
  if (r.fast()) checkGemv(r, rng, kBf16, {1000, 4096});
}

// f16 weights; bf16 and f16 x and y, rounded to nearest from the f32 sum: with f32 weights a
// vector of W meets 8 bytes of 16-bit x, with 16-bit weights 16 bytes.
LIBRARY_TEST("gemv f16 weights, bf16 and f16 activations", gemvTypes) {
  std::mt19937 rng(seed());
  for (const Variant* v : {&kF16, &kBf16Bf16, &kF32F16}) {
    for (const Problem& p : kShapes) checkGemv(r, rng, *v, p);
    checkGemv(r, rng, *v, {3, 0});
  }
}

LIBRARY_TEST("gemv misaligned pointers take the scalar path", gemvMisaligned) {
  std::mt19937 rng(seed());
  for (const Variant* v : {&kF32, &kBf16, &kBf16Bf16, &kF32F16}) {
    checkGemv(r, rng, *v, {33, 1024, 0, 1, 0, 4});
    checkGemv(r, rng, *v, {5, 4097, 0, 1, 0, 4});
  }
}

// ldw past k: aligned rows (pad 8) take vectors; an odd ldw leaves some rows aligned and some not,
// each warp choosing its row's path. Batches: strides with and without gaps (an odd gap
// misaligns every other batch), a batch of one, and batch 0, which launches nothing.
LIBRARY_TEST("gemv strided rows and batches", gemvStridedBatched) {
  std::mt19937 rng(seed());
  checkGemv(r, rng, kBf16Strided, {33, 1000, 8});
  checkGemv(r, rng, kBf16Strided, {17, 4096, 3});
  checkGemv(r, rng, kBf16Strided, {3, 31, 1});
  checkGemv(r, rng, kF32Batched, {17, 256, 0, 5});
  checkGemv(r, rng, kF32Batched, {3, 31, 0, 2, 1});
  checkGemv(r, rng, kF32Batched, {9, 1032, 0, 1});
  checkGemv(r, rng, kF16Bf16StridedBatched, {9, 1032, 8, 3});
  checkGemv(r, rng, kF16Bf16StridedBatched, {7, 520, 1, 4, 5});
  checkGemv(r, rng, kF16Bf16StridedBatched, {5, 4097, 0, 2, 3, 2});
  checkGemv(r, rng, kF16Bf16StridedBatched, {4, 64, 0, 0});  // batch 0: y keeps its sentinel
}

// bias (a router's or a projection's, gpt-oss and Qwen2): f32 bias[i] added to y[i] before y's
// rounding, on the vector and scalar paths, k = 0 (y = bias), and with fp8 row scales.
LIBRARY_TEST("gemv with bias", gemvBias) {
  std::mt19937 rng(seed());
  for (const Problem& p : kShapes) checkGemv(r, rng, kBf16Bias, p);
  checkGemv(r, rng, kBf16Bias, {3, 0});
  checkGemv(r, rng, kBf16Bias, {33, 1024, 0, 1, 0, 4});
  for (const Problem& p : {Problem{3, 31}, Problem{33, 4096}, Problem{5, 4112}}) checkGemv(r, rng, kE4m3RowsBias, p);
}

LIBRARY_TEST("gemv m = 0 launches nothing", gemvEmpty) {
  std::mt19937 rng(seed());
  for (const Variant* v : {&kF32, &kBf16, &kBf16Bf16}) {
    Call call("gemv", v->kernel);
    std::vector<float> x = uniform(rng, 16), y = {5.0f};  // y untouched
    Outputs out = r.run(call.buffer("w", std::vector<float>{})
                            .buffer("x", encode(v->x, x))
                            .buffer("y", encode(v->x, y))
                            .scalar("m", 0u)
                            .scalar("k", 16u));
    CHECK(decode(v->x, out.get<std::byte>("y")) == std::vector<float>{5.0f});
  }
}

// fp8 weights: the vector path (16 codes a lane and load) with its tail, the scalar path (k not a
// multiple of 16; on the GPU also misaligned w and x), k = 0; a scale per tensor and per row.
LIBRARY_TEST("gemv fp8 weights, decoded by cvt and by integer instructions", gemvFp8) {
  std::mt19937 rng(seed());
  for (const char* target : {"", "sm_80"})
    for (const Variant* v : {&kE4m3, &kE5m2Rows}) {
      for (const Problem& p : {Problem{1, 16}, Problem{3, 31}, Problem{33, 4096, 16}, Problem{5, 4112}, Problem{9, 1040, 1}})
        checkGemv(r, rng, *v, p, target);
      checkGemv(r, rng, *v, {3, 0}, target);
      checkGemv(r, rng, *v, {17, 1024, 0, 1, 0, 4}, target);
    }
}

// quantize_fp8 (kernels/Fp8.cpp): the codes bit for bit against the host's nearest-code search
// (ir/Float8.h) of x / scale (f32 division), and with scales = "row" each row's scale, its largest
// |x| (NaN passed over) / the format's largest finite value, bit for bit too. Rows of every length
// against the 256 threads of a block (1, 255, 256, 1000), a row of zeros (scale 0: codes +0 and
// -0), a row holding NaN (code 0x7F, the scale from the rest), a row holding an infinity (scale
// inf: finite values become signed zeros, the infinity NaN), values between two codes and beyond
// the largest; cols = 0 writes scales of 0 and no codes. Rows whose length is a multiple of x's
// 16-byte vector take the vector path when aligned (in registers up to max_cols, two passes
// beyond), and on the GPU also unaligned codes.
namespace {

struct QuantizeVariant {
  const char* kernel;
  Dtype x;
  Fp8Format format;
  bool perRow;
  bool group = false;  // scales = "group": a scale per 128 columns of a row (perRow too)
};

// misalign: bytes the codes start off their alignment on the GPU (the element-by-element path).
void checkQuantize(Runner& r, std::mt19937& rng, const QuantizeVariant& v, uint32_t rows, uint32_t cols,
                   uint32_t misalign = 0) {
  const double largest = tn::ir::fp8Value(v.format, v.format == Fp8Format::E4M3 ? 0x7E : 0x7B);
  std::vector<float> x = roundTo(v.x, uniform(rng, size_t(rows) * cols));
  // Row 0 spans several orders of magnitude, row 1 (if any) is zeros with a -0, row 2 holds a NaN
  // and row 3 an infinity.
  for (uint32_t c = 0; c < cols; ++c) x[c] = x[c] * std::ldexp(1.0f, int(c % 24) - 12);
  if (rows > 1)
    for (uint32_t c = 0; c < cols; ++c) x[cols + c] = c == 0 ? -0.0f : 0.0f;
  if (rows > 2 && cols > 0) x[2 * cols + cols / 2] = std::numeric_limits<float>::quiet_NaN();
  if (rows > 3 && cols > 0) x[3 * cols + cols / 3] = -std::numeric_limits<float>::infinity();
  // Row 4: values up to 5, beyond the tensor scale's range (|x| up to 3) and so saturating there.
  for (uint32_t c = 0; c < cols && rows > 4; ++c) x[4 * cols + c] = (float(c % 7) - 3.0f + 0.37f) * 1.5f;
  x = roundTo(v.x, x);
  const float tensorScale = float(3.0 / largest);
  Call call("gemv", v.kernel);
  call.buffer("x", encode(v.x, x))
      .buffer("codes", std::vector<uint8_t>(size_t(rows) * cols, 0xAB), misalign)
      .scalar("rows", rows)
      .scalar("cols", cols);
  const uint32_t width = v.group ? 128 : std::max(cols, 1u), groups = (cols + width - 1) / width;  // scales a row
  if (v.perRow) call.buffer("scales", std::vector<float>(std::max<size_t>(size_t(rows) * (v.group ? groups : 1), 1), -1.0f));
  else call.scalar("scale", tensorScale);
  Outputs out = r.run(call);
  const std::vector<uint8_t> codes = out.get<uint8_t>("codes");
  const std::vector<float> scales = v.perRow ? out.get<float>("scales") : std::vector<float>(rows, tensorScale);
  const std::string what = std::string(v.kernel) + " rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) +
                           (misalign ? " misalign=" + std::to_string(misalign) : "");
  size_t bad = 0;
  for (uint32_t i = 0; i < rows; ++i)
    for (uint32_t g = 0; g < std::max(groups, 1u); ++g) {
      const uint32_t c0 = g * width, c1 = std::min(cols, c0 + width);
      float scale = tensorScale;
      if (v.perRow) {
        float amax = 0.0f;
        for (uint32_t c = c0; c < c1; ++c) amax = std::fmax(amax, std::fabs(x[size_t(i) * cols + c]));
        scale = amax / float(largest);
        const size_t at = v.group ? size_t(i) * groups + g : i;
        if (v.group && cols == 0) continue;  // no groups, no scales
        CHECK_MESSAGE(std::memcmp(&scales[at], &scale, 4) == 0,
                      what << " row " << i << " group " << g << ": scale " << scales[at] << ", want " << scale);
      }
      const float divisor = scale == 0.0f ? 1.0f : scale;
      for (uint32_t c = c0; c < c1; ++c) {
        const uint8_t want = tn::ir::fp8Code(v.format, x[size_t(i) * cols + c] / divisor);
        if (codes[size_t(i) * cols + c] != want && ++bad <= 5)
          FAIL_CHECK(what << " row " << i << " col " << c << ": x " << x[size_t(i) * cols + c] << ", code "
                          << int(codes[size_t(i) * cols + c]) << ", want " << int(want));
      }
    }
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " codes differ");
}

constexpr QuantizeVariant kQuantizeVariants[] = {
    {"quantize_e4m3_rows_f32", Dtype::F32, Fp8Format::E4M3, true},
    {"quantize_e5m2_rows_bf16", Dtype::BF16, Fp8Format::E5M2, true},
    {"quantize_e4m3_rows_f16", Dtype::F16, Fp8Format::E4M3, true},
    {"quantize_e5m2_tensor_f32", Dtype::F32, Fp8Format::E5M2, false},
    {"quantize_e4m3_groups_bf16", Dtype::BF16, Fp8Format::E4M3, true, true},
    {"quantize_e5m2_groups_f32", Dtype::F32, Fp8Format::E5M2, true, true},
};

}  // namespace

LIBRARY_TEST("quantize_fp8: codes and row (and group) scales bit for bit", quantizeFp8) {
  std::mt19937 rng(seed());
  for (const QuantizeVariant& v : kQuantizeVariants) {
    for (uint32_t cols : {1u, 255u, 256u, 1000u}) checkQuantize(r, rng, v, 5, cols);
    checkQuantize(r, rng, v, 5, 256, 1);  // on the GPU: codes one byte off, element by element
    checkQuantize(r, rng, v, 2, 0);
  }
  // max_cols = 1024: rows in registers up to 1024 f32 or 2048 bf16 elements, on either side of it
  // (the one-pass path and the two passes over whole vectors), codes by words and by bytes.
  const QuantizeVariant bounded[] = {{"quantize_e4m3_rows_c1024_f32", Dtype::F32, Fp8Format::E4M3, true},
                                     {"quantize_e5m2_groups_c1024_bf16", Dtype::BF16, Fp8Format::E5M2, true, true}};
  for (const QuantizeVariant& v : bounded)
    for (uint32_t cols : {1000u, 1024u, 1028u, 2048u, 2056u}) {
      checkQuantize(r, rng, v, 5, cols);
      checkQuantize(r, rng, v, 5, cols, 2);
    }
}

// quantize_fp8's codes and row scales are what gemv's fp8 weights with row_scales take: W
// quantized to E5M2 a row at a time, then y = W x from the codes, within E5M2's rounding of each
// weight (2^-3 of it) of the product of the unquantized W.
LIBRARY_TEST("quantize_fp8 rows feed gemv's row_scales", quantizeFp8Gemv) {
  std::mt19937 rng(seed());
  const uint32_t m = 9, k = 1040;
  std::vector<float> w = roundTo(Dtype::BF16, uniform(rng, size_t(m) * k));
  for (uint32_t i = 0; i < m; ++i)
    for (uint32_t j = 0; j < k; ++j) w[size_t(i) * k + j] *= float(i + 1);  // rows of their own magnitude
  w = roundTo(Dtype::BF16, w);
  Outputs q = r.run(Call("gemv", "quantize_e5m2_rows_bf16")
                        .buffer("x", encode(Dtype::BF16, w))
                        .buffer("codes", std::vector<uint8_t>(size_t(m) * k))
                        .buffer("scales", std::vector<float>(m))
                        .scalar("rows", m)
                        .scalar("cols", k));
  std::vector<float> x = roundTo(Dtype::BF16, uniform(rng, k));
  Outputs out = r.run(Call("gemv", "gemv_e5m2_bf16_rows_strided")
                          .buffer("w", q.get<std::byte>("codes"))
                          .buffer("x", encode(Dtype::BF16, x))
                          .buffer("y", encode(Dtype::BF16, std::vector<float>(m)))
                          .buffer("w_scales", q.get<float>("scales"))
                          .scalar("m", m)
                          .scalar("k", k)
                          .scalar("ldw", k));
  std::vector<float> got = decode(Dtype::BF16, out.get<std::byte>("y"));
  for (uint32_t i = 0; i < m; ++i) {
    double want = 0, mag = 0;
    for (uint32_t j = 0; j < k; ++j) {
      want += double(w[size_t(i) * k + j]) * x[j];
      mag += std::fabs(double(w[size_t(i) * k + j]) * x[j]);
    }
    expectClose({got[i]}, {want}, std::ldexp(1.0, -3) * mag, roundoff(Dtype::BF16), "row " + std::to_string(i));
  }
}

namespace {

// A fused quantization kernel and the quantize_fp8 kernel of its unfused pair: the library's
// kernel names, the dtype of their input and whether their scales are per group.
struct QuantizePair {
  const char* fused;
  const char* quantize;
  Dtype d;
  bool group;
  const char* unit = "swiglu";  // swiglu_quantize_fp8's unfused gated unit: elementwise.toml's swiglu or geglu
  const char* norm = "rmsnorm";  // rmsnorm_quantize_fp8's unfused rmsnorm (norms.toml's)
};

// A launch of a row quantizer (fused or quantize_fp8) of rows x cols with `groups` scales a row:
// codes and scales hold sentinels the kernel must overwrite, different for the fused kernel and
// the unfused pair's so that neither can match the other by leaving them.
Call quantizerCall(const char* kernel, bool fused, uint32_t rows, uint32_t cols, uint32_t groups) {
  Call call("gemv", kernel);
  call.buffer("codes", std::vector<uint8_t>(size_t(rows) * cols, fused ? 0xA5 : 0x5A))
      .buffer("scales", std::vector<float>(size_t(rows) * groups, fused ? -1.0f : -2.0f))
      .scalar("rows", rows)
      .scalar("cols", cols);
  return call;
}

// A fused kernel's codes and scales against the unfused pair's, byte for byte; row 1 (`groups`
// scales on) is the row of zeros, whose scale is 0.
void expectSameQuantization(const Outputs& fused, const Outputs& unfused, uint32_t groups, const std::string& what) {
  CHECK_MESSAGE(fused.get<uint8_t>("codes") == unfused.get<uint8_t>("codes"), what << ": codes differ");
  const std::vector<float> fs = fused.get<float>("scales"), us = unfused.get<float>("scales");
  CHECK_MESSAGE(std::memcmp(fs.data(), us.data(), fs.size() * 4) == 0, what << ": scales differ");
  CHECK_MESSAGE(fs[groups] == 0.0f, what << ": the row of zeros has scale " << fs[groups]);
}

}  // namespace

// rmsnorm_quantize_fp8 against the unfused pair on the same runner, norms' rmsnorm then
// quantize_fp8 of the same dtype, format and scales: codes and scales byte for byte (1 / rms is
// rmsnorm's own, on the path rmsnorm takes for these buffers). Rows that fit in registers and rows
// past the one-pass bound, a row of zeros (scale 0), odd lengths and groups of 128 with a short
// last one.
LIBRARY_TEST("rmsnorm_quantize_fp8: equals rmsnorm then quantize_fp8, per row and per group", rmsnormQuantizeFp8) {
  const QuantizePair pairs[] = {{"rmsnorm_quantize_e5m2_rows_bf16", "quantize_e5m2_rows_bf16", Dtype::BF16, false},
                        {"rmsnorm_quantize_e4m3_rows_f16", "quantize_e4m3_rows_f16", Dtype::F16, false},
                        {"rmsnorm_quantize_e5m2_groups_f32", "quantize_e5m2_groups_f32", Dtype::F32, true},
                        {"rmsnorm_quantize_e4m3_groups_bf16", "quantize_e4m3_groups_bf16", Dtype::BF16, true},
                        // max_cols = 1024: rows of up to 2048 in registers, so 1312 and 2080 on either side.
                        {"rmsnorm_quantize_e5m2_rows_c1024_bf16", "quantize_e5m2_rows_bf16", Dtype::BF16, false,
                         "swiglu", "rmsnorm_c1024"}};
  std::mt19937 rng(seed());
  for (const QuantizePair& pr : pairs)
    for (uint32_t cols : {100u, 1312u, 2080u, 16416u}) {  // the last: past the one-pass bound
      const uint32_t rows = 3, groups = pr.group ? (cols + 127) / 128 : 1;
      std::vector<float> x = roundTo(pr.d, uniform(rng, size_t(rows) * cols, -3.0f, 3.0f));
      std::fill(x.begin() + cols, x.begin() + 2 * cols, 0.0f);  // a row of zeros
      std::vector<float> weight = roundTo(pr.d, uniform(rng, cols, 0.5f, 1.5f));
      const std::string suffix = std::string("_") + dtypeName(pr.d);
      Outputs fused = r.run(quantizerCall(pr.fused, true, rows, cols, groups)
                                .buffer("x", encode(pr.d, x))
                                .buffer("weight", encode(pr.d, weight))
                                .scalar("eps", 1e-5f));
      std::vector<std::byte> normed = r.run(Call("norms", pr.norm + suffix)
                                                .buffer("x", encode(pr.d, x))
                                                .buffer("weight", encode(pr.d, weight))
                                                .buffer("y", encode(pr.d, std::vector<float>(size_t(rows) * cols, 7.0f)))
                                                .scalar("rows", rows)
                                                .scalar("cols", cols)
                                                .scalar("eps", 1e-5f))
                                         .get<std::byte>("y");
      Outputs unfused = r.run(quantizerCall(pr.quantize, false, rows, cols, groups).buffer("x", normed));
      expectSameQuantization(fused, unfused, groups, std::string(pr.fused) + " cols=" + std::to_string(cols));
    }
}

// swiglu_quantize_fp8 against the unfused pair on the same runner, elementwise swiglu (or with glu
// GeGLU's) then quantize_fp8 of the same dtype, format and scales: codes and scales byte for byte. gate and up
// rows ld elements apart (ld = cols, and with a gap of huge values that a read past a row would
// make the row's scale: 37, and 40, so that rows of whole vectors take the one-pass path there too), a
// row of zeros (scale 0), silu's argument out to where exp overflows, odd lengths and groups of
// 128 with a short last one; rows on either side of a max_cols bound.
LIBRARY_TEST("swiglu_quantize_fp8: equals swiglu then quantize_fp8, per row and per group, strided rows", swigluQuantizeFp8) {
  const QuantizePair pairs[] = {{"swiglu_quantize_e5m2_rows_bf16", "quantize_e5m2_rows_bf16", Dtype::BF16, false},
                        {"swiglu_quantize_e4m3_rows_f16", "quantize_e4m3_rows_f16", Dtype::F16, false},
                        {"swiglu_quantize_e5m2_groups_f32", "quantize_e5m2_groups_f32", Dtype::F32, true},
                        {"swiglu_quantize_e4m3_groups_bf16", "quantize_e4m3_groups_bf16", Dtype::BF16, true},
                        {"swiglu_quantize_e5m2_rows_bf16_geglu", "quantize_e5m2_rows_bf16", Dtype::BF16, false, "geglu"},
                        {"swiglu_quantize_e5m2_groups_f32_geglu_erf", "quantize_e5m2_groups_f32", Dtype::F32, true,
                         "geglu_erf"},
                        {"swiglu_quantize_e4m3_rows_f16_oai", "quantize_e4m3_rows_f16", Dtype::F16, false, "swiglu_oai"},
                        // max_cols = 1024: rows of up to 2048 in registers, so 2048 and 2056 on either side.
                        {"swiglu_quantize_e4m3_groups_c1024_bf16", "quantize_e4m3_groups_bf16", Dtype::BF16, true}};
  std::mt19937 rng(seed());
  for (const QuantizePair& pr : pairs)
    for (uint32_t cols : std::string_view(pr.fused).ends_with("_c1024_bf16") ? std::vector<uint32_t>{2048, 2056}
                                                                              : std::vector<uint32_t>{1, 100, 1312})
      for (uint32_t gap : {0u, 37u, 40u}) {
        const uint32_t rows = 3, ld = cols + gap, groups = pr.group ? (cols + 127) / 128 : 1;
        const size_t span = size_t(rows - 1) * ld + cols;
        // Contiguous rows for the unfused swiglu; the same values at r * ld for the fused kernel.
        std::vector<float> gate = roundTo(pr.d, uniform(rng, size_t(rows) * cols, -4.0f, 4.0f));
        // GeGLU's gelu underflows to 0 below about -10, and swiglu_oai's x·sigmoid(1.702 x) stored
        // as f16 below about -10.5 (silu's only below -88): a row of one such value would have
        // scale 0 (one run in ~15 drew one), so their activated inputs stay in [-3, 3].
        const float reach = std::string_view(pr.unit) == "swiglu" ? 12.0f : 3.0f;
        std::vector<float> up = roundTo(pr.d, uniform(rng, size_t(rows) * cols, -reach, reach));
        // A row of zeros: gate's, or with swiglu_oai (whose gate gains 1) up's, which the activation takes to 0.
        std::vector<float>& zeroed = std::string_view(pr.unit) == "swiglu_oai" ? up : gate;
        std::fill(zeroed.begin() + cols, zeroed.begin() + 2 * cols, 0.0f);
        up.back() = -100.0f;                                           // exp overflows in silu
        std::vector<float> gateLd(span, 6.0e4f), upLd(span, 6.0e4f);
        for (uint32_t r0 = 0; r0 < rows; ++r0)
          for (uint32_t c = 0; c < cols; ++c) {
            gateLd[size_t(r0) * ld + c] = gate[size_t(r0) * cols + c];
            upLd[size_t(r0) * ld + c] = up[size_t(r0) * cols + c];
          }
        const std::string suffix = std::string("_") + dtypeName(pr.d);
        Outputs fused = r.run(quantizerCall(pr.fused, true, rows, cols, groups)
                                  .buffer("gate", encode(pr.d, gateLd))
                                  .buffer("up", encode(pr.d, upLd))
                                  .scalar("ld", ld));
        std::vector<std::byte> y = r.run(Call("elementwise", pr.unit + suffix)
                                             .buffer("gate", encode(pr.d, gate))
                                             .buffer("up", encode(pr.d, up))
                                             .buffer("y", encode(pr.d, std::vector<float>(size_t(rows) * cols, 7.0f)))
                                             .scalar("n", rows * cols))
                                       .get<std::byte>("y");
        Outputs unfused = r.run(quantizerCall(pr.quantize, false, rows, cols, groups).buffer("x", y));
        const std::string what = std::string(pr.fused) + " cols=" + std::to_string(cols) + " ld=" + std::to_string(ld);
        expectSameQuantization(fused, unfused, groups, what);
        CHECK_MESSAGE(fused.get<float>("scales")[0] > 0.0f, what << ": row 0's scale is 0");
      }
}
