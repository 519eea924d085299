# lit configuration for truenoc. Substitutions:
#   %truenoc         the truenoc binary of this build
#   %simdriver       the simulated driver of this build (libtruenort-sim.so, docs/simulator.md)
#   %ptxas-verify    assembles PTX from stdin for the given -arch (REQUIRES: ptxas)
#   %examples        the examples/ folder
#   FileCheck, not   from LLVM
import os
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

config.substitutions.append(("%truenoc", os.path.join(config.truenoc_bin_dir, "truenoc")))
config.substitutions.append(("%examples", os.path.join(config.truenoc_src_dir, "examples")))
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
