// attention_decode + attention_decode_merge (kernels/Attention.cpp) against a double-precision
// reference on the inputs rounded to the storage type: sequences of lengths 0, 1, 2, 31 and 257
// in one batch with gaps between their cache rows, grouped-query ratios 1, 4 and 8, head dims
// 64, 128 and 256, many splits and one, and NaN in K and in V.
#include <cmath>
#include <limits>

#include "library_harness.h"

using namespace tn::libtest;

namespace {

struct Variant {
  const char* decode;
  const char* merge;
  Dtype d;
  uint32_t dim, group;
};

constexpr Variant kF32{"decode_f32_d64_g1", "merge_f32_d64", Dtype::F32, 64, 1};
constexpr Variant kBf16G4{"decode_bf16_d128_g4", "merge_bf16_d128", Dtype::BF16, 128, 4};
constexpr Variant kBf16G8{"decode_bf16_d128_g8", "merge_bf16_d128", Dtype::BF16, 128, 8};
constexpr Variant kF16{"decode_f16_d256_g4", "merge_f16_d256", Dtype::F16, 256, 4};

struct Problem {
  std::vector<uint32_t> lengths;
  uint32_t kvHeads, splitLen;
  // A NaN planted in K (or V) at sequence 0, position `at`, kv head 0, element 3.
  enum class Nan { None, K, V } nan = Nan::None;
  uint32_t at = 0;
  // Bytes the caches are shifted by on the GPU (the element-by-element path when not a multiple
  // of a lane's slice; the interpreter binds buffers aligned and runs the vector path).
  uint32_t misalign = 0;
};

void checkDecode(Runner& r, std::mt19937& rng, const Variant& v, const Problem& p) {
  const uint32_t B = uint32_t(p.lengths.size()), KH = p.kvHeads, QH = KH * v.group, D = v.dim;
  uint32_t maxLen = 0, rows = 0;
  std::vector<uint32_t> offsets;
  for (uint32_t len : p.lengths) {
    offsets.push_back(rows + 3);  // gaps of 3 unused rows between sequences
    rows += len + 3;
    maxLen = std::max(maxLen, len);
  }
  const uint32_t splits = std::max<uint32_t>(1, (maxLen + p.splitLen - 1) / p.splitLen);
  const float scale = 1.0f / std::sqrt(float(D));
  std::vector<float> q = roundTo(v.d, uniform(rng, size_t(B) * QH * D));
  std::vector<float> k = roundTo(v.d, uniform(rng, std::max<size_t>(1, size_t(rows) * KH * D)));
  std::vector<float> val = roundTo(v.d, uniform(rng, std::max<size_t>(1, size_t(rows) * KH * D)));
  const size_t nanAt = (size_t(offsets[0]) + p.at) * KH * D + 3;
  if (p.nan == Problem::Nan::K) k[nanAt] = std::numeric_limits<float>::quiet_NaN();
  if (p.nan == Problem::Nan::V) val[nanAt] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> partial(size_t(B) * QH * splits * D, -7.0f), stats(size_t(B) * QH * splits, -7.0f);
  Outputs first = r.run(Call("attention", v.decode)
                            .buffer("q", encode(v.d, q))
                            .buffer("k_cache", encode(v.d, k), p.misalign)
                            .buffer("v_cache", encode(v.d, val), p.misalign)
                            .buffer("offsets", offsets)
                            .buffer("lengths", p.lengths)
                            .buffer("partial", partial)
                            .buffer("stats", stats)
                            .scalar("batch", B)
                            .scalar("kv_heads", KH)
                            .scalar("splits", splits)
                            .scalar("split_len", p.splitLen)
                            .scalar("scale", scale));
  std::vector<float> o(size_t(B) * QH * D, -7.0f);
  Outputs second = r.run(Call("attention", v.merge)
                             .buffer("partial", first.get<float>("partial"))
                             .buffer("stats", first.get<float>("stats"))
                             .buffer("o", encode(v.d, o))
                             .scalar("batch", B)
                             .scalar("q_heads", QH)
                             .scalar("splits", splits));
  std::vector<float> got = decode(v.d, second.get<std::byte>("o"));
  std::vector<double> want;
  for (uint32_t b = 0; b < B; ++b)
    for (uint32_t qh = 0; qh < QH; ++qh) {
      const uint32_t h = qh / v.group, len = p.lengths[b];
      const float* qrow = &q[(size_t(b) * QH + qh) * D];
      auto row = [&](const std::vector<float>& cache, uint32_t t) { return &cache[((size_t(offsets[b]) + t) * KH + h) * D]; };
      std::vector<double> s(len);
      double m = -std::numeric_limits<double>::infinity();
      for (uint32_t t = 0; t < len; ++t) {
        double dot = 0;
        for (uint32_t d = 0; d < D; ++d) dot += double(qrow[d]) * row(k, t)[d];
        s[t] = dot * scale;
        m = std::max(m, s[t]);
        if (std::isnan(s[t])) m = s[t];
      }
      double sum = 0;
      for (uint32_t t = 0; t < len; ++t) sum += s[t] = std::exp(s[t] - m);
      for (uint32_t d = 0; d < D; ++d) {
        double acc = 0;
        for (uint32_t t = 0; t < len; ++t) acc += s[t] * row(val, t)[d];
        want.push_back(len == 0 ? 0.0 : acc / sum);
      }
    }
  std::string what = std::string(v.decode) + " batch " + std::to_string(B) + " kv_heads " + std::to_string(KH) +
                     " split_len " + std::to_string(p.splitLen);
  // Per weight: ex2.approx (2 ulp) of a log2-domain score whose f32 error is a few roundings of
  // sum|q k| * scale (|q|, |k| <= 1: at most 16 at head_dim 256); weights are below 1 and sum
  // to 1, so the output is off by at most ~1e-5 * max|v| = 1e-5, plus its rounding to storage.
  expectClose(got, want, 2e-5, roundoff(v.d) + 1e-5, what);
}

}  // namespace

LIBRARY_TEST("attention_decode: mixed lengths, one and many splits, every storage type", attentionDecode) {
  std::mt19937 rng(seed());
  const std::vector<uint32_t> mixed = {1, 2, 31, 257, 0};
  for (const Variant* v : {&kF32, &kBf16G4, &kBf16G8, &kF16}) {
    checkDecode(r, rng, *v, {mixed, 2, 64});    // 5 splits, the last ones empty for short sequences
    checkDecode(r, rng, *v, {mixed, 1, 1000});  // one split
  }
  checkDecode(r, rng, kBf16G4, {{257}, 3, 50});
  checkDecode(r, rng, kF32, {{0, 0}, 2, 16});  // nothing to attend to: zeros
  // Caches only element-aligned: the element-by-element loads (on the GPU and the simulator).
  checkDecode(r, rng, kF32, {mixed, 2, 64, Problem::Nan::None, 0, 4});
  checkDecode(r, rng, kBf16G4, {mixed, 1, 64, Problem::Nan::None, 0, 2});
}

LIBRARY_TEST("attention_decode: a NaN in K poisons its head, in V its elements", attentionDecodeNan) {
  std::mt19937 rng(seed());
  checkDecode(r, rng, kF32, {{40, 5}, 1, 16, Problem::Nan::K, 17});
  checkDecode(r, rng, kBf16G4, {{40, 5}, 2, 16, Problem::Nan::V, 17});
}
