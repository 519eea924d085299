#include "ir/Parser.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include "ir/Float16.h"

namespace tn::ir {

namespace {

enum class Tok : uint8_t {
  End, Newline, Ident, Value, BlockRef, Symbol, Number,
  LParen, RParen, LBrace, RBrace, LBracket, RBracket, Comma, Colon, Equal, Arrow, Error
};

const char* tokName(Tok t) {
  switch (t) {
    case Tok::End: return "end of file";
    case Tok::Newline: return "end of line";
    case Tok::Ident: return "identifier";
    case Tok::Value: return "value (%name)";
    case Tok::BlockRef: return "block (^name)";
    case Tok::Symbol: return "symbol (@name)";
    case Tok::Number: return "number";
    case Tok::LParen: return "'('";
    case Tok::RParen: return "')'";
    case Tok::LBrace: return "'{'";
    case Tok::RBrace: return "'}'";
    case Tok::LBracket: return "'['";
    case Tok::RBracket: return "']'";
    case Tok::Comma: return "','";
    case Tok::Colon: return "':'";
    case Tok::Equal: return "'='";
    case Tok::Arrow: return "'->'";
    case Tok::Error: return "invalid character";
  }
  return "?";
}

struct Token {
  Tok kind = Tok::End;
  std::string_view text;  // for Value/BlockRef/Symbol: the name without its sigil
  uint32_t line = 0, col = 0;
};

bool isIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool isIdentChar(char c) { return isIdentStart(c) || (c >= '0' && c <= '9') || c == '.'; }
bool isDigit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  explicit Lexer(std::string_view s) : src_(s) {}

  Token next() {
    skipSpaceAndComments();
    Token t;
    t.line = line_;
    t.col = col_;
    if (pos_ >= src_.size()) return t;
    char c = src_[pos_];
    size_t start = pos_;
    auto single = [&](Tok k) {
      advance();
      t.kind = k;
      t.text = src_.substr(start, 1);
      return t;
    };
    switch (c) {
      case '\n': return single(Tok::Newline);
      case '(': return single(Tok::LParen);
      case ')': return single(Tok::RParen);
      case '{': return single(Tok::LBrace);
      case '}': return single(Tok::RBrace);
      case '[': return single(Tok::LBracket);
      case ']': return single(Tok::RBracket);
      case ',': return single(Tok::Comma);
      case ':': return single(Tok::Colon);
      case '=': return single(Tok::Equal);
      default: break;
    }
    if (c == '-' && pos_ + 1 < src_.size() && src_[pos_ + 1] == '>') {
      advance();
      advance();
      t.kind = Tok::Arrow;
      t.text = src_.substr(start, 2);
      return t;
    }
    if (c == '%' || c == '^' || c == '@') {
      advance();
      size_t nameStart = pos_;
      while (pos_ < src_.size() && isIdentChar(src_[pos_])) advance();
      t.kind = c == '%' ? Tok::Value : c == '^' ? Tok::BlockRef : Tok::Symbol;
      t.text = src_.substr(nameStart, pos_ - nameStart);
      if (t.text.empty()) {
        t.kind = Tok::Error;
        t.text = src_.substr(start, 1);
      }
      return t;
    }
    if (isIdentStart(c)) {
      while (pos_ < src_.size() && isIdentChar(src_[pos_])) advance();
      t.kind = Tok::Ident;
      t.text = src_.substr(start, pos_ - start);
      return t;
    }
    if (isDigit(c) || ((c == '-' || c == '+') && pos_ + 1 < src_.size() && isDigit(src_[pos_ + 1]))) {
      advance();
      bool hex = false;
      while (pos_ < src_.size()) {
        char d = src_[pos_];
        if (d == 'x' || d == 'X') hex = true;
        bool signAfterExp = !hex && (d == '+' || d == '-') && (src_[pos_ - 1] == 'e' || src_[pos_ - 1] == 'E');
        if (!(isIdentChar(d) || signAfterExp)) break;
        advance();
      }
      t.kind = Tok::Number;
      t.text = src_.substr(start, pos_ - start);
      return t;
    }
    advance();
    t.kind = Tok::Error;
    t.text = src_.substr(start, 1);
    return t;
  }

 private:
  void advance() {
    if (src_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }
  void skipSpaceAndComments() {
    while (pos_ < src_.size()) {
      char c = src_[pos_];
      if (c == ' ' || c == '\t' || c == '\r') {
        advance();
      } else if (c == '/' && pos_ + 1 < src_.size() && src_[pos_ + 1] == '/') {
        while (pos_ < src_.size() && src_[pos_] != '\n') advance();
      } else {
        break;
      }
    }
  }

  std::string_view src_;
  size_t pos_ = 0;
  uint32_t line_ = 1, col_ = 1;
};

struct ParseError {};

// A literal branch argument, made a const once the target block (and its parameter's type) is known.
struct PendingLiteral {
  BlockId block;
  InstId inst;
  size_t succ, arg;
  Token tok;
};

// A call whose callee is looked up once the whole module is read (functions may come later).
struct PendingCall {
  bool inFunction;
  size_t owner;  // index into Module::functions or Module::kernels
  InstId inst;
  std::string name;
  SourceLoc loc;
};

struct PendingSucc {
  InstId inst;
  size_t index;
  std::string_view name;
  SourceLoc loc;
};

class Parser {
 public:
  Parser(std::string_view text, const std::string& file, Diagnostics& diags)
      : lex_(text), fileName_(file), diags_(diags) {
    mod_.files.push_back(file);
    fileId_ = 1;
    tok_ = lex_.next();
  }

  std::optional<Module> run() {
    try {
      parseModule();
    } catch (const ParseError&) {
      return std::nullopt;
    }
    return std::move(mod_);
  }

 private:
  SourceLoc loc(const Token& t) const { return {fileId_, t.line, t.col}; }

  [[noreturn]] void fail(const Token& at, const std::string& msg) {
    diags_.report(Severity::Error, fileName_, loc(at), msg);
    throw ParseError{};
  }
  [[noreturn]] void failAt(SourceLoc l, const std::string& msg) {
    diags_.report(Severity::Error, fileName_, l, msg);
    throw ParseError{};
  }

  Token take() {
    Token t = tok_;
    if (t.kind == Tok::Error) fail(t, "unexpected character '" + std::string(t.text) + "'");
    tok_ = lex_.next();
    return t;
  }
  bool at(Tok k) const { return tok_.kind == k; }
  bool atIdent(std::string_view s) const { return tok_.kind == Tok::Ident && tok_.text == s; }
  Token expect(Tok k, const char* what) {
    if (tok_.kind != k)
      fail(tok_, std::string("expected ") + what + ", found " + describe(tok_));
    return take();
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Tok::End:
      case Tok::Newline: return tokName(t.kind);
      case Tok::Value: return "'%" + std::string(t.text) + "'";
      case Tok::BlockRef: return "'^" + std::string(t.text) + "'";
      case Tok::Symbol: return "'@" + std::string(t.text) + "'";
      default: return "'" + std::string(t.text) + "'";
    }
  }
  void skipNewlines() {
    while (at(Tok::Newline)) take();
  }
  void endOfLine() {
    if (at(Tok::End)) return;
    if (!at(Tok::Newline)) fail(tok_, "expected end of line, found " + describe(tok_));
    take();
  }

  uint64_t parseUInt(const Token& t, uint64_t max, const char* what) {
    if (t.kind != Tok::Number) fail(t, std::string("expected ") + what + ", found " + describe(t));
    std::string s(t.text);
    char* end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(s.c_str(), &end, 0);
    if (s[0] == '-' || s[0] == '+' || errno || *end || v > max)
      fail(t, std::string("invalid ") + what + " '" + s + "'");
    return v;
  }

  Type parseTypeTok() {
    Token t = tok_;
    if (t.kind != Tok::Ident) fail(t, "expected a type, found " + describe(t));
    take();
    auto ty = parseType(t.text);
    if (!ty) fail(t, "unknown type '" + std::string(t.text) + "'");
    return *ty;
  }

  void parseModule() {
    skipNewlines();
    bool sawTarget = false, sawPtx = false;
    while (atIdent("target") || atIdent("ptx")) {
      Token kw = take();
      Token v = take();
      if (kw.text == "target") {
        if (sawTarget) fail(kw, "duplicate 'target' line");
        sawTarget = true;
        auto tgt = v.kind == Tok::Ident ? Target::parse(v.text) : std::nullopt;
        if (!tgt) fail(v, "invalid target '" + std::string(v.text) + "' (expected sm_XY, e.g. sm_80)");
        mod_.target = *tgt;
      } else {
        if (sawPtx) fail(kw, "duplicate 'ptx' line");
        sawPtx = true;
        std::string s(v.text);
        if (v.kind != Tok::Number || s.size() < 3 || s.find('.') == std::string::npos)
          fail(v, "invalid PTX ISA version '" + s + "' (expected MAJOR.MINOR, e.g. 7.8)");
        size_t dot = s.find('.');
        char* e1 = nullptr;
        char* e2 = nullptr;
        std::string majorText = s.substr(0, dot);
        unsigned long major = std::strtoul(majorText.c_str(), &e1, 10);
        std::string minorText = s.substr(dot + 1);
        unsigned long minor = std::strtoul(minorText.c_str(), &e2, 10);
        if (*e1 || *e2 || minorText.size() != 1 || dot == 0 || major > 20)
          fail(v, "invalid PTX ISA version '" + s + "' (expected MAJOR.MINOR, e.g. 7.8)");
        mod_.ptx = static_cast<unsigned>(major * 10 + minor);
      }
      endOfLine();
      skipNewlines();
    }
    if (!sawPtx) mod_.ptx = std::max(70u, mod_.target.minPtx());
    while (!at(Tok::End)) {
      if (!atIdent("kernel") && !atIdent("func")) fail(tok_, "expected 'kernel' or 'func', found " + describe(tok_));
      parseKernel(atIdent("func"));
      skipNewlines();
    }
    for (const PendingCall& c : pendingCalls_) {
      auto callee = std::find_if(mod_.functions.begin(), mod_.functions.end(),
                                 [&](const Kernel& f) { return f.name == c.name; });
      if (callee == mod_.functions.end()) failAt(c.loc, "call to undefined function '@" + c.name + "'");
      Kernel& caller = c.inFunction ? mod_.functions[c.owner] : mod_.kernels[c.owner];
      caller.inst(c.inst).symbol = static_cast<int32_t>(callee - mod_.functions.begin());
    }
  }

  Dim3 parseDim() {
    expect(Tok::LParen, "'('");
    unsigned v[3] = {1, 1, 1};
    for (int i = 0; i < 3; ++i) {
      v[i] = static_cast<unsigned>(parseUInt(take(), 1u << 20, "thread count"));
      if (v[i] == 0) fail(tok_, "thread counts must be positive");
      if (!at(Tok::Comma)) break;
      if (i == 2) fail(tok_, "at most three dimensions");
      take();
    }
    expect(Tok::RParen, "')'");
    return {v[0], v[1], v[2]};
  }

  // '(' INT ')' of minnctapersm / maxnreg; the verifier checks the range.
  unsigned parseCount(const char* what) {
    expect(Tok::LParen, "'('");
    auto v = static_cast<unsigned>(parseUInt(take(), 1u << 20, what));
    expect(Tok::RParen, "')'");
    return v;
  }

  // A kernel, or with `function` a device function: `func @name(params) [-> TYPE] { blocks }`.
  void parseKernel(bool function) {
    Token kw = take();
    Token name = expect(Tok::Symbol, function ? "function name (@name)" : "kernel name (@name)");
    for (const std::vector<Kernel>* list : {&mod_.kernels, &mod_.functions})
      for (const Kernel& other : *list)
        if (other.name == name.text)
          fail(name, std::string(other.function ? "a function" : "a kernel") + " named '@" + std::string(name.text) +
                         "' is already defined");
    std::vector<Kernel>& list = function ? mod_.functions : mod_.kernels;
    list.emplace_back();
    k_ = &list.back();
    k_->function = function;
    owner_ = list.size() - 1;
    k_->name = std::string(name.text);
    k_->loc = loc(kw);
    valueByName_.clear();
    pendingValues_.clear();
    pendingSuccs_.clear();
    pendingLiterals_.clear();
    blockByName_.clear();

    expect(Tok::LParen, "'('");
    if (!at(Tok::RParen)) {
      while (true) {
        Token p = expect(Tok::Value, "parameter (%name)");
        expect(Tok::Colon, "':'");
        Type t = parseTypeTok();
        unsigned align = 0;
        if (atIdent("align")) {
          take();
          Token a = take();
          align = static_cast<unsigned>(parseUInt(a, 4096, "alignment"));
          if (!std::has_single_bit(align)) fail(a, "alignment must be a power of two");
          if (!t.isPtr()) fail(a, "only pointer parameters take an alignment");
        }
        defineValue(p, k_->addParam(t, std::string(p.text), align));
        if (!at(Tok::Comma)) break;
        take();
      }
    }
    expect(Tok::RParen, "')'");
    if (function && at(Tok::Arrow)) {
      take();
      k_->returns = parseTypeTok();
    }
    while (!function && at(Tok::Ident)) {
      Token a = take();
      if (a.text == "reqntid") {
        if (k_->reqntid) fail(a, "duplicate reqntid");
        k_->reqntid = parseDim();
      } else if (a.text == "maxntid") {
        if (k_->maxntid) fail(a, "duplicate maxntid");
        k_->maxntid = parseDim();
      } else if (a.text == "minnctapersm") {
        if (k_->minnctapersm) fail(a, "duplicate minnctapersm");
        k_->minnctapersm = parseCount("block count");
      } else if (a.text == "maxnreg") {
        if (k_->maxnreg) fail(a, "duplicate maxnreg");
        k_->maxnreg = parseCount("register count");
      } else {
        fail(a, "unknown kernel attribute '" + std::string(a.text) +
                    "' (expected reqntid, maxntid, minnctapersm or maxnreg)");
      }
    }
    expect(Tok::LBrace, "'{'");
    endOfLine();
    skipNewlines();
    while (!function && atIdent("shared")) {
      parseShared();
      skipNewlines();
    }
    while (!function && atIdent("table")) {
      parseTable();
      skipNewlines();
    }
    if (!at(Tok::BlockRef)) fail(tok_, "expected a block label (^name:), found " + describe(tok_));
    while (at(Tok::BlockRef)) parseBlock();
    Token close = expect(Tok::RBrace, "'}' or an instruction");
    finishKernel(close);
    if (!at(Tok::End)) endOfLine();
  }

  void parseShared() {
    take();
    Token name = expect(Tok::Symbol, "shared array name (@name)");
    if (k_->findShared(name.text) >= 0) fail(name, "duplicate shared array '@" + std::string(name.text) + "'");
    expect(Tok::Colon, "':'");
    Token tt = tok_;
    Type t = parseTypeTok();
    if (t.isPtr() || t.isPred()) fail(tt, "shared arrays hold data types, not '" + typeName(t) + "'");
    SharedDecl d;
    d.name = std::string(name.text);
    d.elem = t;
    d.loc = loc(name);
    d.align = t.bytes();
    expect(Tok::LBracket, "'['");
    if (at(Tok::RBracket)) {
      d.dynamic = true;
    } else {
      Token c = take();
      d.count = parseUInt(c, uint64_t{1} << 32, "element count");
      if (d.count == 0) fail(c, "a static shared array needs a positive element count (write [] for dynamic)");
    }
    expect(Tok::RBracket, "']'");
    if (atIdent("align")) {
      take();
      Token a = take();
      d.align = static_cast<unsigned>(parseUInt(a, 4096, "alignment"));
      if (!std::has_single_bit(d.align)) fail(a, "alignment must be a power of two");
    }
    k_->shared.push_back(d);
    endOfLine();
  }

  // `table @name: T[N] = [v0, v1, ...]`, the values over as many lines as wanted.
  void parseTable() {
    take();
    Token name = expect(Tok::Symbol, "table name (@name)");
    if (k_->findTable(name.text) >= 0) fail(name, "duplicate table '@" + std::string(name.text) + "'");
    expect(Tok::Colon, "':'");
    Token tt = tok_;
    TableDecl d;
    d.elem = parseTypeTok();
    if (!isTableElement(d.elem))
      fail(tt, "tables hold u16, u32, u64, b16, b32 or b64 elements, not '" + typeName(d.elem) + "'");
    d.name = std::string(name.text);
    d.loc = loc(name);
    expect(Tok::LBracket, "'['");
    Token c = take();
    const uint64_t count = parseUInt(c, kMaxTableElements, "table element count (1 .. 1048576)");
    if (count == 0) fail(c, "a table needs at least one element");
    expect(Tok::RBracket, "']'");
    expect(Tok::Equal, "'='");
    expect(Tok::LBracket, "'['");
    const uint64_t max = d.elem.bits() == 64 ? ~uint64_t{0} : (uint64_t{1} << d.elem.bits()) - 1;
    d.values.reserve(count);
    while (true) {
      skipNewlines();
      Token v = take();
      if (d.values.size() == count) fail(v, "table '@" + d.name + "' has more than its " + std::to_string(count) + " elements");
      d.values.push_back(parseUInt(v, max, ("'" + typeName(d.elem) + "' value").c_str()));
      skipNewlines();
      if (!at(Tok::Comma)) break;
      take();
    }
    Token close = expect(Tok::RBracket, "',' or ']'");
    if (d.values.size() != count)
      fail(close, "table '@" + d.name + "' declares " + std::to_string(count) + " elements but lists " +
                      std::to_string(d.values.size()));
    k_->tables.push_back(std::move(d));
    endOfLine();
  }

  void parseBlock() {
    Token label = take();
    std::string name(label.text);
    if (blockByName_.contains(label.text)) fail(label, "duplicate block '^" + name + "'");
    BlockId b = k_->addBlock(name, loc(label));
    blockByName_[label.text] = b;
    if (at(Tok::LParen)) {
      take();
      while (true) {
        Token p = expect(Tok::Value, "block parameter (%name)");
        expect(Tok::Colon, "':'");
        Type t = parseTypeTok();
        defineValue(p, k_->addBlockParam(b, t, std::string(p.text)));
        if (!at(Tok::Comma)) break;
        take();
      }
      expect(Tok::RParen, "')'");
    }
    expect(Tok::Colon, "':' after block label");
    endOfLine();
    skipNewlines();
    while (!at(Tok::BlockRef) && !at(Tok::RBrace) && !at(Tok::End)) {
      parseInst(b);
      skipNewlines();
    }
  }

  // Resolves `name` to a value, allocating a forward-reference placeholder when undefined.
  ValueId useValue(const Token& t) {
    if (auto it = valueByName_.find(t.text); it != valueByName_.end()) return it->second;
    std::string name(t.text);
    ValueId v = k_->addValue(Type::pred(), name, DefKind::Inst, InstId::kNone);
    valueByName_[t.text] = v;
    pendingValues_[name] = loc(t);
    return v;
  }

  void defineValue(const Token& t, ValueId fresh) {
    auto it = valueByName_.find(t.text);
    if (it == valueByName_.end()) {
      valueByName_.emplace(t.text, fresh);
      return;
    }
    std::string name(t.text);
    if (!pendingValues_.contains(name)) fail(t, "redefinition of value '%" + name + "'");
    // A forward reference: move the new definition into the placeholder's slot.
    ValueId placeholder = it->second;
    ValueInfo& info = k_->values[fresh.index];
    k_->values[placeholder.index] = info;
    info.name.clear();
    info.kind = DefKind::Inst;
    info.owner = InstId::kNone;
    redirect(fresh, placeholder);
    pendingValues_.erase(name);
  }

  // Points the definition site of `from` at `to` (used when a forward reference is resolved).
  void redirect(ValueId from, ValueId to) {
    ValueInfo& vi = k_->values[to.index];
    switch (vi.kind) {
      case DefKind::KernelParam: k_->params[vi.owner].value = to; break;
      case DefKind::BlockParam:
        for (ValueId& p : k_->blocks[vi.owner].params)
          if (p == from) p = to;
        break;
      case DefKind::Inst: k_->insts[vi.owner].result = to; break;
    }
  }

  struct Item {
    Token tok;
    size_t argsBegin = 0, argsEnd = 0;  // block call arguments: args_[argsBegin .. argsEnd)
  };

  void parseInst(BlockId b) {
    std::optional<Token> resultTok;
    if (at(Tok::Value)) {
      resultTok = take();
      expect(Tok::Equal, "'=' after result name");
    }
    if (!at(Tok::Ident)) fail(tok_, "expected an op name, found " + describe(tok_));
    Token opTok = take();
    Inst in;
    in.loc = loc(opTok);
    parseOpName(opTok, in);
    const OpInfo& oi = info(in.op);

    std::vector<Item>& items = items_;
    items.clear();
    args_.clear();
    if (!at(Tok::Newline) && !at(Tok::Colon) && !at(Tok::End) && !at(Tok::RBrace)) {
      while (true) {
        Item it{take(), args_.size(), args_.size()};
        bool callee = it.tok.kind == Tok::Symbol && in.op == Op::Call;
        if ((it.tok.kind == Tok::BlockRef || callee) && at(Tok::LParen)) {
          take();
          while (!(callee && at(Tok::RParen))) {
            if (!callee && at(Tok::Number)) args_.push_back(take());  // a literal, typed by the target's parameter
            else args_.push_back(expect(Tok::Value, callee ? "argument (%name)" : "block argument (%name)"));
            it.argsEnd = args_.size();
            if (!at(Tok::Comma)) break;
            take();
          }
          expect(Tok::RParen, "')'");
        }
        items.push_back(it);
        if (!at(Tok::Comma)) break;
        take();
      }
    }
    if (at(Tok::Colon)) {
      take();
      Type first = parseTypeTok();
      if (at(Tok::Arrow)) {
        Token arrow = take();
        if (!(oi.flags & OF_SRCTYPE)) fail(arrow, "'" + std::string(oi.name) + "' takes a single type, not 'S -> T'");
        in.srcType = first;
        in.type = parseTypeTok();
      } else {
        in.type = first;
      }
    }
    endOfLine();

    bool needsType = oi.types != TC_NONE && in.op != Op::Call;  // a call without a result has none
    if (needsType && !in.type) failAt(in.loc, "'" + std::string(oi.name) + "' needs a type annotation (': TYPE')");
    if (!needsType && in.type && in.op != Op::Call) failAt(in.loc, "'" + std::string(oi.name) + "' takes no type annotation");
    if ((oi.flags & OF_SRCTYPE) && !in.srcType)
      failAt(in.loc, "'" + std::string(oi.name) + "' needs a source and result type (': S -> T')");

    size_t wantSuccs = in.op == Op::Br ? 1 : in.op == Op::Cbr ? 2 : 0;
    std::vector<std::pair<size_t, Item*>>& succItems = succItems_;
    succItems.clear();
    size_t position = 0;  // operands and the op's own literal seen so far
    bool sawCallee = false;
    Token calleeTok;
    for (Item& it : items) {
      bool ownLiteral = (oi.flags & OF_IMM) && position == literalPosition(in);
      if (it.tok.kind == Tok::Value || it.tok.kind == Tok::Number) ++position;
      if (it.tok.kind == Tok::Number && !ownLiteral) {
        if (!succItems.empty()) fail(it.tok, "operands must come before branch targets");
        in.operands.push_back(immediateOperand(b, it.tok, in));
        continue;
      }
      switch (it.tok.kind) {
        case Tok::Value:
          if (!succItems.empty()) fail(it.tok, "operands must come before branch targets");
          in.operands.push_back(useValue(it.tok));
          break;
        case Tok::BlockRef:
          if (!wantSuccs) fail(it.tok, "'" + std::string(oi.name) + "' takes no branch targets");
          succItems.push_back({succItems.size(), &it});
          break;
        case Tok::Symbol: {
          if (in.op == Op::Call) {
            if (sawCallee) fail(it.tok, "a call names one function");
            sawCallee = true;
            for (size_t a = it.argsBegin; a < it.argsEnd; ++a) in.operands.push_back(useValue(args_[a]));
            calleeTok = it.tok;
            break;
          }
          if (!(oi.flags & OF_SYMBOL)) fail(it.tok, "'" + std::string(oi.name) + "' takes no symbol");
          if (in.symbol >= 0) fail(it.tok, "only one symbol allowed");
          const bool table = in.op == Op::TableLd;
          int s = table ? k_->findTable(it.tok.text) : k_->findShared(it.tok.text);
          if (s < 0) fail(it.tok, std::string(table ? "unknown table '@" : "unknown shared array '@") + std::string(it.tok.text) + "'");
          in.symbol = s;
          break;
        }
        case Tok::Number:  // the op's own literal; immediate operands were taken above
          parseImm(it.tok, in);
          break;
        default:
          fail(it.tok, "expected an operand, found " + describe(it.tok));
      }
    }
    if ((oi.flags & OF_SYMBOL) && in.symbol < 0)
      failAt(in.loc, "'" + std::string(oi.name) + "' needs " + (in.op == Op::TableLd ? "a table" : "a shared array") + " (@name)");
    if ((oi.flags & OF_IMM) && !sawImm_) failAt(in.loc, "'" + std::string(oi.name) + "' needs a literal operand");
    sawImm_ = false;
    if (in.op == Op::Call && !sawCallee) failAt(in.loc, "'call' needs a function (@name(args))");
    // call's and ret's operands follow the function's signature: the verifier checks them
    bool signature = in.op == Op::Call || (in.op == Op::Ret && k_->function);
    if (!(oi.flags & OF_VARIADIC) && !signature && !operandCountFits(oi, in.operands.size()))
      failAt(in.loc, "'" + std::string(oi.name) + "' takes " +
                         ((oi.flags & OF_OPTLAST) ? std::to_string(oi.operands.size() - 1) + " or " : std::string()) +
                         std::to_string(oi.operands.size()) + " operand(s), got " +
                         std::to_string(in.operands.size()));
    if (succItems.size() != wantSuccs)
      failAt(in.loc, "'" + std::string(oi.name) + "' takes " + std::to_string(wantSuccs) + " branch target(s), got " +
                         std::to_string(succItems.size()));

    std::optional<Type> rt = resultTypeFor(in);
    if (resultTok && !rt) fail(*resultTok, "'" + std::string(oi.name) + "' produces no result");
    in.succs.resize(succItems.size());
    for (auto& [idx, item] : succItems)
      for (size_t a = item->argsBegin; a < item->argsEnd; ++a) {
        if (args_[a].kind == Tok::Number) {
          pendingLiterals_.push_back({b, InstId(static_cast<uint32_t>(k_->insts.size())), idx,
                                      in.succs[idx].args.size(), args_[a]});
          in.succs[idx].args.push_back(ValueId());
        } else {
          in.succs[idx].args.push_back(useValue(args_[a]));
        }
      }
    InstId id = k_->append(b, std::move(in), rt, {});
    const Inst& placed = k_->inst(id);
    if (placed.result && resultTok) {
      k_->value(placed.result).name = std::string(resultTok->text);
      defineValue(*resultTok, placed.result);
    }
    for (auto& [idx, item] : succItems)
      pendingSuccs_.push_back({id, idx, item->tok.text, loc(item->tok)});
    if (sawCallee) pendingCalls_.push_back({k_->function, owner_, id, std::string(calleeTok.text), loc(calleeTok)});
  }

  void parseOpName(const Token& t, Inst& in) {
    std::string_view text = t.text;
    std::optional<Op> op;
    size_t used = 0;
    for (size_t end = text.size();;) {
      if ((op = opByName(text.substr(0, end)))) {
        used = end;
        break;
      }
      size_t dot = end == 0 ? std::string_view::npos : text.rfind('.', end - 1);
      if (dot == std::string_view::npos) break;
      end = dot;
    }
    if (!op) fail(t, "unknown op '" + std::string(text) + "'");
    in.op = *op;
    const OpInfo& oi = info(*op);
    std::string_view rest = text.substr(used);
    uint32_t col = t.col + static_cast<uint32_t>(used);
    while (!rest.empty()) {
      rest.remove_prefix(1);
      ++col;
      size_t dot = rest.find('.');
      std::string_view m = rest.substr(0, dot);
      Token at = t;
      at.col = col;
      auto mod = modByName(m);
      if (!mod || !(oi.mods & (1u << static_cast<unsigned>(modGroup(*mod)))))
        fail(at, "'" + std::string(oi.name) + "' does not take modifier '." + std::string(m) + "'");
      if (in.mod(modGroup(*mod)) != Mod::None)
        fail(at, "conflicting modifier '." + std::string(m) + "' (" + std::string(modGroupName(modGroup(*mod))) +
                     " already given)");
      in.setMod(*mod);
      col += static_cast<uint32_t>(m.size());
      rest = dot == std::string_view::npos ? std::string_view{} : rest.substr(dot);
    }
    for (size_t g = 0; g < kModGroups; ++g)
      if ((oi.required & (1u << g)) && in.mods[g] == Mod::None)
        fail(t, "'" + std::string(oi.name) + "' needs a ." + std::string(modGroupName(static_cast<ModGroup>(g))) +
                    " modifier");
  }

  // Where an op with its own literal (OF_IMM) writes it among its operands: const's value first,
  // the others' where ir::literalPosition says.
  static size_t literalPosition(const Inst& in) {
    return in.op == Op::Const ? 0 : ir::literalPosition(in.op, info(in.op).operands.size());
  }

  // An immediate operand (`add %x, 1 : u32`) becomes an unnamed `const` placed just before the
  // instruction; its type is the one the operand's letter asks for.
  ValueId immediateOperand(BlockId b, const Token& t, const Inst& in) {
    const OpInfo& oi = info(in.op);
    size_t index = in.operands.size();
    bool variadic = (oi.flags & OF_VARIADIC) != 0;
    if (!variadic && index >= oi.operands.size())
      fail(t, "'" + std::string(oi.name) + "' takes " + std::to_string(oi.operands.size()) + " operand(s)");
    std::optional<Type> want;
    switch (variadic ? '*' : oi.operands[index]) {
      case 'T': want = in.type; break;
      case 'S': want = in.srcType; break;
      case '*': want = in.type->element(); break;
      case 'p': want = Type::pred(); break;
      case 'i': want = Type::u32(); break;
      case 'o': want = in.type->bits() == 64 ? Type::u64() : Type::u32(); break;
      default: break;
    }
    if (!want || want->isPtr() || want->isVector())
      fail(t, "operand " + std::to_string(index + 1) + " of '" + std::string(oi.name) +
                  "' cannot be a literal (write a value)");
    auto bits = parseConstLiteral(t.text, *want);
    if (!bits) fail(t, "invalid " + typeName(*want) + " literal '" + std::string(t.text) + "'");
    Inst c;
    c.op = Op::Const;
    c.type = want;
    c.imm = *bits;
    c.loc = loc(t);
    return k_->inst(k_->append(b, std::move(c), want, {})).result;
  }

  // Called after the type annotation is known: a const's value, or an extract's lane.
  void parseImm(const Token& t, Inst& in) {
    if (sawImm_) fail(t, "only one literal operand allowed");
    sawImm_ = true;
    if (in.op == Op::Const) {
      auto bits = parseConstLiteral(t.text, *in.type);
      if (!bits) fail(t, "invalid " + typeName(*in.type) + " literal '" + std::string(t.text) + "'");
      in.imm = *bits;
    } else if (in.op == Op::Extract) {
      in.imm = parseUInt(t, 127, "lane index (0..127)");
    } else if (in.op == Op::SetMaxNRegInc || in.op == Op::SetMaxNRegDec || in.op == Op::WgmmaMma) {  // the verifier
      in.imm = parseUInt(t, 1023, "integer (0..1023)");
    } else {  // cp.async's size, wait_group's count, lop3's truth table, a barrier ID: range-checked by the verifier
      in.imm = parseUInt(t, 255, "integer (0..255)");
    }
  }

  void finishKernel(const Token& close) {
    for (auto& [name, l] : pendingValues_) failAt(l, "use of undefined value '%" + name + "'");
    for (const PendingSucc& p : pendingSuccs_) {
      auto it = blockByName_.find(p.name);
      if (it == blockByName_.end()) failAt(p.loc, "use of undefined block '^" + std::string(p.name) + "'");
      k_->inst(p.inst).succs[p.index].block = it->second;
    }
    // A literal branch argument becomes an unnamed const just before the branch, of the type of
    // the parameter it is passed to.
    for (const PendingLiteral& p : pendingLiterals_) {
      const BlockCall& call = k_->inst(p.inst).succs[p.succ];
      const Block& target = k_->block(call.block);
      if (p.arg >= target.params.size())
        fail(p.tok, "literal argument " + std::to_string(p.arg + 1) + " to '^" + target.name + "', which takes " +
                        std::to_string(target.params.size()) + " parameter(s)");
      Type t = k_->typeOf(target.params[p.arg]);
      auto bits = t.isPtr() || t.isVector() ? std::nullopt : parseConstLiteral(p.tok.text, t);
      if (!bits) fail(p.tok, "invalid " + typeName(t) + " literal '" + std::string(p.tok.text) + "'");
      Inst c;
      c.op = Op::Const;
      c.type = t;
      c.imm = *bits;
      c.loc = loc(p.tok);
      InstId id = k_->append(p.block, std::move(c), t, {});
      std::vector<InstId>& insts = k_->block(p.block).insts;
      insts.pop_back();
      insts.insert(std::find(insts.begin(), insts.end(), p.inst), id);
      k_->inst(p.inst).succs[p.succ].args[p.arg] = k_->inst(id).result;
    }
    (void)close;
  }

  Lexer lex_;
  Token tok_;
  std::string fileName_;
  uint32_t fileId_ = 0;
  Diagnostics& diags_;
  Module mod_;
  Kernel* k_ = nullptr;
  size_t owner_ = 0;  // k_'s index in its list
  std::vector<PendingCall> pendingCalls_;
  // Keyed by views of the source text, which outlives the parse.
  std::unordered_map<std::string_view, ValueId> valueByName_;
  std::unordered_map<std::string, SourceLoc> pendingValues_;
  std::unordered_map<std::string_view, BlockId> blockByName_;
  std::vector<PendingSucc> pendingSuccs_;
  std::vector<PendingLiteral> pendingLiterals_;
  // parseInst's scratch, reused from one instruction to the next.
  std::vector<Item> items_;
  std::vector<Token> args_;
  std::vector<std::pair<size_t, Item*>> succItems_;
  bool sawImm_ = false;
};

}  // namespace

std::optional<uint64_t> parseConstLiteral(std::string_view text, Type t) {
  std::string s(text);
  if (s.empty()) return std::nullopt;
  bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  char* end = nullptr;
  errno = 0;
  if (t.isFloat() && !hex) {
    uint64_t bits = 0;
    switch (t.scalar) {
      case Scalar::F32: bits = std::bit_cast<uint32_t>(std::strtof(s.c_str(), &end)); break;
      case Scalar::F64: bits = std::bit_cast<uint64_t>(std::strtod(s.c_str(), &end)); break;
      case Scalar::F16: bits = f64ToF16(std::strtod(s.c_str(), &end)); break;
      default: bits = f64ToBf16(std::strtod(s.c_str(), &end)); break;
    }
    if (*end || s == "nan" || s == "inf") return std::nullopt;
    return bits;
  }
  unsigned w = t.isPred() ? 1 : t.bits();
  if (w > 64) return std::nullopt;  // tmap: 1024 opaque bits, no literal
  uint64_t mask = w == 64 ? ~uint64_t{0} : (uint64_t{1} << w) - 1;
  if (s[0] == '-') {
    if (hex) return std::nullopt;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (errno || *end) return std::nullopt;
    if (w < 64 && v < -(1LL << (w - 1))) return std::nullopt;
    return static_cast<uint64_t>(v) & mask;
  }
  unsigned long long v = std::strtoull(s.c_str(), &end, hex ? 16 : 10);
  if (errno || *end || s[0] == '+' || v > mask) return std::nullopt;
  return v;
}

std::optional<Module> parseModule(std::string_view text, const std::string& fileName, Diagnostics& diags) {
  Parser p(text, fileName, diags);
  return p.run();
}

}  // namespace tn::ir
