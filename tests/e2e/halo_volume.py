"""halo_volume.py -- the bytes a halo exchange moves, against matrices whose halo is known in
closed form.

y(i) = A(i, j) * x(j) with A in CSR row blocks over a 1-D grid of G ranks and x in the same
blocks (block size s = ceil(n / G)): each rank receives x only at the columns its rows store
outside its own block, from their owners, and --stats counts them under `halo`:
  - tridiagonal: a rank with rows receives one entry from each neighbour that has rows
    (8 bytes, one message each) and sends one to each;
  - block-diagonal with blocks equal to the ranks' blocks: nothing moves (no halo line);
  - the 5-point Poisson matrix of a k x k grid (n = k * k, rows numbered row-major) with G
    dividing k, so that every rank's block is whole grid rows: k entries from each neighbour;
  - every rank's first row storing all columns but every 10th: the columns it needs of an owner
    fill their span but for gaps of at most 1/8 of their number, so it asks for the whole span
    (one run, sent from the owner's block and received into the buffer as it is);
  - the same with every third column only: the gaps are wider, it asks for the columns alone.
Beside the values, each rank of an exchange over several ranks makes one agreement per compute
on the inspector's cache (an allreduce of 4 bytes); nothing else moves.
Every run also checks y against NumPy, and the per-rank counts against the ghost columns
counted directly from the matrix.  Runs with --warmup 1 --iters 2: the counted run reuses
what the inspector found in the first.  Needs DISTALC, MPIRUN (default mpirun), and the
DISTAL_* flags of --exe."""

import os
import subprocess
import sys
import tempfile

import numpy as np

SRC = os.path.join(os.environ.get("top_srcdir", "."), "tests", "e2e", "halo", "spmv.dtl")


def tridiagonal(n):
    a = np.zeros((n, n))
    for i in range(n):
        for j in (i - 1, i, i + 1):
            if 0 <= j < n:
                a[i, j] = 1.0 + i + 0.25 * j
    return a


def block_diagonal(n, g):
    s = -(-n // g)
    a = np.zeros((n, n))
    for c in range(g):
        lo, hi = min(n, c * s), min(n, (c + 1) * s)
        a[lo:hi, lo:hi] = np.arange(1, (hi - lo) ** 2 + 1).reshape(hi - lo, hi - lo)
    return a


def poisson(k):
    n = k * k
    a = np.zeros((n, n))
    for r in range(k):
        for c in range(k):
            i = r * k + c
            a[i, i] = 4.0
            for rr, cc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
                if 0 <= rr < k and 0 <= cc < k:
                    a[i, rr * k + cc] = -1.0
    return a


def gappy(n, g, keep):
    """the diagonal, and in every rank's first row the columns j with keep(j)"""
    a = np.diag(np.arange(1.0, n + 1))
    for lo, hi in blocks(n, g):
        if lo < hi:
            for j in range(n):
                if keep(j):
                    a[lo, j] = 0.5 + j
    return a


def blocks(n, g):
    s = -(-n // g)
    return [(min(n, c * s), min(n, (c + 1) * s)) for c in range(g)]


def closed_form(kind, n, g, k=None):
    """Per rank: (bytes sent, messages sent, bytes received, messages received)."""
    b = blocks(n, g)
    out = []
    for c, (lo, hi) in enumerate(b):
        if kind == "block-diagonal" or lo >= hi:
            out.append((0, 0, 0, 0))
            continue
        # neighbours with rows: the rank before (if this block does not start at 0) and the
        # rank after (if rows follow this block)
        peers = (lo > 0) + (hi < n)
        per = 1 if kind == "tridiagonal" else k
        out.append((8 * per * peers, peers, 8 * per * peers, peers))
    return out


def asked(cols):
    """what a rank asks of one owner for the distinct columns cols: their whole span where the
    gaps are at most 1/8 of their number, else the columns"""
    span = max(cols) - min(cols) + 1
    return span if (span - len(cols)) * 8 <= len(cols) else len(cols)


def closed_gappy(kind, n, g):
    """most-columns: a rank asks each other rank with rows for its whole block but where the
    block's first or last column is a multiple of 10 (then from the next or to the previous
    one); third-columns: for the multiples of 3 in it"""
    b = blocks(n, g)

    def ask(o):
        lo, hi = b[o]
        if kind == "third-columns":
            return len([j for j in range(lo, hi) if j % 3 == 0])
        cols = [j for j in range(lo, hi) if j % 10 != 0]
        return cols[-1] - cols[0] + 1 if cols else 0

    out = []
    for c, (lo, hi) in enumerate(b):
        if lo >= hi:
            out.append((0, 0, 0, 0))
            continue
        peers = [o for o in range(g) if o != c and b[o][0] < b[o][1] and ask(o)]
        out.append((sum(8 * ask(c) for _ in peers), len(peers), sum(8 * ask(o) for o in peers), len(peers)))
    return out


def from_matrix(a, g):
    """The same counts from the matrix: the distinct columns outside a rank's block that its
    rows store, by owner (their span where asked() widens them)."""
    n = a.shape[0]
    b = blocks(n, g)
    s = -(-n // g)
    need = [[set() for _ in range(g)] for _ in range(g)]  # need[c][o]: columns c asks of o
    for c, (lo, hi) in enumerate(b):
        for j in set(np.nonzero(a[lo:hi])[1].tolist()):
            if not lo <= j < hi:
                need[c][j // s].add(j)
    out = []
    for c in range(g):
        recv = [asked(need[c][o]) for o in range(g) if need[c][o]]
        send = [asked(need[o][c]) for o in range(g) if need[o][c]]
        out.append((8 * sum(send), len(send), 8 * sum(recv), len(recv)))
    return out


def write_mtx(path, a):
    r, c = np.nonzero(a)
    with open(path, "w") as f:
        f.write("%%MatrixMarket matrix coordinate real general\n")
        f.write("%d %d %d\n" % (a.shape[0], a.shape[1], len(r)))
        for i, j in zip(r, c):
            f.write("%d %d %r\n" % (i + 1, j + 1, float(a[i, j])))


def stats(text):
    """rank -> (bytes sent, messages sent, bytes received, messages received) of op halo, the
    same of op allreduce, and the set of ops that moved anything."""
    halo, allreduce, ops = {}, {}, set()
    for line in text.splitlines():
        f = line.split()
        if len(f) == 7 and f[0].isdigit():
            ops.add(f[2])
            if f[2] in ("halo", "allreduce"):
                (halo if f[2] == "halo" else allreduce)[int(f[0])] = tuple(int(v) for v in f[3:])
    return halo, allreduce, ops


def main():
    distalc = os.environ.get("DISTALC", "distalc")
    mpirun = os.environ.get("MPIRUN", "mpirun")
    cases = [("tridiagonal", 10, g, None) for g in (1, 2, 3, 4)]
    cases += [("tridiagonal", 3, 4, None), ("tridiagonal", 9, 4, None)]  # a rank without rows
    cases += [("block-diagonal", 10, g, None) for g in (2, 3, 4)]
    cases += [("poisson", 144, g, 12) for g in (2, 3, 4)]
    cases += [(kind, n, g, None) for kind in ("most-columns", "third-columns") for n, g in ((40, 2), (41, 3), (50, 4))]
    fails = 0
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([distalc, SRC, "--exe", "-o", os.path.join(d, "spmv")], check=True)
        rng = np.random.default_rng(7)
        for kind, n, g, k in cases:
            a = tridiagonal(n) if kind == "tridiagonal" else block_diagonal(n, g) if kind == "block-diagonal" else \
                gappy(n, g, lambda j: j % 10 != 0) if kind == "most-columns" else gappy(n, g, lambda j: j % 3 == 0) \
                if kind == "third-columns" else poisson(k)
            x = rng.uniform(-1, 1, n)
            write_mtx(os.path.join(d, "a.mtx"), a)
            np.save(os.path.join(d, "x.npy"), x)
            ypath = os.path.join(d, "y.npy")
            if os.path.exists(ypath):
                os.remove(ypath)
            cmd = [mpirun, "-np", str(g), "--oversubscribe", os.path.join(d, "spmv"), "-n", str(n),
                   "--load", "A=" + os.path.join(d, "a.mtx"), "--load", "x=" + os.path.join(d, "x.npy"),
                   "--save", "y=" + ypath, "--stats", "--warmup", "1", "--iters", "2"]
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
            label = "%s n=%d at %d ranks" % (kind, n, g)
            halo, allreduce, ops = stats(p.stdout)
            want = closed_form(kind, n, g, k) if k or kind != "most-columns" and kind != "third-columns" else \
                closed_gappy(kind, n, g)
            got = [halo.get(c, (0, 0, 0, 0)) for c in range(g)]
            why = []
            if p.returncode != 0:
                why.append("exit %d" % p.returncode)
            elif not np.allclose(np.load(ypath), a @ x, rtol=1e-12, atol=1e-12):
                why.append("y differs from NumPy's A @ x")
            if got != want:
                why.append("halo per rank %s, closed form %s" % (got, want))
            if want != from_matrix(a, g):
                why.append("closed form %s, from the matrix %s" % (want, from_matrix(a, g)))
            # beside the values, one agreement per compute on the inspector's cache: an
            # allreduce of one int (4 bytes) on every rank of an exchange of several ranks
            agree = {c: (4, 1, 4, 1) for c in range(g)} if g > 1 else {}
            if allreduce != agree:
                why.append("allreduce per rank %s, one agreement of 4 bytes expected" % allreduce)
            if ops - {"halo", "allreduce"}:
                why.append("other communication: %s" % sorted(ops - {"halo", "allreduce"}))
            if why:
                fails += 1
                print("FAIL %s: %s" % (label, "; ".join(why)))
                print("    | " + p.stdout.replace("\n", "\n    | "))
            else:
                print("PASS %s: bytes received per rank %s" % (label, [w[2] for w in got]))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
