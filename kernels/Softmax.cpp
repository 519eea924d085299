// softmax, softmax_partial, softmax_merge (docs/kernels.md): the softmax of each row of x.
// A row of 16-byte vectors that fits in registers (kSlots vectors per thread) is read once: its
// max, then e^(x - max) once per element, their sum, and y = e / sum from the registers.
// Otherwise pass 1 keeps per thread a running max m and sum s of e^(x - m), rescaling s
// whenever m grows (online softmax), and merges the (m, s) pairs across lanes, warps and, for
// long rows, blocks; pass 2 re-reads the row (an L1/L2 hit) and writes e^(x - m) / s. e^t is
// ex2(t * log2 e) with x - m formed first: it is exact when x is near m, whatever the magnitude
// of m.
//
// Special values follow PyTorch: an -inf entry gets weight 0; a row that is all -inf (0 / 0),
// holds a NaN, or holds +inf (inf - inf) comes out all NaN.
#include <bit>
#include <string>

#include "kernels/Library.h"

namespace tn::kernels::lib {

namespace {

using ir::Mod;
using ir::SharedArray;
using ir::Type;

constexpr unsigned kBlock = 256;
constexpr unsigned kWarps = kBlock / 32;
// softmax gives a row one warp up to this length, a whole block beyond it.
constexpr unsigned kWarpRowMax = 1024;
// Elements per thread per main-loop step: four 16-byte f32 vectors (two bf16/f16 ones) in
// flight per thread cover DRAM latency at the occupancy these kernels get.
constexpr unsigned kStep = 16;
// Elements per thread per main-loop step of the scalar path (misaligned or odd rows).
constexpr unsigned kScalarUnroll = 8;
// 16-byte vectors per thread of softmax's one-pass path.
constexpr unsigned kSlots = 8;
// Row elements per block of softmax_partial / softmax_merge: one main-loop step per thread.
constexpr unsigned kChunk = kBlock * kStep;

// A running maximum and the sum of e^(x - m) over the elements seen.
struct Stat {
  Value m, s;
};

Stat empty(KernelBuilder& kb) { return {negInf(kb), kb.f32(0.0f, "zero")}; }

// Exponents are taken relative to refOf(m) (kernels/Library.h).
// ex2 of a value <= 0: a result below 2^-126 is 0, a weight no f32 sum of at least 1 can see.
Value expFrom(KernelBuilder& kb, Value v, Value ref) { return ex2Approx(kb, (v - ref) * kLog2e); }

// (a, b) combined. Callers pass the pair in an order every lane agrees on, so the lanes of a
// butterfly end with bit-identical results and a row is scaled by one factor.
Stat merge(KernelBuilder& kb, Stat a, Stat b) {
  Value m = kb.max(a.m, b.m, "m");
  Value r = refOf(kb, m);
  // A side whose max is +inf gives e^(inf - inf) = NaN: such rows come out NaN.
  return {m, kb.fma(a.s, expFrom(kb, a.m, r), b.s * expFrom(kb, b.m, r), "s")};
}

// One element added with one ex2: when v raises the max, the old sum is rescaled by e^(m - v)
// and v contributes 1; otherwise v contributes e^(v - m).
Stat absorbOne(KernelBuilder& kb, Stat st, Value v) {
  Value m = kb.max(st.m, v, "m");
  Value r = refOf(kb, m);
  Value up = (v > st.m).named("raises");
  Value e = expFrom(kb, kb.select(up, st.m, v), r);
  return {m, kb.select(up, kb.fma(st.s, e, kb.f32(1.0f)), st.s + e, "s")};
}

Value tree(KernelBuilder& kb, std::vector<Value> v, bool max) {
  for (size_t w = v.size(); w > 1; w = (w + 1) / 2)
    for (size_t i = 0; i < w / 2; ++i) v[i] = max ? kb.max(v[2 * i], v[2 * i + 1]) : v[2 * i] + v[2 * i + 1];
  return v[0];
}

// Several elements added with one rescale of the old sum.
Stat absorb(KernelBuilder& kb, Stat st, const std::vector<Value>& v) {
  Value m = kb.max(st.m, tree(kb, v, true), "m");
  Value r = refOf(kb, m);
  std::vector<Value> e;
  for (Value x : v) e.push_back(expFrom(kb, x, r));
  return {m, kb.fma(st.s, expFrom(kb, st.m, r), tree(kb, e, false), "s")};
}

// The pairs of a warp merged in lane order (as blockCombine does); every lane ends with the
// warp's pair.
Stat warpMerge(KernelBuilder& kb, Stat st, Value lane) {
  for (unsigned off = 16; off >= 1; off /= 2) {
    Stat other{kb.shfl(Mod::Bfly, st.m, off, "m.other"), kb.shfl(Mod::Bfly, st.s, off, "s.other")};
    Value low = ((lane & off) == 0u).named("low");
    Stat a{kb.select(low, st.m, other.m), kb.select(low, st.s, other.s)};
    Stat b{kb.select(low, other.m, st.m), kb.select(low, other.s, st.s)};
    st = merge(kb, a, b);
  }
  return st;
}

// The threads' pairs merged over the block in lane order; all threads must call it, once per
// kernel.
Stat blockMerge(KernelBuilder& kb, Stat st, SharedArray scratch, Value tid) {
  std::vector<Value> r = blockCombine(kb, {st.m, st.s}, tid, scratch, [&](const auto& a, const auto& b) {
    Stat c = merge(kb, {a[0], a[1]}, {b[0], b[1]});
    return std::vector<Value>{c.m, c.s};
  });
  return {r[0], r[1]};
}

// Where one thread's share of a row lies: elements first, first + stride, ... below n of the
// row at xrow (written to yrow); in 16-byte vectors of the same indices, at xvec and yvec, when
// `vector`.
struct Slice {
  Value xrow, yrow, xvec, yvec, n, first, stride, vector;
};

// x + (row * cols + start) elements. For the vector path the same address, built so that the
// alignment check proves it 16-byte aligned: the base with its low bits cleared and cols with
// the bits below the vector width cleared (both no-ops when `vector` holds).
Value sliceStart(KernelBuilder& kb, Value base, Value row, Value cols, Value start, Storage s, bool forVector) {
  if (forVector) {
    base = assumeAligned16(kb, base, "base16");
    cols = (cols & ~(vecElems(s) - 1)).named("cols_vec");
  }
  Value off = kb.mul_wide(row, cols, "row_off");
  if (start.valid()) off = off + kb.cvt(start, Type::u64());
  return kb.index(base, off, bytesOf(s), forVector ? "vrow" : "row");
}

Slice makeSlice(KernelBuilder& kb, Value x, Value y, Value row, Value cols, Value start, Storage s, Value n, Value first,
                Value stride) {
  Slice sl;
  sl.xrow = sliceStart(kb, x, row, cols, start, s, false);
  sl.xvec = sliceStart(kb, x, row, cols, start, s, true);
  if (y.valid()) {
    sl.yrow = sliceStart(kb, y, row, cols, start, s, false);
    sl.yvec = sliceStart(kb, y, row, cols, start, s, true);
  }
  Value rowAligned = ((cols & (vecElems(s) - 1)) == 0u).named("row_aligned");
  sl.vector = ((y.valid() ? allAligned(kb, {x, y}, 16) : allAligned(kb, {x}, 16)) & rowAligned).named("vector");
  sl.n = n;
  sl.first = first;
  sl.stride = stride;
  return sl;
}

// A path's unit at index i: a 16-byte vector (vecElems(s) elements) or one element.
std::vector<Value> loadAt(KernelBuilder& kb, const Slice& sl, Storage s, bool vec, Value i) {
  if (vec) return loadVecF32(kb, kb.index(sl.xvec, i, 16, "px"), s, true, "x");
  return {loadF32(kb, kb.index(sl.xrow, i, bytesOf(s), "px"), s, true, "x")};
}

void storeAt(KernelBuilder& kb, const Slice& sl, Storage s, bool vec, Value i, const std::vector<Value>& v) {
  if (vec) storeVecF32(kb, kb.index(sl.yvec, i, 16, "py"), v, s);
  else storeF32(kb, kb.index(sl.yrow, i, bytesOf(s), "py"), v[0], s);
}

// Runs body(indices, carried) over this thread's units of the slice: a main loop taking
// `unroll` units per step (their loads all in flight together), then the rest one at a time.
// stride * unroll must be a power of two.
template <class F>
std::vector<Value> forUnits(KernelBuilder& kb, const Slice& sl, Storage s, bool vec, std::vector<Value> init, F&& body) {
  unsigned per = vec ? vecElems(s) : 1, unroll = vec ? kStep / per : kScalarUnroll;
  Value count = per == 1 ? sl.n : (sl.n >> static_cast<unsigned>(std::countr_zero(per))).named("nvec");
  Value span = (sl.stride * unroll).named("span");
  Value nmain = (count - (count & (span - 1u))).named("nmain");
  std::vector<Value> offsets{kb.u32(0)};
  for (unsigned k = 1; k < unroll; ++k) offsets.push_back(sl.stride * k);
  auto carriedVec = [](std::span<Value> c) { return std::vector<Value>(c.begin(), c.end()); };
  std::vector<Value> after = kb.for_range(
      sl.first, nmain, span, init,
      [&](Value i, std::span<Value> carried) {
        std::vector<Value> idx{i};
        for (unsigned k = 1; k < unroll; ++k) idx.push_back(i + offsets[k]);
        return body(idx, carriedVec(carried));
      },
      {.label = "main", .iv = "i"});
  return kb.for_range(
      nmain + sl.first, count, sl.stride, after,
      [&](Value i, std::span<Value> carried) { return body(std::vector<Value>{i}, carriedVec(carried)); },
      {.label = "tail", .iv = "i"});
}

// Pass 1 on one path: this thread's (max, sum) over its share of the row.
std::vector<Value> pathStats(KernelBuilder& kb, const Slice& sl, Storage s, bool vec) {
  Stat e = empty(kb);
  return forUnits(kb, sl, s, vec, {e.m, e.s}, [&](const std::vector<Value>& idx, std::vector<Value> c) {
    std::vector<Value> x;
    for (Value i : idx) {
      std::vector<Value> unit = loadAt(kb, sl, s, vec, i);
      x.insert(x.end(), unit.begin(), unit.end());
    }
    Stat st = x.size() == 1 ? absorbOne(kb, {c[0], c[1]}, x[0]) : absorb(kb, {c[0], c[1]}, x);
    return std::vector<Value>{st.m, st.s};
  });
}

Stat sliceStats(KernelBuilder& kb, const Slice& sl, Storage s) {
  std::vector<Value> r = kb.if_else(
      sl.vector, [&] { return pathStats(kb, sl, s, true); }, [&] { return pathStats(kb, sl, s, false); },
      {.label = "stats", .results = {"m", "s"}});
  return {r[0], r[1]};
}

// Pass 2 on one path: y = e^(x - ref) * inv over this thread's share of the row.
void pathWrite(KernelBuilder& kb, const Slice& sl, Storage s, bool vec, Value ref, Value inv) {
  forUnits(kb, sl, s, vec, {}, [&](const std::vector<Value>& idx, std::vector<Value>) {
    std::vector<std::vector<Value>> x;
    for (Value i : idx) x.push_back(loadAt(kb, sl, s, vec, i));
    for (size_t k = 0; k < idx.size(); ++k) {
      std::vector<Value> out;
      for (Value v : x[k]) out.push_back(expFrom(kb, v, ref) * inv);
      storeAt(kb, sl, s, vec, idx[k], out);
    }
    return std::vector<Value>{};
  });
}

void sliceWrite(KernelBuilder& kb, const Slice& sl, Storage s, Value ref, Value inv) {
  kb.if_else(
      sl.vector, [&] { pathWrite(kb, sl, s, true, ref, inv); }, [&] { pathWrite(kb, sl, s, false, ref, inv); },
      {.label = "write"});
}

// Pass 2 over a slice with the merged statistics of its row.
void writeWith(KernelBuilder& kb, const Slice& sl, Storage s, Stat total) {
  // An all -inf row has s = 0: 0 * (1/0) = NaN, as documented above.
  sliceWrite(kb, sl, s, refOf(kb, total.m), kb.rcp(total.s, "inv"));
}

// The one-pass path of softmax: this thread's vectors first + k * stride (k < kSlots) of the
// row, all loaded together without a branch (a slot past the row's end loads the row's last
// vector again: it cannot change the max, and its exponents are left out of the sum), the row's
// max, the exponents once, their sum, and y = e * (1 / sum). The max and the sum are combined
// over the block (sc, then sc2: no barrier between them) or the warp. nlast: the index of the
// row's last vector (cols >= 1 here).
void oneRowInRegisters(KernelBuilder& kb, const Slice& sl, Storage s, Value big, Value tid, Value nlast,
                       SharedArray sc, SharedArray sc2) {
  unsigned V = vecElems(s);
  Value nvec = (sl.n >> static_cast<unsigned>(std::countr_zero(V))).named("nvec");
  std::vector<Value> chunk, valid;
  std::vector<std::vector<Value>> x;
  for (unsigned k = 0; k < kSlots; ++k) {
    chunk.push_back(k == 0 ? sl.first : sl.first + sl.stride * k);
    valid.push_back((chunk[k] < nvec).named("slot" + std::to_string(k)));
    x.push_back(loadAt(kb, sl, s, true, kb.min(chunk[k], nlast, "chunk" + std::to_string(k))));
  }
  auto rowWide = [&](Value v, bool max) {
    return kb.if_else(
        big,
        [&] {
          return blockCombine(
              kb, {v}, tid, max ? sc : sc2,
              [&](const auto& a, const auto& b) { return std::vector<Value>{max ? kb.max(a[0], b[0]) : a[0] + b[0]}; },
              Order::Commutative);
        },
        [&] { return max ? kb.warp_reduce_max(v) : kb.warp_reduce_sum(v); },
        {.label = max ? "row_max" : "row_sum"})[0];
  };
  std::vector<Value> all;
  for (auto& v : x) all.insert(all.end(), v.begin(), v.end());
  Value ref = refOf(kb, rowWide(tree(kb, all, true), true));
  std::vector<Value> parts;
  for (unsigned k = 0; k < kSlots; ++k) {
    for (Value& e : x[k]) e = expFrom(kb, e, ref);
    parts.push_back(kb.select(valid[k], tree(kb, x[k], false), kb.f32(0.0f)));
  }
  // The sum is at least 1 (the max contributes 1), where .ftz cannot matter; an all -inf row has
  // sum 0: 0 * (1/0) = NaN, as documented above.
  Value inv = rcpApprox(kb, rowWide(tree(kb, parts, false), false), "inv");
  for (unsigned k = 0; k < kSlots; ++k) {
    std::vector<Value> out;
    for (Value e : x[k]) out.push_back(e * inv);
    Value bytes = packVecF32(kb, out, s).bytes;
    kb.if_then(valid[k], [&] { kb.store(kb.index(sl.yvec, chunk[k], 16, "py"), bytes); }, "store" + std::to_string(k));
  }
}

// blockCombine's staging area: (max, sum) of each warp.
SharedArray declareScratch(KernelBuilder& kb) { return kb.shared("scratch", Type::f32(), 2 * kWarps); }

std::optional<ir::Module> buildSoftmax(const Options& o, ir::Diagnostics& diags) {
  Storage s = storageOption(o);
  ir::Module m = newModule();
  KernelBuilder kb(m, "softmax");
  Value x = kb.param(kGlobalPtr, "x");
  Value y = kb.param(kGlobalPtr, "y");
  Value rows = kb.param(Type::u32(), "rows");
  Value cols = kb.param(Type::u32(), "cols");
  kb.reqntid(kBlock);
  SharedArray sc = declareScratch(kb);
  SharedArray sc2 = kb.shared("scratch2", Type::f32(), kWarps);

  Value tid = kb.tid(Mod::X, "tid");
  Value lane = (tid & 31u).named("lane");
  Value warp = (tid >> 5u).named("warp");
  Value ctaid = kb.ctaid(Mod::X, "ctaid");
  // One code path serves both modes: a block's row and its 256 threads, or a warp's row and
  // its 32 lanes. The mode is uniform (a parameter), so the block mode's barrier is safe.
  Value big = (cols > kWarpRowMax).named("block_per_row");
  Value row = kb.select(big, ctaid, kb.mad(ctaid, kb.u32(kWarps), warp), "row");
  Value first = kb.select(big, tid, lane, "first");
  Value stride = kb.select(big, kb.u32(kBlock), kb.u32(32), "stride");
  // Warps past the last row take an empty row instead of returning, so every thread still
  // reaches the shuffles (and the checker needs no proof that warp mode has no barrier).
  Value n = kb.select(row < rows, cols, kb.u32(0), "n");
  // Their loads (one-pass path) read the last row, so that every load has a valid address.
  Value rowLoaded = kb.min(row, rows - 1u, "row_loaded");
  Slice sl = makeSlice(kb, x, y, rowLoaded, cols, Value(), s, n, first, stride);
  // Rows of up to kSlots vectors per thread (block mode: f32 8192, bf16/f16 16384 elements; warp
  // mode: every row) on the vector path are read once and kept in registers.
  Value fits = (cols <= kb.select(big, kb.u32(kBlock * kSlots * vecElems(s)), kb.u32(32 * kSlots * vecElems(s))));
  kb.if_else(
      (sl.vector & fits).named("one_pass"),
      [&] {
        Value nlast = ((cols >> static_cast<unsigned>(std::countr_zero(vecElems(s)))) - 1u).named("nlast");
        oneRowInRegisters(kb, sl, s, big, tid, nlast, sc, sc2);
      },
      [&] {
        Stat st = sliceStats(kb, sl, s);
        std::vector<Value> total = kb.if_else(
            big,
            [&] {
              Stat b = blockMerge(kb, st, sc, tid);
              return std::vector<Value>{b.m, b.s};
            },
            [&] {
              Stat w = warpMerge(kb, st, lane);
              return std::vector<Value>{w.m, w.s};
            },
            {.label = "merge", .results = {"row_m", "row_s"}});
        writeWith(kb, sl, s, {total[0], total[1]});
      },
      {.label = "path"});
  kb.ret();
  return finish(kb, m, diags);
}

// The chunk of a row that block (chunk, row) of softmax_partial / softmax_merge handles.
struct ChunkPos {
  Value row, chunk, chunks;
  Slice slice;
};

ChunkPos chunkOf(KernelBuilder& kb, Value x, Value y, Value cols, Storage s) {
  Value tid = kb.tid(Mod::X, "tid");
  RowChunk c = rowChunk(kb, cols, kChunk);
  return {c.row, c.chunk, c.chunks, makeSlice(kb, x, y, c.row, cols, c.start, s, c.len, tid, kb.u32(kBlock))};
}

std::optional<ir::Module> buildPartial(const Options& o, ir::Diagnostics& diags) {
  Storage s = storageOption(o);
  ir::Module m = newModule();
  KernelBuilder kb(m, "softmax_partial");
  Value x = kb.param(kGlobalPtr, "x");
  Value stats = kb.param(kGlobalPtr, "stats");
  kb.param(Type::u32(), "rows");  // the launch rule's grid height
  Value cols = kb.param(Type::u32(), "cols");
  kb.reqntid(kBlock);
  SharedArray sc = declareScratch(kb);

  ChunkPos pos = chunkOf(kb, x, Value(), cols, s);
  Stat st = blockMerge(kb, sliceStats(kb, pos.slice, s), sc, pos.slice.first);
  kb.if_then(
      (pos.slice.first == 0u).named("writer"),
      [&] {
        Value slot = (kb.mul_wide(pos.row, pos.chunks) + kb.cvt(pos.chunk, Type::u64())).named("slot");
        Value p = kb.index(stats, slot, 8, "pstat");
        kb.store(p, st.m);
        kb.store(kb.ptradd(p, kb.u64(4)), st.s);
      },
      "write_stats");
  kb.ret();
  return finish(kb, m, diags);
}

std::optional<ir::Module> buildMerge(const Options& o, ir::Diagnostics& diags) {
  Storage s = storageOption(o);
  ir::Module m = newModule();
  KernelBuilder kb(m, "softmax_merge");
  Value x = kb.param(kGlobalPtr, "x");
  Value stats = kb.param(kGlobalPtr, "stats");
  Value y = kb.param(kGlobalPtr, "y");
  kb.param(Type::u32(), "rows");  // the launch rule's grid height
  Value cols = kb.param(Type::u32(), "cols");
  kb.reqntid(kBlock);
  SharedArray sc = declareScratch(kb);

  ChunkPos pos = chunkOf(kb, x, y, cols, s);
  Value tid = pos.slice.first;
  // Every block of the row merges all of the row's chunk pairs (few: one per kChunk elements).
  Value statsRow = kb.index(stats, kb.mul_wide(pos.row, pos.chunks, "stats_off"), 8, "stats_row");
  Stat e = empty(kb);
  std::vector<Value> mine = kb.for_range(
      tid, pos.chunks, kb.u32(kBlock), {e.m, e.s},
      [&](Value k, std::span<Value> c) {
        Value p = kb.index(statsRow, k, 8, "pstat");
        Stat chunk{kb.load(p, Type::f32(), {Mod::NcMod}, "m.chunk"),
                   kb.load(kb.ptradd(p, kb.u64(4)), Type::f32(), {Mod::NcMod}, "s.chunk")};
        Stat st = merge(kb, {c[0], c[1]}, chunk);
        return std::vector<Value>{st.m, st.s};
      },
      {.label = "chunks", .iv = "k", .carried = {"m", "s"}});
  Stat total = blockMerge(kb, {mine[0], mine[1]}, sc, tid);
  writeWith(kb, pos.slice, s, total);
  kb.ret();
  return finish(kb, m, diags);
}

// x and y rows x cols; the split pair's stats 2 f32 a chunk of a row.
std::function<Template::Extents(const Options&)> softmaxExtents() {
  const Expr rows = Expr::param("rows"), cols = Expr::param("cols");
  return allExtents({sameExtent({"x", "y"}, rows * cols), sameExtent({"stats"}, rows * ceilDiv(cols, kChunk) * 2)});
}

}  // namespace

void addSoftmax(std::vector<Template>& out) {
  const std::string chunk = std::to_string(kChunk);
  out.push_back({
      "softmax",
      "y = softmax of each row of x (rows x cols); one warp per row (" + std::to_string(kWarps) +
          " rows per block) when cols <= " + std::to_string(kWarpRowMax) + ", else one block of " +
          std::to_string(kBlock) + " threads per row; read once when the row fits in registers (16-byte aligned, cols "
          "a multiple of 16 bytes, up to " + std::to_string(kBlock * kSlots * 4) + " f32 or " +
          std::to_string(kBlock * kSlots * 8) + " bf16/f16 elements). A row holding NaN or +inf, or all -inf, gives NaN",
      {dtypeOption()},
      buildSoftmax,
      [](const Options&) {
        // Warp mode: ceil_div(rows, 8) blocks; block mode (big = 1): rows blocks; cols = 0: none.
        Expr rows = Expr::param("rows"), cols = Expr::param("cols");
        Expr big = min(1, cols / (kWarpRowMax + 1));
        return LaunchRule{{kBlock}, {(ceilDiv(rows, kWarps) * (1 - big) + rows * big) * min(1, cols)}, 0};
      },
  });
  out.back().elements = storageElements({"x", "y"});
  out.back().extents = softmaxExtents();
  out.push_back({
      "softmax_partial",
      "long softmax rows, pass 1 (then softmax_merge): block (c, r) writes the (max, sum of exp(x - max)) of "
      "elements [c*" + chunk + ", (c+1)*" + chunk + ") of row r as two f32 at stats[(r * chunks + c) * 2], "
      "chunks = ceil_div(cols, " + chunk + "); stats must hold rows * ceil_div(cols, " + chunk + ") * 2 f32; "
      "rows <= 65535 (the grid's height)",
      {dtypeOption()},
      buildPartial,
      [](const Options&) { return LaunchRule{{kBlock}, {ceilDiv(Expr::param("cols"), kChunk), Expr::param("rows")}, 0}; },
  });
  out.back().elements = storageElements({"x", "y"});
  out.back().extents = softmaxExtents();
  out.push_back({
      "softmax_merge",
      "long softmax rows, pass 2 (after softmax_partial): block (c, r) merges row r's chunk statistics from stats "
      "(rows * ceil_div(cols, " + chunk + ") * 2 f32) and writes elements [c*" + chunk + ", (c+1)*" + chunk +
          ") of row r of y",
      {dtypeOption()},
      buildMerge,
      [](const Options&) { return LaunchRule{{kBlock}, {ceilDiv(Expr::param("cols"), kChunk), Expr::param("rows")}, 0}; },
  });
  out.back().elements = storageElements({"x", "y"});
  out.back().extents = softmaxExtents();
}

}  // namespace tn::kernels::lib
