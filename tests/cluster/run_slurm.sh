#!/usr/bin/env bash
# A real SLURM run of the tiny workflow on this machine (single node on localhost), compared with a
# local run. Needs root (it installs and starts munge, slurmctld and slurmd) and the project's venv.
#   sudo tests/cluster/run_slurm.sh [workdir]      (default workdir: /tmp/stereo3d-cluster)
# Exit status 0 = the SLURM run finished and every output equals the local run's.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
WORK="${1:-/tmp/stereo3d-cluster}"
VENV="${VENV:-$ROOT/.venv}"
PY="$VENV/bin/python"
HOST="$(hostname -s)"
CPUS="$(nproc)"
MEM_MB="$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)"

echo "== 1. packages: slurm-wlm, munge (Debian), snakemake-executor-plugin-slurm (PyPI)"
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge
fi
"$PY" -m pip install -q "snakemake-executor-plugin-slurm>=1.0" 2>&1 | grep -v "^WARNING: Location" || true

echo "== 2. munge key and daemon"
mkdir -p /etc/munge /var/log/munge /run/munge /var/lib/munge
[ -s /etc/munge/munge.key ] || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
chown -R munge:munge /etc/munge /var/log/munge /run/munge /var/lib/munge
chmod 0700 /etc/munge && chmod 0400 /etc/munge/munge.key
pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged --force
munge -n | unmunge | grep -q "STATUS: *Success" && echo "munge works"

echo "== 3. slurm.conf: one node ($HOST, $CPUS CPUs, $MEM_MB MB, 2 fake GPUs), partitions cpu and gpu"
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /tmp/fake-gpus
# Two fake GPUs: character devices with /dev/null's numbers. Slurm's gres/gpu wants device files and sets
# CUDA_VISIBLE_DEVICES from them; nothing opens them (the jobs run ONNX Runtime on the CPU).
for n in 0 1; do [ -c /tmp/fake-gpus/nvidia$n ] || mknod /tmp/fake-gpus/nvidia$n c 1 3; done
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=stereo3d-test
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
# Without accounting (no slurmdbd) the plugin asks squeue for job states: keep finished jobs visible.
MinJobAge=900
GresTypes=gpu
NodeName=$HOST CPUs=$CPUS RealMemory=$MEM_MB Gres=gpu:2 State=UNKNOWN
PartitionName=cpu Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$HOST MaxTime=INFINITE State=UP
CONF
cat > /etc/slurm/gres.conf <<CONF
NodeName=$HOST Name=gpu File=/tmp/fake-gpus/nvidia[0-1]
CONF
rm -f /etc/slurm/cgroup.conf  # slurmd 22.05 loads cgroup/v1 or v2 by itself; proctrack/task use none of it
running() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
running /run/slurmctld.pid || slurmctld
for _ in $(seq 20); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 1; done
running /run/slurmd.pid || slurmd
scontrol reconfigure 2>/dev/null || true  # daemons of an earlier run: pick up this slurm.conf
for _ in $(seq 30); do sinfo -h -o "%T" 2>/dev/null | grep -qE "idle|mixed" && break; sleep 1; done
scontrol update nodename="$HOST" state=resume 2>/dev/null || true
sinfo
srun -p gpu --gpus=1 bash -c 'echo "srun on $(hostname): CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"'

echo "== 4. a tiny library, converted locally and through SLURM"
rm -rf "$WORK" && mkdir -p "$WORK"
"$PY" - "$WORK" <<'PYEOF'
import sys
from pathlib import Path

import yaml

from stereo3d.demo import samples
from stereo3d.demo.smoke import write_smoke_weights

work = Path(sys.argv[1])
for run in ("local", "slurm"):
    folder = work / run
    (folder / "videos").mkdir(parents=True)
    samples.make_clip(folder / "videos" / "tone.mp4", width=160, height=90, frames=12, fps="12", audio=True)
    samples.make_clip(folder / "videos" / "square.mkv", width=120, height=90, frames=10, fps="10")
    write_smoke_weights(folder / "weights/DA3/Small/model.safetensors", "small", seed=0)
    config = {"library": {"folder": "videos"}, "da3": {"size": 140, "batch": 2}, "encode": {"preset": "ultrafast"},
              "runtime": {"providers": ["cuda", "cpu"]}}
    (folder / "test.yaml").write_text(yaml.safe_dump(config))
PYEOF
SM=("$PY" -m snakemake --snakefile "$ROOT/Snakefile")
( cd "$WORK/local" && "${SM[@]}" --configfile=test.yaml --profile "$ROOT/profiles/default" --cores "$CPUS" > run.log 2>&1 ) \
  || { tail -40 "$WORK/local/run.log"; exit 1; }
echo "local run done"
# The slurm profile as shipped, fitted to this test cluster: no accounting here (no slurmdbd), so no account
# and job states from squeue; memory and threads scaled down to one small node. Partitions, GPU requests
# and every other key stay as in profiles/slurm.
mkdir -p "$WORK/profile"
"$PY" - "$ROOT/profiles/slurm/config.yaml" "$WORK/profile/config.yaml" <<'PYEOF'
import sys

import yaml

profile = yaml.safe_load(open(sys.argv[1]))
profile.update({"jobs": 4, "latency-wait": 5, "slurm-no-account": True, "slurm-status-command": "squeue",
                "slurm-init-seconds-before-status-checks": 5})
profile["default-resources"].update(runtime=30, mem_mb=1000)
for resources in profile["set-resources"].values():
    resources["mem_mb"] = min(resources.get("mem_mb", 1000), 4000 if "slurm_partition" not in resources else 2000)
    resources["runtime"] = 30
profile["set-threads"] = {rule: 1 for rule in profile["set-threads"]}
yaml.safe_dump(profile, open(sys.argv[2], "w"), sort_keys=False)
PYEOF
( cd "$WORK/slurm" && PATH="$VENV/bin:$PATH" "${SM[@]}" --configfile=test.yaml --profile "$WORK/profile" > run.log 2>&1 ) \
  || { tail -60 "$WORK/slurm/run.log"; exit 1; }
echo "slurm run done"
grep -E "SLURM run ID" "$WORK/slurm/run.log" || true
# What SLURM was asked for, per job (rule, partition, GPUs, memory): scontrol keeps finished jobs MinJobAge s.
for id in $(grep -oE "SLURM jobid [0-9]+" "$WORK/slurm/run.log" | awk '{print $3}' | sort -n); do
  scontrol show job "$id" | grep -oE "JobId=[0-9]+|Comment=rule_[a-z_0-9]+|Partition=[a-z]+|TresPerJob=[^ ]+|mem=[0-9]+M" \
    | tr '\n' ' ' | sed 's/Comment=rule_//; s/_wildcards_/ /'; echo
done
grep -h "device chosen by the scheduler\|providers in use\|GPU .* locked\|no NVIDIA GPU" "$WORK"/slurm/logs/depth/*/*.log* 2>/dev/null | head -4 || true

echo "== 5. outputs compared"
# Results, exports, QC figures and map store chunks byte for byte; the metadata that holds a run's own paths and
# file times (probe.json, the stores' zarr.json, .sources.json) without them: see compare_runs.py.
cd "$WORK"
"$PY" "$ROOT/tests/cluster/compare_runs.py" local slurm
