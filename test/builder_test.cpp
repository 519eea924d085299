// The IR builder: the example kernels built in C++ print exactly as examples/*.tir, structured
// control flow lowers to blocks with parameters, and instructions remember the C++ lines that
// made them.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "ir/Builder.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "kernels/Examples.h"

using namespace tn;
using ir::KernelBuilder;
using ir::Mod;
using ir::Type;
using ir::Value;

namespace {

constexpr Type kGlobalPtr = Type::ptr(ir::AddrSpace::Global);
constexpr Type kSharedPtr = Type::ptr(ir::AddrSpace::Shared);

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open " << path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The example file as the printer writes it (comments dropped, canonical form).
std::string printedExample(const char* name) {
  std::string path = std::string(TRUENOC_SOURCE_DIR) + "/examples/" + name;
  ir::Diagnostics diags;
  auto m = ir::parseModule(slurp(path), path, diags);
  REQUIRE_MESSAGE(m.has_value(), (diags.all().empty() ? "" : ir::formatDiagnostic(diags.all()[0])));
  return ir::print(*m);
}

std::string errorsOf(const ir::Diagnostics& d) {
  std::string out;
  for (const ir::Diagnostic& x : d.all()) out += ir::formatDiagnostic(x) + "\n";
  return out;
}

// Builder output must verify and read back through the parser to the same text.
void checkWellFormed(const ir::Module& m) {
  ir::Diagnostics vd;
  ir::verify(m, vd);
  CHECK_MESSAGE(!vd.hasErrors(), errorsOf(vd));
  std::string text = ir::print(m);
  ir::Diagnostics pd;
  auto back = ir::parseModule(text, "<builder>", pd);
  REQUIRE_MESSAGE(back.has_value(), errorsOf(pd) << text);
  CHECK(ir::print(*back) == text);
}

ir::Module sm80() {
  ir::Module m;
  m.target = ir::Target{80, false};
  m.ptx = 70;
  return m;
}

}  // namespace

TEST_CASE("builder: vadd prints exactly as examples/vadd.tir") {
  ir::Module m = kernels::buildVaddModule();
  CHECK(ir::print(m) == printedExample("vadd.tir"));
  checkWellFormed(m);
}

TEST_CASE("builder: row_sum prints exactly as examples/row_sum.tir") {
  ir::Module m = kernels::buildRowSumModule();
  CHECK(ir::print(m) == printedExample("row_sum.tir"));
  checkWellFormed(m);
}

TEST_CASE("builder: for_range with two carried values") {
  ir::Module m = sm80();
  KernelBuilder b(m, "loop2");
  Value n = b.param(Type::u32(), "n");
  Value out = b.param(kGlobalPtr, "out", 8);
  Value zero = b.f32(0.0f, "zero");
  Value one = b.u32(1, "one");
  std::vector<Value> r = b.for_range(
      0u, n, 2u, {zero, one},
      [&](Value k, std::span<Value> c) -> std::vector<Value> {
        Value fk = b.cvt(k, Type::f32(), "fk");
        return {(c[0] + fk).named("sum.next"), (c[1] * 3u).named("prod.next")};
      },
      {.label = "acc", .iv = "k", .carried = {"sum", "prod"}});
  REQUIRE(r.size() == 2);
  b.store(out, r[0]);
  b.store(b.index(out, 1u, 4, "p1"), r[1]);
  b.ret();
  CHECK(b.ok());

  CHECK(ir::print(m) == R"(target sm_80
ptx 7.0

kernel @loop2(%n: u32, %out: ptr.global align 8) {
^entry:
  %zero = const 0.0 : f32
  %one = const 1 : u32
  %acc.begin = const 0 : u32
  %acc.step = const 2 : u32
  br ^acc(%acc.begin, %zero, %one)
^acc(%k: u32, %sum: f32, %prod: u32):
  %acc.cond = setp.lt %k, %n : u32
  cbr %acc.cond, ^acc.body, ^acc.exit
^acc.body:
  %fk = cvt.rn %k : u32 -> f32
  %sum.next = add %sum, %fk : f32
  %0 = const 3 : u32
  %prod.next = mul %prod, %0 : u32
  %acc.next = add %k, %acc.step : u32
  br ^acc(%acc.next, %sum.next, %prod.next)
^acc.exit:
  st %out, %sum : f32
  %p1.off = const 4 : u64
  %p1 = ptradd %out, %p1.off : ptr.global
  st %p1, %prod : u32
  ret
}
)");
  // The loop's results are the header's parameters, which dominate the exit.
  const ir::Kernel& k = m.kernels[0];
  const ir::Block& header = k.blocks[1];
  REQUIRE(header.params.size() == 3);
  CHECK(r[0].id() == header.params[1]);
  CHECK(r[1].id() == header.params[2]);
  CHECK(r[1].type() == Type::u32());
  checkWellFormed(m);
}

TEST_CASE("builder: nested loops get unique labels and a void body") {
  ir::Module m = sm80();
  KernelBuilder b(m, "nest");
  Value n = b.param(Type::u32(), "n");
  Value out = b.param(kGlobalPtr, "out");
  b.for_range(0u, n, 1u, [&](Value i) {
    b.for_range(i, n, 1u, [&](Value j) { b.store(b.index(out, j, 4, "pj"), i); });
  });
  b.ret();
  CHECK(b.ok());
  std::vector<std::string> names;
  for (const ir::Block& blk : m.kernels[0].blocks) names.push_back(blk.name);
  CHECK(names == std::vector<std::string>{"entry", "loop", "loop.body", "loop2", "loop2.body", "loop2.exit",
                                          "loop.exit"});
  checkWellFormed(m);
}

TEST_CASE("builder: if_else merges values through the end block's parameters") {
  ir::Module m = sm80();
  KernelBuilder b(m, "pick");
  Value out = b.param(kGlobalPtr, "out");
  Value tid = b.tid(Mod::X, "tid");
  std::vector<Value> r = b.if_else(
      (tid < 16u).named("low"),
      [&] { return std::vector<Value>{b.f32(1.5f, "a"), tid}; },
      [&] {
        Value two = b.f32(2.0f, "b");
        return std::vector<Value>{two, (tid - 16u).named("hi")};
      },
      {.label = "sel", .results = {"w", "lane"}});
  REQUIRE(r.size() == 2);
  Value v = b.if_else(r[1] == 0u, [&] { return r[0]; }, [&] { return -r[0]; })[0];
  b.store(out, v);
  b.ret();
  CHECK(b.ok());

  CHECK(ir::print(m) == R"(target sm_80
ptx 7.0

kernel @pick(%out: ptr.global) {
^entry:
  %tid = tid.x : u32
  %0 = const 16 : u32
  %low = setp.lt %tid, %0 : u32
  cbr %low, ^sel.then, ^sel.else
^sel.then:
  %a = const 1.5 : f32
  br ^sel.end(%a, %tid)
^sel.else:
  %b = const 2.0 : f32
  %1 = const 16 : u32
  %hi = sub %tid, %1 : u32
  br ^sel.end(%b, %hi)
^sel.end(%w: f32, %lane: u32):
  %2 = const 0 : u32
  %3 = setp.eq %lane, %2 : u32
  cbr %3, ^if.then, ^if.else
^if.then:
  br ^if.end(%w)
^if.else:
  %4 = neg %w : f32
  br ^if.end(%4)
^if.end(%5: f32):
  st %out, %5 : f32
  ret
}
)");
  checkWellFormed(m);
}

TEST_CASE("builder: if_then with an early return does not fall through") {
  ir::Module m = sm80();
  KernelBuilder b(m, "guard");
  Value n = b.param(Type::u32(), "n");
  Value out = b.param(kGlobalPtr, "out");
  Value tid = b.tid(Mod::X, "tid");
  b.if_then((tid >= n).named("outside"), [&] { b.ret(); }, "oob");
  b.store(b.index(out, tid, 4, "p"), tid);
  b.ret();
  CHECK(b.ok());
  const ir::Kernel& k = m.kernels[0];
  REQUIRE(k.blocks.size() == 3);
  CHECK(k.blocks[1].name == "oob.then");
  REQUIRE(k.blocks[1].insts.size() == 1);
  CHECK(k.inst(k.blocks[1].insts[0]).op == ir::Op::Ret);
  checkWellFormed(m);
}

TEST_CASE("builder: source locations point at the lines that built the instructions") {
  ir::Module m = sm80();
  unsigned kernelLine = __LINE__ + 1;
  KernelBuilder b(m, "locs");
  Value x = b.param(Type::f32(), "x");
  unsigned constLine = __LINE__ + 1;
  Value two = b.f32(2.0f, "two");
  unsigned opLine = __LINE__ + 1;
  Value y = x * two;
  unsigned loopLine = __LINE__ + 1;
  b.for_range(0u, 4u, 1u, [&](Value) {});
  b.ret();

  const ir::Kernel& k = m.kernels[0];
  auto locOf = [&](Value v) { return k.inst(ir::InstId(k.value(v.id()).owner)).loc; };
  CHECK(m.fileName(k.loc) == "test/builder_test.cpp");
  CHECK(k.loc.line == kernelLine);
  CHECK(m.fileName(locOf(two)) == "test/builder_test.cpp");
  CHECK(locOf(two).line == constLine);
  CHECK(locOf(y).line == opLine);
  CHECK(locOf(y).col > 0);
  // Every instruction the loop helper made (bounds, setp, cbr, increment, branches) carries
  // the for_range call's line, and so do its blocks.
  unsigned loopInsts = 0;
  for (size_t bi = 1; bi < k.blocks.size(); ++bi) {
    CHECK(k.blocks[bi].loc.line == loopLine);
    for (ir::InstId id : k.blocks[bi].insts)
      if (k.inst(id).op != ir::Op::Ret) {
        CHECK(k.inst(id).loc.line == loopLine);
        ++loopInsts;
      }
  }
  CHECK(loopInsts == 4);  // header setp + cbr, body add + br
  // The entry block's loop setup (bounds and the branch into the header) too.
  const ir::Block& entry = k.blocks[0];
  CHECK(k.inst(entry.insts.back()).loc.line == loopLine);
}

TEST_CASE("builder: operators with literals, shifts, comparisons and unary ops") {
  ir::Module m = sm80();
  KernelBuilder b(m, "ops");
  Value x = b.param(Type::f32(), "x");
  Value i = b.param(Type::s32(), "i");
  Value out = b.param(kGlobalPtr, "out");
  Value a = (x * 2.0f + 1).named("a");
  Value c = (3 - i).named("c");
  c <<= 2;
  // One builder call per statement: C++ leaves the order of operand evaluation open.
  Value masked = (c >> 1) & 0xff;
  Value d = (masked ^ ~i).named("d");
  Value p = (a >= 0.5).named("p");
  Value notP = !p;
  Value q = (notP | (d != 7)).named("q");
  b.store(out, b.select(q, -a, x, "r"));
  b.ret();
  CHECK(b.ok());
  CHECK(ir::print(m, m.kernels[0]) == R"(kernel @ops(%x: f32, %i: s32, %out: ptr.global) {
^entry:
  %0 = const 2.0 : f32
  %1 = mul %x, %0 : f32
  %2 = const 1.0 : f32
  %a = add %1, %2 : f32
  %3 = const 3 : s32
  %c = sub %3, %i : s32
  %4 = const 2 : u32
  %5 = shl %c, %4 : s32
  %6 = const 1 : u32
  %7 = shr %5, %6 : s32
  %8 = const 255 : s32
  %9 = and %7, %8 : s32
  %10 = not %i : s32
  %d = xor %9, %10 : s32
  %11 = const 0.5 : f32
  %p = setp.ge %a, %11 : f32
  %12 = not %p : pred
  %13 = const 7 : s32
  %14 = setp.ne %d, %13 : s32
  %q = or %12, %14 : pred
  %15 = neg %a : f32
  %r = selp %15, %x, %q : f32
  st %out, %r : f32
  ret
}
)");
  checkWellFormed(m);
}

TEST_CASE("builder: index and byte_offset widen and scale to the pointer width") {
  ir::Module m = sm80();
  KernelBuilder b(m, "idx");
  Value g = b.param(kGlobalPtr, "g");
  Value i32 = b.param(Type::s32(), "i32");
  Value i64 = b.param(Type::u64(), "i64");
  Value h = b.param(Type::of(ir::Scalar::U16), "h");
  ir::SharedArray tile = b.shared("tile", Type::f32(), 64);
  Value s = b.shared_addr(tile, "s");
  Value pa = b.index(g, i32, 8, "pa");
  b.store(pa, b.f64(1.0, "one"));
  Value pb = b.index(g, i64, 2, "pb");
  b.store(pb, b.f16(0.5f, "half"));
  Value pc = b.index(s, h, 4, "pc");
  b.store(pc, b.f32(3.0f, "three"));
  Value pd = b.index(g, h, 1, "pd");
  b.store(pd, b.u8(9, "nine"));
  Value off = b.byte_offset(i64, 16, ir::AddrSpace::Shared, "off");
  Value pe = b.ptradd(s, off, "pe");
  b.store(pe, b.f32(4.0f, "four"));
  b.ret();
  CHECK(b.ok());
  CHECK(ir::print(m, m.kernels[0]) == R"(kernel @idx(%g: ptr.global, %i32: s32, %i64: u64, %h: u16) {
  shared @tile: f32[64] align 4
^entry:
  %s = shared.addr @tile : ptr.shared
  %pa.scale = const 8 : s32
  %pa.off = mul.wide %i32, %pa.scale : s32
  %pa = ptradd %g, %pa.off : ptr.global
  %one = const 1.0 : f64
  st %pa, %one : f64
  %pb.scale = const 2 : u64
  %pb.off = mul %i64, %pb.scale : u64
  %pb = ptradd %g, %pb.off : ptr.global
  %half = const 0.5 : f16
  st %pb, %half : f16
  %0 = cvt %h : u16 -> u32
  %pc.scale = const 4 : u32
  %pc.off = mul %0, %pc.scale : u32
  %pc = ptradd %s, %pc.off : ptr.shared
  %three = const 3.0 : f32
  st %pc, %three : f32
  %1 = cvt %h : u16 -> u32
  %pd.off = cvt %1 : u32 -> u64
  %pd = ptradd %g, %pd.off : ptr.global
  %nine = const 9 : u8
  st %pd, %nine : u8
  %2 = cvt %i64 : u64 -> u32
  %off.scale = const 16 : u32
  %off = mul %2, %off.scale : u32
  %pe = ptradd %s, %off : ptr.shared
  %four = const 4.0 : f32
  st %pe, %four : f32
  ret
}
)");
  checkWellFormed(m);
}

TEST_CASE("builder: tables are declared once per name and looked up by table_ld") {
  ir::Module m = sm80();
  KernelBuilder b(m, "grid");
  Value g = b.param(kGlobalPtr, "g");
  Value i = b.param(Type::u32(), "i");
  ir::Table t = b.table("grid", Type::u32(), {1, 2, 0xFFFFFFFF});
  Value v = b.table_ld(t, i, "v");
  // The same name, type and values again (code decoding a second group): the first table.
  ir::Table again = b.table("grid", Type::u32(), {1, 2, 0xFFFFFFFF});
  CHECK(again.index == t.index);
  Value w = b.table_ld(again, b.u32(2), "w");
  b.store(g, v + w);
  b.ret();
  CHECK(b.ok());
  CHECK(m.kernels[0].tables.size() == 1);
  CHECK(ir::print(m, m.kernels[0]) == R"(kernel @grid(%g: ptr.global, %i: u32) {
  table @grid: u32[3] = [
    0x1, 0x2, 0xFFFFFFFF
  ]
^entry:
  %v = table.ld @grid, %i : u32
  %0 = const 2 : u32
  %w = table.ld @grid, %0 : u32
  %1 = add %v, %w : u32
  st %g, %1 : u32
  ret
}
)");
  checkWellFormed(m);

  // Other values under that name are an error at the second declaration; so is a table the
  // verifier refuses (an element type, a value too wide), at the declaration's line.
  ir::Module bad = sm80();
  KernelBuilder c(bad, "bad");
  c.table("grid", Type::u32(), {1});
  c.table("grid", Type::u32(), {2});
  CHECK_FALSE(c.ok());
  CHECK(errorsOf(c.diagnostics()).find("table '@grid' declared again with other contents") != std::string::npos);
  ir::Module wide = sm80();
  KernelBuilder d(wide, "wide");
  d.table("narrow", Type::of(ir::Scalar::U16), {0x10000});
  d.table("signed", Type::s32(), {1});
  d.ret();
  ir::Diagnostics vd;
  ir::verify(wide, vd);
  CHECK(errorsOf(vd).find("table '@narrow' has a value wider than its element type 'u16'") != std::string::npos);
  CHECK(errorsOf(vd).find("table '@signed' holds 's32'; tables hold u16, u32, u64, b16, b32 or b64 elements") !=
        std::string::npos);
}

TEST_CASE("builder: cvt picks the rounding PTX requires") {
  ir::Module m = sm80();
  KernelBuilder b(m, "conv");
  Value f = b.param(Type::f32(), "f");
  Value u = b.param(Type::u32(), "u");
  Value out = b.param(kGlobalPtr, "out");
  b.store(out, b.cvt(f, Type::s32(), "to_int"));
  b.store(out, b.cvt(u, Type::f32(), "to_float"));
  Value h = b.cvt(f, Type::of(ir::Scalar::F16), "narrow");
  b.store(out, b.cvt(h, Type::f32(), "widen"));
  b.store(out, b.cvt(f, Type::f32(), {Mod::Rni}, "rounded"));
  b.store(out, b.cvt(u, Type::u64(), "zext"));
  b.ret();
  const ir::Kernel& k = m.kernels[0];
  std::vector<std::string> lines;
  std::istringstream text(ir::print(m, k));
  for (std::string line; std::getline(text, line);)
    if (line.find(" = cvt") != std::string::npos) lines.push_back(line);
  CHECK(lines == std::vector<std::string>{
                     "  %to_int = cvt.rzi %f : f32 -> s32",
                     "  %to_float = cvt.rn %u : u32 -> f32",
                     "  %narrow = cvt.rn %f : f32 -> f16",
                     "  %widen = cvt %narrow : f16 -> f32",
                     "  %rounded = cvt.rni %f : f32 -> f32",
                     "  %zext = cvt %u : u32 -> u64",
                 });
  checkWellFormed(m);
}

TEST_CASE("builder: warp_reduce over a sub-warp width") {
  ir::Module m = sm80();
  KernelBuilder b(m, "wmax");
  Value out = b.param(kGlobalPtr, "out");
  Value v = b.cvt(b.laneid("lane"), Type::f32(), "v");
  Value r = b.warp_reduce(ir::Op::Max, v, 4, "m");
  b.store(out, r);
  b.ret();
  CHECK(ir::print(m, m.kernels[0]) == R"(kernel @wmax(%out: ptr.global) {
^entry:
  %lane = laneid : u32
  %v = cvt.rn %lane : u32 -> f32
  %m.mask = const 4294967295 : b32
  %m.clamp = const 31 : b32
  %m.o2 = const 2 : b32
  %m.s2 = shfl.sync.bfly %v, %m.o2, %m.clamp, %m.mask : f32
  %m.r2 = max %v, %m.s2 : f32
  %m.o1 = const 1 : b32
  %m.s1 = shfl.sync.bfly %m.r2, %m.o1, %m.clamp, %m.mask : f32
  %m = max %m.r2, %m.s1 : f32
  st %out, %m : f32
  ret
}
)");
  checkWellFormed(m);
}

TEST_CASE("builder: block_reduce with a warp count that is not a power of two") {
  ir::Module m = sm80();
  KernelBuilder b(m, "bmax");
  Value out = b.param(kGlobalPtr, "out");
  b.reqntid(96);
  ir::SharedArray scratch = b.shared("scratch", Type::f32(), 3);
  Value v = b.cvt(b.tid(Mod::X, "t"), Type::f32(), "v");
  Value r = b.block_reduce_max(v, scratch, "m");
  b.store(out, r);
  b.ret();
  CHECK(b.ok());
  std::string text = ir::print(m, m.kernels[0]);
  // Three warps: lanes read partial[min(lane & 3, 2)] and lane 3 of each group of four gets
  // max's identity, -inf.
  for (const char* line : {
           "  %m.cw = const 3 : u32\n  %m.idx = and %m.lane, %m.cw : u32\n",
           "  %m.warps = const 3 : u32\n  %m.in_range = setp.lt %m.idx, %m.warps : u32\n",
           "  %m.last = const 2 : u32\n  %m.safe = min %m.idx, %m.last : u32\n",
           "  %m.raw = ld %m.pslot : f32\n  %m.identity = const 0xFF800000 : f32\n"
           "  %m.part = selp %m.raw, %m.identity, %m.in_range : f32\n",
           "  %m.t2 = shfl.sync.bfly %m.part, %m.o2, %m.clamp, %m.mask : f32\n",
           "  %m = max %m.u2, %m.t1 : f32\n",
       })
    CHECK_MESSAGE(text.find(line) != std::string::npos, line);
  CHECK(text.find("bar.sync") != std::string::npos);
  checkWellFormed(m);
}

TEST_CASE("builder: the verifier reports type errors at the builder call's line") {
  ir::Module m = sm80();
  KernelBuilder b(m, "typed");
  Value x = b.param(Type::f32(), "x");
  Value out = b.param(kGlobalPtr, "out");
  unsigned remLine = __LINE__ + 1;
  Value r = b.rem(x, x, "r");  // rem is integer-only
  b.store(out, r);
  b.ret();
  CHECK(b.ok());  // the shape is fine; the type rule is the verifier's
  ir::Diagnostics vd;
  CHECK_FALSE(ir::verify(m, vd));
  REQUIRE(vd.errors() >= 1);
  const ir::Diagnostic& first = vd.all()[0];
  CHECK(first.file == "test/builder_test.cpp");
  CHECK(first.loc.line == remLine);
}

TEST_CASE("builder: misuse is reported at the caller's line") {
  ir::Module m = sm80();
  KernelBuilder b(m, "bad");
  Value x = b.param(Type::f32(), "x");
  Value n = b.param(Type::u32(), "n");

  unsigned ifLine = __LINE__ + 1;
  b.if_else(n == 0u, [&] { return x; }, [&] { return n; });
  unsigned loopLine = __LINE__ + 1;
  b.for_range(0u, n, 1u, {x}, [&](Value, std::span<Value>) { return std::vector<Value>{}; });
  unsigned opLine = __LINE__ + 1;
  b.op(ir::Op::Ex2, Type::f32(), {x});
  unsigned reduceLine = __LINE__ + 1;
  b.warp_reduce_sum(b.cvt(x, Type::of(ir::Scalar::F64)));
  unsigned emptyLine = __LINE__ + 1;
  b.add(Value(), x);
  b.ret();
  unsigned afterLine = __LINE__ + 1;
  b.bar_sync();

  CHECK_FALSE(b.ok());
  const auto& all = b.diagnostics().all();
  REQUIRE(all.size() == 6);
  auto check = [&](size_t i, unsigned line, const char* msg) {
    CHECK(all[i].file == "test/builder_test.cpp");
    CHECK(all[i].loc.line == line);
    CHECK(all[i].message == msg);
  };
  check(0, ifLine, "if_else branches yield different values: (f32) and (u32)");
  check(1, loopLine, "for_range body returned 0 value(s) for 1 carried value(s)");
  check(2, opLine, "'ex2' needs a .Round modifier");
  check(3, reduceLine, "warp shuffles move 32-bit values, not f64");
  check(4, emptyLine, "use of an empty Value (a default-constructed handle or the result of a failed builder call)");
  check(5, afterLine, "'bar.sync' added after the terminator of block ^loop.exit");
}

TEST_CASE("builder: ldmatrix, mma and cvt_pack build the tensor-core ops") {
  ir::Module m = sm80();
  KernelBuilder b(m, "tc");
  Value out = b.param(kGlobalPtr, "out", 16);
  Value s = b.param(kSharedPtr, "s");
  Value c = b.param(Type::of(ir::Scalar::F32, 4), "c");
  Value x = b.param(Type::f32(), "x");
  Value a = b.ldmatrix(s, 4, false, "a");
  Value bt = b.ldmatrix(s, 2, true, "bt");
  Value d = b.mma(Mod::M16n8k16, ir::Scalar::BF16, a, bt, c, "d");
  Value h = b.cvt_pack(ir::Scalar::BF16, x, x, Mod::Rn, "h");
  b.store(out, d);
  b.store(out, h);
  CHECK_FALSE(b.ldmatrix(s, 3).valid());
  b.ret();
  CHECK(d.type() == Type::of(ir::Scalar::F32, 4));
  CHECK(h.type() == Type::of(ir::Scalar::B32));
  CHECK(ir::print(m).find(R"(  %a = ldmatrix %s : v4.b32
  %bt = ldmatrix.trans %s : v2.b32
  %d = mma.m16n8k16 %a, %bt, %c : bf16 -> f32
  %h = cvt.pack.rn %x, %x : f32 -> bf16
)") != std::string::npos);
}

TEST_CASE("builder: the transaction-barrier ops, elect.sync and fence.proxy.async (sm_90)") {
  ir::Module m;
  m.target = ir::Target{90, false};
  m.ptx = 80;
  KernelBuilder b(m, "bar");
  Value bar = b.param(kSharedPtr, "bar");
  Value n = b.param(Type::u32(), "n");
  b.mbarrier_init(bar, n);
  b.mbarrier_arrive(bar);
  b.mbarrier_arrive_expect_tx(bar, n);
  Value done = b.mbarrier_try_wait_parity(bar, n, "done");
  Value one = b.elect_sync(b.u32(0xffffffffu, "all"), "one");
  b.fence_proxy_async();
  b.ret();
  CHECK(done.type() == Type::pred());
  CHECK(one.type() == Type::pred());
  checkWellFormed(m);
  CHECK(ir::print(m).find(R"(  mbarrier.init %bar, %n
  mbarrier.arrive %bar
  mbarrier.arrive.expect_tx %bar, %n
  %done = mbarrier.try_wait.parity %bar, %n
  %all = const 4294967295 : u32
  %one = elect.sync %all
  fence.proxy.async
)") != std::string::npos);
}

TEST_CASE("builder: setmaxnreg and the wgmma group ops (sm_90a)") {
  ir::Module m;
  m.target = ir::Target{90, true};
  m.ptx = 80;
  KernelBuilder b(m, "wg");
  b.maxnreg(168);
  b.setmaxnreg(true, 232);
  b.setmaxnreg(false, 40);
  b.wgmma_fence();
  b.wgmma_commit_group();
  b.wgmma_wait_group(1);
  b.ret();
  checkWellFormed(m);
  CHECK(ir::print(m).find(R"(  setmaxnreg.inc 232
  setmaxnreg.dec 40
  wgmma.fence
  wgmma.commit_group
  wgmma.wait_group 1
)") != std::string::npos);
}

TEST_CASE("builder: the TMA ops take a tmap parameter, s32 coordinates and shared addresses (sm_90)") {
  ir::Module m;
  m.target = ir::Target{90, false};
  m.ptx = 80;
  KernelBuilder b(m, "tma");
  Value map = b.param(Type::of(ir::Scalar::TensorMap), "a_map");
  Value tile = b.param(kSharedPtr, "tile");
  Value bar = b.param(kSharedPtr, "bar");
  Value x = b.param(Type::s32(), "x");
  Value y = b.param(Type::s32(), "y");
  b.tma_load_2d(tile, map, x, y, bar);
  b.tma_store_2d(map, x, y, tile);
  b.bulk_commit_group();
  b.bulk_wait_group_read(2);
  b.ret();
  checkWellFormed(m);
  CHECK(ir::print(m).find(R"(kernel @tma(%a_map: tmap, %tile: ptr.shared, %bar: ptr.shared, %x: s32, %y: s32) {
^entry:
  cp.async.bulk.tensor.2d %tile, %a_map, %x, %y, %bar
  cp.async.bulk.tensor.2d.store %a_map, %x, %y, %tile
  cp.async.bulk.commit_group
  cp.async.bulk.wait_group.read 2
  ret
}
)") != std::string::npos);
}
