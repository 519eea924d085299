#!/usr/bin/env python3
"""The machine-code report: what ptxas made of each kernel of a bundle, read from its SASS.

For every kernel and target of a bundle, the cubin is disassembled with nvdisasm and measured:

  regs      registers per thread (ptxas -v, as the bundle records it)
  local     bytes of spill stores + spill loads + stack frame, and LDL/STL instructions in the code
  in flight per pass, the most global loads of one hot-loop iteration issued and not yet used (a
            load is in flight from its LDG until the first instruction that reads its destination)
  insts/elt hot-loop instructions per element, per pass (see PASSES), '+' between passes (for the
            templates of SHORTEST the shortest path through an iteration)
  passes    global passes over the main input: the hot loops (loops with 16-byte global loads, or
            the template's LOAD_WIDTH; a remainder loop ptxas splits off after an unrolled one is not
            a pass), 1 without a loop
  in regs   the one-pass path of a template that keeps a row in registers (ONE_PASS): its loads in
            flight, and its instructions per element -- the shortest path through it (the rare
            branches, e.g. rmsnorm's overflow rescan, and the cheaper of the warp or block merge,
            drop out) from its first 16-byte load to its EXIT, cross-thread reductions included,
            divided by the elements a thread holds at the bound. '-' for other kernels
  mufu      MUFU instructions, and how many of them come with range fix-ups (non-.ftz ex2, rcp,
            rsqrt, div.approx: FSETP + predicated or FSEL-scaled FMUL around the MUFU)

A hot loop is an innermost loop (a backward branch) with a 16-byte global load; a kernel without
one is measured over its straight-line vector path (entry to the first EXIT after the last
16-byte global access). Elements per iteration are the 16-byte loads' bytes divided by the bytes
one element of that pass reads (PASSES, per template, from the kernel's design).

  sass_report.py BUNDLE [--truenoc BIN] [--nvdisasm BIN]          print the table (markdown)
  sass_report.py BUNDLE --check docs/performance.md               fail on a regression against
                                                                  the table there
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

# Bytes read per element by each pass of a template, in loop order, for storage size d -- what
# each hot loop streams per element. A kernel is named <template>[_anything]_<f32|bf16|f16>.
PASSES = {
    "add": lambda d: [2 * d], "mul": lambda d: [2 * d], "residual_add": lambda d: [2 * d],
    "swiglu": lambda d: [2 * d], "scale": lambda d: [d], "relu": lambda d: [d], "silu": lambda d: [d],
    "gelu_tanh": lambda d: [d], "gelu_erf": lambda d: [d],
    "softmax": lambda d: [d, d], "softmax_partial": lambda d: [d], "softmax_merge": lambda d: [d],
    "layernorm": lambda d: [d, 3 * d], "rmsnorm": lambda d: [d, 2 * d],
    "rmsnorm_partial": lambda d: [d], "rmsnorm_merge": lambda d: [2 * d],
    "layernorm_partial": lambda d: [d], "layernorm_merge": lambda d: [3 * d],
    "residual_rmsnorm": lambda d: [2 * d, 2 * d],
    "argmax": lambda d: [d], "argmax_partial": lambda d: [d],
    "gemv": lambda d: [d + 4],
    # rope: q or k, rotated in place (neox loads both halves of a pair); transpose: x, through a
    # shared tile; kv_scatter: one element of k_new and one of v_new (the u32 position is per row).
    "rope": lambda d: [d], "transpose": lambda d: [d], "kv_scatter": lambda d: [2 * d],
    # attention_decode (head_dim 128): one element of K and one of V a position.
    "attention_decode": lambda d: [2 * d],
}
# Templates whose hot loops load narrower slices than 16 bytes: the width of their loads, for
# storage size d (attention_decode at head_dim 128: a lane's 4 elements of a row). Their hot loops
# are the loops with global loads of that width (the ones of the vector path).
LOAD_WIDTH = {"attention_decode": lambda d: 4 * d}
# Templates whose hot loops hold a rarely taken arm: their instructions per element count the
# shortest path through an iteration (attention_decode rescales its accumulators only in a step
# where some head's max grew).
SHORTEST = {"attention_decode"}
SIZES = {"f32": 4, "bf16": 2, "f16": 2, "e4m3": 1}  # e4m3: fp8 weights (gemv_e4m3), f32 x
# Hot loops that are not passes: rmsnorm's rescan of a thread's elements, run only by a thread
# whose sum of squares overflowed (indices into the hot loops, in order).
RARE = {"rmsnorm": [1], "residual_rmsnorm": [1], "rmsnorm_partial": [1]}
# Templates with a one-pass path (the row in registers, no loop): bytes of 16-byte loads per
# element of the row on that path (x, then the per-column parameters).
ONE_PASS = {"softmax": lambda d: d, "rmsnorm": lambda d: 2 * d, "residual_rmsnorm": lambda d: 3 * d,
            "layernorm": lambda d: 3 * d}

INST = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
LABEL = re.compile(r"^(\.L_x_\d+):")
REG = re.compile(r"\bR(\d+)(\.64)?\b")


class Inst:
    def __init__(self, text):
        self.text = text
        m = re.match(r"(@!?U?P\w+\s+)?(\S+)\s*(.*)", text)
        self.pred = bool(m.group(1))
        self.op = m.group(2)
        self.args = [a.strip() for a in split_args(m.group(3))] if m.group(3) else []
        self.base = self.op.split(".")[0]

    def width(self):  # bytes of a global load/store
        for w, b in ((".128", 16), (".64", 8), (".U16", 2), (".S16", 2), (".U8", 1), (".S8", 1)):
            if w in self.op:
                return b
        return 4

    def dests(self):
        if self.base in ("STG", "STS", "STL", "ST", "RED", "BRA", "EXIT", "BAR", "BSSY", "BSYNC", "CALL", "RET"):
            return set()
        if not self.args:
            return set()
        regs = regs_of(self.args[0])
        if self.base in ("LDG", "LDS", "LDL", "LD") and regs:
            r = min(regs)
            return set(range(r, r + max(1, self.width() // 4)))
        return regs

    def sources(self):
        args = self.args if not self.dests() else self.args[1:]
        out = set()
        for a in args:
            out |= regs_of(a)
        if self.base in ("STG", "STS", "STL", "ST") and len(self.args) > 1:
            r = regs_of(self.args[1])
            if r:
                out |= set(range(min(r), min(r) + max(1, self.width() // 4)))
        return out


def split_args(s):
    out, depth, cur = [], 0, ""
    for c in s:
        if c in "[(":
            depth += 1
        elif c in "])":
            depth -= 1
        if c == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += c
    return out + [cur] if cur.strip() else out


def regs_of(arg):
    out = set()
    for m in REG.finditer(arg):
        r = int(m.group(1))
        out |= {r, r + 1} if m.group(2) else {r}
    return out


def parse_sass(text):
    """The kernel's instructions (NOPs and the closing self-branch left out) and its labels."""
    insts, labels = [], {}
    for line in text.splitlines():
        lm = LABEL.match(line.strip())
        if lm:
            labels[lm.group(1)] = len(insts)
            continue
        m = INST.match(line)
        if m and m.group(2) != "NOP":
            insts.append(Inst(m.group(2)))
    # The trailing `.L_x_N: BRA .L_x_N` that parks a finished warp is not code.
    if insts and insts[-1].base == "BRA":
        insts.pop()
    return insts, labels


def target(inst, labels):
    m = re.search(r"\(\s*(\.L_x_\d+)\s*\)", inst.text)
    return labels.get(m.group(1)) if inst.base == "BRA" and m else None


def all_loops(insts, labels):
    """(start, end) index pairs of every loop: backward branches to a label."""
    return [(t, i) for i, inst in enumerate(insts) for t in [target(inst, labels)] if t is not None and t <= i]


def loops(insts, labels):
    """(start, end) index pairs of the innermost loops."""
    found = all_loops(insts, labels)
    return [l for l in found if not any(o != l and l[0] <= o[0] and o[1] <= l[1] for o in found)]


def one_pass(insts, labels):
    """The loop-free path that keeps a row in registers: (first, exit) indices of the span from the first 16-byte
    global load outside every loop to the EXIT after the last 16-byte access outside every loop, its loads in flight
    and the length of the shortest path through it (forward branches only), or None."""
    spans = all_loops(insts, labels)
    outside = [i for i, x in enumerate(insts)
               if x.base in ("LDG", "STG") and x.width() == 16 and not any(a <= i <= b for a, b in spans)]
    loads = [i for i in outside if insts[i].base == "LDG"]
    if not loads:
        return None
    lo = loads[0]
    hi = next((i for i in range(outside[-1], len(insts)) if insts[i].base == "EXIT"), len(insts) - 1)
    return lo, hi, in_flight(insts, lo, hi), shortest(insts, labels, lo, hi)


def shortest(insts, labels, lo, hi):
    """The fewest instructions executed from lo to hi (both included), by forward branches only; a predicated EXIT or
    BRA may fall through."""
    inf = float("inf")
    dist = [inf] * (hi + 2)
    dist[lo] = 1
    for i in range(lo, hi + 1):
        if dist[i] == inf:
            continue
        inst = insts[i]
        t = target(inst, labels)
        if t is not None and lo <= t <= hi + 1 and t > i:
            dist[t] = min(dist[t], dist[i] + 1)
        ends = inst.base in ("EXIT", "BRA") and not inst.pred
        if not ends and i + 1 <= hi:
            dist[i + 1] = min(dist[i + 1], dist[i] + 1)
    return dist[hi]


def global_loads(insts, lo, hi, width=None):
    return [i for i in range(lo, hi + 1) if insts[i].base == "LDG" and (width is None or insts[i].width() == width)]


def in_flight(insts, lo, hi):
    """The most global loads of [lo, hi] issued and not yet read at any point."""
    pending, best = [], 0
    for i in range(lo, hi + 1):
        inst = insts[i]
        srcs = inst.sources()
        pending = [d for d in pending if not (d & srcs)]
        if inst.base == "LDG":
            pending.append(inst.dests())
            best = max(best, len(pending))
        else:
            # a write over a pending load's register without reading it: that load is dead
            pending = [d for d in pending if not (d & inst.dests())]
    return best


def hot_regions(insts, labels, width=16):
    """The passes: hot loops (with global loads of `width` bytes) in order, a remainder loop that follows an unrolled
    one dropped."""
    hot = [l for l in loops(insts, labels) if global_loads(insts, *l, width=width)]
    hot.sort()
    passes = []
    for l in hot:
        if passes:
            prev = passes[-1]
            n_prev, n = len(global_loads(insts, *prev, width=width)), len(global_loads(insts, *l, width=width))
            between = [i for i in range(prev[1] + 1, l[0]) if insts[i].base == "LDG" and insts[i].width() == width]
            if n < n_prev and n_prev % n == 0 and not between:
                continue
        passes.append(l)
    if passes:
        return passes, True
    wide = [i for i, x in enumerate(insts) if x.base in ("LDG", "STG") and x.width() == 16]
    if not wide:
        return [], False
    end = next((i for i in range(wide[-1], len(insts)) if insts[i].base == "EXIT"), len(insts) - 1)
    return [(0, end)], False


def mufu_counts(insts):
    total = fixed = 0
    for i, inst in enumerate(insts):
        if inst.base != "MUFU":
            continue
        total += 1
        src, dst = inst.sources(), inst.dests()
        expanded = False
        for j in range(i - 1, max(-1, i - 12), -1):  # the last writer of the source
            if insts[j].dests() & src:
                w = insts[j]
                fsel = w.base == "FMUL" and any(
                    insts[k].base == "FSEL" and insts[k].dests() & w.sources() for k in range(max(0, j - 12), j))
                expanded = w.pred or fsel
                break
        for j in range(i + 1, min(len(insts), i + 12)):  # a predicated fix-up of the result
            if insts[j].pred and insts[j].sources() & dst and insts[j].base == "FMUL":
                expanded = True
                break
            if insts[j].dests() & dst:
                break
        fixed += expanded
    return total, fixed


def measure(text, name):
    insts, labels = parse_sass(text)
    # The template is the longest PASSES key the name starts with, the storage its last part.
    dtype = name.rpartition("_")[2]
    template = max((t for t in PASSES if name.startswith(t + "_")), key=len, default=None)
    width = LOAD_WIDTH[template](SIZES[dtype]) if template in LOAD_WIDTH and dtype in SIZES else 16
    regions, looped = hot_regions(insts, labels, width)
    per = PASSES.get(template)
    sizes = per(SIZES[dtype]) if per and dtype in SIZES else None
    rare = RARE.get(template, [])
    if looped and len(regions) > max(rare, default=-1):
        regions = [r for k, r in enumerate(regions) if k not in rare]
    flight = [in_flight(insts, *r) for r in regions]
    regs_path = None
    if template in ONE_PASS and dtype in SIZES:
        found = one_pass(insts, labels)
        if found:
            lo, hi, fl, length = found
            loaded = sum(insts[i].width() for i in global_loads(insts, lo, hi, width=16))
            regs_path = (fl, length * ONE_PASS[template](SIZES[dtype]) / loaded)
    ipe = []
    if sizes and len(sizes) == len(regions):
        for (lo, hi), bytes_per in zip(regions, sizes):
            loaded = sum(insts[i].width() for i in global_loads(insts, lo, hi, width=width))
            length = shortest(insts, labels, lo, hi) if template in SHORTEST else hi - lo + 1
            ipe.append(length * bytes_per / loaded if loaded else None)
    local_insts = sum(1 for x in insts if x.base in ("LDL", "STL"))
    mufu, fixed = mufu_counts(insts)
    return {
        "in_flight": flight,
        "per_element": ipe if ipe and None not in ipe else None,
        "passes": len(regions) if looped else (1 if regions else 0),
        "local_insts": local_insts,
        "mufu": mufu,
        "mufu_fixed": fixed,
        "in_regs": regs_path,
    }


def find_nvdisasm(given):
    if given:
        return given
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    for p in [shutil.which("nvdisasm"), os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvdisasm"),
              os.path.join(cache, "truenoc", "tools", "bin", "nvdisasm")]:
        if p and os.access(p, os.X_OK):
            return p
    sys.exit("sass_report.py: nvdisasm not found (PATH, $CUDA_HOME/bin, or tools/deps.sh's copy)")


SECTION = re.compile(r"^\s*\.section\s+([^,\s]+)")


def function_sass(text, name):
    """The lines of nvdisasm output in the code section of function `name` (a cubin may hold a
    module of several kernels)."""
    out, inside = [], False
    for line in text.splitlines():
        m = SECTION.match(line)
        if m:
            inside = m.group(1) == ".text." + name
            continue
        if inside:
            out.append(line)
    return "\n".join(out)


def cubin_sass(bundle, kernel, target, truenoc, nvdisasm, tmp):
    """nvdisasm's text of the cubin that holds `kernel` for `target` (a module's: all of them)."""
    cubin = os.path.join(tmp, "%s.%s.cubin" % (kernel, target))
    with open(cubin, "wb") as f:
        f.write(subprocess.run([truenoc, "inspect", bundle, "--extract", "%s:%s:cubin" % (kernel, target)],
                               check=True, capture_output=True).stdout)
    return subprocess.run([nvdisasm, "-c", cubin], check=True, capture_output=True, text=True).stdout


def report(bundle, truenoc, nvdisasm):
    manifest = json.loads(subprocess.run([truenoc, "inspect", bundle, "--json"], check=True, capture_output=True,
                                         text=True).stdout)
    jobs = [(k["name"], e) for k in manifest["kernels"] for e in k["entries"] if e["kind"] == "cubin"]
    with tempfile.TemporaryDirectory() as tmp:
        # A module (one cubin shared by the kernels of a target) is disassembled once.
        cubins = {}
        for name, e in jobs:
            cubins.setdefault(("module", e["target"]) if e.get("module") else (name, e["target"]), (name, e["target"]))

        def disassemble(key):
            name, target = cubins[key]
            return key, cubin_sass(bundle, name, target, truenoc, nvdisasm, tmp)

        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            sass = dict(pool.map(disassemble, cubins))

        def one(job):
            name, e = job
            text = sass[("module", e["target"]) if e.get("module") else (name, e["target"])]
            m = measure(function_sass(text, name), name)
            m.update(kernel=name, target=e["target"], regs=e["registers"],
                     local=e["spill_stores"] + e["spill_loads"] + e["stack_bytes"])
            return m
        return [one(job) for job in jobs]


HEADER = ["kernel", "target", "regs", "local bytes / insts", "loads in flight", "insts per element", "passes",
          "MUFU (with fix-ups)", "row in registers: in flight / insts per element"]


def fmt(r):
    ipe = " + ".join("%.1f" % x for x in r["per_element"]) if r["per_element"] else "-"
    flight = " + ".join(str(x) for x in r["in_flight"]) or "0"
    return [r["kernel"], r["target"], str(r["regs"]), "%d / %d" % (r["local"], r["local_insts"]), flight,
            ipe, str(r["passes"]), "%d (%d)" % (r["mufu"], r["mufu_fixed"]),
            "%d / %.1f" % r["in_regs"] if r["in_regs"] else "-"]


def table(rows):
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(fmt(r)) + " |" for r in rows]
    return "\n".join(lines)


def read_baseline(path):
    """The machine-code table of docs/performance.md: rows keyed by (kernel, target)."""
    base, inside = {}, False
    for line in open(path, encoding="utf-8"):
        if line.startswith("| " + " | ".join(HEADER)):
            inside = True
            continue
        if inside and not line.startswith("|"):
            break
        if inside and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            base[(cells[0], cells[1])] = cells
    return base


def check(rows, base):
    """Regressions: more registers (in allocation units of 8), local memory, instructions per element (summed over the
    passes), passes or MUFU fix-ups; fewer loads in flight in a pass; on the one-pass path fewer loads in flight or
    more instructions per element. A kernel missing from either side is a failure too."""
    failures, better = [], []
    seen = set()
    for r in rows:
        key = (r["kernel"], r["target"])
        seen.add(key)
        new = fmt(r)
        old = base.get(key)
        if old is None:
            failures.append("%s %s: not in the baseline table (add its row: %s)" % (key + (" | ".join(new),)))
            continue
        def nums(cell):
            return [float(x) for x in re.findall(r"[0-9.]+", cell)]
        for col, worse_if_higher in ((2, True), (3, True), (4, False), (5, True), (6, True), (7, True), (8, None)):
            a, b = nums(old[col]), nums(new[col])
            if col == 8:  # the one-pass path: fewer loads in flight or more instructions per element
                if len(a) == len(b) == 2 and (b[0] < a[0] or b[1] > a[1] + 1e-9):
                    failures.append("%s %s: %s regressed: %s -> %s" % (key + (HEADER[col], old[col], new[col])))
                elif len(a) != len(b):
                    failures.append("%s %s: %s changed shape: %s -> %s" % (key + (HEADER[col], old[col], new[col])))
                elif a != b:
                    better.append("%s %s: %s improved: %s -> %s" % (key + (HEADER[col], old[col], new[col])))
                continue
            if col == 2:  # registers are allocated 8 per thread at a time: 18 -> 19 changes nothing
                a, b = [-(-x // 8) * 8 for x in a], [-(-x // 8) * 8 for x in b]
            if col == 7:  # MUFU count grows with unrolling; only the fix-ups are a regression
                a, b = a[1:], b[1:]
            if col == 5:  # the work per element: the passes' sum (ptxas moves a little between them)
                a, b = [round(sum(a), 1)] if a else a, [round(sum(b), 1)] if b else b
            if len(a) != len(b):
                failures.append("%s %s: %s changed shape: %s -> %s" % (key + (HEADER[col], old[col], new[col])))
                continue
            if any((y > x + 1e-9) if worse_if_higher else (y < x - 1e-9) for x, y in zip(a, b)):
                failures.append("%s %s: %s regressed: %s -> %s" % (key + (HEADER[col], old[col], new[col])))
            elif a != b:
                better.append("%s %s: %s improved: %s -> %s" % (key + (HEADER[col], old[col], new[col])))
    for key in base:
        if key not in seen:
            failures.append("%s %s: in the baseline table but not in the bundle" % key)
    return failures, better


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bundle")
    ap.add_argument("--truenoc", default="truenoc")
    ap.add_argument("--nvdisasm", default="")
    ap.add_argument("--check", metavar="PERFORMANCE_MD", help="compare with the machine-code table in this file")
    a = ap.parse_args()
    rows = report(a.bundle, a.truenoc, find_nvdisasm(a.nvdisasm))
    if not a.check:
        print(table(rows))
        return 0
    failures, better = check(rows, read_baseline(a.check))
    for b in better:
        print("note: " + b + " (update the baseline table)")
    for f in failures:
        print("error: " + f)
    print("%d kernels x targets checked, %d regressions" % (len(rows), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
