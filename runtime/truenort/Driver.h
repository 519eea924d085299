// Our own declarations of the CUDA Driver API subset truenort uses, resolved at run time with
// dlopen("libcuda.so.1") so that the runtime builds and links without any CUDA toolkit.
// Versioned `_v2` entry points are used where the driver has them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "truenort/Result.h"

// The driver's opaque handle types, at global scope as cuda.h declares them: a CUstream from
// cuda.h, or a cudaStream_t of the CUDA runtime, is a truenort::CUstream.
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;

namespace truenort {

using ::CUctx_st, ::CUmod_st, ::CUfunc_st, ::CUstream_st, ::CUevent_st;
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUstream = CUstream_st*;
using CUevent = CUevent_st*;

namespace cu {
constexpr CUresult SUCCESS = 0;
constexpr CUresult ERROR_OUT_OF_MEMORY = 2;
constexpr CUresult ERROR_NOT_READY = 600;
constexpr int DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr int DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;
constexpr int FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;
constexpr unsigned STREAM_NON_BLOCKING = 1;
constexpr unsigned EVENT_DEFAULT = 0;
constexpr unsigned EVENT_DISABLE_TIMING = 2;
}  // namespace cu

// The minimum driver (cuDriverGetVersion) truenort accepts: CUDA 12.0.
constexpr int kMinDriverVersion = 12000;

struct Driver {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuGetErrorName)(CUresult, const char**);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);        // _v2
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxGetCurrent)(CUcontext*);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuStreamCreate)(CUstream*, unsigned);
  CUresult (*cuStreamDestroy)(CUstream);                  // _v2
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuStreamQuery)(CUstream);
  CUresult (*cuEventCreate)(CUevent*, unsigned);
  CUresult (*cuEventDestroy)(CUevent);                    // _v2
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventQuery)(CUevent);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);           // _v2
  CUresult (*cuMemFree)(CUdeviceptr);                     // _v2
  CUresult (*cuMemAllocHost)(void**, size_t);             // _v2
  CUresult (*cuMemFreeHost)(void*);
  CUresult (*cuMemGetInfo)(size_t*, size_t*);             // _v2
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t);                     // _v2
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t);                           // _v2
  CUresult (*cuMemcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t);                     // _v2
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);      // _v2
  CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream);            // _v2
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);      // _v2
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**);

  // CUDA 12.0's tensor-map encoder (TC§5.1), bound when the driver has it: a driver without it
  // fails only the launches of kernels with tensor maps. Enumerations as int, CUtensorMap* as
  // void*, cuuint32_t/cuuint64_t as uint32_t/uint64_t.
  CUresult (*cuTensorMapEncodeTiled)(void* tensorMap, int dataType, uint32_t rank, void* globalAddress,
                                     const uint64_t* globalDim, const uint64_t* globalStrides, const uint32_t* boxDim,
                                     const uint32_t* elementStrides, int interleave, int swizzle, int l2Promotion,
                                     int oobFill) = nullptr;

  // Bound when the driver has it (every CUDA driver does): the allocation holding a device
  // pointer, for the extent checks before launches (set_extent_checks, truenort/Bundle.h).
  CUresult (*cuMemGetAddressRange)(CUdeviceptr* base, size_t* size, CUdeviceptr p) = nullptr;

  // Present only in the simulated driver (libtruenort-sim.so, docs/simulator.md): the report
  // of the calling thread's last failing call, which fail() appends to the error message.
  const char* (*simReport)() = nullptr;
  // Also only there: the byte ranges [begin, end) (pairs) that the calling thread's next
  // cuLaunchKernel may touch, its pointer arguments' extents (runtime/sim/SimDriver.cpp).
  void (*simLaunchBounds)(const uint64_t* ranges, size_t count) = nullptr;

  int version = 0;   // cuDriverGetVersion
  void* handle = nullptr;  // dlclose'd when the Driver is destroyed
  std::string path;        // the library it was loaded from

  bool simulated() const { return simReport != nullptr; }

  Driver() = default;
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;
  ~Driver();

  // An Error for a failed call, with the CUDA error name and description.
  Error fail(CUresult r, const char* call, std::string kernel = {}) const;
};

// The process-wide driver: loaded and cuInit'ed once (thread-safe). Which library: the one
// use_driver() chose, else the environment variable TRUENORT_DRIVER, else libcuda.so.1. Distinct
// errors for a missing library (NoDriver), missing entry points or an old version
// (DriverTooOld), and cuInit failures such as CUDA_ERROR_NO_DEVICE (NoDevice / Cuda).
Result<const Driver*> driver();
// Chooses the process's driver before it is loaded: "" or "cuda" for libcuda.so.1, "sim" for
// the simulated driver libtruenort-sim.so (looked up by the dynamic loader, then in this
// truenoc's build and install library folders), or a library path. An error once a different
// driver is loaded (by the first Context::create).
Status use_driver(const std::string& choice);
// Loads a driver library from an explicit path, uncached (used by tests of the error paths).
Result<std::shared_ptr<const Driver>> loadDriverFrom(const std::string& path);

}  // namespace truenort
