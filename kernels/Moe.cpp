// Mixture of experts (docs/kernels.md, "Mixture of experts"): moe_route picks each token's k
// experts and their weights from the router's logits; at decode gemv_q and gemv_q_swiglu with
// `experts` multiply each (token, slot) pair by its expert's quantized matrices (kernels/Quant.cpp);
// at prefill moe_align groups the pairs by expert into tiles for a grouped GEMM (gemm_q's and
// gemm's `experts`); moe_combine adds a token's k expert outputs, weighted, into its row.
#include "kernels/Library.h"

#include <bit>
#include <limits>
#include <string>

namespace tn::kernels::lib {

using ir::Mod;
using ir::Scalar;
using ir::Type;

namespace {

constexpr unsigned kBlock = 256;
constexpr unsigned kWarps = kBlock / 32;
constexpr unsigned kRouteRegs = 8;  // moe_route: rows of up to 256 experts in registers

// ---- moe_route --------------------------------------------------------------------------------
// One warp per row of logits (n experts). Softmax scoring first finds the row's maximum (and,
// where the weights need it, the sum of exp(l - max)); then k rounds each pick the best expert not
// yet chosen, every lane scanning experts lane, lane + 32, ... and the warp merging by better()
// (argmax's order: the larger key, on equal keys the smaller index). The key is the logit itself
// (softmax and sigmoid are increasing, so the order is the scores' without their rounding), or
// with `bias` the score plus the expert's bias (DeepSeek-V3's correction, which only chooses).
// A slot past n (n < k) gets the id 0xFFFFFFFF and weight 0. Group-limited routing (groups > 1,
// topk_groups below it): the experts form `groups` groups of ceil_div(n, groups) (the last may be
// shorter); a group's score is the sum of its two best choice values (the score, plus the bias
// with `bias`; group_score "max": its best), found by two warp merges over the group's experts;
// the topk_groups best groups (ties to the lower group) become a mask, and experts of the other
// groups are no candidates.
std::optional<ir::Module> buildMoeRoute(const Options& o, ir::Diagnostics& diags) {
  const Storage s = storageOption(o);
  const auto slots = static_cast<unsigned>(o.integer("k"));
  const bool softmax = o.text("scoring") == "softmax", normalize = o.flag("normalize"), biased = o.flag("bias");
  const auto groups = static_cast<unsigned>(o.integer("groups"));
  const auto topGroups = static_cast<unsigned>(o.integer("topk_groups"));
  if (topGroups > groups) {
    diags.report(ir::Severity::Error, "", {},
                 "topk_groups = " + std::to_string(topGroups) + " is more than groups = " + std::to_string(groups));
    return std::nullopt;
  }
  const bool grouped = groups > 1 && topGroups != 0 && topGroups < groups;
  const bool top2 = o.text("group_score") == "top2";
  ir::Module m = newModule();
  KernelBuilder kb(m, "moe_route");
  Value logits = kb.param(kGlobalPtr, "logits");
  Value bias = biased ? kb.param(kGlobalPtr, "bias") : Value();
  Value ids = kb.param(kGlobalPtr, "ids");
  Value weights = kb.param(kGlobalPtr, "weights");
  Value rows = kb.param(Type::u32(), "rows");
  Value n = kb.param(Type::u32(), "n");
  Value scale = kb.param(Type::f32(), "scale");
  kb.reqntid(kBlock);
  // Left to itself ptxas fits the register path in 32 registers by spilling around div.rn's slow
  // path; 4 blocks an SM (64 registers) leave it room (40 or so).
  kb.minnctapersm(4);
  Value tid = kb.tid(Mod::X, "tid");
  Value lane = (tid & 31u).named("lane");
  Value row = kb.mad(kb.ctaid(Mod::X), kb.u32(kWarps), tid >> 5u, "row");
  kb.if_then(
      (row < rows).named("has_row"),
      [&] {
        Value base = kb.index(logits, kb.mul_wide(row, n), bytesOf(s), "row_logits");
        auto logit = [&](Value j) { return loadF32(kb, kb.index(base, j, bytesOf(s)), s, true, "logit"); };
        auto biasOf = [&](Value j) { return kb.load(kb.index(bias, j, 4), Type::f32(), {Mod::NcMod}, "b"); };
        // Softmax: 1 / the sum of exp(l - max), unless the sums of the chosen weights replace it
        // (normalize without bias: it cancels).
        const bool needSum = softmax && (!normalize || biased);
        // One division for the row (ptxas's div.rn takes a slow path out of line).
        auto invSum = [&](Value sum) { return kb.div(kb.f32(1.0f), sum, "inv_sum"); };
        // The score of logit l, given the row's max and 1 / sum (softmax).
        auto scoreWith = [&](Value l, Value mx, Value inv) {
          if (!softmax) return sigmoid(kb, l);
          Value e = ex2Approx(kb, (l - mx) * kLog2e, "exp");
          return inv.valid() ? e * inv : e;
        };
        Value groupSize = grouped ? ((n + (groups - 1)) / groups).named("group_size") : Value();
        // The topk_groups best of the group scores, as a mask (every lane holds every group's score).
        auto bestGroups = [&](const std::vector<Value>& groupScore) {
          Value allowed = kb.u32(0);
          for (unsigned t = 0; t < topGroups; ++t) {
            Best b = nothing(kb);
            for (unsigned g = 0; g < groups; ++g) {
              Value taken = ((allowed >> g) & 1u) != 0u;
              b = better(kb, b, {kb.select(taken, kb.u32(0), orderKey(kb, groupScore[g])), kb.u32(g)});
            }
            allowed = (allowed | (kb.u32(1) << b.idx)).named("allowed_groups");
          }
          return allowed;
        };
        // A row of at most 32 * kRouteRegs experts is read once: lane l holds experts l + 32 i, their
        // keys computed once, and every choice is a merge of registers and a warp merge (the groups'
        // merges independent of one another). A longer row is walked by each choice again.
        std::vector<Value> routed = kb.if_else(
            ((n != 0u) & (n <= 32 * kRouteRegs)).named("in_registers"),
            [&] {
              std::vector<Value> j, in, l;
              for (unsigned i = 0; i < kRouteRegs; ++i) {
                j.push_back(i == 0 ? lane : (lane + 32 * i).named("expert"));
                in.push_back((j.back() < n).named("in_row"));
                l.push_back(logit(kb.min(j.back(), n - 1u)));
              }
              Value mx, inv;
              if (softmax) {
                mx = negInf(kb);
                for (unsigned i = 0; i < kRouteRegs; ++i) mx = kb.select(in[i], kb.max(mx, l[i]), mx);
                mx = kb.warp_reduce_max(mx, "row_max");
                if (needSum) {  // in the loop's order: lane, lane + 32, ...
                  Value sum = kb.f32(0.0f);
                  for (unsigned i = 0; i < kRouteRegs; ++i)
                    sum = kb.select(in[i], sum + ex2Approx(kb, (l[i] - mx) * kLog2e), sum);
                  inv = invSum(kb.warp_reduce_sum(sum, "row_sum"));
                }
              }
              // Keys (0 outside the row, below every number's): the choice value's, and the pick's
              // (the logit's without a bias: the scores' order).
              std::vector<Value> choiceKey, pickKey;
              for (unsigned i = 0; i < kRouteRegs; ++i) {
                Value ck;
                if (biased || grouped) {
                  Value v = scoreWith(l[i], mx, inv);
                  if (biased) v = v + biasOf(kb.min(j[i], n - 1u));
                  ck = kb.select(in[i], orderKey(kb, v), kb.u32(0), "choice_key");
                }
                choiceKey.push_back(ck);
                pickKey.push_back(biased ? ck : kb.select(in[i], orderKey(kb, l[i]), kb.u32(0), "pick_key"));
              }
              auto merge = [&](const std::function<Value(unsigned i)>& keyOf) {
                Best b = nothing(kb);
                for (unsigned i = 0; i < kRouteRegs; ++i) b = better(kb, b, {keyOf(i), j[i]});
                return warpBest(kb, b);
              };
              std::vector<Value> alive = in;
              if (grouped) {
                std::vector<Value> groupOf;
                for (unsigned i = 0; i < kRouteRegs; ++i) groupOf.push_back((kb.min(j[i], n - 1u) / groupSize).named("group"));
                // A group's choice value back from its key: orderKey inverted (+0 for both zeros,
                // NaN for every NaN: the group's order is the same), 0 for none.
                auto valueOf = [&](Value key) {
                  Value bits = kb.select((key & 0x80000000u) != 0u, key ^ 0x80000000u, ~key);
                  return kb.select(key == 0u, kb.f32(0.0f), kb.bitcast(bits, Type::f32()), "group_value");
                };
                std::vector<Value> groupScore;
                for (unsigned g = 0; g < groups; ++g) {
                  Best first = merge([&](unsigned i) { return kb.select(groupOf[i] == g, choiceKey[i], kb.u32(0)); });
                  Value v = valueOf(first.key);
                  if (top2)
                    v = (v + valueOf(merge([&](unsigned i) {
                           return kb.select((groupOf[i] == g) & (j[i] != first.idx), choiceKey[i], kb.u32(0));
                         }).key)).named("group_score");
                  groupScore.push_back(v);
                }
                Value allowed = bestGroups(groupScore);
                for (unsigned i = 0; i < kRouteRegs; ++i) alive[i] = alive[i] & (((allowed >> groupOf[i]) & 1u) != 0u);
              }
              std::vector<Value> out;
              for (unsigned slot = 0; slot < slots; ++slot) {
                Best b = merge([&](unsigned i) { return kb.select(alive[i], pickKey[i], kb.u32(0)); });
                out.push_back(kb.select(b.key == 0u, kb.u32(kNoExpert), b.idx, "chosen"));
                for (unsigned i = 0; i < kRouteRegs; ++i) alive[i] = alive[i] & (j[i] != out.back());
              }
              if (softmax) out.push_back(mx);
              if (needSum) out.push_back(inv);
              return out;
            },
            [&] {
              Value mx, inv;
              if (softmax) {
                mx = kb.for_range(lane, n, 32u, {negInf(kb)},
                                  [&](Value j, std::span<Value> c) { return std::vector<Value>{kb.max(c[0], logit(j))}; },
                                  {.label = "max", .iv = "j", .carried = {"max"}})[0];
                mx = kb.warp_reduce_max(mx, "row_max");
                if (needSum) {
                  Value sum = kb.for_range(
                      lane, n, 32u, {kb.f32(0.0f)},
                      [&](Value j, std::span<Value> c) {
                        return std::vector<Value>{c[0] + ex2Approx(kb, (logit(j) - mx) * kLog2e)};
                      },
                      {.label = "sum", .iv = "j", .carried = {"sum"}})[0];
                  inv = invSum(kb.warp_reduce_sum(sum, "row_sum"));
                }
              }
              auto choice = [&](Value j) {  // the value an expert is chosen by (score, plus its bias)
                Value v = scoreWith(logit(j), mx, inv);
                return biased ? v + biasOf(j) : v;
              };
              Value allowed;  // grouped: the mask of the chosen groups
              if (grouped) {
                std::vector<Value> groupScore;
                for (unsigned g = 0; g < groups; ++g) {
                  Value lo = (groupSize * g).named("group_lo"), hi = kb.min(lo + groupSize, n, "group_hi");
                  // The best expert of the group, other than `skip`, and its choice value (0 for none).
                  auto best = [&](Value skip) {
                    Best none = nothing(kb);
                    std::vector<Value> mine = kb.for_range(
                        lo + lane, hi, 32u, {none.key, none.idx},
                        [&](Value j, std::span<Value> c) {
                          Value key = kb.select(j == skip, kb.u32(0), orderKey(kb, choice(j)));
                          Best b = better(kb, {c[0], c[1]}, {key, j});
                          return std::vector<Value>{b.key, b.idx};
                        },
                        {.label = "group_best", .iv = "j", .carried = {"best_key", "best_idx"}});
                    Best b = warpBest(kb, {mine[0], mine[1]});
                    Value v = kb.if_else(b.key != 0u, [&] { return choice(b.idx); }, [&] { return kb.f32(0.0f); },
                                         {.label = "group_value"})[0];
                    return std::pair{b.idx, v};
                  };
                  auto [first, v1] = best(kb.u32(kNoExpert));
                  groupScore.push_back(top2 ? (v1 + best(first).second).named("group_score") : v1);
                }
                allowed = bestGroups(groupScore);
              }
              std::vector<Value> chosen;
              for (unsigned slot = 0; slot < slots; ++slot) {
                Best none = nothing(kb);
                std::vector<Value> mine = kb.for_range(
                    lane, n, 32u, {none.key, none.idx},
                    [&](Value j, std::span<Value> c) {
                      Value key = orderKey(kb, biased ? choice(j) : logit(j));
                      // An expert already chosen, or of a group not chosen, is no candidate (key 0, below
                      // every number's).
                      Value taken = grouped ? ((allowed >> (j / groupSize)) & 1u) == 0u : kb.pred(false);
                      for (Value c : chosen) taken = taken | (j == c);
                      Best b = better(kb, {c[0], c[1]}, {kb.select(taken, kb.u32(0), key), j});
                      return std::vector<Value>{b.key, b.idx};
                    },
                    {.label = "pick", .iv = "j", .carried = {"best_key", "best_idx"}});
                Best b = warpBest(kb, {mine[0], mine[1]});
                chosen.push_back(kb.select(b.key == 0u, kb.u32(kNoExpert), b.idx, "chosen"));
              }
              if (softmax) chosen.push_back(mx);
              if (needSum) chosen.push_back(inv);
              return chosen;
            },
            {.label = "route"});
        std::vector<Value> chosen(routed.begin(), routed.begin() + slots);
        Value mx = softmax ? routed[slots] : Value(), inv = needSum ? routed[slots + 1] : Value();
        auto score = [&](Value l) { return scoreWith(l, mx, inv); };
        std::vector<Value> w, has;
        for (Value c : chosen) {
          has.push_back((c < n).named("has_expert"));
          w.push_back(kb.if_else(has.back(), [&] { return score(logit(c)); }, [&] { return kb.f32(0.0f); },
                                 {.label = "weight"})[0]);
        }
        if (normalize) {
          Value total = w[0];
          for (size_t i = 1; i < w.size(); ++i) total = total + w[i];
          Value inv = kb.div(kb.f32(1.0f), total, "inv_total");  // NaN scores make every weight NaN
          for (size_t i = 0; i < w.size(); ++i) w[i] = kb.select(has[i], w[i] * inv, w[i]);  // no expert: 0
        }
        kb.if_then(
            lane == 0u,
            [&] {
              Value at = kb.mul_wide(row, kb.u32(slots), "slot0");
              for (unsigned slot = 0; slot < slots; ++slot) {
                Value i = slot == 0 ? at : at + kb.u64(slot);
                kb.store(kb.index(ids, i, 4), chosen[slot]);
                kb.store(kb.index(weights, i, 4), w[slot] * scale);
              }
            },
            "write");
      },
      "row");
  kb.ret();
  return finish(kb, m, diags);
}

// ---- moe_combine ------------------------------------------------------------------------------
// One thread per element of y: the row's `slots` expert outputs h, each times its weight, added
// in slot order by f32 fma (a weight of 0 adds nothing, even to a NaN row of an unknown expert; a
// NaN weight makes the element NaN), then the residual; rounded once to dtype.
std::optional<ir::Module> buildMoeCombine(const Options& o, ir::Diagnostics& diags) {
  const Storage s = storageOption(o), hs = storageOption(o, "h_dtype");
  const bool residual = o.flag("residual"), shared = o.flag("shared"), gated = o.flag("shared_gate");
  if (gated && !shared) {
    diags.report(ir::Severity::Error, "", {}, "shared_gate gates the shared expert's output: it needs shared = true");
    return std::nullopt;
  }
  ir::Module m = newModule();
  KernelBuilder kb(m, "moe_combine");
  Value h = kb.param(kGlobalPtr, "h");
  Value weights = kb.param(kGlobalPtr, "weights");
  Value positions = o.flag("positions") ? kb.param(kGlobalPtr, "positions") : Value();
  Value y = kb.param(kGlobalPtr, "y");
  Value res = residual ? kb.param(kGlobalPtr, "residual") : Value();
  Value sharedOut = shared ? kb.param(kGlobalPtr, "shared") : Value();
  Value gate = gated ? kb.param(kGlobalPtr, "shared_gate") : Value();
  kb.param(Type::u32(), "rows");  // the grid's width (below 2^31: a prefill's tokens in one launch)
  Value cols = kb.param(Type::u32(), "cols");
  Value slots = kb.param(Type::u32(), "slots");
  if (positions.valid()) kb.param(Type::u32(), "h_rows");  // h's extent: moe_align's tiles x tile
  kb.reqntid(kBlock);
  Value row = kb.ctaid(Mod::X, "row");
  Value col = kb.mad(kb.ctaid(Mod::Y), kb.u32(kBlock), kb.tid(Mod::X), "col");
  kb.if_then(
      (col < cols).named("has_col"),
      [&] {
        Value first = kb.mul_wide(row, slots, "pair0");
        Value acc = kb.for_range(
            kb.u32(0), slots, kb.u32(1), {kb.f32(0.0f)},
            [&](Value slot, std::span<Value> c) {
              Value pair = (first + kb.cvt(slot, Type::u64())).named("pair");
              Value wt = kb.load(kb.index(weights, pair, 4), Type::f32(), {Mod::NcMod}, "weight");
              Value hRow = pair;
              if (positions.valid())
                hRow = kb.cvt(kb.load(kb.index(positions, pair, 4), Type::u32(), {Mod::NcMod}, "position"), Type::u64(), "h_row");
              Value hv = loadF32(kb, kb.index(h, hRow * kb.cvt(cols, Type::u64()) + kb.cvt(col, Type::u64()), bytesOf(hs)),
                                 hs, true, "h");
              // setp.neu: a NaN weight is not 0, so it shows in the row.
              return std::vector<Value>{kb.select(kb.setp(Mod::Neu, wt, kb.f32(0.0f)), kb.fma(wt, hv, c[0]), c[0])};
            },
            {.label = "slots", .iv = "slot", .carried = {"acc"}})[0];
        Value at = (kb.mul_wide(row, cols) + kb.cvt(col, Type::u64())).named("at");
        if (shared) {
          Value sv = loadF32(kb, kb.index(sharedOut, at, bytesOf(hs)), hs, true, "shared");
          if (gated) {
            Value g = sigmoid(kb, kb.load(kb.index(gate, row, 4), Type::f32(), {Mod::NcMod}, "gate_logit"));
            acc = kb.fma(g, sv, acc, "with_shared");
          } else {
            acc = (acc + sv).named("with_shared");
          }
        }
        if (residual) acc = acc + loadF32(kb, kb.index(res, at, bytesOf(s)), s, true, "residual");
        storeF32(kb, kb.index(y, at, bytesOf(s)), acc, s);
      },
      "col");
  kb.ret();
  return finish(kb, m, diags);
}

// ---- moe_align ------------------------------------------------------------------------------
// Groups the (token, slot) pairs by expert for a grouped GEMM (gemm_q's and gemm's `experts`): one
// block.
// Every pair has a group, its expert or, for an id >= n_experts, the unknown group n_experts
// (all pairs are unknown when n_experts >= kAlignCap: the counts would not fit). A group's pairs
// take consecutive entries of `sorted` in pair order from a multiple of the tile, padded to a
// whole tile with kNoExpert; the groups follow one another in order (the unknown one last), and
// tile_experts[t] is the group of tile t (n_experts for the unknown group, kNoExpert for tiles past
// the last). W warps each walk a contiguous segment of the pairs 32 at a time (4 such chunks an
// iteration, their ids loaded together); the lanes with the
// same group find one another by one ballot per bit of the group (and one of the lanes in range),
// and the highest of them counts for all. Pass 1 counts per warp and group (shared atomics); the
// block turns the counts into each warp's first entry of each group (groups in order, warps in
// order within one); pass 2 walks again and places each pair at its warp's cursor plus its rank
// among the lanes of its group below it: the order within a group is the pairs', whatever the
// timing, so `sorted` is the same at every launch.
constexpr unsigned kAlignBlock = 512, kAlignWarps = kAlignBlock / 32;
constexpr unsigned kAlignCap = 8192;  // counts in shared memory: warps x groups
// Chunks of 32 pairs a warp takes an iteration: their ids' loads in flight together (one chunk an
// iteration left a pass waiting on a load each 32 pairs).
constexpr unsigned kAlignUnroll = 4;

std::optional<ir::Module> buildMoeAlign(const Options& o, ir::Diagnostics& diags) {
  const auto tile = static_cast<uint32_t>(o.integer("tile"));
  if (!std::has_single_bit(tile)) {
    diags.report(ir::Severity::Error, "", {}, "tile = " + std::to_string(tile) + " is not a power of two");
    return std::nullopt;
  }
  ir::Module m = newModule();
  KernelBuilder kb(m, "moe_align");
  Value ids = kb.param(kGlobalPtr, "ids");
  Value sorted = kb.param(kGlobalPtr, "sorted");
  Value tileExperts = kb.param(kGlobalPtr, "tile_experts");
  Value positions = o.flag("positions") ? kb.param(kGlobalPtr, "positions") : Value();
  Value pairs = kb.param(Type::u32(), "pairs");
  Value nExperts = kb.param(Type::u32(), "n_experts");
  kb.reqntid(kAlignBlock);
  Value counts = kb.shared_addr(kb.shared("counts", Type::u32(), kAlignCap), "counts");
  Value warpTotals = kb.shared_addr(kb.shared("warp_totals", Type::u32(), kAlignWarps), "warp_totals");
  Value tid = kb.tid(Mod::X, "tid");
  Value lane = (tid & 31u).named("lane"), warp = (tid >> 5u).named("warp");
  Value fits = (nExperts < kAlignCap).named("fits");
  Value groups = kb.select(fits, nExperts + 1u, kb.u32(1), "groups");
  Value warps = kb.min(kb.u32(kAlignWarps), kb.u32(kAlignCap) / groups, "warps");
  Value bits = (32u - kb.clz(groups - 1u)).named("bits");  // of the largest group
  // Tiles: ceil_div(pairs, tile) + min(n_experts + 1, pairs), the extent of tile_experts.
  Value someGroups = kb.select(pairs == 0u, kb.u32(0), kb.min(nExperts, pairs - 1u) + 1u, "nonempty_bound");
  Value tiles = (((pairs + (tile - 1)) >> std::countr_zero(tile)) + someGroups).named("tiles");
  auto countAt = [&](Value w, Value g) { return kb.index(counts, kb.mad(w, groups, g), 4, "count_at"); };
  auto roundUp = [&](Value v) { return ((v + (tile - 1)) & ~(tile - 1)).named("padded"); };

  kb.for_range(tid, warps * groups, kAlignBlock, [&](Value i) { kb.store(kb.index(counts, i, 4), kb.u32(0)); },
               {.label = "clear", .iv = "i"});
  kb.bar_sync();
  // fn(p, valid, group, same, leader) for the warp's pairs, 32 at a time: `same` holds the lanes
  // in range with the lane's group, `leader` the highest of them.
  Value perStep = (warps * 32u).named("per_step");
  Value segment = (((pairs + perStep - 1u) / perStep) * 32u).named("segment");
  auto walk = [&](std::string_view label, auto&& fn) {
    kb.if_then(warp < warps, [&] {
      Value first = (warp * segment).named("first");
      Value end = kb.min(pairs, first + segment, "end");
      // kAlignUnroll chunks an iteration, their ids loaded together, then taken in order.
      kb.for_range(first, end, 32u * kAlignUnroll, [&](Value p0) {
        std::vector<Value> ps, valid, id;
        for (unsigned u = 0; u < kAlignUnroll; ++u) {
          ps.push_back((p0 + (lane + 32u * u)).named("p"));
          valid.push_back((ps.back() < end).named("in_range"));
          id.push_back(kb.load(kb.index(ids, kb.min(ps.back(), end - 1u), 4), Type::u32(), {Mod::NcMod}, "id"));
        }
        for (unsigned u = 0; u < kAlignUnroll; ++u) {
          Value group = kb.select(fits, kb.min(id[u], nExperts), kb.u32(0), "group");
          Value inRange = kb.bitcast(kb.vote(Mod::Ballot, valid[u]), Type::u32(), "lanes");
          Value same = kb.for_range(
              kb.u32(0), bits, kb.u32(1), {inRange},
              [&](Value b, std::span<Value> c) {
                Value set = (((group >> b) & 1u) == 1u).named("bit_set");
                Value with = kb.bitcast(kb.vote(Mod::Ballot, set), Type::u32(), "with_bit");
                return std::vector<Value>{c[0] & kb.select(set, with, ~with)};
              },
              {.label = "bits", .iv = "b", .carried = {"same"}})[0];
          Value leader = kb.select(valid[u], 31u - kb.clz(same), lane, "leader");
          fn(ps[u], valid[u], group, same, leader);
        }
      }, {.label = std::string(label), .iv = "p0"});
    }, "walker");
  };
  walk("count", [&](Value, Value valid, Value group, Value same, Value leader) {
    kb.if_then((valid & (lane == leader)).named("counts"),
               [&] { kb.atom(Mod::AAdd, countAt(warp, group), kb.popc(same), "counted"); }, "count");
  });
  kb.bar_sync();

  // Thread t owns groups [t c, t c + c), c = ceil_div(groups, 512): its groups' padded sizes
  // summed, a block scan of the sums, then each group's warps' first entries and its tiles.
  Value chunk = ((groups + (kAlignBlock - 1)) / kAlignBlock).named("chunk");
  Value g0 = kb.min(tid * chunk, groups, "g0"), g1 = kb.min(g0 + chunk, groups, "g1");
  auto groupTotal = [&](Value g) {
    return kb.for_range(kb.u32(0), warps, kb.u32(1), {kb.u32(0)},
                        [&](Value w, std::span<Value> c) {
                          return std::vector<Value>{c[0] + kb.load(countAt(w, g), Type::u32(), "count")};
                        },
                        {.label = "warps", .iv = "w", .carried = {"total"}})[0];
  };
  Value mine = kb.for_range(g0, g1, kb.u32(1), {kb.u32(0)},
                            [&](Value g, std::span<Value> c) { return std::vector<Value>{c[0] + roundUp(groupTotal(g))}; },
                            {.label = "sizes", .iv = "g", .carried = {"mine"}})[0];
  Value incl = mine;
  for (uint32_t off = 1; off < 32; off *= 2) {
    Value other = kb.shfl_sync(Mod::Up, incl, kb.b32(off), kb.b32(0), kb.b32(0xFFFFFFFFu), "below");
    incl = kb.select(lane >= off, incl + other, incl, "running");
  }
  kb.if_then(lane == 31u, [&] { kb.store(kb.index(warpTotals, warp, 4), incl); }, "warp_total");
  kb.bar_sync();
  Value before = kb.u32(0), used = kb.u32(0);
  for (unsigned v = 0; v < kAlignWarps; ++v) {
    Value t = kb.load(kb.index(warpTotals, v, 4), Type::u32(), "warp_total");
    before = kb.select(warp > v, before + t, before, "before");
    used = (used + t).named("used");
  }
  kb.for_range(g0, g1, kb.u32(1), {(before + incl - mine).named("base")},
               [&](Value g, std::span<Value> c) {
                 Value base = c[0];
                 Value end = kb.for_range(kb.u32(0), warps, kb.u32(1), {base},
                                          [&](Value w, std::span<Value> r) {
                                            Value at = countAt(w, g);
                                            Value count = kb.load(at, Type::u32(), "count");
                                            kb.store(at, r[0]);  // the warp's cursor
                                            return std::vector<Value>{r[0] + count};
                                          },
                                          {.label = "starts", .iv = "w", .carried = {"cursor"}})[0];
                 Value next = (base + roundUp(end - base)).named("next");
                 kb.for_range(end, next, kb.u32(1), [&](Value i) { kb.store(kb.index(sorted, i, 4), kb.u32(kNoExpert)); },
                              {.label = "pad", .iv = "i"});
                 Value expert = kb.select(g == groups - 1u, nExperts, g, "tile_expert");
                 kb.for_range(base >> std::countr_zero(tile), next >> std::countr_zero(tile), kb.u32(1),
                              [&](Value t) { kb.store(kb.index(tileExperts, t, 4), expert); },
                              {.label = "tiles", .iv = "t"});
                 return std::vector<Value>{next};
               },
               {.label = "groups", .iv = "g", .carried = {"base"}});
  // The tiles past the last group's: no expert, no pairs.
  Value usedTiles = (used >> std::countr_zero(tile)).named("used_tiles");
  kb.for_range(usedTiles + tid, tiles, kAlignBlock, [&](Value t) { kb.store(kb.index(tileExperts, t, 4), kb.u32(kNoExpert)); },
               {.label = "unused_tiles", .iv = "t"});
  kb.for_range(used + tid, tiles * tile, kAlignBlock, [&](Value i) { kb.store(kb.index(sorted, i, 4), kb.u32(kNoExpert)); },
               {.label = "unused_entries", .iv = "i"});
  kb.bar_sync();
  walk("place", [&](Value p, Value valid, Value group, Value same, Value leader) {
    Value isLeader = (valid & (lane == leader)).named("leads");
    Value first = kb.if_else(
        isLeader, [&] { return kb.atom(Mod::AAdd, countAt(warp, group), kb.popc(same), "cursor"); },
        [&] { return kb.u32(0); }, {.label = "claim"})[0];
    first = kb.shfl_sync(Mod::Idx, first, kb.bitcast(leader, Type::of(Scalar::B32)), kb.b32(31), kb.b32(0xFFFFFFFFu),
                         "group_first");
    Value below = (same & ((1u << lane) - 1u)).named("below");
    kb.if_then(valid, [&] {
      Value at = (first + kb.popc(below)).named("entry");
      kb.store(kb.index(sorted, at, 4), p);
      if (positions.valid()) kb.store(kb.index(positions, p, 4), at);
    }, "place");
  });
  kb.ret();
  return finish(kb, m, diags);
}

}  // namespace

void addMoe(std::vector<Template>& out) {
  OptionSpec k = intOption("k", 2, 1, 8, "experts per token (slots)");
  OptionSpec groupsOpt = intOption("groups", 1, 1, 32,
                                   "group-limited routing: the experts in this many groups of ceil_div(n, groups) "
                                   "(DeepSeek's n_group; 1: no groups)");
  OptionSpec topGroupsOpt = intOption("topk_groups", 0, 0, 32,
                                      "the groups whose experts may be chosen: the best topk_groups by group_score "
                                      "(DeepSeek's topk_group; 0: every group)");
  out.push_back({
      "moe_route",
      "the router of a mixture of experts: for row r of logits (rows x n experts), the k experts of the "
      "largest scores (softmax over the row, or sigmoid of each logit; with bias chosen by score + bias[e]), "
      "ids[r * k + s] (u32, best first, ties to the lower index) and their weights[r * k + s] (f32: the "
      "scores, divided by their sum with normalize, times scale); with groups and topk_groups only the experts "
      "of the best groups are candidates (DeepSeek's group-limited routing); a slot past n gets id 0xFFFFFFFF "
      "and weight 0; one warp per row, blocks of 256 threads",
      {dtypeOption("dtype", "storage type of the logits"), k,
       choiceOption("scoring", "softmax", {"softmax", "sigmoid"},
                    "the expert scores: softmax over the row (Mixtral, Qwen-MoE, DeepSeek-V2) or sigmoid of each "
                    "logit (DeepSeek-V3, Llama 4)"),
       option("normalize", true, "divide the k weights by their sum (Mixtral; Qwen's norm_topk_prob)"),
       option("bias", false,
              "an f32 pointer bias [n] after logits: experts are chosen by score + bias, weighted by score "
              "(DeepSeek-V3's e_score_correction_bias)"),
       groupsOpt, topGroupsOpt,
       choiceOption("group_score", "top2", {"top2", "max"},
                    "a group's score: the sum of its two best choice values (DeepSeek-V3) or its best "
                    "(DeepSeek-V2's group-limited greedy)")},
      buildMoeRoute,
      [](const Options&) { return LaunchRule{{kBlock}, {ceilDiv(Expr::param("rows"), kWarps)}, 0}; },
  });
  out.back().elements = allElements({storageElements({"logits"}), u32Elements({"ids"})});
  out.back().extents = [](const Options& o) {
    const Expr rows = Expr::param("rows"), slots = Expr(static_cast<uint64_t>(o.integer("k")));
    return Template::Extents{{"logits", rows * Expr::param("n")}, {"bias", Expr::param("n")},
                             {"ids", rows * slots}, {"weights", rows * slots}};
  };
  OptionSpec tileOpt = intOption("tile", 32, 1, 1024,
                                  "rows of a tile of the grouped GEMM, a power of two: each expert's pairs are padded "
                                  "to a multiple (gemm_q's experts take 32; a gemm's, its tile_m)");
  out.push_back({
      "moe_align",
      "groups the (token, slot) pairs by expert for a grouped GEMM (prefill): sorted (u32) holds each expert's "
      "pairs in pair order, padded with 0xFFFFFFFF to a multiple of tile, the experts in order and the pairs "
      "with an id >= n_experts last; tile_experts[t] (u32) is the expert of the tile entries t * tile .. "
      "(n_experts for the unknown ids, 0xFFFFFFFF past the last); tiles = ceil_div(pairs, tile) + "
      "min(n_experts + 1, pairs); one block of 512 threads; n_experts >= 8192 makes every id unknown",
      {tileOpt,
       option("positions", false,
              "also the inverse: positions[p] (u32, the pointer after tile_experts) is the entry of sorted that holds "
              "pair p, where a grouped gemm's output row of the pair is (moe_combine's positions)")},
      buildMoeAlign,
      [](const Options&) { return LaunchRule{{kAlignBlock}, {Expr(1)}, 0}; },
  });
  out.back().elements = u32Elements({"ids", "sorted", "tile_experts", "positions"});
  out.back().extents = [](const Options& o) {
    const Expr t = moeTiles(static_cast<uint64_t>(o.integer("tile")));
    return Template::Extents{{"ids", Expr::param("pairs")}, {"sorted", t * Expr(static_cast<uint64_t>(o.integer("tile")))},
                             {"tile_experts", t}, {"positions", Expr::param("pairs")}};
  };
  out.push_back({
      "moe_combine",
      "y[r * cols + j] = residual[r * cols + j] + sum_s weights[r * slots + s] * h[(r * slots + s) * cols + j] "
      "for s < slots (the expert outputs of row r's slots, weighted as moe_route gives them; a weight of 0 adds "
      "nothing, whatever h holds; a NaN weight gives NaN), f32 fma in slot order, then the shared expert's "
      "output (shared), then the residual, rounded once; one thread per element, blocks of 256, a row's in "
      "one column of the grid",
      {dtypeOption("dtype", "storage type of y and residual"),
       choiceOption("h_dtype", "f32", {"f32", "bf16", "f16"}, "storage type of h (gemv_q writes f32)"),
       option("residual", false, "add the pointer residual (rows x cols, after y) to the sum"),
       option("shared", false,
              "add the shared expert's output, the pointer shared (rows x cols of h_dtype, after residual: "
              "DeepSeek's and Qwen-MoE's shared experts, a plain gemv_q or gemm of each token), after the routed "
              "experts' sum"),
       option("shared_gate", false,
              "with shared: times sigmoid(shared_gate[r]) (f32 [rows], the pointer after shared: Qwen-MoE's "
              "shared_expert_gate logit of each token)"),
       option("positions", false,
              "h's rows in moe_align's order (a grouped gemm's output): pair p's row is positions[p] (u32, the "
              "pointer after weights, from moe_align with positions); h holds h_rows rows (a u32 after slots: "
              "moe_align's tiles x tile)")},
      buildMoeCombine,
      [](const Options&) {
        return LaunchRule{{kBlock}, {Expr::param("rows"), ceilDiv(Expr::param("cols"), kBlock)}, 0};
      },
  });
  out.back().elements =
      allElements({storageElements({"y", "residual"}), storageElements({"h", "shared"}, "h_dtype"), u32Elements({"positions"})});
  out.back().extents = [](const Options& o) {
    const Expr rows = Expr::param("rows"), cols = Expr::param("cols"), slots = Expr::param("slots");
    const Expr hRows = o.flag("positions") ? Expr::param("h_rows") : rows * slots;
    return Template::Extents{{"h", hRows * cols},          {"weights", rows * slots}, {"y", rows * cols},
                             {"residual", rows * cols},    {"positions", rows * slots}, {"shared", rows * cols},
                             {"shared_gate", rows}};
  };
}

}  // namespace tn::kernels::lib
