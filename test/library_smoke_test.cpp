// The library runner itself (test/library_harness.h) on the simplest template, vadd: a
// spec kernel built, launched by its launch rule and read back, on every executor.
#include "library_harness.h"

using namespace tn::libtest;

LIBRARY_TEST("smoke vadd", smokeVadd) {
  std::mt19937 rng(seed());
  for (uint32_t n : {1u, 31u, 4097u}) {
    auto a = uniform(rng, n), b = uniform(rng, n);
    std::vector<float> c(n, 0.0f);
    Outputs out = r.run(Call("smoke", "vadd").buffer("a", a).buffer("b", b).buffer("c", c).scalar("n", n));
    std::vector<double> want(n);
    for (uint32_t i = 0; i < n; ++i) want[i] = double(a[i]) + double(b[i]);
    expectClose(out.get<float>("c"), want, 0, 1e-7, "vadd n=" + std::to_string(n));
  }
}
