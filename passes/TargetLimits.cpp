#include "passes/TargetLimits.h"

#include <algorithm>

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

Occupancy estimateOccupancy(const TargetLimits& lim, unsigned threads, unsigned registers, unsigned sharedBytes) {
  Occupancy o;
  o.registers = std::min(std::max(registers, 1u), lim.regsPerThread);
  o.sharedPerBlock = sharedBytes + lim.sharedReservedPerBlock;
  unsigned warps = (threads + 31) / 32;
  o.registersPerBlock = (o.registers + 7) / 8 * 8 * 32 * warps;  // allocated 256 per warp
  o.byRegisters = lim.regsPerSM / o.registersPerBlock;
  o.byShared = o.sharedPerBlock ? lim.sharedPerSM / o.sharedPerBlock : Occupancy::kUnlimited;
  o.byWarps = lim.maxWarpsPerSM / warps;
  o.byBlocks = lim.maxBlocksPerSM;
  struct Bound {
    const char* what;
    unsigned blocks;
  };
  const Bound bounds[] = {{"registers", o.byRegisters},
                          {"shared memory", o.byShared},
                          {"warps per SM", o.byWarps},
                          {"blocks per SM", o.byBlocks}};
  const Bound* low = &bounds[0];
  for (const Bound& b : bounds)
    if (b.blocks < low->blocks) low = &b;
  o.limitedBy = low->what;
  o.blocks = low->blocks;
  o.warps = o.blocks * warps;
  o.maxWarps = lim.maxWarpsPerSM;
  o.percent = o.warps * 100 / lim.maxWarpsPerSM;
  return o;
}

std::optional<unsigned> registerLimit(const TargetLimits& lim, const ir::Kernel& k) {
  std::optional<unsigned> limit;
  if (k.maxnreg) limit = std::min(*k.maxnreg, lim.regsPerThread);
  const std::optional<ir::Dim3>& block = k.reqntid ? k.reqntid : k.maxntid;
  if (k.minnctapersm && *k.minnctapersm && block) {
    unsigned threads = (block->total() + 31) / 32 * 32;
    unsigned perThread = std::min(lim.regsPerSM / (*k.minnctapersm * threads) / 8 * 8, lim.regsPerThread);
    limit = std::min(limit.value_or(perThread), perThread);
  }
  return limit;
}

std::string kbText(unsigned bytes) {
  if (bytes % 1024 == 0) return std::to_string(bytes / 1024) + " KB";
  return std::to_string(bytes) + " bytes";
}

unsigned staticSharedBytes(const ir::Kernel& k) {
  uint64_t end = 0;
  for (const ir::SharedDecl& s : k.shared) {
    if (s.dynamic) continue;
    uint64_t align = std::max(1u, s.align);
    end = (end + align - 1) / align * align + s.bytes();
  }
  return static_cast<unsigned>(std::min<uint64_t>(end, UINT32_MAX));
}

}  // namespace tn::passes
