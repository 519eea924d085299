// The ptxas driver: finds ptxas, assembles one PTX module for one target in a private temporary
// folder and reads the resource usage that `ptxas -v` reports. Runs ptxas directly (no shell);
// never prints. Safe to call from several threads at once.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/bundle/Bundle.h"

namespace tn::ptxas {

// ptxas from `explicitPath` when given (it must be an executable file), else $CUDA_HOME/bin,
// $CUDA_PATH/bin, then each folder of $PATH. nullopt with `why` set when none is found.
std::optional<std::string> find(const std::string& explicitPath, std::string& why);

// A private folder made with mkdtemp and removed, with its contents, on destruction.
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
  std::string kernel;  // the .entry name, also used for file names
  bundle::Target target;
  std::string ptx;
};

struct Output {
  bool ok = false;
  std::string cubin;
  bundle::Resources resources;
  std::string log;  // ptxas's messages, temporary paths removed
};

// Runs `ptxas -v -arch=TARGET -o K.TARGET.cubin K.TARGET.ptx` in `workDir`.
Output assemble(const std::string& ptxas, const std::string& workDir, const Job& job);

// Reads the `-v` report of entry `kernel`; false when the report has no complete entry for it.
bool parseResources(std::string_view log, std::string_view kernel, bundle::Resources& out);

// The version of the ptxas at `ptxas`, from `ptxas --version` ("13.0.88" for a line
// "Cuda compilation tools, release 13.0, V13.0.88"); nullopt with `why` set when it cannot be run
// or prints no such line. Bundles record it next to the cubins it assembled.
std::optional<std::string> version(const std::string& ptxas, std::string& why);
// The version in `ptxas --version` output; nullopt when there is none.
std::optional<std::string> parseVersion(std::string_view text);

}  // namespace tn::ptxas
