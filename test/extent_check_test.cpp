// The runtime's extent checks (truenort::set_extent_checks): before a launch, each pointer's
// buffer against the elements its parameter's extent says (GPU-labelled: it launches; ctest
// gpu-sim runs it on the simulator, where every other launch is checked too).
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "truenort/truenort.h"

#ifdef TRUENOC_HAVE_EMBEDDED_DECODE
#include "decode_embed.hpp"

namespace {

bool noDevice() {
  static bool none = !truenort::Context::create(0).ok();
  return none;
}

// Restores the process's setting at the end of a test.
struct ChecksAs {
  bool before = truenort::extent_checks();
  explicit ChecksAs(bool on) { truenort::set_extent_checks(on); }
  ~ChecksAs() { truenort::set_extent_checks(before); }
};

}  // namespace

TEST_SUITE("gpu") {
TEST_CASE("gpu: extent checks refuse a launch whose buffer holds fewer elements than the bundle's extent" *
          doctest::skip(noDevice())) {
  auto ctx = truenort::Context::create(0);
  REQUIRE(ctx.ok());
  auto kernels = decode_embed::Kernels::load(ctx.value());
  REQUIRE(kernels.ok());
  auto x = truenort::DeviceBuffer<float>::allocate(ctx.value(), 64);
  auto y = truenort::DeviceBuffer<float>::allocate(ctx.value(), 32);  // its pool block has 512 bytes
  REQUIRE(x.ok());
  REQUIRE(y.ok());
  REQUIRE(x.value().upload(std::vector<float>(64, 0.5f)).ok());
  ChecksAs on(true);
  CHECK(truenort::extent_checks());
  // Bare pointers: the generated code knows no counts (a DeviceBuffer's it checks itself), so
  // what follows is the runtime's check.
  const auto* px = reinterpret_cast<const float*>(static_cast<std::uintptr_t>(x.value().ptr()));
  auto* py = reinterpret_cast<float*>(static_cast<std::uintptr_t>(y.value().ptr()));

  // gelu's x and y have extent n: y holds 32 of the 64, and the pool's rounding does not count.
  truenort::Status st = kernels.value().gelu(nullptr, px, py, 64u);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == truenort::Errc::InvalidArgument);
  CHECK(st.error().kernel == "gelu");
  CHECK(st.error().message ==
        "argument 'y' needs 256 bytes (n = 64 f32 elements), its allocation has 128 from the pointer on");
  // Within both buffers: it launches.
  CHECK(kernels.value().gelu(nullptr, px, py, 32u).ok());
  // A pointer inside a buffer has what is left after it: 24 elements of x from element 40.
  const float* tail = px + 40;
  st = kernels.value().gelu(nullptr, tail, py, 32u);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message ==
        "argument 'x' needs 128 bytes (n = 32 f32 elements), its allocation has 96 from the pointer on");
  CHECK(kernels.value().gelu(nullptr, tail, py, 24u).ok());
  // Empty launches are not checked (n = 0 launches nothing).
  CHECK(kernels.value().gelu(nullptr, px, py, 0u).ok());
  REQUIRE(ctx.value().synchronize().ok());

  // Off: no lookups (a launch within the buffers, as on a GPU an overrun would not be caught).
  truenort::set_extent_checks(false);
  CHECK_FALSE(truenort::extent_checks());
  CHECK(kernels.value().gelu(nullptr, px, py, 32u).ok());
  REQUIRE(ctx.value().synchronize().ok());
}
}
#endif
