#include "truenort/Bundle.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <optional>
#include <utility>

#include "backends/bundle/Bundle.h"
#include "backends/bundle/ReadFile.h"
#include "truenort/ArchSelect.h"
#include "truenort/Nvtx.h"

namespace truenort {

namespace {

Error make(Errc code, std::string call, std::string message, std::string kernel = {}) {
  Error e;
  e.code = code;
  e.call = std::move(call);
  e.message = std::move(message);
  e.kernel = std::move(kernel);
  return e;
}

const char* kindName(Arg::Kind k) {
  static constexpr const char* kNames[] = {"pointer", "u8",  "u16", "u32", "u64", "s8",  "s16",
                                           "s32",     "s64", "f16", "bf16", "f32", "f64"};
  return kNames[static_cast<size_t>(k)];
}

}  // namespace

Arg arg(float v) { return {Arg::Kind::F32, std::bit_cast<uint32_t>(v)}; }
Arg arg(double v) { return {Arg::Kind::F64, std::bit_cast<uint64_t>(v)}; }

struct alignas(128) TensorMapBytes {
  unsigned char bytes[128];
};

namespace {

// What an encoded tensor map depends on beyond its rule: the cache key.
struct TensorMapKey {
  uint32_t param;
  uint64_t address, dims[3], strides[2];
  bool operator==(const TensorMapKey&) const = default;
};
// Encoded maps kept per kernel; past this many the oldest is replaced.
constexpr size_t kMaxCachedTensorMaps = 64;

}  // namespace

struct Kernel::Loaded {
  const tn::bundle::KernelInfo* info = nullptr;
  const tn::bundle::Entry* entry = nullptr;
  bool jit = false;
  bool ir = false;  // the simulated driver runs the entry's IR
  Target target;    // of the selected entry
  CUfunction fn = nullptr;  // set once its module is loaded
  int shared_optin = 0;  // the dynamic shared memory this function is opted in to
  std::vector<ParamInfo> signature;
  // The parameters and launch rule of the selected code: the kernel's own, or a variant's (a
  // template entry with mainloop = "auto", bundle format 7).
  const std::vector<tn::bundle::Param>* params = nullptr;
  const tn::bundle::LaunchRule* launch = nullptr;
  tn::bundle::BoundRule rule;  // borrows *launch
  std::vector<bool> isTensorMap;  // per parameter: filled by the runtime, not passed by callers
  // Encoded tensor maps (with the bundle's mutex), replaced oldest first.
  std::vector<std::pair<TensorMapKey, TensorMapBytes>> maps;
  size_t nextMap = 0;
};

struct Bundle::State {
  const Context* ctx = nullptr;
  LoadOptions opts;
  std::vector<uint8_t> bytes;
  std::optional<tn::bundle::Reader> reader;
  std::vector<Kernel::Loaded> kernels;  // parallel to the manifest's kernels
  // Loaded driver modules by payload offset: a cubin shared by several kernels (a module, format
  // 6) is loaded once for all of them.
  std::vector<std::pair<uint64_t, CUmodule>> modules;
  mutable std::mutex mu;
  LoadStats stats;

  Status loadModule(Kernel::Loaded& k);  // with mu held
  // For the error of a payload that cannot be read: the kernels that share it, if more than k.
  std::string sharedBy(const Kernel::Loaded& k) const;
  ~State();
};

Bundle::State::~State() {
  if (!ctx || !ctx->make_current()) return;
  for (auto& [offset, module] : modules) (void)ctx->driver().cuModuleUnload(module);
}

std::string Bundle::State::sharedBy(const Kernel::Loaded& k) const {
  std::vector<std::string_view> names;
  for (const Kernel::Loaded& other : kernels)
    if (other.entry->offset == k.entry->offset) names.push_back(other.info->name);
  if (names.size() < 2) return {};
  constexpr size_t kListed = 6;
  std::string out = " (a module shared by " + std::to_string(names.size()) + " kernels: ";
  for (size_t i = 0; i < names.size() && i < kListed; ++i) out += (i ? ", " : "") + std::string(names[i]);
  if (names.size() > kListed) out += " and " + std::to_string(names.size() - kListed) + " more";
  return out + ")";
}

Status Bundle::State::loadModule(Kernel::Loaded& k) {
  auto it = std::find_if(modules.begin(), modules.end(), [&](const auto& m) { return m.first == k.entry->offset; });
  if (it == modules.end()) {
    auto payload = reader->payload(*k.entry);
    if (!payload) return make(Errc::BadBundle, "Bundle::kernel", payload.error().message + sharedBy(k), k.info->name);
    if (k.jit || k.ir) payload.value().push_back('\0');  // the driver reads PTX (and IR) as a C string
    if (Status st = ctx->make_current(); !st) return st;
    modules.reserve(modules.size() + 1);  // so that the push below cannot throw and leak the module
    CUmodule module = nullptr;
    auto t0 = std::chrono::steady_clock::now();
    CUresult r = ctx->driver().cuModuleLoadData(&module, payload.value().data());
    stats.load_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (r != cu::SUCCESS) return ctx->driver().fail(r, "cuModuleLoadData", k.info->name);
    ++stats.modules_loaded;
    if (k.jit) ++stats.jit_events;
    modules.emplace_back(k.entry->offset, module);
    it = modules.end() - 1;
  } else if (Status st = ctx->make_current(); !st) {
    return st;
  }
  auto t0 = std::chrono::steady_clock::now();
  CUresult g = ctx->driver().cuModuleGetFunction(&k.fn, it->second, k.info->name.c_str());
  stats.function_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (g != cu::SUCCESS) {
    k.fn = nullptr;
    return ctx->driver().fail(g, "cuModuleGetFunction", k.info->name);
  }
  return {};
}

Bundle::Bundle(std::unique_ptr<State> s) : state_(std::move(s)) {}
Bundle::Bundle(Bundle&&) noexcept = default;
Bundle& Bundle::operator=(Bundle&& o) noexcept {
  std::swap(state_, o.state_);
  return *this;
}
Bundle::~Bundle() = default;

Result<Bundle> Bundle::load(const Context& ctx, Span<const uint8_t> bytes, LoadOptions opts) {
  return adopt(ctx, std::vector<uint8_t>(bytes.begin(), bytes.end()), opts);
}

Result<Bundle> Bundle::adopt(const Context& ctx, std::vector<uint8_t> bytes, LoadOptions opts) {
  auto s = std::make_unique<State>();
  s->ctx = &ctx;
  s->opts = opts;
  s->bytes = std::move(bytes);
  // Only the selected payloads are read, each checked by its own checksum when decompressed.
  auto reader = tn::bundle::Reader::open(s->bytes, tn::bundle::Verify::Used);
  if (!reader) return make(Errc::BadBundle, "Bundle::load", reader.error().message);
  s->reader.emplace(std::move(reader.value()));
  const tn::bundle::Manifest& m = s->reader->manifest();
  for (const tn::bundle::KernelInfo& info : m.kernels) {
    const bool simulated = ctx.simulated();
    std::vector<CodeEntry> entries = codeEntriesOf(m, info, simulated);
    if (simulated && entries.empty())
      return make(Errc::NoCompatibleCode, "Bundle::load",
                  "the bundle carries no IR, which the simulated driver runs (it was built with --no-ir or "
                  "ir = false)",
                  info.name);
    auto sel = selectCode(ctx.sm(), entries, opts.allow_jit, info.name);
    if (!sel) return sel.error();
    // The selection indexes the code entries, a subset of the bundle's: find the entry by target and kind.
    const auto target = static_cast<uint32_t>(m.targetIndex(entries[sel.value().index].target));
    const std::vector<tn::bundle::Param>& params = info.paramsFor(target);
    auto sig = signatureOf(params, info.name);
    if (!sig) return sig.error();
    auto rule = tn::bundle::bindRule(info.launchFor(target), params);
    if (!rule) return make(Errc::BadBundle, "Bundle::load", "launch rule: " + rule.error().message, info.name);
    Kernel::Loaded k;
    k.info = &info;
    k.params = &params;
    k.launch = &info.launchFor(target);
    k.entry = info.find(target, simulated           ? tn::bundle::PayloadKind::Ir
                                : sel.value().jit   ? tn::bundle::PayloadKind::Ptx
                                                    : tn::bundle::PayloadKind::Cubin);
    k.jit = sel.value().jit;
    k.ir = simulated;
    k.target = entries[sel.value().index].target;
    k.signature = std::move(sig).value();
    k.rule = std::move(*rule);
    for (const tn::bundle::Param& p : params) k.isTensorMap.push_back(p.type.scalar == tn::bundle::ParamType::Scalar::TensorMap);
    s->kernels.push_back(std::move(k));
  }
  if (opts.eager) {
    std::lock_guard lock(s->mu);
    for (Kernel::Loaded& k : s->kernels)
      if (Status st = s->loadModule(k); !st) return st.error();
  }
  return Bundle(std::move(s));
}

static_assert(Bundle::kMaxFileBytes == tn::bundle::kMaxBundleBytes);

Result<std::vector<uint8_t>> Bundle::read_file(const std::string& path, uint64_t max_bytes) {
  const char* call = "Bundle::read_file";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make(Errc::InvalidArgument, call, "cannot open '" + path + "': " + std::strerror(errno));
  std::vector<uint8_t> bytes;
  int err = 0;
  tn::bundle::ReadStatus st = tn::bundle::readBounded(fd, max_bytes, bytes, err);
  ::close(fd);
  switch (st) {
    case tn::bundle::ReadStatus::Ok: return bytes;
    case tn::bundle::ReadStatus::IsDirectory: return make(Errc::InvalidArgument, call, "'" + path + "' is a directory");
    case tn::bundle::ReadStatus::TooLarge:
      return make(Errc::InvalidArgument, call, "'" + path + "' is larger than " + std::to_string(max_bytes) + " bytes");
    case tn::bundle::ReadStatus::CannotRead:
      return make(Errc::InvalidArgument, call, "cannot read '" + path + "': " + std::strerror(err));
    case tn::bundle::ReadStatus::OutOfMemory: break;
  }
  return make(Errc::OutOfMemory, call, "not enough memory to read '" + path + "'");
}

Result<Bundle> Bundle::load_file(const Context& ctx, const std::string& path, LoadOptions opts) {
  auto bytes = read_file(path);
  if (!bytes) return bytes.error();
  // The API never throws: adopt() builds tables, which may not fit.
  try {
    return adopt(ctx, std::move(bytes).value(), opts);
  } catch (const std::bad_alloc&) {
    return make(Errc::OutOfMemory, "Bundle::load_file", "not enough memory to load '" + path + "'");
  }
}

Result<Kernel> Bundle::kernel(std::string_view name) const {
  for (Kernel::Loaded& k : state_->kernels) {
    if (k.info->name != name) continue;
    std::lock_guard lock(state_->mu);
    if (!k.fn)
      if (Status st = state_->loadModule(k); !st) return st.error();
    return Kernel(this, &k, k.fn);
  }
  std::string have;
  for (const Kernel::Loaded& k : state_->kernels) have += (have.empty() ? "" : ", ") + k.info->name;
  return make(Errc::KernelNotFound, "Bundle::kernel", "no kernel '" + std::string(name) + "' (the bundle has " + have + ")",
              std::string(name));
}

std::vector<std::string> Bundle::kernel_names() const {
  std::vector<std::string> out;
  for (const Kernel::Loaded& k : state_->kernels) out.push_back(k.info->name);
  return out;
}

unsigned Bundle::jit_events() const {
  std::lock_guard lock(state_->mu);
  return state_->stats.jit_events;
}

LoadStats Bundle::stats() const {
  std::lock_guard lock(state_->mu);
  return state_->stats;
}

const Context& Bundle::context() const { return *state_->ctx; }

const std::string& Kernel::name() const { return k_->info->name; }
const tn::bundle::KernelInfo& Kernel::info() const { return *k_->info; }
const std::vector<tn::bundle::Param>& Kernel::params() const { return *k_->params; }
const tn::bundle::LaunchRule& Kernel::launch_rule() const { return *k_->launch; }

Target Kernel::target() const { return k_->target; }

bool Kernel::is_jit() const { return k_->jit; }

const std::vector<ParamInfo>& Kernel::signature() const { return k_->signature; }

std::vector<CodeEntry> codeEntriesOf(const tn::bundle::Manifest& m, const tn::bundle::KernelInfo& kernel,
                                     bool simulated) {
  std::vector<CodeEntry> out;
  for (const tn::bundle::Entry& e : kernel.entries)
    if ((e.kind == tn::bundle::PayloadKind::Ir) == simulated)  // IR is for the simulated driver only
      out.push_back({m.targets[e.target], e.kind == tn::bundle::PayloadKind::Ptx});
  return out;
}

Result<std::vector<ParamInfo>> signatureOf(Span<const tn::bundle::Param> params, const std::string& kernel) {
  std::vector<ParamInfo> out;
  for (const tn::bundle::Param& p : params) {
    if (p.type.scalar == tn::bundle::ParamType::Scalar::TensorMap) continue;  // filled by the runtime
    std::optional<Arg::Kind> kind = argKindOf(p.type);
    if (!kind)
      return make(Errc::BadBundle, "Bundle::load",
                  "parameter '" + p.name + "' has type '" + p.type.name() + "', which the runtime cannot pass to a kernel",
                  kernel);
    out.push_back({p.name, p.type, *kind});
  }
  return out;
}

Status checkSignature(Span<const ParamInfo> params, Span<const Arg> args, const std::string& kernel) {
  if (args.size() != params.size())
    return make(Errc::SignatureMismatch, "Kernel::launch",
                "expected " + std::to_string(params.size()) + " arguments, got " + std::to_string(args.size()), kernel);
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].kind != args[i].kind)
      return make(Errc::SignatureMismatch, "Kernel::launch",
                  "argument " + std::to_string(i) + " ('" + params[i].name + "') must be " + params[i].type.name() +
                      ", got " + kindName(args[i].kind),
                  kernel);
  return {};
}

std::optional<Arg::Kind> argKindOf(tn::bundle::ParamType type) {
  using S = tn::bundle::ParamType::Scalar;
  if (type.lanes != 1) return std::nullopt;
  switch (type.scalar) {
    case S::Ptr: return Arg::Kind::Pointer;
    case S::U8: case S::B8: return Arg::Kind::U8;
    case S::U16: case S::B16: return Arg::Kind::U16;
    case S::U32: case S::B32: return Arg::Kind::U32;
    case S::U64: case S::B64: return Arg::Kind::U64;
    case S::S8: return Arg::Kind::S8;
    case S::S16: return Arg::Kind::S16;
    case S::S32: return Arg::Kind::S32;
    case S::S64: return Arg::Kind::S64;
    case S::F16: return Arg::Kind::F16;
    case S::BF16: return Arg::Kind::BF16;
    case S::F32: return Arg::Kind::F32;
    case S::F64: return Arg::Kind::F64;
    case S::Pred: case S::TensorMap: case S::E4M3: case S::E5M2: return std::nullopt;
  }
  return std::nullopt;
}

Status Kernel::check_args(Span<const Arg> args) const { return checkSignature(k_->signature, args, k_->info->name); }

Status Kernel::launch_args(const Stream& s, Span<const Arg> args, const Dim3* grid, const Dim3* block,
                           unsigned dynamic_shared) const {
  if (Status st = check_args(args); !st) return st;
  const void* ptrs[tn::bundle::kMaxParams];  // args.size() is at most the parameter count, which the reader capped
  for (size_t i = 0; i < args.size(); ++i) ptrs[i] = args[i].address();
  return launch_caller(s, ptrs, grid, block, dynamic_shared);
}

// launch_raw's arguments are pointers, so only their count can be checked.
static Status checkCount(size_t want, size_t got, const std::string& kernel) {
  if (got == want) return {};
  return make(Errc::SignatureMismatch, "Kernel::launch",
              "expected " + std::to_string(want) + " arguments, got " + std::to_string(got), kernel);
}

Status Kernel::launch_raw(const Stream& s, Dim3 g, Dim3 b, unsigned shared, void** args, size_t num_args) const {
  if (Status st = checkCount(k_->signature.size(), num_args, k_->info->name); !st) return st;
  return launch_caller(s, args, &g, &b, shared);
}

Status Kernel::launch_raw(const Stream& s, void** args, size_t num_args) const {
  if (Status st = checkCount(k_->signature.size(), num_args, k_->info->name); !st) return st;
  return launch_caller(s, args, nullptr, nullptr, 0);
}

Status Kernel::launch_caller(const Stream& s, const void* const* args, const Dim3* grid, const Dim3* block,
                             unsigned shared) const {
  const size_t n = k_->params->size();
  const void* full[tn::bundle::kMaxParams];
  for (size_t i = 0, next = 0; i < n; ++i) full[i] = k_->isTensorMap[i] ? nullptr : args[next++];
  Dim3 g, b;
  if (grid && block) {
    g = *grid;
    b = *block;
  } else {
    auto dims = tn::bundle::evaluate(k_->rule, full);
    if (!dims) return make(Errc::InvalidArgument, "launch rule", dims.error().message, k_->info->name);
    g = {dims->grid[0], dims->grid[1], dims->grid[2]};
    b = {dims->block[0], dims->block[1], dims->block[2]};
    shared = dims->dynamicShared;
  }
  if (g.x == 0 || g.y == 0 || g.z == 0) return {};  // an empty problem: nothing to launch, no maps to encode
  // With the checks on, the simulated driver also confines the launch to its pointers' extents.
  std::vector<uint64_t> bounds;
  if (extent_checks())
    if (Status st = check_extents(full, bundle_->context().driver().simLaunchBounds ? &bounds : nullptr); !st)
      return st;
  const std::vector<uint64_t>* confine = bounds.empty() ? nullptr : &bounds;
  if (k_->launch->tensorMaps.empty()) return enqueue(s, g, b, shared, const_cast<void**>(full), confine);
  std::vector<TensorMapBytes> maps(k_->launch->tensorMaps.size());
  if (Status st = encode_tensor_maps(full, maps.data()); !st) return st;
  return enqueue(s, g, b, shared, const_cast<void**>(full), confine);
}

namespace {

std::atomic<bool> g_extentChecks{false};
std::atomic<bool> g_extentChecksChosen{false};  // set_extent_checks was called: the environment is not read
std::once_flag g_extentEnvOnce;

}  // namespace

void set_extent_checks(bool on) {
  g_extentChecksChosen.store(true);
  g_extentChecks.store(on);
}

bool extent_checks() {
  std::call_once(g_extentEnvOnce, [] {
    const char* env = std::getenv("TRUENORT_CHECK_EXTENTS");
    if (!g_extentChecksChosen.load() && env && std::string_view(env) == "1") g_extentChecks.store(true);
  });
  return g_extentChecks.load(std::memory_order_relaxed);
}

Status Kernel::check_extents(const void* const* full, std::vector<uint64_t>* bounds) const {
  const std::string& name = k_->info->name;
  const Driver& drv = bundle_->context().driver();
  if (!drv.cuMemGetAddressRange)
    return make(Errc::DriverTooOld, "cuMemGetAddressRange",
                "the driver at " + drv.path + " has no cuMemGetAddressRange, which the extent checks need", name);
  // cuMemGetAddressRange answers for the calling thread's current context.
  if (Status st = bundle_->context().make_current(); !st) return st;
  const std::vector<tn::bundle::Param>& params = *k_->params;
  bool bounded = bounds != nullptr;  // every pointer's range known so far
  for (size_t i = 0; i < params.size(); ++i) {
    const tn::bundle::Param& p = params[i];
    if (!p.type.isPointer() || !full[i]) continue;
    uint64_t address = 0;
    std::memcpy(&address, full[i], sizeof address);
    if (address == 0) continue;
    // The driver's allocation holding the pointer: [base, end), or nothing it knows.
    auto allocation = [&]() -> std::optional<std::pair<uint64_t, uint64_t>> {
      CUdeviceptr base = 0;
      size_t size = 0;
      if (drv.cuMemGetAddressRange(&base, &size, address) != cu::SUCCESS) return std::nullopt;
      return std::pair<uint64_t, uint64_t>{base, base + size};
    };
    auto need = tn::bundle::extentBytes(p, params, full);
    if (!need) return make(Errc::InvalidArgument, "extent check", need.error().message, name);
    if (!*need) {  // no extent: the whole allocation, for the simulator's bounds
      if (!bounded) continue;
      auto whole = allocation();
      if (whole) bounds->insert(bounds->end(), {whole->first, whole->second});
      bounded = whole.has_value();
      continue;
    }
    if (bounded) bounds->insert(bounds->end(), {address, address + **need});
    if (**need == 0) continue;
    // A block of the context's pool: the bytes its caller asked for (the pool rounds them up).
    uint64_t left = 0;
    if (auto block = bundle_->context().pool().find(address))
      left = block->ptr + block->requested - address;
    else if (auto whole = allocation())
      left = whole->second - address;
    else
      continue;  // not device memory the driver knows
    if (**need > left)
      return make(Errc::InvalidArgument, "extent check",
                  "argument '" + p.name + "' needs " + std::to_string(**need) + " bytes (" + p.extent->text() + " = " +
                      std::to_string(**need / tn::bundle::scalarBytes(*p.element)) + " " +
                      tn::bundle::elementName(*p.element) + " elements), its allocation has " +
                      std::to_string(left) + " from the pointer on",
                  name);
  }
  if (bounds && !bounded) bounds->clear();
  return {};
}

Status Kernel::encode_tensor_maps(const void** full, TensorMapBytes* maps) const {
  const std::string& name = k_->info->name;
  auto t = tn::bundle::evaluateTensorMaps(*k_->launch, *k_->params, full);
  if (!t) return make(Errc::InvalidArgument, "launch rule", t.error().message, name);
  const Context& ctx = bundle_->context();
  const Driver& drv = ctx.driver();
  std::lock_guard lock(bundle_->state_->mu);
  auto* k = const_cast<Loaded*>(k_);
  for (size_t i = 0; i < t->size(); ++i) {
    const tn::bundle::TensorMapArgs& a = (*t)[i];
    const std::string& param = (*k_->params)[a.param].name;
    const TensorMapKey key{a.param, a.address, {a.dims[0], a.dims[1], a.dims[2]}, {a.strides[0], a.strides[1]}};
    auto hit = std::find_if(k->maps.begin(), k->maps.end(), [&](const auto& m) { return m.first == key; });
    if (hit == k->maps.end()) {
      if (!drv.cuTensorMapEncodeTiled)
        return make(Errc::DriverTooOld, "cuTensorMapEncodeTiled",
                    "the driver at " + drv.path + " has no cuTensorMapEncodeTiled (CUDA 12.0), which tensor map '" +
                        param + "' needs",
                    name);
      TensorMapBytes bytes{};
      const uint32_t elementStrides[3] = {1, 1, 1};
      CUresult r = drv.cuTensorMapEncodeTiled(bytes.bytes, static_cast<int>(a.dataType), a.rank,
                                              reinterpret_cast<void*>(static_cast<uintptr_t>(a.address)), a.dims,
                                              a.strides, a.box, elementStrides, 0 /* interleave none */,
                                              static_cast<int>(a.swizzle), 2 /* L2 promotion 128B */, 0 /* OOB zeros */);
      if (r != cu::SUCCESS) {
        Error e = drv.fail(r, "cuTensorMapEncodeTiled", name);
        auto list = [&](const auto* v, uint32_t n) {
          std::string out;
          for (uint32_t d = 0; d < n; ++d) out += (d ? ", " : "") + std::to_string(v[d]);
          return out;
        };
        e.message = "tensor map '" + param + "' over '" + (*k_->params)[a.source].name + "' ([" + list(a.dims, a.rank) +
                    "] elements, strides [" + list(a.strides, a.rank - 1) + "] bytes, box [" + list(a.box, a.rank) +
                    "]): " + e.message;
        return e;
      }
      if (k->maps.size() < kMaxCachedTensorMaps) {
        k->maps.emplace_back(key, bytes);
        hit = k->maps.end() - 1;
      } else {
        hit = k->maps.begin() + static_cast<std::ptrdiff_t>(k->nextMap);
        *hit = {key, bytes};
        k->nextMap = (k->nextMap + 1) % kMaxCachedTensorMaps;
      }
    }
    maps[i] = hit->second;
    full[a.param] = &maps[i];
  }
  return {};
}

Status Kernel::enqueue(const Stream& s, Dim3 g, Dim3 b, unsigned shared, void** args,
                       const std::vector<uint64_t>* bounds) const {
  const Context& ctx = bundle_->context();
  if (Status st = ctx.make_current(); !st) return st;
  if (shared > 48 * 1024) {
    if (static_cast<int>(shared) > ctx.max_shared_optin())
      return make(Errc::InvalidArgument, "Kernel::launch",
                  std::to_string(shared) + " bytes of dynamic shared memory exceed the device's " +
                      std::to_string(ctx.max_shared_optin()),
                  k_->info->name);
    std::lock_guard lock(bundle_->state_->mu);
    auto* k = const_cast<Loaded*>(k_);
    if (k->shared_optin < static_cast<int>(shared)) {
      CUresult r = ctx.driver().cuFuncSetAttribute(fn_, cu::FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                   static_cast<int>(shared));
      if (r != cu::SUCCESS) return ctx.driver().fail(r, "cuFuncSetAttribute", k_->info->name);
      k->shared_optin = static_cast<int>(shared);
    }
  }
  NvtxRange range(k_->info->name);  // nothing unless NVTX ranges are on (truenort/Nvtx.h)
  if (bounds) ctx.driver().simLaunchBounds(bounds->data(), bounds->size() / 2);
  CUresult r = ctx.driver().cuLaunchKernel(fn_, g.x, g.y, g.z, b.x, b.y, b.z, shared, s.handle(), args, nullptr);
  if (r != cu::SUCCESS) return ctx.driver().fail(r, "cuLaunchKernel", k_->info->name);
  return {};
}

}  // namespace truenort
