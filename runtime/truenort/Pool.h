// A caching device-memory allocator.
// - Size classes: requests are rounded up to 1/16 of their power of two (< 6.25% waste), with
//   a 512-byte minimum; a freed block is cached and reused for the same class.
// - Stream safety: a block freed on stream S is reused at once only by allocations on S (stream
//   order makes that safe); other streams may reuse it after `stream_synchronized(S)`.
// - Bounded cache: cached bytes stay below max(cache_fraction * bytes_in_use, cache_floor);
//   beyond that the largest cached blocks go back to the driver. `trim()` releases all of them.
// - On an out-of-memory error the pool releases its cache and retries once.
// Thread-safe: all members may be called concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "truenort/Result.h"

namespace truenort {

// Where the pool gets memory from: the driver (cuMemAlloc/cuMemFree), or a fake in tests.
class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;
  virtual Result<uint64_t> allocate(size_t bytes) = 0;
  virtual void release(uint64_t ptr, size_t bytes) = 0;
};

struct PoolOptions {
  double cache_fraction = 0.03;
  size_t cache_floor = size_t{256} << 20;
};

struct PoolStats {
  size_t bytes_requested = 0;   // sum of the sizes callers asked for, live blocks only
  size_t bytes_in_use = 0;      // live blocks, rounded to their size class
  size_t bytes_cached = 0;      // freed blocks kept for reuse
  size_t bytes_reserved = 0;    // in use + cached: what the pool holds from the driver
  size_t driver_allocations = 0;
  size_t driver_releases = 0;
  size_t cache_hits = 0;
};

using StreamKey = const void*;  // the CUstream a block is used on (nullptr = default stream)

struct PoolBlock {
  uint64_t ptr = 0;
  size_t size = 0;       // the size class
  size_t requested = 0;  // what the caller asked for
};

class MemoryPool {
 public:
  explicit MemoryPool(DeviceAllocator& source, PoolOptions opts = {});
  ~MemoryPool();  // releases the cache; live blocks are the caller's bug but are not touched
  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;

  Result<PoolBlock> allocate(size_t bytes, StreamKey stream = nullptr);
  void free(const PoolBlock& block, StreamKey stream = nullptr);
  // Work queued on `stream` has completed: its freed blocks become reusable by every stream.
  void stream_synchronized(StreamKey stream);
  void trim();
  PoolStats stats() const;
  // The live block holding ptr (within the bytes its caller asked for), if one does.
  std::optional<PoolBlock> find(uint64_t ptr) const;

  static size_t size_class(size_t bytes);

 private:
  void releaseLocked(size_t bytes_to_free);
  void enforceCapLocked();

  DeviceAllocator& source_;
  PoolOptions opts_;
  mutable std::mutex mu_;
  // Cached blocks per stream (nullptr key = reusable by all streams), by size class.
  std::map<StreamKey, std::multimap<size_t, uint64_t>> cache_;
  std::map<uint64_t, size_t> live_;  // blocks handed out: address -> bytes requested
  PoolStats stats_;
};

}  // namespace truenort
