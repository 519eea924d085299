#include "backends/bundle/LaunchRule.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace tn::bundle {

std::string_view accessName(uint32_t access) {
  if (access & kPtrEscapes) return "escapes";
  switch (access & (kPtrRead | kPtrWritten)) {
    case kPtrRead: return "read";
    case kPtrWritten: return "write";
    case kPtrRead | kPtrWritten: return "read-write";
    default: return "unused";
  }
}

namespace {

bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool isIdentChar(char c) { return isIdentStart(c) || isDigit(c); }

}  // namespace

bool isIdentifier(std::string_view text) {
  if (text.empty() || text.size() > 255 || !isIdentStart(text[0])) return false;
  for (char c : text)
    if (!isIdentChar(c)) return false;
  return true;
}

// ---- parsing ----------------------------------------------------------------------------------

class ExprParser {
 public:
  explicit ExprParser(std::string_view text) : s_(text) {}

  Result<Expr> run() {
    if (s_.size() > kMaxExprLength)
      return Error{"expression is longer than " + std::to_string(kMaxExprLength) + " characters", 1};
    e_.nodes_.clear();
    skipSpace();
    if (pos_ == s_.size()) return Error{"empty expression", 1};
    int32_t root = expr(0);
    if (root < 0) return err_;
    skipSpace();
    if (pos_ != s_.size()) return Error{"unexpected '" + std::string(1, s_[pos_]) + "'", column()};
    e_.root_ = root;
    return std::move(e_);
  }

 private:
  using Kind = Expr::Kind;

  uint32_t column() const { return static_cast<uint32_t>(pos_ + 1); }
  void skipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t')) ++pos_;
  }
  int32_t fail(std::string msg) {
    if (err_.message.empty()) err_ = Error{std::move(msg), column()};
    return -1;
  }
  int32_t node(Kind k, uint64_t v, int32_t l = -1, int32_t r = -1) {
    e_.nodes_.push_back({k, v, l, r});
    return static_cast<int32_t>(e_.nodes_.size() - 1);
  }
  bool eat(char c) {
    skipSpace();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  std::string found() const {
    return pos_ < s_.size() ? "'" + std::string(1, s_[pos_]) + "'" : std::string("end of expression");
  }

  int32_t expr(unsigned depth) {
    if (depth > kMaxExprDepth) return fail("expression is nested more than " + std::to_string(kMaxExprDepth) + " levels deep");
    int32_t lhs = term(depth);
    while (lhs >= 0) {
      if (eat('+')) lhs = binary(Kind::Add, lhs, term(depth));
      else if (eat('-')) lhs = binary(Kind::Sub, lhs, term(depth));
      else break;
    }
    return lhs;
  }
  int32_t term(unsigned depth) {
    int32_t lhs = factor(depth);
    while (lhs >= 0) {
      if (eat('*')) lhs = binary(Kind::Mul, lhs, factor(depth));
      else if (eat('/')) lhs = binary(Kind::Div, lhs, factor(depth));
      else if (eat('%')) lhs = binary(Kind::Rem, lhs, factor(depth));
      else break;
    }
    return lhs;
  }
  int32_t binary(Kind k, int32_t lhs, int32_t rhs) { return rhs < 0 ? -1 : node(k, 0, lhs, rhs); }

  int32_t factor(unsigned depth) {
    skipSpace();
    if (pos_ >= s_.size()) return fail("expected a number, a parameter name or '(' but found end of expression");
    char c = s_[pos_];
    if (c == '(') {
      ++pos_;
      int32_t inner = expr(depth + 1);
      if (inner < 0) return -1;
      if (!eat(')')) return fail("expected ')' but found " + found());
      return inner;
    }
    if (isDigit(c)) {
      size_t start = pos_;
      uint64_t v = 0;
      while (pos_ < s_.size() && isDigit(s_[pos_])) {
        unsigned d = static_cast<unsigned>(s_[pos_] - '0');
        if (v > (UINT64_MAX - d) / 10) {
          pos_ = start;
          return fail("integer literal does not fit in 64 bits");
        }
        v = v * 10 + d;
        ++pos_;
      }
      if (pos_ < s_.size() && isIdentChar(s_[pos_])) return fail("unexpected '" + std::string(1, s_[pos_]) + "' in integer literal");
      return node(Kind::Const, v);
    }
    if (isIdentStart(c)) {
      size_t start = pos_;
      while (pos_ < s_.size() && isIdentChar(s_[pos_])) ++pos_;
      std::string_view name = s_.substr(start, pos_ - start);
      size_t afterName = pos_;
      skipSpace();
      bool call = pos_ < s_.size() && s_[pos_] == '(';
      if (call) {
        Kind k;
        if (name == "ceil_div") k = Kind::CeilDiv;
        else if (name == "min") k = Kind::Min;
        else if (name == "max") k = Kind::Max;
        else {
          pos_ = start;
          return fail("unknown function '" + std::string(name) + "' (expected ceil_div, min or max)");
        }
        ++pos_;
        int32_t a = expr(depth + 1);
        if (a < 0) return -1;
        if (!eat(',')) return fail("expected ',' but found " + found());
        int32_t b = expr(depth + 1);
        if (b < 0) return -1;
        if (!eat(')')) return fail("expected ')' but found " + found());
        return node(k, 0, a, b);
      }
      pos_ = afterName;
      if (name == "ceil_div" || name == "min" || name == "max") {
        pos_ = start;
        return fail("'" + std::string(name) + "' is a function and needs two arguments");
      }
      if (name.size() > 255) {
        pos_ = start;
        return fail("name is longer than 255 characters");
      }
      uint64_t index = e_.refs_.size();
      for (size_t i = 0; i < e_.refs_.size(); ++i)
        if (e_.refs_[i].name == name) index = i;
      if (index == e_.refs_.size()) e_.refs_.push_back({std::string(name), static_cast<uint32_t>(start + 1)});
      return node(Kind::Name, index);
    }
    return fail("expected a number, a parameter name or '(' but found " + found());
  }

  std::string_view s_;
  size_t pos_ = 0;
  Expr e_;
  Error err_;
};

Expr::Expr(uint64_t constant) { nodes_.push_back({Kind::Const, constant, -1, -1}); }

Expr Expr::param(std::string name) {
  Expr e;
  e.nodes_[0] = {Kind::Name, 0, -1, -1};
  e.refs_.push_back({std::move(name), 0});
  return e;
}

// a's nodes, then b's (indices shifted, names merged into a's refs in first-use order), then
// the new root: the same nodes and refs the parser builds for "a OP b".
Expr Expr::combine(Kind k, const Expr& a, const Expr& b) {
  Expr e = a;
  int32_t shift = static_cast<int32_t>(e.nodes_.size());
  for (Node nd : b.nodes_) {
    if (nd.lhs >= 0) nd.lhs += shift;
    if (nd.rhs >= 0) nd.rhs += shift;
    if (nd.kind == Kind::Name) {
      const Ref& r = b.refs_[nd.value];
      size_t i = 0;
      while (i < e.refs_.size() && e.refs_[i].name != r.name) ++i;
      if (i == e.refs_.size()) e.refs_.push_back(r);
      nd.value = i;
    }
    e.nodes_.push_back(nd);
  }
  e.nodes_.push_back({k, 0, a.root_, b.root_ + shift});
  e.root_ = static_cast<int32_t>(e.nodes_.size() - 1);
  return e;
}

Result<Expr> Expr::parse(std::string_view text) {
  ExprParser p(text);
  return p.run();
}

std::optional<uint64_t> Expr::constantValue() const {
  if (!refs_.empty()) return std::nullopt;
  auto v = eval(root_, {});
  if (!v) return std::nullopt;
  return *v;
}

// ---- printing ---------------------------------------------------------------------------------

int Expr::precedence(Kind k) {
  switch (k) {
    case Kind::Add: case Kind::Sub: return 1;
    case Kind::Mul: case Kind::Div: case Kind::Rem: return 2;
    default: return 3;
  }
}

const char* Expr::spelling(Kind k) {
  static constexpr const char* kText[] = {"", "", "+", "-", "*", "/", "%", "ceil_div", "min", "max"};
  return kText[static_cast<size_t>(k)];
}

std::string Expr::textOf(int32_t n, int parentPrec, bool rightSide) const {
  const Node& nd = nodes_[static_cast<size_t>(n)];
  switch (nd.kind) {
    case Kind::Const: return std::to_string(nd.value);
    case Kind::Name: return refs_[nd.value].name;
    case Kind::CeilDiv:
    case Kind::Min:
    case Kind::Max:
      return std::string(spelling(nd.kind)) + "(" + textOf(nd.lhs, 0, false) + ", " +
             textOf(nd.rhs, 0, false) + ")";
    default: break;
  }
  int prec = precedence(nd.kind);
  std::string s = textOf(nd.lhs, prec, false) + " " + spelling(nd.kind) + " " + textOf(nd.rhs, prec, true);
  bool paren = prec < parentPrec || (rightSide && prec == parentPrec);
  return paren ? "(" + s + ")" : s;
}

std::string Expr::text() const { return textOf(root_, 0, false); }

std::string Expr::cppOf(int32_t n, std::string_view ev, const std::function<std::string(std::string_view)>& spell) const {
  const Node& nd = nodes_[static_cast<size_t>(n)];
  static constexpr const char* kFn[] = {"", "", "add", "sub", "mul", "div", "rem", "ceil_div", "min", "max"};
  static_assert(sizeof(kFn) / sizeof(kFn[0]) == static_cast<size_t>(Kind::Max) + 1);
  switch (nd.kind) {
    case Kind::Const: return "UINT64_C(" + std::to_string(nd.value) + ")";
    case Kind::Name: return spell(refs_[nd.value].name);
    default:
      return std::string(ev) + "." + kFn[static_cast<size_t>(nd.kind)] + "(" + cppOf(nd.lhs, ev, spell) + ", " +
             cppOf(nd.rhs, ev, spell) + ")";
  }
}

std::string Expr::toCpp(std::string_view ev, const std::function<std::string(std::string_view)>& spell) const {
  return cppOf(root_, ev, spell);
}

// ---- evaluation -------------------------------------------------------------------------------

Result<uint64_t> Expr::eval(int32_t n, std::span<const uint64_t> values) const {
  const Node& nd = nodes_[static_cast<size_t>(n)];
  if (nd.kind == Kind::Const) return nd.value;
  if (nd.kind == Kind::Name) {
    if (nd.value >= values.size()) return Error{"no value for '" + refs_[nd.value].name + "'"};
    return values[nd.value];
  }
  Result<uint64_t> a = eval(nd.lhs, values);
  if (!a) return a;
  Result<uint64_t> b = eval(nd.rhs, values);
  if (!b) return b;
  uint64_t x = *a, y = *b, r = 0;
  auto expr = [&] { return textOf(n, 0, false); };  // only built for error messages
  switch (nd.kind) {
    case Kind::Add:
      if (__builtin_add_overflow(x, y, &r)) return Error{"'" + expr() + "' overflows 64 bits"};
      return r;
    case Kind::Sub:
      if (y > x) return Error{"'" + expr() + "' is negative (" + std::to_string(x) + " - " + std::to_string(y) + ")"};
      return x - y;
    case Kind::Mul:
      if (__builtin_mul_overflow(x, y, &r)) return Error{"'" + expr() + "' overflows 64 bits"};
      return r;
    case Kind::Div:
    case Kind::Rem:
    case Kind::CeilDiv:
      if (y == 0) return Error{"'" + expr() + "' divides by zero"};
      if (nd.kind == Kind::Div) return x / y;
      if (nd.kind == Kind::Rem) return x % y;
      return x / y + (x % y != 0 ? 1 : 0);
    case Kind::Min: return x < y ? x : y;
    case Kind::Max: return x > y ? x : y;
    default: return Error{"malformed expression"};
  }
}

Result<uint64_t> Expr::evaluate(std::span<const uint64_t> values) const { return eval(root_, values); }

Result<Expr::Bound> Expr::bound(int32_t n) const {
  const Node& nd = nodes_[static_cast<size_t>(n)];
  if (nd.kind == Kind::Const) return Bound{nd.value, true};
  if (nd.kind == Kind::Name) return Bound{0, false};
  Result<Bound> a = bound(nd.lhs);
  if (!a) return a;
  Result<Bound> b = bound(nd.rhs);
  if (!b) return b;
  if (a->exact && b->exact) {  // a constant part: its value, or the error every evaluation meets
    Result<uint64_t> v = eval(n, {});
    if (!v) return v.error();
    return Bound{*v, true};
  }
  uint64_t x = a->least, y = b->least, r = 0;
  auto always = [&](const char* what) { return Error{"'" + textOf(n, 0, false) + "' " + what + " for every argument value"}; };
  switch (nd.kind) {
    case Kind::Add:
      if (__builtin_add_overflow(x, y, &r)) return always("overflows 64 bits");
      return Bound{r, false};
    case Kind::Mul:
      if (__builtin_mul_overflow(x, y, &r)) return always("overflows 64 bits");
      return Bound{r, false};
    case Kind::Sub: return Bound{b->exact && x >= y ? x - y : 0, false};
    case Kind::Div:
    case Kind::Rem:
    case Kind::CeilDiv:
      if (b->exact && y == 0) return always("divides by zero");
      if (!b->exact || nd.kind == Kind::Rem) return Bound{0, false};
      return Bound{nd.kind == Kind::Div ? x / y : x / y + (x % y != 0 ? 1 : 0), false};
    case Kind::Min: return Bound{std::min(x, y), false};
    case Kind::Max: return Bound{std::max(x, y), false};
    default: return Error{"malformed expression"};
  }
}

Result<uint64_t> Expr::leastValue() const {
  Result<Bound> b = bound(root_);
  if (!b) return b.error();
  return b->least;
}

// ---- rules ------------------------------------------------------------------------------------

std::optional<uint32_t> tensorMapDataType(ParamType::Scalar element) {
  using S = ParamType::Scalar;
  switch (element) {
    case S::B8: case S::U8: case S::S8: return 0;     // UINT8
    case S::B16: case S::U16: case S::S16: return 1;  // UINT16
    case S::B32: case S::U32: return 2;               // UINT32
    case S::S32: return 3;                            // INT32
    case S::B64: case S::U64: return 4;               // UINT64
    case S::S64: return 5;                            // INT64
    case S::F16: return 6;
    case S::F32: return 7;
    case S::F64: return 8;
    case S::BF16: return 9;
    case S::Pred: case S::Ptr: case S::TensorMap: return std::nullopt;
    case S::E4M3: case S::E5M2: return std::nullopt;  // codes go in maps of u8
  }
  return std::nullopt;
}

unsigned tensorMapElementBytes(ParamType::Scalar element) {
  static constexpr unsigned kBytes[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2};  // by CUtensorMapDataType
  std::optional<uint32_t> t = tensorMapDataType(element);
  return t ? kBytes[*t] : 0;
}

const char* tensorMapStrideName(size_t d) { return d == 0 ? "row_stride" : "plane_stride"; }

std::string describe(const TensorMapRule& map) {
  std::string out = map.param + " = " + map.source + " as " + elementName(map.element) + " [";
  for (size_t d = 0; d < map.dims.size(); ++d) out += (d ? ", " : "") + map.dims[d].text();
  out += "]";
  for (size_t d = 0; d < map.strides.size(); ++d) out += " " + std::string(tensorMapStrideName(d)) + " " + map.strides[d].text();
  out += " box [";
  for (size_t d = 0; d < map.box.size(); ++d) out += (d ? ", " : "") + std::to_string(map.box[d]);
  return out + "] swizzle " + std::to_string(map.swizzle);
}

std::string describe(const LaunchRule& rule) {
  std::string out = "block [";
  for (size_t i = 0; i < rule.block.size(); ++i) out += (i ? ", " : "") + std::to_string(rule.block[i]);
  out += "], grid [";
  for (size_t i = 0; i < rule.grid.size(); ++i) out += (i ? ", " : "") + rule.grid[i].text();
  return out + "], dynamic_shared " + rule.dynamicShared.text();
}

std::string RuleError::where() const {
  switch (part) {
    case Part::Block: return "block";
    case Part::Grid: return "grid[" + std::to_string(index) + "]";
    case Part::DynamicShared: return "dynamic_shared";
    case Part::TensorMap: return "tensor_maps[" + std::to_string(index) + "]";
  }
  return "?";
}

namespace {

std::optional<RuleError> checkBlock(const LaunchRule& rule) {
  if (rule.block.empty() || rule.block.size() > 3)
    return RuleError{RuleError::Part::Block, 0, {"block must have 1 to 3 dimensions, not " + std::to_string(rule.block.size())}};
  uint64_t threads = 1;
  static constexpr uint32_t kMaxDim[3] = {1024, 1024, 64};
  for (size_t i = 0; i < rule.block.size(); ++i) {
    if (rule.block[i] == 0 || rule.block[i] > kMaxDim[i])
      return RuleError{RuleError::Part::Block, 0, {"block dimension " + std::to_string(i) + " must be between 1 and " +
                                 std::to_string(kMaxDim[i]) + ", not " + std::to_string(rule.block[i])}};
    threads *= rule.block[i];
  }
  if (threads > 1024) return RuleError{RuleError::Part::Block, 0, {"block has " + std::to_string(threads) + " threads; the limit is 1024"}};
  return std::nullopt;
}

const Param* paramNamed(std::span<const Param> params, std::string_view name) {
  for (const Param& p : params)
    if (p.name == name) return &p;
  return nullptr;
}

bool isTensorMap(const ParamType& t) { return t.scalar == ParamType::Scalar::TensorMap && t.lanes == 1; }

// What checkRule requires of one tensor-map rule beyond the names its expressions read.
std::optional<std::string> checkTensorMap(const TensorMapRule& m, std::span<const Param> params) {
  const Param* p = paramNamed(params, m.param);
  if (!p) return "'" + m.param + "' is not a parameter of the kernel";
  if (!isTensorMap(p->type)) return "parameter '" + m.param + "' has type '" + p->type.name() + "', not 'tmap'";
  const Param* src = paramNamed(params, m.source);
  if (!src) return m.param + ": the source '" + m.source + "' is not a parameter of the kernel";
  if (!src->type.isPointer() || src->type.space != ParamType::Space::Global)
    return m.param + ": the source '" + m.source + "' has type '" + src->type.name() + "', not 'ptr.global'";
  const unsigned elementBytes = tensorMapElementBytes(m.element);
  if (elementBytes == 0) return m.param + ": TMA has no element type '" + elementName(m.element) + "'";
  const size_t rank = m.dims.size();
  if (rank < 2 || rank > kMaxTensorMapRank)
    return m.param + ": it has " + std::to_string(rank) + " extents; a tensor map has 2 or 3";
  if (m.strides.size() != rank - 1)
    return m.param + ": it has " + std::to_string(m.strides.size()) + " strides for " + std::to_string(rank) +
           " extents (" + (rank == 2 ? "row_stride" : "row_stride and plane_stride") + ")";
  if (m.box.size() != rank)
    return m.param + ": its box has " + std::to_string(m.box.size()) + " extents for a tensor of " + std::to_string(rank);
  for (unsigned d = 0; d < rank; ++d)
    if (m.box[d] < 1 || m.box[d] > 256)
      return m.param + ": box extent " + std::to_string(d) + " is " + std::to_string(m.box[d]) + "; it must be 1 to 256";
  if (m.swizzle != 0 && m.swizzle != 32 && m.swizzle != 64 && m.swizzle != 128)
    return m.param + ": swizzle is " + std::to_string(m.swizzle) + "; it must be 0, 32, 64 or 128 bytes";
  const uint64_t innerBytes = uint64_t{m.box[0]} * elementBytes;
  if (innerBytes % 16 != 0)
    return m.param + ": the box's inner extent is " + std::to_string(innerBytes) + " bytes, not a multiple of 16";
  if (m.swizzle != 0 && innerBytes > m.swizzle)
    return m.param + ": the box's inner extent is " + std::to_string(innerBytes) + " bytes, more than the " +
           std::to_string(m.swizzle) + "-byte swizzle span";
  for (size_t d = 0; d < m.strides.size(); ++d)
    if (std::optional<uint64_t> stride = m.strides[d].constantValue(); stride && *stride % 16 != 0)
      return m.param + ": " + tensorMapStrideName(d) + " is " + std::to_string(*stride) + " bytes, not a multiple of 16";
  return std::nullopt;
}

}  // namespace

std::optional<RuleError> checkRule(const LaunchRule& rule, std::span<const Param> params) {
  if (auto bad = checkBlock(rule)) return bad;
  if (rule.grid.empty() || rule.grid.size() > 3)
    return RuleError{RuleError::Part::Grid, 0, {"grid must have 1 to 3 dimensions, not " + std::to_string(rule.grid.size())}};
  auto checkNames = [&](const Expr& e, RuleError::Part part, unsigned index) -> std::optional<RuleError> {
    for (const Expr::Ref& r : e.refs()) {
      const Param* p = nullptr;
      for (const Param& q : params)
        if (q.name == r.name) p = &q;
      if (!p) return RuleError{part, index, {"'" + r.name + "' is not a parameter of the kernel", r.column}};
      if (p->type.integerBytes() == 0)
        return RuleError{part, index, {"parameter '" + r.name + "' has type '" + p->type.name() +
                                     "'; launch rules may only read integer parameters", r.column}};
    }
    return std::nullopt;
  };
  // A part whose least value is over `limit` (or that fails whatever the arguments) never launches.
  auto checkLeast = [](const Expr& e, RuleError::Part part, unsigned index, uint64_t limit,
                       const char* what) -> std::optional<RuleError> {
    Result<uint64_t> least = e.leastValue();
    if (!least) return RuleError{part, index, least.error()};
    if (*least <= limit) return std::nullopt;
    return RuleError{part, index, {"'" + e.text() + "' is " + (e.constantValue() ? "" : "at least ") +
                                   std::to_string(*least) + ", over the limit of " + std::to_string(limit) + " " + what}};
  };
  for (size_t i = 0; i < rule.grid.size(); ++i) {
    auto part = RuleError::Part::Grid;
    auto index = static_cast<unsigned>(i);
    if (auto e = checkNames(rule.grid[i], part, index)) return e;
    if (auto e = checkLeast(rule.grid[i], part, index, i == 0 ? kMaxGridX : kMaxGridYZ, "blocks")) return e;
  }
  if (auto e = checkNames(rule.dynamicShared, RuleError::Part::DynamicShared, 0)) return e;
  if (auto e = checkLeast(rule.dynamicShared, RuleError::Part::DynamicShared, 0, UINT32_MAX, "bytes")) return e;
  for (size_t i = 0; i < rule.tensorMaps.size(); ++i) {
    const TensorMapRule& m = rule.tensorMaps[i];
    auto part = RuleError::Part::TensorMap;
    auto index = static_cast<unsigned>(i);
    if (auto bad = checkTensorMap(m, params)) return RuleError{part, index, {*bad}};
    for (size_t j = 0; j < i; ++j)
      if (rule.tensorMaps[j].param == m.param) return RuleError{part, index, {"parameter '" + m.param + "' has two tensor-map rules"}};
    for (const std::vector<Expr>* list : {&m.dims, &m.strides})
      for (const Expr& e : *list)
        if (auto bad = checkNames(e, part, index)) return bad;
    for (const Expr& e : m.dims)
      if (auto bad = checkLeast(e, part, index, kMaxTensorMapDim, "elements")) return bad;
    for (const Expr& e : m.strides)
      if (auto bad = checkLeast(e, part, index, kMaxTensorMapStride - 1, "bytes")) return bad;
  }
  for (const Param& p : params)
    if (isTensorMap(p.type) &&
        std::none_of(rule.tensorMaps.begin(), rule.tensorMaps.end(), [&](const TensorMapRule& m) { return m.param == p.name; }))
      return RuleError{RuleError::Part::TensorMap, static_cast<unsigned>(rule.tensorMaps.size()),
                       {"the tmap parameter '" + p.name + "' has no tensor-map rule to fill it"}};
  return std::nullopt;
}

std::optional<Error> checkExtent(const Param& p, std::span<const Param> params) {
  if (!p.extent) return std::nullopt;
  if (!p.type.isPointer() || !p.element || scalarBytes(*p.element) == 0)
    return Error{"an extent needs a pointer parameter with an element type"};
  for (const Expr::Ref& r : p.extent->refs()) {
    const Param* q = nullptr;
    for (const Param& x : params)
      if (x.name == r.name) q = &x;
    if (!q) return Error{"'" + r.name + "' is not a parameter of the kernel", r.column};
    if (q->type.integerBytes() == 0)
      return Error{"parameter '" + r.name + "' has type '" + q->type.name() + "'; extents may only read integer parameters",
                   r.column};
  }
  return std::nullopt;
}

Result<BoundRule> bindRule(const LaunchRule& rule, std::span<const Param> params) {
  if (auto bad = checkBlock(rule)) return Error{"block: " + bad->error.message};
  if (rule.grid.empty() || rule.grid.size() > 3) return Error{"grid must have 1 to 3 dimensions"};
  auto slotsOf = [&](const Expr& e, std::vector<BoundRule::Slot>& out) -> std::optional<Error> {
    for (const Expr::Ref& r : e.refs()) {
      size_t i = 0;
      while (i < params.size() && params[i].name != r.name) ++i;
      if (i == params.size()) return Error{"'" + r.name + "' is not a parameter of the kernel"};
      unsigned bytes = params[i].type.integerBytes();
      if (bytes == 0) return Error{"parameter '" + r.name + "' is not an integer"};
      out.push_back({static_cast<uint32_t>(i), static_cast<uint8_t>(bytes), params[i].type.isSignedInteger()});
    }
    return std::nullopt;
  };
  BoundRule b;
  b.rule = &rule;
  for (size_t i = 0; i < rule.grid.size(); ++i)
    if (auto bad = slotsOf(rule.grid[i], b.grid[i])) return Error{"grid[" + std::to_string(i) + "]: " + bad->message};
  if (auto bad = slotsOf(rule.dynamicShared, b.dynamicShared)) return Error{"dynamic_shared: " + bad->message};
  return b;
}

namespace {

Result<uint64_t> evalWithArgs(const Expr& e, std::span<const BoundRule::Slot> slots, const void* const* args) {
  // Launches evaluate rules, so avoid the heap for the usual handful of names.
  constexpr size_t kInline = 16;
  uint64_t inlineValues[kInline];
  std::vector<uint64_t> heapValues(slots.size() > kInline ? slots.size() : 0);
  uint64_t* values = heapValues.empty() ? inlineValues : heapValues.data();
  for (size_t k = 0; k < slots.size(); ++k) {
    const BoundRule::Slot& s = slots[k];
    if (!args || !args[s.param]) return Error{"no argument for parameter '" + e.refs()[k].name + "'"};
    uint64_t raw = 0;
    std::memcpy(&raw, args[s.param], s.bytes);  // little-endian host, as on every CUDA platform
    if (s.isSigned) {
      unsigned shift = 64 - 8 * s.bytes;
      int64_t v = static_cast<int64_t>(raw << shift) >> shift;
      if (v < 0) return Error{"parameter '" + e.refs()[k].name + "' is negative (" + std::to_string(v) + ")"};
      raw = static_cast<uint64_t>(v);
    }
    values[k] = raw;
  }
  return e.evaluate({values, slots.size()});
}

}  // namespace

Result<LaunchDims> evaluate(const BoundRule& b, const void* const* args) {
  const LaunchRule& rule = *b.rule;
  LaunchDims d;
  for (size_t i = 0; i < rule.block.size(); ++i) d.block[i] = rule.block[i];
  for (size_t i = 0; i < rule.grid.size(); ++i) {
    Result<uint64_t> v = evalWithArgs(rule.grid[i], b.grid[i], args);
    if (!v) return Error{"grid[" + std::to_string(i) + "]: " + v.error().message};
    uint64_t limit = i == 0 ? kMaxGridX : kMaxGridYZ;
    if (*v > limit)
      return Error{"grid[" + std::to_string(i) + "] = " + std::to_string(*v) + " exceeds the limit of " + std::to_string(limit)};
    d.grid[i] = static_cast<uint32_t>(*v);
  }
  Result<uint64_t> sh = evalWithArgs(rule.dynamicShared, b.dynamicShared, args);
  if (!sh) return Error{"dynamic_shared: " + sh.error().message};
  if (*sh > UINT32_MAX) return Error{"dynamic_shared = " + std::to_string(*sh) + " bytes does not fit in 32 bits"};
  d.dynamicShared = static_cast<uint32_t>(*sh);
  return d;
}

Result<LaunchDims> evaluate(const LaunchRule& rule, std::span<const Param> params, const void* const* args) {
  Result<BoundRule> b = bindRule(rule, params);
  if (!b) return b.error();
  return evaluate(*b, args);
}

Result<std::vector<TensorMapArgs>> evaluateTensorMaps(const LaunchRule& rule, std::span<const Param> params,
                                                      const void* const* args) {
  std::vector<TensorMapArgs> out;
  auto indexOf = [&](std::string_view name) {
    size_t i = 0;
    while (i < params.size() && params[i].name != name) ++i;
    return i;
  };
  for (const TensorMapRule& m : rule.tensorMaps) {
    auto fail = [&](const std::string& what) { return Error{"tensor map '" + m.param + "': " + what}; };
    if (auto bad = checkTensorMap(m, params)) return fail(*bad);
    TensorMapArgs a;
    a.param = static_cast<uint32_t>(indexOf(m.param));
    a.source = static_cast<uint32_t>(indexOf(m.source));
    if (!args || !args[a.source]) return fail("no argument for parameter '" + m.source + "'");
    std::memcpy(&a.address, args[a.source], sizeof a.address);
    a.dataType = *tensorMapDataType(m.element);
    a.elementBytes = tensorMapElementBytes(m.element);
    auto value = [&](const Expr& e, const char* what) -> Result<uint64_t> {
      std::vector<BoundRule::Slot> slots;
      for (const Expr::Ref& r : e.refs()) {
        size_t i = indexOf(r.name);
        if (i == params.size()) return Error{"'" + r.name + "' is not a parameter of the kernel"};
        unsigned bytes = params[i].type.integerBytes();
        if (bytes == 0) return Error{"parameter '" + r.name + "' is not an integer"};
        slots.push_back({static_cast<uint32_t>(i), static_cast<uint8_t>(bytes), params[i].type.isSignedInteger()});
      }
      Result<uint64_t> v = evalWithArgs(e, slots, args);
      if (!v) return Error{std::string(what) + ": " + v.error().message};
      return v;
    };
    a.rank = static_cast<uint32_t>(m.dims.size());
    for (unsigned d = 0; d < a.rank; ++d) {
      const std::string name = "dims[" + std::to_string(d) + "]";
      Result<uint64_t> v = value(m.dims[d], name.c_str());
      if (!v) return fail(v.error().message);
      if (*v < 1 || *v > kMaxTensorMapDim)
        return fail(name + " = " + std::to_string(*v) + " is outside 1 to " + std::to_string(kMaxTensorMapDim));
      a.dims[d] = *v;
      a.box[d] = m.box[d];
    }
    for (unsigned d = 0; d + 1 < a.rank; ++d) {
      Result<uint64_t> stride = value(m.strides[d], tensorMapStrideName(d));
      if (!stride) return fail(stride.error().message);
      if (*stride % 16 != 0 || *stride >= kMaxTensorMapStride)
        return fail(std::string(tensorMapStrideName(d)) + " = " + std::to_string(*stride) +
                    " bytes is not a multiple of 16 below 2^40");
      a.strides[d] = *stride;
    }
    if (a.address % 16 != 0)
      return fail("the address of '" + m.source + "' (" + std::to_string(a.address) + ") is not 16-byte aligned");
    a.swizzle = m.swizzle == 0 ? 0 : m.swizzle == 32 ? 1 : m.swizzle == 64 ? 2 : 3;
    out.push_back(a);
  }
  return out;
}

Result<std::optional<uint64_t>> extentBytes(const Param& p, std::span<const Param> params, const void* const* args) {
  if (!p.extent || !p.element) return std::optional<uint64_t>{};
  std::vector<BoundRule::Slot> slots;
  for (const Expr::Ref& r : p.extent->refs()) {
    size_t i = 0;
    while (i < params.size() && params[i].name != r.name) ++i;
    if (i == params.size() || params[i].type.integerBytes() == 0)
      return Error{"extent of '" + p.name + "': '" + r.name + "' is not an integer parameter of the kernel"};
    slots.push_back({static_cast<uint32_t>(i), static_cast<uint8_t>(params[i].type.integerBytes()),
                     params[i].type.isSignedInteger()});
  }
  Result<uint64_t> n = evalWithArgs(*p.extent, slots, args);
  if (!n) return Error{"extent of '" + p.name + "' (" + p.extent->text() + "): " + n.error().message};
  const uint64_t bytes = scalarBytes(*p.element);
  if (*n > UINT64_MAX / bytes) return Error{"extent of '" + p.name + "' (" + p.extent->text() + ") overflows 64 bits in bytes"};
  return std::optional<uint64_t>{*n * bytes};
}

}  // namespace tn::bundle
