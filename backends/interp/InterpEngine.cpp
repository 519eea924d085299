// The interpreter's execution engine. A launch hands its blocks, in order, to one Engine per host
// thread; in a block every warp runs until it reaches bar.sync or exits, then the barrier is
// checked and released. A warp executes one Code at a time for all threads of its active mask.
// Divergence uses a reconvergence stack: at a divergent cbr the current frame becomes the
// reconvergence frame (pc = the branching block's immediate post-dominator) and one frame per
// path is pushed; a frame is popped when its threads branch to its reconvergence block or return.
// Of two paths, one that cannot reach a barrier or collective runs first (see markSyncReach in
// InterpDecode.cpp). Faults stop the launch with an Error: the one of the lowest block, as if
// the blocks had run one after another.
#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cfenv>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "backends/interp/InterpImpl.h"

namespace tn::interp::detail {

namespace {

using ir::AddrSpace;
using ir::Dim3;
using ir::Mod;
using ir::Op;

constexpr uint32_t kExitPc = 0xFFFFFFFFu;
constexpr uint32_t kNoThread = 0xFFFFFFFFu;

struct Frame {
  uint32_t pc;    // where the frame's threads continue
  uint32_t mask;  // its threads (exited ones are filtered out when it resumes)
  uint32_t rpc;   // block at which the frame ends (kExitBlock: the virtual exit)
};

// Waiting: parked after an mbarrier.try_wait that returned false in some lane, until an mbarrier
// of the block changes.
// AtWarpgroup: converged at a wgmma op, until the other 3 warps of its warpgroup reach it too.
// AtNamed: at a bar.named.sync (waitBarrier: its ID), until the barrier's count has arrived.
enum class WarpState : uint8_t { Running, AtBarrier, Waiting, Done,
                                 AtWarpgroup, AtNamed };

struct Warp {
  uint32_t index = 0;
  uint32_t existing = 0;  // lanes that are threads of the block
  uint32_t exited = 0;
  WarpState state = WarpState::Running;
  uint32_t pc = 0;    // where a suspended warp continues
  uint32_t mask = 0;  // and with which threads
  uint64_t steps = 0;
  // Waiting: the mbarrier changes seen when it parked, and the wait it parked at.
  uint64_t parkedAt = 0;
  uint32_t waitPc = 0, waitLane = 0, waitBarrier = 0, waitParity = 0;
  std::vector<Frame> stack;
  uint64_t* regs = nullptr;
  uint32_t tid[3][kWarpSize] = {};
};

// Who touched a shared byte in the current barrier interval (epoch), for race detection.
// Each access is stamped with its thread's count of mbarrier arrivals before it (always 0 in a
// kernel without mbarriers), which tells whether a completed phase orders it before another
// thread's access.
struct ByteAccess {
  uint32_t writeEpoch = 0, writer = 0, writeInst = 0, writeStamp = 0;
  uint32_t readEpoch = 0, reader = 0, readInst = 0, readStamp = 0;
  uint32_t reader2 = kNoThread, reader2Inst = 0, reader2Stamp = 0;  // a second, different reader
};

enum class Access : uint8_t { Read, Write, Atomic };

// --check-races on global memory: the ByteAccess of every global byte the block touched in the
// current barrier interval, by address (a tagged pointer or a device address), four bytes (an
// aligned word) to an entry of an open-addressing table that starts empty in every interval
// (only its used slots are cleared).
class GlobalBytes {
 public:
  using Word = std::array<ByteAccess, 4>;
  // The entry of the word holding `addr` (bytes addr & ~3 ... + 3); valid until the next call.
  Word& word(uint64_t addr, uint32_t epoch) {
    if (epoch != epoch_) {
      for (uint32_t i : used_) slots_[i].key = kEmpty;
      used_.clear();
      epoch_ = epoch;
    }
    if ((used_.size() + 1) * 2 > slots_.size()) grow();
    return slots_[find(addr >> 2)].bytes;
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  struct Slot {
    uint64_t key = kEmpty;
    Word bytes;
  };
  // The slot of word `key`, taken for it if it had none.
  uint32_t find(uint64_t key) {
    const size_t mask = slots_.size() - 1;
    size_t i = (key * 0x9E3779B97F4A7C15ull) >> shift_;
    while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask;
    if (slots_[i].key == kEmpty) {
      slots_[i].key = key;
      slots_[i].bytes.fill(ByteAccess{});
      used_.push_back(static_cast<uint32_t>(i));
    }
    return static_cast<uint32_t>(i);
  }
  void grow() {
    std::vector<Slot> old;
    for (uint32_t i : used_) old.push_back(slots_[i]);
    slots_.assign(std::max<size_t>(1024, 2 * slots_.size()), Slot{});
    shift_ = 64 - std::countr_zero(slots_.size());
    used_.clear();
    for (const Slot& s : old) slots_[find(s.key)].bytes = s.bytes;
  }
  std::vector<Slot> slots_;
  std::vector<uint32_t> used_;  // the slots taken in this interval
  uint32_t epoch_ = 0;
  unsigned shift_ = 64;
};

// A run of global bytes one block wrote, or read (where the check between blocks covers reads, or
// by ld.nc), in a launch: [lo, hi) by instruction `inst`, in accesses of `size` bytes by
// consecutive threads from `thread` on.
struct Span {
  uint64_t lo = 0, hi = 0;
  uint64_t block = 0;  // linear
  uint32_t inst = 0, thread = 0;
  uint8_t size = 0;
  bool write = false, nc = false;
  uint32_t threadAt(uint64_t addr) const { return thread + static_cast<uint32_t>((addr - lo) / size); }
};

// Asynchronous copies (docs/interpreter.md, "Asynchronous copies"): a cp.async reads its source
// when issued and waits, per thread, in its group until a cp.async.wait_group/wait_all covers the
// group; only then do its bytes land in shared memory.
struct PendingCopy {
  uint32_t group = 0;  // the thread's group number (its count of commits when issued)
  uint32_t dst = 0;    // shared offset
  uint32_t inst = 0;
  uint8_t bytes = 0;
  std::array<std::byte, 16> data{};
};
struct ThreadCopies {
  std::vector<PendingCopy> pending;
  uint32_t committed = 0;  // groups committed so far; the open group has this number
};
// The cp.async state of one shared byte: pending (issued, not waited for), or landed at a wait in
// epoch landedEpoch, which makes it visible to its owner at once and to other threads after the
// next bar.sync. owner == kNoThread: no cp.async is involved.
struct AsyncByte {
  uint32_t owner = kNoThread, issueInst = 0, waitInst = 0, landedEpoch = 0;
  bool pending = false;
};

// wgmma (docs/interpreter.md, "wgmma"): an issued wgmma.mma_async has read A, B and the
// accumulator and computed D, which lands in its result registers when a wgmma.wait_group
// covers its group. Until then its accumulator, A and result registers may not be read (but a
// later wgmma may chain on the result, directly or through a loop's block parameter), and the
// shared bytes it read may not be written.
struct WgmmaOp {
  static constexpr uint32_t kOpen = 0xFFFFFFFFu;  // not committed to a group yet
  uint32_t inst = 0, group = kOpen;
  uint32_t acc = 0, a = 0, dst = 0;  // register slots (a: the register A fragment, or kNoThread)
  std::vector<uint32_t> aliases;     // block parameters its result was passed to before the wait
  std::vector<uint32_t> d;           // per (warp of the group, lane, element): f32 bits
  std::vector<uint32_t> reads;       // shared offsets of the 2-byte elements it read
};
struct WarpgroupState {
  bool fenced = false;
  uint32_t committed = 0;  // groups committed so far
  std::vector<std::pair<uint32_t, uint32_t>> dirty;  // (slot, inst): wgmma operands written since the last fence
  std::vector<WgmmaOp> inflight;
};
// The last generic write of a shared byte, and the writer's count of fence.proxy.async then.
struct ProxyMark {
  uint32_t thread = kNoThread, fences = 0, inst = 0;
};

// TMA (docs/interpreter.md, "Tensor memory access"). A load's destination byte stays pending
// with its mbarrier and phase: a thread may use it once its own try_wait has seen that phase
// complete. A store's source byte is being read until a wait_group.read of its thread covers the
// store's bulk group. Generic writes are stamped with their thread's count of fence.proxy.async,
// so that a store can tell whether the writer fenced since.
constexpr uint32_t kNoBarrier = 0xFFFFFFFFu;
struct TmaByte {
  uint32_t barrier = kNoBarrier, phase = 0, inst = 0, issuer = 0;
};
struct ProxyByte {
  uint32_t writer = kNoThread, writeInst = 0, fences = 0;  // the last generic write
  uint32_t reader = kNoThread, readInst = 0;               // a TMA store still reading it
};
struct BulkStore {
  uint32_t group = 0, inst = 0, lo = 0, hi = 0;  // its source bytes lie in [lo, hi)
};
struct ThreadBulk {
  std::vector<BulkStore> pending;
  uint32_t committed = 0;  // bulk groups committed so far; the open group has this number
  uint32_t fences = 0;     // fence.proxy.async executed so far
};

// The physical shared address of linear address a under a TMA/wgmma swizzle mode (TC§4.5;
// CUtensorMapSwizzle numbering: 1 32B, 2 64B, 3 128B): the 16-byte chunk bits [4+m-1:4] take the
// XOR of the 128-byte line bits [7+m-1:7].
uint32_t swizzled(uint32_t a, unsigned mode) {
  return mode ? a ^ (((a >> 7) & ((1u << mode) - 1)) << 4) : a;
}

// Keeps the host's floating-point environment and runs the launch in round-to-nearest.
class FenvGuard {
 public:
  FenvGuard() {
    std::fegetenv(&saved_);
    std::fesetround(FE_TONEAREST);
  }
  ~FenvGuard() { std::fesetenv(&saved_); }

 private:
  std::fenv_t saved_;
};

std::string dimText(const Dim3& d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08" PRIx32, v);
  return buf;
}

std::string hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

// "at offset N of 'name' (S bytes)", or with device memory "at address A (offset N of the S-byte
// allocation at B)": the place of a global byte in messages.
std::string globalPlace(const GlobalMemory& m, uint64_t addr) {
  if (m.device) {
    std::optional<DeviceMemory::Allocation> a = m.device->below(addr);
    if (!a || addr - a->base >= a->bytes) return "at address " + hex64(addr);
    return "at address " + hex64(addr) + " (offset " + std::to_string(addr - a->base) + " of the " +
           std::to_string(a->bytes) + "-byte allocation at " + hex64(a->base) + ")";
  }
  uint64_t tag = pointerTag(addr);
  if (tag == 0 || tag > m.buffers.size()) return "at " + hex64(addr);
  const GlobalBuffer& b = m.buffers[tag - 1];
  return "at offset " + std::to_string(pointerOffset(addr)) + " of '" + b.name + "' (" +
         std::to_string(b.bytes->size()) + " bytes)";
}

// The block of a grid with linear index `linear` (x fastest), and the thread of a block.
Dim3 blockOfLinear(uint64_t linear, const Dim3& grid) {
  return {static_cast<uint32_t>(linear % grid.x), static_cast<uint32_t>(linear / grid.x % grid.y),
          static_cast<uint32_t>(linear / (uint64_t(grid.x) * grid.y))};
}
Dim3 threadOfLinear(uint32_t t, const Dim3& block) {
  return {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
}

// A run-time fault at instruction `inst`: "WHAT in kernel 'K', block (x,y,z) thread (x,y,z)".
Error launchFault(const Program& p, ErrorKind kind, uint32_t inst, Dim3 block, Dim3 thread, const std::string& what) {
  Error e;
  e.kind = kind;
  ir::SourceLoc loc = p.locs[inst];
  std::string file = loc.file < p.files.size() ? p.files[loc.file] : "";
  e.diag = {ir::Severity::Error, file, loc,
            what + " in kernel '" + p.kernel + "', block " + dimText(block) + " thread " + dimText(thread)};
  e.block = block;
  e.thread = thread;
  return e;
}

// What the engines of one launch share.
struct Launch {
  const Program& p;
  std::span<const uint64_t> params;       // per parameter: its value, a vector's first word
  std::span<const uint64_t> vectorWords;  // the words of vector parameters after their first
  GlobalMemory memory;
  const LaunchConfig& cfg;
  const Options& opts;
  uint32_t threadsPerBlock = 0;
  uint64_t sharedBytes = 0;
  std::atomic<uint64_t> instructions{0};  // thread instructions so far, for the launch budget
  // --check-races on global memory (docs/interpreter.md, "Checks"): loads are recorded only from
  // memory some st of the kernel may write, the buffers (by tag) or allocations (by base) its
  // written parameters (and its TMA stores' maps) point into, or all memory with trackAll; loads
  // enter the check between blocks only when no membar can order the blocks (atomics alone are
  // relaxed: without a fence, no block's plain accesses are ordered after another's).
  bool globalRaces = false, trackAll = false, crossBlockReads = false;
  std::vector<uint8_t> trackedTags{};
  std::vector<uint64_t> trackedBases{};
};

// Runs blocks of one launch, one at a time, on the calling thread.
class Engine {
 public:
  explicit Engine(Launch& l);

  std::optional<Error> runBlock(uint64_t linear);
  // After block `linear` ran without a fault: its global spans join the launch's (--check-races).
  void closeBlock(uint64_t linear);
  const Stats& stats() const { return stats_; }
  std::vector<Span>& spans() { return spans_; }

 private:
  std::optional<Error> runWarp(Warp& w);
  bool resume(Warp& w, uint32_t& pc, uint32_t& mask);
  bool jump(Warp& w, const Edge& e, uint32_t& pc, uint32_t& mask);
  void move(Warp& w, const Edge& e, uint32_t mask);
  void special(const Warp& w, const Code& k, uint32_t mask);
  std::optional<Error> tableLoad(const Warp& w, const Code& k, uint32_t mask);
  std::optional<Error> memory(Warp& w, const Code& k, uint32_t mask);
  // span: the bytes accessed when fewer than k.bytes (a cp.async src-size); the alignment is k.bytes.
  std::optional<Error> locate(const Code& k, const Warp& w, uint32_t lane, uint64_t addr, Access acc,
                              std::byte*& out, unsigned span = 0);
  std::optional<Error> locateDevice(const Code& k, const Warp& w, uint32_t lane, uint64_t addr, std::byte*& out,
                                    unsigned span);
  std::optional<Error> trackShared(const Code& k, const Warp& w, uint32_t lane, uint32_t off, Access acc);
  // A shared access of `bytes` at `off` must lie inside one declared array, aligned to its size.
  std::optional<Error> checkShared(const Code& k, const Warp& w, uint32_t lane, int64_t off, unsigned bytes) const;
  std::optional<Error> asyncCopy(Warp& w, const Code& k, uint32_t mask);
  void asyncWait(const Warp& w, const Code& k, uint32_t mask);
  std::optional<Error> checkAsync(const Code& k, const Warp& w, uint32_t lane, uint32_t off, Access acc);
  std::optional<Error> shuffle(const Warp& w, const Code& k, uint32_t mask);
  std::optional<Error> vote(const Warp& w, const Code& k, uint32_t mask);
  std::optional<Error> tensorCore(const Warp& w, const Code& k, uint32_t mask);
  std::optional<Error> checkMembers(const Warp& w, const Code& k, uint32_t lane, uint32_t members, uint32_t mask);
  std::optional<Error> mbarrierAt(const Code& k, const Warp& w, uint32_t lane, uint32_t& off);
  std::optional<Error> mbarrier(const Warp& w, const Code& k, uint32_t mask);
  // Sets `parked` when some lane's phase has not completed (the warp then yields).
  std::optional<Error> mbarrierWait(Warp& w, const Code& k, uint32_t mask, bool& parked);
  std::optional<Error> elect(const Warp& w, const Code& k, uint32_t mask);
  Error deadlock() const;
  std::optional<Error> divergentArrival(const Warp& w, const Code& k, uint32_t mask) const;
  // bar.named.sync/arrive: the warp's arrival; `wait` when it must wait for the barrier's count.
  std::optional<Error> namedBarrier(Warp& w, const Code& k, uint32_t mask, bool& wait);
  // wgmma: a warp's arrival (convergence, a full warpgroup), the op run by the whole group, the
  // checks of every other instruction and branch while the kernel has wgmma, the stuck group.
  std::optional<Error> wgArrive(const Warp& w, const Code& k, uint32_t mask);
  std::optional<Error> wgRun(uint32_t group, const Code& k);
  std::optional<Error> wgIssue(uint32_t group, const Code& k);
  void wgRetire(WarpgroupState& g, uint32_t group, size_t op);
  std::optional<Error> wgCheck(const Warp& w, const Code& k, uint32_t mask);
  std::optional<Error> wgEdge(const Warp& w, const Code& k, const Edge& e, uint32_t mask);
  std::optional<Error> wgShared(const Code& k, const Warp& w, uint32_t lane, uint32_t off, Access acc);
  std::optional<Error> wgOverwrite(const Code& k, const Warp& w, uint32_t lane, uint32_t off, unsigned bytes,
                                   const std::string& what);
  std::optional<Error> wgStuck() const;
  static WgmmaOp* wgInflight(WarpgroupState& g, uint32_t slot, bool chainable);
  static void wgDirty(WarpgroupState& g, uint32_t slot, uint32_t inst);
  std::optional<Error> checkRace(const Code& k, const Warp& w, uint32_t lane, uint32_t off, unsigned bytes, Access acc);
  // The race check over `bytes` bytes whose ByteAccess at(i) returns; place() describes them.
  template <class At, class Place>
  std::optional<Error> race(const Code& k, const Warp& w, uint32_t lane, unsigned bytes, Access acc, ErrorKind kind,
                            At at, Place place);
  std::optional<Error> trackGlobal(const Code& k, const Warp& w, uint32_t lane, uint64_t addr, unsigned bytes,
                                   Access acc);
  std::optional<Error> checkTma(const Code& k, const Warp& w, uint32_t lane, uint32_t off, unsigned bytes, Access acc);
  std::optional<Error> tmaLoad(const Warp& w, const Code& k, uint32_t mask);
  std::optional<Error> tmaStore(const Warp& w, const Code& k, uint32_t mask);
  void bulkGroups(const Warp& w, const Code& k, uint32_t mask);
  // The launch's map for a tmap operand, checked to be 2-D.
  std::optional<Error> tensorMapOf(const Code& k, const Warp& w, uint32_t lane, uint32_t src, const TensorMapDesc*& map);
  // The shared box of a TMA at `base`, whose address is register slot `baseSlot` (box bytes,
  // 16-byte aligned, inside one array: the one its pointer came from, when the IR says which).
  // That array's bounds come back in lo, hi.
  std::optional<Error> checkBox(const Code& k, const Warp& w, uint32_t lane, uint32_t baseSlot, uint64_t base,
                                uint64_t bytes, uint64_t& lo, uint64_t& hi) const;
  // The TMA load's write of `bytes` at `off`: race and proxy checks, then the byte is async-owned.
  std::optional<Error> tmaWrite(const Code& k, const Warp& w, uint32_t lane, uint32_t off, unsigned bytes);
  struct Box;
  std::optional<Error> boxOf(const Code& k, const Warp& w, uint32_t lane, uint32_t mapSlot, uint32_t baseSlot,
                             uint64_t base, Box& box);
  template <class F>
  std::optional<Error> walkBox(const Box& box, const Warp& w, uint32_t lane, uint64_t base, const int64_t (&c)[3], F&& f);
  std::string paramName(uint32_t slot) const;
  void boxCoordinates(const Warp& w, const Code& k, unsigned first, uint32_t l, int64_t (&c)[3]) const;

  Dim3 threadOf(const Warp& w, uint32_t lane) const { return threadOfLinear(w.index * kWarpSize + lane); }
  Dim3 threadOfLinear(uint32_t t) const { return detail::threadOfLinear(t, cfg_.block); }
  std::string where(uint32_t inst) const {
    const ir::SourceLoc& l = p_.locs[inst];
    return std::to_string(l.line) + ":" + std::to_string(l.col);
  }
  std::string memName(const Code& k) const;
  const SharedArray* sharedArrayAt(int64_t off) const;
  std::string sharedPlace(int64_t off) const;
  uint64_t bytesOf(const SharedArray& a) const { return a.dynamic ? dynamicBytes_ : a.bytes; }
  // The array the ptr.shared value in register slot `slot` points into, when the IR says which
  // (Program::sharedOrigin); else null.
  const SharedArray* originOf(uint32_t slot) const {
    return slot < p_.sharedOrigin.size() && p_.sharedOrigin[slot] >= 0 ? &p_.shared[p_.sharedOrigin[slot]] : nullptr;
  }
  // " through a pointer into '@from' (N bytes)", for an access that left the pointer's array
  // `from` and landed in `at` (nothing when they are the same).
  std::string through(const SharedArray& from, const SharedArray* at) const {
    return at == &from ? std::string() : " through a pointer into '@" + from.name + "' (" + std::to_string(bytesOf(from)) + " bytes)";
  }
  Error fault(ErrorKind kind, const Code& k, Dim3 thread, const std::string& what) const;
  Error fault(ErrorKind kind, const Code& k, const Warp& w, uint32_t lane, const std::string& what) const {
    return fault(kind, k, threadOf(w, lane), what);
  }

  Launch& launch_;
  const Program& p_;
  std::span<GlobalBuffer> buffers_;
  const LaunchConfig& cfg_;
  const Options& opts_;
  Stats stats_;

  uint32_t threadsPerBlock_ = 0;
  Dim3 ctaid_;
  DeviceMemory::Allocation lastAllocation_;  // device memory: the allocation of the last access
  bool lastTracked_ = false;                 // --check-races: loads from it are recorded (trackedBases)
  std::vector<Warp> warps_;
  std::vector<uint64_t> regs_;
  std::vector<uint64_t> staging_;
  std::vector<std::byte> shared_;
  uint64_t dynamicBytes_ = 0;
  std::vector<uint8_t> written_;    // --check-uninit: bytes of shared memory the block wrote
  std::vector<ByteAccess> access_;  // --check-races
  uint32_t epoch_ = 0;
  GlobalBytes globalAccess_;        // --check-races on global memory: this barrier interval's bytes
  std::vector<Span> blockSpans_;    // and this block's spans
  std::vector<Span> spans_;         // the spans of the blocks this engine ran
  std::vector<ThreadCopies> copies_;  // kernels with cp.async: per thread of the block
  std::vector<AsyncByte> asyncBytes_;  // and per shared byte
  bool asyncUsed_ = false;             // some cp.async ran in this block (the state needs a reset)
  // Initialised mbarriers of the block by shared offset (TC§5.3: phase, pending and expected
  // arrivals, tx-count), and a count of their changes, which wakes waiting warps.
  // With --check-races, also the happens-before the phases carry: `open` joins what the current
  // phase's arrivals release, done[p] what the last completed phase of parity p released.
  // With TMA loads, also what expect_tx announced and complete-tx delivered in the current phase,
  // and per thread the phases it has seen complete (its try_wait returned true).
  struct Mbarrier {
    uint32_t phase = 0, pending = 0, expected = 0;
    int64_t tx = 0;
    std::vector<uint32_t> open, done[2];
    int64_t announced = 0, delivered = 0;
    std::vector<uint32_t> seen;
  };
  std::map<uint32_t, Mbarrier> mbarriers_;
  uint64_t mbarrierChanges_ = 0;
  // --check-races in a kernel with mbarriers: each thread's arrivals so far, and what it has
  // acquired: knows_[u * threads + t] > s when thread u waited for a completed phase to which
  // thread t had arrived after an access stamped s (a vector clock per thread).
  std::vector<uint32_t> arrivals_, knows_;
  uint32_t stamp(uint32_t t) const { return arrivals_.empty() ? 0 : arrivals_[t]; }
  bool ordered(uint32_t before, uint32_t stamp, uint32_t after) const {
    return !arrivals_.empty() && knows_[size_t(after) * threadsPerBlock_ + before] > stamp;
  }
  void release(Mbarrier& b, uint32_t t);
  void acquire(const Mbarrier& b, uint32_t parity, uint32_t t);
  // Named barriers 1 ... 15: the thread count the current phase expects (set by its first
  // arrival), the threads arrived (32 a warp), where the phase's first arrival was; with
  // --check-races what the arrivals release, kept as an mbarrier's (`order`, parity 0).
  struct NamedBarrier {
    uint32_t expected = 0, arrived = 0, phase = 0;
    const Code* first = nullptr;
    Mbarrier order;
  };
  std::array<NamedBarrier, 16> named_;
  // Kernels with wgmma ops: per warpgroup of the block. With wgmma.mma_async (wgmma_), also per
  // shared byte the in-flight wgmmas reading it and its last generic write, and per thread its
  // fence.proxy.async count.
  bool warpgroupOps_ = false, wgmma_ = false;
  std::vector<WarpgroupState> warpgroups_;
  std::vector<uint16_t> wgReading_;
  std::vector<ProxyMark> proxyMarks_;
  std::vector<uint32_t> proxyFences_;
  // A phase completes: the arrivals are expected again, the transaction bytes start over.
  void completePhase(Mbarrier& b);
  // A phase whose arrivals are all in received more bytes than expect_tx announced.
  Error txOverrun(const Code& k, const Warp& w, uint32_t lane, const Mbarrier& b, uint32_t off) const;
  std::vector<TmaByte> tmaBytes_;      // kernels with TMA loads: per shared byte
  std::vector<ProxyByte> proxyBytes_;  // kernels with TMA stores: per shared byte
  std::vector<ThreadBulk> bulk_;       // and per thread
  bool tmaUsed_ = false;               // some TMA state changed in this block (it needs a reset)
};

std::string Engine::memName(const Code& k) const {
  if (k.op == Op::Ldmatrix) return "ldmatrix";
  if (k.kind == Kind::Warpgroup) return "wgmma.mma_async operand";
  if (k.kind == Kind::Mbarrier || k.kind == Kind::MbarWait) return std::string(ir::info(k.op).name);
  if (k.op == Op::CpAsync) return k.space == AddrSpace::Shared ? "cp.async shared destination" : "cp.async global source";
  if (k.op == Op::TmaLoad || k.op == Op::TmaLoad3d)
    return std::string(ir::info(k.op).name) + (k.space == AddrSpace::Shared ? " shared destination" : " global source");
  if (k.op == Op::TmaStore || k.op == Op::TmaStore3d)
    return std::string(ir::info(k.op).name) + (k.space == AddrSpace::Shared ? " shared source" : " global destination");
  std::string base = k.op == Op::Ld ? "ld" : k.op == Op::St ? "st" : "atom";
  base += "." + std::string(ir::spaceName(k.space));
  if (k.op == Op::AtomCas) base += ".cas";
  else if (k.op == Op::Atom) base += "." + std::string(ir::modName(k.mode));
  return base;
}

Error Engine::fault(ErrorKind kind, const Code& k, Dim3 thread, const std::string& what) const {
  return launchFault(p_, kind, k.inst, ctaid_, thread, what);
}

// The shared array an access at `off` belongs to: the last one starting at or before it (an
// overrun past an array's end is blamed on that array). Null when none starts that low.
const SharedArray* Engine::sharedArrayAt(int64_t off) const {
  const SharedArray* best = nullptr;
  for (const SharedArray& a : p_.shared)
    if (off >= 0 && a.start <= off && (!best || a.start >= best->start)) best = &a;
  return best;
}

// "at offset X of '@array' (N bytes)", the place of a shared access in messages.
std::string Engine::sharedPlace(int64_t off) const {
  const SharedArray* a = sharedArrayAt(off);
  if (!a) return "at offset " + std::to_string(off) + " of shared memory (" + std::to_string(shared_.size()) + " bytes)";
  return "at offset " + std::to_string(off - a->start) + " of '@" + a->name + "' (" +
         std::to_string(bytesOf(*a)) + " bytes)";
}

// Setup errors of a launch configuration, before anything runs.
std::optional<Error> checkConfig(const Program& p, const LaunchConfig& cfg) {
  const Dim3& g = cfg.grid;
  const Dim3& b = cfg.block;
  auto setup = [](const std::string& msg) {
    Error e;
    e.diag.message = msg;
    return e;
  };
  if (!g.x || !g.y || !g.z || !b.x || !b.y || !b.z) return setup("grid and block dimensions must be positive");
  if (uint64_t(b.x) * b.y * b.z > 1024)
    return setup("block " + dimText(b) + " has " + std::to_string(uint64_t(b.x) * b.y * b.z) +
                 " threads; at most 1024 are allowed");
  if (g.y > 65535 || g.z > 65535 || g.x > 0x7FFFFFFFu) return setup("grid " + dimText(g) + " exceeds the launch limits");
  if (p.reqntid && !(*p.reqntid == b))
    return setup("block " + dimText(b) + " does not match the kernel's reqntid " + dimText(*p.reqntid));
  if (p.maxntid && b.total() > p.maxntid->total())
    return setup("block " + dimText(b) + " has more threads than the kernel's maxntid " + dimText(*p.maxntid));
  uint64_t sharedBytes = cfg.dynamicShared ? uint64_t(p.dynamicSharedStart) + cfg.dynamicShared : p.staticSharedEnd;
  if (sharedBytes > (uint64_t{1} << 31)) return setup("shared memory of " + std::to_string(sharedBytes) + " bytes is too large");
  return std::nullopt;
}

Engine::Engine(Launch& l)
    : launch_(l), p_(l.p), buffers_(l.memory.buffers), cfg_(l.cfg), opts_(l.opts), threadsPerBlock_(l.threadsPerBlock) {
  dynamicBytes_ = cfg_.dynamicShared;
  uint32_t warpCount = (threadsPerBlock_ + kWarpSize - 1) / kWarpSize;
  size_t perWarp = size_t(p_.slots) * kWarpSize;
  regs_.assign(perWarp * warpCount, 0);
  warps_.assign(warpCount, Warp{});
  for (uint32_t wi = 0; wi < warpCount; ++wi) {
    Warp& w = warps_[wi];
    w.index = wi;
    w.regs = regs_.data() + perWarp * wi;
    for (uint32_t l = 0; l < kWarpSize; ++l) {
      uint32_t t = wi * kWarpSize + l;
      if (t >= threadsPerBlock_) break;
      w.existing |= 1u << l;
      Dim3 d = threadOfLinear(t);
      w.tid[0][l] = d.x;
      w.tid[1][l] = d.y;
      w.tid[2][l] = d.z;
    }
    for (auto [slot, bits] : p_.constants) std::fill_n(slotPtr(w.regs, slot), kWarpSize, bits);
    size_t word = 0;
    for (size_t i = 0; i < p_.params.size(); ++i) {
      std::fill_n(slotPtr(w.regs, p_.params[i].slot), kWarpSize, l.params[i]);
      for (uint32_t j = 1; j < p_.params[i].slots && word < l.vectorWords.size(); ++j)
        std::fill_n(slotPtr(w.regs, p_.params[i].slot + j), kWarpSize, l.vectorWords[word++]);
    }
  }
  shared_.assign(l.sharedBytes, std::byte{0});
  if (opts_.checkUninit) written_.assign(l.sharedBytes, 0);
  if (opts_.checkRaces) access_.assign(l.sharedBytes, ByteAccess{});
  bool mbarriers = std::any_of(p_.code.begin(), p_.code.end(), [](const Code& c) { return c.kind == Kind::Mbarrier; });
  if (opts_.checkRaces && (mbarriers || p_.namedBarriers)) {
    arrivals_.assign(threadsPerBlock_, 0);
    knows_.assign(size_t(threadsPerBlock_) * threadsPerBlock_, 0);
  }
  staging_.assign(size_t(p_.slots) * kWarpSize, 0);
  wgmma_ = !p_.wgSlot.empty();
  warpgroupOps_ =
      std::any_of(p_.code.begin(), p_.code.end(), [](const Code& c) { return c.kind == Kind::Warpgroup; });
  if (wgmma_) {
    wgReading_.assign(l.sharedBytes, 0);
    proxyMarks_.assign(l.sharedBytes, ProxyMark{});
    proxyFences_.assign(threadsPerBlock_, 0);
  }
  if (p_.asyncCopies) {
    copies_.assign(threadsPerBlock_, ThreadCopies{});
    asyncBytes_.assign(l.sharedBytes, AsyncByte{});
  }
  if (p_.tmaLoads) tmaBytes_.assign(l.sharedBytes, TmaByte{});
  if (p_.bulkStores) {
    proxyBytes_.assign(l.sharedBytes, ProxyByte{});
    bulk_.assign(threadsPerBlock_, ThreadBulk{});
  }
}

std::optional<Error> Engine::runBlock(uint64_t linear) {
  ctaid_ = blockOfLinear(linear, cfg_.grid);
  ++stats_.blocks;
  blockSpans_.clear();
  for (Warp& w : warps_) {
    w.exited = 0;
    w.state = WarpState::Running;
    w.pc = 0;
    w.mask = w.existing;
    w.steps = 0;
    w.stack.assign(1, Frame{0, w.existing, kExitBlock});
  }
  std::fill(shared_.begin(), shared_.end(), std::byte{0});
  if (opts_.checkUninit) std::fill(written_.begin(), written_.end(), 0);
  if (asyncUsed_) {
    for (ThreadCopies& c : copies_) c = ThreadCopies{};
    std::fill(asyncBytes_.begin(), asyncBytes_.end(), AsyncByte{});
    asyncUsed_ = false;
  }
  if (tmaUsed_) {
    std::fill(tmaBytes_.begin(), tmaBytes_.end(), TmaByte{});
    std::fill(proxyBytes_.begin(), proxyBytes_.end(), ProxyByte{});
    std::fill(bulk_.begin(), bulk_.end(), ThreadBulk{});
    tmaUsed_ = false;
  }
  mbarriers_.clear();
  if (p_.namedBarriers) named_.fill(NamedBarrier{});
  if (warpgroupOps_) warpgroups_.assign((warps_.size() + 3) / 4, WarpgroupState{});
  if (wgmma_) {
    std::fill(wgReading_.begin(), wgReading_.end(), 0);
    std::fill(proxyMarks_.begin(), proxyMarks_.end(), ProxyMark{});
    std::fill(proxyFences_.begin(), proxyFences_.end(), 0);
  }
  std::fill(arrivals_.begin(), arrivals_.end(), 0);
  std::fill(knows_.begin(), knows_.end(), 0);
  ++epoch_;
  for (;;) {
    for (Warp& w : warps_)
      if (w.state == WarpState::Running)
        if (auto e = runWarp(w)) return e;
    // A named barrier completed by a later warp woke an earlier one.
    if (p_.namedBarriers &&
        std::any_of(warps_.begin(), warps_.end(), [](const Warp& w) { return w.state == WarpState::Running; }))
      continue;
    // A warpgroup whose 4 warps all wait at the same wgmma op runs it and goes on.
    bool ran = false;
    for (uint32_t g = 0; warpgroupOps_ && 4 * g + 3 < warps_.size(); ++g) {
      Warp* ws = &warps_[4 * g];
      if (!std::all_of(ws, ws + 4, [](const Warp& w) { return w.state == WarpState::AtWarpgroup; })) continue;
      for (int i = 1; i < 4; ++i)
        if (ws[i].pc != ws[0].pc)
          return fault(ErrorKind::Wgmma, p_.code[ws[i].pc], ws[i], 0,
                       "warp " + std::to_string(ws[i].index) + " reached this " +
                           std::string(ir::info(p_.code[ws[i].pc].op).name) + " while warp " +
                           std::to_string(ws[0].index) + " of its warpgroup waits at " +
                           std::string(ir::info(p_.code[ws[0].pc].op).name) + " (" + where(p_.code[ws[0].pc].inst) +
                           "); the 4 warps execute each wgmma and setmaxnreg op together");
      if (auto e = wgRun(g, p_.code[ws[0].pc])) return e;
      for (int i = 0; i < 4; ++i) {
        ws[i].state = WarpState::Running;
        ++ws[i].pc;
      }
      ran = true;
    }
    if (ran) continue;
    // Warps parked on an mbarrier try again once some mbarrier has changed; when none has, no
    // warp can make progress: every phase they wait for needs an arrival that never comes.
    bool woke = false, parked = false;
    for (Warp& w : warps_) {
      if (w.state != WarpState::Waiting) continue;
      parked = true;
      if (w.parkedAt != mbarrierChanges_) {
        w.state = WarpState::Running;
        woke = true;
      }
    }
    if (woke) continue;
    // A warp at a named barrier now waits for warps that wait elsewhere or have exited.
    if (parked || std::any_of(warps_.begin(), warps_.end(), [](const Warp& w) { return w.state == WarpState::AtNamed; }))
      return deadlock();
    if (warpgroupOps_)
      if (auto e = wgStuck()) return e;
    const Warp* waiting = nullptr;
    uint32_t arrived = 0;
    for (const Warp& w : warps_) {
      if (w.state != WarpState::AtBarrier) continue;
      arrived += std::popcount(w.mask);
      if (!waiting) waiting = &w;
    }
    if (!waiting) return std::nullopt;
    if (arrived != threadsPerBlock_) {
      // Every warp still running waits here with all its live threads, so the rest exited.
      for (const Warp& w : warps_)
        if (w.exited)
          return fault(ErrorKind::PartialBarrier, p_.code[waiting->pc], w, std::countr_zero(w.exited),
                       "bar.sync reached by only " + std::to_string(arrived) + " of " +
                           std::to_string(threadsPerBlock_) +
                           " threads of the block; this thread exited without reaching it");
    }
    ++epoch_;
    for (Warp& w : warps_)
      if (w.state == WarpState::AtBarrier) {
        w.state = WarpState::Running;
        ++w.pc;
      }
  }
}

bool Engine::resume(Warp& w, uint32_t& pc, uint32_t& mask) {
  while (!w.stack.empty()) {
    const Frame& f = w.stack.back();
    uint32_t live = f.mask & ~w.exited;
    if (live && f.pc == kExitPc) w.exited |= live;  // threads that reached the virtual exit
    else if (live) {
      pc = f.pc;
      mask = live;
      return true;
    }
    w.stack.pop_back();
  }
  return false;
}

bool Engine::jump(Warp& w, const Edge& e, uint32_t& pc, uint32_t& mask) {
  if (e.block == w.stack.back().rpc) {
    w.stack.pop_back();
    return resume(w, pc, mask);
  }
  pc = e.pc;
  return true;
}

void Engine::move(Warp& w, const Edge& e, uint32_t mask) {
  uint64_t* r = w.regs;
  if (!e.staged) {
    for (uint32_t i = e.moveBegin; i < e.moveEnd; ++i) {
      const Move& m = p_.moves[i];
      for (uint32_t s = 0; s < m.slots; ++s) {
        uint64_t* d = slotPtr(r, m.dst + s);
        const uint64_t* a = slotPtr(r, m.src + s);
        forLanes(mask, [&](uint32_t l) { d[l] = a[l]; });
      }
    }
    return;
  }
  // An argument is also a parameter of the target: read every argument before writing.
  uint64_t* tmp = staging_.data();
  uint32_t at = 0;
  for (uint32_t i = e.moveBegin; i < e.moveEnd; ++i)
    for (uint32_t s = 0; s < p_.moves[i].slots; ++s, ++at)
      std::copy_n(slotPtr(r, p_.moves[i].src + s), kWarpSize, slotPtr(tmp, at));
  at = 0;
  for (uint32_t i = e.moveBegin; i < e.moveEnd; ++i)
    for (uint32_t s = 0; s < p_.moves[i].slots; ++s, ++at) {
      uint64_t* d = slotPtr(r, p_.moves[i].dst + s);
      const uint64_t* a = slotPtr(tmp, at);
      forLanes(mask, [&](uint32_t l) { d[l] = a[l]; });
    }
}

void Engine::special(const Warp& w, const Code& k, uint32_t mask) {
  uint64_t* d = slotPtr(w.regs, k.dst);
  unsigned dim = k.mode == Mod::Y ? 1 : k.mode == Mod::Z ? 2 : 0;
  auto pick = [dim](const Dim3& v) { return dim == 0 ? v.x : dim == 1 ? v.y : v.z; };
  switch (k.op) {
    case Op::Tid: forLanes(mask, [&](uint32_t l) { d[l] = w.tid[dim][l]; }); return;
    case Op::Laneid: forLanes(mask, [&](uint32_t l) { d[l] = l; }); return;
    case Op::Warpid: forLanes(mask, [&](uint32_t l) { d[l] = w.index; }); return;
    default: break;
  }
  uint64_t v = k.op == Op::Ntid ? pick(cfg_.block) : k.op == Op::Ctaid ? pick(ctaid_) : pick(cfg_.grid);
  forLanes(mask, [&](uint32_t l) { d[l] = v; });
}

std::optional<Error> Engine::tableLoad(const Warp& w, const Code& k, uint32_t mask) {
  const ir::TableDecl& t = p_.tables[k.imm];
  const uint64_t* index = slotPtr(w.regs, k.src[0]);
  uint64_t* d = slotPtr(w.regs, k.dst);
  for (uint32_t l = 0; l < kWarpSize; ++l) {
    if (!(mask >> l & 1)) continue;
    const auto i = static_cast<uint32_t>(index[l]);
    if (i >= t.values.size())
      return fault(ErrorKind::OutOfBounds, k, w, l,
                   "table.ld of element " + std::to_string(i) + " of table '@" + t.name + "', which has " +
                       std::to_string(t.values.size()) + " elements");
    d[l] = t.values[i];
  }
  return std::nullopt;
}

std::optional<Error> Engine::runWarp(Warp& w) {
  const Code* code = p_.code.data();
  uint64_t* regs = w.regs;
  uint32_t pc = w.pc, mask = w.mask;
  const uint64_t budget = opts_.maxInstructions;
  uint64_t steps = w.steps, insts = 0;
  const uint64_t startSteps = steps;
  const Code* current = code + pc;
  // Suspends the warp; a warp that leaves without a fault may still exhaust the launch's budget.
  auto leave = [&](WarpState state) -> std::optional<Error> {
    w.state = state;
    w.pc = pc;
    w.mask = mask;
    stats_.instructions += insts;
    stats_.warpInstructions += steps - startSteps;
    w.steps = steps;
    const uint64_t limit = opts_.maxLaunchInstructions;
    if (launch_.instructions.fetch_add(insts, std::memory_order_relaxed) + insts <= limit) return std::nullopt;
    uint32_t lane = std::countr_zero(w.existing);
    return fault(ErrorKind::InstructionBudget, *current, w, lane,
                 "the launch exceeded its budget of " + std::to_string(limit) + " thread instructions");
  };
  for (;;) {
    const Code& k = code[pc];
    current = &k;
    if (wgmma_)
      if (auto e = wgCheck(w, k, mask)) {
        (void)leave(WarpState::Done);
        return e;
      }
    if (++steps > budget) {
      (void)leave(WarpState::Done);
      return fault(ErrorKind::InstructionBudget, k, w, std::countr_zero(mask),
                   "thread exceeded the instruction budget of " + std::to_string(budget) + " instructions");
    }
    insts += std::popcount(mask);
    switch (k.kind) {
      case Kind::Compute: {
        int bad = k.fn(regs, mask, k);
        if (bad >= 0) {
          (void)leave(WarpState::Done);
          return fault(ErrorKind::DivisionByZero, k, w, static_cast<uint32_t>(bad),
                       "integer division by zero in " + std::string(ir::info(k.op).name) + "." +
                           std::string(ir::scalarName(k.scalar)));
        }
        ++pc;
        break;
      }
      case Kind::Special:
        special(w, k, mask);
        ++pc;
        break;
      case Kind::Table:
        if (auto e = tableLoad(w, k, mask)) {
          (void)leave(WarpState::Done);
          return e;
        }
        ++pc;
        break;
      case Kind::Ld: case Kind::St: case Kind::Atom:
        if (auto e = memory(w, k, mask)) {
          (void)leave(WarpState::Done);
          return e;
        }
        ++pc;
        break;
      case Kind::Shfl: case Kind::Vote:
        if (auto e = k.kind == Kind::Shfl ? shuffle(w, k, mask) : vote(w, k, mask)) {
          (void)leave(WarpState::Done);
          return e;
        }
        ++pc;
        break;
      case Kind::Mma: case Kind::Ldmatrix:
        if (auto err = tensorCore(w, k, mask)) {
          (void)leave(WarpState::Done);
          return err;
        }
        ++pc;
        break;
      case Kind::AsyncCopy: case Kind::TmaLoad: case Kind::TmaStore:
        if (auto e = k.kind == Kind::AsyncCopy ? asyncCopy(w, k, mask)
                     : k.kind == Kind::TmaLoad ? tmaLoad(w, k, mask)
                                               : tmaStore(w, k, mask)) {
          (void)leave(WarpState::Done);
          return e;
        }
        ++pc;
        break;
      case Kind::AsyncCommit:
        forLanes(mask, [&](uint32_t l) { ++copies_[w.index * kWarpSize + l].committed; });
        ++pc;
        break;
      case Kind::AsyncWait:
        asyncWait(w, k, mask);
        ++pc;
        break;
      case Kind::Nop:
        ++pc;
        break;
      case Kind::Warpgroup:
        if (auto e = wgArrive(w, k, mask)) {
          (void)leave(WarpState::Done);
          return e;
        }
        return leave(WarpState::AtWarpgroup);
      case Kind::BulkCommit: case Kind::BulkWait: case Kind::ProxyFence:
        bulkGroups(w, k, mask);
        if (k.kind == Kind::ProxyFence && wgmma_)
          forLanes(mask, [&](uint32_t l) { ++proxyFences_[w.index * kWarpSize + l]; });
        ++pc;
        break;
      case Kind::Mbarrier: case Kind::Elect:
        if (auto e = k.kind == Kind::Mbarrier ? mbarrier(w, k, mask) : elect(w, k, mask)) {
          (void)leave(WarpState::Done);
          return e;
        }
        ++pc;
        break;
      case Kind::MbarWait: {
        bool parked = false;
        if (auto e = mbarrierWait(w, k, mask, parked)) {
          (void)leave(WarpState::Done);
          return e;
        }
        w.waitPc = pc;
        ++pc;
        if (parked) return leave(WarpState::Waiting);
        break;
      }
      case Kind::NamedBar: {
        bool wait = false;
        w.waitPc = pc;
        if (auto e = namedBarrier(w, k, mask, wait)) {
          (void)leave(WarpState::Done);
          return e;
        }
        if (wait) return leave(WarpState::AtNamed);
        ++pc;
        break;
      }
      case Kind::Bar:
        if (auto e = divergentArrival(w, k, mask)) {
          (void)leave(WarpState::Done);
          return e;
        }
        return leave(WarpState::AtBarrier);
      case Kind::Br:
        move(w, k.edge[0], mask);
        if (!jump(w, k.edge[0], pc, mask)) return leave(WarpState::Done);
        break;
      case Kind::Cbr: {
        const uint64_t* c = slotPtr(regs, k.src[0]);
        uint32_t taken = 0;
        forLanes(mask, [&](uint32_t l) { taken |= static_cast<uint32_t>(c[l] & 1) << l; });
        uint32_t notTaken = mask & ~taken;
        if (taken) move(w, k.edge[0], taken);
        if (notTaken) move(w, k.edge[1], notTaken);
        const Edge* uniform = !notTaken ? &k.edge[0]
                              : !taken  ? &k.edge[1]
                              : k.edge[0].block == k.edge[1].block ? &k.edge[0]
                                                                   : nullptr;
        bool alive;
        if (uniform) {
          alive = jump(w, *uniform, pc, mask);
        } else {
          uint32_t r = p_.ipdom[k.block];
          Frame top = w.stack.back();
          w.stack.pop_back();
          if (r != top.rpc) w.stack.push_back({r == kExitBlock ? kExitPc : p_.blockStart[r], top.mask, top.rpc});
          // The path pushed last runs first: the taken one, unless only it can synchronize.
          bool takenFirst = !(p_.reachesSync[k.edge[0].block] && !p_.reachesSync[k.edge[1].block]);
          Frame paths[2] = {{k.edge[0].pc, taken, r}, {k.edge[1].pc, notTaken, r}};
          uint32_t blocks[2] = {k.edge[0].block, k.edge[1].block};
          for (int i : {takenFirst ? 1 : 0, takenFirst ? 0 : 1})
            if (blocks[i] != r) w.stack.push_back(paths[i]);
          alive = resume(w, pc, mask);
        }
        if (!alive) return leave(WarpState::Done);
        break;
      }
      case Kind::Ret:
        w.exited |= mask;
        w.stack.pop_back();
        if (!resume(w, pc, mask)) return leave(WarpState::Done);
        break;
    }
  }
}

std::optional<Error> Engine::locate(const Code& k, const Warp& w, uint32_t lane, uint64_t addr, Access acc,
                                    std::byte*& out, unsigned span) {
  const unsigned bytes = span ? span : k.bytes, align = k.bytes;
  AddrSpace sp = k.space;
  bool shared = sp == AddrSpace::Shared;
  int64_t off = 0;
  if (sp == AddrSpace::Global || sp == AddrSpace::Generic) {
    uint64_t tag = pointerTag(addr);
    off = pointerOffset(addr);
    if (sp == AddrSpace::Generic && tag == kSharedTag) {
      shared = true;
    } else if (launch_.memory.device) {
      if (auto e = locateDevice(k, w, lane, addr, out, bytes)) return e;
      return launch_.globalRaces && acc != Access::Atomic && !k.isVolatile ? trackGlobal(k, w, lane, addr, bytes, acc)
                                                                            : std::nullopt;
    } else {
      if (tag == 0 || tag > buffers_.size()) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "0x%016" PRIx64, addr);
        return fault(ErrorKind::InvalidPointer, k, w, lane,
                     memName(k) + " of " + std::to_string(bytes) + " bytes through pointer " + buf +
                         ", which points into no bound buffer");
      }
      const GlobalBuffer& b = buffers_[tag - 1];
      const uint64_t size = b.bytes->size();
      const bool outside = off < 0 || static_cast<uint64_t>(off) + bytes > size;
      if (outside || off % align) {
        std::string what = (outside ? "out-of-bounds " : "misaligned ") + memName(k) + " of " + std::to_string(bytes) +
                           " bytes at offset " + std::to_string(off) + " of '" + b.name + "' (" + std::to_string(size) +
                           " bytes)";
        return fault(outside ? ErrorKind::OutOfBounds : ErrorKind::Misaligned, k, w, lane, what);
      }
      out = b.bytes->data() + off;
      return launch_.globalRaces && acc != Access::Atomic && !k.isVolatile ? trackGlobal(k, w, lane, addr, bytes, acc)
                                                                            : std::nullopt;
    }
  } else if (shared) {
    off = static_cast<uint32_t>(addr);
  } else {
    return fault(ErrorKind::InvalidPointer, k, w, lane,
                 memName(k) + ": the interpreter has no " + std::string(ir::spaceName(sp)) + " memory");
  }
  if (auto e = checkShared(k, w, lane, off, bytes)) return e;
  out = shared_.data() + off;
  return trackShared(k, w, lane, static_cast<uint32_t>(off), acc);
}

std::optional<Error> Engine::checkShared(const Code& k, const Warp& w, uint32_t lane, int64_t off,
                                         unsigned bytes) const {
  // Every caller's address operand is src[0]. When the IR says which array it points into
  // (Program::sharedOrigin), the access must stay inside that array, also where it would land
  // in a neighbouring one.
  const SharedArray* arr = sharedArrayAt(off);
  if (const SharedArray* from = k.nsrc ? originOf(k.src[0]) : nullptr;
      from && (off < from->start || static_cast<uint64_t>(off) + bytes > from->start + bytesOf(*from)))
    return fault(ErrorKind::OutOfBounds, k, w, lane,
                 "out-of-bounds " + memName(k) + " of " + std::to_string(bytes) + " bytes " + sharedPlace(off) +
                     through(*from, arr));
  uint64_t end = arr ? arr->start + bytesOf(*arr) : 0;
  if (!arr || static_cast<uint64_t>(off) + bytes > end)
    return fault(ErrorKind::OutOfBounds, k, w, lane,
                 "out-of-bounds " + memName(k) + " of " + std::to_string(bytes) + " bytes " + sharedPlace(off));
  if (off % bytes)
    return fault(ErrorKind::Misaligned, k, w, lane,
                 "misaligned " + memName(k) + " of " + std::to_string(bytes) + " bytes " + sharedPlace(off));
  return std::nullopt;
}

// A global access through a device address: it must lie inside one live allocation.
std::optional<Error> Engine::locateDevice(const Code& k, const Warp& w, uint32_t lane, uint64_t addr,
                                          std::byte*& out, unsigned span) {
  const unsigned bytes = span, align = k.bytes;
  DeviceMemory::Allocation a = lastAllocation_;
  const bool moved = addr < a.base || addr - a.base >= a.bytes;
  if (moved) {
    auto found = launch_.memory.device->below(addr);
    if (found) a = *found;
    else a = {};
  }
  // Built only for a report: this runs for every access.
  auto access = [&] { return memName(k) + " of " + std::to_string(bytes) + " bytes at address " + hex64(addr); };
  if (!a.host)
    return fault(ErrorKind::InvalidPointer, k, w, lane, access() + ", which is in no live allocation");
  const uint64_t off = addr - a.base;
  if (off >= a.bytes || a.bytes - off < bytes) {
    uint64_t past = off + bytes - a.bytes;
    return fault(ErrorKind::OutOfBounds, k, w, lane,
                 "out-of-bounds " + access() + ", " + std::to_string(past) + (past == 1 ? " byte" : " bytes") +
                     " past the end of the " + std::to_string(a.bytes) + "-byte allocation at " + hex64(a.base));
  }
  if (addr % align)
    return fault(ErrorKind::Misaligned, k, w, lane,
                 "misaligned " + access() + " (offset " + std::to_string(off) + " of the allocation at " +
                     hex64(a.base) + ")");
  if (moved && launch_.globalRaces)
    lastTracked_ = std::find(launch_.trackedBases.begin(), launch_.trackedBases.end(), a.base) !=
                   launch_.trackedBases.end();
  lastAllocation_ = a;
  out = a.host + off;
  return std::nullopt;
}

std::optional<Error> Engine::trackShared(const Code& k, const Warp& w, uint32_t lane, uint32_t off, Access acc) {
  const unsigned bytes = k.bytes;
  if (wgmma_ && acc != Access::Read)
    if (auto e = wgShared(k, w, lane, off, acc)) return e;
  if (!asyncBytes_.empty())
    if (auto e = checkAsync(k, w, lane, off, acc)) return e;
  if (!tmaBytes_.empty() || !proxyBytes_.empty())
    if (auto e = checkTma(k, w, lane, off, bytes, acc)) return e;
  if (opts_.checkUninit) {
    if (acc != Access::Write)
      for (unsigned i = 0; i < bytes; ++i)
        if (!written_[off + i])
          return fault(ErrorKind::UninitializedRead, k, w, lane,
                       memName(k) + " of " + std::to_string(bytes) + " bytes " + sharedPlace(off) +
                           " reads shared memory that no thread of the block has written");
    if (acc != Access::Read) std::fill_n(written_.begin() + off, bytes, 1);
  }
  if (!opts_.checkRaces || acc == Access::Atomic) return std::nullopt;
  return checkRace(k, w, lane, off, bytes, acc);
}

// --check-races: the access conflicts with another thread's in this barrier interval that no
// completed mbarrier phase orders before it.
std::optional<Error> Engine::checkRace(const Code& k, const Warp& w, uint32_t lane, uint32_t off, unsigned bytes,
                                       Access acc) {
  return race(
      k, w, lane, bytes, acc, ErrorKind::SharedRace, [&](unsigned i) -> ByteAccess& { return access_[off + i]; },
      [&] { return "shared-memory race: " + memName(k) + " of " + std::to_string(bytes) + " bytes " + sharedPlace(off); });
}

template <class At, class Place>
std::optional<Error> Engine::race(const Code& k, const Warp& w, uint32_t lane, unsigned bytes, Access acc,
                                  ErrorKind kind, At at, Place place) {
  const uint32_t t = w.index * kWarpSize + lane;
  auto report = [&](uint32_t other, uint32_t otherInst, const char* did) {
    return fault(kind, k, w, lane,
                 place() + (acc == Access::Write ? " writes" : " reads") + " a byte that thread " +
                     dimText(threadOfLinear(other)) + " " + did + " at " + where(otherInst) +
                     (arrivals_.empty() ? " with no bar.sync between" : " with no bar.sync or completed mbarrier phase between"));
  };
  const uint32_t s = stamp(t);
  for (unsigned i = 0; i < bytes; ++i) {
    ByteAccess& a = at(i);
    if (a.writeEpoch == epoch_ && a.writer != t && !ordered(a.writer, a.writeStamp, t))
      return report(a.writer, a.writeInst, "wrote");
    if (acc == Access::Write) {
      if (a.readEpoch == epoch_ && a.reader != t && !ordered(a.reader, a.readStamp, t))
        return report(a.reader, a.readInst, "read");
      if (a.readEpoch == epoch_ && a.reader2 != kNoThread && a.reader2 != t && !ordered(a.reader2, a.reader2Stamp, t))
        return report(a.reader2, a.reader2Inst, "read");
      a.writeEpoch = epoch_;
      a.writer = t;
      a.writeInst = k.inst;
      a.writeStamp = s;
      a.readEpoch = 0;  // the write is ordered after every read so far
    } else if (a.readEpoch != epoch_ || ordered(a.reader, a.readStamp, t)) {
      a.readEpoch = epoch_;
      a.reader = t;
      a.readInst = k.inst;
      a.readStamp = s;
      a.reader2 = kNoThread;
    } else if (a.reader != t && a.reader2 == kNoThread) {
      a.reader2 = t;
      a.reader2Inst = k.inst;
      a.reader2Stamp = s;
    }
  }
  return std::nullopt;
}

// --check-races on a global access (not atomic, not volatile): the race check within the block
// over the bytes' addresses, and the access joins the block's spans for the check between blocks.
// A load of memory that no st of the kernel writes is not recorded (Launch::trackedTags).
std::optional<Error> Engine::trackGlobal(const Code& k, const Warp& w, uint32_t lane, uint64_t addr, unsigned bytes,
                                         Access acc) {
  const bool write = acc == Access::Write;
  if (!write && !launch_.trackAll) {
    if (!(launch_.memory.device ? lastTracked_ : launch_.trackedTags[pointerTag(addr)])) return std::nullopt;
  }
  const uint32_t t = w.index * kWarpSize + lane;
  if (write || launch_.crossBlockReads || k.nc) {
    Span* last = blockSpans_.empty() ? nullptr : &blockSpans_.back();
    if (last && last->write == write && last->inst == k.inst && last->size == bytes && last->hi == addr &&
        last->threadAt(addr) == t)
      last->hi += bytes;
    else
      blockSpans_.push_back({addr, addr + bytes, 0, k.inst, t, static_cast<uint8_t>(bytes), write, k.nc});
  }
  return race(
      k, w, lane, bytes, acc, ErrorKind::GlobalRace,
      [&, word = static_cast<GlobalBytes::Word*>(nullptr)](unsigned i) mutable -> ByteAccess& {
        const uint64_t byte = addr + i;
        if (!word || (byte & 3) == 0) word = &globalAccess_.word(byte, epoch_);
        return (*word)[byte & 3];
      },
      [&] { return "global-memory race: " + memName(k) + " of " + std::to_string(bytes) + " bytes " +
                   globalPlace(launch_.memory, addr); });
}

void Engine::closeBlock(uint64_t linear) {
  for (Span& s : blockSpans_) s.block = linear;
  spans_.insert(spans_.end(), blockSpans_.begin(), blockSpans_.end());
  blockSpans_.clear();
}

std::optional<Error> Engine::memory(Warp& w, const Code& k, uint32_t mask) {
  uint64_t* regs = w.regs;
  const uint64_t* addr = slotPtr(regs, k.src[0]);
  const unsigned bytes = k.bytes;
  const unsigned slots = std::max(1u, (bytes + 7) / 8);
  for (uint32_t m = mask; m; m &= m - 1) {
    uint32_t l = static_cast<uint32_t>(std::countr_zero(m));
    std::byte* p = nullptr;
    Access acc = k.kind == Kind::Ld ? Access::Read : k.kind == Kind::St ? Access::Write : Access::Atomic;
    if (auto e = locate(k, w, l, addr[l], acc, p)) return e;
    if (k.kind == Kind::Ld) {
      for (unsigned s = 0; s < slots; ++s) {
        uint64_t v = 0;
        std::memcpy(&v, p + 8 * s, std::min(8u, bytes - 8 * s));
        slotPtr(regs, k.dst + s)[l] = v;
      }
    } else if (k.kind == Kind::St) {
      for (unsigned s = 0; s < slots; ++s) {
        uint64_t v = slotPtr(regs, k.src[1] + s)[l];
        std::memcpy(p + 8 * s, &v, std::min(8u, bytes - 8 * s));
      }
    } else {
      uint64_t old = 0;
      std::memcpy(&old, p, bytes);
      uint64_t c = k.op == Op::AtomCas ? slotPtr(regs, k.src[2])[l] : 0;
      // atom.add.f32 on global memory flushes subnormals; on shared memory it keeps them.
      bool ftz = k.space != AddrSpace::Shared && !(k.space == AddrSpace::Generic && pointerTag(addr[l]) == kSharedTag);
      uint64_t next = atomicResult(k, old, slotPtr(regs, k.src[1])[l], c, ftz);
      std::memcpy(p, &next, bytes);
      slotPtr(regs, k.dst)[l] = old;
    }
  }
  return std::nullopt;
}

// ---- Asynchronous copies: cp.async ------------------------------------------------------------

// Issues the copies of the active lanes: bounds, alignment and hazards are checked now, the source
// bytes (src-size of them, the rest zeros) are read now, and the copy waits in the thread's open
// group. Its destination bytes become pending.
std::optional<Error> Engine::asyncCopy(Warp& w, const Code& k, uint32_t mask) {
  asyncUsed_ = true;
  const uint64_t* dst = slotPtr(w.regs, k.src[0]);
  const uint64_t* src = slotPtr(w.regs, k.src[1]);
  const uint64_t* size = slotPtr(w.regs, k.src[2]);
  Code source = k;
  source.space = AddrSpace::Global;
  for (uint32_t m = mask; m; m &= m - 1) {
    uint32_t l = static_cast<uint32_t>(std::countr_zero(m));
    const uint32_t t = w.index * kWarpSize + l;
    uint64_t n = k.srcSize ? static_cast<uint32_t>(size[l]) : k.bytes;
    if (n > k.bytes)
      return fault(ErrorKind::AsyncCopy, k, w, l,
                   "cp.async src-size " + std::to_string(n) + " exceeds the copy size of " + std::to_string(k.bytes) +
                       " bytes (undefined in PTX)");
    PendingCopy c;
    c.group = copies_[t].committed;
    c.inst = k.inst;
    c.bytes = k.bytes;
    if (n) {  // src-size 0 reads nothing (PTX leaves open whether the source is dereferenced)
      std::byte* p = nullptr;
      if (auto e = locate(source, w, l, src[l], Access::Read, p, static_cast<unsigned>(n))) return e;
      std::memcpy(c.data.data(), p, n);
    }
    std::byte* d = nullptr;
    if (auto e = locate(k, w, l, dst[l], Access::Write, d)) return e;
    c.dst = static_cast<uint32_t>(dst[l]);
    for (unsigned i = 0; i < k.bytes; ++i) asyncBytes_[c.dst + i] = {t, k.inst, 0, 0, true};
    copies_[t].pending.push_back(c);
  }
  return std::nullopt;
}

// wait_group N lands every copy of the thread's committed groups but the N most recent; wait_all
// commits the open group first and lands everything.
void Engine::asyncWait(const Warp& w, const Code& k, uint32_t mask) {
  forLanes(mask, [&](uint32_t l) {
    ThreadCopies& tc = copies_[w.index * kWarpSize + l];
    uint64_t keep = k.imm;
    if (k.op == Op::CpAsyncWaitAll) {
      ++tc.committed;
      keep = 0;
    }
    auto covered = [&](const PendingCopy& c) { return uint64_t{c.group} + keep < tc.committed; };
    for (const PendingCopy& c : tc.pending) {
      if (!covered(c)) continue;
      std::memcpy(shared_.data() + c.dst, c.data.data(), c.bytes);
      for (unsigned i = 0; i < c.bytes; ++i) {
        AsyncByte& a = asyncBytes_[c.dst + i];
        a.pending = false;
        a.waitInst = k.inst;
        a.landedEpoch = epoch_;
      }
    }
    std::erase_if(tc.pending, covered);
  });
}

// A shared access (or a cp.async's destination) touching a byte of a cp.async: a fault while the
// copy is pending, and for a thread other than the copy's own until a bar.sync follows its wait.
std::optional<Error> Engine::checkAsync(const Code& k, const Warp& w, uint32_t lane, uint32_t off, Access acc) {
  const uint32_t t = w.index * kWarpSize + lane;
  for (unsigned i = 0; i < k.bytes; ++i) {
    AsyncByte& a = asyncBytes_[off + i];
    if (a.owner == kNoThread) continue;
    if (!a.pending && (a.owner == t || a.landedEpoch != epoch_)) {
      if (a.owner != t) a = AsyncByte{};  // visible to every thread from now on
      continue;
    }
    std::string access = memName(k) + " of " + std::to_string(k.bytes) + " bytes " + sharedPlace(off) +
                         (acc == Access::Read ? " reads" : " writes") + " a byte that ";
    std::string who = a.owner == t ? "this thread" : "thread " + dimText(threadOfLinear(a.owner));
    if (a.pending)
      return fault(ErrorKind::AsyncCopy, k, w, lane,
                   access + "the cp.async at " + where(a.issueInst) + " of " + who +
                       " may still be copying: no cp.async.wait_group or cp.async.wait_all of " +
                       (a.owner == t ? "this thread" : "that thread") + " has waited for it");
    return fault(ErrorKind::AsyncCopy, k, w, lane,
                 access + "the cp.async at " + where(a.issueInst) + " of " + who + " wrote, waited for at " +
                     where(a.waitInst) + " with no bar.sync between that wait and this access");
  }
  return std::nullopt;
}

std::optional<Error> Engine::checkMembers(const Warp& w, const Code& k, uint32_t lane, uint32_t members,
                                          uint32_t mask) {
  // Called for every active lane of every collective: the op's name is only built on a fault.
  auto op = [&] {
    return std::string(ir::info(k.op).name) + (k.mode == Mod::None ? "" : "." + std::string(ir::modName(k.mode)));
  };
  if (!((members >> lane) & 1))
    return fault(ErrorKind::CollectiveMask, k, w, lane,
                 op() + " executed by lane " + std::to_string(lane) + ", which is not in its membermask " + hex32(members));
  uint32_t missing = members & ~mask;
  if (!missing) return std::nullopt;
  uint32_t j = static_cast<uint32_t>(std::countr_zero(missing));
  std::string why = !((w.existing >> j) & 1) ? "does not exist (the block has " + std::to_string(threadsPerBlock_) + " threads)"
                    : ((w.exited >> j) & 1)  ? "has exited"
                                             : "is inactive (on another path)";
  return fault(ErrorKind::CollectiveMask, k, w, lane,
               op() + " membermask " + hex32(members) + " names lane " + std::to_string(j) + ", which " + why);
}

std::optional<Error> Engine::shuffle(const Warp& w, const Code& k, uint32_t mask) {
  uint64_t* regs = w.regs;
  const uint64_t* a = slotPtr(regs, k.src[0]);
  const uint64_t* b = slotPtr(regs, k.src[1]);
  const uint64_t* c = slotPtr(regs, k.src[2]);
  const uint64_t* members = slotPtr(regs, k.src[3]);
  uint64_t result[kWarpSize];
  for (uint32_t m = mask; m; m &= m - 1) {
    uint32_t l = static_cast<uint32_t>(std::countr_zero(m));
    uint32_t mm = static_cast<uint32_t>(members[l]);
    if (auto e = checkMembers(w, k, l, mm, mask)) return e;
    uint32_t bval = b[l] & 31, cval = c[l] & 31, seg = (c[l] >> 8) & 31;
    int32_t maxLane = static_cast<int32_t>((l & seg) | (cval & ~seg));
    int32_t minLane = static_cast<int32_t>(l & seg);
    int32_t lane = static_cast<int32_t>(l), j = lane;
    bool inRange = false;
    switch (k.mode) {
      case Mod::Up: j = lane - static_cast<int32_t>(bval); inRange = j >= maxLane; break;
      case Mod::Down: j = lane + static_cast<int32_t>(bval); inRange = j <= maxLane; break;
      case Mod::Bfly: j = lane ^ static_cast<int32_t>(bval); inRange = j <= maxLane; break;
      default: j = minLane | static_cast<int32_t>(bval & ~seg); inRange = j <= maxLane; break;
    }
    if (!inRange) j = lane;
    if (!((mm >> j) & 1))
      return fault(ErrorKind::CollectiveMask, k, w, l,
                   "shfl.sync." + std::string(ir::modName(k.mode)) + " in lane " + std::to_string(l) + " reads lane " +
                       std::to_string(j) + ", which is not in membermask " + hex32(mm));
    result[l] = a[j];
  }
  uint64_t* d = slotPtr(regs, k.dst);
  forLanes(mask, [&](uint32_t l) { d[l] = result[l]; });
  return std::nullopt;
}

// mma, ldmatrix and setmaxnreg (.sync.aligned): every lane of the warp executes the same
// instruction together, so a partial warp, a divergent one, or one with exited threads is an
// error. ldmatrix reads the row addresses of lanes 0 .. 8·matrices-1 (16 bytes each, aligned,
// inside one shared array); the other lanes' addresses are not used. setmaxnreg does nothing more.
std::optional<Error> Engine::tensorCore(const Warp& w, const Code& k, uint32_t mask) {
  std::string name(ir::info(k.op).name);
  if (mask != kFullMask) {
    uint32_t missing = ~mask;
    std::string why = (w.existing != kFullMask) ? "the block's threads fill only " +
                                                      std::to_string(std::popcount(w.existing)) + " lanes of the warp"
                      : (w.exited & missing) ? "some have exited"
                                             : "the others are on another path";
    return fault(ErrorKind::DivergentBarrier, k, w, std::countr_zero(mask),
                 "divergent " + name + ": it needs all 32 lanes of warp " + std::to_string(w.index) +
                     " converged, but only " + std::to_string(std::popcount(mask)) + " arrive (" + why + ")");
  }
  if (k.kind == Kind::Warpgroup) return std::nullopt;
  if (k.op == Op::Mma) {
    mmaWarp(w.regs, k);
    return std::nullopt;
  }
  const std::byte* rows[32];
  const uint64_t* addr = slotPtr(w.regs, k.src[0]);
  for (uint32_t l = 0; l < 8u * k.lanes; ++l) {
    std::byte* row = nullptr;
    if (auto e = locate(k, w, l, addr[l], Access::Read, row)) return e;
    rows[l] = row;
  }
  ldmatrixWarp(w.regs, k, rows);
  return std::nullopt;
}

std::optional<Error> Engine::vote(const Warp& w, const Code& k, uint32_t mask) {
  uint64_t* regs = w.regs;
  const uint64_t* pred = slotPtr(regs, k.src[0]);
  const uint64_t* members = slotPtr(regs, k.src[1]);
  uint32_t ballot = 0;
  forLanes(mask, [&](uint32_t l) { ballot |= static_cast<uint32_t>(pred[l] & 1) << l; });
  uint64_t result[kWarpSize];
  for (uint32_t m = mask; m; m &= m - 1) {
    uint32_t l = static_cast<uint32_t>(std::countr_zero(m));
    uint32_t mm = static_cast<uint32_t>(members[l]);
    if (auto e = checkMembers(w, k, l, mm, mask)) return e;
    uint32_t votes = ballot & mm;
    switch (k.mode) {
      case Mod::Ballot: result[l] = votes; break;
      case Mod::All: result[l] = votes == mm; break;
      case Mod::Any: result[l] = votes != 0; break;
      default: result[l] = votes == 0 || votes == mm; break;
    }
  }
  uint64_t* d = slotPtr(regs, k.dst);
  forLanes(mask, [&](uint32_t l) { d[l] = result[l]; });
  return std::nullopt;
}

// ---- mbarriers ---------------------------------------------------------------------------------

// The shared offset of lane's mbarrier operand: 8 bytes inside one shared array, 8-aligned.
std::optional<Error> Engine::mbarrierAt(const Code& k, const Warp& w, uint32_t lane, uint32_t& off) {
  off = static_cast<uint32_t>(slotPtr(w.regs, k.src[0])[lane]);
  return checkShared(k, w, lane, off, 8);
}

// init, arrive and arrive.expect_tx, lane by lane in lane order. A phase completes when its last
// expected arrival has come and its tx-count is back to 0: the phase advances and the arrivals
// are expected again.
std::optional<Error> Engine::mbarrier(const Warp& w, const Code& k, uint32_t mask) {
  constexpr int64_t kMaxCount = (int64_t{1} << 20) - 1;
  const uint64_t* arg = slotPtr(w.regs, k.src[1]);
  for (uint32_t m = mask; m; m &= m - 1) {
    uint32_t l = static_cast<uint32_t>(std::countr_zero(m)), off = 0;
    if (auto e = mbarrierAt(k, w, l, off)) return e;
    auto found = mbarriers_.find(off);
    ++mbarrierChanges_;
    if (k.op == Op::MbarInit) {
      uint32_t count = static_cast<uint32_t>(arg[l]);
      if (count == 0 || count > kMaxCount)
        return fault(ErrorKind::Mbarrier, k, w, l,
                     "mbarrier.init with " + std::to_string(count) + " expected arrivals (1 to 2^20 - 1) " + sharedPlace(off));
      if (found != mbarriers_.end() && (found->second.pending != found->second.expected || found->second.tx != 0))
        return fault(ErrorKind::Mbarrier, k, w, l,
                     "mbarrier.init " + sharedPlace(off) + " while its phase " + std::to_string(found->second.phase) +
                         " is in progress (" + std::to_string(found->second.expected - found->second.pending) + " of " +
                         std::to_string(found->second.expected) + " arrivals, tx-count " + std::to_string(found->second.tx) + ")");
      Mbarrier fresh;
      fresh.pending = fresh.expected = count;
      mbarriers_[off] = std::move(fresh);
      continue;
    }
    if (found == mbarriers_.end())
      return fault(ErrorKind::Mbarrier, k, w, l, memName(k) + " " + sharedPlace(off) + ", which no mbarrier.init set up");
    Mbarrier& b = found->second;
    if (k.op == Op::MbarArriveTx) {
      b.tx += static_cast<uint32_t>(arg[l]);
      b.announced += static_cast<uint32_t>(arg[l]);
      if (b.tx > kMaxCount)
        return fault(ErrorKind::Mbarrier, k, w, l,
                     "mbarrier.arrive.expect_tx takes the tx-count of the mbarrier " + sharedPlace(off) + " to " +
                         std::to_string(b.tx) + ", past 2^20 - 1");
    }
    if (b.pending == 0)
      return fault(ErrorKind::Mbarrier, k, w, l,
                   memName(k) + " " + sharedPlace(off) + " in phase " + std::to_string(b.phase) + ", which has all its " +
                       std::to_string(b.expected) + " arrivals and waits for a tx-count of " + std::to_string(b.tx) +
                       " bytes");
    if (!arrivals_.empty()) release(b, w.index * kWarpSize + l);
    if (--b.pending == 0 && b.tx < 0) return txOverrun(k, w, l, b, off);
    if (b.pending == 0 && b.tx == 0) completePhase(b);
  }
  return std::nullopt;
}

void Engine::completePhase(Mbarrier& b) {
  if (!arrivals_.empty()) {
    b.done[b.phase & 1] = std::move(b.open);
    b.open.clear();
  }
  ++b.phase;
  b.pending = b.expected;
  b.announced = b.delivered = 0;
}

Error Engine::txOverrun(const Code& k, const Warp& w, uint32_t lane, const Mbarrier& b, uint32_t off) const {
  return fault(ErrorKind::Mbarrier, k, w, lane,
               "the mbarrier " + sharedPlace(off) + " received more transaction bytes than expected in phase " +
                   std::to_string(b.phase) + ", whose arrivals are all in: expect_tx announced " +
                   std::to_string(b.announced) + " bytes, the copies delivered " + std::to_string(b.delivered));
}

// Thread t's arrival releases its own accesses so far and everything it has acquired.
void Engine::release(Mbarrier& b, uint32_t t) {
  b.open.resize(threadsPerBlock_, 0);
  const uint32_t* mine = &knows_[size_t(t) * threadsPerBlock_];
  for (uint32_t x = 0; x < threadsPerBlock_; ++x) b.open[x] = std::max(b.open[x], mine[x]);
  b.open[t] = std::max(b.open[t], ++arrivals_[t]);
}

// A wait that saw the phase of this parity complete acquires what that phase's arrivals released.
void Engine::acquire(const Mbarrier& b, uint32_t parity, uint32_t t) {
  const std::vector<uint32_t>& done = b.done[parity & 1];
  uint32_t* mine = &knows_[size_t(t) * threadsPerBlock_];
  for (size_t x = 0; x < done.size(); ++x) mine[x] = std::max(mine[x], done[x]);
}

// bar.sync and the named barriers: every running thread of the warp arrives, or none.
std::optional<Error> Engine::divergentArrival(const Warp& w, const Code& k, uint32_t mask) const {
  uint32_t live = w.existing & ~w.exited;
  if (mask == live) return std::nullopt;
  return fault(ErrorKind::DivergentBarrier, k, w, std::countr_zero(mask),
               "divergent " + std::string(ir::info(k.op).name) + ": only " + std::to_string(std::popcount(mask)) +
                   " of the " + std::to_string(std::popcount(live)) + " running threads of warp " +
                   std::to_string(w.index) + " arrive; the others are on another path");
}

// bar.named.sync/arrive ID, count (docs/interpreter.md, "Named barriers"): the converged warp
// counts 32 threads toward the phase's count, which its first arrival sets and every later one
// must repeat. The arrival that reaches the count completes the phase: the warps waiting at the
// barrier go on, and (--check-races) acquire what every arrival of the phase released.
std::optional<Error> Engine::namedBarrier(Warp& w, const Code& k, uint32_t mask, bool& wait) {
  const std::string op(ir::info(k.op).name);
  const uint32_t id = static_cast<uint32_t>(k.imm), lane = std::countr_zero(mask);
  if (auto e = divergentArrival(w, k, mask)) return e;
  const uint64_t* count = slotPtr(w.regs, k.src[0]);
  for (uint32_t m = mask; m; m &= m - 1) {
    uint32_t l = static_cast<uint32_t>(std::countr_zero(m));
    if (count[l] != count[lane])
      return fault(ErrorKind::PartialBarrier, k, w, l,
                   op + " " + std::to_string(id) + " with a count of " + std::to_string(count[l]) + " in lane " +
                       std::to_string(l) + " and " + std::to_string(count[lane]) + " in lane " + std::to_string(lane) +
                       " of warp " + std::to_string(w.index));
  }
  const uint64_t n = count[lane], warps = (uint64_t(threadsPerBlock_) + kWarpSize - 1) / kWarpSize;
  if (n < kWarpSize || n % kWarpSize || n > warps * kWarpSize)
    return fault(ErrorKind::PartialBarrier, k, w, lane,
                 op + " " + std::to_string(id) + " counts " + std::to_string(n) +
                     " threads; the count is a multiple of 32 from 32 to the block's " +
                     std::to_string(warps * kWarpSize) + " (its warps times 32)");
  NamedBarrier& b = named_[id];
  if (b.arrived == 0) {
    b.expected = static_cast<uint32_t>(n);
    b.first = &k;
  } else if (n != b.expected) {
    return fault(ErrorKind::PartialBarrier, k, w, lane,
                 op + " " + std::to_string(id) + " counts " + std::to_string(n) + " threads, but its phase " +
                     std::to_string(b.phase) + " began with a count of " + std::to_string(b.expected) + " (" +
                     where(b.first->inst) + ")");
  }
  if (!arrivals_.empty())
    for (uint32_t m = mask; m; m &= m - 1) release(b.order, w.index * kWarpSize + static_cast<uint32_t>(std::countr_zero(m)));
  b.arrived += kWarpSize;
  wait = k.op == ir::Op::BarNamedSync;
  if (b.arrived < b.expected) {
    if (wait) {
      w.waitBarrier = id;
      w.waitLane = lane;
    }
    return std::nullopt;
  }
  // The count is in: the phase completes, its waiters (and this warp) go on.
  b.arrived = 0;
  ++b.phase;
  auto acquireAll = [&](uint32_t warp, uint32_t lanes) {
    if (arrivals_.empty()) return;
    for (uint32_t m = lanes; m; m &= m - 1) acquire(b.order, 0, warp * kWarpSize + static_cast<uint32_t>(std::countr_zero(m)));
  };
  if (!arrivals_.empty()) {
    b.order.done[0] = std::move(b.order.open);
    b.order.open.clear();
  }
  for (Warp& x : warps_)
    if (x.state == WarpState::AtNamed && x.waitBarrier == id) {
      acquireAll(x.index, x.mask);
      x.state = WarpState::Running;
      ++x.pc;
    }
  if (wait) acquireAll(w.index, mask);
  wait = false;
  return std::nullopt;
}

// p = the phase with the operand's parity has completed: the barrier's current phase has the
// other parity (TC§5.3; only the current and the preceding phase can be asked about).
std::optional<Error> Engine::mbarrierWait(Warp& w, const Code& k, uint32_t mask, bool& parked) {
  const uint64_t* parity = slotPtr(w.regs, k.src[1]);
  uint64_t* d = slotPtr(w.regs, k.dst);
  for (uint32_t m = mask; m; m &= m - 1) {
    uint32_t l = static_cast<uint32_t>(std::countr_zero(m)), off = 0;
    if (auto e = mbarrierAt(k, w, l, off)) return e;
    auto found = mbarriers_.find(off);
    if (found == mbarriers_.end())
      return fault(ErrorKind::Mbarrier, k, w, l, memName(k) + " " + sharedPlace(off) + ", which no mbarrier.init set up");
    d[l] = (found->second.phase & 1) != (parity[l] & 1);
    if (d[l] && !tmaBytes_.empty()) {
      std::vector<uint32_t>& seen = found->second.seen;
      seen.resize(threadsPerBlock_, 0);
      uint32_t& mine = seen[w.index * kWarpSize + l];
      mine = std::max(mine, found->second.phase);
    }
    if (d[l] && !arrivals_.empty()) acquire(found->second, static_cast<uint32_t>(parity[l]), w.index * kWarpSize + l);
    if (!d[l] && !parked) {
      parked = true;
      w.parkedAt = mbarrierChanges_;
      w.waitLane = l;
      w.waitBarrier = off;
      w.waitParity = static_cast<uint32_t>(parity[l] & 1);
    }
  }
  return std::nullopt;
}

// True in the lowest lane of the membermask (PTX leaves the choice to the hardware).
std::optional<Error> Engine::elect(const Warp& w, const Code& k, uint32_t mask) {
  const uint64_t* members = slotPtr(w.regs, k.src[0]);
  uint64_t* d = slotPtr(w.regs, k.dst);
  uint64_t result[kWarpSize];
  for (uint32_t m = mask; m; m &= m - 1) {
    uint32_t l = static_cast<uint32_t>(std::countr_zero(m)), mm = static_cast<uint32_t>(members[l]);
    if (auto e = checkMembers(w, k, l, mm, mask)) return e;
    result[l] = l == static_cast<uint32_t>(std::countr_zero(mm));
  }
  forLanes(mask, [&](uint32_t l) { d[l] = result[l]; });
  return std::nullopt;
}

// ---- wgmma (docs/interpreter.md, "wgmma") -------------------------------------------------------

// A warp reaching a wgmma op: converged (.sync.aligned) and one of the 4 full warps of a
// warpgroup (warps 4g .. 4g+3 of the block), which then run the op together (runBlock).
std::optional<Error> Engine::wgArrive(const Warp& w, const Code& k, uint32_t mask) {
  if (auto e = tensorCore(w, k, mask)) return e;
  const uint32_t first = w.index / 4 * 4;
  const uint64_t need = uint64_t(first + 4) * kWarpSize;
  if (need > threadsPerBlock_)
    return fault(ErrorKind::Wgmma, k, w, 0,
                 std::string(ir::info(k.op).name) + " needs the 4 full warps of warpgroup " + std::to_string(w.index / 4) +
                     " (threads " + std::to_string(first * kWarpSize) + " to " + std::to_string(need - 1) +
                     "), but the block has " + std::to_string(threadsPerBlock_) + " threads");
  return std::nullopt;
}

// The in-flight wgmma whose registers `slot` is: its accumulator or A fragment, or its result
// (or a block parameter it was passed to), the latest one first. With `chainable`, only a
// result: what a later wgmma's accumulator may name before the wait.
WgmmaOp* Engine::wgInflight(WarpgroupState& g, uint32_t slot, bool chainable) {
  for (auto op = g.inflight.rbegin(); op != g.inflight.rend(); ++op) {
    bool result = op->dst == slot || std::find(op->aliases.begin(), op->aliases.end(), slot) != op->aliases.end();
    if (result || (!chainable && (op->acc == slot || op->a == slot))) return &*op;
  }
  return nullptr;
}

// A write of a wgmma operand's registers since the last wgmma.fence (the latest write of each).
void Engine::wgDirty(WarpgroupState& g, uint32_t slot, uint32_t inst) {
  auto at = std::find_if(g.dirty.begin(), g.dirty.end(), [&](const auto& d) { return d.first == slot; });
  if (at == g.dirty.end()) g.dirty.push_back({slot, inst});
  else at->second = inst;
}

// Before every instruction of a kernel with wgmma: a read of registers an in-flight wgmma owns
// ("early read"), and a write of a wgmma operand, which the next wgmma needs a wgmma.fence after.
std::optional<Error> Engine::wgCheck(const Warp& w, const Code& k, uint32_t mask) {
  if (k.kind == Kind::Warpgroup || w.index / 4 >= warpgroups_.size()) return std::nullopt;
  WarpgroupState& g = warpgroups_[w.index / 4];
  if (!g.inflight.empty()) {
    for (unsigned i = 0; i < k.nsrc; ++i)
      if (const WgmmaOp* op = wgInflight(g, k.src[i], false))
        return fault(ErrorKind::Wgmma, k, w, std::countr_zero(mask),
                     "early read: " + std::string(ir::info(k.op).name) + " reads registers of the wgmma.mma_async at " +
                         where(op->inst) + " before a wgmma.wait_group covers it");
    if (k.kind == Kind::Br) return wgEdge(w, k, k.edge[0], mask);
    if (k.kind == Kind::Cbr) {
      const uint64_t* c = slotPtr(w.regs, k.src[0]);
      uint32_t taken = 0;
      forLanes(mask, [&](uint32_t l) { taken |= static_cast<uint32_t>(c[l] & 1) << l; });
      if (taken)
        if (auto e = wgEdge(w, k, k.edge[0], taken)) return e;
      if (mask & ~taken) return wgEdge(w, k, k.edge[1], mask & ~taken);
    }
  } else if (k.kind == Kind::Br || k.kind == Kind::Cbr) {
    for (const Edge& e : k.edge)
      for (uint32_t i = e.moveBegin; i < e.moveEnd; ++i)
        if (p_.wgMoveWrites[i]) wgDirty(g, p_.moves[i].dst, k.inst);
  }
  if (k.wgWrite) wgDirty(g, k.dst, k.inst);
  return std::nullopt;
}

// A branch while wgmmas are in flight: passing an in-flight result on to a block parameter that
// is itself a wgmma accumulator chains (the result lands there too at the wait); any other move
// of an in-flight wgmma's registers is an early read.
std::optional<Error> Engine::wgEdge(const Warp& w, const Code& k, const Edge& e, uint32_t mask) {
  WarpgroupState& g = warpgroups_[w.index / 4];
  for (uint32_t i = e.moveBegin; i < e.moveEnd; ++i) {
    const Move& m = p_.moves[i];
    if (p_.wgMoveWrites[i]) wgDirty(g, m.dst, k.inst);
    WgmmaOp* op = wgInflight(g, m.src, false);
    if (!op) continue;
    bool chains = (p_.wgSlot[m.dst] & kWgOperand) && wgInflight(g, m.src, true);
    if (!chains)
      return fault(ErrorKind::Wgmma, k, w, std::countr_zero(mask),
                   "early read: the branch passes registers of the wgmma.mma_async at " + where(op->inst) +
                       " before a wgmma.wait_group covers it");
    std::vector<uint32_t>& aliases = op->aliases;
    if (std::find(aliases.begin(), aliases.end(), m.dst) == aliases.end()) aliases.push_back(m.dst);
  }
  return std::nullopt;
}

// A write of `bytes` shared bytes at off (`what` writes them): not into what an in-flight wgmma
// read, which it reads at issue in the interpreter but on the GPU until its group is waited for.
std::optional<Error> Engine::wgOverwrite(const Code& k, const Warp& w, uint32_t lane, uint32_t off, unsigned bytes,
                                         const std::string& what) {
  for (uint32_t i = 0; i < bytes; ++i) {
    if (!wgReading_[off + i]) continue;
    uint32_t inst = 0;
    for (const WarpgroupState& g : warpgroups_)
      for (const WgmmaOp& op : g.inflight)
        for (uint32_t r : op.reads)
          if (off + i >= r && off + i < r + 2) inst = op.inst;
    return fault(ErrorKind::Wgmma, k, w, lane,
                 what + " writes shared memory " + sharedPlace(off + i) + ", which the wgmma.mma_async at " + where(inst) +
                     " reads, before a wgmma.wait_group covers that wgmma");
  }
  return std::nullopt;
}

// A generic write of shared memory: not into what an in-flight wgmma read, and remembered until
// the writer's next fence.proxy.async (a wgmma reading it before then is an error).
std::optional<Error> Engine::wgShared(const Code& k, const Warp& w, uint32_t lane, uint32_t off, Access) {
  if (auto e = wgOverwrite(k, w, lane, off, k.bytes, memName(k))) return e;
  const uint32_t t = w.index * kWarpSize + lane;
  for (uint32_t i = 0; i < k.bytes; ++i) proxyMarks_[off + i] = {t, proxyFences_[t], k.inst};
  return std::nullopt;
}

// The op a whole warpgroup reached: fence, commit, wait, or a wgmma to issue.
std::optional<Error> Engine::wgRun(uint32_t group, const Code& k) {
  WarpgroupState& g = warpgroups_[group];
  switch (k.op) {
    case Op::WgmmaFence:
      g.fenced = true;
      g.dirty.clear();
      return std::nullopt;
    case Op::WgmmaCommit:
      for (WgmmaOp& op : g.inflight)
        if (op.group == WgmmaOp::kOpen) op.group = g.committed;
      ++g.committed;
      return std::nullopt;
    case Op::WgmmaWait:
      for (size_t i = g.inflight.size(); i-- > 0;) {
        const WgmmaOp& op = g.inflight[i];
        if (op.group != WgmmaOp::kOpen && g.committed - op.group > k.imm) wgRetire(g, group, i);
      }
      return std::nullopt;
    case Op::SetMaxNRegInc: case Op::SetMaxNRegDec:  // the same one by the 4 warps is all it asks
      return std::nullopt;
    default:
      return wgIssue(group, k);
  }
}

// D lands in the result registers (and the block parameters it was passed to) of the 4 warps.
void Engine::wgRetire(WarpgroupState& g, uint32_t group, size_t index) {
  WgmmaOp& op = g.inflight[index];
  const uint32_t elems = static_cast<uint32_t>(op.d.size() / (4 * kWarpSize));
  std::vector<uint32_t> slots = op.aliases;
  slots.push_back(op.dst);
  for (uint32_t wi = 0; wi < 4; ++wi) {
    uint64_t* regs = warps_[4 * group + wi].regs;
    for (uint32_t slot : slots)
      for (uint32_t l = 0; l < kWarpSize; ++l)
        for (uint32_t i = 0; i < elems; i += 2) {
          const uint32_t* d = &op.d[(wi * kWarpSize + l) * elems + i];
          slotPtr(regs, slot + i / 2)[l] = uint64_t{d[0]} | uint64_t{d[1]} << 32;
        }
  }
  for (uint32_t r : op.reads) --wgReading_[r];
  g.inflight.erase(g.inflight.begin() + static_cast<std::ptrdiff_t>(index));
}

// wgmma.mma_async: checks, then A, B and C read now and D computed (TC§4.2–§4.5).
std::optional<Error> Engine::wgIssue(uint32_t group, const Code& k) {
  WarpgroupState& g = warpgroups_[group];
  const Warp* ws = &warps_[4 * group];
  const unsigned n = static_cast<unsigned>(k.imm), elems = n / 2;
  const bool regA = k.wgmma & kWgRegA;
  // fp8 codes: 1-byte elements, K = 32 (the decoder allows them K-major with A by descriptor only).
  const uint32_t eb = k.srcScalar == ir::Scalar::B8 ? 1 : 2, K = 32 / eb;
  if (!g.fenced)
    return fault(ErrorKind::Wgmma, k, ws[0], 0,
                 "missing fence: wgmma.mma_async before any wgmma.fence of warpgroup " + std::to_string(group));
  for (auto [slot, inst] : g.dirty)
    if (slot == k.src[0] || (regA && slot == k.src[1]))
      return fault(ErrorKind::Wgmma, k, ws[0], 0,
                   std::string("missing fence: no wgmma.fence between the write of this wgmma's ") +
                       (slot == k.src[0] ? "accumulator" : "A fragment") + " at " + where(inst) +
                       " and the wgmma.mma_async");
  // Descriptors and scale-d are the same in all 128 threads.
  auto uniform = [&](uint32_t slot, const char* what, uint64_t& value) -> std::optional<Error> {
    value = slotPtr(ws[0].regs, slot)[0];
    for (uint32_t wi = 0; wi < 4; ++wi)
      for (uint32_t l = 0; l < kWarpSize; ++l)
        if (slotPtr(ws[wi].regs, slot)[l] != value)
          return fault(ErrorKind::Wgmma, k, ws[wi], l,
                       std::string("wgmma.mma_async's ") + what + " differs between the threads of warpgroup " +
                           std::to_string(group) + " (" + hex64(slotPtr(ws[wi].regs, slot)[l]) + " here, " +
                           hex64(value) + " in thread 0 of the group)");
    return std::nullopt;
  };
  uint64_t aDesc = 0, bDesc = 0, scale = 0;
  if (!regA)
    if (auto e = uniform(k.src[1], "A descriptor", aDesc)) return e;
  if (auto e = uniform(k.src[2], "B descriptor", bDesc)) return e;
  if (auto e = uniform(k.src[3], "scale-d", scale)) return e;
  WgmmaOp op;
  op.inst = k.inst;
  op.acc = k.src[0];
  op.a = regA ? k.src[1] : kNoThread;
  op.dst = k.dst;
  // One operand element through its descriptor: in a declared array, written by the generic
  // proxy only before a fence.proxy.async of its writer.
  auto element = [&](uint64_t desc, bool mnMajor, unsigned x, unsigned kk, uint16_t& out) -> std::optional<Error> {
    WgmmaDescriptor d = decodeWgmmaDescriptor(desc);
    if (d.baseOffset)
      return fault(ErrorKind::Wgmma, k, ws[0], 0,
                   "wgmma.mma_async descriptor " + hex64(desc) + " has a nonzero base offset, which the interpreter "
                   "does not model (align swizzled tiles to their repeat: TC§4.4)");
    uint32_t off = wgmmaElementAddress(d, mnMajor, x, kk, eb);
    if (auto e = checkShared(k, ws[0], 0, off, eb)) return e;
    const ProxyMark& mark = proxyMarks_[off];
    if (mark.thread != kNoThread && proxyFences_[mark.thread] == mark.fences)
      return fault(ErrorKind::Wgmma, k, ws[0], 0,
                   "wgmma.mma_async reads shared memory " + sharedPlace(off) + ", which thread (" +
                       dimText(threadOfLinear(mark.thread)).substr(1) + " wrote at " + where(mark.inst) +
                       " with no fence.proxy.async after it");
    // --check-races: the warpgroup reads as its first thread (the one whose descriptors the
    // others must equal): a generic write by another thread must be ordered before it by a
    // bar.sync or a completed mbarrier phase that thread observed, and a later write after it.
    if (opts_.checkRaces)
      if (auto e = checkRace(k, ws[0], 0, off, eb, Access::Read)) return e;
    out = 0;
    std::memcpy(&out, shared_.data() + off, eb);
    for (uint32_t i = 0; i < eb; ++i) op.reads.push_back(off + i);
    return std::nullopt;
  };
  std::vector<uint16_t> a(64 * K), b(K * n);
  std::vector<uint32_t> c(64 * n, 0), d(64 * n);
  for (unsigned m = 0; m < 64; ++m)
    for (unsigned kk = 0; kk < K; ++kk) {
      if (!regA) {
        if (auto e = element(aDesc, k.wgmma & kWgTransA, m, kk, a[m * K + kk])) return e;
        continue;
      }
      // TC§4.2: A[16w + g + 8(r&1)][2t + h + 8(r>>1)] is half h of register r of lane 4g + t.
      const unsigned wi = m / 16, gg = m % 8, r = (m % 16) / 8 + 2 * (kk / 8), t = (kk % 8) / 2, h = kk % 2;
      uint64_t word = slotPtr(ws[wi].regs, k.src[1] + r / 2)[4 * gg + t] >> (32 * (r % 2));
      a[m * 16 + kk] = static_cast<uint16_t>(word >> (16 * h));
    }
  for (unsigned kk = 0; kk < K; ++kk)
    for (unsigned j = 0; j < n; ++j)
      if (auto e = element(bDesc, k.wgmma & kWgTransB, j, kk, b[kk * n + j])) return e;
  // C: the accumulator registers, or the D of the in-flight wgmma it chains on.
  const WgmmaOp* chained = wgInflight(g, k.src[0], true);
  if (scale & 1)
    for (unsigned m = 0; m < 64; ++m)
      for (unsigned j = 0; j < n; ++j) {
        // TC§4.2: D[m][j] is element (j%2) + 2((m%16)/8) + 4(j/8) of thread 32(m/16) + 4(m%8) + (j%8)/2.
        const unsigned wi = m / 16, l = 4 * (m % 8) + (j % 8) / 2, i = (j % 2) + 2 * ((m % 16) / 8) + 4 * (j / 8);
        c[m * n + j] = chained ? chained->d[(wi * kWarpSize + l) * elems + i]
                               : static_cast<uint32_t>(slotPtr(ws[wi].regs, k.src[0] + i / 2)[l] >> (32 * (i % 2)));
      }
  wgmmaProduct(k.srcScalar, k.mode, k.modeB, n, K, a.data(), b.data(), c.data(), scale & 1, d.data());
  op.d.resize(size_t(4) * kWarpSize * elems);
  for (unsigned m = 0; m < 64; ++m)
    for (unsigned j = 0; j < n; ++j) {
      const unsigned wi = m / 16, l = 4 * (m % 8) + (j % 8) / 2, i = (j % 2) + 2 * ((m % 16) / 8) + 4 * (j / 8);
      op.d[(wi * kWarpSize + l) * elems + i] = d[m * n + j];
    }
  for (uint32_t r : op.reads) ++wgReading_[r];
  g.inflight.push_back(std::move(op));
  return std::nullopt;
}

// No warp can run, and some wait at a wgmma op for their warpgroup: a warp of it exited or
// waits at bar.sync instead.
std::optional<Error> Engine::wgStuck() const {
  for (const Warp& w : warps_) {
    if (w.state != WarpState::AtWarpgroup) continue;
    for (uint32_t i = w.index / 4 * 4; i < w.index / 4 * 4 + 4; ++i) {
      const Warp& o = warps_[i];
      if (o.state == WarpState::AtWarpgroup) continue;
      std::string other = o.state == WarpState::AtBarrier || o.state == WarpState::AtNamed
                              ? "waits at " + std::string(ir::info(p_.code[o.pc].op).name) + " (" + where(p_.code[o.pc].inst) + ")"
                              : std::string("has exited");
      return fault(ErrorKind::Wgmma, p_.code[w.pc], w, 0,
                   std::string(ir::info(p_.code[w.pc].op).name) + " waits for warpgroup " +
                       std::to_string(w.index / 4) + ", but its warp " + std::to_string(o.index) + " " + other);
    }
  }
  return std::nullopt;
}

// Every warp that has not exited waits on an mbarrier, at a named barrier or at bar.sync, and
// none of them can go on: the first waiter is reported, with every waiting warp's phase.
Error Engine::deadlock() const {
  const Warp* first = nullptr;
  std::string waits;
  uint32_t exited = 0;
  for (const Warp& w : warps_) {
    exited += std::popcount(w.exited);
    if (w.state == WarpState::AtBarrier) {
      waits += "; warp " + std::to_string(w.index) + " is at bar.sync (" + where(p_.code[w.pc].inst) + ")";
      continue;
    }
    if (w.state == WarpState::AtNamed) {
      if (!first) first = &w;
      const NamedBarrier& b = named_[w.waitBarrier];
      waits += "; warp " + std::to_string(w.index) + " waits at bar.named.sync " + std::to_string(w.waitBarrier) + " (" +
               where(p_.code[w.waitPc].inst) + "), " + std::to_string(b.arrived) + " of its " +
               std::to_string(b.expected) + " threads arrived";
      continue;
    }
    if (w.state != WarpState::Waiting) continue;
    if (!first) first = &w;
    auto b = mbarriers_.find(w.waitBarrier);
    waits += "; warp " + std::to_string(w.index) + " waits (" + where(p_.code[w.waitPc].inst) + ") for parity " +
             std::to_string(w.waitParity) + " of the mbarrier " + sharedPlace(w.waitBarrier);
    if (b != mbarriers_.end())
      waits += ", in phase " + std::to_string(b->second.phase) + " with " + std::to_string(b->second.pending) + " of " +
               std::to_string(b->second.expected) + " arrivals missing and a tx-count of " + std::to_string(b->second.tx) +
               (b->second.tx > 0 ? " (" + std::to_string(b->second.tx) + " bytes still expected: expect_tx announced " +
                                       std::to_string(b->second.announced) + ", the copies delivered " +
                                       std::to_string(b->second.delivered) + ")"
                                 : std::string());
  }
  bool phases = std::any_of(warps_.begin(), warps_.end(), [](const Warp& w) { return w.state == WarpState::Waiting; });
  bool named = std::any_of(warps_.begin(), warps_.end(), [](const Warp& w) { return w.state == WarpState::AtNamed; });
  if (exited && named) waits += "; " + std::to_string(exited) + " threads of the block have exited";
  return fault(ErrorKind::Deadlock, p_.code[first->waitPc], *first, first->waitLane,
               std::string("deadlock: the block's threads all wait and no ") +
                   (phases && named ? "mbarrier phase or named barrier they wait for"
                    : named         ? "named barrier they wait at"
                                    : "mbarrier phase they wait for") +
                   " can complete" + waits);
}

// ---- TMA: cp.async.bulk.tensor ------------------------------------------------------------------

std::string Engine::paramName(uint32_t slot) const {
  for (const ParamSlot& p : p_.params)
    if (p.slot == slot) return "'%" + p.name + "'";
  return "?";  // not reached: the decoder checked that the operand is a parameter
}

std::optional<Error> Engine::tensorMapOf(const Code& k, const Warp& w, uint32_t lane, uint32_t src,
                                         const TensorMapDesc*& map) {
  // The decoder made the operand a kernel parameter, so it holds its map's index.
  map = &launch_.memory.tensorMaps[slotPtr(w.regs, src)[lane]];
  const unsigned rank = k.op == Op::TmaLoad || k.op == Op::TmaStore ? 2 : 3;
  if (map->rank != rank)
    return fault(ErrorKind::AsyncProxy, k, w, lane,
                 std::string(ir::info(k.op).name) + " through the tensor map " + paramName(src) + " of rank " +
                     std::to_string(map->rank) + " (a " + std::to_string(rank) + "-D copy needs rank " +
                     std::to_string(rank) + ")");
  return std::nullopt;
}

std::optional<Error> Engine::checkBox(const Code& k, const Warp& w, uint32_t lane, uint32_t baseSlot, uint64_t base,
                                      uint64_t bytes, uint64_t& lo, uint64_t& hi) const {
  const SharedArray* arr = base < shared_.size() ? sharedArrayAt(static_cast<int64_t>(base)) : nullptr;
  const SharedArray* from = originOf(baseSlot);
  const SharedArray* holder = from ? from : arr;
  lo = holder ? holder->start : 0;
  hi = holder ? holder->start + bytesOf(*holder) : 0;
  const std::string box = memName(k) + " of a " + std::to_string(bytes) + "-byte box ";
  if (!holder || base < lo || base + bytes > hi)
    return fault(ErrorKind::OutOfBounds, k, w, lane,
                 "out-of-bounds " + box + sharedPlace(static_cast<int64_t>(base)) + (from ? through(*from, arr) : ""));
  if (base % 16)
    return fault(ErrorKind::Misaligned, k, w, lane,
                 "misaligned " + box + sharedPlace(static_cast<int64_t>(base)) + " (a box starts on a 16-byte boundary)");
  return std::nullopt;
}

// A generic access to a TMA byte: a load's destination is usable by a thread once its try_wait has
// seen the load's phase complete; a store's source may not be written until its wait_group.read.
// Generic writes are stamped for the proxy-fence check of later stores.
std::optional<Error> Engine::checkTma(const Code& k, const Warp& w, uint32_t lane, uint32_t off, unsigned bytes,
                                      Access acc) {
  const uint32_t t = w.index * kWarpSize + lane;
  auto access = [&] {
    return memName(k) + " of " + std::to_string(bytes) + " bytes " + sharedPlace(off) +
           (acc == Access::Read ? " reads" : " writes") + " a byte that ";
  };
  auto who = [&](uint32_t u) { return u == t ? std::string("this thread") : "thread " + dimText(threadOfLinear(u)); };
  for (unsigned i = 0; i < bytes; ++i) {
    if (!tmaBytes_.empty()) {
      TmaByte& m = tmaBytes_[off + i];
      if (m.barrier != kNoBarrier) {
        auto b = mbarriers_.find(m.barrier);
        bool seen = b != mbarriers_.end() && b->second.seen.size() > t && b->second.seen[t] > m.phase;
        if (!seen)
          return fault(ErrorKind::AsyncProxy, k, w, lane,
                       access() + "the " + std::string(ir::info(p_.ops[m.inst]).name) + " at " + where(m.inst) +
                           " of " + who(m.issuer) +
                           " loads, before this thread has seen phase " + std::to_string(m.phase) + " of the mbarrier " +
                           sharedPlace(m.barrier) + " complete (" +
                           (acc == Access::Read ? "read before its barrier" : "written while pending") +
                           ": wait for the phase with mbarrier.try_wait.parity)");
        if (acc != Access::Read) m = TmaByte{};
      }
    }
    if (!proxyBytes_.empty() && acc != Access::Read) {
      tmaUsed_ = true;
      ProxyByte& pb = proxyBytes_[off + i];
      if (pb.reader != kNoThread)
        return fault(ErrorKind::AsyncProxy, k, w, lane,
                     access() + "the " + std::string(ir::info(p_.ops[pb.readInst]).name) + " at " +
                         where(pb.readInst) + " of " + who(pb.reader) +
                         " may still be reading: no cp.async.bulk.wait_group.read of that thread has waited for it");
      pb.writer = t;
      pb.writeInst = k.inst;
      pb.fences = bulk_[t].fences;
    }
  }
  return std::nullopt;
}

std::optional<Error> Engine::tmaWrite(const Code& k, const Warp& w, uint32_t lane, uint32_t off, unsigned bytes) {
  if (wgmma_)
    if (auto e = wgOverwrite(k, w, lane, off, bytes, std::string(ir::info(k.op).name))) return e;
  for (unsigned i = 0; i < bytes && !proxyBytes_.empty(); ++i) {
    ProxyByte& pb = proxyBytes_[off + i];
    if (pb.reader != kNoThread)
      return fault(ErrorKind::AsyncProxy, k, w, lane,
                   memName(k) + " of " + std::to_string(bytes) + " bytes " + sharedPlace(off) +
                       " overwrites a byte that the " + std::string(ir::info(p_.ops[pb.readInst]).name) + " at " +
                       where(pb.readInst) + " of thread " + dimText(threadOfLinear(pb.reader)) +
                       " may still be reading: no cp.async.bulk.wait_group.read of that thread has waited for it");
    pb.writer = kNoThread;  // written by the async proxy: a store needs no fence for it
  }
  if (opts_.checkRaces) {
    // Earlier accesses must be ordered before the copy (the ring's empty barrier); later ones are
    // the pending-byte check's, not the issuing thread's.
    if (auto e = checkRace(k, w, lane, off, bytes, Access::Write)) return e;
    for (unsigned i = 0; i < bytes; ++i) {
      ByteAccess& a = access_[off + i];
      a.writeEpoch = a.readEpoch = 0;
      a.reader2 = kNoThread;
    }
  }
  if (opts_.checkUninit) std::fill_n(written_.begin() + off, bytes, 1);
  return std::nullopt;
}

// The box a TMA of lane moves between shared memory at `base` and the tensor of its map: the
// map, the element-sized access codes and the bounds of the shared array holding the box.
struct Engine::Box {
  const TensorMapDesc* map = nullptr;
  Code global, shared;
  uint64_t lo = 0, hi = 0;
  uint64_t bytes() const {
    return uint64_t{map->box[0]} * map->box[1] * (map->rank > 2 ? map->box[2] : 1) * map->elementBytes;
  }
};

std::optional<Error> Engine::boxOf(const Code& k, const Warp& w, uint32_t lane, uint32_t mapSlot, uint32_t baseSlot,
                                   uint64_t base, Box& box) {
  if (auto e = tensorMapOf(k, w, lane, mapSlot, box.map)) return e;
  box.global = box.shared = k;
  box.global.space = AddrSpace::Global;
  box.global.bytes = box.shared.bytes = box.map->elementBytes;
  return checkBox(box.shared, w, lane, baseSlot, base, box.bytes(), box.lo, box.hi);
}

// Calls f(phys, at) for every element (b0, b1[, b2]) of the box at coordinates c (c[2] 0 for a
// map of rank 2), b0 fastest: phys its swizzled shared address (TC§4.5, the box laid out linearly;
// checked to stay in the box's array), at its global address, or nullopt outside the tensor.
template <class F>
std::optional<Error> Engine::walkBox(const Box& box, const Warp& w, uint32_t lane, uint64_t base, const int64_t (&c)[3],
                                     F&& f) {
  const TensorMapDesc& map = *box.map;
  const unsigned e = map.elementBytes;
  const bool three = map.rank > 2;
  const uint32_t planes = three ? map.box[2] : 1;
  for (uint32_t b2 = 0; b2 < planes; ++b2)
    for (uint32_t b1 = 0; b1 < map.box[1]; ++b1)
      for (uint32_t b0 = 0; b0 < map.box[0]; ++b0) {
        const uint64_t linear = b0 + uint64_t{map.box[0]} * (b1 + uint64_t{map.box[1]} * b2);
        const uint32_t phys = swizzled(static_cast<uint32_t>(base + uint64_t{e} * linear), map.swizzle);
        if (phys < box.lo || phys + e > box.hi)
          return fault(ErrorKind::OutOfBounds, box.shared, w, lane,
                       "out-of-bounds " + memName(box.shared) + ": box element (" + std::to_string(b0) + ", " +
                           std::to_string(b1) + (three ? ", " + std::to_string(b2) : std::string()) +
                           ") swizzles to offset " + std::to_string(int64_t{phys} - int64_t(box.lo)) + " of '@" +
                           sharedArrayAt(static_cast<int64_t>(box.lo))->name + "' (" +
                           std::to_string(box.hi - box.lo) + " bytes), outside it");
        const int64_t x = c[0] + b0, y = c[1] + b1, z = c[2] + b2;
        std::optional<uint64_t> at;
        if (x >= 0 && y >= 0 && z >= 0 && static_cast<uint64_t>(x) < map.dims[0] &&
            static_cast<uint64_t>(y) < map.dims[1] && (!three || static_cast<uint64_t>(z) < map.dims[2]))
          at = map.address + static_cast<uint64_t>(z) * map.strides[1] + static_cast<uint64_t>(y) * map.strides[0] +
               static_cast<uint64_t>(x) * e;
        if (auto err = f(phys, at)) return err;
      }
  return std::nullopt;
}

// Lane l's box coordinates: the s32 registers src[first] ... src[first + rank - 1] (c[2] 0 at rank 2).
void Engine::boxCoordinates(const Warp& w, const Code& k, unsigned first, uint32_t l, int64_t (&c)[3]) const {
  const unsigned rank = k.op == Op::TmaLoad || k.op == Op::TmaStore ? 2 : 3;
  for (unsigned d = 0; d < 3; ++d) c[d] = d < rank ? static_cast<int32_t>(slotPtr(w.regs, k.src[first + d])[l]) : 0;
}

// Per active lane: the box at (c0, c1[, c2]) of the map, element by element, from the tensor
// (zeros outside it) to the swizzled destination; then complete-tx of the whole box on the
// mbarrier (TC§5.2: out-of-bounds elements count too).
std::optional<Error> Engine::tmaLoad(const Warp& w, const Code& k, uint32_t mask) {
  tmaUsed_ = true;
  const std::string name(ir::info(k.op).name);
  const uint64_t* dst = slotPtr(w.regs, k.src[0]);
  const uint64_t* bar = slotPtr(w.regs, k.src[k.nsrc - 1]);
  for (uint32_t m = mask; m; m &= m - 1) {
    const uint32_t l = static_cast<uint32_t>(std::countr_zero(m)), t = w.index * kWarpSize + l;
    const uint32_t barOff = static_cast<uint32_t>(bar[l]);
    const SharedArray* barArray = sharedArrayAt(barOff);
    if (!barArray || barOff % 8 || barOff + 8 > barArray->start + bytesOf(*barArray))
      return fault(ErrorKind::Mbarrier, k, w, l,
                   name + "'s mbarrier " + sharedPlace(barOff) +
                       " is not 8 aligned bytes inside one shared array");
    auto found = mbarriers_.find(barOff);
    if (found == mbarriers_.end())
      return fault(ErrorKind::Mbarrier, k, w, l,
                   name + " completes its bytes on the mbarrier " + sharedPlace(barOff) +
                       ", which no mbarrier.init set up");
    Box box;
    if (auto e = boxOf(k, w, l, k.src[1], k.src[0], dst[l], box)) return e;
    const unsigned e = box.map->elementBytes;
    const uint32_t phase = found->second.phase;
    auto copy = [&](uint32_t phys, std::optional<uint64_t> at) -> std::optional<Error> {
      std::byte value[8] = {};
      if (at) {
        std::byte* g = nullptr;
        if (auto err = locate(box.global, w, l, *at, Access::Read, g)) return err;
        std::memcpy(value, g, e);
      }
      if (auto err = tmaWrite(box.shared, w, l, phys, e)) return err;
      std::memcpy(shared_.data() + phys, value, e);
      if (!tmaBytes_.empty())
        for (unsigned i = 0; i < e; ++i) tmaBytes_[phys + i] = {barOff, phase, k.inst, t};
      return std::nullopt;
    };
    int64_t c[3];
    boxCoordinates(w, k, 2, l, c);
    if (auto err = walkBox(box, w, l, dst[l], c, copy)) return err;
    // complete-tx: it may complete the phase, after the arrivals, or overrun what they announced.
    Mbarrier& b = found->second;
    b.tx -= static_cast<int64_t>(box.bytes());
    b.delivered += static_cast<int64_t>(box.bytes());
    ++mbarrierChanges_;
    if (b.pending == 0 && b.tx < 0) return txOverrun(k, w, l, b, barOff);
    if (b.pending == 0 && b.tx == 0) completePhase(b);
  }
  return std::nullopt;
}

// Per active lane: the box's in-bounds elements from the swizzled shared source to the tensor,
// now; the source stays being read until a wait_group.read covers the store's bulk group.
std::optional<Error> Engine::tmaStore(const Warp& w, const Code& k, uint32_t mask) {
  tmaUsed_ = true;
  const uint32_t srcSlot = k.src[k.nsrc - 1];
  const uint64_t* src = slotPtr(w.regs, srcSlot);
  for (uint32_t m = mask; m; m &= m - 1) {
    const uint32_t l = static_cast<uint32_t>(std::countr_zero(m)), t = w.index * kWarpSize + l;
    Box box;
    if (auto e = boxOf(k, w, l, k.src[0], srcSlot, src[l], box)) return e;
    const unsigned e = box.map->elementBytes;
    BulkStore store{bulk_[t].committed, k.inst, UINT32_MAX, 0};
    auto copy = [&](uint32_t phys, std::optional<uint64_t> at) -> std::optional<Error> {
      for (unsigned i = 0; i < e; ++i) {
        const ProxyByte& pb = proxyBytes_[phys + i];
        if (pb.writer != kNoThread && bulk_[pb.writer].fences == pb.fences)
          return fault(ErrorKind::AsyncProxy, k, w, l,
                       memName(box.shared) + " of " + std::to_string(e) + " bytes " + sharedPlace(phys) +
                           " reads a byte that thread " + dimText(threadOfLinear(pb.writer)) + " wrote at " +
                           where(pb.writeInst) +
                           " with no fence.proxy.async of that thread between the write and this store (the async "
                           "proxy may not see the write)");
      }
      if (auto err = trackShared(box.shared, w, l, phys, Access::Read)) return err;
      if (at) {
        std::byte* g = nullptr;
        if (auto err = locate(box.global, w, l, *at, Access::Write, g)) return err;
        std::memcpy(g, shared_.data() + phys, e);
      }
      for (unsigned i = 0; i < e; ++i) {
        proxyBytes_[phys + i].reader = t;
        proxyBytes_[phys + i].readInst = k.inst;
      }
      store.lo = std::min(store.lo, phys);
      store.hi = std::max(store.hi, phys + e);
      return std::nullopt;
    };
    int64_t c[3];
    boxCoordinates(w, k, 1, l, c);
    if (auto err = walkBox(box, w, l, src[l], c, copy)) return err;
    bulk_[t].pending.push_back(store);
  }
  return std::nullopt;
}

// Per thread: commit_group closes the open bulk group; fence.proxy.async counts a fence;
// wait_group.read N: every store of the thread's committed groups but the N most recent has read
// its source, which may be written again. (A kernel without TMA stores keeps no bulk state.)
void Engine::bulkGroups(const Warp& w, const Code& k, uint32_t mask) {
  if (bulk_.empty()) return;
  tmaUsed_ = true;
  forLanes(mask, [&](uint32_t l) {
    const uint32_t t = w.index * kWarpSize + l;
    ThreadBulk& tb = bulk_[t];
    if (k.kind != Kind::BulkWait) {
      ++(k.kind == Kind::BulkCommit ? tb.committed : tb.fences);
      return;
    }
    auto covered = [&](const BulkStore& s) { return uint64_t{s.group} + k.imm < tb.committed; };
    for (const BulkStore& s : tb.pending) {
      if (!covered(s)) continue;
      for (uint32_t b = s.lo; b < s.hi; ++b)
        if (proxyBytes_[b].reader == t && proxyBytes_[b].readInst == s.inst) proxyBytes_[b].reader = kNoThread;
    }
    std::erase_if(tb.pending, covered);
  });
}

// Whether a kernel's blocks can observe each other's order through atomics on global memory.
bool hasGlobalAtomics(const Program& p) {
  return std::any_of(p.code.begin(), p.code.end(),
                     [](const Code& k) { return k.kind == Kind::Atom && k.space != AddrSpace::Shared; });
}

// --check-races: what Launch needs to record global accesses (the memory the kernel's stores and
// TMA stores can reach).
void prepareGlobalRaces(Launch& l) {
  const Program& p = l.p;
  l.globalRaces = true;
  l.trackAll = p.writesAnywhere;
  l.crossBlockReads = std::none_of(p.code.begin(), p.code.end(), [](const Code& k) { return k.op == Op::Membar; });
  l.trackedTags.assign(l.memory.buffers.size() + 1, 0);
  auto mark = [&](uint64_t pointer) {
    if (!l.memory.device) {
      if (uint64_t tag = pointerTag(pointer); tag >= 1 && tag <= l.memory.buffers.size()) l.trackedTags[tag] = 1;
    } else if (auto a = l.memory.device->below(pointer); a && pointer - a->base < a->bytes) {
      l.trackedBases.push_back(a->base);
    }
  };
  for (size_t i = 0; i < p.params.size() && i < p.paramWritten.size() && i < l.params.size(); ++i)
    if (p.paramWritten[i]) mark(l.params[i]);
  if (p.bulkStores)
    for (const TensorMapDesc& map : l.memory.tensorMaps) mark(map.address);
}

// --check-races between blocks: the first byte, in address order, that two blocks touch through
// plain accesses, one of them writing it. Nothing orders the blocks of a launch (loads take part
// only where no membar could order them: Launch::crossBlockReads). Reported at the
// access of the later block. Also the first byte an ld.nc reads that any thread of the launch
// writes, reported at the load.
std::optional<Error> crossBlockRace(const Launch& l, std::vector<Span>& spans) {
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return std::tie(a.lo, a.block, a.hi, a.inst) < std::tie(b.lo, b.block, b.hi, b.inst);
  });
  // The spans seen so far that reach furthest, from two different blocks.
  struct Furthest {
    const Span* first = nullptr;   // reaches furthest
    const Span* second = nullptr;  // reaches furthest among the other blocks' spans
    void add(const Span& s) {
      if (first && s.block == first->block) {
        if (s.hi > first->hi) first = &s;
      } else if (!first || s.hi > first->hi) {
        second = first;
        first = &s;
      } else if (!second || s.hi > second->hi) {
        second = &s;
      }
    }
    const Span* otherThan(uint64_t block) const { return first && first->block != block ? first : second; }
  } any, writes, ncReads;
  auto blockOf = [&](uint64_t b) { return blockOfLinear(b, l.cfg.grid); };
  auto threadOf = [&](uint32_t t) { return threadOfLinear(t, l.cfg.block); };
  // `at` touches byte `addr`, which `other` also touches: the fault at `at`'s access.
  auto report = [&](const Span& at, const Span& other, uint64_t addr, const std::string& what, const char* why) {
    const ir::SourceLoc& loc = l.p.locs[other.inst];
    return launchFault(l.p, ErrorKind::GlobalRace, at.inst, blockOf(at.block), threadOf(at.threadAt(addr)),
                       "global-memory race: " + what + " of the byte " + globalPlace(l.memory, addr) + ", which block " +
                           dimText(blockOf(other.block)) + " thread " + dimText(threadOf(other.threadAt(addr))) +
                           (other.write ? " writes" : " reads") + " at " + std::to_string(loc.line) + ":" +
                           std::to_string(loc.col) + why);
  };
  const char* ncWhy = " in this launch; ld.nc is for memory nothing writes while the kernel runs";
  for (const Span& s : spans) {
    if (const Span* w = writes.first; s.nc && w && w->hi > s.lo) return report(s, *w, s.lo, "ld.nc", ncWhy);
    if (const Span* r = ncReads.first; s.write && r && r->hi > s.lo) return report(*r, s, s.lo, "ld.nc", ncWhy);
    if (s.nc) ncReads.add(s);
    if (!s.write && !l.crossBlockReads) continue;
    const Span* o = (s.write ? any : writes).otherThan(s.block);
    if (o && o->hi > s.lo) {
      const Span& later = o->block > s.block ? *o : s;
      return report(later, o->block > s.block ? s : *o, s.lo, later.write ? "a write" : "a read",
                    "; nothing orders the blocks of one launch");
    }
    any.add(s);
    if (s.write) writes.add(s);
  }
  return std::nullopt;
}

}  // namespace

std::optional<Error> execute(const Program& p, std::span<const uint64_t> paramBits, std::span<const uint64_t> vectorWords,
                             GlobalMemory memory, const LaunchConfig& cfg, const Options& opts, Stats& stats) {
  auto t0 = std::chrono::steady_clock::now();
  stats = Stats{};
  if (auto e = checkConfig(p, cfg)) return e;
  Launch launch{p, paramBits, vectorWords, memory, cfg, opts};
  launch.threadsPerBlock = cfg.block.total();
  launch.sharedBytes = cfg.dynamicShared ? uint64_t(p.dynamicSharedStart) + cfg.dynamicShared : p.staticSharedEnd;
  if (opts.checkRaces) prepareGlobalRaces(launch);
  const uint64_t blocks = uint64_t(cfg.grid.x) * cfg.grid.y * cfg.grid.z;
  uint64_t workers = opts.threads ? opts.threads : std::max(1u, std::thread::hardware_concurrency());
  if (hasGlobalAtomics(p)) workers = 1;
  workers = std::min(workers, blocks);

  // Blocks are taken in order. After a fault in block b no block above b starts, and the blocks
  // below it finish, so the fault reported is the lowest block's, whatever the thread count.
  std::atomic<uint64_t> next{0};
  std::atomic<uint64_t> stopAfter{UINT64_MAX};
  std::mutex mu;
  std::optional<Error> first;
  std::vector<Stats> perWorker(workers);
  std::vector<std::vector<Span>> spans(workers);
  auto work = [&](size_t index) {
    FenvGuard fenv;  // the floating-point environment is per thread
    Engine engine(launch);
    for (;;) {
      uint64_t b = next.fetch_add(1);
      if (b >= blocks || b > stopAfter.load()) break;
      if (auto e = engine.runBlock(b)) {
        std::lock_guard lock(mu);
        if (b < stopAfter.load()) {
          first = std::move(e);
          stopAfter.store(b);
        }
      } else {
        engine.closeBlock(b);
      }
    }
    perWorker[index] = engine.stats();
    spans[index] = std::move(engine.spans());
  };
  if (workers == 1) {
    work(0);
  } else {
    std::vector<std::jthread> pool;
    for (size_t i = 0; i < workers; ++i) pool.emplace_back(work, i);
  }
  for (const Stats& s : perWorker) {
    stats.instructions += s.instructions;
    stats.warpInstructions += s.warpInstructions;
    stats.blocks += s.blocks;
  }
  stats.threads = stats.blocks * launch.threadsPerBlock;
  if (!first && launch.globalRaces) {
    std::vector<Span> all = std::move(spans[0]);
    for (size_t i = 1; i < spans.size(); ++i) all.insert(all.end(), spans[i].begin(), spans[i].end());
    first = crossBlockRace(launch, all);
  }
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return first;
}

}  // namespace tn::interp::detail
