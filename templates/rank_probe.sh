#!/bin/sh
# dtrain's rank probe: what the kernel (and, where asked, py-spy) says about one job's ranks on
# this node. Run as `sh -s` with this text on stdin by `dtrain launch` (stall watch) and
# `dtrain status`, through the job's transport; POSIX sh, coreutils and grep only.
#
# Environment: DTRAIN_PROBE_JOB (the job name: a rank's process carries DTRAIN_JOB=<it>),
# DTRAIN_PROBE_DIR (when set, the job's folder: a rank also carries DTRAIN_LOG_DIR=<it>, which
# tells it from a rank of another job of the same name), DTRAIN_PROBE_STACKS=1 to take Python stacks with py-spy, DTRAIN_PROBE_PY_SPY (a py-spy to try
# first). Output, one record a line, fields separated by one space (last field free text):
#   now <epoch ms>              the node's clock
#   ticks <CLK_TCK>
#   proc <pid> <rank>           a process of the job, then its facts:
#   stat <the /proc/PID/stat line>
#   wchan <symbol or 0>
#   cmd <argv, spaces between>
#   hb <rank> <age ms> <line>   a line of the rank's dtrain-clip heartbeat file (and its age)
#   py <pid> <line>             a line of `py-spy dump` (Thread headers and frames)
#   pysrc <pid> <file:line> <source line>   the source of a thread's innermost frame
#   pyerr <pid> <why>           no stack for a Python process
rank_probe_main() {
  PATH="$PATH:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
  export PATH
  LC_ALL=C
  export LC_ALL
  job="$DTRAIN_PROBE_JOB"
  echo "now $(($(date +%s%N) / 1000000))"
  echo "ticks $(getconf CLK_TCK 2>/dev/null || echo 100)"
  # One grep over every process's environment: only the job's processes match.
  for env_file in $(grep -lzxF "DTRAIN_JOB=$job" /proc/[0-9]*/environ 2>/dev/null); do
    dir=${env_file%/environ}
    pid=${dir#/proc/}
    [ "$pid" = "$$" ] && continue
    # A rank's watchdog (launcher/file_timer.h) carries its environment but is not the rank.
    cmd=$(tr '\0\n' '  ' <"$dir/cmdline" 2>/dev/null)
    case $cmd in *"-c # dtrain-file-timer-server"*) continue ;; esac
    if [ -n "$DTRAIN_PROBE_DIR" ]; then
      grep -qzxF "DTRAIN_LOG_DIR=$DTRAIN_PROBE_DIR" "$env_file" 2>/dev/null || continue
    fi
    rank=$(grep -zx 'RANK=[0-9]*' "$env_file" 2>/dev/null | tr -d '\0')
    rank=${rank#RANK=}
    [ -n "$rank" ] || continue
    read -r stat <"$dir/stat" 2>/dev/null || continue
    echo "proc $pid $rank"
    echo "stat $stat"
    read -r wchan <"$dir/wchan" 2>/dev/null
    echo "wchan ${wchan:-0}"
    echo "cmd $cmd"
    log_dir=$(grep -zx 'DTRAIN_LOG_DIR=.*' "$env_file" 2>/dev/null | tr -d '\0')
    log_dir=${log_dir#DTRAIN_LOG_DIR=}
    probe_heartbeat "$rank" "$log_dir/heartbeat/rank-$rank.txt"
    if [ "$DTRAIN_PROBE_STACKS" = 1 ]; then
      case "$cmd" in
        *python*) probe_stack "$pid" "$dir" ;;
      esac
    fi
  done
}

# Each rank's heartbeat once, however many processes the rank has.
probe_heartbeat() {
  case " $seen_ranks " in *" $1 "*) return ;; esac
  seen_ranks="$seen_ranks $1"
  [ -f "$2" ] || return
  age=$(($(date +%s%N) / 1000000 - $(stat -c %Y "$2") * 1000))
  while IFS= read -r line; do echo "hb $1 $age $line"; done <"$2"
}

probe_stack() {
  pid=$1
  spy=""
  argv0=$(tr '\0' '\n' <"$2/cmdline" 2>/dev/null | head -n 1)
  case "$argv0" in
    /*) beside=${argv0%/*} ;;
    */*) beside="$(readlink "$2/cwd")/${argv0%/*}" ;;
    *) beside="" ;;
  esac
  for candidate in "$DTRAIN_PROBE_PY_SPY" "${beside:+$beside/py-spy}" "$(command -v py-spy)" \
                   "$HOME/.local/bin/py-spy"; do
    if [ -n "$candidate" ] && [ -x "$candidate" ]; then spy=$candidate; break; fi
  done
  if [ -z "$spy" ]; then
    echo "pyerr $pid py-spy not found on this node (beside $argv0, on PATH, ~/.local/bin)"
    return
  fi
  out=$(timeout 10 "$spy" dump --pid "$pid" 2>&1)
  status=$?
  # py-spy cannot suspend a process that another tracer holds for a moment (a debugger, the
  # probe of another node on the same machine): once more after that one let go.
  case "$out" in
    *"Failed to suspend process"*)
      sleep 0.5
      out=$(timeout 10 "$spy" dump --pid "$pid" 2>&1)
      status=$?
      ;;
  esac
  if [ $status -ne 0 ]; then
    echo "pyerr $pid $spy dump failed ($status): $(echo "$out" | tail -n 1)"
    return
  fi
  cwd=$(readlink "$2/cwd")
  first=1
  echo "$out" | while IFS= read -r line; do
    echo "py $pid $line"
    case "$line" in
      Thread*) first=1 ;;
      *"("*:*")")
        if [ $first = 1 ]; then
          first=0
          where=${line##*(}
          where=${where%)}
          file=${where%:*}
          number=${where##*:}
          case "$file" in /*) ;; *) file="$cwd/$file" ;; esac
          if [ -r "$file" ]; then
            echo "pysrc $pid $where $(sed -n "${number}p" "$file" 2>/dev/null | sed 's/^ *//')"
          fi
        fi
        ;;
    esac
  done
}

rank_probe_main </dev/null
