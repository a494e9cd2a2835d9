# The reference: HolisticTraceAnalysis's TraceDiff of two trace folders (one rank each), over all
# their iterations, one JSON object on stdout:
#   {"gpu": {NAME: [control count, test count, control us, test us]},   every GPU-side record
#    "cpu_op": {NAME: [...]},                                           CPU operators (cat cpu_op)
#    "iterations": [control's, test's]}
import json
import logging
import sys

logging.disable(logging.WARNING)
from hta.common.trace_symbol_table import decode_symbol_id_to_symbol_name  # noqa: E402,F401
from hta.trace_diff import DeviceType, LabeledTrace, TraceDiff  # noqa: E402

control = LabeledTrace(label="control", trace_dir=sys.argv[1])
test = LabeledTrace(label="test", trace_dir=sys.argv[2])
out = {"iterations": [len(control.iterations()), len(test.iterations())]}
gpu = TraceDiff.compare_traces(control, test, control.ranks()[0], test.ranks()[0],
                               control.iterations(), test.iterations(), DeviceType.GPU)
out["gpu"] = {name: [int(r["control_counts"]), int(r["test_counts"]),
                     float(r["control_total_duration"]), float(r["test_total_duration"])]
              for name, r in gpu.iterrows()}


def cpu_ops(trace):
    summary = trace.get_ops_summary(trace.extract_ops(trace.ranks()[0], trace.iterations(),
                                                      DeviceType.CPU))
    summary = summary[summary["cat"] == "cpu_op"]
    return {r["name"]: (int(r["counts"]), float(r["total_duration"]))
            for _, r in summary.iterrows()}


was, now = cpu_ops(control), cpu_ops(test)
out["cpu_op"] = {name: [was.get(name, (0, 0.0))[0], now.get(name, (0, 0.0))[0],
                        was.get(name, (0, 0.0))[1], now.get(name, (0, 0.0))[1]]
                 for name in set(was) | set(now)}
print(json.dumps(out))
