#!/usr/bin/env bash
# PyTorch profiler traces through HolisticTraceAnalysis (temporal breakdown) and through
# `dtrain timeline --summary`, side by side: wall time, peak memory, ratios.
# Usage: bench/timeline_kineto.sh [BUILD_DIR] [MB_PER_RANK] [RANKS...]   (default: build 100 2 8 32)
# Traces: the H100 fixtures (tests/fixtures/kineto) replicated to MB_PER_RANK per rank (steps
# repeated, shifted in time, ids kept unique) with rank ids rewritten, gzipped as torch writes them.
# With BASELINE=/path/to/another/dtrain, that binary is timed on the same traces too (last columns).
# With ANALYSIS=critical-path: HTA's critical path analysis of each rank's first step against
# `dtrain timeline --summary --critical-path 0` (which also makes the whole summary).
# With ANALYSIS=counters: HTA's generate_trace_with_counters for every rank (queue length and
# memcpy bandwidth, a new trace per rank) against `dtrain timeline --counters` (the merged trace
# with the same counters; BASELINE then merges without them).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build}"; MB="${2:-100}"; shift $(( $# > 2 ? 2 : $# )) || true
RANKS=("$@"); [ ${#RANKS[@]} -gt 0 ] || RANKS=(2 8 32)
PY="$ROOT/.venv/bin/python3"
FIX="$ROOT/tests/fixtures/kineto"
WORK="$(mktemp -d /tmp/dtrain-bench-kineto-XXXXXX)"; trap 'rm -rf "$WORK"' EXIT
[ -f "$FIX/ddp-2ranks-gloo-rank0.json.gz" ] || { echo "missing $FIX" >&2; exit 1; }

# One big trace per fixture rank, then copies with the rank rewritten.
"$PY" - "$FIX" "$WORK/base" "$MB" <<'PYEOF'
import gzip, json, os, sys
fix, out, mb = sys.argv[1], sys.argv[2], float(sys.argv[3])
os.makedirs(out, exist_ok=True)
for r in (0, 1):
    d = json.load(gzip.open(f"{fix}/ddp-2ranks-gloo-rank{r}.json.gz"))
    events = [e for e in d["traceEvents"] if e.get("ph") != "M"]
    meta = [e for e in d["traceEvents"] if e.get("ph") == "M"]
    t0 = min(e["ts"] for e in events); t1 = max(e["ts"] + e.get("dur", 0) for e in events)
    one = len(json.dumps(events))
    copies = max(1, int(mb * 1e6 / one))
    span = t1 - t0 + 1000.0
    with open(f"{out}/rank{r}.json", "w") as f:
        head = {k: v for k, v in d.items() if k != "traceEvents"}
        f.write(json.dumps(head)[:-1] + ', "traceEvents": [\n')
        first = True
        for c in range(copies):
            for e in events:
                e2 = dict(e); e2["ts"] = round(e["ts"] + c * span, 3)
                if "args" in e2:
                    a = dict(e2["args"])
                    for k in ("correlation", "External id"):
                        if k in a: a[k] = a[k] + c * 10_000_000
                    e2["args"] = a
                if "id" in e2 and isinstance(e2["id"], int): e2["id"] += c * 10_000_000
                f.write(("" if first else ",\n") + json.dumps(e2)); first = False
        for e in meta: f.write(",\n" + json.dumps(e))
        f.write("\n]}\n")
PYEOF
base_mb=$(du -m "$WORK/base/rank0.json" | cut -f1)

peak() {  # wall seconds and peak RSS (MB) of a command
  /usr/bin/time -f "%e %M" -o "$WORK/time" "$@" > "$WORK/out" 2>&1 || { cat "$WORK/out" >&2; return 1; }
  read -r wall kb < "$WORK/time"; echo "$wall $((kb / 1024))"
}
printf '%6s %9s | %10s %9s | %10s %9s | %8s %8s' ranks "MB/rank" "HTA s" "HTA MB" "dtrain s" "dtrain MB" "time x" "mem x"
[ -z "${BASELINE:-}" ] && echo || printf ' | %10s %11s %8s\n' "baseline s" "baseline MB" "time x"
for n in "${RANKS[@]}"; do
  dir="$WORK/r$n"; mkdir -p "$dir"
  for ((r = 0; r < n; r++)); do
    sed -e "s/\"rank\": [01], \"world_size\": 2/\"rank\": $r, \"world_size\": $n/" \
      "$WORK/base/rank$((r % 2)).json" | gzip -1 > "$dir/rank$r.json.gz"
  done
  if [ "${ANALYSIS:-breakdown}" = counters ]; then
    read -r h_wall h_mb < <(peak "$PY" -c 'import logging, sys
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1])
a.generate_trace_with_counters(ranks=sorted(a.t.traces))' "$dir")
    rm -f "$dir"/*_with_counters*
    read -r d_wall d_mb < <(peak "$BUILD/dtrain" timeline --counters -o "$WORK/merged.json" "$dir"/*.json.gz)
  elif [ "${ANALYSIS:-breakdown}" = critical-path ]; then
    read -r h_wall h_mb < <(HTA_DISABLE_NS_ROUNDING=1 peak "$PY" "$ROOT/tests/kineto/hta_critical_path.py" --first 1 "$dir")
    read -r d_wall d_mb < <(peak "$BUILD/dtrain" timeline --summary --json --critical-path 0 -o "$WORK/merged.json" "$dir"/*.json.gz)
  else
    read -r h_wall h_mb < <(peak "$PY" "$ROOT/tests/kineto/hta_breakdown.py" "$dir")
    read -r d_wall d_mb < <(peak "$BUILD/dtrain" timeline --summary --json -o "$WORK/merged.json" "$dir"/*.json.gz)
  fi
  printf '%6s %9s | %10s %9s | %10s %9s | %7.1fx %7.1fx' "$n" "$base_mb" "$h_wall" "$h_mb" "$d_wall" "$d_mb" \
    "$(echo "$h_wall / $d_wall" | bc -l)" "$(echo "$h_mb / $d_mb" | bc -l)"
  if [ -n "${BASELINE:-}" ]; then
    if [ "${ANALYSIS:-breakdown}" = counters ]; then
      read -r b_wall b_mb < <(peak "$BASELINE" timeline -o "$WORK/merged.json" "$dir"/*.json.gz)
    else
      read -r b_wall b_mb < <(peak "$BASELINE" timeline --summary --json -o "$WORK/merged.json" "$dir"/*.json.gz)
    fi
    printf ' | %10s %11s %7.1fx\n' "$b_wall" "$b_mb" "$(echo "$h_wall / $b_wall" | bc -l)"
  else
    echo
  fi
  rm -rf "$dir" "$WORK/merged.json"
done
echo "(load average: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores)"
