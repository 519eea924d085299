// The interpreter's public API: loading a kernel, binding parameters by name, launching and
// reading results back. Decoding, semantics and execution live in the other Interp*.cpp files.
#include "backends/interp/Interp.h"

#include "backends/interp/InterpImpl.h"
#include "ir/Parser.h"
#include "passes/Passes.h"

namespace tn::interp {

struct Interpreter::State {
  detail::Program program;
  bool loaded = false;
  std::vector<std::vector<std::byte>> buffers;  // per parameter (pointer parameters only)
  std::vector<std::optional<uint64_t>> values;  // per parameter; pointers get their tag at launch
  std::vector<std::vector<uint64_t>> wide;      // per parameter: a vector's words after its first
  std::vector<TensorMapBytes> tensorMaps;       // per parameter (tmap parameters only)
  const DeviceMemory* device = nullptr;         // pointers are device addresses into it
  Stats stats;
};

namespace {

Error setupError(const std::string& msg) {
  Error e;
  e.diag.message = msg;
  return e;
}

}  // namespace

Interpreter::Interpreter() : s_(std::make_unique<State>()) {}
Interpreter::~Interpreter() = default;
Interpreter::Interpreter(Interpreter&&) noexcept = default;
Interpreter& Interpreter::operator=(Interpreter&&) noexcept = default;

std::optional<Error> Interpreter::load(const ir::Module& m, std::string_view name) {
  const DeviceMemory* device = s_->device;
  *s_ = State{};
  s_->device = device;
  // Device functions are run inlined, as they are compiled.
  std::optional<ir::Module> inlined;
  if (!m.functions.empty()) {
    inlined = m;
    ir::Diagnostics diags;
    if (!passes::inlineFunctions(*inlined, diags)) return setupError(ir::formatDiagnostic(diags.all().front()));
  }
  for (const ir::Kernel& k : (inlined ? *inlined : m).kernels) {
    if (k.name != name) continue;
    if (auto e = detail::decode(m, k, s_->program)) return e;
    s_->loaded = true;
    s_->buffers.resize(s_->program.params.size());
    s_->values.resize(s_->program.params.size());
    s_->wide.resize(s_->program.params.size());
    s_->tensorMaps.resize(s_->program.params.size());
    return std::nullopt;
  }
  return setupError("no kernel named '" + std::string(name) + "'");
}

std::vector<ParamInfo> Interpreter::params() const {
  std::vector<ParamInfo> out;
  for (size_t i = 0; i < s_->program.params.size(); ++i) {
    const detail::ParamSlot& p = s_->program.params[i];
    out.push_back({p.name, p.type, s_->values[i].has_value()});
  }
  return out;
}

namespace {

enum class Binding : uint8_t { Pointer, Scalar, TensorMap };

Binding bindingOf(ir::Type t) {
  return t.isPtr() ? Binding::Pointer : t.scalar == ir::Scalar::TensorMap ? Binding::TensorMap : Binding::Scalar;
}

// Index of parameter `name`, or an error naming what is wrong.
std::optional<Error> findParam(const detail::Program& p, bool loaded, std::string_view name, Binding want,
                               size_t& index) {
  if (!loaded) return setupError("no kernel loaded");
  for (size_t i = 0; i < p.params.size(); ++i) {
    if (p.params[i].name != name) continue;
    Binding have = bindingOf(p.params[i].type);
    if (have != want)
      return setupError("parameter '" + std::string(name) + "' of kernel '" + p.kernel + "' has type " +
                        ir::typeName(p.params[i].type) +
                        (have == Binding::Pointer     ? ": bind a buffer to it"
                         : have == Binding::TensorMap ? ": bind a tensor map to it (setTensorMap)"
                         : want == Binding::Pointer   ? ", not a pointer"
                                                      : ", not a tmap"));
    index = i;
    return std::nullopt;
  }
  return setupError("kernel '" + p.kernel + "' has no parameter '" + std::string(name) + "'");
}

// Why cp.async.bulk.tensor cannot use the map `d` (TC§5.1's rules for a tiled, non-interleaved
// map), or nullopt.
std::optional<std::string> tensorMapProblem(const TensorMapDesc& d) {
  auto n = [](uint64_t v) { return std::to_string(v); };
  const unsigned e = d.elementBytes;
  if (e != 1 && e != 2 && e != 4 && e != 8) return "its element size is " + n(e) + " bytes (expected 1, 2, 4 or 8)";
  if (d.interleave != 0) return "it is interleaved (the interpreter models non-interleaved maps only)";
  if (d.swizzle > 3) return "its swizzle mode is " + n(d.swizzle) + " (expected 0 none, 1 32B, 2 64B or 3 128B)";
  if (d.address % 16) return "its global address " + n(d.address % 16) + " bytes past a 16-byte boundary";
  for (unsigned r = 0; r < d.rank; ++r) {
    if (d.dims[r] < 1 || d.dims[r] > (uint64_t{1} << 32)) return "dimension " + n(r) + " has " + n(d.dims[r]) + " elements (expected 1 .. 2^32)";
    if (d.box[r] < 1 || d.box[r] > 256) return "box dimension " + n(r) + " is " + n(d.box[r]) + " (expected 1 .. 256)";
    if (r > 0 && (d.strides[r - 1] % 16 || d.strides[r - 1] >= (uint64_t{1} << 40)))
      return "the stride of dimension " + n(r) + " is " + n(d.strides[r - 1]) + " bytes (a multiple of 16 below 2^40)";
  }
  if (d.box[0] * e % 16) return "its inner box of " + n(d.box[0] * e) + " bytes is not a multiple of 16";
  if (d.swizzle && d.box[0] * e > (16u << d.swizzle))
    return "its inner box of " + n(d.box[0] * e) + " bytes exceeds the " + n(16u << d.swizzle) + "-byte swizzle span";
  return std::nullopt;
}

}  // namespace

std::optional<Error> Interpreter::setTensorMap(std::string_view param, const TensorMapBytes& bytes) {
  size_t i = 0;
  if (auto e = findParam(s_->program, s_->loaded, param, Binding::TensorMap, i)) return e;
  s_->tensorMaps[i] = bytes;
  s_->values[i] = 0;
  return std::nullopt;
}

std::optional<uint64_t> Interpreter::pointerValue(std::string_view param) const {
  uint64_t tag = 0;
  for (size_t i = 0; i < s_->program.params.size(); ++i) {
    if (!s_->program.params[i].type.isPtr()) continue;
    ++tag;
    if (s_->program.params[i].name != param) continue;
    if (!s_->values[i]) return std::nullopt;
    return s_->device ? *s_->values[i] : tag << detail::kTagShift;
  }
  return std::nullopt;
}

void Interpreter::useDeviceMemory(const DeviceMemory* memory) {
  s_->device = memory;
  s_->buffers.assign(s_->buffers.size(), {});
  for (size_t i = 0; i < s_->program.params.size(); ++i)
    if (s_->program.params[i].type.isPtr()) s_->values[i].reset();
}

std::optional<Error> Interpreter::setAddress(std::string_view param, uint64_t address) {
  size_t i = 0;
  if (auto e = findParam(s_->program, s_->loaded, param, Binding::Pointer, i)) return e;
  if (!s_->device) return setupError("parameter '" + std::string(param) + "' takes a buffer: no device memory is in use");
  s_->values[i] = address;
  return std::nullopt;
}

std::optional<Error> Interpreter::bindBuffer(std::string_view param, std::vector<std::byte> bytes) {
  size_t i = 0;
  if (auto e = findParam(s_->program, s_->loaded, param, Binding::Pointer, i)) return e;
  if (s_->device)
    return setupError("parameter '" + std::string(param) + "' takes a device address (setAddress): device memory is in use");
  if (bytes.size() > (uint64_t{1} << 46)) return setupError("buffer for '" + std::string(param) + "' is too large");
  s_->buffers[i] = std::move(bytes);
  s_->values[i] = 0;
  return std::nullopt;
}

namespace {

// Bits of a value of type t (pred: 1 bit); the mask of one lane of a vector.
uint64_t laneMask(ir::Type t) {
  return t.isPred() ? 1 : ir::scalarBits(t.scalar) >= 64 ? ~uint64_t{0} : (uint64_t{1} << ir::scalarBits(t.scalar)) - 1;
}

std::string vectorUse(std::string_view param, ir::Type t) {
  return "parameter '" + std::string(param) + "' has type " + ir::typeName(t) + ": give its " +
         std::to_string(t.lanes) + " lanes (setScalarBytes, or setScalarText with " + std::to_string(t.lanes) +
         " comma-separated values)";
}

}  // namespace

std::optional<Error> Interpreter::setScalarBits(std::string_view param, uint64_t bits) {
  size_t i = 0;
  if (auto e = findParam(s_->program, s_->loaded, param, Binding::Scalar, i)) return e;
  ir::Type t = s_->program.params[i].type;
  if (t.isVector()) return setupError(vectorUse(param, t));
  s_->values[i] = bits & laneMask(t);
  return std::nullopt;
}

std::optional<Error> Interpreter::setScalarBytes(std::string_view param, std::span<const std::byte> bytes) {
  size_t i = 0;
  if (auto e = findParam(s_->program, s_->loaded, param, Binding::Scalar, i)) return e;
  ir::Type t = s_->program.params[i].type;
  const size_t want = t.isPred() ? 1 : t.bytes();
  if (bytes.size() != want)
    return setupError("parameter '" + std::string(param) + "' has type " + ir::typeName(t) + " (" +
                      std::to_string(want) + " bytes), not " + std::to_string(bytes.size()) + " bytes");
  // Little-endian words, as a vector lies in registers: lane j at bit j * lane width.
  std::vector<uint64_t> words((want + 7) / 8, 0);
  std::memcpy(words.data(), bytes.data(), want);
  if (!t.isVector()) words[0] &= laneMask(t);
  s_->values[i] = words[0];
  s_->wide[i].assign(words.begin() + 1, words.end());
  return std::nullopt;
}

std::optional<Error> Interpreter::setScalarChecked(std::string_view param, uint64_t bits, bool isFloat, bool isBool,
                                                   unsigned bytes) {
  size_t i = 0;
  if (auto e = findParam(s_->program, s_->loaded, param, Binding::Scalar, i)) return e;
  ir::Type t = s_->program.params[i].type;
  if (t.isVector()) return setupError(vectorUse(param, t));
  bool ok = t.isPred() ? isBool
            : t.isFloat() ? isFloat && t.bits() == bytes * 8
                          : !isFloat && !isBool && t.bits() == bytes * 8;
  if (!ok)
    return setupError("parameter '" + std::string(param) + "' has type " + ir::typeName(t) +
                      "; the value given has another type or size");
  return setScalarBits(param, bits);
}

std::optional<Error> Interpreter::setScalarText(std::string_view param, std::string_view text) {
  size_t i = 0;
  if (auto e = findParam(s_->program, s_->loaded, param, Binding::Scalar, i)) return e;
  const ir::Type t = s_->program.params[i].type, lane = ir::Type::of(t.scalar);
  // A vector's lanes: comma-separated literals of its element type.
  std::vector<std::string_view> parts;
  for (size_t at = 0;;) {
    size_t comma = t.isVector() ? text.find(',', at) : std::string_view::npos;
    parts.push_back(text.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at));
    if (comma == std::string_view::npos) break;
    at = comma + 1;
  }
  if (parts.size() != t.lanes)
    return setupError("parameter '" + std::string(param) + "' of type " + ir::typeName(t) + " takes " +
                      std::to_string(t.lanes) + " comma-separated values, not " + std::to_string(parts.size()));
  std::vector<std::byte> bytes(t.isPred() ? 1 : t.bytes());
  const unsigned laneBytes = t.isPred() ? 1 : t.bytes() / t.lanes;
  for (size_t j = 0; j < parts.size(); ++j) {
    // The IR's literals spell bit patterns (-1 is a u32's 0xFFFFFFFF); a value given for an
    // unsigned parameter is a number and takes no minus sign.
    const bool negativeUnsigned = lane.isInt() && !lane.isSigned() && parts[j].starts_with('-');
    auto bits = negativeUnsigned ? std::nullopt : ir::parseConstLiteral(parts[j], lane);
    if (!bits)
      return setupError("invalid " + ir::typeName(lane) + " value '" + std::string(parts[j]) + "' for " +
                        (t.isVector() ? "lane " + std::to_string(j) + " of " : std::string()) + "parameter '" +
                        std::string(param) + "'");
    const uint64_t v = *bits & laneMask(t);
    std::memcpy(bytes.data() + j * laneBytes, &v, laneBytes);
  }
  return setScalarBytes(param, bytes);
}

std::optional<Error> Interpreter::launch(const LaunchConfig& cfg, const Options& opts) {
  if (!s_->loaded) return setupError("no kernel loaded");
  const detail::Program& p = s_->program;
  std::vector<uint64_t> bits(p.params.size());
  std::vector<detail::GlobalBuffer> globals;
  std::vector<TensorMapDesc> tensorMaps;
  std::vector<uint64_t> wide;  // the vectors' words after their first, in parameter order
  for (size_t i = 0; i < p.params.size(); ++i) {
    const Binding binding = bindingOf(p.params[i].type);
    if (!s_->values[i])
      return setupError((binding == Binding::TensorMap ? "no tensor map bound to parameter '"
                         : binding == Binding::Scalar  ? "no value for parameter '"
                         : s_->device                  ? "no address for parameter '"
                                                       : "no buffer bound to parameter '") +
                        p.params[i].name + "'");
    if (binding == Binding::TensorMap) {
      // The kernel's tmap value is the map's index in the launch's table.
      std::optional<TensorMapDesc> d = decodeTensorMap(s_->tensorMaps[i]);
      if (!d)
        return setupError("the tensor map bound to parameter '" + p.params[i].name +
                          "' was not encoded by the simulator's cuTensorMapEncodeTiled (no TMAP magic, or a rank "
                          "outside 1 .. 5)");
      if (auto why = tensorMapProblem(*d))
        return setupError("the tensor map bound to parameter '" + p.params[i].name + "' is unusable: " + *why);
      bits[i] = tensorMaps.size();
      tensorMaps.push_back(*d);
    } else if (binding == Binding::Pointer && !s_->device) {
      globals.push_back({p.params[i].name, &s_->buffers[i]});
      bits[i] = static_cast<uint64_t>(globals.size()) << detail::kTagShift;
    } else {
      bits[i] = *s_->values[i];
      wide.insert(wide.end(), s_->wide[i].begin(), s_->wide[i].end());
    }
  }
  return detail::execute(p, bits, wide, {globals, s_->device, tensorMaps}, cfg, opts, s_->stats);
}

const std::vector<std::byte>* Interpreter::buffer(std::string_view param) const {
  for (size_t i = 0; i < s_->program.params.size(); ++i)
    if (s_->program.params[i].name == param && s_->program.params[i].type.isPtr() && s_->values[i] && !s_->device)
      return &s_->buffers[i];
  return nullptr;
}

const Stats& Interpreter::stats() const { return s_->stats; }

}  // namespace tn::interp
