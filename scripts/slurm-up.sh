#!/bin/bash
# Brings up a private one-node Slurm cluster (munged + slurmctld + slurmd) on this
# machine, from nothing, for tests and for trying distalc --slurm job scripts.
#
#   eval "$(scripts/slurm-up.sh [DIR])"     # default DIR: /tmp/distal-slurm
#   sbatch -n 4 --wait job.sh ...
#   scripts/slurm-down.sh [DIR]
#
# Everything lives under DIR: the munge key, socket and log, slurm.conf, the state,
# spool and log directories and the pid files. The daemons are started directly (no
# systemd) and listen on the loopback interface only (127.0.0.1), on two free TCP
# ports picked at start-up (SLURM_UP_PORT=N uses N and N+1; SLURM_UP_PORT="N M"
# tries N, N+1 and then M, M+1). The node is localhost
# with nproc cores; it declares SLURM_UP_CPUS CPUs (default 4 x nproc, at least 4) so
# that small MPI jobs with more ranks than cores can run, and its partition also
# allows oversubscription (OverSubscribe=FORCE:4).
# EnforcePartLimits=ALL makes an impossible request fail at submission.
# Must run as root (SlurmUser=root). Idempotent: if the cluster in DIR is already up
# it says so. On stdout it prints only the export lines a caller needs (for eval);
# progress and errors go to stderr. Exit status 0 when the node is idle.
set -eu
export PATH="$PATH:/usr/sbin:/sbin"

DIR=${1:-/tmp/distal-slurm}
case $DIR in /*) ;; *) DIR=$PWD/$DIR ;; esac
CONF=$DIR/etc/slurm.conf
WAIT_S=${SLURM_UP_WAIT:-30}

say() { echo "slurm-up: $*" >&2; }
STARTED=
die() {
  say "error: $*"
  if [ -n "$STARTED" ]; then  # stop what this run started; keep DIR and its logs
    pids=
    for d in slurmd slurmctld munged; do
      pid=$(alive "$DIR/run/$d.pid" "$d") && kill -TERM "$pid" 2>/dev/null && pids="$pids $pid"
    done
    for _ in $(seq 50); do
      left=
      for pid in $pids; do running "$pid" && left=1; done
      [ -z "$left" ] && break
      sleep 0.1
    done
    say "stopped the daemons; logs are in $DIR/log; scripts/slurm-down.sh $DIR removes it"
  fi
  exit 1
}

# a live process (not a zombie waiting for init to reap it)
running() { # PID
  local st
  st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "${st%% *}" != Z ]
}

# pid from a pid file if that process is alive and is the named program
alive() { # PIDFILE COMM
  local pid
  [ -r "$1" ] || return 1
  pid=$(tr -dc 0-9 <"$1")
  [ -n "$pid" ] && running "$pid" || return 1
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] || return 1
  echo "$pid"
}

print_exports() {
  echo "export SLURM_CONF='$CONF'"
}

node_state() {
  SLURM_CONF=$CONF timeout 10 sinfo -h -n localhost -o %T 2>/dev/null | head -n 1
}

[ "$(id -u)" = 0 ] || die "must run as root (the cluster runs with SlurmUser=root)"
for p in munged mungekey slurmctld slurmd sinfo; do
  command -v "$p" >/dev/null 2>&1 || die "$p not found: install munge slurmctld slurmd slurm-client (scripts/install-deps.sh)"
done

# ---- already up?
if [ -f "$CONF" ] && alive "$DIR/run/munged.pid" munged >/dev/null &&
   alive "$DIR/run/slurmctld.pid" slurmctld >/dev/null &&
   alive "$DIR/run/slurmd.pid" slurmd >/dev/null; then
  state=$(node_state || true)
  case $state in
    idle*|mix*|alloc*)
      say "already up in $DIR (node localhost: $state)"
      print_exports
      exit 0 ;;
  esac
  say "daemons in $DIR are running but the node is '${state:-unreachable}'; restarting"
fi
# a partial or stale cluster in DIR: stop what is left before starting afresh
if [ -d "$DIR" ] && [ -n "$(ls -A "$DIR")" ]; then
  [ -f "$DIR/.distal-slurm" ] || die "$DIR exists and is not a cluster directory of slurm-up.sh"
  "$(dirname "$0")/slurm-down.sh" "$DIR" >&2 || die "could not stop the old cluster in $DIR"
fi

t0=$(date +%s.%N)
d=$(dirname "$DIR")
while [ "$d" != / ]; do  # munged refuses a socket below a directory others cannot search
  if [ -d "$d" ] && [ "$(( 0$(stat -c %a "$d") & 1 ))" != 1 ]; then
    die "$d is not searchable by others (mode $(stat -c %a "$d")); munged needs that: chmod o+x $d"
  fi
  d=$(dirname "$d")
done
(umask 022; mkdir -p "$DIR")
chmod 755 "$DIR"   # munged wants its socket directory reachable by all
echo "cluster directory of scripts/slurm-up.sh; scripts/slurm-down.sh removes it" >"$DIR/.distal-slurm"
mkdir -p "$DIR"/{etc,munge,run,log,state,spool,tmp}
chmod 755 "$DIR/munge" "$DIR/etc"
mkdir -m 700 "$DIR/munge/key"

# ---- munge: own key, socket, pid, log and seed files
STARTED=1
mungekey -c -b 1024 -k "$DIR/munge/key/munge.key" >/dev/null 2>&1 ||
  dd if=/dev/urandom of="$DIR/munge/key/munge.key" bs=1024 count=1 2>/dev/null
chmod 600 "$DIR/munge/key/munge.key"
SOCK=$DIR/munge/munge.socket
munged --key-file="$DIR/munge/key/munge.key" --socket="$SOCK" \
  --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" \
  --seed-file="$DIR/munge/key/munged.seed" --num-threads=2 </dev/null >>"$DIR/log/munged.log" 2>&1 ||
  die "munged did not start; see $DIR/log/munged.log"
for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
[ -S "$SOCK" ] || die "munged socket $SOCK did not appear; see $DIR/log/munged.log"
if command -v munge >/dev/null 2>&1 && command -v unmunge >/dev/null 2>&1; then
  munge -S "$SOCK" -n | unmunge -S "$SOCK" >/dev/null 2>&1 || die "munge credential round trip failed"
fi

# ---- ports: two consecutive loopback ports that no socket uses, in any state.
# They are taken below the kernel's ephemeral range (ip_local_port_range) where it
# leaves room, so that outgoing connections and the listeners of concurrent MPI jobs,
# which take ephemeral ports, do not race the daemons for them; a daemon that still
# finds its port taken is restarted on another pair (see start_daemons).
port_free() { ! ss -Htan "( sport = :$1 )" 2>/dev/null | grep -q .; }
read -r EPH_LO EPH_HI </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || { EPH_LO=32768; EPH_HI=60999; }
if [ "$EPH_LO" -ge 12000 ]; then PLO=10000; PHI=$((EPH_LO - 2)); else PLO=$((EPH_HI + 1)); PHI=65532; fi
pick_port() {
  local p
  if [ -n "${SLURM_UP_PORT:-}" ]; then  # the caller's pairs, in order
    set -- $SLURM_UP_PORT
    [ "$attempt" -le $# ] || die "ports taken: ${SLURM_UP_PORT// /, } (SLURM_UP_PORT) and their successors"
    eval "PORT=\${$attempt}"
    case $PORT in ''|*[!0-9]*) die "SLURM_UP_PORT: '$PORT' is not a port number" ;; esac
    [ "$PORT" -ge 1024 ] && [ "$PORT" -le 65534 ] || die "SLURM_UP_PORT: $PORT is not in 1024..65534"
    return 0
  fi
  PORT=
  for _ in $(seq 100); do
    p=$((PLO + (RANDOM * 32768 + RANDOM) % ((PHI - PLO) / 2) * 2))
    if port_free "$p" && port_free $((p + 1)); then PORT=$p; return 0; fi
  done
  die "no free TCP port pair found in $PLO-$PHI"
}

NCORES=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
CPUS=${SLURM_UP_CPUS:-$((NCORES * 4))}
[ "$CPUS" -ge 4 ] || CPUS=4
MEM=$(free -m | awk '/^Mem:/ {print $2}')
[ -n "$MEM" ] && [ "$MEM" -gt 0 ] || MEM=1024
: >"$DIR/etc/plugstack.conf"
export SLURM_CONF=$CONF

write_conf() {
cat >"$CONF" <<EOF
# one-node test cluster written by scripts/slurm-up.sh; remove with scripts/slurm-down.sh
ClusterName=distal
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCK
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
TmpFS=$DIR/tmp
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$DIR/etc/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=pmix
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
EnforcePartLimits=ALL
ReturnToService=2
SlurmdParameters=config_overrides
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=5
# job ids differ between clusters running at once on this host: Open MPI names its
# shared-memory segments after the job id, so two "job 1" would corrupt each other
FirstJobId=$(( PORT % 60000 * 1000 + 1 ))
KillWait=5
# $NCORES cores; CPUs is declared larger so that 4 ranks fit (config_overrides)
NodeName=localhost NodeAddr=127.0.0.1 NodeHostname=localhost CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
}

# a daemon that died because its port was taken: stop the other one, keep the logs
# of the attempt and return 0 so that the caller tries another port pair
port_clash() {
  local d pid
  grep -qs "Address already in use" "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log" || return 1
  for d in slurmd slurmctld; do
    pid=$(alive "$DIR/run/$d.pid" "$d") && kill -KILL "$pid" 2>/dev/null
  done
  for _ in $(seq 50); do
    alive "$DIR/run/slurmd.pid" slurmd >/dev/null || alive "$DIR/run/slurmctld.pid" slurmctld >/dev/null || break
    sleep 0.1
  done
  for d in slurmctld slurmd; do
    [ -f "$DIR/log/$d.log" ] && mv "$DIR/log/$d.log" "$DIR/log/$d.log.port$PORT"
    rm -f "$DIR/run/$d.pid"
  done
  rm -rf "$DIR/state" "$DIR/spool" && mkdir -p "$DIR/state" "$DIR/spool"
  return 0
}

# start slurmctld and slurmd on PORT and wait until the node is idle; 2 when a
# daemon found its port taken
start_daemons() {
  local deadline state d
  write_conf
  (cd "$DIR" && slurmctld -f "$CONF" </dev/null >>"$DIR/log/slurmctld.out" 2>&1) ||
    { port_clash && return 2; die "slurmctld did not start; see $DIR/log/slurmctld.log"; }
  (cd "$DIR" && slurmd -f "$CONF" -N localhost </dev/null >>"$DIR/log/slurmd.out" 2>&1) ||
    { port_clash && return 2; die "slurmd did not start; see $DIR/log/slurmd.log"; }
  deadline=$(( $(date +%s) + WAIT_S ))
  while :; do
    for d in slurmctld slurmd; do  # a daemon that died (its pid file names a dead process)
      if [ -s "$DIR/run/$d.pid" ] && ! alive "$DIR/run/$d.pid" "$d" >/dev/null; then
        sleep 0.3
        if ! alive "$DIR/run/$d.pid" "$d" >/dev/null; then
          port_clash && return 2
          tail -n 5 "$DIR/log/$d.log" >&2 2>/dev/null
          die "$d exited; see $DIR/log/$d.log"
        fi
      fi
    done
    state=$(node_state || true)
    case $state in idle*) [ "$state" = idle ] && return 0 ;; esac
    case $state in
      down*|drain*|fail*|inval*)
        SLURM_CONF=$CONF scontrol show node localhost >&2 2>/dev/null || true
        die "node localhost is $state; see $DIR/log/slurmctld.log and $DIR/log/slurmd.log" ;;
    esac
    if [ "$(date +%s)" -ge "$deadline" ]; then
      port_clash && return 2
      tail -n 20 "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log" >&2 2>/dev/null || true
      die "node localhost not idle after ${WAIT_S}s (state '${state:-no answer}')"
    fi
    sleep 0.2
  done
}

# ---- daemons
for attempt in 1 2 3 4 5; do
  pick_port
  rc=0
  start_daemons || rc=$?
  [ "$rc" = 0 ] && break
  say "port $PORT or $((PORT + 1)) was taken when the daemons started (attempt $attempt); trying another pair"
  [ "$attempt" -lt 5 ] || die "the daemons found their ports taken 5 times"
done
t1=$(date +%s.%N)
say "up in $DIR: node localhost idle, $CPUS CPUs on $NCORES cores, ${MEM} MB, ports $PORT-$((PORT + 1)) on 127.0.0.1 ($(awk "BEGIN {printf \"%.1f\", $t1 - $t0}") s)"
print_exports
