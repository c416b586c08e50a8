/* moe-bench: per-stage and end-to-end times of a modular-kernel pair on
 * each requested backend, side by side in one run, with the CPU ceiling
 * (plain OpenBLAS sgemm on the same per-expert GEMM shapes, f32 operands
 * ready) measured in the same run. Not a test: numbers for the README and
 * the report (reports/SCHEMA.md "bench").
 *
 * Method: the problem (x, uniform random top-k routing from a fixed seed,
 * or skewed with --skew: half the tokens' first expert is expert 0) and
 * the weights (quantized with the scheme) are built once per (shape,
 * scheme, M); each backend runs the pair through a stage timer
 * (include/moe/stage_timer.h) for --warmup runs, then --reps timed runs;
 * every figure is the median over the timed runs. The reference is slow:
 * --ref-reps (default 1) timed runs, no warm-up. The sgemm ceiling times
 * cblas_sgemm over each expert's rows for GEMM1 and GEMM2 with distinct
 * weight buffers per expert (rotating over 8, more than the caches hold),
 * the better of two threading strategies (sgemm_ceiling).
 *
 * --backend cuda-fast is another mode: the device grid of
 * optimized/cuda/bench_gpu.h (shapes x token counts x schemes against the
 * cuBLAS peer and ceilings measured on the GPU). It runs alone; this file
 * only checks its options. The grid lives in the CUDA library, reached
 * through a weak reference, so a build without CUDA (or a program that
 * does not link it) reports the backend as not built, like the lookup of
 * combos/backends.c. */
#include <cblas.h>
#undef I /* <complex.h> through cblas.h; the shapes use I for the intermediate size */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "moe/backends.h"
#include "moe/cli.h"
#include "moe/compat.h"
#include "moe/format.h"
#include "moe/modular.h"
#include "moe/rng.h"
#include "moe/shapes.h"
#include "moe/stage_timer.h"
#include "../optimized/cuda/bench_gpu.h"
#include "moe_git_rev.h" /* MOE_GIT_REV: the revision this tool was built from (Makefile) */

int moe_bench_gpu_run(const moe_bench_gpu_opts *o, FILE *out, FILE *err) __attribute__((weak));

static const char USAGE[] =
    "usage: moe-bench [--backend LIST] [--shape NAME] [--m LIST] [--scheme LIST] [--pair PF:EXPERTS]\n"
    "                 [--reps N] [--warmup N] [--ref-reps N] [--skew] [--seed N] [--json FILE]\n"
    "  Times a modular-kernel pair (default noep:triton_like) per stage and end to end on each\n"
    "  backend (default cpu,ref), with plain OpenBLAS sgemm on the same GEMM shapes (the CPU\n"
    "  ceiling) in the same run. Defaults: --shape qwen3-30b-a3b --m 256 --scheme bf16 --reps 5\n"
    "  --warmup 1 --ref-reps 1. Shapes: deepseek-v3 mixtral-8x7b qwen3-30b-a3b gpt-oss-120b tiny.\n"
    "  exit: 0 ok, 1 a run failed, 2 usage error\n"
    "\n"
    "       moe-bench --backend cuda-fast [--shape LIST|all] [--m LIST] [--scheme LIST] [--skew] [--seed N]\n"
    "                 [--reps N] [--warmup N] [--warm-ms N] [--peers cublas|none] [--json FILE]\n"
    "  The device grid (cuda-fast runs alone): the fast experts path, timed as CUDA graph replays\n"
    "  over 4 rotating input sets, and its atomic variant, beside the cuBLAS grouped-GEMM pipeline\n"
    "  (bf16; whole and GEMMs only), with the read, copy and dense bf16 / fp8 GEMM ceilings measured\n"
    "  at the start; JSON \"bench-gpu\", each point with the median SM clock it ran at (NVML, where the\n"
    "  driver has it). Defaults: --shape all (deepseek-v3 mixtral-8x7b qwen3-30b-a3b\n"
    "  gpt-oss-120b) --m 1,16,64,256,1024,4096,16384 --scheme bf16,fp8_wtensor_atensor,\n"
    "  fp8_wchannel_atoken,fp8_wblock128_agroup128,int8_wchannel_atoken,w4a16_g128,mxfp4_w4a16\n"
    "  --reps 20 --warmup 3 --warm-ms 500 --seed 1 --peers cublas. Every implementation at a point, and\n"
    "  every ceiling, first runs untimed for --warm-ms milliseconds (0 to 10000; none with --warmup 0):\n"
    "  the GPU's power-capped clock then depends on that implementation, not on what ran before it.\n"
    "  Not built or no CUDA device: says so, exit 0, no JSON.\n";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct {
    moe_tensor x, ids, w, q1, s1, g1, q2, s2, g2;
    moe_mk_weights mw;
    int *count; /* rows per expert */
} problem;

static void problem_free(problem *p)
{
    moe_tensor *ts[] = {&p->x, &p->ids, &p->w, &p->q1, &p->s1, &p->g1, &p->q2, &p->s2, &p->g2};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) moe_tensor_free(ts[i]);
    free(p->count);
}

static moe_status quant_weight(const moe_quant_spec *ws, int64_t E, int64_t N, int64_t K, uint64_t seed, uint64_t stream,
                               moe_tensor *q, moe_tensor *s, moe_tensor *g)
{
    int64_t sh[3] = {E, N, K};
    moe_tensor f;
    moe_status st = moe_tensor_alloc(&f, MOE_F32, 3, sh);
    if (st == MOE_OK) st = moe_tensor_fill_normal(&f, seed, stream, 0.0f, 1.0f / sqrtf((float)K));
    if (st == MOE_OK) st = moe_quant_alloc(ws, 3, sh, q, s, g);
    if (st == MOE_OK) st = moe_ref_quantize(ws, &f, NULL, q, ws->gran ? s : NULL, ws->use_global_scale ? g : NULL);
    moe_tensor_free(&f);
    return st;
}

static moe_status problem_make(const moe_shape *sh, moe_scheme sc, int M, int skew, uint64_t seed, problem *p)
{
    memset(p, 0, sizeof *p);
    moe_quant_spec ws, as;
    moe_status st;
    if ((st = moe_scheme_spec(sc, MOE_OPERAND_WEIGHT, &ws)) || (st = moe_scheme_spec(sc, MOE_OPERAND_ACT, &as))) return st;
    moe_dtype xd = as.gran == MOE_GRAN_NONE ? as.elem : MOE_BF16;
    int n1 = (moe_act_is_gated(sh->act) ? 2 : 1) * sh->I, k = sh->k;
    if ((st = moe_tensor_alloc(&p->x, xd, 2, (int64_t[2]){M, sh->H})) ||
        (st = moe_tensor_alloc(&p->ids, MOE_I32, 2, (int64_t[2]){M, k})) ||
        (st = moe_tensor_alloc(&p->w, MOE_F32, 2, (int64_t[2]){M, k})))
        return st;
    moe_tensor xf;
    if ((st = moe_tensor_alloc(&xf, MOE_F32, 2, (int64_t[2]){M, sh->H}))) return st;
    st = moe_tensor_fill_normal(&xf, seed, 1, 0.0f, 1.0f);
    if (st == MOE_OK && xd == MOE_F32) memcpy(p->x.data, xf.data, xf.nbytes);
    else if (st == MOE_OK)
        st = moe_encode_array(xd, xf.data, (size_t)M * sh->H, MOE_POLICY_IEEE_RNE, p->x.data, NULL);
    moe_tensor_free(&xf);
    if (st || (st = moe_rng_topk_ids(p->ids.data, M, k, sh->E, seed, 2, 0, 1))) return st;
    int32_t *id = p->ids.data;
    for (int t = 0; skew && t < M; t += 2) /* half the tokens put expert 0 first (kept distinct) */
        for (int j = 1; j < k; j++)
            if (id[t * k + j] == 0) id[t * k + j] = id[t * k];
    for (int t = 0; skew && t < M; t += 2) id[t * k] = 0;
    for (int i = 0; i < M * k; i++) ((float *)p->w.data)[i] = 0.05f + moe_rng_uniform(seed, 3, (uint64_t)i);
    if (!(p->count = calloc((size_t)sh->E, sizeof(int)))) return moe_fail(MOE_ERR_NOMEM, "bench: counts");
    for (int i = 0; i < M * k; i++) p->count[id[i]]++;
    if ((st = quant_weight(&ws, sh->E, n1, sh->H, seed, 4, &p->q1, &p->s1, &p->g1)) ||
        (st = quant_weight(&ws, sh->E, sh->H, sh->I, seed, 5, &p->q2, &p->s2, &p->g2)))
        return st;
    moe_mk_weights *w = &p->mw;
    w->w1 = &p->q1, w->w1_scale = ws.gran ? &p->s1 : NULL, w->w1_global = ws.use_global_scale ? &p->g1 : NULL;
    w->w2 = &p->q2, w->w2_scale = ws.gran ? &p->s2 : NULL, w->w2_global = ws.use_global_scale ? &p->g2 : NULL;
    return MOE_OK;
}

/* the ceiling: sgemm over each expert's rows, GEMM1 then GEMM2, the
 * better of two ways to use the cores: experts in turn with OpenBLAS
 * threading each call (par = 0), or experts spread over OpenMP threads,
 * each call single-threaded (par = 1; OpenBLAS's OpenMP build runs
 * single-threaded inside a parallel region) */
static double sgemm_pass(const moe_shape *sh, const problem *p, const float *A, const float *W, float *C, size_t cstride,
                         int NB, int par)
{
    int n1 = (moe_act_is_gated(sh->act) ? 2 : 1) * sh->I;
    size_t wa = (size_t)n1 * sh->H, wb = (size_t)sh->H * sh->I;
    double t0 = now_s();
#pragma omp parallel for schedule(dynamic, 1) if (par)
    for (int e = 0; e < sh->E; e++) {
        int n = p->count[e];
        if (!n) continue;
        float *c = C + (par ? (size_t)omp_get_thread_num() * cstride : 0);
        const float *w1 = W + (size_t)(e % NB) * (wa + wb), *w2 = w1 + wa;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n1, sh->H, 1.0f, A, sh->H, w1, sh->H, 0.0f, c, n1);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, sh->H, sh->I, 1.0f, A, sh->I, w2, sh->I, 0.0f, c, sh->H);
    }
    return now_s() - t0;
}

static double sgemm_ceiling(const moe_shape *sh, const problem *p, int reps)
{
    int n1 = (moe_act_is_gated(sh->act) ? 2 : 1) * sh->I, maxn = 0, NB = sh->E < 8 ? sh->E : 8;
    int nt = omp_get_max_threads();
    for (int e = 0; e < sh->E; e++) maxn = p->count[e] > maxn ? p->count[e] : maxn;
    size_t wa = (size_t)n1 * sh->H, wb = (size_t)sh->H * sh->I;
    size_t cstride = (size_t)maxn * (size_t)(n1 > sh->H ? n1 : sh->H);
    float *A = malloc(sizeof(float) * (size_t)maxn * (sh->H > sh->I ? sh->H : sh->I) + 4);
    float *C = malloc(sizeof(float) * cstride * (size_t)nt + 4);
    float *W = malloc(sizeof(float) * (wa + wb) * (size_t)NB + 4);
    double *t = malloc(sizeof(double) * (size_t)(reps + 1)), best = -1.0;
    if (!A || !C || !W || !t) return free(A), free(C), free(W), free(t), -1.0;
    for (size_t i = 0; i < (wa + wb) * (size_t)NB; i++) W[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
    for (size_t i = 0; i < (size_t)maxn * (sh->H > sh->I ? sh->H : sh->I); i++) A[i] = (float)(i % 7) * 0.1f;
    for (int par = 0; par < 2; par++) {
        sgemm_pass(sh, p, A, W, C, cstride, NB, par); /* warm-up */
        for (int r = 0; r < reps; r++) t[r] = sgemm_pass(sh, p, A, W, C, cstride, NB, par);
        double m = median(t, reps);
        if (best < 0 || m < best) best = m;
    }
    free(A), free(C), free(W), free(t);
    return best;
}

typedef struct {
    FILE *json;
    int nrows;
} out_ctx;

static void row(out_ctx *o, FILE *out, const char *shape, int M, const char *scheme, const char *backend,
                const char *stage, int64_t calls, double sec, double flops, double ref_sec, double ceil_sec)
{
    double gf = flops > 0 && sec > 0 ? flops / sec * 1e-9 : 0.0;
    fprintf(out, "  %-13s %-24s %6lld %12.3f", backend, stage, (long long)calls, sec * 1e3);
    if (gf > 0) fprintf(out, " %9.1f", gf);
    else fprintf(out, " %9s", "");
    if (ref_sec > 0 && sec > 0) fprintf(out, " %8.1fx", ref_sec / sec);
    else fprintf(out, " %9s", "");
    if (ceil_sec > 0 && sec > 0) fprintf(out, " %7.0f%%", 100.0 * ceil_sec / sec);
    fputc('\n', out);
    if (!o->json) return;
    fprintf(o->json, "%s\n    {\"shape\":\"%s\",\"M\":%d,\"scheme\":\"%s\",\"backend\":\"%s\",\"stage\":\"%s\",\"calls\":%lld,"
                     "\"median_us\":%.3f,\"gflops\":%.3f", o->nrows++ ? "," : "", shape, M, scheme, backend, stage,
            (long long)calls, sec * 1e6, gf);
    if (ref_sec > 0 && sec > 0) fprintf(o->json, ",\"speedup_vs_ref\":%.3f", ref_sec / sec);
    if (ceil_sec > 0 && sec > 0) fprintf(o->json, ",\"share_of_sgemm\":%.4f", ceil_sec / sec);
    fputc('}', o->json);
}

typedef struct {
    double e2e, stage[MOE_STAGE_TIMER_MAX];
    int64_t calls[MOE_STAGE_TIMER_MAX];
    int ok;
} bres;

static moe_status run_backend(const moe_ops *ops, const char *pf, const char *ex, const moe_shape *sh, moe_scheme sc,
                              const problem *p, int warmup, int reps, bres *res, FILE *err)
{
    moe_mk_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.scheme = sc, cfg.act = moe_act_defaults(sh->act, MOE_LAYOUT_GATE_UP);
    cfg.num_experts = sh->E, cfg.topk = sh->k, cfg.hidden = sh->H, cfg.inter = sh->I, cfg.world_size = 1;
    /* the timer sits right on the backend, so a device backend's stage times
     * are its kernels' (the staged view's copies are outside them) */
    moe_stage_timer tm;
    moe_staged sg;
    moe_status st = moe_stage_timer_begin(ops, &tm);
    if (st) return st;
    if ((st = moe_backend_host_begin(&tm.ops, &sg, &cfg.ops))) return moe_stage_timer_end(&tm), st;
    moe_mk *mk = NULL;
    moe_tensor out;
    memset(&out, 0, sizeof out);
    if ((st = moe_mk_create(pf, ex, &cfg, &mk, NULL)) ||
        (st = moe_tensor_alloc(&out, p->x.dtype, 2, p->x.shape))) {
        fprintf(err, "moe-bench: %s:%s on %s: %s\n", pf, ex, ops->name, moe_last_error());
        moe_backend_host_end(&sg), moe_stage_timer_end(&tm), moe_mk_destroy(mk);
        return st;
    }
    int n = moe_stage_timer_count();
    double *e2e = malloc(sizeof(double) * (size_t)(reps + 1)), *per = malloc(sizeof(double) * (size_t)(reps * n + 1));
    for (int r = -warmup; r < reps && st == MOE_OK; r++) {
        memset(tm.seconds, 0, sizeof tm.seconds), memset(tm.calls, 0, sizeof tm.calls);
        double t0 = now_s();
        st = moe_mk_forward(mk, &p->mw, &p->x, &p->ids, &p->w, &out);
        double t = now_s() - t0;
        if (r < 0) continue;
        e2e[r] = t;
        for (int i = 0; i < n; i++) per[i * reps + r] = tm.seconds[i];
        memcpy(res->calls, tm.calls, sizeof res->calls);
    }
    if (st) fprintf(err, "moe-bench: forward: %s\n", moe_last_error());
    else {
        res->e2e = median(e2e, reps);
        for (int i = 0; i < n; i++) res->stage[i] = median(per + i * reps, reps);
        res->ok = 1;
    }
    free(e2e), free(per);
    moe_backend_host_end(&sg);
    moe_stage_timer_end(&tm);
    moe_mk_destroy(mk);
    moe_tensor_free(&out);
    return st;
}

static int split_list(char *s, char **v, int max)
{
    int n = 0;
    for (char *save = NULL, *t = strtok_r(s, ",", &save); t && n < max; t = strtok_r(NULL, ",", &save)) v[n++] = t;
    return n;
}

static int usage(FILE *err, const char *what, const char *arg)
{
    fprintf(err, "moe-bench: %s '%s'\n(see moe-bench --help)\n", what, arg ? arg : "");
    return 2;
}

/* token counts: 0, or the usage error's exit status */
static int parse_ms(char **mv, int nm, int *Ms, FILE *err)
{
    for (int m = 0; m < nm; m++) {
        char *end;
        long v = strtol(mv[m], &end, 10);
        if (*end || v < 1 || v > 1 << 20) return usage(err, "--m: token counts must be integers in [1, 2^20], not", mv[m]);
        Ms[m] = (int)v;
    }
    return 0;
}

enum { G_M = 1, G_SCHEME = 2, G_REPS = 4, G_WARMUP = 8, G_SEED = 16, G_PAIR = 32, G_REF_REPS = 64, G_WARM_MS = 128 };

typedef struct {
    char *shapes;          /* LIST or "all" */
    char **mv, **sv;
    int nm, ns, reps, warmup, skew, warm_ms;
    unsigned long long seed;
    const char *peers, *json;
    unsigned given;        /* G_*: options on the command line (the modes' defaults differ) */
} device_args;

static const char GRID_M[] = "1,16,64,256,1024,4096,16384";
static const char GRID_SCHEMES[] =
    "bf16,fp8_wtensor_atensor,fp8_wchannel_atoken,fp8_wblock128_agroup128,int8_wchannel_atoken,w4a16_g128,mxfp4_w4a16";

/* --backend cuda-fast: the options of the device grid, then the grid (or
 * why it cannot run here) */
static int bench_device(char **bv, int nb, device_args *a, FILE *out, FILE *err)
{
    for (int b = 0; b < nb; b++)
        if (strcmp(bv[b], "cuda-fast"))
            return usage(err, "--backend: cuda-fast runs alone (the device grid; run other backends in another "
                              "moe-bench), not with", bv[b]);
    if (a->given & (G_PAIR | G_REF_REPS))
        return usage(err, "--backend cuda-fast times the fast experts path; it takes no",
                     a->given & G_PAIR ? "--pair" : "--ref-reps");
    moe_bench_gpu_opts o;
    memset(&o, 0, sizeof o);
    char *v[32], mbuf[sizeof GRID_M], sbuf[sizeof GRID_SCHEMES];
    int n = split_list(a->shapes, v, 32);
    if (!n) return usage(err, "--shape needs at least one entry", a->shapes);
    for (int i = 0; i < n; i++) {
        if (!strcmp(v[i], "all")) {
            for (int j = 0; j < moe_shape_count() && o.nshapes < MOE_BENCH_GPU_MAX_SHAPES; j++)
                if (strcmp(moe_shape_get(j)->name, "tiny")) o.shapes[o.nshapes++] = moe_shape_get(j);
            continue;
        }
        const moe_shape *sh = moe_shape_find(v[i]);
        if (!sh)
            return usage(err, "--shape: unknown (deepseek-v3, mixtral-8x7b, qwen3-30b-a3b, gpt-oss-120b, tiny, all):", v[i]);
        if (o.nshapes == MOE_BENCH_GPU_MAX_SHAPES) return usage(err, "--shape: at most 8 entries, at", v[i]);
        o.shapes[o.nshapes++] = sh;
    }
    if (!(a->given & G_M)) a->nm = split_list(strcpy(mbuf, GRID_M), a->mv, 16);
    if (!(a->given & G_SCHEME)) a->ns = split_list(strcpy(sbuf, GRID_SCHEMES), a->sv, 32);
    if (a->ns > MOE_BENCH_GPU_MAX_SCHEMES) return usage(err, "--scheme: at most 16 entries, at", a->sv[16]);
    int rc = parse_ms(a->mv, a->nm, o.ms, err);
    if (rc) return rc;
    o.nm = a->nm;
    for (int s = 0; s < a->ns; s++)
        if (moe_scheme_from_name(a->sv[s], &o.schemes[o.nschemes++])) return usage(err, "--scheme: unknown scheme", a->sv[s]);
    if (a->peers && strcmp(a->peers, "cublas") && strcmp(a->peers, "none"))
        return usage(err, "--peers must be cublas or none, not", a->peers);
    o.peer_cublas = !a->peers || !strcmp(a->peers, "cublas");
    o.skew = a->skew, o.seed = a->given & G_SEED ? a->seed : 1;
    o.reps = a->given & G_REPS ? a->reps : 20, o.warmup = a->given & G_WARMUP ? a->warmup : 3;
    o.warm_ms = a->given & G_WARM_MS ? a->warm_ms : 500;
    o.json_path = a->json;
    /* as an unavailable backend elsewhere in moe-bench: said, not an error,
     * and no JSON (a file of skipped points would read as a run) */
    char rt[64], dv[64], gpu[160];
    if (!moe_bench_gpu_run) return fprintf(out, "backend cuda-fast: skipped (not built)\n"), 0;
    if (!moe_backend_cuda_info(rt, dv, gpu, sizeof rt)) return fprintf(out, "backend cuda-fast: skipped (no CUDA device)\n"), 0;
    return moe_bench_gpu_run(&o, out, err);
}

int moe_cli_bench(int argc, char **argv, FILE *out, FILE *err)
{
    char blist[128] = "cpu,ref", mlist[256] = "256", slist[512] = "bf16", pair[96] = "noep:triton_like";
    char shape_list[256] = "all";
    const char *shape_name = "qwen3-30b-a3b", *json_path = NULL, *peers = NULL;
    int reps = 5, warmup = 1, ref_reps = 1, skew = 0, warm_ms = 0;
    unsigned given = 0;
    unsigned long long seed = 20261121ull;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return fputs(USAGE, out), 0;
        if (!strcmp(a, "--skew")) { skew = 1; continue; }
        if (!v) return usage(err, "missing the value of", a);
        i++;
        if (!strcmp(a, "--backend")) snprintf(blist, sizeof blist, "%s", v);
        else if (!strcmp(a, "--m")) snprintf(mlist, sizeof mlist, "%s", v), given |= G_M;
        else if (!strcmp(a, "--scheme")) snprintf(slist, sizeof slist, "%s", v), given |= G_SCHEME;
        else if (!strcmp(a, "--pair")) snprintf(pair, sizeof pair, "%s", v), given |= G_PAIR;
        else if (!strcmp(a, "--shape")) shape_name = v, snprintf(shape_list, sizeof shape_list, "%s", v);
        else if (!strcmp(a, "--json")) json_path = v;
        else if (!strcmp(a, "--peers")) peers = v;
        else if (!strcmp(a, "--seed")) {
            given |= G_SEED;
            seed = strtoull(v, &end, 10);
            if (*end || !*v || *v == '-') return usage(err, "--seed must be a non-negative integer, not", v);
        }
        else if (!strcmp(a, "--reps") || !strcmp(a, "--warmup") || !strcmp(a, "--ref-reps")) {
            long n = strtol(v, &end, 10);
            if (*end || n < (strcmp(a, "--warmup") ? 1 : 0) || n > 1000)
                return usage(err, "must be an integer in [1, 1000] (warm-up from 0):", v);
            if (!strcmp(a, "--reps")) reps = (int)n, given |= G_REPS;
            else if (!strcmp(a, "--warmup")) warmup = (int)n, given |= G_WARMUP;
            else ref_reps = (int)n, given |= G_REF_REPS;
        } else if (!strcmp(a, "--warm-ms")) {
            long n = strtol(v, &end, 10);
            if (*end || !*v || n < 0 || n > 10000)
                return usage(err, "--warm-ms must be an integer number of milliseconds in [0, 10000], not", v);
            warm_ms = (int)n, given |= G_WARM_MS;
        } else return usage(err, "unknown option", a);
    }
    char *bv[4], *mv[16], *sv[32];
    int nb = split_list(blist, bv, 4), nm = split_list(mlist, mv, 16), ns = split_list(slist, sv, 32);
    for (int b = 0; b < nb; b++)
        if (!strcmp(bv[b], "cuda-fast")) {
            device_args da = {shape_list, mv, sv, nm, ns, reps, warmup, skew, warm_ms, seed, peers, json_path, given};
            if (((given & G_M) && !nm) || ((given & G_SCHEME) && !ns))
                return usage(err, "--m and --scheme need at least one entry each", !nm ? "--m" : "--scheme");
            return bench_device(bv, nb, &da, out, err);
        }
    if (peers) return usage(err, "--peers applies to --backend cuda-fast only, not to", nb ? bv[0] : "");
    if (given & G_WARM_MS) return usage(err, "--warm-ms applies to --backend cuda-fast only, not to", nb ? bv[0] : "");
    const moe_shape *sh = moe_shape_find(shape_name);
    if (!sh) return usage(err, "--shape: unknown (deepseek-v3, mixtral-8x7b, qwen3-30b-a3b, gpt-oss-120b, tiny):", shape_name);
    char *pf = pair, *ex = strchr(pair, ':');
    if (!ex) return usage(err, "--pair must be PF:EXPERTS, not", pair);
    *ex++ = 0;
    if (!moe_pf_find(pf)) return usage(err, "--pair: unknown prepare/finalize type (moe-compat list pf)", pf);
    if (!moe_experts_find(ex)) return usage(err, "--pair: unknown experts type (moe-compat list experts)", ex);
    if (!nb || !nm || !ns)
        return usage(err, "--backend, --m and --scheme need at least one entry each", !nb ? "--backend" : !nm ? "--m" : "--scheme");
    const moe_ops *ops[4];
    for (int b = 0; b < nb; b++) {
        const char *why = NULL;
        moe_status st = moe_backend_lookup(bv[b], &ops[b], &why);
        if (st == MOE_ERR_INVALID_ARG) return usage(err, "--backend: unknown backend", bv[b]);
        if (st) ops[b] = NULL, fprintf(out, "backend %s: skipped (%s)\n", bv[b], why);
    }
    moe_scheme schemes[32];
    for (int s = 0; s < ns; s++)
        if (moe_scheme_from_name(sv[s], &schemes[s])) return usage(err, "--scheme: unknown scheme", sv[s]);
    int Ms[16], rc = parse_ms(mv, nm, Ms, err);
    if (rc) return rc;
    /* weights must fit: quantized storage plus the f32 staging of one matrix */
    double welems = (double)sh->E * ((moe_act_is_gated(sh->act) ? 2.0 : 1.0) * sh->I * sh->H + (double)sh->H * sh->I);
    if (welems * 6.0 > 16e9) {
        fprintf(err, "moe-bench: %s: %.1f G weight elements need about %.0f GB here; use a smaller shape\n", sh->name,
                welems * 1e-9, welems * 6e-9);
        return 1;
    }
    out_ctx o = {NULL, 0};
    char tmp[4096];
    if (json_path) {
        snprintf(tmp, sizeof tmp, "%s.tmp", json_path);
        if (!(o.json = fopen(tmp, "w"))) return usage(err, "--json: cannot write", tmp);
        fprintf(o.json, "{\"type\":\"bench\",\"meta\":{\"tool\":\"moe-bench\",\"shape\":\"%s\",\"E\":%d,\"k\":%d,\"H\":%d,"
                        "\"I\":%d,\"pair\":\"%s:%s\",\"reps\":%d,\"warmup\":%d,\"ref_reps\":%d,\"omp_threads\":%d,"
                        "\"openblas\":\"%s\",\"skew\":%d,\"seed\":%llu,\"git_rev\":\"%s\"},\"rows\":[",
                sh->name, sh->E, sh->k, sh->H, sh->I, pf, ex, reps, warmup, ref_reps, omp_get_max_threads(),
                openblas_get_config(), skew, seed, MOE_GIT_REV);
    }
    int failed = 0, n = moe_stage_timer_count();
    fprintf(out, "moe-bench: %s (E %d, top-%d, H %d, I %d), pair %s:%s, %d threads, %s\n", sh->name, sh->E,
            sh->k, sh->H, sh->I, pf, ex, omp_get_max_threads(), openblas_get_config());
    for (int si = 0; si < ns; si++)
        for (int mi = 0; mi < nm; mi++) {
            problem p;
            int M = Ms[mi];
            moe_status st = problem_make(sh, schemes[si], M, skew, seed, &p);
            if (st) {
                fprintf(err, "moe-bench: building the problem: %s\n", moe_last_error());
                problem_free(&p);
                failed = 1;
                continue;
            }
            double n1 = (moe_act_is_gated(sh->act) ? 2.0 : 1.0) * sh->I;
            double gflop = 2.0 * M * sh->k * (n1 * sh->H + (double)sh->H * sh->I);
            double ceil = sgemm_ceiling(sh, &p, reps);
            fprintf(out, "\n%s M=%d %s: GEMM work %.2f GFLOP per forward\n  %-13s %-24s %6s %12s %9s %9s %8s\n",
                    sh->name, M, sv[si], gflop * 1e-9, "backend", "stage", "calls", "median ms", "GFLOP/s", "vs ref",
                    "sgemm");
            bres res[4];
            memset(res, 0, sizeof res);
            int iref = -1, igemm = -1;
            for (int i = 0; i < n; i++)
                if (!strcmp(moe_stage_timer_name(i), "grouped_gemm")) igemm = i;
            for (int b = 0; b < nb; b++) {
                if (!ops[b]) continue;
                int isref = ops[b] == &moe_ops_ref;
                if (isref) iref = b;
                if (run_backend(ops[b], pf, ex, sh, schemes[si], &p, isref ? 0 : warmup, isref ? ref_reps : reps, &res[b],
                                err))
                    failed = 1;
            }
            for (int b = 0; b < nb; b++) {
                if (!res[b].ok) continue;
                const bres *r = &res[b], *rr = iref >= 0 && res[iref].ok && iref != b ? &res[iref] : NULL;
                for (int i = 0; i < n; i++)
                    if (r->calls[i])
                        row(&o, out, sh->name, M, sv[si], bv[b], moe_stage_timer_name(i), r->calls[i], r->stage[i],
                            i == igemm ? gflop : 0.0, rr ? rr->stage[i] : 0.0, i == igemm ? ceil : 0.0);
                row(&o, out, sh->name, M, sv[si], bv[b], "e2e", 1, r->e2e, gflop, rr ? rr->e2e : 0.0, 0.0);
            }
            if (ceil > 0) row(&o, out, sh->name, M, sv[si], "sgemm", "grouped_gemm", 2 * sh->E, ceil, gflop, 0.0, 0.0);
            problem_free(&p);
        }
    if (o.json) {
        fputs("\n]}\n", o.json);
        int bad = ferror(o.json) | (fclose(o.json) != 0);
        if (bad || rename(tmp, json_path)) {
            remove(tmp);
            fprintf(err, "moe-bench: %s not written\n", json_path);
            return 1;
        }
    }
    return failed;
}
