// spec_verify (test/library/rowops.toml): speculative decoding's rejection sampling. Which drafts
// are accepted is exact (the kernel's uniform numbers are a hash this file computes too, and the
// test p(t) / q(t) >= u is one f32 division), so the accepted prefix, the counts and the padding
// are compared bit for bit; the drawn token is checked by what it may be (an entry of the
// residual or of p that is positive) and, over many requests, by its distribution: the first
// emitted token of each request must follow the target's p whatever the draft proposed.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "library_harness.h"

using namespace tn::libtest;

namespace {

constexpr uint32_t kNoToken = 0xFFFFFFFFu;

// kernels/Library.cpp's hash and uniform numbers, and spec_verify's keys (kernels/Speculative.cpp).
uint32_t fmix32(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  return h ^ (h >> 16);
}
float uniformOf(uint32_t h) { return std::fma(float(h >> 8), 0x1p-24f, 0x1p-25f); }
uint32_t requestKey(uint32_t seedArg, uint32_t req, bool perRow) {
  return fmix32(seedArg ^ (perRow ? 0x2545F491u : fmix32(req * 0x9E3779B1u + 0x2545F491u)));
}

// One verification's inputs: `rows` requests of k drafts over cols tokens; target rows x (k + 1)
// rows of probabilities, draft_probs rows x k (empty: the kernel without them).
struct Verify {
  uint32_t rows, k, cols;
  std::vector<float> target, q;
  std::vector<uint32_t> draft;
  uint32_t seedArg = 0;
  std::vector<uint32_t> seeds;  // per_row
  bool draftProbs = true;       // false: the kernel without draft_probs (q empty)
};

struct Result {
  std::vector<uint32_t> out, emitted;
};

Result run(Runner& r, Dtype d, const Verify& v) {
  std::string name = std::string("spec_verify_") + dtypeName(d);
  if (!v.draftProbs) name += "_no_draft_probs";
  if (!v.seeds.empty()) name += "_per_row";
  Call call("rowops", name);
  call.buffer("target", encode(d, v.target));
  if (v.draftProbs) call.buffer("draft_probs", encode(d, v.q));
  call.buffer("draft", v.draft)
      .buffer("out", std::vector<uint32_t>(size_t(v.rows) * (v.k + 1), 0xDEADBEEFu))
      .buffer("emitted", std::vector<uint32_t>(v.rows, 0xDEADBEEFu))
      .scalar("rows", v.rows)
      .scalar("k", v.k)
      .scalar("cols", v.cols);
  if (v.seeds.empty()) call.scalar("seed", v.seedArg);
  else call.buffer("seed", v.seeds);
  Outputs o = r.run(call);
  return {o.get<uint32_t>("out"), o.get<uint32_t>("emitted")};
}

// Checks every request of `got` against the definition (values as the kernel reads them, rounded
// to d): the accepted prefix exactly, the drawn token by its support, the padding. Returns the
// number of requests whose drafts were all accepted.
uint32_t check(Dtype d, const Verify& v, const Result& got, const std::string& what) {
  const std::vector<float> p = roundTo(d, v.target), q = roundTo(d, v.q);
  const bool perRow = !v.seeds.empty();
  uint32_t allAccepted = 0;
  for (uint32_t req = 0; req < v.rows; ++req) {
    const uint32_t key = requestKey(perRow ? v.seeds[req] : v.seedArg, req, perRow);
    auto pAt = [&](uint32_t i, uint32_t t) { return p[(size_t(req) * (v.k + 1) + i) * v.cols + t]; };
    auto qAt = [&](uint32_t i, uint32_t t) { return v.draftProbs ? q[(size_t(req) * v.k + i) * v.cols + t] : 1.0f; };
    uint32_t s = 0;
    bool plain = true;
    for (; s < v.k; ++s) {
      const uint32_t t = v.draft[size_t(req) * v.k + s];
      if (t >= v.cols) break;
      const float u = uniformOf(fmix32(key ^ (s * 0x9E3779B1u)));
      if (!(qAt(s, t) > 0.0f && pAt(s, t) / qAt(s, t) >= u)) {
        plain = false;
        break;
      }
    }
    allAccepted += s == v.k;
    const std::string at = what + " request " + std::to_string(req) + " (seed " + std::to_string(seed()) + ")";
    REQUIRE_MESSAGE(got.emitted[req] == s + 1, at << ": emitted " << got.emitted[req] << ", want " << s + 1);
    const uint32_t* out = &got.out[size_t(req) * (v.k + 1)];
    for (uint32_t i = 0; i < s; ++i) CHECK_MESSAGE(out[i] == v.draft[size_t(req) * v.k + i], at << ": slot " << i);
    for (uint32_t i = s + 1; i <= v.k; ++i) CHECK_MESSAGE(out[i] == kNoToken, at << ": slot " << i << " not padding");
    // The drawn token: positive in the residual where it has a positive entry, else in p.
    const uint32_t token = out[s];
    REQUIRE_MESSAGE(token < v.cols, at << ": drawn token " << token);
    const uint32_t rejected = plain ? kNoToken : v.draft[size_t(req) * v.k + s];
    auto residual = [&](uint32_t t) {
      if (plain) return pAt(s, t);
      if (!v.draftProbs) return t == rejected ? 0.0f : pAt(s, t);
      return std::max(pAt(s, t) - qAt(s, t), 0.0f);
    };
    bool anyResidual = false, anyP = false;
    for (uint32_t t = 0; t < v.cols; ++t) anyResidual |= residual(t) > 0.0f, anyP |= pAt(s, t) > 0.0f;
    if (anyResidual) CHECK_MESSAGE(residual(token) > 0.0f, at << ": token " << token << " has no residual mass");
    else if (anyP) CHECK_MESSAGE(pAt(s, token) > 0.0f, at << ": token " << token << " has no target mass");
    else CHECK_MESSAGE(token == 0, at << ": a row without mass draws " << token);
  }
  return allAccepted;
}

// A random distribution over n tokens, some of them 0.
std::vector<float> distribution(std::mt19937& rng, uint32_t n) {
  std::vector<float> w = uniform(rng, n, 0.0f, 1.0f);
  for (float& x : w)
    if (x < 0.2f) x = 0.0f;
  w[rng() % n] = 0.5f;
  float sum = 0;
  for (float x : w) sum += x;
  for (float& x : w) x /= sum;
  return w;
}

// Draws from distribution p with rng (the drafts, which the theorem needs drawn from q).
uint32_t drawFrom(std::mt19937& rng, const float* p, uint32_t n) {
  double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng), acc = 0;
  for (uint32_t t = 0; t < n; ++t)
    if (p[t] > 0 && (acc += p[t]) > u) return t;
  for (uint32_t t = n; t-- > 0;)
    if (p[t] > 0) return t;
  return 0;
}

// Chi-square of the counts of tokens against n draws from p, over the tokens p gives mass; the
// 1 - 1e-6 quantile for its degrees of freedom (up to 7).
bool followsP(const std::vector<double>& count, const std::vector<float>& p, double n, double& chi2) {
  chi2 = 0;
  unsigned dof = 0;
  for (size_t t = 0; t < p.size(); ++t) {
    if (p[t] <= 0) {
      if (count[t] > 0) return false;
      continue;
    }
    chi2 += std::pow(count[t] - n * p[t], 2) / (n * p[t]);
    ++dof;
  }
  const double quantile[] = {0, 23.9, 27.6, 30.7, 33.4, 35.9, 38.3, 40.5};
  return chi2 < quantile[std::min(dof - 1, 7u)];
}

}  // namespace

// Random requests of several draft lengths: drafts drawn from q, some any token (rejected more
// often), ids past cols (a shorter draft), draft probabilities of 0 at the drafted token and
// target probabilities of 0; each storage type, with and without draft_probs and per-row seeds.
// Every acceptance decision is the definition's; the drawn tokens lie in their support.
LIBRARY_TEST("spec_verify: acceptance by definition, tokens in their support", specVerifyExact) {
  std::mt19937 rng(seed());
  for (Dtype d : {Dtype::F32, Dtype::BF16})
    for (bool draftProbs : {true, false})
      for (uint32_t k : {0u, 1u, 3u, 5u})
        for (uint32_t cols : {1u, 7u, 300u}) {
          if (d == Dtype::BF16 && !draftProbs) continue;  // no such kernel in the spec
          Verify v{5, k, cols, {}, {}, {}, uint32_t(rng()), {}, draftProbs};
          for (uint32_t row = 0; row < v.rows * (k + 1); ++row) {
            std::vector<float> p = distribution(rng, cols);
            v.target.insert(v.target.end(), p.begin(), p.end());
          }
          for (uint32_t req = 0; req < v.rows; ++req)
            for (uint32_t i = 0; i < k; ++i) {
              std::vector<float> q = distribution(rng, cols);
              uint32_t t = drawFrom(rng, q.data(), cols);
              if (rng() % 5 == 0) t = rng() % cols;          // a token q may give no mass
              if (rng() % 7 == 0) t = cols + rng() % 3;       // the end of a shorter draft
              if (rng() % 6 == 0) q[t % cols] = 0.0f;         // q(t) = 0: rejected
              if (draftProbs) v.q.insert(v.q.end(), q.begin(), q.end());
              v.draft.push_back(t);
            }
          const std::string what = std::string(dtypeName(d)) + (draftProbs ? "" : " no draft_probs") + " k " +
                                   std::to_string(k) + " cols " + std::to_string(cols);
          check(d, v, run(r, d, v), what);
          if (d == Dtype::F32 && draftProbs) {
            // Per-row seeds: a request's outcome depends on its own seed alone, not on its row.
            Verify w = v;
            for (uint32_t req = 0; req < v.rows; ++req) w.seeds.push_back(uint32_t(rng()));
            Result a = run(r, d, w);
            check(d, w, a, what + " per_row");
            std::reverse(w.seeds.begin(), w.seeds.end());
            Verify rev = w;
            rev.target.clear(), rev.q.clear(), rev.draft.clear();
            for (uint32_t req = v.rows; req-- > 0;) {
              auto span = [&](const std::vector<float>& x, size_t n) {
                return std::vector<float>(x.begin() + req * n, x.begin() + (req + 1) * n);
              };
              std::vector<float> t = span(v.target, size_t(k + 1) * cols), q = span(v.q, size_t(k) * cols);
              rev.target.insert(rev.target.end(), t.begin(), t.end());
              rev.q.insert(rev.q.end(), q.begin(), q.end());
              rev.draft.insert(rev.draft.end(), v.draft.begin() + req * k, v.draft.begin() + (req + 1) * k);
            }
            Result b = run(r, d, rev);
            for (uint32_t req = 0; req < v.rows; ++req) {
              const uint32_t back = v.rows - 1 - req;
              CHECK_MESSAGE(a.emitted[req] == b.emitted[back], what << " per_row request " << req);
              CHECK_MESSAGE(std::equal(a.out.begin() + req * (k + 1), a.out.begin() + (req + 1) * (k + 1),
                                       b.out.begin() + back * (k + 1)),
                            what << " per_row request " << req << " drew differently in another row");
            }
          }
        }
}

// p == q: every draft is accepted (p / q = 1 >= u), and the token after them comes from the last
// target row; q(t) = 0 or p(t) = 0 rejects; a row of p without mass draws token 0; cols 0 emits
// nothing.
LIBRARY_TEST("spec_verify: specials", specVerifySpecials) {
  std::mt19937 rng(seed());
  const uint32_t cols = 9, k = 4, rows = 6;
  Verify v{rows, k, cols, {}, {}, {}, 12345u, {}};
  for (uint32_t req = 0; req < rows; ++req) {
    std::vector<std::vector<float>> ps;
    for (uint32_t i = 0; i <= k; ++i) ps.push_back(distribution(rng, cols));
    if (req == 5) std::fill(ps[0].begin(), ps[0].end(), 0.0f);  // no mass: draws 0 after the rejection
    for (uint32_t i = 0; i < k; ++i) {
      std::vector<float> q = ps[i];
      uint32_t t = drawFrom(rng, q.data(), cols);
      if (req == 1 && i == 2) q[t] = 0.0f;  // rejected at 2
      if (req == 2 && i == 0) ps[0][t = 4] = 0.0f, q[4] = 0.2f;  // p(t) = 0 < q(t): rejected
      if (req == 3 && i == 1) t = cols;  // the draft ends at 1: the token there comes from p_1
      if (req == 5 && i == 0) q[t = 3] = 0.5f;
      v.q.insert(v.q.end(), q.begin(), q.end());
      v.draft.push_back(t);
    }
    for (auto& p : ps) v.target.insert(v.target.end(), p.begin(), p.end());
  }
  Result got = run(r, Dtype::F32, v);
  check(Dtype::F32, v, got, "specials");
  CHECK(got.emitted[0] == k + 1);
  CHECK(got.emitted[1] == 3);
  CHECK(got.emitted[2] == 1);
  CHECK(got.emitted[3] == 2);
  CHECK(got.emitted[4] == k + 1);
  CHECK(got.emitted[5] == 1);
  CHECK(got.out[5 * (k + 1)] == 0);
  // No tokens (cols 0): nothing emitted, every slot padding.
  Verify none{2, 2, 0, {}, {}, {5u, 6u, 7u, 8u}, 1u, {}};
  Result empty = run(r, Dtype::F32, none);
  CHECK(empty.emitted == std::vector<uint32_t>(2, 0u));
  CHECK(empty.out == std::vector<uint32_t>(6, kNoToken));
}

// Greedy verification by one-hot target rows (p = 1 at the target's argmax): a draft is accepted
// exactly when it is the argmax, whatever positive probability q gives it, and the token drawn is the argmax of the
// first position that rejects (or of the last row).
LIBRARY_TEST("spec_verify: one-hot targets verify greedily", specVerifyGreedy) {
  std::mt19937 rng(seed());
  const uint32_t rows = 16, k = 3, cols = 11;
  for (bool draftProbs : {true, false}) {
    Verify v{rows, k, cols, {}, {}, {}, uint32_t(rng()), {}, draftProbs};
    std::vector<uint32_t> argmax;
    for (uint32_t row = 0; row < rows * (k + 1); ++row) {
      argmax.push_back(rng() % cols);
      std::vector<float> p(cols, 0.0f);
      p[argmax.back()] = 1.0f;
      v.target.insert(v.target.end(), p.begin(), p.end());
    }
    for (uint32_t req = 0; req < rows; ++req)
      for (uint32_t i = 0; i < k; ++i) {
        std::vector<float> q = distribution(rng, cols);
        // Mostly the argmax (long accepted runs), else any token.
        const uint32_t t = rng() % 3 ? argmax[req * (k + 1) + i] : rng() % cols;
        q[t] = std::max(q[t], 0.1f);  // a token the draft drew has a positive probability
        if (draftProbs) v.q.insert(v.q.end(), q.begin(), q.end());
        v.draft.push_back(t);
      }
    Result got = run(r, Dtype::F32, v);
    check(Dtype::F32, v, got, draftProbs ? "greedy" : "greedy, no draft_probs");
    for (uint32_t req = 0; req < rows; ++req) {
      uint32_t s = 0;
      while (s < k && v.draft[req * k + s] == argmax[req * (k + 1) + s]) ++s;
      CHECK_MESSAGE(got.emitted[req] == s + 1, "request " << req);
      for (uint32_t i = 0; i <= s; ++i)
        CHECK_MESSAGE(got.out[req * (k + 1) + i] == argmax[req * (k + 1) + i], "request " << req << " slot " << i);
    }
  }
}

// The theorem: whatever the draft proposes, the first emitted token follows p_0. Many requests
// with the same p and q (drafts drawn from q; and without draft_probs one fixed draft token), a
// chi-square test of the first tokens against p_0 at about 1e-6, and of the second ones (where
// the first draft was accepted) against p_1; the acceptance rate near sum min(p, q).
LIBRARY_TEST("spec_verify: the emitted tokens follow the target's distribution", specVerifyDistribution) {
  std::mt19937 rng(seed());
  const uint32_t rows = 2000, k = 1, cols = 6;
  const std::vector<float> p0 = {0.05f, 0.3f, 0.0f, 0.25f, 0.15f, 0.25f}, p1 = {0.4f, 0.1f, 0.1f, 0.1f, 0.2f, 0.1f};
  const std::vector<float> q0 = {0.3f, 0.1f, 0.2f, 0.3f, 0.1f, 0.0f};
  for (bool draftProbs : {true, false}) {
    Verify v{rows, k, cols, {}, {}, {}, uint32_t(rng()), {}, draftProbs};
    for (uint32_t req = 0; req < rows; ++req) {
      v.target.insert(v.target.end(), p0.begin(), p0.end());
      v.target.insert(v.target.end(), p1.begin(), p1.end());
      if (draftProbs) v.q.insert(v.q.end(), q0.begin(), q0.end());
      v.draft.push_back(draftProbs ? drawFrom(rng, q0.data(), cols) : 3u);
    }
    Result got = run(r, Dtype::F32, v);
    const uint32_t accepted = check(Dtype::F32, v, got, draftProbs ? "distribution" : "distribution, no draft_probs");
    std::vector<double> first(cols, 0.0), second(cols, 0.0);
    for (uint32_t req = 0; req < rows; ++req) {
      first[got.out[req * 2]] += 1;
      if (got.emitted[req] == 2) second[got.out[req * 2 + 1]] += 1;
    }
    double chi2 = 0;
    CHECK_MESSAGE(followsP(first, p0, rows, chi2), "first tokens: chi-square " << chi2 << " (seed " << seed() << ")");
    CHECK_MESSAGE(followsP(second, p1, accepted, chi2), "second tokens: chi-square " << chi2 << " (seed " << seed() << ")");
    // Acceptance: sum min(p, q) with draft_probs (0.5 here), p(3) = 0.25 without; 6 sigma.
    const double rate = draftProbs ? 0.5 : 0.25, sigma = std::sqrt(rate * (1 - rate) / rows);
    CHECK_MESSAGE(std::abs(accepted / double(rows) - rate) < 6 * sigma, "acceptance " << accepted / double(rows));
  }
}
