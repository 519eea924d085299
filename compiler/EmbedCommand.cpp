// truenoc embed BUNDLE [--name NS] -o DIR: writes DIR/NS.cpp (the bundle bytes, 16-byte aligned,
// and the launch functions) and DIR/NS.hpp (one typed launch function per kernel that computes
// the grid from the kernel's launch rule); NS's '::' is '-' in the file names. The interim launch
// interface and the rule that renames kernels and parameters are in docs/specs.md.
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "compiler/Command.h"
#include "compiler/StdMacroNames.h"


namespace tn::cli {

namespace {

constexpr std::string_view kCppKeywords[] = {
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch", "char",
    "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "const", "consteval", "constexpr", "constinit",
    "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype", "default", "delete", "do", "double",
    "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto", "if",
    "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq", "nullptr", "operator", "or",
    "or_eq", "private", "protected", "public", "register", "reinterpret_cast", "requires", "return", "short", "signed",
    "sizeof", "static", "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local", "throw",
    "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual", "void", "volatile",
    "wchar_t", "while", "xor", "xor_eq"};

bool isKeyword(std::string_view n) {
  for (std::string_view k : kCppKeywords)
    if (n == k) return true;
  return false;
}

// Names the implementation reserves everywhere: a double underscore, or an underscore and a
// capital letter. A suffix cannot make them safe (`__builtin_va` + `_arg` is a builtin).
bool isImplementationReserved(std::string_view n) {
  return (n.size() > 1 && n[0] == '_' && n[1] >= 'A' && n[1] <= 'Z') || n.find("__") != std::string_view::npos;
}

// Kernels and parameters take the bundle's name unless it is a keyword, a standard macro or a
// name the generated code declares in the same scope; then it gets a suffix: `_` for a kernel,
// `_arg` for a parameter (docs/specs.md).
bool needsSuffix(std::string_view n) { return isKeyword(n) || isStdMacroName(n); }

// What the generated namespace declares besides the kernels' functions.
// `Kernels` and its members `load` and `bundle` (a kernel's method has its function's name).
bool isNamespaceMember(std::string_view n) {
  return n == "bundle_bytes" || n == "bundle_size" || n == "truenoc_detail" || n == "Kernels" || n == "load" || n == "bundle";
}

// What a launch function declares besides its parameters: its own parameters and `truenoc_` locals.
bool isFunctionLocal(std::string_view n) { return n == "launcher" || n == "stream" || n.starts_with("truenoc_"); }

// The C++ type of a pointer's elements: its element type when the bundle knows it, else void.
std::string elementType(const bundle::Param& p) {
  using S = bundle::ParamType::Scalar;
  if (!p.element) return "void";
  switch (*p.element) {
    case S::F32: return "float";
    case S::F64: return "double";
    case S::F16: return "truenoc::f16";
    case S::BF16: return "truenoc::bf16";
    case S::E4M3: return "truenoc::e4m3";
    case S::E5M2: return "truenoc::e5m2";
    default: break;
  }
  bundle::ParamType lane{*p.element};
  if (unsigned bytes = lane.integerBytes())
    return std::string(lane.isSignedInteger() ? "std::int" : "std::uint") + std::to_string(bytes * 8) + "_t";
  return "void";
}

// A tmap parameter: the runtime encodes it from the launch rule (truenort::Kernel::launch_raw),
// so launch functions neither take nor pass it.
bool filledByRuntime(const bundle::Param& p) { return p.type.scalar == bundle::ParamType::Scalar::TensorMap; }

// The C++ type a parameter is passed as; nullopt when none fits. Global and generic pointers are
// truenoc::embed::In<T> (read-only: from const T*) or Out<T> (from T*).
std::optional<std::string> cppType(const bundle::Param& p) {
  using S = bundle::ParamType::Scalar;
  using Space = bundle::ParamType::Space;
  const bundle::ParamType type = p.type;
  std::string scalar;
  if (type.isPointer()) {
    if (type.space == Space::Global || type.space == Space::Generic)
      return std::string(p.readOnly() ? "truenoc::embed::In<" : "truenoc::embed::Out<") + elementType(p) + ">";
    scalar = type.space == Space::Param ? "std::uint64_t" : "std::uint32_t";  // shared, local
  } else if (type.scalar == S::Pred) scalar = "bool";
  else if (type.scalar == S::F32) scalar = "float";
  else if (type.scalar == S::F64) scalar = "double";
  else if (type.scalar == S::F16) scalar = "truenoc::f16";
  else if (type.scalar == S::BF16) scalar = "truenoc::bf16";
  else if (bundle::ParamType lane{type.scalar}; unsigned bytes = lane.integerBytes())
    scalar = std::string(lane.isSignedInteger() ? "std::int" : "std::uint") + std::to_string(bytes * 8) + "_t";
  else return std::nullopt;
  if (type.lanes == 1) return scalar;
  if (scalar == "bool") return std::nullopt;
  return "truenoc::embed::Vec<" + scalar + ", " + std::to_string(type.lanes) + ">";
}

// `bytes` as C++ string literals of 64 bytes each, one to a line, indented: printable ASCII as
// itself but for `"`, `\` and `?` (no trigraphs), every other byte as an octal escape of up to
// three digits, three where an octal digit follows it (an escape ends after three).
void appendStringLiteral(std::string& out, std::string_view bytes) {
  constexpr size_t kPerLine = 64;
  for (size_t line = 0; line < bytes.size(); line += kPerLine) {
    out += "    \"";
    const size_t end = std::min(bytes.size(), line + kPerLine);
    for (size_t i = line; i < end; ++i) {
      const auto c = static_cast<unsigned char>(bytes[i]);
      if (c == '"' || c == '\\' || c == '?') {
        out += '\\';
        out += static_cast<char>(c);
      } else if (c >= 0x20 && c < 0x7f) {
        out += static_cast<char>(c);
      } else {
        const bool digitNext = i + 1 < end && bytes[i + 1] >= '0' && bytes[i + 1] <= '7';
        out += '\\';
        if (digitNext || c >= 64) out += static_cast<char>('0' + (c >> 6));
        if (digitNext || c >= 8) out += static_cast<char>('0' + ((c >> 3) & 7));
        out += static_cast<char>('0' + (c & 7));
      }
    }
    out += "\"\n";
  }
  if (bytes.empty()) out += "    \"\"\n";
}

const char* kInterface = R"TNC(#ifndef TRUENOC_EMBED_INTERFACE_V5
#define TRUENOC_EMBED_INTERFACE_V5
// The launch interface shared by every truenoc-generated header (docs/specs.md). C++17.
struct CUstream_st;  // CUstream (cuda.h, truenort) and cudaStream_t are all `CUstream_st*`

namespace truenoc {

// 16-bit float storage, layout-compatible with CUDA's __nv_bfloat16 and __half: the bits only.
struct alignas(2) bf16 {
  std::uint16_t bits;
};
struct alignas(2) f16 {
  std::uint16_t bits;
};
static_assert(sizeof(bf16) == 2 && sizeof(f16) == 2, "16-bit storage types");
// fp8 codes (OCP E4M3 and E5M2), layout-compatible with CUDA's __nv_fp8_e4m3 and __nv_fp8_e5m2:
// the bits only.
struct e4m3 {
  std::uint8_t bits;
};
struct e5m2 {
  std::uint8_t bits;
};
static_assert(sizeof(e4m3) == 1 && sizeof(e5m2) == 1, "fp8 storage types");

// float -> bf16 rounding to nearest even (NaN stays NaN), and back (exact).
inline bf16 to_bf16(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<std::uint16_t>((u >> 16) | 0x40u)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{static_cast<std::uint16_t>(u >> 16)};
}
inline float to_float(bf16 v) {
  std::uint32_t u = static_cast<std::uint32_t>(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

namespace embed {

// One kernel launch, described completely: the launcher loads `kernel` from the bundle bytes
// (it may cache per bundle pointer) and enqueues it on `stream` (a CUstream, or null).
struct Launch {
  const unsigned char* bundle;
  std::size_t bundle_size;
  const char* kernel;
  void* stream;
  std::uint32_t grid[3];
  std::uint32_t block[3];
  std::uint32_t dynamic_shared;
  void** args;  // args[i] points at argument i, as cuLaunchKernel's kernelParams, except that a
                // kernel's tmap parameters are left out: truenort's Kernel::launch_raw encodes them
  std::uint32_t num_args;
  // The kernel's launch rule differs by target (a template entry with mainloop = "auto"): grid,
  // block and dynamic_shared are 0, and the launcher takes them from the rule of the code it
  // selected (truenort's Kernel::launch_raw without geometry does).
  bool per_target_rule = false;
};

// Supplied by the caller: returns 0 on success. (With the runtime, Kernels launches itself.)
struct Launcher {
  int (*launch)(void* user, const Launch& launch);
  void* user;
};

inline constexpr int kInvalidLaunch = -1;  // the launch rule failed for these arguments
inline constexpr int kNoLauncher = -2;     // Launcher::launch is null
inline constexpr int kBufferTooSmall = -4;  // a pointer argument's known count is below its extent

// A vN.T kernel parameter.
template <class T, int N>
struct alignas(sizeof(T) * N) Vec {
  T lanes[N];
};

// How many elements a pointer argument has: a DeviceBuffer's size, or the count given with a
// pointer; a bare pointer's is unknown, and no extent check sees it.
inline constexpr std::size_t kUnknownCount = SIZE_MAX;

// A pointer the kernel only reads: from a `const T*` (any pointer when T is void), a pointer and
// its element count, or, with the runtime, a truenort::DeviceBuffer<T>.
template <class T>
class In {
 public:
  In(const T* p) : p_(p) {}
  In(const T* p, std::size_t count) : p_(p), count_(count) {}
  In(std::nullptr_t) : p_(nullptr) {}
#ifdef TRUENOC_HAVE_RUNTIME
  template <class U, class = std::enable_if_t<std::is_void_v<T> || std::is_same_v<U, T>>>
  In(const truenort::DeviceBuffer<U>& b)
      : p_(reinterpret_cast<const T*>(static_cast<std::uintptr_t>(b.ptr()))), count_(b.size()) {}
#endif
  const T* get() const { return p_; }
  std::size_t count() const { return count_; }

 private:
  const T* p_;
  std::size_t count_ = kUnknownCount;
};

// A pointer the kernel writes through: from a `T*`, a pointer and its element count, or, with the
// runtime, a non-const truenort::DeviceBuffer<T>.
template <class T>
class Out {
 public:
  Out(T* p) : p_(p) {}
  Out(T* p, std::size_t count) : p_(p), count_(count) {}
  Out(std::nullptr_t) : p_(nullptr) {}
#ifdef TRUENOC_HAVE_RUNTIME
  template <class U, class = std::enable_if_t<std::is_void_v<T> || std::is_same_v<U, T>>>
  Out(truenort::DeviceBuffer<U>& b)
      : p_(reinterpret_cast<T*>(static_cast<std::uintptr_t>(b.ptr()))), count_(b.size()) {}
#endif
  T* get() const { return p_; }
  std::size_t count() const { return count_; }

 private:
  T* p_;
  std::size_t count_ = kUnknownCount;
};

// The stream a launch goes to: null (the default stream), a CUstream or cudaStream_t, or, with
// the runtime, a truenort::Stream.
class StreamRef {
 public:
  StreamRef(std::nullptr_t = nullptr) {}
  StreamRef(::CUstream_st* s) : s_(s) {}
#ifdef TRUENOC_HAVE_RUNTIME
  StreamRef(const truenort::Stream& s) : s_(s.handle()) {}
#endif
  ::CUstream_st* get() const { return s_; }

 private:
  ::CUstream_st* s_ = nullptr;
};

// Checked unsigned 64-bit arithmetic for launch rules: overflow, a negative argument or
// intermediate, and division by zero clear `ok` (the launch is refused, never wrapped).
struct RuleEval {
  bool ok = true;
  template <class T>
  std::uint64_t arg(T v) {
    if constexpr (std::is_signed_v<T>) {
      if (v < 0) {
        ok = false;
        return 0;
      }
    }
    return static_cast<std::uint64_t>(v);
  }
  std::uint64_t add(std::uint64_t a, std::uint64_t b) {
    if (a > UINT64_MAX - b) ok = false;
    return a + b;
  }
  std::uint64_t sub(std::uint64_t a, std::uint64_t b) {
    if (b > a) ok = false;
    return a - b;
  }
  std::uint64_t mul(std::uint64_t a, std::uint64_t b) {
    if (a != 0 && b > UINT64_MAX / a) ok = false;
    return a * b;
  }
  std::uint64_t div(std::uint64_t a, std::uint64_t b) {
    if (b == 0) {
      ok = false;
      return 0;
    }
    return a / b;
  }
  std::uint64_t rem(std::uint64_t a, std::uint64_t b) {
    if (b == 0) {
      ok = false;
      return 0;
    }
    return a % b;
  }
  std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) {
    if (b == 0) {
      ok = false;
      return 0;
    }
    return a / b + (a % b != 0 ? 1 : 0);
  }
  std::uint64_t min(std::uint64_t a, std::uint64_t b) { return a < b ? a : b; }
  std::uint64_t max(std::uint64_t a, std::uint64_t b) { return a > b ? a : b; }
};

#ifdef TRUENOC_HAVE_RUNTIME
// How a generated Kernels object runs a launch function on its loaded bundle and turns the
// outcome into a Status that carries the message.
class RuntimeLaunch {
 public:
  explicit RuntimeLaunch(const truenort::Bundle& b) : bundle_(&b) {}
  Launcher launcher() { return {&RuntimeLaunch::run, this}; }
  truenort::Status finish(int rc, const char* kernel) {
    if (rc == kBufferTooSmall) return tooSmall(kernel, "", "", 0, 0);
    if (rc != kInvalidLaunch) return std::move(status_);
    truenort::Error e;
    e.code = truenort::Errc::InvalidArgument;
    e.call = "launch rule";
    e.kernel = kernel;
    e.message = "the kernel's launch rule fails for these arguments (a negative size, an overflow, a division by "
                "zero, or a grid or shared memory beyond the hardware's limits)";
    return e;
  }
  // A pointer argument with fewer elements than its extent (docs/bundle-format.md, "Extents").
  static truenort::Status tooSmall(const char* kernel, const char* param, const char* extent, std::uint64_t need,
                                   std::size_t have) {
    truenort::Error e;
    e.code = truenort::Errc::InvalidArgument;
    e.call = "extent check";
    e.kernel = kernel;
    e.message = *param ? "argument '" + std::string(param) + "' has " + std::to_string(have) +
                             " elements, the launch needs " + std::to_string(need) + " (" + extent + ")"
                       : std::string("a pointer argument has fewer elements than its extent");
    return e;
  }

 private:
  static int run(void* user, const Launch& l) {
    RuntimeLaunch* self = static_cast<RuntimeLaunch*>(user);
    truenort::Result<truenort::Kernel> k = self->bundle_->kernel(l.kernel);
    if (!k) {
      self->status_ = k.error();
      return -3;
    }
    const truenort::Stream stream = truenort::Stream::wrap(self->bundle_->context(), static_cast<truenort::CUstream>(l.stream));
    if (l.per_target_rule)
      self->status_ = k.value().launch_raw(stream, l.args, l.num_args);
    else
      self->status_ = k.value().launch_raw(stream, truenort::Dim3{l.grid[0], l.grid[1], l.grid[2]},
                                           truenort::Dim3{l.block[0], l.block[1], l.block[2]}, l.dynamic_shared, l.args,
                                           l.num_args);
    return self->status_.ok() ? 0 : -3;
  }
  const truenort::Bundle* bundle_;
  truenort::Status status_;
};
#endif

}  // namespace embed
}  // namespace truenoc
#endif  // TRUENOC_EMBED_INTERFACE_V5
)TNC";

struct Names {
  std::string function;             // C++ spelling of the kernel's name
  std::vector<std::string> params;  // C++ spelling of each parameter
};

// C++ parameter names: the bundle's, with the suffix "_arg" (then "_arg2", ...: parameters are
// positional, so any free name will do) when needsSuffix or isFunctionLocal.
std::vector<std::string> cppParamNames(const bundle::KernelInfo& k) {
  std::vector<std::string> names;
  std::set<std::string> used;
  for (const bundle::Param& p : k.params) used.insert(p.name);
  for (const bundle::Param& p : k.params) {
    std::string name = p.name;
    if (needsSuffix(name) || isFunctionLocal(name)) {
      name += "_arg";
      for (int i = 2; used.count(name); ++i) name = p.name + "_arg" + std::to_string(i);
      used.insert(name);
    }
    names.push_back(name);
  }
  return names;
}

// "vadd(a: ptr.global read f32, b: ptr.global read f32, c: ptr.global write f32, n: u32)", with
// each pointer's extent after its element type where the bundle has one ("x: ptr.global read f32 [n]")
std::string commentSignature(const bundle::KernelInfo& k) {
  std::string s = k.name + "(";
  for (size_t i = 0; i < k.params.size(); ++i) {
    const bundle::Param& p = k.params[i];
    s += (i ? ", " : "") + p.name + ": " + p.type.name();
    if (p.type.isPointer()) {
      s += " " + std::string(bundle::accessName(p.access));
      if (p.element) s += " " + bundle::elementName(*p.element);
      if (p.extent) s += " [" + p.extent->text() + "]";
    }
  }
  return s + ")";
}

std::string paramList(const bundle::KernelInfo& k, const Names& names) {
  std::string s;
  for (size_t i = 0; i < k.params.size(); ++i)
    if (!filledByRuntime(k.params[i])) s += ", " + *cppType(k.params[i]) + " " + names.params[i];
  return s;
}

std::string declaration(const bundle::KernelInfo& k, const Names& names) {
  return "int " + names.function + "(const truenoc::embed::Launcher& launcher, void* stream" + paramList(k, names) + ")";
}

// The Kernels method: `truenort::Status vadd(truenoc::embed::StreamRef stream, ...) const`.
std::string methodDeclaration(const bundle::KernelInfo& k, const Names& names, bool qualified) {
  return "truenort::Status " + std::string(qualified ? "Kernels::" : "") + names.function +
         "(truenoc::embed::StreamRef stream" + paramList(k, names) + ") const";
}

// The parameters whose extent a launch function checks: pointers the caller passes, with an
// extent and a typed In<T>/Out<T> (whose count is in elements of T).
std::vector<size_t> checkedExtents(const bundle::KernelInfo& k) {
  std::vector<size_t> out;
  for (size_t i = 0; i < k.params.size(); ++i) {
    const bundle::Param& p = k.params[i];
    if (filledByRuntime(p) || !p.extent) continue;
    const std::optional<std::string> t = cppType(p);
    if (t && (t->starts_with("truenoc::embed::In<") || t->starts_with("truenoc::embed::Out<")) &&
        t->find("<void>") == std::string::npos)
      out.push_back(i);
  }
  return out;
}

// Evaluates each checked extent into truenoc_need_<i> with the checked arithmetic of `truenoc_xv`.
std::string extentValues(const bundle::KernelInfo& k, const Names& names, const std::string& indent) {
  auto spell = [&](std::string_view param) {
    for (size_t i = 0; i < k.params.size(); ++i)
      if (k.params[i].name == param) return "truenoc_xv.arg(" + names.params[i] + ")";
    return std::string("0");  // unreachable: the reader checked every name against the signature
  };
  std::string s = indent + "truenoc::embed::RuleEval truenoc_xv;\n";
  for (size_t i : checkedExtents(k))
    s += indent + "const std::uint64_t truenoc_need_" + std::to_string(i) + " = " +
         k.params[i].extent->toCpp("truenoc_xv", spell) + ";\n";
  return s;
}

// `ns` qualifies the free function, which the method's own name hides.
std::string methodDefinition(const bundle::KernelInfo& k, const Names& names, const std::string& ns) {
  std::string s = methodDeclaration(k, names, true) + " {\n";
  // Pointer arguments of known count against their extents, with a message naming them (the
  // launch function checks them too, for callers of its own).
  if (const std::vector<size_t> checked = checkedExtents(k); !checked.empty()) {
    s += "  {\n" + extentValues(k, names, "    ");
    for (size_t i : checked)
      s += "    if (truenoc_xv.ok && " + names.params[i] + ".count() < truenoc_need_" + std::to_string(i) + ")\n" +
           "      return truenoc::embed::RuntimeLaunch::tooSmall(\"" + k.name + "\", \"" + k.params[i].name + "\", \"" +
           k.params[i].extent->text() + "\", truenoc_need_" + std::to_string(i) + ", " + names.params[i] + ".count());\n";
    s += "  }\n";
  }
  s += "  truenoc::embed::RuntimeLaunch truenoc_run(bundle_);\n";
  s += "  return truenoc_run.finish(::" + ns + "::" + names.function + "(truenoc_run.launcher(), stream.get()";
  for (size_t i = 0; i < k.params.size(); ++i)
    if (!filledByRuntime(k.params[i])) s += ", " + names.params[i];
  s += "), \"" + k.name + "\");\n}\n";
  return s;
}

std::string definition(const bundle::KernelInfo& k, const Names& names) {
  auto spell = [&](std::string_view param) {
    for (size_t i = 0; i < k.params.size(); ++i)
      if (k.params[i].name == param) return "truenoc_ev.arg(" + names.params[i] + ")";
    return std::string("0");  // unreachable: the reader checked every name against the signature
  };
  std::string s = declaration(k, names) + " {\n";
  // A kernel with variants has a launch rule per target: the launcher evaluates the one of the
  // code it selected (Launch::per_target_rule).
  const bool perTarget = !k.variants.empty();
  static constexpr const char* kDims[3] = {"x", "y", "z"};
  if (perTarget) {
    for (size_t i = 0; i < 3; ++i) s += "  const std::uint64_t truenoc_grid_" + std::string(kDims[i]) + " = 0;\n";
    s += "  const std::uint64_t truenoc_shared = 0;\n";
  } else {
    s += "  truenoc::embed::RuleEval truenoc_ev;\n";
    for (size_t i = 0; i < 3; ++i)
      s += "  const std::uint64_t truenoc_grid_" + std::string(kDims[i]) + " = " +
           (i < k.launch.grid.size() ? k.launch.grid[i].toCpp("truenoc_ev", spell) : std::string("UINT64_C(1)")) + ";\n";
    s += "  const std::uint64_t truenoc_shared = " + k.launch.dynamicShared.toCpp("truenoc_ev", spell) + ";\n";
    s += "  if (!truenoc_ev.ok || truenoc_grid_x > UINT64_C(" + std::to_string(bundle::kMaxGridX) + ") || truenoc_grid_y > UINT64_C(" +
         std::to_string(bundle::kMaxGridYZ) + ") ||\n      truenoc_grid_z > UINT64_C(" + std::to_string(bundle::kMaxGridYZ) +
         ") || truenoc_shared > UINT64_C(4294967295))\n    return truenoc::embed::kInvalidLaunch;\n";
    s += "  if (truenoc_grid_x == 0 || truenoc_grid_y == 0 || truenoc_grid_z == 0) return 0;  // nothing to launch\n";
  }
  // Pointer arguments of known count (a DeviceBuffer's, or given) must hold their extents.
  if (const std::vector<size_t> checked = checkedExtents(k); !checked.empty()) {
    s += extentValues(k, names, "  ");
    s += "  if (!truenoc_xv.ok) return truenoc::embed::kInvalidLaunch;\n";
    for (size_t i : checked)
      s += "  if (" + names.params[i] + ".count() < truenoc_need_" + std::to_string(i) +
           ") return truenoc::embed::kBufferTooSmall;\n";
  }
  s += "  if (!launcher.launch) return truenoc::embed::kNoLauncher;\n";
  // Pointer arguments go to the kernel as the raw pointers they wrap.
  std::vector<std::string> slots;
  for (size_t i = 0; i < k.params.size(); ++i) {
    if (filledByRuntime(k.params[i])) continue;
    const std::string t = *cppType(k.params[i]);
    if (t.starts_with("truenoc::embed::In<") || t.starts_with("truenoc::embed::Out<")) {
      s += "  auto truenoc_p" + std::to_string(i) + " = " + names.params[i] + ".get();\n";
      slots.push_back("&truenoc_p" + std::to_string(i));
    } else {
      slots.push_back("&" + names.params[i]);
    }
  }
  if (slots.empty()) {
    s += "  void** truenoc_args = nullptr;\n";
  } else {
    s += "  void* truenoc_args[] = {";
    for (size_t i = 0; i < slots.size(); ++i) s += (i ? ", " : "") + slots[i];
    s += "};\n";
  }
  uint32_t b[3] = {1, 1, 1};
  if (perTarget) b[0] = b[1] = b[2] = 0;
  for (size_t i = 0; i < k.launch.block.size() && !perTarget; ++i) b[i] = k.launch.block[i];
  s += "  const truenoc::embed::Launch truenoc_launch{truenoc_detail::kBundle, sizeof truenoc_detail::kBundle, \"" + k.name +
       "\", stream,\n";
  s += "      {static_cast<std::uint32_t>(truenoc_grid_x), static_cast<std::uint32_t>(truenoc_grid_y), "
       "static_cast<std::uint32_t>(truenoc_grid_z)},\n";
  s += "      {" + std::to_string(b[0]) + ", " + std::to_string(b[1]) + ", " + std::to_string(b[2]) +
       "}, static_cast<std::uint32_t>(truenoc_shared), truenoc_args, " + std::to_string(slots.size()) +
       (perTarget ? ", true" : "") + "};\n";
  s += "  return launcher.launch(launcher.user, truenoc_launch);\n}\n";
  return s;
}

// "a::b" -> {"a", "b"}; empty when a component is not an identifier.
std::vector<std::string> splitNamespace(const std::string& ns) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t sep = ns.find("::", start);
    std::string part = ns.substr(start, sep == std::string::npos ? std::string::npos : sep - start);
    if (!bundle::isIdentifier(part)) return {};
    parts.push_back(part);
    if (sep == std::string::npos) return parts;
    start = sep + 2;
  }
}

// Why `part` cannot name a namespace around generated code (which spells `std::` and
// `truenoc::embed::` unqualified); empty when it can.
// The outermost is in the global namespace, where a leading underscore is reserved too.
std::string namespaceProblem(const std::string& part, bool outermost) {
  auto is = [&](const char* what) { return "'" + part + "' " + what; };
  if (isKeyword(part)) return is("is a C++ keyword");
  if (isStdMacroName(part)) return is("is a macro of the standard headers");
  if (isImplementationReserved(part) || (outermost && part[0] == '_')) return is("is reserved to the C++ implementation");
  bool stdDigits = part.size() > 3 && part.starts_with("std") &&
                   part.find_first_not_of("0123456789", 3) == std::string::npos;
  if (part == "std" || part == "posix" || stdDigits) return is("is reserved to the standard library");
  if (part == "truenoc") return is("is the namespace of the launch interface");
  if (part == "truenort") return is("is the namespace of the truenoc runtime");
  return "";
}

constexpr const char* kReservedHint =
    "is reserved to the C++ implementation ('__', or '_' and a capital letter); rename it in the spec";

// The C++ names of every kernel and parameter; nullopt (after printing why) when a name is
// reserved to the implementation or two kernels would share a function name.
std::optional<std::vector<Names>> cppNames(const bundle::Manifest& m) {
  std::vector<Names> names;
  std::map<std::string, std::string> kernelOf;  // C++ function name -> the kernel's own name
  for (const bundle::KernelInfo& k : m.kernels) {
    if (isImplementationReserved(k.name)) {
      printErrorf("kernel name '%s' %s", k.name.c_str(), kReservedHint);
      return std::nullopt;
    }
    for (const bundle::Param& p : k.params)
      if (isImplementationReserved(p.name)) {
        printErrorf("kernel '%s': parameter name '%s' %s", k.name.c_str(), p.name.c_str(), kReservedHint);
        return std::nullopt;
      }
    Names n{k.name, cppParamNames(k)};
    if (needsSuffix(n.function) || isNamespaceMember(n.function)) n.function += "_";
    names.push_back(n);
  }
  for (size_t i = 0; i < names.size(); ++i) {
    auto [it, fresh] = kernelOf.emplace(names[i].function, m.kernels[i].name);
    if (!fresh) {
      printErrorf("kernels '%s' and '%s' would both be the C++ function '%s'; rename one in the spec",
                   it->second.c_str(), m.kernels[i].name.c_str(), it->first.c_str());
      return std::nullopt;
    }
  }
  return names;
}

int runEmbed(const std::string& input, std::string ns, const std::string& outDir) {
  if (outDir == "-") {
    printErrorf("embed writes two files, NAME.hpp and NAME.cpp: -o needs a folder, not '-' (standard output)");
    return kUsageError;
  }
  std::string bytes;
  auto r = openBundle(input, bytes);
  if (!r) return kInputError;
  const bundle::Manifest& m = r->manifest();
  bool fromBundle = ns.empty();
  if (fromBundle) ns = m.name;
  std::vector<std::string> parts = splitNamespace(ns);
  if (parts.empty()) {
    printErrorf("--name '%s' is not a C++ namespace name (identifiers joined by '::')", ns.c_str());
    return kUsageError;
  }
  for (const std::string& part : parts)
    if (std::string problem = namespaceProblem(part, &part == &parts.front()); !problem.empty()) {
      if (!fromBundle) {
        printErrorf("--name '%s' cannot be a C++ namespace: %s", ns.c_str(), problem.c_str());
        return kUsageError;
      }
      printErrorf("the bundle's name '%s' cannot be a C++ namespace: %s; pass --name", ns.c_str(),
                   problem.c_str());
      return kInputError;
    }
  for (const bundle::KernelInfo& k : m.kernels)
    for (const bundle::Param& p : k.params)
      if (!filledByRuntime(p) && !cppType(p)) {
        printErrorf("kernel '%s': parameter '%s' of type '%s' has no C++ type", k.name.c_str(), p.name.c_str(),
                     p.type.name().c_str());
        return kInputError;
      }
  std::optional<std::vector<Names>> names = cppNames(m);
  if (!names) return kInputError;

  // Components are identifiers, so '-' keeps distinct paths apart: a::b is a-b.*, a_b is a_b.*.
  std::string base;
  for (const std::string& p : parts) base += (base.empty() ? "" : "-") + p;
  std::string nsOpen, nsClose;
  for (const std::string& p : parts) nsOpen += "namespace " + p + " {\n";
  nsClose = "}  // namespace " + ns + "\n";
  for (size_t i = 1; i < parts.size(); ++i) nsClose = "}\n" + nsClose;
  std::string banner = "// Generated by truenoc " TRUENOC_VERSION " (truenoc embed) from bundle '" + m.name + "'. Do not edit.\n";

  std::string hpp = banner;
  hpp += "// With the runtime (TRUENOC_HAVE_RUNTIME, set by truenoc_add_bundle): Kernels::load(ctx) loads\n"
         "// the bundle once, and each of its methods launches one kernel on a stream and returns a\n"
         "// truenort::Status that carries the error's message. Pointers are truenoc::embed::In<T> (the\n"
         "// kernel only reads them: const T* or const DeviceBuffer<T>&) or Out<T> (T* or DeviceBuffer<T>&).\n"
         "// The free launch functions take a caller's Launcher instead and return 0 on success,\n"
         "// truenoc::embed::kInvalidLaunch when the launch rule fails for the arguments, or the\n"
         "// launcher's own error code. A grid with a zero dimension launches nothing and succeeds.\n";
  hpp += "#pragma once\n\n#include <cstddef>\n#include <cstdint>\n#include <cstring>\n#include <type_traits>\n\n";
  hpp += "#ifdef TRUENOC_HAVE_RUNTIME\n#include <truenort/truenort.h>\n#endif\n\n";
  hpp += kInterface;
  hpp += "\n" + nsOpen + "\n";
  hpp += "// The bundle's bytes (" + std::to_string(bytes.size()) + ", 16-byte aligned), for loading it directly.\n";
  hpp += "const unsigned char* bundle_bytes();\nstd::size_t bundle_size();\n";
  for (size_t i = 0; i < m.kernels.size(); ++i) {
    const bundle::KernelInfo& k = m.kernels[i];
    // A kernel with variants: the rule of each target's code (the launcher takes the selected one's).
    auto on = [&](uint64_t mask) {
      if (k.variants.empty()) return std::string();
      std::string s;
      for (const std::string& name : m.targetNames(mask)) s += (s.empty() ? "on " : ", ") + name;
      return s + ": ";
    };
    hpp += "\n// " + commentSignature(k) + "\n// " + on(k.ownTargets()) + bundle::describe(k.launch) + "\n";
    for (const bundle::Variant& v : k.variants) hpp += "// " + on(v.targets) + bundle::describe(v.launch) + "\n";
    hpp += declaration(k, (*names)[i]) + ";\n";
  }
  hpp += "\n#ifdef TRUENOC_HAVE_RUNTIME\n";
  hpp += "// The bundle loaded for one context (code selected for its device), one method per kernel.\n";
  hpp += "class Kernels {\n public:\n";
  hpp += "  static truenort::Result<Kernels> load(const truenort::Context& ctx, truenort::LoadOptions opts = {});\n";
  hpp += "  const truenort::Bundle& bundle() const { return bundle_; }\n";
  for (size_t i = 0; i < m.kernels.size(); ++i) hpp += "  " + methodDeclaration(m.kernels[i], (*names)[i], false) + ";\n";
  hpp += "\n private:\n  explicit Kernels(truenort::Bundle b) : bundle_(std::move(b)) {}\n  truenort::Bundle bundle_;\n};\n";
  hpp += "#endif  // TRUENOC_HAVE_RUNTIME\n";
  hpp += "\n" + nsClose;

  std::string cpp = banner;
  cpp += "#include \"" + base + ".hpp\"\n\n" + nsOpen + "\nnamespace truenoc_detail {\nnamespace {\n\n";
  // A string literal, not a list of byte constants: compilers read it over ten times faster
  // (the bytes of a 6.4 MB bundle: 0.4 s against 7.1 s with g++ -O2). Its terminating NUL is not
  // the bundle's.
  cpp += "constexpr std::size_t kBundleSize = " + std::to_string(bytes.size()) + ";\n";
  cpp += "#if defined(__GNUC__)\n#pragma GCC diagnostic push\n"
         "#pragma GCC diagnostic ignored \"-Woverlength-strings\"  // longer than C++'s 65536 minimum\n#endif\n";
  cpp += "alignas(16) const unsigned char kBundle[kBundleSize + 1] =\n";
  appendStringLiteral(cpp, bytes);
  cpp += ";\n#if defined(__GNUC__)\n#pragma GCC diagnostic pop\n#endif\n";
  cpp += "\n}  // namespace\n}  // namespace truenoc_detail\n\n";
  cpp += "const unsigned char* bundle_bytes() { return truenoc_detail::kBundle; }\n"
         "std::size_t bundle_size() { return truenoc_detail::kBundleSize; }\n";
  for (size_t i = 0; i < m.kernels.size(); ++i) cpp += "\n" + definition(m.kernels[i], (*names)[i]);
  cpp += "\n#ifdef TRUENOC_HAVE_RUNTIME\n";
  cpp += "truenort::Result<Kernels> Kernels::load(const truenort::Context& ctx, truenort::LoadOptions opts) {\n"
         "  truenort::Result<truenort::Bundle> b =\n"
         "      truenort::Bundle::load(ctx, truenort::Span<const std::uint8_t>(truenoc_detail::kBundle, truenoc_detail::kBundleSize), opts);\n"
         "  if (!b) return b.error();\n"
         "  return Kernels(std::move(b.value()));\n}\n";
  for (size_t i = 0; i < m.kernels.size(); ++i) cpp += "\n" + methodDefinition(m.kernels[i], (*names)[i], ns);
  cpp += "#endif  // TRUENOC_HAVE_RUNTIME\n";
  cpp += "\n" + nsClose;

  std::error_code ec;
  std::filesystem::create_directories(outDir, ec);
  if (ec) {
    printErrorf("cannot create '%s': %s", outDir.c_str(), ec.message().c_str());
    return kInputError;
  }
  std::string dir = outDir.empty() ? std::string(".") : outDir;
  const io::OutputFile outputs[] = {{dir + "/" + base + ".hpp", "-o", hpp}, {dir + "/" + base + ".cpp", "-o", cpp}};
  const std::string inputs[] = {input};
  return writeOutputs(outputs, inputs) ? kOk : kInputError;
}

}  // namespace

Command embedCommand() {
  return {"embed", "Generate C++ (bundle bytes + typed launch functions) from a .tnb bundle", [](Options& cli) {
            struct Opts {
              std::string input, name, outDir;
            };
            auto o = std::make_shared<Opts>();
            cli.option("BUNDLE", o->input, "Bundle file (.tnb), or - for stdin").required();
            cli.option("--name", o->name, "C++ namespace and file name (default: the bundle's name); a::b nests");
            cli.option("-o,--output", o->outDir, "Output folder for NAME.hpp and NAME.cpp").required();
            return std::function<int()>([o] { return runEmbed(o->input, o->name, o->outDir); });
          }};
}

}  // namespace tn::cli
