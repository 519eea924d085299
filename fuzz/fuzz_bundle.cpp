// Bundle bytes -> tn::bundle::Reader::open -> verifyPayloads, as `truenoc inspect` and the
// runtime read a bundle (BundleMutator.cpp reseals most mutants so the manifest gets fuzzed).
#include <cstddef>
#include <cstdint>
#include <span>

#include "backends/bundle/Bundle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto reader = tn::bundle::Reader::open(std::span<const uint8_t>(data, size));
  if (reader) (void)reader->verifyPayloads();
  return 0;
}
