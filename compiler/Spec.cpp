#include "compiler/Spec.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "backends/bundle/Bundle.h"
#include "compiler/Input.h"
#include "compiler/ParamUse.h"
#include "ir/Parser.h"
#include "ir/Verifier.h"
#include "passes/Pass.h"
#include "passes/Passes.h"
#include "passes/TargetLimits.h"

namespace tn::spec {

namespace {

using ir::SourceLoc;

SourceLoc locOf(const toml::source_region& r) { return SourceLoc{0, r.begin.line, r.begin.column}; }

std::string q(std::string_view s) { return "'" + std::string(s) + "'"; }

std::string typeName(toml::node_type t) {
  switch (t) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a floating-point number";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    default: return "nothing";
  }
}

std::string keyList(std::span<const std::string_view> keys) {
  std::string out;
  for (std::string_view k : keys) out += (out.empty() ? "" : ", ") + std::string(k);
  return out;
}

// Where column `column` (1-based) of an expression is in the spec: past the opening quote.
SourceLoc exprLoc(const ExprSource& s, uint32_t column) {
  SourceLoc l = s.loc;
  if (s.exact && column > 0) l.col += column;
  return l;
}

// toml++ builds the tables of a dotted key or table header recursively, with no depth limit of
// its own for them (arrays and inline tables stop at 256), so a 50,000-level key overflows the
// stack. A spec needs a handful of levels: this scan refuses anything past kMaxTomlDepth before
// toml++ sees the text. The depth of a point is the dots of the key being read plus, for each
// array or inline table it is in, one and the dots of the key that holds it; strings and
// comments are skipped.
constexpr size_t kMaxTomlDepth = 64;

std::optional<SourceLoc> tooDeep(std::string_view text) {
  enum class Mode : uint8_t { Key, Value };
  Mode mode = Mode::Key;
  struct Open {
    char bracket;  // '[' or '{'
    size_t depth;  // what it adds
  };
  std::vector<Open> open;
  size_t depth = 0;       // of the open arrays and inline tables
  size_t keyDots = 0;     // of the key being read, or of the key that holds the value being read
  uint32_t line = 1, col = 1;
  size_t i = 0;
  auto advance = [&] {
    if (text[i] == '\n') ++line, col = 1;
    else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) ++col;  // columns count characters
    ++i;
  };
  auto startsWith = [&](std::string_view s) { return text.substr(i, s.size()) == s; };
  // Skips a string starting at i (any of the four kinds); stops at an unterminated one's line end.
  auto skipString = [&] {
    const char quote = text[i];
    const bool multi = startsWith(std::string(3, quote));
    for (int k = 0; k < (multi ? 3 : 1); ++k) advance();
    while (i < text.size()) {
      if (multi ? startsWith(std::string(3, quote)) : text[i] == quote) {
        for (int k = 0; k < (multi ? 3 : 1); ++k) advance();
        return;
      }
      if (!multi && text[i] == '\n') return;
      if (quote == '"' && text[i] == '\\' && i + 1 < text.size()) advance();
      advance();
    }
  };
  auto close = [&] {
    depth -= open.back().depth;
    open.pop_back();
    mode = Mode::Value;
    keyDots = 0;
  };
  while (i < text.size()) {
    const char c = text[i];
    const SourceLoc here{0, line, col};
    if (c == '"' || c == '\'') {
      skipString();
      continue;
    }
    if (c == '#') {
      while (i < text.size() && text[i] != '\n') advance();
      continue;
    }
    if (mode == Mode::Key) {
      if (c == '.' && depth + ++keyDots > kMaxTomlDepth) return here;
      if (c == '=') mode = Mode::Value;
      if (c == '\n' || c == ']') keyDots = 0;  // a header's end, or a line without '='
      if (c == '}' && !open.empty() && open.back().bracket == '{') close();  // {}
    } else if (c == '[' || c == '{') {
      open.push_back({c, keyDots + 1});
      depth += keyDots + 1;
      if (depth > kMaxTomlDepth) return here;
      keyDots = 0;
      if (c == '{') mode = Mode::Key;
    } else if ((c == ']' || c == '}') && !open.empty()) {
      close();
    } else if (c == ',' && !open.empty()) {
      mode = open.back().bracket == '{' ? Mode::Key : Mode::Value;
      keyDots = 0;
    } else if (c == '\n' && open.empty()) {
      mode = Mode::Key;
      keyDots = 0;
    }
    advance();
  }
  return std::nullopt;
}

class Loader {
 public:
  Loader(const std::string& file, const std::string& baseDir, ir::Diagnostics& d, std::span<const kernels::Template> t)
      : file_(file), baseDir_(baseDir), diags_(d), templates_(t) {}

  std::optional<Spec> load(std::string_view text) {
    toml::table root;
    if (std::optional<SourceLoc> at = tooDeep(text)) {
      diags_.report(ir::Severity::Error, file_, *at,
                    "keys, tables or values nested deeper than " + std::to_string(kMaxTomlDepth) +
                        " levels (refused before parsing; a spec needs a few)");
      return std::nullopt;
    }
    try {
      root = toml::parse(text, std::string_view(file_));
    } catch (const toml::parse_error& e) {
      std::string msg(e.description());
      if (!msg.empty()) msg[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(msg[0])));
      diags_.report(ir::Severity::Error, file_, locOf(e.source()), msg);
      return std::nullopt;
    }
    Spec spec;
    spec.file = file_;
    spec.targets.assign(bundle::defaultTargets().begin(), bundle::defaultTargets().end());
    static constexpr std::string_view kTop[] = {"bundle", "kernel"};
    checkKeys(root, kTop, "at the top level");
    const toml::node* bundle = root.get("bundle");
    if (!bundle) error(SourceLoc{0, 1, 1}, "missing [bundle] table");
    else if (const toml::table* b = asTable(*bundle, "bundle")) loadBundle(*b, spec);
    const toml::node* kernels = root.get("kernel");
    const toml::array* list = kernels ? kernels->as_array() : nullptr;
    if (kernels && (!list || !list->is_array_of_tables()))
      error(locOf(kernels->source()), "'kernel' must be an array of tables ([[kernel]] entries)");
    else if (!list || list->empty())
      error(SourceLoc{0, 1, 1}, "the spec has no [[kernel]] entries");
    else if (list->size() > bundle::kMaxKernels)  // before any kernel is compiled
      error(locOf((*list)[bundle::kMaxKernels].source()), "the spec has " + std::to_string(list->size()) +
                                                            " [[kernel]] entries; a bundle holds at most " +
                                                            std::to_string(bundle::kMaxKernels));
    else
      for (const toml::node& n : *list) loadKernel(*n.as_table(), spec);
    // toml++ visits keys in sorted order; report in source order instead.
    std::stable_sort(found_.begin(), found_.end(), [](const ir::Diagnostic& a, const ir::Diagnostic& b) {
      return a.loc.line != b.loc.line ? a.loc.line < b.loc.line : a.loc.col < b.loc.col;
    });
    for (ir::Diagnostic& d : found_) diags_.report(d.severity, d.file, d.loc, std::move(d.message));
    if (!found_.empty()) return std::nullopt;
    return spec;
  }

 private:
  void error(SourceLoc loc, std::string msg) { found_.push_back({ir::Severity::Error, file_, loc, std::move(msg)}); }

  void checkKeys(const toml::table& t, std::span<const std::string_view> allowed, const std::string& where) {
    for (auto&& [key, value] : t) {
      (void)value;
      if (std::find(allowed.begin(), allowed.end(), key.str()) == allowed.end())
        error(locOf(key.source()), "unknown key " + q(key.str()) + " " + where + " (expected " + keyList(allowed) + ")");
    }
  }

  const toml::table* asTable(const toml::node& n, std::string_view key) {
    if (const toml::table* t = n.as_table()) return t;
    error(locOf(n.source()), q(key) + " must be a table, not " + typeName(n.type()));
    return nullptr;
  }

  // The node of `key` when present and of type `want`; reports a type error otherwise.
  const toml::node* typed(const toml::table& t, std::string_view key, toml::node_type want) {
    const toml::node* n = t.get(key);
    if (!n) return nullptr;
    if (n->type() != want) {
      error(locOf(n->source()), q(key) + " must be " + typeName(want) + ", not " + typeName(n->type()));
      return nullptr;
    }
    return n;
  }

  std::optional<std::string> identifier(const toml::table& t, std::string_view key, const char* what) {
    const toml::node* n = typed(t, key, toml::node_type::string);
    if (!n) return std::nullopt;
    std::string v = **n->as_string();
    if (!bundle::isIdentifier(v)) {
      error(locOf(n->source()), std::string(what) + " " + q(v) + " is not an identifier (letters, digits and '_', not starting with a digit)");
      return std::nullopt;
    }
    return v;
  }

  void loadBundle(const toml::table& b, Spec& spec) {
    static constexpr std::string_view kKeys[] = {"name", "targets", "ptx_fallback", "ir", "fp_contract", "debug", "modules"};
    checkKeys(b, kKeys, "in [bundle]");
    if (!b.get("name")) error(locOf(b.source()), "[bundle] needs a 'name'");
    if (auto name = identifier(b, "name", "bundle name")) spec.name = *name;
    if (const toml::node* n = typed(b, "targets", toml::node_type::array)) {
      spec.targets.clear();
      const toml::array& a = *n->as_array();
      if (a.empty()) error(locOf(n->source()), "'targets' must not be empty");
      for (const toml::node& e : a) {
        if (!e.is_string()) {
          error(locOf(e.source()), "each target must be a string, not " + typeName(e.type()));
          continue;
        }
        std::string text = **e.as_string(), why;
        std::optional<bundle::Target> t = bundle::Target::parseSupported(text, why);
        if (!t) error(locOf(e.source()), why);
        else if (std::find(spec.targets.begin(), spec.targets.end(), *t) != spec.targets.end())
          error(locOf(e.source()), "duplicate target " + q(text));
        else spec.targets.push_back(*t);
      }
    }
    if (const toml::node* n = typed(b, "ptx_fallback", toml::node_type::boolean)) spec.ptxFallback = **n->as_boolean();
    if (const toml::node* n = typed(b, "ir", toml::node_type::boolean)) spec.ir = **n->as_boolean();
    if (const toml::node* n = typed(b, "debug", toml::node_type::boolean)) spec.debug = **n->as_boolean();
    if (const toml::node* n = typed(b, "fp_contract", toml::node_type::string)) {
      std::string v = **n->as_string();
      if (v == "fast") spec.fpContract = FpContract::Fast;
      else if (v == "off") spec.fpContract = FpContract::Off;
      else error(locOf(n->source()), "'fp_contract' must be \"fast\" or \"off\", not \"" + v + "\"");
    }
    if (const toml::node* n = typed(b, "modules", toml::node_type::string)) {
      std::optional<Spec::Modules> m = parseModules(**n->as_string());
      if (m) spec.modules = *m;
      else error(locOf(n->source()), "'modules' must be \"target\" or \"kernel\", not \"" + **n->as_string() + "\"");
    }
  }

  ExprSource expression(const toml::node& n, const std::string& what) {
    ExprSource out;
    out.loc = locOf(n.source());
    std::string text;
    if (const auto* i = n.as_integer()) {
      if (**i < 0) {
        error(out.loc, what + " must not be negative");
        return out;
      }
      text = std::to_string(**i);
    } else if (const auto* s = n.as_string()) {
      text = **s;
      const toml::source_region& r = n.source();
      out.exact = r.begin.line == r.end.line && r.end.column - r.begin.column == text.size() + 2;
    } else {
      error(out.loc, what + " must be a string or an integer, not " + typeName(n.type()));
      return out;
    }
    bundle::Result<bundle::Expr> e = bundle::Expr::parse(text);
    if (!e) {
      error(exprLoc(out, e.error().column), what + ": " + e.error().message);
      return out;
    }
    out.expr = std::move(*e);
    return out;
  }

  // An element type named in the spec ("bf16"), or nullopt after reporting `what` as unknown.
  std::optional<bundle::ParamType::Scalar> elementType(const toml::node& value, const std::string& what) {
    using S = bundle::ParamType::Scalar;
    static constexpr std::pair<std::string_view, S> kNames[] = {
        {"f16", S::F16}, {"bf16", S::BF16}, {"f32", S::F32}, {"f64", S::F64}, {"s8", S::S8},   {"s16", S::S16},
        {"s32", S::S32}, {"s64", S::S64},   {"u8", S::U8},   {"u16", S::U16}, {"u32", S::U32}, {"u64", S::U64},
        {"e4m3", S::E4M3}, {"e5m2", S::E5M2}};
    SourceLoc loc = locOf(value.source());
    const toml::value<std::string>* v = value.as_string();
    if (!v) {
      error(loc, what + " must be a string (an element type such as \"bf16\"), not " + typeName(value.type()));
      return std::nullopt;
    }
    auto it = std::find_if(std::begin(kNames), std::end(kNames), [&](const auto& p) { return p.first == **v; });
    if (it == std::end(kNames)) {
      error(loc, what + ": unknown element type " + q(**v) + " (expected f16, bf16, f32, f64, s8, s16, s32, s64, u8, u16, u32, u64, e4m3 or e5m2)");
      return std::nullopt;
    }
    return it->second;
  }

  // elements = { param = "bf16", ... }
  void loadElements(const toml::table& t, KernelSpec& k) {
    for (auto&& [keyNode, value] : t) {
      const std::string key(keyNode.str());
      if (auto e = elementType(value, "elements." + key)) k.elements.push_back({key, *e, locOf(value.source())});
    }
  }

  // extents = { param = "rows * cols", ... }
  void loadExtents(const toml::table& t, KernelSpec& k) {
    for (auto&& [keyNode, value] : t) {
      const std::string key(keyNode.str());
      ExprSource e = expression(value, "extents." + key);
      k.extents.push_back({key, std::move(e)});
    }
  }

  // tensor_maps = { a_map = { source = "a", element = "bf16", dims = ["k", "m"], row_stride = "lda * 2",
  //                           box = [64, 64], swizzle = 128 }, ... }; a map of 3 dims also takes
  // plane_stride, and a box of 3.
  void loadTensorMaps(const toml::table& t, KernelSpec& k) {
    static constexpr std::string_view kKeys[] = {"source", "element", "dims", "row_stride", "plane_stride", "box", "swizzle"};
    for (auto&& [keyNode, value] : t) {
      const std::string name(keyNode.str());
      const std::string at = "tensor_maps." + name;
      const toml::table* m = asTable(value, at);
      if (!m) continue;
      checkKeys(*m, kKeys, "in " + at);
      KernelSpec::TensorMap map;
      map.loc = locOf(value.source());
      map.rule.param = name;
      bool ok = true;
      for (std::string_view key : {"source", "element", "dims", "row_stride", "box"})
        if (!m->get(key)) {
          error(map.loc, at + " needs '" + std::string(key) + "'");
          ok = false;
        }
      if (!ok) continue;
      if (auto src = identifier(*m, "source", (at + ".source").c_str())) map.rule.source = *src;
      else ok = false;
      if (auto e = elementType(*m->get("element"), at + ".element")) map.rule.element = *e;
      else ok = false;
      // dims: 2 or 3 entries, the rank; box: as many.
      auto list = [&](std::string_view key, size_t rank) -> const toml::array* {
        const toml::node* n = typed(*m, key, toml::node_type::array);
        if (!n) return nullptr;
        const size_t size = n->as_array()->size();
        if (rank ? size == rank : size == 2 || size == 3) return n->as_array();
        error(locOf(n->source()), at + "." + std::string(key) + " must have " +
                                      (rank ? std::to_string(rank) + " entries (one per entry of dims)" : "2 or 3 entries") +
                                      ", innermost first, not " + std::to_string(size));
        return nullptr;
      };
      const toml::array* dims = list("dims", 0);
      if (dims)
        for (size_t d = 0; d < dims->size(); ++d)
          map.rule.dims.push_back(expression((*dims)[d], at + ".dims[" + std::to_string(d) + "]").expr);
      else ok = false;
      const size_t rank = dims ? dims->size() : 0;
      map.rule.strides.push_back(expression(*m->get("row_stride"), at + ".row_stride").expr);
      if (const toml::node* plane = m->get("plane_stride"); plane && rank == 2) {
        error(locOf(plane->source()), at + ".plane_stride is for a tensor of 3 dims; this one has 2");
        ok = false;
      } else if (plane) {
        map.rule.strides.push_back(expression(*plane, at + ".plane_stride").expr);
      } else if (rank == 3) {
        error(map.loc, at + " has 3 dims and needs 'plane_stride' (bytes between consecutive planes)");
        ok = false;
      }
      if (const toml::array* box = list("box", rank))
        for (size_t d = 0; d < box->size(); ++d) {
          const auto* v = (*box)[d].as_integer();
          if (!v || **v < 1 || **v > 256) {
            error(locOf((*box)[d].source()), at + ".box[" + std::to_string(d) + "] must be an integer from 1 to 256");
            ok = false;
          } else {
            map.rule.box.push_back(static_cast<uint32_t>(**v));
          }
        }
      else ok = false;
      if (const toml::node* n = typed(*m, "swizzle", toml::node_type::integer)) {
        int64_t v = **n->as_integer();
        if (v != 0 && v != 32 && v != 64 && v != 128) {
          error(locOf(n->source()), at + ".swizzle must be 0, 32, 64 or 128 (bytes), not " + std::to_string(v));
          ok = false;
        } else {
          map.rule.swizzle = static_cast<uint32_t>(v);
        }
      }
      if (ok) k.tensorMaps.push_back(std::move(map));
    }
  }

  void loadKernel(const toml::table& t, Spec& spec) {
    static constexpr std::string_view kKeys[] = {"name", "template", "options", "tir", "kernel", "block", "grid", "dynamic_shared", "allow_spills",
                                                 "minnctapersm", "maxnreg", "elements", "extents", "tensor_maps"};
    checkKeys(t, kKeys, "in [[kernel]]");
    KernelSpec k;
    k.loc = locOf(t.source());
    k.nameLoc = k.loc;
    const toml::node* tmpl = typed(t, "template", toml::node_type::string);
    const toml::node* tir = typed(t, "tir", toml::node_type::string);
    if (t.get("template") && t.get("tir")) {
      error(locOf(t.get("tir")->source()), "a [[kernel]] has either 'template' or 'tir', not both");
      return;
    }
    if (!t.get("template") && !t.get("tir")) {
      error(k.loc, "a [[kernel]] needs 'template' (a built-in kernel) or 'tir' (a .tir file)");
      return;
    }
    if (const toml::node* n = typed(t, "allow_spills", toml::node_type::boolean)) k.allowSpills = **n->as_boolean();
    if (const toml::node* n = typed(t, "minnctapersm", toml::node_type::integer)) {
      k.minnctapersmLoc = locOf(n->source());
      k.minnctapersm = hint(*n, "minnctapersm", 32, "blocks per SM");
    }
    if (const toml::node* n = typed(t, "maxnreg", toml::node_type::integer)) k.maxnreg = hint(*n, "maxnreg", 255, "registers per thread");
    if (const toml::node* n = t.get("elements"))
      if (const toml::table* el = asTable(*n, "elements")) loadElements(*el, k);
    if (const toml::node* n = t.get("extents"); n && !t.get("template"))
      if (const toml::table* ex = asTable(*n, "extents")) loadExtents(*ex, k);

    if (t.get("template")) {
      static constexpr std::string_view kTirOnly[] = {"kernel", "block", "grid", "dynamic_shared", "tensor_maps", "extents"};
      for (std::string_view key : kTirOnly)
        if (const toml::node* n = t.get(key))
          error(locOf(n->source()), q(key) + " is only valid with 'tir'; a template brings its own " +
                                        (key == "extents" ? "extents" : "launch rule"));
      if (!tmpl) return;
      k.templateLoc = locOf(tmpl->source());
      k.nameLoc = k.templateLoc;
      std::string name = **tmpl->as_string();
      k.tmpl = kernels::findTemplate(templates_, name);
      if (!k.tmpl) {
        std::string near;
        for (const std::string& n : kernels::similarTemplates(templates_, name)) near += (near.empty() ? "did you mean " : ", ") + q(n);
        error(k.templateLoc, "unknown template " + q(name) + " (" + (near.empty() ? "" : near + "? ") + "see 'truenoc list-templates')");
        return;
      }
      k.name = k.tmpl->name;
      k.options = k.tmpl->defaults();
      if (const toml::node* o = t.get("options"))
        if (const toml::table* opts = asTable(*o, "options")) loadOptions(*opts, k);
    } else {
      if (const toml::node* o = t.get("options")) error(locOf(o->source()), "'options' is only valid with 'template'");
      if (!tir) return;
      k.tirLoc = locOf(tir->source());
      std::string path = **tir->as_string();
      std::filesystem::path p(path);
      if (p.is_relative() && !baseDir_.empty()) p = std::filesystem::path(baseDir_) / p;
      k.tirPath = p.lexically_normal().string();
      std::error_code ec;
      if (!std::filesystem::is_regular_file(p, ec) || !std::ifstream(p)) {
        error(k.tirLoc, "cannot open tir file " + q(k.tirPath));
        return;
      }
      if (const toml::node* n = typed(t, "kernel", toml::node_type::string)) {
        k.tirKernel = **n->as_string();
        k.name = k.tirKernel;
        k.nameLoc = locOf(n->source());
      } else {
        if (!t.get("kernel")) error(k.loc, "a 'tir' kernel needs 'kernel', the name of the kernel in the file");
        return;
      }
      loadLaunchRule(t, k);
    }
    if (const toml::node* n = t.get("name")) {
      if (auto name = identifier(t, "name", "kernel name")) {
        k.name = *name;
        k.nameLoc = locOf(n->source());
      } else {
        return;
      }
    } else if (!bundle::isIdentifier(k.name)) {
      error(k.nameLoc, "kernel name " + q(k.name) + " is not an identifier; give the entry a 'name'");
      return;
    }
    for (const KernelSpec& other : spec.kernels)
      if (other.name == k.name) {
        error(k.nameLoc, "duplicate kernel name " + q(k.name) + " (first used at line " + std::to_string(other.nameLoc.line) +
                             "); give one of them a different 'name'");
        return;
      }
    spec.kernels.push_back(std::move(k));
  }

  std::optional<unsigned> hint(const toml::node& n, std::string_view key, int64_t max, const char* what) {
    int64_t v = **n.as_integer();
    if (v >= 1 && v <= max) return static_cast<unsigned>(v);
    error(locOf(n.source()), q(key) + " must be between 1 and " + std::to_string(max) + " " + what + ", not " + std::to_string(v));
    return std::nullopt;
  }

  void loadOptions(const toml::table& opts, KernelSpec& k) {
    for (auto&& [key, value] : opts) {
      const kernels::OptionSpec* os = nullptr;
      for (const kernels::OptionSpec& s : k.tmpl->options)
        if (s.name == key.str()) os = &s;
      if (!os) {
        std::string names;
        for (const kernels::OptionSpec& s : k.tmpl->options) names += (names.empty() ? "" : ", ") + s.name;
        error(locOf(key.source()), "template " + q(k.tmpl->name) + " has no option " + q(key.str()) +
                                       (names.empty() ? " (it takes no options)" : " (options: " + names + ")"));
        continue;
      }
      kernels::OptionValue v;
      toml::node_type want = os->type == kernels::OptionType::Int    ? toml::node_type::integer
                             : os->type == kernels::OptionType::Bool ? toml::node_type::boolean
                                                                     : toml::node_type::string;
      if (value.type() != want) {
        error(locOf(value.source()), "option " + q(os->name) + " must be " + typeName(want) + ", not " + typeName(value.type()));
        continue;
      }
      if (const auto* i = value.as_integer()) v = int64_t{**i};
      else if (const auto* b = value.as_boolean()) v = bool{**b};
      else v = std::string(**value.as_string());
      if (auto bad = kernels::checkOption(*os, v)) {
        error(locOf(value.source()), *bad);
        continue;
      }
      k.options.set(os->name, std::move(v));
    }
  }

  void loadLaunchRule(const toml::table& t, KernelSpec& k) {
    const toml::node* block = typed(t, "block", toml::node_type::array);
    const toml::node* grid = typed(t, "grid", toml::node_type::array);
    if (!t.get("block") || !t.get("grid")) {
      if (!t.get("block")) error(k.loc, "a 'tir' kernel needs a launch rule: 'block' is missing (e.g. block = [256])");
      if (!t.get("grid")) error(k.loc, "a 'tir' kernel needs a launch rule: 'grid' is missing (e.g. grid = [\"ceil_div(n, 256)\"])");
      return;
    }
    if (block) {
      k.blockLoc = locOf(block->source());
      const toml::array& a = *block->as_array();
      if (a.empty() || a.size() > 3) error(k.blockLoc, "'block' must have 1 to 3 dimensions, not " + std::to_string(a.size()));
      static constexpr int64_t kMax[3] = {1024, 1024, 64};
      int64_t threads = 1;
      for (size_t i = 0; i < a.size() && i < 3; ++i) {
        const auto* v = a[i].as_integer();
        if (!v) {
          error(locOf(a[i].source()), "block dimensions must be integers, not " + typeName(a[i].type()));
          continue;
        }
        if (**v < 1 || **v > kMax[i]) {
          error(locOf(a[i].source()), "block dimension " + std::to_string(i) + " must be between 1 and " + std::to_string(kMax[i]) +
                                          ", not " + std::to_string(**v));
          continue;
        }
        threads *= **v;
        k.block.push_back(static_cast<uint32_t>(**v));
      }
      if (threads > 1024) error(k.blockLoc, "'block' has " + std::to_string(threads) + " threads; the limit is 1024");
    }
    if (grid) {
      const toml::array& a = *grid->as_array();
      if (a.empty() || a.size() > 3) error(locOf(grid->source()), "'grid' must have 1 to 3 dimensions, not " + std::to_string(a.size()));
      for (size_t i = 0; i < a.size() && i < 3; ++i) k.grid.push_back(expression(a[i], "grid[" + std::to_string(i) + "]"));
    }
    if (const toml::node* n = t.get("dynamic_shared")) k.dynamicShared = expression(*n, "dynamic_shared");
    if (const toml::node* n = t.get("tensor_maps"))
      if (const toml::table* maps = asTable(*n, "tensor_maps")) loadTensorMaps(*maps, k);
  }

  const std::string& file_;
  const std::string& baseDir_;
  ir::Diagnostics& diags_;
  std::span<const kernels::Template> templates_;
  std::vector<ir::Diagnostic> found_;
};

}  // namespace

std::optional<Spec> parseSpec(std::string_view text, const std::string& file, const std::string& baseDir, ir::Diagnostics& diags,
                              std::span<const kernels::Template> templates) {
  return Loader(file, baseDir, diags, templates).load(text);
}

// ---- instantiation ---------------------------------------------------------------------------

const ir::Module* TirCache::get(const std::string& path, const std::string& specFile, SourceLoc loc, ir::Diagnostics& diags) {
  auto it = modules_.find(path);
  if (it == modules_.end()) {
    std::string text, error;
    std::optional<ir::Module> m;
    if (!io::readFile(path, io::InputKind::Source, text, error)) diags.report(ir::Severity::Error, specFile, loc, "tir file: " + error);
    else m = ir::parseModule(text, path, diags);
    it = modules_.emplace(path, std::move(m)).first;  // a failure is reported once, then cached
  }
  return it->second ? &*it->second : nullptr;
}

bundle::ParamType paramTypeOf(ir::Type t) {
  using P = bundle::ParamType;
  // Both enums list the same scalars and spaces in the same order; the bundle's start at 1.
  static_assert(static_cast<unsigned>(P::Scalar::Pred) == static_cast<unsigned>(ir::Scalar::Pred) + 1);
  static_assert(static_cast<unsigned>(P::Scalar::Ptr) == static_cast<unsigned>(ir::Scalar::Ptr) + 1);
  static_assert(static_cast<unsigned>(P::Scalar::TensorMap) == static_cast<unsigned>(ir::Scalar::TensorMap) + 1);
  static_assert(static_cast<unsigned>(P::Space::Local) == static_cast<unsigned>(ir::AddrSpace::Local) + 1);
  P p;
  p.scalar = static_cast<P::Scalar>(static_cast<unsigned>(t.scalar) + 1);
  p.lanes = t.lanes;
  p.space = t.isPtr() ? static_cast<P::Space>(static_cast<unsigned>(t.space) + 1) : P::Space::None;
  return p;
}

std::vector<bundle::Param> signatureOf(const ir::Kernel& k) {
  std::vector<bundle::Param> out;
  for (const ir::KernelParam& p : k.params) out.push_back({k.value(p.value).name, paramTypeOf(k.typeOf(p.value)), p.align});
  return out;
}

std::string describeInstance(const KernelSpec& k) {
  std::string with;
  const kernels::Options defaults = k.tmpl->defaults();
  for (const auto& [name, value] : k.options.all()) {
    auto d = defaults.all().find(name);
    if (d != defaults.all().end() && d->second == value) continue;
    const std::string* text = std::get_if<std::string>(&value);
    with += (with.empty() ? " with " : ", ") + name + "=" + (text ? *text : kernels::optionValueText(value));
  }
  return "template " + q(k.tmpl->name) + with;
}

void noteTemplateEntry(const Spec& spec, const KernelSpec& k, const std::string& what, ir::Diagnostics& diags) {
  diags.report(ir::Severity::Note, spec.file, k.templateLoc, "in " + describeInstance(k) + ", " + what);
}

bool templateFitsTargets(const Spec& spec, const KernelSpec& k, const ir::Module& built, ir::Diagnostics& diags) {
  const bundle::Target need = ir::requiredTarget(built);
  std::string below;
  size_t count = 0;
  for (const bundle::Target& t : spec.targets)
    if (t.sm < need.sm || (need.archSpecific && t != need)) below += (count++ ? ", " : "") + t.name();
  if (!count) return true;
  diags.report(ir::Severity::Error, spec.file, k.templateLoc,
               describeInstance(k) + " needs " + need.name() + (need.archSpecific ? " exactly" : "") + " (target" +
                   (count > 1 ? "s " : " ") + below + ")");
  return false;
}

std::optional<Spec::Modules> parseModules(std::string_view text) {
  if (text == "target") return Spec::Modules::PerTarget;
  if (text == "kernel") return Spec::Modules::PerKernel;
  return std::nullopt;
}

compile::Options compileOptions(const Spec& spec) {
  compile::Options o;
  o.level = compile::Level::O2;
  o.fpContract = spec.fpContract == FpContract::Fast;
  o.lineInfo = spec.debug;
  return o;
}

namespace {

// instantiate() for the given options (the entry's, or one of its template's alternatives),
// without the per-target check of its dynamic shared memory (sharedFits).
std::optional<Instance> instantiateWith(const Spec& spec, const KernelSpec& k, const kernels::Options& options,
                                        TirCache& tirs, ir::Diagnostics& diags) {
  auto error = [&](SourceLoc loc, std::string msg) { diags.report(ir::Severity::Error, spec.file, loc, std::move(msg)); };
  Instance inst;
  if (k.tmpl) {
    // A template's own diagnostics point into its source, followed by a note at the spec entry;
    // those without a place (a combination of options it refuses) are the spec entry's.
    ir::Diagnostics own;
    std::optional<ir::Module> built = k.tmpl->build(options, own);
    bool inSource = false;
    for (const ir::Diagnostic& d : own.all()) {
      diags.report(d.severity, d.file.empty() ? spec.file : d.file, d.file.empty() ? k.templateLoc : d.loc,
                   d.file.empty() ? "template " + q(k.tmpl->name) + ": " + d.message : d.message);
      inSource = inSource || (d.severity == ir::Severity::Error && !d.file.empty());
    }
    if (inSource) noteTemplateEntry(spec, k, "instantiated here", diags);
    if (!built) return std::nullopt;
    if (built->kernels.size() != 1) {
      error(k.templateLoc, "template " + q(k.tmpl->name) + " built " + std::to_string(built->kernels.size()) + " kernels instead of one");
      return std::nullopt;
    }
    inst.module = std::move(*built);
  } else {
    const ir::Module* src = tirs.get(k.tirPath, spec.file, k.tirLoc, diags);
    if (!src) return std::nullopt;
    const ir::Kernel* chosen = nullptr;
    std::string names;
    for (const ir::Kernel& kk : src->kernels) {
      names += (names.empty() ? "" : ", ") + kk.name;
      if (kk.name == k.tirKernel) chosen = &kk;
    }
    if (!chosen) {
      error(k.nameLoc, q(k.tirPath) + " has no kernel " + q(k.tirKernel) + " (kernels: " + names + ")");
      return std::nullopt;
    }
    inst.module.target = src->target;
    inst.module.ptx = src->ptx;
    inst.module.files = src->files;
    inst.module.kernels.push_back(*chosen);
    if (!src->functions.empty()) {  // inlined now, so that the parameters' uses below see the calls' bodies
      inst.module.functions = src->functions;
      if (!ir::verify(inst.module, diags) || !passes::inlineFunctions(inst.module, diags)) return std::nullopt;
    }
  }
  ir::Kernel& kernel = inst.module.kernels.front();
  kernel.name = k.name;
  if (k.maxnreg) kernel.maxnreg = k.maxnreg;
  if (k.minnctapersm) {
    if (!kernel.reqntid && !kernel.maxntid) {
      error(k.minnctapersmLoc, "minnctapersm needs a block size the kernel states (reqntid or maxntid); kernel " +
                                   q(k.name) + " has neither");
      return std::nullopt;
    }
    kernel.minnctapersm = k.minnctapersm;
  }
  inst.params = signatureOf(kernel);
  // A launch passes pointers, scalars and tensor maps (truenort's Arg kinds): a bundle with any
  // other parameter would not load, so the kernel is refused here, where the spec says it.
  bool passable = true;
  for (const bundle::Param& p : inst.params)
    if (p.type.lanes != 1 || p.type.scalar == bundle::ParamType::Scalar::Pred) {
      error(k.nameLoc, "kernel " + q(k.name) + ": parameter " + q(p.name) + " has type " + p.type.name() +
                           ", which a launch cannot pass (parameters are pointers, scalars other than pred, and tmap): "
                           "give each lane its own parameter, or a pred as an integer");
      passable = false;
    }
  if (!passable) return std::nullopt;
  analyzeParamUse(kernel, inst.params);
  // A template's own element types of its tensors: those it moves as raw bits (ids, copies, 16-bit
  // words), and ggml blocks, bytes whose parts the kernel reads as other types (int8 quants).
  std::set<std::string> declared;
  if (k.tmpl && k.tmpl->elements)
    for (const auto& [name, element] : k.tmpl->elements(k.options))
      for (bundle::Param& p : inst.params)
        if (p.name == name && p.type.isPointer() && !(p.access & bundle::kPtrEscapes)) {
          p.element = element.scalar;
          declared.insert(name);
        }
  // `elements` and `extents` name parameters: one that the kernel lacks is an error listing its own.
  auto unknownParam = [&](SourceLoc loc, const std::string& name) {
    std::string names;
    for (const bundle::Param& x : inst.params) names += (names.empty() ? "" : ", ") + x.name;
    error(loc, "kernel " + q(k.name) + " has no parameter " + q(name) + " (parameters: " + names + ")");
  };
  bool elementsOk = true;
  for (const KernelSpec::Element& e : k.elements) {
    auto p = std::find_if(inst.params.begin(), inst.params.end(), [&](const bundle::Param& x) { return x.name == e.param; });
    std::string el = bundle::elementName(e.scalar);
    if (p == inst.params.end()) {
      unknownParam(e.loc, e.param);
      elementsOk = false;
    } else if (!p->type.isPointer()) {
      error(e.loc, "elements." + e.param + ": parameter " + q(e.param) + " is " + p->type.name() + ", not a pointer");
      elementsOk = false;
    } else if (p->element && *p->element != e.scalar) {
      const std::string source = declared.count(e.param) ? "template " + q(k.tmpl->name) + " declares "
                                                         : "kernel " + q(k.name) + " accesses ";
      error(e.loc, "elements." + e.param + ": " + source + q(e.param) + " as " + bundle::elementName(*p->element) +
                       ", not " + el);
      elementsOk = false;
    } else {
      p->element = e.scalar;
    }
  }
  if (!elementsOk) return std::nullopt;
  if (inst.params.size() > bundle::kMaxParams) {
    error(k.nameLoc, "kernel " + q(k.name) + " has " + std::to_string(inst.params.size()) +
                         " parameters; a bundle kernel has at most " + std::to_string(bundle::kMaxParams));
    return std::nullopt;
  }
  for (size_t i = 0; i < inst.params.size(); ++i)
    if (!bundle::isIdentifier(inst.params[i].name)) {
      error(k.nameLoc, "kernel " + q(k.name) + ": parameter " + std::to_string(i) + " (" + q(inst.params[i].name) +
                           ") needs an identifier name for the bundle signature and launch rule");
      return std::nullopt;
    }

  // The launch rule: the template's, or the spec's for a .tir kernel.
  if (k.tmpl) {
    inst.launch = k.tmpl->launch(options);
    if (auto bad = bundle::checkRule(inst.launch, inst.params)) {
      error(k.templateLoc, "template " + q(k.tmpl->name) + " launch rule " + bad->where() + ": " + bad->error.message);
      return std::nullopt;
    }
  } else {
    inst.launch.block = k.block;
    inst.launch.grid.clear();
    for (const ExprSource& g : k.grid) inst.launch.grid.push_back(g.expr);
    inst.launch.dynamicShared = k.dynamicShared.expr;
    for (const KernelSpec::TensorMap& m : k.tensorMaps) inst.launch.tensorMaps.push_back(m.rule);
    if (auto bad = bundle::checkRule(inst.launch, inst.params)) {
      SourceLoc loc = k.blockLoc;
      if (bad->part == bundle::RuleError::Part::Grid) loc = exprLoc(k.grid[bad->index], bad->error.column);
      if (bad->part == bundle::RuleError::Part::DynamicShared) loc = exprLoc(k.dynamicShared, bad->error.column);
      if (bad->part == bundle::RuleError::Part::TensorMap)  // a tmap parameter without a rule: the kernel's entry
        loc = bad->index < k.tensorMaps.size() ? k.tensorMaps[bad->index].loc : k.loc;
      error(loc, bad->where() + ": " + bad->error.message);
      return std::nullopt;
    }
  }

  // A copy through a tensor map takes the map's rank: cp.async.bulk.tensor.2d a map of 2 dims,
  // .3d one of 3 (on a GPU another map is undefined; the simulator stops at the copy).
  for (size_t r = 0; r < inst.launch.tensorMaps.size(); ++r) {
    const bundle::TensorMapRule& rule = inst.launch.tensorMaps[r];
    size_t p = 0;
    while (p < inst.params.size() && inst.params[p].name != rule.param) ++p;
    if (p >= kernel.params.size()) continue;  // checkRule has refused it
    for (const ir::Block& b : kernel.blocks)
      for (ir::InstId id : b.insts) {
        const ir::Inst& in = kernel.inst(id);
        const bool two = in.op == ir::Op::TmaLoad || in.op == ir::Op::TmaStore;
        const bool three = in.op == ir::Op::TmaLoad3d || in.op == ir::Op::TmaStore3d;
        const size_t mapOperand = in.op == ir::Op::TmaLoad || in.op == ir::Op::TmaLoad3d ? 1 : 0;
        if ((!two && !three) || in.operands.size() <= mapOperand || in.operands[mapOperand] != kernel.params[p].value)
          continue;
        const size_t rank = two ? 2 : 3;
        if (rank == rule.rank()) continue;
        const SourceLoc loc = k.tmpl ? k.templateLoc : r < k.tensorMaps.size() ? k.tensorMaps[r].loc : k.loc;
        error(loc, "tensor map '" + rule.param + "' has " + std::to_string(rule.rank()) + " dims, but the " +
                       std::string(ir::info(in.op).name) + " at line " + std::to_string(in.loc.line) + " of kernel " +
                       q(k.name) + " copies through it, which needs " + std::to_string(rank));
        return std::nullopt;
      }
  }

  addTensorMapUse(kernel, inst.launch, inst.params);

  // A template's extents of its tensors (how many elements each buffer holds), on pointers whose
  // element type is known (from their accesses, a declaration or a tensor map).
  if (k.tmpl && k.tmpl->extents)
    for (const auto& [name, extent] : k.tmpl->extents(k.options))
      for (bundle::Param& p : inst.params)
        if (p.name == name && p.type.isPointer() && p.element) {
          p.extent = extent;
          if (auto bad = bundle::checkExtent(p, inst.params)) {
            error(k.templateLoc, "template " + q(k.tmpl->name) + ": extent of " + q(name) + " (" + extent.text() +
                                     "): " + bad->message);
            return std::nullopt;
          }
        }
  // A spec's extents of a .tir kernel's pointers.
  bool extentsOk = true;
  for (const KernelSpec::Extent& e : k.extents) {
    auto p = std::find_if(inst.params.begin(), inst.params.end(), [&](const bundle::Param& x) { return x.name == e.param; });
    if (p == inst.params.end()) {
      unknownParam(e.extent.loc, e.param);
      extentsOk = false;
      continue;
    }
    if (p->type.isPointer() && !p->element) {
      error(e.extent.loc, "extents." + e.param + ": the element type of " + q(e.param) +
                              " is unknown (declare it in elements), so its extent counts nothing");
      extentsOk = false;
      continue;
    }
    p->extent = e.extent.expr;
    if (auto bad = bundle::checkExtent(*p, inst.params)) {
      error(exprLoc(e.extent, bad->column), "extents." + e.param + ": " + bad->message);
      extentsOk = false;
    }
  }
  if (!extentsOk) return std::nullopt;

  // The block must fit the kernel's own thread-count attributes.
  uint32_t b[3] = {1, 1, 1};
  for (size_t i = 0; i < inst.launch.block.size(); ++i) b[i] = inst.launch.block[i];
  SourceLoc blockLoc = k.tmpl ? k.templateLoc : k.blockLoc;
  auto dims = [](unsigned x, unsigned y, unsigned z) {
    return "[" + std::to_string(x) + ", " + std::to_string(y) + ", " + std::to_string(z) + "]";
  };
  if (kernel.reqntid && (kernel.reqntid->x != b[0] || kernel.reqntid->y != b[1] || kernel.reqntid->z != b[2])) {
    error(blockLoc, "block " + dims(b[0], b[1], b[2]) + " differs from the reqntid " +
                        dims(kernel.reqntid->x, kernel.reqntid->y, kernel.reqntid->z) + " of kernel " + q(k.name));
    return std::nullopt;
  }
  if (kernel.maxntid && uint64_t{b[0]} * b[1] * b[2] > kernel.maxntid->total()) {
    error(blockLoc, "block " + dims(b[0], b[1], b[2]) + " has more threads than the maxntid " +
                        dims(kernel.maxntid->x, kernel.maxntid->y, kernel.maxntid->z) + " of kernel " + q(k.name) + " allows");
    return std::nullopt;
  }
  return inst;
}

// Dynamic shared memory that no launch can have on one of the targets: its least value with the
// static arrays, over the target's opt-in maximum per block.
bool sharedFits(const Spec& spec, const KernelSpec& k, const Instance& inst, std::span<const bundle::Target> targets,
                ir::Diagnostics& diags) {
  const uint64_t leastDynamic = inst.launch.dynamicShared.leastValue().value();  // checkRule: no error
  if (leastDynamic == 0) return true;
  for (const bundle::Target& t : targets) {
    const passes::TargetLimits& limits = passes::limitsFor(t.sm);
    const uint64_t total = leastDynamic + passes::staticSharedBytes(inst.module.kernels.front());
    if (total <= limits.maxDynamicShared) continue;
    diags.report(ir::Severity::Error, spec.file, k.tmpl ? k.templateLoc : k.dynamicShared.loc,
                 "dynamic_shared: '" + inst.launch.dynamicShared.text() + "' with the kernel's static shared memory is " +
                     (inst.launch.dynamicShared.constantValue() ? "" : "at least ") + std::to_string(total) +
                     " bytes per block, over the " + std::to_string(limits.maxDynamicShared) + " bytes " + t.name() +
                     " allows");
    return false;
  }
  return true;
}

// Whether target t can run a kernel that needs `need` (an arch-specific one only on its own target).
bool runs(const bundle::Target& t, const bundle::Target& need) {
  return t.sm >= need.sm && (!need.archSpecific || t == need);
}

}  // namespace

std::optional<Instance> instantiateTemplate(const kernels::Template& t, const kernels::Options& options,
                                            ir::Diagnostics& diags) {
  Spec s;
  s.file = "<template " + t.name + ">";
  s.name = "templates";
  KernelSpec k;
  k.name = t.name;
  k.tmpl = &t;
  k.options = options;
  TirCache tirs;
  return instantiate(s, k, tirs, diags);
}

std::optional<Instance> instantiate(const Spec& spec, const KernelSpec& k, TirCache& tirs, ir::Diagnostics& diags) {
  std::optional<Instance> inst = instantiateWith(spec, k, k.options, tirs, diags);
  if (!inst || !sharedFits(spec, k, *inst, spec.targets, diags)) return std::nullopt;
  return inst;
}

std::optional<std::vector<TargetedInstance>> instantiateForTargets(const Spec& spec, const KernelSpec& k, TirCache& tirs,
                                                                   ir::Diagnostics& diags) {
  std::vector<kernels::Options> alternatives;
  if (k.tmpl && k.tmpl->alternatives) alternatives = k.tmpl->alternatives(k.options);
  std::vector<TargetedInstance> out;
  if (alternatives.empty()) {
    // The targets first: a kernel that no target of the spec runs is that, whatever its shared
    // memory would be there.
    std::optional<Instance> inst = instantiateWith(spec, k, k.options, tirs, diags);
    if (!inst || (k.tmpl && !templateFitsTargets(spec, k, inst->module, diags)) ||
        !sharedFits(spec, k, *inst, spec.targets, diags))
      return std::nullopt;
    out.push_back({std::move(*inst), spec.targets});
    return out;
  }
  // Every alternative must build (the options hold for all of them); each target then takes the
  // first that it runs, and the last one names what the targets that run none lack.
  std::vector<Instance> built;
  for (const kernels::Options& o : alternatives) {
    std::optional<Instance> inst = instantiateWith(spec, k, o, tirs, diags);
    if (!inst) {
      std::string differs;
      for (const auto& [name, value] : o.all())
        if (k.options.all().at(name) != value) {
          const std::string* text = std::get_if<std::string>(&value);
          differs += (differs.empty() ? "" : ", ") + name + "=" + (text ? *text : kernels::optionValueText(value));
        }
      if (!differs.empty())
        noteTemplateEntry(spec, k, "the member built with " + differs + " (the options must suit every member)", diags);
      return std::nullopt;
    }
    built.push_back(std::move(*inst));
  }
  std::vector<std::vector<bundle::Target>> takers(built.size());
  for (const bundle::Target& t : spec.targets) {
    size_t i = 0;
    while (i < built.size() && !runs(t, ir::requiredTarget(built[i].module))) ++i;
    if (i == built.size()) {
      templateFitsTargets(spec, k, built.back().module, diags);
      return std::nullopt;
    }
    takers[i].push_back(t);
  }
  for (size_t i = 0; i < built.size(); ++i) {
    if (takers[i].empty()) continue;
    if (!sharedFits(spec, k, built[i], takers[i], diags)) return std::nullopt;
    out.push_back({std::move(built[i]), std::move(takers[i])});
  }
  auto lowest = [](const TargetedInstance& t) { return *std::min_element(t.targets.begin(), t.targets.end()); };
  std::sort(out.begin(), out.end(), [&](const TargetedInstance& a, const TargetedInstance& b) { return lowest(a) < lowest(b); });
  // One signature launches every target's code: the caller-visible parameters must be alike (a
  // template's mistake, not the spec's), their pointer use merged so that a generated launcher
  // passes what any target's code reads or writes.
  std::vector<bundle::Param*> first = bundle::callerParams(out.front().instance.params);
  for (TargetedInstance& other : out) {
    std::vector<bundle::Param*> theirs = bundle::callerParams(other.instance.params);
    bool alike = theirs.size() == first.size();
    for (size_t p = 0; alike && p < first.size(); ++p)
      alike = first[p]->name == theirs[p]->name && first[p]->type == theirs[p]->type &&
              (!first[p]->element || !theirs[p]->element || first[p]->element == theirs[p]->element);
    if (!alike) {
      auto names = [](const std::vector<bundle::Param*>& ps) {
        std::string s;
        for (const bundle::Param* p : ps) s += (s.empty() ? "" : ", ") + p->name + ": " + p->type.name();
        return s;
      };
      diags.report(ir::Severity::Error, spec.file, k.templateLoc,
                   describeInstance(k) + " builds kernels of different parameters for " + other.targets.front().name() +
                       " (" + names(theirs) + ") and " + out.front().targets.front().name() + " (" + names(first) + ")");
      return std::nullopt;
    }
    for (size_t p = 0; p < first.size(); ++p) {
      first[p]->access |= theirs[p]->access;
      if (!first[p]->element) first[p]->element = theirs[p]->element;
      if (!first[p]->extent) first[p]->extent = theirs[p]->extent;
    }
  }
  for (TargetedInstance& other : out) {
    std::vector<bundle::Param*> theirs = bundle::callerParams(other.instance.params);
    for (size_t p = 0; p < first.size(); ++p) {
      theirs[p]->access = first[p]->access;
      theirs[p]->element = first[p]->element;
      theirs[p]->extent = first[p]->extent;
    }
  }
  return out;
}

}  // namespace tn::spec
