#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "compiler/Command.h"
#include "ir/Parser.h"


namespace tn::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> all = {optCommand(),     emitPtxCommand(), buildCommand(),
                                           inspectCommand(), embedCommand(),   listTemplatesCommand(),
                                           interpCommand(), explainCommand()};
  return all;
}

int run(int argc, char** argv) {
  CLI::App app{"truenoc: an ahead-of-time kernel compiler for NVIDIA GPUs", "truenoc"};
  app.set_version_flag("--version", std::string("truenoc ") + TRUENOC_VERSION);
  app.require_subcommand(1);
  std::function<int()> action;
  for (const Command& c : commands()) {
    CLI::App* sub = app.add_subcommand(c.name, c.summary);
    auto act = c.setup(*sub);
    sub->callback([&action, act] { action = act; });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kUsageError;
  }
  return action ? action() : kUsageError;
}

std::optional<std::string> readInput(const std::string& path) {
  if (path == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "error: cannot open '%s'\n", path.c_str());
    return std::nullopt;
  }
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) {
    std::fprintf(stderr, "error: cannot read '%s'\n", path.c_str());
    return std::nullopt;
  }
  return text;
}

bool writeOutput(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    if (std::fflush(stdout) != 0) {
      std::fprintf(stderr, "error: cannot write to standard output\n");
      return false;
    }
    return true;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "error: cannot write '%s'\n", path.c_str());
    return false;
  }
  return true;
}

void printDiagnostics(const ir::Diagnostics& diags) {
  for (const ir::Diagnostic& d : diags.all()) std::fprintf(stderr, "%s\n", ir::formatDiagnostic(d).c_str());
}

std::optional<bundle::Target> parseTargetOption(const std::string& text, const char* option) {
  std::string why;
  std::optional<bundle::Target> t = bundle::Target::parseSupported(text, why);
  if (!t) std::fprintf(stderr, "error: %s: %s\n", option, why.c_str());
  return t;
}

std::optional<ir::Module> loadModule(const std::string& path, ir::Diagnostics& diags) {
  auto text = readInput(path);
  if (!text) return std::nullopt;
  auto mod = ir::parseModule(*text, path == "-" ? "<stdin>" : path, diags);
  printDiagnostics(diags);
  return mod;
}

}  // namespace tn::cli
