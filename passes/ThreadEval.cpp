#include "passes/ThreadEval.h"

#include <algorithm>

#include "ir/LaneSemantics.h"
#include "passes/IntEval.h"
#include "passes/Rewrite.h"

namespace tn::passes {

using ir::Mod;
using ir::Op;

// ---- layout -----------------------------------------------------------------------------------

ThreadLayout ThreadLayout::of(const Kernel& k) {
  ThreadLayout l;
  if (k.reqntid && k.reqntid->total() <= 1024) {
    l.dims = *k.reqntid;
    l.known = l.exactNtid = l.hasY = l.hasZ = true;
  } else if (k.maxntid && k.maxntid->y == 1 && k.maxntid->z == 1 && k.maxntid->x <= 1024) {
    l.dims = *k.maxntid;
    l.known = l.hasY = l.hasZ = true;  // tid.y = tid.z = 0
  }
  return l;
}

bool ThreadValue::invariant() const {
  return std::adjacent_find(perThread.begin(), perThread.end(), std::not_equal_to<>()) == perThread.end();
}

bool ThreadValue::offsetLike() const {
  constexpr int64_t kLimit = int64_t{1} << 40;
  return std::all_of(perThread.begin(), perThread.end(), [](int64_t v) { return v > -kLimit && v < kLimit; });
}

// ---- thread evaluator -------------------------------------------------------------------------

namespace {

constexpr unsigned kMaxDepth = 256;

// Two's-complement arithmetic without signed overflow (the IR's integers wrap).
int64_t wrapAdd(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
int64_t wrapMul(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }

std::vector<SymTerm> combine(const std::vector<SymTerm>& a, const std::vector<SymTerm>& b, int64_t scaleB) {
  std::map<uint64_t, int64_t> sum;
  for (const SymTerm& t : a) sum[t.key] = wrapAdd(sum[t.key], t.coef);
  for (const SymTerm& t : b) sum[t.key] = wrapAdd(sum[t.key], wrapMul(scaleB, t.coef));
  std::vector<SymTerm> out;
  for (auto [key, coef] : sum)
    if (coef) out.push_back({key, coef});
  return out;
}

std::vector<SymTerm> scaled(const std::vector<SymTerm>& a, int64_t by) { return combine({}, a, by); }

// The canonical int64 form of `bits` for type t: sign-extended for signed, zero-extended else.
int64_t canonical(uint64_t bits, ir::Type t) {
  unsigned w = t.isPred() ? 1 : t.bits();
  return t.isSigned() ? ir::lane::signExtend(bits, w) : static_cast<int64_t>(bits & ir::lane::lowMask(w));
}

}  // namespace

ThreadEval::ThreadEval(const Kernel& k, ThreadLayout layout, std::function<bool(ValueId)> isUniform)
    : k_(k), layout_(layout), isUniform_(std::move(isUniform)) {}

const ThreadValue* ThreadEval::get(ValueId v) { return getAt(v, 0); }

const ThreadValue* ThreadEval::getAt(ValueId v, unsigned depth) {
  if (memo_.empty()) {
    memo_.resize(k_.values.size());
    seen_.assign(k_.values.size(), false);
  }
  if (seen_[v.index]) return memo_[v.index] ? &*memo_[v.index] : nullptr;
  if (depth > kMaxDepth) return nullptr;
  seen_[v.index] = true;  // a cycle through v (invalid SSA) evaluates to "unknown"
  std::optional<ThreadValue> r = compute(v, depth);
  memo_[v.index] = std::move(r);
  return memo_[v.index] ? &*memo_[v.index] : nullptr;
}

std::optional<ThreadValue> ThreadEval::compute(ValueId v, unsigned depth) {
  const unsigned n = layout_.threads();
  auto leaf = [&]() -> std::optional<ThreadValue> {
    if (!isUniform_(v)) return std::nullopt;
    return ThreadValue{std::vector<int64_t>(n, 0), {{v.index, 1}}};
  };
  const ir::Inst* in = definingInst(k_, v);
  ir::Type rt = k_.typeOf(v);
  if (!in || rt.isVector() || rt.isFloat()) return leaf();
  auto constant = [&](int64_t c) { return ThreadValue{std::vector<int64_t>(n, c), {}}; };
  auto coord = [&](Mod dim) -> std::optional<ThreadValue> {
    ThreadValue tv{std::vector<int64_t>(n), {}};
    const ir::Dim3& d = layout_.dims;
    if ((dim == Mod::Y && !layout_.hasY) || (dim == Mod::Z && !layout_.hasZ)) return std::nullopt;
    for (unsigned i = 0; i < n; ++i)
      tv.perThread[i] = dim == Mod::X ? i % d.x : dim == Mod::Y ? (i / d.x) % d.y : i / (d.x * d.y);
    return tv;
  };
  switch (in->op) {
    case Op::Const:
      return constant(canonical(in->imm, rt));
    case Op::Tid:
      return coord(in->mod(ir::ModGroup::Dim));
    case Op::Ntid:
      if (!layout_.exactNtid) return leaf();
      {
        Mod d = in->mod(ir::ModGroup::Dim);
        return constant(d == Mod::X ? layout_.dims.x : d == Mod::Y ? layout_.dims.y : layout_.dims.z);
      }
    case Op::Laneid: {
      if (!layout_.known) return std::nullopt;
      ThreadValue tv{std::vector<int64_t>(n), {}};
      for (unsigned i = 0; i < n; ++i) tv.perThread[i] = i % 32;
      return tv;
    }
    case Op::SharedAddr: {
      if (in->symbol < 0 || static_cast<size_t>(in->symbol) >= k_.shared.size()) return std::nullopt;
      uint64_t key = k_.shared[in->symbol].dynamic ? kDynamicSharedKey : kSharedKey | static_cast<uint64_t>(in->symbol);
      return ThreadValue{std::vector<int64_t>(n, 0), {{key, 1}}};
    }
    default:
      break;
  }
  if (!ir::hasFlag(in->op, ir::OF_PURE)) return leaf();
  std::vector<const ThreadValue*> x;
  for (ValueId o : in->operands) {
    const ThreadValue* tv = getAt(o, depth + 1);
    if (!tv) return leaf();
    x.push_back(tv);
  }
  ir::Type t = in->type ? *in->type : rt;  // the operand type
  auto linear = [&](const ThreadValue& a, const ThreadValue& b, int64_t sign) {
    ThreadValue r{std::vector<int64_t>(n), combine(a.uniform, b.uniform, sign)};
    for (unsigned i = 0; i < n; ++i) r.perThread[i] = wrapAdd(a.perThread[i], wrapMul(sign, b.perThread[i]));
    return r;
  };
  // Exact per-thread semantics when no uniform term is involved.
  auto exact = [&]() -> std::optional<ThreadValue> {
    for (const ThreadValue* tv : x)
      if (!tv->uniform.empty()) return std::nullopt;
    ThreadValue r{std::vector<int64_t>(n), {}};
    std::vector<uint64_t> bits(x.size());
    for (unsigned i = 0; i < n; ++i) {
      for (size_t j = 0; j < x.size(); ++j) bits[j] = static_cast<uint64_t>(x[j]->perThread[i]);
      std::optional<uint64_t> out;
      if (in->op == Op::Cvt && in->srcType && !in->srcType->isFloat() && !t.isFloat() &&
          in->mod(ir::ModGroup::Round) == Mod::None && !in->has(Mod::SatMod))
        out = convertInt(bits[0], *in->srcType, t);
      else if ((in->op == Op::Bitcast || in->op == Op::PtrAdd) && !t.isFloat())
        out = in->op == Op::Bitcast ? bits[0] : bits[0] + bits[1];
      else if (in->op == Op::Selp)
        out = bits[2] & 1 ? bits[0] : bits[1];
      else if (!t.isFloat())
        out = evalInt(*in, t, bits);
      if (!out) return std::nullopt;
      r.perThread[i] = canonical(*out, rt);
    }
    return r;
  };
  if (auto r = exact()) return r;
  // With uniform terms: the linear ops, assuming no wrap-around (addresses and indices).
  switch (in->op) {
    case Op::Add:
    case Op::PtrAdd:
      return linear(*x[0], *x[1], 1);
    case Op::Sub:
      return linear(*x[0], *x[1], -1);
    case Op::Mul:
    case Op::MulWide:
    case Op::Mad:
    case Op::Shl: {
      // One side must be the same constant in every thread; shl only scales by its amount.
      auto isConst = [](const ThreadValue* tv) { return tv->uniform.empty() && tv->invariant(); };
      const ThreadValue* a = x[0];
      const ThreadValue* b = x[1];
      if (!isConst(b)) {
        if (in->op == Op::Shl || !isConst(a)) return leaf();
        std::swap(a, b);
      }
      int64_t c = b->perThread.empty() ? 0 : b->perThread[0];
      if (in->op == Op::Shl) {
        if (c < 0 || c > 32) return leaf();
        c = int64_t{1} << c;
      }
      ThreadValue r{std::vector<int64_t>(n), scaled(a->uniform, c)};
      for (unsigned i = 0; i < n; ++i) r.perThread[i] = wrapMul(a->perThread[i], c);
      if (in->op == Op::Mad) return linear(r, *x[2], 1);
      return r;
    }
    case Op::Cvt:
    case Op::Bitcast:
      if (in->srcType && !in->srcType->isFloat() && !t.isFloat() && in->srcType->bits() <= t.bits())
        return *x[0];
      return leaf();
    case Op::Setp: {
      if (x[0]->uniform != x[1]->uniform) return leaf();
      ThreadValue r{std::vector<int64_t>(n), {}};
      for (unsigned i = 0; i < n; ++i) {
        int64_t a = x[0]->perThread[i], b = x[1]->perThread[i];
        bool c;
        switch (in->mod(ir::ModGroup::Cmp)) {
          case Mod::Eq: c = a == b; break;
          case Mod::Ne: c = a != b; break;
          case Mod::Lt: c = a < b; break;
          case Mod::Le: c = a <= b; break;
          case Mod::Gt: c = a > b; break;
          case Mod::Ge: c = a >= b; break;
          default: return leaf();
        }
        r.perThread[i] = c;
      }
      return r;
    }
    case Op::Selp: {
      if (!x[2]->uniform.empty()) return leaf();
      if (x[2]->invariant()) return x[2]->perThread.empty() || x[2]->perThread[0] ? *x[0] : *x[1];
      if (x[0]->uniform != x[1]->uniform) return leaf();
      ThreadValue r{std::vector<int64_t>(n), x[0]->uniform};
      for (unsigned i = 0; i < n; ++i) r.perThread[i] = x[2]->perThread[i] ? x[0]->perThread[i] : x[1]->perThread[i];
      return r;
    }
    default:
      return leaf();
  }
}

std::vector<ThreadSet> activeThreads(const Kernel& k, const ir::DominatorTree& cfg, ThreadEval& eval) {
  size_t n = eval.layout().threads();
  std::vector<ThreadSet> active(k.blocks.size(), ThreadSet(n));
  if (k.blocks.empty()) return active;
  active[0].fill();
  for (BlockId x : cfg.reversePostOrder()) {
    if (x.index == 0) continue;
    ThreadSet& mine = active[x.index];
    for (BlockId p : cfg.predecessors(x)) {
      if (!cfg.reachable(p) || cfg.rpoIndex(p) >= cfg.rpoIndex(x)) continue;  // back edge
      const ir::Inst* term = k.terminator(p);
      const ThreadValue* cond = nullptr;
      bool taken = false;
      if (term && term->op == Op::Cbr && term->succs.size() == 2 && term->succs[0].block != term->succs[1].block) {
        cond = eval.get(term->operands[0]);
        if (cond && !cond->uniform.empty()) cond = nullptr;
        taken = term->succs[0].block == x;
      }
      if (!cond) {
        mine.addFrom(active[p.index]);
        continue;
      }
      ThreadSet holds(n);  // the threads whose condition is true
      for (size_t t = 0; t < n; ++t)
        if (cond->perThread[t]) holds.set(t);
      mine.addFrom(active[p.index], &holds, !taken);
    }
  }
  return active;
}

}  // namespace tn::passes
