"""The live processes of a dtrain job on this machine (namespace nodes share its pid space),
found by DTRAIN_JOB=<job> in /proc/*/environ; used by faults.sh and faults_recovery.py."""
import os


def job_processes(job):
    """(pid, env, cmdline) of live processes whose environment has DTRAIN_JOB=job."""
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
    """The pid of rank `rank`'s `sh -c` program."""
    for pid, env, cmdline in job_processes(job):
        if f"RANK={rank}".encode() in env and cmdline.startswith(b"sh\0-c\0"):
            return pid
    raise RuntimeError(f"no shell of rank {rank} in job {job}")
