#!/usr/bin/env python3
"""The torch peer of moe-bench's cuda-fast backend: a whole MoE experts layer
as a torch user writes it, timed on the GPU (issue 8; JSON "bench-gpu",
reports/SCHEMA.md).

    python3 reports/torch_peer.py [--shape LIST|all] [--m LIST] [--scheme LIST]
        [--seed N] [--skew] [--reps N] [--warmup N] [--warm-ms N] [--json FILE] [--dry-run]

Routing, inputs, counts and timing follow the definitions moe-bench uses
(the same routing generator, byte and FLOP counts, rotation over four input
sets, warm-up by time (--warm-ms, 500 ms as moe-bench's) and by count, then
CUDA-event timed repetitions), so the two producers measure the same problem
under the same power state and bench_merge.py can put them side by side.

Timed per repetition, routing given (ids, weights already on the GPU):
  stable sort of the flattened ids; token of each sorted slot (index // k);
  per-expert row ends by searchsorted on the sorted ids; gather x rows;
  torch._grouped_mm(xs, w1^T, offs) -> [Mk, 2I]; gated activation; second
  _grouped_mm; router weights; scatter back; sum of the k slots in f32, bf16.
fp8_wchannel_atoken runs torch._scaled_grouped_mm (fp8 e4m3 rowwise: per-token
activation scales computed in the timed region, per-output-channel weight
scales computed once); fp8_wtensor_atensor runs the same kernel with the
per-tensor scales broadcast to its rowwise vectors (torch has no tensorwise
grouped kernel); fp8_wblock128_agroup128 is skipped (no blockwise grouped
kernel on SM90). Each pipeline is captured in a CUDA graph per input set when
capture works ("graph": true, the replays are timed), else timed eagerly.

Why searchsorted and not bincount + cumsum: torch.bincount on CUDA reads the
input's max back to the host (a synchronization), which breaks graph capture
and stalls the launch queue; searchsorted over the already sorted ids gives
the same cumulative row ends in one kernel without a sync.

--dry-run prints the plan (routing, touched experts, bytes, FLOPs per point)
and needs no torch: it runs anywhere.
"""

import argparse
import ctypes
import json
import statistics
import struct
import sys
import time

SHAPES = {  # name: (E, k, H, I, activation); w1 [E, 2I, H] (I gate rows, then I up rows), w2 [E, H, I]
    "deepseek-v3": (256, 8, 7168, 2048, "silu"),
    "mixtral-8x7b": (8, 2, 4096, 14336, "silu"),
    "qwen3-30b-a3b": (128, 8, 2048, 768, "silu"),
    "gpt-oss-120b": (128, 4, 2880, 2880, "swigluoai"),
}
SWIGLUOAI_ALPHA, SWIGLUOAI_LIMIT = 1.702, 7.0
SCHEMES = ("bf16", "fp8_wtensor_atensor", "fp8_wchannel_atoken", "fp8_wblock128_agroup128", "int8_wchannel_atoken",
           "w4a16_g128", "mxfp4_w4a16")
GRID_M = (1, 16, 64, 256, 1024, 4096, 16384)
SETS = 4                 # input sets rotated through (weights shared: they already exceed L2)
POINT_BUDGET_US = 2.0e6  # timed repetitions are cut so one point stays under about 2 s
DENSE_N = 8192           # the dense ceilings: one N^3 GEMM
FP8_MAX = 448.0          # largest finite e4m3

MASK64 = (1 << 64) - 1


# ------------------------------------------------------- shared definitions

def mix64(z):
    """splitmix64's finalizer, mod 2^64: the routing generator moe-bench uses."""
    z = (z + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


F32_005 = f32(0.05)


def routing(seed, M, E, k, skew):
    """ids [M][k] (distinct per token) and weights [M][k] (f32 values) of
    the shared generator. Token t's row depends on t alone, not on M, so the
    largest M's lists serve every smaller M as a prefix."""
    key = mix64(seed)
    wkey = key ^ 0x5555555555555555
    ids, ws = [], []
    for t in range(M):
        chosen = [0] if (skew and t % 2 == 0) else []
        a = 0
        while len(chosen) < k:
            e = mix64(key ^ ((t << 16) | a)) % E
            a += 1
            if e not in chosen:
                chosen.append(e)
        ids.append(chosen)
        # 0.05f + (float)(u >> 40) * 2^-24 in f32 arithmetic: the quotient is
        # exact, the sum rounds once, as in C
        ws.append([f32(F32_005 + (mix64(wkey ^ ((t << 16) | j)) >> 40) / 16777216.0) for j in range(k)])
    return ids, ws


def scale_bytes(scheme, E_touched, H, I):
    if scheme in ("fp8_wchannel_atoken", "int8_wchannel_atoken"):
        return E_touched * (2 * I + H) * 4
    if scheme == "fp8_wblock128_agroup128":
        c = lambda a: -(-a // 128)
        return E_touched * (c(2 * I) * c(H) + c(H) * c(I)) * 4
    if scheme in ("w4a16_g128", "mxfp4_w4a16"):
        g, b = (128, 4) if scheme == "w4a16_g128" else (32, 1)
        return E_touched * (2 * I * (H // g) + H * (I // g)) * b
    return 0


def counts(scheme, ids, M, k, H, I):
    """touched experts, bytes and FLOPs of one point (set 0's routing)."""
    touched = len({e for row in ids[:M] for e in row})
    eb = 2 if scheme == "bf16" else 0.5 if scheme in ("w4a16_g128", "mxfp4_w4a16") else 1
    wb = int(touched * 3 * H * I * eb) + scale_bytes(scheme, touched, H, I)
    return touched, wb + 2 * M * H * 2, 2 * M * k * 3 * H * I


# -------------------------------------------------------------------- CLI

def parse_list(text, what, allowed=None):
    items = [s.strip() for s in text.split(",") if s.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"{what}: empty list")
    if allowed is not None:
        if items == ["all"]:
            return list(allowed)
        bad = [s for s in items if s not in allowed]
        if bad:
            raise argparse.ArgumentTypeError(f"{what}: unknown {', '.join(bad)} (one of {', '.join(allowed)})")
    return items


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="torch_peer.py",
        description="Time the torch pipeline of a MoE experts layer (torch._grouped_mm / _scaled_grouped_mm) "
                    "on the shapes and token counts of moe-bench; JSON \"bench-gpu\" (reports/SCHEMA.md).",
        epilog="Exit 0: every point recorded (failed points included); 1: no GPU or no torch (not in "
               "--dry-run); 2: usage error.")
    ap.add_argument("--shape", default="all", metavar="LIST|all",
                    help=f"comma-separated shapes (default all: {', '.join(SHAPES)})")
    ap.add_argument("--m", default=",".join(map(str, GRID_M)), metavar="LIST",
                    help=f"token counts (default {','.join(map(str, GRID_M))})")
    ap.add_argument("--scheme", default=",".join(SCHEMES), metavar="LIST|all",
                    help=f"schemes (default all: {', '.join(SCHEMES)})")
    ap.add_argument("--seed", type=int, default=1, help="routing seed of input set 0 (set s uses seed + s; default 1)")
    ap.add_argument("--skew", action="store_true", help="skewed routing: even tokens choose expert 0 first")
    ap.add_argument("--reps", type=int, default=20, help="timed repetitions per point (default 20; fewer when "
                    "one point would take more than about 2 s)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed runs before timing (default 3)")
    ap.add_argument("--warm-ms", type=int, default=500, metavar="N",
                    help="untimed milliseconds of runs before those, per point and per ceiling (default 500, as "
                         "moe-bench's; 0 to 10000; none with --warmup 0): the GPU's power-capped clock then "
                         "depends on the pipeline timed, not on what ran before it")
    ap.add_argument("--no-graph", action="store_true", help="time eagerly, do not try CUDA-graph capture")
    ap.add_argument("--fp8-group-align", type=int, default=1, metavar="N",
                    help="pad each expert's rows to a multiple of N for _scaled_grouped_mm (default 1: no padding; "
                         "the 2-D x 3-D forward form needs none), counted in the timed region")
    ap.add_argument("--json", metavar="FILE", help="write the points here (else only the log lines)")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and the per-point counts; no torch needed")
    args = ap.parse_args(argv)
    try:
        args.shapes = parse_list(args.shape, "--shape", list(SHAPES))
        args.schemes = parse_list(args.scheme, "--scheme", list(SCHEMES))
        ms = parse_list(args.m, "--m")
        args.ms = sorted({int(m) for m in ms})
        if any(m < 1 for m in args.ms):
            raise ValueError
    except argparse.ArgumentTypeError as e:
        ap.error(str(e))
    except ValueError:
        ap.error(f"--m: positive integers expected, not {args.m!r}")
    if args.seed < 0 or args.reps < 1 or args.warmup < 0 or args.fp8_group_align < 1:
        ap.error("--seed >= 0, --reps >= 1, --warmup >= 0 and --fp8-group-align >= 1 are required")
    if not 0 <= args.warm_ms <= 10000:
        ap.error(f"--warm-ms must be milliseconds in [0, 10000], not {args.warm_ms}")
    return args


def warm_ms(args):
    """the warm-up by time in effect: none with --warmup 0 (as moe-bench)"""
    return args.warm_ms if args.warmup > 0 else 0


def point_base(shape, M, scheme, args, cnt):
    E, k, H, I, _ = SHAPES[shape]
    touched, nbytes, flops = cnt
    return {"shape": shape, "E": E, "k": k, "H": H, "I": I, "M": M, "scheme": scheme,
            "routing": "skew" if args.skew else "uniform", "impl": impl_of(scheme),
            "touched_experts": touched, "bytes": nbytes, "flops": flops}


def impl_of(scheme):
    return "torch-grouped-mm" if scheme == "bf16" else "torch-scaled-grouped-mm"


def skip_reason(scheme):
    if scheme == "fp8_wblock128_agroup128":
        return "torch has no blockwise-scaled grouped GEMM on SM90 (_scaled_grouped_mm: rowwise fp8 or MXFP8 on SM100)"
    if scheme == "int8_wchannel_atoken":
        return "torch has no grouped int8 GEMM (_scaled_grouped_mm takes fp8; _int_mm is one dense matrix)"
    if scheme in ("w4a16_g128", "mxfp4_w4a16"):
        return "torch has no grouped 4-bit weight GEMM on SM90 (_weight_int4pack_mm is one dense matrix)"
    return None


def dry_run(args):
    mmax = max(args.ms)
    print(f"torch_peer.py plan: shapes {','.join(args.shapes)}; M {','.join(map(str, args.ms))}; "
          f"schemes {','.join(args.schemes)}; seed {args.seed}; routing {'skew' if args.skew else 'uniform'}; "
          f"{SETS} input sets; {warm_ms(args)} ms and {args.warmup} runs of warm-up, then up to {args.reps} "
          f"timed runs")
    print(f"{'shape':<14} {'M':>6} {'scheme':<24} {'impl':<24} {'touched':>7} {'bytes':>14} {'GFLOP':>10}  status")
    reasons = {}
    for shape in args.shapes:
        E, k, H, I, _ = SHAPES[shape]
        ids, _ = routing(args.seed, mmax, E, k, args.skew)
        for scheme in args.schemes:
            for M in args.ms:
                t, b, f = counts(scheme, ids, M, k, H, I)
                why = skip_reason(scheme)
                if why:
                    reasons[scheme] = why
                print(f"{shape:<14} {M:>6} {scheme:<24} {impl_of(scheme):<24} {t:>7} {b:>14} {f / 1e9:>10.3f}  "
                      f"{'skipped' if why else 'run'}")
    for scheme, why in reasons.items():
        print(f"skipped {scheme}: {why}")
    return 0


# ------------------------------------------------------------ on the GPU

def err_text(e):
    s = f"{type(e).__name__}: {e}".strip().splitlines()
    return (s[0] if s else type(e).__name__)[:400]


class Clock:
    """The SM clock through NVML (the driver's libnvidia-ml.so.1, by ctypes:
    no pynvml needed), as moe-bench samples it (bench_gpu_clock.cu): each
    point records the median of samples taken while its timed runs execute.
    Without NVML the points carry no clock and `why` says so."""

    def __init__(self, torch):
        self.fn, self.dev, self.why = None, ctypes.c_void_p(), None
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            rc = lib.nvmlInit_v2()
            if rc != 0:
                raise OSError(f"nvmlInit_v2: NVML status {rc}")
            p = torch.cuda.get_device_properties(torch.cuda.current_device())
            bus = f"{p.pci_domain_id:04x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0".encode()
            rc = lib.nvmlDeviceGetHandleByPciBusId_v2(ctypes.c_char_p(bus), ctypes.byref(self.dev))
            if rc != 0:
                raise OSError(f"nvmlDeviceGetHandleByPciBusId_v2({bus.decode()}): NVML status {rc}")
            self.fn = lib.nvmlDeviceGetClockInfo
        except (OSError, AttributeError) as e:
            self.why = err_text(e)

    def mhz(self):
        """the SM clock now (NVML_CLOCK_SM), or None"""
        v = ctypes.c_uint(0)
        if self.fn is None or self.fn(self.dev, 1, ctypes.byref(v)) != 0 or not v.value:
            return None
        return v.value


class Bench:
    def __init__(self, torch, args):
        self.torch, self.args = torch, args
        self.dev = torch.device("cuda")
        self.pool = None
        self.clock, self.last_clock = Clock(torch), None

    # -- timing ----------------------------------------------------------
    def time_calls(self, calls, warmup, reps, warm_s=None):
        """calls[i % len(calls)]() per run: runs for warm_s seconds (default
        --warm-ms), each waited for, and `warmup` runs (none of either when
        warmup is 0), then each timed run between two CUDA events; median
        and min in µs and the reps timed. The warm-up by time is moe-bench's
        (bench_gpu_internal.h, moe_bg_time): the H200 lowers its clock to
        hold its power cap, so a short timing window measures what ran in
        the second before it unless the pipeline timed has filled it."""
        torch = self.torch
        ev = lambda: torch.cuda.Event(enable_timing=True)
        warm_s = warm_ms(self.args) / 1e3 if warm_s is None else warm_s
        t0 = time.perf_counter()
        i = 0
        while warmup and warm_s > 0 and time.perf_counter() - t0 < warm_s:
            calls[i % len(calls)]()
            torch.cuda.synchronize()
            i += 1
        t0 = time.perf_counter()
        for i in range(warmup):
            calls[i % len(calls)]()
        torch.cuda.synchronize()
        per = (time.perf_counter() - t0) / max(warmup, 1) * 1e6
        if warmup and per > 0:
            reps = max(3, min(reps, int(POINT_BUDGET_US / per)))
        starts, ends = [ev() for _ in range(reps)], [ev() for _ in range(reps)]
        clocks, last = [], -1.0

        def sample():   # at most one a millisecond, while the timed runs execute
            nonlocal last
            now = time.perf_counter()
            if now - last >= 1e-3:
                v = self.clock.mhz()
                if v:
                    clocks.append(v)
                last = now
        for i in range(reps):
            starts[i].record()
            calls[i % len(calls)]()
            ends[i].record()
            sample()
        while self.clock.fn is not None and not ends[-1].query():
            sample()
            time.sleep(2e-4)
        torch.cuda.synchronize()
        us = [s.elapsed_time(e) * 1000.0 for s, e in zip(starts, ends)]
        self.last_clock = statistics.median(clocks) if clocks else None
        return statistics.median(us), min(us), reps

    # -- ceilings --------------------------------------------------------
    def dense(self, key, call, flops, out):
        """out[key + "_burst"]: after a second idle and 3 runs (reported,
        never divided by); out[key]: after the warm-up by time, as the points"""
        self.torch.cuda.synchronize()
        time.sleep(1.0)
        med, _, _ = self.time_calls([call], 3, 20, warm_s=0.0)
        out[key.replace("_tflops", "_burst_tflops")] = flops / med / 1e6
        med, _, _ = self.time_calls([call], 3, 20)
        out[key] = flops / med / 1e6
        out[key.replace("_tflops", "_clock_mhz")] = self.last_clock

    def ceilings(self):
        torch, n = self.torch, DENSE_N
        out = {"torch_bf16_dense_tflops": None, "torch_fp8_dense_tflops": None, "torch_bf16_dense_burst_tflops": None,
               "torch_fp8_dense_burst_tflops": None, "dense_n": n}
        g = torch.Generator(device=self.dev).manual_seed(12345)
        flops = 2.0 * n * n * n
        try:
            a = torch.randn(n, n, device=self.dev, dtype=torch.bfloat16, generator=g)
            b = torch.randn(n, n, device=self.dev, dtype=torch.bfloat16, generator=g)
            self.dense("torch_bf16_dense_tflops", lambda: a @ b, flops, out)
            a8 = a.to(torch.float8_e4m3fn)
            b8 = b.to(torch.float8_e4m3fn).t()      # column-major, as _scaled_mm wants its second operand
            sa = torch.ones(n, 1, device=self.dev, dtype=torch.float32)
            sb = torch.ones(1, n, device=self.dev, dtype=torch.float32)
            mm = lambda: torch._scaled_mm(a8, b8, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16,
                                          use_fast_accum=True)
            self.dense("torch_fp8_dense_tflops", mm, flops, out)
        except Exception as e:  # a missing op or an old GPU: the ceiling stays null, the reason is kept
            out["note"] = err_text(e)
        finally:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        return out

    # -- weights ---------------------------------------------------------
    def weights_bf16(self, shape):
        torch = self.torch
        E, _, H, I, _ = SHAPES[shape]
        g = torch.Generator(device=self.dev).manual_seed(1000 + self.args.seed)
        w1 = torch.randn(E, 2 * I, H, device=self.dev, dtype=torch.bfloat16, generator=g).mul_(H ** -0.5)
        w2 = torch.randn(E, H, I, device=self.dev, dtype=torch.bfloat16, generator=g).mul_(I ** -0.5)
        return {"w1": w1, "w2": w2}

    def weights_fp8(self, wb, per_tensor):
        """e4m3 weights and their f32 scales broadcast to [E, N] (the kernel's
        rowwise layout), one expert at a time so the f32 temporaries stay small."""
        torch = self.torch
        out = {}
        for name in ("w1", "w2"):
            w = wb[name]
            E, N, _ = w.shape
            q = torch.empty(w.shape, device=self.dev, dtype=torch.float8_e4m3fn)
            s = torch.empty(E, N, device=self.dev, dtype=torch.float32)
            for e in range(E):
                wf = w[e].float()
                amax = wf.abs().amax() if per_tensor else wf.abs().amax(dim=1)
                se = (amax / FP8_MAX).clamp_(min=1e-12)
                s[e] = se
                q[e] = (wf / (se if per_tensor else se[:, None])).clamp_(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
                del wf
            out[name], out[name + "_s"] = q, s
        return out

    # -- the pipelines ---------------------------------------------------
    def pipeline(self, shape, scheme, W):
        """forward(x, ids, w) -> out [M, H] bf16, everything on the device."""
        torch = self.torch
        F = torch.nn.functional
        E, k, H, I, act = SHAPES[shape]
        experts = torch.arange(E, device=self.dev, dtype=torch.int32)
        align = self.args.fp8_group_align if scheme != "bf16" else 1

        def activation(y1):
            g, u = y1[:, :I], y1[:, I:]
            if act == "silu":
                return F.silu(g) * u
            gc = g.clamp(max=SWIGLUOAI_LIMIT)
            uc = u.clamp(-SWIGLUOAI_LIMIT, SWIGLUOAI_LIMIT)
            return (uc + 1) * gc * torch.sigmoid(SWIGLUOAI_ALPHA * gc)

        def quant_rows(a, per_tensor):
            """dynamic e4m3: per row (token / slot) or one scale for the tensor.
            The inf-norm is the amax in one pass (exact in bf16); a / s stays
            within +-448 up to one f32 rounding, which e4m3's round to nearest
            takes back to 448, so no clamp pass."""
            amax = torch.linalg.vector_norm(a, float("inf"), dim=None if per_tensor else 1, keepdim=not per_tensor)
            s = (amax.float() / FP8_MAX).clamp_(min=1e-12)
            q = (a / s).to(torch.float8_e4m3fn)
            return q, (s.expand(a.shape[0]).contiguous() if per_tensor else s.view(-1))

        def layout(ids):
            flat = ids.view(-1)
            sorted_ids, order = torch.sort(flat, stable=True)
            offs = torch.searchsorted(sorted_ids, experts, right=True, out_int32=True)
            return order, order // k, offs

        def combine(y2, order, w, M):
            # slot rows times their router weight, rounded to bf16 (as the
            # fused kernels' GEMM2 epilogue stores them), back in slot order
            # t * k + j; sum() over bf16 accumulates in f32 and rounds once
            y = y2 * w.view(-1)[order].to(torch.bfloat16).unsqueeze(1)
            yu = torch.empty_like(y).index_copy_(0, order, y)
            return yu.view(M, k, H).sum(1)

        if scheme == "bf16":
            w1t, w2t = W["w1"].transpose(-2, -1), W["w2"].transpose(-2, -1)

            def forward(x, ids, w):
                M = x.shape[0]
                order, tok, offs = layout(ids)
                xs = x.index_select(0, tok)
                y1 = torch._grouped_mm(xs, w1t, offs=offs)
                y2 = torch._grouped_mm(activation(y1), w2t, offs=offs)
                return combine(y2, order, w, M)
            return forward

        per_tensor = scheme == "fp8_wtensor_atensor"
        q1t, q2t = W["w1"].transpose(-2, -1), W["w2"].transpose(-2, -1)   # column-major B, as the kernel wants
        s1, s2 = W["w1_s"], W["w2_s"]
        sgm = lambda a, b, sa, sb, offs: torch._scaled_grouped_mm(a, b, sa, sb, offs=offs, out_dtype=torch.bfloat16,
                                                                  use_fast_accum=True)

        def forward(x, ids, w):
            M = x.shape[0]
            order, tok, offs = layout(ids)
            # quantize the M tokens once, then gather the Mk rows (a token's
            # slots share its scale); fp8 rows move as bytes
            xq, sx = quant_rows(x, per_tensor)
            xs = xq.view(torch.uint8).index_select(0, tok).view(torch.float8_e4m3fn)
            sa = sx.index_select(0, tok)
            if align > 1:
                xs, sa, rows, offs = pad_groups(torch, xs, sa, offs, E, align)
            y1 = sgm(xs, q1t, sa, s1, offs)
            if align > 1:   # rows past the last group are never written: keep them out of a tensor amax
                y1 = torch.where(valid_rows(torch, offs, y1.shape[0]), y1, 0.0)
            hq, sh = quant_rows(activation(y1), per_tensor)
            y2 = sgm(hq, q2t, sh, s2, offs)
            if align > 1:
                y2 = y2.index_select(0, rows)
            return combine(y2, order, w, M)
        return forward

    # -- one point -------------------------------------------------------
    def run_point(self, forward, sets, M):
        torch = self.torch
        args = [(x[:M], ids[:M], w[:M]) for x, ids, w in sets]
        calls = [lambda a=a: forward(*a) for a in args]
        for i in range(max(self.args.warmup, 1)):       # eager warm-up: lazy inits happen outside capture
            calls[i % len(calls)]()
        torch.cuda.synchronize()
        graphs, note = None, ""
        if not self.args.no_graph:
            try:
                pool = torch.cuda.graph_pool_handle()    # the sets' graphs replay one after another: one pool
                graphs = []
                for a in args:
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g, pool=pool):
                        out = forward(*a)
                    graphs.append((g, out))
                torch.cuda.synchronize()
                calls = [g.replay for g, _ in graphs]
            except Exception as e:
                graphs = None
                note = "graph capture failed (" + err_text(e) + "); timed eagerly"
                try:
                    torch.cuda.synchronize()
                except Exception:
                    pass
        med, mn, reps = self.time_calls(calls, self.args.warmup, self.args.reps)
        del calls, graphs
        return med, mn, reps, note, self.last_clock


def valid_rows(torch, offs, n):
    """[n, 1] mask of the rows a grouped GEMM with these offsets writes."""
    return (torch.arange(n, device=offs.device) < offs[-1]).unsqueeze(1)


def pad_groups(torch, xs, sa, offs, E, align):
    """Rows of each expert moved to a segment starting at a multiple of
    `align` (zero rows between), without a host sync: the padded buffer has
    the worst-case row count. Returns the padded rows, their scales, the
    padded row of each original row and the padded offsets."""
    n = xs.shape[0]
    cap = n + E * (align - 1)
    ends = offs.long()
    starts = torch.cat([ends.new_zeros(1), ends[:-1]])
    padded = (ends - starts + align - 1) // align * align
    pends = padded.cumsum(0)
    pstarts = pends - padded
    row = torch.arange(n, device=xs.device)
    grp = torch.searchsorted(ends, row, right=True)
    rows = row - starts[grp] + pstarts[grp]
    xp = torch.zeros(cap, xs.shape[1], device=xs.device, dtype=torch.uint8)
    xp.index_copy_(0, rows, xs.view(torch.uint8))
    sp = torch.ones(cap, device=xs.device, dtype=sa.dtype).index_copy_(0, rows, sa)
    return xp.view(torch.float8_e4m3fn), sp, rows, pends.int()


def run_gpu(args):
    try:
        import torch
    except ImportError as e:
        print(f"torch_peer.py: torch is not importable ({e}); --dry-run works without it", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("torch_peer.py: torch sees no CUDA device", file=sys.stderr)
        return 1
    b = Bench(torch, args)
    props = torch.cuda.get_device_properties(0)
    has_gmm, has_sgmm = hasattr(torch, "_grouped_mm"), hasattr(torch, "_scaled_grouped_mm")
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}) on {props.name}, sm_{props.major}{props.minor}, "
          f"{props.multi_processor_count} SMs", flush=True)
    ceil = b.ceilings()
    print("ceilings: " + json.dumps(ceil, sort_keys=True), flush=True)
    meta = {"tool": "torch_peer.py", "torch": torch.__version__, "cuda": torch.version.cuda,
            "gpu": f"{props.name} (sm_{props.major}{props.minor}, {props.multi_processor_count} SMs)",
            "seed": args.seed, "skew": int(args.skew), "reps": args.reps, "warmup": args.warmup,
            "warm_ms": warm_ms(args), "sets": SETS,
            "clock": "nvml" if b.clock.fn is not None else None, "clock_why": b.clock.why,
            "graph": not args.no_graph, "fp8_group_align": args.fp8_group_align,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "ceilings": ceil}
    points = []
    mmax = max(args.ms)
    for shape in args.shapes:
        E, k, H, I, _ = SHAPES[shape]
        t0 = time.perf_counter()
        routes = [routing(args.seed + s, mmax, E, k, args.skew) for s in range(SETS)]
        sets = []
        for s, (ids, ws) in enumerate(routes):
            g = torch.Generator(device=b.dev).manual_seed(args.seed + s)
            sets.append((torch.randn(mmax, H, device=b.dev, dtype=torch.bfloat16, generator=g),
                         torch.tensor(ids, device=b.dev, dtype=torch.int32),
                         torch.tensor(ws, device=b.dev, dtype=torch.float32)))
        print(f"{shape}: routing and inputs for {SETS} sets of {mmax} tokens in {time.perf_counter() - t0:.1f} s",
              flush=True)
        wb, wq, wq_kind = None, None, None
        for scheme in args.schemes:
            base = {M: point_base(shape, M, scheme, args, counts(scheme, routes[0][0], M, k, H, I)) for M in args.ms}
            why = skip_reason(scheme)
            if why is None and not (has_gmm if scheme == "bf16" else has_sgmm):
                why = "torch lacks " + ("_grouped_mm" if scheme == "bf16" else "_scaled_grouped_mm")
            if why:
                points += [dict(base[M], status="skipped", why=why) for M in args.ms]
                continue
            try:
                if wb is None:
                    wb = b.weights_bf16(shape)
                if scheme == "bf16":
                    W = wb
                else:
                    kind = "tensor" if scheme == "fp8_wtensor_atensor" else "channel"
                    if wq_kind != kind:
                        wq = None
                        torch.cuda.empty_cache()
                        wq, wq_kind = b.weights_fp8(wb, kind == "tensor"), kind
                    W = wq
                forward = b.pipeline(shape, scheme, W)
            except Exception as e:
                why = "weights: " + err_text(e)
                points += [dict(base[M], status="failed", why=why) for M in args.ms]
                print(f"{shape} {scheme}: failed: {why}", flush=True)
                torch.cuda.empty_cache()
                continue
            for M in args.ms:
                p = base[M]
                try:
                    med, mn, reps, note, mhz = b.run_point(forward, sets, M)
                    p.update(status="ok", median_us=med, min_us=mn, reps=reps,
                             tbs=p["bytes"] / med / 1e6, tflops=p["flops"] / med / 1e6,
                             graph=not args.no_graph and not note, sm_clock_mhz=mhz)
                    notes = [note] if note else []
                    if scheme == "fp8_wtensor_atensor":
                        notes.append("per-tensor scales broadcast to the rowwise kernel's vectors")
                    if scheme != "bf16" and args.fp8_group_align > 1:
                        notes.append(f"groups padded to {args.fp8_group_align} rows in the timed region")
                    if notes:
                        p["note"] = "; ".join(notes)
                    print(f"{shape} M={M} {scheme}: {med:.1f} us (min {mn:.1f}, {reps} reps, "
                          f"{'graph' if p['graph'] else 'eager'}), {p['tbs']:.2f} TB/s, {p['tflops']:.1f} TFLOP/s"
                          + (f", SM clock {mhz:.0f} MHz" if mhz else ""), flush=True)
                except Exception as e:
                    p.update(status="failed", why=err_text(e))
                    print(f"{shape} M={M} {scheme}: failed: {p['why']}", flush=True)
                    try:
                        torch.cuda.synchronize()
                    except Exception:
                        pass
                points.append(p)
                torch.cuda.empty_cache()
            del forward, W
        del wb, wq, sets, routes
        torch.cuda.empty_cache()
    doc = {"type": "bench-gpu", "meta": meta, "points": points}
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1, sort_keys=True, allow_nan=False)
            f.write("\n")
    ok = sum(p["status"] == "ok" for p in points)
    print(f"torch_peer.py: {len(points)} points: {ok} ok, "
          f"{sum(p['status'] == 'skipped' for p in points)} skipped, "
          f"{sum(p['status'] == 'failed' for p in points)} failed" + (f"; JSON {args.json}" if args.json else ""))
    return 0


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return dry_run(args) if args.dry_run else run_gpu(args)


if __name__ == "__main__":
    sys.exit(main())
