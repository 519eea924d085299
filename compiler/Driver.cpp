#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <exception>
#include <stdexcept>

#include <CLI/CLI.hpp>

#include "backends/ptx/Ptxas.h"
#include "compiler/Command.h"
#include "ir/Parser.h"

namespace tn::cli {

namespace {

// The process's error budget (--error-limit): errors printed, and errors (with their notes) not.
struct ErrorBudget {
  unsigned limit = kDefaultErrorLimit;
  unsigned shown = 0, hidden = 0;
  bool hidingNotes = false;
};

ErrorBudget& errorBudget() {
  static ErrorBudget budget;
  return budget;
}

}  // namespace

const std::vector<Command>& commands() {
  static const std::vector<Command> all = {optCommand(),     emitPtxCommand(), buildCommand(),
                                           inspectCommand(), embedCommand(),   listTemplatesCommand(),
                                           interpCommand(), explainCommand()};
  return all;
}

int guarded(const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "internal error: %s\n", ir::displayText(e.what()).c_str());
  } catch (...) {
    std::fprintf(stderr, "internal error: an unknown exception\n");
  }
  return kInputError;
}

// ---- Options over CLI11 (compiler/Options.h) -------------------------------------------------
Option& Option::required() {
  option_->required();
  return *this;
}

Option& Option::showDefault() {
  option_->capture_default_str();
  return *this;
}

Option& Option::range(int64_t lo, int64_t hi) {
  // CLI11 reads the value in the range's type: the option's own, as if declared on it.
  switch (kind_) {
    case Kind::Unsigned: option_->check(CLI::Range(static_cast<unsigned>(lo), static_cast<unsigned>(hi))); break;
    case Kind::Int: option_->check(CLI::Range(static_cast<int>(lo), static_cast<int>(hi))); break;
    case Kind::Int64: option_->check(CLI::Range(lo, hi)); break;
    case Kind::UInt64: option_->check(CLI::Range(static_cast<uint64_t>(lo), static_cast<uint64_t>(hi))); break;
    default: throw std::logic_error("range() on an option that holds no number: " + option_->get_name());
  }
  return *this;
}

Option& Option::oneOf(std::initializer_list<const char*> values) {
  option_->check(CLI::IsMember(std::vector<std::string>(values.begin(), values.end())));
  return *this;
}

Option& Option::excludes(const Option& other) {
  option_->excludes(other.option_);
  return *this;
}

Option Options::option(const std::string& names, std::string& into, const std::string& help) {
  return {app_.add_option(names, into, help), Option::Kind::String};
}
Option Options::option(const std::string& names, std::optional<std::string>& into, const std::string& help) {
  return {app_.add_option(names, into, help), Option::Kind::OptionalString};
}
Option Options::option(const std::string& names, std::vector<std::string>& into, const std::string& help) {
  return {app_.add_option(names, into, help), Option::Kind::Strings};
}
Option Options::option(const std::string& names, unsigned& into, const std::string& help) {
  return {app_.add_option(names, into, help), Option::Kind::Unsigned};
}
Option Options::option(const std::string& names, int& into, const std::string& help) {
  return {app_.add_option(names, into, help), Option::Kind::Int};
}
Option Options::option(const std::string& names, int64_t& into, const std::string& help) {
  return {app_.add_option(names, into, help), Option::Kind::Int64};
}
Option Options::option(const std::string& names, uint64_t& into, const std::string& help) {
  return {app_.add_option(names, into, help), Option::Kind::UInt64};
}
Option Options::flag(const std::string& names, bool& into, const std::string& help) {
  return {app_.add_flag(names, into, help), Option::Kind::Flag};
}

namespace {

int runCommandLine(int argc, char** argv) {
  CLI::App app{"truenoc: an ahead-of-time kernel compiler for NVIDIA GPUs", "truenoc"};
  app.set_version_flag("--version", std::string("truenoc ") + TRUENOC_VERSION);
  app.require_subcommand(1);
  std::function<int()> action;
  for (const Command& c : commands()) {
    CLI::App* sub = app.add_subcommand(c.name, c.summary);
    Options options(*sub);
    auto act = c.setup(options);
    sub->add_option("--error-limit", errorBudget().limit,
                    "Print at most this many errors, then count the rest (0: print all)")
        ->capture_default_str();
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

}  // namespace

int run(int argc, char** argv) {
  errorBudget() = {};
  int status = guarded([&] { return runCommandLine(argc, argv); });
  if (unsigned hidden = errorBudget().hidden)
    std::fprintf(stderr, "note: %u more error%s not shown (--error-limit %u; 0 shows all)\n", hidden,
                 hidden == 1 ? "" : "s", errorBudget().limit);
  // A SIGINT or SIGTERM that arrived while ptxas ran was deferred until its temporary folder
  // was removed (backends/ptx/Ptxas.h); now it ends the process as the signal would have.
  if (int sig = ptxas::interruptedBy()) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
  return status;
}

void printError(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", ir::displayText(message).c_str());
}

void printErrorf(const char* format, ...) {
  va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string message(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(message.data(), message.size() + 1, format, again);
  va_end(again);
  printError(message);
}

std::optional<std::string> readInput(const std::string& path, io::InputKind kind) {
  std::string text, error;
  if (!io::readFile(path, kind, text, error)) {
    printError(error);
    return std::nullopt;
  }
  return text;
}

bool writeOutput(const std::string& path, const std::string& text, const std::string& what,
                 std::span<const std::string> inputs) {
  const io::OutputFile out[] = {{path, what, text}};
  return writeOutputs(out, inputs);
}

bool writeOutputs(std::span<const io::OutputFile> outputs, std::span<const std::string> inputs) {
  std::string error;
  if (io::writeFiles(outputs, inputs, error)) return true;
  printError(error);
  return false;
}

bool checkOutputs(std::span<const io::OutputFile> outputs, std::span<const std::string> inputs) {
  std::string error;
  if (io::checkOutputs(outputs, inputs, error)) return true;
  printError(error);
  return false;
}

void addPtxasOptions(Options& cli, std::string& path, unsigned& timeoutSeconds) {
  cli.option("--ptxas", path,
             "The ptxas to run (default: the first in $CUDA_HOME/bin, $CUDA_PATH/bin, $PATH, then "
             "/usr/local/cuda/bin when neither variable is set)");
  cli.option("--ptxas-timeout", timeoutSeconds, "Seconds one ptxas run may take before it is killed (0: no limit)")
      .showDefault();
}

void printPtxasFailure(const std::string& kernel, const bundle::Target& target, const ptxas::Output& out) {
  if (out.interrupted) return;
  if (out.timedOut)
    printErrorf("kernel '%s' on %s: %s; raise the limit with --ptxas-timeout SECONDS", kernel.c_str(),
                 target.name().c_str(), out.log.c_str());
  else
    printErrorf("ptxas failed for kernel '%s' on %s:\n%s", kernel.c_str(), target.name().c_str(),
                out.log.c_str());
}

void printDiagnostic(const ir::Diagnostic& d) {
  ErrorBudget& b = errorBudget();
  if (d.severity == ir::Severity::Error) {
    b.hidingNotes = b.limit != 0 && b.shown >= b.limit;
    if (b.hidingNotes) {
      ++b.hidden;
      return;
    }
    ++b.shown;
  } else if (d.severity == ir::Severity::Note && b.hidingNotes) {
    return;
  } else if (d.severity != ir::Severity::Note) {
    b.hidingNotes = false;
  }
  std::fprintf(stderr, "%s\n", ir::formatDiagnostic(d).c_str());
}

void printDiagnostics(const ir::Diagnostics& diags) {
  for (const ir::Diagnostic& d : diags.all()) printDiagnostic(d);
}

std::optional<bundle::Target> parseTargetOption(const std::string& text, const char* option) {
  std::string why;
  std::optional<bundle::Target> t = bundle::Target::parseSupported(text, why);
  if (!t) printError(std::string(option) + ": " + why);
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
