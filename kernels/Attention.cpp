// attention_decode, attention_decode_merge (docs/kernels.md): decode attention of one new query
// token per sequence against a KV cache, split along the sequence (flash-decoding).
//
// attention_decode: block (kv head h, split s, sequence b) reads positions [s * split_len,
// min((s + 1) * split_len, length)) of sequence b's cache (contiguous rows from offsets[b], or
// with page_size the rows of its pages, which its row of block_table lists) once for all `group`
// query heads that share kv head h (grouped-query attention); with `window`, the positions from
// length - window on, the splits counting from there. Its 4 warps take every 4th position, 4 positions per
// step (2 above group * head_dim = 512 and at head_dim 256, 1 at 1024), whose loads are issued
// during the step before (the loop carries them in); each lane
// owns head_dim / 32 consecutive elements of q, k, v and the accumulators. Scores are dot
// products finished by one warp reduction of all of a step's (warpSumSpread: each lane is left
// with one of the step's scores), kept in the log2 domain (q is pre-scaled by scale * log2 e),
// and folded in by online softmax, once a step for all of its positions: a running max m, sum l
// and accumulator per query head, rescaled when m grows; each lane computes its score's weight,
// and shuffles bring every weight to the accumulators. The warps' states merge through shared
// memory, and the split writes its normalized output and log2-sum-exp to the workspace. attention_decode_merge combines a sequence's splits:
// one warp per (sequence, query head); with `sinks` a logit per head without a value adds its
// weight to the splits' sums (gpt-oss's attention sinks). With an fp8 cache_dtype the caches hold E4M3 or E5M2 codes
// (kernels/Fp8.cpp), decoded as each slice is loaded (fp8_decode: cvt.f16x2 or integer
// instructions), k_scale folded into q's pre-scale and v_scale into the split's output. With
// `mla` (multi-head latent attention, absorbed: DeepSeek's) q and K rows hold head_dim latent
// elements and 64 rope elements, V is the latent part of K's rows (a lane's first K values), and
// o head_dim elements a head. Groups of more heads than a block holds in registers are shared by
// several blocks (Config::blocks), each reading the kv head's K and V.
//
// Special values: an empty split (or a zero-length sequence) has log2-sum-exp -inf and weight 0;
// a sequence with no position at all gets zeros. A score of -inf (from infinite inputs) weighs 0;
// a NaN in K makes its head's scores, and so its whole output, NaN; a NaN in V the output
// elements it feeds.
#include <bit>
#include <string>

#include "kernels/Library.h"

namespace tn::kernels::lib {

namespace {

using ir::Mod;
using ir::SharedArray;
using ir::Type;

constexpr unsigned kWarps = 4;
constexpr unsigned kBlock = 32 * kWarps;
// A block's query heads times the elements of q and of o a head: a lane's pre-scaled q and
// accumulators are that / 32 registers; 2048 keeps them at 64 (heads * 2 head_dim <= 2048).
constexpr unsigned kMaxHeadElems = 2048;
constexpr unsigned kMaxGroup = 128;
// mla: the rope part of a K (and q) row after the head_dim latent elements.
constexpr unsigned kMlaRope = 64;

// A lane's elements of a row, in pieces: `count` consecutive elements from first + lane * count.
struct Piece {
  unsigned first, count;
};

struct Config {
  Storage s;
  unsigned dim, group;
  unsigned pageSize = 0;  // 0: a sequence's rows are contiguous from offsets[b]
  bool window = false;    // the u32 parameter window: only the last `window` positions (0: all)
  bool softcap = false;   // the f32 parameter softcap: scaled scores s become softcap tanh(s / softcap)
  bool alibi = false;     // the f32 [q_heads] parameter alibi_slopes: scores gain slope (t - (len - 1))
  Fp8 cache = Fp8::None;  // fp8 caches: codes scaled by the f32 parameters k_scale and v_scale
  bool cvt = false;       // fp8 codes decoded by cvt.f16x2 (fp8_decode = "cvt"), else by integer instructions
  // Multi-head latent attention (DeepSeek's, absorbed): q and K rows of head_dim latent elements
  // and kMlaRope rope elements, V the latent part of K's rows (no v_cache), o head_dim.
  bool mla = false;
  unsigned kdim() const { return mla ? dim + kMlaRope : dim; }
  // V's (and the accumulators' and o's) elements a lane; kPieces' and qs' perLaneK.
  unsigned perLane() const { return dim / 32; }
  unsigned perLaneK() const { return kdim() / 32; }
  // A lane's elements: head_dim / 32 consecutive ones; with mla 8 of each 256 latent elements
  // (16-byte loads of bf16) and 2 rope elements, V's the latent pieces, so that with mla a lane's
  // V values are its first perLane K values.
  std::vector<Piece> vPieces() const {
    if (!mla) return {{0, perLane()}};
    std::vector<Piece> out;
    for (unsigned c = 0; c < dim / 256; ++c) out.push_back({256 * c, 8});
    return out;
  }
  std::vector<Piece> kPieces() const {
    std::vector<Piece> out = vPieces();
    if (mla) out.push_back({dim, kMlaRope / 32});
    return out;
  }
  // A group of more than kMaxHeadElems / (q's and o's elements) heads is shared by `blocks()`
  // blocks of `heads()` heads each (as even as can be: the last one's heads past the group idle),
  // each reading the kv head's K and V itself.
  unsigned maxHeads() const { return std::max(kMaxHeadElems / (kdim() + dim), 1u); }
  unsigned blocks() const { return (group + maxHeads() - 1) / maxHeads(); }
  unsigned heads() const { return (group + blocks() - 1) / blocks(); }
  // Positions per warp per step: 4 while a lane's q and accumulators leave room for four K and V
  // slices (at most 32 registers of them), 2 below 64, 1 at 64; and at most as many as keep the
  // K and V elements a lane loads a step within 40 (head_dim 256: 2 positions of 16; mla's 18 at
  // 512: 2), since the loop holds two steps' loads (the next step's are issued before this step's
  // arithmetic): head_dim 256 at 4 positions spilled on sm_89 with integer fp8 decoding.
  unsigned unroll() const {
    const unsigned regs = heads() * (kdim() + dim) / 32, loaded = perLaneK() + (mla ? 0 : perLane());
    return std::min(regs <= 32 ? 4u : regs < 64 ? 2u : 1u, std::bit_floor(std::max(40 / loaded, 1u)));
  }
  unsigned cacheBytes() const { return cache == Fp8::None ? bytesOf(s) : 1; }
};

Config configOf(const Options& o) {
  // The merge has neither group nor page_size.
  auto optional = [&](const char* name, int64_t none) { return o.all().count(name) ? o.integer(name) : none; };
  return {storageOption(o), static_cast<unsigned>(o.integer("head_dim")), static_cast<unsigned>(optional("group", 1)),
          static_cast<unsigned>(optional("page_size", 0)), o.all().count("window") && o.flag("window"),
          o.all().count("softcap") && o.flag("softcap"), o.all().count("alibi") && o.flag("alibi"), cacheDtype(o),
          fp8Cvt(o), o.all().count("mla") && o.flag("mla")};
}

// head_dim 64, 128 or 256, with mla 256 or 512, and the merge's any of them (the group's range is
// its option's); refused at the spec entry otherwise.
bool checkConfig(const Config& c, bool merge, ir::Diagnostics& diags) {
  std::string why;
  if (c.mla && c.dim != 256 && c.dim != 512)
    why = "head_dim (the latent rank) must be 256 or 512 with mla, not " + std::to_string(c.dim);
  else if (!c.mla && c.dim != 64 && c.dim != 128 && c.dim != 256 && !(merge && c.dim == 512))
    why = "head_dim must be 64, 128 or 256" + std::string(merge ? " (or 512: mla's)" : " (with mla 256 or 512)") +
          ", not " + std::to_string(c.dim);
  else if (c.pageSize & (c.pageSize - 1))
    why = "page_size must be 0 or a power of two, not " + std::to_string(c.pageSize);
  if (!why.empty()) diags.report(ir::Severity::Error, "", {}, why);
  return why.empty();
}

// A lane's slice is read in two halves, so that a step's loads can be issued a step before their
// arithmetic. fetchSlice issues the loads of the lane's n consecutive elements at p (element 0 of
// its slice): when `vec` (p aligned to the slice's bytes) one vector load of up to 16 bytes at a
// time (u32 words of two bf16/f16, f32, or fp8 codes in a u16 or u32 words), else one load an
// element. decodeSlice turns what they loaded into n f32 values (fp8 codes by decodeCodes: their
// values, or their values times 2^-bias).
std::vector<Value> fetchSlice(KernelBuilder& kb, Value p, unsigned n, const Config& c, bool codes, bool vec,
                              std::string_view name) {
  std::vector<Value> out;
  const unsigned bytes = codes ? 1 : bytesOf(c.s);
  auto at = [&](unsigned off) { return off == 0 ? p : kb.ptradd(p, kb.u64(off)); };
  if (!vec) {
    const Type t = codes                     ? Type::of(ir::Scalar::U8)
                   : c.s == Storage::F32  ? Type::f32()
                   : c.s == Storage::BF16 ? Type::of(ir::Scalar::U16)
                                          : Type::of(ir::Scalar::F16);
    for (unsigned i = 0; i < n; ++i) out.push_back(kb.load(at(i * bytes), t, {Mod::NcMod}, name));
    return out;
  }
  if (codes) {
    const Type t = n == 2 ? Type::of(ir::Scalar::U16) : Type::of(ir::Scalar::U32, n / 4);
    out.push_back(kb.load(p, t, {Mod::NcMod}, name));
    return out;
  }
  const unsigned total = n * bytes, piece = std::min(total, 16u);
  for (unsigned off = 0; off < total; off += piece)
    out.push_back(kb.load(at(off), Type::of(c.s == Storage::F32 ? ir::Scalar::F32 : ir::Scalar::U32, piece / 4),
                          {Mod::NcMod}, name));
  return out;
}

std::vector<Value> decodeSlice(KernelBuilder& kb, const std::vector<Value>& loaded, unsigned n, const Config& c,
                               bool codes, bool vec, std::string_view name) {
  std::vector<Value> out;
  auto words = [&](Value v) {
    std::vector<Value> w;
    for (unsigned i = 0; i < v.type().lanes; ++i) w.push_back(v.type().lanes == 1 ? v : kb.extract(v, i));
    return w;
  };
  if (codes) {
    if (!vec) {
      for (Value b : loaded) out.push_back(decodeCodes(kb, kb.cvt(b, Type::u32()), 1, c.cache, c.cvt, name)[0]);
      return out;
    }
    Value v = loaded[0];
    for (Value w : n == 2 ? std::vector<Value>{kb.cvt(v, Type::u32())} : words(v))
      for (Value x : decodeCodes(kb, w, std::min(n, 4u), c.cache, c.cvt, name)) out.push_back(x);
    return out;
  }
  for (Value v : loaded) {
    if (!vec) {  // one element
      out.push_back(c.s == Storage::F32    ? v
                    : c.s == Storage::BF16 ? kb.bitcast(kb.cvt(v, Type::u32()) << 16u, Type::f32(), name)
                                           : kb.cvt(v, Type::f32(), name));
      continue;
    }
    for (Value e : words(v)) {
      if (c.s == Storage::F32) {
        out.push_back(e);
      } else if (c.s == Storage::BF16) {  // bf16 widens exactly: its bits are the high half
        out.push_back(kb.bitcast(e << 16u, Type::f32()));
        out.push_back(kb.bitcast(e & 0xFFFF0000u, Type::f32()));
      } else {
        for (Value half : {e, e >> 16u}) out.push_back(f16BitsToF32(kb, half));
      }
    }
  }
  return out;
}

std::optional<ir::Module> buildDecode(const Options& o, ir::Diagnostics& diags) {
  const Config c = configOf(o);
  ir::Module m = newModule();
  if (c.cvt) m.ptx = kFp8CvtPtx;
  KernelBuilder kb(m, "attention_decode");
  if (!checkConfig(c, false, diags) || !checkFp8Decode(o, c.cache, diags)) return std::nullopt;
  const unsigned ps = c.pageSize;
  Value q = kb.param(kGlobalPtr, "q");
  Value kc = kb.param(kGlobalPtr, "k_cache");
  Value vc = c.mla ? Value() : kb.param(kGlobalPtr, "v_cache");
  // Paged: sequence b's page j is page block_table[b * max_pages + j] of the caches (rows
  // [page * page_size, (page + 1) * page_size)).
  Value rowsOf = kb.param(kGlobalPtr, ps ? "block_table" : "offsets");
  Value lengths = kb.param(kGlobalPtr, "lengths");
  Value partial = kb.param(kGlobalPtr, "partial");
  Value stats = kb.param(kGlobalPtr, "stats");
  Value slopes = c.alibi ? kb.param(kGlobalPtr, "alibi_slopes") : Value();
  kb.param(Type::u32(), "batch");  // the grid's z extent
  Value kvHeads = kb.param(Type::u32(), "kv_heads");
  Value splits = kb.param(Type::u32(), "splits");
  Value splitLen = kb.param(Type::u32(), "split_len");
  Value maxPages = ps ? kb.param(Type::u32(), "max_pages") : Value();
  Value scale = kb.param(Type::f32(), "scale");
  const bool fp8 = c.cache != Fp8::None;
  Value kScale = fp8 ? kb.param(Type::f32(), "k_scale") : Value();
  Value vScale = fp8 ? kb.param(Type::f32(), "v_scale") : Value();
  Value window = c.window ? kb.param(Type::u32(), "window") : Value();
  Value softcapArg = c.softcap ? kb.param(Type::f32(), "softcap") : Value();
  kb.reqntid(kBlock);
  // Four blocks (16 warps) per SM, up to 128 registers a thread: ptxas's own choice for this
  // block size (64) spills the largest groups.
  kb.minnctapersm(4);
  // G: the block's query heads (the group's, or its share of them); the group's kv head h, its
  // blocks' first query head h * group + part * G.
  const unsigned n = c.perLane(), nk = c.perLaneK(), bytes = bytesOf(c.s), G = c.heads(), unroll = c.unroll();
  const bool padded = c.blocks() * G > c.group;
  SharedArray shM = kb.shared("warp_m", Type::f32(), kWarps * G);
  SharedArray shL = kb.shared("warp_l", Type::f32(), kWarps * G);
  SharedArray shAcc = kb.shared("warp_acc", Type::f32(), kWarps * G * c.dim, 16);

  Value tid = kb.tid(Mod::X, "tid");
  Value lane = (tid & 31u).named("lane"), warp = (tid >> 5u).named("warp");
  Value split = kb.ctaid(Mod::Y, "split"), b = kb.ctaid(Mod::Z, "seq");
  Value h = kb.ctaid(Mod::X, "kv_head"), part = kb.u32(0);
  if (c.blocks() > 1) {
    Value x = h;
    h = (x / c.blocks()).named("kv_head");
    part = (x % c.blocks()).named("part");
  }
  // The block's query head g (of G) is head `first + g` of the group; past the group (the last
  // block's idle heads) it reads the group's last head's q and writes nothing.
  Value firstOfGroup = (h * c.group).named("group_head");
  Value first = c.blocks() > 1 ? (firstOfGroup + part * G).named("first_head") : firstOfGroup;
  auto headAt = [&](unsigned g) {
    return padded ? kb.min(first + g, firstOfGroup + (c.group - 1), "q_head") : (first + g).named("q_head");
  };
  // Every lane loads the same word; lane 0's copy, shuffled, is visibly the same in the whole
  // warp (uniformity analysis), which the warp's collectives inside the loop it bounds need.
  auto uniformLoad = [&](Value p, std::string_view name) {
    return kb.shfl(Mod::Idx, kb.load(p, Type::u32(), {Mod::NcMod}), 0, name);
  };
  Value len = uniformLoad(kb.index(lengths, b, 4), "len");
  Value firstRow = ps ? Value() : uniformLoad(kb.index(rowsOf, b, 4), "first_row");
  Value pages = ps ? kb.index(rowsOf, (b * maxPages).named("table_row"), 4, "pages") : Value();
  // The cache row of position t: first + t, or row t % page_size of the sequence's page t / page_size.
  auto rowAt = [&](Value t) { return ps ? pagedRow(kb, pages, t, ps) : (firstRow + t).named("row"); };
  // Sliding window: the query, at position len - 1, sees positions from len - window on (all of
  // them with window 0 or window >= len), and the splits count from there, so that
  // ceil(min(len, window) / split_len) of them cover it.
  Value from = kb.u32(0);
  if (c.window)
    from = kb.select(((window != 0u) & (len > window)).named("windowed"), len - window, kb.u32(0), "window_start");
  Value t0 = (from + split * splitLen).named("t0");
  Value t1 = kb.select(t0 < len, kb.min(len - t0, splitLen) + t0, t0, "t1");  // empty past the end
  Value qHeads = (kvHeads * c.group).named("q_heads");
  // A piece's first element of the lane in a row.
  auto laneOff = [&](const Piece& p) {
    Value at = (lane * p.count).named("lane_elem");
    return p.first == 0 ? at : (at + p.first).named("lane_elem");
  };
  // Query head h * group + g of sequence b; its row of q, pre-scaled into the log2 domain (and by
  // k_scale: fp8 K's values are k_scale times its codes'). Decoded by integer instructions, codes
  // are read as their values times 2^-bias (fp8Raw), so a step's summed scores, and the output,
  // are scaled by 2^bias.
  Value qScale = fp8 ? (scale * kLog2e * kScale).named("q_scale") : (scale * kLog2e).named("q_scale");
  const float rawScale = fp8 ? fp8Scale(c.cache, c.cvt) : 1.0f;
  Value cap = c.softcap ? (softcapArg * kLog2e).named("cap") : Value();
  Value capRate = c.softcap ? (2.0f * kb.rcp(softcapArg)).named("cap_rate") : Value();
  Value capOn = c.softcap ? (softcapArg != 0.0f).named("cap_on") : Value();
  // A step's scores are spread over the warp (warpSumSpread): lane l holds score v = (l >> shift)
  // & (values - 1), position u = v >> log2 gp of the step and head g = v & (gp - 1) (the heads
  // padded to a power of two: a padded head's dot is 0 and its softmax state is never read), and
  // it computes that score's softmax weight alone. The lanes of one head differ in u's bits of
  // the lane index (and in the bits below `shift`, which hold copies).
  const unsigned gp = std::bit_ceil(G), values = unroll * gp;
  if (values > 32) {  // Config::unroll keeps heads times positions within a warp
    diags.report(ir::Severity::Error, "", {}, "internal: " + std::to_string(values) + " scores a step");
    return std::nullopt;
  }
  const unsigned shift = 5 - static_cast<unsigned>(std::countr_zero(values)), gBits = std::countr_zero(gp);
  Value laneValue = ((lane >> shift) & (values - 1)).named("score_slot");
  Value laneU = (laneValue >> gBits).named("score_pos"), laneG = (laneValue & (gp - 1)).named("score_head");
  // ALiBi: the lane's head's slope in the log2 domain; the query sits at position len - 1.
  Value slope2, lastPos;
  if (c.alibi) {
    Value at = kb.min(first + laneG, firstOfGroup + (c.group - 1), "q_head");
    slope2 = kb.load(kb.index(slopes, at, 4), Type::f32(), {Mod::NcMod}, "alibi_slope") * kLog2e;
    lastPos = (kb.cvt(len, Type::f32(), {Mod::Rn}) - 1.0f).named("last_pos");
  }
  // Every slice starts at a multiple of its size from its tensor's base (rows are whole 16-byte
  // units of its pieces: head_dim or head_dim + kMlaRope elements), so aligned bases make every
  // slice load aligned.
  unsigned sliceAlign = 1, cacheAlign = 1;
  for (const Piece& p : c.kPieces()) {
    sliceAlign = std::max(sliceAlign, std::min(p.count * bytes, 16u));
    cacheAlign = std::max(cacheAlign, std::min(p.count * c.cacheBytes(), 16u));
  }
  Value vec = c.mla ? (fp8 ? (allAligned(kb, {q}, sliceAlign) & allAligned(kb, {kc}, cacheAlign)).named("vector")
                            : allAligned(kb, {q, kc}, sliceAlign, "vector"))
              : fp8 ? (allAligned(kb, {q}, sliceAlign) & allAligned(kb, {kc, vc}, cacheAlign)).named("vector")
                    : allAligned(kb, {q, kc, vc}, sliceAlign, "vector");
  // The loads of the lane's elements of `pieces` of row `rowIndex` (kdim elements a row: q's,
  // K's) of the tensor at `base`, a list a piece: dtype elements, or fp8 codes (`codes`); and
  // their f32 values.
  using Fetched = std::vector<std::vector<Value>>;
  auto fetchPieces = [&](Value base, Value rowIndex, const std::vector<Piece>& pieces, bool codes, bool vectors,
                         std::string_view name) {
    Fetched out;
    for (const Piece& p : pieces) {
      Value elem = (rowIndex * c.kdim() + kb.cvt(laneOff(p), Type::u64())).named("elem");
      out.push_back(fetchSlice(kb, kb.index(base, elem, codes ? 1 : bytes, "slice"), p.count, c, codes, vectors, name));
    }
    return out;
  };
  auto decodePieces = [&](const Fetched& loaded, const std::vector<Piece>& pieces, bool codes, bool vectors,
                          std::string_view name) {
    std::vector<Value> out;
    for (size_t i = 0; i < pieces.size(); ++i) {
      std::vector<Value> part = decodeSlice(kb, loaded[i], pieces[i].count, c, codes, vectors, name);
      out.insert(out.end(), part.begin(), part.end());
    }
    return out;
  };
  // The loads of the head's slice of cache row `row` (its row of kv_heads heads).
  auto fetchRow = [&](Value cache, Value row, const std::vector<Piece>& pieces, std::string_view name, bool vectors) {
    Value headRow = (kb.mul_wide(row, kvHeads) + kb.cvt(h, Type::u64())).named("head_row");
    return fetchPieces(cache, headRow, pieces, fp8, vectors, name);
  };
  auto run = [&](bool vectors) {
    // On the vector path the bases are known aligned: clearing their low bits says so to
    // tile-validation and changes nothing.
    Value qb = vectors ? assumeAligned(kb, q, sliceAlign, "aligned") : q;
    Value kb0 = vectors ? assumeAligned(kb, kc, cacheAlign, "aligned") : kc;
    Value vb0 = c.mla ? Value() : vectors ? assumeAligned(kb, vc, cacheAlign, "aligned") : vc;
    std::vector<std::vector<Value>> qs;
    for (unsigned g = 0; g < G; ++g) {
      Value qRow = (kb.mul_wide(b, qHeads) + kb.cvt(headAt(g), Type::u64())).named("q_row");
      std::vector<Value> s = decodePieces(fetchPieces(qb, qRow, c.kPieces(), false, vectors, "q"), c.kPieces(), false,
                                          vectors, "q");
      for (Value& x : s) x = x * qScale;
      qs.push_back(s);
    }
    // A step's loads, issued a step ahead: for positions t, t + 4, ... (the warp's step at t) the
    // loads of their K and V slices, flattened (a position past the split reads the row of
    // `inside`, a position of the split, instead: it is not used). `shape` says how many loads
    // each position's pieces took.
    std::vector<size_t> shape;
    auto fetchStep = [&](Value t, Value inside) {
      std::vector<Value> flat;
      shape.clear();
      for (unsigned u = 0; u < unroll; ++u) {
        Value tu = u == 0 ? t : (t + kWarps * u).named("t_next");
        Value row = rowAt(kb.select((tu < t1).named("in_split"), tu, inside));
        Fetched loads = fetchRow(kb0, row, c.kPieces(), "k", vectors);
        if (!c.mla) {  // mla: V is the latent part of K's row
          Fetched v = fetchRow(vb0, row, c.vPieces(), "v", vectors);
          loads.insert(loads.end(), v.begin(), v.end());
        }
        for (const std::vector<Value>& piece : loads) {
          shape.push_back(piece.size());
          flat.insert(flat.end(), piece.begin(), piece.end());
        }
      }
      return flat;
    };
    // The first step's loads, when the warp has a position in the split (zeros otherwise: the
    // loop does not run).
    Value tStart = (t0 + warp).named("t_start");
    std::vector<Value> firstLoads;
    std::vector<Value> first = kb.if_else((tStart < t1).named("has_step"), [&] {
      firstLoads = fetchStep(tStart, tStart);
      return firstLoads;
    }, [&] {
      // Zeros of the types the loads have (the then-branch is built first).
      std::vector<Value> zeros;
      for (Value v : firstLoads) {
        Type t = v.type(), one = Type::of(t.scalar);
        Value z = kb.constant(one, 0.0);
        zeros.push_back(t.lanes == 1 ? z : kb.pack(t, std::vector<Value>(t.lanes, z)));
      }
      return zeros;
    }, {.label = "first_step"});
    // Carried: the lane's head's m and l, then per head the lane's accumulators, then the step's loads.
    std::vector<Value> init = {negInf(kb), kb.f32(0.0f)};
    for (unsigned g = 0; g < G; ++g)
      for (unsigned i = 0; i < n; ++i) init.push_back(kb.f32(0.0f));
    const size_t loadsAt = init.size();
    init.insert(init.end(), first.begin(), first.end());
    std::vector<Value> out = kb.for_range(
        tStart, t1, kb.u32(kWarps * unroll), init,
        [&](Value t, std::span<Value> carried) {
          // The next step's loads first (its rows, when past the split, are this step's), then
          // this step's values from the loads carried in.
          std::vector<Value> ahead = fetchStep((t + kWarps * unroll).named("t_ahead"), t);
          std::vector<std::vector<Value>> kv, vv;
          size_t at = loadsAt, piece = 0;
          auto take = [&](const std::vector<Piece>& pieces) {
            Fetched loads;
            for (size_t i = 0; i < pieces.size(); ++i, ++piece) {
              loads.emplace_back(carried.begin() + at, carried.begin() + at + shape[piece]);
              at += shape[piece];
            }
            return loads;
          };
          for (unsigned u = 0; u < unroll; ++u) {
            kv.push_back(decodePieces(take(c.kPieces()), c.kPieces(), fp8, vectors, "k"));
            // mla: V is the latent part of K's row, the lane's first n K values.
            vv.push_back(c.mla ? std::vector<Value>(kv.back().begin(), kv.back().begin() + n)
                               : decodePieces(take(c.vPieces()), c.vPieces(), fp8, vectors, "v"));
          }
          // Every score of the step at once (the lanes' partial dot products of every position
          // and head, summed over the warp together), each lane then the softmax of its one
          // score: one online-softmax update per head for all of the step's positions (one
          // rescale of the head's sum and accumulators, and one ex2 for it, a step).
          std::vector<Value> dots;
          for (unsigned u = 0; u < unroll; ++u)
            for (unsigned g = 0; g < gp; ++g) {
              Value dot = kb.f32(0.0f);
              if (g < G)
                for (unsigned i = 0; i < nk; ++i) dot = kb.fma(qs[g][i], kv[u][i], dot);
              dots.push_back(dot);
            }
          Value score = warpSumSpread(kb, dots, lane).sum;
          if (rawScale != 1.0f) score = (score * rawScale).named("dot");
          // Soft-capping in the log2 domain: the cap softcap · log2 e, the rate 2 / softcap; a cap
          // of 0 leaves the scores alone.
          if (c.softcap)
            score = kb.if_else(capOn, [&] { return std::vector<Value>{softcap(kb, score, capRate, cap)}; },
                               [&] { return std::vector<Value>{score}; }, {.label = "softcap"})[0];
          Value pos = (t + laneU * kWarps).named("score_t");
          // ALiBi: slope (t - (len - 1)), at most 0; positions are exact in f32 below 2^24.
          if (c.alibi)
            score = kb.fma(slope2, (kb.cvt(pos, Type::f32(), {Mod::Rn}) - lastPos).named("dist"), score, "biased");
          score = kb.select((pos < t1).named("in_split"), score, negInf(kb), "score");
          // The head's new max and its weights: butterflies over the positions' lanes.
          auto overPositions = [&](Value v, auto&& combine) {
            for (unsigned j = 0; j < static_cast<unsigned>(std::countr_zero(unroll)); ++j)
              v = combine(v, kb.shfl(Mod::Bfly, v, 1u << (shift + gBits + j), "other"));
            return v;
          };
          Value m = carried[0], l = carried[1];
          Value mNew = overPositions(kb.max(m, score, "m"), [&](Value a, Value b) { return kb.max(a, b, "m"); });
          Value ref = refOf(kb, mNew);
          Value corr = ex2Approx(kb, m - ref, "corr");
          Value p = ex2Approx(kb, score - ref, "p");
          Value pSum = overPositions(p, [&](Value a, Value b) { return (a + b).named("p_sum"); });
          std::vector<Value> next = {mNew, kb.fma(l, corr, pSum, "l")};
          // Every head's rescale and weights to every lane, for its accumulators. They are rescaled
          // only when some head's max grew (a warp-uniform branch): the rescale by exactly 1 that
          // it skips changes nothing, and late in a long context the max rarely grows.
          std::vector<Value> corrs, accs(carried.begin() + 2, carried.begin() + 2 + G * n);
          for (unsigned g = 0; g < G; ++g) corrs.push_back(kb.shfl(Mod::Idx, corr, g << shift, "corr_head"));
          Value grew = kb.vote(Mod::Any, (corr != 1.0f).named("max_grew"), "rescale");
          accs = kb.if_else(grew, [&] {
            std::vector<Value> scaled;
            for (unsigned i = 0; i < G * n; ++i) scaled.push_back((accs[i] * corrs[i / n]).named("acc"));
            return scaled;
          }, [&] { return accs; }, {.label = "rescale"});
          for (unsigned g = 0; g < G; ++g) {
            std::vector<Value> pg;
            for (unsigned u = 0; u < unroll; ++u) pg.push_back(kb.shfl(Mod::Idx, p, (u * gp + g) << shift, "p_head"));
            for (unsigned i = 0; i < n; ++i) {
              Value a = accs[g * n + i];
              for (unsigned u = 0; u < unroll; ++u) a = kb.fma(pg[u], vv[u][i], a, "acc");
              next.push_back(a);
            }
          }
          next.insert(next.end(), ahead.begin(), ahead.end());
          return next;
        },
        {.label = "positions", .iv = "t"});
    // Per head m, l (from a lane holding them), then the lane's accumulators.
    std::vector<Value> st;
    for (unsigned g = 0; g < G; ++g) {
      st.push_back(kb.shfl(Mod::Idx, out[0], g << shift, "m_head"));
      st.push_back(kb.shfl(Mod::Idx, out[1], g << shift, "l_head"));
      st.insert(st.end(), out.begin() + 2 + g * n, out.begin() + 2 + (g + 1) * n);
    }
    return st;
  };
  std::vector<Value> st = kb.if_else(vec, [&] { return run(true); }, [&] { return run(false); }, {.label = "path"});

  // The warps' states through shared memory; then the block's threads write the group's outputs,
  // element e = tid + 128 j being element d = l * n + i of head g for l = e % 32, i = e / 32 % n,
  // g = e / (32 n): consecutive threads read consecutive words.
  const unsigned per = 2 + n;
  Value accBase = kb.shared_addr(shAcc, "acc_base");
  for (unsigned g = 0; g < G; ++g) {
    kb.if_then((lane == 0u).named("lane0"), [&] {
      kb.store(kb.index(kb.shared_addr(shM), (warp * G + g).named("slot"), 4), st[g * per]);
      kb.store(kb.index(kb.shared_addr(shL), (warp * G + g).named("slot"), 4), st[g * per + 1]);
    }, "state");
    // Element i of lane l at i * 32 + l: the stores of a warp fall in 32 banks.
    Value at = ((warp * G + g) * c.dim + lane).named("acc_slot");
    for (unsigned i = 0; i < n; ++i) kb.store(kb.index(accBase, at + i * 32, 4), st[g * per + 2 + i]);
  }
  kb.bar_sync();
  // The heads of the group among the block's: elements past them belong to idle heads.
  Value elems = padded ? (kb.min(kb.u32(G), kb.u32(c.group) - part * G) * c.dim).named("out_elems") : kb.u32(G * c.dim);
  for (unsigned j = 0; j * kBlock < G * c.dim; ++j) {
    Value e = (tid + j * kBlock).named("out_elem");
    kb.if_then((e < elems).named("has_elem"), [&] {
      Value ln = (e & 31u).named("l"), i = ((e >> 5u) % n).named("i"), g = (e / (32 * n)).named("g");
      // The lane's element i of o (vPieces: with mla, 8 of each 256).
      Value d = c.mla ? ((i >> 3u) * 256u + ln * 8u + (i & 7u)).named("d") : (ln * n + i).named("d");
      std::vector<Value> ms, ls, as;
      for (unsigned w = 0; w < kWarps; ++w) {
        Value slot = (g + w * G).named("slot");
        ms.push_back(kb.load(kb.index(kb.shared_addr(shM), slot, 4), Type::f32(), "wm"));
        ls.push_back(kb.load(kb.index(kb.shared_addr(shL), slot, 4), Type::f32(), "wl"));
        as.push_back(kb.load(kb.index(accBase, (slot * c.dim + i * 32u + ln).named("acc_slot"), 4), Type::f32(), "wa"));
      }
      Value mAll = ms[0];
      for (unsigned w = 1; w < kWarps; ++w) mAll = kb.max(mAll, ms[w], "m_all");
      Value ref = refOf(kb, mAll);
      Value l = kb.f32(0.0f), a = kb.f32(0.0f);
      for (unsigned w = 0; w < kWarps; ++w) {
        Value f = ex2Approx(kb, ms[w] - ref, "f");
        l = kb.fma(ls[w], f, l, "l_all");
        a = kb.fma(as[w], f, a, "acc_all");
      }
      // An empty split: l = 0, output 0 and log2-sum-exp -inf (lg2 of 0).
      // fp8 V: its values are v_scale times the codes', which were read as 2^-bias times theirs (a
      // product of the two scales could overflow).
      if (rawScale != 1.0f) a = (a * rawScale).named("acc_all");
      if (fp8) a = (a * vScale).named("acc_all");
      Value out = kb.select(l > 0.0f, a * rcpApprox(kb, l), kb.f32(0.0f), "o_split");
      Value qh = (first + g).named("q_head");
      Value slotRow = ((kb.mul_wide(b, qHeads) + kb.cvt(qh, Type::u64())) * kb.cvt(splits, Type::u64()) +
                       kb.cvt(split, Type::u64()))
                          .named("split_row");
      kb.store(kb.index(partial, (slotRow * c.dim + kb.cvt(d, Type::u64())).named("p_elem"), 4), out);
      kb.if_then((d == 0u).named("d0"), [&] { kb.store(kb.index(stats, slotRow, 4), ref + kb.lg2(l, "log_l")); },
                 "lse");
    }, "out");
  }
  kb.ret();
  return finish(kb, m, diags);
}

std::optional<ir::Module> buildMerge(const Options& o, ir::Diagnostics& diags) {
  const Config c = configOf(o);
  ir::Module m = newModule();
  if (!checkConfig(c, true, diags)) return std::nullopt;
  KernelBuilder kb(m, "attention_decode_merge");
  Value partial = kb.param(kGlobalPtr, "partial");
  Value stats = kb.param(kGlobalPtr, "stats");
  Value out = kb.param(kGlobalPtr, "o");
  const bool sinks = o.flag("sinks");
  Value sinkPtr = sinks ? kb.param(kGlobalPtr, "sinks") : Value();
  kb.param(Type::u32(), "batch");  // the grid's y extent
  Value qHeads = kb.param(Type::u32(), "q_heads");
  Value splits = kb.param(Type::u32(), "splits");
  kb.reqntid(kBlock);
  const unsigned n = c.perLane();

  Value tid = kb.tid(Mod::X, "tid");
  Value lane = (tid & 31u).named("lane");
  Value qh = kb.mad(kb.ctaid(Mod::X), kb.u32(kWarps), tid >> 5u, "q_head");
  Value b = kb.ctaid(Mod::Y, "seq");
  // The warp's (sequence, head) is uniform across it: no collective below, but the loops are.
  kb.if_then((qh < qHeads).named("has_head"), [&] {
    Value row = (kb.mul_wide(b, qHeads) + kb.cvt(qh, Type::u64())).named("head_row");
    Value first = (row * kb.cvt(splits, Type::u64())).named("first_split");
    // With sinks, the head's sink is one more logit without a value: in the log2 domain of the
    // splits' sums, sink · log2 e, a weight of its own in the denominator (-inf: none).
    Value sink = sinks ? (kb.load(kb.index(sinkPtr, qh, 4), Type::f32(), {Mod::NcMod}, "sink") * kLog2e).named("sink_l2")
                       : negInf(kb);
    Value mAll = kb.for_range(kb.u32(0), splits, kb.u32(1), {sink}, [&](Value s, std::span<Value> mm) {
      Value lse = kb.load(kb.index(stats, first + kb.cvt(s, Type::u64()), 4), Type::f32(), {Mod::NcMod}, "lse");
      return std::vector<Value>{kb.max(mm[0], lse, "m")};
    }, {.label = "max", .iv = "s"})[0];
    Value ref = refOf(kb, mAll);
    std::vector<Value> init(n + 1, kb.f32(0.0f));
    if (sinks) init[0] = ex2Approx(kb, sink - ref, "sink_weight");
    Value laneOff = kb.cvt((lane * n).named("lane_elem"), Type::u64());
    std::vector<Value> sum = kb.for_range(kb.u32(0), splits, kb.u32(1), init, [&](Value s, std::span<Value> acc) {
      Value at = (first + kb.cvt(s, Type::u64())).named("split_row");
      Value f = ex2Approx(kb, kb.load(kb.index(stats, at, 4), Type::f32(), {Mod::NcMod}, "lse") - ref, "w");
      std::vector<Value> next{acc[0] + f};
      Value base = kb.index(partial, (at * c.dim + laneOff).named("p_elem"), 4, "p_slice");
      for (unsigned i = 0; i < n; ++i) {
        Value p = i == 0 ? base : kb.ptradd(base, kb.u64(4 * i));
        next.push_back(kb.fma(f, kb.load(p, Type::f32(), {Mod::NcMod}, "o_split"), acc[i + 1]));
      }
      return next;
    }, {.label = "combine", .iv = "s"});
    Value inv = kb.select(sum[0] > 0.0f, rcpApprox(kb, sum[0]), kb.f32(0.0f), "inv");
    Value dst = kb.index(out, (row * c.dim + laneOff).named("o_elem"), bytesOf(c.s), "o_slice");
    for (unsigned i = 0; i < n; ++i)
      storeF32(kb, i == 0 ? dst : kb.ptradd(dst, kb.u64(i * bytesOf(c.s))), sum[i + 1] * inv, c.s);
  }, "head");
  kb.ret();
  return finish(kb, m, diags);
}

OptionSpec dimOption(bool merge) {
  return intOption("head_dim", 128, 64, 512,
                   merge ? "elements per head of o: 64, 128, 256 or 512 (mla's)"
                         : "elements per head: 64, 128 or 256; with mla the latent rank, 256 or 512",
                   64);
}

OptionSpec groupOption() {
  return intOption("group", 1, 1, kMaxGroup,
                   "query heads per kv head (grouped-query attention); a block takes up to " +
                       std::to_string(kMaxHeadElems / 2) + " / head_dim of them (mla: 1 at 512, 3 at 256), one read "
                       "of K and V for them all: larger groups are shared by ceil(group / that) blocks (grid x "
                       "kv_heads times that), each reading the kv head's K and V");
}

}  // namespace

void addAttention(std::vector<Template>& out) {
  const std::string storage = "storage type of q, the caches and o; math is f32";
  out.push_back({
      "attention_decode",
      "decode attention, pass 1: one query token per sequence against its KV cache rows [offsets[b], offsets[b] + "
      "lengths[b]) (each row kv_heads x head_dim), or with page_size its pages' rows (position t in row t % page_size "
      "of page block_table[b * max_pages + t / page_size]), grouped-query heads sharing one read of K and V, split "
      "along the sequence: block (kv head, split, sequence) writes its normalized output and log2-sum-exp to the f32 "
      "workspace partial [batch, q_heads, splits, head_dim] and stats [batch, q_heads, splits]",
      {dtypeOption("dtype", storage), dimOption(false), groupOption(),
       pageSizeOption("cache rows per page: 0 for contiguous rows from offsets[b]; a power of two for a paged "
                      "cache read through block_table and max_pages"),
       option("window", false,
              "sliding-window attention: the u32 parameter window (after scale) keeps the last window positions "
              "of each sequence (the query's own included; 0: all of them), so one kernel serves a model's local "
              "and global layers; split s then covers positions from max(length - window, 0) + s * split_len, so "
              "ceil(min(length, window) / split_len) splits suffice"),
       option("softcap", false,
              "logit soft-capping (Gemma 2): the f32 parameter softcap (after scale and window; 0: no cap) turns "
              "each scaled score s into softcap * tanh(s / softcap) before the softmax"),
       option("alibi", false,
              "ALiBi position biases: the f32 [q_heads] parameter alibi_slopes (after stats) adds "
              "-alibi_slopes[h] * (length - 1 - t) to query head h's scaled (and capped) score of position t"),
       cacheDtypeOption("what the caches hold: auto (dtype), or fp8_e4m3 / fp8_e5m2 codes (u8, as kv_scatter "
                        "writes them) whose values are times the f32 parameters k_scale and v_scale (after scale)"),
       fp8DecodeOption(),
       option("mla", false,
              "multi-head latent attention, absorbed (DeepSeek-V2/V3's, Kimi K2's: heads sharing a latent cache): "
              "q and k_cache rows of head_dim + 64 elements (the latent part, then the rope part: q_nope absorbed "
              "and q_pe, c_kv and k_pe), V the first head_dim elements of each k_cache row (no v_cache parameter), "
              "o and partial head_dim elements a head; head_dim 256 or 512 (kv_lora_rank)")},
      buildDecode,
      [](const Options& o) {
        const uint64_t blocks = configOf(o).blocks();
        const Expr x = blocks > 1 ? Expr::param("kv_heads") * blocks : Expr::param("kv_heads");
        return LaunchRule{{kBlock}, {x, Expr::param("splits"), Expr::param("batch")}, 0};
      },
      [](const Options& o) { return fp8DecodeWhereItRuns(o, cacheDtype(o)); },
  });
  out.back().elements =
      allElements({storageElements({"q"}), cacheElements({"k_cache", "v_cache"}),
                   u32Elements({"offsets", "lengths", "block_table"})});
  // The caches' rows are as many as the sequences' largest end (or the pages'), which no parameter says.
  out.back().extents = [](const Options& o) {
    const Expr batch = Expr::param("batch"), splits = Expr::param("splits"), dim(static_cast<uint64_t>(o.integer("head_dim")));
    const Expr heads = Expr::param("kv_heads") * static_cast<uint64_t>(o.integer("group"));
    const Expr qDim(static_cast<uint64_t>(configOf(o).kdim()));
    return Template::Extents{{"q", batch * heads * qDim},           {"offsets", batch},
                             {"lengths", batch},                   {"block_table", batch * Expr::param("max_pages")},
                             {"partial", batch * heads * splits * dim}, {"stats", batch * heads * splits},
                             {"alibi_slopes", heads}};
  };
  out.push_back({
      "attention_decode_merge",
      "decode attention, pass 2: o [batch, q_heads, head_dim] from attention_decode's splits (softmax-weighted by "
      "their log2-sum-exp); a sequence without positions gets zeros; one warp per (sequence, query head)",
      {dtypeOption("dtype", storage), dimOption(true),
       option("sinks", false,
              "attention sinks (gpt-oss): the f32 [q_heads] pointer sinks (after o) holds a logit per query head, "
              "in the scaled scores' units, that joins the softmax without a value: its weight e^(sinks[h]) is "
              "added to the splits' sums; -inf is no sink")},
      buildMerge,
      [](const Options&) {
        return LaunchRule{{kBlock}, {ceilDiv(Expr::param("q_heads"), kWarps), Expr::param("batch")}, 0};
      },
  });
  out.back().elements = storageElements({"o"});
  out.back().extents = [](const Options& o) {
    const Expr rows = Expr::param("batch") * Expr::param("q_heads"), dim(static_cast<uint64_t>(o.integer("head_dim")));
    return Template::Extents{{"partial", rows * Expr::param("splits") * dim},
                             {"stats", rows * Expr::param("splits")},
                             {"o", rows * dim},
                             {"sinks", Expr::param("q_heads")}};
  };
}

}  // namespace tn::kernels::lib
