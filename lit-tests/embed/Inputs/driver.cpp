// Calls the launch function generated for Inputs/tile.tir with a launcher that records the
// launch, and prints what the launch rule computed for several argument sets.
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "test-shapes.hpp"

namespace {

struct Seen {
  int calls = 0;
  truenoc::embed::Launch last{};
  float stream_arg = 0;
  std::int32_t rows_arg = 0;
};

int record(void* user, const truenoc::embed::Launch& l) {
  Seen* s = static_cast<Seen*>(user);
  ++s->calls;
  s->last = l;
  std::memcpy(&s->rows_arg, l.args[1], sizeof s->rows_arg);
  std::memcpy(&s->stream_arg, l.args[4], sizeof s->stream_arg);
  return 0;
}

void launch(const char* what, std::int32_t rows, std::uint32_t cols, std::uint32_t factor) {
  Seen seen;
  truenoc::embed::Launcher launcher{record, &seen};
  int rc = test::shapes::tile(launcher, nullptr, nullptr, rows, cols, factor, 1.5f);
  std::printf("%s: rc %d calls %d", what, rc, seen.calls);
  if (seen.calls)
    std::printf(" kernel %s grid %u %u %u block %u %u %u shared %u args %u rows %d stream %.1f", seen.last.kernel,
                seen.last.grid[0], seen.last.grid[1], seen.last.grid[2], seen.last.block[0], seen.last.block[1],
                seen.last.block[2], seen.last.dynamic_shared, seen.last.num_args, seen.rows_arg, seen.stream_arg);
  std::printf("\n");
}

}  // namespace

int main() {
  const unsigned char* b = test::shapes::bundle_bytes();
  std::printf("bundle: %zu bytes, aligned %d, magic %d\n", test::shapes::bundle_size(),
              reinterpret_cast<std::uintptr_t>(b) % 16 == 0, std::memcmp(b, "\x89TNB\r\n\x1a\n", 8) == 0);
  launch("normal", 20, 100, 2);
  launch("exact", 16, 64, 1);
  launch("empty", 20, 0, 2);
  launch("negative", -1, 100, 2);
  launch("overflow", 20, 0xFFFFFFFFu, 0xFFFFFFFFu);
  truenoc::embed::Launcher none{nullptr, nullptr};
  std::printf("no launcher: rc %d\n", test::shapes::tile(none, nullptr, nullptr, 1, 1, 1, 0.0f));
  return 0;
}
