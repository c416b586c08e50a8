#!/bin/sh
# make bench on a GPU machine (or make bench-gpu-run with binaries built
# elsewhere): the cuda-fast grid against its peers in one command, every
# file under OUT (a GPU lease returns at most eight):
#   bench-cuda.json / .log     moe-bench --backend cuda-fast (with its in-process peers)
#   bench-torch.json / .log    reports/torch_peer.py (when python3 can import torch)
#   bench-merged.json          reports/bench_merge.py over the two (floors, best peers, goals)
#   bench-merge.log            its summary lines and warnings
#   bench.html                 reports/report.py --bench-gpu
# and prints the summary lines last. BENCH_GPU_ARGS overrides the selection
# (options both producers take: --shape --m --scheme --seed --skew --reps --warm-ms
# --warmup). Exit status: 1 when a step failed (the later steps still run on
# what there is). Shared libraries the tools need (cJSON) are taken from
# $BUILD/gpu-lib when present (make gpu-bundle).
set -u
OUT=${1:?usage: bench_gpu.sh OUT}
BUILD=${BUILD:-build}
PY=${PYTHON:-python3}
SCHEMES=bf16,fp8_wtensor_atensor,fp8_wchannel_atoken,fp8_wblock128_agroup128,int8_wchannel_atoken,w4a16_g128,mxfp4_w4a16
SEL=${BENCH_GPU_ARGS:---shape all --m 1,16,64,256,1024,4096,16384 --scheme $SCHEMES}
mkdir -p "$OUT" || exit 1
[ -d "$BUILD/gpu-lib" ] && export LD_LIBRARY_PATH="$BUILD/gpu-lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fail=0
inputs=""

step() { # name log command...: runs it, logs its output, says how it went
    name=$1 log=$2
    shift 2
    t0=$(date +%s)
    "$@" > "$log" 2>&1
    rc=$?
    echo "bench: $name: exit $rc, $(($(date +%s) - t0)) s (log $log)"
    [ $rc -ne 0 ] && fail=1
    return $rc
}

# shellcheck disable=SC2086  # SEL is a list of options
step "moe-bench cuda-fast" "$OUT/bench-cuda.log" \
    "$BUILD/moe-bench" --backend cuda-fast $SEL --json "$OUT/bench-cuda.json"
[ -s "$OUT/bench-cuda.json" ] && inputs="$OUT/bench-cuda.json"

if "$PY" -c 'import torch' > /dev/null 2>&1; then
    # shellcheck disable=SC2086
    step "torch peer" "$OUT/bench-torch.log" "$PY" reports/torch_peer.py $SEL --json "$OUT/bench-torch.json"
    [ -s "$OUT/bench-torch.json" ] && inputs="$inputs $OUT/bench-torch.json"
else
    echo "bench: torch peer: skipped ($PY cannot import torch)"
fi

if [ -z "$inputs" ]; then
    echo "bench: no JSON to merge (see the logs)"
    exit 1
fi
# shellcheck disable=SC2086  # inputs are paths under OUT, without spaces
if step "merge" "$OUT/bench-merge.log" "$PY" reports/bench_merge.py $inputs --out "$OUT/bench-merged.json"; then
    step "report" "$OUT/bench-report.log" "$PY" reports/report.py --bench-gpu "$OUT/bench-merged.json" \
        --out "$OUT/bench.html"
    # the report's log says only where the page went: keep the file count down
    cat "$OUT/bench-report.log" && rm -f "$OUT/bench-report.log"
fi
cat "$OUT/bench-merge.log"
exit $fail
