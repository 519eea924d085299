// Row kernels that move data rather than reduce it to statistics: argmax over each row (and a
// split-row pair for long rows at small batch), a tiled transpose, and the KV-cache scatter of
// decode/prefill (docs/kernels.md).
#include "kernels/Library.h"

#include <algorithm>
#include <limits>
#include <numbers>
#include <string>
#include <tuple>

namespace tn::kernels::lib {

using ir::AddrSpace;
using ir::Mod;
using ir::Scalar;
using ir::SharedArray;
using ir::Type;

namespace {

// The largest gridDim.y; kernels whose y dimension counts rows or tokens loop over the rest.
constexpr uint64_t kMaxGridY = 65535;

// The storage bits of one element, as an integer of the same size (copies never convert).
Type bitsType(Storage s) { return Type::of(s == Storage::F32 ? Scalar::U32 : Scalar::U16); }

// ---- argmax, argmax_partial, argmax_merge ---------------------------------------------------

constexpr unsigned kArgmaxBlock = 256;
constexpr unsigned kArgmaxUnroll = 4;  // loads in flight per thread: one block streams a whole row
// Row elements per block of argmax_partial. A 128256-entry vocabulary row makes 126 chunks, one
// wave on a 132-SM H100: every SM reads at most 4 KB and each thread issues one load (one
// 16-byte vector of f32, four scalars on the fallback path), so the pass costs about one DRAM
// latency. 4096-element chunks would leave 100 SMs idle and put four times the bytes on each.
constexpr unsigned kArgmaxChunk = 1024;
// argmax_merge: one warp per row, this many rows per block.
constexpr unsigned kMergeRowsPerBlock = kArgmaxBlock / 32;


// This thread's best over `count` loads of `perLoad` elements each, loads tid, tid + 256, ...
// (`unroll` of them in flight per step of the main loop, then one at a time); indices are
// j * perLoad + e for element e of load j. The loop compares floats, 4 instructions an element
// (the order key costs 6 more): starting from this thread's first element, v replaces the best b
// when v > b or v is NaN (setp.gtu) unless b is NaN already. Elements come in increasing index
// order, so equal values (-0 and +0 too) and later NaNs keep the first occurrence. The key is
// formed once, for the merge across threads.
template <class LoadGroup>
Best scanLoads(KernelBuilder& kb, Value tid, Value count, unsigned perLoad, unsigned unroll, LoadGroup loadGroup) {
  Best none = nothing(kb);
  std::vector<Value> best = kb.if_else(
      tid < count,
      [&] {
        auto visit = [&](std::span<Value> carried, const std::vector<Value>& group, Value j) {
          Value bv = carried[0], bi = carried[1];
          for (unsigned e = 0; e < perLoad; ++e) {
            Value take = kb.setp(Mod::Gtu, group[e], bv) & kb.setp(Mod::Num, bv, bv);
            bv = kb.select(take, group[e], bv);
            bi = kb.select(take, perLoad == 1 ? j : j * perLoad + e, bi);
          }
          return std::vector<Value>{bv, bi};
        };
        std::vector<Value> first = loadGroup(tid);
        std::vector<Value> init{first[0], perLoad == 1 ? tid : tid * perLoad};
        const uint32_t step = kArgmaxBlock * unroll;
        Value nmain = unroll == 1 ? count : (count - count % step).named("nmain");
        std::vector<Value> carried = kb.for_range(
            tid, nmain, step, init,
            [&](Value i, std::span<Value> c) {
              std::vector<std::vector<Value>> groups;  // all loads first, then the comparisons
              for (unsigned u = 0; u < unroll; ++u) groups.push_back(loadGroup(u == 0 ? i : i + u * kArgmaxBlock));
              std::vector<Value> acc(c.begin(), c.end());
              for (unsigned u = 0; u < unroll; ++u) acc = visit(acc, groups[u], u == 0 ? i : i + u * kArgmaxBlock);
              return acc;
            },
            {.label = "scan", .iv = "i", .carried = {"best", "best_idx"}});
        if (unroll > 1)
          carried = kb.for_range(
              nmain + tid, count, kArgmaxBlock, carried,
              [&](Value j, std::span<Value> c) { return visit(c, loadGroup(j), j); },
              {.label = "tail", .iv = "j", .carried = {"best", "best_idx"}});
        return std::vector<Value>{orderKey(kb, carried[0]), carried[1]};
      },
      [&] { return std::vector<Value>{none.key, none.idx}; }, {.label = "scan", .results = {"key", "idx"}});
  return {best[0], best[1]};
}

// Sampling (the `sample` option of argmax and argmax_partial): the Gumbel-max trick. The index of
// the largest x_j / T + g_j, with g_j independent standard Gumbel noise, is a sample of
// softmax(x / T). In the log2 domain (a positive scale changes no argmax): x_j log2(e) / T -
// log2(E_j), E_j = -ln(u_j) an exponential variate. u_j comes from a counter-based hash of (seed,
// row, j): the same sample whichever kernel, block or thread reads element j. temperature <= 0 (or
// NaN) leaves x as it is: the argmax.
struct Sampler {
  Value on;       // temperature > 0
  Value scale2;   // log2(e) / temperature
  Value rowKey;   // the hash of (seed, row), or of a per_row seed alone
  Value offset;   // the index in the row of element 0 of the scanned range
  Value cut;      // with the cutoff option: elements below it are never drawn (else invalid)
};

// The sampling parameters as the kernel declares them (sampleParams): scalars, or with per_row
// arrays of one value per row; `cutoff` (the cutoff option's pointer, or invalid).
struct SampleParams {
  Value temperature, seed, cutoff;
  bool perRow = false;
};

// Row `row`'s sampler. A launch's seed is mixed with the row's index, so that the rows of a batch
// draw independent noise; a per_row seed alone keys its row's noise, so that a request draws the
// same samples whichever row of whichever batch it has. cutoff: the row's threshold cutoff[row].
Sampler samplerOf(KernelBuilder& kb, const SampleParams& sp, Value row, Value offset) {
  Value temperature = rowValue(kb, sp.temperature, Type::f32(), sp.perRow, row, "temperature_r");
  Value seed = rowValue(kb, sp.seed, Type::u32(), sp.perRow, row, "seed_r");
  Value on = (temperature > 0.0f).named("sampling");
  Value scale2 = kb.select(on, kLog2e / temperature, kb.f32(1.0f), "scale2");
  Value rowKey = fmix32(seed ^ (sp.perRow ? kb.u32(0x632BE5ABu) : fmix32(row * 0x9E3779B1u + 0x632BE5ABu))).named("row_key");
  const Value cutoff = sp.cutoff;
  Value cut = cutoff.valid() ? kb.load(kb.index(cutoff, row, 4), Type::f32(), {Mod::NcMod}, "cut") : Value{};
  return {on, scale2, rowKey, offset, cut};
}

// Element `idx` (in the row) of value x as the sampler scores it.
Value sampleScore(KernelBuilder& kb, const Sampler& smp, Value x, Value idx) {
  // Distinct elements of a row get distinct hashes (odd multiply, xor and fmix32 are bijections).
  Value e = exponentialOf(kb, fmix32((idx * 0x9E3779B1u) ^ smp.rowKey));
  Value score = (x * smp.scale2 - kb.lg2(e)).named("score");
  // An excluded element scores -inf: it is drawn only when every element is excluded (a cutoff
  // above the row's maximum, which sample_cutoff never writes), and then the first one is.
  if (smp.cut.valid()) score = kb.select(x < smp.cut, negInf(kb), score, "kept_score");
  return kb.select(smp.on, score, x, "sampled");
}

// This thread's best over the n elements at `base` (indices relative to base): 16-byte loads
// when vectorOk (base 16-byte aligned and n a multiple of the vector width), else scalar ones;
// with a sampler, of their sample scores.
Best scanRange(KernelBuilder& kb, Storage s, Value tid, Value base, Value n, Value vectorOk, unsigned vecUnroll,
               unsigned scalarUnroll, const Sampler* smp = nullptr) {
  unsigned bytes = bytesOf(s), V = vecElems(s);
  // Load j's values; with a sampler their scores (element e of load j is element j * perLoad + e
  // of the range, formed only then: an unused product still changes the argmax's SASS).
  auto scored = [&](std::vector<Value> v, Value j, unsigned perLoad) {
    if (!smp) return v;
    Value first = perLoad == 1 ? j : j * perLoad;
    for (unsigned e = 0; e < v.size(); ++e) v[e] = sampleScore(kb, *smp, v[e], (smp->offset + first + e).named("idx"));
    return v;
  };
  std::vector<Value> best = kb.if_else(
      vectorOk,
      [&] {
        Value xa = assumeAligned16(kb, base);
        Best b = scanLoads(kb, tid, n / V, V, vecUnroll, [&](Value j) {
          return scored(loadVecF32(kb, kb.index(xa, j, 16), s, true, "xv"), j, V);
        });
        return std::vector<Value>{b.key, b.idx};
      },
      [&] {
        Best b = scanLoads(kb, tid, n, 1, scalarUnroll, [&](Value j) {
          return scored({loadF32(kb, kb.index(base, j, bytes), s, true, "xs")}, j, 1);
        });
        return std::vector<Value>{b.key, b.idx};
      },
      {.label = "path", .results = {"key", "idx"}});
  return {best[0], best[1]};
}

// The block's best; every thread of the block calls it.
Best blockBest(KernelBuilder& kb, Best mine, Value tid, SharedArray scratch) {
  std::vector<Value> all = blockCombine(kb, {mine.key, mine.idx}, tid, scratch, [&](const auto& a, const auto& b) {
    Best w = better(kb, {a[0], a[1]}, {b[0], b[1]});
    return std::vector<Value>{w.key, w.idx};
  }, Order::Commutative);
  return {all[0], all[1]};
}

// blockCombine's staging area: (key, index) of each warp.
SharedArray argmaxScratch(KernelBuilder& kb) { return kb.shared("scratch", Type::u32(), 2 * (kArgmaxBlock / 32)); }

// x is 16-byte aligned and rows are whole vectors: every row (and every chunk, a multiple of
// the vector width into its row) starts 16-byte aligned.
Value argmaxVectorOk(KernelBuilder& kb, Value x, Value cols, Storage s) {
  return (allAligned(kb, {x}, 16) & ((cols & (vecElems(s) - 1)) == 0u)).named("vector_ok");
}

// What argmax's options make of it: `sample`, and with it `cutoff` and `per_row`.
struct ArgmaxMode {
  bool sample = false, cutoff = false, perRow = false;
};

// The sample option's parameters, after cols; with cutoff, the f32 pointer `cutoff` after them.
SampleParams sampleParams(KernelBuilder& kb, ArgmaxMode mode) {
  if (!mode.sample) return {};
  SampleParams p{rowParam(kb, Type::f32(), "temperature", mode.perRow), rowParam(kb, Type::u32(), "seed", mode.perRow),
                 {}, mode.perRow};
  if (mode.cutoff) p.cutoff = kb.param(kGlobalPtr, "cutoff");
  return p;
}

std::optional<ir::Module> buildArgmax(Storage s, ArgmaxMode mode, ir::Diagnostics& diags) {
  ir::Module m = newModule();
  KernelBuilder kb(m, "argmax");
  Value x = kb.param(kGlobalPtr, "x");
  Value index = kb.param(kGlobalPtr, "index");
  kb.param(Type::u32(), "rows");  // read by the launch rule
  Value cols = kb.param(Type::u32(), "cols");
  const SampleParams sp = sampleParams(kb, mode);
  const bool sample = mode.sample;
  kb.reqntid(kArgmaxBlock);
  SharedArray scratch = argmaxScratch(kb);

  kb.if_then(cols == 0u, [&] { kb.ret(); }, "empty");
  Value tid = kb.tid(Mod::X, "tid");
  Value row = kb.ctaid(Mod::X, "row");
  Value xrow = kb.index(x, kb.mul_wide(row, cols), bytesOf(s), "xrow");
  const Sampler smp = sample ? samplerOf(kb, sp, row, kb.u32(0)) : Sampler{};
  // Sampling spends about 35 instructions an element on the noise, which hides the loads' latency
  // without 4 of them in flight (and 32 bf16 elements' noise at once took over 100 registers).
  const unsigned unroll = sample ? 1 : kArgmaxUnroll;
  Best mine = scanRange(kb, s, tid, xrow, cols, argmaxVectorOk(kb, x, cols, s), unroll, unroll, sample ? &smp : nullptr);
  Best all = blockBest(kb, mine, tid, scratch);
  kb.if_then(tid == 0u, [&] { kb.store(kb.index(index, row, 4), all.idx); }, "write");
  kb.ret();
  return finish(kb, m, diags);
}

std::optional<ir::Module> buildArgmaxPartial(Storage s, ArgmaxMode mode, ir::Diagnostics& diags) {
  ir::Module m = newModule();
  KernelBuilder kb(m, "argmax_partial");
  Value x = kb.param(kGlobalPtr, "x");
  Value partial = kb.param(kGlobalPtr, "partial");
  kb.param(Type::u32(), "rows");  // the launch rule's grid height
  Value cols = kb.param(Type::u32(), "cols");
  const SampleParams sp = sampleParams(kb, mode);
  const bool sample = mode.sample;
  kb.reqntid(kArgmaxBlock);
  SharedArray scratch = argmaxScratch(kb);

  Value tid = kb.tid(Mod::X, "tid");
  RowChunk c = rowChunk(kb, cols, kArgmaxChunk);  // clang 14 cannot capture structured bindings
  Value xchunk = kb.index(x, kb.mul_wide(c.row, cols) + kb.cvt(c.start, Type::u64()), bytesOf(s), "xchunk");
  // Each thread makes one step: kArgmaxChunk / 256 loads, fewer when a vector holds more.
  const unsigned perThread = kArgmaxChunk / kArgmaxBlock;
  const Sampler smp = sample ? samplerOf(kb, sp, c.row, c.start) : Sampler{};
  Best mine = scanRange(kb, s, tid, xchunk, c.len, argmaxVectorOk(kb, x, cols, s),
                        std::max(1u, perThread / vecElems(s)), perThread, sample ? &smp : nullptr);
  Best all = blockBest(kb, mine, tid, scratch);
  kb.if_then(
      tid == 0u,
      [&] {
        Value slot = (kb.mul_wide(c.row, c.chunks) + kb.cvt(c.chunk, Type::u64())).named("slot");
        Value p = kb.index(partial, slot, 8, "ppair");
        kb.store(p, all.key);
        kb.store(kb.ptradd(p, kb.u64(4)), c.start + all.idx);  // a chunk is never empty: idx is real
      },
      "write");
  kb.ret();
  return finish(kb, m, diags);
}

std::optional<ir::Module> buildArgmaxMerge(ir::Diagnostics& diags) {
  ir::Module m = newModule();
  KernelBuilder kb(m, "argmax_merge");
  Value partial = kb.param(kGlobalPtr, "partial");
  Value index = kb.param(kGlobalPtr, "index");
  Value rows = kb.param(Type::u32(), "rows");
  Value cols = kb.param(Type::u32(), "cols");
  kb.reqntid(kArgmaxBlock);

  kb.if_then(cols == 0u, [&] { kb.ret(); }, "empty");
  Value tid = kb.tid(Mod::X, "tid");
  Value lane = (tid & 31u).named("lane");
  Value row = kb.mad(kb.ctaid(Mod::X, "ctaid"), kb.u32(kMergeRowsPerBlock), tid >> 5u, "row");
  Value chunks = chunkCount(kb, cols, kArgmaxChunk);
  // Warps past the last row scan nothing instead of returning, so every lane reaches the shuffles.
  Value n = kb.select(row < rows, chunks, kb.u32(0), "n");
  Value prow = kb.index(partial, kb.mul_wide(row, chunks), 8, "prow");
  Best none = nothing(kb);
  std::vector<Value> mine = kb.for_range(
      lane, n, 32u, {none.key, none.idx},
      [&](Value k, std::span<Value> c) {
        Value p = kb.index(prow, k, 8, "ppair");
        Best pair{kb.load(p, Type::u32(), {Mod::NcMod}, "key.chunk"),
                  kb.load(kb.ptradd(p, kb.u64(4)), Type::u32(), {Mod::NcMod}, "idx.chunk")};
        Best b = better(kb, {c[0], c[1]}, pair);
        return std::vector<Value>{b.key, b.idx};
      },
      {.label = "chunks", .iv = "k", .carried = {"best_key", "best_idx"}});
  Best b = warpBest(kb, {mine[0], mine[1]});
  kb.if_then((lane == 0u) & (row < rows), [&] { kb.store(kb.index(index, row, 4), b.idx); }, "write");
  kb.ret();
  return finish(kb, m, diags);
}

// ---- sample_cutoff ----------------------------------------------------------------------------

// Sampling's filters as one threshold per row: cutoff[r] is the smallest logit argmax's sample
// may still draw (its cutoff option drops every x_j < cutoff[r]). With p = softmax(x / T), the
// filters as vLLM applies them: top_k keeps the elements at or above the k-th largest value;
// top_p then keeps the fewest largest elements whose probability (renormalized over what top_k
// kept) reaches top_p; min_p keeps the elements with p_j >= min_p * max p, x_j >= max x + T
// ln(min_p). Each filter is a threshold on x, so what they keep together is x >= the largest of
// the three; ties at a threshold are all kept. The thresholds are found as keys (orderKey) by
// radix selection: four passes over the row, each a histogram of one byte of the candidates'
// keys. top_p's histogram adds the weights ex2((x_j - max) log2(e) / T) as u64 fixed point
// (2^32 for the maximum): exact integer sums, so the cutoff does not depend on the order of the
// atomics and a run's sample is reproducible.
constexpr unsigned kRadixBins = 256;

// A key back to its value (orderKey's inverse; NaN for the NaN key).
Value keyValue(KernelBuilder& kb, Value key) {
  Value bits = kb.select(key >= 0x80000000u, key ^ 0x80000000u, kb.bit_not(key));
  bits = kb.select(key == 0xFFFFFFFFu, kb.u32(0x7FC00000u), bits);
  return kb.bitcast(bits, Type::f32(), "value");
}

// 64-bit shuffles: the two halves apart.
Value shfl64(KernelBuilder& kb, Mod mode, Value v, Value laneOrOffset, uint32_t clamp) {
  Value mask = kb.b32(0xFFFFFFFFu);
  Value off = kb.bitcast(laneOrOffset, Type::of(Scalar::B32));
  Value lo = kb.shfl_sync(mode, kb.cvt(v, Type::u32()), off, kb.b32(clamp), mask);
  Value hi = kb.shfl_sync(mode, kb.cvt(v >> 32u, Type::u32()), off, kb.b32(clamp), mask);
  return ((kb.cvt(hi, Type::u64()) << 32u) | kb.cvt(lo, Type::u64())).named("shfl64");
}

// The shared state of a radix selection: the bins, then the selected prefix of the key and what is
// left of the target. A bin's u64 sum is kept as kBinCopies partial sums, each a pair of u32 words
// (low words first, then high words; word `slot * kBinCopies + copy`), added to by u32 atomics
// with the low word's carry passed on: a u64 atomic add on shared memory is a compare-and-swap
// loop in the SASS (ATOMS.CAST.SPIN.64), whose retries grow with the lanes adding to one bin
// (the first pass puts most of a row in a few bins), while a u32 add is one ATOMS.ADD. Lane l
// adds to copy l % kBinCopies, so that 32 lanes on one bin meet 8 to an address, not 32. After
// the atomics every thread folds one bin's copies into its u64 sum (`sums`), which the scan reads.
constexpr unsigned kBinCopies = 4;
constexpr unsigned kBinWords = kRadixBins * kBinCopies;  // of each half
static_assert(kArgmaxBlock == kRadixBins, "a thread folds one bin");
struct RadixScratch {
  Value hist, sums, state;
};

// Adds the u64 `weight` to copy `copy` of bin slot `slot`: the low word by one atomic, whose old
// value tells whether it carried, then the high word and the carry, when they are not zero.
void addToBin(KernelBuilder& kb, const RadixScratch& rs, Value slot, Value copy, Value weight) {
  Value word = (slot * kBinCopies + copy).named("word");
  Value lo = kb.cvt(weight, Type::u32(), "weight_lo");
  Value old = kb.atom(Mod::AAdd, kb.index(rs.hist, word, 4), lo, "old_lo");
  Value carry = kb.select((old + lo) < old, kb.u32(1), kb.u32(0), "carry");
  Value hi = (kb.cvt(weight >> 32u, Type::u32()) + carry).named("weight_hi");
  kb.if_then(hi != 0u, [&] { kb.atom(Mod::AAdd, kb.index(rs.hist, word + kBinWords, 4), hi); }, "high");
}

// Bin slot `slot`'s u64 sum: its copies' pairs of words, each read as one 16-byte load.
Value binSum(KernelBuilder& kb, const RadixScratch& rs, Value slot) {
  static_assert(kBinCopies == 4, "one v4 load per half");
  const Type v4 = Type::of(Scalar::U32, 4);
  Value word = (slot * kBinCopies).named("word");
  Value lo = kb.load(kb.index(rs.hist, word, 4), v4, "bin_lo");
  Value hi = kb.load(kb.index(rs.hist, word + kBinWords, 4), v4, "bin_hi");
  Value sum = kb.u64(0);
  for (unsigned c = 0; c < kBinCopies; ++c)
    sum = (sum + ((kb.cvt(kb.extract(hi, c), Type::u64()) << 32u) | kb.cvt(kb.extract(lo, c), Type::u64()))).named("bin");
  return sum;
}

// Every element of the n at `base` that this thread owns, visit(x as f32): 16-byte loads when
// vectorOk, else scalar ones.
template <class Visit>
void forEachElement(KernelBuilder& kb, Storage s, Value tid, Value base, Value n, Value vectorOk, Visit visit) {
  const unsigned V = vecElems(s);
  kb.if_else(
      vectorOk,
      [&] {
        Value xa = assumeAligned16(kb, base);
        kb.for_range(tid, n / V, kArgmaxBlock, [&](Value j) {
          for (Value v : loadVecF32(kb, kb.index(xa, j, 16), s, true, "xv")) visit(v);
        }, {.label = "vec", .iv = "j"});
      },
      [&] {
        kb.for_range(tid, n, kArgmaxBlock, [&](Value j) { visit(loadF32(kb, kb.index(base, j, bytesOf(s)), s, true, "xs")); },
                     {.label = "scalar", .iv = "j"});
      },
      {.label = "path"});
}

// Where bin d lives in the histogram: r = 255 - d is the bin's rank from the top, and the scan's
// lane r / 8 reads it in its step r % 8, so step i of the 32 lanes reads slots 32i ... 32i + 31
// (no bank conflict; ranks r / 8 apart would be 64 bytes apart, an 8-way conflict).
Value binSlot(Value digit) {
  Value rank = (0xFFu - digit).named("rank");
  return ((rank >> 3u) | ((rank & 7u) << 5u)).named("slot");
}

// The bins of one radix pass: zeroed, then every candidate whose key has `prefix` in the bits that
// `high` masks (the bytes chosen by earlier passes) added into the bin of its byte at `shift`
// (shared atomics); returns this thread's bin, slot tid, folded from its copies. keyWeight(x)
// gives an element's key, u64 weight and whether it is a candidate; forEach(visit) visits the
// elements. Every thread reads the bins in the fold, so a caller that counts again synchronizes
// in between (radixSelect's pick does).
template <class ForEach, class KeyWeight>
Value countPass(KernelBuilder& kb, Value tid, const RadixScratch& rs, ForEach forEach, KeyWeight keyWeight, Value prefix,
                Value shift, Value high) {
  for (unsigned i = 0; i < 2 * kBinWords / kArgmaxBlock; ++i)
    kb.store(kb.index(rs.hist, tid + i * kArgmaxBlock, 4), kb.u32(0));
  kb.bar_sync();
  forEach([&](Value x) {
    const auto kw = keyWeight(x);  // clang 14 cannot capture structured bindings
    Value key = std::get<0>(kw), weight = std::get<1>(kw), candidate = std::get<2>(kw);
    Value match = (candidate & ((key & high) == prefix)).named("match");
    kb.if_then(match, [&] { addToBin(kb, rs, binSlot((key >> shift) & 0xFFu), tid & (kBinCopies - 1), weight); }, "bin");
  });
  kb.bar_sync();
  return binSum(kb, rs, tid);
}

// The bits above a pass's byte, which must be the prefix's (none in a filter's first pass).
Value highBits(KernelBuilder& kb, Value first, Value shift) {
  return kb.select(first, kb.u32(0), kb.u32(0xFFFFFFFFu) << (shift + 8u), "high");
}

// Warp 0's part of a pass: the digit of the bin (rs.sums, slot order) where the running sum of
// the bins from the top reaches `want`: targetOf(the bins' total) on a filter's first pass
// (`first`), else `remaining`, what the earlier passes left of the target. Lane 0 stores the
// prefix with that digit at `shift` and what is left of the target in rs.state (read by
// pickedDigit after a barrier; the caller synchronizes before and after). The bins are scanned
// 8 a lane, with a shuffle scan over the lanes.
template <class TargetOf>
void pickDigit(KernelBuilder& kb, Value tid, const RadixScratch& rs, Value first, Value prefix, Value remaining,
               Value shift, TargetOf targetOf) {
  kb.if_then(tid < 32u, [&] {
    Value lane = tid;
    // Lane l holds the bins of ranks 8l ... 8l + 7 (digits 255 - 8l down to 248 - 8l): the
    // running sum over the lanes goes from the top.
    std::vector<Value> bin;
    Value sum = kb.u64(0);
    for (unsigned i = 0; i < 8; ++i) {
      bin.push_back(kb.load(kb.index(rs.sums, lane + 32 * i, 8), Type::u64(), "bin"));
      sum = (sum + bin.back()).named("lane_sum");
    }
    Value incl = sum;
    for (uint32_t off = 1; off < 32; off *= 2) {
      Value other = shfl64(kb, Mod::Up, incl, kb.u32(off), 0);
      incl = kb.select(lane >= off, incl + other, incl, "running");
    }
    Value want = kb.select(first, targetOf(shfl64(kb, Mod::Idx, incl, kb.u32(31), 31)), remaining, "want");
    Value ballot = kb.bitcast(kb.vote(Mod::Ballot, incl >= want), Type::u32(), "reached");
    Value firstLane = (kb.popc(ballot ^ (ballot - 1u)) - 1u).named("first_lane");
    // Every lane finds its own crossing; the first lane that reaches the target has the one.
    Value cum = (incl - sum).named("above"), above = cum, digit = kb.u32(0), hitBefore = kb.pred(false);
    for (unsigned i = 0; i < 8; ++i) {
      Value next = cum + bin[i];
      Value hit = kb.bit_not(hitBefore) & (next >= want);
      digit = kb.select(hit, (kRadixBins - 1 - i) - lane * 8u, digit);
      above = kb.select(hit, cum, above);
      hitBefore = hitBefore | hit;
      cum = next;
    }
    Value d = kb.shfl_sync(Mod::Idx, digit, kb.bitcast(firstLane, Type::of(Scalar::B32)), kb.b32(31),
                           kb.b32(0xFFFFFFFFu), "digit");
    Value a = shfl64(kb, Mod::Idx, above, firstLane, 31);
    kb.if_then(lane == 0u, [&] {
      kb.store(kb.index(rs.state, kb.u32(0), 8), kb.cvt(prefix | (d << shift), Type::u64()));
      kb.store(kb.index(rs.state, kb.u32(1), 8), want - a);
    }, "select");
  }, "scan");
}

// What pickDigit stored: the prefix (u32) and what is left of the target (u64).
std::vector<Value> pickedDigit(KernelBuilder& kb, const RadixScratch& rs) {
  return {kb.cvt(kb.load(kb.index(rs.state, kb.u32(0), 8), Type::u64()), Type::u32(), "prefix"),
          kb.load(kb.index(rs.state, kb.u32(1), 8), Type::u64(), "remaining")};
}

// The largest key t such that the weights of the candidates with key >= t add up to at least the
// target: targetOf(total of the candidates' weights), 1 <= target <= total. Four passes of one
// key byte each, most significant first: countPass, then pickDigit.
template <class ForEach, class KeyWeight, class TargetOf>
Value radixSelect(KernelBuilder& kb, Value tid, const RadixScratch& rs, ForEach forEach, KeyWeight keyWeight,
                  TargetOf targetOf) {
  std::vector<Value> found = kb.for_range(
      kb.u32(0), kb.u32(4), kb.u32(1), {kb.u32(0), kb.u64(0)},
      [&](Value pass, std::span<Value> c) {
        Value prefix = c[0], remaining = c[1];
        Value shift = (24u - pass * 8u).named("shift");
        Value first = (pass == 0u).named("first");
        kb.store(kb.index(rs.sums, tid, 8), countPass(kb, tid, rs, forEach, keyWeight, prefix, shift, highBits(kb, first, shift)));
        kb.bar_sync();
        pickDigit(kb, tid, rs, first, prefix, remaining, shift, targetOf);
        kb.bar_sync();
        return pickedDigit(kb, rs);
      },
      {.label = "radix", .iv = "pass", .carried = {"prefix", "remaining"}});
  return found[0];
}

// What both sample_cutoff kernels declare and read: the parameters after cols, the radix
// selection's shared arrays and row `row`'s filter values.
struct CutoffParams {
  Value temperature, topK, topP, minP;
};
CutoffParams cutoffParams(KernelBuilder& kb, bool perRow) {
  return {rowParam(kb, Type::f32(), "temperature", perRow), rowParam(kb, Type::u32(), "top_k", perRow),
          rowParam(kb, Type::f32(), "top_p", perRow), rowParam(kb, Type::f32(), "min_p", perRow)};
}
CutoffParams cutoffValues(KernelBuilder& kb, const CutoffParams& p, bool perRow, Value row) {
  return {rowValue(kb, p.temperature, Type::f32(), perRow, row, "temperature_r"),
          rowValue(kb, p.topK, Type::u32(), perRow, row, "top_k_r"), rowValue(kb, p.topP, Type::f32(), perRow, row, "top_p_r"),
          rowValue(kb, p.minP, Type::f32(), perRow, row, "min_p_r")};
}
RadixScratch radixScratch(KernelBuilder& kb) {
  return {kb.shared_addr(kb.shared("hist", Type::u32(), 2 * kBinWords, 16), "hist"),
          kb.shared_addr(kb.shared("sums", Type::u64(), kRadixBins, 8), "sums"),
          kb.shared_addr(kb.shared("select", Type::u64(), 2, 8), "state")};
}

// top_k's passes: every element a candidate of weight 1 (the row has no NaN where it matters).
auto topKWeight(KernelBuilder& kb) {
  return [&kb](Value v) { return std::tuple{orderKey(kb, v), kb.u64(1), kb.pred(true)}; };
}

// top_p's passes, over what top_k kept (keys >= keyK): weights relative to the maximum's, 2^32
// for it, as u64 fixed point.
struct TopPWeight {
  KernelBuilder& kb;
  Value scale2, bias, keyK;
  TopPWeight(KernelBuilder& b, Value temperature, Value xmax, Value keyK)
      : kb(b), scale2((kLog2e / temperature).named("scale2")), bias((b.neg(xmax) * scale2).named("bias")), keyK(keyK) {}
  std::tuple<Value, Value, Value> operator()(Value v) const {
    Value key = orderKey(kb, v);
    Value w = ex2Approx(kb, kb.fma(v, scale2, bias), "weight");
    return {key, kb.cvt(w * 0x1p32f, Type::u64(), {Mod::Rni}, "fixed"), key >= keyK};
  }
};

// top_p's target: the fewest largest weights reaching top_p of the total, at least one.
Value topPTarget(KernelBuilder& kb, Value topP, Value total) {
  Value t = kb.cvt(kb.cvt(total, Type::f32()) * topP, Type::u64(), {Mod::Rpi}, "target");
  return kb.min(kb.max(t, kb.u64(1)), total, "target");
}

// The cutoff of a sampling row from its maximum and the keys top_k and top_p found (0 when off):
// min_p's threshold beside them, p_j >= min_p max p, x_j >= xmax + T ln(min_p) (min_p above 1
// counts as 1), and the largest of the three. No key below -inf's (0x007FFFFF) excludes anything.
// A maximum that is not finite is what the sampler takes (the first NaN, a +inf, the -inf of a
// row of -inf): the cutoff keeps it.
Value cutoffOf(KernelBuilder& kb, const CutoffParams& f, Value xmax, Value keyK, Value keyP) {
  Value finite = (kb.abs(xmax) < std::numeric_limits<float>::infinity()).named("finite");
  Value logMinP = (kb.lg2(kb.min(f.minP, kb.f32(1.0f))) * std::numbers::ln2_v<float>).named("ln_min_p");
  Value tau = kb.fma(f.temperature, logMinP, xmax, "tau");
  Value keyM = kb.select((f.minP > 0.0f) & kb.setp(Mod::Num, tau, tau), orderKey(kb, tau), kb.u32(0), "key_min_p");
  Value key = kb.max(kb.max(keyK, keyP), keyM, "cut_key");
  return kb.select(finite, kb.select(key > 0x007FFFFFu, keyValue(kb, key), negInf(kb)), xmax);
}

// Which filters run: top_k when 0 < top_k < cols, top_p when top_p < 1, both only when sampling.
Value topKOn(Value cols, const CutoffParams& f) { return ((f.temperature > 0.0f) & (f.topK > 0u) & (f.topK < cols)).named("top_k_on"); }
Value topPOn(const CutoffParams& f) { return ((f.temperature > 0.0f) & (f.topP < 1.0f)).named("top_p_on"); }

std::optional<ir::Module> buildSampleCutoff(Storage s, bool perRow, ir::Diagnostics& diags) {
  ir::Module m = newModule();
  KernelBuilder kb(m, "sample_cutoff");
  Value x = kb.param(kGlobalPtr, "x");
  Value cutoff = kb.param(kGlobalPtr, "cutoff");
  kb.param(Type::u32(), "rows");  // read by the launch rule
  Value cols = kb.param(Type::u32(), "cols");
  const CutoffParams params = cutoffParams(kb, perRow);
  kb.reqntid(kArgmaxBlock);
  // At ptxas's default of about 32 registers a few of the values that live across the passes
  // spill; 4 resident blocks allow 64.
  kb.minnctapersm(4);
  SharedArray scratch = argmaxScratch(kb);
  const RadixScratch rs = radixScratch(kb);

  kb.if_then(cols == 0u, [&] { kb.ret(); }, "empty");
  Value tid = kb.tid(Mod::X, "tid");
  Value row = kb.ctaid(Mod::X, "row");
  const CutoffParams f = cutoffValues(kb, params, perRow, row);
  Value xrow = kb.index(x, kb.mul_wide(row, cols), bytesOf(s), "xrow");
  Value vectorOk = argmaxVectorOk(kb, x, cols, s);
  auto forEach = [&](auto visit) { forEachElement(kb, s, tid, xrow, cols, vectorOk, visit); };

  Value maxKey = blockBest(kb, scanRange(kb, s, tid, xrow, cols, vectorOk, kArgmaxUnroll, kArgmaxUnroll), tid, scratch).key;
  Value xmax = keyValue(kb, maxKey).named("xmax");
  // Branches on parameters only: xmax comes out of shuffles, which the barrier check cannot
  // prove uniform, so a row whose maximum is not finite runs the passes too (on keys and weights
  // that mean nothing) and takes its maximum at the end.
  std::vector<Value> cut = kb.if_else(
      f.temperature > 0.0f,
      [&] {
        // top_k: the k-th largest key.
        Value keyK = kb.if_else(
            topKOn(cols, f),
            [&] {
              return radixSelect(kb, tid, rs, forEach, topKWeight(kb), [&](Value) { return kb.cvt(f.topK, Type::u64()); });
            },
            [&] { return kb.u32(0); }, {.label = "top_k", .results = {"key_k"}})[0];
        Value keyP = kb.if_else(
            topPOn(f),
            [&] {
              return radixSelect(kb, tid, rs, forEach, TopPWeight(kb, f.temperature, xmax, keyK),
                                 [&](Value total) { return topPTarget(kb, f.topP, total); });
            },
            [&] { return kb.u32(0); }, {.label = "top_p", .results = {"key_p"}})[0];
        return cutoffOf(kb, f, xmax, keyK, keyP);
      },
      [&] { return negInf(kb); }, {.label = "filters", .results = {"cut"}});
  kb.if_then(tid == 0u, [&] { kb.store(kb.index(cutoff, row, 4), cut[0]); }, "write");
  kb.ret();
  return finish(kb, m, diags);
}

// sample_cutoff_split: the same cutoff over blocks of `chunk` elements of a row, in kCutoffSteps
// launches of one kernel (`step` 0 ... 9), so that a long row at a small batch (decode of one
// request over a 128K vocabulary) is read by many SMs rather than one. Step 0 writes each
// chunk's maximum key and zeroes the bins; steps 1-4 are top_k's passes and 5-8 top_p's, each
// adding its chunk's bins (folded in shared memory as sample_cutoff's) to the row's bins of the
// pass in `work` by u64 global atomics; each step from 2 on first picks the previous pass's
// digit from those bins (every block the same: exact integer sums), block 0 recording it; step 9
// forms the cutoff in block 0. The sums and picks are sample_cutoff's, so the cutoff is its
// cutoff bit for bit. work, per row (u64 words): the eight passes' bins (kRadixBins each, in
// bin-slot order), then the pick after each pass (prefix, remaining), the row's maximum key
// (step 1, block 0), padding, and one maximum key per chunk.
constexpr unsigned kCutoffSteps = 10;
constexpr uint32_t kCutoffPasses = 8;
constexpr uint32_t kWorkPicks = kCutoffPasses * kRadixBins;
constexpr uint32_t kWorkMax = kWorkPicks + 2 * kCutoffPasses;
constexpr uint32_t kWorkFixed = kWorkMax + 8;  // then the chunks' maximum keys
constexpr unsigned kCutoffChunk = 2048;

std::optional<ir::Module> buildSampleCutoffSplit(Storage s, bool perRow, unsigned chunk, ir::Diagnostics& diags) {
  ir::Module m = newModule();
  KernelBuilder kb(m, "sample_cutoff_split");
  Value x = kb.param(kGlobalPtr, "x");
  Value cutoff = kb.param(kGlobalPtr, "cutoff");
  Value work = kb.param(kGlobalPtr, "work");
  kb.param(Type::u32(), "rows");  // the launch rule's grid height
  Value cols = kb.param(Type::u32(), "cols");
  const CutoffParams params = cutoffParams(kb, perRow);
  Value step = kb.param(Type::u32(), "step");
  kb.reqntid(kArgmaxBlock);
  kb.minnctapersm(4);
  SharedArray scratch = argmaxScratch(kb);
  const RadixScratch rs = radixScratch(kb);

  kb.if_then((cols == 0u) | (step >= kCutoffSteps), [&] { kb.ret(); }, "idle");
  Value tid = kb.tid(Mod::X, "tid");
  RowChunk c = rowChunk(kb, cols, chunk);  // clang 14 cannot capture structured bindings
  Value lead = (c.chunk == 0u).named("lead");
  // Step 9 is block 0's alone.
  kb.if_then((step == kCutoffSteps - 1) & kb.bit_not(lead), [&] { kb.ret(); }, "spare");
  const CutoffParams f = cutoffValues(kb, params, perRow, c.row);
  Value wrow = kb.index(work, kb.mul_wide(c.row, c.chunks + kWorkFixed), 8, "wrow");
  auto word = [&](Value i) { return kb.index(wrow, i, 8); };
  Value xchunk = kb.index(x, kb.mul_wide(c.row, cols) + kb.cvt(c.start, Type::u64()), bytesOf(s), "xchunk");
  Value vectorOk = argmaxVectorOk(kb, x, cols, s);
  auto forEach = [&](auto visit) { forEachElement(kb, s, tid, xchunk, c.len, vectorOk, visit); };
  Value kOn = topKOn(cols, f), pOn = topPOn(f);

  kb.if_then(step == 0u, [&] {
    const unsigned perThread = chunk / kArgmaxBlock;
    Value key = blockBest(kb, scanRange(kb, s, tid, xchunk, c.len, vectorOk, std::clamp(perThread / vecElems(s), 1u, kArgmaxUnroll),
                                        std::min(perThread, kArgmaxUnroll)), tid, scratch).key;
    kb.if_then(tid == 0u, [&] { kb.store(word(c.chunk + kWorkFixed), kb.cvt(key, Type::u64())); }, "partial");
    // The bins of the filters that run: top_k's passes first, then top_p's.
    Value from = kb.select(kOn, kb.u32(0), kb.u32(kWorkPicks / 2), "from");
    Value to = kb.select(pOn, kb.u32(kWorkPicks), kb.u32(kWorkPicks / 2), "to");
    kb.for_range(from + c.chunk * kArgmaxBlock + tid, to, c.chunks * kArgmaxBlock,
                 [&](Value i) { kb.store(word(i), kb.u64(0)); }, {.label = "zero", .iv = "i"});
    kb.ret();
  }, "maximum");
  // Step 1, block 0: the row's maximum key from the chunks'.
  kb.if_then((step == 1u) & lead, [&] {
    Best none = nothing(kb);
    std::vector<Value> mine = kb.for_range(
        tid, c.chunks, kArgmaxBlock, {none.key, none.idx},
        [&](Value k, std::span<Value> acc) {
          Best b = better(kb, {acc[0], acc[1]}, {kb.cvt(kb.load(word(kWorkFixed + k), Type::u64()), Type::u32()), k});
          return std::vector<Value>{b.key, b.idx};
        },
        {.label = "chunks", .iv = "k", .carried = {"best_key", "best_idx"}});
    Value key = blockBest(kb, {mine[0], mine[1]}, tid, scratch).key;
    kb.if_then(tid == 0u, [&] { kb.store(word(kb.u32(kWorkMax)), kb.cvt(key, Type::u64())); }, "max");
  }, "row_max");

  // The previous pass's pick, q = step - 2, when its filter ran (on top_k's first pass, and
  // top_p's, prefix and remaining are not read).
  Value q = (step - 2u).named("q");
  Value qOn = ((step >= 2u) & (((step <= 5u) & kOn) | ((step > 5u) & pOn))).named("q_on");
  std::vector<Value> picked = kb.if_else(
      qOn,
      [&] {
        Value first = ((q & 3u) == 0u).named("first");
        std::vector<Value> before = kb.if_else(
            first, [&] { return std::vector<Value>{kb.u32(0), kb.u64(0)}; },
            [&] {
              Value at = (kWorkPicks + 2u * (q - 1u)).named("at");
              return std::vector<Value>{kb.cvt(kb.load(word(at), Type::u64()), Type::u32()), kb.load(word(at + 1u), Type::u64())};
            },
            {.label = "before", .results = {"prefix", "remaining"}});
        kb.store(kb.index(rs.sums, tid, 8), kb.load(word(q * kRadixBins + tid), Type::u64(), "bins"));
        kb.bar_sync();
        Value topK64 = kb.cvt(f.topK, Type::u64());
        pickDigit(kb, tid, rs, first, before[0], before[1], (24u - (q & 3u) * 8u).named("shift"),
                  [&](Value total) { return kb.select(q < 4u, topK64, topPTarget(kb, f.topP, total)); });
        kb.bar_sync();
        std::vector<Value> p = pickedDigit(kb, rs);
        kb.if_then(lead & (tid == 0u), [&] {
          Value at = (kWorkPicks + 2u * q).named("at");
          kb.store(word(at), kb.cvt(p[0], Type::u64()));
          kb.store(word(at + 1u), p[1]);
        }, "record");
        return p;
      },
      [&] { return std::vector<Value>{kb.u32(0), kb.u64(0)}; }, {.label = "pick", .results = {"prefix", "remaining"}});

  // top_k's key, read where top_p needs it: picked at step 5, recorded by then.
  auto keyK = [&] {
    return kb.if_else(
        kOn,
        [&] {
          return kb.if_else(step == 5u, [&] { return picked[0]; },
                            [&] { return kb.cvt(kb.load(word(kb.u32(kWorkPicks + 2 * 3)), Type::u64()), Type::u32()); },
                            {.label = "recorded", .results = {"key_k"}})[0];
        },
        [&] { return kb.u32(0); }, {.label = "top_k", .results = {"key_k"}})[0];
  };
  auto xmaxOf = [&] { return keyValue(kb, kb.cvt(kb.load(word(kb.u32(kWorkMax)), Type::u64()), Type::u32())).named("xmax"); };

  // This step's pass, p = step - 1: the chunk's bins added to the row's.
  Value p = (step - 1u).named("p");
  Value shift = (24u - (p & 3u) * 8u).named("shift");
  Value high = highBits(kb, (p & 3u) == 0u, shift);
  Value prefix = kb.select((p & 3u) == 0u, kb.u32(0), picked[0], "prefix");
  auto addBins = [&](Value bin) {
    kb.if_then(bin != uint64_t{0}, [&] { kb.atom(Mod::AAdd, word(p * kRadixBins + tid), bin); }, "add");
  };
  kb.if_then((step >= 1u) & (step <= 4u) & kOn,
             [&] { addBins(countPass(kb, tid, rs, forEach, topKWeight(kb), prefix, shift, high)); }, "top_k_pass");
  kb.if_then((step >= 5u) & (step <= 8u) & pOn, [&] {
    addBins(countPass(kb, tid, rs, forEach, TopPWeight(kb, f.temperature, xmaxOf(), keyK()), prefix, shift, high));
  }, "top_p_pass");

  kb.if_then(step == kCutoffSteps - 1, [&] {
    Value cut = kb.select(f.temperature > 0.0f, cutoffOf(kb, f, xmaxOf(), keyK(), kb.select(pOn, picked[0], kb.u32(0))),
                          negInf(kb), "cut");
    kb.if_then(tid == 0u, [&] { kb.store(kb.index(cutoff, c.row, 4), cut); }, "write");
  }, "finish");
  kb.ret();
  return finish(kb, m, diags);
}

// ---- transpose ------------------------------------------------------------------------------

// Tiles are T x T elements, T = 32 for f32 and 64 for 2-byte types, so that a tile row is 128
// bytes (eight 16-byte vectors) in both. Blocks are 32x8 threads. Shared rows are 32 words plus
// one of padding (33 words: 33 f32, 66 halves); an odd row stride puts the words of a column in
// different banks.
unsigned transposeTile(Storage s) { return bytesOf(s) == 4 ? 32 : 64; }

std::optional<ir::Module> buildTranspose(Storage s, ir::Diagnostics& diags) {
  ir::Module m = newModule();
  KernelBuilder kb(m, "transpose");
  Value x = kb.param(kGlobalPtr, "x");
  Value y = kb.param(kGlobalPtr, "y");
  Value rows = kb.param(Type::u32(), "rows");
  Value cols = kb.param(Type::u32(), "cols");
  kb.reqntid(32, 8);
  const unsigned bytes = bytesOf(s), V = vecElems(s), T = transposeTile(s);
  const unsigned shift = T == 32 ? 5 : 6;
  constexpr unsigned rowWords = 33;
  const unsigned stride = rowWords * 4 / bytes;  // elements per shared row
  Type et = bitsType(s), vt = Type::of(Scalar::U32, 4);
  SharedArray tile = kb.shared("tile", Type::u32(), T * rowWords);

  Value tx = kb.tid(Mod::X, "tx"), ty = kb.tid(Mod::Y, "ty");
  Value t = ((ty << 5u) + tx).named("t");
  Value x0 = (kb.ctaid(Mod::X) << shift).named("x0");
  Value tilesY = ((rows >> shift) + kb.select((rows & (T - 1)) != 0u, kb.u32(1), kb.u32(0))).named("tiles_y");
  Value base = kb.shared_addr(tile, "tile");
  auto word = [&](Value i) { return kb.index(base, i, 4); };

  // Grid y is capped at 65535, so blocks step through the remaining tile rows.
  auto overTiles = [&](auto body) {
    kb.for_range(
        kb.ctaid(Mod::Y), tilesY, kb.nctaid(Mod::Y),
        [&](Value tileRow) {
          body((tileRow << shift).named("y0"));
          kb.bar_sync();  // before the next tile row overwrites the tile
        },
        {.label = "tiles", .iv = "tile_row"});
  };

  // 16-byte path. With x, y 16-byte aligned and rows, cols multiples of V, every row of x and
  // of y starts 16-byte aligned and every vector lies wholly inside or wholly outside the matrix.
  // Each thread loads T/32 vectors of x (row t/8 + 32i, vector t%8) and stores their four words
  // to the tile; a warp's words r*33 + 4v + w (4 rows, 8 vectors) fall in 32 banks. It then
  // gathers V tile rows of one column (word) into a vector of y.
  auto vectorTile = [&](Value y0) {
    Value v = (tx & 7u).named("v");
    std::vector<Value> in;
    std::vector<Value> slot;
    for (unsigned i = 0; i < T / 32; ++i) {
      // Clamped into the matrix (a launched block has rows, cols >= V) so the loads issue
      // together; clamped duplicates land only in tile slots nobody stores to y.
      Value r = (t >> 3u) + 32 * i;
      Value gr = kb.min(y0 + r, rows - 1u);
      Value gc = kb.min(x0 + v * V, cols - V);
      Value off = kb.mul_wide(gr, cols) + kb.cvt(gc, Type::u64());
      in.push_back(kb.load(assumeAligned16(kb, kb.index(x, off, bytes)), vt, {Mod::NcMod}, "in"));
      slot.push_back(r * rowWords + v * 4u);
    }
    for (unsigned i = 0; i < in.size(); ++i)
      for (unsigned w = 0; w < 4; ++w) kb.store(word(slot[i] + w), kb.extract(in[i], w));
    kb.bar_sync();
    auto storeY = [&](Value outRow, Value outCol, const std::vector<Value>& words) {
      kb.if_then((outRow < cols) & (outCol < rows), [&] {
        Value off = kb.mul_wide(outRow, rows) + kb.cvt(outCol, Type::u64());
        kb.store(assumeAligned16(kb, kb.index(y, off, bytes)), kb.pack(vt, words));
      }, "store");
    };
    if (bytes == 4) {
      // Lane group g = t%8 takes tile rows 4g..4g+3 of column t/8: a warp reads words
      // (4g + k)*33 + c for 8 g and 4 c, 32 banks.
      Value c = (t >> 3u).named("c"), g = v;
      std::vector<Value> w;
      for (unsigned k = 0; k < 4; ++k) w.push_back(kb.load(word((g * 4u + k) * rowWords + c), Type::u32(), "out"));
      storeY(x0 + c, y0 + g * 4u, w);
      return;
    }
    // 2-byte elements: word p of a tile row holds columns 2p and 2p+1, so eight words (tile
    // rows 8g..8g+7) give one vector of y row 2p and one of row 2p+1. A warp takes 4 g and 8 p:
    // words (8g + k)*33 + p fall in 32 banks, and it writes 64-byte runs of 8 rows of y.
    Value g = (((ty & 1u) << 2u) + (tx >> 3u)).named("g");
    Value p = (((ty >> 1u) << 3u) + v).named("p");
    std::vector<Value> w;
    for (unsigned k = 0; k < 8; ++k) w.push_back(kb.load(word((g * 8u + k) * rowWords + p), Type::u32(), "out"));
    std::vector<Value> lo, hi;
    for (unsigned k = 0; k < 8; k += 2) {
      lo.push_back((w[k] & 0xFFFFu) | (w[k + 1] << 16u));
      hi.push_back((w[k] >> 16u) | (w[k + 1] & 0xFFFF0000u));
    }
    Value outRow = x0 + (p << 1u), outCol = y0 + g * 8u;
    storeY(outRow, outCol, lo);
    storeY(outRow + 1u, outCol, hi);  // cols is even: row 2p+1 exists when 2p does
  };

  // Scalar path: element (r, c) of the tile at r*stride + c. Warps read rows of x and write rows
  // of y in 32-element runs; a column read touches words (tx + 32i)*33 + const, 32 banks.
  auto scalarTile = [&](Value y0) {
    std::vector<Value> vals;
    for (unsigned i = 0; i < T / 32; ++i) {
      Value col = kb.min(x0 + tx + 32 * i, cols - 1u, "col");
      for (unsigned j = 0; j < T / 8; ++j) {
        Value r = kb.min(y0 + ty + j * 8, rows - 1u);
        Value off = kb.mul_wide(r, cols) + kb.cvt(col, Type::u64());
        vals.push_back(kb.load(kb.index(x, off, bytes), et, {Mod::NcMod}, "in"));
      }
    }
    for (unsigned i = 0, n = 0; i < T / 32; ++i)
      for (unsigned j = 0; j < T / 8; ++j) kb.store(kb.index(base, (ty + j * 8) * stride + tx + 32 * i, bytes), vals[n++]);
    kb.bar_sync();
    for (unsigned i = 0; i < T / 32; ++i) {
      Value outCol = y0 + tx + 32 * i;
      for (unsigned j = 0; j < T / 8; ++j) {
        Value r = ty + j * 8;
        Value val = kb.load(kb.index(base, (tx + 32 * i) * stride + r, bytes), et, "out");
        Value outRow = x0 + r;
        kb.if_then((outRow < cols) & (outCol < rows), [&] {
          Value off = kb.mul_wide(outRow, rows) + kb.cvt(outCol, Type::u64());
          kb.store(kb.index(y, off, bytes), val);
        }, "store");
      }
    }
  };

  Value vectorOk = (allAligned(kb, {x, y}, 16) & (((rows | cols) & (V - 1)) == 0u)).named("vector_ok");
  kb.if_else(
      vectorOk, [&] { overTiles(vectorTile); }, [&] { overTiles(scalarTile); }, {.label = "path"});
  kb.ret();
  return finish(kb, m, diags);
}

// ---- kv_scatter -----------------------------------------------------------------------------

constexpr unsigned kScatterBlock = 128;

// Copies bits (dtype only sets the element size), or with an fp8 cache writes each element's code
// of x / k_scale (x / v_scale). Each block covers kScatterBlock * V elements of a row (V = one
// 16-byte vector of k_new); the scalar path covers the same span with V strided elements.
std::optional<ir::Module> buildKvScatter(Storage s, Fp8 cache, ir::Diagnostics& diags) {
  ir::Module m = newModule();
  KernelBuilder kb(m, "kv_scatter");
  Value kNew = kb.param(kGlobalPtr, "k_new");
  Value vNew = kb.param(kGlobalPtr, "v_new");
  Value kCache = kb.param(kGlobalPtr, "k_cache");
  Value vCache = kb.param(kGlobalPtr, "v_cache");
  Value positions = kb.param(kGlobalPtr, "positions");
  Value tokens = kb.param(Type::u32(), "tokens");
  Value row = kb.param(Type::u32(), "row");
  const bool fp8 = cache != Fp8::None;
  Value kScale = fp8 ? kb.param(Type::f32(), "k_scale") : Value();
  Value vScale = fp8 ? kb.param(Type::f32(), "v_scale") : Value();
  kb.reqntid(kScatterBlock);
  const unsigned bytes = bytesOf(s), V = vecElems(s), cacheBytes = fp8 ? 1 : bytes;
  Type et = bitsType(s), vt = Type::of(Scalar::U32, 4);

  Value tid = kb.tid(Mod::X, "tid");
  Value chunk = (kb.ctaid(Mod::X) * (kScatterBlock * V)).named("chunk");
  auto overTokens = [&](auto copyRow) {
    kb.for_range(
        kb.ctaid(Mod::Y), tokens, kb.nctaid(Mod::Y),
        [&](Value t) {
          Value pos = kb.load(kb.index(positions, t, 4), Type::u32(), {Mod::NcMod}, "pos");
          // A position with the top bit set (-1 as an s32: a padding token's slot) is skipped: its
          // stores, not the loads, which stay in flight with the position's.
          copyRow(kb.mul_wide(t, row).named("src"), kb.mul_wide(pos, row).named("dst"), (pos < 0x80000000u).named("has_slot"));
        },
        {.label = "tokens", .iv = "t"});
  };
  // Element e of row src to element e of row dst, or with `vector` the V elements from e; stored
  // where `store` holds.
  auto copy = [&](Value src, Value dst, Value e, bool vector, Value store) {
    Value eo = kb.cvt(e, Type::u64());
    // &row[e] of a tensor of `size`-byte elements; on the vector path known `align`-byte aligned.
    auto at = [&](Value base, Value off, unsigned size, unsigned align) {
      Value p = kb.index(base, off + eo, size);
      return vector ? assumeAligned(kb, p, align) : p;
    };
    if (!fp8) {
      Value kv = kb.load(at(kNew, src, bytes, 16), vector ? vt : et, {Mod::NcMod}, "k");
      Value vv = kb.load(at(vNew, src, bytes, 16), vector ? vt : et, {Mod::NcMod}, "v");
      kb.if_then(store, [&] {
        kb.store(at(kCache, dst, bytes, 16), kv);
        kb.store(at(vCache, dst, bytes, 16), vv);
      }, "slot");
      return;
    }
    // Codes of x / scale (div.rn: what the host's x / scale gives), four to a u32 word.
    const Value from[2] = {kNew, vNew}, to[2] = {kCache, vCache}, scale[2] = {kScale, vScale};
    for (unsigned i = 0; i < 2; ++i) {
      Value p = at(from[i], src, bytes, 16);
      std::vector<Value> xs = vector ? loadVecF32(kb, p, s, true, i ? "v" : "k")
                                     : std::vector<Value>{loadF32(kb, p, s, true, i ? "v" : "k")};
      std::vector<Value> codes;
      for (Value x : xs) codes.push_back(f32ToFp8(kb, kb.div(x, scale[i]), cache, "code"));
      Value bits;
      if (vector) {
        std::vector<Value> words;
        for (unsigned w = 0; w < V / 4; ++w) words.push_back(packBytes(std::span(codes).subspan(4 * w, 4), "codes"));
        bits = words.size() == 1 ? words[0] : kb.pack(Type::of(Scalar::U32, unsigned(words.size())), words);
      } else {
        bits = kb.cvt(codes[0], Type::of(Scalar::U8));
      }
      kb.if_then(store, [&] { kb.store(at(to[i], dst, 1, V), bits); }, "slot");
    }
  };

  // The vector path: 16-byte reads of k_new and v_new, and writes of V elements to the caches.
  Value vectorOk = (allAligned(kb, {kNew, vNew}, 16) & allAligned(kb, {kCache, vCache}, V * cacheBytes) &
                    ((row & (V - 1)) == 0u))
                       .named("vector_ok");
  kb.if_else(
      vectorOk,
      [&] {
        Value e = (chunk + tid * V).named("e");
        kb.if_then(e < row, [&] {
          overTokens([&](Value src, Value dst, Value store) { copy(src, dst, e, true, store); });
        }, "vec_in");
      },
      [&] {
        overTokens([&](Value src, Value dst, Value store) {
          for (unsigned j = 0; j < V; ++j) {
            Value e = chunk + (tid + j * kScatterBlock);
            kb.if_then(e < row, [&] { copy(src, dst, e, false, store); }, "scalar_in");
          }
        });
      },
      {.label = "path"});
  kb.ret();
  return finish(kb, m, diags);
}

OptionSpec sampleOption() {
  return option("sample", false,
                "sample index[r] from softmax(x / temperature) instead (the Gumbel-max trick: the argmax of "
                "x / temperature plus Gumbel noise hashed from seed, the row (not with per_row) and the index, so the pair gives the "
                "one-block kernel's sample): the f32 parameter temperature and the u32 parameter seed after cols; "
                "temperature <= 0 gives the argmax");
}

OptionSpec cutoffOption() {
  return option("cutoff", false,
                "with sample: elements below cutoff[r] (f32, the pointer parameter cutoff after seed, one per row; "
                "sample_cutoff writes it) are never drawn: sampling with top-k, top-p and min-p filters");
}

// argmax's and argmax_partial's options as their builders take them; cutoff without sample is
// an error (there is nothing for it to filter).
std::optional<ArgmaxMode> argmaxMode(const Options& o, ir::Diagnostics& d) {
  ArgmaxMode mode{o.flag("sample"), o.flag("cutoff"), o.flag("per_row")};
  if (mode.cutoff && !mode.sample) {
    d.report(ir::Severity::Error, "", {}, "cutoff needs sample = true (it filters what the sampler draws)");
    return std::nullopt;
  }
  if (mode.perRow && !mode.sample) {
    d.report(ir::Severity::Error, "", {}, "per_row needs sample = true (it makes temperature and seed arrays)");
    return std::nullopt;
  }
  return mode;
}

}  // namespace

void addRowOps(std::vector<Template>& out) {
  // transpose and kv_scatter move bits: their dtype only sets the element size.
  const OptionSpec elementType = dtypeOption("dtype", "element type; elements are copied bit for bit");
  const Expr rows = Expr::param("rows"), cols = Expr::param("cols");
  out.push_back({
      "argmax",
      "index[r] (u32) = first index of the maximum of row r of x (rows x cols); NaN is larger than "
      "every number (the first NaN wins); cols = 0 writes nothing; one block of 256 threads per row",
      {dtypeOption(), sampleOption(), cutoffOption(), perRowOption("with sample: temperature and seed (a row's seed alone keys its noise)")},
      [](const Options& o, ir::Diagnostics& d) -> std::optional<ir::Module> {
        std::optional<ArgmaxMode> mode = argmaxMode(o, d);
        return mode ? buildArgmax(storageOption(o), *mode, d) : std::nullopt;
      },
      [](const Options&) { return LaunchRule{{kArgmaxBlock}, {Expr::param("rows")}, 0}; },
  });
  out.back().elements = allElements({storageElements({"x"}), u32Elements({"index", "seed"})});  // seed: per_row
  out.back().extents = allExtents({sameExtent({"x"}, rows * cols), sameExtent({"index", "temperature", "seed", "cutoff"}, rows)});
  const std::string chunk = std::to_string(kArgmaxChunk);
  const Expr partials = rows * ceilDiv(cols, kArgmaxChunk) * 2;  // argmax_partial's (key, index) pairs
  out.push_back({
      "argmax_partial",
      "long argmax rows, pass 1 (then argmax_merge): block (c, r) writes the best (key, index) of elements [c*" +
          chunk + ", (c+1)*" + chunk + ") of row r as two u32 at partial[(r * chunks + c) * 2], chunks = ceil_div(cols, " +
          chunk + "); key orders values as argmax does, index is within the row; partial must hold rows * "
          "ceil_div(cols, " + chunk + ") * 2 u32; rows <= 65535 (the grid's height); blocks of 256 threads",
      {dtypeOption(), sampleOption(), cutoffOption(), perRowOption("with sample: temperature and seed (a row's seed alone keys its noise)")},
      [](const Options& o, ir::Diagnostics& d) -> std::optional<ir::Module> {
        std::optional<ArgmaxMode> mode = argmaxMode(o, d);
        return mode ? buildArgmaxPartial(storageOption(o), *mode, d) : std::nullopt;
      },
      [](const Options&) {
        return LaunchRule{{kArgmaxBlock}, {ceilDiv(Expr::param("cols"), kArgmaxChunk), Expr::param("rows")}, 0};
      },
  });
  out.back().elements = allElements({storageElements({"x"}), u32Elements({"partial", "seed"})});
  out.back().extents = allExtents({sameExtent({"x"}, rows * cols), sameExtent({"partial"}, partials),
                                   sameExtent({"temperature", "seed", "cutoff"}, rows)});
  out.push_back({
      "argmax_merge",
      "long argmax rows, pass 2 (after argmax_partial): index[r] (u32) = the best of row r's ceil_div(cols, " + chunk +
          ") pairs in partial, the same index argmax gives; cols = 0 writes nothing; one warp per row, " +
          std::to_string(kMergeRowsPerBlock) + " rows per block of 256 threads",
      {},
      [](const Options&, ir::Diagnostics& d) { return buildArgmaxMerge(d); },
      [](const Options&) {
        return LaunchRule{{kArgmaxBlock}, {ceilDiv(Expr::param("rows"), kMergeRowsPerBlock) * min(1, Expr::param("cols"))}, 0};
      },
  });
  out.back().elements = u32Elements({"partial", "index"});
  out.back().extents = allExtents({sameExtent({"partial"}, partials), sameExtent({"index"}, rows)});
  out.push_back({
      "sample_cutoff",
      "cutoff[r] (f32) = the smallest value of row r of x (rows x cols) that sampling with top_k (u32), "
      "top_p (f32) and min_p (f32) at temperature (f32) keeps, for argmax's sample with cutoff: top_k keeps "
      "the k largest values (0 or >= cols: off), top_p then the fewest largest whose probability reaches "
      "top_p (>= 1 or NaN: off), min_p those of probability >= min_p * the largest (<= 0 or NaN: off); ties "
      "at a threshold are kept; -inf when nothing is excluded, and when temperature <= 0; a row whose maximum "
      "is not finite gets its maximum; cols = 0 writes nothing; one block of 256 threads per row, up to 9 "
      "passes over it",
      {dtypeOption(), perRowOption("temperature, top_k, top_p and min_p")},
      [](const Options& o, ir::Diagnostics& d) { return buildSampleCutoff(storageOption(o), o.flag("per_row"), d); },
      [](const Options&) { return LaunchRule{{kArgmaxBlock}, {Expr::param("rows")}, 0}; },
  });
  out.back().elements = allElements({storageElements({"x"}), u32Elements({"top_k"})});  // top_k: with per_row
  out.back().extents = allExtents(
      {sameExtent({"x"}, rows * cols), sameExtent({"cutoff", "temperature", "top_k", "top_p", "min_p"}, rows)});
  const std::string steps = std::to_string(kCutoffSteps);
  out.push_back({
      "sample_cutoff_split",
      "sample_cutoff over chunks of a row, for long rows at a small batch (decode over a large vocabulary): launched " +
          steps + " times in order with step = 0 ... " + std::to_string(kCutoffSteps - 1) +
          " (the same arguments otherwise; step " + std::to_string(kCutoffSteps - 1) +
          " writes cutoff), it writes sample_cutoff's cutoff bit for bit; block (c, r) reads chunk c of row r; work "
          "(8-byte aligned) holds rows * (" + std::to_string(kWorkFixed) +
          " + ceil_div(cols, chunk)) u64 words between the launches, none of them read before step 0 writes them; "
          "rows <= 65535 (the grid's height); blocks of 256 threads",
      {dtypeOption(), perRowOption("temperature, top_k, top_p and min_p"),
       intOption("chunk", kCutoffChunk, kArgmaxBlock, 65536,
                 "row elements a block reads: ceil_div(cols, chunk) blocks a row", kArgmaxBlock)},
      [](const Options& o, ir::Diagnostics& d) {
        return buildSampleCutoffSplit(storageOption(o), o.flag("per_row"), unsigned(o.integer("chunk")), d);
      },
      [](const Options& o) {
        return LaunchRule{{kArgmaxBlock}, {ceilDiv(Expr::param("cols"), uint64_t(o.integer("chunk"))), Expr::param("rows")}, 0};
      },
  });
  out.back().elements = allElements({storageElements({"x"}), u32Elements({"top_k", "work"})});
  out.back().extents = [](const Options& o) {
    const Expr rows = Expr::param("rows"), cols = Expr::param("cols");
    return allExtents({sameExtent({"x"}, rows * cols),
                       sameExtent({"work"}, rows * (ceilDiv(cols, uint64_t(o.integer("chunk"))) + kWorkFixed) * 2),
                       sameExtent({"cutoff", "temperature", "top_k", "top_p", "min_p"}, rows)})(o);
  };
  out.push_back({
      "transpose",
      "y[c * rows + r] = x[r * cols + c] through a padded shared tile of TxT elements (T = 32 for f32, 64 "
      "for bf16/f16); 16-byte accesses when x and y are 16-byte aligned and rows, cols are multiples of "
      "the vector width, else scalar; blocks of 32x8 threads, one per tile (grid y capped at 65535; "
      "blocks loop over further tile rows)",
      {elementType},
      [](const Options& o, ir::Diagnostics& d) { return buildTranspose(storageOption(o), d); },
      [](const Options& o) {
        uint64_t tile = transposeTile(storageOption(o));
        return LaunchRule{{32, 8}, {ceilDiv(Expr::param("cols"), tile), min(ceilDiv(Expr::param("rows"), tile), kMaxGridY)}, 0};
      },
  });
  out.back().elements = storageElements({"x", "y"});
  out.back().extents = sameExtent({"x", "y"}, rows * cols);
  out.push_back({
      "kv_scatter",
      "for t < tokens: row positions[t] (u32) of k_cache and v_cache = row t of k_new and v_new; rows have "
      "`row` elements, copied bit for bit, or with an fp8 cache_dtype the codes of k_new / k_scale and v_new / "
      "v_scale (the f32 parameters after row); a position of 2^31 or more (-1 as an int32: vLLM's padding "
      "slot) is skipped; blocks of 128 threads, each one 16-byte vector of k_new per thread",
      {dtypeOption("dtype", "element type of k_new and v_new, and of the caches with cache_dtype auto (copied bit "
                   "for bit)"),
       cacheDtypeOption("what the caches hold: auto (dtype's bits), or fp8_e4m3 / fp8_e5m2 codes (u8, one a "
                        "value: nearest, ties to even, saturating to the largest finite value; NaN is 0x7F)")},
      [](const Options& o, ir::Diagnostics& d) { return buildKvScatter(storageOption(o), cacheDtype(o), d); },
      [](const Options& o) {
        uint64_t span = kScatterBlock * vecElems(storageOption(o));
        return LaunchRule{{kScatterBlock}, {ceilDiv(Expr::param("row"), span), min(Expr::param("tokens"), kMaxGridY)}, 0};
      },
  });
  out.back().elements = allElements({storageElements({"k_new", "v_new"}), cacheElements({"k_cache", "v_cache"}),
                                     u32Elements({"positions"})});
  // The caches' rows are as many as the largest position, which no parameter says.
  out.back().extents = allExtents({sameExtent({"k_new", "v_new"}, Expr::param("tokens") * Expr::param("row")),
                                   sameExtent({"positions"}, Expr::param("tokens"))});
}

}  // namespace tn::kernels::lib
