// The wgmma members of gemm (mainloop = "wgmma", sm_90a; docs/kernels.md, docs/hopper.md §4):
// bf16 and f16 with f32 accumulation on Hopper's warpgroup tensor cores, fed by TMA through an
// mbarrier ring, with warp specialization and persistent tiles. fp8 A and B (dtype fp8_e4m3 /
// fp8_e5m2, row-major A and column-major B only: wgmma reads fp8 K-major) are the same kernel
// over bytes: a stage's rows of 128 bytes hold 128 codes, each of its four k-steps a wgmma k32.
//
// Block: 3 warpgroups (384 threads). Warpgroup 0 is the producer: it gives registers back
// (setmaxnreg.dec 40) and one elected thread of its first warp issues the TMA loads. Warpgroups
// 1 and 2 are the consumers (setmaxnreg.inc 232): consumer c owns rows 64c .. 64c + 63 of the
// block's 128 x tile_n tile of C, a v(tile_n/2).f32 accumulator per thread (TC§4.2's layout).
// The grid is min(tiles, blocks): block b computes tiles b, b + grid, ...; the producer and the
// consumers walk the same sequence, so the ring's stage and phase run on across tiles. The tiles
// of a strided batch follow one another (batch z's tiles after batch z - 1's): A and B are 3-D
// tensor maps whose third coordinate is the batch (0 for a stride of 0: one matrix for every
// batch), C, bias and residual are offset per batch by the epilogue as in the other members.
//
// Shared memory (dynamic, aligned to 1024 bytes so that every tile starts a 128-byte swizzle
// pattern): `stages` stages, each the A tile (128 x 64 elements) then the B tile (64 x tile_n),
// 128-byte swizzled as TMA writes them. K-major operands (row-major A, column-major B) are one
// box of 64 K elements by the tile's rows, 128 bytes per row; M- or N-major ones (column-major A,
// row-major B) are strips of 64 rows (along M or N) by 64 K rows, 8 KiB each, read by wgmma
// transposed. Barriers: full[s] (count 1: the producer's arrive.expect_tx, completed by the TMA
// bytes) and empty[s] (count 8: lane 0 of each consumer warp once its wgmmas have read stage s).
//
// Each k block (64 elements of K) is four wgmma m64nNk16 per consumer, committed as one group;
// a consumer keeps one group in flight (wait_group 1) and releases a stage once the group that
// read it is done, the last one of a tile after wait_group 0. K, M and N edges need nothing: TMA fills the parts of
// a box outside the matrix with zeros, and the epilogue stores only rows < m and columns < n.
// The tensor maps need 16-byte aligned a and b, lda and ldb multiples of 8 elements, and with
// batch > 1 stride_a and stride_b multiples of 8 elements (or 0); the runtime refuses other
// launches (cuTensorMapEncodeTiled).
//
// fp8 B (b_dtype): TMA cannot convert, so B's codes come in by TMA as lines of 64 bytes (a line:
// an N row of K-major B, a K row of a 64-wide strip of MN-major B) into a third region of the
// stage, completing a barrier of their own (codes[s]); producer warps 1 - 3 (96 threads, the
// converters) wait for it, write each line's 64 values in A's type into the B tile as the
// 128-byte swizzle lays them out (the same line's 128 bytes; chunk c at c ^ (line & 7)), fence
// the async proxy and arrive on full[s], whose count is then 1 + 96. B's stage is free when its
// codes arrive: the producer waited for empty[s] before it loaded them.
//
// experts (a grouped GEMM, MoE prefill): B's map has n_experts planes (stride_b apart); every role
// reads each tile's expert (tile_experts[m0 / 128]) in forTiles and skips a tile of none, the
// producer loads the expert's plane (an unknown expert's: plane 0), and the epilogue stores NaN
// for an unknown expert and takes its bias and b_scales rows.
//
// split_k: the persistent blocks walk tiles x splits work units, the producer and the consumers
// the same K range of each; the consumers' epilogue goes through reduceSplits (kernels/Gemm.cpp),
// the 256 consumer threads holding the tile's accumulators.
#include "kernels/Gemm.h"

namespace tn::kernels::lib::gemm {

namespace {

using ir::BlockId;
using ir::Mod;
using ir::Scalar;
using ir::SharedArray;
using ir::Type;

constexpr unsigned kTileM = 128;      // two consumer warpgroups of 64 rows
constexpr unsigned kKBlock = 64;      // K elements per stage: 128 bytes of bf16/f16 (kBlockOf: fp8 128)
constexpr unsigned kStrip = 64;       // rows of one 128-byte-swizzled strip along M or N
constexpr unsigned kStripBytes = kStrip * kKBlock * 2;  // 8 KiB
constexpr unsigned kSwizzle = 128;
constexpr unsigned kConsumerWarps = 8;
constexpr unsigned kProducerRegisters = 40, kConsumerRegisters = 232;

// K elements per stage: rows of 128 bytes, 128 fp8 codes (dtype fp8) or 64 of bf16/f16.
unsigned kBlockOf(const Config& c) { return c.codes() != Fp8::None ? 2 * kKBlock : kKBlock; }
unsigned aBytes() { return kTileM * kKBlock * 2; }
unsigned bBytes(const Config& c) { return c.tileN * kKBlock * 2; }
unsigned stageBytes(const Config& c) { return aBytes() + bBytes(c); }
// fp8 B: its codes, a line of 64 a row of the B tile; and a stage of the ring with them.
constexpr unsigned kConverters = 96;  // producer warps 1 - 3
unsigned codesBytes(const Config& c) { return c.bCodes == Fp8::None ? 0 : c.tileN * kKBlock; }
unsigned ringBytes(const Config& c) { return stageBytes(c) + codesBytes(c); }
constexpr unsigned kSharedLimit = 227 * 1024;  // dynamic shared memory of a block on sm_90

// The ring position after (stage, phase): the next stage, the phase flipping when it wraps.
std::pair<Value, Value> advance(KernelBuilder& kb, const Config& c, Value stage, Value phase) {
  Value next = (stage + 1u).named("stage_next");
  Value wrap = (next == c.stages).named("wrap");
  return {kb.select(wrap, kb.u32(0), next, "stage"), (phase ^ kb.select(wrap, kb.u32(1), kb.u32(0))).named("phase")};
}

Value s32(KernelBuilder& kb, Value v) { return kb.bitcast(v, Type::s32()); }

struct Ring {
  SharedArray tiles, full, empty, codes;
  Value tileBase, fullBase, emptyBase, codesBase;
  Value stageA(KernelBuilder& kb, const Config& c, Value s) const {
    return kb.ptradd(tileBase, s * ringBytes(c), "stage_a");
  }
  Value stageB(KernelBuilder& kb, const Config& c, Value s) const {
    return kb.ptradd(tileBase, s * ringBytes(c) + aBytes(), "stage_b");
  }
  Value stageCodes(KernelBuilder& kb, const Config& c, Value s) const {
    return kb.ptradd(tileBase, s * ringBytes(c) + stageBytes(c), "stage_codes");
  }
  Value fullBar(KernelBuilder& kb, Value s) const { return kb.ptradd(fullBase, s << 3u, "full"); }
  Value emptyBar(KernelBuilder& kb, Value s) const { return kb.ptradd(emptyBase, s << 3u, "empty"); }
  Value codesBar(KernelBuilder& kb, Value s) const { return kb.ptradd(codesBase, s << 3u, "codes_full"); }
};

// The work of this block: for unit = ctaid.x; unit < units; unit += nctaid.x, a unit being a tile
// (M runs fastest, then N, then the batch), or with split_k a tile's split (unit = tile * splits
// + split), with (m0, n0) the tile's first row and column, z its batch and the ring position
// carried. Experts: also the M tile's expert (tile_experts[m0 / 128]); a tile of none is skipped
// by every role alike (the ring position carried past it unchanged).
template <class F>
std::vector<Value> forTiles(KernelBuilder& kb, const Config& c, const Params& p, std::vector<Value> carried, F&& body) {
  Value tilesM = ((p.m + (kTileM - 1)) / kTileM).named("tiles_m");  // m < 2^32 - 127: see the launch rule
  Value tilesN = ((p.n + (c.tileN - 1)) / c.tileN).named("tiles_n");
  Value perBatch = (tilesM * tilesN).named("batch_tiles");
  Split split;
  // Below 2^32 wherever C fits in memory: a tile past the first of a batch holds 129 rows or more.
  split.tiles = (perBatch * p.batch).named("tiles");
  if (c.splitK) split.count = kb.max(p.splits, kb.u32(1), "splits");
  Value units = c.splitK ? (split.tiles * split.count).named("units") : split.tiles;
  return kb.for_range(
      kb.ctaid(Mod::X), units, kb.nctaid(Mod::X), std::move(carried),
      [&](Value unit, std::span<Value> ring) {
        Split s = split;
        s.tile = c.splitK ? (unit / s.count).named("tile") : unit;
        if (c.splitK) s.index = (unit % s.count).named("split");
        Value z = (s.tile / perBatch).named("batch_index");
        Value inBatch = (s.tile - z * perBatch).named("batch_tile");
        Value mTile = (inBatch % tilesM).named("m_tile");
        Value m0 = (mTile * kTileM).named("m0");
        Value n0 = ((inBatch / tilesM) * c.tileN).named("n0");
        std::vector<Value> pos(ring.begin(), ring.end());
        if (!c.experts) return body(m0, n0, z, s, pos, Value());
        Value expert = kb.load(kb.index(p.tileExperts, mTile, 4), Type::u32(), {Mod::NcMod}, "expert");
        return kb.if_else((expert != kNoExpert).named("has_tile"), [&] { return body(m0, n0, z, s, pos, expert); },
                          [&] { return pos; }, {.label = "expert_tile"});
      },
      {.label = "tiles", .iv = c.splitK ? "unit" : "tile"});
}

// The third coordinate of an operand's box: its batch, or 0 when its stride is 0 (every batch
// multiplies the same matrix; the map's plane stride is then the matrix's own size).
Value planeOf(KernelBuilder& kb, Value stride, Value z, std::string_view name) {
  return kb.select((stride == uint64_t{0}).named("shared_operand"), kb.u32(0), z, name);
}

Value kBlocks(const Config& c, const Params& p) {
  return ((p.k + (kBlockOf(c) - 1)) / kBlockOf(c)).named("k_blocks");
}

// The producer thread: for every k block of every tile, wait until the consumers released the
// stage, announce its bytes and issue its TMA loads.
void produce(KernelBuilder& kb, const Config& c, const Params& p, const Ring& ring, Value aMap, Value bMap) {
  Value zero = kb.u32(0);
  forTiles(kb, c, p, {zero, zero}, [&](Value m0, Value n0, Value z, const Split& split, std::vector<Value> pos, Value expert) {
    const StepRange range = splitSteps(kb, split, kBlocks(c, p));
    // Experts: B's plane is the tile's expert (an unknown one's tile multiplies expert 0's, and
    // the epilogue stores NaN).
    Value za = s32(kb, planeOf(kb, p.strideA, z, "a_plane"));
    Value zb = s32(kb, c.experts ? kb.select(expert < p.nExperts, expert, kb.u32(0), "b_plane")
                                 : planeOf(kb, p.strideB, z, "b_plane"));
    return kb.for_range(
        zero, range.count, kb.u32(1), pos,
        [&](Value kblock, std::span<Value> at) {
          Value s = at[0], phase = at[1];
          Value k0 = ((range.first + kblock) * kBlockOf(c)).named("k0");
          // A fresh barrier has not completed the phase before its first, so waiting for parity
          // phase ^ 1 passes at once on the first lap (TC§5.3).
          waitPhase(kb, ring.emptyBar(kb, s), phase ^ 1u);
          Value full = ring.fullBar(kb, s);
          const bool codes = c.bCodes != Fp8::None;
          kb.mbarrier_arrive_expect_tx(full, kb.u32(codes ? aBytes() : stageBytes(c)));
          Value a = ring.stageA(kb, c, s), b = codes ? ring.stageCodes(kb, c, s) : ring.stageB(kb, c, s);
          Value bFull = full;
          if (codes) {
            bFull = ring.codesBar(kb, s);
            kb.mbarrier_arrive_expect_tx(bFull, kb.u32(codesBytes(c)));
          }
          // A strip of MN-major B: 64 lines of 64 elements, 2 bytes each (1: codes).
          const unsigned bStrip = kStrip * kKBlock * (codes ? 1 : 2);
          if (c.a == Layout::Row) {
            kb.tma_load_3d(a, aMap, s32(kb, k0), s32(kb, m0), za, full);
          } else {
            for (unsigned i = 0; i < kTileM / kStrip; ++i)
              kb.tma_load_3d(kb.ptradd(a, kb.u32(i * kStripBytes)), aMap, s32(kb, m0 + i * kStrip), s32(kb, k0), za, full);
          }
          if (c.b == Layout::Col) {
            kb.tma_load_3d(b, bMap, s32(kb, k0), s32(kb, n0), zb, bFull);
          } else {
            for (unsigned i = 0; i < c.tileN / kStrip; ++i)
              kb.tma_load_3d(kb.ptradd(b, kb.u32(i * bStrip)), bMap, s32(kb, n0 + i * kStrip), s32(kb, k0), zb, bFull);
          }
          auto [s2, phase2] = advance(kb, c, s, phase);
          return std::vector<Value>{s2, phase2};
        },
        {.label = "kblocks", .iv = "kblock"});
  });
}

// fp8 B's converters (producer warps 1 - 3): for every k block of every tile, as the producer
// walks them, wait for the stage's codes, write their values into its B tile (convertLines: as
// TMA writes a bf16 or f16 B for the same descriptors) and arrive on full[s].
void convert(KernelBuilder& kb, const Config& c, const Params& p, const Ring& ring, Value tid) {
  const Scalar half = c.in == Input::BF16 ? Scalar::BF16 : Scalar::F16;
  Value zero = kb.u32(0);
  Value first = (tid - 32u).named("converter");
  forTiles(kb, c, p, {zero, zero}, [&](Value, Value, Value, const Split& split, std::vector<Value> pos, Value) {
    const StepRange range = splitSteps(kb, split, kBlocks(c, p));
    return kb.for_range(
        zero, range.count, kb.u32(1), pos,
        [&](Value, std::span<Value> at) {
          Value s = at[0], phase = at[1];
          waitPhase(kb, ring.codesBar(kb, s), phase);
          convertLines(kb, ring.stageCodes(kb, c, s), ring.stageB(kb, c, s), c.tileN, first, kConverters, half, c.bCodes,
                       c.fp8Cvt);
          // The values are for wgmma (the async proxy), then announced.
          kb.fence_proxy_async();
          kb.mbarrier_arrive(ring.fullBar(kb, s));
          auto [s2, phase2] = advance(kb, c, s, phase);
          return std::vector<Value>{s2, phase2};
        },
        {.label = "kblocks", .iv = "kblock"});
  });
}

// The descriptor of K step j (16 elements) of a 64-row operand slice starting at `slice`.
// K-major: rows of 128 bytes, 8-row groups 1024 bytes apart, the step 32 bytes into the row.
// M/N-major: K rows of 128 bytes (64 elements along M or N), 8 K rows 1024 bytes apart, strips
// of 64 along M or N 8 KiB apart, the step 16 K rows on.
Value descriptor(KernelBuilder& kb, Value slice, bool kMajor, unsigned j) {
  if (kMajor) return kb.wgmma_descriptor(kb.ptradd(slice, kb.u32(32 * j)), 16, 1024, kSwizzle, "desc");
  return kb.wgmma_descriptor(kb.ptradd(slice, kb.u32(2048 * j)), kStripBytes, 1024, kSwizzle, "desc");
}

// The epilogue of a consumer's 64 rows of a tile from its accumulator `acc` (TC§4.2's layout).
// Experts: bias and b_scales are the tile's expert's rows; an unknown expert's tile stores NaN.
void storeTile(KernelBuilder& kb, const Config& c, const Params& p, Value consumer, Value tid, Value m0, Value n0,
               Value z, const Split& split, Value acc, Value expert) {
  const unsigned lanes = c.tileN / 2;
  Params pe = p;
  Value known;
  if (c.experts) {
    known = (expert < p.nExperts).named("known_expert");
    Value row = kb.mul_wide(kb.select(known, expert, kb.u32(0)), p.n, "expert_row");
    if (c.bias) pe.bias = kb.ptradd(p.bias, row * uint64_t{c.out == Output::F32 ? 4u : 2u}, "expert_bias");
    if (c.bScales) pe.bScales = kb.ptradd(p.bScales, row * uint64_t{4}, "expert_b_scales");
  }
  Value local = (tid & 127u).named("wg_tid");
  Value warp = (local >> 5u).named("wg_warp"), lane = (local & 31u).named("lane");
  // TC§4.2: lane i of the accumulator is row 16 warp + g + 8 ((i >> 1) & 1), column
  // 8 (i >> 2) + 2 t + (i & 1), with g = lane / 4 and t = lane % 4.
  Value row0 = (m0 + consumer * kStrip + (warp << 4u) + (lane >> 2u)).named("row");
  Value col0 = (n0 + ((lane & 3u) << 1u)).named("col");
  // Stored 8 columns at a time (lanes 4j .. 4j + 3: rows g and g + 8, columns 2t and 2t + 1 of
  // the j-th 8), so that only the accumulator stays live through the epilogue. With split_k,
  // the two consumer warpgroups' 256 threads hold the tile's accumulators.
  auto store = [&](size_t first, size_t n, const AccFn& at) {
    std::vector<Value> rows = {row0, (row0 + 8u).named("row")};
    for (size_t j = first / 4; j < (first + n) / 4; ++j) {
      Value col = (col0 + 8 * j).named("col");
      std::vector<Value> values(4);
      for (unsigned e = 0; e < 4; ++e) {
        Value v = at(4 * j + e);
        if (c.experts) v = kb.select(known, v, kb.f32(std::numeric_limits<float>::quiet_NaN()), "expert_sum");
        values[((e >> 1) & 1) * 2 + (e & 1)] = v;
      }
      storeResults(kb, c, pe, z, rows, {col, (col + 1u).named("col")}, values);
    }
  };
  reduceSplits(kb, c, p, split, 2 * 128, (tid - 128u).named("consumer_tid"), lanes,
               [&](size_t i) { return kb.extract(acc, i, "d"); }, 4, store);
}

// A consumer with block scales (scale_block = 128, fp8 A and B, tile_n 128): a stage is one
// 128-wide K group, so its four wgmmas start from zero (scale-d false) and, once they are done
// (wait_group 0: the stage is released at once), the thread adds each of its partial sums times
// a_scales[row][g] * b_scales[n block][g] into the f32 registers that carry the tile's sum. No
// wgmma stays in flight across stages (the partial's registers are read right away); the
// epilogue then scales by alpha alone.
std::vector<Value> consumeBlockScaled(KernelBuilder& kb, const Config& c, const Params& p, const Ring& ring,
                                      Value consumer, Value tid, const Split& split, const std::vector<Value>& pos,
                                      Value acc0, Value m0, Value n0, Value z, Value expert) {
  const unsigned lanes = c.tileN / 2;
  const Type accType = Type::of(Scalar::F32, static_cast<uint8_t>(lanes));
  Value zero = kb.u32(0), f0 = kb.f32(0.0f, "zero");
  Value no = (zero != 0u).named("fresh"), yes = (zero == 0u).named("accumulate");
  Value local = (tid & 127u).named("wg_tid");
  Value warp = (local >> 5u).named("wg_warp"), lane = (local & 31u).named("lane");
  Value leader = (lane == 0u).named("warp_leader");
  Value sliceOff = (consumer * kStripBytes).named("a_slice");
  const StepRange range = splitSteps(kb, split, kBlocks(c, p));
  Value groups = kBlocks(c, p).named("groups");
  // The scales' rows: this thread's two rows of A (clamped into the matrix: rows past m are
  // never stored) in batch z, and the tile's 128-column block of B (in batch z, or the one B).
  Value row = (m0 + consumer * kStrip + (warp << 4u) + (lane >> 2u)).named("scale_row");
  Value last = (p.m - 1u).named("last_row");
  std::array<Value, 2> aRow;
  for (unsigned h = 0; h < 2; ++h) {
    Value r = kb.min(row + 8 * h, last, "row_in");
    aRow[h] = ((kb.mul_wide(z, p.m) + kb.cvt(r, Type::u64())) * kb.cvt(groups, Type::u64())).named("a_scale_row");
  }
  // (Experts: the tile's expert's scales; an unknown expert's, expert 0's: its tile stores NaN.)
  Value zb = c.experts ? kb.select(expert < p.nExperts, expert, kb.u32(0), "b_plane")
                       : kb.select((p.strideB == uint64_t{0}).named("shared_operand"), kb.u32(0), z, "b_plane");
  Value nBlocks = ((p.n + 127u) >> 7u).named("n_blocks");
  Value bRow = ((kb.mul_wide(zb, nBlocks) + kb.cvt(n0 >> 7u, Type::u64())) * kb.cvt(groups, Type::u64())).named("b_scale_row");
  return kb.for_range(
      zero, range.count, kb.u32(1), {pos[0], pos[1], acc0},
      [&](Value kblock, std::span<Value> at) {
        Value s = at[0], phase = at[1], acc = at[2];
        waitPhase(kb, ring.fullBar(kb, s), phase);
        Value a = kb.ptradd(ring.stageA(kb, c, s), sliceOff, "a_rows");
        Value b = ring.stageB(kb, c, s);
        Value part = kb.pack(accType, std::vector<Value>(lanes, f0), "part0");
        kb.wgmma_fence();
        for (unsigned j = 0; j < kKBlock / 16; ++j)
          part = kb.wgmma_mma_async_fp8(c.tileN, fp8Mod(c.codes()), fp8Mod(c.bFormat), part, descriptor(kb, a, true, j),
                                        descriptor(kb, b, true, j), j == 0 ? no : yes, "part");
        kb.wgmma_commit_group();
        // The group's scales load while the wgmmas run.
        Value g = kb.cvt((range.first + kblock).named("group"), Type::u64());
        Value sb = kb.load(kb.index(p.bScales, (bRow + g).named("b_scale_at"), 4), Type::f32(), {Mod::NcMod}, "b_scale");
        std::array<Value, 2> sa;
        for (unsigned h = 0; h < 2; ++h)
          sa[h] = kb.load(kb.index(p.aScales, (aRow[h] + g).named("a_scale_at"), 4), Type::f32(), {Mod::NcMod}, "a_scale");
        kb.wgmma_wait_group(0);
        kb.if_then(leader, [&] { kb.mbarrier_arrive(ring.emptyBar(kb, s)); }, "release");
        std::array<Value, 2> scale;
        for (unsigned h = 0; h < 2; ++h) scale[h] = (sb * sa[h]).named("block_scale");
        std::vector<Value> sums;
        for (unsigned i = 0; i < lanes; ++i)
          sums.push_back(kb.fma(kb.extract(part, i, "partial"), scale[(i >> 1) & 1], kb.extract(acc, i, "sum"), "sum"));
        Value acc2 = kb.pack(accType, sums, "acc");
        auto [s2, phase2] = advance(kb, c, s, phase);
        return std::vector<Value>{s2, phase2, acc2};
      },
      {.label = "kblocks", .iv = "kblock"});
}

// A consumer warpgroup: multiplies its 64 rows of every tile and stores them.
void consume(KernelBuilder& kb, const Config& c, const Params& p, const Ring& ring, Value consumer, Value tid) {
  const Scalar in = c.in == Input::BF16 ? Scalar::BF16 : Scalar::F16;
  const unsigned lanes = c.tileN / 2;
  const Type accType = Type::of(Scalar::F32, static_cast<uint8_t>(lanes));
  Value zero = kb.u32(0);
  Value f0 = kb.f32(0.0f, "zero");
  Value yes = (zero == 0u).named("accumulate");
  Value lane = (tid & 31u).named("lane");
  Value leader = (lane == 0u).named("warp_leader");
  // Consumer c's rows start 8 KiB into the A tile: after 64 K-major rows of 128 bytes, or at
  // the c-th strip of 64 along M.
  Value sliceOff = (consumer * kStripBytes).named("a_slice");
  forTiles(kb, c, p, {zero, zero}, [&](Value m0, Value n0, Value z, const Split& split, std::vector<Value> pos, Value expert) {
    // The k loop is a do-while behind a test for k = 0, so that its accumulator parameter is read
    // by the first wgmma alone (the result takes the accumulator's registers, ir.md "wgmma"):
    // the loop's value leaves through the exit's own parameter.
    Value acc0 = kb.pack(accType, std::vector<Value>(lanes, f0), "acc0");
    if (c.scaleBlock != 0) {
      const std::vector<Value> out = consumeBlockScaled(kb, c, p, ring, consumer, tid, split, pos, acc0, m0, n0, z, expert);
      storeTile(kb, c, p, consumer, tid, m0, n0, z, split, out[2], expert);
      return std::vector<Value>{out[0], out[1]};
    }
    Value blocks = splitSteps(kb, split, kBlocks(c, p)).count;
    BlockId body = kb.block("kblocks"), exit = kb.block("kblocks.exit");
    Value kblock = kb.block_param(body, Type::u32(), "kblock");
    Value s = kb.block_param(body, Type::u32(), "stage"), phase = kb.block_param(body, Type::u32(), "phase");
    Value acc = kb.block_param(body, accType, "acc");
    std::vector<Value> out = {kb.block_param(exit, Type::u32(), "stage"), kb.block_param(exit, Type::u32(), "phase"),
                              kb.block_param(exit, accType, "acc")};
    kb.cbr((blocks != 0u).named("has_k"), body, {zero, pos[0], pos[1], acc0}, exit, {pos[0], pos[1], acc0});
    kb.set_insert_point(body);
    waitPhase(kb, ring.fullBar(kb, s), phase);
    Value a = kb.ptradd(ring.stageA(kb, c, s), sliceOff, "a_rows");
    Value b = ring.stageB(kb, c, s);
    kb.wgmma_fence();
    // Four k-steps of 32 bytes a stage: wgmma k16 of bf16/f16, or k32 of fp8 codes (K-major).
    for (unsigned j = 0; j < kKBlock / 16; ++j)
      acc = c.codes() != Fp8::None
                ? kb.wgmma_mma_async_fp8(c.tileN, fp8Mod(c.codes()), fp8Mod(c.bFormat), acc,
                                         descriptor(kb, a, true, j), descriptor(kb, b, true, j), yes, "acc")
                : kb.wgmma_mma_async(c.tileN, in, acc, descriptor(kb, a, c.a == Layout::Row, j),
                                     descriptor(kb, b, c.b == Layout::Col, j), yes, c.a == Layout::Col,
                                     c.b == Layout::Row, "acc");
    kb.wgmma_commit_group();
    // One group stays in flight, as in CUTLASS's mainloop: this k block's wgmmas run on while
    // the previous block's, now done, give their stage back to the producer.
    kb.wgmma_wait_group(1);
    Value previous = kb.select((s == 0u).named("first_stage"), kb.u32(c.stages - 1), s - 1u, "previous");
    kb.if_then((leader & (kblock != 0u)).named("release_previous"),
               [&] { kb.mbarrier_arrive(ring.emptyBar(kb, previous)); }, "release");
    auto [s2, phase2] = advance(kb, c, s, phase);
    Value next = (kblock + 1u).named("kblock_next");
    BlockId drain = kb.block("kblocks.drain");
    kb.cbr((next < blocks).named("more"), body, {next, s2, phase2, acc}, drain, {});
    // The last group: waited for before its stage is released and the accumulator leaves.
    kb.set_insert_point(drain);
    kb.wgmma_wait_group(0);
    kb.if_then(leader, [&] { kb.mbarrier_arrive(ring.emptyBar(kb, s)); }, "release_last");
    kb.br(exit, {s2, phase2, acc});
    kb.set_insert_point(exit);
    storeTile(kb, c, p, consumer, tid, m0, n0, z, split, out[2], expert);
    return std::vector<Value>{out[0], out[1]};
  });
}

}  // namespace

std::optional<ir::Module> buildGemmWgmma(const Config& c, ir::Diagnostics& diags) {
  if (c.stages * ringBytes(c) > kSharedLimit) {
    diags.report(ir::Severity::Error, "", {}, "stages = " + std::to_string(c.stages) + " with tile_n = " +
                        std::to_string(c.tileN) + " and fp8 B needs " + std::to_string(c.stages * ringBytes(c) / 1024) +
                        " KiB of shared memory, more than an sm_90 block's 227 KiB: take stages = " +
                        std::to_string(kSharedLimit / ringBytes(c)));
    return std::nullopt;
  }
  ir::Module m = newModule();
  if (c.fp8Cvt) m.ptx = std::max(m.ptx, kFp8CvtPtx);
  KernelBuilder kb(m, "gemm");
  const Params p = declareParams(kb, c);
  Value aMap = kb.param(Type::of(Scalar::TensorMap), "a_map");
  Value bMap = kb.param(Type::of(Scalar::TensorMap), "b_map");
  // setmaxnreg needs a register budget known at entry (TC§5.4): 384 threads, one block per SM.
  kb.maxntid(3 * 128);
  kb.minnctapersm(1);

  Ring ring;
  ring.tiles = kb.shared_dynamic("tiles", Type::of(Scalar::B8), 1024);
  ring.full = kb.shared("full", Type::u64(), c.stages, 8);
  ring.empty = kb.shared("empty", Type::u64(), c.stages, 8);
  const bool codes = c.bCodes != Fp8::None;
  if (codes) ring.codes = kb.shared("codes_full", Type::u64(), c.stages, 8);
  ring.tileBase = kb.shared_addr(ring.tiles, "tile_base");
  ring.fullBase = kb.shared_addr(ring.full, "full_base");
  ring.emptyBase = kb.shared_addr(ring.empty, "empty_base");
  if (codes) ring.codesBase = kb.shared_addr(ring.codes, "codes_full_base");

  Value tid = kb.tid(Mod::X, "tid");
  kb.if_then((tid == 0u).named("init"), [&] {
    for (unsigned s = 0; s < c.stages; ++s) {
      kb.mbarrier_init(ring.fullBar(kb, kb.u32(s)), kb.u32(codes ? 1 + kConverters : 1));
      kb.mbarrier_init(ring.emptyBar(kb, kb.u32(s)), kb.u32(kConsumerWarps));
      if (codes) kb.mbarrier_init(ring.codesBar(kb, kb.u32(s)), kb.u32(1));
    }
  }, "init_barriers");
  kb.bar_sync();

  warpSpecialize(
      kb, tid, kProducerRegisters, kConsumerRegisters, [&] { produce(kb, c, p, ring, aMap, bMap); },
      [&](Value consumer) { consume(kb, c, p, ring, consumer, tid); },
      codes ? std::function<void()>([&] { convert(kb, c, p, ring, tid); }) : std::function<void()>());
  kb.ret();
  return finish(kb, m, diags);
}

LaunchRule wgmmaLaunchRule(const Config& c) {
  using bundle::TensorMapRule;
  using PScalar = bundle::ParamType::Scalar;
  const bool fp8 = c.codes() != Fp8::None;
  const PScalar el = fp8 ? PScalar::U8 : c.in == Input::BF16 ? PScalar::BF16 : PScalar::F16;
  const unsigned aElBytes = fp8 ? 1 : 2;
  const bool codes = c.bCodes != Fp8::None;
  const PScalar bEl = codes ? PScalar::U8 : el;
  const unsigned bElBytes = codes || fp8 ? 1 : 2;
  const Expr m = Expr::param("m"), n = Expr::param("n"), batch = Expr::param("batch");
  const Expr tiles = ceilDiv(m, kTileM) * ceilDiv(n, c.tileN) * batch;
  const Expr units = c.splitK ? tiles * max(Expr::param("splits"), Expr(1)) : tiles;
  LaunchRule rule{{3 * 128}, {min(units, Expr(c.blocks))}, Expr(c.stages * ringBytes(c))};
  // k = 0 (C = beta C) loads nothing, but a map needs extents of at least 1 and a row stride of
  // at least 16 bytes (a leading dimension of 0 is then legal): the maps of that launch are
  // encoded over 1 column and never read.
  const Expr k = max(Expr::param("k"), Expr(1));
  // Bytes of `elements` elements of A's type (2) or of B's (1 for fp8 codes).
  auto bytes = [](const Expr& elements, unsigned size) { return size == 1 ? elements : elements * size; };
  const Expr lda = max(bytes(Expr::param("lda"), aElBytes), Expr(16)),
             ldb = max(bytes(Expr::param("ldb"), bElBytes), Expr(16));
  // The batch is each map's third dimension. Its stride is the caller's only with batch > 1 and a
  // stride other than 0 (min(batch, 2) / 2 and min(stride, 1) are 0 or 1): otherwise the kernel
  // never steps it (one matrix; or one for every batch, planeOf), and the plane is the matrix's
  // own size, rows times row stride, a stride TMA takes whatever the caller's.
  // Experts: B's planes are the experts (n_experts of them), whatever the batch.
  const Expr planes = max(batch, Expr(1)), several = min(batch, Expr(2)) / 2;
  const Expr experts = Expr::param("n_experts");
  const Expr planesB = c.experts ? max(experts, Expr(1)) : planes, severalB = c.experts ? min(experts, Expr(2)) / 2 : several;
  auto plane = [&](const char* stride, unsigned size, const Expr& rows, const Expr& rowBytes, const Expr& steps) {
    const Expr own = steps * min(Expr::param(stride), Expr(1));
    return bytes(Expr::param(stride), size) * own + max(rows, Expr(1)) * rowBytes * (Expr(1) - own);
  };
  const Expr planeA = plane("stride_a", aElBytes, c.a == Layout::Row ? m : Expr::param("k"), lda, several);
  const Expr planeB = plane("stride_b", bElBytes, c.b == Layout::Col ? n : Expr::param("k"), ldb, severalB);
  // fp8 codes: lines of 64 bytes, unswizzled (the converters read them).
  const uint32_t bSwizzle = codes ? 0 : kSwizzle;
  // K-major operands are one box of 64 K elements (128 fp8 codes) by the tile's rows; the others
  // strips of 64.
  const unsigned kBox = kBlockOf(c);
  rule.tensorMaps.push_back(c.a == Layout::Row
                                ? TensorMapRule{"a_map", "a", el, {k, m, planes}, {lda, planeA}, {kBox, kTileM, 1}, kSwizzle}
                                : TensorMapRule{"a_map", "a", el, {m, k, planes}, {lda, planeA}, {kStrip, kKBlock, 1}, kSwizzle});
  rule.tensorMaps.push_back(c.b == Layout::Col
                                ? TensorMapRule{"b_map", "b", bEl, {k, n, planesB}, {ldb, planeB}, {kBox, c.tileN, 1}, bSwizzle}
                                : TensorMapRule{"b_map", "b", bEl, {n, k, planesB}, {ldb, planeB}, {kStrip, kKBlock, 1}, bSwizzle});
  return rule;
}

}  // namespace tn::kernels::lib::gemm
