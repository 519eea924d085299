// The truenoc CLI: each subcommand lives in its own file and registers itself here.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backends/bundle/Bundle.h"
#include "backends/ptx/Ptxas.h"
#include "compiler/Input.h"
#include "compiler/Options.h"
#include "compiler/Output.h"
#include "ir/Diagnostics.h"
#include "ir/IR.h"

namespace tn::cli {

// Exit codes shared by every subcommand.
enum Exit : int { kOk = 0, kInputError = 1, kUsageError = 2 };

// A subcommand: `setup` declares its options and returns the action run when chosen.
struct Command {
  const char* name;
  const char* summary;
  std::function<std::function<int()>(Options&)> setup;
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

// The whole command line; no exception leaves it (see guarded).
int run(int argc, char** argv);
// The CLI's error boundary: runs `body`, turning any exception into "internal error: ..." on
// stderr and exit status 1.
int guarded(const std::function<int()>& body);

// ---- helpers shared by the commands --------------------------------------------------------
// "error: MESSAGE" on stderr, the message through ir::displayText (no raw control bytes or
// invalid UTF-8 from file names or contents reach the terminal).
void printError(const std::string& message);
// printError of a printf-style message (every "error: ..." line of the CLI goes through these).
void printErrorf(const char* format, ...) __attribute__((format(printf, 1, 2)));
// Reads FILE, or stdin for "-", within the cap of its kind (compiler/Input.h). nullopt (with a
// message on stderr) when unreadable or too large.
std::optional<std::string> readInput(const std::string& path, io::InputKind kind = io::InputKind::Source);
// Writes to OUT, or stdout for "-", under the rules of compiler/Output.h: `what` names the
// option in messages; `inputs` are the files the command read. false (with a message on stderr)
// on failure.
bool writeOutput(const std::string& path, const std::string& text, const std::string& what = "-o",
                 std::span<const std::string> inputs = {});
// Writes all of `outputs` or none of them; false (with a message on stderr) on failure.
bool writeOutputs(std::span<const io::OutputFile> outputs, std::span<const std::string> inputs);
// Refuses, before any work, outputs that writeOutputs would refuse; false with a message on stderr.
bool checkOutputs(std::span<const io::OutputFile> outputs, std::span<const std::string> inputs);
// --ptxas PATH and --ptxas-timeout SECONDS, for the commands that run ptxas.
void addPtxasOptions(Options& cli, std::string& path, unsigned& timeoutSeconds);
// "error: ptxas failed for kernel K on T: LOG" (or that it timed out) on stderr; nothing for an
// interrupted run, which ends by its signal instead.
void printPtxasFailure(const std::string& kernel, const bundle::Target& target, const ptxas::Output& out);
// Prints a diagnostic to stderr in file:line:col form, or counts it as not shown: past the
// command's --error-limit, errors are counted instead of printed, and so are the notes that follow
// them (the process ends with one line saying how many were not shown).
void printDiagnostic(const ir::Diagnostic& d);
// printDiagnostic of each diagnostic, in order.
void printDiagnostics(const ir::Diagnostics& diags);
// Errors printed before the rest are only counted (0: no limit); every command's --error-limit.
inline constexpr unsigned kDefaultErrorLimit = 20;
// Reads and parses a .tir file; prints diagnostics. The display name of stdin is "<stdin>".
std::optional<ir::Module> loadModule(const std::string& path, ir::Diagnostics& diags);
// The value of a target option (--target, --targets): a supported target, or nullopt with
// "error: OPTION: invalid target ... (supported: ...)" on stderr. Every command checks targets so.
std::optional<bundle::Target> parseTargetOption(const std::string& text, const char* option);
// Reads a bundle into `bytes` and validates it completely (every payload included); nullopt
// with a message on stderr when it is unreadable or invalid. The reader borrows `bytes`.
std::optional<bundle::Reader> openBundle(const std::string& path, std::string& bytes);

}  // namespace tn::cli
