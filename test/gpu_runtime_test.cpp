// GPU-labelled runtime tests (test suite "gpu"). Without a usable CUDA device they are skipped,
// and doctest's summary shows how many. tools/gpu-check.sh runs them on a GPU machine.
// The bundles are built from test/gpu/gpu_test.toml and examples/decode.toml at build time.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "backends/bundle/Bundle.h"
#include "test_paths.h"
#include "truenort/Bundle.h"

using namespace truenort;

namespace {

// One context for the whole binary; created on first use.
const Context* gpu() {
  static Result<Context> ctx = Context::create(0);
  return ctx.ok() ? &ctx.value() : nullptr;
}
bool noGpu() { return gpu() == nullptr; }
// Tests of real concurrency or timing cannot pass on the simulated driver, which runs work when
// it is enqueued; they skip themselves there with a warning. Tests of what only the simulator
// reports run only there.
bool notSimulated() { return noGpu() || !gpu()->simulated(); }

std::string gpuTestBundle() { return tn::testpaths::inBuild("test/gpu_test.tnb"); }
std::string decodeBundle() { return tn::testpaths::inBuild("test/decode.tnb"); }
std::string archBundle() { return tn::testpaths::inBuild("test/arch_specific.tnb"); }

Bundle loadBundle(const std::string& path, LoadOptions opts = {}) {
  auto b = Bundle::load_file(*gpu(), path, opts);
  if (!b) FAIL("loading ", path, ": ", b.error().describe());
  return std::move(b.value());
}

template <class T>
DeviceBuffer<T> deviceBuffer(size_t n) {
  auto b = DeviceBuffer<T>::allocate(*gpu(), n);
  if (!b) FAIL(b.error().describe());
  return std::move(b.value());
}

// The driver modules that loading every kernel of the bundle at `path` needs: one per payload of
// the selected entries. A bundle with one module per target has one cubin for all the kernels of
// a target; the simulator loads each kernel's own IR.
size_t modulesNeeded(const Bundle& b, const std::string& path) {
  auto bytes = Bundle::read_file(path);
  REQUIRE(bytes.ok());
  auto r = tn::bundle::Reader::open(bytes.value());
  REQUIRE(r);
  const auto kind = gpu()->simulated() ? tn::bundle::PayloadKind::Ir : tn::bundle::PayloadKind::Cubin;
  std::set<uint64_t> payloads;
  for (const std::string& name : b.kernel_names()) {
    auto k = b.kernel(name);
    REQUIRE(k.ok());
    int t = r->manifest().targetIndex(k.value().target());
    REQUIRE(t >= 0);
    const tn::bundle::Entry* e = k.value().info().find(static_cast<uint32_t>(t), kind);
    REQUIRE(e);
    payloads.insert(e->offset);
  }
  return payloads.size();
}

Stream stream() {
  auto s = Stream::create(*gpu());
  if (!s) FAIL(s.error().describe());
  return std::move(s.value());
}

#define REQUIRE_OK(expr)                                   \
  do {                                                     \
    auto st_ = (expr);                                     \
    if (!st_.ok()) FAIL(#expr, ": ", st_.error().describe()); \
  } while (0)

// Launches fill(out, value, n) on a fresh buffer and checks that every element holds value.
void checkFill(const Kernel& fill, const Stream& s, uint32_t value, uint32_t n) {
  auto out = deviceBuffer<uint32_t>(n);
  REQUIRE_OK(fill.launch(s, out, value, n));
  REQUIRE_OK(s.synchronize());
  std::vector<uint32_t> host(n);
  REQUIRE_OK(out.download(host));
  CHECK(std::count(host.begin(), host.end(), value) == n);
}

}  // namespace

TEST_SUITE("gpu") {

TEST_CASE("gpu: H1 the bundle loads with zero JIT" * doctest::skip(noGpu())) {
  Bundle b = loadBundle(gpuTestBundle(), {.allow_jit = false, .eager = true});
  auto s = b.stats();
  MESSAGE("device " << gpu()->name() << " sm_" << gpu()->sm() << ": " << s.modules_loaded << " modules in "
                    << s.load_ms << " ms in cuModuleLoadData, " << s.function_ms << " ms in cuModuleGetFunction");
  CHECK(s.modules_loaded == modulesNeeded(b, gpuTestBundle()));
  CHECK(b.jit_events() == 0);
}

TEST_CASE("gpu: an sm_90 device runs the sm_90a cubin of a bundle that also has sm_90" * doctest::skip(noGpu())) {
  Bundle b = loadBundle(archBundle(), {.allow_jit = false, .eager = true});
  auto fill = b.kernel("fill");
  REQUIRE(fill.ok());
  MESSAGE("device sm_" << gpu()->sm() << " runs " << fill.value().target().name());
  CHECK_FALSE(fill.value().is_jit());
  if (gpu()->sm() == 90) CHECK(fill.value().target() == Target{90, true});
  else CHECK_FALSE(fill.value().target().archSpecific);
  Stream s = stream();
  checkFill(fill.value(), s, 0x90A90Au, 4099);
}

TEST_CASE("gpu: H2 a launch writes known values; H3 copies are byte-exact" * doctest::skip(noGpu())) {
  Bundle b = loadBundle(gpuTestBundle());
  auto fill = b.kernel("fill");
  REQUIRE(fill.ok());
  Stream s = stream();
  checkFill(fill.value(), s, 0xC0FFEEu, 100003);

  std::mt19937 rng(std::random_device{}());
  std::vector<uint8_t> bytes(1 << 20), back(1 << 20);
  for (auto& x : bytes) x = static_cast<uint8_t>(rng());
  auto dev = deviceBuffer<uint8_t>(bytes.size());
  REQUIRE_OK(dev.upload(bytes));
  REQUIRE_OK(dev.download(back));
  CHECK(std::memcmp(bytes.data(), back.data(), bytes.size()) == 0);
  auto pinned = HostBuffer<uint8_t>::allocate(*gpu(), bytes.size());
  REQUIRE(pinned.ok());
  REQUIRE_OK(dev.download_async(pinned.value().span(), s));
  REQUIRE_OK(s.synchronize());
  CHECK(std::memcmp(bytes.data(), pinned.value().data(), bytes.size()) == 0);
}

TEST_CASE("gpu: H5 matmul matches a CPU reference" * doctest::skip(noGpu())) {
  Bundle b = loadBundle(gpuTestBundle());
  auto mm = b.kernel("matmul");
  REQUIRE(mm.ok());
  const uint32_t m = 67, n = 45, k = 33;
  const unsigned seed = std::random_device{}();
  INFO("seed = " << seed);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> a(m * k), bm(k * n), c(m * n);
  for (auto& x : a) x = dist(rng);
  for (auto& x : bm) x = dist(rng);
  auto da = deviceBuffer<float>(a.size()), db = deviceBuffer<float>(bm.size()), dc = deviceBuffer<float>(c.size());
  REQUIRE_OK(da.upload(a));
  REQUIRE_OK(db.upload(bm));
  Stream s = stream();
  REQUIRE_OK(mm.value().launch(s, da, db, dc, m, n, k));
  REQUIRE_OK(s.synchronize());
  REQUIRE_OK(dc.download(c));
  // f32 fma accumulation over k = 33 terms of magnitude <= 1: |error| <= k * 2^-23 * sum|a*b|.
  for (uint32_t r = 0; r < m; ++r)
    for (uint32_t col = 0; col < n; ++col) {
      double ref = 0, mag = 0;
      for (uint32_t i = 0; i < k; ++i) {
        ref += double(a[r * k + i]) * bm[i * n + col];
        mag += std::fabs(double(a[r * k + i]) * bm[i * n + col]);
      }
      CHECK(std::fabs(c[r * n + col] - ref) <= k * 0x1p-23 * mag + 1e-30);
    }
}

TEST_CASE("gpu: H9 an impossible allocation is an error and the context still works" * doctest::skip(noGpu())) {
  auto huge = DeviceBuffer<uint8_t>::allocate(*gpu(), size_t{1} << 50);
  REQUIRE_FALSE(huge.ok());
  CHECK(huge.error().code == Errc::OutOfMemory);
  CHECK(huge.error().cuda_name == "CUDA_ERROR_OUT_OF_MEMORY");
  Bundle b = loadBundle(gpuTestBundle());
  auto fill = b.kernel("fill");
  REQUIRE(fill.ok());
  Stream s = stream();
  auto out = deviceBuffer<uint32_t>(1000);
  REQUIRE_OK(fill.value().launch(s, out, 7u, 1000u));
  REQUIRE_OK(s.synchronize());
  std::vector<uint32_t> host(1000);
  REQUIRE_OK(out.download(host));
  CHECK(host[999] == 7u);
}

TEST_CASE("gpu: H10 independent streams overlap" * doctest::skip(noGpu())) {
  if (gpu()->simulated()) {
    // doctest's skipped count mixes this with the filtered-out tests: say it where it shows.
    WARN_MESSAGE(false, "H10 skipped: the simulated driver runs one kernel at a time");
    return;
  }
  // wait_flag (stream 1) can only see the flag that set_flag (stream 2, launched after it) sets
  // if the two kernels run at the same time.
  Bundle b = loadBundle(gpuTestBundle());
  auto wait = b.kernel("wait_flag");
  auto set = b.kernel("set_flag");
  REQUIRE(wait.ok());
  REQUIRE(set.ok());
  Stream s1 = stream(), s2 = stream();
  auto flag = deviceBuffer<uint32_t>(1), seen = deviceBuffer<uint32_t>(1);
  const uint32_t zero[1] = {0}, sentinel[1] = {2};
  REQUIRE_OK(flag.upload(zero));
  REQUIRE_OK(seen.upload(sentinel));
  REQUIRE_OK(wait.value().launch(s1, flag, seen, 100000000u));
  REQUIRE_OK(set.value().launch(s2, flag));
  REQUIRE_OK(s1.synchronize());
  REQUIRE_OK(s2.synchronize());
  uint32_t result[1] = {9};
  REQUIRE_OK(seen.download(result));
  CHECK(result[0] == 1u);
}

TEST_CASE("gpu: H13 four threads share one context, 1000 launches each" * doctest::skip(noGpu())) {
  Bundle b = loadBundle(gpuTestBundle());
  auto fill = b.kernel("fill");
  REQUIRE(fill.ok());
  const uint32_t n = 4096;
  std::vector<std::string> failures(4);
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      auto s = Stream::create(*gpu());
      auto out = DeviceBuffer<uint32_t>::allocate(*gpu(), n);
      if (!s || !out) {
        failures[t] = "setup failed";
        return;
      }
      for (uint32_t i = 0; i < 1000; ++i)
        if (Status st = fill.value().launch(s.value(), out.value(), t * 1000 + i, n); !st) {
          failures[t] = st.error().describe();
          return;
        }
      std::vector<uint32_t> host(n);
      if (Status st = s.value().synchronize(); !st) failures[t] = st.error().describe();
      else if (Status d = out.value().download(host); !d) failures[t] = d.error().describe();
      else if (std::count(host.begin(), host.end(), t * 1000 + 999) != n) failures[t] = "wrong values";
    });
  for (auto& th : threads) th.join();
  for (uint32_t t = 0; t < 4; ++t) CHECK_MESSAGE(failures[t].empty(), "thread " << t << ": " << failures[t]);
}

TEST_CASE("gpu: every kernel of examples/decode.toml loads and launches with zero JIT" * doctest::skip(noGpu())) {
  // Every pointer argument gets a zeroed 1 MB scratch buffer of its own (aliased arguments would
  // race where a kernel writes one and reads another) and every scalar the value 1, so each
  // kernel runs a minimal problem; the point is loading and launching every kernel's cubin.
  Bundle b = loadBundle(decodeBundle());
  Stream s = stream();
  std::vector<DeviceBuffer<uint8_t>> scratch;
  for (const std::string& name : b.kernel_names()) {
    INFO("kernel " << name);
    auto k = b.kernel(name);
    REQUIRE(k.ok());
    std::vector<Arg> args;
    size_t pointers = 0;
    for (const ParamInfo& p : k.value().signature()) {
      if (p.kind == Arg::Kind::Pointer && pointers == scratch.size()) {
        scratch.push_back(deviceBuffer<uint8_t>(1 << 20));
        REQUIRE_OK(scratch.back().upload(std::vector<uint8_t>(1 << 20)));
      }
      Arg a = p.kind == Arg::Kind::Pointer ? arg(scratch[pointers++].ptr()) : Arg{p.kind, 1};
      if (p.kind == Arg::Kind::F32) a = arg(1.0f);
      if (p.kind == Arg::Kind::F64) a = arg(1.0);
      args.push_back(a);
    }
    REQUIRE_OK(k.value().launch_args(s, args));
  }
  REQUIRE_OK(s.synchronize());
  CHECK(b.stats().modules_loaded == modulesNeeded(b, decodeBundle()));
  // One module per target: on a GPU the kernels' cubins come from one or two modules, not one each.
  if (!gpu()->simulated()) CHECK(b.stats().modules_loaded <= 2);
  CHECK(b.jit_events() == 0);
}

TEST_CASE("gpu: an out-of-bounds store fails its launch with an illegal address naming thread, block and instruction" *
          doctest::skip(notSimulated())) {
  Bundle b = loadBundle(gpuTestBundle());
  auto broken = b.kernel("fill_past_end");
  REQUIRE(broken.ok());
  Stream s = stream();
  const uint32_t n = 1024;  // 4096 bytes: the pool's size class, so out[n] is outside the allocation
  auto out = deviceBuffer<uint32_t>(n);
  Status st = broken.value().launch(s, out, 7u, n);
  REQUIRE_FALSE(st.ok());
  const Error& e = st.error();
  CHECK(e.code == Errc::Cuda);
  CHECK(e.cuda_name == "CUDA_ERROR_ILLEGAL_ADDRESS");
  CHECK(e.kernel == "fill_past_end");
  const std::string text = e.describe();
  INFO(text);
  const std::string target = broken.value().target().name();
  // file:line:col of the store in the kernel's IR as the bundle carries it
  // (`truenoc inspect --extract fill_past_end:TARGET:ir` writes that file).
  CHECK(text.find("fill_past_end." + target + ".tir:") != std::string::npos);
  CHECK(text.find(": error: out-of-bounds st.global of 4 bytes at address ") != std::string::npos);
  CHECK(text.find(", 4 bytes past the end of the 4096-byte allocation at ") != std::string::npos);
  CHECK(text.find("in kernel 'fill_past_end', block (4,0,0) thread (0,0,0)") != std::string::npos);
  // The context still works: the fault was the launch's, not the simulator's.
  auto fill = b.kernel("fill");
  REQUIRE(fill.ok());
  checkFill(fill.value(), s, 3u, n);
}

TEST_CASE("gpu: a bundle without IR is refused by the simulated driver with the reason" * doctest::skip(notSimulated())) {
  tn::bundle::BundleInput in;
  in.name = "no_ir";
  in.targets = {Target{90, false}};
  in.ptxFallback = true;
  in.producer = "truenoc test";
  in.kernels.push_back({"k", {}, {}, {{Target{90, false}, tn::bundle::PayloadKind::Ptx, {}, ".version 8.0\n"}}});
  auto bytes = tn::bundle::write(in);
  REQUIRE(bytes.ok());
  std::span<const uint8_t> view(reinterpret_cast<const uint8_t*>(bytes.value().data()), bytes.value().size());
  auto b = Bundle::load(*gpu(), view, {.allow_jit = true});
  REQUIRE_FALSE(b.ok());
  CHECK(b.error().code == Errc::NoCompatibleCode);
  CHECK(b.error().kernel == "k");
  CHECK(b.error().message == "the bundle carries no IR, which the simulated driver runs (it was built with --no-ir or ir = false)");
}

TEST_CASE("gpu: a damaged payload fails the kernels that run it, each by name, and no other" * doctest::skip(noGpu())) {
  // The runtime checksums only the payloads it decompresses (tn::bundle::Verify::Used). Every
  // payload of `fill` is damaged here. A cubin may be a module that holds every kernel of its
  // target (bundle format 6): on a GPU, the kernels whose selected payload is fill's module fail
  // with fill; on the simulator, which runs each kernel's own IR, fill fails alone.
  auto file = Bundle::read_file(gpuTestBundle());
  REQUIRE(file.ok());
  std::vector<uint8_t> bytes = file.value();
  auto reader = tn::bundle::Reader::open(bytes);
  REQUIRE(reader.ok());
  const tn::bundle::KernelInfo* info = reader->manifest().find("fill");
  REQUIRE(info != nullptr);
  size_t payloadsAt = bytes.size() - reader->stats().payloadSectionBytes;
  std::set<uint64_t> damaged;
  for (const tn::bundle::Entry& e : info->entries) {
    bytes[payloadsAt + e.offset + e.compressedSize / 2] ^= 0x5A;
    damaged.insert(e.offset);
  }
  // Which payload each kernel runs, from the intact bundle: the entry of its selected target and kind.
  auto intact = Bundle::load(*gpu(), file.value());
  REQUIRE(intact.ok());
  std::vector<std::string> failing;
  for (const std::string& name : intact.value().kernel_names()) {
    auto k = intact.value().kernel(name);
    REQUIRE(k.ok());
    const auto kind = gpu()->simulated() ? tn::bundle::PayloadKind::Ir
                      : k.value().is_jit() ? tn::bundle::PayloadKind::Ptx
                                           : tn::bundle::PayloadKind::Cubin;
    const tn::bundle::Entry* used =
        k.value().info().find(static_cast<uint32_t>(reader->manifest().targetIndex(k.value().target())), kind);
    REQUIRE(used != nullptr);
    if (damaged.contains(used->offset)) failing.push_back(name);
  }
  REQUIRE(std::find(failing.begin(), failing.end(), "fill") != failing.end());
  if (gpu()->simulated()) CHECK(failing == std::vector<std::string>{"fill"});

  std::span<const uint8_t> view(bytes);
  auto eager = Bundle::load(*gpu(), view, {.eager = true});
  REQUIRE_FALSE(eager.ok());
  CHECK(eager.error().code == Errc::BadBundle);
  CHECK(eager.error().kernel == failing.front());  // the first kernel loaded from the damaged payload
  CHECK(eager.error().message.starts_with("corrupt bundle: "));
  INFO(eager.error().message);
  // A shared module's error lists the kernels in it.
  if (failing.size() > 1)
    CHECK(eager.error().message.find("(a module shared by " + std::to_string(failing.size()) + " kernels: " + failing[0]) !=
          std::string::npos);
  auto lazy = Bundle::load(*gpu(), view);
  REQUIRE(lazy.ok());
  for (const std::string& name : lazy.value().kernel_names()) {
    CAPTURE(name);
    auto k = lazy.value().kernel(name);
    const bool shouldFail = std::find(failing.begin(), failing.end(), name) != failing.end();
    CHECK(k.ok() == !shouldFail);
    if (shouldFail && !k.ok()) {
      CHECK(k.error().code == Errc::BadBundle);
      CHECK(k.error().kernel == name);
    }
  }
}

TEST_CASE("gpu: load_file of a folder is an error value, not an exception" * doctest::skip(noGpu())) {
  auto b = Bundle::load_file(*gpu(), std::filesystem::temp_directory_path().string());
  REQUIRE(!b);
  CHECK(b.error().code == Errc::InvalidArgument);
  CHECK(b.error().message.ends_with("' is a directory"));
}

// Runtime objects in static storage that is constructed before the driver is loaded (here: at
// namespace scope, filled by the test) are destroyed after the runtime's own statics at exit, and
// must still find the driver then. fuzz_runtime found this (its context is such an object) twice:
// the runtime freed its Driver first, and the simulated driver the main thread's report of a
// failed call (a thread_local string). The check is that this binary exits cleanly, which ASan
// (TRUENOC_SANITIZE=1 tools/test.sh) makes strict; destroyed in reverse order: buffer, bundle,
// context.
std::optional<Context> staticContext;
std::optional<Bundle> staticBundle;
std::optional<DeviceBuffer<uint32_t>> staticBuffer;

TEST_CASE("gpu: a context, bundle and buffer kept in static storage are destroyed after the driver's statics" *
          doctest::skip(noGpu())) {
  auto ctx = Context::create(0);
  REQUIRE(ctx.ok());
  staticContext.emplace(std::move(ctx.value()));
  auto b = Bundle::load_file(*staticContext, gpuTestBundle(), {.eager = true});
  REQUIRE(b.ok());
  staticBundle.emplace(std::move(b.value()));
  auto buffer = DeviceBuffer<uint32_t>::allocate(*staticContext, 1000);
  REQUIRE(buffer.ok());
  staticBuffer.emplace(std::move(buffer.value()));
  std::vector<uint32_t> values(1000, 0x5EED5EEDu), back(1000);
  REQUIRE_OK(staticBuffer->upload(values));
  REQUIRE_OK(staticBuffer->download(back));
  CHECK(back == values);
  // A failed call on this thread, so that the simulated driver holds a report at exit.
  auto huge = DeviceBuffer<uint8_t>::allocate(*staticContext, size_t{1} << 50);
  CHECK(huge.error().code == Errc::OutOfMemory);
}

}  // TEST_SUITE
