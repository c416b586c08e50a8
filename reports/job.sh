#!/bin/sh
# The main job (make run), the report alone (make report) and the nightly
# comparison (make nightly). Each writes its results into one directory:
#   sweep.jsonl   moe-sweep records (reports/SCHEMA.md)
#   golden.json   moe-golden verify
#   compat.json   moe-compat matrix
#   report.html   reports/report.py over the three (and the previous
#                 nightly's sweep for --compare)
# and prints the summary lines and the report's path. Exit status: 1 when
# the sweep or the golden verify found a failure (the report is written
# anyway: it is how one reads the failure), 3 when a golden file is bad.
set -u
mode=${1:?usage: job.sh run|report|nightly}
BUILD=${BUILD:-build}
PY=${PYTHON:-python3}

render() { # dir [old_sweep]
    d=$1 old=${2:-}
    set -- --sweep "$d/sweep.jsonl" --golden "$d/golden.json" --compat "$d/compat.json"
    [ -n "$old" ] && set -- "$@" --compare "$old" "$d/sweep.jsonl"
    # the last make bench, when there is one
    [ -f "$BUILD/bench.json" ] && set -- "$@" --bench "$BUILD/bench.json"
    "$PY" reports/report.py "$@" --out "$d/report.html"
}

run_all() { # dir tier
    d=$1 tier=$2
    mkdir -p "$d"
    echo "== golden verify"
    "$BUILD/moe-golden" verify --json "$d/golden.json" > "$d/golden.log" 2>&1; g=$?
    tail -n 4 "$d/golden.log"
    echo "== sweep, $tier tier (every backend; those not built or without a device are skipped)"
    "$BUILD/moe-sweep" --tier "$tier" --out "$d/sweep.jsonl"; s=$?
    "$BUILD/moe-compat" matrix --format json > "$d/compat.json" || true
}

case $mode in
run)
    d=${RUN_DIR:-$BUILD/run}
    run_all "$d" "${TIER:-standard}"
    echo "== report"
    render "$d" || exit 3
    [ $g -ne 0 ] && exit $g
    exit $s ;;
report)
    d=${RUN_DIR:-$BUILD/run}
    [ -f "$d/sweep.jsonl" ] || { echo "job.sh: $d/sweep.jsonl missing: run 'make run' first" >&2; exit 2; }
    render "$d" ;;
nightly)
    root=${NIGHTLY_DIR:-results}
    rev=$(git rev-parse --short HEAD 2>/dev/null || echo norev)
    d="$root/$(date -u +%Y-%m-%d)-$rev"
    # the previous nightly: the newest other directory holding a finished sweep
    prev=$(ls -1d "$root"/*/ 2>/dev/null | sed 's#/$##' | grep -v "^$d\$" | sort | while read -r p; do
        [ -f "$p/sweep.jsonl" ] && echo "$p"; done | tail -n 1)
    run_all "$d" "${TIER:-full}"
    echo "== report${prev:+ (compared with $prev)}"
    render "$d" "${prev:+$prev/sweep.jsonl}" || exit 3
    [ $g -ne 0 ] && exit $g
    exit $s ;;
*)
    echo "usage: job.sh run|report|nightly" >&2; exit 2 ;;
esac
