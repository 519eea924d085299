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
