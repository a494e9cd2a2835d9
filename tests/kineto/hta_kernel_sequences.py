# The reference: HolisticTraceAnalysis's get_frequent_cuda_kernel_sequences of each rank of the
# traces in FOLDER for each operator name given, one JSON object on stdout:
#   {"RANK": {"OPERATOR": [{"pattern": "op|kernel|...", "count", "gpu_us", "cpu_us"}]
#                         or {"error": "..."} where HTA stops}}
# HTA 0.5 builds its call stacks with np.unique(..., axis=0) over an array of Python objects,
# which numpy 2 refuses ("The axis argument to unique is not supported for dtype object"); here
# that one call gets the same rows as floats. HTA also writes an overlaid trace into a scratch
# folder, which is left out of the comparison.
#   HTA_DISABLE_NS_ROUNDING=1 python3 hta_kernel_sequences.py FOLDER MIN_LEN OPERATOR...
import json
import logging
import sys
import tempfile

import numpy as np

logging.disable(logging.WARNING)
_unique = np.unique


def unique(ar, *args, **kwargs):
    ar = np.asarray(ar)
    if ar.dtype == object and kwargs.get("axis") is not None:
        ar = ar.astype(np.float64)
    return _unique(ar, *args, **kwargs)


np.unique = unique
from hta.trace_analysis import TraceAnalysis  # noqa: E402

folder, min_len = sys.argv[1], int(sys.argv[2])
analysis = TraceAnalysis(trace_dir=folder)
out = {}
with tempfile.TemporaryDirectory() as scratch:
    for rank in sorted(analysis.t.traces.keys()):
        out[str(rank)] = {}
        for op in sys.argv[3:]:
            try:
                table = analysis.get_frequent_cuda_kernel_sequences(
                    operator_name=op, output_dir=scratch, min_pattern_len=min_len, rank=rank,
                    top_k=5, visualize=False)
            except Exception as e:  # noqa: BLE001 (HTA's own failure is the answer recorded)
                out[str(rank)][op] = {"error": "%s: %s" % (type(e).__name__, e)}
                continue
            out[str(rank)][op] = [{"pattern": str(r["pattern"]), "count": int(r["count"]),
                                   "gpu_us": float(r["GPU kernel duration (us)"]),
                                   "cpu_us": float(r["CPU op duration (us)"])}
                                  for _, r in table.iterrows()]
print(json.dumps(out))
