# dtrain-file-timer-server: torchrun's worker watchdog for one rank.
# With TORCHELASTIC_ENABLE_FILE_TIMER=1, torchrun's agent serves a FIFO (FileTimerServer in
# torch/distributed/elastic/timer/file_based_local_timer.py) and names it to its workers in
# TORCHELASTIC_TIMER_FILE; a worker arms a deadline with torch's FileTimerClient
# (`with timer.expires(after=60, scope="step"):`) and the agent kills it with the signal the
# request carries once the deadline passes. dtrain has no agent on the node, so this program
# runs the rank instead: `python -c <this> PATH -- argv...` (PATH: TORCHELASTIC_TIMER_FILE as the
# user gave it, or ""; the same words for every rank, as one Slurm step needs; the rank is
# RANK), Python's standard library only.
# It makes the FIFO, starts argv with TORCHELASTIC_TIMER_FILE naming it, reads the requests
# (one JSON line each: pid, scope_id, expiration_time (<0: release), signal), and when a timer
# expires: says so on stderr (the rank's log), takes the worker's Python stack with py-spy when
# it can, kills the worker (and the rank, as torchrun ends its whole agent), writes the rank's
# TORCHELASTIC_ERROR_FILE (the worker, killed, cannot), and ends as the rank ended.
import json
import linecache
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

MARK = "dtrain-file-timer-server"
ENDING = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
HANDED_ON = ENDING + (signal.SIGUSR1, signal.SIGUSR2)


def say(text):
    sys.stderr.write("dtrain: " + text + "\n")
    sys.stderr.flush()


def signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return "signal %d" % number


def fifo_path(rank, given):
    if given:
        return "%s.rank-%s" % (given, rank)
    job = os.environ.get("DTRAIN_JOB", "job").replace("/", "_")
    return os.path.join(tempfile.gettempdir(),
                        "dtrain-timer.%s.rank-%s.%d" % (job, rank, os.getpid()))


def remove_fifo(path):
    try:
        os.unlink(path)
    except OSError:
        pass  # gone already


def make_fifo(path):
    try:
        if stat.S_ISFIFO(os.lstat(path).st_mode):
            os.unlink(path)  # a FIFO an earlier attempt left behind
    except FileNotFoundError:
        pass
    try:
        os.mkfifo(path, 0o600)
    except OSError as e:
        sys.exit("dtrain: %s: cannot make the watchdog timer FIFO (TORCHELASTIC_TIMER_FILE): "
                 "%s; set TORCHELASTIC_TIMER_FILE to a path in a writable folder, or unset "
                 "TORCHELASTIC_ENABLE_FILE_TIMER" % (path, e.strerror))


def py_spy():
    for candidate in (os.environ.get("DTRAIN_PROBE_PY_SPY", ""),
                      os.path.join(os.path.dirname(sys.executable), "py-spy"),
                      shutil.which("py-spy") or "",
                      os.path.expanduser("~/.local/bin/py-spy")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return ""


def stack_of(pid):
    """The main thread's stack as a Python traceback (outermost first), or why there is none."""
    spy = py_spy()
    if not spy:
        return "", "no py-spy beside %s or on PATH" % sys.executable
    out = ""
    for full in (["--full-filenames"], []):  # a py-spy older than 0.3.10 has no such option
        try:
            done = subprocess.run([spy, "dump", "--pid", str(pid)] + full, capture_output=True,
                                  text=True, timeout=10)
        except (OSError, subprocess.SubprocessError) as e:
            return "", "py-spy: %s" % e
        out = done.stdout
        if done.returncode == 0 or "full-filenames" not in done.stderr:
            break
    try:
        cwd = os.readlink("/proc/%d/cwd" % pid)
    except OSError:
        cwd = ""
    frames, in_main = [], False
    for line in out.splitlines():
        if line.startswith("Thread "):
            if frames:
                break
            in_main = True
        elif in_main and line.startswith("    ") and line.rstrip().endswith(")"):
            name, _, place = line.strip()[:-1].rpartition(" (")
            file, _, number = place.rpartition(":")
            if file and number.isdigit():
                if cwd and not os.path.isabs(file):
                    file = os.path.join(cwd, file)
                source = linecache.getline(file, int(number)).strip()
                frames.append('  File "%s", line %s, in %s' % (file, number, name) +
                              ("\n    " + source if source else ""))
    if not frames:
        return "", "py-spy showed no Python frame"
    return "Traceback (most recent call last):\n" + "\n".join(reversed(frames)) + "\n", ""


def write_error_file(message, callstack):
    path = os.environ.get("TORCHELASTIC_ERROR_FILE", "")
    if not path or os.path.exists(path):
        return
    doc = {"message": {"message": message,
                       "extraInfo": {"py_callstack": callstack,
                                     "timestamp": str(int(time.time()))}}}
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(doc, f)
    except OSError as e:
        say("%s: cannot write the error file: %s" % (path, e.strerror))


class Timers:
    def __init__(self, rank, child):
        self.rank = rank
        self.child = child
        self.timers = {}  # (pid, scope) -> (expiration_time, signal, time set)
        self.pending = b""

    def take(self, data):
        self.pending += data
        *lines, self.pending = self.pending.split(b"\n")
        for line in lines:
            if not line.strip():
                continue
            try:
                r = json.loads(line)
                key = (int(r["pid"]), str(r["scope_id"]))
                expires = float(r["expiration_time"])
                sig = int(r.get("signal", 0))
            except (ValueError, KeyError, TypeError):
                say("rank %s: a watchdog timer request that is not torch's FileTimerRequest, "
                    "ignored: %r" % (self.rank, line[:200]))
                continue
            if expires < 0:
                self.timers.pop(key, None)
            else:
                self.timers[key] = (expires, sig, time.time())

    def expire(self):
        now = time.time()
        expired = sorted((t[0], pid, scope, t[1], t[2]) for (pid, scope), t in self.timers.items()
                         if t[0] <= now)
        done = set()
        for expires, pid, scope, sig, set_at in expired:
            if pid in done:
                continue
            self.timers.pop((pid, scope), None)
            after = max(0.0, expires - set_at)
            if sig <= 0:
                say("rank %s: the watchdog timer %r of pid %d expired %.1f s after it was set; "
                    "its request carries no signal, so nothing is killed"
                    % (self.rank, scope, pid, after))
                continue
            done.add(pid)
            callstack, why = stack_of(pid)
            message = ("TimerExpired: the watchdog timer %r (torch.distributed.elastic.timer) of "
                       "pid %d expired %.1f s after it was set; killed with %s"
                       % (scope, pid, after, signal_name(sig)))
            say("rank %s: %s" % (self.rank, message[len("TimerExpired: "):]))
            if callstack:
                sys.stderr.write(callstack)
            else:
                say("rank %s: no Python stack of pid %d: %s" % (self.rank, pid, why))
            write_error_file(message, callstack)
            for target in {pid, self.child.pid}:
                try:
                    os.kill(target, sig)
                except ProcessLookupError:
                    pass
        # Timers of processes that are gone end with them, as torch's server clears them.
        for key in [k for k in self.timers if not alive(k[0])]:
            del self.timers[key]


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit("usage: %s PATH -- COMMAND..." % MARK)
    rank, argv = os.environ.get("RANK", "?"), sys.argv[3:]
    path = fifo_path(rank, sys.argv[1])

    # A signal sent to the rank's process group reaches the child as well; one sent to this
    # process alone (a Slurm step's task) is handed on. One that ends the rank also takes the
    # FIFO away at once, as torchrun's agent stops its timer server first: a SIGKILL that follows
    # soon (a Slurm step's KillWait, a grace period) leaves none behind. The handlers are in place
    # before the FIFO is made, so that no signal finds the FIFO made and this process without
    # them (it would end, leaving the FIFO); one that comes before the child runs is handed on
    # once it does.
    child, early = None, []

    def hand_on(number, _frame):
        if number in ENDING:
            remove_fifo(path)
        if child is None:
            early.append(number)
            return
        try:
            if os.getpgid(child.pid) != os.getpgrp():
                os.kill(child.pid, number)
        except ProcessLookupError:
            pass

    for number in HANDED_ON:
        signal.signal(number, hand_on)
    make_fifo(path)
    env = dict(os.environ, TORCHELASTIC_TIMER_FILE=path)
    env.pop("TORCHELASTIC_ENABLE_FILE_TIMER", None)
    # Read end first, then a write end of our own: the FIFO never reads as closed between the
    # worker's requests (each request opens, writes one line, closes).
    rfd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    wfd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    try:
        child = subprocess.Popen(argv, env=env)
    except OSError as e:
        os.unlink(path)
        sys.exit("dtrain: rank %s: cannot start %s: %s" % (rank, argv[0], e.strerror))
    for number in early:
        try:
            os.kill(child.pid, number)  # sent to this process alone, before the child was there
        except ProcessLookupError:
            pass

    timers = Timers(rank, child)
    try:
        while child.poll() is None:
            ready, _, _ = select.select([rfd], [], [], 0.1)
            if ready:
                timers.take(os.read(rfd, 65536))
            timers.expire()
    finally:
        os.close(wfd)
        os.close(rfd)
        remove_fifo(path)
    code = child.returncode
    if code < 0:
        for number in HANDED_ON:
            signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        time.sleep(1)
        code = 128 - code
    sys.exit(code)


main()
