"""blas_env.py -- the OpenBLAS kernels of a benchmark's programs.  A generated executable picks
OpenBLAS's kernels for the CPU itself where OpenBLAS fell back to Prescott's (dtl_blas_core,
README "Running on a cluster"); the reference programs (dgemm_ref, mttkrp_ref, pdgemm, PETSc)
do not, so a benchmark sets OPENBLAS_CORETYPE for all of them to what the generated one ran
with, and every program of one run uses the same kernels."""
import os
import re
import subprocess


def openblas_core(exe):
    """The OpenBLAS kernels that the generated executable exe chose for itself when it ran again
    with OPENBLAS_CORETYPE set (None where it ran once: OpenBLAS's own choice stands, or
    OPENBLAS_CORETYPE is set already)."""
    if os.environ.get("OPENBLAS_CORETYPE") is not None:
        return None
    try:
        p = subprocess.run([exe, "--help"], env=dict(os.environ, OPENBLAS_VERBOSE="2"), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    names = re.findall(r"Core: ([A-Za-z0-9]+)", p.stdout)
    return names[-1] if len(names) > 1 else None


def set_openblas_core(exe, log=None):
    """Export (os.environ) the kernels exe chose for itself, so that every program started after
    runs with them; returns the name or None."""
    core = openblas_core(exe)
    if core:
        os.environ["OPENBLAS_CORETYPE"] = core
        if log:
            log("OpenBLAS fell back to Prescott's kernels on this CPU: every program runs with "
                "OPENBLAS_CORETYPE=%s, as the generated executables set it for themselves" % core)
    return core
