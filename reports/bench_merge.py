#!/usr/bin/env python3
"""Merge the GPU bench producers' points (moe-bench --backend cuda-fast, the
torch peer) into one document with floors, peers and the issue-8 goals.

    python3 reports/bench_merge.py C.json [torch.json ...] --out merged.json

Inputs are "bench-gpu" documents, the output is "bench-gpu-merged"
(reports/SCHEMA.md). Ceilings: read_tbs (and copy_tbs) from the first file
that has it (the C bench, first on the command line); each dense peak is the
best of the dense measurements present (bf16_dense_tflops /
torch_bf16_dense_tflops, fp8_dense_tflops / torch_fp8_dense_tflops). Per
point: floor_us = max(bytes / read_tbs, flops / peak(scheme)), share_of_floor
= floor_us / median_us (ok points); a cuda-fast point (and one of its
variants, cuda-fast-*) also gets its best peer (the fastest ok point of any
impl not ours, "-gemm-only" impls excluded, at the same shape, M, scheme and
routing) and speedup_vs_best_peer = best_peer_us / median_us. The summary
block (cuda-fast's points) holds the geometric-mean speedup and the goals of
issue 8 (uniform routing) as met / missed lists, with the prefill points also
held against the burst dense peak (a reading beside the goal); its lines are
printed. Inputs timed after different warm-ups by time (meta.warm_ms) merge
with a warning: on a power-capped GPU their times start from different
clocks.

Exit 0: written; 2: usage error or bad input (the message names the file and
the rule broken; nothing is written). The output depends on the inputs and
their order only.
"""

import argparse
import json
import math
import os
import sys
import tempfile

OURS = "cuda-fast"
SHAPE_ORDER = ("deepseek-v3", "mixtral-8x7b", "qwen3-30b-a3b", "gpt-oss-120b")
SCHEME_ORDER = ("bf16", "fp8_wtensor_atensor", "fp8_wchannel_atoken", "fp8_wblock128_agroup128", "int8_wchannel_atoken",
                "w4a16_g128", "mxfp4_w4a16")
STATUSES = ("ok", "skipped", "failed")
CEILING_KEYS = ("read_tbs", "copy_tbs", "bf16_dense_tflops", "fp8_dense_tflops",
                "torch_bf16_dense_tflops", "torch_fp8_dense_tflops",
                "bf16_dense_burst_tflops", "fp8_dense_burst_tflops",
                "torch_bf16_dense_burst_tflops", "torch_fp8_dense_burst_tflops")
# the dense measurements each peak is the best of, in preference order on ties;
# "<kind>_burst": the same GEMMs timed after a second idle and 3 runs, never
# divided by except in the prefill goal's burst reading
PEAK_SOURCES = {"bf16_dense_tflops": ("bf16_dense_tflops", "torch_bf16_dense_tflops"),
                "fp8_dense_tflops": ("fp8_dense_tflops", "torch_fp8_dense_tflops"),
                "bf16_dense_burst_tflops": ("bf16_dense_burst_tflops", "torch_bf16_dense_burst_tflops"),
                "fp8_dense_burst_tflops": ("fp8_dense_burst_tflops", "torch_fp8_dense_burst_tflops")}
# issue 8's goals; they are judged on uniform routing
DECODE_SHAPES = ("deepseek-v3", "mixtral-8x7b", "gpt-oss-120b")
DECODE_M = (16, 256)
DECODE_SHARE = {"bf16": 0.90, "fp8": 0.85}
PREFILL_M, PREFILL_SHARE = 4096, 0.70
SMALL_SHAPE, SMALL_M, SMALL_SHARE = "qwen3-30b-a3b", 1, 0.5
EXIT_BAD = 2


class BadInput(Exception):
    """A missing or malformed input; the message names the file and the rule."""


def ours_impl(impl):
    """cuda-fast and its variants (cuda-fast-atomic, ...): never a peer of cuda-fast."""
    return impl == OURS or impl.startswith(OURS + "-")


def peer_impl(impl):
    return not ours_impl(impl) and not impl.endswith("-gemm-only")


def peak_kind(scheme):
    """The dense peak a scheme's FLOPs are held against: the 8-bit tensor-core
    rate for fp8 and int8 schemes, bf16 for the rest (bf16, f16 and the
    weight-only schemes, whose MMAs run in bf16)."""
    return "fp8" if scheme.startswith(("fp8", "int8")) else "bf16"


def sig(v, digits=6):
    """Derived numbers rounded to `digits` significant digits: readable JSON,
    the same text from the same inputs."""
    if v is None or v == 0 or not math.isfinite(v):
        return v
    return float(f"{v:.{digits}g}")


# ------------------------------------------------------------------ reading

def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def load(path):
    """One producer's "bench-gpu" document, validated."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
    except OSError as e:
        raise BadInput(f"{path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise BadInput(f"{path}: not UTF-8 text") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise BadInput(f"{path}:{e.lineno}: invalid JSON: {e.msg} (column {e.colno})") from None
    return check_doc(doc, path, "bench-gpu")


def check_doc(doc, path, kind):
    def need(cond, rule):
        if not cond:
            raise BadInput(f"{path}: {rule}")
    need(isinstance(doc, dict), "the document must be a JSON object")
    need(doc.get("type") == kind, f"\"type\" must be \"{kind}\", not {doc.get('type')!r}")
    meta = doc.get("meta")
    need(isinstance(meta, dict), "\"meta\" must be an object")
    ceil = meta.get("ceilings", {})
    need(isinstance(ceil, dict), "meta.ceilings must be an object")
    for k in CEILING_KEYS:
        v = ceil.get(k)
        need(v is None or is_num(v) and v > 0, f"meta.ceilings.{k} must be a positive number or null")
    points = doc.get("points")
    need(isinstance(points, list), "\"points\" must be a list")
    for i, p in enumerate(points):
        check_point(p, f"{path}: points[{i}]")
    return doc


def check_point(p, where):
    def need(cond, rule):
        if not cond:
            raise BadInput(f"{where}: {rule}")
    need(isinstance(p, dict), "a point must be an object")
    for k in ("shape", "scheme", "routing", "impl", "status"):
        need(isinstance(p.get(k), str) and p[k], f"\"{k}\" must be a non-empty string")
    need(p["status"] in STATUSES, f"\"status\" must be one of {', '.join(STATUSES)}, not {p['status']!r}")
    need(isinstance(p.get("M"), int) and not isinstance(p["M"], bool) and p["M"] >= 1,
         "\"M\" must be a positive integer")
    for k in ("bytes", "flops"):
        need(p.get(k) is None and p["status"] != "ok" or is_num(p.get(k)) and p[k] >= 0,
             f"\"{k}\" must be a non-negative number (required when status is ok)")
    need(p.get("sm_clock_mhz") is None or is_num(p["sm_clock_mhz"]) and p["sm_clock_mhz"] > 0,
         "\"sm_clock_mhz\" must be a positive number (MHz) or null")
    if p["status"] == "ok":
        need(is_num(p.get("median_us")) and p["median_us"] > 0, "an ok point needs \"median_us\" > 0")
        need(p.get("min_us") is None or is_num(p["min_us"]) and p["min_us"] > 0, "\"min_us\" must be > 0")
    else:
        need(isinstance(p.get("why"), str) and p["why"], f"a {p['status']} point needs its reason in \"why\"")


def key(p):
    return (p["shape"], p["M"], p["scheme"], p["routing"], p["impl"])


def order_key(p):
    rank = lambda v, order: (order.index(v) if v in order else len(order), v)
    return (rank(p["shape"], SHAPE_ORDER), p["M"], rank(p["scheme"], SCHEME_ORDER), p["routing"],
            (0 if p["impl"] == OURS else 1, p["impl"]))


# ------------------------------------------------------------------ merging

def ceilings_of(named):
    """read / copy bandwidth from the first file that has them, dense peaks
    the best measured; each with where it came from ("from"), or, when no
    input measured it, the producers' reasons (their "<key>_why", "why")."""
    out, src, why = {}, {}, {}
    ceil = lambda doc: doc["meta"].get("ceilings", {})
    for k in ("read_tbs", "copy_tbs"):
        out[k] = None
        for path, doc in named:
            v = ceil(doc).get(k)
            if v is not None:
                out[k], src[k] = v, f"{path} ({k})"
                break
    for name, keys in PEAK_SOURCES.items():
        best = None
        for path, doc in named:
            for k in keys:
                v = ceil(doc).get(k)
                if v is not None and (best is None or v > best[0]):
                    best = (v, f"{path} ({k})", doc, k)
        out[name] = best[0] if best else None
        if best:
            src[name] = best[1]
        if "burst" not in name:   # the SM clock the chosen sustained figure was timed at, where recorded
            clock = best and ceil(best[2]).get(best[3].replace("_tflops", "_clock_mhz"))
            out[name.replace("_tflops", "_clock_mhz")] = clock if is_num(clock) else None
    for k, keys in (("read_tbs", ("read_tbs",)), ("copy_tbs", ("copy_tbs",)),
                    ("bf16_dense_tflops", PEAK_SOURCES["bf16_dense_tflops"]),
                    ("fp8_dense_tflops", PEAK_SOURCES["fp8_dense_tflops"])):
        if out[k] is None:
            texts = [f"{path}: {ceil(doc)[c + '_why']}" for path, doc in named for c in keys
                     if isinstance(ceil(doc).get(c + "_why"), str)]
            if texts:
                why[k] = "; ".join(texts)
    out["from"], out["why"] = src, why
    return out


def floor_of(p, ceil):
    """(floor_us, bound): the larger of the memory and compute times, over
    the ceilings present; (None, None) when neither is."""
    terms = []
    if ceil["read_tbs"]:
        terms.append((p["bytes"] / (ceil["read_tbs"] * 1e6), "memory"))
    peak = ceil[f"{peak_kind(p['scheme'])}_dense_tflops"]
    if peak:
        terms.append((p["flops"] / (peak * 1e6), "compute"))
    if not terms:
        return None, None
    return max(terms)


def merge(named):
    """named: [(path, doc)] in command-line order -> the merged document."""
    seen, points, warnings = {}, [], []
    for path, doc in named:
        for i, p in enumerate(doc["points"]):
            k = key(p)
            if k in seen:
                raise BadInput(f"{path}: points[{i}]: a second point for shape {k[0]}, M {k[1]}, scheme {k[2]}, "
                               f"routing {k[3]}, impl {k[4]} (the first is in {seen[k]}): one point per "
                               f"shape, M, scheme, routing and impl")
            seen[k] = path
            points.append(dict(p))
    for field in ("seed", "skew"):
        vals = {json.dumps(doc["meta"][field]) for _, doc in named if field in doc["meta"]}
        if len(vals) > 1:
            raise BadInput(f"{named[-1][0]}: meta.{field} differs between the inputs ({', '.join(sorted(vals))}): "
                           f"every producer must measure the same routing")
    gpus = sorted({str(doc["meta"]["gpu"]) for _, doc in named if doc["meta"].get("gpu")})
    if len(gpus) > 1:
        warnings.append("the inputs name different GPUs: " + "; ".join(gpus))
    warm = [doc["meta"].get("warm_ms") for _, doc in named]
    if len({json.dumps(w) for w in warm}) > 1:
        each = ", ".join(f"{path}: {w if w is not None else 'not recorded'}" for (path, _), w in zip(named, warm))
        warnings.append(f"the inputs were timed after different warm-ups by time (meta.warm_ms {each}): "
                        "on a power-capped GPU their times start from different clocks")
    ceil = ceilings_of(named)
    if ceil["read_tbs"] is None:
        warnings.append("no read_tbs ceiling in any input: floors hold the compute term only")
    groups = {}
    for p in points:
        # the floor is the problem's (any point with counts), the shares the run's;
        # a producer's own floor fields give way to the merged ceilings'
        floor, bound = floor_of(p, ceil) if is_num(p.get("bytes")) and is_num(p.get("flops")) else (None, None)
        p["floor_us"], p["floor_bound"] = sig(floor), bound
        ok = p["status"] == "ok"
        p["share_of_floor"] = sig(floor / p["median_us"]) if ok and floor is not None else None
        peak = ceil[f"{peak_kind(p['scheme'])}_dense_tflops"]
        p["share_of_dense_peak"] = sig(p["flops"] / p["median_us"] / 1e6 / peak) if ok and peak else None
        groups.setdefault(key(p)[:4], []).append(p)
    for p in points:
        if not ours_impl(p["impl"]):
            continue
        peers = [q for q in groups[key(p)[:4]] if peer_impl(q["impl"]) and q["status"] == "ok"]
        best = min(peers, key=lambda q: (q["median_us"], q["impl"])) if peers else None
        p["best_peer"] = best["impl"] if best else None
        p["best_peer_us"] = best["median_us"] if best else None
        p["speedup_vs_best_peer"] = sig(best["median_us"] / p["median_us"]) if best and p["status"] == "ok" \
            else None
    points.sort(key=order_key)
    meta = {"tool": "bench_merge.py",
            "sources": [{"path": path, "tool": doc["meta"].get("tool"), "gpu": doc["meta"].get("gpu"),
                         "points": len(doc["points"]), "git_rev": doc["meta"].get("git_rev"),
                         "warm_ms": doc["meta"].get("warm_ms"),
                         "clock": doc["meta"].get("clock"), "clock_why": doc["meta"].get("clock_why")}
                        for path, doc in named],
            "ceilings": ceil, "warnings": warnings}
    for field in ("seed", "skew", "gpu", "warm_ms"):
        for _, doc in named:
            if doc["meta"].get(field) is not None:
                meta[field] = doc["meta"][field]
                break
    return {"type": "bench-gpu-merged", "meta": meta, "points": points, "summary": summarize(points, ceil)}


# ------------------------------------------------------------------ summary

def item(p, value=None, target=None):
    it = {"shape": p["shape"], "M": p["M"], "scheme": p["scheme"], "routing": p["routing"]}
    if p["status"] != "ok":
        it["why"] = f"{p['status']}: {p.get('why', '')}"
    it["value"], it["target"] = sig(value, 4), target
    return it


def goal(gid, title, ours, select, measure):
    """met / missed over our points that `select` picks; a point that did not
    run is a miss, with its reason."""
    met, missed = [], []
    for p in ours:
        if not select(p):
            continue
        value, target = measure(p)
        it = item(p, value, target)
        if p["status"] == "ok" and value is None:
            it["why"] = "not judged: a ceiling it needs was not measured"
        (met if p["status"] == "ok" and value is not None and value >= target else missed).append(it)
    return {"id": gid, "title": title, "met": met, "missed": missed}


def burst_share(p, ceil):
    peak = ceil.get(f"{peak_kind(p['scheme'])}_dense_burst_tflops")
    return p["flops"] / p["median_us"] / 1e6 / peak if p["status"] == "ok" and peak else None


def summarize(points, ceil):
    ours = [p for p in points if p["impl"] == OURS]
    counts = {s: sum(p["status"] == s for p in ours) for s in STATUSES}
    sp = [p["speedup_vs_best_peer"] for p in ours if p.get("speedup_vs_best_peer")]
    geo = sig(math.exp(sum(math.log(v) for v in sp) / len(sp)), 4) if sp else None
    faster = sum(v > 1 for v in sp)
    known = lambda p: p["scheme"] == "bf16" or p["scheme"].startswith("fp8")
    uniform = lambda p: p["routing"] == "uniform"
    share = lambda p: p.get("share_of_floor")
    goals = [
        goal("decode", "decode: M 16..256 on " + ", ".join(DECODE_SHAPES) +
             f": share of floor >= {DECODE_SHARE['bf16']:.2f} bf16, {DECODE_SHARE['fp8']:.2f} fp8",
             ours, lambda p: uniform(p) and known(p) and p["shape"] in DECODE_SHAPES
             and DECODE_M[0] <= p["M"] <= DECODE_M[1],
             lambda p: (share(p), DECODE_SHARE[peak_kind(p["scheme"])])),
        goal("prefill", f"prefill: M >= {PREFILL_M}: achieved TFLOP/s >= {PREFILL_SHARE:.2f} of the dense peak",
             ours, lambda p: uniform(p) and p["M"] >= PREFILL_M,
             lambda p: (p.get("share_of_dense_peak"), PREFILL_SHARE)),
        goal("small-m", f"{SMALL_SHAPE} at M = {SMALL_M}: share of floor >= {SMALL_SHARE:.2f}",
             ours, lambda p: uniform(p) and p["shape"] == SMALL_SHAPE and p["M"] == SMALL_M,
             lambda p: (share(p), SMALL_SHARE)),
    ]
    if ceil.get("bf16_dense_burst_tflops") or ceil.get("fp8_dense_burst_tflops"):
        # the same points held against the dense GEMMs' burst figure: what the share would read with a
        # peak timed at an idle GPU's clocks (only where an input measured one: inputs from before it have none)
        title = (f"prefill against the burst dense peak (timed after a second idle; a reading, not the goal's): "
                 f"M >= {PREFILL_M}: achieved TFLOP/s >= {PREFILL_SHARE:.2f} of it")
        goals.insert(2, goal("prefill-burst", title, ours, lambda p: uniform(p) and p["M"] >= PREFILL_M,
                             lambda p: (burst_share(p, ceil), PREFILL_SHARE)))
    lines = [f"{OURS}: {len(ours)} points: {counts['ok']} ok, {counts['skipped']} skipped, {counts['failed']} failed; "
             + (f"faster than the best peer at {faster} of {len(sp)} points with a peer "
                f"(geomean speedup {geo:.3g}x)" if sp else "no point has an ok peer")]
    for g in goals:
        lines.append(f"goal {g['title']}: {len(g['met'])} met, {len(g['missed'])} missed")
    return {"impl": OURS, "points": counts, "with_peer": len(sp), "faster": faster, "geomean_speedup": geo,
            "goals": goals, "lines": lines}


# ------------------------------------------------------------------ output

def load_merged(path):
    """A "bench-gpu-merged" document (the report's input), validated."""
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read().decode("utf-8"))
    except OSError as e:
        raise BadInput(f"{path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise BadInput(f"{path}: not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise BadInput(f"{path}:{e.lineno}: invalid JSON: {e.msg} (column {e.colno})") from None
    if isinstance(doc, dict) and doc.get("type") == "bench-gpu":
        return merge([(path, check_doc(doc, path, "bench-gpu"))])   # one producer: merged on the fly
    if not isinstance(doc, dict) or doc.get("type") != "bench-gpu-merged":
        got = doc.get("type") if isinstance(doc, dict) else None
        raise BadInput(f"{path}: \"type\" must be \"bench-gpu-merged\" (bench_merge.py) or \"bench-gpu\" "
                       f"(one producer), not {got!r}")
    check_doc(doc, path, "bench-gpu-merged")
    if not isinstance(doc.get("summary"), dict) or not isinstance(doc["summary"].get("goals"), list):
        raise BadInput(f"{path}: a merged document needs its \"summary\" with \"goals\" (run bench_merge.py)")
    return doc


def dumps(doc):
    return json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def write_atomic(path, text):
    d = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="bench_merge.py",
        description="Merge bench-gpu JSON (moe-bench --backend cuda-fast first, then peers such as "
                    "torch_peer.py) into one bench-gpu-merged document with floors, best peers and goals.",
        epilog="Exit 0: written; 2: usage error or bad input (nothing written). Formats: reports/SCHEMA.md.")
    ap.add_argument("inputs", nargs="+", metavar="FILE.json", help="bench-gpu documents; ceilings read_tbs and "
                    "copy_tbs come from the first that has them")
    ap.add_argument("--out", required=True, metavar="merged.json")
    args = ap.parse_args(argv)
    try:
        doc = merge([(p, load(p)) for p in args.inputs])
        write_atomic(args.out, dumps(doc))
    except BadInput as e:
        print(f"bench_merge.py: {e}", file=sys.stderr)
        return EXIT_BAD
    except OSError as e:
        print(f"bench_merge.py: {args.out}: cannot write: {e.strerror or e}", file=sys.stderr)
        return EXIT_BAD
    for w in doc["meta"]["warnings"]:
        print(f"bench_merge.py: warning: {w}", file=sys.stderr)
    for line in doc["summary"]["lines"]:
        print(line)
    print(f"merged: {args.out} ({len(doc['points'])} points from {len(args.inputs)} "
          f"file{'s' if len(args.inputs) > 1 else ''})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
