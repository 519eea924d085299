// Quantized weights (kernels/Quant.cpp, spec test/library/quant.toml): dequantize,
// quantize_q8_1 and gemv_q (f32, bf16 and q8_1 activations) against ggml's own test vectors
// (../shared/testdata/quant, and test/data/quant for the formats it lacks, both cases, bit for bit
// where ggml is exact) and against a C++ reference written from the format specs
// (../shared/docs/ggml-quant-formats.md, docs/quant-formats.md) on random blocks: odd row counts,
// several blocks per row, every half field's sign, zeros and subnormals, MXFP4's extreme scales and
// every kind of NVFP4 scale byte, and (on the GPU) base pointers only as aligned as a row's blocks. The fused decode kernels
// likewise: gemv_q_swiglu against the reference, rmsnorm_quantize_q8_1 against the unfused pair bit
// for bit and against rmsnorm in double; the biases of gemv_q, gemv_q_swiglu and gemm_q. The test
// vectors are required in CI (CI=true): without them the tests fail.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <tuple>

#include "library_harness.h"
#include "quant_reference.h"

using namespace tn::libtest;
using namespace tn::quantref;

namespace {


// ---- the test vectors -------------------------------------------------------------------------

// The folder of one case ("" is `uniform`, "varscale" the other), or nullopt (and a visible
// skip) when the vectors are absent outside CI; in CI their absence fails the test.
std::optional<std::string> caseDir(const std::string& name) {
  std::string root = std::string(TRUENOC_SOURCE_DIR) + "/../shared/testdata/quant";
  if (const char* env = std::getenv("TRUENOC_QUANT_TESTDATA")) root = env;
  std::string dir = name.empty() ? root : root + "/" + name;
  if (std::filesystem::exists(dir + "/x.f32")) return dir;
  const char* ci = std::getenv("CI");
  if (ci && std::string(ci) == "true") {
    FAIL("the quantized test vectors are missing: " << dir << " (set TRUENOC_QUANT_TESTDATA)");
  } else {
    MESSAGE("skipped: no quantized test vectors at " << dir);
  }
  return std::nullopt;
}

template <class T>
std::vector<T> readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot read " << path);
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(raw.size() % sizeof(T) == 0);
  std::vector<T> out(raw.size() / sizeof(T));
  std::memcpy(out.data(), raw.data(), raw.size());
  return out;
}

// The folder of format f's vectors of a case: dir (caseDir's) for the shared formats, else this
// repository's test/data/quant (made the same way, from the shared inputs: its README).
std::string formatDir(const std::string& dir, const char* c, const Format& f) {
  if (&f < kFormats + kSharedFormats) return dir;
  const std::string own = std::string(TRUENOC_SOURCE_DIR) + "/test/data/quant";
  return *c ? own + "/" + c : own;
}

const char* const kCases[] = {"", "varscale"};
constexpr uint32_t kVecRows = 4, kVecK = 512;

// ---- the kernels (the reference written from the spec: test/quant_reference.h) --------------------- ---------------------------------------------------------------------------------

std::vector<float> runDequant(Runner& r, const Format& f, Dtype out, const std::vector<uint8_t>& q, uint32_t rows,
                              uint32_t k, uint32_t misalign = 0) {
  size_t n = size_t(rows) * k;
  std::vector<std::byte> y(n * dtypeBytes(out), std::byte{0x7f});  // every element must be written
  Call call("quant", std::string("dequantize_") + f.name + "_" + dtypeName(out));
  call.buffer("q", q, misalign).buffer("y", y, misalign ? 4 : 0).scalar("rows", rows).scalar("k", k);
  Outputs o = r.run(call);
  return decode(out, o.get<std::byte>("y"));
}

// Exact as floats (so -0 == +0, as the vectors' README asks).
void expectSame(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  expectClose(got, std::vector<double>(want.begin(), want.end()), 0, 0, what);
}

void checkDequant(Runner& r, const Format& f, const std::vector<uint8_t>& q, uint32_t rows, uint32_t k,
                  const std::vector<float>& want, const std::string& what, uint32_t misalign = 0) {
  for (Dtype d : {Dtype::F32, Dtype::BF16, Dtype::F16}) {
    std::vector<float> got = runDequant(r, f, d, q, rows, k, misalign);
    expectSame(got, roundTo(d, want), what + " " + f.name + " -> " + dtypeName(d));
  }
}

// y[t][i] = sum_j deq[i][j] x[t][j] in double for t < x.size() / k, with the bound of its f32
// computation: |err| <= 2k 2^-24 sum_j |deq x|, where with `mins` (|M| per weight) the magnitude
// of a term is 2(|deq| + |M|)|x| instead. With `bias` (a value per row) y[t][i] + bias[i], one
// rounding more: 2^-24 (|y| + |bias|), doubled for room.
struct RefY {
  std::vector<double> want, tol;
};
RefY refGemv(const std::vector<float>& deq, const std::vector<float>& x, const std::vector<float>* mins,
             uint32_t rows, uint32_t k, const std::vector<float>* bias = nullptr) {
  RefY out;
  for (size_t t = 0; t < x.size() / k; ++t)
    for (uint32_t i = 0; i < rows; ++i) {
      double want = 0, mag = 0;
      for (uint32_t j = 0; j < k; ++j) {
        size_t wi = size_t(i) * k + j, xi = t * k + j;
        want += double(deq[wi]) * double(x[xi]);
        double w = std::fabs(double(deq[wi]));
        mag += (mins ? 2.0 * (w + double((*mins)[wi])) : w) * std::fabs(double(x[xi]));
      }
      double tol = 2.0 * k * std::ldexp(1.0, -24) * mag;
      if (bias) {
        tol += std::ldexp(std::fabs(want) + std::fabs(double((*bias)[i])), -23);
        want += double((*bias)[i]);
      }
      out.want.push_back(want);
      out.tol.push_back(tol);
    }
  return out;
}

// got (ntok x rows) against refGemv, or against refY (a test vector, itself rounded once to f32)
// when given, with 2^-24 |y| more tolerance for that rounding.
void expectGemv(const std::vector<float>& got, const std::vector<float>& deq, const std::vector<float>& x,
                const std::vector<float>* mins, uint32_t rows, uint32_t k, const std::vector<float>* refY,
                const std::string& what, const std::vector<float>* bias = nullptr) {
  RefY ref = refGemv(deq, x, mins, rows, k, bias);
  for (size_t n = 0; n < got.size(); ++n) {
    double want = ref.want[n], tol = ref.tol[n];
    if (refY) {
      tol += std::ldexp(std::fabs(want), -24);
      want = (*refY)[n];
    }
    expectClose({got[n]}, {want}, tol, 0, what + " col " + std::to_string(n / rows) + " row " + std::to_string(n % rows));
  }
}

// y[t][i] = sum_j deq[i][j] x[t][j] through gemv_q, against the double reference: f32
// accumulation in any order of k products is within (k - 1) 2^-24 sum|w x| of the exact sum (first
// order), bounded here by 2k 2^-24 sum|w x| as for gemv, plus the reference's own rounding to f32
// (2^-24 |y|) when it is a test vector.
void checkGemv(Runner& r, const std::string& kernel, unsigned ntok, Dtype act,
               const std::vector<uint8_t>& q, const std::vector<float>& deq, uint32_t rows, uint32_t k,
               const std::vector<float>& x, const std::vector<float>* refY, const std::string& what,
               uint32_t misalign = 0, const std::vector<float>* bias = nullptr) {
  std::vector<float> xs = roundTo(act, x);
  std::vector<float> y(size_t(ntok) * rows, -7.0f);
  Call call("quant", kernel);
  call.buffer("w", q, misalign);
  if (bias) call.buffer("bias", *bias);
  if (act == Dtype::F32) call.buffer("x", xs, misalign ? 4 : 0);
  else call.buffer("x", encode(act, xs), misalign ? 2 : 0);
  call.buffer("y", y).scalar("m", rows).scalar("k", k);
  std::vector<float> got = r.run(call).get<float>("y");
  REQUIRE(got.size() == y.size());
  expectGemv(got, deq, xs, nullptr, rows, k, refY, what + " " + kernel, bias);
}



// gemv_q with q8_1 activations (xq8: ntok columns of k/32 blocks) against sum_j deq[i][j] xq[j]
// in double, xq = float(q) * fp32(d). The integer dot products are exact; what is rounded is
// scale * sum (and min * sum(a)) per group of 8, d8 times that, and the f32 accumulation, each a
// relative 2^-24 of terms bounded by sum (|deq| + 2|M|)|xq|, while ggml's deq itself differs from
// the exact D q - M by up to 2^-24 (|D q| + |deq|): so 2k 2^-24 sum 2(|deq| + |M|)|xq| bounds the
// difference with room to spare (plus the reference's own rounding, 2^-24 |y|, for a vector).
void checkGemvQ81(Runner& r, const Format& f, unsigned ntok, const std::vector<uint8_t>& q,
                  const std::vector<float>& deq, uint32_t rows, uint32_t k, const std::vector<uint8_t>& xq8,
                  const std::vector<float>* refY, const std::string& what, uint32_t misalign = 0,
                  const std::string& suffix = "", const std::vector<float>* bias = nullptr) {
  std::vector<float> mins = refMins(f, q);
  std::vector<float> xq = dequantQ81(xq8);
  std::string kernel = std::string("gemv_q_") + f.name + "_q8_1_n" + std::to_string(ntok) + suffix;
  std::vector<float> y(size_t(ntok) * rows, -7.0f);
  Call call("quant", kernel);
  call.buffer("w", q, misalign).buffer("x", xq8, misalign ? 4 : 0).buffer("y", y).scalar("m", rows).scalar("k", k);
  if (bias) call.buffer("bias", *bias);
  std::vector<float> got = r.run(call).get<float>("y");
  REQUIRE(got.size() == y.size());
  expectGemv(got, deq, xq, &mins, rows, k, refY, what + " " + kernel, bias);
}

// ---- the fused decode kernels ----------------------------------------------------------------------

// The gated units' activations (glu) and the ulps of the kernels' f32 forms of them.
struct Glu {
  double (*f)(double);
  double (*ulps)(double);
  double (*linear)(double) = nullptr;  // what multiplies the activation instead of u (swiglu_oai's clamp + 1)
};
const Glu kSilu{siluRef, siluUlps}, kGeluTanh{geluTanhRef, geluTanhUlps}, kGeluErf{geluErfRef, geluErfUlps};
const Glu kSwigluOai{oaiActRef, oaiActUlps, oaiLinearRef};

// gemv_q_swiglu: y = silu(g) u (or glu's activation of g) with g, u the gemv of gate and up
// (refGemv, each within its bound tg, tu). The kernel's activation is within glu.ulps(g) of the
// exact one (ex2, rcp and the rounding of the exponent) and its slope is below 1.2 (silu's 1.1,
// gelu's 1.13), so |y - act(g) u| <= 1.2 tg (|u| + tu) + |act(g)| tu + the activation's error and
// the product's rounding relative to |y|; a bf16 y adds its rounding, 2^-8 |y|.
void checkSwiglu(Runner& r, const Format& f, unsigned ntok, const std::string& act, Dtype out,
                 const std::vector<uint8_t>& gate, const std::vector<uint8_t>& up, uint32_t rows, uint32_t k,
                 const std::vector<float>& x, const std::string& what, uint32_t misalign = 0,
                 const std::string& suffix = "", const Glu& glu = kSilu, const std::vector<float>* gateBias = nullptr,
                 const std::vector<float>* upBias = nullptr) {
  std::string kernel = std::string("gemv_q_swiglu_") + f.name + (act == "f32" ? "" : "_" + act) + "_n" +
                       std::to_string(ntok) + (out == Dtype::F32 ? "" : std::string("_") + dtypeName(out)) + suffix;
  Call call("quant", kernel);
  call.buffer("gate", gate, misalign).buffer("up", up, misalign);
  if (gateBias) call.buffer("gate_bias", *gateBias).buffer("up_bias", *upBias);
  std::vector<float> xs;  // the values the kernel multiplies
  std::vector<float> mins = refMins(f, gate), minsUp = refMins(f, up);
  bool q81 = act == "q8_1";
  if (q81) {
    std::vector<uint8_t> xq8 = refQuantizeQ81(x);
    xs = dequantQ81(xq8);
    call.buffer("x", xq8, misalign ? 4 : 0);
  } else if (act == "bf16") {
    xs = roundTo(Dtype::BF16, x);
    call.buffer("x", encode(Dtype::BF16, xs), misalign ? 2 : 0);
  } else {
    xs = x;
    call.buffer("x", xs, misalign ? 4 : 0);
  }
  call.buffer("y", encode(out, std::vector<float>(size_t(ntok) * rows, -7.0f))).scalar("m", rows).scalar("k", k);
  std::vector<float> got = decode(out, r.run(call).get<std::byte>("y"));
  REQUIRE(got.size() == size_t(ntok) * rows);
  RefY g = refGemv(refDequant(f, gate), xs, q81 ? &mins : nullptr, rows, k, gateBias);
  RefY u = refGemv(refDequant(f, up), xs, q81 ? &minsUp : nullptr, rows, k, upBias);
  for (size_t n = 0; n < got.size(); ++n) {
    // swiglu_oai's linear factor, clamp(u) + 1, has slope at most 1: u's bound holds for it.
    double sg = glu.f(g.want[n]), want = sg * (glu.linear ? glu.linear(u.want[n]) : u.want[n]);
    double ulps = glu.ulps(g.want[n]) + (glu.linear ? 1.5 : 1);
    double tol = 1.2 * g.tol[n] * (std::fabs(u.want[n]) + u.tol[n]) + std::fabs(sg) * u.tol[n] +
                 std::fabs(want) * (ulps * std::ldexp(1.0, -24) + (out == Dtype::F32 ? 0 : roundoff(out)));
    expectClose({got[n]}, {want}, tol, 0,
                what + " " + kernel + " col " + std::to_string(n / rows) + " row " + std::to_string(n % rows));
  }
}

// rmsnorm_quantize_q8_1 against the unfused pair, norms' rmsnorm then quantize_q8_1, on the same
// runner: byte for byte (the fused kernel takes 1 / rms from rmsnorm's own code, on the path
// rmsnorm takes for these buffers: y of both 16-byte aligned, weight misaligned for both or none).
// And the blocks' values against rmsnorm in double: within half a step (d/2) and the step's
// rounding to half (127 d 2^-11), plus rmsnorm's own error (2^-20, and a bf16 rounding).
// `variant`: the kernels with max_cols = 1024 ("_c1024"), both of them.
void checkRmsnormQ81(Runner& r, Dtype d, uint32_t rows, uint32_t cols, const std::vector<float>& x,
                     const std::vector<float>& weight, float eps, const std::string& what, uint32_t misalign = 0,
                     const std::string& variant = "") {
  std::string suffix = variant + "_" + dtypeName(d);
  size_t nblocks = size_t(rows) * cols / 32;
  std::vector<uint8_t> fused = r.run(Call("quant", "rmsnorm_quantize_q8_1" + suffix)
                                         .buffer("x", encode(d, x))
                                         .buffer("weight", encode(d, weight), misalign)
                                         .buffer("y", std::vector<uint8_t>(nblocks * 36, 0xA5))
                                         .scalar("rows", rows)
                                         .scalar("cols", cols)
                                         .scalar("eps", eps))
                                  .get<uint8_t>("y");
  std::vector<std::byte> normed = r.run(Call("norms", "rmsnorm" + suffix)
                                            .buffer("x", encode(d, x))
                                            .buffer("weight", encode(d, weight), misalign)
                                            .buffer("y", encode(d, std::vector<float>(size_t(rows) * cols, 7.0f)))
                                            .scalar("rows", rows)
                                            .scalar("cols", cols)
                                            .scalar("eps", eps))
                                     .get<std::byte>("y");
  std::vector<uint8_t> unfused = r.run(Call("quant", std::string("quantize_q8_1_") + dtypeName(d))
                                           .buffer("x", normed)
                                           .buffer("y", std::vector<uint8_t>(nblocks * 36, 0x5A))
                                           .scalar("n", uint32_t(rows * cols)))
                                    .get<uint8_t>("y");
  REQUIRE(fused.size() == unfused.size());
  size_t differ = 0, first = nblocks;
  for (size_t blk = 0; blk < nblocks; ++blk)
    if (std::memcmp(fused.data() + 36 * blk, unfused.data() + 36 * blk, 36) != 0) {
      ++differ;
      first = std::min(first, blk);
    }
  CHECK_MESSAGE(differ == 0, what << ": " << differ << " of " << nblocks << " blocks differ from rmsnorm + quantize_q8_1, the first "
                                  << first << " (seed " << seed() << ")");
  std::vector<float> got = dequantQ81(fused);
  for (uint32_t row = 0; row < rows; ++row) {
    double ss = 0;
    for (uint32_t c = 0; c < cols; ++c) ss += double(x[row * cols + c]) * x[row * cols + c];
    double inv = 1.0 / std::sqrt(ss / cols + double(eps));
    for (uint32_t c = 0; c < cols; ++c) {
      size_t e = size_t(row) * cols + c;
      double want = double(x[e]) * inv * weight[c];
      double step = h2f(fused.data() + 36 * (e / 32));
      double tol = step * (0.5 + 127 * std::ldexp(1.0, -11)) * 1.01 +
                   std::fabs(want) * (std::ldexp(1.0, -20) + (d == Dtype::F32 ? 0 : roundoff(d)));
      expectClose({got[e]}, {want}, tol, 0, what + " element " + std::to_string(e));
    }
  }
}

// gemm_q (prefill) on fresh random weights and activations (quantized by the C++ quantize_q8_1):
// y = sum_j deq[i][j] xq[t][j] against the double reference. The integer block sums are exact;
// rounded are d_w d_x, its product with the sum and the f32 accumulation over k/32 blocks, well
// inside gemv_q's bound 2k 2^-24 sum |deq xq|; with the k-quants' mins (D sum - M sum_a, then
// times d_x) the bound of gemv_q's q8_1 path, 2k 2^-24 sum 2(|deq| + |M|)|xq|. q6_k's two int8
// scales per block of 32 multiply the halves' sums in s32 (exact, below 2^24), and its f32
// d * scale is exact (11 by 8 bits), so deq is exact and the plain bound holds.
void checkGemmQ(Runner& r, const Format& f, uint32_t rows, uint32_t ntok, uint32_t k, std::mt19937& rng,
                uint32_t misalign = 0, const std::vector<float>* bias = nullptr, const std::string& tile = "") {
  std::vector<uint8_t> q = randomBlocks(rng, f, size_t(rows) * (k / f.qk));
  std::vector<uint8_t> xq8 = refQuantizeQ81(uniform(rng, size_t(ntok) * k));
  std::string kernel = std::string("gemm_q_") + f.name + tile + (bias ? "_bias" : "");
  Call call("quant", kernel);
  call.buffer("w", q, misalign).buffer("x", xq8, misalign ? 4 : 0).buffer("y", std::vector<float>(size_t(ntok) * rows, -7.0f));
  if (bias) call.buffer("bias", *bias);
  std::vector<float> got = r.run(call.scalar("m", rows).scalar("k", k).scalar("ntok", ntok)).get<float>("y");
  REQUIRE(got.size() == size_t(ntok) * rows);
  std::string what = kernel + " m=" + std::to_string(rows) + " ntok=" + std::to_string(ntok) + " k=" + std::to_string(k) +
                     (misalign ? " misaligned" : "");
  std::vector<float> mins = refMins(f, q);
  expectGemv(got, refDequant(f, q), dequantQ81(xq8), hasMins(f) ? &mins : nullptr, rows, k, nullptr, what, bias);
}

}  // namespace

LIBRARY_TEST("quant dequantize: ggml test vectors, bit-exact", quantDequantVectors) {
  for (const char* c : kCases) {
    std::optional<std::string> dir = caseDir(c);
    if (!dir) return;
    for (const Format& f : kFormats) {
      const std::string fdir = formatDir(*dir, c, f);
      std::vector<uint8_t> q = readFile<uint8_t>(fdir + "/" + f.name + ".bin");
      std::vector<float> want = readFile<float>(fdir + "/" + f.name + ".dequant.f32");
      REQUIRE(q.size() == size_t(kVecRows) * kVecK / f.qk * f.bytes);
      REQUIRE(want.size() == size_t(kVecRows) * kVecK);
      std::string what = std::string("case '") + (*c ? c : "uniform") + "'";
      // The spec reference must reproduce ggml too, or the random tests below prove nothing.
      if (std::string(r.name()) == "interp") expectSame(refDequant(f, q), want, what + " C++ reference " + f.name);
      checkDequant(r, f, q, kVecRows, kVecK, want, what);
    }
  }
}

LIBRARY_TEST("quant dequantize: random blocks, odd row counts, several blocks per row", quantDequantRandom) {
  std::mt19937 rng(seed());
  for (const Format& f : kFormats) {
    uint32_t blocksPerRow = f.qk == 32 ? 7 : 3;
    for (uint32_t rows : {1u, 3u, 5u}) {
      uint32_t k = blocksPerRow * f.qk;
      std::vector<uint8_t> q = randomBlocks(rng, f, size_t(rows) * blocksPerRow);
      // MXFP4's scales at their extremes: 2^-128 and 2^-127 (subnormal), 2^-126, 1 and 2^126,
      // 2^127 (12 times it overflows to infinity, as in ggml).
      if (f.e8m0 && rows == 5) {
        const uint8_t extremes[] = {0, 1, 2, 128, 254, 255};
        for (size_t b = 0; b < std::size(extremes); ++b) q[b * f.bytes] = extremes[b];
      }
      // NVFP4's UE4M3 scales: zero, the subnormals' ends, the largest, 0x7F (0), and bytes with bit 7
      // set, which ggml's dequantize_row_nvfp4 does not read (0xFF is 240); the rest random bytes.
      if (std::string(f.name) == "nvfp4" && rows == 5) {
        const uint8_t specials[] = {0x00, 0x01, 0x07, 0x08, 0x7E, 0x7F, 0x80, 0x81, 0xF8, 0xFE, 0xFF};
        for (size_t i = 0; i < size_t(rows) * blocksPerRow * 4; ++i)
          q[i / 4 * f.bytes + i % 4] = i < std::size(specials) ? specials[i] : uint8_t(rng());
      }
      std::string what = "rows=" + std::to_string(rows) + " k=" + std::to_string(k);
      checkDequant(r, f, q, rows, k, refDequant(f, q), what);
      // Base pointers only as aligned as the blocks (2 bytes, MXFP4's 1), y only 4-byte aligned.
      if (r.honoursMisalign() && rows == 3)
        checkDequant(r, f, q, rows, k, refDequant(f, q), what + " misaligned", f.bytes % 2 ? 1 : 2);
    }
  }
}

LIBRARY_TEST("quant dequantize: rows = 0 writes nothing", quantDequantEmpty) {
  std::vector<float> y = {5.0f};
  Call call("quant", "dequantize_q4_k_f32");
  Outputs o = r.run(call.buffer("q", std::vector<uint8_t>{}).buffer("y", y).scalar("rows", 0u).scalar("k", 256u));
  CHECK(o.get<float>("y") == std::vector<float>{5.0f});
}

namespace {

// embedding: y row t = table row ids[t] (rows x k), rounded to `out`; an id past the table a row of
// NaN. `table` is the table's bytes, `values` its rows as f32 (the reference). The elements of y
// past n rows keep their sentinel.
void checkEmbedding(Runner& r, const std::string& kernel, Dtype out, const std::vector<std::byte>& table,
                    const std::vector<float>& values, uint32_t rows, uint32_t k, const std::vector<uint32_t>& ids,
                    uint32_t misalign = 0) {
  const uint32_t n = uint32_t(ids.size());
  const float sentinel = -7.0f;
  Call call("embedding", kernel);
  call.buffer("table", table, misalign)
      .buffer("ids", ids.empty() ? std::vector<uint32_t>{0} : ids)
      .buffer("y", encode(out, std::vector<float>(size_t(n) * k + 3, sentinel)))
      .scalar("n", n)
      .scalar("rows", rows)
      .scalar("k", k);
  std::vector<float> got = decode(out, r.run(call).get<std::byte>("y"));
  std::vector<float> want(size_t(n) * k + 3, sentinel);
  for (uint32_t t = 0; t < n; ++t)
    for (uint32_t j = 0; j < k; ++j)
      want[size_t(t) * k + j] = ids[t] < rows ? values[size_t(ids[t]) * k + j] : std::numeric_limits<float>::quiet_NaN();
  std::vector<float> rounded = roundTo(out, want);
  expectClose(got, std::vector<double>(rounded.begin(), rounded.end()), 0, 0,
              kernel + " rows=" + std::to_string(rows) + " k=" + std::to_string(k) + " n=" + std::to_string(n));
}

// Token ids: repeats, the first and last row, and ids past the table (rows itself, and ~0).
std::vector<uint32_t> tokenIds(std::mt19937& rng, uint32_t rows, uint32_t n) {
  std::vector<uint32_t> ids(n);
  for (uint32_t& id : ids) id = rng() % rows;
  if (n > 0) ids[0] = rows - 1;
  if (n > 2) ids[2] = ids[1];
  if (n > 3) ids[3] = rows;
  if (n > 5) ids[5] = 0xFFFFFFFFu;
  return ids;
}

}  // namespace

LIBRARY_TEST("embedding: plain tables, rows gathered by id, ids past the table give NaN", embeddingPlain) {
  std::mt19937 rng(seed());
  struct Plain {
    const char* kernel;
    Dtype table, out;
  };
  for (Plain p : {Plain{"embedding_f32_f32", Dtype::F32, Dtype::F32}, Plain{"embedding_bf16_bf16", Dtype::BF16, Dtype::BF16},
                  Plain{"embedding_f16_f32", Dtype::F16, Dtype::F32}})
    for (auto [rows, k, n] : {std::tuple{37u, 64u, 9u}, std::tuple{5u, 13u, 7u}, std::tuple{3u, 1u, 4u}, std::tuple{300u, 1000u, 2u}}) {
      std::vector<float> values = roundTo(p.table, uniform(rng, size_t(rows) * k));
      checkEmbedding(r, p.kernel, p.out, encode(p.table, values), values, rows, k, tokenIds(rng, rows, n));
      // Only 4-byte aligned (f32 table) or 2-byte: element loads (on the GPU and the simulator).
      if (r.honoursMisalign() && k == 64)
        checkEmbedding(r, p.kernel, p.out, encode(p.table, values), values, rows, k, tokenIds(rng, rows, n),
                       uint32_t(dtypeBytes(p.table)));
    }
  std::vector<float> values = uniform(rng, 8);
  checkEmbedding(r, "embedding_f32_f32", Dtype::F32, encode(Dtype::F32, values), values, 1, 8, {});  // n = 0
}

LIBRARY_TEST("embedding: ggml block tables decoded bit-exactly, ids past the table give NaN", embeddingQuant) {
  std::mt19937 rng(seed());
  const std::pair<const char*, Dtype> kernels[] = {
      {"embedding_q4_0_f32", Dtype::F32},  {"embedding_q8_0_bf16", Dtype::BF16}, {"embedding_q4_k_f32", Dtype::F32},
      {"embedding_q5_k_f16", Dtype::F16},  {"embedding_q6_k_bf16", Dtype::BF16}, {"embedding_q4_1_f32", Dtype::F32},
      {"embedding_q5_0_bf16", Dtype::BF16}, {"embedding_q5_1_f16", Dtype::F16},  {"embedding_iq4_nl_f32", Dtype::F32},
      {"embedding_mxfp4_bf16", Dtype::BF16}, {"embedding_iq4_xs_f16", Dtype::F16},  {"embedding_q2_k_bf16", Dtype::BF16},
      {"embedding_q3_k_f32", Dtype::F32},   {"embedding_iq2_xxs_f32", Dtype::F32}, {"embedding_iq2_xs_bf16", Dtype::BF16},
      {"embedding_iq2_s_f16", Dtype::F16},  {"embedding_iq3_xxs_f32", Dtype::F32}, {"embedding_iq3_s_bf16", Dtype::BF16},
      {"embedding_iq1_s_f16", Dtype::F16},  {"embedding_iq1_m_f32", Dtype::F32},    {"embedding_q1_0_f32", Dtype::F32},
      {"embedding_q2_0_bf16", Dtype::BF16}, {"embedding_tq1_0_f16", Dtype::F16},   {"embedding_tq2_0_f32", Dtype::F32},
      {"embedding_nvfp4_bf16", Dtype::BF16}};
  static_assert(std::size(kernels) == std::size(kFormats));
  for (size_t i = 0; i < std::size(kFormats); ++i) {
    const Format& f = kFormats[i];
    const uint32_t rows = 6, k = (f.qk == 32 ? 3 : 2) * f.qk;
    std::vector<uint8_t> q = randomBlocks(rng, f, size_t(rows) * (k / f.qk));
    std::vector<std::byte> bytes(q.size());
    std::memcpy(bytes.data(), q.data(), q.size());
    checkEmbedding(r, kernels[i].first, kernels[i].second, bytes, refDequant(f, q), rows, k, tokenIds(rng, rows, 8));
    // Blocks only 2-byte aligned (MXFP4's 1), as in a GGUF file.
    if (r.honoursMisalign())
      checkEmbedding(r, kernels[i].first, kernels[i].second, bytes, refDequant(f, q), rows, k, tokenIds(rng, rows, 3),
                     f.bytes % 2 ? 1 : 2);
  }
}

LIBRARY_TEST("quant quantize_q8_1: ggml test vectors, bit-exact", quantQ81Vectors) {
  for (const char* c : kCases) {
    std::optional<std::string> dir = caseDir(c);
    if (!dir) return;
    std::vector<float> x = readFile<float>(*dir + "/x.f32");
    std::vector<uint8_t> want = readFile<uint8_t>(*dir + "/x.q8_1.bin");
    REQUIRE(want.size() == x.size() / 32 * 36);
    if (std::string(r.name()) == "interp") CHECK(refQuantizeQ81(x) == want);
    std::vector<uint8_t> y(want.size(), 0xA5);
    Call call("quant", "quantize_q8_1_f32");
    Outputs o = r.run(call.buffer("x", x).buffer("y", y).scalar("n", uint32_t(x.size())));
    CHECK(o.get<uint8_t>("y") == want);
  }
}

LIBRARY_TEST("quant quantize_q8_1: random activations, f32 and bf16, zero blocks, ties", quantQ81Random) {
  std::mt19937 rng(seed());
  for (Dtype d : {Dtype::F32, Dtype::BF16}) {
    std::vector<float> x = uniform(rng, 32 * 21, -3.0f, 3.0f);
    for (int j = 0; j < 32; ++j) x[32 * 4 + j] = 0.0f;                       // an all-zero block: d = 0
    for (int j = 0; j < 32; ++j) x[32 * 7 + j] = float(j - 16) * 0.25f;      // t = x/d on exact halves
    for (int j = 0; j < 32; ++j) x[32 * 9 + j] = std::ldexp(x[32 * 9 + j], -20);  // tiny: d subnormal in half
    x = roundTo(d, x);
    std::vector<uint8_t> want = refQuantizeQ81(x);
    std::vector<uint8_t> y(want.size(), 0xA5);
    Call call("quant", std::string("quantize_q8_1_") + dtypeName(d));
    if (d == Dtype::F32) call.buffer("x", x);
    else call.buffer("x", encode(d, x));
    Outputs o = r.run(call.buffer("y", y).scalar("n", uint32_t(x.size())));
    std::vector<uint8_t> got = o.get<uint8_t>("y");
    REQUIRE(got.size() == want.size());
    size_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i) bad += got[i] != want[i];
    CHECK_MESSAGE(bad == 0, dtypeName(d) << ": " << bad << " bytes differ (seed " << seed() << ")");
  }
}

LIBRARY_TEST("quant gemv_q: ggml test vectors, f32 and q8_1 activations, within the derived tolerances", quantGemvVectors) {
  for (const char* c : kCases) {
    std::optional<std::string> dir = caseDir(c);
    if (!dir) return;
    std::vector<float> x = readFile<float>(*dir + "/x.f32");
    std::string what = std::string("case '") + (*c ? c : "uniform") + "'";
    for (const Format& f : kFormats) {
      const std::string fdir = formatDir(*dir, c, f);
      std::vector<uint8_t> q = readFile<uint8_t>(fdir + "/" + f.name + ".bin");
      std::vector<float> deq = readFile<float>(fdir + "/" + f.name + ".dequant.f32");
      std::vector<float> ref = readFile<float>(fdir + "/" + f.name + ".gemv.f32");
      checkGemv(r, std::string("gemv_q_") + f.name + "_n1", 1, Dtype::F32, q, deq, kVecRows, kVecK, x, &ref, what);
      // The f32 path on x as its q8_1 blocks dequantize (xq = float(q) * fp32(d)) meets the
      // vectors' gemv_xq8_1 reference: it checks that file and the q8_1 blocks together.
      // The q8_1 path (dp4a) on those blocks meets the same reference.
      std::vector<uint8_t> xq8 = readFile<uint8_t>(*dir + "/x.q8_1.bin");
      std::vector<float> refq = readFile<float>(fdir + "/" + f.name + ".gemv_xq8_1.f32");
      checkGemv(r, std::string("gemv_q_") + f.name + "_n1", 1, Dtype::F32, q, deq, kVecRows, kVecK, dequantQ81(xq8),
                &refq, what + " x from q8_1");
      checkGemvQ81(r, f, 1, q, deq, kVecRows, kVecK, xq8, &refq, what);
      // Three columns: x, -x and x reversed (one pass over W serves all three).
      std::vector<float> x3 = x;
      for (float v : x) x3.push_back(-v);
      x3.insert(x3.end(), x.rbegin(), x.rend());
      checkGemv(r, std::string("gemv_q_") + f.name + "_n3", 3, Dtype::F32, q, deq, kVecRows, kVecK, x3, nullptr, what);
    }
  }
}

LIBRARY_TEST("quant gemv_q: random weights, odd row counts, ntok 1, 3 and 8 (bf16), f32 and q8_1 activations", quantGemvRandom) {
  std::mt19937 rng(seed());
  for (const Format& f : kFormats) {
    // q4_k, q5_k: 9 blocks a row, so that on their 16-byte path (aligned buffers) lanes 0-7 take
    // three blocks and the others two.
    uint32_t k = (f.qk == 32 ? 13 : 9) * f.qk;
    for (uint32_t rows : {1u, 9u}) {
      std::vector<uint8_t> q = randomBlocks(rng, f, size_t(rows) * (k / f.qk));
      std::vector<float> deq = refDequant(f, q);
      std::string what = "rows=" + std::to_string(rows) + " k=" + std::to_string(k);
      std::vector<float> x = uniform(rng, 3 * size_t(k));
      checkGemv(r, std::string("gemv_q_") + f.name + "_n1", 1, Dtype::F32, q, deq, rows, k, x, nullptr, what);
      checkGemv(r, std::string("gemv_q_") + f.name + "_n3", 3, Dtype::F32, q, deq, rows, k, x, nullptr, what);
      if (r.honoursMisalign())
        checkGemv(r, std::string("gemv_q_") + f.name + "_n3", 3, Dtype::F32, q, deq, rows, k, x, nullptr,
                  what + " misaligned", f.bytes % 2 ? 1 : 2);
      // The q8_1 path (dp4a) on x as quantize_q8_1 makes it.
      std::vector<uint8_t> xq8 = refQuantizeQ81(x);
      checkGemvQ81(r, f, 1, q, deq, rows, k, xq8, nullptr, what);
      checkGemvQ81(r, f, 3, q, deq, rows, k, xq8, nullptr, what);
      if (r.honoursMisalign()) checkGemvQ81(r, f, 3, q, deq, rows, k, xq8, nullptr, what + " misaligned", f.bytes % 2 ? 1 : 2);
    }
  }
  const Format& q4k = kFormats[2];
  uint32_t rows = 5, k = 2 * 256;
  std::vector<uint8_t> q = randomBlocks(rng, q4k, size_t(rows) * 2);
  std::vector<float> x = uniform(rng, 8 * size_t(k));
  checkGemv(r, "gemv_q_q4_k_bf16_n8", 8, Dtype::BF16, q, refDequant(q4k, q), rows, k, x, nullptr, "bf16 x");
}

// rows_per_warp 2-4: each path (groups, 16-byte, dp4a, the fused kernel) with row counts that
// leave a warp's last rows past m (read, not written) and that fill the last warp exactly.
// At ntok 1 a lane takes 4 units an iteration (q4_k/q5_k's 16-byte path: 2 blocks), u, u + 32 W,
// ...: rows long enough that every one of them is in the row in some iteration and past it in the
// last (k = 37 · 256: 1184 groups against 512 an iteration of the default 4 warps a row, 592 pairs
// of groups in the formats of two nibbles a byte, q4_0, mxfp4, iq4_xs and nvfp4 here; 37 blocks
// against 32), aligned (the 16-byte path; mxfp4's word windows, its rows 5032 bytes) and misaligned
// (the group path).
LIBRARY_TEST("quant gemv_q: long rows, several groups a lane an iteration", quantGemvLongRows) {
  std::mt19937 rng(seed());
  const uint32_t rows = 3, k = 37 * 256;
  for (size_t fi : {0u, 1u, 2u, 3u, 4u, 9u, 10u, 24u}) {
    const Format& f = kFormats[fi];
    std::vector<uint8_t> q = randomBlocks(rng, f, size_t(rows) * (k / f.qk));
    std::vector<float> deq = refDequant(f, q);
    std::vector<uint8_t> xq8 = refQuantizeQ81(uniform(rng, k));
    checkGemvQ81(r, f, 1, q, deq, rows, k, xq8, nullptr, std::string(f.name) + " k=" + std::to_string(k));
    if (r.honoursMisalign())
      checkGemvQ81(r, f, 1, q, deq, rows, k, xq8, nullptr, std::string(f.name) + " misaligned", 2);
    checkGemv(r, std::string("gemv_q_") + f.name + "_n1", 1, Dtype::F32, q, deq, rows, k, uniform(rng, k), nullptr,
              std::string(f.name) + " f32 x");
  }
}

LIBRARY_TEST("quant gemv_q: rows per warp, rows past m, every path", quantGemvRowsPerWarp) {
  std::mt19937 rng(seed());
  const Format& q4_0 = kFormats[0];
  const Format& q4k = kFormats[2];
  const Format& q5k = kFormats[3];
  const Format& q6k = kFormats[4];
  for (uint32_t rows : {1u, 7u, 12u, 25u}) {
    std::string what = "rows=" + std::to_string(rows);
    auto one = [&](const Format& f, uint32_t blocks) {
      uint32_t k = blocks * f.qk;
      std::vector<uint8_t> q = randomBlocks(rng, f, size_t(rows) * blocks);
      return std::make_tuple(k, q, refDequant(f, q));
    };
    {
      auto [k, q, deq] = one(q4_0, 13);
      checkGemv(r, "gemv_q_q4_0_n2_r3", 2, Dtype::F32, q, deq, rows, k, uniform(rng, 2 * size_t(k)), nullptr, what);
    }
    {
      auto [k, q, deq] = one(q4k, 9);
      std::vector<float> x = uniform(rng, 2 * size_t(k));
      checkGemv(r, "gemv_q_q4_k_n2_r4", 2, Dtype::F32, q, deq, rows, k, x, nullptr, what);
      if (r.honoursMisalign()) checkGemv(r, "gemv_q_q4_k_n2_r4", 2, Dtype::F32, q, deq, rows, k, x, nullptr, what + " misaligned", 2);
    }
    {
      auto [k, q, deq] = one(q6k, 3);
      checkGemvQ81(r, q6k, 3, q, deq, rows, k, refQuantizeQ81(uniform(rng, 3 * size_t(k))), nullptr, what, 0, "_r4");
    }
    {
      auto [k, q, deq] = one(q5k, 9);
      checkGemvQ81(r, q5k, 1, q, deq, rows, k, refQuantizeQ81(uniform(rng, size_t(k))), nullptr, what, 0, "_r2");
    }
    uint32_t k = 3 * 256;
    std::vector<uint8_t> gate = randomBlocks(rng, q4k, size_t(rows) * 3), up = randomBlocks(rng, q4k, size_t(rows) * 3);
    checkSwiglu(r, q4k, 3, "q8_1", Dtype::F32, gate, up, rows, k, uniform(rng, 3 * size_t(k)), what, 0, "_r2");
  }
}

// warps_per_row 1, 2 and 8 (the default 4 at ntok 1 runs in every other ntok-1 case): k split
// over the warps of a row group, their sums added in shared memory; k of a single block (most of
// the 8 warps without a part), and of more blocks than warps; rows that leave the block's last
// groups past m (they read the last row, reach the barrier and write nothing).
LIBRARY_TEST("quant gemv_q: warps per row, k split over warps, rows past m, every path", quantGemvWarpsPerRow) {
  std::mt19937 rng(seed());
  const Format& q4_0 = kFormats[0];
  const Format& q8_0 = kFormats[1];
  const Format& q4k = kFormats[2];
  const Format& q5k = kFormats[3];
  const Format& q6k = kFormats[4];
  for (uint32_t rows : {1u, 3u, 10u}) {
    for (uint32_t blocks : {1u, 11u}) {
      std::string what = "rows=" + std::to_string(rows) + " blocks=" + std::to_string(blocks);
      auto weights = [&](const Format& f) { return randomBlocks(rng, f, size_t(rows) * blocks); };
      const uint32_t k32 = blocks * 32, k256 = blocks * 256;
      {
        std::vector<uint8_t> q = weights(q4_0);
        checkGemv(r, "gemv_q_q4_0_n1_w1", 1, Dtype::F32, q, refDequant(q4_0, q), rows, k32, uniform(rng, k32), nullptr, what);
      }
      {
        std::vector<uint8_t> q = weights(q8_0);
        checkGemv(r, "gemv_q_q8_0_n3_w2", 3, Dtype::F32, q, refDequant(q8_0, q), rows, k32, uniform(rng, 3 * size_t(k32)),
                  nullptr, what);
      }
      {
        std::vector<uint8_t> q = weights(q4k);
        std::vector<float> deq = refDequant(q4k, q), x = uniform(rng, k256);
        for (const char* kernel : {"gemv_q_q4_k_n1_w1", "gemv_q_q4_k_n1_w8"}) {
          checkGemv(r, kernel, 1, Dtype::F32, q, deq, rows, k256, x, nullptr, what);
          if (r.honoursMisalign()) checkGemv(r, kernel, 1, Dtype::F32, q, deq, rows, k256, x, nullptr, what + " misaligned", 2);
        }
      }
      {
        std::vector<uint8_t> q = weights(q6k);
        checkGemvQ81(r, q6k, 1, q, refDequant(q6k, q), rows, k256, refQuantizeQ81(uniform(rng, k256)), nullptr, what, 0,
                     "_w1");
      }
      {
        std::vector<uint8_t> q = weights(q5k);
        checkGemvQ81(r, q5k, 2, q, refDequant(q5k, q), rows, k256, refQuantizeQ81(uniform(rng, 2 * size_t(k256))), nullptr,
                     what, 0, "_w2_r3");
      }
      std::vector<uint8_t> gate = weights(q4k), up = weights(q4k);
      checkSwiglu(r, q4k, 3, "q8_1", Dtype::F32, gate, up, rows, k256, uniform(rng, 3 * size_t(k256)), what, 0, "_w2");
      std::vector<uint8_t> gate6 = weights(q6k), up6 = weights(q6k);
      checkSwiglu(r, q6k, 1, "f32", Dtype::F32, gate6, up6, rows, k256, uniform(rng, k256), what, 0, "_w8");
    }
  }
}

LIBRARY_TEST("quant gemv_q_swiglu: random gate and up, odd row counts, f32, bf16 and q8_1 activations", quantSwigluRandom) {
  std::mt19937 rng(seed());
  for (const Format& f : kFormats) {
    uint32_t k = (f.qk == 32 ? 13 : 3) * f.qk;
    for (uint32_t rows : {1u, 9u}) {
      std::vector<uint8_t> gate = randomBlocks(rng, f, size_t(rows) * (k / f.qk));
      std::vector<uint8_t> up = randomBlocks(rng, f, size_t(rows) * (k / f.qk));
      std::vector<float> x = uniform(rng, 3 * size_t(k));
      std::string what = "rows=" + std::to_string(rows) + " k=" + std::to_string(k);
      for (const char* act : {"f32", "q8_1"}) {
        checkSwiglu(r, f, 3, act, Dtype::F32, gate, up, rows, k, x, what);
        if (r.honoursMisalign()) checkSwiglu(r, f, 3, act, Dtype::F32, gate, up, rows, k, x, what + " misaligned", 2);
      }
    }
  }
  const Format& q4k = kFormats[2];
  uint32_t rows = 5, k = 2 * 256;
  std::vector<uint8_t> gate = randomBlocks(rng, q4k, size_t(rows) * 2), up = randomBlocks(rng, q4k, size_t(rows) * 2);
  std::vector<float> x = uniform(rng, 8 * size_t(k));
  std::vector<float> x1(x.begin(), x.begin() + k);
  checkSwiglu(r, q4k, 1, "f32", Dtype::F32, gate, up, rows, k, x1, "ntok 1");
  checkSwiglu(r, q4k, 1, "q8_1", Dtype::F32, gate, up, rows, k, x1, "ntok 1");
  checkSwiglu(r, q4k, 8, "bf16", Dtype::BF16, gate, up, rows, k, x, "bf16 x and y");
}

// GeGLU (glu = "gelu", "gelu_erf"): gelu(g) u, Gemma's gated unit, for q8_1, f32 and bf16 x and a
// bf16 y; random blocks whose g reach well into gelu's negative tail.
LIBRARY_TEST("quant gemv_q_swiglu with glu gelu and gelu_erf (GeGLU)", quantGeglu) {
  std::mt19937 rng(seed());
  const Format &q8 = kFormats[1], &q4k = kFormats[2], &q6k = kFormats[4];
  for (uint32_t rows : {1u, 9u}) {
    const std::string what = "rows=" + std::to_string(rows);
    const uint32_t k = 2 * 256;
    std::vector<float> x = uniform(rng, 3 * size_t(k));
    std::vector<float> x1(x.begin(), x.begin() + k), x2(x.begin(), x.begin() + 2 * k);
    auto blocks = [&](const Format& f) { return randomBlocks(rng, f, size_t(rows) * (k / f.qk)); };
    checkSwiglu(r, q4k, 1, "q8_1", Dtype::F32, blocks(q4k), blocks(q4k), rows, k, x1, what, 0, "_geglu", kGeluTanh);
    checkSwiglu(r, q6k, 3, "f32", Dtype::BF16, blocks(q6k), blocks(q6k), rows, k, x, what, 0, "_geglu_erf", kGeluErf);
    checkSwiglu(r, q8, 2, "bf16", Dtype::F32, blocks(q8), blocks(q8), rows, k, x2, what, 0, "_geglu", kGeluTanh);
  }
}

// gpt-oss's clamped SwiGLU (glu = "swiglu_oai"): q4_0 with q8_1 x, q8_0 with f32 x at ntok 2.
LIBRARY_TEST("quant gemv_q_swiglu with glu swiglu_oai", quantSwigluOai) {
  std::mt19937 rng(seed());
  const Format &q4 = kFormats[0], &q8 = kFormats[1];
  for (uint32_t rows : {1u, 9u}) {
    const std::string what = "rows=" + std::to_string(rows);
    const uint32_t k = 13 * 32;
    std::vector<float> x = uniform(rng, 2 * size_t(k));
    std::vector<float> x1(x.begin(), x.begin() + k);
    auto blocks = [&](const Format& f) { return randomBlocks(rng, f, size_t(rows) * (k / f.qk)); };
    checkSwiglu(r, q4, 1, "q8_1", Dtype::F32, blocks(q4), blocks(q4), rows, k, x1, what, 0, "_oai", kSwigluOai);
    checkSwiglu(r, q8, 2, "f32", Dtype::F32, blocks(q8), blocks(q8), rows, k, x, what, 0, "_oai", kSwigluOai);
  }
}

LIBRARY_TEST("quant rmsnorm_quantize_q8_1: equals rmsnorm then quantize_q8_1, odd rows, zero and huge rows", quantRmsnormQ81) {
  std::mt19937 rng(seed());
  for (Dtype d : {Dtype::F32, Dtype::BF16}) {
    for (uint32_t cols : {32u, 160u, 1312u, 2080u, 16416u}) {  // the last: past the one-pass bound
      uint32_t rows = 3;
      std::vector<float> x = roundTo(d, uniform(rng, size_t(rows) * cols, -3.0f, 3.0f));
      std::vector<float> weight = roundTo(d, uniform(rng, cols, 0.5f, 1.5f));
      if (cols == 160) std::fill(x.begin() + cols, x.begin() + 2 * cols, 0.0f);  // inv = rsqrt(eps), every d = 0
      if (cols == 1312)  // squares overflow f32: rmsnorm's scaled second sum
        for (uint32_t c = 0; c < cols; ++c) x[2 * cols + c] = roundTo(d, {x[2 * cols + c] * 1e20f})[0];
      std::string what = std::string(dtypeName(d)) + " rows=3 cols=" + std::to_string(cols);
      checkRmsnormQ81(r, d, rows, cols, x, weight, 1e-5f, what);
      if (r.honoursMisalign()) checkRmsnormQ81(r, d, rows, cols, x, weight, 1e-5f, what + " misaligned", d == Dtype::F32 ? 4 : 2);
      // max_cols = 1024: 1312 and 2080 cross its bound (f32 1024, bf16 2048 elements).
      checkRmsnormQ81(r, d, rows, cols, x, weight, 1e-5f, what + " max_cols=1024", 0, "_c1024");
    }
    // Many rows at the one-pass bound: another order of the squares than rmsnorm's (a fused
    // kernel forced onto the two-pass path) changes a few of these 16384 blocks.
    const uint32_t rows = 64, cols = 8192;
    std::vector<float> x = roundTo(d, uniform(rng, size_t(rows) * cols, -3.0f, 3.0f));
    checkRmsnormQ81(r, d, rows, cols, x, roundTo(d, uniform(rng, cols, 0.5f, 1.5f)), 1e-5f,
                    std::string(dtypeName(d)) + " rows=64 cols=8192");
    // And just past max_cols = 1024's bound (f32 1024, bf16 2048): both kernels on two passes.
    const uint32_t past = d == Dtype::F32 ? 1056 : 2080;
    std::vector<float> xp = roundTo(d, uniform(rng, size_t(rows) * past, -3.0f, 3.0f));
    checkRmsnormQ81(r, d, rows, past, xp, roundTo(d, uniform(rng, past, 0.5f, 1.5f)), 1e-5f,
                    std::string(dtypeName(d)) + " rows=64 cols=" + std::to_string(past) + " max_cols=1024", 0, "_c1024");
  }
}

LIBRARY_TEST("quant gemm_q: every format's weights x q8_1 tokens, masked edges, several blocks", quantGemmQ) {
  std::mt19937 rng(seed());
  for (const Format& f : kFormats) {
    // One block of K; odd sizes inside one tile, over several stages of 256 values of K (q4_0 and
    // q8_0: two whole stages and a last one of 3 blocks); exactly one 64 x 64 tile; edges of a 2 x 2
    // grid, whose second token tile ends in its first warp column (tokens 64 .. 64 + 31).
    uint32_t qk = f.qk, few = qk == 32 ? 3 : 1;
    checkGemmQ(r, f, 1, 1, qk, rng);
    checkGemmQ(r, f, 9, 5, (qk == 32 ? 19 : 3) * qk, rng);
    checkGemmQ(r, f, 64, 32, 2 * qk, rng);
    checkGemmQ(r, f, 70, 37, few * qk, rng);
    if (r.honoursMisalign()) checkGemmQ(r, f, 70, 37, few * qk, rng, f.bytes % 2 ? 1 : 2);
  }
}

// tile_n = 64 (warps 2 x 2 over a 64 x 64 tile): the same sizes for a format of each path, and
// exactly one tile, and edges of a 2 x 2 grid whose second token tile ends in its first warp
// column (tokens 64 .. 64 + 31).
LIBRARY_TEST("quant gemm_q: 64 x 64 tiles (tile_n = 64)", quantGemmQTile64) {
  std::mt19937 rng(seed());
  unsigned formats = 0;
  for (const Format& f : kFormats) {
    const std::string name = f.name;
    if (name != "q8_0" && name != "q4_0" && name != "q4_1" && name != "q4_k" && name != "q5_k" && name != "q6_k" &&
        name != "q2_k" && name != "iq1_m" && name != "nvfp4")
      continue;
    ++formats;
    uint32_t qk = f.qk, few = qk == 32 ? 3 : 1;
    checkGemmQ(r, f, 1, 1, qk, rng, 0, nullptr, "_t64");
    checkGemmQ(r, f, 9, 5, (qk == 32 ? 19 : 3) * qk, rng, 0, nullptr, "_t64");
    checkGemmQ(r, f, 64, 64, 2 * qk, rng, 0, nullptr, "_t64");
    checkGemmQ(r, f, 70, 83, few * qk, rng, 0, nullptr, "_t64");
    if (r.honoursMisalign()) checkGemmQ(r, f, 70, 83, few * qk, rng, f.bytes % 2 ? 1 : 2, nullptr, "_t64");
  }
  CHECK(formats == 9);
}

// bias (Qwen2's q, k and v projections; gpt-oss's experts, test/library_moe_test.cpp): y's rows
// plus f32 biases on every path of gemv_q (groups with one and four warps a row, 16-byte, dp4a,
// two rows a warp), gemv_q_swiglu (the biases of g and u added before the activation, silu and
// swiglu_oai) and gemm_q, rows past a warp's or a tile's, against refGemv's bound plus the bias's
// rounding.
LIBRARY_TEST("quant gemv_q, gemv_q_swiglu and gemm_q with bias", quantBias) {
  std::mt19937 rng(seed());
  const Format &q4_0 = kFormats[0], &q4k = kFormats[2], &q4_1 = kFormats[5], &q5_1 = kFormats[7], &mx = kFormats[9];
  for (uint32_t rows : {1u, 9u}) {
    const std::string what = "rows=" + std::to_string(rows);
    std::vector<float> b1 = uniform(rng, rows, -4.0f, 4.0f), b2 = uniform(rng, rows, -4.0f, 4.0f);
    auto blocks = [&](const Format& f, uint32_t k) { return randomBlocks(rng, f, size_t(rows) * (k / f.qk)); };
    {
      const uint32_t k = 13 * 32;
      std::vector<uint8_t> q = blocks(q4_0, k);
      std::vector<float> x = uniform(rng, 3 * size_t(k));
      checkGemv(r, "gemv_q_q4_0_n3_bias", 3, Dtype::F32, q, refDequant(q4_0, q), rows, k, x, nullptr, what, 0, &b1);
      std::vector<float> x1(x.begin(), x.begin() + k);
      checkGemv(r, "gemv_q_q4_0_n1_bias", 1, Dtype::F32, q, refDequant(q4_0, q), rows, k, x1, nullptr, what, 0, &b1);
      std::vector<uint8_t> q5 = blocks(q5_1, k);
      checkGemvQ81(r, q5_1, 3, q5, refDequant(q5_1, q5), rows, k, refQuantizeQ81(x), nullptr, what, 0, "_r2_bias", &b2);
      checkSwiglu(r, mx, 1, "f32", Dtype::F32, blocks(mx, k), blocks(mx, k), rows, k, x1, what, 0, "_oai_bias",
                  kSwigluOai, &b1, &b2);
    }
    const uint32_t k = 3 * 256;
    std::vector<uint8_t> q = blocks(q4k, k);
    std::vector<float> x = uniform(rng, 3 * size_t(k));
    std::vector<float> x1(x.begin(), x.begin() + k);
    checkGemv(r, "gemv_q_q4_k_n1_bias", 1, Dtype::F32, q, refDequant(q4k, q), rows, k, x1, nullptr, what, 0, &b2);
    checkSwiglu(r, q4k, 3, "q8_1", Dtype::F32, blocks(q4k, k), blocks(q4k, k), rows, k, x, what, 0, "_bias", kSilu, &b2,
                &b1);
  }
  std::vector<float> b = uniform(rng, 70, -4.0f, 4.0f);
  checkGemmQ(r, q4_1, 70, 37, 9 * 32, rng, 0, &b);
  checkGemmQ(r, q4k, 70, 37, 2 * 256, rng, 0, &b);
  checkGemmQ(r, q4k, 70, 83, 2 * 256, rng, 0, &b, "_t64");
}
