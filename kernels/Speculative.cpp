// Speculative decoding's verification (docs/kernels.md): spec_verify accepts or rejects a draft
// model's tokens against the target model's probabilities by rejection sampling (Leviathan et al.,
// Chen et al.; vLLM's rejection sampler), so that the tokens it emits are distributed as the
// target model alone would sample them, and draws the token that follows the accepted ones.
#include "kernels/Library.h"

#include <string>

namespace tn::kernels::lib {

using ir::Mod;
using ir::SharedArray;
using ir::Type;

namespace {

constexpr unsigned kVerifyBlock = 256;
constexpr uint32_t kNoToken = 0xFFFFFFFFu;  // an output slot past the emitted tokens

// The constants that key spec_verify's randomness apart from argmax's (the same seed given to
// both draws unrelated numbers): the request's key, and within it each position's.
constexpr uint32_t kRequestSalt = 0x2545F491u;
constexpr uint32_t kPositionSalt = 0x5BD1E995u;

// One block per request r, which has k draft tokens draft[r * k + i] and k + 1 target rows
// target[(r * (k + 1) + i) * cols ...] (position i's distribution p_i; row k is the one after the
// last draft). Every thread first tests some positions (a thread a position): draft token t of
// position i is accepted when q_i(t) > 0 and p_i(t) / q_i(t) >= u_i (u_i uniform from the hash of
// the request's key and i; q_i the draft's row, or 1 without draft_probs), rejected otherwise, and
// ends the drafts when t >= cols. The first position that is not accepted, s (k when every draft
// is), is found by a block minimum over (position << 1 | ends), then the block samples position
// s's token by the exponential race: the index of the largest r_v / E_v, E_v standard
// exponential noise hashed from (key, s, v), is a sample of r normalized. r is the residual
// max(p_s - q_s, 0) after a rejection (without draft_probs: p_s with the rejected token's entry
// 0), p_s itself at the end of the drafts; a residual without a positive entry (rounding, or p_s
// equal to q_s) falls back to p_s. The scores are lg2 r_v - lg2 E_v, -inf where r_v is not
// positive (or NaN), so the argmax's order of (key, index) picks the token; a row without a
// positive entry at all gives index 0. With cols 0 every slot is 0xFFFFFFFF and emitted 0.
std::optional<ir::Module> buildSpecVerify(Storage s, bool draftProbs, bool perRow, ir::Diagnostics& diags) {
  ir::Module m = newModule();
  KernelBuilder kb(m, "spec_verify");
  Value target = kb.param(kGlobalPtr, "target");
  Value qP = draftProbs ? kb.param(kGlobalPtr, "draft_probs") : Value();
  Value draft = kb.param(kGlobalPtr, "draft");
  Value out = kb.param(kGlobalPtr, "out");
  Value emitted = kb.param(kGlobalPtr, "emitted");
  kb.param(Type::u32(), "rows");  // read by the launch rule
  Value k = kb.param(Type::u32(), "k");
  Value cols = kb.param(Type::u32(), "cols");
  Value seedP = rowParam(kb, Type::u32(), "seed", perRow);
  kb.reqntid(kVerifyBlock);
  SharedArray stopScratch = kb.shared("stop_scratch", Type::u32(), kVerifyBlock / 32);
  SharedArray drawScratch = kb.shared("draw_scratch", Type::u32(), 4 * (kVerifyBlock / 32));

  Value tid = kb.tid(Mod::X, "tid");
  Value req = kb.ctaid(Mod::X, "request");
  Value seed = rowValue(kb, seedP, Type::u32(), perRow, req, "seed_r");
  // As argmax's sampler keys a row: a per_row seed alone, else the launch's seed mixed with the
  // request's index.
  Value key = fmix32(seed ^ (perRow ? kb.u32(kRequestSalt) : fmix32(req * 0x9E3779B1u + kRequestSalt))).named("key");
  Value drafts = kb.index(draft, kb.mul_wide(req, k), 4, "drafts");
  Value firstRow = kb.mul_wide(req, k + 1u, "first_row");  // the request's first target row
  Value outRow = kb.index(out, firstRow, 4, "out_row");
  // No tokens at all (cols 0): nothing is read, nothing emitted.
  kb.if_then(cols == 0u, [&] {
    kb.for_range(tid, k + 1u, kVerifyBlock, [&](Value i) { kb.store(kb.index(outRow, i, 4), kb.u32(kNoToken)); },
                 {.label = "pad", .iv = "i"});
    kb.if_then(tid == 0u, [&] { kb.store(kb.index(emitted, req, 4), kb.u32(0)); }, "none");
    kb.ret();
  }, "no_tokens");
  auto targetRow = [&](Value i) {
    return kb.index(target, (firstRow + kb.cvt(i, Type::u64())) * kb.cvt(cols, Type::u64()), bytesOf(s), "p_row");
  };
  auto draftRow = [&](Value i) {
    return kb.index(qP, (kb.mul_wide(req, k) + kb.cvt(i, Type::u64())) * kb.cvt(cols, Type::u64()), bytesOf(s), "q_row");
  };

  // The first position that is not accepted, as (i << 1) | ends.
  Value none = ((k << 1u) | 1u).named("all_accepted");
  std::vector<Value> mine = kb.for_range(
      tid, k, kVerifyBlock, {none},
      [&](Value i, std::span<Value> c) {
        Value t = kb.load(kb.index(drafts, i, 4), Type::u32(), {Mod::NcMod}, "t");
        Value ends = (t >= cols).named("ends");
        Value tRead = kb.select(ends, kb.u32(0), t, "t_read");  // a valid index for the loads
        Value p = loadF32(kb, kb.index(targetRow(i), tRead, bytesOf(s)), s, true, "p_t");
        Value q = draftProbs ? loadF32(kb, kb.index(draftRow(i), tRead, bytesOf(s)), s, true, "q_t") : kb.f32(1.0f);
        Value u = uniformOf(kb, fmix32(key ^ (i * 0x9E3779B1u)));
        Value accepted = ((q > 0.0f) & (p / q >= u) & (t < cols)).named("accepted");
        Value code = kb.select(accepted, c[0], kb.min(c[0], (i << 1u) | kb.select(ends, kb.u32(1), kb.u32(0))), "stop");
        return std::vector<Value>{code};
      },
      {.label = "test", .iv = "i", .carried = {"stop"}});
  Value stop = blockCombine(kb, {mine[0]}, tid, stopScratch,
                            [&](const auto& a, const auto& b) { return std::vector<Value>{kb.min(a[0], b[0])}; },
                            Order::Commutative)[0];
  Value s0 = (stop >> 1u).named("s");
  Value plain = ((stop & 1u) == 1u).named("plain");  // sample p_s itself

  // Position s's token: the best score of the residual, and of p_s (the fallback). The branch is
  // uniform: after a rejection s < k, so the rejected token and q_s exist.
  Value pRow = targetRow(s0);
  Value posKey = fmix32(key ^ (s0 * 0x9E3779B1u + kPositionSalt)).named("position_key");
  auto draw = [&](bool residual) {
    Value rejected = residual && !draftProbs ? kb.load(kb.index(drafts, s0, 4), Type::u32(), {Mod::NcMod}, "rejected_t")
                                             : Value();
    Value qRow = residual && draftProbs ? draftRow(s0) : Value();
    Best empty = nothing(kb);
    std::vector<Value> best = kb.for_range(
        tid, cols, kVerifyBlock, {empty.key, empty.idx, empty.key, empty.idx},
        [&](Value v, std::span<Value> c) {
          Value p = loadF32(kb, kb.index(pRow, v, bytesOf(s)), s, true, "p");
          Value noise = kb.lg2(exponentialOf(kb, fmix32((v * 0x9E3779B1u) ^ posKey)), "lg2_e");
          auto score = [&](Value w) { return kb.select(w > 0.0f, kb.lg2(w) - noise, negInf(kb), "score"); };
          Best bp = better(kb, {c[2], c[3]}, {orderKey(kb, score(p)), v});
          if (!residual) return std::vector<Value>{bp.key, bp.idx, bp.key, bp.idx};
          Value r = draftProbs ? kb.max(p - loadF32(kb, kb.index(qRow, v, bytesOf(s)), s, true, "q"), kb.f32(0.0f), "residual")
                               : kb.select(v == rejected, kb.f32(0.0f), p, "residual");
          Best br = better(kb, {c[0], c[1]}, {orderKey(kb, score(r)), v});
          return std::vector<Value>{br.key, br.idx, bp.key, bp.idx};
        },
        {.label = residual ? "draw_residual" : "draw", .iv = "v", .carried = {"best_r", "best_r_idx", "best_p", "best_p_idx"}});
    return best;
  };
  std::vector<Value> best = kb.if_else(plain, [&] { return draw(false); }, [&] { return draw(true); },
                                       {.label = "source", .results = {"best_r", "best_r_idx", "best_p", "best_p_idx"}});
  std::vector<Value> all = blockCombine(kb, best, tid, drawScratch, [&](const auto& a, const auto& b) {
    Best r = better(kb, {a[0], a[1]}, {b[0], b[1]}), p = better(kb, {a[2], a[3]}, {b[2], b[3]});
    return std::vector<Value>{r.key, r.idx, p.key, p.idx};
  }, Order::Commutative);
  // A score above -inf's key: the residual has a positive entry. Else p_s's best, which is index
  // 0 (the first of equal keys) when p_s has none either.
  Value finite = (all[0] > orderKey(kb, negInf(kb))).named("residual_drawn");
  Value token = kb.select(finite, all[1], all[3], "token");

  // The accepted drafts, the drawn token, then kNoToken to the end of the request's k + 1 slots.
  kb.for_range(tid, k + 1u, kVerifyBlock, [&](Value i) {
    Value v = kb.if_else(
        i < s0, [&] { return kb.load(kb.index(drafts, i, 4), Type::u32(), {Mod::NcMod}, "accepted_t"); },
        [&] { return kb.select(i == s0, token, kb.u32(kNoToken)); }, {.label = "slot", .results = {"emit"}})[0];
    kb.store(kb.index(outRow, i, 4), v);
  }, {.label = "write", .iv = "i"});
  kb.if_then(tid == 0u, [&] { kb.store(kb.index(emitted, req, 4), s0 + 1u); }, "count");
  kb.ret();
  return finish(kb, m, diags);
}

}  // namespace

void addSpeculative(std::vector<Template>& out) {
  out.push_back({
      "spec_verify",
      "speculative decoding's verification by rejection sampling, one block of 256 threads per request r "
      "(rows requests): draft token t = draft[r * k + i] (u32) is accepted when q(t) > 0 and p(t) / q(t) >= u, "
      "p the target's probabilities of position i (row r * (k + 1) + i of target, rows x (k + 1) rows of cols), "
      "q the draft's (row r * k + i of draft_probs), u uniform hashed from seed, r and i; the first position that is "
      "not accepted gets a token drawn from the residual max(p - q, 0) normalized, and "
      "one after k accepted drafts, or at a draft id >= cols (the end of a shorter draft), from p itself; "
      "out[r * (k + 1) ...] (u32) holds the accepted drafts, the drawn token, then 0xFFFFFFFF; emitted[r] (u32) "
      "counts the tokens, accepted plus 1 (0 when cols is 0)",
      {dtypeOption("dtype", "storage type of target and draft_probs (probabilities; math is f32)"),
       option("draft_probs", true,
              "the draft's probabilities, the pointer draft_probs after target (rows x k rows of cols, of dtype); "
              "false: a draft without them (n-gram or greedy drafts, q(t) = 1: t accepted with probability p(t), and a "
              "rejection draws from p without t)"),
       perRowOption("the seeds (the u32 parameter seed; a request's seed alone keys its randomness)")},
      [](const Options& o, ir::Diagnostics& d) {
        return buildSpecVerify(storageOption(o), o.flag("draft_probs"), o.flag("per_row"), d);
      },
      [](const Options&) { return LaunchRule{{kVerifyBlock}, {Expr::param("rows")}, 0}; },
  });
  out.back().elements = allElements({storageElements({"target", "draft_probs"}), u32Elements({"draft", "out", "emitted", "seed"})});
  const Expr rows = Expr::param("rows"), k = Expr::param("k"), cols = Expr::param("cols");
  out.back().extents = allExtents({sameExtent({"target"}, rows * (k + Expr(1)) * cols),
                                   sameExtent({"draft_probs"}, rows * k * cols), sameExtent({"draft"}, rows * k),
                                   sameExtent({"out"}, rows * (k + Expr(1))), sameExtent({"emitted", "seed"}, rows)});
}

}  // namespace tn::kernels::lib
