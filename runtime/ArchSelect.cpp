#include "truenort/ArchSelect.h"

namespace truenort {

Result<Selection> selectCode(unsigned device_sm, const std::vector<CodeEntry>& entries, bool allow_jit,
                             const std::string& kernel) {
  const unsigned major = device_sm / 10;
  std::optional<size_t> exact, exactArch, sameMajor, ptx;
  for (size_t i = 0; i < entries.size(); ++i) {
    const CodeEntry& e = entries[i];
    if (e.is_ptx) {
      // The newest PTX the device can JIT.
      if (!e.target.archSpecific && e.target.sm <= device_sm &&
          (!ptx || entries[*ptx].target.sm < e.target.sm))
        ptx = i;
      continue;
    }
    if (e.target.sm == device_sm) {
      (e.target.archSpecific ? exactArch : exact) = i;
    } else if (!e.target.archSpecific && e.target.sm / 10 == major && e.target.sm < device_sm) {
      if (!sameMajor || entries[*sameMajor].target.sm < e.target.sm) sameMajor = i;
    }
  }
  if (exactArch) return Selection{*exactArch, false};
  if (exact) return Selection{*exact, false};
  if (sameMajor) return Selection{*sameMajor, false};
  if (ptx && allow_jit) return Selection{*ptx, true};
  Error e;
  e.code = Errc::NoCompatibleCode;
  e.call = "selectCode";
  e.kernel = kernel;
  std::string have;
  for (const CodeEntry& c : entries)
    have += (have.empty() ? "" : ", ") + c.target.name() + (c.is_ptx ? " (ptx)" : "");
  e.message = "no code for device sm_" + std::to_string(device_sm) + "; the bundle has " +
              (have.empty() ? std::string("nothing") : have);
  if (ptx && !allow_jit) e.message += "; PTX is present but JIT was not allowed (LoadOptions::allow_jit)";
  return e;
}

}  // namespace truenort
