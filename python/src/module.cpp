// truenort._truenort: the runtime (libtruenort) for Python. Loads .tnb bundles on a device's
// primary context (the one PyTorch, CuPy and JAX use), describes their kernels, and launches
// them on tensors given through DLPack (`__dlpack__`) or `__cuda_array_interface__`, checking
// every argument against the kernel's signature before the driver sees anything. The Python
// layer (truenort/__init__.py) picks the framework's current stream. Docs: docs/python.md.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/bundle/Bundle.h"
#include "truenort/truenort.h"

namespace py = pybind11;

namespace {

// A runtime error (truenort::Error::describe()), raised as truenort.Error.
struct RuntimeFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(const truenort::Error& e) { throw RuntimeFailure(e.describe()); }

// One context per device ordinal, created on first use and kept for the process (the primary
// context is shared with the frameworks; releasing it at interpreter exit gains nothing).
const truenort::Context& contextFor(int device) {
  static std::mutex mu;
  static auto* contexts = new std::map<int, std::unique_ptr<truenort::Context>>();
  std::lock_guard lock(mu);
  auto it = contexts->find(device);
  if (it != contexts->end()) return *it->second;
  truenort::Result<truenort::Context> ctx = truenort::Context::create(device);
  if (!ctx) fail(ctx.error());
  return *contexts->emplace(device, std::make_unique<truenort::Context>(std::move(ctx.value()))).first->second;
}

// ---- DLPack (the subset a consumer reads; layout of dlpack.h v0.8) ------------------------------
struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
constexpr int32_t kDLCUDA = 2, kDLCUDAManaged = 13;

// What a tensor argument is, from either protocol.
struct Tensor {
  uint64_t ptr = 0;
  std::string dtype;  // "float32", "bfloat16", ...; "" when the protocol cannot say
  std::vector<int64_t> shape;
  bool contiguous = true;
  bool readonly = false;
  std::optional<int> device;  // CUDA ordinal when the protocol says (DLPack)
  std::string protocol;
  // DLPack: the consumed tensor, released (deleter) after the launch is enqueued.
  std::unique_ptr<DLManagedTensor, void (*)(DLManagedTensor*)> managed{nullptr, [](DLManagedTensor* t) {
                                                                           if (t && t->deleter) t->deleter(t);
                                                                         }};
};

std::string dlpackDtype(DLDataType t) {
  if (t.lanes != 1) return "";
  std::string bits = std::to_string(t.bits);
  switch (t.code) {
    case 0: return "int" + bits;
    case 1: return "uint" + bits;
    case 2: return "float" + bits;
    case 4: return t.bits == 16 ? "bfloat16" : "";
    case 6: return "bool";
    case 10: return t.bits == 8 ? "float8_e4m3fn" : "";  // kDLFloat8_e4m3fn (DLPack 1.1)
    case 12: return t.bits == 8 ? "float8_e5m2" : "";    // kDLFloat8_e5m2
    default: return "";
  }
}

// numpy-style typestr of __cuda_array_interface__ ("<f4") as a dtype name.
std::string typestrDtype(const std::string& ts) {
  if (ts.size() < 3) return "";
  std::string bytes = ts.substr(2);
  int bits = 0;
  try {
    bits = std::stoi(bytes) * 8;
  } catch (...) {
    return "";
  }
  switch (ts[1]) {
    case 'f': return "float" + std::to_string(bits);
    case 'i': return "int" + std::to_string(bits);
    case 'u': return "uint" + std::to_string(bits);
    case 'b': return "bool";
    default: return "";
  }
}

bool isContiguous(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, int64_t itemUnit) {
  int64_t expect = itemUnit;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

// The tensor behind `obj`; `stream` is the launch stream (for DLPack's synchronisation).
// Raises TypeError (no protocol) or ValueError (unusable tensor), naming the parameter.
Tensor tensorOf(const py::handle& obj, uint64_t stream, const std::string& what) {
  Tensor t;
  if (py::hasattr(obj, "__dlpack__")) {
    // DLPack forbids 0 for CUDA: the legacy default stream is 1.
    py::object cap = obj.attr("__dlpack__")(py::arg("stream") = stream == 0 ? 1 : static_cast<int64_t>(stream));
    PyObject* c = cap.ptr();
    if (!PyCapsule_IsValid(c, "dltensor")) throw py::value_error(what + ": __dlpack__ did not return a DLPack capsule");
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, "dltensor"));
    PyCapsule_SetName(c, "used_dltensor");
    t.managed.reset(m);
    const DLTensor& d = m->dl_tensor;
    t.protocol = "DLPack";
    if (d.device.device_type != kDLCUDA && d.device.device_type != kDLCUDAManaged)
      throw py::value_error(what + ": the tensor is not in CUDA device memory (DLPack device type " +
                            std::to_string(d.device.device_type) + ")");
    t.device = d.device.device_id;
    t.ptr = reinterpret_cast<uint64_t>(d.data) + d.byte_offset;
    t.dtype = dlpackDtype(d.dtype);
    t.shape.assign(d.shape, d.shape + d.ndim);
    if (d.strides) t.contiguous = isContiguous(t.shape, std::vector<int64_t>(d.strides, d.strides + d.ndim), 1);
    return t;
  }
  if (py::hasattr(obj, "__cuda_array_interface__")) {
    py::dict cai = obj.attr("__cuda_array_interface__");
    t.protocol = "__cuda_array_interface__";
    py::tuple data = cai["data"];
    t.ptr = data[0].cast<uint64_t>();
    t.readonly = data[1].cast<bool>();
    // The truenort.DeviceArray of this package also names dtypes numpy's typestr cannot (bfloat16).
    t.dtype = cai.contains("truenort_dtype") ? cai["truenort_dtype"].cast<std::string>()
                                             : typestrDtype(cai["typestr"].cast<std::string>());
    for (py::handle d : cai["shape"].cast<py::tuple>()) t.shape.push_back(d.cast<int64_t>());
    if (cai.contains("strides") && !cai["strides"].is_none()) {
      std::vector<int64_t> strides;
      for (py::handle d : cai["strides"].cast<py::tuple>()) strides.push_back(d.cast<int64_t>());
      std::string ts = cai["typestr"].cast<std::string>();
      int64_t item = ts.size() > 2 ? std::atoll(ts.c_str() + 2) : 1;
      t.contiguous = isContiguous(t.shape, strides, item);
    }
    return t;
  }
  throw py::type_error(what + ": expected a CUDA tensor (an object with __dlpack__ or __cuda_array_interface__), got " +
                       std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
}

// The dtype name a pointer's element type takes ("" when the bundle does not know it).
std::string dtypeOf(std::optional<tn::bundle::ParamType::Scalar> e) {
  using S = tn::bundle::ParamType::Scalar;
  if (!e) return "";
  switch (*e) {
    case S::F16: return "float16";
    case S::BF16: return "bfloat16";
    case S::F32: return "float32";
    case S::F64: return "float64";
    case S::S8: return "int8";
    case S::S16: return "int16";
    case S::S32: return "int32";
    case S::S64: return "int64";
    case S::U8: case S::B8: return "uint8";
    case S::U16: case S::B16: return "uint16";
    case S::U32: case S::B32: return "uint32";
    case S::U64: case S::B64: return "uint64";
    case S::E4M3: return "float8_e4m3fn";
    case S::E5M2: return "float8_e5m2";
    default: return "";
  }
}

// Whether a tensor of dtype `have` holds the elements a kernel wants (dtypeOf: `want`): the same
// dtype, or for fp8 codes also their uint8 view (a float8 tensor's .view(torch.uint8), the only
// form of one that __cuda_array_interface__ and older DLPack exporters can describe).
bool dtypeHolds(const std::string& want, const std::string& have) {
  return want.empty() || have == want || (want.starts_with("float8") && have == "uint8");
}

uint16_t floatToHalfBits(float v, bool bf16) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  if (bf16) {
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
  }
  // f16, round to nearest even
  uint32_t sign = (u >> 16) & 0x8000u, exp = (u >> 23) & 0xffu, man = u & 0x7fffffu;
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (man ? 0x200u : 0));
  int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    man |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = man >> shift, rest = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rest > mid || (rest == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(e) << 10) | (man >> 13), rest = man & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1))) ++half;
  return static_cast<uint16_t>(sign | half);
}

// A parameter as Python shows it: {"name", "type", "access", "element"}.
py::dict paramDict(const tn::bundle::Param& p) {
  py::dict d;
  d["name"] = p.name;
  d["type"] = p.type.name();
  if (p.type.isPointer()) {
    d["access"] = std::string(tn::bundle::accessName(p.access));
    d["element"] = p.element ? py::object(py::str(tn::bundle::elementName(*p.element))) : py::object(py::none());
    d["extent"] = p.extent ? py::object(py::str(p.extent->text())) : py::object(py::none());
  }
  return d;
}

struct PyKernel {
  std::shared_ptr<truenort::Bundle> owner;
  truenort::Kernel kernel;
  int device;

  // The launch rule of the code this device runs (a kernel with variants has one per target).
  const tn::bundle::LaunchRule& rule() const { return kernel.launch_rule(); }

  // The parameters a call passes: all but the tmap ones, which the runtime fills from the
  // launch rule (parallel to kernel.signature()).
  std::vector<tn::bundle::Param> params() const {
    std::vector<tn::bundle::Param> out;
    for (const tn::bundle::Param& p : kernel.params())
      if (p.type.scalar != tn::bundle::ParamType::Scalar::TensorMap) out.push_back(p);
    return out;
  }

  std::string signatureText() const {
    std::string s = kernel.name() + "(";
    const auto ps = params();
    for (size_t i = 0; i < ps.size(); ++i) {
      s += (i ? ", " : "") + ps[i].name + ": " + ps[i].type.name();
      if (ps[i].type.isPointer()) {
        s += " " + std::string(tn::bundle::accessName(ps[i].access));
        if (ps[i].element) s += " " + tn::bundle::elementName(*ps[i].element);
      }
    }
    return s + ")";
  }

  // Checks every argument against the signature, then launches on `stream` (a CUstream handle).
  // Every tensor holds the elements its parameter's extent says for these arguments (tensors of
  // pointers with an extent have the element's dtype, checked before).
  void checkExtents(const std::vector<tn::bundle::Param>& params, const std::vector<truenort::Arg>& list,
                    const std::vector<Tensor>& held) const {
    std::vector<const void*> values(list.size());
    for (size_t i = 0; i < list.size(); ++i) values[i] = list[i].address();
    for (size_t i = 0, t = 0; i < params.size(); ++i) {
      const tn::bundle::Param& p = params[i];
      if (kernel.signature()[i].kind != truenort::Arg::Kind::Pointer) continue;
      const Tensor& tensor = held[t++];
      auto need = tn::bundle::extentBytes(p, params, values.data());
      if (!need) throw py::value_error(kernel.name() + "(): " + need.error().message);
      if (!*need) continue;
      uint64_t count = 1;
      for (int64_t d : tensor.shape) count *= static_cast<uint64_t>(d);
      const uint64_t want = **need / tn::bundle::scalarBytes(*p.element);
      if (count < want)
        throw py::value_error(kernel.name() + "(): argument " + std::to_string(i + 1) + " ('" + p.name + "', " +
                              p.type.name() + "): the launch needs " + std::to_string(want) + " elements (" +
                              p.extent->text() + "), the tensor has " + std::to_string(count));
    }
  }

  void launch(const py::args& args, uint64_t stream) const {
    const auto params = this->params();
    const std::vector<truenort::ParamInfo>& sig = kernel.signature();
    if (args.size() != params.size())
      throw py::type_error(kernel.name() + "() takes " + std::to_string(params.size()) + " arguments (" +
                           std::to_string(args.size()) + " given): " + signatureText());
    std::vector<truenort::Arg> list;
    std::vector<Tensor> held;  // DLPack tensors stay consumed until the launch is enqueued
    held.reserve(params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      const tn::bundle::Param& p = params[i];
      const std::string what = kernel.name() + "(): argument " + std::to_string(i + 1) + " ('" + p.name + "', " +
                               p.type.name() + ")";
      py::handle a = args[i];
      using K = truenort::Arg::Kind;
      K kind = sig[i].kind;
      if (kind == K::Pointer) {
        Tensor t = tensorOf(a, stream, what);
        if (t.device && *t.device != device)
          throw py::value_error(what + ": the tensor is on CUDA device " + std::to_string(*t.device) +
                                ", the bundle was loaded for device " + std::to_string(device));
        const std::string want = dtypeOf(p.element);
        if (!dtypeHolds(want, t.dtype))
          throw py::value_error(what + ": the kernel's elements are " + want +
                                (want.starts_with("float8") ? " (or their uint8 view)" : "") + ", the tensor is " +
                                (t.dtype.empty() ? std::string("of an unknown dtype") : t.dtype));
        if (!t.contiguous) throw py::value_error(what + ": the tensor is not contiguous (row-major, no gaps); pass .contiguous()");
        if (t.readonly && !p.readOnly())
          throw py::value_error(what + ": the kernel writes through this pointer, the tensor is read-only");
        if (t.ptr == 0) {
          bool empty = false;
          for (int64_t d : t.shape) empty = empty || d == 0;
          if (!empty) throw py::value_error(what + ": the tensor's data pointer is null");
        }
        list.push_back(truenort::Arg{K::Pointer, t.ptr});
        held.push_back(std::move(t));
        continue;
      }
      if (py::isinstance<py::float_>(a) || (py::isinstance<py::int_>(a) && !py::isinstance<py::bool_>(a))) {
        // fine: checked per kind below
      } else if (!py::isinstance<py::bool_>(a)) {
        throw py::type_error(what + ": expected a Python number, got " +
                             std::string(py::str(py::type::handle_of(a).attr("__name__"))));
      }
      switch (kind) {
        case K::F32: list.push_back(truenort::arg(a.cast<float>())); break;
        case K::F64: list.push_back(truenort::arg(a.cast<double>())); break;
        case K::F16: list.push_back(truenort::Arg{K::F16, floatToHalfBits(a.cast<float>(), false)}); break;
        case K::BF16: list.push_back(truenort::Arg{K::BF16, floatToHalfBits(a.cast<float>(), true)}); break;
        default: {
          if (py::isinstance<py::float_>(a)) throw py::type_error(what + ": expected an int, got a float");
          bool isSigned = kind == K::S8 || kind == K::S16 || kind == K::S32 || kind == K::S64;
          unsigned bits = (kind == K::U8 || kind == K::S8) ? 8 : (kind == K::U16 || kind == K::S16) ? 16
                          : (kind == K::U32 || kind == K::S32) ? 32 : 64;
          py::int_ v = py::reinterpret_borrow<py::int_>(a);
          int overflow = 0;
          long long s = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
          bool fits;
          uint64_t bitsValue;
          if (overflow > 0) {
            unsigned long long u = PyLong_AsUnsignedLongLong(v.ptr());
            if (PyErr_Occurred()) {
              PyErr_Clear();
              fits = false;
              u = 0;
            } else {
              fits = !isSigned && bits == 64;
            }
            bitsValue = u;
          } else if (overflow < 0) {
            fits = false;
            bitsValue = 0;
          } else if (isSigned) {
            long long lo = bits == 64 ? std::numeric_limits<long long>::min() : -(1LL << (bits - 1));
            long long hi = bits == 64 ? std::numeric_limits<long long>::max() : (1LL << (bits - 1)) - 1;
            fits = s >= lo && s <= hi;
            bitsValue = static_cast<uint64_t>(s) & (bits == 64 ? ~0ull : ((1ull << bits) - 1));
          } else {
            fits = s >= 0 && (bits == 64 || static_cast<unsigned long long>(s) < (1ull << bits));
            bitsValue = static_cast<uint64_t>(s);
          }
          if (!fits)
            throw py::value_error(what + ": " + std::string(py::str(a)) + " does not fit " + p.type.name());
          list.push_back(truenort::Arg{kind, bitsValue});
        }
      }
    }
    checkExtents(params, list, held);
    const truenort::Context& ctx = contextFor(device);
    truenort::Status st = kernel.launch_args(truenort::Stream::wrap(ctx, reinterpret_cast<truenort::CUstream>(stream)),
                                             truenort::Span<const truenort::Arg>(list.data(), list.size()));
    if (!st) fail(st.error());
  }
};

struct PyBundle {
  std::shared_ptr<truenort::Bundle> bundle;
  int device = 0;

  PyKernel kernel(const std::string& k) const {
    truenort::Result<truenort::Kernel> r = bundle->kernel(k);
    if (!r) {
      if (r.error().code == truenort::Errc::KernelNotFound) throw py::key_error(r.error().message);
      fail(r.error());
    }
    return PyKernel{bundle, r.value(), device};
  }
};

// A block of device memory with __cuda_array_interface__, for programs (and tests) that have no
// framework: made from host bytes or empty, copied back with to_bytes().
struct DeviceArray {
  std::shared_ptr<truenort::DeviceMemory> mem;
  std::vector<int64_t> shape;
  std::string dtype;
  bool readonly = false;
  int device = 0;
};

size_t itemSize(const std::string& dtype) {
  static const std::map<std::string, size_t> sizes = {
      {"float32", 4}, {"float16", 2}, {"bfloat16", 2}, {"float64", 8}, {"int8", 1},  {"uint8", 1},  {"int16", 2},
      {"uint16", 2},  {"int32", 4},   {"uint32", 4},   {"int64", 8},   {"uint64", 8}, {"bool", 1},
      {"float8_e4m3fn", 1}, {"float8_e5m2", 1}};
  auto it = sizes.find(dtype);
  if (it == sizes.end()) throw py::value_error("unknown dtype '" + dtype + "'");
  return it->second;
}

std::string typestrOf(const std::string& dtype) {
  size_t size = itemSize(dtype);
  if (dtype == "bfloat16") return "<V2";
  if (dtype.starts_with("float8")) return "|V1";
  if (dtype == "bool") return "|b1";
  char kind = dtype[0] == 'f' ? 'f' : dtype[0] == 'i' ? 'i' : 'u';
  return std::string(size == 1 ? "|" : "<") + kind + std::to_string(size);
}

DeviceArray makeArray(std::vector<int64_t> shape, const std::string& dtype, int device, const void* src, size_t srcBytes,
                      bool readonly) {
  size_t count = 1;
  for (int64_t d : shape) {
    if (d < 0) throw py::value_error("negative dimension in shape");
    count *= static_cast<size_t>(d);
  }
  size_t bytes = count * itemSize(dtype);
  if (src && srcBytes != bytes)
    throw py::value_error("the data has " + std::to_string(srcBytes) + " bytes, the shape and dtype need " +
                          std::to_string(bytes));
  const truenort::Context& ctx = contextFor(device);
  truenort::Result<truenort::DeviceMemory> m = truenort::DeviceMemory::allocate(ctx, bytes == 0 ? 1 : bytes);
  if (!m) fail(m.error());
  auto mem = std::make_shared<truenort::DeviceMemory>(std::move(m.value()));
  if (src && bytes) {
    if (truenort::Status st = mem->upload(src, bytes); !st) fail(st.error());
  } else if (bytes) {
    std::vector<unsigned char> zeros(bytes, 0);
    if (truenort::Status st = mem->upload(zeros.data(), bytes); !st) fail(st.error());
  }
  return DeviceArray{mem, std::move(shape), dtype, readonly, device};
}

}  // namespace

PYBIND11_MODULE(_truenort, m) {
  m.doc() = "truenoc's runtime: load .tnb bundles and launch their kernels on CUDA tensors (docs/python.md)";
  static py::exception<RuntimeFailure> error(m, "Error", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const RuntimeFailure& e) {
      py::set_error(error, e.what());
    }
  });

  m.def("use_driver", [](const std::string& choice) {
    if (truenort::Status st = truenort::use_driver(choice); !st) fail(st.error());
  }, py::arg("choice"), "Choose the CUDA driver before the first device use: '' (libcuda.so.1), 'sim' or a path.");
  m.def("set_extent_checks", &truenort::set_extent_checks, py::arg("on"),
        "Check every launch's pointer arguments against their allocations (docs/runtime.md, extent checks).");
  m.def("extent_checks", &truenort::extent_checks, "Whether the runtime's extent checks are on.");
  m.def("device_name", [](int device) { return contextFor(device).name(); }, py::arg("device") = 0);
  m.def("simulated", [](int device) { return contextFor(device).simulated(); }, py::arg("device") = 0);
  m.def("synchronize", [](int device) {
    if (truenort::Status st = contextFor(device).synchronize(); !st) fail(st.error());
  }, py::arg("device") = 0);

  py::class_<PyKernel>(m, "Kernel")
      .def_property_readonly("name", [](const PyKernel& k) { return k.kernel.name(); })
      .def_property_readonly("params", [](const PyKernel& k) {
        py::list l;
        for (const tn::bundle::Param& p : k.params()) l.append(paramDict(p));
        return l;
      })
      .def_property_readonly("signature", &PyKernel::signatureText)
      .def_property_readonly("launch_rule", [](const PyKernel& k) {
        py::dict d;
        d["block"] = k.rule().block;
        std::vector<std::string> grid;
        for (const auto& g : k.rule().grid) grid.push_back(g.text());
        d["grid"] = grid;
        d["dynamic_shared"] = k.rule().dynamicShared.text();
        if (!k.rule().tensorMaps.empty()) {  // filled by the runtime: never passed
          std::vector<std::string> maps;
          for (const auto& t : k.rule().tensorMaps) maps.push_back(tn::bundle::describe(t));
          d["tensor_maps"] = maps;
        }
        return d;
      })
      .def_property_readonly("target", [](const PyKernel& k) { return k.kernel.target().name(); })
      .def("_launch", [](const PyKernel& k, uint64_t stream, const py::args& args) { k.launch(args, stream); },
           py::arg("stream"))
      .def("__repr__", [](const PyKernel& k) { return "<truenort.Kernel " + k.signatureText() + ">"; });

  py::class_<PyBundle>(m, "Bundle")
      .def_static("load", [](const std::string& path, int device, bool allowJit) {
        const truenort::Context& ctx = contextFor(device);
        truenort::LoadOptions opts;
        opts.allow_jit = allowJit;
        truenort::Result<truenort::Bundle> b = truenort::Bundle::load_file(ctx, path, opts);
        if (!b) fail(b.error());
        return PyBundle{std::make_shared<truenort::Bundle>(std::move(b.value())), device};
      }, py::arg("path"), py::arg("device") = 0, py::arg("allow_jit") = false)
      .def_property_readonly("kernels", [](const PyBundle& b) { return b.bundle->kernel_names(); })
      .def_property_readonly("device", [](const PyBundle& b) { return b.device; })
      .def("kernel", &PyBundle::kernel, py::arg("name"));

  py::class_<DeviceArray>(m, "DeviceArray")
      .def_static("from_bytes", [](py::buffer data, std::vector<int64_t> shape, const std::string& dtype, int device,
                                   bool readonly) {
        py::buffer_info info = data.request();
        size_t bytes = static_cast<size_t>(info.size) * static_cast<size_t>(info.itemsize);
        return makeArray(std::move(shape), dtype, device, info.ptr, bytes, readonly);
      }, py::arg("data"), py::arg("shape"), py::arg("dtype"), py::arg("device") = 0, py::arg("readonly") = false)
      .def_static("zeros", [](std::vector<int64_t> shape, const std::string& dtype, int device) {
        return makeArray(std::move(shape), dtype, device, nullptr, 0, false);
      }, py::arg("shape"), py::arg("dtype"), py::arg("device") = 0)
      .def_property_readonly("shape", [](const DeviceArray& a) { return py::tuple(py::cast(a.shape)); })
      .def_property_readonly("dtype", [](const DeviceArray& a) { return a.dtype; })
      .def("to_bytes", [](const DeviceArray& a) {
        size_t count = 1;
        for (int64_t d : a.shape) count *= static_cast<size_t>(d);
        std::string out(count * itemSize(a.dtype), '\0');
        if (!out.empty()) {
          if (truenort::Status st = contextFor(a.device).synchronize(); !st) fail(st.error());
          if (truenort::Status st = a.mem->download(out.data(), out.size()); !st) fail(st.error());
        }
        return py::bytes(out);
      })
      .def_property_readonly("__cuda_array_interface__", [](const DeviceArray& a) {
        py::dict d;
        d["shape"] = py::tuple(py::cast(a.shape));
        d["typestr"] = typestrOf(a.dtype);
        d["data"] = py::make_tuple(static_cast<uint64_t>(a.mem->ptr()), a.readonly);
        d["version"] = 3;
        d["strides"] = py::none();
        d["truenort_dtype"] = a.dtype;
        return d;
      });
}
