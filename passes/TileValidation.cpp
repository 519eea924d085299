// tile-validation -- does: checks target limits: static shared, occupancy, vector and cp.async alignment, shared bank conflicts.
// requires: a verified kernel; computes uniformity, thread values, alignment and register-liveness's prediction itself.
// guarantees: the IR is not changed; errors for impossible configurations, warnings with the numbers for poor ones.
#include <algorithm>
#include <bit>
#include <array>

#include "ir/Dominance.h"
#include "passes/Analysis.h"
#include "passes/Passes.h"
#include "passes/RegisterLiveness.h"
#include "passes/Rewrite.h"
#include "passes/TargetLimits.h"
#include "passes/Uniformity.h"

namespace tn::passes {

namespace {

using ir::Op;

constexpr uint64_t kAligned = uint64_t{1} << 20;  // "at least this aligned" (zero, huge powers)

uint64_t lowBit(uint64_t c) { return c == 0 ? kAligned : std::min<uint64_t>(c & (~c + 1), kAligned); }

// The largest power of two known to divide each integer or pointer value (an optimistic fixed
// point: kernel parameters give `align N`, shared arrays their declared alignment, constants
// their low bit; + - take the minimum, * and << scale it, & with a mask raises it).
std::vector<uint64_t> knownAlignment(const Kernel& k, const ir::DominatorTree& cfg) {
  std::vector<uint64_t> a(k.values.size(), kAligned);
  for (const ir::KernelParam& p : k.params) a[p.value.index] = p.align ? p.align : 1;
  auto mul = [](uint64_t x, uint64_t y) { return std::min(x * y, kAligned); };
  for (bool changed = true; changed;) {
    changed = false;
    auto set = [&](ValueId v, uint64_t x) {
      x = std::max<uint64_t>(x, 1);
      if (x < a[v.index]) {
        a[v.index] = x;
        changed = true;
      }
    };
    for (BlockId b : cfg.reversePostOrder()) {
      const ir::Block& blk = k.block(b);
      for (size_t i = 0; i < blk.params.size(); ++i)
        for (BlockId p : cfg.predecessors(b)) {
          const ir::Inst* term = k.terminator(p);
          if (!term) continue;
          for (const ir::BlockCall& c : term->succs)
            if (c.block == b && i < c.args.size()) set(blk.params[i], a[c.args[i].index]);
        }
      for (InstId id : blk.insts) {
        const ir::Inst& in = k.inst(id);
        if (!in.result) continue;
        auto op = [&](size_t j) { return j < in.operands.size() ? a[in.operands[j].index] : 1; };
        auto cst = [&](size_t j) { return j < in.operands.size() ? constBits(k, in.operands[j]) : std::nullopt; };
        switch (in.op) {
          case Op::Const: set(in.result, lowBit(in.imm)); break;
          case Op::SharedAddr:
            set(in.result, in.symbol >= 0 && static_cast<size_t>(in.symbol) < k.shared.size()
                               ? k.shared[in.symbol].align
                               : 1);
            break;
          case Op::Add:
          case Op::Sub:
          case Op::PtrAdd:
          case Op::Selp:
          case Op::Min:
          case Op::Max: set(in.result, std::min(op(0), op(1))); break;
          case Op::Mul:
          case Op::MulWide: set(in.result, mul(op(0), op(1))); break;
          case Op::Mad: set(in.result, std::min(mul(op(0), op(1)), op(2))); break;
          case Op::Shl: {
            auto n = cst(1);
            set(in.result, n && *n < 20 ? mul(op(0), uint64_t{1} << *n) : op(0));
            break;
          }
          case Op::And: set(in.result, std::max(op(0), op(1))); break;
          case Op::Cvt:
          case Op::Bitcast:
            if (in.srcType && !in.srcType->isFloat() && in.type && !in.type->isFloat())
              set(in.result, in.srcType->bits() <= in.type->bits() ? op(0)
                                                                   : std::min(op(0), uint64_t{1} << in.type->bits()));
            else
              set(in.result, 1);
            break;
          default: set(in.result, 1); break;
        }
      }
    }
  }
  return a;
}

class Validator {
 public:
  Validator(PassContext& ctx, size_t index)
      : ctx_(ctx), index_(index), k_(ctx.module.kernels[index]), limits_(limitsFor(ctx.module.target.sm)),
        target_(ctx.module.target.name()), cfg_(k_) {}

  void run() {
    unsigned shared = checkStaticShared();
    checkOccupancy(shared);
    checkAlignment();
    checkBankConflicts();
    checkFp8Mma();
  }

 private:
  // fp8 mma.sync (m16n8k32 .e4m3/.e5m2) on a target whose tensor cores ptxas does not give it:
  // for sm_90, sm_100, sm_103 and sm_110 (and their `a` forms) ptxas 13.0 turns each into F2FP
  // conversions of the codes to f16 and two HMMA.16816 (nvdisasm), so the kernel runs at f16's
  // tensor rate, not fp8's; sm_89 and sm_120/121 have QMMA. One warning a kernel, at its first.
  void checkFp8Mma() {
    const unsigned sm = ctx_.module.target.sm;
    if (sm < 90 || sm >= 120) return;
    for (const ir::Block& b : k_.blocks)
      for (InstId id : b.insts) {
        const ir::Inst& in = k_.inst(id);
        if (in.op != Op::Mma || in.mod(ir::ModGroup::Fp8) == ir::Mod::None) continue;
        ctx_.report(ir::Severity::Warning, in.loc,
                    "kernel @" + k_.name + ": fp8 mma.sync is emulated on " + target_ +
                        ": ptxas converts the codes to f16 and issues two f16 mma for each, at f16's tensor rate" +
                        (sm == 90 ? "; Hopper's fp8 tensor cores are wgmma's (target sm_90a; gemm: mainloop \"wgmma\" "
                                    "or \"auto\")"
                                  : ""));
        return;
      }
  }

  unsigned checkStaticShared() {
    uint64_t end = 0;
    bool reported = false;
    for (const ir::SharedDecl& s : k_.shared) {
      if (s.dynamic) continue;
      uint64_t align = std::max(1u, s.align);
      end = (end + align - 1) / align * align + s.bytes();
      if (end > limits_.maxStaticShared && !reported) {
        reported = true;
        uint64_t total = staticSharedBytes(k_);
        ctx_.report(ir::Severity::Error, s.loc,
                    "static shared memory of kernel @" + k_.name + " is " + std::to_string(total) +
                        " bytes, over the limit of " + kbText(limits_.maxStaticShared) + " (" +
                        std::to_string(limits_.maxStaticShared) + " bytes) per block on " + target_ +
                        "; only dynamic shared memory can be larger, up to " + kbText(limits_.maxDynamicShared) + " (" +
                        std::to_string(limits_.maxDynamicShared) + " bytes) per block on " + target_);
      }
    }
    return static_cast<unsigned>(std::min<uint64_t>(end, UINT32_MAX));
  }

  void checkOccupancy(unsigned shared) {
    const RegisterAssignment& ra = ctx_.registersOf(index_);
    unsigned threads = k_.reqntid ? k_.reqntid->total() : k_.maxntid ? k_.maxntid->total() : 0;
    bool dynamic = std::any_of(k_.shared.begin(), k_.shared.end(), [](const ir::SharedDecl& s) { return s.dynamic; });
    std::string sharedText = std::to_string(shared) + " bytes of static shared memory" +
                             (dynamic ? " plus the dynamic shared memory given at launch" : "");
    if (!threads) {
      if (ctx_.options.remarks)
        ctx_.report(ir::Severity::Note, k_.loc,
                    "kernel @" + k_.name + " on " + target_ + ": block size unknown (no reqntid or maxntid); " +
                        sharedText + ", about " + std::to_string(ra.predicted) + " registers per thread");
      return;
    }
    // ptxas fits the kernel into its register limit (minnctapersm/maxnreg) or spills; build
    // checks the spills, so a prediction over the limit is only a remark.
    std::optional<unsigned> limit = registerLimit(limits_, k_);
    unsigned registers = limit ? std::min(ra.predicted, *limit) : ra.predicted;
    if (limit && ra.predicted > *limit && ctx_.options.remarks)
      ctx_.report(ir::Severity::Note, k_.loc,
                  "kernel @" + k_.name + " on " + target_ + ": about " + std::to_string(ra.predicted) +
                      " registers per thread live at the peak (in IR order), over its limit of " +
                      std::to_string(*limit) + " (" + limitText() + "): ptxas must reorder it into " +
                      std::to_string(*limit) + " or spill");
    Occupancy occ = estimateOccupancy(limits_, threads, registers, shared);
    if (k_.minnctapersm && occ.blocks < *k_.minnctapersm) {
      ctx_.report(ir::Severity::Warning, k_.loc,
                  "kernel @" + k_.name + " asks for minnctapersm(" + std::to_string(*k_.minnctapersm) +
                      "), but at most " + std::to_string(occ.blocks) + " blocks of " + std::to_string(threads) +
                      " threads fit an SM of " + target_ + " (limited by " + occ.limitedBy + ", " + sharedText + ")");
      return;
    }
    if (occ.byRegisters == 0) {
      unsigned cap = limits_.regsPerSM / ((threads + 31) / 32 * 32) / 8 * 8;
      ctx_.report(ir::Severity::Warning, k_.loc,
                  "kernel @" + k_.name + " has about " + std::to_string(ra.predicted) +
                      " registers per thread live at its peak (in IR order), " + std::to_string(occ.registersPerBlock) +
                      " for a block of " + std::to_string(threads) + " threads, more than the " +
                      std::to_string(limits_.regsPerSM) + " of an SM of " + target_ + ": ptxas must reorder it into " +
                      std::to_string(cap) + " registers per thread or spill");
      return;
    }
    unsigned activeWarps = occ.warps;
    unsigned pct = occ.percent;
    std::string numbers = "estimated occupancy " + std::to_string(pct) + "% on " + target_ + " (" +
                          std::to_string(activeWarps) + " of " + std::to_string(limits_.maxWarpsPerSM) +
                          " warps per SM: " + std::to_string(occ.blocks) + " blocks of " + std::to_string(threads) +
                          " threads), limited by " + occ.limitedBy + "; about " + std::to_string(registers) +
                          " registers per thread" + (limit ? " (" + limitText() + ": at most " + std::to_string(*limit) + ")" : "") +
                          ", " + sharedText;
    // A kernel that states the blocks per SM it was designed for (minnctapersm), and gets them,
    // has chosen its occupancy: only a remark then.
    if (pct < 25 && !k_.minnctapersm)
      ctx_.report(ir::Severity::Warning, k_.loc, "kernel @" + k_.name + ": low " + numbers);
    else if (ctx_.options.remarks)
      ctx_.report(ir::Severity::Note, k_.loc, "kernel @" + k_.name + ": " + numbers);
  }

  std::string limitText() const {
    std::string s;
    if (k_.minnctapersm) s = "minnctapersm(" + std::to_string(*k_.minnctapersm) + ")";
    if (k_.maxnreg) s += (s.empty() ? "" : ", ") + std::string("maxnreg(") + std::to_string(*k_.maxnreg) + ")";
    return s;
  }

  void checkAlignment() {
    std::vector<uint64_t> align = knownAlignment(k_, cfg_);
    for (BlockId b : cfg_.reversePostOrder())
      for (InstId id : k_.block(b).insts) {
        const ir::Inst& in = k_.inst(id);
        if (in.op == Op::CpAsync) {
          checkAsyncCopyAlignment(in, align);
          continue;
        }
        if ((in.op != Op::Ld && in.op != Op::St) || !in.type || !in.type->isVector() || in.operands.empty()) continue;
        uint64_t need = in.type->bytes();
        uint64_t have = align[in.operands[0].index];
        if (have >= need) continue;
        ctx_.report(ir::Severity::Error, in.loc,
                    typeName(*in.type) + (in.op == Op::Ld ? " load" : " store") + " needs an address aligned to " +
                        std::to_string(need) + " bytes, but it is only known to be aligned to " + std::to_string(have) +
                        (have == 1 ? " byte" : " bytes") + " (declare the pointer with 'align " + std::to_string(need) +
                        "' and offset it by multiples of " + std::to_string(need) + ")");
      }
  }

  // cp.async: both addresses aligned to the copy size (PTX, "Addresses as Operands").
  void checkAsyncCopyAlignment(const ir::Inst& in, const std::vector<uint64_t>& align) {
    for (size_t i = 0; i < 2 && i < in.operands.size(); ++i) {
      uint64_t need = in.imm, have = align[in.operands[i].index];
      if (have >= need) continue;
      ctx_.report(ir::Severity::Error, in.loc,
                  "cp.async of " + std::to_string(need) + " bytes needs its " + (i == 0 ? "destination" : "source") +
                      " aligned to " + std::to_string(need) + " bytes, but it is only known to be aligned to " +
                      std::to_string(have) + (have == 1 ? " byte" : " bytes") +
                      (i == 0 ? " (align the shared array and offset it by multiples of "
                              : " (declare the pointer with 'align " + std::to_string(need) +
                                    "' and offset it by multiples of ") +
                      std::to_string(need) + ")");
    }
  }

  void checkBankConflicts() {
    ir::DominatorTree& cfg = cfg_;
    PostDominatorTree pdom(k_, cfg);
    Uniformity u = analyzeUniformity(k_, cfg, pdom, Scopes::BlockOnly);
    ThreadEval eval(k_, u.layout, [&](ValueId v) { return !u.block.value[v.index]; });
    std::vector<ThreadSet> active;
    for (BlockId b : cfg.reversePostOrder())
      for (InstId id : k_.block(b).insts) {
        const ir::Inst& in = k_.inst(id);
        // A cp.async writes its shared destination like a store of its size. An ldmatrix reads
        // one 16-byte row per lane of lanes 0 .. 8*count-1, a matrix (8 lanes) per phase.
        bool async = in.op == Op::CpAsync, rows = in.op == Op::Ldmatrix;
        if ((in.op != Op::Ld && in.op != Op::St && !async && !rows) || (!in.type && !async) || in.operands.empty())
          continue;
        if (k_.typeOf(in.operands[0]) != ir::Type::ptr(ir::AddrSpace::Shared)) continue;
        const ThreadValue* addr = eval.get(in.operands[0]);
        if (!addr || !addr->offsetLike()) continue;
        if (active.empty()) active = activeThreads(k_, cfg, eval);
        unsigned bytes = async ? static_cast<unsigned>(in.imm) : rows ? 16 : in.type->bytes();
        std::string what = async ? "cp.async shared store" : rows ? "ldmatrix row read" : in.op == Op::Ld ? "shared load" : "shared store";
        if (rows) {
          ThreadSet lanes(addr->perThread.size());
          const size_t readers = 8 * size_t(in.type->lanes);
          for (size_t t = 0; t < addr->perThread.size(); ++t)
            if (active[b.index][t] && t % 32 < readers) lanes.set(t);
          report(in, bytes, what, *addr, lanes);
        } else if (bytes == 4 || bytes == 8 || bytes == 16 || !async) {
          report(in, bytes, what, *addr, active[b.index]);
        }
      }
  }

  // Bank-conflict degree: per warp and per phase (a warp's 8-byte accesses go in two halves,
  // 16-byte ones in four quarters), the most distinct 4-byte words that fall into one of the
  // 32 banks. Threads reading the same word share it (broadcast).
  void report(const ir::Inst& in, unsigned bytes, const std::string& what, const ThreadValue& addr,
              const ThreadSet& active) {
    unsigned phase = bytes <= 4 ? 32 : bytes == 8 ? 16 : 8;
    unsigned worst = 0, worstWarp = 0, worstBank = 0;
    size_t n = addr.perThread.size();
    std::array<std::vector<int64_t>, 32> byBank;  // the words each bank serves in one phase
    for (size_t first = 0; first < n; first += phase) {
      for (std::vector<int64_t>& words : byBank) words.clear();
      for (size_t t = first; t < std::min(first + phase, n); ++t) {
        if (!active[t]) continue;
        int64_t lo = addr.perThread[t];
        for (int64_t byte = lo; byte < lo + static_cast<int64_t>(bytes); byte += 4) {
          int64_t word = byte >= 0 ? byte / 4 : -((-byte + 3) / 4);
          byBank[((word % 32) + 32) % 32].push_back(word);
        }
      }
      for (unsigned bank = 0; bank < 32; ++bank) {
        std::vector<int64_t>& words = byBank[bank];
        std::sort(words.begin(), words.end());
        auto distinct = static_cast<unsigned>(std::unique(words.begin(), words.end()) - words.begin());
        if (distinct > worst) {
          worst = distinct;
          worstWarp = static_cast<unsigned>(first / 32);
          worstBank = bank;
        }
      }
    }
    if (!worst) return;
    std::string access = what + " of " + std::to_string(bytes) + " bytes per thread";
    if (worst > 1)
      ctx_.report(ir::Severity::Warning, in.loc,
                  std::to_string(worst) + "-way bank conflict: this " + access + " makes warp " +
                      std::to_string(worstWarp) + " touch " + std::to_string(worst) +
                      " different 4-byte words in bank " + std::to_string(worstBank) +
                      ", so it is replayed " + std::to_string(worst) + " times (pad or swizzle the layout)");
    else if (ctx_.options.remarks)
      ctx_.report(ir::Severity::Note, in.loc, "this " + access + " is free of bank conflicts");
  }

  PassContext& ctx_;
  size_t index_;
  const Kernel& k_;
  const TargetLimits& limits_;
  std::string target_;
  ir::DominatorTree cfg_;
};

}  // namespace

bool tileValidation(PassContext& ctx) {
  for (size_t i = 0; i < ctx.module.kernels.size(); ++i)
    if (!ctx.module.kernels[i].blocks.empty()) Validator(ctx, i).run();
  return false;
}

}  // namespace tn::passes
