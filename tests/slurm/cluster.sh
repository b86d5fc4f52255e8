#!/usr/bin/env bash
# A private one-node Slurm cluster for the test suite (Debian 12: slurm-wlm 22.05, munge 0.5).
#   cluster.sh start STATE   creates a temporary folder, starts munged, slurmctld and slurmd in it
#                            and records its path in the file STATE; exits 77 (ctest: skipped)
#                            with the reason when this machine cannot run one
#   cluster.sh stop STATE    cancels its jobs, stops its daemons by PID, removes the folder
#   cluster.sh env STATE     prints `export SLURM_CONF=...` for a shell (eval "$(cluster.sh env S)")
# Everything lives in the temporary folder: slurm.conf, the spool and state directories, logs,
# pid files, the munge key, socket and pid file. The daemons listen on free ports chosen at start
# and are started and stopped by their PIDs, so a Slurm or munge the machine already runs is
# never touched. One node: this host, its CPUs (at least 64, so the 4- and 64-rank jobs of
# check_slurm.py llm_layouts, CARAML's 13B and 175B layouts, fit on a 2-core machine),
# MpiDefault=pmix.
set -euo pipefail

SKIP=77
usage() { echo "usage: $0 start|stop|env STATE_FILE" >&2; exit 2; }
[ $# -eq 2 ] || usage
action=$1
state=$2

# ---------------------------------------------------------------------------------- helpers

skip() {
  echo "SKIP: the Slurm test cluster cannot start here: $*" >&2
  printf 'unavailable: %s\n' "$*" > "$state"
  exit "$SKIP"
}

free_ports() {  # N free TCP ports on the loopback interface
  python3 - "$1" <<'EOF'
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

pid_alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

# Stops the daemon whose pid file is $1 (TERM, then KILL after 10 s).
stop_pid_file() {
  local file=$1 pid
  [ -f "$file" ] || return 0
  pid=$(cat "$file" 2>/dev/null || true)
  if pid_alive "$pid"; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do pid_alive "$pid" || break; sleep 0.1; done
    pid_alive "$pid" && kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$file"
}

cluster_dir() {  # the folder recorded in the state file, or ""
  [ -f "$state" ] && sed -n 's/^dir: //p' "$state"
}

dump_logs() {
  local dir=$1 f
  for f in "$dir"/log/*.log "$dir"/munge/munged.log; do
    [ -f "$f" ] || continue
    echo "---- $f (last 20 lines)" >&2
    tail -n 20 "$f" >&2
  done
}

stop_cluster() {
  local dir=$1
  [ -d "$dir" ] || return 0
  export SLURM_CONF="$dir/slurm.conf"
  # Running jobs first: their slurmstepd processes outlive slurmd otherwise.
  if [ -f "$dir/slurmctld.pid" ] && pid_alive "$(cat "$dir/slurmctld.pid")"; then
    local jobs
    jobs=$(squeue -h -o %i 2>/dev/null || true)
    if [ -n "$jobs" ]; then
      # shellcheck disable=SC2086
      scancel $jobs 2>/dev/null || true
      for _ in $(seq 1 300); do
        [ -z "$(squeue -h -o %i 2>/dev/null || true)" ] && break
        sleep 0.1
      done
    fi
  fi
  # Steps still known to slurmd leave a socket in its spool until their slurmstepd ends.
  for _ in $(seq 1 100); do
    compgen -G "$dir/spool/slurmd/$(hostname -s)_[0-9]*" > /dev/null || break
    sleep 0.1
  done
  stop_pid_file "$dir/slurmd.pid"
  stop_pid_file "$dir/slurmctld.pid"
  stop_pid_file "$dir/munge/munged.pid"
  rm -rf "$dir"
}

# ---------------------------------------------------------------------------------- start

start_cluster() {
  for tool in slurmctld slurmd sbatch srun squeue sinfo scancel munged mungekey python3; do
    command -v "$tool" > /dev/null || PATH="$PATH:/usr/sbin:/sbin" command -v "$tool" > /dev/null ||
      skip "$tool is not installed (scripts/install-deps --tests installs slurm-wlm and munge)"
  done
  export PATH="$PATH:/usr/sbin:/sbin"
  [ "$(id -u)" -eq 0 ] || skip "slurmd must run as root to start jobs (running as $(id -un))"
  [ -e /usr/lib/x86_64-linux-gnu/slurm-wlm/mpi_pmix.so ] || [ -n "$(find /usr/lib* -name mpi_pmix.so 2>/dev/null | head -1)" ] ||
    skip "Slurm's pmix plugin (mpi_pmix.so) is missing"

  local old
  old=$(cluster_dir || true)
  if [ -n "$old" ]; then
    echo "cluster.sh: stopping the previous test cluster in $old" >&2
    stop_cluster "$old"
  fi

  local dir host cpus memory ports ctld_port slurmd_port
  dir=$(mktemp -d "${TMPDIR:-/tmp}/scaffold-slurm.XXXXXX")
  chmod 755 "$dir"
  printf 'dir: %s\n' "$dir" > "$state"
  mkdir -p "$dir/munge" "$dir/spool/slurmctld" "$dir/spool/slurmd" "$dir/log"
  chmod 711 "$dir/munge"  # munged checks that its socket's folder is reachable, not writable
  host=$(hostname -s)
  cpus=$(nproc)
  [ "$cpus" -ge 64 ] || cpus=64  # SlurmdParameters=config_overrides accepts more than there are
  memory=$(awk '/^MemTotal:/ { print int($2 / 1024 / 2) }' /proc/meminfo)
  read -r ctld_port slurmd_port <<< "$(free_ports 2)"

  # munge: its own key, socket, pid and seed file.
  mungekey --create --keyfile="$dir/munge/munge.key" 2>/dev/null ||
    { dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none; }
  chmod 600 "$dir/munge/munge.key"
  if ! munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
      --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
      --seed-file="$dir/munge/munged.seed"; then
    dump_logs "$dir"
    stop_cluster "$dir"
    echo "cluster.sh: munged did not start" >&2
    exit 1
  fi

  cat > "$dir/slurm.conf" <<EOF
# The scaffold test suite's private one-node cluster (tests/slurm/cluster.sh); removed at stop.
ClusterName=scaffoldtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/spool/slurmctld
SlurmdSpoolDir=$dir/spool/slurmd
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
# No cgroups in containers: track processes by their parents, bind nothing.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=pmix
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
# No slurmdbd: finished jobs (state, exit code) go to a text file, and scontrol shows them
# for MinJobAge seconds.
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
MinJobAge=600
# Seconds between the SIGTERM of a time limit and the SIGKILL.
KillWait=15
SlurmdParameters=config_overrides
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=scaffold Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF="$dir/slurm.conf"
  if ! slurmctld -f "$SLURM_CONF" || ! slurmd -f "$SLURM_CONF" -N "$host"; then
    dump_logs "$dir"
    stop_cluster "$dir"
    echo "cluster.sh: slurmctld or slurmd did not start" >&2
    exit 1
  fi
  # Ready when the node is idle.
  local state_now=""
  for _ in $(seq 1 300); do
    state_now=$(sinfo -h -n "$host" -o %T 2>/dev/null || true)
    [ "$state_now" = idle ] && break
    sleep 0.1
  done
  if [ "$state_now" != idle ]; then
    echo "cluster.sh: node $host is '${state_now:-unknown}' after 30 s, not idle" >&2
    dump_logs "$dir"
    stop_cluster "$dir"
    exit 1
  fi
  echo "cluster.sh: one-node cluster up in $dir (node $host, $cpus CPUs, partition scaffold," \
       "slurmctld port $ctld_port, slurmd port $slurmd_port); SLURM_CONF=$SLURM_CONF"
}

case $action in
  start) start_cluster ;;
  stop)
    dir=$(cluster_dir || true)
    if [ -n "$dir" ]; then
      stop_cluster "$dir"
      echo "cluster.sh: stopped the test cluster in $dir"
    fi
    rm -f "$state"
    ;;
  env)
    dir=$(cluster_dir || true)
    if [ -z "$dir" ] || [ ! -f "$dir/slurm.conf" ]; then
      echo "cluster.sh: no test cluster recorded in $state" >&2
      exit 1
    fi
    printf 'export SLURM_CONF=%q\n' "$dir/slurm.conf"
    ;;
  *) usage ;;
esac
