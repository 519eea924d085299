// Per-target resource limits and the occupancy estimate used by tile-validation and `truenoc explain`.
#pragma once

#include <optional>
#include <span>
#include <string>

#include "ir/IR.h"

namespace tn::passes {

struct TargetLimits {
  unsigned sm;                    // 80 = sm_80
  unsigned maxThreadsPerBlock;    // 1024 everywhere listed
  unsigned maxStaticShared;       // bytes of static shared memory per block (48 KB)
  unsigned maxDynamicShared;      // bytes per block with the opt-in (cudaFuncAttributeMaxDynamicSharedMemorySize)
  unsigned sharedPerSM;           // bytes of shared memory per SM
  unsigned sharedReservedPerBlock;// bytes the driver reserves per resident block (1 KB from sm_80)
  unsigned regsPerThread;         // 255
  unsigned regsPerSM;             // 64K 32-bit registers
  unsigned maxWarpsPerSM;
  unsigned maxBlocksPerSM;
};

// sm_75, sm_80, sm_86, sm_87, sm_89, sm_90, in that order.
std::span<const TargetLimits> allTargetLimits();
// The row of `sm`, or of the closest listed target below it (sm_75 for anything older);
// arch-specific targets (sm_90a) use their base row.
const TargetLimits& limitsFor(unsigned sm);

// One occupancy estimate (docs/passes.md): registers clamped to [1, regsPerThread], rounded up to
// 8 per thread and allocated per warp; shared memory plus the per-block reservation; the fewest
// blocks any of registers, shared memory, warps per SM and blocks per SM allow.
// tile-validation and `truenoc explain` both use it.
struct Occupancy {
  static constexpr unsigned kUnlimited = 0xFFFFFFFFu;  // byShared when a block uses no shared memory
  unsigned registers = 0;          // per thread, as counted after clamping
  unsigned registersPerBlock = 0;  // as allocated
  unsigned sharedPerBlock = 0;     // bytes, reservation included
  unsigned byRegisters = 0, byShared = 0, byWarps = 0, byBlocks = 0;
  unsigned blocks = 0, warps = 0, maxWarps = 0, percent = 0;
  const char* limitedBy = "";
};
Occupancy estimateOccupancy(const TargetLimits& lim, unsigned threads, unsigned registers, unsigned sharedBytes);

// The registers per thread that k's hints leave ptxas on a target: its maxnreg, and what
// minnctapersm resident blocks of its block size (reqntid or maxntid) leave of the SM's register
// file, allocated in units of 8 per thread. nullopt when k has neither hint.
std::optional<unsigned> registerLimit(const TargetLimits& lim, const ir::Kernel& k);

// The bytes of k's static shared arrays, laid out in declaration order with their alignment (as
// tile-validation lays them out), saturated at UINT32_MAX.
unsigned staticSharedBytes(const ir::Kernel& k);

// "48 KB" when bytes is a whole number of KB, else "49153 bytes".
std::string kbText(unsigned bytes);

}  // namespace tn::passes
