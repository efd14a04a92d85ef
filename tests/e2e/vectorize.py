#!/usr/bin/env python3
"""Generated leaf loops are vectorized: each program below (a leaf of bench/roofline.sh
written without a schedule, so the compiler chooses its loop order) is compiled by distalc
to C, the C compiled as `distalc --exe` compiles it (-O3 -fopenmp) with GCC's vectorization
report, and every innermost loop of the statements' functions must be reported vectorized.
Each program also runs under mpirun with --validate (the serial recomputation), at 1
and 3 ranks.  GCC keeps a floating-point sum in program order, so the loops that sum into a
register vectorize only through the SPMD pass `simd` (`#pragma omp simd reduction`); the
dense loops need a unit-stride innermost loop (the default loop order).
Environment: DISTALC, MPICC, MPIRUN, DISTAL_CFLAGS, DISTAL_LIBS (make check sets them)."""
import os
import re
import shlex
import subprocess
import sys
import tempfile

DISTALC = os.environ.get("DISTALC", "distalc")
MPICC = os.environ.get("MPICC", "mpicc")
MPIRUN = os.environ.get("MPIRUN", "mpirun")
CFLAGS = shlex.split(os.environ.get("DISTAL_CFLAGS", ""))

HEAD = "param n = 300;\nparam m = 70;\nparam r = 37;\nmachine M = grid(p);\n"
PROGRAMS = {
    "dot": "tensor s;\ntensor x(n) @ M(i -> i);\ntensor y(n) @ M(i -> i);\ns = x(i) * y(i);",
    "axpy": "tensor y(n) @ M(i -> i);\ntensor x(n) @ M(i -> i);\ny(i) = x(i) * 3 + y(i);",
    "elementwise1": "tensor y(n) @ M(i -> i);\ntensor x(n) @ M(i -> i);\ny(i) = x(i) * 3;",
    "elementwise3": "tensor w(n) @ M(i -> i);\ntensor x(n) @ M(i -> i);\ntensor y(n) @ M(i -> i);\n"
                    "tensor z(n) @ M(i -> i);\nw(i) = x(i) * y(i) + z(i);",
    "gemv": "tensor y(n) @ M(i -> i);\ntensor A(n, m) @ M(ij -> i);\ntensor x(m);\ny(i) = A(i, j) * x(j);",
    "gemv_t": "tensor y(m);\ntensor A(n, m) @ M(ij -> i);\ntensor x(n) @ M(i -> i);\ny(j) = A(i, j) * x(i);",
    "gemm": "tensor A(n, m) @ M(ij -> i);\ntensor B(n, r) @ M(ik -> i);\ntensor C(r, m);\nA(i, j) = B(i, k) * C(k, j);",
    "ttv": "tensor A(n, m) @ M(ij -> i);\ntensor B(n, m, r) @ M(ijk -> i);\ntensor c(r);\nA(i, j) = B(i, j, k) * c(k);",
    "ttm": "tensor A(n, m, r) @ M(ijl -> i);\ntensor B(n, m, r) @ M(ijk -> i);\ntensor C(r, r);\n"
           "A(i, j, l) = B(i, j, k) * C(k, l);",
    "mttkrp": "tensor A(n, r) @ M(il -> i);\ntensor B(n, m, m) @ M(ijk -> i);\ntensor C(m, r);\ntensor D(m, r);\n"
              "A(i, l) = B(i, j, k) * C(j, l) * D(k, l);",
    "innerprod": "tensor s;\ntensor B(n, m, r) @ M(ijk -> i);\ntensor C(n, m, r) @ M(ijk -> i);\ns = B(i, j, k) * C(i, j, k);",
    "spmm": "tensor C(n, r) @ M(ik -> i);\ntensor A(n, n) csr @ M(ij -> i);\ntensor B(n, r);\nC(i, k) = A(i, j) * B(j, k);",
}
# (a loop over stored coordinates that reads a dense operand at them, as SpMV's, is a gather:
# it is left to one lane and not listed)
# The programs whose nest reuses what it reads, which the SPMD rewrite "clones" also compiles
# for x86-64-v3 (AVX2): on GCC 12 or later on x86-64 their report must show 32-byte vectors,
# and the others must keep one copy.
CLONED = {"gemm", "ttm", "mttkrp", "spmm"}


def innermost_loops(c_text, prefix):
    """(first, last) lines (1-based) of the innermost loops of the statements' functions
    (PREFIX_sN) over index variables or stored positions, found by brace matching on the
    generated text."""
    lines = c_text.split("\n")
    out, func, depth, stack = [], False, 0, []
    fn = re.compile(r"^static int %s_s\d+\(" % re.escape(prefix))
    for no, line in enumerate(lines, 1):
        if depth == 0:
            func = bool(fn.match(line))
        code = line.split("/*")[0]
        # (the lanes of a strip, the rewrite strips, are the loops over dtl_kc after DTL_LANES;
        # the loops that set and store a strip's registers are not checked)
        if func and (re.search(r"\bfor \(int64_t (v_|dtl_sp)", code) or
                     (re.search(r"\bfor \(int64_t dtl_kc\b", code) and no > 1 and "DTL_LANES" in lines[no - 2])):
            for entry in stack:
                entry[1] = False  # an enclosing loop is not innermost
            stack.append([no, True, depth + code.count("{") - code.count("}")])
        depth += code.count("{") - code.count("}")
        while stack and depth < stack[-1][2]:
            no0, inner, _ = stack.pop()
            if inner:
                out.append((no0, no))
    return out


def avx2_clones():
    """the C compiler spells DTL_LEAF_CLONES as target_clones: GCC 12 or later on x86-64 Linux"""
    r = subprocess.run([MPICC, "-dM", "-E", "-x", "c", "/dev/null"], capture_output=True, text=True)
    macros = dict(l.split(" ", 2)[1:3] for l in r.stdout.splitlines() if l.count(" ") >= 2)
    return ("__x86_64__" in macros and "__linux__" in macros and "__clang__" not in macros
            and int(macros.get("__GNUC__", "0")) >= 12)


def check(name, body, work):
    src = os.path.join(work, name + ".dtl")
    with open(src, "w") as f:
        f.write(HEAD + body + "\n")
    base = os.path.join(work, name)
    r = subprocess.run([DISTALC, src, "--main", "-o", base], capture_output=True, text=True)
    if r.returncode:
        return ["%s: distalc failed: %s" % (name, r.stderr.strip())]
    report = base + ".vec"
    cmd = [MPICC, "-std=c11", "-O3", "-fopenmp", "-fopt-info-vec-optimized=" + report, "-c", base + ".c",
           "-o", base + ".o"] + CFLAGS
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        return ["%s: the C compiler failed: %s" % (name, r.stderr.strip()[-2000:])]
    c_text = open(base + ".c").read()
    errors = []
    if ("DTL_LEAF_CLONES" in c_text) != (name in CLONED):
        errors.append("%s: the rewrite clones %s" % (name, "missing" if name in CLONED else "applied where the nest streams"))
    if name in CLONED and avx2_clones() and "32 byte vectors" not in open(report).read():
        errors.append("%s: no loop of the AVX2 copy is vectorized with 32-byte vectors" % name)
    vectorized = set()
    for line in open(report):
        m = re.match(r".*%s\.c:(\d+):\d+: optimized: loop vectorized" % re.escape(name), line)
        if m:
            vectorized.add(int(m.group(1)))
    loops = innermost_loops(c_text, name)
    if not loops:
        errors.append("%s: no loop found in the statements' functions" % name)
    c_lines = c_text.split("\n")
    for no, last in loops:
        # a register sum: GCC may report it vectorized with the sum still in program order
        # (lane by lane); the pragma is what lets it keep partial sums per lane
        sums = any(re.search(r"dtl__acc\d* \+=", c_lines[k - 1]) for k in range(no, last + 1))
        if sums and not any("simd" in c_lines[k] and "reduction(+: dtl__acc)" in c_lines[k] or "omp simd reduction" in c_lines[k]
                            for k in range(max(0, no - 7), no - 1)):
            errors.append("%s: the register sum of line %d is not marked for SIMD lanes" % (name, no))
        # GCC places the report of a loop with several reductions (the rewrite jam's rows) at
        # its `#pragma omp simd`, the lines just above it
        pragma = next((k for k in range(no - 1, max(0, no - 4), -1) if "#pragma omp simd" in c_lines[k - 1]), no)
        if not any(pragma <= v <= last for v in vectorized):
            errors.append("%s: the innermost loop at %s.c:%d is not vectorized:\n    %s" % (name, name, no, c_lines[no - 1].strip()))
    if errors:
        return errors
    exe = base + "_exe"
    r = subprocess.run([DISTALC, src, "--exe", "-o", exe], capture_output=True, text=True)
    if r.returncode:
        return ["%s: distalc --exe failed: %s" % (name, r.stderr.strip())]
    for ranks in (1, 3):
        args = [MPIRUN, "-np", str(ranks), "--oversubscribe", exe, "--validate"]
        if name == "spmm":
            args += ["--density", "0.05"]
        r = subprocess.run(args, capture_output=True, text=True, timeout=300)
        if r.returncode or "ok" not in r.stdout:
            errors.append("%s at %d ranks: --validate failed:\n%s%s" % (name, ranks, r.stdout[-1500:], r.stderr[-1500:]))
    return errors


def run_checks(programs, check, prefix):
    """check(name, program, work dir) -> error lines for each program, printed as PASS/FAIL
    lines; returns the number that failed (threads.py uses it too)"""
    failures = 0
    with tempfile.TemporaryDirectory(prefix=prefix) as work:
        for name, prog in programs.items():
            errors = check(name, prog, work)
            for e in errors:
                print("FAIL  " + e)
            if not errors:
                print("PASS  %s" % name)
            failures += bool(errors)
    return failures


def main():
    failures = run_checks(PROGRAMS, check, "distal-vec-")
    print("vectorize: %d passed, %d failed" % (len(PROGRAMS) - failures, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
