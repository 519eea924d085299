// Mixture of experts, decode (kernels/Moe.cpp and gemv_q's `experts`; spec test/library/moe.toml):
// moe_route against a double reference (the choice exactly where it compares logits, within the
// scores' error where a bias joins them; ties, NaN, -inf, fewer experts than slots; group-limited
// routing), gemv_q and gemv_q_swiglu with experts against the quantized-format reference
// (test/quant_reference.h) per pair (an unknown expert gives a row of NaN), gemv with experts over
// bf16 and fp8 weights, moe_combine against double sums, and route, the two expert projections
// and the combine chained as one MoE FFN layer of a few tokens.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <set>

#include "ir/Float8.h"
#include "library_harness.h"
#include "quant_reference.h"

using namespace tn::libtest;
using namespace tn::quantref;

namespace {

constexpr uint32_t kNoExpert = 0xFFFFFFFFu;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---- moe_route ----------------------------------------------------------------------------------

struct Route {
  const char* kernel;
  unsigned k;
  bool softmax, normalize, bias;
  Dtype dtype = Dtype::F32;
  unsigned groups = 1, topGroups = 0;  // group-limited routing
  bool top2 = true;                    // a group's score: its two best choice values (else its best)
};

const Route kRoutes[] = {{"route_softmax_k2", 2, true, true, false},
                         {"route_softmax_k8_raw_bf16", 8, true, false, false, Dtype::BF16},
                         {"route_sigmoid_k8_bias", 8, false, true, true},
                         {"route_softmax_k1_bias_raw", 1, true, false, true},
                         {"route_sigmoid_k2_raw", 2, false, false, false}};

struct Routed {
  std::vector<uint32_t> ids;
  std::vector<float> weights;
};

Routed runRoute(Runner& r, const Route& v, const std::vector<float>& logits, const std::vector<float>& bias,
                uint32_t rows, uint32_t n, float scale) {
  Call call("moe", v.kernel);
  call.buffer("logits", encode(v.dtype, logits));
  if (v.bias) call.buffer("bias", bias);
  call.buffer("ids", std::vector<uint32_t>(size_t(rows) * v.k, 0x5A5A5A5Au))
      .buffer("weights", std::vector<float>(size_t(rows) * v.k, -7.0f))
      .scalar("rows", rows)
      .scalar("n", n)
      .scalar("scale", scale);
  Outputs out = r.run(call);
  return {out.get<uint32_t>("ids"), out.get<float>("weights")};
}

// Checks one launch against the definition, row by row: the ids are distinct experts below n
// (then 0xFFFFFFFF for the slots past n), in the order of their keys, and no expert left out has
// a better key than one chosen (ties: the lower index first). The key is the logit, compared
// exactly; with a bias the score plus the bias, within the scores' error. Each weight is the
// expert's score in double (divided by the chosen scores' sum with normalize) times scale. The
// scores' relative error: ex2 and rcp (a few ulp), the exponent's rounding (|l - max| log2 e
// 2^-24, under 2^-19 for these logits), the f32 sum of n exponentials (n 2^-24) where softmax
// needs it, and the k weights' sum with normalize (k 2^-24).
void checkRoute(const Route& v, const Routed& got, const std::vector<float>& logitsIn, const std::vector<float>& bias,
                uint32_t rows, uint32_t n, float scale, const std::string& what) {
  const std::vector<float> logits = roundTo(v.dtype, logitsIn);
  REQUIRE(got.ids.size() == size_t(rows) * v.k);
  for (uint32_t row = 0; row < rows; ++row) {
    const float* l = logits.data() + size_t(row) * n;
    double mx = -INFINITY, sum = 0;
    for (uint32_t e = 0; e < n; ++e) mx = std::max(mx, double(l[e]));
    for (uint32_t e = 0; e < n; ++e) sum += std::exp(double(l[e]) - mx);
    auto score = [&](uint32_t e) {
      return v.softmax ? std::exp(double(l[e]) - mx) / sum : 1.0 / (1.0 + std::exp(-double(l[e])));
    };
    // Keys: NaN above everything (argmax's order), then the values.
    auto key = [&](uint32_t e) {
      double x = v.bias ? score(e) + bias[e] : double(l[e]);
      return std::isnan(x) ? INFINITY : x;
    };
    const bool fullSum = v.softmax && (!v.normalize || v.bias);
    const double rel = std::ldexp(1.0, -18) + (fullSum ? n : 0) * std::ldexp(1.0, -24) +
                       (v.normalize ? v.k : 0) * std::ldexp(1.0, -24);
    const double tol = v.bias ? rel : 0.0;  // scores are at most 1
    const std::string at = what + " " + v.kernel + " row " + std::to_string(row);
    // Group-limited routing: the experts of the topGroups best groups (the tests' group scores
    // are far apart, so the choice is the same in double).
    std::vector<bool> allowed(n, true);
    if (v.groups > 1 && v.topGroups && v.topGroups < v.groups) {
      const uint32_t size = (n + v.groups - 1) / v.groups;
      std::vector<std::pair<double, unsigned>> groupScores;
      for (unsigned g = 0; g < v.groups; ++g) {
        std::vector<double> c;
        for (uint32_t e = g * size; e < std::min(n, (g + 1) * size); ++e) c.push_back(score(e) + (v.bias ? bias[e] : 0.0));
        std::sort(c.rbegin(), c.rend());
        c.resize(2, 0.0);
        groupScores.push_back({v.top2 ? c[0] + c[1] : c[0], g});
      }
      std::stable_sort(groupScores.begin(), groupScores.end(), [](auto& a, auto& b) { return a.first > b.first; });
      std::vector<bool> kept(v.groups, false);
      for (unsigned t = 0; t < v.topGroups; ++t) kept[groupScores[t].second] = true;
      for (uint32_t e = 0; e < n; ++e) allowed[e] = kept[e / size];
    }
    std::set<uint32_t> chosen;
    double total = 0;
    for (unsigned s = 0; s < v.k; ++s) {
      const uint32_t id = got.ids[size_t(row) * v.k + s];
      if (s >= n) {
        CHECK_MESSAGE(id == kNoExpert, at << " slot " << s << " past n: id " << id);
        continue;
      }
      REQUIRE_MESSAGE(id < n, at << " slot " << s << ": id " << id);
      CHECK_MESSAGE(allowed[id], at << " slot " << s << ": expert " << id << " of a group not chosen");
      CHECK_MESSAGE(chosen.insert(id).second, at << " slot " << s << ": expert " << id << " chosen twice");
      if (s > 0) {
        const uint32_t prev = got.ids[size_t(row) * v.k + s - 1];
        CHECK_MESSAGE((key(prev) > key(id) - tol || (key(prev) == key(id) && prev < id)),
                      at << " slot " << s << ": expert " << id << " after " << prev);
      }
      total += score(id);
    }
    for (uint32_t e = 0; e < n && (chosen.size() == v.k || v.groups > 1); ++e) {
      if (chosen.count(e) || !allowed[e]) continue;
      const uint32_t last = got.ids[size_t(row) * v.k + v.k - 1];
      CHECK_MESSAGE((key(last) > key(e) - tol || (key(last) == key(e) && last < e)),
                    at << ": expert " << e << " left out, but " << last << " chosen");
    }
    for (unsigned s = 0; s < v.k; ++s) {
      const uint32_t id = got.ids[size_t(row) * v.k + s];
      const double w = id < n ? score(id) / (v.normalize ? total : 1.0) * scale : 0.0;
      expectClose({got.weights[size_t(row) * v.k + s]}, {w}, 1e-37, 2 * rel,
                  at + " weight of slot " + std::to_string(s));
    }
  }
}

// ---- gemv_q with experts --------------------------------------------------------------------------

struct Experts {
  const char* kernel;
  const Format& format;
  const char* activation;  // "f32", "bf16", "q8_1"
  bool swiglu = false;
  Dtype out = Dtype::F32;
  bool grouped = false;  // gemm_q with experts: the pairs grouped by refAlign (tiles of 32)
  bool oai = false;      // glu = "swiglu_oai" (gpt-oss's clamped SwiGLU) in place of silu
  bool bias = false;     // f32 biases of each expert's rows (gemv_q_swiglu: of g and u)
};

const Experts kExperts[] = {{"experts_q4_0", kFormats[0], "f32"},
                            {"experts_q4_k", kFormats[2], "f32"},
                            {"experts_q6_k_q8_1_w1_r2", kFormats[4], "q8_1"},
                            {"experts_q8_0_bf16", kFormats[1], "bf16"},
                            {"experts_swiglu_q4_k_q8_1", kFormats[2], "q8_1", true},
                            {"experts_swiglu_q5_k_bf16_out", kFormats[3], "f32", true, Dtype::BF16},
                            // gpt-oss's experts: MXFP4, biases, the clamped SwiGLU.
                            {"experts_mxfp4_q8_1_bias", kFormats[9], "q8_1", false, Dtype::F32, false, false, true},
                            {"experts_swiglu_mxfp4_oai_bias", kFormats[9], "f32", true, Dtype::F32, false, true, true}};

// ---- moe_align ----------------------------------------------------------------------------------

// moe_align's output by its definition: each group's pairs in pair order from a multiple of the
// tile, padded with kNoExpert to a whole tile; the experts in order, then the ids >= n_experts
// (all of them when n_experts >= 8192); tile t's group (n_experts for the unknown one), kNoExpert
// past the last; both as long as the extents say.
struct Aligned {
  std::vector<uint32_t> sorted, tiles;
  std::vector<uint32_t> positions{};  // with positions: the entry of sorted holding each pair
};

// The tiles moe_align may fill (its extents): ceil_div(pairs, tile) + min(n_experts + 1, pairs).
size_t alignTiles(size_t pairs, uint32_t nExperts, uint32_t tile) {
  return (pairs + tile - 1) / tile + std::min<uint64_t>(uint64_t(nExperts) + 1, pairs);
}

Aligned refAlign(const std::vector<uint32_t>& ids, uint32_t nExperts, uint32_t tile) {
  const uint32_t pairs = uint32_t(ids.size());
  const bool fits = nExperts < 8192;
  const uint32_t groups = fits ? nExperts + 1 : 1;
  const size_t bound = alignTiles(pairs, nExperts, tile);
  Aligned a{std::vector<uint32_t>(bound * tile, kNoExpert), std::vector<uint32_t>(bound, kNoExpert)};
  std::vector<std::vector<uint32_t>> members(groups);
  for (uint32_t p = 0; p < pairs; ++p) members[fits ? std::min(ids[p], nExperts) : 0].push_back(p);
  size_t at = 0;
  for (uint32_t g = 0; g < groups; ++g) {
    const size_t start = at;
    for (uint32_t p : members[g]) a.sorted[at++] = p;
    at = (at + tile - 1) / tile * tile;
    for (size_t t = start / tile; t < at / tile; ++t) a.tiles[t] = g + 1 == groups ? nExperts : g;
  }
  return a;
}

Aligned runAlign(Runner& r, const char* kernel, const std::vector<uint32_t>& ids, uint32_t nExperts, uint32_t tile,
                 bool positions = false) {
  const size_t bound = alignTiles(ids.size(), nExperts, tile);
  Call call("moe", kernel);
  call.buffer("ids", ids)
      .buffer("sorted", std::vector<uint32_t>(bound * tile, 0x5A5A5A5Au))
      .buffer("tile_experts", std::vector<uint32_t>(bound, 0x5A5A5A5Au))
      .scalar("pairs", uint32_t(ids.size()))
      .scalar("n_experts", nExperts);
  if (positions) call.buffer("positions", std::vector<uint32_t>(ids.size(), 0x5A5A5A5Au));
  Outputs out = r.run(call);
  Aligned a{out.get<uint32_t>("sorted"), out.get<uint32_t>("tile_experts")};
  if (positions) a.positions = out.get<uint32_t>("positions");
  return a;
}

// A launch of an experts kernel: its ids and sizes; the caller adds the matrices, x and y.
Call expertsCall(const char* kernel, const std::vector<uint32_t>& ids, uint32_t m, uint32_t k, uint32_t nExperts,
                 uint32_t slots) {
  Call call("moe", kernel);
  call.buffer("ids", ids)
      .scalar("m", m)
      .scalar("k", k)
      .scalar("n_experts", nExperts)
      .scalar("pairs", uint32_t(ids.size()))
      .scalar("slots", slots);
  return call;
}

void checkExpertRows(const Experts& v, const std::vector<float>& got, const std::vector<std::vector<uint8_t>>& mats,
                     const std::vector<float>& xs, uint32_t nExperts, uint32_t m, uint32_t k,
                     const std::vector<uint32_t>& ids, uint32_t slots, const std::string& what,
                     const std::vector<std::vector<float>>& biases = {});

// A launch of gemm_q with experts over moe_align's grouping `a`; the caller adds w, x and y.
Call groupedCall(const char* kernel, const Aligned& a, uint32_t m, uint32_t k, uint32_t nExperts, uint32_t pairs,
                 uint32_t slots) {
  Call call("moe", kernel);
  call.buffer("sorted", a.sorted)
      .buffer("tile_experts", a.tiles)
      .scalar("m", m)
      .scalar("k", k)
      .scalar("n_experts", nExperts)
      .scalar("pairs", pairs)
      .scalar("slots", slots);
  return call;
}

// One launch: n_experts matrices (gate and up for the fused kernel) of m x k, x with xrows rows
// (f32 values, given to the kernel as the activation says), pairs p with ids[p] and x row p / slots.
// Each y row against sum_j deq(W_id)[i][j] x[j] in double, within gemv_q's bound 2k 2^-24 sum
// |w x| (q8_1: with the k-quants' mins, 2(|w| + |M|)|x|); the fused kernel's silu(g) u within
// the bound of test/library_quant_test.cpp's checkSwiglu; an unknown id's row all NaN.
void checkExperts(Runner& r, std::mt19937& rng, const Experts& v, uint32_t nExperts, uint32_t m, uint32_t k,
                  const std::vector<uint32_t>& ids, uint32_t slots, const std::string& what) {
  const Format& f = v.format;
  const uint32_t pairs = uint32_t(ids.size()), xrows = (pairs + std::max(slots, 1u) - 1) / std::max(slots, 1u);
  const size_t perExpert = size_t(m) * (k / f.qk);
  std::vector<std::vector<uint8_t>> mats;
  for (int i = 0; i < (v.swiglu ? 2 : 1); ++i) mats.push_back(randomBlocks(rng, f, nExperts * perExpert));
  std::vector<float> x = uniform(rng, size_t(xrows) * k);
  Call call = v.grouped ? groupedCall(v.kernel, refAlign(ids, nExperts, 32), m, k, nExperts, pairs, slots)
                        : expertsCall(v.kernel, ids, m, k, nExperts, slots);
  if (v.swiglu) call.buffer("gate", mats[0]).buffer("up", mats[1]);
  else call.buffer("w", mats[0]);
  std::vector<std::vector<float>> biases;
  if (v.bias) {
    for (size_t i = 0; i < mats.size(); ++i)
      biases.push_back(uniform(rng, std::max<size_t>(size_t(nExperts) * m, 1), -4.0f, 4.0f));
    if (v.swiglu) call.buffer("gate_bias", biases[0]).buffer("up_bias", biases[1]);
    else call.buffer("bias", biases[0]);
  }
  const bool q81 = std::string(v.activation) == "q8_1";
  std::vector<float> xs;  // the values the kernel multiplies
  if (q81) {
    std::vector<uint8_t> xq8 = refQuantizeQ81(x);
    xs = dequantQ81(xq8);
    call.buffer("x", xq8);
  } else if (std::string(v.activation) == "bf16") {
    xs = roundTo(Dtype::BF16, x);
    call.buffer("x", encode(Dtype::BF16, xs));
  } else {
    xs = x;
    call.buffer("x", xs);
  }
  call.buffer("y", encode(v.out, std::vector<float>(size_t(pairs) * m, -7.0f)));
  std::vector<float> got = decode(v.out, r.run(call).get<std::byte>("y"));
  checkExpertRows(v, got, mats, xs, nExperts, m, k, ids, slots, what, biases);
}

// The rows y of an experts launch (gemv_q's or gemm_q's) against the definition: for pair p, the
// matrices (or gate and up) of expert ids[p] dequantized, times xs (what the kernel multiplies),
// row p / slots, plus the expert's biases (one rounding more: 2^-24 (|sum| + |bias|), doubled);
// the bounds are checkExperts'.
void checkExpertRows(const Experts& v, const std::vector<float>& got, const std::vector<std::vector<uint8_t>>& mats,
                     const std::vector<float>& xs, uint32_t nExperts, uint32_t m, uint32_t k,
                     const std::vector<uint32_t>& ids, uint32_t slots, const std::string& what,
                     const std::vector<std::vector<float>>& biases) {
  const Format& f = v.format;
  const uint32_t pairs = uint32_t(ids.size());
  REQUIRE(got.size() == size_t(pairs) * m);
  std::vector<std::vector<float>> deq, mins;
  for (const auto& q : mats) {
    deq.push_back(refDequant(f, q));
    mins.push_back(refMins(f, q));
  }
  const bool q81 = std::string(v.activation) == "q8_1";
  const bool withMin = q81 && hasMins(f);
  for (uint32_t p = 0; p < pairs; ++p) {
    const std::string at = what + " " + v.kernel + " pair " + std::to_string(p) + " expert " + std::to_string(ids[p]);
    if (ids[p] >= nExperts) {
      size_t notNan = 0;
      for (uint32_t i = 0; i < m; ++i) notNan += !std::isnan(got[size_t(p) * m + i]);
      CHECK_MESSAGE(notNan == 0, at << ": " << notNan << " of " << m << " elements are not NaN");
      continue;
    }
    const float* xr = xs.data() + size_t(p / std::max(slots, 1u)) * k;
    for (uint32_t i = 0; i < m; ++i) {
      double sums[2] = {0, 0}, tols[2] = {0, 0};
      for (size_t mi = 0; mi < mats.size(); ++mi) {
        double mag = 0;
        for (uint32_t j = 0; j < k; ++j) {
          const size_t wi = (ids[p] * size_t(m) + i) * k + j;
          const double w = deq[mi][wi];
          sums[mi] += w * xr[j];
          mag += (withMin ? 2.0 * (std::fabs(w) + mins[mi][wi]) : std::fabs(w)) * std::fabs(double(xr[j]));
        }
        tols[mi] = 2.0 * k * std::ldexp(1.0, -24) * mag;
        if (!biases.empty()) {
          const double b = biases[mi][size_t(ids[p]) * m + i];
          tols[mi] += std::ldexp(std::fabs(sums[mi]) + std::fabs(b), -23);
          sums[mi] += b;
        }
      }
      double want = sums[0], tol = tols[0];
      if (v.swiglu) {
        // swiglu_oai's linear factor, clamp(u) + 1, has slope at most 1: u's bound holds for it.
        const double sg = v.oai ? oaiActRef(sums[0]) : siluRef(sums[0]);
        want = sg * (v.oai ? oaiLinearRef(sums[1]) : sums[1]);
        const double ulps = v.oai ? oaiActUlps(sums[0]) + 1.5 : 4 + 0.5 * std::fabs(sums[0] * std::numbers::log2e) + 1;
        tol = 1.1 * tols[0] * (std::fabs(sums[1]) + tols[1]) + std::fabs(sg) * tols[1] +
              std::fabs(want) * (ulps * std::ldexp(1.0, -24) + (v.out == Dtype::F32 ? 0 : roundoff(v.out)));
      }
      expectClose({got[size_t(p) * m + i]}, {want}, tol, 0, at + " row " + std::to_string(i));
    }
  }
}

// gemv with experts: bf16 weights, or E4M3 codes (every finite one) times a scale per row of each
// expert (rows ldw = k + 5 apart); y row p = W_id x_(p / slots) against double sums within gemv's
// bound, 2k 2^-24 sum |w x|, and y's rounding (bf16); an unknown id's row NaN.
struct GemvExperts {
  const char* kernel;
  bool fp8;
  Dtype x;
  bool bias = false;  // f32 biases of each expert's rows (the bias option)
};

void checkGemvExperts(Runner& r, std::mt19937& rng, const GemvExperts& v, uint32_t nExperts, uint32_t m, uint32_t k,
                      const std::vector<uint32_t>& ids, uint32_t slots, const std::string& what) {
  const uint32_t ldw = v.fp8 ? k + 5 : k, pairs = uint32_t(ids.size());
  const uint32_t xrows = (pairs + std::max(slots, 1u) - 1) / std::max(slots, 1u);
  const size_t rowsAll = size_t(nExperts) * m;
  std::vector<double> w(rowsAll * ldw, 0.0);
  std::vector<float> scales(std::max<size_t>(rowsAll, 1));
  Call call = expertsCall(v.kernel, ids, m, k, nExperts, slots);
  if (v.fp8) {
    std::vector<uint8_t> codes(rowsAll * ldw);
    for (size_t i = 0; i < codes.size(); ++i) {
      do codes[i] = uint8_t(rng());
      while (!std::isfinite(tn::ir::fp8Value(tn::ir::Fp8Format::E4M3, codes[i])));
      w[i] = tn::ir::fp8Value(tn::ir::Fp8Format::E4M3, codes[i]);
    }
    for (size_t i = 0; i < scales.size(); ++i) scales[i] = std::ldexp(1.0f + float(i % 7) / 8.0f, -9 - int(i % 3));
    call.buffer("w", codes).buffer("w_scales", scales).scalar("ldw", ldw);
  } else {
    std::vector<float> wf = roundTo(Dtype::BF16, uniform(rng, rowsAll * k));
    for (size_t i = 0; i < wf.size(); ++i) w[i] = wf[i];
    call.buffer("w", encode(Dtype::BF16, wf));
  }
  std::vector<float> x = roundTo(v.x, uniform(rng, size_t(xrows) * k));
  call.buffer("x", encode(v.x, x)).buffer("y", encode(v.x, std::vector<float>(size_t(pairs) * m, -7.0f)));
  std::vector<float> bias(std::max<size_t>(rowsAll, 1), 0.0f);
  if (v.bias) call.buffer("bias", bias = uniform(rng, std::max<size_t>(rowsAll, 1), -4.0f, 4.0f));
  std::vector<float> got = decode(v.x, r.run(call).get<std::byte>("y"));
  REQUIRE(got.size() == size_t(pairs) * m);
  for (uint32_t p = 0; p < pairs; ++p)
    for (uint32_t i = 0; i < m; ++i) {
      const std::string at = what + " " + v.kernel + " pair " + std::to_string(p) + " row " + std::to_string(i);
      const double gotV = got[size_t(p) * m + i];
      if (ids[p] >= nExperts) {
        CHECK_MESSAGE(std::isnan(gotV), at << ": " << gotV << " for an unknown expert");
        continue;
      }
      const size_t row = size_t(ids[p]) * m + i;
      double sum = 0, mag = 0;
      for (uint32_t j = 0; j < k; ++j) {
        const double term = w[row * ldw + j] * x[size_t(p / std::max(slots, 1u)) * k + j];
        sum += term;
        mag += std::fabs(term);
      }
      const double scale = v.fp8 ? scales[row] : 1.0, want = sum * scale + bias[row];
      // The bias's addition rounds once more: 2^-24 (|sum| + |bias|), doubled.
      expectClose({float(gotV)}, {want},
                  (2.0 * k * std::ldexp(1.0, -24) * mag + std::fabs(sum) * std::ldexp(1.0, -24)) * scale +
                      std::ldexp(std::fabs(sum * scale) + std::fabs(bias[row]), -23) +
                      std::fabs(want) * (v.x == Dtype::F32 ? 0 : roundoff(v.x)),
                  0, at);
    }
}

// ---- moe_combine ----------------------------------------------------------------------------------

struct Combine {
  const char* kernel;
  Dtype y, h;
  bool residual;
  bool shared = false, gate = false;  // the shared expert's output (h's type), times sigmoid(gate[r])
};

// y = residual + sum_s w_s h_s in double; the kernel's f32 fma chain is within slots 2^-24 sum
// |w h| (plus |residual| 2^-24 for its addition), and the store rounds once to y's type.
void checkCombine(Runner& r, std::mt19937& rng, const Combine& v, uint32_t rows, uint32_t cols, uint32_t slots,
                  const std::string& what) {
  std::vector<float> h = roundTo(v.h, uniform(rng, size_t(rows) * slots * cols, -4.0f, 4.0f));
  std::vector<float> w = uniform(rng, size_t(rows) * slots, 0.0f, 1.0f);
  std::vector<float> res = roundTo(v.y, uniform(rng, size_t(rows) * cols));
  // A slot of weight 0 whose h row is NaN (an unknown expert's): it adds nothing. A NaN weight (a
  // router's NaN) shows in its row.
  if (slots > 1 && rows > 0) {
    w[slots - 1] = 0.0f;
    std::fill(h.begin() + size_t(slots - 1) * cols, h.begin() + size_t(slots) * cols, kNaN);
  }
  if (slots > 0 && rows > 1) w[slots] = kNaN;
  // The shared expert's rows, and gate logits from -8 to 8 (the last row's -inf: a gate of 0).
  std::vector<float> shared = roundTo(v.h, uniform(rng, size_t(rows) * cols, -4.0f, 4.0f));
  std::vector<float> gate = uniform(rng, std::max(rows, 1u), -8.0f, 8.0f);
  if (rows > 2) gate[rows - 1] = -INFINITY;
  Call call("moe", v.kernel);
  call.buffer("h", encode(v.h, h)).buffer("weights", w).buffer("y", encode(v.y, std::vector<float>(size_t(rows) * cols, -7.0f)));
  if (v.residual) call.buffer("residual", encode(v.y, res));
  if (v.shared) call.buffer("shared", encode(v.h, shared));
  if (v.gate) call.buffer("shared_gate", gate);
  call.scalar("rows", rows).scalar("cols", cols).scalar("slots", slots);
  std::vector<float> got = decode(v.y, r.run(call).get<std::byte>("y"));
  REQUIRE(got.size() == size_t(rows) * cols);
  for (uint32_t row = 0; row < rows; ++row)
    for (uint32_t c = 0; c < cols; ++c) {
      double sum = 0, mag = 0;
      for (uint32_t s = 0; s < slots; ++s) {
        const double ws = w[size_t(row) * slots + s];
        if (ws == 0) continue;  // (a NaN weight is not 0: it makes the sum NaN)
        const double hv = h[(size_t(row) * slots + s) * cols + c];
        sum += ws * hv;
        mag += std::fabs(ws * hv);
      }
      const size_t at = size_t(row) * cols + c;
      // The gate's sigmoid within a few ulp (ex2 and rcp approximations): 2^-21 relative.
      double sharedTol = 0;
      if (v.shared) {
        const double g = v.gate ? 1.0 / (1.0 + std::exp(-double(gate[row]))) : 1.0, term = g * shared[at];
        sum += term;
        mag += std::fabs(term);
        sharedTol = std::fabs(term) * std::ldexp(1.0, -21);
      }
      if (v.residual) {
        sum += res[at];
        mag += std::fabs(res[at]);
      }
      const double tol = (slots + 2) * std::ldexp(1.0, -24) * mag + sharedTol +
                         std::fabs(sum) * (v.y == Dtype::F32 ? 0 : roundoff(v.y));
      expectClose({got[at]}, {sum}, tol, 0, what + " " + v.kernel + " row " + std::to_string(row) + " col " + std::to_string(c));
    }
}

}  // namespace

LIBRARY_TEST("moe_route: top-k experts and weights, both scorings, bias, ties, NaN, fewer experts than slots", moeRoute) {
  std::mt19937 rng(seed());
  for (const Route& v : kRoutes)
    for (uint32_t n : {5u, 8u, 33u, 256u, 300u}) {  // 300: past the 256 kept in registers
      if (n == 5 && v.k != 8) continue;  // fewer experts than slots
      const uint32_t rows = 9;
      std::vector<float> logits = uniform(rng, size_t(rows) * n, -4.0f, 4.0f);
      // Biases apart by more than the scores' error: the choice is then the same in double.
      std::vector<float> bias(n);
      for (uint32_t e = 0; e < n; ++e) bias[e] = float((e * 37) % n) / float(n);
      // Row 1: ties (the lower index first); row 2: a NaN logit (chosen first: argmax's order;
      // with softmax every score of the row is NaN, with sigmoid its own, and normalized every
      // weight); row 3: -inf logits; row 4: every logit the same.
      for (uint32_t e = 0; e < n; e += 2) logits[n + e] = logits[n + 1];
      logits[2 * n + n / 2] = kNaN;
      for (uint32_t e = 0; e < n; e += 3) logits[3 * n + e] = -INFINITY;
      std::fill(logits.begin() + 4 * n, logits.begin() + 5 * n, 0.5f);
      const std::string what = "n=" + std::to_string(n);
      Routed got = runRoute(r, v, logits, bias, rows, n, 2.5f);
      checkRoute(v, got, logits, bias, rows, n, 2.5f, what);
      // (With softmax and a bias every key of row 2 is NaN: the lowest index comes first.)
      if (!(v.softmax && v.bias))
        CHECK_MESSAGE(got.ids[2 * v.k] == n / 2, std::string(v.kernel) << " " << what << ": the NaN logit is not chosen first");
    }
}

// Group-limited routing on rows built so that the group scores are far apart: each group's two
// best logits are its level (distinct per group, 0.5 apart around 0, where sigmoid's slope keeps
// the sums apart by more than the biases, below 0.001, can move them) and its level - 0.25, the
// others below -6; and a row whose group 0 has the best expert (3, then -1) and the lowest top-2
// sum of the first five groups (group 1: 2.8 twice, groups 2 to 4: 1.0, 0.9, 0.8 twice): V3's sums
// leave group 0 out of its best 4, V2's maxima pick it as the best.
LIBRARY_TEST("moe_route: group-limited routing, top-2 sums and maxima, with a bias", moeRouteGroups) {
  std::mt19937 rng(seed());
  const Route kGrouped[] = {{"route_sigmoid_k8_bias_groups8_top4", 8, false, true, true, Dtype::F32, 8, 4, true},
                            {"route_softmax_k2_groups4_top1_max", 2, true, false, false, Dtype::F32, 4, 1, false}};
  for (const Route& v : kGrouped)
    // The last group shorter; and past the 256 experts kept in registers (groups of 40 or 80).
    for (uint32_t n : {v.groups * 8, v.groups * 8 - 3, 320u}) {
      const uint32_t rows = 4, size = (n + v.groups - 1) / v.groups;
      std::vector<float> logits = uniform(rng, size_t(rows) * n, -8.0f, -6.0f);
      std::vector<float> bias = uniform(rng, n, 0.0f, 0.001f);  // too small to reorder the groups
      for (uint32_t row = 0; row + 1 < rows; ++row) {
        std::vector<unsigned> level(v.groups);
        for (unsigned g = 0; g < v.groups; ++g) level[g] = g;
        std::shuffle(level.begin(), level.end(), rng);
        for (unsigned g = 0; g < v.groups; ++g) {
          const uint32_t first = g * size + uint32_t(rng() % std::min(size, n - g * size));
          const uint32_t second = g * size + (first - g * size + 1) % std::min(size, n - g * size);
          logits[size_t(row) * n + first] = -1.75f + 0.5f * float(level[g]);
          logits[size_t(row) * n + second] = -2.0f + 0.5f * float(level[g]);
        }
      }
      float* last = logits.data() + size_t(rows - 1) * n;
      last[1] = 3.0f;
      last[2] = -1.0f;
      last[size] = last[size + 2] = 2.8f;
      for (unsigned g = 2; g < v.groups; ++g)
        last[g * size] = last[g * size + 1] = g <= 4 ? 1.2f - 0.1f * float(g) : -2.0f - 0.5f * float(g);
      const std::string what = "n=" + std::to_string(n);
      Routed got = runRoute(r, v, logits, bias, rows, n, 1.0f);
      checkRoute(v, got, logits, bias, rows, n, 1.0f, what);
      unsigned ofGroup0 = 0;
      for (unsigned slot = 0; slot < v.k; ++slot) ofGroup0 += got.ids[size_t(rows - 1) * v.k + slot] / size == 0;
      if (v.top2)
        CHECK_MESSAGE(ofGroup0 == 0, std::string(v.kernel) << " " << what << ": group 0 is not among the best 4 by top-2 sums");
      else
        CHECK_MESSAGE(got.ids[size_t(rows - 1) * v.k] == 1, std::string(v.kernel) << " " << what << ": group 0 has the best expert");
    }
}

LIBRARY_TEST("gemv_q experts: every path, shared and per-pair x, unknown experts give NaN rows", gemvQExperts) {
  std::mt19937 rng(seed());
  for (const Experts& v : kExperts) {
    const uint32_t nExperts = 5, k = (v.format.qk == 32 ? 9 : 3) * v.format.qk;
    // Three tokens of two slots sharing their x row; an id past the experts in the middle.
    checkExperts(r, rng, v, nExperts, 9, k, {4, 1, 0, 4, nExperts, 2}, 2, "slots=2");
    // Each pair its own x row (a down projection), m past a block's rows; slots 0 reads as 1.
    checkExperts(r, rng, v, nExperts, 17, k, {3, 3, 0}, 1, "slots=1");
    checkExperts(r, rng, v, nExperts, 3, k, {2, kNoExpert}, 0, "slots=0");
  }
}

LIBRARY_TEST("gemv experts: bf16 and fp8 weights with row scales, strided rows, unknown experts give NaN rows", gemvExperts) {
  std::mt19937 rng(seed());
  for (const GemvExperts& v : {GemvExperts{"gemv_experts_bf16", false, Dtype::F32},
                               GemvExperts{"gemv_experts_e4m3_rows_strided_bf16", true, Dtype::BF16},
                               GemvExperts{"gemv_experts_bf16_bias", false, Dtype::BF16, true}}) {
    checkGemvExperts(r, rng, v, 5, 9, 200, {4, 1, 0, 4, 5, 2}, 2, "slots=2");  // 200: the vector path and its tail
    checkGemvExperts(r, rng, v, 5, 17, 37, {3, 3, 0}, 1, "slots=1");           // k = 37: element by element
    checkGemvExperts(r, rng, v, 5, 3, 64, {2, kNoExpert}, 0, "slots=0");
  }
}

LIBRARY_TEST("moe_combine: weighted expert rows, zero weights over NaN rows, residual, shared expert and its gate", moeCombine) {
  std::mt19937 rng(seed());
  for (const Combine& v : {Combine{"combine_f32", Dtype::F32, Dtype::F32, false},
                           Combine{"combine_bf16_residual_bf16h", Dtype::BF16, Dtype::BF16, true},
                           Combine{"combine_shared_f32", Dtype::F32, Dtype::F32, false, true},
                           Combine{"combine_bf16_residual_shared_gate", Dtype::BF16, Dtype::F32, true, true, true}}) {
    checkCombine(r, rng, v, 3, 300, 2, "slots=2");
    checkCombine(r, rng, v, 2, 17, 8, "slots=8");
    checkCombine(r, rng, v, 1, 5, 1, "slots=1");
    checkCombine(r, rng, v, 2, 9, 0, "slots=0");  // y = residual (or 0)
  }
}

namespace {

// The last stage of a layer test: a bf16 combine (with a residual) of the expert rows o (bf16,
// pair p's row p, or positions[p] with positions) against double sums of the rounded inputs.
void checkCombineLayer(Runner& r, const char* kernel, const std::vector<float>& o, const std::vector<float>& weights,
                       const std::vector<uint32_t>& positions, const std::vector<float>& res, uint32_t tokens, uint32_t d,
                       uint32_t slots, const std::string& what) {
  Call call("moe", kernel);
  call.buffer("h", encode(Dtype::BF16, o)).buffer("weights", weights);
  if (!positions.empty()) call.buffer("positions", positions).scalar("h_rows", uint32_t(o.size() / d));
  call.buffer("y", encode(Dtype::BF16, std::vector<float>(size_t(tokens) * d, -7.0f)))
      .buffer("residual", encode(Dtype::BF16, res))
      .scalar("rows", tokens)
      .scalar("cols", d)
      .scalar("slots", slots);
  const std::vector<float> y = decode(Dtype::BF16, r.run(call).get<std::byte>("y"));
  const std::vector<float> ob = roundTo(Dtype::BF16, o), rb = roundTo(Dtype::BF16, res);
  for (uint32_t t = 0; t < tokens; ++t)
    for (uint32_t c = 0; c < d; ++c) {
      double want = rb[size_t(t) * d + c], mag = std::fabs(want);
      for (uint32_t s = 0; s < slots; ++s) {
        const uint32_t p = t * slots + s;
        const double term = double(weights[p]) * ob[size_t(positions.empty() ? p : positions[p]) * d + c];
        want += term;
        mag += std::fabs(term);
      }
      expectClose({y[size_t(t) * d + c]}, {want}, 3 * std::ldexp(1.0, -24) * mag + std::fabs(want) * roundoff(Dtype::BF16), 0,
                  what + " combine token " + std::to_string(t) + " col " + std::to_string(c));
    }
}

}  // namespace

// A MoE FFN layer for three tokens: route (softmax, top 2, normalized), the fused gate and up
// projection of each (token, slot) pair's expert (q4_k, q8_1 x shared by the token's two
// slots), the down projection of each pair's own row (q4_k, f32 x), and the weighted sum with the
// residual: each stage against its reference on the previous stage's actual output, so the
// parameters of the four launches are shown to fit together.
LIBRARY_TEST("moe decode layer: route, expert gate/up and down projections, combine", moeLayer) {
  std::mt19937 rng(seed());
  const uint32_t tokens = 3, nExperts = 8, d = 256, ff = 512;
  const Route& route = kRoutes[0];  // softmax, k 2, normalized
  std::vector<float> logits = uniform(rng, size_t(tokens) * nExperts, -3.0f, 3.0f);
  Routed routed = runRoute(r, route, logits, {}, tokens, nExperts, 1.0f);
  checkRoute(route, routed, logits, {}, tokens, nExperts, 1.0f, "layer");
  const Format& q4k = kFormats[2];
  std::vector<uint8_t> gate = randomBlocks(rng, q4k, size_t(nExperts) * ff * (d / 256));
  std::vector<uint8_t> up = randomBlocks(rng, q4k, size_t(nExperts) * ff * (d / 256));
  std::vector<uint8_t> down = randomBlocks(rng, q4k, size_t(nExperts) * d * (ff / 256));
  std::vector<float> x = uniform(rng, size_t(tokens) * d);
  std::vector<uint8_t> xq8 = refQuantizeQ81(x);
  const uint32_t pairs = tokens * route.k;
  std::vector<float> h = r.run(expertsCall("experts_swiglu_q4_k_q8_1", routed.ids, ff, d, nExperts, route.k)
                                   .buffer("gate", gate)
                                   .buffer("up", up)
                                   .buffer("x", xq8)
                                   .buffer("y", std::vector<float>(size_t(pairs) * ff, -7.0f)))
                             .get<float>("y");
  std::vector<float> xs = dequantQ81(xq8), gdeq = refDequant(q4k, gate), udeq = refDequant(q4k, up);
  for (uint32_t p = 0; p < pairs; ++p)
    for (uint32_t i = 0; i < ff; ++i) {
      double g = 0, u = 0, mag = 0;
      for (uint32_t j = 0; j < d; ++j) {
        const size_t wi = (routed.ids[p] * size_t(ff) + i) * d + j;
        g += double(gdeq[wi]) * xs[size_t(p / route.k) * d + j];
        u += double(udeq[wi]) * xs[size_t(p / route.k) * d + j];
        mag += (std::fabs(gdeq[wi]) + std::fabs(udeq[wi]) + 1) * std::fabs(xs[size_t(p / route.k) * d + j]);
      }
      const double want = siluRef(g) * u;
      expectClose({h[size_t(p) * ff + i]}, {want}, 8.0 * d * std::ldexp(1.0, -24) * mag * (1 + std::fabs(u) + std::fabs(g)), 1e-5,
                  "layer gate/up pair " + std::to_string(p) + " row " + std::to_string(i));
    }
  std::vector<float> o = r.run(expertsCall("experts_q4_k", routed.ids, d, ff, nExperts, 1)
                                   .buffer("w", down)
                                   .buffer("x", h)
                                   .buffer("y", std::vector<float>(size_t(pairs) * d, -7.0f)))
                             .get<float>("y");
  std::vector<float> ddeq = refDequant(q4k, down);
  for (uint32_t p = 0; p < pairs; ++p)
    for (uint32_t i = 0; i < d; ++i) {
      double want = 0, mag = 0;
      for (uint32_t j = 0; j < ff; ++j) {
        const double w = ddeq[(routed.ids[p] * size_t(d) + i) * ff + j], hv = h[size_t(p) * ff + j];
        want += w * hv;
        mag += std::fabs(w * hv);
      }
      expectClose({o[size_t(p) * d + i]}, {want}, 2.0 * ff * std::ldexp(1.0, -24) * mag, 0,
                  "layer down pair " + std::to_string(p) + " row " + std::to_string(i));
    }
  checkCombineLayer(r, "combine_bf16_residual_bf16h", o, routed.weights, {}, uniform(rng, size_t(tokens) * d), tokens, d,
                    route.k, "layer");
}

// moe_align against its definition, whole outputs compared: tiles of 32 and 8; one pair, a tile's
// worth and one past; one expert; ids past n_experts (the unknown group, 0xFFFFFFFF among them);
// every pair of one expert across all 16 warps' segments; more pairs than the 16 warps take in a
// step; experts enough that fewer warps share the counts (1001 groups: 8 warps; 5001: 1); 8192
// experts or more (every id unknown); no pairs; segments of many chunks, not a whole number of a
// walk's iterations.
LIBRARY_TEST("moe_align: pairs grouped by expert, padded tiles, unknown ids last, every warp count", moeAlign) {
  std::mt19937 rng(seed());
  struct Case {
    uint32_t pairs, nExperts, unknownEvery;
    bool oneExpert = false;
  };
  const Case cases[] = {{1, 8, 0},      {31, 8, 0},    {32, 8, 0},   {33, 8, 5},        {100, 1, 7},
                        {256, 60, 9},   {2000, 256, 11}, {1500, 8, 0, true}, {3000, 1000, 13},
                        {600, 5000, 0}, {50, 9000, 0}, {0, 8, 0},
                        // Segments of 10 chunks of 32 (2.5 iterations of 4) and of 40, the last warp's short.
                        {5000, 64, 17}, {20001, 256, 3}};
  for (const auto& [kernel, tile] : {std::pair{"align", 32u}, std::pair{"align_8", 8u}, std::pair{"align_64_positions", 64u}})
    for (const Case& c : cases) {
      const bool positions = tile == 64;
      std::vector<uint32_t> ids(c.pairs);
      for (uint32_t p = 0; p < c.pairs; ++p) {
        ids[p] = c.oneExpert ? 3 : uint32_t(rng() % c.nExperts);
        if (c.unknownEvery && p % c.unknownEvery == 2) ids[p] = p % 2 ? kNoExpert : c.nExperts + p;
      }
      const std::string what = std::string(kernel) + " pairs=" + std::to_string(c.pairs) +
                               " n_experts=" + std::to_string(c.nExperts);
      const Aligned want = refAlign(ids, c.nExperts, tile), got = runAlign(r, kernel, ids, c.nExperts, tile, positions);
      REQUIRE(got.sorted.size() == want.sorted.size());
      REQUIRE(got.tiles.size() == want.tiles.size());
      size_t sortedWrong = 0, tilesWrong = 0;
      for (size_t i = 0; i < want.sorted.size(); ++i)
        if (got.sorted[i] != want.sorted[i] && sortedWrong++ < 4)
          FAIL_CHECK(what << ": sorted[" << i << "] = " << got.sorted[i] << ", want " << want.sorted[i]);
      for (size_t t = 0; t < want.tiles.size(); ++t)
        if (got.tiles[t] != want.tiles[t] && tilesWrong++ < 4)
          FAIL_CHECK(what << ": tile_experts[" << t << "] = " << got.tiles[t] << ", want " << want.tiles[t]);
      CHECK_MESSAGE(sortedWrong + tilesWrong == 0, what << ": " << sortedWrong << " sorted and " << tilesWrong << " tile entries wrong");
      // positions: sorted[positions[p]] == p for every pair.
      size_t positionsWrong = 0;
      for (uint32_t p = 0; positions && p < c.pairs; ++p)
        positionsWrong += got.positions[p] >= want.sorted.size() || want.sorted[got.positions[p]] != p;
      CHECK_MESSAGE(positionsWrong == 0, what << ": " << positionsWrong << " positions wrong");
    }
}

// gemm_q with experts on refAlign's grouping: every format (the k-quants' 16-byte staging and the
// others'), m past a block's 64 rows, two stages of K; a token's two slots sharing its x row with
// an expert of more than a tile of pairs, ids past the experts (rows of NaN); each pair its own
// x row (a down projection); slots 0 reading as 1.
LIBRARY_TEST("gemm_q experts: grouped tiles in every format, shared and per-pair x, unknown experts give NaN rows", gemmQExperts) {
  std::mt19937 rng(seed());
  for (const Format& f : kFormats) {
    const std::string kernel = std::string("gemm_q_experts_") + f.name;
    const Experts v{kernel.c_str(), f, "q8_1", false, Dtype::F32, true};
    const uint32_t nExperts = 4, k = 2 * std::max(f.qk, 256u);
    std::vector<uint32_t> ids(76);
    for (uint32_t p = 0; p < ids.size(); ++p) ids[p] = p % 2 ? 2 : uint32_t(rng() % nExperts);  // expert 2: 40+ pairs
    ids[9] = nExperts;
    ids[30] = kNoExpert;
    checkExperts(r, rng, v, nExperts, 80, k, ids, 2, "slots=2");
    checkExperts(r, rng, v, nExperts, 17, k, {3, 3, 0, 1, 1}, 1, "slots=1");
    checkExperts(r, rng, v, nExperts, 33, k, {2, kNoExpert, 0}, 0, "slots=0");
  }
  // With the experts' biases (gpt-oss's MXFP4 experts): an unknown expert's rows stay NaN.
  const Experts biased{"gemm_q_experts_mxfp4_bias", kFormats[9], "q8_1", false, Dtype::F32, true, false, true};
  std::vector<uint32_t> ids(40);
  for (uint32_t p = 0; p < ids.size(); ++p) ids[p] = uint32_t(rng() % 4);
  ids[7] = 4;
  checkExperts(r, rng, biased, 4, 70, 3 * 32, ids, 4, "bias slots=4");
}

// A MoE FFN layer at prefill, 40 tokens: route (softmax, top 2), moe_align's grouping (the
// kernel's), the gate and up projections as grouped gemm_q launches on the tokens' q8_1 rows
// (slots 2), swiglu and quantize_q8_1 of the pairs' rows, the down projection on them (slots 1)
// and the weighted sum: each stage against its reference on the previous stage's actual output.
LIBRARY_TEST("moe prefill layer: route, align, grouped gate/up and down projections, combine", moePrefillLayer) {
  std::mt19937 rng(seed());
  const uint32_t tokens = 40, nExperts = 8, d = 256, ff = 512;
  const Route& route = kRoutes[0];  // softmax, k 2, normalized
  std::vector<float> logits = uniform(rng, size_t(tokens) * nExperts, -3.0f, 3.0f);
  for (uint32_t t = 0; t < tokens; t += 2) logits[size_t(t) * nExperts + 5] = 4.0f;  // expert 5: over a tile of pairs
  Routed routed = runRoute(r, route, logits, {}, tokens, nExperts, 1.0f);
  checkRoute(route, routed, logits, {}, tokens, nExperts, 1.0f, "prefill");
  const uint32_t pairs = tokens * route.k;
  const Aligned aligned = runAlign(r, "align", routed.ids, nExperts, 32);
  const Aligned want = refAlign(routed.ids, nExperts, 32);
  REQUIRE((aligned.sorted == want.sorted && aligned.tiles == want.tiles));
  const Format& q4k = kFormats[2];
  const Experts proj{"gemm_q_experts_q4_k", q4k, "q8_1", false, Dtype::F32, true};
  auto grouped = [&](const std::vector<uint8_t>& w, const std::vector<uint8_t>& xq, uint32_t m, uint32_t k, uint32_t slots) {
    return r.run(groupedCall(proj.kernel, aligned, m, k, nExperts, pairs, slots)
                     .buffer("w", w)
                     .buffer("x", xq)
                     .buffer("y", std::vector<float>(size_t(pairs) * m, -7.0f)))
        .get<float>("y");
  };
  std::vector<uint8_t> gate = randomBlocks(rng, q4k, size_t(nExperts) * ff * (d / 256));
  std::vector<uint8_t> up = randomBlocks(rng, q4k, size_t(nExperts) * ff * (d / 256));
  std::vector<uint8_t> down = randomBlocks(rng, q4k, size_t(nExperts) * d * (ff / 256));
  // Activations small enough that h = u silu(g) stays within q8_1's f16 scales (|h| / 127 < 65504).
  std::vector<uint8_t> xq8 = refQuantizeQ81(uniform(rng, size_t(tokens) * d, -0.02f, 0.02f));
  const std::vector<float> xs = dequantQ81(xq8);
  const std::vector<float> g = grouped(gate, xq8, ff, d, route.k), u = grouped(up, xq8, ff, d, route.k);
  checkExpertRows(proj, g, {gate}, xs, nExperts, ff, d, routed.ids, route.k, "prefill gate");
  checkExpertRows(proj, u, {up}, xs, nExperts, ff, d, routed.ids, route.k, "prefill up");
  // swiglu(gate = u, up = g) = u silu(g): LLaMA's silu(gate_proj) up_proj.
  const uint32_t n = pairs * ff;
  std::vector<float> h = r.run(Call("moe", "swiglu").buffer("gate", u).buffer("up", g).buffer("y", std::vector<float>(n, -7.0f)).scalar("n", n))
                             .get<float>("y");
  for (uint32_t i = 0; i < n; ++i)
    expectClose({h[i]}, {u[i] * siluRef(g[i])}, 1e-30, 8 * std::ldexp(1.0, -24) * (1 + std::fabs(g[i])),
                "prefill swiglu element " + std::to_string(i));
  std::vector<uint8_t> hq = r.run(Call("moe", "quantize_q8_1")
                                      .buffer("x", h)
                                      .buffer("y", std::vector<uint8_t>(size_t(n / 32) * 36, 0x5A))
                                      .scalar("n", n))
                                .get<uint8_t>("y");
  CHECK_MESSAGE((hq == refQuantizeQ81(h)), "prefill: quantize_q8_1 differs from ggml's reference");
  const std::vector<float> o = grouped(down, hq, d, ff, 1);
  checkExpertRows(proj, o, {down}, dequantQ81(hq), nExperts, d, ff, routed.ids, 1, "prefill down");
  std::vector<float> y = r.run(Call("moe", "combine_f32")
                                   .buffer("h", o)
                                   .buffer("weights", routed.weights)
                                   .buffer("y", std::vector<float>(size_t(tokens) * d, -7.0f))
                                   .scalar("rows", tokens)
                                   .scalar("cols", d)
                                   .scalar("slots", route.k))
                             .get<float>("y");
  for (uint32_t t = 0; t < tokens; ++t)
    for (uint32_t c = 0; c < d; ++c) {
      double sum = 0, mag = 0;
      for (uint32_t s = 0; s < route.k; ++s) {
        const double term = double(routed.weights[t * route.k + s]) * o[(size_t(t) * route.k + s) * d + c];
        sum += term;
        mag += std::fabs(term);
      }
      expectClose({y[size_t(t) * d + c]}, {sum}, 3 * std::ldexp(1.0, -24) * mag, 0,
                  "prefill combine token " + std::to_string(t) + " col " + std::to_string(c));
    }
}

// The prefill layer over bf16 experts, 50 tokens of top 2 among 6 experts (tiles of 64): route,
// moe_align with positions, the tokens' rows gathered into moe_align's order (embedding over
// pairs: padding rows NaN, which stay in their own rows), the gate and up projections as grouped
// gemms (B column-major: PyTorch's [out, in] weights), swiglu, the down projection on swiglu's
// rows in place (already in that order) and the combine reading each pair's row through
// positions: each stage against its reference on the previous stage's actual output.
LIBRARY_TEST("moe prefill layer, bf16 experts: align with positions, gather, grouped gemms, combine", moePrefillBf16) {
  std::mt19937 rng(seed());
  const uint32_t tokens = 50, nExperts = 6, d = 96, ff = 160, tile = 64;
  const Route& route = kRoutes[0];  // softmax, k 2, normalized
  std::vector<float> logits = uniform(rng, size_t(tokens) * nExperts, -3.0f, 3.0f);
  for (uint32_t t = 0; t < tokens; t += 3) logits[size_t(t) * nExperts + 4] = 4.0f;  // expert 4: a tile and more
  Routed routed = runRoute(r, route, logits, {}, tokens, nExperts, 1.0f);
  const Aligned a = runAlign(r, "align_64_positions", routed.ids, nExperts, tile, true);
  const Aligned want = refAlign(routed.ids, nExperts, tile);
  REQUIRE((a.sorted == want.sorted && a.tiles == want.tiles));
  REQUIRE(a.positions.size() == size_t(tokens) * route.k);
  const uint32_t rowsAll = uint32_t(a.sorted.size());  // tiles x 64
  const std::vector<float> x = roundTo(Dtype::BF16, uniform(rng, size_t(tokens) * d));
  std::vector<float> xs = decode(Dtype::BF16, r.run(Call("moe", "gather_bf16")
                                                        .buffer("table", encode(Dtype::BF16, x))
                                                        .buffer("ids", a.sorted)
                                                        .buffer("y", encode(Dtype::BF16, std::vector<float>(size_t(rowsAll) * d, -7.0f)))
                                                        .scalar("n", rowsAll)
                                                        .scalar("rows", tokens)
                                                        .scalar("k", d)
                                                        .scalar("slots", route.k))
                                                  .get<std::byte>("y"));
  for (uint32_t i = 0; i < rowsAll; ++i)
    for (uint32_t j = 0; j < d; ++j) {
      const float g = xs[size_t(i) * d + j];
      const bool ok = a.sorted[i] == kNoExpert ? std::isnan(g) : g == x[size_t(a.sorted[i] / route.k) * d + j];
      if (!ok) FAIL_CHECK("prefill gather row " << i << " col " << j << ": " << g);
    }
  // The grouped gemm of rows `in` (rowsAll x kk, bf16) by each tile's expert of `w` (n x kk each).
  auto grouped = [&](const std::vector<float>& w, const std::vector<float>& in, uint32_t n, uint32_t kk) {
    return decode(Dtype::BF16, r.run(Call("moe", "gemm_experts_bf16")
                                         .buffer("a", encode(Dtype::BF16, in))
                                         .buffer("b", encode(Dtype::BF16, w))
                                         .buffer("c", encode(Dtype::BF16, std::vector<float>(size_t(rowsAll) * n, -7.0f)))
                                         .buffer("tile_experts", a.tiles)
                                         .scalar("m", rowsAll).scalar("n", n).scalar("k", kk)
                                         .scalar("lda", kk).scalar("ldb", kk).scalar("ldc", n)
                                         .scalar("batch", 1u).scalar("stride_a", uint64_t(0))
                                         .scalar("stride_b", uint64_t(n) * kk).scalar("stride_c", uint64_t(0))
                                         .scalar("n_experts", nExperts).scalar("alpha", 1.0f).scalar("beta", 0.0f))
                                   .get<std::byte>("c"));
  };
  // Rows of pairs against double sums (padding rows: NaN in, NaN out, not checked).
  auto checkGrouped = [&](const std::vector<float>& got, const std::vector<float>& w, const std::vector<float>& in,
                          uint32_t n, uint32_t kk, const std::string& what) {
    for (uint32_t i = 0; i < rowsAll; ++i) {
      if (a.sorted[i] == kNoExpert) continue;
      const uint32_t e = a.tiles[i / tile];
      REQUIRE(e == routed.ids[a.sorted[i]]);
      for (uint32_t j = 0; j < n; ++j) {
        double sum = 0, mag = 0;
        for (uint32_t q = 0; q < kk; ++q) {
          const double term = double(w[(size_t(e) * n + j) * kk + q]) * in[size_t(i) * kk + q];
          sum += term;
          mag += std::fabs(term);
        }
        expectClose({got[size_t(i) * n + j]}, {sum}, (kk + 2) * std::ldexp(1.0, -24) * mag, roundoff(Dtype::BF16),
                    what + " row " + std::to_string(i) + " col " + std::to_string(j));
      }
    }
  };
  const std::vector<float> gate = roundTo(Dtype::BF16, uniform(rng, size_t(nExperts) * ff * d, -0.2f, 0.2f));
  const std::vector<float> up = roundTo(Dtype::BF16, uniform(rng, size_t(nExperts) * ff * d, -0.2f, 0.2f));
  const std::vector<float> down = roundTo(Dtype::BF16, uniform(rng, size_t(nExperts) * d * ff, -0.2f, 0.2f));
  const std::vector<float> g = grouped(gate, xs, ff, d), u = grouped(up, xs, ff, d);
  checkGrouped(g, gate, xs, ff, d, "prefill bf16 gate");
  checkGrouped(u, up, xs, ff, d, "prefill bf16 up");
  const uint32_t n = rowsAll * ff;
  std::vector<float> h = decode(Dtype::BF16, r.run(Call("moe", "swiglu_bf16")
                                                       .buffer("gate", encode(Dtype::BF16, u))
                                                       .buffer("up", encode(Dtype::BF16, g))
                                                       .buffer("y", encode(Dtype::BF16, std::vector<float>(n, -7.0f)))
                                                       .scalar("n", n))
                                                 .get<std::byte>("y"));
  for (uint32_t i = 0; i < n; ++i)
    if (a.sorted[i / ff] != kNoExpert)
      expectClose({h[i]}, {u[i] * siluRef(g[i])}, 1e-30, 8 * std::ldexp(1.0, -24) * (1 + std::fabs(g[i])) + roundoff(Dtype::BF16),
                  "prefill bf16 swiglu element " + std::to_string(i));
  const std::vector<float> o = grouped(down, h, d, ff);
  checkGrouped(o, down, h, d, ff, "prefill bf16 down");
  checkCombineLayer(r, "combine_positions_bf16h", o, routed.weights, a.positions, uniform(rng, size_t(tokens) * d), tokens,
                    d, route.k, "prefill bf16");
}
