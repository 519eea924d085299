// truenoc list-templates [TEMPLATE...] [--names]: the kernel templates a spec can instantiate
// (built-in, and in a generator its own: docs/generators.md), with their options (type, default,
// range, doc), parameter signature and launch rule (for the defaults); only the named ones when
// names are given, only their names with --names.
#include <memory>
#include <span>

#include "compiler/Command.h"
#include "compiler/Spec.h"
#include "kernels/Template.h"

namespace tn::cli {

namespace {

std::string optionLine(const kernels::OptionSpec& o) {
  std::string s = "    " + o.name + " (" + std::string(kernels::optionTypeName(o.type)) + ", default " +
                  kernels::optionValueText(o.defaultValue) + "): " + o.doc;
  std::vector<std::string> limits;
  if (o.min != std::numeric_limits<int64_t>::min() || o.max != std::numeric_limits<int64_t>::max())
    limits.push_back(std::to_string(o.min) + " to " + std::to_string(o.max));
  if (o.multipleOf > 1) limits.push_back("a multiple of " + std::to_string(o.multipleOf));
  if (!o.choices.empty()) {
    std::string c = "one of";
    for (size_t i = 0; i < o.choices.size(); ++i) c += (i ? ", \"" : " \"") + o.choices[i] + "\"";
    limits.push_back(c);
  }
  for (size_t i = 0; i < limits.size(); ++i) s += (i ? ", " : "; ") + limits[i];
  return s;
}

// The template instantiated with its defaults, as the spec loader would.
std::string describeTemplate(const kernels::Template& t) {
  std::string out = t.name + "\n  " + t.summary + "\n";
  ir::Diagnostics d;
  auto inst = spec::instantiateTemplate(t, t.defaults(), d);
  if (inst) {
    std::string sig = t.name + "(";
    for (size_t i = 0; i < inst->params.size(); ++i) sig += (i ? ", " : "") + inst->params[i].name + ": " + inst->params[i].type.name();
    out += "  signature: " + sig + ")\n";
    out += "  launch: " + bundle::describe(inst->launch) + "\n";
    for (const bundle::TensorMapRule& m : inst->launch.tensorMaps) out += "  tensor map: " + bundle::describe(m) + "\n";
  } else {
    for (const ir::Diagnostic& diag : d.all()) out += "  cannot instantiate with defaults: " + diag.message + "\n";
  }
  if (t.options.empty()) out += "  options: none\n";
  else out += "  options:\n";
  for (const kernels::OptionSpec& o : t.options) out += optionLine(o) + "\n";
  return out;
}

}  // namespace

Command listTemplatesCommand() {
  struct State {
    std::vector<std::string> names;
    bool namesOnly = false;
  };
  return {"list-templates", "Document the kernel templates a spec can instantiate (a generator's own too)",
          [](Options& opts) {
            auto st = std::make_shared<State>();
            opts.option("TEMPLATE", st->names, "Only these templates (default: all of them)");
            opts.flag("--names", st->namesOnly, "Print only the templates' names, one per line");
            return std::function<int()>([st] {
              std::vector<const kernels::Template*> chosen;
              const std::span<const kernels::Template> all = kernels::templates();
              if (st->names.empty())
                for (const kernels::Template& t : all) chosen.push_back(&t);
              bool unknown = false;
              for (const std::string& name : st->names) {
                if (const kernels::Template* t = kernels::findTemplate(all, name)) {
                  chosen.push_back(t);
                  continue;
                }
                std::string message = "unknown template '" + name + "'";
                std::vector<std::string> near = kernels::similarTemplates(all, name);
                for (size_t i = 0; i < near.size(); ++i) message += (i ? ", '" : " (did you mean '") + near[i] + "'";
                printError(message + (near.empty() ? "" : "?)") + "; 'truenoc list-templates --names' lists them all");
                unknown = true;
              }
              if (unknown) return int(kInputError);
              std::string out;
              for (const kernels::Template* t : chosen)
                out += st->namesOnly ? t->name + "\n" : (out.empty() ? "" : "\n") + describeTemplate(*t);
              return writeOutput("-", out) ? int(kOk) : int(kInputError);
            });
          }};
}

}  // namespace tn::cli
