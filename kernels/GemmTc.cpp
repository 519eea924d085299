// The tensor-core members of gemm (docs/kernels.md): tf32, bf16 and f16 with f32 accumulation,
// s8 and u8 with s32, fp8 codes (E4M3, E5M2; sm_89+) with f32, on mma.sync fed by ldmatrix from a
// cp.async pipeline. fp8 A and B are staged exactly as s8 and u8 are (bytes are bytes); only the
// mma differs (mma.m16n8k32.e4m3 / .e5m2).
//
// Block: `warps` warps (8 or 4) as 2 (M) x warps/2 (N). Warp (wm, wn) owns a (tile_m/2) x
// (tile_n/(warps/2)) piece of the block's tile: MI x NI mma tiles of 16 x 8, f32 (or s32)
// accumulators in registers.
// K advances in stages of 64 bytes of every row (16 tf32, 32 bf16/f16 or 64 s8/u8/fp8 elements),
// each two mma k-steps of 32 bytes. The element width only changes the mma shape: every
// fragment is read as 8x8 matrices of 16-bit pairs by ldmatrix, whatever the elements are.
//
// Shared memory: per factor and stage 64 * rows bytes (rows = tile_m for A, tile_n for B), in one
// of two geometries, both free of bank conflicts for ldmatrix and the 16-byte cp.async stores
// (tile-validation checks it: lit-tests/tile-validation/gemm-tc.test):
//  - rows of K: row r (along M for A, along N for B) holds its 64 bytes of the stage as four
//    16-byte chunks, chunk c at position c ^ ((r >> 1) & 3); ldmatrix reads it untransposed.
//  - k rows (16-bit elements stored contiguous along M or N in global memory): k row kk holds the
//    stage's `rows` elements as rows/8 chunks, chunk c at position c ^ (kk & 7); ldmatrix.trans
//    reads it.
// Staging: when the factor's base, leading dimension and batch stride are multiples of 16 bytes
// (a run-time test, uniform over the launch), 16-byte cp.async.cg; edges zero-filled through
// cp.async's src-size, out-of-range chunks read nothing. Otherwise, and always for 8- and 32-bit
// elements stored contiguous along M or N (ldmatrix cannot transpose them), element by element
// through registers into the rows-of-K geometry, zeros past the edges. `stages` stages rotate:
// stage s + stages - 1 is issued before stage s is multiplied, one barrier per stage.
//
// fp8 B (b_dtype: weights as E4M3 or E5M2 codes): B's shared tiles hold A's type, the same
// geometries; the codes become it exactly on the way (cvt.f16x2 on sm_89+, integer decoding on
// older targets: kernels/Fp8.cpp). When B's base, leading dimension and batch stride are multiples
// of 8 bytes and its K (along a row) or N (along a k row) a multiple of 8, every 16-byte chunk of a
// stage is 8 codes wholly inside or outside the matrix: one 8-byte load, issued with the stage,
// and the conversion and st.shared after the current stage's mmas (the loads' latency behind
// them). Otherwise code by code through registers, as above.
//
// split_k: block z = batch * splits + split multiplies its split's K steps as a product of its
// own (the factors' bases moved to its first step), and the epilogue goes through reduceSplits
// (kernels/Gemm.cpp).
//
// experts (a grouped GEMM, MoE prefill): block row y reads tile_experts[y] once; B's base (and
// bias's and b_scales' rows) is that expert's, a tile of none returns at once, and an unknown
// expert's tile runs no K steps from NaN accumulators, so the epilogue stores NaN.
#include "kernels/Gemm.h"

namespace tn::kernels::lib::gemm {

namespace {

using ir::Mod;
using ir::Scalar;
using ir::SharedArray;
using ir::Type;

constexpr unsigned kRowBytes = 64;   // K bytes of one row per stage
constexpr unsigned kStepBytes = 32;  // K bytes of one mma
constexpr unsigned kSharedLimit = 48 * 1024;  // static shared memory per block

struct Element {
  unsigned bytes;  // of one element of A and B
  Scalar mmaIn;    // the mma's input type
  Mod shape;
  Scalar raw;      // the element's bits, for the path through registers
};

Element elementOf(Input in) {
  switch (in) {
    case Input::Tf32: return {4, Scalar::F32, Mod::M16n8k8, Scalar::U32};
    case Input::BF16: return {2, Scalar::BF16, Mod::M16n8k16, Scalar::U16};
    case Input::F16: return {2, Scalar::F16, Mod::M16n8k16, Scalar::U16};
    case Input::S8: return {1, Scalar::S8, Mod::M16n8k32, Scalar::U8};
    case Input::U8: return {1, Scalar::U8, Mod::M16n8k32, Scalar::U8};
    case Input::E4M3:
    case Input::E5M2: return {1, Scalar::B8, Mod::M16n8k32, Scalar::U8};  // the format: Config::codes()
    case Input::F32: break;  // the SIMT member (kernels/Gemm.cpp) never gets here
  }
  return {4, Scalar::F32, Mod::M16n8k8, Scalar::U32};
}

// One factor of the product as the block sees it. Element (r, kk) of the factor (r along M for
// A, N for B) is at base[r * ld + kk] when it is contiguous along K (row-major A, column-major
// B), else at base[kk * ld + r].
struct Factor {
  Value base;       // the batch's matrix (its elements gBytes apart)
  Value ld;         // u32, in elements
  Value extent;     // m or n
  Value origin;     // the block's first row along M or N
  unsigned rows;    // tile_m or tile_n
  unsigned threads; // of the block
  bool alongK;      // contiguous along K in global memory
  bool kRows;       // the k-rows geometry in shared memory (ldmatrix.trans)
  bool rowHalfLow;  // ldmatrix matrix q's row half is q & 1 (A) rather than q >> 1 (B)
  SharedArray tile;
  Value fast;       // pred: the 16-byte cp.async path applies (fp8 codes: the 8-byte loads of whole chunks)
  unsigned gBytes;  // of an element in global memory: the mma's, or 1 for fp8 codes
  Fp8 codes;        // fp8 codes (B, b_dtype), converted to the mma's type as they are staged ...
  bool cvt;         // ... decoded by cvt.f16x2 (else by integer instructions)
  unsigned stageBytes() const { return rows * kRowBytes; }
  unsigned rowBytes() const { return kRows ? rows * 2 : kRowBytes; }
};

// Byte offset inside a stage of 16-byte chunk `chunk` of line `line` (a row, or a k row in the
// k-rows geometry).
Value slotOf(const Factor& f, Value line, Value chunk) {
  Value swizzle = f.kRows ? (line & 7u) : ((line >> 1u) & 3u);
  return (line * f.rowBytes() + ((chunk ^ swizzle) << 4u)).named("slot");
}

// The 16-byte chunks of a stage this thread moves: rows / 64 of them, each 16 / e.bytes
// consecutive elements of the factor in global memory (a row's K elements, or a k row's along M
// or N). offset: from the factor's base in bytes, clamped into the matrix; bytes: how many of the
// chunk's global bytes lie inside it (0: none); dst: the chunk's slot in the stage. Everything is
// computed here from tid, not kept from before the K loop: a few integer instructions per stage
// cost less than the registers.
struct Chunk {
  Value offset, bytes, dst;
};

std::vector<Chunk> chunksOf(KernelBuilder& kb, const Factor& f, const Element& e, Value tid, Value k0, Value k) {
  const unsigned count = f.stageBytes() / 16 / f.threads, perChunk = 16 / e.bytes, chunkBytes = perChunk * f.gBytes;
  std::vector<Chunk> out;
  if (!f.kRows) {
    // Chunk j: row (tid >> 2) + threads/4 j, K chunk tid & 3.
    Value r0 = (tid >> 2u).named("chunk_row"), c = (tid & 3u).named("chunk_k");
    Value dst0 = slotOf(f, r0, c);
    Value kel = (k0 + c * perChunk).named("chunk_k0");
    Value in = (kel < k).named("k_in");
    Value kBytes = kb.select(in, kb.min((k - kel) * f.gBytes, kb.u32(chunkBytes)), kb.u32(0), "k_bytes");
    Value kOff = kb.cvt(kb.select(in, kel, k0), Type::u64(), "k_off");
    Value last = (f.extent - f.origin - 1u).named("last_row");  // >= 0: the block exists
    for (unsigned j = 0; j < count; ++j) {
      Value r = r0 + f.threads / 4 * j;
      Value row = (f.origin + kb.min(r, last)).named("row");
      Value offset = ((kb.mul_wide(row, f.ld) + kOff) * f.gBytes).named("off");
      out.push_back({offset, kb.select((r <= last).named("row_in"), kBytes, kb.u32(0), "bytes"),
                     dst0 + j * f.threads / 4 * kRowBytes});
    }
    return out;
  }
  // Chunk j: k row tid / perRow + (threads / perRow) j, chunk tid % perRow along M/N.
  const unsigned perRow = f.rows / 8;
  Value kk0 = (tid / perRow).named("chunk_kk"), c = (tid % perRow).named("chunk_col");
  Value dst0 = slotOf(f, kk0, c);
  Value col = (f.origin + (c << 3u)).named("col");
  Value colIn = (col < f.extent).named("col_in");
  Value colBytes = kb.select(colIn, kb.min((f.extent - col) * f.gBytes, kb.u32(chunkBytes)), kb.u32(0), "col_bytes");
  Value colOff = kb.cvt(kb.select(colIn, col, f.origin), Type::u64(), "col_off");
  for (unsigned j = 0; j < count; ++j) {
    const unsigned kkStep = j * (f.threads / perRow);
    Value gk = (k0 + kk0 + kkStep).named("gk");
    Value in = (gk < k).named("k_in");
    Value offset = ((kb.mul_wide(kb.select(in, gk, k0), f.ld) + colOff) * f.gBytes).named("off");
    out.push_back({offset, kb.select(in, colBytes, kb.u32(0), "bytes"), dst0 + kkStep * f.rowBytes()});
  }
  return out;
}

// Issues this thread's cp.async copies of the stage at K element k0 into stage offset `stage`
// (bytes): partial chunks at the edges zero-filled, chunks outside the matrix read nothing.
void copyStage(KernelBuilder& kb, const Factor& f, const Element& e, Value tid, Value k0, Value k, Value stage) {
  Value tile = kb.ptradd(kb.shared_addr(f.tile), stage, "tile");
  for (const Chunk& ch : chunksOf(kb, f, e, tid, k0, k)) {
    Value src = assumeAligned16(kb, kb.ptradd(f.base, ch.offset), "src");
    kb.cp_async(kb.ptradd(tile, ch.dst, "dst"), src, 16, ch.bytes, Mod::Cg);
  }
}

// fp8 codes (B with b_dtype) on their fast path, where every chunk lies wholly inside the matrix
// or wholly outside it: loadCodes loads this thread's chunks of the stage at k0 (8 codes each,
// one 8-byte load; zeros for chunks outside), storeCodes converts them to the mma's type and
// stores them into stage offset `stage`. The K loop loads a stage's codes before the mmas of the
// current stage and stores them after, so the loads' latency hides behind the mmas.
std::vector<Value> loadCodes(KernelBuilder& kb, const Factor& f, const Element& e, Value tid, Value k0, Value k) {
  std::vector<Value> words;
  for (const Chunk& ch : chunksOf(kb, f, e, tid, k0, k)) {
    Value src = assumeAligned(kb, kb.ptradd(f.base, ch.offset), 8);
    Value w = kb.load(src, Type::of(Scalar::U32, 2), {Mod::NcMod}, "codes");
    Value in = (ch.bytes != 0u).named("chunk_in");
    for (unsigned i = 0; i < 2; ++i) words.push_back(kb.select(in, kb.extract(w, i), kb.u32(0), "codes_in"));
  }
  return words;
}

// The 16-bit value of an fp8 code's value (f32: decodeCodes's, times `scale`) in the mma's type.
Value halfOf(KernelBuilder& kb, const Element& e, Value x, float scale) {
  return kb.cvt(scale == 1.0f ? x : x * scale, Type::of(e.mmaIn), "staged");
}

void storeCodes(KernelBuilder& kb, const Factor& f, const Element& e, std::span<const Value> words, Value tid, Value k0,
                Value k, Value stage) {
  Value tile = kb.ptradd(kb.shared_addr(f.tile), stage, "tile");
  const std::vector<Chunk> chunks = chunksOf(kb, f, e, tid, k0, k);
  for (size_t j = 0; j < chunks.size(); ++j) {
    const std::array<Value, 4> pairs = fp8HalfPairs(kb, e.mmaIn, words[2 * j], words[2 * j + 1], f.codes, f.cvt);
    kb.store(kb.ptradd(tile, chunks[j].dst, "dst"),
             kb.pack(Type::of(Scalar::B32, 4), std::vector<Value>(pairs.begin(), pairs.end()), "chunk_bits"));
  }
}

// Stages the K slice at element k0 element by element: loads clamped into the matrix, zeros
// past its edges, stores into stage offset `stage` (bytes); fp8 codes decoded on the way.
void loadStage(KernelBuilder& kb, const Factor& f, const Element& e, Value tid, Value k0, Value k, Value stage) {
  const unsigned bk = kRowBytes / e.bytes, count = f.rows * bk / f.threads;
  Value tile = kb.ptradd(kb.shared_addr(f.tile), stage, "tile");
  const Type raw = Type::of(e.raw);
  // Which element of the tile element j of the thread is: consecutive threads walk the global
  // layout's contiguous direction, and a warp's stores are free of bank conflicts. Along K, a
  // warp covers 32 consecutive elements of K in one or more rows; k rows (16-bit), 32
  // consecutive rows of one k row; 8- and 32-bit elements contiguous along M/N, which go into
  // rows of K, a block of 8 rows x 4 elements of K (rows of one swizzle period: 8 distinct
  // bank groups).
  const unsigned rowBlocks = f.rows / 8;
  Value lane = tid & 31u, warp = tid >> 5u;
  for (unsigned j = 0; j < count; ++j) {
    Value r, kk;
    if (f.alongK) {
      r = tid / bk + (f.threads / bk) * j;
      kk = tid % bk;
    } else if (f.kRows) {
      r = tid % f.rows;
      kk = tid / f.rows + (f.threads / f.rows) * j;
    } else {
      Value block = warp + (f.threads / 32) * j;
      r = (block % rowBlocks) * 8u + (lane & 7u);
      kk = (block / rowBlocks) * 4u + (lane >> 3u);
    }
    Value row = (f.origin + r).named("row"), gk = (k0 + kk).named("gk");
    Value in = ((row < f.extent) & (gk < k)).named("in");
    Value rc = kb.min(row, f.extent - 1u), kc = kb.min(gk, k - 1u);
    Value index = f.alongK ? kb.mul_wide(rc, f.ld) + kb.cvt(kc, Type::u64()) : kb.mul_wide(kc, f.ld) + kb.cvt(rc, Type::u64());
    Value v;
    if (f.codes == Fp8::None) {
      v = kb.load(kb.index(f.base, index.named("index"), e.bytes), raw, {Mod::NcMod}, "g");
    } else {  // a code (0, +0, past the edges), decoded
      Value code = kb.load(kb.index(f.base, index.named("index"), 1), Type::of(Scalar::U8), {Mod::NcMod}, "code");
      Value x = decodeCodes(kb, kb.cvt(code, Type::u32()), 1, f.codes, f.cvt, "code_value")[0];
      v = kb.bitcast(halfOf(kb, e, x, fp8Scale(f.codes, f.cvt)), raw);
    }
    v = kb.select(in, v, kb.const_bits(raw, 0), "staged");
    Value line = f.kRows ? kk : r, byte = f.kRows ? r * 2u : kk * e.bytes;
    Value slot = slotOf(f, line, byte >> 4u) + (byte & 15u);
    kb.store(kb.ptradd(tile, slot), v);
  }
}

// Where lane `lane` of the warp points ldmatrix for group i (16 rows of the warp's piece) and
// k-step ks of a stage: matrix q = lane / 8 is rows 8 * (row half) .. + 7 and K bytes 16 * (k
// half) .. + 15 of the group, its row lane % 8 addressed by this lane.
struct Reader {
  Value laneOff;    // rows of K: the lane's row * 64 + its row's swizzled chunk for ks = 0
  Value laneOff1;   // ... for ks = 1
  Value chunkBase;  // k rows: the lane's chunk along M/N for group 0, before the swizzle
  Value lane7;
};

Reader readerOf(const Factor& f, Value lane, Value warpBase) {
  Reader rd;
  Value q = lane >> 3u;
  rd.lane7 = (lane & 7u).named("lane7");
  Value rowHalf = f.rowHalfLow ? (q & 1u) : (q >> 1u);
  Value kHalf = f.rowHalfLow ? (q >> 1u) : (q & 1u);
  if (!f.kRows) {
    Value row = (warpBase + rd.lane7 + (rowHalf << 3u)).named("ld_row");
    rd.laneOff = slotOf(f, row, kHalf);
    rd.laneOff1 = slotOf(f, row, kHalf + kStepBytes / 16);
  } else {
    Value kk = (rd.lane7 + (kHalf << 3u)).named("ld_kk");
    rd.laneOff = (kk * f.rowBytes()).named("ld_line");
    rd.chunkBase = ((warpBase >> 3u) + rowHalf).named("ld_chunk");
  }
  return rd;
}

// ldmatrix x4 of group i, k-step ks, from stage offset `stage`.
Value readGroup(KernelBuilder& kb, const Factor& f, const Reader& rd, Value stage, unsigned i, unsigned ks) {
  Value off;
  if (!f.kRows) {
    off = (ks == 0 ? rd.laneOff : rd.laneOff1) + i * 16 * kRowBytes;
  } else {
    Value chunk = ((rd.chunkBase + 2 * i) ^ rd.lane7) << 4u;
    off = rd.laneOff + ks * 16 * f.rowBytes() + chunk;
  }
  Value p = kb.ptradd(kb.shared_addr(f.tile), stage + off, "frag_addr");
  return kb.ldmatrix(p, 4, f.kRows, "frag");
}

// A tf32 fragment of `lanes` f32 bits with each element rounded to nearest (cvt.tf32), as cuBLAS
// rounds its inputs: mma alone would drop the low 13 bits, twice the error.
Value roundTf32(KernelBuilder& kb, Value frag, unsigned lanes) {
  std::vector<Value> out;
  for (unsigned l = 0; l < lanes; ++l) {
    out.push_back(kb.cvt_tf32(kb.bitcast(kb.extract(frag, l), Type::f32(), "frag_f32"), "frag_tf32"));
  }
  return kb.pack(Type::of(Scalar::B32, static_cast<uint8_t>(lanes)), out, "frag_rounded");
}

Value pack2(KernelBuilder& kb, Value v4, unsigned first) {
  return kb.pack(Type::of(Scalar::B32, 2), {kb.extract(v4, first), kb.extract(v4, first + 1)}, "frag_b");
}

}  // namespace

std::optional<ir::Module> buildGemmTensorCore(const Config& c, ir::Diagnostics& diags) {
  const Element e = elementOf(c.in);
  const unsigned bk = kRowBytes / e.bytes;
  const unsigned sharedBytes = c.stages * (c.tileM + c.tileN) * kRowBytes;
  if (sharedBytes > kSharedLimit) {
    diags.report(ir::Severity::Error, "", {}, "stages = " + std::to_string(c.stages) + " with " + std::to_string(c.tileM) + "x" +
                        std::to_string(c.tileN) + " tiles needs " + std::to_string(sharedBytes / 1024) +
                        " KiB of shared memory; the tensor-core members use static shared memory, at most 48 KiB");
    return std::nullopt;
  }
  ir::Module m = newModule();
  if (c.fp8Cvt) m.ptx = kFp8CvtPtx;
  if (c.codes() != Fp8::None) m.ptx = kFp8MmaPtx;
  KernelBuilder kb(m, "gemm");
  const Params p = declareParams(kb, c);
  const unsigned threads = 32 * c.warps;
  kb.reqntid(threads);
  // fp8 B's conversion takes registers (rr: 140 without the hint): two blocks of 8 warps an SM,
  // as the other members have, for at most 128 (split_k members take ~147 either way).
  if (c.bCodes != Fp8::None && !c.splitK && c.warps == 8) kb.minnctapersm(2);
  // Block scales hold partial sums beside the tile's (tile_m 64: 2 x 32 f32 a thread). At 8 warps
  // ptxas otherwise settles at 128 registers and spills a few bytes (at 168 more); one block of 8
  // warps an SM either way past 128.
  if (c.scaleBlock != 0 && c.warps == 8) kb.maxnreg(200);

  Value tid = kb.tid(Mod::X, "tid");
  Value lane = (tid & 31u).named("lane"), warp = (tid >> 5u).named("warp");
  // Warps 2 (M) x warps/2 (N).
  const unsigned warpsN = c.warps / 2;
  Value wm = (warp / warpsN).named("wm"), wn = (warp % warpsN).named("wn");
  const unsigned warpM = c.tileM / 2, warpN = c.tileN / warpsN, mi = warpM / 16, ni = warpN / 8;
  Value m0 = (kb.ctaid(Mod::Y) * c.tileM).named("m0");
  Value n0 = (kb.ctaid(Mod::X) * c.tileN).named("n0");
  // Not a structured binding: lambdas capture them, which clang 14 refuses.
  const std::pair<Value, Split> zs = batchAndSplit(kb, c, p);
  const Value z = zs.first;
  const Split split = zs.second;
  // Experts: the M tile's expert is B's plane (and bias's and b_scales' row); a tile of none
  // returns at once, one of an unknown expert multiplies nothing and stores NaN.
  Value zB = z, known;
  Params pe = p;
  if (c.experts) {
    Value expert = kb.load(kb.index(p.tileExperts, kb.ctaid(Mod::Y), 4), Type::u32(), {Mod::NcMod}, "expert");
    kb.if_then((expert == kNoExpert).named("no_tile"), [&] { kb.ret(); }, "no_tile");
    known = (expert < p.nExperts).named("known_expert");
    zB = kb.select(known, expert, kb.u32(0), "expert_plane");
    Value row = kb.mul_wide(zB, p.n, "expert_row");
    if (c.bias) pe.bias = kb.ptradd(p.bias, row * uint64_t{c.out == Output::F32 ? 4u : 2u}, "expert_bias");
    if (c.bScales) pe.bScales = kb.ptradd(p.bScales, row * uint64_t{4}, "expert_b_scales");
  }

  auto factor = [&](Value base, Value ld, Value stride, Value extent, Value origin, unsigned rows, bool alongK,
                    bool isA, Fp8 codes, std::string_view name) {
    const unsigned gBytes = codes == Fp8::None ? e.bytes : 1;
    Factor f{batchBase(kb, base, stride, isA ? z : zB, gBytes, name), ld, extent, origin, rows, threads, alongK, !alongK && e.bytes == 2,
             isA, kb.shared(isA ? "as" : "bs", Type::of(Scalar::B32), c.stages * rows * kRowBytes / 4, 128), Value(),
             gBytes, codes, c.fp8Cvt};
    if (codes != Fp8::None) {
      // 8 codes a chunk, each chunk wholly inside the matrix or outside it: its K (or N) a
      // multiple of 8 as well.
      f.fast = (allAligned(kb, {base}, 8) & ((ld & 7u) == 0u) & ((stride & uint64_t{7}) == uint64_t{0}) &
                (((alongK ? p.k : p.n) & 7u) == 0u))
                   .named("codes_fast");
    } else if (alongK || f.kRows) {
      const unsigned mask = 16 / e.bytes - 1;
      f.fast = (allAligned(kb, {base}, 16) & ((ld & mask) == 0u) & ((stride & uint64_t{mask}) == uint64_t{0}))
                   .named(isA ? "a_fast" : "b_fast");
    }
    return f;
  };
  Factor a = factor(p.a, p.lda, p.strideA, p.m, m0, c.tileM, c.a == Layout::Row, true, Fp8::None, "a_batch");
  Factor b = factor(p.b, p.ldb, p.strideB, p.n, n0, c.tileN, c.b == Layout::Col, false, c.bCodes, "b_batch");
  auto stepsOf = [&](Value k) { return ((k / bk) + kb.select((k % bk) != 0u, kb.u32(1), kb.u32(0))).named("steps"); };
  // split_k: the split's slice of K seen as a product of its own, K from the split's first step,
  // so that the K loop is the unsplit one (no offset carried through it: registers). The factors
  // start there and K ends k - kFirst further on (never read when the split has no steps).
  StepRange range;
  Value kEnd = p.k;
  if (c.splitK) {
    range = splitSteps(kb, split, stepsOf(p.k));
    Value kFirst = (range.first * bk).named("k_first");
    kEnd = (p.k - kFirst).named("k_end");
    for (Factor* f : {&a, &b}) {
      Value elements = f->alongK ? kb.cvt(kFirst, Type::u64()) : kb.mul_wide(kFirst, f->ld);
      f->base = kb.ptradd(f->base, (elements * f->gBytes).named("k_first_off"), "split_base");
    }
  }
  // Stage `step` of K into stage index `s`, through cp.async where the factor allows it. fp8
  // codes on their fast path are only loaded: issue returns them, and land converts and stores
  // them (the K loop multiplies the current stage in between).
  const bool codes = b.codes != Fp8::None;
  const size_t codeWords = codes ? 2 * b.stageBytes() / 16 / threads : 0;  // a thread's, 2 per chunk
  auto noCodes = [&] { return std::vector<Value>(codeWords, kb.u32(0)); };
  auto issue = [&](Value step, Value s) {
    Value k0 = (step * bk).named("k0");
    auto one = [&](const Factor& f) {
      Value offset = (s * f.stageBytes()).named("stage_off");
      if (!f.fast.valid()) return loadStage(kb, f, e, tid, k0, kEnd, offset);
      kb.if_else(f.fast, [&] { copyStage(kb, f, e, tid, k0, kEnd, offset); return std::vector<Value>{}; },
                 [&] { loadStage(kb, f, e, tid, k0, kEnd, offset); return std::vector<Value>{}; },
                 {.label = "stage"});
    };
    one(a);
    if (!codes) {
      one(b);
      return std::vector<Value>{};
    }
    return kb.if_else(b.fast, [&] { return loadCodes(kb, b, e, tid, k0, kEnd); },
                      [&] {
                        loadStage(kb, b, e, tid, k0, kEnd, (s * b.stageBytes()).named("stage_off"));
                        return noCodes();
                      },
                      {.label = "codes"});
  };
  auto land = [&](Value step, Value s, const std::vector<Value>& words) {
    if (!codes) return;
    kb.if_then(b.fast, [&] {
      storeCodes(kb, b, e, words, tid, (step * bk).named("k0"), kEnd, (s * b.stageBytes()).named("stage_off"));
    }, "land");
  };

  const Reader ra = readerOf(a, lane, (wm * warpM).named("warp_m"));
  const Reader rb = readerOf(b, lane, (wn * warpN).named("warp_n"));
  const Type accType = Type::of(c.integer() ? Scalar::S32 : Scalar::F32, 4);
  Value zero = c.integer() ? kb.s32(0) : kb.f32(0.0f);
  Value accZero = kb.pack(accType, {zero, zero, zero, zero}, "acc_zero");

  // The groups count stages of copies; without a cp.async path (tf32, s8, u8 stored along M or
  // N on both sides) there is nothing to group.
  const bool async = a.fast.valid() || (b.fast.valid() && !codes);
  auto commit = [&] {
    if (async) kb.cp_async_commit_group();
  };
  if (!c.splitK) range = splitSteps(kb, split, stepsOf(p.k));  // all of K, computed here as always
  Value steps = c.experts ? kb.select(known, range.count, kb.u32(0), "expert_steps") : range.count;
  for (unsigned s = 0; s + 1 < c.stages; ++s) {
    kb.if_then((kb.u32(s) < steps).named("has_stage"), [&] { land(kb.u32(s), kb.u32(s), issue(kb.u32(s), kb.u32(s))); },
               "prologue");
    commit();
  }
  // Block scales (scale_block = 128): a group is two stages of 64 codes. The mmas add into
  // partial sums, which the thread scales into the tile's sums (by a_scales of its rows and
  // b_scales of the tile's 128-column block) and clears after a group's second stage and after
  // its last stage (a split may end or start inside a group: each scales its own part).
  const bool blocks = c.scaleBlock != 0;
  const size_t tiles = mi * ni, carriedAcc = blocks ? 2 * tiles : tiles;
  // (An unknown expert's tile: NaN sums, which no step changes.)
  Value accInit = accZero;
  if (c.experts) {
    Value start = kb.select(known, kb.f32(0.0f), kb.f32(std::numeric_limits<float>::quiet_NaN()), "acc_start");
    accInit = kb.pack(accType, {start, start, start, start}, "acc_init");
  }
  std::vector<Value> init(carriedAcc, accInit);
  init.push_back(kb.u32(0, "read_stage"));
  init.push_back(kb.u32(c.stages - 1, "write_stage"));
  // The tile's sums plus the stage's partial ones times their group's scales.
  auto scaleGroup = [&](std::span<const Value> sums, std::span<const Value> parts, Value stage) {
    const Value groups = ((p.k + 127u) >> 7u).named("groups");
    Value grp = kb.cvt(stage >> 1u, Type::u64(), "group");
    Value zb = c.experts ? zB : kb.select((p.strideB == uint64_t{0}).named("shared_operand"), kb.u32(0), z, "b_plane");
    Value nBlock = kb.mul_wide(zb, ((p.n + 127u) >> 7u).named("n_blocks")) + kb.cvt(n0 >> 7u, Type::u64());
    Value sb = kb.load(kb.index(p.bScales, (nBlock * kb.cvt(groups, Type::u64()) + grp).named("b_scale_at"), 4),
                       Type::f32(), {Mod::NcMod}, "b_scale");
    Value g = (lane >> 2u).named("g"), last = (p.m - 1u).named("last_row");
    std::vector<Value> out;
    for (unsigned i = 0; i < mi; ++i) {
      std::array<Value, 2> scale;
      for (unsigned h = 0; h < 2; ++h) {
        Value row = kb.min(m0 + wm * warpM + (i * 16 + 8 * h) + g, last, "scale_row");
        Value at = ((kb.mul_wide(z, p.m) + kb.cvt(row, Type::u64())) * kb.cvt(groups, Type::u64()) + grp).named("a_scale_at");
        scale[h] = (sb * kb.load(kb.index(p.aScales, at, 4), Type::f32(), {Mod::NcMod}, "a_scale")).named("block_scale");
      }
      for (unsigned j = 0; j < ni; ++j) {
        std::vector<Value> lanes;
        for (unsigned e = 0; e < 4; ++e)
          lanes.push_back(kb.fma(kb.extract(parts[i * ni + j], e), scale[e >> 1], kb.extract(sums[i * ni + j], e), "sum"));
        out.push_back(kb.pack(accType, lanes, "sums"));
      }
    }
    return out;
  };
  std::vector<Value> loop = kb.for_range(
      kb.u32(0), steps, kb.u32(1), init,
      [&](Value kt, std::span<Value> carried) {
        Value rs = carried[carriedAcc], ws = carried[carriedAcc + 1];
        if (async) kb.cp_async_wait_group(c.stages - 2);
        kb.bar_sync();
        Value next = (kt + (c.stages - 1)).named("next");
        Value hasNext = (next < steps).named("has_next");
        const std::vector<Value> words =
            kb.if_else(hasNext, [&] { return issue(next, ws); }, noCodes, {.label = "issue"});
        commit();
        // The mmas add into acc: the tile's sums, or with block scales the partial ones.
        std::vector<Value> acc(carried.begin() + (blocks ? tiles : 0), carried.begin() + carriedAcc);
        Value offA = (rs * a.stageBytes()).named("read_a"), offB = (rs * b.stageBytes()).named("read_b");
        for (unsigned ks = 0; ks < kRowBytes / kStepBytes; ++ks) {
          // B's fragments of the k-step, then A's one group at a time (in IR order 4 of A's
          // registers live instead of 16; ptxas schedules the loads as it likes).
          std::vector<Value> fb;
          const bool tf32 = c.in == Input::Tf32;
          for (unsigned j = 0; j < ni / 2; ++j) {
            Value quad = readGroup(kb, b, rb, offB, j, ks);
            if (tf32) quad = roundTf32(kb, quad, 4);
            fb.push_back(pack2(kb, quad, 0));
            fb.push_back(pack2(kb, quad, 2));
          }
          for (unsigned i = 0; i < mi; ++i) {
            Value fa = readGroup(kb, a, ra, offA, i, ks);
            if (tf32) fa = roundTf32(kb, fa, 4);
            for (unsigned j = 0; j < ni; ++j)
              acc[i * ni + j] = c.codes() != Fp8::None
                                    ? kb.mma_fp8(fp8Mod(c.codes()), fp8Mod(c.bFormat), fa, fb[j],
                                                 acc[i * ni + j], "acc")
                                    : kb.mma(e.shape, e.mmaIn, fa, fb[j], acc[i * ni + j], "acc");
          }
        }
        if (codes) kb.if_then(hasNext, [&] { land(next, ws, words); }, "land_next");
        if (blocks) {
          Value stage = (range.first + kt).named("global_stage");
          Value flush = (((stage & 1u) == 1u) | ((kt + 1u) == steps)).named("group_done");
          const std::span<const Value> sums(carried.data(), tiles);
          std::vector<Value> next = kb.if_else(
              flush,
              [&] {
                std::vector<Value> r = scaleGroup(sums, acc, stage);
                Value f0 = kb.f32(0.0f);  // made here: a zero from before the loop would hold registers through it
                r.insert(r.end(), tiles, kb.pack(accType, {f0, f0, f0, f0}, "part_zero"));
                return r;
              },
              [&] {
                std::vector<Value> r(sums.begin(), sums.end());
                r.insert(r.end(), acc.begin(), acc.end());
                return r;
              },
              {.label = "scale_group"});
          acc = std::move(next);
        }
        auto rotate = [&](Value x) { return kb.select(x == c.stages - 1, kb.u32(0), x + 1u); };
        acc.push_back(rotate(rs).named("read_stage"));
        acc.push_back(rotate(ws).named("write_stage"));
        return acc;
      },
      {.label = "ksteps", .iv = "kt"});
  if (async) kb.cp_async_wait_all();

  // Accumulator element 2h + cc of mma tile (i, j) is row g + 8h, column 2t + cc of the tile.
  Value g = (lane >> 2u).named("g"), t = (lane & 3u).named("t");
  std::vector<Value> rows, cols, acc;
  for (unsigned i = 0; i < mi; ++i)
    for (unsigned h = 0; h < 2; ++h) rows.push_back((m0 + wm * warpM + (i * 16 + 8 * h) + g).named("row"));
  for (unsigned j = 0; j < ni; ++j)
    for (unsigned cc = 0; cc < 2; ++cc) cols.push_back((n0 + wn * warpN + (j * 8 + cc) + (t << 1u)).named("col"));
  for (unsigned i = 0; i < mi; ++i)
    for (unsigned h = 0; h < 2; ++h)
      for (unsigned j = 0; j < ni; ++j)
        for (unsigned cc = 0; cc < 2; ++cc) acc.push_back(kb.extract(loop[i * ni + j], 2 * h + cc));
  reduceSplits(kb, c, p, split, threads, tid, acc.size(), [&](size_t i) { return acc[i]; }, cols.size(),
               [&](size_t first, size_t n, const AccFn& at) {
                 storeResults(kb, c, pe, z, rows, cols, valuesOf(first, n, at), first);
               });
  kb.ret();
  return finish(kb, m, diags);
}

}  // namespace tn::kernels::lib::gemm
