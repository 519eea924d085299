// The runtime's memory pool, driven by a fake allocator (no GPU): H8 and H12 of the seeds.
#include <doctest/doctest.h>

#include <random>
#include <set>

#include "truenort/Pool.h"

namespace {

class FakeAllocator : public truenort::DeviceAllocator {
 public:
  truenort::Result<uint64_t> allocate(size_t bytes) override {
    if (capacity && held + bytes > capacity) {
      truenort::Error e;
      e.code = truenort::Errc::OutOfMemory;
      e.call = "fake allocate";
      return e;
    }
    ++allocations;
    held += bytes;
    uint64_t p = next;
    next += bytes + 4096;
    live.insert(p);
    return p;
  }
  void release(uint64_t ptr, size_t bytes) override {
    REQUIRE(live.erase(ptr) == 1);
    held -= bytes;
    ++releases;
  }
  size_t capacity = 0;  // 0 = unlimited
  size_t held = 0, allocations = 0, releases = 0;
  uint64_t next = 1 << 20;
  std::set<uint64_t> live;
};

}  // namespace

TEST_CASE("size classes waste less than 1/16 and never shrink a request") {
  for (size_t bytes : {1ul, 511ul, 512ul, 513ul, 4097ul, 1000000ul, 10485759ul, (size_t{1} << 33) + 1}) {
    size_t c = truenort::MemoryPool::size_class(bytes);
    CHECK(c >= bytes);
    if (bytes > 512) CHECK(static_cast<double>(c - bytes) < static_cast<double>(bytes) / 16.0 + 512);
  }
}

TEST_CASE("H8: 100 same-size alloc/free cycles make fewer than 10 driver allocations") {
  FakeAllocator fake;
  truenort::MemoryPool pool(fake);
  for (int i = 0; i < 100; ++i) {
    auto b = pool.allocate(1 << 20);
    REQUIRE(b.ok());
    pool.free(b.value());
  }
  MESSAGE("H8: driver allocations for 100 cycles = " << fake.allocations);
  CHECK(fake.allocations < 10);
  CHECK(pool.stats().cache_hits >= 90);
}

TEST_CASE("H12: random 1 KB - 10 MB alloc/free keeps reserved/requested <= 1.1") {
  // Measured as in the seeds: 10k iterations, 70% allocate / 30% free a random live block;
  // at the end, bytes the pool holds from the driver (in use + cached) over bytes requested by
  // the live allocations.
  FakeAllocator fake;
  truenort::MemoryPool pool(fake);
  std::random_device rd;
  const unsigned seed = rd();
  INFO("seed = " << seed);
  std::mt19937_64 rng(seed);
  std::vector<truenort::PoolBlock> live;
  std::uniform_int_distribution<size_t> size(1024, 10 * 1024 * 1024);
  for (int i = 0; i < 10000; ++i) {
    if (live.empty() || rng() % 10 < 7) {
      auto b = pool.allocate(size(rng));
      REQUIRE(b.ok());
      live.push_back(b.value());
    } else {
      size_t idx = rng() % live.size();
      pool.free(live[idx]);
      live[idx] = live.back();
      live.pop_back();
    }
  }
  auto s = pool.stats();
  double ratio = static_cast<double>(s.bytes_reserved) / static_cast<double>(s.bytes_requested);
  MESSAGE("H12: reserved/requested = " << ratio << " (" << s.bytes_reserved << " / " << s.bytes_requested
                                       << " bytes, " << s.driver_allocations << " driver allocations)");
  CHECK(ratio <= 1.1);
  CHECK(fake.held == s.bytes_reserved);
  for (const auto& b : live) pool.free(b);
  pool.trim();
  CHECK(fake.held == 0);
  CHECK(fake.live.empty());
}

TEST_CASE("a block freed on one stream is reused by another only after that stream synchronized") {
  FakeAllocator fake;
  truenort::MemoryPool pool(fake);
  int s1 = 0, s2 = 0;
  auto a = pool.allocate(4096, &s1);
  REQUIRE(a.ok());
  pool.free(a.value(), &s1);
  auto b = pool.allocate(4096, &s2);
  REQUIRE(b.ok());
  CHECK(b.value().ptr != a.value().ptr);
  auto c = pool.allocate(4096, &s1);
  REQUIRE(c.ok());
  CHECK(c.value().ptr == a.value().ptr);
  pool.free(c.value(), &s1);
  pool.stream_synchronized(&s1);
  auto d = pool.allocate(4096, &s2);
  REQUIRE(d.ok());
  CHECK(d.value().ptr == a.value().ptr);
  pool.free(b.value(), &s2);
  pool.free(d.value(), &s2);
}

TEST_CASE("out of memory: the pool releases its cache and retries, then reports the error") {
  FakeAllocator fake;
  fake.capacity = 8 << 20;
  truenort::MemoryPool pool(fake);
  auto a = pool.allocate(6 << 20);
  REQUIRE(a.ok());
  pool.free(a.value());
  auto b = pool.allocate(5 << 20);  // a different class: needs the cached 6 MB released first
  REQUIRE(b.ok());
  CHECK(fake.releases == 1);
  auto c = pool.allocate(7 << 20);
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().code == truenort::Errc::OutOfMemory);
  pool.free(b.value());
  CHECK(pool.allocate(0).error().code == truenort::Errc::InvalidArgument);
}
