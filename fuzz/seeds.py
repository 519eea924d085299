#!/usr/bin/env python3
"""Seed corpora and dictionaries for the fuzzers, from the repo's own files (fuzz/CMakeLists.txt
runs this at build time; docs/robustness.md, section Fuzzing).

  seeds.py SOURCE_DIR OUT_DIR TRUENOC [PTXAS]

OUT_DIR/seeds/tir     every .tir of examples/, lit-tests/, test/gpu/, and the compiled IR of the
                      kernels in the seed bundles (library templates included)
OUT_DIR/seeds/spec    every spec .toml, and the lit tests that are specs
OUT_DIR/seeds/bundle  small bundles built with TRUENOC (cubins when PTXAS is given; formats 4 to
                      8), and truncated and corrupted copies of them
OUT_DIR/tir.dict, OUT_DIR/spec.dict   libFuzzer dictionaries: IR keywords, ops and modifiers
                      from ir/Ops.def; spec keys, templates and their options
"""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

src, out, truenoc = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
ptxas = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] else None
seeds = out / "seeds"


def fresh(name):
    d = seeds / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    return d


def copy_all(dest, folders, patterns, want=lambda text: True):
    for folder in folders:
        for pattern in patterns:
            for f in sorted((src / folder).rglob(pattern)):
                text = f.read_bytes()
                if want(text):
                    # the path names the seed, so that a finding traces back to its origin
                    (dest / str(f.relative_to(src)).replace("/", "_")).write_bytes(text)


def run(*args):
    return subprocess.run(args, check=True, capture_output=True).stdout


tir = fresh("tir")
copy_all(tir, ["examples", "lit-tests", "test/gpu"], ["*.tir"])
spec = fresh("spec")
copy_all(spec, ["examples", "test", "tools/bench", "tools/cmake-example"], ["*.toml"])
copy_all(spec, ["lit-tests"], ["*.test"], lambda text: b"[[kernel]]" in text or b"[bundle]" in text)

# A spec of many kernels is one slow input (fuzz_spec instantiates every kernel: under ASan tens of
# milliseconds each, so the benchmark's 300 take seconds, near the 5-second timeout on a busy
# machine): such seeds are cut into specs of at most SPEC_KERNELS kernels each, the text before
# the first [[kernel]] heading each of them, every kernel in one of them.
SPEC_KERNELS = 4
for f in sorted(spec.iterdir()):
    lines = f.read_bytes().split(b"\n")
    starts = [i for i, line in enumerate(lines) if line.strip() == b"[[kernel]]"]
    if len(starts) <= SPEC_KERNELS:
        continue
    f.unlink()
    head = lines[:starts[0]]
    for part, at in enumerate(range(0, len(starts), SPEC_KERNELS)):
        end = starts[at + SPEC_KERNELS] if at + SPEC_KERNELS < len(starts) else len(lines)
        f.with_name(f"{f.stem}.part{part}{f.suffix}").write_bytes(b"\n".join(head + lines[starts[at]:end]))

listing = run(truenoc, "list-templates").decode()
templates = re.findall(r"^(\w+)$", listing, re.M)


def extract_ir(tnb, prefix):
    info = json.loads(run(truenoc, "inspect", str(tnb), "--json"))
    for k in info["kernels"]:
        ir = run(truenoc, "inspect", str(tnb), "--extract", f"{k['name']}:{info['targets'][-1]}:ir")
        (tir / f"{prefix}_{k['name']}.tir").write_bytes(ir)


# Small bundles: few kernels keep libFuzzer's input length, and so each run, short.
bundle = fresh("bundle")
build_with = ["--ptxas", ptxas] if ptxas else ["--ptx-only"]
with tempfile.TemporaryDirectory() as tmp:
    tmp = pathlib.Path(tmp)
    fill = bundle / "fill.tnb"  # one .tir kernel for five targets, sm_90a included
    run(truenoc, "build", str(src / "test/gpu/arch_specific.toml"), "-o", str(fill), *build_with)
    run(truenoc, "build", str(src / "test/gpu/arch_specific.toml"), "-o", str(bundle / "fill.no-ir.tnb"),
        "--ptx-only", "--no-ir")
    # A format 5 bundle: a .tir kernel whose tmap parameter has a tensor-map rule.
    run(truenoc, "build", str(src / "lit-tests/spec/tensor-maps.test"), "-o", str(bundle / "tensor-maps.tnb"),
        "--ptx-only")
    library = tmp / "library.toml"  # two templates, one with an option, two targets: a module each (format 6)
    library.write_text('[bundle]\nname = "lib"\ntargets = ["sm_80", "sm_90"]\n\n'
                       '[[kernel]]\ntemplate = "add"\noptions = { dtype = "bf16" }\n\n'
                       '[[kernel]]\ntemplate = "softmax"\n')
    run(truenoc, "build", str(library), "-o", str(bundle / "library.tnb"), *build_with)
    # A format 8 bundle: a mainloop = "auto" kernel, whose sm_90a code has its own parameters and
    # launch rule (a variant, format 7) with tensor maps of 3 dims (format 8); PTX alone keeps it small.
    variants = tmp / "variants.toml"
    variants.write_text('[bundle]\nname = "auto"\ntargets = ["sm_80", "sm_90a"]\n\n'
                        '[[kernel]]\nname = "gemm"\ntemplate = "gemm"\noptions = { dtype = "bf16", mainloop = "auto" }\n')
    run(truenoc, "build", str(variants), "-o", str(bundle / "variants.tnb"), "--ptx-only", "--no-ir")
    # Every template's compiled IR as .tir seeds: real kernels, larger than the hand-written ones.
    everything = tmp / "templates.toml"
    everything.write_text('[bundle]\nname = "all"\ntargets = ["sm_90"]\n' +
                          "".join(f'\n[[kernel]]\ntemplate = "{t}"\n' for t in templates))
    run(truenoc, "build", str(everything), "-o", str(tmp / "templates.tnb"), "--ptx-only")
    extract_ir(tmp / "templates.tnb", "template")
    extract_ir(fill, "fill.tnb")
data = (bundle / "fill.tnb").read_bytes()
for cut in (8, 56, 120, len(data) // 2, len(data) - 1):
    (bundle / f"fill.truncated-{cut}.tnb").write_bytes(data[:cut])
for at in (9, 60, 130, len(data) - 10):  # version, section table, manifest, payload
    damaged = bytearray(data)
    damaged[at] ^= 0x40
    (bundle / f"fill.flipped-{at}.tnb").write_bytes(bytes(damaged))

ops = src / "ir/Ops.def"
words = re.findall(r'^(?:OP\(\w+,|MOD\(\w+,)\s*"([^"]+)"', ops.read_text(), re.M)
words += ["target", "ptx", "kernel", "maxntid", "reqntid", "shared", "table", "align", "nan", "inf", "-inf", "0x",
          "ptr.global", "ptr.shared", "ptr.param", "ptr.local", "ptr.generic", "v2.", "v4.", "pred", "^entry:",
          "sm_80", "sm_90a", "sm_100", "7.0", "8.0"]
words += [p + str(b) for p in "ubs" for b in (8, 16, 32, 64)] + ["f16", "bf16", "f32", "f64"]
(out / "tir.dict").write_text("".join(f'"{w}"\n' for w in dict.fromkeys(words)))

keys = ["[bundle]", "[[kernel]]", "name", "targets", "ptx_fallback", "ir", "fp_contract", "template", "tir",
        "kernel", "block", "grid", "dynamic_shared", "options", "allow_spills", "ceil_div", "min", "max",
        "true", "false", "fast", "off", "sm_80", "sm_90a", "elements", "tensor_maps", "source", "element",
        "dims", "row_stride", "plane_stride", "box", "swizzle"]
keys += templates + re.findall(r"^    (\w+) \(", listing, re.M)
(out / "spec.dict").write_text("".join(f'"{k}"\n' for k in dict.fromkeys(keys)))
