#include "kernels/Library.h"

#include <algorithm>
#include <bit>
#include <iterator>
#include <limits>
#include <numbers>
#include <string>

namespace tn::kernels::lib {

using ir::Mod;
using ir::Scalar;
using ir::Type;

namespace {

std::string sub(std::string_view name, std::string_view suffix) {
  return name.empty() ? std::string() : std::string(name) + std::string(suffix);
}

Value load(KernelBuilder& kb, Value ptr, Type t, bool readOnly, std::string_view name) {
  return readOnly ? kb.load(ptr, t, {Mod::NcMod}, name) : kb.load(ptr, t, name);
}

// bf16 -> f32 is exact: the bf16 bits are the high half of the f32 bits.
Value bf16HighBitsToF32(KernelBuilder& kb, Value bitsInHighHalf, std::string_view name) {
  return kb.bitcast(bitsInHighHalf, Type::f32(), name);
}

}  // namespace

Value f16BitsToF32(KernelBuilder& kb, Value bitsInLowHalf, std::string_view name) {
  Value h = kb.bitcast(kb.cvt(bitsInLowHalf, Type::of(Scalar::U16)), Type::of(Scalar::F16));
  return kb.cvt(h, Type::f32(), name);
}

std::vector<Value> unpackHalves(KernelBuilder& kb, Value words, Storage s, std::string_view name) {
  std::vector<Value> out;
  for (unsigned i = 0; i < words.type().lanes; ++i) {
    Value w = kb.extract(words, i);
    std::string lo = sub(name, "." + std::to_string(2 * i)), hi = sub(name, "." + std::to_string(2 * i + 1));
    if (s == Storage::BF16) {
      out.push_back(bf16HighBitsToF32(kb, w << 16u, lo));
      out.push_back(bf16HighBitsToF32(kb, w & 0xFFFF0000u, hi));
    } else {
      out.push_back(f16BitsToF32(kb, w, lo));
      out.push_back(f16BitsToF32(kb, w >> 16u, hi));
    }
  }
  return out;
}

unsigned bytesOf(Storage s) { return s == Storage::F32 ? 4 : 2; }

OptionSpec option(std::string name, OptionValue def, std::string doc) {
  OptionSpec o;
  o.name = std::move(name);
  o.type = std::holds_alternative<int64_t>(def) ? OptionType::Int
           : std::holds_alternative<bool>(def)  ? OptionType::Bool
                                                : OptionType::String;
  o.defaultValue = std::move(def);
  o.doc = std::move(doc);
  return o;
}

OptionSpec intOption(std::string name, int64_t def, int64_t min, int64_t max, std::string doc, int64_t multipleOf) {
  OptionSpec s = option(std::move(name), def, std::move(doc));
  s.min = min;
  s.max = max;
  s.multipleOf = multipleOf;
  return s;
}

ir::Scalar scalarOf(Storage s) {
  return s == Storage::F32 ? Scalar::F32 : s == Storage::BF16 ? Scalar::BF16 : Scalar::F16;
}

namespace {

std::function<Template::ElementTypes(const Options&)> fixedElements(std::vector<std::string> names, Scalar scalar) {
  return [names = std::move(names), scalar](const Options&) {
    Template::ElementTypes out;
    for (const std::string& n : names) out.push_back({n, scalar});
    return out;
  };
}

}  // namespace

std::function<Template::ElementTypes(const Options&)> u32Elements(std::vector<std::string> names) {
  return fixedElements(std::move(names), Scalar::U32);
}

std::function<Template::ElementTypes(const Options&)> blockElements(std::vector<std::string> names) {
  return fixedElements(std::move(names), Scalar::U8);
}

std::function<Template::ElementTypes(const Options&)> storageElements(std::vector<std::string> names,
                                                                      std::string option) {
  return [names = std::move(names), option = std::move(option)](const Options& o) {
    Template::ElementTypes out;
    for (const std::string& n : names) out.push_back({n, scalarOf(storageOption(o, option))});
    return out;
  };
}

std::function<Template::ElementTypes(const Options&)> allElements(
    std::vector<std::function<Template::ElementTypes(const Options&)>> parts) {
  return [parts = std::move(parts)](const Options& o) {
    Template::ElementTypes out;
    for (const auto& part : parts) std::ranges::move(part(o), std::back_inserter(out));
    return out;
  };
}

Expr stridedSpan(const std::vector<std::pair<Expr, Expr>>& outer, const Expr& inner) {
  // min(x, 1) is 0 or 1, and max(count, 1) - 1 never goes below zero.
  if (outer.empty()) return inner;
  Expr nonEmpty = min(outer[0].first, 1), span = outer[0].second * (max(outer[0].first, 1) - 1);
  for (size_t i = 1; i < outer.size(); ++i) {
    nonEmpty = nonEmpty * min(outer[i].first, 1);
    span = span + outer[i].second * (max(outer[i].first, 1) - 1);
  }
  return nonEmpty * min(inner, 1) * (span + inner);
}

std::function<Template::Extents(const Options&)> sameExtent(std::vector<std::string> names, Expr extent) {
  return [names = std::move(names), extent = std::move(extent)](const Options&) {
    Template::Extents out;
    for (const std::string& n : names) out.push_back({n, extent});
    return out;
  };
}

std::function<Template::Extents(const Options&)> allExtents(std::vector<std::function<Template::Extents(const Options&)>> parts) {
  return [parts = std::move(parts)](const Options& o) {
    Template::Extents out;
    for (const auto& part : parts) std::ranges::move(part(o), std::back_inserter(out));
    return out;
  };
}

OptionSpec pageSizeOption(std::string doc) { return intOption("page_size", 0, 0, 4096, std::move(doc)); }

Value pagedRow(KernelBuilder& kb, Value pages, Value pos, unsigned pageSize) {
  const unsigned shift = static_cast<unsigned>(std::countr_zero(pageSize));
  Value page = kb.load(kb.index(pages, (pos >> shift).named("page_of"), 4), Type::u32(), {Mod::NcMod}, "page");
  return ((page << shift) + (pos & (pageSize - 1))).named("row");
}

OptionSpec choiceOption(std::string name, std::string def, std::vector<std::string> choices, std::string doc) {
  OptionSpec o = option(std::move(name), std::move(def), std::move(doc));
  o.choices = std::move(choices);
  return o;
}

std::vector<Options> wgmmaWhereItRuns(const Options& o) {
  if (o.text("mainloop") != "auto") return {};
  Options wgmma = o;
  wgmma.set("mainloop", std::string("wgmma"));
  return {wgmma, o};
}

OptionSpec dtypeOption(std::string name, std::string doc) {
  return choiceOption(std::move(name), "f32", {"f32", "bf16", "f16"}, std::move(doc));
}

Storage storageOption(const Options& o, const std::string& name) {
  const std::string& v = o.text(name);
  if (v == "bf16") return Storage::BF16;
  if (v == "f16") return Storage::F16;
  return Storage::F32;
}

ir::Module newModule() {
  ir::Module m;
  m.ptx = 70;  // the target is sm_80 until the compiler retargets the module
  return m;
}

std::optional<ir::Module> finish(const KernelBuilder& kb, ir::Module& m, ir::Diagnostics& diags) {
  for (const ir::Diagnostic& d : kb.diagnostics().all()) diags.report(d.severity, d.file, d.loc, d.message);
  if (!kb.ok()) return std::nullopt;
  return std::move(m);
}

Value loadF32(KernelBuilder& kb, Value ptr, Storage s, bool readOnly, std::string_view name) {
  switch (s) {
    case Storage::F32: return load(kb, ptr, Type::f32(), readOnly, name);
    case Storage::BF16: {
      Value raw = load(kb, ptr, Type::of(Scalar::U16), readOnly, sub(name, ".raw"));
      return bf16HighBitsToF32(kb, kb.cvt(raw, Type::u32()) << 16u, name);
    }
    case Storage::F16: return kb.cvt(load(kb, ptr, Type::of(Scalar::F16), readOnly, sub(name, ".raw")), Type::f32(), name);
  }
  return Value();
}

void storeF32(KernelBuilder& kb, Value ptr, Value v, Storage s) {
  switch (s) {
    case Storage::F32: kb.store(ptr, v); return;
    case Storage::BF16: kb.store(ptr, kb.cvt(v, Type::of(Scalar::BF16))); return;
    case Storage::F16: kb.store(ptr, kb.cvt(v, Type::of(Scalar::F16))); return;
  }
}

namespace {

// One cvt.rn.{bf16x2,f16x2}.f32 per pair (the element at the lower address in the low half).
Value packHalves(KernelBuilder& kb, std::span<const Value> values, Storage s) {
  std::vector<Value> words;
  Scalar half = s == Storage::BF16 ? Scalar::BF16 : Scalar::F16;
  for (size_t i = 0; i < values.size(); i += 2) words.push_back(kb.cvt_pack(half, values[i + 1], values[i]));
  return kb.pack(Type::of(Scalar::B32, 4), words);
}

bool checkVecCount(KernelBuilder& kb, std::span<const Value> values, Storage s) {
  if (values.size() == vecElems(s)) return true;
  kb.error(ir::Here::current(), "a 16-byte store needs " + std::to_string(vecElems(s)) + " values");
  return false;
}

}  // namespace

std::vector<Value> loadVecF32(KernelBuilder& kb, Value ptr, Storage s, bool readOnly, std::string_view name) {
  if (s == Storage::F32) {
    std::vector<Value> out;
    Value v = load(kb, ptr, Type::of(Scalar::F32, 4), readOnly, sub(name, ".v"));
    for (unsigned i = 0; i < 4; ++i) out.push_back(kb.extract(v, i, sub(name, "." + std::to_string(i))));
    return out;
  }
  return unpackHalves(kb, load(kb, ptr, Type::of(Scalar::U32, 4), readOnly, sub(name, ".v")), s, name);
}

void storeVecF32(KernelBuilder& kb, Value ptr, std::span<const Value> values, Storage s) {
  if (!checkVecCount(kb, values, s)) return;
  if (s == Storage::F32) kb.store(ptr, kb.pack(Type::of(Scalar::F32, 4), {values.begin(), values.end()}));
  else kb.store(ptr, packHalves(kb, values, s));
}

std::vector<Value> storeVecF32Stored(KernelBuilder& kb, Value ptr, std::span<const Value> values, Storage s) {
  if (!checkVecCount(kb, values, s)) return {values.begin(), values.end()};
  if (s == Storage::F32) {
    storeVecF32(kb, ptr, values, s);
    return {values.begin(), values.end()};
  }
  Value words = packHalves(kb, values, s);
  kb.store(ptr, words);
  return unpackHalves(kb, words, s, {});
}

StoredVec packVecF32(KernelBuilder& kb, std::span<const Value> values, Storage s) {
  if (!checkVecCount(kb, values, s)) return {Value(), {values.begin(), values.end()}};
  if (s == Storage::F32) return {kb.pack(Type::of(Scalar::F32, 4), {values.begin(), values.end()}), {values.begin(), values.end()}};
  Value words = packHalves(kb, values, s);
  return {words, unpackHalves(kb, words, s, {})};
}

Value loadVecBytes(KernelBuilder& kb, Value ptr, Storage s, bool readOnly) {
  return load(kb, ptr, Type::of(s == Storage::F32 ? Scalar::F32 : Scalar::B32, 4), readOnly, "vec");  // packVecF32's types
}

std::vector<Value> unpackVecF32(KernelBuilder& kb, Value bytes, Storage s) {
  if (s != Storage::F32) return unpackHalves(kb, bytes, s, {});
  std::vector<Value> out;
  for (unsigned i = 0; i < 4; ++i) out.push_back(kb.extract(bytes, i));
  return out;
}

Value rowParam(KernelBuilder& kb, Type t, std::string_view name, bool perRow) {
  return kb.param(perRow ? kGlobalPtr : t, name);
}

Value rowValue(KernelBuilder& kb, Value param, Type t, bool perRow, Value row, std::string_view name) {
  if (!perRow) return param;
  return kb.load(kb.index(param, row, t.bytes()), t, {Mod::NcMod}, name);
}

OptionSpec perRowOption(std::string what) {
  return option("per_row", false,
                what + " are arrays with one value per row (pointers [rows] of the same types, under the same "
                       "names), so that one launch serves a batch whose requests sample differently");
}

Value allAligned(KernelBuilder& kb, std::initializer_list<Value> ptrs, unsigned bytes, std::string_view name) {
  Value bits;
  for (Value p : ptrs) {
    Value a = kb.bitcast(p, Type::u64());
    bits = bits.valid() ? (bits | a) : a;
  }
  return ((bits & static_cast<uint64_t>(bytes - 1)) == uint64_t{0}).named(name.empty() ? "aligned" : name);
}

Value chunkCount(KernelBuilder&, Value cols, unsigned size) { return (((cols - 1u) / size) + 1u).named("chunks"); }

RowChunk rowChunk(KernelBuilder& kb, Value cols, unsigned size) {
  Value chunk = kb.ctaid(Mod::X, "chunk");
  Value start = (chunk * size).named("start");
  return {kb.ctaid(Mod::Y, "row"), chunk, chunkCount(kb, cols, size), start,
          kb.min(cols - start, kb.u32(size), "len")};
}

Value assumeAligned(KernelBuilder& kb, Value p, unsigned bytes, std::string_view name) {
  return kb.bitcast(kb.bitcast(p, Type::u64()) & ~uint64_t{bytes - 1}, kGlobalPtr, name);
}

Value negInf(KernelBuilder& kb) { return kb.f32(-std::numeric_limits<float>::infinity(), "neg_inf"); }

Value refOf(KernelBuilder& kb, Value m) { return kb.select(m == negInf(kb), kb.f32(0.0f), m, "ref"); }

// Flipping all bits of negatives and the sign bit of positives turns the IEEE order into unsigned
// order; -0 takes +0's key and every NaN the largest.
Value orderKey(KernelBuilder& kb, Value v) {
  Value bits = kb.bitcast(v, Type::u32());
  Value negMask = kb.bitcast(kb.bitcast(bits, Type::of(Scalar::S32)) >> 31u, Type::u32());
  Value key = bits ^ (negMask | 0x80000000u);
  key = kb.select(v == 0.0f, kb.u32(0x80000000u), key);
  return kb.select(kb.setp(Mod::Nan, v, v), kb.u32(0xFFFFFFFFu), key, "key");
}

Best better(KernelBuilder& kb, Best a, Best b) {
  Value bWins = (b.key > a.key) | ((b.key == a.key) & (b.idx < a.idx));
  return {kb.select(bWins, b.key, a.key), kb.select(bWins, b.idx, a.idx)};
}

Best nothing(KernelBuilder& kb) { return {kb.u32(0), kb.u32(0xFFFFFFFFu, "none")}; }

Best warpBest(KernelBuilder& kb, Best mine) {
  for (unsigned off = 16; off >= 1; off /= 2)
    mine = better(kb, mine, {kb.shfl(Mod::Bfly, mine.key, off, "key.other"), kb.shfl(Mod::Bfly, mine.idx, off, "idx.other")});
  return mine;
}

ExpertPair expertPair(KernelBuilder& kb, Value ids) {
  Value nExperts = kb.param(Type::u32(), "n_experts");
  kb.param(Type::u32(), "pairs");  // the grid's y extent
  Value slots = kb.max(kb.param(Type::u32(), "slots"), kb.u32(1), "slots_or_1");
  ExpertPair e;
  e.pair = kb.ctaid(Mod::Y, "pair");
  Value id = kb.load(kb.index(ids, e.pair, 4), Type::u32(), {Mod::NcMod}, "id");
  e.known = (id < nExperts).named("known_expert");
  e.expert = kb.select(e.known, id, kb.u32(0), "expert");
  e.xRow = (e.pair / slots).named("x_row");
  return e;
}

Expr moeTiles(uint64_t tile) {
  const Expr pairs = Expr::param("pairs");
  return ceilDiv(pairs, Expr(tile)) + min(Expr::param("n_experts") + Expr(1), pairs);
}

Value fmix32(Value h) {
  h = h ^ (h >> 16u);
  h = h * 0x85EBCA6Bu;
  h = h ^ (h >> 13u);
  h = h * 0xC2B2AE35u;
  return (h ^ (h >> 16u)).named("hash");
}

Value uniformOf(KernelBuilder& kb, Value h) {
  return kb.fma(kb.cvt(h >> 8u, Type::f32(), {Mod::Rn}), kb.f32(0x1p-24f), kb.f32(0x1p-25f), "u");
}

// E = -ln u: by lg2 up to u = 3/4; above, where lg2's absolute error would be a large part of a
// small E (the winning noise of a long flat row), -ln(1 - w) = 2 atanh(w / (2 - w)) for w = 1 - u
// (exact), z = w / (2 - w) <= 1/7: the series to z^9 is within 2^-33 of it, and z's rcp.approx
// (2^-23 relative) keeps E's relative error near one rounding however small it is.
Value exponentialOf(KernelBuilder& kb, Value h) {
  Value u = uniformOf(kb, h);
  Value byLog = (kb.lg2(u) * -std::numbers::ln2_v<float>).named("e_log");
  Value w = (1.0f - u).named("w");
  Value z = (w * rcpApprox(kb, 2.0f - w)).named("z");
  Value z2 = (z * z).named("z2");
  Value series = kb.fma(z2, kb.f32(1.0f / 9), kb.f32(1.0f / 7));
  series = kb.fma(z2, series, kb.f32(1.0f / 5));
  series = kb.fma(z2, series, kb.f32(1.0f / 3));
  series = kb.fma(z2, series, kb.f32(1.0f));
  Value byAtanh = (2.0f * z * series).named("e_atanh");
  return kb.select(u > 0.75f, byAtanh, byLog, "exponential");
}

Value rcpApprox(KernelBuilder& kb, Value v, std::string_view name) {
  return kb.op(ir::Op::Rcp, Type::f32(), {v}, {Mod::Approx, Mod::FtzMod}, name);
}

Value ex2Approx(KernelBuilder& kb, Value v, std::string_view name) {
  return kb.op(ir::Op::Ex2, Type::f32(), {v}, {Mod::Approx, Mod::FtzMod}, name);
}

Value rsqrtApprox(KernelBuilder& kb, Value v, std::string_view name) {
  return kb.op(ir::Op::Rsqrt, Type::f32(), {v}, {Mod::Approx, Mod::FtzMod}, name);
}

std::vector<Value> blockCombine(KernelBuilder& kb, std::vector<Value> perThread, Value tid, ir::SharedArray scratch,
                                const CombineFn& combine, Order order, ir::Here loc) {
  const ir::Kernel& k = kb.kernel();
  unsigned threads = k.reqntid && k.reqntid->y == 1 && k.reqntid->z == 1 ? k.reqntid->x : 0;
  unsigned warps = threads / 32;
  size_t n = perThread.size();
  bool typesOk = n > 0;
  for (Value v : perThread) typesOk = typesOk && !v.type().isVector() && v.type().bits() == 32 && !v.type().isPred();
  if (threads % 32 != 0 || !std::has_single_bit(warps) || warps > 32 || !typesOk || scratch.elem.bytes() != 4 ||
      scratch.count < n * warps) {
    kb.error(loc, "blockCombine needs a 1-D reqntid of 32 to 1024 threads (a power-of-two warp count), "
                                  "32-bit values and a 32-bit scratch of values * warps elements");
    return perThread;
  }
  Value lane = (tid & 31u).named("lane");
  auto butterfly = [&](std::vector<Value> acc, unsigned width) {
    for (unsigned off = width / 2; off >= 1; off /= 2) {
      std::vector<Value> other;
      for (Value a : acc) other.push_back(kb.shfl(Mod::Bfly, a, off));
      if (order == Order::Commutative) {
        acc = combine(acc, other);
        continue;
      }
      Value low = ((lane & off) == 0u).named("low");
      std::vector<Value> lo, hi;
      for (size_t i = 0; i < acc.size(); ++i) {
        lo.push_back(kb.select(low, acc[i], other[i]));
        hi.push_back(kb.select(low, other[i], acc[i]));
      }
      acc = combine(lo, hi);
    }
    return acc;
  };
  perThread = butterfly(std::move(perThread), 32);
  if (warps == 1) return perThread;
  Value warp = (tid >> 5u).named("warp");
  Value base = kb.shared_addr(scratch, "scratch");
  kb.if_then((lane == 0u).named("leader"), [&] {
    for (size_t i = 0; i < n; ++i) kb.store(kb.index(base, warp + uint32_t(i * warps), 4), perThread[i]);
  }, "stage");
  kb.bar_sync();
  // Lane j of every group of `warps` lanes takes warp j's tuple: every lane ends with the result.
  Value slot = (lane & (warps - 1)).named("slot");
  std::vector<Value> parts;
  for (size_t i = 0; i < n; ++i) parts.push_back(kb.load(kb.index(base, slot + uint32_t(i * warps), 4), perThread[i].type()));
  return butterfly(std::move(parts), warps);
}

// x < 0 ? 0 : x keeps NaN (max.f32 would turn it into 0).
Value relu(KernelBuilder& kb, Value x) { return kb.select(x < 0.0f, kb.f32(0.0f), x); }

// x / (1 + 2^t), i.e. x * sigmoid(-t ln 2). For very negative x * sigmoid, 2^t overflows to
// inf (or passes 2^126, whose reciprocal .ftz flushes) and rcp gives 0, so the result is -0
// rather than inf/inf = NaN; the exact result is below 2^-119 there. ex2 (2 ulp) and rcp
// (1 ulp) are the .approx instructions; t's own rounding dominates when |t| is large. A flushed
// 2^t (t < -126) adds nothing to 1.
static Value xOverOnePlusExp2(KernelBuilder& kb, Value x, Value t) {
  return x * rcpApprox(kb, ex2Approx(kb, t) + 1.0f);
}

Value silu(KernelBuilder& kb, Value x) { return xOverOnePlusExp2(kb, x, x * -kLog2e); }
Value sigmoid(KernelBuilder& kb, Value x) { return xOverOnePlusExp2(kb, kb.f32(1.0f), x * -kLog2e); }

// 0.5x(1 + tanh(u)) = x * sigmoid(2u) with u = sqrt(2/pi)(x + 0.044715x^3). The sigmoid form
// avoids the cancellation of 1 + tanh(u) for negative x, where tanh.approx's 2^-11 relative
// error would swamp the result; it costs one ex2 and one rcp.
Value geluTanh(KernelBuilder& kb, Value x) {
  constexpr double c0 = -2.0 * std::numbers::log2e * 0.7978845608028654;  // -2 log2(e) sqrt(2/pi)
  constexpr double c1 = c0 * 0.044715;
  Value t = x * kb.fma(x * x, kb.f32(static_cast<float>(c1)), kb.f32(static_cast<float>(c0)));
  return xOverOnePlusExp2(kb, x, t);
}

Value softcap(KernelBuilder& kb, Value x, Value a, Value k) {
  return kb.fma(-2.0f * k, rcpApprox(kb, ex2Approx(kb, x * a) + 1.0f), k, "capped");
}

// 0.5x(1 + erf(x/sqrt 2)) = x * Phi(x), Phi(x) = 0.5 erfc(-x/sqrt 2). With z = |x|/sqrt 2 and
// h = 0.5 erfc(z), Phi is h for x < 0 and 1 - h otherwise, so no 1 - erf cancellation. erfc
// is the Chebyshev fit of Numerical Recipes (erfcc): erfc(z) = r exp(-z^2 + P(r)), r = 1/(1 + z/2),
// relative error below 1.2e-7 for every z >= 0. Measured in f32 (ex2, rcp correctly rounded):
// Phi's absolute error is below 2.2e-7, the result's relative error below 4 ulp for x > -1 and
// about x^2 ulp below that (the rounding of the exponent -z^2 log2 e), on values < 0.16|x|.
Value geluErf(KernelBuilder& kb, Value x) {
  static constexpr float kP[] = {0.17087277f, -0.82215223f, 1.48851587f, -1.13520398f, 0.27886807f,
                                 -0.18628806f, 0.09678418f, 0.37409196f, 1.00002368f, -1.26551223f};
  Value z = kb.abs(x) * (std::numbers::sqrt2_v<float> / 2);
  Value r = rcpApprox(kb, kb.fma(z, kb.f32(0.5f), kb.f32(1.0f)));
  Value p = kb.f32(kP[0]);
  for (size_t i = 1; i < std::size(kP); ++i) p = kb.fma(p, r, kb.f32(kP[i]));
  Value arg = kb.fma(-z, z, p);
  Value h = r * ex2Approx(kb, kb.fma(arg, kb.f32(kLog2e), kb.f32(-1.0f)));  // the -1 is the 0.5
  Value phi = kb.select((x < 0.0f).named("neg"), h, 1.0f - h);
  return x * phi;
}

OptionSpec gluOption() {
  return choiceOption("glu", "silu", {"silu", "gelu", "gelu_erf", "swiglu_oai"},
                      "the gated linear unit's activation: silu (SwiGLU), gelu (GeGLU, gelu's tanh form: Gemma's "
                      "gelu_pytorch_tanh), gelu_erf (GeGLU, the erf form) or swiglu_oai (gpt-oss's clamped SwiGLU: "
                      "the activated input clamped above at 7 into x * sigmoid(1.702 x), times the other clamped to "
                      "[-7, 7] plus 1)");
}

Value gluUnit(KernelBuilder& kb, std::string_view glu, Value x, Value linear) {
  if (glu != "swiglu_oai")
    return linear * (glu == "gelu" ? geluTanh(kb, x) : glu == "gelu_erf" ? geluErf(kb, x) : silu(kb, x));
  // gpt-oss's constants; clamps by select, so that a NaN compares false and stays.
  constexpr float kAlpha = 1.702f, kLimit = 7.0f;
  Value xc = kb.select((x > kLimit).named("x_high"), kb.f32(kLimit), x, "x_clamped");
  Value lc = kb.select((linear > kLimit).named("linear_high"), kb.f32(kLimit), linear, "linear_clamped");
  lc = kb.select((lc < -kLimit).named("linear_low"), kb.f32(-kLimit), lc, "linear_clamped");
  return (lc + 1.0f) * xOverOnePlusExp2(kb, xc, xc * (-kAlpha * kLog2e));
}

SpreadSum warpSumSpread(KernelBuilder& kb, std::vector<Value> values, Value lane) {
  const size_t n = std::bit_ceil(values.size());
  values.resize(n, kb.f32(0.0f));
  // Pairing step s (offset 16 >> s): a lane whose offset bit is set keeps the upper value of
  // each pair and sends the lower, so after log2 n steps lane l holds a partial sum of value
  // (l >> (5 - log2 n)) & (n - 1); plain butterflies over the offsets left finish it.
  unsigned offset = 16;
  for (; values.size() > 1; offset >>= 1) {
    const size_t half = values.size() / 2;
    Value upper = ((lane & offset) != 0u).named("upper");
    std::vector<Value> next;
    for (size_t j = 0; j < half; ++j) {
      Value send = kb.select(upper, values[j], values[j + half], "send");
      Value keep = kb.select(upper, values[j + half], values[j], "keep");
      next.push_back((keep + kb.shfl(Mod::Bfly, send, offset, "recv")).named("part"));
    }
    values = std::move(next);
  }
  Value sum = values[0];
  for (; offset >= 1; offset >>= 1) sum = (sum + kb.shfl(Mod::Bfly, sum, offset, "recv")).named("part");
  return {sum, 5 - static_cast<unsigned>(std::countr_zero(n))};
}

std::vector<Value> warpSumEach(KernelBuilder& kb, std::vector<Value> values, Value lane) {
  const size_t count = values.size();
  if (count == 0) return {};
  if (count > 32) {  // 32 at a time
    std::vector<Value> out = warpSumEach(kb, std::vector<Value>(values.begin(), values.begin() + 32), lane);
    std::vector<Value> rest = warpSumEach(kb, std::vector<Value>(values.begin() + 32, values.end()), lane);
    out.insert(out.end(), rest.begin(), rest.end());
    return out;
  }
  SpreadSum spread = warpSumSpread(kb, std::move(values), lane);
  std::vector<Value> out;
  for (size_t j = 0; j < count; ++j)
    out.push_back(kb.shfl(Mod::Idx, spread.sum, static_cast<uint32_t>(j << spread.shift), "sum"));
  return out;
}

void waitPhase(KernelBuilder& kb, Value bar, Value parity, std::string_view label) {
  ir::BlockId spin = kb.block(std::string(label)), done = kb.block(std::string(label) + ".done");
  kb.br(spin);
  kb.set_insert_point(spin);
  kb.cbr(kb.mbarrier_try_wait_parity(bar, parity, "ready"), done, spin);
  kb.set_insert_point(done);
}

void warpSpecialize(KernelBuilder& kb, Value tid, unsigned producerRegisters, unsigned consumerRegisters,
                    const std::function<void()>& produce, const std::function<void(Value consumer)>& consume,
                    const std::function<void()>& helpers) {
  Value wg = (tid >> 7u).named("warpgroup");
  kb.if_else(
      (wg == 0u).named("producer"),
      [&] {
        kb.setmaxnreg(false, producerRegisters);
        Value firstWarp = (tid < 32u).named("first_warp");
        kb.if_then(firstWarp, [&] {
          kb.if_then(kb.elect_sync(kb.u32(0xFFFFFFFFu), "elected"), produce, "issue");
        }, "producer_warp");
        if (helpers) kb.if_then(!firstWarp, helpers, "helper_warps");
      },
      [&] {
        kb.setmaxnreg(true, consumerRegisters);
        consume((wg - 1u).named("consumer"));
      },
      {.label = "role"});
}

}  // namespace tn::kernels::lib
