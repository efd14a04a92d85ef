#!/usr/bin/env python3
"""bench/auto.py -- distalc --auto against the hand-written schedules of examples/ (auto.sh).

For GEMM (square, tall-and-skinny, flat), TTV, TTM, MTTKRP, the inner product, SpMV (CSR by
rows and by columns) and CG: the example's statement with its schedule removed is compiled with --auto twice, for the
rank count and params of the run (--ranks, --set) and once with neither (the executable
chooses among the variants the search kept, at run time); the example as written is the
reference.  All run at --ranks (default 2) ranks, interleaved over --rounds rounds, the best
of --iters runs (more for short kernels: about 0.5 s) kept, results checked with --validate once.  Then the communication volume
per rank (--emit plan, rank 0's bytes) of both at 4, 8, 16 and 64 ranks against the
memory-independent lower bound for P ranks: for a matrix product with extents a >= b >= c
(GEMM's shapes; on a 2-D and on a 3-D machine), words = 3 (abc/P)^(2/3), 2 (abc^2/P)^(1/2)
+ ab/P or (ab + ac)/P + bc, by P's regime, less the (ab + bc + ac)/P each rank holds (the
tight bounds of Irony, Toledo and Tiskin and of Al Daas, Ballard, Grigori, Kumar and Rouse);
for TTM the same bound of the matrix product it is (extents nm, p and q: the tensors
reshaped, as Deinsum bounds it); for MTTKRP the least that an algorithm which never moves the tensor receives,
3 R (IJK/P)^(1/3) - (I + J + K) R / P factor entries (Ballard, Knight and Rouse's optimal
family).  No timing is asserted.  Writes auto.md to --out (default bench/results)."""
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
    ("gemm square 3-D", None, None, None),
    ("spmv", None, None, None),
    ("spmv by columns", None, None, None),
    ("cg", "cg.dtl", {"n": 200000}, None),
]
# extra arguments of the runs (sparse operands: their density)
RUN_ARGS = {"spmv": ["--density", "0.0001"], "spmv by columns": ["--density", "0.0001"], "cg": ["--density", "0.00005", "-maxit", "20"]}
# ... of the --validate run, whose serial reference is dense: a size whose dense block fits,
# and few CG iterations (a random matrix is not positive definite: rounding grows with them)
VALIDATE_ARGS = {"spmv": ["--density", "0.01"], "spmv by columns": ["--density", "0.01"], "cg": ["--density", "0.01", "-maxit", "3"]}

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
    # Johnson's 3-D algorithm where the machine has three dims (the hand-written reference)
    "gemm square 3-D": ("param n = 1024;\nmachine M = grid(gx, gy, gz);\ntensor A(n, n) @ M(ij -> ij*);\n"
                        "tensor B(n, n) @ M(ij -> i*j);\ntensor C(n, n) @ M(ij -> *ji);\nA(i, j) = B(i, k) * C(k, j)",
                        "\n  .distribute({i, j, k}, {io, jo, ko}, {ii, ji, ki}, M)\n  .communicate(A, ko)\n  .communicate({B, C}, ko)\n"
                        "  .substitute({ii, ji, ki}, gemm)",
                        {"n": 1024}),
    # SpMV over CSR row blocks: the owner-computes default is the hand-written schedule
    "spmv": ("param n = 400000;\nmachine M = grid(g);\ntensor A(n, n) csr @ M(ij -> i);\ntensor x(n) @ M(i -> i);\n"
             "tensor y(n) @ M(i -> i);\ny(i) = A(i, j) * x(j)", "", {"n": 400000}),
    # SpMV over CSR held by columns: the hand-written schedule computes where the matrix lies, over
    # j, the partial rows reduced (the owner-computes default would move the matrix's entries)
    "spmv by columns": ("param n = 400000;\nmachine M = grid(g);\ntensor A(n, n) csr @ M(ij -> j);\ntensor x(n) @ M(i -> i);\n"
                        "tensor y(n) @ M(i -> i);\ny(i) = A(i, j) * x(j)", "\n  .distribute({j}, {jo}, {ji}, M)", {"n": 400000}),
}


def matmul_bound(a, b, c, P):
    """words a rank doing 1/P of a matrix product with extents a, b, c must access (hold or
    receive), whatever the layout: the memory-independent bound, by P's regime"""
    a, b, c = sorted((a, b, c), reverse=True)
    if P <= a / b:
        return (a * b + a * c) / P + b * c
    if P <= a * b / (c * c):
        return 2 * (a * b * c * c / P) ** 0.5 + a * b / P
    return 3 * (a * b * c / P) ** (2 / 3)


def bound_words(name, v, P):
    """the lower bound on words accessed for kernel `name` at the volume study's params v
    (None: none here)"""
    if name in ("gemm square", "gemm square 3-D"):
        return matmul_bound(v["n"], v["n"], v["n"], P)
    if name == "gemm tall-skinny":
        return matmul_bound(v["n"], v["k"], v["n"], P)
    if name == "gemm flat":
        return matmul_bound(v["m"], v["n"], v["m"], P)
    if name == "ttm":  # a matrix product of (nm x p) by (p x q), B and A reshaped (Deinsum's bound)
        return matmul_bound(v["n"] * v["m"], v["p"], v["q"], P)
    if name == "mttkrp":  # algorithms that never move the tensor: its block and 3 factor panels
        n, m, p, r = v["n"], v["m"], v["p"], v["r"]
        return n * m * p / P + 3 * r * (n * m * p / P) ** (1 / 3)
    return None


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
    """rank 0's bytes received (--emit plan) and the bytes of the blocks it holds (8 per element)"""
    args = [DISTALC, path, "--emit", "plan", "--ranks", str(ranks)] + (["--auto"] if auto else [])
    for k, v in params.items():
        args += ["--set", "%s=%d" % (k, v)]
    p = run(args)
    if p.returncode:
        return None, None
    total, held = 0, None
    for line in p.stdout.splitlines():
        if line.startswith("auto-scheduling"):
            break
        m = re.search(r"bytes per rank \(rank 0\): (\d+)", line)
        if m:
            total += int(m.group(1))
        if line.startswith("held by rank 0"):
            held = 8 * sum(int(x) for x in re.findall(r" \w+ (\d+)", line.split(":", 1)[1]))
    return total, held


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--quick", action="store_true", help="tiny sizes, one round")
    a = ap.parse_args()
    b = os.path.join(a.out, "build-auto")
    os.makedirs(b, exist_ok=True)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OPENBLAS_NUM_THREADS="1",
               OMP_NUM_THREADS="1")
    kinds = ("hand", "auto", "once")
    rows, vols, fail = [], [], 0
    for name, ex, params, vparams in KERNELS:
        tag = name.replace(" ", "_").replace("-", "_")
        if name in SHAPES:
            body, sched, vparams = SHAPES[name]
            hand_text, auto_text = body + sched + ";\n", body + ";\n"
            params = dict(vparams)
        else:
            with open(os.path.join(TOP, "examples", ex)) as f:
                hand_text = f.read()
            auto_text = unscheduled(hand_text)
        if a.quick:
            params = {k: min(v, 64) for k, v in params.items()}
        sets = sum((["--set", "%s=%d" % kv] for kv in params.items()), [])
        exes = {}
        for kind in kinds:
            src = os.path.join(b, "%s_%s.dtl" % (tag, kind))
            with open(src, "w") as f:
                f.write(hand_text if kind == "hand" else auto_text)
            args = [DISTALC, src, "--exe", "-o", os.path.join(b, "%s_%s" % (tag, kind))]
            if kind == "auto":
                args += ["--auto", "--ranks", str(a.ranks)] + sets
            if kind == "once":
                args += ["--auto"]
            p = run(args, env=env)
            if p.returncode:
                print("auto.sh: %s (%s) does not compile:\n%s" % (name, kind, p.stdout), file=sys.stderr)
                fail = 1
                continue
            exes[kind] = os.path.join(b, "%s_%s" % (tag, kind))
            if kind == "auto":
                sp = run([DISTALC, src, "--auto", "--emit", "schedule", "--ranks", str(a.ranks)] + sets)
                exes["schedule"] = " ".join(l.strip() for l in sp.stdout.splitlines() if l.strip().startswith(".")) or "(owner computes)"
        if len(exes) < len(kinds) + 1:
            continue
        pargs = sum((["-%s" % k, str(v)] for k, v in params.items()), []) + RUN_ARGS.get(name, [])
        best = {}
        # --validate compares with a dense serial result: sparse operands are checked at a size
        # whose dense block fits in memory (the schedule choice prints from the same run)
        vargs = pargs
        if name in VALIDATE_ARGS:
            vargs = sum((["-%s" % k, str(min(v, 2000))] for k, v in params.items()), []) + VALIDATE_ARGS[name]
        for kind in kinds:
            p = run([MPIRUN, "-np", str(a.ranks), "--oversubscribe", exes[kind]] + vargs + ["--validate", "--stats"], env=env)
            if p.returncode or " FAIL" in p.stdout:
                print("auto.sh: %s (%s) fails --validate:\n%s" % (name, kind, p.stdout[-2000:]), file=sys.stderr)
                fail = 1
            if kind == "once":
                ch = [l[len("schedule: "):] for l in p.stdout.splitlines() if l.startswith("schedule: variant")]
                exes["chosen"] = ch[0].split(" (")[0] if ch else "one schedule (no variants)"
        # short kernels run more iterations (about 0.5 s per measurement), to rise above the noise
        p = run([MPIRUN, "-np", str(a.ranks), "--oversubscribe", exes["hand"]] + pargs + ["--iters", "1", "--json"], env=env)
        js = [l for l in p.stdout.splitlines() if l.startswith("{")]
        iters = a.iters
        if js and json.loads(js[0])["min_s"] > 0:
            iters = max(a.iters, min(200, int(0.5 / json.loads(js[0])["min_s"])))
        for r in range(a.rounds):
            for kind in kinds:
                p = run([MPIRUN, "-np", str(a.ranks), "--oversubscribe", exes[kind]] + pargs +
                        ["--iters", str(iters), "--warmup", "1", "--json"], env=env)
                js = [l for l in p.stdout.splitlines() if l.startswith("{")]
                if p.returncode or not js:
                    fail = 1
                    continue
                t = json.loads(js[0])["min_s"]
                best[kind] = min(best.get(kind, t), t)
        if len(best) == len(kinds):
            rows.append((name, best["hand"], best["auto"], best["hand"] / best["auto"], best["once"], best["hand"] / best["once"],
                         exes["chosen"], exes["schedule"]))
        if not vparams:
            continue
        # --auto choosing the layouts too: every `@ M(...)` of the program written `@ M`
        free = os.path.join(b, "%s_layouts.dtl" % tag)
        with open(free, "w") as f:
            f.write(re.sub(r"@\s*(\w+)\s*\([^)]*\)", r"@ \1", auto_text))
        for P in (4, 8, 16, 64):
            vh, _ = volume(os.path.join(b, "%s_hand.dtl" % tag), P, vparams, False)
            va, held = volume(os.path.join(b, "%s_auto.dtl" % tag), P, vparams, True)
            vl, heldl = volume(free, P, vparams, True)
            lb = bound_words(name, vparams, P)
            # (the plan's "held" counts a sparse block's elements, not its stored entries: no sum)
            dense = name not in VALIDATE_ARGS
            acc = va + held if va is not None and held is not None and dense else None
            accl = vl + heldl if vl is not None and heldl is not None and dense else None
            vols.append((name, P, vh, va, acc if acc is not None else "-", "%.2f" % (acc / (8 * lb)) if lb and acc else "-",
                         vl if vl is not None else "-", accl if accl is not None else "-",
                         "%.2f" % (accl / (8 * lb)) if lb and accl else "-", "%d" % (8 * lb) if lb else "-"))
    out = os.path.join(a.out, "auto.md")
    with open(out, "w") as f:
        f.write("# distalc --auto against the hand-written schedules of examples/\n\n")
        f.write("%d ranks x 1 thread, best of %d rounds of at least %d runs (short kernels: about 0.5 s of runs); speed = hand time / auto time (above 1: --auto faster). "
                "--auto: compiled for the run's rank count and params; once: compiled with neither, the executable "
                "choosing among the search's variants at run time.\n\n" % (a.ranks, a.rounds, a.iters))
        f.write("| kernel | hand (s) | --auto (s) | speed | once (s) | speed | once ran | schedule --auto chose |\n"
                "|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write("| %s | %.4g | %.4g | %.2f | %.4g | %.2f | %s | `%s` |\n" % r)
        f.write("\nCommunication volume per rank (rank 0's bytes received, --emit plan), and what --auto's rank 0 "
                "accesses (received + held: the blocks of its own) against the lower bound on bytes accessed by a rank "
                "doing 1/P of the work, whatever the layout (see bench/auto.py):\n\n")
        f.write("| kernel | ranks | hand received | --auto received | accessed | / bound | --auto with layouts: received "
                "| accessed | / bound | bound |\n|---|---|---|---|---|---|---|---|---|---|\n")
        for v in vols:
            f.write("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n" % v)
    with open(out) as f:
        print(f.read())
    return fail


if __name__ == "__main__":
    sys.exit(main())
