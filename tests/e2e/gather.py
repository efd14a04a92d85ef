#!/usr/bin/env python3
"""The SPMD rewrite "gather" (spmd.h, spmd_gather): a loop over stored coordinates that reads
or writes a row of a dense tensor at each entry's coordinate fetches the row the loop will
reach DTL_GATHER_AHEAD entries on, where the rank's piece scatters at that level and a row
is at least a cache line.

For each program below: `distalc --emit spmd` marks exactly the loops expected (and says why
for the others: single elements, a row whose index is the coordinate itself); the generated C,
compiled as `distalc --exe` compiles it with a counter on the rewrite's branch, gives what the
serial recomputation gives (--validate) at 1, 2, 3, 4, 6 and 8 ranks on sizes the ranks do not
divide, and on matrices whose rows scatter (density 0.02 over 997 columns) the branch runs
(the counter is above zero) where a row is 64 bytes or more, and never where it is shorter or
where the rows are banded (density 0.3: consecutive rows' coordinates lie close; a loop over
a first level, which has one parent, is never banded).  The
distance is varied (1 entry, the default, past every piece's end) at 1 and 3 ranks, and the
rank's threads share the loops at 2 threads.
Environment: DISTALC, MPICC, MPIRUN, DISTAL_CFLAGS, DISTAL_LIBS (make check sets them)."""
import os
import re
import shlex
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vectorize import run_checks  # noqa: E402

DISTALC = os.environ.get("DISTALC", "distalc")
MPICC = os.environ.get("MPICC", "mpicc")
MPIRUN = os.environ.get("MPIRUN", "mpirun")
CFLAGS = shlex.split(os.environ.get("DISTAL_CFLAGS", ""))
LIBS = shlex.split(os.environ.get("DISTAL_LIBS", ""))

HEAD = "param n = 997;\nparam q = 9;\nmachine M = grid(g);\n"
# name: (program, rows gathered per marked loop as --emit spmd prints them, in order; a row's
# doubles (q) of the runs whose branch must run)
PROGRAMS = {
    # SpMM over CSR rows: B's row at each stored column
    "spmm": ("tensor C(n, q) @ M(ik -> i);\ntensor A(n, n) csr @ M(ij -> i);\ntensor B(n, q);\n"
             "C(i, k) = A(i, j) * B(j, k);", [1]),
    # the same over DCSR (the stored rows compressed too)
    "spmm_dcsr": ("tensor C(n, q) @ M(ik -> i);\ntensor A(n, n) {compressed, compressed} @ M(ij -> i);\ntensor B(n, q);\n"
                  "C(i, k) = A(i, j) * B(j, k);", [1]),
    # a float SpMM (rows of 4-byte elements: a line is 16 of them)
    "spmm_float": ("tensor C(n, q) float @ M(ik -> i);\ntensor A(n, n) float csr @ M(ij -> i);\ntensor B(n, q) float;\n"
                   "C(i, k) = A(i, j) * B(j, k);", [1]),
    # a sparse vector scaling rows, every tensor on every rank: the loop over the vector's
    # entries is the outermost, shared by the rank's threads; it reads B's row and writes C's
    "rows": ("tensor C(n, q);\ntensor a(n) {compressed};\ntensor B(n, q);\nC(i, k) = a(i) * B(i, k);", [2]),
    # sparse MTTKRP over CSF: B's row at level 1, C's at level 2
    "mttkrp": ("param m = 41;\ntensor A(m, q) @ M(il -> i);\ntensor T(m, m, n) csf @ M(ijk -> i);\n"
               "tensor B(m, q);\ntensor C(n, q);\nA(i, l) = T(i, j, k) * B(j, l) * C(k, l);", [1, 1]),
    # not applied: SpMV reads one element at each coordinate
    "spmv": ("tensor y(n) @ M(i -> i);\ntensor A(n, n) csr @ M(ij -> i);\ntensor x(n) @ M(i -> i);\n"
             "y(i) = A(i, j) * x(j);", []),
    # not applied: B's rows run along k, its element at the coordinate is a column's
    "spmm_t": ("tensor C(n, q) @ M(ik -> i);\ntensor A(n, n) csr @ M(ij -> i);\ntensor B(q, n);\n"
               "C(i, k) = A(i, j) * B(k, j);", []),
}
WHY = {"spmv": "single elements", "spmm_t": "single elements"}
# a loop over the first level has one parent, never banded (its coordinates ascend, with gaps)
FIRST_LEVEL = {"rows"}
# the density of the runs: rows that scatter (the branch runs where a row is a line or more),
# and rows whose coordinates lie close (banded: it never runs)
SCATTERED, BANDED = "0.02", "0.3"


def instrument(c_text):
    """the generated C with a counter on the rewrite's branch, printed at exit"""
    out, n = re.subn(r"if \((dtl_sp\d+_g\d+)\) \{ /\* the rewrite gather",
                     r"if (\1) { __atomic_add_fetch(&dtl_test_gathers, 1, __ATOMIC_RELAXED); /* the rewrite gather", c_text)
    head = ("#include <stdio.h>\nstatic long dtl_test_gathers;\n__attribute__((destructor)) static void dtl_test_report(void) "
            "{ fprintf(stderr, \"gathers: %ld\\n\", dtl_test_gathers); }\n")
    return head + out, n


def run(args, env=None):
    return subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)


def gathers(r):
    """the counters printed by every rank of a run"""
    return [int(x) for x in re.findall(r"gathers: (\d+)", r.stderr)]


def check(name, prog, work):
    body, rows = prog
    src = os.path.join(work, name + ".dtl")
    with open(src, "w") as f:
        f.write(HEAD + body + "\n")
    r = run([DISTALC, src, "--emit", "spmd"])
    if r.returncode:
        return ["%s: distalc --emit spmd failed: %s" % (name, r.stderr.strip())]
    marked = [int(x) for x in re.findall(r"\((\d+) rows? gathered ahead where scattered\)", r.stdout)]
    errors = []
    if marked != rows:
        errors.append("%s: --emit spmd marks loops gathering %s rows, expected %s" % (name, marked, rows))
    if not rows and not re.search(r"gather not applied at statement 1: [^\n]*%s" % WHY[name], r.stdout):
        errors.append("%s: --emit spmd does not say why the rewrite is not applied (%s)" % (name, WHY[name]))
    base = os.path.join(work, name)
    r = run([DISTALC, src, "--main", "-o", base + ".c"])
    if r.returncode:
        return errors + ["%s: distalc --main failed: %s" % (name, r.stderr.strip())]
    c_text, branches = instrument(open(base + ".c").read())
    if bool(branches) != bool(rows):
        errors.append("%s: %d branches of the rewrite in the generated C" % (name, branches))
    with open(base + "_t.c", "w") as f:
        f.write(c_text)
    exes = {}
    for ahead in ("1", "16", "100000000"):
        exe = "%s_%s" % (base, ahead)
        r = run([MPICC, "-std=c11", "-O3", "-fwrapv", "-fopenmp", "-DDTL_GATHER_AHEAD=" + ahead, base + "_t.c", "-o", exe] +
                CFLAGS + LIBS)
        if r.returncode:
            return errors + ["%s: the C compiler failed: %s" % (name, r.stderr.strip()[-2000:])]
        exes[ahead] = exe
    runs = [(p, "16", 9, SCATTERED, 1) for p in (1, 2, 3, 4, 6, 8)]
    runs += [(p, a, 9, SCATTERED, 1) for p in (1, 3) for a in ("1", "100000000")]
    runs += [(1, "16", 17, SCATTERED, 1), (2, "16", 5, SCATTERED, 1), (3, "16", 9, BANDED, 1)]
    runs += [(p, "16", 9, SCATTERED, 2) for p in (1, 2)]
    for ranks, ahead, q, density, threads in runs:
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS="1")
        r = run([MPIRUN, "-np", str(ranks), "--oversubscribe", exes[ahead], "-q", str(q), "--density", density, "--validate"],
                env)
        what = "%s at %d ranks x %d threads, q = %d, density %s, %s entries ahead" % (name, ranks, threads, q, density, ahead)
        if r.returncode or " ok" not in r.stdout or "FAIL" in r.stdout:
            errors.append("%s: --validate failed:\n%s%s" % (what, r.stdout[-1500:], r.stderr[-1500:]))
            continue
        got = gathers(r)
        if len(got) != ranks:
            errors.append("%s: %d ranks reported the counter" % (what, len(got)))
            continue
        # a row of 4-byte elements needs 16 of them for a line
        line = q * (4 if "float" in body else 8) >= 64
        if rows and density == SCATTERED and line and not sum(got):
            errors.append("%s: the rewrite's branch never ran" % what)
        if (not line or (density == BANDED and name not in FIRST_LEVEL)) and sum(got):
            errors.append("%s: the rewrite's branch ran %d times (rows shorter than a line or banded)" % (what, sum(got)))
    return errors


def main():
    failures = run_checks(PROGRAMS, check, "distal-gather-")
    print("gather: %d passed, %d failed" % (len(PROGRAMS) - failures, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
