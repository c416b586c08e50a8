#!/bin/sh
# make gpu-check OUT=dir (or make gpu-check-run on a GPU machine that got
# the binaries built elsewhere): the CUDA conformance run, on a machine
# with an NVIDIA GPU, in one command, everything written under OUT:
#   summary.txt           one line per step: exit status and seconds
#   gpu-check.log         every step's output, in order
#   golden.json           moe-golden verify on cuda-conform and cuda-atomic
#   sweep-quick.jsonl     moe-sweep --tier quick    (cuda-conform, cuda-atomic)
#   sweep-standard.jsonl  moe-sweep --tier standard (cuda-conform, cuda-atomic)
#   bench-stages.tgz      moe-bench: cuda-conform per-stage times at M = 4096, one JSON per pair
# (few files: a GPU lease returns at most eight). STEPS selects steps
# (default: suites golden quick standard bench); SANITIZE=1 adds
# compute-sanitizer memcheck and racecheck over the GPU suites
# (MOE_GPU_SMALL=1 shrinks their shapes for that). Exit status: 1 when any
# step failed (STEP_TIMEOUT, default 900 s, bounds each step). Shared libraries the tools need (cJSON, libcrypto, OpenBLAS,
# libgomp) are taken from $BUILD/gpu-lib when present (make gpu-bundle).
set -u
BUILD=${BUILD:-build}
OUT=${OUT:?make gpu-check OUT=dir}
STEPS=${STEPS:-suites golden quick standard bench}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
mkdir -p "$OUT"
[ -d "$BUILD/gpu-lib" ] && export LD_LIBRARY_PATH="$BUILD/gpu-lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
SUM="$OUT/summary.txt" LOG="$OUT/gpu-check.log"
: > "$SUM"
: > "$LOG"
fail=0

step() { # name command...
    name=$1
    shift
    echo "== $name: $*" | tee -a "$LOG"
    t0=$(date +%s)
    timeout "${STEP_TIMEOUT:-900}" "$@" >> "$LOG" 2>&1
    rc=$?
    line="$name: exit $rc, $(($(date +%s) - t0)) s"
    echo "$line" | tee -a "$SUM"
    [ $rc -ne 0 ] && fail=1
    return 0
}

{ nvidia-smi -L 2>&1 || echo "nvidia-smi: not found"; } | tee -a "$LOG" "$SUM"

for s in $STEPS; do
    case $s in
    suites)
        for t in "$BUILD"/tests/gpu/check_gpu_*; do
            [ -x "$t" ] && step "suite $(basename "$t")" "$t"
        done ;;
    golden)
        step golden "$BUILD/moe-golden" verify --backend cuda-conform,cuda-atomic --json "$OUT/golden.json" ;;
    quick)
        step sweep-quick "$BUILD/moe-sweep" --tier quick --backend cuda-conform,cuda-atomic --jobs "$JOBS" --quiet \
            --out "$OUT/sweep-quick.jsonl"
        tail -n 1 "$OUT/sweep-quick.jsonl" >> "$SUM" ;;
    standard)
        step sweep-standard "$BUILD/moe-sweep" --tier standard --backend cuda-conform,cuda-atomic --jobs "$JOBS" --quiet \
            --out "$OUT/sweep-standard.jsonl"
        tail -n 1 "$OUT/sweep-standard.jsonl" >> "$SUM" ;;
    bench)
        # every stage of the table is called by one of these pairs; one
        # JSON per pair, packed into bench-stages.tgz
        mkdir -p "$OUT/bench"
        for ps in noep:triton_like@bf16,fp8_wblock128_agroup128 noep:permute_grouped@bf16 noep:ck_fused@bf16 \
                  batched:naive_batched@bf16 allgather_rs:triton_like@bf16 deepep_ht:triton_like@bf16 \
                  deepep_ll:batched_masked@bf16 pplx:batched_masked@bf16 \
                  hybrid_ep:grouped_contig@fp8_wblock128_agroup128; do
            pair=${ps%@*} schemes=${ps#*@}
            step "bench $pair" "$BUILD/moe-bench" --backend cuda-conform --shape qwen3-30b-a3b --m 4096 \
                --pair "$pair" --scheme "$schemes" --reps 5 --warmup 1 --json "$OUT/bench/$(echo "$pair" | tr : _).json"
        done
        (cd "$OUT" && tar czf bench-stages.tgz bench && rm -rf bench) ;;
    *) echo "gpu_check: unknown step '$s'" | tee -a "$SUM"; fail=1 ;;
    esac
done

if [ "${SANITIZE:-0}" = 1 ]; then
    for tool in memcheck racecheck; do
        for t in "$BUILD"/tests/gpu/check_gpu_*; do
            [ -x "$t" ] || continue
            MOE_GPU_SMALL=1 step "$tool $(basename "$t")" compute-sanitizer --tool "$tool" --error-exitcode 9 "$t"
        done
    done
fi
echo "gpu-check: $( [ $fail -eq 0 ] && echo passed || echo FAILED ); logs in $OUT" | tee -a "$SUM"
exit $fail
