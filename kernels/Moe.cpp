// Mixture-of-experts decode (docs/kernels.md, "Mixture of experts"): moe_route picks each token's
// k experts and their weights from the router's logits; gemv_q and gemv_q_swiglu with `experts`
// multiply each (token, slot) pair by its expert's quantized matrices (kernels/Quant.cpp);
// moe_combine adds a token's k expert outputs, weighted, into its row.
#include "kernels/Library.h"

#include <limits>
#include <string>

namespace tn::kernels::lib {

using ir::Mod;
using ir::Scalar;
using ir::Type;

namespace {

constexpr unsigned kBlock = 256;
constexpr unsigned kWarps = kBlock / 32;
constexpr uint32_t kNoExpert = 0xFFFFFFFFu;

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
  Value tid = kb.tid(Mod::X, "tid");
  Value lane = (tid & 31u).named("lane");
  Value row = kb.mad(kb.ctaid(Mod::X), kb.u32(kWarps), tid >> 5u, "row");
  kb.if_then(
      (row < rows).named("has_row"),
      [&] {
        Value base = kb.index(logits, kb.mul_wide(row, n), bytesOf(s), "row_logits");
        auto logit = [&](Value j) { return loadF32(kb, kb.index(base, j, bytesOf(s)), s, true, "logit"); };
        // Softmax: the row's maximum, and the sum of exp(l - max) unless the sums of the chosen
        // weights replace it (normalize without bias: it cancels).
        Value mx, sum;  // sum: 1 / the sum of exp(l - max), where needed
        if (softmax) {
          mx = kb.for_range(lane, n, 32u, {negInf(kb)},
                            [&](Value j, std::span<Value> c) { return std::vector<Value>{kb.max(c[0], logit(j))}; },
                            {.label = "max", .iv = "j", .carried = {"max"}})[0];
          mx = kb.warp_reduce_max(mx, "row_max");
          if (!normalize || biased) {
            sum = kb.for_range(
                lane, n, 32u, {kb.f32(0.0f)},
                [&](Value j, std::span<Value> c) {
                  return std::vector<Value>{c[0] + ex2Approx(kb, (logit(j) - mx) * kLog2e)};
                },
                {.label = "sum", .iv = "j", .carried = {"sum"}})[0];
            // One division for the row (ptxas's div.rn takes a slow path out of line).
            sum = kb.div(kb.f32(1.0f), kb.warp_reduce_sum(sum, "row_sum"), "inv_sum");
          }
        }
        auto score = [&](Value l) {
          if (!softmax) return sigmoid(kb, l);
          Value e = ex2Approx(kb, (l - mx) * kLog2e, "exp");
          return sum.valid() ? e * sum : e;
        };
        auto choice = [&](Value j) {  // the value an expert is chosen by (score, plus its bias)
          Value v = score(logit(j));
          return biased ? v + kb.load(kb.index(bias, j, 4), Type::f32(), {Mod::NcMod}, "b") : v;
        };
        Value allowed, groupSize;  // grouped: the mask of the chosen groups, and their size
        if (grouped) {
          groupSize = ((n + (groups - 1)) / groups).named("group_size");
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
          // The topk_groups best groups, in registers (every lane holds every group's score).
          allowed = kb.u32(0);
          for (unsigned t = 0; t < topGroups; ++t) {
            Best b = nothing(kb);
            for (unsigned g = 0; g < groups; ++g) {
              Value taken = ((allowed >> g) & 1u) != 0u;
              b = better(kb, b, {kb.select(taken, kb.u32(0), orderKey(kb, groupScore[g])), kb.u32(g)});
            }
            allowed = (allowed | (kb.u32(1) << b.idx)).named("allowed_groups");
          }
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
  const bool residual = o.flag("residual");
  ir::Module m = newModule();
  KernelBuilder kb(m, "moe_combine");
  Value h = kb.param(kGlobalPtr, "h");
  Value weights = kb.param(kGlobalPtr, "weights");
  Value y = kb.param(kGlobalPtr, "y");
  Value res = residual ? kb.param(kGlobalPtr, "residual") : Value();
  kb.param(Type::u32(), "rows");  // the grid's height
  Value cols = kb.param(Type::u32(), "cols");
  Value slots = kb.param(Type::u32(), "slots");
  kb.reqntid(kBlock);
  Value col = kb.mad(kb.ctaid(Mod::X), kb.u32(kBlock), kb.tid(Mod::X), "col");
  Value row = kb.ctaid(Mod::Y, "row");
  kb.if_then(
      (col < cols).named("has_col"),
      [&] {
        Value first = kb.mul_wide(row, slots, "pair0");
        Value acc = kb.for_range(
            kb.u32(0), slots, kb.u32(1), {kb.f32(0.0f)},
            [&](Value slot, std::span<Value> c) {
              Value pair = (first + kb.cvt(slot, Type::u64())).named("pair");
              Value wt = kb.load(kb.index(weights, pair, 4), Type::f32(), {Mod::NcMod}, "weight");
              Value hv = loadF32(kb, kb.index(h, pair * kb.cvt(cols, Type::u64()) + kb.cvt(col, Type::u64()), bytesOf(hs)),
                                 hs, true, "h");
              // setp.neu: a NaN weight is not 0, so it shows in the row.
              return std::vector<Value>{kb.select(kb.setp(Mod::Neu, wt, kb.f32(0.0f)), kb.fma(wt, hv, c[0]), c[0])};
            },
            {.label = "slots", .iv = "slot", .carried = {"acc"}})[0];
        Value at = (kb.mul_wide(row, cols) + kb.cvt(col, Type::u64())).named("at");
        if (residual) acc = acc + loadF32(kb, kb.index(res, at, bytesOf(s)), s, true, "residual");
        storeF32(kb, kb.index(y, at, bytesOf(s)), acc, s);
      },
      "col");
  kb.ret();
  return finish(kb, m, diags);
}

}  // namespace

void addMoe(std::vector<Template>& out) {
  OptionSpec k = option("k", int64_t{2}, "experts per token (slots)");
  k.min = 1;
  k.max = 8;
  OptionSpec groupsOpt = option("groups", int64_t{1},
                                "group-limited routing: the experts in this many groups of ceil_div(n, groups) "
                                "(DeepSeek's n_group; 1: no groups)");
  groupsOpt.min = 1;
  groupsOpt.max = 32;
  OptionSpec topGroupsOpt = option("topk_groups", int64_t{0},
                                   "the groups whose experts may be chosen: the best topk_groups by group_score "
                                   "(DeepSeek's topk_group; 0: every group)");
  topGroupsOpt.min = 0;
  topGroupsOpt.max = 32;
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
  out.push_back({
      "moe_combine",
      "y[r * cols + j] = residual[r * cols + j] + sum_s weights[r * slots + s] * h[(r * slots + s) * cols + j] "
      "for s < slots (the expert outputs of row r's slots, weighted as moe_route gives them; a weight of 0 adds "
      "nothing, whatever h holds; a NaN weight gives NaN), f32 fma in slot order, rounded once; one thread per "
      "element, blocks of 256, rows <= 65535 (the grid's height)",
      {dtypeOption("dtype", "storage type of y and residual"),
       choiceOption("h_dtype", "f32", {"f32", "bf16", "f16"}, "storage type of h (gemv_q writes f32)"),
       option("residual", false, "add the pointer residual (rows x cols, after y) to the sum")},
      buildMoeCombine,
      [](const Options&) {
        return LaunchRule{{kBlock}, {ceilDiv(Expr::param("cols"), kBlock), Expr::param("rows")}, 0};
      },
  });
  out.back().elements = allElements({storageElements({"y", "residual"}), storageElements({"h"}, "h_dtype")});
  out.back().extents = [](const Options&) {
    const Expr rows = Expr::param("rows"), cols = Expr::param("cols"), slots = Expr::param("slots");
    return Template::Extents{{"h", rows * slots * cols}, {"weights", rows * slots}, {"y", rows * cols},
                             {"residual", rows * cols}};
  };
}

}  // namespace tn::kernels::lib
