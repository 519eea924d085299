// The template registry. Each entry is the whole registration of one template: its options,
// how it builds the kernel and its launch rule.
#include <algorithm>

#include "kernels/Examples.h"
#include "kernels/Library.h"
#include "kernels/Template.h"

namespace tn::kernels {

namespace {

ir::Kernel& onlyKernel(ir::Module& m) { return m.kernels.front(); }

bool hasParam(const ir::Kernel& k, std::string_view name) {
  return std::any_of(k.params.begin(), k.params.end(), [&](const ir::KernelParam& p) { return k.value(p.value).name == name; });
}

std::vector<Template> makeTemplates() {
  std::vector<Template> all = {
      {
          "row_sum",
          "y[r] = sum of row r of the row-major f32 matrix x (rows x cols); one block of 256 threads per row",
          {},
          [](const Options&, ir::Diagnostics&) -> std::optional<ir::Module> {
            ir::Module m = buildRowSumModule();
            // The grid has one block per row, so the launch needs the row count as a parameter.
            ir::Kernel& k = onlyKernel(m);
            if (!hasParam(k, "rows")) k.addParam(ir::Type::u32(), "rows");
            return m;
          },
          [](const Options&) { return LaunchRule{{256}, {Expr::param("rows")}, 0}; },
      },
      {
          "vadd",
          "c[i] = a[i] + b[i] for i < n over f32 vectors; one thread per element",
          {{"block", OptionType::Int, int64_t{256}, "threads per block", 32, 1024, 32, {}}},
          [](const Options& o, ir::Diagnostics&) -> std::optional<ir::Module> {
            ir::Module m = buildVaddModule();
            // The kernel indexes with ntid, so any block size works; maxntid states the chosen one.
            onlyKernel(m).maxntid = ir::Dim3{static_cast<unsigned>(o.integer("block")), 1, 1};
            return m;
          },
          [](const Options& o) {
            uint32_t block = static_cast<uint32_t>(o.integer("block"));
            return LaunchRule{{block}, {ceilDiv(Expr::param("n"), block)}, 0};
          },
      },
  };
  all[0].extents = lib::allExtents({lib::sameExtent({"x"}, Expr::param("rows") * Expr::param("cols")),
                                    lib::sameExtent({"y"}, Expr::param("rows"))});
  all[1].extents = lib::sameExtent({"a", "b", "c"}, Expr::param("n"));
  lib::addElementwise(all);
  lib::addSoftmax(all);
  lib::addNorms(all);
  lib::addRowOps(all);
  lib::addPenalties(all);
  lib::addSpeculative(all);
  lib::addRope(all);
  lib::addGemv(all);
  lib::addGemm(all);
  lib::addAttention(all);
  lib::addAttentionPrefill(all);
  lib::addQuant(all);
  lib::addFp8(all);
  lib::addMoe(all);
  std::sort(all.begin(), all.end(), [](const Template& a, const Template& b) { return a.name < b.name; });
  return all;
}

}  // namespace

std::string_view optionTypeName(OptionType t) {
  switch (t) {
    case OptionType::Int: return "integer";
    case OptionType::Bool: return "boolean";
    case OptionType::String: return "string";
  }
  return "?";
}

std::string optionValueText(const OptionValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  return "\"" + std::get<std::string>(v) + "\"";
}

std::optional<std::string> checkOption(const OptionSpec& spec, const OptionValue& v) {
  bool typeOk = (spec.type == OptionType::Int && std::holds_alternative<int64_t>(v)) ||
                (spec.type == OptionType::Bool && std::holds_alternative<bool>(v)) ||
                (spec.type == OptionType::String && std::holds_alternative<std::string>(v));
  if (!typeOk) return "option '" + spec.name + "' must be a " + std::string(optionTypeName(spec.type));
  if (const auto* i = std::get_if<int64_t>(&v)) {
    if (*i < spec.min || *i > spec.max)
      return "option '" + spec.name + "' must be between " + std::to_string(spec.min) + " and " + std::to_string(spec.max) +
             ", not " + std::to_string(*i);
    if (spec.multipleOf > 1 && *i % spec.multipleOf != 0)
      return "option '" + spec.name + "' must be a multiple of " + std::to_string(spec.multipleOf) + ", not " + std::to_string(*i);
  }
  if (const auto* s = std::get_if<std::string>(&v); s && !spec.choices.empty() &&
      std::find(spec.choices.begin(), spec.choices.end(), *s) == spec.choices.end()) {
    std::string list;
    for (const std::string& c : spec.choices) list += (list.empty() ? "\"" : ", \"") + c + "\"";
    return "option '" + spec.name + "' must be one of " + list + ", not \"" + *s + "\"";
  }
  return std::nullopt;
}

Options Template::defaults() const {
  Options o;
  for (const OptionSpec& s : options) o.set(s.name, s.defaultValue);
  return o;
}

namespace {

std::vector<Template>& registry() {
  static std::vector<Template> all = makeTemplates();
  return all;
}

bool isIdentifier(std::string_view s) {
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  return !s.empty() && alpha(s[0]) &&
         std::all_of(s.begin(), s.end(), [&](char c) { return alpha(c) || (c >= '0' && c <= '9'); });
}

}  // namespace

std::span<const Template> templates() { return registry(); }

std::optional<std::string> addTemplate(Template t) {
  if (!isIdentifier(t.name)) return "template name '" + t.name + "' is not an identifier";
  if (findTemplate(templates(), t.name)) return "a template named '" + t.name + "' already exists";
  if (!t.build || !t.launch) return "template '" + t.name + "' needs a build and a launch function";
  std::vector<Template>& all = registry();
  auto at = std::lower_bound(all.begin(), all.end(), t.name, [](const Template& a, const std::string& n) { return a.name < n; });
  all.insert(at, std::move(t));
  return std::nullopt;
}

const Template* findTemplate(std::span<const Template> all, std::string_view name) {
  for (const Template& t : all)
    if (t.name == name) return &t;
  return nullptr;
}

namespace {

// Edit distance of a and b (insertions, deletions, substitutions).
size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::vector<std::string> similarTemplates(std::span<const Template> all, std::string_view name) {
  std::vector<std::string> out;
  for (const Template& t : all)
    if ((name.size() >= 3 && t.name.find(name) != std::string::npos) || editDistance(name, t.name) * 3 <= name.size())
      out.push_back(t.name);
  return out;
}

}  // namespace tn::kernels
