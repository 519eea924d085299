// Runs kernels of the library test specs (test/library/<family>.toml) the same way on two
// executors: the interpreter (the kernel built from the spec for sm_90, or for sm_90a when that
// is the spec's only target, through the build's own -O2 pipeline, launched with its launch rule
// and its tensor maps encoded from the rule as the runtime encodes them, races and
// uninitialised shared reads checked; at -O0 the results alone)
// and a GPU (the same spec built into test/library/<family>.tnb by ptxas, loaded and launched
// through the runtime). A kernel test is written once against Runner and registered for both
// with LIBRARY_TEST (the interpreter at -O2 and at -O0, and the GPU); the GPU half is in the
// "gpu" suite and skipped without a device. LIBRARY_GPU_TEST registers a test too big for the
// interpreter for the GPU alone.
//
//   LIBRARY_TEST("rmsnorm f32 odd sizes", rmsnormOdd) {
//     auto out = r.run(Call("norms", "rmsnorm_f32").buffer("x", x).buffer("y", y).scalar("rows", 3u) ...);
//     std::vector<float> got = out.get<float>("y");
//   }
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ir/Float16.h"

namespace tn::libtest {

// One launch of a spec kernel: a value for every parameter but the tmap ones (which the launch
// rule fills), by name. Buffers are copied in and read back after the launch; `misalign` shifts
// a buffer's start by that many bytes on the GPU
// (the interpreter binds every buffer at an aligned start, so it runs such calls unshifted).
class Call {
 public:
  struct Buffer {
    std::string name;
    std::vector<std::byte> bytes;
    uint32_t misalign = 0;
  };
  struct Scalar {
    std::string name;
    uint64_t bits;
  };

  Call(std::string spec, std::string kernel) : spec_(std::move(spec)), kernel_(std::move(kernel)) {}

  template <class T>
  Call& buffer(const std::string& name, const std::vector<T>& values, uint32_t misalign = 0) {
    static_assert(std::is_trivially_copyable_v<T>);
    Buffer b{name, std::vector<std::byte>(values.size() * sizeof(T)), misalign};
    if (!b.bytes.empty()) std::memcpy(b.bytes.data(), values.data(), b.bytes.size());
    buffers_.push_back(std::move(b));
    return *this;
  }
  // The value's bits; its C++ type must match the parameter (u32 <- uint32_t, f32 <- float).
  template <class T>
  Call& scalar(const std::string& name, T value) {
    static_assert(std::is_arithmetic_v<T>);
    uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    scalars_.push_back({name, bits});
    return *this;
  }

  // The target whose code the interpreter runs (a kernel whose code differs by target, mainloop =
  // "auto"): "sm_80", "sm_90a"; empty for sm_90 (sm_90a for a spec of sm_90a alone). A GPU runs
  // the code the runtime selects for it, whatever the call names.
  Call& target(std::string t) {
    target_ = std::move(t);
    return *this;
  }

  const std::string& spec() const { return spec_; }
  const std::string& kernel() const { return kernel_; }
  const std::string& target() const { return target_; }
  const std::vector<Buffer>& buffers() const { return buffers_; }
  const std::vector<Scalar>& scalars() const { return scalars_; }
  std::string describe() const;  // "norms/rmsnorm_f32(x[12 B], rows=3, ...)", with ":sm_80" after a named target

 private:
  std::string spec_, kernel_, target_;
  std::vector<Buffer> buffers_;
  std::vector<Scalar> scalars_;
};

// Every buffer's bytes after a launch.
class Outputs {
 public:
  void set(const std::string& name, std::vector<std::byte> bytes) { buffers_.emplace_back(name, std::move(bytes)); }
  template <class T>
  std::vector<T> get(const std::string& name) const {
    for (const auto& [n, b] : buffers_)
      if (n == name) {
        std::vector<T> out(b.size() / sizeof(T));
        if (!out.empty()) std::memcpy(out.data(), b.data(), out.size() * sizeof(T));
        return out;
      }
    FAIL("no buffer '" << name << "' in the outputs");
    return {};
  }

 private:
  std::vector<std::pair<std::string, std::vector<std::byte>>> buffers_;
};

class Runner {
 public:
  virtual ~Runner() = default;
  virtual const char* name() const = 0;  // "interp" or "gpu"
  // Launches the call and waits; a failed build, launch or fault fails the test (REQUIRE).
  virtual Outputs run(const Call& call) = 0;
  // Whether Call::buffer's misalign takes effect.
  virtual bool honoursMisalign() const = 0;
  // Whether large problems are cheap (a real GPU) or should be kept small (the interpreter and
  // the simulated GPU, which runs the interpreter).
  virtual bool fast() const = 0;
};

// The interpreter on the -O2 build (as `truenoc build` compiles it) or, with optimize = false,
// on the unoptimized kernel: both must meet the reference, which is how the library's kernels
// are checked for -O0/-O2 equivalence.
std::unique_ptr<Runner> interpRunner(bool optimize = true);
std::unique_ptr<Runner> gpuRunner();  // a runner on device 0; fails the test without one
// Thrown by the GPU runner for a spec the device cannot run (sm_90a alone on another GPU): the
// GPU test registered by LIBRARY_TEST or LIBRARY_GPU_TEST is then skipped with a message.
struct NotForThisDevice {
  std::string why;
};
bool noGpu();                         // for doctest::skip
// Whether device 0 is the simulated driver (docs/simulator.md): tests too big for the
// interpreter shrink what is not the point of the test there (never their checks).
bool simulatedGpu();

// ---- data and comparison ------------------------------------------------------------------

// A fresh seed per test run; TRUENOC_TEST_SEED=N replays a failure (printed on failure).
unsigned seed();

// n values uniform in [lo, hi).
std::vector<float> uniform(std::mt19937& rng, size_t n, float lo = -1.0f, float hi = 1.0f);

// The storage type of a test: values round-trip through it before the reference sees them.
enum class Dtype { F32, BF16, F16 };
const char* dtypeName(Dtype d);
size_t dtypeBytes(Dtype d);
// f32 values -> storage bytes (round to nearest even) and back.
std::vector<std::byte> encode(Dtype d, const std::vector<float>& v);
std::vector<float> decode(Dtype d, const std::vector<std::byte>& bytes);
// v with every element rounded to the storage type (what the kernel actually reads).
std::vector<float> roundTo(Dtype d, std::vector<float> v);
// The unit roundoff of the storage type: 2^-24 (f32), 2^-8 (bf16: 8 significant bits), 2^-11 (f16).
double roundoff(Dtype d);

// The activations in double (kernels/Library.h has the kernels' f32 forms), and how many f32 ulps
// those forms may be off, relative to the result, their last rounding included
// (test/library_elementwise_test.cpp checks them): silu; gelu's tanh form, as x * sigmoid(2u) (exact
// where 1 + tanh(u) would cancel); gelu's erf form.
double siluRef(double x);
double siluUlps(double x);
double geluTanhRef(double x);
double geluTanhUlps(double x);
double geluErfRef(double x);
double geluErfUlps(double x);
// gpt-oss's clamped SwiGLU (glu = "swiglu_oai"): the activated input clamped above at 7 into
// x sigmoid(1.702 x), and the other one clamped to [-7, 7] plus 1 (NaN stays NaN in both).
double oaiActRef(double x);
double oaiActUlps(double x);
double oaiLinearRef(double x);

// Checks |got[i] - want[i]| <= abs + rel * |want[i]| for every i, with NaN matching NaN and
// infinities matching exactly. Reports the first few mismatches with their index and the count.
void expectClose(const std::vector<float>& got, const std::vector<double>& want, double abs, double rel,
                 const std::string& what);

// The targets a test of a kernel whose code differs by target (mainloop = "auto") runs: each of
// `targets` on the interpreter, which runs the code a call names (Call::target); on a GPU once,
// "" (the code the runtime selects for the device).
std::vector<std::string> codeTargets(const Runner& r, std::vector<std::string> targets);

// Runs a test body on the GPU runner; a NotForThisDevice skips it with a message.
inline void runOnGpu(void (*body)(Runner&)) {
  auto runner = gpuRunner();
  try {
    body(*runner);
  } catch (const NotForThisDevice& skip) {
    MESSAGE("skipped: " << skip.why);
  }
}

}  // namespace tn::libtest

// Registers one kernel test body for the interpreter and for the GPU (suite "gpu").
#define LIBRARY_TEST(title, fn)                                                                       \
  static void fn(tn::libtest::Runner& r);                                                             \
  TEST_CASE("library: " title) {                                                                      \
    auto runner = tn::libtest::interpRunner();                                                        \
    fn(*runner);                                                                                      \
  }                                                                                                   \
  TEST_CASE("library -O0: " title) {                                                                  \
    auto runner = tn::libtest::interpRunner(false);                                                   \
    fn(*runner);                                                                                      \
  }                                                                                                   \
  TEST_CASE("gpu library: " title * doctest::test_suite("gpu") * doctest::skip(tn::libtest::noGpu())) { \
    tn::libtest::runOnGpu(fn);                                                                        \
  }                                                                                                   \
  static void fn([[maybe_unused]] tn::libtest::Runner& r)

// A test too big for the interpreter: registered for the GPU only (suite "gpu").
#define LIBRARY_GPU_TEST(title, fn)                                                                   \
  static void fn(tn::libtest::Runner& r);                                                             \
  TEST_CASE("gpu library: " title * doctest::test_suite("gpu") * doctest::skip(tn::libtest::noGpu())) { \
    tn::libtest::runOnGpu(fn);                                                                        \
  }                                                                                                   \
  static void fn([[maybe_unused]] tn::libtest::Runner& r)
