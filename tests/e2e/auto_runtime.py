"""The run-time choice of distalc --auto (auto_runtime.sh runs this).

Rank count and params are known only when a program runs: --auto keeps the schedules its
search chooses at other rank counts and shapes (variants), and the generated plan_create
evaluates each one's cost formulas at the real ones and runs the one predicted fastest.
For auto_runtime.dtl (no param has a value) and auto_kernels.dtl:
  - the executable, compiled once, validates against its serial reference at 1 to 8 ranks and
    shapes square, tall, flat and with a long summed dimension, uneven; the variant it runs is
    the least predicted of those it prints (ties: the lowest), never above variant 0's (the
    compile's choice), and the shapes make it choose more than one variant;
  - every variant, forced with DISTAL_VARIANT=N, validates at every rank count;
  - compiled with --set and --ranks for one point, the executable's predictions at that point
    equal those `distalc --emit plan` prints for the same options (the same formulas, evaluated
    by the compiler and by the generated code), and so does the choice;
  - with --mem-per-rank, the variant run fits the limit where any does;
  - DISTAL_VARIANT out of range is an error with a message and a nonzero exit;
  - a machine model of 2 threads per rank parallelizes loops (auto_threads.dtl), which
    validate on 2 OpenMP threads per rank at 1 to 4 ranks; the default model does not;
  - the grid's shape where its params are free (auto_shape.dtl): distalc --auto chooses one
    other than the solver's for a flat product at 8 ranks, predicted faster, and --emit
    schedule writes it so that the printed program gives the same plan without --auto;
    compiled for a rank count and params, the executable runs on the grid `--emit plan` names;
  - machines of two and three levels (auto_hier.dtl, auto_hier3.dtl), compiled once for nodes
    of 4 ranks: several variants, the one run is the least predicted, and every variant,
    forced, validates on 1 to 12 ranks in nodes of 1 to 8 (DISTAL_RANKS_PER_NODE)
    for them; given grid params are kept; and auto_runtime.dtl, compiled once, chooses the
    shape at run time: it validates at 1 to 8 ranks and three shapes of params, is never
    predicted slower than on the solver's grid (given with -gx, -gy), and not on one shape
    for every run."""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import auto  # noqa: E402  (its tallies: ok, bad, checks, fails)

ok, bad = auto.ok, auto.bad
TOP = auto.TOP
DISTALC = auto.DISTALC
MPIRUN = os.environ.get("MPIRUN", "mpirun")
PROG = os.path.join(TOP, "tests", "e2e", "programs")


def run(cmd, env=None, timeout=300):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, env=e, timeout=timeout)
    return p.returncode, p.stdout


def mpirun(exe, ranks, params, extra=(), env=None):
    """a run; one that exits nonzero before validating anything, with no message of the
    program's own (the launcher's failure), is started once more, and that said"""
    cmd = [MPIRUN, "--oversubscribe", "-np", str(ranks), exe]
    for k, v in params.items():
        cmd += ["-" + k, str(v)]
    rc, out = run(cmd + list(extra), env)
    if rc and not re.search(r"^(validate |schedule: |rank \d+ )|DISTAL_|%s:" % re.escape(exe), out, re.M):
        print("NOTE %s exited %d before the program said anything; run again. Its output:" % (" ".join(cmd), rc))
        for line in out.strip().splitlines()[-20:]:
            print("    | " + line)
        rc, out = run(cmd + list(extra), env)
    return rc, out


def predictions(out):
    """[(seconds, buffers)] per variant and the chosen index, from --verbose"""
    pred, chosen = {}, None
    for line in out.splitlines():
        m = re.match(r"schedule: variant (\d+) predicted ([0-9.e+-]+) s, buffers (\d+) bytes( \(chosen\))?$", line)
        if m:
            pred[int(m.group(1))] = (float(m.group(2)), float(m.group(3)))
            if m.group(4):
                chosen = int(m.group(1))
    return [pred[v] for v in sorted(pred)], chosen


def plan_listing(text):
    """[(seconds, buffers)] per variant and the chosen index, from --emit plan"""
    pred, chosen = [], None
    for line in text.splitlines():
        m = re.match(r"  (chosen|      ) variant (\d+) .*: predicted ([0-9.e+-]+) s, buffers (\d+) bytes", line)
        if m:
            pred.append((float(m.group(3)), float(m.group(4))))
            if m.group(1) == "chosen":
                chosen = int(m.group(2))
    return pred, chosen


def validated(out):
    return "validate" in out and "FAIL" not in out and all(l.endswith(" ok") for l in out.splitlines() if l.startswith("validate "))


def close(a, b):
    return abs(a - b) <= 1e-5 * max(abs(a), abs(b), 1e-300)


SHAPES = {
    "auto_runtime.dtl": [{"n": 45, "m": 38, "k": 41}, {"n": 301, "m": 7, "k": 9}, {"n": 6, "m": 11, "k": 700},
                         {"n": 9, "m": 260, "k": 13}],
    "auto_kernels.dtl": [{"n": 37, "m": 29, "p": 11}, {"n": 300, "m": 9, "p": 260}, {"n": 5, "m": 400, "p": 3}],
}


def solver_grid(p):
    """MPI_Dims_create's two dims for p ranks (distal/grid.h): balanced, larger first"""
    a = max(d for d in range(1, p + 1) if p % d == 0 and d * d <= p)
    return p // a, a


def run_grid(out):
    """(dims, predicted seconds) from a run's --stats lines"""
    g = re.search(r"^schedule: grid ([0-9 x]+) \(", out, re.M)
    s = re.search(r"^schedule: predicted ([0-9.e+-]+) s per compute", out, re.M)
    return (tuple(int(x) for x in g.group(1).split(" x ")) if g else None, float(s.group(1)) if s else None)


def hier_checks(d):
    """Run-time variants of hierarchical machines: compiled once (nodes of 4 ranks), run in
    nodes of other sizes."""
    runs = ((1, 1), (4, 2), (8, 4), (6, 3), (8, 8), (12, 4))
    sizes = ({"n": 23, "m": 14, "k": 9}, {"n": 40, "m": 7, "k": 30})
    for name, node in (("auto_hier.dtl", ["--ranks-per-node", "4"]), ("auto_hier3.dtl", ["--ranks-per-node", "4"]),
                       ("auto_hier3.dtl", [])):
        src = os.path.join(PROG, name)
        exe = os.path.join(d, "h_" + name[:-4])
        how = "nodes of 4" if node else "the node size --emit plan picks"
        rc, out = run([DISTALC, "--auto"] + node + ["--exe", src, "-o", exe])
        if rc:
            bad("%s: distalc --auto %s --exe exits %d" % (name, " ".join(node), rc), out)
            continue
        rc, plan = run([DISTALC, "--auto"] + node + ["--emit", "plan", src])
        nvar = len(re.findall(r"^  (?:chosen|      ) variant \d+", plan, re.M))
        if nvar >= 2:
            ok("%s: --emit plan lists %d variants (%s)" % (name, nvar, how))
        else:
            bad("%s: --emit plan lists %d variants (%s), expected several" % (name, nvar, how), plan)
        for i, (ranks, rpn) in enumerate(runs):
            shape = sizes[i % len(sizes)]
            what = "%s at %d ranks in nodes of %d, %s" % (name, ranks, rpn, shape)
            rc, out = mpirun(exe, ranks, shape, ["--validate", "--verbose"], {"DISTAL_RANKS_PER_NODE": str(rpn)})
            pred, chosen = predictions(out)
            if rc or not validated(out) or chosen is None or len(pred) != nvar:
                bad(what + ": run failed, did not validate or printed no choice", out)
                continue
            least = min(p[0] for p in pred)
            if pred[chosen][0] <= least * (1 + 1e-6):
                ok(what + ": validated, ran variant %d, the least predicted" % chosen)
            else:
                bad(what + ": ran variant %d, not the least predicted" % chosen, out)
            for v in range(nvar):
                rc, out = mpirun(exe, ranks, shape, ["--validate", "--verbose"],
                                 {"DISTAL_RANKS_PER_NODE": str(rpn), "DISTAL_VARIANT": str(v)})
                _, ch = predictions(out)
                if rc or not validated(out) or ch != v:
                    bad(what + ": DISTAL_VARIANT=%d" % v, out)
        ok("%s: every variant validated at %d rank counts and node sizes" % (name, len(runs)))


def shape_checks(d):
    src = os.path.join(PROG, "auto_shape.dtl")
    flat = ["--set", "m=37", "--set", "n=30001"]
    rc, plan = run([DISTALC, "--auto", "--ranks", "8", "--emit", "plan", src] + flat)
    m = re.search(r"grid: M\((\d+), (\d+)\) at 8 ranks, of (\d+) shapes: the program predicted at ([0-9.e+-]+) s.*"
                  r"\(the solver's shape: ([0-9.e+-]+) s\)", plan)
    if rc == 0 and m and (int(m.group(1)), int(m.group(2))) != (4, 2) and int(m.group(3)) == 4 and \
            float(m.group(4)) < float(m.group(5)) and plan.startswith("grid: %s %s (8 ranks)" % (m.group(1), m.group(2))):
        ok("auto_shape.dtl at 8 ranks, m=37 n=30001: --auto chooses grid(%s, %s) of 4 shapes, predicted %s s (4 x 2: %s s)"
           % m.group(1, 2, 4, 5))
    else:
        bad("auto_shape.dtl at 8 ranks: no other shape chosen", plan)
    rc, sched = run([DISTALC, "--auto", "--ranks", "8", "--emit", "schedule", src] + flat)
    printed = os.path.join(d, "auto_shape_printed.dtl")
    with open(printed, "w") as f:
        f.write(sched)
    rc2, plan2 = run([DISTALC, "--ranks", "8", "--emit", "plan", printed] + flat)
    head = plan.split("auto-scheduling")[0]
    if rc == 0 and rc2 == 0 and "param gx = " in sched and plan2.split("auto-scheduling")[0] == head:
        ok("auto_shape.dtl: --emit schedule writes the grid's shape; compiled without --auto, the same plan")
    else:
        bad("auto_shape.dtl: the printed schedule does not give the same plan", sched + plan2)
    rc, plan3 = run([DISTALC, "--auto", "--ranks", "8", "--set", "gx=2", "--emit", "plan", src] + flat)
    if rc == 0 and plan3.startswith("grid: 2 4 (8 ranks)") and "the grid's shape" not in plan3:
        ok("auto_shape.dtl: a grid param given with --set keeps the solver's shape")
    else:
        bad("auto_shape.dtl: --set gx=2 not kept", plan3)
    # compiled once (auto_runtime.dtl: its layouts written, no size known), the shape chosen at run time
    exe = os.path.join(d, "auto_runtime_shape")
    rc, out = run([DISTALC, "--auto", "--exe", os.path.join(PROG, "auto_runtime.dtl"), "-o", exe])
    if rc:
        bad("auto_runtime.dtl: distalc --auto --exe exits %d" % rc, out)
        return
    grids = set()
    for ranks in (1, 2, 3, 4, 6, 8):
        for params in ({"n": 45, "m": 38, "k": 41}, {"n": 301, "m": 7, "k": 9}, {"n": 6, "m": 11, "k": 700}):
            what = "auto_runtime.dtl at %d ranks, %s, the grid's shape" % (ranks, params)
            rc, out = mpirun(exe, ranks, params, ["--validate", "--stats"])
            dims, pred = run_grid(out)
            g0 = solver_grid(ranks)
            rc3, out3 = mpirun(exe, ranks, dict(params, gx=g0[0], gy=g0[1]), ["--stats"])
            dims0, pred0 = run_grid(out3)
            if rc or rc3 or not validated(out) or not dims or dims0 != g0:
                bad(what + ": failed, did not validate or printed no grid", out + out3)
            elif pred > pred0 * (1 + 1e-6):
                bad(what + ": grid %s predicted %g s, the solver's %s %g s" % (dims, pred, g0, pred0), out + out3)
            else:
                ok(what + ": validated on grid %s (predicted %.3g s; the solver's %s: %.3g s)"
                   % (" x ".join(map(str, dims)), pred, " x ".join(map(str, g0)), pred0))
                grids.add((ranks, dims != g0))
    if any(other for _, other in grids) and any(not other for r, other in grids if r > 2):
        ok("auto_runtime.dtl: the run-time shape differs from the solver's for some runs, not all")
    else:
        bad("auto_runtime.dtl: the run-time shape is the solver's always or never (%s)" % sorted(grids))
    # compiled for one point, the run's grid is the one --emit plan names for the same options
    for ranks, params in ((4, {"m": 3001, "n": 37}), (6, {"m": 37, "n": 3001}), (8, {"m": 300, "n": 300})):
        sets = []
        for k, v in params.items():
            sets += ["--set", "%s=%d" % (k, v)]
        what = "auto_shape.dtl compiled for %d ranks, %s" % (ranks, params)
        rc1, out1 = run([DISTALC, "--auto", "--ranks", str(ranks)] + sets + ["--exe", src, "-o", exe + "_at"])
        rc2, plan = run([DISTALC, "--auto", "--ranks", str(ranks), "--emit", "plan", src] + sets)
        rc3, out = mpirun(exe + "_at", ranks, params, ["--validate", "--stats"])
        pm = re.search(r"the grid's shape: grid\(gx = (\d+), gy = (\d+)\)", plan)
        dims, _ = run_grid(out)
        if rc1 or rc2 or rc3 or not validated(out) or not pm:
            bad(what + ": failed", out1 + plan + out)
        elif dims == (int(pm.group(1)), int(pm.group(2))):
            ok(what + ": ran on grid %s, as --emit plan names" % " x ".join(map(str, dims)))
        else:
            bad(what + ": ran on grid %s, --emit plan names %s" % (dims, pm.group(1, 2)), plan + out)


def main():
    with tempfile.TemporaryDirectory() as d:
        for name, shapes in SHAPES.items():
            src = os.path.join(PROG, name)
            exe = os.path.join(d, name[:-4])
            rc, out = run([DISTALC, "--auto", "--exe", src, "-o", exe])
            if rc:
                bad("%s: distalc --auto --exe exits %d" % (name, rc), out)
                continue
            rc, plan = run([DISTALC, "--auto", "--emit", "plan", src])
            nvar = len(re.findall(r"^  (?:chosen|      ) variant \d+", plan, re.M))
            if nvar >= 2:
                ok("%s: --emit plan lists %d variants" % (name, nvar))
            else:
                bad("%s: --emit plan lists %d variants, expected several" % (name, nvar), plan)
            chosen_any = set()
            for ranks in (1, 2, 3, 4, 6, 8):
                for shape in shapes:
                    rc, out = mpirun(exe, ranks, shape, ["--validate", "--verbose"])
                    pred, chosen = predictions(out)
                    what = "%s at %d ranks, %s" % (name, ranks, shape)
                    if rc or not validated(out) or chosen is None or len(pred) != nvar:
                        bad(what + ": run failed, did not validate or printed no choice", out)
                        continue
                    # one of the least predicted (plan_create takes predictions within a millionth as ties)
                    least = min(p[0] for p in pred)
                    best = min(v for v in range(len(pred)) if pred[v][0] <= least * (1 + 1e-6))
                    if pred[chosen][0] <= least * (1 + 1e-6) and pred[chosen][0] <= pred[0][0] * (1 + 1e-6):
                        ok(what + ": validated, ran variant %d (predicted %.3g s; variant 0 %.3g s)" % (chosen, pred[chosen][0], pred[0][0]))
                    else:
                        bad(what + ": ran variant %d, the least predicted is %d" % (chosen, best), out)
                    chosen_any.add(chosen)
            if len(chosen_any) >= 2:
                ok("%s: the run-time choice differs by rank count and shape: variants %s" % (name, sorted(chosen_any)))
            else:
                bad("%s: one variant chosen for every rank count and shape (%s)" % (name, sorted(chosen_any)))
            # every variant, forced
            for v in range(nvar):
                for ranks in (1, 3, 4, 8):
                    shape = shapes[(v + ranks) % len(shapes)]
                    rc, out = mpirun(exe, ranks, shape, ["--validate", "--verbose"], {"DISTAL_VARIANT": str(v)})
                    _, chosen = predictions(out)
                    if rc == 0 and validated(out) and chosen == v:
                        ok("%s: DISTAL_VARIANT=%d at %d ranks, %s validates" % (name, v, ranks, shape))
                    else:
                        bad("%s: DISTAL_VARIANT=%d at %d ranks, %s" % (name, v, ranks, shape), out)
            rc, out = mpirun(exe, 2, shapes[0], [], {"DISTAL_VARIANT": str(nvar)})
            if rc and "DISTAL_VARIANT=%d: not a variant of this program" % nvar in out:
                ok("%s: DISTAL_VARIANT=%d rejected" % (name, nvar))
            else:
                bad("%s: DISTAL_VARIANT=%d not rejected (exit %d)" % (name, nvar, rc), out)
            # the compiler's and the generated code's formulas agree at a compile point
            for ranks, shape in ((4, shapes[1]), (6, shapes[-1]), (8, shapes[0])):
                sets = []
                for k, v in shape.items():
                    sets += ["--set", "%s=%d" % (k, v)]
                exe2 = exe + "_at"
                rc1, out1 = run([DISTALC, "--auto", "--ranks", str(ranks)] + sets + ["--exe", src, "-o", exe2])
                rc2, plan = run([DISTALC, "--auto", "--ranks", str(ranks), "--emit", "plan"] + sets + [src])
                rc3, out = mpirun(exe2, ranks, shape, ["--validate", "--verbose"])
                p_plan, c_plan = plan_listing(plan)
                p_run, c_run = predictions(out)
                what = "%s compiled for %d ranks, %s" % (name, ranks, shape)
                if rc1 or rc2 or rc3 or not validated(out):
                    bad(what + ": failed", out1 + plan + out)
                elif len(p_plan) >= 2 and len(p_plan) == len(p_run) and c_plan == c_run and \
                        all(close(a[0], b[0]) and close(a[1], b[1]) for a, b in zip(p_plan, p_run)):
                    ok(what + ": --emit plan and the run predict the same for %d variants and choose %d" % (len(p_run), c_run))
                else:
                    bad(what + ": --emit plan %s (chosen %s) but the run %s (chosen %s)" % (p_plan, c_plan, p_run, c_run), plan + out)
            # the memory limit: the run's variant fits where one does
            rc, out = mpirun(exe, 4, shapes[0], ["--verbose"])
            pred, _ = predictions(out)
            if pred:
                limit = int(sorted(b for _, b in pred)[len(pred) // 2])  # about half the variants fit
                exe3 = exe + "_mem"
                rc1, out1 = run([DISTALC, "--auto", "--mem-per-rank", str(limit), "--exe", src, "-o", exe3])
                rc2, out2 = mpirun(exe3, 4, shapes[0], ["--validate", "--verbose"])
                p3, c3 = predictions(out2)
                fits = [v for v in range(len(p3)) if p3[v][1] <= limit]
                if rc1 or rc2 or c3 is None or not validated(out2):
                    bad("%s: --mem-per-rank %d run failed" % (name, limit), out1 + out2)
                elif (fits and c3 in fits and p3[c3][0] == min(p3[v][0] for v in fits)) or (not fits and p3[c3][1] == min(b for _, b in p3)):
                    ok("%s: --mem-per-rank %d: ran variant %d (buffers %d bytes)" % (name, limit, c3, p3[c3][1]))
                else:
                    bad("%s: --mem-per-rank %d: ran variant %d of %s" % (name, limit, c3, p3), out2)
        shape_checks(d)
        hier_checks(d)
        # a program without variants (compiled without --auto): its one schedule is variant 0,
        # and DISTAL_VARIANT=1 is out of range
        src = os.path.join(d, "one.dtl")
        with open(src, "w") as f:
            f.write("param n = 11;\nmachine M = grid(g);\ntensor x(n) @ M(i -> i);\ntensor y(n) @ M(i -> i);\ny(i) = x(i) * 2;\n")
        for flags in ([],):
            exe = os.path.join(d, "one")
            rc, out = run([DISTALC] + flags + ["--exe", src, "-o", exe])
            rc1, out1 = mpirun(exe, 2, {}, ["--validate"], {"DISTAL_VARIANT": "0"})
            rc2, out2 = mpirun(exe, 2, {}, [], {"DISTAL_VARIANT": "1"})
            what = "a program without variants%s" % (" (--auto)" if flags else "")
            if rc == 0 and rc1 == 0 and validated(out1) and rc2 and "DISTAL_VARIANT=1: not a variant of this program (0 to 0)" in out2:
                ok(what + ": DISTAL_VARIANT=0 runs it, DISTAL_VARIANT=1 rejected")
            else:
                bad(what + ": DISTAL_VARIANT=0 or 1", out + out1 + out2)
        # threads: a model of 2 threads per rank parallelizes the loops no kernel runs, and the
        # programs validate on 2 OpenMP threads per rank
        model = os.path.join(d, "threads.model")
        with open(model, "w") as f:
            f.write("threads 2\n")
        src = os.path.join(PROG, "auto_threads.dtl")
        rc, sched = run([DISTALC, "--auto", "--model", model, "--emit", "schedule", "--ranks", "2", src])
        if rc == 0 and ".parallelize(" in sched:
            ok("auto_threads.dtl: a model of 2 threads per rank parallelizes a loop")
        else:
            bad("auto_threads.dtl: no parallelize with a model of 2 threads", sched)
        rc, sched1 = run([DISTALC, "--auto", "--emit", "schedule", "--ranks", "2", src])
        if rc == 0 and ".parallelize(" not in sched1:
            ok("auto_threads.dtl: the default model (1 thread) parallelizes nothing")
        else:
            bad("auto_threads.dtl: parallelize with 1 thread per rank", sched1)
        exe = os.path.join(d, "auto_threads")
        rc, out = run([DISTALC, "--auto", "--model", model, "--exe", src, "-o", exe])
        for ranks in (1, 2, 3, 4):
            for shape in ({"n": 1001, "m": 37}, {"n": 7, "m": 5}):
                rc2, out2 = mpirun(exe, ranks, shape, ["--validate"], {"OMP_NUM_THREADS": "2"})
                what = "auto_threads.dtl (2 threads a rank) at %d ranks, %s" % (ranks, shape)
                if rc == 0 and rc2 == 0 and validated(out2):
                    ok(what + " validates")
                else:
                    bad(what, out + out2)
    return auto.summary()


if __name__ == "__main__":
    sys.exit(main())
