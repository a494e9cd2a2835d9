# The reference: HolisticTraceAnalysis's GPU kernel breakdown (get_gpu_kernel_breakdown, its
# defaults: memory kernels in, ten kernels and 80% of the time per type) of the traces in each
# folder given, and the runs of every kernel as HTA read them, one JSON object on stdout:
#   {"FOLDER": {"types": {"LABEL": sum_us}, "types_exact": {"LABEL": sum_us},
#               "kernels": [{"rank", "type", "name", "sum", "max", "min", "mean", "std"}],
#               "runs": {"RANK": {"NAME": {"count", "sum", "max", "min", "mean", "std"}}}}}
# "kernels" is HTA's table as it comes (where it groups more than ten kernels of a type, its max,
# min and mean of a listed kernel are that kernel's total); "runs" is each kernel's runs grouped
# straight from the trace HTA loaded, to check the statistics dtrain gives for every kernel.
# "types_exact" is the time by type with one line of HTA changed: its _get_gpu_kernel_type_time
# truncates each stretch between two kernel edges to a whole microsecond (.astype(int)); there
# it keeps the fraction, as dtrain does.
#   HTA_DISABLE_NS_ROUNDING=1 python3 hta_kernel_breakdown.py FOLDER...
import inspect
import json
import logging
import sys
import textwrap

logging.disable(logging.WARNING)
import hta.analyzers.breakdown_analysis as breakdown  # noqa: E402
from hta.trace_analysis import TraceAnalysis  # noqa: E402

TRUNCATING = breakdown.BreakdownAnalysis._get_gpu_kernel_type_time


def exact_type_time():
    source = textwrap.dedent(inspect.getsource(TRUNCATING.__func__))
    assert source.count(").astype(int)") == 1, "HTA's kernel type time changed"
    scope = dict(breakdown.__dict__)
    exec(source.replace(").astype(int)", ")"), scope)
    return classmethod(scope["_get_gpu_kernel_type_time"])


EXACT = exact_type_time()


def analyse(folder):
    analysis = TraceAnalysis(trace_dir=folder)
    breakdown.BreakdownAnalysis._get_gpu_kernel_type_time = EXACT
    exact, _ = analysis.get_gpu_kernel_breakdown(visualize=False)
    breakdown.BreakdownAnalysis._get_gpu_kernel_type_time = TRUNCATING
    types, kernels = analysis.get_gpu_kernel_breakdown(visualize=False)
    out = {"types": {str(r["kernel_type"]): float(r["sum"]) for _, r in types.iterrows()},
           "types_exact": {str(r["kernel_type"]): float(r["sum"]) for _, r in exact.iterrows()},
           "kernels": [{"rank": int(r["rank"]), "type": str(r["kernel_type"]),
                        "name": str(r["name"]), "sum": float(r["sum (us)"]),
                        "max": float(r["max (us)"]), "min": float(r["min (us)"]),
                        "mean": float(r["mean (us)"]), "std": float(r["stddev"])}
                       for _, r in kernels.iterrows()],
           "runs": {}}
    names = analysis.t.symbol_table.get_sym_table()
    for rank, df in analysis.t.traces.items():
        gpu = df[df["stream"].ne(-1)].copy()
        gpu["kernel"] = gpu["name"].map(lambda i: names[i])
        stats = gpu.groupby("kernel")["dur"].agg(["count", "sum", "max", "min", "mean", "std"])
        out["runs"][str(rank)] = {
            name: {"count": int(r["count"]), "sum": float(r["sum"]), "max": float(r["max"]),
                   "min": float(r["min"]), "mean": float(r["mean"]),
                   "std": 0.0 if r["count"] < 2 else float(r["std"])}
            for name, r in stats.iterrows()}
    return out


print(json.dumps({folder: analyse(folder) for folder in sys.argv[1:]}))
