// The simulated driver (libtruenort-sim.so) through the Driver table truenort binds, without a
// bundle: its device, memory, events and error codes, and a kernel loaded from .tir text that
// runs on the interpreter, including a faulting launch whose report reaches the Error.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "test_paths.h"
#include "backends/interp/TensorMap.h"
#include "backends/bundle/Bundle.h"
#include "truenort/Bundle.h"
#include "truenort/Driver.h"

using namespace truenort;

namespace {

const Driver& sim() {
  static auto d = loadDriverFrom(tn::testpaths::inBuild("lib/libtruenort-sim.so"));
  if (!d) FAIL(d.error().describe());
  return *d.value();
}

// The primary context, current on this thread.
void makeCurrent() {
  CUcontext ctx = nullptr;
  REQUIRE(sim().cuDevicePrimaryCtxRetain(&ctx, 0) == cu::SUCCESS);
  REQUIRE(sim().cuCtxSetCurrent(ctx) == cu::SUCCESS);
  REQUIRE(sim().cuDevicePrimaryCtxRelease(0) == cu::SUCCESS);
}

std::string readSource(const std::string& rel) {
  std::ifstream in(std::string(TRUENOC_SOURCE_DIR) + "/" + rel);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CUdeviceptr alloc(size_t bytes) {
  CUdeviceptr p = 0;
  REQUIRE(sim().cuMemAlloc(&p, bytes) == cu::SUCCESS);
  return p;
}

}  // namespace

TEST_CASE("sim: the simulated driver is recognised and describes an H100-like device") {
  const Driver& d = sim();
  CHECK(d.simulated());
  CHECK(d.version >= kMinDriverVersion);
  int count = 0, major = 0, minor = 0, optin = 0, sms = 0;
  REQUIRE(d.cuDeviceGetCount(&count) == cu::SUCCESS);
  CHECK(count == 1);
  CHECK(d.cuDeviceGetAttribute(&major, cu::DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0) == cu::SUCCESS);
  CHECK(d.cuDeviceGetAttribute(&minor, cu::DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0) == cu::SUCCESS);
  CHECK(d.cuDeviceGetAttribute(&optin, cu::DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 0) == cu::SUCCESS);
  CHECK(d.cuDeviceGetAttribute(&sms, 16, 0) == cu::SUCCESS);
  CHECK(major * 10 + minor == 90);
  CHECK(optin == 227 * 1024);
  CHECK(sms == 132);
  CUdevice dev = 0;
  CHECK(d.cuDeviceGet(&dev, 1) == 101);  // CUDA_ERROR_INVALID_DEVICE
  char name[128] = {};
  REQUIRE(d.cuDeviceGetName(name, sizeof name, 0) == cu::SUCCESS);
  CHECK(std::string(name).find("simulated") != std::string::npos);
}

TEST_CASE("sim: device memory round-trips and every access outside an allocation is refused") {
  const Driver& d = sim();
  makeCurrent();
  size_t freeBefore = 0, total = 0;
  REQUIRE(d.cuMemGetInfo(&freeBefore, &total) == cu::SUCCESS);
  CHECK(total == size_t{80} << 30);
  CUdeviceptr p = alloc(1000);
  size_t freeAfter = 0;
  REQUIRE(d.cuMemGetInfo(&freeAfter, &total) == cu::SUCCESS);
  CHECK(freeBefore - freeAfter == 1000);

  std::mt19937 rng(std::random_device{}());
  std::vector<uint8_t> in(1000), out(1000);
  for (uint8_t& b : in) b = static_cast<uint8_t>(rng());
  REQUIRE(d.cuMemcpyHtoD(p, in.data(), in.size()) == cu::SUCCESS);
  CUdeviceptr q = alloc(1000);
  REQUIRE(d.cuMemcpyDtoD(q, p, 1000) == cu::SUCCESS);
  REQUIRE(d.cuMemsetD8Async(q + 10, 0x5A, 5, nullptr) == cu::SUCCESS);
  REQUIRE(d.cuMemcpyDtoH(out.data(), q, out.size()) == cu::SUCCESS);
  for (size_t i = 0; i < in.size(); ++i) CHECK(out[i] == (i >= 10 && i < 15 ? 0x5A : in[i]));

  // One byte too many, and a copy into freed memory, are errors with a report.
  CHECK(d.cuMemcpyHtoD(p, in.data(), 1001) == 1);  // CUDA_ERROR_INVALID_VALUE
  Error e = d.fail(1, "cuMemcpyHtoD_v2");
  CHECK(e.message.find("is not inside one live device allocation") != std::string::npos);
  REQUIRE(d.cuMemFree(q) == cu::SUCCESS);
  CHECK(d.cuMemcpyHtoD(q, in.data(), 1) == 1);
  CHECK(d.cuMemFree(q) == 1);
  CHECK(d.cuMemFree(p) == cu::SUCCESS);

  CUdeviceptr huge = 0;
  CHECK(d.cuMemAlloc(&huge, size_t{1} << 50) == cu::ERROR_OUT_OF_MEMORY);
}

TEST_CASE("sim: events measure host time between records") {
  const Driver& d = sim();
  makeCurrent();
  CUevent a = nullptr, b = nullptr, untimed = nullptr;
  REQUIRE(d.cuEventCreate(&a, cu::EVENT_DEFAULT) == cu::SUCCESS);
  REQUIRE(d.cuEventCreate(&b, cu::EVENT_DEFAULT) == cu::SUCCESS);
  REQUIRE(d.cuEventCreate(&untimed, cu::EVENT_DISABLE_TIMING) == cu::SUCCESS);
  float ms = -1;
  CHECK(d.cuEventElapsedTime(&ms, a, b) == 400);  // not recorded yet: CUDA_ERROR_INVALID_HANDLE
  REQUIRE(d.cuEventRecord(a, nullptr) == cu::SUCCESS);
  REQUIRE(d.cuEventRecord(b, nullptr) == cu::SUCCESS);
  REQUIRE(d.cuEventRecord(untimed, nullptr) == cu::SUCCESS);
  REQUIRE(d.cuEventSynchronize(b) == cu::SUCCESS);
  REQUIRE(d.cuEventElapsedTime(&ms, a, b) == cu::SUCCESS);
  CHECK(ms >= 0);
  CHECK(d.cuEventElapsedTime(&ms, a, untimed) == 400);
  for (CUevent e : {a, b, untimed}) CHECK(d.cuEventDestroy(e) == cu::SUCCESS);
  CHECK(d.cuEventDestroy(a) == 400);
}

TEST_CASE("sim: a kernel from .tir text runs on the interpreter; an out-of-bounds store is an illegal address") {
  const Driver& d = sim();
  makeCurrent();
  std::string text = readSource("examples/vadd.tir");
  CUmodule mod = nullptr;
  REQUIRE(d.cuModuleLoadData(&mod, text.c_str()) == cu::SUCCESS);
  CUfunction fn = nullptr;
  REQUIRE(d.cuModuleGetFunction(&fn, mod, "vadd") == cu::SUCCESS);
  CHECK(d.cuModuleGetFunction(&fn, mod, "nope") == 500);  // CUDA_ERROR_NOT_FOUND

  const uint32_t n = 1000;
  std::mt19937 rng(std::random_device{}());
  std::vector<float> a(n), b(n), c(n);
  for (uint32_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(rng() % 10000) / 7.0f;
    b[i] = static_cast<float>(rng() % 10000) / 3.0f;
  }
  CUdeviceptr da = alloc(n * 4), db = alloc(n * 4), dc = alloc(n * 4);
  REQUIRE(d.cuMemcpyHtoD(da, a.data(), n * 4) == cu::SUCCESS);
  REQUIRE(d.cuMemcpyHtoD(db, b.data(), n * 4) == cu::SUCCESS);
  uint32_t count = n;
  void* args[] = {&da, &db, &dc, &count};
  REQUIRE(d.cuLaunchKernel(fn, (n + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr) == cu::SUCCESS);
  REQUIRE(d.cuMemcpyDtoH(c.data(), dc, n * 4) == cu::SUCCESS);
  for (uint32_t i = 0; i < n; ++i) CHECK(c[i] == a[i] + b[i]);

  // n larger than the buffers: the first thread past the end faults in block 3.
  count = 1100;
  const CUresult r = d.cuLaunchKernel(fn, 5, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr);
  CHECK(r == 700);  // CUDA_ERROR_ILLEGAL_ADDRESS
  Error e = d.fail(r, "cuLaunchKernel", "vadd");
  CHECK(e.cuda_name == "CUDA_ERROR_ILLEGAL_ADDRESS");
  CHECK(e.describe().find("vadd.sm_80.tir:19:8: error: out-of-bounds ld.global of 4 bytes at address ") !=
        std::string::npos);
  CHECK(e.describe().find("past the end of the 4000-byte allocation at ") != std::string::npos);
  CHECK(e.describe().find("in kernel 'vadd', block (3,0,0) thread (232,0,0)") != std::string::npos);

  // Launch geometry and dynamic shared memory are checked as the driver checks them.
  CHECK(d.cuLaunchKernel(fn, 1, 1, 1, 2048, 1, 1, 0, nullptr, args, nullptr) == 1);
  CHECK(d.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 64 * 1024, nullptr, args, nullptr) == 1);
  CHECK(d.cuFuncSetAttribute(fn, cu::FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 228 * 1024) == 1);
  REQUIRE(d.cuFuncSetAttribute(fn, cu::FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 64 * 1024) == cu::SUCCESS);
  count = n;
  CHECK(d.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 64 * 1024, nullptr, args, nullptr) == cu::SUCCESS);
  for (CUdeviceptr p : {da, db, dc}) CHECK(d.cuMemFree(p) == cu::SUCCESS);
  CHECK(d.cuModuleUnload(mod) == cu::SUCCESS);
  CHECK(d.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr) == 400);
}

TEST_CASE("sim: launch bounds confine one launch to its arguments' ranges, and cuMemGetAddressRange finds allocations") {
  const Driver& d = sim();
  makeCurrent();
  const bool bounds = d.simLaunchBounds != nullptr, ranges = d.cuMemGetAddressRange != nullptr;
  REQUIRE(bounds);
  REQUIRE(ranges);
  std::string text = readSource("examples/vadd.tir");
  CUmodule mod = nullptr;
  REQUIRE(d.cuModuleLoadData(&mod, text.c_str()) == cu::SUCCESS);
  CUfunction fn = nullptr;
  REQUIRE(d.cuModuleGetFunction(&fn, mod, "vadd") == cu::SUCCESS);
  const uint32_t n = 256;
  CUdeviceptr da = alloc(n * 4), db = alloc(n * 4), dc = alloc(n * 4);
  CUdeviceptr base = 0;
  size_t size = 0;
  REQUIRE(d.cuMemGetAddressRange(&base, &size, db + 100) == cu::SUCCESS);
  CHECK(base == db);
  CHECK(size == n * 4);
  CHECK(d.cuMemGetAddressRange(&base, &size, db + n * 4) == 500);  // CUDA_ERROR_NOT_FOUND: the gap after it
  std::vector<float> ones(n, 1.0f);
  REQUIRE(d.cuMemcpyHtoD(da, ones.data(), n * 4) == cu::SUCCESS);
  REQUIRE(d.cuMemcpyHtoD(db, ones.data(), n * 4) == cu::SUCCESS);
  uint32_t count = n;
  void* args[] = {&da, &db, &dc, &count};
  auto bound = [&](uint64_t aBytes) {
    const uint64_t ranges[] = {da, da + aBytes, db, db + n * 4, dc, dc + n * 4};
    d.simLaunchBounds(ranges, 3);
  };
  // a's range ends at element 200: thread 200 reads past it.
  bound(200 * 4);
  CUresult r = d.cuLaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr);
  CHECK(r == 700);
  const std::string text2 = d.fail(r, "cuLaunchKernel", "vadd").describe();
  CHECK(text2.find("out-of-bounds ld.global of 4 bytes at address ") != std::string::npos);
  CHECK(text2.find("past the end of the 800-byte allocation at ") != std::string::npos);
  CHECK(text2.find("the runtime's extent checks confine the launch to its pointer arguments' extents") != std::string::npos);
  // Within the bounds it runs; the bounds held for one launch only.
  bound(n * 4);
  CHECK(d.cuLaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr) == cu::SUCCESS);
  count = 100;
  bound(0);  // an empty range: a is not addressable at all
  CHECK(d.cuLaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr) == 700);
  CHECK(d.cuLaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr) == cu::SUCCESS);
  std::vector<float> c(n);
  REQUIRE(d.cuMemcpyDtoH(c.data(), dc, n * 4) == cu::SUCCESS);
  CHECK(c[0] == 2.0f);
  CHECK(c[255] == 2.0f);
  for (CUdeviceptr p : {da, db, dc}) CHECK(d.cuMemFree(p) == cu::SUCCESS);
  CHECK(d.cuModuleUnload(mod) == cu::SUCCESS);
}

// Parameters the runtime does not pass (vectors, pred) still run on the simulator when a caller
// launches them directly, each as many bytes of its kernelParams entry as its type has.
TEST_CASE("sim: vector and pred parameters reach the kernel as cuLaunchKernel passes them") {
  const Driver& d = sim();
  makeCurrent();
  const char* text = R"(target sm_80
ptx 7.0
kernel @k(%out: ptr.global align 16, %a: v4.f32, %h: v2.f16, %p: pred) {
^entry:
  %z = const 0.0 : f32
  %x = extract %a, 2 : v4.f32
  %y = selp %x, %z, %p : f32
  %hx = extract %h, 1 : v2.f16
  %hy = cvt %hx : f16 -> f32
  %s = add %y, %hy : f32
  st %out, %s : f32
  ret
}
)";
  CUmodule mod = nullptr;
  REQUIRE(d.cuModuleLoadData(&mod, text) == cu::SUCCESS);
  CUfunction fn = nullptr;
  REQUIRE(d.cuModuleGetFunction(&fn, mod, "k") == cu::SUCCESS);
  CUdeviceptr out = alloc(16);
  alignas(16) float a[4] = {1.0f, 2.0f, 3.5f, 4.0f};
  const uint16_t h[2] = {0x3C00, 0x4100};  // 1.0 and 2.5 as f16
  for (bool p : {true, false}) {
    void* args[] = {&out, a, const_cast<uint16_t*>(h), &p};
    REQUIRE(d.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr) == cu::SUCCESS);
    float got = 0;
    REQUIRE(d.cuMemcpyDtoH(&got, out, 4) == cu::SUCCESS);
    CHECK(got == (p ? 6.0f : 2.5f));
  }
  CHECK(d.cuMemFree(out) == cu::SUCCESS);
  CHECK(d.cuModuleUnload(mod) == cu::SUCCESS);
}

// The simulator checks races (checks = all): on device memory the report names the address and
// its allocation; a load through a parameter the kernel never stores to is checked when its
// allocation is one the kernel writes through another parameter, as an ld.nc of it is.
TEST_CASE("sim: races on global memory, in a block and between blocks, fail the launch") {
  const Driver& d = sim();
  makeCurrent();
  std::string text = readSource("lit-tests/interp/global-race.tir");
  CUmodule mod = nullptr;
  REQUIRE(d.cuModuleLoadData(&mod, text.c_str()) == cu::SUCCESS);
  CUdeviceptr out = alloc(512), in = alloc(64);
  REQUIRE(d.cuMemsetD8Async(out, 0, 512, nullptr) == cu::SUCCESS);
  REQUIRE(d.cuMemsetD8Async(in, 0, 64, nullptr) == cu::SUCCESS);
  auto launch = [&](const char* kernel, unsigned grid, unsigned block, std::vector<void*> args) {
    CUfunction fn = nullptr;
    REQUIRE(d.cuModuleGetFunction(&fn, mod, kernel) == cu::SUCCESS);
    CUresult r = d.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, nullptr, args.data(), nullptr);
    return std::pair{r, r == cu::SUCCESS ? std::string() : d.fail(r, "cuLaunchKernel", kernel).describe()};
  };
  auto place = [&](CUdeviceptr base, uint64_t offset, uint64_t bytes) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "at address 0x%llx (offset %llu of the %llu-byte allocation at 0x%llx)",
                  static_cast<unsigned long long>(base + offset), static_cast<unsigned long long>(offset),
                  static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(base));
    return std::string(buf);
  };

  auto [overlap, overlapText] = launch("overlap", 3, 33, {&out});
  CHECK(overlap == 719);  // CUDA_ERROR_LAUNCH_FAILED
  CHECK(overlapText.find("global-memory race: a write of the byte " + place(out, 128, 512) +
                         ", which block (0,0,0) thread (32,0,0) writes at ") != std::string::npos);
  CHECK(overlapText.find("in kernel 'overlap', block (1,0,0) thread (0,0,0)") != std::string::npos);
  CHECK(launch("overlap", 3, 32, {&out}).first == cu::SUCCESS);

  auto [neighbour, neighbourText] = launch("neighbour", 1, 8, {&out});
  CHECK(neighbour == 719);
  CHECK(neighbourText.find("global-memory race: ld.global of 4 bytes " + place(out, 4, 512) +
                           " reads a byte that thread (1,0,0) wrote at ") != std::string::npos);

  // Every block loads in[0]; block 0 stores out[0]. Apart, no race; with in = out, block 1's load
  // of in[0] reads what block 0 writes.
  CHECK(launch("handoff", 2, 1, {&out, &in}).first == 719);  // block 1 still reads out[0]
  CHECK(launch("handoff", 1, 1, {&out, &in}).first == cu::SUCCESS);
  auto [alias, aliasText] = launch("handoff", 2, 1, {&out, &out});
  CHECK(alias == 719);
  CHECK(aliasText.find("global-memory race: a read of the byte " + place(out, 0, 512) +
                       ", which block (0,0,0) thread (0,0,0) writes at ") != std::string::npos);
  const std::string loadOfIn = "  %x = ld %in : u32";
  REQUIRE(text.find(loadOfIn) != std::string::npos);
  const auto line = std::count(text.begin(), text.begin() + text.find(loadOfIn), '\n') + 1;
  CHECK(aliasText.find(".tir:" + std::to_string(line) + ":8: error:") != std::string::npos);  // in's load, not out's

  // copy reads src through ld.nc: with src = dst, memory the launch writes.
  CHECK(launch("copy", 2, 4, {&out, &in}).first == cu::SUCCESS);
  auto [nc, ncText] = launch("copy", 2, 4, {&out, &out});
  CHECK(nc == 719);
  CHECK(ncText.find("global-memory race: ld.nc of the byte " + place(out, 0, 512) +
                    ", which block (0,0,0) thread (0,0,0) writes at ") != std::string::npos);
  for (CUdeviceptr p : {out, in}) CHECK(d.cuMemFree(p) == cu::SUCCESS);
  CHECK(d.cuModuleUnload(mod) == cu::SUCCESS);
}

TEST_CASE("sim: images that are not verified IR are invalid images, with the diagnostics") {
  const Driver& d = sim();
  makeCurrent();
  CUmodule mod = nullptr;
  const char elf[] = "\x7f" "ELF\x02\x01\x01";
  CHECK(d.cuModuleLoadData(&mod, elf) == 200);  // CUDA_ERROR_INVALID_IMAGE
  CHECK(d.fail(200, "cuModuleLoadData").message.find("runs a bundle's IR, not cubins") != std::string::npos);
  const char* bad = "target sm_90\nptx 7.8\nkernel @k(%p: ptr.global) {\n^entry:\n  %x = ld %p : f32\n  ret\n";
  CHECK(d.cuModuleLoadData(&mod, bad) == 200);
  CHECK(d.fail(200, "cuModuleLoadData").message.find("k.sm_90.tir:") != std::string::npos);
}

TEST_CASE("sim: cuTensorMapEncodeTiled checks its arguments as the driver does and writes the simulator's format") {
  const Driver& d = sim();
  const bool exported = d.cuTensorMapEncodeTiled != nullptr;
  REQUIRE(exported);
  struct alignas(128) Map {
    unsigned char bytes[128];
  } map{};
  struct Args {
    int dataType = 9;  // bf16
    uint32_t rank = 2;
    uint64_t address = uint64_t{0x7000} << 32;
    uint64_t dims[2] = {100, 37};
    uint64_t strides[1] = {208};
    uint32_t box[2] = {64, 32};
    uint32_t elementStrides[2] = {1, 1};
    int interleave = 0, swizzle = 3, l2 = 2, oob = 0;
  };
  auto encode = [&](const Args& a, void* where) {
    return d.cuTensorMapEncodeTiled(where, a.dataType, a.rank, reinterpret_cast<void*>(a.address), a.dims, a.strides, a.box,
                                    a.elementStrides, a.interleave, a.swizzle, a.l2, a.oob);
  };
  REQUIRE(encode(Args{}, map.bytes) == cu::SUCCESS);
  tn::interp::TensorMapBytes bytes;
  std::memcpy(bytes.data(), map.bytes, bytes.size());
  std::optional<tn::interp::TensorMapDesc> desc = tn::interp::decodeTensorMap(bytes);
  REQUIRE(desc.has_value());
  CHECK(desc->dataType == 9);
  CHECK(desc->elementBytes == 2);
  CHECK(desc->rank == 2);
  CHECK(desc->address == (uint64_t{0x7000} << 32));
  CHECK(desc->dims[0] == 100);
  CHECK(desc->dims[1] == 37);
  CHECK(desc->strides[0] == 208);
  CHECK(desc->box[0] == 64);
  CHECK(desc->box[1] == 32);
  CHECK(desc->elementStrides[0] == 1);
  CHECK(desc->swizzle == 3);
  CHECK(desc->l2Promotion == 2);
  CHECK(desc->oobFill == 0);

  // Each refusal is CUDA_ERROR_INVALID_VALUE with a report saying which argument is wrong.
  auto refusal = [&](auto change) {
    Args a;
    change(a);
    CUresult r = encode(a, map.bytes);
    return r == 1 ? d.fail(r, "cuTensorMapEncodeTiled").message : "CUresult " + std::to_string(r);
  };
  auto says = [](const std::string& message, const char* what) {
    INFO(message);
    CHECK(message.find(std::string("simulator: cuTensorMapEncodeTiled: ") + what) != std::string::npos);
  };
  says(refusal([](Args& a) { a.rank = 0; }), "rank 0 is outside 1 to 5");
  says(refusal([](Args& a) { a.rank = 6; }), "rank 6 is outside 1 to 5");
  says(refusal([](Args& a) { a.address += 8; }), "the global address 123145302310920 is not 16-byte aligned");
  says(refusal([](Args& a) { a.dims[1] = 0; }), "globalDim[1] = 0 is outside 1 to 2^32");
  says(refusal([](Args& a) { a.dims[0] = (uint64_t{1} << 32) + 1; }), "globalDim[0] = 4294967297 is outside 1 to 2^32");
  says(refusal([](Args& a) { a.strides[0] = 200; }), "globalStrides[0] = 200 is not a multiple of 16 below 2^40");
  says(refusal([](Args& a) { a.strides[0] = uint64_t{1} << 40; }), "globalStrides[0] = 1099511627776 is not a multiple of 16 below 2^40");
  says(refusal([](Args& a) { a.box[1] = 0; }), "boxDim[1] = 0 is outside 1 to 256");
  says(refusal([](Args& a) { a.box[1] = 257; }), "boxDim[1] = 257 is outside 1 to 256");
  says(refusal([](Args& a) { a.box[0] = 4; }), "boxDim[0] * element size = 8 bytes is not a multiple of 16");
  says(refusal([](Args& a) { a.swizzle = 2; }), "boxDim[0] * element size = 128 bytes is more than the 64-byte swizzle span");
  says(refusal([](Args& a) { a.elementStrides[1] = 9; }), "elementStrides[1] = 9 is outside 1 to 8");
  says(refusal([](Args& a) { a.elementStrides[0] = 0; }), "elementStrides[0] = 0 is outside 1 to 8");
  says(refusal([](Args& a) { a.dataType = 13; }), "data type 13 is not one the simulator encodes");
  says(refusal([](Args& a) { a.swizzle = 4; }), "swizzle 4 is not 0 to 3");
  says(refusal([](Args& a) { a.interleave = 1; }), "rank 2 is outside 1 to 5 (3 to 5 when interleaved)");
  says(refusal([](Args& a) { a.oob = 2; }), "OOB fill 2 is not 0 or 1");
  CHECK(encode(Args{}, map.bytes + 32) == 1);  // not 64-byte aligned
  says(d.fail(1, "cuTensorMapEncodeTiled").message, "the CUtensorMap is not 64-byte aligned");
  Args noSwizzle;
  noSwizzle.swizzle = 0;
  noSwizzle.box[0] = 256;  // 512 bytes: only a swizzle bounds the inner extent
  CHECK(encode(noSwizzle, map.bytes) == cu::SUCCESS);
}

// test/gpu/tma_tiles.tir, whose result is right only with the tensor map the launch rule describes.
TEST_CASE("sim: a TMA kernel launches through truenort, which encodes its tensor map from the launch rule" *
          doctest::test_suite("gpu")) {
  auto ctx = Context::create(0);
  if (!ctx || !ctx.value().simulated()) {
    MESSAGE("skipped: needs the simulated driver (TRUENORT_DRIVER=sim)");
    return;
  }
  using namespace tn::bundle;
  using S = ParamType::Scalar;
  const ParamType global{S::Ptr, 1, ParamType::Space::Global};
  BundleInput in;
  in.name = "tma";
  in.producer = "truenoc test";
  in.targets = {Target{90, false}};
  in.ptxFallback = true;
  in.ir = true;
  KernelInput k{"tiles",
                {{"src", global, 16, kPtrRead, S::F32},
                 {"src_map", ParamType{S::TensorMap}, 0},
                 {"dst", global, 4, kPtrWritten, S::F32},
                 {"cols", ParamType{S::U32}, 0},
                 {"rows", ParamType{S::U32}, 0},
                 {"ld", ParamType{S::U32}, 0}},
                {},
                {}};
  k.launch.block = {64};
  k.launch.grid = {ceilDiv(Expr::param("cols"), 16), ceilDiv(Expr::param("rows"), 8)};
  k.launch.tensorMaps.push_back(
      {"src_map", "src", S::F32, {Expr::param("cols"), Expr::param("rows")}, {Expr::param("ld") * 4}, {16, 8}, 0});
  k.payloads.push_back({in.targets[0], PayloadKind::Ptx, {}, "// the simulator runs the IR"});
  k.payloads.push_back({in.targets[0], PayloadKind::Ir, {}, readSource("test/gpu/tma_tiles.tir")});
  in.kernels.push_back(k);
  tn::bundle::Result<std::string> bytes = write(in);
  REQUIRE_MESSAGE(bytes.ok(), bytes.error().message);
  auto bundle = truenort::Bundle::load(
      ctx.value(), truenort::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()));
  if (!bundle) FAIL(bundle.error().describe());
  auto kernel = bundle.value().kernel("tiles");
  if (!kernel) FAIL(kernel.error().describe());
  REQUIRE(kernel.value().signature().size() == 5);  // src, dst, cols, rows, ld: the runtime fills src_map
  CHECK(kernel.value().signature()[1].name == "dst");

  auto stream = truenort::Stream::create(ctx.value());
  REQUIRE(stream.ok());
  std::mt19937 rng(std::random_device{}());
  // Odd sizes: partial boxes at the right and bottom edges, rows padded to a multiple of 16 bytes.
  for (auto [cols, rows, ld] : {std::array<uint32_t, 3>{37, 21, 40}, {16, 8, 16}, {5, 3, 8}}) {
    INFO(cols << " x " << rows << ", ld " << ld);
    std::vector<float> host(size_t{rows} * ld), want(size_t{rows} * cols), got(want.size());
    for (float& v : host) v = static_cast<float>(rng() % 100000) / 9.0f;
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t c = 0; c < cols; ++c) want[size_t{r} * cols + c] = host[size_t{r} * ld + c];
    auto src = truenort::DeviceBuffer<float>::allocate(ctx.value(), host.size());
    auto dst = truenort::DeviceBuffer<float>::allocate(ctx.value(), want.size());
    REQUIRE(src.ok());
    REQUIRE(dst.ok());
    REQUIRE(src.value().upload({host.data(), host.size()}).ok());
    for (int twice = 0; twice < 2; ++twice) {  // the second launch takes the map from the kernel's cache
      truenort::Status st = kernel.value().launch(stream.value(), src.value(), dst.value(), cols, rows, ld);
      if (!st) FAIL(st.error().describe());
    }
    REQUIRE(stream.value().synchronize().ok());
    REQUIRE(dst.value().download({got.data(), got.size()}).ok());
    CHECK(got == want);
  }

  // What cuTensorMapEncodeTiled would refuse is a launch error naming the kernel and the map.
  auto src = truenort::DeviceBuffer<float>::allocate(ctx.value(), 64);
  REQUIRE(src.ok());
  const CUdeviceptr dst = src.value().ptr();
  truenort::Status st = kernel.value().launch(stream.value(), src.value().ptr() + 4, dst, 4u, 4u, 4u);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == truenort::Errc::InvalidArgument);
  CHECK(st.error().kernel == "tiles");
  CHECK(st.error().message.find("tensor map 'src_map': the address of 'src' (") == 0);
  st = kernel.value().launch(stream.value(), src.value(), dst, 4u, 4u, 6u);  // 24-byte rows
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message == "tensor map 'src_map': row_stride = 24 bytes is not a multiple of 16 below 2^40");
  CHECK(kernel.value().launch(stream.value(), src.value(), dst, 0u, 0u, 0u).ok());  // nothing to launch, no map
}
