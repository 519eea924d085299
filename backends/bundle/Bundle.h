// The .tnb bundle container (docs/bundle-format.md): a header with magic, format version and
// producer, a section table with an FNV-1a 64 checksum per section, a binary manifest (kernels,
// signatures, launch rules, per-target resources and payload references) and zstd-compressed
// payloads (cubins, optional PTX, optional IR text). Part of truenoc_bundle: no IR dependency, so
// the runtime can read bundles without the compiler.
//
// The writer is deterministic: the same input gives byte-identical output. The reader validates
// every byte it relies on before use and reports problems as values; it never throws, prints or
// trusts a size it has not checked against the caps below.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backends/bundle/LaunchRule.h"
#include "backends/bundle/Target.h"

namespace tn::bundle {

// 10: fp8 element types (e4m3, e5m2). 9: pointer parameters' extents. 8: tensor maps of rank 3. 7: kernel variants. 6: cubin entries
// may share a payload (a module: one cubin holding several kernels of a target). 5: tensor-map
// rules. The writer writes the oldest version that holds what a bundle has (4 without any of
// these), so that older readers read it; this reader reads 4 to 10.
inline constexpr uint32_t kFormatVersion = 10;
inline constexpr uint32_t kOldestFormatVersion = 4;  // 4: pointer access and element types
inline constexpr size_t kHeaderSize = 56;
inline constexpr size_t kSectionEntrySize = 32;
inline constexpr size_t kProducerSize = 24;
// zstd levels: cubins at 19, the smallest; PTX and IR text at 15, within about 1.5 % of level 19's
// size in under half its time (text payloads are most of a bundle's raw bytes; docs/bundle-format.md).
inline constexpr int kCubinCompressionLevel = 19;
inline constexpr int kTextCompressionLevel = 15;

// Caps that bound the work a hostile bundle can cause.
inline constexpr uint64_t kMaxBundleBytes = 1ull << 30;
inline constexpr uint64_t kMaxManifestBytes = 16ull << 20;
inline constexpr uint64_t kMaxPayloadBytes = 256ull << 20;  // one payload, uncompressed
inline constexpr uint64_t kMaxTotalRawBytes = 1ull << 30;   // all payloads together, uncompressed
inline constexpr uint32_t kMaxKernels = 4096;
inline constexpr uint32_t kMaxTargets = 64;
inline constexpr uint32_t kMaxParams = 256;
inline constexpr uint32_t kMaxStringBytes = 4096;

// Ir: the .tir text of a module holding just that kernel for that target, as compiled (after the
// pass pipeline: what the PTX was emitted from); for truenoc's interpreter, not for the driver.
enum class PayloadKind : uint32_t { Cubin = 1, Ptx = 2, Ir = 3 };
std::string_view payloadKindName(PayloadKind k);
// "cubin", "ptx" or "ir"; nullopt for any other name.
std::optional<PayloadKind> payloadKindNamed(std::string_view name);

// ptxas -v resource usage of one cubin (all zero for PTX and IR entries).
struct Resources {
  uint32_t registers = 0;
  uint32_t barriers = 0;
  uint32_t sharedBytes = 0;  // static shared memory
  uint32_t constBytes = 0;   // cmem[0]: parameters and constants
  uint32_t stackBytes = 0;
  uint32_t spillStores = 0;  // bytes
  uint32_t spillLoads = 0;   // bytes
  bool operator==(const Resources&) const = default;
};

// One payload of a kernel as the manifest records it. From version 6 the cubin entries of several
// kernels for one target may describe the same payload (offset, sizes and checksum alike): a
// module, which the driver loads once for all of them.
struct Entry {
  uint32_t target = 0;  // index into Manifest::targets
  PayloadKind kind = PayloadKind::Cubin;
  Resources resources;
  uint64_t offset = 0;          // into the payload section
  uint64_t compressedSize = 0;
  uint64_t rawSize = 0;
  uint64_t rawChecksum = 0;     // FNV-1a 64 of the uncompressed bytes
};

// The code of a kernel for some of the bundle's targets that takes other parameters or another
// launch rule than the kernel's own (version 7): a template entry with mainloop = "auto" builds the
// wgmma member for sm_90a and the mma.sync member for the other targets. Its caller-visible
// parameters (all but the tmap ones) are the kernel's, alike in name, type, pointer use and
// element type, so one signature launches it everywhere; alignments and tmap parameters may differ.
struct Variant {
  uint64_t targets = 0;  // bit t: Manifest::targets[t]; never every target (the kernel's own serve one)
  std::vector<Param> params;
  LaunchRule launch;
};

struct KernelInfo {
  std::string name;
  std::vector<Param> params;  // of the code for the targets no variant lists
  LaunchRule launch;
  std::vector<Variant> variants;  // disjoint, sorted by their lowest target
  std::vector<Entry> entries;     // sorted by (target, kind)
  const Entry* find(uint32_t target, PayloadKind kind) const;
  // The parameters and launch rule of the code for target index t.
  const std::vector<Param>& paramsFor(uint32_t target) const;
  const LaunchRule& launchFor(uint32_t target) const;
  // The targets (bit t: Manifest::targets[t]) whose code the kernel's own params and launch
  // serve: all but its variants' (bits past the bundle's targets set too).
  uint64_t ownTargets() const;
};

struct Manifest {
  std::string name;
  std::vector<Target> targets;      // sorted by architecture: sm_80 < sm_86 < sm_90 < sm_90a < sm_100
  bool ptxFallback = false;
  bool ir = false;                  // every kernel has one IR entry per target (else none has any)
  std::string ptxasVersion;         // of the ptxas that assembled the cubins; "" when there are none
  std::vector<KernelInfo> kernels;  // sorted by name
  const KernelInfo* find(std::string_view kernel) const;
  int targetIndex(Target target) const;  // -1 when absent
  // The names of the targets in `mask` (bit t: targets[t]), in the bundle's order.
  std::vector<std::string> targetNames(uint64_t mask) const;
};

// FNV-1a 64 (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
uint64_t fnv1a64(std::span<const uint8_t> bytes, uint64_t h = 0xcbf29ce484222325ull);

// ---- writing -----------------------------------------------------------------------------------

struct PayloadInput {
  Target target;
  PayloadKind kind = PayloadKind::Cubin;
  Resources resources;
  std::string bytes;  // uncompressed; empty for a module's cubin entry
  // A cubin entry of BundleInput::modules[*module] (of the same target), whose cubin holds this
  // kernel among others; bytes stay empty.
  std::optional<uint32_t> module = std::nullopt;
};

// One cubin holding several kernels of one target (ptxas over their PTX together): each of those
// kernels' cubin entries refers to it, so the driver loads one module for all of them.
struct ModuleInput {
  Target target;
  std::string bytes;  // uncompressed
};

struct VariantInput {
  std::vector<Target> targets;  // some of BundleInput::targets, not all
  std::vector<Param> params;
  LaunchRule launch;
};

struct KernelInput {
  std::string name;
  std::vector<Param> params;  // for the targets no variant lists
  LaunchRule launch;
  std::vector<PayloadInput> payloads;
  std::vector<VariantInput> variants = {};
};

struct BundleInput {
  std::string name;
  std::vector<Target> targets;
  bool ptxFallback = false;
  bool ir = false;           // then every kernel needs an IR payload for every target
  std::string ptxasVersion;  // required when there are cubins, else empty (ptxas::version)
  std::string producer;  // e.g. "truenoc 0.1.0"; at most kProducerSize bytes
  std::vector<KernelInput> kernels;
  std::vector<ModuleInput> modules;  // each used by at least one cubin entry
};

struct WriteOptions {
  // Threads that compress the payloads (at least one: the caller's); the bytes do not depend on it.
  unsigned threads = 1;
};

// Serializes and compresses; sorts kernels, targets and payloads into canonical order. Errors
// for input the reader would reject (bad names, duplicates, caps, unchecked launch rules).
Result<std::string> write(const BundleInput& in, const WriteOptions& options = {});

// ---- reading -----------------------------------------------------------------------------------

struct BundleStats {
  uint64_t fileBytes = 0;
  uint64_t manifestBytes = 0;
  uint64_t payloadSectionBytes = 0;
  uint64_t rawPayloadBytes = 0;  // sum of uncompressed payload sizes, a shared one counted once
};

// What Reader::open checksums. Used: everything but the payload section, whose bytes are checked
// only when a payload is decompressed (by its own checksum), for a reader that uses few of them:
// the runtime, which would otherwise hash every target's cubins, PTX and IR to load one target's
// cubins. Damage to a payload that is never read then goes unnoticed; every other check stays.
// A payload read under Used is checked by its zstd frame's content checksum where it has one
// (every bundle written since 2026-11-28), else by the manifest's.
enum class Verify : uint8_t { All, Used };

class Reader {
 public:
  // Validates the whole container (header, section checksums as `verify` says, manifest structure
  // and caps, payload references: disjoint, and kMaxTotalRawBytes in all, launch rules) without
  // decompressing anything. The reader borrows `bytes`: keep them alive and unchanged.
  static Result<Reader> open(std::span<const uint8_t> bytes, Verify verify = Verify::All);

  const Manifest& manifest() const { return manifest_; }
  const std::string& producer() const { return producer_; }
  uint32_t formatVersion() const { return version_; }
  const BundleStats& stats() const { return stats_; }
  // Decompresses one payload and checks its size and checksum: the manifest's, and zstd's when
  // the frame has one (zstd's alone with Verify::Used).
  Result<std::string> payload(const Entry& e) const;
  // Decompresses and checks every payload; the first failure is returned.
  std::optional<Error> verifyPayloads() const;

 private:
  std::span<const uint8_t> payloads_;
  std::string producer_;
  uint32_t version_ = kFormatVersion;
  Verify verify_ = Verify::All;
  Manifest manifest_;
  BundleStats stats_;
};

}  // namespace tn::bundle
