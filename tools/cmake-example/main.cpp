// Uses the generated header without a GPU: a launcher that records each launch stands in for
// the runtime, and the program checks the grids the launch rules computed.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "decode.hpp"
#include "example_kernels.hpp"

namespace {

struct Recorded {
  std::string kernel;
  unsigned grid = 0, block = 0, args = 0;
};

int record(void* user, const truenoc::embed::Launch& l) {
  static_cast<std::vector<Recorded>*>(user)->push_back({l.kernel, l.grid[0], l.block[0], l.num_args});
  return 0;
}

}  // namespace

int main() {
  // The embedded bundle starts with the .tnb magic.
  const unsigned char magic[8] = {0x89, 'T', 'N', 'B', '\r', '\n', 0x1a, '\n'};
  if (example_kernels::bundle_size() < sizeof magic || std::memcmp(example_kernels::bundle_bytes(), magic, sizeof magic) != 0) {
    std::fprintf(stderr, "the embedded bundle has no .tnb magic\n");
    return 1;
  }
  std::vector<Recorded> launches;
  truenoc::embed::Launcher launcher{record, &launches};
  float* a = nullptr;  // device pointers in a real program
  int rc = example_kernels::vadd(launcher, nullptr, a, a, a, 1000u);
  rc |= example_kernels::scale(launcher, nullptr, a, a, 2.0f, 1000u);
  rc |= example_kernels::vadd(launcher, nullptr, a, a, a, 0u);  // empty grid: nothing launched
  // Library kernels of the decode bundle: one block per row, one warp per short softmax row.
  rc |= decode::rmsnorm(launcher, nullptr, a, a, a, 4u, 4096u, 1e-5f);
  rc |= decode::softmax(launcher, nullptr, a, a, 20u, 100u);
  rc |= decode::gemv_bf16(launcher, nullptr, a, a, a, 14336u, 4096u);
  if (rc != 0 || launches.size() != 5) {
    std::fprintf(stderr, "unexpected launch results\n");
    return 1;
  }
  for (const Recorded& r : launches) std::printf("%s grid %u block %u args %u\n", r.kernel.c_str(), r.grid, r.block, r.args);
#ifdef TRUENOC_HAVE_RUNTIME
  // truenoc_add_bundle linked libtruenort: on a GPU, truenoc::embed::runtime_launcher(rt) with a
  // truenort::EmbedLauncher rt(ctx) runs these launches for real. Without a driver this is an
  // error value, not a crash.
  auto ctx = truenort::Context::create(0);
  std::printf("runtime: linked (%s)\n", ctx.ok() ? "device found" : "no device");
#endif
  return 0;
}
