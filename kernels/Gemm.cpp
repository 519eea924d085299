// gemm: C = act(alpha * op(A) op(B) + beta * C + bias) + residual, strided batched, for any
// sizes and leading dimensions (docs/kernels.md). This file holds the template, the pieces its
// members share (kernels/Gemm.h: the epilogue and split-K's reduction, reduceSplits) and the SIMT
// f32 member: register-blocked FFMA over shared-memory tiles. The tensor-core members are in
// kernels/GemmTc.cpp and kernels/GemmWgmma.cpp.
//
// A block of 256 threads (16 x 16) owns a tile_m x tile_n tile of C and walks K in steps of 8.
// Each step, A's tile_m x 8 slice and B's 8 x tile_n slice go through registers into shared
// memory, both k-major (As[kk][i], Bs[kk][j]) with rows padded by 4 words: the stores of every
// layout and the 16-byte fragment reads are free of bank conflicts. Thread (tx, ty) accumulates
// rows q*64 + 4ty + r and columns q*64 + 4tx + c (tile/16 of each, in 4-wide groups), reading
// one 16-byte vector of As and of Bs per group and k. Two shared buffers alternate (the loop
// body does two K steps, so each buffer is a fixed array): the next step's global loads are
// issued before the current step's FMAs, one barrier per step.
//
// Edges: a load outside the matrix reads a clamped address inside it and is replaced by 0, so
// partial tiles need no branches in the main loop; the epilogue writes only elements inside C.
// When beta is 0, C is not read (as BLAS specifies: it may hold anything, NaN included).
#include "kernels/Gemm.h"

#include <functional>
#include <string>

namespace tn::kernels::lib::gemm {

using ir::Mod;
using ir::Scalar;
using ir::SharedArray;
using ir::Type;

namespace {

constexpr unsigned kBK = 8;   // K per step
constexpr unsigned kPad = 4;  // words after each k row of a shared tile

Storage storageOf(Output o) { return o == Output::BF16 ? Storage::BF16 : o == Output::F16 ? Storage::F16 : Storage::F32; }

Value activate(KernelBuilder& kb, Activation act, Value x) {
  switch (act) {
    case Activation::None: return x;
    case Activation::Relu: return relu(kb, x);
    case Activation::Gelu: return geluTanh(kb, x);
    case Activation::GeluErf: return geluErf(kb, x);
    case Activation::Silu: return silu(kb, x);
  }
  return x;
}

}  // namespace

Fp8 bCodesOf(const Options& o) {
  return fp8Named(o.text("dtype")) == Fp8::None ? fp8Named(o.text("b_dtype")) : Fp8::None;
}

std::optional<Config> configOf(const Options& o, ir::Diagnostics* diags) {
  auto fail = [&](const std::string& message) -> std::optional<Config> {
    if (diags) diags->report(ir::Severity::Error, "", {}, message);
    return std::nullopt;
  };
  Config c;
  const std::string& in = o.text("dtype");
  c.in = in == "tf32" ? Input::Tf32
         : in == "bf16" ? Input::BF16
         : in == "f16" ? Input::F16
         : in == "s8" ? Input::S8
         : in == "u8" ? Input::U8
         : in == "fp8_e4m3" ? Input::E4M3
         : in == "fp8_e5m2" ? Input::E5M2
                      : Input::F32;
  const bool integer = c.in == Input::S8 || c.in == Input::U8;
  const bool fp8 = c.codes() != Fp8::None;
  const std::string& out = o.text("out_dtype");
  if (out == "auto")
    c.out = integer                                 ? Output::S32
            : c.in == Input::BF16 || fp8            ? Output::BF16
            : c.in == Input::F16                    ? Output::F16
                                                    : Output::F32;
  else
    c.out = out == "s32" ? Output::S32 : out == "bf16" ? Output::BF16 : out == "f16" ? Output::F16 : Output::F32;
  if (integer != (c.out == Output::S32))
    return fail("out_dtype '" + out + "' does not go with dtype '" + in + "' (s8 and u8 give s32; float inputs f32, bf16 or f16)");
  c.a = o.text("a_layout") == "row" ? Layout::Row : Layout::Col;
  c.b = o.text("b_layout") == "row" ? Layout::Row : Layout::Col;
  c.tileM = static_cast<unsigned>(o.integer("tile_m"));
  c.tileN = static_cast<unsigned>(o.integer("tile_n"));
  c.stages = static_cast<unsigned>(o.integer("stages"));
  c.warps = static_cast<unsigned>(o.integer("warps"));
  if (c.in == Input::F32 && (c.stages != 3 || c.warps != 8))
    return fail("stages and warps set the tensor-core members; the f32 SIMT member always runs 8 warps over two "
                "buffers");
  c.wgmma = o.text("mainloop") == "wgmma";
  c.blocks = static_cast<unsigned>(o.integer("blocks"));
  if (c.wgmma) {
    if (c.in != Input::BF16 && c.in != Input::F16 && !fp8)
      return fail("mainloop 'wgmma' multiplies bf16, f16 or fp8 codes, not '" + in + "'");
    if (fp8 && (o.text("a_layout") != "row" || o.text("b_layout") != "col"))
      return fail("mainloop 'wgmma' with dtype '" + in + "' needs a_layout = \"row\" and b_layout = \"col\": wgmma "
                  "reads fp8 operands K-major only (mainloop 'mma' takes every layout)");
    if (c.tileM != 128 || (c.tileN != 128 && c.tileN != 256))
      return fail("mainloop 'wgmma' takes tile_m = 128 and tile_n = 128 or 256");
    if (c.warps != 8) return fail("mainloop 'wgmma' always runs 3 warpgroups: leave warps at its default");
  } else if (c.tileN > 128) {
    return fail("tile_n = " + std::to_string(c.tileN) + " needs mainloop 'wgmma'; mma.sync members take 64 or 128");
  }
  c.splitK = o.flag("split_k");
  c.bias = o.flag("bias");
  c.residual = o.flag("residual");
  const std::string& a = o.text("activation");
  c.act = a == "relu" ? Activation::Relu
          : a == "gelu" ? Activation::Gelu
          : a == "gelu_erf" ? Activation::GeluErf
          : a == "silu" ? Activation::Silu
                        : Activation::None;
  if (integer && c.act != Activation::None && c.act != Activation::Relu)
    return fail("activation '" + a + "' needs a float output; s8 and u8 take 'none' or 'relu'");
  const std::string& bType = o.text("b_dtype");
  c.bCodes = bCodesOf(o);
  c.bScales = o.flag("b_scales");
  c.aScales = o.flag("a_scales");
  c.scaleBlock = static_cast<unsigned>(o.integer("scale_block"));
  c.fp8Cvt = fp8Cvt(o);
  if (c.bScales && c.bCodes == Fp8::None && !fp8)
    return fail("b_scales needs fp8 B (b_dtype = \"fp8_e4m3\" or \"fp8_e5m2\", or dtype fp8_e4m3 or fp8_e5m2)");
  if (c.aScales && !fp8) return fail("a_scales needs fp8 A (dtype = \"fp8_e4m3\" or \"fp8_e5m2\")");
  // W8A8: B's codes in b_dtype's format (the other one: a mixed form), or A's.
  if (fp8) c.bFormat = bType == "auto" ? c.codes() : fp8Named(bType);
  if (c.scaleBlock != 0) {
    if (!fp8 || !c.aScales || !c.bScales)
      return fail("scale_block = " + std::to_string(c.scaleBlock) + " scales fp8 A and B by blocks: it needs dtype "
                  "fp8_e4m3 or fp8_e5m2 with a_scales and b_scales");
    // mma.sync: a warp's tiles of 16 x 8 (the tile's share), twice over with the partial sums.
    const unsigned warpTiles = (c.tileM / 32) * (c.tileN / (c.warps / 2) / 8);
    if (!c.wgmma && warpTiles > 8)
      return fail("scale_block = " + std::to_string(c.scaleBlock) + " on mainloop 'mma' takes at most 8 mma tiles a "
                  "warp (tile_m = 64 with tile_n = 128 at 8 warps, 64 x 64 at 4; these options give " +
                  std::to_string(warpTiles) + "): a warp holds a group's partial sums beside the tile's (mainloop "
                  "'auto' gives that member tile_m = 64 itself)");
    if (c.wgmma && c.tileN != 128)
      return fail("scale_block = " + std::to_string(c.scaleBlock) + " takes tile_n = 128: a consumer holds the block's "
                  "sums beside the wgmma accumulator");
  }
  if (c.bCodes != Fp8::None) {
    if (c.in != Input::BF16 && c.in != Input::F16)
      return fail("b_dtype '" + bType + "' needs dtype bf16 or f16: the codes become A's type as they are staged, for "
                  "the tensor cores");
  }
  c.experts = o.flag("experts");
  if (c.experts) {
    if (c.in == Input::F32 || integer)
      return fail("experts takes a float tensor-core dtype (tf32, bf16, f16, fp8), not '" + in + "'");
    if (c.splitK) return fail("experts does not go with split_k");
  }
  return c;
}

Params declareParams(KernelBuilder& kb, const Config& c) {
  Params p;
  p.a = kb.param(kGlobalPtr, "a");
  p.b = kb.param(kGlobalPtr, "b");
  p.c = kb.param(kGlobalPtr, "c");
  if (c.bias) p.bias = kb.param(kGlobalPtr, "bias");
  if (c.residual) p.residual = kb.param(kGlobalPtr, "residual");
  if (c.bScales) p.bScales = kb.param(kGlobalPtr, "b_scales");
  if (c.aScales) p.aScales = kb.param(kGlobalPtr, "a_scales");
  if (c.experts) p.tileExperts = kb.param(kGlobalPtr, "tile_experts");
  p.m = kb.param(Type::u32(), "m");
  p.n = kb.param(Type::u32(), "n");
  p.k = kb.param(Type::u32(), "k");
  p.lda = kb.param(Type::u32(), "lda");
  p.ldb = kb.param(Type::u32(), "ldb");
  p.ldc = kb.param(Type::u32(), "ldc");
  p.batch = kb.param(Type::u32(), "batch");  // mma.sync members: the grid's z extent (launch rule)
  p.strideA = kb.param(Type::u64(), "stride_a");
  p.strideB = kb.param(Type::u64(), "stride_b");
  p.strideC = kb.param(Type::u64(), "stride_c");
  if (c.experts) p.nExperts = kb.param(Type::u32(), "n_experts");
  const Type scale = c.integer() ? Type::of(Scalar::S32) : Type::f32();
  p.alpha = kb.param(scale, "alpha");
  p.beta = kb.param(scale, "beta");
  if (c.splitK) {
    p.splits = kb.param(Type::u32(), "splits");
    p.workspace = kb.param(kGlobalPtr, "workspace");
  }
  return p;
}

std::vector<Value> valuesOf(size_t first, size_t count, const AccFn& at) {
  std::vector<Value> v;
  for (size_t i = first; i < first + count; ++i) v.push_back(at(i));
  return v;
}

namespace {

// A batched member's split after its K loop: z = batch * splits + split, and the tile's number
// over (x, y, batch). The split is taken by `rem` here and by subtraction before the loop
// (batchAndSplit), so that the two are not merged: a value computed before the K loop and used
// after it would hold a register through the loop (ptxas spills it where the loop is tight).
Split splitAfterLoop(KernelBuilder& kb, const Params& p) {
  Split s;
  s.count = kb.max(p.splits, kb.u32(1), "splits");
  Value z = kb.ctaid(Mod::Z, "z");
  s.index = (z % s.count).named("split");
  Value gx = kb.nctaid(Mod::X), gy = kb.nctaid(Mod::Y);
  s.tile = (((z / s.count) * gy + kb.ctaid(Mod::Y)) * gx + kb.ctaid(Mod::X)).named("tile");
  s.tiles = (gx * gy * (kb.nctaid(Mod::Z) / s.count)).named("tiles");
  return s;
}

}  // namespace

std::pair<Value, Split> batchAndSplit(KernelBuilder& kb, const Config& c, const Params& p) {
  if (!c.splitK) return {kb.ctaid(Mod::Z, "batch_index"), Split{}};
  Split s;
  s.count = kb.max(p.splits, kb.u32(1), "splits");
  Value z = kb.ctaid(Mod::Z, "z");
  Value batch = (z / s.count).named("batch_index");
  s.index = (z - batch * s.count).named("split");
  return {batch, s};
}

StepRange splitSteps(KernelBuilder& kb, const Split& s, Value steps) {
  if (!s.count.valid()) return {kb.u32(0), steps};
  Value q = (steps / s.count).named("steps_each"), r = (steps % s.count).named("steps_left");
  Value first = (s.index * q + kb.min(s.index, r)).named("first_step");
  Value count = (q + kb.select((s.index < r).named("one_more"), kb.u32(1), kb.u32(0))).named("split_steps");
  return {first, count};
}

void reduceSplits(KernelBuilder& kb, const Config& c, const Params& p, const Split& split, unsigned threads,
                  Value thread, size_t count, const AccFn& acc, size_t chunk, const StoreFn& store) {
  if (!c.splitK) return store(0, count, acc);
  // A batched member's split, computed again here rather than kept live through the K loop.
  const Split s = split.tile.valid() ? split : splitAfterLoop(kb, p);
  const Type word = c.integer() ? Type::s32() : Type::f32();
  const uint64_t sliceBytes = uint64_t{4} * threads * count;  // one split's partial of a tile
  // The thread's word of accumulator 0 in split `split`'s partial; accumulator i is i * threads
  // words on (a warp's stores and loads are coalesced).
  Value partials = kb.ptradd(p.workspace, kb.mul_wide(s.tiles, kb.u32(4 * kSplitCounters)), "partials");
  auto slot = [&](Value split) {
    Value unit = kb.mul_wide(s.tile, s.count) + kb.cvt(split, Type::u64());
    return kb.ptradd(partials, (unit * sliceBytes + kb.cvt(thread << 2u, Type::u64())).named("slot_off"), "slot");
  };
  Value unsplit = (s.count == 1u).named("unsplit");
  kb.if_then(unsplit, [&] { store(0, count, acc); }, "unsplit");
  kb.if_then(!unsplit, [&] {
    Value mine = slot(s.index);
    for (size_t i = 0; i < count; ++i) kb.store(kb.ptradd(mine, kb.u64(4 * threads * i)), acc(i));
    // Release: the partial is visible before the count that says so (and acquire below).
    kb.membar(Mod::Gl);
    Value counterIndex = kb.mul_wide(s.tile, kb.u32(kSplitCounters)) + kb.cvt(thread, Type::u64());
    Value counter = kb.index(p.workspace, counterIndex.named("counter_index"), 4, "counter");
    Value arrived = kb.atom(Mod::AInc, counter, (s.count - 1u).named("wrap"), "arrived");
    kb.if_then((arrived == (s.count - 1u)).named("last"), [&] {
      kb.membar(Mod::Gl);
      Value zero = c.integer() ? kb.s32(0) : kb.f32(0.0f);
      // `chunk` accumulators at a time, summed and stored, so that few values are live.
      for (size_t i0 = 0; i0 < count; i0 += chunk) {
        const size_t n = std::min(chunk, count - i0);
        std::vector<Value> sum = kb.for_range(
            kb.u32(0), s.count, kb.u32(1), std::vector<Value>(n, zero),
            [&](Value split, std::span<Value> carried) {
              Value from = slot(split);
              std::vector<Value> r;
              for (size_t i = 0; i < n; ++i) {
                Value at = kb.ptradd(from, kb.u64(4 * threads * (i0 + i)));
                r.push_back(carried[i] + kb.load(at, word, {Mod::Cg}, "partial"));
              }
              return r;
            },
            {.label = "splits", .iv = "split"});
        store(i0, n, [&](size_t i) { return sum[i - i0]; });
      }
    }, "reduce");
  }, "split_k");
}

Value batchBase(KernelBuilder& kb, Value p, Value stride, Value z, unsigned bytes, std::string_view name) {
  return kb.ptradd(p, kb.cvt(z, Type::u64()) * stride * bytes, name);
}

void storeResults(KernelBuilder& kb, const Config& c, const Params& p, Value z, const std::vector<Value>& rows,
                  const std::vector<Value>& cols, const std::vector<Value>& acc, size_t first) {
  const size_t row0 = first / cols.size(), rowCount = acc.size() / cols.size();
  const Storage st = storageOf(c.out);
  const unsigned bytes = c.integer() ? 4 : bytesOf(st);
  Value cBatch = z.valid() ? batchBase(kb, p.c, p.strideC, z, bytes, "c_batch") : p.c;
  Value resBatch = !c.residual ? Value() : z.valid() ? batchBase(kb, p.residual, p.strideC, z, bytes, "residual_batch") : p.residual;
  auto load = [&](Value ptr, bool readOnly, std::string_view name) {
    if (c.integer()) return readOnly ? kb.load(ptr, Type::of(Scalar::S32), {Mod::NcMod}, name) : kb.load(ptr, Type::of(Scalar::S32), name);
    return loadF32(kb, ptr, st, readOnly, name);
  };
  std::vector<Value> biasOf(cols.size()), scaleOf(cols.size(), p.alpha);
  for (size_t j = 0; j < cols.size() && (c.bias || c.columnScales()); ++j) {
    Value col = kb.min(cols[j], p.n - 1u, "bias_col");  // clamped: used only where col < n
    if (c.bias) biasOf[j] = load(kb.index(p.bias, col, bytes), true, "bias");
    if (c.columnScales())
      scaleOf[j] = (p.alpha * kb.load(kb.index(p.bScales, col, 4), Type::f32(), {Mod::NcMod}, "b_scale")).named("col_scale");
  }
  auto epilogue = [&](bool readC) {
    for (size_t i = 0; i < rowCount; ++i) {
      kb.if_then((rows[row0 + i] < p.m).named("row_in"), [&] {
        Value rowOff = kb.mul_wide(rows[row0 + i], p.ldc, "row_off");
        // a_scales: the row's scale (batch z's rows after the others'), times the product scaled
        // by alpha (and b_scales[j]).
        Value rowScale;
        if (c.rowScales()) {
          Value at = z.valid() ? kb.mul_wide(z, p.m) + kb.cvt(rows[row0 + i], Type::u64()) : kb.cvt(rows[row0 + i], Type::u64());
          rowScale = kb.load(kb.index(p.aScales, at.named("a_scale_at"), 4), Type::f32(), {Mod::NcMod}, "a_scale");
        }
        for (size_t j = 0; j < cols.size(); ++j) {
          kb.if_then((cols[j] < p.n).named("col_in"), [&] {
            Value off = (rowOff + kb.cvt(cols[j], Type::u64())).named("c_off");
            Value pcij = kb.index(cBatch, off, bytes, "pc");
            Value v = scaleOf[j] * acc[i * cols.size() + j];
            if (c.rowScales()) v = rowScale * v;
            if (c.integer()) {
              if (readC) v = v + p.beta * load(pcij, false, "c_in");
              if (c.bias) v = v + biasOf[j];
              if (c.act == Activation::Relu) v = kb.max(v, kb.s32(0));
              if (c.residual) v = v + load(kb.index(resBatch, off, bytes), true, "res");
              kb.store(pcij, v);
              return;
            }
            if (readC) v = kb.fma(p.beta, load(pcij, false, "c_in"), v);
            if (c.bias) v = v + biasOf[j];
            v = activate(kb, c.act, v);
            if (c.residual) v = v + load(kb.index(resBatch, off, bytes), true, "res");
            storeF32(kb, pcij, v, st);
          }, "col");
        }
      }, "row");
    }
  };
  Value betaZero = (c.integer() ? p.beta == 0 : p.beta == 0.0f).named("beta_zero");
  kb.if_then(betaZero, [&] { epilogue(false); }, "overwrite");
  kb.if_then(!betaZero, [&] { epilogue(true); }, "accumulate");
}

namespace {

// One factor (A or B) of the product, seen as its tile: `rows` is the tile's extent along M
// (A) or N (B), K the other. Element (r, kk) of the factor is at
//   Row-major A / column-major B: r * ld + kk   (contiguous along K)
//   Column-major A / row-major B: kk * ld + r   (contiguous along M or N)
struct Factor {
  Value base;     // the batch's matrix
  Value ld;       // u32
  Value extent;   // m (A) or n (B)
  Value origin;   // the block's first row along M or N
  unsigned rows;  // tile_m or tile_n
  bool alongK;    // contiguous along K
  SharedArray tile;  // two buffers of 8 k rows of rows + 4 words
  unsigned bufferWords() const { return kBK * (rows + kPad); }
};

// Where this thread's elements of one K step come from and go to. Element j of the thread is
// index tid + 256j of the tile's rows*8: a warp's 32 consecutive indices walk the contiguous
// direction of the operand (coalesced loads), and their shared slots kk*(rows+4) + r fall in
// 32 distinct banks for both orders. Everything here is computed once, before the K loop:
//   contiguous along K:     r = tid/8 + 32j, kk = tid%8
//   contiguous along M/N:   r = tid%rows,   kk = tid/rows + (256/rows)j
// Rows past the matrix read its last row instead: they feed only rows (A) or columns (B) of
// C that are never stored, so they need no zeroing; K past k does, in every step.
struct Stager {
  std::vector<Value> rowStart;   // per element: the clamped row's first element (along K), or
                                 // the clamped row's element in k row 0 (along M/N)
  Value kk0;                     // kk of element 0
  unsigned kkStep;               // kk of element j is kk0 + kkStep * j
  Value slot0;                   // element 0's slot in buffer 0 (a shared pointer)
  std::vector<unsigned> delta;   // per element: its slot - element 0's, in words (a constant)
};

Stager stagerOf(KernelBuilder& kb, const Factor& f, Value tid) {
  Stager st;
  const unsigned count = f.rows * kBK / kThreads;
  Value last = (f.extent - f.origin - 1u).named("last_row");  // >= 0: the block exists
  Value r0 = f.alongK ? (tid >> 3u).named("r0") : (tid % f.rows).named("r0");
  st.kk0 = f.alongK ? (tid & 7u).named("kk0") : (tid / f.rows).named("kk0");
  st.kkStep = f.alongK ? 0 : kThreads / f.rows;
  for (unsigned j = 0; j < count; ++j) {
    Value r = f.alongK ? r0 + 32 * j : r0;
    if (j == 0 || f.alongK) {
      Value row = (f.origin + kb.min(r, last)).named("row");
      Value offset = f.alongK ? kb.mul_wide(row, f.ld, "row_off") : kb.cvt(row, Type::u64(), "row_off");
      st.rowStart.push_back(kb.index(f.base, offset, 4, "row_start"));
    } else {
      st.rowStart.push_back(st.rowStart[0]);
    }
    st.delta.push_back(f.alongK ? 32 * j : st.kkStep * j * (f.rows + kPad));
  }
  st.slot0 = kb.index(kb.shared_addr(f.tile), (st.kk0 * (f.rows + kPad) + r0).named("slot"), 4, "slot0");
  return st;
}

// The factor's values of the K step starting at k0, 0 past k. Loads read clamped addresses,
// so they are unconditional.
std::vector<Value> loadStep(KernelBuilder& kb, const Factor& f, const Stager& st, Value k0, Value k) {
  std::vector<Value> out;
  Value kLeft = (k - k0).named("k_left");  // >= 1: the step exists
  for (size_t j = 0; j < st.delta.size(); ++j) {
    Value kk = (st.kk0 + static_cast<unsigned>(st.kkStep * j)).named("kk");
    Value kc = (k0 + kb.min(kk, kLeft - 1u)).named("gk");
    Value off = f.alongK ? kb.cvt(kc, Type::u64()) : kb.mul_wide(kc, f.ld);
    Value v = kb.load(kb.index(st.rowStart[j], off.named("off"), 4), Type::f32(), {Mod::NcMod}, "g");
    out.push_back(kb.select((kk < kLeft).named("in_k"), v, kb.f32(0.0f)).named("staged"));
  }
  return out;
}

void storeStep(KernelBuilder& kb, const Factor& f, const Stager& st, unsigned buf, const std::vector<Value>& values) {
  for (size_t j = 0; j < values.size(); ++j) {
    unsigned words = buf * f.bufferWords() + st.delta[j];
    kb.store(words == 0 ? st.slot0 : kb.index(st.slot0, words, 4), values[j]);
  }
}

// The 8 K steps of one shared buffer: acc[i * tn + j] += a_i * b_j over the thread's rows i and
// columns j.
std::vector<Value> multiplyStep(KernelBuilder& kb, const Factor& a, const Factor& b, unsigned buf, Value tx,
                                Value ty, std::vector<Value> acc) {
  const Type v4 = Type::of(ir::Scalar::F32, 4);
  // The thread's column of each tile, then constant offsets: only the two columns are values.
  Value acol = kb.index(kb.shared_addr(a.tile), ty << 2u, 4, "a_col");
  Value bcol = kb.index(kb.shared_addr(b.tile), tx << 2u, 4, "b_col");
  // The 4 values of group q of the thread's row (A) or column (B) at k row kk: one 16-byte read.
  auto group = [&](Value col, const Factor& f, unsigned kk, unsigned q) {
    unsigned words = buf * f.bufferWords() + kk * (f.rows + kPad) + q * 64;
    Value vec = kb.load(words == 0 ? col : kb.index(col, words, 4), v4, "frag");
    std::vector<Value> out;
    for (unsigned l = 0; l < 4; ++l) out.push_back(kb.extract(vec, l));
    return out;
  };
  // B's fragment first, then A's one group at a time: 4 of A's values live, not 8.
  const size_t tn = b.rows / 16;
  for (unsigned kk = 0; kk < kBK; ++kk) {
    std::vector<Value> fb;
    for (unsigned q = 0; q < b.rows / 64; ++q) {
      std::vector<Value> g = group(bcol, b, kk, q);
      fb.insert(fb.end(), g.begin(), g.end());
    }
    for (unsigned q = 0; q < a.rows / 64; ++q) {
      std::vector<Value> fa = group(acol, a, kk, q);
      for (unsigned l = 0; l < 4; ++l)
        for (size_t j = 0; j < tn; ++j) acc[(q * 4 + l) * tn + j] = kb.fma(fa[l], fb[j], acc[(q * 4 + l) * tn + j]);
    }
  }
  return acc;
}

std::optional<ir::Module> buildSimt(const Config& c, ir::Diagnostics& diags) {
  ir::Module m = newModule();
  KernelBuilder kb(m, "gemm");
  const Params p = declareParams(kb, c);
  Value k = p.k;
  kb.reqntid(kThreads);

  Value tid = kb.tid(Mod::X, "tid");
  Value tx = (tid & 15u).named("tx"), ty = (tid >> 4u).named("ty");
  Value m0 = (kb.ctaid(Mod::Y) * c.tileM).named("m0");
  Value n0 = (kb.ctaid(Mod::X) * c.tileN).named("n0");
  // Not a structured binding: lambdas capture them, which clang 14 refuses.
  const std::pair<Value, Split> zs = batchAndSplit(kb, c, p);
  const Value z = zs.first;
  const Split split = zs.second;
  Factor a{batchBase(kb, p.a, p.strideA, z, 4, "a_batch"), p.lda, p.m, m0, c.tileM, c.a == Layout::Row, {}};
  Factor b{batchBase(kb, p.b, p.strideB, z, 4, "b_batch"), p.ldb, p.n, n0, c.tileN, c.b == Layout::Col, {}};
  a.tile = kb.shared("as", Type::f32(), 2 * a.bufferWords(), 16);
  b.tile = kb.shared("bs", Type::f32(), 2 * b.bufferWords(), 16);

  const unsigned perThread = (c.tileM / 16) * (c.tileN / 16);
  const StepRange range =
      splitSteps(kb, split, ((k >> 3u) + kb.select((k & 7u) != 0u, kb.u32(1), kb.u32(0))).named("steps"));
  Value steps = range.count;
  Value zero = kb.f32(0.0f, "zero");
  const Stager sa = stagerOf(kb, a, tid), sb = stagerOf(kb, b, tid);
  // Issues the loads of one K step; the returned function stores them into shared buffer `buf`.
  auto stage = [&](Value step, unsigned buf) {
    Value k0 = ((range.first + step) << 3u).named("k0");
    std::vector<Value> va = loadStep(kb, a, sa, k0, k), vb = loadStep(kb, b, sb, k0, k);
    return [&kb, &a, &b, &sa, &sb, buf, va, vb] {
      storeStep(kb, a, sa, buf, va);
      storeStep(kb, b, sb, buf, vb);
    };
  };
  std::vector<Value> acc = kb.if_else(
      (steps != 0u).named("has_k"),
      [&] {
        stage(kb.u32(0), 0)();
        kb.bar_sync();
        // Two K steps per trip: step s in buffer 0, s + 1 in buffer 1, the step after them staged
        // into buffer 0 while buffer 1 is multiplied.
        std::vector<Value> sum = kb.for_range(
            kb.u32(0), (steps - 1u).named("pairs_end"), kb.u32(2), std::vector<Value>(perThread, zero),
            [&](Value s, std::span<Value> carried) {
              auto second = stage(s + 1u, 1);
              std::vector<Value> r = multiplyStep(kb, a, b, 0, tx, ty, {carried.begin(), carried.end()});
              second();
              kb.bar_sync();
              Value next = kb.min(s + 2u, steps - 1u, "next");
              auto third = stage(next, 0);
              r = multiplyStep(kb, a, b, 1, tx, ty, std::move(r));
              kb.if_then(((s + 2u) < steps).named("has_next"), third, "stage_next");
              kb.bar_sync();
              return r;
            },
            {.label = "ksteps", .iv = "s"});
        // An odd step count leaves the last step in buffer 0.
        return kb.if_else(
            ((steps & 1u) != 0u).named("odd"), [&] { return multiplyStep(kb, a, b, 0, tx, ty, sum); },
            [&] { return sum; }, {.label = "last"});
      },
      [&] { return std::vector<Value>(perThread, zero); }, {.label = "product"});

  // Thread (tx, ty) holds rows 4ty + 64q + r and columns 4tx + 64q + c of the tile.
  std::vector<Value> rowsOf, colsOf;
  for (unsigned i = 0; i < c.tileM / 16; ++i) rowsOf.push_back((m0 + (ty << 2u) + ((i / 4) * 64 + i % 4)).named("row"));
  for (unsigned j = 0; j < c.tileN / 16; ++j) colsOf.push_back((n0 + (tx << 2u) + ((j / 4) * 64 + j % 4)).named("col"));
  reduceSplits(kb, c, p, split, kThreads, tid, acc.size(), [&](size_t i) { return acc[i]; }, colsOf.size(),
               [&](size_t first, size_t n, const AccFn& at) {
                 storeResults(kb, c, p, z, rowsOf, colsOf, valuesOf(first, n, at), first);
               });
  kb.ret();
  return finish(kb, m, diags);
}

std::optional<ir::Module> buildGemm(const Options& o, ir::Diagnostics& diags) {
  std::optional<Config> c = configOf(o, &diags);
  if (!c) return std::nullopt;
  if (!checkFp8Decode(o, c->bCodes, diags)) return std::nullopt;
  if (c->wgmma) return buildGemmWgmma(*c, diags);
  return c->in == Input::F32 ? buildSimt(*c, diags) : buildGemmTensorCore(*c, diags);
}

OptionSpec tileOption(std::string name, int64_t max, std::string doc) {
  return intOption(std::move(name), 128, 64, max, std::move(doc), 64);
}

}  // namespace
}  // namespace tn::kernels::lib::gemm

namespace tn::kernels::lib {

void addGemm(std::vector<Template>& out) {
  using namespace gemm;
  OptionSpec stages = intOption("stages", 3, 2, 4,
                                "tensor-core members: K stages in shared memory, stages - 1 of them loading while one "
                                "is multiplied (16 KiB each at 128x128 tiles, 48 KiB in all at most); the f32 SIMT "
                                "member always double-buffers");
  OptionSpec warps = intOption("warps", 8, 4, 8,
                               "tensor-core members: warps per block, 2 along M by warps/2 along N (8: 64 x 32 warp "
                               "tiles at 128 x 128, 4: 64 x 64)",
                               4);
  OptionSpec blocks = intOption("blocks", 132, 1, 65535,
                                "wgmma members: the persistent grid is min(tiles, blocks), each block taking every "
                                "blocks-th tile (with split_k: every blocks-th of tiles * splits units; 132: an H100 "
                                "SXM's SMs)");
  OptionSpec scaleBlock = intOption("scale_block", 0, 0, 128,
                                 "with an fp8 dtype, a_scales and b_scales (mma: at most 8 mma tiles a warp, tile_m 64; wgmma: tile_n "
                                 "128): 128 scales "
                                 "A and B by blocks, as DeepSeek-V3's fp8 checkpoints are: a_scales[(z * m + i) * G + "
                                 "g] per row and 128-wide K group g (G = ceil_div(k, 128), as quantize_fp8 with scales = "
                                 "\"group\" writes them), b_scales[(zb * ceil_div(n, 128) + j / 128) * G + g] per 128 x "
                                 "128 block of B (zb: the batch, 0 when stride_b is 0; with experts the tile's expert), each group's sums scaled in f32 "
                                 "registers as it completes; 0: a_scales and b_scales per row and column",
                                    128);
  out.push_back({
      "gemm",
      "C = act(alpha * A B + beta * C + bias) + residual, A (m x k), B (k x n), row-major C (m x n, ldc), strided "
      "batched (grid z = batch; wgmma: every batch's tiles in its persistent grid), blocks of 256 threads over tile_m x tile_n tiles: f32 by SIMT FFMA, tf32/bf16/f16 "
      "(f32 accumulation), s8/u8 (s32) on the tensor cores (mma.sync, sm_80+) and fp8 codes (f32; sm_89+), B also "
      "as fp8 codes (weights) converted as they are staged; any sizes and leading dimensions; C is not read when beta = 0",
      {choiceOption("dtype", "f32", {"f32", "tf32", "bf16", "f16", "s8", "u8", "fp8_e4m3", "fp8_e5m2"},
                    "element type of A and B; tf32 stores f32 and multiplies as tf32 (inputs rounded to 10 "
                    "mantissa bits); fp8_e4m3 and fp8_e5m2: A and B as fp8 codes (u8) multiplied by the fp8 tensor "
                    "cores into f32 (mma.sync on sm_89+, wgmma on sm_90a with a_layout row and b_layout col), "
                    "scaled by alpha, b_scales and a_scales"),
       choiceOption("out_dtype", "auto", {"auto", "f32", "bf16", "f16", "s32"},
                    "element type of C, bias and residual; auto: the input's for bf16/f16, bf16 for fp8, f32 for "
                    "f32/tf32, s32 for s8/u8 (which need s32)"),
       choiceOption("a_layout", "row", {"row", "col"}, "A row-major (a[i*lda + kk]) or column-major (a[kk*lda + i])"),
       choiceOption("b_layout", "row", {"row", "col"}, "B row-major (b[kk*ldb + j]) or column-major (b[j*ldb + kk])"),
       tileOption("tile_m", 128, "rows of C per block: 64 or 128 (wgmma: 128)"),
       tileOption("tile_n", 256, "columns of C per block: 64 or 128 (wgmma: 128 or 256)"),
       stages,
       warps,
       option("bias", false, "add bias[j] (parameter 'bias', n elements of out_dtype) before the activation"),
       choiceOption("activation", "none", {"none", "relu", "gelu", "gelu_erf", "silu"},
                    "applied to alpha * A B + beta * C + bias (s8/u8: none or relu)"),
       option("residual", false, "add residual[i*ldc + j] (parameter 'residual', batched like C) after the activation"),
       choiceOption("mainloop", "mma", {"mma", "wgmma", "auto"},
                    "mma: mma.sync (sm_80+); wgmma: bf16/f16 on sm_90a only, TMA loads through an mbarrier ring "
                    "(stages), a producer and two consumer warpgroups, persistent tiles of 128 x tile_n over every "
                    "batch; a and b 16-byte aligned, lda and ldb multiples of 8, with batch > 1 stride_a and "
                    "stride_b multiples of 8 or 0; auto: the wgmma member in an sm_90a target's code and the "
                    "mma.sync member in the other targets', one bundle kernel (the options must suit both; with "
                    "tile_n = 256 the mma.sync member takes 128); every mainloop takes the same parameters"),
       blocks,
       option("split_k", false,
              "split K over the run-time parameter `splits` blocks per tile (0 or 1: no split; grid z = batch * "
              "splits, wgmma: tiles * splits work units): each multiplies a share of K into the parameter "
              "`workspace`, the last to arrive sums the shares in split order and stores; workspace: 4 * tiles * "
              "(256 + splits * tile_m * tile_n) bytes, tiles = ceil_div(m, tile_m) * ceil_div(n, tile_n) * batch, "
              "its first 1024 * tiles bytes zero before the first launch (every launch leaves them zero)"),
       choiceOption("b_dtype", "auto", {"auto", "fp8_e4m3", "fp8_e5m2"},
                    "element type of B: auto (dtype's), or fp8 codes (u8, E4M3 or E5M2: weights) converted exactly to "
                    "dtype (bf16 or f16) as they are staged (mma.sync) or by the producer's other warps after TMA "
                    "(wgmma); their scale is alpha (one per tensor) or b_scales. With an fp8 dtype: B's format, "
                    "the other one for a mixed product (E4M3 x E5M2, E5M2 x E4M3: the fp8 tensor cores' mixed forms)"),
       option("b_scales", false,
              "with fp8 B (b_dtype or an fp8 dtype): column j of A B times b_scales[j] (the parameter 'b_scales', n "
              "f32 after bias and residual: a scale per output channel), before alpha"),
       option("a_scales", false,
              "with an fp8 dtype: row i of A B times a_scales[i] (the parameter 'a_scales', m f32 after b_scales, "
              "batch z's at z * m: a scale per token, as quantize_fp8 with scales = \"row\" writes them), before "
              "alpha"),
       scaleBlock,
       fp8DecodeOption(),
       option("experts", false,
              "mixture of experts (prefill, a grouped GEMM): B holds n_experts matrices stride_b "
              "elements apart (bias and b_scales n_experts rows of n); the rows of A are tiles of tile_m pairs, in "
              "moe_align's order with tile = tile_m, and M tile t multiplies expert tile_experts[t] (the pointer "
              "'tile_experts' after a_scales, the u32 'n_experts' after stride_c); a tile of 0xFFFFFFFF is left "
              "alone, one of an unknown expert (>= n_experts) gets NaN")},
      buildGemm,
      [](const Options& o) {
        if (std::optional<Config> c = configOf(o); c && c->wgmma) return wgmmaLaunchRule(*c);
        Expr z = Expr::param("batch");
        if (o.flag("split_k")) z = z * max(Expr::param("splits"), Expr(1));
        return LaunchRule{{32 * static_cast<unsigned>(o.integer("warps"))},
                          {ceilDiv(Expr::param("n"), static_cast<unsigned>(o.integer("tile_n"))),
                           ceilDiv(Expr::param("m"), static_cast<unsigned>(o.integer("tile_m"))), z},
                          0};
      },
      [](const Options& o) {
        // tile_n = 256 is the wgmma member's; the mma.sync member then takes its widest, 128.
        std::vector<Options> members = wgmmaWhereItRuns(o);
        if (members.size() == 2 && o.integer("tile_n") > 128) members[1].set("tile_n", int64_t{128});
        // Block scales on mma.sync take 64-row tiles (registers); with experts, whose tiles of rows
        // are moe_align's (the same on every target), 64-column ones.
        if (members.size() == 2 && o.integer("scale_block") != 0)
          members[1].set(o.flag("experts") ? "tile_n" : "tile_m", int64_t{64});
        return withFp8Decode(std::move(members), o, bCodesOf(o));
      },
  });
  // A and B (tf32: stored as f32; s8/u8 and fp8 codes: moved as raw bytes), C, bias and residual
  // (out_dtype).
  // (Read from the options themselves: an "auto" member's options, tile_n = 256 for one, need not
  // make a valid Config.)
  out.back().elements = [](const Options& o) {
    const std::string& dtype = o.text("dtype");
    std::string outType = o.text("out_dtype");
    const bool fp8 = dtype.starts_with("fp8");
    if (outType == "auto") outType = dtype == "s8" || dtype == "u8" ? "s32" : dtype == "tf32" ? "f32" : fp8 ? "bf16" : dtype;
    auto scalar = [](const std::string& t) -> Template::Element {
      if (fp8Named(t) != Fp8::None) return fp8Element(fp8Named(t));
      return t == "bf16" ? Scalar::BF16 : t == "f16" ? Scalar::F16 : t == "s8" ? Scalar::S8 : t == "u8" ? Scalar::U8
             : t == "s32" ? Scalar::S32 : Scalar::F32;  // f32 and tf32 (stored as f32)
    };
    const Template::Element in = scalar(dtype), out = scalar(outType);
    const Template::Element b = o.text("b_dtype") == "auto" ? in : scalar(o.text("b_dtype"));
    return Template::ElementTypes{{"a", in},           {"b", b},           {"c", out},
                                  {"bias", out},       {"residual", out},  {"b_scales", Scalar::F32},
                                  {"a_scales", Scalar::F32}, {"tile_experts", Scalar::U32}};
  };
  // A, B, C and residual as their layouts, leading dimensions and batch strides span them; bias n.
  out.back().extents = [](const Options& o) {
    const Expr m = Expr::param("m"), n = Expr::param("n"), k = Expr::param("k"), batch = Expr::param("batch");
    const bool aRow = o.text("a_layout") == "row", bRow = o.text("b_layout") == "row";
    // A matrix of `rows` rows of `cols` elements, `ld` apart, in each of the batch's planes.
    auto span = [&](const char* stride, const Expr& rows, const char* ld, const Expr& cols) {
      return stridedSpan({{batch, Expr::param(stride)}, {rows, Expr::param(ld)}}, cols);
    };
    const Expr a = aRow ? span("stride_a", m, "lda", k) : span("stride_a", k, "lda", m);
    const Expr c = span("stride_c", m, "ldc", n);
    if (o.flag("experts")) {
      // B's n_experts matrices, stride_b apart; bias and b_scales a row of n each.
      const Expr experts = Expr::param("n_experts");
      auto planes = [&](const Expr& rows, const Expr& cols) {
        return stridedSpan({{experts, Expr::param("stride_b")}, {rows, Expr::param("ldb")}}, cols);
      };
      // Block scales: b_scales per expert, 128-column block and 128-wide K group.
      const auto g = static_cast<unsigned>(o.integer("scale_block"));
      const Expr groups = g ? ceilDiv(k, g) : Expr(1);
      return Template::Extents{{"a", a},
                               {"b", bRow ? planes(k, n) : planes(n, k)},
                               {"c", c},
                               {"residual", c},
                               {"bias", experts * n},
                               {"b_scales", g ? experts * ceilDiv(n, g) * groups : experts * n},
                               {"a_scales", batch * m * groups},
                               {"tile_experts", ceilDiv(m, static_cast<unsigned>(o.integer("tile_m")))}};
    }
    const Expr b = bRow ? span("stride_b", k, "ldb", n) : span("stride_b", n, "ldb", k);
    if (o.integer("scale_block") != 0) {
      // Per 128-wide K group: a_scales [batch x m x groups], b_scales [(batch or 1) x n/128 x groups].
      const auto g = static_cast<unsigned>(o.integer("scale_block"));
      const Expr groups = ceilDiv(k, g), bPlanes = Expr(1) + (max(batch, Expr(1)) - 1) * min(Expr::param("stride_b"), Expr(1));
      return Template::Extents{{"a", a}, {"b", b}, {"c", c}, {"residual", c}, {"bias", n},
                               {"b_scales", bPlanes * ceilDiv(n, g) * groups}, {"a_scales", batch * m * groups}};
    }
    return Template::Extents{{"a", a}, {"b", b}, {"c", c}, {"residual", c}, {"bias", n}, {"b_scales", n}, {"a_scales", batch * m}};
  };
}

}  // namespace tn::kernels::lib
