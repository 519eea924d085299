#include "kernels/Examples.h"

#include "kernels/Library.h"

namespace tn::kernels {

using ir::KernelBuilder;
using ir::Mod;
using ir::Type;
using ir::Value;

using lib::kGlobalPtr;
using lib::newModule;

ir::Module buildVaddModule() {
  ir::Module m = newModule();
  KernelBuilder kb(m, "vadd");
  Value a = kb.param(kGlobalPtr, "a");
  Value b = kb.param(kGlobalPtr, "b");
  Value c = kb.param(kGlobalPtr, "c");
  Value n = kb.param(Type::u32(), "n");
  kb.maxntid(256);

  Value tid = kb.tid(Mod::X, "tid");
  Value ctaid = kb.ctaid(Mod::X, "ctaid");
  Value ntid = kb.ntid(Mod::X, "ntid");
  Value i = kb.mad(ctaid, ntid, tid, "i");
  kb.if_then(
      (i < n).named("inside"),
      [&] {
        Value off = kb.byte_offset(i, 4, ir::AddrSpace::Global, "off");
        Value x = kb.load(kb.ptradd(a, off, "pa"), Type::f32(), "x");
        Value y = kb.load(kb.ptradd(b, off, "pb"), Type::f32(), "y");
        Value sum = (x + y).named("sum");
        kb.store(kb.ptradd(c, off, "pc"), sum);
      },
      "in_range");
  kb.ret();
  return m;
}

ir::Module buildRowSumModule() {
  ir::Module m = newModule();
  KernelBuilder kb(m, "row_sum");
  Value x = kb.param(kGlobalPtr, "x");
  Value y = kb.param(kGlobalPtr, "y");
  Value cols = kb.param(Type::u32(), "cols");
  kb.reqntid(256);
  ir::SharedArray partial = kb.shared("partial", Type::f32(), 256 / 32);

  Value tid = kb.tid(Mod::X, "tid");
  Value row = kb.ctaid(Mod::X, "row");
  // The row's first element is x + row * cols * 4, computed in 64 bits.
  Value xrow = kb.index(x, kb.mul_wide(row, cols, "row_off"), 4, "xrow");
  Value zero = kb.f32(0.0f, "zero");
  Value stride = kb.u32(256, "stride");
  std::vector<Value> acc = kb.for_range(
      tid, cols, stride, {zero},
      [&](Value i, std::span<Value> carried) {
        Value v = kb.load(kb.index(xrow, i, 4, "p"), Type::f32(), {Mod::NcMod}, "v");
        return (carried[0] + v).named("acc.next");
      },
      {.carried = {"acc"}});
  Value total = kb.block_reduce_sum(acc[0], partial, "total");
  kb.if_then((tid == 0u).named("first"), [&] { kb.store(kb.index(y, row, 4, "py"), total); }, "write");
  kb.ret();
  return m;
}

}  // namespace tn::kernels
