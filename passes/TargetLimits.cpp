#include "passes/TargetLimits.h"

namespace tn::passes {

namespace {
// CUDA C++ Programming Guide, "Technical Specifications per Compute Capability".
constexpr unsigned kKB = 1024;
constexpr TargetLimits kLimits[] = {
    {75, 1024, 48 * kKB, 64 * kKB, 64 * kKB, 0, 255, 65536, 32, 16},
    {80, 1024, 48 * kKB, 163 * kKB, 164 * kKB, kKB, 255, 65536, 64, 32},
    {86, 1024, 48 * kKB, 99 * kKB, 100 * kKB, kKB, 255, 65536, 48, 16},
    {87, 1024, 48 * kKB, 163 * kKB, 164 * kKB, kKB, 255, 65536, 48, 16},
    {89, 1024, 48 * kKB, 99 * kKB, 100 * kKB, kKB, 255, 65536, 48, 24},
    {90, 1024, 48 * kKB, 227 * kKB, 228 * kKB, kKB, 255, 65536, 64, 32},
};
}  // namespace

std::span<const TargetLimits> allTargetLimits() { return kLimits; }

const TargetLimits& limitsFor(unsigned sm) {
  const TargetLimits* best = &kLimits[0];
  for (const TargetLimits& l : kLimits)
    if (l.sm <= sm) best = &l;
  return *best;
}

std::string kbText(unsigned bytes) {
  if (bytes % 1024 == 0) return std::to_string(bytes / 1024) + " KB";
  return std::to_string(bytes) + " bytes";
}

}  // namespace tn::passes
