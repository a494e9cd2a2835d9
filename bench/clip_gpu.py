#!/usr/bin/env python3
"""The measuring half of bench/clip_gpu.sh (which builds and then calls `measure`).

  clip_gpu.py measure --clip BUILD/dtrain-clip --out DIR [--device cuda|cpu] [...]
  clip_gpu.py check DIR/clip_gpu_results.json

`measure` runs `dtrain-clip --version`, a smoke training, `dtrain-clip check` (the step's
computations on the device against references), then dtrain-clip and
bench/clip_reference.py (eager, compile, compile-reduce-overhead, open_clip) at each batch size on
synthetic data, with --profile bench/clip_gpu_profile.sh at the first batch size right after its
runs (the GPU time per step by kernel class, before the next batch size: one call of a GPU
machine then says both how fast and where the time goes), and writes ONE results file, clip_gpu_results.json (rewritten after every run, so
a run cut short still leaves what it measured): the measurements, a human-readable table
(`jq -r '.table[]'`) and "what to fix" (the gaps to the targets). `check` says whether a results
file has every section with numbers (the CTest bench.clip_gpu_cpu runs it).

How each figure is taken:
  samples/s    dtrain-clip: batch x timed steps / their wall time, from its timeline (between
               the ends of consecutive OPTIMIZER spans, GRAPH_STEP with --cuda-graphs: the whole
               step, the loss.item() that waits for the GPU included); the metrics' own
               samples_per_s is kept beside it. dtrain-clip-graphs is dtrain-clip with
               --cuda-graphs on (captured on CUDA; on the CPU the same static-buffer step, eager).
               dtrain-clip-gpu-spans is dtrain-clip with --gpu-timed-spans on: its samples/s
               against dtrain-clip's is the cost of the CUDA-event spans (target <= 1 %), and
               its trace's gpu track gives the device-timed phases (gpu_phases_ms).
               dtrain-clip-casts-per-use is dtrain-clip with --weight-copies off: autocast
               casts each matrix weight at its use (what the copies save, side by side).
               dtrain-clip-fused-bias-grad is dtrain-clip with --fused-bias-grad on: the bias
               gradients from the weight gradients' cuBLASLt products, not sums afterwards.
               Reference: batch x timed steps / the time between two device synchronisations.
  MFU          counted matmul FLOPs (clip_reference.train_flops_per_sample: 3x forward, the
               whole text context as OpenCLIP computes it) x samples/s / the GPU's peak dense
               bf16 FLOP/s from PEAK_BF16_TFLOPS (none on the CPU or for an unlisted GPU).
  data wait    dtrain-clip: WAIT_FOR_DATA time (blocked on the loader) / step time, timeline;
               on synthetic batches, and with dtrain-clip-jpeg on real files: 4096 Fashion-MNIST
               test images exported as JPEG at the model's size (224x224 RGB for vit-b-32),
               16 WebDataset shards, decoded by up to 8 loader threads (cores - 4).
  phases       dtrain-clip: DATA, FORWARD, BACKWARD, OPTIMIZER spans and the rest of the step,
               CPU clock (on a GPU the spans time the host: launches and the syncs inside);
               plus `dtrain timeline --summary --json` when `dtrain` is beside dtrain-clip.
  peak memory  GPU: nvidia-smi memory.used sampled every 100 ms during each run, minus the
               figure before it (dtrain-clip's metrics report no memory), for every program
               alike; the reference's torch.cuda.max_memory_allocated/reserved beside it.
               CPU: the process's peak resident set (wait4 rusage).
"""
import argparse
import datetime
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from clip_flops import train_flops_per_sample  # noqa: E402

RESULTS_NAME = "clip_gpu_results.json"
SCHEMA = "dtrain-clip-gpu-bench/1"
IMPLS = ["dtrain-clip", "dtrain-clip-casts-per-use", "dtrain-clip-fused-bias-grad",
         "dtrain-clip-graphs", "dtrain-clip-gpu-spans", "dtrain-clip-whole-text",
         "dtrain-clip-jpeg", "eager",
         "compile-reduce-overhead", "compile", "open_clip"]
# dtrain-clip's own variants: the flags each adds to the same command.
CLIP_VARIANTS = {"dtrain-clip": [], "dtrain-clip-graphs": ["--cuda-graphs", "on"],
                 # Autocast's cast of each matrix weight at its use, as before --weight-copies.
                 "dtrain-clip-casts-per-use": ["--weight-copies", "off"],
                 # Bias gradients from the weight gradients' cuBLASLt products (BGRADB).
                 "dtrain-clip-fused-bias-grad": ["--fused-bias-grad", "on"],
                 "dtrain-clip-gpu-spans": ["--gpu-timed-spans", "on"],
                 # The same work as the references: every text position, not cut at the batch's
                 # longest caption (synthetic captions are a few tokens; OpenCLIP computes 77).
                 "dtrain-clip-whole-text": ["--text-context", "whole"],
                 # Real files: JPEG WebDataset shards at the model's size, decoded by loader
                 # threads (its dataset flags replace the synthetic source's: Bench.clip_cmd).
                 "dtrain-clip-jpeg": []}
# dtrain-clip-jpeg's shards: Fashion-MNIST test images exported at the model's size, as JPEG.
JPEG_SAMPLES = 4096
JPEG_SHARD_SIZE = 256
# Spans that end a dtrain-clip step: OPTIMIZER (eager), GRAPH_STEP (--cuda-graphs).
STEP_END_SPANS = ("OPTIMIZER", "GRAPH_STEP")
REFERENCE = "eager"
# The pseudo-program of the run order that stands for bench/clip_gpu_profile.sh.
PROFILE = "kernel profile"
# The programs it profiles (bench/clip_gpu_profile.sh).
PROFILED = ("dtrain-clip", "dtrain-clip-casts-per-use", "dtrain-clip-fused-bias-grad",
            "dtrain-clip-whole-text",
            "dtrain-clip-graphs", "eager")

# Peak dense (no sparsity) bf16 tensor-core FLOP/s by device name, first match wins. NVIDIA's
# datasheets give the sparse figure; dense is half of it.
PEAK_BF16_TFLOPS = [
    ("H100 PCIe", 756, "NVIDIA H100 Tensor Core GPU datasheet: H100 PCIe BF16 1,513 TFLOPS "
                       "with sparsity"),
    ("H100 NVL", 835, "NVIDIA H100 Tensor Core GPU datasheet: H100 NVL BF16 1,671 TFLOPS "
                      "with sparsity"),
    ("H100", 989, "NVIDIA H100 Tensor Core GPU datasheet: H100 SXM BF16 1,979 TFLOPS with "
                  "sparsity (\"H100 80GB HBM3\" is the SXM part)"),
    ("H200", 989, "NVIDIA H200 Tensor Core GPU datasheet: BF16 1,979 TFLOPS with sparsity"),
    ("A100", 312, "NVIDIA A100 Tensor Core GPU datasheet: BF16 312 TFLOPS dense"),
]

# The targets "what to fix" measures against.
TARGET_EAGER_RATIO = 1.35      # dtrain-clip samples/s >= 1.35x eager PyTorch with SDPA
TARGET_GRAPHS_RATIO = 1.0      # >= torch.compile reduce-overhead (CUDA graphs)
TARGET_DATA_WAIT = 0.02        # WAIT_FOR_DATA < 2 % of the step
TARGET_MEMORY_RATIO = 1.0      # peak memory <= eager's
TARGET_LOADER_16 = 10000       # JPEG samples/s at the model's size on 16 loader threads (vit-b-32)
LOADER_SAMPLES = 8192          # samples a loader-scaling point reads (two epochs of the shards)

# What a first run of each program may take, for the time budget (scaled by batch after).
FIRST_RUN_GUESS_S = {"cuda": {"dtrain-clip": 40, "dtrain-clip-casts-per-use": 40,
                              "dtrain-clip-fused-bias-grad": 40,
                              "dtrain-clip-graphs": 45,
                              "dtrain-clip-gpu-spans": 40, "dtrain-clip-whole-text": 40,
                              "dtrain-clip-jpeg": 50,
                              "eager": 30,
                              "compile": 150, "compile-reduce-overhead": 170, "open_clip": 40},
                     "cpu": {"dtrain-clip": 15, "dtrain-clip-casts-per-use": 15,
                             "dtrain-clip-fused-bias-grad": 15,
                             "dtrain-clip-graphs": 15,
                             "dtrain-clip-whole-text": 15, "dtrain-clip-jpeg": 20, "eager": 15,
                             "compile": 150, "open_clip": 20}}
# What bench/clip_gpu_profile.sh may take: six programs started, warmed up and profiled, and
# their traces exported (tens of MB each on a GPU).
PROFILE_GUESS_S = {"cuda": 200, "cpu": 85}


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


# ---- running a program ---------------------------------------------------------------------

class MemorySampler:
    """nvidia-smi memory.used (MiB) of one GPU every 100 ms while alive; None without a GPU."""

    def __init__(self, gpu_id):
        self.gpu_id = gpu_id
        self.proc = None
        self.baseline = None

    def query(self):
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used",
                                  "--format=csv,noheader,nounits", "-i", self.gpu_id],
                                 capture_output=True, text=True, timeout=30)
            return float(out.stdout.split()[0]) if out.returncode == 0 else None
        except (OSError, IndexError, ValueError, subprocess.TimeoutExpired):
            return None

    def __enter__(self):
        if self.gpu_id is not None:
            self.baseline = self.query()
            self.proc = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits",
                 "-i", self.gpu_id, "-lms", "100"], stdout=subprocess.PIPE, text=True)
        return self

    def stop(self):
        if self.proc is None:
            return None
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=30)
        samples = [float(x) for x in out.split() if re.fullmatch(r"\d+(\.\d+)?", x)]
        self.proc = None
        if not samples or self.baseline is None:
            return None
        return {"peak_used_mib": max(samples), "baseline_mib": self.baseline,
                "peak_over_baseline_mib": max(samples) - self.baseline, "samples": len(samples)}

    def __exit__(self, *exc):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


def run_program(cmd, log_path, timeout_s, env=None):
    """Runs cmd with stdout+stderr to log_path; returns (status, wall_s, max_rss_mib, output).
    Its own rusage (wait4), so the peak resident set is this child's, not the largest so far."""
    start = time.monotonic()
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        status = rusage = None
        while True:
            pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                break
            if time.monotonic() - start > timeout_s:
                os.killpg(proc.pid, signal.SIGKILL)
                _, status, rusage = os.wait4(proc.pid, 0)
                status = "timeout"
                break
            time.sleep(0.05)
        proc.returncode = 0  # reaped here; keep Popen from waiting again
    wall = time.monotonic() - start
    rc = status if status == "timeout" else os.waitstatus_to_exitcode(status)
    with open(log_path, errors="replace") as f:
        output = f.read()
    return rc, wall, rusage.ru_maxrss / 1024, output


def last_json_line(text):
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    return None


def tail(text, lines=12):
    return "\n".join(text.rstrip().splitlines()[-lines:])


# ---- dtrain-clip's timeline ----------------------------------------------------------------

def read_trace(path, track="compute"):
    """Spans of one track (compute: host clock; gpu: --gpu-timed-spans' CUDA events):
    [(name, begin_us, end_us)] in begin order."""
    with open(path) as f:
        events = json.load(f)
    compute_pids = {e["pid"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"
                    and e.get("args", {}).get("name") == track}
    open_spans, spans = {}, []
    for e in events:
        if e.get("pid") not in compute_pids or e.get("ph") not in ("B", "E"):
            continue
        if e["ph"] == "B":
            open_spans.setdefault(e["name"], []).append(e["ts"])
        elif open_spans.get(e["name"]):
            spans.append((e["name"], open_spans[e["name"]].pop(), e["ts"]))
    return sorted(spans, key=lambda s: s[1])


def step_phases(spans, warmup_steps):
    """Per timed step (after `warmup_steps`): its wall time from one step end (OPTIMIZER or
    GRAPH_STEP) to the next, and the time in each phase inside it. Returns mean ms per step and
    the step count."""
    ends = [end for name, _, end in spans if name in STEP_END_SPANS]
    if len(ends) < warmup_steps + 2:
        return None
    first, last = ends[warmup_steps], ends[-1]
    steps = len(ends) - 1 - warmup_steps
    phases = {}
    for name, begin, end in spans:
        if begin >= first and end <= last:
            phases[name] = phases.get(name, 0) + (end - begin)
    total_us = last - first
    inside = sum(phases.get(n, 0) for n in ("DATA", "FORWARD", "BACKWARD", "OPTIMIZER",
                                            "GRAPH_STEP"))
    out = {name: phases.get(name, 0) / steps / 1000 for name in
           ("DATA", "WAIT_FOR_DATA", "FORWARD", "BACKWARD", "OPTIMIZER", "GRAPH_STEP")}
    out["outside_spans"] = (total_us - inside) / steps / 1000
    out["step"] = total_us / steps / 1000
    return {"steps": steps, "mean_ms": out}


def timeline_summary(dtrain, trace, work):
    """`dtrain timeline --summary --json` of one trace, or None (no dtrain, or it failed)."""
    if not dtrain or not os.access(dtrain, os.X_OK):
        return None
    out = subprocess.run([dtrain, "timeline", "--summary", "--json", "-o",
                          os.path.join(work, "merged-timeline.json"), trace],
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        return {"error": tail(out.stderr or out.stdout, 5)}
    doc = json.loads(out.stdout)
    return {"ranks": [r for r in doc.get("ranks", []) if r.get("trace") == "dtrain"]}


# ---- the bench -------------------------------------------------------------------------------

class Bench:
    def __init__(self, args):
        self.a = args
        self.cuda = args.device != "cpu"
        self.logs = os.path.join(args.out, "clip_gpu_logs")
        os.makedirs(self.logs, exist_ok=True)
        self.path = os.path.join(args.out, RESULTS_NAME)
        self.started = time.time()
        self.precision = "amp_bf16" if self.cuda else "fp32"
        self.fatal = []  # what failed before the runs (build, version, checks), first in "what to fix"
        self._gpu_id = None
        self.jpeg = None  # dtrain-clip-jpeg's shards, once made (Bench.jpeg_shards)
        self.r = {"schema": SCHEMA, "started": now_iso(),
                  "config": {"device": args.device, "model": args.model,
                             "precision": self.precision, "batch_sizes": args.batch_sizes,
                             "impls": args.impls, "steps": args.steps,
                             "warmup_steps": args.warmup_steps, "threads": args.threads,
                             "clip": args.clip, "dtrain": args.dtrain or None,
                             "python": args.python, "budget_deadline": args.deadline,
                             "profile": args.profile},
                  "build": self.read_build(), "environment": {}, "version": {}, "smoke": {},
                  "checks": {},
                  "flops": {}, "peak_tflops": {}, "runs": [], "profile": None, "loader": None,
                  "targets": [],
                  "switches": [], "what_to_fix": [],
                  "table": [], "notes": [
                      "MFU and TFLOP/s of every program use the same count: the model's matmul "
                      "FLOPs as OpenCLIP computes them (bench/clip_flops.py: whole text context, "
                      "every position of the last block), so their ratios are the samples/s "
                      "ratios. dtrain-clip computes less: its text tower stops at the batch's "
                      "longest caption and the last block of each tower computes only the pooled "
                      "row.",
                      "The reference programs take their batches from two made in advance on the "
                      "device (no loader); dtrain-clip runs its own synthetic loader and upload."]}

    def read_build(self):
        if self.a.build_json and os.path.exists(self.a.build_json):
            with open(self.a.build_json) as f:
                return json.load(f)
        return {"note": "no build record"}

    def left_s(self):
        return self.a.deadline - time.time() if self.a.deadline else float("inf")

    def child_env(self):
        env = dict(os.environ)
        for name in ("DTRAIN_TIMELINE", "HOROVOD_TIMELINE", "DTRAIN_LOG_DIR"):
            env.pop(name, None)
        if not self.cuda:
            env["OMP_NUM_THREADS"] = env["OPENBLAS_NUM_THREADS"] = str(self.a.threads)
        return env

    # -- environment, version, smoke

    def environment(self):
        env = {"host": os.uname().nodename, "cpus": os.cpu_count(),
               "load_before": list(os.getloadavg())}
        self.r["environment"] = env
        probe = ("import json,torch;d={'torch':torch.__version__,'torch_cuda':torch.version.cuda,"
                 "'cuda_available':torch.cuda.is_available()}\n"
                 "if torch.cuda.is_available():\n"
                 f" p=torch.cuda.get_device_properties({self.device_index()});d.update(gpu=p.name,"
                 "gpu_memory_mib=p.total_memory/2**20,compute_capability=f'{p.major}.{p.minor}',"
                 "gpu_uuid=str(getattr(p,'uuid','')))\n"
                 "print(json.dumps(d))")
        out = subprocess.run([self.a.python, "-c", probe], capture_output=True, text=True,
                             timeout=120, env=self.child_env())
        env.update(last_json_line(out.stdout) or {"torch_probe_error": tail(out.stderr, 5)})
        try:
            with open("/proc/cpuinfo") as f:
                env["cpu"] = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), None)
        except OSError:
            pass
        if self.cuda:
            smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                  "--format=csv,noheader", "-i", self.gpu_id() or "0"],
                                 capture_output=True, text=True, timeout=30)
            env["nvidia_smi"] = smi.stdout.strip() or tail(smi.stderr, 3)
        name = env.get("gpu") if self.cuda else None
        peak = next(((t, s) for key, t, s in PEAK_BF16_TFLOPS if name and key in name), None)
        if peak:
            self.r["peak_tflops"] = {"value": peak[0], "dtype": "bf16 dense", "source": peak[1]}
        else:
            self.r["peak_tflops"] = {"value": None, "note": (
                f"no peak FLOP/s known for {name!r}: MFU left out (add it to PEAK_BF16_TFLOPS "
                "in bench/clip_gpu.py with its datasheet)") if self.cuda else
                "CPU run: no peak FLOP/s table for CPUs, MFU left out; achieved TFLOP/s kept"}

    def device_index(self):
        return int(self.a.device.split(":")[1]) if ":" in self.a.device else 0

    def gpu_id(self):
        """nvidia-smi's name for the GPU the runs use (its UUID, else the first of
        CUDA_VISIBLE_DEVICES, else 0); None on the CPU or without nvidia-smi."""
        if not self.cuda or not shutil.which("nvidia-smi"):
            return None
        if self._gpu_id is None:
            uuid = self.r["environment"].get("gpu_uuid") or ""
            visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
            for candidate in (uuid if uuid.startswith("GPU-") else "GPU-" + uuid if uuid else "",
                              visible if ":" not in self.a.device else "",
                              str(self.device_index())):
                if candidate and MemorySampler(candidate).query() is not None:
                    self._gpu_id = candidate
                    break
            else:
                self._gpu_id = str(self.device_index())
        return self._gpu_id

    def version(self):
        if not os.access(self.a.clip, os.X_OK):
            self.r["version"] = {"ok": False, "note": f"no dtrain-clip at {self.a.clip}"}
            return False
        rc, wall, _, out = run_program([self.a.clip, "--version"],
                                       os.path.join(self.logs, "version.log"), 60, self.child_env())
        lines = [l for l in out.splitlines()[1:] if l.strip()]
        want = [r"dtrain-clip \d+\.\d+\.\d+", r"libtorch 2\.\d+\.\d+", r"cuda (\S+)",
                r"nccl (\S+)", r"gloo (yes|no)"]
        ok = rc == 0 and len(lines) == 5 and all(re.fullmatch(w, l) for w, l in zip(want, lines))
        cuda_line = lines[2] if len(lines) > 2 else ""
        note = None
        if ok and self.cuda and cuda_line == "cuda none":
            ok, note = False, "this dtrain-clip was built without CUDA: check the torch it found"
        self.r["version"] = {"ok": ok, "exit": rc, "lines": lines, "note": note}
        return ok

    def clip_cmd(self, batch, steps, work, timeline, impl="dtrain-clip"):
        data = ["--dataset-type", "synthetic"]
        if impl == "dtrain-clip-jpeg":
            data = ["--dataset-type", "webdataset", "--train-data", self.jpeg["train_data"],
                    "--workers", str(self.jpeg["workers"])]
        cmd = [self.a.clip, "train", "--model", self.a.model, *data,
               "--batch-size", str(batch), "--train-num-samples", str(batch * steps),
               "--max-steps", str(steps), "--zeroshot-frequency", "0", "--save-frequency", "0",
               "--logs", work, "--metrics-file", os.path.join(work, "metrics.jsonl"),
               "--log-every-n-steps", "1000", "--seed", "0",
               "--device", self.a.device, "--precision", self.precision]
        if self.a.bpe_vocab:
            cmd += ["--bpe-vocab", self.a.bpe_vocab]
        if not self.cuda:
            cmd += ["--threads", str(self.a.threads)]
        if timeline:
            cmd += ["--timeline-path", os.path.join(work, "timeline.json")]
        return cmd + CLIP_VARIANTS[impl]

    def smoke(self):
        work = os.path.join(self.logs, "smoke")
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        batch = 16
        rc, wall, _, out = run_program(self.clip_cmd(batch, 3, work, timeline=False),
                                       os.path.join(self.logs, "smoke.log"),
                                       min(300, max(self.left_s(), 30)), self.child_env())
        rows = self.metrics(work)
        losses = [r["loss"] for r in rows if "loss" in r and "event" not in r]
        end = [r for r in rows if r.get("event") == "end"]
        ok = (rc == 0 and len(losses) == 3 and all(math.isfinite(x) for x in losses)
              and len(end) == 1)
        self.r["smoke"] = {"ok": ok, "exit": rc, "wall_s": wall, "batch_size": batch, "steps": 3,
                           "losses": losses, "output_tail": None if ok else tail(out)}
        return ok

    def device_checks(self):
        """`dtrain-clip check`: the step's computations on this device against references."""
        rc, wall, _, out = run_program([self.a.clip, "check", "--device", self.a.device],
                                       os.path.join(self.logs, "check.log"),
                                       min(300, max(self.left_s(), 30)), self.child_env())
        lines = [l for l in out.splitlines() if l.startswith(("PASS", "FAIL"))]
        ok = rc == 0 and len(lines) > 0 and all(l.startswith("PASS") for l in lines)
        self.r["checks"] = {"ok": ok, "exit": rc, "wall_s": wall, "lines": lines,
                            "output_tail": None if ok else tail(out)}
        if not ok:
            failed = [l for l in lines if l.startswith("FAIL")] or [f"exit {rc}: {tail(out, 3)}"]
            self.fatal.extend(f"dtrain-clip check: {l}" for l in failed)
        return ok

    @staticmethod
    def metrics(work):
        path = os.path.join(work, "metrics.jsonl")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [json.loads(l) for l in f if l.strip()]

    # -- one measured run

    def guess_s(self, impl, batch):
        done = [r for r in self.r["runs"] if r["impl"] == impl and r.get("wall_s")]
        if done:
            # Start-up and compilation stay; the steps scale with the batch.
            last = done[-1]
            stepping = (last.get("step_ms") or 0) / 1000 * (self.a.warmup_steps + self.a.steps)
            stepping = min(stepping, last["wall_s"])
            return (last["wall_s"] - stepping) * 1.1 + stepping * batch / last["batch_size"]
        return FIRST_RUN_GUESS_S["cuda" if self.cuda else "cpu"].get(impl, 60)

    def jpeg_shards(self):
        """dtrain-clip-jpeg's shards, made once: None when they cannot be (the reason kept)."""
        if self.jpeg is not None:
            return self.jpeg if self.jpeg.get("train_data") else None
        self.jpeg = {}
        if not self.a.fashion_mnist:
            self.jpeg["reason"] = ("no Fashion-MNIST test split here (carry it: bench/clip_gpu.sh "
                                   "--carry-prepare, or install dataset-fashion-mnist)")
            return None
        size, channels = (224, 3) if self.a.model.startswith("vit") else (28, 1)
        out = os.path.join(self.logs, "jpeg-shards")
        shutil.rmtree(out, ignore_errors=True)
        cmd = [self.a.clip, "export-data", "--format", "webdataset", "--split", "test",
               "--source", self.a.fashion_mnist, "--limit", str(JPEG_SAMPLES),
               "--shard-size", str(JPEG_SHARD_SIZE), "--image-size", str(size),
               "--channels", str(channels), "--image-format", "jpeg", "--out", out]
        rc, wall, _, text = run_program(cmd, os.path.join(self.logs, "jpeg-shards.log"),
                                        max(min(self.left_s() - 5, 120), 10), self.child_env())
        pattern = next((l.split(" ", 1)[1] for l in text.splitlines()
                        if l.startswith("--train-data ")), None)
        if rc != 0 or not pattern:
            self.jpeg["reason"] = f"export-data failed (exit {rc}): {tail(text, 3)}"
            return None
        files = [os.path.join(out, f) for f in os.listdir(out) if f.endswith(".tar")]
        # Loader threads: what a user would give a GPU node, leaving cores to the trainer.
        workers = max(1, min(8, (os.cpu_count() or 2) - 4)) if self.cuda else 1
        self.jpeg = {"train_data": pattern, "samples": JPEG_SAMPLES, "image_size": size,
                     "channels": channels, "workers": workers, "export_s": wall,
                     "shard_kib_per_sample": sum(os.path.getsize(f) for f in files) / JPEG_SAMPLES / 1024}
        self.r["jpeg_shards"] = self.jpeg
        return self.jpeg

    def loader_scaling(self):
        """The loader alone on this machine's cores: dtrain-clip-jpeg's shards loaded as the GPU
        path takes them (8-bit pixels, batch 256) by 1, 2, 4, ... threads up to the cores
        (data_loader_bench --scaling, built beside dtrain-clip), wall-clock samples/s."""
        bench = os.path.join(os.path.dirname(self.a.clip), "data_loader_bench")
        if not os.access(bench, os.X_OK):
            return {"status": "skipped", "reason": f"no data_loader_bench beside {self.a.clip}"}
        if self.left_s() < 40:
            return {"status": "skipped", "reason": f"time budget: {self.left_s():.0f} s left"}
        if self.jpeg_shards() is None:
            return {"status": "skipped", "reason": self.jpeg["reason"]}
        j = self.jpeg
        cmd = [bench, "--scaling", j["train_data"], "--image-size", str(j["image_size"]),
               "--channels", str(j["channels"]), "--samples", str(LOADER_SAMPLES)]
        rc, wall, _, out = run_program(cmd, os.path.join(self.logs, "loader.log"),
                                       max(min(self.left_s() - 5, 180), 10), self.child_env())
        line = next((l for l in reversed(out.splitlines()) if l.startswith("{")), None)
        try:
            result = json.loads(line) if rc == 0 and line else None
        except ValueError:
            result = None
        if not result or not result.get("rates"):
            return {"status": "failed", "exit": rc, "wall_s": wall, "output_tail": tail(out)}
        result.update(status="ok", wall_s=wall, shard_kib_per_sample=j["shard_kib_per_sample"])
        return result

    def loader_lines(self):
        """The loader's scaling as the table shows it, and what it says of the 16-thread goal."""
        ld = self.r["loader"]
        if not ld:
            return [], None
        if ld.get("status") != "ok":
            why = ld.get("reason") or tail(ld.get("output_tail") or "", 1)
            return [f"loader threads: {ld.get('status')} ({why})"], None
        rates = ld["rates"]
        lines = [f"loader alone, {ld['image_size']}x{ld['image_size']}x{ld['channels']} JPEG shards "
                 f"({ld['shard_kib_per_sample']:.1f} KiB a sample) to 8-bit pixels, batch 256, "
                 f"{ld['cores']} cores (data_loader_bench --scaling):",
                 "  threads    samples/s  per CPU-second",
                 *(f"  {r['workers']:>7} {r['samples_per_s']:>12.0f} {r['samples_per_cpu_s']:>15.0f}"
                   for r in rates)]
        if not self.a.model.startswith("vit"):
            return lines, None
        best = max(rates, key=lambda r: r["samples_per_s"])
        at16 = next((r for r in rates if r["workers"] == 16), None)
        if at16:
            ok = at16["samples_per_s"] >= TARGET_LOADER_16
            text = (f"loader: {at16['samples_per_s']:.0f} samples/s on 16 threads "
                    f"(goal {TARGET_LOADER_16}): " + ("met" if ok else "faster decoding"))
        else:
            ok = None
            text = (f"loader: {best['samples_per_s']:.0f} samples/s on {best['workers']} threads, "
                    f"the most on {ld['cores']} cores; the 16-thread goal ({TARGET_LOADER_16}) "
                    "needs 16 cores")
        return lines + ["  " + text], (ok, text)

    def run_one(self, impl, batch):
        entry = {"impl": impl, "batch_size": batch}
        guess = self.guess_s(impl, batch)
        if self.left_s() < guess + 5:
            entry.update(status="skipped", reason=f"time budget: {self.left_s():.0f} s left, "
                                                  f"this run may take ~{guess:.0f} s")
            return entry
        if impl == "dtrain-clip-jpeg" and self.jpeg_shards() is None:
            entry.update(status="skipped", reason=self.jpeg["reason"])
            return entry
        work = os.path.join(self.logs, f"{impl}-b{batch}")
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        total = self.a.warmup_steps + self.a.steps
        if impl in CLIP_VARIANTS:
            # One step more: the timed steps are measured from the end of the last warmup step.
            cmd = self.clip_cmd(batch, total + 1, work, timeline=True, impl=impl)
        else:
            cmd = [self.a.python, os.path.join(HERE, "clip_reference.py"), "--model", self.a.model,
                   "--mode", impl, "--device", self.a.device, "--precision", self.precision,
                   "--batch-size", str(batch), "--steps", str(self.a.steps),
                   "--warmup-steps", str(self.a.warmup_steps)]
            if not self.cuda:
                cmd += ["--threads", str(self.a.threads)]
        with MemorySampler(self.gpu_id()) as sampler:
            rc, wall, rss, out = run_program(cmd, os.path.join(work, "output.log"),
                                             max(self.left_s() - 5, 10), self.child_env())
            gpu_mem = sampler.stop()
        entry.update(wall_s=wall, exit=rc, max_rss_mib=rss)
        if gpu_mem:
            entry["nvidia_smi"] = gpu_mem
        if rc != 0:
            if impl == "open_clip" and "No module named" in out:
                entry.update(status="skipped", reason="open_clip is not importable here: "
                             + next((l for l in out.splitlines() if "No module named" in l), ""))
            else:
                entry.update(status="failed", output_tail=tail(out))
            return entry
        try:
            if impl in CLIP_VARIANTS:
                self.read_clip_run(entry, work, batch)
            else:
                self.read_reference_run(entry, out)
        except (OSError, ValueError, KeyError, TypeError) as e:
            entry.update(status="failed", reason=f"reading its output: {e!r}",
                         output_tail=tail(out))
            return entry
        entry["peak_memory_mib"], entry["peak_memory_from"] = self.peak_memory(entry)
        entry["status"] = "ok"
        return entry

    def run_profile(self, batch):
        """bench/clip_gpu_profile.sh at `batch`: the kernel classes per program into the results."""
        prof = {"batch_size": batch, "tables": os.path.join(self.a.out, "clip_kernels.txt")}
        guess = PROFILE_GUESS_S["cuda" if self.cuda else "cpu"]
        if self.left_s() < guess + 5:
            prof.update(status="skipped", reason=f"time budget: {self.left_s():.0f} s left, the "
                                                 f"profile may take ~{guess} s")
            return prof
        summary = os.path.join(self.a.out, "clip_kernels.json")
        for stale in (summary, prof["tables"]):
            if os.path.exists(stale):
                os.remove(stale)
        cmd = ["bash", os.path.join(HERE, "clip_gpu_profile.sh"),
               "--build-dir", os.path.dirname(os.path.abspath(self.a.clip)), "--out", self.a.out,
               "--batch-size", str(batch), "--device", self.a.device]
        if not self.cuda:
            cmd += ["--warmup-steps", "1", "--steps", "1"]  # operator counts, not timings
        rc, wall, _, out = run_program(cmd, os.path.join(self.logs, "profile.log"),
                                       max(self.left_s() - 5, 10), self.child_env())
        prof.update(wall_s=wall, exit=rc)
        failed = [line for line in out.splitlines() if line.endswith(" failed:")]
        try:
            with open(summary) as f:
                programs = json.load(f)
        except (OSError, ValueError) as e:
            prof.update(status="failed", reason=f"no kernel summary ({e!r})", output_tail=tail(out))
            return prof
        prof["programs"] = {name: {k: s[k] for k in ("kernel_ms", "busy_ms", "kernels_per_step",
                                                     "classes", "ops")}
                            for name, s in programs.items()}
        if rc != 0 or failed:
            prof.update(status="failed", reason="; ".join(failed) or f"exit {rc}",
                        output_tail=tail(out))
        else:
            prof["status"] = "ok"
        return prof

    def read_clip_run(self, entry, work, batch):
        spans = read_trace(os.path.join(work, "timeline.json"))
        phases = step_phases(spans, self.a.warmup_steps)
        if phases is None:
            raise ValueError("the timeline has too few OPTIMIZER (or GRAPH_STEP) spans")
        m = phases["mean_ms"]
        rows = self.metrics(work)
        end = [r for r in rows if r.get("event") == "end"]
        # The metrics' own step clock over the same steps as the timeline's timed ones.
        last = max((r["step"] for r in rows if "step_s" in r), default=0)
        timed = [r["step_s"] for r in rows
                 if "step_s" in r and r["step"] > last - phases["steps"]]
        entry.update(samples_per_s=batch / (m["step"] / 1000), step_ms=m["step"],
                     timed_steps=phases["steps"], phases_ms=m,
                     data_wait_share=m["WAIT_FOR_DATA"] / m["step"],
                     metrics_step_ms=1000 * sum(timed) / len(timed) if timed else None,
                     metrics_samples_per_s=end[-1]["samples_per_s"] if end else None)
        if end and "gpu_spans_resolved" in end[-1]:
            entry["gpu_spans"] = {k: end[-1][k] for k in ("gpu_spans_resolved",
                                                          "gpu_spans_forced_waits")}
            gpu = step_phases(read_trace(os.path.join(work, "timeline.json"), "gpu"),
                              self.a.warmup_steps)
            entry["gpu_phases_ms"] = gpu["mean_ms"] if gpu else None
        if end and "graph_replays" in end[-1]:
            entry["cuda_graphs"] = {k: end[-1][k] for k in ("graph_captured", "graph_warmup_steps",
                                                            "graph_replays", "graph_eager_fallbacks")}
        summary = timeline_summary(self.a.dtrain, os.path.join(work, "timeline.json"), work)
        entry["dtrain_timeline_summary"] = summary if summary is not None else {
            "note": "no dtrain beside dtrain-clip (the runtime built on its own): phases from "
                    "the trace, parsed here"}

    def read_reference_run(self, entry, out):
        j = last_json_line(out)
        if j is None:
            raise ValueError("no JSON line in its output")
        entry.update(samples_per_s=j["samples_per_s"], step_ms=j["step_ms"],
                     timed_steps=j["steps"], warmup_s=j["warmup_s"],
                     first_loss=j["first_loss"], last_loss=j["last_loss"],
                     parameters=j["parameters"])
        for key in ("max_memory_allocated_mib", "max_memory_reserved_mib"):
            if key in j:
                entry["torch_" + key] = j[key]

    def peak_memory(self, entry):
        if self.cuda:
            smi = entry.get("nvidia_smi")
            if smi:
                return smi["peak_over_baseline_mib"], "nvidia-smi memory.used peak - before"
            return None, "no nvidia-smi readings"
        return entry["max_rss_mib"], "peak resident set (wait4)"

    # -- derived figures, targets, table

    def derive(self):
        peak = self.r["peak_tflops"].get("value")
        flops = self.r["flops"]
        for b in self.a.batch_sizes:
            flops[str(b)] = train_flops_per_sample(self.a.model, b)
        for run in self.r["runs"]:
            if run.get("status") != "ok":
                continue
            b = run["batch_size"]
            eager = self.find(REFERENCE, b)
            run["ratio_to_eager"] = run["samples_per_s"] / eager["samples_per_s"] if eager else None
            run["achieved_tflops"] = run["samples_per_s"] * flops[str(b)]["train"] / 1e12
            run["mfu"] = run["achieved_tflops"] / peak if peak else None
        self.r["targets"] = self.targets()
        self.r["switches"] = self.switches()
        self.r["what_to_fix"] = self.fatal + [t["text"] for t in self.r["targets"]
                                              if t["status"] != "met"]
        verdict = self.loader_lines()[1]
        if verdict and verdict[0] is False:
            self.r["what_to_fix"].append(verdict[1])
        prof = self.r["profile"]
        if prof and prof.get("status") != "ok":
            self.r["what_to_fix"].append(f"kernel profile {prof.get('status')}: "
                                         f"{prof.get('reason')} (bench/clip_gpu_profile.sh, "
                                         f"log in {os.path.join(self.logs, 'profile.log')})")
        self.r["table"] = self.table()

    def find(self, impl, batch):
        return next((r for r in self.r["runs"] if r["impl"] == impl and r["batch_size"] == batch
                     and r.get("status") == "ok"), None)

    def why_missing(self, impl, batch):
        r = next((r for r in self.r["runs"] if r["impl"] == impl and r["batch_size"] == batch), None)
        if r is None:
            return "not run" + ("" if impl in self.a.impls else " (not in --impls)")
        return r.get("reason") or r.get("status")

    def switches(self):
        """Each of dtrain-clip's variants that differ by a flag from its defaults, against
        dtrain-clip at the same batch size: which way the flag moves samples/s, to decide a
        default by (one run each: the host's load moves a run by up to 18 % on a shared machine,
        H200 bench of 2026-12-04)."""
        out = []
        for b in self.a.batch_sizes:
            dt = self.find("dtrain-clip", b)
            for impl, flags in CLIP_VARIANTS.items():
                run = self.find(impl, b)
                if impl == "dtrain-clip" or not flags or not dt or not run:
                    continue
                ratio = run["samples_per_s"] / dt["samples_per_s"]
                out.append({"batch_size": b, "impl": impl, "flags": " ".join(flags),
                            "ratio": ratio,
                            "text": f"batch {b}: {' '.join(flags)} ({impl}): "
                                    f"{run['samples_per_s']:.0f} against dtrain-clip's "
                                    f"{dt['samples_per_s']:.0f} samples/s "
                                    f"({100 * (ratio - 1):+.1f} %)"})
        return out

    def targets(self):
        out = []
        for b in self.a.batch_sizes:
            dt, eager = self.find("dtrain-clip", b), self.find(REFERENCE, b)
            graphs = self.find("compile-reduce-overhead", b)

            def target(kind, goal, status, text, measured=None):
                out.append({"batch_size": b, "target": kind, "goal": goal, "status": status,
                            "measured": measured, "text": f"batch {b}: {text}"})

            goal = f">= {TARGET_EAGER_RATIO}x eager PyTorch (SDPA) samples/s"
            if dt and eager:
                ratio = dt["samples_per_s"] / eager["samples_per_s"]
                need = TARGET_EAGER_RATIO * eager["samples_per_s"]
                target("speed_vs_eager", goal, "met" if ratio >= TARGET_EAGER_RATIO else "missed",
                       f"dtrain-clip {dt['samples_per_s']:.0f} samples/s = {ratio:.2f}x eager "
                       f"({eager['samples_per_s']:.0f}); target {TARGET_EAGER_RATIO}x = "
                       f"{need:.0f} samples/s: " + ("met" if ratio >= TARGET_EAGER_RATIO else
                                                   f"{100 * (need / dt['samples_per_s'] - 1):+.0f} % "
                                                   f"samples/s to go ({1000 * b / need:.1f} ms a "
                                                   f"step instead of {dt['step_ms']:.1f})"),
                       ratio)
            else:
                target("speed_vs_eager", goal, "not measured",
                       f"speed vs eager not measured (dtrain-clip: "
                       f"{'ok' if dt else self.why_missing('dtrain-clip', b)}; eager: "
                       f"{'ok' if eager else self.why_missing(REFERENCE, b)})")

            goal = ">= torch.compile mode=reduce-overhead (CUDA graphs) samples/s"
            if dt and graphs:
                ratio = dt["samples_per_s"] / graphs["samples_per_s"]
                target("speed_vs_cuda_graphs", goal, "met" if ratio >= TARGET_GRAPHS_RATIO else "missed",
                       f"dtrain-clip {dt['samples_per_s']:.0f} samples/s = {ratio:.2f}x "
                       f"torch.compile reduce-overhead ({graphs['samples_per_s']:.0f})"
                       + ("" if ratio >= TARGET_GRAPHS_RATIO else
                          f": {100 * (1 / ratio - 1):+.0f} % samples/s to go"), ratio)
            else:
                why = ("CUDA graphs are GPU only" if not self.cuda else
                       f"dtrain-clip: {'ok' if dt else self.why_missing('dtrain-clip', b)}; "
                       f"reduce-overhead: {self.why_missing('compile-reduce-overhead', b)}")
                target("speed_vs_cuda_graphs", goal, "not measured",
                       f"speed vs torch.compile reduce-overhead not measured ({why})")

            goal = f"WAIT_FOR_DATA < {100 * TARGET_DATA_WAIT:.0f} % of the step"
            if dt:
                share = dt["data_wait_share"]
                target("data_wait", goal, "met" if share < TARGET_DATA_WAIT else "missed",
                       f"dtrain-clip waits for data {100 * share:.1f} % of the step "
                       f"({dt['phases_ms']['WAIT_FOR_DATA']:.2f} of {dt['step_ms']:.1f} ms); "
                       f"target < {100 * TARGET_DATA_WAIT:.0f} %"
                       + ("" if share < TARGET_DATA_WAIT else
                          " (loader threads: --workers; pinned upload: --pixels uint8)"), share)
            else:
                target("data_wait", goal, "not measured", "data wait not measured (dtrain-clip: "
                       f"{self.why_missing('dtrain-clip', b)})")

            if "dtrain-clip-jpeg" in self.a.impls:
                jp = self.find("dtrain-clip-jpeg", b)
                goal = f"WAIT_FOR_DATA < {100 * TARGET_DATA_WAIT:.0f} % of the step on JPEG files"
                if jp:
                    share, j = jp["data_wait_share"], self.jpeg
                    ok = share < TARGET_DATA_WAIT
                    target("data_wait_jpeg", goal, "met" if ok else "missed",
                           f"dtrain-clip on {j['image_size']}x{j['image_size']} JPEG shards "
                           f"({j['shard_kib_per_sample']:.1f} KiB of shard a sample, {j['workers']} loader "
                           f"thread{'s' if j['workers'] != 1 else ''}) "
                           f"waits for data {100 * share:.1f} % of the step "
                           f"({jp['phases_ms']['WAIT_FOR_DATA']:.2f} of {jp['step_ms']:.1f} ms); "
                           f"target < {100 * TARGET_DATA_WAIT:.0f} %"
                           + ("" if ok else ": more loader threads (--workers), or faster decoding"),
                           share)
                else:
                    target("data_wait_jpeg", goal, "not measured",
                           "data wait on JPEG files not measured (dtrain-clip-jpeg: "
                           f"{self.why_missing('dtrain-clip-jpeg', b)})")

            goal = "peak memory <= eager PyTorch's"
            if dt and eager and dt.get("peak_memory_mib") and eager.get("peak_memory_mib"):
                ratio = dt["peak_memory_mib"] / eager["peak_memory_mib"]
                target("peak_memory", goal, "met" if ratio <= TARGET_MEMORY_RATIO else "missed",
                       f"dtrain-clip peak memory {dt['peak_memory_mib']:.0f} MiB = {ratio:.2f}x "
                       f"eager's {eager['peak_memory_mib']:.0f} MiB ({dt['peak_memory_from']})"
                       + ("" if ratio <= TARGET_MEMORY_RATIO else
                          f": {dt['peak_memory_mib'] - eager['peak_memory_mib']:.0f} MiB to cut"),
                       ratio)
            else:
                target("peak_memory", goal, "not measured", "peak memory vs eager not measured")

            if dt and dt.get("metrics_step_ms"):
                ratio = dt["metrics_step_ms"] / dt["step_ms"]
                if abs(ratio - 1) > 0.05:
                    target("metrics_step_clock", "metrics step_s within 5 % of the wall clock",
                           "missed", f"dtrain-clip's metrics step_s averages "
                           f"{dt['metrics_step_ms']:.1f} ms over the timed steps, the wall clock "
                           f"{dt['step_ms']:.1f} ms ({ratio:.2f}x): its samples_per_s is off by as "
                           "much (the steps' times must add up to the wall clock: "
                           "Trainer::TrainStep's step clock)", ratio)
        return out

    def table(self):
        e = self.r["environment"]
        where = e.get("gpu") or e.get("cpu") or "?"
        lines = [f"dtrain-clip vs PyTorch: {self.a.model}, {self.precision}, synthetic data, "
                 f"{self.a.steps} timed steps after {self.a.warmup_steps}; {where}; "
                 f"torch {e.get('torch', '?')}",
                 f"{'batch':>5} {'program':<24} {'samples/s':>10} {'x eager':>8} {'TFLOP/s':>8} "
                 f"{'MFU':>6} {'peak MiB':>9} {'step ms':>8}  note"]
        for b in self.a.batch_sizes:
            for impl in self.a.impls:
                r = next((r for r in self.r["runs"] if r["impl"] == impl and r["batch_size"] == b),
                         None)
                if r is None:
                    continue
                if r.get("status") != "ok":
                    lines.append(f"{b:>5} {impl:<24} {r.get('status', '?'):>10}  "
                                 f"{(r.get('reason') or tail(r.get('output_tail') or '', 1))[:90]}")
                    continue
                fmt = lambda v, f: format(v, f) if isinstance(v, (int, float)) else "-"  # noqa: E731
                note = ""
                if impl in CLIP_VARIANTS:
                    note = f"data wait {100 * r['data_wait_share']:.1f} %"
                    if impl == "dtrain-clip-jpeg" and self.jpeg:
                        w = self.jpeg["workers"]
                        note += f", JPEG files, {w} loader thread{'s' if w != 1 else ''}"
                    if r.get("cuda_graphs"):
                        g = r["cuda_graphs"]
                        note += (f", {'captured' if g['graph_captured'] else 'not captured'}, "
                                 f"{g['graph_replays']} replays")
                elif r.get("warmup_s") is not None:
                    note = f"warmup {r['warmup_s']:.0f} s"
                lines.append(f"{b:>5} {impl:<24} {r['samples_per_s']:>10.1f} "
                             f"{fmt(r.get('ratio_to_eager'), '8.2f'):>8} "
                             f"{fmt(r.get('achieved_tflops'), '8.2f'):>8} "
                             f"{fmt(100 * r['mfu'], '5.1f') + '%' if r.get('mfu') is not None else '-':>6} "
                             f"{fmt(r.get('peak_memory_mib'), '9.0f'):>9} {r['step_ms']:>8.1f}  {note}")
        lines.append("peak MiB: " + ("nvidia-smi memory.used peak minus before each run (CUDA "
                                      "context included)" if self.cuda else "peak resident set"))
        phase_rows = [r for r in self.r["runs"] if r["impl"] in CLIP_VARIANTS and r.get("status") == "ok"]
        if phase_rows:
            lines.append("dtrain-clip step phases, ms per step (timeline, host clock):")
            lines.append(f"{'batch':>5} {'program':<19} {'DATA':>8} {'(wait)':>8} {'FORWARD':>8} "
                         f"{'BACKWARD':>9} {'OPTIMIZER':>10} {'GRAPH':>8} {'outside':>8} {'step':>8}")
            for r in phase_rows:
                m = r["phases_ms"]
                lines.append(f"{r['batch_size']:>5} {r['impl']:<19} {m['DATA']:>8.2f} "
                             f"{m['WAIT_FOR_DATA']:>8.2f} {m['FORWARD']:>8.2f} "
                             f"{m['BACKWARD']:>9.2f} {m['OPTIMIZER']:>10.2f} "
                             f"{m.get('GRAPH_STEP', 0):>8.2f} {m['outside_spans']:>8.2f} "
                             f"{m['step']:>8.2f}")
            lines.append("GRAPH: dtrain-clip-graphs' whole step (forward, backward, optimizer) in "
                         "one span: the replay's launch on CUDA, the eager step on the CPU")
            lines.append("outside: the rest of the step" + (
                " (the wait for the last step's loss and logit scale, a step behind the GPU, is there)"
                if self.cuda else " (logging)"))
        lines += self.profile_table()
        lines += self.loader_lines()[0]
        fl = self.r["flops"].get(str(self.a.batch_sizes[0]))
        if fl:
            lines.append(f"FLOPs per sample (train, 3x forward, text context {fl['text_tokens']}): "
                         f"{fl['train'] / 1e9:.2f} GFLOP; peak: "
                         + (f"{self.r['peak_tflops']['value']} TFLOP/s bf16 dense "
                            f"({self.r['peak_tflops']['source']})" if self.r['peak_tflops'].get('value')
                            else self.r['peak_tflops'].get('note', '?')))
        return lines

    def profile_table(self):
        prof = self.r["profile"]
        if not prof or not prof.get("programs"):
            return []
        progs = prof["programs"]
        width = max(12, *(len(n) for n in progs)) + 2
        lines = [f"GPU ms per step by kernel class, batch {prof['batch_size']} "
                 f"(bench/clip_gpu_profile.sh; kernels by name, ATen operators: {prof['tables']}):"]
        if not any(p["kernel_ms"] > 0 for p in progs.values()):
            return lines + ["  none on the CPU: the ATen operators per step where the programs "
                            "differ are in that file"]
        lines.append(f"{'class':<16}" + "".join(f"{n:>{width}}" for n in progs))
        classes = sorted({c for p in progs.values() for c in p["classes"]},
                         key=lambda c: -max(p["classes"].get(c, 0) for p in progs.values()))
        for c in classes:
            lines.append(f"{c:<16}" + "".join(f"{p['classes'].get(c, 0):>{width}.2f}"
                                              for p in progs.values()))
        for label, key in (("all kernels", "kernel_ms"), ("GPU busy", "busy_ms"),
                           ("kernels/step", "kernels_per_step")):
            lines.append(f"{label:<16}" + "".join(f"{p[key]:>{width}.2f}" for p in progs.values()))
        return lines

    def save(self):
        self.derive()
        self.r["finished"] = now_iso()
        self.r["elapsed_s"] = time.time() - self.started
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.r, f, indent=1)
        os.replace(tmp, self.path)

    def run(self):
        self.environment()
        build = self.r["build"]
        if build.get("ok") is False and not build.get("built_here"):
            self.fatal.append(f"no dtrain-clip in --build-dir {build.get('build_dir')}")
        elif build.get("ok") is False:
            self.fatal.append("the build failed (" + (build.get("log") or "no log") + "): "
                              + " / ".join((build.get("log_tail") or [])[-3:]))
        elif not self.version():
            self.fatal.append("dtrain-clip --version failed or printed unexpected lines: "
                              f"{self.r['version']}")
        if self.fatal:
            self.save()
            self.report()
            return 1
        smoke_ok = self.smoke()
        checks_ok = self.device_checks()
        self.save()
        order = [(impl, b) for impl in self.a.impls if impl != "open_clip"
                 for b in self.a.batch_sizes]
        # Every program at the first batch size first, then the next: a cut-short run still has
        # one complete comparison. open_clip last (a peer, not a target).
        order = sorted(order, key=lambda ib: self.a.batch_sizes.index(ib[1]))
        if self.a.profile:
            # Where the time goes at the first batch size, before the second batch size's runs.
            first = self.a.batch_sizes[0]
            at = max((i + 1 for i, (_, b) in enumerate(order) if b == first), default=0)
            order.insert(at, (PROFILE, first))
        order += [("open_clip", b) for b in self.a.batch_sizes if "open_clip" in self.a.impls]
        for impl, b in order:
            print(f"clip_gpu: {impl} batch {b} ({self.left_s():.0f} s left)" if self.a.deadline
                  else f"clip_gpu: {impl} batch {b}", flush=True)
            if impl == PROFILE:
                self.r["profile"] = self.run_profile(b)
            else:
                self.r["runs"].append(self.run_one(impl, b))
            self.save()
        print("clip_gpu: loader threads against samples/s" + (f" ({self.left_s():.0f} s left)"
                                                               if self.a.deadline else ""), flush=True)
        self.r["loader"] = self.loader_scaling()
        self.r["environment"]["load_after"] = list(os.getloadavg())
        self.save()
        self.report()
        ok = smoke_ok and checks_ok and all(r.get("status") != "failed" for r in self.r["runs"]) and \
            (self.r["profile"] or {}).get("status") != "failed"
        return 0 if ok else 1

    def report(self):
        print("\n".join(self.r["table"]))
        v, s = self.r["version"], self.r["smoke"]
        print(f"version: {'ok' if v.get('ok') else 'FAILED'} ({'; '.join(v.get('lines', []))})")
        if s:
            print(f"smoke training: {'ok' if s.get('ok') else 'FAILED'} (losses {s.get('losses')})")
        for line in (self.r.get("checks") or {}).get("lines", []):
            print("dtrain-clip check: " + line)
        if self.r["switches"]:
            print("flags against dtrain-clip's defaults (one run each; the host's load moves a "
                  "run by up to 18 %):")
            for sw in self.r["switches"]:
                print("  - " + sw["text"])
        print("what to fix:" if self.r["what_to_fix"] else "what to fix: nothing, every target met")
        for line in self.r["what_to_fix"]:
            print("  - " + line)
        print(f"results: {self.path}")


# ---- check -----------------------------------------------------------------------------------

def number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def check(path):
    """Problems with a results file: every section there, with numbers."""
    with open(path) as f:
        r = json.load(f)
    problems = []
    for key in ("config", "environment", "build", "version", "smoke", "flops", "peak_tflops",
                "runs", "targets", "switches", "what_to_fix", "table"):
        if key not in r:
            problems.append(f"no section {key!r}")
    if problems:
        return problems
    if not r["version"].get("ok"):
        problems.append(f"version not ok: {r['version']}")
    if not r["smoke"].get("ok"):
        problems.append(f"smoke training not ok: {r['smoke']}")
    checks = r.get("checks") or {}
    if not checks.get("ok"):
        problems.append(f"dtrain-clip check not ok: {checks.get('lines') or checks.get('output_tail')}")
    peak = r["peak_tflops"]
    if not (number(peak.get("value")) or peak.get("note")):
        problems.append("peak_tflops has neither a value nor a note")
    for b in r["config"]["batch_sizes"]:
        fl = r["flops"].get(str(b), {})
        if not (number(fl.get("train")) and fl["train"] > 0):
            problems.append(f"batch {b}: no FLOP count")
        for impl in r["config"]["impls"]:
            run = next((x for x in r["runs"] if x["impl"] == impl and x["batch_size"] == b), None)
            if run is None:
                problems.append(f"batch {b}: no {impl} run")
                continue
            if run.get("status") == "skipped" and run.get("reason") and impl not in ("dtrain-clip", REFERENCE):
                continue
            if run.get("status") != "ok":
                problems.append(f"batch {b}: {impl} {run.get('status')}: "
                                f"{run.get('reason') or run.get('output_tail')}")
                continue
            keys = ["samples_per_s", "step_ms", "ratio_to_eager", "achieved_tflops", "peak_memory_mib"]
            if impl in CLIP_VARIANTS:
                keys.append("data_wait_share")
                phases = run.get("phases_ms", {})
                for p in ("DATA", "WAIT_FOR_DATA", "FORWARD", "BACKWARD", "OPTIMIZER", "step"):
                    if not number(phases.get(p)):
                        problems.append(f"batch {b}: {impl} phase {p} is not a number")
                if "dtrain_timeline_summary" not in run:
                    problems.append(f"batch {b}: {impl} has no timeline summary section")
            if impl == "dtrain-clip-graphs":
                g = run.get("cuda_graphs") or {}
                want_captured = r["config"].get("device", "cuda") != "cpu"
                if not number(g.get("graph_replays")) or g["graph_replays"] < 1:
                    problems.append(f"batch {b}: dtrain-clip-graphs reports no replays: {g!r}")
                elif g.get("graph_captured") is not want_captured:
                    problems.append(f"batch {b}: dtrain-clip-graphs captured={g.get('graph_captured')}"
                                    f" on {r['config'].get('device')}")
                if not number(phases.get("GRAPH_STEP")) or phases["GRAPH_STEP"] <= 0:
                    problems.append(f"batch {b}: dtrain-clip-graphs has no GRAPH_STEP time")
            for k in keys:
                if not number(run.get(k)):
                    problems.append(f"batch {b}: {impl} {k} is not a number: {run.get(k)!r}")
            if "mfu" not in run or not (number(run["mfu"]) or (run["mfu"] is None and peak.get("note"))):
                problems.append(f"batch {b}: {impl} mfu is neither a number nor explained")

        def ran(impl):
            return any(x["impl"] == impl and x["batch_size"] == b and x.get("status") == "ok"
                       for x in r["runs"])
        for impl, flags in CLIP_VARIANTS.items():
            if flags and ran(impl) and ran("dtrain-clip") and not any(
                    sw["impl"] == impl and sw["batch_size"] == b and number(sw.get("ratio"))
                    for sw in r["switches"]):
                problems.append(f"batch {b}: no comparison of {impl}'s flags with dtrain-clip")
        kinds = {t["target"] for t in r["targets"] if t["batch_size"] == b}
        wanted = ["speed_vs_eager", "speed_vs_cuda_graphs", "data_wait", "peak_memory"]
        if "dtrain-clip-jpeg" in r["config"]["impls"]:
            wanted.append("data_wait_jpeg")
        for kind in wanted:
            if kind not in kinds:
                problems.append(f"batch {b}: no target {kind}")
        for t in r["targets"]:
            if t["batch_size"] == b and t["status"] in ("met", "missed") and not number(t["measured"]):
                problems.append(f"batch {b}: target {t['target']} has no measured number")
    if r["config"].get("profile"):
        prof = r.get("profile") or {}
        if prof.get("status") != "ok":
            problems.append(f"kernel profile {prof.get('status', 'missing')}: "
                            f"{prof.get('reason') or prof.get('output_tail')}")
        progs = prof.get("programs") or {}
        for name in PROFILED:
            p = progs.get(name)
            if p is None:
                problems.append(f"kernel profile: no {name}")
            elif not p.get("ops"):
                problems.append(f"kernel profile: {name} has no ATen operators")
            elif r["config"].get("device", "cuda") != "cpu" and not p.get("kernel_ms", 0) > 0:
                problems.append(f"kernel profile: {name} has no GPU kernels")
    loader = r.get("loader") or {}
    if loader.get("status") == "ok":
        rates = loader.get("rates") or []
        if not rates or not all(number(x.get("samples_per_s")) and x["samples_per_s"] > 0 and
                                number(x.get("samples_per_cpu_s")) for x in rates):
            problems.append(f"loader scaling without numbers: {rates!r}")
    elif not (loader.get("status") == "skipped" and loader.get("reason")):
        problems.append(f"loader scaling {loader.get('status', 'missing')}: "
                        f"{loader.get('reason') or loader.get('output_tail')}")
    if not r["table"]:
        problems.append("empty table")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--clip", required=True, help="the dtrain-clip to measure")
    m.add_argument("--dtrain", default="", help="dtrain, for `dtrain timeline --summary --json`")
    m.add_argument("--out", required=True)
    m.add_argument("--device", default="cuda")
    m.add_argument("--model", default="vit-b-32")
    m.add_argument("--bpe-vocab", default="")
    m.add_argument("--batch-sizes", default="256,512",
                   type=lambda s: [int(x) for x in s.split(",") if x])
    m.add_argument("--impls", default=",".join(IMPLS),
                   type=lambda s: [x for x in s.split(",") if x])
    m.add_argument("--steps", type=int, default=40, help="timed steps per run")
    m.add_argument("--warmup-steps", type=int, default=10)
    m.add_argument("--threads", type=int, default=1, help="CPU runs: compute threads")
    m.add_argument("--python", default=sys.executable, help="the python with torch")
    m.add_argument("--deadline", type=float, default=0,
                   help="epoch seconds by which everything must be done (0: none)")
    m.add_argument("--build-json", default="", help="the build record clip_gpu.sh wrote")
    m.add_argument("--fashion-mnist", default="",
                   help="Fashion-MNIST's folder (test split), for dtrain-clip-jpeg's shards")
    m.add_argument("--profile", action="store_true",
                   help="bench/clip_gpu_profile.sh at the first batch size, after its runs")
    c = sub.add_parser("check")
    c.add_argument("results")
    args = parser.parse_args()
    if args.command == "check":
        problems = check(args.results)
        for p in problems:
            print("clip_gpu check: " + p)
        print(f"clip_gpu check: {args.results}: " + ("every section has numbers" if not problems
                                                      else f"{len(problems)} problem(s)"))
        return 1 if problems else 0
    unknown = [i for i in args.impls if i not in IMPLS]
    if unknown:
        parser.error(f"--impls: unknown {unknown}; choose from {IMPLS}")
    return Bench(args).run()


if __name__ == "__main__":
    sys.exit(main())
