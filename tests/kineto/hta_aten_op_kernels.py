# The reference: HolisticTraceAnalysis's get_aten_op_kernels_and_delay of every rank of the traces
# in each folder given (one rank a call: HTA 0.5 adds the rows of the ranks before to each rank's
# table when given several), one JSON object on stdout:
#   {"FOLDER": {"RANK": [{"op", "kernels", "count", "op_to_launch_us", "launch_to_kernel_us"}]
#                        or {"error": "..."} where HTA stops (a launch whose kernel is missing)}}
# The delays are HTA's means, rounded to 3 decimals as it rounds them.
#   HTA_DISABLE_NS_ROUNDING=1 python3 hta_aten_op_kernels.py FOLDER...
import json
import logging
import sys

logging.disable(logging.WARNING)
import hta.analyzers.cuda_kernel_analysis as kernel_analysis  # noqa: E402
from hta.trace_analysis import TraceAnalysis  # noqa: E402

# The plot HTA draws for each rank needs a display; the table is what is compared.
kernel_analysis.CudaKernelAnalysis.visualize_aten_op_kernels_and_overhead = classmethod(
    lambda cls, rank, df: None)


def analyse(folder):
    analysis = TraceAnalysis(trace_dir=folder)
    out = {}
    for rank in sorted(analysis.t.traces.keys()):
        try:
            table = analysis.get_aten_op_kernels_and_delay(ranks=[rank])[rank]
        except Exception as e:  # noqa: BLE001 (HTA's own failure is the answer recorded)
            out[str(rank)] = {"error": "%s: %s" % (type(e).__name__, e)}
            continue
        out[str(rank)] = [{"op": str(r["aten_op_name"]), "kernels": str(r["kernel_sequence"]),
                           "count": int(r["occurrence_count"]),
                           "op_to_launch_us": float(r["avg_aten_op_launch_delay"]),
                           "launch_to_kernel_us": float(r["avg_runtime_delay"])}
                          for _, r in table.iterrows()]
    return out


print(json.dumps({folder: analyse(folder) for folder in sys.argv[1:]}))
