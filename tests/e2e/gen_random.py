#!/usr/bin/env python3
"""gen_random.py -- random valid .dtl programs, compiled, run and checked with the oracle.

Even seeds make programs of one statement (below), odd seeds programs of several
statements (gen_multi): tensors and temporaries (vectors, a matrix, scalars), `repeat`
loops (nested, with and without `until`), element-wise functions, `-=`, integer and
floating params in expressions, scalars computed by a reduction and used by the next
statements, each statement with a random schedule or none.  Their values stay bounded and
their loop conditions are never decided by rounding (see gen_multi), so the distributed
run takes the oracle's number of iterations: the executable's iterations=K must be the
oracle's, and with --monitor (a third of them) so must its monitor lines.

Every program is checked three ways: compiled as is, compiled with --no-fuse (where
distalc has that option; at another rank count), each run compared with the oracle.

A program of one statement has 1 to 4 input tensors of orders 0 to 4 (at most 5 distinct index
variables, extents 1..9 through params or literals), an output of order 0 to 3, an
expression of sums and products (and negations, constants, and divisions by constants
for floating types), a random element type (mostly double), a 1-D to 3-D machine, a
random distribution (or none) for every tensor, and a random valid schedule built by
simulating the loop nest command by command (LANGUAGE.md section 5):
  - the initial loop order is the order of first appearance of the index variables,
    reading the left side first, then the right side;
  - divide/split (fresh names), reorder (a permutation of directly nested loops),
    fuse/collapse (two directly nested loops);
  - distribute: a group of directly nested loops (the k-th onto grid dimension k),
    moved outermost first or left under sequential loops, or the compound
    distribute({..}, {..}, {..}, M) with M a machine, an inline grid or a tensor;
  - more divide/split/reorder/fuse below the distributed loops;
  - rotate(t, {distributed loops}, r) of a loop nested under the distributed ones;
  - communicate(T, v) at distributed loops or loops nested under them;
  - precompute(e, i, iw, T) (about a fifth of the programs): e a subexpression that
    reads no sparse tensor and sits under no reduction placement, i an original loop
    nested inside every distributed and communicate loop, e using i and only variables
    of the loops around i; sometimes a second one at i or inside it; then more
    divide/split/reorder/fuse of the loops of the innermost consumer;
  - parallelize of a loop that only the output indexes (inside the innermost consumer
    when there is a precompute).
From a third random stream (so that the rest is drawn as without them): element-wise
functions around accesses and subexpressions (every one for floating types, abs, min and
max for integer types), their arguments kept in the function's domain (sqrt(abs(x)),
log(2 + abs(x)), exp(min(x, 2)), pow(1.5 + abs(x), y)); params as values; and `-=` for
about half of the statements that accumulate.
About a quarter of the programs declare some of their inputs sparse, with random level
formats (csr, csf, compressed, {dense, compressed}, {compressed, compressed}, ...): the
run feeds them random sparse .mtx, .tns or .npy files (run_e2e.py, sparse.py).  About
15% declare the output sparse too, with a random level format of its order, where the
statement allows it (no threads: the output is never read); its saved dense result is
compared with the oracle's, and `+=` starts from a random sparse file.  With --target
cuda, which compiles neither, programs have no sparse tensors and no precompute (these
choices come from other random streams of the seed, so the rest is drawn alike).
The third of the programs compiled with --auto declare about half of the tensors that no
schedule command names `@ M` with no mapping (the layout the compiler's to choose; the
--no-fuse leg, without --auto, takes the documented default).
Each program is run at a random rank count that fits its machine and compared with the
oracle.  Every failure prints its seed; `gen_random.py --seed S --count 1` reruns it
(--print shows the program).

usage: gen_random.py [--count N] [--seed S] [--long] [-j N] [--keep] [--print]
                     [--target cpu|cuda]
"""

import argparse
import os
import random
import re
import sys
import time
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)
import dtl  # noqa: E402
import run_e2e  # noqa: E402
from run_e2e import Run, Runner, grid_fit  # noqa: E402

VARS = ["i", "j", "k", "l", "m"]
TYPES = ["double"] * 12 + ["float"] * 3 + ["int32"] * 2 + ["int64"] * 2


class Nest:
    """The loop nest of a statement while its schedule is built: loop names outermost
    first, their extents, the distributed group, and the original variables each loop
    derives from."""

    def __init__(self, order, extents):
        self.loops = list(order)
        self.ext = dict(extents)
        self.origin = {v: {v} for v in order}
        self.dist = []  # the distributed loops, in grid-dimension order
        self.comm = []  # the loops that communicate commands name
        self.where = None  # position of the innermost precompute's loop
        self.cmds = []
        self.counter = 0

    def fresh(self, base):
        self.counter += 1
        return "%s%d" % (base, self.counter)

    def below_group(self):
        """Index of the first loop that may be transformed: below the distributed group."""
        if not self.dist:
            return 0
        return max(self.loops.index(v) for v in self.dist) + 1

    def divide(self, v, n, split=False, factor_text=None):
        o, i = self.fresh(v + "o"), self.fresh(v + "i")
        e = self.ext[v]
        if split:
            self.ext[o], self.ext[i] = -(-e // n), n
        else:
            self.ext[o], self.ext[i] = n, -(-e // n)
        k = self.loops.index(v)
        self.loops[k:k + 1] = [o, i]
        self.origin[o] = self.origin[i] = self.origin[v]
        self.cmds.append("%s(%s, %s, %s, %s)" % ("split" if split else "divide", v, o, i,
                                                 factor_text or n))
        return o, i

    def reorder(self, start, perm):
        window = self.loops[start:start + len(perm)]
        new = [window[p] for p in perm]
        self.loops[start:start + len(perm)] = new
        self.cmds.append("reorder({%s})" % ", ".join(new))

    def fuse(self, k, word="fuse"):
        a, b = self.loops[k], self.loops[k + 1]
        f = self.fresh("f")
        self.ext[f] = self.ext[a] * self.ext[b]
        self.origin[f] = self.origin[a] | self.origin[b]
        self.loops[k:k + 2] = [f]
        self.cmds.append("%s(%s, %s, %s)" % (word, a, b, f))

    def distribute(self, group):
        self.dist = list(group)
        self.cmds.append("distribute(%s)" % (group[0] if len(group) == 1 and self.counter % 2
                                             else "{%s}" % ", ".join(group)))

    def distribute_compound(self, targets, gdims, mtext):
        outs, ins = [], []
        for t, g in zip(targets, gdims):
            o, i = self.fresh(t + "o"), self.fresh(t + "i")
            self.ext[o], self.ext[i] = g, -(-self.ext[t] // g)
            self.origin[o] = self.origin[i] = self.origin[t]
            outs.append(o)
            ins.append(i)
        rest = [ins[targets.index(v)] if v in targets else v for v in self.loops]
        self.loops = outs + rest
        self.dist = outs
        self.cmds.append("distribute({%s}, {%s}, {%s}, %s)" % (
            ", ".join(targets), ", ".join(outs), ", ".join(ins), mtext))

    def rotate(self, t, group):
        r = self.fresh(t + "r")
        k = self.loops.index(t)
        self.loops[k] = r
        self.ext[r] = self.ext[t]
        self.origin[r] = self.origin[t]
        self.cmds.append("rotate(%s, {%s}, %s)" % (t, ", ".join(group), r))

    def communicate(self, tensors, v):
        self.comm.append(v)
        self.cmds.append("communicate(%s, %s)" % (
            tensors[0] if len(tensors) == 1 else "{%s}" % ", ".join(tensors), v))


def level_format(rng, order):
    """A random level format of a tensor of this order with a compressed level."""
    r = rng.random()
    if order == 2 and r < 0.3:
        return "csr"
    if r < 0.5:
        return rng.choice(["csf", "compressed"])
    levels = [rng.choice(["dense", "compressed"]) for _ in range(order)]
    if "compressed" not in levels:
        levels[rng.randrange(order)] = "compressed"
    return "{%s}" % ", ".join(levels)


def _subexprs(e, path=()):
    """(path, node) of every node of an expression, the root first."""
    yield path, e
    if e[0] == "neg":
        yield from _subexprs(e[1], path + (0,))
    elif e[0] == "call":
        for n, x in enumerate(e[2]):
            yield from _subexprs(x, path + (n,))
    elif e[0] not in ("acc", "num", "param"):
        yield from _subexprs(e[1], path + (0,))
        yield from _subexprs(e[2], path + (1,))


def _guarded(rhs, summed):
    """Paths of the operands that a reduction placement guards (TACO's rule, as distalc
    writes it: descending from the root to the smallest subexpression that holds all uses
    of a summed variable, the operand of a +/- left behind is guarded; where that
    subexpression is a sum or difference, the descent goes on in each of its two sides, so
    that a term without the variable is guarded however + and - associate the terms)."""
    out = set()

    def place(e, path, v):
        while e[0] in ("+", "-", "*", "/", "neg"):
            if e[0] == "neg":
                e, path = e[1], path + (0,)
                continue
            ua = any(v in a[2] for a in dtl.accesses(e[1]))
            ub = any(v in a[2] for a in dtl.accesses(e[2]))
            if ua and ub:
                if e[0] in "+-":
                    place(e[1], path + (0,), v)
                    place(e[2], path + (1,), v)
                return
            if not ua and not ub:
                return
            k = 0 if ua else 1
            if e[0] in "+-":
                out.add(path + (1 - k,))
            e, path = e[1 + k], path + (k,)

    for v in summed:
        place(rhs, (), v)
    return out


def add_precompute(rng, nest, stmt, sparse_names):
    """A random valid precompute of the statement (a second one sometimes), appended to the
    nest's commands; returns the number added.  The workspace's loop i is an original
    loop nested inside every distributed and communicate loop; e uses i, no variable of a
    loop inside i, no sparse tensor, and holds no reduction guard (on itself or inside);
    a second expression
    is disjoint from the first, its loop at i or inside it."""
    summed = {v for a in dtl.accesses(stmt.rhs) for v in a[2]} - set(stmt.lhs_vars)
    guarded = _guarded(stmt.rhs, summed)
    floor = max([nest.loops.index(v) for v in nest.dist + nest.comm] + [-1]) + 1
    done = []  # paths of the expressions precomputed

    def candidates(lo):
        out = []
        for p in range(lo, len(nest.loops)):
            i = nest.loops[p]
            if i not in VARS:
                continue  # derived by a command
            inner = set()
            for v in nest.loops[p + 1:]:
                inner |= nest.origin[v]
            for path, e in _subexprs(stmt.rhs):
                accs = dtl.accesses(e)
                vs = {v for a in accs for v in a[2]}
                if (any(g[:len(path)] == path for g in guarded) or i not in vs or vs & inner
                        or any(a[1] in sparse_names for a in accs)
                        or any(path[:len(d)] == d or d[:len(path)] == path for d in done)):
                    continue
                out.append((p, path, e))
        return out

    lo = floor
    while len(done) < 2:
        cands = candidates(lo)
        if not cands:
            break
        p, path, e = rng.choice(cands)
        i = nest.loops[p]
        nest.cmds.append("precompute(%s, %s, %s, %s)" % (dtl.expr_str(e), i, nest.fresh(i + "w"),
                                                         nest.fresh("ws")))
        done.append(path)
        nest.where = lo = p
        if rng.random() < 0.6:
            break
    return len(done)


def _parse_stmt(names, tvars, text, params=()):
    """The statement as the oracle's parser reads it (shapes do not matter here)."""
    decls = "".join("param %s = 1;\n" % p for p in params) + "".join("tensor %s%s;\n" % (n, "(%s)" % ", ".join("1" for _ in tvars[n]) if tvars[n] else "")
                    for n in names)
    return dtl.parse(decls + text + ";", "stmt").stmts[0]


def _placement(e, path, out):
    k = e[0]
    if k == "acc":
        for v in e[2]:
            out.setdefault(v, []).append(path)
    elif k == "neg":
        _placement(e[1], path + (0,), out)
    elif k == "call":
        for n, x in enumerate(e[2]):
            _placement(x, path + (n,), out)
    elif k not in ("num", "param"):
        _placement(e[1], path + (0,), out)
        _placement(e[2], path + (1,), out)
    return out


def _node(e, path):
    for p in path:
        e = e[2][p] if e[0] == "call" else e[1 + p]
    return e


def loop_order(stmt):
    """The loops a schedule may name, in their initial order: every index variable of
    the statement, the left side's first, then the right side's in order of first
    appearance (distalc's concrete index notation is one perfect loop nest; a summation
    placed inside a sum is expressed by guards, not by a loop of its own)."""
    order = list(stmt.lhs_vars)
    for a in dtl.accesses(stmt.rhs):
        for v in a[2]:
            if v not in order:
                order.append(v)
    return order


def structural(rng, nest, start, count, params_decl):
    """count random divide/split/reorder/fuse commands on the loops from index start."""
    for _ in range(count):
        region = nest.loops[start:]
        if not region:
            return
        c = rng.random()
        if c < 0.45:
            v = rng.choice(region)
            n = rng.randint(1, 4)
            text = None
            if rng.random() < 0.15:  # a param as the factor
                name = "s%d" % len(params_decl)
                params_decl.append((name, n))
                text = name
            nest.divide(v, n, split=rng.random() < 0.5, factor_text=text)
        elif c < 0.8 and len(region) >= 2:
            w = rng.randint(2, min(4, len(region)))
            s = start + rng.randint(0, len(region) - w)
            perm = list(range(w))
            while perm == sorted(perm):
                rng.shuffle(perm)
            nest.reorder(s, perm)
        elif len(region) >= 2:
            k = start + rng.randint(0, len(region) - 2)
            nest.fuse(k, "fuse" if rng.random() < 0.7 else "collapse")


def gen_program(seed, max_ranks=6, target="cpu"):
    """(text, runtime param overrides, rank count) of a random program.  The sparse
    formats and precompute commands come from a second random stream, so the programs
    of --target cuda (which has neither) are the others without them."""
    rng = random.Random(seed)
    frng = random.Random("features %d" % seed)
    xrng = random.Random("expressions %d" % seed)
    features = target != "cuda"
    type_ = rng.choice(TYPES)
    is_int = type_.startswith("int")

    # index variables and their extents
    nvars = rng.choice([1, 2, 2, 3, 3, 3, 4, 4, 5])
    vars_ = VARS[:nvars]
    ext = {v: rng.randint(1, 9) for v in vars_}
    params_decl = []  # (name, default)
    overrides = {}
    size_text = {}
    for v in vars_:
        if rng.random() < 0.75:
            name = "n" + v
            default = ext[v] if rng.random() < 0.6 else rng.randint(1, 9)
            params_decl.append((name, default))
            if default != ext[v]:
                overrides[name] = ext[v]
            size_text[v] = name
        else:
            size_text[v] = str(ext[v])

    # tensors: the output, then the inputs; every variable used somewhere
    out_order = rng.choice([0, 1, 1, 2, 2, 2, 3])
    out_vars = rng.sample(vars_, min(out_order, nvars))
    inputs = []
    for _ in range(rng.choice([1, 2, 2, 2, 3, 3, 4])):
        order = rng.choice([0, 1, 1, 2, 2, 2, 3, 3, 4])
        inputs.append(rng.sample(vars_, min(order, nvars)))
    for v in vars_:
        used_rhs = any(v in t for t in inputs)
        if not used_rhs and (v not in out_vars or rng.random() < 0.85):
            cands = [t for t in inputs if len(t) < 4]
            if cands:
                rng.choice(cands).append(v)
    used = set(out_vars) | {v for t in inputs for v in t}
    vars_ = [v for v in vars_ if v in used]

    names = ["A"] + ["B", "C", "D", "E"][:len(inputs)]
    tvars = {"A": out_vars}
    tvars.update({n: t for n, t in zip(names[1:], inputs)})
    # sparse inputs (A, the output, is decided last: see below)
    formats = {}
    if features and frng.random() < 0.25:
        can = [n for n in names[1:] if tvars[n]]
        if can:
            chosen = [n for n in can if frng.random() < 0.6] or [frng.choice(can)]
            formats = {n: level_format(frng, len(tvars[n])) for n in chosen}

    # the expression: every input once, combined at random
    def literal():
        if is_int or rng.random() < 0.5:
            return str(rng.randint(1, 3))
        return rng.choice(["0.5", "1.5", "2.0", "0.25", "1e-1"])

    def acc(n):
        return "%s(%s)" % (n, ", ".join(tvars[n])) if tvars[n] else n

    def func(x):
        """x inside a random function call (from xrng), in the function's domain: inputs
        are in [-1, 1] (integers in [-4, 4]) and terms are small."""
        f = xrng.choice(["abs", "min", "max"] if is_int else sorted(dtl.FUNCS))
        if f in ("min", "max"):
            other = str(xrng.randint(1, 3)) if is_int else xrng.choice(["0.5", "0.25", "1"])
            if xrng.random() < 0.4:
                other = "-" + other
            return "%s(%s, %s)" % (f, x, other) if xrng.random() < 0.5 else "%s(%s, %s)" % (f, other, x)
        return {"sqrt": "sqrt(abs(%s))", "log": "log(2 + abs(%s))", "exp": "exp(min(%s, 2))",
                "pow": "pow(1.5 + abs(%s), " + xrng.choice(["2", "0.5", "3"]) + ")",
                "abs": "abs(%s)", "erf": "erf(%s)"}[f] % x

    def maybe_func(x, p):
        return func(x) if xrng.random() < p else x

    terms = [maybe_func(acc(n), 0.2) for n in names[1:]]
    rng.shuffle(terms)
    while len(terms) > 1:
        a, b = terms.pop(), terms.pop()
        op = rng.choice(["*"] * 6 + ["+"] * 3 + ["-"] * 2)
        e = "%s %s %s" % (a, op, b)
        if rng.random() < 0.5 or op != "*":
            e = "(%s)" % e
        terms.insert(rng.randint(0, len(terms)), maybe_func(e, 0.1))
    expr = terms[0]
    if params_decl and xrng.random() < 0.2:  # a param's value
        prm = xrng.choice(params_decl)[0]
        expr = xrng.choice(["%s * (%s)" % (prm, expr), "(%s) - %s" % (expr, prm), "%s + (%s)" % (prm, expr)])
    r = rng.random()
    if r < 0.1:
        expr = "-" + expr if expr.startswith("(") else "-(%s)" % expr
    elif r < 0.2:
        expr = "%s * %s" % (literal(), expr)
    elif r < 0.3:
        expr = "%s + %s" % (expr, literal())
    elif r < 0.35 and not is_int:
        expr = "%s / %s" % (expr, rng.choice(["2", "4.0", "0.5"]))

    # the machine
    ndims = rng.choice([1, 2, 2, 3])
    while True:
        gdims = []
        if ndims >= 2 and rng.random() < 0.12:
            gdims = ["q"] * ndims if rng.random() < 0.5 else ["q", "q"] + ["gc"] * (ndims - 2)
        else:
            for d in range(ndims):
                gdims.append(str(rng.randint(1, 3)) if rng.random() < 0.2 else "g%d" % d)
        text_dims = ", ".join(gdims)
        probe = dtl.parse("machine M = grid(%s);" % text_dims)
        fits = [p for p in range(1, max_ranks + 1) if grid_fit(probe, p, probe.param_values())]
        if fits:
            break
    nranks = rng.choice(fits)
    _, gvals = grid_fit(probe, nranks, probe.param_values())
    gsize = [int(d) if d.isdigit() else gvals[d] for d in gdims]

    # distributions
    decls = []
    dist_of = {}
    out_decl = None  # the output's declaration, (dims, type, distribution)
    for n in names:
        vs = tvars[n]
        dims_text = "(%s)" % ", ".join(size_text[v] for v in vs) if vs else ""
        dist = ""
        if vs and rng.random() < 0.8:
            # names longer than a character need the comma form, which needs two
            # entries on each side (one entry is always read compactly)
            long_names = len(vs) >= 2 and ndims >= 2 and rng.random() < 0.3
            xnames = ["d%d" % q for q in range(len(vs))] if long_names else ["a", "b", "c", "d"][:len(vs)]
            free = list(xnames)
            y = []
            for g, gs in zip(gdims, gsize):
                c = rng.random()
                if c < 0.55 and free:
                    y.append(free.pop(rng.randrange(len(free))))
                elif c < 0.75:
                    y.append(str(rng.randrange(int(g))) if g.isdigit() else "0")
                else:
                    y.append("*")
            compact = all(len(x) == 1 for x in xnames) and rng.random() < 0.8
            sep = "" if compact else ","
            dist = " @ M(%s -> %s)" % (sep.join(xnames), sep.join(y))
            dist_of[n] = True
        type_text = "" if type_ == "double" and rng.random() < 0.5 else " " + type_
        if n == "A":
            out_decl = (dims_text, type_text, dist)
        if n in formats:  # the type and the format, in either order
            fmt = " " + formats[n]
            type_text = type_text + fmt if frng.random() < 0.5 else fmt + type_text
        decls.append("tensor %s%s%s%s;" % (n, dims_text, type_text, dist))

    # the schedule, by simulating the loop nest
    accumulate = rng.random() < 0.2
    op = ("-=" if xrng.random() < 0.5 else "+=") if accumulate else "="
    stmt_text = "%s %s %s" % (acc("A"), op, expr)
    stmt = _parse_stmt(names, tvars, stmt_text, [p for p, _ in params_decl])
    nest = Nest(loop_order(stmt), ext)
    structural(rng, nest, 0, rng.choice([0, 0, 1, 1, 2]), params_decl)
    r = rng.random()
    if r < 0.45:  # plain distribute
        k = rng.randint(1, min(ndims, len(nest.loops))) if nest.loops else 0
        if k:
            if rng.random() < 0.8 or len(nest.loops) == k:
                group = rng.sample(nest.loops, k)
                pos = max(nest.loops.index(v) for v in group)
                window = nest.loops[:pos + 1]
                new = group + [v for v in window if v not in group]
                if new != window:
                    nest.reorder(0, [window.index(v) for v in new])
                nest.distribute(group)
            else:  # a group left under sequential loops
                s = rng.randint(1, len(nest.loops) - k)
                nest.distribute(nest.loops[s:s + k])
    elif r < 0.85 and nest.loops:  # compound distribute
        k = min(len(nest.loops), ndims if rng.random() < 0.7 else rng.randint(1, ndims))
        targets = rng.sample(nest.loops, k)
        c = rng.random()
        if c < 0.6:
            mtext = "M"
        elif c < 0.8:
            mtext = "%s(%s)" % (rng.choice(["grid", "Grid"]), text_dims)
        else:
            cands = [n for n in names if n in dist_of]
            mtext = rng.choice(cands) if cands else "M"
        nest.distribute_compound(targets, gsize[:k], mtext)
    structural(rng, nest, nest.below_group(), rng.choice([0, 1, 1, 2]), params_decl)
    start = nest.below_group()
    if nest.dist and start < len(nest.loops) and rng.random() < 0.3:
        t = rng.choice(nest.loops[start:])
        group = rng.sample(nest.dist, rng.randint(1, len(nest.dist)))
        nest.rotate(t, group)
    precompute = features and frng.random() < 0.55
    if nest.loops:
        comm_loops = nest.loops[nest.loops.index(nest.dist[0]):] if nest.dist else nest.loops
        if precompute:  # leave an original loop below every communicate point
            start = nest.below_group()
            orig = [k for k in range(start, len(nest.loops)) if nest.loops[k] in VARS]
            if orig:
                p0 = frng.choice(orig)
                comm_loops = [v for v in comm_loops if nest.loops.index(v) < p0]
        pending = [n for n in names if rng.random() < 0.45]
        while pending and comm_loops:
            grp = pending[:rng.randint(1, len(pending))]
            pending = pending[len(grp):]
            nest.communicate(grp, rng.choice(comm_loops))
    if precompute and add_precompute(frng, nest, stmt, formats):
        # the consumer's loops may still be scheduled (not across a workspace's loop)
        structural(frng, nest, nest.where, frng.choice([0, 1, 1, 2]), params_decl)
    if rng.random() < 0.1 and out_vars:
        # (a workspace is one array: no threads around its loop; MPI runs on the rank's own
        # thread: none above a communicate point either)
        lo = nest.below_group() if nest.where is None else nest.where
        lo = max([lo] + [nest.loops.index(v) + 1 for v in nest.comm if v in nest.loops])
        cands = [v for v in nest.loops[lo:] if nest.origin[v] <= set(out_vars)]
        if cands:
            nest.cmds.append("parallelize(%s, cpu_thread)" % rng.choice(cands))

    # a sparse output (about 15% of the programs): where the statement may write one, that
    # is, it does not read its output (it never does here) and runs no threads (nor
    # substitute, which it never has); from a third random stream, so the rest of the
    # program is that of --target cuda
    orng = random.Random("output %d" % seed)
    if (features and out_vars and orng.random() < 0.19
            and not any(c.startswith("parallelize(") and "cpu_thread" in c for c in nest.cmds)):
        dims_text, type_text, dist = out_decl
        fmt = " " + level_format(orng, len(out_vars))
        type_text = type_text + fmt if orng.random() < 0.5 else fmt + type_text
        decls[0] = "tensor A%s%s%s;" % (dims_text, type_text, dist)

    lines = ["# random program: gen_random.py --seed %d --count 1" % seed]
    for name, default in params_decl:
        lines.append("param %s = %d;" % (name, default))
    lines.append("machine M = grid(%s);" % text_dims)
    lines += decls
    stmt = stmt_text
    for c in nest.cmds:
        stmt += "\n  .%s" % c
    lines.append(stmt + ";")
    return "\n".join(lines) + "\n", overrides, nranks


# ---- programs: several statements, temporaries, loops ----------------------------------------

# The names of a program of several statements: the index variable and extent param of
# every kind of vector; the matrix A(i, j) relates them.
MULTI_KINDS = {"n": "i", "m": "j"}


def random_distribution(rng, order, gdims):
    """A random distribution of a tensor of this order (or "" for none), as gen_program
    draws them: compact or comma form, names partitioned, fixed or replicated."""
    if not order or rng.random() >= 0.8:
        return ""
    long_names = order >= 2 and len(gdims) >= 2 and rng.random() < 0.3
    xnames = ["d%d" % q for q in range(order)] if long_names else ["a", "b", "c", "d"][:order]
    free = list(xnames)
    y = []
    for g in gdims:
        c = rng.random()
        if c < 0.55 and free:
            y.append(free.pop(rng.randrange(len(free))))
        elif c < 0.75:
            y.append(str(rng.randrange(int(g))) if g.isdigit() else "0")
        else:
            y.append("*")
    sep = "" if all(len(x) == 1 for x in xnames) and rng.random() < 0.8 else ","
    return " @ M(%s -> %s)" % (sep.join(xnames), sep.join(y))


def random_schedule(rng, stmt, ext, ndims, gsize, text_dims, params_decl, names):
    """The commands of a random valid schedule of one statement (no precompute, rotate or
    threads): none at all (the default distribution) for about a third, else divide/split/
    reorder/fuse, a plain or compound distribute and communicate, as gen_program draws."""
    order = loop_order(stmt)
    if not order or rng.random() < 0.35:
        return []
    nest = Nest(order, {v: ext[v] for v in order})
    structural(rng, nest, 0, rng.choice([0, 0, 1]), params_decl)
    if rng.random() < 0.5:
        k = rng.randint(1, min(ndims, len(nest.loops)))
        group = rng.sample(nest.loops, k)
        pos = max(nest.loops.index(v) for v in group)
        window = nest.loops[:pos + 1]
        new = group + [v for v in window if v not in group]
        if new != window:
            nest.reorder(0, [window.index(v) for v in new])
        nest.distribute(group)
    else:
        k = min(len(nest.loops), ndims if rng.random() < 0.7 else rng.randint(1, ndims))
        targets = rng.sample(nest.loops, k)
        mtext = "M" if rng.random() < 0.7 else "%s(%s)" % (rng.choice(["grid", "Grid"]), text_dims)
        nest.distribute_compound(targets, gsize[:k], mtext)
    structural(rng, nest, nest.below_group(), rng.choice([0, 1]), params_decl)
    comm_loops = nest.loops[nest.loops.index(nest.dist[0]):] if nest.dist else []
    pending = [n for n in names if rng.random() < 0.4]
    while pending and comm_loops:
        grp = pending[:rng.randint(1, len(pending))]
        pending = pending[len(grp):]
        nest.communicate(grp, rng.choice(comm_loops))
    return nest.cmds


class MultiProgram:
    """The state of a program of several statements while it is drawn: the declared
    tensors and temporaries (name -> kind: "n", "m", "A" or "s" for a scalar), which of
    them hold a value at this point of the source (tensors always; a temporary once a
    statement before has written it), and the lines written so far."""

    def __init__(self, rng, type_):
        self.rng, self.type = rng, type_
        self.is_int = type_.startswith("int")
        self.kind = {}
        self.temp = set()
        self.defined = set()
        self.lines = []
        self.loop_depth = 0

    def names(self, kind, defined=True):
        return [n for n, k in self.kind.items() if k == kind and (n in self.defined or not defined)]

    def acc(self, name):
        k = self.kind[name]
        return {"n": "%s(i)", "m": "%s(j)", "A": "%s(i, j)", "s": "%s"}[k] % name

    def lit(self, small=False):
        rng = self.rng
        if self.is_int or rng.random() < 0.4:
            return str(rng.randint(1, 3))
        return rng.choice(["0.5", "0.25", "1.5", "2.0", "1e-1"] if not small else ["0.5", "0.25", "1e-1"])

    def func(self, x):
        """x inside a random function, kept in its domain (values here are bounded)."""
        rng = self.rng
        f = rng.choice(["abs", "min", "max"] if self.is_int else sorted(dtl.FUNCS))
        if f in ("min", "max"):
            other = self.lit()
            if rng.random() < 0.4:
                other = "-" + other
            return "%s(%s, %s)" % (f, x, other) if rng.random() < 0.5 else "%s(%s, %s)" % (f, other, x)
        # (sqrt away from 0, where a rounding difference of its argument would grow)
        return {"sqrt": "sqrt(0.5 + abs(%s))", "log": "log(1 + abs(%s))", "exp": "exp(min(%s, 1))",
                "pow": "pow(0.5 + abs(%s), " + rng.choice(["2", "0.5", "1.5"]) + ")",
                "abs": "abs(%s)", "erf": "erf(%s)"}[f] % x

    def atom(self, kind):
        """An operand of an element-wise expression over kind ("n" or "m")."""
        rng = self.rng
        r = rng.random()
        vecs = self.names(kind)
        scal = self.names("s")
        if r < 0.55 and vecs:
            return self.acc(rng.choice(vecs))
        if r < 0.75 and scal:
            return rng.choice(scal)
        if r < 0.85 and kind == "n" and self.names("A") and self.names("m"):
            # a matrix-vector product, scaled so that a loop does not make it grow (not in
            # integer statements: distalc divides each term of a sum, truncating each)
            return ("(A(i, j) * %s)" if self.is_int else "(A(i, j) * %s / m)") % self.acc(rng.choice(self.names("m")))
        if r < 0.9:
            return rng.choice(["n", "m"] + ([] if self.is_int else ["alpha"]))
        return self.lit()

    def expr(self, kind, depth):
        rng = self.rng
        if depth <= 0 or rng.random() < 0.3:
            e = self.atom(kind)
        else:
            a, b = self.expr(kind, depth - 1), self.expr(kind, depth - 1)
            op = rng.choice(["*", "*", "+", "+", "-"])
            e = "(%s %s %s)" % (a, op, b)
        if rng.random() < 0.25:
            e = self.func(e)
        return e

    def bounded(self, e, out_vars):
        """e in a form whose value stays bounded however often a loop repeats it (a summed
        variable may not appear in a denominator: x/(1+|x|) only where e sums nothing)."""
        rng = self.rng
        used = {v for args in re.findall(r"\b[A-Za-z_]\w*\(([ij](?:, [ij])*)\)", e) for v in args.split(", ")}
        if self.is_int:
            return "min(max(%s, -8), 8)" % e
        r = rng.random()
        if r < 0.5:
            return "erf(%s)" % e
        if r < 0.8:
            return "min(max(%s, -2), 2)" % e if rng.random() < 0.5 else "max(-2, min(2, %s))" % e
        return "%s / (1 + abs(%s))" % (e, e) if len(e) < 40 and used <= set(out_vars) else "erf(%s)" % e

    def reduction(self):
        """The right side of a scalar statement: a sum over i and/or j, or arithmetic of
        scalars; bounded when its operands are."""
        rng = self.rng
        ns, ms, ss = self.names("n"), self.names("m"), self.names("s")
        forms = []
        if ns:
            a, b = self.acc(rng.choice(ns)), self.acc(rng.choice(ns))
            forms += ["%s * %s" % (a, b), self.func(a), ("%s * %s" if self.is_int else "%s * %s / n") % (a, a)]
        if ms and ns and self.names("A"):
            forms.append("A(i, j) * %s * %s" % (self.acc(rng.choice(ns)), self.acc(rng.choice(ms))))
        if ms:
            forms.append("%s * %s" % (self.acc(rng.choice(ms)), self.lit()))
        if ss:
            s = rng.choice(ss)
            forms += ["%s * %s + %s" % (s, self.lit(True), self.lit()), self.func(s)]
        return rng.choice(forms) if forms else self.lit()

    def write(self, name, op, rhs, sched_args):
        self.lines.append((self.loop_depth, name, op, rhs, sched_args))
        self.defined.add(name)

    def statement(self, in_loop):
        """One random statement (with the scalars it computes used by the next, sometimes)."""
        rng = self.rng
        r = rng.random()
        if r < 0.3:  # a scalar: a reduction, then used at once
            out = rng.choice([n for n, k in self.kind.items() if k == "s" and n not in ("k",)])
            rhs = self.reduction()
            if in_loop:
                rhs = self.bounded(rhs, "")
            self.write(out, "=", rhs, None)
            if rng.random() < 0.7:
                self.vector_statement(in_loop, out)
            return
        self.vector_statement(in_loop)

    def vector_statement(self, in_loop, use=None):
        """A statement that writes a vector; use: a scalar that it reads."""
        rng = self.rng
        kind = "n" if rng.random() < 0.7 else "m"
        cands = [n for n, k in self.kind.items() if k == kind]
        out = rng.choice(cands)
        rhs = self.expr(kind, rng.randint(1, 3))
        if use:
            rhs = rng.choice(["%s * %s", "(%s + %s)", "%s - %s"]) % ((use, rhs) if rng.random() < 0.5 else (rhs, use))
        op = "="
        if out in self.defined and rng.random() < 0.3:
            op = rng.choice(["+=", "-="])
            rhs = self.bounded(rhs, MULTI_KINDS[kind]) if in_loop else rhs
        elif in_loop:
            rhs = self.bounded(rhs, MULTI_KINDS[kind])
        self.write(out, op, rhs, None)


def gen_multi(seed, max_ranks=6, target="cpu"):
    """(text, runtime param overrides, rank count) of a random program of several
    statements: tensors and temporaries (vectors over i and j, a matrix A(i, j), scalars),
    element-wise functions, `+=`/`-=`, integer and floating params, scalars computed by a
    reduction and used by the next statements, and `repeat` loops (nested, with and
    without `until`), and copies of a vector into another layout (a temporary c) that
    later statements read and that is sometimes copied back.  Values stay bounded: inside a loop every statement is bounded
    (erf, min/max clamps, x/(1+|x|)) or adds a bounded value; loops run few iterations.
    The conditions do not sit on a boundary: they count iterations (an int64 counter, a
    floating counter that holds integers exactly), or compare a scalar with a threshold
    that its random value meets with probability zero."""
    rng = random.Random("multi %d" % seed)
    type_ = rng.choice(TYPES)
    is_int = type_.startswith("int")
    ext = {"i": rng.randint(1, 9), "j": rng.randint(1, 9)}
    params_decl = []  # (name, default text)
    overrides = {}
    for p, v in (("n", "i"), ("m", "j")):
        default = ext[v] if rng.random() < 0.6 else rng.randint(1, 9)
        params_decl.append((p, str(default)))
        if default != ext[v]:
            overrides[p] = ext[v]
    maxit = rng.randint(1, 4)
    params_decl.append(("maxit", str(maxit if rng.random() < 0.7 else 3)))
    if params_decl[-1][1] != str(maxit):
        overrides["maxit"] = maxit
    params_decl.append(("alpha", rng.choice(["0.5", "0.25", "1.5", "2.5e-1"])))
    if rng.random() < 0.3:
        overrides["alpha"] = rng.choice([0.75, 0.125])
    params_decl.append(("tol", rng.choice(["1e-3", "0.5", "2.0"])))

    # the machine
    ndims = rng.choice([1, 1, 2])
    while True:
        gdims = [str(rng.randint(1, 3)) if rng.random() < 0.2 else "g%d" % d for d in range(ndims)]
        text_dims = ", ".join(gdims)
        probe = dtl.parse("machine M = grid(%s);" % text_dims)
        fits = [p for p in range(1, max_ranks + 1) if grid_fit(probe, p, probe.param_values())]
        if fits:
            break
    nranks = rng.choice(fits)
    _, gvals = grid_fit(probe, nranks, probe.param_values())
    gsize = [int(d) if d.isdigit() else gvals[d] for d in gdims]

    # declarations: every tensor is loaded and saved, every temporary lives in the program
    g = MultiProgram(rng, type_)
    decl_lines = []
    tensors = [("A", "A"), ("u", "n"), ("x", "n"), ("w", "m"), ("s", "s")]
    temps = [("p", "n"), ("r", "n"), ("q", "m"), ("a", "s"), ("b", "s")]
    for name, kind in tensors + temps:
        temp = (name, kind) in temps
        g.kind[name] = kind
        if temp:
            g.temp.add(name)
        else:
            g.defined.add(name)
        dims = {"n": "(n)", "m": "(m)", "A": "(n, m)", "s": ""}[kind]
        order = {"n": 1, "m": 1, "A": 2, "s": 0}[kind]
        type_text = "" if type_ == "double" and rng.random() < 0.5 else " " + type_
        decl_lines.append("%s %s%s%s%s;" % ("temp" if temp else "tensor", name, dims, type_text,
                                            random_distribution(rng, order, gdims)))
    decl_lines.append("temp k int64;  # an iteration counter")
    g.kind["k"] = "counter"
    # a copy of a vector into another layout (a redistribution), read later, sometimes
    # copied back (its inverse): the SPMD rewrite redistribute
    crng = random.Random("copies %d" % seed)
    copy_src = crng.choice(["x", "u"]) if crng.random() < 0.35 else None
    if copy_src:
        decl_lines.append("temp c(n) %s%s;" % (type_, random_distribution(crng, 1, gdims)))
        g.kind["c"] = "n"
        g.temp.add("c")

    body = []  # (depth, text) of statements and loop lines

    def emit_statements(count, in_loop):
        for _ in range(count):
            before = len(g.lines)
            g.statement(in_loop)
            for depth, name, op, rhs, _ in g.lines[before:]:
                body.append(("stmt", depth, name, op, rhs))

    def condition(scalars_in_body, counter):
        """A condition that no rounding decides."""
        forms = []
        if counter:
            forms += ["k >= %d" % rng.randint(1, 4), "k == %d" % rng.randint(1, 3), "!(k < %d)" % rng.randint(1, 4),
                      "k * k > %d" % rng.randint(1, 9)]
        for s in scalars_in_body:
            if is_int:
                forms += ["%s > %d" % (s, rng.randint(-5, 5)), "abs(%s) >= %d" % (s, rng.randint(0, 6))]
            else:
                forms += ["%s > %s" % (s, rng.choice(["0.3", "-0.7", "tol", "1e6", "-1e6"])),
                          "abs(%s) < %s" % (s, rng.choice(["0.6", "tol", "alpha"])),
                          "%s * %s <= %s" % (s, s, rng.choice(["0.2", "1e-1"])),
                          "sqrt(abs(%s)) + %s >= %s" % (s, s, rng.choice(["0.4", "1.1"]))]
        if not forms:
            forms = ["n > %d" % rng.randint(0, 9), "maxit <= %d" % rng.randint(0, 5)]
        c = rng.choice(forms)
        r = rng.random()
        if r < 0.3:
            c = "%s %s %s" % (c, rng.choice(["&&", "||"]), rng.choice(forms))
        elif r < 0.4:
            c = "!(%s)" % c
        elif r < 0.5:
            c = "(%s) || (%s && n >= 1)" % (c, rng.choice(forms))
        return c

    def loop(depth):
        bound = rng.choice(["1", "2", "3", "4", "maxit", "maxit"])
        counter = rng.random() < 0.6
        if counter:
            body.append(("stmt", depth, "k", "=", "0"))
        opening = ["open", depth, bound, None]
        body.append(opening)
        g.loop_depth = depth + 1
        emit_statements(rng.randint(1, 2), True)
        if depth < 2 and rng.random() < 0.3:
            loop(depth + 1)
            g.loop_depth = depth + 1
        if rng.random() < 0.4:
            emit_statements(1, True)
        if counter:
            body.append(("stmt", depth + 1, "k", "+=", "1"))
        written = [n for _, d, n, _, _ in [b for b in body if b[0] == "stmt"] if d > depth]
        scalars = sorted({n for n in written if g.kind.get(n) == "s"} | (
            {"s"} if rng.random() < 0.2 else set()))
        cond = condition(scalars, counter) if rng.random() < 0.75 else None
        opening[3] = cond
        body.append(("close", depth))
        g.loop_depth = depth

    if copy_src:
        body.append(("stmt", 0, "c", "=", "%s(i)" % copy_src))
        g.defined.add("c")
    emit_statements(rng.randint(1, 2), False)
    if copy_src and crng.random() < 0.5:
        body.append(("stmt", 0, copy_src, "=", "c(i)"))
    for _ in range(rng.choice([1, 1, 1, 2])):
        loop(0)
        if rng.random() < 0.5:
            emit_statements(1, False)

    # the text, with a schedule for some statements
    tvars = {n: {"n": ["i"], "m": ["j"], "A": ["i", "j"], "s": [], "counter": []}[k] for n, k in g.kind.items()}
    lines = ["# random program of several statements: gen_random.py --seed %d --count 1" % seed]
    stmt_lines = []
    pnames = [p for p, _ in params_decl]
    for item in body:
        if item[0] == "stmt":
            _, depth, name, op, rhs = item
            acc = g.acc(name) if name != "k" else "k"
            text = "%s %s %s" % (acc, op, rhs)
            cmds = []
            if name != "k":
                st = _parse_stmt(list(tvars), tvars, text, pnames)
                names = list(dict.fromkeys([name] + [a[1] for a in dtl.accesses(st.rhs)]))
                cmds = random_schedule(rng, st, ext, ndims, gsize, text_dims, params_decl, names)
            pad = "  " * depth
            stmt_lines.append(pad + text + "".join("\n%s  .%s" % (pad, c) for c in cmds) + ";")
        elif item[0] == "open":
            _, depth, bound, cond = item
            stmt_lines.append("  " * depth + "repeat %s%s {" % (bound, " until (%s)" % cond if cond else ""))
        else:
            stmt_lines.append("  " * item[1] + "}")
    for name, default in params_decl:
        lines.append("param %s = %s;" % (name, default))
    lines.append("machine M = grid(%s);" % text_dims)
    lines += decl_lines
    lines += stmt_lines
    return "\n".join(lines) + "\n", overrides, nranks


def drop_mappings(text, seed):
    """text with about half of the tensors and temporaries that no schedule command names
    declared `@ M` with no mapping (LANGUAGE.md section 3: the compiler chooses the layout,
    by the cost model under --auto, else by the documented default), drawn from a stream of
    their own so that the rest of the program is as without it"""
    rnd = random.Random("no mapping %d" % seed)
    named = set()
    for line in text.splitlines():
        if line.lstrip().startswith("."):
            named.update(re.findall(r"[A-Za-z_]\w*", line))
    out = []
    for line in text.splitlines():
        m = re.match(r"\s*(tensor|temp)\s+([A-Za-z_]\w*)", line)
        if m and m.group(2) not in named and re.search(r"@ M\([^)]*\)", line) and rnd.random() < 0.5:
            line = re.sub(r"@ M\([^)]*\)", "@ M", line)
        out.append(line)
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def distalc_has(option):
    """Whether distalc --help lists the option."""
    import subprocess
    try:
        out = subprocess.run([run_e2e.DISTALC, "--help"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return option in out.stdout + out.stderr


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--count", type=int, default=None, help="programs (default 200, --long 3000)")
    ap.add_argument("--seed", type=int, default=None, help="first seed (default: random)")
    ap.add_argument("--long", action="store_true")
    ap.add_argument("-j", "--jobs", type=int, default=int(os.environ.get("E2E_JOBS", "2")))
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--print", action="store_true", help="print the programs, run nothing")
    ap.add_argument("--timeout", type=int, default=run_e2e.RUN_TIMEOUT)
    ap.add_argument("--max-ranks", type=int, default=None, help="default 6, --long 8")
    ap.add_argument("--target", choices=["cpu", "cuda"], default=None,
                    help="compile for this target (see run_e2e.py)")
    args = ap.parse_args(argv)
    if args.target:
        run_e2e.TARGET_ARGS[:] = ["--target", args.target]
    count = args.count if args.count is not None else (3000 if args.long else 200)
    max_ranks = args.max_ranks or (8 if args.long else 6)
    seed0 = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 30)
    programs = []
    for s in range(seed0, seed0 + count):
        gen = gen_multi if s % 2 else gen_program  # odd seeds: programs of several statements
        text, overrides, nranks = gen(s, max_ranks, args.target or "cpu")
        if s % 3 == 1:  # the --auto third: some tensors `@ M` with no mapping
            text = drop_mappings(text, s)
        programs.append((s, text, overrides, nranks))
    if args.print:
        for s, text, overrides, nranks in programs:
            print("%s# run with: -np %d %s\n" % (text, nranks, " ".join(
                "-%s %s" % kv for kv in overrides.items())))
        return 0
    run_e2e.setup_environment()
    missing = run_e2e.distalc_missing()
    if missing:
        print("FAIL  all %d random programs: %s" % (count, missing))
        print("0 passed, %d failed" % count)
        return 1
    no_fuse = distalc_has("--no-fuse")
    auto_ok = distalc_has("--auto")
    workdir = run_e2e.make_workdir(args.keep)
    runs = []
    t0 = time.time()
    # compilations args.jobs at a time, runs twice that: mpirun's start-up mostly waits
    runner = Runner(workdir, timeout=args.timeout, jobs=args.jobs, run_jobs=2 * args.jobs)
    try:
        os.makedirs(os.path.join(workdir, "src"))
        for s, text, overrides, nranks in programs:
            path = os.path.join(workdir, "src", "random_%d.dtl" % s)
            with open(path, "w") as f:
                f.write(text)
            prog = dtl.parse_file(path)  # the generator's own sanity checks
            dtl.check_distributions(prog)
            values = prog.param_values(overrides)
            for st in prog.stmts:
                dtl.var_extents(prog, st, values)
            # The C compiler's optimization level does not change results (no fast-math, no
            # contraction): a quarter of the programs are compiled as users compile them
            # (-O3), the rest with -O1, and the --no-fuse leg with -O0, which keeps the
            # time of a run of three checks per program near that of one check at -O3.
            extra = os.environ.get("DISTAL_EXTRA_CFLAGS", "")
            # --monitor in a third of the programs with loops: its lines must be the oracle's
            # a third of the programs compiled with --auto (the statements without schedule
            # commands get the cost model's choice; the results must not change)
            r = Run("random", path, nranks, overrides, validate=(s % 10 == 0), label="seed=%d" % s,
                    compile_env=None if s % 4 == 0 else {"DISTAL_EXTRA_CFLAGS": (extra + " -O1").strip()},
                    monitor=prog.has_loops() and s % 3 == 0,
                    compile_args=["--auto", "--ranks", str(nranks)] if s % 3 == 1 and auto_ok else [])
            legs = [r]
            if no_fuse:
                # the same program with the program-level rewrites off, at another rank count
                # where the machine allows
                fits = [p for p in range(1, max_ranks + 1)
                        if grid_fit(prog, p, prog.param_values(overrides)) is not None]
                p = random.Random("no-fuse %d" % s).choice(fits)
                # ... and with 64-bit index arrays in every sparse piece (32-bit where they fit
                # is the default, which the first leg runs)
                legs.append(Run("random", path, p, overrides, validate=(s % 10 == 5), label="seed=%d" % s,
                                compile_args=["--no-fuse"],
                                compile_env={"DISTAL_EXTRA_CFLAGS": (extra + " -O0").strip()},
                                run_env={"DISTAL_INDEX_BITS": "64"}))
            for leg in legs:
                leg.seed_value = s
                leg.text = text
                runs.append(leg)

        def reproduce(run):
            return "%s %s --seed %d --count 1 --keep\n      program:\n%s" % (
                run_e2e.PYTHON, os.path.join(HERE, "gen_random.py"), run.seed_value,
                "\n".join("        " + l for l in run.text.rstrip().splitlines()))

        print("distalc: %s\nmpirun: %s\n%d random programs from seed %d, %d runs, %d at a time "
              "(%d compilations)%s"
              % (run_e2e.DISTALC, run_e2e.MPIRUN, count, seed0, len(runs), 2 * args.jobs, args.jobs,
                 "" if no_fuse else " (distalc has no --no-fuse: that leg is skipped)"))
        runner.reproduce = reproduce
        runner.run_all(runs)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print("(%.0f s; seeds %d..%d)" % (time.time() - t0, seed0, seed0 + count - 1))
    print("%d passed, %d failed" % (runner.passed, runner.failed))
    return 1 if runner.failed else 0


if __name__ == "__main__":
    sys.exit(main())
