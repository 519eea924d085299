// gemm: C = act(alpha * op(A) op(B) + beta * C + bias) + residual, strided batched, for any
// sizes and leading dimensions (docs/kernels.md). This file holds the SIMT f32 member of the
// family: register-blocked FFMA over shared-memory tiles.
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
#include <string>

#include "kernels/Library.h"

namespace tn::kernels::lib {

namespace {

using ir::Mod;
using ir::SharedArray;
using ir::Type;

constexpr unsigned kThreads = 256;
constexpr unsigned kBK = 8;   // K per step
constexpr unsigned kPad = 4;  // words after each k row of a shared tile

enum class Layout : uint8_t { Row, Col };
enum class Activation : uint8_t { None, Relu, Gelu, GeluErf, Silu };

struct Config {
  Layout a, b;
  unsigned tileM, tileN;
  bool bias, residual;
  Activation act;
};

Config configOf(const Options& o) {
  Config c;
  c.a = o.text("a_layout") == "row" ? Layout::Row : Layout::Col;
  c.b = o.text("b_layout") == "row" ? Layout::Row : Layout::Col;
  c.tileM = static_cast<unsigned>(o.integer("tile_m"));
  c.tileN = static_cast<unsigned>(o.integer("tile_n"));
  c.bias = o.flag("bias");
  c.residual = o.flag("residual");
  const std::string& a = o.text("activation");
  c.act = a == "relu" ? Activation::Relu
          : a == "gelu" ? Activation::Gelu
          : a == "gelu_erf" ? Activation::GeluErf
          : a == "silu" ? Activation::Silu
                        : Activation::None;
  return c;
}

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

std::optional<ir::Module> buildGemm(const Options& o, ir::Diagnostics& diags) {
  const Config c = configOf(o);
  ir::Module m = newModule();
  KernelBuilder kb(m, "gemm");
  Value pa = kb.param(kGlobalPtr, "a");
  Value pb = kb.param(kGlobalPtr, "b");
  Value pc = kb.param(kGlobalPtr, "c");
  Value pbias = c.bias ? kb.param(kGlobalPtr, "bias") : Value();
  Value pres = c.residual ? kb.param(kGlobalPtr, "residual") : Value();
  Value rows = kb.param(Type::u32(), "m");
  Value cols = kb.param(Type::u32(), "n");
  Value k = kb.param(Type::u32(), "k");
  Value lda = kb.param(Type::u32(), "lda");
  Value ldb = kb.param(Type::u32(), "ldb");
  Value ldc = kb.param(Type::u32(), "ldc");
  kb.param(Type::u32(), "batch");  // the grid's z extent (launch rule)
  Value strideA = kb.param(Type::u64(), "stride_a");
  Value strideB = kb.param(Type::u64(), "stride_b");
  Value strideC = kb.param(Type::u64(), "stride_c");
  Value alpha = kb.param(Type::f32(), "alpha");
  Value beta = kb.param(Type::f32(), "beta");
  kb.reqntid(kThreads);

  Value tid = kb.tid(Mod::X, "tid");
  Value tx = (tid & 15u).named("tx"), ty = (tid >> 4u).named("ty");
  Value m0 = (kb.ctaid(Mod::Y) * c.tileM).named("m0");
  Value n0 = (kb.ctaid(Mod::X) * c.tileN).named("n0");
  Value z = kb.ctaid(Mod::Z, "batch_index");
  auto batchBase = [&](Value p, Value stride, std::string_view name) {
    return kb.ptradd(p, kb.cvt(z, Type::u64()) * stride * 4u, name);
  };
  Factor a{batchBase(pa, strideA, "a_batch"), lda, rows, m0, c.tileM, c.a == Layout::Row, {}};
  Factor b{batchBase(pb, strideB, "b_batch"), ldb, cols, n0, c.tileN, c.b == Layout::Col, {}};
  a.tile = kb.shared("as", Type::f32(), 2 * a.bufferWords(), 16);
  b.tile = kb.shared("bs", Type::f32(), 2 * b.bufferWords(), 16);

  const unsigned perThread = (c.tileM / 16) * (c.tileN / 16);
  Value steps = ((k >> 3u) + kb.select((k & 7u) != 0u, kb.u32(1), kb.u32(0))).named("steps");
  Value zero = kb.f32(0.0f, "zero");
  const Stager sa = stagerOf(kb, a, tid), sb = stagerOf(kb, b, tid);
  // Issues the loads of one K step; the returned function stores them into shared buffer `buf`.
  auto stage = [&](Value step, unsigned buf) {
    Value k0 = (step << 3u).named("k0");
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

  // Epilogue: element (i, j) of the thread's block of C.
  Value cBatch = batchBase(pc, strideC, "c_batch");
  Value resBatch = c.residual ? batchBase(pres, strideC, "residual_batch") : Value();
  const unsigned tm = c.tileM / 16, tn = c.tileN / 16;
  auto rowOf = [&](unsigned i) { return (m0 + (ty << 2u) + ((i / 4) * 64 + i % 4)).named("row"); };
  auto colOf = [&](unsigned j) { return (n0 + (tx << 2u) + ((j / 4) * 64 + j % 4)).named("col"); };
  std::vector<Value> biasOf(tn);
  if (c.bias)
    for (unsigned j = 0; j < tn; ++j) {
      Value col = kb.min(colOf(j), cols - 1u, "bias_col");  // clamped: used only where col < n
      biasOf[j] = kb.load(kb.index(pbias, col, 4), Type::f32(), {Mod::NcMod}, "bias");
    }
  auto epilogue = [&](bool readC) {
    for (unsigned i = 0; i < tm; ++i) {
      Value row = rowOf(i);
      kb.if_then((row < rows).named("row_in"), [&] {
        Value rowOff = kb.mul_wide(row, ldc, "row_off");
        for (unsigned j = 0; j < tn; ++j) {
          Value col = colOf(j);
          kb.if_then((col < cols).named("col_in"), [&] {
            Value off = (rowOff + kb.cvt(col, Type::u64())).named("c_off");
            Value pcij = kb.index(cBatch, off, 4, "pc");
            Value v = alpha * acc[i * tn + j];
            if (readC) v = kb.fma(beta, kb.load(pcij, Type::f32(), "c_in"), v);
            if (c.bias) v = v + biasOf[j];
            v = activate(kb, c.act, v);
            if (c.residual) v = v + kb.load(kb.index(resBatch, off, 4), Type::f32(), {Mod::NcMod}, "res");
            kb.store(pcij, v);
          }, "col");
        }
      }, "row");
    }
  };
  Value betaZero = (beta == 0.0f).named("beta_zero");
  kb.if_then(betaZero, [&] { epilogue(false); }, "overwrite");
  kb.if_then(!betaZero, [&] { epilogue(true); }, "accumulate");
  kb.ret();
  return finish(kb, m, diags);
}

OptionSpec tileOption(std::string name, std::string doc) {
  OptionSpec s = option(std::move(name), int64_t{128}, std::move(doc));
  s.min = 64;
  s.max = 128;
  s.multipleOf = 64;
  return s;
}

}  // namespace

void addGemm(std::vector<Template>& out) {
  out.push_back({
      "gemm",
      "C = act(alpha * A B + beta * C + bias) + residual for f32 A (m x k), B (k x n), row-major C (m x n, "
      "ldc), strided batched (grid z = batch); SIMT FFMA over tile_m x tile_n tiles of " +
          std::to_string(kThreads) + " threads; any sizes and leading dimensions; C is not read when beta = 0",
      {choiceOption("a_layout", "row", {"row", "col"}, "A row-major (a[i*lda + kk]) or column-major (a[kk*lda + i])"),
       choiceOption("b_layout", "row", {"row", "col"}, "B row-major (b[kk*ldb + j]) or column-major (b[j*ldb + kk])"),
       tileOption("tile_m", "rows of C per block: 64 or 128"),
       tileOption("tile_n", "columns of C per block: 64 or 128"),
       option("bias", false, "add bias[j] (parameter 'bias', n floats) before the activation"),
       choiceOption("activation", "none", {"none", "relu", "gelu", "gelu_erf", "silu"},
              "applied to alpha * A B + beta * C + bias"),
       option("residual", false, "add residual[i*ldc + j] (parameter 'residual', batched like C) after the activation")},
      buildGemm,
      [](const Options& o) {
        const Config c = configOf(o);
        return LaunchRule{{kThreads},
                          {ceilDiv(Expr::param("n"), c.tileN), ceilDiv(Expr::param("m"), c.tileM), Expr::param("batch")},
                          0};
      },
  });
}

}  // namespace tn::kernels::lib
