// Shared pieces of the kernel library (docs/kernels.md): the storage-type option, loads and
// stores that convert between a storage type (f32, bf16, f16) and f32 math, 16-byte vector
// accesses with their run-time alignment test, and the registration hook of each template
// family. Templates are written with the IR builder only; these helpers emit ordinary IR.
#pragma once

#include <array>
#include <functional>
#include <initializer_list>
#include <numbers>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/Builder.h"
#include "kernels/Template.h"

namespace tn::kernels::lib {

using ir::KernelBuilder;
using ir::Value;

// How a tensor is stored in memory; arithmetic is always f32.
enum class Storage : uint8_t { F32, BF16, F16 };

unsigned bytesOf(Storage s);
ir::Scalar scalarOf(Storage s);
// Template::elements for u32 pointer parameters (ids, indices, offsets, lengths, block tables).
std::function<Template::ElementTypes(const Options&)> u32Elements(std::vector<std::string> names);
// Template::elements for pointers to ggml blocks (quantized weights, q8_1 activations): bytes (u8).
std::function<Template::ElementTypes(const Options&)> blockElements(std::vector<std::string> names);
// Template::elements for pointers to tensors stored as option `option`'s storage type (f32,
// bf16, f16), which the kernel reads or writes as raw words (u16, packed pairs, 16-byte vectors).
std::function<Template::ElementTypes(const Options&)> storageElements(std::vector<std::string> names,
                                                                      std::string option = "dtype");
// The elements from the first to the last of a strided tensor: `inner` contiguous elements,
// repeated along each (count, stride) dimension of `outer`: the sum of stride * (count - 1), plus
// inner; 0 when any count or inner is 0 ("min(m, 1) * min(k, 1) * (lda * (max(m, 1) - 1) + k)").
Expr stridedSpan(const std::vector<std::pair<Expr, Expr>>& outer, const Expr& inner);
// Template::extents giving each of `names` the same extent.
std::function<Template::Extents(const Options&)> sameExtent(std::vector<std::string> names, Expr extent);
// Template::extents of several declarations together.
std::function<Template::Extents(const Options&)> allExtents(std::vector<std::function<Template::Extents(const Options&)>> parts);
// Template::elements of several declarations together.
std::function<Template::ElementTypes(const Options&)> allElements(
    std::vector<std::function<Template::ElementTypes(const Options&)>> parts);
// Elements in one 16-byte vector access (4 for f32, 8 for bf16/f16).
inline unsigned vecElems(Storage s) { return 16 / bytesOf(s); }

// An option whose type follows its default; Int ranges are set by the caller.
OptionSpec option(std::string name, OptionValue def, std::string doc);
// An integer option taking min .. max (inclusive), a multiple of multipleOf.
OptionSpec intOption(std::string name, int64_t def, int64_t min, int64_t max, std::string doc, int64_t multipleOf = 1);
// A String option that accepts only `choices`.
OptionSpec choiceOption(std::string name, std::string def, std::vector<std::string> choices, std::string doc);
// Paged KV caches (attention_decode, attention_prefill): the `page_size` option (0: not paged; up
// to 4096, a power of two, which the template checks), and the cache row of position `pos` (u32)
// of a sequence whose u32 page indices start at `pages`: row pos % pageSize of page
// pages[pos / pageSize] (one ld.global.nc of the table, a shift and a mask).
OptionSpec pageSizeOption(std::string doc);
Value pagedRow(KernelBuilder& kb, Value pages, Value pos, unsigned pageSize);
// Template::alternatives of a template whose `mainloop` option takes "auto": with auto, the wgmma
// member (which sm_90a runs), then the options as given (the mma.sync member, built with the wgmma
// member's parameters for the other targets); otherwise none.
std::vector<Options> wgmmaWhereItRuns(const Options& o);
// The f32 values of 16 bytes stored as s (packVecF32's bytes, a 16-byte load's), in memory order.
std::vector<Value> unpackVecF32(KernelBuilder& kb, Value bytes, Storage s);
// The 16 bytes at ptr (16-byte aligned) as they are stored (s: v4.f32 for f32, else v4.b32, as
// packVecF32 gives them), for unpackVecF32.
Value loadVecBytes(KernelBuilder& kb, Value ptr, Storage s, bool readOnly);
// A row held in registers by a row kernel's one-pass path (the norms' slots): slot k of thread
// tid (blocks of 256) is the row's 16-byte vector chunk[k] = tid + 256k as stored in type s
// (bytes[k]: 16 bytes, packVecF32's), inside the row where valid[k] holds (a slot past the row's
// end holds the row's last vector again). values(kb, k) unpacks a slot where it is used, so that
// a 16-bit row takes half the registers of its f32 values. Every thread holds every slot;
// warpHas[k] (warp-uniform) holds where some lane of the warp has slot k inside the row, so work
// on a slot (shuffles included) can be skipped by whole warps and stays converged.
struct RowInRegs {
  Storage s;
  std::vector<Value> bytes, chunk, valid, warpHas;
  std::vector<Value> values(KernelBuilder& kb, unsigned k) const { return unpackVecF32(kb, bytes[k], s); }
};
// The slots of a row of nvec >= 1 vectors stored as s, load(vector) each (its 16 bytes:
// loadVecBytes), all loads issued before any use.
RowInRegs loadRowInRegs(KernelBuilder& kb, Storage s, Value tid, Value nvec, unsigned slots,
                        const std::function<Value(Value chunk)>& load);
// rmsnorm fused with what follows (rmsnorm_quantize_q8_1, rmsnorm_quantize_fp8), by rmsnorm's
// own code (kernels/Norms.cpp), so that the fused kernel sees rmsnorm's bits: the row at xrow
// (cols elements stored as s, weight per column). Where the row fits in `slots` vectors a thread
// and x and weight are 16-byte aligned (`aligned`, uniform over the launch), one pass: onePass
// gets y = (x * inv) * weight rounded to s, as rmsnorm stores it, in registers; otherwise
// twoPass gets 1 / rms after a pass over the row (and the overflow rescan) and computes y
// itself. 1 / rms is combined over the block through `scratch` (2 * 8 f32). Blocks of 256.
void rmsnormFused(KernelBuilder& kb, Storage s, Value tid, Value xrow, Value weight, Value cols, Value eps, Value aligned,
                  ir::SharedArray scratch, unsigned slots, const std::function<void(const RowInRegs& y)>& onePass,
                  const std::function<void(Value inv)>& twoPass);
// The norms' max_cols option (the longest row kept in registers), its value as slots a thread
// (nullopt, reported to diags, where it exceeds what s's rows can keep), and the blocks an SM a
// kernel with that many slots asks ptxas for (minnctapersm).
OptionSpec maxColsOption();
std::optional<unsigned> normSlots(const Options& o, Storage s, ir::Diagnostics& diags);
unsigned normMinBlocks(Storage s, unsigned slots);
// v (f32) rounded to storage type s and widened back: the value a store of v leaves in memory
// (bf16 by bits, so that no target needs cvt from bf16).
Value roundToStorage(KernelBuilder& kb, Value v, Storage s);
// fp8 KV caches (kernels/Fp8.cpp; docs/kernels.md, "fp8 KV caches"): codes of OCP's E4M3 (bias 7,
// no infinities, 0x7F and 0xFF NaN, largest finite 448) or E5M2 (bias 15, IEEE-like, largest
// finite 57344), one byte each (moved as u8 bytes; the bundle's element types e4m3 and e5m2) and
// scaled by a per-tensor f32 (the cache holds x / scale). Decoded by cvt.f16x2 (sm_89+) or by integer instructions (any target: fp8Raw).
enum class Fp8 : uint8_t { None, E4M3, E5M2 };
// An fp8 option value: "fp8_e4m3" or "fp8_e5m2", else Fp8::None.
Fp8 fp8Named(std::string_view value);
// The element type of codes of format f (E4M3 or E5M2): the bundle's e4m3 or e5m2.
Template::Element fp8Element(Fp8 f);
// The IR's modifier of format f (E4M3 or E5M2) on mma, wgmma and cvt.f16x2.
ir::Mod fp8Mod(Fp8 f);
// The `cache_dtype` option: "auto" (the caches hold the dtype), "fp8_e4m3" or "fp8_e5m2".
OptionSpec cacheDtypeOption(std::string doc);
Fp8 cacheDtype(const Options& o);
// Template::elements for caches: the dtype option's storage type, or u8 with an fp8 cache_dtype.
std::function<Template::ElementTypes(const Options&)> cacheElements(std::vector<std::string> names);
// Byte `byte` (0: the lowest) of the u32 word w, an fp8 code, as f32 times 2^-fp8Bias(f): its
// sign and bits placed in an f32's, exact (codes below 2^-6 (E4M3) or 2^-14 (E5M2) become f32
// subnormals: keep math on these values free of .ftz); NaN codes read as NaN and E5M2's
// infinities as infinities. 6 integer instructions and a select (5 for byte 3).
Value fp8Raw(KernelBuilder& kb, Value w, unsigned byte, Fp8 f, std::string_view name = {});
// What fp8Raw's values times 2^fp8Bias(f) are: the codes' values (2^120 for E4M3, 2^112 for E5M2).
unsigned fp8Bias(Fp8 f);
// x (f32) as the nearest code of f (ties to the even code), finite values beyond the largest
// and infinities saturating to it (PTX's cvt.rn.satfinite), NaN as 0x7F: a u32 0 ... 255.
Value f32ToFp8(KernelBuilder& kb, Value x, Fp8 f, std::string_view name = {});
// How a kernel reads fp8 codes (attention's caches, gemv's weights): the `fp8_decode` option,
// "cvt" (PTX cvt.rn.f16x2.e4m3x2, sm_89+), "integer" (fp8Raw, any target) or "auto" (the
// default: cvt where a target has it, integer elsewhere, through Template::alternatives:
// fp8DecodeWhereItRuns, given the format of the kernel's codes, Fp8::None for none). A kernel
// built with "auto" itself decodes by integer instructions.
OptionSpec fp8DecodeOption();
bool fp8Cvt(const Options& o);
// The PTX ISA version a module using cvt.f16x2 declares (ptxas wants 8.1 for it on sm_89), and
// one using fp8 mma.sync (8.4 on every target).
inline constexpr unsigned kFp8CvtPtx = 81;
inline constexpr unsigned kFp8MmaPtx = 84;
// False, with an error, for fp8_decode "cvt" or "integer" when the kernel has no codes.
bool checkFp8Decode(const Options& o, Fp8 codes, ir::Diagnostics& diags);
std::vector<Options> fp8DecodeWhereItRuns(const Options& o, Fp8 codes);
// Template::alternatives of a kernel with fp8 codes and other alternatives (`members`, such as
// wgmmaWhereItRuns's; empty: the options alone): each member in turn with cvt, then with integer
// decoding (fp8_decode "auto"), so that every target gets the first member it runs with the
// decoding it runs. `members` unchanged without codes or with fp8_decode set.
std::vector<Options> withFp8Decode(std::vector<Options> members, const Options& o, Fp8 codes);
// The codes in bytes 0 ... count - 1 (1, 2 or 4) of the u32 word w as f32 values, in byte order:
// with cvt each code's value (cvt.f16x2, then f16 to f32), else fp8Raw's value times 2^-bias.
// fp8Scale is what they are multiplied by to be the codes' values: 1 with cvt, else 2^fp8Bias.
std::vector<Value> decodeCodes(KernelBuilder& kb, Value w, unsigned count, Fp8 f, bool cvt, std::string_view name = {});
float fp8Scale(Fp8 f, bool cvt);
// The two codes in bits 15:0 of the u32 word w as f16 in a b32, the code of bits 15:8 in bits
// 31:16 (cvt.f16x2; sm_89+).
Value cvtCodePair(KernelBuilder& kb, Value w, Fp8 f, std::string_view name = {});
// Four codes (u32 0 ... 255, the first the lowest byte) as one u32 word.
Value packBytes(std::span<const Value> codes, std::string_view name = {});
// Eight codes (two u32 words, code i in byte i % 4 of word i / 4) as the four b32 words of their
// values in `half` (bf16 or f16), exactly: word i holds code 2i's value in bits 15:0 and code
// 2i + 1's in bits 31:16. With cvt into f16 the words are cvt.f16x2's pairs themselves.
std::array<Value, 4> fp8HalfPairs(KernelBuilder& kb, ir::Scalar half, Value w0, Value w1, Fp8 f, bool cvt);
// The wgmma members' fp8 converters (gemm's B, attention_prefill's K and V): `lines` lines of 64
// codes at `codes` (line L at 64 L, as an unswizzled TMA box of 64 bytes a row lays them out)
// become the same lines of 64 values in `half` at `tile`, 128-byte swizzled as TMA lays out bf16
// or f16 boxes of 64 elements (line L at 128 L, its 16-byte chunk c at c ^ (L & 7)), by the
// threads first, first + step, ... of a loop over the lines' 8-code chunks: a warp of consecutive
// threads reads 256 contiguous bytes and writes four whole lines, free of bank conflicts (by
// this reasoning: tile-validation cannot follow the loop's addresses). The caller fences the async
// proxy before wgmma reads the tile.
void convertLines(KernelBuilder& kb, Value codes, Value tile, unsigned lines, Value first, unsigned step, ir::Scalar half,
                  Fp8 f, bool cvt);

// The `dtype` option ("f32", "bf16", "f16"; default "f32") and its value.
OptionSpec dtypeOption(std::string name = "dtype", std::string doc = "storage type of the tensors; math is f32");
Storage storageOption(const Options& o, const std::string& name = "dtype");

// An empty module for the library's baseline target (sm_80, PTX 7.0); the build retargets it.
ir::Module newModule();

// The end of a template's build function: passes the builder's diagnostics on to the caller and
// gives the module back unless one of them is an error.
std::optional<ir::Module> finish(const KernelBuilder& kb, ir::Module& m, ir::Diagnostics& diags);

inline constexpr ir::Type kGlobalPtr = ir::Type::ptr(ir::AddrSpace::Global);
// exp(x) = ex2(x * kLog2e).
inline constexpr float kLog2e = std::numbers::log2e_v<float>;

// One element at ptr as f32. readOnly loads use the non-coherent path (ld.global.nc): only for
// buffers the kernel never writes.
Value loadF32(KernelBuilder& kb, Value ptr, Storage s, bool readOnly, std::string_view name = {});
// Rounds v (f32) to nearest in storage type s and stores it at ptr.
void storeF32(KernelBuilder& kb, Value ptr, Value v, Storage s);

// The f16 in the low 16 bits of a 32-bit word as f32 (exact).
Value f16BitsToF32(KernelBuilder& kb, Value bitsInLowHalf, std::string_view name = {});
// The f32 values of a vector of 32-bit words of packed bf16/f16 pairs (s), the lower half of each
// first: memory order (exact).
std::vector<Value> unpackHalves(KernelBuilder& kb, Value words, Storage s, std::string_view name = {});
// The 16 bytes at ptr (16-byte aligned) as vecElems(s) f32 values, in memory order.
std::vector<Value> loadVecF32(KernelBuilder& kb, Value ptr, Storage s, bool readOnly, std::string_view name = {});
// Stores vecElems(s) f32 values as 16 bytes at ptr (16-byte aligned).
void storeVecF32(KernelBuilder& kb, Value ptr, std::span<const Value> values, Storage s);
// The same, returning the values as stored (rounded to s and widened back, exactly) from the
// packed words themselves: no second rounding of values that are rounded already.
std::vector<Value> storeVecF32Stored(KernelBuilder& kb, Value ptr, std::span<const Value> values, Storage s);

// What storeVecF32Stored would store, without the store (for a store the caller guards): the
// 16 bytes (kb.store them at a 16-byte aligned address) and the values as stored, in f32.
struct StoredVec {
  Value bytes;
  std::vector<Value> values;
};
StoredVec packVecF32(KernelBuilder& kb, std::span<const Value> values, Storage s);

// Run-time parameters that a `per_row` option turns into arrays (sampling's temperature, seed,
// filters and penalties): rowParam declares `name` as a scalar of type t, or with perRow as a
// pointer to t [rows]; rowValue is row `row`'s value, the scalar itself or its element `row`
// (ld.global.nc at a block-uniform address: uniform, so it may decide branches that hold barriers).
Value rowParam(KernelBuilder& kb, ir::Type t, std::string_view name, bool perRow);
Value rowValue(KernelBuilder& kb, Value param, ir::Type t, bool perRow, Value row, std::string_view name = {});
OptionSpec perRowOption(std::string what);

// True (a pred) when every pointer in ptrs is a multiple of `bytes` (a power of two).
Value allAligned(KernelBuilder& kb, std::initializer_list<Value> ptrs, unsigned bytes, std::string_view name = {});

// p with its low bits cleared to a multiple of `bytes` (a power of two). Once a run-time test has
// shown p so aligned this is the same address, and one tile-validation can prove aligned, so the
// vector accesses of the aligned path pass its alignment check instead of being rejected as
// unprovable. assumeAligned16: bytes = 16.
Value assumeAligned(KernelBuilder& kb, Value p, unsigned bytes, std::string_view name = {});
inline Value assumeAligned16(KernelBuilder& kb, Value p, std::string_view name = {}) {
  return assumeAligned(kb, p, 16, name);
}

// Online softmax (softmax, attention): the f32 -inf a running max starts from, and the reference
// exponents are taken from: m, or 0 while m is -inf (nothing but -inf seen), so that -inf - -inf
// never makes a NaN. m itself is never NaN: max.f32 drops NaN operands, and a NaN reaches the sum
// through e^(NaN - ref) instead.
Value negInf(KernelBuilder& kb);
Value refOf(KernelBuilder& kb, Value m);

// 1/v with rcp.approx.ftz.f32 (max relative error 2^-23 on the GPU), for scale factors: a
// subnormal v counts as 0 and a subnormal result (|v| > 2^126) becomes 0. Without .ftz ptxas
// wraps the MUFU in range checks and rescaling (4 more instructions); callers pass values for
// which those cases cannot matter.
Value rcpApprox(KernelBuilder& kb, Value v, std::string_view name = {});
// 2^v with ex2.approx.ftz.f32 (2 ulp): results below 2^-126 (v < -126) are 0, a subnormal v is 0
// (2^v = 1 either way). Without .ftz, 3 more instructions around the MUFU.
Value ex2Approx(KernelBuilder& kb, Value v, std::string_view name = {});
// 1/sqrt(v) with rsqrt.approx.ftz.f32 (max relative error 2^-22.9 on the GPU): a subnormal v
// counts as 0 (result +inf). The result of a normal v is always normal. Without .ftz ptxas
// rescales subnormal inputs around the MUFU (3 more instructions).
Value rsqrtApprox(KernelBuilder& kb, Value v, std::string_view name = {});

// Activations on f32 values (docs/kernels.md has their accuracy): relu keeps NaN; silu is
// x * sigmoid(x); geluTanh the tanh form of gelu, geluErf the erf form. All written with ex2 and
// rcp.approx, without cancellation for negative x. sigmoid is 1 / (1 + e^-x) the same way.
Value relu(KernelBuilder& kb, Value x);
Value silu(KernelBuilder& kb, Value x);
Value sigmoid(KernelBuilder& kb, Value x);
Value geluTanh(KernelBuilder& kb, Value x);
Value geluErf(KernelBuilder& kb, Value x);
// A gated linear unit, the option `glu` of swiglu, swiglu_quantize_fp8 and gemv_q_swiglu: "silu"
// (SwiGLU, the default), "gelu" (GeGLU with gelu's tanh form: Gemma's gelu_pytorch_tanh),
// "gelu_erf" (GeGLU with the erf form), or "swiglu_oai" (gpt-oss's clamped SwiGLU: x clamped
// above at 7 into x sigmoid(1.702 x), times `linear` clamped to [-7, 7] plus 1). gluUnit gives
// `linear` times the activation of `x` (NaN stays NaN through the clamps).
OptionSpec gluOption();
Value gluUnit(KernelBuilder& kb, std::string_view glu, Value x, Value linear);
// Logit soft-capping (Gemma 2): k tanh(x / k) for a score x and a cap k in the same units, given
// a = 2 log2(e) / k, as k - 2k / (1 + 2^(a x)): one ex2 and one rcp (.approx), within a few ulp of
// k (tanh.approx's 2^-11 relative error would be 0.02 of a logit at a cap of 50); +-inf give +-k,
// NaN stays NaN.
Value softcap(KernelBuilder& kb, Value x, Value a, Value k);

// Combines one tuple of 32-bit values per thread (any 32-bit scalar types) over a 1-D block of
// fixed size (reqntid; the warp count, a power of two, comes from it): a butterfly of shuffles
// in each warp, lane 0 of each warp stages its tuple in `scratch` (component k of warp w at
// k * warps + w, so the reads back are free of bank conflicts), bar.sync, then a butterfly
// over the warps' tuples. scratch is 32-bit, with at least perThread.size() * warps elements.
// Contract: every thread of the block calls it, once per use of scratch (a later call on the
// same scratch needs a bar.sync first), and every thread gets the same tuple.
// combine(lo, hi) must be associative enough for the caller (the threads are combined as a
// balanced tree). With Order::Lanes (the default) lo is always the tuple of the lower lanes, so
// combine need not be commutative: every lane computes what lane 0 computes. Order::Commutative
// passes the operands in either order and saves two selects per value and step; use it only
// when combine(a, b) == combine(b, a) bit for bit (an f32 sum or max, an argmax on a total
// order), else lanes may disagree.
using CombineFn = std::function<std::vector<Value>(const std::vector<Value>& lo, const std::vector<Value>& hi)>;
enum class Order : uint8_t { Lanes, Commutative };
std::vector<Value> blockCombine(KernelBuilder& kb, std::vector<Value> perThread, Value tid, ir::SharedArray scratch,
                                const CombineFn& combine, Order order = Order::Lanes, ir::Here loc = ir::Here::current());

// The warp-wide sums of several f32 values at once (32 at a time), each returned to every lane:
// halving butterflies in which a lane keeps one value of each pair and sends the other (2
// selects, one shfl and one add a pair), then one shfl.idx per sum from the lane holding it: for
// 16 values 32 shuffles and 16 adds instead of warp_reduce_sum's 80 and 80. Every lane of the
// warp calls it converged; `lane` is its lane index.
std::vector<Value> warpSumEach(KernelBuilder& kb, std::vector<Value> values, Value lane);
// warpSumEach without its broadcast, for up to 32 values (padded with zeros to n = bit_ceil of
// their count): lane l holds the warp-wide sum of value (l >> shift) & (n - 1), shift = 5 - log2 n,
// so each sum is in 32 / n lanes and lane (j << shift) holds sum j.
struct SpreadSum {
  Value sum;
  unsigned shift;
};
SpreadSum warpSumSpread(KernelBuilder& kb, std::vector<Value> values, Value lane);

// The split-row pairs (softmax_partial/merge, argmax_partial/merge) launch a
// [ceil_div(cols, size), rows] grid: block (chunk, row) owns elements [start, start + len) of
// its row, and a row has `chunks` of them. Only valid for cols >= 1 (the grid is empty else).
struct RowChunk {
  Value row, chunk, chunks, start, len;
};
RowChunk rowChunk(KernelBuilder& kb, Value cols, unsigned size);
// ceil_div(cols, size) for cols >= 1, without the overflow of cols + size - 1.
Value chunkCount(KernelBuilder& kb, Value cols, unsigned size);

// sm_90a warp specialization (docs/hopper.md §4; the wgmma members of gemm and attention_prefill).
// Spins on mbarrier.try_wait.parity until the barrier's phase of that parity has completed (blocks
// ^label and ^label.done).
void waitPhase(KernelBuilder& kb, Value bar, Value parity, std::string_view label = "wait");
// Warpgroup 0 (tid < 128) gives registers back (setmaxnreg.dec producerRegisters) and one elected
// thread of its first warp runs produce(); the other warpgroups take them (setmaxnreg.inc
// consumerRegisters) and run consume(c), c = warpgroup - 1; when given, the producer's other
// three warps run helpers() (gemm's fp8 B converters). Needs a register budget at entry
// (.maxntid with .minnctapersm: TC§5.4).
void warpSpecialize(KernelBuilder& kb, Value tid, unsigned producerRegisters, unsigned consumerRegisters,
                    const std::function<void()>& produce, const std::function<void(Value consumer)>& consume,
                    const std::function<void()>& helpers = {});

// Sampling's randomness (argmax's sample, spec_verify), counter-based: fmix32 is murmur3's 32-bit
// finalizer, a bijection of u32 whose every output bit depends on every input bit; uniformOf(h)
// is the u in [2^-25, 1 - 2^-25] that the hash h gives (a multiple of 2^-25: exact in f32, never
// 0 or 1), exponentialOf(h) the standard exponential variate -ln u, within about one rounding of
// it relatively however small it is.
Value fmix32(Value h);
Value uniformOf(KernelBuilder& kb, Value h);
Value exponentialOf(KernelBuilder& kb, Value h);

// Argmax's order (kernels/RowOps.cpp, kernels/Moe.cpp): an unsigned key that orders floats
// -inf < ... < -0 == +0 < ... < +inf < NaN (every NaN the same); keys of numbers are >= 0x007FFFFF,
// so 0 means "no element".
Value orderKey(KernelBuilder& kb, Value v);
// A candidate: its key and its index.
struct Best {
  Value key, idx;
};
// The better of two candidates: the larger key, on equal keys the smaller index. A total order on
// (key, index), so better(a, b) == better(b, a) bit for bit.
Best better(KernelBuilder& kb, Best a, Best b);
// No candidate: key 0, index 0xFFFFFFFF.
Best nothing(KernelBuilder& kb);
// The best of a warp's candidates, by a butterfly of better(): every lane ends with the same pair.
Best warpBest(KernelBuilder& kb, Best mine);

// Mixture of experts (gemv_q, gemv_q_swiglu and gemv with `experts`; docs/kernels.md): declares
// the u32 parameters n_experts, pairs (the grid's height) and slots, after the kernel's others,
// and reads block row y's pair: its expert ids[pair] (one ld.global.nc of the u32 pointer `ids`),
// whether that is below n_experts (`known`), the expert to address (0 when unknown: its pointers
// are formed, never read) and x's row, pair / max(slots, 1).
inline constexpr uint32_t kNoExpert = 0xFFFFFFFFu;  // an id of no expert (moe_route, moe_align)
struct ExpertPair {
  Value pair, known, expert, xRow;
};
ExpertPair expertPair(KernelBuilder& kb, Value ids);
// The tiles moe_align may fill for `pairs` pairs of n_experts experts in tiles of `tile` rows
// (every expert's pairs padded to a whole tile, and the unknown ids' group):
// ceil_div(pairs, tile) + min(n_experts + 1, pairs); the grid of a grouped GEMM over them.
Expr moeTiles(uint64_t tile);

// The template families; each appends its templates (kernels/<Family>.cpp).
void addElementwise(std::vector<Template>& out);
void addSoftmax(std::vector<Template>& out);
void addNorms(std::vector<Template>& out);
void addRowOps(std::vector<Template>& out);   // argmax, transpose, kv_scatter
void addRope(std::vector<Template>& out);
void addPenalties(std::vector<Template>& out);  // logit_penalties (kernels/Penalties.cpp)
void addSpeculative(std::vector<Template>& out);  // spec_verify (kernels/Speculative.cpp)
void addGemv(std::vector<Template>& out);
void addGemm(std::vector<Template>& out);
void addAttention(std::vector<Template>& out);  // attention_decode, attention_decode_merge
void addAttentionPrefill(std::vector<Template>& out);  // attention_prefill (kernels/AttentionPrefill.cpp)
void addFp8(std::vector<Template>& out);  // quantize_fp8 (kernels/Fp8.cpp)
void addQuant(std::vector<Template>& out);  // dequantize, embedding, quantize_q8_1, gemv_q(_swiglu), gemm_q,
                                            // rmsnorm_quantize_q8_1
void addMoe(std::vector<Template>& out);    // moe_route, moe_combine (kernels/Moe.cpp)

}  // namespace tn::kernels::lib
