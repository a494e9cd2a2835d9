#!/usr/bin/env bash
# Reliability: injects one fault at a time into a running N-rank local job and measures the time
# from the fault to a clean teardown (no live process of the job left, found by DTRAIN_JOB in
# /proc/*/environ, and dtrain itself exited). Faults: dtrain SIGKILLed (the guards must end the
# ranks), a rank SIGKILLed, a rank SIGSTOPped (found by --stall-timeout S --on-stall stop), and
# Ctrl-C (SIGINT to dtrain). Each rank is `sh` printing a line every 0.2 s, with a setsid'd
# `sleep` of its own (which must go too; over ssh a plain background one). Prints one line per fault: median and worst of REPEAT.
# TRANSPORT ssh (root): the same on 2 sshd nodes in network namespaces (tests/cluster), RANKS/2
# each; the nodes share this machine's pid space, so /proc shows their processes too.
# TRANSPORT ssh also measures recovery (bench/faults_recovery.py) on 3 fresh namespace nodes, the
# last a spare (--spares 1 --max-restarts 1 --node-timeout NODE_TIMEOUT): a rank SIGKILLed, all
# of node1's processes SIGKILLed, node1's network cut, its sshd killed, a rank SIGSTOPped, and
# (found by the health watch) a second NIC's link down and a scratch mount gone: time to detect,
# time to the next attempt's first step, steps lost, orphans.
# Usage: bench/faults.sh [BUILD_DIR] [RANKS] [REPEAT] [STALL_S] [local|ssh] [NODE_TIMEOUT]
set -euo pipefail
build=${1:-build}
ranks=${2:-4}
repeat=${3:-5}
stall=${4:-3}
transport=${5:-local}
node_timeout=${6:-10}
root=$(cd "$(dirname "$0")/.." && pwd)
dtrain=$(cd "$build" && pwd)/dtrain
work=$(mktemp -d)
cluster=$work/cluster
trap '[ -d "$cluster" ] && "$root/tests/cluster/make-cluster.sh" down "$cluster" >/dev/null 2>&1; rm -rf "$work"' EXIT
cd "$work"
head_netns=""
if [ "$transport" = ssh ]; then
  "$root/tests/cluster/make-cluster.sh" up 2 "$cluster" $((ranks / 2)) >/dev/null
  head_netns=$(cat "$cluster/head-netns")
fi

PYTHONPATH="$root/bench" python3 - "$dtrain" "$ranks" "$repeat" "$stall" "$transport" "$head_netns" "$cluster" <<'EOF'
import os, signal, statistics, subprocess, sys, time
from job_processes import job_processes, rank_shell

dtrain, ranks, repeat, stall = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
transport, head_netns, cluster = sys.argv[5], sys.argv[6], sys.argv[7]
# Over ssh without the setsid'd sleep: on a node only the rank's process group is ended.
ESCAPE = "setsid sleep 1000 & " if transport == "local" else "sleep 1000 & "
RANK_COMMAND = ESCAPE + "echo up; while :; do echo tick; sleep 0.2; done"


def all_up(job):
    for r in range(ranks):
        try:
            with open(f"dtrain-logs/{job}/rank-{r}.log") as f:
                if not f.read().startswith("up\n"):
                    return False
        except OSError:
            return False
    # every rank's shell, its setsid'd sleep and its ticking sleep (at times between two)
    return len(job_processes(job)) >= 2 * ranks


def run(fault, n):
    job = f"fault-{fault}-{n}-{os.getpid()}"
    args = [dtrain, "launch", "--job", job, "--quiet", "--grace-period", "5"]
    if transport == "ssh":  # `ip netns exec` execs dtrain: the pid stays dtrain's
        args = ["ip", "netns", "exec", head_netns] + args + ["-c", f"{cluster}/cluster.yaml"]
    else:
        args += ["--nproc-per-node", str(ranks)]
    if fault == "rank-stop":
        args += ["--stall-timeout", str(stall), "--on-stall", "stop"]
    proc = subprocess.Popen(args + ["--", "sh", "-c", RANK_COMMAND], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 30
    while not all_up(job):
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"{job}: ranks did not come up")
        time.sleep(0.02)
    target = {"rank-kill": 1, "rank-stop": 1}.get(fault)
    victim = rank_shell(job, target) if target is not None else proc.pid
    sig = {"dtrain-kill": signal.SIGKILL, "rank-kill": signal.SIGKILL,
           "rank-stop": signal.SIGSTOP, "ctrl-c": signal.SIGINT}[fault]
    start = time.monotonic()
    os.kill(victim, sig)
    deadline = start + 60
    while job_processes(job) or proc.poll() is None:
        if time.monotonic() > deadline:
            for pid, _, _ in job_processes(job):
                os.kill(pid, signal.SIGKILL)
            proc.kill()
            return float("inf"), proc.wait()
        time.sleep(0.005)
    return time.monotonic() - start, proc.returncode


what = {
    "dtrain-kill": "dtrain SIGKILLed (" + ("ranks end through their guards)" if transport == "local"
                                          else "each node ends its ranks when the connection drops)"),
    "rank-kill": "one rank SIGKILLed (the others torn down)",
    "rank-stop": f"one rank SIGSTOPped (--stall-timeout {stall:g} --on-stall stop)",
    "ctrl-c": "Ctrl-C (SIGINT to dtrain)",
}
print(f"{ranks} {transport} ranks, {repeat} runs per fault; seconds from the fault until no process "
      f"of the job is left and dtrain has exited")
for fault, text in what.items():
    times, codes = [], set()
    for n in range(repeat):
        seconds, code = run(fault, n)
        times.append(seconds)
        codes.add(code)
    print(f"{fault}: median {statistics.median(times):.3f} s, worst {max(times):.3f} s; "
          f"exit {','.join(str(c) if c >= 0 else signal.Signals(-c).name for c in sorted(codes))}; "
          f"{text}", flush=True)
EOF

[ "$transport" = ssh ] || exit 0
python3 "$root/bench/faults_recovery.py" "$dtrain" "$repeat" "$node_timeout" \
  "$root/tests/cluster/make-cluster.sh" "$work/lost"
