#include "compiler/Generator.h"

#include <cstdio>

#include "compiler/Command.h"

namespace tn::generator {

int run(int argc, char** argv, std::vector<kernels::Template> templates) {
  for (kernels::Template& t : templates) {
    if (auto why = kernels::addTemplate(std::move(t))) {
      std::fprintf(stderr, "%s: error: %s\n", argc > 0 ? argv[0] : "generator", why->c_str());
      return cli::kInputError;
    }
  }
  return cli::run(argc, argv);
}

}  // namespace tn::generator
