"""distalc --auto and --emit schedule, without running programs (auto.sh runs this).

For every program below and rank counts 1 to 64:
  - `--emit schedule --auto --ranks P` writes a program that, compiled without --auto, has
    exactly the plan of the original compiled with --auto (`--emit plan`, the listing of the
    search aside) and the same SPMD program;
  - in the search's listing (`--emit plan --auto`), the chosen schedule's predicted time is
    never above the owner-computes default's, and with --mem-per-rank the chosen buffers fit
    the limit unless the listing says that nothing fits (then the default is kept);
  - statements with schedule commands keep them: the printed program is the source;
  - the search's pruning by bound (candidates whose communication alone is predicted slower
    than a costed candidate are not tried) chooses what DISTAL_AUTO_EXHAUSTIVE=1 chooses.
And distalc rejects a bad --mem-per-rank and an unknown --emit with a message."""
import os
import re
import subprocess
import sys
import tempfile

TOP = os.environ.get("top_srcdir") or os.path.join(os.path.dirname(__file__), "..", "..")
DISTALC = os.environ.get("DISTALC", "distalc")
PROGRAMS = [os.path.join(TOP, "tests", "e2e", "programs", f) for f in ("auto_kernels.dtl", "auto_3d.dtl", "auto_layout.dtl", "auto_shape.dtl",
                                                                        "auto_hier.dtl", "auto_hier3.dtl", "auto_sparse.dtl",
                                                                        "auto_sparse_out.dtl", "auto_loops.dtl")]
PROGRAMS += [os.path.join(TOP, "examples", f) for f in ("summa.dtl", "ttv.dtl", "cg.dtl")]

checks = fails = 0


def ok(msg):
    global checks
    checks += 1
    print("PASS " + msg)


failed = []  # the failed checks' lines, printed again at the end (logs keep their tails)


def bad(msg, out=""):
    global checks, fails
    checks += 1
    fails += 1
    lines = ["FAIL " + msg] + ["    | " + line for line in out.strip().splitlines()[-20:]]
    failed.extend(lines)
    print("\n".join(lines))


def summary():
    """the tally, after the failed checks again; 1 where any failed"""
    if failed:
        print("the failed checks again:")
        print("\n".join(failed))
    print("%d checks, %d failed" % (checks, fails))
    return 1 if fails else 0


MPIRUN = os.environ.get("MPIRUN", "mpirun")


def distalc(*args, env=None):
    p = subprocess.run([DISTALC] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                       timeout=120, env=env)
    return p.returncode, p.stdout, p.stderr


def memory_checks(d):
    """a model whose memory is slow: every candidate's loops take at least their bytes from memory
    / memory_bandwidth (the listing's), the kernel kept where the memory bounds loops and kernel
    alike (the tie-break by the loops' time), and the run-time variants' predictions (--emit plan
    with every param set) at least the output block's bytes / memory_bandwidth"""
    slow = os.path.join(d, "slow.model")
    with open(slow, "w") as f:
        f.write("memory_bandwidth 1000\n")
    kernels = PROGRAMS[0]  # auto_kernels.dtl: streaming statements among others
    rc, out, err = distalc(kernels, "--auto", "--model", slow, "--emit", "plan", "--ranks", "4")
    rows = re.findall(r"^    (chosen|then  ) ([0-9.e+-]+) s \(received .*?, ([0-9.e+-]+) bytes from memory\): (.*)$", out, re.M)
    low = [r for r in rows if float(r[1]) < float(r[2]) / 1000 * 0.995]  # (the listing rounds to 3 digits)
    if rc or not rows or low:
        bad("memory_bandwidth 1000: a candidate predicted below its bytes from memory / 1000", out + err)
    else:
        ok("memory_bandwidth 1000: every one of %d candidates listed takes at least its bytes from memory / 1000" % len(rows))
    # a memory-bound streaming statement: the kernel and the generated loops tie; the kernel is chosen
    prog = os.path.join(d, "stream.dtl")
    with open(prog, "w") as f:
        f.write("param n = 512;\nparam m = 512;\nparam p = 64;\nmachine M = grid(g);\ntensor A(n, m) @ M(ij -> i);\n"
                "tensor B(n, m, p) @ M(ijk -> i);\ntensor c(p) @ M(i -> *);\nA(i, j) = B(i, j, k) * c(k);\n")
    rc, out, err = distalc(prog, "--auto", "--model", slow, "--emit", "plan", "--ranks", "2")
    chosen = re.search(r"^    chosen .*$", out, re.M)
    if rc or not chosen or "substitute" not in chosen.group(0):
        bad("a memory-bound TTV: expected a catalogue kernel among the tied candidates", out + err)
    else:
        ok("a memory-bound TTV keeps its kernel: " + chosen.group(0).split("): ", 1)[1])
    rt = os.path.join(TOP, "tests", "e2e", "programs", "auto_runtime.dtl")
    n = m = k = 256
    rc, out, err = distalc(rt, "--auto", "--model", slow, "--emit", "plan", "--ranks", "4", "--set", "n=%d" % n,
                           "--set", "m=%d" % m, "--set", "k=%d" % k)
    preds = [float(x) for x in re.findall(r"variant \d+ \(.*?\): predicted ([0-9.e+-]+) s", out)]
    floor = n * m * 8 / 4 / 1000  # A's block on each of 4 ranks, written once
    if rc or not preds or min(preds) < floor:
        bad("memory_bandwidth 1000: the run-time variants predicted below %g s" % floor, out + err)
    else:
        ok("memory_bandwidth 1000: %d run-time variants predicted at least %g s" % (len(preds), floor))


def sparse_checks():
    """statements that read sparse tensors are searched over their distributions: a CSR matrix
    held by columns computes where it lies (over j, its partial sums reduced); one held by rows
    keeps the owner-computes default (whose vector broadcast becomes a halo exchange), also
    where a candidate that moves the matrix is predicted faster by latency (64 ranks, a row or
    two each); no panels"""
    path = os.path.join(TOP, "tests", "e2e", "programs", "auto_sparse.dtl")
    for ranks in (2, 8, 64):
        rc, out, err = distalc(path, "--auto", "--emit", "plan", "--ranks", str(ranks))
        chosen = re.findall(r"^  statement (\d+): .*\n    chosen .*?\): (.*)$", out, re.M)
        got = dict((int(k), v) for k, v in chosen)
        want = {1: "the owner-computes default", 2: ".distribute({j}, {jo}, {ji}, M)", 3: ".distribute({j}, {jo}, {ji}, M)"}
        panels = [l for l in out.splitlines() if l.startswith("    ") and (".split(" in l or ".rotate(" in l)]
        if rc or any(got.get(k) != v for k, v in want.items()) or panels:
            bad("auto_sparse.dtl at %d ranks: expected %s, no panels; got %s" % (ranks, want, got), out + err)
        else:
            ok("auto_sparse.dtl at %d ranks: B by columns computed over j, A by rows by its owners, no panels" % ranks)
        if ranks == 64 and "it reads or writes a sparse tensor and no faster candidate receives fewer bytes: the default" not in out:
            bad("auto_sparse.dtl at 64 ranks: the listing does not say why statement 1 keeps its default", out)


def sparse_out_checks():
    """statements that write sparse tensors are searched too: B (CSR by columns) times a dense
    matrix of 4 columns into a sparse result by rows computes where B lies at 2 and 8 ranks,
    over j, its partial sums' entries sent to the holders of the result's rows (the plan's
    exchange of produced entries); at 64 ranks, where a rank's rows of B (10 entries a row in
    the model) are fewer than the n x 4 partial sums, by the owners of the rows; no panels,
    no kernels, no threads (a sparse result is produced by one thread)"""
    path = os.path.join(TOP, "tests", "e2e", "programs", "auto_sparse_out.dtl")
    for ranks in (2, 8, 64):  # sizes that give every rank columns of B
        rc, out, err = distalc(path, "--auto", "--emit", "plan", "--ranks", str(ranks), "--set", "n=4000", "--set", "m=3000")
        chosen = re.findall(r"^  statement (\d+): .*\n    chosen .*?\): (.*)$", out, re.M)
        got = dict((int(k), v) for k, v in chosen)
        rest = [l for l in out.splitlines() if l.startswith("    ") and (".split(" in l or ".rotate(" in l or
                                                                         ".substitute(" in l or ".parallelize(" in l)]
        want = ".distribute({j}, {jo}, {ji}, M)" if ranks < 64 else "the owner-computes default"
        if rc or got.get(2) != want or rest or len(got) != 4:
            bad("auto_sparse_out.dtl at %d ranks: expected G by %s, no panels or kernels; got %s" % (ranks, want, got), out + err)
        else:
            ok("auto_sparse_out.dtl at %d ranks: G computed %s" % (ranks, "where B lies, over j" if ranks < 64 else "by its rows' owners"))
    rc, out, err = distalc(path, "--auto", "--emit", "plan", "--ranks", "4", "--set", "n=400", "--set", "m=300")
    if rc or "sparse: the produced entries, point to point to the holders, summed there" not in out:
        bad("auto_sparse_out.dtl: the plan of G does not send the produced entries to their holders", out + err)
    else:
        ok("auto_sparse_out.dtl: G's produced entries go point to point to the holders")


def sparse_model_checks(d):
    """the cost model's estimate of a sparse tensor's entries (10 a row): an SpMV's plan shows it
    beside the dense positions and runs that many iterations; a sparse matrix's layouts are
    searched (its block counted by its entries against the memory per rank); sparse_entry_time
    in a model file weighs the entries a rank receives: where sorting them in costs nothing, G
    (auto_sparse_out.dtl) moves B's rows to G's owners at 8 ranks instead of its partial sums"""
    spmv = os.path.join(d, "spmv_model.dtl")
    with open(spmv, "w") as f:
        f.write("param n = 100000;\nmachine M = grid(g);\ntensor y(n) @ M;\ntensor A(n, n) csr @ M;\ntensor x(n) @ M;\n"
                "y(i) = A(i, j) * x(j);\n")
    rc, out, err = distalc(spmv, "--auto", "--emit", "plan", "--ranks", "4")
    held = re.search(r"^held by rank 0 .* A (\d+) \(the model's (\d+) stored\)", out, re.M)
    iters = re.search(r"^    chosen .*?, (\d+) iterations", out, re.M)
    lay = re.search(r"^  tensor A: M\(\w+ -> \S+\) \(of (\d+) layouts", out, re.M)
    rows = (100000 + 3) // 4
    if rc or not held or int(held.group(1)) != rows * 100000 or int(held.group(2)) != rows * 10 or not iters or \
            int(iters.group(1)) != rows * 10 or not lay or int(lay.group(1)) < 2:
        bad("SpMV n = 10^5 at 4 ranks: expected A's %d entries a rank (10 a row) held and iterated, and its layouts "
            "searched" % (rows * 10), out + err)
    else:
        ok("SpMV n = 10^5 at 4 ranks: %d entries a rank in the model, %s of A's layouts costed" % (rows * 10, lay.group(1)))
    path = os.path.join(TOP, "tests", "e2e", "programs", "auto_sparse_out.dtl")
    free = os.path.join(d, "free_sort.model")
    with open(free, "w") as f:
        f.write("sparse_entry_time 1e-15\n")
    for model, want in ((None, ".distribute({j}, {jo}, {ji}, M)"), (free, "the owner-computes default")):
        args = ["--model", model] if model else []
        rc, out, err = distalc(path, "--auto", "--emit", "plan", "--ranks", "8", "--set", "n=4000", "--set", "m=3000", *args)
        chosen = dict((int(k), v) for k, v in re.findall(r"^  statement (\d+): .*\n    chosen .*?\): (.*)$", out, re.M))
        if rc or chosen.get(2) != want:
            bad("auto_sparse_out.dtl at 8 ranks, sparse_entry_time %s: expected G by %s, got %s"
                % ("1e-15" if model else "by default", want, chosen.get(2)), out + err)
        else:
            ok("auto_sparse_out.dtl at 8 ranks, sparse_entry_time %s: G by %s" % ("1e-15" if model else "by default", want))


def loop_checks():
    """a program's layouts weigh a statement in a loop by the loop's bound and a fetch of what the
    loop does not write once (auto_loops.dtl's header: A by rows and G by columns; A by columns
    with maxit = 1; G by rows with --no-fuse, where no fetch is run once)"""
    path = os.path.join(TOP, "tests", "e2e", "programs", "auto_loops.dtl")
    for ranks in (2, 4, 8):
        for args, want in (((), ("a", "b")), (("--set", "maxit=1"), ("b", "b")), (("--no-fuse",), ("a", "a"))):
            rc, out, err = distalc(path, "--auto", "--emit", "plan", "--ranks", str(ranks), *args)
            got = tuple(re.findall(r"^  tensor %s: M\(ab -> (\w)\)" % t, out, re.M) for t in "AG")
            what = "auto_loops.dtl at %d ranks%s" % (ranks, " " + " ".join(args) if args else "")
            if rc or got != tuple([w] for w in want):
                bad("%s: expected A(ab -> %s) and G(ab -> %s), got %s" % ((what,) + want + (got,)), out + err)
            else:
                ok("%s: A(ab -> %s), G(ab -> %s)" % ((what,) + want))
            # statement 9 (G's update, reading H): its runs in the listing, and its share of the
            # program below 40 runs of its time where H is fetched once (fused), 40 runs of it
            # with --no-fuse
            m = re.search(r"^  statement 9: \d+ candidates.*; in loop 1: (\d+) runs? .* share of the program ([0-9.e+-]+) s\n"
                          r"    chosen ([0-9.e+-]+) s", out, re.M)
            runs = 1 if args[:1] == ("--set",) else 40
            if not m or int(m.group(1)) != runs:
                bad("%s: statement 9's runs in loop 1 (%d expected) not listed" % (what, runs), out + err)
                continue
            share, sec = float(m.group(2)), float(m.group(3))
            once = args != ("--no-fuse",) and runs > 1
            if (once and not sec <= share < 0.9 * runs * sec) or (not once and abs(share - runs * sec) > 0.01 * share):
                bad("%s: statement 9's share %g s against %d run(s) of %g s (H fetched %s)" % (what, share, runs, sec,
                                                                                        "once" if once else "every run"), out)
            else:
                ok("%s: statement 9's share of the program %g s, %d run(s) of %g s (H fetched %s)" % (what, share, runs, sec,
                                                                                                  "once" if once else "every run"))


def share_checks():
    """a statement's candidates ranked by their share of the program's run (auto_share.dtl's
    header): the default in a loop of 40 iterations, j distributed where the loop runs once; the
    run-time choice (plan_create's variants, --emit plan) agrees with the search at the same
    params, and the listing gives each candidate's share"""
    path = os.path.join(TOP, "tests", "e2e", "programs", "auto_share.dtl")
    for ranks in (2, 4, 8):
        for args, want in (((), ""), (("--set", "it=1"), ".distribute({j}, {jo}, {ji}, M)")):
            rc, out, err = distalc(path, "--auto", "--emit", "plan", "--ranks", str(ranks), *args)
            what = "auto_share.dtl at %d ranks%s" % (ranks, " " + " ".join(args) if args else "")
            cands = re.findall(r"^    (chosen|then  ) ([0-9.e+-]+) s a run, ([0-9.e+-]+) s of the program \(.*?\): (.*)$", out, re.M)
            if rc or not cands:
                bad("%s: no candidates with their shares listed" % what, out + err)
                continue
            chosen = cands[0][3].strip()
            shares = [float(c[2]) for c in cands]
            got = "" if chosen == "the owner-computes default" else chosen
            if got != want or shares[0] > min(shares):
                bad("%s: expected %s chosen, with the least share" % (what, want or "the default"), out)
                continue
            runs = 40 if not args else 1
            if any(abs(float(c[2]) - runs * float(c[1])) > 0.01 * float(c[2]) for c in cands if "distribute({j}" in c[3]):
                bad("%s: j distributed fetches nothing once, its share must be %d runs" % (what, runs), out)
                continue
            # the run-time choice at the same params: the variant chosen holds the same schedule
            m = re.search(r"^  chosen variant \d+ .*predicted ([0-9.e+-]+) s.*\n    statement 1: (.*)$", out, re.M)
            if m and ((m.group(2).strip() == "its default") != (want == "") or abs(float(m.group(1)) - shares[0]) > 0.01 * shares[0]):
                bad("%s: plan_create's choice (%s, %s s) differs from the search's" % (what, m.group(2), m.group(1)), out)
                continue
            ok("%s: %s chosen, share %g s%s" % (what, want or "the default", shares[0], ", run-time choice agrees" if m else ""))


def node_checks(d):
    """collectives within one node at the node's rates (node_bandwidth, node_latency): rates equal
    to the network's change no prediction; faster ones never make a candidate slower, and on
    nodes of 4 ranks put the 4-rank side of a 2 x 4 grid inside the node, at compile time and in
    plan_create (DISTAL_RANKS_PER_NODE simulates the nodes; plan_create forms the grid --emit plan
    predicts for the same nodes), the results validated"""
    prog = os.path.join(d, "gemm.dtl")
    with open(prog, "w") as f:
        f.write("param n = 512;\nmachine M = grid(gx, gy);\ntensor A(n, n) @ M(ij -> ij);\ntensor B(n, n) @ M(ij -> ij);\n"
                "tensor C(n, n) @ M(ij -> ij);\nA(i, j) = B(i, k) * C(k, j);\n")
    models = {"net": "bandwidth 1e9\nlatency 5e-6\n", "same": "bandwidth 1e9\nlatency 5e-6\nnode_bandwidth 1e9\nnode_latency 5e-6\n",
              "node": "bandwidth 1e9\nlatency 5e-6\nnode_bandwidth 2e10\nnode_latency 5e-7\n"}
    res = {}
    for name, text in models.items():
        path = os.path.join(d, name + ".model")
        with open(path, "w") as f:
            f.write(text)
        rc, out, err = distalc(prog, "--auto", "--model", path, "--emit", "plan", "--ranks", "8", "--ranks-per-node", "4",
                               "--set", "gx=4", "--set", "gy=2")
        cands = {r[1]: float(r[0]) for r in re.findall(r"^    (?:chosen|then  ) ([0-9.e+-]+) s \(.*?\): (.*)$", out, re.M)}
        shape = re.search(r"grid: M\((\d+), (\d+)\)", out)
        rc2, out2, err2 = distalc(prog, "--auto", "--model", path, "--emit", "plan", "--ranks", "8", "--ranks-per-node", "4")
        shape = re.search(r"grid: M\((\d+), (\d+)\) at 8 ranks", out2)
        res[name] = (rc or rc2, cands, shape.groups() if shape else None, out + err + out2 + err2)
    if any(r[0] or not r[1] for r in res.values()):
        bad("node rates: the listings", "".join(r[3] for r in res.values()))
        return
    if res["same"][1] != res["net"][1]:
        bad("node rates equal to the network's changed the predictions", res["same"][3] + res["net"][3])
    else:
        ok("node rates equal to the network's: the same %d predictions" % len(res["net"][1]))
    slower = [t for t, s in res["node"][1].items() if t in res["net"][1] and s > res["net"][1][t] * 1.001]
    if slower or "collectives within one node at 2e+10 B/s" not in res["node"][3]:
        bad("faster node rates made candidates slower: %s" % slower, res["node"][3])
    else:
        ok("faster node rates: no candidate slower, the listing names the rates")
    if res["net"][2] != ("4", "2") or res["node"][2] != ("2", "4"):
        bad("nodes of 4 ranks: expected the solver's 4 x 2 grid on the network's rates and 2 x 4 on the node's, not %s and %s"
            % (res["net"][2], res["node"][2]), res["net"][3] + res["node"][3])
    else:
        ok("nodes of 4 ranks: 2 x 4 with node rates (the 4-rank rows in a node), 4 x 2 without")
    exe = os.path.join(d, "gemm_node")
    rc, out, err = distalc(prog, "--auto", "--model", os.path.join(d, "node.model"), "--exe", "-o", exe)
    if rc:
        bad("node rates: --exe", out + err)
        return
    for rpn in ("4", "1"):
        # the grid plan_create forms is the one --emit plan predicts for these nodes (nodes of 4
        # ranks: 2 x 4, the 4-rank rows in a node; one rank a node: the network's rates throughout)
        rc, out, err = distalc(prog, "--auto", "--model", os.path.join(d, "node.model"), "--emit", "plan", "--ranks", "8",
                               "--ranks-per-node", rpn, "--set", "n=96")
        shape = re.search(r"the grid's shape: grid\(gx = (\d+), gy = (\d+)\)", out)
        if rc or not shape or (rpn == "4" and shape.groups() != ("2", "4")):
            bad("nodes of %s ranks: the plan's run-time choice (2 x 4 expected on nodes of 4)" % rpn, out + err)
            continue
        grid = "%s x %s" % shape.groups()
        p = subprocess.run([MPIRUN, "-np", "8", "--oversubscribe", exe, "-n", "96", "--validate", "--stats"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True, timeout=300,
                           env=dict(os.environ, DISTAL_RANKS_PER_NODE=rpn))
        if p.returncode or ("schedule: grid %s (8 ranks)" % grid) not in p.stdout or " ok" not in p.stdout:
            bad("plan_create on nodes of %s ranks: expected grid %s, validated" % (rpn, grid), p.stdout)
        else:
            ok("plan_create on nodes of %s ranks: grid %s, validated" % (rpn, grid))


def plan_only(text):
    """the plan without the search's listing and the rank-count comment"""
    keep = []
    for line in text.splitlines():
        if line.startswith("auto-scheduling"):
            break
        if not line.startswith("# ranks:"):
            keep.append(line)
    return "\n".join(keep)


def spmd_body(text):
    """the SPMD program without the statements' headers (their text and line numbers differ:
    the printed program has the commands written out) and without the run-time choice's
    other variants (the printed schedule is variant 0, the choice at --ranks)"""
    text = text.split("\nrun-time choice:")[0]
    return "\n".join(re.sub(r"\(line \d+\)", "", re.sub(r"^statement (\d+) \(line \d+\): .*$", r"statement \1", l))
                     for l in text.splitlines())


def listing(text):
    """statement -> [(seconds, fits, is_default, chosen)] from --emit plan --auto; seconds: what
    the search ranks by, a run's time or, in a loop, the candidate's share of the program"""
    out, st = {}, None
    for line in text.splitlines():
        m = re.match(r"  statement (\d+): (\d+) candidates", line)
        if m:
            st = int(m.group(1))
            out[st] = []
            continue
        m = re.match(r"    (chosen|then  ) ([0-9.e+-]+) s(?: a run, ([0-9.e+-]+) s of the program)? "
                     r"\(.*buffers (\d+) bytes(, over the limit)?,.*\): (.*)$", line)
        if m and st is not None:
            out[st].append((float(m.group(3) or m.group(2)), m.group(5) is None, m.group(6) == "the owner-computes default",
                            m.group(1) == "chosen", int(m.group(4))))
    return out


def check_auto(d, path, ranks, target=()):
    """One program at one rank count: the printed schedule gives the same plan and SPMD
    program, no choice predicted slower than the default, pruning keeps the choice, the
    memory limit is respected.  target: ("--target", "cuda") checks the CUDA target."""
    name = os.path.basename(path) + (" (cuda)" if target else "")
    def distalc_t(*args, env=None):
        return distalc(*(list(args) + list(target)), env=env)
    rc, sched, err = distalc_t(path, "--auto", "--emit", "schedule", "--ranks", str(ranks))
    if rc != 0:
        bad("%s at %d ranks: --emit schedule --auto exits %d" % (name, ranks, rc), err)
        return
    out = os.path.join(d, "sched_%d_%s%s.dtl" % (ranks, os.path.basename(path), "_cuda" if target else ""))
    with open(out, "w") as f:
        f.write(sched)
    r1, p1, e1 = distalc_t(path, "--auto", "--emit", "plan", "--ranks", str(ranks))
    r2, p2, e2 = distalc_t(out, "--emit", "plan", "--ranks", str(ranks))
    s1 = distalc_t(path, "--auto", "--emit", "spmd", "--ranks", str(ranks))
    s2 = distalc_t(out, "--emit", "spmd")
    if r1 or r2 or plan_only(p1) != plan_only(p2) or spmd_body(s1[1]) != spmd_body(s2[1]):
        bad("%s at %d ranks: the printed schedule does not give the same plan" % (name, ranks),
            e1 + e2 + "\n".join(l for l in sched.splitlines() if l.startswith("  .")))
    else:
        ok("%s at %d ranks: the printed schedule gives the plan and SPMD program of --auto" % (name, ranks))
    lst = listing(p1)
    wrong = []
    for st, cands in lst.items():
        chosen = [c for c in cands if c[3]]
        default = [c for c in cands if c[2]]
        if len(chosen) != 1 or len(default) != 1:
            wrong.append("statement %d: no chosen or default line" % st)
        elif chosen[0][0] > default[0][0] * (1 + 1e-9):
            wrong.append("statement %d: chosen %g s > default %g s" % (st, chosen[0][0], default[0][0]))
    if wrong:
        bad("%s at %d ranks: %s" % (name, ranks, "; ".join(wrong)), p1)
    elif lst:
        ok("%s at %d ranks: %d statements searched, none predicted slower than the default" % (name, ranks, len(lst)))
    # dominance by bound: the search that costs every candidate chooses the same
    env = dict(os.environ, DISTAL_AUTO_EXHAUSTIVE="1")
    ex = subprocess.run([DISTALC, path, "--auto", "--emit", "plan", "--ranks", str(ranks)] + list(target), stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, universal_newlines=True, timeout=300, env=env)
    pruned = sum(int(m) for m in re.findall(r"\((\d+) more schedules not tried", p1))
    counts = [int(m) for m in re.findall(r"  statement \d+: (\d+) candidates", p1)]
    counts_ex = [int(m) for m in re.findall(r"  statement \d+: (\d+) candidates", ex.stdout)]
    chosen_of = lambda t: [l for l in t.splitlines() if l.startswith("    chosen")]
    if ex.returncode or plan_only(ex.stdout) != plan_only(p1) or chosen_of(ex.stdout) != chosen_of(p1) or \
            "not tried" in ex.stdout or sum(counts_ex) > sum(counts) + pruned:
        bad("%s at %d ranks: the pruned search differs from the exhaustive one" % (name, ranks), ex.stdout + ex.stderr)
    else:
        ok("%s at %d ranks: pruning (%d schedules not tried; the exhaustive search costs %d) keeps its choice" % (
            name, ranks, pruned, sum(counts_ex)))
    # a memory limit: half of the default's buffers of the first searched statement
    if lst:
        st, cands = sorted(lst.items())[0]
        limit = max(1, [c for c in cands if c[2]][0][4] // 2)
        r3, p3, e3 = distalc_t(path, "--auto", "--emit", "plan", "--ranks", str(ranks), "--mem-per-rank", str(limit))
        l3 = listing(p3).get(st, [])
        ch = [c for c in l3 if c[3]]
        nothing = "no candidate fits" in p3
        ex3 = subprocess.run([DISTALC, path, "--auto", "--emit", "plan", "--ranks", str(ranks), "--mem-per-rank",
                              str(limit)] + list(target), stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                             timeout=300, env=env)
        if chosen_of(ex3.stdout) != chosen_of(p3):
            bad("%s at %d ranks: --mem-per-rank %d: the pruned search differs from the exhaustive one" % (
                name, ranks, limit), p3 + ex3.stdout)
        if r3 or not ch or (ch[0][4] > limit and not (nothing and ch[0][2])):
            bad("%s at %d ranks: --mem-per-rank %d: the choice's buffers exceed it" % (name, ranks, limit), p3 + e3)
        else:
            ok("%s at %d ranks: --mem-per-rank %d respected (buffers %d%s)" % (name, ranks, limit, ch[0][4],
                                                                          ", nothing fits: the default" if nothing else ""))


def main():
    with tempfile.TemporaryDirectory() as d:
        for path in PROGRAMS:
            for ranks in (1, 2, 4, 6, 8, 12, 64):
                check_auto(d, path, ranks)
        # GPU machines are searched too, with the GPU rank's model
        for f in ("auto_kernels.dtl", "auto_3d.dtl", "auto_layout.dtl"):
            path = os.path.join(TOP, "tests", "e2e", "programs", f)
            for ranks in (1, 4, 8, 64):
                check_auto(d, path, ranks, ("--target", "cuda"))
            rc, out, err = distalc(path, "--auto", "--emit", "plan", "--ranks", "8", "--target", "cuda")
            if rc or "the default machine model of a GPU rank" not in out or "kept: the CUDA target" in out or \
                    "    chosen" not in out:
                bad("%s (cuda): not searched with the GPU rank's model" % os.path.basename(path), out + err)
            else:
                ok("%s (cuda): searched with the GPU rank's model" % os.path.basename(path))
        # scheduled statements are kept as written
        summa = os.path.join(TOP, "examples", "summa.dtl")
        rc, sched, _ = distalc(summa, "--auto", "--emit", "schedule", "--ranks", "4")
        with open(summa) as f:
            src = f.read()
        if rc or sched.split("\n", 1)[1] != src:
            bad("summa.dtl: --emit schedule --auto changed a scheduled program", sched)
        else:
            ok("summa.dtl: a scheduled program is printed as written")
        for args, pat in ((["--mem-per-rank", "0"], "--mem-per-rank needs a positive number of bytes"),
                          (["--mem-per-rank", "12x"], "--mem-per-rank needs a positive number of bytes"),
                          (["--mem-per-rank", "99999999999999999999"], "--mem-per-rank needs a positive number of bytes"),
                          (["--emit", "schedules"], "--emit takes c, cin, spmd, plan, svg, schedule or api")):
            rc, out, err = distalc(summa, "--auto", *args)
            if rc == 0 or pat not in err:
                bad("distalc %s: expected %r" % (" ".join(args), pat), out + err)
            else:
                ok("distalc %s rejected" % " ".join(args))
        # the machine model: measured, read, and bad files rejected with their line
        model = os.path.join(d, "m.model")
        rc, out, err = distalc("--calibrate", "-o", model, env=dict(os.environ, OMP_NUM_THREADS="1"))
        vals = {}
        if rc == 0 and os.path.exists(model):
            with open(model) as f:
                for line in f:
                    w = line.split("#")[0].split()
                    if len(w) == 2:
                        vals[w[0]] = float(w[1])
        # two ranks of this one computer: the node's rates measured, and the network's taken as them
        want = ["bandwidth", "latency", "memory_bandwidth", "node_bandwidth", "node_latency", "point_time"]
        if rc or sorted(vals) != want or min(vals.values()) <= 0 or vals["bandwidth"] != vals["node_bandwidth"]:
            bad("distalc --calibrate: expected a model of six positive values, the node's rates as the network's", out + err)
        else:
            ok("distalc --calibrate: %s" % ", ".join("%s %g" % kv for kv in sorted(vals.items())))
            rc, out, err = distalc(PROGRAMS[0], "--auto", "--model", model, "--emit", "plan", "--ranks", "4")
            if rc or ("by the machine model %s" % model) not in out:
                bad("--auto --model: the listing does not name the model", out + err)
            else:
                ok("--auto --model reads the calibrated model")
        # with OMP_NUM_THREADS=2 the model says each rank runs 2 threads
        model2 = os.path.join(d, "m2.model")
        rc, out, err = distalc("--calibrate", "-o", model2, env=dict(os.environ, OMP_NUM_THREADS="2"))
        text = open(model2).read() if rc == 0 and os.path.exists(model2) else ""
        rc2, out2, err2 = distalc(PROGRAMS[0], "--auto", "--model", model2, "--emit", "plan", "--ranks", "2")
        if rc == 0 and re.search(r"^threads 2$", text, re.M) and rc2 == 0 and "2 threads a rank" in out:
            ok("distalc --calibrate under OMP_NUM_THREADS=2 writes threads 2, which --auto reads")
        else:
            bad("distalc --calibrate under OMP_NUM_THREADS=2: no threads 2", out + err + text + err2)
        memory_checks(d)
        node_checks(d)
        sparse_checks()
        sparse_out_checks()
        sparse_model_checks(d)
        loop_checks()
        share_checks()
        # an error of the program as written, under --auto with `@ M` tensors whose layouts it
        # chooses: reported before the search, quoting the file's own line
        em = os.path.join(d, "em.dtl")
        with open(em, "w") as f:
            f.write("param n = 8;\nmachine M = grid(g);\ntensor A(n, n) csr @ M;\ntensor x(n) @ M;\ntensor y(n) @ M;\n"
                    "y(i) = A(i, j) * x(j);\n")
        rc, out, err = distalc(em, "--auto", "--target", "cuda", "--emit", "c")
        if rc and "em.dtl:3:8: error: tensor 'A' is sparse" in err and "\ntensor A(n, n) csr @ M;\n" in err:
            ok("--auto: an error of the program as written quotes its own line")
        else:
            bad("--auto: the error of a sparse tensor on the CUDA target", out + err)
        # a csc tensor `@ M` keeps the default mapping, and the listing names it
        cs = os.path.join(d, "csc.dtl")
        with open(cs, "w") as f:
            f.write("param n = 21;\nmachine M = grid(gx, gy);\ntensor A(n, n) csc @ M;\ntensor x(n) @ M;\ntensor y(n) @ M;\n"
                    "y(i) = A(i, j) * x(j);\n")
        rc, out, err = distalc(cs, "--auto", "--emit", "plan", "--ranks", "4")
        if rc == 0 and "tensor A: the default mapping (not searched" in out and "tensor x: M(" in out:
            ok("--auto: the listing names a csc tensor's default mapping beside the chosen layouts")
        else:
            bad("--auto: the listing of a csc tensor's layout", out + err)
        for k, (text, pat) in enumerate((("bandwidth 0\n", ":1: error: the value must be a positive number: bandwidth"),
                                         ("# ok\nlatency 1e-6\nspeed 3\n", ":3: error: unknown name"),
                                         ("latency 1e-6\nlatency 2e-6\n", ":2: error: given twice: latency"),
                                         ("point_time 1e-9 2\n", ":1: error: expected NAME VALUE"),
                                         ("threads 2.5\n", ":1: error: threads must be a whole number up to 4096: threads"),
                                         ("node_latency -1\n", ":1: error: the value must be a positive number: node_latency"),
                                         ("sparse_entry_time 0\n", ":1: error: the value must be a positive number: sparse_entry_time"))):
            path = os.path.join(d, "bad%d.model" % k)
            with open(path, "w") as f:
                f.write(text)
            rc, out, err = distalc(PROGRAMS[0], "--auto", "--model", path, "--emit", "plan")
            if rc == 0 or (path + pat) not in err:
                bad("a bad machine model %r: expected %r" % (text, pat), out + err)
            else:
                ok("a bad machine model rejected: %s" % err.strip())
        rc, out, err = distalc("--calibrate", PROGRAMS[0])
        if rc == 0 or "--calibrate takes no input file" not in err:
            bad("--calibrate with an input file: expected an error", out + err)
        else:
            ok("--calibrate with an input file rejected")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
