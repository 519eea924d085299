// Interpreter op semantics, one op class per test case, against hand-computed results:
// integer wrap-around and saturation, shifts by >= the width, mul.hi/wide, division, PTX
// min/max NaN rules, IEEE rounding modes, ftz/sat, f16/bf16 rounding ties, every cvt class,
// approximate functions at their special values, atomics, vector memory and pack/extract.
#include <doctest/doctest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backends/interp/Interp.h"
#include "interp_harness.h"
#include "ir/Float16.h"
#include "ir/Parser.h"
#include "ir/Verifier.h"
#include "mma_reference.h"

namespace {

using tn::interp::Interpreter;

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

uint64_t f32(float f) { return std::bit_cast<uint32_t>(f); }
uint64_t f64(double d) { return std::bit_cast<uint64_t>(d); }

// Parses and verifies: only valid IR is worth interpreting.
tn::ir::Module parse(const std::string& text) { return tn::harness::parseText(text, "test.tir"); }

struct Case {
  std::array<uint64_t, 4> in;
  uint64_t want;
};

// Runs `op` (an IR line defining %r from %a, %b, %c, %d of the given operand types) once per
// case, one thread per case, and checks the result bits. Operands travel in 8-byte slots.
void checkOp(const std::vector<std::string>& operandTypes, const std::string& op, const std::string& resultType,
             const std::vector<Case>& cases) {
  static const char* names[] = {"a", "b", "c", "d"};
  std::string body;
  for (size_t j = 0; j < operandTypes.size(); ++j) {
    std::string n = names[j], t = operandTypes[j];
    body += "  %o" + n + " = const " + std::to_string(8 * j) + " : u64\n";
    body += "  %p" + n + " = ptradd %prow, %o" + n + " : ptr.global\n";
    if (t == "pred") {
      body += "  %w" + n + " = ld %p" + n + " : u32\n  %z" + n + " = const 0 : u32\n";
      body += "  %" + n + " = setp.ne %w" + n + ", %z" + n + " : u32\n";
    } else {
      body += "  %" + n + " = ld %p" + n + " : " + t + "\n";
    }
  }
  body += "  " + op + "\n";
  std::string store = resultType == "pred"
                          ? "  %one = const 1 : u32\n  %zero = const 0 : u32\n  %rs = selp %one, %zero, %r : u32\n"
                            "  st %po, %rs : u32\n"
                          : "  st %po, %r : " + resultType + "\n";
  std::string text =
      "target sm_90\nptx 7.8\n"
      "kernel @t(%in: ptr.global, %out: ptr.global, %n: u32) {\n"
      "^entry:\n"
      "  %tid = tid.x : u32\n  %ctaid = ctaid.x : u32\n  %ntid = ntid.x : u32\n"
      "  %i = mad %ctaid, %ntid, %tid : u32\n"
      "  %inside = setp.lt %i, %n : u32\n"
      "  cbr %inside, ^body, ^exit\n"
      "^body:\n"
      "  %c32 = const 32 : u32\n  %roff = mul.wide %i, %c32 : u32\n"
      "  %prow = ptradd %in, %roff : ptr.global\n" +
      body +
      "  %c8 = const 8 : u32\n  %ooff = mul.wide %i, %c8 : u32\n"
      "  %po = ptradd %out, %ooff : ptr.global\n" +
      store + "  br ^exit\n^exit:\n  ret\n}\n";
  tn::ir::Module m = parse(text);
  Interpreter vm;
  auto err = vm.load(m, "t");
  INFO(op << " : " << (err ? err->text() : ""));
  REQUIRE_FALSE(err);
  std::vector<uint64_t> in;
  for (const Case& c : cases) in.insert(in.end(), c.in.begin(), c.in.end());
  REQUIRE_FALSE(vm.bindArray("in", in));
  REQUIRE_FALSE(vm.bindArray("out", std::vector<uint64_t>(cases.size(), 0)));
  REQUIRE_FALSE(vm.setScalar("n", static_cast<uint32_t>(cases.size())));
  unsigned blocks = static_cast<unsigned>((cases.size() + 63) / 64);
  err = vm.launch({{blocks, 1, 1}, {64, 1, 1}, 0});
  INFO((err ? err->text() : ""));
  REQUIRE_FALSE(err);
  std::vector<uint64_t> out = vm.read<uint64_t>("out");
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO(op << " case " << i << ": inputs " << hex(cases[i].in[0]) << ", " << hex(cases[i].in[1]) << ", "
            << hex(cases[i].in[2]));
    CHECK(hex(out[i]) == hex(cases[i].want));
  }
}

constexpr uint64_t kNan32 = 0x7FFFFFFF;
constexpr uint64_t kMin32 = 0x80000000;

}  // namespace

TEST_CASE("interp: integer add/sub/mul wrap around, .sat saturates") {
  checkOp({"u32", "u32"}, "%r = add %a, %b : u32", "u32",
          {{{0xFFFFFFFF, 1}, 0}, {{5, 7}, 12}, {{0x80000000, 0x80000000}, 0}});
  checkOp({"s32", "s32"}, "%r = add %a, %b : s32", "s32", {{{0x7FFFFFFF, 1}, kMin32}});
  checkOp({"s32", "s32"}, "%r = add.sat %a, %b : s32", "s32",
          {{{0x7FFFFFFF, 1}, 0x7FFFFFFF}, {{kMin32, 0xFFFFFFFF}, kMin32}, {{0xFFFFFFFE, 1}, 0xFFFFFFFF}});
  checkOp({"s32", "s32"}, "%r = sub.sat %a, %b : s32", "s32", {{{kMin32, 1}, kMin32}, {{0x7FFFFFFF, 0xFFFFFFFF}, 0x7FFFFFFF}});
  checkOp({"u8", "u8"}, "%r = sub %a, %b : u8", "u8", {{{0, 1}, 0xFF}, {{0x10, 0x01}, 0x0F}});
  checkOp({"u16", "u16"}, "%r = mul %a, %b : u16", "u16", {{{0xFFFF, 0xFFFF}, 0x0001}});
  checkOp({"s32", "s32"}, "%r = mul %a, %b : s32", "s32", {{{0x10000, 0x10000}, 0}, {{0xFFFFFFFF, 3}, 0xFFFFFFFD}});
  checkOp({"u64", "u64"}, "%r = add %a, %b : u64", "u64", {{{~uint64_t{0}, 2}, 1}});
  checkOp({"u32", "u32", "u32"}, "%r = mad %a, %b, %c : u32", "u32", {{{0xFFFFFFFF, 2, 3}, 1}});
}

TEST_CASE("interp: mul.hi and mul.wide") {
  checkOp({"u32", "u32"}, "%r = mul.hi %a, %b : u32", "u32", {{{0xFFFFFFFF, 0xFFFFFFFF}, 0xFFFFFFFE}});
  checkOp({"s32", "s32"}, "%r = mul.hi %a, %b : s32", "s32", {{{0xFFFFFFFE, 3}, 0xFFFFFFFF}, {{0xFFFFFFFF, 0xFFFFFFFF}, 0}});
  checkOp({"u64", "u64"}, "%r = mul.hi %a, %b : u64", "u64", {{{uint64_t{1} << 63, 4}, 2}});
  checkOp({"s64", "s64"}, "%r = mul.hi %a, %b : s64", "s64", {{{~uint64_t{0}, 1}, ~uint64_t{0}}});
  checkOp({"u32", "u32"}, "%r = mul.wide %a, %b : u32", "u64", {{{0xFFFFFFFF, 0xFFFFFFFF}, 0xFFFFFFFE00000001}});
  checkOp({"s32", "s32"}, "%r = mul.wide %a, %b : s32", "s64", {{{0xFFFFFFFF, 2}, 0xFFFFFFFFFFFFFFFE}});
  checkOp({"s16", "s16"}, "%r = mul.wide %a, %b : s16", "s32", {{{0xFFFD, 4}, 0xFFFFFFF4}});
}

TEST_CASE("interp: integer division and remainder") {
  checkOp({"s32", "s32"}, "%r = div %a, %b : s32", "s32",
          {{{0xFFFFFFF9, 2}, 0xFFFFFFFD}, {{kMin32, 0xFFFFFFFF}, kMin32}, {{7, 0xFFFFFFFF}, 0xFFFFFFF9}});
  checkOp({"s32", "s32"}, "%r = rem %a, %b : s32", "s32", {{{0xFFFFFFF9, 2}, 0xFFFFFFFF}, {{kMin32, 0xFFFFFFFF}, 0}});
  checkOp({"u32", "u32"}, "%r = div %a, %b : u32", "u32", {{{0xFFFFFFF9, 2}, 0x7FFFFFFC}});
  checkOp({"u64", "u64"}, "%r = rem %a, %b : u64", "u64", {{{~uint64_t{0}, 10}, 5}});
}

TEST_CASE("interp: integer min/max/neg/abs and bit ops") {
  checkOp({"s32", "s32"}, "%r = min %a, %b : s32", "s32", {{{0xFFFFFFFF, 1}, 0xFFFFFFFF}});
  checkOp({"u32", "u32"}, "%r = min %a, %b : u32", "u32", {{{0xFFFFFFFF, 1}, 1}});
  checkOp({"s16", "s16"}, "%r = max %a, %b : s16", "s16", {{{0x8000, 0x7FFF}, 0x7FFF}});
  checkOp({"s32"}, "%r = neg %a : s32", "s32", {{{kMin32}, kMin32}, {{5}, 0xFFFFFFFB}});
  checkOp({"s32"}, "%r = abs %a : s32", "s32", {{{kMin32}, kMin32}, {{0xFFFFFFFB}, 5}});
  checkOp({"b16"}, "%r = not %a : b16", "b16", {{{0x00FF}, 0xFF00}});
  checkOp({"b32", "b32"}, "%r = xor %a, %b : b32", "b32", {{{0xF0F0F0F0, 0xFF00FF00}, 0x0FF00FF0}});
  checkOp({"b32"}, "%r = popc %a : b32", "u32", {{{0xF0F0F0F0}, 16}, {{0}, 0}});
  checkOp({"b64"}, "%r = popc %a : b64", "u32", {{{~uint64_t{0}}, 64}});
  checkOp({"b32"}, "%r = clz %a : b32", "u32", {{{0}, 32}, {{1}, 31}, {{kMin32}, 0}});
  checkOp({"b64"}, "%r = clz %a : b64", "u32", {{{1}, 63}});
  checkOp({"pred", "pred"}, "%r = xor %a, %b : pred", "pred", {{{1, 1}, 0}, {{1, 0}, 1}});
  checkOp({"pred"}, "%r = not %a : pred", "pred", {{{1}, 0}, {{0}, 1}});
}

TEST_CASE("interp: shifts by >= the width give 0 or the sign fill") {
  checkOp({"b32", "u32"}, "%r = shl %a, %b : b32", "b32",
          {{{1, 31}, kMin32}, {{1, 32}, 0}, {{1, 0xFFFFFFFF}, 0}, {{0xFFFFFFFF, 4}, 0xFFFFFFF0}});
  checkOp({"b64", "u32"}, "%r = shl %a, %b : b64", "b64", {{{1, 63}, uint64_t{1} << 63}, {{1, 64}, 0}});
  checkOp({"u32", "u32"}, "%r = shr %a, %b : u32", "u32", {{{kMin32, 31}, 1}, {{kMin32, 32}, 0}});
  checkOp({"b32", "u32"}, "%r = shr %a, %b : b32", "b32", {{{kMin32, 4}, 0x08000000}});
  checkOp({"s32", "u32"}, "%r = shr %a, %b : s32", "s32",
          {{{kMin32, 31}, 0xFFFFFFFF}, {{kMin32, 40}, 0xFFFFFFFF}, {{0x40000000, 40}, 0}, {{0xFFFFFF00, 4}, 0xFFFFFFF0}});
  checkOp({"u8", "u32"}, "%r = shl %a, %b : u8", "u8", {{{0x81, 1}, 0x02}, {{0x81, 8}, 0}});
}

TEST_CASE("interp: integer setp, selp and dp4a") {
  checkOp({"s32", "s32"}, "%r = setp.lt %a, %b : s32", "pred", {{{0xFFFFFFFF, 0}, 1}, {{0, 0}, 0}});
  checkOp({"u32", "u32"}, "%r = setp.lt %a, %b : u32", "pred", {{{0xFFFFFFFF, 0}, 0}});
  checkOp({"u64", "u64"}, "%r = setp.ge %a, %b : u64", "pred", {{{5, 5}, 1}, {{4, 5}, 0}});
  checkOp({"u32", "u32", "pred"}, "%r = selp %a, %b, %c : u32", "u32", {{{7, 9, 1}, 7}, {{7, 9, 0}, 9}});
  checkOp({"s32", "s32", "s32"}, "%r = dp4a %a, %b, %c : s32", "s32", {{{0xFF02FF01, 0x01020304, 10}, 14}});
  checkOp({"u32", "u32", "u32"}, "%r = dp4a %a, %b, %c : u32", "u32", {{{0xFF02FF01, 0x01020304, 10}, 1038}});
}

TEST_CASE("interp: f32 arithmetic: IEEE specials, signed zeros, denormals, fused fma") {
  const uint64_t inf = f32(INFINITY), ninf = f32(-INFINITY);
  checkOp({"f32", "f32"}, "%r = add %a, %b : f32", "f32",
          {{{f32(1), f32(2)}, f32(3)},
           {{inf, ninf}, kNan32},
           {{0x7FC00001, f32(1)}, kNan32},
           {{0x80000000, 0x80000000}, 0x80000000},
           {{0x80000000, 0}, 0},
           {{1, 1}, 2}});
  checkOp({"f32", "f32"}, "%r = add.ftz %a, %b : f32", "f32", {{{1, 1}, 0}, {{0x80000001, f32(1)}, f32(1)}});
  checkOp({"f32", "f32"}, "%r = mul %a, %b : f32", "f32", {{{0x7F7FFFFF, f32(2)}, inf}, {{0, inf}, kNan32}});
  checkOp({"f32", "f32"}, "%r = mul.rz %a, %b : f32", "f32", {{{0x7F7FFFFF, f32(2)}, 0x7F7FFFFF}});
  checkOp({"f32", "f32", "f32"}, "%r = fma %a, %b, %c : f32", "f32", {{{0x3F800001, 0x3F800001, 0xBF800002}, 0x28800000}});
  checkOp({"f32", "f32"}, "%r = div.rn %a, %b : f32", "f32",
          {{{f32(1), f32(3)}, 0x3EAAAAAB}, {{f32(1), 0}, inf}, {{0, 0}, kNan32}, {{f32(-1), 0}, ninf}});
  checkOp({"f32", "f32"}, "%r = div.rz %a, %b : f32", "f32", {{{f32(1), f32(3)}, 0x3EAAAAAA}});
  // div.approx is a * (1/b): past |b| = 2^126 the reciprocal underflows to zero; div.full does not.
  checkOp({"f32", "f32"}, "%r = div.approx %a, %b : f32", "f32",
          {{{f32(1), f32(0x1p127f)}, 0}, {{f32(-1), f32(0x1p127f)}, 0x80000000}, {{f32(INFINITY), f32(0x1p127f)}, kNan32},
           {{f32(1), f32(4)}, f32(0.25f)}});
  checkOp({"f32", "f32"}, "%r = div.full %a, %b : f32", "f32", {{{f32(1), f32(0x1p127f)}, 0x00400000}});
  checkOp({"f32"}, "%r = neg %a : f32", "f32", {{{0}, 0x80000000}, {{f32(2)}, f32(-2)}});
  checkOp({"f32"}, "%r = abs %a : f32", "f32", {{{0x80000000}, 0}, {{ninf}, inf}, {{0xFFC00123}, kNan32}});
  // PTX ISA, abs: an f64 NaN passes through (sign cleared); other formats give an unspecified NaN.
  checkOp({"f64"}, "%r = abs %a : f64", "f64",
          {{{0xFFF8000000000123}, 0x7FF8000000000123}, {{0x7FF0000000000001}, 0x7FF0000000000001}, {{f64(-2)}, f64(2)}});
  checkOp({"f16"}, "%r = abs %a : f16", "f16", {{{0xFE01}, 0x7FFF}, {{0xBC00}, 0x3C00}});
  checkOp({"f64"}, "%r = neg %a : f64", "f64", {{{0x7FF8000000000123}, 0x7FFFFFFFFFFFFFFF}, {{f64(2)}, f64(-2)}});
  checkOp({"f64", "f64"}, "%r = add %a, %b : f64", "f64",
          {{{f64(0.1), f64(0.2)}, f64(0.1 + 0.2)}, {{f64(INFINITY), f64(-INFINITY)}, 0x7FFFFFFFFFFFFFFF}});
  checkOp({"f64", "f64", "f64"}, "%r = fma %a, %b, %c : f64", "f64",
          {{{f64(1 + 0x1p-52), f64(1 + 0x1p-52), f64(-(1 + 0x1p-51))}, f64(0x1p-104)}});
}

TEST_CASE("interp: f32/f64 rounding modifiers") {
  // 1 + 0.75 ulp and its negation: rn/rp round away, rz/rm toward one.
  const uint64_t a = f32(1), b = 0x33C00000;
  checkOp({"f32", "f32"}, "%r = add.rn %a, %b : f32", "f32", {{{a, b}, 0x3F800001}, {{a | kMin32, b | kMin32}, 0xBF800001}});
  checkOp({"f32", "f32"}, "%r = add.rz %a, %b : f32", "f32", {{{a, b}, 0x3F800000}, {{a | kMin32, b | kMin32}, 0xBF800000}});
  checkOp({"f32", "f32"}, "%r = add.rm %a, %b : f32", "f32", {{{a, b}, 0x3F800000}, {{a | kMin32, b | kMin32}, 0xBF800001}});
  checkOp({"f32", "f32"}, "%r = add.rp %a, %b : f32", "f32", {{{a, b}, 0x3F800001}, {{a | kMin32, b | kMin32}, 0xBF800000}});
  // Exactly half an ulp: ties to even.
  checkOp({"f32", "f32"}, "%r = add %a, %b : f32", "f32", {{{a, 0x33800000}, 0x3F800000}, {{0x3F800001, 0x33800000}, 0x3F800002}});
  checkOp({"f32", "f32", "f32"}, "%r = fma.rp %a, %b, %c : f32", "f32", {{{f32(1), f32(1), 0x33000000}, 0x3F800001}});
  checkOp({"f64", "f64"}, "%r = div.rz %a, %b : f64", "f64", {{{f64(1), f64(3)}, 0x3FD5555555555555}});
  checkOp({"f64", "f64"}, "%r = div.rp %a, %b : f64", "f64", {{{f64(1), f64(3)}, 0x3FD5555555555556}});
  checkOp({"f64", "f64", "f64"}, "%r = fma.rm %a, %b, %c : f64", "f64", {{{f64(1), f64(1), f64(-0x1p-60)}, 0x3FEFFFFFFFFFFFFF}});
  checkOp({"f32"}, "%r = sqrt.rn %a : f32", "f32", {{{f32(2)}, 0x3FB504F3}, {{f32(-1)}, kNan32}, {{0x80000000}, 0x80000000}});
  checkOp({"f32"}, "%r = sqrt.rz %a : f32", "f32", {{{f32(2)}, 0x3FB504F3}});
  checkOp({"f32"}, "%r = sqrt.rp %a : f32", "f32", {{{f32(2)}, 0x3FB504F4}});
}

TEST_CASE("interp: .sat and .ftz on f32") {
  checkOp({"f32", "f32"}, "%r = add.sat %a, %b : f32", "f32",
          {{{f32(0.75f), f32(0.5f)}, f32(1)}, {{f32(-1), f32(0.5f)}, 0}, {{0x7FC00000, f32(1)}, 0}, {{f32(0.25f), 0}, f32(0.25f)}});
  checkOp({"f32", "f32"}, "%r = mul.ftz %a, %b : f32", "f32", {{{0x00800000, f32(0.5f)}, 0}, {{0x80800000, f32(0.5f)}, 0x80000000}});
  checkOp({"f32", "f32"}, "%r = mul %a, %b : f32", "f32", {{{0x00800000, f32(0.5f)}, 0x00400000}});
}

TEST_CASE("interp: float min/max follow PTX NaN and signed-zero rules") {
  checkOp({"f32", "f32"}, "%r = min %a, %b : f32", "f32",
          {{{0x7FC00000, f32(1)}, f32(1)},
           {{f32(1), 0x7FC00000}, f32(1)},
           {{0x7FC00000, 0xFFC00001}, kNan32},
           {{0x80000000, 0}, 0x80000000},
           {{0, 0x80000000}, 0x80000000},
           {{f32(-2), f32(3)}, f32(-2)}});
  checkOp({"f32", "f32"}, "%r = max %a, %b : f32", "f32", {{{0x80000000, 0}, 0}, {{0, 0x80000000}, 0}, {{0x7FC00000, f32(-1)}, f32(-1)}});
  checkOp({"f64", "f64"}, "%r = max %a, %b : f64", "f64", {{{0x7FF8000000000000, f64(2)}, f64(2)}, {{f64(-0.0), 0}, 0}});
  checkOp({"f16", "f16"}, "%r = min %a, %b : f16", "f16", {{{0x7E00, 0x3C00}, 0x3C00}, {{0x8000, 0}, 0x8000}, {{0x7E00, 0x7E01}, 0x7FFF}});
}

TEST_CASE("interp: float setp with ordered and unordered comparisons") {
  const uint64_t nan = 0x7FC00000, one = f32(1);
  struct Row {
    const char* cmp;
    uint64_t withNan, lessThan, equal;
  };
  for (Row r : {Row{"eq", 0, 0, 1}, Row{"ne", 0, 1, 0}, Row{"lt", 0, 1, 0}, Row{"le", 0, 1, 1}, Row{"gt", 0, 0, 0},
                Row{"ge", 0, 0, 1}, Row{"equ", 1, 0, 1}, Row{"neu", 1, 1, 0}, Row{"ltu", 1, 1, 0}, Row{"leu", 1, 1, 1},
                Row{"gtu", 1, 0, 0}, Row{"geu", 1, 0, 1}, Row{"num", 0, 1, 1}, Row{"nan", 1, 0, 0}}) {
    checkOp({"f32", "f32"}, std::string("%r = setp.") + r.cmp + " %a, %b : f32", "pred",
            {{{nan, one}, r.withNan}, {{0x80000000, one}, r.lessThan}, {{0x80000000, 0}, r.equal}});
    checkOp({"f16", "f16"}, std::string("%r = setp.") + r.cmp + " %a, %b : f16", "pred",
            {{{0x7E00, 0x3C00}, r.withNan}, {{0xBC00, 0x3C00}, r.lessThan}, {{0x8000, 0}, r.equal}});
  }
}

TEST_CASE("interp: f16 and bf16 arithmetic rounds ties to even") {
  checkOp({"f16", "f16"}, "%r = add %a, %b : f16", "f16",
          {{{0x3C00, 0x1000}, 0x3C00},   // 1 + 2^-11: a tie, stays at the even 1.0
           {{0x3C01, 0x1000}, 0x3C02},   // 1+2^-10 + 2^-11: a tie, rounds up to even
           {{0x3C00, 0x1200}, 0x3C01},   // 1 + 1.5*2^-11: above the tie
           {{0x0001, 0x0001}, 0x0002},   // subnormals are kept
           {{0x7BFF, 0x4C00}, 0x7C00},   // 65504 + 16 = 65520 overflows to inf
           {{0x7C00, 0xFC00}, 0x7FFF}});
  checkOp({"f16", "f16"}, "%r = sub.rn %a, %b : f16", "f16", {{{0x3C00, 0x9200}, 0x3C01}, {{0x0400, 0x0001}, 0x03FF}});
  checkOp({"bf16", "bf16", "bf16"}, "%r = fma.rn %a, %b, %c : bf16", "bf16", {{{0x3F80, 0x3BC0, 0x3F80}, 0x3F81}});
  checkOp({"f16", "f16"}, "%r = add.ftz %a, %b : f16", "f16", {{{0x0001, 0x0001}, 0}});
  checkOp({"bf16", "bf16"}, "%r = add %a, %b : bf16", "bf16",
          {{{0x3F80, 0x3B80}, 0x3F80}, {{0x3F80, 0x3BC0}, 0x3F81}, {{0x3F81, 0x3B80}, 0x3F82}});
  // fma in f16: 1.5*2^-11 * 1 + 1 rounds once (fused), to 1 + 2^-10.
  checkOp({"f16", "f16", "f16"}, "%r = fma %a, %b, %c : f16", "f16", {{{0x1200, 0x3C00, 0x3C00}, 0x3C01}});
  checkOp({"bf16", "bf16"}, "%r = mul %a, %b : bf16", "bf16", {{{0x3FC0, 0x3FC0}, 0x4010}});  // 1.5^2 = 2.25
}

TEST_CASE("interp: cvt between floats with rounding modes") {
  checkOp({"f32"}, "%r = cvt.rn %a : f32 -> f16", "f16",
          {{{0x3F801000}, 0x3C00}, {{0x3F801001}, 0x3C01}, {{0x3F803000}, 0x3C02}, {{0x7FC00000}, 0x7FFF},
           {{f32(1e6f)}, 0x7C00}, {{0x33800000}, 0x0001}});
  checkOp({"f32"}, "%r = cvt.rz %a : f32 -> f16", "f16", {{{0x3F801FFF}, 0x3C00}, {{f32(1e6f)}, 0x7BFF}});
  checkOp({"f32"}, "%r = cvt.rp %a : f32 -> f16", "f16", {{{0x3F800001}, 0x3C01}, {{0xBF800001}, 0xBC00}});
  checkOp({"f32"}, "%r = cvt.rm %a : f32 -> f16", "f16", {{{0xBF800001}, 0xBC01}});
  checkOp({"f32"}, "%r = cvt.rn %a : f32 -> bf16", "bf16",
          {{{0x3F808000}, 0x3F80}, {{0x3F818000}, 0x3F82}, {{0x3F808001}, 0x3F81}, {{0x7F800001}, 0x7FFF}});
  checkOp({"f16"}, "%r = cvt %a : f16 -> f32", "f32", {{{0x0001}, 0x33800000}, {{0x7C00}, 0x7F800000}, {{0x8000}, 0x80000000}});
  checkOp({"bf16"}, "%r = cvt %a : bf16 -> f32", "f32", {{{0x3F81}, 0x3F810000}});
  checkOp({"f64"}, "%r = cvt.rn %a : f64 -> f32", "f32",
          {{{f64(1 + 0x1p-24)}, f32(1)}, {{f64(1e300)}, 0x7F800000}, {{f64(1 + 0x1.8p-24)}, 0x3F800001}});
  checkOp({"f64"}, "%r = cvt.rz %a : f64 -> f32", "f32", {{{f64(1e300)}, 0x7F7FFFFF}, {{f64(1 + 0x1.8p-24)}, 0x3F800000}});
  checkOp({"f64"}, "%r = cvt.rp %a : f64 -> f32", "f32", {{{f64(1 + 0x1p-40)}, 0x3F800001}});
  checkOp({"f32"}, "%r = cvt %a : f32 -> f64", "f64", {{{1}, 0x36A0000000000000}});
  checkOp({"f32"}, "%r = cvt.ftz %a : f32 -> f64", "f64", {{{1}, 0}});
  checkOp({"f32"}, "%r = cvt.rni %a : f32 -> f32", "f32", {{{f32(2.5f)}, f32(2)}, {{f32(-3.5f)}, f32(-4)}});
  checkOp({"f32"}, "%r = cvt.rmi %a : f32 -> f32", "f32", {{{f32(-2.5f)}, f32(-3)}});
  checkOp({"f32"}, "%r = cvt.sat %a : f32 -> f32", "f32", {{{f32(1.5f)}, f32(1)}, {{0x7FC00000}, 0}, {{f32(-0.0f)}, 0}});
}

TEST_CASE("interp: every f16 value widens to f32 exactly and rounds back to itself") {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const float f = tn::ir::f16ToF32(bits);
    const uint32_t exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
    const double magnitude = exp == 0 ? std::ldexp(double(mant), -24) : std::ldexp(double(mant | 0x400), int(exp) - 25);
    if (exp == 0x1F && mant) {
      CHECK_MESSAGE(std::isnan(f), hex(h));
      continue;
    }
    const double expected = exp == 0x1F ? INFINITY : magnitude;
    CHECK_MESSAGE(double(f) == ((h & 0x8000) ? -expected : expected), hex(h));
    CHECK_MESSAGE(std::signbit(f) == bool(h & 0x8000), hex(h));
    CHECK_MESSAGE(tn::ir::f32ToF16(f) == bits, hex(h));
  }
}

TEST_CASE("interp: f32 to bf16 and f16 round to nearest even as the general rounding does") {
  // f64ToBf16 and f64ToF16 take the general path; f32ToBf16 and f32ToF16 in round-to-nearest
  // take bit paths.
  auto same = [](uint32_t bits) {
    const float f = std::bit_cast<float>(bits);
    CHECK_MESSAGE(tn::ir::f32ToBf16(f) == tn::ir::f64ToBf16(double(f)), hex(bits));
    CHECK_MESSAGE(tn::ir::f32ToF16(f) == tn::ir::f64ToF16(double(f)), hex(bits));
  };
  // Every exponent and leading fraction, with the dropped bits of both formats at their ties.
  for (uint32_t hi = 0; hi < 0x10000; ++hi)
    for (uint32_t lo : {0x0000u, 0x0001u, 0x0FFFu, 0x1000u, 0x1001u, 0x2000u, 0x3000u, 0x7FFFu, 0x8000u,
                        0x8001u, 0xFFFFu})
      same(hi << 16 | lo);
  // f16's largest finite value and the tie past it; its smallest normal and what lies just below.
  for (uint32_t edge : {0x477FE000u, 0x477FEFFFu, 0x477FF000u, 0x477FF001u, 0x38800000u, 0x387FFFFFu,
                        0x387FF000u, 0x387FEFFFu})
    for (uint32_t sign : {0u, 0x80000000u}) same(edge | sign);
  uint32_t x = 0x12345678u;
  for (int i = 0; i < 200000; ++i) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    same(x);
  }
}

TEST_CASE("interp: cvt float to integer saturates, NaN gives 0 or 1 << (width - 1)") {
  checkOp({"f32"}, "%r = cvt.rzi %a : f32 -> s32", "s32",
          {{{f32(3.7f)}, 3}, {{f32(-3.7f)}, 0xFFFFFFFD}, {{f32(3e9f)}, 0x7FFFFFFF}, {{f32(-3e9f)}, kMin32},
           {{0x7FC00000}, 0}, {{f32(INFINITY)}, 0x7FFFFFFF}});
  checkOp({"f32"}, "%r = cvt.rni %a : f32 -> s32", "s32", {{{f32(2.5f)}, 2}, {{f32(3.5f)}, 4}, {{f32(-2.5f)}, 0xFFFFFFFE}});
  checkOp({"f32"}, "%r = cvt.rmi %a : f32 -> s32", "s32", {{{f32(-2.5f)}, 0xFFFFFFFD}});
  checkOp({"f32"}, "%r = cvt.rpi %a : f32 -> s32", "s32", {{{f32(2.1f)}, 3}});
  checkOp({"f32"}, "%r = cvt.rzi %a : f32 -> u32", "u32", {{{f32(-1)}, 0}, {{f32(5e9f)}, 0xFFFFFFFF}});
  checkOp({"f32"}, "%r = cvt.rzi %a : f32 -> u8", "u8", {{{f32(300)}, 0xFF}, {{f32(-7)}, 0}});
  checkOp({"f32"}, "%r = cvt.rzi %a : f32 -> s8", "s8", {{{f32(-200)}, 0x80}, {{f32(100)}, 100}});
  checkOp({"f64"}, "%r = cvt.rzi %a : f64 -> s64", "s64", {{{f64(1e19)}, 0x7FFFFFFFFFFFFFFF}, {{f64(-1e19)}, uint64_t{1} << 63}});
  checkOp({"f64"}, "%r = cvt.rzi %a : f64 -> u64", "u64", {{{f64(1e20)}, ~uint64_t{0}}, {{f64(0x1p63)}, uint64_t{1} << 63}});
  checkOp({"f16"}, "%r = cvt.rni %a : f16 -> s32", "s32", {{{0x4100}, 2}, {{0x7C00}, 0x7FFFFFFF}});  // 2.5 -> 2
  // PTX ISA, cvt: NaN gives 0 only when the source is not f64 and the destination not 64-bit;
  // otherwise 1 << (width - 1), whatever the signedness.
  const uint64_t nan64 = 0x7FF8000000000000, top64 = uint64_t{1} << 63;
  checkOp({"f32"}, "%r = cvt.rzi %a : f32 -> u32", "u32", {{{0xFFC00000}, 0}});
  checkOp({"f16"}, "%r = cvt.rzi %a : f16 -> s16", "s16", {{{0x7E00}, 0}});
  checkOp({"f64"}, "%r = cvt.rzi %a : f64 -> s32", "s32", {{{nan64}, kMin32}});
  checkOp({"f64"}, "%r = cvt.rni %a : f64 -> u32", "u32", {{{nan64 | top64}, kMin32}});
  checkOp({"f64"}, "%r = cvt.rzi %a : f64 -> s16", "s16", {{{nan64}, 0x8000}});
  checkOp({"f64"}, "%r = cvt.rzi %a : f64 -> s64", "s64", {{{nan64}, top64}});
  checkOp({"f32"}, "%r = cvt.rzi %a : f32 -> s64", "s64", {{{0x7FC00000}, top64}});
  checkOp({"f32"}, "%r = cvt.rmi.ftz %a : f32 -> u64", "u64", {{{0x7FC00000}, top64}});
  checkOp({"f16"}, "%r = cvt.rzi %a : f16 -> u64", "u64", {{{0x7E00}, top64}});
}

TEST_CASE("interp: cvt.ftz flushes f32 sources and results only") {
  // f32 -> f16: a subnormal f32 source flushes, a subnormal f16 result (2^-24) stays.
  checkOp({"f32"}, "%r = cvt.rn.ftz %a : f32 -> f16", "f16", {{{0x33800000}, 0x0001}, {{0x80000001}, 0x8000}});
  // f16 -> f32: the subnormal f16 source stays (and is normal in f32).
  checkOp({"f16"}, "%r = cvt.ftz %a : f16 -> f32", "f32", {{{0x0001}, 0x33800000}, {{0x83FF}, 0xB87FC000}});
  // f64 -> f32: the subnormal f32 result flushes; a subnormal f64 source is not an f32 and stays.
  checkOp({"f64"}, "%r = cvt.rn.ftz %a : f64 -> f32", "f32", {{{f64(0x1p-140)}, 0}, {{f64(-0x1p-140)}, kMin32}});
}

TEST_CASE("interp: cvt integer to float rounds in every mode") {
  checkOp({"s32"}, "%r = cvt.rn %a : s32 -> f32", "f32", {{{16777217}, 0x4B800000}, {{16777219}, 0x4B800002}});
  checkOp({"s32"}, "%r = cvt.rp %a : s32 -> f32", "f32", {{{16777217}, 0x4B800001}});
  checkOp({"s32"}, "%r = cvt.rm %a : s32 -> f32", "f32", {{{static_cast<uint32_t>(-16777217)}, 0xCB800001}});
  checkOp({"s32"}, "%r = cvt.rz %a : s32 -> f32", "f32", {{{static_cast<uint32_t>(-16777217)}, 0xCB800000}});
  checkOp({"u64"}, "%r = cvt.rn %a : u64 -> f32", "f32", {{{~uint64_t{0}}, 0x5F800000}});
  checkOp({"u64"}, "%r = cvt.rz %a : u64 -> f32", "f32", {{{~uint64_t{0}}, 0x5F7FFFFF}});
  checkOp({"u64"}, "%r = cvt.rz %a : u64 -> f64", "f64", {{{~uint64_t{0}}, 0x43EFFFFFFFFFFFFF}});
  checkOp({"s64"}, "%r = cvt.rm %a : s64 -> f64", "f64", {{{static_cast<uint64_t>(-((int64_t{1} << 53) + 1))}, 0xC340000000000001}});
  checkOp({"s32"}, "%r = cvt.rn %a : s32 -> f16", "f16", {{{2049}, 0x6800}, {{2051}, 0x6802}, {{70000}, 0x7C00}});
  checkOp({"u64"}, "%r = cvt.rn %a : u64 -> bf16", "bf16", {{{(uint64_t{1} << 60) + (uint64_t{1} << 52) + 1}, 0x5D81}});
  checkOp({"u32"}, "%r = cvt.sat %a : u32 -> f32", "f32", {{{5}, f32(1)}, {{0}, 0}});
}

TEST_CASE("interp: cvt between integers extends, truncates and saturates") {
  checkOp({"s8"}, "%r = cvt %a : s8 -> s32", "s32", {{{0x80}, 0xFFFFFF80}});
  checkOp({"s8"}, "%r = cvt %a : s8 -> u32", "u32", {{{0x80}, 0xFFFFFF80}});
  checkOp({"u8"}, "%r = cvt %a : u8 -> s32", "s32", {{{0x80}, 0x80}});
  checkOp({"u32"}, "%r = cvt %a : u32 -> u8", "u8", {{{0x1FF}, 0xFF}});
  checkOp({"s32"}, "%r = cvt.sat %a : s32 -> s8", "s8", {{{200}, 127}, {{static_cast<uint32_t>(-200)}, 0x80}});
  checkOp({"s32"}, "%r = cvt.sat %a : s32 -> u32", "u32", {{{0xFFFFFFFB}, 0}});
  checkOp({"u64"}, "%r = cvt.sat %a : u64 -> s32", "s32", {{{~uint64_t{0}}, 0x7FFFFFFF}});
  checkOp({"f32"}, "%r = bitcast %a : f32 -> u32", "u32", {{{0x3F800000}, 0x3F800000}});
}

TEST_CASE("interp: approximate functions at exact and special values") {
  const uint64_t inf = f32(INFINITY), ninf = f32(-INFINITY);
  checkOp({"f32"}, "%r = ex2.approx %a : f32", "f32", {{{f32(3)}, f32(8)}, {{ninf}, 0}, {{0x80000000}, f32(1)}, {{inf}, inf}});
  checkOp({"f32"}, "%r = lg2.approx %a : f32", "f32", {{{f32(8)}, f32(3)}, {{0}, ninf}, {{0x80000000}, ninf}, {{f32(-1)}, kNan32}});
  checkOp({"f32"}, "%r = rsqrt.approx %a : f32", "f32", {{{f32(4)}, f32(0.5f)}, {{0x80000000}, ninf}, {{inf}, 0}});
  checkOp({"f32"}, "%r = rcp.approx %a : f32", "f32", {{{f32(4)}, f32(0.25f)}, {{0}, inf}, {{0x80000000}, ninf}});
  checkOp({"f32"}, "%r = rcp.rn %a : f32", "f32", {{{f32(3)}, 0x3EAAAAAB}});
  checkOp({"f32"}, "%r = rcp.rz %a : f32", "f32", {{{f32(3)}, 0x3EAAAAAA}});
  checkOp({"f32"}, "%r = sin.approx %a : f32", "f32", {{{0x80000000}, 0x80000000}, {{inf}, kNan32}});
  checkOp({"f32"}, "%r = cos.approx %a : f32", "f32", {{{0}, f32(1)}});
  checkOp({"f32"}, "%r = tanh.approx %a : f32", "f32", {{{inf}, f32(1)}, {{ninf}, f32(-1)}, {{0x80000000}, 0x80000000}});
  checkOp({"f32"}, "%r = ex2.approx.ftz %a : f32", "f32", {{{f32(-140)}, 0}});
  checkOp({"f64"}, "%r = rcp.rn %a : f64", "f64", {{{f64(3)}, 0x3FD5555555555555}});
  // The gross f64 reciprocal reads and writes only the upper 32 bits.
  checkOp({"f64"}, "%r = rcp.approx.ftz %a : f64", "f64",
          {{{f64(3)}, 0x3FD5555500000000}, {{0x40080000FFFFFFFF}, 0x3FD5555500000000}, {{0x7FF8000000000001}, 0x7FFFFFFF00000000},
           {{0x8000000000000001}, f64(-INFINITY)}, {{f64(0.5)}, f64(2)}});
  // So does rsqrt.approx.ftz.f64; rsqrt.approx.f64 is 1/sqrt in double (0x3FE6A09E667F3BCC for 2).
  checkOp({"f64"}, "%r = rsqrt.approx.ftz %a : f64", "f64",
          {{{f64(2)}, 0x3FE6A09E00000000}, {{0x40100000FFFFFFFF}, f64(0.5)}, {{0x0000000000000001}, f64(INFINITY)},
           {{0x8000000000000001}, f64(-INFINITY)}, {{f64(-0.0)}, f64(-INFINITY)}, {{f64(-1)}, 0x7FFFFFFF00000000},
           {{f64(-INFINITY)}, 0x7FFFFFFF00000000}, {{0xFFF8000000000001}, 0x7FFFFFFF00000000}, {{f64(INFINITY)}, 0}});
  checkOp({"f64"}, "%r = rsqrt.approx %a : f64", "f64", {{{f64(2)}, 0x3FE6A09E667F3BCC}, {{0x0000000000000001}, 0x6180000000000000}});
}

namespace {

// Runs a whole kernel (`text`, kernel @k) with the given buffers and returns the interpreter.
Interpreter runKernel(const std::string& text, const std::vector<std::pair<std::string, std::vector<uint32_t>>>& bufs,
                      tn::ir::Dim3 grid, tn::ir::Dim3 block) {
  tn::ir::Module m = parse(text);
  Interpreter vm;
  auto err = vm.load(m, "k");
  INFO((err ? err->text() : ""));
  REQUIRE_FALSE(err);
  for (const auto& [name, data] : bufs) REQUIRE_FALSE(vm.bindArray(name, data));
  err = vm.launch({grid, block, 0});
  INFO((err ? err->text() : ""));
  REQUIRE_FALSE(err);
  return vm;
}

}  // namespace

TEST_CASE("interp: atomics on global and shared memory") {
  const std::string kernel = R"(target sm_90
ptx 7.8
kernel @k(%g: ptr.global, %f: ptr.global) {
  shared @s: u32[1] align 4
  shared @t: f32[1] align 4
^entry:
  %tid = tid.x : u32
  %one = const 1 : u32
  %zero = const 0 : u32
  %sbase = shared.addr @s : ptr.shared
  %is0 = setp.eq %tid, %zero : u32
  cbr %is0, ^init, ^sync
^init:
  st %sbase, %zero : u32
  %tinit = shared.addr @t : ptr.shared
  %fzero = const 0.0 : f32
  st %tinit, %fzero : f32
  br ^sync
^sync:
  bar.sync
  %sold = atom.add %sbase, %one : u32
  bar.sync
  %stotal = ld %sbase : u32
  %old = atom.add %g, %one : u32
  %c4 = const 4 : u64
  %p1 = ptradd %g, %c4 : ptr.global
  %seven = const 7 : u32
  %inc = atom.inc %p1, %seven : u32
  %c8 = const 8 : u64
  %p2 = ptradd %g, %c8 : ptr.global
  %imax = atom.max %p2, %tid : u32
  %c12 = const 12 : u64
  %p3 = ptradd %g, %c12 : ptr.global
  %stid = bitcast %tid : u32 -> s32
  %m3 = const -3 : s32
  %neg = mul %stid, %m3 : s32
  %imin = atom.min %p3, %neg : s32
  %c16 = const 16 : u64
  %p4 = ptradd %g, %c16 : ptr.global
  %bit = shl %one, %tid : u32
  %bits = bitcast %bit : u32 -> b32
  %or = atom.or %p4, %bits : b32
  %c20 = const 20 : u64
  %p5 = ptradd %g, %c20 : ptr.global
  %five = const 5 : u32
  %cas = atom.cas %p5, %five, %tid : u32
  %c24 = const 24 : u64
  %p6 = ptradd %g, %c24 : ptr.global
  %three = const 3 : u32
  %dec = atom.dec %p6, %three : u32
  %c28 = const 28 : u64
  %p7 = ptradd %g, %c28 : ptr.global
  %exch = atom.exch %p7, %tid : u32
  %c32 = const 32 : u64
  %p8 = ptradd %g, %c32 : ptr.global
  st %p8, %stotal : u32
  %c36 = const 36 : u64
  %p9 = ptradd %g, %c36 : ptr.global
  %clear = not %bits : b32
  %and = atom.and %p9, %clear : b32
  %c40 = const 40 : u64
  %p10 = ptradd %g, %c40 : ptr.global
  %xor = atom.xor %p10, %bits : b32
  %tiny = const 0x00000001 : f32
  %fa = atom.add %f, %tiny : f32
  %c4b = const 4 : u64
  %pf = ptradd %f, %c4b : ptr.global
  %half = const 0.5 : f32
  %fb = atom.add %pf, %half : f32
  %sf = shared.addr @t : ptr.shared
  %fc = atom.add %sf, %tiny : f32
  bar.sync
  %fsum = ld %sf : f32
  %c8f = const 8 : u64
  %pf2 = ptradd %f, %c8f : ptr.global
  st %pf2, %fsum : f32
  ret
}
)";
  // 20 threads: counter 20; inc wraps at 7 (20 increments from 0: 20 mod 8 = 4); max tid 19;
  // min -57; or = low 20 bits; cas 5 -> tid 5 (lane 5 finds 5 only if earlier lanes left it);
  // dec from 0 with bound 3 cycles 0->3->2->1->0...: 20 steps -> 0; exch ends with the last lane;
  // and/xor clear/flip the low 20 bits.
  Interpreter vm =
      runKernel(kernel, {{"g", {0, 0, 0, 0, 0, 5, 0, 0, 0, 0xFFFFFFFF, 0x0F0F0F0F}}, {"f", {0, 0, 0}}}, {1, 1, 1}, {20, 1, 1});
  std::vector<uint32_t> g = vm.read<uint32_t>("g");
  CHECK(g[0] == 20);
  CHECK(g[1] == 4);
  CHECK(g[2] == 19);
  CHECK(g[3] == static_cast<uint32_t>(-57));
  CHECK(g[4] == 0xFFFFF);
  CHECK(g[5] == 0);  // lane 0 swaps 5 -> 0; nobody else matches
  CHECK(g[6] == 0);
  CHECK(g[7] == 19);
  CHECK(g[8] == 20);  // shared counter
  CHECK(g[9] == 0xFFF00000);
  CHECK(g[10] == (0x0F0F0F0Fu ^ 0xFFFFFu));
  std::vector<float> f = vm.read<float>("f");
  CHECK(std::bit_cast<uint32_t>(f[0]) == 0);  // atom.add.f32 on global memory flushes subnormals
  CHECK(f[1] == 10.0f);
  CHECK(std::bit_cast<uint32_t>(f[2]) == 20);  // on shared memory it keeps them: 20 * 2^-149
}

TEST_CASE("interp: vector loads and stores, pack and extract") {
  const std::string kernel = R"(target sm_90
ptx 7.8
kernel @k(%src: ptr.global align 16, %dst: ptr.global align 16) {
^entry:
  %v = ld.nc %src : v4.f32
  %x = extract %v, 0 : v4.f32
  %y = extract %v, 1 : v4.f32
  %z = extract %v, 2 : v4.f32
  %w = extract %v, 3 : v4.f32
  %s = add %x, %w : f32
  %t = add %y, %z : f32
  %pair = pack %s, %t : v2.f32
  st %dst, %pair : v2.f32
  %c8 = const 8 : u64
  %d2 = ptradd %dst, %c8 : ptr.global
  %h0 = const 1.5 : f16
  %h1 = const -2.0 : f16
  %h = pack %h0, %h1, %h0, %h1 : v4.f16
  st %d2, %h : v4.f16
  %c16 = const 16 : u64
  %s2 = ptradd %src, %c16 : ptr.global
  %wide = ld %s2 : v2.f64
  %e1 = extract %wide, 1 : v2.f64
  %c24 = const 24 : u64
  %d3 = ptradd %dst, %c24 : ptr.global
  st %d3, %e1 : f64
  ret
}
)";
  std::vector<uint32_t> src = {std::bit_cast<uint32_t>(1.0f), std::bit_cast<uint32_t>(2.0f),
                               std::bit_cast<uint32_t>(3.0f), std::bit_cast<uint32_t>(4.0f)};
  uint64_t d0 = std::bit_cast<uint64_t>(0.25), d1 = std::bit_cast<uint64_t>(-7.5);
  for (uint64_t d : {d0, d1}) {
    src.push_back(static_cast<uint32_t>(d));
    src.push_back(static_cast<uint32_t>(d >> 32));
  }
  Interpreter vm = runKernel(kernel, {{"src", src}, {"dst", std::vector<uint32_t>(8, 0)}}, {1, 1, 1}, {1, 1, 1});
  std::vector<uint32_t> out = vm.read<uint32_t>("dst");
  CHECK(out[0] == std::bit_cast<uint32_t>(5.0f));
  CHECK(out[1] == std::bit_cast<uint32_t>(5.0f));
  CHECK(out[2] == 0xC0003E00);  // f16 lanes 1.5 (0x3E00), -2 (0xC000)
  CHECK(out[3] == 0xC0003E00);
  CHECK((uint64_t(out[7]) << 32 | out[6]) == d1);
}

TEST_CASE("interp: bitcast of a vector packs its lanes, lane 0 in the lowest bits") {
  // Each vector is loaded from bytes the test knows, so its bitcast must be those bytes read as one
  // little-endian scalar; the s8 lanes from cvt hold negative values, whose 16-bit PTX registers
  // carry a sign extension that must not leak into the packed bits.
  const std::string kernel = R"(target sm_90
ptx 7.8
kernel @k(%src: ptr.global align 16, %dst: ptr.global align 16) {
^entry:
  %c4 = const 4 : u64
  %c8 = const 8 : u64
  %c16 = const 16 : u64
  %c24 = const 24 : u64
  %b4 = ld %src : v4.s8
  %w = bitcast %b4 : v4.s8 -> u32
  st %dst, %w : u32
  %b2 = ld %src : v2.u8
  %h = bitcast %b2 : v2.u8 -> u16
  %d4 = ptradd %dst, %c4 : ptr.global
  st %d4, %h : u16
  %s8 = ptradd %src, %c8 : ptr.global
  %f2 = ld %s8 : v2.f16
  %fb = bitcast %f2 : v2.f16 -> b32
  %d8 = ptradd %dst, %c8 : ptr.global
  st %d8, %fb : b32
  %q4 = ld %src : v4.u16
  %q = bitcast %q4 : v4.u16 -> u64
  %d16 = ptradd %dst, %c16 : ptr.global
  st %d16, %q : u64
  %p2 = ld %s8 : v2.f32
  %pd = bitcast %p2 : v2.f32 -> f64
  %d24 = ptradd %dst, %c24 : ptr.global
  st %d24, %pd : f64
  %m3 = const -3 : s32
  %m5 = const -5 : s32
  %n3 = cvt %m3 : s32 -> s8
  %n5 = cvt %m5 : s32 -> s8
  %neg = pack %n3, %n5 : v2.s8
  %nb = bitcast %neg : v2.s8 -> b16
  %c6 = const 6 : u64
  %d6 = ptradd %dst, %c6 : ptr.global
  st %d6, %nb : b16
  ret
}
)";
  const std::vector<uint32_t> src = {0xFE027F81, 0x80FF1234, 0x3C00BC00, 0xC0490FDB};
  Interpreter vm = runKernel(kernel, {{"src", src}, {"dst", std::vector<uint32_t>(8, 0)}}, {1, 1, 1}, {1, 1, 1});
  std::vector<uint32_t> out = vm.read<uint32_t>("dst");
  auto word = [](uint32_t lo, uint32_t hi) { return uint64_t{hi} << 32 | lo; };
  CHECK(hex(out[0]) == hex(src[0]));                           // v4.s8 -> u32
  CHECK(hex(out[1]) == hex(0xFBFD0000 | (src[0] & 0xFFFF)));   // v2.u8 -> u16; -3, -5 as v2.s8 -> b16
  CHECK(hex(out[2]) == hex(src[2]));                           // v2.f16 -> b32
  CHECK(hex(word(out[4], out[5])) == hex(word(src[0], src[1])));  // v4.u16 -> u64
  CHECK(hex(word(out[6], out[7])) == hex(word(src[2], src[3])));  // v2.f32 -> f64
}

// ---- tensor cores -------------------------------------------------------------------------------

TEST_CASE("interp: cvt.pack puts its first operand in the high half and rounds as asked") {
  // 0x3F808000 and 0x3F818000 are halfway between two bf16 values: .rn goes to the even one.
  checkOp({"f32", "f32"}, "%r = cvt.pack.rn %a, %b : f32 -> bf16", "b32",
          {{{f32(1.0f), f32(2.0f)}, 0x3F804000},
           {{0x3F808000, 0x3F818000}, 0x3F803F82},
           {{f32(-0.0f), kNan32}, 0x80007FFF}});
  checkOp({"f32", "f32"}, "%r = cvt.pack.rz %a, %b : f32 -> bf16", "b32", {{{0x3F81FFFF, 0xBF81FFFF}, 0x3F81BF81}});
  checkOp({"f32", "f32"}, "%r = cvt.pack.rn %a, %b : f32 -> f16", "b32",
          {{{f32(1.0f), f32(-2.0f)}, 0x3C00C000}, {{f32(65520.0f), f32(0.5f)}, 0x7C003800}});
  checkOp({"f32", "f32"}, "%r = cvt.pack.rz %a, %b : f32 -> f16", "b32", {{{f32(65520.0f), f32(0.5f)}, 0x7BFF3800}});
}

namespace {

// A 16x16 bf16 A (row-major) and a 16x8 B (row-major, k by n) in shared memory, loaded with
// ldmatrix as docs/ir.md's layouts prescribe (A: lane l gives &A[l%16][8(l/16)], x4; B: lane l
// gives &B[l%16][0], x2.trans), multiplied by mma onto C; each lane stores its D fragment.
const char* kLdmatrixMma = R"(target sm_80
kernel @k(%a: ptr.global align 16, %b: ptr.global align 16, %c: ptr.global align 16, %d: ptr.global align 16) {
  shared @sa: b32[128] align 16
  shared @sb: b32[64] align 16
^entry:
  %lane = laneid : u32
  %four = const 4 : u32
  %sixteen = const 16 : u32
  %o16 = mul.wide %lane, %sixteen : u32
  %sa = shared.addr @sa : ptr.shared
  %sb = shared.addr @sb : ptr.shared
  // Copy A (512 bytes: 4 words per lane) and B (256 bytes: 2 words per lane) into shared memory.
  %ga = ptradd %a, %o16 : ptr.global
  %va = ld %ga : v4.b32
  %l16 = mul %lane, %sixteen : u32
  %pa = ptradd %sa, %l16 : ptr.shared
  st %pa, %va : v4.b32
  %eight = const 8 : u32
  %o8 = mul.wide %lane, %eight : u32
  %gb = ptradd %b, %o8 : ptr.global
  %vb = ld %gb : v2.b32
  %l8 = mul %lane, %eight : u32
  %pb = ptradd %sb, %l8 : ptr.shared
  st %pb, %vb : v2.b32
  bar.sync
  %fifteen = const 15 : u32
  %row = and %lane, %fifteen : u32
  %half = shr %lane, %four : u32
  %thirtytwo = const 32 : u32
  %rowoff = mul %row, %thirtytwo : u32
  %coloff = mul %half, %sixteen : u32
  %aoff = add %rowoff, %coloff : u32
  %arow = ptradd %sa, %aoff : ptr.shared
  %fa = ldmatrix %arow : v4.b32
  %boff = mul %row, %sixteen : u32
  %brow = ptradd %sb, %boff : ptr.shared
  %fb = ldmatrix.trans %brow : v2.b32
  %gc = ptradd %c, %o16 : ptr.global
  %fc = ld %gc : v4.f32
  %fd = mma.m16n8k16 %fa, %fb, %fc : bf16 -> f32
  %gd = ptradd %d, %o16 : ptr.global
  st %gd, %fd : v4.f32
  ret
}
)";

uint16_t bf16Of(int v) { return static_cast<uint16_t>(std::bit_cast<uint32_t>(static_cast<float>(v)) >> 16); }

}  // namespace

TEST_CASE("interp: ldmatrix feeds mma, and D = A*B + C exactly on small integers") {
  const unsigned seed = tn::harness::testSeed();
  INFO("random seed " << seed);
  std::mt19937 rng(seed);
  for (int round = 0; round < 3; ++round) {
    int A[16][16], B[16][8], C[16][8];
    for (auto& r : A) for (int& x : r) x = static_cast<int>(rng() % 17) - 8;
    for (auto& r : B) for (int& x : r) x = static_cast<int>(rng() % 17) - 8;
    for (auto& r : C) for (int& x : r) x = static_cast<int>(rng() % 201) - 100;
    std::vector<uint32_t> a(128), b(64), c(128);
    for (int m = 0; m < 16; ++m)
      for (int k = 0; k < 16; k += 2) a[(16 * m + k) / 2] = bf16Of(A[m][k]) | uint32_t{bf16Of(A[m][k + 1])} << 16;
    for (int k = 0; k < 16; ++k)
      for (int n = 0; n < 8; n += 2) b[(8 * k + n) / 2] = bf16Of(B[k][n]) | uint32_t{bf16Of(B[k][n + 1])} << 16;
    // C and D by the accumulator layout: element D[m][n] is register 2(m/8) + n%2 of lane 4(m%8) + n/2.
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 8; ++n) c[4 * (4 * (m % 8) + n / 2) + 2 * (m / 8) + n % 2] = f32(static_cast<float>(C[m][n]));
    Interpreter vm = runKernel(kLdmatrixMma, {{"a", a}, {"b", b}, {"c", c}, {"d", std::vector<uint32_t>(128, 0)}},
                               {1, 1, 1}, {32, 1, 1});
    std::vector<uint32_t> d = vm.read<uint32_t>("d");
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 8; ++n) {
        int want = C[m][n];
        for (int k = 0; k < 16; ++k) want += A[m][k] * B[k][n];
        INFO("D[" << m << "][" << n << "]");
        CHECK(std::bit_cast<float>(d[4 * (4 * (m % 8) + n / 2) + 2 * (m / 8) + n % 2]) == static_cast<float>(want));
      }
  }
}

TEST_CASE("interp: every mma form against the reference built from the inverse layouts") {
  using tn::mmaref::Form;
  const std::pair<Form, std::string> forms[] = {
      {Form::Bf16F32, "m16n8k16 %fa, %fb, %fc : bf16 -> f32"}, {Form::F16F32, "m16n8k16 %fa, %fb, %fc : f16 -> f32"},
      {Form::F16F16, "m16n8k16 %fa, %fb, %fh : f16 -> f16"},   {Form::Tf32F32, "m16n8k8 %fa, %fb, %fc : f32 -> f32"},
      {Form::S8S32, "m16n8k32 %fa, %fb, %fi : s8 -> s32"},     {Form::U8S32, "m16n8k32 %fa, %fb, %fi : u8 -> s32"},
      {Form::E4m3F32, "m16n8k32.e4m3 %fa, %fb, %fc : b8 -> f32"}, {Form::E5m2F32, "m16n8k32.e5m2 %fa, %fb, %fc : b8 -> f32"}};
  const unsigned seed = tn::harness::testSeed();
  INFO("random seed " << seed);
  std::mt19937 rng(seed);
  for (const auto& [form, text] : forms) {
    INFO(text);
    const bool fp8 = form == Form::E4m3F32 || form == Form::E5m2F32;
    std::string result = form == Form::F16F16                               ? "v2.b32"
                         : form == Form::S8S32 || form == Form::U8S32 ? "v4.s32"
                                                                      : "v4.f32";
    std::string kernel = std::string(fp8 ? "target sm_89\nptx 8.4\n" : "target sm_80\n") + R"(
kernel @k(%a: ptr.global align 16, %b: ptr.global align 16, %c: ptr.global align 16, %d: ptr.global align 16) {
^entry:
  %lane = laneid : u32
  %eight = const 8 : u32
  %sixteen = const 16 : u32
  %o8 = mul.wide %lane, %eight : u32
  %o16 = mul.wide %lane, %sixteen : u32
  %pa = ptradd %a, %o16 : ptr.global
  %pb = ptradd %b, %o8 : ptr.global
  %pc = ptradd %c, %o16 : ptr.global
  %fa = ld %pa : v4.b32
  %fb = ld %pb : v2.b32
  %fc = ld %pc : v4.f32
  %fi = ld %pc : v4.s32
  %fh = ld %pc : v2.b32
  %fd = mma.)" + text + R"(
  %pd = ptradd %d, %o16 : ptr.global
  st %pd, %fd : )" + result + R"(
  ret
}
)";
    // Small integers in every element format, so every sum is exact: bf16 and f16 values of
    // -8..8, tf32 as f32 of -8..8 with random low 13 bits (ignored), bytes at random; fp8 codes of
    // finite values at random (both sides add in the same order: the bits agree).
    auto finiteCode = [&]() -> uint32_t {
      for (;;) {
        uint32_t c = static_cast<uint32_t>(rng()) & 0xFF;
        bool special = form == Form::E4m3F32 ? (c & 0x7F) == 0x7F : (c & 0x7C) == 0x7C;
        if (!special) return c;
      }
    };
    auto smallF = [&] { return static_cast<float>(static_cast<int>(rng() % 17) - 8); };
    auto word = [&]() -> uint32_t {
      switch (form) {
        case Form::Bf16F32: return bf16Of(static_cast<int>(smallF())) | uint32_t{bf16Of(static_cast<int>(smallF()))} << 16;
        case Form::F16F32:
        case Form::F16F16: return tn::ir::f32ToF16(smallF()) | uint32_t{tn::ir::f32ToF16(smallF())} << 16;
        case Form::Tf32F32: return std::bit_cast<uint32_t>(smallF()) | (static_cast<uint32_t>(rng()) & 0x1FFF);
        case Form::E4m3F32:
        case Form::E5m2F32: return finiteCode() | finiteCode() << 8 | finiteCode() << 16 | finiteCode() << 24;
        default: return static_cast<uint32_t>(rng());
      }
    };
    std::vector<uint32_t> a(128), b(64), c(128);
    for (uint32_t& w : a) w = word();
    for (uint32_t& w : b) w = word();
    for (uint32_t& w : c) {
      if (form == Form::F16F16) w = tn::ir::f32ToF16(smallF()) | uint32_t{tn::ir::f32ToF16(smallF())} << 16;
      else if (form == Form::S8S32 || form == Form::U8S32) w = static_cast<uint32_t>(rng());  // wraps around
      else w = f32(smallF());
    }
    Interpreter vm = runKernel(kernel, {{"a", a}, {"b", b}, {"c", c}, {"d", std::vector<uint32_t>(128, 0)}},
                               {1, 1, 1}, {32, 1, 1});
    std::vector<uint32_t> got = vm.read<uint32_t>("d"), want = tn::mmaref::mma(form, a, b, c);
    for (unsigned i = 0; i < 128; ++i) {
      if (form == Form::F16F16 && i % 4 >= 2) continue;  // a v2.b32 store leaves those words
      INFO("lane " << i / 4 << " register " << i % 4);
      CHECK(hex(got[i]) == hex(want[i]));
    }
  }
}

TEST_CASE("interp: mma and ldmatrix need the whole warp; ldmatrix rows are bounds-checked") {
  auto run = [](const std::string& body, tn::ir::Dim3 block) {
    std::string text = R"(target sm_80
kernel @k(%a: ptr.global align 16) {
  shared @tile: b32[128] align 16
^entry:
  %lane = laneid : u32
  %sixteen = const 16 : u32
  %o16 = mul %lane, %sixteen : u32
  %base = shared.addr @tile : ptr.shared
  %row = ptradd %base, %o16 : ptr.shared
  %zero = const 0 : b32
  %v = pack %zero, %zero, %zero, %zero : v4.b32
  st %row, %v : v4.b32
  bar.sync
)" + body + "  ret\n}\n";
    tn::ir::Module m = parse(text);
    Interpreter vm;
    auto err = vm.load(m, "k");
    REQUIRE_FALSE(err);
    REQUIRE_FALSE(vm.bindArray("a", std::vector<uint32_t>(4, 0)));
    return vm.launch({{1, 1, 1}, block, 0});
  };
  SUBCASE("a divergent mma") {
    auto err = run(R"(  %b = const 0 : b32
  %fb = pack %b, %b : v2.b32
  %fc = const 0.0 : f32
  %c = pack %fc, %fc, %fc, %fc : v4.f32
  %half = setp.lt %lane, %sixteen : u32
  cbr %half, ^mma, ^done
^mma:
  %d = mma.m16n8k16 %v, %fb, %c : bf16 -> f32
  br ^done
^done:
)", {32, 1, 1});
    REQUIRE(err);
    CHECK(err->kind == tn::interp::ErrorKind::DivergentBarrier);
    CHECK(err->text().find("divergent mma: it needs all 32 lanes of warp 0 converged, but only 16 arrive (the "
                           "others are on another path)") != std::string::npos);
  }
  SUBCASE("a row past the end of the tile") {
    auto err = run("  %far = const 512 : u32\n  %past = ptradd %row, %far : ptr.shared\n"
                   "  %m = ldmatrix %past : v4.b32\n",
                   {32, 1, 1});
    REQUIRE(err);
    CHECK(err->kind == tn::interp::ErrorKind::OutOfBounds);
    CHECK(err->text().find("out-of-bounds ldmatrix of 16 bytes") != std::string::npos);
    CHECK(err->text().find("thread (0,0,0)") != std::string::npos);
  }
  SUBCASE("a misaligned row") {
    auto err = run("  %eight = const 8 : u32\n  %mis = ptradd %row, %eight : ptr.shared\n"
                   "  %m = ldmatrix.trans %mis : v2.b32\n",
                   {32, 1, 1});
    REQUIRE(err);
    CHECK(err->kind == tn::interp::ErrorKind::Misaligned);
  }
  SUBCASE("only the first 8 lanes of an x1 give addresses") {
    auto err = run("  %far = const 4096 : u32\n  %seven = const 7 : u32\n  %low = setp.le %lane, %seven : u32\n"
                   "  %zero32 = const 0 : u32\n  %off = selp %zero32, %far, %low : u32\n"
                   "  %p = ptradd %row, %off : ptr.shared\n  %m = ldmatrix %p : b32\n",
                   {32, 1, 1});
    CHECK_FALSE(err);
  }
}

// ---- Bit permutation and logic: prmt, lop3 -------------------------------------------------------

TEST_CASE("interp: prmt in every mode and lop3 truth tables") {
  const uint64_t a = 0x33221100, b = 0x77665544;  // byte i of {b, a} is 0x11 * i
  auto prmt = [&](const char* mode, uint64_t sel, uint64_t want) {
    checkOp({"b32", "b32", "b32"}, std::string("%r = prmt") + mode + " %a, %b, %c : b32", "b32", {{{a, b, sel}, want}});
  };
  prmt("", 0x3210, 0x33221100);
  prmt("", 0x7654, 0x77665544);
  prmt("", 0x0123, 0x00112233);
  prmt("", 0xFFFF0000, 0x00000000);  // only c[15:0] selects
  checkOp({"b32", "b32", "b32"}, "%r = prmt %a, %b, %c : b32", "b32", {{{0x80, 0, 0x0008}, 0x808080FF}});  // msb: sign
  prmt(".f4e", 1, 0x44332211);
  prmt(".f4e", 0xFFFFFFFC, 0x33221100);  // only c[1:0]
  prmt(".b4e", 0, 0x55667700);
  prmt(".b4e", 3, 0x00112233);
  prmt(".rc8", 2, 0x22222222);
  prmt(".ecl", 1, 0x33221111);
  prmt(".ecr", 2, 0x22221100);
  prmt(".rc16", 1, 0x33223322);
  prmt(".rc16", 2, 0x11001100);
  // lop3 of a = 0xF0, b = 0xCC, c = 0xAA is its truth table in the low byte; above it the three are 0.
  auto lop3 = [&](const char* lut, uint64_t want) {
    checkOp({"b32", "b32", "b32"}, std::string("%r = lop3 %a, %b, %c, ") + lut + " : b32", "b32",
            {{{0xF0, 0xCC, 0xAA}, want}});
  };
  lop3("0x96", 0x96);
  lop3("0xe8", 0xE8);
  lop3("0x01", 0xFFFFFF01);
  lop3("0xff", 0xFFFFFFFF);
  lop3("0", 0);
  checkOp({"b32", "b32", "b32"}, "%r = lop3 %a, %b, %c, 0x96 : b32", "b32",
          {{{0x12345678, 0x9ABCDEF0, 0x0F0F0F0F}, 0x12345678 ^ 0x9ABCDEF0 ^ 0x0F0F0F0F}});
}

// ---- Asynchronous copies: cp.async --------------------------------------------------------------

namespace {

// Thread t of one warp copies words 4t..4t+3 of %src into the tile with .cg, and the tail word t
// with .ca and a src-size of %n bytes; WAIT is replaced by the waiting code under test. The
// thread then stores word (t ^ 1) of the tile's first row, and its own tail word, to %dst.
const char* kAsyncKernel = R"(target sm_80
kernel @k(%src: ptr.global align 16, %dst: ptr.global align 16, %n: u32) {
  shared @tile: b32[128] align 16
  shared @tail: b32[32] align 4
^entry:
  %t = tid.x : u32
  %c16 = const 16 : u32
  %c4 = const 4 : u32
  %base = shared.addr @tile : ptr.shared
  %off = mul %t, %c16 : u32
  %s = ptradd %base, %off : ptr.shared
  %goff = mul.wide %t, %c16 : u32
  %g = ptradd %src, %goff : ptr.global
  cp.async.cg %s, %g, 16
  cp.async.commit_group
  %tb = shared.addr @tail : ptr.shared
  %toff = mul %t, %c4 : u32
  %ts = ptradd %tb, %toff : ptr.shared
  %tg0 = const 512 : u64
  %tg1 = ptradd %src, %tg0 : ptr.global
  %tgoff = mul.wide %t, %c4 : u32
  %tg = ptradd %tg1, %tgoff : ptr.global
  cp.async.ca %ts, %tg, 4, %n
  cp.async.commit_group
WAIT
  %one = const 1 : u32
  %u = xor %t, %one : u32
  %uoff = mul %u, %c4 : u32
  %us = ptradd %base, %uoff : ptr.shared
  %v = ld %us : b32
  %d = ptradd %dst, %tgoff : ptr.global
  st %d, %v : b32
  %w = ld %ts : b32
  %c128 = const 128 : u64
  %d2a = ptradd %dst, %c128 : ptr.global
  %d2 = ptradd %d2a, %tgoff : ptr.global
  st %d2, %w : b32
  ret
}
)";

std::optional<tn::interp::Error> runAsync(const std::string& wait, uint32_t n, std::vector<uint32_t>& dst) {
  std::string text = kAsyncKernel;
  text.replace(text.find("WAIT"), 4, wait);
  tn::ir::Module m = parse(text);
  Interpreter vm;
  auto err = vm.load(m, "k");
  REQUIRE_FALSE(err);
  std::vector<uint32_t> src(160);
  for (uint32_t i = 0; i < src.size(); ++i) src[i] = 0xA0000000u | i;
  REQUIRE_FALSE(vm.bindArray("src", src));
  REQUIRE_FALSE(vm.bindArray("dst", std::vector<uint32_t>(64, 0xDEADBEEF)));
  REQUIRE_FALSE(vm.setScalar("n", n));
  err = vm.launch({{1, 1, 1}, {32, 1, 1}, 0});
  dst = vm.read<uint32_t>("dst");
  return err;
}

}  // namespace

TEST_CASE("interp: cp.async lands at the covering wait; early reads are faults") {
  std::vector<uint32_t> dst;
  SUBCASE("wait_all and bar.sync: the data, zero-filled past src-size") {
    for (uint32_t n : {0u, 1u, 3u, 4u}) {
      auto err = runAsync("  cp.async.wait_all\n  bar.sync\n", n, dst);
      INFO((err ? err->text() : ""));
      REQUIRE_FALSE(err);
      for (uint32_t t = 0; t < 32; ++t) {
        CHECK(hex(dst[t]) == hex(0xA0000000u | (t ^ 1)));  // word t ^ 1 of the tile's first row
        uint32_t full = 0xA0000000u | (128 + t);
        uint32_t keep = n >= 4 ? 0xFFFFFFFFu : (1u << (8 * n)) - 1;
        CHECK(hex(dst[32 + t]) == hex(full & keep));
      }
    }
  }
  SUBCASE("wait_group 0 covers both groups") {
    auto err = runAsync("  cp.async.wait_group 0\n  bar.sync\n", 4, dst);
    INFO((err ? err->text() : ""));
    CHECK_FALSE(err);
  }
  SUBCASE("wait_group 1 leaves the tail in flight: its own read is a fault") {
    auto err = runAsync("  cp.async.wait_group 1\n  bar.sync\n", 4, dst);
    REQUIRE(err);
    CHECK(err->kind == tn::interp::ErrorKind::AsyncCopy);
    CHECK(err->text().find("ld.shared of 4 bytes at offset 0 of '@tail' (128 bytes) reads a byte that the cp.async "
                           "at 23:3 of this thread may still be copying") != std::string::npos);
    CHECK(err->thread == tn::ir::Dim3{0, 0, 0});
  }
  SUBCASE("a wait without bar.sync: the neighbour's word is not visible yet") {
    auto err = runAsync("  cp.async.wait_all\n", 4, dst);
    REQUIRE(err);
    CHECK(err->kind == tn::interp::ErrorKind::AsyncCopy);
    // Lane 0 reads word 1, from its own copy; lane 1 reads word 0, from lane 0's.
    CHECK(err->thread == tn::ir::Dim3{1, 0, 0});
    CHECK(err->text().find("waited for at 25:3 with no bar.sync between that wait and this access") !=
          std::string::npos);
  }
  SUBCASE("bar.sync without a wait guarantees nothing") {
    auto err = runAsync("  bar.sync\n", 4, dst);
    REQUIRE(err);
    CHECK(err->kind == tn::interp::ErrorKind::AsyncCopy);
    CHECK(err->text().find("may still be copying") != std::string::npos);
  }
}
