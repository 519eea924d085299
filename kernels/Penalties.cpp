// Sampling's penalties on the tokens a sequence has seen (docs/kernels.md): the repetition,
// frequency and presence penalties of vLLM and llama.cpp, applied to the logits in place before
// sample_cutoff and argmax's sample.
#include "kernels/Library.h"

namespace tn::kernels::lib {

using ir::Mod;
using ir::Type;

namespace {

constexpr unsigned kBlock = 256;
constexpr uint32_t kEmpty = 0xFFFFFFFFu;  // a free slot of the table (no token id is that large)

// One block per row. The row's n tokens are counted in an open-addressing hash table in dynamic
// shared memory: 2n + 1 slots of (token, count), so that it is never more than half full and a
// probe sequence always ends. Each thread inserts its tokens (atom.cas claims a slot, atom.add
// counts), then after a barrier each distinct token's logit is rewritten once, by the thread that
// owns its slot, from its count: the result does not depend on the order of the atomics.
std::optional<ir::Module> buildPenalties(Storage s, bool perRow, ir::Diagnostics& diags) {
  ir::Module m = newModule();
  KernelBuilder kb(m, "logit_penalties");
  Value logits = kb.param(kGlobalPtr, "logits");
  Value tokens = kb.param(kGlobalPtr, "tokens");
  kb.param(Type::u32(), "rows");  // read by the launch rule
  Value cols = kb.param(Type::u32(), "cols");
  Value n = kb.param(Type::u32(), "n");
  Value repetitionP = rowParam(kb, Type::f32(), "repetition", perRow);
  Value frequencyP = rowParam(kb, Type::f32(), "frequency", perRow);
  Value presenceP = rowParam(kb, Type::f32(), "presence", perRow);
  kb.reqntid(kBlock);
  Value table = kb.shared_addr(kb.shared_dynamic("table", Type::u32(), 8), "table");

  Value tid = kb.tid(Mod::X, "tid");
  Value row = kb.ctaid(Mod::X, "row");
  Value slots = (n * 2u + 1u).named("slots");
  auto keyAt = [&](Value slot) { return kb.index(table, slot * 2u, 4, "key_at"); };
  auto countAt = [&](Value slot) { return kb.index(table, slot * 2u + 1u, 4, "count_at"); };
  kb.for_range(tid, slots, kBlock, [&](Value i) {
    kb.store(keyAt(i), kb.u32(kEmpty));
    kb.store(countAt(i), kb.u32(0));
  }, {.label = "clear", .iv = "i"});
  kb.bar_sync();

  Value trow = kb.index(tokens, kb.mul_wide(row, n), 4, "trow");
  kb.for_range(tid, n, kBlock, [&](Value i) {
    Value t = kb.load(kb.index(trow, i, 4), Type::u32(), {Mod::NcMod}, "token");
    // Ids past the vocabulary (the padding of shorter histories) count for nothing.
    kb.if_then(t < cols, [&] {
      // Linear probing from the token's home slot: claim an empty slot or find the token's own.
      // The table always has an empty slot, so the probe ends within `slots` steps.
      ir::BlockId probe = kb.block("probe"), next = kb.block("probe.next"), found = kb.block("probe.found");
      Value slot = kb.block_param(probe, Type::u32(), "slot");
      kb.br(probe, {((t * 0x9E3779B1u) % slots).named("home")});
      kb.set_insert_point(probe);
      Value old = kb.atom_cas(keyAt(slot), kb.u32(kEmpty), t, "old");
      kb.cbr(((old == kEmpty) | (old == t)).named("mine"), found, next);
      kb.set_insert_point(next);
      Value after = (slot + 1u).named("after");
      kb.br(probe, {kb.select(after == slots, kb.u32(0), after, "wrapped")});
      kb.set_insert_point(found);
      kb.atom(Mod::AAdd, countAt(slot), kb.u32(1), "counted");
    }, "known");
  }, {.label = "insert", .iv = "i"});
  kb.bar_sync();

  // Each distinct token's logit, once: the repetition penalty divides a positive logit and
  // multiplies a negative one; then count * frequency + presence (rounded once) is subtracted.
  Value repetition = rowValue(kb, repetitionP, Type::f32(), perRow, row, "repetition_r");
  Value frequency = rowValue(kb, frequencyP, Type::f32(), perRow, row, "frequency_r");
  Value presence = rowValue(kb, presenceP, Type::f32(), perRow, row, "presence_r");
  Value xrow = kb.index(logits, kb.mul_wide(row, cols), bytesOf(s), "xrow");
  kb.for_range(tid, slots, kBlock, [&](Value i) {
    Value t = kb.load(keyAt(i), Type::u32(), "seen");
    kb.if_then(t != kEmpty, [&] {
      Value count = kb.cvt(kb.load(countAt(i), Type::u32(), "count"), Type::f32(), "times");
      Value p = kb.index(xrow, t, bytesOf(s), "logit_at");
      Value x = loadF32(kb, p, s, false, "logit");
      x = kb.select(x > 0.0f, x / repetition, x * repetition, "repeated");
      storeF32(kb, p, x - kb.fma(count, frequency, presence, "penalty"), s);
    }, "apply");
  }, {.label = "apply", .iv = "i"});
  kb.ret();
  return finish(kb, m, diags);
}

}  // namespace

void addPenalties(std::vector<Template>& out) {
  out.push_back({
      "logit_penalties",
      "in place on row r of logits (rows x cols), for the distinct ids among the n u32 tokens[r * n ...] "
      "below cols (others are padding): x = x > 0 ? x / repetition : x * repetition, then x -= count * "
      "frequency + presence (count: the id's occurrences in the n; vLLM's and llama.cpp's penalties; "
      "1, 0, 0 leave x as it is); one block of 256 threads per row, a hash table of (2n + 1) * 8 bytes "
      "of dynamic shared memory",
      {dtypeOption("dtype", "storage type of the logits; math is f32"), perRowOption("repetition, frequency and presence")},
      [](const Options& o, ir::Diagnostics& d) { return buildPenalties(storageOption(o), o.flag("per_row"), d); },
      [](const Options&) {
        return LaunchRule{{kBlock}, {Expr::param("rows")}, Expr::param("n") * Expr(16) + Expr(8)};
      },
  });
  out.back().elements = u32Elements({"tokens"});
  const Expr rows = Expr::param("rows");
  out.back().extents = allExtents({sameExtent({"logits"}, rows * Expr::param("cols")),
                                   sameExtent({"tokens"}, rows * Expr::param("n")),
                                   sameExtent({"repetition", "frequency", "presence"}, rows)});
}

}  // namespace tn::kernels::lib
