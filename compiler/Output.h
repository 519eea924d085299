// Every file a truenoc command writes goes through writeFiles, all or nothing:
//   - "-" is standard output;
//   - a regular file (new or existing) is written to a temporary beside it and renamed into
//     place once every output's temporary is complete; on any failure every temporary is removed
//     and no output changes;
//   - a character device or FIFO (/dev/null, a pipe) is written directly, never replaced;
//     anything else (a folder, a block device, a socket) is refused;
//   - an existing read-only file is refused (by its mode bits, which root's access() ignores);
//   - an output that is one of the command's inputs, or another of its outputs, is refused,
//     compared by device and inode so that './spec.toml' and symbolic links count.
// A symbolic link to a regular file writes the file it points to. Never prints or throws.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace tn::io {

struct OutputFile {
  std::string path;   // "-" = standard output
  std::string what;   // names the output in messages: "-o", "--depfile", "--out c"
  std::string_view bytes;  // borrowed until the write
};

// The checks of writeFiles, without writing: commands call it before their expensive work.
bool checkOutputs(std::span<const OutputFile> outputs, std::span<const std::string> inputs, std::string& error);

// Checks, then writes every output or none. false with a one-sentence `error` naming the file.
bool writeFiles(std::span<const OutputFile> outputs, std::span<const std::string> inputs, std::string& error);

}  // namespace tn::io
