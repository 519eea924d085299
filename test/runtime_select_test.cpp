// Cubin selection and driver loading without a GPU.
#include <doctest/doctest.h>

#include "backends/bundle/Bundle.h"
#include "truenort/ArchSelect.h"
#include "truenort/Bundle.h"
#include "truenort/Driver.h"

using truenort::CodeEntry;
using truenort::Target;

namespace {
std::vector<CodeEntry> entries(std::initializer_list<const char*> names) {
  std::vector<CodeEntry> out;
  for (const char* n : names) {
    std::string s = n;
    bool ptx = s.ends_with("+ptx");
    if (ptx) s.resize(s.size() - 4);
    out.push_back({*truenort::parseTarget(s), ptx});
  }
  return out;
}
std::string pick(unsigned device, std::initializer_list<const char*> names, bool jit = false) {
  auto e = entries(names);
  auto r = truenort::selectCode(device, e, jit);
  if (!r) return "error";
  return truenort::targetName(e[r.value().index].target) + (r.value().jit ? " jit" : "");
}
}  // namespace

TEST_CASE("cubin selection table") {
  CHECK(pick(90, {"sm_80", "sm_86", "sm_89", "sm_90"}) == "sm_90");
  CHECK(pick(86, {"sm_80", "sm_86", "sm_89", "sm_90"}) == "sm_86");
  CHECK(pick(87, {"sm_80", "sm_86", "sm_89", "sm_90"}) == "sm_86");   // highest Z <= Y, same major
  CHECK(pick(89, {"sm_80", "sm_90"}) == "sm_80");
  CHECK(pick(90, {"sm_80", "sm_89"}) == "error");                       // other major: no cubin
  CHECK(pick(90, {"sm_80", "sm_90a"}) == "sm_90a");                     // exact arch-specific
  CHECK(pick(90, {"sm_90", "sm_90a"}) == "sm_90a");
  CHECK(pick(100, {"sm_90a", "sm_90"}) == "error");                     // never a newer major
  CHECK(pick(91, {"sm_90a"}) == "error");                               // `a` cubins: exact only
  CHECK(pick(120, {"sm_80", "sm_90+ptx"}) == "error");                  // PTX without opt-in
  CHECK(pick(120, {"sm_80", "sm_90+ptx"}, true) == "sm_90 jit");        // PTX with opt-in
  CHECK(pick(80, {"sm_90+ptx"}, true) == "error");                      // PTX newer than device
  CHECK(pick(86, {"sm_80", "sm_80+ptx"}, true) == "sm_80");             // cubin beats PTX
  CHECK(pick(75, {}) == "error");
}

TEST_CASE("selection errors name the device and the bundle's targets") {
  auto e = entries({"sm_80", "sm_86+ptx"});
  auto r = truenort::selectCode(90, e, false, "rmsnorm");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == truenort::Errc::NoCompatibleCode);
  CHECK(r.error().kernel == "rmsnorm");
  CHECK(r.error().message ==
        "no code for device sm_90; the bundle has sm_80, sm_86 (ptx); PTX is present but JIT was not "
        "allowed (LoadOptions::allow_jit)");
}

TEST_CASE("target names parse and print") {
  CHECK(truenort::parseTarget("sm_90a") == Target{90, true});
  CHECK(truenort::parseTarget("sm_120") == Target{120, false});
  CHECK_FALSE(truenort::parseTarget("sm_9").has_value());
  CHECK_FALSE(truenort::parseTarget("compute_90").has_value());
  // The bundle format's parser: what a bundle may hold is exactly what parses here.
  for (const char* t : {"sm_090", "sm_a", "sm_90b", "sm_1234", "sm_9a"}) {
    unsigned sm = 0;
    bool arch = false;
    CHECK_MESSAGE(truenort::parseTarget(t).has_value() == tn::bundle::parseTargetName(t, sm, arch), t);
    CHECK_FALSE_MESSAGE(truenort::parseTarget(t).has_value(), t);
  }
  CHECK(truenort::targetName({86, false}) == "sm_86");
}

TEST_CASE("a missing driver library is a NoDriver error value, not a crash") {
  auto d = truenort::loadDriverFrom("/nonexistent/libcuda.so.1");
  REQUIRE_FALSE(d.ok());
  CHECK(d.error().code == truenort::Errc::NoDriver);
  CHECK(d.error().describe().starts_with("dlopen(/nonexistent/libcuda.so.1) failed: the NVIDIA driver library"));
}

TEST_CASE("a library without the driver entry points is DriverTooOld") {
  auto d = truenort::loadDriverFrom("libz.so.1");
  REQUIRE_FALSE(d.ok());
  CHECK(d.error().code == truenort::Errc::DriverTooOld);
  CHECK(d.error().message.find("cuInit") != std::string::npos);
}

TEST_CASE("the process-wide driver either loads or explains why") {
  auto d = truenort::driver();
  if (d.ok()) {
    CHECK(d.value()->version >= truenort::kMinDriverVersion);
  } else {
    auto code = d.error().code;
    CHECK((code == truenort::Errc::NoDriver || code == truenort::Errc::NoDevice ||
           code == truenort::Errc::DriverTooOld || code == truenort::Errc::Cuda));
  }
}

TEST_CASE("launch arguments are checked against the signature before the driver") {
  using truenort::Arg;
  std::vector<truenort::ParamInfo> sig;
  for (auto [name, type] : {std::pair{"x", "ptr.global"}, {"n", "u32"}, {"eps", "f32"}})
    sig.push_back({name, type, *truenort::argKindOf(type)});
  const Arg good[] = {truenort::arg(truenort::CUdeviceptr{0x1000}), truenort::arg(uint32_t{7}), truenort::arg(1e-5f)};
  CHECK(truenort::checkSignature(sig, good, "rmsnorm").ok());

  const Arg few[] = {truenort::arg(truenort::CUdeviceptr{0x1000}), truenort::arg(uint32_t{7})};
  auto st = truenort::checkSignature(sig, few, "rmsnorm");
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == truenort::Errc::SignatureMismatch);
  CHECK(st.error().describe() == "Kernel::launch failed: expected 3 arguments, got 2 [kernel rmsnorm]");

  const Arg wrong[] = {truenort::arg(truenort::CUdeviceptr{0x1000}), truenort::arg(int32_t{7}), truenort::arg(1e-5f)};
  st = truenort::checkSignature(sig, wrong, "rmsnorm");
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().describe() == "Kernel::launch failed: argument 1 ('n') must be u32, got s32 [kernel rmsnorm]");

  const Arg swapped[] = {truenort::arg(uint32_t{7}), truenort::arg(truenort::CUdeviceptr{0x1000}), truenort::arg(1e-5f)};
  CHECK_FALSE(truenort::checkSignature(sig, swapped, "rmsnorm").ok());
  CHECK(truenort::argKindOf("bf16") == Arg::Kind::BF16);
  CHECK_FALSE(truenort::argKindOf("v4.f32").has_value());
}

TEST_CASE("a parameter type the runtime cannot pass makes the kernel fail to load") {
  using truenort::Arg;
  std::vector<tn::bundle::Param> params = {{"x", "ptr.global", 16}, {"n", "u32", 0}, {"eps", "f32", 0}};
  auto sig = truenort::signatureOf(params, "rmsnorm");
  REQUIRE(sig.ok());
  REQUIRE(sig.value().size() == 3);
  CHECK(sig.value()[0].name == "x");
  CHECK(sig.value()[0].type == "ptr.global");
  CHECK(sig.value()[0].kind == Arg::Kind::Pointer);
  CHECK(sig.value()[1].kind == Arg::Kind::U32);
  CHECK(sig.value()[2].kind == Arg::Kind::F32);

  // The reader accepts vector types, but launching one from an 8-byte Arg would be wrong.
  for (const char* type : {"v4.f32", "v2.u16", "pred"}) {
    INFO(type);
    REQUIRE(tn::bundle::isValidParamType(type));
    params[1].type = type;
    auto bad = truenort::signatureOf(params, "rmsnorm");
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().code == truenort::Errc::BadBundle);
    CHECK(bad.error().describe() == "Bundle::load failed: parameter 'n' has type '" + std::string(type) +
                                        "', which the runtime cannot pass to a kernel [kernel rmsnorm]");
  }
}

TEST_CASE("without a usable driver, creating a context is an error value") {
  auto ctx = truenort::Context::create(0);
  if (ctx.ok()) {
    CHECK(ctx.value().sm() >= 50);
  } else {
    auto code = ctx.error().code;
    CHECK((code == truenort::Errc::NoDriver || code == truenort::Errc::NoDevice ||
           code == truenort::Errc::DriverTooOld || code == truenort::Errc::Cuda));
  }
}
