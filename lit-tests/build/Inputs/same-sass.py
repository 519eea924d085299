"""Compares two bundles of the same spec, one built with a module per target and one with a cubin
per kernel: every kernel's SASS (nvdisasm) must be the same in both, up to label numbers and the
numbering of ptxas's internal helper functions. Usage: same-sass.py TRUENOC NVDISASM MODULES.tnb
KERNELS.tnb. Prints how many kernel x target pairs were compared; exits 1 on a difference."""
import json
import os
import re
import subprocess
import sys
import tempfile

truenoc, nvdisasm, modules, kernels = sys.argv[1:5]


disassembled = {}  # cubin bytes -> functions: a module's cubin is disassembled once (nvdisasm takes 0.5 s)


def functions(bundle, kernel, target):
    """The instructions of each function of the cubin that holds `kernel` for `target`."""
    cubin = subprocess.run([truenoc, "inspect", bundle, "--extract", f"{kernel}:{target}:cubin"], check=True,
                           capture_output=True).stdout
    if cubin not in disassembled:
        disassembled[cubin] = disassemble(cubin)
    return disassembled[cubin]


def disassemble(cubin):
    """The instructions of each function of a cubin, by name."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "k.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        text = subprocess.run([nvdisasm, "-c", path], check=True, capture_output=True, text=True).stdout
    out, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"\s*\.section\s+\.text\.(\w+)", line)
        if m:
            cur = out.setdefault(m.group(1), [])
            continue
        if re.match(r"\s*\.section\s", line):
            cur = None
        elif cur is not None and re.search(r"/\*[0-9a-f]{4,}\*/", line):
            line = re.sub(r"\.L_x_\d+", "L", re.sub(r"\s+", " ", line.strip()))
            cur.append(re.sub(r"__internal_\d+_", "__internal_", line))
    return out


manifest = json.loads(subprocess.run([truenoc, "inspect", modules, "--json"], check=True, capture_output=True,
                                     text=True).stdout)
compared, differ = 0, 0
for k in manifest["kernels"]:
    for e in k["entries"]:
        if e["kind"] != "cubin":
            continue
        compared += 1
        a = functions(modules, k["name"], e["target"]).get(k["name"])
        b = functions(kernels, k["name"], e["target"]).get(k["name"])
        if not a or a != b:
            differ += 1
            print(f"error: {k['name']} {e['target']}: the SASS differs ({len(a or [])} against {len(b or [])} instructions)")
print(f"{compared} kernel x target cubins compared, {differ} differ")
sys.exit(1 if differ else 0)
