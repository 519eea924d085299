// Spec TOML -> parseSpec -> instantiate every kernel, as `truenoc build` does before compiling.
// A spec's tir paths resolve against a private temporary folder holding copies of the repo's
// small .tir files (Inputs/ too, as the lit specs name them); a kernel whose tir path leads
// anywhere else is not instantiated, so the fuzzer reads no other file. Beyond the sanitizers:
// a template kernel, whose options the schema checked, must build a module that verifies.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "compiler/Compile.h"
#include "compiler/Spec.h"
#include "fuzz/Oracle.h"
#include "ir/Verifier.h"

namespace fs = std::filesystem;

namespace {

fs::path tirFolder;

void removeTirFolder() {
  std::error_code ec;
  fs::remove_all(tirFolder, ec);
}

// Copies every .tir file of the source folders `from` into `to`.
void copyTirFiles(std::initializer_list<const char*> from, const fs::path& to) {
  fs::create_directories(to);
  for (const char* rel : from)
    for (const fs::directory_entry& e : fs::directory_iterator(fs::path(TRUENOC_SOURCE_DIR) / rel))
      if (e.path().extension() == ".tir") fs::copy_file(e.path(), to / e.path().filename(), fs::copy_options::overwrite_existing);
}

bool inTirFolder(const std::string& path) {
  std::string rel = fs::path(path).lexically_normal().lexically_relative(tirFolder).string();
  return !rel.empty() && !rel.starts_with("..");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::string tmpl = (fs::temp_directory_path() / "truenoc-fuzz-spec-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) {
    std::perror("fuzz_spec: mkdtemp");
    std::abort();
  }
  tirFolder = fs::path(tmpl).lexically_normal();
  std::atexit(removeTirFolder);
  copyTirFiles({"examples", "test/gpu"}, tirFolder);
  copyTirFiles({"lit-tests/spec/Inputs", "lit-tests/build/Inputs", "lit-tests/embed/Inputs"}, tirFolder / "Inputs");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  tn::ir::Diagnostics diags;
  std::optional<tn::spec::Spec> spec = tn::spec::parseSpec(text, "fuzz.toml", tirFolder.string(), diags);
  if (!spec) return 0;
  tn::spec::TirCache tirs;
  for (const tn::spec::KernelSpec& k : spec->kernels) {
    if (!k.tmpl && !inTirFolder(k.tirPath)) continue;
    // As `truenoc build`: one instance, or one per alternative a target takes (mainloop = "auto").
    auto instances = tn::spec::instantiateForTargets(*spec, k, tirs, diags);
    if (!instances || !k.tmpl) continue;
    for (tn::spec::TargetedInstance& inst : *instances) {
      // A template builds for sm_80 and the compiler retargets it; an instance using newer ops
      // (sm_90a's wgmma) is checked on the target they need, as the spec's target check allows.
      tn::ir::Module& m = inst.instance.module;
      const tn::bundle::Target need = tn::ir::requiredTarget(m);
      if (need.archSpecific || need.sm > m.target.sm) tn::compile::retarget(m, need);
      tn::ir::Diagnostics verifyDiags;
      if (!tn::ir::verify(m, verifyDiags))
        tn::fuzz::broken("fuzz_spec: template '" + k.tmpl->name + "' built a module that does not verify", verifyDiags);
    }
  }
  return 0;
}
