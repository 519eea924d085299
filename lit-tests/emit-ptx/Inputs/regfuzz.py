#!/usr/bin/env python3
"""Randomized check of the emitter's register names against the CPU interpreter.

For each seed: generate a kernel with nested diamonds and loops whose block parameters of every
register class are permuted on their edges (swaps, rotations, values live on one edge only),
run it with `truenoc interp`, emit PTX with shared register names and with --no-reg-reuse, run
both PTX texts in the small PTX simulator below (one thread at a time: the kernels have no
collectives) and compare every stored word. The simulator rejects reads of registers never
written, registers outside their .reg declaration and labels it cannot find.

usage: regfuzz.py TRUENOC FIRST_SEED COUNT WORKDIR
"""
import os
import random
import re
import struct
import subprocess
import sys

THREADS = 4
SLOTS = 8  # words each thread stores
MASK = {"u16": 0xFFFF, "u32": 0xFFFFFFFF, "u64": 0xFFFFFFFFFFFFFFFF, "f32": 0xFFFFFFFF, "f64": 0xFFFFFFFFFFFFFFFF}


class Gen:
    """Structured generation, so that every use is dominated by its definition."""

    def __init__(self, rng):
        self.rng = rng
        self.blocks = []  # [header, lines]
        self.n = 0

    def fresh(self, base="v"):
        self.n += 1
        return "%s%d" % (base, self.n)

    def label(self, base):
        self.n += 1
        return "%s%d" % (base, self.n)

    def open(self, name, params=()):
        head = "^%s" % name
        if params:
            head += "(" + ", ".join("%%%s: %s" % (p, "u32" if t == "dig" else t) for p, t in params) + ")"
        self.blocks.append([head + ":", []])

    def emit(self, text):
        self.blocks[-1][1].append("  " + text)

    def define(self, scope, text, ty):
        v = self.fresh()
        self.emit("%%%s = %s : %s" % (v, text, ty))
        scope.append((v, ty if "->" not in ty else ty.split("-> ")[1]))
        return v

    def pick(self, scope, ty):
        vals = [v for v, t in scope if t == ty]
        if not vals:
            return None
        # mostly recent values: long chains through the block parameters reach the stores
        return vals[max(0, len(vals) - 1 - int(self.rng.expovariate(0.5)))]

    def value(self, scope, ty):
        """A value of type ty from the scope, or a new constant; "dig" is the current digest."""
        if ty == "dig":
            return [v for v, t in scope if t == "dig"][-1]
        v = self.pick(scope, ty)
        if v is None or self.rng.random() < 0.1:
            if ty == "pred":
                v = self.define(scope, "const %d" % self.rng.randrange(2), "pred")
            elif ty in ("f32", "f64"):
                bits = self.value(scope, "u32" if ty == "f32" else "u64")
                v = self.define(scope, "bitcast %%%s" % bits, ("u32 -> f32" if ty == "f32" else "u64 -> f64"))
            else:
                v = self.define(scope, "const %d" % self.rng.randrange(MASK[ty] + 1 if self.rng.random() < 0.3 else 9), ty)
        return v

    def op(self, scope):
        r = self.rng.random()
        V = lambda t: self.value(scope, t)
        if r < 0.35:
            o = self.rng.choice(["add", "sub", "mul", "xor", "and", "or"])
            self.define(scope, "%s %%%s, %%%s" % (o, V("u32"), V("u32")), "u32")
        elif r < 0.45:
            self.define(scope, "selp %%%s, %%%s, %%%s" % (V("u32"), V("u32"), V("pred")), "u32")
        elif r < 0.55:
            self.define(scope, "setp.%s %%%s, %%%s" % (self.rng.choice(["lt", "eq", "ne"]), V("u32"), V("u32")), "u32")
            scope[-1] = (scope[-1][0], "pred")
        elif r < 0.6:
            self.define(scope, "%s %%%s, %%%s" % (self.rng.choice(["and", "xor", "or"]), V("pred"), V("pred")), "pred")
        elif r < 0.68:
            self.define(scope, "mul.wide %%%s, %%%s" % (V("u32"), V("u32")), "u32")
            scope[-1] = (scope[-1][0], "u64")
        elif r < 0.74:
            self.define(scope, "add %%%s, %%%s" % (V("u64"), V("u64")), "u64")
        elif r < 0.8:
            self.define(scope, "cvt %%%s" % V("u64"), "u64 -> u32")
        elif r < 0.86:
            self.define(scope, "cvt %%%s" % V("u32"), "u32 -> u16")
        elif r < 0.9:
            self.define(scope, "add %%%s, %%%s" % (V("u16"), V("u16")), "u16")
        elif r < 0.93:
            self.define(scope, "cvt %%%s" % V("u16"), "u16 -> u32")
        elif r < 0.96:
            self.define(scope, "bitcast %%%s" % V("f32"), "f32 -> u32")
        else:
            self.define(scope, "bitcast %%%s" % V("f64"), "f64 -> u64")

    def carried(self, scope, k, digest=True):
        """Parameter types: a few classes, so that permutations within a class are likely."""
        kinds = self.rng.sample(["u32", "u64", "pred", "u16", "f32", "f64"], self.rng.randrange(1, 4))
        tys = [self.rng.choice(kinds) for _ in range(k)]
        if digest:
            tys.insert(self.rng.randrange(len(tys) + 1), "dig")
        return tys

    def as_u32(self, scope, v, t):
        if t in ("u32", "dig"):
            return v
        if t == "u64":
            return self.define(scope, "cvt %%%s" % v, "u64 -> u32")
        if t == "u16":
            return self.define(scope, "cvt %%%s" % v, "u16 -> u32")
        if t == "f32":
            return self.define(scope, "bitcast %%%s" % v, "f32 -> u32")
        if t == "f64":
            return self.as_u32(scope, self.define(scope, "bitcast %%%s" % v, "f64 -> u64"), "u64")
        one = self.define(scope, "const 1", "u32")
        zero = self.define(scope, "const 0", "u32")
        return self.define(scope, "selp %%%s, %%%s, %%%s" % (one, zero, v), "u32")

    def absorb(self, scope, vals):
        """digest = digest * K + value for each value, in order (a permutation changes it)."""
        for v, t in vals:
            if t == "dig":
                continue
            u = self.as_u32(scope, v, t)
            k = self.define(scope, "const 2654435761", "u32")
            d = self.define(scope, "mul %%%s, %%%s" % (self.value(scope, "dig"), k), "u32")
            self.define(scope, "add %%%s, %%%s" % (d, u), "u32")
            scope[-1] = (scope[-1][0], "dig")

    def args(self, scope, tys):
        return ", ".join("%" + self.value(scope, t) for t in tys)

    def region(self, scope, depth):
        scope = list(scope)
        for _ in range(self.rng.randrange(1, 4)):
            r = self.rng.random()
            if depth >= 3 or r < 0.4:
                for _ in range(self.rng.randrange(1, 5)):
                    self.op(scope)
            elif r < 0.65:
                scope = self.diamond(scope, depth)
            elif r < 0.85:
                scope = self.loop(scope, depth)
            else:
                scope = self.do_while(scope, depth)
        return scope

    def cond(self, scope):
        """A branch condition, usually computed from thread-dependent values (threads diverge)."""
        if self.rng.random() < 0.2:
            return self.value(scope, "pred")
        x = self.rng.choice([self.tid, self.value(scope, "u32")])
        y = self.define(scope, "const %d" % self.rng.randrange(1, THREADS), "u32")
        v = self.define(scope, "setp.%s %%%s, %%%s" % (self.rng.choice(["lt", "ne"]), x, y), "u32")
        scope[-1] = (v, "pred")
        return v

    def join_params(self, tys):
        return [(self.fresh("j"), t) for t in tys]

    def diamond(self, scope, depth):
        tys = self.carried(scope, self.rng.randrange(0, 5))
        params = self.join_params(tys)
        then, other, join = self.label("then"), self.label("else"), self.label("join")
        cond = self.cond(scope)
        if self.rng.random() < 0.3:  # one side goes straight to the join with its arguments
            self.emit("cbr %%%s, ^%s, ^%s%s" % (cond, then, join, "(%s)" % self.args(scope, tys) if tys else ""))
            self.open(then)
            inner = self.region(scope, depth + 1)
            self.emit("br ^%s%s" % (join, "(%s)" % self.args(inner, tys) if tys else ""))
        else:
            self.emit("cbr %%%s, ^%s, ^%s" % (cond, then, other))
            for name in (then, other):
                self.open(name)
                inner = self.region(scope, depth + 1)
                self.emit("br ^%s%s" % (join, "(%s)" % self.args(inner, tys) if tys else ""))
        self.open(join, params)
        scope = scope + params
        self.absorb(scope, params)
        return scope

    def trip(self, scope):
        if self.rng.random() < 0.5:
            return self.define(scope, "const %d" % self.rng.randrange(5), "u32")
        mask = self.define(scope, "const 3", "u32")
        low = self.define(scope, "and %%%s, %%%s" % (self.rng.choice([self.tid, self.value(scope, "u32")]), mask), "u32")
        return self.define(scope, "add %%%s, %%%s" % (low, mask), "u32")

    def loop(self, scope, depth):
        """while (i < trip) { body }: header params permuted on the back edge; the exit edge passes some."""
        trip = self.trip(scope)
        zero = self.define(scope, "const 0", "u32")
        tys = self.carried(scope, self.rng.randrange(1, 5))
        head, body, exit_ = self.label("head"), self.label("body"), self.label("exit")
        i = self.fresh("i")
        params = [(self.fresh("c"), t) for t in tys]
        self.emit("br ^%s(%%%s, %s)" % (head, zero, self.args(scope, tys)))
        self.open(head, [(i, "u32")] + params)
        hscope = scope + [(i, "u32")] + params
        more = self.define(hscope, "setp.lt %%%s, %%%s" % (i, trip), "u32")
        hscope[-1] = (hscope[-1][0], "pred")
        etys = self.carried(hscope, self.rng.randrange(0, 4), digest=False)
        eparams = self.join_params(etys)
        self.emit("cbr %%%s, ^%s, ^%s%s" % (more, body, exit_, "(%s)" % self.args(hscope, etys) if etys else ""))
        self.open(body)
        inner = self.region(hscope, depth + 1)
        self.absorb(inner, params)
        one = self.define(inner, "const 1", "u32")
        i2 = self.define(inner, "add %%%s, %%%s" % (i, one), "u32")
        back = self.permuted(inner, params)
        self.emit("br ^%s(%%%s, %s)" % (head, i2, back))
        self.open(exit_, eparams)
        scope = hscope + eparams
        self.absorb(scope, params + eparams)
        return scope

    def permuted(self, scope, params):
        """Back-edge arguments: mostly other parameters of the same type (swaps, rotations)."""
        out = []
        for p, t in params:
            same = [q for q, u in params if u == t]
            if t != "dig" and self.rng.random() < 0.8:
                out.append("%" + self.rng.choice(same))
            else:
                out.append("%" + self.value(scope, t))
        return ", ".join(out)

    def do_while(self, scope, depth):
        """do { body } while (i < trip): the back edge and the exit edge both carry arguments."""
        trip = self.trip(scope)
        zero = self.define(scope, "const 0", "u32")
        tys = self.carried(scope, self.rng.randrange(1, 5))
        head, exit_ = self.label("loop"), self.label("done")
        i = self.fresh("i")
        params = [(self.fresh("c"), t) for t in tys]
        self.emit("br ^%s(%%%s, %s)" % (head, zero, self.args(scope, tys)))
        self.open(head, [(i, "u32")] + params)
        hscope = scope + [(i, "u32")] + params
        for _ in range(self.rng.randrange(0, 4)):
            self.op(hscope)
        self.absorb(hscope, params)
        one = self.define(hscope, "const 1", "u32")
        i2 = self.define(hscope, "add %%%s, %%%s" % (i, one), "u32")
        more = self.define(hscope, "setp.lt %%%s, %%%s" % (i2, trip), "u32")
        hscope[-1] = (hscope[-1][0], "pred")
        etys = self.carried(hscope, self.rng.randrange(0, 4), digest=False)
        eparams = self.join_params(etys)
        back = self.permuted(hscope, params)
        self.emit("cbr %%%s, ^%s(%%%s, %s), ^%s%s" % (more, head, i2, back, exit_,
                                                  "(%s)" % self.args(hscope, etys) if etys else ""))
        self.open(exit_, eparams)
        scope = hscope + eparams
        self.absorb(scope, params + eparams)
        return scope


def generate(seed):
    rng = random.Random(seed)
    g = Gen(rng)
    g.open("entry")
    scope = [("a", "u32"), ("b", "u32"), ("w", "u64")]
    tid = g.tid = g.define(scope, "tid.x", "u32")
    g.define(scope, "xor %a, %b", "u32")
    scope[-1] = (scope[-1][0], "dig")
    scope = g.region(scope, 0)
    # out[tid * SLOTS + k] = a value of the final scope, as 32 bits
    stride = g.define(scope, "const %d" % (SLOTS * 4), "u32")
    off = g.define(scope, "mul.wide %%%s, %%%s" % (tid, stride), "u32")
    scope[-1] = (scope[-1][0], "u64")
    base = g.define(scope, "ptradd %%out, %%%s" % off, "ptr.global")
    for k in range(SLOTS):
        t = "dig" if k == 0 else rng.choice(["u32", "u64", "pred", "u16", "f32", "f64"])
        v = g.as_u32(scope, g.value(scope, t), t)
        k4 = g.define(scope, "const %d" % (4 * k), "u64")
        p = g.define(scope, "ptradd %%%s, %%%s" % (base, k4), "ptr.global")
        g.emit("st %%%s, %%%s : u32" % (p, v))
    g.emit("ret")
    text = "target sm_80\nptx 7.0\n\nkernel @fuzz(%out: ptr.global, %a: u32, %b: u32, %w: u64) {\n"
    for head, lines in g.blocks:
        text += head + "\n" + "\n".join(lines) + "\n"
    return text + "}\n"


class Sim:
    """Executes the PTX subset the generator's kernels emit to, one thread at a time."""

    def __init__(self, ptx):
        body = ptx[ptx.index("{") + 1: ptx.rindex("}")]
        self.decl = {}
        self.code, self.labels = [], {}
        for raw in body.split("\n"):
            line = raw.strip()
            if not line:
                continue
            m = re.match(r"\.reg \.\w+ (%[a-z]+)<(\d+)>;$", line)
            if m:
                self.decl[m.group(1)] = int(m.group(2))
            elif line.endswith(":"):
                self.labels[line[:-1]] = len(self.code)
            else:
                self.code.append(line.rstrip(";"))

    def reg(self, name):
        m = re.match(r"(%[a-z]+)(\d+)$", name)
        if not m or int(m.group(2)) >= self.decl.get(m.group(1), 0) or int(m.group(2)) == 0:
            raise RuntimeError("register %s is not declared" % name)
        return name

    def run(self, params, tid, memory):
        regs = {}

        def get(x):
            if x.startswith("%tid."):
                return tid
            if x.startswith("%"):
                if self.reg(x) not in regs:
                    raise RuntimeError("read of %s before any write" % x)
                return regs[x]
            return int(x)

        pc, steps = 0, 0
        while True:
            steps += 1
            if steps > 100000:
                raise RuntimeError("runaway")
            ins = self.code[pc]
            pc += 1
            guard = None
            if ins.startswith("@"):
                guard, ins = ins.split(" ", 1)
            opcode, _, rest = ins.partition(" ")
            ops = [o.strip() for o in re.split(r",(?![^{]*})", rest)] if rest else []
            if guard is not None:
                taken = bool(get(guard.lstrip("@!")))
                if guard.startswith("@!"):
                    taken = not taken
                if not taken:
                    continue
            parts = opcode.split(".")
            base = parts[0]
            if base == "ret":
                return
            if base == "bra":
                pc = self.labels[ops[0]]
                continue
            if base == "st":
                addr = get(ops[0].strip("[]"))
                memory[addr] = get(ops[1]) & 0xFFFFFFFF
                continue
            d = self.reg(ops[0])
            ty = parts[-1]
            width = {"pred": 1, "u16": 16, "b16": 16, "u32": 32, "b32": 32, "s32": 32, "f32": 32,
                     "u64": 64, "b64": 64, "s64": 64, "f64": 64}[ty]
            mask = (1 << width) - 1
            if base == "ld":
                v = params[ops[1].strip("[]")]
            elif base == "cvta":
                v = get(ops[1])
            elif base == "mov":
                v = get(ops[1]) & mask
            elif base == "cvt":
                v = get(ops[1]) & ((1 << int(parts[1][1:])) - 1)
            elif base == "setp":
                a, b = get(ops[1]), get(ops[2])
                v = int({"lt": a < b, "eq": a == b, "ne": a != b}[parts[1]])
            elif base == "selp":
                v = get(ops[1]) if get(ops[3]) else get(ops[2])
            elif base == "mul" and parts[1] == "wide":
                v = get(ops[1]) * get(ops[2])
            else:
                a, b = get(ops[1]), get(ops[2])
                v = {"add": a + b, "sub": a - b, "mul": a * b, "xor": a ^ b, "and": a & b, "or": a | b}[base] & mask
            regs[d] = v


def main():
    truenoc, first, count, work = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    os.makedirs(work, exist_ok=True)
    failures = 0
    fewer = 0
    for seed in range(first, first + count):
        rng = random.Random(seed * 7919)
        a, b, w = rng.randrange(1 << 32), rng.randrange(1 << 32), rng.randrange(1 << 64)
        tir = os.path.join(work, "fuzz%d.tir" % seed)
        with open(tir, "w") as f:
            f.write(generate(seed))
        buf = os.path.join(work, "out%d.bin" % seed)
        with open(buf, "wb") as f:
            f.write(bytes(4 * SLOTS * THREADS))
        subprocess.run([truenoc, "interp", tir, "--kernel", "fuzz", "--grid", "1", "--block", str(THREADS),
                        "--arg", "out=@" + buf, "--arg", "a=%d" % a, "--arg", "b=%d" % b, "--arg", "w=%d" % w,
                        "--out", "out=" + buf], check=True, capture_output=True, timeout=120)
        with open(buf, "rb") as f:
            want = list(struct.unpack("<%dI" % (SLOTS * THREADS), f.read()))
        sizes = {}
        for mode in ([], ["--no-reg-reuse"]):
            ptx = subprocess.run([truenoc, "emit-ptx", tir, "--target", "sm_80"] + mode, check=True, timeout=120,
                                 capture_output=True, text=True).stdout
            sim = Sim(ptx)
            sizes[bool(mode)] = sum(sim.decl.values())
            base = 1 << 20
            params = {"fuzz_param_out": base, "fuzz_param_a": a, "fuzz_param_b": b, "fuzz_param_w": w}
            memory = {}
            try:
                for t in range(THREADS):
                    sim.run(params, t, memory)
                got = [memory.get(base + 4 * k, 0) for k in range(SLOTS * THREADS)]
                problem = None if got == want else "stores differ from the interpreter: %s vs %s" % (got, want)
            except RuntimeError as e:
                problem = str(e)
            if problem:
                failures += 1
                print("seed %d%s: %s (kept %s)" % (seed, " " + mode[0] if mode else "", problem, tir))
        fewer += sizes[False] < sizes[True]
        if not failures:
            os.remove(tir)
            os.remove(buf)
    print("regfuzz: %d kernels, %d failures, %d with fewer registers declared when names are shared"
          % (count, failures, fewer))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
