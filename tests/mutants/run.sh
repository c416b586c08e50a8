#!/bin/bash
# make check-mutants: plant each fault of tests/mutants/list.txt in a copy
# of the sources and require that its kill command fails (the test that
# make check, or the sweep tier the list names, would fail with).
#
#   tests/mutants/run.sh [--only id[,id...]]      the CPU mutants (and the GPU ones when nvidia-smi works)
#   tests/mutants/run.sh --gpu-build DIR          build the GPU mutants' test binaries into DIR, run nothing
#
# The working tree is never touched: its tracked and untracked (not
# ignored) files are copied to $BUILD/mutants/tree once, built there once,
# and each mutant is patched in, rebuilt incrementally (only what its kill
# command needs), run under a timeout and patched out again. Before any
# mutant runs, every kill command must pass on the unmutated copy: a kill
# command that fails anyway would prove nothing.
#
# Kill commands (list.txt, fourth field):
#   check_<x>              build/tests/check_<x>, a make check suite
#   check_<x>:<tcase>      the same suite, one test case (CK_RUN_CASE)
#   golden                 moe-golden verify over golden/ (make run's first step)
#   gpu:check_gpu_<x>      a GPU suite (make check runs it where there is a GPU)
#
# Exit status 1 when the kill rate is below MUT_MIN_RATE (95) percent, when
# a survivor has no explanation in the list, or when a patch no longer
# applies or a mutant does not build (a stale mutant must be noticed).
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$repo/$BUILD ;; esac
TIMEOUT=${MUT_TIMEOUT:-300}
MIN_RATE=${MUT_MIN_RATE:-95}
only="" gpu_dir=""
while [ $# -gt 0 ]; do
    case $1 in
    --only) only=",${2:?--only needs a list of ids},"; shift 2 ;;
    --gpu-build) gpu_dir=${2:?--gpu-build needs a directory}; shift 2 ;;
    *) echo "run.sh: unknown argument '$1' (--only ids | --gpu-build DIR)" >&2; exit 2 ;;
    esac
done

work=$BUILD/mutants
tree=$work/tree
logs=$work/logs
# make deletes the suites' objects as intermediates; keeping them is what
# makes the per-mutant rebuild incremental
keep_mk=$work/keep.mk

# id|area|patch|kill|description|explanation of a known survivor (optional)
list() { grep -v '^[[:space:]]*#' "$here/list.txt" | grep -v '^[[:space:]]*$'; }

fresh_tree() {
    rm -rf "$tree" "$logs"
    mkdir -p "$tree" "$logs"
    printf '.SECONDARY:\n' > "$keep_mk"
    (cd "$repo" && git ls-files -z --cached --others --exclude-standard |
        xargs -0 cp --parents -t "$tree" 2>/dev/null)
    # files deleted in the working tree but still tracked are not copied
    [ -f "$tree/Makefile" ] || { echo "run.sh: copying the sources to $tree failed" >&2; exit 2; }
}

mk() { # make targets... in the scratch tree (CPU only unless NVCC is set)
    (cd "$tree" && nice -n 10 make --no-print-directory -s -f Makefile -f "$keep_mk" \
        -j"$(nproc 2>/dev/null || echo 2)" BUILD=b NVCC="${MK_NVCC:-none}" "$@")
}

target_of() { # kill command -> make target
    case $1 in
    gpu:*) echo "b/tests/gpu/${1#gpu:}" ;;
    golden) echo "b/moe-golden" ;;
    check_*) echo "b/tests/${1%%:*}" ;;
    *) return 1 ;;
    esac
}

run_kill() { # kill command, log file: the command's exit status
    local k=$1 log=$2
    case $k in
    golden) (cd "$tree" && timeout "$TIMEOUT" b/moe-golden verify --dir golden --backend ref) > "$log" 2>&1 ;;
    gpu:*) (cd "$tree" && MOE_BUILD=b timeout "$TIMEOUT" "b/tests/gpu/${k#gpu:}") > "$log" 2>&1 ;;
    check_*:*) (cd "$tree" && MOE_BUILD=b CK_RUN_CASE="${k#*:}" timeout "$TIMEOUT" "b/tests/${k%%:*}") > "$log" 2>&1 ;;
    check_*) (cd "$tree" && MOE_BUILD=b timeout "$TIMEOUT" "b/tests/$k") > "$log" 2>&1 ;;
    esac
}

patch_in() { (cd "$tree" && patch -p1 -s -f --no-backup-if-mismatch < "$here/$1") > "$2" 2>&1; }
patch_out() { (cd "$tree" && patch -R -p1 -s -f --no-backup-if-mismatch < "$here/$1") >> "$2" 2>&1; }

have_gpu() { command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L > /dev/null 2>&1; }

# ---- --gpu-build DIR: the mutated GPU suites for a GPU machine ---------------
if [ -n "$gpu_dir" ]; then
    command -v "${NVCC:-nvcc}" > /dev/null 2>&1 || { echo "run.sh --gpu-build: nvcc not found" >&2; exit 2; }
    mkdir -p "$gpu_dir" || exit 2
    gpu_dir=$(cd "$gpu_dir" && pwd)
    fresh_tree
    export MK_NVCC=${NVCC:-nvcc}
    suites=$(list | awk -F'|' '$4 ~ /^gpu:/ {sub(/^gpu:/, "", $4); print $4}' | sort -u)
    echo "run.sh --gpu-build: unmutated suites: $suites"
    mkdir -p "$gpu_dir/baseline"
    for s in $suites; do
        mk "b/tests/gpu/$s" > "$logs/baseline.$s.build" 2>&1 || { echo "baseline $s does not build:"; tail -20 "$logs/baseline.$s.build"; exit 1; }
        cp "$tree/b/tests/gpu/$s" "$gpu_dir/baseline/"
    done
    fail=0
    while IFS='|' read -r id area pf kill desc note; do
        case $kill in gpu:*) ;; *) continue ;; esac
        [ -n "$only" ] && [ "${only#*,$id,}" = "$only" ] && continue
        s=${kill#gpu:}
        if ! patch_in "$pf" "$logs/$id.patch.log"; then echo "$id: patch does not apply"; fail=1; continue; fi
        if mk "b/tests/gpu/$s" > "$logs/$id.build" 2>&1; then
            mkdir -p "$gpu_dir/$id" && cp "$tree/b/tests/gpu/$s" "$gpu_dir/$id/" && echo "$id: $gpu_dir/$id/$s"
        else
            echo "$id: does not build (log $logs/$id.build)"; fail=1
        fi
        patch_out "$pf" "$logs/$id.patch.log" || { echo "$id: patch does not reverse"; exit 1; }
    done < <(list)
    # the suites link Check statically; cJSON is the one library a GPU machine lacks
    mkdir -p "$gpu_dir/lib"
    ldd "$gpu_dir"/baseline/* 2>/dev/null | awk '/libcjson/ && /=> \// {print $3}' | sort -u | xargs -r -I{} cp -L {} "$gpu_dir/lib/"
    cat > "$gpu_dir/run.sh" <<'EOS'
#!/bin/sh
# On a GPU machine: every baseline suite must pass, every mutant's must fail.
cd "$(dirname "$0")" || exit 2
export LD_LIBRARY_PATH="$PWD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
rc=0
for b in baseline/*; do
    "./$b" > "$b.log" 2>&1; r=$?
    if [ $r -eq 0 ]; then echo "baseline $(basename "$b"): pass"; else echo "baseline $(basename "$b"): exit $r (must pass)"; rc=1; fi
done
for d in */; do
    d=${d%/}; [ "$d" = baseline ] || [ "$d" = lib ] && continue
    for b in "$d"/*; do
        case $b in *.log) continue ;; esac
        "./$b" > "$b.log" 2>&1; r=$?
        if [ $r -ne 0 ] && [ $r -ne 77 ]; then echo "$d: killed (exit $r)"; else echo "$d: SURVIVED (exit $r)"; rc=1; fi
    done
done
exit $rc
EOS
    chmod +x "$gpu_dir/run.sh"
    echo "run.sh --gpu-build: copy $gpu_dir to a GPU machine and run its run.sh"
    exit $fail
fi

# ---- the mutants ----------------------------------------------------------------
gpu=0
have_gpu && command -v "${NVCC:-nvcc}" > /dev/null 2>&1 && gpu=1
fresh_tree
[ $gpu -eq 1 ] && export MK_NVCC=${NVCC:-nvcc}
kills=$(list | while IFS='|' read -r id area pf kill desc note; do
    [ -n "$only" ] && [ "${only#*,$id,}" = "$only" ] && continue
    case $kill in gpu:*) [ $gpu -eq 1 ] || continue ;; esac
    echo "$kill"
done | sort -u)
targets=""
for k in $kills; do
    t=$(target_of "$k") || { echo "run.sh: unknown kill command '$k' in list.txt" >&2; exit 2; }
    targets="$targets $t"
done
targets=$(echo $targets | tr ' ' '\n' | sort -u)
echo "mutants: building the unmutated copy in $tree"
t0=$(date +%s)
mk $targets > "$logs/baseline.build" 2>&1 || { echo "mutants: the unmutated copy does not build:"; tail -30 "$logs/baseline.build"; exit 1; }
for k in $kills; do
    if ! run_kill "$k" "$logs/baseline.$(echo "$k" | tr ':/' '__').log"; then
        echo "mutants: kill command '$k' fails on the unmutated sources (log $logs/baseline.$(echo "$k" | tr ':/' '__').log)"
        exit 1
    fi
done
echo "mutants: baseline built and every kill command passes ($(($(date +%s) - t0)) s)"

n=0 killed=0 survived=0 broken=0 unexplained=0 skipped=0
rows=""
while IFS='|' read -r id area pf kill desc note; do
    [ -n "$only" ] && [ "${only#*,$id,}" = "$only" ] && continue
    if [ "${kill#gpu:}" != "$kill" ] && [ $gpu -eq 0 ]; then
        skipped=$((skipped + 1))
        rows="$rows$(printf '%-28s %-9s %-32s %s' "$id" "$area" "$kill" "gpu: not run (no GPU; --gpu-build DIR)")\n"
        continue
    fi
    n=$((n + 1))
    s0=$(date +%s)
    if ! patch_in "$pf" "$logs/$id.patch.log"; then
        res="APPLY-FAILED (stale patch: $logs/$id.patch.log)"; broken=$((broken + 1))
    else
        if ! mk "$(target_of "$kill")" > "$logs/$id.build" 2>&1; then
            res="BUILD-FAILED ($logs/$id.build)"; broken=$((broken + 1))
        else
            run_kill "$kill" "$logs/$id.log"; rc=$?
            if [ $rc -eq 124 ]; then res="killed (timeout ${TIMEOUT}s)"; killed=$((killed + 1))
            elif [ $rc -ne 0 ] && [ $rc -ne 77 ]; then res="killed (exit $rc)"; killed=$((killed + 1))
            elif [ -n "$note" ]; then res="survived (explained)"; survived=$((survived + 1))
            else res="SURVIVED (unexplained)"; survived=$((survived + 1)); unexplained=$((unexplained + 1))
            fi
        fi
        patch_out "$pf" "$logs/$id.patch.log" || { echo "mutants: $id: the patch does not reverse; $tree is now unusable"; exit 1; }
    fi
    line=$(printf '%-28s %-9s %-32s %-28s %4ds' "$id" "$area" "$kill" "$res" $(($(date +%s) - s0)))
    echo "$line"
    rows="$rows$line\n"
done < <(list)

echo
echo "== mutants"
printf '%-28s %-9s %-32s %s\n' id area "kill command" result
printf "$rows"
rate=0
[ $n -gt 0 ] && rate=$((100 * killed / n))
echo "mutants: $killed of $n killed (${rate}%), $survived survived ($unexplained unexplained), $broken failed to apply or build, $skipped GPU mutants not run"
[ $n -gt 0 ] || { echo "mutants: nothing ran"; exit 1; }
[ $broken -eq 0 ] && [ $unexplained -eq 0 ] && [ $((100 * killed)) -ge $((MIN_RATE * n)) ] || exit 1
exit 0
