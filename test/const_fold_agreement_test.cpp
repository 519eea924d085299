// const-fold against the interpreter on fresh random constants: one op with constant operands per
// kernel (integer, float and cvt, with random rounding, .ftz, .sat and comparison modifiers; IR
// the verifier rejects is skipped). Where const-fold folds, its constant must be the bits the
// interpreter stores. Both take their values from ir/LaneSemantics.h, so this checks what sits
// around it: const-fold's choice of what to fold, and the operands and modifiers each passes in.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "compiler/Compile.h"
#include "interp_harness.h"
#include "ir/LaneSemantics.h"
#include "passes/Analysis.h"
#include "passes/Pass.h"

namespace {

using tn::ir::Scalar;
namespace lane = tn::ir::lane;

struct TypeInfo {
  const char* name;
  Scalar scalar;
};
constexpr TypeInfo kInts[] = {{"u8", Scalar::U8},   {"u16", Scalar::U16}, {"u32", Scalar::U32}, {"u64", Scalar::U64},
                              {"s8", Scalar::S8},   {"s16", Scalar::S16}, {"s32", Scalar::S32}, {"s64", Scalar::S64},
                              {"b32", Scalar::B32}, {"b64", Scalar::B64}};
constexpr TypeInfo kFloats[] = {{"f16", Scalar::F16}, {"bf16", Scalar::BF16}, {"f32", Scalar::F32}, {"f64", Scalar::F64}};

template <class V>
const auto& pick(std::mt19937& rng, const V& v) {
  return v[rng() % std::size(v)];
}

uint64_t random64(std::mt19937& rng) { return (uint64_t{rng()} << 32) | rng(); }

// Edge values more often than uniform bits: 0, 1, -1, MIN, MAX, small numbers.
uint64_t intValue(std::mt19937& rng, Scalar s) {
  unsigned w = tn::ir::scalarBits(s);
  uint64_t m = lane::lowMask(w), top = uint64_t{1} << (w - 1);
  switch (rng() % 8) {
    case 0: return 0;
    case 1: return 1;
    case 2: return m;
    case 3: return top;
    case 4: return top - 1;
    case 5: return rng() % 70;
    case 6: return (0 - uint64_t{rng() % 70}) & m;
    default: return random64(rng) & m;
  }
}

// Zeros, infinities, NaNs, subnormals, the largest finite value, numbers near 1 and integral
// values of every size, and uniform bits; either sign.
uint64_t floatValue(std::mt19937& rng, Scalar s) {
  unsigned bits = lane::floatBits(s), mant = lane::mantissaBits(s);
  uint64_t sign = rng() % 2 ? lane::signBit(s) : 0, exp = lane::exponentMask(s);
  uint64_t bias = lane::lowMask(bits - mant - 2), fraction = random64(rng) & lane::lowMask(mant);
  uint64_t large = std::min<uint64_t>(bias + rng() % 64, 2 * bias);  // 2^0 .. 2^63, finite
  switch (rng() % 10) {
    case 0: return sign;
    case 1: return sign | exp;
    case 2: return sign | exp | (fraction | 1);
    case 3: return sign | (fraction | 1);
    case 4: return sign | (exp - 1);
    case 5: return sign | ((bias - 1 + rng() % 3) << mant) | fraction;
    case 6: return sign | (large << mant) | (fraction & ~lane::lowMask(mant > 6 ? mant - 6 : 0));
    default: return random64(rng) & lane::lowMask(bits);
  }
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llX", static_cast<unsigned long long>(v));
  return buf;
}

std::string mods(std::initializer_list<std::string> ms) {
  std::string out;
  for (const std::string& m : ms)
    if (!m.empty()) out += "." + m;
  return out;
}

struct Case {
  std::string body;  // defines %r
  std::string resultType;
};

Case randomCase(std::mt19937& rng) {
  static const std::vector<std::string> kFloatRound = {"", "rn", "rz", "rm", "rp"};
  auto constant = [](int i, uint64_t v, const char* type) {
    return "  %a" + std::to_string(i) + " = const " + hex(v) + " : " + type + "\n";
  };
  auto operands = [](int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += (i ? ", %a" : " %a") + std::to_string(i);
    return out;
  };
  Case c;
  unsigned kind = rng() % 4;
  if (kind == 0) {
    static const std::vector<std::string> kOps = {"add", "sub",  "mul", "mul.hi", "mul.wide", "mad", "div",
                                                  "rem", "min",  "max", "neg",    "abs",      "and", "or",
                                                  "xor", "not",  "shl", "shr",    "popc",     "clz", "setp"};
    const TypeInfo& t = pick(rng, kInts);
    std::string op = pick(rng, kOps);
    unsigned w = tn::ir::scalarBits(t.scalar);
    if (op == "mul.wide" && w == 64) op = "mul.hi";  // no 128-bit type to write
    std::string cmp = op == "setp" ? pick(rng, std::vector<std::string>{"eq", "ne", "lt", "le", "gt", "ge"}) : "";
    std::string sat = (op == "add" || op == "sub") && rng() % 3 == 0 ? "sat" : "";
    bool unary = op == "neg" || op == "abs" || op == "not" || op == "popc" || op == "clz";
    int n = unary ? 1 : op == "mad" ? 3 : 2;
    for (int i = 0; i < n; ++i) {
      bool amount = (op == "shl" || op == "shr") && i == 1;
      c.body += amount ? constant(i, rng() % 70, "u32") : constant(i, intValue(rng, t.scalar), t.name);
    }
    c.body += "  %r = " + op + mods({cmp, sat}) + operands(n) + " : " + t.name + "\n";
    c.resultType = op == "mul.wide" ? std::string(tn::ir::Type::of(t.scalar).isSigned() ? "s" : "u") + std::to_string(2 * w)
                   : op == "popc" || op == "clz" ? "u32"
                   : op == "setp"               ? "pred"
                                                : t.name;
  } else if (kind < 3) {
    static const std::vector<std::string> kOps = {"add", "sub", "mul", "fma",  "div", "min",
                                                  "max", "neg", "abs", "setp", "sqrt", "rcp"};
    const TypeInfo& t = pick(rng, kFloats);
    std::string op = pick(rng, kOps), round, cmp, sat;
    std::string ftz = rng() % 3 == 0 ? "ftz" : "";
    if (op == "add" || op == "sub" || op == "mul" || op == "fma") {
      round = pick(rng, kFloatRound);
      sat = rng() % 4 == 0 ? "sat" : "";
    }
    if (op == "div" || op == "sqrt" || op == "rcp")
      round = pick(rng, std::vector<std::string>{"rn", "rn", "rz", "rm", "rp", "approx", "full"});
    if (op == "setp")
      cmp = pick(rng, std::vector<std::string>{"eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu",
                                               "gtu", "geu", "num", "nan"});
    int n = op == "neg" || op == "abs" || op == "sqrt" || op == "rcp" ? 1 : op == "fma" ? 3 : 2;
    for (int i = 0; i < n; ++i) c.body += constant(i, floatValue(rng, t.scalar), t.name);
    c.body += "  %r = " + op + mods({cmp, round, ftz, sat}) + operands(n) + " : " + t.name + "\n";
    c.resultType = op == "setp" ? "pred" : t.name;
  } else {
    std::vector<TypeInfo> all(std::begin(kInts), std::end(kInts));
    all.insert(all.end(), std::begin(kFloats), std::end(kFloats));
    const TypeInfo& s = pick(rng, all);
    const TypeInfo& t = pick(rng, all);
    std::string round = pick(rng, std::vector<std::string>{"", "rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi"});
    std::string ftz = rng() % 3 == 0 ? "ftz" : "", sat = rng() % 3 == 0 ? "sat" : "";
    bool fromFloat = tn::ir::Type::of(s.scalar).isFloat();
    c.body += constant(0, fromFloat ? floatValue(rng, s.scalar) : intValue(rng, s.scalar), s.name);
    c.body += "  %r = cvt" + mods({round, ftz, sat}) + " %a0 : " + s.name + " -> " + t.name + "\n";
    c.resultType = t.name;
  }
  if (c.resultType == "pred")
    c.body += "  %one = const 1 : u32\n  %zero = const 0 : u32\n  %out = selp %one, %zero, %r : u32\n"
              "  st %p, %out : u32\n";
  else
    c.body += "  st %p, %r : " + c.resultType + "\n";
  return c;
}

}  // namespace

TEST_CASE("const-fold folds to the bits the interpreter computes, on random constants") {
  const unsigned seed = tn::harness::testSeed();
  INFO("seed " << seed << " (TRUENOC_TEST_SEED replays it)");
  std::mt19937 rng(seed);
  unsigned valid = 0, folded = 0;
  for (unsigned i = 0; i < 20000; ++i) {
    Case c = randomCase(rng);
    std::string text = "target sm_90\nkernel @k(%p: ptr.global align 8) {\n^entry:\n" + c.body + "  ret\n}\n";
    tn::ir::Diagnostics diags;
    std::optional<tn::ir::Module> m = tn::ir::parseModule(text, "random.tir", diags);
    REQUIRE_MESSAGE(m, text << tn::harness::diagnosticsText(diags));
    if (!tn::ir::verify(*m, diags)) continue;  // a modifier or type the op does not take
    ++valid;

    tn::ir::Module f = *m;
    tn::passes::PassOptions options;
    tn::passes::PassRunner runner = tn::compile::makeRunner(f, diags, options);
    REQUIRE(runner.run("const-fold"));
    const tn::ir::Kernel& k = f.kernels[0];
    tn::ir::ValueId r;
    for (uint32_t v = 0; v < k.values.size(); ++v)
      if (k.values[v].name == "r") r = tn::ir::ValueId{v};
    std::optional<uint64_t> constant = tn::passes::constBits(k, r);
    if (!constant) continue;
    ++folded;

    INFO(text);
    tn::interp::Interpreter vm;
    std::optional<tn::interp::Error> error = vm.load(*m, "k");
    if (!error) error = vm.bindBuffer("p", std::vector<std::byte>(8));
    if (!error) error = vm.launch({{1, 1, 1}, {1, 1, 1}, 0});
    if (error) FAIL(error->text());
    unsigned bits = c.resultType == "pred" ? 1 : tn::ir::parseType(c.resultType)->bits();
    CHECK(hex(vm.read<uint64_t>("p")[0] & lane::lowMask(bits)) == hex(*constant & lane::lowMask(bits)));
  }
  MESSAGE(valid << " valid random ops, " << folded << " folded");
  CHECK(folded > valid / 2);
}
