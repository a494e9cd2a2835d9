#!/usr/bin/env python3
"""GPU time per training step by kernel, from PyTorch profiler traces, side by side.

  bench/clip_kernels.py --steps N NAME=TRACE.json [NAME=TRACE.json ...] [--top 25]
                        [--launchers 3] [--json FILE]

Each TRACE (.json or .json.gz) is a Chrome trace as torch.profiler and `dtrain-clip train
--profile-steps A-B` write it, covering N steps. Kernels (and device copies and sets) are summed by name, divided by N, and
grouped into classes (matrix products, attention, normalisation, elementwise, reductions,
optimizer, copies) so that programs whose kernels are named differently still line up. Prints
the classes' ms per step for every trace, then each trace's top kernels. The busy time is the
union of the kernels' intervals: the step's wall time minus it is where the GPU waited for the
host.
Under each top kernel, the operators that launched it (the profiler's correlation of a kernel
with its launch, and the operators open on the launching thread at that moment: the outermost
and the innermost), most launches first: where a copy, a cast or an add comes from.
The host's work per step: operators (the traces' cpu_op records, nested ones included), the
top-level ones (each a trip through the dispatcher from the step or autograd's engine) and the
autograd nodes backward ran.
Then the ATen operators per step (the traces' cpu_op records, nested ones included) whose counts
differ between the programs: on a machine without a GPU (`--device cpu` with bfloat16 autocast)
this still shows a program doing work the other does not (a zero fill, an extra copy or cast).
"""
import argparse
import gzip
import json
import re
import sys
from collections import defaultdict

CLASSES = [  # first match wins
    ("attention", re.compile(r"flash|fmha|attention|sdpa|efficient", re.I)),
    ("optimizer", re.compile(r"adam|multi_tensor_apply|fused_adam", re.I)),
    ("matmul", re.compile(r"gemm|cutlass|sm90_xmma|sm80_xmma|nvjet|cublas|wgmma|matmul|splitk",
                          re.I)),
    ("convolution", re.compile(r"conv|cudnn|implicit_convolve|wgrad|dgrad", re.I)),
    ("layer norm", re.compile(r"layer_norm|layernorm|RowwiseMoments|GammaBeta", re.I)),
    ("softmax / loss", re.compile(r"softmax|nll_loss|cross_entropy|log_softmax", re.I)),
    ("reduction", re.compile(r"reduce|sum_kernel|norm_kernel", re.I)),
    ("gelu", re.compile(r"gelu", re.I)),
    ("copy / cast", re.compile(r"copy|cast|memcpy|memset|fill|to_kernel|cat_|CatArray", re.I)),
    ("indexing", re.compile(r"index|gather|scatter|embedding", re.I)),
    ("elementwise", re.compile(r"elementwise|vectorized|unrolled|pointwise|triton", re.I)),
]


def kernel_class(name):
    for label, pattern in CLASSES:
        if pattern.search(name):
            return label
    return "other"


def load(path):
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    kernels = [e for e in events if e.get("ph") == "X"
               and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    launches = [e for e in events if e.get("ph") == "X"
                and e.get("cat") in ("cuda_runtime", "cuda_driver")
                and "correlation" in (e.get("args") or {})]
    return kernels, ops, launches


def short_op(name):
    prefix = "autograd::engine::evaluate_function: "
    if name.startswith(prefix):
        name = "backward " + name[len(prefix):]
    return re.sub(r"torch::autograd::CppNode<(?:[\w:]+::)?(\w+)>", r"\1", name)


def launchers(ops, launches):
    """correlation id -> the operators open on the launching thread when the launch was made:
    "outermost > innermost" (one name when they are one)."""
    by_thread = defaultdict(list)
    for e in ops:  # (start, order, end, name): an operator opens before a launch at its start
        ts = float(e["ts"])
        by_thread[(e.get("pid"), e.get("tid"))].append((ts, 0, ts + float(e.get("dur", 0)),
                                                        e["name"]))
    for e in launches:
        ts = float(e["ts"])
        by_thread[(e.get("pid"), e.get("tid"))].append((ts, 1, ts, e["args"]["correlation"]))
    chains = {}
    for items in by_thread.values():
        items.sort(key=lambda i: (i[0], i[1], -i[2]))
        stack = []
        for start, kind, end, what in items:
            while stack and stack[-1][0] <= start:
                stack.pop()
            if kind == 0:
                stack.append((end, what))
            elif stack:
                outer, inner = short_op(stack[0][1]), short_op(stack[-1][1])
                chains[what] = outer if outer == inner else f"{outer} > {inner}"
            else:
                chains[what] = "(no operator)"
    return chains


def top_level(ops):
    """The operators not inside another on the same thread: what the step itself dispatched
    (or autograd's engine ran), each a trip through the dispatcher on the host."""
    count = 0
    by_thread = defaultdict(list)
    for e in ops:
        by_thread[e.get("tid")].append((float(e["ts"]), float(e.get("dur", 0))))
    for spans in by_thread.values():
        spans.sort(key=lambda sd: (sd[0], -sd[1]))
        end = None
        for ts, dur in spans:
            if end is None or ts >= end:
                count += 1
                end = ts + dur
    return count


def busy_us(kernels):
    spans = sorted((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for e in kernels)
    total, end = 0.0, None
    start = None
    for a, b in spans:
        if end is None or a > end:
            if end is not None:
                total += end - start
            start, end = a, b
        else:
            end = max(end, b)
    if end is not None:
        total += end - start
    return total


def summarize(path, steps):
    kernels, ops, launch_events = load(path)
    chain_of = launchers(ops, launch_events)
    launched_by = defaultdict(lambda: defaultdict(int))
    op_count = defaultdict(int)
    for e in ops:
        op_count[e["name"]] += 1
    nodes = sum(c for n, c in op_count.items()
                if n.startswith("autograd::engine::evaluate_function"))
    by_name = defaultdict(float)
    count = defaultdict(int)
    for e in kernels:
        by_name[e["name"]] += float(e.get("dur", 0))
        count[e["name"]] += 1
        correlation = (e.get("args") or {}).get("correlation")
        if correlation is not None:
            launched_by[e["name"]][chain_of.get(correlation, "(launch not in the trace)")] += 1
    by_class = defaultdict(float)
    for name, us in by_name.items():
        by_class[kernel_class(name)] += us
    span = 0.0
    if kernels:
        span = (max(float(e["ts"]) + float(e.get("dur", 0)) for e in kernels)
                - min(float(e["ts"]) for e in kernels))
    return {
        "kernels_per_step": len(kernels) / steps,
        "kernel_ms": sum(by_name.values()) / steps / 1000,
        "busy_ms": busy_us(kernels) / steps / 1000,
        "span_ms": span / steps / 1000,
        "ops_per_step": len(ops) / steps,
        "top_level_ops_per_step": top_level(ops) / steps,
        "autograd_nodes_per_step": nodes / steps,
        "classes": {k: v / steps / 1000 for k, v in by_class.items()},
        "ops": {n: c / steps for n, c in op_count.items()},
        "top": sorted(((us / steps / 1000, count[n] / steps, n) for n, us in by_name.items()),
                      reverse=True),
        "launched_by": {n: sorted(((c / steps, chain) for chain, c in by.items()), reverse=True)
                        for n, by in launched_by.items()},
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+", help="NAME=TRACE.json")
    ap.add_argument("--steps", type=int, required=True, help="steps each trace covers")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--launchers", type=int, default=3,
                    help="operators shown under each top kernel (most launches first)")
    ap.add_argument("--json", help="also write the summaries here")
    a = ap.parse_args()
    named = []
    for item in a.traces:
        name, sep, path = item.partition("=")
        if not sep:
            sys.exit(f"clip_kernels: expected NAME=TRACE.json, got {item!r}")
        try:
            named.append((name, summarize(path, a.steps)))
        except (OSError, ValueError, KeyError) as e:
            sys.exit(f"clip_kernels: {path}: {e}")
    width = max(14, *(len(n) for n, _ in named))
    print("GPU ms per step by kernel class")
    print(f"{'class':<16}" + "".join(f"{n:>{width + 2}}" for n, _ in named))
    classes = sorted({c for _, s in named for c in s["classes"]},
                     key=lambda c: -max(s["classes"].get(c, 0) for _, s in named))
    for c in classes:
        print(f"{c:<16}" + "".join(f"{s['classes'].get(c, 0):>{width + 2}.2f}" for _, s in named))
    for label, key in (("all kernels", "kernel_ms"), ("GPU busy", "busy_ms"),
                       ("first..last", "span_ms"), ("kernels/step", "kernels_per_step"),
                       ("operators/step", "ops_per_step"),
                       ("top-level ops", "top_level_ops_per_step"),
                       ("autograd nodes", "autograd_nodes_per_step")):
        print(f"{label:<16}" + "".join(f"{s[key]:>{width + 2}.2f}" for _, s in named))
    for name, s in named:
        print(f"\n{name}: top kernels, ms per step (launches per step)")
        for ms, n, kernel in s["top"][:a.top]:
            print(f"  {ms:8.3f} ({n:5.1f})  {kernel[:150]}")
            for per_step, chain in s["launched_by"].get(kernel, [])[:a.launchers]:
                print(f"             <- {per_step:5.1f}  {chain[:140]}")
    differing = [op for op in {o for _, s in named for o in s["ops"]}
                 if len({s["ops"].get(op, 0) for _, s in named}) > 1]
    if differing:
        spread = lambda op: (max(s["ops"].get(op, 0) for _, s in named)
                             - min(s["ops"].get(op, 0) for _, s in named))
        differing.sort(key=lambda op: (-spread(op), op))
        print(f"\nATen operators per step where the programs differ (top {a.top})")
        print(f"{'operator':<36}" + "".join(f"{n:>{width + 2}}" for n, _ in named))
        for op in differing[:a.top]:
            print(f"{op[:36]:<36}" + "".join(f"{s['ops'].get(op, 0):>{width + 2}.1f}"
                                             for _, s in named))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({n: s for n, s in named}, f, indent=1)


if __name__ == "__main__":
    main()
