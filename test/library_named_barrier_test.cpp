// Named barriers on hardware against the IR's semantics (docs/ir.md, "Named barriers"; spec
// test/library/named_barriers.toml). The ring: warps 0-1 produce k tiles of 64 words into one
// shared slot, warps 2-3 consume them, barrier 1 saying a tile is full and barrier 2 that the slot
// is empty again, each reused every tile; consumer thread c sums word c of every tile. The
// handoff: warp 0 stages its lanes' indices and arrives, warp 1 waits and copies them out, then
// syncs alone on barrier 2. On the interpreter these pin the semantics (with its race checks);
// on a GPU ("gpu library: named barrier probe …") a failure is a place where PTX's bar.sync and
// bar.arrive with a thread count and ours disagree.
#include "library_harness.h"

using namespace tn::libtest;

LIBRARY_TEST("named barrier probe: a producer/consumer ring over two barriers, and a handoff", namedBarrierProbe) {
  for (uint32_t k : {1u, 2u, 7u}) {
    Outputs out = r.run(Call("named_barriers", "pingpong")
                            .buffer("out", std::vector<uint32_t>(64, 0xdeadbeefu))
                            .scalar("k", k)
                            .scalar("count", uint32_t{128})
                            .scalar("mode", uint32_t{0}));
    std::vector<uint32_t> got = out.get<uint32_t>("out"), want(64);
    for (uint32_t c = 0; c < 64; ++c) want[c] = 64 * (k * (k - 1) / 2) + k * c;
    CHECK_MESSAGE(got == want, "ring of " << k << " tiles");
    // The same ring with the consumers arriving at barrier 2 once up front, so that no barrier is
    // under a condition (ptxas predicates pingpong's first-tile skip of barrier 2).
    Outputs primed = r.run(Call("named_barriers", "ring").buffer("out", std::vector<uint32_t>(64, 0xdeadbeefu)).scalar("k", k));
    CHECK_MESSAGE(primed.get<uint32_t>("out") == want, "primed ring of " << k << " tiles");
  }
  Outputs out = r.run(Call("named_barriers", "handoff").buffer("out", std::vector<uint32_t>(32, 0xdeadbeefu)).scalar("n", uint32_t{32}));
  std::vector<uint32_t> want(32);
  for (uint32_t t = 0; t < 32; ++t) want[t] = t;
  CHECK(out.get<uint32_t>("out") == want);
}
