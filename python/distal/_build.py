"""compile(): a .dtl program to a loaded shared library, cached.

distalc writes the library form (PREFIX.c, PREFIX.h) and, with --emit api, the description
of its interface (api.json); the MPI compiler wrapper builds libPREFIX.so from them.  The
result lives in a folder of the cache named by a hash of everything that went into it: the
program's text, the prefix, distalc's options, distalc itself, the compiler and its flags.
"""

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import tempfile

from ._plan import Library

# Options that choose what distalc writes: compile() decides those.
_OWN_OPTIONS = ("-o", "--name", "--emit", "--main", "--exe", "--slurm", "--check", "--calibrate", "--target")

# What ctypes cannot do with a dtl_sparse (a C struct of the runtime) by itself: allocate one,
# free it, and read its entries.  Compiled into the libraries of programs with sparse tensors.
_SPARSE_SHIM = r"""
#include <stdlib.h>
#include <distal/runtime.h>
dtl_sparse *dtl_py_sparse_new(void) { return calloc(1, sizeof(dtl_sparse)); }
void dtl_py_sparse_delete(dtl_sparse *s) {
  if (s) dtl_sparse_free(s);
  free(s);
}
int64_t dtl_py_sparse_nvals(const dtl_sparse *s) { return dtl_sparse_nvals(s); }
int dtl_py_sparse_entries(const dtl_sparse *s, int64_t *n, int64_t **coords, void **vals) {
  return dtl_sparse_extract(s, &s->box, n, coords, vals);
}
void dtl_py_free(void *p) { free(p); }
"""


class CompileError(RuntimeError):
    """distalc or the C compiler refused the program; the message holds what they said."""


class _DefaultComm:
    pass


_WORLD = _DefaultComm()


def _config():
    try:
        from . import _config as cfg  # written by make install
    except ImportError:
        return None
    return cfg


def _tools():
    """distalc, the MPI compiler wrapper and the flags that find libdistal: the environment
    first (DISTALC, MPICC, DISTAL_CFLAGS, DISTAL_LIBS, as distalc --exe reads them), then
    the installation this package belongs to, then PATH and pkg-config."""
    cfg = _config()
    distalc = os.environ.get("DISTALC")
    if not distalc and cfg and os.path.exists(cfg.DISTALC):
        distalc = cfg.DISTALC
    distalc = distalc or shutil.which("distalc")
    if not distalc:
        raise CompileError("distalc not found: set DISTALC or put distalc on PATH")
    mpicc = os.environ.get("MPICC") or (cfg.MPICC if cfg else "") or "mpicc"
    cflags, libs = os.environ.get("DISTAL_CFLAGS"), os.environ.get("DISTAL_LIBS")
    if cfg and (cflags is None or libs is None):
        if cflags is None:
            cflags = "-I" + shlex.quote(cfg.INCLUDEDIR)
        if libs is None:
            d = shlex.quote(cfg.LIBDIR)
            libs = f"-L{d} -Wl,-rpath,{d} -ldistal {cfg.BLAS_LIBS} -lm"
    if cflags is None:
        cflags = _pkg_config("--cflags")
    if libs is None:
        libs = _pkg_config("--libs")
    return distalc, mpicc, cflags, libs


def _pkg_config(what):
    try:
        r = subprocess.run(["pkg-config", what, "distal"], capture_output=True, text=True)
    except OSError as e:
        raise CompileError(f"cannot find libdistal: set DISTAL_CFLAGS and DISTAL_LIBS ({e})") from None
    if r.returncode:
        raise CompileError("cannot find libdistal: set DISTAL_CFLAGS and DISTAL_LIBS, or make "
                           f"distal.pc visible to pkg-config ({r.stderr.strip()})")
    return r.stdout.strip()


def _cache_root(cache_dir):
    if cache_dir:
        return os.fspath(cache_dir)
    if os.environ.get("DISTAL_CACHE_DIR"):
        return os.environ["DISTAL_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "distal")


def _run(cmd, what):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        raise CompileError(f"{what}: cannot run {cmd[0]}: {e}") from None
    if r.returncode:
        msg = (r.stderr or r.stdout).strip()
        raise CompileError(f"{what} failed (exit {r.returncode}):\n{msg}")
    return r.stdout


def _check_options(options):
    options = [str(o) for o in options]
    for o in options:
        if o.split("=", 1)[0] in _OWN_OPTIONS:
            raise ValueError(f"distal.compile: {o} is not an option here (name= gives the prefix; "
                             "the library form for the CPU target is what compile builds)")
    return options


def _key(text, name, options, tools):
    distalc = tools[0]
    st = os.stat(distalc)
    h = hashlib.sha256()
    for part in (text, name, "\0".join(options), os.path.realpath(distalc), st.st_size, st.st_mtime_ns,
                 *tools[1:], _SPARSE_SHIM):
        h.update(str(part).encode() if not isinstance(part, bytes) else part)
        h.update(b"\0")
    return h.hexdigest()[:32]


def _build(source, name, options, cache_dir):
    """Build (or find in the cache) the library of source; returns its folder."""
    with open(source, "rb") as f:
        text = f.read()
    tools = _tools()
    distalc, mpicc, cflags, libs = tools
    root = _cache_root(cache_dir)
    final = os.path.join(root, _key(text, name, options, tools))
    if os.path.exists(os.path.join(final, "api.json")):
        return final
    os.makedirs(root, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="build-", dir=root)
    try:
        api_text = _run([distalc, source, "--name", name, "--emit", "api", *options], "distalc")
        try:
            api = json.loads(api_text)
        except ValueError as e:
            raise CompileError(f"{distalc} --emit api printed no JSON ({e}): is it distalc {distalc}?") from None
        if api.get("target") != "cpu":
            raise CompileError(f"{source}: a program for the {api.get('target')} target; the Python "
                               "package binds the CPU target only")
        base = os.path.join(tmp, name)
        _run([distalc, source, "-o", base, "--name", name, *options], "distalc")
        sources = [base + ".c"]
        if api.get("sparse"):
            with open(os.path.join(tmp, "sparse_shim.c"), "w") as f:
                f.write(_SPARSE_SHIM)
            sources.append(os.path.join(tmp, "sparse_shim.c"))
        _run([mpicc, "-shared", "-fPIC", "-O2", "-o", os.path.join(tmp, f"lib{name}.so"), *sources,
              "-I" + tmp, *shlex.split(cflags), *shlex.split(libs)], mpicc)
        with open(os.path.join(tmp, "api.json"), "w") as f:
            f.write(api_text)
        try:
            os.rename(tmp, final)
        except OSError:
            if not os.path.exists(os.path.join(final, "api.json")):  # not another process's copy
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def compile(source, name=None, options=(), comm=_WORLD, cache_dir=None):
    """Compile the .dtl file source to a shared library and load it (a Library).

    name: the prefix of the generated API (default: the file stem).  options: more distalc
    options (["--auto"], ["--debug"], ...).  Collective over comm (default MPI.COMM_WORLD):
    its rank 0 builds, the others wait and load the result; comm=None builds in the calling
    process alone.  Results are cached under cache_dir (default $DISTAL_CACHE_DIR, else
    ~/.cache/distal) by a hash of the program's text, the options, distalc and the compiler
    flags.  Raises CompileError with distalc's or the compiler's message.
    """
    source = os.fspath(source)
    if name is None:
        name = os.path.splitext(os.path.basename(source))[0]
    options = _check_options(options)
    if comm is _WORLD:
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
    if comm is None:
        return Library(_build(source, name, options, cache_dir))
    result = None
    if comm.Get_rank() == 0:
        try:
            result = (None, None, _build(source, name, options, cache_dir))
        except Exception as e:  # every rank raises it: its class and message travel
            result = (type(e), str(e), None)
    cls, msg, folder = comm.bcast(result, root=0)
    if cls is not None:
        try:
            err = cls(msg)
        except Exception:
            err = CompileError(msg)
        raise err
    if not os.path.exists(os.path.join(folder, "api.json")):  # a cache that rank 0 alone sees
        folder = _build(source, name, options, cache_dir)
    return Library(folder)
