// layernorm, rmsnorm and residual_rmsnorm (docs/kernels.md). One block of 256 threads per row.
// A row of 16-byte vectors that fits in the block's registers (kSlots vectors per thread: f32 up to
// 8192, bf16/f16 up to 16384 elements; fewer where the spec's max_cols asks) is read once: loaded,
// reduced (per-thread partials, merged across lanes with shuffles and across warps through shared
// memory), normalized from the registers and written. Longer rows, misaligned pointers and lengths
// that are not a multiple of the vector width take two passes: the first reduces the row, the
// second re-reads it (an L2 hit) and writes y, both by 16-byte vectors where they can, element by
// element otherwise; the two passes take the same path, so every thread re-reads exactly what it
// wrote.
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
// (residual_rmsnorm bf16's first pass, layernorm's second); the one-pass path holds up to 64
// values per thread. 3 resident blocks (a limit of 80 registers) keep every load in flight and
// the row in registers without spills (docs/performance.md).
constexpr unsigned kMinBlocksPerSM = 3;
// bf16/f16 rows hold twice the elements (64 f32 values per thread): 2 blocks (128 registers).
constexpr unsigned kMinBlocksPerSM16 = 2;
// rmsnorm's overflow-safe sum of squares scales x by 2^-kScaleLog2: the largest f32 (< 2^128)
// becomes < 2^38, whose square times 2^32 columns stays finite.
constexpr int kScaleLog2 = 90;
// 16-byte vectors per thread on the one-pass path (rows up to kBlock * kSlots * vecElems), unless
// a spec's max_cols asks for fewer (slotsFor).
constexpr unsigned kSlots = 8;

// The one-pass path's slots a thread for rows of up to maxCols elements (0: kSlots): the fewest of
// 1, 2, 4 and 8 16-byte vectors that hold them.
unsigned slotsFor(unsigned maxCols, Storage s) {
  if (maxCols == 0) return kSlots;
  const unsigned vectors = (maxCols + vecElems(s) - 1) / vecElems(s);
  return std::bit_ceil((vectors + kBlock - 1) / kBlock);
}

}  // namespace

// With kSlots as many blocks as the registers hold the row without spills; with fewer slots, more.
unsigned normMinBlocks(Storage s, unsigned slots) {
  const unsigned values = slots * vecElems(s);  // f32 values of the row a thread holds
  return values > 32 ? kMinBlocksPerSM16 : values > 16 ? kMinBlocksPerSM : values > 8 ? 4 : 6;
}

OptionSpec maxColsOption() {
  return intOption("max_cols", 0, 0, kBlock * kSlots * 8,
                   "the longest row read once, kept in registers: 0 for 8192 f32 or 16384 bf16/f16 elements (8 "
                   "16-byte vectors a thread); less, rounded up to 1, 2 or 4 vectors a thread, takes fewer "
                   "registers, so more blocks share an SM; longer rows take two passes");
}

std::optional<unsigned> normSlots(const Options& o, Storage s, ir::Diagnostics& diags) {
  const auto maxCols = static_cast<unsigned>(o.integer("max_cols"));
  if (maxCols > kBlock * kSlots * vecElems(s)) {
    diags.report(ir::Severity::Error, "", {},
                 "max_cols " + std::to_string(maxCols) + " is more than the " + std::to_string(kBlock * kSlots * vecElems(s)) +
                     " elements of " + o.text("dtype") + " a row can keep in registers");
    return std::nullopt;
  }
  return slotsFor(maxCols, s);
}

namespace {

Value divRn(KernelBuilder& kb, Value a, Value b) { return kb.op(Op::Div, Type::f32(), {a, b}, {Mod::Rn}); }

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
  unsigned unroll = kUnroll;  // chunks per thread and main-loop iteration, their loads in flight together

  // Thread tid takes chunks tid, tid + 256, ...; returns the carried values after the last one.
  std::vector<Value> pass(std::vector<Value> init, const LoadFn& load, const UseFn& use, const std::string& label) const {
    auto walk = [&](unsigned width) {
      Path p{kb, s, width, {}};
      for (Value ptr : ptrs) p.bases.push_back(width == 1 ? ptr : assumeAligned16(kb, ptr));
      Value n = width == 1 ? cols : cols >> static_cast<uint32_t>(std::countr_zero(width));
      const unsigned step = kBlock * unroll;
      Value nmain = (n - n % step).named(label + ".nmain");
      std::vector<Value> carried = kb.for_range(
          tid, nmain, kb.u32(step), init,
          [&](Value i, std::span<Value> acc) {
            std::vector<std::vector<Value>> loaded;
            for (unsigned j = 0; j < unroll; ++j) loaded.push_back(load(p, j == 0 ? i : i + kBlock * j));
            std::vector<Value> next(acc.begin(), acc.end());
            for (unsigned j = 0; j < unroll; ++j) next = use(p, j == 0 ? i : i + kBlock * j, loaded[j], next);
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
  // The 16-byte vector path's tensors, for code that runs only where `vector` holds.
  Path vectorPath() const {
    Path p{kb, s, vecElems(s), {}};
    for (Value ptr : ptrs) p.bases.push_back(assumeAligned16(kb, ptr));
    return p;
  }
};

enum class Kind { LayerNorm, RmsNorm, ResidualRmsNorm };

// The one-pass path: a row of up to kBlock * n 16-byte vectors (n = kSlots: f32 8192, bf16/f16
// 16384 elements) is read once and kept in registers; thread tid holds vectors tid + 256k, k < n.
// Every slot is loaded, without a branch, so that all loads are in flight together: a slot past
// the row's end loads the row's last vector again (nvec >= 1 on this path) and its values are
// left out of every sum (`only`) and never stored.
struct Slots {
  KernelBuilder& kb;
  const Path& p;
  Value tid, nvec;
  unsigned n;  // slots a thread

  Value chunk(unsigned k) const { return k == 0 ? tid : tid + kBlock * k; }
  Value valid(unsigned k) const { return (chunk(k) < nvec).named("slot" + std::to_string(k)); }
  Value loaded(unsigned k) const { return kb.min(chunk(k), nvec - 1u, "chunk" + std::to_string(k)); }
  std::vector<std::vector<Value>> load(const std::function<std::vector<Value>(Value c)>& fn) const {
    std::vector<std::vector<Value>> out;
    for (unsigned k = 0; k < n; ++k) out.push_back(fn(loaded(k)));
    return out;
  }
  // v where slot k is inside the row, else 0.
  Value only(unsigned k, Value v) const { return kb.select(valid(k), v, kb.f32(0.0f)); }
  // Stores `bytes` (packVecF32's) into tensor t at slot k if the slot is inside the row.
  void store(unsigned t, unsigned k, Value bytes) const {
    kb.if_then(valid(k), [&] { kb.store(p.at(t, chunk(k)), bytes); }, "store" + std::to_string(k));
  }
  // y = fn(k, chunk) for every slot, stored into tensor t; fn loads its per-column parameters.
  void write(unsigned t, const std::function<std::vector<Value>(unsigned k, Value c)>& fn) const {
    for (unsigned k = 0; k < n; ++k) store(t, k, packVecF32(kb, fn(k, loaded(k)), p.s).bytes);
  }
};

// rmsnorm's statistics are a plain sum of squares per thread (one fma per element). Where a
// thread's sum overflows (|x| beyond about 1e19), the thread sums (x * 2^-90)^2 again, from its
// registers or, on the two-pass path, by re-reading its elements; every other thread's sum is
// scaled by 2^-180 (exact, or below what a row that overflows can notice). The block combines
// both sums; the scaled one is used when the plain total overflowed.
std::vector<Value> withScaledSum(KernelBuilder& kb, Value ss, const std::function<Value(Value scale)>& rescan) {
  Value scale = kb.f32(std::ldexp(1.0f, -kScaleLog2), "scale");
  Value over = (ss == std::numeric_limits<float>::infinity()).named("thread_overflow");
  Value scaled = kb.if_else(
      over, [&] { return rescan(scale); }, [&] { return (ss * scale) * scale; },
      {.label = "rescale", .results = {"scaled"}})[0];
  return {ss, scaled};
}

// 1 / rms from the block's (plain, scaled) sums of squares.
Value invRms(KernelBuilder& kb, const std::vector<Value>& sums, Value colsF, Value eps) {
  Value plain = rsqrtApprox(kb, divRn(kb, sums[0], colsF) + eps);
  // Where the plain sum overflowed, eps (scaled by 2^-180 it would vanish) does not matter.
  Value safe = rsqrtApprox(kb, divRn(kb, sums[1], colsF)) * kb.f32(std::ldexp(1.0f, -kScaleLog2));
  Value overflow = (sums[0] == std::numeric_limits<float>::infinity()).named("overflow");
  return kb.select(overflow, safe, plain, "inv_rms");
}

Value sumOf(KernelBuilder& kb, Value tid, ir::SharedArray scratch, Value v) {
  return blockCombine(
      kb, {v}, tid, scratch, [&](const auto& a, const auto& b) { return std::vector<Value>{a[0] + b[0]}; },
      Order::Commutative)[0];
}

// A pass's use that adds the squares of the loaded values (each times `scale`, when given) to acc[0].
UseFn addSquares(KernelBuilder& kb, Value scale = Value()) {
  return [&kb, scale](const Path&, Value, const std::vector<Value>& l, std::span<Value> acc) {
    Value t = acc[0];
    for (Value v : l) {
      Value u = scale.valid() ? v * scale : v;
      t = kb.fma(u, u, t);
    }
    return std::vector<Value>{t};
  };
}

// rmsnorm's last pass over tensors 0 x, 1 weight, 2 y (3 residual): y = h * inv * weight, with h
// read from tensor `h` (x, or the residual that now holds h: this thread wrote exactly these
// elements in the first pass).
void writeNormalized(const Row& row, Value inv, unsigned h) {
  row.pass(
      {},
      [&](const Path& p, Value c) {
        std::vector<Value> l = p.load(h, c, h == 0), w = p.load(1, c, true);
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

// rmsnorm's one-pass statistics: 1 / rms from the row's values in registers (h[k] the values of
// slot k), with the overflow rescan from the same registers.
Value onePassInvRms(KernelBuilder& kb, const Slots& sl, const std::vector<std::vector<Value>>& h, Value tid,
                    ir::SharedArray scratch, Value colsF, Value eps) {
  auto sumSquares = [&](Value scale) {
    std::vector<Value> parts;
    for (unsigned j = 0; j < sl.n; ++j) {
      Value part;
      for (Value e : h[j]) {
        Value u = scale.valid() ? e * scale : e;
        part = part.valid() ? kb.fma(u, u, part) : u * u;
      }
      parts.push_back(sl.only(j, part));
    }
    return treeSum(parts);
  };
  std::vector<Value> sums = withScaledSum(kb, sumSquares(Value()), sumSquares);
  sums = blockCombine(
      kb, sums, tid, scratch, [&](const auto& a, const auto& b) { return std::vector<Value>{a[0] + b[0], a[1] + b[1]}; },
      Order::Commutative);
  return invRms(kb, sums, colsF, eps);
}

// rmsnorm's two-pass statistics: a pass adding the squares of h (`stats`, over what `load`
// reads), the overflow rescan over what `rescan` reads, the block combine, 1 / rms.
Value twoPassInvRms(KernelBuilder& kb, const Row& row, const LoadFn& load, const UseFn& stats, const LoadFn& rescan,
                    ir::SharedArray scratch, Value zero, Value colsF, Value eps) {
  Value ss = row.pass({zero}, load, stats, "stats")[0];
  std::vector<Value> sums =
      withScaledSum(kb, ss, [&](Value scale) { return row.pass({zero}, rescan, addSquares(kb, scale), "rescan")[0]; });
  sums = blockCombine(
      kb, sums, row.tid, scratch,
      [&](const auto& a, const auto& b) { return std::vector<Value>{a[0] + b[0], a[1] + b[1]}; }, Order::Commutative);
  return invRms(kb, sums, colsF, eps);
}

// layernorm's two-pass statistics: a pass's use adding d = x - k and d^2 to acc[0], acc[1] (k the
// row's first element, so that a large common offset is removed before anything is squared).
UseFn addDeviations(KernelBuilder& kb, Value k) {
  return [&kb, k](const Path&, Value, const std::vector<Value>& xs, std::span<Value> acc) {
    Value s1 = acc[0], s2 = acc[1];
    for (Value v : xs) {
      Value dv = v - k;
      s1 = s1 + dv;
      s2 = kb.fma(dv, dv, s2);
    }
    return std::vector<Value>{s1, s2};
  };
}

// The row's mean and 1 / sqrt(var + eps) from its sums of d and d^2: the variance is
// (S2 - S1^2 / n) / n, accurate while the row's mean is within a few standard deviations of its
// first element (docs/kernels.md).
std::pair<Value, Value> layerNormStats(KernelBuilder& kb, const std::vector<Value>& sums, Value k, Value colsF,
                                       Value eps) {
  Value meanD = divRn(kb, sums[0], colsF).named("mean_d");
  Value var = kb.max(divRn(kb, kb.fma(-sums[0], meanD, sums[1]), colsF), kb.f32(0.0f), "var");
  return {(k + meanD).named("mean"), rsqrtApprox(kb, var + eps, "rstd")};
}

// layernorm's last pass over tensors 0 x, 1 gamma, 2 beta, 3 y: y = (x - mean) * rstd * gamma + beta.
void writeLayerNorm(const Row& row, Value mean, Value rstd) {
  KernelBuilder& kb = row.kb;
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
}

std::optional<ir::Module> buildNorm(Kind kind, const Options& o, ir::Diagnostics& diags) {
  Storage s = storageOption(o);
  unsigned bytes = bytesOf(s), V = vecElems(s);
  const char* name = kind == Kind::LayerNorm ? "layernorm" : kind == Kind::RmsNorm ? "rmsnorm" : "residual_rmsnorm";
  const std::optional<unsigned> slotCount = normSlots(o, s, diags);
  if (!slotCount) return std::nullopt;
  const unsigned slots = *slotCount;
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
  kb.minnctapersm(normMinBlocks(s, slots));
  // The one-pass path combines twice (layernorm: sum, then squared deviations) on two arrays, so
  // that no barrier is needed between the combines.
  ir::SharedArray scratch = kb.shared("scratch", Type::f32(), 2 * kWarps);
  ir::SharedArray scratch2 = kb.shared("scratch2", Type::f32(), kWarps);

  Value tid = kb.tid(Mod::X, "tid");
  Value rowOff = kb.mul_wide(kb.ctaid(Mod::X, "row"), cols, "row_off");
  auto rowOf = [&](Value p, const char* n) { return kb.index(p, rowOff, bytes, n); };
  Value colsF = kb.cvt(cols, Type::f32(), "cols_f");
  Value zero = kb.f32(0.0f, "zero");
  Value rowsFit = ((cols & (V - 1)) == 0u).named("cols_fit");
  Value nvec = (cols >> static_cast<uint32_t>(std::countr_zero(V))).named("nvec");
  Value inRegs = ((cols != 0u) & (cols <= kBlock * slots * V)).named("fits");

  if (kind == Kind::LayerNorm) {
    // Tensors: 0 x, 1 gamma, 2 beta, 3 y.
    Value vec = (allAligned(kb, {x, gamma, beta, y}, 16) & rowsFit).named("vector");
    Row row{kb, s, tid, cols, vec, {rowOf(x, "xrow"), gamma, beta, rowOf(y, "yrow")}};
    // Deviations are taken from the row's first element k (read by every thread), so a large
    // common offset is removed before anything is squared, and a constant row has d = 0 exactly.
    Value k = kb.if_else(
        cols != 0u, [&] { return loadF32(kb, row.ptrs[0], s, true, "k"); }, [&] { return zero; },
        {.label = "first", .results = {"k"}})[0];
    kb.if_else(
        (vec & inRegs).named("one_pass"),
        [&] {
          // Mean of d from the registers, then the squared deviations from it (two-pass
          // statistics at no extra read).
          Path p = row.vectorPath();
          Slots sl{kb, p, tid, nvec, slots};
          std::vector<std::vector<Value>> d = sl.load([&](Value c) { return p.load(0, c, true); });
          std::vector<Value> parts;
          for (unsigned j = 0; j < sl.n; ++j) {
            for (Value& e : d[j]) e = e - k;
            parts.push_back(sl.only(j, treeSum(d[j])));
          }
          Value meanD = divRn(kb, sumOf(kb, tid, scratch, treeSum(parts)), colsF).named("mean_d");
          parts.clear();
          for (unsigned j = 0; j < sl.n; ++j) {
            Value part;
            for (Value& e : d[j]) {
              e = e - meanD;
              part = part.valid() ? kb.fma(e, e, part) : e * e;
            }
            parts.push_back(sl.only(j, part));
          }
          Value rstd = rsqrtApprox(kb, divRn(kb, sumOf(kb, tid, scratch2, treeSum(parts)), colsF) + eps, "rstd");
          sl.write(3, [&](unsigned j, Value c) {
            std::vector<Value> g = p.load(1, c, true), b = p.load(2, c, true), out;
            for (unsigned i = 0; i < V; ++i) out.push_back(kb.fma(d[j][i] * rstd, g[i], b[i]));
            return out;
          });
        },
        [&] {
          // Two passes: plain sums of d and d^2 per thread and over the block.
          std::vector<Value> sums =
              row.pass({zero, zero}, [&](const Path& p, Value c) { return p.load(0, c, true); }, addDeviations(kb, k), "stats");
          sums = blockCombine(
              kb, sums, tid, scratch,
              [&](const auto& a, const auto& b) { return std::vector<Value>{a[0] + b[0], a[1] + b[1]}; },
              Order::Commutative);
          auto [mean, rstd] = layerNormStats(kb, sums, k, colsF, eps);
          writeLayerNorm(row, mean, rstd);
        },
        {.label = "path"});
  } else {
    bool res = kind == Kind::ResidualRmsNorm;
    // Tensors: 0 x, 1 weight, 2 y, 3 residual (residual_rmsnorm only; written, so never .nc).
    Value vec = (res ? allAligned(kb, {x, residual, weight, y}, 16) : allAligned(kb, {x, weight, y}, 16)) & rowsFit;
    Row row{kb, s, tid, cols, vec.named("vector"), {rowOf(x, "xrow"), weight, rowOf(y, "yrow")}};
    if (res) row.ptrs.push_back(rowOf(residual, "rrow"));
    kb.if_else(
        (vec & inRegs).named("one_pass"),
        [&] {
          Path p = row.vectorPath();
          Slots sl{kb, p, tid, nvec, slots};
          std::vector<std::vector<Value>> h = sl.load([&](Value c) {
            std::vector<Value> l = p.load(0, c, true);
            if (res) {
              std::vector<Value> r = p.load(3, c, false);
              l.insert(l.end(), r.begin(), r.end());
            }
            return l;
          });
          // h = x + residual, stored; the statistics see h as stored. Slots past the row's end
          // load its last vector (Slots), so that vector's owner stores it only after the
          // reduction's bar.sync, from x and residual loaded again: no store races with a load.
          auto hOf = [&](const std::vector<Value>& xr) {
            std::vector<Value> sum;
            for (unsigned i = 0; i < V; ++i) sum.push_back(xr[i] + xr[V + i]);
            return packVecF32(kb, sum, s);
          };
          Value last = (nvec - 1u).named("last");
          if (res)
            for (unsigned j = 0; j < sl.n; ++j) {
              StoredVec st = hOf(h[j]);
              kb.if_then((sl.chunk(j) < last).named("early" + std::to_string(j)),
                         [&] { kb.store(p.at(3, sl.chunk(j)), st.bytes); }, "store" + std::to_string(j));
              h[j] = st.values;
            }
          Value inv = onePassInvRms(kb, sl, h, tid, scratch, colsF, eps);
          if (res)
            kb.if_then((tid == (last & (kBlock - 1u))).named("owns_last"), [&] {
              std::vector<Value> xr = p.load(0, last, true), r = p.load(3, last, false);
              xr.insert(xr.end(), r.begin(), r.end());
              kb.store(p.at(3, last), hOf(xr).bytes);
            }, "store_last");
          sl.write(2, [&](unsigned j, Value c) {
            std::vector<Value> w = p.load(1, c, true), out;
            for (unsigned i = 0; i < V; ++i) out.push_back((h[j][i] * inv) * w[i]);
            return out;
          });
        },
        [&] {
          auto loadH = [&](const Path& p, Value c) {
            std::vector<Value> l = p.load(0, c, true);
            if (res) {
              std::vector<Value> r = p.load(3, c, false);
              l.insert(l.end(), r.begin(), r.end());
            }
            return l;
          };
          auto stats = [&](const Path& p, Value c, const std::vector<Value>& l, std::span<Value> acc) {
            std::vector<Value> h(l.begin(), l.begin() + p.width);
            if (res) {
              // The statistics see h as stored, so they match a reference on the stored residual.
              for (unsigned i = 0; i < p.width; ++i) h[i] = l[i] + l[p.width + i];
              h = p.storeRounded(3, c, h);
            }
            Value t = acc[0];
            for (Value v : h) t = kb.fma(v, v, t);
            return std::vector<Value>{t};
          };
          // The rescan reads h: residual now holds it (this thread wrote exactly these elements).
          auto rescan = [&](const Path& p, Value c) { return res ? p.load(3, c, false) : p.load(0, c, true); };
          writeNormalized(row, twoPassInvRms(kb, row, loadH, stats, rescan, scratch, zero, colsF, eps), res ? 3 : 0);
        },
        {.label = "path"});
  }
  kb.ret();
  return finish(kb, m, diags);
}

// rmsnorm_partial / rmsnorm_merge and layernorm_partial / layernorm_merge: rows split into chunks
// of kChunk elements, one block each, for rows too few to give every SM a block (32 x 32768: 32
// blocks as one per row, 256 as chunks). The partial leaves two f32 a chunk in `stats`: rmsnorm's
// (plain, scaled) sums of squares, layernorm's sums of d = x - k and d^2 (k the row's first
// element, as layernorm's two-pass path takes them). The merge adds its row's chunk sums, in the
// same order in every block of the row, as the one-block kernels add their threads' (rmsnorm: the
// scaled sum where the plain one overflowed), and writes its chunk. x is read twice, the second time mostly from L2.
constexpr unsigned kChunk = 4096;

std::optional<ir::Module> buildNormSplit(Kind kind, bool merge, const Options& o, ir::Diagnostics& diags) {
  Storage s = storageOption(o);
  const unsigned bytes = bytesOf(s), V = vecElems(s);
  const bool ln = kind == Kind::LayerNorm;
  ir::Module m = newModule();
  KernelBuilder kb(m, std::string(ln ? "layernorm" : "rmsnorm") + (merge ? "_merge" : "_partial"));
  Value x = kb.param(kGlobalPtr, "x");
  // Per-column tensors of the merge: weight, or gamma and beta.
  std::vector<Value> perColumn;
  if (merge)
    for (const char* name : ln ? std::vector<const char*>{"gamma", "beta"} : std::vector<const char*>{"weight"})
      perColumn.push_back(kb.param(kGlobalPtr, name));
  Value stats = kb.param(kGlobalPtr, "stats");
  Value y = merge ? kb.param(kGlobalPtr, "y") : Value();
  kb.param(Type::u32(), "rows");  // the launch rule's grid height
  Value cols = kb.param(Type::u32(), "cols");
  Value eps = merge ? kb.param(Type::f32(), "eps") : Value();
  kb.reqntid(kBlock);
  kb.minnctapersm(s == Storage::F32 ? kMinBlocksPerSM : kMinBlocksPerSM16);
  ir::SharedArray scratch = kb.shared("scratch", Type::f32(), 2 * kWarps);

  Value tid = kb.tid(Mod::X, "tid");
  RowChunk c = rowChunk(kb, cols, kChunk);
  Value off = (kb.mul_wide(c.row, cols) + kb.cvt(c.start, Type::u64())).named("chunk_off");
  Value zero = kb.f32(0.0f, "zero");
  // A chunk starts a multiple of kChunk elements into a row, so it is 16-byte aligned when rows are.
  Value rowsFit = ((cols & (V - 1)) == 0u).named("cols_fit");
  Value aligned = !merge ? allAligned(kb, {x}, 16)
                 : ln    ? allAligned(kb, {x, perColumn[0], perColumn[1], y}, 16)
                         : allAligned(kb, {x, perColumn[0], y}, 16);
  Value vec = (aligned & rowsFit).named("vector");
  // Tensors: 0 x, and for the merge the per-column ones (1 weight; 1 gamma, 2 beta), then y, each
  // at the chunk's first element. A whole chunk of 16-byte vectors is one main-loop iteration, all
  // its loads in flight together.
  Row chunk{kb, s, tid, c.len, vec, {kb.index(x, off, bytes, "xchunk")}, kChunk / (kBlock * V)};
  for (Value p : perColumn) chunk.ptrs.push_back(kb.index(p, c.start, bytes, "column_chunk"));
  if (merge) chunk.ptrs.push_back(kb.index(y, off, bytes, "ychunk"));
  // layernorm: the row's first element, the origin of every chunk's deviations.
  Value k = ln ? loadF32(kb, kb.index(x, kb.mul_wide(c.row, cols), bytes, "xrow"), s, true, "k") : Value();
  auto combine = [&](std::vector<Value> sums) {
    return blockCombine(
        kb, std::move(sums), tid, scratch,
        [&](const auto& a, const auto& b) { return std::vector<Value>{a[0] + b[0], a[1] + b[1]}; },
        Order::Commutative);
  };
  auto loadX = [&](const Path& p, Value i) { return p.load(0, i, true); };

  if (!merge) {
    std::vector<Value> sums;
    if (ln) {
      sums = combine(chunk.pass({zero, zero}, loadX, addDeviations(kb, k), "stats"));
    } else {
      Value ss = chunk.pass({zero}, loadX, addSquares(kb), "stats")[0];
      sums = combine(
          withScaledSum(kb, ss, [&](Value scale) { return chunk.pass({zero}, loadX, addSquares(kb, scale), "rescan")[0]; }));
    }
    kb.if_then(
        (tid == 0u).named("writer"),
        [&] {
          Value slot = (kb.mul_wide(c.row, c.chunks) + kb.cvt(c.chunk, Type::u64())).named("slot");
          Value p = kb.index(stats, slot, 8, "pstat");
          kb.store(p, sums[0]);
          kb.store(kb.ptradd(p, kb.u64(4)), sums[1]);
        },
        "write_stats");
  } else {
    // Every block of the row adds all of the row's chunk sums (few: one per kChunk elements).
    Value statsRow = kb.index(stats, kb.mul_wide(c.row, c.chunks, "stats_off"), 8, "stats_row");
    std::vector<Value> mine = kb.for_range(
        tid, c.chunks, kb.u32(kBlock), {zero, zero},
        [&](Value ci, std::span<Value> acc) {
          Value p = kb.index(statsRow, ci, 8, "pstat");
          return std::vector<Value>{acc[0] + kb.load(p, Type::f32(), {Mod::NcMod}, "first.chunk"),
                                    acc[1] + kb.load(kb.ptradd(p, kb.u64(4)), Type::f32(), {Mod::NcMod}, "second.chunk")};
        },
        {.label = "chunks", .iv = "k", .carried = {"first", "second"}});
    Value colsF = kb.cvt(cols, Type::f32(), "cols_f");
    if (ln) {
      auto [mean, rstd] = layerNormStats(kb, combine(mine), k, colsF, eps);
      writeLayerNorm(chunk, mean, rstd);
    } else {
      writeNormalized(chunk, invRms(kb, combine(mine), colsF, eps), 0);
    }
  }
  kb.ret();
  return finish(kb, m, diags);
}

// The rows and per-column vectors every norm kernel stores as its dtype (those a kernel lacks are
// ignored): rows x cols tensors, cols vectors, and the split pair's stats (2 f32 a chunk of a row).
auto normElements() { return storageElements({"x", "residual", "weight", "gamma", "beta", "y"}); }
auto normExtents() {
  const Expr rows = Expr::param("rows"), cols = Expr::param("cols");
  return allExtents({sameExtent({"x", "residual", "y"}, rows * cols), sameExtent({"weight", "gamma", "beta"}, cols),
                     sameExtent({"stats"}, rows * ceilDiv(cols, kChunk) * 2)});
}

// A split pair's template: NORM_partial or NORM_merge, a block per (chunk, row).
Template splitTemplate(Kind kind, bool merge, std::string summary) {
  Template t{
      std::string(kind == Kind::LayerNorm ? "layernorm" : "rmsnorm") + (merge ? "_merge" : "_partial"),
      std::move(summary),
      {dtypeOption()},
      [kind, merge](const Options& o, ir::Diagnostics& d) { return buildNormSplit(kind, merge, o, d); },
      [](const Options&) { return LaunchRule{{kBlock}, {ceilDiv(Expr::param("cols"), kChunk), Expr::param("rows")}, 0}; },
  };
  t.elements = normElements();
  t.extents = normExtents();
  return t;
}

Template normTemplate(Kind kind, const char* name, const char* summary) {
  Template t{
      name,
      summary,
      {dtypeOption(), maxColsOption()},
      [kind](const Options& o, ir::Diagnostics& d) { return buildNorm(kind, o, d); },
      [](const Options&) { return LaunchRule{{kBlock}, {Expr::param("rows")}, 0}; },
  };
  t.elements = normElements();
  t.extents = normExtents();
  return t;
}

}  // namespace

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

RowInRegs loadRowInRegs(KernelBuilder& kb, Storage s, Value tid, Value nvec, unsigned slots,
                        const std::function<Value(Value chunk)>& load) {
  // The norms' slot arithmetic (Slots), for the thread and for its warp's first lane; nothing is
  // loaded or stored through their path.
  const Path none{kb, s, vecElems(s), {}};
  const Slots mine{kb, none, tid, nvec, slots}, warp{kb, none, (tid & ~31u).named("warp_first"), nvec, slots};
  RowInRegs row{s, {}, {}, {}, {}};
  for (unsigned k = 0; k < slots; ++k) {
    row.chunk.push_back(mine.chunk(k));
    row.valid.push_back(mine.valid(k));
    row.warpHas.push_back(warp.valid(k));
    row.bytes.push_back(load(mine.loaded(k)));
  }
  return row;
}

void rmsnormFused(KernelBuilder& kb, Storage s, Value tid, Value xrow, Value weight, Value cols, Value eps, Value aligned,
                  ir::SharedArray scratch, unsigned slots, const std::function<void(const RowInRegs& y)>& onePass,
                  const std::function<void(Value inv)>& twoPass) {
  const unsigned V = vecElems(s);
  Value colsF = kb.cvt(cols, Type::f32(), "cols_f");
  Value zero = kb.f32(0.0f, "zero");
  Value vec = (aligned & ((cols & (V - 1)) == 0u)).named("vector");
  Value nvec = (cols >> static_cast<uint32_t>(std::countr_zero(V))).named("nvec");
  Value inRegs = ((cols != 0u) & (cols <= kBlock * slots * V)).named("fits");
  // Tensors: 0 x (the row), 1 weight (per column).
  Row row{kb, s, tid, cols, vec, {xrow, weight}};
  kb.if_else(
      (vec & inRegs).named("one_pass"),
      [&] {
        Path p = row.vectorPath();
        Slots sl{kb, p, tid, nvec, slots};
        std::vector<std::vector<Value>> h = sl.load([&](Value c) { return p.load(0, c, true); });
        Value inv = onePassInvRms(kb, sl, h, tid, scratch, colsF, eps);
        // rmsnorm's y of every slot, as its one-pass path computes and stores it.
        RowInRegs y = loadRowInRegs(kb, s, tid, nvec, slots, [&](Value c) { return loadVecBytes(kb, p.at(1, c), s, true); });
        for (unsigned k = 0; k < slots; ++k) {
          std::vector<Value> w = y.values(kb, k), out;
          for (unsigned i = 0; i < V; ++i) out.push_back((h[k][i] * inv) * w[i]);
          y.bytes[k] = packVecF32(kb, out, s).bytes;
        }
        onePass(y);
      },
      [&] {
        auto x = [&](const Path& p, Value c) { return p.load(0, c, true); };
        twoPass(twoPassInvRms(kb, row, x, addSquares(kb), x, scratch, zero, colsF, eps));
      },
      {.label = "path"});
}

void addNorms(std::vector<Template>& out) {
  out.push_back(normTemplate(Kind::LayerNorm, "layernorm",
                             "y = (x - mean) / sqrt(var + eps) * gamma + beta per row (biased variance of x minus its first "
                             "element); one block of 256 threads per row, the row read once when it fits in registers "
                             "(16-byte aligned, cols a multiple of 16 bytes, up to max_cols)"));
  out.push_back(normTemplate(Kind::RmsNorm, "rmsnorm",
                             "y = x / sqrt(mean(x^2) + eps) * weight per row (overflow-safe for |x| up to the f32 "
                             "range); one block of 256 threads per row, the row read once when it fits in registers "
                             "(as layernorm)"));
  const std::string chunk = std::to_string(kChunk), span = "[c*" + chunk + ", (c+1)*" + chunk + ")";
  const std::string layout = "as two f32 at stats[(r * chunks + c) * 2], chunks = ceil_div(cols, " + chunk +
                             "); stats must hold rows * ceil_div(cols, " + chunk + ") * 2 f32; rows <= 65535 (the grid's height)";
  out.push_back(splitTemplate(Kind::RmsNorm, false,
                              "long rmsnorm rows, pass 1 (then rmsnorm_merge): block (c, r) writes the sum of squares of "
                              "elements " + span + " of row r, plain and scaled by 2^-180 (the overflow-safe one), " + layout));
  out.push_back(splitTemplate(Kind::RmsNorm, true,
                              "long rmsnorm rows, pass 2 (after rmsnorm_partial): block (c, r) adds row r's chunk sums from "
                              "stats and writes elements " + span + " of row r of y = x / sqrt(mean(x^2) + eps) * weight"));
  out.push_back(splitTemplate(Kind::LayerNorm, false,
                              "long layernorm rows, pass 1 (then layernorm_merge): block (c, r) writes the sums of d and d^2 "
                              "over elements " + span + " of row r, d = x minus the row's first element, " + layout));
  out.push_back(splitTemplate(Kind::LayerNorm, true,
                              "long layernorm rows, pass 2 (after layernorm_partial): block (c, r) adds row r's chunk sums "
                              "from stats and writes elements " + span +
                                  " of row r of y = (x - mean) / sqrt(var + eps) * gamma + beta"));
  out.push_back(normTemplate(Kind::ResidualRmsNorm, "residual_rmsnorm",
                             "h = x + residual (stored back into residual), y = rmsnorm(h) * weight per row, "
                             "statistics of h as stored; one block of 256 threads per row, x and residual read once when the row fits "
                             "in registers (as layernorm)"));
}

}  // namespace tn::kernels::lib
