#!/usr/bin/env bash
# A private single-node Slurm cluster (Debian's slurm-wlm + munge) for the
# [slurm] tests: its own munge socket, ports, state and logs under STATE_DIR, so
# it touches no system Slurm. Needs root (slurmd launches jobs) and the packages:
#   apt-get install slurm-wlm munge
#   test/sweep/slurm_cluster.sh start STATE_DIR   # prints the SLURM_CONF to export
#   test/sweep/slurm_cluster.sh stop STATE_DIR
set -euo pipefail
cmd=${1:?start|stop}
dir=$(realpath -m "${2:?STATE_DIR}")
say() { printf '[slurm-cluster] %s\n' "$*" >&2; }

stop() {
  for p in slurmd slurmctld munge/munged; do
    [ -f "$dir/$p.pid" ] && kill "$(cat "$dir/$p.pid")" 2>/dev/null || true
  done
  sleep 1
}

if [ "$cmd" = stop ]; then stop; exit 0; fi

for tool in munged slurmctld slurmd sbatch; do
  command -v "$tool" >/dev/null || { say "error: $tool is missing. Fix: apt-get install slurm-wlm munge"; exit 3; }
done
[ "$(id -u)" = 0 ] || { say "error: slurmd must run as root here. Fix: run the [slurm] tests as root"; exit 3; }
[ -r /etc/munge/munge.key ] || { say "error: /etc/munge/munge.key is missing. Fix: reinstall munge (it creates the key)"; exit 3; }

mkdir -p "$dir"/{state,spool,log,munge}
chmod 700 "$dir/munge"
cp /etc/munge/munge.key "$dir/munge/munge.key"
chmod 600 "$dir/munge/munge.key"
host=$(hostname)
# Ports from the state dir's name, so two clusters on one machine do not collide.
port=$((20000 + $(printf '%s' "$dir" | cksum | cut -d' ' -f1) % 20000))
cpus=$(nproc)
cat > "$dir/slurm.conf" <<CONF
ClusterName=prismtest
SlurmctldHost=$host
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
CredType=cred/munge
# cred_expire: how long a requeued job waits before it starts again (Slurm's default: 120 s)
AuthInfo=socket=$dir/munge/munge.socket,cred_expire=10
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
KillWait=30
NodeName=$host CPUs=$cpus RealMemory=4000 State=UNKNOWN
PartitionName=prism Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
stop
munged --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/seed" -f
export SLURM_CONF=$dir/slurm.conf
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 60); do
  if sinfo -h -o '%T' 2>/dev/null | grep -q idle; then
    say "up: $host, $cpus CPUs, partition prism"
    echo "$SLURM_CONF"
    exit 0
  fi
  sleep 1
done
say "error: the node never became idle; see $dir/log. Fix: check the logs (munge, slurmctld, slurmd)"
exit 4
