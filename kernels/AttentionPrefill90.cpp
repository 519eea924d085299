// attention_prefill with mainloop = "wgmma" (docs/kernels.md, docs/hopper.md §4): the same
// kernel as kernels/AttentionPrefill.cpp on sm_90a's machinery. The tensors, options and results
// are the mma path's; varlen is refused (a tensor map needs the row count of q and k/v).
//
// Block (64 query rows, query head, sequence): one warpgroup of 4 warps, 16 rows each. Tensor
// maps view q as [batch · seq_q rows, q_heads · head_dim] and k, v as [batch · kv_stride rows,
// kv_heads · head_dim]; a box is 64 elements (128 bytes) of one head by 64 (q) or kKeys (k, v)
// rows, 128B-swizzled, so a head_dim 128 tile is two strips of 64 elements. Q is loaded once; K
// and V tiles of kKeys keys come through a 2-stage ring: full barriers (one per stage for K and
// for V: S = Q K^T starts before V is in) completed by TMA transaction bytes, empty barriers by
// the 128 threads once both wgmma groups of the stage are done. One elected thread of warp 0
// issues every arrive.expect_tx and load: the first two tiles up front, tile j + 2 once tile j's
// stage is empty.
//
// S = Q K^T: head_dim / 16 wgmma m64n(kKeys)k16, both operands K-major descriptors. Lane i of
// the v(kKeys/2).f32 accumulator is row 16 warp + g + 8 ((i >> 1) & 1), key 8 (i >> 2) + 2 t +
// (i & 1): the mma C layout per 8 keys, so the masks and the online softmax are the mma path's.
// O += P V: kKeys / 16 wgmma m64n(head_dim)k16 with P's A fragments in registers (lanes 8 kk ...
// 8 kk + 7 of S, rounded to the storage type) and V an MN-major descriptor (head_dim contiguous).
//
// Sequence ends: rows past the tensor are zero-filled by TMA, but rows past seq_k inside the
// tensor (the cache's spare rows, the next sequence) are loaded too. Their scores are masked to
// -inf (weight 0); their V rows are zeroed in shared memory before O += P V (fence.proxy.async,
// then bar.sync), so that 0 · NaN cannot reach a row. Special values are then the mma path's.
#include <string>

#include "kernels/AttentionPrefill.h"

namespace tn::kernels::lib::prefill {

namespace {

using ir::Scalar;
using ir::SharedArray;
using ir::Type;

constexpr unsigned kThreads = 128;  // one consumer warpgroup
constexpr unsigned kRows = 64;      // query rows of a block
constexpr unsigned kKeys = 128;     // keys of a K/V tile (the wgmma N of S = Q K^T)
constexpr unsigned kStages = 2;
constexpr unsigned kStrip = 64;         // elements of a box row: 128 bytes, the 128B swizzle span
constexpr unsigned kAtom = 1024;        // bytes of a 128B swizzle atom (8 rows); tiles start on one
constexpr unsigned kStripRow = 128;     // bytes of a strip row

// Byte layout of the dynamic shared memory from its 1024-aligned start: Q, then K stage 0 and 1,
// then V stage 0 and 1; each tile strip by strip (64 elements of every row).
struct Layout {
  unsigned qBytes, tileBytes;  // a Q tile; a K or V tile
  unsigned kAt(unsigned stage) const { return qBytes + stage * tileBytes; }
  unsigned vAt(unsigned stage) const { return qBytes + (kStages + stage) * tileBytes; }
  unsigned total() const { return qBytes + 2 * kStages * tileBytes; }
};
Layout layoutOf(const Config& c) { return {kRows * c.rowBytes(), kKeys * c.rowBytes()}; }

// Spins on try_wait until the barrier's phase of the given parity has completed.
void waitPhase(KernelBuilder& kb, Value bar, Value parity, std::string_view label) {
  ir::BlockId spin = kb.block(std::string(label)), done = kb.block(std::string(label) + ".done");
  kb.br(spin);
  kb.set_insert_point(spin);
  Value ready = kb.mbarrier_try_wait_parity(bar, parity, "ready");
  kb.cbr(ready, done, spin);
  kb.set_insert_point(done);
}

}  // namespace

std::optional<ir::Module> buildPrefill90(const Options& o, ir::Diagnostics& diags) {
  const Config c = configOf(o);
  if (c.varlen) {
    diags.report(ir::Severity::Error, "", {},
                 "mainloop = \"wgmma\" does not support varlen (its tensor maps need the row count of q and k/v); "
                 "use mainloop = \"mma\"");
    return std::nullopt;
  }
  if (c.dim != 64 && c.dim != 128) {
    diags.report(ir::Severity::Error, "", {}, "head_dim must be 64 or 128, not " + std::to_string(c.dim));
    return std::nullopt;
  }
  ir::Module m = newModule();
  KernelBuilder kb(m, "attention_prefill");
  Value q = kb.param(kGlobalPtr, "q");
  Value k = kb.param(kGlobalPtr, "k");
  Value v = kb.param(kGlobalPtr, "v");
  Value out = kb.param(kGlobalPtr, "o");
  Value lse = c.lse ? kb.param(kGlobalPtr, "lse") : Value();
  kb.param(Type::u32(), "batch");  // the grid's z extent
  Value seqQ = kb.param(Type::u32(), "seq_q");
  Value seqK = kb.param(Type::u32(), "seq_k");
  Value kvStride = kb.param(Type::u32(), "kv_stride");
  Value qHeads = kb.param(Type::u32(), "q_heads");
  Value kvHeads = kb.param(Type::u32(), "kv_heads");
  Value scale = kb.param(Type::f32(), "scale");
  // Filled by the runtime from the launch rule's tensorMaps (views of q, k and v).
  Value qMap = kb.param(Type::of(Scalar::TensorMap), "q_map");
  Value kMap = kb.param(Type::of(Scalar::TensorMap), "k_map");
  Value vMap = kb.param(Type::of(Scalar::TensorMap), "v_map");
  (void)q, (void)k, (void)v;  // read only through the tensor maps
  kb.reqntid(kThreads);
  // One block per SM by design (its shared memory): up to 255 registers, and no occupancy warning.
  kb.minnctapersm(1);

  const Layout lay = layoutOf(c);
  const unsigned strips = c.dim / kStrip;
  // Barriers: Q's, then K full, V full and empty per stage.
  SharedArray bars = kb.shared("barriers", Type::of(Scalar::B64), 1 + 3 * kStages, 8);
  // The tiles, 1024-aligned by hand (kAtom bytes of slack): PTX's alignment of extern shared
  // memory is not a promise about its address.
  SharedArray dyn = kb.shared_dynamic("tiles", Type::of(Scalar::B32), 16);
  Value raw = kb.shared_addr(dyn, "tiles_raw");
  Value pad = ((kAtom - (kb.bitcast(raw, Type::u32()) & (kAtom - 1))) & (kAtom - 1)).named("pad");
  Value tiles = kb.ptradd(raw, pad, "tiles");
  auto at = [&](Value base, Value offset, std::string_view name) { return kb.ptradd(base, offset, name); };
  Value barBase = kb.shared_addr(bars, "bars");
  auto barrier = [&](unsigned index, Value stage, std::string_view name) {
    return at(barBase, (stage * 8u + index * 8).named("bar_off"), name);
  };
  Value qFull = at(barBase, kb.u32(0), "q_full");
  auto kFull = [&](Value stage) { return barrier(1, stage, "k_full"); };
  auto vFull = [&](Value stage) { return barrier(1 + kStages, stage, "v_full"); };
  auto empty = [&](Value stage) { return barrier(1 + 2 * kStages, stage, "empty"); };

  Value tid = kb.tid(ir::Mod::X, "tid");
  Value lane = (tid & 31u).named("lane"), warp = (tid >> 5u).named("warp");
  Value g = (lane >> 2u).named("g"), t = (lane & 3u).named("t");
  // The last query tiles see the most keys under a causal mask: they go first.
  Value q0 = ((kb.nctaid(ir::Mod::X) - 1u - kb.ctaid(ir::Mod::X)) * kRows).named("q0");
  Value qh = kb.ctaid(ir::Mod::Y, "q_head"), b = kb.ctaid(ir::Mod::Z, "seq");
  Value h = kvHeadOf(kb, qh, qHeads, kvHeads);
  Value kEnd = keyEnd(kb, c, q0, kRows, seqQ, seqK);
  Value nTiles = ((kEnd + (kKeys - 1)) / kKeys).named("tiles");

  // Tensor-map coordinates (s32): element c0 of the row c1 of the 2-D views.
  auto s32 = [&](Value x) { return kb.bitcast(x, Type::s32()); };
  Value qRow0 = (b * seqQ + q0).named("q_row0"), kvRow0 = (b * kvStride).named("kv_row0");
  Value qCol0 = (qh * c.dim).named("q_col0"), kvCol0 = (h * c.dim).named("kv_col0");
  auto loadTile = [&](Value map, Value dst, Value col0, Value row0, Value bar) {
    for (unsigned s = 0; s < strips; ++s)
      kb.tma_load_2d(s == 0 ? dst : at(dst, kb.u32(s * kKeys * kStripRow), "strip"), map,
                     s32(col0 + s * kStrip), s32(row0), bar);
  };
  auto kTile = [&](Value stage) { return at(tiles, (stage * lay.tileBytes + lay.kAt(0)).named("k_off"), "k_tile"); };
  auto vTile = [&](Value stage) { return at(tiles, (stage * lay.tileBytes + lay.vAt(0)).named("v_off"), "v_tile"); };
  // Tile j of K and V into stage j % 2 (by the elected thread).
  auto issueKV = [&](Value j) {
    Value stage = (j & 1u).named("stage"), row0 = (kvRow0 + j * kKeys).named("kv_row");
    kb.mbarrier_arrive_expect_tx(kFull(stage), kb.u32(lay.tileBytes));
    loadTile(kMap, kTile(stage), kvCol0, row0, kFull(stage));
    kb.mbarrier_arrive_expect_tx(vFull(stage), kb.u32(lay.tileBytes));
    loadTile(vMap, vTile(stage), kvCol0, row0, vFull(stage));
  };
  auto leader = [&](const std::function<void()>& fn) {
    kb.if_then((warp == 0u).named("warp0"), [&] { kb.if_then(kb.elect_sync(kb.u32(0xffffffffu), "elected"), fn, "leader"); },
               "producer_warp");
  };

  leader([&] {
    kb.mbarrier_init(qFull, kb.u32(1));
    for (unsigned s = 0; s < kStages; ++s) {
      kb.mbarrier_init(kFull(kb.u32(s)), kb.u32(1));
      kb.mbarrier_init(vFull(kb.u32(s)), kb.u32(1));
      kb.mbarrier_init(empty(kb.u32(s)), kb.u32(kThreads));
    }
  });
  kb.bar_sync();  // the barriers are set up
  leader([&] {
    kb.mbarrier_arrive_expect_tx(qFull, kb.u32(lay.qBytes));
    for (unsigned s = 0; s < strips; ++s)
      kb.tma_load_2d(at(tiles, kb.u32(s * kRows * kStripRow), "q_strip"), qMap, s32(qCol0 + s * kStrip), s32(qRow0), qFull);
    for (unsigned j = 0; j < kStages; ++j) kb.if_then((kb.u32(j) < nTiles).named("preload"), [&] { issueKV(kb.u32(j)); }, "preload");
  });

  // Descriptors: K-major 128B-swizzled strips (rows 128 bytes apart, 8-row atoms 1024 apart); k
  // step kk is 32 bytes into strip kk / 4. V: MN-major, strips kKeys · 128 bytes apart (LBO), key
  // groups of 8 an atom apart (SBO); key step kk starts 16 rows in.
  auto kMajor = [&](Value tile, unsigned stripBytes, unsigned kk) {
    return kb.wgmma_descriptor(at(tile, kb.u32((kk / 4) * stripBytes + (kk % 4) * 32), "k_step"), 16, kAtom, 128, "desc");
  };
  const unsigned sLanes = kKeys / 2, oLanes = c.dim / 2;
  const Type sType = Type::of(Scalar::F32, sLanes), oType = Type::of(Scalar::F32, oLanes);
  Value zero = kb.f32(0.0f);
  Value oZero = kb.pack(oType, std::vector<Value>(oLanes, zero), "o_zero");
  Value scale2 = (scale * kLog2e).named("scale2");
  Value row0 = (q0 + warp * 16u + g).named("row_g"), row1 = (row0 + 8u).named("row_g8");
  const Softmax sm{seqQ, seqK, q0, t, scale2, {row0, row1}};
  waitPhase(kb, qFull, kb.u32(0), "q_wait");

  // Carried: m and l of rows g and g + 8, then O.
  std::vector<Value> init{negInf(kb), negInf(kb), zero, zero, oZero};
  std::vector<Value> st = kb.for_range(
      kb.u32(0), nTiles, kb.u32(1), init,
      [&](Value jt, std::span<Value> carried) {
        Value k0 = (jt * kKeys).named("k0");
        Value stage = (jt & 1u).named("stage"), parity = ((jt >> 1u) & 1u).named("parity");
        Value kT = kTile(stage);
        Value vT = vTile(stage);
        waitPhase(kb, kFull(stage), parity, "k_wait");
        // Not read (scale-d is false for the first k step); a value of its own each tile, as a
        // wgmma accumulator has one use (the result takes its registers).
        Value s = kb.pack(sType, std::vector<Value>(sLanes, zero), "s_zero");
        kb.wgmma_fence();
        for (unsigned kk = 0; kk < c.dim / 16; ++kk)
          s = kb.wgmma_mma_async(kKeys, c.half(), s, kMajor(tiles, kRows * kStripRow, kk), kMajor(kT, kKeys * kStripRow, kk),
                                 kb.pred(kk > 0), false, false, "s");
        kb.wgmma_commit_group();
        kb.wgmma_wait_group(0);

        std::vector<Value> sv;
        for (unsigned i = 0; i < sLanes; ++i) sv.push_back(kb.extract(s, i, "score"));
        std::vector<Value> next(carried.begin(), carried.end());
        Value m[2] = {carried[0], carried[1]}, l[2] = {carried[2], carried[3]}, corr[2];
        std::vector<Value> pf = softmaxTile(kb, c, sm, k0, kKeys, sv, m, l, corr);
        next[0] = m[0], next[1] = m[1], next[2] = l[0], next[3] = l[1];
        std::vector<Value> o;
        for (unsigned i = 0; i < oLanes; ++i) o.push_back(kb.extract(carried[4], i) * corr[(i >> 1) & 1]);
        Value acc = kb.pack(oType, o, "o_scaled");

        waitPhase(kb, vFull(stage), parity, "v_wait");
        // V rows past seq_k: zeros (whole 128-byte strip rows; the swizzle permutes within a row).
        kb.if_then((k0 + kKeys > seqK).named("partial_v"), [&] {
          Value valid = (seqK - k0).named("valid_keys");
          const unsigned chunks = kKeys * strips * (kStripRow / 16);
          Value zeros = kb.pack(Type::of(Scalar::B32, 4), std::vector<Value>(4, kb.b32(0)), "zeros");
          for (unsigned r = 0; r < chunks / kThreads; ++r) {
            Value chunk = (tid + r * kThreads).named("chunk");
            Value row = ((chunk >> 3u) % kKeys).named("v_row");  // 8 chunks a strip row
            kb.if_then((row >= valid).named("past_end"), [&] { kb.store(at(vT, chunk << 4u, "v_chunk"), zeros); }, "zero_row");
          }
          kb.fence_proxy_async();
          kb.bar_sync();
        }, "zero_v");
        kb.wgmma_fence();
        for (unsigned kk = 0; kk < kKeys / 16; ++kk) {
          Value vDesc = kb.wgmma_descriptor(at(vT, kb.u32(kk * 16 * kStripRow), "v_step"), kKeys * kStripRow, kAtom, 128, "desc");
          acc = kb.wgmma_mma_async(c.dim, c.half(), acc, pf[kk], vDesc, kb.pred(true), false, true, "o");
        }
        kb.wgmma_commit_group();
        kb.wgmma_wait_group(0);
        next[4] = acc;
        kb.mbarrier_arrive(empty(stage));
        // Tile jt + 2 into this stage once every thread is done with it.
        leader([&] {
          kb.if_then(((jt + kStages) < nTiles).named("refill"), [&] {
            waitPhase(kb, empty(stage), parity, "empty_wait");
            issueKV(jt + kStages);
          }, "refill");
        });
        return next;
      },
      {.label = "key_tiles", .iv = "jt"});

  const Output dst{out, lse, (kb.mul_wide(b, seqQ)).named("q_first"), seqQ, qHeads, qh, b, scale2, t, {row0, row1}};
  const Value mRow[2] = {st[0], st[1]}, lRow[2] = {st[2], st[3]};
  storeRows(kb, c, dst, mRow, lRow, [&](unsigned tile, unsigned e) { return kb.extract(st[4], 4 * tile + e); });
  kb.ret();
  return finish(kb, m, diags);
}

LaunchRule launchPrefill90(const Options& o) {
  const Config c = configOf(o);
  using PScalar = bundle::ParamType::Scalar;
  const PScalar el = c.s == Storage::BF16 ? PScalar::BF16 : PScalar::F16;
  const Expr one(1), batch = Expr::param("batch");
  const Expr qCols = Expr::param("q_heads") * Expr(c.dim), kvCols = Expr::param("kv_heads") * Expr(c.dim);
  // Rows at least 1: an empty tensor has no map (nothing is launched then anyway).
  const Expr qRows = max(batch * Expr::param("seq_q"), one), kvRows = max(batch * Expr::param("kv_stride"), one);
  LaunchRule r;
  r.block = {kThreads};
  r.grid = {ceilDiv(Expr::param("seq_q"), Expr(kRows)), Expr::param("q_heads"), batch};
  r.dynamicShared = Expr(layoutOf(c).total() + kAtom);
  r.tensorMaps = {
      {"q_map", "q", el, {qCols, qRows}, qCols * Expr(2), {kStrip, kRows}, 128},
      {"k_map", "k", el, {kvCols, kvRows}, kvCols * Expr(2), {kStrip, kKeys}, 128},
      {"v_map", "v", el, {kvCols, kvRows}, kvCols * Expr(2), {kStrip, kKeys}, 128},
  };
  return r;
}

}  // namespace tn::kernels::lib::prefill
