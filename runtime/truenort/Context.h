// Core runtime objects: Context (a device's primary context), Stream, Event, DeviceBuffer<T>,
// HostBuffer<T>. All are RAII and move-only. Errors are values (Result/Status), never thrown.
//
// Thread safety: a Context may be shared by any number of threads (its pool is locked, and
// every call makes the context current on the calling thread first). A Stream, Event or buffer
// must not be used by two threads at once without external synchronization.
#pragma once

#include <cstring>
#include <memory>
#include <string>

#include "truenort/Driver.h"
#include "truenort/Pool.h"
#include "truenort/Span.h"

namespace truenort {

class Context {
 public:
  // Retains device `ordinal`'s primary context. NoDriver / NoDevice / Cuda errors as values.
  static Result<Context> create(int ordinal = 0);
  Context(Context&&) noexcept;
  Context& operator=(Context&&) noexcept;
  ~Context();

  // Makes this context current on the calling thread (cheap when it already is).
  Status make_current() const;
  Status synchronize() const;

  const Driver& driver() const;
  // Whether the driver is the simulated one (docs/simulator.md): kernels run on the interpreter.
  bool simulated() const { return driver().simulated(); }
  CUcontext handle() const;
  CUdevice device() const;
  unsigned sm() const;  // compute capability major*10+minor
  const std::string& name() const;
  int max_shared_optin() const;
  MemoryPool& pool() const;

 private:
  struct State;
  explicit Context(std::unique_ptr<State> s);
  std::unique_ptr<State> state_;
};

class Stream {
 public:
  static Result<Stream> create(const Context& ctx);
  // Wraps a caller-owned CUstream: used, never destroyed.
  static Stream wrap(const Context& ctx, CUstream s) { return Stream(&ctx, s, false); }
  Stream(Stream&& o) noexcept : ctx_(o.ctx_), s_(o.s_), owned_(o.owned_) { o.owned_ = false; }
  Stream& operator=(Stream&& o) noexcept;
  ~Stream();

  // Waits for the stream; then its freed pool blocks become reusable by other streams.
  Status synchronize() const;
  CUstream handle() const { return s_; }
  const Context& context() const { return *ctx_; }

 private:
  Stream(const Context* c, CUstream s, bool owned) : ctx_(c), s_(s), owned_(owned) {}
  const Context* ctx_;
  CUstream s_;
  bool owned_;
};

class Event {
 public:
  static Result<Event> create(const Context& ctx, bool timing = true);
  Event(Event&& o) noexcept : ctx_(o.ctx_), e_(o.e_) { o.e_ = nullptr; }
  Event& operator=(Event&& o) noexcept;
  ~Event();
  Status record(const Stream& s) const;
  Status synchronize() const;
  // Milliseconds between two recorded, completed events.
  static Result<float> elapsed_ms(const Event& start, const Event& end);
  CUevent handle() const { return e_; }

 private:
  Event(const Context* c, CUevent e) : ctx_(c), e_(e) {}
  const Context* ctx_;
  CUevent e_;
};

// Untyped device memory from the context's pool; DeviceBuffer<T> adds element types.
class DeviceMemory {
 public:
  static Result<DeviceMemory> allocate(const Context& ctx, size_t bytes, const Stream* stream = nullptr);
  DeviceMemory(DeviceMemory&& o) noexcept : ctx_(o.ctx_), block_(o.block_), stream_(o.stream_) { o.block_ = {}; }
  DeviceMemory& operator=(DeviceMemory&& o) noexcept;
  ~DeviceMemory();

  CUdeviceptr ptr() const { return block_.ptr; }
  size_t bytes() const { return block_.requested; }
  // Returns when the bytes are in device memory, visible to work on any stream.
  Status upload(const void* src, size_t bytes, size_t offset = 0) const;
  // Waits for the copy, not for kernels on other streams: synchronize the stream that wrote
  // the memory first.
  Status download(void* dst, size_t bytes, size_t offset = 0) const;
  Status upload_async(const void* src, size_t bytes, const Stream& s, size_t offset = 0) const;
  Status download_async(void* dst, size_t bytes, const Stream& s, size_t offset = 0) const;
  Status fill_async(unsigned char byte, const Stream& s) const;

 private:
  DeviceMemory(const Context* c, PoolBlock b, StreamKey s) : ctx_(c), block_(b), stream_(s) {}
  Status check(size_t bytes, size_t offset, const char* call) const;
  const Context* ctx_;
  PoolBlock block_;
  StreamKey stream_;
};

template <class T>
class DeviceBuffer {
 public:
  static Result<DeviceBuffer> allocate(const Context& ctx, size_t count, const Stream* s = nullptr) {
    auto m = DeviceMemory::allocate(ctx, count * sizeof(T), s);
    if (!m) return m.error();
    return DeviceBuffer(std::move(m.value()), count);
  }
  size_t size() const { return count_; }
  CUdeviceptr ptr() const { return mem_.ptr(); }
  Status upload(Span<const T> src) const { return mem_.upload(src.data(), src.size_bytes()); }
  Status download(Span<T> dst) const { return mem_.download(dst.data(), dst.size_bytes()); }
  Status upload_async(Span<const T> src, const Stream& s) const {
    return mem_.upload_async(src.data(), src.size_bytes(), s);
  }
  Status download_async(Span<T> dst, const Stream& s) const {
    return mem_.download_async(dst.data(), dst.size_bytes(), s);
  }

 private:
  DeviceBuffer(DeviceMemory m, size_t n) : mem_(std::move(m)), count_(n) {}
  DeviceMemory mem_;
  size_t count_;
};

// Page-locked host memory (cuMemAllocHost), for async copies.
template <class T>
class HostBuffer {
 public:
  static Result<HostBuffer> allocate(const Context& ctx, size_t count) {
    if (Status st = ctx.make_current(); !st) return st.error();
    void* p = nullptr;
    if (CUresult r = ctx.driver().cuMemAllocHost(&p, count * sizeof(T)); r != cu::SUCCESS)
      return ctx.driver().fail(r, "cuMemAllocHost_v2");
    return HostBuffer(&ctx, static_cast<T*>(p), count);
  }
  HostBuffer(HostBuffer&& o) noexcept : ctx_(o.ctx_), p_(o.p_), n_(o.n_) { o.p_ = nullptr; }
  HostBuffer& operator=(HostBuffer&& o) noexcept {
    std::swap(ctx_, o.ctx_);
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  ~HostBuffer() {
    if (p_ && ctx_->make_current()) (void)ctx_->driver().cuMemFreeHost(p_);
  }
  Span<T> span() const { return {p_, n_}; }
  T* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  HostBuffer(const Context* c, T* p, size_t n) : ctx_(c), p_(p), n_(n) {}
  const Context* ctx_;
  T* p_;
  size_t n_;
};

}  // namespace truenort
