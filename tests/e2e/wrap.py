"""wrap.py -- integer overflow wraps in generated code (README, "Choices").

tests/e2e/wrap/wrap.dtl doubles and halves int32 and int64 values near the ends of their
types, in one statement and split over two, and counts an int64 up to its largest value in a
loop whose condition, k + 1 < k, holds only once the sum wraps.  The results are computed
here with NumPy's wrapping arithmetic and compared at 1 to 3 ranks, also with --validate.
Needs DISTALC, MPIRUN (default mpirun) and the DISTAL_* flags of --exe."""

import os
import subprocess
import sys
import tempfile

import numpy as np

from structural import build  # noqa: E402 (tests/e2e beside this file)

SRC = os.path.join(os.environ.get("top_srcdir", "."), "tests", "e2e", "wrap", "wrap.dtl")


def main():
    mpirun = os.environ.get("MPIRUN", "mpirun")
    c = np.array([1073741825, 3, -1073741829, 2147483647, -2147483648], dtype=np.int32)
    a = np.array([2305843009213693953, -7, 4611686018427387904, 9223372036854775807, -9223372036854775807 - 1],
                 dtype=np.int64)
    with np.errstate(over="ignore"):
        r = (c * np.int32(2)) // np.int32(2)  # exact halves of even numbers: // is C's division
        q = (a * np.int64(4)) // np.int64(4) + (a + a) // np.int64(2)
    want = {"r": r, "t": r, "q": q, "k": np.array(np.iinfo(np.int64).max, dtype=np.int64)}
    fails = runs = 0
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "wrap")
        if not build(SRC, exe, "wrap"):
            return 1
        np.save(os.path.join(tmp, "c.npy"), c)
        np.save(os.path.join(tmp, "a.npy"), a)
        for ranks in (1, 2, 3):
            runs += 1
            cmd = [mpirun, "-np", str(ranks), "--oversubscribe", exe, "--validate",
                   "--load", "c=" + os.path.join(tmp, "c.npy"), "--load", "a=" + os.path.join(tmp, "a.npy")]
            for o in want:
                cmd += ["--save", "%s=%s" % (o, os.path.join(tmp, "out_%s.npy" % o))]
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=120)
            bad = [] if r.returncode == 0 else ["exit status %d" % r.returncode]
            if "iterations=2" not in r.stdout:
                bad.append("the loop did not stop after 2 iterations (k + 1 < k once k wraps)")
            for o, w in want.items():
                got = np.load(os.path.join(tmp, "out_%s.npy" % o)) if os.path.exists(os.path.join(tmp, "out_%s.npy" % o)) else None
                if got is None or got.dtype != w.dtype or not np.array_equal(got, w):
                    bad.append("%s = %s, expected %s" % (o, None if got is None else got.tolist(), w.tolist()))
            if bad:
                fails += 1
                print("FAIL wrap at %d ranks" % ranks)
                for b in bad + r.stdout.splitlines()[-8:]:
                    print("    | " + b)
            else:
                print("PASS wrap at %d ranks" % ranks)
    print("wrap: %d passed, %d failed" % (runs - fails, fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
