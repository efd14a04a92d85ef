"""structural.py -- structural zeros of sparse operands (README, "Sparse tensors").

tests/e2e/structural/zeros.dtl divides by a dense vector d that holds zeros and multiplies
by a vector x that holds an infinity and a NaN.  Where a sparse operand holds no entry, a
product with it, a quotient of it and a call that keeps zero of it are 0 (not the NaN of
0 * inf or 0 / 0), on every loop the compiler chooses (stored coordinates, the union of
several operands', every coordinate with a search after a reorder).  Each result is computed
here from the operands' patterns, independently of the compiler, and compared at 1 to 4
ranks (NaN and infinities only where expected, the same); every run also passes --validate.
Needs DISTALC, MPIRUN (default mpirun) and the DISTAL_* flags of --exe."""

import os
import subprocess
import sys
import tempfile

import numpy as np

SRC = os.path.join(os.environ.get("top_srcdir", "."), "tests", "e2e", "structural", "zeros.dtl")
N, M = 7, 6


def write_mtx(path, a):
    r, c = np.nonzero(a)
    with open(path, "w") as f:
        f.write("%%%%MatrixMarket matrix coordinate real general\n%d %d %d\n" % (a.shape[0], a.shape[1], len(r)))
        for i, j in zip(r, c):
            f.write("%d %d %r\n" % (i + 1, j + 1, float(a[i, j])))


def where(mask, v):
    """v where mask, else a structural 0"""
    return np.where(mask, v, 0.0)


def expected(A, B, Cs, d, x):
    a, b, c = A != 0, B != 0, Cs != 0
    with np.errstate(all="ignore"):
        out = {}
        out["C1"] = where(a, A / d[None, :])
        out["C2"] = where(b, B / A)
        out["C3"] = where(a, A * x[None, :]) + where(b, B / d[None, :])
        out["S1"] = where(a & b, A * B * x[None, :])
        out["y1"] = where(a, A * x[None, :]).sum(axis=1)
        out["y2"] = (where(a, A * x[None, :]) - where(b, B * x[None, :])).sum(axis=1)
        out["y3"] = (where(c, Cs * x[None, :]) + where(a, np.sqrt(np.abs(A)) * x[None, :])).sum(axis=1)
        out["y4"] = out["y1"]
        out["s1"] = np.array(where(b, B * x[None, :]).sum())
    return out


def same(got, want):
    """equal where finite (to rounding), NaN where NaN, the same infinity where infinite"""
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    if got.shape != want.shape:
        return False
    fin = np.isfinite(want)
    if not np.array_equal(np.isnan(got), np.isnan(want)):
        return False
    if not np.array_equal(got[np.isinf(want)], want[np.isinf(want)]):
        return False
    return np.allclose(got[fin], want[fin], rtol=1e-12, atol=1e-12)


def build(src, exe, label):
    """distalc SRC --exe -o EXE; False, with the compiler's output printed, where it fails"""
    p = subprocess.run([os.environ["DISTALC"], src, "--exe", "-o", exe], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True)
    if p.returncode:
        print("FAIL %s: %s does not build\n%s" % (label, os.path.basename(src), p.stdout))
    return p.returncode == 0


def main():
    mpirun = os.environ.get("MPIRUN", "mpirun")
    rng = np.random.default_rng(7)
    fails = runs = 0
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "zeros")
        if not build(SRC, exe, "structural"):
            return 1
        for trial in range(2):
            A = np.where(rng.random((N, M)) < 0.35, rng.uniform(0.5, 2.0, (N, M)), 0.0)
            B = np.where(rng.random((N, M)) < 0.35, rng.uniform(-2.0, -0.5, (N, M)), 0.0)
            Cs = np.where(rng.random((N, M)) < 0.35, rng.uniform(0.5, 2.0, (N, M)), 0.0)
            A[2, :] = 0  # an empty row
            B[:, 4] = 0  # an empty column of B
            d = rng.uniform(1.0, 2.0, M)
            d[[1, 4]] = 0.0  # zero divisors
            x = rng.uniform(-1.0, 1.0, M)
            x[3] = np.inf if trial == 0 else -np.inf
            x[5] = np.nan if trial == 0 else 1.0
            for name, arr in (("A", A), ("B", B), ("Cs", Cs)):
                write_mtx(os.path.join(tmp, name + ".mtx"), arr)
            np.save(os.path.join(tmp, "d.npy"), d)
            np.save(os.path.join(tmp, "x.npy"), x)
            want = expected(A, B, Cs, d, x)
            for ranks in (1, 2, 3, 4):
                runs += 1
                outs = sorted(want)
                cmd = [mpirun, "-np", str(ranks), "--oversubscribe", exe, "--validate"]
                for name in ("A", "B", "Cs"):
                    cmd += ["--load", "%s=%s" % (name, os.path.join(tmp, name + ".mtx"))]
                cmd += ["--load", "d=" + os.path.join(tmp, "d.npy"), "--load", "x=" + os.path.join(tmp, "x.npy")]
                for o in outs:
                    cmd += ["--save", "%s=%s" % (o, os.path.join(tmp, "out_%s.npy" % o))]
                try:
                    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                                       timeout=120)
                    text, rc = r.stdout, r.returncode
                except subprocess.TimeoutExpired:
                    text, rc = "(timed out)", -1
                bad = [] if rc == 0 else ["exit status %d" % rc]
                bad += [l for l in text.splitlines() if l.startswith("validate") and "MISMATCH" in l]
                for o in outs:
                    path = os.path.join(tmp, "out_%s.npy" % o)
                    if not os.path.exists(path):
                        bad.append("%s not saved" % o)
                    elif not same(np.load(path), want[o]):
                        bad.append("%s = %s, expected %s" % (o, np.load(path).tolist(), want[o].tolist()))
                label = "structural zeros: trial %d, %d ranks" % (trial, ranks)
                if bad:
                    fails += 1
                    print("FAIL " + label)
                    for b in bad:
                        print("    | " + b)
                    for l in text.splitlines()[-15:]:
                        print("    | " + l)
                else:
                    print("PASS " + label)
    print("structural: %d passed, %d failed" % (runs - fails, fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
