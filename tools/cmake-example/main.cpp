// Uses the generated header without a GPU: a launcher that records each launch stands in for
// the runtime, and the program checks the grids the launch rules computed. Then, when a device
// is there (a GPU, or the simulated driver: TRUENORT_DRIVER=sim, docs/simulator.md), it runs the
// same launch functions on it through libtruenort and checks the results against the CPU.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "decode.hpp"
#include "example_kernels.hpp"

namespace {

struct Recorded {
  std::string kernel;
  unsigned grid = 0, block = 0, args = 0;
};

int record(void* user, const truenoc::embed::Launch& l) {
  static_cast<std::vector<Recorded>*>(user)->push_back({l.kernel, l.grid[0], l.block[0], l.num_args});
  return 0;
}

#ifdef TRUENOC_HAVE_RUNTIME
// vadd and scale on the device, checked element by element; 0 when every value matches.
int runOnDevice(const truenort::Context& ctx) {
  const uint32_t n = 1000;
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
  std::vector<float> a(n), b(n), sum(n), scaled(n);
  for (uint32_t i = 0; i < n; ++i) {
    a[i] = dist(rng);
    b[i] = dist(rng);
  }
  auto stream = truenort::Stream::create(ctx);
  auto da = truenort::DeviceBuffer<float>::allocate(ctx, n);
  auto db = truenort::DeviceBuffer<float>::allocate(ctx, n);
  auto dc = truenort::DeviceBuffer<float>::allocate(ctx, n);
  if (!stream || !da || !db || !dc || !da.value().upload(a) || !db.value().upload(b)) {
    std::fprintf(stderr, "device setup failed\n");
    return 1;
  }
  // The bundle is loaded once; each method launches one kernel and returns a Status with the
  // error's message. Device buffers go in as they are: inputs as const, outputs mutable.
  auto kernels = example_kernels::Kernels::load(ctx);
  if (!kernels) {
    std::fprintf(stderr, "loading the bundle failed: %s\n", kernels.error().describe().c_str());
    return 1;
  }
  const truenort::Stream& s = stream.value();
  truenort::Status st = kernels.value().vadd(s, da.value(), db.value(), dc.value(), n);
  if (st) st = s.synchronize();
  if (st) st = dc.value().download(sum);
  if (st) st = kernels.value().scale(s, dc.value(), da.value(), 0.5f, n);
  if (st) st = s.synchronize();
  if (st) st = da.value().download(scaled);
  if (!st) {
    std::fprintf(stderr, "device run failed: %s\n", st.error().describe().c_str());
    return 1;
  }
  for (uint32_t i = 0; i < n; ++i)
    if (sum[i] != a[i] + b[i] || scaled[i] != (a[i] + b[i]) * 0.5f) {
      std::fprintf(stderr, "wrong value at %u: %g, %g\n", i, sum[i], scaled[i]);
      return 1;
    }
  std::printf("device: vadd and scale match the CPU on %u elements (%s)\n", n, ctx.name().c_str());
  return 0;
}
#endif

}  // namespace

int main() {
  // The embedded bundle starts with the .tnb magic.
  const unsigned char magic[8] = {0x89, 'T', 'N', 'B', '\r', '\n', 0x1a, '\n'};
  if (example_kernels::bundle_size() < sizeof magic || std::memcmp(example_kernels::bundle_bytes(), magic, sizeof magic) != 0) {
    std::fprintf(stderr, "the embedded bundle has no .tnb magic\n");
    return 1;
  }
  std::vector<Recorded> launches;
  truenoc::embed::Launcher launcher{record, &launches};
  float* a = nullptr;  // device pointers in a real program (typed: const float* for inputs)
  int rc = example_kernels::vadd(launcher, nullptr, a, a, a, 1000u);
  rc |= example_kernels::scale(launcher, nullptr, a, a, 2.0f, 1000u);
  rc |= example_kernels::vadd(launcher, nullptr, a, a, a, 0u);  // empty grid: nothing launched
  // Library kernels of the decode bundle: one block per row, one warp per short softmax row.
  truenoc::bf16* h = nullptr;  // this rmsnorm reads and writes bf16 rows
  rc |= decode::rmsnorm(launcher, nullptr, h, h, h, 4u, 4096u, 1e-5f);
  rc |= decode::softmax(launcher, nullptr, a, a, 20u, 100u);
  rc |= decode::gemv_bf16(launcher, nullptr, h, a, a, 14336u, 4096u);  // bf16 weights, f32 x and y
  if (rc != 0 || launches.size() != 5) {
    std::fprintf(stderr, "unexpected launch results\n");
    return 1;
  }
  for (const Recorded& r : launches) std::printf("%s grid %u block %u args %u\n", r.kernel.c_str(), r.grid, r.block, r.args);
#ifdef TRUENOC_HAVE_RUNTIME
  // truenoc_add_bundle linked libtruenort: on a GPU (or the simulated driver) the Kernels object
  // runs the same kernels for real. Without a driver this is an error value, not a crash.
  auto ctx = truenort::Context::create(0);
  std::printf("runtime: linked (%s)\n", ctx.ok() ? "device found" : "no device");
  if (ctx.ok()) return runOnDevice(ctx.value());
#endif
  return 0;
}
