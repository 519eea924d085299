#include "truenort/Driver.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <vector>

namespace truenort {

std::string Error::describe() const {
  std::string s = call.empty() ? std::string("truenort") : call;
  s += " failed";
  if (!cuda_name.empty()) s += ": " + cuda_name;
  if (!message.empty()) s += (cuda_name.empty() ? ": " : " (") + message + (cuda_name.empty() ? "" : ")");
  if (!kernel.empty()) s += " [kernel " + kernel + "]";
  return s;
}

Driver::~Driver() {
  if (handle) dlclose(handle);
}

Error Driver::fail(CUresult r, const char* call, std::string kernel) const {
  Error e;
  e.code = r == cu::ERROR_OUT_OF_MEMORY ? Errc::OutOfMemory : Errc::Cuda;
  e.cuda_code = r;
  e.call = call;
  e.kernel = std::move(kernel);
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName && cuGetErrorName(r, &name) == cu::SUCCESS && name) e.cuda_name = name;
  else e.cuda_name = "CUresult " + std::to_string(r);
  if (cuGetErrorString && cuGetErrorString(r, &text) == cu::SUCCESS && text) e.message = text;
  if (const char* report = simReport ? simReport() : nullptr; report && *report)
    e.message += (e.message.empty() ? "simulator: " : "; simulator: ") + std::string(report);
  return e;
}

namespace {

Error simple(Errc code, std::string call, std::string message) {
  Error e;
  e.code = code;
  e.call = std::move(call);
  e.message = std::move(message);
  return e;
}

template <class F>
bool bind(void* h, F& slot, const char* name, std::string& missing) {
  slot = reinterpret_cast<F>(dlsym(h, name));
  if (!slot) missing += missing.empty() ? name : std::string(", ") + name;
  return slot != nullptr;
}

Result<std::shared_ptr<Driver>> open(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* why = dlerror();
    return simple(Errc::NoDriver, "dlopen(" + path + ")",
                  std::string("the NVIDIA driver library is not installed or not loadable") +
                      (why ? std::string(": ") + why : std::string()));
  }
  auto d = std::make_shared<Driver>();
  d->handle = h;
  d->path = path;
  d->simReport = reinterpret_cast<const char* (*)()>(dlsym(h, "truenortSimReport"));
  d->simLaunchBounds = reinterpret_cast<void (*)(const uint64_t*, size_t)>(dlsym(h, "truenortSimLaunchBounds"));
  std::string missing;
  bind(h, d->cuInit, "cuInit", missing);
  bind(h, d->cuDriverGetVersion, "cuDriverGetVersion", missing);
  bind(h, d->cuGetErrorName, "cuGetErrorName", missing);
  bind(h, d->cuGetErrorString, "cuGetErrorString", missing);
  bind(h, d->cuDeviceGetCount, "cuDeviceGetCount", missing);
  bind(h, d->cuDeviceGet, "cuDeviceGet", missing);
  bind(h, d->cuDeviceGetAttribute, "cuDeviceGetAttribute", missing);
  bind(h, d->cuDeviceGetName, "cuDeviceGetName", missing);
  bind(h, d->cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", missing);
  bind(h, d->cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", missing);
  bind(h, d->cuCtxSetCurrent, "cuCtxSetCurrent", missing);
  bind(h, d->cuCtxGetCurrent, "cuCtxGetCurrent", missing);
  bind(h, d->cuCtxSynchronize, "cuCtxSynchronize", missing);
  bind(h, d->cuStreamCreate, "cuStreamCreate", missing);
  bind(h, d->cuStreamDestroy, "cuStreamDestroy_v2", missing);
  bind(h, d->cuStreamSynchronize, "cuStreamSynchronize", missing);
  bind(h, d->cuStreamQuery, "cuStreamQuery", missing);
  bind(h, d->cuEventCreate, "cuEventCreate", missing);
  bind(h, d->cuEventDestroy, "cuEventDestroy_v2", missing);
  bind(h, d->cuEventRecord, "cuEventRecord", missing);
  bind(h, d->cuEventQuery, "cuEventQuery", missing);
  bind(h, d->cuEventSynchronize, "cuEventSynchronize", missing);
  bind(h, d->cuEventElapsedTime, "cuEventElapsedTime", missing);
  bind(h, d->cuMemAlloc, "cuMemAlloc_v2", missing);
  bind(h, d->cuMemFree, "cuMemFree_v2", missing);
  bind(h, d->cuMemAllocHost, "cuMemAllocHost_v2", missing);
  bind(h, d->cuMemFreeHost, "cuMemFreeHost", missing);
  bind(h, d->cuMemGetInfo, "cuMemGetInfo_v2", missing);
  bind(h, d->cuMemcpyHtoD, "cuMemcpyHtoD_v2", missing);
  bind(h, d->cuMemcpyDtoH, "cuMemcpyDtoH_v2", missing);
  bind(h, d->cuMemcpyDtoD, "cuMemcpyDtoD_v2", missing);
  bind(h, d->cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", missing);
  bind(h, d->cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", missing);
  bind(h, d->cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", missing);
  bind(h, d->cuMemsetD8Async, "cuMemsetD8Async", missing);
  bind(h, d->cuModuleLoadData, "cuModuleLoadData", missing);
  bind(h, d->cuModuleUnload, "cuModuleUnload", missing);
  bind(h, d->cuModuleGetFunction, "cuModuleGetFunction", missing);
  bind(h, d->cuFuncSetAttribute, "cuFuncSetAttribute", missing);
  bind(h, d->cuLaunchKernel, "cuLaunchKernel", missing);
  d->cuTensorMapEncodeTiled = reinterpret_cast<decltype(d->cuTensorMapEncodeTiled)>(dlsym(h, "cuTensorMapEncodeTiled"));
  d->cuMemGetAddressRange = reinterpret_cast<decltype(d->cuMemGetAddressRange)>(dlsym(h, "cuMemGetAddressRange_v2"));
  if (!missing.empty()) {
    return simple(Errc::DriverTooOld, "dlsym", "the driver at " + path + " lacks: " + missing);
  }
  if (CUresult r = d->cuDriverGetVersion(&d->version); r != cu::SUCCESS) return d->fail(r, "cuDriverGetVersion");
  if (d->version < kMinDriverVersion) {
    Error e = simple(Errc::DriverTooOld, "cuDriverGetVersion",
                     "driver supports CUDA " + std::to_string(d->version / 1000) + "." +
                         std::to_string(d->version % 1000 / 10) + "; truenort needs CUDA 12.0 or newer");
    return e;
  }
  if (CUresult r = d->cuInit(0); r != cu::SUCCESS) {
    Error e = d->fail(r, "cuInit");
    if (r == 100 /* CUDA_ERROR_NO_DEVICE */) e.code = Errc::NoDevice;
    return e;
  }
  return d;
}

}  // namespace

Result<std::shared_ptr<const Driver>> loadDriverFrom(const std::string& path) {
  auto d = open(path);
  if (!d) return d.error();
  return std::shared_ptr<const Driver>(std::move(d.value()));
}

namespace {

// Where "sim" is looked for after the dynamic loader's own search: this truenoc's build tree and
// install prefix (TRUENORT_SIM_PATHS, colon-separated, set by runtime/CMakeLists.txt).
#ifndef TRUENORT_SIM_PATHS
#define TRUENORT_SIM_PATHS ""
#endif

Result<std::shared_ptr<Driver>> openChoice(const std::string& choice) {
  if (choice.empty() || choice == "cuda") return open("libcuda.so.1");
  if (choice != "sim") return open(choice);
  std::vector<std::string> candidates = {"libtruenort-sim.so"};
  std::string paths = TRUENORT_SIM_PATHS;
  for (size_t at = 0; at < paths.size();) {
    size_t colon = std::min(paths.find(':', at), paths.size());
    if (colon > at) candidates.push_back(paths.substr(at, colon - at));
    at = colon + 1;
  }
  std::string tried;
  for (const std::string& c : candidates) {
    auto d = open(c);
    if (d || d.error().code != Errc::NoDriver) return d;
    tried += (tried.empty() ? "" : ", ") + c;
  }
  return simple(Errc::NoDriver, "use_driver(sim)",
                "the simulated driver libtruenort-sim.so was not found (tried " + tried +
                    "); set TRUENORT_DRIVER to its path");
}

struct Loaded {
  std::mutex mu;
  bool chosen = false, done = false;
  std::string choice;
  std::shared_ptr<Driver> driver;
  Error failure;
};

// Never destroyed, nor the driver unloaded: a Context, buffer or bundle in static storage may be
// destroyed after this function's statics at exit, and still calls the driver.
Loaded& loaded() {
  static Loaded* l = new Loaded;
  return *l;
}

}  // namespace

Status use_driver(const std::string& choice) {
  Loaded& l = loaded();
  std::lock_guard lock(l.mu);
  if (l.done && choice != l.choice)
    return simple(Errc::InvalidArgument, "use_driver",
                  "the driver '" + (l.choice.empty() ? std::string("cuda") : l.choice) +
                      "' is already loaded; choose the driver before the first Context");
  l.chosen = true;
  l.choice = choice;
  return {};
}

Result<const Driver*> driver() {
  Loaded& l = loaded();
  std::lock_guard lock(l.mu);
  if (!l.done) {
    if (!l.chosen)
      if (const char* env = std::getenv("TRUENORT_DRIVER")) l.choice = env;
    auto d = openChoice(l.choice);
    if (d) l.driver = std::move(d.value());
    else l.failure = d.error();
    l.done = true;
  }
  if (!l.driver) return l.failure;
  return static_cast<const Driver*>(l.driver.get());
}

}  // namespace truenort
