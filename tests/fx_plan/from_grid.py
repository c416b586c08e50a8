#!/usr/bin/env python3
"""The plans a GPU grid ran, as tests/check_fx_plan.c reads them.

usage: from_grid.py MERGED.json > tests/fx_plan/grid.tsv

MERGED.json is a bench-gpu-merged document (reports/bench_merge.py). Each
cuda-fast / cuda-fast-atomic point of uniform routing gives one line:
shape, M, scheme, atomic (0 / 1), then what moe-bench wrote of its plan
(moe_cuda_fx_plan_words, the point's note after "tiles ") or, for a point
the plan refused, "refused: " and its reason. Exit 2, naming the file and
what is wrong, where the document cannot be read or lacks a plan."""
import json
import sys

PREFIX = "CUDA graph replays; tiles "


def lines(doc):
    seen = set()
    for p in doc["points"]:
        if not p["impl"].startswith("cuda-fast") or p["routing"] != "uniform":
            continue
        atomic = int(p["impl"] == "cuda-fast-atomic")
        key = (p["shape"], p["M"], p["scheme"], atomic)
        if key in seen:
            continue
        seen.add(key)
        if p["status"] == "skipped":
            what = "refused: " + p.get("why", "")
        elif p.get("note", "").startswith(PREFIX):
            what = p["note"][len(PREFIX):]
        else:
            raise ValueError(f"point {key}: no plan in its note and not refused")
        yield "\t".join([p["shape"], str(p["M"]), p["scheme"], str(atomic), what])


def main(argv):
    if len(argv) != 2:
        print("usage: from_grid.py MERGED.json", file=sys.stderr)
        return 2
    try:
        with open(argv[1]) as f:
            out = list(lines(json.load(f)))
    except OSError as e:
        print(f"from_grid.py: {argv[1]}: cannot read: {e.strerror or e}", file=sys.stderr)
        return 2
    except (ValueError, KeyError, TypeError) as e:  # JSONDecodeError is a ValueError
        print(f"from_grid.py: {argv[1]}: not a bench-gpu-merged document with plans: {e}", file=sys.stderr)
        return 2
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
