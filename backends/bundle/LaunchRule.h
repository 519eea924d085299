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
  bool operator==(const Param&) const = default;
  // Read through, never written through and not escaping: a `const T*` in generated C++.
  bool readOnly() const { return type.isPointer() && (access & (kPtrWritten | kPtrEscapes)) == 0; }
};
// A pointer parameter's access as inspect, embed and the Python package spell it: "read",
// "write", "read-write", "unused" or "escapes".
std::string_view accessName(uint32_t access);
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

// Block size (1 to 3 dimensions, at most 1024 threads), grid (1 to 3 expressions) and dynamic
// shared memory bytes (an expression).
struct LaunchRule {
  std::vector<uint32_t> block{1};
  std::vector<Expr> grid{Expr(1)};
  Expr dynamicShared;
  bool operator==(const LaunchRule&) const = default;
};

// "block [256], grid [ceil_div(n, 256)], dynamic_shared 0"
std::string describe(const LaunchRule& rule);

// Checks block sizes, that every name in the rule is an integer parameter of `params`, and that
// no part fails for every argument value (Expr::leastValue: a division by a constant zero, a
// grid dimension or dynamic shared size whose least value is over the launch limits). The error
// says which part is wrong (grid: with its index) and, for a name, the column inside the
// expression.
struct RuleError {
  enum class Part : uint8_t { Block, Grid, DynamicShared };
  Part part;
  unsigned index;  // grid dimension
  Error error;
  std::string where() const;  // "block", "grid[1]", "dynamic_shared"
};
std::optional<RuleError> checkRule(const LaunchRule& rule, std::span<const Param> params);

struct LaunchDims {
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t dynamicShared = 0;
};

// Hardware limits applied to evaluated rules.
inline constexpr uint64_t kMaxGridX = 2147483647u;
inline constexpr uint64_t kMaxGridYZ = 65535u;

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

}  // namespace tn::bundle
