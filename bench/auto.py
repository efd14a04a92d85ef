#!/usr/bin/env python3
"""bench/auto.py -- distalc --auto against the hand-written schedules of examples/ (auto.sh).

For GEMM (square, tall-and-skinny, flat), TTV, TTM, MTTKRP and the inner product: the
example's statement with its schedule removed is compiled with --auto (for the rank count
of the run), the example as written is the reference; both run at --ranks (default 2)
ranks, interleaved over --rounds rounds, the best of --iters runs kept, results checked with
--validate once.  Then the communication volume per rank (--emit plan, rank 0's bytes) of
both at 4, 8, 16 and 64 ranks, and for GEMM the memory-independent lower bound
3 (n^3/P)^(2/3) - 3 n^2/P words (Irony, Toledo and Tiskin; Ballard et al.).  No timing is
asserted.  Writes auto.md to --out (default bench/results)."""
import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
DISTALC = os.environ.get("DISTALC", "distalc")
MPIRUN = os.environ.get("MPIRUN", "mpirun")

# name, example, params of the run (-NAME V), params of the volume study
KERNELS = [
    ("gemm square", "summa.dtl", {"n": 2048, "chunk": 256}, {"n": 4096}),
    ("gemm tall-skinny", "summa.dtl", None, None),  # written below (A is n x 64)
    ("gemm flat", "summa.dtl", None, None),
    ("ttv", "ttv.dtl", {"n": 512, "m": 512, "p": 64}, {"n": 512, "m": 512, "p": 64}),
    ("ttm", "ttm.dtl", {"n": 256, "m": 256, "p": 64, "q": 32}, {"n": 256, "m": 256, "p": 64, "q": 32}),
    ("mttkrp", "mttkrp.dtl", {"n": 128, "m": 128, "p": 128, "r": 16}, {"n": 128, "m": 128, "p": 128, "r": 16}),
    ("innerprod", "innerprod.dtl", {"n": 256, "m": 256, "p": 128}, {"n": 256, "m": 256, "p": 128}),
]

SHAPES = {
    # A(i, j) = B(i, k) * C(k, j) with other extents: tall-and-skinny (k small), flat (i small)
    "gemm tall-skinny": ("param n = 8192;\nparam k = 64;\nmachine M = grid(gx, gy);\ntensor A(n, n) @ M(xy -> xy);\n"
                         "tensor B(n, k) @ M(xy -> xy);\ntensor C(k, n) @ M(xy -> xy);\nA(i, j) = B(i, l) * C(l, j)",
                         "\n  .distribute({i, j}, {io, jo}, {ii, ji}, M)\n  .communicate({B, C}, jo)\n  .substitute({ii, ji, l}, gemm)",
                         {"n": 4096, "k": 64}),
    "gemm flat": ("param m = 64;\nparam n = 8192;\nmachine M = grid(gx, gy);\ntensor A(m, m) @ M(xy -> xy);\n"
                  "tensor B(m, n) @ M(xy -> xy);\ntensor C(n, m) @ M(xy -> xy);\nA(i, j) = B(i, l) * C(l, j)",
                  "\n  .distribute({i, j}, {io, jo}, {ii, ji}, M)\n  .communicate({B, C}, jo)\n  .substitute({ii, ji, l}, gemm)",
                  {"m": 64, "n": 65536}),
}


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, **kw)


def unscheduled(text):
    """the program with every schedule command removed (lines starting with '.')"""
    out = []
    for line in text.splitlines():
        if re.match(r"\s*\.", line):
            if out and not out[-1].rstrip().endswith(";") and line.rstrip().endswith(";"):
                out[-1] = out[-1].rstrip() + ";"
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def volume(path, ranks, params, auto):
    args = [DISTALC, path, "--emit", "plan", "--ranks", str(ranks)] + (["--auto"] if auto else [])
    for k, v in params.items():
        args += ["--set", "%s=%d" % (k, v)]
    p = run(args)
    if p.returncode:
        return None
    total = 0
    for line in p.stdout.splitlines():
        if line.startswith("auto-scheduling"):
            break
        m = re.search(r"bytes per rank \(rank 0\): (\d+)", line)
        if m:
            total += int(m.group(1))
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--quick", action="store_true", help="tiny sizes, one round")
    a = ap.parse_args()
    b = os.path.join(a.out, "build-auto")
    os.makedirs(b, exist_ok=True)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OPENBLAS_NUM_THREADS="1",
               OMP_NUM_THREADS="1")
    rows, vols, fail = [], [], 0
    for name, ex, params, vparams in KERNELS:
        tag = name.replace(" ", "_").replace("-", "_")
        if name in SHAPES:
            body, sched, vparams = SHAPES[name]
            hand_text, auto_text = body + sched + ";\n", body + ";\n"
            params = {k: (v if a.quick is False else min(v, 256)) for k, v in vparams.items()}
        else:
            with open(os.path.join(TOP, "examples", ex)) as f:
                hand_text = f.read()
            auto_text = unscheduled(hand_text)
        if a.quick:
            params = {k: min(v, 64) for k, v in params.items()}
        exes = {}
        for kind, text in (("hand", hand_text), ("auto", auto_text)):
            src = os.path.join(b, "%s_%s.dtl" % (tag, kind))
            with open(src, "w") as f:
                f.write(text)
            args = [DISTALC, src, "--exe", "-o", os.path.join(b, "%s_%s" % (tag, kind))]
            if kind == "auto":
                args += ["--auto", "--ranks", str(a.ranks)] + sum((["--set", "%s=%d" % kv] for kv in params.items()), [])
            p = run(args, env=env)
            if p.returncode:
                print("auto.sh: %s (%s) does not compile:\n%s" % (name, kind, p.stdout), file=sys.stderr)
                fail = 1
                continue
            exes[kind] = os.path.join(b, "%s_%s" % (tag, kind))
            if kind == "auto":
                sp = run([DISTALC, src, "--auto", "--emit", "schedule", "--ranks", str(a.ranks)] +
                         sum((["--set", "%s=%d" % kv] for kv in params.items()), []))
                exes["schedule"] = " ".join(l.strip() for l in sp.stdout.splitlines() if l.strip().startswith(".")) or "(owner computes)"
        if len(exes) < 3:
            continue
        pargs = sum((["-%s" % k, str(v)] for k, v in params.items()), [])
        best = {}
        for kind in ("hand", "auto"):
            p = run([MPIRUN, "-np", str(a.ranks), "--oversubscribe", exes[kind]] + pargs + ["--validate"], env=env)
            if p.returncode:
                print("auto.sh: %s (%s) fails --validate:\n%s" % (name, kind, p.stdout[-2000:]), file=sys.stderr)
                fail = 1
        for r in range(a.rounds):
            for kind in ("hand", "auto"):
                p = run([MPIRUN, "-np", str(a.ranks), "--oversubscribe", exes[kind]] + pargs +
                        ["--iters", str(a.iters), "--warmup", "1", "--json"], env=env)
                js = [l for l in p.stdout.splitlines() if l.startswith("{")]
                if p.returncode or not js:
                    fail = 1
                    continue
                t = json.loads(js[0])["min_s"]
                best[kind] = min(best.get(kind, t), t)
        if len(best) == 2:
            rows.append((name, best["hand"], best["auto"], best["hand"] / best["auto"], exes["schedule"]))
        for P in (4, 8, 16, 64):
            vh = volume(os.path.join(b, "%s_hand.dtl" % tag), P, vparams, False)
            va = volume(os.path.join(b, "%s_auto.dtl" % tag), P, vparams, True)
            lb = ""
            if name == "gemm square":
                n = vparams["n"]
                lb = "%d" % (8 * max(0, 3 * (n ** 3 / P) ** (2 / 3) - 3 * n * n / P))
            vols.append((name, P, vh, va, lb))
    out = os.path.join(a.out, "auto.md")
    with open(out, "w") as f:
        f.write("# distalc --auto against the hand-written schedules of examples/\n\n")
        f.write("%d ranks x 1 thread, best of %d rounds of %d runs; speed = hand time / auto time (above 1: --auto faster)."
                "\n\n" % (a.ranks, a.rounds, a.iters))
        f.write("| kernel | hand (s) | --auto (s) | speed auto / hand | schedule --auto chose |\n|---|---|---|---|---|\n")
        for r in rows:
            f.write("| %s | %.4g | %.4g | %.2f | `%s` |\n" % r)
        f.write("\nCommunication volume per rank (rank 0's bytes received, --emit plan):\n\n")
        f.write("| kernel | ranks | hand | --auto | lower bound |\n|---|---|---|---|---|\n")
        for v in vols:
            f.write("| %s | %d | %s | %s | %s |\n" % (v[0], v[1], v[2], v[3], v[4] or "-"))
    with open(out) as f:
        print(f.read())
    return fail


if __name__ == "__main__":
    sys.exit(main())
