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
# Hold the allocation until dtrain cancels the job, or the time limit ends it.
while :; do
  sleep 60
done
