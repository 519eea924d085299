// The interpreter's lane loops for integer, bit and predicate ops (their semantics are those of
// ir/LaneSemantics.h), for data movement (selp, ptradd, bitcast, pack, extract) and for atomics,
// and the choice of lane loop for every pure op (floating point and cvt: InterpFloat.cpp).
// Registers hold a value's bits zero-extended to 64 and every result is truncated to its type's
// width; integer division by zero is a fault.
#include <bit>

#include "backends/interp/InterpImpl.h"
#include "ir/LaneSemantics.h"

namespace tn::interp::detail {

uint64_t floatAtomic(const Code& k, uint64_t old, uint64_t b, bool ftz);

namespace {

using ir::Mod;
using ir::Op;
using ir::Scalar;
namespace lane = ir::lane;

struct Selp {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b, uint64_t c) { return (c & 1) ? a : b; }
};
struct PtrAdd64 {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b) { return (a & ~kOffsetMask) | ((a + b) & kOffsetMask); }
};
struct PtrAdd32 {
  static uint64_t eval(const Code&, uint64_t a, uint64_t b) { return static_cast<uint32_t>(a + b); }
};

bool is32BitSpace(ir::AddrSpace s) { return s == ir::AddrSpace::Shared || s == ir::AddrSpace::Local; }

// Same-size bitcasts copy bits. Between pointers of different widths, a shared offset becomes a
// generic pointer tagged as shared, and back.
struct CvtTf32 {
  static uint64_t eval(const Code&, uint64_t a) { return lane::roundTf32(a); }
};

struct CvtF16x2Fp8 {
  static uint64_t eval(const Code& k, uint64_t a) { return lane::cvtF16x2Fp8(k.mode == Mod::E4m3Mod, a); }
};

struct Bitcast {
  static uint64_t eval(const Code& k, uint64_t a) {
    if (k.srcScalar != Scalar::Ptr || k.scalar != Scalar::Ptr) return a;
    bool from32 = is32BitSpace(k.srcSpace), to32 = is32BitSpace(k.space);
    if (from32 && !to32) return k.srcSpace == ir::AddrSpace::Shared ? (kSharedTag << kTagShift) | a : a;
    if (!from32 && to32) return static_cast<uint32_t>(a);
    return a;
  }
};

// Bit permutation and logic: prmt, lop3 (ir/LaneSemantics.h); the mode and the truth table are
// the Code's mode and immediate.
struct Prmt {
  static uint64_t eval(const Code& k, uint64_t a, uint64_t b, uint64_t c) {
    return lane::prmt(static_cast<uint32_t>(a), static_cast<uint32_t>(b), static_cast<uint32_t>(c), k.mode);
  }
};
struct Lop3 {
  static uint64_t eval(const Code& k, uint64_t a, uint64_t b, uint64_t c) {
    return lane::lop3(static_cast<uint32_t>(a), static_cast<uint32_t>(b), static_cast<uint32_t>(c),
                      static_cast<uint8_t>(k.imm));
  }
};

int packLoop(uint64_t* regs, uint32_t mask, const Code& k) {
  const unsigned eb = ir::scalarBits(k.scalar);
  const unsigned slots = (k.lanes * eb + 63) / 64;
  const uint64_t elemMask = lane::lowMask(eb);
  forLanes(mask, [&](uint32_t l) {
    uint64_t v[4] = {0, 0, 0, 0};
    for (unsigned i = 0; i < k.lanes; ++i) {
      unsigned bit = i * eb;
      v[bit / 64] |= (slotPtr(regs, k.src[i])[l] & elemMask) << (bit % 64);
    }
    for (unsigned s = 0; s < slots; ++s) slotPtr(regs, k.dst + s)[l] = v[s];
  });
  return -1;
}

int extractLoop(uint64_t* regs, uint32_t mask, const Code& k) {
  const unsigned eb = ir::scalarBits(k.scalar);
  const unsigned bit = static_cast<unsigned>(k.imm) * eb;
  const uint64_t elemMask = lane::lowMask(eb);
  uint64_t* d = slotPtr(regs, k.dst);
  const uint64_t* a = slotPtr(regs, k.src[0] + bit / 64);
  forLanes(mask, [&](uint32_t l) { d[l] = (a[l] >> (bit % 64)) & elemMask; });
  return -1;
}

// Integer, bits and pred ops: the lane loop of their lane::withIntOp semantics.
ComputeFn intOp(const Code& k) {
  return lane::withIntType(k.scalar, [&]<class T>() {
    return lane::withIntOp<T>(k.op, k.mode, k.sat, []<class L>() -> ComputeFn { return laneLoop<L>(); });
  });
}

}  // namespace

ComputeFn selectCompute(const Code& k, std::string& why) {
  ComputeFn fn = nullptr;
  switch (k.op) {
    case Op::Cvt:
    case Op::CvtPack: return selectCvt(k, why);
    case Op::Bitcast: fn = &lanesLoop<Bitcast, 1>; break;
    case Op::CvtTf32: fn = &lanesLoop<CvtTf32, 1>; break;
    case Op::CvtF16x2Fp8: fn = &lanesLoop<CvtF16x2Fp8, 1>; break;
    case Op::PtrAdd: fn = is32BitSpace(k.space) ? &lanesLoop<PtrAdd32, 2> : &lanesLoop<PtrAdd64, 2>; break;
    case Op::Pack: fn = &packLoop; break;
    case Op::Extract: fn = &extractLoop; break;
    case Op::Selp: fn = &lanesLoop<Selp, 3>; break;
    case Op::Prmt: fn = &lanesLoop<Prmt, 3>; break;
    case Op::Lop3: fn = &lanesLoop<Lop3, 3>; break;
    default:
      if (ir::Type::of(k.scalar).isFloat()) return selectFloat(k, why);
      fn = intOp(k);
      break;
  }
  if (!fn)
    why = "'" + std::string(ir::info(k.op).name) + (k.mode != Mod::None ? "." + std::string(ir::modName(k.mode)) : "") +
          "' has no semantics for type " + std::string(ir::scalarName(k.scalar));
  return fn;
}

// inc and dec exist only as atomics; add, and, or, xor, min and max are the ops of the same name.
uint64_t atomicResult(const Code& k, uint64_t old, uint64_t b, uint64_t c, bool ftz) {
  const Scalar s = k.scalar;
  const uint64_t mask = lane::lowMask(ir::scalarBits(s));
  if (k.op == Op::AtomCas) return (old & mask) == (b & mask) ? c : old;
  switch (k.mode) {
    case Mod::AExch: return b;
    case Mod::AInc: return old >= b ? 0 : (old + 1) & mask;
    case Mod::ADec: return (old == 0 || old > b) ? b : old - 1;
    default: break;
  }
  if (ir::Type::of(s).isFloat()) return floatAtomic(k, old, b, ftz);
  Op op = k.mode == Mod::AAdd ? Op::Add
          : k.mode == Mod::AAnd ? Op::And
          : k.mode == Mod::AOr  ? Op::Or
          : k.mode == Mod::AXor ? Op::Xor
          : k.mode == Mod::AMin ? Op::Min
                                : Op::Max;
  return lane::withIntType(s, [&]<class T>() {
    return lane::withIntOp<T>(op, Mod::None, false, [&]<class L>() -> uint64_t {
      if constexpr (L::arity == 2) return L::eval(old, b);
      return old;
    });
  });
}

}  // namespace tn::interp::detail
