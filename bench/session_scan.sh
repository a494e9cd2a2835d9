#!/bin/sh
# What listing a rank's session costs on a node (launcher/ssh/remote_command.cpp: in_session,
# run at each rank's and each health probe's end over SSH, and while a stop waits): the awk the
# wrapper uses, taken from the source, against a loop of sh reads over /proc/PID/stat and
# procps' pgrep -s, with PROCS extra processes running, REPEAT times each, alternating. Prints
# milliseconds and the ratios to the awk.
# Usage: bench/session_scan.sh [PROCS] [REPEAT]
set -eu
procs=${1:-1500}
repeat=${2:-5}
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'kill $(cat "$work/pids" 2>/dev/null) 2>/dev/null || true; rm -rf "$work"' EXIT

# The wrapper's own function, as it is in the source.
sed -n '/^in_session() {$/,/^}$/p' "$here/launcher/ssh/remote_command.cpp" >"$work/awk.sh"
grep -q awk "$work/awk.sh" || { echo "in_session not found in remote_command.cpp" >&2; exit 1; }
cat >"$work/loop.sh" <<'SH'
in_session() {
  for f in /proc/[0-9]*/stat; do
    { read -r l <"$f"; } 2>/dev/null || continue
    set -- ${l##*")"}
    [ "$4" = "$pid" ] && [ "$1" != Z ] && { f=${f#/proc/}; echo "${f%/stat}"; }
  done
}
SH
cat >"$work/pgrep.sh" <<'SH'
in_session() { pgrep -s "$pid"; }
SH
i=0
while [ "$i" -lt "$procs" ]; do sleep 600 & echo $! >>"$work/pids"; i=$((i + 1)); done
# A session like a rank's: sh, and timeout(1) with its command in a group of its own.
setsid sh -c 'timeout 600 sleep 601 & exec sleep 602' &
sleep 0.5
sid=$(ps -eo sid=,args= | awk '$2 == "sleep" && $3 == "602" { print $1; exit }')
echo "$sid" >>"$work/pids"
# As the wrapper has it: its start time (here the session's), and the tag a rank's processes carry.
ts=$(awk '{ sub(/.*\) /, ""); print $20 }' "/proc/$sid/stat")
n=$(ls -d /proc/[0-9]* | wc -l)

ms() {  # ms SCRIPT: one listing, in milliseconds; checks it finds the 3 processes of the session
  s=$(date +%s%N)
  found=$(sh -c ". $1; pid=$sid; ts=$ts; tag=none; in_session" | wc -l)
  e=$(date +%s%N)
  [ "$found" -ge 3 ] || { echo "$1 found $found process(es) of session $sid" >&2; exit 1; }
  echo $(((e - s) / 1000))
}
awk_us=0 loop_us=0 pgrep_us=0 r=0
while [ "$r" -lt "$repeat" ]; do
  awk_us=$((awk_us + $(ms "$work/awk.sh")))
  loop_us=$((loop_us + $(ms "$work/loop.sh")))
  if command -v pgrep >/dev/null; then pgrep_us=$((pgrep_us + $(ms "$work/pgrep.sh"))); fi
  r=$((r + 1))
done
kill -- "-$sid" 2>/dev/null || true
pkill -s "$sid" 2>/dev/null || true
echo "processes on this machine: $n; $(nproc) cores; load $(cut -d' ' -f1 /proc/loadavg)"
awk 'BEGIN { printf "in_session (awk, as shipped): %.1f ms\nloop of sh reads: %.1f ms (%.1fx)\npgrep -s (procps; 0 when absent): %.1f ms (%.1fx)\n", '"$awk_us"' / 1000 / '"$repeat"', '"$loop_us"' / 1000 / '"$repeat"', '"$loop_us"' / '"$awk_us"', '"$pgrep_us"' / 1000 / '"$repeat"', '"$pgrep_us"' / '"$awk_us"' }'
