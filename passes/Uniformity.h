// Uniformity: which values, branches and blocks may differ between the threads of a block and
// between the lanes of a warp, with the divergent source behind each (barrier-safety's core;
// tile-validation uses it for the leaves of thread evaluation).
#pragma once

#include <string>
#include <vector>

#include "ir/Dominance.h"
#include "passes/Analysis.h"
#include "passes/ThreadEval.h"

namespace tn::passes {

enum class Scope : uint8_t { Block, Warpgroup, Warp };

struct Divergence {
  std::vector<bool> value;      // per ValueId: may differ between threads of the scope
  std::vector<ValueId> origin;  // per divergent value: the divergent source it derives from
  std::vector<bool> branch;     // per block: ends in a cbr whose direction may differ
  std::vector<bool> control;    // per block: may be executed by only some threads of the scope
  std::vector<BlockId> cause;   // per control-divergent block: the divergent branch deciding it
};

struct Uniformity {
  ThreadLayout layout;
  Divergence block;      // between the threads of a block (barriers)
  Divergence warp;       // between the lanes of a warp (shfl.sync, vote.sync)
  Divergence warpgroup;  // between the threads of a warpgroup (wgmma, setmaxnreg): only for a
                         // kernel with such ops (isWarpgroupOp), else empty
};

// setmaxnreg and wgmma.*: executed together by the 4 warps of a warpgroup (TC§4.1, TC§6).
bool isWarpgroupOp(ir::Op op);

// The analysis (a fixed point over the CFG): sources are the ops flagged OF_DIVERGENT (tid,
// laneid, warpid, ld, atom, shfl.sync, vote.sync), refined per scope -- warpid and vote are the
// same across a warp, shfl.sync.idx from a warp-uniform lane too, and any value the thread
// evaluator finds constant within each warp (tid.x >> 5 with a known layout); tid.y/tid.z of
// extent 1 are uniform. Divergence flows through operands, into the parameters of blocks where
// the paths of a divergent branch join, and out of loops whose exit a divergent branch decides
// (values defined in the loop and read after it). The warpgroup scope is the block scope's sources
// refined by the thread evaluator over groups of 128 threads (tid.x >> 7 with a known layout).
// With Scopes::BlockOnly the warp scope is skipped (`warp` stays empty): what a caller needs
// that only asks which values are the same in every thread (tile-validation's leaves).
enum class Scopes : uint8_t { Both, BlockOnly };
Uniformity analyzeUniformity(const Kernel& k, const ir::DominatorTree& cfg, const PostDominatorTree& pdom,
                             Scopes scopes = Scopes::Both);

// "tid.x at 7:9": the op that makes a value divergent, for diagnostics.
std::string describeSource(const Kernel& k, ValueId v);
// "line:col" of a location.
std::string lineCol(ir::SourceLoc loc);

}  // namespace tn::passes
