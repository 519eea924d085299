#include "backends/ptx/Ptxas.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace tn::ptxas {

namespace {

bool isExecutableFile(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

std::optional<std::string> readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool writeFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  return static_cast<bool>(out);
}

void replaceAll(std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
}

// The number just before `suffix` in `item` ("12 registers" with suffix "registers" -> 12).
bool numberBefore(std::string_view item, std::string_view suffix, uint32_t& out) {
  size_t at = item.find(suffix);
  if (at == std::string_view::npos) return false;
  std::string_view head = item.substr(0, at);
  while (!head.empty() && head.back() == ' ') head.remove_suffix(1);
  size_t start = head.size();
  while (start > 0 && head[start - 1] >= '0' && head[start - 1] <= '9') --start;
  if (start == head.size()) return false;
  uint64_t v = 0;
  for (char c : head.substr(start)) {
    v = v * 10 + static_cast<uint64_t>(c - '0');
    if (v > UINT32_MAX) return false;
  }
  out = static_cast<uint32_t>(v);
  return true;
}

// ---- signals (see TempDir) ----
// Only lock-free atomics are touched by the handler, so it is async-signal-safe.
std::atomic<int> gSignal{0};
// The running ptxas processes (each its own process group); 0 = free slot. -j is at most 1024.
std::array<std::atomic<pid_t>, 1024> gChildren{};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<pid_t>::is_always_lock_free);

constexpr int kCaught[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction gPrevious[std::size(kCaught)];
bool gInstalled[std::size(kCaught)];
unsigned gTempDirs = 0;  // TempDirs alive; they are made and dropped by one thread

extern "C" void onSignal(int sig) {
  int saved = errno;
  int none = 0;
  gSignal.compare_exchange_strong(none, sig);
  for (std::atomic<pid_t>& c : gChildren)
    if (pid_t pid = c.load()) ::kill(-pid, SIGKILL);
  errno = saved;
}

void installHandlers() {
  if (gTempDirs++ > 0) return;
  struct sigaction sa {};
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (size_t i = 0; i < std::size(kCaught); ++i) {
    gInstalled[i] = false;
    // A signal the caller ignores (nohup, a background job) stays ignored.
    if (::sigaction(kCaught[i], nullptr, &gPrevious[i]) != 0 || gPrevious[i].sa_handler == SIG_IGN) continue;
    gInstalled[i] = ::sigaction(kCaught[i], &sa, nullptr) == 0;
  }
}

void restoreHandlers() {
  if (--gTempDirs > 0) return;
  for (size_t i = 0; i < std::size(kCaught); ++i)
    if (gInstalled[i]) ::sigaction(kCaught[i], &gPrevious[i], nullptr);
}

// Registers a running ptxas for the handler; kills it at once if a signal came first.
class ChildSlot {
 public:
  explicit ChildSlot(pid_t pid) {
    for (std::atomic<pid_t>& c : gChildren) {
      pid_t free = 0;
      if (c.compare_exchange_strong(free, pid)) {
        slot_ = &c;
        break;
      }
    }
    if (gSignal.load() || !slot_) ::kill(-pid, SIGKILL);
  }
  ~ChildSlot() {
    if (slot_) slot_->store(0);
  }
  ChildSlot(const ChildSlot&) = delete;
  ChildSlot& operator=(const ChildSlot&) = delete;

 private:
  std::atomic<pid_t>* slot_ = nullptr;
};

// posix_spawn into a process group of its own, so that killing the group on a timeout or a
// signal also kills whatever ptxas started. 0 or the error number.
int spawnInGroup(pid_t& pid, const std::string& path, const posix_spawn_file_actions_t& actions, char* const argv[]) {
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  int rc = ::posix_spawn(&pid, path.c_str(), &actions, &attr, argv, environ);
  posix_spawnattr_destroy(&attr);
  return rc;
}

// Waits for `pid`, killing its process group after `timeoutSeconds` (0: never). false with
// `error` set when it lost track of the process.
bool waitFor(pid_t pid, unsigned timeoutSeconds, int& status, bool& timedOut, std::string& error) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::seconds(timeoutSeconds);
  auto pause = std::chrono::milliseconds(1);
  while (true) {
    pid_t r = ::waitpid(pid, &status, timeoutSeconds ? WNOHANG : 0);
    if (r == pid) return true;
    if (r < 0 && errno != EINTR) {
      error = "lost track of ptxas: " + std::string(std::strerror(errno));
      return false;
    }
    if (r == 0 && Clock::now() >= deadline) {
      ::kill(-pid, SIGKILL);
      timedOut = true;
      timeoutSeconds = 0;  // now wait for it to go
      continue;
    }
    if (r == 0) {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(50));
    }
  }
}

}  // namespace

std::vector<std::string> searchFolders() {
  std::vector<std::string> out;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    const char* root = std::getenv(var);
    if (root && *root) out.push_back(std::string(root) + "/bin");
  }
  // A toolkit named by CUDA_HOME or CUDA_PATH is the one meant: no silent fallback to another.
  const bool named = !out.empty();
  if (const char* path = std::getenv("PATH")) {
    std::string_view rest(path);
    while (true) {
      size_t colon = rest.find(':');
      if (colon != 0 && !rest.empty()) out.emplace_back(rest.substr(0, colon));
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
  if (!named) out.push_back("/usr/local/cuda/bin");
  return out;
}

std::optional<std::string> find(const std::string& explicitPath, std::string& why) {
  if (!explicitPath.empty()) {
    if (isExecutableFile(explicitPath)) return explicitPath;
    why = "--ptxas '" + explicitPath + "' is not an executable file";
    return std::nullopt;
  }
  for (const std::string& dir : searchFolders())
    if (isExecutableFile(dir + "/ptxas")) return dir + "/ptxas";
  why = "ptxas was not found (looked in $CUDA_HOME/bin, $CUDA_PATH/bin, $PATH, and /usr/local/cuda/bin when neither variable is set)";
  return std::nullopt;
}

int interruptedBy() { return gSignal.load(); }

TempDir::TempDir() {
  installHandlers();  // first, so that no signal can leave the folder behind
  const char* base = std::getenv("TMPDIR");
  std::string templ = std::string(base && *base ? base : "/tmp") + "/truenoc-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data())) path_ = buf.data();
  else error_ = "cannot create a temporary folder from '" + templ + "': " + std::strerror(errno);
}

TempDir::~TempDir() {
  if (!path_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  restoreHandlers();
}

Output assemble(const std::string& ptxas, const std::string& workDir, const Job& job, unsigned timeoutSeconds) {
  Output out;
  if (gSignal.load()) {
    out.interrupted = true;
    out.log = "interrupted";
    return out;
  }
  std::string stem = job.kernel + "." + job.target.name();
  std::string ptxPath = workDir + "/" + stem + ".ptx";
  std::string cubinPath = workDir + "/" + stem + ".cubin";
  std::string logPath = workDir + "/" + stem + ".log";
  if (!writeFile(ptxPath, job.ptx)) {
    out.log = "cannot write '" + ptxPath + "'";
    return out;
  }

  std::vector<std::string> args = {ptxas, "-arch=" + job.target.name(), "-o", cubinPath, ptxPath};
  if (job.lineInfo) args.insert(args.begin() + 1, "-lineinfo");
  if (job.resources) args.insert(args.begin() + 1, "-v");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, logPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  int rc = spawnInGroup(pid, ptxas, actions, argv.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    out.log = "cannot run '" + ptxas + "': " + std::strerror(rc);
    return out;
  }
  int status = 0;
  {
    ChildSlot slot(pid);
    if (!waitFor(pid, timeoutSeconds, status, out.timedOut, out.log)) return out;
  }
  if (gSignal.load()) {
    out.interrupted = true;
    out.log = "interrupted";
    return out;
  }
  if (out.timedOut) {
    out.log = "ptxas did not finish within " + std::to_string(timeoutSeconds) + " s and was killed";
    return out;
  }
  out.log = readFile(logPath).value_or("");
  replaceAll(out.log, workDir + "/", "");
  while (!out.log.empty() && out.log.back() == '\n') out.log.pop_back();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    if (out.log.empty())
      out.log = WIFSIGNALED(status) ? "ptxas was killed by signal " + std::to_string(WTERMSIG(status))
                                    : "ptxas exited with status " + std::to_string(WEXITSTATUS(status));
    return out;
  }
  auto cubin = readFile(cubinPath);
  if (!cubin || cubin->empty()) {
    out.log = "ptxas succeeded but wrote no cubin";
    return out;
  }
  const std::vector<std::string> one = {job.kernel}, none;
  for (const std::string& entry : !job.resources ? none : job.entries.empty() ? one : job.entries)
    if (!parseResources(out.log, entry, out.resources.emplace_back())) {
      out.log = "ptxas -v did not report the resources of '" + entry + "':\n" + out.log;
      out.resources.clear();
      return out;
    }
  out.cubin = std::move(*cubin);
  out.ok = true;
  return out;
}

bool parseResources(std::string_view log, std::string_view kernel, bundle::Resources& out) {
  std::string header = "Compiling entry function '" + std::string(kernel) + "'";
  size_t at = log.find(header);
  if (at == std::string_view::npos) return false;
  std::string_view rest = log.substr(at + header.size());
  size_t next = rest.find("Compiling entry function '");
  if (next != std::string_view::npos) rest = rest.substr(0, next);
  bundle::Resources r;
  bool haveRegs = false;
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    // Items are comma separated: "Used 10 registers, used 1 barriers, 64 bytes smem, 364 bytes cmem[0]".
    while (!line.empty()) {
      size_t comma = line.find(',');
      std::string_view item = line.substr(0, comma);
      line = comma == std::string_view::npos ? std::string_view() : line.substr(comma + 1);
      if (item.find("registers") != std::string_view::npos) haveRegs = numberBefore(item, "registers", r.registers) || haveRegs;
      else if (item.find("barriers") != std::string_view::npos) numberBefore(item, "barriers", r.barriers);
      else if (item.find("bytes smem") != std::string_view::npos) numberBefore(item, "bytes smem", r.sharedBytes);
      else if (item.find("bytes cmem[0]") != std::string_view::npos) numberBefore(item, "bytes cmem[0]", r.constBytes);
      else if (item.find("bytes stack frame") != std::string_view::npos) numberBefore(item, "bytes stack frame", r.stackBytes);
      else if (item.find("bytes spill stores") != std::string_view::npos) numberBefore(item, "bytes spill stores", r.spillStores);
      else if (item.find("bytes spill loads") != std::string_view::npos) numberBefore(item, "bytes spill loads", r.spillLoads);
    }
  }
  if (!haveRegs) return false;
  out = r;
  return true;
}

// ---- version -------------------------------------------------------------------------------

std::optional<std::string> parseVersion(std::string_view text) {
  // Every ptxas since CUDA 7 ends its --version text with "Cuda compilation tools, release X.Y, VX.Y.Z".
  static constexpr std::string_view kMarker = ", V";
  for (size_t at = text.find("release "); at != std::string_view::npos; at = text.find("release ", at + 1)) {
    std::string_view line = text.substr(at, text.find('\n', at) - at);
    size_t v = line.find(kMarker);
    if (v == std::string_view::npos) continue;
    std::string_view rest = line.substr(v + kMarker.size());
    size_t n = 0;
    while (n < rest.size() && ((rest[n] >= '0' && rest[n] <= '9') || rest[n] == '.')) ++n;
    if (n > 0 && rest[0] != '.' && rest[n - 1] != '.') return std::string(rest.substr(0, n));
  }
  return std::nullopt;
}

std::optional<std::string> version(const std::string& ptxas, std::string& why, unsigned timeoutSeconds) {
  int fds[2];
  if (::pipe(fds) != 0) {
    why = std::string("cannot create a pipe: ") + std::strerror(errno);
    return std::nullopt;
  }
  std::string arg0 = ptxas, arg1 = "--version";
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  pid_t pid = 0;
  int rc = spawnInGroup(pid, ptxas, actions, argv);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    why = "cannot run '" + ptxas + "': " + std::strerror(rc);
    return std::nullopt;
  }
  std::string text;
  char buf[4096];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutSeconds);
  bool timedOut = false;
  while (true) {
    if (timeoutSeconds && !timedOut) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{fds[0], POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 1))) == 0) {
        ::kill(-pid, SIGKILL);  // the pipe then reaches its end
        timedOut = true;
      }
    }
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (text.size() < 65536) text.append(buf, static_cast<size_t>(n));  // keep draining, so ptxas can exit
  }
  ::close(fds[0]);
  int status = 0;
  pid_t waited = -1;
  do waited = ::waitpid(pid, &status, 0);
  while (waited < 0 && errno == EINTR);
  std::string run = "'" + ptxas + " --version'";
  std::optional<std::string> v = parseVersion(text);
  if (waited < 0) why = "lost track of " + run + ": " + std::strerror(errno);
  else if (timedOut) why = run + " did not finish within " + std::to_string(timeoutSeconds) + " s and was killed";
  else if (WIFSIGNALED(status)) why = run + " was killed by signal " + std::to_string(WTERMSIG(status));
  else if (WEXITSTATUS(status) != 0) why = run + " exited with status " + std::to_string(WEXITSTATUS(status));
  else if (!v) why = run + " printed no 'release X.Y, VX.Y.Z' line";
  else return v;
  return std::nullopt;
}

}  // namespace tn::ptxas
