#!/usr/bin/env python3
"""run_e2e.py -- end-to-end tests: compile .dtl programs, run them under mpirun, compare.

Each test case names a .dtl program, param values and a rank count.  The program is
compiled once with `$DISTALC FILE.dtl --exe -o DIR/prog`; random inputs are written as
.npy files; the executable runs as
    $MPIRUN -np P --oversubscribe DIR/prog -PARAM V ... --load T=T.npy ... --save T=OUT.npy
with a time limit (a hang is a failure), and every saved tensor is compared with the
NumPy oracle (dtl.py): written tensors with the oracle's result, the others with their
inputs, which a run must leave unchanged.  Some runs add --validate and must exit 0;
some are expected to fail cleanly (a rank count that does not fit the machine, a
missing param, a bad input file): they must exit nonzero, with a message, in time.

Sparse tensors (a compressed level) get random sparse data (sparse.py), written as a
Matrix Market .mtx, a FROSTT .tns or a dense .npy file; the oracle computes with the
dense array the file means, and the sparse tensor saved as .npy must equal it.  So do
the sparse tensors that statements write (the initial values of `+=`): a sparse result
is saved dense and compared with the oracle's result like a dense one.  Some runs
expect distalc itself to reject a program (a statement that reads the sparse tensor it
writes, or runs threads or a substituted kernel for one, sparse tensors or precompute
for --target cuda, a precompute that breaks its rules): exit status 1, a located
error, no output.  With --target cuda, the programs
with sparse tensors or precompute are only checked to be rejected.

usage: run_e2e.py [--suite examples|programs|all|gpu] [--long] [-j N] [--only TEXT]
                  [--keep] [--list] [--timeout S] [--target cpu|cuda] [--max-ranks N]

--target cuda compiles every program for the CUDA target (device tensors, kernels, NCCL):
on a GPU machine with nvcc, or, with DISTAL_CUDA_EMULATION=1 (and DISTAL_CUDA_CFLAGS /
DISTAL_CUDA_LIBS naming tests/cuemu), against the host emulation of the test suite.
--max-ranks drops the runs with more ranks (one rank per GPU on a GPU machine).

Environment (make check sets all of them): DISTALC, MPIRUN, PYTHON, top_srcdir,
top_builddir, DISTAL_CFLAGS, DISTAL_LIBS.  Prints one PASS/FAIL line per run, the
commands that reproduce each failure, and last the line `N passed, M failed`; exits 1
if anything failed.
"""

import argparse
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)
import dtl  # noqa: E402
import sparse  # noqa: E402

TOP_SRCDIR = os.path.abspath(os.environ.get("top_srcdir") or os.path.join(HERE, "..", ".."))
TOP_BUILDDIR = os.path.abspath(os.environ.get("top_builddir") or TOP_SRCDIR)
DISTALC = os.environ.get("DISTALC") or os.path.join(TOP_BUILDDIR, "distalc")
MPIRUN = os.environ.get("MPIRUN") or "mpirun"
PYTHON = os.environ.get("PYTHON") or sys.executable

RUN_TIMEOUT = 120
COMPILE_TIMEOUT = 300
TARGET_ARGS = []  # --target cuda: passed to every distalc --exe


def setup_environment():
    """Defaults for running outside `make check` (which exports all of these)."""
    env = os.environ
    for k, v in (("OMPI_ALLOW_RUN_AS_ROOT", "1"), ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
                 ("OMPI_MCA_rmaps_base_oversubscribe", "1"), ("OPENBLAS_NUM_THREADS", "1"),
                 ("OMP_NUM_THREADS", "1")):
        env.setdefault(k, v)
    env.setdefault("DISTAL_CFLAGS", "-I%s" % os.path.join(TOP_SRCDIR, "src", "comm"))
    if "DISTAL_LIBS" not in env:
        libs = os.path.join(TOP_BUILDDIR, ".libs")
        env["DISTAL_LIBS"] = "-L%s -Wl,-rpath,%s -ldistal -lopenblas -lm" % (libs, libs)


# ---- grids: which rank counts fit a machine ----------------------------------------------


def dims_create(n, nd):
    """MPI_Dims_create(n, nd) as Open MPI computes it: the prime factors of n, largest
    first, each given to the dimension with the smallest product so far; the result in
    non-increasing order."""
    primes, f, m = [], 2, n
    while f * f <= m:
        while m % f == 0:
            primes.append(f)
            m //= f
        f += 1
    if m > 1:
        primes.append(m)
    dims = [1] * nd
    for p in sorted(primes, reverse=True):
        k = dims.index(min(dims))
        dims[k] *= p
    return sorted(dims, reverse=True)


def _assignments(names, counts, rest):
    """Values for the distinct names with prod(v[name]**count) == rest, most balanced first."""
    out = []

    def rec(k, left, cur):
        if k == len(names):
            if left == 1:
                out.append(dict(cur))
            return
        for v in range(1, left + 1):
            if left % (v ** counts[names[k]]) == 0:
                cur[names[k]] = v
                rec(k + 1, left // (v ** counts[names[k]]), cur)
                del cur[names[k]]

    rec(0, rest, {})
    out.sort(key=lambda a: (max(a.values()) - min(a.values()), [-a[n] for n in names]))
    return out


def grid_fit(prog, nranks, params):
    """Whether nranks fits every machine of prog, given param values (None: no value).
    Returns (explicit, values) or None: explicit are the grid params the run must pass
    (a param used several times whose value MPI_Dims_create would not produce),
    values every grid param's value, for the oracle."""
    values = {k: v for k, v in params.items() if k in prog.grid_params() and v is not None}
    explicit = {}
    for m in prog.machines.values():
        dims = m.dims
        known, free = 1, []
        for d in dims:
            if isinstance(d, int):
                known *= d
            elif values.get(d) is not None:
                known *= values[d]
            else:
                free.append(d)
        if not free:
            if known != nranks:
                return None
            continue
        if nranks % known:
            return None
        rest = nranks // known
        names = list(dict.fromkeys(free))
        counts = {n: free.count(n) for n in names}
        derived = dims_create(rest, len(free))
        got = {}
        consistent = True
        for n, v in zip(free, derived):
            if got.setdefault(n, v) != v:
                consistent = False
        if consistent:
            values.update(got)
            continue
        options = _assignments(names, counts, rest)
        if not options:
            return None
        values.update(options[0])
        explicit.update(options[0])
    return explicit, values


# ---- runs ----------------------------------------------------------------------------------

ERRORS = ("ranks", "param", "shape", "dtype", "option")
# Clean failures on a bad sparse input file: a .mtx whose size line does not match the
# tensor, a .tns coordinate beyond the extent, a .mtx entry that is not a number.
SPARSE_ERRORS = ("mtx-shape", "tns-range", "mtx-syntax")
ERRORS += SPARSE_ERRORS
# Clean failures of programs with temporaries: `--load T=FILE` or `--save T=FILE` of a
# temporary T, which an executable refuses with a message and exit status 2.
TEMP_ERRORS = ("load-temp", "save-temp")
ERRORS += TEMP_ERRORS
# Output of an mpirun that could not start the job at all.
MPIRUN_STARTUP_FAILURES = ("orte_init failed", "ORTE_ERROR_LOG", "unable to create the desired directory")


class Run:
    """One execution of one program.

    file: path relative to top_srcdir; nranks: P; params: param values to pass; grid:
    grid params to pass (None: work them out with grid_fit); validate: add --validate;
    error: None, or the kind of clean failure expected (ERRORS); fill: instead of
    --load, use --fill random --seed N and run at every rank count in fill_ranks,
    checking that all see the same tensors (fill_args: more options, e.g. --density,
    whose value the sparse tensors' share of nonzeros must then be near).
    compile_error: distalc must reject the program: None (it must not), or the list of
    lines where the error may be located ([]: any); compile_args: more distalc options;
    source: the program's text (file is then only its name; the text is written to the
    work directory, for a run as for a rejection).  args: more options for the
    executable (e.g. --iters).  exact: floating-point results must equal the oracle's
    bit for bit (programs whose results are literals, tests/e2e/programs/literals.dtl).
    inputs: None, or a function (param values, rng) -> {tensor name: array} that gives some
    inputs instead of random ones (a matrix that an iterative method converges on, positive
    prices); a sparse tensor's array is the dense matrix its file means.  monitor: add
    --monitor and check its lines against the oracle's.  norm_tol: compare the floating-point
    results norm-wise, to norm_tol times the largest |value| of the oracle's result, instead
    of element by element against the oracle's magnitudes (which an iterative method that
    divides by its own reductions, such as conjugate gradient, blows up to no bound)."""

    def __init__(self, suite, file, nranks, params=None, grid=None, validate=False, error=None,
                 fill_ranks=None, omit=(), label="", fill_args=(), compile_error=None,
                 compile_args=(), source=None, args=(), exact=False, inputs=None, monitor=False,
                 norm_tol=None, compile_env=None, run_env=None):
        self.suite, self.file, self.nranks = suite, file, nranks
        self.params = dict(params or {})
        self.grid = grid
        self.validate, self.error, self.fill_ranks = validate, error, fill_ranks
        self.omit = tuple(omit)  # params not to pass (to test a missing param)
        self.label = label
        self.fill_args = tuple(fill_args)
        self.compile_error = compile_error
        self.compile_args = tuple(compile_args)
        self.compile_env = dict(compile_env or {})  # more environment for distalc --exe
        self.run_env = dict(run_env or {})  # ... and for the run (mpirun passes it on)
        self.source = source
        self.args = tuple(args)
        self.exact = exact
        self.inputs = inputs
        self.monitor = monitor
        self.norm_tol = norm_tol
        self.path = file if os.path.isabs(file) else os.path.join(TOP_SRCDIR, file)

    @property
    def id(self):
        name = os.path.basename(self.file) if os.path.isabs(self.file) else self.file
        if self.compile_error is not None:
            return " ".join([name, "distalc"] + list(self.compile_args) + ["expect-compile-error"]
                            + ([self.label] if self.label else []))
        parts = [name] + list(self.compile_args)
        parts.append("np=%s" % ("+".join(map(str, self.fill_ranks)) if self.fill_ranks else self.nranks))
        parts += ["%s=%s" % kv for kv in sorted(self.params.items())]
        parts += ["%s=%s" % kv for kv in sorted((self.grid or {}).items())]
        parts.extend(self.args)
        if self.monitor:
            parts.append("--monitor")
        if self.validate:
            parts.append("validate")
        if self.fill_ranks:
            parts.append("fill")
            parts.extend(self.fill_args)
        if self.error:
            parts.append("expect-error-" + self.error)
        if self.label:
            parts.append(self.label)
        return " ".join(parts)

    def seed(self):
        return zlib.crc32(self.id.encode()) & 0x7FFFFFFF


def param_args(name, value, style):
    """The three spellings LANGUAGE.md allows: -NAME V, --NAME V, --NAME=V."""
    if style == 0:
        return ["-" + name, str(value)]
    if style == 1:
        return ["--" + name, str(value)]
    return ["--%s=%s" % (name, value)]


class Result:
    def __init__(self, run):
        self.run = run
        self.ok = False
        self.reason = ""
        self.details = []  # lines: commands, output tails
        self.seconds = 0.0


class Runner:
    def __init__(self, workdir, timeout=RUN_TIMEOUT, jobs=2, reproduce=None, verbose=False, run_jobs=None):
        """jobs: compilations at a time (they are CPU-bound); run_jobs (default jobs): runs at
        a time, counting the compilations among them (mpirun's start-up mostly waits)."""
        self.workdir = workdir
        self.timeout = timeout
        self.jobs = max(1, run_jobs or jobs)
        self.compile_slots = threading.Semaphore(max(1, jobs))
        self.reproduce = reproduce  # run -> command line that reruns it
        self.verbose = verbose
        self.compiled = {}  # path -> (exe or None, message, command)
        self.compile_locks = {}
        self.lock = threading.Lock()
        self.counter = 0
        self.passed = self.failed = 0

    # -- processes --
    def execute(self, cmd, cwd, timeout, more_env=None):
        """Run cmd in its own process group; returns (rc or None on timeout, output)."""
        # Each run gets its own TMPDIR: mpiruns started at the same moment otherwise race
        # to create the same Open MPI session directory under /tmp.
        env = dict(os.environ, TMPDIR=cwd)
        env.update(more_env or {})
        try:
            p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True, env=env)
        except OSError as e:
            return 127, "cannot start %s: %s" % (cmd[0], e)
        try:
            out, _ = p.communicate(timeout=timeout)
            return p.returncode, out.decode(errors="replace")
        except subprocess.TimeoutExpired:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    out, _ = p.communicate(timeout=5)
                    break
                except subprocess.TimeoutExpired:
                    out = b""
            else:
                out = b""
            return None, (out or b"").decode(errors="replace")

    def compile(self, path, extra=(), more_env=None):
        """The executable of path compiled with distalc --exe and the options extra, in
        the environment with more_env (once per path, options and environment): (exe or
        None, message, command)."""
        key = (path, tuple(extra), tuple(sorted((more_env or {}).items())))
        with self.lock:
            lk = self.compile_locks.setdefault(key, threading.Lock())
        with lk:
            if key in self.compiled:
                return self.compiled[key]
            with self.lock:
                self.counter += 1
                n = self.counter
            d = os.path.join(self.workdir, "bin%d" % n)
            os.makedirs(d)
            exe = os.path.join(d, "prog")
            cmd = [DISTALC, path, "--exe", "-o", exe] + TARGET_ARGS + list(extra)
            if not (os.path.isfile(DISTALC) and os.access(DISTALC, os.X_OK)):
                res = (None, "distalc not found at %s (set DISTALC)" % DISTALC, cmd)
            else:
                with self.compile_slots:
                    rc, out = self.execute(cmd, d, COMPILE_TIMEOUT, more_env)
                if rc is None:
                    res = (None, "distalc timed out after %d s\n%s" % (COMPILE_TIMEOUT, out), cmd)
                elif rc != 0:
                    res = (None, "distalc exited with %d\n%s" % (rc, out), cmd)
                elif not os.path.isfile(exe):
                    res = (None, "distalc exited 0 but wrote no executable %s\n%s" % (exe, out), cmd)
                else:
                    res = (exe, out, cmd)
            if more_env:  # in the command that reproduces it
                res = res[:2] + (["env"] + ["%s=%s" % kv for kv in sorted(more_env.items())] + cmd,)
            self.compiled[key] = res
            return res

    # -- one run --
    def run_one(self, run):
        res = Result(run)
        t0 = time.time()
        try:
            self._run(run, res)
        except dtl.DtlError as e:
            res.ok, res.reason = False, "oracle: %s" % e
        except Exception as e:  # a bug in the test itself must show, not crash the suite
            import traceback
            res.ok, res.reason = False, "test harness error: %r" % e
            res.details.append(traceback.format_exc())
        res.seconds = time.time() - t0
        self.report(res)
        return res

    def source_path(self, run):
        """The file of a run: run.path, or for a run given its source, a copy of that in
        the work directory (one per distinct text)."""
        if run.source is None:
            return run.path
        d = os.path.join(self.workdir, "src%08x" % (zlib.crc32(run.source.encode()) & 0xFFFFFFFF))
        path = os.path.join(d, os.path.basename(run.file))
        with self.lock:
            if not os.path.isfile(path):
                os.makedirs(d, exist_ok=True)
                with open(path, "w") as f:
                    f.write(run.source)
        return path

    def _run(self, run, res):
        if run.compile_error is not None:
            return self._compile_fail(run, res)
        path = self.source_path(run)
        prog = dtl.parse_file(path)
        exe, msg, ccmd = self.compile(path, run.compile_args, run.compile_env)
        res.details.append("compile: " + shlex.join(ccmd))
        if exe is None:
            lines = msg.strip().splitlines() or ["(no output)"]
            first = next((l for l in lines if "error" in l), lines[0])
            res.reason = "compile failed: " + first.strip()
            res.details.append(tail(msg))
            return
        with self.lock:
            self.counter += 1
            d = os.path.join(self.workdir, "run%d" % self.counter)
        os.makedirs(d)
        params = prog.param_values({k: v for k, v in run.params.items()}, run.grid or {})
        if run.fill_ranks:
            return self._run_fill(run, res, prog, exe, params, d)
        fit = grid_fit(prog, run.nranks, params)
        if fit is None and run.error != "ranks":
            raise dtl.DtlError("%d ranks do not fit the machine of %s" % (run.nranks, run.file))
        explicit, gvals = fit if fit else ({}, {})
        pass_params = dict(run.params)
        pass_params.update(run.grid if run.grid is not None else explicit)
        for k in run.omit:
            pass_params.pop(k, None)
        values = dict(params)
        values.update(gvals)
        rng = np.random.default_rng(run.seed())
        try:
            inputs = dtl.random_inputs(prog, values, rng)
        except dtl.DtlError:
            if run.error != "param":
                raise
            inputs = {}
        given = {}
        if run.inputs is not None and inputs:
            given = run.inputs(values, np.random.default_rng([run.seed(), 1]))
            inputs.update(given)
        cmd = [MPIRUN, "-np", str(run.nranks), "--oversubscribe", exe]
        style = run.seed() % 3
        for k, v in pass_params.items():
            cmd += param_args(k, v, style)
        outs = {}
        bad = (prog.read() or list(inputs))[0] if inputs else None  # the file to spoil
        if run.error in SPARSE_ERRORS:
            bad = next((n for n in prog.read() + list(inputs)
                        if n in inputs and prog.tensors[n].sparse
                        and (run.error.startswith("tns") or prog.tensors[n].order == 2)), None)
            if bad is None:
                raise dtl.DtlError("%s: no sparse input to spoil for %s" % (run.file, run.error))
        for name in list(inputs):
            arr = inputs[name]
            spoiled = name == bad and run.error in ("shape", "dtype")
            if prog.tensors[name].sparse and not spoiled:
                f = self._sparse_input(run, prog.tensors[name], d, inputs, res,
                                       run.error if name == bad else None, name in given)
                cmd += ["--load", "%s=%s" % (name, f)]
                continue
            f = os.path.join(d, "in_%s.npy" % name)
            if run.error == "shape" and name == bad:
                arr = np.zeros(tuple(s + 1 for s in arr.shape) or (2,), arr.dtype)
            if run.error == "dtype" and name == bad:
                arr = arr.astype(np.int16)
            np.save(f, np.array(arr, order="C"))  # ascontiguousarray would make 0-d 1-d
            cmd += ["--load", "%s=%s" % (name, f)]
        for name in prog.tensors:
            outs[name] = os.path.join(d, "out_%s.npy" % name)
            cmd += ["--save", "%s=%s" % (name, outs[name])]
        temp = None
        if run.error in TEMP_ERRORS:
            temp = next(iter(prog.temps))
            tf = os.path.join(d, "temp_%s.npy" % temp)
            if run.error == "load-temp":
                np.save(tf, np.zeros(prog.shape(temp, values), prog.temps[temp].dtype))
                cmd += ["--load", "%s=%s" % (temp, tf)]
            else:
                cmd += ["--save", "%s=%s" % (temp, tf)]
        cmd += list(run.args)
        if run.monitor:
            cmd.append("--monitor")
        if run.validate:
            cmd.append("--validate")
        if run.error == "option":
            cmd.append("--no-such-option")
        res.details.append("run:     " + shlex.join((["env"] + ["%s=%s" % kv for kv in sorted(run.run_env.items())]
                                                     if run.run_env else []) + cmd))
        rc, out = self.execute(cmd, d, self.timeout, run.run_env)
        if rc is None:
            res.reason = "timed out after %d s (a hang?)" % self.timeout
            res.details.append(tail(out))
            return
        if run.error:
            if any(p in out for p in MPIRUN_STARTUP_FAILURES):
                res.reason = "mpirun itself failed to start the job, so the expected failure is untested"
                res.details.append(tail(out))
            elif rc == 0:
                res.reason = "expected a clean failure (%s), but the run exited 0" % run.error
                res.details.append(tail(out))
            else:
                msgs = program_lines(out)
                repeated = sorted({l for l in msgs if msgs.count(l) > 1})
                if not msgs and os.path.basename(exe) not in out:
                    res.reason = "failed (exit %d) as expected, but printed no message" % rc
                    res.details.append(tail(out))
                elif repeated and run.nranks > 1:
                    res.reason = "the message is printed by several ranks, not once by rank 0: %r" % repeated[0]
                    res.details.append(tail(out))
                elif temp and rc != 2:
                    res.reason = "failed as expected, but with exit status %d, not 2" % rc
                    res.details.append(tail(out))
                elif temp and not any(temp in l for l in msgs):
                    res.reason = "failed as expected, but the message does not name the temporary %s" % temp
                    res.details.append(tail(out))
                elif run.error == "save-temp" and os.path.exists(tf):
                    res.reason = "failed as expected, but wrote the temporary's file"
                elif temp and not self._help_lists(exe, d, prog, res):
                    pass
                else:
                    res.ok = True
                    if self.verbose:
                        res.details.append(tail("\n".join(msgs), 3))
            return
        if rc != 0:
            res.reason = "exit status %d" % rc + (" with --validate" if run.validate else "")
            res.details.append(tail(out))
            return
        with np.errstate(over="ignore", invalid="ignore"):
            outcome = dtl.execute(prog, values, inputs)
        want, mags = outcome.values, outcome.mags
        errs = []
        e = check_iterations(prog, outcome, out, run.monitor)
        if e:
            errs.append(e)
        written = set(prog.written())
        for name, t in prog.tensors.items():
            if not os.path.isfile(outs[name]):
                errs.append("%s: --save wrote no file" % name)
                continue
            try:
                got = np.load(outs[name])
            except Exception as e:
                errs.append("%s: cannot read the saved file: %s" % (name, e))
                continue
            if name in written and run.norm_tol is not None and not np.issubdtype(t.dtype, np.integer):
                e = compare_norm(t, got, want[name], run.norm_tol)
            elif name in written:
                e = dtl.compare(t, got, want[name], mags[name], exact=run.exact)
            else:
                e = dtl.compare(t, got, inputs[name], np.zeros(np.shape(inputs[name])))
                if e:
                    e = "input modified by the run: " + e
            if e:
                errs.append(e)
        if errs:
            res.reason = "wrong result: " + errs[0]
            res.details.extend(errs[1:])
            res.details.extend("the oracle's loop condition was borderline: " + b for b in outcome.borderline[:3])
            res.details.append(tail(out))
            return
        res.ok = True

    def _sparse_input(self, run, t, d, inputs, res, spoil, given=False):
        """Write random sparse data for t (a file form chosen at random, or the one that
        spoil, a SPARSE_ERRORS kind, needs, then spoiled); inputs[t.name] becomes the
        dense array the file means.  given: write inputs[t.name] itself instead (the
        nonzeros of the array given by the run's inputs function).  Returns the file's path."""
        rng = np.random.default_rng([run.seed(), zlib.crc32(t.name.encode())])
        form = None if spoil is None else spoil.split("-")[0]
        shape = np.shape(inputs[t.name])
        if given:
            path, dense, desc, lines = sparse.write_given(os.path.join(d, "in_%s" % t.name),
                                                          inputs[t.name], rng, form)
        else:
            path, dense, desc, lines = sparse.write_input(os.path.join(d, "in_%s" % t.name), shape,
                                                          t.dtype, rng, form)
        inputs[t.name] = dense
        res.details.append("input:   %s: %s (%s)" % (t.name, os.path.basename(path), desc))
        if spoil == "mtx-shape":
            k = next(n for n, l in enumerate(lines) if n and not l.startswith("%"))
            lines[k] = "%d %d %d" % (shape[0] + 1, shape[1], len(lines) - k - 1)
        elif spoil == "tns-range":
            lines.append(" ".join(str(n + 1) for n in (shape[0],) + (0,) * (len(shape) - 1)) + " 1")
        elif spoil == "mtx-syntax":
            k = next(n for n, l in enumerate(lines) if n and not l.startswith("%"))
            lines[k] = "%d %d %d" % (shape[0], shape[1], len(lines) - k)
            lines.append("1 one")
        if spoil:
            sparse.save(path, lines, dense)
        return path

    def _help_lists(self, exe, d, prog, res):
        """--help lists the tensors --load and --save take: every tensor, no temporary"""
        rc, out = self.execute([MPIRUN, "-np", "1", exe, "--help"], d, self.timeout, None)
        line = [l for l in (out or "").splitlines() if l.startswith("tensors:")]
        listed = line[0].split()[1:] if line else []
        if rc != 0 or sorted(listed) != sorted(prog.tensors):
            res.reason = "--help lists the tensors %r, expected %r (the temporaries %r not among them)" % (
                listed, sorted(prog.tensors), sorted(prog.temps))
            res.details.append(tail(out or ""))
            return False
        return True

    def _compile_fail(self, run, res):
        """distalc must reject the program: exit status 1, an error located as
        FILE:LINE:COL (on one of run.compile_error's lines, if any are given), and
        no output file."""
        with self.lock:
            self.counter += 1
            d = os.path.join(self.workdir, "reject%d" % self.counter)
        os.makedirs(d)
        path = run.path
        if run.source is not None:
            path = os.path.join(d, os.path.basename(run.file))
            with open(path, "w") as f:
                f.write(run.source)
        outdir = os.path.join(d, "out")
        os.makedirs(outdir)
        cmd = [DISTALC, path, "-o", os.path.join(outdir, "prog")] + list(run.compile_args)
        res.details.append("compile: " + shlex.join(cmd))
        rc, out = self.execute(cmd, d, COMPILE_TIMEOUT)
        m = re.search(r"^(.*):(\d+):(\d+): error: (.+)$", out, re.M)
        if rc is None:
            res.reason = "distalc timed out after %d s" % COMPILE_TIMEOUT
        elif rc != 1:
            res.reason = "expected distalc to reject the program (exit status 1), got %d" % rc
        elif not m:
            res.reason = "distalc exited 1 without a located error (FILE:LINE:COL: error: ...)"
        elif run.compile_error and int(m.group(2)) not in run.compile_error:
            res.reason = "the error is on line %s, expected %s" % (
                m.group(2), " or ".join(map(str, run.compile_error)))
        elif os.listdir(outdir):
            res.reason = "distalc failed but wrote %s" % ", ".join(sorted(os.listdir(outdir)))
        else:
            # the stages printed before code (--emit cin, --emit schedule) reject it too, with
            # the same error and nothing on standard output
            for stage in ("cin", "schedule"):
                cmd2 = [DISTALC, path, "--emit", stage] + [a for a in run.compile_args if a != "--exe"]
                try:
                    p2 = subprocess.run(cmd2, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        universal_newlines=True, timeout=COMPILE_TIMEOUT)
                    rc2, out2, err2 = p2.returncode, p2.stdout, p2.stderr
                except subprocess.TimeoutExpired:
                    rc2, out2, err2 = None, "", "timed out"
                if rc2 != 1 or out2 or m.group(0) not in err2:
                    res.reason = "%s: exit status %s, %d bytes on standard output, %s" % (
                        shlex.join(cmd2), rc2, len(out2), "the same error" if m.group(0) in err2 else "not the same error")
                    res.details.append(tail(err2 + out2))
                    break
            else:
                res.ok = True
                if self.verbose:
                    res.details.append(tail(out, 3))
                return
        res.details.append(tail(out))

    def _run_fill(self, run, res, prog, exe, params, d):
        """--fill random --seed S at several rank counts: every run must see the same
        inputs (they depend on global coordinates only) and compute the oracle's result
        from them."""
        written = set(prog.written())
        first = None
        for p in run.fill_ranks:
            fit = grid_fit(prog, p, params)
            if fit is None:
                raise dtl.DtlError("%d ranks do not fit the machine of %s" % (p, run.file))
            explicit, gvals = fit
            values = dict(params)
            values.update(gvals)
            pd = os.path.join(d, "np%d" % p)
            os.makedirs(pd)
            cmd = [MPIRUN, "-np", str(p), "--oversubscribe", exe]
            pp = dict(run.params)
            pp.update(explicit)
            for k, v in pp.items():
                cmd += param_args(k, v, 0)
            cmd += ["--fill", "random", "--seed", str(run.seed() % 1000 + 1)] + list(run.fill_args)
            outs = {name: os.path.join(pd, "out_%s.npy" % name) for name in prog.tensors}
            for name, f in outs.items():
                cmd += ["--save", "%s=%s" % (name, f)]
            res.details.append("run:     " + shlex.join(cmd))
            rc, out = self.execute(cmd, pd, self.timeout)
            if rc != 0:
                res.reason = ("np=%d: " % p) + ("timed out after %d s" % self.timeout if rc is None
                                                  else "exit status %d" % rc)
                res.details.append(tail(out))
                return
            got = {}
            for name, f in outs.items():
                if not os.path.isfile(f):
                    res.reason = "np=%d: --save %s wrote no file" % (p, name)
                    return
                got[name] = np.load(f)
            inputs = {k: v for k, v in got.items() if k not in written}
            for k, v in inputs.items():
                if not np.all(np.isfinite(v.astype(np.float64))):
                    res.reason = "np=%d: --fill random produced non-finite values in %s" % (p, k)
                    return
            e = fill_density(prog, inputs, run.fill_args)
            if e:
                res.reason = "np=%d: %s" % (p, e)
                return
            if first is None:
                first = inputs
            else:
                for k in inputs:
                    if not np.array_equal(first[k], inputs[k]):
                        res.reason = ("--fill random --seed gives %s different values at np=%d "
                                      "than at np=%d" % (k, p, run.fill_ranks[0]))
                        return
            outcome = dtl.execute(prog, values, inputs)
            want, mags = outcome.values, outcome.mags
            for name in [None] + sorted(written):
                e = (check_iterations(prog, outcome, out) if name is None
                     else dtl.compare(prog.tensors[name], got[name], want[name], mags[name]))
                if e:
                    res.reason = "np=%d: wrong result: %s" % (p, e)
                    res.details.append(tail(out))
                    return
        res.ok = True

    def report(self, res):
        with self.lock:
            if res.ok:
                self.passed += 1
                print("PASS  %s  (%.1f s)" % (res.run.id, res.seconds))
                if self.verbose:
                    for line in res.details:
                        print("      " + line.replace("\n", "\n      "))
            else:
                self.failed += 1
                print("FAIL  %s: %s" % (res.run.id, res.reason))
                for line in res.details:
                    print("      " + line.replace("\n", "\n      "))
                if self.reproduce:
                    print("      reproduce: " + self.reproduce(res.run))
            sys.stdout.flush()

    def run_all(self, runs):
        with ThreadPoolExecutor(max_workers=max(1, self.jobs)) as pool:
            return list(pool.map(self.run_one, runs))


def cuda_rejected(runs):
    """For --target cuda: the runs of programs with sparse tensors or precompute replaced
    by one check per program that distalc rejects it for that target."""
    out, seen = [], set()
    for r in runs:
        if r.compile_error is None and (r.source is not None or os.path.isfile(r.path)):
            prog = (dtl.parse(r.source, r.file) if r.source is not None
                    else dtl.parse_file(r.path))
            if prog.cpu_only():
                key = (r.path, r.source)
                if key not in seen:
                    seen.add(key)
                    out.append(Run(r.suite, r.file, None, compile_error=[],
                                   compile_args=["--target", "cuda"], source=r.source,
                                   label=r.label if r.source is not None else ""))
                continue
        out.append(r)
    ids = set()
    return [r for r in out if not (r.id in ids or ids.add(r.id))]


def fill_density(prog, inputs, fill_args):
    """For --fill random: the share of nonzeros of every sparse input must be near the
    --density asked for (default 0.1), where the tensor is large enough to tell.
    Returns None or a message."""
    args = list(fill_args)
    density = float(args[args.index("--density") + 1]) if "--density" in args else 0.1
    for name, v in inputs.items():
        t = prog.tensors[name]
        if v.size == 0:
            continue
        share = np.count_nonzero(v) / v.size
        if t.sparse and v.size * density >= 40 and not density / 2 <= share <= density * 2:
            return ("--fill random with density %g gives %s %.3f of its elements nonzero"
                    % (density, name, share))
    return None


def compare_norm(tensor, got, want, tol):
    """got against the oracle's want, norm-wise: every element within tol times the largest
    |element| of want (and finite where want is).  Returns None or a message."""
    got = np.asarray(got)
    if got.dtype != tensor.dtype or got.shape != want.shape:
        return "%s: %s %s, expected %s %s" % (tensor.name, got.dtype, got.shape, want.dtype, want.shape)
    g, w = got.astype(np.float64), want.astype(np.float64)
    bound = tol * max(float(np.max(np.abs(w))) if w.size else 0.0, 1e-300)
    with np.errstate(invalid="ignore"):
        bad = ~(np.abs(g - w) <= bound)
    if not bad.any():
        return None
    idx = tuple(int(x) for x in np.argwhere(bad)[0]) if got.ndim else ()
    return "%s: %d of %d elements differ by more than %.3g; first at %s: got %r, expected %r" % (
        tensor.name, int(np.count_nonzero(bad)), max(1, w.size), bound, list(idx), got[idx].item(),
        want[idx].item())


def check_iterations(prog, outcome, out, monitor=None):
    """A program with loops prints iterations=K in its summary line (rank 0, one line per
    run; "iterations": K with --json): K must be the oracle's iteration count; a program
    without loops prints none.  The lines `monitor: loop L iteration K: NAME=VALUE ...` must
    be the oracle's (those of every repetition of the run), values within the tolerance of
    the results' comparison, or where the oracle's magnitudes overflow (iterative methods that
    divide by their own reductions), within 1e-5 of the largest value of that scalar in that
    loop.  monitor: True when the run passed --monitor (lines are then required), False when
    it did not (lines are then an error), None: not known.  Returns None or a message."""
    got = re.findall(r"\biterations[\"=: ]+(\d+)", out)
    mon = [l for l in program_lines(out) if l.startswith("monitor:")]
    if not prog.has_loops():
        if got or mon:
            return "a program without loops printed %r" % (got[0] if got else mon[0])
        return None
    if not got:
        return "a program with loops, but the run printed no iterations=K"
    if any(int(k) != outcome.iterations for k in got):
        return "iterations=%s, the oracle's loops ran %d iterations (each loop: %s)" % (
            got[-1], outcome.iterations,
            ", ".join("loop %d: %s" % kv for kv in sorted(outcome.loop_iterations.items())))
    if monitor is False and mon:
        return "monitor lines without --monitor: %r" % mon[0]
    if not mon and not (monitor and outcome.monitor):
        return None
    want = [dtl.monitor_line(r) for r in outcome.monitor]
    if len(mon) % max(1, len(want)) or (mon and not want) or (want and not mon):
        return "%d monitor lines, the oracle's loops make %d%s" % (
            len(mon), len(want), " (first: %r)" % want[0] if want else "")
    scale = {}
    for number, _, pairs in outcome.monitor:
        for name, v in pairs:
            scale[number, name] = max(scale.get((number, name), 0.0), abs(float(v)))
    for n, line in enumerate(mon):
        w = want[n % len(want)]
        if line.split(":")[:2] != w.split(":")[:2] or re.findall(r"(\w+)=", line) != re.findall(r"(\w+)=", w):
            return "monitor line %r, expected %r" % (line, w)
        try:
            gv = [float(x) for x in re.findall(r"=(\S+)", line)]
        except ValueError:
            return "monitor line %r: a value is no number" % line
        rec, rmags = outcome.monitor[n % len(want)], outcome.monitor_mags[n % len(want)]
        for (name, b), a, m in zip(rec[2], gv, rmags):
            # %.6e keeps 7 digits; a floating value may differ by the results' tolerance (which
            # grows with the magnitudes the oracle tracked through the loops: rounding in float
            # compounds from one iteration to the next, as for the saved results)
            slack = dtl.RTOL[prog.decl(name).type] * m
            if not math.isfinite(slack):
                slack = 1e-5 * scale[rec[0], name]
            if not abs(a - b) <= 1e-6 * abs(b) + slack + 1e-300:
                return "monitor line %r: %s=%r, the oracle's %r" % (line, name, a, b)
    return None




def program_lines(out):
    """The lines of a run's output that are not inside mpirun's own notices (the blocks
    between lines of dashes)."""
    lines, inside = [], False
    for l in out.splitlines():
        if l.startswith("-----"):
            inside = not inside
            continue
        if not inside and l.strip():
            lines.append(l.strip())
    return lines


def tail(text, n=25):
    lines = text.rstrip().splitlines()
    if len(lines) > n:
        lines = ["[... %d lines]" % (len(lines) - n)] + lines[-n:]
    return "\n".join("| " + l for l in lines) if lines else "| (no output)"


def distalc_missing():
    """A message when there is no distalc to test (the suites then fail, not skip)."""
    if os.path.isfile(DISTALC) and os.access(DISTALC, os.X_OK):
        return None
    return "distalc not found at %s (build it, or set DISTALC)" % DISTALC


def make_workdir(keep):
    d = tempfile.mkdtemp(prefix="distal-e2e-")
    if keep:
        print("keeping the work directory %s" % d)
    return d


def main(argv=None):
    import cases

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--suite", choices=["examples", "programs", "all", "gpu"], default="all",
                    help="all: examples and programs; gpu: gpu machines (with --target cuda)")
    ap.add_argument("--long", action="store_true", help="many more cases")
    ap.add_argument("-j", "--jobs", type=int, default=int(os.environ.get("E2E_JOBS", "2")))
    ap.add_argument("--only", action="append", default=[],
                    help="run only the cases whose id contains this text (repeatable)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--timeout", type=int, default=RUN_TIMEOUT, help="seconds per run")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--target", choices=["cpu", "cuda"], default=None)
    ap.add_argument("--max-ranks", type=int, default=None, help="drop runs with more ranks")
    args = ap.parse_args(argv)
    setup_environment()
    if args.target:
        TARGET_ARGS[:] = ["--target", args.target]

    runs = []
    if args.suite in ("examples", "all"):
        runs += cases.examples(args.long)
    if args.suite in ("programs", "all"):
        runs += cases.programs(args.long)
    if args.suite == "gpu":
        runs += cases.gpu(args.long)
    if args.target == "cuda":
        runs = cuda_rejected(runs)
    if args.only:
        runs = [r for r in runs if any(o == r.id or o in r.id for o in args.only)]
    if args.max_ranks:
        runs = [r for r in runs if (r.nranks or max(r.fill_ranks or [0])) <= args.max_ranks]
    if args.list:
        for r in runs:
            print(r.id)
        return 0
    if not runs:
        print("no cases selected")
        print("0 passed, 1 failed")
        return 1

    def reproduce(run):
        return "%s %s --suite %s --only %s --keep%s" % (
            PYTHON, os.path.join(TOP_SRCDIR, "tests", "e2e", "run_e2e.py"), run.suite,
            shlex.quote(run.id), " --target %s" % args.target if args.target else "")

    missing = distalc_missing()
    if missing:
        print("FAIL  all %d runs: %s" % (len(runs), missing))
        print("0 passed, %d failed" % len(runs))
        return 1
    workdir = make_workdir(args.keep)
    print("distalc: %s\nmpirun: %s\n%d runs, %d at a time" % (DISTALC, MPIRUN, len(runs), args.jobs))
    t0 = time.time()
    try:
        r = Runner(workdir, timeout=args.timeout, jobs=args.jobs, reproduce=reproduce,
                   verbose=args.verbose)
        r.run_all(runs)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print("(%.0f s)" % (time.time() - t0))
    print("%d passed, %d failed" % (r.passed, r.failed))
    return 1 if r.failed else 0


if __name__ == "__main__":
    sys.exit(main())
