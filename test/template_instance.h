// A built-in template instantiated as a spec entry of its own would be (compiler/Spec.h), for
// the tests that go over every template.
#pragma once

#include <optional>

#include "compiler/Spec.h"

namespace tn::testing {

inline std::optional<spec::Instance> instantiateTemplate(const kernels::Template& t, const kernels::Options& options,
                                                         ir::Diagnostics& diags) {
  spec::Spec s;
  s.file = "spec.toml";
  s.name = "b";
  spec::KernelSpec k;
  k.name = t.name;
  k.tmpl = &t;
  k.options = options;
  spec::TirCache tirs;
  return spec::instantiate(s, k, tirs, diags);
}

}  // namespace tn::testing
