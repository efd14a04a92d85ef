#!/usr/bin/env python3
"""programs.py -- the whole-program benchmarks behind bench/programs.sh (see bench/README.md,
"Whole programs").  Needs numpy (test data and the independent checks of the results).

At each rank count of --ranks (default 1 and 2), in one invocation:
  chain         bench/dtl/chain.dtl fused and with distalc --no-fuse, against the STREAM
                triad of bench/stream.c on the same ranks;
  Black-Scholes bench/dtl/blackscholes.dtl fused and --no-fuse, against the hand-written
                loop bench/blackscholes_ref.c (same formulas, same compiler flags);
  Krylov        bench/dtl/cg.dtl and bicgstab.dtl against PETSc's KSPCG and KSPBCGS
                (bench/petsc_krylov.c) on the same 2-D Poisson matrix and right-hand side,
                a fixed number of iterations: time and reductions per iteration;
  Jacobi        bench/dtl/jacobi.dtl (dense) fused and --no-fuse.
Every result of a generated program is checked against an independent computation
(numpy, the hand loop, PETSc's x).  Timings are best of --iters runs within each of
--rounds interleaved rounds.  No timing is asserted: the exit status is nonzero only when
something fails to build or run or a result is wrong.
"""
import argparse
import datetime
import os
import platform
import re
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench as B  # noqa: E402  (Runner, Tools, json_lines, parse_stats, fmt)
import blas_env  # noqa: E402

import numpy as np  # noqa: E402


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="bench/programs.sh", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", default="1 2", help="rank counts, e.g. \"1 2\" (default)")
    ap.add_argument("--grid-m", type=int, default=1000, help="Poisson grid m (n = m^2 rows; default 1000)")
    ap.add_argument("--krylov-its", type=int, default=200, help="CG/BiCGSTAB iterations (default 200)")
    ap.add_argument("--chain-n", type=int, default=1 << 24, help="chain vector length (default 2^24)")
    ap.add_argument("--bs-n", type=int, default=1 << 24, help="Black-Scholes options (default 2^24)")
    ap.add_argument("--jacobi-n", type=int, default=4096, help="Jacobi matrix order (default 4096)")
    ap.add_argument("--jacobi-its", type=int, default=20, help="Jacobi iterations (default 20)")
    ap.add_argument("--iters", type=int, default=3, help="timed runs per measurement (default 3)")
    ap.add_argument("--warmup", type=int, default=1, help="warm-up runs (default 1)")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds, best kept (default 2)")
    ap.add_argument("--quick", action="store_true", help="small sizes, 1 run, 1 round: end to end in seconds")
    ap.add_argument("--out", help="output directory (default bench/results/programs[-quick])")
    ap.add_argument("--distalc", help="distalc to use (default $DISTALC or distalc on PATH)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per command (default 900)")
    ap.add_argument("--no-schedules", action="store_true",
                    help="build the programs with their schedules removed (the default distribution of LANGUAGE.md 5)")
    a = ap.parse_args(argv)
    if a.quick:
        a.grid_m, a.krylov_its, a.chain_n, a.bs_n, a.jacobi_n, a.jacobi_its = 100, 50, 1 << 18, 1 << 18, 512, 10
        a.iters, a.warmup, a.rounds = 1, 0, 1
    a.rank_list = [int(x) for x in a.ranks.replace(",", " ").split()]
    if not a.out:
        a.out = os.path.join(HERE, "results", "programs-quick" if a.quick else "programs")
    return a


def log(msg):
    print(msg, flush=True)


class Bench:
    def __init__(self, args):
        self.a = args
        self.out = os.path.abspath(args.out)
        self.bdir = os.path.join(self.out, "build")
        self.ddir = os.path.join(self.out, "data")
        os.makedirs(self.bdir, exist_ok=True)
        os.makedirs(self.ddir, exist_ok=True)
        self.r = B.Runner(self.out, args.timeout)
        self.tools = B.Tools(args, self.r)
        self.exe = {}
        self.best = {}  # (key, ranks) -> dict of the best run (min_s) and its other-CPU share
        self.checks = []  # (what, value, tolerance, ok)
        self.notes = []  # lines for programs.md
        self.env1 = B.Tools.threads_env(1)

    # -- building ------------------------------------------------------------------------

    def build(self):
        t, a = self.tools, self.a
        help_text = subprocess.run([t.distalc, "--help"], capture_output=True, text=True).stdout
        self.nofuse = "--no-fuse" in help_text
        if not self.nofuse:
            log("  distalc --help shows no --no-fuse: the unfused variants are skipped")
        dcflags = shlex.split(os.environ.get("DISTAL_CFLAGS", ""))
        extra = shlex.split(os.environ.get("DISTAL_EXTRA_CFLAGS", ""))
        cc = t.mpicc
        jobs = [("stream", cc + ["-O3", "-std=c11", "-fopenmp", os.path.join(HERE, "stream.c"), "-o",
                                 os.path.join(self.bdir, "stream")]),
                # the flags distalc --exe gives generated code (src/distalc.c, build_exe)
                ("blackscholes_ref", cc + ["-std=c11", "-O3", "-fopenmp"] + extra + dcflags +
                 [os.path.join(HERE, "blackscholes_ref.c"), "-o", os.path.join(self.bdir, "blackscholes_ref"), "-lm"])]
        pc = subprocess.run(["pkg-config", "--cflags", "--libs", "PETSc"], capture_output=True, text=True)
        petsc_flags = os.environ.get("PETSC_FLAGS") or (pc.stdout.strip() if pc.returncode == 0 else "")
        if petsc_flags:
            jobs.append(("petsc_krylov", cc + ["-std=c11", "-O3", os.path.join(HERE, "petsc_krylov.c"), "-o",
                                               os.path.join(self.bdir, "petsc_krylov")] + shlex.split(petsc_flags)))
        else:
            log("  PETSc not found (pkg-config PETSc, or set PETSC_FLAGS; scripts/install-deps.sh --bench "
                "installs it): the Krylov comparison is skipped")
        for name in ("chain", "blackscholes", "jacobi", "cg", "bicgstab"):
            src = os.path.join(HERE, "dtl", name + ".dtl")
            if a.no_schedules:
                with open(src) as f:
                    text = re.sub(r"\s*\.(distribute|communicate)\([^;]*;", ";", f.read())
                src = os.path.join(self.bdir, name + ".dtl")
                with open(src, "w") as f:
                    f.write(text)
            jobs.append((name, [t.distalc, src, "--exe", "-o", os.path.join(self.bdir, name)]))
            if self.nofuse and name in ("chain", "blackscholes", "jacobi"):
                jobs.append((name + "_nofuse", [t.distalc, src, "--exe", "--no-fuse", "-o",
                                                os.path.join(self.bdir, name + "_nofuse")]))
        for name, cmd in jobs:
            ok, _, _, _ = self.r.run("build " + name, cmd, timeout=600)
            if ok:
                self.exe[name] = os.path.join(self.bdir, name)
        # the OpenBLAS kernels a generated executable chooses for itself, for PETSc too (blas_env.py)
        gen = [self.exe[n] for n in ("cg", "chain", "jacobi") if n in self.exe]
        if gen:
            blas_env.set_openblas_core(gen[0], B.log)

    # -- data ----------------------------------------------------------------------------

    def data(self):
        a, d = self.a, self.ddir
        rng = np.random.default_rng(20240601)
        n = a.bs_n
        for nm, lo, hi in (("S", 5.0, 30.0), ("K", 1.0, 100.0), ("T", 0.25, 10.0)):
            np.save(os.path.join(d, "bs_%s.npy" % nm), rng.uniform(lo, hi, n))
        n = a.jacobi_n
        A = rng.random((n, n))
        A[np.diag_indices(n)] = A.sum(axis=1) + 1.0  # strictly diagonally dominant: Jacobi converges
        np.save(os.path.join(d, "jac_A.npy"), A)
        np.save(os.path.join(d, "jac_d.npy"), A.diagonal().copy())
        np.save(os.path.join(d, "jac_b.npy"), rng.random(n))
        if "petsc_krylov" in self.exe:
            self.r.run("write the Poisson matrix", self.tools.mpi(1, 1, [
                self.exe["petsc_krylov"], "-m", str(a.grid_m), "-its", "1", "-reps", "1", "-ksp_types", "cg",
                "-write_mtx", os.path.join(d, "poisson.mtx"), "-write_b", os.path.join(d, "poisson_b.npy")]), self.env1)

    # -- measuring -----------------------------------------------------------------------

    def keep(self, key, P, rec):
        rec["other_cpu"] = self.r.other_cpu
        old = self.best.get((key, P))
        if old is None or rec["min_s"] < old["min_s"]:
            self.best[(key, P)] = rec

    def gen(self, key, exe, P, args, what):
        """One timed run of a generated executable; its JSON summary."""
        if exe not in self.exe:
            return None
        it = ["--iters", str(self.a.iters), "--warmup", str(self.a.warmup), "--json"]
        ok, so, _, _ = self.r.run("%s, %d rank%s" % (what, P, "s" if P > 1 else ""),
                                  self.tools.mpi(P, 1, [self.exe[exe]] + args + it), self.env1)
        js = [j for j in B.json_lines(so) if "min_s" in j] if ok else []
        if js:
            self.keep(key, P, js[0])
            return js[0]
        return None

    def round(self, P):
        a, d = self.a, self.ddir
        ok, so, _, _ = self.r.run("STREAM, %d ranks" % P, self.tools.mpi(P, 1, [
            self.exe.get("stream", "stream"), "-N", str(a.chain_n // P), "--iters", str(max(3, a.iters)),
            "--warmup", "1"]), self.env1)
        for j in B.json_lines(so) if ok else []:
            if j.get("kernel") == "triad":
                self.keep("triad", P, j)
        for v in ("", "_nofuse"):
            self.gen("chain" + v, "chain" + v, P, ["-n", str(a.chain_n), "--fill", "random"], "chain" + v)
        bs_in = ["--load", "S=%s/bs_S.npy" % d, "--load", "K=%s/bs_K.npy" % d, "--load", "T=%s/bs_T.npy" % d]
        for v in ("", "_nofuse"):
            self.gen("bs" + v, "blackscholes" + v, P, ["-n", str(a.bs_n)] + bs_in, "blackscholes" + v)
        if "blackscholes_ref" in self.exe:
            ok, so, _, _ = self.r.run("blackscholes_ref, %d ranks" % P, self.tools.mpi(P, 1, [
                self.exe["blackscholes_ref"], "%s/bs_S.npy" % d, "%s/bs_K.npy" % d, "%s/bs_T.npy" % d, "--iters",
                str(a.iters), "--warmup", str(a.warmup)]), self.env1)
            for j in B.json_lines(so) if ok else []:
                self.keep("bs_ref", P, j)
        jac = ["-n", str(a.jacobi_n), "--maxit", str(a.jacobi_its), "--tol", "0", "--fill", "zeros", "--load",
               "A=%s/jac_A.npy" % d, "--load", "d=%s/jac_d.npy" % d, "--load", "b=%s/jac_b.npy" % d]
        for v in ("", "_nofuse"):
            self.gen("jacobi" + v, "jacobi" + v, P, jac, "jacobi" + v)
        if "petsc_krylov" in self.exe:
            ok, so, _, _ = self.r.run("PETSc CG, BiCGSTAB, %d ranks" % P, self.tools.mpi(P, 1, [
                self.exe["petsc_krylov"], "-m", str(a.grid_m), "-its", str(a.krylov_its), "-reps", str(a.iters),
                "-save_x", os.path.join(d, "petsc_x%d_" % P)]), self.env1)
            for j in B.json_lines(so) if ok else []:
                self.keep("petsc_" + j["ksp"], P, j)
            for name in ("cg", "bicgstab"):
                self.gen(name, name, P, self.krylov_args(), name)

    def krylov_args(self, its=None):
        a, d = self.a, self.ddir
        return ["-n", str(a.grid_m * a.grid_m), "--maxit", str(its or a.krylov_its), "--tol", "0", "--fill", "zeros",
                "--load", "A=%s/poisson.mtx" % d, "--load", "b=%s/poisson_b.npy" % d]

    # -- communication counts and checks (once, untimed) ---------------------------------

    def comm(self, P):
        """Reductions, other messages and bytes sent per iteration of our CG and BiCGSTAB
        (--stats of one compute, the rank that sends most), and their iteration counts."""
        for name in ("cg", "bicgstab"):
            if name not in self.exe:
                continue
            ok, so, _, _ = self.r.run("%s --stats, %d ranks" % (name, P), self.tools.mpi(P, 1, [
                self.exe[name]] + self.krylov_args() + ["--iters", "1", "--warmup", "0", "--json", "--stats"]),
                self.env1)
            if not ok:
                continue
            js = [j for j in B.json_lines(so) if "min_s" in j]
            its = js[0].get("iterations") if js else None
            st = B.parse_stats(so)
            red = msgs = byts = 0
            for r, ops in st.items():
                rr = sum(v[1] for op, v in ops.items() if "allreduce" in op or op == "reduce")
                mm = sum(v[1] for op, v in ops.items() if not ("allreduce" in op or op == "reduce"))
                bb = sum(v[0] for op, v in ops.items() if not ("allreduce" in op or op == "reduce"))
                red, msgs, byts = max(red, rr), max(msgs, mm), max(byts, bb)
            ops = ["%s %s" % (op, B.fmt(max(o.get(op, (0, 0))[1] for o in st.values()) / its if its else None))
                   for op in sorted({op for o in st.values() for op in o})]
            self.best.setdefault(("comm_" + name, P), {})
            self.best[("comm_" + name, P)] = dict(
                iterations=its, allreduce_per_iter=red / its if its else None, msgs_per_iter=msgs / its if its else None,
                bytes_per_iter=byts / its if its else None, ops=ops)

    def check(self, what, err, tol):
        ok = err is not None and err <= tol
        self.checks.append((what, err, tol, ok))
        log("  check %-52s %s (tolerance %g) %s" % (what, B.fmt(err), tol, "ok" if ok else "WRONG"))
        if not ok:
            self.r.failures.append(("check " + what, "", "error %s above %g" % (B.fmt(err), tol)))

    @staticmethod
    def relerr(x, ref):
        x, ref = np.asarray(x), np.asarray(ref)
        if x.shape != ref.shape or not np.all(np.isfinite(x)):
            return float("inf")
        return float(np.max(np.abs(x - ref)) / max(np.max(np.abs(ref)), 1e-300))

    def save_run(self, exe, P, args, saves):
        paths = {t: os.path.join(self.ddir, "out_%s_%d_%s.npy" % (exe, P, t)) for t in saves}
        cmd = [self.exe[exe]] + args + ["--iters", "1", "--warmup", "0"]
        for t, p in paths.items():
            cmd += ["--save", "%s=%s" % (t, p)]
        ok, _, _, _ = self.r.run("%s --save, %d ranks" % (exe, P), self.tools.mpi(P, 1, cmd), self.env1)
        return {t: np.load(p) for t, p in paths.items()} if ok else None

    def verify(self, P):
        a, d = self.a, self.ddir
        for v in ("", "_nofuse"):
            if "chain" + v in self.exe:
                o = self.save_run("chain" + v, P, ["-n", str(a.chain_n), "--fill", "random"], "abcyz")
                if o:
                    t1 = o["a"] + o["b"]
                    t2 = o["a"] - o["c"]
                    t4 = 0.5 * (t1 * t2) + o["b"]
                    t6 = (t4 * o["c"] - t1) + 2.0 * t2
                    self.check("chain%s y, z vs numpy (%d ranks)" % (v, P),
                               max(self.relerr(o["y"], t6 * o["a"]), self.relerr(o["z"], t4 - t6)), 1e-14)
        bs_in = ["-n", str(a.bs_n), "--load", "S=%s/bs_S.npy" % d, "--load", "K=%s/bs_K.npy" % d,
                 "--load", "T=%s/bs_T.npy" % d]
        ref = None
        if "blackscholes_ref" in self.exe:
            rc, rp = os.path.join(d, "ref_C.npy"), os.path.join(d, "ref_P.npy")
            ok, _, _, _ = self.r.run("blackscholes_ref --save", self.tools.mpi(P, 1, [
                self.exe["blackscholes_ref"], "%s/bs_S.npy" % d, "%s/bs_K.npy" % d, "%s/bs_T.npy" % d, "--iters",
                "1", "--warmup", "0", "--save", rc, rp]), self.env1)
            if ok:
                ref = (np.load(rc), np.load(rp))
                S, K, T = (np.load("%s/bs_%s.npy" % (d, x)) for x in "SKT")
                disc = K * np.exp(-0.02 * T)
                self.check("hand loop: put-call parity C - P = S - K e^-rT", self.relerr(ref[0] - ref[1], S - disc),
                           1e-12)
        for v in ("", "_nofuse"):
            if "blackscholes" + v in self.exe and ref:
                o = self.save_run("blackscholes" + v, P, bs_in, "CP")
                if o:
                    self.check("blackscholes%s C, P vs hand loop (%d ranks)" % (v, P),
                               max(self.relerr(o["C"], ref[0]), self.relerr(o["P"], ref[1])), 1e-12)
        A = np.load("%s/jac_A.npy" % d)
        dd, b = np.load("%s/jac_d.npy" % d), np.load("%s/jac_b.npy" % d)
        x = np.zeros_like(b)
        for _ in range(a.jacobi_its):
            x = x + (b - A @ x) / dd
        del A
        for v in ("", "_nofuse"):
            if "jacobi" + v in self.exe:
                o = self.save_run("jacobi" + v, P, ["-n", str(a.jacobi_n), "--maxit", str(a.jacobi_its), "--tol", "0",
                                                   "--fill", "zeros", "--load", "A=%s/jac_A.npy" % d, "--load",
                                                   "d=%s/jac_d.npy" % d, "--load", "b=%s/jac_b.npy" % d], "x")
                if o:
                    self.check("jacobi%s x vs numpy, %d iterations (%d ranks)" % (v, a.jacobi_its, P),
                               self.relerr(o["x"], x), 1e-12)
        # CG's x agrees with PETSc's to rounding after all the iterations; BiCGSTAB's
        # recurrences amplify rounding differences (about 10x per iteration on this matrix:
        # 1e-15 after 5, 1e-11 after 20, 1e-3 after 50, also between PETSc at 1 and 2 ranks),
        # so its x is compared after 10 iterations, and after all of them only the residuals.
        for name, ksp, its, tol in (("cg", "cg", a.krylov_its, 1e-8), ("bicgstab", "bcgs", min(10, a.krylov_its), 1e-10)):
            if name not in self.exe or "petsc_krylov" not in self.exe:
                continue
            pre = os.path.join(d, "petsc_v%d_%d_" % (P, its))
            ok, _, _, _ = self.r.run("PETSc %s --save, %d iterations" % (ksp, its), self.tools.mpi(P, 1, [
                self.exe["petsc_krylov"], "-m", str(a.grid_m), "-its", str(its), "-reps", "1", "-ksp_types", ksp,
                "-save_x", pre]), self.env1)
            o = self.save_run(name, P, self.krylov_args(its), "x") if ok else None
            if o:
                xp = np.load(pre + ksp + ".npy")
                self.check("%s x vs PETSc %s x, %d iterations (%d ranks)" % (name, ksp.upper(), its, P),
                           float(np.linalg.norm(o["x"] - xp) / np.linalg.norm(xp)), tol)
            px = os.path.join(d, "petsc_x%d_%s.npy" % (P, ksp))
            if its != a.krylov_its and os.path.exists(px):
                o = self.save_run(name, P, self.krylov_args(), "x")
            if o and os.path.exists(px):
                rb = np.load("%s/poisson_b.npy" % d)
                res = [poisson_residual(xx, rb, a.grid_m) for xx in (o["x"], np.load(px))]
                self.notes.append("%s, %d ranks, %d iterations: ||b - A x|| / ||b|| = %.6e ours, %.6e PETSc" % (
                    name, P, a.krylov_its, res[0], res[1]))
                log("    " + self.notes[-1])

    # -- report --------------------------------------------------------------------------

    def ratios(self, P):
        g = lambda k: self.best.get((k, P))  # noqa: E731
        t = lambda k: (g(k) or {}).get("min_s")  # noqa: E731
        rows = []
        a = self.a

        def add(what, val, detail, oc=()):
            ocs = [g(k).get("other_cpu") for k in oc if g(k) and g(k).get("other_cpu") is not None]
            rows.append((what, val, detail, max(ocs) if ocs else None))

        chain_bytes = 40.0 * a.chain_n
        tri = (g("triad") or {}).get("gbytes_per_s")
        cf = chain_bytes / t("chain") / 1e9 if t("chain") else None
        cn = chain_bytes / t("chain_nofuse") / 1e9 if t("chain_nofuse") else None
        add("chain fused GB/s / STREAM triad GB/s", B.ratio(cf, tri),
            "%s vs %s GB/s (40 B/element: a, b, c read, y, z written)" % (B.fmt(cf), B.fmt(tri)), ("chain", "triad"))
        add("chain time no-fuse / fused", B.ratio(t("chain_nofuse"), t("chain")),
            "%s vs %s s (no-fuse %s GB/s of program bytes)" % (B.fmt(t("chain_nofuse"), 4), B.fmt(t("chain"), 4),
                                                               B.fmt(cn)), ("chain", "chain_nofuse"))
        add("Black-Scholes time ours / hand loop", B.ratio(t("bs"), t("bs_ref")),
            "%s vs %s s" % (B.fmt(t("bs"), 4), B.fmt(t("bs_ref"), 4)), ("bs", "bs_ref"))
        add("Black-Scholes time no-fuse / fused", B.ratio(t("bs_nofuse"), t("bs")),
            "%s vs %s s" % (B.fmt(t("bs_nofuse"), 4), B.fmt(t("bs"), 4)), ("bs", "bs_nofuse"))
        for name, ksp in (("cg", "cg"), ("bicgstab", "bcgs")):
            ours, ref = g(name), g("petsc_" + ksp)
            po = t(name) / ours["iterations"] if ours and ours.get("iterations") else None
            pp = ref.get("per_iter_s") if ref else None
            label = "CG" if name == "cg" else "BiCGSTAB"
            add("%s time per iteration ours / PETSc" % label, B.ratio(po, pp),
                "%s vs %s ms (%s vs %s iterations)" % (B.fmt(po and po * 1e3, 3), B.fmt(pp and pp * 1e3, 3),
                                                       (ours or {}).get("iterations", "n/a"),
                                                       (ref or {}).get("iterations", "n/a")), (name, "petsc_" + ksp))
            c = g("comm_" + name) or {}
            add("%s allreduces per iteration ours / PETSc" % label,
                B.ratio(c.get("allreduce_per_iter"), ref and ref.get("allreduce_per_iter")),
                "%s vs %s; other messages %s vs %s, bytes %s vs %s per iteration (busiest rank; ours, messages per iteration: %s)" % (
                    B.fmt(c.get("allreduce_per_iter")), B.fmt(ref and ref.get("allreduce_per_iter")),
                    B.fmt(c.get("msgs_per_iter")), B.fmt(ref and ref.get("msgs_per_iter")),
                    B.whole(c.get("bytes_per_iter")), B.whole(ref and ref.get("bytes_per_iter")),
                    ", ".join(c.get("ops") or []) or "no communication"))
        add("Jacobi time no-fuse / fused", B.ratio(t("jacobi_nofuse"), t("jacobi")),
            "%s vs %s s, %d iterations" % (B.fmt(t("jacobi_nofuse"), 4), B.fmt(t("jacobi"), 4), a.jacobi_its),
            ("jacobi", "jacobi_nofuse"))
        return rows


def poisson_residual(x, b, m):
    """||b - A x|| / ||b|| for the m x m 5-point Laplacian (4 on the diagonal, -1 for neighbours)."""
    X = x.reshape(m, m)
    Y = 4.0 * X
    Y[1:, :] -= X[:-1, :]
    Y[:-1, :] -= X[1:, :]
    Y[:, 1:] -= X[:, :-1]
    Y[:, :-1] -= X[:, 1:]
    return float(np.linalg.norm(b - Y.ravel()) / np.linalg.norm(b))


def main(argv):
    a = parse_args(argv)
    bn = Bench(a)
    if not bn.tools.distalc:
        log("programs: no distalc: set DISTALC, put distalc on PATH, or pass --distalc")
        return 1
    t0 = time.perf_counter()
    load0 = os.getloadavg()
    log("programs: results in %s; ranks %s; load average %.2f on %d cores" % (bn.out, a.rank_list, load0[0],
                                                                             bn.tools.ncpu))
    log("== building")
    bn.build()
    log("== test data")
    bn.data()
    for rnd in range(a.rounds):
        for P in a.rank_list:
            log("== round %d of %d, %d rank%s" % (rnd + 1, a.rounds, P, "s" if P > 1 else ""))
            bn.round(P)
    log("== communication counts and result checks")
    for P in a.rank_list:
        bn.comm(P)
        bn.verify(P)
    load1 = os.getloadavg()
    lines = ["# Whole programs: generated code vs references", "",
             "Programs %s." % ("with their schedules removed (--no-schedules)" if a.no_schedules else
                               "as written in bench/dtl"), "",
             "Generated by `bench/programs.sh%s` on %s; host %s, %d cores. distalc: %s. Best of %d timed runs in "
             "each of %d interleaved rounds; one thread per rank. Load average %.2f at the start, %.2f at the end; "
             "total %.0f s." % (" " + " ".join(argv) if argv else "", datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
                                platform.node(), bn.tools.ncpu, bn.tools.distalc, a.iters, a.rounds, load0[0],
                                load1[0], time.perf_counter() - t0), "",
             "Sizes: chain n = %d; Black-Scholes n = %d; Poisson %d x %d (n = %d), %d Krylov iterations; "
             "Jacobi n = %d, %d iterations." % (a.chain_n, a.bs_n, a.grid_m, a.grid_m, a.grid_m ** 2, a.krylov_its,
                                                 a.jacobi_n, a.jacobi_its), ""]
    csv = ["ranks,what,ratio,detail,other_cpu"]
    for P in a.rank_list:
        lines += ["## %d rank%s" % (P, "s" if P > 1 else ""), "", "| target | ratio | measured | other CPU |",
                  "|---|---|---|---|"]
        for what, val, detail, oc in bn.ratios(P):
            lines.append("| %s | %s | %s | %s |" % (what, B.fmt(val), detail, B.pct(oc)))
            csv.append('%d,"%s",%s,"%s",%s' % (P, what, "" if val is None else "%.6g" % val, detail.replace('"', "'"),
                                               "" if oc is None else "%.3f" % oc))
        lines.append("")
    lines += ["## Result checks", "", "| check | error | tolerance | |", "|---|---|---|---|"]
    lines += ["| %s | %s | %g | %s |" % (w, B.fmt(e), tol, "ok" if ok else "WRONG") for w, e, tol, ok in bn.checks]
    lines += [""] + ["- " + n for n in bn.notes]
    if bn.r.failures:
        lines += ["", "## Failures", ""] + ["- %s: `%s`: %s" % (w, c, d.replace("\n", " ")) for w, c, d in bn.r.failures]
    with open(os.path.join(bn.out, "programs.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(bn.out, "programs.csv"), "w") as f:
        f.write("\n".join(csv) + "\n")
    log("")
    log("RATIOS (see programs.md for the definitions; other CPU well above 0%% means disturbed)")
    for P in a.rank_list:
        log("  %d rank%s" % (P, "s" if P > 1 else ""))
        for what, val, detail, oc in bn.ratios(P):
            log("    %-46s %8s   (%s%s)" % (what, B.fmt(val), detail, "" if oc is None else "; other CPU %s" % B.pct(oc)))
    log("wrote %s, programs.csv, log.txt" % os.path.join(bn.out, "programs.md"))
    B.print_failures(bn.r)
    return 1 if bn.r.failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
