// The C++ builder API that kernels are written with: typed value handles with operators, one
// generic op() plus thin helpers over the ops table, and structured control flow (for_range,
// if_then, if_else) lowered to blocks with parameters. Every instruction records the C++ source
// location that created it, so verifier errors point at the kernel author's code.
//
//   ir::Module m;
//   ir::KernelBuilder b(m, "scale");
//   ir::Value x = b.param(ir::Type::ptr(ir::AddrSpace::Global), "x");
//   ir::Value n = b.param(ir::Type::u32(), "n");
//   ir::Value i = b.tid(ir::Mod::X, "i");
//   b.if_then(i < n, [&] {
//     ir::Value p = b.index(x, i, 4, "p");
//     b.store(p, b.load(p, ir::Type::f32(), "v") * 2.0f);
//   });
//   b.ret();
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <source_location>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include "ir/IR.h"

namespace tn::ir {

class KernelBuilder;

// Where a builder call was written; every helper takes it as its last, defaulted argument.
#ifdef __cpp_lib_source_location
using Here = std::source_location;
#else
// libstdc++'s std::source_location needs clang 15; the fuzz build (fuzz/) uses Debian's clang 14.
// The part of its interface the builder uses, from the builtins both compilers have.
class Here {
 public:
  static constexpr Here current(const char* file = __builtin_FILE(), uint_least32_t line = __builtin_LINE(),
                                uint_least32_t column = __builtin_COLUMN()) noexcept {
    Here h;
    h.file_ = file;
    h.line_ = line;
    h.column_ = column;
    return h;
  }
  constexpr const char* file_name() const noexcept { return file_; }
  constexpr uint_least32_t line() const noexcept { return line_; }
  constexpr uint_least32_t column() const noexcept { return column_; }

 private:
  const char* file_ = "";
  uint_least32_t line_ = 0;
  uint_least32_t column_ = 0;
};
#endif
using Mods = std::initializer_list<Mod>;

// A typed SSA value of the kernel being built. Cheap to copy; default-constructed is "no value".
// Its operators build instructions (== and != build setp), so compare handles with id().
class Value {
 public:
  Value() = default;
  ValueId id() const { return id_; }
  Type type() const { return type_; }
  KernelBuilder* builder() const { return builder_; }
  bool valid() const { return builder_ != nullptr && id_.valid(); }
  // Gives the value a printed name (without '%'); returns the same value.
  Value named(std::string_view name) const;

 private:
  friend class KernelBuilder;
  Value(KernelBuilder* b, ValueId id, Type t) : builder_(b), id_(id), type_(t) {}
  KernelBuilder* builder_ = nullptr;
  ValueId id_;
  Type type_;
};

template <class T>
concept Literal = std::is_arithmetic_v<T>;

// One side of an operator expression or a loop bound: a Value, or a C++ number that becomes a
// constant of the other side's type. The implicit conversion records where it was written.
class Operand {
 public:
  Operand(Value v, Here loc = Here::current()) : value_(v), loc_(loc) {}
  template <Literal T>
  Operand(T lit, Here loc = Here::current()) : isLiteral_(true), loc_(loc) {
    if constexpr (std::is_same_v<T, bool>) {
      natural_ = Type::pred();
      bits_ = lit ? 1 : 0;
    } else if constexpr (std::is_floating_point_v<T>) {
      isFloat_ = true;
      real_ = static_cast<double>(lit);
      natural_ = sizeof(T) == 4 ? Type::f32() : Type::of(Scalar::F64);
    } else {
      isSigned_ = std::is_signed_v<T>;
      bits_ = static_cast<uint64_t>(static_cast<std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>(lit));
      natural_ = Type::of(sizeof(T) == 8 ? (isSigned_ ? Scalar::S64 : Scalar::U64) : (isSigned_ ? Scalar::S32 : Scalar::U32));
    }
  }

  bool isLiteral() const { return isLiteral_; }
  Value value() const { return value_; }
  const Here& loc() const { return loc_; }
  // The IR type a literal has on its own (u32 for unsigned, s32 for int, f32 for float, ...).
  Type literalType() const { return natural_; }
  // The literal's bits as a constant of type t (floats rounded to nearest, integers wrapped).
  uint64_t bitsAs(Type t) const;

 private:
  Value value_;
  bool isLiteral_ = false;
  bool isFloat_ = false;
  bool isSigned_ = false;
  uint64_t bits_ = 0;
  double real_ = 0;
  Type natural_;
  Here loc_;
};

// A shared-memory array declared on the kernel.
struct SharedArray {
  int index = -1;  // into Kernel::shared
  Type elem;
  uint64_t count = 0;  // 0 for dynamic shared memory
  bool valid() const { return index >= 0; }
};

// A read-only table declared on the kernel (table.ld looks its elements up).
struct Table {
  int index = -1;  // into Kernel::tables
  Type elem;
  bool valid() const { return index >= 0; }
};

// Block and value names of a for_range loop.
struct LoopNames {
  std::string label = "loop";          // blocks ^label (header), ^label.body, ^label.exit
  std::string iv = "i";                // the induction variable, a parameter of ^label
  std::vector<std::string> carried{};  // the carried values' parameters of ^label
};

// Block and value names of an if_else.
struct IfNames {
  std::string label = "if";            // blocks ^label.then, ^label.else, ^label.end
  std::vector<std::string> results{};  // the merged values, parameters of ^label.end
};

// Appends one kernel to a module and builds it at an insertion point (the end of a block).
// Misuse that would make malformed IR (an instruction after a terminator, a value of another
// builder, mismatched loop or branch values) is reported to diagnostics() at the caller's
// location; type errors are left to the verifier, which reports them at the same locations.
class KernelBuilder {
 public:
  KernelBuilder(Module& m, std::string_view name, Here loc = Here::current());
  KernelBuilder(const KernelBuilder&) = delete;
  KernelBuilder& operator=(const KernelBuilder&) = delete;

  Module& module() { return module_; }
  Kernel& kernel() { return module_.kernels[kernelIndex_]; }
  const Diagnostics& diagnostics() const { return diags_; }
  bool ok() const { return !diags_.hasErrors(); }

  // ---- kernel signature ---------------------------------------------------------------------
  // Kernel parameters, in order; `align` (pointers only) is a guaranteed byte alignment.
  Value param(Type t, std::string_view name = {}, unsigned align = 0, Here loc = Here::current());
  SharedArray shared(std::string_view name, Type elem, uint64_t count, unsigned align = 0, Here loc = Here::current());
  SharedArray shared_dynamic(std::string_view name, Type elem, unsigned align = 0, Here loc = Here::current());
  // A table of u16/u32/u64/b16/b32/b64 constants; declaring one again with the same name, type and
  // values returns the first (code that decodes several groups asks for its grid each time).
  Table table(std::string_view name, Type elem, std::vector<uint64_t> values, Here loc = Here::current());
  void reqntid(unsigned x, unsigned y = 1, unsigned z = 1);
  void maxntid(unsigned x, unsigned y = 1, unsigned z = 1);
  // ptxas hints: keep `blocks` blocks resident per SM (needs reqntid or maxntid; caps the
  // registers per thread), or cap the registers per thread directly.
  void minnctapersm(unsigned blocks);
  void maxnreg(unsigned registers);

  // ---- blocks and the insertion point -------------------------------------------------------
  // A new, empty block; the name is made unique by appending a number when taken.
  BlockId block(std::string_view name, Here loc = Here::current());
  Value block_param(BlockId b, Type t, std::string_view name = {});
  std::vector<Value> block_params(BlockId b);
  void set_insert_point(BlockId b) { insert_ = b; }
  BlockId insert_block() const { return insert_; }
  bool terminated() const;  // the insertion block already ends in br/cbr/ret
  void br(BlockId target, const std::vector<Value>& args = {}, Here loc = Here::current());
  void cbr(Value cond, BlockId ifTrue, BlockId ifFalse, Here loc = Here::current());
  void cbr(Value cond, BlockId ifTrue, const std::vector<Value>& trueArgs, BlockId ifFalse,
           const std::vector<Value>& falseArgs, Here loc = Here::current());
  void ret(Here loc = Here::current());

  // ---- the generic form: any op of the table ------------------------------------------------
  // `type` is the annotated type T (nullopt for ops without one); the result type follows
  // from the op's result rule. Returns an invalid Value for ops without a result.
  Value op(Op op, std::optional<Type> type, const std::vector<Value>& operands, Mods mods = {},
           std::string_view name = {}, Here loc = Here::current());
  // The same for ops that carry an immediate (OF_IMM other than const and extract).
  Value op_imm(Op op, std::optional<Type> type, const std::vector<Value>& operands, uint64_t imm, Mods mods = {},
               std::string_view name = {}, Here loc = Here::current());

  // ---- constants ----------------------------------------------------------------------------
  Value const_bits(Type t, uint64_t bits, std::string_view name = {}, Here loc = Here::current());
  Value constant(Type t, double v, std::string_view name = {}, Here loc = Here::current());
  Value pred(bool v, std::string_view name = {}, Here loc = Here::current());
  Value u8(uint8_t v, std::string_view name = {}, Here loc = Here::current());
  Value u16(uint16_t v, std::string_view name = {}, Here loc = Here::current());
  Value u32(uint32_t v, std::string_view name = {}, Here loc = Here::current());
  Value u64(uint64_t v, std::string_view name = {}, Here loc = Here::current());
  Value s8(int8_t v, std::string_view name = {}, Here loc = Here::current());
  Value s16(int16_t v, std::string_view name = {}, Here loc = Here::current());
  Value s32(int32_t v, std::string_view name = {}, Here loc = Here::current());
  Value s64(int64_t v, std::string_view name = {}, Here loc = Here::current());
  Value b16(uint16_t v, std::string_view name = {}, Here loc = Here::current());
  Value b32(uint32_t v, std::string_view name = {}, Here loc = Here::current());
  Value b64(uint64_t v, std::string_view name = {}, Here loc = Here::current());
  Value f16(float v, std::string_view name = {}, Here loc = Here::current());
  Value bf16(float v, std::string_view name = {}, Here loc = Here::current());
  Value f32(float v, std::string_view name = {}, Here loc = Here::current());
  Value f64(double v, std::string_view name = {}, Here loc = Here::current());

  // ---- special registers (u32) --------------------------------------------------------------
  Value tid(Mod dim = Mod::X, std::string_view name = {}, Here loc = Here::current());
  Value ntid(Mod dim = Mod::X, std::string_view name = {}, Here loc = Here::current());
  Value ctaid(Mod dim = Mod::X, std::string_view name = {}, Here loc = Here::current());
  Value nctaid(Mod dim = Mod::X, std::string_view name = {}, Here loc = Here::current());
  Value laneid(std::string_view name = {}, Here loc = Here::current());
  Value shared_addr(SharedArray s, std::string_view name = {}, Here loc = Here::current());
  // Element `index` (u32) of a table; an index past its end is a fault in the interpreter and
  // undefined on a GPU.
  Value table_ld(Table t, Value index, std::string_view name = {}, Here loc = Here::current());

  // ---- arithmetic and bits (T is the first operand's type) ----------------------------------
  Value add(Value a, Value b, std::string_view name = {}, Here loc = Here::current());
  Value sub(Value a, Value b, std::string_view name = {}, Here loc = Here::current());
  Value mul(Value a, Value b, std::string_view name = {}, Here loc = Here::current());
  Value div(Value a, Value b, std::string_view name = {}, Here loc = Here::current());
  Value rem(Value a, Value b, std::string_view name = {}, Here loc = Here::current());
  Value min(Value a, Value b, std::string_view name = {}, Here loc = Here::current());
  Value max(Value a, Value b, std::string_view name = {}, Here loc = Here::current());
  Value mul_hi(Value a, Value b, std::string_view name = {}, Here loc = Here::current());
  Value mul_wide(Value a, Value b, std::string_view name = {}, Here loc = Here::current());
  Value mad(Value a, Value b, Value c, std::string_view name = {}, Here loc = Here::current());
  Value fma(Value a, Value b, Value c, std::string_view name = {}, Here loc = Here::current());
  Value neg(Value a, std::string_view name = {}, Here loc = Here::current());
  Value abs(Value a, std::string_view name = {}, Here loc = Here::current());
  Value bit_and(Value a, Value b, std::string_view name = {}, Here loc = Here::current());
  Value bit_or(Value a, Value b, std::string_view name = {}, Here loc = Here::current());
  Value bit_xor(Value a, Value b, std::string_view name = {}, Here loc = Here::current());
  Value bit_not(Value a, std::string_view name = {}, Here loc = Here::current());
  Value shl(Value a, Value amount, std::string_view name = {}, Here loc = Here::current());
  Value shr(Value a, Value amount, std::string_view name = {}, Here loc = Here::current());
  Value popc(Value a, std::string_view name = {}, Here loc = Here::current());
  Value clz(Value a, std::string_view name = {}, Here loc = Here::current());
  Value dp4a(Value a, Value b, Value c, std::string_view name = {}, Here loc = Here::current());
  // Bit permutation and logic: prmt (bytes of {b, a} picked by `selector`; `mode` Mod::None for
  // the generic form, or .f4e .b4e .rc8 .ecl .ecr .rc16) and lop3 (any function of a, b, c given
  // by its truth table: the result for a = 0xF0, b = 0xCC, c = 0xAA). b32 operands.
  Value prmt(Value a, Value b, Value selector, Mod mode = Mod::None, std::string_view name = {},
             Here loc = Here::current());
  Value lop3(Value a, Value b, Value c, uint8_t lut, std::string_view name = {}, Here loc = Here::current());

  // ---- comparison, selection, conversion ----------------------------------------------------
  Value setp(Mod cmp, Value a, Value b, std::string_view name = {}, Here loc = Here::current());
  Value select(Value cond, Value ifTrue, Value ifFalse, std::string_view name = {}, Here loc = Here::current());
  // Without an explicit rounding, the one PTX requires is chosen: float->int .rzi (C truncation),
  // int->float and narrowing float->float .rn.
  Value cvt(Value v, Type to, std::string_view name = {}, Here loc = Here::current());
  Value cvt(Value v, Type to, Mods mods, std::string_view name = {}, Here loc = Here::current());
  Value bitcast(Value v, Type to, std::string_view name = {}, Here loc = Here::current());
  Value pack(Type vec, const std::vector<Value>& lanes, std::string_view name = {}, Here loc = Here::current());
  Value extract(Value vec, unsigned lane, std::string_view name = {}, Here loc = Here::current());

  // ---- pointers ---------------------------------------------------------------------------
  Value ptradd(Value ptr, Value byteOffset, std::string_view name = {}, Here loc = Here::current());
  // index * elemBytes as an integer of the pointer width of `space` (mul.wide for a 32-bit index
  // into a 64-bit space). Intermediates are named NAME.scale.
  Value byte_offset(Operand index, unsigned elemBytes, AddrSpace space, std::string_view name = {},
                    Here loc = Here::current());
  // &ptr[index] for elements of elemBytes bytes: ptradd(ptr, byte_offset(...)); the offset is
  // named NAME.off.
  Value index(Value ptr, Operand index, unsigned elemBytes, std::string_view name = {}, Here loc = Here::current());

  // ---- fast math (.approx, except rcp/sqrt which round to nearest) --------------------------
  Value ex2(Value a, std::string_view name = {}, Here loc = Here::current());
  Value lg2(Value a, std::string_view name = {}, Here loc = Here::current());
  Value sin(Value a, std::string_view name = {}, Here loc = Here::current());
  Value cos(Value a, std::string_view name = {}, Here loc = Here::current());
  Value tanh(Value a, std::string_view name = {}, Here loc = Here::current());
  Value rsqrt(Value a, std::string_view name = {}, Here loc = Here::current());
  Value rcp(Value a, std::string_view name = {}, Here loc = Here::current());
  Value sqrt(Value a, std::string_view name = {}, Here loc = Here::current());

  // ---- memory -----------------------------------------------------------------------------
  Value load(Value ptr, Type t, std::string_view name = {}, Here loc = Here::current());
  Value load(Value ptr, Type t, Mods mods, std::string_view name = {}, Here loc = Here::current());
  void store(Value ptr, Value v, Mods mods = {}, Here loc = Here::current());
  Value atom(Mod atomOp, Value ptr, Value v, std::string_view name = {}, Here loc = Here::current());
  Value atom_cas(Value ptr, Value expected, Value desired, std::string_view name = {}, Here loc = Here::current());
  void membar(Mod level, Here loc = Here::current());

  // ---- asynchronous copies: cp.async (sm_80+) -----------------------------------------------------
  // Copies `bytes` (4, 8 or 16; .cg: 16) from global `src` to shared `dst` in the background; the
  // data is there for this thread after a wait covering the copy's group, for the others after a
  // bar.sync that follows that wait. With srcSize, only that many bytes are read, the rest zeroed.
  void cp_async(Value dst, Value src, unsigned bytes, Mod cache = Mod::Ca, Here loc = Here::current());
  void cp_async(Value dst, Value src, unsigned bytes, Value srcSize, Mod cache = Mod::Ca, Here loc = Here::current());
  void cp_async_commit_group(Here loc = Here::current());
  // Waits until at most `pending` of this thread's most recent groups are still in flight.
  void cp_async_wait_group(unsigned pending, Here loc = Here::current());
  void cp_async_wait_all(Here loc = Here::current());

  // ---- transaction barriers, elect, proxy fence (sm_90; docs/ir.md, "Transaction barriers") --
  // bar is the ptr.shared address of an 8-byte mbarrier object; count, bytes, parity and mask
  // are u32 values.
  void mbarrier_init(Value bar, Value count, Here loc = Here::current());
  void mbarrier_arrive(Value bar, Here loc = Here::current());
  void mbarrier_arrive_expect_tx(Value bar, Value bytes, Here loc = Here::current());
  // True once the phase with the given parity (0 or 1) has completed; loop until it is.
  Value mbarrier_try_wait_parity(Value bar, Value parity, std::string_view name = {}, Here loc = Here::current());
  // True in exactly one lane of `mask` (which one is unspecified; the interpreter picks the lowest).
  Value elect_sync(Value mask, std::string_view name = {}, Here loc = Here::current());
  void fence_proxy_async(Here loc = Here::current());

  // ---- tensor memory access (TMA, sm_90; docs/ir.md, "Tensor memory access") -------------------
  // A tmap parameter: `param(Type::of(Scalar::TensorMap), "a_map")`; c0 (innermost) and c1 are
  // s32 box coordinates in elements, dst, src and bar ptr.shared addresses.
  // cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [dst], [tmap, {c0, c1}], [bar]
  void tma_load_2d(Value dst, Value tmap, Value c0, Value c1, Value bar, Here loc = Here::current());
  // cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [tmap, {c0, c1}], [src]
  void tma_store_2d(Value tmap, Value c0, Value c1, Value src, Here loc = Here::current());
  // The same through a map of rank 3, c2 the outermost coordinate (cp.async.bulk.tensor.3d...).
  void tma_load_3d(Value dst, Value tmap, Value c0, Value c1, Value c2, Value bar, Here loc = Here::current());
  void tma_store_3d(Value tmap, Value c0, Value c1, Value c2, Value src, Here loc = Here::current());
  void bulk_commit_group(Here loc = Here::current());                      // cp.async.bulk.commit_group
  void bulk_wait_group_read(unsigned pending, Here loc = Here::current());  // cp.async.bulk.wait_group.read N
  // setmaxnreg.inc / .dec (sm_90a): this warp's register budget becomes `count` (24 ... 256, a
  // multiple of 8); every warp of the warpgroup executes the same one.
  void setmaxnreg(bool increase, unsigned count, Here loc = Here::current());
  // wgmma.fence, wgmma.commit_group, wgmma.wait_group N (sm_90a; docs/hopper.md).
  void wgmma_fence(Here loc = Here::current());
  void wgmma_commit_group(Here loc = Here::current());
  void wgmma_wait_group(unsigned pending, Here loc = Here::current());
  // D = A·B (+ D when scaleD is true) over one warpgroup (4 converged warps, 128 threads).
  // n: 64, 128 or 256 (any multiple of 8 from 8 to 256 accepted); in: Scalar::BF16 or F16;
  // acc: v(n/2).f32 (also the result type; its only use must be this call: the result takes its
  // registers); a: b64 shared-memory descriptor, or the v4.b32 register A fragment (TC§4.2);
  // bDesc: b64 descriptor; scaleD: pred; transA/transB: 1 = MN-major operand (transA only with
  // a descriptor).
  Value wgmma_mma_async(unsigned n, Scalar in, Value acc, Value a, Value bDesc, Value scaleD, bool transA = false,
                        bool transB = false, std::string_view name = {}, Here loc = Here::current());
  // The fp8 form (aFormat, bFormat: Mod::E4m3Mod or E5m2Mod, alike or mixed): a 64xNx32 tile of
  // b8 codes, A and B K-major through descriptors, into v(n/2).f32 (TC§4; PTX m64nNk32
  // .e4m3/.e5m2, and the mixed .e4m3.e5m2 and .e5m2.e4m3).
  Value wgmma_mma_async_fp8(unsigned n, Mod aFormat, Mod bFormat, Value acc, Value aDesc, Value bDesc, Value scaleD,
                            std::string_view name = {}, Here loc = Here::current());
  // The 64-bit matrix descriptor of TC§4.4 built from ordinary integer IR (no op of its own):
  // start = a ptr.shared or u32 shared address; lbo/sbo in bytes (multiples of 16);
  // swizzleBytes 0, 32, 64 or 128. Result b64.
  Value wgmma_descriptor(Value start, unsigned lbo, unsigned sbo, unsigned swizzleBytes, std::string_view name = {},
                         Here loc = Here::current());

  // ---- synchronization and warp collectives -------------------------------------------------
  void bar_sync(Here loc = Here::current());
  // Named barrier `id` (1 ... 15) among `count` threads (a multiple of 32): sync waits for them,
  // arrive only counts itself in (docs/ir.md, "Named barriers"). The count as a u32 literal or value.
  void bar_named_sync(unsigned id, uint32_t count, Here loc = Here::current());
  void bar_named_sync(unsigned id, Value count, Here loc = Here::current());
  void bar_named_arrive(unsigned id, uint32_t count, Here loc = Here::current());
  void bar_named_arrive(unsigned id, Value count, Here loc = Here::current());
  Value shfl_sync(Mod mode, Value v, Value laneOrOffset, Value clamp, Value memberMask, std::string_view name = {},
                  Here loc = Here::current());
  // Full-warp shuffle with constant lane/offset; clamp 0 for .up, 31 otherwise.
  Value shfl(Mod mode, Value v, uint32_t laneOrOffset, std::string_view name = {}, Here loc = Here::current());
  Value vote_sync(Mod mode, Value p, Value memberMask, std::string_view name = {}, Here loc = Here::current());
  // Full-warp vote: pred for .all/.any/.uni, b32 for .ballot.
  Value vote(Mod mode, Value p, std::string_view name = {}, Here loc = Here::current());

  // ---- tensor cores: mma, ldmatrix, packed conversions (docs/ir.md, "Tensor cores") ---------
  // D = A·B + C over one full, converged warp. shape: M16n8k16, M16n8k8 or M16n8k32; in: the A/B
  // element type (bf16, f16; f32 at m16n8k8, multiplied as tf32; s8 or u8 at m16n8k32). a is the
  // v4.b32 A fragment, b the v2.b32 B fragment, c the accumulator fragment (v4.f32, v4.s32, or
  // v2.b32 for f16), which also types the result.
  Value mma(Mod shape, Scalar in, Value a, Value b, Value c, std::string_view name = {}, Here loc = Here::current());
  // m16n8k32 over fp8 codes (aFormat, bFormat: Mod::E4m3Mod or E5m2Mod, alike or mixed) into a
  // v4.f32 c: the fragments of the s8 form, four codes a register (sm_89+, PTX ISA 8.4).
  Value mma_fp8(Mod aFormat, Mod bFormat, Value a, Value b, Value c, std::string_view name = {},
                Here loc = Here::current());
  // ldmatrix of 1, 2 or 4 8x8 b16 matrices through a ptr.shared (b32, v2.b32 or v4.b32).
  Value ldmatrix(Value sharedPtr, unsigned matrices, bool trans = false, std::string_view name = {},
                 Here loc = Here::current());
  // Two f32 rounded to f16 or bf16 (to) and packed into one b32, in PTX's operand order: hi goes
  // to bits 31:16, lo to bits 15:0.
  Value cvt_pack(Scalar to, Value hi, Value lo, Mod round = Mod::Rn, std::string_view name = {},
                 Here loc = Here::current());
  // An f32 rounded to tf32 (to nearest, ties away from zero; the low 13 bits zero) in a b32, as a
  // tf32 mma operand should be: mma itself ignores the low 13 bits (sm_80+).
  Value cvt_tf32(Value x, std::string_view name = {}, Here loc = Here::current());
  // Two fp8 codes (a 16-bit value; format Mod::E4m3Mod or Mod::E5m2Mod) as two f16 in a b32, the
  // code in bits 15:8 to bits 31:16 (PTX cvt.rn.f16x2.e4m3x2; sm_89+).
  Value cvt_f16x2_fp8(Value codes, Mod format, std::string_view name = {}, Here loc = Here::current());

  // ---- structured control flow --------------------------------------------------------------
  // for (i = begin; i < end; i += step) with loop-carried values: ^label(i, carried...) tests
  // i < end and branches to ^label.body or ^label.exit. The body gets i and the carried values
  // and returns their next values; the loop returns the final ones (the header's parameters),
  // and building continues in ^label.exit. Values made inside the body stay inside it.
  template <class F>
  std::vector<Value> for_range(Operand begin, Operand end, Operand step, std::vector<Value> init, F&& body,
                               LoopNames names = {}, Here loc = Here::current()) {
    return forRangeImpl(
        begin, end, step, std::move(init), [&](Value i, std::span<Value> carried) { return values(body, i, carried); },
        names, loc);
  }
  template <class F>
    requires std::invocable<F&, Value>
  void for_range(Operand begin, Operand end, Operand step, F&& body, LoopNames names = {}, Here loc = Here::current()) {
    forRangeImpl(
        begin, end, step, {},
        [&](Value i, std::span<Value>) {
          std::invoke(body, i);
          return std::vector<Value>{};
        },
        names, loc);
  }

  // if (cond) { fn(); } as ^label.then and ^label.end; building continues in ^label.end. A
  // branch that ends in ret (an early exit) does not fall through.
  template <class F>
  void if_then(Value cond, F&& fn, std::string_view label = "if", Here loc = Here::current()) {
    ifThenImpl(cond, [&] { std::invoke(fn); }, label, loc);
  }

  // if (cond) { a = thenFn(); } else { a = elseFn(); }: both branches return the same number
  // and types of values (a Value, a vector, or nothing), which become parameters of ^label.end.
  template <class FT, class FE>
  std::vector<Value> if_else(Value cond, FT&& thenFn, FE&& elseFn, IfNames names = {}, Here loc = Here::current()) {
    return ifElseImpl(
        cond, [&] { return values(thenFn); }, [&] { return values(elseFn); }, names, loc);
  }

  // ---- reductions -------------------------------------------------------------------------
  // Butterfly reduction over groups of `width` lanes (a power of two up to 32) with shfl.sync:
  // every lane gets its group's result. `combine` is Add, Max or Min; 32-bit values only.
  // Intermediates are named NAME.mask, NAME.clamp, NAME.oK, NAME.sK, NAME.rK.
  Value warp_reduce(Op combine, Value v, unsigned width = 32, std::string_view name = {}, Here loc = Here::current());
  Value warp_reduce_sum(Value v, std::string_view name = {}, Here loc = Here::current());
  Value warp_reduce_max(Value v, std::string_view name = {}, Here loc = Here::current());
  // Block-wide reduction for 1-D blocks of a fixed size (reqntid): each warp reduces with
  // shuffles, lane 0 of each warp stores its result in `scratch` (one element per warp), then
  // after bar.sync every warp reads the partials back and reduces them, so every thread gets
  // the result. All threads of the block must call it. Before `scratch` is reused by a later
  // reduction, the kernel needs another bar.sync.
  Value block_reduce(Op combine, Value v, SharedArray scratch, std::string_view name = {}, Here loc = Here::current());
  Value block_reduce_sum(Value v, SharedArray scratch, std::string_view name = {}, Here loc = Here::current());
  Value block_reduce_max(Value v, SharedArray scratch, std::string_view name = {}, Here loc = Here::current());

  // ---- used by the operators and Value::named -------------------------------------------------
  Value binary(Op op, Operand a, Operand b, Mods mods, const Here& loc);
  Value unary(Op op, Value a, const Here& loc);
  Value compare(Mod cmp, Operand a, Operand b, const Here& loc);
  void rename(Value v, std::string_view name);
  void error(const Here& loc, std::string message);

 private:
  using LoopBody = std::function<std::vector<Value>(Value, std::span<Value>)>;
  using Branch = std::function<std::vector<Value>()>;

  struct ShuffleConsts;

  // Calls a loop body or branch and collects what it returns: nothing, a Value or a vector.
  template <class F, class... A>
  static std::vector<Value> values(F& f, A&&... args) {
    using R = std::invoke_result_t<F&, A...>;
    if constexpr (std::is_void_v<R>) {
      std::invoke(f, std::forward<A>(args)...);
      return {};
    } else if constexpr (std::is_convertible_v<R, Value>) {
      return {Value(std::invoke(f, std::forward<A>(args)...))};
    } else {
      return std::vector<Value>(std::invoke(f, std::forward<A>(args)...));
    }
  }

  std::vector<Value> forRangeImpl(Operand begin, Operand end, Operand step, std::vector<Value> init,
                                  const LoopBody& body, const LoopNames& names, const Here& loc);
  void ifThenImpl(Value cond, const std::function<void()>& fn, std::string_view label, const Here& loc);
  void ifThenBlocks(Value cond, const std::function<void()>& fn, const std::string& thenName,
                    const std::string& endName, const Here& loc);
  std::vector<Value> ifElseImpl(Value cond, const Branch& thenFn, const Branch& elseFn, const IfNames& names,
                                const Here& loc);

  SourceLoc at(const Here& loc);
  // A label L free for every block name L + suffix.
  std::string freshLabel(std::string_view label, std::initializer_list<std::string_view> suffixes);
  BlockId newBlock(std::string name, const Here& loc);
  bool checkOperand(Value v, const Here& loc);
  // Appends `in` at the insertion point with the given operands (checked first).
  Value emit(Inst in, const std::vector<Value>& operands, std::string_view name, const Here& loc);
  Value append(Inst in, std::string_view name, const Here& loc);
  Value materialize(const Operand& o, Type t, std::string_view name, const Here& loc);
  Value byteOffset(Operand index, unsigned elemBytes, AddrSpace space, const std::string& offName,
                   const std::string& scaleName, const Here& loc);
  Value identity(Op combine, Type t, std::string_view name, const Here& loc);
  bool checkReduction(Op combine, Value v, const Here& loc);
  Value makeValue(ValueId id) { return Value(this, id, kernel().typeOf(id)); }
  Value special(Op op, Mod dim, std::string_view name, const Here& loc);
  Value math(Op op, Value a, Mod round, std::string_view name, const Here& loc);
  Value butterfly(Op combine, Value v, unsigned width, ShuffleConsts& sc, const std::string& prefix, char shuffleTag,
                  char partialTag, const std::string& finalName, const Here& loc);

  Module& module_;
  size_t kernelIndex_;
  BlockId insert_;
  std::unordered_set<std::string> blockNames_;
  Diagnostics diags_;
};

// ---- operators on values: arithmetic, bits and comparisons (setp) -----------------------------
// A literal on either side becomes a constant of the value's type (shift amounts: u32).
Value operator+(const Value& a, Operand b);
Value operator-(const Value& a, Operand b);
Value operator*(const Value& a, Operand b);
Value operator/(const Value& a, Operand b);
Value operator%(const Value& a, Operand b);
Value operator&(const Value& a, Operand b);
Value operator|(const Value& a, Operand b);
Value operator^(const Value& a, Operand b);
Value operator<<(const Value& a, Operand b);
Value operator>>(const Value& a, Operand b);
Value operator<(const Value& a, Operand b);
Value operator<=(const Value& a, Operand b);
Value operator>(const Value& a, Operand b);
Value operator>=(const Value& a, Operand b);
Value operator==(const Value& a, Operand b);
Value operator!=(const Value& a, Operand b);
Value operator-(Operand a);  // neg
Value operator~(Operand a);  // not
Value operator!(Operand a);  // not, for predicates

namespace detail {
Value literalLeft(Op op, Operand lit, Operand v);
Value literalCompare(Mod cmp, Operand lit, Operand v);
}  // namespace detail

template <Literal L> Value operator+(L a, Operand b) { return detail::literalLeft(Op::Add, Operand(a, b.loc()), b); }
template <Literal L> Value operator-(L a, Operand b) { return detail::literalLeft(Op::Sub, Operand(a, b.loc()), b); }
template <Literal L> Value operator*(L a, Operand b) { return detail::literalLeft(Op::Mul, Operand(a, b.loc()), b); }
template <Literal L> Value operator/(L a, Operand b) { return detail::literalLeft(Op::Div, Operand(a, b.loc()), b); }
template <Literal L> Value operator%(L a, Operand b) { return detail::literalLeft(Op::Rem, Operand(a, b.loc()), b); }
template <Literal L> Value operator&(L a, Operand b) { return detail::literalLeft(Op::And, Operand(a, b.loc()), b); }
template <Literal L> Value operator|(L a, Operand b) { return detail::literalLeft(Op::Or, Operand(a, b.loc()), b); }
template <Literal L> Value operator^(L a, Operand b) { return detail::literalLeft(Op::Xor, Operand(a, b.loc()), b); }
template <Literal L> Value operator<<(L a, Operand b) { return detail::literalLeft(Op::Shl, Operand(a, b.loc()), b); }
template <Literal L> Value operator>>(L a, Operand b) { return detail::literalLeft(Op::Shr, Operand(a, b.loc()), b); }
template <Literal L> Value operator<(L a, Operand b) { return detail::literalCompare(Mod::Lt, Operand(a, b.loc()), b); }
template <Literal L> Value operator<=(L a, Operand b) { return detail::literalCompare(Mod::Le, Operand(a, b.loc()), b); }
template <Literal L> Value operator>(L a, Operand b) { return detail::literalCompare(Mod::Gt, Operand(a, b.loc()), b); }
template <Literal L> Value operator>=(L a, Operand b) { return detail::literalCompare(Mod::Ge, Operand(a, b.loc()), b); }

inline Value& operator+=(Value& a, Operand b) { return a = a + b; }
inline Value& operator-=(Value& a, Operand b) { return a = a - b; }
inline Value& operator*=(Value& a, Operand b) { return a = a * b; }
inline Value& operator/=(Value& a, Operand b) { return a = a / b; }
inline Value& operator%=(Value& a, Operand b) { return a = a % b; }
inline Value& operator&=(Value& a, Operand b) { return a = a & b; }
inline Value& operator|=(Value& a, Operand b) { return a = a | b; }
inline Value& operator^=(Value& a, Operand b) { return a = a ^ b; }
inline Value& operator<<=(Value& a, Operand b) { return a = a << b; }
inline Value& operator>>=(Value& a, Operand b) { return a = a >> b; }

}  // namespace tn::ir
