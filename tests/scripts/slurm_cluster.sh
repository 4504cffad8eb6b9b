#!/usr/bin/env bash
# A single-node Slurm cluster for tests, in a folder of its own: munged, slurmctld and slurmd
# (Debian's slurm-wlm and munge) on this machine, with private sockets, ports and state, so it
# touches nothing of a Slurm the machine may run already.
#
#   slurm_cluster.sh start DIR   starts it; prints the slurm.conf path (export SLURM_CONF=...)
#   slurm_cluster.sh stop DIR    stops it and removes DIR
#
# slurmd runs jobs as their submitter and needs root: as another user, this uses sudo -n.
set -euo pipefail

cmd=${1:?start|stop}
dir=${2:?folder}
sudo=()
[[ $(id -u) -ne 0 ]] && sudo=(sudo -n)

stop() {
  for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/pid"; do
    [[ -f $pidfile ]] && "${sudo[@]}" kill "$(cat "$pidfile")" 2>/dev/null || true
  done
  sleep 0.5
  "${sudo[@]}" rm -rf "$dir"
}

if [[ $cmd == stop ]]; then
  stop
  exit 0
fi

for tool in munged slurmctld slurmd sbatch squeue scontrol; do
  command -v "$tool" >/dev/null || [[ -x /usr/sbin/$tool ]] || {
    echo "slurm_cluster: $tool is missing (Debian packages slurm-wlm and munge)" >&2
    exit 2
  }
done

mkdir -p "$dir"/{state,spool,log,munge}
chmod 711 "$dir"   # munged (as the munge user) goes through it to its own folder
"${sudo[@]}" chown munge:munge "$dir/munge"
"${sudo[@]}" chmod 711 "$dir/munge"   # munged wants its socket folder traversable
# A key of its own (munge checks the key's owner and mode).
"${sudo[@]}" sh -c "head -c 1024 /dev/urandom > '$dir/munge/key' && chown munge:munge '$dir/munge/key' && chmod 400 '$dir/munge/key'"
"${sudo[@]}" runuser -u munge -- /usr/sbin/munged --key-file="$dir/munge/key" --socket="$dir/munge/sock" \
  --pid-file="$dir/munge/pid" --log-file="$dir/munge/log" --seed-file="$dir/munge/seed"

host=$(hostname -s)
cpus=$(nproc)
mem_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 512 ))
# Ports from the folder's name, so that two clusters on one machine do not meet.
port=$(( 20000 + $(cksum <<<"$dir" | cut -d' ' -f1) % 20000 ))
cat >"$dir/slurm.conf" <<EOF
ClusterName=ergontest
SlurmctldHost=$host(127.0.0.1)
AuthType=auth/munge
AuthInfo=socket=$dir/munge/sock
CryptoType=crypto/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldPort=$port
SlurmdPort=$((port + 1))
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
MpiDefault=none
MaxArraySize=10001
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF

"${sudo[@]}" /usr/sbin/slurmctld -f "$dir/slurm.conf"
"${sudo[@]}" /usr/sbin/slurmd -f "$dir/slurm.conf"
export SLURM_CONF=$dir/slurm.conf
for _ in $(seq 1 100); do
  if sinfo -h -o '%T' 2>/dev/null | grep -qx idle; then
    echo "$dir/slurm.conf"
    exit 0
  fi
  sleep 0.2
done
echo "slurm_cluster: the node never became idle (see $dir/log)" >&2
exit 1
