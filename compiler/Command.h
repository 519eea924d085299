// The truenoc CLI: each subcommand lives in its own file and registers itself here.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "backends/bundle/Bundle.h"
#include "ir/Diagnostics.h"
#include "ir/IR.h"

namespace tn::cli {

// Exit codes shared by every subcommand.
enum Exit : int { kOk = 0, kInputError = 1, kUsageError = 2 };

// A subcommand: `setup` declares its options on `app` and returns the action run when chosen.
struct Command {
  const char* name;
  const char* summary;
  std::function<std::function<int()>(CLI::App&)> setup;
};

// The registry, in the order `truenoc --help` lists them.
const std::vector<Command>& commands();

// Each command file defines one of these; commands() lists them.
Command optCommand();
Command emitPtxCommand();
Command buildCommand();
Command inspectCommand();
Command embedCommand();
Command listTemplatesCommand();
Command interpCommand();
Command explainCommand();

int run(int argc, char** argv);

// ---- helpers shared by the commands --------------------------------------------------------
// Reads FILE, or stdin for "-". nullopt (with a message on stderr) when unreadable.
std::optional<std::string> readInput(const std::string& path);
// Writes to OUT, or stdout for "-". false (with a message on stderr) on failure.
bool writeOutput(const std::string& path, const std::string& text);
// Prints every diagnostic to stderr in file:line:col form.
void printDiagnostics(const ir::Diagnostics& diags);
// Reads and parses a .tir file; prints diagnostics. The display name of stdin is "<stdin>".
std::optional<ir::Module> loadModule(const std::string& path, ir::Diagnostics& diags);
// The value of a target option (--target, --targets): a supported target, or nullopt with
// "error: OPTION: invalid target ... (supported: ...)" on stderr. Every command checks targets so.
std::optional<bundle::Target> parseTargetOption(const std::string& text, const char* option);
// Reads a bundle into `bytes` and validates it completely (every payload included); nullopt
// with a message on stderr when it is unreadable or invalid. The reader borrows `bytes`.
std::optional<bundle::Reader> openBundle(const std::string& path, std::string& bytes);

}  // namespace tn::cli
