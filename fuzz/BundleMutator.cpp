// libFuzzer's mutations, then most mutants resealed: the file size, the section sizes and the
// header and section checksums rewritten to match the mutated bytes. Without this nearly every
// mutant dies at a checksum and the manifest parser behind it is never fuzzed; the mutants left
// unsealed keep the checksum and size checks themselves under test. Shared by fuzz_bundle and
// fuzz_runtime. Offsets are those of docs/bundle-format.md.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "backends/bundle/Bundle.h"

namespace {

constexpr size_t kTableEnd = tn::bundle::kHeaderSize + 2 * tn::bundle::kSectionEntrySize;  // 120
constexpr size_t kManifestEntry = tn::bundle::kHeaderSize;
constexpr size_t kPayloadEntry = tn::bundle::kHeaderSize + tn::bundle::kSectionEntrySize;

uint64_t readU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

void writeU64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// Keeps the manifest's recorded size (where it ends is not known after an insertion) and gives
// the payload section the rest of the file.
void reseal(uint8_t* data, size_t size) {
  if (size < kTableEnd) return;
  writeU64(data + 16, size);
  uint64_t manifestSize = readU64(data + kManifestEntry + 16);
  if (manifestSize > size - kTableEnd) manifestSize = size - kTableEnd;
  writeU64(data + kManifestEntry + 8, kTableEnd);
  writeU64(data + kManifestEntry + 16, manifestSize);
  writeU64(data + kPayloadEntry + 8, kTableEnd + manifestSize);
  writeU64(data + kPayloadEntry + 16, size - kTableEnd - manifestSize);
  std::span<const uint8_t> file(data, size);
  writeU64(data + kManifestEntry + 24, tn::bundle::fnv1a64(file.subspan(kTableEnd, manifestSize)));
  writeU64(data + kPayloadEntry + 24, tn::bundle::fnv1a64(file.subspan(kTableEnd + manifestSize)));
  uint64_t h = tn::bundle::fnv1a64(file.subspan(0, 48));
  writeU64(data + 48, tn::bundle::fnv1a64(file.subspan(tn::bundle::kHeaderSize, kTableEnd - tn::bundle::kHeaderSize), h));
}

}  // namespace

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t maxSize);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t maxSize, unsigned int seed) {
  size = LLVMFuzzerMutate(data, size, maxSize);
  if (seed % 4 != 0) reseal(data, size);
  return size;
}
