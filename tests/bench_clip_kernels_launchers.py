#!/usr/bin/env python3
"""bench/clip_kernels.py names the operators that launched each kernel, on a real trace: the
recorded H100 DDP job of tests/fixtures/kineto (rank 0, 4 profiled steps). What launched a kernel
is read from the profiler's correlation ids, so the checks below are facts of that trace: DDP's
bucket-to-gradient copies (Memcpy DtoD) come from the reducer's copy_bucket_to_grad, the
optimizer's multi-tensor kernels from its _foreach_ operators, ToCopyBackward0's casts from
autograd's engine; and every launch of every kernel is accounted for once."""
import json
import os
import subprocess
import sys
import tempfile

root = sys.argv[1]
trace = os.path.join(root, "tests", "fixtures", "kineto", "ddp-2ranks-gloo-rank0.json.gz")
with tempfile.TemporaryDirectory() as work:
    out = os.path.join(work, "kernels.json")
    text = subprocess.run([sys.executable, os.path.join(root, "bench", "clip_kernels.py"),
                           "--steps", "4", "--json", out, f"rank0={trace}"],
                          check=True, capture_output=True, text=True).stdout
    with open(out) as f:
        summary = json.load(f)["rank0"]

failures = []


def expect(ok, what):
    if not ok:
        failures.append(what)


by = summary["launched_by"]
dtod = dict((chain, n) for n, chain in by.get("Memcpy DtoD (Device -> Device)", []))
expect(dtod.get("torch.distributed.ddp.reducer::copy_bucket_to_grad > aten::copy_") == 16.0,
       f"Memcpy DtoD launchers: {dtod}")
foreach = {chain for kernel, chains in by.items() if "multi_tensor_apply_kernel" in kernel
           for _, chain in chains}
expect({"aten::_foreach_mul_", "aten::_foreach_addcmul_", "aten::_foreach_lerp_"} <= foreach,
       f"multi-tensor kernels' launchers: {sorted(foreach)}")
casts = {chain for kernel, chains in by.items() if "direct_copy_kernel" in kernel
         for _, chain in chains}
expect("backward ToCopyBackward0 > aten::copy_" in casts, f"copy kernels' launchers: {casts}")
for ms, launches, kernel in summary["top"]:
    counted = sum(n for n, _ in by.get(kernel, []))
    expect(abs(counted - launches) < 1e-9, f"{kernel[:60]}: {launches} launches, {counted} named")
expect("<-  16.0  torch.distributed.ddp.reducer::copy_bucket_to_grad > aten::copy_" in text,
       "the table shows no launcher line for the DtoD copies")
if failures:
    print("\n".join(failures))
    sys.exit(1)
print(f"every launch of {len(summary['top'])} kernels named; DtoD copies from the DDP reducer")
