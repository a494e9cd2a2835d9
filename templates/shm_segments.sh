# The node's shared memory (/dev/shm) and which of its files a process still holds: what the
# doctor's probe reports (templates/probe.sh, the shm-leftovers check) and what a rank's wrapper
# removes when the rank ends (the SSH and Slurm wrappers; the local transport runs it too):
# launcher/shm_leftovers.h. Only the top level is read: shm_open(3) and sem_open(3) make their
# names there, and a folder in it is somebody's files, not a segment.
#
# The names the segments of the libraries a training job uses take there: Python's
# multiprocessing (psm_*, and sem.mp-* for its semaphores), PyTorch's file_system sharing
# (torch_*), NCCL (nccl-*), Intel OpenMP (__KMP_REGISTERED_LIB_*), Open MPI (vader_segment.*),
# PSM2 (psm2_shm.*). Another name may be a file a job put there on purpose (a dataset copied into
# memory): dtrain never removes one, and the doctor never counts one against a node.
dtrain_shm_segment_names='^(psm_|sem[.]mp-|torch_|nccl-|__KMP_REGISTERED_LIB_|vader_segment[.]|psm2_shm[.])'

# `dtrain_shm_files`: a line KIB;UID;USER;MTIME;AGE_S;HELD;SEGMENT;NAME for each regular file there,
# KIB what it takes in memory (a segment is sparse until written), HELD 1 when a process maps it or
# holds it open, 0 when none does, - when this user cannot tell (another user's file: that user's
# processes' maps cannot be read but by root), SEGMENT 1 for a library's segment (the names
# above), else 0. A mapping is matched by the device and inode in /proc/PID/maps, an open file by
# its name.
dtrain_shm_files() {
  [ -d /dev/shm ] || return 0
  sl=$(find /dev/shm -mindepth 1 -maxdepth 1 -type f -printf '%k;%U;%u;%T@;%i;%f\n' 2>/dev/null)
  [ -n "$sl" ] || return 0
  # The device of the file system mounted last on /dev/shm, as maps writes it ("00:1a").
  sd=$(awk '$5 == "/dev/shm" { split($3, d, ":"); v = sprintf("%02x:%02x", d[1], d[2]) }
            END { print v }' /proc/self/mountinfo 2>/dev/null)
  # Each step may fail (a process that ends while it is read): none may end the listing, even
  # under set -e.
  { if [ -n "$sd" ]; then
      grep -h -F " $sd " /proc/[0-9]*/maps 2>/dev/null | awk -v d="$sd" '$4 == d { print "i " $5 }' || :
    fi
    find /proc/[0-9]*/fd -mindepth 1 -maxdepth 1 -lname '/dev/shm/*' -printf 'n %l\n' 2>/dev/null || :
    echo --
    printf '%s\n' "$sl"; } |
    awk -v me="$(id -u)" -v now="$(date +%s)" -v seg="$dtrain_shm_segment_names" '
      $0 == "--" { files = 1; next }
      !files { if ($1 == "i") ino[$2] = 1; else name[substr($0, 3)] = 1; next }
      { split($0, f, ";"); nm = $0; for (i = 1; i <= 5; i++) sub(/^[^;]*;/, "", nm)
        held = (f[5] in ino || ("/dev/shm/" nm) in name) ? 1 : (me == 0 || f[2] == me) ? 0 : "-"
        t = f[4]; sub(/\..*/, "", t); age = now - t; if (age < 0) age = 0
        print f[1] ";" f[2] ";" f[3] ";" t ";" age ";" held ";" (nm ~ seg ? 1 : 0) ";" nm }'
}

# `dtrain_shm_remove SINCE`: at a rank's end, once its processes are gone, removes the libraries'
# segments (the names above) that this user's processes left in /dev/shm: this user's, written at
# or after SINCE (seconds since the epoch: the rank's start) and held by no process. A process
# killed outright (SIGKILL, the OOM killer) leaves them, and they take the node's memory until
# removed. A segment any process still holds (another rank's) stays. Also removes the files of
# dtrain's own wrappers there (dtrain-alive.PID) whose wrapper is gone. Prints one line for the
# rank's log when it removed any.
dtrain_shm_remove() {
  [ -d /dev/shm ] || return 0
  for f in /dev/shm/dtrain-alive.*; do
    [ -O "$f" ] && ! kill -0 "${f##*.}" 2>/dev/null && rm -f "$f"
  done
  sr_me=$(id -u) sr_n=0 sr_kib=0 sr_names=
  # Most ranks leave none: one find tells, before any process's maps are read.
  find /dev/shm -mindepth 1 -maxdepth 1 -type f -user "$sr_me" -newermt "@$1" -printf '%f\n' \
    2>/dev/null | grep -qE "$dtrain_shm_segment_names" || return 0
  while IFS=';' read -r k u _ t _ h sg nm; do
    [ "$u" = "$sr_me" ] && [ "$h" = 0 ] && [ "$sg" = 1 ] && [ "$t" -ge "$1" ] || continue
    rm -f "/dev/shm/$nm" 2>/dev/null || continue
    sr_n=$((sr_n + 1)) sr_kib=$((sr_kib + k))
    [ "$sr_n" -le 5 ] && sr_names=$sr_names${sr_names:+, }$nm
  done <<EOF
$(dtrain_shm_files)
EOF
  [ "$sr_n" -gt 5 ] && sr_names="$sr_names, ..."
  sr_size="$sr_kib KiB"
  [ "$sr_kib" -ge 1024 ] && sr_size="$((sr_kib / 1024)) MiB"
  [ "$sr_n" -gt 0 ] && echo "dtrain: ${2:-$(uname -n)}: removed $sr_n shared memory segment(s) that processes killed outright left in /dev/shm ($sr_size: $sr_names); no process held them"
  return 0
}
