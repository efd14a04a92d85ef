#!/usr/bin/env python3
"""test_oracle.py -- checks the NumPy oracle (dtl.py) against a brute-force interpreter.

The interpreter below shares nothing with the oracle but the parser: it walks the
expression tree once per point of the iteration space, in plain Python, runs loops and
evaluates their conditions with Python numbers, and places
each summation at the lowest common ancestor of the variable's occurrences, found from
the occurrences' paths in the tree, where an occurrence inside a function call counts as
one at the (outermost) call, and an ancestor that is a sum or difference places it in each
of its operands that holds occurrences instead (a term without any counts once).  Random small programs are generated as text (every other
one with temporaries, a floating param and nested loops), parsed, run by both, and
compared: values, iteration counts and monitor records.  Programs with known answers
(loops among them), programs the oracle must reject (the errors of temporaries, floating
params and loops) and the harness's check of an executable's iterations=K and --monitor
lines come first.  Last, the oracle's reading of sparse level formats,
its results for statements that write sparse tensors (those of the same program with
every tensor dense), and the sparse input files of sparse.py (.mtx, .tns), read back
independently.

usage: test_oracle.py [--count N] [--seed S] [--verbose]
"""

import argparse
import itertools
import math
import os
import random
import re
import sys

import numpy as np

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dtl  # noqa: E402

# ---- the brute-force interpreter ---------------------------------------------------------


def _occurrences(e, path, out, call=None):
    """Collect (var, path-of-access-node) for every variable occurrence; inside a call,
    the path of the outermost call instead (a sum never goes inside a call)."""
    k = e[0]
    if k == "acc":
        for v in e[2]:
            out.append((v, path if call is None else call))
    elif k == "neg":
        _occurrences(e[1], path + (0,), out, call)
    elif k == "call":
        for n, x in enumerate(e[2]):
            _occurrences(x, path + (n,), out, path if call is None else call)
    elif k in "+-*/":
        _occurrences(e[1], path + (0,), out, call)
        _occurrences(e[2], path + (1,), out, call)
    return out


def c_function(f, args, type_):
    """A function of the language on Python numbers, computed in the statement's type
    (arguments converted to it; integers truncate toward zero)."""
    if type_ in ("int32", "int64"):
        a = [int(x) for x in args]
        r = abs(a[0]) if f == "abs" else min(a) if f == "min" else max(a)
        return wrap(r, type_)
    a = [wrap(x, type_) for x in args]
    r = {"sqrt": lambda: math.sqrt(a[0]), "exp": lambda: math.exp(a[0]), "log": lambda: math.log(a[0]),
         "abs": lambda: abs(a[0]), "erf": lambda: math.erf(a[0]), "pow": lambda: math.pow(a[0], a[1]),
         "min": lambda: min(a), "max": lambda: max(a)}[f]()
    return wrap(r, type_)


def _common_prefix(paths):
    p = paths[0]
    for q in paths[1:]:
        n = 0
        while n < min(len(p), len(q)) and p[n] == q[n]:
            n += 1
        p = p[:n]
    return p


def c_int_div(a, b):
    if b == 0:  # defined: 0 (README, "Choices")
        return 0
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


def wrap(x, type_):
    """Store a Python number into a tensor element of the given type."""
    if type_ in ("int32", "int64"):
        x = int(x)  # truncates toward zero
        bits = 32 if type_ == "int32" else 64
        x &= (1 << bits) - 1
        return x - (1 << bits) if x >> (bits - 1) else x
    if type_ == "float":
        return float(np.float32(x))
    return float(x)


def c_value(e, env, params, decls):
    """A condition's arithmetic on Python numbers: integer scalars, params and literals
    are ints (C's int64: `/` truncates), the rest floats (doubles); functions in double."""
    k = e[0]
    if k == "acc":
        x = env[e[1]][()]
        return int(x) if decls[e[1]].type in ("int32", "int64") else float(x)
    if k == "num":
        return e[1]
    if k == "param":
        return params[e[1]]
    if k == "neg":
        return -c_value(e[1], env, params, decls)
    if k == "call":
        a = [float(c_value(x, env, params, decls)) for x in e[2]]
        try:
            return c_function(e[1], a, "double")
        except (ValueError, OverflowError):
            return math.nan
    a, b = c_value(e[1], env, params, decls), c_value(e[2], env, params, decls)
    if k == "+":
        return a + b
    if k == "-":
        return a - b
    if k == "*":
        return a * b
    if isinstance(a, int) and isinstance(b, int):
        return c_int_div(a, b)
    return a / b if b else (math.nan if a == 0 else math.copysign(math.inf, a) * math.copysign(1, b))


def c_condition(c, env, params, decls):
    if c[0] == "cmp":
        a, b = c_value(c[2], env, params, decls), c_value(c[3], env, params, decls)
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[c[1]]
    if c[0] == "!":
        return not c_condition(c[1], env, params, decls)
    if c[0] == "&&":
        return c_condition(c[1], env, params, decls) and c_condition(c[2], env, params, decls)
    return c_condition(c[1], env, params, decls) or c_condition(c[2], env, params, decls)


def brute_force(prog, params, inputs):
    """Values of every tensor and temporary, the iteration count (top-level loops summed)
    and the monitor records [(loop number, iteration, [(scalar, value)])]."""
    env = {}
    for name, t in prog.decls.items():
        a = None if t.temp else inputs.get(name)
        if a is None:
            a = np.zeros(prog.shape(name, params), t.dtype)
        env[name] = {idx: a[idx].item() for idx in itertools.product(*[range(n) for n in a.shape])}
    monitor = []

    def run(items):
        total = 0
        for item in items:
            if isinstance(item, dtl.Loop):
                bound = item.bound if isinstance(item.bound, int) else params[item.bound]
                n = 0
                while n < bound:
                    run(item.body)
                    n += 1
                    if item.cond is None:
                        monitor.append((item.number, n, []))
                        continue
                    names = []
                    for a in dtl.cond_accesses(item.cond):
                        if a[1] not in names:
                            names.append(a[1])
                    monitor.append((item.number, n, [(x, env[x][()]) for x in names]))
                    if c_condition(item.cond, env, params, prog.decls):
                        break
                total += n
            else:
                statement(item)
        return total

    def statement(s):
        ext = {}
        for name, vars_ in [(s.lhs, s.lhs_vars)] + [(a[1], a[2]) for a in dtl.accesses(s.rhs)]:
            for v, n in zip(vars_, prog.shape(name, params)):
                ext[v] = n
        occ = {}
        for v, p in _occurrences(s.rhs, (), []):
            occ.setdefault(v, []).append(p)
        def node_at(path):
            e = s.rhs
            for n in path:
                e = e[2][n] if e[0] == "call" else e[1 + n]
            return e

        def placements(paths):
            """the sum goes around the lowest common ancestor of the occurrences, but a sum
            of terms is summed term by term: each term holding occurrences gets its own
            (a term without any counts once)"""
            at = _common_prefix(paths)
            if node_at(at)[0] not in ("+", "-"):
                return [at]
            out = []
            for side in (0, 1):
                mine = [p for p in paths if len(p) > len(at) and p[len(at)] == side]
                if mine:
                    out += placements(mine)
            return out

        place = {}  # path -> summed vars placed there
        for v, paths in occ.items():
            if v not in s.lhs_vars:
                for at in placements(paths):
                    place.setdefault(at, []).append(v)
        is_int = all(prog.decls[a[1]].type in ("int32", "int64") for a in dtl.accesses(s.rhs))
        stype = prog.decls[s.lhs].type

        def ev(e, path, point):
            sv = place.get(path, [])
            if sv:
                total = 0
                for vals in itertools.product(*[range(ext[v]) for v in sv]):
                    p2 = dict(point)
                    p2.update(zip(sv, vals))
                    total += node(e, path, p2)
                return total
            return node(e, path, point)

        def node(e, path, point):
            k = e[0]
            if k == "acc":
                return env[e[1]][tuple(point[v] for v in e[2])]
            if k == "num":
                return e[1]
            if k == "param":
                return wrap(params[e[1]], stype)
            if k == "call":
                return c_function(e[1], [ev(x, path + (n,), point) for n, x in enumerate(e[2])], stype)
            if k == "neg":
                return -ev(e[1], path + (0,), point)
            a = ev(e[1], path + (0,), point)
            b = ev(e[2], path + (1,), point)
            if k == "+":
                return a + b
            if k == "-":
                return a - b
            if k == "*":
                return a * b
            if is_int and isinstance(a, int) and isinstance(b, int):
                return c_int_div(a, b)
            return a / b

        t = prog.decls[s.lhs]
        new = dict(env[s.lhs])
        for vals in itertools.product(*[range(ext[v]) for v in s.lhs_vars]):
            point = dict(zip(s.lhs_vars, vals))
            x = ev(s.rhs, (), point)
            if s.subtract:
                x = -x
            new[vals] = wrap(env[s.lhs][vals] + x if s.accumulate else x, t.type)
        env[s.lhs] = new

    iterations = run(prog.body)
    out = {}
    for name, t in prog.decls.items():
        shape = prog.shape(name, params)
        a = np.zeros(shape, t.dtype)
        for idx, x in env[name].items():
            a[idx] = x
        out[name] = a
    return out, iterations, monitor


# ---- random programs --------------------------------------------------------------------

VARS = "ijklm"


def random_program(rng):
    """Text of a random program with 1 to 3 statements over small tensors."""
    type_ = rng.choice(["double"] * 3 + ["int32", "int64", "float"])
    is_int = type_ in ("int32", "int64")
    ext = {v: rng.randint(1, 3) for v in VARS}
    lines = ["# random oracle test program"]
    for v in VARS:
        lines.append("param n%s = %d;" % (v, ext[v]))
    lines.append("machine M = grid(g);")
    tensors = []
    for n in range(rng.randint(2, 5)):
        order = rng.randint(0, 3)
        vars_ = rng.sample(VARS, order)
        name = "T%d" % n
        dims = ", ".join(("n" + v) if rng.random() < 0.7 else str(ext[v]) for v in vars_)
        dist = " @ M(%s -> %s)" % ("xyz"[:order], "x") if order and rng.random() < 0.3 else ""
        lines.append("tensor %s%s %s%s;" % (name, "(%s)" % dims if order else "", type_, dist))
        tensors.append((name, vars_))
    lines.append("tensor Z %s;  // a nonzero denominator" % type_)

    def access(name, dims):
        return "%s(%s)" % (name, ", ".join(dims)) if dims else name

    def literal():
        if is_int or rng.random() < 0.5:
            return str(rng.randint(0, 3))
        return "%.2f" % rng.uniform(0, 2)

    def call(depth):
        """A function call whose arguments stay in the function's domain."""
        a = rand_expr(depth - 1)
        f = rng.choice(["abs", "min", "max"] if is_int else sorted(dtl.FUNCS))
        if f in ("min", "max"):
            return "%s(%s, %s)" % (f, a, rand_expr(depth - 1))
        if f == "sqrt":
            return "sqrt(abs(%s))" % a
        if f == "log":
            return "log(1 + abs(%s))" % a
        if f == "exp":
            return "exp(min(%s, 3))" % a
        if f == "pow":
            return "pow(1 + abs(%s), %s)" % (a, rng.choice(["2", "0.5", "1.5", "min(%s, 2)" % rand_expr(0)]))
        return "%s(%s)" % (f, a)

    def rand_expr(depth):
        r = rng.random()
        if depth > 0 and r > 0.85:
            return call(depth)
        if depth <= 0 or r < 0.3:
            if rng.random() < 0.1:
                return "n" + rng.choice(VARS)  # a param's value
            if rng.random() < 0.15:
                return literal()
            name, dims = rng.choice(tensors)
            dims = list(dims)
            if len(dims) >= 2 and rng.random() < 0.15 and ext[dims[0]] == ext[dims[1]]:
                dims[1] = dims[0]  # a diagonal
            return access(name, dims)
        if r < 0.38:
            return "-" + rand_expr(depth - 1)
        if r < 0.45:
            den = "Z" if rng.random() < 0.5 else ("3" if is_int else "2.5")
            return "%s / %s" % (rand_expr(depth - 1), den)
        op = rng.choice(["+", "-", "*", "*"])
        a, b = rand_expr(depth - 1), rand_expr(depth - 1)
        if rng.random() < 0.4:
            return "(%s %s %s)" % (a, op, b)
        return "%s %s %s" % (a, op, b)

    for _ in range(rng.randint(1, 3)):
        out_name, out_dims = rng.choice(tensors)
        rhs = rand_expr(rng.randint(1, 4))
        op = rng.choice(["+=", "-="]) if rng.random() < 0.3 else "="
        sched = "\n  .distribute(%s)" % out_dims[0] if out_dims and rng.random() < 0.5 else ""
        lines.append("%s %s %s%s;" % (access(out_name, out_dims), op, rhs, sched))
    return "\n".join(lines) + "\n"


def random_loop_program(rng):
    """Text of a random program with temporaries (tensors and scalars), a floating param,
    and loops: `repeat` with and without `until`, nested, conditions on scalars that the
    loops compute and on an int64 counter, combined with && || !."""
    type_ = rng.choice(["double"] * 3 + ["int32", "int64", "float"])
    is_int = type_ in ("int32", "int64")
    ext = {v: rng.randint(1, 3) for v in VARS}
    lines = ["# random oracle test program with loops"]
    for v in VARS:
        lines.append("param n%s = %d;" % (v, ext[v]))
    lines.append("param reps = %d;" % rng.randint(0, 3))
    lines.append("param tol = %s;" % rng.choice(["0.5", "1e-1", "2.5", "1.0e0"]))
    lines.append("machine M = grid(g);")
    tensors, temps = [], []
    for n in range(rng.randint(1, 3)):
        order = rng.randint(0, 3)
        vars_ = rng.sample(VARS, order)
        dims = ", ".join(("n" + v) if rng.random() < 0.7 else str(ext[v]) for v in vars_)
        dist = " @ M(%s -> %s)" % ("xyz"[:order], "x") if order and rng.random() < 0.3 else ""
        lines.append("tensor T%d%s %s%s;" % (n, "(%s)" % dims if order else "", type_, dist))
        tensors.append(("T%d" % n, vars_))
    lines.append("tensor Z %s;  // a nonzero denominator" % type_)
    for n in range(rng.randint(1, 3)):
        order = rng.choice([0, 0, 1, 2])
        vars_ = rng.sample(VARS, order)
        dims = ", ".join("n" + v for v in vars_)
        dist = " @ M(%s -> %s)" % ("xyz"[:order], "x") if order and rng.random() < 0.3 else ""
        lines.append("temp U%d%s %s%s;" % (n, "(%s)" % dims if order else "", type_, dist))
        temps.append(("U%d" % n, vars_))
    lines.append("temp c int64;  // a counter")
    pool = list(tensors)  # what expressions may read: tensors, temporaries once written

    def access(name, dims):
        return "%s(%s)" % (name, ", ".join(dims)) if dims else name

    def leaf():
        r = rng.random()
        if r < 0.1:
            return "n" + rng.choice(VARS)
        if r < 0.18 and not is_int:
            return "tol"
        if r < 0.28:
            return str(rng.randint(0, 3)) if is_int or rng.random() < 0.5 else "%.2f" % rng.uniform(0, 2)
        name, dims = rng.choice(pool)
        return access(name, dims)

    def rand_expr(depth):
        r = rng.random()
        if depth > 0 and r > 0.88:
            a = rand_expr(depth - 1)
            f = rng.choice(["abs", "min", "max"] if is_int else sorted(dtl.FUNCS))
            if f in ("min", "max"):
                return "%s(%s, %s)" % (f, a, rand_expr(depth - 1))
            return {"sqrt": "sqrt(abs(%s))", "log": "log(1 + abs(%s))", "exp": "exp(min(%s, 1))",
                    "pow": "pow(1 + abs(%s), 0.5)", "abs": "abs(%s)", "erf": "erf(%s)"}[f] % a
        if depth <= 0 or r < 0.3:
            return leaf()
        if r < 0.38:
            return "-" + rand_expr(depth - 1)
        if r < 0.45:
            return "%s / %s" % (rand_expr(depth - 1), "Z" if rng.random() < 0.5 else ("3" if is_int else "2.5"))
        op = rng.choice(["+", "-", "*", "*"])
        e = "%s %s %s" % (rand_expr(depth - 1), op, rand_expr(depth - 1))
        return "(%s)" % e if rng.random() < 0.4 else e

    def statement(indent, out=None):
        name, dims = out or rng.choice(tensors + [t for t in temps if t in pool])
        op = rng.choice(["+=", "-="]) if rng.random() < 0.3 else "="
        if is_int:  # keep integers small: a loop repeats the statement
            rhs = "%s / 4" % rand_expr(rng.randint(0, 2))
        else:
            rhs = rand_expr(rng.randint(0, 3))
            if rng.random() < 0.5:
                rhs = "erf(%s)" % rhs  # bounded
        return "%s%s %s %s;" % (indent, access(name, dims), op, rhs)

    def comparison():
        scalars = [n for n, d in pool if not d] + ["c"]
        a = rng.choice(scalars)
        if rng.random() < 0.3 and a != "c":
            a = rng.choice(["abs(%s)", "%s * 2", "-%s", "%s + tol"]) % a
        b = rng.choice(["0", "1", "0.5", "tol", "reps", "n" + rng.choice(VARS)] + scalars)
        return "%s %s %s" % (a, rng.choice(["<", "<=", ">", ">=", "==", "!="]), b)

    def condition(depth):
        r = rng.random()
        if depth <= 0 or r < 0.5:
            return comparison()
        if r < 0.6:
            return "!(%s)" % condition(depth - 1)
        return "(%s %s %s)" % (condition(depth - 1), rng.choice(["&&", "||"]), condition(depth - 1))

    for t in temps:
        lines.append(statement("", t).replace("+=", "=").replace("-=", "="))
        pool.append(t)
    lines.append("c = 0;")

    def loop(indent, depth):
        bound = rng.choice(["0", "1", "2", "3", "reps"])
        cond = " until (%s)" % condition(2) if rng.random() < 0.75 else ""
        lines.append("%srepeat %s%s {" % (indent, bound, cond))
        for _ in range(rng.randint(1, 2)):
            lines.append(statement(indent + "  "))
        if depth < 2 and rng.random() < 0.4:
            loop(indent + "  ", depth + 1)
        if rng.random() < 0.8:
            lines.append("%s  c += 1;" % indent)
        if rng.random() < 0.5:
            lines.append(statement(indent + "  "))
        lines.append(indent + "}")

    for _ in range(rng.randint(0, 1)):
        lines.append(statement(""))
    for _ in range(rng.randint(1, 2)):
        loop("", 1)
    for _ in range(rng.randint(0, 1)):
        lines.append(statement(""))
    return "\n".join(lines) + "\n"


# ---- programs with known answers ---------------------------------------------------------

_KNOWN_DECLS = """param n = 2;
tensor B(n, n);
tensor c(n);
tensor d(n);
tensor A(n);
tensor s;
tensor T(n, n);
tensor I(n) int32;
tensor J(n) int32;
tensor K(n) int32;
"""
_KNOWN_INPUTS = {
    "B": [[1, 2], [3, 4]], "c": [1, 10], "d": [100, 1000], "A": [1, 2], "s": 5,
    "T": [[0, 0], [0, 0]], "I": [-7, 7], "J": [2, -2], "K": [0, 0],
}
_KNOWN = [
    # the summation goes around the smallest subexpression holding all occurrences
    ("A(i) = B(i, j) * c(j) + d(i);", {"A": [121, 1043]}),
    ("A(i) = B(i, j) * (c(j) + d(i));", {"A": [321, 7043]}),
    ("A(i) = B(i, j) + d(i);", {"A": [103, 1007]}),
    ("A(i) = B(i, j) + c(j);", {"A": [14, 18]}),
    # ... and a sum of terms is summed term by term, whatever their order: a term without j
    # counts once (Einstein notation), also where + and - associate it with a term with j
    ("A(i) = B(i, j) * c(j) - 1 + c(j);", {"A": [31, 53]}),
    ("A(i) = B(i, j) * c(j) + c(j) - 1;", {"A": [31, 53]}),
    ("A(i) = -(d(i) - B(i, j)) + s * c(j);", {"A": [-42, -938]}),
    ("A(i) = (B(i, j) - 1) * c(j);", {"A": [10, 32]}),
    ("A(i) = -B(i, j) * c(j);", {"A": [-21, -43]}),
    ("A(i) = B(i, j) * 2;", {"A": [6, 14]}),
    ("A(i) = c(j);  # the running example a(i) = b(j)", {"A": [11, 11]}),
    ("A(i) = c(j) * d(k);", {"A": [11 * 1100, 11 * 1100]}),
    ("A(i) += d(i);", {"A": [101, 1002]}),
    ("s = B(i, j) * B(i, j);", {"s": 30}),
    ("s += c(i);", {"s": 16}),
    ("s = 2;", {"s": 2}),
    ("A(i) = s;", {"A": [5, 5]}),
    ("T(i, j) = B(j, i);", {"T": [[1, 3], [2, 4]]}),
    ("T(i, j) = B(i, k) * B(k, j);", {"T": [[7, 10], [15, 22]]}),
    ("T(i, j) = c(i) - d(j) / 4;", {"T": [[-24, -249], [-15, -240]]}),
    ("A(i) = d(i); s = A(i) * 2;", {"A": [100, 1000], "s": 2200}),
    # C integer division truncates toward zero; so does storing into an integer
    ("K(i) = I(i) / J(i);", {"K": [-3, -3]}),
    ("K(i) = I(i) / 2 + J(i) / 3;", {"K": [-3, 3]}),
    ("K(i) = -I(i) / J(i) * 2;", {"K": [6, 6]}),
    # functions apply element-wise, a sum over a variable inside a call encloses the call
    ("A(i) = sqrt(B(i, j) * B(i, j));", {"A": [3, 7]}),
    ("A(i) = abs(c(j) - d(i));", {"A": [189, 1989]}),
    ("A(i) = max(B(i, j), 2) + min(c(i), d(j));", {"A": [6, 27]}),
    ("A(i) = pow(c(i), 2) - sqrt(d(j) * 0 + 4);", {"A": [-3, 96]}),
    ("s = exp(0) + log(1) + erf(0) + pow(2, 3) + abs(-1.5);", {"s": 10.5}),
    ("K(i) = abs(I(i)) - max(J(i), 0) * n;", {"K": [3, 7]}),
    ("K(i) = min(I(i) / 2, J(i)) + max(-abs(I(i)), -6);", {"K": [-9, -8]}),
    # -= is += -(EXPR); a param is its value
    ("A(i) -= d(i) - c(i);", {"A": [-98, -988]}),
    ("A(i) -= B(i, j) * c(j) - d(i);", {"A": [80, 959]}),
    ("A(i) = B(i, j) * n;", {"A": [6, 14]}),
    ("s -= c(i) * n / 4;", {"s": -0.5}),
]


def known_programs():
    for text, expect in _KNOWN:
        yield _KNOWN_DECLS + text + "\n", dict(_KNOWN_INPUTS), expect
    for text, expect, iterations in _KNOWN_LOOPS:
        expect = dict(expect, iterations=iterations)
        yield _LOOP_DECLS + text + "\n", dict(_LOOP_INPUTS), expect


# loops, temporaries, floating params: (statements, results, iteration count)
_LOOP_DECLS = """param n = 2;
param maxit = 10;
param tol = 0.25;
machine M = grid(g);
tensor x(n) @ M(i -> i);
tensor b(n);
tensor s;
tensor k int64;
temp t(n) @ M(i -> i);
temp r;
temp cnt int64;
"""
_LOOP_INPUTS = {"x": [1, 2], "b": [4, 8], "s": 0, "k": 0}
_KNOWN_LOOPS = [
    ("repeat 3 { x(i) = x(i) * 2; }", {"x": [8, 16]}, 3),
    ("repeat maxit until (s >= 5) { s += 1; }", {"s": 5}, 5),
    ("r = 1; repeat maxit until (r < tol) { r = r / 2; } s = r;", {"s": 0.125}, 3),
    # the iteration count is that of the top-level loops
    ("cnt = 0; repeat 2 { repeat 3 { cnt += 1; } } k = cnt;", {"k": 6}, 2),
    ("cnt = 0;\nrepeat 4 until (cnt >= 5) {\n  repeat 3 until (cnt == 2 || cnt == 4) { cnt += 1; }\n}\nk = cnt;",
     {"k": 7}, 3),
    ("repeat 0 until (s > 100) { s = 7; }", {"s": 0}, 0),
    ("t(i) = b(i) - x(i); r = t(i) * t(i); s = r;", {"s": 45}, 0),
    ("repeat 2 { s += 1; } repeat maxit until (!(s < 5)) { s += 1; }", {"s": 5}, 5),
    ("repeat maxit until (k >= 2 && s > tol * 4) { k += 1; s += 0.5; }", {"k": 3, "s": 1.5}, 3),
    ("repeat maxit until (sqrt(s) >= 2 && abs(-s) == max(s, 1)) { s += 1; }", {"s": 4}, 4),
    ("x(i) = x(i) * tol;", {"x": [0.25, 0.5]}, 0),
    # integers in a condition are int64: `/` truncates
    ("repeat maxit until (k / 2 == 2) { k += 1; }", {"k": 4}, 4),
    ("t(i) = b(i); repeat 2 { t(i) -= x(i); } x(i) = t(i);", {"x": [2, 4]}, 2),
    ("repeat maxit until (s * 2 > maxit - 1 || (k > 100)) { s += 1; k -= 1; }", {"s": 5, "k": -5}, 5),
    # a temporary keeps its value across iterations; the condition sees the body's writes
    ("r = 0; repeat maxit until (r >= 3) { r = r + 1; s = r * 10; }", {"s": 30}, 3),
    ("repeat 3 until (1 > 2) { x(i) += b(i); }", {"x": [13, 26]}, 3),
]

# Programs the oracle must reject (appended to _LOOP_DECLS)
_LOOP_REJECTED = [
    "temp u; s = u;",
    "temp u; u += 1;",
    "temp u; u -= s;",
    "temp u; u = u + 1;",
    "temp w(n); w(i) = x(i) * w(i);",
    "temp u; repeat 2 { s = u; u = 1; }",
    "temp u; repeat 2 until (u > 1) { s = 1; } u = 1;",
    "param f = 0.5; tensor q(f);",
    "param f = 0.5; temp q(n, f);",
    "param f = 0.5; machine M2 = grid(f);",
    "machine M2 = grid(f, 2); param f = 0.5;",
    "x(i) = b(i)\n  .split(i, io, ii, tol);",
    "repeat tol { s = 1; }",
    "repeat 2.5 { s = 1; }",
    "repeat -1 { s = 1; }",
    "repeat 1e1 { s = 1; }",
    "repeat 2 until (x < 1) { s = 1; }",
    "repeat 2 until (x(i) < 1) { s = 1; }",
    "repeat 2 until (t < 1) { t(i) = x(i); }",
    "k = tol;",
    "k = k * 2 + tol;",
    "cnt = cnt + 1;",
    "repeat 2 until (s) { s = 1; }",
    "repeat 2 until (s < 1 &&) { s = 1; }",
    "repeat 2 until (zz < 1) { s = 1; }",
    "repeat 2 until s < 1 { s = 1; }",
    "repeat 2 { tensor w; }",
    "repeat 2 { s = 1;",
    "repeat { s = 1; }",
    "param tol = 0.5;",
    "temp x(n);",
]
# and programs it must accept
_LOOP_ACCEPTED = [
    "temp u; repeat 2 { u = 1; s = u; }",
    "temp u; repeat 2 until (u > 1) { u = s; }",
    "temp u(n) int32 {compressed}; repeat 0 { s = 1; } u(i) = k;",
    "temp w(n) csf @ M(i -> i); w(i) = x(i);",
    "repeat maxit until (((s < 1)) || !(!(k == 0))) { s = 1; }",
    "repeat maxit until ((s + 1) * 2 < 1 && -s <= tol) { s = 1; }",
    "repeat g until (s > 0) { s = 1; }",
    "repeat 1 until (s > 1e-10) { repeat 2 { repeat 3 { s += 1; } } }",
]


# ---- sparse tensors ---------------------------------------------------------------------

_SPARSE_DECLS = """param n = 3;
machine M = grid(g);
tensor A(n, n) csr @ M(ij -> i);
tensor D(n, n) int32 {compressed, compressed};
tensor R(n, n) {compressed, dense} float;
tensor K(n, n) compressed;
tensor T(n, n, n) csf;
tensor v(n) {compressed};
tensor B(n, n) {dense, dense};
tensor x(n);
tensor y(n);
tensor C(n, n);
"""


def sparse_checks(rng, count):
    """The oracle's reading of level formats, and the sparse input files of sparse.py
    read back by independent readers: each must mean the dense array it was written
    for.  Returns a list of failure messages."""
    import tempfile

    import sparse

    errs = []
    prog = dtl.parse(_SPARSE_DECLS + "y(i) = A(i, j) * x(j);\n", "sparse declarations")
    want = {"A": ["dense", "compressed"], "D": ["compressed"] * 2, "R": ["compressed", "dense"],
            "K": ["compressed"] * 2, "T": ["compressed"] * 3, "v": ["compressed"],
            "B": ["dense", "dense"], "x": None}
    for name, fmt in want.items():
        t = prog.tensors[name]
        if t.format != fmt or t.sparse != bool(fmt and "compressed" in fmt):
            errs.append("format of %s: %r (sparse %s), expected %r"
                        % (name, t.format, t.sparse, fmt))
    if prog.tensors["R"].type != "float" or prog.tensors["D"].type != "int32":
        errs.append("the type after or before a format is lost")
    # statements that write a sparse tensor compute as if it were dense (`+=` from its
    # initial values); one that reads the sparse tensor it writes is rejected
    dense_decls = re.sub(r" (csr|csf|compressed|\{[a-z, ]*\})", "", _SPARSE_DECLS)
    for text in ("A(i, j) = C(i, j) * x(j);\nK(i, j) = A(i, j) + B(i, j);",
                 "v(i) += x(i) * 2;\nR(i, j) += A(i, j) * C(j, i);",
                 "T(i, j, k) = C(i, j) * x(k);\nD(i, j) = B(i, j) - C(j, i);",
                 "A(i, j) = C(i, k) * B(k, j);\ny(i) = A(i, j) * x(j);\nA(i, j) += y(i);"):
        try:
            sp = dtl.parse(_SPARSE_DECLS + text + "\n", "writes a sparse tensor")
        except dtl.DtlError as e:
            errs.append("the oracle rejects a statement that writes a sparse tensor: %s (%s)"
                        % (text, e))
            continue
        de = dtl.parse(dense_decls + text + "\n", "writes a dense tensor")
        if any(t.sparse for t in de.tensors.values()):
            errs.append("dense declarations still sparse: %s" % dense_decls)
        params = sp.param_values({"g": 1})
        inputs = dtl.random_inputs(sp, params, rng)
        got, _ = dtl.evaluate(sp, params, inputs)
        want, _ = dtl.evaluate(de, params, inputs)
        for name in sp.written():
            if got[name].dtype != sp.tensors[name].dtype or not np.array_equal(got[name], want[name]):
                errs.append("a sparse result computed unlike a dense one: %s in %s" % (name, text))
    for bad in ("A(i, j) = C(i, j) * A(i, j);", "v(i) += v(i) * x(i);",
                "T(i, j, k) = C(i, j) * x(k) + T(k, j, i);", "D(i, j) = -D(i, j);"):
        try:
            dtl.parse(_SPARSE_DECLS + bad + "\n", "reads the sparse tensor it writes")
            errs.append("the oracle accepts a statement that reads the sparse tensor it writes: %s"
                        % bad)
        except dtl.DtlError:
            pass
    # what --target cuda rejects (run_e2e.py checks only that): sparse tensors, precompute
    dense = "param n = 3;\ntensor B(n, n);\ntensor x(n);\ntensor y(n);\n"
    for text, cmds, cpu in (
            ("y(i) = B(i, j) * x(j)\n  .split(j, jo, ji, 2);  # precompute(x(j), j, jw, w)",
             ["split"], False),
            ("y(i) = B(i, j) * x(j)\n  .precompute(B(i, j) * x(j), j, jw, w).split(j, jo, ji, 2);",
             ["precompute", "split"], True)):
        q = dtl.parse(dense + text + "\n", "commands")
        if q.stmts[0].commands != cmds or q.cpu_only() != cpu:
            errs.append("commands %r (cpu only %s), expected %r (%s): %s"
                        % (q.stmts[0].commands, q.cpu_only(), cmds, cpu, text))
    if not prog.cpu_only():
        errs.append("a program with sparse tensors is not cpu_only")
    for bad in ("tensor Z(n, n, n) csr;", "tensor Z(n, n) {dense};", "tensor Z(n) csr;",
                "tensor Z(n) {compressed} {dense};", "tensor Z(n) float int32;"):
        try:
            dtl.parse("param n = 3;\n" + bad + "\n", "bad format")
            errs.append("the oracle accepts %s" % bad)
        except dtl.DtlError:
            pass
    # a known file: duplicates summed, a symmetric matrix mirrored, pattern values one
    with tempfile.TemporaryDirectory() as d:
        known = [
            ("%%MatrixMarket matrix coordinate real general\n% c\n3 2 4\n"
             "1 1 0.5\n3 2 -2\n1 1 0.25\n2 1 0\n",
             "mtx", np.float64, [[0.75, 0], [0, 0], [0, -2]]),
            ("%%MatrixMarket matrix coordinate integer symmetric\n3 3 3\n2 1 4\n3 3 -1\n3 1 2\n",
             "mtx", np.int32, [[0, 4, 2], [4, 0, 0], [2, 0, -1]]),
            ("%%MatrixMarket matrix coordinate pattern general\n2 2 2\n2 1\n1 2\n",
             "mtx", np.float32, [[0, 1], [1, 0]]),
            ("%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 2\n2 1 0.5\n3 2 -3\n",
             "mtx", np.float64, [[0, -0.5, 0], [0.5, 0, 3], [0, -3, 0]]),
            ("# c\n1 2 1 1.5\n2 1 2 -1\n1 2 1 1\n", "tns", np.float64,
             [[[0, 0], [2.5, 0]], [[0, -1], [0, 0]]]),
        ]
        for n, (text, form, dtype, dense) in enumerate(known):
            path = os.path.join(d, "known%d.%s" % (n, form))
            with open(path, "w") as f:
                f.write(text)
            dense = np.asarray(dense, dtype)
            if form == "mtx":
                got = sparse.read_mtx(path, dtype)
            else:
                got = sparse.read_tns(path, dense.shape, dtype)
            if got.dtype != dense.dtype or not np.array_equal(got, dense):
                errs.append("reader: known file %d means %r, read as %r"
                            % (n, dense.tolist(), got.tolist()))
        # random files
        seen = set()
        forms = ("mtx real general", "mtx real symmetric", "mtx integer general",
                 "mtx real skew-symmetric", "mtx integer skew-symmetric", "mtx pattern general",
                 "mtx pattern symmetric", "tns", "npy")
        n = 0
        # count files, and more until every kind of file has been seen (2000 at most)
        while n < count or (not set(forms) <= seen and n < max(count, 2000)):
            n += 1
            order = int(rng.integers(1, 4))
            shape = tuple(int(x) for x in rng.integers(1, 9, size=order))
            if order == 2 and rng.random() < 0.4:
                shape = (shape[0], shape[0])
            dtype = np.dtype(rng.choice(["float64", "float32", "int32", "int64"]))
            base = os.path.join(d, "in%d" % n)
            path, dense, desc, lines = sparse.write_input(base, shape, dtype, rng)
            seen.add(desc.split(",")[0])
            try:
                if path.endswith(".mtx"):
                    got = sparse.read_mtx(path, dtype)
                elif path.endswith(".tns"):
                    got = sparse.read_tns(path, shape, dtype)
                else:
                    got = np.load(path)
            except ValueError as e:
                errs.append("%s (%s): %s" % (os.path.basename(path), desc, e))
                continue
            if got.shape != shape or got.dtype != dtype or not np.array_equal(got, dense):
                errs.append("%s (%s, %s %s) does not mean the array the harness compares with"
                            % (os.path.basename(path), desc, dtype, shape))
            if " symmetric" in desc and not np.array_equal(dense, dense.T):
                errs.append("%s: a symmetric .mtx whose matrix is not symmetric" % desc)
            if "skew-symmetric" in desc and not np.array_equal(dense, -dense.T):
                errs.append("%s: a skew-symmetric .mtx whose matrix is not" % desc)
            if "pattern" in desc and not np.all((dense == 0) | (dense == 1)):
                errs.append("%s: a pattern .mtx with values other than 1" % desc)
            body = [l.split() for l in (lines or [])[1:] if not l.startswith(("%", "#"))][1:]
            if "integer" in desc and not all(w[2].lstrip("-").isdigit() for w in body):
                errs.append("%s: an integer .mtx with values that are not integers" % desc)
            if "pattern" in desc and not all(len(w) == 2 for w in body):
                errs.append("%s: a pattern .mtx with values" % desc)
        for form in forms:
            if count and form not in seen:
                errs.append("%d random sparse files, none of them %s" % (n, form))
    return errs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    seed0 = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 30)
    passed = failed = 0

    def check(tag, text, inputs, expect, skip_unclear=False):
        """Compare the oracle with the brute-force interpreter (and the known answer).
        skip_unclear: return False, checking nothing, for a program whose loops decide
        on borderline values or whose values are not finite (a random program)."""
        nonlocal passed, failed
        prog = dtl.parse(text, tag)
        params = prog.param_values({"g": 1} if "g" in prog.params else {})
        for s in prog.stmts:
            dtl.var_extents(prog, s, params)  # raises on conflicting extents
        if inputs is None:
            rng = np.random.default_rng(abs(hash(text)) % (1 << 32))
            inputs = dtl.random_inputs(prog, params, rng)
            inputs["Z"] = np.asarray(3 if prog.tensors["Z"].type.startswith("int") else 2.5,
                                     prog.tensors["Z"].dtype)
        else:
            inputs = {k: np.asarray(v, prog.tensors[k].dtype) for k, v in inputs.items()}
        outcome = dtl.execute(prog, params, inputs)
        got, mags = outcome.values, outcome.mags
        if skip_unclear and (outcome.borderline or not all(
                np.all(np.isfinite(m)) and np.all(m < 1e12) for m in mags.values())):
            return False
        want, iterations, monitor = brute_force(prog, params, inputs)
        errs = []
        for name, t in prog.decls.items():
            err = dtl.compare(t, got[name], want[name], mags[name])
            if err:
                errs.append("oracle vs brute force: " + err)
        if outcome.iterations != iterations:
            errs.append("oracle vs brute force: %d iterations, expected %d" % (outcome.iterations, iterations))
        if [r[:2] + ([n for n, _ in r[2]],) for r in outcome.monitor] != \
                [r[:2] + ([n for n, _ in r[2]],) for r in monitor]:
            errs.append("oracle vs brute force: monitor records %s, expected %s" % (outcome.monitor, monitor))
        expect = dict(expect or {})
        if "iterations" in expect and expect.pop("iterations") != outcome.iterations:
            errs.append("oracle vs known answer: %d iterations" % outcome.iterations)
        for name, v in expect.items():
            err = dtl.compare(prog.tensors[name], got[name], np.asarray(v, prog.tensors[name].dtype),
                              np.zeros(np.shape(v)))
            if err:
                errs.append("oracle vs known answer: " + err)
        if errs:
            failed += 1
            print("FAIL (%s)\n  %s\n%s" % (tag, "\n  ".join(errs), text))
        else:
            passed += 1
            if args.verbose:
                print("ok (%s)" % tag)
        return True

    def check_rejections():
        """The new errors of LANGUAGE.md 3 and 9, and the programs that are valid."""
        nonlocal passed, failed
        errs = []
        for text in _LOOP_REJECTED:
            try:
                dtl.parse(_LOOP_DECLS + text + "\n", "rejected")
                errs.append("the oracle accepts: %s" % text)
            except dtl.DtlError:
                pass
        for text in _LOOP_ACCEPTED:
            try:
                prog = dtl.parse(_LOOP_DECLS + text + "\n", "accepted")
                dtl.check_distributions(prog)
                dtl.execute(prog, prog.param_values({"g": 1}), {})
            except dtl.DtlError as e:
                errs.append("the oracle rejects: %s (%s)" % (text, e))
        # the callers' view: temporaries are no tensors of compute, floating params
        # read as floats, the condition's scalars and the monitor's lines
        prog = dtl.parse(_LOOP_DECLS + "r = 1; repeat maxit until (r < tol && cnt >= 0) { r = r / 2; "
                         "cnt = 1; } t(i) = x(i) + r; x(i) = t(i);\n", "api")
        vals = prog.param_values({"tol": "1e-3", "maxit": 4, "g": 1})
        out = dtl.execute(prog, vals, {"x": np.ones(2)})
        checks = [
            (list(prog.tensors), ["x", "b", "s", "k"]), (list(prog.temps), ["t", "r", "cnt"]),
            (prog.written(), ["x"]), (prog.written(temps=True), ["r", "cnt", "t", "x"]),
            (prog.read(), ["x"]), (prog.float_params(), {"tol": 0.25}),
            (vals["tol"], 1e-3), (type(vals["maxit"]), int), (prog.has_loops(), True),
            (prog.loops[0].cond_scalars(), ["r", "cnt"]), (out.iterations, 4),
            (out.loop_iterations, {1: [4]}),
            ([dtl.monitor_line(m) for m in out.monitor][:2],
             ["monitor: loop 1 iteration 1: r=5.000000e-01 cnt=1",
              "monitor: loop 1 iteration 2: r=2.500000e-01 cnt=1"]),
            (sorted(dtl.random_inputs(prog, vals, np.random.default_rng(1))), ["b", "k", "s", "x"]),
        ]
        for n, (got, want) in enumerate(checks):
            if got != want:
                errs.append("api check %d: %r, expected %r" % (n, got, want))
        prog = dtl.parse(_LOOP_DECLS + "repeat maxit { x(i) = b(i); } s = x(i);\n", "read")
        if prog.read() != ["b", "x"]:
            errs.append("read() of a loop that may not run: %r" % prog.read())
        # the harness's check of an executable's iterations=K and --monitor lines
        import run_e2e
        prog = dtl.parse(_LOOP_DECLS + "r = 1;\nrepeat maxit until (r < tol) { r = r / 2; }\n"
                         "repeat 2 { s += 1; }\n", "monitor")
        out = dtl.execute(prog, prog.param_values({"g": 1}), {})
        summary = "prog: ranks=1 grid=1 n=2 iterations=%d iters=1 min=0.1 s\n"
        mon = ("monitor: loop 1 iteration 1: r=5.000000e-01\nmonitor: loop 1 iteration 2: r=2.500000e-01\n"
               "monitor: loop 1 iteration 3: r=1.250000e-01\nmonitor: loop 2 iteration 1\n"
               "monitor: loop 2 iteration 2\n")
        for text, ok in ((summary % 5, True), (summary % 4, False), ("prog: ranks=1\n", False),
                         ('{"program": "prog", "iterations": 5, "iters": 1}\n', True),
                         (mon + summary % 5, True), (mon + mon + summary % 5, True),
                         (mon.replace("r=1.25", "r=1.26") + summary % 5, False),
                         (mon.replace("loop 2 iteration 2", "loop 2 iteration 3") + summary % 5, False),
                         (mon.replace("r=5.0", "q=5.0") + summary % 5, False),
                         ("\n".join(mon.splitlines()[:4]) + "\n" + summary % 5, False)):
            msg = run_e2e.check_iterations(prog, out, text)
            if (msg is None) != ok:
                errs.append("check_iterations: %s for %r" % (msg or "accepted", text))
        for e in errs:
            print("FAIL (programs) %s" % e)
        failed += 1 if errs else 0
        passed += 0 if errs else 1

    for n, (text, inputs, expect) in enumerate(known_programs()):
        check("known answer %d" % n, text, inputs, expect)
    check_rejections()
    seed = seed0
    random_done = unclear = 0
    while random_done < args.count:
        # every other seed a program with temporaries and loops
        text = (random_loop_program if seed % 2 else random_program)(random.Random(seed))
        try:
            prog = dtl.parse(text, "seed %d" % seed)
            params = prog.param_values()
            for s in prog.stmts:
                dtl.var_extents(prog, s, params)
        except dtl.DtlError:
            seed += 1  # conflicting extents: not a valid program; draw another
            continue
        if not check("seed %d" % seed, text, None, None, skip_unclear=True):
            unclear += 1  # borderline or not finite: draw another
            seed += 1
            continue
        random_done += 1
        seed += 1
    errs = sparse_checks(np.random.default_rng(seed0), args.count)
    for err in errs:
        print("FAIL (sparse, seed %d) %s" % (seed0, err))
    failed += 1 if errs else 0
    passed += 0 if errs else 1
    print("oracle checked against the brute-force interpreter; random seeds %d..%d "
          "(rerun one: test_oracle.py --seed S --count 1; %d programs with borderline conditions "
          "or values that are not finite skipped)" % (seed0, seed - 1, unclear))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
