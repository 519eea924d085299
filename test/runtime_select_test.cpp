// Cubin selection and driver loading without a GPU.
#include <doctest/doctest.h>

#include "backends/bundle/Bundle.h"
#include "truenort/ArchSelect.h"
#include "truenort/Bundle.h"
#include "truenort/Driver.h"

using truenort::CodeEntry;
using truenort::Target;
using PT = tn::bundle::ParamType;

namespace {
std::vector<CodeEntry> entries(std::initializer_list<const char*> names) {
  std::vector<CodeEntry> out;
  for (const char* n : names) {
    std::string s = n;
    bool ptx = s.ends_with("+ptx");
    if (ptx) s.resize(s.size() - 4);
    out.push_back({*Target::parse(s), ptx});
  }
  return out;
}
std::string pick(unsigned device, std::initializer_list<const char*> names, bool jit = false) {
  auto e = entries(names);
  auto r = truenort::selectCode(device, e, jit);
  if (!r) return "error";
  return e[r.value().index].target.name() + (r.value().jit ? " jit" : "");
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
  CHECK(pick(90, {"sm_80", "sm_90", "sm_90a"}) == "sm_90a");           // an sm_90 device prefers sm_90a
  CHECK(pick(89, {"sm_80", "sm_90", "sm_90a"}) == "sm_80");
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

namespace {

// What Bundle::load selects among, for a bundle written with one kernel and a cubin (and, with
// `ir`, an IR entry) per target: the kernel's cubin and PTX entries with the targets the reader parsed.
std::vector<CodeEntry> writtenEntries(std::initializer_list<const char*> targets, bool ir) {
  using namespace tn::bundle;
  BundleInput in;
  in.name = "arch";
  in.producer = "truenoc test";
  for (const char* t : targets) in.targets.push_back(*Target::parse(t));
  in.ptxasVersion = "13.0.88";
  in.ir = ir;
  KernelInput k{"k", {{"n", PT{PT::Scalar::U32}, 0}}, {}, {}};
  for (const Target& t : in.targets) {
    k.payloads.push_back({t, PayloadKind::Cubin, {}, "cubin for " + t.name()});
    if (ir) k.payloads.push_back({t, PayloadKind::Ir, {}, "IR for " + t.name()});
  }
  in.kernels.push_back(k);
  Result<std::string> bytes = write(in);
  REQUIRE(bytes.ok());
  Result<Reader> r = Reader::open({reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()});
  REQUIRE(r.ok());
  return truenort::codeEntriesOf(r->manifest(), r->manifest().kernels[0]);
}

std::string pickFrom(const std::vector<CodeEntry>& entries, unsigned sm) {
  auto s = truenort::selectCode(sm, entries, false);
  return s ? entries[s.value().index].target.name() : std::string("error");
}

}  // namespace

TEST_CASE("a bundle built for sm_80, sm_90 and sm_90a: an sm_90 device runs the sm_90a cubin") {
  std::vector<CodeEntry> entries = writtenEntries({"sm_90a", "sm_80", "sm_90"}, true);  // IR entries are the simulator's
  REQUIRE(entries.size() == 3);
  CHECK(pickFrom(entries, 90) == "sm_90a");
  CHECK(pickFrom(entries, 89) == "sm_80");
  CHECK(pickFrom(entries, 86) == "sm_80");
  CHECK(pickFrom(entries, 100) == "error");
}

TEST_CASE("a bundle with sm_90a and sm_90 cubins: sm_90a on an sm_90 device, sm_90 on the other sm_9x") {
  std::vector<CodeEntry> entries = writtenEntries({"sm_90", "sm_90a"}, false);
  REQUIRE(entries.size() == 2);
  CHECK(pickFrom(entries, 90) == "sm_90a");
  CHECK(pickFrom(entries, 92) == "sm_90");  // arch-specific code runs only on its exact architecture
  CHECK(pickFrom(entries, 89) == "error");
  CHECK(pickFrom(entries, 100) == "error");
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
  for (auto [name, type] : {std::pair{"x", PT{PT::Scalar::Ptr, 1, PT::Space::Global}}, {"n", PT{PT::Scalar::U32}},
                            {"eps", PT{PT::Scalar::F32}}})
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
  CHECK(truenort::argKindOf(PT{PT::Scalar::BF16}) == Arg::Kind::BF16);
  CHECK(truenort::argKindOf(PT{PT::Scalar::B16}) == Arg::Kind::U16);
  CHECK_FALSE(truenort::argKindOf(PT{PT::Scalar::F32, 4}).has_value());
}

TEST_CASE("a parameter type the runtime cannot pass makes the kernel fail to load") {
  using truenort::Arg;
  std::vector<tn::bundle::Param> params = {
      {"x", PT{PT::Scalar::Ptr, 1, PT::Space::Global}, 16}, {"n", PT{PT::Scalar::U32}, 0}, {"eps", PT{PT::Scalar::F32}, 0}};
  auto sig = truenort::signatureOf(params, "rmsnorm");
  REQUIRE(sig.ok());
  REQUIRE(sig.value().size() == 3);
  CHECK(sig.value()[0].name == "x");
  CHECK(sig.value()[0].type.name() == "ptr.global");
  CHECK(sig.value()[0].kind == Arg::Kind::Pointer);
  CHECK(sig.value()[1].kind == Arg::Kind::U32);
  CHECK(sig.value()[2].kind == Arg::Kind::F32);

  // The reader accepts vector types, but launching one from an 8-byte Arg would be wrong.
  for (PT type : {PT{PT::Scalar::F32, 4}, PT{PT::Scalar::U16, 2}, PT{PT::Scalar::Pred}}) {
    INFO(type.name());
    REQUIRE(type.valid());
    params[1].type = type;
    auto bad = truenort::signatureOf(params, "rmsnorm");
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().code == truenort::Errc::BadBundle);
    CHECK(bad.error().describe() == "Bundle::load failed: parameter 'n' has type '" + type.name() +
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
