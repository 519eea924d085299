// NVTX through dlopen (truenort/Nvtx.h). The library, once loaded, is never unloaded: a launch on
// another thread may be inside a range while ranges are turned off.
#include "truenort/Nvtx.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace truenort {

namespace {

struct Api {
  int (*push)(const char*);
  int (*pop)();
};

std::atomic<const Api*> g_api{nullptr};
std::once_flag g_envOnce;
std::atomic<bool> g_explicit{false};

Result<const Api*> load(const std::string& library) {
  const char* defaults[] = {"libnvToolsExt.so.1", "libnvtx3interop.so.1"};
  std::string tried;
  for (const std::string& name : library.empty() ? std::vector<std::string>(std::begin(defaults), std::end(defaults))
                                                 : std::vector<std::string>{library}) {
    void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* why = dlerror();
      tried += (tried.empty() ? "" : "; ") + (why ? std::string(why) : name);
      continue;
    }
    auto push = reinterpret_cast<int (*)(const char*)>(dlsym(h, "nvtxRangePushA"));
    auto pop = reinterpret_cast<int (*)()>(dlsym(h, "nvtxRangePop"));
    if (!push || !pop) {
      tried += (tried.empty() ? "" : "; ") + name + " has no nvtxRangePushA/nvtxRangePop";
      continue;
    }
    return static_cast<const Api*>(new Api{push, pop});  // never freed (see above)
  }
  Error e;
  e.code = Errc::InvalidArgument;
  e.call = "enable_nvtx";
  e.message = "no NVTX library could be loaded (" + tried + ")";
  return e;
}

// TRUENORT_NVTX, once, unless the program chose first.
void readEnvironment() {
  std::call_once(g_envOnce, [] {
    if (g_explicit.load()) return;
    const char* env = std::getenv("TRUENORT_NVTX");
    if (!env || !*env || std::string(env) == "0") return;
    auto api = load(std::string(env) == "1" ? std::string() : std::string(env));
    if (api && !g_explicit.load()) g_api.store(api.value());
  });
}

}  // namespace

Status enable_nvtx(const std::string& library) {
  auto api = load(library);
  if (!api) return api.error();
  g_explicit.store(true);
  g_api.store(api.value());
  return {};
}

void disable_nvtx() {
  g_explicit.store(true);
  g_api.store(nullptr);
}

bool nvtx_enabled() {
  readEnvironment();
  return g_api.load() != nullptr;
}

NvtxRange::NvtxRange(const std::string& name) : api_(nullptr) {
  readEnvironment();
  const Api* api = g_api.load(std::memory_order_acquire);
  if (api) {
    api->push(name.c_str());
    api_ = api;
  }
}

NvtxRange::~NvtxRange() {
  if (api_) static_cast<const Api*>(api_)->pop();
}

}  // namespace truenort
