// Rotary position embedding in place on q and k (docs/kernels.md): one warp per (token, head),
// one lane per rotated pair, q heads and k heads side by side in grid x.
#include "kernels/Library.h"

#include <numbers>
#include <string>

namespace tn::kernels::lib {

using ir::Mod;
using ir::Type;

namespace {

constexpr unsigned kHeadsPerBlock = 4;  // warps per block, one head each

// 2*pi split for Cody-Waite reduction: kTwoPiHi is 2*pi rounded to f32, kTwoPiLo the rest, so
// angle - k*hi - k*lo (two fmas) keeps the error near one f32 rounding of the small result.
constexpr float kTwoPiHi = 6.28318548202514648f;
constexpr float kTwoPiLo = static_cast<float>(2.0 * std::numbers::pi - static_cast<double>(kTwoPiHi));
constexpr float kInvTwoPi = static_cast<float>(0.5 / std::numbers::pi);

std::optional<ir::Module> buildRope(Storage s, bool neox, ir::Diagnostics& diags) {
  ir::Module m = newModule();
  KernelBuilder kb(m, "rope");
  Value q = kb.param(kGlobalPtr, "q");
  Value k = kb.param(kGlobalPtr, "k");
  Value tokens = kb.param(Type::u32(), "tokens");
  Value qHeads = kb.param(Type::u32(), "q_heads");
  Value kHeads = kb.param(Type::u32(), "k_heads");
  Value headDim = kb.param(Type::u32(), "head_dim");
  Value posOffset = kb.param(Type::u32(), "pos_offset");
  Value theta = kb.param(Type::f32(), "theta");
  kb.reqntid(32, kHeadsPerBlock);
  unsigned bytes = bytesOf(s);

  Value lane = kb.tid(Mod::X, "lane");
  Value head = kb.mad(kb.ctaid(Mod::X), kb.u32(kHeadsPerBlock), kb.tid(Mod::Y), "head");
  kb.if_then(head >= qHeads + kHeads, [&] { kb.ret(); }, "idle");
  Value isQ = (head < qHeads).named("is_q");
  Value base = kb.select(isQ, q, k, "base");
  Value heads = kb.select(isQ, qHeads, kHeads, "heads");
  Value h = kb.select(isQ, head, head - qHeads, "h");
  Value half = (headDim >> 1u).named("half");
  Value d64 = kb.cvt(headDim, Type::u64());
  // Pair i turns at theta^(-2i/head_dim) = 2^(i * expStep) radians per position.
  Value expStep = (kb.lg2(theta) * kb.rcp(kb.cvt(headDim, Type::f32())) * -2.0f).named("exp_step");

  kb.for_range(
      kb.ctaid(Mod::Y), tokens, kb.nctaid(Mod::Y),
      [&](Value t) {
        Value row = kb.index(base, (kb.mul_wide(t, heads) + kb.cvt(h, Type::u64())) * d64, bytes, "row");
        Value pos = kb.cvt(posOffset + t, Type::f32(), "pos");
        kb.for_range(
            lane, half, 32u,
            [&](Value i) {
              Value freq = kb.ex2(kb.cvt(i, Type::f32()) * expStep, "freq");
              Value angle = (pos * freq).named("angle");
              // sin/cos.approx are accurate only near [-pi, pi]; positions reach 1e5 radians.
              Value turns = kb.cvt(angle * kInvTwoPi, Type::f32(), {Mod::Rni}, "turns");
              Value r = kb.fma(-turns, kb.f32(kTwoPiHi), angle);
              r = kb.fma(-turns, kb.f32(kTwoPiLo), r).named("reduced");
              Value sn = kb.sin(r, "sin"), cs = kb.cos(r, "cos");
              Value ia = neox ? i : i << 1u;
              Value ib = neox ? i + half : ia + 1u;
              Value pa = kb.index(row, ia, bytes, "pa"), pb = kb.index(row, ib, bytes, "pb");
              Value a = loadF32(kb, pa, s, false, "a"), b = loadF32(kb, pb, s, false, "b");
              storeF32(kb, pa, a * cs - b * sn, s);
              storeF32(kb, pb, a * sn + b * cs, s);
            },
            {.label = "pairs", .iv = "i"});
      },
      {.label = "tokens", .iv = "t"});
  kb.ret();
  for (const ir::Diagnostic& d : kb.diagnostics().all()) diags.report(d.severity, d.file, d.loc, d.message);
  if (!kb.ok()) return std::nullopt;
  return m;
}

OptionSpec layoutOption() {
  OptionSpec o;
  o.name = "layout";
  o.type = OptionType::String;
  o.defaultValue = std::string("neox");
  o.doc = "which elements form a rotated pair: \"neox\" i and i + head_dim/2, \"interleaved\" 2i and 2i + 1";
  o.choices = {"neox", "interleaved"};
  return o;
}

}  // namespace

void addRope(std::vector<Template>& out) {
  out.push_back({
      "rope",
      "rotary embedding in place on q (tokens x q_heads x head_dim) and k (tokens x k_heads x head_dim): token t "
      "is at position pos_offset + t and pair i turns by pos * theta^(-2i/head_dim); an odd head_dim leaves its "
      "last element unchanged; one warp per (token, head), 4 heads per block",
      {dtypeOption(), layoutOption()},
      [](const Options& o, unsigned, ir::Diagnostics& d) {
        return buildRope(storageOption(o), o.text("layout") == "neox", d);
      },
      [](const Options&) {
        return LaunchRuleText{{32, kHeadsPerBlock}, {"ceil_div(q_heads + k_heads, 4)", "min(tokens, 65535)"}, "0"};
      },
  });
}

}  // namespace tn::kernels::lib
