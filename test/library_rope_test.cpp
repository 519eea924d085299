// rope (test/library/rope.toml) against a double-precision reference of the exact formula.
#include <cmath>
#include <cstdint>
#include <numbers>
#include <sstream>

#include "library_harness.h"

using namespace tn::libtest;

namespace {

struct Shape {
  uint32_t tokens, qHeads, kHeads, headDim, posOffset;
  float theta;
  std::vector<uint32_t> positions = {};  // token t's position when not empty (a `positions` kernel)
  std::vector<float> factors = {};       // freq_factors (head_dim / 2 of them) when not empty
  float attnFactor = 0;                  // attn_factor when not 0
  uint32_t rotaryDim = ~0u;              // rotary_dim (a `_rd` kernel) when not ~0u
  uint32_t rot() const { return std::min(rotaryDim, headDim); }
  double pos(uint32_t t) const { return positions.empty() ? double(posOffset) + t : double(positions[t]); }
};

// The reference rotation of one tensor (tokens x heads x headDim) and the bound each output
// element must meet, from the error analysis of the kernel's f32 path on the GPU:
// - the angle pos * 2^(i * -2 log2(theta) / head_dim) is formed in f32 from lg2 (rel. 2^-22),
//   ex2 (2 ulp) and three roundings: its error is about pos * freq * (1 + |log2 freq|) * 2^-22,
//   plus one rounding (2^-22 at |r| <= pi) in the range reduction; we allow 2x that. It grows
//   with the position: ~1e-2 rad at pos 3e4 for the low pairs, inherent to f32 angles;
// - sin/cos.approx add 2^-20.5 each, the f32 rotation a few ulp of rho = |(a, b)|;
// so |err| <= rho * (angleErr + 2^-20 + 2^-21) + 2^-24, plus one rounding of the output to
// the storage type (roundoff * |ref|; exact zero for f32 beyond the terms above).

void reference(const std::vector<float>& x, uint32_t heads, const Shape& s, bool neox, Dtype d,
               std::vector<double>& want, std::vector<double>& tol) {
  const uint32_t rot = s.rot(), half = rot / 2;
  want.assign(x.begin(), x.end());
  tol.assign(x.size(), 0.0);
  for (uint32_t t = 0; t < s.tokens; ++t)
    for (uint32_t h = 0; h < heads; ++h) {
      size_t row = (size_t(t) * heads + h) * s.headDim;
      double pos = s.pos(t);
      for (uint32_t i = 0; i < half; ++i) {
        double freq = std::pow(double(s.theta), -2.0 * i / rot);
        // A factor's reciprocal and the product round twice more: 2^-23 of the angle.
        double factorErr = 0;
        if (!s.factors.empty()) {
          factorErr = pos * freq / s.factors[i] * std::ldexp(1.0, -22);
          freq /= s.factors[i];
        }
        double angle = pos * freq, scale = s.attnFactor != 0 ? double(s.attnFactor) : 1.0;
        size_t ia = row + (neox ? i : 2 * i), ib = row + (neox ? i + half : 2 * i + 1);
        double a = x[ia], b = x[ib];
        want[ia] = scale * (a * std::cos(angle) - b * std::sin(angle));
        want[ib] = scale * (a * std::sin(angle) + b * std::cos(angle));
        double angleErr = std::ldexp(pos * freq * (1.0 + std::fabs(std::log2(freq))) + 1.0, -21) + factorErr;
        double rho = std::hypot(a, b) * scale;
        for (size_t e : {ia, ib})
          tol[e] = rho * (angleErr + std::ldexp(1.0, -20) + std::ldexp(1.0, -21)) + std::ldexp(1.0, -24) +
                   (d == Dtype::F32 ? 0.0 : roundoff(d)) * std::fabs(want[e]);
      }
    }
}

void check(const std::vector<float>& got, const std::vector<double>& want, const std::vector<double>& tol,
           const std::string& what) {
  REQUIRE(got.size() == want.size());
  size_t bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= tol[i]) && bad++ < 5)
      first << "\n  [" << i << "] got " << got[i] << ", expected " << want[i] << " +- " << tol[i];
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " of " << got.size() << " values out of tolerance (seed " << seed() << ")"
                               << first.str());
}

void runRope(Runner& r, Dtype d, bool neox, const Shape& s, std::mt19937& rng, uint32_t misalignQ = 0,
             uint32_t misalignK = 0) {
  std::vector<float> q = roundTo(d, uniform(rng, size_t(s.tokens) * s.qHeads * s.headDim));
  std::vector<float> k = roundTo(d, uniform(rng, size_t(s.tokens) * s.kHeads * s.headDim));
  const bool perToken = !s.positions.empty();
  std::string name = std::string("rope_") + (neox ? "neox_" : "interleaved_") + dtypeName(d) + (perToken ? "_pos" : "") +
                     (s.factors.empty() ? "" : "_ff") + (s.attnFactor != 0 ? "_af" : "") +
                     (s.rotaryDim != ~0u ? "_rd" : "");
  Call call("rope", name);
  call.buffer("q", encode(d, q), misalignQ)
      .buffer("k", encode(d, k), misalignK)
      .scalar("tokens", s.tokens)
      .scalar("q_heads", s.qHeads)
      .scalar("k_heads", s.kHeads)
      .scalar("head_dim", s.headDim)
      .scalar("theta", s.theta);
  if (perToken) call.buffer("positions", s.positions);
  else call.scalar("pos_offset", s.posOffset);
  if (!s.factors.empty()) call.buffer("freq_factors", s.factors);
  if (s.attnFactor != 0) call.scalar("attn_factor", s.attnFactor);
  if (s.rotaryDim != ~0u) call.scalar("rotary_dim", s.rotaryDim);
  Outputs out = r.run(call);
  std::ostringstream what;
  what << name << " tokens=" << s.tokens << " heads=" << s.qHeads << "/" << s.kHeads << " head_dim=" << s.headDim
       << " theta=" << s.theta;
  if (perToken) what << " positions[0]=" << s.positions[0];
  else what << " pos_offset=" << s.posOffset;
  if (misalignQ || misalignK) what << " misaligned q+" << misalignQ << " k+" << misalignK;
  if (!s.factors.empty()) what << " freq_factors";
  if (s.attnFactor != 0) what << " attn_factor=" << s.attnFactor;
  if (s.rotaryDim != ~0u) what << " rotary_dim=" << s.rotaryDim;
  std::vector<double> want, tol;
  reference(q, s.qHeads, s, neox, d, want, tol);
  check(decode(d, out.get<std::byte>("q")), want, tol, what.str() + " q");
  reference(k, s.kHeads, s, neox, d, want, tol);
  check(decode(d, out.get<std::byte>("k")), want, tol, what.str() + " k");
}

constexpr Dtype kDtypes[] = {Dtype::F32, Dtype::BF16, Dtype::F16};

}  // namespace

LIBRARY_TEST("rope layouts, dtypes, head sizes and positions", ropeShapes) {
  std::mt19937 rng(seed());
  for (Dtype d : kDtypes)
    for (bool neox : {true, false})
      for (uint32_t headDim : {2u, 6u, 64u, 128u})
        for (uint32_t tokens : {1u, 5u, 37u})  // 37: several block rows of several tokens each (16-byte path)
          for (uint32_t posOffset : {0u, 30000u}) runRope(r, d, neox, {tokens, 8, 2, headDim, posOffset, 10000.0f}, rng);
}

// Each token its own position (positions = true): a decode batch of sequences at scattered
// positions (far ones, 0, repeats, not increasing), on the vector and the scalar path.
LIBRARY_TEST("rope positions per token", ropePositions) {
  std::mt19937 rng(seed());
  for (auto [d, neox] : {std::pair{Dtype::BF16, true}, std::pair{Dtype::F32, false}})
    for (uint32_t headDim : {6u, 64u, 128u}) {
      std::vector<uint32_t> positions = {131000, 0, 7, 7, 30000, 1};
      for (uint32_t i = 0; i < 3; ++i) positions.push_back(rng() % 100000);
      runRope(r, d, neox, {uint32_t(positions.size()), 4, 2, headDim, 0, 500000.0f, positions}, rng);
    }
}

// Head counts that leave warps of a block idle, llama-3's theta, the largest positions of a long
// context, and a misaligned q (GPU only: the scalar path for a head_dim the vector path takes).
LIBRARY_TEST("rope odd head counts, theta 5e5, far positions", ropeOdd) {
  std::mt19937 rng(seed());
  for (Dtype d : kDtypes)
    for (bool neox : {true, false}) {
      runRope(r, d, neox, {3, 3, 1, 64, 7, 500000.0f}, rng);
      runRope(r, d, neox, {2, 5, 0, 128, 131000, 500000.0f}, rng);
      runRope(r, d, neox, {2, 1, 1, 32, 100, 10000.0f}, rng, uint32_t(dtypeBytes(d)));
    }
}

// The 16-byte path runs when q and k are 16-byte aligned and head_dim is a multiple of 2V (neox)
// or V (interleaved), V = 16 / element bytes. These head sizes take it in some layouts and dtypes
// and not in others (36: interleaved f32 only; 24, 40: interleaved, and neox f32), give blocks a
// unit count that is not a power of two (96: 6 or 12 vectors a head) or more units than
// threads (256 with 4 heads: up to 256 units), alongside the scalar 6 and 2.
LIBRARY_TEST("rope vector and scalar head sizes", ropeVectorShapes) {
  std::mt19937 rng(seed());
  for (Dtype d : kDtypes)
    for (bool neox : {true, false})
      for (uint32_t headDim : {2u, 6u, 24u, 36u, 40u, 96u, 256u}) {
        runRope(r, d, neox, {2, 5, 2, headDim, 1000, 10000.0f}, rng);
        runRope(r, d, neox, {1, 4, 1, headDim, 3, 500000.0f}, rng);
      }
}

// Misaligned q or k by 4 bytes (GPU only): every head size falls back to the scalar path, which
// must still handle sizes the vector path would have taken.
LIBRARY_TEST("rope misaligned q or k", ropeMisaligned) {
  std::mt19937 rng(seed());
  for (Dtype d : kDtypes)
    for (bool neox : {true, false})
      for (uint32_t headDim : {64u, 128u, 36u}) {
        runRope(r, d, neox, {3, 4, 2, headDim, 50, 10000.0f}, rng, 4, 0);
        runRope(r, d, neox, {3, 4, 2, headDim, 50, 10000.0f}, rng, 0, 4);
        runRope(r, d, neox, {2, 3, 1, headDim, 9, 10000.0f}, rng, 4, 4);
      }
}

// More tokens than grid rows (65535): blocks loop over tokens on both paths (GPU only: too big
// for the interpreter).
LIBRARY_GPU_TEST("rope more tokens than grid rows", ropeManyTokens) {
  std::mt19937 rng(seed());
  // More tokens than grid rows is the point; on the simulator only the small head size and f32
  // (the token loop does not depend on the storage type).
  const bool sim = simulatedGpu();
  const std::vector<uint32_t> headDims = sim ? std::vector<uint32_t>{6} : std::vector<uint32_t>{64, 6};
  for (Dtype d : kDtypes)
    for (bool neox : {true, false})
      for (uint32_t headDim : headDims)
        if (!sim || d == Dtype::F32) runRope(r, d, neox, {70000, 2, 1, headDim, 0, 10000.0f}, rng);
}

// An odd head_dim rotates floor(head_dim / 2) pairs and leaves the last element as it was.
LIBRARY_TEST("rope odd head_dim leaves the last element", ropeOddDim) {
  std::mt19937 rng(seed());
  for (Dtype d : kDtypes)
    for (bool neox : {true, false})
      for (uint32_t headDim : {1u, 5u, 7u}) runRope(r, d, neox, {2, 2, 1, headDim, 12, 10000.0f}, rng);
}

LIBRARY_TEST("rope no tokens", ropeEmpty) {
  std::mt19937 rng(seed());
  for (bool neox : {true, false}) runRope(r, Dtype::F32, neox, {0, 8, 2, 64, 0, 10000.0f}, rng);
}

namespace {

// LLaMA-3.1's rope scaling ("llama3": factor 8, low_freq_factor 1, high_freq_factor 4, original
// context 8192), as the host computes freq_factors from a model's config: frequency over factor.
std::vector<float> llama3Factors(uint32_t headDim, double theta) {
  std::vector<float> f(headDim / 2);
  const double factor = 8, low = 1, high = 4, context = 8192;
  for (uint32_t i = 0; i < f.size(); ++i) {
    const double freq = std::pow(theta, -2.0 * i / headDim), wavelen = 2 * std::numbers::pi / freq;
    double scaled = freq;
    if (wavelen > context / low) {
      scaled = freq / factor;
    } else if (wavelen >= context / high) {
      const double smooth = (context / wavelen - low) / (high - low);
      scaled = (1 - smooth) * freq / factor + smooth * freq;
    }
    f[i] = float(freq / scaled);
  }
  return f;
}

}  // namespace

// freq_factors (the host's long-context scaling: LLaMA-3.1's, and arbitrary factors as LongRoPE
// has them) and attn_factor (the rotated values scaled), alone and together, with per-token
// positions, on the vector and the scalar path; a factor of 1 everywhere is plain rope.
LIBRARY_TEST("rope freq_factors and attn_factor", ropeScaling) {
  std::mt19937 rng(seed());
  for (uint32_t headDim : {6u, 64u, 128u}) {
    std::vector<float> random(headDim / 2);
    for (float& v : random) v = std::uniform_real_distribution<float>(0.5f, 40.0f)(rng);
    runRope(r, Dtype::BF16, true, {3, 4, 2, headDim, 100000, 500000.0f, {}, llama3Factors(headDim, 500000.0)}, rng);
    runRope(r, Dtype::F32, true, {2, 3, 1, headDim, 7, 10000.0f, {}, random, 1.1f}, rng);
    runRope(r, Dtype::F32, true, {2, 3, 1, headDim, 7, 10000.0f, {}, std::vector<float>(headDim / 2, 1.0f), 1.0f}, rng);
    runRope(r, Dtype::F16, false, {4, 2, 2, headDim, 0, 500000.0f, {131000, 0, 9, 30000}, random, 0.8f}, rng);
    runRope(r, Dtype::BF16, false, {2, 5, 1, headDim, 4000, 10000.0f, {}, {}, 1.25f}, rng);
  }
  // Misaligned (GPU only): the scalar path with factors.
  runRope(r, Dtype::F32, true, {2, 3, 1, 64, 50, 10000.0f, {}, llama3Factors(64, 10000.0), 1.1f}, rng, 4, 0);
}

// Partial rotation (rotary_dim): GPT-NeoX's and Phi-2's quarter and Phi's/StableLM's halves of a
// head on the vector path, a rotary_dim that only the scalar path takes (not a whole number of
// vector pairs), an odd one (its last element stays), one past head_dim (all of it), 0 (nothing),
// rows that are not whole vectors, with freq_factors of rotary_dim / 2 entries, and per-token
// positions.
LIBRARY_TEST("rope rotary_dim rotates the first elements of each head", ropeRotaryDim) {
  std::mt19937 rng(seed());
  for (bool neox : {true, false}) {
    for (uint32_t rd : {32u, 64u, 24u, 13u, 200u, 0u})
      runRope(r, Dtype::BF16, neox, {3, 4, 2, 128, 1000, 10000.0f, {}, {}, 0, rd}, rng);
    runRope(r, Dtype::F32, neox, {2, 3, 1, 80, 7, 10000.0f, {}, {}, 0, 40}, rng);  // head_dim 80: Phi-2's
    // Rows of 100 bf16 elements are not all 16-byte aligned: the scalar path, though 32 would do.
    runRope(r, Dtype::BF16, neox, {2, 3, 1, 100, 5, 10000.0f, {}, {}, 0, 32}, rng);
  }
  std::vector<float> factors(16);
  for (float& f : factors) f = std::uniform_real_distribution<float>(0.5f, 8.0f)(rng);
  runRope(r, Dtype::F16, true, {4, 2, 2, 64, 0, 500000.0f, {3, 0, 9000, 17}, factors, 0, 32}, rng);
}
