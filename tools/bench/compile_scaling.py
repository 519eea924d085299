#!/usr/bin/env python3
"""Compile-time scaling benchmark (not a test): how truenoc's parse, verify, passes and emitter
scale with the number of blocks of one kernel.

It generates .tir kernels of about 3 instructions per block (default 10k, 33k and 100k blocks),
or with --shape one-block a single block of many instructions, and times each stage as its own
process, with its peak resident memory:

  parse+verify   truenoc opt FILE -o /dev/null         (parse, verify, print)
  opt -O2        truenoc opt -O2 FILE -o OPT.tir
  emit-ptx       truenoc emit-ptx OPT.tir --target sm_80 -o /dev/null   (on the -O2 output)

The kernel is a chain of loops; each loop body is a chain of segments, and each segment is a
diamond on a loaded (divergent) value joined by block parameters, a branch on the join's
parameter (divergent through the join only, so divergence travels one branch further per
segment) and an if-then around a store. Values stay live across many blocks: the kernel
parameters and entry constants everywhere, each segment's load for the next 16 segments
(across loop boundaries, so around back edges too), the accumulators through every loop.
Every other loop has a uniform trip count and a shared-memory exchange around bar.sync; the
others leave on a loaded value (a divergent loop exit). The pipeline has work to do: repeated
constants (cse), mul by 4 (strength-reduce), mul + add (fma-fusion).

  tools/bench/compile_scaling.py [--truenoc build/bin/truenoc] [--sizes 10000,33334,100000]
                                 [--time-passes] [--keep DIR] [--timeout SECONDS] [--max-mb MB]
  tools/bench/compile_scaling.py --shape one-block       one block of 30k, 100k, 300k instructions
  tools/bench/compile_scaling.py [--shape S] --write N FILE    only write the kernel of size N

Results and the before/after table: docs/performance.md, "Compile-time scaling".
"""
import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time

SEGMENTS_PER_LOOP = 8
LIVE_DISTANCE = 16  # a segment's load is read again this many segments later


def generate(blocks):
    """A kernel of about `blocks` blocks (5 per segment, 2 per loop), as .tir text."""
    per_loop = SEGMENTS_PER_LOOP * 5 + 2
    loops = max(1, round(blocks / per_loop))
    out = ["""target sm_80
ptx 7.0

kernel @scaling(%x: ptr.global align 16, %y: ptr.global, %n: u32, %s: f32) reqntid(256) {
  shared @buf: f32[256] align 4
^entry:
  %tid = tid.x : u32
  %cta = ctaid.x : u32
  %one = const 1 : u32
  %zero = const 0 : u32
  %fzero = const 0.0 : f32
  %c4 = const 4 : u32
  %sbase = shared.addr @buf : ptr.shared
  %toff = mul %tid, %c4 : u32
  %sp = ptradd %sbase, %toff : ptr.shared
  %tnext = add %tid, %one : u32
  %c255 = const 255 : u32
  %twrap = and %tnext, %c255 : u32
  %qoff = mul %twrap, %c4 : u32
  %sq = ptradd %sbase, %qoff : ptr.shared
  %inside = setp.lt %cta, %n : u32
  cbr %inside, ^L0(%fzero, %tid, %zero), ^done"""]
    w = out.append
    seg = 0
    for m in range(loops):
        uniform = m % 2 == 0
        w(f"^L{m}(%acc.L{m}: f32, %k.L{m}: u32, %it.L{m}: u32):")
        acc, k = f"%acc.L{m}", f"%k.L{m}"
        if uniform:
            # Every thread stores its accumulator, then reads its neighbour's after the barrier.
            w(f"  st %sp, {acc} : f32")
            w("  bar.sync")
            w(f"  %nb.L{m} = ld %sq : f32")
            w(f"  %mix.L{m} = add {acc}, %nb.L{m} : f32")
            acc = f"%mix.L{m}"
        w(f"  br ^h{seg}({acc}, {k})")
        for _ in range(SEGMENTS_PER_LOOP):
            i = seg
            nxt = f"^h{i + 1}" if _ + 1 < SEGMENTS_PER_LOOP else f"^latch{m}"
            w(f"^h{i}(%acc{i}: f32, %k{i}: u32):")
            w(f"  %c4.{i} = const 4 : u32")
            w(f"  %o{i} = mul.wide %k{i}, %c4.{i} : u32")
            w(f"  %p{i} = ptradd %x, %o{i} : ptr.global")
            w(f"  %v{i} = ld %p{i} : f32")
            w(f"  %t{i} = setp.lt %v{i}, %acc{i} : f32")
            w(f"  cbr %t{i}, ^a{i}, ^b{i}")
            w(f"^a{i}:")
            w(f"  %m{i} = mul %v{i}, %s : f32")
            w(f"  %r{i} = add %m{i}, %acc{i} : f32")
            w(f"  br ^j{i}(%r{i}, %one)")
            w(f"^b{i}:")
            old = f"%v{i - LIVE_DISTANCE}" if i >= LIVE_DISTANCE else "%s"
            w(f"  %q{i} = sub %acc{i}, {old} : f32")
            w(f"  br ^j{i}(%q{i}, %zero)")
            w(f"^j{i}(%acc.j{i}: f32, %f{i}: u32):")
            w(f"  %e{i} = setp.eq %f{i}, %zero : u32")
            w(f"  %kn{i} = add %k{i}, %f{i} : u32")
            w(f"  cbr %e{i}, ^g{i}, {nxt}(%acc.j{i}, %kn{i})")
            w(f"^g{i}:")
            w(f"  st %p{i}, %acc.j{i} : f32")
            w(f"  br {nxt}(%acc.j{i}, %kn{i})")
            seg += 1
        w(f"^latch{m}(%acc.x{m}: f32, %k.x{m}: u32):")
        w(f"  %it.n{m} = add %it.L{m}, %one : u32")
        if uniform:
            w(f"  %again{m} = setp.lt %it.n{m}, %n : u32")
        else:
            w(f"  %again{m} = setp.lt %acc.x{m}, %s : f32")
        after = f"^L{m + 1}(%acc.x{m}, %k.x{m}, %zero)" if m + 1 < loops else f"^exit(%acc.x{m})"
        w(f"  cbr %again{m}, ^L{m}(%acc.x{m}, %k.x{m}, %it.n{m}), {after}")
    w("^exit(%final: f32):")
    w("  %tw = mul.wide %tid, %c4 : u32")
    w("  %py = ptradd %y, %tw : ptr.global")
    w("  st %py, %final : f32")
    w("  br ^done")
    w("^done:")
    w("  ret")
    w("}")
    return "\n".join(out) + "\n"


def generate_one_block(insts):
    """About `insts` instructions in the entry block alone: the shape whose cost per instruction
    must not grow with the block (in-place insertions, replacements, per-block tables)."""
    out = ["""target sm_80
ptx 7.0

kernel @one_block(%x: ptr.global align 16, %s: f32) {
^entry:
  %zero = const 0 : u32
  %c4 = const 4 : u32
  %tid = tid.x : u32
  %acc0 = const 0.0 : f32"""]
    w = out.append
    for i in range(max(1, insts // 9)):
        # add 0 (const-fold), mul by 4 (strength-reduce), the same mul again (cse),
        # mul + sub (fma-fusion with a negation), a load and a store.
        w(f"  %i{i} = add %tid, %zero : u32")
        w(f"  %o{i} = mul %i{i}, %c4 : u32")
        w(f"  %d{i} = mul %i{i}, %c4 : u32")
        w(f"  %w{i} = mul.wide %o{i}, %c4 : u32")
        w(f"  %p{i} = ptradd %x, %w{i} : ptr.global")
        w(f"  %v{i} = ld %p{i} : f32")
        w(f"  %m{i} = mul %v{i}, %s : f32")
        w(f"  %acc{i + 1} = sub %m{i}, %acc{i} : f32")
        w(f"  st %p{i}, %acc{i + 1} : f32")
    w("  ret")
    w("}")
    return "\n".join(out) + "\n"


def count(text):
    blocks = sum(1 for line in text.splitlines() if line.startswith("^"))
    insts = sum(1 for line in text.splitlines() if line.startswith("  ") and not line.startswith("  shared"))
    return blocks, insts


def run(cmd, timeout):
    """(wall seconds, CPU seconds, peak RSS in MB, exit status, stderr) of one process, measured
    with wait4 (the child's own rusage, as /usr/bin/time -v reports it). CPU time (user + system)
    is the steadier number on a machine shared with other jobs."""
    with tempfile.TemporaryFile() as err:
        start = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.monotonic() - start
        timed_out = not timer.is_alive()
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        text = err.read()
    if timed_out:
        return None, None, None, "timeout", text
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0, proc.returncode, text


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--truenoc", default=os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin", "truenoc"))
    ap.add_argument("--shape", choices=["chain", "one-block"], default="chain",
                    help="chain: loops of diamonds, sized in blocks; one-block: a single block, sized in instructions")
    ap.add_argument("--sizes", help="comma-separated sizes (default: 10000,33334,100000 blocks for chain, "
                                    "30000,100000,300000 instructions for one-block)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per stage before it is reported as a timeout")
    ap.add_argument("--max-mb", type=float, help="fail when a stage's peak memory exceeds this many MB")
    ap.add_argument("--time-passes", action="store_true", help="also print opt -O2's --time-passes table")
    ap.add_argument("--keep", help="write the kernels and the -O2 output to this folder")
    ap.add_argument("--write", nargs=2, metavar=("SIZE", "FILE"), help="only write the kernel of this size")
    args = ap.parse_args()

    make = generate_one_block if args.shape == "one-block" else generate
    sizes = args.sizes or ("30000,100000,300000" if args.shape == "one-block" else "10000,33334,100000")
    if args.write:
        with open(args.write[1], "w") as f:
            f.write(make(int(args.write[0])))
        return 0

    truenoc = os.path.abspath(args.truenoc)
    work = args.keep or tempfile.mkdtemp(prefix="truenoc-scaling-")
    os.makedirs(work, exist_ok=True)
    print(f"{'blocks':>7} {'insts':>7}  {'stage':<13} {'wall s':>8} {'cpu s':>8} {'peak MB':>8}")
    failed = False
    for n in (int(b) for b in sizes.split(",")):
        text = make(n)
        blocks, insts = count(text)
        src = os.path.join(work, f"scaling-{n}.tir")
        opt = os.path.join(work, f"scaling-{n}.O2.tir")
        with open(src, "w") as f:
            f.write(text)
        stages = [
            ("parse+verify", [truenoc, "opt", src, "-o", "/dev/null"]),
            ("opt -O2", [truenoc, "opt", "-O2", src, "-o", opt] + (["--time-passes"] if args.time_passes else [])),
            ("emit-ptx", [truenoc, "emit-ptx", opt, "--target", "sm_80", "-o", "/dev/null"]),
        ]
        for name, cmd in stages:
            secs, cpu, mb, status, err = run(cmd, args.timeout)
            if status == "timeout":
                print(f"{blocks:>7} {insts:>7}  {name:<13} {'>' + str(int(args.timeout)):>8} {'-':>8} {'-':>8}")
                print(f"error: {name} ran past --timeout {args.timeout:.0f} s")
                failed = True
                break
            print(f"{blocks:>7} {insts:>7}  {name:<13} {secs:>8.2f} {cpu:>8.2f} {mb:>8.0f}", flush=True)
            if status != 0:
                sys.stderr.write(err.decode(errors="replace")[-2000:])
                failed = True
                break
            if args.max_mb and mb > args.max_mb:
                print(f"error: {name} took {mb:.0f} MB, more than --max-mb {args.max_mb:.0f}")
                failed = True
            if args.time_passes and name == "opt -O2":
                sys.stdout.write(err.decode(errors="replace"))
    if not args.keep:
        for f in os.listdir(work):
            os.unlink(os.path.join(work, f))
        os.rmdir(work)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
