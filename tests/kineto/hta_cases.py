# Traces that each isolate one way a GPU-time breakdown can go wrong, cut from the recorded H100
# fixture (rank 0 of tests/fixtures/kineto): `dtrain timeline --summary` and HolisticTraceAnalysis'
# temporal breakdown are compared on every one (tests/timeline_kineto_test.cpp).
#   python3 hta_cases.py FIXTURE.json.gz OUT_DIR    -> OUT_DIR/<case>/rank0.json.gz, one per case
import copy
import gzip
import json
import os
import sys

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def load(path):
    with gzip.open(path, "rt") as f:
        return json.load(f)


def events(doc, cat):
    return [e for e in doc["traceEvents"] if e.get("cat") == cat]


def steps(doc):
    return sorted((e for e in events(doc, "user_annotation") if e["name"].startswith("ProfilerStep")),
                  key=lambda e: e["ts"])


class Ids:
    """Fresh correlation ids, above every id in the trace."""

    def __init__(self, doc):
        self.next = 1 + max(e.get("args", {}).get("correlation", 0) for e in doc["traceEvents"])

    def __call__(self):
        self.next += 1
        return self.next


def add_launched(doc, ids, cat, name, gpu_ts, dur, launch_ts, stream=7, extra=None):
    """A GPU activity and the cudaLaunchKernel on the CPU that launched it."""
    corr = ids()
    gpu = {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": gpu_ts, "dur": dur,
           "args": {"device": 0, "context": 1, "stream": stream, "correlation": corr}}
    if extra:
        gpu["args"].update(extra)
    cpu_tid = events(doc, "cuda_runtime")[0]["tid"]
    cpu_pid = events(doc, "cuda_runtime")[0]["pid"]
    launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": cpu_pid,
              "tid": cpu_tid, "ts": launch_ts, "dur": 2.5, "args": {"cbid": 211, "correlation": corr}}
    doc["traceEvents"] += [gpu, launch]
    return gpu


def short_kernels(doc, ids):
    """Every kernel cut into 8 back-to-back pieces: sub-microsecond activity everywhere."""
    out = []
    for e in doc["traceEvents"]:
        if e.get("cat") != "kernel":
            out.append(e)
            continue
        piece = e["dur"] / 8
        for i in range(8):
            k = copy.deepcopy(e)
            k["ts"] = e["ts"] + i * piece
            k["dur"] = piece
            out.append(k)
    doc["traceEvents"] = out


def launch_at_last_step_edge(doc, ids):
    """Kernels launched just before and just after the last profiler step begins."""
    last = steps(doc)[-1]["ts"]
    for i, dt in enumerate([-3.0, -0.4, 0.4, 3.0]):
        add_launched(doc, ids, "kernel", "edge_kernel_%d" % i, last + 40 + 60 * i, 50.0, last + dt)


def before_first_step(doc, ids):
    """Kernels launched (and run) before the first profiler step: warm-up work. Each launch is
    0.25 us off the start of the kernel launched 500 us before it: at exactly the same time HTA's
    queue length orders the two as numpy's unstable sort leaves them."""
    first = steps(doc)[0]["ts"]
    for i in range(20):
        add_launched(doc, ids, "kernel", "warmup_gemm", first - 3000 + 100 * i, 60.0,
                     first - 3500 + 100 * i + 0.25)


def several_streams(doc, ids):
    """Every third kernel moved to a second stream, started halfway into its predecessor."""
    ks = sorted(events(doc, "kernel"), key=lambda e: e["ts"])
    for prev, k in zip(ks, ks[1:]):
        if ks.index(k) % 3 == 0:
            k["args"]["stream"] = 21
            k["tid"] = 21
            k["ts"] = prev["ts"] + prev["dur"] / 2


def memcpy_memset(doc, ids):
    """Device copies and memsets, overlapping compute and filling gaps; every other copy with a
    second one of its kind on another stream, starting 10 µs later (their bandwidths add up while
    both run). Each copy and set gives its bandwidth, as Kineto writes it."""
    ks = sorted(events(doc, "kernel"), key=lambda e: e["ts"])
    for i, k in enumerate(ks[::10]):
        launch = k["ts"] - 200
        dur = k["dur"] + 30.0
        copy = {"bytes": 1 << 20, "memory bandwidth (GB/s)": (1 << 20) / (dur * 1e3)}
        add_launched(doc, ids, "gpu_memcpy", "Memcpy DtoD (Device -> Device)", k["ts"] + k["dur"] / 2,
                     dur, launch, stream=22, extra=copy)
        if i % 2 == 0:
            add_launched(doc, ids, "gpu_memcpy", "Memcpy DtoD (Device -> Device)",
                         k["ts"] + k["dur"] / 2 + 10, dur, launch + 2, stream=23, extra=copy)
        add_launched(doc, ids, "gpu_memset", "Memset (Device)", k["ts"] + k["dur"] + 5, 7.5,
                     launch + 1, stream=22,
                     extra={"bytes": 4096, "memory bandwidth (GB/s)": 4096 / 7.5e3})


def nccl_overlap(doc, ids):
    """NCCL kernels on a communication stream, half hidden behind compute."""
    ks = sorted(events(doc, "kernel"), key=lambda e: e["ts"])
    for k in ks[::15]:
        add_launched(doc, ids, "kernel", NCCL, k["ts"] + k["dur"] / 2, k["dur"] * 2 + 40.0,
                     k["ts"] - 100, stream=30)


def gpu_annotations(doc, ids):
    """What Kineto puts on GPU timelines beside kernels, in the form torch 2.11 writes it: user
    annotations (the profiler steps among them, lagging the CPU; no stream, as in the fixture),
    stream waits (stream and correlation, no duration) and a device-wide synchronisation (no
    stream, a duration). A stream wait carries the correlation of the cudaStreamWaitEvent that
    asked for it."""
    for s in steps(doc):
        doc["traceEvents"].append({"ph": "X", "cat": "gpu_user_annotation", "name": s["name"],
                                   "pid": 0, "tid": 7, "ts": s["ts"] + 5000.0, "dur": s["dur"],
                                   "args": {"External id": 1}})
    rt = events(doc, "cuda_runtime")
    for r in [r for r in rt if r["name"] == "cudaStreamWaitEvent"][::4]:
        doc["traceEvents"].append({"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event",
                                   "pid": 0, "tid": 7, "ts": r["ts"] + 30.0, "dur": 0.0,
                                   "args": {"cuda_sync_kind": "Stream Wait Event", "device": 0,
                                            "context": 1, "stream": 7,
                                            "correlation": r["args"]["correlation"]}})
    r = rt[len(rt) // 2]
    doc["traceEvents"].append({"ph": "X", "cat": "cuda_sync", "name": "Context Sync", "pid": 0,
                               "tid": 7, "ts": r["ts"] + 10.0, "dur": 250.0,
                               "args": {"cuda_sync_kind": "Context Sync", "device": 0,
                                        "stream": -1, "correlation": r["args"]["correlation"]}})


def stream_sync(doc, ids):
    """A CPU thread of its own in each step launches a kernel that lasts nearly the step on a
    stream of its own, waits for it (cudaStreamSynchronize, with the Stream Sync record CUPTI
    writes when the profiler records synchronisation), then works past the step's end: the step's
    critical path runs through the kernel and from its end back to the CPU."""
    cpu_pid = events(doc, "cuda_runtime")[0]["pid"]
    tid = events(doc, "cuda_runtime")[0]["tid"] + 1000
    for s in steps(doc):
        t0 = s["ts"] + 100.0
        gpu = add_launched(doc, ids, "kernel", "long_gemm", t0 + 10.0, s["dur"] - 1000.0, t0,
                           stream=300)
        launch = doc["traceEvents"][-1]
        launch["tid"] = tid
        kernel_end = gpu["ts"] + gpu["dur"]
        corr = ids()
        doc["traceEvents"] += [
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": cpu_pid,
             "tid": tid, "ts": t0 + 5.0, "dur": kernel_end + 3.0 - (t0 + 5.0),
             "args": {"cbid": 131, "correlation": corr}},
            {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 300,
             "ts": t0 + 6.0, "dur": kernel_end + 1.0 - (t0 + 6.0),
             "args": {"cuda_sync_kind": "Stream Sync", "device": 0, "context": 1, "stream": 300,
                      "correlation": corr}},
            {"ph": "X", "cat": "cpu_op", "name": "aten::add_", "pid": cpu_pid, "tid": tid,
             "ts": kernel_end + 13.0, "dur": 2000.0, "args": {}}]


def kernel_past_the_end(doc, ids):
    """A kernel launched in the traced steps that runs past everything else."""
    last = steps(doc)[-1]
    end = max(e["ts"] + e["dur"] for e in events(doc, "kernel"))
    add_launched(doc, ids, "kernel", "long_tail_kernel", end - 100, 5000.0, last["ts"] - 50)


def full_launch_queue(doc, ids):
    """1,100 launches on a stream of their own, 1 us apart, whose kernels start only after the
    last of them: the stream's launch queue passes CUDA's 1,024."""
    start = steps(doc)[1]["ts"] + 1000.0
    for i in range(1100):
        add_launched(doc, ids, "kernel", "queued_kernel", start + 1300.0 + 3.0 * i, 3.0,
                     start + 1.0 * i, stream=200)


CASES = [short_kernels, launch_at_last_step_edge, before_first_step, several_streams,
         memcpy_memset, nccl_overlap, gpu_annotations, kernel_past_the_end, full_launch_queue,
         stream_sync]


def main():
    fixture, out = sys.argv[1], sys.argv[2]
    for case in [None] + CASES:
        doc = load(fixture)
        name = "fixture" if case is None else case.__name__
        if case is not None:
            case(doc, Ids(doc))
        os.makedirs(os.path.join(out, name), exist_ok=True)
        with gzip.open(os.path.join(out, name, "rank0.json.gz"), "wt") as f:
            json.dump(doc, f)
        print(name)


if __name__ == "__main__":
    main()
