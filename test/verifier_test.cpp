// The verifier's checks that no .tir text can trigger (the parser already rejects such input),
// but that IR built or rewritten in C++ can break: each mutates a parsed kernel and expects the
// exact diagnostic. The text-reachable checks are covered by lit-tests/verifier/.
#include <doctest/doctest.h>

#include "ir/Dominance.h"
#include "ir/Parser.h"
#include "ir/Verifier.h"

namespace {

using namespace tn::ir;

Module parse(const char* text) {
  Diagnostics d;
  auto m = parseModule(text, "t.tir", d);
  REQUIRE(m);
  Diagnostics vd;
  REQUIRE(verify(*m, vd));
  return std::move(*m);
}

const char* kBase = R"(target sm_80
ptx 7.0
kernel @k(%x: f32, %p: ptr.global, %n: u32) {
  shared @buf: f32[4]
^entry:
  %y = add %x, %x : f32
  %t = tid.x : u32
  %s = shared.addr @buf : ptr.shared
  %c = setp.lt %t, %n : u32
  cbr %c, ^a, ^b
^a:
  br ^b
^b:
  ret
}
)";

// Every diagnostic of verify(m), formatted.
std::vector<std::string> errors(const Module& m) {
  Diagnostics d;
  verify(m, d);
  std::vector<std::string> out;
  for (const Diagnostic& x : d.all()) out.push_back(formatDiagnostic(x));
  return out;
}

Inst& instAt(Kernel& k, size_t block, size_t pos) { return k.inst(k.blocks[block].insts[pos]); }

}  // namespace

TEST_CASE("verifier: a kernel without blocks") {
  Module m = parse(kBase);
  m.kernels[0].blocks.clear();
  CHECK(errors(m) == std::vector<std::string>{"t.tir:3:1: error: kernel '@k' has no blocks"});
}

TEST_CASE("verifier: a block listing a missing instruction") {
  Module m = parse(kBase);
  m.kernels[0].blocks[1].insts.insert(m.kernels[0].blocks[1].insts.begin(), InstId(999));
  CHECK(errors(m) == std::vector<std::string>{"t.tir:11:1: error: block '^a' lists an instruction that does not exist"});
}

TEST_CASE("verifier: type annotations present exactly when the op takes them") {
  Module m = parse(kBase);
  Kernel& k = m.kernels[0];
  instAt(k, 0, 0).type.reset();                 // add
  instAt(k, 2, 0).type = Type::u32();           // ret
  Inst& cvtLike = instAt(k, 0, 1);              // tid gets a source type
  cvtLike.srcType = Type::u32();
  CHECK(errors(m) == std::vector<std::string>{
                         "t.tir:6:8: error: 'add' needs a type annotation",
                         "t.tir:7:8: error: 'tid.x' takes no source type",
                         "t.tir:14:3: error: 'ret' takes no type annotation",
                     });
}

TEST_CASE("verifier: cvt without a source type") {
  Module m = parse(R"(target sm_80
ptx 7.0
kernel @k(%x: f32) {
^entry:
  %y = cvt.rzi %x : f32 -> s32
  ret
}
)");
  m.kernels[0].insts[0].srcType.reset();
  CHECK(errors(m) == std::vector<std::string>{"t.tir:5:8: error: 'cvt.rzi' needs a source type (': S -> T')"});
}

TEST_CASE("verifier: result values follow the result rule") {
  Module m = parse(kBase);
  Kernel& k = m.kernels[0];
  instAt(k, 0, 0).result = ValueId();                                   // add loses its result
  k.value(instAt(k, 0, 3).result).type = Type::u32();                   // setp's result retyped
  instAt(k, 2, 0).result = k.addValue(Type::u32(), "r", DefKind::Inst, 0);  // ret gains one
  CHECK(errors(m) == std::vector<std::string>{
                         "t.tir:6:8: error: 'add' has no result value",
                         "t.tir:9:8: error: result '%c' of 'setp.lt' has type 'u32', expected 'pred'",
                         "t.tir:10:3: error: operand 1 of 'cbr' ('%c') has type 'u32', expected 'pred'",
                         "t.tir:14:3: error: 'ret' produces no result, but defines '%r'",
                     });
}

// A wide vector of a lane count the text form lacks (a wgmma of N = 192 would accumulate into
// v96.f32): refused, as its printed IR would not parse.
TEST_CASE("verifier: wide vectors of lane counts that are not powers of two") {
  Module m = parse(R"(target sm_90a
ptx 8.0
kernel @k(%x: f32) {
^entry:
  %acc = pack %x, %x, %x, %x, %x, %x, %x, %x : v8.f32
  %y = extract %acc, 0 : v8.f32
  ret
}
)");
  Kernel& k = m.kernels[0];
  Inst& pack = instAt(k, 0, 0);
  const Type odd = Type::of(Scalar::F32, 12);
  pack.type = odd;
  pack.operands.resize(12, pack.operands[0]);
  k.value(pack.result).type = odd;
  instAt(k, 0, 1).type = odd;  // extract's operand type
  CHECK(errors(m) == std::vector<std::string>{
                         "t.tir:5:10: error: 'pack' has the wide type 'v12.f32'; truenoc's wide vectors have 8, 16, 32, "
                         "64 or 128 lanes (a wgmma's N is then a power of two)",
                         "t.tir:6:8: error: 'extract' has the wide type 'v12.f32'; truenoc's wide vectors have 8, 16, "
                         "32, 64 or 128 lanes (a wgmma's N is then a power of two)",
                     });
}

TEST_CASE("verifier: operand counts of fixed-arity ops") {
  Module m = parse(kBase);
  instAt(m.kernels[0], 0, 0).operands.pop_back();
  CHECK(errors(m) == std::vector<std::string>{"t.tir:6:8: error: 'add' takes 2 operand(s), got 1"});
}

TEST_CASE("verifier: modifier groups the op does not take, and missing required groups") {
  Module m = parse(kBase);
  Kernel& k = m.kernels[0];
  instAt(k, 0, 0).setMod(Mod::X);             // add.x
  instAt(k, 0, 1).clearMod(ModGroup::Dim);    // tid without .x
  CHECK(errors(m) == std::vector<std::string>{
                         "t.tir:6:8: error: 'add' does not take modifier '.x'",
                         "t.tir:7:8: error: 'tid' needs a modifier of group Dim",
                     });
}

TEST_CASE("verifier: shared.addr naming no shared array") {
  Module m = parse(kBase);
  instAt(m.kernels[0], 0, 2).symbol = 7;
  CHECK(errors(m) == std::vector<std::string>{"t.tir:8:8: error: 'shared.addr' names no shared array of '@k'"});
}

TEST_CASE("verifier: branch target counts and missing target blocks") {
  Module m = parse(kBase);
  Kernel& k = m.kernels[0];
  instAt(k, 1, 0).succs.push_back({BlockId(2), {}});  // br with two targets
  instAt(k, 0, 4).succs[1].block = BlockId(42);       // cbr to a missing block
  CHECK(errors(m) == std::vector<std::string>{
                         "t.tir:10:3: error: 'cbr' branches to a block that does not exist",
                         "t.tir:12:3: error: 'br' takes 1 branch target(s), got 2",
                     });
}

TEST_CASE("verifier: uses of invalid and undefined values") {
  Module m = parse(kBase);
  Kernel& k = m.kernels[0];
  instAt(k, 0, 0).operands[1] = ValueId(9999);
  ValueId orphan = k.addValue(Type::u32(), "orphan", DefKind::Inst, 0);
  instAt(k, 0, 3).operands[1] = orphan;
  CHECK(errors(m) == std::vector<std::string>{
                         "t.tir:6:8: error: operand 2 of 'add' uses an invalid value",
                         "t.tir:9:8: error: operand 2 of 'setp.lt' uses '%orphan', which is not defined",
                     });
}

TEST_CASE("verifier: parameter alignments") {
  Module m = parse(kBase);
  Kernel& k = m.kernels[0];
  k.params[1].align = 12;
  k.params[2].align = 4;
  CHECK(errors(m) == std::vector<std::string>{
                         "t.tir:3:1: error: parameter '%p' has alignment 12, which is not a power of two",
                         "t.tir:3:1: error: parameter '%n' of type 'u32' cannot take an alignment (only pointers can)",
                     });
}

TEST_CASE("dominance: diamond, loop and unreachable block") {
  Module m = parse(R"(target sm_80
ptx 7.0
kernel @k(%n: u32) {
^entry:
  %c = setp.lt %n, %n : u32
  cbr %c, ^left, ^right
^left:
  br ^join
^right:
  br ^join
^join:
  cbr %c, ^join, ^exit
^dead:
  br ^exit
^exit:
  ret
}
)");
  DominatorTree dom(m.kernels[0]);
  BlockId entry(0), left(1), right(2), join(3), dead(4), exit(5);
  CHECK(dom.reversePostOrder().front() == entry);
  CHECK(dom.reversePostOrder().size() == 5);
  CHECK_FALSE(dom.reachable(dead));
  CHECK(dom.idom(join) == entry);
  CHECK(dom.idom(exit) == join);
  CHECK_FALSE(dom.idom(entry).valid());
  CHECK(dom.dominates(entry, exit));
  CHECK(dom.dominates(join, join));
  CHECK_FALSE(dom.strictlyDominates(join, join));
  CHECK_FALSE(dom.dominates(left, join));
  CHECK_FALSE(dom.dominates(dead, exit));
  auto list = [](std::span<const BlockId> s) { return std::vector<BlockId>(s.begin(), s.end()); };
  CHECK(list(dom.predecessors(join)) == std::vector<BlockId>{left, right, join});
  CHECK(list(dom.successors(join)) == std::vector<BlockId>{join, exit});
  CHECK(list(dom.predecessors(exit)) == std::vector<BlockId>{join, dead});
}
