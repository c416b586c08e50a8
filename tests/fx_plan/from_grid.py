#!/usr/bin/env python3
"""The plans a GPU grid ran, as tests/check_fx_plan.c reads them.

usage: from_grid.py MERGED.json > tests/fx_plan/grid.tsv

MERGED.json is a bench-gpu-merged document (reports/bench_merge.py). Each
cuda-fast / cuda-fast-atomic point of uniform routing gives one line:
shape, M, scheme, atomic (0 / 1), then what moe-bench wrote of its plan
(moe_cuda_fx_tiles, plan.launches, plan.workspace: the point's note) or,
for a point the plan refused, "refused: " and its reason."""
import json
import sys

PREFIX = "CUDA graph replays; tiles "


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: from_grid.py MERGED.json")
    doc = json.load(open(argv[1]))
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
            sys.exit(f"{key}: no plan in the note and not refused")
        print("\t".join([p["shape"], str(p["M"]), p["scheme"], str(atomic), what]))


if __name__ == "__main__":
    main(sys.argv)
