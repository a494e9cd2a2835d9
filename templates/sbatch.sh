#!/bin/sh
# Batch job that `dtrain launch` (transport: slurm) submits when it runs outside an allocation.
# It only holds the allocation: dtrain runs the ranks in it as a job step (srun --jobid), follows
# their output from where it was started, and cancels this job when the ranks are done.
# dtrain fills in the lines below from the cluster file's `slurm:` section and `nodes:`.
#SBATCH --job-name={{JOB_NAME}}
#SBATCH --nodes={{NODES}}
#SBATCH --ntasks-per-node={{TASKS_PER_NODE}}
#SBATCH --output=/dev/null
{{OPTIONS}}
# Hold the allocation while dtrain runs job steps in it; dtrain cancels the job when its ranks
# are done. Should dtrain die without doing so, give the nodes back once no step has run for
# DTRAIN_SLURM_IDLE_S seconds (default 300). A failing squeue never counts as idle.
limit=${DTRAIN_SLURM_IDLE_S:-300}
tick=$((limit < 15 ? 1 : 15))
idle=0
while [ "$idle" -lt "$limit" ]; do
  sleep "$tick"
  if steps=$(squeue -h -s -j "$SLURM_JOB_ID" -o %i 2>/dev/null); then
    if printf '%s\n' "$steps" | grep -Eq '\.[0-9]+$'; then idle=0; else idle=$((idle + tick)); fi
  else
    idle=0
  fi
done
echo "dtrain: no job step for $limit s; releasing the allocation"
