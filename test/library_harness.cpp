#include "library_harness.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <numbers>
#include <sstream>

#include "backends/interp/Interp.h"
#include "compiler/Compile.h"
#include "compiler/Spec.h"
#include "test_paths.h"
#include "truenort/Bundle.h"

namespace tn::libtest {

namespace {

std::string diagnosticsText(const ir::Diagnostics& diags) {
  std::string out;
  for (const ir::Diagnostic& d : diags.all()) out += ir::formatDiagnostic(d) + "\n";
  return out;
}

std::string specPath(const std::string& family) {
  return std::string(TRUENOC_SOURCE_DIR) + "/test/library/" + family + ".toml";
}

// test/library/<family>.toml, parsed (a failure fails the test).
spec::Spec readSpec(const std::string& family) {
  std::string path = specPath(family);
  std::ifstream file(path);
  REQUIRE_MESSAGE(file.good(), "cannot open " << path);
  std::stringstream text;
  text << file.rdbuf();
  ir::Diagnostics diags;
  std::optional<spec::Spec> s = spec::parseSpec(text.str(), path, std::string(TRUENOC_SOURCE_DIR) + "/test/library", diags);
  INFO(diagnosticsText(diags));
  REQUIRE(s.has_value());
  return std::move(*s);
}

// A spec that targets sm_90a alone: its kernels use sm_90a-only ops (wgmma, setmaxnreg).
bool sm90aOnly(const spec::Spec& s) { return s.targets.size() == 1 && s.targets[0] == bundle::Target{90, true}; }

const Call::Buffer* findBuffer(const Call& c, const std::string& name) {
  for (const Call::Buffer& b : c.buffers())
    if (b.name == name) return &b;
  return nullptr;
}

const Call::Scalar* findScalar(const Call& c, const std::string& name) {
  for (const Call::Scalar& s : c.scalars())
    if (s.name == name) return &s;
  return nullptr;
}

bool isTensorMap(const bundle::Param& p) { return p.type.scalar == bundle::ParamType::Scalar::TensorMap; }

// Every parameter but the tmap ones (filled from the launch rule, as the runtime fills them) must
// get exactly one value, and nothing else may be given.
void checkCoverage(const Call& c, const std::vector<bundle::Param>& params) {
  size_t given = 0;
  for (const bundle::Param& p : params) {
    if (isTensorMap(p)) continue;
    ++given;
    bool isPtr = p.type.isPointer();
    INFO(c.describe());
    if (isPtr) REQUIRE_MESSAGE(findBuffer(c, p.name), "no buffer for pointer parameter '" << p.name << "'");
    else REQUIRE_MESSAGE(findScalar(c, p.name), "no value for parameter '" << p.name << "'");
  }
  REQUIRE_MESSAGE(c.buffers().size() + c.scalars().size() == given,
                  c.describe() << " names a parameter the kernel does not have");
}

// ---- the interpreter ------------------------------------------------------------------------

class InterpRunner final : public Runner {
 public:
  explicit InterpRunner(bool optimize) : optimize_(optimize) {}
  const char* name() const override { return optimize_ ? "interp" : "interp -O0"; }
  bool honoursMisalign() const override { return false; }
  bool fast() const override { return false; }

  Outputs run(const Call& c) override {
    const Built& k = built(c.spec(), c.kernel(), c.target(), optimize_);
    checkCoverage(c, k.params);
    interp::Interpreter in;
    auto fail = [&](const std::optional<interp::Error>& e) {
      if (e) FAIL(c.describe() << ": " << e->text());
    };
    fail(in.load(k.module, c.kernel()));
    std::vector<uint64_t> values;  // every parameter's argument, as the runtime would pass it
    for (const bundle::Param& p : k.params) {
      if (isTensorMap(p)) {
        values.push_back(0);  // bound below, once the pointers it views are
      } else if (const Call::Buffer* b = findBuffer(c, p.name)) {
        fail(in.bindBuffer(p.name, b->bytes));
        values.push_back(*in.pointerValue(p.name));
      } else {
        uint64_t bits = findScalar(c, p.name)->bits;
        fail(in.setScalarBits(p.name, bits));
        values.push_back(bits);
      }
    }
    std::vector<const void*> args;
    for (const uint64_t& v : values) args.push_back(&v);
    auto dims = bundle::evaluate(k.launch, k.params, args.data());
    if (!dims) FAIL(c.describe() << ": launch rule: " << dims.error().message);
    interp::LaunchConfig cfg;
    cfg.grid = {dims->grid[0], dims->grid[1], dims->grid[2]};
    cfg.block = {dims->block[0], dims->block[1], dims->block[2]};
    cfg.dynamicShared = dims->dynamicShared;
    Outputs out;
    if (cfg.grid.x != 0 && cfg.grid.y != 0 && cfg.grid.z != 0) {
      bindTensorMaps(in, c, k, args.data());
      // Races and uninitialised shared reads are checked in the code that ships (-O2); the -O0
      // run is the equivalence check of results (docs/kernels.md, "Accuracy").
      interp::Options opts;
      opts.checkRaces = optimize_;
      opts.checkUninit = optimize_;
      fail(in.launch(cfg, opts));
    }
    for (const Call::Buffer& b : c.buffers()) out.set(b.name, *in.buffer(b.name));
    return out;
  }

 private:
  struct Built {
    ir::Module module;
    std::vector<bundle::Param> params;
    bundle::LaunchRule launch;
  };

  // What the runtime does for each tmap parameter, with interp::encodeTensorMap in place of
  // cuTensorMapEncodeTiled (whose simulated version writes the same bytes): the launch rule's
  // tensor maps evaluated for this call's arguments.
  static void bindTensorMaps(interp::Interpreter& in, const Call& c, const Built& k, const void* const* args) {
    bundle::Result<std::vector<bundle::TensorMapArgs>> maps = bundle::evaluateTensorMaps(k.launch, k.params, args);
    if (!maps) FAIL(c.describe() << ": launch rule: " << maps.error().message);
    for (const bundle::TensorMapArgs& a : *maps) {
      interp::TensorMapDesc d;
      d.dataType = static_cast<uint8_t>(a.dataType);
      d.rank = static_cast<uint8_t>(a.rank);
      d.swizzle = static_cast<uint8_t>(a.swizzle);
      d.l2Promotion = 2;  // 128B, as the runtime asks for
      d.elementBytes = static_cast<uint8_t>(a.elementBytes);
      d.address = a.address;
      for (uint32_t i = 0; i < a.rank; ++i) {
        d.dims[i] = a.dims[i];
        if (i > 0) d.strides[i - 1] = a.strides[i - 1];
        d.box[i] = a.box[i];
        d.elementStrides[i] = 1;
      }
      if (auto e = in.setTensorMap(k.params[a.param].name, interp::encodeTensorMap(d))) FAIL(c.describe() << ": " << e->text());
    }
  }

  // Each (spec, kernel, level) is built once per test binary: -O2 exactly as `truenoc build`
  // does it, or -O0 (verified, checkers run, nothing rewritten).
  static const Built& built(const std::string& family, const std::string& kernel, const std::string& targetName,
                            bool optimize) {
    static std::map<std::string, std::unique_ptr<Built>> cache;
    std::string key = family + "/" + kernel + (targetName.empty() ? "" : ":" + targetName) + (optimize ? "" : " -O0");
    if (auto it = cache.find(key); it != cache.end()) return *it->second;
    const spec::Spec s = readSpec(family);
    ir::Diagnostics diags;
    INFO(diagnosticsText(diags));
    const spec::KernelSpec* ks = nullptr;
    for (const spec::KernelSpec& k : s.kernels)
      if (k.name == kernel) ks = &k;
    REQUIRE_MESSAGE(ks, specPath(family) << " has no kernel '" << kernel << "'");
    spec::TirCache tirs;
    // The instance `truenoc build` compiles for the target (the first, for sm_90 outside the spec).
    std::optional<std::vector<spec::TargetedInstance>> all = spec::instantiateForTargets(s, *ks, tirs, diags);
    REQUIRE(all.has_value());
    const std::optional<bundle::Target> named = bundle::Target::parse(targetName);
    REQUIRE_MESSAGE((targetName.empty() || named), "unknown target '" << targetName << "'");
    const bundle::Target target = named ? *named : bundle::Target{90, sm90aOnly(s)};
    auto own = std::find_if(all->begin(), all->end(), [&](const spec::TargetedInstance& t) {
      return std::find(t.targets.begin(), t.targets.end(), target) != t.targets.end();
    });
    REQUIRE_MESSAGE((own != all->end() || !named), specPath(family) << " does not target " << targetName);
    spec::Instance* inst = own != all->end() ? &own->instance : &all->front().instance;
    // Compiled as `truenoc build` compiles it (-O2), or with the checks alone (-O0).
    compile::Options options = spec::compileOptions(s);
    if (!optimize) options.level = compile::Level::O0;
    REQUIRE(compile::compile(inst->module, target, options, diags).ptx.has_value());
    REQUIRE_FALSE(diags.hasErrors());
    auto b = std::make_unique<Built>(Built{std::move(inst->module), std::move(inst->params), std::move(inst->launch)});
    return *cache.emplace(key, std::move(b)).first->second;
  }

  bool optimize_;
};

// ---- the GPU --------------------------------------------------------------------------------

const truenort::Context* context() {
  static truenort::Result<truenort::Context> ctx = truenort::Context::create(0);
  return ctx.ok() ? &ctx.value() : nullptr;
}

#define REQUIRE_OK(what, expr)                                                 \
  do {                                                                         \
    auto st_ = (expr);                                                         \
    if (!st_.ok()) FAIL(what << ": " << #expr << ": " << st_.error().describe()); \
  } while (0)

class GpuRunner final : public Runner {
  static constexpr size_t kGuardBytes = 64;
  static constexpr std::byte kCanary{0xA5};

 public:
  const char* name() const override { return "gpu"; }
  bool honoursMisalign() const override { return true; }
  bool fast() const override { return !simulatedGpu(); }

  Outputs run(const Call& c) override {
    const truenort::Context* ctx = context();
    REQUIRE(ctx);
    const truenort::Bundle& bundle = load(c.spec());
    auto kernel = bundle.kernel(c.kernel());
    if (!kernel) FAIL(c.describe() << ": " << kernel.error().describe());
    std::vector<truenort::ParamInfo> sig = kernel->signature();
    std::vector<bundle::Param> params;
    for (const truenort::ParamInfo& p : sig) params.push_back({p.name, p.type, 0});
    checkCoverage(c, params);

    auto stream = truenort::Stream::create(*ctx);
    if (!stream) FAIL(stream.error().describe());
    // Each buffer sits inside a larger allocation filled with a canary byte, so a write outside
    // it (which the GPU does not fault on) fails the test as the interpreter's bounds check would.
    std::vector<truenort::DeviceMemory> memory;
    std::vector<std::vector<std::byte>> images;
    std::vector<truenort::Arg> args;
    for (const truenort::ParamInfo& p : sig) {
      if (const Call::Buffer* b = findBuffer(c, p.name)) {
        std::vector<std::byte> image(b->misalign + b->bytes.size() + kGuardBytes, kCanary);
        std::copy(b->bytes.begin(), b->bytes.end(), image.begin() + b->misalign);
        auto m = truenort::DeviceMemory::allocate(*ctx, image.size());
        if (!m) FAIL(m.error().describe());
        REQUIRE_OK(c.describe(), m->upload(image.data(), image.size()));
        args.push_back({truenort::Arg::Kind::Pointer, m->ptr() + b->misalign});
        memory.push_back(std::move(m.value()));
        images.push_back(std::move(image));
      } else {
        args.push_back({p.kind, findScalar(c, p.name)->bits});
      }
    }
    REQUIRE_OK(c.describe(), kernel->launch_args(stream.value(), args));
    REQUIRE_OK(c.describe(), stream->synchronize());
    Outputs out;
    size_t i = 0;
    for (const truenort::ParamInfo& p : sig) {
      const Call::Buffer* b = findBuffer(c, p.name);
      if (!b) continue;
      std::vector<std::byte> image(images[i].size());
      REQUIRE_OK(c.describe(), memory[i].download(image.data(), image.size()));
      auto outside = [&](size_t at) { return at < b->misalign || at >= b->misalign + b->bytes.size(); };
      for (size_t at = 0; at < image.size(); ++at)
        if (outside(at) && image[at] != kCanary)
          FAIL(c.describe() << ": the kernel wrote byte " << static_cast<long long>(at) - b->misalign << " of '" << b->name
                            << "', outside its " << b->bytes.size() << " bytes");
      out.set(b->name, std::vector<std::byte>(image.begin() + b->misalign, image.begin() + b->misalign + b->bytes.size()));
      ++i;
    }
    return out;
  }

 private:
  static const truenort::Bundle& load(const std::string& family) {
    static std::map<std::string, std::unique_ptr<truenort::Bundle>> bundles;
    if (auto it = bundles.find(family); it != bundles.end()) return *it->second;
    if (sm90aOnly(readSpec(family)) && context()->sm() != 90)
      throw NotForThisDevice{"test/library/" + family + ".toml targets sm_90a alone; the device is sm_" +
                             std::to_string(context()->sm())};
    std::string path = testpaths::inBuild("test/library/" + family + ".tnb");
    // The test bundles carry PTX for GPUs newer than their targets; JIT is fine in a test.
    auto b = truenort::Bundle::load_file(*context(), path, {.allow_jit = true});
    if (!b) FAIL("loading " << path << ": " << b.error().describe());
    return *bundles.emplace(family, std::make_unique<truenort::Bundle>(std::move(b.value()))).first->second;
  }
};

}  // namespace

std::string Call::describe() const {
  std::string out = spec_ + "/" + kernel_ + (target_.empty() ? "" : ":" + target_) + "(";
  bool first = true;
  for (const Buffer& b : buffers_) {
    out += (first ? "" : ", ") + b.name + "[" + std::to_string(b.bytes.size()) + " B";
    if (b.misalign) out += " +" + std::to_string(b.misalign);
    out += "]";
    first = false;
  }
  for (const Scalar& s : scalars_) {
    out += (first ? "" : ", ") + s.name + "=0x" + [&] {
      std::ostringstream h;
      h << std::hex << s.bits;
      return h.str();
    }();
    first = false;
  }
  return out + ")";
}

std::unique_ptr<Runner> interpRunner(bool optimize) { return std::make_unique<InterpRunner>(optimize); }
std::unique_ptr<Runner> gpuRunner() { return std::make_unique<GpuRunner>(); }
bool noGpu() { return context() == nullptr; }
std::vector<std::string> codeTargets(const Runner& r, std::vector<std::string> targets) {
  if (std::string_view(r.name()) == "gpu") return {""};
  return targets;
}

bool simulatedGpu() { return context() && context()->simulated(); }

unsigned seed() {
  static const unsigned s = [] {
    if (const char* env = std::getenv("TRUENOC_TEST_SEED")) return static_cast<unsigned>(std::strtoul(env, nullptr, 0));
    return static_cast<unsigned>(std::random_device{}());
  }();
  return s;
}

std::vector<float> uniform(std::mt19937& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

const char* dtypeName(Dtype d) {
  switch (d) {
    case Dtype::F32: return "f32";
    case Dtype::BF16: return "bf16";
    case Dtype::F16: return "f16";
  }
  return "?";
}

size_t dtypeBytes(Dtype d) { return d == Dtype::F32 ? 4 : 2; }

std::vector<std::byte> encode(Dtype d, const std::vector<float>& v) {
  std::vector<std::byte> out(v.size() * dtypeBytes(d));
  for (size_t i = 0; i < v.size(); ++i) {
    if (d == Dtype::F32) {
      std::memcpy(out.data() + 4 * i, &v[i], 4);
    } else {
      uint16_t h = d == Dtype::BF16 ? ir::f32ToBf16(v[i]) : ir::f32ToF16(v[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

std::vector<float> decode(Dtype d, const std::vector<std::byte>& bytes) {
  std::vector<float> out(bytes.size() / dtypeBytes(d));
  for (size_t i = 0; i < out.size(); ++i) {
    if (d == Dtype::F32) {
      std::memcpy(&out[i], bytes.data() + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      out[i] = d == Dtype::BF16 ? ir::bf16ToF32(h) : ir::f16ToF32(h);
    }
  }
  return out;
}

std::vector<float> roundTo(Dtype d, std::vector<float> v) { return decode(d, encode(d, v)); }

double roundoff(Dtype d) {
  switch (d) {
    case Dtype::F32: return std::ldexp(1.0, -24);
    case Dtype::BF16: return std::ldexp(1.0, -8);
    case Dtype::F16: return std::ldexp(1.0, -11);
  }
  return 0;
}

double siluRef(double x) { return x / (1 + std::exp(-x)); }
// ex2 (2 ulp on the GPU), rcp (1), the add and the multiply (0.5 each), and the exponent
// t = -x log2(e), whose rounding (|t|/2 ulp absolute) moves exp by |t| ln2 / 2 ulp relative.
double siluUlps(double x) { return 4 + 0.5 * std::abs(x * std::numbers::log2e); }
double geluTanhRef(double x) {
  double u = std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x);
  return x / (1 + std::exp(-2 * u));
}
// The kernel's exponent t = -2 log2(e) u takes three roundings (1.5|t| ulp absolute, ~|t| ulp on
// exp).
double geluTanhUlps(double x) {
  double t = 2 * std::numbers::log2e * std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x);
  return 4 + 1.2 * std::abs(t);
}
double geluErfRef(double x) { return 0.5 * x * std::erfc(-x / std::numbers::sqrt2); }
// erfc's fit (1.2e-7 relative, 1 ulp), its Horner evaluation, rcp and ex2: ~10 ulp; deep in the
// tail the exponent -z^2 log2(e) (z = |x|/sqrt 2; z, z^2, the sum and the scaling each rounded)
// adds about x^2 ulp.
double geluErfUlps(double x) { return 12 + 1.25 * x * x; }
double oaiActRef(double x) {
  const double c = x > 7 ? 7 : x;
  return c / (1 + std::exp(-1.702 * c));
}
// As silu's, with the exponent t = -1.702 log2(e) c from a rounded constant (|t| ulp on exp).
double oaiActUlps(double x) { return 4 + std::abs(1.702 * std::numbers::log2e * (x > 7 ? 7 : x)); }
double oaiLinearRef(double x) { return (x > 7 ? 7 : x < -7 ? -7 : x) + 1; }

void expectClose(const std::vector<float>& got, const std::vector<double>& want, double abs, double rel,
                 const std::string& what) {
  REQUIRE_MESSAGE(got.size() == want.size(), what << ": " << got.size() << " values, expected " << want.size());
  size_t bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < got.size(); ++i) {
    double g = got[i], w = want[i];
    bool ok;
    if (std::isnan(w)) ok = std::isnan(g);
    else if (std::isinf(w)) ok = g == w;
    else ok = std::isfinite(g) && std::fabs(g - w) <= abs + rel * std::fabs(w);
    if (!ok && bad++ < 5) first << "\n  [" << i << "] got " << g << ", expected " << w;
  }
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " of " << got.size() << " values outside |err| <= " << abs << " + "
                                << rel << "*|ref| (seed " << seed() << ")" << first.str());
}

}  // namespace tn::libtest
