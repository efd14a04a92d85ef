#!/bin/bash
# Stops the one-node Slurm cluster that scripts/slurm-up.sh started in DIR (default
# /tmp/distal-slurm) and removes DIR. Safe to run twice, and on a half-started cluster.
#
#   scripts/slurm-down.sh [DIR]
#
# Order: cancel the cluster's jobs, stop slurmd, slurmctld and munged by their pid
# files (TERM, then KILL after 10 s), then end any process left that the cluster
# started (slurmstepd and job tasks, found by this cluster's SLURM_CONF in their
# environment, never by name alone), and remove DIR. It removes only a directory
# that slurm-up.sh made.
set -u

DIR=${1:-/tmp/distal-slurm}
case $DIR in /*) ;; *) DIR=$PWD/$DIR ;; esac
CONF=$DIR/etc/slurm.conf

say() { echo "slurm-down: $*" >&2; }

if [ ! -d "$DIR" ]; then
  say "nothing to do: $DIR does not exist"
  exit 0
fi
if [ ! -f "$DIR/.distal-slurm" ]; then
  if [ -z "$(ls -A "$DIR")" ]; then rmdir "$DIR"; exit 0; fi
  say "error: $DIR is not a cluster directory of slurm-up.sh; leaving it alone"
  exit 1
fi

# pid from a pid file if that process is alive and is the named program
alive() { # PIDFILE COMM
  local pid
  [ -r "$1" ] || return 1
  pid=$(tr -dc 0-9 <"$1")
  [ -n "$pid" ] && running "$pid" || return 1
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] || return 1
  echo "$pid"
}

# a live process (not a zombie waiting for init to reap it)
running() { # PID
  local st
  st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "${st%% *}" != Z ]
}

# TERM the pids, wait up to $1 seconds, then KILL what is left
stop_pids() { # SECONDS PID...
  local secs=$1 pid left i
  shift
  [ $# -gt 0 ] || return 0
  kill -TERM "$@" 2>/dev/null
  for ((i = 0; i < secs * 10; i++)); do
    left=
    for pid in "$@"; do running "$pid" && left=1; done
    [ -z "$left" ] && return 0
    sleep 0.1
  done
  kill -KILL "$@" 2>/dev/null
  sleep 0.2
  return 0
}

# 1. cancel the jobs while the controller can still do it
if [ -f "$CONF" ] && alive "$DIR/run/slurmctld.pid" slurmctld >/dev/null; then
  jobs=$(SLURM_CONF=$CONF timeout 10 squeue -h -o %A 2>/dev/null)
  if [ -n "$jobs" ]; then
    # shellcheck disable=SC2086
    SLURM_CONF=$CONF timeout 10 scancel $jobs 2>/dev/null
    for _ in $(seq 100); do
      [ -z "$(SLURM_CONF=$CONF timeout 10 squeue -h -o %A 2>/dev/null)" ] && break
      sleep 0.1
    done
  fi
fi

# 2. the daemons, by pid file, all at once (each takes about 2 s to exit)
pids=() names=()
for d in slurmd slurmctld munged; do
  if pid=$(alive "$DIR/run/$d.pid" "$d"); then pids+=("$pid"); names+=("$d ($pid)"); fi
done
if [ ${#pids[@]} -gt 0 ]; then
  stop_pids 10 "${pids[@]}"
  say "stopped ${names[*]}"
fi

# 3. anything the cluster started that outlived it: its slurmstepd processes and job
#    tasks, known by this cluster's SLURM_CONF in their environment (slurmstepd, or
#    with a SLURM_JOB_ID); never this script or its callers
protect=" "
p=$$
while [ -n "$p" ] && [ "$p" != 0 ] && [ "$p" != 1 ]; do
  protect="$protect$p "
  p=$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null)
done
strays=()
for e in /proc/[0-9]*/environ; do
  pid=${e#/proc/}; pid=${pid%/environ}
  case $protect in *" $pid "*) continue ;; esac
  env=$(tr '\0' '\n' 2>/dev/null <"$e") || continue
  grep -qxF "SLURM_CONF=$CONF" <<<"$env" || continue
  if grep -q '^SLURM_JOB_ID=' <<<"$env" || [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = slurmstepd ]; then
    strays+=("$pid")
  fi
done
if [ ${#strays[@]} -gt 0 ]; then
  stop_pids 2 "${strays[@]}"
  say "stopped ${#strays[@]} leftover job process(es): ${strays[*]}"
fi

rm -rf "$DIR"
say "removed $DIR"
exit 0
