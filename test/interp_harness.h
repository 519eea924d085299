// Shared by test/interp_goldens_test.cpp and test/opt_equivalence_test.cpp: loading .tir files
// from the source tree, describing a launch with its random inputs (Run), running it in the
// interpreter (execute), probes that store chosen intermediate values of a kernel per thread,
// an independent f16/bf16 codec for references, and the launch scenarios of every runnable
// kernel of the lit PTX goldens (lit-tests/emit-ptx/*.tir), which both test files run.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cfenv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backends/interp/Interp.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

namespace tn::harness {

// ---- modules ----------------------------------------------------------------------------

inline std::string diagnosticsText(const ir::Diagnostics& diags) {
  std::string out;
  for (const ir::Diagnostic& d : diags.all()) out += ir::formatDiagnostic(d) + "\n";
  return out;
}

// Parses and verifies `text`; the test stops when either fails.
inline ir::Module parseText(const std::string& text, const std::string& fileName) {
  ir::Diagnostics diags;
  std::optional<ir::Module> m = ir::parseModule(text, fileName, diags);
  INFO(diagnosticsText(diags));
  REQUIRE(m.has_value());
  ir::verify(*m, diags);
  INFO(diagnosticsText(diags));
  REQUIRE_FALSE(diags.hasErrors());
  return std::move(*m);
}

// Reads `relPath` (relative to the source tree, e.g. "lit-tests/emit-ptx/atomics.tir").
inline ir::Module parseSourceFile(const std::string& relPath) {
  std::string path = std::string(TRUENOC_SOURCE_DIR) + "/" + relPath;
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot open " << path);
  std::stringstream ss;
  ss << in.rdbuf();
  return parseText(ss.str(), path);
}

// A fresh seed per test run; TRUENOC_TEST_SEED=N replays a failure.
inline unsigned testSeed() {
  if (const char* env = std::getenv("TRUENOC_TEST_SEED")) return static_cast<unsigned>(std::strtoul(env, nullptr, 0));
  return std::random_device{}();
}

// ---- launches ---------------------------------------------------------------------------

// One launch: the configuration and a value for every parameter (buffers as bytes, scalars as
// the bits of their type).
struct Run {
  std::string label;
  interp::LaunchConfig cfg;
  interp::Options opts;
  std::vector<std::pair<std::string, std::vector<std::byte>>> buffers;
  std::vector<std::pair<std::string, uint64_t>> scalars;
  std::vector<std::pair<std::string, std::vector<std::byte>>> vectors;  // vector parameters' bytes
  // tmap parameters: the map and the buffer parameter it views (execute fills in its address).
  struct TensorMap {
    std::string param, source;
    interp::TensorMapDesc desc;
  };
  std::vector<TensorMap> tensorMaps;

  template <class T>
  Run& buffer(const std::string& name, const std::vector<T>& values) {
    std::vector<std::byte> bytes(values.size() * sizeof(T));
    if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
    buffers.emplace_back(name, std::move(bytes));
    return *this;
  }
  Run& bits(const std::string& name, uint64_t value) {
    scalars.emplace_back(name, value);
    return *this;
  }
  template <class T>
  Run& vector(const std::string& name, const std::vector<T>& lanes) {
    std::vector<std::byte> bytes(lanes.size() * sizeof(T));
    if (!bytes.empty()) std::memcpy(bytes.data(), lanes.data(), bytes.size());
    vectors.emplace_back(name, std::move(bytes));
    return *this;
  }
  template <class T>
  std::vector<T> vectorLanes(const std::string& name) const {
    for (const auto& [n, bytes] : vectors)
      if (n == name) {
        std::vector<T> out(bytes.size() / sizeof(T));
        if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
        return out;
      }
    FAIL("no vector parameter " << name);
    return {};
  }
  // A 2-D map over buffer `source` (dims and box innermost first, rows `rowStride` bytes apart,
  // swizzle in bytes: 0, 32, 64 or 128), as cuTensorMapEncodeTiled would be asked for it.
  Run& tensorMap2d(const std::string& param, const std::string& source, unsigned elementBytes,
                   std::array<uint64_t, 2> dims, uint64_t rowStride, std::array<uint32_t, 2> box,
                   unsigned swizzle = 0) {
    interp::TensorMapDesc d;
    d.rank = 2;
    d.elementBytes = static_cast<uint8_t>(elementBytes);
    d.dataType = elementBytes == 2 ? 6 : elementBytes == 4 ? 7 : elementBytes == 8 ? 8 : 0;  // f16, f32, f64, u8
    d.swizzle = static_cast<uint8_t>(swizzle == 0 ? 0 : std::countr_zero(swizzle) - 4);
    d.dims[0] = dims[0];
    d.dims[1] = dims[1];
    d.strides[0] = rowStride;
    d.box[0] = box[0];
    d.box[1] = box[1];
    d.elementStrides[0] = d.elementStrides[1] = 1;
    tensorMaps.push_back({param, source, d});
    return *this;
  }
  // A 3-D map: planes `planeStride` bytes apart; the box's third extent box[2].
  Run& tensorMap3d(const std::string& param, const std::string& source, unsigned elementBytes,
                   std::array<uint64_t, 3> dims, uint64_t rowStride, uint64_t planeStride, std::array<uint32_t, 3> box,
                   unsigned swizzle = 0) {
    tensorMap2d(param, source, elementBytes, {dims[0], dims[1]}, rowStride, {box[0], box[1]}, swizzle);
    interp::TensorMapDesc& d = tensorMaps.back().desc;
    d.rank = 3;
    d.dims[2] = dims[2];
    d.strides[1] = planeStride;
    d.box[2] = box[2];
    d.elementStrides[2] = 1;
    return *this;
  }
  template <class T>
  Run& scalar(const std::string& name, T value) {
    uint64_t b = 0;
    std::memcpy(&b, &value, sizeof(T));
    return bits(name, b);
  }

  const std::vector<std::byte>& input(const std::string& name) const {
    for (const auto& [n, bytes] : buffers)
      if (n == name) return bytes;
    FAIL("run has no buffer '" << name << "'");
    return buffers.front().second;
  }
  template <class T>
  std::vector<T> inputArray(const std::string& name) const {
    const std::vector<std::byte>& b = input(name);
    std::vector<T> out(b.size() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), b.data(), out.size() * sizeof(T));
    return out;
  }
  uint64_t scalarBits(const std::string& name) const {
    for (const auto& [n, v] : scalars)
      if (n == name) return v;
    FAIL("run has no scalar '" << name << "'");
    return 0;
  }
  template <class T>
  T get(const std::string& name) const {
    uint64_t b = scalarBits(name);
    T v;
    std::memcpy(&v, &b, sizeof(T));
    return v;
  }
  uint64_t threadsPerBlock() const { return cfg.block.total(); }
  uint64_t threads() const { return uint64_t{cfg.grid.total()} * cfg.block.total(); }
};

inline std::string describe(const Run& r) {
  std::ostringstream os;
  os << r.label << " grid (" << r.cfg.grid.x << "," << r.cfg.grid.y << "," << r.cfg.grid.z << ") block ("
     << r.cfg.block.x << "," << r.cfg.block.y << "," << r.cfg.block.z << ") dyn-shared " << r.cfg.dynamicShared;
  for (const auto& [n, v] : r.scalars) os << " " << n << "=0x" << std::hex << v << std::dec;
  return os.str();
}

struct Outcome {
  std::optional<interp::Error> error;
  std::map<std::string, std::vector<std::byte>, std::less<>> buffers;  // every pointer parameter, after the launch
  interp::Stats stats;

  template <class T>
  std::vector<T> array(std::string_view name) const {
    auto it = buffers.find(name);
    REQUIRE_MESSAGE(it != buffers.end(), "no buffer '" << name << "'");
    std::vector<T> out(it->second.size() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), it->second.data(), out.size() * sizeof(T));
    return out;
  }
};

// ---- probes -----------------------------------------------------------------------------

// Probes make intermediate values observable: addProbes() gives a kernel one more parameter,
// %probe, and stores the named values, just before the terminator of one block, into a record
// of 16-byte slots per thread (slot i of thread t at t * recordBytes + 16 * i; a predicate as a
// u32 0/1), then Probes::kDone in one more slot. Thread t is the linear thread index
// ((ctaid.z * nctaid.y + ctaid.y) * nctaid.x + ctaid.x) * threads per block
// + (tid.z * ntid.y + tid.y) * ntid.x + tid.x, the order in which the interpreter runs threads.
struct Probes {
  static constexpr uint32_t kSlotBytes = 16;
  static constexpr std::byte kFill{0xA5};  // what a slot holds when no thread wrote it
  static constexpr uint32_t kDone = 0x600DD0E5;
  std::vector<std::string> names;
  std::vector<ir::Type> types;  // the stored type (u32 for a predicate)

  bool empty() const { return names.empty(); }
  uint32_t recordBytes() const { return static_cast<uint32_t>(names.size() + 1) * kSlotBytes; }
  size_t index(std::string_view name) const {
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == name) return i;
    FAIL("no probe '" << name << "'");
    return 0;
  }
  // The bits of lane `lane` of probe `name` of thread t (zero-extended).
  uint64_t bits(const std::vector<std::byte>& buf, uint64_t t, std::string_view name, unsigned lane = 0) const {
    size_t i = index(name);
    unsigned bytes = types[i].element().bytes();
    uint64_t off = t * recordBytes() + i * kSlotBytes + uint64_t{lane} * bytes;
    REQUIRE(off + bytes <= buf.size());
    uint64_t v = 0;
    std::memcpy(&v, buf.data() + off, bytes);
    return v;
  }
  // True when thread t reached the probes: the record's last slot, after the named ones, holds
  // kDone.
  bool complete(const std::vector<std::byte>& buf, uint64_t t) const {
    uint32_t done = 0;
    std::memcpy(&done, buf.data() + (t + 1) * recordBytes() - kSlotBytes, 4);
    return done == kDone;
  }
};

namespace detail {

inline ir::ValueId emit(ir::Kernel& k, ir::BlockId b, ir::SourceLoc loc, ir::Op op, ir::Type t,
                        std::vector<ir::ValueId> operands, const std::string& name, ir::Mod mod = ir::Mod::None,
                        uint64_t imm = 0) {
  ir::Inst in;
  in.op = op;
  in.type = t;
  in.operands = std::move(operands);
  in.imm = imm;
  in.loc = loc;
  if (mod != ir::Mod::None) in.setMod(mod);
  std::optional<ir::Type> result = ir::resultTypeFor(in);
  ir::InstId id = k.append(b, std::move(in), result, result ? "probe." + name : std::string());
  return k.inst(id).result;
}

}  // namespace detail

// Adds %probe to kernel `kernel` of m and stores `names` (values of that kernel, which must
// dominate the end of block `block`). The module is verified afterwards.
inline Probes addProbes(ir::Module& m, const std::string& kernel, const std::string& block,
                        const std::vector<std::string>& names) {
  using ir::Op;
  using ir::Type;
  Probes probes;
  if (names.empty()) return probes;
  ir::Kernel* k = m.findKernel(kernel);
  REQUIRE_MESSAGE(k, "no kernel @" << kernel);
  ir::BlockId b;
  for (uint32_t i = 0; i < k->blocks.size(); ++i)
    if (k->blocks[i].name == block) b = ir::BlockId(i);
  REQUIRE_MESSAGE(b.valid(), "no block ^" << block << " in @" << kernel);
  std::vector<ir::ValueId> values;
  for (const std::string& n : names) {
    ir::ValueId found;
    for (uint32_t v = 0; v < k->values.size(); ++v)
      if (k->values[v].name == n) {
        REQUIRE_MESSAGE(!found.valid(), "two values named %" << n);
        found = ir::ValueId(v);
      }
    REQUIRE_MESSAGE(found.valid(), "no value %" << n << " in @" << kernel);
    values.push_back(found);
  }
  const ir::Type u32 = Type::u32(), u64 = Type::u64(), global = Type::ptr(ir::AddrSpace::Global);
  ir::ValueId base = k->addParam(global, "probe", Probes::kSlotBytes);
  ir::InstId term = k->blocks[b.index].insts.back();
  k->blocks[b.index].insts.pop_back();
  const ir::SourceLoc loc = k->inst(term).loc;
  auto emit = [&](Op op, Type t, std::vector<ir::ValueId> ops, const std::string& name, ir::Mod mod = ir::Mod::None,
                  uint64_t imm = 0) { return detail::emit(*k, b, loc, op, t, std::move(ops), name, mod, imm); };
  auto special = [&](Op op, ir::Mod dim) {
    return emit(op, u32, {}, std::string(ir::info(op).name) + "." + std::string(ir::modName(dim)), dim);
  };
  ir::ValueId tx = special(Op::Tid, ir::Mod::X), ty = special(Op::Tid, ir::Mod::Y), tz = special(Op::Tid, ir::Mod::Z);
  ir::ValueId nx = special(Op::Ntid, ir::Mod::X), ny = special(Op::Ntid, ir::Mod::Y),
              nz = special(Op::Ntid, ir::Mod::Z);
  ir::ValueId cx = special(Op::Ctaid, ir::Mod::X), cy = special(Op::Ctaid, ir::Mod::Y),
              cz = special(Op::Ctaid, ir::Mod::Z);
  ir::ValueId gx = special(Op::Nctaid, ir::Mod::X), gy = special(Op::Nctaid, ir::Mod::Y);
  ir::ValueId inBlock = emit(Op::Mad, u32, {emit(Op::Mad, u32, {tz, ny, ty}, "tzy"), nx, tx}, "thread");
  ir::ValueId perBlock = emit(Op::Mul, u32, {emit(Op::Mul, u32, {nx, ny}, "nxy"), nz}, "per_block");
  ir::ValueId blockIndex = emit(Op::Mad, u32, {emit(Op::Mad, u32, {cz, gy, cy}, "czy"), gx, cx}, "block");
  ir::ValueId linear = emit(Op::Mad, u32, {blockIndex, perBlock, inBlock}, "id");
  ir::ValueId recordSize = emit(Op::Const, u32, {}, "record", ir::Mod::None, (names.size() + 1) * Probes::kSlotBytes);
  ir::ValueId record = emit(Op::PtrAdd, global, {base, emit(Op::MulWide, u32, {linear, recordSize}, "offset")}, "base");
  ir::ValueId one = emit(Op::Const, u32, {}, "one", ir::Mod::None, 1);
  ir::ValueId zero = emit(Op::Const, u32, {}, "zero", ir::Mod::None, 0);
  for (size_t i = 0; i < values.size(); ++i) {
    ir::ValueId v = values[i];
    Type t = k->typeOf(v);
    if (t.isPred()) {
      v = emit(Op::Selp, u32, {one, zero, v}, names[i] + ".u32");
      t = u32;
    }
    REQUIRE_MESSAGE(t.bytes() <= Probes::kSlotBytes, "%" << names[i] << " does not fit a probe slot");
    ir::ValueId slot =
        emit(Op::PtrAdd, global,
             {record, emit(Op::Const, u64, {}, names[i] + ".off", ir::Mod::None, i * Probes::kSlotBytes)},
             names[i] + ".slot");
    emit(Op::St, t, {slot, v}, "");
    probes.names.push_back(names[i]);
    probes.types.push_back(t);
  }
  ir::ValueId doneSlot = emit(
      Op::PtrAdd, global,
      {record, emit(Op::Const, u64, {}, "done.off", ir::Mod::None, names.size() * Probes::kSlotBytes)}, "done.slot");
  emit(Op::St, u32, {doneSlot, emit(Op::Const, u32, {}, "done", ir::Mod::None, Probes::kDone)}, "");
  k->blocks[b.index].insts.push_back(term);
  ir::Diagnostics diags;
  ir::verify(m, diags);
  INFO(diagnosticsText(diags));
  INFO(ir::print(m, *k));
  REQUIRE_FALSE(diags.hasErrors());
  return probes;
}

// Runs kernel `kernel` of m with the run's arguments; with probes, %probe gets a buffer of one
// record per thread, filled with Probes::kFill. Binding problems stop the test; a launch fault
// is returned in the outcome.
inline Outcome execute(const ir::Module& m, const std::string& kernel, const Run& run, const Probes& probes = {}) {
  interp::Interpreter vm;
  std::optional<interp::Error> err = vm.load(m, kernel);
  REQUIRE_MESSAGE(!err, (err ? err->text() : ""));
  for (const auto& [name, bytes] : run.buffers) {
    err = vm.bindBuffer(name, bytes);
    REQUIRE_MESSAGE(!err, (err ? err->text() : ""));
  }
  for (const auto& [name, value] : run.scalars) {
    err = vm.setScalarBits(name, value);
    REQUIRE_MESSAGE(!err, (err ? err->text() : ""));
  }
  for (const auto& [name, bytes] : run.vectors) {
    err = vm.setScalarBytes(name, bytes);
    REQUIRE_MESSAGE(!err, (err ? err->text() : ""));
  }
  for (Run::TensorMap map : run.tensorMaps) {
    std::optional<uint64_t> address = vm.pointerValue(map.source);
    REQUIRE_MESSAGE(address, "tensor map '" << map.param << "' views '" << map.source << "', which is no bound buffer");
    map.desc.address = *address;
    err = vm.setTensorMap(map.param, interp::encodeTensorMap(map.desc));
    REQUIRE_MESSAGE(!err, (err ? err->text() : ""));
  }
  if (!probes.empty()) {
    err = vm.bindBuffer("probe", std::vector<std::byte>(run.threads() * probes.recordBytes(), Probes::kFill));
    REQUIRE_MESSAGE(!err, (err ? err->text() : ""));
  }
  Outcome out;
  out.error = vm.launch(run.cfg, run.opts);
  for (const interp::ParamInfo& p : vm.params())
    if (p.type.isPtr()) out.buffers[p.name] = *vm.buffer(p.name);
  out.stats = vm.stats();
  return out;
}

// ---- floating point helpers for references -------------------------------------------------

inline uint32_t bitsOf(float f) { return std::bit_cast<uint32_t>(f); }
inline uint64_t bitsOf(double d) { return std::bit_cast<uint64_t>(d); }
inline float f32From(uint64_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b)); }
inline double f64From(uint64_t b) { return std::bit_cast<double>(b); }

constexpr uint32_t kCanonicalNaN32 = 0x7FFFFFFF;
constexpr uint64_t kCanonicalNaN64 = 0x7FFFFFFFFFFFFFFF;
constexpr uint16_t kCanonicalNaN16 = 0x7FFF;  // f16 and bf16

// The GPU's result bits for an f32/f64 value computed on the host: NaNs become canonical.
inline uint32_t gpuBits(float f) { return std::isnan(f) ? kCanonicalNaN32 : bitsOf(f); }
inline uint64_t gpuBits(double d) { return std::isnan(d) ? kCanonicalNaN64 : bitsOf(d); }

// Distance in units in the last place between two finite floats of one sign class (ordered
// bit patterns); NaN against anything is "infinitely" far unless both are NaN.
inline uint64_t ulpDistance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : UINT64_MAX;
  auto ordered = [](float f) {
    int64_t i = std::bit_cast<int32_t>(f);
    return i < 0 ? int64_t{INT32_MIN} - i : i;
  };
  int64_t d = ordered(a) - ordered(b);
  return static_cast<uint64_t>(d < 0 ? -d : d);
}
inline uint64_t ulpDistance(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : UINT64_MAX;
  auto ordered = [](double f) {
    int64_t i = std::bit_cast<int64_t>(f);
    return i < 0 ? INT64_MIN - i : i;  // monotonic in the value; -0 and +0 both map to 0
  };
  int64_t x = ordered(a), y = ordered(b);
  return x > y ? static_cast<uint64_t>(x) - static_cast<uint64_t>(y)
               : static_cast<uint64_t>(y) - static_cast<uint64_t>(x);
}

// Flush-to-zero of a subnormal f32, keeping the sign.
inline float ftz(float f) { return std::fpclassify(f) == FP_SUBNORMAL ? std::copysign(0.0f, f) : f; }

// A value the compiler cannot see through: arithmetic on it cannot be moved ahead of the
// fesetround() calls below (compilers assume the default rounding mode otherwise).
template <class T>
T opaque(T v) {
  volatile T x = v;
  return x;
}

// Evaluates f() with the host FPU in rounding mode `mode` (FE_TONEAREST, FE_TOWARDZERO, ...).
template <class F>
auto withRounding(int mode, F f) {
  const int saved = std::fegetround();
  std::fesetround(mode);
  volatile auto r = f();
  std::fesetround(saved);
  return r;
}

// f() (an operation on opaque() operands) in double, rounded to odd (truncate, then set the last bit when inexact).
// Rounding that once more to a format with at most 51 significand bits gives the correctly rounded result.
template <class F>
double roundToOdd(F f) {
  const int saved = std::fegetround();
  std::fesetround(FE_TOWARDZERO);
  std::feclearexcept(FE_INEXACT);
  volatile double r = f();
  bool inexact = std::fetestexcept(FE_INEXACT) != 0;
  std::fesetround(saved);
  double v = r;
  if (inexact && std::isfinite(v)) v = std::bit_cast<double>(std::bit_cast<uint64_t>(v) | 1);
  return v;
}

// ---- an independent f16/bf16 codec (not ir/Float16.h, which the interpreter uses) -------------

struct HalfFormat {
  int mantissa;  // stored significand bits: 10 (f16) or 7 (bf16)
  int bias;      // 15 or 127
};
constexpr HalfFormat kF16{10, 15};
constexpr HalfFormat kBF16{7, 127};

enum class Rounding { Nearest, Zero, Down, Up };

// A random fp8 code whose value is finite in both E4M3 and E5M2.
inline uint8_t finiteFp8Code(std::mt19937& rng) {
  for (;;) {
    const uint8_t c = static_cast<uint8_t>(rng());
    if ((c & 0x7F) != 0x7F && (c & 0x7C) != 0x7C) return c;
  }
}

inline double decodeHalf(uint16_t h, HalfFormat f) {
  const int expBits = 15 - f.mantissa;
  const unsigned expMax = (1u << expBits) - 1;
  unsigned e = (h >> f.mantissa) & expMax;
  unsigned frac = h & ((1u << f.mantissa) - 1);
  double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (e == expMax) return frac ? std::nan("") : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(static_cast<double>(frac), 1 - f.bias - f.mantissa);
  return sign * std::ldexp(static_cast<double>(frac + (1u << f.mantissa)), static_cast<int>(e) - f.bias - f.mantissa);
}

// Rounds v (any double) to the format: scale so that the format's unit in the last place at
// v's magnitude becomes 1, round to an integer in the given mode, encode.
inline uint16_t encodeHalf(double v, HalfFormat f, Rounding mode = Rounding::Nearest) {
  if (std::isnan(v)) return kCanonicalNaN16;
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const int expBits = 15 - f.mantissa;
  const uint16_t inf = static_cast<uint16_t>(((1u << expBits) - 1) << f.mantissa);
  const uint16_t maxFinite = static_cast<uint16_t>(inf - 1);
  const bool towardZero = mode == Rounding::Zero || (mode == Rounding::Up && sign) || (mode == Rounding::Down && !sign);
  double a = std::fabs(v);
  if (std::isinf(a)) return sign | inf;
  if (a == 0) return sign;
  const int emin = 1 - f.bias;
  int e = 0;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const int q = std::max(e - 1, emin) - f.mantissa;
  double scaled = std::ldexp(a, -q);
  double r = mode == Rounding::Nearest ? std::nearbyint(scaled)  // host default: ties to even
             : towardZero              ? std::floor(scaled)
                                       : std::ceil(scaled);
  double mag = std::ldexp(r, q);
  if (mag >= std::ldexp(1.0, f.bias + 1)) return sign | (towardZero ? maxFinite : inf);
  if (mag == 0) return sign;
  std::frexp(mag, &e);
  if (e - 1 < emin) return sign | static_cast<uint16_t>(std::ldexp(mag, f.bias - 1 + f.mantissa));
  unsigned frac = static_cast<unsigned>(std::ldexp(mag, f.mantissa - (e - 1))) - (1u << f.mantissa);
  return sign | static_cast<uint16_t>((static_cast<unsigned>(e - 1 + f.bias) << f.mantissa) | frac);
}

inline bool isHalfNaN(uint16_t h, HalfFormat f) {
  const unsigned expMax = (1u << (15 - f.mantissa)) - 1;
  return ((h >> f.mantissa) & expMax) == expMax && (h & ((1u << f.mantissa) - 1)) != 0;
}

// ---- random inputs ------------------------------------------------------------------------

inline uint64_t randomBits(std::mt19937& rng, unsigned bits) {
  uint64_t v = (uint64_t{rng()} << 32) | rng();
  return bits >= 64 ? v : v & ((uint64_t{1} << bits) - 1);
}

// An f32 from a mixture that reaches every class: ordinary values, integers and halves (ties
// for rounding), wide exponents, subnormals, zeros, infinities and NaN.
inline float randomF32(std::mt19937& rng) {
  switch (rng() % 20) {
    case 0:
      return std::bit_cast<float>(static_cast<uint32_t>(rng()));  // any bits
    case 1:
      return std::bit_cast<float>(static_cast<uint32_t>(rng() & 0x807FFFFF));  // subnormal
    case 2:
      return (rng() & 1) ? 0.0f : -0.0f;
    case 3:
      return (rng() & 1) ? INFINITY : -INFINITY;
    case 4:
      return std::nanf("");
    case 5:
    case 6:
      return static_cast<float>(static_cast<int>(rng() % 2001) - 1000) * 0.5f;  // halves
    case 7:
      return std::ldexp(std::uniform_real_distribution<float>(-1, 1)(rng), static_cast<int>(rng() % 256) - 128);
    default:
      return std::uniform_real_distribution<float>(-40.0f, 40.0f)(rng);
  }
}

inline double randomF64(std::mt19937& rng) {
  switch (rng() % 20) {
    case 0:
      return std::bit_cast<double>(randomBits(rng, 64));
    case 1:
      return std::bit_cast<double>(randomBits(rng, 64) & 0x800FFFFFFFFFFFFFull);
    case 2:
      return (rng() & 1) ? 0.0 : -0.0;
    case 3:
      return (rng() & 1) ? INFINITY : -INFINITY;
    case 4:
      return std::nan("");
    case 5:
    case 6:
      return static_cast<double>(static_cast<int>(rng() % 2001) - 1000) * 0.5;
    case 7:
      return std::ldexp(std::uniform_real_distribution<double>(-1, 1)(rng), static_cast<int>(rng() % 2048) - 1024);
    default:
      return std::uniform_real_distribution<double>(-1e6, 1e6)(rng);
  }
}

// A 16-bit float's bits: any pattern a quarter of the time, else a finite value of moderate size.
inline uint16_t randomHalf(std::mt19937& rng, HalfFormat f) {
  if (rng() % 4 == 0) return static_cast<uint16_t>(rng());
  return encodeHalf(std::uniform_real_distribution<double>(-300.0, 300.0)(rng), f);
}

inline uint64_t threadsOf(ir::Dim3 grid, ir::Dim3 block) { return uint64_t{grid.total()} * block.total(); }

// ---- the golden kernels' scenarios -------------------------------------------------------------

// One runnable kernel of a lit PTX golden: the values its test probes (stored at the end of
// `probeBlock`) and the launches with random inputs that both the reference test and the
// -O0/-O2 equivalence test run. Every launch of `runs` is expected to succeed.
struct GoldenCase {
  std::string file;  // under lit-tests/emit-ptx/
  std::string kernel;
  std::string probeBlock;
  std::vector<std::string> probes;
  std::function<std::vector<Run>(std::mt19937&)> runs;
};

namespace detail {

inline Run launch(std::string label, ir::Dim3 grid, ir::Dim3 block, uint32_t dynamicShared = 0) {
  Run r;
  r.label = std::move(label);
  r.cfg = {grid, block, dynamicShared};
  return r;
}

// Block sizes for kernels whose threads all compute the same thing: one thread, a partial warp,
// one more than a warp, several blocks of a few hundred + 1, and a 3D block in a 2D grid.
inline std::vector<std::pair<ir::Dim3, ir::Dim3>> uniformShapes() {
  return {{{1, 1, 1}, {1, 1, 1}},
          {{1, 1, 1}, {31, 1, 1}},
          {{1, 1, 1}, {33, 1, 1}},
          {{3, 1, 1}, {257, 1, 1}},
          {{2, 3, 1}, {5, 3, 2}}};
}

// `count` launches of one thread each with fresh inputs (from make), then the shapes above.
inline std::vector<Run> uniformRuns(std::mt19937& rng, unsigned count,
                                    const std::function<void(Run&, std::mt19937&)>& make) {
  std::vector<Run> runs;
  for (unsigned i = 0; i < count; ++i) {
    Run r = launch("inputs #" + std::to_string(i), {1, 1, 1}, {1, 1, 1});
    make(r, rng);
    runs.push_back(std::move(r));
  }
  for (auto [grid, block] : uniformShapes()) {
    Run r = launch("shape", grid, block);
    make(r, rng);
    runs.push_back(std::move(r));
  }
  return runs;
}

inline std::vector<GoldenCase> makeGoldenCases() {
  using R = std::vector<Run>;
  std::vector<GoldenCase> all;
  // atomics.tir
  all.push_back({"atomics.tir",
                 "atomics",
                 "entry",
                 {"a", "b", "c", "e", "f", "fi", "m", "n", "o", "q", "r", "t", "cas", "j2", "cas64", "hb", "cas16"},
                 [](std::mt19937& rng) {
                   R runs;
                   const std::pair<ir::Dim3, ir::Dim3> shapes[] = {{{1, 1, 1}, {1, 1, 1}},   {{1, 1, 1}, {31, 1, 1}},
                                                                   {{1, 1, 1}, {33, 1, 1}},  {{3, 1, 1}, {65, 1, 1}},
                                                                   {{2, 1, 1}, {257, 1, 1}}, {{1, 1, 1}, {1, 1, 1}},
                                                                   {{1, 1, 1}, {2, 1, 1}},   {{1, 1, 1}, {7, 1, 1}}};
                   for (auto [grid, block] : shapes) {
                     Run r = launch("atomics", grid, block);
                     // %g starts as a small f32 pair or as random bits; %k small so that inc/dec
                     // wrap within the run; %j spans both signs.
                     std::vector<uint32_t> g(2);
                     if (rng() % 2) {
                       g = {bitsOf(static_cast<float>(rng() % 64)), static_cast<uint32_t>(rng() % 4)};
                     } else {
                       g = {static_cast<uint32_t>(rng()), static_cast<uint32_t>(rng())};
                     }
                     r.buffer("g", g).buffer("any", std::vector<uint32_t>{static_cast<uint32_t>(rng())});
                     r.scalar("x", rng() % 3 ? std::uniform_real_distribution<float>(-8, 8)(rng) : randomF32(rng));
                     r.scalar("d", rng() % 3 ? std::uniform_real_distribution<double>(-8, 8)(rng) : randomF64(rng));
                     r.bits("h", randomHalf(rng, kF16));
                     r.bits("k", rng() % 3 ? rng() % 40 : rng());
                     r.bits("mask", rng());
                     r.bits("j", randomBits(rng, 64));
                     runs.push_back(std::move(r));
                   }
                   return runs;
                 }});
  // bf16-sm90.tir
  all.push_back({"bf16-sm90.tir",
                 "bf16_math",
                 "entry",
                 {"sum", "diff", "prod", "exact", "fused", "low", "mag", "wide", "whole", "from_int", "from_half",
                  "to_half", "less", "pick", "old"},
                 [](std::mt19937& rng) {
                   return uniformRuns(rng, 60, [](Run& r, std::mt19937& g) {
                     r.buffer("out", std::vector<float>{std::nanf("")});
                     r.buffer("acc", std::vector<uint16_t>{
                                         encodeHalf(std::uniform_real_distribution<double>(-64, 64)(g), kBF16)});
                     r.bits("a", randomHalf(g, kBF16)).bits("b", randomHalf(g, kBF16)).bits("h", randomHalf(g, kF16));
                     r.bits("i", g() % 2 ? g() : g() % 601 - 300);
                   });
                 }});
  // bit-ops.tir: two random words per thread, eight results; one block (the kernel indexes by tid.x).
  all.push_back({"bit-ops.tir", "bits", "", {}, [](std::mt19937& rng) {
                   R runs;
                   for (auto [grid, block] : std::vector<std::pair<uint32_t, uint32_t>>{{1, 32}, {1, 40}, {1, 256}}) {
                     Run r = launch("bits", {grid, 1, 1}, {block, 1, 1});
                     std::vector<uint32_t> x(size_t{grid} * block * 2), out(size_t{grid} * block * 8);
                     for (uint32_t& w : x) w = static_cast<uint32_t>(rng());
                     for (uint32_t& w : out) w = static_cast<uint32_t>(rng());
                     r.buffer("x", x).buffer("out", out);
                     runs.push_back(std::move(r));
                   }
                   return runs;
                 }});
  // table.tir: every index of the tables, one thread (each would store to out[0]).
  for (const char* kernel : {"first", "second"})
    all.push_back({"table.tir", kernel, "", {}, [kernel](std::mt19937& rng) {
                     R runs;
                     for (uint32_t i = 0; i < 10; ++i) {
                       Run r = launch(std::string(kernel) + " i=" + std::to_string(i), {1, 1, 1}, {1, 1, 1});
                       r.scalar("i", i).buffer("out", std::vector<uint64_t>{rng()});
                       runs.push_back(std::move(r));
                     }
                     return runs;
                   }});
  // cvt-tf32.tir: one f32 per thread (random bits, ties and the specials among them), a bound n
  // that leaves some threads out, random bytes where they would write.
  all.push_back({"cvt-tf32.tir", "tf32", "", {}, [](std::mt19937& rng) {
                   R runs;
                   const uint32_t specials[] = {0x3F801000u, 0xBF803000u, 0x7F7FF000u, 0x7F7FEFFFu, 0x7FC00001u,
                                                0xFF800000u, 0x00001000u, 0x80000FFFu, 0xFFC01234u, 0x7F800001u};
                   for (uint32_t block : {32u, 40u, 256u}) {
                     Run r = launch("tf32", {1, 1, 1}, {block, 1, 1});
                     std::vector<uint32_t> x(block), out(block);
                     for (uint32_t& w : x) w = static_cast<uint32_t>(rng());
                     for (size_t i = 0; i < std::size(specials); ++i) x[i] = specials[i];
                     for (uint32_t& w : out) w = static_cast<uint32_t>(rng());
                     r.buffer("x", x).buffer("out", out).bits("n", block - block / 8);
                     runs.push_back(std::move(r));
                   }
                   return runs;
                 }});
  // cvt-fp8.tir: two random fp8 codes per thread (NaNs, infinities and subnormals among them), a
  // bound n that leaves some threads out, random words where they would write.
  all.push_back({"cvt-fp8.tir", "fp8", "", {}, [](std::mt19937& rng) {
                   R runs;
                   for (uint32_t block : {32u, 40u, 256u}) {
                     Run r = launch("fp8", {1, 1, 1}, {block, 1, 1});
                     std::vector<uint16_t> x(block);
                     std::vector<uint32_t> e4(block), e5(block);
                     for (uint16_t& c : x) c = static_cast<uint16_t>(rng());
                     x[0] = 0x7F80, x[1] = 0xFC7C, x[2] = 0x0701;  // NaN and -0, -inf and inf, subnormals
                     for (uint32_t& w : e4) w = static_cast<uint32_t>(rng());
                     for (uint32_t& w : e5) w = static_cast<uint32_t>(rng());
                     r.buffer("x", x).buffer("e4", e4).buffer("e5", e5).bits("n", block - block / 8);
                     runs.push_back(std::move(r));
                   }
                   return runs;
                 }});
  // bitcast-vectors.tir: 16 bytes of random bits to load as vectors and pack.
  const auto bitcastRuns = [](std::mt19937& rng) {
    return uniformRuns(rng, 20, [](Run& r, std::mt19937& g) {
      r.buffer("src", std::vector<uint64_t>{randomBits(g, 64), randomBits(g, 64)});
      r.buffer("dst", std::vector<uint64_t>{randomBits(g, 64), randomBits(g, 64)});
    });
  };
  all.push_back({"bitcast-vectors.tir", "bytes", "entry", {"h", "w", "f"}, bitcastRuns});
  all.push_back({"bitcast-vectors.tir", "halves", "entry", {"w", "f", "d"}, bitcastRuns});
  all.push_back({"bitcast-vectors.tir", "words", "entry", {"d", "q"}, bitcastRuns});
  // constants-specials.tir
  all.push_back({"constants-specials.tir",
                 "constants",
                 "entry",
                 {"t", "f", "a", "b", "c", "d", "e", "g", "h", "i", "j", "k", "l", "m", "n", "o", "q", "r", "s"},
                 [](std::mt19937& rng) {
                   return uniformRuns(rng, 1, [](Run& r, std::mt19937& g) {
                     r.buffer("out", std::vector<uint32_t>{static_cast<uint32_t>(g())});
                   });
                 }});
  all.push_back({"constants-specials.tir",
                 "specials",
                 "entry",
                 {"tx", "ty", "tz", "nx", "ny", "cx", "cz", "gx", "gy", "lane", "warp"},
                 [](std::mt19937& rng) {
                   R runs;
                   const std::pair<ir::Dim3, ir::Dim3> shapes[] = {{{1, 1, 1}, {1, 1, 1}},  {{1, 1, 1}, {31, 1, 1}},
                                                                   {{1, 1, 1}, {33, 1, 1}}, {{3, 1, 1}, {257, 1, 1}},
                                                                   {{2, 3, 2}, {7, 5, 3}},  {{1, 2, 1}, {33, 2, 1}},
                                                                   {{3, 1, 3}, {1, 1, 64}}};
                   for (auto [grid, block] : shapes) {
                     Run r = launch("specials", grid, block);
                     r.buffer("out", std::vector<uint32_t>{static_cast<uint32_t>(rng())});
                     runs.push_back(std::move(r));
                   }
                   return runs;
                 }});
  all.push_back({"constants-specials.tir", "fence", "entry", {}, [](std::mt19937&) {
                   R runs;
                   for (auto [grid, block] : uniformShapes()) runs.push_back(launch("fence", grid, block));
                   return runs;
                 }});
  // cp-async.tir: reqntid(32); 896 bytes staged per block, every src-size from 0 to 8.
  all.push_back({"cp-async.tir", "stage", "", {}, [](std::mt19937& rng) {
                   R runs;
                   for (uint32_t n = 0; n <= 8; ++n) {
                     Run r = launch("stage n=" + std::to_string(n), {n % 3 + 1, 1, 1}, {32, 1, 1});
                     std::vector<uint32_t> src(224), dst(224);
                     for (uint32_t& w : src) w = static_cast<uint32_t>(rng());
                     for (uint32_t& w : dst) w = static_cast<uint32_t>(rng());
                     r.buffer("src", src).buffer("dst", dst).bits("n", n);
                     runs.push_back(std::move(r));
                   }
                   return runs;
                 }});
  // named-barrier.tir: reqntid(64); warp 0 hands 32 words to warp 1 through named barrier 1,
  // then warp 1 alone syncs on barrier 2 with a count of n = 32.
  all.push_back({"named-barrier.tir", "handoff", "", {}, [](std::mt19937& rng) {
                   R runs;
                   for (uint32_t grid : {1u, 2u}) {
                     Run r = launch("handoff", {grid, 1, 1}, {64, 1, 1});
                     std::vector<uint32_t> out(32 * grid);  // a block's own 32 words
                     for (uint32_t& w : out) w = static_cast<uint32_t>(rng());
                     r.buffer("out", out).bits("n", 32);
                     r.opts.checkRaces = r.opts.checkUninit = true;  // barrier 1 orders the handoff
                     runs.push_back(std::move(r));
                   }
                   return runs;
                 }});
  // mbarrier.tir: reqntid(64); warp 0 hands 32 words to warp 1 through an mbarrier.
  all.push_back({"mbarrier.tir", "handoff", "", {}, [](std::mt19937& rng) {
                   R runs;
                   for (uint32_t grid : {1u, 3u}) {
                     Run r = launch("handoff", {grid, 1, 1}, {64, 1, 1});
                     std::vector<uint32_t> src(32), dst(32 * grid);  // a block's own 32 words
                     for (uint32_t& w : src) w = static_cast<uint32_t>(rng());
                     for (uint32_t& w : dst) w = static_cast<uint32_t>(rng());
                     r.buffer("src", src).buffer("dst", dst);
                     r.opts.checkRaces = r.opts.checkUninit = true;  // the phase orders the handoff
                     runs.push_back(std::move(r));
                   }
                   return runs;
                 }});
  // warpgroup.tir: maxntid(256); two warpgroups change their register budgets, the second fences
  // and waits for (no) wgmma groups, then each thread writes its tid.
  all.push_back({"warpgroup.tir", "split", "", {}, [](std::mt19937& rng) {
                   R runs;
                   for (uint32_t grid : {1u, 2u}) {
                     Run r = launch("split", {grid, 1, 1}, {256, 1, 1});
                     std::vector<uint32_t> out(256);
                     for (uint32_t& w : out) w = static_cast<uint32_t>(rng());
                     r.buffer("out", out);
                     runs.push_back(std::move(r));
                   }
                   return runs;
                 }});
  // wgmma.tir: reqntid(128); one warpgroup multiplies A (64 x 64, row-major; its transpose for
  // trans_a) by B (N x 64 K-major, or 64 x N MN-major for trans_b) in 4 k-steps into D (64 x N
  // f32). Inputs in [-2, 2].
  struct WgmmaGolden {
    const char* kernel;
    HalfFormat format;
    unsigned n;
  };
  for (WgmmaGolden g : {WgmmaGolden{"gemm_bf16_n64", kBF16, 64}, WgmmaGolden{"gemm_f16_n128_tb", kF16, 128},
                        WgmmaGolden{"gemm_bf16_n256_rega", kBF16, 256}, WgmmaGolden{"kloop_bf16_n128", kBF16, 128},
                        WgmmaGolden{"gemm_bf16_n64_ta", kBF16, 64}})
    all.push_back({"wgmma.tir", g.kernel, "", {}, [g](std::mt19937& rng) {
                     R runs;
                     for (uint32_t grid : {1u, 2u}) {
                       Run r = launch(g.kernel, {grid, 1, 1}, {128, 1, 1});
                       std::uniform_real_distribution<double> u(-2.0, 2.0);
                       std::vector<uint16_t> a(64 * 64), b(64 * g.n);
                       for (uint16_t& h : a) h = encodeHalf(u(rng), g.format);
                       for (uint16_t& h : b) h = encodeHalf(u(rng), g.format);
                       std::vector<float> d(64 * g.n);
                       for (float& f : d) f = static_cast<float>(u(rng));
                       r.buffer("a", a).buffer("b", b).buffer("d", d);
                       runs.push_back(std::move(r));
                     }
                     return runs;
                   }});
  // wgmma-fp8.tir: as wgmma.tir's gemm_bf16_n64 over fp8 codes: A 64 x 128 and B 64 x 128 (K-major)
  // codes of finite values in both formats, D 64 x 64 f32.
  for (const char* kernel : {"gemm_e4m3_n64", "gemm_e5m2_n64"})
    all.push_back({"wgmma-fp8.tir", kernel, "", {}, [kernel](std::mt19937& rng) {
                     R runs;
                     for (uint32_t grid : {1u, 2u}) {
                       Run r = launch(kernel, {grid, 1, 1}, {128, 1, 1});
                       std::vector<uint8_t> a(64 * 128), b(64 * 128);
                       for (uint8_t& c : a) c = finiteFp8Code(rng);
                       for (uint8_t& c : b) c = finiteFp8Code(rng);
                       std::vector<float> d(64 * 64);
                       for (float& f : d) f = randomF32(rng);
                       r.buffer("a", a).buffer("b", b).buffer("d", d);
                       runs.push_back(std::move(r));
                     }
                     return runs;
                   }});
  // mma-fp8.tir: one warp; A, B fragments of finite fp8 codes (in both formats), C small integers;
  // d: the four forms' results (e4m3, e5m2, e4m3 x e5m2, e5m2 x e4m3), 128 words each.
  all.push_back({"mma-fp8.tir", "mma_fp8", "entry", {}, [](std::mt19937& rng) {
                   R runs;
                   auto word = [&] {
                     uint32_t w = 0;
                     for (unsigned i = 0; i < 4; ++i) w |= uint32_t{finiteFp8Code(rng)} << (8 * i);
                     return w;
                   };
                   for (uint32_t grid : {1u, 3u}) {
                     Run r = launch("mma_fp8", {grid, 1, 1}, {32, 1, 1});
                     std::vector<uint32_t> a(128), b(64), d(512);
                     std::vector<float> c(128);
                     for (uint32_t& w : a) w = word();
                     for (uint32_t& w : b) w = word();
                     for (float& x : c) x = static_cast<float>(static_cast<int>(rng() % 17) - 8);
                     for (uint32_t& w : d) w = static_cast<uint32_t>(rng());
                     r.buffer("a", a).buffer("b", b).buffer("c", c).buffer("d", d);
                     runs.push_back(std::move(r));
                   }
                   return runs;
                 }});
  // tmap-param.tir: a kernel with an unused tmap parameter, which a launch still needs bound.
  all.push_back({"tmap-param.tir", "copy", "", {}, [](std::mt19937& rng) {
                   R runs;
                   for (uint32_t block : {1u, 32u, 100u}) {
                     Run r = launch("copy", {2, 1, 1}, {block, 1, 1});
                     std::vector<float> src(block), dst(block);
                     for (float& v : src) v = randomF32(rng);
                     for (float& v : dst) v = randomF32(rng);
                     r.buffer("src", src).buffer("dst", dst).tensorMap2d("src_map", "src", 4, {block, 1}, 16 * block, {4, 1});
                     runs.push_back(std::move(r));
                   }
                   return runs;
                 }});
  // tma.tir: reqntid(128); each block doubles a 16 x 32 f32 tile through TMA. Tensors whose
  // extents are not multiples of the box, rows padded past the extent (40 floats of row stride
  // for 37 columns), so that the edge tiles load zeros and store only the tensor's elements.
  all.push_back({"tma.tir", "tile_scale", "", {}, [](std::mt19937& rng) {
                   R runs;
                   for (auto [cols, rows] : {std::pair<uint32_t, uint32_t>{40, 50}, {37, 21}, {16, 32}, {33, 65}}) {
                     const uint32_t stride = (cols + 3) / 4 * 4;  // floats per row: 16-byte rows
                     Run r = launch("tile_scale", {(cols + 15) / 16, (rows + 31) / 32, 1}, {128, 1, 1});
                     std::vector<float> in(size_t{stride} * rows), out(in.size());
                     for (float& v : in) v = std::uniform_real_distribution<float>(-8, 8)(rng);
                     for (float& v : out) v = std::uniform_real_distribution<float>(-8, 8)(rng);
                     r.buffer("in", in).buffer("out", out);
                     r.tensorMap2d("in_map", "in", 4, {cols, rows}, 4 * stride, {16, 32});
                     r.tensorMap2d("out_map", "out", 4, {cols, rows}, 4 * stride, {16, 32});
                     r.opts.checkRaces = r.opts.checkUninit = true;
                     runs.push_back(std::move(r));
                   }
                   return runs;
                 }});
  // tma-3d.tir: reqntid(32); thread 0 loads the 8 x 4 x 16 f32 box at (x, y, z) of a batch of
  // matrices and stores it back through the output's map: the box's in-bounds elements are
  // copied, everything else of out keeps its bits. Boxes inside, across every edge and wholly
  // outside; planes with padding between them.
  all.push_back({"tma-3d.tir", "planes", "", {}, [](std::mt19937& rng) {
                   R runs;
                   struct Shape {
                     uint32_t cols, rows, planes;
                     int32_t x, y, z;
                   };
                   for (Shape t : {Shape{8, 4, 16, 0, 0, 0}, {13, 7, 20, 4, 5, 10}, {9, 9, 3, -3, -2, -7}, {12, 5, 4, 20, 0, 0}}) {
                     const uint32_t stride = (t.cols + 3) / 4 * 4;        // floats per row: 16-byte rows
                     const uint32_t plane = stride * t.rows + 4;          // floats per plane, one vector of padding
                     Run r = launch("planes", {1, 1, 1}, {32, 1, 1});
                     std::vector<float> in(size_t{plane} * t.planes), out(in.size());
                     for (float& v : in) v = std::uniform_real_distribution<float>(-8, 8)(rng);
                     for (float& v : out) v = std::uniform_real_distribution<float>(-8, 8)(rng);
                     r.buffer("in", in).buffer("out", out);
                     r.scalar("x", t.x).scalar("y", t.y).scalar("z", t.z);
                     r.tensorMap3d("in_map", "in", 4, {t.cols, t.rows, t.planes}, 4 * stride, 4 * plane, {8, 4, 16});
                     r.tensorMap3d("out_map", "out", 4, {t.cols, t.rows, t.planes}, 4 * stride, 4 * plane, {8, 4, 16});
                     r.opts.checkRaces = r.opts.checkUninit = true;
                     runs.push_back(std::move(r));
                   }
                   return runs;
                 }});
  // conversions.tir
  all.push_back({"conversions.tir",
                 "floats",
                 "entry",
                 {"h1", "h2", "b1", "b2", "f1", "f2", "f3", "d1", "d2", "h3", "f4", "f5", "h4", "sum"},
                 [](std::mt19937& rng) {
                   return uniformRuns(rng, 200, [](Run& r, std::mt19937& g) {
                     r.buffer("out", std::vector<float>{std::nanf("")});
                     float x = randomF32(g);
                     // Also values near the f16 range's ends and f16 ties (1 + k/2048).
                     if (g() % 8 == 0)
                       x = std::ldexp(1.0f + static_cast<float>(g() % 2048) / 2048.0f, static_cast<int>(g() % 50) - 26);
                     r.scalar("x", x).bits("h", randomHalf(g, kF16));
                     double d = randomF64(g);
                     if (g() % 4 == 0)
                       d = static_cast<double>(randomF32(g)) * (1.0 + std::ldexp(static_cast<double>(g() % 3), -40));
                     r.scalar("d", d);
                   });
                 }});
  all.push_back({"conversions.tir",
                 "ints_and_floats",
                 "entry",
                 {"a", "b", "c", "d", "e", "f", "g", "k", "l", "m", "n", "o", "q", "r", "s", "t", "v"},
                 [](std::mt19937& rng) {
                   return uniformRuns(rng, 200, [](Run& r, std::mt19937& g) {
                     r.buffer("out", std::vector<uint32_t>{static_cast<uint32_t>(g())});
                     float x = randomF32(g);
                     if (g() % 4 == 0)
                       x = std::ldexp(static_cast<float>(static_cast<int>(g()) >> 8), static_cast<int>(g() % 48) - 30);
                     r.scalar("x", x).bits("h", randomHalf(g, kF16));
                     r.bits("i", g() % 2 ? g() : g() % 200001 - 100000);
                     r.bits("u", randomBits(g, 64) >> (g() % 64));
                     r.bits("byte", g() & 0xFF).bits("sbyte", g() & 0xFF).bits("bits", g());
                   });
                 }});
  all.push_back({"conversions.tir", "bitcasts", "entry", {"xb", "hb", "db", "back", "hp"}, [](std::mt19937& rng) {
                   return uniformRuns(rng, 20, [](Run& r, std::mt19937& g) {
                     r.buffer("out", std::vector<uint32_t>{static_cast<uint32_t>(g())});
                     r.bits("x", g()).bits("h", g() & 0xFFFF).bits("d", randomBits(g, 64));
                   });
                 }});
  // dynamic-shared.tir: @scale has 32 slots in @tile.lo, so at most 32 threads.
  all.push_back(
      {"dynamic-shared.tir", "scale", "entry", {"v", "off", "goff"}, [](std::mt19937& rng) {
         R runs;
         const std::pair<ir::Dim3, ir::Dim3> shapes[] = {
             {{1, 1, 1}, {1, 1, 1}}, {{1, 1, 1}, {31, 1, 1}}, {{5, 1, 1}, {32, 1, 1}}, {{3, 1, 1}, {17, 1, 1}}};
         for (auto [grid, block] : shapes) {
           // Dynamic shared memory of exactly the block's floats, or 1 KiB more.
           uint32_t dyn = block.x * 4 + (rng() % 2) * 1024;
           Run r = launch("scale", grid, block, dyn);
           std::vector<float> data(block.x + rng() % 5);
           for (float& f : data) f = randomF32(rng);
           r.buffer("data", data).bits("n", rng());
           runs.push_back(std::move(r));
         }
         return runs;
       }});
  all.push_back({"dynamic-shared.tir", "copy", "entry", {"v"}, [](std::mt19937& rng) {
                   return uniformRuns(rng, 3, [](Run& r, std::mt19937& g) {
                     r.cfg.dynamicShared = 4;
                     r.buffer("data", std::vector<uint32_t>{static_cast<uint32_t>(g()), static_cast<uint32_t>(g())});
                   });
                 }});
  // fast-math.tir
  all.push_back({"fast-math.tir",
                 "fast_math",
                 "entry",
                 {"e",  "l",  "s",  "c",  "t",  "r1", "r2", "r3", "r4", "q1", "q2", "s1", "s2", "s3",
                  "v1", "v2", "v3", "v4", "f1", "f2", "f3", "m1", "a1", "a2", "a3", "a4", "m2"},
                 [](std::mt19937& rng) {
                   return uniformRuns(rng, 300, [](Run& r, std::mt19937& g) {
                     r.buffer("out", std::vector<float>{std::nanf("")});
                     // Mostly finite arguments in the ranges the approximations are specified on
                     // (|x| < 100 pi for sin/cos), sometimes any class.
                     auto pick = [&g]() {
                       if (g() % 4 == 0) return randomF32(g);
                       if (g() % 3 == 0) return std::uniform_real_distribution<float>(0.0f, 2.0f)(g);
                       return std::uniform_real_distribution<float>(-60.0f, 60.0f)(g);
                     };
                     r.scalar("x", pick()).scalar("y", pick());
                     r.scalar("d", g() % 4 ? std::uniform_real_distribution<double>(-1e3, 1e3)(g) : randomF64(g));
                     r.bits("h", randomHalf(g, kF16));
                   });
                 }});
  // guarded-store.tir
  auto guarded = [](std::mt19937& rng) {
    R runs;
    for (uint32_t block : {1u, 31u, 33u, 257u}) {
      const uint32_t ns[] = {0u, 1u, block - 1, block, block + 3, static_cast<uint32_t>(rng() % (block + 8))};
      for (uint32_t n : ns) {
        Run r = launch("n=" + std::to_string(n), {static_cast<unsigned>(1 + rng() % 2), 1, 1}, {block, 1, 1});
        std::vector<uint32_t> out(std::max(n, 1u));
        for (uint32_t& w : out) w = static_cast<uint32_t>(rng());
        int32_t value = rng() % 8 == 0 ? INT32_MIN : static_cast<int32_t>(rng());
        r.buffer("out", out).bits("n", n).bits("value", static_cast<uint32_t>(value));
        runs.push_back(std::move(r));
      }
    }
    return runs;
  };
  all.push_back({"guarded-store.tir", "guarded_store", "", {}, guarded});
  all.push_back({"guarded-store.tir", "guarded_parity", "", {}, guarded});
  // integer.tir: %b and %d are divisors (of themselves), never 0 here.
  all.push_back({"integer.tir",
                 "integer",
                 "entry",
                 {"m1", "m2", "m3", "m4", "m5", "q1", "q2", "s1", "s2", "n1", "n2", "n3", "n4", "h1",  "h2",
                  "h3", "h4", "h5", "c1", "c2", "o1", "o2", "o3", "o4", "o5", "o6", "dp", "du", "sub", "sum"},
                 [](std::mt19937& rng) {
                   return uniformRuns(rng, 200, [](Run& r, std::mt19937& g) {
                     auto wide = [&g](unsigned bits) {
                       // Often near the type's edges (0, 1, max, min) or short.
                       switch (g() % 6) {
                         case 0:
                           return uint64_t{0};
                         case 1:
                           return uint64_t{1} << (bits - 1);
                         case 2:
                           return (uint64_t{1} << (bits - 1)) - 1;
                         case 3:
                           return randomBits(g, bits) >> (g() % bits);
                         default:
                           return randomBits(g, bits);
                       }
                     };
                     uint64_t b = wide(32), d = wide(64);
                     r.buffer("out", std::vector<uint32_t>{static_cast<uint32_t>(g())});
                     r.bits("a", wide(32)).bits("b", b ? b : 7).bits("c", wide(16)).bits("d", d ? d : 3);
                     r.bits("e", wide(64)).bits("f", wide(32)).bits("g", wide(8));
                   });
                 }});
  // kernel-select.tir
  all.push_back({"kernel-select.tir", "first", "entry", {"t"}, [](std::mt19937& rng) {
                   return uniformRuns(rng, 1, [](Run& r, std::mt19937& g) {
                     r.cfg.dynamicShared = 4 * (g() % 4);
                     r.buffer("out", std::vector<uint32_t>{static_cast<uint32_t>(g())});
                   });
                 }});
  all.push_back({"kernel-select.tir", "second", "entry", {"v"}, [](std::mt19937& rng) {
                   return uniformRuns(rng, 1, [](Run& r, std::mt19937& g) {
                     r.cfg.dynamicShared = 4 + 4 * (g() % 4);
                     r.buffer("out", std::vector<uint32_t>{static_cast<uint32_t>(g()) | 1});
                   });
                 }});
  // kernel-hints.tir: every thread copies x[0] to y[0]; blocks within each kernel's reqntid/maxntid.
  for (auto [kernel, blocks] : std::vector<std::pair<const char*, std::vector<uint32_t>>>{
           {"copy", {1, 64, 256}}, {"exact", {128}}, {"capped", {1, 33, 512}}})
    all.push_back({"kernel-hints.tir", kernel, "entry", {"v"}, [blocks](std::mt19937& rng) {
                     R runs;
                     for (uint32_t block : blocks) {
                       Run r = launch("block " + std::to_string(block), {2, 1, 1}, {block, 1, 1});
                       r.buffer("x", std::vector<float>{randomF32(rng)});
                       r.buffer("y", std::vector<uint32_t>{static_cast<uint32_t>(rng())});
                       runs.push_back(std::move(r));
                     }
                     return runs;
                   }});
  // loop-carried.tir
  all.push_back({"loop-carried.tir", "fib", "", {}, [](std::mt19937& rng) {
                   R runs = uniformRuns(rng, 12, [](Run& r, std::mt19937& g) {
                     uint32_t steps = g() % 3 == 0 ? g() % 4 : g() % 2000;
                     r.buffer("out", std::vector<uint32_t>{static_cast<uint32_t>(g())}).bits("steps", steps);
                   });
                   return runs;
                 }});
  all.push_back({"loop-carried.tir", "swap", "", {}, [](std::mt19937& rng) {
                   return uniformRuns(rng, 16, [](Run& r, std::mt19937& g) {
                     uint32_t rounds = g() % 3 == 0 ? g() % 4 : g() % 1001;
                     r.buffer("out", std::vector<float>{std::nanf("")}).bits("rounds", rounds);
                     r.scalar("x0", randomF32(g)).scalar("y0", randomF32(g));
                   });
                 }});
  all.push_back({"loop-carried.tir", "rotate", "", {}, [](std::mt19937& rng) {
                   return uniformRuns(rng, 16, [](Run& r, std::mt19937& g) {
                     int32_t count = g() % 4 == 0 ? -static_cast<int32_t>(g() % 5) : static_cast<int32_t>(g() % 1000);
                     r.buffer("out", std::vector<uint32_t>{static_cast<uint32_t>(g())})
                         .bits("count", static_cast<uint32_t>(count));
                     r.bits("a0", g()).bits("b0", g()).bits("c0", g());
                   });
                 }});
  // output-file.tir
  all.push_back({"output-file.tir", "fill", "", {}, [](std::mt19937& rng) {
                   return uniformRuns(rng, 8, [](Run& r, std::mt19937& g) {
                     r.buffer("out", std::vector<uint32_t>{static_cast<uint32_t>(g())}).bits("value", g());
                   });
                 }});
  // reg-reuse.tir
  all.push_back({"reg-reuse.tir", "squares", "", {}, [](std::mt19937& rng) {
                   return uniformRuns(rng, 40, [](Run& r, std::mt19937& g) {
                     r.buffer("out", std::vector<uint32_t>{static_cast<uint32_t>(g()), static_cast<uint32_t>(g())});
                     r.scalar("x", randomF32(g)).scalar("y", randomF32(g));
                   });
                 }});
  // setp-selp.tir
  all.push_back(
      {"setp-selp.tir",
       "compare",
       "entry",
       {"p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "any", "both", "flip", "none", "f", "g", "i", "j", "k"},
       [](std::mt19937& rng) {
         return uniformRuns(rng, 150, [](Run& r, std::mt19937& g) {
           r.buffer("out", std::vector<uint32_t>{static_cast<uint32_t>(g())});
           r.buffer("alt", std::vector<uint32_t>{static_cast<uint32_t>(g())});
           r.bits("u", g() % 2 ? g() % 16 : g()).bits("s", g() % 2 ? g() % 9 - 6 : g());
           r.bits("w", g() & 0xFFFF).bits("b", randomBits(g, 64)).scalar("x", randomF32(g)).scalar("d", randomF64(g));
           r.bits("h", randomHalf(g, kF16)).bits("c", g() & 0xFF);
         });
       }});
  // shared-barrier.tir: reqntid(128); blocks of 128 with grids of odd sizes.
  all.push_back({"shared-barrier.tir", "reverse", "", {}, [](std::mt19937& rng) {
                   R runs;
                   for (uint32_t grid : {1u, 3u, 33u}) {
                     Run r = launch("reverse", {grid, 1, 1}, {128, 1, 1});
                     std::vector<float> data(size_t{grid} * 128);
                     for (float& f : data) f = randomF32(rng);
                     r.buffer("data", data);
                     runs.push_back(std::move(r));
                   }
                   return runs;
                 }});
  // target-sm90a.tir
  all.push_back({"target-sm90a.tir", "id", "entry", {"t"}, [](std::mt19937& rng) {
                   return uniformRuns(rng, 1, [](Run& r, std::mt19937& g) {
                     r.buffer("out", std::vector<uint32_t>{static_cast<uint32_t>(g())});
                   });
                 }});
  // vadd.tir (the emit-ptx golden's copy of the example)
  all.push_back({"vadd.tir", "vadd", "", {}, [](std::mt19937& rng) {
                   R runs;
                   for (uint32_t n : {1u, 31u, 33u, 257u, 1000u}) {
                     for (uint32_t block : {32u, 256u}) {
                       Run r = launch("vadd n=" + std::to_string(n), {(n + block - 1) / block, 1, 1}, {block, 1, 1});
                       std::vector<float> a(n), b(n), c(n, std::nanf(""));
                       for (uint32_t i = 0; i < n; ++i) {
                         a[i] = randomF32(rng);
                         b[i] = randomF32(rng);
                       }
                       r.buffer("a", a).buffer("b", b).buffer("c", c).bits("n", n);
                       runs.push_back(std::move(r));
                     }
                   }
                   return runs;
                 }});
  // vector-access.tir: %src holds 8 * n bytes (at least the 16 its first loads need).
  all.push_back({"vector-access.tir",
                 "vectors",
                 "done",
                 {"v4", "x", "w", "pair", "acc", "halves", "d2", "bytes"},
                 [](std::mt19937& rng) {
                   R runs;
                   const std::pair<uint32_t, uint32_t> shapes[] = {{0, 1},   {1, 1},   {2, 31},  {31, 1},
                                                                   {33, 33}, {257, 3}, {1001, 2}};
                   for (auto [n, block] : shapes) {
                     Run r = launch("vectors n=" + std::to_string(n), {static_cast<unsigned>(1 + rng() % 2), 1, 1},
                                    {block, 1, 1});
                     std::vector<float> src(std::max(2 * n, 4u));
                     for (float& f : src)
                       f = rng() % 4 ? std::uniform_real_distribution<float>(-1e3f, 1e3f)(rng) : randomF32(rng);
                     std::vector<uint32_t> dst(12);
                     for (uint32_t& w : dst) w = static_cast<uint32_t>(rng());
                     r.buffer("src", src).buffer("dst", dst).bits("n", n);
                     runs.push_back(std::move(r));
                   }
                   return runs;
                 }});
  // vector-access.tir's vector parameters: random lanes (special values included), one thread or a
  // few warps in a few blocks (every thread stores the same).
  all.push_back({"vector-access.tir", "vector_params", "entry", {"x"}, [](std::mt19937& rng) {
                   R runs;
                   const std::pair<unsigned, unsigned> shapes[] = {{1, 1}, {1, 33}, {3, 64}};
                   for (auto [grid, block] : shapes) {
                     Run r = launch("vector_params", {grid, 1, 1}, {block, 1, 1});
                     std::vector<float> v(4);
                     for (float& f : v) f = randomF32(rng);
                     std::vector<double> w(4);
                     for (double& d : w) d = std::uniform_real_distribution<double>(-1e300, 1e300)(rng);
                     std::vector<uint32_t> dst(8);
                     for (uint32_t& x : dst) x = static_cast<uint32_t>(rng());
                     r.buffer("out", dst)
                         .vector("v", v)
                         .vector("w", w)
                         .vector("b", std::vector<uint8_t>{uint8_t(rng()), uint8_t(rng())});
                     runs.push_back(std::move(r));
                   }
                   return runs;
                 }});
  // warp-reduce.tir: full warps only (the membermask names all 32 lanes).
  all.push_back(
      {"warp-reduce.tir",
       "warp_sum",
       "entry",
       {"v", "r16", "r8", "s4", "r4", "total", "up", "first", "votes", "any", "every", "same", "flag"},
       [](std::mt19937& rng) {
         R runs;
         for (auto [grid, block] : std::vector<std::pair<uint32_t, uint32_t>>{{1, 32}, {3, 64}, {1, 256}, {5, 96}}) {
           Run r = launch("warp_sum", {grid, 1, 1}, {block, 1, 1});
           std::vector<float> x(32);
           for (float& f : x)
             f = rng() % 8 ? std::uniform_real_distribution<float>(-100.0f, 100.0f)(rng) : randomF32(rng);
           std::vector<uint32_t> sums(32);
           for (uint32_t& w : sums) w = static_cast<uint32_t>(rng());
           r.buffer("x", x).buffer("sums", sums);
           runs.push_back(std::move(r));
         }
         return runs;
       }});
  // tensor-cores.tir: whole warps only (mma and ldmatrix need all 32 lanes). Fragments hold
  // small integers as bf16 pairs (a, b) and f32 (c), so every mma form reads finite values.
  all.push_back({"tensor-cores.tir", "tensor_cores", "entry", {}, [](std::mt19937& rng) {
                   R runs;
                   auto small = [&] { return static_cast<float>(static_cast<int>(rng() % 17) - 8); };
                   auto bf16Pair = [&] {
                     return (std::bit_cast<uint32_t>(small()) >> 16) | (std::bit_cast<uint32_t>(small()) & 0xFFFF0000u);
                   };
                   for (uint32_t grid : {1u, 3u}) {
                     Run r = launch("tensor_cores", {grid, 1, 1}, {32, 1, 1});
                     std::vector<uint32_t> a(128), b(64), d(1280);
                     std::vector<float> c(128);
                     for (uint32_t& w : a) w = bf16Pair();
                     for (uint32_t& w : b) w = bf16Pair();
                     for (float& x : c) x = small();
                     for (uint32_t& w : d) w = static_cast<uint32_t>(rng());
                     r.buffer("a", a).buffer("b", b).buffer("c", c).buffer("d", d);
                     runs.push_back(std::move(r));
                   }
                   return runs;
                 }});
  return all;
}

}  // namespace detail

inline const std::vector<GoldenCase>& goldenCases() {
  static const std::vector<GoldenCase> all = detail::makeGoldenCases();
  return all;
}

inline const GoldenCase& goldenCase(const std::string& file, const std::string& kernel) {
  for (const GoldenCase& c : goldenCases())
    if (c.file == file && c.kernel == kernel) return c;
  FAIL("no golden case for " << file << " @" << kernel);
  return goldenCases().front();
}

// The golden's module with the case's probes added (probes receives their layout).
inline ir::Module instrumentedGolden(const GoldenCase& c, Probes& probes) {
  ir::Module m = parseSourceFile("lit-tests/emit-ptx/" + c.file);
  probes = addProbes(m, c.kernel, c.probeBlock, c.probes);
  return m;
}

}  // namespace tn::harness
