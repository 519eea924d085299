// tools/bench kernel-library section (a benchmark, not a test): effective bandwidth of the
// library's kernels (tools/bench/kernels.toml) against a device-to-device copy of comparable
// size, and for f32 GEMV against cuBLAS SGEMV (dlopen'ed; the column stays empty without it).
// Each timed launch reads cold data: a case's buffers are rotated among enough copies to exceed
// the L2 several times. 3 warm-up launches, then the median of N launches timed between events.
// Bytes count every tensor once: bytes read + bytes written, whatever the kernel re-reads.
//   truenoc_bench_kernels BUNDLE.tnb [--csv FILE] [--quick] [--reps N]
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "truenort/Bundle.h"

using namespace truenort;

namespace {

const char* const kUsage =
    "usage: truenoc_bench_kernels BUNDLE.tnb [--csv FILE] [--quick] [--reps N]\n"
    "  BUNDLE.tnb   the bench bundle (build/bin/bench_kernels.tnb, from tools/bench/kernels.toml)\n"
    "  --csv FILE   also write the table as CSV (input of tools/bench/torch_ref.py)\n"
    "  --quick      small sizes and 5 repetitions: a smoke run\n"
    "  --reps N     timed launches per measurement (default 30; the median is reported)\n";

constexpr int kWarmup = 3;
constexpr int kDeviceAttributeL2CacheSize = 38;  // CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE

[[noreturn]] void die(const std::string& what, const Error& e) {
  std::fprintf(stderr, "error: %s: %s\n", what.c_str(), e.describe().c_str());
  std::exit(1);
}

template <class T>
T must(Result<T> r, const std::string& what) {
  if (!r) die(what, r.error());
  return std::move(r.value());
}

void must(Status s, const std::string& what) {
  if (!s) die(what, s.error());
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// ---- cases --------------------------------------------------------------------------------

enum class Fill { F32, BF16, Zero };  // random in [-1, 1) as f32 or bf16, or zeros (outputs)

struct Buffer {
  size_t bytes;
  Fill fill;
};

// A kernel argument: one of the case's buffers, or a scalar.
struct ArgSpec {
  int buffer = -1;
  Arg scalar{};
};
ArgSpec buf(int i) { return {i, {}}; }
template <class T>
ArgSpec val(T v) {
  return {-1, arg(v)};
}

struct Launch {
  std::string kernel;
  std::vector<ArgSpec> args;
};

struct Case {
  std::string op, shape, dtype;
  std::vector<Buffer> buffers;
  std::vector<Launch> launches;  // one op may be several launches (long softmax rows)
  double bytes = 0;              // read + written, each tensor once
  uint32_t gemvM = 0, gemvK = 0;  // f32 gemv: also timed with cuBLAS on buffers 0 (w), 1 (x), 2 (y)
};

size_t sizeOf(const std::string& dtype) { return dtype == "f32" ? 4 : 2; }
Fill fillOf(const std::string& dtype) { return dtype == "f32" ? Fill::F32 : Fill::BF16; }
std::string dims(uint64_t a, uint64_t b) { return std::to_string(a) + "x" + std::to_string(b); }

Case rowCase(const std::string& op, const std::string& dtype, uint32_t rows, uint32_t cols) {
  Case c{op, dims(rows, cols), dtype, {}, {}, 0, 0, 0};
  size_t es = sizeOf(dtype), n = size_t(rows) * cols;
  Fill f = fillOf(dtype);
  std::string k = op + "_" + dtype;
  const float eps = 1e-5f;
  if (op == "softmax" && cols > 4096) {
    // Long rows: pass 1 writes per-chunk (max, sum) pairs, pass 2 merges and writes y. The
    // stats buffer allows chunks as small as 32 elements (the template's are 4096).
    size_t stats = size_t(rows) * ((cols + 31) / 32) * 8;
    c.buffers = {{n * es, f}, {stats, Fill::Zero}, {n * es, Fill::Zero}};
    c.launches = {{"softmax_partial_" + dtype, {buf(0), buf(1), val(rows), val(cols)}},
                  {"softmax_merge_" + dtype, {buf(0), buf(1), buf(2), val(rows), val(cols)}}};
    c.bytes = 2.0 * n * es;
  } else if (op == "softmax") {
    c.buffers = {{n * es, f}, {n * es, Fill::Zero}};
    c.launches = {{k, {buf(0), buf(1), val(rows), val(cols)}}};
    c.bytes = 2.0 * n * es;
  } else if (op == "layernorm") {
    c.buffers = {{n * es, f}, {cols * es, f}, {cols * es, f}, {n * es, Fill::Zero}};
    c.launches = {{k, {buf(0), buf(1), buf(2), buf(3), val(rows), val(cols), val(eps)}}};
    c.bytes = 2.0 * n * es + 2.0 * cols * es;
  } else {  // rmsnorm
    c.buffers = {{n * es, f}, {cols * es, f}, {n * es, Fill::Zero}};
    c.launches = {{k, {buf(0), buf(1), buf(2), val(rows), val(cols), val(eps)}}};
    c.bytes = 2.0 * n * es + 1.0 * cols * es;
  }
  return c;
}

// Elementwise ops over n elements; `op` is the kernel name without the dtype (gelu_tanh, ...).
Case elementwiseCase(const std::string& op, const std::string& dtype, uint32_t n) {
  Case c{op, std::to_string(n), dtype, {}, {}, 0, 0, 0};
  size_t bytes = size_t(n) * sizeOf(dtype);
  Fill f = fillOf(dtype);
  std::string k = op + "_" + dtype;
  if (op == "add" || op == "mul" || op == "swiglu") {
    c.buffers = {{bytes, f}, {bytes, f}, {bytes, Fill::Zero}};
    c.launches = {{k, {buf(0), buf(1), buf(2), val(n)}}};
    c.bytes = 3.0 * bytes;
  } else if (op == "scale") {
    c.buffers = {{bytes, f}, {bytes, Fill::Zero}};
    c.launches = {{k, {buf(0), buf(1), val(1.5f), val(n)}}};
    c.bytes = 2.0 * bytes;
  } else if (op == "residual_add") {  // y += x: y is read and written
    c.buffers = {{bytes, f}, {bytes, f}};
    c.launches = {{k, {buf(0), buf(1), val(n)}}};
    c.bytes = 3.0 * bytes;
  } else {  // relu, gelu_*, silu
    c.buffers = {{bytes, f}, {bytes, Fill::Zero}};
    c.launches = {{k, {buf(0), buf(1), val(n)}}};
    c.bytes = 2.0 * bytes;
  }
  return c;
}

Case gemvCase(const std::string& weight, uint32_t m, uint32_t k) {
  Case c{"gemv", dims(m, k), weight, {}, {}, 0, 0, 0};
  size_t w = size_t(m) * k * sizeOf(weight);
  c.buffers = {{w, fillOf(weight)}, {size_t(k) * 4, Fill::F32}, {size_t(m) * 4, Fill::Zero}};
  c.launches = {{"gemv_" + weight, {buf(0), buf(1), buf(2), val(m), val(k)}}};
  c.bytes = double(w) + 4.0 * k + 4.0 * m;
  if (weight == "f32") {
    c.gemvM = m;
    c.gemvK = k;
  }
  return c;
}

std::vector<Case> cases(bool quick) {
  std::vector<Case> out;
  std::vector<std::pair<uint32_t, uint32_t>> rows = {{8192, 8192}, {4096, 4096}, {32, 32768}};
  uint32_t n = 1u << 26;
  if (quick) {
    rows = {{1024, 1024}, {4, 32768}};
    n = 1u << 20;
  }
  for (const char* op : {"softmax", "layernorm", "rmsnorm"})
    for (auto [r, c] : rows) out.push_back(rowCase(op, "f32", r, c));
  for (const char* op : {"add", "mul", "scale", "residual_add", "relu", "gelu_tanh", "gelu_erf", "silu", "swiglu"})
    out.push_back(elementwiseCase(op, "f32", n));
  for (const char* op : {"add", "silu", "swiglu"}) out.push_back(elementwiseCase(op, "bf16", n));
  out.push_back(quick ? gemvCase("f32", 1024, 1024) : gemvCase("f32", 8192, 8192));
  out.push_back(quick ? gemvCase("bf16", 1024, 4096) : gemvCase("bf16", 14336, 4096));
  return out;
}

// ---- cuBLAS, loaded at run time ---------------------------------------------------------------

// The few cuBLAS entry points used, declared here so that the benchmark needs no CUDA toolkit.
// cuBLAS runs on the CUDA runtime's context for device 0, which is the device's primary context:
// the one truenort::Context retains, so both see the same memory and streams.
struct Cublas {
  using Handle = void*;
  int (*create)(Handle*) = nullptr;
  int (*destroy)(Handle) = nullptr;
  int (*setStream)(Handle, CUstream) = nullptr;
  int (*sgemv)(Handle, int trans, int m, int n, const float* alpha, const float* a, int lda, const float* x, int incx,
               const float* beta, float* y, int incy) = nullptr;
  static constexpr int kOpT = 1;  // CUBLAS_OP_T
  void* lib = nullptr;
  Handle handle = nullptr;
  std::string name, why;  // the library loaded, or why none could be used

  bool load(const Context& ctx, const Stream& stream) {
    std::vector<std::string> names = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
    if (const char* env = std::getenv("TRUENOC_CUBLAS")) names.insert(names.begin(), env);
    for (const std::string& n : names) {
      if ((lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL))) {
        name = n;
        break;
      }
      const char* e = dlerror();
      why += (why.empty() ? "" : "; ") + std::string(e ? e : n + ": not found");
    }
    if (!lib) return false;
    // Only the _v2 names: the unsuffixed cublasSgemv is the legacy, handle-less API.
    create = reinterpret_cast<decltype(create)>(dlsym(lib, "cublasCreate_v2"));
    destroy = reinterpret_cast<decltype(destroy)>(dlsym(lib, "cublasDestroy_v2"));
    setStream = reinterpret_cast<decltype(setStream)>(dlsym(lib, "cublasSetStream_v2"));
    sgemv = reinterpret_cast<decltype(sgemv)>(dlsym(lib, "cublasSgemv_v2"));
    if (!create || !destroy || !setStream || !sgemv) {
      why = name + " lacks cublasCreate_v2/cublasSetStream_v2/cublasSgemv_v2";
      return false;
    }
    must(ctx.make_current(), "make the context current for cuBLAS");
    if (int st = create(&handle); st != 0) {
      why = "cublasCreate_v2 returned status " + std::to_string(st);
      handle = nullptr;
      return false;
    }
    if (int st = setStream(handle, stream.handle()); st != 0) {
      why = "cublasSetStream_v2 returned status " + std::to_string(st);
      return false;
    }
    return true;
  }

  // y = W x for row-major W (m x k): W is the column-major k x m matrix A, so y = A^T x.
  bool gemv(CUdeviceptr w, CUdeviceptr x, CUdeviceptr y, uint32_t m, uint32_t k) const {
    const float one = 1.0f, zero = 0.0f;
    return sgemv(handle, kOpT, int(k), int(m), &one, reinterpret_cast<const float*>(w), int(k),
                 reinterpret_cast<const float*>(x), 1, &zero, reinterpret_cast<float*>(y), 1) == 0;
  }

  ~Cublas() {
    if (handle) destroy(handle);
    // lib stays loaded: cuBLAS may still have teardown registered with the CUDA runtime.
  }
};

// ---- measurement -------------------------------------------------------------------------------

struct Bench {
  const Context& ctx;
  const Stream& stream;
  int reps;
  size_t coldBytes;  // rotate buffer sets until this many bytes are touched between reuses

  // Enough copies of a set of `setBytes` to exceed coldBytes, within a quarter of free memory.
  int setsFor(double setBytes) const {
    size_t freeB = 0, total = 0;
    must(ctx.make_current(), "make the context current");
    (void)ctx.driver().cuMemGetInfo(&freeB, &total);
    double want = std::ceil(double(coldBytes) / std::max(setBytes, 1.0));
    double fit = std::floor(double(freeB) / 4 / std::max(setBytes, 1.0));
    return int(std::clamp(std::min(want, fit), 1.0, 64.0));
  }

  // Median milliseconds of enqueue(set): 3 warm-up calls, then `reps` calls each between two events.
  double time(const std::function<bool(int)>& enqueue, int sets) const {
    for (int i = 0; i < kWarmup; ++i)
      if (!enqueue(i % sets)) return -1;
    std::vector<Event> start, end;
    for (int r = 0; r < reps; ++r) {
      start.push_back(must(Event::create(ctx), "event"));
      end.push_back(must(Event::create(ctx), "event"));
    }
    for (int r = 0; r < reps; ++r) {
      must(start[r].record(stream), "event record");
      if (!enqueue((kWarmup + r) % sets)) return -1;
      must(end[r].record(stream), "event record");
    }
    must(stream.synchronize(), "stream sync");
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) ms.push_back(must(Event::elapsed_ms(start[r], end[r]), "elapsed time"));
    return median(ms);
  }
};

void fillBuffer(const DeviceMemory& m, Fill f, std::mt19937& rng, const Stream& stream) {
  if (f == Fill::Zero) {
    must(m.fill_async(0, stream), "fill");
    return;
  }
  constexpr size_t kChunk = size_t{4} << 20;
  std::vector<unsigned char> host(kChunk);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (size_t i = 0; i < kChunk; i += 4) {
    float v[2] = {d(rng), d(rng)};
    if (f == Fill::F32) {
      std::memcpy(&host[i], &v[0], 4);
    } else {  // two bf16 (the high halves)
      uint32_t b0, b1;
      std::memcpy(&b0, &v[0], 4);
      std::memcpy(&b1, &v[1], 4);
      uint16_t h[2] = {uint16_t(b0 >> 16), uint16_t(b1 >> 16)};
      std::memcpy(&host[i], h, 4);
    }
  }
  for (size_t off = 0; off < m.bytes(); off += kChunk)
    must(m.upload(host.data(), std::min(kChunk, m.bytes() - off), off), "upload");
}

struct Row {
  std::string op, shape, dtype;
  double bytes = 0, oursUs = 0, oursGbs = 0, copyGbs = 0;
  std::optional<double> refGbs;
};

std::string fmt(double v, const char* f = "%.3f") {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  std::string bundlePath, csv;
  bool quick = false;
  int reps = -1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* opt) -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "error: %s needs a value\n%s", opt, kUsage);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--csv") {
      csv = value("--csv");
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--reps") {
      std::string v = value("--reps");
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1 || n > 100000) {
        std::fprintf(stderr, "error: --reps needs a positive integer, not '%s'\n%s", v.c_str(), kUsage);
        return 2;
      }
      reps = int(n);
    } else if (a.size() > 1 && a[0] == '-') {
      std::fprintf(stderr, "error: unknown option '%s'\n%s", a.c_str(), kUsage);
      return 2;
    } else if (bundlePath.empty()) {
      bundlePath = a;
    } else {
      std::fprintf(stderr, "error: more than one bundle given ('%s', '%s')\n%s", bundlePath.c_str(), a.c_str(), kUsage);
      return 2;
    }
  }
  if (bundlePath.empty()) {
    std::fprintf(stderr, "error: no bundle given\n%s", kUsage);
    return 2;
  }
  if (!std::ifstream(bundlePath).good()) {
    std::fprintf(stderr, "error: cannot read %s\n", bundlePath.c_str());
    return 1;
  }
  if (reps < 0) reps = quick ? 5 : 30;

  Context ctx = must(Context::create(0), "context");
  const Driver& drv = ctx.driver();
  Stream stream = must(Stream::create(ctx), "stream");
  Bundle bundle = must(Bundle::load_file(ctx, bundlePath, {.eager = true}), "load " + bundlePath);
  int l2 = 0;
  if (drv.cuDeviceGetAttribute(&l2, kDeviceAttributeL2CacheSize, ctx.device()) != cu::SUCCESS || l2 <= 0)
    l2 = 50 << 20;
  Bench bench{ctx, stream, reps, size_t(l2) * 4};
  std::printf("kernel benchmark on %s (sm_%u), L2 %d MB, median of %d launches after %d warm-up, cold inputs\n",
              ctx.name().c_str(), ctx.sm(), l2 >> 20, reps, kWarmup);

  Cublas cublas;
  bool haveCublas = cublas.load(ctx, stream);
  if (haveCublas) std::printf("reference: cuBLAS SGEMV from %s\n", cublas.name.c_str());
  else std::printf("reference: cuBLAS not available (%s); its column stays empty\n", cublas.why.c_str());

  std::mt19937 rng(12345);
  std::vector<Row> rows;
  int failures = 0;
  for (const Case& c : cases(quick)) {
    std::string label = c.op + " " + c.shape + " " + c.dtype;
    std::vector<Kernel> kernels;
    std::string missing;
    for (const Launch& l : c.launches) {
      auto k = bundle.kernel(l.kernel);
      if (k) kernels.push_back(k.value());
      else missing = l.kernel + ": " + k.error().describe();
    }
    if (!missing.empty()) {
      std::printf("skip %s: %s\n", label.c_str(), missing.c_str());
      ++failures;
      continue;
    }

    double setBytes = 0;
    for (const Buffer& b : c.buffers) setBytes += double(b.bytes);
    int sets = bench.setsFor(setBytes);
    std::vector<std::vector<DeviceMemory>> mem(sets);
    for (auto& set : mem)
      for (const Buffer& b : c.buffers) {
        set.push_back(must(DeviceMemory::allocate(ctx, b.bytes), "allocate for " + label));
        fillBuffer(set.back(), b.fill, rng, stream);
      }
    // The arguments of every launch of every set, built once.
    std::vector<std::vector<std::vector<Arg>>> args(sets);
    for (int s = 0; s < sets; ++s)
      for (const Launch& l : c.launches) {
        std::vector<Arg> a;
        for (const ArgSpec& spec : l.args) a.push_back(spec.buffer >= 0 ? arg(mem[s][spec.buffer].ptr()) : spec.scalar);
        args[s].push_back(std::move(a));
      }
    must(stream.synchronize(), "fill");

    Status launchError;
    double ms = bench.time(
        [&](int s) {
          for (size_t i = 0; i < kernels.size(); ++i)
            if (Status st = kernels[i].launch_args(stream, args[s][i]); !st) {
              launchError = st;
              return false;
            }
          return true;
        },
        sets);
    if (ms < 0) die("launch " + label, launchError.error());

    Row row{c.op, c.shape, c.dtype, c.bytes, ms * 1e3, c.bytes / (ms * 1e6), 0, std::nullopt};

    if (c.gemvM && haveCublas) {
      const uint32_t m = c.gemvM, k = c.gemvK;
      double cms = bench.time([&](int s) { return cublas.gemv(mem[s][0].ptr(), mem[s][1].ptr(), mem[s][2].ptr(), m, k); },
                              sets);
      if (cms < 0) {
        std::printf("cuBLAS SGEMV failed for %s\n", label.c_str());
      } else {
        row.refGbs = c.bytes / (cms * 1e6);
        // Same inputs, two answers: a wrong kernel would make the comparison meaningless.
        std::vector<float> ours(m), ref(m);
        must(kernels[0].launch_args(stream, args[0][0]), "launch " + label);
        must(stream.synchronize(), "sync");
        must(mem[0][2].download(ours.data(), m * 4), "download");
        (void)cublas.gemv(mem[0][0].ptr(), mem[0][1].ptr(), mem[0][2].ptr(), m, k);
        must(stream.synchronize(), "sync");
        must(mem[0][2].download(ref.data(), m * 4), "download");
        double worst = 0;
        for (uint32_t i = 0; i < m; ++i) worst = std::max(worst, double(std::fabs(ours[i] - ref[i])));
        // Uniform [-1, 1) inputs: |y| ~ sqrt(k / 9), and the two summation orders differ by
        // ~2^-24 * sqrt(k) * |y| (1e-4 at k = 8192); a wrong element is off by ~|y|.
        double tol = 1e-3 * std::sqrt(double(k));
        if (!(worst <= tol)) {
          std::printf("WARNING %s: ours and cuBLAS differ by up to %g (tolerance %g)\n", label.c_str(), worst, tol);
          ++failures;
        }
      }
    }
    mem.clear();

    // A device-to-device copy moving as many bytes (half read, half written), also cold.
    size_t half = std::max<size_t>(size_t(c.bytes / 2) / 256 * 256, 256);
    int copySets = bench.setsFor(2.0 * double(half));
    std::vector<std::pair<DeviceMemory, DeviceMemory>> copies;
    for (int s = 0; s < copySets; ++s) {
      DeviceMemory src = must(DeviceMemory::allocate(ctx, half), "allocate copy source");
      DeviceMemory dst = must(DeviceMemory::allocate(ctx, half), "allocate copy target");
      must(src.fill_async(1, stream), "fill");
      copies.emplace_back(std::move(src), std::move(dst));
    }
    double copyMs = bench.time(
        [&](int s) {
          return drv.cuMemcpyDtoDAsync(copies[s].second.ptr(), copies[s].first.ptr(), half, stream.handle()) ==
                 cu::SUCCESS;
        },
        copySets);
    if (copyMs < 0) {
      std::fprintf(stderr, "error: cuMemcpyDtoDAsync failed\n");
      return 1;
    }
    row.copyGbs = 2.0 * double(half) / (copyMs * 1e6);
    copies.clear();
    must(stream.synchronize(), "sync");
    ctx.pool().trim();
    rows.push_back(row);
    std::printf("  measured %-34s %9.1f us  (%d buffer sets)\n", label.c_str(), row.oursUs, sets);
    std::fflush(stdout);
  }

  std::printf("\n%-14s %-12s %-6s %10s %10s %10s %10s %10s\n", "op", "shape", "dtype", "ours GB/s", "copy GB/s",
              "ref GB/s", "ours/copy", "ours/ref");
  for (const Row& r : rows) {
    std::printf("%-14s %-12s %-6s %10.1f %10.1f %10s %10.3f %10s\n", r.op.c_str(), r.shape.c_str(), r.dtype.c_str(),
                r.oursGbs, r.copyGbs, r.refGbs ? fmt(*r.refGbs, "%.1f").c_str() : "-", r.oursGbs / r.copyGbs,
                r.refGbs ? fmt(r.oursGbs / *r.refGbs).c_str() : "-");
  }
  std::printf("ref: cuBLAS SGEMV (gemv f32 only); GB/s = (bytes read + bytes written) / median time\n");
  if (!csv.empty()) {
    std::ofstream out(csv);
    out << "op,shape,dtype,bytes,ours_us,ours_gbs,copy_gbs,ref_gbs,ours_over_copy,ours_over_ref\n";
    for (const Row& r : rows) {
      out << r.op << "," << r.shape << "," << r.dtype << "," << fmt(r.bytes, "%.0f") << "," << fmt(r.oursUs) << ","
          << fmt(r.oursGbs, "%.2f") << "," << fmt(r.copyGbs, "%.2f") << ","
          << (r.refGbs ? fmt(*r.refGbs, "%.2f") : "") << "," << fmt(r.oursGbs / r.copyGbs, "%.4f") << ","
          << (r.refGbs ? fmt(r.oursGbs / *r.refGbs, "%.4f") : "") << "\n";
    }
    if (!out) {
      std::fprintf(stderr, "error: cannot write %s\n", csv.c_str());
      return 1;
    }
  }
  if (failures) std::printf("%d case(s) skipped or failed\n", failures);
  return failures ? 1 : 0;
}
