// attention_decode + attention_decode_merge (kernels/Attention.cpp) against a double-precision
// reference on the inputs rounded to the storage type: sequences of lengths 0, 1, 2, 31 and 257
// in one batch with gaps between their cache rows, or in shuffled pages of a paged cache,
// grouped-query ratios 1, 3, 4 and 8 and groups shared by several blocks (12, 13, 16, 40), head
// dims 64, 128 and 256, many splits and one, NaN in K and in V, and fp8 caches (every code read
// back exactly).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "ir/Float8.h"
#include "library_harness.h"

using namespace tn::libtest;
using tn::ir::Fp8Format;
using tn::ir::fp8Code;
using tn::ir::fp8Value;

namespace {

struct Variant {
  const char* decode;
  const char* merge;
  Dtype d;
  uint32_t dim, group;
  uint32_t pageSize = 0;  // a paged cache (block_table, max_pages) when not 0
  bool window = false;    // the window parameter (Problem::window)
  bool softcap = false;   // the softcap parameter (Problem::softcap)
  bool alibi = false;     // the alibi_slopes parameter (alibiSlopes, Problem::alibi)
  bool fp8 = false;       // fp8 caches of `format` codes, k_scale and v_scale
  Fp8Format format = Fp8Format::E4M3;
  bool mla = false;       // q and K rows of dim + 64 (latent, rope), V the latent part of K's rows
};

constexpr Variant kF32{"decode_f32_d64_g1", "merge_f32_d64", Dtype::F32, 64, 1};
constexpr Variant kBf16G4{"decode_bf16_d128_g4", "merge_bf16_d128", Dtype::BF16, 128, 4};
constexpr Variant kBf16G8{"decode_bf16_d128_g8", "merge_bf16_d128", Dtype::BF16, 128, 8};
constexpr Variant kF16{"decode_f16_d256_g4", "merge_f16_d256", Dtype::F16, 256, 4};
constexpr Variant kF16G3{"decode_f16_d256_g3", "merge_f16_d256", Dtype::F16, 256, 3};  // 2 positions a step
constexpr Variant kPaged16{"decode_bf16_d128_g4_p16", "merge_bf16_d128", Dtype::BF16, 128, 4, 16};
constexpr Variant kPaged1{"decode_f32_d64_g1_p1", "merge_f32_d64", Dtype::F32, 64, 1, 1};
constexpr Variant kPaged64{"decode_f16_d256_g3_p64", "merge_f16_d256", Dtype::F16, 256, 3, 64};
constexpr Variant kDecodeWindowBf16{"decode_bf16_d128_g4_window", "merge_bf16_d128", Dtype::BF16, 128, 4, 0, true};
constexpr Variant kDecodeWindowPaged{"decode_f32_d64_g1_p1_window", "merge_f32_d64", Dtype::F32, 64, 1, 1, true};
constexpr Variant kDecodeSoftcap{"decode_bf16_d128_g4_softcap", "merge_bf16_d128", Dtype::BF16, 128, 4, 0, false, true};
constexpr Variant kDecodeAlibi{"decode_bf16_d128_g4_softcap_alibi", "merge_bf16_d128", Dtype::BF16, 128, 4, 0, false, true, true};
// Groups shared by several blocks (2 × 8, 2 × 7 with one idle head, 3 × 14 with two, 3 × 4).
constexpr Variant kBf16G16{"decode_bf16_d128_g16", "merge_bf16_d128", Dtype::BF16, 128, 16};
constexpr Variant kG13All{"decode_bf16_d128_g13_window_softcap_alibi", "merge_bf16_d128", Dtype::BF16, 128, 13, 0, true, true, true};
constexpr Variant kF32G40P16{"decode_f32_d64_g40_p16", "merge_f32_d64", Dtype::F32, 64, 40, 16};
constexpr Variant kE4m3G12{"decode_f16_d256_g12_e4m3", "merge_f16_d256", Dtype::F16, 256, 12, 0, false, false, false, true, Fp8Format::E4M3};
// Multi-head latent attention (absorbed): rows of 512 + 64 with 16 heads (one a block), of 256 +
// 64 with 7 heads paged (three a block: 3 + 3 + 1, two idle) and windowed, capped and biased, fp8
// codes.
constexpr Variant kMla512{"decode_bf16_mla512_g16", "merge_bf16_d512", Dtype::BF16, 512, 16, 0, false, false, false, false, Fp8Format::E4M3, true};
constexpr Variant kMla256{"decode_f32_mla256_g7_p16_window_softcap_alibi", "merge_f32_d256", Dtype::F32, 256, 7, 16, true, true, true, false, Fp8Format::E4M3, true};
constexpr Variant kMlaFp8{"decode_bf16_mla512_g2_e4m3", "merge_bf16_d512", Dtype::BF16, 512, 2, 0, false, false, false, true, Fp8Format::E4M3, true};
constexpr Variant kE4m3Bf16{"decode_bf16_d128_g4_e4m3", "merge_bf16_d128", Dtype::BF16, 128, 4, 0, false, false, false, true, Fp8Format::E4M3};
constexpr Variant kE5m2F16{"decode_f16_d256_g3_e5m2", "merge_f16_d256", Dtype::F16, 256, 3, 0, false, false, false, true, Fp8Format::E5M2};
constexpr Variant kE4m3F32{"decode_f32_d64_g1_e4m3", "merge_f32_d64", Dtype::F32, 64, 1, 0, false, false, false, true, Fp8Format::E4M3};
constexpr Variant kE5m2P16{"decode_f32_d64_g1_p16_e5m2", "merge_f32_d64", Dtype::F32, 64, 1, 16, false, false, false, true, Fp8Format::E5M2};

// fp8 caches: random finite codes (no NaN, no infinity), the scale that maps the largest finite
// value to 1, and codes as a buffer.
std::vector<uint8_t> randomCodes(std::mt19937& rng, Fp8Format f, size_t n) {
  std::vector<uint8_t> out(n);
  for (uint8_t& c : out) {
    do c = uint8_t(rng() & 0xFF);
    while (!std::isfinite(fp8Value(f, c)));
  }
  return out;
}
float fp8Unit(Fp8Format f) { return float(1.0 / fp8Value(f, f == Fp8Format::E4M3 ? 0x7E : 0x7B)); }
std::vector<std::byte> asBytes(const std::vector<uint8_t>& codes) {
  std::vector<std::byte> out(codes.size());
  std::memcpy(out.data(), codes.data(), codes.size());
  return out;
}

// n elements each of K and V: uniform in [-1, 1] rounded to the storage type d, or with fp8 random
// codes of `format` whose values times k_scale and v_scale are at most 1 (and k, val those values).
struct KvValues {
  std::vector<float> k, val;
  std::vector<uint8_t> kCodes, vCodes;  // fp8
  float kScale = 1, vScale = 1;         // fp8
  std::vector<std::byte> kBytes(Dtype d) const { return kCodes.empty() ? encode(d, k) : asBytes(kCodes); }
  std::vector<std::byte> vBytes(Dtype d) const { return vCodes.empty() ? encode(d, val) : asBytes(vCodes); }
};
// n elements of K, and of V (nv of them when not 0).
KvValues kvValues(std::mt19937& rng, Dtype d, bool fp8, Fp8Format format, size_t n, size_t nv = 0) {
  KvValues kv;
  nv = nv ? nv : n;
  if (!fp8) {
    kv.k = roundTo(d, uniform(rng, n));
    kv.val = roundTo(d, uniform(rng, nv));
    return kv;
  }
  kv.kScale = fp8Unit(format);
  kv.vScale = kv.kScale / 2;
  kv.kCodes = randomCodes(rng, format, n);
  kv.vCodes = randomCodes(rng, format, nv);
  for (uint8_t c : kv.kCodes) kv.k.push_back(float(fp8Value(format, c)) * kv.kScale);
  for (uint8_t c : kv.vCodes) kv.val.push_back(float(fp8Value(format, c)) * kv.vScale);
  return kv;
}

// ALiBi's slopes for `heads` query heads (2^(-8 (h + 1) / heads), the paper's for a power of two),
// times `factor` (0: no bias).
std::vector<float> alibiSlopes(uint32_t heads, float factor) {
  std::vector<float> slopes;
  for (uint32_t h = 0; h < heads; ++h) slopes.push_back(factor * std::exp2(-8.0f * float(h + 1) / float(heads)));
  return slopes;
}

struct Problem {
  std::vector<uint32_t> lengths;
  uint32_t kvHeads, splitLen;
  // A NaN planted in K (or V) at sequence 0, position `at`, kv head 0, element 3.
  enum class Nan { None, K, V } nan = Nan::None;
  uint32_t at = 0;
  // Bytes the caches are shifted by on the GPU (the element-by-element path when not a multiple
  // of a lane's slice; the interpreter binds buffers aligned and runs the vector path).
  uint32_t misalign = 0;
  uint32_t window = 0;  // sliding window (a window variant): the last `window` positions, 0 all
  float softcap = 0;    // a softcap variant's cap: scaled scores s become softcap tanh(s / softcap)
  float alibi = 1;      // an alibi variant's slopes: alibiSlopes(q_heads, alibi)
  bool sinks = false;   // merged by the variant's merge kernel with sinks (its name + "_sinks"): sinkValues
};

// Attention sinks (a logit per query head without a value): uniform in [-3, 3], but head 1's -inf
// (no sink) and head 2's 20 (outweighing every key: outputs near 0); all -inf when `on` is false
// (a kernel without the option: the references then add no sink).
std::vector<float> sinkValues(std::mt19937& rng, uint32_t heads, bool on) {
  if (!on) return std::vector<float>(heads, -INFINITY);
  std::vector<float> s = uniform(rng, heads, -3.0f, 3.0f);
  if (heads > 1) s[1] = -std::numeric_limits<float>::infinity();
  if (heads > 2) s[2] = 20.0f;
  return s;
}

// A paged cache for sequences of `lengths` positions: each sequence's pages, in its row of the
// table, are shuffled among twice the pages needed (plus one, so that there is always one); the
// entries past a sequence's last page point far outside the cache (the kernel must not read them).
struct PagedCache {
  uint32_t pageSize = 0, maxPages = 0, rows = 0;
  std::vector<uint32_t> table;
  size_t row(uint32_t b, uint32_t t) const {
    return size_t(table[size_t(b) * maxPages + t / pageSize]) * pageSize + t % pageSize;
  }
};

PagedCache pagedCache(std::mt19937& rng, const std::vector<uint32_t>& lengths, uint32_t pageSize) {
  PagedCache c;
  c.pageSize = pageSize;
  uint32_t needed = 0, longest = 0;
  for (uint32_t len : lengths) {
    needed += (len + pageSize - 1) / pageSize;
    longest = std::max(longest, len);
  }
  c.maxPages = (longest + pageSize - 1) / pageSize + 1;
  std::vector<uint32_t> order(2 * needed + 1);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), rng);
  c.table.assign(size_t(lengths.size()) * c.maxPages, 0x7FFFFFFFu / pageSize);
  uint32_t next = 0;
  for (size_t b = 0; b < lengths.size(); ++b)
    for (uint32_t j = 0; j * pageSize < lengths[b]; ++j) c.table[b * c.maxPages + j] = order[next++];
  c.rows = uint32_t(order.size()) * pageSize;
  return c;
}

// `target`: whose code the interpreter runs (Call::target; fp8_decode = "auto" kernels decode by
// cvt.f16x2 in their sm_90 code and by integer instructions in their sm_80 code).
void checkDecode(Runner& r, std::mt19937& rng, const Variant& v, const Problem& p, const char* target = "") {
  const uint32_t B = uint32_t(p.lengths.size()), KH = p.kvHeads, QH = KH * v.group, D = v.dim, P = v.pageSize;
  const uint32_t KD = v.mla ? D + 64 : D;  // q's and K's elements a head
  uint32_t maxLen = 0, rows = 0;
  for (uint32_t len : p.lengths) maxLen = std::max(maxLen, len);
  // Contiguous: sequence b's rows from offsets[b], gaps of 3 unused rows between sequences.
  std::vector<uint32_t> offsets;
  PagedCache paged;
  if (P) {
    paged = pagedCache(rng, p.lengths, P);
    rows = paged.rows;
  } else {
    for (uint32_t len : p.lengths) {
      offsets.push_back(rows + 3);
      rows += len + 3;
    }
  }
  auto rowOf = [&](uint32_t b, uint32_t t) { return P ? paged.row(b, t) : size_t(offsets[b]) + t; };
  // With a window the splits cover its positions only (counted from its start): the fewest that do.
  const uint32_t span = v.window && p.window ? std::min(maxLen, p.window) : maxLen;
  const uint32_t splits = std::max<uint32_t>(1, (span + p.splitLen - 1) / p.splitLen);
  const float scale = 1.0f / std::sqrt(float(KD));
  std::vector<float> q = roundTo(v.d, uniform(rng, size_t(B) * QH * KD));
  KvValues kv = kvValues(rng, v.d, v.fp8, v.format, std::max<size_t>(1, size_t(rows) * KH * KD));
  std::vector<float>& k = kv.k, &val = kv.val;
  const size_t nanAt = rowOf(0, p.at) * KH * KD + 3;
  if (p.nan == Problem::Nan::K) {
    k[nanAt] = std::numeric_limits<float>::quiet_NaN();
    if (v.fp8) kv.kCodes[nanAt] = 0xFF;
  }
  if (p.nan == Problem::Nan::V) {
    val[nanAt] = std::numeric_limits<float>::quiet_NaN();
    if (v.fp8) kv.vCodes[nanAt] = 0x7F;
  }
  // mla: V is the latent part of K's rows, with fp8 their codes times v_scale.
  if (v.mla) {
    val = k;
    if (v.fp8)
      for (size_t e = 0; e < val.size(); ++e) val[e] = float(fp8Value(v.format, kv.kCodes[e])) * kv.vScale;
  }
  std::vector<float> partial(size_t(B) * QH * splits * D, -7.0f), stats(size_t(B) * QH * splits, -7.0f);
  Call call = Call("attention", v.decode)
                  .buffer("q", encode(v.d, q))
                  .buffer("k_cache", kv.kBytes(v.d), p.misalign)
                  .buffer("lengths", p.lengths)
                  .buffer("partial", partial)
                  .buffer("stats", stats)
                  .scalar("batch", B)
                  .scalar("kv_heads", KH)
                  .scalar("splits", splits)
                  .scalar("split_len", p.splitLen)
                  .scalar("scale", scale);
  if (!v.mla) call.buffer("v_cache", kv.vBytes(v.d), p.misalign);
  if (P) call.buffer("block_table", paged.table).scalar("max_pages", paged.maxPages);
  else call.buffer("offsets", offsets);
  if (v.window) call.scalar("window", p.window);
  if (v.softcap) call.scalar("softcap", p.softcap);
  if (v.fp8) call.scalar("k_scale", kv.kScale).scalar("v_scale", kv.vScale);
  const std::vector<float> slopes = alibiSlopes(QH, v.alibi ? p.alibi : 0.0f);
  if (v.alibi) call.buffer("alibi_slopes", slopes);
  Outputs first = r.run(call.target(target));
  std::vector<float> o(size_t(B) * QH * D, -7.0f);
  const std::string merge = std::string(v.merge) + (p.sinks ? "_sinks" : "");
  Call mergeCall = Call("attention", merge.c_str())
                       .buffer("partial", first.get<float>("partial"))
                       .buffer("stats", first.get<float>("stats"))
                       .buffer("o", encode(v.d, o))
                       .scalar("batch", B)
                       .scalar("q_heads", QH)
                       .scalar("splits", splits);
  const std::vector<float> sinks = sinkValues(rng, QH, p.sinks);
  if (p.sinks) mergeCall.buffer("sinks", sinks);
  Outputs second = r.run(mergeCall.target(target));
  std::vector<float> got = decode(v.d, second.get<std::byte>("o"));
  std::vector<double> want;
  for (uint32_t b = 0; b < B; ++b)
    for (uint32_t qh = 0; qh < QH; ++qh) {
      const uint32_t h = qh / v.group, len = p.lengths[b];
      // With a window, the positions from len - window on.
      const uint32_t from = p.window != 0 && len > p.window ? len - p.window : 0;
      const float* qrow = &q[(size_t(b) * QH + qh) * KD];
      auto row = [&](const std::vector<float>& cache, uint32_t t) { return &cache[(rowOf(b, t) * KH + h) * KD]; };
      std::vector<double> s(len, 0.0);
      double m = sinks[qh];  // -inf without a sink
      for (uint32_t t = from; t < len; ++t) {
        double dot = 0;
        for (uint32_t d = 0; d < KD; ++d) dot += double(qrow[d]) * row(k, t)[d];
        s[t] = dot * scale;
        if (v.softcap && p.softcap != 0) s[t] = p.softcap * std::tanh(s[t] / p.softcap);
        s[t] -= double(slopes[qh]) * (len - 1 - t);
        m = std::max(m, s[t]);
        if (std::isnan(s[t])) m = s[t];
      }
      double sum = sinks[qh] > -INFINITY ? std::exp(sinks[qh] - m) : 0.0;  // the sink's weight
      for (uint32_t t = from; t < len; ++t) sum += s[t] = std::exp(s[t] - m);
      for (uint32_t d = 0; d < D; ++d) {
        double acc = 0;
        for (uint32_t t = from; t < len; ++t) acc += s[t] * row(val, t)[d];
        want.push_back(len == 0 ? 0.0 : acc / sum);
      }
    }
  std::string what = std::string(v.decode) + " batch " + std::to_string(B) + " kv_heads " + std::to_string(KH) +
                     " split_len " + std::to_string(p.splitLen) + (P ? " page_size " + std::to_string(P) : "") +
                     (v.window ? " window " + std::to_string(p.window) : "") +
                     (v.softcap ? " softcap " + std::to_string(p.softcap) : "") +
                     (v.alibi ? " alibi " + std::to_string(p.alibi) : "") +
                     (v.fp8 ? std::string(v.format == Fp8Format::E4M3 ? " fp8_e4m3" : " fp8_e5m2") : "") +
                     (v.mla ? " mla" : "") + (p.sinks ? " sinks" : "") +
                     (*target ? std::string(" (") + target + " code)" : "");
  // Per weight: ex2.approx (2 ulp) of a log2-domain score whose f32 error is a few roundings of
  // sum|q k| * scale (|q|, |k| <= 1: at most 16 at head_dim 256); weights are below 1 and sum
  // to 1, so the output is off by at most ~1e-5 * max|v| = 1e-5, plus its rounding to storage.
  expectClose(got, want, 2e-5, roundoff(v.d) + 1e-5, what);
}

}  // namespace

LIBRARY_TEST("attention_decode: mixed lengths, one and many splits, every storage type", attentionDecode) {
  std::mt19937 rng(seed());
  const std::vector<uint32_t> mixed = {1, 2, 31, 257, 0};
  for (const Variant* v : {&kF32, &kBf16G4, &kBf16G8, &kF16, &kF16G3}) {
    checkDecode(r, rng, *v, {mixed, 2, 64});    // 5 splits, the last ones empty for short sequences
    checkDecode(r, rng, *v, {mixed, 1, 1000});  // one split
  }
  checkDecode(r, rng, kBf16G4, {{257}, 3, 50});
  checkDecode(r, rng, kF32, {{0, 0}, 2, 16});  // nothing to attend to: zeros
  // Caches only element-aligned: the element-by-element loads (on the GPU and the simulator).
  checkDecode(r, rng, kF32, {mixed, 2, 64, Problem::Nan::None, 0, 4});
  checkDecode(r, rng, kBf16G4, {mixed, 1, 64, Problem::Nan::None, 0, 2});
}

// Paged caches: pages of 16 rows (split_len 64 and 1000 take several pages a split; 24 a page
// boundary inside a split), of 1 row (a row per position) and of 64; sequences ending exactly at
// a page's end (16, 32, 64) and one past it (17, 65).
LIBRARY_TEST("attention_decode: paged caches through a block table", attentionDecodePaged) {
  std::mt19937 rng(seed());
  const std::vector<uint32_t> mixed = {1, 2, 31, 257, 0, 16, 17};
  for (const Variant* v : {&kPaged16, &kPaged1, &kPaged64}) {
    checkDecode(r, rng, *v, {mixed, 2, 64});
    checkDecode(r, rng, *v, {mixed, 1, 1000});
    checkDecode(r, rng, *v, {{32, 64, 65}, 2, 24});
  }
  checkDecode(r, rng, kPaged16, {mixed, 1, 64, Problem::Nan::None, 0, 2});  // element loads
  checkDecode(r, rng, kPaged16, {{40, 5}, 2, 16, Problem::Nan::V, 17});
}

// A group of more heads than a block takes (Llama-3.1-405B's and Qwen3-235B's 16, Mistral Large's
// 12, 13, 40): every head of the group, the idle heads of its last block writing nothing (the
// workspace's -7 elsewhere would show), with one split and several, paged, fp8, windowed, capped
// and biased.
LIBRARY_TEST("attention_decode: groups shared by several blocks", attentionDecodeLargeGroups) {
  std::mt19937 rng(seed());
  const std::vector<uint32_t> mixed = {1, 2, 31, 257, 0};
  for (const Variant* v : {&kBf16G16, &kF32G40P16, &kE4m3G12}) {
    checkDecode(r, rng, *v, {mixed, 2, 64});
    checkDecode(r, rng, *v, {mixed, 1, 1000});
  }
  checkDecode(r, rng, kE4m3G12, {mixed, 2, 64}, "sm_80");
  checkDecode(r, rng, kBf16G16, {{40, 5}, 2, 16, Problem::Nan::K, 17});
  for (uint32_t window : {0u, 5u, 100u})
    checkDecode(r, rng, kG13All, {mixed, 3, 64, Problem::Nan::None, 0, 0, window, 2.0f, 0.5f});
}

// Multi-head latent attention (mla: DeepSeek's absorbed form): q and the cache's rows hold the
// latent part and 64 rope elements, V is the latent part of K's rows; every head of groups of 16
// (a block each), 7 (paged, windowed, capped and biased: blocks of 3, 3 and 1) and 2 over fp8 codes
// (both decodings), with one split and several; a NaN in a K row poisons its heads.
LIBRARY_TEST("attention_decode: multi-head latent attention (mla)", attentionDecodeMla) {
  std::mt19937 rng(seed());
  const std::vector<uint32_t> mixed = {1, 2, 31, 257, 0};
  checkDecode(r, rng, kMla512, {mixed, 1, 64});
  checkDecode(r, rng, kMla512, {mixed, 2, 1000});
  checkDecode(r, rng, kMla256, {mixed, 1, 64, Problem::Nan::None, 0, 0, 40, 2.0f, 0.5f});
  checkDecode(r, rng, kMla256, {mixed, 2, 1000, Problem::Nan::None, 0, 0, 0, 0.0f, 1.0f});
  for (const char* target : {"", "sm_80"}) checkDecode(r, rng, kMlaFp8, {mixed, 1, 64}, target);
  checkDecode(r, rng, kMla512, {mixed, 1, 64, Problem::Nan::None, 0, 2});  // element loads (GPU, simulator)
  Problem nan{{40, 5}, 1, 16, Problem::Nan::K, 17};
  checkDecode(r, rng, kMla512, nan);
}

LIBRARY_TEST("attention_decode: a NaN in K poisons its head, in V its elements", attentionDecodeNan) {
  std::mt19937 rng(seed());
  checkDecode(r, rng, kF32, {{40, 5}, 1, 16, Problem::Nan::K, 17});
  checkDecode(r, rng, kBf16G4, {{40, 5}, 2, 16, Problem::Nan::V, 17});
}

// fp8 caches: random codes of every finite value (subnormal codes among them), K's scale folded
// into q and V's into the output; a lane's codes in one load (2, 4 or 8 bytes) or, one byte off
// alignment on the GPU, byte by byte; NaN codes as NaN. Both decodings: the sm_90 code's
// cvt.f16x2 and the sm_80 code's integer instructions (on the GPU, the device's).
LIBRARY_TEST("attention_decode: fp8 caches", attentionDecodeFp8) {
  std::mt19937 rng(seed());
  const std::vector<uint32_t> mixed = {1, 2, 31, 257, 0};
  for (const char* target : {"", "sm_80"}) {
    for (const Variant* v : {&kE4m3Bf16, &kE5m2F16, &kE4m3F32, &kE5m2P16}) {
      checkDecode(r, rng, *v, {mixed, 2, 64}, target);
      checkDecode(r, rng, *v, {mixed, 1, 1000, Problem::Nan::None, 0, 1}, target);
    }
    checkDecode(r, rng, kE4m3Bf16, {{40, 5}, 1, 16, Problem::Nan::K, 17}, target);
    checkDecode(r, rng, kE5m2F16, {{40, 5}, 2, 16, Problem::Nan::V, 17}, target);
  }
}

// Every code read back exactly: sequences of one position, whose output is its V row (weight 1,
// sum 1), with V's codes all 256 of them and v_scale 1, in f32; NaN codes give NaN, E5M2's
// infinities infinities.
LIBRARY_TEST("attention_decode: fp8 caches read every code exactly", attentionDecodeFp8Codes) {
  for (const char* target : {"", "sm_80"})
    for (const Variant* v : {&kE4m3F32, &kE5m2P16}) {
      const uint32_t D = v->dim, B = 256 / D, P = v->pageSize;
      // Sequence b's one row: row b (contiguous), or row 0 of page b.
      std::vector<uint32_t> rowsOf(B), lengths(B, 1);
      for (uint32_t b = 0; b < B; ++b) rowsOf[b] = b;
      std::vector<uint8_t> vCodes(size_t(B) * D * (P ? P : 1), 0), kCodes(vCodes.size(), 0);
      for (uint32_t c = 0; c < 256; ++c) vCodes[size_t(c / D) * (P ? P : 1) * D + c % D] = uint8_t(c);
      Call call = Call("attention", v->decode)
                      .buffer("q", std::vector<float>(size_t(B) * D, 0.5f))
                      .buffer("k_cache", asBytes(kCodes))
                      .buffer("v_cache", asBytes(vCodes))
                      .buffer("lengths", lengths)
                      .buffer("partial", std::vector<float>(size_t(B) * D, -7.0f))
                      .buffer("stats", std::vector<float>(B, -7.0f))
                      .scalar("batch", B)
                      .scalar("kv_heads", 1u)
                      .scalar("splits", 1u)
                      .scalar("split_len", 64u)
                      .scalar("scale", 1.0f)
                      .scalar("k_scale", 1.0f)
                      .scalar("v_scale", 1.0f);
      if (P) call.buffer("block_table", rowsOf).scalar("max_pages", 1u);
      else call.buffer("offsets", rowsOf);
      Outputs first = r.run(call.target(target));
      Outputs second = r.run(Call("attention", v->merge)
                                 .buffer("partial", first.get<float>("partial"))
                                 .buffer("stats", first.get<float>("stats"))
                                 .buffer("o", std::vector<float>(size_t(B) * D, -7.0f))
                                 .scalar("batch", B)
                                 .scalar("q_heads", 1u)
                                 .scalar("splits", 1u)
                                 .target(target));
      const std::vector<float> o = second.get<float>("o");
      for (uint32_t c = 0; c < 256; ++c) {
        const double want = fp8Value(v->format, uint8_t(c));
        const bool same = std::isnan(want)   ? std::isnan(o[c])
                          : std::isinf(want) ? std::isnan(o[c]) || double(o[c]) == want
                                             : double(o[c]) == want;
        CHECK_MESSAGE(same, std::string(v->decode) << " (code of " << (*target ? target : "sm_90") << "): code " << c
                                                   << " read as " << o[c] << ", not " << want);
      }
    }
}

// ---- attention_prefill ------------------------------------------------------------------------

namespace {

struct PrefillVariant {
  const char* kernel;
  Dtype d;
  uint32_t dim;
  bool causal, lse;
  const char* spec = "attention";
  uint32_t tileKeys = 64;  // keys of a K/V tile (what a NaN in V reaches)
  bool tmaRows = false;    // varlen: the q_rows and kv_rows parameters, paged: kv_rows (wgmma, or mainloop = "auto")
  const char* target = "";  // whose code the interpreter runs (Call::target)
  uint32_t pageSize = 0;    // k and v a paged cache (block_table, max_pages) when not 0
  bool window = false;      // the window parameter (Prefill::window, checkVarlen's window)
  bool softcap = false;     // the softcap parameter (Prefill::softcap)
  bool alibi = false;       // the alibi_slopes parameter (alibiSlopes, Prefill::alibi)
  bool bias = false;        // the bias tensor and its strides (Prefill::biasHeads)
  bool windowRight = false; // the window_right parameter (Prefill::windowRight)
  bool fp8 = false;         // k and v fp8 codes of `format`, k_scale and v_scale
  Fp8Format format = Fp8Format::E4M3;
  uint32_t vdim = 0;        // elements of a head of v and o (v_head_dim), when not dim
  bool sinks = false;       // the sinks parameter (sinkValues)
  uint32_t vHead() const { return vdim ? vdim : dim; }
};

constexpr PrefillVariant kPrefillBf16{"prefill_bf16_d128", Dtype::BF16, 128, false, true};
constexpr PrefillVariant kPrefillBf16Causal{"prefill_bf16_d128_causal", Dtype::BF16, 128, true, true};
constexpr PrefillVariant kPrefillF16{"prefill_f16_d64", Dtype::F16, 64, false, false};
constexpr PrefillVariant kPrefillF16Causal{"prefill_f16_d64_causal", Dtype::F16, 64, true, false};
constexpr PrefillVariant kVarlenBf16Causal{"prefill_bf16_d128_varlen_causal", Dtype::BF16, 128, true, true};
constexpr PrefillVariant kVarlenF16{"prefill_f16_d64_varlen", Dtype::F16, 64, false, false};
// Paged k and v: pages of 16 rows (a tile spans 4), of 128 (2 tiles a page) and of 1.
constexpr PrefillVariant kPagedBf16Causal{"prefill_bf16_d128_causal_p16", Dtype::BF16, 128, true, true, "attention", 64, false, "", 16};
constexpr PrefillVariant kPagedF16{"prefill_f16_d64_p128", Dtype::F16, 64, false, false, "attention", 64, false, "", 128};
constexpr PrefillVariant kPagedVarlenBf16Causal{"prefill_bf16_d128_varlen_causal_p1", Dtype::BF16, 128, true, true, "attention", 64, false, "", 1};
// head_dim 256 (mma.sync, dynamic shared memory).
constexpr PrefillVariant kPrefillBf16D256Causal{"prefill_bf16_d256_causal", Dtype::BF16, 256, true, true};
constexpr PrefillVariant kPrefillF16D256{"prefill_f16_d256", Dtype::F16, 256, false, false};
constexpr PrefillVariant kPrefillF16D256VarlenPaged{"prefill_f16_d256_varlen_p16", Dtype::F16, 256, false, false, "attention", 64, false, "", 16};
// mainloop = "wgmma" (sm_90a; test/library/attention90.toml): 128-key tiles.
constexpr PrefillVariant k90Bf16{"prefill90_bf16_d128", Dtype::BF16, 128, false, true, "attention90", 128};
constexpr PrefillVariant k90Bf16Causal{"prefill90_bf16_d128_causal", Dtype::BF16, 128, true, true, "attention90", 128};
constexpr PrefillVariant k90Bf16D64{"prefill90_bf16_d64", Dtype::BF16, 64, false, false, "attention90", 128};
constexpr PrefillVariant k90Bf16D64Causal{"prefill90_bf16_d64_causal", Dtype::BF16, 64, true, false, "attention90", 128};
constexpr PrefillVariant k90F16Causal{"prefill90_f16_d64_causal", Dtype::F16, 64, true, true, "attention90", 128};
constexpr PrefillVariant k90VarlenBf16Causal{"prefill90_bf16_d128_varlen_causal", Dtype::BF16, 128, true, true, "attention90", 128, true};
constexpr PrefillVariant k90VarlenF16{"prefill90_f16_d64_varlen", Dtype::F16, 64, false, false, "attention90", 128, true};
// Paged, wgmma: pages of 16 (8 TMA boxes a tile), 256 (a tile within a page) and 8 (16 boxes).
constexpr PrefillVariant k90PagedBf16Causal{"prefill90_bf16_d128_causal_p16", Dtype::BF16, 128, true, true, "attention90", 128, true, "", 16};
constexpr PrefillVariant k90PagedF16{"prefill90_f16_d64_p256", Dtype::F16, 64, false, false, "attention90", 128, true, "", 256};
constexpr PrefillVariant k90PagedVarlen{"prefill90_bf16_d128_varlen_causal_p8", Dtype::BF16, 128, true, true, "attention90", 128, true, "", 8};
// mainloop = "auto" (test/library/mainloop_auto.toml): wgmma in the sm_90a code, mma.sync in the sm_80 code.
constexpr PrefillVariant kAutoVarlen{"auto_prefill_bf16_d64_varlen_causal", Dtype::BF16, 64, true, true, "mainloop_auto", 128, true};
constexpr PrefillVariant kAutoPaged{"auto_prefill_f16_d128_causal_p32", Dtype::F16, 128, true, false, "mainloop_auto", 128, true, "", 32};
constexpr PrefillVariant kAutoFp8{"auto_prefill_bf16_d128_causal_p16_e4m3", Dtype::BF16, 128, true, true, "mainloop_auto", 128, true, "", 16, false, false, false, false, false, true, Fp8Format::E4M3};
// Sliding windows (window = true).
constexpr PrefillVariant kWindowBf16{"prefill_bf16_d128_causal_window", Dtype::BF16, 128, true, true, "attention", 64, false, "", 0, true};
constexpr PrefillVariant kWindowPagedF16{"prefill_f16_d64_causal_p16_window", Dtype::F16, 64, true, false, "attention", 64, false, "", 16, true};
constexpr PrefillVariant kWindowVarlen{"prefill_bf16_d64_varlen_causal_window", Dtype::BF16, 64, true, false, "attention", 64, false, "", 0, true};
constexpr PrefillVariant k90WindowBf16{"prefill90_bf16_d128_causal_window", Dtype::BF16, 128, true, true, "attention90", 128, false, "", 0, true};
constexpr PrefillVariant kSoftcapWindow{"prefill_bf16_d128_causal_window_softcap", Dtype::BF16, 128, true, true, "attention", 64, false, "", 0, true, true};
constexpr PrefillVariant k90Softcap{"prefill90_bf16_d128_softcap", Dtype::BF16, 128, false, true, "attention90", 128, false, "", 0, false, true};
// head_dim 256 on wgmma: key tiles of 64.
constexpr PrefillVariant k90Bf16D256Causal{"prefill90_bf16_d256_causal", Dtype::BF16, 256, true, true, "attention90", 64};
constexpr PrefillVariant k90F16D256{"prefill90_f16_d256", Dtype::F16, 256, false, false, "attention90", 64};
constexpr PrefillVariant k90D256VarlenPaged{"prefill90_bf16_d256_varlen_causal_p16", Dtype::BF16, 256, true, false, "attention90", 64, true, "", 16};
constexpr PrefillVariant kAlibiSoftcap{"prefill_f16_d64_softcap_alibi", Dtype::F16, 64, false, true, "attention", 64, false, "", 0, false, true, true};
constexpr PrefillVariant kAlibiVarlen{"prefill_bf16_d128_varlen_causal_alibi", Dtype::BF16, 128, true, true, "attention", 64, false, "", 0, false, false, true};
constexpr PrefillVariant k90AlibiWindow{"prefill90_bf16_d128_causal_window_alibi", Dtype::BF16, 128, true, true, "attention90", 128, false, "", 0, true, false, true};
constexpr PrefillVariant kBiasF16{"prefill_f16_d64_bias", Dtype::F16, 64, false, true, "attention", 64, false, "", 0, false, false, false, true};
constexpr PrefillVariant kBiasPagedAlibi{"prefill_bf16_d128_causal_p16_alibi_bias", Dtype::BF16, 128, true, true, "attention", 64, false, "", 16, false, false, true, true};
constexpr PrefillVariant k90BiasWindow{"prefill90_bf16_d128_causal_window_bias", Dtype::BF16, 128, true, true, "attention90", 128, false, "", 0, true, false, false, true};
constexpr PrefillVariant k90BiasD256{"prefill90_f16_d256_bias", Dtype::F16, 256, false, false, "attention90", 64, false, "", 0, false, false, false, true};
constexpr PrefillVariant kWindow2Bf16{"prefill_bf16_d128_window2", Dtype::BF16, 128, false, true, "attention", 64, false, "", 0, true, false, false, false, true};
constexpr PrefillVariant kRightAlibiF16{"prefill_f16_d64_right_alibi", Dtype::F16, 64, false, false, "attention", 64, false, "", 0, false, false, true, false, true};
constexpr PrefillVariant k90Window2{"prefill90_bf16_d128_window2", Dtype::BF16, 128, false, true, "attention90", 128, false, "", 0, true, false, false, false, true};
constexpr PrefillVariant kVarlenWindow2{"prefill_f16_d64_varlen_window2", Dtype::F16, 64, false, true, "attention", 64, false, "", 0, true, false, false, false, true};
constexpr PrefillVariant k90VarlenPagedWindow2{"prefill90_bf16_d128_varlen_p16_window2", Dtype::BF16, 128, false, false, "attention90", 128, true, "", 16, true, false, false, false, true};
constexpr PrefillVariant kFp8PagedBf16Causal{"prefill_bf16_d128_causal_p16_e4m3", Dtype::BF16, 128, true, true, "attention", 64, false, "", 16, false, false, false, false, false, true, Fp8Format::E4M3};
constexpr PrefillVariant kFp8F16{"prefill_f16_d64_e5m2", Dtype::F16, 64, false, false, "attention", 64, false, "", 0, false, false, false, false, false, true, Fp8Format::E5M2};
constexpr PrefillVariant kFp8D256Causal{"prefill_bf16_d256_causal_e4m3", Dtype::BF16, 256, true, true, "attention", 64, false, "", 0, false, false, false, false, false, true, Fp8Format::E4M3};
// The same kernels' sm_80 code: integer decoding (their sm_90 code uses cvt.f16x2).
constexpr PrefillVariant kFp8PagedBf16Causal80{"prefill_bf16_d128_causal_p16_e4m3", Dtype::BF16, 128, true, true, "attention", 64, false, "sm_80", 16, false, false, false, false, false, true, Fp8Format::E4M3};
constexpr PrefillVariant kFp8F16Sm80{"prefill_f16_d64_e5m2", Dtype::F16, 64, false, false, "attention", 64, false, "sm_80", 0, false, false, false, false, false, true, Fp8Format::E5M2};
// fp8 k and v on wgmma (attention90.toml): the codes by TMA, converted by the producer's other warps.
constexpr PrefillVariant k90Fp8PagedBf16Causal{"prefill90_bf16_d128_causal_p16_e4m3", Dtype::BF16, 128, true, true, "attention90", 128, true, "", 16, false, false, false, false, false, true, Fp8Format::E4M3};
constexpr PrefillVariant k90Fp8F16{"prefill90_f16_d64_e5m2", Dtype::F16, 64, false, false, "attention90", 128, false, "", 0, false, false, false, false, false, true, Fp8Format::E5M2};
constexpr PrefillVariant k90Fp8Integer{"prefill90_bf16_d128_causal_e5m2_integer", Dtype::BF16, 128, true, true, "attention90", 128, false, "", 0, false, false, false, false, false, true, Fp8Format::E5M2};
// v_head_dim beside head_dim (PrefillVariant::vdim).
constexpr PrefillVariant kMlaBf16Causal{"prefill_bf16_d192_v128_causal", Dtype::BF16, 192, true, true, "attention", 64, false, "", 0, false, false, false, false, false, false, Fp8Format::E4M3, 128};
constexpr PrefillVariant kMlaF16{"prefill_f16_d192_v128", Dtype::F16, 192, false, false, "attention", 64, false, "", 0, false, false, false, false, false, false, Fp8Format::E4M3, 128};
constexpr PrefillVariant kMlaFp8Paged{"prefill_bf16_d192_v128_causal_p16_e4m3", Dtype::BF16, 192, true, false, "attention", 64, false, "", 16, false, false, false, false, false, true, Fp8Format::E4M3, 128};
constexpr PrefillVariant kMlaVarlen{"prefill_bf16_d192_v128_varlen_causal", Dtype::BF16, 192, true, true, "attention", 64, false, "", 0, false, false, false, false, false, false, Fp8Format::E4M3, 128};
constexpr PrefillVariant kWideVBias{"prefill_f16_d64_v128_alibi_bias", Dtype::F16, 64, false, true, "attention", 64, false, "", 0, false, false, true, true, false, false, Fp8Format::E4M3, 128};
constexpr PrefillVariant kNarrowVWindow{"prefill_bf16_d256_v64_causal_window", Dtype::BF16, 256, true, false, "attention", 64, false, "", 0, true, false, false, false, false, false, Fp8Format::E4M3, 64};
constexpr PrefillVariant kV192{"prefill_f16_d128_v192", Dtype::F16, 128, false, false, "attention", 64, false, "", 0, false, false, false, false, false, false, Fp8Format::E4M3, 192};

constexpr PrefillVariant k90Mla{"prefill90_bf16_d192_v128_causal", Dtype::BF16, 192, true, true, "attention90", 128, false, "", 0, false, false, false, false, false, false, Fp8Format::E4M3, 128};
constexpr PrefillVariant k90MlaVarlenPaged{"prefill90_f16_d192_v128_varlen_p16", Dtype::F16, 192, false, false, "attention90", 128, true, "", 16, false, false, false, false, false, false, Fp8Format::E4M3, 128};
constexpr PrefillVariant k90V192{"prefill90_bf16_d128_v192_causal", Dtype::BF16, 128, true, false, "attention90", 64, false, "", 0, false, false, false, false, false, false, Fp8Format::E4M3, 192};
constexpr PrefillVariant k90NarrowV{"prefill90_f16_d256_v64_causal_window_alibi", Dtype::F16, 256, true, false, "attention90", 64, false, "", 0, true, false, true, false, false, false, Fp8Format::E4M3, 64};
constexpr PrefillVariant k90MlaFp8{"prefill90_bf16_d192_v128_causal_e4m3", Dtype::BF16, 192, true, false, "attention90", 64, false, "", 0, false, false, false, false, false, true, Fp8Format::E4M3, 128};
constexpr PrefillVariant k90Fp8V{"prefill90_bf16_d64_v128_e4m3", Dtype::BF16, 64, false, true, "attention90", 128, false, "", 0, false, false, false, false, false, true, Fp8Format::E4M3, 128};
constexpr PrefillVariant kAutoMla{"auto_prefill_bf16_d192_v128_causal", Dtype::BF16, 192, true, true, "mainloop_auto", 128, false, "", 0, false, false, false, false, false, false, Fp8Format::E4M3, 128};

constexpr PrefillVariant kSinksBf16Causal{"prefill_bf16_d128_causal_sinks", Dtype::BF16, 128, true, true, "attention", 64, false, "", 0, false, false, false, false, false, false, Fp8Format::E4M3, 0, true};
constexpr PrefillVariant kSinksVarlenWindow{"prefill_f16_d64_varlen_causal_window_sinks", Dtype::F16, 64, true, true, "attention", 64, false, "", 0, true, false, false, false, false, false, Fp8Format::E4M3, 0, true};
constexpr PrefillVariant k90SinksWindow{"prefill90_bf16_d64_causal_window_sinks", Dtype::BF16, 64, true, true, "attention90", 128, false, "", 0, true, false, false, false, false, false, Fp8Format::E4M3, 0, true};
constexpr PrefillVariant k90SinksVarlenPaged{"prefill90_bf16_d64_varlen_p16_sinks", Dtype::BF16, 64, false, true, "attention90", 128, true, "", 16, false, false, false, false, false, false, Fp8Format::E4M3, 0, true};

constexpr PrefillVariant k90WindowVarlen{"prefill90_f16_d64_varlen_causal_window", Dtype::F16, 64, true, false, "attention90", 128, true, "", 0, true};

struct Prefill {
  uint32_t batch, seqQ, seqK, qHeads, kvHeads;
  uint32_t kvSpare = 0;   // rows of the cache past seq_k (kv_stride = seq_k + kvSpare)
  uint32_t misalign = 0;  // bytes q, k and v are shifted by on the GPU (the path through registers)
  // A NaN planted in K or V (or -inf in K) at sequence 0, key `at`, kv head 0, element 5.
  enum class Nan { None, K, V, KNegInf } nan = Nan::None;
  uint32_t at = 0;
  uint32_t window = 0;  // sliding window (a window variant): keys j > i + seq_k - seq_q - window; 0 all
  float softcap = 0;    // a softcap variant's cap: scaled scores s become softcap tanh(s / softcap)
  float alibi = 1;      // an alibi variant's slopes: alibiSlopes(q_heads, alibi)
  bool biasHeads = true;  // a bias variant's tensor: one per query head, or one for all (stride 0)
  uint32_t windowRight = 0;  // a window_right variant: keys j <= i + seq_k - seq_q + windowRight
};

// ALiBi's bias of a query at position `pos` among the keys, -slope |pos - j|, plus the bias
// tensor's row (none: 0).
struct Bias {
  double slope = 0;
  int64_t pos = 0;
  const float* row = nullptr;
  double at(uint32_t j) const { return -slope * double(std::abs(pos - int64_t(j))) + (row ? row[j] : 0.0); }
};

// Appends softmax(scale q.k_j) v_j over the keys j < keys that `sees` (q and k d values, v vd; vd
// zeros when it sees none) to out and returns the natural log-sum-exp of the scaled scores (-inf for none);
// the scaled scores capped by a softcap other than 0, then biased.
double attendRow(const float* q, uint32_t keys, const std::function<bool(uint32_t)>& sees,
                 const std::function<const float*(uint32_t)>& k, const std::function<const float*(uint32_t)>& v,
                 uint32_t d, uint32_t vd, float scale, std::vector<double>& out, double softcap = 0, Bias bias = {},
                 double sink = -INFINITY) {
  std::vector<double> s;
  std::vector<uint32_t> seen;
  double m = sink;  // -inf: no sink
  for (uint32_t j = 0; j < keys; ++j) {
    if (!sees(j)) continue;
    double dot = 0;
    for (uint32_t e = 0; e < d; ++e) dot += double(q[e]) * k(j)[e];
    seen.push_back(j);
    s.push_back((softcap > 0 ? softcap * std::tanh(dot * scale / softcap) : dot * scale) + bias.at(j));
    m = std::isnan(s.back()) ? s.back() : std::max(m, s.back());
  }
  // Keys whose biased scores are all -inf: as no key. A sink weighs e^(sink - m), without a value.
  if (m == -std::numeric_limits<double>::infinity()) seen.clear(), s.clear();
  const bool hasSink = sink > -INFINITY;
  double sum = hasSink ? std::exp(sink - m) : 0.0;
  for (double& x : s) sum += x = std::exp(x - m);
  for (uint32_t e = 0; e < vd; ++e) {
    double acc = 0;
    for (size_t n = 0; n < seen.size(); ++n) acc += s[n] * v(seen[n])[e];
    out.push_back(seen.empty() ? 0.0 : acc / sum);
  }
  return seen.empty() && !hasSink ? -std::numeric_limits<double>::infinity() : m + std::log(sum);
}

void checkPrefill(Runner& r, std::mt19937& rng, const PrefillVariant& v, const Prefill& p) {
  const uint32_t B = p.batch, SQ = p.seqQ, SK = p.seqK, QH = p.qHeads, KH = p.kvHeads, D = v.dim, VD = v.vHead();
  const uint32_t stride = SK + p.kvSpare, group = QH / KH;
  const float scale = 1.0f / std::sqrt(float(D));
  // k and v: [batch, kv_stride, ...], or a paged cache holding every sequence's seq_k rows.
  PagedCache paged;
  size_t kvRows = size_t(B) * stride;
  if (v.pageSize) {
    paged = pagedCache(rng, std::vector<uint32_t>(B, SK), v.pageSize);
    kvRows = paged.rows;
  }
  auto kvRow = [&](uint32_t b, uint32_t j) { return v.pageSize ? paged.row(b, j) : size_t(b) * stride + j; };
  std::vector<float> q = roundTo(v.d, uniform(rng, std::max<size_t>(1, size_t(B) * SQ * QH * D)));
  KvValues kv = kvValues(rng, v.d, v.fp8, v.format, std::max<size_t>(1, kvRows * KH * D),
                         std::max<size_t>(1, kvRows * KH * VD));
  std::vector<float>& k = kv.k, &val = kv.val;
  const size_t kNanAt = (SK ? kvRow(0, p.at) : 0) * KH * D + 5, vNanAt = (SK ? kvRow(0, p.at) : 0) * KH * VD + 5;
  if (p.nan == Prefill::Nan::K) k[kNanAt] = std::numeric_limits<float>::quiet_NaN();
  if (p.nan == Prefill::Nan::V) val[vNanAt] = std::numeric_limits<float>::quiet_NaN();
  if (p.nan == Prefill::Nan::KNegInf) k[kNanAt] = -std::numeric_limits<float>::infinity();
  if (v.fp8 && p.nan != Prefill::Nan::None) {
    if (p.nan == Prefill::Nan::V) kv.vCodes[vNanAt] = 0x7F;
    else kv.kCodes[kNanAt] = p.nan == Prefill::Nan::K ? 0xFF : 0xFC;  // E5M2's -inf (E4M3 has none)
  }
  std::vector<float> o(std::max<size_t>(1, size_t(B) * SQ * QH * VD), -7.0f);
  std::vector<float> lse(std::max<size_t>(1, size_t(B) * QH * SQ), -7.0f);
  Call call(v.spec, v.kernel);
  call.buffer("q", encode(v.d, q), p.misalign)
      .buffer("k", kv.kBytes(v.d), p.misalign)
      .buffer("v", kv.vBytes(v.d), p.misalign)
      .buffer("o", encode(v.d, o))
      .scalar("batch", B)
      .scalar("seq_q", SQ)
      .scalar("seq_k", SK)
      .scalar("q_heads", QH)
      .scalar("kv_heads", KH)
      .scalar("scale", scale);
  if (v.pageSize) call.buffer("block_table", paged.table).scalar("max_pages", paged.maxPages);
  else call.scalar("kv_stride", stride);
  if (v.pageSize && v.tmaRows) call.scalar("kv_rows", uint32_t(kvRows));  // the tensor maps' extent
  if (v.lse) call.buffer("lse", lse);
  if (v.window) call.scalar("window", p.window);
  if (v.windowRight) call.scalar("window_right", p.windowRight);
  if (v.softcap) call.scalar("softcap", p.softcap);
  if (v.fp8) call.scalar("k_scale", kv.kScale).scalar("v_scale", kv.vScale);
  const std::vector<float> slopes = alibiSlopes(QH, v.alibi ? p.alibi : 0.0f);
  if (v.alibi) call.buffer("alibi_slopes", slopes);
  const std::vector<float> sinks = sinkValues(rng, QH, v.sinks);
  if (v.sinks) call.buffer("sinks", sinks);
  // The bias tensor: rows of seq_k + 3 elements per head (a row stride that is not the row), of
  // seq_k for all heads (dense: the last row ends the buffer), in [-2, 2] with every 7th element
  // -inf (a masked key), and row seq_q / 2 of sequence 0, head 0 all -inf.
  const uint32_t biasRowStride = p.biasHeads ? SK + 3 : SK, biasHeadStride = p.biasHeads ? SQ * biasRowStride : 0;
  const uint32_t biasBatchStride = (p.biasHeads ? QH : 1) * SQ * biasRowStride;
  std::vector<float> bias;
  if (v.bias) {
    bias = roundTo(v.d, uniform(rng, std::max<size_t>(1, size_t(B) * biasBatchStride), -2.0f, 2.0f));
    for (size_t i = 0; i < bias.size(); i += 7) bias[i] = -std::numeric_limits<float>::infinity();
    if (SQ > 0)
      std::fill_n(bias.begin() + size_t(SQ / 2) * biasRowStride, SK, -std::numeric_limits<float>::infinity());
    call.buffer("bias", encode(v.d, bias))
        .scalar("bias_batch_stride", biasBatchStride)
        .scalar("bias_head_stride", biasHeadStride)
        .scalar("bias_row_stride", biasRowStride);
  }
  auto biasRow = [&](uint32_t b, uint32_t qh, uint32_t i) {
    return v.bias ? &bias[size_t(b) * biasBatchStride + size_t(qh) * biasHeadStride + size_t(i) * biasRowStride] : nullptr;
  };
  call.target(v.target);
  Outputs out = r.run(call);

  // Query row i sees key j when j < seq_k and, causal, j <= i + seq_k - seq_q (with window_right
  // j <= i + seq_k - seq_q + window_right; and with a window j > i + seq_k - seq_q - window).
  auto sees = [&](uint32_t i, uint32_t j) {
    const int64_t diagonal = int64_t(i) + SK - SQ;
    return (!v.causal || int64_t(j) <= diagonal) && (!v.windowRight || int64_t(j) <= diagonal + p.windowRight) &&
           (p.window == 0 || int64_t(j) > diagonal - p.window);
  };
  // Rows of a block (64 query rows; a consumer warpgroup's 64 in the wgmma member) multiply every
  // key of the tiles (v.tileKeys keys) some row of the block sees, so a NaN in V reaches them all
  // (docs/kernels.md).
  auto tileLoaded = [&](uint32_t i, uint32_t j) {
    const uint32_t last = std::min(SQ, (i / 64 + 1) * 64) - 1;  // the block's last row
    return j < SK && sees(last, j / v.tileKeys * v.tileKeys);
  };
  std::vector<double> want, wantLse;
  for (uint32_t b = 0; b < B; ++b)
    for (uint32_t i = 0; i < SQ; ++i)
      for (uint32_t qh = 0; qh < QH; ++qh) {
        const uint32_t h = qh / group;
        auto row = [&](const std::vector<float>& t, uint32_t j, uint32_t d) { return &t[(kvRow(b, j) * KH + h) * d]; };
        const size_t at = want.size();
        wantLse.push_back(attendRow(&q[((size_t(b) * SQ + i) * QH + qh) * D], SK, [&](uint32_t j) { return sees(i, j); },
                                    [&](uint32_t j) { return row(k, j, D); }, [&](uint32_t j) { return row(val, j, VD); },
                                    D, VD, scale, want, v.softcap ? p.softcap : 0.0,
                                    {slopes[qh], int64_t(i) + SK - SQ, biasRow(b, qh, i)}, sinks[qh]));
        if (p.nan == Prefill::Nan::V && b == 0 && h == 0 && tileLoaded(i, p.at))
          want[at + 5] = std::numeric_limits<double>::quiet_NaN();
      }
  std::string what = std::string(v.kernel) + " batch " + std::to_string(B) + " seq_q " + std::to_string(SQ) + " seq_k " +
                     std::to_string(SK) + " heads " + std::to_string(QH) + "/" + std::to_string(KH) +
                     (v.pageSize ? " page_size " + std::to_string(v.pageSize) : "") +
                     (v.window ? " window " + std::to_string(p.window) : "") +
                     (v.windowRight ? " window_right " + std::to_string(p.windowRight) : "") +
                     (v.softcap ? " softcap " + std::to_string(p.softcap) : "") +
                     (v.alibi ? " alibi " + std::to_string(p.alibi) : "") +
                     (v.bias ? (p.biasHeads ? " bias per head" : " bias for all heads") : "") +
                     (v.sinks ? " sinks" : "") +
                     (v.fp8 ? std::string(v.format == Fp8Format::E4M3 ? " fp8_e4m3" : " fp8_e5m2") : "");
  // The weights multiply V rounded to the storage type (P is an mma input): each off by at most
  // a unit roundoff of it, so the output by roundoff * max|v| = roundoff (|v| <= 1), plus its own
  // rounding to storage; scores and the exponentials are f32 (a few ulp, 1e-5 of slack).
  std::vector<float> got = decode(v.d, out.get<std::byte>("o"));
  got.resize(want.size());  // buffers hold at least one element
  expectClose(got, want, roundoff(v.d) + 1e-5, roundoff(v.d), what);
  // lse: ln of the f32 sum of unrounded weights; its error is the scores' and ex2's (relative to
  // the largest score of the row, |s| <= head_dim * scale).
  if (v.lse) {
    std::vector<float> gotLse = out.get<float>("lse");
    gotLse.resize(wantLse.size());
    // The kernel writes [batch, q_heads, seq_q]; the reference was built [batch, seq_q, q_heads].
    std::vector<double> reordered(wantLse.size());
    for (uint32_t b = 0; b < B; ++b)
      for (uint32_t i = 0; i < SQ; ++i)
        for (uint32_t qh = 0; qh < QH; ++qh)
          reordered[(size_t(b) * QH + qh) * SQ + i] = wantLse[(size_t(b) * SQ + i) * QH + qh];
    expectClose(gotLse, reordered, 1e-4, 1e-5, what + " lse");
  }
}

}  // namespace

LIBRARY_TEST("attention_prefill: seq 1, 17 and 130, causal and not, grouped-query heads", attentionPrefill) {
  std::mt19937 rng(seed());
  for (const PrefillVariant* v : {&kPrefillBf16, &kPrefillBf16Causal, &kPrefillF16, &kPrefillF16Causal}) {
    checkPrefill(r, rng, *v, {1, 1, 1, 2, 2});
    checkPrefill(r, rng, *v, {2, 17, 17, 4, 1, 3});
    checkPrefill(r, rng, *v, {1, 130, 130, 2, 2});
  }
  checkPrefill(r, rng, kPrefillBf16Causal, {1, 130, 130, 8, 1});
}

LIBRARY_TEST("attention_prefill: new tokens after a cached prefix", attentionPrefillChunk) {
  std::mt19937 rng(seed());
  for (const PrefillVariant* v : {&kPrefillBf16Causal, &kPrefillBf16, &kPrefillF16Causal}) {
    checkPrefill(r, rng, *v, {2, 17, 67, 4, 2, 13});
    checkPrefill(r, rng, *v, {1, 3, 200, 2, 2});  // a few tokens at a time over a long cache
  }
  checkPrefill(r, rng, kPrefillF16Causal, {1, 130, 170, 2, 1});
}

// fp8 k and v (cache_dtype): random codes of every finite value converted exactly to the storage
// type as tiles are staged, k_scale folded into the scores' scale, v_scale into the outputs; a
// paged E4M3 cache with a cached prefix (chunked prefill), E5M2 into f16, head_dim 256; 8-byte
// code loads, or 2-byte aligned tensors on the GPU (byte loads); NaN and E5M2's -inf in K, NaN in V;
// the sm_90 code's cvt.f16x2 and the sm_80 code's integer decoding.
LIBRARY_TEST("attention_prefill: fp8 k and v", attentionPrefillFp8) {
  std::mt19937 rng(seed());
  checkPrefill(r, rng, kFp8PagedBf16Causal, {2, 17, 67, 4, 2});
  checkPrefill(r, rng, kFp8PagedBf16Causal, {1, 70, 70, 2, 1, 0, 2});
  checkPrefill(r, rng, kFp8F16, {2, 17, 17, 4, 1, 3});
  checkPrefill(r, rng, kFp8F16, {1, 70, 130, 2, 2, 0, 2});
  checkPrefill(r, rng, kFp8D256Causal, {1, 70, 100, 2, 2});
  checkPrefill(r, rng, kFp8PagedBf16Causal, {1, 20, 40, 2, 2, 0, 0, Prefill::Nan::K, 9});
  checkPrefill(r, rng, kFp8F16, {1, 20, 40, 2, 2, 0, 0, Prefill::Nan::KNegInf, 9});
  checkPrefill(r, rng, kFp8F16, {1, 20, 40, 2, 2, 0, 0, Prefill::Nan::V, 9});
  checkPrefill(r, rng, kFp8PagedBf16Causal80, {2, 17, 67, 4, 2});
  checkPrefill(r, rng, kFp8F16Sm80, {1, 70, 130, 2, 2, 0, 2});
  checkPrefill(r, rng, kFp8F16Sm80, {1, 20, 40, 2, 2, 0, 0, Prefill::Nan::KNegInf, 9});
}

// The same on the wgmma member (sm_90a): a paged E4M3 cache under a cached prefix, E5M2 into f16,
// integer decoding; NaN and -inf codes in K, NaN in V (which reaches the rows of its 128-key tile).
LIBRARY_TEST("attention_prefill wgmma (sm_90a): fp8 k and v", attentionPrefill90Fp8) {
  std::mt19937 rng(seed());
  checkPrefill(r, rng, k90Fp8PagedBf16Causal, {2, 17, 67, 4, 2});
  checkPrefill(r, rng, k90Fp8PagedBf16Causal, {1, 130, 300, 2, 1});
  checkPrefill(r, rng, k90Fp8F16, {2, 17, 17, 4, 1, 3});
  checkPrefill(r, rng, k90Fp8F16, {1, 70, 130, 2, 2});
  checkPrefill(r, rng, k90Fp8PagedBf16Causal, {1, 20, 40, 2, 2, 0, 0, Prefill::Nan::K, 9});
  checkPrefill(r, rng, k90Fp8F16, {1, 20, 40, 2, 2, 0, 0, Prefill::Nan::KNegInf, 9});
  checkPrefill(r, rng, k90Fp8F16, {1, 20, 40, 2, 2, 0, 0, Prefill::Nan::V, 9});
  checkPrefill(r, rng, k90Fp8Integer, {2, 37, 37, 4, 1, 3});
  checkPrefill(r, rng, k90Fp8Integer, {1, 130, 200, 2, 2});
}

LIBRARY_TEST("attention_prefill: rows without keys, empty sequences, unaligned tensors", attentionPrefillEdges) {
  std::mt19937 rng(seed());
  checkPrefill(r, rng, kPrefillBf16Causal, {1, 70, 5, 2, 2});  // rows 0..64 see no key: zeros, lse -inf
  checkPrefill(r, rng, kPrefillBf16, {2, 9, 0, 2, 1});         // seq_k 0: zeros
  checkPrefill(r, rng, kPrefillF16Causal, {1, 0, 4, 2, 2});     // seq_q 0: nothing launched
  // 2-byte aligned: element by element through registers (on the GPU and the simulator).
  checkPrefill(r, rng, kPrefillBf16Causal, {2, 17, 40, 2, 1, 0, 2});
  checkPrefill(r, rng, kPrefillF16, {1, 70, 70, 2, 2, 0, 2});
}

LIBRARY_TEST("attention_prefill: NaN and -inf in K poison or drop the key for the rows that see it, NaN in V the rows of its tiles",
             attentionPrefillNan) {
  std::mt19937 rng(seed());
  checkPrefill(r, rng, kPrefillBf16Causal, {1, 130, 130, 2, 2, 0, 0, Prefill::Nan::K, 70});
  checkPrefill(r, rng, kPrefillF16Causal, {1, 130, 130, 2, 2, 0, 0, Prefill::Nan::V, 70});
  checkPrefill(r, rng, kPrefillBf16, {1, 17, 17, 2, 1, 0, 0, Prefill::Nan::V, 3});
  // -inf in K: a score of -inf (q[5] > 0) weighs 0, +inf (q[5] < 0) makes the row NaN.
  checkPrefill(r, rng, kPrefillBf16Causal, {1, 70, 70, 4, 1, 0, 0, Prefill::Nan::KNegInf, 20});
}

LIBRARY_TEST("attention_prefill wgmma (sm_90a): seq 1, 37, 100 and 130, causal and not, head_dim 64 and 128",
             attentionPrefill90) {
  std::mt19937 rng(seed());
  for (const PrefillVariant* v : {&k90Bf16, &k90Bf16Causal, &k90Bf16D64, &k90Bf16D64Causal, &k90F16Causal}) {
    checkPrefill(r, rng, *v, {1, 1, 1, 2, 2});
    checkPrefill(r, rng, *v, {2, 37, 37, 4, 1, 3});  // grouped-query heads, spare cache rows
    checkPrefill(r, rng, *v, {1, 100, 100, 2, 2});
    checkPrefill(r, rng, *v, {1, 130, 130, 2, 1});   // two key tiles, the second partial
  }
}

LIBRARY_TEST("attention_prefill wgmma (sm_90a): cached prefixes, rows without keys, special values",
             attentionPrefill90Edges) {
  std::mt19937 rng(seed());
  checkPrefill(r, rng, k90Bf16Causal, {2, 37, 300, 2, 2, 5});  // three key tiles: a stage reused
  checkPrefill(r, rng, k90Bf16, {1, 3, 200, 2, 1});
  checkPrefill(r, rng, k90Bf16D64Causal, {1, 70, 5, 2, 2});  // rows 0..64 see no key: zeros
  checkPrefill(r, rng, k90F16Causal, {1, 70, 5, 2, 2});      // and lse -inf
  checkPrefill(r, rng, k90Bf16, {2, 9, 0, 2, 1});            // seq_k 0: zeros
  checkPrefill(r, rng, k90Bf16D64Causal, {1, 0, 4, 2, 2});   // seq_q 0: nothing launched
  checkPrefill(r, rng, k90Bf16Causal, {1, 130, 130, 2, 2, 0, 0, Prefill::Nan::K, 70});
  checkPrefill(r, rng, k90F16Causal, {1, 130, 130, 2, 2, 0, 0, Prefill::Nan::V, 70});
  checkPrefill(r, rng, k90Bf16D64, {1, 17, 17, 2, 1, 0, 0, Prefill::Nan::V, 3});
  // NaN in a spare cache row past seq_k (loaded with the tile by TMA): zeroed, it reaches nothing.
  checkPrefill(r, rng, k90Bf16, {1, 37, 37, 2, 2, 4, 0, Prefill::Nan::V, 38});
  checkPrefill(r, rng, k90Bf16Causal, {1, 70, 70, 4, 1, 0, 0, Prefill::Nan::KNegInf, 20});
  // A block's two consumers see 2 and 3 key tiles (rows 0-63 and 64-127 of a 170-key prefix):
  // the first only takes part in the third, whose NaN in V reaches none of its rows.
  checkPrefill(r, rng, k90Bf16Causal, {1, 130, 300, 2, 2, 0, 0, Prefill::Nan::V, 280});
}

namespace {

// Sequences of their own (q, kv) lengths packed into one q/o and one k/v buffer with gaps of 2 and
// 3 rows between them; the gaps of o and lse must keep their sentinel.
void checkVarlen(Runner& r, std::mt19937& rng, const PrefillVariant& v, const std::vector<std::pair<uint32_t, uint32_t>>& seqs,
                 uint32_t QH, uint32_t KH, uint32_t window = 0, float alibi = 1, uint32_t windowRight = 0) {
  const uint32_t D = v.dim, VD = v.vHead(), group = QH / KH, B = uint32_t(seqs.size());
  const float scale = 1.0f / std::sqrt(float(D));
  std::vector<uint32_t> qOff, qLen, kvOff, kvLen;
  uint32_t qRows = 0, kvRows = 0, maxQ = 0;
  for (auto [lq, lk] : seqs) {
    qOff.push_back(qRows + 2);
    qLen.push_back(lq);
    kvOff.push_back(kvRows + 3);
    kvLen.push_back(lk);
    qRows += lq + 2;
    kvRows += lk + 3;
    maxQ = std::max(maxQ, lq);
  }
  // Paged: k and v hold the sequences' pages instead (kv_offsets unused).
  PagedCache paged;
  if (v.pageSize) {
    paged = pagedCache(rng, kvLen, v.pageSize);
    kvRows = paged.rows;
  }
  auto kvRow = [&](uint32_t b, uint32_t j) { return v.pageSize ? paged.row(b, j) : size_t(kvOff[b]) + j; };
  std::vector<float> q = roundTo(v.d, uniform(rng, size_t(qRows) * QH * D));
  std::vector<float> k = roundTo(v.d, uniform(rng, std::max<size_t>(1, size_t(kvRows) * KH * D)));
  std::vector<float> val = roundTo(v.d, uniform(rng, std::max<size_t>(1, size_t(kvRows) * KH * VD)));
  const float sentinel = -7.0f;
  const size_t oSize = size_t(qRows) * QH * VD;
  Call call(v.spec, v.kernel);
  call.buffer("q", encode(v.d, q))
      .buffer("k", encode(v.d, k))
      .buffer("v", encode(v.d, val))
      .buffer("o", encode(v.d, std::vector<float>(oSize, sentinel)))
      .buffer("q_offsets", qOff)
      .buffer("q_lengths", qLen)
      .buffer("kv_lengths", kvLen)
      .scalar("batch", B)
      .scalar("max_seq_q", maxQ);
  if (v.pageSize) call.buffer("block_table", paged.table).scalar("max_pages", paged.maxPages);
  else call.buffer("kv_offsets", kvOff);
  if (v.tmaRows) call.scalar("q_rows", qRows).scalar("kv_rows", kvRows);  // wgmma: the tensor maps' extents
  call.target(v.target);
  call.scalar("q_heads", QH)
      .scalar("kv_heads", KH)
      .scalar("scale", scale);
  if (v.lse) call.buffer("lse", std::vector<float>(size_t(qRows) * QH, sentinel));
  if (v.window) call.scalar("window", window);
  if (v.windowRight) call.scalar("window_right", windowRight);
  const std::vector<float> slopes = alibiSlopes(QH, v.alibi ? alibi : 0.0f);
  if (v.alibi) call.buffer("alibi_slopes", slopes);
  const std::vector<float> sinks = sinkValues(rng, QH, v.sinks);
  if (v.sinks) call.buffer("sinks", sinks);
  Outputs out = r.run(call);

  std::vector<double> want(oSize, sentinel), wantLse(size_t(qRows) * QH, sentinel);
  for (uint32_t b = 0; b < B; ++b)
    for (uint32_t i = 0; i < qLen[b]; ++i)
      for (uint32_t qh = 0; qh < QH; ++qh) {
        const size_t row = size_t(qOff[b]) + i, h = qh / group;
        auto key = [&](const std::vector<float>& t, uint32_t j, uint32_t d) { return &t[(kvRow(b, j) * KH + h) * d]; };
        auto sees = [&](uint32_t j) {
          const int64_t diagonal = int64_t(i) + kvLen[b] - qLen[b];
          return (!v.causal || int64_t(j) <= diagonal) && (!v.windowRight || int64_t(j) <= diagonal + windowRight) &&
                 (window == 0 || int64_t(j) > diagonal - window);
        };
        std::vector<double> o;
        wantLse[row * QH + qh] = attendRow(&q[(row * QH + qh) * D], kvLen[b], sees,
                                           [&](uint32_t j) { return key(k, j, D); },
                                           [&](uint32_t j) { return key(val, j, VD); }, D, VD, scale, o, 0,
                                           {slopes[qh], int64_t(i) + kvLen[b] - qLen[b]}, sinks[qh]);
        std::copy(o.begin(), o.end(), want.begin() + ptrdiff_t((row * QH + qh) * VD));
      }
  std::string what = std::string(v.kernel) + " with " + std::to_string(B) + " sequences" + (v.sinks ? " sinks" : "") +
                     (v.window ? " window " + std::to_string(window) : "") +
                     (v.alibi ? " alibi " + std::to_string(alibi) : "");
  expectClose(decode(v.d, out.get<std::byte>("o")), want, roundoff(v.d) + 1e-5, roundoff(v.d), what);
  if (v.lse) expectClose(out.get<float>("lse"), wantLse, 1e-4, 1e-5, what + " lse");
}

}  // namespace

LIBRARY_TEST("attention_prefill varlen: sequences of their own lengths in one launch", attentionPrefillVarlen) {
  std::mt19937 rng(seed());
  // Lengths (q, kv): equal, a prefix, none to attend to, rows without keys, nothing to compute.
  const std::vector<std::pair<uint32_t, uint32_t>> mixed = {{1, 1}, {17, 67}, {130, 130}, {0, 5}, {70, 5}, {3, 0}};
  checkVarlen(r, rng, kVarlenBf16Causal, mixed, 4, 2);
  checkVarlen(r, rng, kVarlenF16, mixed, 2, 2);
  checkVarlen(r, rng, kVarlenBf16Causal, {{65, 200}}, 8, 1);
}

// Paged k and v (mainloop = "mma"): pages of 16 rows (a key tile over 4 pages), 128 (a page over
// 2 tiles) and 1 (a row a page: the table is a row map), the sequence's pages shuffled in a cache
// twice their size; a cached prefix, rows without keys, element loads on the GPU.
LIBRARY_TEST("attention_prefill: paged k and v through a block table", attentionPrefillPaged) {
  std::mt19937 rng(seed());
  checkPrefill(r, rng, kPagedBf16Causal, {2, 17, 67, 4, 2});
  checkPrefill(r, rng, kPagedBf16Causal, {1, 130, 130, 2, 1});
  checkPrefill(r, rng, kPagedBf16Causal, {1, 70, 5, 2, 2});  // rows without keys
  checkPrefill(r, rng, kPagedF16, {2, 40, 300, 2, 2});
  checkPrefill(r, rng, kPagedF16, {1, 17, 17, 2, 2, 0, 2});  // 2-byte aligned: element loads
  checkPrefill(r, rng, kPagedF16, {1, 9, 9, 2, 1, 0, 0, Prefill::Nan::V, 5});
  const std::vector<std::pair<uint32_t, uint32_t>> mixed = {{1, 1}, {17, 67}, {130, 130}, {0, 5}, {70, 5}, {3, 0}};
  checkVarlen(r, rng, kPagedVarlenBf16Causal, mixed, 4, 2);
}

// head_dim 256: its tiles' copies take 4 rows a pass (each with its own swizzle), 32 output
// tiles a warp; the same problems as at 64 and 128, and varlen over a paged cache.
LIBRARY_TEST("attention_prefill: head_dim 256", attentionPrefillD256) {
  std::mt19937 rng(seed());
  for (const PrefillVariant* v : {&kPrefillBf16D256Causal, &kPrefillF16D256}) {
    checkPrefill(r, rng, *v, {1, 1, 1, 2, 2});
    checkPrefill(r, rng, *v, {2, 17, 67, 4, 2, 3});  // a cached prefix, grouped-query heads, spare rows
    checkPrefill(r, rng, *v, {1, 17, 40, 2, 1, 0, 2});  // 2-byte aligned: element loads on the GPU
  }
  checkPrefill(r, rng, kPrefillBf16D256Causal, {1, 130, 130, 2, 1});  // three query blocks, three key tiles
  checkPrefill(r, rng, kPrefillBf16D256Causal, {1, 70, 5, 2, 2});     // rows without keys
  checkPrefill(r, rng, kPrefillF16D256, {1, 70, 70, 2, 1, 0, 0, Prefill::Nan::V, 40});
  const std::vector<std::pair<uint32_t, uint32_t>> mixed = {{1, 1}, {17, 67}, {0, 5}, {70, 5}, {3, 0}};
  checkVarlen(r, rng, kPrefillF16D256VarlenPaged, mixed, 4, 2);
}

LIBRARY_TEST("attention_prefill wgmma (sm_90a) varlen: sequences of their own lengths in one launch", attentionPrefill90Varlen) {
  std::mt19937 rng(seed());
  // As above, and a sequence whose second consumer has no rows (70), one over three key tiles
  // (a stage reused: 300), and a last sequence whose tiles run past the end of q and k/v.
  const std::vector<std::pair<uint32_t, uint32_t>> mixed = {{1, 1}, {17, 67}, {130, 130}, {0, 5}, {70, 5}, {3, 0}, {37, 300}, {140, 150}};
  checkVarlen(r, rng, k90VarlenBf16Causal, mixed, 4, 2);
  checkVarlen(r, rng, k90VarlenF16, mixed, 2, 2);
}

LIBRARY_TEST("attention_prefill mainloop auto varlen: the sm_80 and sm_90a code of one kernel", attentionPrefillAutoVarlen) {
  std::mt19937 rng(seed());
  const std::vector<std::pair<uint32_t, uint32_t>> mixed = {{1, 1}, {17, 67}, {0, 5}, {70, 5}, {3, 0}, {37, 150}};
  for (const std::string& target : codeTargets(r, {"sm_80", "sm_90a"})) {
    PrefillVariant v = kAutoVarlen;
    v.target = target.c_str();
    checkVarlen(r, rng, v, mixed, 4, 2);
    PrefillVariant paged = kAutoPaged;
    paged.target = target.c_str();
    checkPrefill(r, rng, paged, {2, 37, 150, 4, 2});
    checkPrefill(r, rng, paged, {1, 70, 5, 2, 2});  // rows without keys
    PrefillVariant fp8 = kAutoFp8;  // fp8 caches: converted after TMA (sm_90a), or as staged (sm_80)
    fp8.target = target.c_str();
    checkPrefill(r, rng, fp8, {2, 37, 150, 4, 2});
  }
}

// Paged k and v on the wgmma member: the key tiles' TMA boxes come one page at a time. A cache
// holding one sequence whose last tile's boxes reach past the table's row (their pages are read
// from the sequence's last page, not the table), three tiles (a stage reused), rows without keys,
// NaN in V; varlen with every kind of sequence.
LIBRARY_TEST("attention_prefill wgmma (sm_90a): paged k and v through a block table", attentionPrefill90Paged) {
  std::mt19937 rng(seed());
  checkPrefill(r, rng, k90PagedBf16Causal, {1, 130, 130, 2, 1});
  checkPrefill(r, rng, k90PagedBf16Causal, {2, 37, 300, 2, 2});
  checkPrefill(r, rng, k90PagedBf16Causal, {1, 70, 5, 2, 2});
  checkPrefill(r, rng, k90PagedBf16Causal, {1, 130, 130, 2, 2, 0, 0, Prefill::Nan::V, 70});
  checkPrefill(r, rng, k90PagedF16, {2, 40, 300, 2, 2});
  checkPrefill(r, rng, k90PagedF16, {1, 17, 600, 2, 1});  // three pages, two tiles each
  checkPrefill(r, rng, k90PagedF16, {2, 9, 0, 2, 1});     // seq_k 0: zeros
  const std::vector<std::pair<uint32_t, uint32_t>> mixed = {{1, 1}, {17, 67}, {130, 130}, {0, 5}, {70, 5}, {3, 0}, {37, 300}, {140, 150}};
  checkVarlen(r, rng, k90PagedVarlen, mixed, 4, 2);
}

// Sliding windows (window = true): a query sees the `window` keys up to its own, 0 all of them.
// Decode: as many splits as the window needs (counted from its start; shorter sequences leave some
// empty), split lengths within and past it, a window past the sequence's start, windows of 1 and
// 0. Prefill: windows of 1, within a key tile and over one,
// larger than the sequence and 0, with a cached prefix, and blocks whose first tiles are skipped
// (seq 384, window 20: the wgmma member's second consumer then waits out a tile it does not
// multiply before its own).
LIBRARY_TEST("attention_decode: sliding windows", attentionDecodeWindow) {
  std::mt19937 rng(seed());
  const std::vector<uint32_t> lengths = {0, 1, 2, 31, 257};
  for (uint32_t window : {0u, 1u, 5u, 40u, 100u, 300u}) {
    checkDecode(r, rng, kDecodeWindowBf16, {lengths, 2, 64, Problem::Nan::None, 0, 0, window});
    checkDecode(r, rng, kDecodeWindowPaged, {lengths, 2, 1000, Problem::Nan::None, 0, 0, window});
  }
}

LIBRARY_TEST("attention_prefill: sliding windows", attentionPrefillWindow) {
  std::mt19937 rng(seed());
  for (uint32_t window : {0u, 1u, 65u, 1000u}) {
    Prefill p{1, 130, 130, 2, 2};
    p.window = window;
    checkPrefill(r, rng, kWindowBf16, p);
  }
  for (uint32_t window : {20u, 129u}) {
    Prefill prefix{2, 37, 300, 2, 1, 5};
    prefix.window = window;
    checkPrefill(r, rng, kWindowBf16, prefix);
    checkPrefill(r, rng, kWindowPagedF16, prefix);
    Prefill longer{1, 384, 384, 2, 2};
    longer.window = window;
    checkPrefill(r, rng, kWindowPagedF16, longer);
  }
  const std::vector<std::pair<uint32_t, uint32_t>> mixed = {{1, 1}, {17, 67}, {130, 130}, {0, 5}, {70, 5}, {3, 0}};
  checkVarlen(r, rng, kWindowVarlen, mixed, 4, 2, 30);
}

LIBRARY_TEST("attention_prefill wgmma (sm_90a): sliding windows", attentionPrefill90Window) {
  std::mt19937 rng(seed());
  for (uint32_t window : {0u, 1u, 129u}) {
    Prefill p{1, 130, 130, 2, 2};
    p.window = window;
    checkPrefill(r, rng, k90WindowBf16, p);
  }
  for (uint32_t window : {20u, 200u}) {
    Prefill longer{1, 384, 384, 2, 1};
    longer.window = window;
    checkPrefill(r, rng, k90WindowBf16, longer);
    Prefill prefix{2, 37, 300, 2, 2, 5};
    prefix.window = window;
    checkPrefill(r, rng, k90WindowBf16, prefix);
  }
  const std::vector<std::pair<uint32_t, uint32_t>> mixed = {{1, 1}, {17, 67}, {130, 130}, {0, 5}, {70, 5}, {3, 0}, {37, 300}, {140, 150}};
  checkVarlen(r, rng, k90WindowVarlen, mixed, 2, 2, 50);
}

// Logit soft-capping (softcap = true): scaled scores s become softcap tanh(s / softcap) before the
// softmax. Caps of 0.5 and 2 (most scores capped hard: |s| reaches about 3 here) and, in decode,
// 50 (almost none) and 0 (no cap: the one kernel serves uncapped layers; prefill's in the ALiBi
// test); with a window; -inf in K becomes -softcap (a weight, not 0), +inf +softcap.
LIBRARY_TEST("attention: logit soft-capping", attentionSoftcap) {
  std::mt19937 rng(seed());
  for (float cap : {0.5f, 2.0f, 50.0f, 0.0f}) {
    checkDecode(r, rng, kDecodeSoftcap, {{0, 1, 31, 257}, 2, 64, Problem::Nan::None, 0, 0, 0, cap});
    if (cap > 2.0f || cap == 0.0f) continue;  // almost no score capped, or none: the decode case shows it
    Prefill p{1, 130, 130, 2, 2};
    p.window = cap < 1 ? 40 : 0;
    p.softcap = cap;
    checkPrefill(r, rng, kSoftcapWindow, p);
    Prefill q{2, 37, 150, 4, 2};
    q.softcap = cap;
    checkPrefill(r, rng, k90Softcap, q);
  }
  Prefill inf{1, 70, 70, 4, 1, 0, 0, Prefill::Nan::KNegInf, 20};
  inf.softcap = 2.0f;
  checkPrefill(r, rng, k90Softcap, inf);
  inf.window = 100;
  checkPrefill(r, rng, kSoftcapWindow, inf);
}

// ALiBi (alibi = true): query head h's scaled (and capped) scores gain -slope_h |i + seq_k - seq_q
// - j|, the slopes 2^(-8 (h + 1) / q_heads) times 0 (no bias), 1 and 16 (only the nearest keys
// weigh). Decode with a cap and without; prefill not causal (biased on both sides of a row's
// position) after a prefix and with more rows than keys (positions below 0), capped and not;
// causal varlen (each sequence's own positions); wgmma causal with a window and without.
LIBRARY_TEST("attention: ALiBi position biases", attentionAlibi) {
  std::mt19937 rng(seed());
  for (float alibi : {0.0f, 1.0f, 16.0f})
    checkDecode(r, rng, kDecodeAlibi, {{0, 1, 31, 257}, 2, 64, Problem::Nan::None, 0, 0, 0, alibi == 1 ? 2.0f : 0.0f, alibi});
  for (float alibi : {1.0f, 16.0f}) {
    Prefill p{1, 100, 150, 4, 2};
    p.alibi = alibi;
    p.softcap = alibi > 1 ? 0.0f : 2.0f;
    checkPrefill(r, rng, kAlibiSoftcap, p);
    Prefill w{1, 130, 200, 2, 1};
    w.window = alibi > 1 ? 0 : 100;
    w.alibi = alibi;
    checkPrefill(r, rng, k90AlibiWindow, w);
  }
  checkPrefill(r, rng, kAlibiSoftcap, {2, 70, 20, 2, 2});
  checkVarlen(r, rng, kAlibiVarlen, {{1, 1}, {17, 67}, {70, 5}, {3, 0}, {130, 130}}, 4, 2);
}

// Windows to the right (window_right, not causal): row i sees keys up to i + seq_k - seq_q +
// window_right, with window from i + seq_k - seq_q - window + 1 on (two-sided). Right reaches of
// 0 (the causal pattern), a few keys, past a tile and past every key; no left window; a cached
// prefix and more rows than keys (positions below 0, which the right window brings back in);
// both members; ALiBi on both sides of a row.
LIBRARY_TEST("attention_prefill: windows to the right", attentionPrefillWindowRight) {
  std::mt19937 rng(seed());
  struct Reach {
    uint32_t left, right;
  };
  for (Reach w : {Reach{20, 0}, Reach{20, 5}, Reach{1, 70}, Reach{0, 17}, Reach{64, 1000}}) {
    for (const PrefillVariant* v : {&kWindow2Bf16, &k90Window2}) {
      Prefill p{1, 130, 130, 2, 1};
      p.window = w.left;
      p.windowRight = w.right;
      checkPrefill(r, rng, *v, p);
    }
    Prefill q{2, 70, 20, 2, 2};
    q.window = w.left;
    q.windowRight = w.right;
    checkPrefill(r, rng, kWindow2Bf16, q);
  }
  for (uint32_t right : {0u, 9u, 200u}) {
    Prefill p{1, 100, 150, 4, 2};
    p.windowRight = right;
    p.alibi = 4;
    checkPrefill(r, rng, kRightAlibiF16, p);
  }
  // Sequences of their own lengths (each its own positions), on the wgmma member over pages too.
  const std::vector<std::pair<uint32_t, uint32_t>> seqs = {{1, 1}, {17, 67}, {130, 130}, {0, 5}, {70, 5}, {3, 0}};
  checkVarlen(r, rng, kVarlenWindow2, seqs, 4, 2, 30, 1, 7);
  checkVarlen(r, rng, k90VarlenPagedWindow2, seqs, 2, 2, 0, 1, 70);
}

// An additive bias tensor (bias = true): each head's own or one for all heads (stride 0), a row
// stride past the row, masked keys (-inf) and a row with every key masked (zeros, lse -inf); not
// causal after a prefix and with more rows than keys, causal over a paged cache with ALiBi,
// wgmma causal with a window and head_dim 256 with key tiles of 64.
LIBRARY_TEST("attention_prefill: additive bias tensor", attentionPrefillBias) {
  std::mt19937 rng(seed());
  for (bool heads : {true, false}) {
    Prefill p{2, 100, 150, 4, 2};
    p.biasHeads = heads;
    checkPrefill(r, rng, kBiasF16, p);
    Prefill a{1, 130, 170, 2, 1};
    a.biasHeads = heads;
    a.alibi = 4;
    checkPrefill(r, rng, kBiasPagedAlibi, a);
    Prefill w{1, 130, 200, 2, 1};
    w.window = heads ? 100 : 0;
    w.biasHeads = heads;
    checkPrefill(r, rng, k90BiasWindow, w);
  }
  checkPrefill(r, rng, kBiasF16, {1, 70, 20, 2, 2});
  checkPrefill(r, rng, k90BiasD256, {1, 67, 67, 2, 1});
}

// head_dim 256 on the wgmma member: key tiles of 64 (the Q tile and two stages of K and V fill 193
// KiB of shared memory), O a v128.f32 accumulator a consumer thread, four strips a row; the
// problems of the mma member's head_dim 256 test, and a NaN in V reaching the rows of its tile.
LIBRARY_TEST("attention_prefill wgmma (sm_90a): head_dim 256", attentionPrefill90D256) {
  std::mt19937 rng(seed());
  for (const PrefillVariant* v : {&k90Bf16D256Causal, &k90F16D256}) {
    checkPrefill(r, rng, *v, {1, 1, 1, 2, 2});
    checkPrefill(r, rng, *v, {2, 17, 67, 4, 2, 3});  // a cached prefix, grouped-query heads, spare rows
  }
  checkPrefill(r, rng, k90Bf16D256Causal, {1, 130, 130, 2, 1});  // two query blocks, three key tiles
  checkPrefill(r, rng, k90Bf16D256Causal, {1, 70, 5, 2, 2});     // rows without keys
  checkPrefill(r, rng, k90F16D256, {1, 70, 70, 2, 1, 0, 0, Prefill::Nan::V, 40});
  const std::vector<std::pair<uint32_t, uint32_t>> mixed = {{1, 1}, {17, 67}, {0, 5}, {70, 5}, {3, 0}};
  checkVarlen(r, rng, k90D256VarlenPaged, mixed, 4, 2);
}

// DeepSeek's multi-head latent attention at prefill (q and k heads of 128 + 64 rope elements, v
// and o of 128: 24 16-byte chunks a row of Q and K, which the 128 threads stage in passes of their
// own rows), and v heads wider or narrower than q's: contiguous and unaligned (the element path),
// a cached prefix under grouped-query heads, NaN in K and V, a paged E4M3 cache (8-byte and byte
// loads), varlen, with ALiBi and a bias tensor, with a window.
LIBRARY_TEST("attention_prefill: v_head_dim beside head_dim (multi-head latent attention's 192 and 128)",
             attentionPrefillVHead) {
  std::mt19937 rng(seed());
  checkPrefill(r, rng, kMlaBf16Causal, {1, 130, 130, 2, 2});
  checkPrefill(r, rng, kMlaBf16Causal, {2, 17, 67, 4, 1, 3});
  checkPrefill(r, rng, kMlaBf16Causal, {1, 70, 70, 2, 2, 0, 0, Prefill::Nan::V, 20});
  checkPrefill(r, rng, kMlaF16, {1, 37, 37, 2, 2, 0, 2});
  checkPrefill(r, rng, kMlaF16, {1, 70, 100, 1, 1, 0, 0, Prefill::Nan::K, 90});
  checkPrefill(r, rng, kMlaFp8Paged, {2, 17, 67, 2, 2});
  checkPrefill(r, rng, kMlaFp8Paged, {1, 70, 70, 2, 1, 0, 2});
  checkVarlen(r, rng, kMlaVarlen, {{1, 1}, {17, 67}, {70, 70}, {0, 5}, {3, 0}}, 2, 2);
  checkPrefill(r, rng, kWideVBias, {1, 70, 70, 2, 2});
  Prefill windowed{1, 130, 150, 2, 1};
  windowed.window = 50;
  checkPrefill(r, rng, kNarrowVWindow, windowed);
  checkPrefill(r, rng, kV192, {1, 70, 90, 2, 2, 0, 2});
}

// The same on the wgmma member (sm_90a): three-strip Q and K tiles beside two-strip V tiles, 128
// keys a tile; a cached prefix, NaN in V (the rows of its consumer's 64), varlen over pages of 16;
// v heads of 192 (three n64 pieces of O, 64-key tiles) and of 64 beside 256 (windowed, ALiBi); fp8
// codes of K and V rows of their own widths (at 192 beside 128 in 64-key tiles); and mainloop =
// "auto"'s two codes of one kernel.
LIBRARY_TEST("attention_prefill wgmma (sm_90a): v_head_dim beside head_dim", attentionPrefill90VHead) {
  std::mt19937 rng(seed());
  checkPrefill(r, rng, k90Mla, {1, 130, 130, 2, 2});
  checkPrefill(r, rng, k90Mla, {2, 37, 300, 4, 1, 3});
  checkPrefill(r, rng, k90Mla, {1, 130, 130, 2, 2, 0, 0, Prefill::Nan::V, 70});
  checkVarlen(r, rng, k90MlaVarlenPaged, {{1, 1}, {17, 67}, {130, 130}, {0, 5}, {3, 0}}, 2, 2);
  checkPrefill(r, rng, k90V192, {1, 130, 150, 2, 2});
  Prefill windowed{1, 130, 150, 2, 1};
  windowed.window = 50;
  checkPrefill(r, rng, k90NarrowV, windowed);
  checkPrefill(r, rng, k90Fp8V, {2, 37, 150, 2, 2});
  checkPrefill(r, rng, k90MlaFp8, {1, 130, 150, 2, 1});
  for (const std::string& target : codeTargets(r, {"sm_80", "sm_90a"})) {
    PrefillVariant v = kAutoMla;
    v.target = target.c_str();
    checkPrefill(r, rng, v, {1, 130, 170, 2, 2});
  }
}

// Attention sinks (gpt-oss): a logit per query head joins every row's softmax without a value
// (sinkValues: one head without a sink, one whose sink outweighs every key). Prefill on both
// members, causal with a cached prefix and grouped-query heads, rows without keys (zeros, the
// log-sum-exp the sink's), a sliding window, varlen, pages; decode's merge of one split and of
// several (a sequence without positions: zeros).
LIBRARY_TEST("attention sinks: prefill on both members and decode's merge", attentionSinks) {
  std::mt19937 rng(seed());
  checkPrefill(r, rng, kSinksBf16Causal, {1, 130, 130, 4, 2});
  checkPrefill(r, rng, kSinksBf16Causal, {2, 17, 67, 4, 1, 3});
  checkPrefill(r, rng, kSinksBf16Causal, {1, 70, 5, 4, 4});  // rows 0 - 64 see no key
  const std::vector<std::pair<uint32_t, uint32_t>> mixed = {{1, 1}, {17, 67}, {130, 130}, {0, 5}, {70, 5}, {3, 0}};
  checkVarlen(r, rng, kSinksVarlenWindow, mixed, 4, 2, 50);
  Prefill windowed{1, 130, 300, 4, 2};
  windowed.window = 128;
  checkPrefill(r, rng, k90SinksWindow, windowed);
  checkPrefill(r, rng, k90SinksWindow, {1, 70, 5, 4, 4});
  checkVarlen(r, rng, k90SinksVarlenPaged, mixed, 4, 2);
  for (const Variant* v : {&kBf16G4, &kF32}) {
    Problem p{{1, 2, 31, 257, 0}, 2, 64};
    p.sinks = true;
    checkDecode(r, rng, *v, p);
    p.splitLen = 1000;  // one split
    checkDecode(r, rng, *v, p);
  }
}
