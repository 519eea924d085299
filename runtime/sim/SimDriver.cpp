// libtruenort-sim.so: the CUDA Driver API subset truenort uses, exported under the driver's
// own names (`_v2` where the runtime binds those), over the simulator of Sim.h. Kernels run on
// the interpreter from the IR a bundle carries; work runs when it is enqueued. A failing call
// leaves a report for the calling thread, read with truenortSimReport() (truenort appends it to
// its Error message). The library holds no state the real driver would not, except that report.
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <type_traits>

#include "Sim.h"
#include "backends/interp/TensorMap.h"
#include "ir/Parser.h"
#include "ir/Verifier.h"

#define SIM_API extern "C" __attribute__((visibility("default")))

using truenort::sim::CUresult;
namespace err = truenort::sim::err;
using truenort::CUcontext, truenort::CUdevice, truenort::CUdeviceptr, truenort::CUevent, truenort::CUfunction,
    truenort::CUmodule, truenort::CUstream;
using truenort::CUctx_st, truenort::CUevent_st, truenort::CUfunc_st, truenort::CUmod_st, truenort::CUstream_st;

namespace {

using truenort::sim::Config;
using truenort::sim::Memory;
using truenort::sim::BoundedMemory;

constexpr int kDriverVersion = 13000;

struct State {
  std::mutex mu;
  bool initialized = false;
  Config config;
  std::unique_ptr<Memory> memory;
  CUctx_st context;
  int contextRefs = 0;
  std::set<CUstream> streams;
  std::set<CUevent> events;
  std::set<CUmodule> modules;
  std::set<CUfunction> functions;
  std::set<void*> hostBuffers;
  // The report of each thread's last call, while it failed. Not a thread_local string: the main
  // thread's are destroyed at exit before static destructors run, which may still call the driver
  // (a Context released at exit).
  std::map<std::thread::id, std::string> reports;
};

// Never destroyed: a program may still call the driver from its own static destructors.
State& state() {
  static State* s = new State;
  return *s;
}

thread_local CUcontext currentContext = nullptr;

// Every entry point: the one lock, and a fresh report.
struct Call {
  std::lock_guard<std::mutex> lock{state().mu};
  Call() { state().reports.erase(std::this_thread::get_id()); }
};

CUresult fail(CUresult code, std::string report) {
  state().reports[std::this_thread::get_id()] = std::move(report);
  return code;
}

CUresult initialized() { return state().initialized ? err::Success : err::NotInitialized; }

bool liveStream(CUstream s) {
  // 0 is the legacy default stream; 1 and 2 are CU_STREAM_LEGACY and CU_STREAM_PER_THREAD.
  auto bits = reinterpret_cast<uintptr_t>(s);
  return bits <= 2 || state().streams.count(s);
}

std::byte* deviceRange(CUdeviceptr p, size_t n, const char* call, CUresult& r) {
  std::byte* host = state().memory->range(p, n);
  if (!host)
    r = fail(err::InvalidValue, std::string(call) + ": [" + std::to_string(p) + ", +" + std::to_string(n) +
                                    ") is not inside one live device allocation");
  return host;
}

// The interpreter's fault as the CUDA error a device would give.
CUresult launchError(tn::interp::ErrorKind kind) {
  using K = tn::interp::ErrorKind;
  switch (kind) {
    case K::Setup: return err::InvalidValue;
    case K::OutOfBounds:
    case K::InvalidPointer: return err::IllegalAddress;
    case K::Misaligned: return err::MisalignedAddress;
    case K::InstructionBudget: return err::LaunchTimeout;
    default: return err::LaunchFailed;  // the checks a GPU does not make (races, barriers, ...)
  }
}

// "vadd.sm_90.tir": the name `truenoc inspect --extract vadd:sm_90:ir` output is best saved
// under, so that a fault's file:line:col points into it.
std::string irFileName(std::string_view text) {
  auto word = [&](std::string_view key) -> std::string {
    size_t at = text.find(key);
    if (at == std::string_view::npos) return "";
    size_t b = at + key.size(), e = b;
    while (e < text.size() && (std::isalnum(static_cast<unsigned char>(text[e])) || text[e] == '_' || text[e] == '.'))
      ++e;
    return std::string(text.substr(b, e - b));
  };
  std::string kernel = word("kernel @"), target = word("target ");
  return (kernel.empty() ? "kernel" : kernel) + (target.empty() ? "" : "." + target) + ".tir";
}

}  // namespace

// ---- initialization, errors, devices, contexts ---------------------------------------------

SIM_API CUresult cuInit(unsigned flags) {
  Call c;
  State& s = state();
  if (flags != 0) return fail(err::InvalidValue, "cuInit: flags must be 0");
  if (s.initialized) return err::Success;
  Config config;
  if (const char* env = std::getenv("TRUENORT_SIM"))
    if (auto why = truenort::sim::parseConfig(env, config)) return fail(err::InvalidValue, *why);
  s.config = config;
  s.memory = std::make_unique<Memory>(config.memory);
  s.initialized = true;
  return err::Success;
}

SIM_API CUresult cuDriverGetVersion(int* version) {
  if (!version) return err::InvalidValue;
  *version = kDriverVersion;
  return err::Success;
}

SIM_API CUresult cuGetErrorName(CUresult r, const char** name) {
  if (!name) return err::InvalidValue;
  *name = truenort::sim::errorName(r);
  return *name ? err::Success : err::InvalidValue;
}

SIM_API CUresult cuGetErrorString(CUresult r, const char** text) {
  if (!text) return err::InvalidValue;
  *text = truenort::sim::errorString(r);
  return *text ? err::Success : err::InvalidValue;
}

// The report of this thread's last failing call ("" when it left none). Not a CUDA entry point:
// truenort binds it to recognise the simulator and to explain its errors.
SIM_API const char* truenortSimReport() {
  std::lock_guard<std::mutex> lock(state().mu);
  auto it = state().reports.find(std::this_thread::get_id());
  return it == state().reports.end() ? "" : it->second.c_str();
}

// The byte ranges [begin, end) (pairs) that this thread's next cuLaunchKernel may touch: the
// runtime's extent checks (truenort/Bundle.h) give each pointer argument's extent, or its whole
// allocation when it has none, so that a kernel reading or writing past an extent faults as past
// an allocation. Not a CUDA entry point; the launch takes them whether it runs or fails.
thread_local std::vector<std::pair<uint64_t, uint64_t>> nextBounds;

SIM_API void truenortSimLaunchBounds(const uint64_t* ranges, size_t count) {
  nextBounds.clear();
  for (size_t i = 0; i < count; ++i) nextBounds.push_back({ranges[2 * i], ranges[2 * i + 1]});
}

SIM_API CUresult cuDeviceGetCount(int* count) {
  Call c;
  if (CUresult r = initialized()) return r;
  if (!count) return err::InvalidValue;
  *count = 1;
  return err::Success;
}

SIM_API CUresult cuDeviceGet(CUdevice* dev, int ordinal) {
  Call c;
  if (CUresult r = initialized()) return r;
  if (!dev) return err::InvalidValue;
  if (ordinal != 0) return fail(err::InvalidDevice, "cuDeviceGet: the simulator has one device, 0");
  *dev = 0;
  return err::Success;
}

SIM_API CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice dev) {
  Call c;
  if (CUresult r = initialized()) return r;
  if (!value) return err::InvalidValue;
  if (dev != 0) return err::InvalidDevice;
  const Config& k = state().config;
  switch (attribute) {
    case 1: case 2: case 3: *value = 1024; break;               // max threads per block, block x/y
    case 4: *value = 64; break;                                 // block z
    case 5: *value = 0x7FFFFFFF; break;                         // grid x
    case 6: case 7: *value = 65535; break;                      // grid y/z
    case 8: *value = k.sharedPerBlock; break;                   // shared memory per block
    case 9: *value = 65536; break;                              // constant memory
    case 10: *value = 32; break;                                // warp size
    case 12: case 82: *value = 65536; break;                    // registers per block / per SM
    case 13: *value = 1755000; break;                           // clock rate, kHz
    case 16: *value = k.sms; break;                             // multiprocessors
    case 39: *value = 2048; break;                              // threads per SM
    case 75: *value = static_cast<int>(k.sm / 10); break;       // compute capability major
    case 76: *value = static_cast<int>(k.sm % 10); break;       // minor
    case 81: *value = k.sharedPerSm; break;                     // shared memory per SM
    case 97: *value = k.sharedOptin; break;                     // shared memory per block, opt-in
    default:
      return fail(err::InvalidValue, "cuDeviceGetAttribute: attribute " + std::to_string(attribute) +
                                         " is not simulated");
  }
  return err::Success;
}

SIM_API CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  Call c;
  if (CUresult r = initialized()) return r;
  if (!name || len <= 0) return err::InvalidValue;
  if (dev != 0) return err::InvalidDevice;
  const std::string& n = state().config.name;
  size_t count = std::min(n.size(), static_cast<size_t>(len - 1));
  std::memcpy(name, n.data(), count);
  name[count] = '\0';
  return err::Success;
}

SIM_API CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) {
  Call c;
  if (CUresult r = initialized()) return r;
  if (!ctx) return err::InvalidValue;
  if (dev != 0) return err::InvalidDevice;
  ++state().contextRefs;
  *ctx = &state().context;
  return err::Success;
}

SIM_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  Call c;
  if (CUresult r = initialized()) return r;
  if (dev != 0) return err::InvalidDevice;
  if (state().contextRefs == 0) return fail(err::InvalidContext, "cuDevicePrimaryCtxRelease: not retained");
  --state().contextRefs;
  return err::Success;
}

SIM_API CUresult cuCtxSetCurrent(CUcontext ctx) {
  Call c;
  if (CUresult r = initialized()) return r;
  if (ctx && ctx != &state().context) return err::InvalidContext;
  currentContext = ctx;
  return err::Success;
}

SIM_API CUresult cuCtxGetCurrent(CUcontext* ctx) {
  Call c;
  if (CUresult r = initialized()) return r;
  if (!ctx) return err::InvalidValue;
  *ctx = currentContext;
  return err::Success;
}

SIM_API CUresult cuCtxSynchronize() {
  Call c;
  if (CUresult r = initialized()) return r;
  return currentContext ? err::Success : err::InvalidContext;
}

// ---- streams and events -----------------------------------------------------------------

SIM_API CUresult cuStreamCreate(CUstream* stream, unsigned flags) {
  Call c;
  if (CUresult r = initialized()) return r;
  if (!stream || flags > 1) return err::InvalidValue;
  if (!currentContext) return err::InvalidContext;
  *stream = new CUstream_st;
  state().streams.insert(*stream);
  return err::Success;
}

SIM_API CUresult cuStreamDestroy_v2(CUstream stream) {
  Call c;
  if (CUresult r = initialized()) return r;
  if (!state().streams.erase(stream)) return err::InvalidHandle;
  delete stream;
  return err::Success;
}

SIM_API CUresult cuStreamSynchronize(CUstream stream) {
  Call c;
  if (CUresult r = initialized()) return r;
  return liveStream(stream) ? err::Success : err::InvalidHandle;
}

SIM_API CUresult cuStreamQuery(CUstream stream) {
  Call c;
  if (CUresult r = initialized()) return r;
  return liveStream(stream) ? err::Success : err::InvalidHandle;
}

SIM_API CUresult cuEventCreate(CUevent* event, unsigned flags) {
  Call c;
  if (CUresult r = initialized()) return r;
  if (!event || flags > 7) return err::InvalidValue;
  if (!currentContext) return err::InvalidContext;
  *event = new CUevent_st;
  (*event)->timing = !(flags & 2);  // CU_EVENT_DISABLE_TIMING
  state().events.insert(*event);
  return err::Success;
}

SIM_API CUresult cuEventDestroy_v2(CUevent event) {
  Call c;
  if (CUresult r = initialized()) return r;
  if (!state().events.erase(event)) return err::InvalidHandle;
  delete event;
  return err::Success;
}

SIM_API CUresult cuEventRecord(CUevent event, CUstream stream) {
  Call c;
  if (CUresult r = initialized()) return r;
  if (!state().events.count(event) || !liveStream(stream)) return err::InvalidHandle;
  event->recorded = std::chrono::steady_clock::now();
  return err::Success;
}

SIM_API CUresult cuEventQuery(CUevent event) {
  Call c;
  if (CUresult r = initialized()) return r;
  return state().events.count(event) ? err::Success : err::InvalidHandle;
}

SIM_API CUresult cuEventSynchronize(CUevent event) {
  Call c;
  if (CUresult r = initialized()) return r;
  return state().events.count(event) ? err::Success : err::InvalidHandle;
}

SIM_API CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  Call c;
  if (CUresult r = initialized()) return r;
  if (!ms) return err::InvalidValue;
  if (!state().events.count(start) || !state().events.count(end)) return err::InvalidHandle;
  if (!start->timing || !end->timing || !start->recorded || !end->recorded)
    return fail(err::InvalidHandle, "cuEventElapsedTime: both events must be recorded and have timing enabled");
  *ms = std::chrono::duration<float, std::milli>(*end->recorded - *start->recorded).count();
  return err::Success;
}

// ---- memory ---------------------------------------------------------------------------------

SIM_API CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
  Call c;
  if (CUresult r = initialized()) return r;
  if (!p) return err::InvalidValue;
  if (!currentContext) return err::InvalidContext;
  uint64_t address = 0;
  CUresult r = state().memory->allocate(bytes, address);
  if (r == err::OutOfMemory)
    return fail(r, "cuMemAlloc: " + std::to_string(bytes) + " bytes requested, " +
                       std::to_string(state().memory->capacity() - state().memory->used()) + " of " +
                       std::to_string(state().memory->capacity()) + " free");
  if (r == err::Success) *p = address;
  return r;
}

SIM_API CUresult cuMemFree_v2(CUdeviceptr p) {
  Call c;
  if (CUresult r = initialized()) return r;
  if (CUresult r = state().memory->release(p))
    return fail(r, "cuMemFree: " + std::to_string(p) + " is not the start of a live allocation");
  return err::Success;
}

SIM_API CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr p) {
  Call c;
  if (CUresult r = initialized()) return r;
  auto a = state().memory->below(p);
  if (!a || p - a->base >= a->bytes) return err::NotFound;
  if (base) *base = a->base;
  if (size) *size = a->bytes;
  return err::Success;
}

SIM_API CUresult cuMemAllocHost_v2(void** p, size_t bytes) {
  Call c;
  if (CUresult r = initialized()) return r;
  if (!p || bytes == 0) return err::InvalidValue;
  *p = std::malloc(bytes);
  if (!*p) return err::OutOfMemory;
  state().hostBuffers.insert(*p);
  return err::Success;
}

SIM_API CUresult cuMemFreeHost(void* p) {
  Call c;
  if (CUresult r = initialized()) return r;
  if (!state().hostBuffers.erase(p)) return err::InvalidValue;
  std::free(p);
  return err::Success;
}

SIM_API CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  Call c;
  if (CUresult r = initialized()) return r;
  if (!free || !total) return err::InvalidValue;
  *total = state().memory->capacity();
  *free = *total - state().memory->used();
  return err::Success;
}

namespace {

CUresult moveBytes(void* dst, const void* src, size_t n) {
  if (n) std::memmove(dst, src, n);
  return err::Success;
}

CUresult htod(CUdeviceptr dst, const void* src, size_t n, const char* call) {
  if (CUresult r = initialized()) return r;
  if (n == 0) return err::Success;
  CUresult r = err::Success;
  std::byte* d = deviceRange(dst, n, call, r);
  return d && src ? moveBytes(d, src, n) : r ? r : err::InvalidValue;
}

CUresult dtoh(void* dst, CUdeviceptr src, size_t n, const char* call) {
  if (CUresult r = initialized()) return r;
  if (n == 0) return err::Success;
  CUresult r = err::Success;
  std::byte* s = deviceRange(src, n, call, r);
  return s && dst ? moveBytes(dst, s, n) : r ? r : err::InvalidValue;
}

CUresult dtod(CUdeviceptr dst, CUdeviceptr src, size_t n, const char* call) {
  if (CUresult r = initialized()) return r;
  if (n == 0) return err::Success;
  CUresult r = err::Success;
  std::byte* d = deviceRange(dst, n, call, r);
  std::byte* s = d ? deviceRange(src, n, call, r) : nullptr;
  return s ? moveBytes(d, s, n) : r;
}

}  // namespace

SIM_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
  Call c;
  return htod(dst, src, n, "cuMemcpyHtoD");
}

SIM_API CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
  Call c;
  return dtoh(dst, src, n, "cuMemcpyDtoH");
}

SIM_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  Call c;
  return dtod(dst, src, n, "cuMemcpyDtoD");
}

SIM_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
  Call c;
  return liveStream(s) ? htod(dst, src, n, "cuMemcpyHtoDAsync") : err::InvalidHandle;
}

SIM_API CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  Call c;
  return liveStream(s) ? dtoh(dst, src, n, "cuMemcpyDtoHAsync") : err::InvalidHandle;
}

SIM_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  Call c;
  return liveStream(s) ? dtod(dst, src, n, "cuMemcpyDtoDAsync") : err::InvalidHandle;
}

SIM_API CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n, CUstream s) {
  Call c;
  if (CUresult r = initialized()) return r;
  if (!liveStream(s)) return err::InvalidHandle;
  if (n == 0) return err::Success;
  CUresult r = err::Success;
  std::byte* d = deviceRange(dst, n, "cuMemsetD8Async", r);
  if (d) std::memset(d, value, n);
  return r;
}

// ---- modules and launches ---------------------------------------------------------------

SIM_API CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  Call c;
  if (CUresult r = initialized()) return r;
  if (!module || !image) return err::InvalidValue;
  if (!currentContext) return err::InvalidContext;
  const char* bytes = static_cast<const char*>(image);
  if (std::memcmp(bytes, "\x7f" "ELF", 4) == 0)
    return fail(err::InvalidImage, "cuModuleLoadData: the simulator runs a bundle's IR, not cubins");
  std::string_view text(bytes, strnlen(bytes, size_t{256} << 20));
  tn::ir::Diagnostics diags;
  std::optional<tn::ir::Module> m = tn::ir::parseModule(text, irFileName(text), diags);
  if (m) tn::ir::verify(*m, diags);
  if (!m || diags.hasErrors()) {
    std::string report = "cuModuleLoadData: the kernel IR does not parse and verify:";
    for (const tn::ir::Diagnostic& d : diags.all()) report += "\n" + tn::ir::formatDiagnostic(d);
    return fail(err::InvalidImage, report);
  }
  auto* mod = new CUmod_st{{std::move(*m), {}}};
  state().modules.insert(mod);
  *module = mod;
  return err::Success;
}

SIM_API CUresult cuModuleUnload(CUmodule module) {
  Call c;
  if (CUresult r = initialized()) return r;
  if (!state().modules.erase(module)) return err::InvalidHandle;
  for (auto& [name, f] : module->m.functions) state().functions.erase(f.get());
  delete module;
  return err::Success;
}

SIM_API CUresult cuModuleGetFunction(CUfunction* fn, CUmodule module, const char* name) {
  Call c;
  if (CUresult r = initialized()) return r;
  if (!fn || !name) return err::InvalidValue;
  if (!state().modules.count(module)) return err::InvalidHandle;
  auto& functions = module->m.functions;
  if (auto it = functions.find(std::string_view(name)); it != functions.end()) {
    *fn = it->second.get();
    return err::Success;
  }
  const tn::ir::Kernel* kernel = nullptr;
  for (const tn::ir::Kernel& k : module->m.ir.kernels)
    if (k.name == name) kernel = &k;
  if (!kernel) return fail(err::NotFound, std::string("cuModuleGetFunction: no kernel named '") + name + "'");
  auto f = std::make_unique<CUfunc_st>();
  f->kernel = kernel;
  if (auto e = f->vm.load(module->m.ir, name))
    return fail(err::NotSupported, "cuModuleGetFunction: the interpreter cannot run '" + std::string(name) +
                                       "': " + e->text());
  f->vm.useDeviceMemory(state().memory.get());
  for (const tn::ir::SharedDecl& d : kernel->shared)
    if (!d.dynamic) f->staticShared = (f->staticShared + d.align - 1) / d.align * d.align + d.bytes();
  const int perBlock = state().config.sharedPerBlock;
  f->maxDynamicShared = f->staticShared >= uint64_t(perBlock) ? 0 : perBlock - static_cast<int>(f->staticShared);
  *fn = f.get();
  state().functions.insert(f.get());
  functions.emplace(name, std::move(f));
  return err::Success;
}

SIM_API CUresult cuFuncSetAttribute(CUfunction fn, int attribute, int value) {
  Call c;
  if (CUresult r = initialized()) return r;
  if (!state().functions.count(fn)) return err::InvalidHandle;
  if (attribute != 8)  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    return fail(err::NotSupported, "cuFuncSetAttribute: attribute " + std::to_string(attribute) + " is not simulated");
  if (value < 0 || fn->staticShared + uint64_t(value) > uint64_t(state().config.sharedOptin))
    return fail(err::InvalidValue, "cuFuncSetAttribute: " + std::to_string(value) + " bytes of dynamic shared memory " +
                                       "and " + std::to_string(fn->staticShared) + " static exceed the device's " +
                                       std::to_string(state().config.sharedOptin) + "-byte opt-in limit");
  fn->maxDynamicShared = value;
  return err::Success;
}

SIM_API CUresult cuLaunchKernel(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                unsigned bz, unsigned sharedBytes, CUstream stream, void** params, void** extra) {
  const std::vector<std::pair<uint64_t, uint64_t>> bounds = std::move(nextBounds);
  nextBounds.clear();
  Call c;
  if (CUresult r = initialized()) return r;
  if (!state().functions.count(fn) || !liveStream(stream)) return err::InvalidHandle;
  const std::string kernel = "kernel '" + fn->kernel->name + "'";
  if (extra) return fail(err::NotSupported, "cuLaunchKernel: the simulator takes kernelParams, not extra");
  if (!gx || !gy || !gz || !bx || !by || !bz || gx > 0x7FFFFFFFu || gy > 65535 || gz > 65535 || bx > 1024 ||
      by > 1024 || bz > 64 || uint64_t(bx) * by * bz > 1024)
    return fail(err::InvalidValue, "cuLaunchKernel: grid (" + std::to_string(gx) + "," + std::to_string(gy) + "," +
                                       std::to_string(gz) + ") or block (" + std::to_string(bx) + "," +
                                       std::to_string(by) + "," + std::to_string(bz) + ") is outside the limits");
  if (sharedBytes > unsigned(fn->maxDynamicShared))
    return fail(err::InvalidValue, "cuLaunchKernel: " + std::to_string(sharedBytes) + " bytes of dynamic shared memory; " +
                                       kernel + " may use " + std::to_string(fn->maxDynamicShared) +
                                       " (raise it with cuFuncSetAttribute)");
  std::vector<tn::interp::ParamInfo> ps = fn->vm.params();
  if (!ps.empty() && !params) return fail(err::InvalidValue, "cuLaunchKernel: " + kernel + " takes parameters");
  // Confined to the arguments' extents: each range an allocation of its own for this launch (set
  // before the pointers are bound, which a change of memory unbinds), the whole memory again after.
  std::optional<BoundedMemory> view;
  if (!bounds.empty()) {
    view.emplace(*state().memory, bounds);
    fn->vm.useDeviceMemory(&*view);
  }
  struct Restore {
    CUfunction f;
    ~Restore() {
      if (f) f->vm.useDeviceMemory(state().memory.get());
    }
  } restore{view ? fn : nullptr};
  for (size_t i = 0; i < ps.size(); ++i) {
    const tn::ir::Type t = ps[i].type;
    std::optional<tn::interp::Error> e;
    if (!params[i]) return fail(err::InvalidValue, "cuLaunchKernel: parameter " + std::to_string(i) + " is null");
    if (t.scalar == tn::ir::Scalar::TensorMap) {  // the 128 bytes of a CUtensorMap, as cuTensorMapEncodeTiled wrote them
      tn::interp::TensorMapBytes map;
      std::memcpy(map.data(), params[i], map.size());
      if (auto e = fn->vm.setTensorMap(ps[i].name, map)) return fail(err::InvalidValue, "cuLaunchKernel: " + e->text());
      continue;
    }
    if (t.isPtr()) {
      uint64_t address = 0;
      std::memcpy(&address, params[i], 8);
      e = fn->vm.setAddress(ps[i].name, address);
    } else {  // a scalar or a vector, as many bytes as its type
      e = fn->vm.setScalarBytes(ps[i].name, {static_cast<const std::byte*>(params[i]), t.isPred() ? 1 : t.bytes()});
    }
    if (e) return fail(err::InvalidValue, "cuLaunchKernel: " + e->text());
  }
  const Config& k = state().config;
  tn::interp::Options opts;
  opts.checkRaces = k.checkRaces;
  opts.checkUninit = k.checkUninit;
  opts.maxInstructions = k.maxInstructions;
  opts.threads = k.threads;
  std::optional<tn::interp::Error> e = fn->vm.launch({{gx, gy, gz}, {bx, by, bz}, sharedBytes}, opts);
  if (e && view)
    return fail(launchError(e->kind), e->text() + " (the runtime's extent checks confine the launch to its pointer "
                                                  "arguments' extents: an allocation here is one of them)");
  if (e) return fail(launchError(e->kind), e->text());
  return err::Success;
}

// ---- tensor maps ------------------------------------------------------------------------------

// Checks the arguments as the driver does (TC§5.1) and stores them in the simulator's own format
// (backends/interp/TensorMap.h), which the interpreter's cp.async.bulk.tensor reads back.
SIM_API CUresult cuTensorMapEncodeTiled(void* tensorMap, int dataType, uint32_t rank, void* globalAddress,
                                        const uint64_t* globalDim, const uint64_t* globalStrides, const uint32_t* boxDim,
                                        const uint32_t* elementStrides, int interleave, int swizzle, int l2Promotion,
                                        int oobFill) {
  Call c;
  if (CUresult r = initialized()) return r;
  auto invalid = [](const std::string& why) { return fail(err::InvalidValue, "cuTensorMapEncodeTiled: " + why); };
  auto n = [](uint64_t v) { return std::to_string(v); };
  // CUtensorMapDataType UINT8 .. TFLOAT32_FTZ; the sub-byte types after them are not simulated.
  static constexpr uint8_t kElementBytes[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};
  if (!tensorMap || !globalDim || !boxDim || !elementStrides || (rank > 1 && !globalStrides))
    return invalid("a null pointer argument");
  if (reinterpret_cast<uintptr_t>(tensorMap) % 64 != 0) return invalid("the CUtensorMap is not 64-byte aligned");
  if (dataType < 0 || dataType >= static_cast<int>(sizeof kElementBytes))
    return invalid("data type " + std::to_string(dataType) + " is not one the simulator encodes (0 to 12)");
  if (interleave < 0 || interleave > 2) return invalid("interleave " + std::to_string(interleave) + " is not 0, 1 or 2");
  if (swizzle < 0 || swizzle > 3) return invalid("swizzle " + std::to_string(swizzle) + " is not 0 to 3 (none, 32B, 64B, 128B)");
  if (l2Promotion < 0 || l2Promotion > 3) return invalid("L2 promotion " + std::to_string(l2Promotion) + " is not 0 to 3");
  if (oobFill < 0 || oobFill > 1) return invalid("OOB fill " + std::to_string(oobFill) + " is not 0 or 1");
  if (rank < 1 || rank > 5 || (interleave != 0 && rank < 3))
    return invalid("rank " + n(rank) + " is outside 1 to 5" + (interleave != 0 ? " (3 to 5 when interleaved)" : ""));
  const uint64_t address = reinterpret_cast<uintptr_t>(globalAddress);
  const unsigned addressAlign = interleave == 2 ? 32 : 16;
  if (address % addressAlign != 0) return invalid("the global address " + n(address) + " is not " + n(addressAlign) + "-byte aligned");
  const unsigned elementBytes = kElementBytes[dataType];
  for (uint32_t d = 0; d < rank; ++d) {
    if (globalDim[d] < 1 || globalDim[d] > (uint64_t{1} << 32))
      return invalid("globalDim[" + n(d) + "] = " + n(globalDim[d]) + " is outside 1 to 2^32");
    if (d > 0 && (globalStrides[d - 1] % 16 != 0 || globalStrides[d - 1] >= (uint64_t{1} << 40)))
      return invalid("globalStrides[" + n(d - 1) + "] = " + n(globalStrides[d - 1]) + " is not a multiple of 16 below 2^40");
    if (boxDim[d] < 1 || boxDim[d] > 256) return invalid("boxDim[" + n(d) + "] = " + n(boxDim[d]) + " is outside 1 to 256");
    if (elementStrides[d] < 1 || elementStrides[d] > 8)
      return invalid("elementStrides[" + n(d) + "] = " + n(elementStrides[d]) + " is outside 1 to 8");
  }
  const uint64_t innerBytes = uint64_t{boxDim[0]} * elementBytes;
  if (interleave == 0 && innerBytes % 16 != 0)
    return invalid("boxDim[0] * element size = " + n(innerBytes) + " bytes is not a multiple of 16");
  if (interleave == 0 && swizzle != 0 && innerBytes > (16u << swizzle))
    return invalid("boxDim[0] * element size = " + n(innerBytes) + " bytes is more than the " + n(16u << swizzle) +
                   "-byte swizzle span");
  tn::interp::TensorMapDesc desc;
  desc.dataType = static_cast<uint8_t>(dataType);
  desc.rank = static_cast<uint8_t>(rank);
  desc.interleave = static_cast<uint8_t>(interleave);
  desc.swizzle = static_cast<uint8_t>(swizzle);
  desc.l2Promotion = static_cast<uint8_t>(l2Promotion);
  desc.oobFill = static_cast<uint8_t>(oobFill);
  desc.elementBytes = static_cast<uint8_t>(elementBytes);
  desc.address = address;
  for (uint32_t d = 0; d < rank; ++d) {
    desc.dims[d] = globalDim[d];
    if (d > 0) desc.strides[d - 1] = globalStrides[d - 1];
    desc.box[d] = boxDim[d];
    desc.elementStrides[d] = static_cast<uint8_t>(elementStrides[d]);
  }
  const tn::interp::TensorMapBytes bytes = tn::interp::encodeTensorMap(desc);
  std::memcpy(tensorMap, bytes.data(), bytes.size());
  return err::Success;
}

// Every entry point has the type of the Driver member truenort binds it to (runtime/Driver.cpp):
// a call through a pointer of another function type is undefined behaviour, which clang's UBSan
// reports (the fuzz build found the handle types differing).
#define SIM_BINDS(member, symbol) \
  static_assert(std::is_same_v<decltype(&symbol), decltype(truenort::Driver::member)>, #symbol " != Driver::" #member)
SIM_BINDS(cuInit, cuInit);
SIM_BINDS(cuDriverGetVersion, cuDriverGetVersion);
SIM_BINDS(cuGetErrorName, cuGetErrorName);
SIM_BINDS(cuGetErrorString, cuGetErrorString);
SIM_BINDS(cuDeviceGetCount, cuDeviceGetCount);
SIM_BINDS(cuDeviceGet, cuDeviceGet);
SIM_BINDS(cuDeviceGetAttribute, cuDeviceGetAttribute);
SIM_BINDS(cuDeviceGetName, cuDeviceGetName);
SIM_BINDS(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain);
SIM_BINDS(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2);
SIM_BINDS(cuCtxSetCurrent, cuCtxSetCurrent);
SIM_BINDS(cuCtxGetCurrent, cuCtxGetCurrent);
SIM_BINDS(cuCtxSynchronize, cuCtxSynchronize);
SIM_BINDS(cuStreamCreate, cuStreamCreate);
SIM_BINDS(cuStreamDestroy, cuStreamDestroy_v2);
SIM_BINDS(cuStreamSynchronize, cuStreamSynchronize);
SIM_BINDS(cuStreamQuery, cuStreamQuery);
SIM_BINDS(cuEventCreate, cuEventCreate);
SIM_BINDS(cuEventDestroy, cuEventDestroy_v2);
SIM_BINDS(cuEventRecord, cuEventRecord);
SIM_BINDS(cuEventQuery, cuEventQuery);
SIM_BINDS(cuEventSynchronize, cuEventSynchronize);
SIM_BINDS(cuEventElapsedTime, cuEventElapsedTime);
SIM_BINDS(cuMemAlloc, cuMemAlloc_v2);
SIM_BINDS(cuMemFree, cuMemFree_v2);
SIM_BINDS(cuMemAllocHost, cuMemAllocHost_v2);
SIM_BINDS(cuMemFreeHost, cuMemFreeHost);
SIM_BINDS(cuMemGetInfo, cuMemGetInfo_v2);
SIM_BINDS(cuMemcpyHtoD, cuMemcpyHtoD_v2);
SIM_BINDS(cuMemcpyDtoH, cuMemcpyDtoH_v2);
SIM_BINDS(cuMemcpyDtoD, cuMemcpyDtoD_v2);
SIM_BINDS(cuMemcpyHtoDAsync, cuMemcpyHtoDAsync_v2);
SIM_BINDS(cuMemcpyDtoHAsync, cuMemcpyDtoHAsync_v2);
SIM_BINDS(cuMemcpyDtoDAsync, cuMemcpyDtoDAsync_v2);
SIM_BINDS(cuMemsetD8Async, cuMemsetD8Async);
SIM_BINDS(cuModuleLoadData, cuModuleLoadData);
SIM_BINDS(cuModuleUnload, cuModuleUnload);
SIM_BINDS(cuModuleGetFunction, cuModuleGetFunction);
SIM_BINDS(cuFuncSetAttribute, cuFuncSetAttribute);
SIM_BINDS(cuLaunchKernel, cuLaunchKernel);
SIM_BINDS(cuTensorMapEncodeTiled, cuTensorMapEncodeTiled);
SIM_BINDS(cuMemGetAddressRange, cuMemGetAddressRange_v2);
SIM_BINDS(simReport, truenortSimReport);
SIM_BINDS(simLaunchBounds, truenortSimLaunchBounds);
#undef SIM_BINDS
