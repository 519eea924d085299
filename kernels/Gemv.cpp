// gemv: y = W x for a row-major m x k matrix W (f32, bf16 or f16) and vectors x, y (f32, bf16 or
// f16; f32 math), optionally with rows ldw elements apart and a batch of (W, x, y) triples
// (docs/kernels.md). Memory-bound on W, so one warp owns a row: its lanes stream the row in 16-byte
// vectors, several loads in flight per lane, x (shared by every row) comes from L1/L2, and a warp
// reduction ends the row. The vector path needs the row and x 16-byte aligned and k a multiple of
// a vector's elements; otherwise the same warp reads the row element by element. fp8 weights
// (E4M3 or E5M2 codes, kernels/Fp8.cpp) are decoded as they are loaded and the row's sum scaled
// once: by the f32 parameter w_scale (one per tensor) or by w_scales[row] (one per row).
#include <limits>
#include <string>

#include "kernels/Library.h"

namespace tn::kernels::lib {

namespace {

using ir::Mod;
using ir::Type;

constexpr unsigned kBlock = 256;
constexpr unsigned kRowsPerBlock = kBlock / 32;
// 16-byte vectors of W each lane loads per main-loop iteration: enough bytes in flight per SM to
// cover DRAM latency at the occupancy this kernel gets.
constexpr unsigned kUnroll = 4;
// Left to itself ptxas aims at ~40 registers and sinks all but one of an iteration's W loads
// below the first FFMA. Asking for 3 resident blocks (a limit of 80 registers) lets it issue all
// of them first; it settles at 48 (f32) or 64 (bf16) registers: 4 or 5 blocks per SM
// (docs/performance.md, "Machine code").
constexpr unsigned kMinBlocksPerSM = 3;

struct Config {
  Storage w, x;  // weight (not with fp8 weights); x and y
  bool strided, batched;
  Fp8 fp8 = Fp8::None;  // fp8 weights: codes, scaled by w_scale or w_scales
  bool rowScales = false;  // fp8: one scale per row (the pointer w_scales) instead of w_scale
  bool cvt = false;        // fp8 codes decoded by cvt.f16x2, else by integer instructions
  bool experts = false;    // mixture of experts: a block row per (token, slot) pair, its expert's w
  bool bias = false;       // f32 bias[i] added to y[i] (with experts, the pair's expert's row)
  unsigned wBytes() const { return fp8 == Fp8::None ? bytesOf(w) : 1; }
  unsigned perVec() const { return 16 / wBytes(); }  // weights in one 16-byte vector
};

Fp8 weightFp8(const Options& o) { return fp8Named(o.text("weight")); }

Config configOf(const Options& o) {
  return {storageOption(o, "weight"), storageOption(o, "activation"), o.flag("strided"), o.flag("batched"),
          weightFp8(o), o.flag("row_scales"), fp8Cvt(o), o.flag("experts"), o.flag("bias")};
}

// W is read exactly once: evict-first (.cs) keeps it from pushing x out of L1 and L2.
Value loadW(KernelBuilder& kb, Value ptr, Type t, std::string_view name) {
  return kb.load(ptr, t, {Mod::Cs, Mod::NcMod}, name);
}

// One 16-byte vector of W (vector index v of the row) and the x elements it multiplies, as
// loaded values; split from dotVector so that a main-loop iteration issues all its loads first.
struct Loaded {
  Value w;
  std::vector<Value> x;  // the loads of x: 16-byte pieces, or 8 bytes of 16-bit x for f32 W
};

Loaded loadVector(KernelBuilder& kb, const Config& c, Value wrow, Value x, Value v) {
  Loaded l;
  Type wt = Type::of(c.w == Storage::F32 && c.fp8 == Fp8::None ? ir::Scalar::F32 : ir::Scalar::U32, 4);
  l.w = loadW(kb, kb.index(wrow, v, 16, "pw"), wt, "w.v");
  const unsigned xBytes = c.perVec() * bytesOf(c.x);  // 8, 16, 32 or (fp8 weights) 64
  if (xBytes == 8) {
    l.x.push_back(kb.load(kb.index(x, v, 8, "px"), Type::of(ir::Scalar::U32, 2), {Mod::NcMod}, "x.v"));
    return l;
  }
  Type xt = Type::of(c.x == Storage::F32 ? ir::Scalar::F32 : ir::Scalar::U32, 4);
  Value px = kb.index(x, v, xBytes, "px");
  for (unsigned piece = 0; piece < xBytes / 16; ++piece)
    l.x.push_back(kb.load(piece == 0 ? px : kb.ptradd(px, kb.u64(16 * piece)), xt, {Mod::NcMod}, "x.v"));
  return l;
}

// The f32 values of loaded words: f32 lanes as they are, 16-bit pairs widened (exactly).
std::vector<Value> widen(KernelBuilder& kb, Value v, Storage s) {
  if (s != Storage::F32) return unpackHalves(kb, v, s);
  std::vector<Value> out;
  for (unsigned i = 0; i < v.type().lanes; ++i) out.push_back(kb.extract(v, i));
  return out;
}

// The f32 values of a loaded vector of W: fp8 codes decoded (their values, or times 2^-bias).
std::vector<Value> weights(KernelBuilder& kb, const Config& c, Value v) {
  if (c.fp8 == Fp8::None) return widen(kb, v, c.w);
  std::vector<Value> out;
  for (unsigned i = 0; i < 4; ++i)
    for (Value x : decodeCodes(kb, kb.extract(v, i), 4, c.fp8, c.cvt, "w")) out.push_back(x);
  return out;
}

// acc + the products of one loaded vector pair.
Value dotVector(KernelBuilder& kb, const Config& c, const Loaded& l, Value acc) {
  std::vector<Value> wv = weights(kb, c, l.w), xv;
  for (Value piece : l.x)
    for (Value e : widen(kb, piece, c.x)) xv.push_back(e);
  for (size_t i = 0; i < wv.size(); ++i) acc = kb.fma(wv[i], xv[i], acc);
  return acc;
}

std::optional<ir::Module> buildGemv(const Options& o, ir::Diagnostics& diags) {
  const Config c = configOf(o);
  const bool fp8 = c.fp8 != Fp8::None;
  std::string why;
  if (c.rowScales && !fp8) why = "row_scales needs fp8 weights (weight = \"fp8_e4m3\" or \"fp8_e5m2\")";
  else if (fp8 && c.batched) why = "fp8 weights do not take batched (one scale, or one row of scales, for every batch)";
  else if (c.experts && c.batched) why = "experts does not go with batched: its pairs take the grid's height";
  else if (c.bias && c.batched) why = "bias does not go with batched (one bias for every batch would be a guess)";
  if (!why.empty()) {
    diags.report(ir::Severity::Error, "", {}, why);
    return std::nullopt;
  }
  if (!checkFp8Decode(o, c.fp8, diags)) return std::nullopt;
  ir::Module m = newModule();
  if (c.cvt) m.ptx = kFp8CvtPtx;
  KernelBuilder kb(m, "gemv");
  Value w = kb.param(kGlobalPtr, "w");
  Value x = kb.param(kGlobalPtr, "x");
  Value y = kb.param(kGlobalPtr, "y");
  Value wScales = c.rowScales ? kb.param(kGlobalPtr, "w_scales") : Value();
  Value bias = c.bias ? kb.param(kGlobalPtr, "bias") : Value();
  Value ids = c.experts ? kb.param(kGlobalPtr, "ids") : Value();
  Value rows = kb.param(Type::u32(), "m");
  Value k = kb.param(Type::u32(), "k");
  Value ldw = c.strided ? kb.param(Type::u32(), "ldw") : k;
  Value wScale = fp8 && !c.rowScales ? kb.param(Type::f32(), "w_scale") : Value();
  const unsigned bytes = c.wBytes(), xBytes = bytesOf(c.x), perVec = c.perVec();
  // Mixture of experts (as gemv_q's experts): block row y is pair p, which multiplies expert
  // ids[p] (rows e * m ... of w, and of w_scales) by x's row p / slots into y's row p; an id past
  // n_experts reads nothing and gives a row of NaN (`known`).
  Value known;
  if (c.experts) {
    const ExpertPair e = expertPair(kb, ids);
    known = e.known;
    Value firstRow = (e.expert * rows).named("expert_row");
    w = kb.index(w, kb.mul_wide(firstRow, ldw), bytes, "expert_w");
    if (c.rowScales) wScales = kb.index(wScales, firstRow, 4, "expert_scales");
    if (c.bias) bias = kb.index(bias, firstRow, 4, "expert_bias");
    x = kb.index(x, kb.mul_wide(e.xRow, k), xBytes, "pair_x");
    y = kb.index(y, kb.mul_wide(e.pair, rows), xBytes, "pair_y");
  }
  if (c.batched) {
    kb.param(Type::u32(), "batch");  // the grid's y extent
    Value strideW = kb.param(Type::u32(), "stride_w");
    Value strideX = kb.param(Type::u32(), "stride_x");
    Value strideY = kb.param(Type::u32(), "stride_y");
    Value z = kb.ctaid(Mod::Y, "batch_index");
    w = kb.index(w, kb.mul_wide(z, strideW), bytes, "w_batch");
    x = kb.index(x, kb.mul_wide(z, strideX), xBytes, "x_batch");
    y = kb.index(y, kb.mul_wide(z, strideY), xBytes, "y_batch");
  }
  kb.reqntid(kBlock);
  kb.minnctapersm(kMinBlocksPerSM);

  Value tid = kb.tid(Mod::X, "tid");
  Value lane = (tid & 31u).named("lane");
  Value row = kb.mad(kb.ctaid(Mod::X), kb.u32(kRowsPerBlock), tid >> 5u, "row");
  // The whole warp shares the row, so the branch is warp-uniform and the shuffles stay converged.
  kb.if_then(
      (row < rows).named("has_row"),
      [&] {
        Value wrow = kb.index(w, kb.mul_wide(row, ldw, "row_off"), bytes, "wrow");
        Value whole = ((k & (perVec - 1)) == 0u).named("whole_vectors");
        // Without ldw, every row starts aligned when w does (k a multiple of perVec).
        Value vector = (allAligned(kb, {c.strided ? wrow : w, x}, 16) & whole).named("vector");
        Value zero = kb.f32(0.0f, "zero");
        auto products = [&] {
          return kb.if_else(
              vector,
              [&] {
                Value wa = assumeAligned16(kb, wrow, "wrow.a"), xa = assumeAligned16(kb, x, "x.a");
                Value nvec = (k / perVec).named("nvec");
                constexpr unsigned chunk = 32 * kUnroll;
                Value nmain = (nvec - nvec % chunk).named("nmain");
                std::vector<Value> init(kUnroll, zero);
                std::vector<Value> accs = kb.for_range(
                    kb.u32(0), nmain, kb.u32(chunk), init,
                    [&](Value base, std::span<Value> acc) {
                      Value v0 = (base + lane).named("v");
                      std::vector<Loaded> loads;
                      for (unsigned j = 0; j < kUnroll; ++j)
                        loads.push_back(loadVector(kb, c, wa, xa, j == 0 ? v0 : v0 + 32u * j));
                      std::vector<Value> next;
                      for (unsigned j = 0; j < kUnroll; ++j) next.push_back(dotVector(kb, c, loads[j], acc[j]));
                      return next;
                    },
                    {.label = "main", .iv = "base", .carried = {"a0", "a1", "a2", "a3"}});
                Value acc = ((accs[0] + accs[1]) + (accs[2] + accs[3])).named("acc.main");
                // The last nvec % chunk vectors, one per lane per step.
                return kb.for_range(
                    nmain + lane, nvec, kb.u32(32), {acc},
                    [&](Value v, std::span<Value> a) { return dotVector(kb, c, loadVector(kb, c, wa, xa, v), a[0]); },
                    {.label = "tail", .iv = "v", .carried = {"acc"}})[0];
              },
              [&] {
                return kb.for_range(
                    lane, k, kb.u32(32), {zero},
                    [&](Value j, std::span<Value> a) {
                      Value pw = kb.index(wrow, j, bytes, "pw");
                      Value wj = fp8 ? decodeCodes(kb,
                                                   kb.cvt(kb.load(pw, Type::of(ir::Scalar::U8), {Mod::NcMod}, "code"),
                                                          Type::u32()),
                                                   1, c.fp8, c.cvt, "wj")[0]
                                     : loadF32(kb, pw, c.w, true, "wj");
                      Value xj = loadF32(kb, kb.index(x, j, xBytes, "px"), c.x, true, "xj");
                      return kb.fma(wj, xj, a[0]);
                    },
                    {.label = "scalar", .iv = "j", .carried = {"acc"}})[0];
              },
              {.label = "path", .results = {"partial"}});
        };
        Value nan = kb.f32(std::numeric_limits<float>::quiet_NaN(), "nan");
        // An unknown expert's row: NaN, and neither its weights nor its scale read.
        auto ifKnown = [&](auto&& fn) {
          return c.experts ? kb.if_else(known, fn, [&] { return nan; }, {.label = "expert"})[0] : fn();
        };
        Value total = kb.warp_reduce_sum(ifKnown([&] { return products()[0]; }), "total");
        if (fp8) {
          // Integer-decoded codes are their values times 2^-bias: the sum, times 2^bias (exact), is
          // the codes' dot product, then scaled (two products: 2^bias times the scale could overflow).
          const float rawScale = fp8Scale(c.fp8, c.cvt);
          if (rawScale != 1.0f) total = (total * rawScale).named("total");
          Value scale = c.rowScales ? ifKnown([&] {
            return kb.load(kb.index(wScales, row, 4), Type::f32(), {Mod::NcMod}, "w_scale");
          }) : wScale;
          total = (total * scale).named("total");
        }
        kb.if_then(
            (lane == 0u).named("first"),
            [&] {
              if (c.bias) total = total + kb.load(kb.index(bias, row, 4), Type::f32(), {Mod::NcMod}, "bias");
              storeF32(kb, kb.index(y, row, xBytes, "py"), total, c.x);
            },
            "write");
      },
      "row");
  kb.ret();
  return finish(kb, m, diags);
}

}  // namespace

void addGemv(std::vector<Template>& out) {
  static_assert(kUnroll == 4, "the main loop names four accumulators");
  out.push_back({
      "gemv",
      "y[i] = sum_j w[i*ldw + j] * x[j] for row-major w (m x k; ldw = k unless strided) and vectors x (k), y (m); "
      "f32 products and accumulation; one warp per row, " +
          std::to_string(kRowsPerBlock) + " rows per block of " + std::to_string(kBlock) +
          " threads; 16-byte loads when the row and x are 16-byte aligned and k * bytes(weight) is a multiple of 16",
      {choiceOption("weight", "f32", {"f32", "bf16", "f16", "fp8_e4m3", "fp8_e5m2"},
                    "storage type of w; fp8_e4m3 / fp8_e5m2: codes (u8) whose values are times the f32 parameter "
                    "w_scale (after k, and ldw), or with row_scales times w_scales[i]"),
       dtypeOption("activation", "storage type of x and y (y rounded to nearest from the f32 sum)"),
       option("strided", false, "rows of w ldw elements apart (a u32 parameter after k, at least k)"),
       option("batched", false,
              "batch triples (w, x, y) in one launch (grid y = batch): u32 parameters batch, stride_w, stride_x, "
              "stride_y after k (and ldw), the elements between consecutive w, x and y (not with fp8 weights)"),
       option("row_scales", false,
              "with fp8 weights: one f32 scale per row, the pointer w_scales [m] after y (per-channel scales), "
              "instead of w_scale"),
       option("experts", false,
              "mixture of experts (decode): w holds n_experts matrices of m rows one after another (and w_scales "
              "their rows' scales); block row p < pairs multiplies expert ids[p] by x's row p / slots into y's row "
              "p (the pointer ids after y and w_scales, u32 n_experts, pairs and slots last; an id >= n_experts "
              "gives a row of NaN and reads no weights); not with batched"),
       option("bias", false,
              "add bias[i] (f32, the pointer bias after y and w_scales, m values; with experts n_experts x m, the "
              "pair's expert's row) to the sum before y's rounding; not with batched"),
       fp8DecodeOption()},
      buildGemv,
      [](const Options& o) {
        LaunchRule r{{kBlock}, {ceilDiv(Expr::param("m"), kRowsPerBlock)}, 0};
        if (o.flag("batched")) r.grid.push_back(Expr::param("batch"));
        if (o.flag("experts")) r.grid.push_back(Expr::param("pairs"));
        return r;
      },
      [](const Options& o) { return fp8DecodeWhereItRuns(o, weightFp8(o)); },
  });
  out.back().elements = allElements({[](const Options& o) {
                                       const Fp8 f = weightFp8(o);
                                       return Template::ElementTypes{
                                           {"w", f != Fp8::None ? fp8Element(f) : scalarOf(storageOption(o, "weight"))}};
                                     },
                                     storageElements({"x", "y"}, "activation"), u32Elements({"ids"}),
                                     [](const Options&) { return Template::ElementTypes{{"bias", ir::Scalar::F32}}; }});
  out.back().extents = [](const Options& o) {
    const Expr m = Expr::param("m"), k = Expr::param("k");
    if (o.flag("experts")) {  // every expert's rows as one matrix of n_experts * m rows
      const Expr pairs = Expr::param("pairs"), rowsAll = Expr::param("n_experts") * m;
      return Template::Extents{
          {"w", o.flag("strided") ? stridedSpan({{rowsAll, Expr::param("ldw")}}, k) : rowsAll * k},
          {"x", ceilDiv(pairs, max(Expr::param("slots"), Expr(1))) * k},
          {"y", pairs * m},
          {"w_scales", rowsAll},
          {"bias", rowsAll},
          {"ids", pairs}};
    }
    std::vector<std::pair<Expr, Expr>> rows;
    if (o.flag("batched")) rows.push_back({Expr::param("batch"), Expr::param("stride_w")});
    if (o.flag("strided")) rows.push_back({m, Expr::param("ldw")});
    Expr w = rows.empty() ? m * k : stridedSpan(rows, o.flag("strided") ? k : m * k);
    if (!o.flag("batched")) return Template::Extents{{"w", w}, {"x", k}, {"y", m}, {"w_scales", m}, {"bias", m}};
    const Expr batch = Expr::param("batch");
    return Template::Extents{{"w", w},
                             {"x", stridedSpan({{batch, Expr::param("stride_x")}}, k)},
                             {"y", stridedSpan({{batch, Expr::param("stride_y")}}, m)}};
  };
}

}  // namespace tn::kernels::lib
