// Row kernels that move data rather than reduce it to statistics: argmax over each row,
// a tiled transpose, and the KV-cache scatter of decode/prefill (docs/kernels.md).
#include "kernels/Library.h"

#include <string>

namespace tn::kernels::lib {

using ir::AddrSpace;
using ir::Mod;
using ir::Scalar;
using ir::SharedArray;
using ir::Type;

namespace {

// The largest gridDim.y; kernels whose y dimension counts rows or tokens loop over the rest.
constexpr const char* kMaxGridY = "65535";

// Hands the builder's diagnostics (programming errors in the template) to the caller.
std::optional<ir::Module> finish(const KernelBuilder& kb, ir::Module& m, ir::Diagnostics& diags) {
  for (const ir::Diagnostic& d : kb.diagnostics().all()) diags.report(d.severity, d.file, d.loc, d.message);
  if (!kb.ok()) return std::nullopt;
  return std::move(m);
}

// The storage bits of one element, as an integer of the same size (copies never convert).
Type bitsType(Storage s) { return Type::of(s == Storage::F32 ? Scalar::U32 : Scalar::U16); }

// ---- argmax ---------------------------------------------------------------------------------

constexpr unsigned kArgmaxBlock = 256;
constexpr unsigned kArgmaxUnroll = 4;  // loads in flight per thread: one block streams a whole row

// An unsigned key that orders floats as argmax needs: -inf < ... < -0 == +0 < ... < +inf < NaN
// (every NaN the same). Flipping all bits of negatives and the sign bit of positives turns the
// IEEE order into unsigned order. Keys of numbers are >= 0x007FFFFF, so 0 means "no element".
Value orderKey(KernelBuilder& kb, Value v) {
  Value bits = kb.bitcast(v, Type::u32());
  Value negMask = kb.bitcast(kb.bitcast(bits, Type::of(Scalar::S32)) >> 31u, Type::u32());
  Value key = bits ^ (negMask | 0x80000000u);
  key = kb.select(v == 0.0f, kb.u32(0x80000000u), key);
  return kb.select(kb.setp(Mod::Nan, v, v), kb.u32(0xFFFFFFFFu), key, "key");
}

struct Best {
  Value key, idx;
};

// The better of two candidates: the larger key, on equal keys the smaller index.
Best better(KernelBuilder& kb, Best a, Best b) {
  Value bWins = (b.key > a.key) | ((b.key == a.key) & (b.idx < a.idx));
  return {kb.select(bWins, b.key, a.key), kb.select(bWins, b.idx, a.idx)};
}

Best warpBest(KernelBuilder& kb, Best v, unsigned width) {
  for (unsigned off = width / 2; off >= 1; off /= 2)
    v = better(kb, v, {kb.shfl(Mod::Bfly, v.key, off), kb.shfl(Mod::Bfly, v.idx, off)});
  return v;
}

std::optional<ir::Module> buildArgmax(Storage s, ir::Diagnostics& diags) {
  ir::Module m = newModule();
  KernelBuilder kb(m, "argmax");
  Value x = kb.param(kGlobalPtr, "x");
  Value index = kb.param(kGlobalPtr, "index");
  Value rows = kb.param(Type::u32(), "rows");
  Value cols = kb.param(Type::u32(), "cols");
  (void)rows;  // read by the launch rule
  kb.reqntid(kArgmaxBlock);
  constexpr unsigned warps = kArgmaxBlock / 32;
  SharedArray warpKey = kb.shared("warp_key", Type::u32(), warps);
  SharedArray warpIdx = kb.shared("warp_idx", Type::u32(), warps);

  kb.if_then(cols == 0u, [&] { kb.ret(); }, "empty");
  Value tid = kb.tid(Mod::X, "tid");
  Value row = kb.ctaid(Mod::X, "row");
  unsigned bytes = bytesOf(s), V = vecElems(s);
  Value xrow = kb.index(x, kb.mul_wide(row, cols), bytes, "xrow");
  Value none = kb.u32(0xFFFFFFFFu, "none");

  // Each thread visits its elements in increasing index order, so a strictly larger key is the
  // only way to replace its best: the first occurrence stays.
  auto scan = [&](Value count, unsigned perLoad, auto loadGroup) {
    Value last = count - 1u;
    std::vector<Value> best = kb.for_range(
        tid, count, kArgmaxBlock * kArgmaxUnroll, {kb.u32(0), none},
        [&](Value i, std::span<Value> carried) {
          Value bk = carried[0], bi = carried[1];
          // All loads first (clamped into the row, so no branch), then the comparisons.
          std::vector<std::vector<Value>> groups;
          std::vector<Value> valid;
          for (unsigned u = 0; u < kArgmaxUnroll; ++u) {
            Value j = i + u * kArgmaxBlock;
            valid.push_back(j < count);
            groups.push_back(loadGroup(kb.min(j, last)));
          }
          for (unsigned u = 0; u < kArgmaxUnroll; ++u) {
            Value j = i + u * kArgmaxBlock;
            for (unsigned e = 0; e < perLoad; ++e) {
              Value key = kb.select(valid[u], orderKey(kb, groups[u][e]), kb.u32(0));
              Value take = key > bk;
              bk = kb.select(take, key, bk);
              bi = kb.select(take, perLoad == 1 ? j : j * perLoad + e, bi);
            }
          }
          return std::vector<Value>{bk, bi};
        },
        {.label = "scan", .iv = "i", .carried = {"best_key", "best_idx"}});
    return best;
  };

  Value vectorOk = (allAligned(kb, {x}, 16) & ((cols & (V - 1)) == 0u)).named("vector_ok");
  std::vector<Value> best = kb.if_else(
      vectorOk,
      [&] {
        Value xa = assumeAligned16(kb, xrow);
        return scan(cols / V, V, [&](Value j) { return loadVecF32(kb, kb.index(xa, j, 16), s, true, "xv"); });
      },
      [&] {
        return scan(cols, 1, [&](Value j) { return std::vector<Value>{loadF32(kb, kb.index(xrow, j, bytes), s, true, "xs")}; });
      },
      {.label = "path", .results = {"key", "idx"}});

  Best mine = warpBest(kb, {best[0], best[1]}, 32);
  Value lane = tid & 31u;
  Value warp = tid >> 5u;
  Value keyBase = kb.shared_addr(warpKey), idxBase = kb.shared_addr(warpIdx);
  kb.if_then(lane == 0u, [&] {
    kb.store(kb.index(keyBase, warp, 4), mine.key);
    kb.store(kb.index(idxBase, warp, 4), mine.idx);
  }, "stage");
  kb.bar_sync();
  kb.if_then(warp == 0u, [&] {
    Value slot = kb.min(lane, kb.u32(warps - 1));
    Value inRange = lane < warps;
    Best part{kb.select(inRange, kb.load(kb.index(keyBase, slot, 4), Type::u32()), kb.u32(0)),
              kb.select(inRange, kb.load(kb.index(idxBase, slot, 4), Type::u32()), none)};
    Best all = warpBest(kb, part, warps);
    kb.if_then(lane == 0u, [&] { kb.store(kb.index(index, row, 4), all.idx); }, "write");
  }, "combine");
  kb.ret();
  return finish(kb, m, diags);
}

// ---- transpose ------------------------------------------------------------------------------

// A 32x32 tile per block of 32x8 threads, four elements per thread each way. Shared rows are
// padded so that reading a column touches 32 different banks: 33 words for 4-byte elements;
// for 2-byte elements 34 halves (17 words, odd, so column reads rotate through every bank).
std::optional<ir::Module> buildTranspose(Storage s, ir::Diagnostics& diags) {
  ir::Module m = newModule();
  KernelBuilder kb(m, "transpose");
  Value x = kb.param(kGlobalPtr, "x");
  Value y = kb.param(kGlobalPtr, "y");
  Value rows = kb.param(Type::u32(), "rows");
  Value cols = kb.param(Type::u32(), "cols");
  kb.reqntid(32, 8);
  unsigned bytes = bytesOf(s);
  Type et = bitsType(s);
  unsigned stride = bytes == 4 ? 33 : 34;
  SharedArray tile = kb.shared("tile", et, 32 * stride);

  Value tx = kb.tid(Mod::X, "tx"), ty = kb.tid(Mod::Y, "ty");
  Value x0 = (kb.ctaid(Mod::X) << 5u).named("x0");
  Value tilesY = ((rows >> 5u) + kb.select((rows & 31u) != 0u, kb.u32(1), kb.u32(0))).named("tiles_y");
  Value base = kb.shared_addr(tile, "tile");
  // Grid y is capped at 65535, so blocks step through the remaining tile rows.
  kb.for_range(
      kb.ctaid(Mod::Y), tilesY, kb.nctaid(Mod::Y),
      [&](Value tileRow) {
        Value y0 = (tileRow << 5u).named("y0");
        // Reads are clamped into the matrix (a launched block has rows, cols > 0) so the four
        // loads issue together; clamped duplicates land only in tile slots nobody reads.
        Value col = kb.min(x0 + tx, cols - 1u, "col");
        std::vector<Value> vals;
        for (unsigned j = 0; j < 4; ++j) {
          Value r = kb.min(y0 + ty + j * 8, rows - 1u);
          Value off = kb.mul_wide(r, cols) + kb.cvt(col, Type::u64());
          vals.push_back(kb.load(kb.index(x, off, bytes), et, {Mod::NcMod}, "in"));
        }
        for (unsigned j = 0; j < 4; ++j)
          kb.store(kb.index(base, (ty + j * 8) * stride + tx, bytes), vals[j]);
        kb.bar_sync();
        Value outCol = y0 + tx;
        for (unsigned j = 0; j < 4; ++j) {
          Value r = ty + j * 8;
          Value v = kb.load(kb.index(base, tx * stride + r, bytes), et, "out");
          Value outRow = x0 + r;
          kb.if_then((outRow < cols) & (outCol < rows), [&] {
            Value off = kb.mul_wide(outRow, rows) + kb.cvt(outCol, Type::u64());
            kb.store(kb.index(y, off, bytes), v);
          }, "store");
        }
        kb.bar_sync();  // before the next tile row overwrites the tile
      },
      {.label = "tiles", .iv = "tile_row"});
  kb.ret();
  return finish(kb, m, diags);
}

// ---- kv_scatter -----------------------------------------------------------------------------

constexpr unsigned kScatterBlock = 128;

// Copies bits: dtype only sets the element size. Each block covers kScatterBlock * V elements of
// a row (V = one 16-byte vector); the scalar path covers the same span with V strided copies.
std::optional<ir::Module> buildKvScatter(Storage s, ir::Diagnostics& diags) {
  ir::Module m = newModule();
  KernelBuilder kb(m, "kv_scatter");
  Value kNew = kb.param(kGlobalPtr, "k_new");
  Value vNew = kb.param(kGlobalPtr, "v_new");
  Value kCache = kb.param(kGlobalPtr, "k_cache");
  Value vCache = kb.param(kGlobalPtr, "v_cache");
  Value positions = kb.param(kGlobalPtr, "positions");
  Value tokens = kb.param(Type::u32(), "tokens");
  Value row = kb.param(Type::u32(), "row");
  kb.reqntid(kScatterBlock);
  unsigned bytes = bytesOf(s), V = vecElems(s);
  Type et = bitsType(s), vt = Type::of(Scalar::U32, 4);

  Value tid = kb.tid(Mod::X, "tid");
  Value chunk = (kb.ctaid(Mod::X) * (kScatterBlock * V)).named("chunk");
  auto overTokens = [&](auto copyRow) {
    kb.for_range(
        kb.ctaid(Mod::Y), tokens, kb.nctaid(Mod::Y),
        [&](Value t) {
          Value pos = kb.load(kb.index(positions, t, 4), Type::u32(), {Mod::NcMod}, "pos");
          copyRow(kb.mul_wide(t, row).named("src"), kb.mul_wide(pos, row).named("dst"));
        },
        {.label = "tokens", .iv = "t"});
  };
  auto copy = [&](Value src, Value dst, Value e, Type t) {
    Value eo = kb.cvt(e, Type::u64());
    auto at = [&](Value base, Value off) {
      Value p = kb.index(base, off + eo, bytes);
      return t.isVector() ? assumeAligned16(kb, p) : p;
    };
    Value kv = kb.load(at(kNew, src), t, {Mod::NcMod}, "k");
    Value vv = kb.load(at(vNew, src), t, {Mod::NcMod}, "v");
    kb.store(at(kCache, dst), kv);
    kb.store(at(vCache, dst), vv);
  };

  Value vectorOk =
      (allAligned(kb, {kNew, vNew, kCache, vCache}, 16) & ((row & (V - 1)) == 0u)).named("vector_ok");
  kb.if_else(
      vectorOk,
      [&] {
        Value e = (chunk + tid * V).named("e");
        kb.if_then(e < row, [&] { overTokens([&](Value src, Value dst) { copy(src, dst, e, vt); }); }, "vec_in");
      },
      [&] {
        overTokens([&](Value src, Value dst) {
          for (unsigned j = 0; j < V; ++j) {
            Value e = chunk + (tid + j * kScatterBlock);
            kb.if_then(e < row, [&] { copy(src, dst, e, et); }, "scalar_in");
          }
        });
      },
      {.label = "path"});
  kb.ret();
  return finish(kb, m, diags);
}

}  // namespace

void addRowOps(std::vector<Template>& out) {
  // transpose and kv_scatter move bits: their dtype only sets the element size.
  const OptionSpec elementType = dtypeOption("dtype", "element type; elements are copied bit for bit");
  out.push_back({
      "argmax",
      "index[r] (u32) = first index of the maximum of row r of x (rows x cols); NaN is larger than "
      "every number (the first NaN wins); cols = 0 writes nothing; one block of 256 threads per row",
      {dtypeOption()},
      [](const Options& o, unsigned, ir::Diagnostics& d) { return buildArgmax(storageOption(o), d); },
      [](const Options&) { return LaunchRuleText{{kArgmaxBlock}, {"rows"}, "0"}; },
  });
  out.push_back({
      "transpose",
      "y[c * rows + r] = x[r * cols + c] through a padded 32x32 shared tile; blocks of 32x8 threads, "
      "one per tile (grid y capped at 65535; blocks loop over further tile rows)",
      {elementType},
      [](const Options& o, unsigned, ir::Diagnostics& d) { return buildTranspose(storageOption(o), d); },
      [](const Options&) {
        return LaunchRuleText{{32, 8}, {"ceil_div(cols, 32)", std::string("min(ceil_div(rows, 32), ") + kMaxGridY + ")"}, "0"};
      },
  });
  out.push_back({
      "kv_scatter",
      "for t < tokens: row positions[t] (u32) of k_cache and v_cache = row t of k_new and v_new; rows have "
      "`row` elements, copied bit for bit; blocks of 128 threads, each one 16-byte vector per thread",
      {elementType},
      [](const Options& o, unsigned, ir::Diagnostics& d) { return buildKvScatter(storageOption(o), d); },
      [](const Options& o) {
        unsigned span = kScatterBlock * vecElems(storageOption(o));
        return LaunchRuleText{{kScatterBlock},
                              {"ceil_div(row, " + std::to_string(span) + ")", std::string("min(tokens, ") + kMaxGridY + ")"},
                              "0"};
      },
  });
}

}  // namespace tn::kernels::lib
