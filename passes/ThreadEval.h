// Thread-level evaluation shared by barrier-safety and tile-validation:
//  - ThreadLayout: the block shape the analyses may assume (from reqntid / maxntid);
//  - ThreadEval: the value of an IR value in every thread of a block, as a concrete number per
//    thread plus a sum of block-uniform terms (kernel parameters, ctaid, shared array bases,
//    uniform loop counters) that is the same in every thread -- "affine in tid" and more (shr,
//    and, rem of thread indices are evaluated exactly);
//  - activeThreads: which threads may execute each block, where branch conditions are
//    functions of the thread index.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "ir/Dominance.h"
#include "passes/Analysis.h"

namespace tn::passes {

struct ThreadLayout {
  ir::Dim3 dims{1024, 1, 1};  // the coordinates enumerated (at most 1024 threads)
  // Warps are the runs of 32 consecutive linear thread ids of this shape: true with reqntid,
  // or with a one-dimensional maxntid (a smaller real block is a prefix of it).
  bool known = false;
  bool exactNtid = false;  // reqntid: ntid.{x,y,z} are these constants
  bool hasY = false, hasZ = false;  // tid.y / tid.z can be enumerated (known extents)

  static ThreadLayout of(const Kernel& k);
  unsigned threads() const { return dims.total(); }
};

// One block-uniform term of a thread value: a value (key = ValueId index), a static shared
// array (kSharedKey | index) or the dynamic shared memory (kDynamicSharedKey).
struct SymTerm {
  uint64_t key;
  int64_t coef;
  bool operator==(const SymTerm&) const = default;
};
constexpr uint64_t kSharedKey = uint64_t{1} << 32;
constexpr uint64_t kDynamicSharedKey = uint64_t{2} << 32;

struct ThreadValue {
  std::vector<int64_t> perThread;  // by linear thread id
  std::vector<SymTerm> uniform;    // sorted by key, no zero coefficients
  bool invariant() const;          // the same number in every thread
  // Every per-thread number is within +-2^40: small enough to be a byte offset that the
  // address analyses can enumerate without overflow.
  bool offsetLike() const;
};

class ThreadEval {
 public:
  // isUniform(v): v is the same in every thread of the block (a leaf of the evaluation).
  ThreadEval(const Kernel& k, ThreadLayout layout, std::function<bool(ValueId)> isUniform);
  // nullptr when v is not a function of the thread index, constants and uniform values that the
  // evaluator understands (e.g. it depends on a load, or on tid.y with an unknown block shape).
  const ThreadValue* get(ValueId v);
  const ThreadLayout& layout() const { return layout_; }

 private:
  std::optional<ThreadValue> compute(ValueId v, unsigned depth);
  const ThreadValue* getAt(ValueId v, unsigned depth);

  const Kernel& k_;
  ThreadLayout layout_;
  std::function<bool(ValueId)> isUniform_;
  // By ValueId (sized on first use; never resized, so the pointers handed out stay valid).
  std::vector<std::optional<ThreadValue>> memo_;
  std::vector<bool> seen_;
};

// A set of the threads of a block, by linear id, as bits (whole words are combined at once).
class ThreadSet {
 public:
  explicit ThreadSet(size_t threads = 0) : size_(threads), words_((threads + 63) / 64, 0) {}
  size_t size() const { return size_; }
  bool operator[](size_t t) const { return (words_[t / 64] >> (t % 64)) & 1; }
  void set(size_t t) { words_[t / 64] |= uint64_t{1} << (t % 64); }
  void fill() {
    for (size_t t = 0; t < size_; ++t) set(t);
  }
  // Adds the threads of `from`, only those in `mask` when one is given (its complement when
  // `inverted`).
  void addFrom(const ThreadSet& from, const ThreadSet* mask = nullptr, bool inverted = false) {
    for (size_t i = 0; i < words_.size(); ++i) {
      uint64_t w = from.words_[i];
      if (mask) w &= inverted ? ~mask->words_[i] : mask->words_[i];
      words_[i] |= w;
    }
  }

 private:
  size_t size_;
  std::vector<uint64_t> words_;
};

// For each block, the threads (by linear id) that may execute it: thread-dependent branch
// conditions that the evaluator can compute restrict it along forward edges; any other
// condition lets every thread through. Sized layout.threads().
std::vector<ThreadSet> activeThreads(const Kernel& k, const ir::DominatorTree& cfg, ThreadEval& eval);

}  // namespace tn::passes
