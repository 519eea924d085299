// The ptxas driver: finds ptxas, assembles one PTX module for one target in a private temporary
// folder and reads the resource usage that `ptxas -v` reports. Runs ptxas directly (no shell),
// in a process group of its own, killed when it outlives its timeout; never prints. Safe to call
// from several threads at once.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/bundle/Bundle.h"

namespace tn::ptxas {

// The folders find() looks in, in order: $CUDA_HOME/bin, $CUDA_PATH/bin, each folder of $PATH,
// then, when neither CUDA_HOME nor CUDA_PATH is set, /usr/local/cuda/bin (the toolkit's default
// install folder).
std::vector<std::string> searchFolders();

// ptxas from `explicitPath` when given (it must be an executable file), else the first
// executable `ptxas` in searchFolders(). nullopt with `why` set when none is found.
std::optional<std::string> find(const std::string& explicitPath, std::string& why);

// Generous: a large kernel takes ptxas seconds, not minutes; 0 means no limit.
inline constexpr unsigned kDefaultTimeoutSeconds = 300;

// A private folder made with mkdtemp and removed, with its contents, on destruction.
//
// While any TempDir exists, SIGINT, SIGTERM and SIGHUP (unless ignored) do not end the process
// at once: the handler records the signal and kills every running ptxas's process group, which
// is all it does (both async-signal-safe). assemble() then fails with `interrupted` and starts no
// more ptxas; the caller unwinds, the destructor removes the folder and restores the previous
// handlers, and the caller re-raises interruptedBy() so the process ends as the signal demands.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  bool ok() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  const std::string& error() const { return error_; }

 private:
  std::string path_;
  std::string error_;
};

struct Job {
  std::string kernel;  // the .entry name, also used for file names (a module's: its name)
  bundle::Target target;
  std::string ptx;
  bool lineInfo = false;  // -lineinfo: keep the PTX's .loc lines in the cubin
  // The .entry functions whose -v report is read, for PTX holding several kernels (a module);
  // empty: {kernel}.
  std::vector<std::string> entries = {};
  // false: no -v and no resources, only whether ptxas accepts the PTX (-v doubles ptxas's time
  // on PTX of thousands of entries).
  bool resources = true;
};

struct Output {
  bool ok = false;
  bool timedOut = false;     // killed after the timeout
  bool interrupted = false;  // a signal arrived (see TempDir): not run, or killed
  std::string cubin;
  std::vector<bundle::Resources> resources;  // per entry of the job, in its order
  std::string log;  // ptxas's messages, temporary paths removed
};

// Runs `ptxas -v [-lineinfo] -arch=TARGET -o K.TARGET.cubin K.TARGET.ptx` in `workDir`, killing it after
// `timeoutSeconds` (0: no limit); ok when it succeeds and reports the resources of every entry
// (when the job asks for them).
Output assemble(const std::string& ptxas, const std::string& workDir, const Job& job,
                unsigned timeoutSeconds = kDefaultTimeoutSeconds);

// The signal that arrived while a TempDir existed, or 0.
int interruptedBy();

// Reads the `-v` report of entry `kernel`; false when the report has no complete entry for it.
bool parseResources(std::string_view log, std::string_view kernel, bundle::Resources& out);

// The version of the ptxas at `ptxas`, from `ptxas --version` ("13.0.88" for a line
// "Cuda compilation tools, release 13.0, V13.0.88"); nullopt with `why` set when it cannot be run,
// prints no such line, or runs past `timeoutSeconds` (0: no limit; then it is killed). Bundles
// record it next to the cubins it assembled.
std::optional<std::string> version(const std::string& ptxas, std::string& why,
                                   unsigned timeoutSeconds = kDefaultTimeoutSeconds);
// The version in `ptxas --version` output; nullopt when there is none.
std::optional<std::string> parseVersion(std::string_view text);

}  // namespace tn::ptxas
