#include "truenort/Embed.h"

namespace truenort {

int EmbedLauncher::fail(Error e) {
  std::lock_guard lock(mu_);
  last_ = std::move(e);
  return kRuntimeError;
}

int EmbedLauncher::launch(const unsigned char* bundle, size_t size, const char* kernel, void* stream,
                          const uint32_t grid[3], const uint32_t block[3], uint32_t dynamic_shared, void** args,
                          uint32_t num_args) {
  Loaded* entry = nullptr;
  std::optional<Kernel> k;
  {
    std::lock_guard lock(mu_);
    auto it = bundles_.find(bundle);
    if (it == bundles_.end()) {
      auto loaded = Bundle::load(*ctx_, std::span<const uint8_t>(bundle, size), opts_);
      if (!loaded) {
        last_ = loaded.error();
        return kRuntimeError;
      }
      it = bundles_.emplace(bundle, Loaded{std::make_unique<Bundle>(std::move(loaded.value())), {}}).first;
    }
    entry = &it->second;
    if (auto kt = entry->kernels.find(std::string_view(kernel)); kt != entry->kernels.end()) k = kt->second;
  }
  if (!k) {
    // Outside mu_: the first launch of a kernel may load (or JIT) its module.
    auto found = entry->bundle->kernel(kernel);
    if (!found) return fail(found.error());
    k = found.value();
    std::lock_guard lock(mu_);
    entry->kernels.emplace(kernel, *k);
  }
  if (Status st = k->launch_raw(Stream::wrap(*ctx_, static_cast<CUstream>(stream)), Dim3{grid[0], grid[1], grid[2]},
                                Dim3{block[0], block[1], block[2]}, dynamic_shared, args, num_args);
      !st)
    return fail(st.error());
  return 0;
}

std::optional<Error> EmbedLauncher::last_error() const {
  std::lock_guard lock(mu_);
  return last_;
}

LoadStats EmbedLauncher::stats() const {
  std::lock_guard lock(mu_);
  LoadStats sum;
  for (const auto& [bytes, b] : bundles_) {
    LoadStats s = b.bundle->stats();
    sum.modules_loaded += s.modules_loaded;
    sum.jit_events += s.jit_events;
    sum.load_ms += s.load_ms;
  }
  return sum;
}

}  // namespace truenort
