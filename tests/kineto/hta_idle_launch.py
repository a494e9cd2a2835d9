# The reference: HolisticTraceAnalysis's idle time breakdown and CUDA kernel launch stats of the
# traces in each folder given (every rank, HTA's defaults), one JSON object on stdout:
#   {"FOLDER": {"RANK": {"streams": {"STREAM": {"host_wait_us", "kernel_wait_us", "other_us"}},
#             "launches": {"launches", "delay_median_us", "delay_max_us", "delayed", "slow_calls",
#                          "shorter_than_call"},
#             "queues": {"STREAM": {"launches", "mean", "max", "full_us"}}}}}
# The queues are HTA's queue length summary, and its time blocked on a full queue (1,024).
import json
import logging
import sys

logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis  # noqa: E402


def analyse(folder):
    analysis = TraceAnalysis(trace_dir=folder)
    ranks = sorted(analysis.t.traces.keys())
    idle, _ = analysis.get_idle_time_breakdown(ranks=ranks, visualize=False)
    launches = analysis.get_cuda_kernel_launch_stats(ranks=ranks, visualize=False)
    series = analysis.get_queue_length_time_series(ranks=ranks)
    queue_summary = analysis.get_queue_length_summary_from_time_series(series)
    blocked = analysis.get_time_spent_blocked_on_full_queue(series)
    out = {}
    for rank in ranks:
        streams = {}
        for _, row in idle[idle["rank"] == rank].iterrows():
            cause = {"host_wait": "host_wait_us", "kernel_wait": "kernel_wait_us",
                     "other": "other_us"}[row["idle_category"]]
            streams.setdefault(str(int(row["stream"])), {})[cause] = float(row["idle_time"])
        queues = {}
        for (r, stream), row in queue_summary.iterrows():
            if r != rank:
                continue
            queues[str(int(stream))] = {
                "launches": int(row[("queue_length", "count")]) // 2,
                "mean": float(row[("queue_length", "mean")]),
                "max": int(row[("queue_length", "max")]),
                "full_us": 0.0,
            }
        for _, row in blocked[blocked["rank"] == rank].iterrows():
            queues[str(int(row["stream"]))]["full_us"] = float(row["duration_at_max_queue_length"])
        d = launches[rank]
        out[str(rank)] = {
            "streams": streams,
            "launches": {
                "launches": int(len(d)),
                "delay_median_us": float(d.launch_delay.median()) if len(d) else 0.0,
                "delay_max_us": float(d.launch_delay.max()) if len(d) else 0.0,
                "delayed": int((d.launch_delay > 100).sum()),
                "slow_calls": int((d.cpu_duration > 50).sum()),
                "shorter_than_call": int((d.gpu_duration < d.cpu_duration).sum()),
            },
            "queues": queues,
        }
    return out


print(json.dumps({folder: analyse(folder) for folder in sys.argv[1:]}))
