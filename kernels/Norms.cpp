// layernorm, rmsnorm and residual_rmsnorm (docs/kernels.md). One block of 256 threads per row and
// one skeleton for all three: a first pass reduces the row (per-thread partials, merged across
// lanes with shuffles and across warps through shared memory), a second pass re-reads the row
// (an L2 hit) and writes y. Both passes move 16-byte vectors when every pointer is aligned and
// the row length is a multiple of the vector width, otherwise the same threads go element by
// element; the two passes take the same path, so every thread re-reads exactly what it wrote.
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "kernels/Library.h"

namespace tn::kernels::lib {

namespace {

using ir::Mod;
using ir::Op;
using ir::Type;

constexpr unsigned kBlock = 256;
constexpr unsigned kWarps = kBlock / 32;
// Chunks each thread loads per main-loop iteration, so that two loads per thread are in flight.
constexpr unsigned kUnroll = 2;
// At its default ~32 registers ptxas sinks half of the unrolled loads below their first use
// (residual_rmsnorm bf16's first pass, layernorm's second); 5 resident blocks (a limit of 48
// registers) keep them all in flight at 5 blocks of 8 warps per SM (docs/performance.md).
constexpr unsigned kMinBlocksPerSM = 5;
// rmsnorm's overflow-safe second sum of squares scales x by 2^-kScaleLog2: the largest f32
// (< 2^128) becomes < 2^38, whose square times 2^32 columns stays finite.
constexpr int kScaleLog2 = 90;

Value divRn(KernelBuilder& kb, Value a, Value b) { return kb.op(Op::Div, Type::f32(), {a, b}, {Mod::Rn}); }

// v rounded to storage type s and widened back: the value a store of v leaves in memory.
Value roundToStorage(KernelBuilder& kb, Value v, Storage s) {
  switch (s) {
    case Storage::F32: return v;
    case Storage::BF16: {
      Value bits = kb.cvt(kb.bitcast(kb.cvt(v, Type::of(ir::Scalar::BF16)), Type::of(ir::Scalar::U16)), Type::u32());
      return kb.bitcast(bits << 16u, Type::f32());
    }
    case Storage::F16: return kb.cvt(kb.cvt(v, Type::of(ir::Scalar::F16)), Type::f32());
  }
  return v;
}

// Pairwise sum: exact for equal values when the count is a power of two, and more accurate.
// Products that feed sums are written as fma throughout, so fma-fusion finds nothing to contract
// and -O0 and -O2 compute bit-identical results.
Value treeSum(std::vector<Value> v) {
  while (v.size() > 1) {
    std::vector<Value> next;
    for (size_t i = 0; i + 1 < v.size(); i += 2) next.push_back(v[i] + v[i + 1]);
    if (v.size() % 2) next.push_back(v.back());
    v = std::move(next);
  }
  return v[0];
}

// The tensors of one path (scalar: width 1, vector: width vecElems) at chunk c of the row.
struct Path {
  KernelBuilder& kb;
  Storage s;
  unsigned width;
  std::vector<Value> bases;  // per tensor: the row start, or the parameter for per-column ones

  Value at(unsigned t, Value c) const {
    return width == 1 ? kb.index(bases[t], c, bytesOf(s)) : kb.index(bases[t], c, 16);
  }
  std::vector<Value> load(unsigned t, Value c, bool readOnly) const {
    if (width == 1) return {loadF32(kb, at(t, c), s, readOnly)};
    return loadVecF32(kb, at(t, c), s, readOnly);
  }
  void store(unsigned t, Value c, const std::vector<Value>& v) const {
    if (width == 1) storeF32(kb, at(t, c), v[0], s);
    else storeVecF32(kb, at(t, c), v, s);
  }
  // Stores v and returns what memory now holds, as f32.
  std::vector<Value> storeRounded(unsigned t, Value c, const std::vector<Value>& v) const {
    if (width != 1) return storeVecF32Stored(kb, at(t, c), v, s);
    Value r = roundToStorage(kb, v[0], s);
    storeF32(kb, at(t, c), r, s);
    return {r};
  }
};

// What a pass does with one chunk: load it (all loads of an unrolled iteration are issued before
// any use), then fold it into the carried values.
using LoadFn = std::function<std::vector<Value>(const Path&, Value c)>;
using UseFn =
    std::function<std::vector<Value>(const Path&, Value c, const std::vector<Value>& loaded, std::span<Value> carried)>;

// The block's row and how its threads walk it.
struct Row {
  KernelBuilder& kb;
  Storage s;
  Value tid, cols, vector;
  std::vector<Value> ptrs;

  // Thread tid takes chunks tid, tid + 256, ...; returns the carried values after the last one.
  std::vector<Value> pass(std::vector<Value> init, const LoadFn& load, const UseFn& use, const std::string& label) const {
    auto walk = [&](unsigned width) {
      Path p{kb, s, width, {}};
      for (Value ptr : ptrs) p.bases.push_back(width == 1 ? ptr : assumeAligned16(kb, ptr));
      Value n = width == 1 ? cols : cols >> static_cast<uint32_t>(std::countr_zero(width));
      constexpr unsigned step = kBlock * kUnroll;
      Value nmain = (n - n % step).named(label + ".nmain");
      std::vector<Value> carried = kb.for_range(
          tid, nmain, kb.u32(step), init,
          [&](Value i, std::span<Value> acc) {
            std::vector<std::vector<Value>> loaded;
            for (unsigned j = 0; j < kUnroll; ++j) loaded.push_back(load(p, j == 0 ? i : i + kBlock * j));
            std::vector<Value> next(acc.begin(), acc.end());
            for (unsigned j = 0; j < kUnroll; ++j) next = use(p, j == 0 ? i : i + kBlock * j, loaded[j], next);
            return next;
          },
          {.label = label + ".main", .iv = "c"});
      return kb.for_range(
          nmain + tid, n, kb.u32(kBlock), carried,
          [&](Value c, std::span<Value> acc) { return use(p, c, load(p, c), acc); },
          {.label = label + ".tail", .iv = "c"});
    };
    return kb.if_else(vector, [&] { return walk(vecElems(s)); }, [&] { return walk(1); }, {.label = label + ".path"});
  }
};

enum class Kind { LayerNorm, RmsNorm, ResidualRmsNorm };

// Chan et al.'s merge of (count, mean, M2 = sum of squared deviations) summaries. Deviations
// are taken from each part's own mean, so a large common offset is removed before anything is
// squared instead of swamping the variance (as E[x^2] - E[x]^2 in f32 does); merging equal
// means is exact, so a constant row has M2 = 0 exactly.
std::vector<Value> chanMerge(KernelBuilder& kb, const std::vector<Value>& a, const std::vector<Value>& b) {
  Value na = a[0], ma = a[1], m2a = a[2], nb = b[0], mb = b[1], m2b = b[2];
  Value n = na + nb;
  Value delta = mb - ma;
  Value w = nb * rcpApprox(kb, kb.max(n, kb.f32(1.0f)));  // nb / n; 0 when nb is
  Value mean = kb.select(na == 0.0f, mb, kb.fma(delta, w, ma));
  Value m2 = kb.fma(delta, delta * (na * w), m2a + m2b);
  return {n, mean, m2};
}

std::optional<ir::Module> buildNorm(Kind kind, const Options& o, ir::Diagnostics& diags) {
  Storage s = storageOption(o);
  unsigned bytes = bytesOf(s), V = vecElems(s);
  const char* name = kind == Kind::LayerNorm ? "layernorm" : kind == Kind::RmsNorm ? "rmsnorm" : "residual_rmsnorm";
  ir::Module m = newModule();
  KernelBuilder kb(m, name);
  Value x = kb.param(kGlobalPtr, "x");
  Value residual, gamma, beta, weight;
  if (kind == Kind::ResidualRmsNorm) residual = kb.param(kGlobalPtr, "residual");
  if (kind == Kind::LayerNorm) {
    gamma = kb.param(kGlobalPtr, "gamma");
    beta = kb.param(kGlobalPtr, "beta");
  } else {
    weight = kb.param(kGlobalPtr, "weight");
  }
  Value y = kb.param(kGlobalPtr, "y");
  kb.param(Type::u32(), "rows");
  Value cols = kb.param(Type::u32(), "cols");
  Value eps = kb.param(Type::f32(), "eps");
  kb.reqntid(kBlock);
  kb.minnctapersm(kMinBlocksPerSM);
  ir::SharedArray scratch = kb.shared("scratch", Type::f32(), (kind == Kind::LayerNorm ? 3 : 2) * kWarps);

  Value tid = kb.tid(Mod::X, "tid");
  Value rowOff = kb.mul_wide(kb.ctaid(Mod::X, "row"), cols, "row_off");
  auto rowOf = [&](Value p, const char* n) { return kb.index(p, rowOff, bytes, n); };
  Value colsF = kb.cvt(cols, Type::f32(), "cols_f");
  Value zero = kb.f32(0.0f, "zero");
  Value rowsFit = ((cols & (V - 1)) == 0u).named("cols_fit");

  if (kind == Kind::LayerNorm) {
    // Tensors: 0 x, 1 gamma, 2 beta, 3 y.
    Value vec = (allAligned(kb, {x, gamma, beta, y}, 16) & rowsFit).named("vector");
    Row row{kb, s, tid, cols, vec, {rowOf(x, "xrow"), gamma, beta, rowOf(y, "yrow")}};
    std::vector<Value> stats = row.pass(
        {zero, zero, zero},
        [&](const Path& p, Value c) { return p.load(0, c, true); },
        [&](const Path&, Value, const std::vector<Value>& xs, std::span<Value> acc) {
          if (xs.size() == 1) return chanMerge(kb, {acc[0], acc[1], acc[2]}, {kb.f32(1.0f), xs[0], zero});
          // The chunk's own mean and M2 first (exact for a constant chunk), then one merge.
          Value sum = treeSum(xs);
          Value mean = sum * (1.0f / float(xs.size()));
          Value m2;
          for (Value v : xs) {
            Value d = kb.fma(sum, kb.f32(-1.0f / float(xs.size())), v);
            m2 = m2.valid() ? kb.fma(d, d, m2) : d * d;
          }
          return chanMerge(kb, {acc[0], acc[1], acc[2]}, {kb.f32(float(xs.size())), mean, m2});
        },
        "stats");
    // Chan's merge is not commutative bit for bit: combined in lane order, every thread gets the
    // same statistics.
    stats = blockCombine(kb, stats, tid, scratch, [&](const auto& a, const auto& b) { return chanMerge(kb, a, b); });
    Value mean = stats[1].named("mean");
    Value rstd = kb.rsqrt(divRn(kb, stats[2], colsF) + eps, "rstd");
    row.pass(
        {},
        [&](const Path& p, Value c) {
          std::vector<Value> l = p.load(0, c, true), g = p.load(1, c, true), b = p.load(2, c, true);
          l.insert(l.end(), g.begin(), g.end());
          l.insert(l.end(), b.begin(), b.end());
          return l;
        },
        [&](const Path& p, Value c, const std::vector<Value>& l, std::span<Value>) {
          unsigned w = p.width;
          std::vector<Value> out;
          for (unsigned i = 0; i < w; ++i) out.push_back(kb.fma((l[i] - mean) * rstd, l[w + i], l[2 * w + i]));
          p.store(3, c, out);
          return std::vector<Value>{};
        },
        "write");
  } else {
    bool res = kind == Kind::ResidualRmsNorm;
    // Tensors: 0 x, 1 weight, 2 y, 3 residual (residual_rmsnorm only; written, so never .nc).
    Value vec = (res ? allAligned(kb, {x, residual, weight, y}, 16) : allAligned(kb, {x, weight, y}, 16)) & rowsFit;
    Row row{kb, s, tid, cols, vec.named("vector"), {rowOf(x, "xrow"), weight, rowOf(y, "yrow")}};
    if (res) row.ptrs.push_back(rowOf(residual, "rrow"));
    Value scale = kb.f32(std::ldexp(1.0f, -kScaleLog2), "scale");
    // Two sums of squares: plain, and of x * 2^-90, which stays finite where the plain one
    // overflows (rows with |x| beyond about 1e19) and is used only then.
    std::vector<Value> sums = row.pass(
        {zero, zero},
        [&](const Path& p, Value c) {
          std::vector<Value> l = p.load(0, c, true);
          if (res) {
            std::vector<Value> r = p.load(3, c, false);
            l.insert(l.end(), r.begin(), r.end());
          }
          return l;
        },
        [&](const Path& p, Value c, const std::vector<Value>& l, std::span<Value> acc) {
          std::vector<Value> h(l.begin(), l.begin() + p.width);
          if (res) {
            // The statistics see h as stored, so they match a reference on the stored residual.
            for (unsigned i = 0; i < p.width; ++i) h[i] = l[i] + l[p.width + i];
            h = p.storeRounded(3, c, h);
          }
          Value ss = acc[0], scaled = acc[1];
          for (Value v : h) {
            ss = kb.fma(v, v, ss);
            Value t = v * scale;
            scaled = kb.fma(t, t, scaled);
          }
          return std::vector<Value>{ss, scaled};
        },
        "stats");
    sums = blockCombine(
        kb, sums, tid, scratch,
        [&](const auto& a, const auto& b) { return std::vector<Value>{a[0] + b[0], a[1] + b[1]}; }, Order::Commutative);
    Value plain = kb.rsqrt(divRn(kb, sums[0], colsF) + eps);
    // Where the plain sum overflowed, eps (scaled by 2^-180 it would vanish) does not matter.
    Value safe = kb.rsqrt(divRn(kb, sums[1], colsF)) * kb.f32(std::ldexp(1.0f, -kScaleLog2));
    Value overflow = (sums[0] == std::numeric_limits<float>::infinity()).named("overflow");
    Value inv = kb.select(overflow, safe, plain, "inv_rms");
    row.pass(
        {},
        [&](const Path& p, Value c) {
          // residual now holds h; this thread wrote exactly these elements in the first pass.
          std::vector<Value> l = res ? p.load(3, c, false) : p.load(0, c, true);
          std::vector<Value> w = p.load(1, c, true);
          l.insert(l.end(), w.begin(), w.end());
          return l;
        },
        [&](const Path& p, Value c, const std::vector<Value>& l, std::span<Value>) {
          std::vector<Value> out;
          for (unsigned i = 0; i < p.width; ++i) out.push_back((l[i] * inv) * l[p.width + i]);
          p.store(2, c, out);
          return std::vector<Value>{};
        },
        "write");
  }
  kb.ret();
  return finish(kb, m, diags);
}

Template normTemplate(Kind kind, const char* name, const char* summary) {
  return {
      name,
      summary,
      {dtypeOption()},
      [kind](const Options& o, ir::Diagnostics& d) { return buildNorm(kind, o, d); },
      [](const Options&) { return LaunchRule{{kBlock}, {Expr::param("rows")}, 0}; },
  };
}

}  // namespace

void addNorms(std::vector<Template>& out) {
  out.push_back(normTemplate(Kind::LayerNorm, "layernorm",
                             "y = (x - mean) / sqrt(var + eps) * gamma + beta per row (biased variance, Chan's merge of "
                             "per-thread mean/M2); one block of 256 threads per row"));
  out.push_back(normTemplate(Kind::RmsNorm, "rmsnorm",
                             "y = x / sqrt(mean(x^2) + eps) * weight per row (overflow-safe for |x| up to the f32 "
                             "range); one block of 256 threads per row"));
  out.push_back(normTemplate(Kind::ResidualRmsNorm, "residual_rmsnorm",
                             "h = x + residual (stored back into residual), y = rmsnorm(h) * weight per row, "
                             "statistics of h as stored; one block of 256 threads per row"));
}

}  // namespace tn::kernels::lib
