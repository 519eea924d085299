// Compile-time scaling, counted rather than timed: the heap traffic (bytes the compiler asks
// for) of parse, verify, -O2 and PTX on kernels of one size and of eight times that size. A step
// that is linear in the kernel asks for about eight times as much; one that allocates a table
// of values or blocks per block, per branch or per value grows with the square. Times are
// measured by tools/bench/compile_scaling.py (docs/performance.md).
//
// The count comes from this binary's replacements of operator new, which AddressSanitizer
// builds keep their own (the test is skipped there).
#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <optional>
#include <string>

#include "compiler/Compile.h"
#include "ir/Parser.h"

#if defined(__SANITIZE_ADDRESS__)
#define TRUENOC_COUNT_ALLOCATIONS 0
#else
#define TRUENOC_COUNT_ALLOCATIONS 1

namespace {
std::atomic<uint64_t> allocatedBytes{0};

void* allocate(std::size_t n) {
  allocatedBytes.fetch_add(n, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t n) { return allocate(n); }
void* operator new[](std::size_t n) { return allocate(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#endif

namespace {

using namespace tn;

// The shape of tools/bench/compile_scaling.py, smaller: `loops` loops of eight segments, each a
// diamond on a loaded value joined by block parameters, a branch on the join's parameter and an
// if-then around a store; a segment's load is read again 16 segments later, and every other loop
// exchanges its accumulator through shared memory around bar.sync.
std::string chainKernel(int loops) {
  std::string s =
      "target sm_80\n"
      "kernel @scaling(%x: ptr.global align 16, %y: ptr.global, %n: u32, %s: f32) reqntid(256) {\n"
      "  shared @buf: f32[256] align 4\n"
      "^entry:\n"
      "  %tid = tid.x : u32\n  %cta = ctaid.x : u32\n  %one = const 1 : u32\n  %zero = const 0 : u32\n"
      "  %fzero = const 0.0 : f32\n  %c4 = const 4 : u32\n  %sbase = shared.addr @buf : ptr.shared\n"
      "  %toff = mul %tid, %c4 : u32\n  %sp = ptradd %sbase, %toff : ptr.shared\n"
      "  %inside = setp.lt %cta, %n : u32\n"
      "  cbr %inside, ^L0(%fzero, %tid, %zero), ^done\n";
  int seg = 0;
  for (int m = 0; m < loops; ++m) {
    std::string L = std::to_string(m), acc = "%acc.L" + L;
    s += "^L" + L + "(" + acc + ": f32, %k.L" + L + ": u32, %it.L" + L + ": u32):\n";
    if (m % 2 == 0) {
      s += "  st %sp, " + acc + " : f32\n  bar.sync\n  %nb.L" + L + " = ld %sp : f32\n";
      s += "  %mix.L" + L + " = add " + acc + ", %nb.L" + L + " : f32\n";
      acc = "%mix.L" + L;
    }
    s += "  br ^h" + std::to_string(seg) + "(" + acc + ", %k.L" + L + ")\n";
    for (int j = 0; j < 8; ++j, ++seg) {
      std::string i = std::to_string(seg);
      std::string next = j < 7 ? "^h" + std::to_string(seg + 1) : "^latch" + L;
      std::string old = seg >= 16 ? "%v" + std::to_string(seg - 16) : "%s";
      s += "^h" + i + "(%acc" + i + ": f32, %k" + i + ": u32):\n";
      s += "  %c4." + i + " = const 4 : u32\n  %o" + i + " = mul.wide %k" + i + ", %c4." + i + " : u32\n";
      s += "  %p" + i + " = ptradd %x, %o" + i + " : ptr.global\n  %v" + i + " = ld %p" + i + " : f32\n";
      s += "  %t" + i + " = setp.lt %v" + i + ", %acc" + i + " : f32\n  cbr %t" + i + ", ^a" + i + ", ^b" + i + "\n";
      s += "^a" + i + ":\n  %m" + i + " = mul %v" + i + ", %s : f32\n";
      s += "  %r" + i + " = add %m" + i + ", %acc" + i + " : f32\n  br ^j" + i + "(%r" + i + ", %one)\n";
      s += "^b" + i + ":\n  %q" + i + " = sub %acc" + i + ", " + old + " : f32\n  br ^j" + i + "(%q" + i + ", %zero)\n";
      s += "^j" + i + "(%acc.j" + i + ": f32, %f" + i + ": u32):\n";
      s += "  %e" + i + " = setp.eq %f" + i + ", %zero : u32\n  %kn" + i + " = add %k" + i + ", %f" + i + " : u32\n";
      s += "  cbr %e" + i + ", ^g" + i + ", " + next + "(%acc.j" + i + ", %kn" + i + ")\n";
      s += "^g" + i + ":\n  st %p" + i + ", %acc.j" + i + " : f32\n  br " + next + "(%acc.j" + i + ", %kn" + i + ")\n";
    }
    s += "^latch" + L + "(%acc.x" + L + ": f32, %k.x" + L + ": u32):\n";
    s += "  %it.n" + L + " = add %it.L" + L + ", %one : u32\n";
    s += m % 2 == 0 ? "  %again" + L + " = setp.lt %it.n" + L + ", %n : u32\n"
                    : "  %again" + L + " = setp.lt %acc.x" + L + ", %s : f32\n";
    std::string after = m + 1 < loops ? "^L" + std::to_string(m + 1) + "(%acc.x" + L + ", %k.x" + L + ", %zero)"
                                      : "^exit(%acc.x" + L + ")";
    s += "  cbr %again" + L + ", ^L" + L + "(%acc.x" + L + ", %k.x" + L + ", %it.n" + L + "), " + after + "\n";
  }
  s += "^exit(%final: f32):\n  st %y, %final : f32\n  br ^done\n^done:\n  ret\n}\n";
  return s;
}

#if TRUENOC_COUNT_ALLOCATIONS
// Bytes allocated to parse, verify, run -O2 on and emit PTX for `text`.
uint64_t compileBytes(const std::string& text) {
  uint64_t before = allocatedBytes.load();
  ir::Diagnostics diags;
  std::optional<ir::Module> m = ir::parseModule(text, "scaling.tir", diags);
  REQUIRE(m);
  compile::Output out = compile::compile(*m, bundle::Target{80, false}, compile::Options{}, diags);
  REQUIRE(out.ptx);
  REQUIRE_FALSE(diags.hasErrors());
  return allocatedBytes.load() - before;
}
#endif

}  // namespace

TEST_CASE("compile scaling: parse, -O2 and PTX ask for heap in proportion to the blocks" *
          doctest::skip(!TRUENOC_COUNT_ALLOCATIONS)) {
#if TRUENOC_COUNT_ALLOCATIONS
  // 25 loops are 1052 blocks; 200 loops 8402 blocks: eight times as many. Linear steps ask for
  // 8.0 times as much; a single table of one bit per value allocated per block already makes it
  // 9.9, and the compiler before this test asked for 50 times as much.
  uint64_t small = compileBytes(chainKernel(25)), large = compileBytes(chainKernel(200));
  double ratio = static_cast<double>(large) / static_cast<double>(small);
  INFO("bytes for 1052 blocks: " << small << ", for 8402 blocks: " << large << ", ratio " << ratio);
  CHECK(ratio > 7.0);  // the count sees the work at all
  CHECK(ratio < 9.0);
#endif
}
