// Every file the truenoc CLI reads goes through readFile: it refuses a folder, and bounds what it
// reads by a cap per kind of input, checked before reading a regular file and while reading a
// pipe or device (at most cap + 1 bytes), so /dev/zero or a stray 2 GiB file fails fast with a
// message instead of growing memory. Never prints or throws (docs/robustness.md).
#pragma once

#include <cstdint>
#include <string>

namespace tn::io {

enum class InputKind : uint8_t {
  Source,  // specs and .tir files: 64 MiB
  Bundle,  // .tnb bundles: 1 GiB, the bundle format's own cap (bundle::kMaxBundleBytes)
  Buffer,  // interp --arg NAME=@FILE: 4 GiB
};

// Set to a byte count (digits, optionally followed by K, M or G for KiB, MiB, GiB), it replaces
// the cap of every kind of input.
inline constexpr const char* kMaxInputEnv = "TRUENOC_MAX_INPUT_BYTES";

uint64_t defaultCap(InputKind kind);

// "64 MiB", "1 GiB", "1000 bytes".
std::string formatBytes(uint64_t bytes);

// Reads `path` ("-" = standard input) completely into `out`. false with a one-sentence `error`
// that names the file (and, for a file over the cap, the cap and how to change it).
bool readFile(const std::string& path, InputKind kind, std::string& out, std::string& error);

}  // namespace tn::io
