// fp8 codes for KV caches and weights (docs/kernels.md, "fp8 KV caches"): decoding to f32, by
// cvt.f16x2 on sm_89 and newer targets or by integer instructions on any, and encoding from f32
// by integer instructions (kv_scatter and quantize_fp8 write few codes); and the quantize_fp8
// template, which turns a matrix into codes with a scale per row or per tensor.
//
// Integer decoding places a code's sign and its 7 other bits in an f32 whose exponent field keeps the
// code's exponent unbiased by the difference of the biases (f32's 127 less the code's 7 or 15):
// the f32 is the code's value times 2^-120 (E4M3) or 2^-112 (E5M2), exactly, subnormal codes
// included (as f32 subnormals). Callers fold the 2^bias back into a scale factor after their
// products are summed. Encoding rounds the f32's bits to the code's mantissa (ties to even) and
// rebiases; below the code's smallest normal it rounds |x| times 2^(bias - 1 + mantissa bits) to
// an integer (cvt.rni), which is the subnormal code itself.
#include <bit>
#include <cmath>
#include <functional>

#include "kernels/Library.h"

namespace tn::kernels::lib {

namespace {

struct Fp8Format {
  unsigned mantissa;   // mantissa bits: 3 (E4M3), 2 (E5M2)
  unsigned bias;       // 127 - the code's exponent bias
  uint32_t maxFinite;  // the largest finite value's f32 bits
  uint32_t minNormal;  // the smallest normal value's f32 bits
  float subnormalUnit; // 1 / the smallest subnormal value
  uint32_t special;    // codes whose 7 low bits, shifted to the top of a u32 (t << 1), are at least this are NaN or inf
};

Fp8Format formatOf(Fp8 f) {
  if (f == Fp8::E4M3) return {3, 120, 0x43E00000u, 0x3C800000u, 512.0f, 0xFE000000u};  // 448, 2^-6, 2^9
  return {2, 112, 0x47600000u, 0x38800000u, 65536.0f, 0xF8000000u};                    // 57344, 2^-14, 2^16
}

}  // namespace

OptionSpec cacheDtypeOption(std::string doc) {
  return choiceOption("cache_dtype", "auto", {"auto", "fp8_e4m3", "fp8_e5m2"}, std::move(doc));
}

Fp8 fp8Named(std::string_view value) {
  return value == "fp8_e4m3" ? Fp8::E4M3 : value == "fp8_e5m2" ? Fp8::E5M2 : Fp8::None;
}

Template::Element fp8Element(Fp8 f) {
  return f == Fp8::E5M2 ? bundle::ParamType::Scalar::E5M2 : bundle::ParamType::Scalar::E4M3;
}

ir::Mod fp8Mod(Fp8 f) { return f == Fp8::E5M2 ? ir::Mod::E5m2Mod : ir::Mod::E4m3Mod; }

Fp8 cacheDtype(const Options& o) { return o.all().count("cache_dtype") ? fp8Named(o.text("cache_dtype")) : Fp8::None; }

std::function<Template::ElementTypes(const Options&)> cacheElements(std::vector<std::string> names) {
  return [names = std::move(names)](const Options& o) {
    const Fp8 f = cacheDtype(o);
    const Template::Element e = f == Fp8::None ? Template::Element(scalarOf(storageOption(o))) : fp8Element(f);
    Template::ElementTypes out;
    for (const std::string& n : names) out.push_back({n, e});
    return out;
  };
}

unsigned fp8Bias(Fp8 f) { return formatOf(f).bias; }

OptionSpec fp8DecodeOption() {
  return choiceOption("fp8_decode", "auto", {"auto", "cvt", "integer"},
                      "with fp8 codes (caches, weights), how they become values: cvt (PTX cvt.rn.f16x2.e4m3x2, sm_89+: "
                      "about 1.5 instructions a code), integer (shifts and masks, any target: about 6), or auto (cvt "
                      "in the code for sm_89 and newer targets, integer in the code for older ones)");
}

bool fp8Cvt(const Options& o) { return o.all().count("fp8_decode") && o.text("fp8_decode") == "cvt"; }

bool checkFp8Decode(const Options& o, Fp8 codes, ir::Diagnostics& diags) {
  if (codes != Fp8::None || o.text("fp8_decode") == "auto") return true;
  diags.report(ir::Severity::Error, "", {},
               "fp8_decode = \"" + o.text("fp8_decode") + "\" needs fp8 " +
                   (o.all().count("cache_dtype") ? "caches (cache_dtype)" : "weights") + " (there are no codes to decode)");
  return false;
}

std::vector<Options> fp8DecodeWhereItRuns(const Options& o, Fp8 codes) {
  if (codes == Fp8::None || o.text("fp8_decode") != "auto") return {};
  Options cvt = o, integer = o;
  cvt.set("fp8_decode", std::string("cvt"));
  integer.set("fp8_decode", std::string("integer"));
  return {cvt, integer};
}

std::vector<Options> withFp8Decode(std::vector<Options> members, const Options& o, Fp8 codes) {
  if (codes == Fp8::None || o.text("fp8_decode") != "auto") return members;
  if (members.empty()) members.push_back(o);
  std::vector<Options> out;
  for (const Options& member : members)
    for (const Options& d : fp8DecodeWhereItRuns(member, codes)) out.push_back(d);
  return out;
}

float fp8Scale(Fp8 f, bool cvt) { return cvt ? 1.0f : std::ldexp(1.0f, int(fp8Bias(f))); }

Value cvtCodePair(KernelBuilder& kb, Value w, Fp8 f, std::string_view name) {
  return kb.cvt_f16x2_fp8(kb.cvt(w, ir::Type::of(ir::Scalar::U16)), fp8Mod(f), name);
}

std::vector<Value> decodeCodes(KernelBuilder& kb, Value w, unsigned count, Fp8 f, bool cvt, std::string_view name) {
  std::vector<Value> out;
  if (!cvt) {
    for (unsigned i = 0; i < count; ++i) out.push_back(fp8Raw(kb, w, i, f, name));
    return out;
  }
  for (unsigned i = 0; i < count; i += 2) {
    Value pair = kb.bitcast(cvtCodePair(kb, i == 0 ? w : w >> 16u, f, "f16_pair"), ir::Type::u32());
    out.push_back(f16BitsToF32(kb, pair, name));
    if (i + 1 < count) out.push_back(f16BitsToF32(kb, pair >> 16u, name));
  }
  return out;
}

Value fp8Raw(KernelBuilder& kb, Value w, unsigned byte, Fp8 f, std::string_view name) {
  const Fp8Format F = formatOf(f);
  // The code on top of a word; an arithmetic shift by the f32 exponent's extra bits then copies
  // the sign over them, and the mask keeps the sign and the code's 7 bits below them.
  Value top = byte == 3 ? w : (w << (24 - 8 * byte)).named("fp8_top");
  const unsigned extra = 8 - (7 - F.mantissa);  // 4 (E4M3), 3 (E5M2)
  Value shifted = kb.bitcast(kb.bitcast(top, ir::Type::of(ir::Scalar::S32)) >> extra, ir::Type::u32());
  Value bits = (shifted & ((0x80000000u | (0x7Fu << (24 - extra))))).named("fp8_bits");
  // NaN codes (and E5M2's infinities) get f32's all-ones exponent over their own mantissa.
  Value special = ((top << 1u) >= F.special).named("fp8_special");
  return kb.bitcast(kb.select(special, bits | 0x7F800000u, bits), ir::Type::f32(), name);
}

Value f32ToFp8(KernelBuilder& kb, Value x, Fp8 f, std::string_view name) {
  const Fp8Format F = formatOf(f);
  Value b = kb.bitcast(x, ir::Type::u32(), "x_bits");
  Value sign = ((b >> 24u) & 0x80u).named("fp8_sign");
  Value a = (b & 0x7FFFFFFFu).named("abs_bits");
  Value nan = (a > 0x7F800000u).named("is_nan");
  Value c = kb.min(a, kb.u32(F.maxFinite), "clamped");  // infinities and beyond: the largest finite
  // Subnormal codes: |x| in units of the smallest subnormal, to the nearest integer (ties to even).
  Value sub = kb.cvt(kb.bitcast(c, ir::Type::f32()) * F.subnormalUnit, ir::Type::u32(), {ir::Mod::Rni}, "fp8_sub");
  // Normal codes: round the 23-bit mantissa to F.mantissa bits (ties to even), then rebias.
  const unsigned drop = 23 - F.mantissa;
  Value lsb = ((c >> drop) & 1u).named("lsb");
  Value rounded = ((c + ((1u << (drop - 1)) - 1u)) + lsb).named("rounded");
  Value normal = ((rounded >> drop) - (F.bias << F.mantissa)).named("fp8_normal");
  Value code = kb.select(c < F.minNormal, sub, normal, "fp8_mag");
  return kb.select(nan, kb.u32(0x7F), code | sign, name);
}

Value packBytes(std::span<const Value> codes, std::string_view name) {
  Value w = codes[0];
  for (unsigned i = 1; i < 4; ++i) w = w | (codes[i] << (8 * i));
  return w.named(name);
}

std::array<Value, 4> fp8HalfPairs(KernelBuilder& kb, ir::Scalar half, Value w0, Value w1, Fp8 f, bool cvt) {
  std::array<Value, 4> pairs;
  const float scale = fp8Scale(f, cvt);
  for (unsigned w = 0; w < 2; ++w) {
    Value codes = w == 0 ? w0 : w1;
    if (cvt && half == ir::Scalar::F16) {
      pairs[2 * w] = cvtCodePair(kb, codes, f, "f16_pair");
      pairs[2 * w + 1] = cvtCodePair(kb, codes >> 16u, f, "f16_pair");
      continue;
    }
    std::vector<Value> x = decodeCodes(kb, codes, 4, f, cvt, "code");
    if (scale != 1.0f)
      for (Value& v : x) v = v * scale;
    for (unsigned i = 0; i < 2; ++i) pairs[2 * w + i] = kb.cvt_pack(half, x[2 * i + 1], x[2 * i], ir::Mod::Rn, "pair");
  }
  return pairs;
}

void convertLines(KernelBuilder& kb, Value codes, Value tile, unsigned lines, Value first, unsigned step, ir::Scalar half,
                  Fp8 f, bool cvt) {
  kb.for_range(first, kb.u32(lines * 8), kb.u32(step), [&](Value unit) {
    Value line = (unit >> 3u).named("line"), chunk = (unit & 7u).named("chunk");
    Value w = kb.load(kb.ptradd(codes, (unit << 3u).named("codes_off")), ir::Type::of(ir::Scalar::U32, 2), "codes");
    const std::array<Value, 4> pairs = fp8HalfPairs(kb, half, kb.extract(w, 0), kb.extract(w, 1), f, cvt);
    kb.store(kb.ptradd(tile, ((line << 7u) + ((chunk ^ (line & 7u)) << 4u)).named("tile_off")),
             kb.pack(ir::Type::of(ir::Scalar::B32, 4), std::vector<Value>(pairs.begin(), pairs.end()), "chunk_bits"));
  }, {.label = "convert", .iv = "unit"});
}

// ---- quantize_fp8 ---------------------------------------------------------------------------

namespace {

constexpr unsigned kQuantizeBlock = 256;  // threads a row
constexpr unsigned kQuantizeGroup = 128;  // scales = "group": columns a scale

// The f32 value at column c (< cols) of the row being quantized.
using ValueAt = std::function<Value(Value c)>;

// What the row quantizers (quantize_fp8, rmsnorm_quantize_fp8, swiglu_quantize_fp8) share: the
// codes' format, the scales per row or per group, a block a row, the codes' element type and the
// scales' extent.
OptionSpec codesFormatOption() {
  return choiceOption("format", "fp8_e4m3", {"fp8_e4m3", "fp8_e5m2"}, "the codes' format: OCP E4M3 or E5M2");
}
OptionSpec rowOrGroupScalesOption() {
  return choiceOption("scales", "row", {"row", "group"},
                      "row: a scale per row, scales [rows]; group: one per 128 columns of a row, scales [rows x "
                      "ceil_div(cols, 128)] (gemm's a_scales with scale_block = 128)");
}
LaunchRule blockPerRow(const Options&) { return LaunchRule{{kQuantizeBlock}, {Expr::param("rows")}, 0}; }
Template::Element codesElement(const Options& o) { return fp8Element(fp8Named(o.text("format"))); }
Expr scalesExtent(const Options& o) {
  const Expr rows = Expr::param("rows");
  return o.text("scales") == "group" ? rows * ceilDiv(Expr::param("cols"), kQuantizeGroup) : rows;
}

// scales = "group": each 128 columns of a row (the last group may be shorter) get their own
// scale, found and applied by one warp (4 values a lane, 32 columns apart: coalesced loads and
// byte stores); the block's 8 warps take groups w, w + 8, ... The scale is written to
// scales[row * groups + group], the layout gemm's a_scales take with scale_block = 128.
void quantizeGroups(KernelBuilder& kb, Fp8 f, const ValueAt& valueAt, Value crow, Value scales, Value row, Value cols,
                    Value tid) {
  Value groups = ((cols + (kQuantizeGroup - 1)) / kQuantizeGroup).named("groups");
  Value warp = (tid >> 5u).named("warp"), lane = (tid & 31u).named("lane");
  Value last = (cols - 1u).named("last_col");
  Value scaleRow = kb.mul_wide(row, groups, "scale_row");
  kb.for_range(warp, groups, kQuantizeBlock / 32, {}, [&](Value g, std::span<Value>) {
    std::vector<Value> xs, in;
    Value amax = kb.f32(0.0f);
    for (unsigned j = 0; j < kQuantizeGroup / 32; ++j) {
      Value c = (g * kQuantizeGroup + lane + 32 * j).named("c");
      in.push_back((c < cols).named("in_row"));
      Value v = valueAt(kb.min(c, last));
      xs.push_back(kb.select(in.back(), v, kb.f32(0.0f), "x_in"));
      amax = kb.max(amax, kb.abs(xs.back()));
    }
    amax = kb.warp_reduce_max(amax, "group_amax");
    Value scale = kb.div(amax, kb.f32(std::bit_cast<float>(formatOf(f).maxFinite)), "scale");
    kb.if_then(lane == 0u, [&] { kb.store(kb.index(scales, scaleRow + kb.cvt(g, ir::Type::u64()), 4), scale); },
               "write_scale");
    Value divisor = kb.select((scale == 0.0f).named("zero_scale"), kb.f32(1.0f), scale, "divisor");
    for (unsigned j = 0; j < kQuantizeGroup / 32; ++j) {
      Value code = f32ToFp8(kb, kb.div(xs[j], divisor), f, "code");
      Value c = (g * kQuantizeGroup + lane + 32 * j).named("c");
      kb.if_then(in[j], [&] {
        kb.store(kb.ptradd(crow, kb.cvt(c, ir::Type::u64()), "dst"), kb.cvt(code, ir::Type::of(ir::Scalar::U8)));
      }, "store_code");
    }
    return std::vector<Value>{};
  }, {.label = "groups", .iv = "g"});
}

// The codes of a row held in registers (RowInRegs: vecElems(s) values a slot), with a scale per
// row or per group of 128 columns, equal to what the element paths above write (max passes over
// NaN and is exact in any order; each code is x / scale by div.rn). Per row: the thread's largest
// |value| over its slots inside the row, the block's by block_reduce_max through `scratch` (8
// f32), the scale stored by thread 0. Per group: a group is 128 / V consecutive vectors, the same
// slot of 32 (f32) or 16 (16-bit) neighbouring lanes, so its largest |value| is a butterfly over
// them, and the group's first lane stores its scale. Each slot inside the row stores its V codes
// as one 4- or 8-byte store where `codesAligned` (the row's codes a multiple of V bytes from an
// aligned base), else byte by byte.
void quantizeRowInRegs(KernelBuilder& kb, Fp8 f, bool perGroup, const RowInRegs& y, Value crow, Value scales,
                       Value row, Value cols, Value tid, Value codesAligned, ir::SharedArray scratch) {
  const unsigned V = vecElems(y.s), slots = static_cast<unsigned>(y.bytes.size());
  const Value maxFinite = kb.f32(std::bit_cast<float>(formatOf(f).maxFinite), "max_finite");
  auto largest = [&](unsigned k) {
    std::vector<Value> v = y.values(kb, k);
    Value m = kb.abs(v[0]);
    for (unsigned i = 1; i < V; ++i) m = kb.max(m, kb.abs(v[i]));
    return kb.select(y.valid[k], m, kb.f32(0.0f), "slot_amax");
  };
  auto divisorOf = [&](Value scale) { return kb.select((scale == 0.0f).named("zero_scale"), kb.f32(1.0f), scale, "divisor"); };
  Value rowDivisor;
  if (!perGroup) {
    Value amax = largest(0);
    for (unsigned k = 1; k < slots; ++k) amax = kb.max(amax, largest(k));
    Value scale = kb.div(kb.block_reduce_max(amax, scratch, "row_amax"), maxFinite, "scale");
    kb.if_then(tid == 0u, [&] { kb.store(kb.index(scales, row, 4), scale); }, "write_scale");
    rowDivisor = divisorOf(scale);
  }
  const unsigned lanes = kQuantizeGroup / V;  // per group: a group's vectors, one a lane
  Value groups = ((cols + (kQuantizeGroup - 1)) / kQuantizeGroup).named("groups");
  Value scaleRow = perGroup ? kb.mul_wide(row, groups, "scale_row") : Value();
  // A slot that no lane of the warp has inside the row is skipped by the whole warp.
  for (unsigned k = 0; k < slots; ++k)
    kb.if_then(y.warpHas[k], [&] {
      Value c = y.chunk[k], divisor = rowDivisor;
      if (perGroup) {
        Value scale = kb.div(kb.warp_reduce(ir::Op::Max, largest(k), lanes, "group_amax"), maxFinite, "scale");
        kb.if_then((y.valid[k] & ((c & (lanes - 1)) == 0u)).named("group_first"), [&] {
          Value g = (c >> static_cast<uint32_t>(std::countr_zero(lanes))).named("group");
          kb.store(kb.index(scales, scaleRow + kb.cvt(g, ir::Type::u64()), 4), scale);
        }, "write_scale");
        divisor = divisorOf(scale);
      }
      std::vector<Value> codes;
      for (Value v : y.values(kb, k)) codes.push_back(f32ToFp8(kb, kb.div(v, divisor), f, "code"));
      kb.if_then(y.valid[k], [&] {
        Value dst = kb.ptradd(crow, kb.cvt(c * V, ir::Type::u64()), "dst");
        kb.if_else(codesAligned, [&] {
          std::vector<Value> words;
          for (unsigned w = 0; w < V / 4; ++w) words.push_back(packBytes(std::span(codes).subspan(4 * w, 4), "codes"));
          kb.store(assumeAligned(kb, dst, V), words.size() == 1 ? words[0] : kb.pack(ir::Type::of(ir::Scalar::U32, uint8_t(V / 4)), words));
        }, [&] {
          for (unsigned i = 0; i < V; ++i)
            kb.store(i == 0 ? dst : kb.ptradd(dst, kb.u64(i)), kb.cvt(codes[i], ir::Type::of(ir::Scalar::U8)));
        }, {.label = "codes_path"});
      }, "store_codes");
    }, "slot" + std::to_string(k));
}

// One block of 256 threads a row. With a scale per row, the block first finds the row's largest
// |x| (max.f32 passes over NaN), divides it by the format's largest finite value (div.rn) and
// thread 0 stores that scale; then every code is x / scale (div.rn), encoded by f32ToFp8. A scale
// of 0 (a row of zeros) divides by 1 instead, so zeros stay zeros. When cols is a multiple of a
// 16-byte vector of x (4 f32, 8 bf16 or f16) and x and codes are aligned to it and to its codes,
// each thread takes whole vectors: one 16-byte load, and its codes as one 4- or 8-byte store;
// otherwise element by element, byte stores. With a scale per row or group, a row of whole
// vectors from a 16-byte aligned x that fits in max_cols's slots is read once, into registers
// (quantizeRowInRegs); the passes above read it twice.
std::optional<ir::Module> buildQuantizeFp8(const Options& o, ir::Diagnostics& diags) {
  const Storage s = storageOption(o);
  const Fp8 f = fp8Named(o.text("format"));
  const bool perRow = o.text("scales") == "row", perGroup = o.text("scales") == "group";
  const std::optional<unsigned> slots = normSlots(o, s, diags);
  if (!slots) return std::nullopt;
  ir::Module m = newModule();
  KernelBuilder kb(m, "quantize_fp8");
  Value x = kb.param(kGlobalPtr, "x");
  Value codes = kb.param(kGlobalPtr, "codes");
  Value scales = perRow || perGroup ? kb.param(kGlobalPtr, "scales") : Value();
  kb.param(ir::Type::u32(), "rows");  // the grid's x extent
  Value cols = kb.param(ir::Type::u32(), "cols");
  Value scale = perRow || perGroup ? Value() : kb.param(ir::Type::f32(), "scale");
  kb.reqntid(kQuantizeBlock);
  if (perRow || perGroup) kb.minnctapersm(normMinBlocks(s, *slots));  // as the norms: the row in registers, no spills
  Value tid = kb.tid(ir::Mod::X, "tid");
  Value row = kb.ctaid(ir::Mod::X, "row");
  Value first = kb.mul_wide(row, cols, "first");
  Value xrow = kb.index(x, first, bytesOf(s), "xrow");
  Value crow = kb.ptradd(codes, first, "crow");
  const unsigned V = 16 / bytesOf(s);  // elements of a 16-byte vector of x
  Value wholeVectors = ((cols % V) == 0u).named("whole_vectors");
  Value codesAligned = allAligned(kb, {codes}, V, "codes_aligned");
  Value vector = (wholeVectors & allAligned(kb, {x}, 16) & codesAligned).named("vector");
  // The elements of x this thread takes, V at a time (vector) or one at a time, as f32 values
  // with the index of the first: visit(values, c).
  auto forMine = [&](Value vec, std::vector<Value> init, const auto& visit, const char* label) {
    const unsigned n = vec.valid() ? V : 1;
    Value end = n == 1 ? cols : (cols / n).named("vectors");
    return kb.for_range(tid, end, kQuantizeBlock, std::move(init), [&](Value i, std::span<Value> carried) {
      Value c = n == 1 ? i : (i * n).named("c");
      Value p = kb.index(xrow, c, bytesOf(s));
      std::vector<Value> xs = n == 1 ? std::vector<Value>{loadF32(kb, p, s, true, "x")}
                                     : loadVecF32(kb, assumeAligned16(kb, p), s, true, "x");
      return visit(xs, c, std::vector<Value>(carried.begin(), carried.end()));
    }, {.label = label, .iv = "i"});
  };
  auto encode = [&](Value vec, Value divisor) {
    forMine(vec, {}, [&](const std::vector<Value>& xs, Value c, std::vector<Value> none) {
      std::vector<Value> codes;
      for (Value v : xs) codes.push_back(f32ToFp8(kb, kb.div(v, divisor), f, "code"));
      Value dst = kb.ptradd(crow, kb.cvt(c, ir::Type::u64()), "dst");
      if (codes.size() == 1) {
        kb.store(dst, kb.cvt(codes[0], ir::Type::of(ir::Scalar::U8)));
      } else {
        std::vector<Value> words;
        for (unsigned w = 0; w < codes.size() / 4; ++w) words.push_back(packBytes(std::span(codes).subspan(4 * w, 4), "codes"));
        kb.store(assumeAligned(kb, dst, 4 * unsigned(words.size())),
                 words.size() == 1 ? words[0] : kb.pack(ir::Type::of(ir::Scalar::U32, uint8_t(words.size())), words));
      }
      return none;
    }, "encode");
  };
  auto divisorOf = [&](Value sc) { return kb.select((sc == 0.0f).named("zero_scale"), kb.f32(1.0f), sc, "divisor"); };
  if (!perRow && !perGroup) {
    Value divisor = divisorOf(scale);
    kb.if_else(vector, [&] { encode(vector, divisor); }, [&] { encode(Value(), divisor); }, {.label = "encode_path"});
    kb.ret();
    return finish(kb, m, diags);
  }
  ir::SharedArray scratch = kb.shared("scratch", ir::Type::f32(), kQuantizeBlock / 32);
  // A row of whole 16-byte vectors from an aligned x that fits in the slots is read once, into
  // registers; its codes are stored by words where codes allow, else by bytes.
  Value nvec = (cols / V).named("nvec");
  Value fits = ((cols != 0u) & (cols <= kQuantizeBlock * *slots * V)).named("fits");
  kb.if_else((wholeVectors & allAligned(kb, {x}, 16) & fits).named("one_pass"), [&] {
    RowInRegs y = loadRowInRegs(kb, s, tid, nvec, *slots,
                                [&](Value c) { return loadVecBytes(kb, assumeAligned16(kb, kb.index(xrow, c, 16)), s, true); });
    quantizeRowInRegs(kb, f, perGroup, y, crow, scales, row, cols, tid, codesAligned, scratch);
  }, [&] {
    if (perGroup) {
      quantizeGroups(kb, f, [&](Value c) { return loadF32(kb, kb.index(xrow, c, bytesOf(s)), s, true, "x"); }, crow,
                     scales, row, cols, tid);
      return;
    }
    auto amaxOf = [&](Value vec) {
      return forMine(vec, {kb.f32(0.0f)}, [&](const std::vector<Value>& xs, Value, std::vector<Value> m) {
        for (Value v : xs) m[0] = kb.max(m[0], kb.abs(v));
        return m;
      }, "amax");
    };
    const std::vector<Value> mine =
        kb.if_else(vector, [&] { return amaxOf(vector); }, [&] { return amaxOf(Value()); }, {.label = "amax_path"});
    Value amax = kb.block_reduce_max(mine[0], scratch, "row_amax");
    Value sc = kb.div(amax, kb.f32(std::bit_cast<float>(formatOf(f).maxFinite)), "scale");
    kb.if_then(tid == 0u, [&] { kb.store(kb.index(scales, row, 4), sc); }, "write_scale");
    Value divisor = divisorOf(sc);
    kb.if_else(vector, [&] { encode(vector, divisor); }, [&] { encode(Value(), divisor); }, {.label = "encode_path"});
  }, {.label = "path"});
  kb.ret();
  return finish(kb, m, diags);
}

// The codes and scales of the row whose value at column c is valueAt(c), recomputed in each pass:
// per group of 128 columns (quantizeGroups), or per row: the row's largest |value| (block
// reduction), its scale written by thread 0, then the codes, as quantize_fp8's element path.
void quantizeRowOf(KernelBuilder& kb, Fp8 f, bool perGroup, const ValueAt& valueAt, Value crow, Value scales, Value row,
                   Value cols, Value tid, ir::SharedArray amaxScratch) {
  if (perGroup) {
    quantizeGroups(kb, f, valueAt, crow, scales, row, cols, tid);
    return;
  }
  const std::vector<Value> mine = kb.for_range(tid, cols, kQuantizeBlock, {kb.f32(0.0f)}, [&](Value c, std::span<Value> m) {
    return std::vector<Value>{kb.max(m[0], kb.abs(valueAt(c)))};
  }, {.label = "amax", .iv = "c"});
  Value amax = kb.block_reduce_max(mine[0], amaxScratch, "row_amax");
  Value scale = kb.div(amax, kb.f32(std::bit_cast<float>(formatOf(f).maxFinite)), "scale");
  kb.if_then(tid == 0u, [&] { kb.store(kb.index(scales, row, 4), scale); }, "write_scale");
  Value divisor = kb.select((scale == 0.0f).named("zero_scale"), kb.f32(1.0f), scale, "divisor");
  kb.for_range(tid, cols, kQuantizeBlock, {}, [&](Value c, std::span<Value>) {
    Value code = f32ToFp8(kb, kb.div(valueAt(c), divisor), f, "code");
    kb.store(kb.ptradd(crow, kb.cvt(c, ir::Type::u64()), "dst"), kb.cvt(code, ir::Type::of(ir::Scalar::U8)));
    return std::vector<Value>{};
  }, {.label = "encode", .iv = "c"});
}

// rmsnorm_quantize_fp8: rmsnorm (kernels/Norms.cpp) of each row times weight, rounded to dtype as
// rmsnorm stores it, then quantize_fp8 of that: one block of 256 threads a row. 1 / rms is
// rmsnorm's own (rmsnormFused), so the codes and scales equal the unfused pair's when rmsnorm
// takes the same path. Where the row fits in registers and x and weight are 16-byte aligned, x is
// read once and the codes come from rmsnorm's y in registers (quantizeRowInRegs); otherwise, after
// a pass for 1 / rms, each normalized value is recomputed from x and weight (L2 or L1 hits) in
// each pass: the row's largest |value| (block reduction) and then the codes, or per group of 128
// columns as quantize_fp8 does.
std::optional<ir::Module> buildRmsnormQuantizeFp8(const Options& o, ir::Diagnostics& diags) {
  const Storage s = storageOption(o);
  const Fp8 f = fp8Named(o.text("format"));
  const bool perGroup = o.text("scales") == "group";
  const std::optional<unsigned> slots = normSlots(o, s, diags);
  if (!slots) return std::nullopt;
  ir::Module m = newModule();
  KernelBuilder kb(m, "rmsnorm_quantize_fp8");
  Value x = kb.param(kGlobalPtr, "x");
  Value weight = kb.param(kGlobalPtr, "weight");
  Value codes = kb.param(kGlobalPtr, "codes");
  Value scales = kb.param(kGlobalPtr, "scales");
  kb.param(ir::Type::u32(), "rows");  // the grid's x extent
  Value cols = kb.param(ir::Type::u32(), "cols");
  Value eps = kb.param(ir::Type::f32(), "eps");
  kb.reqntid(kQuantizeBlock);
  // As rmsnorm: the row in registers without spills.
  kb.minnctapersm(normMinBlocks(s, *slots));
  ir::SharedArray scratch = kb.shared("scratch", ir::Type::f32(), 2 * (kQuantizeBlock / 32));
  Value tid = kb.tid(ir::Mod::X, "tid");
  Value row = kb.ctaid(ir::Mod::X, "row");
  Value first = kb.mul_wide(row, cols, "first");
  Value xrow = kb.index(x, first, bytesOf(s), "xrow");
  Value crow = kb.ptradd(codes, first, "crow");
  ir::SharedArray amaxScratch = kb.shared("amax_scratch", ir::Type::f32(), kQuantizeBlock / 32);
  const unsigned V = vecElems(s);
  // The one-pass path's codes by words where the row's codes are a multiple of V bytes from an aligned base.
  Value codesAligned = allAligned(kb, {codes}, V, "codes_aligned");
  rmsnormFused(
      kb, s, tid, xrow, weight, cols, eps, allAligned(kb, {x, weight}, 16), scratch, *slots,
      [&](const RowInRegs& y) {
        quantizeRowInRegs(kb, f, perGroup, y, crow, scales, row, cols, tid, codesAligned, amaxScratch);
      },
      [&](Value inv) {
        // rmsnorm's y at column c: (x * inv) * weight, rounded to dtype as its store rounds it.
        const ValueAt valueAt = [&](Value c) {
          Value v = (loadF32(kb, kb.index(xrow, c, bytesOf(s)), s, true, "x") * inv) *
                    loadF32(kb, kb.index(weight, c, bytesOf(s)), s, true, "w");
          return roundToStorage(kb, v, s);
        };
        quantizeRowOf(kb, f, perGroup, valueAt, crow, scales, row, cols, tid, amaxScratch);
      });
  kb.ret();
  return finish(kb, m, diags);
}

// swiglu_quantize_fp8: the elementwise swiglu's y = gate * silu(up) (or its glu's activation of
// up; kernels/Elementwise.cpp: the same f32 operations), rounded to dtype as swiglu stores it, then quantize_fp8 of each row:
// one block of 256 threads a row. Row r of gate and of up starts ld elements after row r - 1's,
// so both may be halves of one matrix (a fused gate-and-up projection's output, ld = 2 cols).
// Where gate and up are 16-byte aligned, ld and cols multiples of a vector and the row fits
// max_cols, both rows are read once, into registers, and y is computed once a slot (a slot no
// lane of the warp has inside the row computes nothing) and quantized there (quantizeRowInRegs);
// otherwise each pass recomputes y from gate and up, element by element.
std::optional<ir::Module> buildSwigluQuantizeFp8(const Options& o, ir::Diagnostics& diags) {
  const Storage s = storageOption(o);
  const Fp8 f = fp8Named(o.text("format"));
  const bool perGroup = o.text("scales") == "group";
  const std::optional<unsigned> slots = normSlots(o, s, diags);
  if (!slots) return std::nullopt;
  ir::Module m = newModule();
  KernelBuilder kb(m, "swiglu_quantize_fp8");
  Value gate = kb.param(kGlobalPtr, "gate");
  Value up = kb.param(kGlobalPtr, "up");
  Value codes = kb.param(kGlobalPtr, "codes");
  Value scales = kb.param(kGlobalPtr, "scales");
  kb.param(ir::Type::u32(), "rows");  // the grid's x extent
  Value cols = kb.param(ir::Type::u32(), "cols");
  Value ld = kb.param(ir::Type::u32(), "ld");
  kb.reqntid(kQuantizeBlock);
  kb.minnctapersm(normMinBlocks(s, *slots));  // as the norms: the row in registers, no spills
  ir::SharedArray amaxScratch = kb.shared("amax_scratch", ir::Type::f32(), kQuantizeBlock / 32);
  Value tid = kb.tid(ir::Mod::X, "tid");
  Value row = kb.ctaid(ir::Mod::X, "row");
  Value in = kb.mul_wide(row, ld, "in_first");
  Value grow = kb.index(gate, in, bytesOf(s), "gate_row"), urow = kb.index(up, in, bytesOf(s), "up_row");
  Value crow = kb.ptradd(codes, kb.mul_wide(row, cols), "crow");
  auto unit = [&](Value g, Value u) { return roundToStorage(kb, gluUnit(kb, o.text("glu"), u, g), s); };
  const unsigned V = vecElems(s);
  Value whole = (((cols | ld) & (V - 1)) == 0u).named("whole_vectors");
  Value fits = ((cols != 0u) & (cols <= kQuantizeBlock * *slots * V)).named("fits");
  kb.if_else((whole & fits & allAligned(kb, {gate, up}, 16)).named("one_pass"), [&] {
    Value nvec = (cols / V).named("nvec");
    auto rowOf = [&](Value base) {
      return loadRowInRegs(kb, s, tid, nvec, *slots,
                           [&](Value c) { return loadVecBytes(kb, assumeAligned16(kb, kb.index(base, c, 16)), s, true); });
    };
    const RowInRegs g = rowOf(grow), u = rowOf(urow);
    RowInRegs y = g;
    for (unsigned k = 0; k < *slots; ++k)
      y.bytes[k] = kb.if_else(y.warpHas[k], [&] {
        std::vector<Value> gv = g.values(kb, k), uv = u.values(kb, k), out;
        for (unsigned i = 0; i < V; ++i) out.push_back(unit(gv[i], uv[i]));
        return packVecF32(kb, out, s).bytes;
      }, [&] { return g.bytes[k]; }, {.label = "unit" + std::to_string(k)})[0];
    quantizeRowInRegs(kb, f, perGroup, y, crow, scales, row, cols, tid, allAligned(kb, {codes}, V), amaxScratch);
  }, [&] {
    const ValueAt valueAt = [&](Value c) {
      return unit(loadF32(kb, kb.index(grow, c, bytesOf(s)), s, true, "gate"),
                  loadF32(kb, kb.index(urow, c, bytesOf(s)), s, true, "up"));
    };
    quantizeRowOf(kb, f, perGroup, valueAt, crow, scales, row, cols, tid, amaxScratch);
  }, {.label = "path"});
  kb.ret();
  return finish(kb, m, diags);
}

}  // namespace

void addFp8(std::vector<Template>& out) {
  out.push_back({
      "quantize_fp8",
      "codes[r * cols + c] = the fp8 code of x[r * cols + c] / scale (nearest, ties to even; beyond the largest "
      "finite value and infinities saturate, NaN gives 0x7F), as kv_scatter encodes: scales = \"row\" finds each "
      "row's scale, max |x| of the row (NaN passed over) / the format's largest finite value (448, 57344), and "
      "writes it to scales[r] (gemv's row_scales, gemm's b_scales: per output channel); scales = \"group\" does so "
      "for each 128 columns of a row (scales[r * ceil_div(cols, 128) + g]: gemm's a_scales with scale_block = 128); "
      "scales = \"tensor\" takes the f32 parameter scale; one block of 256 threads a row, with row or group scales "
      "the row read once when it fits in registers (x 16-byte aligned, cols a multiple of 16 bytes, up to max_cols)",
      {dtypeOption("dtype", "storage type of x"),
       codesFormatOption(),
       choiceOption("scales", "row", {"row", "group", "tensor"},
                    "row: a scale per row found from the row and written to the pointer scales [rows]; group: one "
                    "per 128 columns of a row, scales [rows x ceil_div(cols, 128)] (DeepSeek-V3's per-token-group "
                    "activation scales); tensor: the f32 parameter scale (after cols) for every row"),
       maxColsOption()},
      buildQuantizeFp8,
      blockPerRow,
  });
  out.back().elements = [](const Options& o) {
    return Template::ElementTypes{{"x", scalarOf(storageOption(o))}, {"codes", codesElement(o)}, {"scales", ir::Scalar::F32}};
  };
  out.back().extents = [](const Options& o) {
    const Expr all = Expr::param("rows") * Expr::param("cols");
    return Template::Extents{{"x", all}, {"codes", all}, {"scales", scalesExtent(o)}};
  };
  out.push_back({
      "rmsnorm_quantize_fp8",
      "codes = quantize_fp8(rmsnorm(x) * weight) per row (x rows x cols of dtype, weight cols): rmsnorm's y, rounded "
      "to dtype as rmsnorm stores it, as fp8 codes with a scale per row (scales[r]) or per 128 columns (scales = "
      "\"group\": scales[r * ceil_div(cols, 128) + g]) found from the values: the activations and a_scales of a "
      "W8A8 gemm after a norm, in one launch; one block of 256 threads a row, the row read once when it fits in "
      "registers (as rmsnorm)",
      {dtypeOption("dtype", "storage type of x and weight (the normalized value is rounded to it, as rmsnorm "
                            "stores it)"),
       codesFormatOption(),
       rowOrGroupScalesOption(),
       maxColsOption()},
      buildRmsnormQuantizeFp8,
      blockPerRow,
  });
  out.back().elements = [](const Options& o) {
    const ir::Scalar x = scalarOf(storageOption(o));
    return Template::ElementTypes{{"x", x}, {"weight", x}, {"codes", codesElement(o)}, {"scales", ir::Scalar::F32}};
  };
  out.back().extents = [](const Options& o) {
    const Expr cols = Expr::param("cols"), all = Expr::param("rows") * cols;
    return Template::Extents{{"x", all}, {"weight", cols}, {"codes", all}, {"scales", scalesExtent(o)}};
  };
  out.push_back({
      "swiglu_quantize_fp8",
      "codes = quantize_fp8(swiglu(gate, up)) per row (gate and up rows x cols of dtype, row r at r * ld): swiglu's "
      "y = gate * silu(up), rounded to dtype as swiglu stores it, as fp8 codes with a scale per row (scales[r]) or "
      "per 128 columns (scales = \"group\"); LLaMA's silu(gate_proj) * up_proj passes gate_proj as up (glu: "
      "GeGLU's gelu in place of silu). The activations and a_scales of a W8A8 down projection, in one launch; one "
      "block of 256 threads a row, the rows read once when they fit in registers (gate and up 16-byte aligned, cols and "
      "ld multiples of 16 bytes, up to max_cols)",
      {dtypeOption("dtype", "storage type of gate and up (the product is rounded to it, as swiglu stores it)"),
       codesFormatOption(),
       rowOrGroupScalesOption(),
       gluOption(),
       maxColsOption()},
      buildSwigluQuantizeFp8,
      blockPerRow,
  });
  out.back().elements = [](const Options& o) {
    const ir::Scalar x = scalarOf(storageOption(o));
    return Template::ElementTypes{{"gate", x}, {"up", x}, {"codes", codesElement(o)}, {"scales", ir::Scalar::F32}};
  };
  out.back().extents = [](const Options& o) {
    const Expr rows = Expr::param("rows"), cols = Expr::param("cols");
    const Expr in = stridedSpan({{rows, Expr::param("ld")}}, cols);
    return Template::Extents{{"gate", in}, {"up", in}, {"codes", rows * cols}, {"scales", scalesExtent(o)}};
  };
}

}  // namespace tn::kernels::lib
