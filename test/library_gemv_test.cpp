// gemv (kernels/Gemv.cpp, spec test/library/gemv.toml) with f32 and bf16 weights against a
// double-precision reference: shapes that take the vector main loop, its tail and the scalar
// path, k = 0 and m = 0, and (on the GPU) misaligned w and x.
#include "library_harness.h"

using namespace tn::libtest;

namespace {

struct Shape {
  uint32_t m, k;
};

// y = W x for one (m, k): W stored as `weight`, x and y f32; `misalign` shifts w and x on the
// GPU so that the scalar path runs even where k would allow vectors.
void checkGemv(Runner& r, std::mt19937& rng, Dtype weight, Shape s, uint32_t misalign = 0) {
  std::vector<float> w = roundTo(weight, uniform(rng, size_t(s.m) * s.k));
  std::vector<float> x = uniform(rng, s.k);
  std::vector<float> y(s.m, -7.0f);  // every row must be overwritten
  std::string kernel = std::string("gemv_") + dtypeName(weight);
  Call call("gemv", kernel);
  if (weight == Dtype::F32) call.buffer("w", w, misalign);
  else call.buffer("w", encode(weight, w), misalign);
  call.buffer("x", x, misalign).buffer("y", y).scalar("m", s.m).scalar("k", s.k);
  Outputs out = r.run(call);
  std::vector<float> got = out.get<float>("y");
  REQUIRE(got.size() == s.m);
  std::string what = kernel + " m=" + std::to_string(s.m) + " k=" + std::to_string(s.k) +
                     " misalign=" + std::to_string(misalign);
  // f32 accumulation in any order (per-lane fma chains, then a warp tree): a product passes
  // through at most k fmas/adds with nonzero operands plus k - 1 additions of partial sums, so
  // |error| <= ~2k * 2^-24 * sum|w x| (first order), checked per row as an absolute bound.
  for (uint32_t i = 0; i < s.m; ++i) {
    double want = 0, mag = 0;
    for (uint32_t j = 0; j < s.k; ++j) {
      double p = double(w[size_t(i) * s.k + j]) * double(x[j]);
      want += p;
      mag += std::fabs(p);
    }
    double tol = 2.0 * std::max<uint32_t>(s.k, 1) * std::ldexp(1.0, -24) * mag;
    expectClose({got[i]}, {want}, tol, 0, what + " row " + std::to_string(i));
  }
}

const Shape kShapes[] = {{1, 1}, {3, 31}, {33, 33}, {5, 4097}, {64, 1000}, {7, 4096}, {9, 1032}};

}  // namespace

LIBRARY_TEST("gemv f32 shapes", gemvF32Shapes) {
  std::mt19937 rng(seed());
  for (Shape s : kShapes) checkGemv(r, rng, Dtype::F32, s);
  checkGemv(r, rng, Dtype::F32, {3, 0});  // k = 0: y = 0
  if (r.fast()) checkGemv(r, rng, Dtype::F32, {1000, 8192});
}

LIBRARY_TEST("gemv bf16 shapes", gemvBf16Shapes) {
  std::mt19937 rng(seed());
  for (Shape s : kShapes) checkGemv(r, rng, Dtype::BF16, s);
  checkGemv(r, rng, Dtype::BF16, {3, 0});
  if (r.fast()) checkGemv(r, rng, Dtype::BF16, {1000, 4096});
}

LIBRARY_TEST("gemv misaligned pointers take the scalar path", gemvMisaligned) {
  std::mt19937 rng(seed());
  for (Dtype d : {Dtype::F32, Dtype::BF16}) {
    checkGemv(r, rng, d, {33, 1024}, 4);
    checkGemv(r, rng, d, {5, 4097}, 4);
  }
}

LIBRARY_TEST("gemv m = 0 launches nothing", gemvEmpty) {
  std::mt19937 rng(seed());
  for (Dtype d : {Dtype::F32, Dtype::BF16}) {
    Call call("gemv", std::string("gemv_") + dtypeName(d));
    std::vector<float> x = uniform(rng, 16), y = {5.0f};  // y untouched
    if (d == Dtype::F32) call.buffer("w", std::vector<float>{});
    else call.buffer("w", std::vector<uint16_t>{});
    Outputs out = r.run(call.buffer("x", x).buffer("y", y).scalar("m", 0u).scalar("k", 16u));
    CHECK(out.get<float>("y") == std::vector<float>{5.0f});
  }
}
