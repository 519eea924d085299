#include "backends/bundle/ReadFile.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <new>

namespace tn::bundle {

template <class Bytes>
ReadStatus readBounded(int fd, uint64_t maxBytes, Bytes& out, int& err) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    err = errno;
    return ReadStatus::CannotRead;
  }
  if (S_ISDIR(st.st_mode)) return ReadStatus::IsDirectory;
  const bool regular = S_ISREG(st.st_mode);
  if (regular && static_cast<uint64_t>(st.st_size) > maxBytes) return ReadStatus::TooLarge;
  try {
    Bytes data;
    if (regular) data.reserve(static_cast<size_t>(st.st_size));
    constexpr size_t kChunk = 1 << 20;
    while (true) {
      uint64_t room = maxBytes - data.size();  // data.size() <= maxBytes here
      size_t want = room >= kChunk ? kChunk : static_cast<size_t>(room) + 1;
      size_t had = data.size();
      data.resize(had + want);
      ssize_t n = ::read(fd, data.data() + had, want);
      data.resize(had + (n > 0 ? static_cast<size_t>(n) : 0));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        err = errno;
        return ReadStatus::CannotRead;
      }
      if (n == 0) break;
      if (data.size() > maxBytes) return ReadStatus::TooLarge;
    }
    out = std::move(data);
    return ReadStatus::Ok;
  } catch (const std::bad_alloc&) {
    return ReadStatus::OutOfMemory;
  }
}

template ReadStatus readBounded(int, uint64_t, std::string&, int&);
template ReadStatus readBounded(int, uint64_t, std::vector<uint8_t>&, int&);

}  // namespace tn::bundle
