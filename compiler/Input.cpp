#include "compiler/Input.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "backends/bundle/Bundle.h"
#include "backends/bundle/ReadFile.h"

namespace tn::io {

namespace {

const char* kindName(InputKind kind) {
  switch (kind) {
    case InputKind::Source: return "spec and .tir files";
    case InputKind::Bundle: return "bundles";
    case InputKind::Buffer: return "interp buffers";
  }
  return "inputs";
}

// TRUENOC_MAX_INPUT_BYTES: digits with an optional K, M or G suffix; nullopt when malformed.
std::optional<uint64_t> parseByteCount(const char* text) {
  uint64_t v = 0;
  const char* p = text;
  if (*p < '0' || *p > '9') return std::nullopt;
  for (; *p >= '0' && *p <= '9'; ++p) {
    if (v > (UINT64_MAX - 9) / 10) return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(*p - '0');
  }
  unsigned shift = 0;
  if (*p == 'K') shift = 10;
  else if (*p == 'M') shift = 20;
  else if (*p == 'G') shift = 30;
  if (shift) ++p;
  if (*p != '\0' || v > (UINT64_MAX >> shift)) return std::nullopt;
  return v << shift;
}

}  // namespace

uint64_t defaultCap(InputKind kind) {
  switch (kind) {
    case InputKind::Source: return 64ull << 20;
    case InputKind::Bundle: return bundle::kMaxBundleBytes;
    case InputKind::Buffer: return 4ull << 30;
  }
  return 0;
}

std::string formatBytes(uint64_t bytes) {
  if (bytes && bytes % (1ull << 30) == 0) return std::to_string(bytes >> 30) + " GiB";
  if (bytes && bytes % (1ull << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes && bytes % (1ull << 10) == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
}

bool readFile(const std::string& path, InputKind kind, std::string& out, std::string& error) {
  const std::string name = path == "-" ? "<stdin>" : "'" + path + "'";
  uint64_t cap = defaultCap(kind);
  if (const char* env = std::getenv(kMaxInputEnv); env && *env) {
    std::optional<uint64_t> v = parseByteCount(env);
    if (!v) {
      error = std::string(kMaxInputEnv) + "='" + env + "' is not a byte count (digits, optionally followed by K, M or G)";
      return false;
    }
    cap = *v;
  }
  const bool owned = path != "-";
  int fd = owned ? ::open(path.c_str(), O_RDONLY | O_CLOEXEC) : STDIN_FILENO;
  if (fd < 0) {
    error = "cannot open " + name + ": " + std::strerror(errno);
    return false;
  }
  int err = 0;
  bundle::ReadStatus status = bundle::readBounded(fd, cap, out, err);
  if (owned) ::close(fd);
  switch (status) {
    case bundle::ReadStatus::Ok: return true;
    case bundle::ReadStatus::IsDirectory: error = name + " is a directory"; break;
    case bundle::ReadStatus::TooLarge:
      error = name + " is larger than the " + formatBytes(cap) + " limit on " + kindName(kind) + " (set " + kMaxInputEnv +
              " to change it)";
      break;
    case bundle::ReadStatus::CannotRead: error = "cannot read " + name + ": " + std::strerror(err); break;
    case bundle::ReadStatus::OutOfMemory: error = "not enough memory to read " + name; break;
  }
  return false;
}

}  // namespace tn::io
