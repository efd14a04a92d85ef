#!/bin/bash
# Slurm end-to-end test: a real one-node Slurm cluster (scripts/slurm-up.sh) runs the
# job script that `distalc --slurm` writes for examples/summa.dtl, launched with
# srun --mpi=pmix (the default) and with mpirun (DISTAL_LAUNCHER=mpirun), 4 ranks on
# this machine's cores, and rejects an impossible request at submission
# (EnforcePartLimits=ALL); slurm-up.sh moves to other ports when a daemon's port is
# taken. Exit 77 (skip) only when the Slurm packages are missing.
# Environment (set by make check): DISTALC, DISTAL_CFLAGS, DISTAL_LIBS, top_srcdir.
set -u
export PATH="$PATH:/usr/sbin:/sbin"

missing=
for p in slurmctld slurmd sbatch srun sinfo squeue scancel munged mungekey; do
  command -v "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "SKIP: Slurm is not installed (missing:$missing); install slurmctld slurmd slurm-client munge (scripts/install-deps.sh)"
  exit 77
fi

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
DISTALC=${DISTALC:-${top_builddir:-$PWD}/distalc}
case $DISTALC in /*) ;; */*) DISTALC=$PWD/$DISTALC ;; esac
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1} OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

# no job environment from outside may leak into our submissions
for v in $(compgen -e); do
  case $v in SLURM_*|SBATCH_*|SALLOC_*|SRUN_*|DISTAL_LAUNCHER|DISTAL_PROGRAM) unset "$v" ;; esac
done

fail() { echo "FAIL: $*"; exit 1; }
t_start=$(date +%s.%N)
elapsed() { awk "BEGIN {printf \"%.1f\", $(date +%s.%N) - $t_start}"; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/distal-slurm-test.XXXXXX") || fail "mktemp"
chmod 755 "$tmp"   # munged wants every directory above its socket searchable by all
cluster=$tmp/cluster
work=$tmp/work
bg=
cleanup() {
  [ -z "$bg" ] || kill "$bg" 2>/dev/null
  "$top_srcdir/scripts/slurm-down.sh" "$cluster" || true
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
mkdir -p "$work"

show_logs() {
  for f in "$cluster"/log/*.log; do
    [ -f "$f" ] && { echo "---- tail $f"; tail -n 15 "$f"; }
  done
}

# ---- the cluster
exports=$("$top_srcdir/scripts/slurm-up.sh" "$cluster") || { show_logs; fail "slurm-up.sh"; }
eval "$exports"
[ -n "${SLURM_CONF:-}" ] || fail "slurm-up.sh printed no SLURM_CONF"
echo "cluster up after $(elapsed) s: $SLURM_CONF"
sinfo

# ---- the program and its job script
cd "$work" || fail "cd $work"
cp "$top_srcdir/examples/summa.dtl" . || fail "copy summa.dtl"
"$DISTALC" summa.dtl --exe -o summa || fail "distalc --exe"
"$DISTALC" summa.dtl --slurm -o job.sh || fail "distalc --slurm"
[ -f job.sh ] || fail "distalc --slurm wrote no job.sh"
head -n 1 job.sh | grep -qx '#!/bin/bash' || fail "job.sh does not start with #!/bin/bash"
grep -q '^#SBATCH ' job.sh || fail "job.sh has no #SBATCH line"
echo "---- job.sh"; cat job.sh; echo "----"
echo "built after $(elapsed) s"

# ---- two submissions: srun --mpi=pmix (default) and mpirun
check_out() { # LAUNCHER FILE RC
  echo "---- $1: sbatch exit $3, $2:"
  cat "$2" 2>/dev/null
  [ "$3" = 0 ] || { show_logs; fail "$1: sbatch -n 4 --wait exited $3"; }
  grep -q 'ranks=4' "$2" || { show_logs; fail "$1: no 'ranks=4' in $2"; }
  grep -Eq '^validate A: .* ok$' "$2" || { show_logs; fail "$1: no 'validate A: ... ok' in $2"; }
}
# Which launcher really ran: mpirun prints its job map (the variable means nothing
# to srun), and slurmd logs the launch of the job step that srun makes.
export OMPI_MCA_rmaps_base_display_map=1
# in the background, so that a signal to this script runs its trap at once
submit() { # sbatch ARGS...: sbatch --wait under a timeout; returns its status
  timeout 180 sbatch "$@" &
  bg=$!
  wait "$bg"
  local rc=$?
  bg=
  return $rc
}
args=(-n 256 --chunk 32 --validate)
submit --parsable -n 4 --wait -o out_srun.txt job.sh "${args[@]}" >id_srun.txt
check_out srun out_srun.txt $?
id=$(head -n 1 id_srun.txt | cut -d';' -f1)
grep -q "launch task StepId=$id\.0 " "$cluster/log/slurmd.log" ||
  { show_logs; fail "srun: slurmd launched no step for job '$id'"; }
! grep -q 'JOB MAP' out_srun.txt || fail "srun: the program was started by mpirun"
echo "srun job $id done after $(elapsed) s"
DISTAL_LAUNCHER=mpirun submit -n 4 --wait -o out_mpirun.txt job.sh "${args[@]}"
check_out mpirun out_mpirun.txt $?
grep -q 'JOB MAP' out_mpirun.txt || fail "mpirun: no job map from mpirun in out_mpirun.txt"
echo "mpirun job done after $(elapsed) s"

# ---- impossible requests fail at submission, leaving no pending job
cpus=$(sinfo -h -o %C | awk -F/ '{print $4}')
for req in "-n $((cpus * 8))" "--nodes=3"; do
  # shellcheck disable=SC2086
  timeout 30 sbatch $req -o out_bad.txt job.sh "${args[@]}" >bad.txt 2>&1
  rc=$?
  cat bad.txt
  if [ "$rc" = 0 ] || [ "$rc" = 124 ]; then
    fail "sbatch $req was not rejected at submission (exit $rc)"
  fi
  grep -q 'error' bad.txt || fail "sbatch $req: no error message"
  pending=$(squeue -h -t PENDING -o %i)
  [ -z "$pending" ] || fail "sbatch $req left pending job(s): $pending"
  echo "sbatch $req rejected (exit $rc)"
done

# ---- tear down; nothing of the cluster may be left running
pids=$(cat "$cluster"/run/*.pid 2>/dev/null | tr -dc '0-9\n')
"$top_srcdir/scripts/slurm-down.sh" "$cluster" || fail "slurm-down.sh"
for pid in $pids; do
  st=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -c1)
  [ -z "$st" ] || [ "$st" = Z ] || fail "daemon $pid still running after slurm-down.sh"
done
[ ! -e "$cluster" ] || fail "slurm-down.sh left $cluster"

# ---- a daemon port taken by another program: slurm-up.sh moves to the next pair
PY=${PYTHON:-python3}
"$PY" -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True); sys.stdout.close(); time.sleep(120)' >"$tmp/taken" &
bg=$!
for _ in $(seq 50); do [ -s "$tmp/taken" ] && break; sleep 0.1; done
taken=$(cat "$tmp/taken")
[ -n "$taken" ] || fail "could not occupy a port"
free=$("$PY" -c '
import random, socket
for _ in range(200):
    p = random.randrange(10000, 30000, 2)
    try:
        for q in (p, p + 1):
            s = socket.socket(); s.bind(("127.0.0.1", q)); s.close()
    except OSError:
        continue
    print(p); break')
[ -n "$free" ] || fail "no free port pair for the retry test"
if SLURM_UP_PORT=$taken "$top_srcdir/scripts/slurm-up.sh" "$cluster" >/dev/null 2>"$tmp/err"; then
  fail "slurm-up.sh came up on the taken port $taken"
fi
cat "$tmp/err"
grep -q "ports taken: $taken" "$tmp/err" || fail "slurm-up.sh: no clear error for the taken port $taken"
"$top_srcdir/scripts/slurm-down.sh" "$cluster" || fail "slurm-down.sh after the taken port"
exports=$(SLURM_UP_PORT="$taken $free" "$top_srcdir/scripts/slurm-up.sh" "$cluster") ||
  { show_logs; fail "slurm-up.sh did not move from the taken port $taken to $free"; }
eval "$exports"
grep -q "^SlurmctldPort=$free\$" "$SLURM_CONF" || fail "slurm-up.sh is not on port $free"
sinfo -h -o %T | grep -qx idle || fail "node not idle after the port retry"
echo "slurm-up.sh moved from the taken port $taken to $free"
"$top_srcdir/scripts/slurm-down.sh" "$cluster" || fail "slurm-down.sh"
kill "$bg" 2>/dev/null; bg=

echo "PASS: slurm (srun --mpi=pmix and mpirun, 4 ranks; a taken port) in $(elapsed) s"
