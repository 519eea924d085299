// attention_prefill's two main loops (docs/kernels.md): mma.sync on sm_80+
// (kernels/AttentionPrefill.cpp) and wgmma fed by TMA on sm_90a (kernels/AttentionPrefill90.cpp).
// What they share: the options, the tensors' addressing and the output of a warp's rows.
#pragma once

#include <functional>
#include <optional>
#include <string_view>

#include "kernels/Library.h"

namespace tn::kernels::lib::prefill {

struct Config {
  Storage s;
  unsigned dim;   // elements of a head of q and k
  unsigned vdim;  // elements of a head of v and o (v_head_dim; dim when the option is 0)
  bool causal, lse, varlen;
  unsigned pageSize = 0;  // k and v a paged cache (block_table, max_pages) when not 0
  bool tmaParams = false; // the wgmma member's parameters (mainloop "wgmma" or "auto")
  bool window = false;    // sliding window (causal or with windowRight): the u32 parameter window after scale
  bool windowRight = false;  // not causal, keys up to window_right past a row's position: the u32 parameter after window
  bool softcap = false;   // logit soft-capping: the f32 parameter softcap after scale (and window)
  bool alibi = false;     // ALiBi: the f32 [q_heads] parameter alibi_slopes after the other pointers
  bool bias = false;      // an additive bias tensor: the pointer bias after them, its strides after softcap
  bool sinks = false;     // attention sinks: the f32 [q_heads] pointer sinks after them (a logit a head, no value)
  Fp8 cache = Fp8::None;  // fp8 k and v (cache_dtype; mma.sync only): k_scale and v_scale after scale
  bool fp8Cvt = false;    // fp8 codes decoded by cvt.f16x2 (fp8_decode = "cvt"), else by integer instructions
  ir::Scalar half() const { return s == Storage::BF16 ? ir::Scalar::BF16 : ir::Scalar::F16; }
  unsigned rowBytes() const { return dim * 2; }    // a head's row of q (and of k in the storage type)
  unsigned vRowBytes() const { return vdim * 2; }  // a head's row of o (and of v in the storage type)
  unsigned kvBytes() const { return cache == Fp8::None ? 2 : 1; }  // an element of k and v
};
Config configOf(const Options& o);

// The kernel's parameters, the same in both members (so that mainloop = "auto" is one kernel), in
// this order: q, k, v, o, [lse], [block_table], [the varlen arrays], [alibi_slopes], [bias], [sinks], batch,
// then max_seq_q and with tmaParams q_rows and kv_rows (varlen), or seq_q, seq_k and kv_stride
// (paged: kv_rows with tmaParams); then [max_pages], q_heads, kv_heads, scale, [k_scale, v_scale], [window],
// [window_right], [softcap], [bias_batch_stride, bias_head_stride, bias_row_stride]. q_rows and kv_rows are the
// row counts of q and k/v, the extents of the wgmma member's tensor maps.
struct VarlenArrays {
  Value qOffsets, qLengths, kvOffsets, kvLengths;
};
struct Params {
  Value q, k, v, out, lse, table;  // lse, table: invalid without the options
  VarlenArrays arrays;             // varlen
  Value seqQ, seqK, kvStride;      // not varlen; kv_stride not paged
  Value maxPages;                  // paged
  Value qHeads, kvHeads, scale;  // scale: times k_scale with fp8 k (the scores are then q . k's codes)
  Value vScale;                    // fp8 v: v_scale, which the outputs are multiplied by
  Value window;                    // window: a query sees the last `window` keys up to its own
  Value windowRight;               // window_right: and the keys up to `window_right` past its own
  Value softcap;                   // softcap: scaled scores s become softcap tanh(s / softcap)
  Value alibiSlopes;               // alibi: f32 [q_heads], head h's scores gain -slope_h |i - j|
  Value bias;                      // bias: the storage type's [batch, q_heads, seq_q, seq_k] by strides
  Value sinks;                     // sinks: f32 [q_heads], head h's extra logit (scaled units) in every row's softmax
  Value biasStrides[3];            // bias: elements between sequences, heads and rows (u32; 0 broadcasts)
};
Params declareParams(KernelBuilder& kb, const Config& c);

// Two f32 rounded to the storage type as one b32: lo in bits 15:0.
Value packHalf(KernelBuilder& kb, const Config& c, Value lo, Value hi);

// Element 0 of sequence row `firstRow` (u64) and head `head` of p [rows, heads, dim] (elements of
// `bytes` bytes).
Value headBase(KernelBuilder& kb, Value p, Value firstRow, Value heads, Value head, unsigned dim, std::string_view name,
               unsigned bytes = 2);

// varlen: sequence b's lengths and first rows from the u32 [batch] arrays (ld.global.nc at a
// block-uniform address: the same in every thread, so they may bound loops holding barriers;
// kvFirst invalid without kv_offsets, as when k and v are paged).
struct Sequence {
  Value seqQ, seqK, qFirst, kvFirst;  // u32
};
Sequence loadSequence(KernelBuilder& kb, const VarlenArrays& a, Value b);

// Where the rows of a warp go: rows[0] and rows[1] (query positions g and g + 8 of the warp's 16)
// of head qh, sequence b (first row qFirst, u64, in o; its length seqQ).
struct Output {
  Value out, lse;  // lse: invalid without the option
  Value qFirst, seqQ, qHeads, qh, b;
  Value scale2;  // scale · log2 e
  Value t;       // lane % 4
  Value rows[2];
  Value vScale = {};  // fp8 v: the outputs' factor
};

// The kv head of query head qh (q_heads / kv_heads query heads per kv head, at least 1 whatever
// the arguments), and the keys [0, end) some row of the block's `rows` from q0 sees (`right`:
// the window_right parameter, invalid without the option).
Value kvHeadOf(KernelBuilder& kb, Value qh, Value qHeads, Value kvHeads);
Value keyEnd(KernelBuilder& kb, const Config& c, Value q0, unsigned rows, Value seqQ, Value seqK, Value right);
// With a sliding window, the first key row `row` sees (its position row + seq_k - seq_q, less
// window - 1; 0 for window 0); 0 without the option. The first key tile of a block is its first
// row's.
Value keyStart(KernelBuilder& kb, const Config& c, Value row, Value seqQ, Value seqK, Value window);

// One key tile's masks, online softmax and P: scores[i] is the score of row g + 8 ((i >> 1) & 1)
// of the warp's 16 (query positions rows[0] and rows[1]) and key k0 + 8 (i >> 2) + 2 t + (i & 1)
// (mma's C layout per 8 keys, which is also wgmma's accumulator layout). Keys past seq_k and,
// causal, past a row's diagonal (with window_right, past the diagonal plus window_right) weigh 0
// (the masks only on tiles that hold such a key, `keys` wide from k0; q0 is the first of the 64
// rows the tile is multiplied for), and with a window the keys before a row's window; with softcap, the scores capped first (a cap of 0: none), then
// with alibi each biased by -slope |i + seq_k - seq_q - j| (raw units: slope / scale), with bias
// by the tensor's element (i, j) (raw units: divided by scale). m, l: the
// rows' running maxes (raw score units) and this thread's partial sums, updated; corr: the
// factors the output rows are rescaled by; the result: P's A fragments (v4.b32), one per 16 keys,
// rounded to the storage type.
struct Softmax {
  Value seqQ, seqK, q0, t, scale2;
  Value rows[2];
  Value window = {};             // the window parameter (Config::window)
  Value right = {};              // windowRight: min(window_right, seq_q), keys past a row's position it sees
  Value capOn = {};              // softcap: the cap is not 0
  Value cap = {}, capRate = {};  // softcap: the cap in raw score units and 2 log2(e) / cap
  Value slope = {};              // alibi: slope / scale, negated unless causal (f32)
  Value rowPos[2] = {};          // alibi: the rows' positions among the keys, i + seq_k - seq_q (f32)
  Value biasRow[2] = {};         // bias: element 0 of the rows' bias rows (rows past seq_q: the last's)
  Value lastKey = {};            // bias: seq_k - 1, the last key whose bias is read
  Value invScale = {};           // bias: 1 / scale
  // sinks: the rows' running max and this thread's partial sum before the first key, the head's
  // sink in raw units and its weight 1 (in the quad's thread t = 0; none for a sink of -inf).
  Value mInit = {}, lInit = {};
};
// The carried softmax state before the first key tile: m of rows g and g + 8, then their partial
// sums l: -inf and `zero`, or the sink's (Softmax::mInit, lInit).
std::vector<Value> softmaxStart(KernelBuilder& kb, const Softmax& s, Value zero);
// The softmax state of a warp's rows row0 and row1 (query head qh of sequence b) from the
// kernel's parameters: the window, the cap, the ALiBi slope, the bias rows and the sink the
// options ask for.
Softmax softmaxOf(KernelBuilder& kb, const Config& c, const Params& p, Value seqQ, Value seqK, Value q0, Value t,
                  Value scale2, Value row0, Value row1, Value qh, Value b);
std::vector<Value> softmaxTile(KernelBuilder& kb, const Config& c, const Softmax& s, Value k0, unsigned keys,
                               std::vector<Value> scores, Value m[2], Value l[2], Value corr[2]);

// Sums the partial row sums l over the quad, and writes o = acc / l (zeros for a row without
// keys) and the log-sum-exp of rows[0] and rows[1] below seqQ. m: the rows' running maxes in raw
// score units; acc(j, e): element e of the 16 x 8 accumulator tile j (j < vdim / 8) in mma's C
// layout (e < 2 row g, else g + 8; columns 8 j + 2 t + (e & 1)).
void storeRows(KernelBuilder& kb, const Config& c, const Output& o, const Value m[2], const Value l[2],
               const std::function<Value(unsigned tile, unsigned e)>& acc);

// The smallest page the wgmma member takes: its TMA boxes of a page are whole 128B-swizzle atoms.
constexpr unsigned kMinTmaPage = 8;

// The sm_90a main loop (mainloop = "wgmma") and its launch rule.
std::optional<ir::Module> buildPrefill90(const Options& o, ir::Diagnostics& diags);
LaunchRule launchPrefill90(const Options& o);

}  // namespace tn::kernels::lib::prefill
