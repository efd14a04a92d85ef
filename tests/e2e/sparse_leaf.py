#!/usr/bin/env python3
"""The SPMD rewrites of loops over stored coordinates (spmd.h):

- "gather" (spmd_gather): a loop that reads or writes a row of a dense tensor at each entry's
  coordinate fetches the row the loop will reach DTL_GATHER_AHEAD entries on, where the rank's
  piece scatters at that level and a row is at least a cache line;
- "sums" (spmd_sums): a loop whose body adds to a register keeps its sum in four registers,
  four entries at a time, where the dense operands it gathers span at most DTL_SUMS_BYTES; its
  one-register loop (the rest, or all of it where they do not fit) follows DTL_UNROLL4;
- "strips" (spmd_strips) in a loop that sums into a row of its output (an SpMM's rows): its
  whole strips gather nothing, its columns left over do; --emit spmd lists those loops.

For each program below: `distalc --emit spmd` marks exactly the loops expected (and says why
the gather is not applied to the others: single elements, a row whose index is the coordinate
itself); the generated C, compiled as `distalc --exe` compiles it with a counter on each
rewrite's branch, gives what the serial recomputation gives (--validate) at 1, 2, 3, 4, 6 and
8 ranks on sizes the ranks do not divide.  On matrices whose rows scatter (density 0.02 over
997 columns) the gather's branch runs (its counter above zero) where a row is 64 bytes or more,
and never where it is shorter or where the rows are banded (density 0.3: consecutive rows'
coordinates lie close; a loop over a first level, which has one parent, is never banded).  The
sums' branch runs where the gathered operand fits DTL_SUMS_BYTES and never where it does not
(the limit set to 8 bytes, built with DTL_UNROLL4 off), and always where it gathers nothing
(a matrix's row sums).  The distances are varied (1 entry, the default, past every piece's
end) at 1 and 3 ranks, and the rank's threads share the loops at 2 threads.
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
# name: (program, rows gathered per marked loop as --emit spmd prints them, in order; the
# loops summed in partial sums)
PROGRAMS = {
    # SpMM over CSR rows: B's row at each stored column, summed into C's row in the registers
    # of the rewrite strips, whose whole strips gather nothing (STRIPS below); the columns left
    # over (q = 9, 17, 5: all but 8 or 16 of them) gather
    "spmm": ("tensor C(n, q) @ M(ik -> i);\ntensor A(n, n) csr @ M(ij -> i);\ntensor B(n, q);\n"
             "C(i, k) = A(i, j) * B(j, k);", [1], 0),
    # the same over DCSR (the stored rows compressed too)
    "spmm_dcsr": ("tensor C(n, q) @ M(ik -> i);\ntensor A(n, n) {compressed, compressed} @ M(ij -> i);\ntensor B(n, q);\n"
                  "C(i, k) = A(i, j) * B(j, k);", [1], 0),
    # a float SpMM (rows of 4-byte elements: a line is 16 of them)
    "spmm_float": ("tensor C(n, q) float @ M(ik -> i);\ntensor A(n, n) float csr @ M(ij -> i);\ntensor B(n, q) float;\n"
                   "C(i, k) = A(i, j) * B(j, k);", [1], 0),
    # the transposed SpMM: each stored entry adds B's row i to C's row at its column, which
    # moves with the loop (no strips): C's row gathered ahead
    "spmm_scatter": ("tensor C(n, q);\ntensor A(n, n) csr @ M(ij -> i);\ntensor B(n, q) @ M(ik -> i);\n"
                     "C(j, k) = A(i, j) * B(i, k)\n  .distribute({i}, {io}, {ii}, M)\n  .reorder({ii, j, k});", [1], 0),
    # a sparse vector scaling rows, every tensor on every rank: the loop over the vector's
    # entries is the outermost, shared by the rank's threads; it reads B's row and writes C's
    "rows": ("tensor C(n, q);\ntensor a(n) {compressed};\ntensor B(n, q);\nC(i, k) = a(i) * B(i, k);", [2], 0),
    # sparse MTTKRP over CSF: B's row gathered at level 1 (whose coordinates scatter: a fiber of
    # 5 holds an entry a tenth of the time), C's at level 2, summed in the strips' registers
    "mttkrp": ("param m = 41;\ntensor A(m, q) @ M(il -> i);\ntensor T(m, n, 5) csf @ M(ijk -> i);\n"
               "tensor B(n, q);\ntensor C(5, q);\nA(i, l) = T(i, j, k) * B(j, l) * C(k, l);", [1, 1], 0),
    # SpMV: single elements (no gather), a sum (partial sums where x fits), its rows in two
    # loops (the rewrite overlap: those that read only the rank's own block of x, then the rest)
    "spmv": ("tensor y(n) @ M(i -> i);\ntensor A(n, n) csr @ M(ij -> i);\ntensor x(n) @ M(i -> i);\n"
             "y(i) = A(i, j) * x(j);", [], 2),
    # a float SpMV over DCSR
    "spmv_float": ("tensor y(n) float @ M(i -> i);\ntensor A(n, n) float {compressed, compressed} @ M(ij -> i);\n"
                   "tensor x(n) float;\ny(i) = A(i, j) * x(j);", [], 1),
    # CSF TTV: the fibers of the last level summed
    "ttv": ("param m = 41;\ntensor A(m, n) @ M(ij -> i);\ntensor B(m, n, n) csf @ M(ijk -> i);\ntensor c(n);\n"
            "A(i, j) = B(i, j, k) * c(k);", [], 1),
    # row sums of a matrix: no dense operand, so the partial sums always run
    "rowsum": ("tensor y(n) @ M(i -> i);\ntensor A(n, n) csr @ M(ij -> i);\ny(i) = A(i, j);", [], 1),
    # B's rows run along j: an element of one at each coordinate (no gather), the sum over j
    # innermost (partial sums where a row of B fits)
    "spmm_t": ("tensor C(n, q) @ M(ik -> i);\ntensor A(n, n) csr @ M(ij -> i);\ntensor B(q, n);\n"
               "C(i, k) = A(i, j) * B(k, j);", [], 1),
}
WHY = {"spmv": "single elements", "spmm_t": "single elements"}
# the gathering loops of the rewrite strips (spmd.h: spmd_strips)
STRIPS = {"spmm": 1, "spmm_dcsr": 1, "spmm_float": 1, "mttkrp": 1}
# a sum that gathers nothing: its partial sums run whatever DTL_SUMS_BYTES is
GATHERS_NOTHING = {"rowsum"}
# a loop over the first level has one parent, never banded (its coordinates ascend, with gaps)
FIRST_LEVEL = {"rows"}
# the density of the runs: rows that scatter (the branch runs where a row is a line or more),
# and rows whose coordinates lie close (banded: it never runs)
SCATTERED, BANDED = "0.02", "0.3"
COUNTED = {"gather": r"if \(dtl_sp\d+_g\d+\) \{(?= /\* the rewrite gather)",
           "sums": r"(for \(; dtl_sp\d+_q\d+ \+ \d+ < dtl_sp\d+_e\d+; dtl_sp\d+_q\d+ \+= \d+\) \{)"}


def instrument(c_text):
    """the generated C with a counter on each rewrite's branch, printed at exit; the number of
    branches of each"""
    counts = {}
    for name, pat in COUNTED.items():
        c_text, counts[name] = re.subn(pat, lambda m: m.group(0) + " __atomic_add_fetch(&dtl_test_%s, 1, __ATOMIC_RELAXED);" % name,
                                       c_text)
    head = "#include <stdio.h>\n" + "".join("static long dtl_test_%s;\n" % k for k in COUNTED)
    head += ("__attribute__((destructor)) static void dtl_test_report(void) { fprintf(stderr, \"%s\\n\", %s); }\n"
             % (" ".join("%s: %%ld" % k for k in COUNTED), ", ".join("dtl_test_%s" % k for k in COUNTED)))
    return head + c_text, counts


def run(args, env=None):
    return subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)


def check(name, prog, work):
    body, rows, sums = prog
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
    if name in WHY and not re.search(r"gather not applied at statement 1: [^\n]*%s" % WHY[name], r.stdout):
        errors.append("%s: --emit spmd does not say why the gather is not applied (%s)" % (name, WHY[name]))
    nstrips = r.stdout.count("(the whole strips gather no rows ahead)")
    if nstrips != STRIPS.get(name, 0):
        errors.append("%s: --emit spmd lists %d gathering loops of the strips, expected %d" % (name, nstrips, STRIPS.get(name, 0)))
    nsums = r.stdout.count("(4 partial sums where its gathers fit the cache)")
    if nsums != sums:
        errors.append("%s: --emit spmd marks %d loops for partial sums, expected %d" % (name, nsums, sums))
    nunroll = r.stdout.count("(one sum unrolled by 4)")
    if nunroll != sums:
        errors.append("%s: --emit spmd marks %d one-register loops unrolled, expected %d" % (name, nunroll, sums))
    base = os.path.join(work, name)
    r = run([DISTALC, src, "--main", "-o", base + ".c"])
    if r.returncode:
        return errors + ["%s: distalc --main failed: %s" % (name, r.stderr.strip())]
    c_text, branches = instrument(open(base + ".c").read())
    if bool(branches["gather"]) != bool(rows) or bool(branches["sums"]) != bool(sums):
        errors.append("%s: %s branches of the rewrites in the generated C" % (name, branches))
    # the one-register loop of each summed loop follows DTL_UNROLL4 (printed in every version of
    # the loop nest: 32- and 64-bit, threads or not); the sums limit of 8 bytes is also built
    # with the hint off (-DDTL_UNROLL4=), the loop as written
    unrolled = len(re.findall(r"DTL_UNROLL4 /\*[^\n]*\*/\n\s*for \(int64_t dtl_sp\d+_p\d+ = dtl_sp\d+_q\d+;", c_text))
    if bool(unrolled) != bool(sums):
        errors.append("%s: %d loops after DTL_UNROLL4 in the generated C, expected %s" % (name, unrolled, "some" if sums else "none"))
    with open(base + "_t.c", "w") as f:
        f.write(c_text)
    exes = {}
    for flags in (("16", "32768"), ("1", "32768"), ("100000000", "32768"), ("16", "8")):
        exe = "%s_%s_%s" % (base, flags[0], flags[1])
        r = run([MPICC, "-std=c11", "-O3", "-fwrapv", "-fopenmp", "-DDTL_GATHER_AHEAD=" + flags[0], "-DDTL_SUMS_BYTES=" + flags[1]] +
                (["-DDTL_UNROLL4="] if flags[1] == "8" else []) + [base + "_t.c", "-o", exe] + CFLAGS + LIBS)
        if r.returncode:
            return errors + ["%s: the C compiler failed: %s" % (name, r.stderr.strip()[-2000:])]
        exes[flags] = exe
    default = ("16", "32768")
    runs = [(p, default, 9, SCATTERED, 1) for p in (1, 2, 3, 4, 6, 8)]
    runs += [(p, (a, "32768"), 9, SCATTERED, 1) for p in (1, 3) for a in ("1", "100000000")]
    runs += [(p, ("16", "8"), 9, SCATTERED, 1) for p in (1, 3)]
    runs += [(1, default, 17, SCATTERED, 1), (2, default, 5, SCATTERED, 1), (3, default, 9, BANDED, 1)]
    runs += [(p, default, 9, SCATTERED, 2) for p in (1, 2)]
    for ranks, flags, q, density, threads in runs:
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS="1")
        r = run([MPIRUN, "-np", str(ranks), "--oversubscribe", exes[flags], "-q", str(q), "--density", density, "--validate"], env)
        what = "%s at %d ranks x %d threads, q = %d, density %s, %s entries ahead, sums up to %s bytes" % (
            name, ranks, threads, q, density, flags[0], flags[1])
        if r.returncode or " ok" not in r.stdout or "FAIL" in r.stdout:
            errors.append("%s: --validate failed:\n%s%s" % (what, r.stdout[-1500:], r.stderr[-1500:]))
            continue
        got = [tuple(int(x) for x in m) for m in re.findall(r"gather: (\d+) sums: (\d+)", r.stderr)]
        if len(got) != ranks:
            errors.append("%s: %d ranks reported the counters" % (what, len(got)))
            continue
        gathered, summed = sum(g for g, _ in got), sum(s for _, s in got)
        # a row of 4-byte elements needs 16 of them for a line
        line = q * (4 if "float" in body else 8) >= 64
        if rows and density == SCATTERED and line and not gathered:
            errors.append("%s: the gather's branch never ran" % what)
        if (not line or (density == BANDED and name not in FIRST_LEVEL)) and gathered:
            errors.append("%s: the gather's branch ran %d times (rows shorter than a line or banded)" % (what, gathered))
        if sums and flags[1] != "8" and not summed:
            errors.append("%s: the partial sums never ran" % what)
        if flags[1] == "8" and name not in GATHERS_NOTHING and summed:
            errors.append("%s: the partial sums ran %d times where the operand does not fit" % (what, summed))
    return errors


def main():
    failures = run_checks(PROGRAMS, check, "distal-sparse-leaf-")
    print("sparse_leaf: %d passed, %d failed" % (len(PROGRAMS) - failures, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
