# The reference: HolisticTraceAnalysis 0.5's potential stragglers (get_potential_stragglers: all
# profiler steps, CANDIDATES candidates, HTA's default 2 unless given) of the traces in FOLDER,
# with what it decided on the way, one JSON object on stdout:
#   {"stragglers": [RANK, ...], "counts": {"RANK": steps among the latest}, "kernel": NAME,
#    "stream": S, "steps": [STEP, ...]}
# or {"error": "..."} where HTA's analysis raises (no NCCL kernel it recognises).
#   HTA_DISABLE_NS_ROUNDING=1 python3 hta_stragglers.py FOLDER [CANDIDATES]
import json
import logging
import sys

logging.disable(logging.WARNING)
import pandas as pd  # noqa: E402
from hta.analyzers.straggler import (  # noqa: E402
    _compute_normalized_start_time_of_significant_comm_kernels,
    find_stragglers_with_late_start_comm_kernels,
)
from hta.analyzers.straggler_analysis import StragglerAnalysis  # noqa: E402
from hta.trace_analysis import TraceAnalysis  # noqa: E402


def main():
    analysis = TraceAnalysis(trace_dir=sys.argv[1])
    candidates = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    try:
        stragglers = analysis.get_potential_stragglers(num_candidates=candidates)
    except Exception as e:  # HTA's own failure is the answer to record
        print(json.dumps({"error": "%s: %s" % (type(e).__name__, e)}))
        return
    # The same steps get_potential_stragglers takes, to read its counts and its kernel.
    t = analysis.t
    steps = StragglerAnalysis.get_profiler_steps(t)
    ranks = list(t.get_all_traces().keys())
    df = pd.concat([t.get_trace(r) for r in ranks], axis=0, keys=ranks,
                   names=["rank", "idx"]).reset_index()
    df = df.loc[df["iteration"].isin(steps)]
    metric, _ = _compute_normalized_start_time_of_significant_comm_kernels(df, t.symbol_table)
    counts = find_stragglers_with_late_start_comm_kernels(df, t.symbol_table, candidates)
    names = t.symbol_table.get_sym_table()
    print(json.dumps({"stragglers": [int(r) for r in stragglers],
                      "counts": {str(int(r)): int(n) for r, n in counts.items()},
                      "kernel": names[int(metric["name"].iloc[0])],
                      "stream": int(metric["stream"].iloc[0]),
                      "steps": [int(s) for s in steps]}))


if __name__ == "__main__":
    main()
