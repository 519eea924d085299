#include "truenort/Context.h"

#include <utility>

namespace truenort {

namespace {

Error invalid(const char* call, std::string message) {
  Error e;
  e.code = Errc::InvalidArgument;
  e.call = call;
  e.message = std::move(message);
  return e;
}

class DriverAllocator : public DeviceAllocator {
 public:
  DriverAllocator(const Driver* d, CUcontext c) : drv_(d), ctx_(c) {}
  Result<uint64_t> allocate(size_t bytes) override {
    if (CUresult r = drv_->cuCtxSetCurrent(ctx_); r != cu::SUCCESS) return drv_->fail(r, "cuCtxSetCurrent");
    CUdeviceptr p = 0;
    if (CUresult r = drv_->cuMemAlloc(&p, bytes); r != cu::SUCCESS) return drv_->fail(r, "cuMemAlloc_v2");
    return uint64_t{p};
  }
  void release(uint64_t ptr, size_t) override {
    if (drv_->cuCtxSetCurrent(ctx_) == cu::SUCCESS) (void)drv_->cuMemFree(ptr);
  }

 private:
  const Driver* drv_;
  CUcontext ctx_;
};

}  // namespace

struct Context::State {
  const Driver* drv = nullptr;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  unsigned sm = 0;
  int max_shared_optin = 0;
  std::string name;
  std::unique_ptr<DriverAllocator> allocator;
  std::unique_ptr<MemoryPool> pool;
};

Result<Context> Context::create(int ordinal) {
  auto d = truenort::driver();
  if (!d) return d.error();
  const Driver& drv = *d.value();
  int count = 0;
  if (CUresult r = drv.cuDeviceGetCount(&count); r != cu::SUCCESS) return drv.fail(r, "cuDeviceGetCount");
  if (ordinal < 0 || ordinal >= count) {
    Error e;
    e.code = Errc::NoDevice;
    e.call = "Context::create";
    e.message = "device " + std::to_string(ordinal) + " requested, " + std::to_string(count) + " present";
    return e;
  }
  auto s = std::make_unique<State>();
  s->drv = &drv;
  if (CUresult r = drv.cuDeviceGet(&s->dev, ordinal); r != cu::SUCCESS) return drv.fail(r, "cuDeviceGet");
  int major = 0, minor = 0;
  if (CUresult r = drv.cuDeviceGetAttribute(&major, cu::DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, s->dev);
      r != cu::SUCCESS)
    return drv.fail(r, "cuDeviceGetAttribute");
  if (CUresult r = drv.cuDeviceGetAttribute(&minor, cu::DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, s->dev);
      r != cu::SUCCESS)
    return drv.fail(r, "cuDeviceGetAttribute");
  s->sm = static_cast<unsigned>(major * 10 + minor);
  if (CUresult r = drv.cuDeviceGetAttribute(&s->max_shared_optin,
                                            cu::DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, s->dev);
      r != cu::SUCCESS)
    return drv.fail(r, "cuDeviceGetAttribute");
  char name[256] = {};
  if (drv.cuDeviceGetName(name, sizeof name - 1, s->dev) == cu::SUCCESS) s->name = name;
  if (CUresult r = drv.cuDevicePrimaryCtxRetain(&s->ctx, s->dev); r != cu::SUCCESS)
    return drv.fail(r, "cuDevicePrimaryCtxRetain");
  s->allocator = std::make_unique<DriverAllocator>(&drv, s->ctx);
  s->pool = std::make_unique<MemoryPool>(*s->allocator);
  return Context(std::move(s));
}

Context::Context(std::unique_ptr<State> s) : state_(std::move(s)) {}
Context::Context(Context&&) noexcept = default;
Context& Context::operator=(Context&& o) noexcept {
  std::swap(state_, o.state_);  // the old state is released when `o` dies
  return *this;
}
const Driver& Context::driver() const { return *state_->drv; }
CUcontext Context::handle() const { return state_->ctx; }
CUdevice Context::device() const { return state_->dev; }
unsigned Context::sm() const { return state_->sm; }
const std::string& Context::name() const { return state_->name; }
int Context::max_shared_optin() const { return state_->max_shared_optin; }
MemoryPool& Context::pool() const { return *state_->pool; }

Context::~Context() {
  if (!state_) return;
  state_->pool.reset();  // returns cached blocks while the context is still retained
  (void)state_->drv->cuDevicePrimaryCtxRelease(state_->dev);
}

Status Context::make_current() const {
  CUcontext cur = nullptr;
  if (state_->drv->cuCtxGetCurrent(&cur) == cu::SUCCESS && cur == state_->ctx) return {};
  if (CUresult r = state_->drv->cuCtxSetCurrent(state_->ctx); r != cu::SUCCESS)
    return state_->drv->fail(r, "cuCtxSetCurrent");
  return {};
}

Status Context::synchronize() const {
  if (Status st = make_current(); !st) return st;
  if (CUresult r = state_->drv->cuCtxSynchronize(); r != cu::SUCCESS) return state_->drv->fail(r, "cuCtxSynchronize");
  return {};
}

// ---- Stream ------------------------------------------------------------------------------

Result<Stream> Stream::create(const Context& ctx) {
  if (Status st = ctx.make_current(); !st) return st.error();
  CUstream s = nullptr;
  if (CUresult r = ctx.driver().cuStreamCreate(&s, cu::STREAM_NON_BLOCKING); r != cu::SUCCESS)
    return ctx.driver().fail(r, "cuStreamCreate");
  return Stream(&ctx, s, true);
}

Stream& Stream::operator=(Stream&& o) noexcept {
  std::swap(ctx_, o.ctx_);
  std::swap(s_, o.s_);
  std::swap(owned_, o.owned_);
  return *this;
}

Stream::~Stream() {
  if (owned_ && s_ && ctx_->make_current()) (void)ctx_->driver().cuStreamDestroy(s_);
}

Status Stream::synchronize() const {
  if (Status st = ctx_->make_current(); !st) return st;
  if (CUresult r = ctx_->driver().cuStreamSynchronize(s_); r != cu::SUCCESS)
    return ctx_->driver().fail(r, "cuStreamSynchronize");
  ctx_->pool().stream_synchronized(s_);
  return {};
}

// ---- Event -------------------------------------------------------------------------------

Result<Event> Event::create(const Context& ctx, bool timing) {
  if (Status st = ctx.make_current(); !st) return st.error();
  CUevent e = nullptr;
  if (CUresult r = ctx.driver().cuEventCreate(&e, timing ? cu::EVENT_DEFAULT : cu::EVENT_DISABLE_TIMING);
      r != cu::SUCCESS)
    return ctx.driver().fail(r, "cuEventCreate");
  return Event(&ctx, e);
}

Event& Event::operator=(Event&& o) noexcept {
  std::swap(ctx_, o.ctx_);
  std::swap(e_, o.e_);
  return *this;
}

Event::~Event() {
  if (e_ && ctx_->make_current()) (void)ctx_->driver().cuEventDestroy(e_);
}

Status Event::record(const Stream& s) const {
  if (Status st = ctx_->make_current(); !st) return st;
  if (CUresult r = ctx_->driver().cuEventRecord(e_, s.handle()); r != cu::SUCCESS)
    return ctx_->driver().fail(r, "cuEventRecord");
  return {};
}

Status Event::synchronize() const {
  if (CUresult r = ctx_->driver().cuEventSynchronize(e_); r != cu::SUCCESS)
    return ctx_->driver().fail(r, "cuEventSynchronize");
  return {};
}

Result<float> Event::elapsed_ms(const Event& start, const Event& end) {
  float ms = 0;
  if (CUresult r = start.ctx_->driver().cuEventElapsedTime(&ms, start.e_, end.e_); r != cu::SUCCESS)
    return start.ctx_->driver().fail(r, "cuEventElapsedTime");
  return ms;
}

// ---- DeviceMemory ------------------------------------------------------------------------

Result<DeviceMemory> DeviceMemory::allocate(const Context& ctx, size_t bytes, const Stream* stream) {
  StreamKey key = stream ? static_cast<StreamKey>(stream->handle()) : nullptr;
  auto b = ctx.pool().allocate(bytes, key);
  if (!b) return b.error();
  return DeviceMemory(&ctx, b.value(), key);
}

DeviceMemory& DeviceMemory::operator=(DeviceMemory&& o) noexcept {
  std::swap(ctx_, o.ctx_);
  std::swap(block_, o.block_);
  std::swap(stream_, o.stream_);
  return *this;
}

DeviceMemory::~DeviceMemory() {
  if (block_.ptr) ctx_->pool().free(block_, stream_);
}

Status DeviceMemory::check(size_t bytes, size_t offset, const char* call) const {
  if (offset > block_.requested || bytes > block_.requested - offset)
    return invalid(call, "copy of " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset) +
                             " exceeds the buffer's " + std::to_string(block_.requested) + " bytes");
  return ctx_->make_current();
}

Status DeviceMemory::upload(const void* src, size_t bytes, size_t offset) const {
  if (Status st = check(bytes, offset, "DeviceMemory::upload"); !st) return st;
  if (CUresult r = ctx_->driver().cuMemcpyHtoD(block_.ptr + offset, src, bytes); r != cu::SUCCESS)
    return ctx_->driver().fail(r, "cuMemcpyHtoD_v2");
  // From pageable memory cuMemcpyHtoD returns once the bytes are staged, while the DMA into
  // device memory may still run on the legacy stream, which non-blocking streams (ours) do not
  // wait for. Waiting for that stream here makes the data visible to every stream on return.
  if (CUresult r = ctx_->driver().cuStreamSynchronize(nullptr); r != cu::SUCCESS)
    return ctx_->driver().fail(r, "cuStreamSynchronize");
  return {};
}

Status DeviceMemory::download(void* dst, size_t bytes, size_t offset) const {
  if (Status st = check(bytes, offset, "DeviceMemory::download"); !st) return st;
  if (CUresult r = ctx_->driver().cuMemcpyDtoH(dst, block_.ptr + offset, bytes); r != cu::SUCCESS)
    return ctx_->driver().fail(r, "cuMemcpyDtoH_v2");
  return {};
}

Status DeviceMemory::upload_async(const void* src, size_t bytes, const Stream& s, size_t offset) const {
  if (Status st = check(bytes, offset, "DeviceMemory::upload_async"); !st) return st;
  if (CUresult r = ctx_->driver().cuMemcpyHtoDAsync(block_.ptr + offset, src, bytes, s.handle()); r != cu::SUCCESS)
    return ctx_->driver().fail(r, "cuMemcpyHtoDAsync_v2");
  return {};
}

Status DeviceMemory::download_async(void* dst, size_t bytes, const Stream& s, size_t offset) const {
  if (Status st = check(bytes, offset, "DeviceMemory::download_async"); !st) return st;
  if (CUresult r = ctx_->driver().cuMemcpyDtoHAsync(dst, block_.ptr + offset, bytes, s.handle()); r != cu::SUCCESS)
    return ctx_->driver().fail(r, "cuMemcpyDtoHAsync_v2");
  return {};
}

Status DeviceMemory::fill_async(unsigned char byte, const Stream& s) const {
  if (Status st = ctx_->make_current(); !st) return st;
  if (CUresult r = ctx_->driver().cuMemsetD8Async(block_.ptr, byte, block_.requested, s.handle()); r != cu::SUCCESS)
    return ctx_->driver().fail(r, "cuMemsetD8Async");
  return {};
}

}  // namespace truenort
