"""What the Python tests of tests/app share: PASS/FAIL lines with a count, and commands (an
mpirun above all) run with their own TMPDIR, once more where mpirun could not start the job."""
import os
import shutil
import subprocess
import tempfile

# Output of an mpirun that could not start the job at all (not the program's doing).
STARTUP_FAILURES = ("orte_init failed", "ORTE_ERROR_LOG", "unable to create the desired directory")


class Tally:
    """PASS and FAIL lines, counted; a failure shows the end of the output behind it."""

    def __init__(self):
        self.checks = self.fails = 0

    def ok(self, msg):
        self.checks += 1
        print("PASS " + msg)

    def bad(self, msg, out=""):
        self.checks += 1
        self.fails += 1
        print("FAIL " + msg)
        for line in out.strip().splitlines()[-15:]:
            print("    | " + line)


def run_cmd(cmd, cwd, timeout, env=None):
    """(returncode, stdout and stderr) of cmd in cwd; returncode None after the timeout.  Each
    launch gets its own TMPDIR (Open MPI's session directories of concurrent launches race in a
    shared one), and a launch that mpirun itself could not start is tried once more."""
    for attempt in range(2):
        tmp = tempfile.mkdtemp(dir=cwd, prefix=".mpirun-")
        try:
            p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout,
                               universal_newlines=True, env=dict(os.environ, TMPDIR=tmp, **(env or {})))
            rc, out = p.returncode, p.stdout
        except subprocess.TimeoutExpired as e:
            rc, out = None, (e.output or b"").decode(errors="replace") if isinstance(e.output, bytes) else (e.output or "")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        if not any(f in out for f in STARTUP_FAILURES):
            break
    return rc, out
