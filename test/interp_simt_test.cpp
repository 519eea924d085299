// The interpreter's execution model: warps in lockstep with reconvergence at immediate
// post-dominators (nested branches, loops with per-thread trip counts, loops with two exits),
// shfl.sync modes with clamps and segments, votes in divergent code, special registers in 2D/3D
// launches, parallel-copy block arguments, and the run-time reports of the API.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "backends/interp/Interp.h"
#include "interp_harness.h"
#include "ir/Parser.h"
#include "ir/Verifier.h"

namespace {

using tn::interp::ErrorKind;
using tn::interp::Interpreter;

// Parses and verifies: only valid IR is worth interpreting.
tn::ir::Module parse(const std::string& text) { return tn::harness::parseText(text, "simt.tir"); }

// Runs kernel @k of `text` with one u32 output buffer `out` of `n` words.
std::vector<uint32_t> run(const std::string& text, size_t n, tn::ir::Dim3 grid, tn::ir::Dim3 block) {
  tn::ir::Module m = parse(text);
  Interpreter vm;
  auto err = vm.load(m, "k");
  INFO((err ? err->text() : ""));
  REQUIRE_FALSE(err);
  REQUIRE_FALSE(vm.bindArray("out", std::vector<uint32_t>(n, 0xDEADBEEF)));
  err = vm.launch({grid, block, 0});
  INFO((err ? err->text() : ""));
  REQUIRE_FALSE(err);
  return vm.read<uint32_t>("out");
}

// Prologue shared by the kernels below: %tid, %lane, constants, and %slot = &out[tid].
const char* kPrologue = R"(target sm_90
ptx 7.8
kernel @k(%out: ptr.global) {
^entry:
  %tid = tid.x : u32
  %lane = laneid : u32
  %zero = const 0 : u32
  %one = const 1 : u32
  %full = const 0xFFFFFFFF : b32
  %c4 = const 4 : u32
  %off = mul.wide %tid, %c4 : u32
  %slot = ptradd %out, %off : ptr.global
)";

}  // namespace

TEST_CASE("interp: nested divergence reconverges before a full-warp ballot") {
  // odd lanes add 100, lanes < 8 add 10 (nested inside both arms); every lane then votes
  // "value > 50" with the full mask, which needs the whole warp to be back together.
  std::string text = std::string(kPrologue) + R"(  %bit = and %lane, %one : u32
  %odd = setp.ne %bit, %zero : u32
  cbr %odd, ^oddpath, ^evenpath
^oddpath:
  %h = const 100 : u32
  br ^inner(%h)
^evenpath:
  br ^inner(%zero)
^inner(%base: u32):
  %eight = const 8 : u32
  %low = setp.lt %lane, %eight : u32
  cbr %low, ^addten, ^join(%base)
^addten:
  %ten = const 10 : u32
  %b10 = add %base, %ten : u32
  br ^join(%b10)
^join(%v: u32):
  %fifty = const 50 : u32
  %big = setp.gt %v, %fifty : u32
  %ballot = vote.sync.ballot %big, %full : b32
  %bu = bitcast %ballot : b32 -> u32
  %sum = add %v, %bu : u32
  st %slot, %sum : u32
  ret
}
)";
  std::vector<uint32_t> out = run(text, 64, {1, 1, 1}, {64, 1, 1});
  for (uint32_t t = 0; t < 64; ++t) {
    uint32_t lane = t % 32;
    uint32_t v = (lane & 1 ? 100 : 0) + (lane < 8 ? 10 : 0);
    CHECK(out[t] == v + 0xAAAAAAAAu);
  }
}

TEST_CASE("interp: loops with per-thread trip counts reconverge for shfl.sync") {
  // Thread t sums 1..(t % 5); then every lane reads lane+1's sum with shfl.down.
  std::string text = std::string(kPrologue) + R"(  %five = const 5 : u32
  %trips = rem %tid, %five : u32
  br ^loop(%zero, %zero)
^loop(%i: u32, %acc: u32):
  %more = setp.lt %i, %trips : u32
  cbr %more, ^body, ^done
^body:
  %i1 = add %i, %one : u32
  %acc1 = add %acc, %i1 : u32
  br ^loop(%i1, %acc1)
^done:
  %clamp = const 31 : b32
  %delta = const 1 : b32
  %accb = bitcast %acc : u32 -> b32
  %next = shfl.sync.down %accb, %delta, %clamp, %full : b32
  %nu = bitcast %next : b32 -> u32
  %k1000 = const 1000 : u32
  %scaled = mul %acc, %k1000 : u32
  %r = add %scaled, %nu : u32
  st %slot, %r : u32
  ret
}
)";
  std::vector<uint32_t> out = run(text, 32, {1, 1, 1}, {32, 1, 1});
  auto tri = [](uint32_t t) { return (t % 5) * (t % 5 + 1) / 2; };
  for (uint32_t t = 0; t < 32; ++t) CHECK(out[t] == tri(t) * 1000 + tri(t < 31 ? t + 1 : t));
}

TEST_CASE("interp: a loop with two exits reconverges at their join") {
  // Search for the first i in [0, 20) with (i * 7 + tid) % 13 == 0; stop at 20 otherwise.
  std::string text = std::string(kPrologue) + R"(  %twenty = const 20 : u32
  %seven = const 7 : u32
  %thirteen = const 13 : u32
  br ^head(%zero)
^head(%i: u32):
  %more = setp.lt %i, %twenty : u32
  cbr %more, ^test, ^found(%twenty)
^test:
  %m = mad %i, %seven, %tid : u32
  %r = rem %m, %thirteen : u32
  %hit = setp.eq %r, %zero : u32
  %i1 = add %i, %one : u32
  cbr %hit, ^found(%i), ^head(%i1)
^found(%at: u32):
  %atb = bitcast %at : u32 -> b32
  %x = shfl.sync.idx %atb, %zero, %c31, %full : b32
  %xu = bitcast %x : b32 -> u32
  %k100 = const 100 : u32
  %y = mad %at, %k100, %xu : u32
  st %slot, %y : u32
  ret
}
)";
  // %c31 is defined after use in textual order; define it in the prologue instead.
  text.replace(text.find("  br ^head(%zero)"), 0, "  %c31 = const 31 : b32\n");
  std::vector<uint32_t> out = run(text, 32, {1, 1, 1}, {32, 1, 1});
  auto first = [](uint32_t t) {
    for (uint32_t i = 0; i < 20; ++i)
      if ((i * 7 + t) % 13 == 0) return i;
    return 20u;
  };
  for (uint32_t t = 0; t < 32; ++t) CHECK(out[t] == first(t) * 100 + first(0));
}

TEST_CASE("interp: shfl.sync up/down/bfly/idx with clamps and segments") {
  std::string text = std::string(kPrologue) + R"(  %ten = const 10 : u32
  %v = mul %lane, %ten : u32
  %vb = bitcast %v : u32 -> b32
  %c0 = const 0 : b32
  %c31 = const 31 : b32
  %seg8 = const 0x181F : b32
  %three = const 3 : b32
  %five = const 5 : b32
  %two = const 2 : b32
  %onebit = const 1 : b32
  %up = shfl.sync.up %vb, %three, %c0, %full : b32
  %down = shfl.sync.down %vb, %five, %c31, %full : b32
  %bfly = shfl.sync.bfly %vb, %onebit, %c31, %full : b32
  %idx = shfl.sync.idx %vb, %three, %seg8, %full : b32
  %down8 = shfl.sync.down %vb, %two, %seg8, %full : b32
  %c128 = const 128 : u32
  %base = mul.wide %tid, %c128 : u32
  %slot0 = ptradd %out, %base : ptr.global
  st %slot0, %up : b32
  %o1 = const 4 : u64
  %s1 = ptradd %slot0, %o1 : ptr.global
  st %s1, %down : b32
  %s2 = ptradd %s1, %o1 : ptr.global
  st %s2, %bfly : b32
  %s3 = ptradd %s2, %o1 : ptr.global
  st %s3, %idx : b32
  %s4 = ptradd %s3, %o1 : ptr.global
  st %s4, %down8 : b32
  ret
}
)";
  std::vector<uint32_t> out = run(text, 32 * 32, {1, 1, 1}, {32, 1, 1});
  for (uint32_t l = 0; l < 32; ++l) {
    CAPTURE(l);
    const uint32_t* r = &out[l * 32];
    CHECK(r[0] == (l >= 3 ? l - 3 : l) * 10);                  // up: lanes below the delta keep their value
    CHECK(r[1] == (l + 5 <= 31 ? l + 5 : l) * 10);             // down: past the clamp keeps its value
    CHECK(r[2] == (l ^ 1) * 10);                               // butterfly
    CHECK(r[3] == ((l & 24) | 3) * 10);                        // idx inside 8-lane segments
    CHECK(r[4] == ((l % 8) + 2 <= 7 ? l + 2 : l) * 10);        // down within 8-lane segments
  }
}

TEST_CASE("interp: votes with a partial membermask inside divergent code") {
  std::string text = std::string(kPrologue) + R"(  %sixteen = const 16 : u32
  %low = setp.lt %lane, %sixteen : u32
  cbr %low, ^half, ^other
^half:
  %m = const 0x0000FFFF : b32
  %bit = and %lane, %one : u32
  %odd = setp.ne %bit, %zero : u32
  %ballot = vote.sync.ballot %odd, %m : b32
  %all = vote.sync.all %low, %m : pred
  %any = vote.sync.any %odd, %m : pred
  %uni = vote.sync.uni %odd, %m : pred
  %bu = bitcast %ballot : b32 -> u32
  %a = selp %one, %zero, %all : u32
  %k2 = const 2 : u32
  %nb = selp %k2, %zero, %any : u32
  %k4 = const 4 : u32
  %u = selp %k4, %zero, %uni : u32
  %flags = or %a, %nb : u32
  %flags2 = or %flags, %u : u32
  %k20 = const 20 : u32
  %shifted = shl %flags2, %k20 : u32
  %r = or %bu, %shifted : u32
  br ^join(%r)
^other:
  br ^join(%zero)
^join(%res: u32):
  st %slot, %res : u32
  ret
}
)";
  std::vector<uint32_t> out = run(text, 32, {1, 1, 1}, {32, 1, 1});
  for (uint32_t l = 0; l < 32; ++l) CHECK(out[l] == (l < 16 ? 0xAAAAu | (3u << 20) : 0u));
}

TEST_CASE("interp: special registers in 2D blocks and 3D grids") {
  const std::string text = R"(target sm_90
ptx 7.8
kernel @k(%out: ptr.global) {
^entry:
  %tx = tid.x : u32
  %ty = tid.y : u32
  %nx = ntid.x : u32
  %ny = ntid.y : u32
  %cx = ctaid.x : u32
  %cy = ctaid.y : u32
  %cz = ctaid.z : u32
  %gx = nctaid.x : u32
  %gy = nctaid.y : u32
  %lane = laneid : u32
  %warp = warpid : u32
  %flat = mad %ty, %nx, %tx : u32
  %threads = mul %nx, %ny : u32
  %bz = mul %cz, %gy : u32
  %byz = add %bz, %cy : u32
  %bflat = mad %byz, %gx, %cx : u32
  %gid = mad %bflat, %threads, %flat : u32
  %k8 = const 8 : u32
  %off = mul.wide %gid, %k8 : u32
  %p = ptradd %out, %off : ptr.global
  %k256 = const 256 : u32
  %lw = mad %warp, %k256, %lane : u32
  st %p, %lw : u32
  %k4 = const 4 : u64
  %p2 = ptradd %p, %k4 : ptr.global
  %k1000 = const 1000 : u32
  %cc = mad %bflat, %k1000, %flat : u32
  st %p2, %cc : u32
  ret
}
)";
  // Block (8,6,1) = 48 threads: warp 0 full, warp 1 partial. Grid (2,2,2).
  std::vector<uint32_t> out = run(text, 2 * 8 * 48, {2, 2, 2}, {8, 6, 1});
  for (uint32_t b = 0; b < 8; ++b)
    for (uint32_t t = 0; t < 48; ++t) {
      uint32_t g = b * 48 + t;
      CHECK(out[2 * g] == (t / 32) * 256 + t % 32);
      CHECK(out[2 * g + 1] == b * 1000 + t);
    }
}

TEST_CASE("interp: block arguments are copied in parallel (a swap in a loop)") {
  // (a, b) = (b, a + b) five times from (0, 1): Fibonacci 5 and 8.
  std::string text = std::string(kPrologue) + R"(  %n = const 5 : u32
  br ^loop(%zero, %one, %zero)
^loop(%a: u32, %b: u32, %i: u32):
  %more = setp.lt %i, %n : u32
  %s = add %a, %b : u32
  %i1 = add %i, %one : u32
  cbr %more, ^loop(%b, %s, %i1), ^done
^done:
  %r = mad %a, %c4, %b : u32
  st %slot, %r : u32
  ret
}
)";
  std::vector<uint32_t> out = run(text, 1, {1, 1, 1}, {1, 1, 1});
  CHECK(out[0] == 5 * 4 + 8);
}

TEST_CASE("interp: run-time faults carry kind, block and thread") {
  std::string text = std::string(kPrologue) + R"(  %k3 = const 3 : u32
  %d = sub %tid, %k3 : u32
  %q = div %one, %d : u32
  st %slot, %q : u32
  ret
}
)";
  tn::ir::Module m = parse(text);
  Interpreter vm;
  REQUIRE_FALSE(vm.load(m, "k"));
  REQUIRE_FALSE(vm.bindArray("out", std::vector<uint32_t>(64, 0)));
  auto err = vm.launch({{2, 1, 1}, {32, 1, 1}, 0});
  REQUIRE(err);
  CHECK(err->kind == ErrorKind::DivisionByZero);
  REQUIRE(err->block);
  REQUIRE(err->thread);
  CHECK(err->thread->x == 3);
  CHECK(err->block->x == 0);
  CHECK(err->text() ==
        "simt.tir:15:8: error: integer division by zero in div.u32 in kernel 'k', block (0,0,0) thread (3,0,0)");
}

TEST_CASE("interp: binding errors name the parameter") {
  tn::ir::Module m = parse(std::string(kPrologue) + "  ret\n}\n");
  Interpreter vm;
  CHECK(vm.load(m, "nope")->text() == "error: no kernel named 'nope'");
  REQUIRE_FALSE(vm.load(m, "k"));
  CHECK(vm.setScalar("out", 1u)->text() == "error: parameter 'out' of kernel 'k' has type ptr.global: bind a buffer to it");
  CHECK(vm.bindBuffer("x", {})->text() == "error: kernel 'k' has no parameter 'x'");
  CHECK(vm.launch({{1, 1, 1}, {1, 1, 1}, 0})->text() == "error: no buffer bound to parameter 'out'");
  REQUIRE_FALSE(vm.bindArray("out", std::vector<uint32_t>(1)));
  CHECK(vm.launch({{1, 1, 1}, {2048, 1, 1}, 0})->text() == "error: block (2048,1,1) has 2048 threads; at most 1024 are allowed");
}

TEST_CASE("interp: kernels the interpreter cannot run are load errors, not crashes") {
  // Not verified on purpose: the decoder re-checks what it relies on.
  const std::string text = R"(target sm_90
ptx 7.8
kernel @badtype() {
^entry:
  %a = const 1 : u32
  %b = const 2.0 : f32
  %c = add %a, %b : f32
  ret
}
kernel @sharedparam(%p: ptr.shared) {
^entry:
  ret
}
)";
  tn::ir::Diagnostics diags;
  auto m = tn::ir::parseModule(text, "bad.tir", diags);
  REQUIRE(m.has_value());
  Interpreter vm;
  auto err = vm.load(*m, "badtype");
  REQUIRE(err);
  CHECK(err->text() ==
        "bad.tir:7:8: error: cannot interpret kernel 'badtype': operand 1 of 'add' has type u32, expected f32");
  err = vm.load(*m, "sharedparam");
  REQUIRE(err);
  CHECK(err->text() ==
        "bad.tir:10:1: error: cannot interpret kernel 'sharedparam': parameter '%p' of type ptr.shared cannot be bound "
        "to host memory");
}

