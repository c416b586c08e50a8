#!/usr/bin/env python3
"""moe-conform report: sweep / golden / bench JSON -> one self-contained HTML file.

    python3 reports/report.py --sweep S.jsonl [--compat M.json] [--golden G.json]
        [--golden-diff D.json] [--bench B.json] [--bench-gpu merged.json]
        [--compare OLD.jsonl NEW.jsonl] --out report.html

Every input is optional but at least one is required; the formats are in
reports/SCHEMA.md. The output has inline CSS, JS and SVG and no external
reference, so it opens offline. It is deterministic: the same inputs give
byte-identical HTML (no clock is read, everything is sorted with explicit
keys, floats are formatted one fixed way).

A missing or malformed input exits 3 (usage errors 2) with a message naming the file (and the
line, for JSON Lines and JSON syntax errors), and leaves no output file: the
HTML is written to a temporary file next to --out and renamed into place.

Size: the case table is rendered by JS from one embedded JSON blob (strings
interned, records as arrays, heatmaps quantized to 1/1000 of the bound), a
page at a time, and the per-case details (first mismatches, heatmap and
histogram SVGs) are built on demand when a row is clicked. So 10^4 records
cost a few MB of JSON and no DOM rows up front (a synthetic 10^4-record
sweep: 3.3 MB of case data, under 2 s to render, about 0.6 s to load in
Chromium). Everything else (summary, metadata, compatibility matrix, golden,
nightly delta, bench) is rendered here in Python through the jinja2
templates in reports/templates/, with CSS and JS inlined from reports/static/.

--compare OLD NEW is the nightly view: new failures, fixed cases, changed
metrics and, labelled as timing only, changed times; without --sweep, NEW
is also shown in full. The page's URL fragment presets the case table, e.g.
report.html#filter=bf16%20cpu&verdict=fail&hide=1&sort=-share, or
#case=CASE|BACKEND|STAGE selects one record.
"""

import argparse
import json
import math
import os
import sys
from collections import Counter
from pathlib import Path

import jinja2
from markupsafe import Markup

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.dont_write_bytecode = True   # no __pycache__ left in reports/ by the import below
import bench_merge  # noqa: E402  (reports/bench_merge.py: the GPU bench's merge, floors and goals)
EXIT_BAD_INPUT = 3  # DESIGN section 11: bad input files exit 3, usage errors 2

# Verdicts in severity order (the default case-table order and every count table).
VERDICTS = ("fail", "error", "pass", "refused-as-expected", "skipped")
PASSING = frozenset(("pass", "refused-as-expected"))
FAILING = frozenset(("fail", "error"))
CLASSES = ("EXACT", "SET", "BOUNDED")
KNOWN_BACKENDS = ("ref", "cpu", "cuda-conform", "cuda-atomic", "cuda-fast")
METRIC_FIELDS = ("n", "mismatches", "class_mismatches", "bound_failures",
                 "max_abs", "max_ulp", "share", "calls")
# Metrics the nightly comparison reports when they change (SCHEMA.md).
COMPARED_METRICS = ("max_abs", "max_ulp", "share", "mismatches", "class_mismatches", "bound_failures")
CASE_PARAMS = ("pf", "experts", "scheme", "act", "E", "k", "M", "H", "I", "world")
CASE_FIELDS = frozenset(("type", "case", "backend", "stage", "verdict", "class", "tolerance",
                         "bound", "reason", "rules", "metrics", "time_ms") + CASE_PARAMS)
META_ORDER = (("tool", "tool"), ("tier", "tier"), ("git_rev", "git revision"),
              ("date", "date"), ("compiler", "compiler"), ("cflags", "flags"),
              ("cuda", "CUDA"), ("driver", "driver"), ("gpu", "GPU"),
              ("openblas", "OpenBLAS"), ("omp_threads", "OpenMP threads"),
              ("seed", "seed"), ("filter", "filter"), ("jobs", "jobs"))
GOLDEN_STATUS = ("corrupt", "missing", "changed", "ok")
BENCH_COLUMNS = ("shape", "M", "scheme", "backend", "stage", "median_us", "gflops", "tbps",
                 "share_of_roofline")
# Plot colours per series, in backend order; fixed so the SVG is deterministic.
PALETTE = ("#0969da", "#cf222e", "#1a7f37", "#8250df", "#bc4c00", "#1b7c83", "#6e7781", "#bf3989")


class InputError(Exception):
    """A missing or malformed input; the message names the file (and line)."""


# ---------------------------------------------------------------- formatting

def fmt_num(v, digits=4):
    """One fixed way to print a number: integers as they are, floats with
    `digits` significant digits, exponents without padding, inf/nan by name."""
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))   # as JSON.parse and the page's JS show it
    s = format(v, f".{digits}g")
    if "e" in s:
        mant, exp = s.split("e")
        s = f"{mant}e{int(exp)}"
    return s


def fmt_plain(v):
    """Bench table numbers: no exponents; thousands separated, 4 significant
    digits below 10^4."""
    if isinstance(v, float) and not math.isfinite(v):
        return fmt_num(v)
    if isinstance(v, int) or abs(v) >= 1e4:
        return f"{round(v):,}"
    return fmt_num(v)


def fmt_ms(v):
    return "—" if v is None else f"{fmt_num(v, 3)} ms"


def fmt_meta(v):
    """A metadata value: null as a dash, lists/objects as compact JSON."""
    if v is None:
        return "—"
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True, ensure_ascii=False)
    if isinstance(v, float):
        return fmt_num(v, 6)
    return str(v)


def plural(n, word, words=None):
    return f"{n} {word if n == 1 else (words or word + 's')}"


def js_value(v):
    """A number for the embedded JSON: non-finite floats as SCHEMA.md's strings."""
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


# ------------------------------------------------------------------- reading

def read_text(path):
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise InputError(f"{path}:{line}: not UTF-8 text") from None


def parse_json_doc(path, what):
    text = read_text(path)
    if not text.strip():
        raise InputError(f"{path}: empty file (expected {what})")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}:{e.lineno}: invalid JSON: {e.msg} (column {e.colno})") from None
    if not isinstance(doc, dict):
        raise InputError(f"{path}:1: expected a JSON object ({what})")
    return doc


def need(cond, where, msg):
    if not cond:
        raise InputError(f"{where}: {msg}")


def get_str(obj, key, where, required=False, default=""):
    v = obj.get(key)
    if v is None:
        need(not required, where, f"missing \"{key}\"")
        return default
    need(isinstance(v, str), where, f"\"{key}\" must be a string")
    return v


def to_num(v, where, key):
    """A JSON number or SCHEMA.md's "inf" / "-inf" / "nan" as a Python number."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise InputError(f"{where}: \"{key}\" must be a number")
    if isinstance(v, str):
        if v not in ("inf", "-inf", "nan"):
            raise InputError(f"{where}: \"{key}\" must be a number (or \"inf\", \"-inf\", \"nan\"), not {v!r}")
        return float(v)
    return v


def get_num(obj, key, where, required=False):
    v = to_num(obj.get(key), where, key)
    need(v is not None or not required, where, f"missing \"{key}\"")
    return v


def get_list(obj, key, where):
    v = obj.get(key)
    if v is None:
        return []
    need(isinstance(v, list), where, f"\"{key}\" must be a list")
    return v


def norm_metrics(m, where):
    """metrics of a case / golden backend record, validated (SCHEMA.md)."""
    need(isinstance(m, dict), where, "\"metrics\" must be an object")
    out = {k: get_num(m, k, where) for k in METRIC_FIELDS}
    first = []
    for i, f in enumerate(get_list(m, "first", where)):
        fw = f"{where}: metrics.first[{i}]"
        need(isinstance(f, dict), fw, "must be an object")
        idx = f.get("index")
        if isinstance(idx, float) and idx.is_integer():
            idx = int(idx)   # a flat index written by a JSON library as a double
        need(isinstance(idx, int) and not isinstance(idx, bool)
             or isinstance(idx, list) and all(isinstance(x, int) for x in idx),
             fw, "\"index\" must be an integer or a list of integers")
        first.append({"index": idx, "got": get_num(f, "got", fw), "want": get_num(f, "want", fw),
                      "got_hex": get_str(f, "got_hex", fw), "want_hex": get_str(f, "want_hex", fw)})
    out["first"] = first
    out["heat"] = norm_heat(m.get("heat"), where)
    out["hist"] = norm_hist(m.get("hist"), where)
    return out


def norm_heat(h, where):
    if h is None:
        return None
    hw = f"{where}: metrics.heat"
    need(isinstance(h, dict), hw, "must be an object")
    rows = get_list(h, "values", hw)
    need(all(isinstance(r, list) for r in rows), hw, "\"values\" must be a list of lists")
    values = [[to_num(v, hw, "values") for v in r] for r in rows]
    need(all(v is not None for r in values for v in r), hw, "\"values\" holds a null")
    block = h.get("block")
    need(block is None or isinstance(block, int), hw, "\"block\" must be an integer")
    return {"row_label": get_str(h, "row_label", hw, default="expert"),
            "col_label": get_str(h, "col_label", hw, default="token block"),
            "block": block, "values": values}


def norm_hist(h, where):
    if h is None:
        return None
    hw = f"{where}: metrics.hist"
    need(isinstance(h, dict), hw, "must be an object")
    edges = [to_num(v, hw, "edges") for v in get_list(h, "edges", hw)]
    counts = get_list(h, "counts", hw)
    need(all(e is not None for e in edges), hw, "\"edges\" holds a null")
    need(all(isinstance(c, int) and not isinstance(c, bool) for c in counts), hw,
         "\"counts\" must be integers")
    # Either one count per interval, or one more: the last bucket is ">= last edge".
    need(len(edges) >= 1 and len(counts) in (len(edges) - 1, len(edges)), hw,
         f"{len(counts)} counts do not fit {len(edges)} edges")
    return {"edges": edges, "counts": counts}


def norm_case(obj, where):
    rec = {"case": get_str(obj, "case", where, required=True),
           "backend": get_str(obj, "backend", where, required=True),
           "stage": get_str(obj, "stage", where, required=True),
           "verdict": get_str(obj, "verdict", where, required=True),
           "class": get_str(obj, "class", where),
           "tolerance": get_str(obj, "tolerance", where),
           "bound": get_str(obj, "bound", where),
           "reason": get_str(obj, "reason", where),
           "time_ms": get_num(obj, "time_ms", where)}
    need(rec["verdict"] in VERDICTS, where,
         f"unknown verdict {rec['verdict']!r} (expected one of {', '.join(VERDICTS)})")
    need(rec["class"] in CLASSES or rec["class"] == "", where,
         f"unknown class {rec['class']!r} (expected one of {', '.join(CLASSES)})")
    rules = get_list(obj, "rules", where)
    need(all(isinstance(r, str) for r in rules), where, "\"rules\" must be a list of rule ids")
    rec["rules"] = rules
    m = obj.get("metrics")
    rec["metrics"] = None if m is None else norm_metrics(m, where)
    # Case parameters in their schema order, then any field the schema does not name.
    params = [(k, obj[k]) for k in CASE_PARAMS if obj.get(k) is not None]
    params += [(k, obj[k]) for k in sorted(obj) if k not in CASE_FIELDS]
    rec["params"] = params
    rec["p"] = dict(params)
    return rec


def load_sweep(path):
    """A moe-sweep JSON Lines file: meta line, case records, summary line."""
    text = read_text(path)
    meta, summary, records, seen = None, None, [], {}
    lines = text.split("\n")
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"{where}: invalid JSON: {e.msg} (column {e.colno})") from None
        need(isinstance(obj, dict), where, "expected a JSON object")
        kind = obj.get("type")
        if kind == "meta":
            need(meta is None, where, "a second meta line")
            need(not records, where, "the meta line must come first")
            meta = obj
        elif kind == "case":
            need(summary is None, where, "a case record after the summary line")
            rec = norm_case(obj, where)
            key = (rec["case"], rec["backend"], rec["stage"])
            need(key not in seen, where, f"a second record for ({', '.join(key)}); the first is on line {seen.get(key)}")
            seen[key] = lineno
            rec["line"] = lineno
            records.append(rec)
        elif kind == "summary":
            need(summary is None, where, "a second summary line")
            summary = obj
        else:
            raise InputError(f"{where}: unknown record type {kind!r} (expected \"meta\", \"case\" or \"summary\")")
    if meta is None and summary is None and not records:
        raise InputError(f"{path}: empty file (expected moe-sweep JSON Lines)")
    warnings = []
    if meta is None:
        warnings.append(f"{path}: no meta line: run metadata unknown")
    if summary is None:
        warnings.append(f"{path}: no summary line: the sweep may not have finished")
    sweep = {"path": path, "meta": meta or {}, "summary": summary, "records": records, "warnings": warnings}
    order = backend_order(sweep["meta"], records)
    records.sort(key=lambda r: record_key(r, order))
    sweep["backend_order"] = order
    sweep["counts"] = Counter(r["verdict"] for r in records)
    check_summary(sweep)
    return sweep


def backend_order(meta, records):
    """Backends as the sweep's meta line lists them, then the known ones, then by name."""
    names = []
    for b in meta.get("backends") or []:
        if isinstance(b, dict) and isinstance(b.get("name"), str) and b["name"] not in names:
            names.append(b["name"])
    names += [b for b in KNOWN_BACKENDS if b not in names]
    names += sorted({r["backend"] for r in records} - set(names))
    return names


def stage_rank(stage):
    return (0 if stage == "e2e" else 1, stage)


def record_key(r, order):
    return (r["case"], order.index(r["backend"]) if r["backend"] in order else len(order),
            r["backend"], stage_rank(r["stage"]))


def sweep_text(counts):
    """The line moe-sweep prints last (SCHEMA.md: passed = pass + refused-as-expected)."""
    passed = counts["pass"] + counts["refused-as-expected"]
    s = f"{passed} passed, {counts['fail']} failed, {counts['skipped']} skipped"
    if counts["error"]:
        s += ", " + plural(counts["error"], "error")
    return s


def check_summary(sweep):
    """A summary line that disagrees with the records means a damaged file."""
    s, c = sweep["summary"], sweep["counts"]
    if s is None:
        return
    expect = {"passed": c["pass"] + c["refused-as-expected"], "failed": c["fail"],
              "skipped": c["skipped"], "refused": c["refused-as-expected"], "errors": c["error"]}
    for k, v in expect.items():
        if k in s and s[k] != v:
            sweep["warnings"].append(f"{sweep['path']}: the summary line says {k} = {s[k]}, "
                                     f"the records count {v}")


def load_compat(path):
    doc = parse_json_doc(path, "moe-compat matrix --format json")
    cells = doc.get("cells")
    need(isinstance(cells, list), path, "missing \"cells\" list (expected moe-compat matrix --format json)")
    out = []
    for i, c in enumerate(cells):
        w = f"{path}: cells[{i}]"
        need(isinstance(c, dict), w, "must be an object")
        cell = {k: get_str(c, k, w, required=True) for k in ("pf", "experts", "scheme")}
        for k in ("topk", "num_experts", "world"):
            cell[k] = get_num(c, k, w)
        need(isinstance(c.get("compatible"), bool), w, "\"compatible\" must be true or false")
        cell["compatible"] = c["compatible"]
        rules = []
        for j, r in enumerate(get_list(c, "rules", w)):
            rw = f"{w}.rules[{j}]"
            need(isinstance(r, dict), rw, "must be an object")
            rules.append({k: get_str(r, k, rw, required=(k == "id")) for k in ("id", "kind", "reason", "detail", "anchor")})
        cell["rules"] = rules
        nstruct = c.get("structural", sum(r["kind"] == "structural" for r in rules))
        nnyi = c.get("nyi", sum(r["kind"] == "nyi" for r in rules))
        need(isinstance(nstruct, int) and isinstance(nnyi, int), w, "\"structural\" and \"nyi\" must be integers")
        # moe-compat counts a cell with any structural rule as structural; NYI only otherwise.
        cell["cat"] = "ok" if cell["compatible"] else ("structural" if nstruct > 0 else "nyi")
        cell["nstruct"], cell["nnyi"] = nstruct, nnyi
        out.append(cell)
    compat = {"path": path, "cells": out, "warnings": []}
    counts = Counter(c["cat"] for c in out)
    compat["counts"] = {"compatible": counts["ok"], "structural": counts["structural"], "nyi": counts["nyi"]}
    for k, v in compat["counts"].items():
        if k in doc and doc[k] != v:
            compat["warnings"].append(f"{path}: \"{k}\" says {doc[k]}, the cells count {v}")
    return compat


def load_golden(path):
    doc = parse_json_doc(path, "moe-golden verify --json")
    need(doc.get("type", "golden") == "golden", path, f"\"type\" is {doc.get('type')!r}, expected \"golden\"")
    cases = doc.get("cases")
    need(isinstance(cases, list), path, "missing \"cases\" list (expected moe-golden verify --json)")
    out = []
    for i, c in enumerate(cases):
        w = f"{path}: cases[{i}]"
        need(isinstance(c, dict), w, "must be an object")
        g = {"case": get_str(c, "case", w, required=True), "status": get_str(c, "status", w, required=True),
             "reason": get_str(c, "reason", w), "files": [], "backends": []}
        need(g["status"] in GOLDEN_STATUS, w, f"unknown status {g['status']!r} (expected one of {', '.join(GOLDEN_STATUS)})")
        for j, f in enumerate(get_list(c, "files", w)):
            fw = f"{w}.files[{j}]"
            need(isinstance(f, dict), fw, "must be an object")
            g["files"].append({"name": get_str(f, "name", fw, required=True),
                               "status": get_str(f, "status", fw, default="ok"),
                               "reason": get_str(f, "reason", fw)})
        for j, b in enumerate(get_list(c, "backends", w)):
            bw = f"{w}.backends[{j}]"
            need(isinstance(b, dict), bw, "must be an object")
            m = b.get("metrics")
            g["backends"].append({"name": get_str(b, "name", bw, required=True),
                                  "verdict": get_str(b, "verdict", bw, required=True),
                                  "class": get_str(b, "class", bw), "tolerance": get_str(b, "tolerance", bw),
                                  "reason": get_str(b, "reason", bw),
                                  "metrics": None if m is None else norm_metrics(m, bw)})
        # moe-golden counts a case as failed when its files are not ok or a backend fails on it.
        g["failed"] = g["status"] != "ok" or any(b["verdict"] in FAILING for b in g["backends"])
        out.append(g)
    out.sort(key=lambda g: (GOLDEN_STATUS.index(g["status"]), not g["failed"], g["case"]))
    counts = Counter(g["status"] for g in out)
    failed = sum(g["failed"] for g in out)
    golden = {"path": path, "dir": doc.get("dir"), "cases": out, "counts": counts, "failed": failed,
              "text": f"{len(out)} golden cases verified, {failed} failed", "warnings": []}
    summ = doc.get("summary") if isinstance(doc.get("summary"), dict) else {}
    for k, v in [(k, counts[k]) for k in GOLDEN_STATUS] + [("failed", failed)]:
        if k in summ and summ[k] != v:
            golden["warnings"].append(f"{path}: the summary says {k} = {summ[k]}, the cases count {v}")
    return golden


def load_golden_diff(path):
    doc = parse_json_doc(path, "moe-golden update diff JSON")
    need(doc.get("type", "golden-diff") == "golden-diff", path,
         f"\"type\" is {doc.get('type')!r}, expected \"golden-diff\"")
    changes = doc.get("changes")
    need(isinstance(changes, list), path, "missing \"changes\" list")
    out = []
    for i, c in enumerate(changes):
        w = f"{path}: changes[{i}]"
        need(isinstance(c, dict), w, "must be an object")
        m = c.get("metrics")
        out.append({"case": get_str(c, "case", w, required=True), "file": get_str(c, "file", w),
                    "old": get_str(c, "old_sha256", w), "new": get_str(c, "new_sha256", w),
                    "metrics": None if m is None else norm_metrics(m, w)})
    out.sort(key=lambda c: (c["case"], c["file"]))
    return {"path": path, "changes": out}


def load_bench(path):
    doc = parse_json_doc(path, "moe-bench JSON")
    need(doc.get("type", "bench") == "bench", path, f"\"type\" is {doc.get('type')!r}, expected \"bench\"")
    rows = doc.get("rows")
    need(isinstance(rows, list), path, "missing \"rows\" list")
    out = []
    for i, r in enumerate(rows):
        w = f"{path}: rows[{i}]"
        need(isinstance(r, dict), w, "must be an object")
        for k, v in r.items():
            need(v is None or isinstance(v, (str, int, float)) and not isinstance(v, bool), w,
                 f"\"{k}\" must be a string or a number")
        r = dict(r)
        for k in ("M", "median_us", "gflops", "tbps", "share_of_roofline"):
            if k in r:
                r[k] = to_num(r[k], w, k)
        out.append(r)
    meta = doc.get("meta") if isinstance(doc.get("meta"), dict) else {}

    def key(r):
        m = r.get("M")
        return (str(r.get("shape", "")), str(r.get("scheme", "")), str(r.get("stage", "")),
                m if m is not None and not math.isnan(m) else -1, str(r.get("backend", "")))
    out.sort(key=key)
    return {"path": path, "meta": meta, "rows": out}


# ------------------------------------------------------------ derived views

def summary_by_backend_stage(sweep):
    """Verdict counts per (backend, stage), backends in the sweep's order."""
    cells = {}
    for r in sweep["records"]:
        cells.setdefault((r["backend"], r["stage"]), Counter())[r["verdict"]] += 1
    order = sweep["backend_order"]
    rows = []
    for (b, s) in sorted(cells, key=lambda k: (order.index(k[0]), stage_rank(k[1]))):
        c = cells[(b, s)]
        rows.append({"backend": b, "stage": s, "counts": [c[v] for v in VERDICTS], "total": sum(c.values())})
    return rows


def meta_rows(meta, summary=None):
    """The metadata table: the known keys in a fixed order, then any others by name."""
    known = {k for k, _ in META_ORDER} | {"type", "backends"}
    rows = [(label, fmt_meta(meta.get(k))) for k, label in META_ORDER if k in meta]
    rows += [(k, fmt_meta(meta[k])) for k in sorted(meta) if k not in known]
    if summary is not None and "elapsed_s" in summary:
        rows.append(("elapsed", f"{fmt_num(to_num(summary['elapsed_s'], 'summary', 'elapsed_s'), 4)} s"))
    return rows


def meta_backends(meta):
    out = []
    for b in meta.get("backends") or []:
        if isinstance(b, dict):
            out.append({"name": str(b.get("name", "?")), "status": str(b.get("status", "?")),
                        "reason": str(b.get("reason") or "")})
    return out


def compat_view(compat, sweep):
    """Grids of pf rows x experts columns, one per (scheme, topk, E, world), in
    the order moe-compat lists them; with the sweep's verdicts of each cell."""
    cells = compat["cells"]
    pfs, experts, grids = [], [], {}
    for c in cells:
        if c["pf"] not in pfs:
            pfs.append(c["pf"])
        if c["experts"] not in experts:
            experts.append(c["experts"])
        gkey = (c["scheme"], c["topk"], c["num_experts"], c["world"])
        grids.setdefault(gkey, {})[(c["pf"], c["experts"])] = c
    overlay = {}
    if sweep:
        for r in sweep["records"]:
            p = r["p"]
            key = (p.get("scheme"), p.get("k"), p.get("E"), p.get("world"), p.get("pf"), p.get("experts"))
            overlay.setdefault(key, Counter())[r["verdict"]] += 1
    legend = {}
    out = []
    for gi, (gkey, g) in enumerate(grids.items()):
        scheme, topk, ne, world = gkey
        label = scheme
        params = ", ".join(f"{n} {fmt_num(v)}" for n, v in (("top-k", topk), ("E", ne), ("world", world)) if v is not None)
        rows, details = [], []
        for pf in pfs:
            row = []
            for ex in experts:
                c = g.get((pf, ex))
                if c is None:
                    row.append(None)
                    continue
                for r in c["rules"]:
                    legend.setdefault(r["id"], {"kind": r["kind"], "reason": r["reason"], "anchor": r["anchor"]})
                tip = [f"{pf} × {ex}: " + ("compatible" if c["cat"] == "ok" else
                       f"incompatible ({c['nstruct']} structural, {c['nnyi']} not yet supported)")]
                tip += [f"{r['id']} ({r['kind']}): {r['detail'] or r['reason']}" for r in c["rules"]]
                ov = overlay.get((scheme, topk, ne, world, pf, ex))
                mark = None
                if ov:
                    tip.append("sweep: " + ", ".join(f"{ov[v]} {v}" for v in VERDICTS if ov[v]))
                    worst = next(v for v in VERDICTS if ov[v])
                    mark = {"verdict": worst, "n": ov[worst]}
                row.append({"cat": c["cat"], "rules": [r["id"] for r in c["rules"]], "title": "\n".join(tip),
                            "mark": mark})
                if c["rules"]:
                    details.append({"pf": pf, "experts": ex, "cat": c["cat"], "rules": c["rules"]})
            rows.append({"pf": pf, "cells": row})
        counts = Counter(c["cat"] for c in g.values())
        marked = sum(1 for row in rows for c in row["cells"] if c and c["mark"])
        out.append({"id": f"compat-{gi}", "scheme": label, "params": params, "rows": rows,
                    "details": details, "ok": counts["ok"], "structural": counts["structural"],
                    "nyi": counts["nyi"], "marked": marked, "default": False})
    # The grid shown first: the one the sweep has the most records for (ties: the first).
    if out:
        max(out, key=lambda g: (g["marked"], -int(g["id"].split("-")[1])))["default"] = True
    return {"experts": experts, "grids": out,
            "legend": [dict(id=k, **legend[k]) for k in sorted(legend)]}


class Interner:
    """Strings of the embedded case data, stored once and referenced by index."""

    def __init__(self):
        self.strings, self.index = [""], {"": 0}

    def __call__(self, s):
        if s not in self.index:
            self.index[s] = len(self.strings)
            self.strings.append(s)
        return self.index[s]


def quantize_share(v):
    """A heatmap cell as an integer number of 1/1000 of the bound: enough for a
    colour and a tooltip, and a third of the bytes of the floats. The side of
    the bound is kept (over the bound never rounds down to 1000, nor under up
    to it); -1 is +inf (a class mismatch or a zero bound), -2 NaN."""
    if math.isnan(v):
        return -2
    if math.isinf(v):
        return -1
    q = round(v * 1000)
    return max(q, 1001) if v > 1 else min(q, 1000)


def case_data(sweep, compat):
    """The embedded JSON the case table and the details panel are built from."""
    S = Interner()
    params_table, params_index = [], {}
    rows = []
    for r in sweep["records"]:
        pkey = json.dumps(r["params"], sort_keys=False)
        if pkey not in params_index:
            params_index[pkey] = len(params_table)
            params_table.append([[S(k), js_value(v) if not isinstance(v, (dict, list)) else json.dumps(v, sort_keys=True)]
                                 for k, v in r["params"]])
        m = r["metrics"]
        row = [S(r["case"]), S(r["backend"]), S(r["stage"]), VERDICTS.index(r["verdict"]), S(r["class"]),
               S(r["tolerance"]), S(r["bound"]), S(r["reason"]), [S(x) for x in r["rules"]],
               js_value(r["time_ms"]), params_index[pkey], r["line"]]
        if m is not None:
            row.append([js_value(m[k]) for k in METRIC_FIELDS])
            row.append([[f["index"], js_value(f["got"]), js_value(f["want"]), f["got_hex"], f["want_hex"]]
                        for f in m["first"]])
            h = m["heat"]
            row.append(None if h is None else
                       [S(h["row_label"]), S(h["col_label"]), h["block"],
                        [[quantize_share(v) for v in vr] for vr in h["values"]]])
            hi = m["hist"]
            row.append(None if hi is None else [[js_value(e) for e in hi["edges"]], hi["counts"]])
        rows.append(row)
    legend = {}
    if compat:
        for c in compat["cells"]:
            for r in c["rules"]:
                legend.setdefault(r["id"], [r["kind"], r["reason"], r["anchor"]])
    return {"version": 1,
            "columns": ["case", "backend", "stage", "verdict", "class", "tolerance", "bound", "reason",
                        "rules", "time_ms", "params", "line", "metrics", "first", "heat", "hist"],
            "verdicts": list(VERDICTS), "metrics": list(METRIC_FIELDS),
            "backends": [b for b in sweep["backend_order"] if any(r["backend"] == b for r in sweep["records"])],
            "stages": sorted({r["stage"] for r in sweep["records"]}, key=stage_rank),
            "S": S.strings, "P": params_table, "R": rows,
            "rules": {k: legend[k] for k in sorted(legend)}}


def embed_json(obj):
    """JSON for a <script type="application/json"> element: compact, sorted where
    it is a mapping, and with <, > and & escaped so no string can end the element."""
    s = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return Markup(s.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e"))


def same_num(a, b):
    if a is None or b is None:
        return a is b
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def compare_runs(old, new, threshold, min_ms):
    """Nightly deltas between two sweeps, keyed by (case, backend, stage)."""
    order = backend_order(new["meta"], old["records"] + new["records"])
    key = lambda r: (r["case"], r["backend"], r["stage"])
    o = {key(r): r for r in old["records"]}
    n = {key(r): r for r in new["records"]}
    sort = lambda keys: sorted(keys, key=lambda k: (k[0], order.index(k[1]), stage_rank(k[2])))
    new_fail, fixed, still, other, metrics, timing = [], [], [], [], [], []
    for k in sort(set(o) | set(n)):
        ro, rn = o.get(k), n.get(k)
        vo = ro["verdict"] if ro else "absent"
        vn = rn["verdict"] if rn else "absent"
        item = {"case": k[0], "backend": k[1], "stage": k[2], "old": vo, "new": vn,
                "reason": (rn or ro)["reason"]}
        if vn in FAILING and vo not in FAILING:
            new_fail.append(item)
        elif vo in FAILING and vn in PASSING:
            fixed.append(item)
        elif vo in FAILING and vn in FAILING:
            still.append(item)
        elif vo != vn:
            other.append(item)
        if ro and rn and ro["metrics"] and rn["metrics"]:
            changes = []
            for mk in COMPARED_METRICS:
                a, b = ro["metrics"][mk], rn["metrics"][mk]
                if not same_num(a, b):
                    changes.append({"metric": mk, "old": fmt_num(a), "new": fmt_num(b), "delta": delta_text(a, b)})
            if changes:
                metrics.append(dict(item, changes=changes))
        if ro and rn and ro["time_ms"] is not None and rn["time_ms"] is not None:
            to, tn = ro["time_ms"], rn["time_ms"]
            if max(to, tn) >= min_ms and to > 0 and tn > 0:
                ratio = tn / to
                if ratio >= threshold or ratio <= 1 / threshold:
                    timing.append(dict(item, old_ms=fmt_ms(to), new_ms=fmt_ms(tn), ratio=ratio,
                                       ratio_text=f"{ratio:.2f}×", slower=ratio > 1))
    timing.sort(key=lambda t: (-t["ratio"], t["case"], order.index(t["backend"]), stage_rank(t["stage"])))
    co, cn = old["counts"], new["counts"]
    counts = [{"verdict": v, "old": co[v], "new": cn[v], "delta": cn[v] - co[v]} for v in VERDICTS]
    counts.append({"verdict": "total", "old": sum(co.values()), "new": sum(cn.values()),
                   "delta": sum(cn.values()) - sum(co.values())})
    parts = [plural(len(new_fail), "new failure"), f"{len(fixed)} fixed",
             plural(len(metrics), "metric change"), plural(len(timing), "timing change")]
    return {"old": old, "new": new, "new_fail": new_fail, "fixed": fixed, "still": still, "other": other,
            "metrics": metrics, "timing": timing, "counts": counts, "threshold": threshold, "min_ms": min_ms,
            "text": ", ".join(parts),
            "meta": [(label, fmt_meta(old["meta"].get(k)), fmt_meta(new["meta"].get(k)))
                     for k, label in META_ORDER if k in old["meta"] or k in new["meta"]]}


def split_meta(rows):
    """The nightly run table: the fields that differ first, the rest apart."""
    return [r for r in rows if r[1] != r[2]], [r for r in rows if r[1] == r[2]]


def delta_text(a, b):
    if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)):
        return ""
    d = b - a
    return ("+" if d > 0 else "") + fmt_num(d)


# --------------------------------------------------------------------- SVG

def log_ticks(lo, hi):
    """Decade ticks covering [lo, hi] (and 2, 5 in between for short ranges)."""
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if b == a:
        b = a + 1
    mults = (1, 2, 5) if b - a <= 2 else (1,)
    ticks = [m * 10.0 ** e for e in range(a, b + 1) for m in mults if m * 10.0 ** e <= 10.0 ** b]
    return ticks, 10.0 ** a, 10.0 ** b


# The y axes of the plots: median time (log) and share of the floor (linear).
TIME_AXIS = {"log": True, "label": "median time (µs, log scale)", "unit": " µs",
             "aria": "median time against M, log-log"}
SHARE_AXIS = {"log": False, "label": "share of floor", "unit": " of floor",
              "aria": "share of the roofline floor against M, log-x"}


def bench_plots(rows, backend_names, group_keys=("shape", "scheme", "stage"), series_key="backend",
                value_key="median_us", axis=TIME_AXIS, dashed=(), width=390, colors=None):
    """One plot of value_key against M (log x) per group_keys, a line per
    series_key, ordered as backend_names lists them (then by name); series
    named in `dashed` are drawn dashed; `width` is the plotting area's;
    `colors` (name: colour) keeps a series' colour the same in every plot
    (default: the palette in each plot's own order). The SVG text is built
    here so it is deterministic."""
    groups = {}
    for r in rows:
        m, t = r.get("M"), r.get(value_key)
        if not isinstance(m, (int, float)) or not isinstance(t, (int, float)) or m <= 0 \
                or not math.isfinite(t) or (t <= 0 if axis["log"] else t < 0):
            continue
        gk = tuple(str(r.get(k, "")) for k in group_keys)
        groups.setdefault(gk, {}).setdefault(str(r.get(series_key, "?")), []).append((m, t))
    plots = []
    for gk in sorted(groups):
        series = groups[gk]
        names = sorted(series, key=lambda b: (backend_names.index(b) if b in backend_names else len(backend_names), b))
        plots.append({"title": " · ".join(x for x in gk if x), "key": gk,
                      "svg": Markup(line_plot(series, names, axis, dashed, width, colors))})
    return plots


def tick_label(t):
    """Axis labels: whole numbers in full with thousands separators, else 3 digits."""
    return f"{round(t):,}" if t >= 1 and abs(t - round(t)) < 1e-9 else fmt_num(t, 3)


def linear_ticks(hi):
    """Ticks from 0 to at least hi in steps of 1, 2 or 5 times a power of ten (about five)."""
    hi = hi if hi > 0 else 1.0
    raw = hi / 5
    p = 10.0 ** math.floor(math.log10(raw))
    step = next(m * p for m in (1, 2, 5, 10) if m * p >= raw)
    n = math.ceil(hi / step - 1e-9)
    return [round(i * step, 12) for i in range(n + 1)], 0.0, n * step


def line_plot(series, names, axis=TIME_AXIS, dashed=(), width=390, colors=None):
    # The legend column is as wide as the longest series name.
    R = 50 + 7 * max(len(n) for n in names)
    ms = sorted({m for s in series.values() for m, _ in s})
    ts = [t for s in series.values() for _, t in s]
    ylog = axis["log"]
    yt, ylo, yhi = log_ticks(min(ts), max(ts)) if ylog else linear_ticks(max(ts))
    # The left margin clears the widest tick label and the rotated axis title.
    L = 34 + 7 * max(len(tick_label(t)) for t in yt)
    W, H, T, B = width + L + R, 320, 16, 50
    pw, ph = W - L - R, H - T - B
    x0, x1 = math.log2(ms[0]), math.log2(ms[-1])
    if x0 == x1:
        x0, x1 = x0 - 1, x1 + 1
    y0, y1 = (math.log10(ylo), math.log10(yhi)) if ylog else (ylo, yhi)
    X = lambda m: L + (math.log2(m) - x0) / (x1 - x0) * pw
    Y = lambda t: T + ph - ((math.log10(t) if ylog else t) - y0) / (y1 - y0) * ph
    o = [f'<svg class="plot" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" '
         f'role="img" aria-label="{axis["aria"]}">']
    o.append(f'<rect x="{L}" y="{T}" width="{pw}" height="{ph}" class="plot-bg"/>')
    for t in yt:
        y = Y(t)
        o.append(f'<line x1="{L}" x2="{L + pw}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        o.append(f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end">{esc(tick_label(t))}</text>')
    xticks = ms if len(ms) <= 12 else ms[::math.ceil(len(ms) / 12)]
    for m in xticks:
        x = X(m)
        o.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{T}" y2="{T + ph}" class="grid"/>')
        o.append(f'<text x="{x:.1f}" y="{T + ph + 16}" text-anchor="middle">{esc(fmt_num(m))}</text>')
    o.append(f'<text x="{L + pw / 2:.1f}" y="{H - 8}" text-anchor="middle" class="axis-label">M (tokens, log scale)</text>')
    o.append(f'<text transform="translate(16 {T + ph / 2:.1f}) rotate(-90)" text-anchor="middle" '
             f'class="axis-label">{esc(axis["label"])}</text>')
    for i, name in enumerate(names):
        col = colors[name] if colors and name in colors else PALETTE[i % len(PALETTE)]
        dash = ' stroke-dasharray="6 4"' if name in dashed else ""
        pts = sorted(series[name])
        path = " ".join(f"{X(m):.1f},{Y(t):.1f}" for m, t in pts)
        o.append(f'<polyline points="{path}" fill="none" stroke="{col}" stroke-width="2"{dash}/>')
        for m, t in pts:
            o.append(f'<circle cx="{X(m):.1f}" cy="{Y(t):.1f}" r="3.5" fill="{col}">'
                     f'<title>{esc(name)}: M = {esc(fmt_num(m))}, {esc(fmt_num(t))}{axis["unit"]}</title></circle>')
        ly = T + 14 + i * 20
        o.append(f'<line x1="{L + pw + 14}" x2="{L + pw + 34}" y1="{ly - 4}" y2="{ly - 4}" stroke="{col}" '
                 f'stroke-width="2"{dash}/>')
        o.append(f'<text x="{L + pw + 40}" y="{ly}">{esc(name)}</text>')
    o.append("</svg>")
    return "\n".join(o)


def esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def bench_view(bench):
    rows = bench["rows"]
    keys = set().union(*(r.keys() for r in rows)) if rows else set()
    cols = [c for c in BENCH_COLUMNS if c in keys] + sorted(keys - set(BENCH_COLUMNS))
    table = [[fmt_plain(r.get(c)) if isinstance(r.get(c), (int, float)) else
              ("—" if r.get(c) is None else str(r.get(c))) for c in cols] for r in rows]
    numeric = [all(isinstance(r.get(c), (int, float)) or r.get(c) is None for r in rows) for c in cols]
    backends = []
    for r in rows:
        b = str(r.get("backend", "?"))
        if b not in backends:
            backends.append(b)
    order = [b for b in KNOWN_BACKENDS if b in backends] + sorted(b for b in backends if b not in KNOWN_BACKENDS)
    return {"path": bench["path"], "meta": meta_rows(bench["meta"]), "cols": cols, "numeric": numeric,
            "rows": table, "plots": bench_plots(rows, order)}


def load_bench_gpu(path):
    """bench_merge.py's output, or one producer's bench-gpu file (merged here)."""
    try:
        return bench_merge.load_merged(path)
    except bench_merge.BadInput as e:
        raise InputError(str(e)) from None


def num_or_dash(v, fmt=fmt_plain):
    return fmt(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else "—"


def ratio_text(v):
    return f"{v:.2f}×" if isinstance(v, (int, float)) and not isinstance(v, bool) else "—"


def goal_item_text(it):
    s = f"{it.get('shape')} M={it.get('M')} {it.get('scheme')}"
    if it.get("routing") not in (None, "uniform"):
        s += f" ({it['routing']})"
    if isinstance(it.get("value"), (int, float)):
        s += f": {fmt_num(it['value'], 3)}"
    if it.get("why"):
        s += f": {it['why']}"
    return s


def bench_gpu_view(doc, path):
    """The GPU performance section: ceilings, goals, plots per shape x scheme
    (time and share of floor against M, a line per impl) and the table."""
    meta, points, summ = doc["meta"], doc["points"], doc["summary"]
    ceil = meta.get("ceilings") or {}
    src, why = ceil.get("from") or {}, ceil.get("why") or {}
    unit = {"read_tbs": "TB/s", "copy_tbs": "TB/s", "bf16_dense_tflops": "TFLOP/s", "fp8_dense_tflops": "TFLOP/s",
            "bf16_dense_burst_tflops": "TFLOP/s", "fp8_dense_burst_tflops": "TFLOP/s",
            "bf16_dense_clock_mhz": "MHz", "fp8_dense_clock_mhz": "MHz"}
    label = {"read_tbs": "read bandwidth (streaming kernel)", "copy_tbs": "copy bandwidth",
             "bf16_dense_tflops": "bf16 dense peak (best measured)",
             "fp8_dense_tflops": "fp8 dense peak (best measured)",
             "bf16_dense_burst_tflops": "bf16 dense peak as a burst (after a second idle; not divided by)",
             "fp8_dense_burst_tflops": "fp8 dense peak as a burst (after a second idle; not divided by)",
             "bf16_dense_clock_mhz": "SM clock while the bf16 dense peak was timed (median)",
             "fp8_dense_clock_mhz": "SM clock while the fp8 dense peak was timed (median)"}
    ceilings = [(label[k], f"{fmt_num(ceil[k], 4)} {unit[k]}" + (f" — {src[k]}" if src.get(k) else "")
                 if isinstance(ceil.get(k), (int, float)) else
                 "not measured" + (f" ({why[k]})" if why.get(k) else "")) for k in unit]
    info = [(k, fmt_meta(meta[k])) for k in ("gpu", "seed", "skew", "warm_ms") if k in meta]
    info += [("source", f"{s.get('path')}: {s.get('tool')}"
              + (f" built from {s['git_rev']}" if s.get("git_rev") else "") + f", {s.get('points')} points"
              + (f", warm-up {s['warm_ms']} ms a timing" if s.get("warm_ms") is not None else "")
              + (", SM clock by NVML" if s.get("clock") else f", no SM clock ({s['clock_why']})" if s.get("clock_why")
                 else ""))
             for s in meta.get("sources") or [] if isinstance(s, dict)]
    goals = [{"id": g.get("id", ""), "title": g.get("title", ""), "met": [goal_item_text(i) for i in g.get("met", [])],
              "missed": [goal_item_text(i) for i in g.get("missed", [])]}
             for g in summ.get("goals", []) if isinstance(g, dict)]
    impls = []
    for p in points:
        if p["impl"] not in impls:
            impls.append(p["impl"])
    order = sorted(impls, key=lambda i: (i != bench_merge.OURS, i)) + ["floor"]
    ok = [p for p in points if p["status"] == "ok"]
    floors = {}
    for p in ok:
        if isinstance(p.get("floor_us"), (int, float)):
            floors.setdefault((p["shape"], p["scheme"], p["routing"], p["M"]), p["floor_us"])
    time_rows = ok + [{"shape": k[0], "scheme": k[1], "routing": k[2], "M": k[3], "impl": "floor", "median_us": v}
                      for k, v in sorted(floors.items())]
    gkeys = ("shape", "scheme", "routing")
    # narrower than the CPU bench's plots: a time plot and its share plot fit side by side
    colors = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(order)}
    times = bench_plots(time_rows, order, gkeys, "impl", "median_us", TIME_AXIS, ("floor",), 300, colors)
    shares = {p["key"]: p for p in bench_plots(ok, order, gkeys, "impl", "share_of_floor", SHARE_AXIS, (), 300,
                                               colors)}
    rank = lambda v, seq: (seq.index(v) if v in seq else len(seq), v)
    plots = []
    for t in sorted(times, key=lambda p: (rank(p["key"][0], bench_merge.SHAPE_ORDER),
                                          rank(p["key"][1], bench_merge.SCHEME_ORDER), p["key"][2])):
        title = " · ".join(x for x in t["key"] if x and x != "uniform")
        share = shares.get(t["key"])
        plots.append({"title": title, "time": t["svg"], "share": share["svg"] if share else None})
    rows = []
    for p in points:
        notes = [p["why"]] if p.get("why") else []
        if p.get("graph") is not None:
            notes.append("CUDA graph" if p["graph"] else "eager")
        if p.get("note"):
            notes.append(str(p["note"]))
        check = p.get("check")
        if isinstance(check, dict):   # moe-bench's comparison of the output with a reference
            rel = check.get("rel_l2")
            notes.append(f"check rel. L2 {fmt_num(rel, 2)}" if isinstance(rel, (int, float)) else
                         "unchecked" + (f" ({check['why']})" if check.get("why") else ""))
        if isinstance(p.get("sm_clock_mhz"), (int, float)):   # the median SM clock while timed (NOTES.md v40)
            notes.append(f"SM clock {p['sm_clock_mhz']:.0f} MHz")
        if p.get("best_peer"):
            notes.append(f"best peer {p['best_peer']} {fmt_plain(p['best_peer_us'])} µs")
        rows.append({"shape": p["shape"], "M": p["M"], "scheme": p["scheme"], "routing": p["routing"],
                     "impl": p["impl"], "ours": p["impl"] == bench_merge.OURS, "status": p["status"],
                     "median": num_or_dash(p.get("median_us")), "tbs": num_or_dash(p.get("tbs")),
                     "tflops": num_or_dash(p.get("tflops")),
                     "share": num_or_dash(p.get("share_of_floor"), lambda v: fmt_num(v, 3)),
                     "speedup": ratio_text(p.get("speedup_vs_best_peer")),
                     "faster": (p.get("speedup_vs_best_peer") or 0) > 1,
                     "notes": "; ".join(notes)})
    return {"path": path, "ceilings": ceilings, "info": info, "warnings": list(meta.get("warnings") or []),
            "lines": list(summ.get("lines") or []), "goals": goals, "plots": plots, "rows": rows,
            "skew": any(p["routing"] != "uniform" for p in points)}


def bench_gpu_text(doc):
    s = doc["summary"]
    n = len([p for p in doc["points"] if p["impl"] == bench_merge.OURS])
    text = f"{plural(n, bench_merge.OURS + ' point')}"
    if s.get("with_peer"):
        text += f", faster than the best peer at {s.get('faster')} of {s['with_peer']}"
        if isinstance(s.get("geomean_speedup"), (int, float)):
            text += f" (geomean {s['geomean_speedup']:.2f}×)"
    goals = [g for g in s.get("goals", []) if isinstance(g, dict)]
    if goals:
        met = lambda g: len(g.get("met", []))
        text += "; goals " + ", ".join(f"{g.get('id')} {met(g)}/{met(g) + len(g.get('missed', []))}" for g in goals)
    return text


# ------------------------------------------------------------------ render

def render(args):
    sweep = load_sweep(args.sweep) if args.sweep else None
    compare = None
    if args.compare:
        old, new = load_sweep(args.compare[0]), load_sweep(args.compare[1])
        compare = compare_runs(old, new, args.time_threshold, args.time_min_ms)
        compare["meta_diff"], compare["meta_same"] = split_meta(compare["meta"])
        if sweep is None:
            sweep = new   # a nightly report shows the new run in full as well
    compat = load_compat(args.compat) if args.compat else None
    golden = load_golden(args.golden) if args.golden else None
    gdiff = load_golden_diff(args.golden_diff) if args.golden_diff else None
    bench = load_bench(args.bench) if args.bench else None
    bench_gpu = load_bench_gpu(args.bench_gpu) if args.bench_gpu else None

    parts, warnings = [], []
    # PASS / FAIL only where something was checked; compat and bench alone are information.
    status = "pass" if (sweep or golden or compare) else "info"
    if sweep:
        parts.append(("Sweep", sweep_text(sweep["counts"])))
        warnings += sweep["warnings"]
        if sweep["counts"]["fail"] or sweep["counts"]["error"]:
            status = "fail"
    if golden:
        parts.append(("Golden", golden["text"]))
        warnings += golden["warnings"]
        if golden["failed"]:
            status = "fail"
    if gdiff:
        parts.append(("Golden diff", plural(len(gdiff["changes"]), "changed file")))
    if compare:
        parts.append(("Nightly", compare["text"]))
        warnings += [w for w in compare["old"]["warnings"] + compare["new"]["warnings"] if w not in warnings]
        if compare["new_fail"]:
            status = "fail"
    if compat:
        c = compat["counts"]
        parts.append(("Compatibility", f"{c['compatible']} compatible, {c['structural']} structurally invalid, "
                                       f"{c['nyi']} not yet supported"))
        warnings += compat["warnings"]
    if bench:
        parts.append(("Bench", plural(len(bench["rows"]), "row")))
    if bench_gpu:
        parts.append(("GPU bench", bench_gpu_text(bench_gpu)))
        warnings += [f"{args.bench_gpu}: {w}" for w in bench_gpu["meta"].get("warnings") or []]
    summary_line = " · ".join(f"{k}: {v}" for k, v in parts)

    ctx = {"summary_line": summary_line, "parts": parts, "status": status, "warnings": warnings,
           "verdicts": VERDICTS, "sweep": None, "compat": None, "golden": golden, "gdiff": gdiff,
           "compare": compare, "bench": bench_view(bench) if bench else None,
           "bench_gpu": bench_gpu_view(bench_gpu, args.bench_gpu) if bench_gpu else None,
           "fmt_num": fmt_num, "fmt_ms": fmt_ms}
    if sweep:
        meta = sweep["meta"]
        ctx["sweep"] = {"path": sweep["path"], "counts": [sweep["counts"][v] for v in VERDICTS],
                        "total": len(sweep["records"]), "by": summary_by_backend_stage(sweep),
                        "meta": meta_rows(meta, sweep["summary"]), "backends": meta_backends(meta),
                        "title": " · ".join(str(meta[k]) for k in ("tool", "tier", "git_rev", "date") if meta.get(k)),
                        "data": embed_json(case_data(sweep, compat))}
    if compat:
        ctx["compat"] = dict(compat_view(compat, sweep), path=compat["path"], counts=compat["counts"])
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True)
    ctx["css"] = Markup((HERE / "static" / "report.css").read_text(encoding="utf-8"))
    js = (HERE / "static" / "report.js").read_text(encoding="utf-8")
    # The script is inlined; a literal "</script" in it would end the element early.
    assert "</script" not in js.lower(), "reports/static/report.js must not contain </script"
    ctx["js"] = Markup(js)
    html = env.get_template("report.html.j2").render(**ctx)
    return html, summary_line, warnings


def write_atomic(path, text):
    """Write through a temporary file in the same directory and rename it into
    place (bench_merge.write_atomic), so a failure never leaves a partial
    report behind."""
    try:
        bench_merge.write_atomic(str(path), text)
    except OSError as e:
        raise InputError(f"{path}: cannot write: {e.strerror or e}") from None


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="report.py",
        description="Turn moe-conform sweep / golden / bench JSON into one self-contained HTML report.",
        epilog="Formats: reports/SCHEMA.md. Exit 0: written; 2: usage error or a missing/malformed input "
               "(nothing written).")
    ap.add_argument("--sweep", metavar="S.jsonl", help="moe-sweep --out JSON Lines")
    ap.add_argument("--compat", metavar="M.json", help="moe-compat matrix --format json")
    ap.add_argument("--golden", metavar="G.json", help="moe-golden verify --json")
    ap.add_argument("--golden-diff", metavar="D.json", help="moe-golden update's diff JSON")
    ap.add_argument("--bench", metavar="B.json", help="moe-bench JSON")
    ap.add_argument("--bench-gpu", metavar="merged.json",
                    help="bench_merge.py output (or one bench-gpu file): the GPU bench against its peers")
    ap.add_argument("--compare", nargs=2, metavar=("OLD.jsonl", "NEW.jsonl"),
                    help="nightly deltas between two sweeps (NEW is also shown in full when --sweep is absent)")
    ap.add_argument("--time-threshold", type=float, default=1.5, metavar="R",
                    help="--compare lists a timing change when new/old time >= R or <= 1/R (default 1.5)")
    ap.add_argument("--time-min-ms", type=float, default=1.0, metavar="MS",
                    help="--compare ignores timings where both runs took less than MS (noise; default 1.0)")
    ap.add_argument("--out", required=True, metavar="report.html", help="the HTML file to write")
    args = ap.parse_args(argv)
    if not any((args.sweep, args.compat, args.golden, args.golden_diff, args.bench, args.bench_gpu, args.compare)):
        ap.error("give at least one input (--sweep, --compat, --golden, --golden-diff, --bench, --bench-gpu "
                 "or --compare)")
    if not args.time_threshold > 1:
        ap.error("--time-threshold must be greater than 1")
    try:
        html, line, warnings = render(args)
        write_atomic(args.out, html)
    except InputError as e:
        print(f"report.py: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for w in warnings:
        print(f"report.py: warning: {w}", file=sys.stderr)
    print(line)
    print(f"report: {args.out} ({len(html.encode('utf-8'))} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
