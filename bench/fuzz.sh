#!/usr/bin/env bash
# bench/fuzz.sh SECONDS [TARGET...]: builds the libFuzzer targets of tests/fuzz with clang
# (address + undefined sanitizers) in build-fuzz/ and runs each for SECONDS on a copy of its seed
# corpus, printing one line per target: "<target>: <N> runs, <C> crashes".
# Crash inputs land in build-fuzz/crashes/<target>/; copy one to tests/fuzz/crashes/<target>/
# (replayed by CTest, label fuzz) once its cause is fixed. Exit 1 if any target crashed.
set -euo pipefail
seconds=${1:?usage: bench/fuzz.sh SECONDS [TARGET...]}
shift
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DTRAIN_FUZZ_BUILD:-$root/build-fuzz}
CC=${CC:-clang} CXX=${CXX:-clang++}
command -v "$CXX" >/dev/null || { echo "fuzz.sh: $CXX not found (scripts/install-deps.sh --tests installs clang)" >&2; exit 2; }
# Builds and fuzzers run at niceness 10 (a shared machine), not 10 more than the caller's: a
# caller already at `nice -n 10` would otherwise leave them at 19, starved behind everything.
polite=()
[ "$(nice)" -lt 10 ] && polite=(nice -n $((10 - $(nice))))
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=($(ls "$root"/tests/fuzz/fuzz_*.cpp | sed "s|.*/fuzz_\(.*\)\.cpp|\1|"))
fi
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" -DDTRAIN_FUZZ=ON >/dev/null
"${polite[@]}" cmake --build "$build" --target "${targets[@]/#/fuzz_}" >"$build/build.log" 2>&1 ||
  { tail -30 "$build/build.log" >&2; exit 2; }
failed=0
for t in "${targets[@]}"; do
  work=$build/run/$t
  rm -rf "$work" && mkdir -p "$work/corpus" "$build/crashes/$t"
  cp "$root/tests/fuzz/corpus/$t"/* "$work/corpus/"
  [ -d "$root/tests/fuzz/crashes/$t" ] && cp "$root/tests/fuzz/crashes/$t"/* "$work/corpus/"
  # -rss_limit_mb: memory out of proportion to the input is a finding too (F2, F8).
  (cd "$work" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
     "${polite[@]}" "$build/fuzz_$t" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 \
     -timeout=10 -artifact_prefix="$build/crashes/$t/" -print_final_stats=1 corpus \
     >"$work/log" 2>&1) || true
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
  crashes=$(find "$build/crashes/$t" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) -newer "$work/corpus" | wc -l)
  echo "$t: ${runs:-0} runs, $crashes crashes"
  if [ "$crashes" -gt 0 ] || [ -z "$runs" ]; then
    failed=1
    grep -m3 -E 'ERROR|SUMMARY|runtime error' "$work/log" | sed "s/^/  $t: /" >&2 || true
  fi
done
exit $failed
