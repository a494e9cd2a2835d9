# The reference: HolisticTraceAnalysis' time series behind its trace with counters
# (get_queue_length_time_series, get_memory_bw_time_series) for every rank of the traces in each
# folder given, one JSON object on stdout:
#   {"FOLDER": {"RANK": {"queue": {"STREAM": [[t, value], ...]},
#                        "bandwidth": {"Memcpy DtoH": [[t, GB/s], ...]},
#                        "annotations": {"NAME": {"count", "sum", "mean", "min", "max", "std"}},
#                        "bandwidth_summary": {"Memcpy DtoH": {"count", "mean", "std", "min",
#                                                              "25%", "50%", "75%", "max"}}}}}
# "annotations": HTA's GPU user annotation breakdown (get_gpu_user_annotation_breakdown, every
# name kept: num_kernels above their number), in µs. "bandwidth_summary": HTA's memory bandwidth
# summary (get_memory_bw_summary), GB/s; std null for one point.
# t: µs after the rank's first ProfilerStep (the CPU's); one point per distinct time, the value
# after the last change at that time (HTA's unstable sort orders changes at one time as it
# pleases).
# HTA reads a trace without the CPU events from its last step-named event on, and without the GPU
# activities those (or nobody in the trace) launched. With --as-read DIR, the traces HTA read are
# also written: DIR/N/rankR.json.gz for the N-th folder, the raw records HTA kept (every record
# but a complete event, and the complete events HTA's trace holds), for dtrain to read the same.
#   HTA_DISABLE_NS_ROUNDING=1 python3 hta_counters.py [--as-read DIR] FOLDER...
import gzip
import json
import logging
import os
import sys

logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis  # noqa: E402


def last_per_time(df, column, start):
    points = {}
    for ts, value in zip(df.ts, df[column]):
        points[float(ts) - start] = float(value)  # rows in time order: the last one stays
    return sorted([t, v] for t, v in points.items())


def write_as_read(analysis, rank, path):
    kept = set(int(i) for i in analysis.t.get_trace(rank)["index"])
    raw = analysis.t.get_raw_trace_for_one_rank(rank=rank)
    raw["traceEvents"] = [e for i, e in enumerate(raw["traceEvents"])
                          if e.get("ph") != "X" or i in kept]
    with gzip.open(path, "wt") as f:
        json.dump(raw, f)


def analyse(folder, as_read):
    analysis = TraceAnalysis(trace_dir=folder)
    symbols = analysis.t.symbol_table.get_sym_id_map()
    ranks = sorted(analysis.t.traces.keys())
    queues = analysis.get_queue_length_time_series(ranks=ranks)
    bandwidth = analysis.get_memory_bw_time_series(ranks=ranks)
    steps = {v for k, v in symbols.items() if "ProfilerStep" in k}
    regions = analysis.get_gpu_user_annotation_breakdown(visualize=False, num_kernels=1 << 30)
    described = analysis.get_memory_bw_summary(ranks=ranks)
    out = {}
    for rank in ranks:
        trace = analysis.t.get_trace(rank)
        named = trace[trace.name.isin(steps)]
        cpu = named[named.cat == symbols.get("user_annotation")]
        start = float(cpu.ts.min())
        r = {"queue": {}, "bandwidth": {}, "annotations": {}, "bandwidth_summary": {}}
        if described is not None:
            for (row_rank, kind), row in described.iterrows():
                if row_rank == rank:
                    r["bandwidth_summary"][kind] = {
                        stat: (None if row[("memory_bw_gbps", stat)] != row[("memory_bw_gbps", stat)]
                               else float(row[("memory_bw_gbps", stat)]))
                        for stat in ("count", "mean", "std", "min", "25%", "50%", "75%", "max")}
        if regions is not None:
            for _, row in regions[regions["rank"] == rank].iterrows():
                r["annotations"][row["name"]] = {
                    "count": round(row["sum (us)"] / row["mean (us)"]) if row["mean (us)"] else 0,
                    "sum": float(row["sum (us)"]), "mean": float(row["mean (us)"]),
                    "min": float(row["min (us)"]), "max": float(row["max (us)"]),
                    "std": float(row["stddev"])}
        if as_read is not None:
            os.makedirs(as_read, exist_ok=True)
            write_as_read(analysis, rank, os.path.join(as_read, "rank%d.json.gz" % rank))
        q = queues.get(rank)
        if q is not None:
            for stream, df in q.groupby("stream"):
                r["queue"][str(int(stream))] = last_per_time(df.sort_values("ts", kind="stable"),
                                                             "queue_length", start)
        b = bandwidth.get(rank)
        if b is not None:
            for kind, df in b.groupby("name"):
                r["bandwidth"][kind] = last_per_time(df.sort_values("ts", kind="stable"),
                                                     "memory_bw_gbps", start)
        out[str(rank)] = r
    return out


args = sys.argv[1:]
as_read = None
if args[:1] == ["--as-read"]:
    as_read, args = args[1], args[2:]
print(json.dumps({folder: analyse(folder, None if as_read is None else os.path.join(as_read, str(n)))
                  for n, folder in enumerate(args)}))
