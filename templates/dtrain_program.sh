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
