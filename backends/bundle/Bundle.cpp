#include "backends/bundle/Bundle.h"

#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>

namespace tn::bundle {

namespace {

constexpr uint8_t kMagic[8] = {0x89, 'T', 'N', 'B', '\r', '\n', 0x1a, '\n'};
constexpr uint32_t kSectionManifest = 1;
constexpr uint32_t kSectionPayloads = 2;
constexpr uint32_t kSectionCount = 2;
constexpr uint32_t kFlagPtx = 1;
constexpr uint32_t kFlagIr = 2;

constexpr PayloadKind kKinds[] = {PayloadKind::Cubin, PayloadKind::Ptx, PayloadKind::Ir};

bool isKnownKind(PayloadKind k) { return std::find(std::begin(kKinds), std::end(kKinds), k) != std::end(kKinds); }

std::string num(uint64_t v) { return std::to_string(v); }
std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

bool isPrintable(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) return false;
  return true;
}

// Little-endian encoder.
class Out {
 public:
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) buf_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) buf_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  void str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    buf_.append(s);
  }
  void bytes(const void* p, size_t n) { buf_.append(static_cast<const char*>(p), n); }
  std::string& buf() { return buf_; }

 private:
  std::string buf_;
};

// Bounds-checked little-endian decoder over a span; the first failure sticks.
class In {
 public:
  In(std::span<const uint8_t> s, const char* what) : s_(s), what_(what) {}
  bool failed() const { return !err_.empty(); }
  const std::string& error() const { return err_; }
  size_t pos() const { return pos_; }
  bool atEnd() const { return pos_ == s_.size(); }

  uint32_t u32() {
    if (!need(4)) return 0;
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(s_[pos_ + i]) << (8 * i);
    pos_ += 4;
    return v;
  }
  uint64_t u64() {
    if (!need(8)) return 0;
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(s_[pos_ + i]) << (8 * i);
    pos_ += 8;
    return v;
  }
  std::string str(const char* field) {
    uint32_t n = u32();
    if (failed()) return {};
    if (n > kMaxStringBytes) {
      fail(std::string(field) + " is " + num(n) + " bytes long; the limit is " + num(kMaxStringBytes));
      return {};
    }
    if (!need(n)) return {};
    std::string v(reinterpret_cast<const char*>(s_.data() + pos_), n);
    pos_ += n;
    if (!isPrintable(v)) {
      fail(std::string(field) + " contains non-printable bytes");
      return {};
    }
    return v;
  }
  // Reads a count and checks it against [lo, hi].
  uint32_t count(const char* field, uint32_t lo, uint32_t hi) {
    uint32_t n = u32();
    if (!failed() && (n < lo || n > hi))
      fail(std::string(field) + " is " + num(n) + "; expected " + num(lo) + " to " + num(hi));
    return failed() ? 0 : n;
  }
  void fail(std::string msg) {
    if (err_.empty()) err_ = std::move(msg);
  }

 private:
  bool need(size_t n) {
    if (failed()) return false;
    if (s_.size() - pos_ < n) {
      fail(std::string(what_) + " ends early at byte " + num(pos_) + " of " + num(s_.size()));
      return false;
    }
    return true;
  }
  std::span<const uint8_t> s_;
  const char* what_;
  size_t pos_ = 0;
  std::string err_;
};

std::span<const uint8_t> bytesOf(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

uint64_t readU64(std::span<const uint8_t> s, size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(s[at + i]) << (8 * i);
  return v;
}
uint32_t readU32(std::span<const uint8_t> s, size_t at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(s[at + i]) << (8 * i);
  return v;
}

uint64_t headerChecksum(std::span<const uint8_t> file) {
  uint64_t h = fnv1a64(file.subspan(0, 48));
  return fnv1a64(file.subspan(kHeaderSize, kSectionCount * kSectionEntrySize), h);
}

void writeResources(Out& o, const Resources& r) {
  for (uint32_t v : {r.registers, r.barriers, r.sharedBytes, r.constBytes, r.stackBytes, r.spillStores, r.spillLoads})
    o.u32(v);
}
Resources readResources(In& in) {
  Resources r;
  for (uint32_t* v : {&r.registers, &r.barriers, &r.sharedBytes, &r.constBytes, &r.stackBytes, &r.spillStores, &r.spillLoads})
    *v = in.u32();
  return r;
}

// Version 5: after the dynamic shared expression, the kernel's tensor-map rules, each of rank 2;
// version 8 writes each map's rank before its extents, strides and box.
void writeTensorMaps(Out& o, const std::vector<TensorMapRule>& maps, uint32_t version) {
  o.u32(static_cast<uint32_t>(maps.size()));
  for (const TensorMapRule& m : maps) {
    o.str(m.param);
    o.str(m.source);
    o.u32(static_cast<uint32_t>(m.element));
    if (version >= 8) o.u32(static_cast<uint32_t>(m.rank()));
    for (const Expr& d : m.dims) o.str(d.text());
    for (const Expr& d : m.strides) o.str(d.text());
    for (uint32_t b : m.box) o.u32(b);
    o.u32(m.swizzle);
  }
}

// A kernel's (or a variant's) parameters and launch rule, as the manifest lays them out.
void writeCode(Out& o, const std::vector<Param>& params, const LaunchRule& launch, uint32_t version) {
  o.u32(static_cast<uint32_t>(params.size()));
  for (const Param& p : params) {
    o.str(p.name);
    o.u32(p.type.code());
    o.u32(p.align);
    o.u32(p.access);
    o.u32(p.element ? static_cast<uint32_t>(*p.element) : 0);
    if (version >= 9) o.str(p.extent ? p.extent->text() : "");
  }
  o.u32(static_cast<uint32_t>(launch.block.size()));
  for (uint32_t b : launch.block) o.u32(b);
  o.u32(static_cast<uint32_t>(launch.grid.size()));
  for (const Expr& g : launch.grid) o.str(g.text());
  o.str(launch.dynamicShared.text());
  if (version >= 5) writeTensorMaps(o, launch.tensorMaps, version);
}

// Checks what both the writer and the reader require of a kernel's signature and launch rule.
std::optional<std::string> checkKernel(const std::string& name, const std::vector<Param>& params, const LaunchRule& rule) {
  if (!isIdentifier(name)) return "kernel name " + quoted(name) + " is not an identifier";
  if (params.size() > kMaxParams) return "kernel " + quoted(name) + " has more than " + num(kMaxParams) + " parameters";
  std::set<std::string> seen;
  for (const Param& p : params) {
    if (!isIdentifier(p.name)) return "kernel " + quoted(name) + ": parameter name " + quoted(p.name) + " is not an identifier";
    if (!seen.insert(p.name).second) return "kernel " + quoted(name) + ": duplicate parameter " + quoted(p.name);
    if (!p.type.valid()) return "kernel " + quoted(name) + ": parameter " + quoted(p.name) + " has invalid type code " + num(p.type.code());
    if (p.align != 0 && (p.align & (p.align - 1)) != 0)
      return "kernel " + quoted(name) + ": parameter " + quoted(p.name) + " has alignment " + num(p.align) + ", not a power of two";
    if ((p.access & ~kPtrAccessMask) != 0 || (!p.type.isPointer() && p.access != 0))
      return "kernel " + quoted(name) + ": parameter " + quoted(p.name) + " has invalid pointer access " + num(p.access);
    if (p.element && (!p.type.isPointer() || !isElementType(*p.element)))
      return "kernel " + quoted(name) + ": parameter " + quoted(p.name) + " has invalid element type " +
             num(static_cast<uint32_t>(*p.element));
  }
  for (const Param& p : params)
    if (auto bad = checkExtent(p, params))
      return "kernel " + quoted(name) + ": extent of parameter " + quoted(p.name) + ": " + bad->message;
  if (auto bad = checkRule(rule, params)) return "kernel " + quoted(name) + ": launch rule " + bad->where() + ": " + bad->error.message;
  return std::nullopt;
}

// Checks what both the writer and the reader require of a kernel's variants (version 7): target
// sets that are not empty, lie within the bundle's targets, do not overlap, leave the kernel's own
// code at least one target and come sorted by their lowest target; each variant a valid signature
// and launch rule whose caller-visible parameters (all but tmap ones) are the kernel's.
std::optional<std::string> checkVariants(const std::string& name, const std::vector<Param>& params,
                                         const std::vector<Variant>& variants, size_t targets) {
  const std::vector<const Param*> own = callerParams(params);
  const uint64_t all = targets >= 64 ? ~uint64_t{0} : (uint64_t{1} << targets) - 1;
  uint64_t seen = 0;
  for (size_t i = 0; i < variants.size(); ++i) {
    const Variant& v = variants[i];
    const std::string at = "kernel " + quoted(name) + ": variant " + num(i) + " ";
    if (v.targets == 0) return at + "lists no target";
    if ((v.targets & ~all) != 0) return at + "lists a target index past the bundle's " + num(targets) + " targets";
    if ((v.targets & seen) != 0) return at + "lists a target of an earlier variant";
    if (i > 0 && std::countr_zero(v.targets) < std::countr_zero(variants[i - 1].targets))
      return at + "is not sorted by its lowest target";
    seen |= v.targets;
    if (auto bad = checkKernel(name, v.params, v.launch)) return "variant " + num(i) + " of " + *bad;
    const std::vector<const Param*> theirs = callerParams(v.params);
    bool same = theirs.size() == own.size();
    for (size_t p = 0; same && p < own.size(); ++p)
      same = own[p]->name == theirs[p]->name && own[p]->type == theirs[p]->type && own[p]->access == theirs[p]->access &&
             own[p]->element == theirs[p]->element && own[p]->extent == theirs[p]->extent;
    if (!same) return at + "takes other parameters than the kernel (all but tmap parameters must be alike)";
  }
  if (seen == all && !variants.empty()) return "kernel " + quoted(name) + ": its variants cover every target";
  return std::nullopt;
}

// Checks what both the writer and the reader require of a kernel's payloads: code (a cubin or
// PTX) for every target, and an IR payload for every target exactly when the bundle carries IR.
// has(target, kind) says whether the kernel has that payload.
template <class Has>
std::optional<std::string> checkCoverage(const std::string& kernel, const std::vector<Target>& targets, bool ir, Has has) {
  for (uint32_t t = 0; t < targets.size(); ++t) {
    if (!has(t, PayloadKind::Cubin) && !has(t, PayloadKind::Ptx))
      return "kernel " + quoted(kernel) + " has no cubin or PTX payload for " + targets[t].name();
    if (ir && !has(t, PayloadKind::Ir)) return "kernel " + quoted(kernel) + " has no IR payload for " + targets[t].name();
  }
  return std::nullopt;
}

// A bundle records the ptxas that assembled its cubins, and no ptxas when it has none.
std::optional<std::string> checkPtxasVersion(const std::string& version, bool hasCubins) {
  if (hasCubins && version.empty()) return "the bundle has cubins but does not record the ptxas version that assembled them";
  if (!hasCubins && !version.empty()) return "the bundle records ptxas version " + quoted(version) + " but has no cubins";
  return std::nullopt;
}

// No overflow: at most 4096 kernels x 3 x 64 entries of at most 2^28 bytes each.
std::optional<std::string> checkRawTotal(uint64_t rawTotal) {
  if (rawTotal <= kMaxTotalRawBytes) return std::nullopt;
  return "the payloads add up to " + num(rawTotal) + " bytes uncompressed; the limit is " + num(kMaxTotalRawBytes);
}

}  // namespace

std::string_view payloadKindName(PayloadKind k) {
  switch (k) {
    case PayloadKind::Cubin: return "cubin";
    case PayloadKind::Ptx: return "ptx";
    case PayloadKind::Ir: return "ir";
  }
  return "unknown";
}

std::optional<PayloadKind> payloadKindNamed(std::string_view name) {
  for (PayloadKind k : kKinds)
    if (payloadKindName(k) == name) return k;
  return std::nullopt;
}

uint64_t fnv1a64(std::span<const uint8_t> bytes, uint64_t h) {
  for (uint8_t b : bytes) {
    h ^= b;
    h *= 0x100000001b3ull;
  }
  return h;
}

const Entry* KernelInfo::find(uint32_t target, PayloadKind kind) const {
  for (const Entry& e : entries)
    if (e.target == target && e.kind == kind) return &e;
  return nullptr;
}

const std::vector<Param>& KernelInfo::paramsFor(uint32_t target) const {
  for (const Variant& v : variants)
    if (target < 64 && (v.targets >> target & 1)) return v.params;
  return params;
}

const LaunchRule& KernelInfo::launchFor(uint32_t target) const {
  for (const Variant& v : variants)
    if (target < 64 && (v.targets >> target & 1)) return v.launch;
  return launch;
}

uint64_t KernelInfo::ownTargets() const {
  uint64_t others = 0;
  for (const Variant& v : variants) others |= v.targets;
  return ~others;
}

std::vector<std::string> Manifest::targetNames(uint64_t mask) const {
  std::vector<std::string> names;
  for (size_t t = 0; t < targets.size() && t < 64; ++t)
    if (mask >> t & 1) names.push_back(targets[t].name());
  return names;
}

const KernelInfo* Manifest::find(std::string_view kernel) const {
  for (const KernelInfo& k : kernels)
    if (k.name == kernel) return &k;
  return nullptr;
}

int Manifest::targetIndex(Target target) const {
  for (size_t i = 0; i < targets.size(); ++i)
    if (targets[i] == target) return static_cast<int>(i);
  return -1;
}

// ---- writer ------------------------------------------------------------------------------------

namespace {

// One payload's compression: its raw bytes and zstd level in, its frame and FNV-1a out.
struct Compression {
  const std::string* raw;
  int level;
  std::string compressed = {};
  uint64_t rawChecksum = 0;
};

// Compresses every entry, `threads` at a time (each frame depends only on its bytes and level, so
// the bundle's bytes do not depend on the threads). An error message, or nullopt.
std::optional<std::string> compressAll(std::vector<Compression>& all, unsigned threads) {
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::optional<std::string> failure;
  auto fail = [&](std::string why) {
    std::lock_guard<std::mutex> lock(mu);
    if (!failure) failure = std::move(why);
    next = all.size();
  };
  auto worker = [&] {
    ZSTD_CCtx* cctx = ZSTD_createCCtx();
    if (!cctx) return fail("cannot create a zstd compression context");
    struct CtxGuard {
      ZSTD_CCtx* c;
      ~CtxGuard() { ZSTD_freeCCtx(c); }
    } guard{cctx};
    // zstd's content checksum: a reader that uses a few payloads (Verify::Used) checks them by it,
    // as zstd decompresses, instead of hashing each again with FNV-1a (docs/bundle-format.md).
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
    // An exception must not leave a thread (std::terminate): it becomes the failure.
    try {
      std::string scratch;  // the frame at its largest; each payload keeps only its own bytes
      for (size_t i = next++; i < all.size(); i = next++) {
        Compression& c = all[i];
        scratch.resize(ZSTD_compressBound(c.raw->size()));
        ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, c.level);
        size_t n = ZSTD_compress2(cctx, scratch.data(), scratch.size(), c.raw->data(), c.raw->size());
        if (ZSTD_isError(n)) return fail(std::string("zstd compression failed: ") + ZSTD_getErrorName(n));
        c.compressed.assign(scratch.data(), n);
        c.rawChecksum = fnv1a64(bytesOf(*c.raw));
      }
    } catch (const std::exception& e) {
      fail(std::string("cannot compress the payloads: ") + e.what());
    }
  };
  std::vector<std::thread> pool;
  const size_t extra = std::min<size_t>(std::max(threads, 1u), all.size()) - (all.empty() ? 0 : 1);
  try {
    for (size_t t = 0; t < extra; ++t) pool.emplace_back(worker);
  } catch (const std::system_error&) {
    // Fewer threads than asked: the ones started and this one do the rest.
  }
  worker();
  for (std::thread& t : pool) t.join();
  return failure;
}

}  // namespace

Result<std::string> write(const BundleInput& in, const WriteOptions& options) {
  if (!isIdentifier(in.name)) return Error{"bundle name " + quoted(in.name) + " is not an identifier"};
  if (in.producer.empty() || in.producer.size() > kProducerSize || !isPrintable(in.producer))
    return Error{"producer " + quoted(in.producer) + " must be 1 to " + num(kProducerSize) + " printable characters"};
  if (in.targets.empty() || in.targets.size() > kMaxTargets)
    return Error{"a bundle needs 1 to " + num(kMaxTargets) + " targets, not " + num(in.targets.size())};
  if (in.kernels.size() > kMaxKernels) return Error{"more than " + num(kMaxKernels) + " kernels"};
  if (in.ptxasVersion.size() > kMaxStringBytes || !isPrintable(in.ptxasVersion))
    return Error{"ptxas version " + quoted(in.ptxasVersion) + " must be at most " + num(kMaxStringBytes) + " printable characters"};
  bool hasCubins = false;
  uint64_t rawTotal = 0;
  std::vector<uint32_t> moduleUsers(in.modules.size(), 0);
  for (const KernelInput& k : in.kernels)
    for (const PayloadInput& p : k.payloads) {
      hasCubins = hasCubins || p.kind == PayloadKind::Cubin;
      rawTotal += p.bytes.size();
      if (!p.module) continue;
      if (p.kind != PayloadKind::Cubin || !p.bytes.empty() || *p.module >= in.modules.size() ||
          in.modules[*p.module].target != p.target)
        return Error{"kernel " + quoted(k.name) + ": a module entry must be a cubin entry without bytes naming a module of its target"};
      ++moduleUsers[*p.module];
    }
  for (size_t i = 0; i < in.modules.size(); ++i) {
    const ModuleInput& mod = in.modules[i];
    if (moduleUsers[i] == 0) return Error{"module " + num(i) + " (" + mod.target.name() + ") is used by no kernel"};
    if (mod.bytes.empty() || mod.bytes.size() > kMaxPayloadBytes)
      return Error{"module " + num(i) + " (" + mod.target.name() + ") of " + num(mod.bytes.size()) + " bytes (must be 1 to " +
                   num(kMaxPayloadBytes) + ")"};
    rawTotal += mod.bytes.size();
  }
  if (auto bad = checkPtxasVersion(in.ptxasVersion, hasCubins)) return Error{*bad};
  if (auto bad = checkRawTotal(rawTotal)) return Error{*bad};

  std::vector<Target> targets = in.targets;
  for (const Target& t : targets)
    if (Target::parse(t.name()) != t) return Error{"invalid target " + quoted(t.name())};  // what the reader would reject
  std::sort(targets.begin(), targets.end());
  if (std::adjacent_find(targets.begin(), targets.end()) != targets.end()) return Error{"duplicate target"};

  std::vector<const KernelInput*> kernels;
  for (const KernelInput& k : in.kernels) kernels.push_back(&k);
  std::sort(kernels.begin(), kernels.end(), [](const KernelInput* a, const KernelInput* b) { return a->name < b->name; });

  // The oldest version that holds this bundle, so that it reads wherever that version does: 10
  // for a pointer to fp8 codes, 9 for a pointer with an extent, 8 for a tensor map of rank 3, 7 for a kernel with variants, 6 for a
  // payload shared by several entries, 5 for tensor maps, else 4.
  const bool shared = std::any_of(moduleUsers.begin(), moduleUsers.end(), [](uint32_t n) { return n > 1; });
  const bool tensorMaps =
      std::any_of(kernels.begin(), kernels.end(), [](const KernelInput* k) { return !k->launch.tensorMaps.empty(); });
  const bool variants = std::any_of(kernels.begin(), kernels.end(), [](const KernelInput* k) { return !k->variants.empty(); });
  auto rank3 = [](const LaunchRule& l) {
    return std::any_of(l.tensorMaps.begin(), l.tensorMaps.end(), [](const TensorMapRule& m) { return m.rank() > 2; });
  };
  const bool planes = std::any_of(kernels.begin(), kernels.end(), [&](const KernelInput* k) {
    return rank3(k->launch) ||
           std::any_of(k->variants.begin(), k->variants.end(), [&](const VariantInput& v) { return rank3(v.launch); });
  });
  // Whether a parameter of a kernel or of one of its variants is so.
  auto anyParam = [&](auto&& pred) {
    auto in = [&](const std::vector<Param>& ps) { return std::any_of(ps.begin(), ps.end(), pred); };
    return std::any_of(kernels.begin(), kernels.end(), [&](const KernelInput* k) {
      return in(k->params) ||
             std::any_of(k->variants.begin(), k->variants.end(), [&](const VariantInput& v) { return in(v.params); });
    });
  };
  const bool extents = anyParam([](const Param& p) { return p.extent.has_value(); });
  const bool fp8 = anyParam([](const Param& p) { return p.element && isFp8(*p.element); });
  const uint32_t version = fp8 ? 10 : extents ? 9 : planes ? 8 : variants ? 7 : shared ? 6 : tensorMaps ? 5 : 4;
  Out manifest;
  // The payloads in the order the payload section holds them (a module's where its first kernel
  // by name needs it), compressed after the manifest is laid out; each manifest entry's place
  // for its payload's offset, sizes and checksum, filled in then.
  std::vector<Compression> compressions;
  std::vector<std::optional<size_t>> moduleCompression(in.modules.size());
  std::vector<std::pair<size_t, size_t>> patches;  // (manifest position, index into compressions)
  manifest.str(in.name);
  manifest.u32((in.ptxFallback ? kFlagPtx : 0) | (in.ir ? kFlagIr : 0));
  manifest.str(in.ptxasVersion);
  manifest.u32(static_cast<uint32_t>(targets.size()));
  for (const Target& t : targets) manifest.str(t.name());
  manifest.u32(static_cast<uint32_t>(kernels.size()));
  for (size_t ki = 0; ki < kernels.size(); ++ki) {
    const KernelInput& k = *kernels[ki];
    if (ki > 0 && kernels[ki - 1]->name == k.name) return Error{"duplicate kernel " + quoted(k.name)};
    if (auto bad = checkKernel(k.name, k.params, k.launch)) return Error{*bad};
    manifest.str(k.name);
    writeCode(manifest, k.params, k.launch, version);
    if (version >= 7) {
      std::vector<Variant> encoded;  // target sets as masks over the sorted targets
      for (const VariantInput& v : k.variants) {
        Variant out{0, v.params, v.launch};
        for (const Target& t : v.targets) {
          auto it = std::find(targets.begin(), targets.end(), t);
          if (it == targets.end()) return Error{"kernel " + quoted(k.name) + ": variant for unlisted target " + quoted(t.name())};
          out.targets |= uint64_t{1} << (it - targets.begin());
        }
        encoded.push_back(std::move(out));
      }
      std::sort(encoded.begin(), encoded.end(),
                [](const Variant& a, const Variant& b) { return std::countr_zero(a.targets) < std::countr_zero(b.targets); });
      if (auto bad = checkVariants(k.name, k.params, encoded, targets.size())) return Error{*bad};
      manifest.u32(static_cast<uint32_t>(encoded.size()));
      for (const Variant& v : encoded) {
        manifest.u64(v.targets);
        writeCode(manifest, v.params, v.launch, version);
      }
    }

    struct Ref {
      uint32_t target;
      const PayloadInput* p;
    };
    std::vector<Ref> refs;
    for (const PayloadInput& p : k.payloads) {
      auto it = std::find(targets.begin(), targets.end(), p.target);
      if (it == targets.end()) return Error{"kernel " + quoted(k.name) + ": payload for unlisted target " + quoted(p.target.name())};
      if (!isKnownKind(p.kind)) return Error{"kernel " + quoted(k.name) + ": unknown payload kind"};
      if (p.kind == PayloadKind::Ptx && !in.ptxFallback)
        return Error{"kernel " + quoted(k.name) + ": PTX payloads need the PTX fallback flag"};
      if (p.kind == PayloadKind::Ir && !in.ir) return Error{"kernel " + quoted(k.name) + ": IR payloads need the IR flag"};
      if (!p.module && (p.bytes.empty() || p.bytes.size() > kMaxPayloadBytes))
        return Error{"kernel " + quoted(k.name) + ": payload of " + num(p.bytes.size()) + " bytes (must be 1 to " + num(kMaxPayloadBytes) + ")"};
      refs.push_back({static_cast<uint32_t>(it - targets.begin()), &p});
    }
    std::sort(refs.begin(), refs.end(), [](const Ref& a, const Ref& b) {
      return a.target != b.target ? a.target < b.target : a.p->kind < b.p->kind;
    });
    for (size_t i = 1; i < refs.size(); ++i)
      if (refs[i].target == refs[i - 1].target && refs[i].p->kind == refs[i - 1].p->kind)
        return Error{"kernel " + quoted(k.name) + ": two " + std::string(payloadKindName(refs[i].p->kind)) + " payloads for " + targets[refs[i].target].name()};
    auto has = [&](uint32_t t, PayloadKind kind) {
      return std::any_of(refs.begin(), refs.end(), [&](const Ref& r) { return r.target == t && r.p->kind == kind; });
    };
    if (auto bad = checkCoverage(k.name, targets, in.ir, has)) return Error{*bad};

    manifest.u32(static_cast<uint32_t>(refs.size()));
    for (const Ref& r : refs) {
      std::optional<size_t> own;
      std::optional<size_t>& slot = r.p->module ? moduleCompression[*r.p->module] : own;
      if (!slot) {
        const std::string& raw = r.p->module ? in.modules[*r.p->module].bytes : r.p->bytes;
        slot = compressions.size();
        compressions.push_back({&raw, r.p->kind == PayloadKind::Cubin ? kCubinCompressionLevel : kTextCompressionLevel});
      }
      manifest.u32(r.target);
      manifest.u32(static_cast<uint32_t>(r.p->kind));
      writeResources(manifest, r.p->kind == PayloadKind::Cubin ? r.p->resources : Resources{});
      patches.emplace_back(manifest.buf().size(), *slot);
      for (int field = 0; field < 4; ++field) manifest.u64(0);  // offset, compressed and raw size, checksum
    }
  }
  if (auto bad = compressAll(compressions, options.threads)) return Error{*bad};
  std::string payloads;
  size_t frames = 0;
  for (const Compression& c : compressions) frames += c.compressed.size();
  payloads.reserve(frames);
  std::vector<uint64_t> offsets;
  for (Compression& c : compressions) {
    offsets.push_back(payloads.size());
    payloads += c.compressed;
    std::string().swap(c.compressed);  // freed as it is copied
  }
  offsets.push_back(payloads.size());  // where the last frame ends
  for (auto [pos, i] : patches) {
    const Compression& c = compressions[i];
    const uint64_t fields[] = {offsets[i], offsets[i + 1] - offsets[i], c.raw->size(), c.rawChecksum};
    for (uint64_t v : fields)
      for (int b = 0; b < 8; ++b) manifest.buf()[pos++] = static_cast<char>((v >> (8 * b)) & 0xff);
  }
  const std::string& m = manifest.buf();
  if (m.size() > kMaxManifestBytes) return Error{"manifest of " + num(m.size()) + " bytes exceeds the limit"};

  uint64_t manifestOffset = kHeaderSize + kSectionCount * kSectionEntrySize;
  uint64_t payloadOffset = manifestOffset + m.size();
  uint64_t total = payloadOffset + payloads.size();
  if (total > kMaxBundleBytes) return Error{"bundle of " + num(total) + " bytes exceeds the limit of " + num(kMaxBundleBytes)};

  Out file;
  file.bytes(kMagic, sizeof kMagic);
  file.u32(version);
  file.u32(kSectionCount);
  file.u64(total);
  std::string producer = in.producer;
  producer.resize(kProducerSize, '\0');
  file.bytes(producer.data(), producer.size());
  file.u64(0);  // header checksum, filled below
  file.u32(kSectionManifest);
  file.u32(0);
  file.u64(manifestOffset);
  file.u64(m.size());
  file.u64(fnv1a64(bytesOf(m)));
  file.u32(kSectionPayloads);
  file.u32(0);
  file.u64(payloadOffset);
  file.u64(payloads.size());
  file.u64(fnv1a64(bytesOf(payloads)));
  std::string& out = file.buf();
  uint64_t h = headerChecksum(bytesOf(out));
  for (int i = 0; i < 8; ++i) out[48 + i] = static_cast<char>((h >> (8 * i)) & 0xff);
  out += m;
  out += payloads;
  return std::move(out);
}

// ---- reader ------------------------------------------------------------------------------------

namespace {

// What bounds the work of decompressing a bundle, from the manifest alone: every payload byte
// belongs to one payload (else one small frame shared by many entries inflates to gigabytes), and
// the payloads together stay under kMaxTotalRawBytes. From version 6 several entries may describe
// one payload, a module: the cubin entries of one target, alike in offset, sizes and checksum; it
// counts once, and readers decompress it once (the runtime, Reader::verifyPayloads).
std::optional<std::string> checkPayloadRefs(const Manifest& m, uint32_t version) {
  struct Ref {
    const Entry* e;
    const KernelInfo* k;
  };
  std::vector<Ref> refs;
  for (const KernelInfo& k : m.kernels)
    for (const Entry& e : k.entries) refs.push_back({&e, &k});
  std::stable_sort(refs.begin(), refs.end(), [](const Ref& a, const Ref& b) { return a.e->offset < b.e->offset; });
  uint64_t rawTotal = refs.empty() ? 0 : refs[0].e->rawSize;
  for (size_t i = 1; i < refs.size(); ++i) {
    const Entry& prev = *refs[i - 1].e;
    const Entry& cur = *refs[i].e;
    if (cur.offset >= prev.offset + prev.compressedSize) {
      rawTotal += cur.rawSize;
      continue;
    }
    auto name = [&](const Ref& r) {
      return "the " + std::string(payloadKindName(r.e->kind)) + " payload of kernel " + quoted(r.k->name) + " for " + m.targets[r.e->target].name();
    };
    auto both = [&] {  // built for an error only: a valid module's entries all come here
      return name(refs[i - 1]) + " [" + num(prev.offset) + ", +" + num(prev.compressedSize) + ") and " + name(refs[i]) +
             " [" + num(cur.offset) + ", +" + num(cur.compressedSize) + ") share payload bytes";
    };
    const bool same = cur.offset == prev.offset && cur.compressedSize == prev.compressedSize;
    if (version < 6 || !same) return both();
    if (cur.kind != PayloadKind::Cubin || prev.kind != PayloadKind::Cubin || cur.target != prev.target)
      return both() + "; only cubin entries of one target may share a payload (a module)";
    if (cur.rawSize != prev.rawSize || cur.rawChecksum != prev.rawChecksum)
      return both() + " but record different uncompressed sizes or checksums";
  }
  return checkRawTotal(rawTotal);
}

// The expression of a launch-rule field, or a failure naming the kernel and the field.
Expr readExpr(In& in, const std::string& kernel, const std::string& field) {
  std::string text = in.str(field.c_str());
  if (in.failed()) return {};
  Result<Expr> e = Expr::parse(text);
  if (!e) {
    in.fail("kernel " + quoted(kernel) + ": " + field + " " + quoted(text) + ": " + e.error().message + " (column " + num(e.error().column) + ")");
    return {};
  }
  return std::move(*e);
}

// Version 5's tensor-map rules (version 8: with their ranks); checkKernel checks them with the
// rest of the rule.
void readTensorMaps(In& in, const std::string& kernel, LaunchRule& launch, uint32_t version) {
  uint32_t n = in.count("tensor map count", 0, kMaxParams);
  for (uint32_t i = 0; i < n && !in.failed(); ++i) {
    TensorMapRule m;
    std::string at = "tensor_maps[" + num(i) + "]";
    m.param = in.str("tensor map parameter");
    m.source = in.str("tensor map source");
    uint32_t element = in.u32();
    if (!in.failed() && (element < 1 || element > static_cast<uint32_t>(ParamType::Scalar::TensorMap)))
      in.fail("kernel " + quoted(kernel) + ": " + at + " has unknown element type code " + num(element));
    m.element = static_cast<ParamType::Scalar>(element);
    const uint32_t rank = version >= 8 ? in.count("tensor map rank", 2, kMaxTensorMapRank) : 2;
    for (uint32_t d = 0; d < rank && !in.failed(); ++d)
      m.dims.push_back(readExpr(in, kernel, at + ".dims[" + num(d) + "]"));
    for (uint32_t d = 0; d + 1 < rank && !in.failed(); ++d)
      m.strides.push_back(readExpr(in, kernel, at + "." + tensorMapStrideName(d)));
    for (uint32_t d = 0; d < rank && !in.failed(); ++d) m.box.push_back(in.u32());
    m.swizzle = in.u32();
    launch.tensorMaps.push_back(std::move(m));
  }
}

// writeCode's fields; checkKernel checks them.
void readCode(In& in, const std::string& kernel, std::vector<Param>& params, LaunchRule& launch, uint32_t version) {
  uint32_t np = in.count("parameter count", 0, kMaxParams);
  for (uint32_t i = 0; i < np && !in.failed(); ++i) {
    Param p;
    p.name = in.str("parameter name");
    uint32_t code = in.u32();
    std::optional<ParamType> type = ParamType::decode(code);
    if (!in.failed() && !type) in.fail("kernel " + quoted(kernel) + ": parameter " + quoted(p.name) + " has unknown type code " + num(code));
    if (type) p.type = *type;
    p.align = in.u32();
    p.access = in.u32();
    if (uint32_t elem = in.u32(); elem != 0) {
      // Checked with the rest of the kernel (checkKernel): a scalar of ParamType other than Ptr;
      // the fp8 codes' element types from version 10.
      const auto last = version >= 10 ? ParamType::Scalar::E5M2 : ParamType::Scalar::Ptr;
      if (!in.failed() && (elem > static_cast<uint32_t>(last) || elem == static_cast<uint32_t>(ParamType::Scalar::TensorMap)))
        in.fail("kernel " + quoted(kernel) + ": parameter " + quoted(p.name) + " has unknown element type code " + num(elem));
      else
        p.element = static_cast<ParamType::Scalar>(elem);
    }
    if (version >= 9) {
      std::string text = in.str("parameter extent");
      if (!in.failed() && !text.empty()) {
        Result<Expr> e = Expr::parse(text);
        if (!e)
          in.fail("kernel " + quoted(kernel) + ": extent of parameter " + quoted(p.name) + " " + quoted(text) + ": " +
                  e.error().message + " (column " + num(e.error().column) + ")");
        else
          p.extent = std::move(*e);  // checked with the rest of the kernel (checkKernel)
      }
    }
    params.push_back(std::move(p));
  }
  uint32_t nb = in.count("block dimension count", 1, 3);
  launch.block.clear();
  for (uint32_t i = 0; i < nb && !in.failed(); ++i) launch.block.push_back(in.u32());
  uint32_t ng = in.count("grid dimension count", 1, 3);
  launch.grid.clear();
  for (uint32_t i = 0; i < ng && !in.failed(); ++i) launch.grid.push_back(readExpr(in, kernel, "grid[" + num(i) + "]"));
  launch.dynamicShared = readExpr(in, kernel, "dynamic_shared");
  if (version >= 5) readTensorMaps(in, kernel, launch, version);
}

Result<Manifest> parseManifest(std::span<const uint8_t> bytes, uint64_t payloadBytes, uint32_t version) {
  In in(bytes, "manifest");
  Manifest m;
  auto fail = [&](std::string msg) { in.fail(std::move(msg)); };
  m.name = in.str("bundle name");
  if (!in.failed() && !isIdentifier(m.name)) fail("bundle name " + quoted(m.name) + " is not an identifier");
  uint32_t flags = in.u32();
  if (!in.failed() && (flags & ~(kFlagPtx | kFlagIr)) != 0) fail("unknown manifest flags " + num(flags));
  m.ptxFallback = (flags & kFlagPtx) != 0;
  m.ir = (flags & kFlagIr) != 0;
  m.ptxasVersion = in.str("ptxas version");
  uint32_t nt = in.count("target count", 1, kMaxTargets);
  for (uint32_t i = 0; i < nt && !in.failed(); ++i) {
    std::string text = in.str("target");
    if (in.failed()) break;
    std::optional<Target> t = Target::parse(text);
    if (!t) fail("invalid target " + quoted(text));
    else if (!m.targets.empty() && !(m.targets.back() < *t)) fail("targets are not sorted and unique at " + quoted(text));
    else m.targets.push_back(*t);
  }
  uint32_t nk = in.count("kernel count", 0, kMaxKernels);
  for (uint32_t ki = 0; ki < nk && !in.failed(); ++ki) {
    KernelInfo k;
    k.name = in.str("kernel name");
    if (in.failed()) break;
    if (!m.kernels.empty() && !(m.kernels.back().name < k.name)) fail("kernels are not sorted and unique at " + quoted(k.name));
    readCode(in, k.name, k.params, k.launch, version);
    if (in.failed()) break;
    if (auto bad = checkKernel(k.name, k.params, k.launch)) {
      fail(*bad);
      break;
    }
    if (version >= 7) {
      // At most one variant a target beyond the kernel's own; checkVariants finds the rest.
      uint32_t nv = in.count("variant count", 0, nt - 1);
      for (uint32_t i = 0; i < nv && !in.failed(); ++i) {
        Variant v;
        v.targets = in.u64();
        readCode(in, k.name, v.params, v.launch, version);
        k.variants.push_back(std::move(v));
      }
      if (in.failed()) break;
      if (auto bad = checkVariants(k.name, k.params, k.variants, nt)) {
        fail(*bad);
        break;
      }
    }
    uint32_t ne = in.count("entry count", nt, 3 * nt);
    for (uint32_t i = 0; i < ne && !in.failed(); ++i) {
      Entry e;
      e.target = in.u32();
      uint32_t kind = in.u32();
      e.kind = static_cast<PayloadKind>(kind);
      e.resources = readResources(in);
      e.offset = in.u64();
      e.compressedSize = in.u64();
      e.rawSize = in.u64();
      e.rawChecksum = in.u64();
      if (in.failed()) break;
      auto where = [&] { return "kernel " + quoted(k.name) + " entry " + num(i) + ": "; };  // for an error only
      if (e.target >= nt) fail(where() + "target index " + num(e.target) + " out of range");
      else if (!isKnownKind(e.kind)) fail(where() + "unknown payload kind " + num(kind));
      else if (e.kind == PayloadKind::Ptx && !m.ptxFallback) fail(where() + "PTX payload in a bundle without the PTX flag");
      else if (e.kind == PayloadKind::Ir && !m.ir) fail(where() + "IR payload in a bundle without the IR flag");
      else if (e.kind != PayloadKind::Cubin && e.resources != Resources{})
        fail(where() + (e.kind == PayloadKind::Ptx ? "PTX" : "IR") + " payload with resource usage");
      else if (!k.entries.empty() &&
               (e.target < k.entries.back().target || (e.target == k.entries.back().target && kind <= static_cast<uint32_t>(k.entries.back().kind))))
        fail(where() + "entries are not sorted and unique");
      else if (e.compressedSize == 0 || e.offset > payloadBytes || e.compressedSize > payloadBytes - e.offset)
        fail(where() + "payload bytes [" + num(e.offset) + ", +" + num(e.compressedSize) + ") lie outside the payload section of " + num(payloadBytes) + " bytes");
      else if (e.rawSize == 0 || e.rawSize > kMaxPayloadBytes)
        fail(where() + "uncompressed size " + num(e.rawSize) + " is outside 1 to " + num(kMaxPayloadBytes));
      k.entries.push_back(e);
    }
    if (in.failed()) break;
    if (auto bad = checkCoverage(k.name, m.targets, m.ir, [&](uint32_t t, PayloadKind kind) { return k.find(t, kind) != nullptr; }))
      fail(*bad);
    m.kernels.push_back(std::move(k));
  }
  if (!in.failed() && !in.atEnd()) fail("manifest has " + num(bytes.size() - in.pos()) + " trailing bytes");
  if (!in.failed()) {
    bool hasCubins = false;
    for (const KernelInfo& k : m.kernels)
      for (const Entry& e : k.entries) hasCubins = hasCubins || e.kind == PayloadKind::Cubin;
    if (auto bad = checkPtxasVersion(m.ptxasVersion, hasCubins)) fail(*bad);
    else if (auto refs = checkPayloadRefs(m, version)) fail(*refs);
  }
  if (in.failed()) return Error{"corrupt bundle: " + in.error()};
  return m;
}

}  // namespace

Result<Reader> Reader::open(std::span<const uint8_t> f, Verify verify) {
  if (f.size() < sizeof kMagic) return Error{"not a truenoc bundle: " + num(f.size()) + " bytes is too short"};
  if (std::memcmp(f.data(), kMagic, sizeof kMagic) != 0) return Error{"not a truenoc bundle (bad magic)"};
  if (f.size() < 12) return Error{"truncated bundle: " + num(f.size()) + " bytes end inside the header"};
  uint32_t version = readU32(f, 8);
  const std::string readable = "versions " + num(kOldestFormatVersion) + " to " + num(kFormatVersion);
  if (version < kOldestFormatVersion)
    return Error{"bundle format version " + num(version) + " is older than this truenoc reads (" + readable +
                 "); rebuild the bundle with this truenoc"};
  if (version > kFormatVersion)
    return Error{"unsupported bundle format version " + num(version) + " (this truenoc reads " + readable + ")"};
  size_t tableEnd = kHeaderSize + kSectionCount * kSectionEntrySize;
  if (f.size() < tableEnd) return Error{"truncated bundle: " + num(f.size()) + " bytes end inside the header"};
  if (f.size() > kMaxBundleBytes) return Error{"bundle of " + num(f.size()) + " bytes exceeds the limit of " + num(kMaxBundleBytes)};
  uint32_t sections = readU32(f, 12);
  if (sections != kSectionCount) return Error{"corrupt bundle: " + num(sections) + " sections (expected " + num(kSectionCount) + ")"};
  if (readU64(f, 48) != headerChecksum(f)) return Error{"corrupt bundle: header checksum mismatch"};
  uint64_t recorded = readU64(f, 16);
  if (recorded > f.size()) return Error{"truncated bundle: the header records " + num(recorded) + " bytes, only " + num(f.size()) + " present"};
  if (recorded < f.size()) return Error{"corrupt bundle: " + num(f.size() - recorded) + " bytes after the recorded end"};

  Reader r;
  r.version_ = version;
  r.verify_ = verify;
  std::string producer(reinterpret_cast<const char*>(f.data() + 24), kProducerSize);
  producer.resize(producer.find('\0') == std::string::npos ? producer.size() : producer.find('\0'));
  if (producer.empty() || !isPrintable(producer)) return Error{"corrupt bundle: bad producer field"};
  for (size_t i = 24 + producer.size(); i < 24 + kProducerSize; ++i)
    if (f[i] != 0) return Error{"corrupt bundle: bad producer field"};
  r.producer_ = producer;

  std::span<const uint8_t> sec[kSectionCount];
  uint64_t expectOffset = tableEnd;
  static constexpr uint32_t kKinds[kSectionCount] = {kSectionManifest, kSectionPayloads};
  static constexpr const char* kNames[kSectionCount] = {"manifest", "payload"};
  static constexpr uint64_t kCaps[kSectionCount] = {kMaxManifestBytes, kMaxBundleBytes};
  for (uint32_t i = 0; i < kSectionCount; ++i) {
    size_t at = kHeaderSize + i * kSectionEntrySize;
    uint32_t kind = readU32(f, at), reserved = readU32(f, at + 4);
    uint64_t off = readU64(f, at + 8), size = readU64(f, at + 16), sum = readU64(f, at + 24);
    std::string name = kNames[i];
    if (kind != kKinds[i] || reserved != 0) return Error{"corrupt bundle: section " + num(i) + " has kind " + num(kind) + " (expected " + name + ")"};
    if (off != expectOffset || size > kCaps[i] || size > f.size() - off)
      return Error{"corrupt bundle: " + name + " section [" + num(off) + ", +" + num(size) + ") does not fit the file layout"};
    sec[i] = f.subspan(off, size);
    const bool checked = verify == Verify::All || kKinds[i] != kSectionPayloads;
    if (checked && fnv1a64(sec[i]) != sum) return Error{"corrupt bundle: " + name + " section checksum mismatch"};
    expectOffset = off + size;
  }
  if (expectOffset != f.size()) return Error{"corrupt bundle: sections end at byte " + num(expectOffset) + " of " + num(f.size())};

  Result<Manifest> m = parseManifest(sec[0], sec[1].size(), version);
  if (!m) return m.error();
  r.manifest_ = std::move(*m);
  r.payloads_ = sec[1];
  r.stats_.fileBytes = f.size();
  r.stats_.manifestBytes = sec[0].size();
  r.stats_.payloadSectionBytes = sec[1].size();
  std::set<uint64_t> seen;  // payload offsets: a module counts once
  for (const KernelInfo& k : r.manifest_.kernels)
    for (const Entry& e : k.entries)
      if (seen.insert(e.offset).second) r.stats_.rawPayloadBytes += e.rawSize;
  return r;
}

namespace {

// This thread's decompression context, kept for its next payload: creating one for each payload
// costs about as much as decompressing a small cubin. nullptr when it cannot be allocated.
ZSTD_DCtx* threadDecompressor() {
  struct Owned {
    ZSTD_DCtx* ctx = ZSTD_createDCtx();
    ~Owned() { ZSTD_freeDCtx(ctx); }
  };
  thread_local Owned owned;
  return owned.ctx;
}

}  // namespace

Result<std::string> Reader::payload(const Entry& e) const {
  if (e.target >= manifest_.targets.size() || e.offset > payloads_.size() || e.compressedSize > payloads_.size() - e.offset ||
      e.rawSize > kMaxPayloadBytes)
    return Error{"payload entry does not describe this bundle"};
  std::string what = std::string(payloadKindName(e.kind)) + " for " + manifest_.targets[e.target].name() + " at payload offset " + num(e.offset);
  std::span<const uint8_t> z = payloads_.subspan(e.offset, e.compressedSize);
  unsigned long long content = ZSTD_getFrameContentSize(z.data(), z.size());
  if (content == ZSTD_CONTENTSIZE_ERROR || content == ZSTD_CONTENTSIZE_UNKNOWN || content != e.rawSize)
    return Error{"corrupt bundle: " + what + " is not a zstd frame of " + num(e.rawSize) + " bytes"};
  size_t frame = ZSTD_findFrameCompressedSize(z.data(), z.size());
  if (ZSTD_isError(frame) || frame != z.size()) return Error{"corrupt bundle: " + what + " is not exactly one zstd frame"};
  // RFC 8878 3.1.1.1.1: bit 2 of the frame header descriptor, the byte after the 4-byte magic.
  const bool zstdChecked = (z[4] & 0x04) != 0;
  std::string raw(e.rawSize, '\0');
  ZSTD_DCtx* dctx = threadDecompressor();
  size_t n = dctx ? ZSTD_decompressDCtx(dctx, raw.data(), raw.size(), z.data(), z.size())
                  : ZSTD_decompress(raw.data(), raw.size(), z.data(), z.size());
  if (ZSTD_isError(n)) return Error{"corrupt bundle: " + what + ": " + ZSTD_getErrorName(n)};
  if (n != e.rawSize) return Error{"corrupt bundle: " + what + " decompressed to " + num(n) + " bytes, expected " + num(e.rawSize)};
  // zstd has compared the frame's content checksum with the bytes it restored (an error above if
  // they differ); with Verify::Used that check stands for the manifest's, which costs a byte-serial
  // FNV-1a pass (0.3 ms for a 230 KB module on the build machine, as long as decompressing it).
  if ((verify_ == Verify::All || !zstdChecked) && fnv1a64(bytesOf(raw)) != e.rawChecksum)
    return Error{"corrupt bundle: " + what + ": checksum mismatch"};
  return raw;
}

std::optional<Error> Reader::verifyPayloads() const {
  std::set<uint64_t> done;  // payload offsets: a module is decompressed once
  for (const KernelInfo& k : manifest_.kernels)
    for (const Entry& e : k.entries) {
      if (!done.insert(e.offset).second) continue;
      Result<std::string> p = payload(e);
      if (!p) return Error{"kernel '" + k.name + "': " + p.error().message};
    }
  return std::nullopt;
}

}  // namespace tn::bundle
