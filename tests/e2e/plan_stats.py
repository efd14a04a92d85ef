"""plan_stats.py -- the plan's bytes against the bytes the generated program moves.

For the examples (matrix multiply by SUMMA, Cannon, PUMMA, Johnson, Solomonik, COSMA and the
hierarchical ones; TTV, TTM, MTTKRP, the inner product) and the programs of plan_stats/
(an exchange of a transposed block, a replicated and a fixed-coordinate tensor, partial sums
accumulated into replicated results, results computed again along a grid dim the loops leave
undistributed, a 1-D machine fetching rows and columns of float tensors), at 1, 2, 3, 4, 6
and 8 ranks (and grid shapes the solver does not pick) and sizes the grid does not divide: rank 0's bytes in `distalc --emit plan --ranks P --set ...` (the
"bytes per rank (rank 0)" lines summed: what it needs less what it already holds) must equal
the bytes rank 0 receives by the executable's `--stats` (all operations but file I/O).  A
reduction to a root is left out of both: the plan counts each member's partial sums, --stats
the root's receipt of all of them.  An accumulate by exchange counts what rank 0 sends (its
produced boxes to every other holder): in a program with one, that is checked against rank
0's bytes sent by exchange, and the rest against what it receives by the other operations.
The plan's last line, the most bytes any rank receives (the same points, reductions to a root
and accumulates by exchange left out), must equal the most any rank receives by --stats, in
every program without an accumulate by exchange.  And the SPMD rewrite invariant: a loop's
fetches of a tensor it does not write move their bytes once per entry of the loop
(check_invariant).  Needs DISTALC, MPIRUN (default mpirun), top_srcdir and
the DISTAL_* flags of --exe."""

import os
import re
import subprocess
import sys
import tempfile

TOP = os.environ.get("top_srcdir", ".")
DISTALC = os.environ.get("DISTALC", "distalc")
MPIRUN = os.environ.get("MPIRUN", "mpirun")
EX = os.path.join(TOP, "examples")
OWN = os.path.join(TOP, "tests", "e2e", "plan_stats")

CASES = [
    (EX, "summa", {"n": 101, "chunk": 13}),
    (EX, "cannon", {"n": 97}),
    (EX, "pumma", {"n": 97}),
    (EX, "johnson", {"n": 37}),
    (EX, "solomonik", {"n": 45}),
    (EX, "cosma", {"ni": 53, "nj": 41, "nk": 67}),
    (EX, "hier_summa", {"n": 67, "chunk": 8}),
    (EX, "hier_cannon", {"n": 67}),
    (EX, "ttv", {"n": 33, "m": 29, "p": 17}),
    (EX, "ttm", {"n": 33, "m": 29, "p": 17, "q": 9}),
    (EX, "mttkrp", {"n": 23, "m": 19, "p": 21, "r": 5}),
    (EX, "innerprod", {"n": 23, "m": 19, "p": 21}),
    (OWN, "transpose", {"n": 37, "m": 29}),
    (OWN, "replicated", {"n": 61, "m": 47}),
    (OWN, "gather1d", {"n": 41, "k": 23}),
    (OWN, "accumulate", {"n": 29}),
    # grids whose second dim the loops leave undistributed (the solver's leave it at 1 or 2)
    (OWN, "redundant", {"n": 25, "m": 14}, [(2, {"gx": 1, "gy": 2}), (3, {"gx": 1, "gy": 3}), (4, {"gx": 2, "gy": 2}),
                                            (6, {"gx": 2, "gy": 3}), (6, {"gx": 3, "gy": 2})]),
    (OWN, "accumulate", {"n": 29}, [(2, {"gx": 1, "gy": 1, "gz": 2}), (4, {"gx": 1, "gy": 2, "gz": 2}),
                                    (6, {"gx": 2, "gy": 1, "gz": 3})]),
]
RANKS = (1, 2, 3, 4, 6, 8)


def run(cmd):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=300)


def plan_bytes(text):
    """rank 0's bytes by the plan, reductions to a root left out: (received, sent by an
    accumulate, or None where it has none); None where one is unknown"""
    total, sent, pattern = 0, None, ""
    for line in text.splitlines():
        m = re.match(r"  (read|write) \S+ at [^:]+: (.*)", line)
        if m:
            pattern = m.group(2)
            continue
        if not line.startswith("    bytes per rank"):
            continue
        if "not evaluated" in line:
            return None
        m = re.match(r"    bytes per rank \(rank 0\): (\d+) ", line)
        if m and "point-to-point accumulate" in pattern:
            sent = (sent or 0) + int(m.group(1))
        elif m and not (pattern.startswith("reduce") and "(allreduce)" not in pattern):
            total += int(m.group(1))
    return total, sent


def stats_bytes(text, sent):
    """rank 0's bytes received by --stats, by operation (file I/O and reductions left out); with
    sent, its bytes sent by exchange apart (and not its bytes received by exchange)"""
    ops, out = {}, 0
    for line in text.splitlines():
        w = line.split()
        if len(w) == 7 and w[0] == "0" and w[2] not in ("io", "reduce"):
            if sent and w[2] == "exchange":
                out = int(w[3])
            else:
                ops[w[2]] = int(w[5])
    return ops, out


def plan_most(text):
    """the plan's last line: the most bytes any rank receives (None: not printed or not evaluated)"""
    m = re.search(r"^the most any rank receives: (\d+) bytes", text, re.M)
    return int(m.group(1)) if m else None


def stats_most(text):
    """the most bytes any rank receives by --stats, file I/O and reductions left out"""
    per = {}
    for line in text.splitlines():
        w = line.split()
        if len(w) == 7 and w[0].isdigit() and w[2] not in ("io", "reduce"):
            per[w[0]] = per.get(w[0], 0) + int(w[5])
    return max(per.values()) if per else 0


def stats_total(text):
    """bytes received in all, by operation (the --stats "total" lines)"""
    return {w[1]: int(w[4]) for w in (line.split() for line in text.splitlines()) if len(w) == 6 and w[0] == "total"}


def check_invariant(d):
    """The SPMD rewrite invariant (tests/e2e/programs/invariant.dtl, sparse_invariant.dtl): the
    point-to-point fetches ("exchange") in the inner loop, of matrices it does not write, move
    the same bytes at 4 iterations as at 1 (once per entry of the loop, and one of them not at
    all: it reads the buffer of a statement before the loop, so even at 1 iteration fewer bytes
    move than with --no-fuse), where --no-fuse moves them at every iteration; b's broadcast too
    moves once per entry, so the broadcasts move less than with --no-fuse.  Returns (failures,
    checks)."""
    fails = checks = 0
    for prog in ("invariant", "sparse_invariant"):
        f, c = check_invariant_of(d, prog)
        fails, checks = fails + f, checks + c
    return fails, checks


def check_invariant_of(d, prog):
    src = os.path.join(TOP, "tests", "e2e", "programs", prog + ".dtl")
    exes = {}
    for tag, extra in (("fused", []), ("nofuse", ["--no-fuse"])):
        exes[tag] = os.path.join(d, prog + "_" + tag)
        p = run([DISTALC, src, "--exe", "-o", exes[tag]] + extra)
        if p.returncode:
            print("FAIL %s.dtl %s: does not compile:\n%s" % (prog, " ".join(extra), p.stdout))
            return 1, 1
    fails = checks = 0
    for P in (2, 3, 4):
        got = {}
        for tag, exe in exes.items():
            for it in (1, 4):
                r = run([MPIRUN, "-np", str(P), "--oversubscribe", exe, "-n", "23", "-it", str(it), "--stats"])
                if r.returncode:
                    print("FAIL %s.dtl at %d ranks (%s, it=%d):\n%s" % (prog, P, tag, it, r.stdout[-1500:]))
                    return fails + 1, checks + 1
                got[tag, it] = stats_total(r.stdout)
        ex = lambda tag, it: got[tag, it].get("exchange", 0)  # noqa: E731
        bc = lambda tag, it: got[tag, it].get("bcast", 0)  # noqa: E731
        checks += 1
        ok = ex("fused", 1) > 0 and ex("fused", 4) == ex("fused", 1) and ex("nofuse", 4) > ex("nofuse", 1) \
            and ex("fused", 1) < ex("nofuse", 1) and bc("fused", 4) < bc("nofuse", 4)
        print("%s %s.dtl at %d ranks: exchange %d -> %d bytes from 1 to 4 iterations (--no-fuse %d -> %d), "
              "bcast %d (--no-fuse %d) at 4" % ("PASS" if ok else "FAIL", prog, P, ex("fused", 1), ex("fused", 4), ex("nofuse", 1),
                                               ex("nofuse", 4), bc("fused", 4), bc("nofuse", 4)))
        fails += not ok
    return fails, checks


def main():
    fails = checks = 0
    with tempfile.TemporaryDirectory() as d:
        f, c = check_invariant(d)
        fails, checks = fails + f, checks + c
        for case in CASES:
            where, name, params = case[:3]
            runs = case[3] if len(case) > 3 else [(P, {}) for P in RANKS]
            src = os.path.join(where, name + ".dtl")
            exe = os.path.join(d, name)
            if not os.path.exists(exe):
                p = run([DISTALC, src, "--exe", "-o", exe])
                if p.returncode:
                    print("FAIL %s: does not compile:\n%s" % (name, p.stdout))
                    fails += 1
                    continue
            for P, grid_params in runs:
                allp = dict(params, **grid_params)
                sets = sum((["--set", "%s=%d" % kv] for kv in allp.items()), [])
                args = sum((["-%s" % k, str(v)] for k, v in allp.items()), [])
                pl = run([DISTALC, src, "--emit", "plan", "--ranks", str(P)] + sets)
                if pl.returncode and "cannot form" in pl.stdout:
                    continue  # a machine this rank count does not fit (grid(q, q, q) at 6)
                checks += 1
                want = plan_bytes(pl.stdout) if not pl.returncode else None
                if want is None or want[0] is None:
                    print("FAIL %s at %d ranks: no evaluated plan:\n%s" % (name, P, pl.stdout))
                    fails += 1
                    continue
                r = run([MPIRUN, "-np", str(P), "--oversubscribe", exe] + args + ["--stats"])
                ops, out = stats_bytes(r.stdout, want[1] is not None)
                got = (sum(ops.values()), out if want[1] is not None else None)
                grid = re.search(r"^grid: (.*)$", pl.stdout, re.M).group(1)
                # the busiest rank: where no accumulate by exchange sends (the plan leaves those
                # points out, and the ranks receive the others' sums by the same operation)
                most = plan_most(pl.stdout) if want[1] is None else None
                if want[1] is None and most is None:
                    print("FAIL %s at %d ranks: the plan has no evaluated busiest rank:\n%s" % (name, P, pl.stdout))
                    fails += 1
                    continue
                if most is not None and not r.returncode and most != stats_most(r.stdout):
                    print("FAIL %s at %d ranks: the plan says the busiest rank receives %d bytes, --stats measures %d\n%s"
                          % (name, P, most, stats_most(r.stdout), r.stdout[-1500:]))
                    fails += 1
                    continue
                if r.returncode or got != want:
                    print("FAIL %s at %d ranks (grid %s): the plan says rank 0 receives %d bytes (sends %s by accumulate), "
                          "--stats measures %d (%s) %s\n%s"
                          % (name, P, grid, want[0], want[1], got[0], got[1], ops, r.stdout[-1500:] if r.returncode else ""))
                    fails += 1
                else:
                    print("PASS %s at %d ranks (grid %s): %d bytes received %s%s%s" % (name, P, grid, got[0], ops,
                          "" if got[1] is None else ", %d sent by accumulate" % got[1],
                          "" if most is None else "; the busiest rank %d" % most))
    print("plan_stats.py: %d of %d checks failed" % (fails, checks))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
