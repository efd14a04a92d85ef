#!/usr/bin/env python3
"""bench.py -- the benchmark driver behind bench/run.sh, bench/volume.sh and
bench/quick-check.sh (see bench/README.md).  Standard library only.

It builds the reference programs of bench/ (dgemm_ref.c, pdgemm.c, stream.c,
mttkrp_ref.c) and the programs of examples/ (and bench/dtl/) with distalc --exe, runs
them all on the same ranks and threads in one invocation, parses their JSON summaries
(--json) and communication statistics (--stats), and writes results.md, results.csv
and gemm.png (gnuplot) with the ratios ours / reference.  No timing is ever asserted:
the exit status is nonzero only when something fails to build or to run.
"""
import argparse
import concurrent.futures
import csv
import datetime
import json
import math
import os
import platform
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import blas_env  # beside this file

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)

MM_SCHEDULES = ["summa", "cannon", "pumma", "johnson", "solomonik", "cosma"]
TENSOR_PROGRAMS = ["ttv", "innerprod", "ttm", "mttkrp"]


# ---------------------------------------------------------------------------------------
# small helpers


def log(msg):
    print(msg, flush=True)


def fmt(x, nd=2):
    if x is None:
        return "n/a"
    if isinstance(x, str):
        return x
    if x != 0 and (abs(x) >= 1e5 or abs(x) < 10 ** -nd):
        return "%.3g" % x
    return "%.*f" % (nd, x)


def whole(x):
    return "n/a" if x is None else "%.0f" % x


def pct(x):
    return "" if x is None else "%.0f%%" % (100 * x)


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def icbrt(p):
    q = int(round(p ** (1.0 / 3.0)))
    for c in (q - 1, q, q + 1):
        if c > 0 and c * c * c == p:
            return c
    return None


def isqrt_exact(p):
    q = int(math.isqrt(p))
    return q if q * q == p else None


def machine_busy_seconds():
    """CPU seconds all processes of the machine have used (/proc/stat), or None."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def children_cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Runner:
    """Runs commands, keeps a log, and remembers every failure.  After each command,
    `other_cpu` is the fraction of the machine's CPU time that processes other than the
    command used while it ran (from /proc/stat and the command's rusage): the
    interference of other work on a shared machine, None where unknown."""

    def __init__(self, out, timeout):
        self.out = out
        self.timeout = timeout
        self.failures = []  # (what, command, detail)
        self.other_cpu = None
        self.logf = open(os.path.join(out, "log.txt"), "w")
        self.lock = threading.Lock()  # builds run in threads

    def run(self, what, cmd, env=None, timeout=None, cwd=None, quiet_fail=False):
        """Run cmd (a list); return (ok, stdout, stderr, seconds)."""
        full_env = dict(os.environ)
        if env:
            full_env.update(env)
        envs = " ".join("%s=%s" % (k, shlex.quote(v)) for k, v in (env or {}).items())
        line = (envs + " " if envs else "") + " ".join(shlex.quote(str(c)) for c in cmd)
        t0 = time.perf_counter()
        busy0, own0 = machine_busy_seconds(), children_cpu_seconds()
        try:
            # its own process group, so that a timeout ends mpirun and its ranks, and only them
            p = subprocess.Popen([str(c) for c in cmd], env=full_env, cwd=cwd, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, start_new_session=True)
            try:
                so, se = p.communicate(timeout=timeout or self.timeout)
                rc = p.returncode
            except subprocess.TimeoutExpired:
                for sig in (signal.SIGTERM, signal.SIGKILL):
                    try:
                        os.killpg(p.pid, sig)
                    except OSError:
                        pass
                    try:
                        so, se = p.communicate(timeout=5)
                        break
                    except subprocess.TimeoutExpired:
                        so, se = "", ""
                rc = "timeout after %ss" % (timeout or self.timeout)
        except OSError as e:
            rc, so, se = "cannot run: %s" % e, "", ""
        dt = time.perf_counter() - t0
        busy1, own1 = machine_busy_seconds(), children_cpu_seconds()
        self.other_cpu = None
        if busy0 is not None and busy1 is not None and dt > 0.05:
            ncpu = os.cpu_count() or 1
            self.other_cpu = min(1.0, max(0.0, ((busy1 - busy0) - (own1 - own0)) / (dt * ncpu)))
        with self.lock:
            self.logf.write("$ %s\n%s" % (line, so))
            if se:
                self.logf.write("[stderr]\n" + se)
            self.logf.write("[rc %s, %.3f s, other processes' CPU %s]\n\n" % (
                rc, dt, "n/a" if self.other_cpu is None else "%.0f%%" % (100 * self.other_cpu)))
            self.logf.flush()
        ok = rc == 0
        if not ok and not quiet_fail:
            tail = "\n".join((se or so).strip().splitlines()[-6:])
            self.failures.append((what, line, "exit status %s: %s" % (rc, tail)))
            log("  FAILED: %s (exit status %s)\n    %s\n    %s" % (what, rc, line, tail.replace("\n", "\n    ")))
        return ok, so, se, dt


def json_lines(text):
    out = []
    for l in text.splitlines():
        l = l.strip()
        if l.startswith("{"):
            try:
                out.append(json.loads(l))
            except ValueError:
                pass
    return out


STATS_RE = re.compile(r"^(\d+)\s+\(([-0-9,]*)\)\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$")


def parse_stats(text):
    """--stats table of a generated executable -> {rank: {op: (bsent, msent, brecv, mrecv)}}."""
    ranks = {}
    for l in text.splitlines():
        m = STATS_RE.match(l.strip())
        if m:
            r = int(m.group(1))
            ranks.setdefault(r, {})[m.group(3)] = tuple(int(m.group(i)) for i in range(4, 8))
    return ranks


def recv_per_rank(stats, nranks):
    """Bytes received by every rank (all operations); ranks without a line received 0."""
    return [sum(v[2] for v in stats.get(r, {}).values()) for r in range(nranks)]


# ---------------------------------------------------------------------------------------
# tools and builds


class Tools:
    def __init__(self, args, runner):
        self.r = runner
        self.distalc = args.distalc or os.environ.get("DISTALC") or shutil.which("distalc")
        if not self.distalc and os.access(os.path.join(TOP, "distalc"), os.X_OK):
            self.distalc = os.path.join(TOP, "distalc")
        self.mpicc = shlex.split(os.environ.get("MPICC") or "mpicc")
        self.mpirun = shlex.split(os.environ.get("MPIRUN") or "mpirun")
        self.blas = shlex.split(os.environ.get("BENCH_BLAS_LIBS") or "-lopenblas")
        self.scalapack = shlex.split(os.environ.get("BENCH_SCALAPACK_LIBS") or "-lscalapack-openmpi")
        self.ncpu = os.cpu_count() or 1

    def mpi(self, ranks, threads, prog_args, oversubscribed=False):
        """An mpirun command line: ranks bound to cores when they fit one thread a core."""
        bind = "core" if threads == 1 and ranks <= self.ncpu and not oversubscribed else "none"
        return self.mpirun + ["-np", str(ranks), "--oversubscribe", "--bind-to", bind,
                              "-x", "OPENBLAS_NUM_THREADS", "-x", "OMP_NUM_THREADS"] + prog_args

    @staticmethod
    def threads_env(t):
        return {"OPENBLAS_NUM_THREADS": str(t), "OMP_NUM_THREADS": str(t)}


def build_all(args, tools, runner, bdir, dtl_files):
    """Build the reference programs and every .dtl with distalc --exe, in parallel.
    Returns {name: path} of what was built."""
    jobs = []
    cc = tools.mpicc
    jobs.append(("dgemm_ref", cc + ["-O3", "-std=c11", os.path.join(HERE, "dgemm_ref.c"), "-o",
                                    os.path.join(bdir, "dgemm_ref")] + tools.blas + ["-lm"]))
    jobs.append(("mttkrp_ref", cc + ["-O3", "-std=c11", os.path.join(HERE, "mttkrp_ref.c"), "-o",
                                     os.path.join(bdir, "mttkrp_ref")] + tools.blas + ["-lm"]))
    jobs.append(("stream", cc + ["-O3", "-std=c11", "-fopenmp", os.path.join(HERE, "stream.c"), "-o",
                                 os.path.join(bdir, "stream")]))
    if args.scalapack_ok:
        jobs.append(("pdgemm", cc + ["-O3", "-std=c11", os.path.join(HERE, "pdgemm.c"), "-o",
                                     os.path.join(bdir, "pdgemm")] + tools.scalapack + tools.blas + ["-lm"]))
    for name, path in dtl_files:
        jobs.append((name, [tools.distalc, path, "--exe", "-o", os.path.join(bdir, name)]))
    built, exe_times = {}, {}

    def one(job):
        name, cmd = job
        ok, _, _, dt = runner.run("build %s" % name, cmd, timeout=600)
        return name, ok, dt

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, tools.ncpu)) as ex:
        for name, ok, dt in ex.map(one, jobs):
            if ok:
                built[name] = os.path.join(bdir, name)
            exe_times[name] = dt
    # the OpenBLAS kernels a generated executable chooses for itself, for every program (blas_env.py)
    gen = [built[name] for name, _ in dtl_files if name in built]
    if gen:
        blas_env.set_openblas_core(gen[0], log)
    return built, exe_times


def scalapack_available(tools, bdir):
    src = os.path.join(bdir, "probe_scalapack.c")
    with open(src, "w") as f:
        f.write("void pdgemm_(void);\nint main(void) { pdgemm_(); return 0; }\n")
    try:
        p = subprocess.run(tools.mpicc + [src, "-o", os.path.join(bdir, "probe_scalapack")] + tools.scalapack +
                           tools.blas, capture_output=True, text=True, timeout=120)
        return p.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def compile_times(tools, runner, dtl_files, reps, tmp):
    """Best-of-reps wall time of distalc translating each .dtl to C (library form: no C
    compiler involved), in milliseconds."""
    res = {}
    for name, path in dtl_files:
        best = None
        for _ in range(reps):
            t0 = time.perf_counter()
            p = subprocess.run([tools.distalc, path, "-o", os.path.join(tmp, name)], capture_output=True, text=True)
            dt = time.perf_counter() - t0
            if p.returncode != 0:
                runner.failures.append(("distalc %s" % name, "%s %s -o %s" % (tools.distalc, path, name),
                                        p.stderr.strip()[-400:]))
                best = None
                break
            best = dt if best is None else min(best, dt)
        res[name] = None if best is None else best * 1e3
    return res


# ---------------------------------------------------------------------------------------
# the main benchmark


class Results:
    def __init__(self):
        self.rows = []  # dicts, see CSV_FIELDS

    def add(self, **kw):
        row = {k: kw.get(k) for k in CSV_FIELDS}
        self.rows.append(row)
        return row

    def get(self, group, name):
        for r in self.rows:
            if r["group"] == group and r["name"] == name:
                return r
        return None


CSV_FIELDS = ["group", "name", "source", "ranks", "threads", "grid", "size", "min_s", "median_s", "gflops",
              "gbytes_per_s", "recv_mb_per_rank_max", "other_cpu", "reference", "ratio", "status", "note"]


def bench_main(args, tools, runner, built, res):
    """Every measurement is a task; --rounds passes run all tasks in turn (interleaved,
    so that a burst of other work on the machine does not hit one variant only), and a
    task keeps its best run over all passes."""
    P, T, n = args.ranks, args.threads, args.n
    it = ["--iters", str(args.iters), "--warmup", str(args.warmup)]
    PT = P * T
    tasks = []

    def task(phase, group, name, source, ranks, threads, size, cmd=None, env=None, key=None, note="",
             stats=False, need=None, skip=None):
        tasks.append(dict(phase=phase, group=group, name=name, source=source, ranks=ranks, threads=threads,
                          size=size, cmd=cmd, env=env, key=key, note=note, stats=stats, need=need, skip=skip,
                          runs={}, stats_out=None, failed=False))

    # (a) serial OpenBLAS dgemm: one thread, and one process with every thread of the run
    ph = "OpenBLAS dgemm (serial reference), n = %d" % n
    for t in sorted({1, PT}):
        task(ph, "mm", "dgemm %d thread%s" % (t, "s" if t > 1 else ""), "bench/dgemm_ref.c", 1, t, "n=%d" % n,
             ["dgemm_ref", "-n", str(n)] + it, tools.threads_env(t), need="dgemm_ref")
    # (b) ScaLAPACK PDGEMM, every block size in one mpirun
    ph = "ScaLAPACK PDGEMM, %d ranks x %d threads, n = %d, nb in %s" % (P, T, n, args.nb)
    task(ph, "mm", "pdgemm", "bench/pdgemm.c", P, T, "n=%d" % n,
         tools.mpi(P, T, ["pdgemm", "-n", str(n), "--nb", args.nb] + it), tools.threads_env(T),
         key=lambda j: "pdgemm nb=%d" % j["params"]["nb"], need="pdgemm",
         skip=None if args.scalapack_ok else "ScaLAPACK (%s) not found" % " ".join(tools.scalapack))
    # (c) the six Figure 9 schedules of examples/
    ph = "Figure 9 schedules (examples/*.dtl), %d ranks x %d threads, n = %d" % (P, T, n)
    for s in MM_SCHEDULES:
        ranks, threads, note = P, T, ""
        if s == "johnson" and icbrt(P) is None:
            c = max(q ** 3 for q in range(1, P + 1) if q ** 3 <= P)
            ranks, threads = c, PT // c
            note = "%d ranks is not a cube: run on %d rank%s x %d threads (not counted as best)" % (
                P, ranks, "s" if ranks > 1 else "", threads)
        pa = ["-ni", str(n), "-nj", str(n), "-nk", str(n)] if s == "cosma" else ["-n", str(n)]
        task(ph, "mm", s, "examples/%s.dtl" % s, ranks, threads, "n=%d" % n,
             tools.mpi(ranks, threads, [s] + pa + it + ["--json", "--stats"]), tools.threads_env(threads),
             note=note, stats=True, need=s)
    # (d) STREAM and the bandwidth-bound kernels, (e) TTM and MTTKRP
    ph = "STREAM (triad, dot), %d ranks x %d threads, %d doubles per rank per array" % (P, T, args.stream_n)
    task(ph, "stream", "stream", "bench/stream.c", P, T, "N=%d per rank" % args.stream_n,
         tools.mpi(P, T, ["stream", "-N", str(args.stream_n)] + it), tools.threads_env(T),
         key=lambda j: "stream " + j["kernel"], need="stream")
    sizes = tensor_sizes(n)
    ph = "Tensor kernels, %d ranks x %d threads" % (P, T)
    for prog in TENSOR_PROGRAMS:
        pa = []
        for k, v in sizes[prog].items():
            pa += ["-" + k, str(v)]
        size = " ".join("%s=%d" % kv for kv in sizes[prog].items())
        for variant, src, note in ((prog, "examples/%s.dtl" % prog, "as written in examples/"),
                                   (prog + "_kernel", "bench/dtl/%s_kernel.dtl" % prog,
                                    "leaf loops replaced by substitute(..., %s)" % prog)):
            task(ph, "tensor", variant, src, P, T, size,
                 tools.mpi(P, T, [variant] + pa + it + ["--json", "--stats"]), tools.threads_env(T), note=note,
                 stats=True, need=variant)
    s = sizes["mttkrp"]
    task(ph, "tensor", "mttkrp_ref", "bench/mttkrp_ref.c", 1, PT, " ".join("%s=%d" % kv for kv in s.items()),
         ["mttkrp_ref", "-n", str(s["n"]), "-m", str(s["m"]), "-p", str(s["p"]), "-r", str(s["r"])] + it,
         tools.threads_env(PT), note="serial: Khatri-Rao product + one dgemm, %d BLAS threads" % PT,
         need="mttkrp_ref")

    for rnd in range(args.rounds):
        phase = None
        for t in tasks:
            if t["skip"] or t["failed"]:
                continue
            if t["phase"] != phase:
                phase = t["phase"]
                log("== %s%s" % (phase, "  [round %d of %d]" % (rnd + 1, args.rounds) if args.rounds > 1 else ""))
            if t["need"] not in built:
                t["failed"], t["note"] = True, "not built"
                continue
            cmd = [built[c] if c == t["need"] else c for c in t["cmd"]]
            ok, so, _, _ = runner.run(t["name"], cmd, env=t["env"])
            js = json_lines(so)
            if ok and not js:
                runner.failures.append((t["name"], " ".join(map(str, cmd)), "no JSON summary in the output"))
                log("  FAILED: %s: no JSON summary" % t["name"])
            if not ok or not js:
                t["failed"] = True
                continue
            for j in js:
                j["_other_cpu"] = runner.other_cpu
                k = t["key"](j) if t["key"] else t["name"]
                prev = t["runs"].get(k)
                if prev is None or j["min_s"] < prev["min_s"]:
                    j["_all_times"] = (prev["_all_times"] if prev else []) + j.get("times_s", [])
                    t["runs"][k] = j
                    if t["stats"]:
                        t["stats_out"] = so
                else:
                    prev["_all_times"] += j.get("times_s", [])
                unit, val = ("GB/s", j["gbytes_per_s"]) if t["group"] == "stream" else ("GFLOP/s", j["gflops"])
                best = t["runs"][k]["gbytes_per_s"] if unit == "GB/s" else t["runs"][k]["gflops"]
                log("  %-28s %8.2f %-8s (best so far %.2f; other processes used %s of the CPUs)" % (
                    k, val, unit, best, "n/a" if runner.other_cpu is None else "%.0f%%" % (100 * runner.other_cpu)))

    for t in tasks:
        base = dict(group=t["group"], source=t["source"], ranks=t["ranks"], threads=t["threads"], size=t["size"])
        if t["skip"]:
            res.add(name=t["name"], status="skipped", note=t["skip"], **base)
            continue
        if not t["runs"]:
            res.add(name=t["name"], status="FAILED", note=t["note"], **base)
            continue
        for k, j in t["runs"].items():
            allt = sorted(j["_all_times"]) or [j["min_s"]]
            recv = None
            if t["stats"] and t["stats_out"]:
                recv = max(recv_per_rank(parse_stats(t["stats_out"]), t["ranks"])) / 1e6
            note = t["note"]
            if k.startswith("pdgemm nb=") and j["params"]["nb"] in (32, 64):
                note = "stock block size"
            res.add(name=k, grid="x".join(map(str, j.get("grid", []))), min_s=j["min_s"],
                    median_s=allt[len(allt) // 2], gflops=j.get("gflops"), gbytes_per_s=j.get("gbytes_per_s"),
                    recv_mb_per_rank_max=recv, other_cpu=j.get("_other_cpu"),
                    status="ok" if not t["failed"] else "FAILED in a later round",
                    note=note, **base)
        if t["name"] == "dgemm 1 thread" and PT > 1:
            one = t["runs"][t["name"]]
            res.add(group="mm", name="dgemm ceiling %d x 1 thread" % PT, source="bench/dgemm_ref.c", ranks=1,
                    threads=PT, size="n=%d" % n, gflops=one["gflops"] * PT, status="derived",
                    note="%d x the 1-thread rate: perfect scaling on the same cores" % PT)


def tensor_sizes(n):
    """Problem sizes of the tensor benchmarks, from the matrix size n (n = 4096: TTV's B
    and innerprod's B, C are 512 MiB each, TTM is 2.1 GFLOP, MTTKRP's B is 128 MiB)."""
    return {
        "ttv": {"n": max(8, n // 4), "m": max(8, n // 4), "p": 64},
        "innerprod": {"n": max(4, n // 16), "m": max(4, n // 8), "p": max(4, n // 8)},
        "ttm": {"n": max(8, n // 8), "m": max(8, n // 8), "p": 64, "q": 64},
        "mttkrp": {"n": max(8, n // 16), "m": max(8, n // 16), "p": max(8, n // 16), "r": 32},
    }


def compute_ratios(args, res):
    """The headline: ours / reference.  Each entry: (comparison, ours, reference, ratio,
    unit, other CPU: the larger of the two measurements' interference)."""
    P, T = args.ranks, args.threads
    PT = P * T
    mm = [r for r in res.rows if r["group"] == "mm" and r["name"] in MM_SCHEDULES and r["status"] == "ok"
          and r["ranks"] == P]
    best = max(mm, key=lambda r: r["gflops"]) if mm else None
    dgr = res.get("mm", "dgemm %d thread%s" % (PT, "s" if PT > 1 else ""))
    ceilr = res.get("mm", "dgemm ceiling %d x 1 thread" % PT) if PT > 1 else dgr
    onethr = res.get("mm", "dgemm 1 thread")
    pd = [r for r in res.rows if r["name"].startswith("pdgemm nb=") and r["gflops"]]
    stock = max([r for r in pd if r["name"] in ("pdgemm nb=32", "pdgemm nb=64")], key=lambda r: r["gflops"],
                default=None)
    tuned = max(pd, key=lambda r: r["gflops"], default=None)
    bn = best["name"] if best else "none"
    out = []

    def add(what, ours, ref, key, unit, time_ratio=False, ref_cpu=None):
        a = ours.get(key) if ours else None
        b = ref.get(key) if ref else None
        v = ratio(b, a) if time_ratio else ratio(a, b)
        cpus = [x for x in ((ours or {}).get("other_cpu"), ref_cpu if ref_cpu is not None else
                            (ref or {}).get("other_cpu")) if x is not None]
        out.append((what, a, b, v, unit, max(cpus) if cpus else None))

    add("best MM schedule (%s) / OpenBLAS dgemm, 1 process x %d threads" % (bn, PT), best, dgr, "gflops", "GFLOP/s")
    add("best MM schedule (%s) / dgemm ceiling (%d x 1-thread rate)" % (bn, PT), best, ceilr, "gflops", "GFLOP/s",
        ref_cpu=(onethr or {}).get("other_cpu"))
    add("best MM schedule (%s) / stock PDGEMM (%s)" % (bn, stock["name"][7:] if stock else "n/a"), best, stock,
        "gflops", "GFLOP/s")
    add("best MM schedule (%s) / tuned PDGEMM (%s)" % (bn, tuned["name"][7:] if tuned else "n/a"), best, tuned,
        "gflops", "GFLOP/s")
    for s in MM_SCHEDULES:
        r = res.get("mm", s)
        if r and r["gflops"]:
            add("%s / OpenBLAS dgemm %d threads%s" % (s, PT, " (%d ranks x %d threads)" % (r["ranks"], r["threads"])
                                                      if r["ranks"] != P else ""), r, dgr, "gflops", "GFLOP/s")
    triadr = res.get("stream", "stream triad")
    for v in ("ttv", "ttv_kernel", "innerprod", "innerprod_kernel"):
        add("%s GB/s / STREAM triad" % v, res.get("tensor", v), triadr, "gbytes_per_s", "GB/s")
    for v in ("ttm", "ttm_kernel"):
        add("%s GFLOP/s / OpenBLAS dgemm %d threads" % (v, PT), res.get("tensor", v), dgr, "gflops", "GFLOP/s")
    refr = res.get("tensor", "mttkrp_ref")
    for v in ("mttkrp", "mttkrp_kernel"):
        add("%s / serial reference (time_ref / time_ours)" % v, res.get("tensor", v), refr, "min_s", "s",
            time_ratio=True)
    dg = (dgr or {}).get("gflops")
    triad = (triadr or {}).get("gbytes_per_s")
    ref = refr or {}
    # record the ratios in the rows too
    for r in res.rows:
        if r["group"] == "mm" and r["gflops"] and dg:
            r["reference"], r["ratio"] = "dgemm %d threads" % PT, r["gflops"] / dg
        elif r["name"] in ("ttv", "ttv_kernel", "innerprod", "innerprod_kernel") and r["gbytes_per_s"] and triad:
            r["reference"], r["ratio"] = "stream triad", r["gbytes_per_s"] / triad
        elif r["name"] in ("ttm", "ttm_kernel") and r["gflops"] and dg:
            r["reference"], r["ratio"] = "dgemm %d threads" % PT, r["gflops"] / dg
        elif r["name"] in ("mttkrp", "mttkrp_kernel") and r["min_s"] and ref.get("min_s"):
            r["reference"], r["ratio"] = "mttkrp_ref (time ratio)", ref["min_s"] / r["min_s"]
    return out


# ---------------------------------------------------------------------------------------
# the communication-volume study


def plan_bytes(tools, runner, path, ranks, n):
    ok, so, _, _ = runner.run("plan %s %d" % (os.path.basename(path), ranks),
                              [tools.distalc, path, "--emit", "plan", "--ranks", str(ranks), "--set", "n=%d" % n])
    if not ok:
        return None, None
    total = 0
    for m in re.finditer(r"bytes per rank[^:]*:\s*(\d+)", so):
        total += int(m.group(1))
    g = re.search(r"^grid:\s*([\d ]+)", so, re.M)
    return total, "x".join(g.group(1).split()) if g else None


def textbook_words(prog, n, grid, p):
    """(words received per rank, formula) of the textbook algorithm."""
    n2 = float(n) * n
    if prog == "summa":
        gx, gy = grid[0], grid[1]
        return n2 * (1.0 / gx + 1.0 / gy), "n^2 (1/gx + 1/gy)"
    if prog == "cannon":
        gx, gy = grid[0], grid[1]
        if gx == gy:
            return 2 * n2 / math.sqrt(p) + 2 * n2 / p, "2 n^2/sqrt(p) + 2 n^2/p alignment"
        return n2 * (1.0 / gx + 1.0 / gy), "n^2 (1/gx + 1/gy) (grid not square)"
    if prog == "johnson":
        q2 = p ** (2.0 / 3.0)
        return 2 * n2 / q2 + n2 / q2, "2 n^2/p^(2/3) + n^2/p^(2/3) reduction"
    return None, ""


def bench_volume(args, tools, runner, built, vol_ranks, n, out):
    log("== Communication volume: SUMMA, Cannon, Johnson at %s ranks, n = %d" % (",".join(map(str, vol_ranks)), n))
    rows = []
    for p in vol_ranks:
        for prog in ("summa", "cannon", "johnson"):
            path = os.path.join(args.examples, prog + ".dtl")
            row = {"program": prog, "ranks": p, "n": n}
            rows.append(row)
            if prog == "johnson" and icbrt(p) is None:
                row["status"] = "n/a: %d is not a cube (grid(q, q, q))" % p
                continue
            if prog not in built:
                row["status"] = "FAILED: not built"
                continue
            ok, so, _, _ = runner.run("volume %s %d ranks" % (prog, p),
                                      tools.mpi(p, 1, [built[prog], "-n", str(n), "--stats", "--json"],
                                                oversubscribed=p > tools.ncpu),
                                      tools.threads_env(1))
            js = json_lines(so)
            if not ok or not js:
                row["status"] = "FAILED"
                continue
            grid = js[0]["grid"]
            stats = parse_stats(so)
            recv = recv_per_rank(stats, p)
            ops = sorted({op for r in stats.values() for op in r})
            words, formula = textbook_words(prog, n, grid, p)
            pb, pgrid = plan_bytes(tools, runner, path, p, n)
            worst = max(range(p), key=lambda r: recv[r])
            byop = ", ".join("%s %d" % (op, v[2] // 8) for op, v in sorted(stats.get(worst, {}).items()) if v[2])
            row.update(status="ok", grid="x".join(map(str, grid)), ops="+".join(ops), max_rank=worst,
                       max_by_op=byop,
                       recv_rank0=recv[0] / 8.0, recv_mean=sum(recv) / 8.0 / p, recv_max=max(recv) / 8.0,
                       plan=None if pb is None else pb / 8.0, plan_grid=pgrid, textbook=words, formula=formula)
            log("  %-8s %3d ranks grid %-6s recv words/rank: max %10.0f mean %10.0f | plan %10s | textbook %10.0f"
                % (prog, p, row["grid"], row["recv_max"], row["recv_mean"], whole(row["plan"]), words))
    with open(os.path.join(out, "volume.csv"), "w", newline="") as f:
        w = csv.writer(f)
        keys = ["program", "ranks", "n", "grid", "ops", "recv_rank0", "recv_mean", "recv_max", "max_rank",
                "max_by_op", "plan", "plan_grid",
                "textbook", "formula", "status"]
        w.writerow(keys)
        for r in rows:
            w.writerow([r.get(k, "") for k in keys])
    L = []
    L.append("# Communication volume of SUMMA, Cannon and Johnson\n")
    L.append("Generated by `bench/volume.sh` (or `bench/run.sh --volume`, `--quick`) on %s, host %s. "
             "n = %d doubles, ranks oversubscribed on %d cores, one run each.\n"
             % (datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), platform.node(), n, tools.ncpu))
    L.append("All volumes are in **words (8-byte doubles) received per rank**, for one multiply:\n")
    L.append("- *measured*: the generated program's `--stats` (bytes received, all operations), "
             "for rank 0, averaged over the ranks, and the largest rank;")
    L.append("- *plan*: `distalc FILE --emit plan --ranks P --set n=N`, the sum of its \"bytes per rank\" "
             "lines (rank 0's received bytes: the boxes each communicate point materializes less what "
             "rank 0 already holds, a reduction's partial sums; equal to rank 0's measured volume "
             "but at a reduction's root, which receives every member's partial sums);")
    L.append("- *textbook*: SUMMA n^2 (1/gx + 1/gy); Cannon 2 n^2/sqrt(p) plus the initial alignment "
             "2 n^2/p; Johnson 2 n^2/p^(2/3) plus the reduction n^2/p^(2/3). The textbook counts the "
             "panels a rank uses, its own block included, so the measured volume (which excludes what a "
             "rank already holds) is expected slightly below it, by the owned fraction (1/gx, 1/sqrt(p), 1/q).\n")
    L.append("The runtime's `--stats` count a reduction as a flat tree: the root receives (members - 1) "
             "copies of the box, whatever algorithm MPI_Reduce uses; the textbook's n^2/p^(2/3) assumes "
             "a balanced (reduce-scatter) reduction. This is why Johnson's largest rank exceeds the textbook "
             "at q = 4 (the root of each reduction receives 3 tiles).\n")
    L.append("| program | ranks | grid | ops | recv rank 0 | recv mean | recv max | max rank, by op | plan (rank 0) | "
             "textbook | max / textbook | plan / textbook | textbook formula |")
    L.append("|---|---:|---|---|---:|---:|---:|---|---:|---:|---:|---:|---|")
    for r in rows:
        if r.get("status") != "ok":
            L.append("| %s | %d | | | | | | | | | | | %s |" % (r["program"], r["ranks"], r.get("status", "")))
            continue
        L.append("| %s | %d | %s | %s | %.0f | %.0f | %.0f | rank %d: %s | %s | %.0f | %s | %s | %s |" % (
            r["program"], r["ranks"], r["grid"], r["ops"], r["recv_rank0"], r["recv_mean"], r["recv_max"],
            r["max_rank"], r["max_by_op"],
            whole(r["plan"]), r["textbook"], fmt(ratio(r["recv_max"], r["textbook"])),
            fmt(ratio(r["plan"], r["textbook"])), r["formula"]))
    L.append("")
    with open(os.path.join(out, "volume.md"), "w") as f:
        f.write("\n".join(L) + "\n")
    bad = [r for r in rows if r.get("status", "").startswith("FAILED")]
    return rows, bad


# ---------------------------------------------------------------------------------------
# output


def write_outputs(args, tools, res, ratios, ctimes, exe_times, out, start_load, failures, header):
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        for r in res.rows:
            w.writerow(r)
        for name, ms in ctimes.items():
            w.writerow({"group": "distalc", "name": name, "source": name + ".dtl", "min_s": None if ms is None
                        else ms / 1e3, "status": "ok" if ms is not None else "FAILED",
                        "note": "distalc translation to C (best of %d); --exe with the C compiler: %.3f s"
                        % (args.compile_reps, exe_times.get(name, float("nan")))})
        for what, ours, ref, val, unit, oc in ratios:
            w.writerow({"group": "ratio", "name": what, "ratio": val, "other_cpu": oc, "note": unit})
    L = []
    L.append("# distal-mpi benchmark results\n")
    L.append(header + "\n")
    L.append("## Ratios (ours / reference; above 1 means ours is faster)\n")
    L.append("*other CPU*: the larger share of the machine's CPU time that other processes used during "
             "the two measurements (see below); well above 0 means the ratio is not to be trusted.\n")
    L.append("| comparison | ours | reference | ratio | other CPU |")
    L.append("|---|---:|---:|---:|---:|")
    for what, ours, ref, val, unit, oc in ratios:
        L.append("| %s | %s %s | %s %s | **%s** | %s |" % (what, fmt(ours, 3 if unit == "s" else 2), unit,
                                                         fmt(ref, 3 if unit == "s" else 2), unit, fmt(val), pct(oc)))
    cm = [v for v in ctimes.values() if v is not None]
    if cm:
        L.append("| distalc compile time, slowest example (target < 50 ms) | %.1f ms | 50 ms | %s | |"
                 % (max(cm), fmt(max(cm) / 50.0)))
    L.append("")
    L.append("## Matrix multiply, n = %d (double)\n" % args.n)
    L.append("*other CPU*: the share of the machine's CPU time that other processes used during the best "
             "run's process (from /proc/stat); well above 0 means that measurement was disturbed.\n")
    L.append("| variant | source | ranks x threads | grid | min s | median s | GFLOP/s | / dgemm %d thr | "
             "recv MB/rank (max) | other CPU | note |" % (args.ranks * args.threads))
    L.append("|---|---|---|---|---:|---:|---:|---:|---:|---:|---|")
    for r in res.rows:
        if r["group"] != "mm":
            continue
        L.append("| %s | %s | %sx%s | %s | %s | %s | %s | %s | %s | %s | %s %s |" % (
            r["name"], r["source"], r["ranks"], r["threads"], r["grid"] or "", fmt(r["min_s"], 3),
            fmt(r["median_s"], 3), fmt(r["gflops"]), fmt(r["ratio"]), fmt(r["recv_mb_per_rank_max"], 1),
            pct(r["other_cpu"]), "" if r["status"] in ("ok",) else r["status"], r["note"] or ""))
    L.append("\n![GFLOP/s](gemm.png)\n")
    L.append("## Tensor kernels and STREAM\n")
    L.append("`*_kernel` are bench/dtl/ copies of the examples with `substitute` of the leaf kernel; the "
             "examples as written run the scalar loops that distalc generates.\n")
    L.append("| program | source | ranks x threads | sizes | min s | median s | GFLOP/s | GB/s | reference | "
             "ratio | other CPU | note |")
    L.append("|---|---|---|---|---:|---:|---:|---:|---|---:|---:|---|")
    for r in res.rows:
        if r["group"] not in ("tensor", "stream"):
            continue
        L.append("| %s | %s | %sx%s | %s | %s | %s | %s | %s | %s | %s | %s | %s %s |" % (
            r["name"], r["source"], r["ranks"], r["threads"], r["size"] or "", fmt(r["min_s"], 4),
            fmt(r["median_s"], 4), fmt(r["gflops"]), fmt(r["gbytes_per_s"]), r["reference"] or "",
            fmt(r["ratio"]), pct(r["other_cpu"]), "" if r["status"] == "ok" else r["status"], r["note"] or ""))
    L.append("")
    L.append("## distalc compile time\n")
    L.append("Translation to C (`distalc FILE.dtl -o OUT`, best of %d runs) and the whole `--exe` build "
             "(with the MPI C compiler, run in parallel with the other builds).\n" % args.compile_reps)
    L.append("| program | distalc ms | under 50 ms | --exe s |")
    L.append("|---|---:|---|---:|")
    for name, ms in ctimes.items():
        L.append("| %s | %s | %s | %s |" % (name, fmt(ms, 1), "yes" if ms is not None and ms < 50 else "NO",
                                           fmt(exe_times.get(name), 2)))
    L.append("")
    if failures:
        L.append("## Failures\n")
        for what, cmd, detail in failures:
            L.append("- **%s**: `%s`\n\n  ```\n  %s\n  ```" % (what, cmd, detail.replace("\n", "\n  ")))
        L.append("")
    L.append("Raw output of every command: `log.txt` beside this file.\n")
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(L))


def plot(res, out, runner, args):
    gp = shutil.which("gnuplot")
    if not gp:
        log("  (gnuplot not found: no gemm.png)")
        return
    data = [(r["name"], r["gflops"], r["group"]) for r in res.rows if r["group"] == "mm" and r["gflops"]]
    if not data:
        return
    with open(os.path.join(out, "gemm.dat"), "w") as f:
        for i, (name, gf, _) in enumerate(data):
            kind = 0 if name.startswith("dgemm") else 1 if name.startswith("pdgemm") else 2
            f.write('%d "%s" %.6g %d\n' % (i, name, gf, kind))
    title = "GFLOP/s, n = %d, %d ranks x %d threads (%s)" % (args.n, args.ranks, args.threads, platform.node())
    script = """
set terminal %s size 1100,560
set output '%s'
set title "%s"
set ylabel 'GFLOP/s'
set style fill solid 0.8 border -1
set boxwidth 0.7
set xtics rotate by -40 left nomirror
set grid ytics
set yrange [0:*]
set key off
set bmargin 10
plot '%s' using 1:3:($4==0?0x4477aa:($4==1?0xaa7744:0x44aa66)):xtic(2) with boxes lc rgb variable, \\
     '' using 1:3:(sprintf("%%.1f",$3)) with labels offset 0,0.7 font ",9"
"""
    for term in ("pngcairo", "png"):
        with open(os.path.join(out, "gemm.gp"), "w") as f:
            f.write(script % (term, os.path.join(out, "gemm.png"), title, os.path.join(out, "gemm.dat")))
        ok, _, _, _ = runner.run("gnuplot gemm.png (%s)" % term, [gp, os.path.join(out, "gemm.gp")],
                                 quiet_fail=term == "pngcairo")
        if ok:
            return


# ---------------------------------------------------------------------------------------


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="bench/run.sh", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=2, help="MPI ranks of every distributed run (default 2)")
    ap.add_argument("--threads", type=int, default=1, help="threads per rank (OpenBLAS, OpenMP; default 1)")
    ap.add_argument("-n", "--n", type=int, default=None, help="matrix size (default 4096; --quick: 256)")
    ap.add_argument("--iters", type=int, default=None, help="timed repetitions per run and round, best of all (default 3; --quick: 1)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed repetitions first (default 1; --quick: 0)")
    ap.add_argument("--rounds", type=int, default=None,
                    help="passes over all measurements, interleaved; each keeps its best (default 2; --quick: 1)")
    ap.add_argument("--nb", default="32,64,128,256,512", help="PDGEMM block sizes (32 and 64 are the stock ones)")
    ap.add_argument("--stream-n", type=int, default=None, help="STREAM doubles per rank and array (default 2e7)")
    ap.add_argument("--quick", action="store_true", help="small sizes, 1 iteration: builds and runs everything")
    ap.add_argument("--volume", action="store_true", help="also run the communication-volume study")
    ap.add_argument("--volume-only", action="store_true", help="run only the communication-volume study")
    ap.add_argument("--volume-ranks", default=None, help="rank counts of the volume study (default 4,8,16,64)")
    ap.add_argument("--volume-n", type=int, default=None, help="matrix size of the volume study (default 384)")
    ap.add_argument("--out", default=None, help="results folder (default bench/results, --quick: bench/results/quick)")
    ap.add_argument("--distalc", default=None, help="distalc to use (default $DISTALC, else distalc on PATH)")
    ap.add_argument("--examples", default=os.path.join(TOP, "examples"), help="folder of the .dtl examples")
    ap.add_argument("--compile-reps", type=int, default=None, help="distalc timing repetitions (default 5)")
    ap.add_argument("--timeout", type=int, default=None, help="seconds allowed to one command (default 1800)")
    a = ap.parse_args(argv)
    q = a.quick
    a.n = a.n or (256 if q else 4096)
    a.iters = a.iters if a.iters is not None else (1 if q else 3)
    a.rounds = a.rounds if a.rounds is not None else (1 if q else 2)
    a.warmup = a.warmup if a.warmup is not None else (0 if q else 1)
    a.stream_n = a.stream_n or (1000000 if q else 20000000)
    a.volume_n = a.volume_n or (96 if q else 384)
    a.volume_ranks = a.volume_ranks or ("4,8" if q else "4,8,16,64")
    a.compile_reps = a.compile_reps or (1 if q else 5)
    a.timeout = a.timeout or (300 if q else 1800)
    if q:
        a.volume = True
        # the quick mode checks that everything builds and runs, not speed: compile faster
        os.environ.setdefault("DISTAL_EXTRA_CFLAGS", "-O1")
    if a.ranks < 1 or a.threads < 1 or a.n < 1 or a.iters < 1 or a.warmup < 0 or a.rounds < 1:
        ap.error("--ranks, --threads, -n and --iters must be positive, --warmup not negative")
    return a


def choose_out(a):
    want = a.out or os.path.join(HERE, "results", "quick" if a.quick else "")
    try:
        os.makedirs(want, exist_ok=True)
        probe = os.path.join(want, ".write-probe")
        open(probe, "w").close()
        os.unlink(probe)
        return os.path.abspath(want)
    except OSError:
        if a.out:
            raise
        alt = tempfile.mkdtemp(prefix="distal-bench-")
        log("bench: %s is not writable, writing to %s" % (want, alt))
        return alt


def main(argv):
    args = parse_args(argv)
    out = choose_out(args)
    bdir = os.path.join(out, "build")
    os.makedirs(bdir, exist_ok=True)
    runner = Runner(out, args.timeout)
    tools = Tools(args, runner)
    if not tools.distalc:
        log("bench: no distalc: set DISTALC, put distalc on PATH, or pass --distalc")
        return 1
    start_load = os.getloadavg()
    t_start = time.perf_counter()
    ver = subprocess.run([tools.distalc, "--version"], capture_output=True, text=True).stdout.strip()
    log("bench: %s, results in %s" % (ver or tools.distalc, out))
    if start_load[0] > 0.5 * tools.ncpu:
        log("bench: note: load average %.2f on %d cores: other work shares this machine, timings are noisy"
            % (start_load[0], tools.ncpu))

    vol_ranks = [int(x) for x in args.volume_ranks.split(",") if x.strip()]
    if args.volume_only:
        dtl = [(p, os.path.join(args.examples, p + ".dtl")) for p in ("summa", "cannon", "johnson")]
        args.scalapack_ok = False
        built, _ = build_all(args, tools, runner, bdir, dtl)
        rows, bad = bench_volume(args, tools, runner, built, vol_ranks, args.volume_n, out)
        log("wrote %s" % os.path.join(out, "volume.md"))
        print_failures(runner)
        return 1 if runner.failures or bad else 0

    dtl = [(p, os.path.join(args.examples, p + ".dtl")) for p in MM_SCHEDULES + TENSOR_PROGRAMS]
    dtl += [(p + "_kernel", os.path.join(HERE, "dtl", p + "_kernel.dtl")) for p in TENSOR_PROGRAMS]
    log("== distalc compile time (translation to C, best of %d)" % args.compile_reps)
    with tempfile.TemporaryDirectory() as tmp:
        ctimes = compile_times(tools, runner, dtl, args.compile_reps, tmp)
    for name, ms in ctimes.items():
        log("  %-20s %s ms" % (name, fmt(ms, 1)))
    log("== building (distalc --exe, references)")
    args.scalapack_ok = scalapack_available(tools, bdir)
    if not args.scalapack_ok:
        log("  ScaLAPACK (%s) not found: PDGEMM skipped" % " ".join(tools.scalapack))
    built, exe_times = build_all(args, tools, runner, bdir, dtl)
    res = Results()
    bench_main(args, tools, runner, built, res)
    ratios = compute_ratios(args, res)
    plot(res, out, runner, args)
    bad = []
    if args.volume:
        _, bad = bench_volume(args, tools, runner, built, vol_ranks, args.volume_n, out)
    end_load = os.getloadavg()
    header = ("Generated by `bench/run.sh%s` on %s; host %s, %d cores, %s. distalc: %s.\n\n"
              "Every distributed run: %d ranks x %d threads (OPENBLAS_NUM_THREADS = OMP_NUM_THREADS = %d); "
              "n = %d; best of %d timed runs after %d warm-up runs, in each of %d interleaved round%s (min s is "
              "the best run, the time of the slowest rank; median s over all timed runs). Load average %.2f at the start, %.2f at the end (above %d means other work "
              "shared the cores and the timings are noisy). Total bench time %.0f s." % (
                  " " + " ".join(argv) if argv else "", datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
                  platform.node(), tools.ncpu, platform.processor() or platform.machine(), ver or tools.distalc,
                  args.ranks, args.threads, args.threads, args.n, args.iters, args.warmup, args.rounds,
                  "s" if args.rounds > 1 else "", start_load[0],
                  end_load[0], tools.ncpu, time.perf_counter() - t_start))
    write_outputs(args, tools, res, ratios, ctimes, exe_times, out, start_load, runner.failures, header)
    log("")
    log("RATIOS (ours / reference; above 1 means ours is faster)")
    w = max(len(r[0]) for r in ratios)
    for what, ours, ref, val, unit, oc in ratios:
        log("  %-*s %8s   (%s vs %s %s%s)" % (w, what, fmt(val), fmt(ours, 3), fmt(ref, 3), unit,
                                             "" if oc is None else "; other CPU %s" % pct(oc)))
    cm = [v for v in ctimes.values() if v is not None]
    if cm:
        log("  %-*s %8s   (slowest %s: %.1f ms; target 50 ms)" % (w, "distalc compile time, slowest / 50 ms",
                                                                  fmt(max(cm) / 50.0),
                                                                  max(ctimes, key=lambda k: ctimes[k] or 0),
                                                                  max(cm)))
    log("")
    log("wrote %s, results.csv%s%s" % (os.path.join(out, "results.md"),
                                       ", gemm.png" if os.path.exists(os.path.join(out, "gemm.png")) else "",
                                       ", volume.md" if args.volume else ""))
    print_failures(runner)
    return 1 if runner.failures or bad else 0


def print_failures(runner):
    if runner.failures:
        log("\n%d FAILURE%s:" % (len(runner.failures), "S" if len(runner.failures) > 1 else ""))
        for what, cmd, detail in runner.failures:
            log("  %s\n    $ %s\n    %s" % (what, cmd, detail.replace("\n", "\n    ")))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
