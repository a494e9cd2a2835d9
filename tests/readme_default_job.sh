#!/bin/sh
# The README's first command, as written there, from its build step on: the default job (two local
# dtrain-clip ranks on Fashion-MNIST with --timeline) and the timeline summary, run in a fresh
# folder whose build/ is this build. It must end with status 0, one log per rank, the merged
# timeline and a summary of both ranks. (CI runs the README's second command; this keeps the
# first honest.)
#   readme_default_job.sh REPOSITORY BUILD_DIR
set -eu
repo=$1 build=$(cd "$2" && pwd)
line=$(grep -m1 '^bash scripts/install-deps.sh && ' "$repo/README.md") ||
  { echo "README.md: no first command (bash scripts/install-deps.sh && ...)"; exit 1; }
case $line in
  *"cmake --build build && "*) job=${line##*cmake --build build && } ;;
  *) echo "README.md: the first command does not build with 'cmake --build build && ...': $line"; exit 1 ;;
esac
echo "README.md's job: $job"
work=$(mktemp -d /tmp/dtrain-readme-job-XXXXXX)
trap 'rm -rf "$work"' EXIT
ln -s "$build" "$work/build"
cd "$work"
status=0
sh -c "$job" >"$work/output.txt" 2>&1 || status=$?
cat "$work/output.txt"
[ "$status" = 0 ] || { echo "FAIL: the job exited $status"; exit 1; }
job_dir=$(ls -d dtrain-logs/*/ | head -1)
[ -n "$job_dir" ] || { echo "FAIL: no dtrain-logs/<job>/"; exit 1; }
logs=$(ls "$job_dir" | grep -c '^rank-.*\.log$' || true)
[ "$logs" = 2 ] || { echo "FAIL: $logs rank logs in $job_dir (want 2): $(ls "$job_dir")"; exit 1; }
[ -s "$job_dir/timeline.json" ] || { echo "FAIL: no merged timeline in $job_dir"; exit 1; }
ranks=$(grep -cE '^ +[01] +[^ ]+ +60 ' "$work/output.txt" || true)
[ "$ranks" = 2 ] || { echo "FAIL: the summary lists $ranks of 2 ranks with 60 steps"; exit 1; }
echo "PASS: 2 rank logs, the merged timeline, a summary of both ranks"
