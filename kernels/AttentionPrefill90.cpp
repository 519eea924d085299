// attention_prefill with mainloop = "wgmma" (docs/kernels.md, docs/hopper.md §4): the same
// kernel as kernels/AttentionPrefill.cpp on sm_90a's machinery. The tensors, options and results
// are the mma path's; varlen adds q_rows and kv_rows, the row counts of q and k/v (the extents of
// their tensor maps), and page_size kv_rows (kernels/AttentionPrefill.h: declareParams).
//
// Block (128 query rows, query head, sequence): three warpgroups, FA3's warp-specialized shape.
// Warpgroup 0 is the producer: it gives registers back (setmaxnreg.dec) and one elected thread
// of its first warp issues every TMA load. Warpgroups 1 and 2 are the consumers (setmaxnreg.inc):
// consumer c owns query rows 64c .. 64c + 63 of the block, 16 a warp, and both multiply the
// K/V tiles the producer brings (under a causal mask the first consumer may see one fewer), so a
// tile read from L2 serves 128 rows; the consumers take turns to issue S = Q K^T (FA3's
// ping-pong, two named barriers), so that while one runs its softmax the other's wgmma has the
// tensor cores. Tensor maps view q as [batch · seq_q rows, q_heads · head_dim] and
// k, v as [batch · kv_stride rows, kv_heads · head_dim] (v: v_head_dim; varlen: q_rows and kv_rows
// rows, and a sequence starts at its offset's row); a box is 64 elements (128 bytes) of one
// head by kRows (q) or kKeys (k, v) rows, 128B-swizzled, so a head_dim 128 tile is two strips of
// 64 elements, a 192 one (multi-head latent attention's q and k) three. Q is loaded once; K and V
// tiles of kKeys keys come through a 2-stage ring: full barriers (one per stage for K and for V:
// S = Q K^T starts before V is in) completed by TMA transaction bytes, empty barriers by the 256
// consumer threads once both wgmma groups of the stage are done; the producer waits for a stage
// to be empty before it loads the next tile into it.
//
// Sliding windows (window): the producer's tiles start at the block's first row's window, the
// ring's uses counted from there; each consumer multiplies from its own first row's window on and
// takes part in the block's tiles before it, as in those past its rows.
//
// Paged k and v (page_size, at least 8): the maps span the cache's kv_rows rows in boxes of
// min(page_size, kKeys) rows, and the producer loads a key tile as kKeys / page_size boxes, each
// from its page's table entry (one box inside a larger page). A box fills whole 8-row swizzle
// atoms at 1024-byte offsets, so the tile's shared layout, and every descriptor, is the
// contiguous case's.
//
// S = Q K^T: head_dim / 16 wgmma m64n(kKeys)k16, both operands K-major descriptors. Lane i of
// the v(kKeys/2).f32 accumulator is row 16 warp + g + 8 ((i >> 1) & 1), key 8 (i >> 2) + 2 t +
// (i & 1): the mma C layout per 8 keys, so the masks and the online softmax are the mma path's.
// O += P V: kKeys / 16 wgmma m64n(v_head_dim)k16 (two of n128 at 256, three of n64 at 192: O in
// pieces)
// with P's A fragments in registers (lanes 8 kk ... 8 kk + 7 of S, rounded to the storage type)
// and V an MN-major descriptor (head_dim contiguous).
//
// fp8 k and v (cache_dtype): TMA cannot convert, so a K or V tile's codes come by TMA as strips of
// 64 bytes a row (unswizzled, maps of u8) into a region of their own with barriers of their own
// (k_codes, v_codes), and the producer warpgroup's other three warps (96 threads) write their
// values into the tile as the 128B swizzle lays out bf16 or f16 (convertLines), fence the async
// proxy and arrive on k_full or v_full (count 96). A tile is free by the time its codes arrive:
// the producer loaded them after the consumers released the stage. k_scale is in the scores'
// scale (declareParams), v_scale in the outputs' 1 / l (storeRows). Head widths whose tiles and
// codes exceed shared memory (256 beside 192 or 256) are refused.
//
// Sequence ends: rows past the tensor are zero-filled by TMA, but rows past seq_k inside the
// tensor (the cache's spare rows, the next sequence) are loaded too. Their scores are masked to
// -inf (weight 0); their V rows are zeroed in shared memory before O += P V (each consumer
// thread its share, fence.proxy.async, then a named barrier of the 256 consumer threads: the
// producer takes no part), so that 0 · NaN cannot reach a row. Only a block's last
// tile can reach past seq_k. Special values are then the mma path's.
#include <algorithm>
#include <string>

#include "kernels/AttentionPrefill.h"

namespace tn::kernels::lib::prefill {

namespace {

using ir::Scalar;
using ir::SharedArray;
using ir::Type;

constexpr unsigned kWarpgroup = 128;
constexpr unsigned kThreads = 3 * kWarpgroup;  // the producer and two consumer warpgroups
constexpr unsigned kConsumers = 2;
constexpr unsigned kConsumerThreads = kConsumers * kWarpgroup;
constexpr unsigned kRows = kConsumers * 64;  // query rows of a block: 64 a consumer
// The producer's thread needs few; the rest of the 64K goes to the consumers (S, O and P in
// registers): 128 * 24 + 256 * 240 = 64512. With fp8 k and v the producer's other warps convert,
// in 40: 128 * 40 + 256 * 232 = 64512.
constexpr unsigned kProducerRegisters = 24, kConsumerRegisters = 240;
constexpr unsigned kConverterRegisters = 40, kConvertingConsumerRegisters = 232;
constexpr unsigned kConverters = 96;  // producer warps 1 - 3
constexpr unsigned kStages = 2;
constexpr unsigned kStrip = 64;         // elements of a box row: 128 bytes, the 128B swizzle span
constexpr unsigned kAtom = 1024;        // bytes of a 128B swizzle atom (8 rows); tiles start on one
constexpr unsigned kStripRow = 128;     // bytes of a strip row
// Named barriers among the 256 consumer threads (bar.sync 0 is the block's): V rows past seq_k
// zeroed; consumer 0's and consumer 1's turn to issue S = Q K^T.
constexpr unsigned kZeroedBarrier = 1, kTurnBarrier = 2;

// Byte layout of the dynamic shared memory from its 1024-aligned start: Q, then K stage 0 and 1,
// then V stage 0 and 1; each tile strip by strip (64 elements of every row). With fp8 k and v,
// then the codes of K stage 0 and 1 and of V stage 0 and 1, strip by strip (64 bytes a row).
// Q and K rows are head_dim elements, V rows v_head_dim.
struct Layout {
  unsigned qBytes, kBytes, vBytes;  // a Q, K and V tile
  unsigned kCodeBytes, vCodeBytes;  // a K and V tile's codes (0 without fp8)
  unsigned kAt(unsigned stage) const { return qBytes + stage * kBytes; }
  unsigned vAt(unsigned stage) const { return qBytes + kStages * kBytes + stage * vBytes; }
  unsigned kCodesAt(unsigned stage) const { return qBytes + kStages * (kBytes + vBytes) + stage * kCodeBytes; }
  unsigned vCodesAt(unsigned stage) const { return kCodesAt(kStages) + stage * vCodeBytes; }
  unsigned total() const { return qBytes + kStages * (kBytes + vBytes + kCodeBytes + vCodeBytes); }
};
Layout layoutOf(const Config& c, unsigned keys) {
  const bool codes = c.cache != Fp8::None;
  return {kRows * c.rowBytes(), keys * c.rowBytes(), keys * c.vRowBytes(), codes ? keys * c.dim : 0,
          codes ? keys * c.vdim : 0};
}
constexpr unsigned kSharedLimit = 227 * 1024;  // dynamic shared memory of a block on sm_90

// Keys of a K/V tile (the wgmma N of S = Q K^T): 128 where S and O fit in the consumers' registers
// (head_dim up to 192, v_head_dim up to 128) and the Q tile and two stages of K and V (and their
// codes) in shared memory with the alignment slack, else 64: at 256 a 64 KiB Q tile and 32 KiB K
// and V tiles, 193 KiB; at 192 beside 128 48 + 2 · (48 + 32) + 1 = 209 KiB with 128 keys, and with
// fp8 codes 64 keys (169 KiB).
unsigned keysOf(const Config& c) {
  if (c.dim > 192 || c.vdim > 128) return 64;
  return layoutOf(c, 128).total() + kAtom <= kSharedLimit ? 128 : 64;
}
Layout layoutOf(const Config& c) { return layoutOf(c, keysOf(c)); }

}  // namespace

std::optional<ir::Module> buildPrefill90(const Options& o, ir::Diagnostics& diags) {
  const Config c = configOf(o);  // head_dim and v_head_dim checked by the template (buildPrefill)
  const unsigned kKeys = keysOf(c);
  const bool codes = c.cache != Fp8::None;
  if (const unsigned bytes = layoutOf(c).total() + kAtom; bytes > kSharedLimit) {
    diags.report(ir::Severity::Error, "", {},
                 "cache_dtype = \"" + o.text("cache_dtype") + "\" with mainloop \"wgmma\" (or \"auto\") at head_dim " +
                     std::to_string(c.dim) + " and v_head_dim " + std::to_string(c.vdim) + " needs " +
                     std::to_string((bytes + 1023) / 1024) + " KiB of shared memory for its Q tile, two stages of K and "
                     "V tiles and their codes, more than an sm_90 block's 227 KiB; mainloop = \"mma\" takes it");
    return std::nullopt;
  }
  ir::Module m = newModule();
  if (c.fp8Cvt) m.ptx = std::max(m.ptx, kFp8CvtPtx);
  KernelBuilder kb(m, "attention_prefill");
  const Params p = declareParams(kb, c);
  const Value out = p.out, lse = p.lse, kvStride = p.kvStride, qHeads = p.qHeads, kvHeads = p.kvHeads, scale = p.scale;
  Value seqQ = p.seqQ, seqK = p.seqK;
  // Filled by the runtime from the launch rule's tensorMaps (views of q, k and v).
  Value qMap = kb.param(Type::of(Scalar::TensorMap), "q_map");
  Value kMap = kb.param(Type::of(Scalar::TensorMap), "k_map");
  Value vMap = kb.param(Type::of(Scalar::TensorMap), "v_map");
  // q, k and v are read only through the tensor maps.
  // setmaxnreg needs a register budget known at entry (TC§5.4): 384 threads, one block per SM
  // (its shared memory), so no occupancy warning either.
  kb.maxntid(kThreads);
  kb.minnctapersm(1);

  const Layout lay = layoutOf(c);
  const unsigned strips = c.dim / kStrip, vStrips = c.vdim / kStrip;  // of a Q or K row, of a V row
  // Barriers: Q's, then K full, V full and empty per stage; with fp8, then K's and V's codes.
  SharedArray bars = kb.shared("barriers", Type::of(Scalar::B64), 1 + (codes ? 5 : 3) * kStages, 8);
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
  auto kCodesFull = [&](Value stage) { return barrier(1 + 3 * kStages, stage, "k_codes"); };
  auto vCodesFull = [&](Value stage) { return barrier(1 + 4 * kStages, stage, "v_codes"); };

  Value tid = kb.tid(ir::Mod::X, "tid");
  // The last query tiles see the most keys under a causal mask: they go first.
  Value q0 = ((kb.nctaid(ir::Mod::X) - 1u - kb.ctaid(ir::Mod::X)) * kRows).named("q0");
  Value qh = kb.ctaid(ir::Mod::Y, "q_head"), b = kb.ctaid(ir::Mod::Z, "seq");
  // varlen: the sequence's lengths and first rows (u32: TMA coordinates are s32). A block whose
  // query tile starts past its sequence's end leaves before anything is set up.
  Value qFirst, kvFirst;
  if (c.varlen) {
    Sequence sq = loadSequence(kb, p.arrays, b);
    seqQ = sq.seqQ;
    seqK = sq.seqK;
    qFirst = sq.qFirst;
    kvFirst = sq.kvFirst;
    kb.if_then((q0 >= seqQ).named("past_end"), [&] { kb.ret(); }, "past_end");
  }
  Value nTiles = ((keyEnd(kb, c, q0, kRows, seqQ, seqK, p.windowRight) + (kKeys - 1)) / kKeys).named("tiles");
  // With a window, the block's tiles start at its first row's window: tiles [first, tiles), and the
  // ring's stages and phases count from there.
  Value firstTile = c.window ? (keyStart(kb, c, q0, seqQ, seqK, p.window) / kKeys).named("first_tile") : kb.u32(0);

  kb.if_then((tid == 0u).named("init"), [&] {
    kb.mbarrier_init(qFull, kb.u32(1));
    for (unsigned s = 0; s < kStages; ++s) {
      // With fp8 the converters complete K's and V's tiles, TMA the codes'.
      kb.mbarrier_init(kFull(kb.u32(s)), kb.u32(codes ? kConverters : 1));
      kb.mbarrier_init(vFull(kb.u32(s)), kb.u32(codes ? kConverters : 1));
      kb.mbarrier_init(empty(kb.u32(s)), kb.u32(kConsumerThreads));
      if (codes) {
        kb.mbarrier_init(kCodesFull(kb.u32(s)), kb.u32(1));
        kb.mbarrier_init(vCodesFull(kb.u32(s)), kb.u32(1));
      }
    }
  }, "init_barriers");
  kb.bar_sync();  // the barriers are set up

  auto kTile = [&](Value stage) { return at(tiles, (stage * lay.kBytes + lay.kAt(0)).named("k_off"), "k_tile"); };
  auto vTile = [&](Value stage) { return at(tiles, (stage * lay.vBytes + lay.vAt(0)).named("v_off"), "v_tile"); };
  auto kCodes = [&](Value stage) {
    return at(tiles, (stage * lay.kCodeBytes + lay.kCodesAt(0)).named("k_codes_off"), "k_codes");
  };
  auto vCodes = [&](Value stage) {
    return at(tiles, (stage * lay.vCodeBytes + lay.vCodesAt(0)).named("v_codes_off"), "v_codes");
  };

  // The producer thread: Q, then K/V tile j into stage j % 2 once the consumers emptied it.
  auto produce = [&] {
    // Tensor-map coordinates (s32): element c0 of the row c1 of the 2-D views.
    auto s32 = [&](Value x) { return kb.bitcast(x, Type::s32()); };
    // Rows past the sequence's ends are loaded too: another sequence's, or zeros past the tensor;
    // the masks and the V zeroing below treat them as they treat those past seq_q and seq_k.
    Value qRow0 = (c.varlen ? qFirst + q0 : b * seqQ + q0).named("q_row0");
    Value kvRow0 = c.pageSize ? Value() : (c.varlen ? kvFirst : b * kvStride).named("kv_row0");
    Value qCol0 = (qh * c.dim).named("q_col0");
    Value kvHead = kvHeadOf(kb, qh, qHeads, kvHeads);
    Value kCol0 = (kvHead * c.dim).named("k_col0");
    Value vCol0 = c.vdim == c.dim ? kCol0 : (kvHead * c.vdim).named("v_col0");
    // A tile of `n` strips; a strip row: 128 bytes of bf16 or f16, 64 of fp8 codes (k and v with
    // cache_dtype).
    auto loadTile = [&](Value map, Value dst, unsigned n, unsigned rows, Value col0, Value row0, Value bar,
                        unsigned rowBytes = kStripRow) {
      for (unsigned s = 0; s < n; ++s)
        kb.tma_load_2d(s == 0 ? dst : at(dst, kb.u32(s * rows * rowBytes), "strip"), map, s32(col0 + s * kStrip),
                       s32(row0), bar);
    };
    const unsigned kvRowBytes = codes ? kStrip : kStripRow;
    // Paged: a key tile is kKeys / boxRows boxes of one page each. Box i of tile j holds positions
    // from j kKeys + i boxRows; one past the sequence's last page (only in its last tile, whose
    // rows past seq_k are masked and zeroed) is read from that last page instead, so that no
    // table entry past the sequence's pages is read.
    const unsigned boxRows = c.pageSize ? std::min(c.pageSize, kKeys) : kKeys;
    Value pages = c.pageSize ? kb.index(p.table, (b * p.maxPages).named("table_row"), 4, "pages") : Value();
    auto loadKv = [&](Value map, Value dst, unsigned n, Value kvCol0, Value j, Value bar) {
      if (!c.pageSize)
        return loadTile(map, dst, n, kKeys, kvCol0, (kvRow0 + j * kKeys).named("kv_row"), bar, kvRowBytes);
      Value lastKey = (seqK - 1u).named("last_key");  // a tile is loaded: seq_k > 0
      auto box = [&](Value i) {
        Value pos = kb.min((j * kKeys + i * boxRows).named("box_pos"), lastKey, "box_key");
        Value row = pagedRow(kb, pages, pos, c.pageSize);
        loadTile(map, at(dst, (i * (boxRows * kvRowBytes)).named("box_off"), "box"), n, kKeys, kvCol0, row, bar,
                 kvRowBytes);
      };
      if (boxRows == kKeys) return box(kb.u32(0));
      kb.for_range(kb.u32(0), kb.u32(kKeys / boxRows), kb.u32(1), [&](Value i) { box(i); }, {.label = "boxes", .iv = "i"});
    };
    kb.mbarrier_arrive_expect_tx(qFull, kb.u32(lay.qBytes));
    loadTile(qMap, tiles, strips, kRows, qCol0, qRow0, qFull);
    kb.for_range(
        firstTile, nTiles, kb.u32(1),
        [&](Value j) {
          Value use = (j - firstTile).named("use");
          Value stage = (use & 1u).named("stage");
          // Use u / 2 of the stage waits for the consumers' release of use u / 2 - 1; a fresh
          // barrier has not completed the phase before its first, so the first use passes at
          // once (TC§5.3).
          waitPhase(kb, empty(stage), ((use >> 1u) & 1u) ^ 1u, "empty_wait");
          if (codes) {
            kb.mbarrier_arrive_expect_tx(kCodesFull(stage), kb.u32(lay.kCodeBytes));
            loadKv(kMap, kCodes(stage), strips, kCol0, j, kCodesFull(stage));
            kb.mbarrier_arrive_expect_tx(vCodesFull(stage), kb.u32(lay.vCodeBytes));
            loadKv(vMap, vCodes(stage), vStrips, vCol0, j, vCodesFull(stage));
            return;
          }
          kb.mbarrier_arrive_expect_tx(kFull(stage), kb.u32(lay.kBytes));
          loadKv(kMap, kTile(stage), strips, kCol0, j, kFull(stage));
          kb.mbarrier_arrive_expect_tx(vFull(stage), kb.u32(lay.vBytes));
          loadKv(vMap, vTile(stage), vStrips, vCol0, j, vFull(stage));
        },
        {.label = "kv_tiles", .iv = "j"});
  };

  // fp8 k and v: producer warps 1 - 3 turn each tile's codes into its values, K then V, as the
  // producer walks the tiles.
  auto convert = [&] {
    Value first = (tid - 32u).named("converter");
    kb.for_range(
        firstTile, nTiles, kb.u32(1),
        [&](Value j) {
          Value use = (j - firstTile).named("use");
          Value stage = (use & 1u).named("stage"), parity = ((use >> 1u) & 1u).named("parity");
          waitPhase(kb, kCodesFull(stage), parity, "k_codes_wait");
          convertLines(kb, kCodes(stage), kTile(stage), strips * kKeys, first, kConverters, c.half(), c.cache, c.fp8Cvt);
          kb.fence_proxy_async();
          kb.mbarrier_arrive(kFull(stage));
          waitPhase(kb, vCodesFull(stage), parity, "v_codes_wait");
          convertLines(kb, vCodes(stage), vTile(stage), vStrips * kKeys, first, kConverters, c.half(), c.cache,
                       c.fp8Cvt);
          kb.fence_proxy_async();
          kb.mbarrier_arrive(vFull(stage));
        },
        {.label = "convert_tiles", .iv = "j"});
  };

  // A consumer warpgroup: its 64 query rows against the key tiles they see.
  auto consume = [&](Value consumer) {
    Value ctid = (tid - kWarpgroup).named("consumer_tid");
    Value lane = (tid & 31u).named("lane"), warp = ((tid >> 5u) & 3u).named("warp");
    Value g = (lane >> 2u).named("g"), t = (lane & 3u).named("t");
    // Descriptors: K-major 128B-swizzled strips (rows 128 bytes apart, 8-row atoms 1024 apart); k
    // step kk is 32 bytes into strip kk / 4. V: MN-major, strips kKeys · 128 bytes apart (LBO), key
    // groups of 8 an atom apart (SBO); key step kk starts 16 rows in.
    auto kMajor = [&](Value tile, unsigned stripBytes, unsigned kk) {
      return kb.wgmma_descriptor(at(tile, kb.u32((kk / 4) * stripBytes + (kk % 4) * 32), "k_step"), 16, kAtom, 128, "desc");
    };
    // The consumer's 64 rows of Q: 8 atoms into each strip.
    Value qSlice = at(tiles, (consumer * (64 * kStripRow)).named("q_slice_off"), "q_slice");
    // O in pieces of at most 128 columns (v_head_dim 256: two v64.f32 accumulators, one wgmma n128
    // each per key step; 192: three of n64, a V strip each, as the IR's wide vectors have
    // power-of-two lanes), rescaled one at a time, so that the old and the new values of a piece,
    // not of all of O, are live together.
    const unsigned pieceN = c.vdim % 128 == 0 ? std::min(c.vdim, 128u) : 64u, pieces = c.vdim / pieceN;
    const unsigned oLanes = pieceN / 2;
    const unsigned sLanes = kKeys / 2;
    const Type sType = Type::of(Scalar::F32, sLanes), oType = Type::of(Scalar::F32, oLanes);
    Value zero = kb.f32(0.0f);
    Value oZero = kb.pack(oType, std::vector<Value>(oLanes, zero), "o_zero");
    Value scale2 = (scale * kLog2e).named("scale2");
    Value qw = (q0 + consumer * 64u).named("q_first_row");
    Value row0 = (qw + warp * 16u + g).named("row_g"), row1 = (row0 + 8u).named("row_g8");
    const Softmax sm = softmaxOf(kb, c, p, seqQ, seqK, qw, t, scale2, row0, row1, qh, b);
    // V rows past seq_k: zeros (whole 128-byte strip rows; the swizzle permutes within a row), by
    // both consumers, each thread its chunks, then named barrier kZeroedBarrier among the 256.
    // Only a block's last tile reaches past seq_k, whichever of the loops below takes it.
    auto zeroPastEnd = [&](Value vT, Value k0) {
      kb.if_then((k0 + kKeys > seqK).named("partial_v"), [&] {
        Value valid = (seqK - k0).named("valid_keys");
        const unsigned chunks = kKeys * vStrips * (kStripRow / 16);
        Value zeros = kb.pack(Type::of(Scalar::B32, 4), std::vector<Value>(4, kb.b32(0)), "zeros");
        for (unsigned r = 0; r < chunks / kConsumerThreads; ++r) {
          Value chunk = (ctid + r * kConsumerThreads).named("chunk");
          Value row = ((chunk >> 3u) % kKeys).named("v_row");  // 8 chunks a strip row
          kb.if_then((row >= valid).named("past_end"), [&] { kb.store(at(vT, chunk << 4u, "v_chunk"), zeros); }, "zero_row");
        }
        kb.fence_proxy_async();
        kb.bar_named_sync(kZeroedBarrier, kConsumerThreads);
      }, "zero_v");
    };
    // FA3's ping-pong: the consumers take turns to issue S = Q K^T, consumer c waiting at named
    // barrier kTurnBarrier + c for the other's arrival, so that one's softmax and O += P V run
    // while the other's S = Q K^T has the tensor cores. Consumer 1 gives consumer 0 the first
    // turn; every tile of the block is a turn of each (of the second loop below too, which
    // multiplies nothing), so the two stay in step whatever tiles they multiply. Consumer 1's
    // last arrival is left unmatched when the block ends.
    Value first = (consumer == 0u).named("first_consumer");
    auto takeTurn = [&] {
      kb.if_else(first, [&] { kb.bar_named_sync(kTurnBarrier, kConsumerThreads); },
                 [&] { kb.bar_named_sync(kTurnBarrier + 1, kConsumerThreads); }, {.label = "take_turn"});
    };
    auto passTurn = [&] {
      kb.if_else(first, [&] { kb.bar_named_arrive(kTurnBarrier + 1, kConsumerThreads); },
                 [&] { kb.bar_named_arrive(kTurnBarrier, kConsumerThreads); }, {.label = "pass_turn"});
    };
    // The tiles some row of this consumer sees (none when its rows are past seq_q): the block's
    // other tiles it only takes part in (the V zeroing, the stage's release), so that a NaN in V
    // reaches no more of its rows than in the mma path's 64-row blocks.
    Value mine = kb.select((qw < seqQ).named("has_rows"), (keyEnd(kb, c, qw, 64, seqQ, seqK, p.windowRight) + (kKeys - 1)) / kKeys,
                           kb.u32(0), "my_tiles");
    // With a window: the tiles [firstTile, myFirst) before this consumer's first row's window are
    // other tiles too; the ones it multiplies are [myFirst, myEnd).
    Value myFirst = firstTile, myEnd = mine;
    if (c.window) {
      Value own = (keyStart(kb, c, qw, seqQ, seqK, p.window) / kKeys).named("own_first");
      myFirst = kb.max(firstTile, kb.min(own, nTiles), "my_first");
      myEnd = kb.max(myFirst, mine, "my_end");
    }
    // A tile this consumer does not multiply: taken part in (turns, V zeroing, the release).
    auto otherTiles = [&](Value from, Value to, const char* label) {
      kb.for_range(
          from, to, kb.u32(1),
          [&](Value jt) {
            Value use = (jt - firstTile).named("use");
            Value stage = (use & 1u).named("stage"), parity = ((use >> 1u) & 1u).named("parity");
            // Both of the tile's copies waited for, as in the loop below: no TMA write may land in
            // the block's shared memory after it exits, and the release must follow the
            // producer's wait for the stage's previous use.
            waitPhase(kb, kFull(stage), parity, "k_wait");
            takeTurn();
            passTurn();
            waitPhase(kb, vFull(stage), parity, "v_wait");
            zeroPastEnd(vTile(stage), (jt * kKeys).named("k0"));
            kb.mbarrier_arrive(empty(stage));
          },
          {.label = label, .iv = "jt"});
    };
    waitPhase(kb, qFull, kb.u32(0), "q_wait");
    kb.if_then(!first, [&] { kb.bar_named_arrive(kTurnBarrier, kConsumerThreads); }, "first_turn");

    if (c.window) otherTiles(firstTile, myFirst, "before_tiles");
    // Carried: m and l of rows g and g + 8, then O's pieces.
    std::vector<Value> init = softmaxStart(kb, sm, zero);
    init.insert(init.end(), pieces, oZero);
    std::vector<Value> st = kb.for_range(
        myFirst, myEnd, kb.u32(1), init,
        [&](Value jt, std::span<Value> carried) {
          Value k0 = (jt * kKeys).named("k0");
          Value use = (jt - firstTile).named("use");
          Value stage = (use & 1u).named("stage"), parity = ((use >> 1u) & 1u).named("parity");
          Value kT = kTile(stage);
          Value vT = vTile(stage);
          waitPhase(kb, kFull(stage), parity, "k_wait");
          // Not read (scale-d is false for the first k step); a value of its own each tile, as a
          // wgmma accumulator has one use (the result takes its registers).
          Value s = kb.pack(sType, std::vector<Value>(sLanes, zero), "s_zero");
          takeTurn();
          kb.wgmma_fence();
          for (unsigned kk = 0; kk < c.dim / 16; ++kk)
            s = kb.wgmma_mma_async(kKeys, c.half(), s, kMajor(qSlice, kRows * kStripRow, kk),
                                   kMajor(kT, kKeys * kStripRow, kk), kb.pred(kk > 0), false, false, "s");
          kb.wgmma_commit_group();
          passTurn();
          kb.wgmma_wait_group(0);

          std::vector<Value> sv;
          for (unsigned i = 0; i < sLanes; ++i) sv.push_back(kb.extract(s, i, "score"));
          std::vector<Value> next(carried.begin(), carried.end());
          Value m[2] = {carried[0], carried[1]}, l[2] = {carried[2], carried[3]}, corr[2];
          std::vector<Value> pf = softmaxTile(kb, c, sm, k0, kKeys, sv, m, l, corr);
          next[0] = m[0], next[1] = m[1], next[2] = l[0], next[3] = l[1];
          std::vector<Value> acc(pieces);
          for (unsigned h = 0; h < pieces; ++h) {
            std::vector<Value> o;
            for (unsigned i = 0; i < oLanes; ++i) o.push_back(kb.extract(carried[4 + h], i) * corr[(i >> 1) & 1]);
            acc[h] = kb.pack(oType, o, "o_scaled");
          }

          waitPhase(kb, vFull(stage), parity, "v_wait");
          zeroPastEnd(vT, k0);
          kb.wgmma_fence();
          // Piece h multiplies V's strips from h * pieceN / kStrip on (strips kKeys rows apart).
          for (unsigned kk = 0; kk < kKeys / 16; ++kk)
            for (unsigned h = 0; h < pieces; ++h) {
              const unsigned off = kk * 16 * kStripRow + h * (pieceN / kStrip) * kKeys * kStripRow;
              Value vDesc = kb.wgmma_descriptor(at(vT, kb.u32(off), "v_step"), kKeys * kStripRow, kAtom, 128, "desc");
              acc[h] = kb.wgmma_mma_async(pieceN, c.half(), acc[h], pf[kk], vDesc, kb.pred(true), false, true, "o");
            }
          kb.wgmma_commit_group();
          kb.wgmma_wait_group(0);
          for (unsigned h = 0; h < pieces; ++h) next[4 + h] = acc[h];
          kb.mbarrier_arrive(empty(stage));  // the producer may refill the stage
          return next;
        },
        {.label = "key_tiles", .iv = "jt"});
    otherTiles(myEnd, nTiles, "other_tiles");

    Value outFirst = (c.varlen ? kb.cvt(qFirst, Type::u64()) : kb.mul_wide(b, seqQ)).named("q_first");
    const Output dst{out, lse, outFirst, seqQ, qHeads, qh, b, scale2, t, {row0, row1}, p.vScale};
    const Value mRow[2] = {st[0], st[1]}, lRow[2] = {st[2], st[3]};
    // Output tile j (8 columns) is in piece j / (pieceN / 8), at lanes 4 (j % (pieceN / 8)) + e.
    const unsigned tilesPerPiece = pieceN / 8;
    storeRows(kb, c, dst, mRow, lRow, [&](unsigned tile, unsigned e) {
      return kb.extract(st[4 + tile / tilesPerPiece], 4 * (tile % tilesPerPiece) + e);
    });
  };

  if (codes)
    warpSpecialize(kb, tid, kConverterRegisters, kConvertingConsumerRegisters, produce, consume, convert);
  else
    warpSpecialize(kb, tid, kProducerRegisters, kConsumerRegisters, produce, consume);
  kb.ret();
  return finish(kb, m, diags);
}

LaunchRule launchPrefill90(const Options& o) {
  const Config c = configOf(o);
  const unsigned kKeys = keysOf(c);
  using PScalar = bundle::ParamType::Scalar;
  const PScalar el = c.s == Storage::BF16 ? PScalar::BF16 : PScalar::F16;
  // fp8 k and v: maps of u8 codes, strips of 64 a row unswizzled (the converters read them).
  const bool codes = c.cache != Fp8::None;
  const PScalar kvEl = codes ? PScalar::U8 : el;
  const unsigned kvSwizzle = codes ? 0 : 128;
  const Expr one(1), batch = Expr::param("batch");
  const Expr qCols = Expr::param("q_heads") * Expr(c.dim), kCols = Expr::param("kv_heads") * Expr(c.dim);
  const Expr vCols = Expr::param("kv_heads") * Expr(c.vdim);
  // Rows at least 1: an empty tensor has no map (nothing is launched then anyway).
  const Expr qRows = max(c.varlen ? Expr::param("q_rows") : batch * Expr::param("seq_q"), one);
  const Expr kvRows = max(c.varlen || c.pageSize ? Expr::param("kv_rows") : batch * Expr::param("kv_stride"), one);
  const unsigned kvBox = c.pageSize ? std::min(c.pageSize, kKeys) : kKeys;  // a box: rows of one page
  auto rowBytes = [&](const Expr& cols) { return codes ? cols : cols * Expr(2); };
  LaunchRule r;
  r.block = {kThreads};
  r.grid = {ceilDiv(Expr::param(c.varlen ? "max_seq_q" : "seq_q"), Expr(kRows)), Expr::param("q_heads"), batch};
  r.dynamicShared = Expr(layoutOf(c).total() + kAtom);
  r.tensorMaps = {
      {"q_map", "q", el, {qCols, qRows}, {qCols * Expr(2)}, {kStrip, kRows}, 128},
      {"k_map", "k", kvEl, {kCols, kvRows}, {rowBytes(kCols)}, {kStrip, kvBox}, kvSwizzle},
      {"v_map", "v", kvEl, {vCols, kvRows}, {rowBytes(vCols)}, {kStrip, kvBox}, kvSwizzle},
  };
  return r;
}

}  // namespace tn::kernels::lib::prefill
