# The reference: HolisticTraceAnalysis's temporal breakdown of the traces in a folder, one JSON
# object per rank on stdout: {"rank", "idle_pct", "compute_pct", "non_compute_pct", "kernel_us"}.
import json
import logging
import sys

logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis  # noqa: E402

df = TraceAnalysis(trace_dir=sys.argv[1]).get_temporal_breakdown(visualize=False)
print(json.dumps([{"rank": int(r["rank"]),
                   "idle_pct": float(r["idle_time_pctg"]),
                   "compute_pct": float(r["compute_time_pctg"]),
                   "non_compute_pct": float(r["non_compute_time_pctg"]),
                   "kernel_us": float(r["kernel_time(us)"])} for _, r in df.iterrows()]))
