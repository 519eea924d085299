// The simulated CUDA driver's state: a device described by TRUENORT_SIM, device memory as host
// allocations at device addresses the interpreter bounds-checks, streams that run their work
// when it is enqueued (so in order), events stamped with the host clock, and modules made from a
// bundle's IR whose kernels run on the interpreter. SimDriver.cpp exports the CUDA entry points
// over it; every entry point holds the one lock, so calls from many threads are serialized.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <set>
#include <string>
#include <vector>

#include "backends/interp/Interp.h"
#include "ir/IR.h"
#include "truenort/Driver.h"

// The driver's opaque handle types, defined here: the simulator owns what they point to. They
// are the very types truenort/Driver.h declares, so that the entry points have exactly the
// function types truenort calls them through.
struct CUctx_st {};
struct CUstream_st {};
struct CUevent_st {
  bool timing = true;
  std::optional<std::chrono::steady_clock::time_point> recorded;
};

namespace truenort::sim {

using CUresult = int;

// The CUresult codes the simulator returns.
namespace err {
constexpr CUresult Success = 0, InvalidValue = 1, OutOfMemory = 2, NotInitialized = 3, NoDevice = 100,
                   InvalidDevice = 101, InvalidImage = 200, InvalidContext = 201, InvalidHandle = 400,
                   NotFound = 500, NotReady = 600, IllegalAddress = 700, LaunchOutOfResources = 701,
                   LaunchTimeout = 702, MisalignedAddress = 716, LaunchFailed = 719, NotSupported = 801;
}
// cuGetErrorName / cuGetErrorString; null for codes the simulator does not know.
const char* errorName(CUresult r);
const char* errorString(CUresult r);

// The simulated device, from TRUENORT_SIM ("key=value,..."; see docs/simulator.md).
struct Config {
  std::string name = "truenort simulated GPU (H100-like, sm_90)";
  unsigned sm = 90;                         // compute capability major*10 + minor
  int sms = 132;                            // multiprocessors
  uint64_t memory = uint64_t{80} << 30;     // bytes of device memory
  int sharedPerBlock = 48 * 1024;           // without opting in
  int sharedOptin = 227 * 1024;             // cuFuncSetAttribute's limit
  int sharedPerSm = 228 * 1024;
  unsigned threads = 0;                     // interpreter threads per launch (0: one per core)
  bool checkRaces = true, checkUninit = true;
  uint64_t maxInstructions = 100'000'000;   // per thread
};
// Parses TRUENORT_SIM's text into c; the error names the bad key or value.
std::optional<std::string> parseConfig(const std::string& text, Config& c);

// Device memory: allocations at increasing addresses, never reused, with a gap after each, so
// that an overrun or a use after free lands in no live allocation.
class Memory : public tn::interp::DeviceMemory {
 public:
  explicit Memory(uint64_t capacity) : capacity_(capacity) {}
  ~Memory() override;
  CUresult allocate(uint64_t bytes, uint64_t& address);
  CUresult release(uint64_t address);
  // The host bytes of [address, address + bytes) when it lies inside one live allocation.
  std::byte* range(uint64_t address, uint64_t bytes) const;
  std::optional<Allocation> below(uint64_t address) const override;
  uint64_t used() const { return used_; }
  uint64_t capacity() const { return capacity_; }

 private:
  struct Block {
    std::byte* host;
    uint64_t bytes;
  };
  uint64_t capacity_;
  uint64_t used_ = 0;
  uint64_t next_ = uint64_t{0x7000} << 32;  // below 2^48, as the interpreter requires
  std::map<uint64_t, Block> blocks_;
};

// Memory as one launch may touch it: only the given byte ranges [begin, end) (each clipped to
// the allocation holding its start; overlapping ones merged), each an allocation of its own.
class BoundedMemory : public tn::interp::DeviceMemory {
 public:
  BoundedMemory(const Memory& memory, const std::vector<std::pair<uint64_t, uint64_t>>& ranges);
  std::optional<Allocation> below(uint64_t address) const override;

 private:
  std::map<uint64_t, Allocation> ranges_;
};

// A module: the IR text of a bundle entry, parsed and verified, and the kernels taken from it.
struct Module {
  tn::ir::Module ir;
  std::map<std::string, std::unique_ptr<CUfunc_st>, std::less<>> functions;
};

}  // namespace truenort::sim

struct CUmod_st {
  truenort::sim::Module m;
};

struct CUfunc_st {
  const tn::ir::Kernel* kernel = nullptr;  // ir owned by the module
  tn::interp::Interpreter vm;
  uint64_t staticShared = 0;
  int maxDynamicShared = 0;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
};
