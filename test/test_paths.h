// Where the build's test bundles are at run time. The GPU tests run wherever the build folder
// was copied to (tools/gpu-check.sh on a GPU machine), so paths are found from the test binary
// (BUILD/test/truenoc_tests -> BUILD) rather than from where it was compiled;
// TRUENOC_TEST_BUILD_DIR overrides both.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace tn::testpaths {

inline std::string buildDir() {
  if (const char* env = std::getenv("TRUENOC_TEST_BUILD_DIR")) return env;
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec && self.has_parent_path() && self.parent_path().has_parent_path()) return self.parent_path().parent_path().string();
  return TRUENOC_BINARY_DIR;
}

// A file of the build folder, e.g. bundle("test/gpu_test.tnb").
inline std::string inBuild(const std::string& relative) { return buildDir() + "/" + relative; }

}  // namespace tn::testpaths
