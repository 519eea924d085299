#include "compiler/Output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

namespace tn::io {

namespace {

enum class Kind { Stdout, Device, File };

struct Plan {
  Kind kind = Kind::File;
  std::string target;  // what is written: the file a symbolic link points to, for a File
  bool exists = false;
  mode_t mode = 0;     // an existing file's permissions, kept
  // Identity: an existing file's device and inode; a new file's folder's and its name.
  dev_t dev = 0;
  ino_t ino = 0;
  std::string name;
  bool sameFile(const Plan& o) const { return kind == Kind::File && o.kind == Kind::File && dev == o.dev && ino == o.ino && name == o.name; }
};

std::string quoted(const std::string& path) { return "'" + path + "'"; }

bool cannotWrite(const std::string& path, int err, std::string& error) {
  error = "cannot write " + quoted(path) + ": " + std::strerror(err);
  return false;
}

bool plan(const OutputFile& o, Plan& p, std::string& error) {
  if (o.path == "-") {
    p.kind = Kind::Stdout;
    return true;
  }
  if (o.path.empty()) {
    error = o.what + ": empty file name";
    return false;
  }
  struct stat st {};
  if (::stat(o.path.c_str(), &st) != 0) {
    if (errno != ENOENT) return cannotWrite(o.path, errno, error);
    struct stat link {};
    if (::lstat(o.path.c_str(), &link) == 0) {
      error = "cannot write " + quoted(o.path) + ": it is a symbolic link to a missing file";
      return false;
    }
    std::filesystem::path path(o.path);
    std::string dir = path.parent_path().empty() ? "." : path.parent_path().string();
    struct stat d {};
    if (::stat(dir.c_str(), &d) != 0) return cannotWrite(o.path, errno, error);
    if (!S_ISDIR(d.st_mode)) return cannotWrite(o.path, ENOTDIR, error);
    p.target = o.path;
    p.dev = d.st_dev;
    p.ino = d.st_ino;
    p.name = path.filename().string();
    return true;
  }
  p.dev = st.st_dev;
  p.ino = st.st_ino;
  p.target = o.path;
  if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
    p.kind = Kind::Device;
    return true;
  }
  if (S_ISDIR(st.st_mode)) {
    error = o.what + " " + quoted(o.path) + " is a directory";
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    error = "cannot write " + quoted(o.path) + ": it is neither a regular file, a character device nor a FIFO";
    return false;
  }
  // Root's access() ignores permission bits: a file nobody may write is read-only for us too.
  if ((st.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) == 0 || ::access(o.path.c_str(), W_OK) != 0) {
    error = o.what + " " + quoted(o.path) + " is read-only";
    return false;
  }
  p.exists = true;
  p.mode = st.st_mode & 07777;
  struct stat link {};
  if (::lstat(o.path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
    char resolved[PATH_MAX];
    if (!::realpath(o.path.c_str(), resolved)) return cannotWrite(o.path, errno, error);
    p.target = resolved;
  }
  return true;
}

bool planAll(std::span<const OutputFile> outputs, std::span<const std::string> inputs, std::vector<Plan>& plans,
             std::string& error) {
  plans.assign(outputs.size(), Plan{});
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!plan(outputs[i], plans[i], error)) return false;
    for (size_t j = 0; j < i; ++j)
      if (plans[i].sameFile(plans[j])) {
        error = outputs[j].what + " and " + outputs[i].what + " both name " + quoted(outputs[i].path);
        return false;
      }
    if (!plans[i].exists) continue;
    for (const std::string& in : inputs) {
      struct stat st {};
      bool found = in == "-" ? ::fstat(STDIN_FILENO, &st) == 0 : ::stat(in.c_str(), &st) == 0;
      if (found && S_ISREG(st.st_mode) && st.st_dev == plans[i].dev && st.st_ino == plans[i].ino) {
        error = outputs[i].what + " " + quoted(outputs[i].path) + " is also an input; refusing to overwrite it";
        return false;
      }
    }
  }
  return true;
}

// 0, or the errno of the first failure.
int writeAll(int fd, std::string_view bytes) {
  for (size_t done = 0; done < bytes.size();) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    done += static_cast<size_t>(n);
  }
  return 0;
}

// Writes `bytes` to the open `fd` and closes it: 0, or the errno of the first failure.
int writeAndClose(int fd, std::string_view bytes, mode_t mode = 0) {
  int err = writeAll(fd, bytes);
  if (!err && mode && ::fchmod(fd, mode) != 0) err = errno;
  if (::close(fd) != 0 && !err) err = errno;
  return err;
}

}  // namespace

bool checkOutputs(std::span<const OutputFile> outputs, std::span<const std::string> inputs, std::string& error) {
  std::vector<Plan> plans;
  return planAll(outputs, inputs, plans, error);
}

bool writeFiles(std::span<const OutputFile> outputs, std::span<const std::string> inputs, std::string& error) {
  std::vector<Plan> plans;
  if (!planAll(outputs, inputs, plans, error)) return false;
  std::vector<std::string> temps(outputs.size());
  auto fail = [&](const std::string& path, int err) {
    for (const std::string& t : temps)
      if (!t.empty()) ::unlink(t.c_str());
    if (path == "-") error = "cannot write to standard output: " + std::string(std::strerror(err));
    else cannotWrite(path, err, error);
    return false;
  };
  mode_t mask = ::umask(0);
  ::umask(mask);

  // Temporaries first (nothing visible changes), then devices and stdout, then the renames.
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (plans[i].kind != Kind::File) continue;
    std::string templ = plans[i].target + ".XXXXXX";
    int fd = ::mkstemp(templ.data());
    if (fd < 0) return fail(outputs[i].path, errno);
    temps[i] = templ;
    if (int err = writeAndClose(fd, outputs[i].bytes, plans[i].exists ? plans[i].mode : 0666 & ~mask))
      return fail(outputs[i].path, err);
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (plans[i].kind == Kind::Stdout) {
      std::fflush(stdout);  // whatever stdio holds goes first
      if (int err = writeAll(STDOUT_FILENO, outputs[i].bytes)) return fail("-", err);
    } else if (plans[i].kind == Kind::Device) {
      int fd = ::open(plans[i].target.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
      if (fd < 0) return fail(outputs[i].path, errno);
      if (int err = writeAndClose(fd, outputs[i].bytes)) return fail(outputs[i].path, err);
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (temps[i].empty()) continue;
    if (std::rename(temps[i].c_str(), plans[i].target.c_str()) != 0) return fail(outputs[i].path, errno);
    temps[i].clear();
  }
  return true;
}

}  // namespace tn::io
