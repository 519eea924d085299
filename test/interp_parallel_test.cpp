// The interpreter's launch-level behaviour: blocks on several host threads give the results, the
// counts and the reported fault of one thread; device memory (pointers that are addresses into
// live allocations, as the simulated driver uses) is bounds-checked per allocation; the budget of
// a whole launch stops a launch of many cheap blocks.
#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "backends/interp/Interp.h"
#include "interp_harness.h"

namespace {

using tn::interp::DeviceMemory;
using tn::interp::ErrorKind;
using tn::interp::Interpreter;

// out[i] = a[i] * 3 + i for i < n; a second loop over i accumulates a value so that each block
// does some work. Block 0 thread 0 reads a[bad] when bad != 0 (to place a fault).
const char* kKernel = R"(target sm_90
ptx 7.8
kernel @k(%a: ptr.global, %out: ptr.global, %n: u32, %bad: u32) {
^entry:
  %tid = tid.x : u32
  %ctaid = ctaid.x : u32
  %ntid = ntid.x : u32
  %i = mad %ctaid, %ntid, %tid : u32
  %inside = setp.lt %i, %n : u32
  cbr %inside, ^body, ^done
^body:
  %c4 = const 4 : u32
  %off = mul.wide %i, %c4 : u32
  %pa = ptradd %a, %off : ptr.global
  %x = ld %pa : u32
  %c3 = const 3 : u32
  %y = mad %x, %c3, %i : u32
  %zero = const 0 : u32
  %faulty = setp.ne %bad, %zero : u32
  %is = setp.eq %i, %bad : u32
  %both = and %faulty, %is : pred
  cbr %both, ^fault, ^store
^fault:
  %boff = mul.wide %n, %c4 : u32
  %pb = ptradd %a, %boff : ptr.global
  %z = ld %pb : u32
  br ^store
^store:
  %po = ptradd %out, %off : ptr.global
  st %po, %y : u32
  br ^done
^done:
  ret
}
)";

struct Outcome {
  std::vector<uint32_t> out;
  uint64_t instructions = 0;
  std::string error;
};

Outcome runBuffers(const std::vector<uint32_t>& a, uint32_t bad, unsigned threads) {
  tn::ir::Module m = tn::harness::parseText(kKernel, "par.tir");
  Interpreter vm;
  REQUIRE_FALSE(vm.load(m, "k"));
  const uint32_t n = static_cast<uint32_t>(a.size());
  REQUIRE_FALSE(vm.bindArray("a", a));
  REQUIRE_FALSE(vm.bindArray("out", std::vector<uint32_t>(n, 0)));
  REQUIRE_FALSE(vm.setScalar("n", n));
  REQUIRE_FALSE(vm.setScalar("bad", bad));
  tn::interp::Options opts;
  opts.threads = threads;
  Outcome o;
  if (auto e = vm.launch({{(n + 63) / 64, 1, 1}, {64, 1, 1}, 0}, opts)) o.error = e->text();
  o.out = vm.read<uint32_t>("out");
  o.instructions = vm.stats().instructions;
  return o;
}

// Device memory as a map of allocations, like the simulated driver's.
class FakeDevice : public DeviceMemory {
 public:
  uint64_t allocate(size_t bytes) {
    uint64_t base = next_;
    next_ += (bytes + 0xFFF) / 0x1000 * 0x1000 + 0x1000;  // a gap after each allocation
    blocks_[base].resize(bytes);
    return base;
  }
  std::byte* host(uint64_t base) { return blocks_.at(base).data(); }
  std::optional<Allocation> below(uint64_t address) const override {
    auto it = blocks_.upper_bound(address);
    if (it == blocks_.begin()) return std::nullopt;
    --it;
    return Allocation{it->first, it->second.size(), const_cast<std::byte*>(it->second.data())};
  }

 private:
  uint64_t next_ = uint64_t{1} << 40;
  std::map<uint64_t, std::vector<std::byte>> blocks_;
};

}  // namespace

TEST_CASE("interp: blocks on 1 and 4 host threads give the same results, counts and fault") {
  std::mt19937 rng(tn::harness::testSeed());
  std::vector<uint32_t> a(64 * 37 + 5);
  for (uint32_t& v : a) v = static_cast<uint32_t>(rng());
  Outcome one = runBuffers(a, 0, 1);
  Outcome four = runBuffers(a, 0, 4);
  REQUIRE(one.error.empty());
  REQUIRE(four.error.empty());
  for (uint32_t i = 0; i < a.size(); ++i) REQUIRE(one.out[i] == a[i] * 3 + i);
  CHECK(four.out == one.out);
  CHECK(four.instructions == one.instructions);

  // Faults in blocks 5 and 30: whatever the thread count, block 5's is the one reported.
  for (unsigned threads : {1u, 2u, 4u, 8u}) {
    tn::ir::Module m = tn::harness::parseText(kKernel, "par.tir");
    Interpreter vm;
    REQUIRE_FALSE(vm.load(m, "k"));
    REQUIRE_FALSE(vm.bindArray("a", a));
    REQUIRE_FALSE(vm.bindArray("out", std::vector<uint32_t>(a.size())));
    REQUIRE_FALSE(vm.setScalar("n", static_cast<uint32_t>(a.size())));
    REQUIRE_FALSE(vm.setScalar("bad", uint32_t{5 * 64 + 7}));
    tn::interp::Options opts;
    opts.threads = threads;
    auto e = vm.launch({{38, 1, 1}, {64, 1, 1}, 0}, opts);
    REQUIRE(e);
    CHECK(e->kind == ErrorKind::OutOfBounds);
    CHECK(e->text() ==
          "par.tir:26:8: error: out-of-bounds ld.global of 4 bytes at offset 9492 of 'a' (9492 bytes) in kernel 'k', "
          "block (5,0,0) thread (7,0,0)");
  }
}

TEST_CASE("interp: device memory is addressed directly and checked per allocation") {
  FakeDevice dev;
  const uint32_t n = 300;
  uint64_t a = dev.allocate(n * 4);
  uint64_t out = dev.allocate(n * 4);
  std::vector<uint32_t> values(n);
  for (uint32_t i = 0; i < n; ++i) values[i] = i * 7 + 1;
  std::memcpy(dev.host(a), values.data(), n * 4);

  tn::ir::Module m = tn::harness::parseText(kKernel, "par.tir");
  Interpreter vm;
  REQUIRE_FALSE(vm.load(m, "k"));
  vm.useDeviceMemory(&dev);
  CHECK(vm.bindArray("a", values)->text() ==
        "error: parameter 'a' takes a device address (setAddress): device memory is in use");
  REQUIRE_FALSE(vm.setAddress("a", a));
  REQUIRE_FALSE(vm.setAddress("out", out));
  REQUIRE_FALSE(vm.setScalar("n", n));
  REQUIRE_FALSE(vm.setScalar("bad", uint32_t{0}));
  tn::interp::Options opts;
  opts.threads = 3;
  auto e = vm.launch({{5, 1, 1}, {64, 1, 1}, 0}, opts);
  INFO((e ? e->text() : ""));
  REQUIRE_FALSE(e);
  std::vector<uint32_t> got(n);
  std::memcpy(got.data(), dev.host(out), n * 4);
  for (uint32_t i = 0; i < n; ++i) REQUIRE(got[i] == values[i] * 3 + i);
  CHECK(vm.buffer("out") == nullptr);

  // One element past the end of `a`: the message names the address and the allocation.
  REQUIRE_FALSE(vm.setScalar("bad", uint32_t{70}));
  e = vm.launch({{5, 1, 1}, {64, 1, 1}, 0}, opts);
  REQUIRE(e);
  CHECK(e->kind == ErrorKind::OutOfBounds);
  CHECK(e->text() == "par.tir:26:8: error: out-of-bounds ld.global of 4 bytes at address 0x100000004b0, 4 bytes past "
                     "the end of the 1200-byte allocation at 0x10000000000 in kernel 'k', block (1,0,0) thread (6,0,0)");

  // An address below every allocation.
  REQUIRE_FALSE(vm.setAddress("a", 0x1000));
  REQUIRE_FALSE(vm.setScalar("bad", uint32_t{0}));
  e = vm.launch({{1, 1, 1}, {32, 1, 1}, 0}, opts);
  REQUIRE(e);
  CHECK(e->kind == ErrorKind::InvalidPointer);
  CHECK(e->text() == "par.tir:15:8: error: ld.global of 4 bytes at address 0x1000, which is in no live allocation "
                     "in kernel 'k', block (0,0,0) thread (0,0,0)");
}

TEST_CASE("interp: the launch budget stops a grid of many cheap blocks") {
  tn::ir::Module m = tn::harness::parseText(kKernel, "par.tir");
  Interpreter vm;
  REQUIRE_FALSE(vm.load(m, "k"));
  REQUIRE_FALSE(vm.bindArray("a", std::vector<uint32_t>(4)));
  REQUIRE_FALSE(vm.bindArray("out", std::vector<uint32_t>(4)));
  REQUIRE_FALSE(vm.setScalar("n", uint32_t{4}));
  REQUIRE_FALSE(vm.setScalar("bad", uint32_t{0}));
  tn::interp::Options opts;
  opts.maxInstructions = 100;
  opts.maxLaunchInstructions = 100'000;
  // 100 million blocks of 32 threads: each thread is far below its own budget.
  auto e = vm.launch({{100'000'000, 1, 1}, {32, 1, 1}, 0}, opts);
  REQUIRE(e);
  CHECK(e->kind == ErrorKind::InstructionBudget);
  CHECK(e->diag.message.starts_with("the launch exceeded its budget of 100000 thread instructions"));
  CHECK(vm.stats().instructions < 200'000);
}
