# Where a node finds dtrain's own programs (dtrain, dtrain-clip): the one lookup that both
# `dtrain doctor`'s probe and every rank `dtrain launch` starts use, so the doctor reports
# exactly what launch will run. `dtrain_program NAME DIR` prints the path and returns 0, or
# returns 1: DIR/NAME (DIR: the folder of the dtrain that launches, on this node too), then
# NAME on PATH, then /usr/local/bin, /usr/bin and ~/.local/bin (a non-interactive SSH session's
# PATH often lacks the last ones).
dtrain_program() {
  if [ -n "$2" ] && [ -f "$2/$1" ] && [ -x "$2/$1" ]; then echo "$2/$1"; return 0; fi
  p=$(command -v "$1" 2>/dev/null) && case $p in /*) echo "$p"; return 0 ;; esac
  for d in /usr/local/bin /usr/bin "$HOME/.local/bin"; do
    if [ -f "$d/$1" ] && [ -x "$d/$1" ]; then echo "$d/$1"; return 0; fi
  done
  return 1
}

# What a rank's command starts with, as `dtrain launch` starts it on a node (the ssh wrapper,
# --numa-binding): `dtrain_command NAME DIR` prints the program to run (a path as given; dtrain's
# own programs by bare name found with dtrain_program; another name as given once it is on PATH),
# or says "'NAME': command not found" on stderr and returns 127.
dtrain_command() {
  case $1 in
  */*) echo "$1"; return 0 ;;
  dtrain | dtrain-*) if dtrain_program "$1" "$2"; then return 0; fi ;;
  esac
  if ! command -v "$1" >/dev/null 2>&1; then
    echo "dtrain: $(uname -n): '$1': command not found (PATH=$PATH)" >&2
    return 127
  fi
  echo "$1"
}
