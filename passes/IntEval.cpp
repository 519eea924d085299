// Compile-time integer evaluation (passes/IntEval.h): ir/LaneSemantics.h behind the rules of what
// const-fold and ThreadEval may evaluate.
#include "passes/IntEval.h"

#include "ir/LaneSemantics.h"

namespace tn::passes {

using ir::Mod;
using ir::Op;
using ir::Type;
namespace lane = ir::lane;

std::optional<uint64_t> evalInt(const ir::Inst& in, Type t, std::span<const uint64_t> x) {
  if (in.has(Mod::SatMod) || in.mod(ir::ModGroup::Round) != Mod::None || in.op == Op::Dp4a) return std::nullopt;
  auto u32 = [&](size_t i) { return static_cast<uint32_t>(x[i]); };
  if (in.op == Op::Prmt && x.size() == 3) return lane::prmt(u32(0), u32(1), u32(2), in.mod(ir::ModGroup::Prmt));
  if (in.op == Op::Lop3 && x.size() == 3) return lane::lop3(u32(0), u32(1), u32(2), static_cast<uint8_t>(in.imm));
  return lane::withIntType(t.scalar, [&]<class T>() {
    return lane::withIntOp<T>(in.op, in.mod(ir::ModGroup::Cmp), false, [&]<class L>() -> std::optional<uint64_t> {
      if (x.size() != L::arity) return std::nullopt;
      if constexpr (L::divides) {
        if (!L::specified(x[0], x[1])) return std::nullopt;
      }
      if constexpr (L::arity == 1) return L::eval(x[0]);
      else if constexpr (L::arity == 2) return L::eval(x[0], x[1]);
      else return L::eval(x[0], x[1], x[2]);
    });
  });
}

std::optional<uint64_t> convertInt(uint64_t bits, Type s, Type t) {
  return lane::withConvertInt(s.scalar, t.scalar, false,
                              [&]<class L>() -> std::optional<uint64_t> { return L::eval(bits); });
}

}  // namespace tn::passes
