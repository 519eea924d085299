// attention_prefill (docs/kernels.md), kernels/AttentionPrefill.cpp: what its main loops share:
// the options, the tensors' addressing and the output of a warp's rows.
#pragma once

#include <functional>
#include <optional>
#include <string_view>

#include "kernels/Library.h"

namespace tn::kernels::lib::prefill {

struct Config {
  Storage s;
  unsigned dim;
  bool causal, lse, varlen;
  ir::Scalar half() const { return s == Storage::BF16 ? ir::Scalar::BF16 : ir::Scalar::F16; }
  unsigned rowBytes() const { return dim * 2; }
};
Config configOf(const Options& o);

// Two f32 rounded to the storage type as one b32: lo in bits 15:0.
Value packHalf(KernelBuilder& kb, const Config& c, Value lo, Value hi);

// Element 0 of sequence row `firstRow` (u64) and head `head` of p [rows, heads, dim].
Value headBase(KernelBuilder& kb, const Config& c, Value p, Value firstRow, Value heads, Value head, std::string_view name);

// Where the rows of a warp go: rows[0] and rows[1] (query positions g and g + 8 of the warp's 16)
// of head qh, sequence b (first row qFirst, u64, in o; its length seqQ).
struct Output {
  Value out, lse;  // lse: invalid without the option
  Value qFirst, seqQ, qHeads, qh, b;
  Value scale2;  // scale · log2 e
  Value t;       // lane % 4
  Value rows[2];
};

// Sums the partial row sums l over the quad, and writes o = acc / l (zeros for a row without
// keys) and the log-sum-exp of rows[0] and rows[1] below seqQ. m: the rows' running maxes in raw
// score units; acc(j, e): element e of the 16 x 8 accumulator tile j (j < dim / 8) in mma's C
// layout (e < 2 row g, else g + 8; columns 8 j + 2 t + (e & 1)).
void storeRows(KernelBuilder& kb, const Config& c, const Output& o, const Value m[2], const Value l[2],
               const std::function<Value(unsigned tile, unsigned e)>& acc);

}  // namespace tn::kernels::lib::prefill
