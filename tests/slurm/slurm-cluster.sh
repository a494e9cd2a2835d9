#!/bin/sh
# A throwaway Slurm cluster on this machine for the integration tests: munged, slurmctld and two
# slurmd daemons that play the nodes node1 and node2 (both this machine, NodeAddr 127.0.0.1,
# 4 CPUs each), all state in one directory, configured by a generated slurm.conf on private
# ports. Idempotent; safe to run as root in CI.
#
#   slurm-cluster.sh start   start it (no-op when already up); prints `export SLURM_CONF=...`
#   slurm-cluster.sh stop    stop every daemon it started and remove the directory
#   slurm-cluster.sh status  exit 0 when the controller answers
#
# DTRAIN_SLURM_DIR (default /tmp/dtrain-slurm) holds config, sockets, spool, logs and pids.
# DTRAIN_SLURM_PORT (default 16817) is slurmctld's port; the slurmd daemons use the next two.
set -eu

dir=${DTRAIN_SLURM_DIR:-/tmp/dtrain-slurm}
port=${DTRAIN_SLURM_PORT:-16817}
host=$(hostname -s)
nodes="node1 node2"
conf=$dir/slurm.conf

die() { echo "slurm-cluster: $*" >&2; exit 1; }

need() {
  for tool in munged slurmctld slurmd scontrol srun sbatch; do
    command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] ||
      die "$tool not found: install slurm-wlm and munge (scripts/install-deps.sh --tests)"
  done
}

write_config() {
  mkdir -p "$dir/state" "$dir/munge" "$dir/log"
  for node in $nodes; do mkdir -p "$dir/spool/$node"; done
  chmod 700 "$dir/munge"
  if [ ! -f "$dir/munge/munge.key" ]; then
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 2>/dev/null
    chmod 600 "$dir/munge/munge.key"
  fi
  cat >"$conf" <<CONF
ClusterName=dtrain-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmUser=$(id -un)
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=2
MinJobAge=5
InactiveLimit=0
NodeName=node[1-2] NodeHostname=$host NodeAddr=127.0.0.1 Port=$((port + 1))-$((port + 2)) CPUs=4 State=UNKNOWN
PartitionName=debug Nodes=node[1-2] Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
}

up() { SLURM_CONF=$conf scontrol ping 2>/dev/null | grep -q 'is UP'; }

# Every node answers (idle, mixed or allocated).
nodes_up() {
  [ "$(SLURM_CONF=$conf sinfo -h -N -o '%T' 2>/dev/null | grep -Ec '^(idle|mixed|allocated)')" = 2 ]
}

# A start that fails stops whatever it started.
fail_start() {
  stop_daemons
  die "$@"
}

start() {
  need
  if [ -f "$conf" ] && up && nodes_up; then
    echo "export SLURM_CONF=$conf"
    return 0
  fi
  stop_daemons
  write_config
  /usr/sbin/munged --force --socket="$dir/munge/munge.socket" \
    --key-file="$dir/munge/munge.key" --pid-file="$dir/munge/munged.pid" \
    --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munge.seed" ||
    fail_start "munged did not start (see $dir/log/munged.log)"
  # -c: a fresh cluster each start; a run killed before its `stop` leaves drained nodes and jobs
  # in the state folder, which slurmctld would otherwise recover.
  SLURM_CONF=$conf /usr/sbin/slurmctld -c -i -f "$conf" ||
    fail_start "slurmctld did not start (see $dir/log/slurmctld.log)"
  for node in $nodes; do
    SLURM_CONF=$conf /usr/sbin/slurmd -f "$conf" -N "$node" ||
      fail_start "slurmd $node did not start (see $dir/log/slurmd.log)"
  done
  i=0
  until up && nodes_up; do
    i=$((i + 1))
    [ $i -lt 100 ] || fail_start "cluster not ready after 20 s (logs in $dir/log)"
    sleep 0.2
  done
  echo "export SLURM_CONF=$conf"
}

stop_pid() {
  [ -f "$1" ] || return 0
  pid=$(cat "$1")
  if kill "$pid" 2>/dev/null; then
    i=0
    while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$1"
}

stop_daemons() {
  if [ -f "$conf" ]; then
    SLURM_CONF=$conf scancel --full --quiet -u "$(id -un)" 2>/dev/null || true
  fi
  for node in $nodes; do stop_pid "$dir/slurmd-$node.pid"; done
  stop_pid "$dir/slurmctld.pid"
  stop_pid "$dir/munge/munged.pid"
}

case ${1:-} in
  start) start ;;
  stop) stop_daemons; rm -rf "$dir" ;;
  status) up ;;
  *) die "usage: slurm-cluster.sh start|stop|status" ;;
esac
