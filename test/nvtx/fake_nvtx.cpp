// A stand-in NVTX library for test/nvtx_test.cpp: records the ranges pushed and popped.
#include <mutex>
#include <string>

namespace {
std::mutex mu;
std::string log;
}  // namespace

extern "C" {
int nvtxRangePushA(const char* name) {
  std::lock_guard lock(mu);
  log += std::string("push ") + name + ";";
  return 0;
}
int nvtxRangePop() {
  std::lock_guard lock(mu);
  log += "pop;";
  return 0;
}
// The ranges so far, then forgotten.
const char* fake_nvtx_take() {
  static std::string out;
  std::lock_guard lock(mu);
  out = log;
  log.clear();
  return out.c_str();
}
}
