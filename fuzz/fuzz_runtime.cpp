// Bundle bytes -> truenort::Bundle::load(ctx, bytes, {.eager = true}) on the simulated driver
// (libtruenort-sim.so of this build, docs/simulator.md) as the device: the runtime validates the
// bundle, selects code per kernel, binds launch rules and loads every kernel's module, which the
// simulator parses from the bundle's IR. No GPU and no CUDA driver are needed.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>

#include "truenort/truenort.h"

namespace {

std::optional<truenort::Context> context;

void fail(const truenort::Error& e) {
  std::fprintf(stderr, "fuzz_runtime: %s\n", e.describe().c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (truenort::Status st = truenort::use_driver(TRUENOC_BINARY_DIR "/lib/libtruenort-sim.so"); !st) fail(st.error());
  auto ctx = truenort::Context::create(0);
  if (!ctx) fail(ctx.error());
  context.emplace(std::move(ctx.value()));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto bundle = truenort::Bundle::load(*context, std::span<const uint8_t>(data, size), {.eager = true});
  if (bundle)
    for (const std::string& name : bundle->kernel_names()) (void)bundle->kernel(name);
  return 0;
}
