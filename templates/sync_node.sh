# Everything `dtrain sync` (launcher/ssh/workdir_sync.cpp) does on a node, over one connection:
# list, then receive. $1 destination, $2 probe file name, $3 staging folder name, $4 the node
# timeout in whole seconds (0: none). dtrain_idle_watch (templates/idle_watch.sh) is put in front.
#
# The listing on stdout: "new" (no such folder), "shared" (the probe is there), or "have", the
# NUL-terminated "size mtime path" records, an empty record, the manifest's length on a line of
# its own and the manifest. Then lines on stdin: "." every half second while this machine
# decides, then "send" and a tar archive, or EOF when the node is in sync. With a node timeout,
# what writes the listing (a workdir's can be megabytes: more than sshd and TCP hold when the
# link goes down), the wait for that line and the archive's tar are watched
# (templates/idle_watch.sh): a link that stays down ends them, and the partial copy is removed,
# as when the connection ends.
#
# Staging folders of earlier syncs whose node-side end died without removing them (the node
# rebooted mid-copy) are removed as the node is listed, unless a process there still names them
# (another sync to the same folder, under way).
#
# A destination that does not exist yet is unpacked beside it and renamed into place whole (one
# rename: nobody sees a part of it). Into an existing one, files land in the staging folder
# first and are renamed into place (one mv per folder, not per file: a process per file costs
# more than the copy); the manifest goes last.
dest=$1 probe=$2 stage=$3 nt=$4
sweep() {
  command -v pgrep >/dev/null 2>&1 || return 0
  for d in "$@"; do
    [ -e "$d" ] || continue
    n=${d##*dtrain-sync-stage.} && n=${n%%.*}
    [ ".dtrain-sync-stage.$n" != "$stage" ] || continue
    pgrep -f "dtrain-sync-stage[.]$n( |/|\$)" >/dev/null 2>&1 || rm -rf -- "$d"
  done
}
# dead_man PID: the node's watch on PID, in the background ($w). `watched COMMAND...` runs the
# command under it, on this shell's stdin (fd 3 carries it: dash gives a background job
# /dev/null), and returns its status (143: the watch ended it).
dead_man() { [ "$nt" -gt 0 ] || return 0; (dtrain_idle_watch "$1" "$nt") >/dev/null 2>&1 </dev/null & w=$!; }
watched() {
  exec 3<&0
  "$@" <&3 3<&- &
  p=$! w=
  exec 3<&-
  dead_man $p
  wait $p
  s=$?
  [ -z "$w" ] || kill $w 2>/dev/null
  return $s
}
(
if ! cd -- "$dest" 2>/dev/null; then
  sweep "${dest%/}".dtrain-sync-stage.*
  echo new
  exit 0
fi
if [ -e "$probe" ]; then echo shared; exit 0; fi
sweep .dtrain-sync-stage.*
echo have
watched find . -name '.dtrain-sync*' -prune -o \( -type f -o -type l \) -printf '%s %T@ %P\0' || exit 4
printf '\0'
m=0
if [ -f .dtrain-sync-manifest ]; then m=$(wc -c <.dtrain-sync-manifest) || m=0; fi
echo $((m))
if [ $((m)) -gt 0 ]; then watched head -c $((m)) .dtrain-sync-manifest || exit 4; fi
) || exit $?
w=
dead_man $$
while IFS= read -r go && [ "$go" = . ]; do :; done
[ -z "$w" ] || kill $w 2>/dev/null
[ "$go" = send ] || exit 0
untar() {
  watched tar -xf - -C "$1" 2>"$1.err"
  s=$?
  [ $s != 143 ] || echo "nothing came from dtrain for $nt s; the partial copy is thrown away" >>"$1.err"
  return $s
}
while [ "$dest" != / ] && [ "${dest%/}" != "$dest" ]; do dest=${dest%/}; done
if [ ! -e "$dest" ]; then
  mkdir -p -- "$(dirname -- "$dest")" || { echo "cannot create the folder of $dest" >&2; exit 3; }
  whole="$dest$stage"
  rm -rf -- "$whole" && mkdir -- "$whole" || { echo "cannot create $whole" >&2; exit 3; }
  if ! untar "$whole"; then
    cat "$whole.err" >&2; rm -rf -- "$whole" "$whole.err"; exit 4
  fi
  rm -f -- "$whole.err" "$whole/.dtrain-sync-delete"
  if ! mv -T -- "$whole" "$dest" 2>/dev/null; then
    rm -rf -- "$whole"; echo "$dest appeared while it was being synced; sync again" >&2; exit 5
  fi
  exit 0
fi
mkdir -p -- "$dest" && cd -- "$dest" || { echo "cannot create or enter $dest" >&2; exit 3; }
rm -rf -- "$stage" && mkdir -- "$stage" || exit 3
if ! untar "$stage"; then
  cat "$stage.err" >&2; rm -rf -- "$stage" "$stage.err"; exit 4
fi
rm -f -- "$stage.err"
if [ -f "$stage/.dtrain-sync-delete" ]; then
  xargs -0 -r rm -f -- <"$stage/.dtrain-sync-delete"
  rm -f -- "$stage/.dtrain-sync-delete"
fi
mv -f -- "$stage/.dtrain-sync-manifest" "$stage.manifest" 2>/dev/null
(cd "$stage" && find . -type d -print0 | (cd .. && xargs -0 mkdir -p --) &&
  find . -type d -exec sh -c 'for d; do
    find "$d" -maxdepth 1 \( -type f -o -type l \) -print0 |
      xargs -0 -r mv -f -t "../$d" -- || exit 1; done' sh {} +
) || { rm -rf -- "$stage"; exit 5; }
rm -rf -- "$stage"
if [ -f "$stage.manifest" ]; then mv -f -- "$stage.manifest" .dtrain-sync-manifest; fi
exit 0
