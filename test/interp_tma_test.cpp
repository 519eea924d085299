// Tensor maps in the interpreter: binding a tmap parameter (Interpreter::setTensorMap), and the
// launch's refusal of an unbound, undecodable or unusable map, naming the parameter.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "backends/interp/Interp.h"
#include "interp_harness.h"

namespace {

using tn::interp::Interpreter;
using tn::interp::TensorMapDesc;

const char* kKernel = R"(target sm_90
ptx 8.0
kernel @k(%a: ptr.global, %a_map: tmap, %n: u32) {
^entry:
  ret
}
)";

// A 2-D f32 map over `a`: 40 x 24 elements, rows of 160 bytes, a 16 x 8 box, no swizzle.
TensorMapDesc mapOver(uint64_t address) {
  TensorMapDesc d;
  d.dataType = 7;
  d.rank = 2;
  d.elementBytes = 4;
  d.address = address;
  d.dims[0] = 40;
  d.dims[1] = 24;
  d.strides[0] = 160;
  d.box[0] = 16;
  d.box[1] = 8;
  d.elementStrides[0] = d.elementStrides[1] = 1;
  return d;
}

}  // namespace

TEST_CASE("interp: a tmap parameter is listed, bound with setTensorMap and required at launch") {
  tn::ir::Module m = tn::harness::parseText(kKernel, "tmap.tir");
  Interpreter vm;
  REQUIRE_FALSE(vm.load(m, "k"));
  std::vector<tn::interp::ParamInfo> ps = vm.params();
  REQUIRE(ps.size() == 3);
  CHECK(ps[1].name == "a_map");
  CHECK(tn::ir::typeName(ps[1].type) == "tmap");
  CHECK_FALSE(ps[1].bound);

  REQUIRE_FALSE(vm.bindArray("a", std::vector<float>(40 * 24)));
  REQUIRE_FALSE(vm.setScalar("n", 1u));
  CHECK(vm.launch({{1, 1, 1}, {32, 1, 1}, 0})->text() == "error: no tensor map bound to parameter 'a_map'");

  // The wrong binding for each kind of parameter names what the parameter takes.
  CHECK(vm.setScalar("a_map", 1u)->text() ==
        "error: parameter 'a_map' of kernel 'k' has type tmap: bind a tensor map to it (setTensorMap)");
  CHECK(vm.bindBuffer("a_map", {})->text() ==
        "error: parameter 'a_map' of kernel 'k' has type tmap: bind a tensor map to it (setTensorMap)");
  CHECK(vm.setTensorMap("n", {})->text() == "error: parameter 'n' of kernel 'k' has type u32, not a tmap");
  CHECK(vm.setTensorMap("a", {})->text() == "error: parameter 'a' of kernel 'k' has type ptr.global: bind a buffer to it");
  CHECK(vm.setTensorMap("b_map", {})->text() == "error: kernel 'k' has no parameter 'b_map'");

  // Bytes the simulated driver never encoded.
  REQUIRE_FALSE(vm.setTensorMap("a_map", tn::interp::TensorMapBytes{}));
  CHECK(vm.params()[1].bound);
  CHECK(vm.launch({{1, 1, 1}, {32, 1, 1}, 0})->text() ==
        "error: the tensor map bound to parameter 'a_map' was not encoded by the simulator's cuTensorMapEncodeTiled "
        "(no TMAP magic, or a rank outside 1 .. 5)");

  // The buffer's own pointer value is what a map over it names.
  std::optional<uint64_t> a = vm.pointerValue("a");
  REQUIRE(a);
  CHECK_FALSE(vm.pointerValue("n"));
  REQUIRE_FALSE(vm.setTensorMap("a_map", tn::interp::encodeTensorMap(mapOver(*a))));
  CHECK_FALSE(vm.launch({{1, 1, 1}, {32, 1, 1}, 0}));

  // Decodable, but not a map cp.async.bulk.tensor can use (TC§5.1).
  struct Bad {
    void (*edit)(TensorMapDesc&);
    std::string why;
  };
  const Bad bad[] = {
      {[](TensorMapDesc& d) { d.elementBytes = 3; }, "its element size is 3 bytes (expected 1, 2, 4 or 8)"},
      {[](TensorMapDesc& d) { d.interleave = 1; }, "it is interleaved (the interpreter models non-interleaved maps only)"},
      {[](TensorMapDesc& d) { d.swizzle = 4; }, "its swizzle mode is 4 (expected 0 none, 1 32B, 2 64B or 3 128B)"},
      {[](TensorMapDesc& d) { d.address += 4; }, "its global address 4 bytes past a 16-byte boundary"},
      {[](TensorMapDesc& d) { d.dims[1] = 0; }, "dimension 1 has 0 elements (expected 1 .. 2^32)"},
      {[](TensorMapDesc& d) { d.box[1] = 257; }, "box dimension 1 is 257 (expected 1 .. 256)"},
      {[](TensorMapDesc& d) { d.strides[0] = 168; }, "the stride of dimension 1 is 168 bytes (a multiple of 16 below 2^40)"},
      {[](TensorMapDesc& d) { d.box[0] = 6; }, "its inner box of 24 bytes is not a multiple of 16"},
      {[](TensorMapDesc& d) { d.swizzle = 1; }, "its inner box of 64 bytes exceeds the 32-byte swizzle span"},
  };
  for (const Bad& b : bad) {
    TensorMapDesc d = mapOver(*a);
    b.edit(d);
    REQUIRE_FALSE(vm.setTensorMap("a_map", tn::interp::encodeTensorMap(d)));
    auto err = vm.launch({{1, 1, 1}, {32, 1, 1}, 0});
    REQUIRE(err);
    CHECK(err->text() == "error: the tensor map bound to parameter 'a_map' is unusable: " + b.why);
  }
}

namespace {

// Thread 0 optionally initializes the mbarrier at @bar + %barat, then issues a TMA of a 16 x 8
// u32 box into @tile + %dst and announces %bytes on the barrier, the copy first when %late.
const char* kFaults = R"(target sm_90
ptx 8.0
kernel @k(%a: ptr.global align 16, %a_map: tmap, %dst: u32, %barat: u32, %bytes: u32, %init: u32, %late: u32) reqntid(32) {
  shared @pad: b8[1024] align 1024
  shared @tile: b8[2000] align 1024
  shared @bar: b64[2] align 8
^entry:
  %tile = shared.addr @tile : ptr.shared
  %d = ptradd %tile, %dst : ptr.shared
  %bars = shared.addr @bar : ptr.shared
  %b = ptradd %bars, %barat : ptr.shared
  %t = tid.x : u32
  %zero = const 0 : u32
  %one = const 1 : u32
  %first = setp.eq %t, %zero : u32
  %x = const 0 : s32
  cbr %first, ^go, ^done
^go:
  %doinit = setp.ne %init, %zero : u32
  cbr %doinit, ^init, ^issue
^init:
  mbarrier.init %b, %one
  br ^issue
^issue:
  %copyfirst = setp.ne %late, %zero : u32
  cbr %copyfirst, ^copy, ^announce
^announce:
  mbarrier.arrive.expect_tx %b, %bytes
  cp.async.bulk.tensor.2d %d, %a_map, %x, %x, %b
  br ^done
^copy:
  cp.async.bulk.tensor.2d %d, %a_map, %x, %x, %b
  mbarrier.arrive.expect_tx %b, %bytes
  br ^done
^done:
  ret
}
)";

struct FaultRun {
  uint32_t dst = 0, barat = 0, bytes = 512, init = 1, late = 0;
  uint8_t rank = 2, swizzle = 0;
};

std::string runFault(const FaultRun& f) {
  tn::ir::Module m = tn::harness::parseText(kFaults, "tma-faults.tir");
  Interpreter vm;
  REQUIRE_FALSE(vm.load(m, "k"));
  REQUIRE_FALSE(vm.bindArray("a", std::vector<uint32_t>(16 * 8, 7)));
  TensorMapDesc d = mapOver(*vm.pointerValue("a"));
  d.elementBytes = 4;
  d.dims[0] = 16;
  d.dims[1] = 8;
  d.strides[0] = 64;
  d.box[0] = 16;
  d.box[1] = 8;
  d.swizzle = f.swizzle;
  d.rank = f.rank;
  d.dims[2] = d.box[2] = 1;
  d.strides[1] = 512;
  REQUIRE_FALSE(vm.setTensorMap("a_map", tn::interp::encodeTensorMap(d)));
  for (auto [name, v] : {std::pair<const char*, uint32_t>{"dst", f.dst}, {"barat", f.barat}, {"bytes", f.bytes},
                         {"init", f.init}, {"late", f.late}})
    REQUIRE_FALSE(vm.setScalar(name, v));
  auto err = vm.launch({{1, 1, 1}, {32, 1, 1}, 0});
  return err ? err->text() : "";
}

}  // namespace

TEST_CASE("interp: TMA faults name the copy, its box, its map and its mbarrier") {
  // The copy is on line 29 (after the announcement) or 32 (before it, at line 33).
  const std::string at = "tma-faults.tir:29:3: error: ", late = "tma-faults.tir:32:3: error: ";
  const std::string in = " in kernel 'k', block (0,0,0) thread (0,0,0)";
  CHECK(runFault({}) == "");
  CHECK(runFault({.late = 1}) == "");  // complete-tx before the expect_tx: the arrival completes the phase
  CHECK(runFault({.rank = 3}) ==
        at + "cp.async.bulk.tensor.2d through the tensor map '%a_map' of rank 3 (a 2-D copy needs rank 2)" + in);
  CHECK(runFault({.barat = 4, .init = 0, .late = 1}) == late + "cp.async.bulk.tensor.2d's mbarrier at offset 4 of '@bar' (16 bytes) is not 8 "
                                       "aligned bytes inside one shared array" + in);
  CHECK(runFault({.barat = 8, .init = 0}) ==
        "tma-faults.tir:28:3: error: mbarrier.arrive.expect_tx at offset 8 of '@bar' (16 bytes), which no mbarrier.init set up" + in);
  CHECK(runFault({.barat = 8, .init = 0, .late = 1}) ==
        late + "cp.async.bulk.tensor.2d completes its bytes on the mbarrier at offset 8 of '@bar' (16 bytes), which no "
               "mbarrier.init set up" + in);
  CHECK(runFault({.dst = 8}) == at + "misaligned cp.async.bulk.tensor.2d shared destination of a 512-byte box at offset 8 "
                                     "of '@tile' (2000 bytes) (a box starts on a 16-byte boundary)" + in);
  CHECK(runFault({.dst = 1600}) ==
        at + "out-of-bounds cp.async.bulk.tensor.2d shared destination of a 512-byte box at offset 1600 of '@tile' (2000 bytes)" + in);
  // 512 bytes before @tile: the box lies inside @pad, but its pointer came from @tile.
  CHECK(runFault({.dst = 0u - 512u}) ==
        at + "out-of-bounds cp.async.bulk.tensor.2d shared destination of a 512-byte box at offset 512 of '@pad' (1024 "
             "bytes) through a pointer into '@tile' (2000 bytes)" + in);
  // The box fits linearly, but the 128B swizzle of the last, partial 128-byte line moves its
  // first 16 bytes to the line's last chunk, past the array's end.
  CHECK(runFault({.dst = 1488, .swizzle = 3}) ==
        at + "out-of-bounds cp.async.bulk.tensor.2d shared destination: box element (12, 6) swizzles to offset 2032 of "
             "'@tile' (2000 bytes), outside it" + in);
  // The copy first, then an announcement of fewer bytes: reported at the arrival that ends the phase's arrivals.
  CHECK(runFault({.bytes = 256, .late = 1}) ==
        "tma-faults.tir:33:3: error: the mbarrier at offset 0 of '@bar' (16 bytes) received more "
        "transaction bytes than expected in phase 0, whose arrivals are all in: expect_tx announced 256 bytes, the "
        "copies delivered 512" + in);
}

TEST_CASE("interp: a TMA whose operands the decoder cannot trust is a load error") {
  // Not verified on purpose: a tmap block parameter, a global destination.
  const std::string text = R"(target sm_90
ptx 8.0
kernel @blockmap(%m: tmap, %x: s32, %c: pred) {
  shared @bar: b64[1] align 8
  shared @tile: b8[512] align 128
^entry:
  %b = shared.addr @bar : ptr.shared
  %t = shared.addr @tile : ptr.shared
  br ^next(%m)
^next(%n: tmap):
  cp.async.bulk.tensor.2d %t, %n, %x, %x, %b
  ret
}
kernel @global(%m: tmap, %x: s32, %g: ptr.global) {
  shared @bar: b64[1] align 8
^entry:
  %b = shared.addr @bar : ptr.shared
  cp.async.bulk.tensor.2d %g, %m, %x, %x, %b
  ret
}
)";
  const std::pair<const char*, const char*> cases[] = {
      {"blockmap", "bad.tir:11:3: error: cannot interpret kernel 'blockmap': cp.async.bulk.tensor.2d's tensor map is "
                   "not a kernel parameter"},
      {"global", "bad.tir:18:3: error: cannot interpret kernel 'global': cp.async.bulk.tensor.2d takes ptr.shared addresses"}};
  tn::ir::Diagnostics diags;
  std::optional<tn::ir::Module> parsed = tn::ir::parseModule(text, "bad.tir", diags);
  REQUIRE(parsed);
  for (auto [kernel, want] : cases) {
    std::optional<tn::interp::Error> err = Interpreter().load(*parsed, kernel);
    CHECK((err ? err->text() : "(loaded)") == want);
  }
}
