#!/usr/bin/env python3
"""bench/roofline.py -- every leaf against the machine's limits, measured in the same run
(roofline.sh runs this).

For each leaf (gemm, gemv, dot, axpy, ttv, ttm, mttkrp, innerprod, element-wise statements of
1, 2 and 3 operands, CSR SpMV of a random and of the 2-D Poisson matrix, SpMM, CSF TTV) a small .dtl program on a 1-D machine, compiled
with distalc --exe, is timed (--json, best of --iters after a warm-up); the bytes it must
move and the flops it must do (compulsory traffic: every operand read once, every result
written once; 12 bytes per stored double with 32-bit indices) give its rate, compared with
the STREAM triad and read-only (dot) bandwidths (stream.c) or the dgemm rate (dgemm_ref.c)
measured in the same run on the same ranks and threads.  Configurations: 1 rank x 1 thread,
2 ranks x 1 thread, and 1 rank x 2 threads (OpenMP/OpenBLAS threads: the BLAS-backed leaves
use them; generated loops run on one thread unless scheduled with parallelize).  Every
program is checked once with --validate (sparse ones at a size that the dense serial
reference holds).  mttkrp and the random SpMV are also timed against their serial references
(mttkrp_ref.c, spmv_ref.c: one process, same data).  No timing is asserted.  Writes roofline.md,
roofline.csv and roofline.svg (the fractions as bars, the 0.9 target marked) to --out
(default bench/results)."""
import argparse
import csv
import html
import json
import os
import subprocess
import sys

import blas_env  # beside this file

HERE = os.path.dirname(os.path.abspath(__file__))
DISTALC = os.environ.get("DISTALC", "distalc")
MPIRUN = os.environ.get("MPIRUN", "mpirun")
MPICC = os.environ.get("MPICC", "mpicc")

# name, program (params n, m, p, q as used), limit ("triad", "read", "dgemm"),
# bytes(v), flops(v) from the params v, extra run arguments
LEAVES = [
    ("gemm", "A(i, j) = B(i, k) * C(k, j)", "tensor A(n, n) @ M(ij -> i);\ntensor B(n, n) @ M(ij -> i);\ntensor C(n, n);",
     ".substitute({ii, j, k}, gemm)", "dgemm", lambda v: 8 * 3 * v["n"] ** 2, lambda v: 2 * v["n"] ** 3, {"n": 1024}),
    ("gemv", "y(i) = A(i, j) * x(j)", "tensor y(n) @ M(i -> i);\ntensor A(n, m) @ M(ij -> i);\ntensor x(m);",
     ".substitute({ii, j}, gemv)", "read", lambda v: 8 * (v["n"] * v["m"] + v["n"] + v["m"]), lambda v: 2 * v["n"] * v["m"],
     {"n": 4096, "m": 4096}),
    ("dot", "s = x(i) * y(i)", "tensor s;\ntensor x(n) @ M(i -> i);\ntensor y(n) @ M(i -> i);", "", "read",
     lambda v: 16 * v["n"], lambda v: 2 * v["n"], {"n": 1 << 24}),
    ("axpy", "y(i) = x(i) * 3 + y(i)", "tensor y(n) @ M(i -> i);\ntensor x(n) @ M(i -> i);", "", "triad",
     lambda v: 24 * v["n"], lambda v: 2 * v["n"], {"n": 1 << 24}),
    ("element-wise, 1 operand", "y(i) = x(i) * 3", "tensor y(n) @ M(i -> i);\ntensor x(n) @ M(i -> i);", "", "triad",
     lambda v: 16 * v["n"], lambda v: v["n"], {"n": 1 << 24}),
    ("element-wise, 2 operands", "z(i) = x(i) + y(i)", "tensor z(n) @ M(i -> i);\ntensor x(n) @ M(i -> i);\ntensor y(n) @ M(i -> i);",
     "", "triad", lambda v: 24 * v["n"], lambda v: v["n"], {"n": 1 << 24}),
    ("element-wise, 3 operands", "w(i) = x(i) * y(i) + z(i)",
     "tensor w(n) @ M(i -> i);\ntensor x(n) @ M(i -> i);\ntensor y(n) @ M(i -> i);\ntensor z(n) @ M(i -> i);", "", "triad",
     lambda v: 32 * v["n"], lambda v: 2 * v["n"], {"n": 1 << 24}),
    ("ttv", "A(i, j) = B(i, j, k) * c(k)", "tensor A(n, m) @ M(ij -> i);\ntensor B(n, m, p) @ M(ijk -> i);\ntensor c(p);",
     ".substitute({ii, j, k}, ttv)", "read", lambda v: 8 * (v["n"] * v["m"] * v["p"] + v["n"] * v["m"]),
     lambda v: 2 * v["n"] * v["m"] * v["p"], {"n": 512, "m": 512, "p": 64}),
    ("ttm", "A(i, j, l) = B(i, j, k) * C(k, l)",
     "tensor A(n, m, q) @ M(ijl -> i);\ntensor B(n, m, p) @ M(ijk -> i);\ntensor C(p, q);", ".substitute({ii, j, l, k}, ttm)",
     "dgemm", lambda v: 8 * v["n"] * v["m"] * (v["p"] + v["q"]), lambda v: 2 * v["n"] * v["m"] * v["p"] * v["q"],
     {"n": 256, "m": 256, "p": 64, "q": 32}),
    ("mttkrp", "A(i, l) = B(i, j, k) * C(j, l) * D(k, l)",
     "tensor A(n, q) @ M(il -> i);\ntensor B(n, m, p) @ M(ijk -> i);\ntensor C(m, q);\ntensor D(p, q);",
     ".substitute({ii, l, j, k}, mttkrp)", "dgemm", lambda v: 8 * v["n"] * v["m"] * v["p"],
     lambda v: 2 * v["n"] * v["m"] * v["p"] * v["q"], {"n": 128, "m": 128, "p": 128, "q": 16}),
    ("innerprod", "s = B(i, j, k) * C(i, j, k)", "tensor s;\ntensor B(n, m, p) @ M(ijk -> i);\ntensor C(n, m, p) @ M(ijk -> i);",
     ".substitute({ii, j, k}, innerprod)", "read", lambda v: 16 * v["n"] * v["m"] * v["p"],
     lambda v: 2 * v["n"] * v["m"] * v["p"], {"n": 256, "m": 256, "p": 128}),
    ("CSR SpMV", "y(i) = A(i, j) * x(j)", "tensor y(n) @ M(i -> i);\ntensor A(n, n) csr @ M(ij -> i);\ntensor x(n) @ M(i -> i);",
     "", "read", None, None, {"n": 1000000}),
    ("CSR SpMV, 2-D Poisson", "y(i) = A(i, j) * x(j)",
     "tensor y(n) @ M(i -> i);\ntensor A(n, n) csr @ M(ij -> i);\ntensor x(n) @ M(i -> i);", "", "read", None, None,
     {"n": 1000000}),
    ("SpMM (CSR x dense)", "C(i, k) = A(i, j) * B(j, k)",
     "tensor C(n, q) @ M(ik -> i);\ntensor A(n, n) csr @ M(ij -> i);\ntensor B(n, q);", ".reorder({ii, j, k})", "read",
     None, None,
     {"n": 200000, "q": 16}),
    ("CSF TTV", "A(i, j) = B(i, j, k) * c(k)",
     "tensor A(n, m) @ M(ij -> i);\ntensor B(n, m, p) csf @ M(ijk -> i);\ntensor c(p);", "", "read", None, None,
     {"n": 256, "m": 256, "p": 256}),
]
DENSITY = {"CSR SpMV": 1e-5, "SpMM (CSR x dense)": 5e-5, "CSF TTV": 0.1}
POISSON = "CSR SpMV, 2-D Poisson"  # read from a .mtx file: the 5-point matrix of a square grid
# the serial references of two leaves (one process, the same data): time ratio reference / leaf
REFERENCES = {"mttkrp": "mttkrp_ref", "CSR SpMV": "spmv_ref"}


def write_poisson(path, g):
    """the 5-point Laplacian of a g x g grid as Matrix Market (rows in order)"""
    n = g * g
    with open(path, "w") as f:
        f.write("%%%%MatrixMarket matrix coordinate real general\n%d %d %d\n" % (n, n, 5 * n - 4 * g))
        for r in range(n):
            gi, gj = divmod(r, g)
            row = []
            if gi > 0: row.append("%d %d -1\n" % (r + 1, r + 1 - g))
            if gj > 0: row.append("%d %d -1\n" % (r + 1, r))
            row.append("%d %d 4\n" % (r + 1, r + 1))
            if gj < g - 1: row.append("%d %d -1\n" % (r + 1, r + 2))
            if gi < g - 1: row.append("%d %d -1\n" % (r + 1, r + 1 + g))
            f.write("".join(row))


def run(cmd, env, timeout=600):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, env=env,
                           timeout=timeout)
        return p.returncode, p.stdout
    except subprocess.TimeoutExpired:
        return None, ""


def first_json(text):
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    return None


def write_svg(rows, path):
    """the table as a picture: per leaf, one bar per ranks x threads configuration, its
    fraction of the machine's limit, with the 0.9 target marked (plain SVG 1.1)"""
    leaves = []
    for r in rows:
        if r[0] not in leaves:
            leaves.append(r[0])
    configs = sorted({(r[1], r[2]) for r in rows})
    colors = ["#3b6ea5", "#e07b39", "#5a9e5a", "#9467bd"]
    frac = {(r[0], r[1], r[2]): r[10] for r in rows}
    bar, gap, left, top, width = 9, 8, 190, 40, 520
    height = top + len(leaves) * (len(configs) * bar + gap) + 50
    xmax = max([1.2] + [f for f in frac.values() if f is not None])
    X = lambda f: left + width * f / xmax
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="%d" height="%d" font-family="sans-serif" font-size="11">'
           % (left + width + 30, height),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="18" font-size="13">bench/roofline.sh: each leaf\'s rate as a fraction of the machine\'s limit '
           '(STREAM bandwidth or dgemm rate)</text>' % 10]
    y = top
    for leaf in leaves:
        out.append('<text x="%d" y="%d" text-anchor="end">%s</text>' % (left - 6, y + len(configs) * bar / 2 + 4, html.escape(leaf)))
        for k, c in enumerate(configs):
            f = frac.get((leaf, c[0], c[1]))
            if f is not None:
                out.append('<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>' % (left, y, X(f) - left, bar - 1,
                                                                                        colors[k % len(colors)]))
                out.append('<text x="%.1f" y="%d" font-size="9">%.2f</text>' % (X(f) + 3, y + bar - 2, f))
            y += bar
        y += gap
    for f in [0.25 * q for q in range(int(xmax / 0.25) + 1)]:
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ccc"/>' % (X(f), top - 4, X(f), y))
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%.2f</text>' % (X(f), y + 14, f))
    out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#c00" stroke-dasharray="4,3"/>' % (X(0.9), top - 4, X(0.9), y))
    out.append('<text x="%.1f" y="%d" fill="#c00" text-anchor="middle">target 0.9</text>' % (X(0.9), top - 8))
    for k, c in enumerate(configs):
        out.append('<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%d rank%s x %d thread%s</text>' % (
            left + 130 * k, y + 24, colors[k % len(colors)], left + 130 * k + 14, y + 33, c[0], "" if c[0] == 1 else "s",
            c[1], "" if c[1] == 1 else "s"))
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--quick", action="store_true", help="tiny sizes, one configuration")
    a = ap.parse_args()
    b = os.path.join(a.out, "build-roofline")
    os.makedirs(b, exist_ok=True)
    base = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cflags = os.environ.get("DISTAL_CFLAGS", "").split()
    libs = os.environ.get("DISTAL_LIBS", "").split()
    fail = 0
    # the references
    for name, src, extra in (("stream", "stream.c", ["-fopenmp"]), ("dgemm_ref", "dgemm_ref.c", ["-fopenmp"]),
                             ("mttkrp_ref", "mttkrp_ref.c", []), ("spmv_ref", "spmv_ref.c", ["-march=native"])):
        p = subprocess.run([MPICC, "-O3", "-std=c11"] + extra + [os.path.join(HERE, src), "-o", os.path.join(b, name)] + cflags +
                           libs + ["-lm"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        if p.returncode:
            print("roofline: %s does not build:\n%s" % (src, p.stdout), file=sys.stderr)
            return 1
    # the leaves
    exes = {}
    for name, stmt, decls, sched, limit, _, _, params in LEAVES:
        tag = "".join(c if c.isalnum() else "_" for c in name)
        head = "".join("param %s = %d;\n" % kv for kv in params.items())
        dist = "\n  .distribute({i}, {io}, {ii}, M)"
        text = head + "machine M = grid(g);\n" + decls + "\n" + stmt + dist + ("\n  " + sched if sched else "") + ";\n"
        path = os.path.join(b, tag + ".dtl")
        with open(path, "w") as f:
            f.write(text)
        rc, out = run([DISTALC, path, "--exe", "-o", os.path.join(b, tag)], base)
        if rc != 0:
            print("roofline: %s does not compile:\n%s\n%s" % (name, text, out), file=sys.stderr)
            fail = 1
            continue
        exes[name] = os.path.join(b, tag)
    core = blas_env.set_openblas_core(next(iter(exes.values())), lambda m: print("roofline: " + m)) if exes else None
    if core:
        base["OPENBLAS_CORETYPE"] = core
    configs = [(1, 1)] if a.quick else [(1, 1), (2, 1), (1, 2)]
    rows = []
    for P, T in configs:
        env = dict(base, OMP_NUM_THREADS=str(T), OPENBLAS_NUM_THREADS=str(T))
        mpi = [MPIRUN, "-np", str(P), "--oversubscribe", "--bind-to", "none"]
        n_stream = 1000000 if a.quick else 20000000
        rc, out = run(mpi + [os.path.join(b, "stream"), "-N", str(n_stream), "--iters", str(a.iters), "--warmup", "1"], env)
        lim = {}
        for line in out.splitlines():
            if line.startswith("{"):
                j = json.loads(line)
                lim["triad" if j["kernel"] == "triad" else "read"] = j["gbytes_per_s"]
        rc, out = run([os.path.join(b, "dgemm_ref"), "-n", "256" if a.quick else "2048", "--iters", str(a.iters)], env)
        j = first_json(out)
        lim["dgemm"] = j["gflops"] * P if j else None  # one process's rate; P ranks have P times the cores
        for name, stmt, decls, sched, limit, fbytes, fflops, params in LEAVES:
            if name not in exes:
                continue
            v = {k: (max(8, int(x ** 0.5)) if a.quick and x > 64 else x) for k, x in params.items()}
            if a.quick:
                v = {k: min(x, 64) for k, x in params.items()}
            if name == POISSON:
                g = int(v["n"] ** 0.5)
                v["n"] = g * g
                mtx = os.path.join(b, "poisson%d.mtx" % g)
                if not os.path.exists(mtx):
                    write_poisson(mtx + ".part", g)
                    os.replace(mtx + ".part", mtx)
            pargs = sum((["-%s" % k, str(x)] for k, x in v.items()), [])
            if name in DENSITY:
                pargs += ["--density", str(DENSITY[name] if not a.quick else 0.2)]
            if name == POISSON:
                pargs += ["--load", "A=" + mtx]
            if (P, T) == configs[0]:
                # the serial reference of --validate holds a sparse tensor densely: sparse leaves
                # are validated at a smaller size
                vv = pargs if name not in DENSITY else \
                    sum((["-%s" % k, str(min(x, 300))] for k, x in v.items()), []) + ["--density", "0.05"]
                if name == POISSON:
                    write_poisson(os.path.join(b, "poisson17.mtx"), 17)
                    vv = ["-n", str(17 * 17), "--load", "A=" + os.path.join(b, "poisson17.mtx")]
                rc, out = run(mpi + [exes[name]] + vv + ["--validate"], env)
                if rc != 0:
                    print("roofline: %s fails --validate:\n%s" % (name, out[-2000:]), file=sys.stderr)
                    fail = 1
            rc, out = run(mpi + [exes[name]] + pargs + ["--iters", str(a.iters), "--warmup", "1", "--json"], env)
            j = first_json(out)
            if rc != 0 or not j:
                fail = 1
                continue
            t = j["min_s"]
            if fbytes:
                by, fl = fbytes(v), fflops(v)
            elif name == POISSON:  # 5 entries a row but at the grid's edges; x read once (banded)
                g = int(round(v["n"] ** 0.5))
                nnz = 5 * v["n"] - 4 * g
                by, fl = nnz * 12 + 4 * v["n"] + 16 * v["n"], 2 * nnz
            else:  # sparse: about density x extent stored entries per row (libdistal's fill)
                d = DENSITY[name] if not a.quick else 0.2
                if name == "CSF TTV":
                    nnz = v["n"] * v["m"] * max(1, round(d * v["p"]))
                    by, fl = nnz * 12 + 8 * v["n"] * v["m"], 2 * nnz
                else:
                    q = v.get("q", 1)
                    nnz = v["n"] * max(1, round(d * v["n"]))
                    by, fl = nnz * 12 + 4 * v["n"] + 8 * 2 * v["n"] * q, 2 * nnz * q
            gbs, gfl = by / t / 1e9, fl / t / 1e9
            ref = lim.get(limit)
            frac = (gfl / ref if limit == "dgemm" else gbs / ref) if ref else None
            vs = None
            if name in REFERENCES and P == 1:  # the serial reference on the same data and threads
                if name == "mttkrp":
                    rcmd = [os.path.join(b, "mttkrp_ref"), "-n", str(v["n"]), "-m", str(v["m"]), "-p", str(v["p"]), "-r",
                            str(v["q"]), "--iters", str(a.iters), "--warmup", "1"]
                    rc, out = run(rcmd, env)
                    j = first_json(out)
                    rt = j["min_s"] if rc == 0 and j else None
                else:
                    d = DENSITY[name] if not a.quick else 0.2
                    rc, out = run(mpi + [os.path.join(b, "spmv_ref"), str(v["n"]), str(v["n"]), str(d), "1", str(a.iters)], env)
                    j = first_json(out)
                    rt = j["time"] if rc == 0 and j else None
                vs = rt / t if rt else None
            rows.append((name, P, T, t, by, fl, gbs, gfl, limit, ref, frac, vs))
    out = os.path.join(a.out, "roofline.md")
    with open(out, "w") as f:
        f.write("# Every leaf against the machine's limits (bench/roofline.sh)\n\n")
        f.write("Best of %d runs; bytes and flops are the compulsory traffic and work of the leaf; the limit is the STREAM "
                "triad or read-only bandwidth, or the dgemm rate, measured in the same run on the same ranks and threads.\n\n"
                % a.iters)
        f.write("| leaf | ranks x threads | time (s) | GB/s | GFLOP/s | limit | limit's rate | fraction of the limit | "
                "serial reference's time / the leaf's |\n")
        f.write("|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write("| %s | %d x %d | %.4g | %.3g | %.3g | %s | %s | %s | %s |\n" % (
                r[0], r[1], r[2], r[3], r[6], r[7], {"triad": "STREAM triad", "read": "STREAM read", "dgemm": "dgemm"}[r[8]],
                "%.3g %s" % (r[9], "GFLOP/s" if r[8] == "dgemm" else "GB/s") if r[9] else "-",
                "%.2f" % r[10] if r[10] is not None else "-", "%.2f" % r[11] if r[11] is not None else "-"))
        f.write("\nSerial references (one process, the same data and threads, 1 rank only): mttkrp_ref.c (Khatri-Rao "
                "product and one dgemm) for mttkrp, spmv_ref.c (the textbook CSR loop with int indices) for the random CSR "
                "SpMV; above 1 the leaf is faster.\n")
    with open(os.path.join(a.out, "roofline.csv"), "w", newline="") as f:
        w = csv.writer(f)  # (leaf names hold commas)
        w.writerow(["leaf", "ranks", "threads", "time_s", "bytes", "flops", "gbytes_per_s", "gflops", "limit", "limit_rate",
                    "fraction", "vs_reference"])
        for r in rows:
            w.writerow(r)
    write_svg(rows, os.path.join(a.out, "roofline.svg"))
    with open(out) as f:
        print(f.read())
    return fail


if __name__ == "__main__":
    sys.exit(main())
