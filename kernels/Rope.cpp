// Rotary position embedding in place on q and k (docs/kernels.md), q heads and k heads side by
// side in grid x, 4 heads per block of 128 threads. When q and k are 16-byte aligned and every
// head splits into whole vectors (see vectorOk below), the block's threads take the 16-byte
// vectors of its heads in turn, of several tokens where one token's fill at most half the block
// (a block row then holds that many tokens); otherwise one warp per (token, head), one lane per pair.
#include "kernels/Library.h"

#include <numbers>
#include <string>
#include <utility>
#include <vector>

namespace tn::kernels::lib {

using ir::Mod;
using ir::Type;

namespace {

constexpr unsigned kHeadsPerBlock = 4;  // warps per block, one head each on the scalar path
constexpr unsigned kBlock = 32 * kHeadsPerBlock;

// 2*pi split for Cody-Waite reduction: kTwoPiHi is 2*pi rounded to f32, kTwoPiLo the rest, so
// angle - k*hi - k*lo (two fmas) keeps the error near one f32 rounding of the small result.
constexpr float kTwoPiHi = 6.28318548202514648f;
constexpr float kTwoPiLo = static_cast<float>(2.0 * std::numbers::pi - static_cast<double>(kTwoPiHi));
constexpr float kInvTwoPi = static_cast<float>(0.5 / std::numbers::pi);

struct RopeOptions {
  bool neox, positions, freqFactors, attnFactor, rotaryDim;
};

std::optional<ir::Module> buildRope(Storage s, const RopeOptions& o, ir::Diagnostics& diags) {
  const bool neox = o.neox, positions = o.positions;
  ir::Module m = newModule();
  KernelBuilder kb(m, "rope");
  Value q = kb.param(kGlobalPtr, "q");
  Value k = kb.param(kGlobalPtr, "k");
  // Token t's position: positions[t] (u32, each token its own: a batch of sequences, varlen), or
  // pos_offset + t.
  Value posArray = positions ? kb.param(kGlobalPtr, "positions") : Value();
  // Pair i's frequency divided by freq_factors[i] (f32 [head_dim / 2]): the host's scaling of
  // long contexts (LLaMA-3.1's "llama3" rope scaling, LongRoPE), as llama.cpp's freq_factors.
  Value factors = o.freqFactors ? kb.param(kGlobalPtr, "freq_factors") : Value();
  Value tokens = kb.param(Type::u32(), "tokens");
  Value qHeads = kb.param(Type::u32(), "q_heads");
  Value kHeads = kb.param(Type::u32(), "k_heads");
  Value headDim = kb.param(Type::u32(), "head_dim");
  // Partial rotation (GPT-NeoX, Phi, StableLM, ChatGLM): the first rotary_dim elements of a head
  // form the pairs, the rest pass unchanged.
  Value rotaryDim = o.rotaryDim ? kb.param(Type::u32(), "rotary_dim") : Value();
  Value posOffset = positions ? Value() : kb.param(Type::u32(), "pos_offset");
  Value theta = kb.param(Type::f32(), "theta");
  // Both rotated values scaled by attn_factor (YaRN's and LongRoPE's magnitude correction).
  Value attnFactor = o.attnFactor ? kb.param(Type::f32(), "attn_factor") : Value();
  kb.reqntid(32, kHeadsPerBlock);
  unsigned bytes = bytesOf(s), V = vecElems(s);

  Value allHeads = (qHeads + kHeads).named("all_heads");
  // The rotated elements: all of the head's, or the first rotary_dim (at most head_dim).
  Value rot = o.rotaryDim ? kb.min(rotaryDim, headDim, "rot") : headDim;
  Value half = (rot >> 1u).named("half");
  Value d64 = kb.cvt(headDim, Type::u64());
  // Pair i turns at theta^(-2i/rot) = 2^(i * expStep) radians per position.
  Value expStep = (kb.lg2(theta) * kb.rcp(kb.cvt(rot, Type::f32())) * -2.0f).named("exp_step");
  // .ftz (no range fix-ups around the MUFU): the frequency lies in [1/theta, 1], never subnormal.
  auto freqOf = [&](Value i) {
    Value freq = ex2Approx(kb, kb.cvt(i, Type::f32()) * expStep, "freq");
    if (!o.freqFactors) return freq;
    return (freq * kb.rcp(kb.load(kb.index(factors, i, 4), Type::f32(), {Mod::NcMod}, "factor"))).named("freq");
  };
  // (sin, cos) of pos * freq.
  auto sinCos = [&](Value pos, Value freq) {
    Value angle = (pos * freq).named("angle");
    // sin/cos.approx are accurate only near [-pi, pi]; positions reach 1e5 radians.
    Value turns = kb.cvt(angle * kInvTwoPi, Type::f32(), {Mod::Rni}, "turns");
    Value r = kb.fma(-turns, kb.f32(kTwoPiHi), angle);
    r = kb.fma(-turns, kb.f32(kTwoPiLo), r).named("reduced");
    // .ftz: only a subnormal r changes (sin r = 0 instead of r, an error below 2^-126 of |x|).
    auto approx = [&](ir::Op op, const char* n) {
      Value v = kb.op(op, Type::f32(), {r}, {Mod::Approx, Mod::FtzMod}, n);
      return o.attnFactor ? (v * attnFactor).named(n) : v;
    };
    return std::pair{approx(ir::Op::Sin, "sin"), approx(ir::Op::Cos, "cos")};
  };
  // Head `head` counts q's heads, then k's; rowOf gives its first element in token t.
  struct Head {
    Value base, heads, h;  // q or k, its head count, the head's index in it (u64)
  };
  auto headOf = [&](Value head) {
    Value isQ = (head < qHeads).named("is_q");
    return Head{kb.select(isQ, q, k, "base"), kb.select(isQ, qHeads, kHeads, "heads"),
                kb.cvt(kb.select(isQ, head, head - qHeads), Type::u64(), "h")};
  };
  auto rowOf = [&](const Head& hd, Value t) {
    return kb.index(hd.base, (kb.mul_wide(t, hd.heads) + hd.h) * d64, bytes, "row");
  };
  // Tokens first, first + stride, ... (a block row's: ctaid.y, nctaid.y apart by default).
  auto overTokens = [&](auto body, Value first = Value(), Value stride = Value()) {
    kb.for_range(
        first.valid() ? first : kb.ctaid(Mod::Y), tokens, stride.valid() ? stride : kb.nctaid(Mod::Y),
        [&](Value t) {
          Value pos = positions ? kb.load(kb.index(posArray, t, 4), Type::u32(), {Mod::NcMod}, "position") : posOffset + t;
          body(t, kb.cvt(pos, Type::f32(), "pos"));
        },
        {.label = "tokens", .iv = "t"});
  };

  // Both neox halves (rot/2 elements each) or every interleaved chunk of V elements must be
  // whole 16-byte vectors, and so must the rows, so that with q and k aligned every vector below
  // is aligned. Nothing to rotate (rot 0) takes the scalar path, whose loop has no pair to run.
  Value dimOk = (((rot & (neox ? 2 * V - 1 : V - 1)) == 0u) & (rot != 0u)).named("dim_ok");
  if (o.rotaryDim) dimOk = (dimOk & ((headDim & (V - 1)) == 0u)).named("dim_ok");
  Value vectorOk = (allAligned(kb, {q, k}, 16) & dimOk).named("vector_ok");
  kb.if_else(
      vectorOk,
      [&] {
        // Units of work: a vector (interleaved: V/2 pairs) or a vector pair at e and e + half
        // (neox: V pairs). The block's heads have `units` each, taken by its 128 threads in turn,
        // so short heads still fill the warps; where a token's units are fewer than 128 / 2 (bf16
        // heads of 128: 32), the threads split into `subs` groups that take tokens of their own
        // (the launch rule's grid rows are that much fewer).
        unsigned pairsPerUnit = neox ? V : V / 2;
        Value units = kb.div(rot, kb.u32(neox ? 2 * V : V), "units");
        Value firstHead = (kb.ctaid(Mod::X) * kHeadsPerBlock).named("first_head");
        Value blockUnits = (kb.min(allHeads - firstHead, kb.u32(kHeadsPerBlock)) * units).named("block_units");
        Value tid0 = kb.mad(kb.tid(Mod::Y), kb.u32(32), kb.tid(Mod::X), "tid");
        Value subs = kb.max(kb.div(kb.u32(kBlock), blockUnits), kb.u32(1), "subs");
        Value sub = kb.div(tid0, blockUnits, "sub");
        Value tid = (tid0 - sub * blockUnits).named("unit0");  // below blockUnits: one unit a thread when subs > 1
        Value active = (sub < subs).named("active");
        Value firstToken = kb.mad(kb.ctaid(Mod::Y), subs, sub, "first_token");
        Value tokenStride = (kb.nctaid(Mod::Y) * subs).named("token_stride");
        // Unit u is unit j = u % units of head u / units. The divisions happen once: each step
        // (u += kBlock) advances (head, j) by (kBlock / units, kBlock % units) with one carry.
        Value stepHeads = kb.div(kb.u32(kBlock), units, "step_heads");
        Value stepJ = kb.rem(kb.u32(kBlock), units, "step_j");
        kb.for_range(
            tid, kb.select(active, blockUnits, kb.u32(0)), kBlock,
            {(firstHead + kb.div(tid, units)).named("head0"), kb.rem(tid, units, "j0")},
            [&](Value, std::span<Value> c) {
              Value head = c[0], j = c[1];
              Head hd = headOf(head);
              Value e = (j * V).named("e");
              Value firstPair = (j * pairsPerUnit).named("first_pair");
              std::vector<Value> freq;
              for (unsigned p = 0; p < pairsPerUnit; ++p) freq.push_back(freqOf(firstPair + p));
              overTokens([&](Value t, Value pos) {
                Value row = rowOf(hd, t);
                Value pa = assumeAligned16(kb, kb.index(row, e, bytes), "pa");
                Value pb = neox ? assumeAligned16(kb, kb.index(row, e + half, bytes), "pb") : pa;
                std::vector<Value> va = loadVecF32(kb, pa, s, false, "a");
                std::vector<Value> vb = neox ? loadVecF32(kb, pb, s, false, "b") : va;
                std::vector<Value> ya(va.size()), yb(vb.size());
                for (unsigned p = 0; p < pairsPerUnit; ++p) {
                  auto [sn, cs] = sinCos(pos, freq[p]);
                  // (a, b) = elements p of both vectors (neox) or elements 2p, 2p + 1 (interleaved).
                  unsigned ia = neox ? p : 2 * p, ib = neox ? p : 2 * p + 1;
                  Value a = va[ia], b = vb[ib];
                  ya[ia] = a * cs - b * sn;
                  (neox ? yb : ya)[ib] = a * sn + b * cs;
                }
                storeVecF32(kb, pa, ya, s);
                if (neox) storeVecF32(kb, pb, yb, s);
              }, firstToken, tokenStride);
              Value jNext = (j + stepJ).named("j.next");
              Value wrap = (jNext >= units).named("wrap");
              return std::vector<Value>{head + stepHeads + kb.select(wrap, kb.u32(1), kb.u32(0)),
                                        kb.select(wrap, jNext - units, jNext)};
            },
            {.label = "units", .iv = "u", .carried = {"head", "j"}});
      },
      [&] {
        Value lane = kb.tid(Mod::X, "lane");
        Value head = kb.mad(kb.ctaid(Mod::X), kb.u32(kHeadsPerBlock), kb.tid(Mod::Y), "head");
        kb.if_then(
            head < allHeads,
            [&] {
              Head hd = headOf(head);
              overTokens([&](Value t, Value pos) {
                Value row = rowOf(hd, t);
                kb.for_range(
                    lane, half, 32u,
                    [&](Value i) {
                      auto [sn, cs] = sinCos(pos, freqOf(i));
                      Value ia = neox ? i : i << 1u;
                      Value ib = neox ? i + half : ia + 1u;
                      Value pa = kb.index(row, ia, bytes, "pa"), pb = kb.index(row, ib, bytes, "pb");
                      Value a = loadF32(kb, pa, s, false, "a"), b = loadF32(kb, pb, s, false, "b");
                      storeF32(kb, pa, a * cs - b * sn, s);
                      storeF32(kb, pb, a * sn + b * cs, s);
                    },
                    {.label = "pairs", .iv = "i"});
              });
            },
            "live");
      },
      {.label = "path"});
  kb.ret();
  return finish(kb, m, diags);
}

OptionSpec layoutOption() {
  return choiceOption("layout", "neox", {"neox", "interleaved"},
                      "which elements form a rotated pair: \"neox\" i and i + head_dim/2, \"interleaved\" 2i and 2i + 1");
}

}  // namespace

void addRope(std::vector<Template>& out) {
  out.push_back({
      "rope",
      "rotary embedding in place on q (tokens x q_heads x head_dim) and k (tokens x k_heads x head_dim): token t "
      "is at position pos_offset + t (or positions[t]) and pair i turns by pos * theta^(-2i/head_dim); an odd "
      "head_dim leaves its "
      "last element unchanged; 4 heads per block of 32x4 threads: with q, k 16-byte aligned and head_dim a "
      "multiple of 2V (neox) or V (interleaved), V = 16 / element bytes, the threads take the heads' 16-byte "
      "vectors in turn (several tokens at once where 4 heads' vectors fill at most half the block: a block row "
      "of tokens each), else one warp per (token, head); blocks loop over tokens past the grid's rows",
      {dtypeOption(), layoutOption(),
       option("positions", false,
              "each token's position from positions (u32 [tokens], a pointer parameter after k) in place of "
              "pos_offset + t: tokens of several sequences, each at its own position"),
       option("freq_factors", false,
              "pair i's frequency divided by freq_factors[i] (f32 [head_dim / 2], a pointer parameter after k and "
              "positions): long-context scaling computed by the host, as LLaMA-3.1's rope scaling and LongRoPE "
              "give it"),
       option("attn_factor", false,
              "both rotated values multiplied by the f32 parameter attn_factor (after theta): YaRN's and "
              "LongRoPE's magnitude scale"),
       option("rotary_dim", false,
              "partial rotation (GPT-NeoX, Phi, StableLM): the u32 parameter rotary_dim (after head_dim) rotates "
              "only the first min(rotary_dim, head_dim) elements of each head, in place of head_dim in the pairs "
              "and frequencies above (freq_factors then has rotary_dim / 2 entries); the others are left as they are")},
      [](const Options& o, ir::Diagnostics& d) {
        return buildRope(storageOption(o),
                         {o.text("layout") == "neox", o.flag("positions"), o.flag("freq_factors"), o.flag("attn_factor"),
                          o.flag("rotary_dim")},
                         d);
      },
      [](const Options& o) {
        // Block rows: a token each, or where the 16-byte path's units of 4 heads fill at most half
        // the 128 threads, 128 / (4 * units) tokens each (units: rotated elements / (2V) for neox,
        // / V interleaved).
        const Expr dim = Expr::param("head_dim");
        const Expr rot = max(o.flag("rotary_dim") ? min(Expr::param("rotary_dim"), dim) : dim, 1);
        const unsigned V = vecElems(storageOption(o));
        const Expr perRow = max(Expr((o.text("layout") == "neox" ? 64 : 32) * V) / rot, 1);
        return LaunchRule{{32, kHeadsPerBlock},
                          {ceilDiv(Expr::param("q_heads") + Expr::param("k_heads"), 4),
                           min(ceilDiv(Expr::param("tokens"), perRow), 65535)},
                          0};
      },
  });
  out.back().elements = u32Elements({"positions"});
  out.back().extents = [](const Options& o) {
    const Expr tokens = Expr::param("tokens"), dim = Expr::param("head_dim");
    const Expr rotated = o.flag("rotary_dim") ? min(Expr::param("rotary_dim"), dim) : dim;
    return Template::Extents{{"q", tokens * Expr::param("q_heads") * dim},
                             {"k", tokens * Expr::param("k_heads") * dim},
                             {"positions", tokens},
                             {"freq_factors", rotated / 2}};
  };
}

}  // namespace tn::kernels::lib
