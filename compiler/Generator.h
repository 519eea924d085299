// A generator: truenoc with a project's own templates (docs/generators.md). Its main is
//
//   int main(int argc, char** argv) { return tn::generator::run(argc, argv, {myTemplate()}); }
//
// and truenoc_add_bundle(... GENERATOR <target>) runs it in place of truenoc.
#pragma once

#include <vector>

#include "kernels/Template.h"

namespace tn::generator {

// Registers `templates` beside the built-in ones, then runs the truenoc command line (build,
// list-templates, embed, ...) on argv. A template the registry refuses is an error naming it
// (exit status 1) before any command runs.
int run(int argc, char** argv, std::vector<kernels::Template> templates);

}  // namespace tn::generator
