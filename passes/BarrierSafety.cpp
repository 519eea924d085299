// barrier-safety -- does: uniformity analysis; errors: barriers/collectives under divergent control; warns: races.
// requires: a verified kernel; computes CFG, post-dominators, control dependence, uniformity and thread values itself.
// guarantees: the IR is not changed; each error points at the op and names the divergent branch (note at the branch).
#include <algorithm>
#include <optional>
#include <unordered_map>

#include "ir/Dominance.h"
#include "ir/Printer.h"
#include "passes/Analysis.h"
#include "passes/Passes.h"
#include "passes/Uniformity.h"

namespace tn::passes {

namespace {

using ir::Op;

class Checker {
 public:
  Checker(PassContext& ctx, const Kernel& k)
      : ctx_(ctx), k_(k), cfg_(k), pdom_(k, cfg_), u_(analyzeUniformity(k, cfg_, pdom_)) {}

  void run() {
    for (BlockId b : cfg_.reversePostOrder()) {
      for (InstId id : k_.block(b).insts) {
        const ir::Inst& in = k_.inst(id);
        if (in.op == Op::BarSync)
          checkBarrier(b, in);
        else if (in.op == Op::ShflSync || in.op == Op::VoteSync || in.op == Op::ElectSync)
          checkCollective(b, in);
        else if (ir::hasFlag(in.op, ir::OF_CONVERGENT) && in.op != Op::Call)  // .sync.aligned: mma, ldmatrix, ...
          if (!checkWarpInstruction(b, in) && isWarpgroupOp(in.op)) checkWarpgroupInstruction(b, in);
      }
      if (ctx_.options.remarks) remarkBranch(b);
    }
    checkSharedRaces();
  }

 private:
  const ir::NameTable& names() const {
    if (!names_) names_.emplace(k_);
    return *names_;
  }
  const ir::Inst& branchOf(BlockId b) const { return k_.inst(k_.block(b).insts.back()); }

  std::string branchText(BlockId b) const {
    const ir::Inst& br = branchOf(b);
    return "'%" + names().value(br.operands[0]) + "' at " + lineCol(br.loc);
  }

  static const char* between(Scope scope) {
    return scope == Scope::Warp ? "lanes of a warp" : scope == Scope::Warpgroup ? "warps of a warpgroup" : "threads of a block";
  }

  // "it depends on tid.x at L:C": why v may differ within the scope of d.
  std::string dependsOn(const Divergence& d, ValueId v) const {
    ValueId origin = d.value[v.index] ? d.origin[v.index] : ValueId();
    return "it depends on " +
           (origin.valid() ? describeSource(k_, origin) : std::string("a value of a loop that threads leave at different iterations"));
  }

  void noteBranch(BlockId b, const Divergence& d, Scope scope) {
    const ir::Inst& br = branchOf(b);
    ValueId cond = br.operands[0];
    ctx_.report(ir::Severity::Note, br.loc,
                "'%" + names().value(cond) + "' may differ between the " + between(scope) + ": " + dependsOn(d, cond));
  }

  void checkBarrier(BlockId b, const ir::Inst& bar) {
    if (!u_.block.control[b.index]) return;
    BlockId cause = u_.block.cause[b.index];
    if (const ir::Inst* exit = earlyReturn(cause, b)) {
      ctx_.report(ir::Severity::Error, bar.loc,
                  "bar.sync may be skipped by some threads of the block: after the divergent branch on " +
                      branchText(cause) + ", threads can return at " + lineCol(exit->loc) + " without reaching it");
    } else {
      ctx_.report(ir::Severity::Error, bar.loc,
                  "bar.sync may be skipped by some threads of the block: it is control-dependent on the divergent "
                  "branch on " + branchText(cause));
    }
    noteBranch(cause, u_.block, Scope::Block);
  }

  // A `ret` reachable from the branch without passing the barrier's block, from which the
  // barrier cannot be reached either: the threads taking it leave the kernel early.
  const ir::Inst* earlyReturn(BlockId branch, BlockId barrier) const {
    std::vector<bool> afterBarrier = reachableFrom(k_, cfg_, barrier);
    afterBarrier[barrier.index] = true;
    std::vector<bool> seen(k_.blocks.size(), false);
    std::vector<BlockId> work(cfg_.successors(branch).begin(), cfg_.successors(branch).end());
    while (!work.empty()) {
      BlockId x = work.back();
      work.pop_back();
      if (x == barrier || seen[x.index]) continue;
      seen[x.index] = true;
      const ir::Inst* term = k_.terminator(x);
      if (term && term->op == Op::Ret && !afterBarrier[x.index]) return term;
      for (BlockId s : cfg_.successors(x)) work.push_back(s);
    }
    return nullptr;
  }

  void checkCollective(BlockId b, const ir::Inst& in) {
    if (!u_.warp.control[b.index]) return;
    size_t maskIndex = in.op == Op::ShflSync ? 3 : in.op == Op::ElectSync ? 0 : 1;
    if (in.operands.size() <= maskIndex) return;
    auto mask = constBits(k_, in.operands[maskIndex]);
    if (!mask || (*mask & 0xFFFFFFFFu) != 0xFFFFFFFFu) return;  // a computed mask names its lanes
    BlockId cause = u_.warp.cause[b.index];
    ctx_.report(ir::Severity::Error, in.loc,
                std::string(ir::info(in.op).name) +
                    " with the full mask 0xFFFFFFFF is control-dependent on the warp-divergent branch on " +
                    branchText(cause) + ": lanes that branch the other way never arrive");
    noteBranch(cause, u_.warp, Scope::Warp);
  }

  // mma and ldmatrix have no member mask: the whole warp must execute them together. Whether it
  // reported.
  bool checkWarpInstruction(BlockId b, const ir::Inst& in) {
    if (!u_.warp.control[b.index]) return false;
    BlockId cause = u_.warp.cause[b.index];
    ctx_.report(ir::Severity::Error, in.loc,
                std::string(ir::info(in.op).name) + " needs the full warp, but it is control-dependent on the "
                "warp-divergent branch on " + branchText(cause) + ": lanes that branch the other way never arrive");
    noteBranch(cause, u_.warp, Scope::Warp);
    return true;
  }

  // setmaxnreg and wgmma.* need the 4 warps of a warpgroup together, and wgmma the same
  // descriptors in all of them (TC§4.1).
  void checkWarpgroupInstruction(BlockId b, const ir::Inst& in) {
    const std::string name(ir::info(in.op).name);
    if (u_.warpgroup.control[b.index]) {
      BlockId cause = u_.warpgroup.cause[b.index];
      ctx_.report(ir::Severity::Error, in.loc,
                  name + " needs the whole warpgroup, but it is control-dependent on the branch on " + branchText(cause) +
                      ", which may differ between its warps: warps that branch the other way never arrive");
      noteBranch(cause, u_.warpgroup, Scope::Warpgroup);
      return;
    }
    if (in.op != Op::WgmmaMma) return;
    for (size_t i : {size_t{1}, size_t{2}}) {  // A (a descriptor, or a register fragment) and B
      if (i >= in.operands.size()) break;
      ValueId v = in.operands[i];
      if (k_.typeOf(v) != ir::Type::of(ir::Scalar::B64) || !u_.warpgroup.value[v.index]) continue;
      ctx_.report(ir::Severity::Error, in.loc,
                  name + "'s " + (i == 1 ? "A" : "B") + " descriptor '%" + names().value(v) +
                      "' may differ between the warps of its warpgroup, which must all pass the same: " + dependsOn(u_.warpgroup, v));
    }
  }

  void remarkBranch(BlockId b) {
    const ir::Block& blk = k_.block(b);
    if (blk.insts.empty() || branchOf(b).op != Op::Cbr) return;
    const ir::Inst& br = branchOf(b);
    std::string what = "'%" + names().value(br.operands[0]) + "'";
    std::string msg;
    if (!u_.block.branch[b.index])
      msg = "branch on " + what + " is uniform";
    else if (!u_.warp.branch[b.index])
      msg = "branch on " + what + " diverges between warps but is uniform within each warp";
    else
      msg = "branch on " + what + " is divergent";
    ctx_.report(ir::Severity::Note, br.loc, msg);
  }

  // ---- shared-memory store -> load without a barrier ------------------------------------------

  struct Access {
    InstId id;
    BlockId block;
    size_t index;
    const ThreadValue* addr;
    uint64_t base;                 // shared array key (kDynamicSharedKey for all dynamic arrays)
    std::vector<SymTerm> offset;   // the other uniform terms
    unsigned bytes;
  };

  std::optional<Access> sharedAccess(BlockId b, size_t i, ThreadEval& eval) const {
    InstId id = k_.block(b).insts[i];
    const ir::Inst& in = k_.inst(id);
    // A cp.async stores into shared memory (asynchronously: its wait_group/wait_all is per thread
    // and no barrier, so another thread's load needs a bar.sync after it all the same).
    bool async = in.op == Op::CpAsync;
    if ((in.op != Op::Ld && in.op != Op::St && !async) || in.operands.empty() || (!in.type && !async))
      return std::nullopt;
    if (k_.typeOf(in.operands[0]) != ir::Type::ptr(ir::AddrSpace::Shared)) return std::nullopt;
    const ThreadValue* tv = eval.get(in.operands[0]);
    if (!tv || !tv->offsetLike()) return std::nullopt;
    Access a{id, b, i, tv, 0, {}, async ? static_cast<unsigned>(in.imm) : in.type->bytes()};
    for (const SymTerm& t : tv->uniform) {
      if (t.key >= kSharedKey) {
        if (a.base || t.coef != 1) return std::nullopt;
        a.base = t.key;
      } else {
        a.offset.push_back(t);
      }
    }
    if (!a.base) return std::nullopt;
    return a;
  }

  // Whether `to` runs after `from` on some path with no barrier (barrierAfter) in between: later in from's
  // block before a barrier, or (when none follows from there) in a block reached through blocks
  // without barriers, before that block's first barrier. The blocks reached that way depend on
  // from's block only, and are searched once per block.
  bool reachesWithoutBarrier(const Access& from, const Access& to) {
    uint32_t after = barrierAfter(from.block, from.index + 1);
    if (to.block == from.block && to.index > from.index) return to.index < after;
    if (after < k_.block(from.block).insts.size()) return false;
    auto [it, fresh] = barrierFree_.try_emplace(from.block.index);
    std::vector<uint32_t>& reached = it->second;
    if (fresh) {
      if (seen_.empty()) seen_.assign(k_.blocks.size(), 0);
      uint32_t stamp = ++stamp_;
      std::vector<BlockId> work(cfg_.successors(from.block).begin(), cfg_.successors(from.block).end());
      while (!work.empty()) {
        BlockId x = work.back();
        work.pop_back();
        if (seen_[x.index] == stamp) continue;
        seen_[x.index] = stamp;
        reached.push_back(x.index);
        if (barrierAfter(x, 0) < k_.block(x).insts.size()) continue;
        for (BlockId s : cfg_.successors(x)) work.push_back(s);
      }
      std::sort(reached.begin(), reached.end());
    }
    return std::binary_search(reached.begin(), reached.end(), to.block.index) && to.index < barrierAfter(to.block, 0);
  }

  // Position of the first bar.sync or bar.named.sync at or after `start` in block b (its size when
  // none). A named barrier orders only the threads that take part in it, which this analysis of
  // one code path cannot tell; it is taken as ordering the path's threads, so that warp-specialized
  // code synchronized by named barriers gets no false warnings. bar.named.arrive does not wait, so
  // it orders nothing for the thread that goes on past it.
  uint32_t barrierAfter(BlockId b, size_t start) {
    if (barriers_.empty()) {
      barriers_.resize(k_.blocks.size());
      for (size_t x = 0; x < k_.blocks.size(); ++x)
        for (size_t i = 0; i < k_.blocks[x].insts.size(); ++i)
          if (Op op = k_.inst(k_.blocks[x].insts[i]).op; op == Op::BarSync || op == Op::BarNamedSync)
            barriers_[x].push_back(static_cast<uint32_t>(i));
    }
    const std::vector<uint32_t>& at = barriers_[b.index];
    auto it = std::lower_bound(at.begin(), at.end(), start);
    return it != at.end() ? *it : static_cast<uint32_t>(k_.block(b).insts.size());
  }

  // May a thread load bytes that a different thread stored?
  bool crossThread(const Access& st, const Access& ld, const std::vector<ThreadSet>& active) const {
    const ThreadSet& as = active[st.block.index];
    const ThreadSet& al = active[ld.block.index];
    if (st.offset != ld.offset) {
      // An unknown uniform distance between the addresses: any two distinct threads may meet.
      int writers = 0, readers = 0, single = -1;
      for (size_t t = 0; t < as.size(); ++t) {
        if (as[t]) ++writers, single = static_cast<int>(t);
        if (al[t]) ++readers;
      }
      if (!writers || !readers) return false;
      return !(writers == 1 && readers == 1 && al[static_cast<size_t>(single)]);
    }
    constexpr int kMany = -2;
    std::map<int64_t, int> owner;
    for (size_t t = 0; t < as.size(); ++t) {
      if (!as[t]) continue;
      for (unsigned i = 0; i < st.bytes; ++i) {
        auto [it, fresh] = owner.try_emplace(st.addr->perThread[t] + i, static_cast<int>(t));
        if (!fresh && it->second != static_cast<int>(t)) it->second = kMany;
      }
    }
    for (size_t t = 0; t < al.size(); ++t) {
      if (!al[t]) continue;
      for (unsigned i = 0; i < ld.bytes; ++i) {
        auto it = owner.find(ld.addr->perThread[t] + i);
        if (it != owner.end() && it->second != static_cast<int>(t)) return true;
      }
    }
    return false;
  }

  void checkSharedRaces() {
    ThreadEval eval(k_, u_.layout, [&](ValueId v) { return !u_.block.value[v.index]; });
    std::vector<Access> stores, loads;
    for (BlockId b : cfg_.reversePostOrder())
      for (size_t i = 0; i < k_.block(b).insts.size(); ++i)
        if (auto a = sharedAccess(b, i, eval)) (k_.inst(a->id).op == Op::Ld ? loads : stores).push_back(*a);
    if (stores.empty() || loads.empty()) return;
    std::vector<ThreadSet> active = activeThreads(k_, cfg_, eval);
    for (const Access& ld : loads)
      for (const Access& st : stores) {
        if (st.base != ld.base || !reachesWithoutBarrier(st, ld) || !crossThread(st, ld, active)) continue;
        ctx_.report(ir::Severity::Warning, k_.inst(ld.id).loc,
                    "shared load may read a value stored by another thread at " + lineCol(k_.inst(st.id).loc) +
                        " with no bar.sync in between");
        break;
      }
  }

  PassContext& ctx_;
  const Kernel& k_;
  ir::DominatorTree cfg_;
  PostDominatorTree pdom_;
  Uniformity u_;
  // For reachesWithoutBarrier, filled when first asked: the positions of each block's
  // barriers, and by store block the blocks reached without one (a search stamps seen_).
  std::vector<std::vector<uint32_t>> barriers_;
  std::unordered_map<uint32_t, std::vector<uint32_t>> barrierFree_;
  std::vector<uint32_t> seen_;
  uint32_t stamp_ = 0;
  mutable std::optional<ir::NameTable> names_;  // for messages only: built on the first one
};

}  // namespace

bool barrierSafety(PassContext& ctx) {
  for (const ir::Kernel& k : ctx.module.kernels)
    if (!k.blocks.empty()) Checker(ctx, k).run();
  return false;
}

}  // namespace tn::passes
