# lit configuration for truenoc. Substitutions:
#   %truenoc         the truenoc binary of this build
#   %simdriver       the simulated driver of this build (libtruenort-sim.so, docs/simulator.md)
#   %ptxas-verify    assembles PTX from stdin for the given -arch (REQUIRES: ptxas)
#   %nvdisasm        CUDA's disassembler, for tests that read the SASS of a cubin (REQUIRES: nvdisasm)
#   %examples        the examples/ folder
#   %benchbundle     the build's bundle of tools/bench/kernels.toml (bin/bench_kernels.tnb; REQUIRES: ptxas)
#   FileCheck, not   from LLVM
import os
import shutil
import lit.formats
import lit.util

site = lit_config.params.get("truenoc_site")
if site:
    lit_config.load_config(config, site)

config.name = "truenoc"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".tir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in"]
config.test_source_root = os.path.dirname(__file__)

in_ci = os.environ.get("CI") == "true"
for tool, path in (("FileCheck", config.filecheck), ("not", config.not_tool), ("ptxas", config.ptxas)):
    if not path and in_ci:
        lit_config.fatal("CI=true but %s is missing" % tool)


# nvdisasm: on PATH, next to ptxas, in the CUDA toolkit, or where tools/deps.sh installs it from
# PyPI when the toolkit has none.
def find_nvdisasm():
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    dirs = [os.path.dirname(config.ptxas) if config.ptxas else "",
            os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin"),
            os.path.join(cache, "truenoc", "tools", "bin")]
    candidates = [os.path.join(d, "nvdisasm") for d in dirs if d]
    return shutil.which("nvdisasm") or next((p for p in candidates if os.access(p, os.X_OK)), "")


nvdisasm = find_nvdisasm()
if nvdisasm:
    config.available_features.add("nvdisasm")
    config.substitutions.append(("%nvdisasm", nvdisasm))
elif in_ci:
    lit_config.fatal("CI=true but nvdisasm is missing (tools/deps.sh installs it)")

config.substitutions.append(("%truenoc", os.path.join(config.truenoc_bin_dir, "truenoc")))
config.substitutions.append(("%examples", os.path.join(config.truenoc_src_dir, "examples")))
config.substitutions.append(("%benchbundle", os.path.join(config.truenoc_bin_dir, "bench_kernels.tnb")))
config.substitutions.append(("%srcroot", config.truenoc_src_dir))
config.substitutions.append(("%simdriver", os.path.join(os.path.dirname(config.truenoc_bin_dir), "lib", "libtruenort-sim.so")))
if config.ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas-verify", config.ptxas + " -o /dev/null -"))
if config.filecheck:
    config.substitutions.append(("FileCheck", config.filecheck))
if config.not_tool:
    config.substitutions.append(("not ", config.not_tool + " "))
llvm_bin = os.path.dirname(os.path.realpath(config.filecheck)) if config.filecheck else ""
ptxas_bin = os.path.dirname(config.ptxas) if config.ptxas else ""
config.environment["PATH"] = os.pathsep.join(
    p for p in [config.truenoc_bin_dir, llvm_bin, ptxas_bin, os.environ.get("PATH", "")] if p)
for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "CI"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
