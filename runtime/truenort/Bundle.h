// Loading .tnb bundles and launching their kernels with zero JIT.
//
// A Bundle validates the container (tn::bundle::Reader) when it is loaded, picks per kernel the
// code for the context's device (truenort/ArchSelect.h), and loads modules lazily on the first
// kernel() call for that kernel, or all at once with LoadOptions::eager. A cubin that holds
// several kernels (one module per target, docs/bundle-format.md) is loaded once, by the first of
// them that needs it, and serves them all. PTX is used only when
// the bundle has it and LoadOptions::allow_jit is set; every such load counts in jit_events().
//
// Thread safety: Bundle::kernel() and Kernel::launch() may be called from many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "backends/bundle/ParamType.h"
#include "truenort/ArchSelect.h"
#include "truenort/Context.h"
#include "truenort/Span.h"

namespace tn::bundle {
struct Param;
struct Manifest;
struct KernelInfo;
struct LaunchRule;
}

namespace truenort {

struct LoadOptions {
  bool allow_jit = false;  // permit PTX fallback (driver JIT, slow: ~300 ms per module on an H100)
  bool eager = false;      // load every kernel's module in Bundle::load
};

struct LoadStats {
  unsigned modules_loaded = 0;  // cuModuleLoadData calls that succeeded
  unsigned jit_events = 0;
  double load_ms = 0;  // wall time spent in cuModuleLoadData
  // ... and in cuModuleGetFunction, where a driver that loads lazily (CUDA_MODULE_LOADING=LAZY, the
  // default since CUDA 12.2) may do a kernel's share of the loading.
  double function_ms = 0;
};

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

// One launch argument as cuLaunchKernel sees it, with the type the signature is checked against.
struct Arg {
  enum class Kind : uint8_t { Pointer, U8, U16, U32, U64, S8, S16, S32, S64, F16, BF16, F32, F64 };
  Kind kind;
  uint64_t storage = 0;  // the value (pointers, integers, float bits)
  const void* address() const { return &storage; }
};

template <class T>
class DeviceBuffer;

// Conversions from C++ argument types; anything else does not compile.
inline Arg arg(CUdeviceptr p) { return {Arg::Kind::Pointer, p}; }
template <class T>
Arg arg(const DeviceBuffer<T>& b) { return {Arg::Kind::Pointer, b.ptr()}; }
inline Arg arg(uint32_t v) { return {Arg::Kind::U32, v}; }
inline Arg arg(int32_t v) { return {Arg::Kind::S32, static_cast<uint32_t>(v)}; }
inline Arg arg(uint64_t v) { return {Arg::Kind::U64, v}; }
inline Arg arg(int64_t v) { return {Arg::Kind::S64, static_cast<uint64_t>(v)}; }
Arg arg(float v);
Arg arg(double v);

class Bundle;
struct TensorMapBytes;  // one encoded CUtensorMap: 128 bytes, 128-byte aligned

struct ParamInfo {
  std::string name;
  tn::bundle::ParamType type;  // type.name(): "u32", "f32", "ptr.global", ...
  Arg::Kind kind;
};

// The argument check every launch makes before the driver sees anything: count, then each
// argument's kind against the parameter's type. Exposed for tests; kernel names the error.
Status checkSignature(Span<const ParamInfo> params, Span<const Arg> args, const std::string& kernel);
// The argument kind a bundle parameter type takes (u32 -> U32, ptr.global -> Pointer); nullopt
// for the types no argument can pass (vectors, predicates).
std::optional<Arg::Kind> argKindOf(tn::bundle::ParamType type);
// A kernel's signature as launches check it, built once when a bundle is loaded: every parameter
// but the `tmap` ones, which the runtime fills from the launch rule's tensor maps (callers never
// pass them). A parameter type with no Arg kind (a vector, a predicate) is a BadBundle error
// naming the kernel, the parameter and the type: such a kernel would be launched from the wrong
// argument slot.
Result<std::vector<ParamInfo>> signatureOf(Span<const tn::bundle::Param> params, const std::string& kernel);
// The code a bundle holds for one kernel, as selectCode() chooses among it: its cubin and PTX
// entries in entry order; for the simulated driver (docs/simulator.md) its IR entries instead,
// which are chosen by architecture as cubins are. Exposed for tests.
std::vector<CodeEntry> codeEntriesOf(const tn::bundle::Manifest& m, const tn::bundle::KernelInfo& kernel,
                                     bool simulated = false);

class Kernel {
 public:
  const std::string& name() const;
  const std::vector<ParamInfo>& signature() const;
  // The kernel's manifest entry (backends/bundle/Bundle.h): its parameters with their pointer
  // use, its launch rule and its entries. A kernel with variants (a template entry with
  // mainloop = "auto", docs/bundle-format.md) has other parameters and launch rules for some
  // targets: params() and launch_rule() are those of the code this device runs.
  const tn::bundle::KernelInfo& info() const;
  const std::vector<tn::bundle::Param>& params() const;
  const tn::bundle::LaunchRule& launch_rule() const;
  // The bundle target whose code runs on this device (truenort/ArchSelect.h), and whether it is
  // PTX for the driver to JIT.
  Target target() const;
  bool is_jit() const;
  // Grid, block and dynamic shared memory from the bundle's launch rule. Arguments are the
  // signature()'s: every parameter but the tmap ones. Each tmap parameter gets the tensor map
  // its rule describes, encoded with the driver's cuTensorMapEncodeTiled for this launch's
  // arguments (cached per parameter, pointer, extents and stride); an encoding error is a Status
  // naming the kernel and the parameter.
  template <class... A>
  Status launch(const Stream& s, const A&... args) const {
    const Arg list[] = {arg(args)..., Arg{}};
    return launch_args(s, Span<const Arg>(list, sizeof...(A)));
  }
  // Explicit geometry; the signature is still checked.
  template <class... A>
  Status launch_with(const Stream& s, Dim3 grid, Dim3 block, unsigned dynamic_shared, const A&... args) const {
    const Arg list[] = {arg(args)..., Arg{}};
    return launch_args(s, Span<const Arg>(list, sizeof...(A)), &grid, &block, dynamic_shared);
  }
  Status launch_args(const Stream& s, Span<const Arg> args, const Dim3* grid = nullptr,
                     const Dim3* block = nullptr, unsigned dynamic_shared = 0) const;
  // Launches with explicit geometry and cuLaunchKernel-style pointers to the signature()'s
  // arguments (no tmap parameters: they are filled as launch() fills them), whose count is checked
  // against the signature (their types cannot be: generated launch functions are typed).
  Status launch_raw(const Stream& s, Dim3 grid, Dim3 block, unsigned dynamic_shared, void** args,
                    size_t num_args) const;
  // The same with grid, block and dynamic shared memory from launch_rule(), as launch() takes them
  // (a generated launch function of a kernel with variants calls this).
  Status launch_raw(const Stream& s, void** args, size_t num_args) const;
  // Checks count and types against the manifest signature (no driver involved).
  Status check_args(Span<const Arg> args) const;
  CUfunction handle() const { return fn_; }

 private:
  friend class Bundle;
  struct Loaded;
  Kernel(const Bundle* b, const Loaded* k, CUfunction fn) : bundle_(b), k_(k), fn_(fn) {}
  // The signature's arguments spread over every parameter, the tensor maps encoded into theirs,
  // and the launch; the grid and block from the launch rule unless given.
  Status launch_caller(const Stream& s, const void* const* args, const Dim3* grid, const Dim3* block,
                       unsigned dynamic_shared) const;
  // Encodes (or finds in the kernel's cache) every tensor map for a launch; `full` holds every
  // parameter's argument, and the tmap ones are pointed at `maps`.
  Status encode_tensor_maps(const void** full, TensorMapBytes* maps) const;
  // The extent checks of one launch (set_extent_checks) over every parameter's argument; with
  // `bounds`, also each pointer's range [begin, end) as pairs (its extent, or its whole
  // allocation), or none when a pointer's allocation is unknown.
  Status check_extents(const void* const* full, std::vector<uint64_t>* bounds) const;
  // cuLaunchKernel with every parameter's argument; the simulated driver confined to `bounds`.
  Status enqueue(const Stream& s, Dim3 grid, Dim3 block, unsigned dynamic_shared, void** args,
                 const std::vector<uint64_t>* bounds = nullptr) const;
  const Bundle* bundle_;
  const Loaded* k_;
  CUfunction fn_;
};

// Extent checks, off by default. When on, before each launch every pointer argument whose
// parameter has an extent in the bundle (the elements its tensor holds for the launch's sizes, as
// a template declares it: docs/bundle-format.md, "Extents") is looked up with the driver's
// cuMemGetAddressRange, and a launch whose buffer ends inside the extent is refused with
// InvalidArgument naming the kernel, the parameter, the extent and the bytes the allocation has
// from the pointer on: a buffer too small for the sizes never reaches the GPU. A null pointer, or
// one the driver places in no allocation (host memory), is not checked. One driver call per
// pointer per launch. The environment variable TRUENORT_CHECK_EXTENTS=1 turns them on (read at the
// first launch unless set_extent_checks was called first).
void set_extent_checks(bool on);
bool extent_checks();

class Bundle {
 public:
  // Copies `bytes`, validates them and selects code for ctx's device.
  static Result<Bundle> load(const Context& ctx, Span<const uint8_t> bytes, LoadOptions opts = {});
  // Reads the file with read_file, then load()s it.
  static Result<Bundle> load_file(const Context& ctx, const std::string& path, LoadOptions opts = {});
  // The bytes of a bundle file. InvalidArgument for a folder, an unreadable file, or one larger
  // than max_bytes (default: 1 GiB, the most a bundle can hold): a regular file's size is
  // checked before reading, a pipe or device is read to at most max_bytes + 1. OutOfMemory when
  // the bytes do not fit in memory.
  static Result<std::vector<uint8_t>> read_file(const std::string& path, uint64_t max_bytes = kMaxFileBytes);
  static constexpr uint64_t kMaxFileBytes = uint64_t{1} << 30;
  Bundle(Bundle&&) noexcept;
  Bundle& operator=(Bundle&&) noexcept;
  ~Bundle();

  Result<Kernel> kernel(std::string_view name) const;
  std::vector<std::string> kernel_names() const;
  unsigned jit_events() const;
  LoadStats stats() const;
  const Context& context() const;

 private:
  friend class Kernel;
  struct State;
  explicit Bundle(std::unique_ptr<State> s);
  // load() over bytes the bundle takes (load_file's, not copied again).
  static Result<Bundle> adopt(const Context& ctx, std::vector<uint8_t> bytes, LoadOptions opts);
  std::unique_ptr<State> state_;
};

}  // namespace truenort
