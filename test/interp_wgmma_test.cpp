// wgmma pieces that have no text form of their own: the builder's descriptor (TC§4.4's worked
// example values, computed by the interpreter from the integer IR the builder emits), the
// interpreter's element addresses for those descriptors (TC§4.4's 0x90A and 0xA9BC, which TMA's
// swizzle also gives), and a builder-made kernel whose wgmma the verifier and the interpreter
// accept. The 64xNx64 products against a double reference are the wgmma.tir goldens
// (test/interp_goldens_test.cpp).
#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "backends/interp/Interp.h"
#include "backends/interp/InterpImpl.h"
#include "ir/Builder.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

using namespace tn;
using ir::KernelBuilder;
using ir::Type;
using ir::Value;

namespace {

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

ir::Module sm90a() {
  ir::Module m;
  m.target = ir::Target{90, true};
  m.ptx = 80;
  return m;
}

// Thread i stores wgmma_descriptor(starts[i], lbo, sbo, swizzle) to out[i].
std::vector<uint64_t> descriptors(const std::vector<uint32_t>& starts, unsigned lbo, unsigned sbo, unsigned swizzle) {
  ir::Module m = sm90a();
  KernelBuilder b(m, "desc");
  Value in = b.param(Type::ptr(ir::AddrSpace::Global), "in");
  Value out = b.param(Type::ptr(ir::AddrSpace::Global), "out");
  Value t = b.tid();
  Value start = b.load(b.index(in, t, 4), Type::u32(), "start");
  b.store(b.index(out, t, 8), b.wgmma_descriptor(start, lbo, sbo, swizzle, "d"));
  b.ret();
  REQUIRE(b.ok());
  ir::Diagnostics diags;
  REQUIRE_MESSAGE(ir::verify(m, diags), (diags.all().empty() ? "" : ir::formatDiagnostic(diags.all()[0])));
  interp::Interpreter vm;
  REQUIRE_FALSE(vm.load(m, "desc"));
  REQUIRE_FALSE(vm.bindArray("in", starts));
  REQUIRE_FALSE(vm.bindArray("out", std::vector<uint64_t>(starts.size(), 0)));
  auto err = vm.launch({{1, 1, 1}, {static_cast<uint32_t>(starts.size()), 1, 1}, 0});
  INFO((err ? err->text() : ""));
  REQUIRE_FALSE(err);
  return vm.read<uint64_t>("out");
}

}  // namespace

TEST_CASE("wgmma: the builder's descriptors are TC§4.4's worked examples") {
  // A: 64x64 bf16 K-major, 128B swizzle at 0x400, K-steps at +32 bytes; LBO 16, SBO 1024.
  std::vector<uint64_t> a = descriptors({0x400, 0x420, 0x440, 0x460}, 16, 1024, 128);
  CHECK(hex(a[0]) == "0x4000004000010040");
  CHECK(hex(a[1]) == "0x4000004000010042");
  CHECK(hex(a[2]) == "0x4000004000010044");
  CHECK(hex(a[3]) == "0x4000004000010046");
  // B: MN-major strips at 0x8000, K-step 1 at +2048; LBO 8192, SBO 1024.
  CHECK(hex(descriptors({0x8800}, 8192, 1024, 128)[0]) == "0x4000004002000880");
  // The start address is taken modulo 2^18 (encode's mask), and the other swizzle codes.
  CHECK(hex(descriptors({0x40400}, 16, 1024, 64)[0]) == "0x8000004000010040");
  CHECK(hex(descriptors({0x400}, 128, 256, 32)[0]) == "0xc000001000080040");
  CHECK(hex(descriptors({0x400}, 128, 256, 0)[0]) == "0x0000001000080040");
}

TEST_CASE("wgmma: element addresses through descriptors (TC§4.4's A[10][21] and B[19][70])") {
  using interp::detail::decodeWgmmaDescriptor;
  using interp::detail::wgmmaElementAddress;
  // A[10][21] is in K-step j = 1 at kk = 5: 0x400 + 32 + 10/8 * 1024 + 10%8 * 128 + 5 * 2 = 0x92A,
  // swizzled to 0x90A, where TMA put row 10, column 21.
  interp::detail::WgmmaDescriptor a = decodeWgmmaDescriptor(0x4000004000010042);
  CHECK(a.start == 0x420);
  CHECK(a.lbo == 16);
  CHECK(a.sbo == 1024);
  CHECK(a.swizzle == 128);
  CHECK(wgmmaElementAddress(a, false, 10, 5) == 0x90A);
  // B[19][70] (k = 19: K-step 1, kk = 3; n = 70 in the second strip): 0xA98C, swizzled 0xA9BC.
  interp::detail::WgmmaDescriptor b = decodeWgmmaDescriptor(0x4000004002000880);
  CHECK(b.lbo == 8192);
  CHECK(wgmmaElementAddress(b, true, 70, 3) == 0xA9BC);
  // Every element of the A tile lands where the 128B TMA swizzle puts A[m][16j + kk].
  for (unsigned j = 0; j < 4; ++j) {
    interp::detail::WgmmaDescriptor d = decodeWgmmaDescriptor(0x4000004000010040 + 2 * j);
    for (unsigned m = 0; m < 64; ++m)
      for (unsigned kk = 0; kk < 16; ++kk) {
        uint32_t linear = 0x400 + 128 * m + 2 * (16 * j + kk);
        uint32_t tma = linear ^ (((linear >> 7) & 7) << 4);
        INFO("j " << j << " m " << m << " kk " << kk);
        CHECK(wgmmaElementAddress(d, false, m, kk) == tma);
      }
  }
  // No swizzle, K-major: 8x16-byte core matrices, LBO between the two K halves, SBO between
  // 8-row groups.
  interp::detail::WgmmaDescriptor n = decodeWgmmaDescriptor(0x0000001000080040);
  CHECK(wgmmaElementAddress(n, false, 9, 10) == 0x400 + 256 + 16 + 128 + 4);
}

TEST_CASE("wgmma: a builder kernel with a register-A wgmma verifies, prints and runs") {
  ir::Module m = sm90a();
  KernelBuilder b(m, "k");
  Value out = b.param(Type::ptr(ir::AddrSpace::Global), "out");
  ir::SharedArray tile = b.shared("tile", Type::of(ir::Scalar::B32), 64, 1024);
  Value base = b.shared_addr(tile, "base");
  Value t = b.tid();
  // B (16x8 bf16, K-major, no swizzle: two 8x16-byte core matrices, LBO 128) is the identity:
  // word w holds B[kb][n] and B[kb + 1][n] with n = (w % 32) / 4, kb = 8(w / 32) + 2(w % 4).
  // Threads 64 .. 127 write the same words again.
  Value w = b.bit_and(t, b.u32(63), "w");
  Value n = b.shr(b.bit_and(w, b.u32(31)), b.u32(2), "n");
  Value kb = b.add(b.shl(b.shr(w, b.u32(5)), b.u32(3)), b.shl(b.bit_and(w, b.u32(3)), b.u32(1)), "kb");
  Value lo = b.select(b.setp(ir::Mod::Eq, kb, n), b.u32(0x3F80), b.u32(0), "lo");
  Value hi = b.select(b.setp(ir::Mod::Eq, b.add(kb, b.u32(1)), n), b.u32(0x3F800000), b.u32(0), "hi");
  b.store(b.ptradd(base, b.shl(w, b.u32(2))), b.bitcast(b.bit_or(lo, hi), Type::of(ir::Scalar::B32)));
  b.fence_proxy_async();
  b.bar_sync();
  Value bDesc = b.wgmma_descriptor(base, 128, 256, 0, "bdesc");
  // A fragment: every register holds the pair (1.0, 2.0).
  Value pair = b.b32(0x40003F80);
  Value aFrag = b.pack(ir::kMmaAFragment, {pair, pair, pair, pair}, "afrag");
  Value zero = b.f32(0.0f);
  Value acc = b.pack(Type::of(ir::Scalar::F32, 4), {zero, zero, zero, zero}, "acc");
  b.wgmma_fence();
  Value d = b.wgmma_mma_async(8, ir::Scalar::BF16, acc, aFrag, bDesc, b.pred(false), false, false, "d");
  b.wgmma_commit_group();
  b.wgmma_wait_group(0);
  b.store(b.index(out, t, 16), d);
  b.ret();
  REQUIRE(b.ok());
  ir::Diagnostics diags;
  REQUIRE_MESSAGE(ir::verify(m, diags), (diags.all().empty() ? "" : ir::formatDiagnostic(diags.all()[0])));
  CHECK(ir::print(m).find("%d = wgmma.mma_async %acc, %afrag, %bdesc, %") != std::string::npos);
  interp::Interpreter vm;
  REQUIRE_FALSE(vm.load(m, "k"));
  REQUIRE_FALSE(vm.bindArray("out", std::vector<float>(128 * 4, -1.0f)));
  auto err = vm.launch({{1, 1, 1}, {128, 1, 1}, 0});
  INFO((err ? err->text() : ""));
  REQUIRE_FALSE(err);
  // A holds (1.0, 2.0) in every register: A[m][k] = 1 + k % 2, so D[m][n] = A[m][n].
  std::vector<float> got = vm.read<float>("out");
  REQUIRE(got.size() == 512);
  for (unsigned i = 0; i < 512; ++i) {
    INFO("thread " << i / 4 << " element " << i % 4);
    CHECK(got[i] == (i % 2 ? 2.0f : 1.0f));
  }
}
