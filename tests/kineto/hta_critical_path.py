# The reference: HolisticTraceAnalysis' critical path analysis of every profiled step of every
# rank of the traces in each folder given (annotation "ProfilerStep", instance 0, 1, ...), one JSON
# object on stdout:
#   {"FOLDER": {"RANK": [{"step", "step_us", "whole", "path_us", "bound_by_us": {"cpu_bound",
#                         ...}, "edges"}, ...]}}
# "whole": HTA kept every event of the step: some event starts after it ends (HTA drops what starts
# after the last event named like a step starts, and a GPU copy of a step's annotation, lagging the
# CPU, may be that last one).
# HTA counts every event named like a step, the GPU's copies of a step's record_function too:
# only the CPU's (user_annotation) are analysed, by their place among them all.
# The times are those the path was found with (see "used" below).
# With --overlay DIR, each step also has "flows": the arrows HTA's overlay of the path
# (overlay_critical_path_analysis, written under DIR) draws, [cat, from, to] in µs after the step's
# start as the overlaid trace gives them (HTA writes them in whole µs).
# HTA 0.5 calls DataFrame.drop with both axis and columns, which pandas 3 refuses; the reference
# runs with drop taking columns alone (what HTA means), and nothing else changed.
#   python3 hta_critical_path.py [--first N] [--overlay DIR] FOLDER...
#   (--first: each rank's first N steps only)
import gzip
import json
import logging
import os
import sys
import warnings

import pandas as pd

logging.disable(logging.WARNING)
warnings.simplefilter("ignore")

_drop = pd.DataFrame.drop


def _drop_columns(self, *args, **kwargs):
    if kwargs.get("columns") is not None:
        kwargs.pop("axis", None)
    return _drop(self, *args, **kwargs)


pd.DataFrame.drop = _drop_columns

from hta.trace_analysis import TraceAnalysis  # noqa: E402



def overlay_flows(analysis, rank, graph, step, out_dir):
    path = analysis.overlay_critical_path_analysis(rank, graph, out_dir,
                                                   only_show_critical_events=True)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    os.remove(path)
    start = next(e["ts"] for e in events
                 if e.get("cat") == "user_annotation" and e.get("name") == step)
    begun = {}
    flows = []
    for e in events:
        if e.get("name") != "critical_path":
            continue
        if e["ph"] == "s":
            begun[e["id"]] = e
        elif e["ph"] == "f":
            s = begun.pop(e["id"])
            flows.append([e["cat"], s["ts"] - start, e["ts"] - start])
    return flows


def analyse(folder, first, overlay):
    analysis = TraceAnalysis(trace_dir=folder)
    symbols = analysis.t.symbol_table.get_sym_id_map()
    step_ids = {v: k for k, v in symbols.items() if "ProfilerStep" in k}
    out = {}
    for rank in sorted(analysis.t.traces.keys()):
        trace = analysis.t.get_trace(rank)
        named = trace[trace.name.isin(step_ids.keys())]
        cpu = symbols.get("user_annotation")
        paths = []
        cut = trace.ts.max()
        for step, (name, cat, ts, dur) in enumerate(
                zip(named.name, named.cat, named.ts, named.dur)):
            if cat != cpu or (first is not None and len(paths) >= first):
                continue
            name = step_ids[name]
            try:
                graph, ok = analysis.critical_path_analysis(rank=rank, annotation="ProfilerStep",
                                                            instance_id=step)
            except ValueError as e:  # "Graph is not valid": a cycle
                paths.append({"step": name, "error": str(e)})
                continue
            assert ok, f"{folder} rank {rank} step {step}"
            edges = graph.get_critical_path_breakdown()
            # The weight the path was found with: HTA finds it with an overlap (a negative gap
            # of 1 µs or more) weighing 0, but reports the overlap's negative time. The
            # breakdown is made from the set of edges in the set's order.
            edges["used"] = [graph.edges[e.begin, e.end]["weight"]
                             for e in graph.critical_path_edges_set]
            bound = {k: float(v) for k, v in edges.groupby("bound_by").used.sum().items() if k}
            paths.append({"step": name, "step_us": float(dur),
                          "whole": bool(ts + dur <= cut), "path_us": float(edges.used.sum()),
                          "bound_by_us": bound, "edges": int(len(edges))})
            if overlay is not None:
                paths[-1]["flows"] = overlay_flows(analysis, rank, graph, name, overlay)
        out[str(rank)] = paths
    return out


args = sys.argv[1:]
first = overlay = None
while args[:1] in (["--first"], ["--overlay"]):
    if args[0] == "--first":
        first = int(args[1])
    else:
        overlay = args[1]
    args = args[2:]
print(json.dumps({folder: analyse(folder, first, overlay) for folder in args}))
