// A kernel template of this project, written with truenoc's builder API like the library's own
// (kernels/Template.h): y[i] = a * x[i] + y[i] over vectors stored as f32, bf16 or f16 (math in
// f32), one thread per element. The generator is truenoc with this template added.
#include "compiler/Generator.h"
#include "ir/Builder.h"
#include "kernels/Library.h"

namespace {

namespace kn = tn::kernels;
using tn::ir::KernelBuilder;
using tn::ir::Mod;
using tn::ir::Type;
using tn::ir::Value;

std::optional<tn::ir::Module> buildSaxpy(const kn::Options& o, tn::ir::Diagnostics& diags) {
  const kn::lib::Storage s = kn::lib::storageOption(o);
  tn::ir::Module m = kn::lib::newModule();
  KernelBuilder kb(m, "saxpy");
  Value x = kb.param(kn::lib::kGlobalPtr, "x");
  Value y = kb.param(kn::lib::kGlobalPtr, "y");
  Value a = kb.param(Type::f32(), "a");
  Value n = kb.param(Type::u32(), "n");
  kb.reqntid(static_cast<unsigned>(o.integer("block")));

  Value i = kb.mad(kb.ctaid(Mod::X, "ctaid"), kb.ntid(Mod::X, "ntid"), kb.tid(Mod::X, "tid"), "i");
  kb.if_then((i < n).named("inside"), [&] {
    Value off = kb.byte_offset(i, kn::lib::bytesOf(s), tn::ir::AddrSpace::Global, "off");
    Value px = kb.ptradd(x, off, "px"), py = kb.ptradd(y, off, "py");
    Value xv = kn::lib::loadF32(kb, px, s, /*readOnly=*/true, "xv");
    Value yv = kn::lib::loadF32(kb, py, s, /*readOnly=*/false, "yv");
    kn::lib::storeF32(kb, py, kb.fma(a, xv, yv, "r"), s);
  });
  kb.ret();
  return kn::lib::finish(kb, m, diags);
}

kn::Template saxpyTemplate() {
  kn::OptionSpec block = kn::lib::option("block", int64_t{256}, "threads per block");
  block.min = 32;
  block.max = 1024;
  block.multipleOf = 32;
  kn::Template t{"saxpy",
                 "y[i] = a * x[i] + y[i] for i < n; one thread per element (an example project's own template)",
                 {block, kn::lib::dtypeOption()},
                 buildSaxpy,
                 [](const kn::Options& o) {
                   auto threads = static_cast<uint32_t>(o.integer("block"));
                   return kn::LaunchRule{{threads}, {ceilDiv(kn::Expr::param("n"), threads)}, 0};
                 }};
  // What the bundle records of x and y: their element type (bf16 and f16 are read as raw 16-bit
  // words, which do not tell it) and their extent, n elements each.
  t.elements = kn::lib::storageElements({"x", "y"});
  t.extents = kn::lib::sameExtent({"x", "y"}, kn::Expr::param("n"));
  return t;
}

}  // namespace

int main(int argc, char** argv) { return tn::generator::run(argc, argv, {saxpyTemplate()}); }
