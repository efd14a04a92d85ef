#!/usr/bin/env python3
"""limits.py -- distalc has no fixed limits: generated programs far beyond what people
write (hundreds of tensors in one statement, a product of 40 tensors, hundreds of
statements, hundreds of schedule commands on one statement, long chains of splits of
splits, 20+ nested loops over an order-8 tensor, hundreds of params, 8 precompute
workspaces in one statement, divide factors up to 2^63 - 1).

Each program is compiled with `$DISTALC FILE --exe`, run under mpirun at 1, 2, 3 and 4
ranks with --validate (the serial recomputation must agree) and its saved results are
compared with the NumPy oracle (dtl.py).  Every program also goes through the whole
compiler under AddressSanitizer and UBSan when the build has the libFuzzer target
(tests/fuzz/fuzz_frontend runs each file given to it once).  Inputs beyond the
documented limits (order 9, a machine of 9 grid dims, an identifier of 129 characters)
must be located errors: `FILE:LINE:COL: error: ...` with the limit in the message, exit
status 1 and no crash.

usage: limits.py [--keep] [--ranks 1,2,3,4]
Environment as for run_e2e.py (make check sets it).  Prints PASS/FAIL per check and
`N passed, M failed`; exits 1 if anything failed.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
import dtl  # noqa: E402
import run_e2e  # noqa: E402  (environment defaults)

run_e2e.setup_environment()
# gcc -O3 takes minutes over the C of 300 statements; what is tested here is distalc
os.environ["DISTAL_CFLAGS"] = os.environ.get("DISTAL_CFLAGS", "") + " -O0"
DISTALC = run_e2e.DISTALC
MPIRUN = run_e2e.MPIRUN
TOP_BUILDDIR = run_e2e.TOP_BUILDDIR
FUZZ = os.path.join(TOP_BUILDDIR, "tests", "fuzz", "fuzz_frontend")

# ---- the programs ----------------------------------------------------------------------


def chained_sum(nt=300):
    """nt statements in a chain (each reads the previous result), then one statement
    summing all nt tensors: nt + 1 statements, nt + 2 tensors."""
    L = ["param n = 7;", "machine M = grid(g);", "tensor X(n) @ M(x -> x);",
         "tensor A(n) @ M(x -> x);"]
    L += ["tensor B%d(n)%s;" % (k, " @ M(x -> x)" if k % 3 else "") for k in range(nt)]
    L.append("B0(i) = X(i) + 1;")
    for k in range(1, nt):
        sched = "\n  .distribute({i}, {io}, {ii}, M)" if k % 2 else ""
        L.append("B%d(i) = B%d(i) * 0.5 + X(i)%s;" % (k, k - 1, sched))
    L.append("A(i) = " + " + ".join("B%d(i)" % k for k in range(nt)) +
             "\n  .distribute({i}, {io}, {ii}, M)\n  .communicate({%s}, io);"
             % ", ".join(["A"] + ["B%d" % k for k in range(nt)]))
    return "\n".join(L) + "\n", {"X"}, ["A", "B%d" % (nt - 1)]


def product(nf=40):
    """A product of nf tensors summed over j, the factors made by nf statements."""
    L = ["param n = 6;", "param m = 3;", "machine M = grid(g);", "tensor X(n, m) @ M(xy -> x);",
         "tensor P(n) @ M(x -> x);"]
    L += ["tensor C%d(n, m)%s;" % (k, " @ M(xy -> x)" if k % 2 else "") for k in range(nf)]
    for k in range(nf):
        L.append("C%d(i, j) = X(i, j) * 0.25 + %d.%d;" % (k, 1 + k % 2, k % 10))
    L.append("P(i) = " + " * ".join("C%d(i, j)" % k for k in range(nf)) +
             "\n  .distribute({i}, {io}, {ii}, M)\n  .split(j, jo, ji, 2);")
    return "\n".join(L) + "\n", {"X"}, ["P"]


def many_commands(nsplit=100, nreorder=100):
    """One statement with nsplit splits of splits (a nest of nsplit + 2 loops) and
    nreorder reorders moving loops back and forth: nsplit + nreorder + 1 commands."""
    L = ["param n = 37;", "machine M = grid(g);", "tensor a(n) @ M(x -> x);",
         "tensor b(n) @ M(x -> x);", "tensor c(n);", "a(i) = b(i) * c(i) + 1",
         "  .distribute({i}, {io}, {ii}, M)", "  .split(ii, o0, r0, 3)"]
    outer = "o0"
    for k in range(1, nsplit):
        # split the outer loop, or the last inner one, by 1 (the iteration count stays)
        if k % 2:
            L.append("  .split(%s, o%d, r%d, 1)" % (outer, k, k))
            outer = "o%d" % k
        else:
            L.append("  .split(r%d, o%d, r%d, 1)" % (k - 2 if k > 1 else 0, k, k))
    for k in range(nreorder):
        L.append("  .reorder({%s})" % ("r1, r3" if k % 2 == 0 else "r3, r1"))
    L[-1] += ";"
    return "\n".join(L) + "\n", {"b", "c"}, ["a"]


def order8():
    """An order-8 tensor reduced along 7 dims, each split, and an elementwise statement
    over all 8 (8 + 2 distributed + 7 and more split loops: 20+ nested loops)."""
    v = "abcdefgh"
    dims = ", ".join(["2"] * 7 + ["n"])
    L = ["param n = 3;", "machine M = grid(q);",
         "tensor U(%s) @ M(abcdefgh -> a);" % dims, "tensor T(%s) @ M(abcdefgh -> a);" % dims,
         "tensor w(2) @ M(x -> x);", "tensor s(n);"]
    idx = ", ".join(v)
    L.append("T(%s) = U(%s) * 2 + s(h)\n  .distribute({a}, {ao}, {ai}, M)" % (idx, idx) +
             "".join("\n  .split(%s, %so, %si, 1)" % (x, x, x) for x in v[1:]) +
             "".join("\n  .split(%si, %sp, %sq, 2)" % (x, x, x) for x in v[1:5]) +
             "\n  .communicate({T, U, s}, ao);")
    L.append("w(a) = U(%s)\n  .distribute({a}, {ao}, {ai}, M)" % idx +
             "".join("\n  .split(%s, %so, %si, 1)" % (x, x, x) for x in v[1:]) +
             "".join("\n  .split(%so, %sp, %sq, 1)" % (x, x, x) for x in v[1:]) + ";")
    return "\n".join(L) + "\n", {"U", "s"}, ["T", "w"]


def many_params(np_=300):
    """np_ params; tensors, machine and split factors use some, the run sets some."""
    L = ["param p%d = %d;" % (k, 2 + k % 5) for k in range(np_)]
    L += ["machine M = grid(p%d);" % (np_ - 1), "tensor A(p3, p7) @ M(xy -> x);",
          "tensor B(p3, p7) @ M(xy -> x);", "tensor c(p7);", "tensor y(p3) @ M(x -> x);"]
    L.append("y(i) = A(i, j) * c(j) + B(i, j)\n  .distribute({i}, {io}, {ii}, M)\n"
             "  .split(j, jo, ji, p%d)\n  .split(ii, i1, i2, p200);" % (np_ - 2))
    return "\n".join(L) + "\n", {"A", "B", "c"}, ["y"]


def precomputes(nw=8):
    """nw precompute workspaces in one statement."""
    L = ["param n = 5;", "tensor a(n);"] + ["tensor b%d(n);" % k for k in range(nw)]
    L.append("a(i) = " + " + ".join("b%d(i) * b%d(i)" % (k, k) for k in range(nw)) +
             "".join("\n  .precompute(b%d(i) * b%d(i), i, iw%d, w%d)" % (k, k, k, k) for k in range(nw)) + ";")
    return "\n".join(L) + "\n", {"b%d" % k for k in range(nw)}, ["a"]


def long_names():
    """Every kind of name at the limit, 128 characters."""
    T, W, P, V = "T" * 128, "w" * 128, "p" * 128, "v" * 128
    text = ("param %s = 5;\nmachine M = grid(g);\ntensor %s(%s) @ M(x -> x);\ntensor %s(%s) @ M(x -> x);\n"
            "%s(%s) = %s(%s) * 2\n  .distribute({%s}, {%so}, {%si}, M);\n"
            % (P, T, P, W, P, T, V, W, V, V, V[:-1], V[:-1]))
    return text, {W}, [T]


def huge_factors():
    """divide by factors far above the extents (every block past the extent empty): the
    loops run what the data needs, not the factor's count of empty steps, one of them with a
    communicate at each step."""
    text = ("param n = 7;\nmachine M = grid(g);\ntensor a(n) @ M(i -> i);\ntensor B(n, n) @ M(ij -> i);\n"
            "tensor x(n);\ntensor b(n);\n"
            "a(i) = B(i, j) * x(j)\n  .distribute(i)\n  .divide(j, jo, ji, 9223372036854775807)\n  .communicate(x, jo);\n"
            "b(i) = x(i) * 2\n  .divide(i, io, ii, 1000000000000);\n")
    return text, {"B", "x"}, ["a", "b"]


PROGRAMS = [("huge_factors", huge_factors), ("long_names", long_names), ("chained_sum", chained_sum), ("product", product), ("many_commands", many_commands),
            ("order8", order8), ("many_params", many_params), ("precomputes", precomputes)]

# beyond the documented limits: (name, text, line, col, message)
REJECTED = [
    ("order9", "param n = 2;\ntensor s;\ntensor T(%s);\ns = T(%s);\n"
     % (", ".join(["n"] * 9), ", ".join("ijklmopqr")), 3, 8, "tensor 'T' has order 9; the limit is 8"),
    ("grid9", "param n = 2;\nmachine M = grid(%s);\ntensor a(n);\na(i) = a(i) + 1;\n"
     % ", ".join(["2"] * 9), 2, 13, "more than 8 grid dimensions"),
    ("grid9_levels", "param n = 2;\nmachine M = [grid(2, 2, 2, 2), grid(2, 2, 2, 2, 2)];\n"
     "tensor a(n);\na(i) = a(i) + 1;\n", 2, 32, "more than 8 grid dimensions"),
    ("ident129", "param n = 2;\ntensor %s(n);\n" % ("x" * 129), 2, 8, "longer than 128 characters"),
    # loops nested 257 deep (256 compile): the 257th's `repeat` (line 4 + 256, column 1)
    ("loops257", "param n = 2;\nmachine M = grid(g);\ntensor s;\n" + "repeat 2 {\n" * 257 + "s = 1;\n" + "}\n" * 257,
     260, 1, "loops are nested too deeply (more than 256 levels)"),
]


# ---- running ---------------------------------------------------------------------------


class Checker:
    def __init__(self, work):
        self.work = work
        self.passed = self.failed = 0

    def report(self, ok, what, detail=""):
        print("%s: %s%s" % ("PASS" if ok else "FAIL", what, "" if ok else "\n  " + detail.replace("\n", "\n  ")))
        sys.stdout.flush()
        if ok:
            self.passed += 1
        else:
            self.failed += 1

    def run(self, cmd, cwd, timeout=300):
        try:
            p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=timeout)
            return p.returncode, p.stdout.decode(errors="replace")
        except subprocess.TimeoutExpired:
            return None, "timed out after %d s" % timeout

    def sanitized(self, name, path):
        """The whole compiler under ASan and UBSan on this file (the libFuzzer target)."""
        if not os.access(FUZZ, os.X_OK):
            return
        rc, out = self.run([FUZZ, "-runs=1", path], os.path.dirname(path))
        self.report(rc == 0, "%s: distalc's stages under ASan/UBSan" % name, out[-3000:])

    def program(self, name, gen, ranks):
        text, inputs, outputs = gen()
        d = os.path.join(self.work, name)
        os.makedirs(d)
        path = os.path.join(d, name + ".dtl")
        with open(path, "w") as f:
            f.write(text)
        self.sanitized(name, path)
        exe = os.path.join(d, name)
        rc, out = self.run([DISTALC, path, "--exe", "-o", exe], d)
        self.report(rc == 0, "%s: distalc --exe" % name, out[-3000:])
        if rc != 0:
            return
        prog = dtl.parse_file(path)
        rng = np.random.default_rng(len(text))
        params = prog.param_values()
        data = dtl.random_inputs(prog, params, rng, names=sorted(inputs))
        files = []
        for t in sorted(inputs):
            f = os.path.join(d, "in_%s.npy" % t)
            np.save(f, data[t])
            files += ["--load", "%s=%s" % (t, f)]
        want, mags = dtl.evaluate(prog, params, data)
        for p in ranks:
            saves = []
            for t in outputs:
                saves += ["--save", "%s=%s" % (t, os.path.join(d, "np%d_%s.npy" % (p, t)))]
            # the grid param of the (1-d) machine is the rank count
            grid = []
            for m in prog.machines.values():
                for s in m.dims:
                    if isinstance(s, str):
                        grid += ["-" + s, str(p)]
            cmd = [MPIRUN, "-np", str(p), "--oversubscribe", exe, "--validate"] + grid + files + saves
            rc, out = self.run(cmd, d)
            what = "%s: %d rank%s" % (name, p, "" if p == 1 else "s")
            if rc != 0:
                self.report(False, what, " ".join(cmd) + "\n" + out[-3000:])
                continue
            bad = None
            for t in outputs:
                got = np.load(os.path.join(d, "np%d_%s.npy" % (p, t)))
                bad = bad or dtl.compare(prog.tensors[t], got, want[t], mags[t])
            self.report(bad is None and "MISMATCH" not in out, what, (bad or "") + "\n" + " ".join(cmd))

    def rejected(self, name, text, line, col, msg):
        d = os.path.join(self.work, name)
        os.makedirs(d)
        path = os.path.join(d, "t.dtl")
        with open(path, "w") as f:
            f.write(text)
        self.sanitized(name, path)
        rc, out = self.run([DISTALC, path, "--emit", "c", "-o", os.path.join(d, "out")], d)
        want = "%s:%d:%d: error: " % (path, line, col)
        ok = rc == 1 and want in out and msg in out and not os.path.exists(os.path.join(d, "out.c"))
        self.report(ok, "%s: rejected at %d:%d" % (name, line, col),
                    "want exit 1 and %s...%s\ngot exit %s:\n%s" % (want, msg, rc, out[-2000:]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("--ranks", default="1,2,3,4")
    ap.add_argument("--only", default="", help="only the checks whose name contains this")
    args = ap.parse_args()
    ranks = [int(x) for x in args.ranks.split(",")]
    work = tempfile.mkdtemp(prefix="distal-limits.")
    c = Checker(work)
    try:
        for name, text, line, col, msg in REJECTED:
            if args.only in name:
                c.rejected(name, text, line, col, msg)
        for name, gen in PROGRAMS:
            if args.only in name:
                c.program(name, gen, ranks)
    finally:
        if args.keep:
            print("kept %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    print("%d passed, %d failed" % (c.passed, c.failed))
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
