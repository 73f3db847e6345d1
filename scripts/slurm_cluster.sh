#!/usr/bin/env bash
# A real single-node Slurm on localhost for the tests and the benchmark, everything (state, spool, logs, pid
# files, munge socket and key) inside one directory the caller owns.
#   scripts/slurm_cluster.sh start DIR [PORT]   start it; prints the SLURM_CONF clients need
#   scripts/slurm_cluster.sh stop DIR           cancel every job, shut it down, stop munged
# Exit code 77 (skip) when the Slurm packages are missing (scripts/setup.sh installs them).
set -euo pipefail
cmd=${1:?usage: slurm_cluster.sh start|stop DIR [PORT]}
dir=${2:?usage: slurm_cluster.sh start|stop DIR [PORT]}
port=${3:-17817}

for tool in slurmctld slurmd munged mungekey sbatch squeue scontrol scancel; do
  if ! command -v "$tool" >/dev/null && [ ! -x "/usr/sbin/$tool" ]; then
    echo "slurm_cluster: $tool is not installed (apt-get install slurmctld slurmd slurm-client munge); skipping" >&2
    exit 77
  fi
done
export PATH="$PATH:/usr/sbin"
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
conf=$dir/slurm.conf

# Alive: the state letter in /proc/PID/stat, since a zombie (not yet reaped here) still answers kill -0.
alive() { [ -r "/proc/$1/stat" ] && [ "$(awk '{print $3}' "/proc/$1/stat")" != Z ]; }
pid_of() { [ -s "$dir/$1.pid" ] && cat "$dir/$1.pid" || true; }

stop() {
  [ -f "$conf" ] || return 0
  export SLURM_CONF=$conf
  local ctld; ctld=$(pid_of slurmctld)
  if [ -n "$ctld" ] && alive "$ctld"; then
    scancel --full --quiet --user="$(id -un)" 2>/dev/null || true
    for _ in $(seq 1 100); do [ -z "$(squeue -h -t PD,R,CG,CF,S 2>/dev/null)" ] && break; sleep 0.2; done
    scontrol shutdown 2>/dev/null || true
  fi
  for name in slurmd slurmctld; do
    local pid; pid=$(pid_of $name)
    [ -n "$pid" ] || continue
    for _ in $(seq 1 50); do alive "$pid" || break; sleep 0.2; done
    if alive "$pid"; then kill -TERM "$pid" 2>/dev/null || true; sleep 1; fi
    if alive "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
  done
  local munge; munge=$(pid_of munged)
  if [ -n "$munge" ] && alive "$munge"; then kill -TERM "$munge" 2>/dev/null || true; fi
  for _ in $(seq 1 25); do { [ -z "$munge" ] || ! alive "$munge"; } && break; sleep 0.2; done
}

start() {
  stop
  mkdir -p "$dir/state" "$dir/spool" "$dir/log" "$dir/munge"
  chmod 755 "$dir/munge"
  [ -f "$dir/munge.key" ] || mungekey -c -k "$dir/munge.key"
  chmod 600 "$dir/munge.key"
  munged --socket="$dir/munge/socket" --key-file="$dir/munge.key" --pid-file="$dir/munged.pid" \
    --seed-file="$dir/munge.seed" --log-file="$dir/log/munged.log" --force
  local node; node=$(slurmd -C | head -1 | sed 's/^NodeName=[^ ]*/NodeName=localhost/')
  local overrides=""
  # FWLAB_SLURM_CPUS=N declares N cores (the benchmark runs more trivial jobs at once than the machine has
  # cores); slurmd then takes the configured node as it is.
  if [ -n "${FWLAB_SLURM_CPUS:-}" ]; then
    node=$(echo "$node" | sed -E "s/CPUs=[0-9]+/CPUs=$FWLAB_SLURM_CPUS/; s/SocketsPerBoard=[0-9]+/SocketsPerBoard=1/; s/CoresPerSocket=[0-9]+/CoresPerSocket=$FWLAB_SLURM_CPUS/; s/ThreadsPerCore=[0-9]+/ThreadsPerCore=1/")
    overrides="SlurmdParameters=config_overrides"
  fi
  cat >"$conf" <<CONF
ClusterName=fwlab-test
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerParameters=batch_sched_delay=0,sched_interval=1
ReturnToService=2
MinJobAge=86400
KillWait=5
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MailProg=/bin/true
MaxArraySize=100001
MaxJobCount=200000
$overrides
$node
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
  echo "CgroupPlugin=cgroup/v1" >"$dir/cgroup.conf"
  export SLURM_CONF=$conf
  slurmctld -f "$conf" -c
  slurmd -f "$conf" -N localhost
  # The scheduler starts about 3 s after slurmctld: jobs submitted before then wait for it.
  for _ in $(seq 1 100); do
    grep -q 'SchedulerParameters' "$dir/log/slurmctld.log" 2>/dev/null && sinfo -h -o %t 2>/dev/null | grep -q idle && break
    sleep 0.1
  done
  if ! sinfo -h -o %t 2>/dev/null | grep -q idle; then
    echo "slurm_cluster: the node did not come up; logs in $dir/log" >&2
    tail -5 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 || true
    exit 1
  fi
  echo "SLURM_CONF=$conf"
}

case $cmd in
  start) start ;;
  stop) stop ;;
  *) echo "usage: slurm_cluster.sh start|stop DIR [PORT]" >&2; exit 2 ;;
esac
