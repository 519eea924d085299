// The bundle container and launch rules (truenoc_bundle): writer -> reader round trips,
// canonical output, and rejection of every damaged input (every single-byte change and every
// truncation of a small bundle, plus structurally hostile manifests with valid checksums, and
// payload references that would inflate a small bundle to gigabytes).
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "backends/bundle/Bundle.h"
#include "backends/bundle/LaunchRule.h"
#include "backends/ptx/Ptxas.h"
#include "compiler/Compile.h"
#include "compiler/Spec.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "test_paths.h"

namespace {

using namespace tn::bundle;

using S = ParamType::Scalar;
const ParamType kPtr{S::Ptr, 1, ParamType::Space::Global};
const ParamType kU16{S::U16}, kU32{S::U32}, kU64{S::U64}, kS32{S::S32}, kF32{S::F32};

Target tgt(const char* name) {
  std::optional<Target> t = Target::parse(name);
  REQUIRE_MESSAGE(t.has_value(), name);
  return *t;
}

Expr expr(const char* text) {
  Result<Expr> e = Expr::parse(text);
  REQUIRE_MESSAGE(e.ok(), text);
  return *e;
}

LaunchRule rule(std::vector<uint32_t> block, std::vector<const char*> grid, const char* shared = "0") {
  LaunchRule r;
  r.block = std::move(block);
  r.grid.clear();
  for (const char* g : grid) r.grid.push_back(expr(g));
  r.dynamicShared = expr(shared);
  return r;
}

// Bytes that compress poorly, so payload sizes are not trivial.
std::string noise(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  for (char& c : s) {
    seed = seed * 1664525u + 1013904223u;
    c = static_cast<char>(seed >> 24);
  }
  return s;
}

BundleInput sampleInput() {
  BundleInput in;
  in.name = "sample";
  in.targets = {tgt("sm_90"), tgt("sm_80")};
  in.ptxFallback = true;
  in.ir = true;
  in.ptxasVersion = "13.0.88";
  in.producer = "truenoc test";
  KernelInput vadd{"vadd",
                   {{"a", kPtr, 16, kPtrRead, ParamType::Scalar::F32},
                    {"b", kPtr, 16, kPtrRead, ParamType::Scalar::F32},
                    {"c", kPtr, 0, kPtrWritten, ParamType::Scalar::F32},
                    {"n", kU32, 0}},
                   rule({256}, {"ceil_div(n, 256)"}),
                   {}};
  for (const char* t : {"sm_90", "sm_80"}) {
    Resources r{12, 0, 0, 380, 0, 0, 0};
    vadd.payloads.push_back({tgt(t), PayloadKind::Cubin, r, "cubin of vadd for " + std::string(t) + noise(300, t[3])});
    vadd.payloads.push_back({tgt(t), PayloadKind::Ptx, {}, ".version 7.8\n.target " + std::string(t) + "\n// vadd\n"});
    vadd.payloads.push_back({tgt(t), PayloadKind::Ir, {}, "target " + std::string(t) + "\n\nkernel @vadd() {\n^entry:\n  ret\n}\n"});
  }
  KernelInput rows{"row_sum",
                   {{"x", kPtr, 0, kPtrRead | kPtrWritten}, {"y", kPtr, 0, kPtrEscapes}, {"cols", kU32, 0}, {"rows", kU64, 0}},
                   rule({128, 2}, {"rows", "max(cols / 64, 1)"}, "min(cols, 1024) * 4"),
                   {}};
  for (const char* t : {"sm_80", "sm_90"}) {
    rows.payloads.push_back({tgt(t), PayloadKind::Ptx, {}, "// row_sum PTX for " + std::string(t)});
    rows.payloads.push_back({tgt(t), PayloadKind::Cubin, Resources{20, 1, 32, 376, 8, 4, 4}, noise(500, t[3])});
    rows.payloads.push_back({tgt(t), PayloadKind::Ir, {}, "// row_sum IR for " + std::string(t)});
  }
  in.kernels = {vadd, rows};
  return in;
}

// The smallest useful bundle: one kernel, one target, one cubin.
std::string smallBundle() {
  BundleInput in;
  in.name = "small";
  in.targets = {tgt("sm_80")};
  in.producer = "truenoc test";
  in.ptxasVersion = "13.0.88";
  in.kernels.push_back({"k", {{"n", kU32, 0}}, rule({64}, {"ceil_div(n, 64)"}), {}});
  in.kernels[0].payloads.push_back({tgt("sm_80"), PayloadKind::Cubin, Resources{8, 0, 0, 0, 0, 0, 0}, "ELF cubin bytes"});
  Result<std::string> b = write(in);
  REQUIRE(b.ok());
  return *b;
}

// Two kernels whose cubins are one module (one payload, format 6), one target, no IR.
BundleInput moduleInput() {
  BundleInput in;
  in.name = "mod";
  in.targets = {tgt("sm_90")};
  in.producer = "truenoc test";
  in.ptxasVersion = "13.0.88";
  in.modules.push_back({tgt("sm_90"), "ELF module of a and b"});
  for (const char* name : {"b", "a"}) {
    in.kernels.push_back({name, {{"n", kU32, 0}}, rule({64}, {"ceil_div(n, 64)"}), {}});
    in.kernels.back().payloads.push_back({tgt("sm_90"), PayloadKind::Cubin, Resources{name[0] == 'a' ? 8u : 9u, 0, 0, 0, 0, 0, 0}, {}, 0});
  }
  return in;
}
std::string moduleBundle() {
  Result<std::string> b = write(moduleInput());
  REQUIRE(b.ok());
  return *b;
}

const ParamType kTmap{S::TensorMap};

// A kernel with one tensor map over A[m][k] (bf16, leading dimension lda): the contract's example.
std::vector<Param> tmaParams() {
  return {{"a", kPtr, 16, kPtrRead, S::BF16}, {"a_map", kTmap, 0}, {"m", kU32, 0}, {"k", kU32, 0}, {"lda", kU32, 0}};
}
TensorMapRule aMap() {
  return {"a_map", "a", S::BF16, {Expr::param("k"), Expr::param("m")}, {Expr::param("lda") * 2}, {64, 128}, 128};
}
// The same over a batch of A matrices, stride_a elements apart (format 8).
std::vector<Param> batchedTmaParams() {
  std::vector<Param> p = tmaParams();
  p.push_back({"batch", kU32, 0});
  p.push_back({"stride_a", ParamType{S::U64}, 0});
  return p;
}
TensorMapRule batchedAMap() {
  TensorMapRule m = aMap();
  m.dims.push_back(Expr::param("batch"));
  m.strides.push_back(Expr::param("stride_a") * 2);
  m.box.push_back(1);
  return m;
}

// One kernel with a tensor map, one target, one cubin: a format 5 bundle (batched: a map of rank
// 3, format 8).
std::string tmaBundle(bool batched = false) {
  BundleInput in;
  in.name = "tma";
  in.targets = {tgt("sm_90a")};
  in.producer = "truenoc test";
  in.ptxasVersion = "13.0.88";
  LaunchRule r = rule({128}, {"ceil_div(m, 128)"});
  r.tensorMaps.push_back(batched ? batchedAMap() : aMap());
  in.kernels.push_back({"load", batched ? batchedTmaParams() : tmaParams(), r, {}});
  in.kernels[0].payloads.push_back({tgt("sm_90a"), PayloadKind::Cubin, {}, "ELF cubin bytes"});
  Result<std::string> b = write(in);
  REQUIRE(b.ok());
  return *b;
}

// One kernel whose sm_90a code takes a tensor map and another launch rule than its sm_80 and
// sm_90 code (a variant, format 7), as a template entry with mainloop = "auto" builds it.
BundleInput variantInput() {
  BundleInput in;
  in.name = "auto";
  in.targets = {tgt("sm_80"), tgt("sm_90"), tgt("sm_90a")};
  in.producer = "truenoc test";
  in.ptxasVersion = "13.0.88";
  std::vector<Param> own = tmaParams();
  own.erase(own.begin() + 1);  // no a_map
  own[0].align = 0;
  in.kernels.push_back({"load", own, rule({256}, {"ceil_div(m, 64)", "2"}), {}});
  LaunchRule wgmma = rule({384}, {"min(ceil_div(m, 128), 132)"}, "98304");
  wgmma.tensorMaps.push_back(aMap());
  in.kernels[0].variants.push_back({{tgt("sm_90a")}, tmaParams(), wgmma});
  for (const char* t : {"sm_80", "sm_90", "sm_90a"})
    in.kernels[0].payloads.push_back({tgt(t), PayloadKind::Cubin, {}, std::string("ELF cubin for ") + t});
  return in;
}
std::string variantBundle() {
  Result<std::string> b = write(variantInput());
  REQUIRE_MESSAGE(b.ok(), b.error().message);
  return *b;
}

std::span<const uint8_t> span(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

// Opens and fully verifies; the error message, or "" when the bundle is accepted.
std::string check(const std::string& bytes) {
  Result<Reader> r = Reader::open(span(bytes));
  if (!r) return r.error().message;
  if (auto bad = r->verifyPayloads()) return bad->message;
  return "";
}

void putU64(std::string& s, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) s[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint64_t getU64(const std::string& s, size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(s[at + i])) << (8 * i);
  return v;
}

// Recomputes every checksum (docs/bundle-format.md), so that a test can reach the structural
// checks behind them.
void reseal(std::string& b) {
  for (size_t i = 0; i < 2; ++i) {
    size_t entry = kHeaderSize + i * kSectionEntrySize;
    uint64_t off = getU64(b, entry + 8), size = getU64(b, entry + 16);
    if (off > b.size() || size > b.size() - off) continue;
    putU64(b, entry + 24, fnv1a64(span(b).subspan(off, size)));
  }
  uint64_t h = fnv1a64(span(b).subspan(0, 48));
  h = fnv1a64(span(b).subspan(kHeaderSize, 2 * kSectionEntrySize), h);
  putU64(b, 48, h);
}

// A zstd frame (RFC 8878) that inflates to `size` zero bytes: RLE blocks of up to 128 KiB, four
// bytes each, so a 256 MiB payload costs 8 KiB, as in a hostile bundle.
std::string zeroFrame(uint32_t size) {
  std::string f = {'\x28', '\xb5', '\x2f', '\xfd', '\xa0'};  // magic; single segment, 4-byte content size
  for (int i = 0; i < 4; ++i) f += static_cast<char>(size >> (8 * i));
  for (uint32_t done = 0; done < size;) {
    uint32_t n = std::min<uint32_t>(size - done, 128u << 10);
    done += n;
    uint32_t header = n << 3 | 1u << 1 | (done == size ? 1u : 0u);  // size, RLE block, last block
    for (int i = 0; i < 3; ++i) f += static_cast<char>(header >> (8 * i));
    f += '\0';  // the byte repeated
  }
  return f;
}

// A bundle encoded by hand from docs/bundle-format.md rather than by the writer, so that a test
// can build what the writer refuses to write. Its kernels have no parameters and launch [1]
// threads on a grid of [1].
struct HandBundle {
  uint32_t version = 4;  // 5 and 6: a tensor-map count (0) after the dynamic shared memory
  uint32_t flags = 0;
  std::string ptxas = "13.0.88";
  std::vector<std::string> targets = {"sm_80"};
  std::vector<std::pair<std::string, std::vector<Entry>>> kernels;
  std::string payloads;

  // Appends a payload (one zstd frame inflating to `raw`) and returns an entry referring to it.
  Entry add(const std::string& frame, const std::string& raw, PayloadKind kind = PayloadKind::Cubin) {
    Entry e;
    e.kind = kind;
    e.offset = payloads.size();
    e.compressedSize = frame.size();
    e.rawSize = raw.size();
    e.rawChecksum = fnv1a64(span(raw));
    payloads += frame;
    return e;
  }

  std::string bytes() const {
    std::string m;
    auto u32 = [&](uint32_t v) { m.append(reinterpret_cast<const char*>(&v), 4); };  // test hosts are little-endian
    auto u64 = [&](uint64_t v) { m.append(reinterpret_cast<const char*>(&v), 8); };
    auto str = [&](const std::string& v) {
      u32(static_cast<uint32_t>(v.size()));
      m += v;
    };
    str("hand");
    u32(flags);
    str(ptxas);
    u32(static_cast<uint32_t>(targets.size()));
    for (const std::string& t : targets) str(t);
    u32(static_cast<uint32_t>(kernels.size()));
    for (const auto& [name, entries] : kernels) {
      str(name);
      u32(0);  // parameters
      u32(1);
      u32(1);  // block [1]
      u32(1);
      str("1");  // grid [1]
      str("0");  // dynamic shared memory
      if (version >= 5) u32(0);  // tensor maps
      u32(static_cast<uint32_t>(entries.size()));
      for (const Entry& e : entries) {
        u32(e.target);
        u32(static_cast<uint32_t>(e.kind));
        const Resources& r = e.resources;
        for (uint32_t v : {r.registers, r.barriers, r.sharedBytes, r.constBytes, r.stackBytes, r.spillStores, r.spillLoads}) u32(v);
        for (uint64_t v : {e.offset, e.compressedSize, e.rawSize, e.rawChecksum}) u64(v);
      }
    }
    const uint64_t manifestAt = kHeaderSize + 2 * kSectionEntrySize;
    std::string b(manifestAt, '\0');
    std::memcpy(b.data(), "\x89TNB\r\n\x1a\n", 8);
    b[8] = static_cast<char>(version);
    b[12] = 2;  // sections
    putU64(b, 16, manifestAt + m.size() + payloads.size());
    std::memcpy(b.data() + 24, "truenoc test", 12);
    b[kHeaderSize] = 1;  // the manifest section
    putU64(b, kHeaderSize + 8, manifestAt);
    putU64(b, kHeaderSize + 16, m.size());
    b[kHeaderSize + kSectionEntrySize] = 2;  // the payload section
    putU64(b, kHeaderSize + kSectionEntrySize + 8, manifestAt + m.size());
    putU64(b, kHeaderSize + kSectionEntrySize + 16, payloads.size());
    b += m + payloads;
    reseal(b);
    return b;
  }
};

// Reader::open's error message ("" when it accepts), and how long it took.
std::string openTimed(const std::string& bytes, double& seconds) {
  auto start = std::chrono::steady_clock::now();
  Result<Reader> r = Reader::open(span(bytes));
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r ? "" : r.error().message;
}

}  // namespace

TEST_CASE("bundle: round trip through writer and reader") {
  Result<std::string> bytes = write(sampleInput());
  REQUIRE(bytes.ok());
  Result<Reader> r = Reader::open(span(*bytes));
  REQUIRE_MESSAGE(r.ok(), r.error().message);
  CHECK(r->producer() == "truenoc test");
  const Manifest& m = r->manifest();
  CHECK(m.name == "sample");
  CHECK(m.ptxFallback);
  CHECK(m.ir);
  CHECK(m.ptxasVersion == "13.0.88");
  CHECK(m.targets == std::vector<Target>{tgt("sm_80"), tgt("sm_90")});
  REQUIRE(m.kernels.size() == 2);
  CHECK(m.kernels[0].name == "row_sum");  // sorted by name
  CHECK(m.kernels[1].name == "vadd");

  const KernelInfo& rows = m.kernels[0];
  CHECK(rows.params == std::vector<Param>{{"x", kPtr, 0, kPtrRead | kPtrWritten}, {"y", kPtr, 0, kPtrEscapes}, {"cols", kU32, 0}, {"rows", kU64, 0}});
  CHECK(rows.launch == rule({128, 2}, {"rows", "max(cols / 64, 1)"}, "min(cols, 1024) * 4"));
  CHECK(describe(rows.launch) == "block [128, 2], grid [rows, max(cols / 64, 1)], dynamic_shared min(cols, 1024) * 4");
  REQUIRE(rows.entries.size() == 6);
  const Entry* cubin90 = rows.find(1, PayloadKind::Cubin);
  REQUIRE(cubin90);
  CHECK(cubin90->resources == Resources{20, 1, 32, 376, 8, 4, 4});
  Result<std::string> payload = r->payload(*cubin90);
  REQUIRE(payload.ok());
  CHECK(*payload == noise(500, '9'));
  const Entry* ptx80 = rows.find(0, PayloadKind::Ptx);
  REQUIRE(ptx80);
  CHECK(ptx80->resources == Resources{});
  CHECK(*r->payload(*ptx80) == "// row_sum PTX for sm_80");
  const Entry* ir90 = rows.find(1, PayloadKind::Ir);
  REQUIRE(ir90);
  CHECK(ir90->resources == Resources{});
  CHECK(*r->payload(*ir90) == "// row_sum IR for sm_90");
  CHECK(payloadKindName(ir90->kind) == "ir");

  const KernelInfo& vadd = m.kernels[1];
  CHECK(vadd.params[0].align == 16);
  CHECK(*r->payload(*vadd.find(0, PayloadKind::Cubin)) == "cubin of vadd for sm_80" + noise(300, '8'));
  CHECK(*r->payload(*vadd.find(0, PayloadKind::Ir)) == "target sm_80\n\nkernel @vadd() {\n^entry:\n  ret\n}\n");
  CHECK_FALSE(r->verifyPayloads().has_value());
  CHECK(r->stats().fileBytes == bytes->size());
  CHECK(r->stats().rawPayloadBytes > r->stats().payloadSectionBytes / 2);
}

TEST_CASE("bundle: output is canonical and reproducible") {
  BundleInput in = sampleInput();
  Result<std::string> a = write(in);
  Result<std::string> b = write(in);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(*a == *b);
  // Input order does not matter: kernels, targets and payloads are sorted.
  std::reverse(in.kernels.begin(), in.kernels.end());
  std::reverse(in.targets.begin(), in.targets.end());
  for (KernelInput& k : in.kernels) std::reverse(k.payloads.begin(), k.payloads.end());
  Result<std::string> c = write(in);
  REQUIRE(c.ok());
  CHECK(*a == *c);
}

TEST_CASE("bundle: the compression threads change no byte; a target may hold several modules") {
  BundleInput in = sampleInput();
  // Two modules of sm_90 (kernels m0..m2 in one, m3..m5 in the other) beside the sample's payloads.
  in.modules.push_back({tgt("sm_90"), "ELF module 0" + noise(4000, 7)});
  in.modules.push_back({tgt("sm_90"), "ELF module 1" + noise(3000, 9)});
  for (uint32_t i = 0; i < 6; ++i) {
    KernelInput k{"m" + std::to_string(i), {{"n", kU32, 0}}, rule({64}, {"ceil_div(n, 64)"}), {}};
    k.payloads.push_back({tgt("sm_90"), PayloadKind::Cubin, Resources{8 + i, 0, 0, 0, 0, 0, 0}, {}, i / 3});
    k.payloads.push_back({tgt("sm_80"), PayloadKind::Cubin, Resources{8, 0, 0, 0, 0, 0, 0}, noise(200 + i, i)});
    for (const char* t : {"sm_80", "sm_90"}) {
      k.payloads.push_back({tgt(t), PayloadKind::Ptx, {}, "// PTX of m" + std::to_string(i) + noise(100, i + 20)});
      k.payloads.push_back({tgt(t), PayloadKind::Ir, {}, "// IR of m" + std::to_string(i)});
    }
    in.kernels.push_back(std::move(k));
  }
  Result<std::string> one = write(in);
  REQUIRE(one.ok());
  for (unsigned threads : {2u, 3u, 64u}) {
    Result<std::string> many = write(in, {.threads = threads});
    REQUIRE(many.ok());
    CHECK_MESSAGE(*many == *one, threads, " threads");
  }
  Result<Reader> r = Reader::open(span(*one));
  REQUIRE_MESSAGE(r.ok(), r.error().message);
  CHECK_FALSE(r->verifyPayloads().has_value());
  std::set<uint64_t> moduleOffsets;
  for (uint32_t i = 0; i < 6; ++i) {
    const KernelInfo* k = r->manifest().find("m" + std::to_string(i));
    REQUIRE(k);
    const Entry* e = k->find(1, PayloadKind::Cubin);  // sm_90
    REQUIRE(e);
    moduleOffsets.insert(e->offset);
    Result<std::string> bytes = r->payload(*e);
    REQUIRE(bytes.ok());
    CHECK(*bytes == in.modules[i / 3].bytes);
    CHECK(e->resources.registers == 8 + i);
  }
  CHECK(moduleOffsets.size() == 2);
}

TEST_CASE("bundle: targets sort by architecture") {
  std::vector<Target> t;
  for (const char* name : {"sm_100", "sm_90a", "sm_75", "sm_90", "sm_121a", "sm_86"}) t.push_back(tgt(name));
  std::sort(t.begin(), t.end());
  std::string order;
  for (const Target& x : t) order += x.name() + " ";
  CHECK(order == "sm_75 sm_86 sm_90 sm_90a sm_100 sm_121a ");
}

TEST_CASE("target: the one parser, the supported set and minimum PTX versions") {
  CHECK(tgt("sm_90a") == Target{90, true});
  CHECK(tgt("sm_120") == Target{120, false});
  for (const char* bad : {"sm_9", "sm_090", "sm_0", "compute_90", "sm_90b", "sm_1000", "sm_", "SM_90", "sm_9a0", ""})
    CHECK_FALSE_MESSAGE(Target::parse(bad).has_value(), bad);
  CHECK(Target::parse("sm_999").has_value());  // syntax only: a newer truenoc's bundle still reads
  std::string why;
  CHECK_FALSE(Target::parseSupported("sm_999", why).has_value());
  CHECK(why.starts_with("unsupported target 'sm_999' (supported: sm_75, sm_80, "));
  CHECK_FALSE(Target::parseSupported("sm_70", why).has_value());
  CHECK_FALSE(Target::parseSupported("sm_80a", why).has_value());  // no arch-specific variant before sm_90a
  CHECK_FALSE(Target::parseSupported("sm_x", why).has_value());
  CHECK(why.starts_with("invalid target 'sm_x' (supported: "));
  for (const Target& t : supportedTargets()) {
    CHECK(Target::parse(t.name()) == t);
    CHECK(t.supported());
  }
  CHECK(Target{90, false}.minPtx() == 78);
  CHECK(Target{90, true}.minPtx() == 80);
  CHECK(Target{120, false}.minPtx() == 87);
  CHECK(Target{75, false}.minPtx() == 63);
  std::string defaults;
  for (const Target& t : defaultTargets()) defaults += t.name() + " ";
  CHECK(defaults == "sm_80 sm_86 sm_89 sm_90 ");
}

TEST_CASE("parameter types: the manifest code round-trips and nothing else decodes") {
  unsigned valid = 0;
  for (uint32_t code = 0; code < (1u << 20); ++code) {
    std::optional<ParamType> t = ParamType::decode(code);
    if (!t) continue;
    ++valid;
    CHECK(t->code() == code);
  }
  CHECK(valid == 5 + 18 + 16 * 2);  // pointers in 5 spaces, 17 scalars and tmap, v2/v4 of all but pred and tmap
  CHECK((ParamType{S::TensorMap}.name()) == "tmap");
  CHECK_FALSE(ParamType::decode(ParamType{S::TensorMap, 2}.code()).has_value());
  CHECK_FALSE(ParamType::decode(kU32.code() | 1u << 24).has_value());
  CHECK(kPtr.name() == "ptr.global");
  CHECK((ParamType{S::F32, 4}.name()) == "v4.f32");
  CHECK(kS32.integerBytes() == 4);
  CHECK(kS32.isSignedInteger());
  CHECK(ParamType{S::B8}.integerBytes() == 1);
  CHECK(kF32.integerBytes() == 0);
  CHECK(kPtr.integerBytes() == 0);
  CHECK((ParamType{S::U64, 2}.integerBytes()) == 0);
}

TEST_CASE("bundle: every single-byte change of a small bundle is rejected") {
  for (const std::string& good : {smallBundle(), moduleBundle(), variantBundle()}) {
  REQUIRE(check(good).empty());
  CHECK(good.size() < 1000);
  for (size_t i = 0; i < good.size(); ++i) {
    for (unsigned x = 1; x < 256; ++x) {
      std::string bad = good;
      bad[i] = static_cast<char>(static_cast<uint8_t>(bad[i]) ^ x);
      Result<Reader> r = Reader::open(span(bad));
      if (r.ok()) FAIL("byte " << i << " xor " << x << " was accepted");
      if (r.error().message.empty()) FAIL("byte " << i << " xor " << x << " was rejected without a message");
    }
  }
  }
}

TEST_CASE("bundle: Verify::Used leaves the payload section to each payload's own checksum") {
  // Every single-byte change is still caught: by open, or by decompressing the payload it damaged.
  for (const std::string& good : {smallBundle(), moduleBundle()}) {
  size_t caughtLate = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    for (unsigned x : {0x01u, 0x80u, 0xFFu}) {
      std::string bad = good;
      bad[i] = static_cast<char>(static_cast<uint8_t>(bad[i]) ^ x);
      Result<Reader> r = Reader::open(span(bad), Verify::Used);
      if (!r.ok()) continue;
      std::optional<Error> e = r->verifyPayloads();
      if (!e) FAIL("byte " << i << " xor " << x << " was accepted");
      else if (e->message.find("corrupt bundle: cubin for sm_") == std::string::npos) FAIL(e->message);
      ++caughtLate;
    }
  }
  CHECK(caughtLate > 0);  // the payload section's bytes
  }

  // Damage in one kernel's payload: the others read, that one refused by name of its entry.
  BundleInput in = sampleInput();
  Result<std::string> b = write(in);
  REQUIRE(b.ok());
  Result<Reader> clean = Reader::open(span(*b));
  REQUIRE(clean.ok());
  const Entry& victim = clean->manifest().kernels[0].entries[0];
  std::string bad = *b;
  size_t payloadsAt = b->size() - clean->stats().payloadSectionBytes;
  bad[payloadsAt + victim.offset + victim.compressedSize / 2] ^= 0x5A;
  CHECK(check(bad) == "corrupt bundle: payload section checksum mismatch");
  Result<Reader> used = Reader::open(span(bad), Verify::Used);
  REQUIRE(used.ok());
  CHECK_FALSE(used->payload(used->manifest().kernels[0].entries[0]).ok());
  for (const KernelInfo& k : used->manifest().kernels)
    for (const Entry& e : k.entries)
      if (&k != &used->manifest().kernels[0] || &e != &k.entries[0]) CHECK(used->payload(e).ok());
}

TEST_CASE("bundle: every truncation and any extension is rejected") {
  const std::string good = smallBundle();
  for (const std::string& b : {good, variantBundle()})
    for (size_t n = 0; n < b.size(); ++n) {
      Result<Reader> r = Reader::open(span(b.substr(0, n)));
      if (r.ok()) FAIL("truncation to " << n << " bytes was accepted");
    }
  CHECK(check(good.substr(0, 5)) == "not a truenoc bundle: 5 bytes is too short");
  CHECK(check(good.substr(0, 100)) == "truncated bundle: 100 bytes end inside the header");
  CHECK(check(good.substr(0, good.size() - 1)) ==
        "truncated bundle: the header records " + std::to_string(good.size()) + " bytes, only " + std::to_string(good.size() - 1) + " present");
  CHECK(check(good + "x") == "corrupt bundle: 1 bytes after the recorded end");
}

TEST_CASE("bundle: pointer access and element types are written, read back and checked") {
  Result<std::string> b = write(sampleInput());
  REQUIRE(b.ok());
  auto r = Reader::open(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(b->data()), b->size()));
  REQUIRE(r.ok());
  const KernelInfo* vadd = r->manifest().find("vadd");
  REQUIRE(vadd != nullptr);
  CHECK(vadd->params[0].access == kPtrRead);
  CHECK(vadd->params[0].element == ParamType::Scalar::F32);
  CHECK(vadd->params[0].readOnly());
  CHECK_FALSE(vadd->params[2].readOnly());
  CHECK(accessName(vadd->params[2].access) == "write");
  const KernelInfo* rows = r->manifest().find("row_sum");
  REQUIRE(rows != nullptr);
  CHECK(accessName(rows->params[0].access) == "read-write");
  CHECK(accessName(rows->params[1].access) == "escapes");
  CHECK_FALSE(rows->params[1].readOnly());
  CHECK_FALSE(rows->params[0].element.has_value());

  BundleInput bad = sampleInput();
  bad.kernels[0].params[3].access = kPtrRead;  // n: u32
  Result<std::string> w = write(bad);
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().message == "kernel 'vadd': parameter 'n' has invalid pointer access 1");
  bad = sampleInput();
  bad.kernels[0].params[3].element = ParamType::Scalar::F32;
  w = write(bad);
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().message == "kernel 'vadd': parameter 'n' has invalid element type 16");
  bad = sampleInput();
  bad.kernels[0].params[0].access = 8;
  w = write(bad);
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().message == "kernel 'vadd': parameter 'a' has invalid pointer access 8");
}

TEST_CASE("bundle: specific errors for magic, version, checksums") {
  const std::string good = smallBundle();
  std::string b = good;
  b[1] = 'X';
  CHECK(check(b) == "not a truenoc bundle (bad magic)");
  b = good;
  b[8] = 3;
  CHECK(check(b) == "bundle format version 3 is older than this truenoc reads (versions 4 to 10); rebuild the bundle with this truenoc");
  b[8] = 1;
  CHECK(check(b) == "bundle format version 1 is older than this truenoc reads (versions 4 to 10); rebuild the bundle with this truenoc");
  b[8] = 11;
  CHECK(check(b) == "unsupported bundle format version 11 (this truenoc reads versions 4 to 10)");
  b[8] = 5;  // a version this reader reads, so the checksum over it is what fails
  CHECK(check(b) == "corrupt bundle: header checksum mismatch");
  b = good;
  b.back() ^= 1;
  CHECK(check(b) == "corrupt bundle: payload section checksum mismatch");
  b = good;
  b[kHeaderSize + 2 * kSectionEntrySize + 3] ^= 1;
  CHECK(check(b) == "corrupt bundle: manifest section checksum mismatch");
  b = good;
  b[30] ^= 1;
  CHECK(check(b) == "corrupt bundle: header checksum mismatch");
}

TEST_CASE("bundle: hostile manifests with valid checksums are rejected, never trusted") {
  // Every byte of the header, table and manifest changed to a few values, checksums recomputed:
  // the reader must either reject the input or return a self-consistent bundle, whose launch
  // rules (tensor maps included, in the format 5 bundle) check and evaluate without harm.
  for (const std::string& good : {smallBundle(), tmaBundle(), tmaBundle(true), variantBundle()}) {
    uint64_t manifestEnd = getU64(good, kHeaderSize + 8) + getU64(good, kHeaderSize + 16);
    size_t accepted = 0, rejected = 0;
    for (size_t i = 0; i < manifestEnd; ++i) {
      if (i >= 48 && i < 56) continue;  // the header checksum itself
      for (uint8_t v : {uint8_t{0}, uint8_t{1}, uint8_t{0x7f}, uint8_t{0x80}, uint8_t{0xff}}) {
        std::string bad = good;
        if (static_cast<uint8_t>(bad[i]) == v) continue;
        bad[i] = static_cast<char>(v);
        reseal(bad);
        Result<Reader> r = Reader::open(span(bad));
        if (!r) {
          CHECK_FALSE(r.error().message.empty());
          ++rejected;
          continue;
        }
        ++accepted;  // e.g. a changed resource count: still a well-formed bundle
        for (const KernelInfo& k : r->manifest().kernels) {
          for (const Entry& e : k.entries) {
            CHECK(e.target < r->manifest().targets.size());
            Result<std::string> p = r->payload(e);
            if (p) CHECK(p->size() == e.rawSize);
          }
          for (uint32_t t = 0; t < r->manifest().targets.size(); ++t) {  // the kernel's own code and its variants'
            const std::vector<Param>& params = k.paramsFor(t);
            CHECK_FALSE(checkRule(k.launchFor(t), params).has_value());
            std::vector<uint64_t> values(params.size(), 4096);
            std::vector<const void*> args;
            for (const uint64_t& x : values) args.push_back(&x);
            (void)evaluateTensorMaps(k.launchFor(t), params, args.data());
          }
        }
      }
    }
    CHECK(rejected > accepted);
  }
}

TEST_CASE("bundle: oversized counts and sizes are rejected before allocation") {
  BundleInput in;
  in.name = "big";
  in.targets = {tgt("sm_80")};
  in.producer = "truenoc test";
  in.ptxasVersion = "13.0.88";
  in.kernels.push_back({"k", {}, rule({1}, {"1"}), {}});
  in.kernels[0].payloads.push_back({tgt("sm_80"), PayloadKind::Cubin, {}, "x"});
  std::string b = *write(in);
  size_t manifest = getU64(b, kHeaderSize + 8);
  // The manifest starts with the bundle name's length: claim 4 GiB.
  std::string bad = b;
  for (int i = 0; i < 4; ++i) bad[manifest + i] = '\xff';
  reseal(bad);
  CHECK(check(bad) == "corrupt bundle: bundle name is 4294967295 bytes long; the limit is 4096");
  // The payload section's size in the table: claim more than the file.
  bad = b;
  putU64(bad, kHeaderSize + kSectionEntrySize + 16, 1ull << 40);
  reseal(bad);
  CHECK(check(bad).starts_with("corrupt bundle: payload section ["));
}

TEST_CASE("bundle: the writer refuses what the reader would reject") {
  BundleInput in = sampleInput();
  in.ptxFallback = false;
  CHECK(write(in).error().message == "kernel 'row_sum': PTX payloads need the PTX fallback flag");
  in = sampleInput();
  in.kernels[1].name = "vadd";
  CHECK(write(in).error().message == "duplicate kernel 'vadd'");
  in = sampleInput();
  in.kernels[0].payloads.resize(3);  // only sm_90 left for vadd
  CHECK(write(in).error().message == "kernel 'vadd' has no cubin or PTX payload for sm_80");
  in = sampleInput();
  in.kernels[0].payloads.erase(in.kernels[0].payloads.begin() + 2);  // vadd's IR for sm_90
  CHECK(write(in).error().message == "kernel 'vadd' has no IR payload for sm_90");
  in = sampleInput();
  in.ir = false;
  CHECK(write(in).error().message == "kernel 'row_sum': IR payloads need the IR flag");
  in = sampleInput();
  in.ptxasVersion = "";
  CHECK(write(in).error().message == "the bundle has cubins but does not record the ptxas version that assembled them");
  in = sampleInput();
  for (KernelInput& k : in.kernels)
    std::erase_if(k.payloads, [](const PayloadInput& p) { return p.kind == PayloadKind::Cubin; });
  CHECK(write(in).error().message == "the bundle records ptxas version '13.0.88' but has no cubins");
  in.ptxasVersion = "";
  CHECK(write(in).ok());  // a PTX-only bundle
  in = sampleInput();
  in.kernels[0].launch = rule({256}, {"ceil_div(count, 256)"});
  CHECK(write(in).error().message == "kernel 'vadd': launch rule grid[0]: 'count' is not a parameter of the kernel");
  in = sampleInput();
  in.name = "has space";
  CHECK(write(in).error().message == "bundle name 'has space' is not an identifier");
  in = sampleInput();
  in.targets.push_back(Target{9, false});
  CHECK(write(in).error().message == "invalid target 'sm_9'");
}

TEST_CASE("launch rule: expressions built in code are the ones the parser builds") {
  Expr rows = Expr::param("rows"), cols = Expr::param("cols");
  Expr big = min(1, cols / 1025);
  Expr built = (ceilDiv(rows, 8) * (1 - big) + rows * big) * min(1, cols);
  Expr parsed = expr("(ceil_div(rows, 8) * (1 - min(1, cols / 1025)) + rows * min(1, cols / 1025)) * min(1, cols)");
  CHECK(built.text() == parsed.text());
  REQUIRE(built.refs().size() == 2);
  CHECK(built.refs()[0].name == "rows");  // first-use order, each name once
  CHECK(built.refs()[1].name == "cols");
  for (uint64_t r : {0u, 1u, 9u, 100000u})
    for (uint64_t c : {0u, 1u, 1024u, 1025u, 70000u}) {
      const uint64_t values[] = {r, c};
      CHECK(*built.evaluate(values) == *parsed.evaluate(values));
    }
  CHECK((ceilDiv(Expr::param("q") + Expr::param("k"), 4)).text() == "ceil_div(q + k, 4)");
  CHECK((Expr::param("a") - (Expr::param("b") - Expr::param("c"))).text() == "a - (b - c)");
  CHECK(Expr(7).constantValue() == 7u);
}

TEST_CASE("launch rule: parsing, canonical text and errors with columns") {
  CHECK(expr("ceil_div( n ,256 )").text() == "ceil_div(n, 256)");
  CHECK(expr("(a + b) * c - (d - e) - f").text() == "(a + b) * c - (d - e) - f");
  CHECK(expr("a / (b * c) % 7").text() == "a / (b * c) % 7");
  CHECK(expr("max(min(a, b), 1) + 2 * 3").text() == "max(min(a, b), 1) + 2 * 3");
  Expr e = expr("n * m + n");
  REQUIRE(e.refs().size() == 2);
  CHECK(e.refs()[0].name == "n");
  CHECK(e.refs()[1].name == "m");
  CHECK(e.refs()[1].column == 5);

  struct Bad {
    const char* text;
    const char* message;
    uint32_t column;
  };
  for (const Bad& b : {Bad{"", "empty expression", 1}, Bad{"n +", "expected a number, a parameter name or '(' but found end of expression", 4},
                       Bad{"ceil_div(n)", "expected ',' but found ')'", 11}, Bad{"floor(n, 2)", "unknown function 'floor' (expected ceil_div, min or max)", 1},
                       Bad{"n 2", "unexpected '2'", 3}, Bad{"min", "'min' is a function and needs two arguments", 1},
                       Bad{"99999999999999999999", "integer literal does not fit in 64 bits", 1}, Bad{"2n", "unexpected 'n' in integer literal", 2},
                       Bad{"(n", "expected ')' but found end of expression", 3}, Bad{"-n", "expected a number, a parameter name or '(' but found '-'", 1}}) {
    Result<Expr> r = Expr::parse(b.text);
    REQUIRE_MESSAGE(!r.ok(), b.text);
    CHECK(r.error().message == b.message);
    CHECK(r.error().column == b.column);
  }
  std::string deep(100, '(');
  deep += "1" + std::string(100, ')');
  CHECK(Expr::parse(deep).error().message == "expression is nested more than 64 levels deep");
  CHECK(Expr::parse(std::string(2000, '1')).error().message == "expression is longer than 1024 characters");
}

TEST_CASE("launch rule: checked unsigned arithmetic") {
  auto eval = [](const char* text, std::vector<uint64_t> v) { return expr(text).evaluate(v); };
  CHECK(*eval("ceil_div(n, 256)", {1000}) == 4);
  CHECK(*eval("ceil_div(n, 256)", {1024}) == 4);
  CHECK(*eval("ceil_div(n, 256)", {0}) == 0);
  CHECK(*eval("n % 7 + n / 7", {50}) == 8);
  CHECK(*eval("min(a, b) * max(a, b)", {3, 5}) == 15);
  CHECK(eval("a - b", {3, 5}).error().message == "'a - b' is negative (3 - 5)");
  CHECK(eval("n / (n - n)", {4}).error().message == "'n / (n - n)' divides by zero");
  CHECK(eval("ceil_div(n, 0)", {4}).error().message == "'ceil_div(n, 0)' divides by zero");
  CHECK(eval("n * n", {1ull << 33}).error().message == "'n * n' overflows 64 bits");
  CHECK(eval("n + 1", {UINT64_MAX}).error().message == "'n + 1' overflows 64 bits");
  CHECK(*eval("18446744073709551615", {}) == UINT64_MAX);
}

TEST_CASE("launch rule: evaluation against kernel arguments") {
  std::vector<Param> params = {{"x", kPtr, 0}, {"rows", kS32, 0}, {"cols", kU16, 0}, {"scale", kF32, 0}};
  LaunchRule r = rule({32, 4}, {"ceil_div(cols, 32)", "ceil_div(rows, 4)"}, "cols * 4");
  CHECK_FALSE(checkRule(r, params).has_value());
  void* x = nullptr;
  int32_t rows = 10;
  uint16_t cols = 100;
  float scale = 2;
  const void* args[] = {&x, &rows, &cols, &scale};
  Result<LaunchDims> d = evaluate(r, params, args);
  REQUIRE(d.ok());
  CHECK(d->grid[0] == 4);
  CHECK(d->grid[1] == 3);
  CHECK(d->grid[2] == 1);
  CHECK(d->block[0] == 32);
  CHECK(d->block[1] == 4);
  CHECK(d->block[2] == 1);
  CHECK(d->dynamicShared == 400);
  rows = -3;
  CHECK(evaluate(r, params, args).error().message == "grid[1]: parameter 'rows' is negative (-3)");
  rows = 8;
  cols = 0;
  CHECK(evaluate(r, params, args)->grid[0] == 0);  // nothing to launch, not an error

  LaunchRule tooBig = rule({1}, {"n * 65536", "1"});
  std::vector<Param> np = {{"n", kU64, 0}};
  uint64_t n = 1ull << 20;
  const void* nargs[] = {&n};
  CHECK(evaluate(tooBig, np, nargs).error().message == "grid[0] = 68719476736 exceeds the limit of 2147483647");

  // Bound once, evaluated per launch: the same values, without looking names up again.
  Result<BoundRule> bound = bindRule(r, params);
  REQUIRE(bound.ok());
  CHECK(bound->grid[0].size() == 1);
  CHECK(bound->grid[0][0].param == 2);
  CHECK(bound->grid[1][0].param == 1);
  CHECK(bound->grid[1][0].isSigned);
  CHECK(bound->dynamicShared[0].bytes == 2);
  cols = 100;
  Result<LaunchDims> bd = evaluate(*bound, args);
  REQUIRE(bd.ok());
  CHECK(bd->grid[0] == 4);
  CHECK(bd->grid[1] == 2);
  CHECK(bd->dynamicShared == 400);
  rows = -3;
  CHECK(evaluate(*bound, args).error().message == "grid[1]: parameter 'rows' is negative (-3)");
  CHECK(bindRule(rule({1}, {"1"}, "width"), params).error().message == "dynamic_shared: 'width' is not a parameter of the kernel");
  CHECK(bindRule(rule({1}, {"1", "scale"}), params).error().message == "grid[1]: parameter 'scale' is not an integer");

  CHECK(checkRule(rule({1}, {"scale"}), params)->error.message == "parameter 'scale' has type 'f32'; launch rules may only read integer parameters");
  CHECK(checkRule(rule({1}, {"1"}, "width"), params)->where() == "dynamic_shared");
  CHECK(checkRule(rule({64, 32}, {"1"}), params)->error.message == "block has 2048 threads; the limit is 1024");
  CHECK(checkRule(rule({1, 1, 65}, {"1"}), params)->error.message == "block dimension 2 must be between 1 and 64, not 65");
}

TEST_CASE("launch rule: least values, and rules that no launch satisfies") {
  auto least = [](const char* text) { return expr(text).leastValue(); };
  CHECK(*least("ceil_div(n, 256)") == 0);
  CHECK(*least("n + 99999999999") == 99999999999ull);
  CHECK(*least("max(n, 70000) * 2") == 140000);
  CHECK(*least("min(n, 70000)") == 0);
  CHECK(*least("ceil_div(n + 1000, 256)") == 4);
  CHECK(*least("(n + 10) / 3") == 3);
  CHECK(*least("(n + 10) % 3") == 0);
  CHECK(*least("n - 5") == 0);
  CHECK(*least("(n + 10) - 4") == 6);
  CHECK(*least("10 - n") == 0);
  CHECK(*least("7 * 6 - 2") == 40);
  CHECK(least("n / 0").error().message == "'n / 0' divides by zero for every argument value");
  CHECK(least("n % (4 - 4)").error().message == "'n % (4 - 4)' divides by zero for every argument value");
  CHECK(least("n + (1 - 2)").error().message == "'1 - 2' is negative (1 - 2)");
  CHECK(least("(n + 18446744073709551615) * 2").error().message ==
        "'(n + 18446744073709551615) * 2' overflows 64 bits for every argument value");
  // A division by a name may be by zero for some arguments only: not an error here.
  CHECK(*least("n / m") == 0);

  // The bound is sound: every evaluation that succeeds is at least the least value.
  std::mt19937_64 rng(7);
  const char* exprs[] = {"ceil_div(n + 1000, m + 1)", "(n + 10) - 4", "max(n, 7) * min(m, 3) + 2", "n / (m + 1) + 5",
                         "(n + 3) % (m + 2)", "ceil_div(n * 3, 7) + m - 1"};
  for (const char* text : exprs) {
    Expr e = expr(text);
    uint64_t bound = *e.leastValue();
    for (int i = 0; i < 2000; ++i) {
      uint64_t n = rng() % 5000, m = rng() % 50;
      std::vector<uint64_t> values;
      for (const Expr::Ref& r : e.refs()) values.push_back(r.name == "n" ? n : m);
      if (Result<uint64_t> v = e.evaluate(values)) CHECK_MESSAGE(*v >= bound, text);
    }
  }

  std::vector<Param> params = {{"n", kU64, 0}};
  CHECK(checkRule(rule({1}, {"99999999999"}), params)->error.message ==
        "'99999999999' is 99999999999, over the limit of 2147483647 blocks");
  CHECK(checkRule(rule({1}, {"1", "n + 65536"}), params)->error.message ==
        "'n + 65536' is at least 65536, over the limit of 65535 blocks");
  CHECK(checkRule(rule({1}, {"1", "1", "65535"}), params) == std::nullopt);
  CHECK(checkRule(rule({1}, {"ceil_div(n, 0)"}), params)->error.message ==
        "'ceil_div(n, 0)' divides by zero for every argument value");
  CHECK(checkRule(rule({1}, {"1"}, "n + 4294967296"), params)->error.message ==
        "'n + 4294967296' is at least 4294967296, over the limit of 4294967295 bytes");
  CHECK(checkRule(rule({1}, {"2147483647", "min(n, 65535)"}, "4294967295"), params) == std::nullopt);
}

TEST_CASE("ptxas: resource report parsing") {
  const char* log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'k2' for 'sm_90'\n"
      "ptxas info    : Function properties for k2\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 4 registers, used 0 barriers\n"
      "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
      "ptxas info    : Function properties for k\n"
      "    144 bytes stack frame, 148 bytes spill stores, 152 bytes spill loads\n"
      "ptxas info    : Used 64 registers, used 1 barriers, 64 bytes smem, 364 bytes cmem[0], 8 bytes cmem[2]\n"
      "ptxas info    : Compile time = 2.768 ms\n";
  tn::bundle::Resources r;
  REQUIRE(tn::ptxas::parseResources(log, "k", r));
  CHECK(r == tn::bundle::Resources{64, 1, 64, 364, 144, 148, 152});
  REQUIRE(tn::ptxas::parseResources(log, "k2", r));
  CHECK(r == tn::bundle::Resources{4, 0, 0, 0, 0, 0, 0});
  CHECK_FALSE(tn::ptxas::parseResources(log, "k3", r));
  CHECK_FALSE(tn::ptxas::parseResources("ptxas info    : Compiling entry function 'k' for 'sm_90'\n", "k", r));
}

TEST_CASE("bundle: a hand-encoded bundle reads as the format document says") {
  // The control for the hostile bundles below: the hand encoder and the RLE frames are accepted.
  HandBundle h;
  h.flags = 2;  // IR
  const std::string raw(300000, '\0');
  Entry cubin = h.add(zeroFrame(300000), raw);
  Entry ir = h.add(zeroFrame(300000), raw, PayloadKind::Ir);
  h.kernels = {{"k", {cubin, ir}}};
  std::string bytes = h.bytes();
  Result<Reader> r = Reader::open(span(bytes));
  REQUIRE_MESSAGE(r.ok(), r.error().message);
  CHECK(r->manifest().ir);
  CHECK(r->manifest().ptxasVersion == "13.0.88");
  CHECK_FALSE(r->verifyPayloads().has_value());
  CHECK(*r->payload(r->manifest().kernels[0].entries[1]) == raw);
}

TEST_CASE("bundle: Verify::Used checks a payload by zstd's content checksum where its frame has one, else by FNV-1a") {
  // A frame as the writer makes it (with zstd's checksum), and an RLE frame without one, each
  // recorded in the manifest with the FNV-1a of other bytes of the same length: Verify::All
  // compares the manifest's checksum always; Verify::Used only where zstd has none to compare.
  const std::string good = smallBundle();
  Result<Reader> written = Reader::open(span(good));
  REQUIRE(written.ok());
  const Entry& e = written->manifest().kernels[0].entries[0];
  const size_t payloadsAt = good.size() - written->stats().payloadSectionBytes;
  const std::string withSum = good.substr(payloadsAt + e.offset, e.compressedSize);
  REQUIRE((static_cast<uint8_t>(withSum[4]) & 0x04) != 0);  // RFC 8878: the content checksum flag
  std::string zeros(1000, '\0'), notZeros = zeros;
  notZeros[500] = 'x';
  HandBundle h;
  Entry checked = h.add(withSum, "ELF cubin bytez");  // the frame holds "ELF cubin bytes"
  HandBundle h2;
  Entry unchecked = h2.add(zeroFrame(1000), notZeros);
  h.kernels = {{"k", {checked}}};
  h2.kernels = {{"k", {unchecked}}};
  for (const HandBundle* hb : {&h, &h2}) {
    const std::string bytes = hb->bytes();
    Result<Reader> all = Reader::open(span(bytes), Verify::All), used = Reader::open(span(bytes), Verify::Used);
    REQUIRE(all.ok());
    REQUIRE(used.ok());
    Result<std::string> a = all->payload(all->manifest().kernels[0].entries[0]);
    REQUIRE_FALSE(a.ok());
    CHECK(a.error().message.ends_with(": checksum mismatch"));
    Result<std::string> u = used->payload(used->manifest().kernels[0].entries[0]);
    if (hb == &h) {
      REQUIRE(u.ok());
      CHECK(*u == "ELF cubin bytes");
    } else {
      REQUIRE_FALSE(u.ok());
      CHECK(u.error().message.ends_with(": checksum mismatch"));
    }
  }
}

TEST_CASE("bundle: IR entries, the IR flag and the ptxas version must agree") {
  const std::string raw(1000, '\0'), frame = zeroFrame(1000);
  struct Case {
    const char* what;
    uint32_t flags;
    const char* ptxas;
    std::vector<PayloadKind> kinds;
    const char* error;
  };
  for (const Case& c : {
           Case{"IR flag, no IR entry", 2, "13.0.88", {PayloadKind::Cubin}, "kernel 'k' has no IR payload for sm_80"},
           Case{"IR entry, no IR flag", 0, "13.0.88", {PayloadKind::Cubin, PayloadKind::Ir}, "kernel 'k' entry 1: IR payload in a bundle without the IR flag"},
           Case{"IR only", 2, "", {PayloadKind::Ir}, "kernel 'k' has no cubin or PTX payload for sm_80"},
           Case{"two IR entries", 2, "13.0.88", {PayloadKind::Cubin, PayloadKind::Ir, PayloadKind::Ir}, "kernel 'k' entry 2: entries are not sorted and unique"},
           Case{"four entries for one target", 3, "13.0.88", {PayloadKind::Cubin, PayloadKind::Ptx, PayloadKind::Ir, PayloadKind::Ir}, "entry count is 4; expected 1 to 3"},
           Case{"unknown kind", 2, "13.0.88", {PayloadKind::Cubin, PayloadKind::Ir, PayloadKind{4}}, "kernel 'k' entry 2: unknown payload kind 4"},
           Case{"unknown flag", 4, "13.0.88", {PayloadKind::Cubin}, "unknown manifest flags 4"},
           Case{"cubins, no ptxas version", 0, "", {PayloadKind::Cubin}, "the bundle has cubins but does not record the ptxas version that assembled them"},
           Case{"ptxas version, no cubins", 1, "13.0.88", {PayloadKind::Ptx}, "the bundle records ptxas version '13.0.88' but has no cubins"},
       }) {
    HandBundle h;
    h.flags = c.flags;
    h.ptxas = c.ptxas;
    std::vector<Entry> entries;
    for (PayloadKind k : c.kinds) entries.push_back(h.add(frame, raw, k));
    h.kernels = {{"k", entries}};
    CHECK_MESSAGE(check(h.bytes()) == std::string("corrupt bundle: ") + c.error, c.what);
  }
  HandBundle h;
  h.flags = 2;
  Entry cubin = h.add(frame, raw), ir = h.add(frame, raw, PayloadKind::Ir);
  ir.resources.registers = 8;
  h.kernels = {{"k", {cubin, ir}}};
  CHECK(check(h.bytes()) == "corrupt bundle: kernel 'k' entry 1: IR payload with resource usage");
}

TEST_CASE("bundle: payloads shared between entries are rejected before anything is decompressed") {
  // 64 entries sharing one 8 KiB frame that inflates to 256 MiB: 16 GiB of work for a 15 KB file.
  HandBundle bomb;
  const uint32_t big = 256u << 20;
  Entry shared = bomb.add(zeroFrame(big), std::string());
  shared.rawSize = big;
  for (int i = 0; i < 64; ++i) bomb.kernels.push_back({"k" + std::to_string(100 + i), {shared}});
  std::string bytes = bomb.bytes();
  CHECK(bytes.size() < 22000);
  double seconds = 0;
  CHECK(openTimed(bytes, seconds) == "corrupt bundle: the cubin payload of kernel 'k100' for sm_80 [0, +8201) and the cubin payload of kernel 'k101' "
                                     "for sm_80 [0, +8201) share payload bytes");
  CHECK(seconds < 1.0);  // the manifest alone decides: nothing of the 16 GiB is inflated

  // Overlapping by one byte is sharing too; adjacent is not.
  const std::string raw(1000, '\0'), frame = zeroFrame(1000);
  HandBundle h;
  h.targets = {"sm_80", "sm_90"};
  Entry a = h.add(frame, raw), b = h.add(frame, raw);
  b.target = 1;
  h.kernels = {{"k", {a, b}}};
  CHECK(check(h.bytes()).empty());
  b.offset -= 1;
  h.kernels = {{"k", {a, b}}};
  CHECK(check(h.bytes()) == "corrupt bundle: the cubin payload of kernel 'k' for sm_80 [0, +" + std::to_string(frame.size()) +
                                ") and the cubin payload of kernel 'k' for sm_90 [" + std::to_string(frame.size() - 1) + ", +" +
                                std::to_string(frame.size()) + ") share payload bytes");
}

TEST_CASE("bundle: a module (format 6) is one cubin payload that the cubin entries of one target share") {
  Result<std::string> b = write(moduleInput());
  REQUIRE(b.ok());
  Result<Reader> r = Reader::open(span(*b));
  REQUIRE(r.ok());
  CHECK(r->formatVersion() == 6);
  const Manifest& m = r->manifest();
  REQUIRE(m.kernels.size() == 2);
  const Entry& a = m.kernels[0].entries[0];
  const Entry& bEntry = m.kernels[1].entries[0];
  CHECK(m.kernels[0].name == "a");
  CHECK(a.offset == bEntry.offset);
  CHECK(a.compressedSize == bEntry.compressedSize);
  CHECK(a.resources.registers == 8);  // each kernel keeps its own ptxas report
  CHECK(bEntry.resources.registers == 9);
  CHECK(r->stats().rawPayloadBytes == std::string("ELF module of a and b").size());  // counted once
  CHECK(r->stats().payloadSectionBytes == a.compressedSize);                          // written once
  CHECK(*r->payload(bEntry) == "ELF module of a and b");
  CHECK_FALSE(r->verifyPayloads());
  CHECK(*write(moduleInput()) == *b);  // reproducible

  // A module that only one kernel uses shares nothing: the bundle stays format 4.
  BundleInput one = moduleInput();
  one.kernels.pop_back();
  Result<std::string> single = write(one);
  REQUIRE(single.ok());
  CHECK(Reader::open(span(*single))->formatVersion() == 4);

  // The writer refuses modules the reader would not take.
  auto refused = [](BundleInput in) {
    Result<std::string> w = write(in);
    return w.ok() ? std::string() : w.error().message;
  };
  BundleInput in = moduleInput();
  in.modules.push_back({tgt("sm_90"), "unused"});
  CHECK(refused(in) == "module 1 (sm_90) is used by no kernel");
  in = moduleInput();
  in.kernels[0].payloads[0].bytes = "own bytes";
  CHECK(refused(in) == "kernel 'b': a module entry must be a cubin entry without bytes naming a module of its target");
  in = moduleInput();
  in.kernels[0].payloads[0].kind = PayloadKind::Ptx;
  in.ptxFallback = true;
  CHECK(refused(in) == "kernel 'b': a module entry must be a cubin entry without bytes naming a module of its target");
  in = moduleInput();
  in.kernels[0].payloads[0].module = 3;
  CHECK(refused(in) == "kernel 'b': a module entry must be a cubin entry without bytes naming a module of its target");
  in = moduleInput();
  in.targets.push_back(tgt("sm_80"));
  in.modules.push_back({tgt("sm_80"), "ELF module for sm_80"});
  for (KernelInput& k : in.kernels) k.payloads.push_back({tgt("sm_80"), PayloadKind::Cubin, {}, {}, 0});
  CHECK(refused(in) == "kernel 'b': a module entry must be a cubin entry without bytes naming a module of its target");
  in.modules[0].bytes.clear();
  for (KernelInput& k : in.kernels) k.payloads.back().module = 1;
  CHECK(refused(in) == "module 0 (sm_90) of 0 bytes (must be 1 to " + std::to_string(kMaxPayloadBytes) + ")");
}

TEST_CASE("bundle: only identical cubin entries of one target may share a payload, and only from format 6") {
  const std::string raw(1000, '\0'), frame = zeroFrame(1000);
  HandBundle h;
  h.version = 6;
  const Entry shared = h.add(frame, raw);
  h.kernels = {{"a", {shared}}, {"b", {shared}}, {"c", {shared}}};
  CHECK(check(h.bytes()).empty());
  {
    Result<Reader> r = Reader::open(span(h.bytes()));
    REQUIRE(r.ok());
    CHECK(r->stats().rawPayloadBytes == raw.size());
  }
  const std::string both = "corrupt bundle: the cubin payload of kernel 'a' for sm_80 [0, +" + std::to_string(frame.size()) +
                           ") and the cubin payload of kernel 'b' for sm_80 [0, +" + std::to_string(frame.size()) + ") share payload bytes";
  h.version = 5;  // before modules, sharing is damage
  CHECK(check(h.bytes()) == both);
  h.version = 6;
  h.targets = {"sm_80", "sm_90"};
  Entry other = shared, a90 = h.add(frame, raw), b80 = h.add(frame, raw);
  other.target = a90.target = 1;
  h.kernels = {{"a", {shared, a90}}, {"b", {b80, other}}};
  CHECK(check(h.bytes()) == "corrupt bundle: the cubin payload of kernel 'a' for sm_80 [0, +" + std::to_string(frame.size()) +
                                ") and the cubin payload of kernel 'b' for sm_90 [0, +" + std::to_string(frame.size()) +
                                ") share payload bytes; only cubin entries of one target may share a payload (a module)");
  h.targets = {"sm_80"};
  h.flags = 2;  // IR entries
  Entry ir = shared;
  ir.kind = PayloadKind::Ir;
  Entry irA = h.add(frame, raw, PayloadKind::Ir);
  h.kernels = {{"a", {shared, irA}}, {"b", {b80, ir}}};
  CHECK(check(h.bytes()).find("; only cubin entries of one target may share a payload (a module)") != std::string::npos);
  h.flags = 0;
  Entry longer = shared;
  longer.rawSize = raw.size() + 1;
  h.kernels = {{"a", {shared}}, {"b", {longer}}};
  CHECK(check(h.bytes()) == both + " but record different uncompressed sizes or checksums");
  Entry shorter = shared;
  shorter.compressedSize -= 1;  // overlapping without being the same payload
  h.kernels = {{"a", {shared}}, {"b", {shorter}}};
  CHECK(check(h.bytes()).find("share payload bytes") != std::string::npos);

  // The decompression bound counts a module once: 64 kernels sharing a 256 MiB module are a
  // 256 MiB bundle (rejected as a bomb before format 6, where every entry counted), and open
  // decides from the manifest alone.
  HandBundle many;
  many.version = 6;
  const uint32_t big = 256u << 20;
  Entry module = many.add(zeroFrame(big), std::string());
  module.rawSize = big;
  for (int i = 0; i < 64; ++i) many.kernels.push_back({"k" + std::to_string(100 + i), {module}});
  double seconds = 0;
  CHECK(openTimed(many.bytes(), seconds).empty());
  CHECK(seconds < 1.0);
  Result<Reader> r = Reader::open(span(many.bytes()));
  REQUIRE(r.ok());
  CHECK(r->stats().rawPayloadBytes == big);
}

TEST_CASE("bundle: payloads of more than kMaxTotalRawBytes in all are rejected before anything is decompressed") {
  // Five distinct frames of 256 MiB each: every one within the per-payload cap, 1.25 GiB in all.
  const uint32_t big = 256u << 20;
  const std::string frame = zeroFrame(big);
  auto bundleOf = [&](int kernels) {
    HandBundle h;
    for (int i = 0; i < kernels; ++i) {
      Entry e = h.add(frame, std::string());
      e.rawSize = big;
      h.kernels.push_back({"k" + std::to_string(i), {e}});
    }
    return h.bytes();
  };
  double seconds = 0;
  CHECK(openTimed(bundleOf(4), seconds).empty());  // exactly the cap
  CHECK(openTimed(bundleOf(5), seconds) == "corrupt bundle: the payloads add up to 1342177280 bytes uncompressed; the limit is 1073741824");
  CHECK(seconds < 1.0);
  CHECK(5ull * big > kMaxTotalRawBytes);
}

TEST_CASE("ptxas: version parsing") {
  CHECK(tn::ptxas::parseVersion("ptxas: NVIDIA (R) Ptx optimizing assembler\n"
                                "Copyright (c) 2005-2025 NVIDIA Corporation\n"
                                "Built on Wed_Aug_20_01:55:12_PM_PDT_2025\n"
                                "Cuda compilation tools, release 13.0, V13.0.88\n"
                                "Build cuda_13.0.r13.0/compiler.36424714_0\n") == "13.0.88");
  CHECK(tn::ptxas::parseVersion("Cuda compilation tools, release 12.4, V12.4.131") == "12.4.131");
  CHECK_FALSE(tn::ptxas::parseVersion("ptxas fatal   : Unknown option '--version'\n").has_value());
  CHECK_FALSE(tn::ptxas::parseVersion("release 13.0, V\n").has_value());
  CHECK_FALSE(tn::ptxas::parseVersion("").has_value());
}

#ifdef TRUENOC_HAVE_EMBEDDED_DECODE
constexpr bool kHaveDecodeBundle = true;  // test/decode.tnb, built with ptxas
#else
constexpr bool kHaveDecodeBundle = false;
#endif

TEST_CASE("bundle: the IR in the decode bundle is each kernel as compiled, and reads back" * doctest::skip(!kHaveDecodeBundle)) {
  std::ifstream f(tn::testpaths::inBuild("test/decode.tnb"), std::ios::binary);
  REQUIRE(f);
  std::ostringstream ss;
  ss << f.rdbuf();
  const std::string bytes = ss.str();
  Result<Reader> r = Reader::open(span(bytes));
  REQUIRE_MESSAGE(r.ok(), r.error().message);
  const Manifest& m = r->manifest();
  REQUIRE(m.ir);

  // The same kernels compiled here, as `truenoc build` compiles them.
  const std::string specPath = std::string(TRUENOC_SOURCE_DIR) + "/examples/decode.toml";
  std::ifstream sf(specPath);
  std::ostringstream specText;
  specText << sf.rdbuf();
  tn::ir::Diagnostics sd;
  std::optional<tn::spec::Spec> spec = tn::spec::parseSpec(specText.str(), specPath, std::string(TRUENOC_SOURCE_DIR) + "/examples", sd);
  REQUIRE(spec);
  REQUIRE(m.kernels.size() == spec->kernels.size());
  tn::spec::TirCache tirs;
  size_t checked = 0;
  for (const tn::spec::KernelSpec& ks : spec->kernels) {
    const KernelInfo* k = m.find(ks.name);
    REQUIRE_MESSAGE(k, ks.name);
    tn::ir::Diagnostics d;
    std::optional<tn::spec::Instance> inst = tn::spec::instantiate(*spec, ks, tirs, d);
    REQUIRE(inst);
    for (uint32_t t = 0; t < m.targets.size(); ++t) {
      const Entry* e = k->find(t, PayloadKind::Ir);
      REQUIRE(e);
      Result<std::string> text = r->payload(*e);
      REQUIRE(text.ok());
      INFO(ks.name << " for " << m.targets[t].name());
      tn::ir::Diagnostics pd;
      std::optional<tn::ir::Module> parsed = tn::ir::parseModule(*text, ks.name + ".tir", pd);
      REQUIRE(parsed);
      CHECK(tn::ir::verify(*parsed, pd));
      CHECK(pd.all().empty());
      CHECK(tn::ir::print(*parsed) == *text);
      REQUIRE(parsed->kernels.size() == 1);
      CHECK(parsed->kernels[0].name == ks.name);
      CHECK(parsed->target == m.targets[t]);

      tn::ir::Module compiled = inst->module;
      tn::ir::Diagnostics cd;
      tn::compile::Output out = tn::compile::compile(compiled, m.targets[t], tn::spec::compileOptions(*spec), cd);
      REQUIRE(out.ptx);
      CHECK(tn::ir::print(compiled) == *text);
      ++checked;
    }
  }
  CHECK(checked == spec->kernels.size() * spec->targets.size());
}

TEST_CASE("bundle: tensor-map rules are written as format 5, read back exactly, and bundles without them stay format 4") {
  const std::string b = tmaBundle();
  Result<Reader> r = Reader::open(span(b));
  REQUIRE(r.ok());
  CHECK(r->formatVersion() == 5);
  REQUIRE(r->manifest().kernels.size() == 1);
  const LaunchRule& launch = r->manifest().kernels[0].launch;
  REQUIRE(launch.tensorMaps.size() == 1);
  CHECK(launch.tensorMaps[0] == aMap());
  CHECK(describe(launch.tensorMaps[0]) == "a_map = a as bf16 [k, m] row_stride lda * 2 box [64, 128] swizzle 128");

  Result<std::string> old = write(sampleInput());
  REQUIRE(old.ok());
  Result<Reader> o = Reader::open(span(*old));
  REQUIRE(o.ok());
  CHECK(o->formatVersion() == 4);
  CHECK(static_cast<uint8_t>((*old)[8]) == 4);

  for (size_t n = 0; n < b.size(); ++n)
    if (Reader::open(span(b.substr(0, n))).ok()) FAIL("truncation to " << n << " bytes was accepted");
}

TEST_CASE("bundle: a tensor map of rank 3 is written as format 8 and read back exactly") {
  const std::string b = tmaBundle(true);
  Result<Reader> r = Reader::open(span(b));
  REQUIRE_MESSAGE(r.ok(), r.error().message);
  CHECK(r->formatVersion() == 8);
  const LaunchRule& launch = r->manifest().kernels.at(0).launch;
  REQUIRE(launch.tensorMaps.size() == 1);
  CHECK(launch.tensorMaps[0] == batchedAMap());
  CHECK(launch.tensorMaps[0].rank() == 3);
  CHECK(describe(launch.tensorMaps[0]) ==
        "a_map = a as bf16 [k, m, batch] row_stride lda * 2 plane_stride stride_a * 2 box [64, 128, 1] swizzle 128");
  // Maps of rank 2 keep the older layout: the same rule as a variant's of format 7 reads there.
  CHECK(Reader::open(span(tmaBundle()))->formatVersion() == 5);
  for (size_t n = 0; n < b.size(); ++n)
    if (Reader::open(span(b.substr(0, n))).ok()) FAIL("truncation to " << n << " bytes was accepted");
  // A variant's map of rank 3 makes the bundle format 8 too.
  BundleInput v = variantInput();
  std::vector<Param> own = batchedTmaParams();
  own.erase(own.begin() + 1);  // no a_map
  own[0].align = 0;
  v.kernels[0].params = own;
  v.kernels[0].variants[0].params = batchedTmaParams();
  v.kernels[0].variants[0].launch.tensorMaps[0] = batchedAMap();
  Result<std::string> vb = write(v);
  REQUIRE_MESSAGE(vb.ok(), vb.error().message);
  Result<Reader> vr = Reader::open(span(*vb));
  REQUIRE(vr.ok());
  CHECK(vr->formatVersion() == 8);
  CHECK(vr->manifest().kernels.at(0).variants.at(0).launch.tensorMaps.at(0) == batchedAMap());
}

TEST_CASE("bundle: pointer extents are written as format 9, read back exactly, evaluated and checked") {
  BundleInput in = sampleInput();
  CHECK(Reader::open(span(*write(in)))->formatVersion() == 4);  // no extents: the older layout
  std::vector<Param>& params = in.kernels[0].params;
  params[0].extent = *Expr::parse("n");
  params[2].extent = *Expr::parse("ceil_div(n, 2) * 2");
  Result<std::string> b = write(in);
  REQUIRE_MESSAGE(b.ok(), b.error().message);
  Result<Reader> r = Reader::open(span(*b));
  REQUIRE_MESSAGE(r.ok(), r.error().message);
  CHECK(r->formatVersion() == 9);
  CHECK(r->manifest().kernels.at(1).params == params);  // sorted: row_sum, vadd
  for (size_t n = 0; n < b->size(); ++n)
    if (Reader::open(span(b->substr(0, n))).ok()) FAIL("truncation to " << n << " bytes was accepted");

  // Bytes for a launch's arguments: n = 5 gives 5 and 6 f32 elements.
  uint32_t n = 5;
  uint64_t a = 0x1000, c = 0x2000;
  const void* args[] = {&a, &a, &c, &n};
  CHECK(*extentBytes(params[0], params, args) == std::optional<uint64_t>{20});
  CHECK(*extentBytes(params[2], params, args) == std::optional<uint64_t>{24});
  CHECK(*extentBytes(params[1], params, args) == std::nullopt);  // no extent
  n = 0xFFFFFFFF;
  params[0].extent = *Expr::parse("n * n * n");
  Result<std::optional<uint64_t>> over = extentBytes(params[0], params, args);
  REQUIRE_FALSE(over.ok());
  CHECK(over.error().message.find("extent of 'a' (n * n * n): ") == 0);

  // Writer and reader refuse an extent that reads a pointer or an unknown name, or sits on a
  // parameter without an element type or one that is not a pointer.
  auto refused = [&](size_t param, const char* extent, const std::string& why) {
    BundleInput bad = sampleInput();
    bad.kernels[0].params[param].extent = *Expr::parse(extent);
    Result<std::string> w = write(bad);
    REQUIRE_FALSE(w.ok());
    CHECK(w.error().message == "kernel 'vadd': extent of parameter '" + bad.kernels[0].params[param].name + "': " + why);
  };
  refused(0, "b * 2", "parameter 'b' has type 'ptr.global'; extents may only read integer parameters");
  refused(0, "m", "'m' is not a parameter of the kernel");
  refused(3, "n", "an extent needs a pointer parameter with an element type");
  BundleInput noElement = sampleInput();
  noElement.kernels[0].params[1].element.reset();
  noElement.kernels[0].params[1].extent = Expr::param("n");
  CHECK_FALSE(write(noElement).ok());
}

TEST_CASE("bundle: fp8 element types are written as format 10, read back, and are element types only") {
  BundleInput in = sampleInput();
  in.kernels[0].params[0].element = S::E4M3;
  in.kernels[0].params[1].element = S::E5M2;
  Result<std::string> b = write(in);
  REQUIRE_MESSAGE(b.ok(), b.error().message);
  Result<Reader> r = Reader::open(span(*b));
  REQUIRE_MESSAGE(r.ok(), r.error().message);
  CHECK(r->formatVersion() == 10);
  CHECK(r->manifest().find("vadd")->params == in.kernels[0].params);
  CHECK(elementName(S::E4M3) == "e4m3");
  CHECK(elementName(S::E5M2) == "e5m2");
  CHECK(scalarBytes(S::E5M2) == 1);
  for (size_t n = 0; n < b->size(); ++n)
    if (Reader::open(span(b->substr(0, n))).ok()) FAIL("truncation to " << n << " bytes was accepted");

  // A version-9 reader knows no fp8 element type: the same manifest labelled 9 is refused.
  std::string old = *b;
  old[8] = 9;
  reseal(old);
  CHECK(check(old) == "corrupt bundle: kernel 'vadd': parameter 'a' has unknown element type code 20");

  // Never a parameter's own type, nor is tmap or ptr an element type.
  CHECK_FALSE(ParamType::decode(ParamType{S::E4M3}.code()).has_value());
  CHECK_FALSE(ParamType::decode(ParamType{S::E5M2, 1, ParamType::Space::Global}.code()).has_value());
  for (S bad : {S::TensorMap, S::Ptr}) {
    BundleInput w = sampleInput();
    w.kernels[0].params[0].element = bad;
    Result<std::string> refused = write(w);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().message ==
          "kernel 'vadd': parameter 'a' has invalid element type " + std::to_string(static_cast<unsigned>(bad)));
    CHECK_FALSE(isElementType(bad));
  }
  CHECK(elementName(S::TensorMap) == "<invalid element type 19>");
}

TEST_CASE("launch rule: a tensor map of rank 3 evaluates its plane stride and batch extent") {
  const std::vector<Param> params = batchedTmaParams();
  LaunchRule r = rule({128}, {"ceil_div(m, 128)"});
  r.tensorMaps.push_back(batchedAMap());
  uint64_t a = 0x7000'0000'0100, strideA = 130 * 88;
  uint32_t m = 130, k = 72, lda = 88, batch = 5;
  const void* args[] = {&a, nullptr, &m, &k, &lda, &batch, &strideA};
  Result<std::vector<TensorMapArgs>> t = evaluateTensorMaps(r, params, args);
  REQUIRE_MESSAGE(t.ok(), t.error().message);
  const TensorMapArgs& e = t->at(0);
  CHECK(e.rank == 3);
  CHECK(e.dims[0] == 72);
  CHECK(e.dims[1] == 130);
  CHECK(e.dims[2] == 5);
  CHECK(e.strides[0] == 176);
  CHECK(e.strides[1] == 130 * 88 * 2);
  CHECK(e.box[2] == 1);
  strideA = 3;
  CHECK(evaluateTensorMaps(r, params, args).error().message ==
        "tensor map 'a_map': plane_stride = 6 bytes is not a multiple of 16 below 2^40");
  strideA = 8;
  batch = 0;
  CHECK(evaluateTensorMaps(r, params, args).error().message == "tensor map 'a_map': dims[2] = 0 is outside 1 to 4294967296");
  batch = 1;
  CHECK(evaluateTensorMaps(r, params, args).ok());
  // A rank-2 map leaves the third extent and the second stride zero.
  LaunchRule flat = rule({128}, {"1"});
  flat.tensorMaps.push_back(aMap());
  Result<std::vector<TensorMapArgs>> f = evaluateTensorMaps(flat, tmaParams(), args);
  REQUIRE(f.ok());
  CHECK(f->at(0).rank == 2);
  CHECK(f->at(0).dims[2] == 0);
  CHECK(f->at(0).strides[1] == 0);
}

TEST_CASE("launch rule: tensor maps are checked against the kernel's parameters and TMA's limits") {
  const std::vector<Param> params = tmaParams();
  LaunchRule good = rule({128}, {"1"});
  good.tensorMaps.push_back(aMap());
  CHECK_FALSE(checkRule(good, params).has_value());
  auto error = [&](auto change) {
    LaunchRule r = good;
    std::vector<Param> ps = params;
    change(r.tensorMaps[0], ps);
    std::optional<RuleError> e = checkRule(r, ps);
    return e ? e->where() + ": " + e->error.message : std::string("accepted");
  };
  using M = TensorMapRule;
  using P = std::vector<Param>;
  CHECK(error([](M& m, P&) { m.param = "b_map"; }) == "tensor_maps[0]: 'b_map' is not a parameter of the kernel");
  CHECK(error([](M& m, P&) { m.param = "m"; }) == "tensor_maps[0]: parameter 'm' has type 'u32', not 'tmap'");
  CHECK(error([](M& m, P&) { m.source = "src"; }) == "tensor_maps[0]: a_map: the source 'src' is not a parameter of the kernel");
  CHECK(error([](M& m, P&) { m.source = "k"; }) == "tensor_maps[0]: a_map: the source 'k' has type 'u32', not 'ptr.global'");
  CHECK(error([](M&, P& ps) { ps[0].type.space = ParamType::Space::Shared; }) ==
        "tensor_maps[0]: a_map: the source 'a' has type 'ptr.shared', not 'ptr.global'");
  CHECK(error([](M& m, P&) { m.element = S::Pred; }) == "tensor_maps[0]: a_map: TMA has no element type 'pred'");
  CHECK(error([](M& m, P&) { m.box[1] = 0; }) == "tensor_maps[0]: a_map: box extent 1 is 0; it must be 1 to 256");
  CHECK(error([](M& m, P&) { m.box[1] = 257; }) == "tensor_maps[0]: a_map: box extent 1 is 257; it must be 1 to 256");
  CHECK(error([](M& m, P&) { m.swizzle = 16; }) == "tensor_maps[0]: a_map: swizzle is 16; it must be 0, 32, 64 or 128 bytes");
  CHECK(error([](M& m, P&) { m.box[0] = 4; }) ==
        "tensor_maps[0]: a_map: the box's inner extent is 8 bytes, not a multiple of 16");
  CHECK(error([](M& m, P&) { m.swizzle = 64; }) ==
        "tensor_maps[0]: a_map: the box's inner extent is 128 bytes, more than the 64-byte swizzle span");
  CHECK(error([](M& m, P&) { m.swizzle = 0, m.box[0] = 256; }) == "accepted");  // 512 bytes without a swizzle
  CHECK(error([](M& m, P&) { m.strides[0] = 100; }) == "tensor_maps[0]: a_map: row_stride is 100 bytes, not a multiple of 16");
  CHECK(error([](M& m, P&) { m.dims.pop_back(); }) == "tensor_maps[0]: a_map: it has 1 extents; a tensor map has 2 or 3");
  CHECK(error([](M& m, P&) { m.dims.assign(4, Expr(1)); }) == "tensor_maps[0]: a_map: it has 4 extents; a tensor map has 2 or 3");
  CHECK(error([](M& m, P&) { m.strides.push_back(16); }) ==
        "tensor_maps[0]: a_map: it has 2 strides for 2 extents (row_stride)");
  CHECK(error([](M& m, P&) { m.dims.push_back(Expr(2)); }) ==
        "tensor_maps[0]: a_map: it has 1 strides for 3 extents (row_stride and plane_stride)");
  CHECK(error([](M& m, P&) { m.box.push_back(1); }) == "tensor_maps[0]: a_map: its box has 3 extents for a tensor of 2");
  CHECK(error([](M& m, P&) { m.dims.push_back(Expr(2)), m.strides.push_back(24), m.box.push_back(1); }) ==
        "tensor_maps[0]: a_map: plane_stride is 24 bytes, not a multiple of 16");
  CHECK(error([](M& m, P&) { m.dims.push_back(Expr(2)), m.strides.push_back(Expr::param("planes")), m.box.push_back(1); }) ==
        "tensor_maps[0]: 'planes' is not a parameter of the kernel");
  CHECK(error([](M& m, P&) { m.dims.push_back(Expr(2)), m.strides.push_back(Expr(16)), m.box.push_back(0); }) ==
        "tensor_maps[0]: a_map: box extent 2 is 0; it must be 1 to 256");
  CHECK(error([](M& m, P&) { m.dims[1] = Expr::param("rows"); }) == "tensor_maps[0]: 'rows' is not a parameter of the kernel");
  CHECK(error([](M& m, P&) { m.dims[0] = Expr::param("a"); }) ==
        "tensor_maps[0]: parameter 'a' has type 'ptr.global'; launch rules may only read integer parameters");
  CHECK(error([](M& m, P&) { m.dims[0] = Expr::param("k") / 0; }) == "tensor_maps[0]: 'k / 0' divides by zero for every argument value");
  CHECK(error([](M& m, P&) { m.dims[0] = Expr::param("k") + (uint64_t{1} << 33); }) ==
        "tensor_maps[0]: 'k + 8589934592' is at least 8589934592, over the limit of 4294967296 elements");
  CHECK(error([](M& m, P&) { m.strides[0] = Expr::param("lda") + (uint64_t{1} << 40); }) ==
        "tensor_maps[0]: 'lda + 1099511627776' is at least 1099511627776, over the limit of 1099511627775 bytes");
  LaunchRule twice = good;
  twice.tensorMaps.push_back(aMap());
  CHECK(checkRule(twice, params)->error.message == "parameter 'a_map' has two tensor-map rules");
  LaunchRule none = rule({128}, {"1"});
  std::optional<RuleError> unfilled = checkRule(none, params);
  REQUIRE(unfilled.has_value());
  CHECK(unfilled->part == RuleError::Part::TensorMap);
  CHECK(unfilled->error.message == "the tmap parameter 'a_map' has no tensor-map rule to fill it");

  // The reader runs the same checks: a rule the writer refuses is never in a bundle.
  BundleInput in;
  in.name = "tma";
  in.targets = {tgt("sm_90a")};
  in.producer = "truenoc test";
  in.ptxasVersion = "13.0.88";
  in.kernels.push_back({"load", params, none, {}});
  in.kernels[0].payloads.push_back({tgt("sm_90a"), PayloadKind::Cubin, {}, "ELF"});
  CHECK(write(in).error().message ==
        "kernel 'load': launch rule tensor_maps[0]: the tmap parameter 'a_map' has no tensor-map rule to fill it");
}

TEST_CASE("launch rule: tensor maps evaluate to cuTensorMapEncodeTiled's arguments") {
  CHECK(tensorMapDataType(S::BF16) == 9u);
  CHECK(tensorMapDataType(S::F16) == 6u);
  CHECK(tensorMapDataType(S::F32) == 7u);
  CHECK(tensorMapDataType(S::S8) == 0u);
  CHECK(tensorMapDataType(S::S32) == 3u);
  CHECK(tensorMapDataType(S::U64) == 4u);
  CHECK_FALSE(tensorMapDataType(S::Ptr).has_value());
  CHECK(tensorMapElementBytes(S::F64) == 8);
  CHECK(tensorMapElementBytes(S::BF16) == 2);

  const std::vector<Param> params = tmaParams();
  LaunchRule r = rule({128}, {"ceil_div(m, 128)"});
  r.tensorMaps.push_back(aMap());
  r.tensorMaps[0].swizzle = 64;
  r.tensorMaps[0].box[0] = 32;
  uint64_t a = 0x7000'0000'0100;
  uint32_t m = 130, k = 72, lda = 88;
  const void* args[] = {&a, nullptr, &m, &k, &lda};
  Result<std::vector<TensorMapArgs>> t = evaluateTensorMaps(r, params, args);
  REQUIRE(t.ok());
  REQUIRE(t->size() == 1);
  const TensorMapArgs& e = (*t)[0];
  CHECK(e.param == 1);
  CHECK(e.source == 0);
  CHECK(e.address == a);
  CHECK(e.dataType == 9);
  CHECK(e.elementBytes == 2);
  CHECK(e.dims[0] == 72);
  CHECK(e.dims[1] == 130);
  CHECK(e.strides[0] == 176);
  CHECK(e.box[0] == 32);
  CHECK(e.box[1] == 128);
  CHECK(e.swizzle == 2);  // CU_TENSOR_MAP_SWIZZLE_64B

  lda = 81;  // 162 bytes
  CHECK(evaluateTensorMaps(r, params, args).error().message ==
        "tensor map 'a_map': row_stride = 162 bytes is not a multiple of 16 below 2^40");
  lda = 88;
  m = 0;
  CHECK(evaluateTensorMaps(r, params, args).error().message == "tensor map 'a_map': dims[1] = 0 is outside 1 to 4294967296");
  m = 130;
  a += 8;
  CHECK(evaluateTensorMaps(r, params, args).error().message ==
        "tensor map 'a_map': the address of 'a' (123145302311176) is not 16-byte aligned");
  const void* missing[] = {nullptr, nullptr, &m, &k, &lda};
  CHECK(evaluateTensorMaps(r, params, missing).error().message == "tensor map 'a_map': no argument for parameter 'a'");
}

TEST_CASE("bundle: a kernel's variants (format 7) give some targets other parameters and launch rules") {
  const std::string b = variantBundle();
  Result<Reader> r = Reader::open(span(b));
  REQUIRE_MESSAGE(r.ok(), r.error().message);
  CHECK(r->formatVersion() == 7);
  const KernelInfo& k = r->manifest().kernels.at(0);
  REQUIRE(k.variants.size() == 1);
  CHECK(k.variants[0].targets == 4);  // sm_90a, the third target
  for (uint32_t t : {0u, 1u}) {
    CHECK(&k.paramsFor(t) == &k.params);
    CHECK(k.launchFor(t).block == std::vector<uint32_t>{256});
  }
  CHECK(k.paramsFor(2) == tmaParams());
  CHECK(k.launchFor(2).block == std::vector<uint32_t>{384});
  CHECK(k.launchFor(2).tensorMaps == std::vector<TensorMapRule>{aMap()});
  CHECK(k.launchFor(2).dynamicShared.text() == "98304");
  CHECK(r->manifest().targetNames(k.ownTargets()) == std::vector<std::string>{"sm_80", "sm_90"});
  CHECK(r->manifest().targetNames(k.variants[0].targets) == std::vector<std::string>{"sm_90a"});
  // Written again from what was read: the same bytes (canonical), and no variant means no format 7.
  BundleInput again = variantInput();
  std::reverse(again.kernels[0].payloads.begin(), again.kernels[0].payloads.end());
  CHECK(*write(again) == b);
  again.kernels[0].variants.clear();
  CHECK(Reader::open(span(*write(again)))->formatVersion() == 4);

  // The writer refuses, and the reader rejects, variants that do not describe one kernel.
  auto refusal = [](auto change) {
    BundleInput in = variantInput();
    change(in.kernels[0]);
    Result<std::string> w = write(in);
    return w.ok() ? std::string("accepted") : w.error().message;
  };
  CHECK(refusal([](KernelInput& k) { k.variants[0].targets.push_back(tgt("sm_100")); }) ==
        "kernel 'load': variant for unlisted target 'sm_100'");
  CHECK(refusal([](KernelInput& k) { k.variants[0].targets = {tgt("sm_80"), tgt("sm_90"), tgt("sm_90a")}; }) ==
        "kernel 'load': its variants cover every target");
  CHECK(refusal([](KernelInput& k) { k.variants[0].targets.clear(); }) == "kernel 'load': variant 0 lists no target");
  CHECK(refusal([](KernelInput& k) {
          k.variants.push_back(k.variants[0]);
          k.variants[1].targets.push_back(tgt("sm_90"));
        }) == "kernel 'load': variant 1 lists a target of an earlier variant");
  CHECK(refusal([](KernelInput& k) { k.variants[0].params[2].name = "rows"; }).starts_with("variant 0 of kernel 'load': launch rule"));
  const std::string different = "kernel 'load': variant 0 takes other parameters than the kernel (all but tmap parameters must be alike)";
  CHECK(refusal([](KernelInput& k) { k.variants[0].params[3].type = kU64; }) == different);
  CHECK(refusal([](KernelInput& k) { k.variants[0].params[0].access = kPtrRead | kPtrWritten; }) == different);
  CHECK(refusal([](KernelInput& k) { k.variants[0].params[0].element = S::F16; }) == different);
  CHECK(refusal([](KernelInput& k) { k.variants[0].params.push_back({"extra", kU32, 0}); }) == different);
  CHECK(refusal([](KernelInput& k) { k.variants[0].params[0].align = 0; }) == "accepted");  // alignments may differ

  // The reader's own checks, behind valid checksums: the variant's target mask patched.
  const std::string mask("\x01\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00", 12);  // count 1, mask 4
  const size_t at = b.find(mask);
  REQUIRE(at != std::string::npos);
  REQUIRE(b.find(mask, at + 1) == std::string::npos);
  auto patched = [&](uint64_t m) {
    std::string bad = b;
    putU64(bad, at + 4, m);
    reseal(bad);
    return check(bad);
  };
  CHECK(patched(0) == "corrupt bundle: kernel 'load': variant 0 lists no target");
  CHECK(patched(8) == "corrupt bundle: kernel 'load': variant 0 lists a target index past the bundle's 3 targets");
  CHECK(patched(7) == "corrupt bundle: kernel 'load': its variants cover every target");
  CHECK(patched(2) == "");  // sm_90's code may be the variant instead
  std::string count = b;
  count[at] = 3;  // more variants than targets but one
  reseal(count);
  CHECK(check(count) == "corrupt bundle: variant count is 3; expected 0 to 2");
}
