// The one bounded file reader, shared by the CLI (compiler/Input.h, which adds its caps and
// messages) and the runtime (truenort::Bundle::read_file), which links nothing of the compiler.
// A folder is refused; a regular file's size is checked against the cap before reading; a pipe
// or device is read to at most cap + 1 bytes. Never throws (an allocation failure is a status).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tn::bundle {

enum class ReadStatus : uint8_t { Ok, IsDirectory, TooLarge, CannotRead, OutOfMemory };

// Reads the open `fd` to its end into `out` (std::string or std::vector<uint8_t>); `err` is the
// errno of a CannotRead.
template <class Bytes>
ReadStatus readBounded(int fd, uint64_t maxBytes, Bytes& out, int& err);

extern template ReadStatus readBounded(int, uint64_t, std::string&, int&);
extern template ReadStatus readBounded(int, uint64_t, std::vector<uint8_t>&, int&);

}  // namespace tn::bundle
