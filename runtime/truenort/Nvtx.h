// Optional NVTX ranges around kernel launches, named after the kernel, so that Nsight Systems
// (or any NVTX tool) shows which truenoc kernel each launch is. Off by default, and no link-time
// dependency: the NVTX library is dlopen'ed when ranges are turned on, by enable_nvtx() or by
// the environment variable TRUENORT_NVTX (read at the first launch unless enable_nvtx or
// disable_nvtx was called first): "1" loads the default library if there is one (without it,
// no ranges), any other non-empty value other than "0" is a library path.
#pragma once

#include <string>

#include "truenort/Result.h"

namespace truenort {

// Turns ranges on. `library`: "" tries libnvToolsExt.so.1 (CUDA 12 and older), then
// libnvtx3interop.so.1 (CUDA 13); else a path or soname. InvalidArgument when the library is
// missing or lacks nvtxRangePushA/nvtxRangePop (then ranges stay as they were).
Status enable_nvtx(const std::string& library = "");
void disable_nvtx();
bool nvtx_enabled();

// A range for the scope: pushed when ranges are on, popped at the end. Cheap when off.
class NvtxRange {
 public:
  explicit NvtxRange(const std::string& name);
  ~NvtxRange();
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;

 private:
  const void* api_;
};

}  // namespace truenort
