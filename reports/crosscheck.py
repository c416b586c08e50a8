#!/usr/bin/env python3
"""Independent cross-check of the stored golden vectors (issue 9 item 6).

Recomputes golden outputs from golden inputs with code written from the
semantics in the anchors (vLLM, TensorRT-LLM, CK-tile, OCP MX / OFP8 / NVFP4
format definitions) and the documented contracts of include/moe/*.h, never
from reference/. Two independent implementations that agree are the point
(TestFloat's slowfloat idea, anchors style_numerics_reliability.md 2.4, 6.4):
nothing here imports, ports or calls the C reference.

Classes:
  EXACT    layouts, routing ids, quantization codes and scales, dequantize,
           element-wise casts, row movement (permute.h), and the fixed-order
           reductions of reduce.h and the EP reduce-scatter, reproduced
           operation by operation in float32: bits equal (NaN codes of
           f16/bf16 by class and sign, since format.h leaves their payload
           open).
  SET      none of the stored cases asks for it (their case.json would say).
  BOUNDED  values through canonical math (routing weights, activations):
           |golden - exact| within a bound derived from the ULP errors that
           reference/math.h states, printed per case; grouped GEMMs and the
           unquantized forward against a float64 product under a derived
           fp32 accumulation bound (gamma_K * sum|a*b|) plus the output
           rounding.

Usage: crosscheck.py [--golden DIR] [--filter SUBSTR] [--quiet]
Exit 0 only when every covered case agrees; 1 on any disagreement; 2 on
usage errors; 3 when the golden directory cannot be read.
"""
import argparse
import json
import os
import sys

try:
    import numpy as np
except ImportError:  # the Check suite skips on this exit code
    sys.stderr.write("crosscheck: numpy is required\n")
    sys.exit(77)

F32 = np.float32


class Disagree(Exception):
    pass


class NotCovered(Exception):
    pass


# ---------------------------------------------------------------------------
# Number formats, from their definitions (anchors 3.1, 3.2, 3.4; format.h's
# special-value table). Each float format is (exponent bits, mantissa bits,
# bias, kind) and its value table is built by brute force from that; encoding
# is a nearest-value search with ties to the even code, like the "obviously
# correct oracle" of anchors 2.6, so nothing shares logic with bit tricks.
# ---------------------------------------------------------------------------

FORMATS = {
    # name: (ebits, mbits, bias, specials)
    #   ieee: top exponent is Inf/NaN; fn: only S.1111.111 is NaN; none: no specials
    "f16": (5, 10, 15, "ieee"),
    "bf16": (8, 7, 127, "ieee"),
    "e4m3": (4, 3, 7, "fn"),
    "e5m2": (5, 2, 15, "ieee"),
    "e2m1": (2, 1, 1, "none"),
}

_tables = {}


def fmt_table(name):
    """Non-negative finite values of codes 0..maxcode (ascending, float64),
    plus one virtual code past max finite (its value = max + one step at
    the top binade) so that the overflow threshold is IEEE's (format.h)."""
    if name in _tables:
        return _tables[name]
    eb, mb, bias, kind = FORMATS[name]
    vals = []
    ncodes = 1 << (eb + mb)
    for c in range(ncodes):
        e = c >> mb
        m = c & ((1 << mb) - 1)
        if kind == "ieee" and e == (1 << eb) - 1:
            break
        if kind == "fn" and c == ncodes - 1:
            break
        if e == 0:
            v = m * 2.0 ** (1 - bias - mb)
        else:
            v = (1 + m / 2.0 ** mb) * 2.0 ** (e - bias)
        vals.append(v)
    maxv = vals[-1]
    top_e = (len(vals) - 1) >> mb
    step = 2.0 ** (max(top_e, 1) - bias - mb)
    table = np.array(vals + [maxv + step], dtype=np.float64)
    _tables[name] = (table, len(vals) - 1)
    return _tables[name]


def fmt_decode(name, codes):
    eb, mb, bias, kind = FORMATS[name]
    table, maxcode = fmt_table(name)
    codes = np.asarray(codes).astype(np.int64)
    sbit = 1 << (eb + mb)
    mag = codes & (sbit - 1)
    neg = (codes & sbit) != 0
    out = np.where(mag <= maxcode, table[np.minimum(mag, maxcode)], np.nan)
    if kind == "ieee":
        inf = mag == ((1 << eb) - 1) << mb
        out = np.where(inf, np.inf, out)
    return np.where(neg, -out, out)


def fmt_encode(name, x, sat):
    """RNE encode of float64 values x (exactly representable f32 values, or
    exact products) under SAT or NONSAT, special values per format.h."""
    eb, mb, bias, kind = FORMATS[name]
    table, maxcode = fmt_table(name)
    x = np.asarray(x, dtype=np.float64)
    sbit = 1 << (eb + mb)
    ax = np.abs(x)
    fin = np.isfinite(x)
    axf = np.where(fin, ax, 0.0)
    hi = np.searchsorted(table, axf, side="left")  # table[hi] >= ax
    hi = np.minimum(hi, len(table) - 1)
    lo = np.maximum(hi - 1, 0)
    dlo = axf - table[lo]
    dhi = table[hi] - axf
    pick_hi = (dhi < dlo) | ((dhi == dlo) & (hi % 2 == 0))
    pick_hi = np.where(table[hi] == axf, True, pick_hi)
    code = np.where(pick_hi, hi, lo).astype(np.int64)
    over = code > maxcode
    neg = np.signbit(x)
    nan_code = {"ieee": (((1 << eb) - 1) << mb) | (1 << (mb - 1)),
                "fn": sbit - 1, "none": None}[kind]
    inf_code = (((1 << eb) - 1) << mb) if kind == "ieee" else None
    if sat:
        code = np.where(over | np.isinf(x), maxcode, code)
    else:
        if kind == "ieee":
            code = np.where(over | np.isinf(x), inf_code, code)
        elif kind == "fn":
            code = np.where(over | np.isinf(x), nan_code, code)
        else:
            raise ValueError("e2m1 has no NONSAT")
    isn = np.isnan(x)
    if kind == "none":
        # ONNX rule (anchors 3.4): NaN -> +6
        code = np.where(isn, maxcode, code)
        neg = np.where(isn, False, neg)
    else:
        code = np.where(isn, nan_code, code)
    return (code | np.where(neg, sbit, 0)).astype(np.int64)


def f32_bits(a):
    return np.asarray(a, dtype=np.float32).view(np.uint32)


def int_encode(x, lo, hi):
    """Integers: RNE, clamp to [lo, hi], NaN -> 0 (format.h)."""
    x = np.asarray(x, dtype=np.float64)
    r = np.rint(np.where(np.isnan(x), 0.0, x))  # rint is ties-to-even
    return np.clip(r, lo, hi).astype(np.int64)


def e8m0_value(codes):
    c = np.asarray(codes).astype(np.int64)
    return np.where(c == 255, np.nan, np.ldexp(1.0, (c - 127).astype(np.int64) if np.ndim(c) else int(c) - 127))


def floor_log2(a):
    """floor(log2 a) for finite a > 0 from the binary exponent (frexp is
    exact), never a libm logarithm."""
    m, e = np.frexp(np.asarray(a, dtype=np.float64))
    return e - 1


def ceil_log2(a):
    m, e = np.frexp(np.asarray(a, dtype=np.float64))
    return np.where(m == 0.5, e - 1, e)


def ulp32(v):
    """Spacing of f32 at |v| (normal or subnormal)."""
    av = np.abs(np.asarray(v, dtype=np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.where((av > 0) & np.isfinite(av), floor_log2(np.where(av > 0, av, 1.0)), -126)
    e = np.maximum(e, -126)
    return np.ldexp(1.0, (e - 23).astype(np.int64))


# ---------------------------------------------------------------------------
# golden I/O: numpy reads the .npy files; the case.json sidecars give logical
# dtypes (bf16/f16/fp8/e8m0 raw bits, packed e2m1/int4 two per byte, low
# nibble first: anchors 3.4, golden/README.md).
# ---------------------------------------------------------------------------

class Case:
    def __init__(self, root, name):
        self.name = name
        self.dir = os.path.join(root, name)
        with open(os.path.join(self.dir, "case.json")) as f:
            self.meta = json.load(f)
        self.kind = self.meta["kind"]
        self.policy = self.meta.get("policy", {})
        self.dims = self.meta.get("dims", {})
        self.tensors = {}
        for t in self.meta.get("inputs", []) + self.meta.get("outputs", []):
            self.tensors[t["tensor"]] = t
        self.inputs = [t["tensor"] for t in self.meta.get("inputs", [])]
        self.outputs = [t["tensor"] for t in self.meta.get("outputs", [])]

    def has(self, name):
        return name in self.tensors and self.tensors[name].get("stored", True)

    def dtype(self, name):
        return self.tensors[name]["dtype"]

    def raw(self, name):
        t = self.tensors[name]
        if not t.get("stored", True):
            raise NotCovered("tensor %s not stored (digest-only case)" % name)
        a = np.load(os.path.join(self.dir, t["file"]), allow_pickle=False)
        dt = t["dtype"]
        shape = tuple(t["shape"])
        if dt in ("e2m1", "int4"):
            flat = a.reshape(-1).astype(np.int64)
            n = int(np.prod(shape))
            codes = np.empty(flat.size * 2, dtype=np.int64)
            codes[0::2] = flat & 0xF
            codes[1::2] = flat >> 4
            codes = codes[:n].reshape(shape)
            if dt == "int4":
                codes = np.where(codes >= 8, codes - 16, codes)
            return codes
        if a.dtype == np.float16:  # numpy stores f16 natively; use its bits
            a = a.view(np.uint16)
        return a.reshape(shape)

    def value(self, name):
        """Exact values as float64 (NaN/Inf kept)."""
        dt = self.dtype(name)
        a = self.raw(name)
        if dt in ("f16", "bf16", "e4m3", "e5m2", "e2m1"):
            return fmt_decode(dt, a)
        if dt == "e8m0":
            return e8m0_value(a)
        return a.astype(np.float64)


# ---------------------------------------------------------------------------
# comparison helpers
# ---------------------------------------------------------------------------

def first_diff(a, b):
    idx = np.argwhere(np.asarray(a) != np.asarray(b))
    return tuple(int(i) for i in idx[0]) if len(idx) else None


def expect_equal(what, got, want):
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape:
        raise Disagree("%s: shape %s vs expected %s" % (what, got.shape, want.shape))
    if not np.array_equal(got, want):
        i = first_diff(got, want)
        n = int(np.count_nonzero(got != want))
        raise Disagree("%s: %d of %d differ, first at %s: golden %s, cross-check %s"
                       % (what, n, got.size, i, got[i], want[i]))


def expect_f32_bits(what, golden_f32, want_f32):
    """EXACT for f32 data: bits equal, NaNs by class (payload/sign open)."""
    g = np.asarray(golden_f32, dtype=np.float32)
    w = np.asarray(want_f32, dtype=np.float32)
    gb = np.where(np.isnan(g), 0x7FC00000, g.view(np.uint32))
    wb = np.where(np.isnan(w), 0x7FC00000, w.view(np.uint32))
    if g.shape != w.shape:
        raise Disagree("%s: shape %s vs expected %s" % (what, g.shape, w.shape))
    if not np.array_equal(gb, wb):
        i = first_diff(gb, wb)
        n = int(np.count_nonzero(gb != wb))
        raise Disagree("%s: %d of %d differ, first at %s: golden %r, cross-check %r"
                       % (what, n, g.size, i, float(g[i]), float(w[i])))


def expect_codes(what, fmt, golden_codes, want_codes):
    """EXACT for format codes. For f16/bf16 a NaN compares by class and
    sign (format.h: "qNaN (sign kept)", payload unspecified)."""
    g = np.asarray(golden_codes).astype(np.int64)
    w = np.asarray(want_codes).astype(np.int64)
    if fmt in ("f16", "bf16"):
        gv, wv = fmt_decode(fmt, g), fmt_decode(fmt, w)
        sb = 0x8000
        g = np.where(np.isnan(gv), -1 - ((g & sb) != 0), g)
        w = np.where(np.isnan(wv), -1 - ((w & sb) != 0), w)
    expect_equal(what, g, w)


class Result:
    def __init__(self):
        self.checked = []
        self.worst = None  # (share of bound used, text)

    def note(self, what):
        self.checked.append(what)

    def bound(self, what, share, maxerr, bound):
        text = "%s max|err| %.3g vs bound %.3g (%.1f%%)" % (what, maxerr, bound, 100 * share)
        if self.worst is None or share > self.worst[0]:
            self.worst = (share, text)


# ---------------------------------------------------------------------------
# layouts: vLLM moe_align_block_size, batched align, CK moe-sorting,
# TensorRT-LLM expert maps (anchors dispatch_sorting.md B, C; vllm_modular.md
# 4; trtllm_moe.md 1)
# ---------------------------------------------------------------------------

def chk_align_block_size(c, r):
    ids = c.raw("topk_ids").astype(np.int64)
    M, k = ids.shape
    E = c.dims["E"]
    bs = c.policy["block_size"]
    numel = M * k
    flat = ids.reshape(-1)
    mode = c.policy["expert_map"]
    emap = c.raw("expert_map").astype(np.int64) if c.has("expert_map") else None
    sorted_len = numel + E * (bs - 1)
    if c.policy.get("pad_sorted_ids"):
        sorted_len = -(-sorted_len // bs) * bs
    if numel < E:
        sorted_len = min(numel * bs, sorted_len)
    nblocks = -(-sorted_len // bs)
    if mode.startswith("ignore_invalid"):
        # map applied in-kernel: non-local pairs dropped, local id space
        lid = emap[flat]
        nexp = int(emap.max()) + 1 if (emap >= 0).any() else 0
        keys, label = lid, lambda e: e
        nexp = max(nexp, 0)
    elif mode.startswith("keep_nonlocal"):
        keys, nexp = flat, E
        label = lambda e: int(emap[e])
    else:
        keys, nexp, label = flat, E, (lambda e: e)
    st = np.full(sorted_len, numel, dtype=np.int64)
    eid = np.full(nblocks, -1, dtype=np.int64)
    pos = 0
    for e in range(nexp):
        idx = np.nonzero(keys == e)[0]  # ascending flat index
        if len(idx) == 0:
            continue
        st[pos:pos + len(idx)] = idx
        nb = -(-len(idx) // bs)
        eid[pos // bs:pos // bs + nb] = label(e)
        pos += nb * bs
    expect_equal("sorted_token_ids", c.raw("sorted_token_ids"), st)
    expect_equal("expert_ids", c.raw("expert_ids"), eid)
    expect_equal("num_tokens_post_pad", c.raw("num_tokens_post_pad"), [pos])
    r.note("vLLM align layout (%s)" % mode.split(" ")[0])


def chk_align_batched(c, r):
    cnt = c.raw("expert_num_tokens").astype(np.int64)
    B = len(cnt)
    mt = c.policy["max_tokens"]
    bs = c.policy["block_size"]
    L = B * (-(-mt // bs) * bs)
    st = np.full(L, B * mt, dtype=np.int64)
    eid = np.full(L // bs, -1, dtype=np.int64)
    pos = 0
    for b in range(B):
        n = int(cnt[b])
        st[pos:pos + n] = b * mt + np.arange(n)
        nb = -(-n // bs)
        eid[pos // bs:pos // bs + nb] = b
        pos += nb * bs
    expect_equal("sorted_token_ids", c.raw("sorted_token_ids"), st)
    expect_equal("expert_ids", c.raw("expert_ids"), eid)
    expect_equal("num_tokens_post_pad", c.raw("num_tokens_post_pad"), [pos])
    r.note("batched align layout")


def chk_sort_ck(c, r):
    ids = c.raw("topk_ids").astype(np.int64)
    w = c.raw("topk_weights")
    T, k = ids.shape
    E = c.dims["E"]
    unit = c.policy["unit_size"]
    mock = c.policy["id_mode"].startswith("mock")
    one_tile = c.policy["empty_experts"] == "one_tile"
    mask = c.raw("local_expert_mask").astype(np.int64) if c.has("local_expert_mask") else np.ones(E, np.int64)
    L = c.tensors["sorted_token_ids"]["shape"][0]
    tiles = c.tensors["sorted_expert_ids"]["shape"][0]
    # untouched entries stay as the caller's zero-filled buffers (sort_ck.h)
    st = np.zeros(L, dtype=np.int64)
    sw = np.zeros(L, dtype=np.uint32)
    se = np.zeros(tiles, dtype=np.int64)
    sentinel = (T | (k << 24)) if mock else T
    pos = 0
    local = 0
    wb = w.astype(np.float32).view(np.uint32)
    for e in range(E):
        if not mask[e]:
            continue
        rows = []
        for t in range(T):  # ascending token; one slot per (token, expert)
            for j in range(k):
                if ids[t, j] == e:
                    rows.append((t, j))
        n = len(rows)
        seg = -(-n // unit) * unit
        if n == 0 and one_tile:
            seg = unit
        for i in range(seg):
            if i < n:
                t, j = rows[i]
                st[pos + i] = (t | (j << 24)) if mock else t
                sw[pos + i] = wb[t, j]
            else:
                st[pos + i] = sentinel
                sw[pos + i] = 0
        for tl in range(seg // unit):
            se[pos // unit + tl] = local
        pos += seg
        local += 1
    got_st = c.raw("sorted_token_ids").astype(np.int64) & 0xFFFFFFFF
    expect_equal("sorted_token_ids", got_st, st & 0xFFFFFFFF)
    expect_equal("sorted_weights(bits)", c.raw("sorted_weights").astype(np.float32).view(np.uint32), sw)
    expect_equal("sorted_expert_ids", c.raw("sorted_expert_ids"), se)
    expect_equal("num_tokens_post_padded", c.raw("num_tokens_post_padded"), [pos, T])
    r.note("CK moe-sorting (%s ids, %s)" % ("mock" if mock else "plain", c.policy["empty_experts"]))


def chk_maps_trtllm(c, r):
    ids = c.raw("token_selected_experts").astype(np.int64)
    T, k = ids.shape
    s0 = c.policy["start_expert"]
    EL = c.policy["num_local_experts"]
    three = c.policy["variant"] == "three_step"
    n = T * k
    p2u = np.zeros(n, np.int64)  # unwritten entries stay 0 (case.json)
    u2p = np.zeros(n, np.int64)
    off = np.zeros(EL + 1, np.int64)
    pte = np.zeros(n, np.int64)
    p = 0
    for e in range(EL):
        off[e] = p
        for t in range(T):
            for j in range(k):
                if ids[t, j] == s0 + e:
                    u = j * T + t
                    p2u[p] = u
                    u2p[u] = p
                    pte[p] = e
                    p += 1
                    if three:
                        break  # three-step keeps only the first matching slot
            # fused: duplicates give separate rows
    off[EL] = p
    if not three:
        # non-local slots follow the local rows in (t, j) order
        for t in range(T):
            for j in range(k):
                if not (s0 <= ids[t, j] < s0 + EL):
                    u = j * T + t
                    p2u[p] = u
                    u2p[u] = p
                    p += 1
    expect_equal("permuted_row_to_unpermuted_row", c.raw("permuted_row_to_unpermuted_row"), p2u)
    expect_equal("unpermuted_row_to_permuted_row", c.raw("unpermuted_row_to_permuted_row"), u2p)
    expect_equal("expert_first_token_offset", c.raw("expert_first_token_offset"), off)
    if c.has("permuted_token_selected_experts"):
        expect_equal("permuted_token_selected_experts", c.raw("permuted_token_selected_experts"), pte)
    r.note("TensorRT-LLM maps (%s)" % c.policy["variant"])


# ---------------------------------------------------------------------------
# routing (vllm_modular.md 9; route.h). Scores in float64; ids must match
# exactly unless the competing float64 scores are closer than the canonical
# f32 score error (then both orders are legitimate and that is reported).
# ---------------------------------------------------------------------------

U = 2.0 ** -24  # unit roundoff of f32
ULP_REL = 2.0 ** -23  # one f32 ULP relative to the value, upper bound
EXP_ULP, SIG_ULP = 0.952, 2.481  # reference/math.h


def _scores(c, logits):
    pol = c.policy
    method = pol["method"]
    score = pol.get("score", "softmax")
    with np.errstate(all="ignore"):
        if method == "softmax_topk" or (method == "grouped_topk" and score == "softmax"):
            mx = np.max(logits, axis=1, keepdims=True)
            d = logits - mx
            ex = np.exp(d)
            s = ex / ex.sum(axis=1, keepdims=True)
            # rel error: exp 0.952 ULP + rounding of (x - max) amplified by
            # |x - max| + sum of E terms (E-1 adds) + rcp + multiply
            E = logits.shape[1]
            rel = (EXP_ULP * ULP_REL + np.abs(d) * U) + ((E - 1) * U + EXP_ULP * ULP_REL + np.max(np.abs(d), axis=1, keepdims=True) * U) + 2 * U
        else:  # sigmoid scores, also Llama-4's weight
            s = 1.0 / (1.0 + np.exp(-logits))
            rel = np.full_like(s, SIG_ULP * ULP_REL)
    bad = ~np.isfinite(s)
    s = np.where(bad, 0.0, s)
    rel = np.where(bad, 0.0, rel)
    return s, rel


def _select(vals, k, excl=None):
    """k times the largest remaining value, ties to the lower index."""
    vals = vals.copy()
    out = []
    for _ in range(k):
        i = int(np.argmax(vals))  # argmax returns the first (lowest) index
        out.append(i)
        vals[i] = -np.inf
    return out


def chk_route(c, r):
    pol = c.policy
    logits = c.value("logits")
    M, E = logits.shape
    k = c.dims["k"]
    method = pol["method"]
    s, rel = _scores(c, logits)
    gold_ids = c.raw("topk_ids").astype(np.int64)
    gold_w = c.raw("topk_weights").astype(np.float64)
    bias = c.value("correction_bias") if c.has("correction_bias") else np.zeros(E)
    rsf = float(np.float32(pol.get("routed_scaling_factor", 1)))
    near_ties = 0
    worst = 0.0
    worst_err = worst_b = 0.0
    for m in range(M):
        if method == "llama4_top1":
            sel = _select(logits[m], 1)
            sc = s[m]
            selv = logits[m]
        elif method == "grouped_topk":
            G = pol["num_expert_group"]
            tg = pol["topk_group"]
            sb = s[m] + bias
            grp = sb.reshape(G, E // G)
            if pol.get("correction_bias"):
                gs = np.sort(grp, axis=1)[:, ::-1][:, :2].sum(axis=1)
            else:
                gs = grp.max(axis=1)
            keep = _select(gs, tg)
            masked = np.full(E, -np.inf)
            for g in keep:
                masked[g * (E // G):(g + 1) * (E // G)] = sb[g * (E // G):(g + 1) * (E // G)]
            sel = _select(masked, k)
            sc, selv = s[m], masked
        else:
            selv = s[m] + bias
            sel = _select(selv, k)
            sc = s[m]
        gi = [int(v) for v in gold_ids[m]]
        if gi != sel:
            # legitimate only if the swapped experts' scores are within the
            # f32 score error of each other
            tol = 4 * (np.max(rel[m]) * np.max(np.abs(sc)) + 4 * U * np.max(np.abs(bias)))
            for a, b in zip(gi, sel):
                if a != b and abs(selv[a] - selv[b]) > tol:
                    raise Disagree("row %d: ids golden %s, cross-check %s" % (m, gi, sel))
            near_ties += 1
            sel = gi
        w = np.array([sc[i] for i in sel])
        wrel = np.array([rel[m][i] for i in sel])
        if pol.get("renormalize") and method != "llama4_top1":
            tot = w.sum()
            # weights summed in slot order (k-1 adds) and one division
            wrel = wrel + np.max(wrel) + (len(w) - 1) * U + U
            w = w / tot if tot > 0 else w
        if rsf != 1.0:
            w = w * rsf
            wrel = wrel + U
        wrel = wrel + U  # final f32 rounding of the stored weight
        b = wrel * np.abs(w) + 2.0 ** -149
        err = np.abs(gold_w[m] - w)
        share = err / b
        if np.any(share > 1) or np.any(np.isnan(gold_w[m])):
            j = int(np.argmax(share))
            raise Disagree("row %d slot %d: weight golden %r, exact %r, bound %.3g"
                           % (m, j, gold_w[m][j], w[j], b[j]))
        if share.max() > worst:
            worst = share.max()
            j = int(np.argmax(share))
            worst_err, worst_b = err[j], b[j]
    r.note("routing %s ids EXACT%s" % (method, " (%d near-tie rows)" % near_ties if near_ties else ""))
    r.note("weights BOUNDED (math.h exp 0.952 / sigmoid 2.481 ULP + f32 op roundings)")
    r.bound("weights", worst, worst_err, worst_b)


# ---------------------------------------------------------------------------
# quantization (quant.h rules; anchors 3.3-3.5; vllm_modular.md 5). Scale
# arithmetic is done in np.float32, one IEEE rounding per written operation,
# because the rule *defines* the f32 value of the scale; elements are then
# encoded by the brute-force nearest-code search above.
# ---------------------------------------------------------------------------

def sf_offset_128x4(rr, cc, sf_cols):
    return ((((rr // 128) * (-(-sf_cols // 4)) + cc // 4) * 32 + rr % 32) * 16
            + ((rr % 128) // 32) * 4 + cc % 4)


def as_matrices(x):
    """[M, K] -> [1, M, K]; [E, N, K] stays."""
    return x[None] if x.ndim == 2 else x


def group_amax(xg, nan_policy):
    a = np.abs(xg)
    if nan_policy == "propagate":
        return np.max(a, axis=-1)
    return np.fmax.reduce(np.concatenate([np.zeros(a.shape[:-1] + (1,), a.dtype), a], axis=-1), axis=-1)


def nan_clamp(v, clamp, qmax):
    qm = F32(qmax)
    if clamp == "min_max":
        return np.fmax(-qm, np.fmin(v, qm))
    if clamp == "max_min":
        return np.fmin(np.fmax(v, -qm), qm)
    return v


def ceil_pow2_f32(s):
    """Smallest power of two >= s, exact (from the exponent); Inf/NaN kept."""
    s64 = np.asarray(s, dtype=np.float64)
    ok = np.isfinite(s64) & (s64 > 0)
    e = np.where(ok, ceil_log2(np.where(ok, s64, 1.0)), 0)
    return np.where(ok, np.ldexp(1.0, e.astype(np.int64)), s64).astype(np.float32)


def quantize_spec(spec, x, static=None):
    """Returns (codes of q in x's shape, linear scale array (f32 or codes),
    global scale or None). x: f32 array [M, K] or [E, N, K]."""
    elem = spec["elem"]
    gran = spec["gran"]
    x = np.asarray(x, dtype=np.float32)
    if gran == "none":
        if elem == "f32":
            return x.view(np.uint32).astype(np.int64), None, None
        return fmt_encode(elem, x.astype(np.float64), sat=False), None, None
    X = as_matrices(x)
    E_, N, K = X.shape
    rule = spec["rule"]
    qmax = F32(spec["qmax"])
    sat = spec["conversion"] == "SAT_RNE"
    # group view: [E, rows, groups, g]
    if gran == "tensor":
        g, gk = K, K
        rows_per = N
    elif gran == "row":
        gk = K
    elif gran in ("group", "mx32", "nv16"):
        gk = spec["group_k"]
    elif gran == "block":
        gk = spec["group_k"]
    else:
        raise NotCovered("granularity %s" % gran)

    with np.errstate(all="ignore"):
        if gran == "tensor":
            groups = X.reshape(E_, 1, 1, N * K)
        elif gran == "block":
            bn = spec["block_n"]
            nb, kb = -(-N // bn), -(-K // gk)
            pad = np.zeros((E_, nb * bn, kb * gk), np.float32)  # zero padding of edge tiles
            pad[:, :N, :K] = X
            groups = pad.reshape(E_, nb, bn, kb, gk).transpose(0, 1, 3, 2, 4).reshape(E_, nb, kb, bn * gk)
        else:
            groups = X.reshape(E_, N, K // gk, gk)
        amax = group_amax(groups, spec["amax_nan"]).astype(np.float32)
        gsc = None
        st = None if static is None else np.asarray(static, np.float32)
        if rule == "amax_qmax":
            s = amax / qmax if st is None else st.reshape(amax.shape)
            mult, op = (np.float32(1) / s), "mul"
            scale = s
        elif rule == "vllm_token":
            s = np.fmax(amax / qmax, F32(spec["scale_floor"])) if st is None else st.reshape(amax.shape)
            mult, op, scale = s, "div", s
        elif rule == "group_eps":
            a = np.fmax(F32(spec["amax_floor"]), amax)
            s = a / qmax
            if spec["pow2_scale"]:
                s = ceil_pow2_f32(np.fmax(s, F32(spec["pow2_floor"])))
            mult, op, scale = s, "div", s
        elif rule == "block_floor":
            a = np.where(np.isnan(amax), amax, np.maximum(amax, F32(spec["amax_floor"]))).astype(np.float32)
            mult, op = qmax / a, "mul"
            scale = a / qmax
        elif rule == "int_token":
            a = np.maximum(amax, F32(spec["amax_floor"]))
            mult, op = F32(127) / a, "mul"
            scale = a / F32(127)
        elif rule == "int_minmax":
            qmin = F32(spec["qmin"])
            gmax = np.max(groups, axis=-1)
            gmin = np.min(groups, axis=-1)
            s = np.maximum(np.abs(gmax / qmax), np.abs(gmin / qmin)).astype(np.float32)
            mult, op, scale = s, "div", s
        elif rule in ("mx_ocp_floor", "mx_ceil_pow2"):
            fin = np.isfinite(amax)
            if rule == "mx_ocp_floor":
                e = np.where(amax > 0, floor_log2(np.where(amax > 0, amax, 1)) - spec["emax_elem"], -127)
            else:
                t = (amax / qmax).astype(np.float32)
                e = np.where(t > 0, ceil_log2(np.where(t > 0, t, 1)), -127)
            e = np.clip(e, -127, 127)
            mult = np.where(fin, np.ldexp(1.0, (-e).astype(np.int64)), np.nan)
            op = "mul_exact"
            scale = np.where(fin, e + 127, 255).astype(np.int64)
        elif rule == "nvfp4":
            if spec["use_global_scale"]:
                if st is not None:
                    gs = st.reshape(E_).astype(np.float32)
                else:
                    am = group_amax(X.reshape(E_, N * K), spec["amax_nan"]).astype(np.float32)
                    gfl = F32(spec["global_amax_floor"])
                    gs = F32(spec["global_numer"]) / np.where(np.isnan(am), am, np.maximum(am, gfl)).astype(np.float32)
                gsb = gs.reshape(E_, 1, 1)
                sf_val = (gsb * (amax * (F32(1) / F32(6)))).astype(np.float32)
            else:
                gs = None
                sf_val = (amax * (F32(1) / F32(6))).astype(np.float32)
            sfc = fmt_encode("e4m3", sf_val.astype(np.float64), sat=True)
            sff = fmt_decode("e4m3", sfc).astype(np.float32)

            def rcp0(v):
                return np.where(v == 0, F32(0), F32(1) / v).astype(np.float32)

            if gs is not None:
                out = rcp0((sff * rcp0(gsb)).astype(np.float32))
            else:
                out = rcp0(sff)
            mult, op, scale, gsc = out, "mul", sfc, gs
        elif rule == "deepep_ll":
            a = np.fmax(F32(spec["amax_floor"]), amax)
            if spec["pow2_scale"]:
                t = (a * (F32(1) / qmax)).astype(np.float32)
                # DeepEP utils.cuh: fast_log2_ceil reads the exponent field
                # (an Inf amax has field 255, so e = 128) and fast_pow2(n)
                # builds the float from bits (n + 127) << 23 in 32-bit
                # arithmetic; for n = -128 that is 0xFF800000 = -Inf. Upstream
                # assumes -126 <= n <= 127; this models what the bits do past it.
                fin = np.isfinite(t)
                e = np.where(fin, ceil_log2(np.where(fin, t, 1)), 128).astype(np.int64)

                def fast_pow2(n):
                    return (((n + 127) << 23) & 0xFFFFFFFF).astype(np.uint32).view(np.float32)

                mult = fast_pow2(-e)
                sinv = fast_pow2(e)
                scale = (e + 127).astype(np.int64) if spec["layout"] == "ue8m0_pack4" else sinv
            else:
                mult = (qmax / a).astype(np.float32)
                scale = (a * (F32(1) / qmax)).astype(np.float32)
            op = "mul"
        else:
            raise NotCovered("rule %s" % rule)
        if static is not None and rule != "nvfp4":
            op = "div"
            mult = scale
        mb = np.asarray(mult)[..., None]
        if op == "div":
            v = (groups / mb).astype(np.float32)
        elif op == "mul":
            v = (groups * mb).astype(np.float32)
        else:  # exact power-of-two scaling, float64 keeps it exact
            v = groups.astype(np.float64) * mb
        # a NaN made by arithmetic gets + sign; an input NaN keeps its sign
        v = np.where(np.isnan(v) & ~np.isnan(groups), np.float64(np.nan), v)
        v = np.where(np.isnan(groups), np.copysign(np.nan, groups.astype(np.float64)), v)
        if elem in ("int8", "int4"):
            lo, hi = (-128, 127) if elem == "int8" else (-8, 7)
            q = int_encode(v, lo, hi)
        else:
            vv = nan_clamp(v.astype(np.float32), spec["nan_clamp"], qmax) if op != "mul_exact" else v
            q = fmt_encode(elem, np.asarray(vv, np.float64), sat=sat)
    # back to x's shape
    if gran == "tensor":
        q = q.reshape(E_, N, K)
    elif gran == "block":
        bn = spec["block_n"]
        nb, kb = -(-N // bn), -(-K // gk)
        q = q.reshape(E_, nb, kb, bn, gk).transpose(0, 1, 3, 2, 4).reshape(E_, nb * bn, kb * gk)[:, :N, :K]
    else:
        q = q.reshape(E_, N, K)
    q = q.reshape(x.shape)
    scale = np.asarray(scale)
    return q, scale, gsc


def layout_scale(spec, scale, xshape):
    """Linear [E, rows, groups] scales -> the stored layout."""
    lay = spec.get("layout", "linear")
    if lay == "linear":
        return scale
    if lay == "swizzle_128x4":
        E_, R, C = scale.shape
        Rp, Cp = -(-R // 128) * 128, -(-C // 4) * 4
        out = np.zeros((E_, Rp * Cp), scale.dtype)
        rr, cc = np.meshgrid(np.arange(R), np.arange(C), indexing="ij")
        off = sf_offset_128x4(rr, cc, C)
        for e in range(E_):
            out[e, off.reshape(-1)] = scale[e].reshape(-1)
        return out.reshape(E_, Rp, Cp)
    if lay == "ue8m0_pack4":
        E_, R, C = scale.shape
        sc = scale.reshape(E_, R, C // 4, 4).astype(np.int64)
        words = sc[..., 0] | (sc[..., 1] << 8) | (sc[..., 2] << 16) | (sc[..., 3] << 24)
        return words.astype(np.uint32).view(np.int32).astype(np.int64)
    raise NotCovered("scale layout %s" % lay)


def unlayout_scale(spec, stored, E_, R, C):
    lay = spec.get("layout", "linear")
    stored = np.asarray(stored)
    if lay == "linear":
        return stored.reshape(E_, R, C)
    if lay == "swizzle_128x4":
        st = stored.reshape(E_, -1)
        rr, cc = np.meshgrid(np.arange(R), np.arange(C), indexing="ij")
        off = sf_offset_128x4(rr, cc, C)
        return np.stack([st[e][off] for e in range(E_)])
    if lay == "ue8m0_pack4":
        w = stored.reshape(E_, R, -1).astype(np.int64) & 0xFFFFFFFF
        b = np.stack([(w >> (8 * j)) & 0xFF for j in range(4)], axis=-1)
        return b.reshape(E_, R, -1)[:, :, :C]
    raise NotCovered("scale layout %s" % lay)


def scale_geometry(spec, shape):
    X = (1,) + tuple(shape) if len(shape) == 2 else tuple(shape)
    E_, N, K = X
    gran = spec["gran"]
    if gran == "tensor":
        return E_, 1, 1
    if gran == "row":
        return E_, N, 1
    if gran == "block":
        return E_, -(-N // spec["block_n"]), -(-K // spec["group_k"])
    return E_, N, K // spec["group_k"]


def chk_quantize(c, r):
    spec = c.policy["spec"]
    x = c.raw("x").astype(np.float32)
    static = c.raw("static_scale") if c.has("static_scale") else None
    q, scale, gs = quantize_spec(spec, x, static)
    elem = spec["elem"]
    gq = c.raw("q")
    if elem == "f32":
        expect_f32_bits("q", gq.astype(np.float32), q.astype(np.uint32).view(np.float32))
    elif elem in ("int8", "int4"):
        expect_equal("q", gq.astype(np.int64), q)
    else:
        expect_codes("q", elem, gq, q)
    what = "%s %s codes" % (elem, spec["gran"])
    if scale is not None and c.has("scale"):
        lin = scale.reshape(scale_geometry(spec, x.shape))
        stored = layout_scale(spec, lin, x.shape)
        gsc = c.raw("scale")
        sdt = c.dtype("scale")
        if sdt == "f32":
            expect_f32_bits("scale", gsc.reshape(-1), np.asarray(stored, np.float32).reshape(-1))
        else:
            expect_equal("scale", gsc.reshape(-1).astype(np.int64), np.asarray(stored).reshape(-1).astype(np.int64))
        what += " + %s scales (%s, %s)" % (sdt, spec["rule"], spec.get("layout"))
    if gs is not None and c.has("global_scale"):
        expect_f32_bits("global_scale", c.raw("global_scale").reshape(-1), gs.reshape(-1))
        what += " + global"
    r.note(what + " EXACT")


def chk_dequantize(c, r):
    spec = c.policy["spec"]
    elem = spec["elem"]
    qshape = tuple(c.tensors["q"]["shape"])
    if spec["gran"] == "none":
        if elem == "f32":
            v = c.raw("q").astype(np.float32)
        else:
            v = c.value("q").astype(np.float32)  # exact widening
        expect_f32_bits("x", c.raw("x"), v)
        r.note("%s widening EXACT" % elem)
        return
    if elem in ("int8", "int4"):
        dq = c.raw("q").astype(np.float64)
    else:
        dq = c.value("q")
    E_, R, C = scale_geometry(spec, qshape)
    sdt = c.dtype("q_scale")
    raw = c.raw("q_scale")
    lin = unlayout_scale(spec, raw, E_, R, C)
    if sdt == "e8m0" or spec.get("layout") == "ue8m0_pack4":
        sv = e8m0_value(lin)
    elif sdt == "e4m3":
        sv = fmt_decode("e4m3", lin)
    else:
        sv = lin.astype(np.float64)
    with np.errstate(all="ignore"):
        if spec["rule"] == "nvfp4" and spec.get("use_global_scale"):
            g = c.raw("q_global").astype(np.float32).reshape(E_, 1, 1)
            sv = (sv.astype(np.float32) / g).astype(np.float64)  # f32(sf) / gs, one rounding
        # expand to elements
        X = dq.reshape((E_,) + qshape[-2:])
        N, K = X.shape[1], X.shape[2]
        if spec["gran"] == "block":
            rows = np.arange(N) // spec["block_n"]
            cols = np.arange(K) // spec["group_k"]
        elif spec["gran"] == "tensor":
            rows, cols = np.zeros(N, int), np.zeros(K, int)
        elif spec["gran"] == "row":
            rows, cols = np.arange(N), np.zeros(K, int)
        else:
            rows, cols = np.arange(N), np.arange(K) // spec["group_k"]
        full = sv[:, rows][:, :, cols]
        want = (X * full).astype(np.float32)  # product of two f32 values, one f32 rounding
    expect_f32_bits("x", c.raw("x").reshape(want.shape), want)
    r.note("dequantize %s/%s decode*scale EXACT" % (elem, spec["gran"]))


# ---------------------------------------------------------------------------
# activations (act.h; vllm_modular.md 6; trtllm_moe.md 3.2)
#
# Tolerance, derived: the reference evaluates each formula in f32 with the
# canonical functions of reference/math.h, whose stated worst errors are
#   silu 2.404 ULP of the result (x >= -88.5) and 1.493 ULPs of x anywhere,
#   gelu 1.464 ULPs of x, gelu_tanh 1.570 ULPs of x, sigmoid 2.481 ULP,
# plus 0.5 ULP for each further f32 operation (propagated to first order
# below). Let e be that total f32 error bound around the exact value v
# (computed here in float64). The stored output, rounded once to its dtype
# with RNE, must lie in [RN(v - e), RN(v + e)]: rounding is monotone, so any
# f32 result within e of v rounds into that interval. For bf16/f16 outputs,
# e is ~2^-21 relative against a half-ULP of 2^-9 / 2^-12, so this allows
# the neighbouring code (1 ulp of the output) only when v lies within e of a
# rounding midpoint; everywhere else it demands the correctly rounded code.
# ---------------------------------------------------------------------------

ACT_ERR = {"silu_res": 2.404, "silu_x": 1.493, "gelu_x": 1.464, "gelu_tanh_x": 1.570}


def act_exact(name, g):
    """Exact activation of f32 values (float64) and its canonical-math error bound."""
    with np.errstate(all="ignore"):
        if name == "silu":
            v = g / (1.0 + np.exp(-g))
            eb = np.minimum(np.where(g >= -88.5, ACT_ERR["silu_res"] * ulp32(v), np.inf), ACT_ERR["silu_x"] * ulp32(g))
        elif name == "gelu":
            v = 0.5 * g * (1.0 + erf(g / np.sqrt(2.0)))
            eb = ACT_ERR["gelu_x"] * ulp32(g)
        elif name == "gelu_tanh":
            beta = float(np.float32(0.7978845608028654))
            kappa = float(np.float32(0.044715))
            # the constants are part of the definition (math.h rounds them to f32)
            v = (0.5 * g) * (1.0 + np.tanh(beta * (g + kappa * g * g * g)))
            eb = ACT_ERR["gelu_tanh_x"] * ulp32(g)
        else:
            raise NotCovered(name)
    return v, eb


def erf(x):
    """erf in float64 to ~1e-16 via math.erf (standard library)."""
    import math
    f = np.vectorize(lambda t: math.erf(t) if np.isfinite(t) else (np.sign(t) if not np.isnan(t) else np.nan))
    return f(np.asarray(x, dtype=np.float64)).astype(np.float64)


def sig_exact(t):
    with np.errstate(all="ignore"):
        return 1.0 / (1.0 + np.exp(-t))


def act_candidates(c):
    pol = c.policy
    act = pol["act"]
    x = c.value("x")
    dt = c.dtype("x")
    P = x.shape[0]
    gated = act not in ("relu2", "silu_nomul", "gelu_nomul", "identity")
    if gated:
        I = x.shape[1] // 2
        lay = pol.get("layout", "gate_up")
        if lay == "gate_up":
            g, u = x[:, :I], x[:, I:]
        elif lay == "up_gate":
            u, g = x[:, :I], x[:, I:]
        else:
            g, u = x[:, 0::2], x[:, 1::2]
    else:
        g = x
    alpha = float(np.float32(pol.get("alpha", 1.702)))
    L = float(np.float32(pol.get("limit", 7)))
    with np.errstate(all="ignore"):
        if act in ("silu", "gelu", "gelu_tanh", "swiglu_clamp"):
            if act == "swiglu_clamp":
                g = np.minimum(g, L)
                u = np.clip(u, -L, L)
                a, ea = act_exact("silu", g)
            else:
                a, ea = act_exact(act, g)
            if pol.get("round_act_to_storage"):
                # act(g) is rounded to the storage dtype before the multiply;
                # both neighbours are legitimate when act(g) is within its
                # error of a midpoint
                # act(g) may be anywhere within ea of the exact value, and
                # each such value rounds (monotonically) into [lo, hi] of
                # the storage dtype, so the product lies between lo*u and hi*u
                lo = fmt_decode(dt, fmt_encode(dt, a - ea, sat=False))
                hi = fmt_decode(dt, fmt_encode(dt, a + ea, sat=False))
                p1, p2 = lo * u, hi * u
                v = (p1 + p2) / 2
                e = np.abs(p2 - p1) / 2 + 0.5 * np.maximum(ulp32(p1), ulp32(p2))
                v = np.where(np.isfinite(p1) & np.isfinite(p2), v, a * u)
                return [(v, e)], dt
            v = a * u
            e = ea * np.abs(u) + 0.5 * ulp32(v)
            return [(v, e)], dt
        if act == "swigluoai":
            gp = np.where(np.isnan(g), g, np.minimum(g, L))
            up = np.clip(u, -L, L)
            t = gp * alpha
            s = sig_exact(t)
            es = SIG_ULP * ulp32(s) + 0.25 * 0.5 * ulp32(t)
            vv = gp * s
            ev = np.abs(gp) * es + 0.5 * ulp32(vv)
            w = up + 1.0
            v = w * vv
            e = np.abs(w) * ev + np.abs(vv) * 0.5 * ulp32(w) + 0.5 * ulp32(v)
            return [(v, e)], dt
        if act == "swiglu_bias":
            if c.has("swiglu_alpha"):
                al = c.value("swiglu_alpha")
                be = c.value("swiglu_beta")
                li = c.value("swiglu_limit")
                rexp = c.raw("row_expert").astype(np.int64)
                A = np.where(rexp >= 0, al[np.maximum(rexp, 0)], 0)[:, None]
                B = np.where(rexp >= 0, be[np.maximum(rexp, 0)], 0)[:, None]
                LL = np.where(rexp >= 0, li[np.maximum(rexp, 0)], 0)[:, None]
                valid = (rexp >= 0)[:, None]
            else:
                A, B, LL, valid = 1.0, 0.0, np.inf, True
            gp = np.minimum(g, LL)
            t = A * gp
            s = sig_exact(t)
            es = SIG_ULP * ulp32(s) + 0.25 * 0.5 * ulp32(t)
            vv = gp * s
            ev = np.abs(gp) * es + 0.5 * ulp32(vv)
            w = np.clip(u, -LL, LL) + B
            v = vv * w
            e = np.abs(w) * ev + np.abs(vv) * 0.5 * ulp32(w) + 0.5 * ulp32(v)
            v = np.where(valid, v, 0.0)
            e = np.where(valid, e, 0.0)
            return [(v, e)], dt
        if act == "relu2":
            m = np.where(np.isnan(g), g, np.maximum(g, 0.0))
            v = m * m
            return [(v, 0.5 * ulp32(v))], dt
        if act in ("silu_nomul", "gelu_nomul"):
            a, ea = act_exact(act.split("_")[0], g)
            return [(a, ea)], dt
        if act == "identity":
            return [(g, np.zeros_like(g))], dt
    raise NotCovered("activation %s" % act)


def rn_out(dt, v):
    """Round float64 values to the output dtype (IEEE RNE); float64 result."""
    if dt == "f32":
        with np.errstate(over="ignore"):
            return np.asarray(v, np.float64).astype(np.float32).astype(np.float64)
    return fmt_decode(dt, fmt_encode(dt, v, sat=False))


def chk_activation(c, r):
    cands, dt = act_candidates(c)
    odt = c.dtype("out")
    gold = c.value("out")
    ok = np.zeros(gold.shape, bool)
    worst, werr, wb = 0.0, 0.0, 0.0
    with np.errstate(all="ignore"):
        for v, e in cands:
            e = np.where(np.isfinite(e), e, 0.0)
            lo = rn_out(odt, v - e)
            hi = rn_out(odt, v + e)
            inside = (gold >= lo) & (gold <= hi)
            nanv = np.isnan(v)
            inside = np.where(nanv, np.isnan(gold), inside & ~np.isnan(gold))
            # infinities: same class and sign (both ends then round to it)
            ok |= inside
            fin = np.isfinite(v) & np.isfinite(gold)
            err = np.where(fin, np.abs(gold - v), 0.0)
            bnd = np.where(fin, e + ulp_out(odt, v) / 2, 1.0)
            share = np.where(fin, err / np.where(bnd > 0, bnd, 1.0), 0.0)
            if share.max() > worst:
                j = np.unravel_index(np.argmax(share), share.shape)
                worst, werr, wb = float(share[j]), float(err[j]), float(bnd[j])
    if not ok.all():
        j = tuple(int(i) for i in np.argwhere(~ok)[0])
        v0, e0 = cands[0]
        raise Disagree("out%s: golden %r, exact %r, f32 error bound %.3g (%d of %d outside)"
                       % (list(j), float(gold[j]), float(v0[j]), float(e0[j]) if np.isfinite(e0[j]) else 0.0,
                          int((~ok).sum()), ok.size))
    r.note("activation %s%s -> %s BOUNDED (math.h ULPs, RN to %s)"
           % (c.policy["act"], "/" + c.policy["layout"] if "layout" in c.policy else "", odt, odt))
    r.bound("out", worst, werr, wb)


def ulp_out(dt, v):
    """Spacing of the output dtype at |v|."""
    eb, mb, bias, _ = FORMATS.get(dt, (8, 23, 127, "ieee")) if dt != "f32" else (8, 23, 127, "ieee")
    av = np.abs(np.asarray(v, np.float64))
    with np.errstate(all="ignore"):
        e = np.where((av > 0) & np.isfinite(av), floor_log2(np.where((av > 0) & np.isfinite(av), av, 1.0)), 1 - bias)
    e = np.maximum(e, 1 - bias)
    return np.ldexp(1.0, (e - mb).astype(np.int64))


# ---------------------------------------------------------------------------
# end-to-end forward (forward.h steps 1-8; vllm_modular.md 7), unquantized
# schemes (f32 / bf16 / f16, where the activation "quantization" is a cast of
# data already in that dtype, hence exact) with silu / gelu / gelu_tanh.
#
# The exact result is computed in float64 with no intermediate rounding. The
# bound is a first-order forward error analysis of the reference's rounding
# points (u_s = unit roundoff of the storage dtype, gamma_n = n*u/(1-n*u)
# with u = 2^-24 for the f32 accumulations):
#   GEMM1 (K = H, f32, then rounded to storage):
#     e_h = gamma_H * sum|x||w1| + u_s * (|h| + gamma_H * sum|x||w1|)
#   act(g) * u with act Lipschitz <= 1.13 (max |silu'| = 1.0998,
#     max |gelu'| = 1.1289, max |gelu_tanh'| = 1.1290) and the math.h error
#     ea of act at g, then rounded to storage:
#     e_a = 1.13 e_g |u| + |act(g)| e_u + e_g e_u + ea |u| + 0.5 ulp32 + u_s |a|
#   GEMM2 (K = I): e_y = sum|w2| e_a + gamma_I * sum|w2||a~| + u_s |y~|
#   combine over k slots in f32, one rounding to the output dtype:
#     e_out = sum|w| e_y + gamma_k * sum|w y~| + u_out |out|
# where a~, y~ are the exact values widened by their own bound (so products
# of error terms are covered rather than dropped).
# ---------------------------------------------------------------------------

UNIT = {"f32": 2.0 ** -24, "bf16": 2.0 ** -8, "f16": 2.0 ** -11}
LIPSCHITZ = {"silu": 1.0998, "gelu": 1.1289, "gelu_tanh": 1.1290}


def gamma(n):
    return n * U / (1 - n * U)


def chk_forward(c, r):
    pol = c.policy
    scheme = c.meta.get("scheme")
    if scheme not in UNIT:
        raise NotCovered("forward with quantized scheme %s" % scheme)
    act = pol.get("act")
    if act not in LIPSCHITZ:
        raise NotCovered("forward with activation %s" % act)
    if pol.get("weights_on_input") or pol.get("bias"):
        raise NotCovered("forward with weights on input / bias")
    for t in ("x", "topk_ids", "topk_weights", "w1", "w2"):
        if not c.has(t):
            raise NotCovered("forward without stored %s" % t)
    x = c.value("x")
    ids = c.raw("topk_ids").astype(np.int64)
    tw = c.value("topk_weights")
    w1 = c.value("w1")
    w2 = c.value("w2")
    E, I2, H = w1.shape
    I = I2 // 2
    M, k = ids.shape
    rng = pol.get("expert_range", "all")
    if rng == "all":
        lo_e, hi_e = 0, E
    elif rng.startswith("[E/2, E)"):
        lo_e, hi_e = E // 2, E
    else:
        raise NotCovered("expert range %s" % rng)
    us = UNIT[scheme]
    uo = UNIT.get(c.dtype("out"), us)
    lay = pol.get("act_layout", "gate_up")
    out = np.zeros((M, H))
    bnd = np.zeros((M, H))
    with np.errstate(all="ignore"):
        for t in range(M):
            acc = np.zeros(H)
            acc_abs = np.zeros(H)
            err = np.zeros(H)
            for j in range(k):
                e = ids[t, j]
                if not (lo_e <= e < hi_e):
                    continue
                h = w1[e] @ x[t]
                sh = np.abs(w1[e]) @ np.abs(x[t])
                eh = gamma(H) * sh + us * (np.abs(h) + gamma(H) * sh)
                if lay == "gate_up":
                    g, u, eg, eu = h[:I], h[I:], eh[:I], eh[I:]
                elif lay == "up_gate":
                    u, g, eu, eg = h[:I], h[I:], eh[:I], eh[I:]
                else:
                    g, u, eg, eu = h[0::2], h[1::2], eh[0::2], eh[1::2]
                av, ea = act_exact(act, g)
                a = av * u
                e_a = (LIPSCHITZ[act] * eg * np.abs(u) + np.abs(av) * eu + eg * eu + ea * np.abs(u)
                       + 0.5 * ulp32(a))
                e_a = e_a + us * (np.abs(a) + e_a)
                y = w2[e] @ a
                aw = np.abs(a) + e_a
                e_y = np.abs(w2[e]) @ e_a + gamma(I) * (np.abs(w2[e]) @ aw)
                e_y = e_y + us * (np.abs(y) + e_y)
                acc += tw[t, j] * y
                acc_abs += np.abs(tw[t, j]) * (np.abs(y) + e_y)
                err += np.abs(tw[t, j]) * e_y
            out[t] = acc
            bnd[t] = err + gamma(k) * acc_abs + uo * (np.abs(acc) + err + gamma(k) * acc_abs) + 2.0 ** -149
    gold = c.value("out")
    d = np.abs(gold - out)
    ok = d <= bnd
    if not ok.all() or np.isnan(gold).any():
        i = tuple(int(v) for v in np.argwhere(~ok)[0])
        raise Disagree("out%s: golden %r, exact %r, derived bound %.3g (%d of %d outside)"
                       % (list(i), float(gold[i]), float(out[i]), float(bnd[i]), int((~ok).sum()), ok.size))
    share = d / bnd
    j = np.unravel_index(np.argmax(share), share.shape)
    r.note("forward %s %s/%s float64 vs derived bound" % (scheme, act, lay))
    r.bound("out", float(share[j]), float(d[j]), float(bnd[j]))


# ---------------------------------------------------------------------------
# data movement (permute.h; anchors vllm_modular.md 2.7, trtllm_moe.md 2).
# Rows are compared as raw codes (packed e2m1 unpacked two per byte, which
# is a bijection of the bytes when H is even), so EXACT means bytes equal.
# ---------------------------------------------------------------------------

def _zero_like_rows(a, n):
    return np.zeros((n,) + a.shape[1:], dtype=a.dtype)


def chk_permute_rows(c, r):
    x = c.raw("x")
    src = c.raw("src").astype(np.int64)
    want = _zero_like_rows(x, len(src))
    for p, s in enumerate(src):
        if s >= 0:
            want[p] = x[s]
    expect_equal("out", c.raw("out"), want)
    r.note("gather rows out[p] = x[src[p]] (%s) EXACT" % c.dtype("x"))


def chk_unpermute_rows(c, r):
    y = c.raw("y")
    dst = c.raw("dst").astype(np.int64)
    T = c.tensors["out"]["shape"][0]
    want = _zero_like_rows(y, T)
    seen = set()
    for p, d in enumerate(dst):
        if d >= 0:
            if d in seen:
                raise Disagree("dst names row %d twice (contract: at most once)" % d)
            seen.add(d)
            want[d] = y[p]
    expect_equal("out", c.raw("out"), want)
    r.note("scatter rows out[dst[p]] = y[p] (%s) EXACT" % c.dtype("y"))


def chk_expand_trtllm(c, r):
    x = c.raw("x")
    T = x.shape[0]
    m = c.raw("permuted_row_to_unpermuted_row").astype(np.int64)
    want = x[m % T]
    expect_equal("out", c.raw("out"), want)
    if c.has("topk_weights"):
        w = c.raw("topk_weights").astype(np.float32)
        sc = w[m % T, m // T]
    else:
        sc = np.ones(len(m), np.float32)
    expect_f32_bits("permuted_scales", c.raw("permuted_scales"), sc)
    r.note("TRT-LLM expand rows x[u %% T], scales w[u %% T, u / T]%s EXACT"
           % ("" if c.has("topk_weights") else " (1.0)"))


def _batched_members(ids, first, L):
    """Per local expert, the tokens whose top-k row names it, ascending."""
    return [np.nonzero((ids == first + l).any(axis=1))[0] for l in range(L)]


def chk_batched_scatter(c, r):
    x = c.raw("x")
    ids = c.raw("topk_ids").astype(np.int64)
    first = c.policy["first_expert"]
    L, mt = c.tensors["out"]["shape"][:2]
    want = np.zeros((L, mt) + x.shape[1:], dtype=x.dtype)
    cnt = np.zeros(L, np.int64)
    for l, toks in enumerate(_batched_members(ids, first, L)):
        if len(toks) > mt:
            raise Disagree("expert %d has %d tokens > max_tokens %d (should be an error)" % (l, len(toks), mt))
        want[l, :len(toks)] = x[toks]
        cnt[l] = len(toks)
    expect_equal("counts", c.raw("counts"), cnt)
    expect_equal("out", c.raw("out"), want)
    r.note("batched [E_loc, max_tokens, H] layout, experts %d..%d EXACT" % (first, first + L - 1))


def chk_permute_grouped(c, r):
    x = c.raw("x")
    ids = c.raw("topk_ids").astype(np.int64)
    T, k = ids.shape
    first = c.policy["first_expert"]
    L = c.policy["num_local_experts"]
    pm = c.policy["pad_multiple"]
    cap = c.tensors["row_src"]["shape"][0]
    flat = ids.reshape(-1)
    rs = np.full(cap, -1, np.int64)
    cnt = np.zeros(L, np.int64)
    off = np.zeros(L + 1, np.int64)
    pos = 0
    for l in range(L):
        idx = np.nonzero(flat == first + l)[0]  # ascending t*k + j
        off[l] = pos
        cnt[l] = len(idx)
        rs[pos:pos + len(idx)] = idx
        pos += -(-len(idx) // pm) * pm
    off[L] = pos
    if pos > cap:
        raise Disagree("padded rows %d exceed the stored capacity %d" % (pos, cap))
    want = np.zeros((cap,) + x.shape[1:], dtype=x.dtype)
    sel = rs >= 0
    want[sel] = x[rs[sel] // k]
    expect_equal("counts", c.raw("counts"), cnt)
    expect_equal("offsets", c.raw("offsets"), off)
    expect_equal("row_src", c.raw("row_src"), rs)
    expect_equal("out", c.raw("out"), want)
    r.note("expert-grouped rows padded to %d, experts %d..%d EXACT" % (pm, first, first + L - 1))


def chk_ep_allgather_dispatch(c, r):
    R = c.policy["world_size"]
    for src, dst in (("x", "gathered_x"), ("x_scales", "gathered_scales"),
                     ("topk_ids", "gathered_ids"), ("topk_weights", "gathered_weights")):
        if not c.has(src):
            continue
        a = c.raw(src)
        want = a.reshape((a.shape[0] * a.shape[1],) + a.shape[2:])  # rank-major rows
        g = c.raw(dst)
        if c.dtype(dst) == "f32":
            expect_f32_bits(dst, g, want)
        else:
            expect_equal(dst, g, want)
    r.note("all-gather rank-major rows over %d ranks (x, scales, ids, weights) EXACT" % R)


# ---------------------------------------------------------------------------
# fixed-order reductions (reduce.h; anchors vllm_modular.md 2.6, 2.7 and
# trtllm_moe.md 5.1). Each is reproduced operation by operation in float32
# (numpy float32 + and * are IEEE RNE), with every store rounded RNE to the
# storage dtype by fmt_encode; the results are then EXACT (bits equal).
# ---------------------------------------------------------------------------

def to_storage(dt, v32):
    """RNE store of float32 values into dt (f32: unchanged); float32 result."""
    v32 = np.asarray(v32, np.float32)
    if dt == "f32":
        return v32
    with np.errstate(all="ignore"):
        return fmt_decode(dt, fmt_encode(dt, v32.astype(np.float64), sat=False)).astype(np.float32)


def expect_stored(what, c, name, want32):
    dt = c.dtype(name)
    if dt == "f32":
        expect_f32_bits(what, c.raw(name), want32)
    else:
        with np.errstate(all="ignore"):
            expect_codes(what, dt, c.raw(name), fmt_encode(dt, np.asarray(want32, np.float64), sat=False))


def chk_war_noop(c, r):
    v = c.value("fused")
    odt = c.dtype("out")
    if odt == "f32":
        expect_f32_bits("out", c.raw("out"), v.astype(np.float32))
    else:
        with np.errstate(all="ignore"):
            expect_codes("out", odt, c.raw("out"), fmt_encode(odt, v, sat=False))
    r.note("copy %s -> %s RNE (overflow to Inf) EXACT" % (c.dtype("fused"), odt))


def chk_war_contiguous(c, r):
    dt = c.dtype("fused")
    f = c.value("fused").astype(np.float32)
    w = c.raw("topk_weights").astype(np.float32)
    M, k = w.shape
    f = f.reshape(M, k, -1)
    with np.errstate(all="ignore"):
        if not c.policy.get("weights_on_input"):
            # in-place fused *= w: f32 product, stored RNE
            f = to_storage(dt, f * w[:, :, None])
        variant = c.policy.get("sum", "auto")
        if variant == "auto":
            variant = "storage_per_add" if k in (2, 3, 4) else "fp32"
        acc = np.zeros((M, f.shape[2]), np.float32)
        if variant == "storage_per_add":
            for j in range(k):
                acc = to_storage(dt, acc + f[:, j])
        elif variant == "fp32":
            for j in range(k):
                acc = acc + f[:, j]
            acc = to_storage(c.dtype("out"), acc)
        else:
            raise NotCovered("moe_sum variant %s" % variant)
    expect_stored("out", c, "out", acc)
    r.note("weight%s + moe_sum %s over k=%d ascending (%s) EXACT"
           % (" skipped" if c.policy.get("weights_on_input") else "", variant, k, dt))


def chk_war_naive_batched(c, r):
    dt = c.dtype("out")
    fz = c.value("fused").astype(np.float32)
    ids = c.raw("topk_ids").astype(np.int64)
    w = c.raw("topk_weights").astype(np.float32)
    first = c.policy["first_expert"]
    L = fz.shape[0]
    M = ids.shape[0]
    out = np.zeros((M, fz.shape[2]), np.float32)
    woi = c.policy.get("weights_on_input")
    with np.errstate(all="ignore"):
        for l, toks in enumerate(_batched_members(ids, first, L)):
            for i, t in enumerate(toks):
                j = np.nonzero(ids[t] == first + l)[0][0]
                p = fz[l, i] if woi else fz[l, i] * w[t, j]  # f32 product
                out[t] = to_storage(dt, out[t] + p)           # f32 add, one store
    expect_stored("out", c, "out", out)
    r.note("NaiveBatched experts %d..%d ascending, f32 mul+add, one RNE store per expert EXACT"
           % (first, first + L - 1))


def _round_f32_exact(q):
    """RNE of an exact rational to float32 (no double rounding)."""
    from fractions import Fraction
    if q == 0:
        return np.float32(0.0)
    c0 = np.float32(float(q))
    best = None
    for cand in (np.nextafter(c0, np.float32(-np.inf)), c0, np.nextafter(c0, np.float32(np.inf))):
        if not np.isfinite(cand):
            continue
        d = abs(Fraction(float(cand)) - q)
        even = (int(np.float32(cand).view(np.uint32)) & 1) == 0
        key = (d, not even)
        if best is None or key < best[0]:
            best = (key, cand)
    return np.float32(best[1])


def fmaf(a, b, acc):
    from fractions import Fraction
    return _round_f32_exact(Fraction(float(a)) * Fraction(float(b)) + Fraction(float(acc)))


def chk_finalize_trtllm(c, r):
    y = c.value("y").astype(np.float32)
    m = c.raw("unpermuted_row_to_permuted_row").astype(np.int64)
    ids = c.raw("topk_ids").astype(np.int64)
    T, k = ids.shape
    first = c.policy["first_expert"]
    L = c.policy["num_local_experts"]
    w = c.raw("topk_weights").astype(np.float32) if c.has("topk_weights") else np.ones((T, k), np.float32)
    bias = c.raw("bias").astype(np.float32) if c.has("bias") else None
    K = y.shape[1]
    out = np.zeros((T, K), np.float32)
    for t in range(T):
        acc = np.zeros(K, np.float32)
        for j in range(k):
            e = ids[t, j]
            if not (first <= e < first + L):
                continue
            row = y[m[j * T + t]]
            s = row + bias[e - first] if bias is not None else row  # f32 add
            acc = np.array([fmaf(w[t, j], s[i], acc[i]) for i in range(K)], np.float32)
        out[t] = acc
    expect_stored("out", c, "out", out)
    r.note("TRT-LLM finalize fmaf(w, y%s, acc) over local slots, one RNE store EXACT"
           % (" + bias" if bias is not None else ""))


def chk_ep_reduce_scatter_combine(c, r):
    p = c.value("partial").astype(np.float32)  # [R, R*M, H]
    R = p.shape[0]
    M = p.shape[1] // R
    acc = np.zeros((R, M) + p.shape[2:], np.float32)
    with np.errstate(all="ignore"):
        for q in range(R):  # ranks ascending, f32 adds from 0
            acc = acc + p[q].reshape((R, M) + p.shape[2:])
    expect_stored("out", c, "out", acc)
    r.note("reduce-scatter: f32 sum over %d ranks ascending, one RNE store EXACT" % R)


# ---------------------------------------------------------------------------
# grouped GEMM (gemm.h; vllm_modular.md 5, 6; anchors 3.3-3.5 for the scale
# semantics). The operands are formed as the contract defines them, each an
# exact f32 value here:
#   DEQUANT_F32    A = f32(decode(a) * scale_a), W = f32(decode(w) * scale_w)
#                  (NVFP4: scale = f32(f32(sf) / global), one rounding each)
#   WEIGHT_TO_ACT  A = a as stored, W = RN_act(f32(decode(w) * scale_w))
#   BLOCK_TILES    A, W = the decoded elements; per 128-wide k tile the tile
#                  sum is multiplied by a_scale[p, tile] then w_scale[...]
# The exact product is then computed in float64 (math.fsum of products that
# are exact in float64, or, for tile scales, of float64 products of four
# factors, each off by at most 3 units of 2^-53). The bound on the f32
# result, before the output rounding, is derived:
#   dot:  K fmaf from 0, one rounding each:  |e| <= gamma_K * S,
#         S = sum_k |A_k W_k| (gamma_n = n u / (1 - n u), u = 2^-24);
#   tiles: each term sees at most Kt + 2 + tiles roundings (tile dot, the
#         two scale multiplies, the accumulation over tiles):
#         |e| <= gamma_(Kt + 2 + tiles) * sum |A_k W_k a_s w_s|;
#   bias: one more f32 add: e' = e + u (|v + bias| + e);
#   float64 evaluation here: + gamma64(K + 4) * S (u64 = 2^-53).
# The output rounding is then taken exactly: the stored value must lie in
# [RN_out(v - e), RN_out(v + e)] (RN is monotone, so any f32 result within e
# of v rounds into it); the printed bound is e + ulp_out/2.
# ---------------------------------------------------------------------------

U64 = 2.0 ** -53


def gamma64(n):
    return n * U64 / (1 - n * U64)


def operand_parts(c, spec, qname, sname, gname):
    """(decoded elements float64 [E, N, K], per-element scale float64 or
    None); the scale already includes an NVFP4 global division."""
    elem = spec["elem"]
    if elem in ("int8", "int4"):
        dq = c.raw(qname).astype(np.float64)
    elif elem == "f32":
        dq = c.raw(qname).astype(np.float32).astype(np.float64)
    else:
        dq = c.value(qname)
    qshape = tuple(c.tensors[qname]["shape"])
    X = dq.reshape(as_matrices(dq).shape)
    if spec["gran"] == "none":
        return X, None
    E_, R, C = scale_geometry(spec, qshape)
    sdt = c.dtype(sname)
    lin = unlayout_scale(spec, c.raw(sname), E_, R, C)
    if sdt == "e8m0" or spec.get("layout") == "ue8m0_pack4":
        sv = e8m0_value(lin)
    elif sdt == "e4m3":
        sv = fmt_decode("e4m3", lin)
    else:
        sv = lin.astype(np.float32).astype(np.float64)
    with np.errstate(all="ignore"):
        if spec["rule"] == "nvfp4" and spec.get("use_global_scale"):
            g = c.raw(gname).astype(np.float32).reshape(-1)
            g = g.reshape(E_, 1, 1) if g.size == E_ else g.reshape(1, 1, 1)
            sv = (sv.astype(np.float32) / g).astype(np.float64)
    N, K = X.shape[1], X.shape[2]
    if spec["gran"] == "block":
        rows, cols = np.arange(N) // spec["block_n"], np.arange(K) // spec["group_k"]
    elif spec["gran"] == "tensor":
        rows, cols = np.zeros(N, int), np.zeros(K, int)
    elif spec["gran"] == "row":
        rows, cols = np.arange(N), np.zeros(K, int)
    else:
        rows, cols = np.arange(N), np.arange(K) // spec["group_k"]
    return X, sv[:, rows][:, :, cols]


def dequant_f32(X, S):
    if S is None:
        return X
    with np.errstate(all="ignore"):
        return (X * S).astype(np.float32).astype(np.float64)  # exact product, one f32 rounding


def chk_grouped_gemm(c, r):
    import math
    pol = c.policy
    num = pol["numerics"]
    aspec, wspec = pol["act_spec"], pol["weight_spec"]
    rexp = c.raw("row_expert").astype(np.int64)
    Xa, Sa = operand_parts(c, aspec, "a", "a_scale", "a_global")
    Xw, Sw = operand_parts(c, wspec, "w", "w_scale", "w_global")
    A, Sa = Xa[0], (Sa[0] if Sa is not None else None)  # [P, K]
    P, K = A.shape
    E, N, _ = Xw.shape
    bias = c.raw("bias").astype(np.float32).astype(np.float64) if c.has("bias") else None
    odt = c.dtype("out")
    v = np.zeros((P, N))
    e = np.zeros((P, N))
    if num == "dequant_f32":
        A = dequant_f32(A[None], None if Sa is None else Sa[None])[0]
        W = dequant_f32(Xw, Sw)
    elif num == "weight_to_act":
        adt = aspec["elem"]
        W = to_storage(adt, dequant_f32(Xw, Sw).astype(np.float32)).astype(np.float64)
    elif num == "block_tiles":
        W = Xw
        Kt = aspec.get("group_k", 128)
        tiles = -(-K // Kt)
    else:
        raise NotCovered("GEMM numerics %s" % num)
    U = 2.0 ** -24
    with np.errstate(all="ignore"):
        for p in range(P):
            ex = rexp[p]
            if ex < 0:
                continue
            for n in range(N):
                if num == "block_tiles":
                    terms = A[p] * W[ex, n] * Sa[p] * Sw[ex, n]
                    S = float(np.sum(np.abs(terms)))
                    v[p, n] = math.fsum(terms)
                    e[p, n] = gamma(Kt + 2 + tiles) * S + gamma64(K + 4) * S
                else:
                    prods = A[p] * W[ex, n]  # exact in float64 (24 + 24 bits)
                    S = float(np.sum(np.abs(prods)))
                    v[p, n] = math.fsum(prods)
                    e[p, n] = gamma(K) * S + gamma64(K + 4) * S
                if bias is not None:
                    v[p, n] += bias[ex, n]
                    e[p, n] = e[p, n] + U * (abs(v[p, n]) + e[p, n]) + gamma64(2) * abs(v[p, n])
    gold = c.value("out") if odt != "f32" else c.raw("out").astype(np.float32).astype(np.float64)
    if not np.isfinite(v).all():
        raise NotCovered("non-finite exact products (no bound derived for them)")
    with np.errstate(all="ignore"):
        lo = rn_out(odt, v - e)
        hi = rn_out(odt, v + e)
    ok = (gold >= lo) & (gold <= hi)
    if not ok.all():
        i = tuple(int(t) for t in np.argwhere(~ok)[0])
        raise Disagree("out%s: golden %r, exact %r, derived f32 bound %.3g -> [%r, %r] (%d of %d outside)"
                       % (list(i), float(gold[i]), float(v[i]), float(e[i]), float(lo[i]), float(hi[i]),
                          int((~ok).sum()), ok.size))
    d = np.abs(gold - v)
    bnd = e + ulp_out(odt, v) / 2 if odt != "f32" else e
    share = np.where(bnd > 0, d / np.where(bnd > 0, bnd, 1.0), 0.0)
    j = np.unravel_index(np.argmax(share), share.shape)
    r.note("grouped GEMM %s (%s x %s%s) float64 vs gamma_K bound, RN to %s"
           % (num, aspec["elem"], wspec["elem"], " + bias" if bias is not None else "", odt))
    r.bound("out", float(share[j]), float(d[j]), float(bnd[j]))


# ---------------------------------------------------------------------------
# driver
# ---------------------------------------------------------------------------

# Recorded disagreements (the waiver list of anchors 6.4 item 6): each is a
# real difference between the reference and this reading of the anchors,
# investigated and reported, kept visible in every run. They do not fail the
# default run (--strict makes them fail); one that starts to agree does
# fail, so the list cannot go stale.
# Disagreements found and not yet settled, each with its reason; empty when
# every covered case agrees (an entry that starts agreeing fails as stale).
# relu2(NaN) was one: the reference gave 0, torch's relu keeps NaN; the
# reference now keeps it (act.h).
KNOWN_DISAGREEMENTS = {}

HANDLERS = {
    "align_block_size": chk_align_block_size,
    "align_batched": chk_align_batched,
    "sort_ck": chk_sort_ck,
    "maps_trtllm": chk_maps_trtllm,
    "route": chk_route,
    "quantize": chk_quantize,
    "dequantize": chk_dequantize,
    "activation": chk_activation,
    "forward": chk_forward,
    "permute_rows": chk_permute_rows,
    "unpermute_rows": chk_unpermute_rows,
    "expand_trtllm": chk_expand_trtllm,
    "batched_scatter": chk_batched_scatter,
    "permute_grouped": chk_permute_grouped,
    "war_noop": chk_war_noop,
    "war_contiguous": chk_war_contiguous,
    "war_naive_batched": chk_war_naive_batched,
    "finalize_trtllm": chk_finalize_trtllm,
    "ep_allgather_dispatch": chk_ep_allgather_dispatch,
    "ep_reduce_scatter_combine": chk_ep_reduce_scatter_combine,
    "grouped_gemm": chk_grouped_gemm,
}


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--golden", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden"))
    ap.add_argument("--filter", default="")
    ap.add_argument("--quiet", action="store_true", help="print only disagreements and the summary")
    ap.add_argument("--strict", action="store_true", help="recorded (known) disagreements fail too")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    try:
        names = sorted(n for n in os.listdir(args.golden)
                       if os.path.isfile(os.path.join(args.golden, n, "case.json")))
    except OSError as e:
        sys.stderr.write("crosscheck: cannot read golden directory %s: %s\n" % (args.golden, e.strerror))
        return 3
    names = [n for n in names if args.filter in n]
    if not names:
        sys.stderr.write("crosscheck: no golden case in %s matches '%s'\n" % (args.golden, args.filter))
        return 3
    agree, disagree, uncovered, known, stale = [], [], [], [], []
    for n in names:
        try:
            c = Case(args.golden, n)
        except (OSError, ValueError, KeyError) as e:
            print("%-58s %-9s unreadable case.json: %s" % (n, "DISAGREE", e))
            disagree.append(n)
            continue
        h = HANDLERS.get(c.kind)
        r = Result()
        try:
            if h is None:
                raise NotCovered("kind '%s' has no independent model here" % c.kind)
            h(c, r)
        except NotCovered as e:
            uncovered.append(n)
            if not args.quiet:
                print("%-58s %-9s %s" % (n, "not covered", e))
            continue
        except Disagree as e:
            if n in KNOWN_DISAGREEMENTS:
                known.append(n)
                print("%-58s %-9s %s [recorded: %s]" % (n, "DISAGREE", e, KNOWN_DISAGREEMENTS[n]))
            else:
                disagree.append(n)
                print("%-58s %-9s %s" % (n, "DISAGREE", e))
            continue
        except (OSError, ValueError, KeyError, IndexError) as e:
            disagree.append(n)
            print("%-58s %-9s cannot check: %s: %s" % (n, "DISAGREE", type(e).__name__, e))
            continue
        if n in KNOWN_DISAGREEMENTS:
            stale.append(n)
            print("%-58s %-9s recorded as a known disagreement but now agrees: update KNOWN_DISAGREEMENTS"
                  % (n, "STALE"))
            continue
        agree.append(n)
        if not args.quiet:
            tail = "; " + r.worst[1] if r.worst else ""
            print("%-58s %-9s %s%s" % (n, "agree", "; ".join(r.checked), tail))
    print("crosscheck summary: %d cases, %d covered: %d agree, %d disagree (%d new, %d recorded), "
          "%d stale records; %d not covered"
          % (len(names), len(agree) + len(disagree) + len(known) + len(stale), len(agree),
             len(disagree) + len(known), len(disagree), len(known), len(stale), len(uncovered)))
    kinds = sorted(set(Case(args.golden, n).kind for n in uncovered))
    if kinds:
        print("not covered kinds: %s" % ", ".join(kinds))
    return 1 if (disagree or stale or (args.strict and known)) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
