#!/usr/bin/env bash
# Reliability: injects one fault at a time into a running N-rank local job and measures the time
# from the fault to a clean teardown (no live process of the job left, found by DTRAIN_JOB in
# /proc/*/environ, and dtrain itself exited). Faults: dtrain SIGKILLed (the guards must end the
# ranks), a rank SIGKILLed, a rank SIGSTOPped (found by --stall-timeout S --on-stall stop), and
# Ctrl-C (SIGINT to dtrain). Each rank is `sh` printing a line every 0.2 s, with a setsid'd
# `sleep` of its own (which must go too; over ssh a plain background one). Prints one line per fault: median and worst of REPEAT.
# TRANSPORT ssh (root): the same on 2 sshd nodes in network namespaces (tests/cluster), RANKS/2
# each; the nodes share this machine's pid space, so /proc shows their processes too.
# TRANSPORT ssh also measures a node lost (issue 27) on 3 fresh namespace nodes, the last a spare
# (--spares 1 --max-restarts 1 --node-timeout NODE_TIMEOUT): node1's network cut (ip link set
# eth0 down) or its sshd killed (listener and sessions, by pid): seconds from the fault until
# dtrain names the node lost, and until the next attempt (on the spare) has started.
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

python3 - "$dtrain" "$ranks" "$repeat" "$stall" "$transport" "$head_netns" "$cluster" <<'EOF'
import os, signal, statistics, subprocess, sys, time

dtrain, ranks, repeat, stall = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
transport, head_netns, cluster = sys.argv[5], sys.argv[6], sys.argv[7]
# Over ssh without the setsid'd sleep: on a node only the rank's process group is ended.
ESCAPE = "setsid sleep 1000 & " if transport == "local" else "sleep 1000 & "
RANK_COMMAND = ESCAPE + "echo up; while :; do echo tick; sleep 0.2; done"


def job_processes(job):
    """(pid, env) of live processes whose environment has DTRAIN_JOB=job."""
    needle = b"DTRAIN_JOB=" + job.encode()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read().split(b"\0")
            if needle not in env:
                continue
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
            if stat[stat.rindex(")") + 2] == "Z":
                continue
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read()
            out.append((int(name), env, cmdline))
        except (OSError, ValueError):
            pass
    return out


def rank_shell(job, rank):
    for pid, env, cmdline in job_processes(job):
        if f"RANK={rank}".encode() in env and cmdline.startswith(b"sh\0-c\0"):
            return pid
    raise RuntimeError(f"no shell of rank {rank} in job {job}")


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
python3 - "$dtrain" "$repeat" "$node_timeout" "$root/tests/cluster/make-cluster.sh" "$work/lost" <<'EOF'
import json, os, signal, statistics, subprocess, sys, time

dtrain, repeat, node_timeout = sys.argv[1], int(sys.argv[2]), sys.argv[3]
script, cluster = sys.argv[4], sys.argv[5]
RANK = "echo up; while :; do sleep 0.2; done"


def sshd_pids(netns):
    """The node's sshd processes: its listener and the sessions it forked."""
    pids = []
    out = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True).stdout
    for pid in out.split():
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip().startswith("sshd"):
                    pids.append(int(pid))
        except OSError:
            pass
    return pids


def ranks_up(job):
    for r in (0, 1):
        try:
            with open(f"dtrain-logs/{job}/rank-{r}.log") as f:
                if not f.read().startswith("up"):
                    return False
        except OSError:
            return False
    return True


def run(fault, n):
    subprocess.run([script, "up", "3", cluster], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    head = open(f"{cluster}/head-netns").read().strip()
    netns = open(f"{cluster}/nodes").read().splitlines()[1].split()[2]
    job = f"lost-{fault}-{n}-{os.getpid()}"
    args = ["ip", "netns", "exec", head, dtrain, "launch", "-c", f"{cluster}/cluster.yaml",
            "--job", job, "--quiet", "--spares", "1", "--max-restarts", "1", "--node-timeout",
            node_timeout, "--grace-period", "2", "--", "sh", "-c", RANK]
    err_path = f"{job}.err"
    with open(err_path, "w") as err:
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    deadline = time.monotonic() + 30
    while not ranks_up(job):
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"{job}: ranks did not come up")
        time.sleep(0.02)
    start = time.monotonic()
    if fault == "node-cut":
        subprocess.run([script, "node", cluster, "1", "ip", "link", "set", "eth0", "down"],
                       check=True)
    else:
        for pid in sshd_pids(netns):
            os.kill(pid, signal.SIGKILL)
    detect = next_attempt = float("inf")
    while time.monotonic() - start < 60 and next_attempt == float("inf"):
        now = time.monotonic() - start
        with open(err_path) as f:
            if detect == float("inf") and "node node1" in f.read():
                detect = now
        try:
            with open(f"dtrain-logs/{job}/job.json") as f:
                if len(json.load(f)["attempts"]) >= 2:
                    next_attempt = now
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)
    subprocess.run([script, "down", cluster], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return detect, next_attempt


print(f"node lost (3 ssh nodes, 1 spare, --node-timeout {node_timeout}), {repeat} runs each; "
      f"seconds from the fault until dtrain names the node lost / the next attempt has started")
for fault, text in (("node-cut", "node1's network cut (ip link set eth0 down)"),
                    ("sshd-kill", "node1's sshd killed (listener and sessions, SIGKILL)")):
    detects, nexts = [], []
    for n in range(repeat):
        d, a = run(fault, n)
        detects.append(d)
        nexts.append(a)
    print(f"{fault}: detected median {statistics.median(detects):.2f} s, worst "
          f"{max(detects):.2f} s; next attempt median {statistics.median(nexts):.2f} s, worst "
          f"{max(nexts):.2f} s; {text}", flush=True)
EOF
