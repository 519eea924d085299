// Runs this project's own saxpy (built by its generator) and the built-in vadd through
// libtruenort on the device -- a GPU, or the simulated driver (TRUENORT_DRIVER=sim,
// docs/simulator.md) -- and checks every element against the CPU.
#include <cmath>
#include <cstdio>
#include <vector>

#include "app_kernels.hpp"

int main() {
  auto ctx = truenort::Context::create(0);
  if (!ctx) {
    std::printf("no device: %s\n", ctx.error().describe().c_str());
    return 0;
  }
  const uint32_t n = 1000;
  const float a = 0.75f;
  std::vector<float> x(n), y(n), sum(n), out(n);
  for (uint32_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 97) * 0.5f - 20.0f;
    y[i] = static_cast<float>(i % 13) - 6.0f;
  }
  auto stream = truenort::Stream::create(ctx.value());
  auto dx = truenort::DeviceBuffer<float>::allocate(ctx.value(), n);
  auto dy = truenort::DeviceBuffer<float>::allocate(ctx.value(), n);
  auto dsum = truenort::DeviceBuffer<float>::allocate(ctx.value(), n);
  auto kernels = app_kernels::Kernels::load(ctx.value());
  if (!stream || !dx || !dy || !dsum || !kernels || !dx.value().upload(x) || !dy.value().upload(y)) {
    std::fprintf(stderr, "device setup failed\n");
    return 1;
  }
  const truenort::Stream& s = stream.value();
  truenort::Status st = kernels.value().vadd(s, dx.value(), dy.value(), dsum.value(), n);
  if (st) st = kernels.value().saxpy(s, dx.value(), dy.value(), a, n);
  if (st) st = s.synchronize();
  if (st) st = dsum.value().download(sum);
  if (st) st = dy.value().download(out);
  if (!st) {
    std::fprintf(stderr, "device run failed: %s\n", st.error().describe().c_str());
    return 1;
  }
  for (uint32_t i = 0; i < n; ++i)
    if (sum[i] != x[i] + y[i] || out[i] != std::fma(a, x[i], y[i])) {
      std::fprintf(stderr, "wrong value at %u: vadd %g, saxpy %g\n", i, sum[i], out[i]);
      return 1;
    }
  std::printf("device: saxpy (generator template) and vadd match the CPU on %u elements (%s)\n", n,
              ctx.value().name().c_str());
  return 0;
}
