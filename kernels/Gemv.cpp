// gemv: y = W x for a row-major m x k matrix W (f32 or bf16) and f32 vectors (docs/kernels.md).
// Memory-bound on W, so one warp owns a row: its lanes stream the row in 16-byte vectors, several
// loads in flight per lane, x (shared by every row) comes from L1/L2, and a warp reduction ends
// the row. The vector path needs w and x 16-byte aligned and every row starting aligned
// (k * bytes a multiple of 16); otherwise the same warp reads the row element by element.
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

// W is read exactly once: evict-first (.cs) keeps it from pushing x out of L1 and L2.
Value loadW(KernelBuilder& kb, Value ptr, Type t, std::string_view name) {
  return kb.load(ptr, t, {Mod::Cs, Mod::NcMod}, name);
}

// One 16-byte vector of W (vector index v of the row) and the x elements it multiplies, as
// loaded values; split from dotVector so that a main-loop iteration issues all its loads first.
struct Loaded {
  Value w;
  std::vector<Value> x;  // 16-byte pieces of f32 x
};

Loaded loadVector(KernelBuilder& kb, Value wrow, Value x, Value v, Storage s) {
  Loaded l;
  Type wt = Type::of(s == Storage::F32 ? ir::Scalar::F32 : ir::Scalar::U32, 4);
  l.w = loadW(kb, kb.index(wrow, v, 16, "pw"), wt, "w.v");
  unsigned pieces = vecElems(s) / 4;
  Value px = kb.index(x, v, 16 * pieces, "px");
  for (unsigned piece = 0; piece < pieces; ++piece) {
    Value p = piece == 0 ? px : kb.ptradd(px, kb.u64(16 * piece));
    l.x.push_back(kb.load(p, Type::of(ir::Scalar::F32, 4), {Mod::NcMod}, "x.v"));
  }
  return l;
}

// acc + the products of one loaded vector pair.
Value dotVector(KernelBuilder& kb, const Loaded& l, Storage s, Value acc) {
  std::vector<Value> wv;
  for (unsigned i = 0; i < 4; ++i) {
    Value e = kb.extract(l.w, i);
    if (s == Storage::F32) {
      wv.push_back(e);
    } else {
      // bf16 widens exactly: its bits are the high half of the f32.
      wv.push_back(kb.bitcast(e << 16u, Type::f32()));
      wv.push_back(kb.bitcast(e & 0xFFFF0000u, Type::f32()));
    }
  }
  for (size_t i = 0; i < wv.size(); ++i) acc = kb.fma(wv[i], kb.extract(l.x[i / 4], i % 4), acc);
  return acc;
}

std::optional<ir::Module> buildGemv(const Options& o, ir::Diagnostics& diags) {
  Storage s = storageOption(o, "weight");
  ir::Module m = newModule();
  KernelBuilder kb(m, "gemv");
  Value w = kb.param(kGlobalPtr, "w");
  Value x = kb.param(kGlobalPtr, "x");
  Value y = kb.param(kGlobalPtr, "y");
  Value rows = kb.param(Type::u32(), "m");
  Value k = kb.param(Type::u32(), "k");
  kb.reqntid(kBlock);
  kb.minnctapersm(kMinBlocksPerSM);

  Value tid = kb.tid(Mod::X, "tid");
  Value lane = (tid & 31u).named("lane");
  Value row = kb.mad(kb.ctaid(Mod::X), kb.u32(kRowsPerBlock), tid >> 5u, "row");
  // The whole warp shares the row, so the branch is warp-uniform and the shuffles stay converged.
  kb.if_then(
      (row < rows).named("has_row"),
      [&] {
        unsigned bytes = bytesOf(s), perVec = vecElems(s);
        Value wrow = kb.index(w, kb.mul_wide(row, k, "row_off"), bytes, "wrow");
        Value rowAligned = ((k & (perVec - 1)) == 0u).named("row_aligned");
        Value vector = (allAligned(kb, {w, x}, 16) & rowAligned).named("vector");
        Value zero = kb.f32(0.0f, "zero");
        std::vector<Value> sum = kb.if_else(
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
                      loads.push_back(loadVector(kb, wa, xa, j == 0 ? v0 : v0 + 32u * j, s));
                    std::vector<Value> next;
                    for (unsigned j = 0; j < kUnroll; ++j) next.push_back(dotVector(kb, loads[j], s, acc[j]));
                    return next;
                  },
                  {.label = "main", .iv = "base", .carried = {"a0", "a1", "a2", "a3"}});
              Value acc = ((accs[0] + accs[1]) + (accs[2] + accs[3])).named("acc.main");
              // The last nvec % chunk vectors, one per lane per step.
              return kb.for_range(
                  nmain + lane, nvec, kb.u32(32), {acc},
                  [&](Value v, std::span<Value> a) { return dotVector(kb, loadVector(kb, wa, xa, v, s), s, a[0]); },
                  {.label = "tail", .iv = "v", .carried = {"acc"}})[0];
            },
            [&] {
              return kb.for_range(
                  lane, k, kb.u32(32), {zero},
                  [&](Value j, std::span<Value> a) {
                    Value wj = loadF32(kb, kb.index(wrow, j, bytes, "pw"), s, true, "wj");
                    Value xj = kb.load(kb.index(x, j, 4, "px"), Type::f32(), {Mod::NcMod}, "xj");
                    return kb.fma(wj, xj, a[0]);
                  },
                  {.label = "scalar", .iv = "j", .carried = {"acc"}})[0];
            },
            {.label = "path", .results = {"partial"}});
        Value total = kb.warp_reduce_sum(sum[0], "total");
        kb.if_then((lane == 0u).named("first"), [&] { kb.store(kb.index(y, row, 4, "py"), total); }, "write");
      },
      "row");
  kb.ret();
  return finish(kb, m, diags);
}

}  // namespace

void addGemv(std::vector<Template>& out) {
  static_assert(kUnroll == 4, "the main loop names four accumulators");
  OptionSpec weight;
  weight.name = "weight";
  weight.type = OptionType::String;
  weight.defaultValue = std::string("f32");
  weight.doc = "storage type of w (x and y are f32; accumulation is f32)";
  weight.choices = {"f32", "bf16"};
  out.push_back({
      "gemv",
      "y[i] = sum_j w[i*k + j] * x[j] for row-major w (m x k, f32 or bf16) and f32 x, y; one warp per row, " +
          std::to_string(kRowsPerBlock) + " rows per block of " + std::to_string(kBlock) +
          " threads; 16-byte loads when w and x are 16-byte aligned and k * bytes(weight) is a multiple of 16",
      {weight},
      buildGemv,
      [](const Options&) {
        return LaunchRule{{kBlock}, {ceilDiv(Expr::param("m"), kRowsPerBlock)}, 0};
      },
  });
}

}  // namespace tn::kernels::lib
