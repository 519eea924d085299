// The kernel interpreter: runs an IR kernel on the CPU with the semantics the GPU gives it.
// A launch covers a grid of blocks; the threads of a block run in warps of 32 that execute in
// lockstep under an active mask and reconverge at immediate post-dominators, so shfl.sync, vote
// and laneid behave as on hardware. Blocks may run in parallel on host threads. Global memory is
// one bounds-checked host buffer per pointer parameter, or a DeviceMemory whose allocations the
// pointers address directly (the simulated driver's). Faults (out-of-bounds or misaligned accesses, divergent or partial barriers, bad
// collective masks, shared-memory races, division by zero, an exhausted instruction budget) stop
// the launch and come back as an Error value; this library never prints.
// Semantics, limits and the measured speed are documented in docs/interpreter.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "backends/interp/TensorMap.h"
#include "ir/Diagnostics.h"
#include "ir/IR.h"

namespace tn::interp {

enum class ErrorKind : uint8_t {
  Setup,              // bad binding, launch configuration or kernel the interpreter cannot run
  OutOfBounds,        // global/shared access outside its buffer or array
  Misaligned,         // access not aligned to its size
  InvalidPointer,     // pointer into no bound buffer, or into an address space without memory
  UninitializedRead,  // shared memory read before any thread of the block wrote it (optional)
  DivergentBarrier,   // bar.sync or a named barrier executed by only part of a warp's live threads
  PartialBarrier,     // bar.sync that some threads of the block exit without reaching; a named
                      // barrier's count out of range or not the one its phase began with
  CollectiveMask,     // shfl.sync/vote.sync membermask naming inactive, exited or missing lanes
  SharedRace,         // two threads touch one shared byte, one writes, no barrier between (optional)
  GlobalRace,         // the same for a global byte: two threads of a block with no barrier between, or two
                      // blocks of the launch (optional, with SharedRace's check)
  DivisionByZero,     // integer div/rem by zero
  AsyncCopy,          // a shared byte used before the cp.async writing it is waited for (and, for
                      // other threads, made visible by a bar.sync after the wait); a bad src-size
  InstructionBudget,  // a thread, or the whole launch, executed more instructions than allowed
  Mbarrier,           // an mbarrier used before mbarrier.init, re-initialised while in use, given
                      // more arrivals than its phase expects, or a tx-count out of range
  Deadlock,           // every running thread of a block waits on an mbarrier phase or a named
                      // barrier that cannot complete
  Wgmma,              // wgmma.mma_async without a wgmma.fence after its registers were written, its
                      // registers read before the covering wgmma.wait_group, its shared operands
                      // written unfenced or while it runs, or a warpgroup not executing it together
  AsyncProxy,         // TMA: a destination byte used before its mbarrier phase was seen complete, a store's
                      // source written before its wait_group.read or without fence.proxy.async, a bad map
};

// A fault or setup error. diag carries file, location and the full message; text() formats it
// as "FILE:LINE:COL: error: MESSAGE". Run-time faults also name the block and thread.
struct Error {
  ErrorKind kind = ErrorKind::Setup;
  ir::Diagnostic diag{ir::Severity::Error, "", {}, ""};
  std::optional<ir::Dim3> block;
  std::optional<ir::Dim3> thread;
  std::string text() const { return ir::formatDiagnostic(diag); }
};

struct LaunchConfig {
  ir::Dim3 grid;
  ir::Dim3 block;
  uint32_t dynamicShared = 0;  // bytes of dynamic shared memory (extern `shared @x: T[]`)
};

struct Options {
  bool checkRaces = false;   // report data races: shared and global memory between barriers, global between blocks
  bool checkUninit = false;  // report reads of shared memory the block never wrote
  uint64_t maxInstructions = 100'000'000;  // per thread; exceeding it is an InstructionBudget fault
  // Thread instructions of the whole launch (Stats::instructions); checked whenever a warp stops
  // at a barrier or exits, so a launch may overshoot it by one warp's run.
  uint64_t maxLaunchInstructions = 10'000'000'000;
  // Host threads that run blocks in parallel (0: one per core). A kernel with global or generic
  // atomics runs its blocks in order on one thread, so that its results stay deterministic.
  unsigned threads = 1;
};

// Device memory that global pointers address directly, as on a GPU: the simulated driver's
// allocations. It must not change while a launch runs. Addresses must lie below 2^48 with top
// 16 bits other than 0xFFFF (the tag of generic pointers into shared memory).
class DeviceMemory {
 public:
  struct Allocation {
    uint64_t base = 0;
    uint64_t bytes = 0;
    std::byte* host = nullptr;  // where the allocation's bytes live
  };
  virtual ~DeviceMemory() = default;
  // The live allocation with the greatest base <= address (which may end before it), if any.
  virtual std::optional<Allocation> below(uint64_t address) const = 0;
};

struct Stats {
  uint64_t instructions = 0;      // thread instructions: one per active thread per executed op
  uint64_t warpInstructions = 0;  // lockstep steps of whole warps
  uint64_t blocks = 0;
  uint64_t threads = 0;
  double seconds = 0;  // wall time of the last launch
};

struct ParamInfo {
  std::string name;
  ir::Type type;
  bool bound = false;
};

class Interpreter {
 public:
  Interpreter();
  ~Interpreter();
  Interpreter(Interpreter&&) noexcept;
  Interpreter& operator=(Interpreter&&) noexcept;

  // Pre-decodes kernel `name` of m. The interpreter keeps what it needs; m may go away after.
  std::optional<Error> load(const ir::Module& m, std::string_view name);

  std::vector<ParamInfo> params() const;

  // Makes pointer parameters take device addresses into `memory` (setAddress) instead of
  // buffers; null returns to buffers. The memory must outlive the launches.
  void useDeviceMemory(const DeviceMemory* memory);
  // Sets a pointer parameter to a device address (only with device memory).
  std::optional<Error> setAddress(std::string_view param, uint64_t address);
  // The value a bound pointer parameter has in the kernel: its device address, or with buffers the
  // tagged pointer to the buffer's first byte (what a tensor map's address names); nullopt when
  // it is not a bound pointer parameter.
  std::optional<uint64_t> pointerValue(std::string_view param) const;

  // Binds a tmap parameter's 128 bytes (TensorMap.h, as the simulated cuTensorMapEncodeTiled writes
  // them) for the next launches; a launch refuses bytes that decodeTensorMap rejects or that
  // describe a map cp.async.bulk.tensor cannot use, naming the parameter.
  std::optional<Error> setTensorMap(std::string_view param, const TensorMapBytes& bytes);

  // Binds the global buffer of a pointer parameter (replacing any earlier one).
  std::optional<Error> bindBuffer(std::string_view param, std::vector<std::byte> bytes);
  template <class T>
  std::optional<Error> bindArray(std::string_view param, const std::vector<T>& values) {
    static_assert(std::is_trivially_copyable_v<T>);
    std::vector<std::byte> bytes(values.size() * sizeof(T));
    if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
    return bindBuffer(param, std::move(bytes));
  }

  // Sets a scalar parameter. The typed form checks that T matches the parameter's type (float
  // for float types, same width); the text form parses a literal of the parameter's type.
  template <class T>
  std::optional<Error> setScalar(std::string_view param, T value) {
    static_assert(std::is_arithmetic_v<T>);
    uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    return setScalarChecked(param, bits, std::is_floating_point_v<T>, std::is_same_v<T, bool>, sizeof(T));
  }
  // A scalar parameter's bits (the low bits of `bits`, as wide as its type).
  std::optional<Error> setScalarBits(std::string_view param, uint64_t bits);
  // A scalar or vector parameter's value as it lies in a kernel's parameter buffer (a vector's
  // lanes in order, little-endian): exactly as many bytes as its type has (a pred: 1).
  std::optional<Error> setScalarBytes(std::string_view param, std::span<const std::byte> bytes);
  // A literal of the parameter's type; a vector's lanes as that many literals of its element
  // type separated by commas ("1.5,2,0x3,-4").
  std::optional<Error> setScalarText(std::string_view param, std::string_view text);

  std::optional<Error> launch(const LaunchConfig& cfg, const Options& opts = {});

  // The bytes of a pointer parameter's buffer (after launches: the results); null when unbound.
  const std::vector<std::byte>* buffer(std::string_view param) const;
  template <class T>
  std::vector<T> read(std::string_view param) const {
    static_assert(std::is_trivially_copyable_v<T>);
    const std::vector<std::byte>* b = buffer(param);
    std::vector<T> out(b ? b->size() / sizeof(T) : 0);
    if (!out.empty()) std::memcpy(out.data(), b->data(), out.size() * sizeof(T));
    return out;
  }

  const Stats& stats() const;

 private:
  std::optional<Error> setScalarChecked(std::string_view param, uint64_t bits, bool isFloat, bool isBool,
                                        unsigned bytes);
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace tn::interp
