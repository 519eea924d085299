// tools/bench runtime section (a benchmark, not a test): launch overhead of Kernel::launch against
// raw cuLaunchKernel, launch+sync round trip, and bundle load time with zero JIT against loading
// the same kernels' PTX through the driver JIT. Medians over repeated runs after warm-up.
//   truenoc_bench_runtime GPU_TEST.tnb DECODE.tnb DECODE_PTX.tnb [--csv FILE]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "backends/bundle/Bundle.h"
#include "truenort/Bundle.h"

using namespace truenort;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class T>
T must(Result<T> r, const char* what) {
  if (!r) {
    std::fprintf(stderr, "error: %s: %s\n", what, r.error().describe().c_str());
    std::exit(1);
  }
  return std::move(r.value());
}

void must(Status s, const char* what) {
  if (!s) {
    std::fprintf(stderr, "error: %s: %s\n", what, s.error().describe().c_str());
    std::exit(1);
  }
}

std::vector<uint8_t> slurp(const char* path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s GPU_TEST.tnb DECODE.tnb DECODE_PTX.tnb DECODE_PER_KERNEL.tnb [--csv FILE]\n", argv[0]);
    return 2;
  }
  std::string csv = argc >= 7 && std::string(argv[5]) == "--csv" ? argv[6] : "";
  Context ctx = must(Context::create(0), "context");
  const Driver& drv = ctx.driver();
  Stream stream = must(Stream::create(ctx), "stream");
  Bundle tests = must(Bundle::load_file(ctx, argv[1], {.eager = true}), "load test bundle");
  Kernel empty = must(tests.kernel("empty"), "kernel empty");

  constexpr int kLaunches = 20000, kReps = 7;
  auto enqueue = [&](bool raw) {
    auto t0 = Clock::now();
    for (int i = 0; i < kLaunches; ++i) {
      if (raw) {
        if (drv.cuLaunchKernel(empty.handle(), 1, 1, 1, 32, 1, 1, 0, stream.handle(), nullptr, nullptr) != cu::SUCCESS)
          std::exit(1);
      } else {
        must(empty.launch(stream), "launch");
      }
    }
    double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / kLaunches;
    must(stream.synchronize(), "sync");
    return us;
  };
  enqueue(false);
  enqueue(true);  // warm-up
  std::vector<double> ours, raw;
  for (int r = 0; r < kReps; ++r) {  // interleaved so drift affects both alike
    ours.push_back(enqueue(false));
    raw.push_back(enqueue(true));
  }
  std::vector<double> trip;
  for (int i = 0; i < 2000; ++i) {
    auto t0 = Clock::now();
    must(empty.launch(stream), "launch");
    must(stream.synchronize(), "sync");
    if (i >= 200) trip.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }

  // The decode example as built (one module per target) and with one module per kernel, loaded
  // eagerly in turns so that drift affects both alike.
  struct Loads {
    std::vector<uint8_t> bytes;
    std::vector<double> ms, driverMs, functionMs;  // the whole load; its parts in cuModuleLoadData, cuModuleGetFunction
    unsigned kernels = 0, modules = 0, jit = 0;
  } decode{slurp(argv[2]), {}, {}, {}}, perKernel{slurp(argv[4]), {}, {}, {}};
  for (int r = 0; r < kReps; ++r)
    for (Loads* l : {&decode, &perKernel}) {
      auto t0 = Clock::now();
      Bundle b = must(Bundle::load(ctx, l->bytes, {.eager = true}), "load decode bundle");
      l->ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      l->driverMs.push_back(b.stats().load_ms);
      l->functionMs.push_back(b.stats().function_ms);
      l->kernels = static_cast<unsigned>(b.kernel_names().size());
      l->modules = b.stats().modules_loaded;
      l->jit += b.jit_events();
    }
  const std::vector<double>& loadMs = decode.ms;
  const unsigned jit = decode.jit;
  // The same kernels' PTX through the driver JIT (what a PTX-shipping runtime pays at start-up).
  std::vector<uint8_t> ptxBundle = slurp(argv[3]);
  auto reader = tn::bundle::Reader::open(ptxBundle);
  if (!reader) {
    std::fprintf(stderr, "error: %s: %s\n", argv[3], reader.error().message.c_str());
    return 1;
  }
  std::vector<double> jitMs;
  for (int r = 0; r < 3; ++r) {
    double ms = 0;
    for (const auto& k : reader->manifest().kernels) {
      const tn::bundle::Entry* best = nullptr;
      for (const auto& e : k.entries)
        if (e.kind == tn::bundle::PayloadKind::Ptx) best = &e;
      if (!best) continue;
      auto ptx = reader->payload(*best);
      if (!ptx) return 1;
      ptx->push_back('\0');
      CUmodule mod = nullptr;
      auto t0 = Clock::now();
      if (drv.cuModuleLoadData(&mod, ptx->data()) != cu::SUCCESS) return 1;
      ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      (void)drv.cuModuleUnload(mod);
    }
    jitMs.push_back(ms);
  }

  double ratio = median(ours) / median(raw);
  std::printf("runtime benchmark on %s (sm_%u), driver %d\n", ctx.name().c_str(), ctx.sm(), drv.version);
  std::printf("%-44s %12s %12s %8s\n", "measure", "truenort", "reference", "ratio");
  std::printf("%-44s %10.3f us %10.3f us %8.3f\n", "enqueue of an empty kernel (raw cuLaunchKernel)", median(ours),
              median(raw), ratio);
  std::printf("%-44s %10.3f us %12s %8s\n", "launch + stream sync round trip", median(trip), "-", "-");
  std::printf("%-44s %10.3f ms %10.3f ms %8.4f\n", "load decode bundle, all kernels (PTX JIT)", median(loadMs),
              median(jitMs), median(loadMs) / median(jitMs));
  std::printf("%-44s %10.3f ms %10.3f ms %8.4f\n", "load decode bundle (one module per kernel)", median(loadMs),
              median(perKernel.ms), median(loadMs) / median(perKernel.ms));
  for (const Loads* l : {&decode, &perKernel})
    std::printf("decode bundle%s: %u kernels in %u modules, %u JIT events over %d loads; %.3f ms of a load in "
                "cuModuleLoadData, %.3f ms in cuModuleGetFunction, %.3f ms in truenort (reading, decompressing, "
                "checking)\n",
                l == &decode ? "" : " (one module per kernel)", l->kernels, l->modules, l->jit, kReps,
                median(l->driverMs), median(l->functionMs), median(l->ms) - median(l->driverMs) - median(l->functionMs));
  std::printf("H11 launch overhead ratio %.3f (goal <= 1.05): %s\n", ratio, ratio <= 1.05 ? "met" : "NOT met");
  std::printf("bundle load %.3f ms (goal <= 1 ms, zero JIT): %s\n", median(loadMs),
              median(loadMs) <= 1.0 && jit == 0 ? "met" : "NOT met");
  if (!csv.empty()) {
    std::ofstream out(csv);
    out << "measure,truenort,reference,ratio\n";
    out << "enqueue_us," << median(ours) << "," << median(raw) << "," << ratio << "\n";
    out << "roundtrip_us," << median(trip) << ",,\n";
    out << "bundle_load_ms," << median(loadMs) << "," << median(jitMs) << "," << median(loadMs) / median(jitMs) << "\n";
    out << "bundle_load_driver_ms," << median(decode.driverMs) << ",,\n";
    out << "bundle_load_function_ms," << median(decode.functionMs) << ",,\n";
    out << "bundle_load_vs_module_per_kernel_ms," << median(loadMs) << "," << median(perKernel.ms) << ","
        << median(loadMs) / median(perKernel.ms) << "\n";
  }
  return 0;
}
