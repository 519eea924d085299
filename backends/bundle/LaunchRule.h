// Launch rules: how a bundle kernel's grid and dynamic shared memory follow from its runtime
// arguments. Part of truenoc_bundle (no IR dependency) so the runtime can evaluate rules too.
//
// Expression grammar (docs/bundle-format.md):
//   expr    := term (('+' | '-') term)*
//   term    := factor (('*' | '/' | '%') factor)*
//   factor  := INTEGER | NAME | '(' expr ')' | FUNC '(' expr ',' expr ')'
//   FUNC    := ceil_div | min | max
// Arithmetic is unsigned 64-bit; overflow, a negative intermediate, a negative argument and
// division by zero are evaluation errors, never wrapped values.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "backends/bundle/ParamType.h"

namespace tn::bundle {

// An error returned by value. column: 1-based position inside an expression text (0 = none).
struct Error {
  std::string message;
  uint32_t column = 0;
};

// A value or an Error; never throws.
template <class T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error e) : v_(std::move(e)) {}
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Limits that keep hostile rules cheap to parse and evaluate.
inline constexpr size_t kMaxExprLength = 1024;
inline constexpr unsigned kMaxExprDepth = 64;

// Letters, digits and '_', not starting with a digit; at most 255 characters.
bool isIdentifier(std::string_view text);

// A parsed launch-rule expression.
class Expr {
 public:
  struct Ref {
    std::string name;
    uint32_t column;  // 1-based column of the name's first use
  };

  Expr() : Expr(0) {}
  Expr(uint64_t constant);  // NOLINT: a number is an expression
  static Result<Expr> parse(std::string_view text);
  // Building expressions in code (the templates' launch rules): Expr::param("n") names a
  // parameter; ceilDiv, min, max and + - * / % combine. The result is the expression that
  // parse() gives for its text().
  static Expr param(std::string name);
  friend Expr ceilDiv(const Expr& a, const Expr& b) { return combine(Kind::CeilDiv, a, b); }
  friend Expr min(const Expr& a, const Expr& b) { return combine(Kind::Min, a, b); }
  friend Expr max(const Expr& a, const Expr& b) { return combine(Kind::Max, a, b); }
  friend Expr operator+(const Expr& a, const Expr& b) { return combine(Kind::Add, a, b); }
  friend Expr operator-(const Expr& a, const Expr& b) { return combine(Kind::Sub, a, b); }
  friend Expr operator*(const Expr& a, const Expr& b) { return combine(Kind::Mul, a, b); }
  friend Expr operator/(const Expr& a, const Expr& b) { return combine(Kind::Div, a, b); }
  friend Expr operator%(const Expr& a, const Expr& b) { return combine(Kind::Rem, a, b); }

  // Canonical text: minimal parentheses, single spaces around binary operators.
  std::string text() const;
  // Distinct names the expression reads, in first-use order.
  const std::vector<Ref>& refs() const { return refs_; }
  // Evaluates with values[i] the value of refs()[i].
  Result<uint64_t> evaluate(std::span<const uint64_t> values) const;
  // C++ source computing the expression through a checked-arithmetic object `ev` (members add,
  // sub, mul, div, rem, ceil_div, min, max); names are spelled by `spell`.
  std::string toCpp(std::string_view ev, const std::function<std::string(std::string_view)>& spell) const;
  // The value when the expression reads no names.
  std::optional<uint64_t> constantValue() const;
  // A lower bound of the value over every argument value (names stand for any value >= 0), or
  // the error that every evaluation meets: a division by a constant zero, a constant part that
  // overflows or is negative, a least value that overflows. Exact for a constant expression.
  Result<uint64_t> leastValue() const;
  bool operator==(const Expr& o) const { return text() == o.text(); }

 private:
  enum class Kind : uint8_t { Const, Name, Add, Sub, Mul, Div, Rem, CeilDiv, Min, Max };
  struct Node {
    Kind kind;
    uint64_t value;  // Const: the value; Name: index into refs_
    int32_t lhs, rhs;
  };
  friend class ExprParser;
  static Expr combine(Kind k, const Expr& a, const Expr& b);
  static int precedence(Kind k);
  static const char* spelling(Kind k);
  std::string textOf(int32_t n, int parentPrec, bool rightSide) const;
  std::string cppOf(int32_t n, std::string_view ev, const std::function<std::string(std::string_view)>& spell) const;
  Result<uint64_t> eval(int32_t n, std::span<const uint64_t> values) const;
  struct Bound {
    uint64_t least;
    bool exact;  // the subexpression reads no names: least is its value
  };
  Result<Bound> bound(int32_t n) const;

  std::vector<Node> nodes_;
  int32_t root_ = 0;
  std::vector<Ref> refs_;
};

// One kernel parameter as a bundle records it: name, type and the guaranteed alignment of
// pointer parameters (0 = unknown).
// How a kernel uses a pointer parameter, as the compiler found it in the kernel's IR
// (compiler/ParamUse.h): bits of Param::access.
inline constexpr uint32_t kPtrRead = 1;     // loaded from (or cp.async source)
inline constexpr uint32_t kPtrWritten = 2;  // stored to (or an atomic's address)
inline constexpr uint32_t kPtrEscapes = 4;  // the pointer itself is stored or given to an atomic: anything may happen
inline constexpr uint32_t kPtrAccessMask = 7;

struct Param {
  std::string name;
  ParamType type;
  uint32_t align = 0;
  uint32_t access = 0;                          // pointers: kPtr* bits; 0 for other parameters
  std::optional<ParamType::Scalar> element = std::nullopt;  // pointers: the element type of typed accesses, if one
  // Pointers with an element type: how many elements a launch's buffer must hold from the pointer
  // on, over the kernel's integer parameters (version 9; a template's Template::extents).
  std::optional<Expr> extent = std::nullopt;
  bool operator==(const Param&) const = default;
  // Read through, never written through and not escaping: a `const T*` in generated C++.
  bool readOnly() const { return type.isPointer() && (access & (kPtrWritten | kPtrEscapes)) == 0; }
};
// The parameters a caller passes, in order: all but tmap ones, which the runtime fills. The code
// of every target of one kernel takes these alike (its variants). Param* or const Param*, as
// `params` is.
template <class Params>
auto callerParams(Params& params) {
  std::vector<decltype(&params[0])> out;
  for (auto& p : params)
    if (p.type.scalar != ParamType::Scalar::TensorMap) out.push_back(&p);
  return out;
}
// A pointer parameter's access as inspect, embed and the Python package spell it: "read",
// "write", "read-write", "unused" or "escapes".
std::string_view accessName(uint32_t access);

// How the runtime fills one `tmap` parameter (docs/hopper.md §3): a 2-D or 3-D tiled tensor map
// over the memory of a global pointer parameter, its extents and strides computed from the
// launch's integer arguments, encoded with cuTensorMapEncodeTiled (TC§5.1) at launch. Callers
// never pass tensor maps. A map of rank 3 is a batch of matrices, `strides[1]` bytes apart.
inline constexpr size_t kMaxTensorMapRank = 3;  // the ranks the IR's copies take: 2 and 3

struct TensorMapRule {
  std::string param;              // the kernel's tmap parameter this fills
  std::string source;             // the ptr.global parameter whose memory it views
  ParamType::Scalar element = ParamType::Scalar::F32;  // BF16, F16, F32, ...
  std::vector<Expr> dims;         // extents in elements, innermost first: 2 or 3 (the rank)
  std::vector<Expr> strides;      // bytes between consecutive rows (dimension 1), then planes (2)
  std::vector<uint32_t> box;      // box extents in elements, innermost first, one per dimension
  uint32_t swizzle = 0;           // bytes: 0, 32, 64 or 128
  size_t rank() const { return dims.size(); }
  bool operator==(const TensorMapRule&) const = default;
};

// The CUtensorMapDataType of an element type (UINT8 0 ... BFLOAT16 9; integers of one width
// share the unsigned type, since a tile copy moves bits), or nullopt for a type TMA does not
// have (pred, pointers, tmap).
std::optional<uint32_t> tensorMapDataType(ParamType::Scalar element);
// Bytes of one element of a type TMA has.
unsigned tensorMapElementBytes(ParamType::Scalar element);
// The spec's (and describe's) name of strides[d]: row_stride, plane_stride.
const char* tensorMapStrideName(size_t d);

// Block size (1 to 3 dimensions, at most 1024 threads), grid (1 to 3 expressions), dynamic
// shared memory bytes (an expression) and one tensor-map rule per `tmap` parameter.
struct LaunchRule {
  std::vector<uint32_t> block{1};
  std::vector<Expr> grid{Expr(1)};
  Expr dynamicShared;
  std::vector<TensorMapRule> tensorMaps{};  // an initializer: templates aggregate-initialise rules without it
  bool operator==(const LaunchRule&) const = default;
};

// "block [256], grid [ceil_div(n, 256)], dynamic_shared 0" (tensor maps: describe each).
std::string describe(const LaunchRule& rule);
// One tensor map as describe() spells it: "a_map = a as bf16 [k, m] row_stride lda * 2 box [64, 128] swizzle 128".
std::string describe(const TensorMapRule& map);

// Checks block sizes, that every name in the rule is an integer parameter of `params`, that
// every `tmap` parameter has exactly one tensor-map rule and each rule is one
// cuTensorMapEncodeTiled accepts for some arguments (its source a ptr.global parameter, an
// element type TMA has, box extents 1..256, the box's inner extent a multiple of 16 bytes and
// within the swizzle span, swizzle 0/32/64/128), and that no part fails for every argument value (Expr::leastValue: a division by a constant zero, a
// grid dimension or dynamic shared size whose least value is over the launch limits). The error
// says which part is wrong (grid: with its index) and, for a name, the column inside the
// expression.
struct RuleError {
  enum class Part : uint8_t { Block, Grid, DynamicShared, TensorMap };
  Part part;
  unsigned index;  // grid dimension, or index into tensorMaps
  Error error;
  std::string where() const;  // "block", "grid[1]", "dynamic_shared", "tensor_maps[0]"
};
std::optional<RuleError> checkRule(const LaunchRule& rule, std::span<const Param> params);

// Checks a parameter's extent (Param::extent): only on a pointer with an element type, reading
// integer parameters of `params` only (a name's column inside the expression in the error).
std::optional<Error> checkExtent(const Param& p, std::span<const Param> params);

struct LaunchDims {
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t dynamicShared = 0;
};

// Hardware limits applied to evaluated rules.
inline constexpr uint64_t kMaxGridX = 2147483647u;
inline constexpr uint64_t kMaxGridYZ = 65535u;
inline constexpr uint64_t kMaxTensorMapDim = uint64_t{1} << 32;     // elements per dimension
inline constexpr uint64_t kMaxTensorMapStride = uint64_t{1} << 40;  // a stride is below this

// A rule with every name it reads resolved to its parameter's index and width once, so that
// evaluating it per launch is index-based. Borrows the rule: keep it alive and unchanged.
struct BoundRule {
  struct Slot {
    uint32_t param;  // index into the kernel's parameters
    uint8_t bytes;   // integer width
    bool isSigned;
  };
  const LaunchRule* rule = nullptr;
  std::vector<Slot> grid[3];        // grid[i][k]: the parameter of rule->grid[i].refs()[k]
  std::vector<Slot> dynamicShared;  // parallel to rule->dynamicShared.refs()
};

// Resolves a rule's names against `params`; errors as evaluate() reports them.
Result<BoundRule> bindRule(const LaunchRule& rule, std::span<const Param> params);

// Evaluates a bound rule for one launch. args[i] points at the value of parameter i, as in
// cuLaunchKernel's kernelParams. A grid dimension may evaluate to 0 (nothing to launch).
Result<LaunchDims> evaluate(const BoundRule& rule, const void* const* args);
// bindRule() and evaluate() in one call, for callers that launch a rule once.
Result<LaunchDims> evaluate(const LaunchRule& rule, std::span<const Param> params, const void* const* args);
// The bytes a launch's buffer for pointer parameter p must hold from the pointer on: its extent
// times its element's bytes, args as evaluate() takes them; nullopt when p has no extent. Errors
// as evaluate()'s (a negative argument, an overflow), naming the expression.
Result<std::optional<uint64_t>> extentBytes(const Param& p, std::span<const Param> params, const void* const* args);

// The arguments of cuTensorMapEncodeTiled (and of the simulator's interp::encodeTensorMap) for
// one tensor map of one launch: rank 2, element strides 1, no interleave.
struct TensorMapArgs {
  uint32_t param = 0;        // index of the tmap parameter in the kernel's parameters
  uint32_t source = 0;       // index of the pointer parameter it views
  uint64_t address = 0;      // that pointer's value
  uint32_t dataType = 0;     // CUtensorMapDataType
  uint32_t elementBytes = 0;
  uint32_t rank = 2;         // 2 or 3: the entries of dims and box in use
  uint64_t dims[kMaxTensorMapRank] = {};         // extents in elements, innermost first
  uint64_t strides[kMaxTensorMapRank - 1] = {};  // byte strides of dimensions 1 .. rank - 1
  uint32_t box[kMaxTensorMapRank] = {};
  uint32_t swizzle = 0;      // CUtensorMapSwizzle: 0 none, 1 32B, 2 64B, 3 128B
  bool operator==(const TensorMapArgs&) const = default;
};

// Evaluates every tensor-map rule for one launch, args as evaluate() takes them (the tmap
// parameters' own slots are not read). Errors name the tmap parameter and say what
// cuTensorMapEncodeTiled would refuse: an extent outside 1..2^32, a stride that is not a
// multiple of 16 or not below 2^40, a source address that is not 16-byte aligned.
Result<std::vector<TensorMapArgs>> evaluateTensorMaps(const LaunchRule& rule, std::span<const Param> params,
                                                      const void* const* args);

}  // namespace tn::bundle
