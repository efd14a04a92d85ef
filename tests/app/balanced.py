"""Balanced partitions end to end (balanced.sh runs this).

A power-law matrix (row i holds about n / (i + 1)^0.8 / 4 entries: the first rows hold most of
them) is read from a .mtx file by programs whose sparse tensor is declared `balanced` and whose
vectors are `balanced by` it: a matrix-vector product with the owner-computes default and a
program of three statements (fused, with a sum), one with distribute and communicate, one on a
2-D grid, and a CSC matrix.  At 1, 2, 3, 4, 6 and 8 ranks every result saved to .npy equals
NumPy's, and --stats shows the stored entries per rank within 1.25 of their mean where the same
program without `balanced` is far from it (the blocks of equal extent).  Declaration errors are
located, and boundaries an application passes to plan_create_balanced are checked (the C
program balanced_lib.c, through the library API, also under AddressSanitizer and UBSan).
"""
import os
import re
import sys
import tempfile

import numpy as np

TOP = os.environ.get("top_srcdir") or os.path.join(os.path.dirname(__file__), "..", "..")
DISTALC = os.environ.get("DISTALC", "distalc")
MPIRUN = os.environ.get("MPIRUN", "mpirun")
MPICC = os.environ.get("MPICC", "mpicc")
TIMEOUT = 120
N = 601

PROGRAMS = {
    # the owner-computes default: every statement distributed like its data
    "owner": """param n = 10;
machine M = grid(p);
tensor y(n) @ M(i -> i) balanced by A;
tensor A(n, n) csr @ M(ij -> i) balanced;
tensor x(n) @ M(j -> j) balanced by A;
tensor z(n) @ M(i -> i) balanced by A;
tensor s;
y(i) = A(i, j) * x(j);
z(i) = y(i) * 2 + x(i);
s = z(i) * y(i);
""",
    # a schedule: distribute the rows, communicate at the task
    "scheduled": """param n = 10;
machine M = grid(p);
tensor y(n) @ M(i -> i) balanced by A;
tensor A(n, n) csr @ M(ij -> i) balanced;
tensor x(n) @ M(j -> j) balanced by A;
y(i) = A(i, j) * x(j)
  .distribute({i}, {io}, {ii}, M)
  .communicate({A, x}, io);
""",
    # a 2-D grid: rows and columns each balanced by their own counts
    "grid2d": """param n = 10;
machine M = grid(gx, gy);
tensor y(n) @ M(i -> i*) balanced by A;
tensor A(n, n) csr @ M(ij -> ij) balanced;
tensor x(n) @ M(j -> *j) balanced by A;
y(i) = A(i, j) * x(j);
""",
    # a mode order: CSC stores columns first, so its blocks are blocks of columns
    "csc": """param n = 10;
machine M = grid(p);
tensor y(n);
tensor A(n, n) csc @ M(ij -> j) balanced;
tensor x(n) @ M(j -> j) balanced by A;
y(i) = A(i, j) * x(j);
""",
}
# the programs whose balance is checked, and the tensor whose blocks it is
BALANCE = {"owner": "A", "scheduled": "A"}

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (PASS/FAIL lines, mpirun with its own TMPDIR)

T = harness.Tally()
ok, bad = T.ok, T.bad


def run(cmd, cwd):
    return harness.run_cmd(cmd, cwd, TIMEOUT)


def power_law(rng, n):
    a = np.zeros((n, n))
    for i in range(n):
        k = max(1, int(n / (i + 1) ** 0.8 / 4))
        cols = rng.integers(0, n, size=k)
        a[i, cols] = rng.integers(-40, 41, size=k) / 8.0 + 0.0625
    return a


def write_mtx(path, a):
    rows, cols = np.nonzero(a)
    with open(path, "w") as f:
        f.write("%%%%MatrixMarket matrix coordinate real general\n%d %d %d\n" % (a.shape[0], a.shape[1], len(rows)))
        for i, j in zip(rows, cols):
            f.write("%d %d %.17g\n" % (i + 1, j + 1, a[i, j]))


def entries_spread(out, name):
    m = re.search(r"entries of %s per rank: min (\d+), max (\d+), mean ([0-9.]+), max/mean ([0-9.]+)" % name, out)
    return float(m.group(4)) if m else None


def check_programs(work, a, x):
    y = a @ x
    z = y * 2 + x
    s = float(z @ y)
    for name, text in PROGRAMS.items():
        for balanced in (True, False) if name in BALANCE else (True,):
            src = text if balanced else re.sub(r" balanced( by \w+)?;", ";", text)
            stem = "%s_%s" % (name, "bal" if balanced else "plain")
            with open(os.path.join(work, stem + ".dtl"), "w") as f:
                f.write(src)
            rc, out = run([DISTALC, stem + ".dtl", "--exe", "-o", stem], work)
            if rc != 0:
                bad("%s: distalc failed" % stem, out)
                continue
            for np_ in (1, 2, 3, 4, 6, 8):
                args = ["-n", str(N), "--load", "A=a.mtx", "--load", "x=x.npy", "--save", "y=y_%s_%d.npy" % (stem, np_), "--stats"]
                if name == "owner":
                    args += ["--save", "z=z_%s_%d.npy" % (stem, np_), "--save", "s=s_%s_%d.npy" % (stem, np_)]
                rc, out = run([MPIRUN, "-np", str(np_), "--oversubscribe", "./" + stem] + args, work)
                if rc != 0:
                    bad("%s at %d ranks: the run failed" % (stem, np_), out)
                    continue
                got = np.load(os.path.join(work, "y_%s_%d.npy" % (stem, np_)))
                good = np.allclose(got, y, rtol=1e-12, atol=1e-9)
                if name == "owner":
                    good &= np.allclose(np.load(os.path.join(work, "z_%s_%d.npy" % (stem, np_))), z, rtol=1e-12, atol=1e-9)
                    good &= abs(float(np.load(os.path.join(work, "s_%s_%d.npy" % (stem, np_)))) - s) <= 1e-9 * max(1.0, abs(s))
                if not good:
                    bad("%s at %d ranks: the results differ from NumPy's" % (stem, np_), out)
                    continue
                spread = entries_spread(out, "A")
                if spread is None:
                    bad("%s at %d ranks: --stats printed no entries per rank" % (stem, np_), out)
                elif name in BALANCE and balanced and np_ > 1 and spread > 1.25:
                    bad("%s at %d ranks: max/mean of A's entries per rank is %.3f" % (stem, np_, spread), out)
                elif name in BALANCE and not balanced and np_ >= 4 and spread < 1.5:
                    bad("%s at %d ranks: blocks of equal extent balanced this matrix (%.3f): the test's matrix is not skewed"
                        % (stem, np_, spread), out)
                else:
                    ok("%s at %d ranks: NumPy's results, entries per rank max/mean %.3f" % (stem, np_, spread))


ERRORS = [
    ("tensor x(n) @ M(i -> i) balanced;\n", "only a sparse tensor balances"),
    ("tensor A(n, n) csr @ M(ij -> i) balanced;\ntensor x(n) @ M(i -> i) balanced by B;\n", "unknown tensor 'B'"),
    ("tensor A(n, n) csr @ M(ij -> i);\ntensor x(n) @ M(i -> i) balanced by A;\n", "is not declared 'balanced' itself"),
    ("tensor A(n, m) csr @ M(ij -> i) balanced;\ntensor x(m) @ M(i -> i) balanced by A;\n", "differ in size"),
    ("tensor A(n, n) csr @ M(ij -> i) balanced;\ntensor B(n, n) @ M(ij -> *) balanced by A;\n", "partitions no dimension"),
    ("tensor A(n, n) csr @ M balanced;\n", "needs a written mapping"),
    ("tensor A(n, n) csr @ M(ij -> i) balanced by;\n", "expected the name of a balanced tensor"),
    ("temp T(n, n) csr @ M(ij -> i) balanced;\n", "has no entries before the program runs"),
]


def check_errors(work):
    for k, (decls, want) in enumerate(ERRORS):
        path = os.path.join(work, "err%d.dtl" % k)
        with open(path, "w") as f:
            f.write("param n = 10;\nparam m = 9;\nmachine M = grid(p);\n" + decls)
        rc, out = run([DISTALC, path, "--check"], work)
        if rc != 0 and want in out and re.search(r"err%d\.dtl:\d+:\d+: error:" % k, out):
            ok("rejected with a location: %s" % want)
        else:
            bad("expected a located error '%s'" % want, out)
    hier = os.path.join(work, "hier.dtl")
    with open(hier, "w") as f:
        f.write("param n = 10;\nmachine M = [grid(a), grid(b)];\ntensor A(n, n) csr @ M(ij -> i; ij -> i) balanced;\n")
    rc, out = run([DISTALC, hier, "--check"], work)
    if rc != 0 and "flat CPU machine" in out:
        ok("a hierarchical machine rejected")
    else:
        bad("expected an error for a hierarchical machine", out)


def check_library(work):
    """balanced_lib.c: an application with its own entries computes the boundaries, passes them
    to plan_create_balanced, imports, computes and compares; bad boundaries fail cleanly."""
    src = os.path.join(work, "spmv_bal.dtl")
    with open(src, "w") as f:
        f.write(PROGRAMS["scheduled"])
    rc, out = run([DISTALC, src, "-o", "spmv_bal"], work)
    if rc != 0:
        bad("distalc (library form) failed", out)
        return
    cflags = os.environ.get("DISTAL_CFLAGS", "").split()
    libs = os.environ.get("DISTAL_LIBS", "").split()
    rc, out = run([MPICC, "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-I.", os.path.join(TOP, "tests", "app", "balanced_lib.c"),
                   "spmv_bal.c", "-o", "balanced_lib"] + cflags + libs, work)
    if rc != 0:
        bad("balanced_lib.c does not build", out)
        return
    for np_ in (1, 2, 3, 5):
        rc, out = run([MPIRUN, "-np", str(np_), "--oversubscribe", "./balanced_lib", str(N)], work)
        if rc == 0 and "balanced_lib: ok" in out:
            ok("library API at %d ranks: %s" % (np_, out.strip().splitlines()[-1]))
        else:
            bad("library API at %d ranks" % np_, out)
    # the same under AddressSanitizer and UBSan, the runtime compiled in (as tests/app/sparse.sh)
    comm = os.path.join(TOP, "src", "comm")
    san = ["-std=c11", "-g", "-O1", "-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-D_POSIX_C_SOURCE=200809L"]
    srcs = sorted(os.path.join(comm, f) for f in os.listdir(comm) if f.endswith(".c"))
    srcs += [os.path.join(TOP, "kernels", "blas.c"), os.path.join(TOP, "kernels", "tensor_kernels.c")]
    rc, out = run([MPICC] + san + ["-I.", "-I" + comm, os.path.join(TOP, "tests", "app", "balanced_lib.c"), "spmv_bal.c"] + srcs +
                  [f for f in cflags if f.startswith("-I")] + ["-o", "balanced_san", "-lopenblas", "-lhwloc", "-lm"], work)
    if rc != 0:
        bad("balanced_lib.c does not build with the sanitizers", out)
        return
    env = ["-x", "ASAN_OPTIONS=detect_leaks=1:exitcode=0", "-x", "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1"]
    rc, out = run([MPIRUN, "-np", "3", "--oversubscribe"] + env + ["./balanced_san", str(N)], work)
    ours = re.compile(r"src/comm|kernels/|spmv_bal\.c|balanced_lib\.c")
    leaks = [b for b in out.split("\n\n") if "leak of" in b and ours.search(b)]
    if "balanced_lib: ok" not in out:
        bad("library API under AddressSanitizer and UBSan", out)
    elif "ERROR: AddressSanitizer" in out or "runtime error" in out:
        bad("a sanitizer error", out)
    elif leaks:
        bad("leaks in our code", "\n\n".join(leaks))
    else:
        ok("library API under AddressSanitizer and UBSan at 3 ranks, no leak in our code")


def main():
    rng = np.random.default_rng(11)
    a = power_law(rng, N)
    x = rng.integers(-20, 21, size=N) / 4.0
    with tempfile.TemporaryDirectory(prefix="distal-balanced-") as work:
        write_mtx(os.path.join(work, "a.mtx"), a)
        np.save(os.path.join(work, "x.npy"), x)
        check_programs(work, a, x)
        check_errors(work)
        check_library(work)
    print("balanced: %d checks, %d failed" % (T.checks, T.fails))
    return 1 if T.fails else 0


if __name__ == "__main__":
    sys.exit(main())
