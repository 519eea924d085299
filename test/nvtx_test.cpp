// NVTX ranges around launches (truenort/Nvtx.h): off by default, an error value for a library
// that is missing, and with a stand-in NVTX library (test/fake_nvtx.cpp) one range per launch
// named after the kernel (GPU-labelled: it launches; ctest gpu-sim runs it on the simulator).
#include <doctest/doctest.h>
#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "truenort/truenort.h"

TEST_CASE("runtime: NVTX ranges are off by default, and a missing NVTX library is an error") {
  if (!std::getenv("TRUENORT_NVTX")) CHECK_FALSE(truenort::nvtx_enabled());
  truenort::Status st = truenort::enable_nvtx("/nonexistent/libnvToolsExt.so.1");
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == truenort::Errc::InvalidArgument);
  CHECK(st.error().message.find("no NVTX library could be loaded (/nonexistent/libnvToolsExt.so.1") == 0);
  st = truenort::enable_nvtx(TRUENOC_SIM_DRIVER);  // a library without the NVTX entry points
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("has no nvtxRangePushA/nvtxRangePop") != std::string::npos);
  truenort::disable_nvtx();
  CHECK_FALSE(truenort::nvtx_enabled());
}

#ifdef TRUENOC_HAVE_EMBEDDED_DECODE
#include "decode_embed.hpp"

namespace {
bool noDevice() {
  static bool none = !truenort::Context::create(0).ok();
  return none;
}
}  // namespace

TEST_SUITE("gpu") {
TEST_CASE("gpu: with NVTX on, each launch is a range named after its kernel" * doctest::skip(noDevice())) {
  auto ctx = truenort::Context::create(0);
  REQUIRE(ctx.ok());
  auto kernels = decode_embed::Kernels::load(ctx.value());
  REQUIRE(kernels.ok());
  auto a = truenort::DeviceBuffer<float>::allocate(ctx.value(), 64);
  auto y = truenort::DeviceBuffer<float>::allocate(ctx.value(), 64);  // gelu reads x through ld.nc: not in place
  REQUIRE(a.ok());
  REQUIRE(y.ok());
  // The kernels read it: defined values (compute-sanitizer's initcheck reported the reads).
  REQUIRE(a.value().upload(std::vector<float>(64, 0.5f)).ok());
  void* fake = dlopen(TRUENOC_FAKE_NVTX, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(fake != nullptr);
  auto take = reinterpret_cast<const char* (*)()>(dlsym(fake, "fake_nvtx_take"));
  const bool found = take != nullptr;
  REQUIRE(found);
  take();

  REQUIRE(truenort::enable_nvtx(TRUENOC_FAKE_NVTX).ok());
  CHECK(truenort::nvtx_enabled());
  REQUIRE(kernels.value().vadd(nullptr, a.value(), a.value(), a.value(), 64u).ok());
  REQUIRE(kernels.value().gelu(nullptr, a.value(), y.value(), 64u).ok());
  REQUIRE(kernels.value().vadd(nullptr, a.value(), a.value(), a.value(), 0u).ok());  // empty: no launch, no range
  REQUIRE(ctx.value().synchronize().ok());
  CHECK(std::string(take()) == "push vadd;pop;push gelu;pop;");

  truenort::disable_nvtx();
  REQUIRE(kernels.value().vadd(nullptr, a.value(), a.value(), a.value(), 64u).ok());
  REQUIRE(ctx.value().synchronize().ok());
  CHECK(std::string(take()).empty());
}
}
#endif
