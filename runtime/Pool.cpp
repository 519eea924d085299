#include "truenort/Pool.h"

#include <algorithm>
#include <bit>

namespace truenort {

MemoryPool::MemoryPool(DeviceAllocator& source, PoolOptions opts) : source_(source), opts_(opts) {}

MemoryPool::~MemoryPool() { trim(); }

size_t MemoryPool::size_class(size_t bytes) {
  if (bytes <= 512) return 512;
  size_t top = std::bit_floor(bytes);
  size_t step = std::max<size_t>(top / 16, 512);
  return (bytes + step - 1) / step * step;
}

Result<PoolBlock> MemoryPool::allocate(size_t bytes, StreamKey stream) {
  if (bytes == 0) {
    Error e;
    e.code = Errc::InvalidArgument;
    e.call = "MemoryPool::allocate";
    e.message = "zero-byte allocation";
    return e;
  }
  const size_t cls = size_class(bytes);
  std::lock_guard lock(mu_);
  for (StreamKey key : {stream, StreamKey{nullptr}}) {
    auto it = cache_.find(key);
    if (it == cache_.end()) continue;
    auto hit = it->second.find(cls);
    if (hit == it->second.end()) continue;
    PoolBlock b{hit->second, cls, bytes};
    it->second.erase(hit);
    live_[b.ptr] = bytes;
    stats_.bytes_cached -= cls;
    stats_.bytes_in_use += cls;
    stats_.bytes_requested += bytes;
    ++stats_.cache_hits;
    return b;
  }
  auto p = source_.allocate(cls);
  if (!p && p.error().code == Errc::OutOfMemory && stats_.bytes_cached > 0) {
    releaseLocked(stats_.bytes_cached);
    p = source_.allocate(cls);
  }
  if (!p) return p.error();
  ++stats_.driver_allocations;
  stats_.bytes_in_use += cls;
  stats_.bytes_requested += bytes;
  live_[p.value()] = bytes;
  return PoolBlock{p.value(), cls, bytes};
}

void MemoryPool::free(const PoolBlock& block, StreamKey stream) {
  if (!block.ptr) return;
  std::lock_guard lock(mu_);
  live_.erase(block.ptr);
  cache_[stream].emplace(block.size, block.ptr);
  stats_.bytes_in_use -= block.size;
  stats_.bytes_requested -= block.requested;
  stats_.bytes_cached += block.size;
  enforceCapLocked();
}

void MemoryPool::stream_synchronized(StreamKey stream) {
  if (!stream) return;
  std::lock_guard lock(mu_);
  auto it = cache_.find(stream);
  if (it == cache_.end()) return;
  cache_[nullptr].merge(it->second);
  cache_.erase(stream);
}

void MemoryPool::trim() {
  std::lock_guard lock(mu_);
  releaseLocked(stats_.bytes_cached);
}

std::optional<PoolBlock> MemoryPool::find(uint64_t ptr) const {
  std::lock_guard lock(mu_);
  auto it = live_.upper_bound(ptr);
  if (it == live_.begin()) return std::nullopt;
  --it;
  if (ptr - it->first >= it->second) return std::nullopt;
  return PoolBlock{it->first, size_class(it->second), it->second};
}

PoolStats MemoryPool::stats() const {
  std::lock_guard lock(mu_);
  PoolStats s = stats_;
  s.bytes_reserved = s.bytes_in_use + s.bytes_cached;
  return s;
}

void MemoryPool::enforceCapLocked() {
  size_t cap = std::max(static_cast<size_t>(opts_.cache_fraction * static_cast<double>(stats_.bytes_in_use)),
                        opts_.cache_floor);
  if (stats_.bytes_cached > cap) releaseLocked(stats_.bytes_cached - cap);
}

// Returns at least `bytes_to_free` bytes of cached blocks to the driver, largest blocks first.
void MemoryPool::releaseLocked(size_t bytes_to_free) {
  size_t freed = 0;
  while (freed < bytes_to_free && stats_.bytes_cached > 0) {
    std::multimap<size_t, uint64_t>* best = nullptr;
    for (auto& [key, blocks] : cache_)
      if (!blocks.empty() && (!best || blocks.rbegin()->first > best->rbegin()->first)) best = &blocks;
    if (!best) break;
    auto last = std::prev(best->end());
    source_.release(last->second, last->first);
    ++stats_.driver_releases;
    freed += last->first;
    stats_.bytes_cached -= last->first;
    best->erase(last);
  }
  std::erase_if(cache_, [](const auto& kv) { return kv.second.empty(); });
}

}  // namespace truenort
