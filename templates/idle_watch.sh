# A node-side dead-man switch for a process that reads what dtrain sends over its channel, or
# writes much to it (launcher/ssh/idle_watch.h): the heartbeat's echo, a sync's listing and
# archive. When the link to dtrain stays down, nothing ever ends such a process (its channel sees
# no EOF, or never drains; sshd notices a dead connection only after TCP keepalive's two hours),
# and a sync's half-received copy stays with it.
# `dtrain_idle_watch PID S` returns once process PID has ended, or ends it (SIGTERM) when for S
# seconds it read and wrote nothing while it waited on a pipe or a socket (its channel): dtrain,
# which sends every half second while it waits, is gone or cut off. A wait on anything else (a
# disk, state D; a file system that waits interruptibly, as FUSE and NFS mounted intr do; a file
# lock) is the node's own: it is not counted. /proc/PID/wchan names the wait; where the kernel
# does not (empty, 0), every idle second counts. Without /proc/PID/io (a kernel without task I/O
# accounting) it only returns. It looks every S/5 seconds (at least 1: within S and a
# fifth of it), one sleep each; run it in the background with its output to /dev/null, so that
# its last sleep holds no channel open.
dtrain_idle_watch() {
  dw_seen= dw_idle=0 dw_every=$(($2 / 5))
  [ "$dw_every" -ge 1 ] || dw_every=1
  while sleep "$dw_every"; do
    dw_state=
    { read -r _ _ dw_state _ <"/proc/$1/stat"; } 2>/dev/null || return 0
    [ "$dw_state" != Z ] || return 0
    dw_io=
    while read -r dw_key dw_value; do
      case $dw_key in rchar: | wchar:) dw_io="$dw_io $dw_value" ;; esac
    done 2>/dev/null <"/proc/$1/io"
    [ -n "$dw_io" ] || return 0
    dw_wchan= dw_own=
    { read -r dw_wchan <"/proc/$1/wchan"; } 2>/dev/null
    case $dw_wchan in
      '' | 0 | *pipe* | unix_* | sk_* | *sock* | tcp_* | wait_woken | *data_wait*) ;;
      *) dw_own=1 ;;
    esac
    [ "$dw_state" != D ] || dw_own=1
    if [ -n "$dw_own" ] || [ "$dw_io" != "$dw_seen" ]; then
      dw_seen=$dw_io dw_idle=0
      continue
    fi
    dw_idle=$((dw_idle + dw_every))
    if [ "$dw_idle" -ge "$2" ]; then
      kill "$1" 2>/dev/null
      return 0
    fi
  done
}
