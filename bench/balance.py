#!/usr/bin/env python3
"""bench/balance.py -- the load balance of a sparse matrix-vector product on a power-law matrix
(bench/sparse.sh runs it after its tables; it runs alone too).

Row i of the N x N matrix holds about N / (i + 1)^0.8 / 4 entries (at least one) at random
columns, so the first rows hold most of them.  The SpMV of examples/app/spmv.dtl (n = m) is
compiled twice: as written (blocks of equal extent) and with A declared `balanced` and y, x
`balanced by A` (blocks of about equal stored entries).  At each rank count, --stats gives the
stored entries of A per rank (max / mean: the load of the busiest rank over a perfect split),
and at the rank counts the machine has cores for, the best time of --iters products.  Every run
is checked with --validate at the smallest size.  No timing is asserted.  Appends a table to
OUT/sparse.md (or prints it).

  bench/balance.py [-n N] [--ranks "2 4 8"] [--iters K] [--out DIR] [--quick]"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
DISTALC = os.environ.get("DISTALC", "distalc")
MPIRUN = os.environ.get("MPIRUN", "mpirun")


def power_law(n, path, near=False, seed=7):
    """Row i holds about n / (i + 1)^0.8 / 4 entries: at random columns, or (near) at columns
    within 2 k of the diagonal, k the row's count (a matrix whose halo is small)."""
    rnd = random.Random(seed)
    rows = []
    nnz = 0
    for i in range(n):
        k = max(1, int(n / (i + 1) ** 0.8 / 4))
        if near:
            cols = sorted(set((i + rnd.randrange(-2 * k, 2 * k + 1)) % n for _ in range(k)))
        else:
            cols = sorted(set(rnd.randrange(n) for _ in range(k)))
        rows.append(cols)
        nnz += len(cols)
    with open(path, "w") as f:
        f.write("%%%%MatrixMarket matrix coordinate real general\n%d %d %d\n" % (n, n, nnz))
        for i, cols in enumerate(rows):
            f.write("".join("%d %d %.6f\n" % (i + 1, j + 1, 1.0 + (i * 7 + j) % 13 / 8.0) for j in cols))
    return nnz


def run(cmd, cwd):
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=3600)
    if p.returncode:
        sys.exit("balance.py: %s failed:\n%s" % (" ".join(cmd), p.stdout[-3000:]))
    return p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=200000)
    ap.add_argument("--ranks", default="2 4 8")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.n, a.iters = 3000, 3
    cores = os.cpu_count() or 1
    env_np = ["--oversubscribe"]
    lines = ["", "Load balance on power-law matrices (bench/balance.py): n = %d, row i holding about n / (i + 1)^0.8 / 4 entries" % a.n,
             "at random columns, or at columns near the diagonal; the SpMV of examples/app/spmv.dtl with blocks of equal extent",
             "and with A `balanced` (y, x `balanced by A`).  max/mean: the stored entries of A on the busiest rank over their",
             "mean (--stats); times (best of %d products) where the machine has a core per rank; bytes: the most a rank" % a.iters,
             "receives per product (the halo).", "",
             "| matrix | ranks | max/mean, equal extents | max/mean, balanced | SpMV s, equal | SpMV s, balanced | speed balanced / equal | bytes, equal | bytes, balanced |",
             "|---|---|---|---|---|---|---|---|---|"]
    for near in (False, True):
        with tempfile.TemporaryDirectory(prefix="distal-balance-") as work:
            nnz = power_law(a.n, os.path.join(work, "a.mtx"), near)
            plain = open(os.path.join(TOP, "examples", "app", "spmv.dtl")).read().replace("tensor x(m)", "tensor x(n)").replace(
                "tensor A(n, m)", "tensor A(n, n)")
            bal = plain.replace("@ M(i -> i);", "@ M(i -> i) balanced by A;").replace("csr @ M(ij -> i);", "csr @ M(ij -> i) balanced;").replace(
                "@ M(j -> j);", "@ M(j -> j) balanced by A;")
            for stem, text in (("plain", plain), ("balanced", bal)):
                with open(os.path.join(work, stem + ".dtl"), "w") as f:
                    f.write(text)
                run([DISTALC, stem + ".dtl", "--exe", "-o", stem], work)
            for p in [int(r) for r in a.ranks.split()]:
                row = {}
                for stem in ("plain", "balanced"):
                    args = [MPIRUN, "-np", str(p)] + env_np + ["./" + stem, "-n", str(a.n), "--load", "A=a.mtx", "--stats", "--json",
                                                               "--iters", str(a.iters), "--warmup", "1"]
                    if a.quick:
                        args.append("--validate")
                    out = run(args, work)
                    m = re.search(r"entries of A per rank: min (\d+), max (\d+), mean ([0-9.]+), max/mean ([0-9.]+)", out)
                    js = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
                    recv = [int(l.split()[5]) for l in out.splitlines() if re.match(r"^\d+\s+\(", l) and len(l.split()) >= 7]
                    row[stem] = (float(m.group(4)) if m else float("nan"), js[0]["min_s"] if js and p <= cores else None,
                                 max(recv) if recv else 0)
                (sp, tp, bp), (sb, tb, bb) = row["plain"], row["balanced"]
                ratio = "%.2f" % (tp / tb) if tp and tb else "-"
                lines.append("| %s (%d entries) | %d | %.3f | %.3f | %s | %s | %s | %d | %d |" % (
                    "near the diagonal" if near else "random columns", nnz, p, sp, sb, "%.4f" % tp if tp else "-",
                    "%.4f" % tb if tb else "-", ratio, bp, bb))
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(os.path.join(a.out, "sparse.md"), "a") as f:
            f.write(text)


if __name__ == "__main__":
    main()
