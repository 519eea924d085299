// Sampling's penalties on the tokens a sequence has seen (docs/kernels.md): the repetition,
// frequency and presence penalties of vLLM and llama.cpp, applied to the logits in place before
// sample_cutoff and argmax's sample; logit_bias, a request's own biases of chosen tokens
// (OpenAI's logit_bias); and token_bitmask, the allowed-token masks of constrained decoding (a
// grammar's), which set every other logit to -inf.
#include "kernels/Library.h"

namespace tn::kernels::lib {

using ir::Mod;
using ir::Scalar;
using ir::Type;

namespace {

constexpr unsigned kBlock = 256;
constexpr uint32_t kEmpty = 0xFFFFFFFFu;  // a free slot of the table (no token id is that large)

// Elements a thread takes an iteration of the insert and apply loops, all their global loads
// issued before the first is used: one loop iteration waits one load, not one a token (a row of
// 2048 ids is 8 a thread, its table of 4097 slots 17).
constexpr unsigned kBatch = 8;

// One block per row. The row's n tokens are counted in an open-addressing hash table of 2n + 1
// slots of (token, count), so that it is never more than half full and a probe sequence always
// ends: in dynamic shared memory, or with `globalTable` in the row's own slots of the `table`
// parameter (histories too long for shared memory; the kernel clears them itself, so the
// caller's workspace needs no initialization). Each thread inserts its tokens (atom.cas claims a
// slot, atom.add counts), then after a barrier each distinct token's logit is rewritten once, by
// the thread that owns its slot, from its count: the result does not depend on the order of the
// atomics.
// Both loops take kBatch elements i, i + 256, ... a thread an iteration; an index past the end
// reads element i again (and does nothing with it), and a thread's empty slots read a logit that
// one of its own slots of the batch rewrites (after the read), so no load leaves its tensor or
// meets another thread's store.
std::optional<ir::Module> buildPenalties(Storage s, bool perRow, bool globalTable, ir::Diagnostics& diags) {
  ir::Module m = newModule();
  KernelBuilder kb(m, "logit_penalties");
  Value logits = kb.param(kGlobalPtr, "logits");
  Value tokens = kb.param(kGlobalPtr, "tokens");
  Value tableP = globalTable ? kb.param(kGlobalPtr, "table") : Value();
  kb.param(Type::u32(), "rows");  // read by the launch rule
  Value cols = kb.param(Type::u32(), "cols");
  Value n = kb.param(Type::u32(), "n");
  Value repetitionP = rowParam(kb, Type::f32(), "repetition", perRow);
  Value frequencyP = rowParam(kb, Type::f32(), "frequency", perRow);
  Value presenceP = rowParam(kb, Type::f32(), "presence", perRow);
  kb.reqntid(kBlock);

  Value tid = kb.tid(Mod::X, "tid");
  Value row = kb.ctaid(Mod::X, "row");
  Value slots = (n * 2u + 1u).named("slots");
  // Either way the block's own table: its barriers order the clearing, the atomics and the reads
  // of global memory as they do shared memory's (each slot read after the barrier that follows
  // the last atomic on it).
  Value table = globalTable ? kb.index(tableP, kb.mul_wide(row, slots * 2u), 4, "row_table")
                            : kb.shared_addr(kb.shared_dynamic("table", Type::u32(), 8), "table");
  auto keyAt = [&](Value slot) { return kb.index(table, slot * 2u, 4, "key_at"); };
  auto countAt = [&](Value slot) { return kb.index(table, slot * 2u + 1u, 4, "count_at"); };
  kb.for_range(tid, slots, kBlock, [&](Value i) {
    kb.store(keyAt(i), kb.u32(kEmpty));
    kb.store(countAt(i), kb.u32(0));
  }, {.label = "clear", .iv = "i"});
  kb.bar_sync();

  // The batch's indices i, i + 256, ... below `end`: (index to read, whether it is in range; the
  // first always is).
  auto batch = [&](Value i, Value end) {
    std::vector<std::pair<Value, Value>> out = {{i, kb.pred(true)}};
    for (unsigned u = 1; u < kBatch; ++u) {
      Value iu = (i + kBlock * u).named("i_next");
      Value in = (iu < end).named("in_range");
      out.push_back({kb.select(in, iu, i, "i_read"), in});
    }
    return out;
  };

  Value trow = kb.index(tokens, kb.mul_wide(row, n), 4, "trow");
  kb.for_range(tid, n, kBlock * kBatch, [&](Value i) {
    std::vector<std::pair<Value, Value>> is = batch(i, n);
    std::vector<Value> ts;
    for (auto [iu, in] : is) ts.push_back(kb.load(kb.index(trow, iu, 4), Type::u32(), {Mod::NcMod}, "token"));
    for (unsigned u = 0; u < kBatch; ++u) {
      Value t = ts[u];
      // Ids past the vocabulary (the padding of shorter histories) count for nothing.
      kb.if_then((is[u].second & (t < cols)).named("counts"), [&] {
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
    }
  }, {.label = "insert", .iv = "i"});
  kb.bar_sync();

  // Each distinct token's logit, once: the repetition penalty divides a positive logit and
  // multiplies a negative one; then count * frequency + presence (rounded once) is subtracted.
  Value repetition = rowValue(kb, repetitionP, Type::f32(), perRow, row, "repetition_r");
  Value frequency = rowValue(kb, frequencyP, Type::f32(), perRow, row, "frequency_r");
  Value presence = rowValue(kb, presenceP, Type::f32(), perRow, row, "presence_r");
  Value xrow = kb.index(logits, kb.mul_wide(row, cols), bytesOf(s), "xrow");
  kb.for_range(tid, slots, kBlock * kBatch, [&](Value i) {
    std::vector<std::pair<Value, Value>> is = batch(i, slots);
    std::vector<Value> ts, seen;
    for (auto [iu, in] : is) {
      ts.push_back(kb.load(keyAt(iu), Type::u32(), "seen"));
      seen.push_back((in & (ts.back() != kEmpty)).named("occupied"));
    }
    // The batch's last occupied slot's token: where its empty slots read.
    Value any = seen[0], fallback = ts[0];
    for (unsigned u = 1; u < kBatch; ++u) {
      any = (any | seen[u]).named("any");
      fallback = kb.select(seen[u], ts[u], fallback, "fallback");
    }
    kb.if_then(any, [&] {
      std::vector<Value> ps, xs;
      for (unsigned u = 0; u < kBatch; ++u) {
        ps.push_back(kb.index(xrow, kb.select(seen[u], ts[u], fallback, "t_read"), bytesOf(s), "logit_at"));
        xs.push_back(loadF32(kb, ps.back(), s, false, "logit"));
      }
      for (unsigned u = 0; u < kBatch; ++u)
        kb.if_then(seen[u], [&] {
          Value count = kb.cvt(kb.load(countAt(is[u].first), Type::u32(), "count"), Type::f32(), "times");
          Value x = kb.select(xs[u] > 0.0f, xs[u] / repetition, xs[u] * repetition, "repeated");
          storeF32(kb, ps[u], x - kb.fma(count, frequency, presence, "penalty"), s);
        }, "apply");
    }, "batch");
  }, {.label = "apply", .iv = "i"});
  kb.ret();
  return finish(kb, m, diags);
}

constexpr unsigned kMaskBlock = 256;
constexpr unsigned kMaskGroup = 8;  // elements a thread: one byte of a mask word
constexpr unsigned kMaskSpan = kMaskBlock * kMaskGroup;  // elements a block

// Block (c, r) covers elements [c * kMaskSpan, (c + 1) * kMaskSpan) of row r, thread t the 8 of
// byte t % 4 of mask word c * 64 + t / 4. Where the row is 16-byte aligned and the 8 lie inside
// it, by 16-byte accesses (one of bf16/f16, two of f32): a byte of zeros stores -inf without a
// read, a byte of ones does nothing, and a mixed byte reads the 8, replaces the masked ones' bits
// by -inf's and stores all 8 (the allowed ones' bits unchanged, NaN payloads too): whole 32-byte
// sectors, where a store of each masked element alone leaves sectors partly written (which HBM,
// its ECC computed over whole sectors, must complete by a read: our reading of the H200's 0.31 x
// the copy, not a measured fact). Elsewhere (a row's tail, a misaligned row) the
// masked elements are stored -inf one by one and the others not touched.
// With `indices`, block row y masks row indices[y] of logits and of the mask (xgrammar's indices:
// the rows of a batch that have a grammar), skipping an index at or past `batch`.
std::optional<ir::Module> buildTokenBitmask(Storage s, bool indexed, ir::Diagnostics& diags) {
  ir::Module m = newModule();
  KernelBuilder kb(m, "token_bitmask");
  Value logits = kb.param(kGlobalPtr, "logits");
  Value mask = kb.param(kGlobalPtr, "mask");
  Value indices = indexed ? kb.param(kGlobalPtr, "indices") : Value();
  kb.param(Type::u32(), "rows");  // read by the launch rule
  Value cols = kb.param(Type::u32(), "cols");
  Value batch = indexed ? kb.param(Type::u32(), "batch") : Value();
  kb.reqntid(kMaskBlock);

  Value tid = kb.tid(Mod::X, "tid");
  Value row = kb.ctaid(Mod::Y, "row");
  Value inBatch = kb.pred(true);
  if (indexed) {
    row = kb.load(kb.index(indices, row, 4), Type::u32(), {Mod::NcMod}, "index");
    inBatch = (row < batch).named("in_batch");
  }
  Value first = kb.mad(kb.ctaid(Mod::X, "chunk"), kb.u32(kMaskSpan), tid * kMaskGroup, "first");
  kb.if_then((first < cols) & inBatch, [&] {
    Value words = (((cols - 1u) >> 5u) + 1u).named("words");  // ceil_div(cols, 32), cols >= 1 here
    Value word = kb.load(kb.index(kb.index(mask, kb.mul_wide(row, words), 4, "mask_row"), first >> 5u, 4, "word_at"),
                         Type::u32(), {Mod::NcMod}, "word");
    Value bits = ((word >> ((first >> 3u) & 3u) * 8u) & 0xFFu).named("bits");
    Value xrow = kb.index(logits, kb.mul_wide(row, cols), bytesOf(s), "xrow");
    Value at = kb.index(xrow, first, bytesOf(s), "at");
    Value whole = ((cols - first >= kMaskGroup) & allAligned(kb, {xrow}, 16, "row_aligned")).named("whole");
    kb.if_else(
        whole,
        [&] {
          // 16-byte aligned: the row is, and `first` is a multiple of 8 elements (16 or 32 bytes).
          Value p = assumeAligned16(kb, at, "at16");
          const unsigned V = vecElems(s);
          auto vec = [&](unsigned v) { return v == 0 ? p : kb.ptradd(p, kb.u64(16)); };
          kb.if_else(
              bits == 0u,
              [&] {
                const std::vector<Value> inf(V, negInf(kb));
                for (unsigned v = 0; v < kMaskGroup; v += V) storeVecF32(kb, vec(v), inf, s);
              },
              [&] {
                kb.if_then(bits != 0xFFu, [&] {
                  // Element e's bits are word e (f32), or half e % 2 of word e / 2.
                  const Type v4 = Type::of(Scalar::B32, 4);
                  std::vector<Value> raw;
                  for (unsigned v = 0; v < kMaskGroup; v += V) raw.push_back(kb.load(vec(v), v4, "raw"));
                  const unsigned perWord = 4 / bytesOf(s);
                  const uint32_t elemMask = perWord == 1 ? 0xFFFFFFFFu : 0xFFFFu;
                  const uint32_t infBits = s == Storage::F32 ? 0xFF800000u : s == Storage::BF16 ? 0xFF80FF80u : 0xFC00FC00u;
                  for (unsigned v = 0; v < raw.size(); ++v) {
                    std::vector<Value> words;
                    for (unsigned j = 0; j < 4; ++j) {
                      Value keep = kb.b32(0);
                      for (unsigned h = 0; h < perWord; ++h) {
                        const unsigned e = v * V + j * perWord + h;
                        keep = keep | kb.select(((bits >> e) & 1u) == 0u, kb.b32(0), kb.b32(elemMask << (16 * h)));
                      }
                      keep = keep.named("keep");
                      Value w = kb.extract(raw[v], j);
                      words.push_back(((w & keep) | (kb.b32(infBits) & kb.bit_not(keep))).named("masked"));
                    }
                    kb.store(vec(v * V), kb.pack(v4, words, "chunk_bits"));
                  }
                }, "mixed");
              },
              {.label = "byte"});
        },
        [&] {
          for (unsigned i = 0; i < kMaskGroup; ++i)
            kb.if_then((((bits >> i) & 1u) == 0u) & (first + i < cols), [&] {
              storeF32(kb, i == 0 ? at : kb.ptradd(at, kb.u64(i * bytesOf(s))), negInf(kb), s);
            }, "masked");
        },
        {.label = "store"});
  }, "inside");
  kb.ret();
  return finish(kb, m, diags);
}

// logit_bias: one thread per (row, pair): logits[r, ids[r * n + i]] += bias[r * n + i].
constexpr unsigned kBiasBlock = 256;

std::optional<ir::Module> buildLogitBias(Storage s, ir::Diagnostics& diags) {
  ir::Module m = newModule();
  KernelBuilder kb(m, "logit_bias");
  Value logits = kb.param(kGlobalPtr, "logits");
  Value ids = kb.param(kGlobalPtr, "ids");
  Value bias = kb.param(kGlobalPtr, "bias");
  kb.param(Type::u32(), "rows");  // read by the launch rule
  Value cols = kb.param(Type::u32(), "cols");
  Value n = kb.param(Type::u32(), "n");
  kb.reqntid(kBiasBlock);

  Value row = kb.ctaid(Mod::X, "row");
  Value i = kb.mad(kb.ctaid(Mod::Y, "chunk"), kb.u32(kBiasBlock), kb.tid(Mod::X), "pair");
  kb.if_then(i < n, [&] {
    Value at = (kb.mul_wide(row, n) + kb.cvt(i, Type::u64())).named("pair_at");
    Value id = kb.load(kb.index(ids, at, 4), Type::u32(), {Mod::NcMod}, "id");
    // Ids past the vocabulary (the padding of shorter lists) change nothing.
    kb.if_then(id < cols, [&] {
      Value b = kb.load(kb.index(bias, at, 4), Type::f32(), {Mod::NcMod}, "b");
      Value p = kb.index(logits, kb.mul_wide(row, cols) + kb.cvt(id, Type::u64()), bytesOf(s), "logit");
      storeF32(kb, p, loadF32(kb, p, s, false, "x") + b, s);
    }, "known_id");
  }, "has_pair");
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
      "of dynamic shared memory (or, with table = \"global\", of a workspace parameter)",
      {dtypeOption("dtype", "storage type of the logits; math is f32"), perRowOption("repetition, frequency and presence"),
       choiceOption("table", "shared", {"shared", "global"},
                    "where each row's hash table of (2n + 1) * 8 bytes lies: dynamic shared memory (a history of "
                    "at most about 14.5K ids on sm_90), or \"global\": u32 table[rows * (2n + 1) * 2] after tokens, "
                    "a workspace the kernel clears itself (any n below 2^30)")},
      [](const Options& o, ir::Diagnostics& d) {
        return buildPenalties(storageOption(o), o.flag("per_row"), o.text("table") == "global", d);
      },
      [](const Options& o) {
        const bool global = o.text("table") == "global";
        return LaunchRule{{kBlock}, {Expr::param("rows")}, global ? Expr(0) : Expr::param("n") * Expr(16) + Expr(8)};
      },
  });
  out.back().elements = u32Elements({"tokens", "table"});
  const Expr rows = Expr::param("rows");
  out.back().extents = allExtents({sameExtent({"logits"}, rows * Expr::param("cols")),
                                   sameExtent({"tokens"}, rows * Expr::param("n")),
                                   sameExtent({"table"}, rows * (Expr::param("n") * Expr(4) + Expr(2))),
                                   sameExtent({"repetition", "frequency", "presence"}, rows)});
  out.push_back({
      "token_bitmask",
      "in place on row r of logits (rows x cols): element j becomes -inf where bit j % 32 of the u32 word "
      "mask[r * ceil_div(cols, 32) + j / 32] is 0 (a 1 allows the token: the allowed-token bitmask of constrained "
      "decoding, as xgrammar lays it out), and keeps its bits where it is 1 (rewritten unchanged where 8 aligned "
      "elements of one mask byte mix both); blocks of 256 threads, 2048 elements each; rows <= 65535 (the grid's "
      "height)",
      {dtypeOption("dtype", "storage type of the logits"),
       option("indices", false,
              "mask only rows indices[0 ... rows) (u32, after mask) of logits and of mask, which hold batch rows "
              "(the u32 parameter after cols; an index at or past it is skipped): xgrammar's indices, the rows of "
              "a batch that have a grammar")},
      [](const Options& o, ir::Diagnostics& d) { return buildTokenBitmask(storageOption(o), o.flag("indices"), d); },
      [](const Options&) {
        return LaunchRule{{kMaskBlock}, {ceilDiv(Expr::param("cols"), kMaskSpan), Expr::param("rows")}, 0};
      },
  });
  out.back().elements = allElements({storageElements({"logits"}), u32Elements({"mask", "indices"})});
  out.back().extents = [](const Options& o) {
    const Expr masked = Expr::param(o.flag("indices") ? "batch" : "rows"), cols = Expr::param("cols");
    return Template::Extents{{"logits", masked * cols}, {"mask", masked * ceilDiv(cols, 32)}, {"indices", Expr::param("rows")}};
  };
  out.push_back({
      "logit_bias",
      "in place on row r of logits (rows x cols): logits[r, ids[r * n + i]] += bias[r * n + i] for i < n (u32 ids, "
      "f32 biases: OpenAI's logit_bias, each request its own list; -inf forbids a token); ids at or past cols are "
      "skipped (the padding of shorter lists); the ids of a row must be distinct (a repeated id leaves its logit "
      "unspecified); one thread per pair, blocks of 256 threads",
      {dtypeOption("dtype", "storage type of the logits; the sum is f32, rounded once")},
      [](const Options& o, ir::Diagnostics& d) { return buildLogitBias(storageOption(o), d); },
      [](const Options&) {
        return LaunchRule{{kBiasBlock}, {Expr::param("rows"), ceilDiv(Expr::param("n"), kBiasBlock)}, 0};
      },
  });
  out.back().elements = allElements({storageElements({"logits"}), u32Elements({"ids"})});
  out.back().extents = allExtents({sameExtent({"logits"}, rows * Expr::param("cols")),
                                   sameExtent({"ids", "bias"}, rows * Expr::param("n"))});
}

}  // namespace tn::kernels::lib
