#!/usr/bin/env python3
"""The SPMD pass "threads": a rank's OpenMP threads share each statement's outermost local
loop nest where distinct iterations write distinct elements (or sum one register).

Each program below is compiled by distalc; --emit spmd must mark the loops the pass chooses
("(threads" on the loop of the named variable) and list it not applied, with its reason,
where it must not apply; the executable (distalc --exe, -fopenmp) then runs at 1, 2 and 3
ranks with OMP_NUM_THREADS=2 at sizes whose nests are above DTL_THREADS_WORK (so that the
threads really share them) and at an uneven size, each with --validate (the serial
recomputation).  With OMP_NUM_THREADS unset the loops run on one thread: checked by
--validate too.  Then 24 random programs (gen_random.py) compiled with -DDTL_THREADS_WORK=1
(every nest shared, whatever its size) run on 2 threads a rank against the NumPy oracle.  Environment: DISTALC, MPIRUN (make check sets them)."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vectorize import run_checks  # noqa: E402

DISTALC = os.environ.get("DISTALC", "distalc")
MPIRUN = os.environ.get("MPIRUN", "mpirun")

HEAD = "param n = 300;\nparam m = 70;\nmachine M = grid(p);\n"
# name: (program, loops marked threads (variable names), substrings of "not applied" reasons
# expected, run arguments)
PROGRAMS = {
    # a register sum shared by the threads (reduction)
    "dot": ("tensor s;\ntensor x(n) @ M(i -> i);\ntensor y(n) @ M(i -> i);\ns = x(i) * y(i);",
            ["i_loc"], [], ["-n", "200003"]),
    "elementwise": ("tensor w(n) @ M(i -> i);\ntensor x(n) @ M(i -> i);\ntensor y(n) @ M(i -> i);\n"
                    "tensor z(n) @ M(i -> i);\nw(i) = x(i) * y(i) + z(i);", ["i_loc"], [], ["-n", "100001"]),
    # rows of a matrix-vector product: each thread its rows, each row a register sum
    "gemv_rows": ("tensor y(n) @ M(i -> i);\ntensor A(n, m) @ M(ij -> i);\ntensor x(m);\n"
                  "y(i) = A(i, j) * x(j)\n  .distribute({i}, {io}, {ii}, M);", ["ii"], [], ["-n", "3001", "-m", "211"]),
    # the sum's loop is outermost: its iterations write the same elements; the loop inside it is shared
    "gemv_t": ("tensor y(m);\ntensor A(n, m);\ntensor x(n);\ny(j) = A(i, j) * x(i)\n  .reorder(i, j);",
               ["j"], [], ["-n", "67", "-m", "40009"]),
    # a sparse matrix's rows (--validate holds it densely: 9001^2 doubles)
    "spmv": ("tensor y(n) @ M(i -> i);\ntensor A(n, n) csr @ M(ij -> i);\ntensor x(n) @ M(i -> i);\n"
             "y(i) = A(i, j) * x(j);", ["i_loc"], [], ["-n", "9001", "--density", "0.001"]),
    # the stored coordinates of a CSF tensor's first level (the loop ends at the rank's block
    # by a search, not a break)
    "csf_ttv": ("param q = 6;\ntensor A(n, q) @ M(ij -> i);\ntensor B(n, q, q) csf @ M(ijk -> i);\ntensor c(q);\n"
                "A(i, j) = B(i, j, k) * c(k)\n  .distribute({i}, {io}, {ii}, M);", ["ii"], [],
                ["-n", "2003", "--density", "0.3"]),
    # a 2-D statement reading a transposed operand; the scalar sum of a matrix
    "transpose": ("tensor A(n, m) @ M(ij -> i);\ntensor B(n, m) @ M(ij -> i);\ntensor C(m, n);\n"
                  "A(i, j) = B(i, j) + C(j, i);", ["i_loc"], [], ["-n", "701", "-m", "303"]),
    "matrix_sum": ("tensor s;\ntensor B(n, m) @ M(ij -> j);\ns = B(i, j) * 2;", ["j_loc"], [], ["-n", "3", "-m", "90001"]),
    # a statement that reads its output at other elements reads a snapshot taken before its loops
    "own_transpose": ("tensor A(n, n) @ M(ij -> i);\ntensor B(n, n) @ M(ij -> i);\nA(i, j) = A(j, i) + B(i, j);",
                      ["i_loc"], [], ["-n", "301"]),
    # two statements fused into one nest
    "fused": ("tensor a(n) @ M(i -> i);\ntensor b(n) @ M(i -> i);\ntensor c(n) @ M(i -> i);\n"
              "a(i) = b(i) * 2;\nc(i) = a(i) + b(i);", ["i_loc"], [], ["-n", "100003"]),
    # a leaf kernel: the BLAS's threads, not the pass's
    "gemm_kernel": ("tensor A(n, m) @ M(ij -> i);\ntensor B(n, m) @ M(ij -> i);\ntensor C(m, m);\n"
                    "A(i, j) = B(i, k) * C(k, j)\n  .distribute({i}, {io}, {ii}, M)\n  .substitute({ii, j, k}, gemm);",
                    [], ["a leaf kernel runs its loops"], ["-n", "301", "-m", "67"]),
    # parallelize already maps the loops
    "parallelized": ("tensor y(n) @ M(i -> i);\ntensor x(n) @ M(i -> i);\n"
                     "y(i) = x(i) * 3\n  .distribute({i}, {io}, {ii}, M)\n  .parallelize(ii, cpu_thread, no_races);",
                     [], ["parallelize maps its loops already"], ["-n", "100001"]),
    # a sparse result's entries are produced by one thread
    "sparse_result": ("tensor A(n, n) csr @ M(ij -> i);\ntensor B(n, n) csr @ M(ij -> i);\nA(i, j) = B(i, j) * 2;",
                      [], ["sparse result"], ["-n", "3001", "--density", "0.01"]),
}


def marked(spmd, var):
    for line in spmd.splitlines():
        s = line.strip()
        if s.startswith("for %s in " % var) and "(rank's threads" in s:
            return True
    return False


def check(name, prog, work):
    body, loops, reasons, args = prog
    src = os.path.join(work, name + ".dtl")
    with open(src, "w") as f:
        f.write(HEAD + body + "\n")
    r = subprocess.run([DISTALC, src, "--emit", "spmd"], capture_output=True, text=True)
    if r.returncode:
        return ["%s: distalc --emit spmd failed: %s" % (name, r.stderr.strip())]
    spmd = r.stdout
    errors = []
    for v in loops:
        if not marked(spmd, v):
            errors.append("%s: loop %s is not marked (rank's threads):\n%s" % (name, v, spmd))
    if not loops and "(rank's threads" in spmd:
        errors.append("%s: a loop is marked (rank's threads) where none may be:\n%s" % (name, spmd))
    for why in reasons:
        if not any("threads not applied" in l and why in l for l in spmd.splitlines()):
            errors.append("%s: --emit spmd does not say threads are not applied because %r:\n%s" % (name, why, spmd))
    if loops and not any(l.strip().startswith("threads at statement") for l in spmd.splitlines()):
        errors.append("%s: --emit spmd does not list the rewrite threads applied" % name)
    if errors:
        return errors
    exe = os.path.join(work, name)
    r = subprocess.run([DISTALC, src, "--exe", "-o", exe], capture_output=True, text=True)
    if r.returncode:
        return ["%s: distalc --exe failed: %s" % (name, r.stderr.strip()[-2000:])]
    c_text = open(exe + ".c").read() if os.path.exists(exe + ".c") else None
    if c_text is not None and loops and "omp parallel for" not in c_text:
        errors.append("%s: the generated C has no shared loop" % name)
    runs = [(p, "2", args) for p in (1, 2, 3)] + [(2, None, args), (3, "2", [a if a != args[1] else str(int(a) // 7 + 3)
                                                                             for a in args])]
    for ranks, threads, a in runs:
        env = dict(os.environ)
        env.pop("OMP_NUM_THREADS", None)
        if threads:
            env["OMP_NUM_THREADS"] = threads
        cmd = [MPIRUN, "-np", str(ranks), "--oversubscribe", exe, "--validate"] + a
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
        if r.returncode or "ok" not in r.stdout or "FAIL" in r.stdout:
            errors.append("%s at %d ranks x %s threads (%s): --validate failed:\n%s%s" % (
                name, ranks, threads or "unset", " ".join(a), r.stdout[-1500:], r.stderr[-1500:]))
    return errors


def main():
    failures = run_checks(PROGRAMS, check, "distal-threads-")
    # every nest shared, whatever its size (-DDTL_THREADS_WORK=1), in random programs (element-wise
    # statements, sums, loops, temporaries) run at several rank counts against the oracle
    env = dict(os.environ, OMP_NUM_THREADS="2", DISTAL_EXTRA_CFLAGS="-DDTL_THREADS_WORK=1")
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run([sys.executable, os.path.join(here, "gen_random.py"), "--seed", "4242", "--count", "24", "-j", "2"],
                       capture_output=True, text=True, env=env, timeout=1800)
    total = len(PROGRAMS) + 1
    if r.returncode:
        failures += 1
        print("FAIL  random programs with every nest on 2 threads:\n" + "\n".join(
            l for l in r.stdout.splitlines() if l.startswith("FAIL"))[-3000:] + r.stderr[-1500:])
    else:
        print("PASS  random programs with every nest on 2 threads: %s" % (r.stdout.strip().splitlines() or [""])[-1])
    print("threads: %d passed, %d failed" % (total - failures, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
