// The I/O guarantees that have no text form (docs/robustness.md): the CLI's error boundary, the
// runtime's bounded bundle reader, where ptxas is looked for, and how diagnostics print bytes. The CLI's reading and writing
// rules are lit tests (lit-tests/robustness/).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>

#include "backends/ptx/Ptxas.h"
#include "compiler/Command.h"
#include "ir/Diagnostics.h"
#include "truenort/Bundle.h"

namespace {

// Runs `body` with stderr sent to a file; returns what it wrote.
template <class F>
std::string stderrOf(F body) {
  std::fflush(stderr);
  FILE* file = std::tmpfile();
  REQUIRE(file);
  int saved = ::dup(STDERR_FILENO);
  ::dup2(::fileno(file), STDERR_FILENO);
  body();
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::string text;
  std::rewind(file);
  for (int c; (c = std::fgetc(file)) != EOF;) text += static_cast<char>(c);
  std::fclose(file);
  return text;
}

// Sets an environment variable for one scope and puts the old value back.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? ::setenv(name, value, 1) : ::unsetenv(name);
  }
  ~ScopedEnv() { old_ ? ::setenv(name_, old_->c_str(), 1) : ::unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::filesystem::path freshDir(const char* name) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / (std::string(name) + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("diagnostics: control bytes and invalid UTF-8 print as \\xNN, valid UTF-8 as it is") {
  using tn::ir::displayText;
  CHECK(displayText("plain text\twith a tab\nand a newline") == "plain text\twith a tab\nand a newline");
  CHECK(displayText(std::string_view("a\0b", 3)) == "a\\x00b");
  CHECK(displayText("\x1b[31mred\x7f") == "\\x1b[31mred\\x7f");
  CHECK(displayText("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") == "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  CHECK(displayText("\xff\xfe") == "\\xff\\xfe");
  CHECK(displayText("\xc3") == "\\xc3");                  // truncated sequence
  CHECK(displayText("\xc3(") == "\\xc3(");                // bad continuation
  CHECK(displayText("\xc0\xaf") == "\\xc0\\xaf");          // overlong '/'
  CHECK(displayText("\xe0\x80\xaf") == "\\xe0\\x80\\xaf");  // overlong, three bytes
  CHECK(displayText("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a UTF-16 surrogate
  CHECK(displayText("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  tn::ir::Diagnostic d{tn::ir::Severity::Error, "f\x01.tir", {0, 2, 3}, std::string("bad \0 byte", 10)};
  CHECK(tn::ir::formatDiagnostic(d) == "f\\x01.tir:2:3: error: bad \\x00 byte");
}

TEST_CASE("cli: an exception that reaches the error boundary is an internal error with exit status 1") {
  int status = -1;
  std::string err = stderrOf([&] { status = tn::cli::guarded([]() -> int { throw std::runtime_error("boom"); }); });
  CHECK(status == 1);
  CHECK(err == "internal error: boom\n");
  err = stderrOf([&] { status = tn::cli::guarded([]() -> int { throw 42; }); });
  CHECK(status == 1);
  CHECK(err == "internal error: an unknown exception\n");
  CHECK(tn::cli::guarded([] { return 0; }) == 0);
}

TEST_CASE("runtime: Bundle::read_file refuses a folder and anything over its cap, without throwing") {
  using truenort::Bundle;
  using truenort::Errc;
  std::filesystem::path dir = freshDir("truenoc-read-file");

  auto folder = Bundle::read_file(dir.string());
  REQUIRE(!folder);
  CHECK(folder.error().code == Errc::InvalidArgument);
  CHECK(folder.error().message == "'" + dir.string() + "' is a directory");

  // A device is read to at most the cap + 1 bytes.
  auto zeros = Bundle::read_file("/dev/zero", 1 << 20);
  REQUIRE(!zeros);
  CHECK(zeros.error().message == "'/dev/zero' is larger than 1048576 bytes");

  // A regular file's size is checked before reading: a sparse file over 1 GiB is refused at once.
  std::filesystem::path big = dir / "big.tnb";
  std::ofstream(big).close();
  std::filesystem::resize_file(big, Bundle::kMaxFileBytes + 1);
  auto huge = Bundle::read_file(big.string());
  REQUIRE(!huge);
  CHECK(huge.error().message == "'" + big.string() + "' is larger than 1073741824 bytes");

  std::filesystem::path small = dir / "small.bin";
  std::ofstream(small, std::ios::binary) << "tnb bytes";
  auto bytes = Bundle::read_file(small.string(), 9);
  REQUIRE(bytes);
  CHECK(std::string(bytes.value().begin(), bytes.value().end()) == "tnb bytes");
  CHECK(!Bundle::read_file(small.string(), 8));

  auto missing = Bundle::read_file((dir / "missing.tnb").string());
  REQUIRE(!missing);
  CHECK(missing.error().message == "cannot open '" + (dir / "missing.tnb").string() + "': No such file or directory");
  std::filesystem::remove_all(dir);
}

TEST_CASE("ptxas: searched in $CUDA_HOME/bin, $CUDA_PATH/bin, $PATH, then /usr/local/cuda/bin unless a toolkit is named") {
  using tn::ptxas::searchFolders;
  ScopedEnv path("PATH", "/p1::/p2");
  {
    ScopedEnv home("CUDA_HOME", nullptr), cudaPath("CUDA_PATH", nullptr);
    CHECK(searchFolders() == std::vector<std::string>{"/p1", "/p2", "/usr/local/cuda/bin"});
  }
  {
    ScopedEnv home("CUDA_HOME", "/home-cuda"), cudaPath("CUDA_PATH", "/path-cuda");
    CHECK(searchFolders() == std::vector<std::string>{"/home-cuda/bin", "/path-cuda/bin", "/p1", "/p2"});
  }
  {
    ScopedEnv home("CUDA_HOME", nullptr), cudaPath("CUDA_PATH", "/path-cuda");
    CHECK(searchFolders() == std::vector<std::string>{"/path-cuda/bin", "/p1", "/p2"});
  }
}
