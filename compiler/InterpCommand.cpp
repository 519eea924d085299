// truenoc interp FILE --kernel NAME --grid X[,Y,Z] --block X[,Y,Z] --arg name=VALUE|@file ...
// Runs one kernel in the interpreter (backends/interp/Interp.h): pointer parameters get the raw bytes
// of a file, scalars a literal of their type, tmap parameters a 2-D tensor map over a pointer
// parameter's buffer (--tensor-map); --out writes a buffer back after the run.
#include <algorithm>
#include <cstdio>
#include <memory>

#include "backends/interp/Interp.h"
#include "compiler/Command.h"
#include "ir/Verifier.h"
#include "passes/TargetLimits.h"

namespace tn::cli {

namespace {

struct InterpOpts {
  std::string input, kernel, grid, block;
  std::vector<std::string> args, outs, tensorMaps;
  uint32_t dynShared = 0;
  bool checkRaces = false, checkUninit = false;
  uint64_t maxInstructions = interp::Options{}.maxInstructions;
  uint64_t maxLaunchInstructions = interp::Options{}.maxLaunchInstructions;
  unsigned threads = 0;
};

std::optional<ir::Dim3> parseDims(const std::string& text) {
  unsigned v[3] = {1, 1, 1};
  size_t pos = 0;
  for (int i = 0; i < 3; ++i) {
    size_t comma = text.find(',', pos);
    std::string part = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (part.empty() || part.size() > 10 || part.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    unsigned long long n = std::stoull(part);
    if (n == 0 || n > 0xFFFFFFFFull) return std::nullopt;
    v[i] = static_cast<unsigned>(n);
    if (comma == std::string::npos) return ir::Dim3{v[0], v[1], v[2]};
    pos = comma + 1;
  }
  return std::nullopt;
}

bool splitAssignment(const std::string& text, std::string& name, std::string& value) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  name = text.substr(0, eq);
  value = text.substr(eq + 1);
  return true;
}

// --tensor-map NAME=SRC,TYPE,D0xD1[xD2],ROWSTRIDE[xPLANESTRIDE],B0xB1[xB2][,SWIZZLE]: a 2-D or
// 3-D tensor map over pointer parameter SRC, as cuTensorMapEncodeTiled takes it (TC§5.1):
// element type, extents and box in elements (innermost first), the byte strides of dimensions 1
// (rows) and 2 (planes), the swizzle in bytes (none, 32, 64, 128; default none). Its address is
// filled in from SRC's buffer after binding.
struct TensorMapOption {
  std::string param, source;
  interp::TensorMapDesc desc;
};

std::optional<uint64_t> parseCount(const std::string& text, uint64_t max) {
  if (text.empty() || text.size() > 20 || text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  unsigned long long n = std::stoull(text);
  if (n > max) return std::nullopt;
  return n;
}

// "AxB..." as counts, each least..max: how many (at most 3), or 0 when malformed.
size_t parseCounts(const std::string& text, uint64_t least, uint64_t max, uint64_t out[3]) {
  size_t n = 0;
  for (size_t pos = 0;;) {
    size_t x = text.find('x', pos);
    auto v = parseCount(text.substr(pos, x == std::string::npos ? std::string::npos : x - pos), max);
    if (!v || *v < least || n == 3) return 0;
    out[n++] = *v;
    if (x == std::string::npos) return n;
    pos = x + 1;
  }
}

// The map of one --tensor-map, or the reason it is malformed.
std::optional<TensorMapOption> parseTensorMap(const std::string& text, std::string& why) {
  // CUtensorMapDataType codes and element sizes (TC§5.1).
  static const struct {
    const char* name;
    uint8_t code, bytes;
  } kTypes[] = {{"u8", 0, 1},  {"u16", 1, 2}, {"u32", 2, 4}, {"s32", 3, 4}, {"u64", 4, 8},
                {"s64", 5, 8}, {"f16", 6, 2}, {"f32", 7, 4}, {"f64", 8, 8}, {"bf16", 9, 2}};
  TensorMapOption o;
  std::string rest;
  if (!splitAssignment(text, o.param, rest)) {
    why = "expected NAME=SRC,TYPE,D0xD1[xD2],ROWSTRIDE[xPLANESTRIDE],B0xB1[xB2][,SWIZZLE]";
    return std::nullopt;
  }
  std::vector<std::string> f;
  for (size_t pos = 0;;) {
    size_t comma = rest.find(',', pos);
    f.push_back(rest.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (f.size() != 5 && f.size() != 6) {
    why = "expected 5 or 6 fields after '=': SRC,TYPE,D0xD1[xD2],ROWSTRIDE[xPLANESTRIDE],B0xB1[xB2][,SWIZZLE]";
    return std::nullopt;
  }
  o.source = f[0];
  interp::TensorMapDesc& d = o.desc;
  bool typed = false;
  for (const auto& t : kTypes)
    if (f[1] == t.name) {
      d.dataType = t.code;
      d.elementBytes = t.bytes;
      typed = true;
    }
  if (o.source.empty()) why = "the source pointer parameter is missing";
  else if (!typed) why = "unknown element type '" + f[1] + "' (u8, u16, u32, s32, u64, s64, f16, bf16, f32, f64)";
  else if (size_t rank = parseCounts(f[2], 1, uint64_t{1} << 32, d.dims); rank < 2)
    why = "invalid extents '" + f[2] + "' (D0xD1 or D0xD1xD2, each 1 .. 2^32)";
  else d.rank = static_cast<uint8_t>(rank);
  const std::string strides = d.rank == 3 ? "ROWSTRIDExPLANESTRIDE" : "ROWSTRIDE";
  const std::string boxes = d.rank == 3 ? "B0xB1xB2" : "B0xB1";
  if (why.empty() && parseCounts(f[3], 0, (uint64_t{1} << 40) - 1, d.strides) != d.rank - 1u)
    why = "invalid strides '" + f[3] + "' (" + strides + " in bytes, for " + std::to_string(d.rank) + " extents)";
  uint64_t box[3] = {};
  if (why.empty() && parseCounts(f[4], 1, 256, box) != d.rank)
    why = "invalid box '" + f[4] + "' (" + boxes + ", each 1 .. 256, for " + std::to_string(d.rank) + " extents)";
  for (unsigned i = 0; i < 3; ++i) {
    d.box[i] = static_cast<uint32_t>(box[i]);
    d.elementStrides[i] = 1;
  }
  if (why.empty() && f.size() == 6) {
    const std::string& s = f[5];
    if (s == "none" || s == "0") d.swizzle = 0;
    else if (s == "32") d.swizzle = 1;
    else if (s == "64") d.swizzle = 2;
    else if (s == "128") d.swizzle = 3;
    else why = "invalid swizzle '" + s + "' (none, 32, 64 or 128)";
  }
  if (!why.empty()) return std::nullopt;
  return o;
}

// A malformed command line (exit 2): an option's syntax is wrong whatever the kernel is.
int usage(const std::string& msg) {
  printError(msg);
  return kUsageError;
}

// The command line does not fit the kernel (exit 1): a name or value the kernel refuses.
int mismatch(const std::string& msg) {
  printError(msg);
  return kInputError;
}

int runInterp(const InterpOpts& o) {
  auto grid = parseDims(o.grid);
  if (!grid) return usage("invalid --grid '" + o.grid + "' (expected X[,Y,Z] with positive integers)");
  auto block = parseDims(o.block);
  if (!block) return usage("invalid --block '" + o.block + "' (expected X[,Y,Z] with positive integers)");

  ir::Diagnostics diags;
  auto mod = loadModule(o.input, diags);
  if (!mod) return kInputError;
  ir::Diagnostics vd;
  ir::verify(*mod, vd);
  printDiagnostics(vd);
  if (vd.hasErrors()) return kInputError;

  interp::Interpreter vm;
  const ir::Kernel* kernel = mod->findKernel(o.kernel);
  if (!kernel) return mismatch("no kernel named '" + o.kernel + "'");
  // A block's shared memory as the module's target allows it (the opt-in maximum).
  const passes::TargetLimits& limits = passes::limitsFor(mod->target.sm);
  const uint64_t shared = uint64_t(passes::staticSharedBytes(*kernel)) + o.dynShared;
  if (o.dynShared && shared > limits.maxDynamicShared)
    return mismatch("--dyn-shared " + std::to_string(o.dynShared) + " gives kernel '" + o.kernel + "' " +
                    std::to_string(shared) + " bytes of shared memory per block; " + mod->target.name() +
                    " allows at most " + std::to_string(limits.maxDynamicShared));
  if (auto e = vm.load(*mod, o.kernel)) {
    std::fprintf(stderr, "%s\n", e->text().c_str());
    return kInputError;
  }
  auto isPointer = [&](const std::string& name) -> std::optional<bool> {
    for (const interp::ParamInfo& p : vm.params())
      if (p.name == name) return p.type.isPtr();
    return std::nullopt;
  };
  auto isTensorMap = [&](const std::string& name) {
    for (const interp::ParamInfo& p : vm.params())
      if (p.name == name) return p.type.scalar == ir::Scalar::TensorMap;
    return false;
  };
  std::vector<TensorMapOption> maps;
  for (const std::string& text : o.tensorMaps) {
    std::string why;
    auto map = parseTensorMap(text, why);
    if (!map) return usage("invalid --tensor-map '" + text + "': " + why);
    for (const TensorMapOption& m : maps)
      if (m.param == map->param) return usage("--tensor-map '" + map->param + "' is given more than once");
    maps.push_back(*map);
  }
  std::vector<std::string> given;
  for (const std::string& arg : o.args) {
    std::string name, value;
    if (!splitAssignment(arg, name, value)) return usage("invalid --arg '" + arg + "' (expected name=VALUE or name=@FILE)");
    if (std::find(given.begin(), given.end(), name) != given.end())
      return usage("--arg '" + name + "' is given more than once");
    given.push_back(name);
    auto ptr = isPointer(name);
    if (!ptr) return mismatch("kernel '" + o.kernel + "' has no parameter '" + name + "'");
    if (isTensorMap(name))
      return mismatch("parameter '" + name + "' is a tmap: give it with --tensor-map " + name +
                      "=SRC,TYPE,D0xD1[xD2],ROWSTRIDE[xPLANESTRIDE],B0xB1[xB2][,SWIZZLE]");
    if (*ptr) {
      if (value.empty() || value[0] != '@')
        return mismatch("parameter '" + name + "' is a pointer: give its buffer as " + name + "=@FILE");
      auto text = readInput(value.substr(1), io::InputKind::Buffer);
      if (!text) return kInputError;
      const auto* data = reinterpret_cast<const std::byte*>(text->data());
      if (auto e = vm.bindBuffer(name, std::vector<std::byte>(data, data + text->size()))) return mismatch(e->diag.message);
    } else if (auto e = vm.setScalarText(name, value)) {
      return mismatch(e->diag.message);
    }
  }
  for (TensorMapOption& m : maps) {
    if (!isTensorMap(m.param))
      return mismatch("--tensor-map names '" + m.param + "', which is not a tmap parameter of '" + o.kernel + "'");
    auto ptr = isPointer(m.source);
    if (!ptr || !*ptr)
      return mismatch("--tensor-map " + m.param + " views '" + m.source + "', which is not a pointer parameter of '" +
                      o.kernel + "'");
    std::optional<uint64_t> address = vm.pointerValue(m.source);
    if (!address) return mismatch("--tensor-map " + m.param + " views '" + m.source + "', which has no --arg buffer");
    m.desc.address = *address;
    if (auto e = vm.setTensorMap(m.param, interp::encodeTensorMap(m.desc))) return mismatch(e->diag.message);
  }
  for (const interp::ParamInfo& p : vm.params())
    if (!p.bound)
      return mismatch(p.type.scalar == ir::Scalar::TensorMap
                          ? "missing --tensor-map for parameter '" + p.name + "' of kernel '" + o.kernel + "'"
                          : "missing --arg for parameter '" + p.name + "' of kernel '" + o.kernel + "'");
  std::vector<std::string> outNames;
  std::vector<io::OutputFile> outs;
  for (const std::string& out : o.outs) {
    std::string name, file;
    if (!splitAssignment(out, name, file) || file.empty()) return usage("invalid --out '" + out + "' (expected name=FILE)");
    auto ptr = isPointer(name);
    if (!ptr || !*ptr) return mismatch("--out names '" + name + "', which is not a pointer parameter of '" + o.kernel + "'");
    outNames.push_back(name);
    outs.push_back({file, "--out " + name, {}});
  }
  // Buffers are read in full before the run, so --out may update an --arg file in place; only
  // the kernel's source is protected.
  const std::string inputs[] = {o.input};
  if (!checkOutputs(outs, inputs)) return kInputError;

  interp::LaunchConfig cfg{*grid, *block, o.dynShared};
  interp::Options opts;
  opts.checkRaces = o.checkRaces;
  opts.checkUninit = o.checkUninit;
  opts.maxInstructions = o.maxInstructions;
  opts.maxLaunchInstructions = o.maxLaunchInstructions;
  opts.threads = o.threads;
  if (auto e = vm.launch(cfg, opts)) {
    std::fprintf(stderr, "%s\n", e->text().c_str());
    return e->kind == interp::ErrorKind::Setup ? kUsageError : kInputError;
  }
  const interp::Stats& st = vm.stats();
  std::fprintf(stderr, "interp: kernel '%s' ran %llu blocks of %u threads: %llu instructions executed\n",
               o.kernel.c_str(), static_cast<unsigned long long>(st.blocks), block->total(),
               static_cast<unsigned long long>(st.instructions));
  for (size_t i = 0; i < outs.size(); ++i) {
    const std::vector<std::byte>* b = vm.buffer(outNames[i]);
    outs[i].bytes = std::string_view(reinterpret_cast<const char*>(b->data()), b->size());
  }
  return writeOutputs(outs, inputs) ? kOk : kInputError;
}

}  // namespace

Command interpCommand() {
  return {"interp", "Run a kernel on the CPU with GPU semantics and bounds/barrier/race checks", [](Options& cli) {
            auto o = std::make_shared<InterpOpts>();
            cli.option("FILE", o->input, "Input .tir file, or - for stdin").required();
            cli.option("--kernel", o->kernel, "Kernel to run").required();
            cli.option("--grid", o->grid, "Grid size X[,Y,Z]").required();
            cli.option("--block", o->block, "Block size X[,Y,Z]").required();
            cli.option("--arg", o->args, "name=VALUE for a scalar, name=V0,V1,... for a vector (its lanes), name=@FILE for a buffer (raw bytes)");
            cli.option("--out", o->outs, "name=FILE: write a buffer after the run");
            cli.option("--tensor-map", o->tensorMaps,
                       "name=SRC,TYPE,D0xD1[xD2],ROWSTRIDE[xPLANESTRIDE],B0xB1[xB2][,SWIZZLE]: a 2-D or 3-D "
                       "tensor map over pointer parameter SRC (extents and box in elements, innermost first; "
                       "strides of rows and planes in bytes; swizzle none, 32, 64 or 128)");
            cli.option("--dyn-shared", o->dynShared, "Bytes of dynamic shared memory");
            cli.flag("--check-races", o->checkRaces, "Report data races: on shared and global memory between barriers, on global memory between blocks");
            cli.flag("--check-uninit", o->checkUninit, "Report reads of shared memory never written");
            cli.option("--max-instructions", o->maxInstructions, "Instruction budget per thread")
                .showDefault();
            cli.option("--max-launch-instructions", o->maxLaunchInstructions,
                       "Instruction budget of the whole launch (thread instructions)")
                .showDefault();
            cli.option("--threads", o->threads, "Host threads running blocks in parallel (0: one per core)")
                .showDefault()
                .range(0, 1024);
            return std::function<int()>([o] { return runInterp(*o); });
          }};
}

}  // namespace tn::cli
