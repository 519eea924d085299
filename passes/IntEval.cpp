#include "passes/IntEval.h"

#include <bit>

#include "passes/Rewrite.h"

namespace tn::passes {

using ir::Mod;
using ir::Op;
using ir::Type;

int64_t signExtend(uint64_t bits, unsigned w) {
  if (w >= 64) return static_cast<int64_t>(bits);
  uint64_t m = uint64_t{1} << (w - 1);
  bits &= lowMask(w);
  return static_cast<int64_t>((bits ^ m) - m);
}

uint64_t convertInt(uint64_t bits, Type s, Type t) {
  uint64_t v = s.isSigned() ? static_cast<uint64_t>(signExtend(bits, s.bits())) : bits & lowMask(s.bits());
  return v & lowMask(t.bits());
}

namespace {

std::optional<bool> intCompare(Mod cmp, uint64_t a, uint64_t b, Type t) {
  unsigned w = t.bits();
  bool sgn = t.isSigned();
  int64_t sa = signExtend(a, w), sb = signExtend(b, w);
  uint64_t ua = a & lowMask(w), ub = b & lowMask(w);
  switch (cmp) {
    case Mod::Eq: return ua == ub;
    case Mod::Ne: return ua != ub;
    case Mod::Lt: return sgn ? sa < sb : ua < ub;
    case Mod::Le: return sgn ? sa <= sb : ua <= ub;
    case Mod::Gt: return sgn ? sa > sb : ua > ub;
    case Mod::Ge: return sgn ? sa >= sb : ua >= ub;
    default: return std::nullopt;
  }
}

}  // namespace

std::optional<uint64_t> evalInt(const ir::Inst& in, Type t, std::span<const uint64_t> x) {
  if (in.has(Mod::SatMod) || in.mod(ir::ModGroup::Round) != Mod::None) return std::nullopt;
  unsigned w = t.isPred() ? 1 : t.bits();
  uint64_t m = lowMask(w);
  bool sgn = t.isSigned();
  auto sx = [&](uint64_t v) { return signExtend(v, w); };
  switch (in.op) {
    case Op::Add: return (x[0] + x[1]) & m;
    case Op::Sub: return (x[0] - x[1]) & m;
    case Op::Mul: return (x[0] * x[1]) & m;
    case Op::Mad: return (x[0] * x[1] + x[2]) & m;
    case Op::MulHi: {
      if (sgn) {
        __int128 p = static_cast<__int128>(sx(x[0])) * sx(x[1]);
        return static_cast<uint64_t>(p >> w) & m;
      }
      unsigned __int128 p = static_cast<unsigned __int128>(x[0] & m) * (x[1] & m);
      return static_cast<uint64_t>(p >> w) & m;
    }
    case Op::MulWide:
      if (sgn) return static_cast<uint64_t>(sx(x[0]) * sx(x[1])) & lowMask(2 * w);
      return ((x[0] & m) * (x[1] & m)) & lowMask(2 * w);
    case Op::Div:
    case Op::Rem: {
      if ((x[1] & m) == 0) return std::nullopt;
      if (sgn) {
        int64_t a = sx(x[0]), b = sx(x[1]);
        if (b == -1 && a == sx(uint64_t{1} << (w - 1))) return std::nullopt;
        return static_cast<uint64_t>(in.op == Op::Div ? a / b : a % b) & m;
      }
      return (in.op == Op::Div ? (x[0] & m) / (x[1] & m) : (x[0] & m) % (x[1] & m)) & m;
    }
    case Op::Min:
    case Op::Max: {
      bool less = sgn ? sx(x[0]) < sx(x[1]) : (x[0] & m) < (x[1] & m);
      return (in.op == Op::Min) == less ? x[0] & m : x[1] & m;
    }
    case Op::Neg: return (~x[0] + 1) & m;
    case Op::Abs: return (sx(x[0]) < 0 ? ~x[0] + 1 : x[0]) & m;
    case Op::And: return x[0] & x[1] & m;
    case Op::Or: return (x[0] | x[1]) & m;
    case Op::Xor: return (x[0] ^ x[1]) & m;
    case Op::Not: return ~x[0] & m;
    case Op::Shl: {
      uint64_t n = x[1] & 0xFFFFFFFFu;
      return n >= w ? 0 : (x[0] << n) & m;
    }
    case Op::Shr: {
      uint64_t n = x[1] & 0xFFFFFFFFu;
      if (sgn) return static_cast<uint64_t>(sx(x[0]) >> (n >= w ? w - 1 : n)) & m;
      return n >= w ? 0 : (x[0] & m) >> n;
    }
    case Op::Popc: return static_cast<uint64_t>(std::popcount(x[0] & m));
    case Op::Clz: return static_cast<uint64_t>(std::countl_zero(x[0] & m) - (64 - static_cast<int>(w)));
    case Op::Setp: {
      auto c = intCompare(in.mod(ir::ModGroup::Cmp), x[0], x[1], t);
      if (!c) return std::nullopt;
      return *c ? 1 : 0;
    }
    default: return std::nullopt;
  }
}

}  // namespace tn::passes
