"""dtl.py -- the NumPy oracle of the end-to-end tests.

Parses the declarations and statements of a .dtl program (LANGUAGE.md) and evaluates
the statements in order with NumPy.  Schedules are skipped: a schedule changes
performance only, never the result, so the oracle never needs to understand one.

Semantics (those that the compiler implements):
  - `=` assigns, `+=` accumulates into the tensor's current value, `-=` is `+= -(EXPR)`;
    the right side is evaluated from the values before the statement.
  - The element-wise functions sqrt exp log abs erf (one argument) and pow min max (two)
    compute in the statement's type: their arguments are converted to it (an integer
    statement truncates floating arguments toward zero and computes abs, min and max in
    int64, the only functions it allows).  A name followed by `(` is a call unless a tensor
    of that name is declared before it.  A summed variable that occurs inside a call is
    reduced around the call (`a(i) = sqrt(B(i,j))` sums the square roots), never inside it.
  - A param in an expression is its value, converted to the statement's type (an int32
    statement wraps it modulo 2^32, as C converts int64_t to int32_t).
  - A variable that appears only on the right is summed over.  Its summation is
    placed around the smallest subexpression that contains all of its occurrences
    (TACO's rule): `A(i) = B(i,j)*c(j) + d(i)` is (sum_j B(i,j)*c(j)) + d(i), while
    `A(i) = B(i,j)*(c(j) + d(i))` sums the whole product; where that subexpression is a
    sum or difference, each of its terms is summed on its own (Einstein notation: a term
    without the variable counts once, however + and - associate it:
    `B(i,j)*c(j) - 1 + c(j)` is sum_j B(i,j)*c(j) - 1 + sum_j c(j)).  A variable that
    appears only on the left broadcasts.
  - Arithmetic is done in the tensors' own types: int32/int64 as integers (`/`
    truncates toward zero, as in C), float and double in their own precision.  The
    value stored into an integer tensor is truncated toward zero.
  - Scalars are 0-d arrays.
  - A literal takes the type of the statement's result (distalc prints it so in C):
    integer literals are exact (Python ints, checked against int64; -9223372036854775808
    is one literal) and must fit an int32 result; a floating literal in an integer
    statement truncates toward zero and must fit; a float statement rounds the literal
    once to float32 (as C reads 0.1f, `float32_nearest`), a double one to float64.
  - A tensor with a compressed level is sparse: the oracle computes with its dense
    equivalent (a format changes the storage, never a result).  A statement may write
    a sparse tensor: its result is the dense result (the stored nonzeros mean exactly
    that), `=` from zeros, `+=` from the dense meaning of its initial values; but no
    statement may read the sparse tensor it writes (distalc rejects it).

Programs (LANGUAGE.md sections 3 and 9):
  - `temp` declares a temporary: a tensor (or scalar) of the program that is no argument of
    compute, never loaded or saved (Program.temps; Program.tensors holds only the others).
    Reading a temporary before a statement earlier in the source wrote it is an error (a
    `+=`/`-=` into it reads it, so does its own statement's right side); a loop's condition
    reads after the loop's body.  Temporaries start as zeros (never observed).
  - `param NAME = FLOAT;` declares a floating param (a double): only in expressions and
    conditions; in a shape, grid, schedule or `repeat` bound, and in a statement whose
    result is an integer type, it is an error.  In a float statement its value is rounded
    to float, as C converts a double.
  - `repeat E [until (COND)] { ... }`: E an integer literal or integer param; the body runs,
    then COND is evaluated; the loop ends when it holds or after E iterations.  Loops nest
    and are numbered in source order from 1 (the numbers of --monitor).  The iteration
    count of a run is the sum of the iterations of the top-level loops (what executables
    print as `iterations=K`).
  - COND: comparisons `< <= > >= == !=` of scalar values combined with `&& || !`.  Its
    arithmetic is C's on the scalars' values: integer scalars, integer params and integer
    literals are int64 (`/` truncates), everything else double (a float scalar converted
    exactly); the functions compute in double.  Only scalars (order 0 tensors and
    temporaries), params and literals may appear in it.  A comparison whose sides are
    closer than the rounding error their magnitudes allow is recorded as borderline
    (Outcome.borderline): a distributed run may then decide otherwise.

Next to every value the oracle computes a magnitude: the same expression evaluated on
absolute values with every sign turned into `+` (a product's the smaller of that and the
first-order bound |a| mag(b) + |b| mag(a); a function's from its derivative).
Floating-point results are compared against the oracle relative to that magnitude (see
`compare`), so the tolerance grows with the length of the reductions and cancellation
does not cause false failures.
"""

import math
import re
from fractions import Fraction

import numpy as np

DTYPES = {
    "double": np.dtype("float64"),
    "float": np.dtype("float32"),
    "int32": np.dtype("int32"),
    "int64": np.dtype("int64"),
}
FORMAT_WORDS = ("dense", "compressed", "csr", "csf")
KEYWORDS = {"param", "machine", "tensor", "temp", "grid", "Grid", "repeat", "until"}
# The element-wise functions: name -> number of arguments; INT_FUNCS are those that integer
# statements allow.
FUNCS = {"sqrt": 1, "exp": 1, "log": 1, "abs": 1, "erf": 1, "pow": 2, "min": 2, "max": 2}
INT_FUNCS = ("abs", "min", "max")

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
INT_RANGE = {"int32": (-(1 << 31), (1 << 31) - 1), "int64": (INT64_MIN, INT64_MAX)}

# Relative tolerances, applied to the magnitude (sum of absolute values of the terms).
RTOL = {"double": 1e-9, "float": 1e-3, "int32": 0.0, "int64": 0.0}


class DtlError(Exception):
    """A syntax or semantic error in a .dtl program, or a bad evaluation request."""


# ---- lexer ---------------------------------------------------------------------------

_TOKEN_RE = re.compile(
    r"""
    (?P<ws>[ \t\r\n]+)
  | (?P<comment>(?:\#|//)[^\n]*)
  | (?P<num>[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)
  | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>->|\+=|-=|&&|\|\||<=|>=|==|!=|[-+*/()\[\]{},;=.@:<>!])
    """,
    re.VERBOSE,
)


class Token:
    __slots__ = ("kind", "text", "line", "col")

    def __init__(self, kind, text, line, col):
        self.kind, self.text, self.line, self.col = kind, text, line, col

    def __repr__(self):
        return "%s:%r@%d:%d" % (self.kind, self.text, self.line, self.col)


def tokenize(text, path="<string>"):
    toks = []
    pos, line, linestart = 0, 1, 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if not m:
            raise DtlError("%s:%d:%d: unexpected character %r" % (path, line, pos - linestart + 1, text[pos]))
        kind = m.lastgroup
        s = m.group()
        if kind in ("num", "id", "op"):
            toks.append(Token(kind, s, line, pos - linestart + 1))
        nl = s.count("\n")
        if nl:
            line += nl
            linestart = pos + s.rfind("\n") + 1
        pos = m.end()
    toks.append(Token("eof", "", line, pos - linestart + 1))
    return toks


# ---- AST -------------------------------------------------------------------------------
#
# Sizes are ints or param names (str).  Expressions are tuples:
#   ("acc", tensor, (vars...))   ("num", value, is_int, text)   ("neg", e)
#   ("call", function, (args...))   ("param", name)
# A literal's value is a Python int (exact) or float (the nearest double); text is the
# literal as written, from which a float statement rounds it once to float32.
#   ("+" | "-" | "*" | "/", a, b)
# Conditions of `until` are tuples too:
#   ("cmp", op, a, b) with op one of < <= > >= == != and a, b expressions
#   ("&&" | "||", c, d)   ("!", c)


class Param:
    def __init__(self, name, default=None, is_grid=False, is_float=False):
        self.name, self.default, self.is_grid, self.is_float = name, default, is_grid, is_float


class Machine:
    def __init__(self, name, levels):
        self.name = name
        self.levels = levels  # list of lists of sizes (int or param name)

    @property
    def dims(self):
        return [d for lvl in self.levels for d in lvl]


class Tensor:
    def __init__(self, name, dims, type_, dist_text, fmt, temp=False):
        self.name, self.dims, self.type, self.dist_text = name, dims, type_, dist_text
        self.format = fmt  # None (dense) or the level format of every dimension
        self.temp = temp  # declared with `temp`: never loaded or saved

    @property
    def order(self):
        return len(self.dims)

    @property
    def sparse(self):
        """Whether some level is compressed: the tensor is loaded from .mtx, .tns or a
        dense .npy; a statement that writes it may not read it."""
        return bool(self.format) and "compressed" in self.format

    @property
    def dtype(self):
        return DTYPES[self.type]


class Stmt:
    def __init__(self, lhs, lhs_vars, accumulate, rhs, schedule_text, line, subtract=False):
        self.lhs, self.lhs_vars, self.accumulate, self.rhs = lhs, tuple(lhs_vars), accumulate, rhs
        self.schedule_text, self.line = schedule_text, line
        self.subtract = subtract  # -=: accumulate is set too
        self.loop = None  # the innermost loop around the statement

    @property
    def commands(self):
        """The names of the schedule's commands, in order."""
        return re.findall(r"(?:^|\.)([A-Za-z_]\w*)\(", self.schedule_text)

    def text(self):
        lhs = self.lhs + ("(%s)" % ", ".join(self.lhs_vars) if self.lhs_vars else "")
        op = "-=" if self.subtract else "+=" if self.accumulate else "="
        return "%s %s %s" % (lhs, op, expr_str(self.rhs))


class Loop:
    """`repeat bound [until (cond)] { body }`: bound an int or an integer param's name,
    cond None or a condition, body a list of Stmt and Loop; number: its place in source
    order, from 1."""

    def __init__(self, bound, cond, line, number, parent=None):
        self.bound, self.cond, self.line, self.number = bound, cond, line, number
        self.body = []
        self.parent = parent

    def statements(self):
        """The statements inside the loop, nested ones included, in source order."""
        out = []
        for item in self.body:
            out += item.statements() if isinstance(item, Loop) else [item]
        return out

    def cond_scalars(self):
        """The scalars (tensors and temporaries) the condition reads, in order of first
        appearance: the values --monitor prints."""
        return list(dict.fromkeys(a[1] for a in cond_accesses(self.cond))) if self.cond else []


class Program:
    def __init__(self, path):
        self.path = path
        self.params = {}  # name -> Param, in declaration order
        self.machines = {}
        self.tensors = {}  # the tensors of compute's arguments (no temporaries)
        self.temps = {}  # the temporaries
        self.decls = {}  # both, in declaration order
        self.stmts = []  # every statement, in source order (loop bodies included)
        self.body = []  # the top level: Stmt and Loop, in order
        self.loops = []  # every loop, in source order (its number - 1)

    def decl(self, name):
        """The declaration of a tensor or a temporary."""
        return self.decls[name]

    def has_loops(self):
        return bool(self.loops)

    # Names of tensors (not temporaries) that some statement writes / reads.
    def written(self, temps=False):
        out = []
        for s in self.stmts:
            if s.lhs not in out and (temps or s.lhs not in self.temps):
                out.append(s.lhs)
        return out

    def read(self):
        """Tensors (not temporaries) whose values before the program matter: read before
        being assigned with `=`, or updated with `+=` before that.  An assignment inside
        a loop counts after the loop only where the loop runs at least once."""
        out = []

        def walk(items, assigned):
            for item in items:
                if isinstance(item, Loop):
                    inner = set(assigned)
                    walk(item.body, inner)
                    if item.cond:
                        used(cond_accesses(item.cond), inner)
                    if isinstance(item.bound, int) and item.bound >= 1:
                        assigned |= inner
                    continue
                names = [a[1] for a in accesses(item.rhs)] + ([item.lhs] if item.accumulate else [])
                used([("acc", n, ()) for n in names], assigned)
                if not item.accumulate:
                    assigned.add(item.lhs)

        def used(accs, assigned):
            for a in accs:
                t = a[1]
                if t not in assigned and t not in out and t not in self.temps:
                    out.append(t)

        walk(self.body, set())
        return out

    def grid_params(self):
        return [p.name for p in self.params.values() if p.is_grid]

    def float_params(self):
        """Name -> default value of every floating param."""
        return {p.name: p.default for p in self.params.values() if p.is_float}

    def cpu_only(self):
        """Whether the program uses what only the CPU target compiles: sparse tensors or
        precompute (distalc --target cuda rejects it)."""
        return (any(t.sparse for t in self.decls.values())
                or any("precompute" in s.commands for s in self.stmts))

    def size(self, s, params):
        if isinstance(s, int):
            return s
        if s not in params or params[s] is None:
            raise DtlError("%s: param %s has no value" % (self.path, s))
        return int(params[s])

    def shape(self, tname, params):
        return tuple(self.size(d, params) for d in self.decls[tname].dims)

    def param_values(self, overrides=None, grid=None):
        """Defaults, then overrides, then grid values: int for integer params, float for
        floating ones.  Params left without a value map to None."""
        vals = {n: p.default for n, p in self.params.items()}
        for src in (overrides or {}), (grid or {}):
            for k, v in src.items():
                if k not in vals:
                    raise DtlError("%s: no param named %s" % (self.path, k))
                vals[k] = float(v) if self.params[k].is_float else int(v)
        return vals


def cond_accesses(c):
    """All access nodes of a condition, left to right."""
    if c[0] == "cmp":
        return accesses(c[2]) + accesses(c[3])
    if c[0] == "!":
        return cond_accesses(c[1])
    return cond_accesses(c[1]) + cond_accesses(c[2])


def cond_params(c):
    """The names of the params a condition reads, left to right."""
    if c[0] == "cmp":
        return params_used(c[2]) + params_used(c[3])
    if c[0] == "!":
        return cond_params(c[1])
    return cond_params(c[1]) + cond_params(c[2])


def cond_str(c, prec=0):
    if c[0] == "cmp":
        return "%s %s %s" % (expr_str(c[2]), c[1], expr_str(c[3]))
    if c[0] == "!":
        return "!(%s)" % cond_str(c[1])
    p = 1 if c[0] == "||" else 2
    s = "%s %s %s" % (cond_str(c[1], p), c[0], cond_str(c[2], p + 1))
    return "(%s)" % s if p < prec else s


def accesses(e):
    """All access nodes of an expression, left to right."""
    if e[0] == "acc":
        return [e]
    if e[0] in ("num", "param"):
        return []
    if e[0] == "neg":
        return accesses(e[1])
    if e[0] == "call":
        return [a for x in e[2] for a in accesses(x)]
    return accesses(e[1]) + accesses(e[2])


def calls(e):
    """The names of the functions an expression calls, outermost first."""
    if e[0] in ("acc", "num", "param"):
        return []
    if e[0] == "call":
        return [e[1]] + [f for x in e[2] for f in calls(x)]
    return [f for x in e[1:] for f in calls(x)]


def params_used(e):
    """The names of the params an expression reads, left to right."""
    if e[0] == "param":
        return [e[1]]
    if e[0] in ("acc", "num"):
        return []
    if e[0] == "call":
        return [p for x in e[2] for p in params_used(x)]
    return [p for x in e[1:] for p in params_used(x)]


def expr_str(e, prec=0):
    k = e[0]
    if k == "acc":
        return e[1] + ("(%s)" % ", ".join(e[2]) if e[2] else "")
    if k == "num":
        return e[3] if len(e) > 3 else repr(e[1]) if not e[2] else str(e[1])
    if k == "neg":
        return "-" + expr_str(e[1], 3)
    if k == "param":
        return e[1]
    if k == "call":
        return "%s(%s)" % (e[1], ", ".join(expr_str(x) for x in e[2]))
    p = 1 if k in "+-" else 2
    s = "%s %s %s" % (expr_str(e[1], p), k, expr_str(e[2], p + 1))
    return "(%s)" % s if p < prec else s


# ---- parser ----------------------------------------------------------------------------


class _Parser:
    def __init__(self, text, path):
        self.toks = tokenize(text, path)
        self.i = 0
        self.path = path
        self.prog = Program(path)

    def peek(self, k=0):
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def next(self):
        t = self.toks[self.i]
        self.i += 1
        return t

    def error(self, tok, msg):
        raise DtlError("%s:%d:%d: %s (at %r)" % (self.path, tok.line, tok.col, msg, tok.text))

    def accept(self, text):
        if self.peek().text == text and self.peek().kind in ("op", "id"):
            return self.next()
        return None

    def expect(self, text):
        t = self.next()
        if t.text != text:
            self.error(t, "expected %r" % text)
        return t

    def ident(self):
        t = self.next()
        if t.kind != "id":
            self.error(t, "expected an identifier")
        return t.text

    def integer(self):
        t = self.next()
        if t.kind != "num" or not t.text.isdigit():
            self.error(t, "expected an integer")
        return self.int64(t)

    def int64(self, t, neg=False):
        """The value of the integer literal t (negated when neg); it must fit int64."""
        v = -int(t.text) if neg else int(t.text)
        if not INT64_MIN <= v <= INT64_MAX:
            self.error(t, "integer literal %s does not fit int64" % t.text)
        return v

    def size(self):
        t = self.next()
        if t.kind == "num" and t.text.isdigit():
            return self.int64(t)
        if t.kind == "id":
            return t.text
        self.error(t, "expected an integer or a param")

    def parse(self):
        self.block = self.prog.body  # where statements and loops go
        self.loop = None  # the loop being parsed
        while self.peek().kind != "eof":
            t = self.peek()
            if t.kind == "id" and t.text == "param":
                self.param_decl()
            elif t.kind == "id" and t.text == "machine":
                self.machine_decl()
            elif t.kind == "id" and t.text in ("tensor", "temp") and self.peek(1).kind == "id":
                self.tensor_decl()
            elif t.kind == "id" and t.text == "repeat" and self.peek(1).text not in ("(", "=", "+=", "-="):
                self.repeat()
            else:
                self.statement()
        self.check()
        return self.prog

    # param NAME [= INT | = FLOAT] ;
    def param_decl(self):
        self.expect("param")
        tok = self.peek()
        name = self.ident()
        default, is_float = None, False
        if self.accept("="):
            t = self.peek()
            if t.kind == "num" and not t.text.isdigit():
                self.next()
                default, is_float = float(t.text), True
                if math.isinf(default):
                    self.error(t, "floating literal %s is out of range" % t.text)
            else:
                default = self.integer()
        self.expect(";")
        if name in self.prog.params and not self.prog.params[name].is_grid:
            raise DtlError("%s: param %s declared twice" % (self.path, name))
        if name in self.prog.params:
            if is_float:
                self.error(tok, "grid param %s cannot be floating" % name)
            self.prog.params[name].default = default
        else:
            self.prog.params[name] = Param(name, default, is_float=is_float)

    # repeat E [until ( COND )] { (statement | repeat) ... }
    def repeat(self):
        start = self.expect("repeat")
        t = self.next()
        if t.kind == "num" and t.text.isdigit():
            bound = self.int64(t)
        elif t.kind == "id" and t.text in self.prog.params:
            if self.prog.params[t.text].is_float:
                self.error(t, "the bound of a loop must be an integer, %s is a floating param" % t.text)
            bound = t.text
        elif t.kind == "num":
            self.error(t, "the bound of a loop must be an integer literal or an integer param")
        else:
            self.error(t, "expected the most iterations of the loop (an integer or an integer param)")
        loop = Loop(bound, None, start.line, len(self.prog.loops) + 1, self.loop)
        self.prog.loops.append(loop)
        if self.accept("until"):
            self.expect("(")
            loop.cond = self.condition()
            self.expect(")")
        self.expect("{")
        self.block.append(loop)
        outer_block, outer_loop = self.block, self.loop
        self.block, self.loop = loop.body, loop
        while not self.accept("}"):
            t = self.peek()
            if t.kind == "eof":
                self.error(t, "missing '}' of the loop on line %d" % start.line)
            if t.kind == "id" and t.text in ("param", "machine", "tensor", "temp") and self.peek(1).kind == "id":
                self.error(t, "declarations are not allowed inside a loop")
            if t.kind == "id" and t.text == "repeat" and self.peek(1).text not in ("(", "=", "+=", "-="):
                self.repeat()
            else:
                self.statement()
        self.block, self.loop = outer_block, outer_loop

    # cond = and { || and };  and = not { && not };  not = ! not | ( cond ) | expr CMP expr
    def condition(self):
        c = self.cond_and()
        while self.accept("||"):
            c = ("||", c, self.cond_and())
        return c

    def cond_and(self):
        c = self.cond_not()
        while self.accept("&&"):
            c = ("&&", c, self.cond_not())
        return c

    CMP = ("<", "<=", ">", ">=", "==", "!=")

    def cond_not(self):
        if self.accept("!"):
            return ("!", self.cond_not())
        if self.peek().text == "(" and self.peek().kind == "op":
            save = self.i
            try:  # a parenthesized condition, unless an arithmetic operand starts here
                self.next()
                c = self.condition()
                self.expect(")")
                if self.peek().text not in self.CMP + ("+", "-", "*", "/"):
                    return c
            except DtlError:
                pass
            self.i = save
        a = self.expr()
        t = self.next()
        if t.text not in self.CMP:
            self.error(t, "expected a comparison (< <= > >= == !=)")
        return ("cmp", t.text, a, self.expr())

    # grid = (grid|Grid) ( SIZE, ... ) [: KIND]
    def grid(self):
        t = self.next()
        if t.text not in ("grid", "Grid"):
            self.error(t, "expected grid(...)")
        self.expect("(")
        toks = [self.peek()]
        dims = [self.size()]
        while self.accept(","):
            toks.append(self.peek())
            dims.append(self.size())
        self.expect(")")
        if self.accept(":"):
            self.ident()
        for d, tok in zip(dims, toks):
            if isinstance(d, str):
                if d in self.prog.params and self.prog.params[d].is_float:
                    self.error(tok, "floating param %s in a grid" % d)
                if d not in self.prog.params:
                    self.prog.params[d] = Param(d, None, True)
                else:
                    self.prog.params[d].is_grid = True
        return dims

    # machine M = grid | [ grid, ... ] ;
    def machine_decl(self):
        self.expect("machine")
        name = self.ident()
        self.expect("=")
        if self.accept("["):
            levels = [self.grid()]
            while self.accept(","):
                levels.append(self.grid())
            self.expect("]")
        else:
            levels = [self.grid()]
        self.expect(";")
        self.prog.machines[name] = Machine(name, levels)

    # (tensor | temp) NAME [( SIZE, ... )] [TYPE] [FORMAT] [@ DIST] ;
    def tensor_decl(self):
        temp = self.next().text == "temp"
        name = self.ident()
        dims = []
        if self.accept("("):
            dims.append(self.size())
            while self.accept(","):
                dims.append(self.size())
            self.expect(")")
        type_, fmt = None, None
        while True:  # the type and the format, each at most once, in either order
            t = self.peek()
            if t.text in DTYPES and t.kind == "id":
                if type_ is not None:
                    self.error(t, "type of %s given twice" % name)
                type_ = self.next().text
            elif (t.text in FORMAT_WORDS and t.kind == "id") or (t.text == "{" and t.kind == "op"):
                if fmt is not None:
                    self.error(t, "format of %s given twice" % name)
                fmt = self.level_formats(name, len(dims))
            else:
                break
        type_ = type_ or "double"
        dist = None
        if self.accept("@"):
            start = self.peek()
            parts, depth = [], 0
            while (self.peek().text != ";" or depth) and self.peek().kind != "eof":
                t = self.next()
                depth += {"(": 1, ")": -1}.get(t.text, 0) if t.kind == "op" else 0
                parts.append(t.text)
            # `balanced` / `balanced by T` after the mapping: blocks of about equal stored
            # entries, which change where data lives, not the result
            if len(parts) >= 3 and parts[-3] == "balanced" and parts[-2] == "by":
                parts = parts[:-3]
            elif parts and parts[-1] == "balanced":
                parts = parts[:-1]
            dist = " ".join(parts)
            if not parts:
                self.error(start, "expected a distribution")
            if len(parts) == 1 and parts[0] in self.prog.machines:
                # `@ M` with no mapping: at every level the leading dimensions are blocked
                # over the level's dimensions in order, replicated over the rest
                xs = ["abcdefgh"[k] for k in range(len(dims))]
                lvls = []
                for lvl in self.prog.machines[parts[0]].levels:
                    ys = [xs[k] if k < len(xs) else "*" for k in range(len(lvl))]
                    lvls.append("%s -> %s" % (" , ".join(xs), " , ".join(ys)))
                dist = "%s ( %s )" % (parts[0], " ; ".join(lvls))
        self.expect(";")
        if name in self.prog.decls:
            raise DtlError("%s: tensor %s declared twice" % (self.path, name))
        t = Tensor(name, dims, type_, dist, fmt, temp)
        self.prog.decls[name] = t
        (self.prog.temps if temp else self.prog.tensors)[name] = t

    # format = dense | compressed | csr | csf | { (dense|compressed), ... }
    def level_formats(self, name, order):
        """The level format of every dimension: a list of "dense" / "compressed"."""
        t = self.next()
        if t.text == "{":
            fmt = [self.ident()]
            while self.accept(","):
                fmt.append(self.ident())
            self.expect("}")
            for f in fmt:
                if f not in ("dense", "compressed"):
                    self.error(t, "expected 'dense' or 'compressed' in a format")
            if len(fmt) != order:
                self.error(t, "format has %d levels but %s has order %d" % (len(fmt), name, order))
            return fmt
        if t.text == "csr":
            if order != 2:
                self.error(t, "csr needs a tensor of order 2")
            return ["dense", "compressed"]
        return ["dense" if t.text == "dense" else "compressed"] * order

    # access = NAME [( [VAR, ...] )]
    def access(self):
        name = self.ident()
        vars_ = []
        if self.peek().text == "(":
            self.next()
            if not self.accept(")"):
                vars_.append(self.ident())
                while self.accept(","):
                    vars_.append(self.ident())
                self.expect(")")
        return name, vars_

    # stmt = access (= | +=) expr { . NAME ( balanced ) } ;
    def statement(self):
        line = self.peek().line
        lhs, lhs_vars = self.access()
        t = self.next()
        if t.text not in ("=", "+=", "-="):
            self.error(t, "expected '=', '+=' or '-='")
        rhs = self.expr()
        sched, sched_ids = [], []
        while self.peek().text == ".":
            self.next()
            cmd = self.ident()
            self.expect("(")
            depth, args = 1, []
            while depth:
                a = self.next()
                if a.kind == "eof":
                    self.error(a, "unbalanced parentheses in schedule")
                depth += {"(": 1, ")": -1}.get(a.text, 0) if a.kind == "op" else 0
                if depth:
                    args.append(a.text)
                    if a.kind == "id":
                        sched_ids.append(a)
            sched.append("%s(%s)" % (cmd, " ".join(args)))
        self.expect(";")
        st = Stmt(lhs, lhs_vars, t.text in ("+=", "-="), rhs, ".".join(sched), line, subtract=t.text == "-=")
        st.schedule_tokens = sched_ids
        st.loop = self.loop
        self.prog.stmts.append(st)
        self.block.append(st)

    # expr = term { (+|-) term }
    def expr(self):
        e = self.term()
        while self.peek().kind == "op" and self.peek().text in ("+", "-"):
            op = self.next().text
            e = (op, e, self.term())
        return e

    # term = unary { (*|/) unary }
    def term(self):
        e = self.unary()
        while self.peek().kind == "op" and self.peek().text in ("*", "/"):
            op = self.next().text
            e = (op, e, self.unary())
        return e

    # unary = - unary | primary
    def unary(self):
        if self.peek().kind == "op" and self.peek().text == "-":
            self.next()
            t = self.peek()
            if t.kind == "num" and t.text.isdigit() and int(t.text) == -INT64_MIN:
                self.next()  # -9223372036854775808: one literal (2^63 alone does not fit)
                return ("num", INT64_MIN, True, "-" + t.text)
            return ("neg", self.unary())
        return self.primary()

    # primary = NUM | access | ( expr )
    def primary(self):
        t = self.peek()
        if t.kind == "num":
            self.next()
            if re.fullmatch(r"[0-9]+", t.text):
                return ("num", self.int64(t), True, t.text)
            v = float(t.text)
            if math.isinf(v):
                self.error(t, "floating literal %s is out of range" % t.text)
            return ("num", v, False, t.text)
        if t.kind == "op" and t.text == "(":
            self.next()
            e = self.expr()
            self.expect(")")
            return e
        if t.kind == "id" and t.text in FUNCS and self.peek(1).text == "(" \
                and t.text not in self.prog.decls:
            return self.call()
        if t.kind == "id" and self.peek(1).text != "(" and t.text in self.prog.params \
                and t.text not in self.prog.decls:
            self.next()
            return ("param", t.text)
        if t.kind == "id":
            name, vars_ = self.access()
            return ("acc", name, tuple(vars_))
        self.error(t, "expected an expression")

    # call = FUNC ( expr, ... )
    def call(self):
        t = self.next()
        self.expect("(")
        args = []
        if not self.accept(")"):
            args.append(self.expr())
            while self.accept(","):
                args.append(self.expr())
            self.expect(")")
        if len(args) != FUNCS[t.text]:
            self.error(t, "%s takes %d arguments, %d given" % (t.text, FUNCS[t.text], len(args)))
        return ("call", t.text, tuple(args))

    def check(self):
        prog = self.prog
        for t in prog.decls.values():
            for d in t.dims:
                if isinstance(d, str) and d not in prog.params:
                    raise DtlError("%s: tensor %s: unknown param %s" % (self.path, t.name, d))
                if isinstance(d, str) and prog.params[d].is_float:
                    raise DtlError("%s: tensor %s: floating param %s in a shape" % (self.path, t.name, d))
        for s in prog.stmts:
            for name, vars_ in [(s.lhs, s.lhs_vars)] + [(a[1], a[2]) for a in accesses(s.rhs)]:
                if name not in prog.decls:
                    raise DtlError("%s:%d: unknown tensor %s" % (self.path, s.line, name))
                if len(vars_) != prog.decls[name].order:
                    raise DtlError("%s:%d: %s has order %d, accessed with %d indices"
                                   % (self.path, s.line, name, prog.decls[name].order, len(vars_)))
            if len(set(s.lhs_vars)) != len(s.lhs_vars):
                raise DtlError("%s:%d: repeated index variable on the left" % (self.path, s.line))
            out = prog.decls[s.lhs]
            if out.type in INT_RANGE:
                bad = [f for f in calls(s.rhs) if f not in INT_FUNCS]
                if bad:
                    raise DtlError("%s:%d: %s is not defined on integers (%s is %s)"
                                   % (self.path, s.line, bad[0], s.lhs, out.type))
                fl = [p for p in params_used(s.rhs) if prog.params[p].is_float]
                if fl:
                    raise DtlError("%s:%d: floating param %s in a statement of type %s"
                                   % (self.path, s.line, fl[0], out.type))
            if out.sparse and any(a[1] == s.lhs for a in accesses(s.rhs)):
                raise DtlError("%s:%d: %s is sparse; a statement may not read the sparse "
                               "tensor it writes" % (self.path, s.line, s.lhs))
            for tok in getattr(s, "schedule_tokens", ()):
                if tok.text in prog.params and prog.params[tok.text].is_float:
                    self.error(tok, "floating param %s in a schedule" % tok.text)
        for loop in prog.loops:
            for a in cond_accesses(loop.cond) if loop.cond else []:
                if a[1] not in prog.decls:
                    raise DtlError("%s:%d: unknown scalar %s in the condition" % (self.path, loop.line, a[1]))
                if a[2] or prog.decls[a[1]].order:
                    raise DtlError("%s:%d: the condition reads %s, which is not a scalar"
                                   % (self.path, loop.line, a[1]))
        self.check_temps(prog.body, set())

    def check_temps(self, items, written):
        """A temporary must be written (by an earlier statement in source order) before it
        is read; a loop's condition is read after its body."""
        prog = self.prog
        for item in items:
            if isinstance(item, Loop):
                self.check_temps(item.body, written)
                for a in cond_accesses(item.cond) if item.cond else []:
                    if a[1] in prog.temps and a[1] not in written:
                        raise DtlError("%s:%d: temporary %s is read before it is written"
                                       % (self.path, item.line, a[1]))
                continue
            reads = [a[1] for a in accesses(item.rhs)] + ([item.lhs] if item.accumulate else [])
            for name in reads:
                if name in prog.temps and name not in written:
                    raise DtlError("%s:%d: temporary %s is read before it is written"
                                   % (self.path, item.line, name))
            written.add(item.lhs)


def parse(text, path="<string>"):
    return _Parser(text, path).parse()


def parse_file(path):
    with open(path) as f:
        return parse(f.read(), path)


# ---- distributions -------------------------------------------------------------------


def _dist_side(tokens):
    """Entries of one side of `X -> Y`: compact (each character one entry) or with
    commas.  Entries are names, ints (fixed coordinates) or '*'."""
    if "," in tokens:
        items, cur = [], ""
        for t in tokens + [","]:
            if t == ",":
                items.append(cur)
                cur = ""
            else:
                cur += t
    else:
        items = list("".join(tokens))
    return [int(x) if x.isdigit() else x for x in items]


def dist_levels(tensor):
    """(machine name, [(X entries, Y entries) per level]) of a tensor's distribution, or
    None when it has none."""
    if tensor.dist_text is None:
        return None
    toks = tensor.dist_text.split(" ")
    if len(toks) < 4 or toks[1] != "(" or toks[-1] != ")":
        raise DtlError("tensor %s: bad distribution %r" % (tensor.name, tensor.dist_text))
    levels = []
    body = toks[2:-1]
    while body:
        n = body.index(";") if ";" in body else len(body)
        lvl, body = body[:n], body[n + 1:]
        if lvl.count("->") != 1:
            raise DtlError("tensor %s: a level needs one '->'" % tensor.name)
        a = lvl.index("->")
        levels.append((_dist_side(lvl[:a]), _dist_side(lvl[a + 1:])))
    return toks[0], levels


def check_distributions(prog, params=None):
    """The rules of LANGUAGE.md section 3 for every distribution; raises DtlError."""
    for t in prog.decls.values():
        d = dist_levels(t)
        if d is None:
            continue
        mname, levels = d
        if mname not in prog.machines:
            raise DtlError("tensor %s: no machine named %s" % (t.name, mname))
        m = prog.machines[mname]
        if len(levels) > len(m.levels):
            raise DtlError("tensor %s: more levels than machine %s has" % (t.name, mname))
        for n, (x, y) in enumerate(levels):
            if n == 0 and len(x) != t.order:
                raise DtlError("tensor %s: |X| = %d, order %d" % (t.name, len(x), t.order))
            if len(y) != len(m.levels[n]):
                raise DtlError("tensor %s: |Y| = %d, machine level has %d dims"
                               % (t.name, len(y), len(m.levels[n])))
            if any(not isinstance(e, str) for e in x) or len(set(x)) != len(x):
                raise DtlError("tensor %s: X must be distinct names" % t.name)
            names = [e for e in y if isinstance(e, str) and e != "*"]
            if len(set(names)) != len(names) or not set(names) <= set(x):
                raise DtlError("tensor %s: Y names must be distinct names of X" % t.name)
            for e, dim in zip(y, m.levels[n]):
                if isinstance(e, int) and params is not None:
                    size = prog.size(dim, params) if isinstance(dim, int) or params.get(dim) else None
                    if size is not None and e >= size:
                        raise DtlError("tensor %s: coordinate %d outside a machine dim of %d"
                                       % (t.name, e, size))


# ---- evaluation ----------------------------------------------------------------------


def _align(arr, vars_, union, extents):
    """View arr (axes named by the distinct vars_) with axes in the order of union,
    size-1 axes for the vars it lacks."""
    perm = sorted(range(len(vars_)), key=lambda a: union.index(vars_[a]))
    arr = np.transpose(arr, perm) if perm != list(range(len(vars_))) else arr
    present = set(vars_)
    return np.reshape(arr, tuple(extents[v] if v in present else 1 for v in union))


def _c_div(a, b):
    """Division of the C language: integers truncate toward zero; a zero divisor gives 0 and
    the most negative value over -1 gives itself (README, "Choices": distal's division is
    defined for every divisor)."""
    if np.issubdtype(np.result_type(a, b), np.integer):
        rt = np.result_type(a, b)
        bits = np.iinfo(rt).bits

        def one(x, y):
            if y == 0:
                return 0
            q = abs(x) // abs(y)
            q = -q if (x < 0) != (y < 0) else q
            return ((q + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1))
        q = np.vectorize(one, otypes=[object])(np.asarray(a).astype(object), np.asarray(b).astype(object))
        return np.asarray(q).astype(rt)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.true_divide(a, b)


def _store_cast(x, dtype):
    x = np.asarray(x)
    if np.issubdtype(dtype, np.integer) and not np.issubdtype(x.dtype, np.integer):
        x = np.trunc(x)
    return x.astype(dtype)


def float32_nearest(text):
    """The float32 nearest to the decimal literal text (ties to even): one rounding, as C
    reads "0.1f" (NumPy would round to double first).  Infinite beyond float's range."""
    x = Fraction(text)
    if abs(x) >= Fraction(2 ** 128 - 2 ** 103):  # FLT_MAX plus half an ulp: rounds to inf
        return np.float32(math.copysign(math.inf, x))
    c = np.float32(float(x))  # within one ulp of the nearest
    with np.errstate(over="ignore"):
        cands = [np.nextafter(c, np.float32(-math.inf)), c, np.nextafter(c, np.float32(math.inf))]
    cands = [f for f in cands if not np.isinf(f)]

    def key(f):
        return (abs(Fraction(float(f)) - x), int(np.asarray(f).view(np.int32)) & 1)
    return min(cands, key=key)


def literal_value(e, type_):
    """A literal node's value in a statement of type_ (see the module's docstring)."""
    v, is_int, text = e[1], e[2], e[3] if len(e) > 3 else repr(e[1])
    if type_ in INT_RANGE:
        lo, hi = INT_RANGE[type_]
        iv = v if is_int else (math.trunc(v) if math.isfinite(v) else None)
        if iv is None or not lo <= iv <= hi:
            raise DtlError("literal %s does not fit %s" % (text, type_))
        return DTYPES[type_].type(iv)
    if type_ == "float":
        f = float32_nearest(text)
        if np.isinf(f):
            raise DtlError("literal %s is out of the range of float" % text)
        return f
    return np.float64(float(v))  # float(int) rounds correctly


def param_value(value, type_):
    """A param's value (an int64, or a double for a floating param) in a statement of
    type_: as C converts int64_t or double."""
    if isinstance(value, float):
        if type_ in INT_RANGE:
            raise DtlError("floating param in a statement of type %s" % type_)
        return np.float64(value).astype(DTYPES[type_])
    return np.array(value, dtype=np.int64).astype(DTYPES[type_])[()]


def typed_literals(e, type_, params=None):
    """The expression with every literal replaced by its value in type_, and every param
    by its value (params: name -> value) in type_."""
    if e[0] == "num":
        return ("num", literal_value(e, type_), e[2]) + tuple(e[3:])
    if e[0] == "param":
        if params is None or params.get(e[1]) is None:
            raise DtlError("param %s has no value" % e[1])
        v = param_value(params[e[1]], type_)
        return ("num", v, type_ in INT_RANGE, e[1])
    if e[0] == "acc":
        return e
    if e[0] == "call":
        return ("call", e[1], tuple(typed_literals(x, type_, params) for x in e[2]))
    return (e[0],) + tuple(typed_literals(x, type_, params) for x in e[1:])


def var_extents(prog, stmt, params):
    """Extent of every index variable of a statement; conflicting extents are an error."""
    ext = {}
    for name, vars_ in [(stmt.lhs, stmt.lhs_vars)] + [(a[1], a[2]) for a in accesses(stmt.rhs)]:
        for v, n in zip(vars_, prog.shape(name, params)):
            if ext.setdefault(v, n) != n:
                raise DtlError("%s:%d: index variable %s has conflicting extents %d and %d"
                               % (prog.path, stmt.line, v, ext[v], n))
    return ext


def summed_vars(stmt):
    """Variables that appear only on the right side, in order of first appearance."""
    out = []
    for a in accesses(stmt.rhs):
        for v in a[2]:
            if v not in stmt.lhs_vars and v not in out:
                out.append(v)
    return out


def _count(e, counts):
    for a in accesses(e):
        for v in a[2]:
            counts[v] = counts.get(v, 0) + 1
    return counts


_ERF = np.vectorize(math.erf, otypes=[np.float64])


def _func_arg(v, type_):
    """A function's argument converted to the type the function computes in: the
    statement's type, or int64 for an integer statement (the C code calls llabs, dtl_min
    and dtl_max, whose parameters are int64_t; floating values truncate toward zero)."""
    v = np.asarray(v)
    if type_ in INT_RANGE:
        if not np.issubdtype(v.dtype, np.integer):
            v = np.trunc(v)
        return v.astype(np.int64)
    return v.astype(DTYPES[type_])


def _apply(f, args, mags, type_):
    """Value and magnitude of the function f of args (already aligned).  The magnitude
    bounds the error a result inherits from its arguments' (to first order: the
    derivative times the argument's magnitude) plus its own rounding."""
    x = [_func_arg(a, type_) for a in args]
    with np.errstate(all="ignore"):
        if f == "sqrt":
            val = np.sqrt(x[0])
        elif f == "exp":
            val = np.exp(x[0])
        elif f == "log":
            val = np.log(x[0])
        elif f == "abs":
            val = np.abs(x[0])
        elif f == "erf":
            val = _ERF(x[0]).astype(x[0].dtype)
        elif f == "pow":
            val = np.power(x[0], x[1])
        elif f == "min":
            val = np.minimum(x[0], x[1]) if type_ in INT_RANGE else np.fmin(x[0], x[1])
        else:
            val = np.maximum(x[0], x[1]) if type_ in INT_RANGE else np.fmax(x[0], x[1])
        if type_ in INT_RANGE:
            val = val.astype(DTYPES[type_])
        fv = np.abs(np.asarray(val, dtype=np.float64))
        a = [np.asarray(v, dtype=np.float64) for v in x]
        m = [np.asarray(q, dtype=np.float64) for q in mags]

        def term(mag, factor):  # factor * mag, 0 where the argument is exact
            return np.where(mag == 0, 0.0, np.abs(factor) * mag)
        if f == "sqrt":
            mag = fv + term(m[0], 0.5 / np.sqrt(np.abs(a[0])))
        elif f == "exp":
            mag = fv * (1 + m[0])
        elif f == "log":
            mag = fv + term(m[0], 1 / a[0])
        elif f == "abs":
            mag = m[0]
        elif f == "erf":  # the derivative at the argument: 2/sqrt(pi) exp(-x^2)
            mag = fv + term(m[0], 1.1284 * np.exp(-a[0] * a[0]))
        elif f == "pow":
            mag = fv + term(m[0], a[1] * fv / a[0]) + term(m[1], fv * np.log(np.abs(a[0])))
        else:
            # the selected argument's, or both where rounding could select the other
            rt = 10 * max(RTOL.get(type_, 0.0), 1e-15)
            close = np.abs(a[0] - a[1]) <= rt * (m[0] + m[1])
            first = (a[0] <= a[1]) if f == "min" else (a[0] >= a[1])
            mag = np.where(close, np.maximum(m[0], m[1]), np.where(first, m[0], m[1]))
    return val, mag


def eval_expr(e, env, mags, extents, summed, totals, type_="double", inner=False):
    """Evaluate e in a statement of type type_.  Returns (value, magnitude, vars): arrays
    whose axes are the distinct free variables vars.  A summed variable is reduced at the
    first (smallest) node whose subtree holds all of its occurrences, but never inside a
    function's arguments (inner): there the call encloses the reduction; and where that node
    is a sum or difference, in each of its operands that holds occurrences (term by term)."""
    k = e[0]
    if k == "acc":
        arr, mag = env[e[1]], mags[e[1]]
        vars_ = list(e[2])
        uniq = list(dict.fromkeys(vars_))
        if len(uniq) != len(vars_):  # repeated variable: a diagonal
            letters = {v: chr(ord("a") + n) for n, v in enumerate(uniq)}
            sub = "".join(letters[v] for v in vars_) + "->" + "".join(letters[v] for v in uniq)
            arr, mag = np.einsum(sub, arr), np.einsum(sub, mag)
        val, mag, vars_ = np.asarray(arr), np.asarray(mag), uniq
        # an operand of another type computes in the statement's: converted to a floating
        # statement's type, an int32 one widened in an int64 statement (others as C promotes)
        if (type_ in ("double", "float") and val.dtype != DTYPES[type_]) or (type_ == "int64" and val.dtype == np.int32):
            if type_ == "double" and e[1] in _ROUNDED_FLOATS:
                # a float that a statement computed carries float rounding into the double
                # statement: its magnitude counts at the float's tolerance
                mag = np.asarray(mag) * (RTOL["float"] / RTOL["double"])
            val = val.astype(DTYPES[type_])
    elif k == "num":
        val, mag, vars_ = e[1], np.float64(abs(float(e[1]))), []
    elif k == "neg":
        v, m, vars_ = eval_expr(e[1], env, mags, extents, summed, totals, type_, inner)
        val, mag = -v, m
    elif k == "call":
        parts = [eval_expr(x, env, mags, extents, summed, totals, type_, True) for x in e[2]]
        vars_ = []
        for _, _, xs in parts:
            vars_ += [v for v in xs if v not in vars_]
        shape = tuple(extents[v] for v in vars_)
        args, amags = [], []
        for v, m, xs in parts:
            if isinstance(v, np.ndarray) and v.ndim:
                v, m = _align(v, xs, vars_, extents), _align(m, xs, vars_, extents)
            args.append(np.broadcast_to(v, shape) if shape else v)
            amags.append(np.broadcast_to(m, shape) if shape else m)
        val, mag = _apply(e[1], args, amags, type_)
    else:
        ta, tb = totals, totals
        if k in "+-" and not inner:
            # a sum of terms is summed term by term: a variable whose occurrences are all
            # here is reduced in each operand that holds some (a term without counts once)
            here = _count(e, {})
            ca, cb = _count(e[1], {}), _count(e[2], {})
            ta, tb = dict(totals), dict(totals)
            for v in summed:
                if here.get(v, 0) and here.get(v, 0) == totals.get(v):
                    ta[v], tb[v] = ca.get(v, 0), cb.get(v, 0)
        va, ma, xa = eval_expr(e[1], env, mags, extents, summed, ta, type_, inner)
        vb, mb, xb = eval_expr(e[2], env, mags, extents, summed, tb, type_, inner)
        vars_ = xa + [v for v in xb if v not in xa]
        if isinstance(va, np.ndarray):
            va, ma = _align(va, xa, vars_, extents), _align(ma, xa, vars_, extents)
        if isinstance(vb, np.ndarray):
            vb, mb = _align(vb, xb, vars_, extents), _align(mb, xb, vars_, extents)
        if k == "+":
            val, mag = va + vb, ma + mb
        elif k == "-":
            val, mag = va - vb, ma + mb
        elif k == "*":
            # the error of a product is |a| err(b) + |b| err(a) to first order: where a
            # side has cancelled (its value far below its magnitude), that is the smaller
            # bound, and it keeps loops that multiply computed values from inflating it
            val = va * vb
            with np.errstate(over="ignore", invalid="ignore"):
                fa, fb = np.abs(np.asarray(va, dtype=np.float64)), np.abs(np.asarray(vb, dtype=np.float64))
                mag = np.minimum(ma * mb, fa * mb + fb * ma)
        else:
            val = _c_div(va, vb)
            with np.errstate(divide="ignore", invalid="ignore"):
                absb = np.abs(np.asarray(vb, dtype=np.float64))
                mag = (ma + np.abs(np.asarray(val, dtype=np.float64)) * mb) / absb
        if isinstance(val, np.ndarray) and val.ndim:
            shape = tuple(extents[v] for v in vars_)
            val, mag = np.broadcast_to(val, shape), np.broadcast_to(mag, shape)
    # an unknown bound (0 times an infinite one: sqrt's at 0) is no bound
    mag = np.where(np.isnan(mag), np.inf, mag) if np.any(np.isnan(mag)) else mag
    here = _count(e, {})
    red = [] if inner else [v for v in vars_ if v in summed and here.get(v, 0) == totals[v]]
    if red:
        axes = tuple(vars_.index(v) for v in red)
        val = np.asarray(val)
        dt = val.dtype
        val = val.sum(axis=axes, dtype=dt)
        mag = np.asarray(mag).sum(axis=axes, dtype=np.float64)
        vars_ = [v for v in vars_ if v not in red]
    return val, mag, vars_


# the float tensors that a statement of the program being executed has written (execute)
_ROUNDED_FLOATS = set()


def run_stmt(prog, stmt, params, env, mags):
    """Execute one statement on env (tensor values) and mags (their magnitudes)."""
    extents = var_extents(prog, stmt, params)
    summed = summed_vars(stmt)
    totals = _count(stmt.rhs, {})
    t = prog.decls[stmt.lhs]
    rhs = typed_literals(("neg", stmt.rhs) if stmt.subtract else stmt.rhs, t.type, params)
    val, mag, vars_ = eval_expr(rhs, env, mags, extents, summed, totals, t.type)
    shape = tuple(extents[v] for v in stmt.lhs_vars)
    lhs = list(stmt.lhs_vars)
    val = np.broadcast_to(_align(np.asarray(val), vars_, lhs, extents), shape)
    mag = np.broadcast_to(_align(np.asarray(mag, dtype=np.float64), vars_, lhs, extents), shape)
    if t.type == "float":
        _ROUNDED_FLOATS.add(t.name)
    if stmt.accumulate:
        env[t.name] = _store_cast(env[t.name] + val, t.dtype)
        mags[t.name] = mags[t.name] + mag
    else:
        env[t.name] = _store_cast(val, t.dtype)
        mags[t.name] = np.array(mag, dtype=np.float64)


class Outcome:
    """What the oracle computed for a program: values and magnitudes (name -> array, for
    every tensor and temporary), the iteration count (the top-level loops' iterations,
    summed: what executables print as iterations=K), the iterations of every execution
    of every loop (loop number -> list), the monitor records (loop number, iteration,
    [(scalar, value)]) in the order --monitor prints them (and their values' magnitudes),
    and the borderline condition
    evaluations (messages)."""

    def __init__(self, values, mags):
        self.values, self.mags = values, mags
        self.iterations = 0
        self.loop_iterations = {}
        self.monitor = []
        self.monitor_mags = []  # the magnitudes of the monitor records' values
        self.borderline = []


def _cond_value(e, env, mags, params):
    """(value, magnitude, rtol) of a condition's arithmetic, with C's arithmetic: Python
    ints for integer values (int64), floats (doubles) for the rest."""
    k = e[0]
    if k == "acc":
        v = np.asarray(env[e[1]])[()]
        t = np.asarray(env[e[1]]).dtype
        if np.issubdtype(t, np.integer):
            return int(v), 0.0, 0.0
        rt = RTOL["float" if t == np.float32 else "double"]
        return float(v), float(np.asarray(mags[e[1]])[()]), rt
    if k == "num":
        return (e[1] if e[2] else float(e[1])), 0.0, 0.0
    if k == "param":
        v = params.get(e[1])
        if v is None:
            raise DtlError("param %s has no value" % e[1])
        return v, 0.0, 0.0
    if k == "neg":
        v, m, r = _cond_value(e[1], env, mags, params)
        return -v, m, r
    if k == "call":
        parts = [_cond_value(x, env, mags, params) for x in e[2]]
        x = [float(p[0]) for p in parts]
        r = max(p[2] for p in parts)
        f = e[1]
        try:
            if f == "sqrt":
                v = math.sqrt(x[0]) if x[0] >= 0 else math.nan
            elif f == "exp":
                v = math.exp(x[0]) if x[0] < 709 else math.inf
            elif f == "log":
                v = math.log(x[0]) if x[0] > 0 else (-math.inf if x[0] == 0 else math.nan)
            elif f == "abs":
                v = abs(x[0])
            elif f == "erf":
                v = math.erf(x[0])
            elif f == "pow":
                v = math.pow(x[0], x[1])
            elif f == "min":
                v = min(x)
            else:
                v = max(x)
        except (OverflowError, ValueError):
            v = math.nan
        # the same first-order bound as the statements' (see _apply)
        val, mag = _apply(f, [np.float64(q) for q in x], [np.float64(p[1]) for p in parts], "double")
        return v, float(mag), r
    a, ma, ra = _cond_value(e[1], env, mags, params)
    b, mb, rb = _cond_value(e[2], env, mags, params)
    r = max(ra, rb)
    if k == "+":
        return a + b, ma + mb, r
    if k == "-":
        return a - b, ma + mb, r
    if k == "*":
        return a * b, min(ma * mb, ma * abs(b) + mb * abs(a)) if ma and mb else ma * abs(b) + mb * abs(a), r
    if isinstance(a, int) and isinstance(b, int):
        if b == 0:  # defined: 0 (README, "Choices")
            return 0, 0.0, r
        q = abs(a) // abs(b)
        q = -q if (a < 0) != (b < 0) else q
        return ((q + (1 << 63)) % (1 << 64)) - (1 << 63), 0.0, r
    if b == 0:
        v = math.nan if a == 0 else math.copysign(math.inf, a) * math.copysign(1, b)
        return v, math.inf, r
    v = a / b
    return v, (ma + abs(v) * mb) / abs(b), r


_CMP = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
        ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}


def eval_cond(c, env, mags, params, borderline=None):
    """The truth of a condition.  borderline (a list): gets a message for every
    comparison whose sides differ by less than their rounding error may."""
    if c[0] == "cmp":
        a, ma, ra = _cond_value(c[2], env, mags, params)
        b, mb, rb = _cond_value(c[3], env, mags, params)
        if isinstance(a, int) != isinstance(b, int):  # as C: the integer side converted to double
            a, b = float(a), float(b)
        # the sides' own magnitudes, and ten times the tolerance of the results: a value
        # that the distributed run computes in another order may differ by that much
        tol = 10 * max(ra, rb) * (ma + mb)
        tol = math.inf if math.isnan(tol) else tol
        if borderline is not None and ((tol > 0 and abs(a - b) <= tol)
                                       or not (math.isfinite(a) and math.isfinite(b))):
            borderline.append("%s: %r against %r (tolerance %.3g)" % (cond_str(c), a, b, tol))
        return _CMP[c[1]](a, b)
    if c[0] == "!":
        return not eval_cond(c[1], env, mags, params, borderline)
    x = eval_cond(c[1], env, mags, params, borderline)
    if c[0] == "&&":
        return x and eval_cond(c[2], env, mags, params, borderline)
    return x or eval_cond(c[2], env, mags, params, borderline)


def loop_bound(prog, loop, params):
    if isinstance(loop.bound, int):
        return loop.bound
    v = params.get(loop.bound)
    if v is None:
        raise DtlError("%s: param %s has no value" % (prog.path, loop.bound))
    return max(0, int(v))


def _run_items(prog, items, params, env, mags, out):
    """Run statements and loops; returns the iterations of the loops among items."""
    total = 0
    for item in items:
        if isinstance(item, Stmt):
            run_stmt(prog, item, params, env, mags)
            continue
        n = 0
        limit = loop_bound(prog, item, params)
        while n < limit:
            _run_items(prog, item.body, params, env, mags, out)
            n += 1
            if item.cond is not None:
                border = []
                done = eval_cond(item.cond, env, mags, params, border)
                out.borderline += ["loop %d iteration %d: %s" % (item.number, n, b) for b in border]
                out.monitor.append((item.number, n, [(name, np.asarray(env[name]).item())
                                                     for name in item.cond_scalars()]))
                out.monitor_mags.append([float(np.asarray(mags[name]).item()) for name in item.cond_scalars()])
                if done:
                    break
            else:
                out.monitor.append((item.number, n, []))
                out.monitor_mags.append([])
        out.loop_iterations.setdefault(item.number, []).append(n)
        total += n
    return total


def execute(prog, params, inputs):
    """Run the program.  params: param values (see Program.param_values); inputs:
    tensor name -> array (tensors not given, and temporaries, start as zeros).  Returns
    an Outcome."""
    env, mags = {}, {}
    _ROUNDED_FLOATS.clear()
    for name, t in prog.decls.items():
        shape = prog.shape(name, params)
        if name in inputs and name not in prog.temps:
            a = np.asarray(inputs[name])
            if a.shape != shape:
                raise DtlError("input %s has shape %s, expected %s" % (name, a.shape, shape))
            env[name] = a.astype(t.dtype, copy=True)
        else:
            env[name] = np.zeros(shape, t.dtype)
        mags[name] = np.abs(env[name].astype(np.float64))
    out = Outcome(env, mags)
    out.iterations = _run_items(prog, prog.body, params, env, mags, out)
    return out


def evaluate(prog, params, inputs):
    """Run the program (see execute).  Returns (values, magnitudes), dicts of arrays for
    every tensor and temporary."""
    out = execute(prog, params, inputs)
    return out.values, out.mags


def monitor_line(record):
    """The line --monitor prints for a monitor record of an Outcome."""
    number, k, values = record
    # an integer scalar as an integer, a floating one in %e (as the executables print them)
    return "monitor: loop %d iteration %d%s" % (number, k, ":" + "".join(
        (" %s=%d" if isinstance(v, (int, np.integer)) else " %s=%.6e") % (name, v) for name, v in values)
        if values else "")


def random_inputs(prog, params, rng, names=None):
    """Random arrays for tensors: float uniform in [-1, 1), integers in [-4, 4]."""
    out = {}
    for name in names if names is not None else prog.tensors:
        t = prog.tensors[name]
        shape = prog.shape(name, params)
        if np.issubdtype(t.dtype, np.integer):
            a = rng.integers(-4, 5, size=shape).astype(t.dtype)
        else:
            a = rng.uniform(-1.0, 1.0, size=shape).astype(t.dtype)
        out[name] = np.asarray(a)
    return out


def compare(tensor, got, want, mag, exact=False):
    """Check got against the oracle.  Returns None when it matches, else a message.
    exact: floating-point results too must be equal (no tolerance)."""
    got = np.asarray(got)
    if got.dtype != tensor.dtype:
        return "%s: dtype %s, expected %s" % (tensor.name, got.dtype, tensor.dtype)
    if got.shape != want.shape:
        return "%s: shape %s, expected %s" % (tensor.name, got.shape, want.shape)
    if np.issubdtype(tensor.dtype, np.integer) or exact:
        bad = (got != want) & ~(np.isnan(got) & np.isnan(want) if not np.issubdtype(tensor.dtype, np.integer) else False)
        tol = np.zeros(want.shape)
    else:  # (NaN where the oracle has NaN matches: the same computation)
        g, w = got.astype(np.float64), want.astype(np.float64)
        tol = RTOL[tensor.type] * np.asarray(mag) + 1e-300
        with np.errstate(invalid="ignore"):
            bad = ~((np.abs(g - w) <= tol) | (g == w) | (np.isnan(g) & np.isnan(w)))
    nbad = int(np.count_nonzero(bad))
    if not nbad:
        return None
    idx = tuple(int(x) for x in np.argwhere(bad)[0]) if got.ndim else ()
    return "%s: %d of %d elements differ; first at %s: got %r, expected %r (tolerance %.3g)" % (
        tensor.name, nbad, max(1, want.size), list(idx), got[idx].item(), want[idx].item(),
        float(np.asarray(tol)[idx]))
