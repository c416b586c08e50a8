/* moe-bench's device grid, the output side: the table on stdout and the
 * "bench-gpu" JSON, one point per (shape, M, scheme,
 * implementation), skipped and failed points included with their reason.
 * A point's floor is max(bytes / read ceiling, flops / dense ceiling of
 * its scheme's precision), from the ceilings of the same run. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "bench_gpu_internal.h"
#include "cuda.h"
#include "moe_git_rev.h" /* MOE_GIT_REV: the revision this tool was built from (Makefile) */

/* JSON string (a local copy: the CUDA archive links after combos/, whose
 * cli_json_str it cannot reach) */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

static void json_num(FILE *f, const char *key, double v, int ok)
{
    if (ok && isfinite(v)) fprintf(f, ",\"%s\":%.6g", key, v);
    else fprintf(f, ",\"%s\":null", key);
}

static double floor_us(const moe_bg_run *R, const moe_bg_point *p)
{
    int fp8 = strncmp(moe_scheme_name(p->scheme), "fp8", 3) == 0;
    double dense = fp8 ? R->ceil.fp8_tflops : R->ceil.bf16_tflops;
    if (R->ceil.read_tbs <= 0.0 || dense <= 0.0) return -1.0;
    double tm = p->bytes / R->ceil.read_tbs * 1e-6, tc = p->flops / dense * 1e-6;
    return tm > tc ? tm : tc;
}

void moe_bg_emit(moe_bg_run *R, moe_bg_point *p)
{
    int ok = !strcmp(p->status, "ok");
    double fl = floor_us(R, p), tbs = p->bytes / p->median_us * 1e-6, tf = p->flops / p->median_us * 1e-6;
    const char *sn = moe_scheme_name(p->scheme);
    if (ok) {
        fprintf(R->out, "  %-14s %6d %-24s %-17s %11.1f %7.2f %8.1f", p->sh->name, p->M, sn, p->impl, p->median_us, tbs, tf);
        if (fl > 0) fprintf(R->out, " %6.0f%%", 100.0 * fl / p->median_us);
        else fprintf(R->out, " %7s", "-");
        if (p->clock_mhz > 0) fprintf(R->out, " %5.0f MHz", p->clock_mhz);
        if (p->has_check && p->check >= 0.0) fprintf(R->out, "  check %.1e", p->check);
        else if (p->has_check) fprintf(R->out, "  unchecked");
        fputc('\n', R->out);
    } else fprintf(R->out, "  %-14s %6d %-24s %-17s %s: %s\n", p->sh->name, p->M, sn, p->impl, p->status, p->why);
    if (!strcmp(p->status, "failed")) R->failed = 1;
    FILE *f = R->json;
    if (!f) return;
    fprintf(f, "%s\n  {\"shape\":", R->npoints++ ? "," : "");
    json_str(f, p->sh->name);
    fprintf(f, ",\"E\":%d,\"k\":%d,\"H\":%d,\"I\":%d,\"M\":%d,\"scheme\":\"%s\",\"routing\":\"%s\",\"impl\":\"%s\","
               "\"status\":\"%s\"",
            p->sh->E, p->sh->k, p->sh->H, p->sh->I, p->M, sn, R->o->skew ? "skew" : "uniform", p->impl, p->status);
    if (!ok) fputs(",\"why\":", f), json_str(f, p->why);
    json_num(f, "median_us", p->median_us, ok), json_num(f, "min_us", p->min_us, ok);
    fprintf(f, ",\"reps\":%d,\"touched_experts\":%d,\"bytes\":%.0f,\"flops\":%.0f", ok ? p->reps : 0, p->touched,
            p->bytes, p->flops);
    json_num(f, "tbs", tbs, ok), json_num(f, "tflops", tf, ok);
    json_num(f, "sm_clock_mhz", p->clock_mhz, ok && p->clock_mhz > 0);
    json_num(f, "floor_us", fl, fl > 0), json_num(f, "share_of_floor", fl / p->median_us, ok && fl > 0);
    if (p->has_check) {
        if (p->check >= 0.0 && isfinite(p->check)) fprintf(f, ",\"check\":{\"rel_l2\":%.6g", p->check);
        else fputs(",\"check\":{\"rel_l2\":null", f);
        if (p->check_why[0]) fputs(",\"why\":", f), json_str(f, p->check_why);
        fputc('}', f);
    }
    if (p->note[0]) fputs(",\"note\":", f), json_str(f, p->note);
    fputc('}', f);
    fflush(f);
}

void moe_bg_point_set(moe_bg_point *p, const char *status, const char *fmt, const char *msg)
{
    p->status = status;
    snprintf(p->why, sizeof p->why, fmt, msg);
}

static void ceil_json(FILE *f, const char *key, double v, const char *why)
{
    json_num(f, key, v, v > 0.0);
    if (v > 0.0 || !why[0]) return;
    fprintf(f, ",\"%s_why\":", key);
    json_str(f, why);
}

void moe_bg_header(moe_bg_run *R, const moe_bg_cublas *cb)
{
    char rt[160] = "?", dv[160] = "?", gpu[160] = "no device";
    moe_cuda_describe(rt, dv, gpu, sizeof gpu);
    const moe_bg_ceilings *c = &R->ceil;
    const moe_bench_gpu_opts *o = R->o;
    fprintf(R->out, "moe-bench: cuda-fast device grid on %s, CUDA runtime %s, driver %s, cuBLAS %s\n", gpu, rt, dv,
            cb->ok ? cb->version : "not loaded");
    char v[6][32];
    const double vals[6] = {c->read_tbs, c->copy_tbs, c->bf16_tflops, c->bf16_4096, c->bf16_8192, c->fp8_tflops};
    for (int i = 0; i < 6; i++)
        if (vals[i] > 0.0) snprintf(v[i], sizeof v[i], i < 2 ? "%.2f" : "%.0f", vals[i]);
        else snprintf(v[i], sizeof v[i], "n/a");
    fprintf(R->out, "ceilings: read %s TB/s, copy %s TB/s, bf16 dense %s TFLOP/s (4096^3 %s, 8192^3 %s), fp8 dense %s "
                    "TFLOP/s, each after %d ms of its own runs\n", v[0], v[1], v[2], v[3], v[4], v[5],
            o->warmup > 0 ? o->warm_ms : 0);
    /* the clocks and bursts measured; one not measured prints n/a */
    char b[4][32];
    const double extra[4] = {c->bf16_clock, c->fp8_clock, c->bf16_burst, c->fp8_burst};
    for (int i = 0; i < 4; i++)
        if (extra[i] > 0.0) snprintf(b[i], sizeof b[i], "%.0f", extra[i]);
        else snprintf(b[i], sizeof b[i], "n/a");
    if (extra[0] > 0.0 || extra[1] > 0.0)
        fprintf(R->out, "  median SM clock while timed: bf16 dense %s MHz, fp8 dense %s MHz\n", b[0], b[1]);
    if (extra[2] > 0.0 || extra[3] > 0.0)
        fprintf(R->out, "  as bursts after a second idle (not divided by): bf16 dense %s, fp8 dense %s TFLOP/s\n", b[2],
                b[3]);
    const char *whys[4] = {c->read_why, c->copy_why, c->bf16_why, c->fp8_why};
    for (int i = 0; i < 4; i++)
        if (whys[i][0]) fprintf(R->out, "  ceiling not measured: %s\n", whys[i]);
    if (R->clock_why[0]) fprintf(R->out, "  SM clock not sampled: %s\n", R->clock_why);
    fprintf(R->out, "\n  %-14s %6s %-24s %-17s %11s %7s %8s %7s %9s\n", "shape", "M", "scheme", "impl", "median_us",
            "TB/s", "TFLOP/s", "floor", "SM clock");
    FILE *f = R->json;
    if (!f) return;
    fputs("{\"type\":\"bench-gpu\",\"meta\":{\"tool\":\"moe-bench\",\"backend\":\"cuda-fast\",\"gpu\":", f);
    json_str(f, gpu);
    fputs(",\"git_rev\":", f), json_str(f, MOE_GIT_REV);
    fputs(",\"cuda_runtime\":", f), json_str(f, rt), fputs(",\"cuda_driver\":", f), json_str(f, dv);
    fputs(",\"cublas\":", f);
    if (cb->ok) json_str(f, cb->version);
    else fputs("null", f);
    fputs(",\"clock\":", f);
    if (R->clock_why[0]) fputs("null,\"clock_why\":", f), json_str(f, R->clock_why);
    else fputs("\"nvml\"", f);
    fprintf(f, ",\"seed\":%llu,\"skew\":%d,\"reps\":%d,\"warmup\":%d,\"warm_ms\":%d,\"sets\":%d,\"peers\":\"%s\","
               "\"budget_s\":%g,\"check_rel_l2\":%g,\"ceilings\":{\"read_bytes\":%zu,\"copy_bytes\":%zu",
            (unsigned long long)o->seed, o->skew, o->reps, o->warmup, o->warmup > 0 ? o->warm_ms : 0, MOE_BG_SETS,
            o->peer_cublas ? "cublas" : "none", MOE_BG_BUDGET_S, MOE_BG_CHECK_TOL, (size_t)4 << 30, (size_t)4 << 30);
    ceil_json(f, "read_tbs", c->read_tbs, c->read_why), ceil_json(f, "copy_tbs", c->copy_tbs, c->copy_why);
    ceil_json(f, "bf16_dense_tflops", c->bf16_tflops, c->bf16_why);
    json_num(f, "bf16_dense_tflops_4096", c->bf16_4096, c->bf16_4096 > 0.0);
    json_num(f, "bf16_dense_tflops_8192", c->bf16_8192, c->bf16_8192 > 0.0);
    ceil_json(f, "fp8_dense_tflops", c->fp8_tflops, c->fp8_why);
    json_num(f, "bf16_dense_burst_tflops", c->bf16_burst, c->bf16_burst > 0.0);
    json_num(f, "fp8_dense_burst_tflops", c->fp8_burst, c->fp8_burst > 0.0);
    json_num(f, "bf16_dense_clock_mhz", c->bf16_clock, c->bf16_clock > 0.0);
    json_num(f, "fp8_dense_clock_mhz", c->fp8_clock, c->fp8_clock > 0.0);
    fputs(",\"fp8_fast_accum\":true}},\"points\":[", f);
}
