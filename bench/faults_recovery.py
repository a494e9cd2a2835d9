#!/usr/bin/env python3
"""Recovery from a fault, as `dtrain launch --max-restarts 1` sees it on 3 sshd nodes in network
namespaces (tests/cluster/make-cluster.sh), the last a spare: one fault per run on node1, whose
rank is rank 1. Each rank is a shell counting steps every 0.2 s from the job's checkpoint file,
all ranks waiting for each other at every step (through files in the job folder, which the
namespace nodes share), as in a collective; each prints a line per step. Rank 0 appends a metrics
line per step and checkpoints every CHECKPOINT_EVERY steps, so at most that many steps are lost. Per fault, median and worst of REPEAT runs:
  detected    seconds from the fault to dtrain's first line naming node1 or rank 1;
  first step  seconds from the fault to the next attempt's first completed step (job.json:
              attempts[1].first_step_us), and from detection to it;
  steps lost  job.json attempts[0].steps_lost;
  orphans     processes of the job left once dtrain exited (the node's network back up).
Two faults only the health watch sees (--health-watch WATCH_S): the link of a second NIC that
the job's GLOO_SOCKET_IFNAME names going down, and a scratch mount a health_checks entry tests
going away. The ranks, shells, use neither: what is measured is the watch finding them.
Usage: faults_recovery.py DTRAIN REPEAT NODE_TIMEOUT MAKE_CLUSTER DIR [FAULT...]
"""
import json
import os
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from job_processes import job_processes, rank_shell  # noqa: E402

dtrain, repeat, node_timeout = sys.argv[1], int(sys.argv[2]), sys.argv[3]
script, cluster = sys.argv[4], sys.argv[5]
only = sys.argv[6:]
CHECKPOINT_EVERY = 5
STALL_S = 3
WATCH_S = 2
SCRATCH_CHECK = """health_checks:
  - {name: scratch, run: "mountpoint -q /srv/node || { echo not mounted; exit 1; }"}
"""
RANK = f"""
ck=$DTRAIN_LOG_DIR/checkpoint; at=$DTRAIN_LOG_DIR/at-$TORCHELASTIC_RESTART_COUNT
s=0; [ -f "$ck" ] && s=$(cat "$ck")
echo up
mkdir -p "$DTRAIN_LOG_DIR/metrics"
while [ "$s" -lt 60 ]; do
  sleep 0.2; s=$((s + 1))
  echo "$s" >"$at-$RANK.tmp" && mv "$at-$RANK.tmp" "$at-$RANK"
  r=0
  while [ "$r" -lt "$WORLD_SIZE" ]; do  # every rank at step s: a collective, through files
    [ "$(cat "$at-$r" 2>/dev/null || echo 0)" -ge "$s" ] && r=$((r + 1)) || sleep 0.02
  done
  echo "step $s"
  if [ "$RANK" = 0 ]; then
    echo "{{\\"step\\": $s}}" >>"$DTRAIN_LOG_DIR/metrics/rank-0.jsonl"
    [ $((s % {CHECKPOINT_EVERY})) = 0 ] && echo "$s" >"$ck.tmp" && mv "$ck.tmp" "$ck"
  fi
done
"""

FAULTS = {
    "rank-kill": "rank 1 SIGKILLed",
    "node-kill": "every process on node1 SIGKILLed but its sshd listener (the rank, its "
                 "wrapper, the ssh sessions)",
    "node-cut": "node1's network cut (ip link set eth0 down), back up after the job",
    "sshd-kill": "node1's sshd killed (listener and sessions)",
    "rank-stop": f"rank 1 SIGSTOPped (--stall-timeout {STALL_S} --on-stall stop)",
    "nic-down": f"the link of node1's second NIC, which the job's GLOO_SOCKET_IFNAME names, down "
                f"(its switch port set down; --health-watch {WATCH_S})",
    "scratch-lost": f"node1's scratch unmounted, which a health_checks entry tests "
                    f"(--health-watch {WATCH_S})",
}
# The faults only the health watch sees, and how often it looks for them.
WATCHED = {"nic-down", "scratch-lost"}


def netns_pids(netns):
    out = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def checkpoint_step(job):
    try:
        with open(f"dtrain-logs/{job}/checkpoint") as f:
            return int(f.read().strip() or -1)
    except (OSError, ValueError):
        return -1


def run(fault, n):
    subprocess.run([script, "up", "3", cluster], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    head = open(f"{cluster}/head-netns").read().strip()
    netns = open(f"{cluster}/nodes").read().splitlines()[1].split()[2]
    listener = int(open(f"{cluster}/node1/sshd.pid").read().strip())
    job = f"recover-{fault}-{n}-{os.getpid()}"
    cluster_file = f"{cluster}/cluster.yaml"
    if fault == "nic-down":  # a second NIC on every node, on the same bridge (switch port swI)
        for i, line in enumerate(open(f"{cluster}/nodes").read().splitlines()):
            ns = line.split()[2]
            subprocess.run(f"ip -n {head} link add sw{i} type veth peer name hsn0 netns {ns} && "
                           f"ip -n {head} link set sw{i} master br0 up && "
                           f"ip -n {ns} addr add 10.232.0.{10 + i}/24 dev hsn0 && "
                           f"ip -n {ns} link set hsn0 up", shell=True, check=True)
    if fault == "scratch-lost":
        cluster_file = f"{cluster}/cluster-checks.yaml"
        with open(cluster_file, "w") as f:
            f.write(open(f"{cluster}/cluster.yaml").read() + SCRATCH_CHECK)
    args = ["ip", "netns", "exec", head, dtrain, "launch", "-c", cluster_file,
            "--job", job, "--quiet", "--spares", "1", "--max-restarts", "1", "--node-timeout",
            node_timeout, "--grace-period", "2",
            "--hold-back", "0"]  # every run faults node1: the last run's quarantine is not news
    if fault == "rank-stop":
        args += ["--stall-timeout", str(STALL_S), "--on-stall", "stop"]
    if fault in WATCHED:
        args += ["--health-watch", str(WATCH_S)]
    if fault == "nic-down":
        args += ["-x", "GLOO_SOCKET_IFNAME=hsn0"]
    err_path = f"{job}.err"
    with open(err_path, "w") as err:
        proc = subprocess.Popen(args + ["--", "sh", "-c", RANK], stdout=subprocess.DEVNULL,
                                stderr=err, start_new_session=True)
    deadline = time.monotonic() + 30
    while checkpoint_step(job) < 2 * CHECKPOINT_EVERY:  # two checkpoints in: mid-interval next
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise RuntimeError(f"{job}: no progress: {open(err_path).read()}")
        time.sleep(0.02)
    time.sleep(0.2 * CHECKPOINT_EVERY / 2)
    start, wall = time.monotonic(), time.time()
    if fault == "rank-kill":
        os.kill(rank_shell(job, 1), signal.SIGKILL)
    elif fault == "rank-stop":
        os.kill(rank_shell(job, 1), signal.SIGSTOP)
    elif fault == "node-cut":
        subprocess.run([script, "node", cluster, "1", "ip", "link", "set", "eth0", "down"],
                       check=True)
    elif fault == "nic-down":
        subprocess.run(["ip", "-n", head, "link", "set", "sw1", "down"], check=True)
    elif fault == "scratch-lost":
        subprocess.run([script, "node", cluster, "1", "umount", "-l", "/srv/node"], check=True)
    elif fault == "sshd-kill":
        for pid in netns_pids(netns):
            if comm(pid).startswith("sshd"):
                os.kill(pid, signal.SIGKILL)
    elif fault == "node-kill":
        for pid in netns_pids(netns):
            if pid != listener:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    detect = float("inf")
    while proc.poll() is None and time.monotonic() - start < 90:
        if detect == float("inf"):
            with open(err_path) as f:
                text = f.read()
            if "node1" in text or "rank 1 " in text:
                detect = time.monotonic() - start
        time.sleep(0.01)
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    if fault == "node-cut":
        subprocess.run([script, "node", cluster, "1", "ip", "link", "set", "eth0", "up"])
    if fault == "rank-stop":
        for pid, _, _ in job_processes(job):
            os.kill(pid, signal.SIGCONT)
    time.sleep(1)
    orphans = len(job_processes(job))
    with open(f"dtrain-logs/{job}/job.json") as f:
        record = json.load(f)
    attempts = record["attempts"]
    first_step = lost = float("inf")
    if len(attempts) >= 2 and attempts[1].get("first_step_us"):
        first_step = attempts[1]["first_step_us"] / 1e6 - wall
    if attempts[0].get("steps_lost") is not None:
        lost = attempts[0]["steps_lost"]
    subprocess.run([script, "down", cluster], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return detect, first_step, lost, orphans, record["status"], attempts[0].get("cause")


def spread(values, fmt="{:.2f}"):
    return f"{fmt.format(statistics.median(values))} / {fmt.format(max(values))}"


print(f"3 ssh nodes (1 spare), --max-restarts 1 --node-timeout {node_timeout} --grace-period 2, "
      f"checkpoint every {CHECKPOINT_EVERY} steps of 0.2 s; {repeat} runs per fault, median / "
      f"worst; seconds from the fault")
print("| fault | cause | detected | first step of the next attempt | detection to first step | "
      "steps lost | orphans | job |")
print("|---|---|---|---|---|---|---|---|")
for fault, text in FAULTS.items():
    if only and fault not in only:
        continue
    rows = [run(fault, n) for n in range(repeat)]
    detects, firsts, losts, orphans, statuses, causes = zip(*rows)
    since = [f - d for f, d in zip(firsts, detects)]
    print(f"| {text} | {','.join(sorted(set(str(c) for c in causes)))} | {spread(detects)} | "
          f"{spread(firsts)} | {spread(since)} | {spread(losts, '{:g}')} | {max(orphans)} | "
          f"{','.join(sorted(set(statuses)))} |", flush=True)
