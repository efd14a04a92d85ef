"""Sparse files end to end, through a generated executable (sparse_io.sh runs this).

Saving: --save T=F.mtx / F.tns writes the stored entries of a sparse tensor (Matrix
Market coordinate, real or integer, general; FROSTT), at 1, 2, 3, 4, 6 and 8 ranks, with
sizes that no grid divides evenly and replicated distributions; the files are read back
here (tests/e2e/sparse.py's independent readers, and a strict check of the layout) and
compared with what NumPy computes from the inputs.  Any other extension, .mtx or .tns for
a dense tensor and .mtx for a tensor of order 3 are rejected before the run, with one
message from rank 0 and no file written.

Reading: every kind of malformed .mtx / .tns line makes the run fail with one message,
from rank 0, that says FILE:LINE: error: with the right line, a nonzero exit and no hang,
at 1, 3 and 4 ranks.
"""
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np

TOP = os.environ.get("top_srcdir") or os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, os.path.join(TOP, "tests", "e2e"))
import sparse  # noqa: E402  (the independent readers)

DISTALC = os.environ.get("DISTALC", "distalc")
MPIRUN = os.environ.get("MPIRUN", "mpirun")
TIMEOUT = 60

PROGRAM = """\
param n = 13;
param m = 11;
param p = 5;
machine M = grid(gx, gy);
tensor A(n, m) csr @ M(xy -> x*);
tensor B(m, p) @ M(xy -> x*);
tensor E(n, m) {compressed, compressed} @ M(xy -> xy);
tensor C(n, m) csr @ M(xy -> *y);
tensor X(n, m, p) csf @ M(xyz -> xy);
tensor AI(n, m) int32 csr @ M(xy -> xy);
tensor I(n, m) int32 csr;
C(i, j) = A(i, j) + E(i, j)
  .distribute({i, j}, {io, jo}, {ii, ji}, M);
X(i, j, k) = A(i, j) * B(j, k)
  .distribute({i, j}, {io, jo}, {ii, ji}, M);
I(i, j) = 3 * AI(i, j);
"""
N, M_, P_ = 13, 11, 5
# runs wait mostly for mpirun to start: a few at a time
POOL = ThreadPoolExecutor(max_workers=int(os.environ.get("SPARSE_IO_JOBS", "4")))

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (PASS/FAIL lines, mpirun with its own TMPDIR)

T = harness.Tally()
ok, bad = T.ok, T.bad


def run(np_, args, cwd, exe="./save", env=None):
    """Run exe under mpirun (harness.run_cmd)."""
    return harness.run_cmd([MPIRUN, "-np", str(np_), "--oversubscribe", exe] + args, cwd, TIMEOUT, env)


def messages(out):
    return [l for l in out.splitlines() if l.startswith("./save: ")]


def random_sparse(rng, shape, dtype, density=0.3):
    a = np.zeros(shape, dtype)
    mask = rng.random(shape) < density
    if np.issubdtype(dtype, np.integer):
        vals = rng.integers(-9, 10, size=shape)
    else:
        vals = rng.integers(-40, 41, size=shape) / 8.0
    a[mask] = vals[mask].astype(dtype)
    return a


def write_mtx(path, a, field="real"):
    nz = np.argwhere(a != 0)
    with open(path, "w") as f:
        f.write("%%%%MatrixMarket matrix coordinate %s general\n%% input\n" % field)
        f.write("%d %d %d\n" % (a.shape[0], a.shape[1], len(nz)))
        for i, j in nz:
            f.write("%d %d %s\n" % (i + 1, j + 1, sparse.format_value(a[i, j], a.dtype)))


def write_tns(path, a):
    with open(path, "w") as f:
        f.write("# input\n")
        for c in np.argwhere(a != 0):
            f.write("%s %s\n" % (" ".join(str(x + 1) for x in c), sparse.format_value(a[tuple(c)], a.dtype)))


def strict_layout(path, shape, integer):
    """The layout of a saved file: a general real/integer banner and a size line (.mtx),
    one entry per line, 1-based coordinates in range, sorted row-major and unique, no
    explicit zero, values that parse whole.  Returns an error text or None."""
    with open(path) as f:
        lines = f.read().splitlines()
    body = lines
    if path.endswith(".mtx"):
        want = "%%%%MatrixMarket matrix coordinate %s general" % ("integer" if integer else "real")
        if lines[0] != want:
            return "banner %r, expected %r" % (lines[0], want)
        size = lines[1].split()
        if [int(x) for x in size[:2]] != list(shape) or int(size[2]) != len(lines) - 2:
            return "size line %r for %s with %d entries" % (lines[1], shape, len(lines) - 2)
        body = lines[2:]
    prev = None
    for l in body:
        w = l.split()
        if len(w) != len(shape) + 1:
            return "line %r: %d fields" % (l, len(w))
        c = tuple(int(x) for x in w[:-1])
        if any(x < 1 or x > s for x, s in zip(c, shape)):
            return "line %r: coordinates out of range" % l
        if prev is not None and c <= prev:
            return "line %r: not sorted / unique" % l
        prev = c
        v = int(w[-1]) if integer else float(w[-1])
        if v == 0:
            return "line %r: an explicit zero" % l
    return None


def test_saves(d, rng):
    A = random_sparse(rng, (N, M_), np.float64)
    E = random_sparse(rng, (N, M_), np.float64)
    B = rng.integers(-20, 21, size=(M_, P_)) / 4.0
    AI = random_sparse(rng, (N, M_), np.int32)
    write_mtx(os.path.join(d, "A.mtx"), A)
    write_tns(os.path.join(d, "E.tns"), E)
    np.save(os.path.join(d, "B.npy"), B)
    write_mtx(os.path.join(d, "AI.mtx"), AI, "integer")
    want = {"C": A + E, "X": A[:, :, None] * B[None, :, :], "I": (3 * AI).astype(np.int32), "A": A, "E": E}
    loads = ["--load", "A=A.mtx", "--load", "E=E.tns", "--load", "B=B.npy", "--load", "AI=AI.mtx"]
    jobs = []
    for np_ in (1, 2, 3, 4, 6, 8):
        # every sparse tensor in a format its order allows; results and inputs
        # (C twice: a tensor given to --save several times is written to every file)
        forms = [("C", "mtx" if np_ % 2 else "tns"), ("X", "tns"), ("I", "mtx" if np_ % 2 == 0 else "tns"),
                 ("A", "tns" if np_ % 2 else "mtx"), ("E", "mtx"), ("C", "tns" if np_ % 2 else "mtx")]
        saves = []
        for t, f in forms:
            saves += ["--save", "%s=out%d_%s.%s" % (t, np_, t, f)]
        jobs.append((np_, forms, POOL.submit(run, np_, loads + saves, d)))
    for np_, forms, job in jobs:
        rc, out = job.result()
        if rc != 0:
            bad("save at %d ranks: exit %s" % (np_, rc), out)
            continue
        errs = []
        for t, f in forms:
            path = os.path.join(d, "out%d_%s.%s" % (np_, t, f))
            w = want[t]
            integer = np.issubdtype(w.dtype, np.integer)
            if not os.path.isfile(path):
                errs.append("%s: no file" % path)
                continue
            e = strict_layout(path, w.shape, integer)
            if e:
                errs.append("%s: %s" % (os.path.basename(path), e))
                continue
            got = sparse.read_mtx(path, w.dtype) if f == "mtx" else sparse.read_tns(path, w.shape, w.dtype)
            if not np.array_equal(got, w):
                errs.append("%s: wrong values (max difference %g)" % (os.path.basename(path),
                                                                     np.max(np.abs(got - w))))
        if errs:
            bad("save at %d ranks: %s" % (np_, "; ".join(errs)), out)
        else:
            ok("save .mtx/.tns at %d ranks (%s)" % (np_, ", ".join("%s.%s" % kv for kv in forms)))


def test_rejected_saves(d):
    cases = [("B=b.mtx", "tensor B is dense"), ("B=b.tns", "tensor B is dense"),
             ("X=x.mtx", "tensor X has order 3"), ("C=c.txt", "unknown file type '.txt'"),
             ("C=c", "unknown file type"), ("C=c.MTX", "unknown file type")]
    jobs = [POOL.submit(run, (1, 3, 4)[k % 3], ["--save", arg], d) for k, (arg, _) in enumerate(cases)]
    for k, (arg, pat) in enumerate(cases):
        np_ = (1, 3, 4)[k % 3]
        rc, out = jobs[k].result()
        msgs = messages(out)
        target = arg.split("=", 1)[1]
        written = [f for f in os.listdir(d) if f == target or f.startswith(target + ".tmp.")]
        if rc is None:
            bad("--save %s: hung" % arg, out)
        elif rc == 0:
            bad("--save %s: exit status 0" % arg, out)
        elif len(msgs) != 1 or pat not in msgs[0]:
            bad("--save %s: expected one message saying %r" % (arg, pat), out)
        elif "ranks=" in out:
            bad("--save %s: rejected only after the run" % arg, out)
        elif written:
            bad("--save %s: wrote %s" % (arg, written), out)
        else:
            ok("--save %s rejected before the run at %d ranks: %s" % (arg, np_, msgs[0]))


MTX = "%%MatrixMarket matrix coordinate real general\n"
# (name, tensor, file text, line of the error, what the message says, params)
READ_CASES = [
    ("coord-float", "A", MTX + "13 11 2\n1 1 1.0\n1.5 2 3.0\n", 4, "not an integer", []),
    ("coord-exp", "A", MTX + "13 11 1\n1e1 2 3.0\n", 3, "not an integer", []),
    ("coord-hex", "A", MTX + "13 11 1\n0x10 2 3.0\n", 3, "not an integer", []),
    ("coord-signs", "A", MTX + "13 11 1\n+-1 2 3.0\n", 3, "not an integer", []),
    ("coord-junk", "A", MTX + "% c\n13 11 1\n12abc 2 3.0\n", 4, "not an integer", []),
    ("coord-zero", "A", MTX + "13 11 1\n0 2 3.0\n", 3, "out of range", []),
    ("coord-above", "A", MTX + "13 11 2\n1 2 3.0\n1 12 3.0\n", 4, "out of range", []),
    ("missing-field", "A", MTX + "13 11 1\n1 2\n", 3, "too few fields", []),
    ("extra-field", "A", MTX + "13 11 1\n1 2 3.0 4\n", 3, "too many fields", []),
    ("value-junk", "A", MTX + "13 11 1\n1 2 3.0x\n", 3, "not a number", []),
    ("value-word", "A", MTX + "13 11 1\n1 2 one\n", 3, "not a number", []),
    ("value-hex", "A", MTX + "13 11 1\n1 2 0x10\n", 3, "not a number", []),
    ("value-hex-float", "A", MTX + "13 11 1\n1 2 0x1p3\n", 3, "not a number", []),
    ("value-int32", "AI", "%%MatrixMarket matrix coordinate integer general\n13 11 1\n1 2 3000000000\n", 3,
     "out of range for int32", []),
    ("pattern-values", "A", "%%MatrixMarket matrix coordinate pattern general\n13 11 1\n1 2 1.0\n", 3,
     "too many fields", []),
    ("integer-real", "A", "%%MatrixMarket matrix coordinate integer general\n13 11 1\n1 2 1.5\n", 3,
     "not an integer", []),
    ("real-for-int", "AI", MTX + "13 11 1\n1 2 1\n", 1, "integer expected", []),
    ("symmetric-above", "A", "%%MatrixMarket matrix coordinate real symmetric\n13 13 2\n2 1 1.0\n1 2 1.0\n", 4,
     "above the diagonal", ["-m", "13"]),
    ("skew-diagonal", "A", "%%MatrixMarket matrix coordinate real skew-symmetric\n13 13 1\n2 2 1.0\n", 3,
     "on the diagonal", ["-m", "13"]),
    ("symmetric-nonsquare", "A", "%%MatrixMarket matrix coordinate real symmetric\n13 11 0\n", 2,
     "must be square", []),
    ("count-too-few", "A", MTX + "%\n13 11 3\n1 1 1.0\n2 2 2.0\n", 3, "announces 3 entries, the file has 2", []),
    ("count-too-many", "A", MTX + "13 11 1\n1 1 1.0\n\n2 2 2.0\n", 5, "more entries than the 1", []),
    ("size-missing", "A", MTX + "% only comments\n%\n", 3, "before its size line", []),
    ("size-junk", "A", MTX + "13 11 1 7\n1 1 1.0\n", 2, "size line has 4 fields", []),
    ("size-shape", "A", MTX + "11 13 1\n1 1 1.0\n", 2, "the matrix is 11 x 13", []),
    ("array", "A", "%%MatrixMarket matrix array real general\n13 11\n1.0\n", 1, "'matrix array' (dense)", []),
    ("banner-extra", "A", "%%MatrixMarket matrix coordinate real general extra\n13 11 0\n", 1,
     "banner has 6 fields", []),
    ("no-banner", "A", "13 11 0\n", 1, "not a Matrix Market file", []),
    ("tns-order", "X", "# comment\n\n1 2 3.0\n", 3, "an entry of order 2", []),
    ("tns-fields", "X", "1 1 1 1.0\n# c\n1 1 1 1 1.0\n", 3, "too many fields", []),
    ("tns-few", "X", "1 1 1 1.0\n2 2 2.0\n", 2, "too few fields", []),
    ("tns-coord", "X", "1 1 1 1.0\n1 1.0 1 1.0\n", 2, "not an integer", []),
    ("tns-range", "X", "1 1 6 1.0\n", 1, "out of range 1..5", []),
    ("tns-value", "X", "1 1 1 1.0.0\n", 1, "not a number", []),
    ("tns-matrix", "E", "1 1 1.0\n14 1 2.0\n", 2, "out of range 1..13", []),
    ("tns-is-mtx", "E", MTX + "13 11 1\n1 1 1.0\n", 1, "a Matrix Market file", []),
]


def test_bad_reads(d):
    jobs = []
    for k, (name, t, text, line, pat, params) in enumerate(READ_CASES):
        ext = "tns" if name.startswith("tns") else "mtx"
        fname = "bad_%s.%s" % (name, ext)
        with open(os.path.join(d, fname), "w") as f:
            f.write(text)
        # every case at one of 1, 3, 4 ranks in turn, the first few at all three
        for np_ in ((1, 3, 4) if k < 2 else ((1, 3, 4)[k % 3],)):
            args = params + ["--load", "%s=%s" % (t, fname), "--save", "C=never.mtx"]
            jobs.append((name, fname, line, pat, np_, POOL.submit(run, np_, args, d)))
    for name, fname, line, pat, np_, job in jobs:
        if True:
            rc, out = job.result()
            msgs = messages(out)
            where = "%s:%d: error: " % (fname, line)
            if rc is None:
                bad("%s at %d ranks: hung" % (name, np_), out)
            elif rc == 0:
                bad("%s at %d ranks: exit status 0" % (name, np_), out)
            elif len(msgs) != 1:
                bad("%s at %d ranks: %d messages from the program, not 1" % (name, np_, len(msgs)), out)
            elif where not in msgs[0] or pat not in msgs[0]:
                bad("%s at %d ranks: the message does not say %r ... %r" % (name, np_, where, pat), out)
            elif os.path.exists(os.path.join(d, "never.mtx")):
                bad("%s at %d ranks: the run went on and saved" % (name, np_), out)
            else:
                ok("%s at %d ranks: %s" % (name, np_, msgs[0]))


WIDE = """\
param n = 5000000000;
param m = 6;
machine M = grid(g);
tensor A(n, m) csf @ M(ij -> i);
tensor C(n, m) csf;
tensor B(n, m) csf @ M(ij -> i);
tensor D(n, m) csf @ M(ij -> i);
tensor s;
B(i, j) = 2 * A(i, j);
D(i, j) = A(i, j) * C(i, j);
s = A(i, j) * C(i, j);
"""
WIDE_N = 5000000000


def test_wide_coordinates(d, rng):
    """Coordinates beyond 2^31: a 5 * 10^9 x 6 matrix with entries on rows around 2^31 and 2^32
    and at the last row.  A piece keeps 32-bit index arrays only where its counts and extents
    fit (A's row blocks at 3 ranks and more; C, replicated, never), so one run reads both
    widths in one loop nest; each run is repeated with DISTAL_INDEX_BITS=64.  The saved results
    are compared with what Python computes from the entries."""
    rows = [0, 1, 2 ** 31 - 2, 2 ** 31 - 1, 2 ** 31, 2 ** 31 + 7, 2 ** 32 + 3, 3000000000, WIDE_N - 2, WIDE_N - 1]
    A, C = {}, {}
    for r in rows:
        for j in rng.choice(6, 3, replace=False):
            A[(r, int(j))] = float(rng.integers(1, 9))
    for r in rows[::2] + [12345, 4000000000]:
        for j in rng.choice(6, 2, replace=False):
            C[(r, int(j))] = float(rng.integers(-8, 0))
    for name, ent in (("wA.tns", A), ("wC.tns", C)):
        with open(os.path.join(d, name), "w") as f:
            for (i, j), v in sorted(ent.items(), key=lambda kv: -kv[0][0]):  # any order
                f.write("%d %d %r\n" % (i + 1, j + 1, v))
    want_b = {k: 2 * v for k, v in A.items()}
    want_d = {k: v * C[k] for k, v in A.items() if k in C}
    want_s = sum(want_d.values())

    def entries(path):
        """a saved .tns, or a saved .mtx after its banner and size line, as {(i, j): v}"""
        out = {}
        with open(path) as f:
            lines = f.read().splitlines()
        if path.endswith(".mtx"):
            if lines[1].split()[:2] != [str(WIDE_N), "6"]:
                raise ValueError("%s: size line %r" % (path, lines[1]))
            lines = lines[2:]
        for line in lines:
            w = line.split()
            out[(int(w[0]) - 1, int(w[1]) - 1)] = float(w[2])
        return out

    jobs = []
    for np_ in (1, 2, 3, 4, 6, 8):
        for bits in ("", "64"):
            tag = "%d%s" % (np_, bits)
            args = ["--fill", "zeros", "--load", "A=wA.tns", "--load", "C=wC.tns", "--save", "B=wB%s.tns" % tag,
                    "--save", "D=wD%s.mtx" % tag, "--save", "s=ws%s.npy" % tag]
            jobs.append((np_, bits, tag, POOL.submit(run, np_, args, d, "./wide", {"DISTAL_INDEX_BITS": bits} if bits else None)))
    for np_, bits, tag, job in jobs:
        rc, out = job.result()
        what = "coordinates beyond 2^31 at %d ranks%s" % (np_, " (64-bit indices)" if bits else "")
        if rc != 0:
            bad(what + ": exit %s" % rc, out)
            continue
        try:
            gb, gd = entries(os.path.join(d, "wB%s.tns" % tag)), entries(os.path.join(d, "wD%s.mtx" % tag))
            gs = float(np.load(os.path.join(d, "ws%s.npy" % tag)))
        except (OSError, ValueError) as e:
            bad(what + ": " + str(e), out)
            continue
        if gb != want_b or gd != want_d or abs(gs - want_s) > 1e-9 * abs(want_s):
            bad(what + ": results differ (B %s, D %s, s %r against %r)" % (gb == want_b, gd == want_d, gs, want_s), out)
        else:
            ok(what + ": %d, %d entries and the sum" % (len(gb), len(gd)))


MODES = """\
param n = 13;
param m = 11;
machine M = grid(g);
tensor A(n, m) csc @ M(ij -> j);
tensor x(m) @ M(j -> j);
tensor y(n) @ M(i -> i);
tensor z(n) @ M(i -> i);
tensor B(n, m) csr @ M(ij -> i);
tensor C(n, m) csc @ M(ij -> j);
tensor X(n, m, 4) {dense, compressed, compressed} order (2, 0, 1) @ M(ijk -> k);
tensor Y(n, m, 4) csf @ M(ijk -> i);
y(i) = A(i, j) * x(j);
z(i) = A(i, j) * x(j)
  .distribute({j}, {jo}, {ji}, M)
  .reorder({jo, ji, i});
C(i, j) = A(i, j) + B(i, j);
Y(i, j, k) = X(i, j, k) * 2;
"""


def test_mode_orders(d, rng):
    """Sparse tensors stored in another mode order (csc, `order (...)`): read from .mtx / .tns
    files in the declared order, computed row-wise (binary searches in the columns) and
    column-wise (a loop over the stored rows of each column, results accumulated), a CSC
    result and a mode-ordered 3-tensor saved in the declared order, sorted; at 1 to 8 ranks
    against NumPy; the same tensors read from and saved as .npy (the declared tensor, dense)."""
    A = random_sparse(rng, (N, M_), np.float64)
    B = random_sparse(rng, (N, M_), np.float64)
    X = random_sparse(rng, (N, M_, 4), np.float64)
    x = rng.integers(-20, 21, size=M_) / 4.0
    write_mtx(os.path.join(d, "mA.mtx"), A)
    write_mtx(os.path.join(d, "mB.mtx"), B)
    write_tns(os.path.join(d, "mX.tns"), X)
    np.save(os.path.join(d, "mx.npy"), x)
    loads = ["--load", "A=mA.mtx", "--load", "B=mB.mtx", "--load", "X=mX.tns", "--load", "x=mx.npy"]
    jobs = []
    for np_ in (1, 2, 3, 4, 6, 8):
        saves = ["--save", "y=my%d.npy" % np_, "--save", "z=mz%d.npy" % np_, "--save", "C=mC%d.mtx" % np_,
                 "--save", "Y=mY%d.tns" % np_]
        jobs.append((np_, POOL.submit(run, np_, loads + saves, d, "./modes")))
    for np_, job in jobs:
        rc, out = job.result()
        if rc != 0:
            bad("mode orders at %d ranks: exit %s" % (np_, rc), out)
            continue
        errs = []
        for name, want in (("y", A @ x), ("z", A @ x)):
            got = np.load(os.path.join(d, "m%s%d.npy" % (name, np_)))
            if not np.allclose(got, want, rtol=1e-13, atol=1e-13):
                errs.append("%s differs from NumPy's" % name)
        for name, want, ext in (("C", A + B, "mtx"), ("Y", 2 * X, "tns")):
            path = os.path.join(d, "m%s%d.%s" % (name, np_, ext))
            e = strict_layout(path, want.shape, False)
            if e:
                errs.append("%s: %s" % (os.path.basename(path), e))
                continue
            got = sparse.read_mtx(path, want.dtype) if ext == "mtx" else sparse.read_tns(path, want.shape, want.dtype)
            if not np.array_equal(got, want):
                errs.append("%s differs from NumPy's" % os.path.basename(path))
        if errs:
            bad("mode orders at %d ranks: %s" % (np_, "; ".join(errs)), out)
        else:
            ok("mode orders at %d ranks: csc and order (2, 0, 1) read, computed both ways and saved" % np_)
    # the same tensors read from .npy files (the declared tensor, dense)
    np.save(os.path.join(d, "nA.npy"), A)
    np.save(os.path.join(d, "nB.npy"), B)
    np.save(os.path.join(d, "nX.npy"), X)
    for np_ in (1, 3, 4):
        args = ["--load", "A=nA.npy", "--load", "B=nB.npy", "--load", "X=nX.npy", "--load", "x=mx.npy",
                "--save", "y=ny%d.npy" % np_, "--save", "C=nC%d.npy" % np_, "--save", "Y=nY%d.npy" % np_]
        rc, out = run(np_, args, d, "./modes")
        errs = []
        if rc != 0:
            bad("mode orders from .npy at %d ranks: exit %s" % (np_, rc), out)
            continue
        if not np.allclose(np.load(os.path.join(d, "ny%d.npy" % np_)), A @ x, rtol=1e-13, atol=1e-13):
            errs.append("y differs from NumPy's")
        if not np.array_equal(np.load(os.path.join(d, "nC%d.npy" % np_)), A + B):
            errs.append("C differs from NumPy's")
        if not np.array_equal(np.load(os.path.join(d, "nY%d.npy" % np_)), 2 * X):
            errs.append("Y differs from NumPy's")
        if errs:
            bad("mode orders from .npy at %d ranks: %s" % (np_, "; ".join(errs)), out)
        else:
            ok("mode orders from .npy at %d ranks: csc and order (2, 0, 1) read and saved as .npy" % np_)
    # declarations distalc rejects, with the line and column
    bad_decls = [
        ("tensor A(n, n, n) csc;", 2, 19, "csc needs a tensor of order 2, but A has order 3"),
        ("tensor A(n, n) {dense, compressed} order (1, 2);", 2, 46, "mode order: dimension 2 does not exist (A has dimensions 0 to 1)"),
        ("tensor A(n, n) {dense, compressed} order (1, 1);", 2, 46, "mode order: dimension 1 is given twice"),
        ("tensor A(n, n) {dense, compressed} order (1);", 2, 36, "mode order has 1 dimension but A has order 2"),
        ("tensor A(n, n) {dense, dense} order (1, 0);", 2, 31, "a mode order needs a sparse format (a compressed level); A is dense"),
        ("tensor A(n, n) csc order (0, 1);", 2, 20, "csc has its mode order already"),
    ]
    for k, (decl, line, col, msg) in enumerate(bad_decls):
        path = os.path.join(d, "badmode%d.dtl" % k)
        with open(path, "w") as f:
            f.write("param n = 4;\n" + decl + "\n")
        p = subprocess.run([DISTALC, os.path.basename(path), "--check"], cwd=d, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True)
        want = "badmode%d.dtl:%d:%d: error: %s" % (k, line, col, msg)
        if p.returncode == 0 or want not in p.stdout:
            bad("distalc rejects %r: expected %r" % (decl, want), p.stdout)
        else:
            ok("distalc rejects %r" % decl)


def test_split_reads(d, rng):
    """Files read in parallel: each rank parses the lines that begin in its share of the bytes.
    A Matrix Market file of many short lines (comments, blank lines, CRLF endings, duplicates
    that sum, a symmetric file's mirrored entries) reads the same at 1 to 8 ranks; errors deep
    in the file name the same line at every rank count."""
    entries = []
    for _ in range(300):
        entries.append((int(rng.integers(0, N)), int(rng.integers(0, M_)), float(rng.integers(-9, 10)) / 4))
    want = np.zeros((N, M_))
    for i, j, v in entries:
        want[i, j] += v
    lines = ["%%MatrixMarket matrix coordinate real general", "% entries in random order, with duplicates",
             "%d %d %d" % (N, M_, len(entries))]
    for k, (i, j, v) in enumerate(entries):
        lines.append("%d %d %r" % (i + 1, j + 1, v))
        if k % 7 == 3:
            lines.append("% a comment between entries")
        if k % 11 == 5:
            lines.append("")
    text = "\r\n".join(lines[:40]) + "\r\n" + "\n".join(lines[40:]) + "\n"
    with open(os.path.join(d, "split.mtx"), "w", newline="") as f:
        f.write(text)
    # the same lines with an error at a late line, one entry too many, one too few
    bad_line = len(lines) - 25
    broken = list(lines)
    broken[bad_line - 1] = broken[bad_line - 1] + " 7"
    cases = [("split_bad.mtx", "\n".join(broken) + "\n", "split_bad.mtx:%d: error: too many fields" % bad_line)]
    more = list(lines)
    more[2] = "%d %d %d" % (N, M_, len(entries) - 1)
    last_entry = max(k for k, ln in enumerate(more) if ln and not ln.startswith("%")) + 1
    cases.append(("split_more.mtx", "\n".join(more) + "\n", "split_more.mtx:%d: error: more entries than the %d" % (last_entry, len(entries) - 1)))
    fewer = list(lines)
    fewer[2] = "%d %d %d" % (N, M_, len(entries) + 2)
    cases.append(("split_fewer.mtx", "\n".join(fewer) + "\n", "split_fewer.mtx:3: error: the size line announces %d entries, the file has %d" % (len(entries) + 2, len(entries))))
    # FROSTT: an error names the file's first entry line, which only the first reader sees
    tns = ["# a FROSTT file", "", "# entries follow"]
    tns += ["%d %d %d %r" % (int(rng.integers(1, N + 1)), int(rng.integers(1, M_ + 1)), int(rng.integers(1, P_ + 1)), 0.5)
            for _ in range(250)]
    tns[200] = "1 2 0.5"
    cases.append(("split_bad.tns", "\n".join(tns) + "\n",
                  "split_bad.tns:201: error: too few fields: 3, expected 4 (3 coordinates then a value, as on line 4)"))
    for name, body, _ in cases:
        with open(os.path.join(d, name), "w") as f:
            f.write(body)
    jobs = []
    for np_ in (1, 2, 3, 4, 5, 6, 7, 8):
        out = "split_out_%d.npy" % np_
        jobs.append(("read", np_, out, None, POOL.submit(run, np_, ["--load", "A=split.mtx", "--save", "A=" + out], d)))
        for name, _, pat in cases:
            t = "X" if name.endswith(".tns") else "A"
            jobs.append(("error", np_, name, pat, POOL.submit(run, np_, ["--load", "%s=%s" % (t, name), "--save", "C=never.mtx"], d)))
    for kind, np_, what, pat, job in jobs:
        rc, out = job.result()
        if kind == "read":
            path = os.path.join(d, what)
            if rc != 0 or not os.path.exists(path):
                bad("split read at %d ranks: exit %s" % (np_, rc), out)
            elif not np.array_equal(np.load(path), want):
                bad("split read at %d ranks: the matrix differs from NumPy's" % np_, out)
            else:
                ok("split read at %d ranks: %d lines, 300 entries with duplicates" % (np_, len(lines)))
            continue
        msgs = messages(out)
        if rc in (None, 0) or len(msgs) != 1 or pat not in msgs[0]:
            bad("%s at %d ranks: expected one message with %r" % (what, np_, pat), out)
        else:
            ok("%s at %d ranks: %s" % (what, np_, msgs[0]))


def main():
    rng = np.random.default_rng(11)
    with tempfile.TemporaryDirectory() as d:
        for name, text in (("save", PROGRAM), ("wide", WIDE), ("modes", MODES)):
            with open(os.path.join(d, name + ".dtl"), "w") as f:
                f.write(text)
            p = subprocess.run([DISTALC, name + ".dtl", "--exe", "-o", name], cwd=d, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, universal_newlines=True)
            if p.returncode != 0:
                print("FAIL distalc %s.dtl --exe\n%s" % (name, p.stdout))
                return 1
        test_saves(d, rng)
        test_wide_coordinates(d, rng)
        test_mode_orders(d, rng)
        test_rejected_saves(d)
        test_bad_reads(d)
        test_split_reads(d, rng)
        leftovers = [f for f in os.listdir(d) if ".tmp." in f]
        if leftovers:
            bad("temporary files left: %s" % leftovers)
        else:
            ok("no temporary file left")
    print("%d checks, %d failed" % (T.checks, T.fails))
    return 1 if T.fails else 0


if __name__ == "__main__":
    sys.exit(main())
