// attention_prefill (docs/kernels.md): flash-attention forward on the tensor cores: bf16 or f16
// storage, mma.sync m16n8k16 with f32 accumulation, f32 online softmax, causal or not,
// grouped-query heads, an optional log-sum-exp output. mainloop = "wgmma" builds the sm_90a
// kernel of kernels/AttentionPrefill90.cpp instead; the output of a warp's rows is shared
// (kernels/AttentionPrefill.h).
//
// Tensors: q and o are [batch, seq_q, q_heads, head_dim]; k and v [batch, kv_stride, kv_heads,
// head_dim], of which rows [0, seq_k) are read. With seq_k > seq_q the first seq_k - seq_q keys
// are a cached prefix (chunked prefill), and `causal` lets query row i see keys j <= i + seq_k -
// seq_q (the rows are aligned at the bottom right). Query head h reads kv head h / (q_heads /
// kv_heads). With page_size, k and v are a paged cache [rows, kv_heads, head_dim]: position p of
// sequence b is row p % page_size of page block_table[b * max_pages + p / page_size], looked up
// per row as a tile is staged.
//
// Block (query tile, query head, sequence): 4 warps, 64 query rows, 16 per warp. The Q tile stays
// in shared memory, read as mma A fragments for every key tile. K and V come in tiles of 64 keys through shared
// memory: V tile j is loaded while S = Q K^T of tile j is computed, K tile j + 1 while O += P V of
// tile j. The scores of a warp's 16 rows stay in the mma accumulators: lane (g = lane / 4, t =
// lane % 4) holds rows g and g + 8, and the softmax state (running max m, partial sum l) of those
// rows; the exponentiated scores, rounded to the storage type, become the A fragments of P V
// without leaving the registers (the accumulator of n-tiles 2k and 2k + 1 is the A fragment of
// k-step k). Scores stay in raw units: p = 2^(s * scale * log2 e - m'), m' the scaled max.
//
// Shared tiles: 64 rows of head_dim 16-bit elements, row r's 16-byte chunk c stored at
// r * 2 head_dim + ((c ^ (r & 7)) << 4). The 8 rows of every ldmatrix matrix (K and Q
// untransposed, V transposed) and every 8 16-byte cp.async stores of a quarter warp then fall
// in 8 different groups of banks (tile-validation checks it:
// lit-tests/tile-validation/attention-prefill.test).
//
// Staging: when q, k and v are 16-byte aligned (a run-time test) 16-byte cp.async.cg, rows past
// the sequence zero-filled; otherwise element by element through registers. fp8 k and v
// (cache_dtype) are converted through registers into the same tiles (convertTile), k_scale
// joining scale and v_scale the outputs' 1 / l.
//
// Attention sinks (sinks): head h's logit sinks[h] joins every row's softmax without a value, as
// the initial running max and a sum of 1 (softmaxOf's mInit and lInit).
//
// Special values: keys past seq_k or masked weigh exactly 0; a row that sees no key (causal,
// seq_q > seq_k + its index) gets zeros and log-sum-exp -inf (with a sink: its logit). The P V
// product multiplies every key of a tile, masked ones too (by 0): a NaN or infinity in V reaches
// every row of the 64 whose tile holds it. A NaN score makes its row NaN; +inf scores make their
// rows NaN.
#include <array>
#include <cmath>
#include <string>
#include <tuple>

#include "kernels/AttentionPrefill.h"

namespace tn::kernels::lib {

namespace prefill {

Config configOf(const Options& o) {
  const auto dim = static_cast<unsigned>(o.integer("head_dim")), vdim = static_cast<unsigned>(o.integer("v_head_dim"));
  return {storageOption(o), dim, vdim ? vdim : dim, o.flag("causal"), o.flag("lse"),
          o.flag("varlen"), o.all().count("page_size") ? static_cast<unsigned>(o.integer("page_size")) : 0u,
          o.text("mainloop") != "mma", o.flag("window"), o.flag("window_right"), o.flag("softcap"), o.flag("alibi"),
          o.flag("bias"), o.flag("sinks"), cacheDtype(o), fp8Cvt(o)};
}

Params declareParams(KernelBuilder& kb, const Config& c) {
  Params p;
  p.q = kb.param(kGlobalPtr, "q");
  p.k = kb.param(kGlobalPtr, "k");
  p.v = kb.param(kGlobalPtr, "v");
  p.out = kb.param(kGlobalPtr, "o");
  if (c.lse) p.lse = kb.param(kGlobalPtr, "lse");
  if (c.pageSize) p.table = kb.param(kGlobalPtr, "block_table");
  if (c.varlen) {
    p.arrays.qOffsets = kb.param(kGlobalPtr, "q_offsets");
    p.arrays.qLengths = kb.param(kGlobalPtr, "q_lengths");
    if (!c.pageSize) p.arrays.kvOffsets = kb.param(kGlobalPtr, "kv_offsets");
    p.arrays.kvLengths = kb.param(kGlobalPtr, "kv_lengths");
  }
  if (c.alibi) p.alibiSlopes = kb.param(kGlobalPtr, "alibi_slopes");
  if (c.bias) p.bias = kb.param(kGlobalPtr, "bias");
  if (c.sinks) p.sinks = kb.param(kGlobalPtr, "sinks");
  kb.param(ir::Type::u32(), "batch");  // the grid's z extent
  if (c.varlen) {
    kb.param(ir::Type::u32(), "max_seq_q");  // the grid's x extent
    if (c.tmaParams) kb.param(ir::Type::u32(), "q_rows");
  } else {
    p.seqQ = kb.param(ir::Type::u32(), "seq_q");
    p.seqK = kb.param(ir::Type::u32(), "seq_k");
    if (!c.pageSize) p.kvStride = kb.param(ir::Type::u32(), "kv_stride");
  }
  if (c.tmaParams && (c.varlen || c.pageSize)) kb.param(ir::Type::u32(), "kv_rows");
  if (c.pageSize) p.maxPages = kb.param(ir::Type::u32(), "max_pages");
  p.qHeads = kb.param(ir::Type::u32(), "q_heads");
  p.kvHeads = kb.param(ir::Type::u32(), "kv_heads");
  p.scale = kb.param(ir::Type::f32(), "scale");
  if (c.cache != Fp8::None) {
    Value kScale = kb.param(ir::Type::f32(), "k_scale");
    p.vScale = kb.param(ir::Type::f32(), "v_scale");
    p.scale = (p.scale * kScale).named("scale_k");
  }
  if (c.window) p.window = kb.param(ir::Type::u32(), "window");
  if (c.windowRight) p.windowRight = kb.param(ir::Type::u32(), "window_right");
  if (c.softcap) p.softcap = kb.param(ir::Type::f32(), "softcap");
  if (c.bias)
    for (unsigned i = 0; i < 3; ++i)
      p.biasStrides[i] = kb.param(ir::Type::u32(), std::array{"bias_batch_stride", "bias_head_stride", "bias_row_stride"}[i]);
  return p;
}

Softmax softmaxOf(KernelBuilder& kb, const Config& c, const Params& p, Value seqQ, Value seqK, Value q0, Value t,
                  Value scale2, Value row0, Value row1, Value qh, Value b) {
  Softmax s{seqQ, seqK, q0, t, scale2, {row0, row1}, p.window};
  if (c.windowRight) s.right = kb.min(p.windowRight, seqQ, "right");
  if (c.softcap) {
    s.capOn = (p.softcap != 0.0f).named("cap_on");
    s.cap = (p.softcap * kb.rcp(p.scale)).named("cap");
    s.capRate = (2.0f * kLog2e * kb.rcp(s.cap)).named("cap_rate");
  }
  if (c.alibi) {
    // Causal, a row's keys lie at or before its position: the bias is slope (j - i'), no |.|.
    Value slope = kb.load(kb.index(p.alibiSlopes, qh, 4), ir::Type::f32(), {ir::Mod::NcMod}, "alibi_slope");
    Value raw = (slope / p.scale).named("slope_raw");
    s.slope = c.causal ? raw : kb.neg(raw, "slope_neg");
    Value seqQf = kb.cvt(seqQ, ir::Type::f32(), {ir::Mod::Rn}, "seq_q_f");
    for (unsigned r = 0; r < 2; ++r)
      s.rowPos[r] = (kb.cvt(s.rows[r] + seqK, ir::Type::f32(), {ir::Mod::Rn}) - seqQf).named("row_pos");
  }
  if (c.bias) {
    // Rows past seq_q (whose outputs are never stored) read the last row's bias; keys past seq_k
    // the last key's (their scores are masked).
    Value lastRow = (kb.max(seqQ, kb.u32(1)) - 1u).named("last_row");
    Value head = (kb.mul_wide(b, p.biasStrides[0]) + kb.mul_wide(qh, p.biasStrides[1])).named("bias_head");
    for (unsigned r = 0; r < 2; ++r)
      s.biasRow[r] = kb.index(p.bias, head + kb.mul_wide(kb.min(s.rows[r], lastRow), p.biasStrides[2]), 2, "bias_row");
    s.lastKey = (kb.max(seqK, kb.u32(1)) - 1u).named("last_key");
    s.invScale = kb.rcp(p.scale, "inv_scale");
  }
  if (c.sinks) {
    // The sink is one more logit of the row's softmax, without a value: the running max starts
    // at it (raw units: divided by scale) and the sum at its weight, e^0, counted once a row.
    Value sink = kb.load(kb.index(p.sinks, qh, 4), ir::Type::f32(), {ir::Mod::NcMod}, "sink");
    s.mInit = (sink / p.scale).named("sink_raw");
    Value counted = ((t == 0u) & (sink != negInf(kb))).named("sink_counted");
    s.lInit = kb.select(counted, kb.f32(1.0f), kb.f32(0.0f), "sink_weight");
  }
  return s;
}

Value packHalf(KernelBuilder& kb, const Config& c, Value lo, Value hi) { return kb.cvt_pack(c.half(), hi, lo); }

Value headBase(KernelBuilder& kb, Value p, Value firstRow, Value heads, Value head, unsigned dim, std::string_view name,
               unsigned bytes) {
  Value elem = (firstRow * kb.cvt(heads, ir::Type::u64()) + kb.cvt(head, ir::Type::u64())) * dim;
  return kb.index(p, elem.named("elem"), bytes, name);
}

Value kvHeadOf(KernelBuilder& kb, Value qh, Value qHeads, Value kvHeads) {
  Value group = kb.max(qHeads / kb.max(kvHeads, kb.u32(1)), kb.u32(1), "group");
  return (qh / group).named("kv_head");
}

Sequence loadSequence(KernelBuilder& kb, const VarlenArrays& a, Value b) {
  auto perSeq = [&](Value p, std::string_view name) {
    return kb.load(kb.index(p, b, 4), ir::Type::u32(), {ir::Mod::NcMod}, name);
  };
  return {perSeq(a.qLengths, "seq_q"), perSeq(a.kvLengths, "seq_k"), perSeq(a.qOffsets, "q_first"),
          a.kvOffsets.valid() ? perSeq(a.kvOffsets, "kv_first") : Value()};
}

Value keyEnd(KernelBuilder& kb, const Config& c, Value q0, unsigned rows, Value seqQ, Value seqK, Value right) {
  if (!c.causal && !c.windowRight) return seqK;
  Value reach = (q0 + rows + seqK).named("reach");  // key + seq_q < row + 1 + seq_k (+ right)
  if (c.windowRight) reach = (reach + kb.min(right, seqQ)).named("reach");
  return kb.select(reach > seqQ, kb.min(seqK, reach - seqQ), kb.u32(0), "k_end");
}

// Row r sees keys j with r + 1 + seq_k - seq_q - window <= j (its position less window - 1).
Value keyStart(KernelBuilder& kb, const Config& c, Value row, Value seqQ, Value seqK, Value window) {
  if (!c.window) return kb.u32(0);
  Value reach = (row + 1u + seqK).named("row_reach");
  Value past = (reach - seqQ).named("past");  // the keys up to the row's, when reach > seq_q
  Value cut = ((window != 0u) & (reach > seqQ) & (past > window)).named("windowed");
  return kb.select(cut, past - window, kb.u32(0), "k_start");
}

std::vector<Value> softmaxStart(KernelBuilder& kb, const Softmax& s, Value zero) {
  if (s.mInit.valid()) return {s.mInit, s.mInit, s.lInit, s.lInit};
  return {negInf(kb), negInf(kb), zero, zero};
}

std::vector<Value> softmaxTile(KernelBuilder& kb, const Config& c, const Softmax& s, Value k0, unsigned keys,
                               std::vector<Value> sv, Value m[2], Value l[2], Value corr[2]) {
  // A cap of 0 leaves the scores alone (one kernel for capped and uncapped layers).
  if (c.softcap)
    sv = kb.if_else(s.capOn, [&] {
      std::vector<Value> capped = sv;
      for (Value& x : capped) x = softcap(kb, x, s.capRate, s.cap);
      return capped;
    }, [&] { return sv; }, {.label = "softcap"});
  // ALiBi: 3 instructions a score (2 causal): the distance from the tile's first key of the
  // thread's, plus the element's offset, then one fma. Positions are exact in f32 below 2^24.
  if (c.alibi) {
    Value key0 = kb.cvt(k0 + (s.t << 1u), ir::Type::f32(), {ir::Mod::Rn}, "key0_f");
    const Value dist[2] = {(key0 - s.rowPos[0]).named("dist_g"), (key0 - s.rowPos[1]).named("dist_g8")};
    for (unsigned i = 0; i < sv.size(); ++i) {
      const unsigned offset = 8 * (i >> 2) + (i & 1);
      Value d = offset ? (dist[(i >> 1) & 1] + float(offset)).named("dist") : dist[(i >> 1) & 1];
      sv[i] = kb.fma(s.slope, c.causal ? d : kb.abs(d), sv[i], "biased");
    }
  }
  // The bias tensor: one 2-byte load a score, at (row, min(key, seq_k - 1)), added as bias / scale.
  if (c.bias) {
    Value key0 = (k0 + (s.t << 1u)).named("bias_key0");
    for (unsigned i = 0; i < sv.size(); ++i) {
      Value key = kb.min(key0 + (8 * (i >> 2) + (i & 1)), s.lastKey, "bias_key");
      Value bias = loadF32(kb, kb.index(s.biasRow[(i >> 1) & 1], key, 2, "bias_at"), c.s, true, "bias");
      sv[i] = kb.fma(bias, s.invScale, sv[i], "biased");
    }
  }
  // Masks cost 3 instructions a score (4 with a window): only on the tiles that hold a masked key.
  // Causal and window_right mask by the rows' positions, in key + seq_q units (diagonal).
  const bool diagonal = c.causal || c.windowRight;
  Value partial = (k0 + keys > s.seqK).named("partial_tile");
  if (diagonal) {
    Value firstReach = (s.q0 + 1u + s.seqK).named("row_reach");
    if (c.windowRight) firstReach = (firstReach + s.right).named("row_reach");
    partial = (partial | ((k0 + keys + s.seqQ).named("tile_reach") > firstReach)).named("masked_tile");
  }
  // A window: the tile starts before the window of the last of the 64 rows (k0 + seq_q + window <
  // q0 + 64 + seq_k; a window that wraps the sum only takes the masked path).
  if (c.window)
    partial = (partial | ((s.window != 0u) & ((k0 + s.seqQ + s.window).named("tile_window") <
                                                (s.q0 + 64u + s.seqK).named("last_reach"))))
                  .named("masked_tile");
  sv = kb.if_else(partial, [&] {
    std::vector<Value> masked = sv;
    Value key0 = (k0 + (s.t << 1u) + (diagonal ? s.seqQ : kb.u32(0))).named("key0");
    // A row's position plus one (key0's units: keys + seq_q).
    Value pos0 = diagonal ? (s.rows[0] + 1u + s.seqK).named("lim_g") : s.seqK;
    Value pos1 = diagonal ? (s.rows[1] + 1u + s.seqK).named("lim_g8") : s.seqK;
    // window_right: keys up to right past the position, and never past seq_k.
    auto rightOf = [&](Value pos) { return kb.min(pos + s.right, s.seqQ + s.seqK, "lim_right"); };
    Value lim0 = c.windowRight ? rightOf(pos0) : pos0, lim1 = c.windowRight ? rightOf(pos1) : pos1;
    // With a window, a row sees keys from its position + 1 - window on.
    auto lowOf = [&](Value pos) {
      return kb.select(((s.window != 0u) & (pos > s.window)).named("windowed"), pos - s.window, kb.u32(0), "low");
    };
    Value low0 = c.window ? lowOf(pos0) : Value(), low1 = c.window ? lowOf(pos1) : Value();
    for (unsigned i = 0; i < masked.size(); ++i) {
      Value key = key0 + (8 * (i >> 2) + (i & 1));
      const bool second = (i >> 1) & 1;
      Value keep = (key < (second ? lim1 : lim0)).named("keep");
      if (c.window) keep = (keep & (key >= (second ? low1 : low0))).named("keep");
      masked[i] = kb.select(keep, masked[i], negInf(kb), "masked");
    }
    return masked;
  }, [&] { return sv; }, {.label = "mask"});

  std::vector<Value> p(sv.size());
  for (unsigned half = 0; half < 2; ++half) {
    Value mx = negInf(kb);
    for (unsigned i = 0; i < sv.size(); ++i)
      if (((i >> 1) & 1) == half) mx = kb.max(mx, sv[i], "row_max");
    mx = kb.warp_reduce(ir::Op::Max, mx, 4, "row_max");
    Value mNew = kb.max(m[half], mx, "m");
    Value ref = (refOf(kb, mNew) * s.scale2).named("ref");
    corr[half] = ex2Approx(kb, kb.fma(m[half], s.scale2, -ref), "corr");
    Value sum = kb.f32(0.0f);
    for (unsigned i = 0; i < sv.size(); ++i)
      if (((i >> 1) & 1) == half) {
        p[i] = ex2Approx(kb, kb.fma(sv[i], s.scale2, -ref), "p");
        sum = sum + p[i];
      }
    m[half] = mNew;
    l[half] = kb.fma(l[half], corr[half], sum, "l");
  }
  // P's A fragment of key step kk: scores 8 kk ... 8 kk + 7 (n-tiles 2 kk and 2 kk + 1 of mma's C
  // layout, rows g and g + 8; the wgmma register-A layout is the same per warp, TC §4.2).
  std::vector<Value> pf;
  for (unsigned a = 0; a < p.size(); a += 8)
    pf.push_back(kb.pack(ir::Type::of(ir::Scalar::B32, 4),
                         {packHalf(kb, c, p[a], p[a + 1]), packHalf(kb, c, p[a + 2], p[a + 3]),
                          packHalf(kb, c, p[a + 4], p[a + 5]), packHalf(kb, c, p[a + 6], p[a + 7])},
                         "p_frag"));
  return pf;
}

void storeRows(KernelBuilder& kb, const Config& c, const Output& o, const Value m[2], const Value lPart[2],
               const std::function<Value(unsigned tile, unsigned e)>& acc) {
  using ir::Scalar;
  using ir::Type;
  constexpr float kLn2 = std::numbers::ln2_v<float>;
  const unsigned oTiles = c.vdim / 8;
  Value inv[2];
  Value l[2];
  for (unsigned half = 0; half < 2; ++half) {
    l[half] = kb.warp_reduce(ir::Op::Add, lPart[half], 4, "l_row");
    Value r = rcpApprox(kb, l[half]);
    if (o.vScale.valid()) r = (r * o.vScale).named("inv_v");
    inv[half] = kb.select(l[half] > 0.0f, r, kb.f32(0.0f), "inv");
  }
  Value pairs = allAligned(kb, {o.out}, 4, "pairs");
  Value oBase = headBase(kb, o.out, o.qFirst, o.qHeads, o.qh, c.vdim, "o_base");
  Value oStride = (o.qHeads * c.vRowBytes()).named("o_stride");
  for (unsigned half = 0; half < 2; ++half)
    kb.if_then((o.rows[half] < o.seqQ).named("has_row"), [&] {
      Value rowPtr = kb.ptradd(oBase, kb.mul_wide(o.rows[half], oStride), "o_row");
      std::vector<Value> words;
      for (unsigned i = 0; i < oTiles; ++i) {
        Value x0 = acc(i, 2 * half) * inv[half], x1 = acc(i, 2 * half + 1) * inv[half];
        words.push_back(packHalf(kb, c, x0, x1));
      }
      // Elements 8 i + 2 t and + 1: one 4-byte store when o allows it, else two 2-byte ones.
      Value at = kb.ptradd(rowPtr, kb.cvt(o.t << 2u, Type::u64()), "o_pair");
      kb.if_else(pairs, [&] {
        for (unsigned i = 0; i < oTiles; ++i) kb.store(i == 0 ? at : kb.ptradd(at, kb.u64(16 * i)), words[i]);
        return std::vector<Value>{};
      }, [&] {
        for (unsigned i = 0; i < oTiles; ++i) {
          Value w = kb.bitcast(words[i], Type::u32());
          Value p0 = i == 0 ? at : kb.ptradd(at, kb.u64(16 * i));
          kb.store(p0, kb.cvt(w, Type::of(Scalar::U16)));
          kb.store(kb.ptradd(p0, kb.u64(2)), kb.cvt(w >> 16u, Type::of(Scalar::U16)));
        }
        return std::vector<Value>{};
      }, {.label = "store"});
      if (c.lse)
        kb.if_then((o.t == 0u).named("t0"), [&] {
          // ln(sum_j e^(s_j scale)) = (m' + log2 l) ln 2; -inf without keys (log2 0).
          Value ref = (refOf(kb, m[half]) * o.scale2).named("ref");
          // [batch, q_heads, seq_q], or (varlen) [rows, q_heads] like q.
          Value row = kb.cvt(o.rows[half], Type::u64());
          Value lseAt = c.varlen ? (o.qFirst + row) * kb.cvt(o.qHeads, Type::u64()) + kb.cvt(o.qh, Type::u64())
                                 : (kb.mul_wide(o.b, o.qHeads) + kb.cvt(o.qh, Type::u64())) * kb.cvt(o.seqQ, Type::u64()) + row;
          kb.store(kb.index(o.lse, lseAt.named("lse_at"), 4), (ref + kb.lg2(l[half], "log_l")) * kLn2);
        }, "lse");
    }, "row");
}

}  // namespace prefill

namespace {

using namespace prefill;

using ir::Mod;
using ir::Scalar;
using ir::SharedArray;
using ir::Type;

constexpr unsigned kWarps = 4;
constexpr unsigned kThreads = 32 * kWarps;
constexpr unsigned kRows = 16 * kWarps;  // query rows of a block
constexpr unsigned kKeys = 64;           // keys of a K/V tile
constexpr unsigned kStaticShared = 48 * 1024;  // the most a kernel's static shared arrays may hold

// The Q, K and V tiles' bytes in shared memory.
unsigned tileBytes(const Config& c) { return kRows * (2 * c.rowBytes() + c.vRowBytes()); }


// A tile of 64 rows in shared memory and where its rows come from: row r is sequence position
// first + r of the tensor at `base` (this sequence's and head's element 0), `stride` bytes apart,
// present while the position is below `extent`, zeros past it. A paged tensor's `row` gives the
// row of a position (base is then the head's element 0 of row 0). A row holds `elems` elements
// (head_dim for Q and K, v_head_dim for V), 2 bytes each in shared memory.
struct Tile {
  std::function<Value()> smem;  // the tile's shared address, materialized where it is used
  Value base;    // global pointer
  Value stride;  // u32 bytes between rows
  Value extent;  // u32 positions
  unsigned elems;  // elements of a row
  std::function<Value(Value pos)> row = {};
  bool codes = false;  // fp8 codes, converted as they are staged (convertTile)
  Value rowOf(Value pos) const { return row ? row(pos) : pos; }
  unsigned rowBytes() const { return elems * 2; }  // in shared memory
  unsigned chunks() const { return elems / 8; }    // 16-byte chunks of a shared row
};

// Byte offset of 16-byte chunk `chunk` of row `row` of a tile of `rowBytes`-byte rows; `low` is
// row & 7 when the caller has it.
Value slotOf(unsigned rowBytes, Value row, Value chunk, Value low = Value()) {
  return (row * rowBytes + ((chunk ^ (low.valid() ? low : (row & 7u))) << 4u)).named("slot");
}

// The 16-byte chunks of a tile are the threads' in passes: pass j's chunk of thread tid is chunk
// tid + j kThreads of the tile's rows. When a row's chunks divide the block (head_dim up to 128,
// and 256) a thread keeps its chunk of the row and steps kThreads / chunks rows a pass; otherwise
// (192: 24 chunks) each pass finds its row and chunk.
struct Chunks {
  const Tile& t;
  Value tid, chunk0, row0;  // chunk0, row0: the first pass's, when the chunks divide the block
  unsigned passes() const { return kRows * t.chunks() / kThreads; }
  bool even() const { return kThreads % t.chunks() == 0; }
  unsigned rowsPerPass() const { return kThreads / t.chunks(); }
  Chunks(const Tile& tile, Value threadId) : t(tile), tid(threadId) {
    if (even()) chunk0 = (tid % t.chunks()).named("chunk"), row0 = (tid / t.chunks()).named("chunk_row");
  }
  // Pass j's row and chunk (j a u32 value).
  std::pair<Value, Value> at(Value j) const {
    if (even()) return {(row0 + j * rowsPerPass()).named("tile_row"), chunk0};
    Value i = (tid + j * kThreads).named("chunk_index");
    return {(i / t.chunks()).named("tile_row"), (i % t.chunks()).named("chunk")};
  }
};

// 16-byte cp.async copies, a pass a chunk of every thread.
void copyTile(KernelBuilder& kb, const Tile& t, Value tid, Value first) {
  const Chunks ch(t, tid);
  Value dst0 = ch.even() ? kb.ptradd(t.smem(), slotOf(t.rowBytes(), ch.row0, ch.chunk0), "dst") : Value();
  Value last = (t.extent - 1u).named("last");  // first < extent: the tile holds a position
  for (unsigned j = 0; j < ch.passes(); ++j) {
    Value row, chunk = ch.chunk0;  // row: when the chunks do not divide the block
    if (!ch.even()) std::tie(row, chunk) = ch.at(kb.u32(j));
    // (first + row0) + j rowsPerPass, not Chunks::at's row plus first: the sum shared by every pass,
    // as the kernels before v_head_dim computed it (their PTX is unchanged).
    Value pos = (ch.even() ? first + ch.row0 + j * ch.rowsPerPass() : first + row).named("pos");
    Value in = (pos < t.extent).named("in");
    Value offset = (kb.mul_wide(t.rowOf(kb.min(pos, last)), t.stride) + kb.cvt(chunk << 4u, Type::u64())).named("off");
    Value src = assumeAligned16(kb, kb.ptradd(t.base, offset), "src");
    // Row r0 + j rowsPerPass has r & 7 == r0 & 7 when rowsPerPass is a multiple of 8 (head_dim up
    // to 128); at 256 (4 rows a pass) each pass's row has its own swizzle, as every row at 192.
    const unsigned step = ch.even() ? ch.rowsPerPass() : 0;
    Value dst = !ch.even()     ? kb.ptradd(t.smem(), slotOf(t.rowBytes(), row, chunk), "dst")
                : j == 0       ? dst0
                : step % 8 == 0 ? kb.ptradd(dst0, kb.u32(j * step * t.rowBytes()), "dst")
                               : kb.ptradd(t.smem(), slotOf(t.rowBytes(), ch.row0 + j * step, chunk), "dst");
    kb.cp_async(dst, src, 16, kb.select(in, kb.u32(16), kb.u32(0), "bytes"), Mod::Cg);
  }
}

// fp8 k or v (cache_dtype): the tile's codes converted to the storage type through registers,
// exactly (every E4M3 and E5M2 value is a bf16 and an f16), in copyTile's passes: a thread's 8
// codes become one 16-byte chunk of the shared tile (st.shared.v4), from one 8-byte load when
// `vec` (the tensor 8-byte aligned) or 8 byte loads packed into the same two words, converted by
// fp8HalfPairs (as gemm's fp8 B); rows past the extent are zeros. A loop of kConvertBatch passes
// a turn, their loads first (unrolled, head_dim 256's 16 passes spill).
constexpr unsigned kConvertBatch = 2;

void convertTile(KernelBuilder& kb, const Config& c, const Tile& t, Value tid, Value first, bool vec) {
  const Chunks ch(t, tid);
  Value last = (t.extent - 1u).named("last");
  kb.for_range(kb.u32(0), kb.u32(ch.passes()), kb.u32(kConvertBatch), [&](Value j0) {
    // Per pass: the tile row and chunk, whether it holds a position, its 2 words of codes.
    std::vector<Value> rows, chunks, ins, loaded;
    for (unsigned u = 0; u < kConvertBatch; ++u) {
      auto [row, chunk] = ch.at(j0 + u);
      Value pos = (first + row).named("pos");
      rows.push_back(row);
      chunks.push_back(chunk);
      ins.push_back((pos < t.extent).named("in"));
      Value offset = (kb.mul_wide(t.rowOf(kb.min(pos, last)), t.stride) + kb.cvt(chunk << 3u, Type::u64())).named("off");
      Value src = kb.ptradd(t.base, offset, "src");
      if (vec) {
        Value w = kb.load(assumeAligned(kb, src, 8), Type::of(Scalar::U32, 2), {Mod::NcMod}, "codes");
        loaded.push_back(kb.extract(w, 0));
        loaded.push_back(kb.extract(w, 1));
      } else {
        std::vector<Value> bytes;
        for (unsigned i = 0; i < 8; ++i)
          bytes.push_back(kb.cvt(kb.load(i == 0 ? src : kb.ptradd(src, kb.u64(i)), Type::of(Scalar::U8), {Mod::NcMod},
                                         "code_byte"),
                                 Type::u32()));
        loaded.push_back(packBytes(std::span(bytes).first(4), "codes"));
        loaded.push_back(packBytes(std::span(bytes).last(4), "codes"));
      }
    }
    for (unsigned u = 0; u < kConvertBatch; ++u) {
      // The chunk's 4 words: codes 2i and 2i + 1 in the storage type.
      const std::array<Value, 4> pairs = fp8HalfPairs(kb, c.half(), loaded[2 * u], loaded[2 * u + 1], c.cache, c.fp8Cvt);
      std::vector<Value> words;
      for (unsigned i = 0; i < 4; ++i)
        words.push_back(kb.select(ins[u], pairs[i], kb.const_bits(Type::of(Scalar::B32), 0), "staged"));
      kb.store(kb.ptradd(t.smem(), slotOf(t.rowBytes(), rows[u], chunks[u]), "dst"),
               kb.pack(Type::of(Scalar::B32, 4), words, "chunk_bits"));
    }
  }, {.label = "convert_passes", .iv = "j0"});
}

// The same tile element by element (any 2-byte alignment): consecutive threads, consecutive
// elements of a row. A loop of kBatch elements a turn: unrolled, the stores' shared addresses
// (the same for every key tile) would be hoisted out of the key loop by ptxas, 64 registers at
// head_dim 128 held across it.
constexpr unsigned kBatch = 4;

void loadTile(KernelBuilder& kb, const Tile& t, Value tid, Value first) {
  const unsigned count = kRows * t.elems / kThreads;
  Value last = (t.extent - 1u).named("last");
  Value tile = t.smem();
  kb.for_range(kb.u32(0), kb.u32(count), kb.u32(kBatch), [&](Value j0) {
    std::vector<Value> staged, slots;
    for (unsigned u = 0; u < kBatch; ++u) {
      Value e = (tid + (j0 + u) * kThreads).named("elem");
      Value r = (e / t.elems).named("r"), col = (e % t.elems).named("col");
      Value pos = (first + r).named("pos");
      Value offset = (kb.mul_wide(t.rowOf(kb.min(pos, last)), t.stride) + kb.cvt(col << 1u, Type::u64())).named("off");
      Value v = kb.load(kb.ptradd(t.base, offset), Type::of(Scalar::U16), {Mod::NcMod}, "g");
      staged.push_back(kb.select((pos < t.extent).named("in"), v, kb.const_bits(Type::of(Scalar::U16), 0), "staged"));
      slots.push_back(slotOf(t.rowBytes(), r, col >> 3u) + ((col & 7u) << 1u));
    }
    for (unsigned u = 0; u < kBatch; ++u) kb.store(kb.ptradd(tile, slots[u]), staged[u]);
  }, {.label = "elements", .iv = "j0"});
}

Value pack2(KernelBuilder& kb, Value v4, unsigned first) {
  return kb.pack(Type::of(Scalar::B32, 2), {kb.extract(v4, first), kb.extract(v4, first + 1)}, "frag_b");
}

std::optional<ir::Module> buildPrefill(const Options& o, ir::Diagnostics& diags) {
  const Config c = configOf(o);
  if (c.pageSize & (c.pageSize - 1)) {
    diags.report(ir::Severity::Error, "", {}, "page_size must be 0 or a power of two, not " + std::to_string(c.pageSize));
    return std::nullopt;
  }
  if (c.pageSize && c.pageSize < kMinTmaPage && c.tmaParams) {
    diags.report(ir::Severity::Error, "", {},
                 "page_size " + std::to_string(c.pageSize) + " needs mainloop = \"mma\": the wgmma member loads k and v "
                 "by TMA boxes of whole 8-row 128B-swizzle atoms, so its pages hold at least " +
                     std::to_string(kMinTmaPage) + " rows");
    return std::nullopt;
  }
  if (c.window && !c.causal && !c.windowRight) {
    diags.report(ir::Severity::Error, "", {},
                 "window needs causal = true or window_right = true (a query's window is the keys up to its own, "
                 "and with window_right those up to window_right past it)");
    return std::nullopt;
  }
  if (c.windowRight && c.causal) {
    diags.report(ir::Severity::Error, "", {},
                 "window_right needs causal = false (causal is a window_right of 0)");
    return std::nullopt;
  }
  if (!checkFp8Decode(o, c.cache, diags)) return std::nullopt;
  for (auto [name, value] : {std::pair{"head_dim", c.dim}, std::pair{"v_head_dim", c.vdim}})
    if (value != 64 && value != 128 && value != 192 && value != 256) {
      diags.report(ir::Severity::Error, "", {},
                   std::string(name) + " must be 64, 128, 192 or 256, not " + std::to_string(value));
      return std::nullopt;
    }
  if (o.text("mainloop") == "wgmma") return buildPrefill90(o, diags);
  ir::Module m = newModule();
  if (c.fp8Cvt) m.ptx = kFp8CvtPtx;
  KernelBuilder kb(m, "attention_prefill");
  const Params p = declareParams(kb, c);
  const Value q = p.q, k = p.k, v = p.v, out = p.out, lse = p.lse, table = p.table;
  const Value kvStride = p.kvStride, maxPages = p.maxPages, qHeads = p.qHeads, kvHeads = p.kvHeads, scale = p.scale;
  Value seqQ = p.seqQ, seqK = p.seqK;
  kb.reqntid(kThreads);
  // The blocks per SM the design aims at (ptxas's own register target for 128 threads spills
  // head_dim 64): 2 at head_dim 128 (up to 255 registers; 48 KiB of shared memory), 3 at 64; the
  // output accumulators (v_head_dim) weigh most.
  const unsigned wide = std::max(c.dim, c.vdim);
  kb.minnctapersm(wide == 256 ? 1 : wide >= 128 ? 2 : 3);
  const unsigned tileWords = kRows * c.rowBytes() / 4, vTileWords = kRows * c.vRowBytes() / 4;
  // The Q, K and V tiles: static arrays up to 48 KiB in all (head_dim 128), past that the dynamic
  // shared memory the launch rule asks for (96 KiB at 256, 64 KiB at 192 with v_head_dim 128).
  std::function<Value()> qMem, kMem, vMem;
  if (tileBytes(c) <= kStaticShared) {
    SharedArray q = kb.shared("q_tile", Type::of(Scalar::B32), tileWords, 128);
    SharedArray k = kb.shared("k_tile", Type::of(Scalar::B32), tileWords, 128);
    SharedArray v = kb.shared("v_tile", Type::of(Scalar::B32), vTileWords, 128);
    qMem = [&kb, q] { return kb.shared_addr(q); };
    kMem = [&kb, k] { return kb.shared_addr(k); };
    vMem = [&kb, v] { return kb.shared_addr(v); };
  } else {
    Value tiles = kb.shared_addr(kb.shared_dynamic("tiles", Type::of(Scalar::B32), 128), "tiles");
    Value kTiles = kb.ptradd(tiles, kb.u32(4 * tileWords), "k_tiles");
    Value vTiles = kb.ptradd(tiles, kb.u32(8 * tileWords), "v_tiles");
    qMem = [tiles] { return tiles; };
    kMem = [kTiles] { return kTiles; };
    vMem = [vTiles] { return vTiles; };
  }

  Value tid = kb.tid(Mod::X, "tid");
  Value lane = (tid & 31u).named("lane"), warp = (tid >> 5u).named("warp");
  Value g = (lane >> 2u).named("g"), t = (lane & 3u).named("t");
  Value quad = (lane >> 3u).named("matrix"), lane7 = (lane & 7u).named("lane7");
  // The last query tiles see the most keys under a causal mask: they go first.
  Value q0 = ((kb.nctaid(Mod::X) - 1u - kb.ctaid(Mod::X)) * kRows).named("q0");
  Value qh = kb.ctaid(Mod::Y, "q_head"), b = kb.ctaid(Mod::Z, "seq");
  // The first rows of the sequence in q/o and in k/v (u64).
  Value qFirst, kvFirst;
  if (c.varlen) {
    Sequence sq = loadSequence(kb, p.arrays, b);
    seqQ = sq.seqQ;
    seqK = sq.seqK;
    qFirst = kb.cvt(sq.qFirst, Type::u64());
    if (!c.pageSize) kvFirst = kb.cvt(sq.kvFirst, Type::u64());
    // Query tiles past this sequence's length: nothing to do.
    kb.if_then((q0 >= seqQ).named("past_end"), [&] { kb.ret(); }, "past_end");
  } else {
    qFirst = kb.mul_wide(b, seqQ, "q_first");
    if (!c.pageSize) kvFirst = kb.mul_wide(b, kvStride, "kv_first");
  }
  if (c.pageSize) kvFirst = kb.u64(0);
  Value h = kvHeadOf(kb, qh, qHeads, kvHeads);
  Value kEnd = keyEnd(kb, c, q0, kRows, seqQ, seqK, p.windowRight);
  Value tiles = ((kEnd >> 6u) + kb.select((kEnd & 63u) != 0u, kb.u32(1), kb.u32(0))).named("tiles");
  // With a window, the tiles before the first row's window are skipped (none may be left).
  Value firstTile = c.window ? (keyStart(kb, c, q0, seqQ, seqK, p.window) / kKeys).named("first_tile") : kb.u32(0);

  Tile qTile{qMem, headBase(kb, q, qFirst, qHeads, qh, c.dim, "q_base"), (qHeads * c.rowBytes()).named("q_stride"),
             seqQ, c.dim};
  const unsigned kvBytes = c.kvBytes();
  Value kRowBytes = (kvHeads * (c.dim * kvBytes)).named("k_row");
  Value vRowBytes = c.vdim == c.dim ? kRowBytes : (kvHeads * (c.vdim * kvBytes)).named("v_row");
  Tile kTile{kMem, headBase(kb, k, kvFirst, kvHeads, h, c.dim, "k_base", kvBytes), kRowBytes, seqK, c.dim};
  Tile vTile{vMem, headBase(kb, v, kvFirst, kvHeads, h, c.vdim, "v_base", kvBytes), vRowBytes, seqK, c.vdim};
  kTile.codes = vTile.codes = c.cache != Fp8::None;
  if (c.pageSize) {
    // Position p: row p % page_size of the sequence's page p / page_size.
    Value pages = kb.index(table, (b * maxPages).named("table_row"), 4, "pages");
    kTile.row = vTile.row = [&kb, pages, ps = c.pageSize](Value pos) { return pagedRow(kb, pages, pos, ps); };
  }
  // fp8 k and v are converted through registers (8-byte loads when aligned to them); q, and k and v
  // of the storage type, come by cp.async when 16-byte aligned.
  const bool fp8 = c.cache != Fp8::None;
  Value fast = fp8 ? allAligned(kb, {q}, 16, "fast") : allAligned(kb, {q, k, v}, 16, "fast");
  Value codeWords = fp8 ? allAligned(kb, {k, v}, 8, "code_words") : Value();
  auto stage = [&](const Tile& tile, Value first) {
    if (tile.codes) {
      kb.if_else(codeWords, [&] { convertTile(kb, c, tile, tid, first, true); return std::vector<Value>{}; },
                 [&] { convertTile(kb, c, tile, tid, first, false); return std::vector<Value>{}; }, {.label = "convert"});
      return;
    }
    kb.if_else(fast, [&] { copyTile(kb, tile, tid, first); return std::vector<Value>{}; },
               [&] { loadTile(kb, tile, tid, first); return std::vector<Value>{}; }, {.label = "stage"});
  };

  // The Q tile and the first K tile; every key tile starts by waiting for its copies.
  stage(qTile, q0);
  kb.if_then((tiles > firstTile).named("has_keys"), [&] { stage(kTile, (firstTile * kKeys).named("k_first")); },
             "first_keys");
  kb.cp_async_commit_group();
  // Q's A fragment kk covers head elements [16 kk, 16 kk + 16) of the warp's rows: matrix `quad` of
  // ldmatrix x4 is rows 8 (quad & 1) and elements 8 (quad >> 1) on from there. Read again for
  // every key tile: in registers it would take 32 more (at head_dim 128).
  const unsigned steps = c.dim / 16;
  Value qRow = (warp * 16u + lane7 + ((quad & 1u) << 3u)).named("q_row"), qChunk = (quad >> 1u).named("q_chunk");
  // K (untransposed, B of Q K^T): matrix `quad` is keys 8 (quad >> 1) and elements 8 (quad & 1)
  // of a 16 x 16 piece. V (transposed, B of P V): keys 8 (quad & 1), elements 8 (quad >> 1).
  Value kRow = (lane7 + ((quad >> 1u) << 3u)).named("k_row"), kChunk = (quad & 1u).named("k_chunk");
  Value vRow = (lane7 + ((quad & 1u) << 3u)).named("v_row"), vChunk = (quad >> 1u).named("v_chunk");
  Value scale2 = (scale * kLog2e).named("scale2");
  Value row0 = (q0 + warp * 16u + g).named("row_g"), row1 = (row0 + 8u).named("row_g8");
  const unsigned nTiles = kKeys / 8, oTiles = c.vdim / 8;
  const Type v4f = Type::of(Scalar::F32, 4);
  Value zero = kb.f32(0.0f);
  Value acc0 = kb.pack(v4f, {zero, zero, zero, zero}, "acc_zero");
  const Softmax sm = softmaxOf(kb, c, p, seqQ, seqK, q0, t, scale2, row0, row1, qh, b);

  // Carried: m and l of rows g and g + 8, then the output accumulators.
  std::vector<Value> init = softmaxStart(kb, sm, zero);
  init.insert(init.end(), oTiles, acc0);
  std::vector<Value> st = kb.for_range(
      firstTile, tiles, kb.u32(1), init,
      [&](Value jt, std::span<Value> carried) {
        Value k0 = (jt * kKeys).named("k0");
        kb.cp_async_wait_all();
        kb.bar_sync();
        stage(vTile, k0);
        kb.cp_async_commit_group();

        std::vector<Value> s(nTiles, acc0);
        for (unsigned kk = 0; kk < steps; ++kk) {
          Value qSlot = slotOf(c.rowBytes(), qRow, qChunk + 2 * kk, lane7);
          Value qf = kb.ldmatrix(kb.ptradd(qMem(), qSlot), 4, false, "q_frag");
          for (unsigned i = 0; i < nTiles / 2; ++i) {
            Value slot = slotOf(c.rowBytes(), kRow + 16 * i, kChunk + 2 * kk, lane7);
            Value frag = kb.ldmatrix(kb.ptradd(kMem(), slot), 4, false, "k_frag");
            s[2 * i] = kb.mma(Mod::M16n8k16, c.half(), qf, pack2(kb, frag, 0), s[2 * i], "s");
            s[2 * i + 1] = kb.mma(Mod::M16n8k16, c.half(), qf, pack2(kb, frag, 2), s[2 * i + 1], "s");
          }
        }
        // Element e of n-tile j is row g + 8 (e >> 1), key k0 + 8 j + 2 t + (e & 1).
        std::vector<Value> sv;
        for (unsigned j = 0; j < nTiles; ++j)
          for (unsigned e = 0; e < 4; ++e) sv.push_back(kb.extract(s[j], e, "score"));
        std::vector<Value> next(carried.begin(), carried.end());
        Value m[2] = {carried[0], carried[1]}, l[2] = {carried[2], carried[3]}, corr[2];
        std::vector<Value> pf = softmaxTile(kb, c, sm, k0, kKeys, sv, m, l, corr);
        next[0] = m[0], next[1] = m[1], next[2] = l[0], next[3] = l[1];
        for (unsigned i = 0; i < oTiles; ++i) {
          Value& acc = next[4 + i];
          std::vector<Value> e;
          for (unsigned x = 0; x < 4; ++x) e.push_back(kb.extract(acc, x) * corr[x >> 1]);
          acc = kb.pack(v4f, e, "o_scaled");
        }

        kb.cp_async_wait_all();
        kb.bar_sync();  // V is in; every warp is done with K
        kb.if_then(((jt + 1u) < tiles).named("has_next"), [&] { stage(kTile, k0 + kKeys); }, "next_keys");
        kb.cp_async_commit_group();
        for (unsigned kk = 0; kk < nTiles / 2; ++kk)
          for (unsigned i = 0; i < oTiles / 2; ++i) {
            Value slot = slotOf(c.vRowBytes(), vRow + 16 * kk, vChunk + 2 * i, lane7);
            Value frag = kb.ldmatrix(kb.ptradd(vMem(), slot), 4, true, "v_frag");
            next[4 + 2 * i] = kb.mma(Mod::M16n8k16, c.half(), pf[kk], pack2(kb, frag, 0), next[4 + 2 * i], "o");
            next[5 + 2 * i] = kb.mma(Mod::M16n8k16, c.half(), pf[kk], pack2(kb, frag, 2), next[5 + 2 * i], "o");
          }
        return next;
      },
      {.label = "key_tiles", .iv = "jt"});
  kb.cp_async_wait_all();

  const Output dst{out, lse, qFirst, seqQ, qHeads, qh, b, scale2, t, {row0, row1}, p.vScale};
  const Value mRow[2] = {st[0], st[1]}, lRow[2] = {st[2], st[3]};
  storeRows(kb, c, dst, mRow, lRow, [&](unsigned tile, unsigned e) { return kb.extract(st[4 + tile], e); });
  kb.ret();
  return finish(kb, m, diags);
}

}  // namespace

void addAttentionPrefill(std::vector<Template>& out) {
  OptionSpec dim = intOption("head_dim", 128, 64, 256,
                             "elements of a head of q and k: 64, 128, 192 or 256 (wgmma: key tiles of 64 at 256)",
                             64);
  OptionSpec vdim = intOption("v_head_dim", 0, 0, 256,
                              "elements of a head of v and o: 0 (head_dim), or 64, 128, 192 or 256 beside another "
                              "head_dim: DeepSeek's multi-head latent attention at prefill takes head_dim 192 (128 + 64 "
                              "rope) and v_head_dim 128 (wgmma: key tiles of 64 above 128)",
                              64);
  out.push_back({
      "attention_prefill",
      "flash-attention forward on the tensor cores: o = softmax(scale q k^T) v for q, o [batch, seq_q, q_heads, "
      "head_dim] and k, v [batch, kv_stride, kv_heads, head_dim] (v and o v_head_dim elements a head when it is set; "
      "keys [0, seq_k), the first seq_k - seq_q a cached prefix), q_heads a multiple of kv_heads; f32 accumulation "
      "and softmax; a row without keys gets zeros; blocks of 64 query rows of one head (4 warps), K and V in tiles of "
      "64 keys",
      {choiceOption("dtype", "bf16", {"bf16", "f16"}, "storage type of q, k, v and o (the mma inputs)"), dim, vdim,
       option("causal", false, "query row i sees keys j <= i + seq_k - seq_q (bottom-right aligned)"),
       option("window", false,
              "sliding-window attention (with causal or window_right): the u32 parameter window (after scale) keeps the window "
              "keys up to each row's own, j > i + seq_k - seq_q - window (0: all of them), so one kernel serves a "
              "model's local and global layers; key tiles before a block's windows are skipped"),
       option("window_right", false,
              "a window to the right (not causal): the u32 parameter window_right (after scale and window) keeps "
              "the keys j <= i + seq_k - seq_q + window_right, with window the keys of a two-sided window around "
              "each row's position (FlashAttention's window_size = (window - 1, window_right)); key tiles past a "
              "block's reach are skipped"),
       option("softcap", false,
              "logit soft-capping (Gemma 2): the f32 parameter softcap (after scale and window; 0: no cap) turns "
              "each scaled score s into softcap * tanh(s / softcap) before the softmax"),
       option("alibi", false,
              "ALiBi position biases: the f32 [q_heads] parameter alibi_slopes (after the other pointers) adds "
              "-alibi_slopes[h] * |i + seq_k - seq_q - j| to query head h's scaled (and capped) score of row i "
              "and key j"),
       option("bias", false,
              "an additive bias (SDPA's attn_mask; -inf masks a key): the pointer bias (after the other pointers) "
              "holds dtype elements, element (i, j) of sequence b and query head h at b * bias_batch_stride + h * "
              "bias_head_stride + i * bias_row_stride + j, the three u32 strides (elements; 0 broadcasts) after "
              "the other scalars; added to the scaled (and capped) score of row i and key j, positions "
              "within the sequence; a row whose keys are all masked gets zeros"),
       option("sinks", false,
              "attention sinks (gpt-oss): the f32 [q_heads] pointer sinks (after the other pointers) holds a logit "
              "per query head, in the scaled scores' units, that joins every row's softmax without a value: o = "
              "sum_j e^(s_j) v_j / (e^(sinks[h]) + sum_j e^(s_j)); -inf is no sink; lse includes it"),
       option("lse", false,
              "also write the natural log-sum-exp of each row's scaled scores to lse (f32) [batch, q_heads, seq_q], "
              "or [rows, q_heads] with varlen; -inf for a row without keys (with sinks, its head's sink)"),
       option("varlen", false,
              "sequences of their own lengths: q_offsets, q_lengths, kv_offsets, kv_lengths (u32 [batch]) give "
              "sequence b's first row and row count in q and o [rows, q_heads, head_dim] and in k and v [rows, "
              "kv_heads, head_dim], in place of seq_q, seq_k and kv_stride; max_seq_q (at least every q_lengths[b]) "
              "sizes the grid; with mainloop = \"wgmma\" or \"auto\" also q_rows and kv_rows, the row counts of q "
              "and k/v (the extents of their tensor maps)"),
       pageSizeOption("k and v rows per page: 0 for the layouts above; a power of two for a paged cache (at least 8 "
                      "with mainloop = \"wgmma\" or \"auto\"): sequence b's position p is row p % page_size of page "
                      "block_table[b * max_pages + p / page_size] of k and v [rows, kv_heads, head_dim], block_table "
                      "and max_pages in place of kv_stride (or kv_offsets); with mainloop = \"wgmma\" or \"auto\" "
                      "also kv_rows, the cache's rows (the extent of its tensor maps)"),
       choiceOption("mainloop", "mma", {"mma", "wgmma", "auto"},
                    "\"mma\": mma.sync fed by cp.async (sm_80+); \"wgmma\": wgmma fed by TMA through an mbarrier "
                    "ring, for an entry that targets sm_90a alone (q, k and v 16-byte aligned); \"auto\": wgmma in "
                    "an sm_90a target's code and mma.sync in the other targets', one bundle kernel with the wgmma "
                    "member's parameters"),
       cacheDtypeOption("what k and v hold: auto (dtype), or fp8_e4m3 / fp8_e5m2 codes (u8, as kv_scatter writes "
                        "them) whose values are times the f32 parameters k_scale and v_scale (after scale), converted "
                        "to dtype exactly as a tile is staged (mainloop = \"wgmma\": by the producer's other warps "
                        "after TMA, where the tiles and their codes fit in shared memory: not head_dim 256 beside "
                        "v_head_dim 192 or 256)"),
       fp8DecodeOption()},
      buildPrefill,
      [](const Options& o) {
        if (o.text("mainloop") == "wgmma") return launchPrefill90(o);
        Expr rows = Expr::param(o.flag("varlen") ? "max_seq_q" : "seq_q");
        LaunchRule r;
        r.block = {kThreads};
        r.grid = {ceilDiv(rows, kRows), Expr::param("q_heads"), Expr::param("batch")};
        const Config c = configOf(o);
        if (tileBytes(c) > kStaticShared) r.dynamicShared = Expr(tileBytes(c));  // the Q, K and V tiles
        return r;
      },
      [](const Options& o) { return withFp8Decode(wgmmaWhereItRuns(o), o, cacheDtype(o)); },
  });
  // q, k, v and the bias are read, o written, as raw 16-bit words (ldmatrix, cp.async, TMA, packed pairs).
  out.back().elements = allElements({storageElements({"q", "o", "bias"}), cacheElements({"k", "v"}),
                                     u32Elements({"q_offsets", "q_lengths", "kv_offsets", "kv_lengths", "block_table"})});
  // Without varlen, [batch, seq_q or kv_stride, heads, head_dim]; with varlen or pages, the rows the
  // tensor-map members take as parameters (q_rows, kv_rows), else unknown: the rows the sequences
  // (or the pages) reach, which no parameter says. The bias is as its strides broadcast it: unknown.
  out.back().extents = [](const Options& o) {
    const bool varlen = o.flag("varlen"), paged = o.integer("page_size") > 0, tma = o.text("mainloop") != "mma";
    const Config c = configOf(o);
    const Expr batch = Expr::param("batch"), qHeads = Expr::param("q_heads");
    const Expr dim(uint64_t{c.dim}), vdim(uint64_t{c.vdim});
    Template::Extents e{{"alibi_slopes", qHeads}, {"sinks", qHeads}, {"block_table", batch * Expr::param("max_pages")}};
    for (const char* n : {"q_offsets", "q_lengths", "kv_offsets", "kv_lengths"}) e.push_back({n, batch});
    if (!varlen) {
      const Expr seqQ = Expr::param("seq_q");
      e.push_back({"q", batch * seqQ * qHeads * dim});
      e.push_back({"o", batch * seqQ * qHeads * vdim});
      e.push_back({"lse", batch * qHeads * seqQ});
    } else if (tma) {
      const Expr qRows = Expr::param("q_rows");
      e.push_back({"q", qRows * qHeads * dim});
      e.push_back({"o", qRows * qHeads * vdim});
      e.push_back({"lse", qRows * qHeads});
    }
    const Expr kvRows = !varlen && !paged ? batch * Expr::param("kv_stride") : Expr::param("kv_rows");
    if ((!varlen && !paged) || tma) {
      e.push_back({"k", kvRows * Expr::param("kv_heads") * dim});
      e.push_back({"v", kvRows * Expr::param("kv_heads") * vdim});
    }
    return e;
  };
}

}  // namespace tn::kernels::lib
