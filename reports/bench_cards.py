#!/usr/bin/env python3
"""Two GPU bench grids side by side, each timed on a card with its own read
ceiling (an H100 against an H200, say): per point the time ratio and the
share of the second grid's time that does not scale with read bandwidth.

    python3 reports/bench_cards.py A.json B.json [--impl cuda-fast] [--out cards.json]

Inputs are "bench-gpu-merged" (bench_merge.py) or "bench-gpu" documents,
each with its own meta.ceilings.read_tbs. With R = read_B / read_A a
point's times split as t_B = u + c and t_A = R u + c: u scales with the read
ceiling, c does not (the MMAs and their issue, launches, latency chains, and
a stream bounded by the bytes it keeps in flight, which the same loaded
latency makes the same on both cards). So u = (t_A - t_B) / (R - 1), and
the share reported is c / t_B. It is a two-term model: it takes the dense
peaks as equal (a warning names them where they differ by more than 5%),
and a share outside [0, 1] says the grids differ in more than the card
(builds, clocks, run-to-run spread); grids timed on different routings
(meta.seed, meta.skew) are compared with a warning too. NOTES.md v65 is the reading it was
made for.

Exit 0: printed (and written with --out); 2: usage error or bad input (the
message names the file and the rule broken; nothing is written).
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.dont_write_bytecode = True   # no __pycache__ left in reports/ by the import below
import bench_merge  # noqa: E402  (the bench documents' reading, key order, rounding and atomic write)
from bench_merge import BadInput, sig  # noqa: E402

MIN_READ_GAP = 0.05   # the split divides by R - 1: ceilings closer than this make it noise
PEAK_GAP = 0.05       # dense peaks further apart than this break the model's premise: a warning


def read_tbs(doc, path):
    v = doc["meta"].get("ceilings", {}).get("read_tbs")
    if not bench_merge.is_num(v) or v <= 0:
        raise BadInput(f"{path}: meta.ceilings.read_tbs must be a positive number (the read ceiling the split "
                       f"divides by)")
    return v


def ok_points(doc, impl):
    return {bench_merge.key(p): p for p in doc["points"] if p["impl"] == impl and p["status"] == "ok"}


def compare(a_path, a, b_path, b, impl):
    ra, rb = read_tbs(a, a_path), read_tbs(b, b_path)
    r = rb / ra
    if abs(r - 1) < MIN_READ_GAP:
        raise BadInput(f"{b_path}: the read ceilings must differ by at least {MIN_READ_GAP:.0%} ({a_path}: {ra} "
                       f"TB/s, {b_path}: {rb} TB/s): the split divides by their difference")
    warnings = []
    for k in ("bf16_dense_tflops", "fp8_dense_tflops"):
        pa, pb = (d["meta"].get("ceilings", {}).get(k) for d in (a, b))
        if bench_merge.is_num(pa) and bench_merge.is_num(pb) and abs(pb / pa - 1) > PEAK_GAP:
            warnings.append(f"meta.ceilings.{k} differs by more than {PEAK_GAP:.0%} ({a_path}: {pa}, {b_path}: "
                            f"{pb}): the split takes the part that does not scale with bandwidth as the same on "
                            f"both cards")
    for k in ("seed", "skew"):   # the same key on another routing draw is another problem
        va, vb = a["meta"].get(k), b["meta"].get(k)
        if va is not None and vb is not None and va != vb:
            warnings.append(f"meta.{k} differs ({a_path}: {va}, {b_path}: {vb}): the points were timed on "
                            f"different routings")
    pa, pb = ok_points(a, impl), ok_points(b, impl)
    common = sorted(set(pa) & set(pb), key=lambda k: bench_merge.order_key(pb[k]))
    if not common:
        raise BadInput(f"{b_path}: no ok point of impl {impl} at the same shape, M, scheme and routing as in "
                       f"{a_path}")
    points = []
    for k in common:
        ta, tb = pa[k]["median_us"], pb[k]["median_us"]
        u = (ta - tb) / (r - 1)
        points.append({"shape": k[0], "M": k[1], "scheme": k[2], "routing": k[3], "impl": k[4],
                       "a_us": ta, "b_us": tb, "a_over_b": sig(ta / tb), "bandwidth_us": sig(u),
                       "other_us": sig(tb - u), "other_share": sig((tb - u) / tb)})
    gpu = lambda d: d["meta"].get("gpu")
    meta = {"a": a_path, "b": b_path, "a_gpu": gpu(a), "b_gpu": gpu(b), "read_tbs_a": ra, "read_tbs_b": rb,
            "read_ratio": sig(r), "impl": impl, "warnings": warnings}
    return {"type": "bench-cards", "meta": meta, "points": points,
            "unmatched": {"a": len(set(pa) - set(pb)), "b": len(set(pb) - set(pa))}}


def lines(doc):
    m = doc["meta"]
    yield (f"A {m['a']} ({m['a_gpu'] or 'gpu not named'}): read {m['read_tbs_a']} TB/s; B {m['b']} "
           f"({m['b_gpu'] or 'gpu not named'}): read {m['read_tbs_b']} TB/s, {m['read_ratio']}x A's")
    for p in doc["points"]:
        yield (f"{p['shape']} M {p['M']} {p['scheme']} {p['routing']}: {p['a_us']:.1f} -> {p['b_us']:.1f} us "
               f"({p['a_over_b']:.2f}x); not scaling with bandwidth: {100 * p['other_share']:.0f}% of B's time")
    u = doc["unmatched"]
    yield f"{len(doc['points'])} points of {m['impl']} in both; {u['a']} only in A, {u['b']} only in B"


def main(argv=None):
    paras = __doc__.split("\n\n")   # the first paragraph describes, the last gives the exit codes
    ap = argparse.ArgumentParser(prog="bench_cards.py", description=" ".join(paras[0].split()),
                                 epilog=" ".join(paras[-1].split()) + " Formats: reports/SCHEMA.md.")
    ap.add_argument("a", metavar="A.json", help="the first grid (bench-gpu-merged or bench-gpu)")
    ap.add_argument("b", metavar="B.json", help="the second grid, whose time is split")
    ap.add_argument("--impl", default=bench_merge.OURS, help="the implementation compared (default cuda-fast)")
    ap.add_argument("--out", metavar="cards.json", help="also write the comparison as a bench-cards document")
    args = ap.parse_args(argv)
    try:
        doc = compare(args.a, bench_merge.load_merged(args.a), args.b, bench_merge.load_merged(args.b), args.impl)
        if args.out:
            bench_merge.write_atomic(args.out, bench_merge.dumps(doc))
    except BadInput as e:
        print(f"bench_cards.py: {e}", file=sys.stderr)
        return bench_merge.EXIT_BAD
    except OSError as e:
        print(f"bench_cards.py: {args.out}: cannot write: {e.strerror or e}", file=sys.stderr)
        return bench_merge.EXIT_BAD
    for w in doc["meta"]["warnings"]:
        print(f"bench_cards.py: warning: {w}", file=sys.stderr)
    for line in lines(doc):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
