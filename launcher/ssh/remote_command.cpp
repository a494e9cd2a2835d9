// The remote wrapper is a fixed POSIX sh script; everything that varies reaches it as quoted
// positional parameters, so no value is ever parsed as shell code on the node.
#include "launcher/ssh/remote_command.h"

#include <cmath>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/oom_kill.h"
#include "launcher/shell_quote.h"
#include "launcher/shm_leftovers.h"

namespace dtrain {
namespace {

// $1 stdin bytes, $2 cwd, $3 cwd required (1/0), $4 PYTHONPATH head, $5 grace in tenths of a s,
// $6 dtrain's program dir, $7 node timeout in whole seconds (0: no dead-man switch), $8 1 for a
// step of dtrain's own (ProcessSpec::own_step: no rank cgroup, no scan of the sessions started
// since, and the login shell runs no subreaper script), $9 number of NAME=VALUE words that follow,
// then argv. The folder of TORCHELASTIC_ERROR_FILE is made where missing (torch's @record writes
// the file, not its folder); DTRAIN_GLOO_IFACE_TOWARDS (kGlooIfaceTowards in
// launcher/horovod_gloo.h) becomes HOROVOD_GLOO_IFACE, the interface of the route towards that
// address, unless that is set, and is then dropped; the program is found with dtrain_command
// (dtrain's own programs by bare name as the doctor finds them; 127 when not found). fd 3 keeps the
// channel's stdin for the watcher; the process gets stdin_data (read first, exactly $1 bytes) or
// /dev/null. The short spin waits for setsid() in the child, so a signal sent at once still finds
// the group. Every signal is followed by SIGCONT, so a stopped process acts on it now (SIGKILL
// needs none). The dead-man switch: dtrain writes a "." line every half second; the watcher counts
// them into a file (in /dev/shm where it can: a write to a disk-backed /tmp may wait seconds
// behind the journal while the disk is busy, and the sampler would take that for silence), and a
// second loop samples that file every second. When it has not changed for
// the node timeout (the network to dtrain is cut, dtrain hangs; the channel may never see EOF) the
// group is ended as on EOF: TERM, then KILL after the grace period. Signals reach the whole
// session setsid made, not only its first group: a process that moved to a group of its own
// (timeout(1) puts its command in one) is still in it, and so is a descendant that left the
// session (setsid, as a daemon does) with the environment it inherited: the process gets
// DTRAIN_PROCESS_TAG (the wrapper's pid and start time), and a session started since the
// wrapper whose first process carries it is the process's own. Where cgroup v2 is mounted and
// the login may make a cgroup below its own (root, a delegated user), the process moves itself
// into a new one, dtrain-rank-<tag>, before it execs: whatever is in it is the process's own,
// whatever its session or environment (setsid env -i), SIGKILL also goes through cgroup.kill, and
// the cgroup is removed at the end (no controller is enabled in it; DTRAIN_RANK_CGROUP=0 in the
// environment, kRankCgroupSwitch in launcher/local/rank_cgroup.h, turns it off); an empty one whose
// wrapper is gone (killed outright) is removed by the next wrapper to start there. Where the node
// has a python3, the wrapper is also the subreaper of the process's descendants (kSubreaper): one
// whose parent died is handed to the wrapper (at the latest when the process ends), and a child
// of the wrapper in a session of its own is the process's, with that session; without a cgroup,
// that is what finds a descendant that left the session and replaced its environment. Each end
// kills again until nothing is left (for up to 2 s), as each kill may hand the wrapper more.
// What the start reads (this shell's start time and session, the cgroup v2 mount, the login's
// cgroup) is one awk. in_session reads every /proc/PID/stat through one awk (a loop of sh reads
// took several times as long), and one environment per session started since (grep -z, else tr
// and grep where grep has no -z); `in_session outside` leaves out the first group,
// which `kill -- -pid` reaches, so that no process gets a signal twice. What is left when the
// process ends is ended the same way. A process killed by SIGKILL while the node's OOM kill
// count went up gets the line launcher/oom_kill.h describes
// (templates/oom_kill_line.sh, put in front with dtrain_program's). Once the process's session is
// gone, the shared memory segments it left in /dev/shm are removed (launcher/shm_leftovers.h,
// templates/shm_segments.sh); not after a step of dtrain's own.
constexpr const char* kWrapper =
    R"sh(n=$1 dir=$2 need=$3 pph=$4 grace=$5 pdir=$6 nt=$7 own=$8 ne=$9; shift 9
while [ "$ne" -gt 0 ]; do export "$1"; shift; ne=$((ne - 1)); done
if [ -n "$DTRAIN_GLOO_IFACE_TOWARDS" ]; then
  if [ -z "$HOROVOD_GLOO_IFACE" ] && rt=$(ip -o route get "$DTRAIN_GLOO_IFACE_TOWARDS" 2>/dev/null); then
    case $rt in *" dev "*) rt=${rt#* dev }; HOROVOD_GLOO_IFACE=${rt%% *}; export HOROVOD_GLOO_IFACE ;; esac
  fi
  unset DTRAIN_GLOO_IFACE_TOWARDS
fi
ef=${TORCHELASTIC_ERROR_FILE%/*}
if [ -n "$TORCHELASTIC_ERROR_FILE" ] && [ ! -d "$ef" ]; then mkdir -p "$ef" 2>/dev/null; fi
if [ -n "$pph" ]; then PYTHONPATH=$pph${PYTHONPATH:+:$PYTHONPATH}; export PYTHONPATH; fi
if [ -n "$dir" ] && ! cd "$dir" 2>/dev/null; then
  if [ "$need" = 1 ]; then echo "dtrain: $(uname -n): cannot change directory to $dir" >&2; exit 126; fi
  cd
fi
p=$(dtrain_command "$1" "$pdir") || exit 127
shift; set -- "$p" "$@"
exec 3<&0
start_time() { awk '{ sub(/.*\) /, ""); print $20 }' "/proc/$1/stat" 2>/dev/null; }
{ read -r ts ws; read -r cgm; read -r cgp; read -r ok0; } <<EOF
$(awk 'FILENAME ~ /\/stat$/ { sub(/.*\) /, ""); s = $20 " " $4 }
  FILENAME ~ /mounts$/ && $3 == "cgroup2" && m == "" { m = $2 }
  FILENAME ~ /cgroup$/ && sub(/^0::/, "") { c = $0 }
  FILENAME ~ /vmstat$/ && $1 == "oom_kill" { o = $2 }
  END { print s; print m; print c; print o }' /proc/$$/stat /proc/self/mounts /proc/self/cgroup \
  /proc/vmstat 2>/dev/null)
EOF
tag=$$.$ts cg= since=$ts t0=
[ "$own" = 1 ] && since=
[ "$own" = 1 ] || t0=$(date +%s)
if [ "$own" != 1 ] && [ "${DTRAIN_RANK_CGROUP:-1}" != 0 ] && [ -n "$cgm" ] && [ -n "$cgp" ] &&
  [ -d "$cgm$cgp" ]; then
  for d in "$cgm${cgp%/}"/dtrain-rank-*.*; do
    t=${d##*/dtrain-rank-}
    case $t in *[!0-9.]* | *.*.* | .* | *.) continue ;; esac
    [ "$(start_time "${t%%.*}")" = "${t#*.}" ] || rmdir "$d" 2>/dev/null
  done
  if mkdir "$cgm${cgp%/}/dtrain-rank-$tag" 2>/dev/null; then cg=$cgm${cgp%/}/dtrain-rank-$tag; fi
fi
start='[ -z "$1" ] || echo 0 >"$1/cgroup.procs" 2>/dev/null; shift; exec "$@"'
if [ "$n" -gt 0 ]; then
  data=$(head -c "$n"; echo .); data=${data%.}
  printf %s "$data" | DTRAIN_PROCESS_TAG=$tag setsid /bin/sh -c "$start" "$1" "$cg" "$@" 3<&- &
else
  DTRAIN_PROCESS_TAG=$tag setsid /bin/sh -c "$start" "$1" "$cg" "$@" </dev/null 3<&- &
fi
pid=$!
i=0
while [ "$i" -lt 2000 ] && ! kill -0 -"$pid" 2>/dev/null; do i=$((i + 1)); done
in_session() {
  cat /proc/[0-9]*/stat 2>/dev/null |
    awk -v s="$pid" -v t="$since" -v o="$1" -v cg="$cg" -v w="$$" -v ws="$ws" '
      BEGIN { if (cg != "") while ((getline c < (cg "/cgroup.procs")) > 0) in_cg[c] = 1 }
      { p = $1; sub(/.*\) /, ""); if ($1 == "Z") next
      n++; q[n] = p; g[n] = $3; e[n] = $4; b[n] = $20
      if ($2 == w && $4 != ws && $4 != s) adopted[$4] = 1 }
      END { for (i = 1; i <= n; i++) {
        if (e[i] == s || q[i] in in_cg || e[i] in adopted) { if (o == "" || g[i] != s) print "= " q[i] }
        else if (t != "" && b[i] + 0 >= t + 0) print (seen[e[i]]++ ? "+ " : "? ") e[i] " " q[i] } }' |
    { mine=:
      while read -r k sn q; do
        case $k in
          =) echo "$sn" ;;
          \?) r=0; grep -qzxF "DTRAIN_PROCESS_TAG=$tag" "/proc/$q/environ" 2>/dev/null || r=$?
              if [ "$r" = 2 ] && tr '\0' '\n' 2>/dev/null <"/proc/$q/environ" |
                grep -qxF "DTRAIN_PROCESS_TAG=$tag"; then r=0; fi
              if [ "$r" = 0 ]; then mine=$mine$sn: && echo "$q"; fi ;;
          +) case $mine in *":$sn:"*) echo "$q" ;; esac ;;
        esac
      done; }
}
signal_session() {
  kill -s "$1" -- -"$pid" || kill -s "$1" "$pid"
  for q in $(in_session outside); do kill -s "$1" "$q"; [ "$1" = KILL ] || kill -s CONT "$q"; done
  [ "$1" = KILL ] && [ -n "$cg" ] && echo 1 >"$cg/cgroup.kill" 2>/dev/null
  kill -s CONT -- -"$pid"
}
end_group() {
  signal_session TERM
  i=0
  while [ "$i" -lt "$grace" ] && [ -n "$(in_session)" ]; do sleep 0.1; i=$((i + 1)); done
  signal_session KILL
  i=0
  while [ "$i" -lt 20 ] && [ -n "$(in_session)" ]; do sleep 0.1; signal_session KILL; i=$((i + 1)); done
}
hb= d=
if [ "$nt" -gt 0 ]; then
  hb=/dev/shm/dtrain-alive.$$
  { : >"$hb"; } 2>/dev/null || hb=${TMPDIR:-/tmp}/dtrain-alive.$$
  : >"$hb"
  ( last= m=0
    while kill -0 -"$pid"; do
      sleep 1
      v=.; read -r v <"$hb"
      if [ "$v" != "$last" ]; then last=$v m=0; else m=$((m + 1)); fi
      if [ "$m" -ge "$nt" ]; then end_group; exit 0; fi
    done ) </dev/null >/dev/null 2>&1 &
  d=$!
fi
( c=0
  while IFS= read -r s; do
    if [ "$s" = . ]; then c=$((c + 1)); [ -n "$hb" ] && echo "$c" >"$hb"; continue; fi
    signal_session "$s"
  done
  end_group ) <&3 >/dev/null 2>&1 &
w=$!
exec 3<&- 4>&2 2>/dev/null
wait "$pid"; st=$?
kill "$w" $d
[ -n "$(in_session)" ] && end_group
[ -n "$hb" ] && rm -f "$hb"
[ -n "$t0" ] && dtrain_shm_remove "$t0" >&4
i=0
while [ -n "$cg" ] && ! rmdir "$cg" 2>/dev/null && [ "$i" -lt 20 ]; do sleep 0.1; i=$((i + 1)); done
dtrain_oom_line "$st" "$ok0" "$pid" >&4
exit "$st")sh";

// What the node's login shell runs first: the wrapper's /bin/sh made the child subreaper of what
// it starts (prctl PR_SET_CHILD_SUBREAPER, kept across the exec), so that a descendant of the rank
// whose parent died is handed to the wrapper, not to init. The prctl is made by the node's perl
// (prctl's system call number by architecture, else from syscall.ph; about 5 ms), else by its
// python3 (tens of ms); with neither, or where prctl fails, the wrapper runs as a plain /bin/sh.
// Nothing in it may stop the rank from starting: the modules are loaded in eval, and every path
// ends in an exec of /bin/sh. "$@": -c SCRIPT NAME ARGS.
constexpr const char* kSubreaper =
    R"sh(py='import os, sys
try:
    import ctypes
    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)
except Exception:
    pass
os.execv("/bin/sh", ["/bin/sh"] + sys.argv[1:])'
if [ -x /usr/bin/perl ]; then
  exec /usr/bin/perl -e 'my $py = shift @ARGV;
my %prctl = (x86_64 => 157, aarch64 => 167);
my $arch = eval { require Config; $Config::Config{archname} } || "";
my $n = $prctl{(split /-/, $arch)[0] // ""};
$n = eval { require "syscall.ph"; &SYS_prctl } unless defined $n;
exec { "/bin/sh" } "/bin/sh", @ARGV if defined $n && syscall($n, 36, 1, 0, 0, 0) == 0;
for my $p ("/usr/bin/python3", "/usr/local/bin/python3") {
  exec { $p } $p, "-I", "-S", "-c", $py, @ARGV if -x $p;
}
exec { "/bin/sh" } "/bin/sh", @ARGV;' -- "$py" "$@"
fi
for p in /usr/bin/python3 /usr/local/bin/python3; do
  if [ -x "$p" ]; then exec "$p" -I -S -c "$py" "$@"; fi
done
exec /bin/sh "$@")sh";

void CheckNoNul(const std::string& value, const std::string& what) {
  if (value.find('\0') != std::string::npos) {
    throw Error(fmt::format("{} holds a NUL byte, which no process can receive", what));
  }
}

}  // namespace

std::string BuildRemoteCommand(const ProcessSpec& proc, const RemoteCommandOptions& options) {
  if (proc.argv.empty()) throw Error(fmt::format("rank {}: empty command", proc.id));
  if (proc.stdin_source) return "exec " + ShellJoin(proc.argv);  // streams its stdin itself
  std::vector<std::string> words = {std::to_string(proc.stdin_data.size()),
                                    options.cwd,
                                    options.cwd_required ? "1" : "0",
                                    proc.python_path_head,
                                    std::to_string(std::llround(options.grace_s * 10)),
                                    options.program_dir,
                                    std::to_string(std::llround(std::ceil(options.node_timeout_s))),
                                    proc.own_step ? "1" : "0",
                                    std::to_string(proc.env.size())};
  for (const auto& [name, value] : proc.env) {
    if (!IsShellVariableName(name)) {
      throw Error(
          fmt::format("rank {}: environment variable name '{}' is not a valid name "
                      "(letters, digits and _, not starting with a digit)",
                      proc.id, name));
    }
    CheckNoNul(value, fmt::format("rank {}: environment variable {}", proc.id, name));
    words.push_back(name + "=" + value);
  }
  for (const std::string& arg : proc.argv) {
    CheckNoNul(arg, fmt::format("rank {}: command argument", proc.id));
    words.push_back(arg);
  }
  CheckNoNul(options.cwd, "working directory");
  CheckNoNul(proc.python_path_head, "PYTHONPATH head");
  const std::string script = std::string(DtrainProgramLookup()) + std::string(OomKillLineScript()) +
                             std::string(ShmSegmentsScript()) + kWrapper;
  const std::string shell =
      proc.own_step ? "exec /bin/sh" : "exec /bin/sh -c " + ShellQuote(kSubreaper) + " dtrain-rank";
  return shell + " -c " + ShellQuote(script) + " dtrain-rank " + ShellJoin(words);
}

std::string RemoteSignalLine(int sig) {
  std::string name = SignalName(sig);
  if (name.rfind("SIG", 0) == 0)
    name = name.substr(3);
  else
    name = std::to_string(sig);
  return name + "\n";
}

}  // namespace dtrain
