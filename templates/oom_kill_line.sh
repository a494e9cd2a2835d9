# The OOM check of a rank's wrapper on its node (the SSH wrapper and the Slurm task wrapper; the
# local transport does the same in C++): launcher/oom_kill.h. `dtrain_oom_kills` prints the
# node's count of OOM kills (oom_kill in /proc/vmstat), nothing when unknown.
# `dtrain_oom_line STATUS BEFORE [PID]`: for a process that ended with shell status STATUS (137:
# SIGKILL) while that count went up from BEFORE, prints the line naming it, with the kernel log's
# line for PID (or its last OOM kill without PID) where that log is readable; nothing otherwise.
dtrain_oom_kills() { sed -n 's/^oom_kill //p' /proc/vmstat 2>/dev/null; }
dtrain_oom_line() {
  [ "$1" = 137 ] && [ -n "$2" ] || return 0
  oa=$(dtrain_oom_kills)
  [ -n "$oa" ] && [ "$oa" -gt "$2" ] || return 0
  if [ -n "${3-}" ]; then
    kl=$(dmesg 2>/dev/null | grep "Killed process $3 " | tail -n 1) kw="kernel log"
  else
    kl=$(dmesg 2>/dev/null | grep "Killed process " | tail -n 1) kw="the kernel log's last OOM kill"
  fi
  echo "dtrain: $(uname -n): the kernel's OOM killer ran while this rank did (oom_kill $2 -> $oa in /proc/vmstat)${kl:+; $kw: Killed process ${kl#*Killed process }}"
}
