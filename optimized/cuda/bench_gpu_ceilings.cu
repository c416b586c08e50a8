/* The ceilings moe-bench divides by, measured at the start of each run
 * (clocks and power move between runs, so figures from elsewhere would
 * flatter or shame the kernels):
 *   read_tbs   a read-only streaming kernel, 16-byte loads, four in flight
 *              per thread, grid-stride over 4 GiB of random words; this,
 *              not the copy figure, bounds weight streaming (about 4.6
 *              against 4.27 TB/s on the H200 of the anchors);
 *   copy_tbs   cudaMemcpyAsync device to device, 2 GiB, read + write;
 *   bf16       cublasGemmEx bf16 in, f32 compute, n^3 for n = 4096 and
 *              8192 on random data (zeros run faster), the larger kept;
 *   fp8        cublasLtMatmul e4m3 x e4m3 -> bf16, 8192^3, per-tensor
 *              scales, TN (what cuBLASLt's fp8 kernels require), fast
 *              accumulation (as the anchors' 1350 TFLOP/s figure).
 * Each is the median of 10 timed runs after the points' warm-up by time
 * (warm_s, moe_bg_time: the sustained figure the points are divided by)
 * and 3 warm-ups; the dense peaks also after the 3 warm-ups alone (the
 * burst figure, reported beside: 10-18% above the sustained one on a
 * power-capped H200). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cuda_fp8.h>
#include "bench_gpu_internal.h"

/* ---- fills, timing -------------------------------------------------------------- */

static __device__ __forceinline__ float bg_uniform(uint64_t key, size_t i)
{
    return (float)(moe_bench_mix64(key ^ (uint64_t)i) >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

__global__ void fill_bf16_kernel(__nv_bfloat16 *p, size_t n, uint64_t key, float scale)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = __float2bfloat16_rn(bg_uniform(key, i) * scale);
}

__global__ void fill_e4m3_kernel(__nv_fp8_storage_t *p, size_t n, uint64_t key, float scale)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = __nv_cvt_float_to_fp8(bg_uniform(key, i) * scale, __NV_SATFINITE, __NV_E4M3);
}

__global__ void fill_u32_kernel(uint32_t *p, size_t n, uint64_t key)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (uint32_t)moe_bench_mix64(key ^ (uint64_t)i);
}

moe_status moe_bg_fill_bf16(__nv_bfloat16 *p, size_t n, uint64_t seed, float scale, cudaStream_t s)
{
    fill_bf16_kernel<<<moe_cu_blocks((int64_t)n, 256), 256, 0, s>>>(p, n, moe_bench_mix64(seed), scale);
    return moe_cu_launched("fill_bf16_kernel");
}

moe_status moe_bg_fill_e4m3(void *p, size_t n, uint64_t seed, float scale, cudaStream_t s)
{
    fill_e4m3_kernel<<<moe_cu_blocks((int64_t)n, 256), 256, 0, s>>>((__nv_fp8_storage_t *)p, n, moe_bench_mix64(seed),
                                                                    scale);
    return moe_cu_launched("fill_e4m3_kernel");
}

moe_status moe_bg_fill_u32(uint32_t *p, size_t n, uint64_t seed, cudaStream_t s)
{
    fill_u32_kernel<<<moe_cu_blocks((int64_t)n, 256), 256, 0, s>>>(p, n, moe_bench_mix64(seed));
    return moe_cu_launched("fill_u32_kernel");
}

static int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* the median of v[0..n), sorted in place (n >= 1): the times and the clock samples */
static double median_of(float *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_f);
    return n % 2 ? v[n / 2] : 0.5 * ((double)v[n / 2 - 1] + v[n / 2]);
}

static moe_status record(cudaEvent_t e, cudaStream_t s)
{
    MOE_CU(cudaEventRecord(e, s));
    return MOE_OK;
}

static moe_status elapsed(cudaEvent_t a, cudaEvent_t b, float *ms)
{
    MOE_CU(cudaEventSynchronize(b));
    MOE_CU(cudaEventElapsedTime(ms, a, b));
    return MOE_OK;
}

static double since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0->tv_nsec);
}

/* SM clock samples while the timed runs execute, at most one a millisecond
 * (the 2 s budget's worth and the queue's tail fit) */
typedef struct {
    float v[4096];
    int n, on;
    struct timespec last;
} clock_samples;

static void clock_sample(clock_samples *c)
{
    if (!c->on || c->n == (int)(sizeof c->v / sizeof c->v[0]) || (c->n && since(&c->last) < 1e-3)) return;
    const unsigned mhz = moe_bg_clock_mhz();
    if (mhz) c->v[c->n++] = (float)mhz;
    clock_gettime(CLOCK_MONOTONIC, &c->last);
}

moe_status moe_bg_time(moe_bg_run_fn run, void *ctx, cudaStream_t s, double warm_s, int warmup, int reps,
                       double budget_s, double *median_us, double *min_us, int *done, double *clock_mhz)
{
    cudaEvent_t *ev = (cudaEvent_t *)calloc(2 * (size_t)reps, sizeof *ev);
    float *ms = (float *)malloc(sizeof(float) * (size_t)reps), est = -1.0f;
    int made = 0, n = reps;
    moe_status st = ev && ms ? MOE_OK : moe_fail(MOE_ERR_NOMEM, "bench: timing events");
    for (; !st && made < 2 * reps; made++) {
        cudaError_t e = cudaEventCreate(&ev[made]);
        if (e != cudaSuccess) st = moe_cu_fail(e, "cudaEventCreate");
    }
    /* warm-up by time first: runs until warm_s have passed, each waited
     * for (the power state, bench_gpu_internal.h; and three runs alone once
     * left the first implementation at a point slow: Mixtral-8x7B M = 16
     * bf16, 750 us after 3 warm-ups, 670 after 40, NOTES.md v20). Every
     * implementation gets the same; none with --warmup 0 (profiling) */
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int w = 0; !st && warmup > 0 && warm_s > 0.0 && w < 1 << 22; w++) {
        cudaError_t e;
        if ((st = run(ctx, w, s))) break;
        if ((e = cudaStreamSynchronize(s)) != cudaSuccess) st = moe_cu_fail(e, "bench: warm-up");
        if (since(&t0) >= warm_s) break;
    }
    static clock_samples cs; /* 16 KB: one timing at a time (the bench's thread) */
    cs.n = 0, cs.on = clock_mhz != NULL && moe_bg_clock_mhz() > 0;
    /* the budget's estimate: the last warm-up run, else the first timed one
     * (both use the first event pair) */
    for (int w = 0; !st && w < warmup; w++) {
        int last = w == warmup - 1;
        if ((last && (st = record(ev[0], s))) || (st = run(ctx, w, s)) || (last && (st = record(ev[1], s)))) break;
    }
    if (!st && warmup > 0) st = elapsed(ev[0], ev[1], &est);
    for (int i = 0; !st && i < n; i++) {
        if ((st = record(ev[2 * i], s)) || (st = run(ctx, i, s)) || (st = record(ev[2 * i + 1], s))) break;
        if (i == 0 && est < 0.0f && (st = elapsed(ev[0], ev[1], &est))) break;
        if (i == 0 && est > 0.0f && budget_s * 1e3 < (double)est * n) {
            int fit = (int)(budget_s * 1e3 / est);
            n = fit > 1 ? fit : 1;
        }
        clock_sample(&cs);
    }
    /* the runs still queued: sampled while they execute */
    while (!st && cs.on) {
        const cudaError_t q = cudaEventQuery(ev[2 * n - 1]);
        if (q == cudaSuccess) break;
        if (q != cudaErrorNotReady) {
            st = moe_cu_fail(q, "bench: the timed runs");
            break;
        }
        clock_sample(&cs);
        const struct timespec pause = {0, 200000};
        nanosleep(&pause, NULL);
    }
    for (int r = 0; !st && r < n; r++) st = elapsed(ev[2 * r], ev[2 * r + 1], &ms[r]);
    if (!st) {
        *median_us = 1e3 * median_of(ms, n);
        *min_us = 1e3 * ms[0], *done = n; /* ms is sorted now */
        if (clock_mhz) *clock_mhz = cs.n ? median_of(cs.v, cs.n) : -1.0;
    }
    for (int r = 0; r < made; r++) cudaEventDestroy(ev[r]);
    free(ev), free(ms);
    return st;
}

/* ---- the ceilings ---------------------------------------------------------------- */

enum { CEIL_REPS = 10, CEIL_WARMUP = 3 };

__global__ void read_kernel(const uint4 *__restrict__ p, size_t n, unsigned *sink)
{
    size_t stride = (size_t)gridDim.x * blockDim.x, i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned acc = 0;
    for (; i + 3 * stride < n; i += 4 * stride) {
        uint4 a = p[i], b = p[i + stride], c = p[i + 2 * stride], d = p[i + 3 * stride];
        acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
    }
    for (; i < n; i += stride) acc ^= p[i].x ^ p[i].y ^ p[i].z ^ p[i].w;
    for (int o = 16; o; o >>= 1) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
    __shared__ unsigned part[32];
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (unsigned w = 1; w < blockDim.x / 32; w++) acc ^= part[w];
        atomicXor(sink, acc);
    }
}

typedef struct {
    const uint4 *buf;
    size_t n16;
    unsigned *sink;
    int grid;
} read_ctx;

static moe_status read_run(void *ctx, int rep, cudaStream_t s)
{
    (void)rep;
    read_ctx *r = (read_ctx *)ctx;
    read_kernel<<<r->grid, 512, 0, s>>>(r->buf, r->n16, r->sink);
    return moe_cu_launched("read_kernel");
}

typedef struct {
    void *dst;
    const void *src;
    size_t bytes;
} copy_ctx;

static moe_status copy_run(void *ctx, int rep, cudaStream_t s)
{
    (void)rep;
    copy_ctx *c = (copy_ctx *)ctx;
    MOE_CU(cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice, s));
    return MOE_OK;
}

static void why_status(char *why, size_t n) { snprintf(why, n, "%s", moe_last_error()); }

/* a second without work, so a burst figure starts from an idle GPU's
 * clocks whatever ran before it */
static void idle(void)
{
    struct timespec t = {1, 0};
    nanosleep(&t, NULL);
}

static moe_status idle_synced(cudaStream_t s)
{
    MOE_CU(cudaStreamSynchronize(s));
    idle();
    return MOE_OK;
}

/* read and copy share one 4 GiB buffer: the copy moves its first half
 * onto its second */
static void measure_memory(cudaStream_t s, double warm_s, moe_bg_ceilings *o)
{
    const size_t bytes = (size_t)4 << 30;
    uint32_t *buf = NULL;
    unsigned *sink = NULL;
    double med, mn;
    int done, dev = 0, sms = 0;
    moe_status st = MOE_OK;
    cudaError_t e;
    if ((e = cudaMalloc(&buf, bytes)) != cudaSuccess || (e = cudaMalloc(&sink, sizeof *sink)) != cudaSuccess) {
        moe_cu_fail(e, "cudaMalloc (4 GiB)");
        why_status(o->read_why, sizeof o->read_why), why_status(o->copy_why, sizeof o->copy_why);
        cudaGetLastError();
        cudaFree(buf);
        return;
    }
    cudaGetDevice(&dev), cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    read_ctx r = {(const uint4 *)buf, bytes / 16, sink, (sms > 0 ? sms : 132) * 4};
    if ((st = moe_bg_fill_u32(buf, bytes / 4, 0x5EADull, s)) ||
        (st = moe_bg_time(read_run, &r, s, warm_s, CEIL_WARMUP, CEIL_REPS, 30.0, &med, &mn, &done, NULL)))
        why_status(o->read_why, sizeof o->read_why);
    else o->read_tbs = (double)bytes / med * 1e-6;
    copy_ctx c = {(char *)buf + bytes / 2, buf, bytes / 2};
    if (!st && (st = moe_bg_time(copy_run, &c, s, warm_s, CEIL_WARMUP, CEIL_REPS, 30.0, &med, &mn, &done, NULL)))
        why_status(o->copy_why, sizeof o->copy_why);
    else if (!st) o->copy_tbs = 2.0 * (double)c.bytes / med * 1e-6;
    else snprintf(o->copy_why, sizeof o->copy_why, "not measured: the read ceiling failed first");
    cudaFree(buf), cudaFree(sink);
}

typedef struct {
    const moe_bg_cublas *c;
    int n;
    const void *a, *b;
    void *d;
    /* cuBLASLt only */
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
    void *ws;
    size_t ws_bytes;
} gemm_ctx;

static moe_status bf16_run(void *ctx, int rep, cudaStream_t s)
{
    (void)rep, (void)s;
    gemm_ctx *g = (gemm_ctx *)ctx;
    float one = 1.0f, zero = 0.0f;
    MOE_BG_BLAS(g->c->gemm_ex(g->c->h, CUBLAS_OP_N, CUBLAS_OP_N, g->n, g->n, g->n, &one, g->a, CUDA_R_16BF, g->n, g->b,
                              CUDA_R_16BF, g->n, &zero, g->d, CUDA_R_16BF, g->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return MOE_OK;
}

static moe_status fp8_run(void *ctx, int rep, cudaStream_t s)
{
    (void)rep;
    gemm_ctx *g = (gemm_ctx *)ctx;
    float one = 1.0f, zero = 0.0f;
    MOE_BG_BLAS(g->c->lt_matmul(g->c->lt, g->op, &one, g->a, g->la, g->b, g->lb, &zero, g->d, g->ld, g->d, g->ld,
                                &g->algo, g->ws, g->ws_bytes, s));
    return MOE_OK;
}

/* each size as a burst first (after a second idle), then sustained; the
 * larger of each kept */
static moe_status measure_bf16(const moe_bg_cublas *c, void *a, void *b, void *d, cudaStream_t s, double warm_s,
                               moe_bg_ceilings *o)
{
    const int sizes[2] = {4096, 8192};
    for (int i = 0; i < 2; i++) {
        int n = sizes[i], done;
        double med, mn;
        gemm_ctx g;
        memset(&g, 0, sizeof g);
        g.c = c, g.n = n, g.a = a, g.b = b, g.d = d;
        const double flops = 2.0 * n * (double)n * n;
        moe_status st = idle_synced(s);
        if (!st) st = moe_bg_time(bf16_run, &g, s, 0.0, CEIL_WARMUP, CEIL_REPS, 30.0, &med, &mn, &done, NULL);
        if (st) return st;
        if (flops / med * 1e-6 > o->bf16_burst) o->bf16_burst = flops / med * 1e-6;
        double mhz;
        st = moe_bg_time(bf16_run, &g, s, warm_s, CEIL_WARMUP, CEIL_REPS, 30.0, &med, &mn, &done, &mhz);
        if (st) return st;
        double tf = flops / med * 1e-6;
        if (i == 0) o->bf16_4096 = tf;
        else o->bf16_8192 = tf;
        if (tf > o->bf16_tflops) o->bf16_tflops = tf, o->bf16_clock = mhz;
    }
    return MOE_OK;
}

static moe_status fp8_setup(const moe_bg_cublas *c, gemm_ctx *g, const float *scale)
{
    uint64_t n = (uint64_t)g->n;
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    int8_t fast = 1;
    MOE_BG_BLAS(c->lt_desc_create(&g->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    MOE_BG_BLAS(c->lt_desc_set(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    MOE_BG_BLAS(c->lt_desc_set(g->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    MOE_BG_BLAS(c->lt_desc_set(g->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale, sizeof scale));
    MOE_BG_BLAS(c->lt_desc_set(g->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale, sizeof scale));
    MOE_BG_BLAS(c->lt_desc_set(g->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
    MOE_BG_BLAS(c->lt_layout_create(&g->la, CUDA_R_8F_E4M3, n, n, (int64_t)n));
    MOE_BG_BLAS(c->lt_layout_create(&g->lb, CUDA_R_8F_E4M3, n, n, (int64_t)n));
    MOE_BG_BLAS(c->lt_layout_create(&g->ld, CUDA_R_16BF, n, n, (int64_t)n));
    cublasLtMatmulPreference_t pref;
    MOE_BG_BLAS(c->lt_pref_create(&pref));
    cublasStatus_t bs = c->lt_pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &g->ws_bytes, sizeof g->ws_bytes);
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    if (bs == CUBLAS_STATUS_SUCCESS) bs = c->lt_heuristic(c->lt, g->op, g->la, g->lb, g->ld, g->ld, pref, 1, &res, &found);
    c->lt_pref_destroy(pref);
    if (bs != CUBLAS_STATUS_SUCCESS) return moe_bg_cublas_fail(bs, "cublasLtMatmulAlgoGetHeuristic (e4m3 TN -> bf16)");
    if (found < 1) return moe_fail(MOE_ERR_UNSUPPORTED, "cublasLtMatmulAlgoGetHeuristic: no algorithm for e4m3 TN -> bf16");
    g->algo = res.algo;
    return MOE_OK;
}

static void fp8_teardown(const moe_bg_cublas *c, gemm_ctx *g)
{
    if (g->la) c->lt_layout_destroy(g->la);
    if (g->lb) c->lt_layout_destroy(g->lb);
    if (g->ld) c->lt_layout_destroy(g->ld);
    if (g->op) c->lt_desc_destroy(g->op);
}

static moe_status measure_fp8(const moe_bg_cublas *c, void *a, void *b, void *d, cudaStream_t s, double warm_s,
                              moe_bg_ceilings *o)
{
    const int n = 8192;
    gemm_ctx g;
    memset(&g, 0, sizeof g);
    g.c = c, g.n = n, g.a = a, g.b = b, g.d = d, g.ws_bytes = (size_t)32 << 20;
    float *scale = NULL, one = 1.0f;
    moe_status st = MOE_OK;
    double med, mn;
    int done;
    cudaError_t e = cudaMalloc(&g.ws, g.ws_bytes);
    if (e == cudaSuccess) e = cudaMalloc(&scale, sizeof *scale);
    if (e == cudaSuccess) e = cudaMemcpy(scale, &one, sizeof one, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) st = moe_cu_fail(e, "fp8 ceiling buffers");
    if (!st && (st = moe_bg_fill_e4m3(a, (size_t)n * n, 0xF8A, 1.0f, s)) == MOE_OK &&
        (st = moe_bg_fill_e4m3(b, (size_t)n * n, 0xF8B, 1.0f, s)) == MOE_OK && (st = fp8_setup(c, &g, scale)) == MOE_OK &&
        (st = idle_synced(s)) == MOE_OK &&
        (st = moe_bg_time(fp8_run, &g, s, 0.0, CEIL_WARMUP, CEIL_REPS, 30.0, &med, &mn, &done, NULL)) == MOE_OK) {
        o->fp8_burst = 2.0 * n * (double)n * n / med * 1e-6;
        if ((st = moe_bg_time(fp8_run, &g, s, warm_s, CEIL_WARMUP, CEIL_REPS, 30.0, &med, &mn, &done, &o->fp8_clock)) ==
            MOE_OK)
            o->fp8_tflops = 2.0 * n * (double)n * n / med * 1e-6;
    }
    fp8_teardown(c, &g);
    cudaFree(g.ws), cudaFree(scale);
    return st;
}

void moe_bg_ceilings_measure(moe_bg_cublas *c, cudaStream_t s, double warm_s, moe_bg_ceilings *o)
{
    memset(o, 0, sizeof *o);
    o->read_tbs = o->copy_tbs = o->bf16_4096 = o->bf16_8192 = o->bf16_tflops = o->fp8_tflops = -1.0;
    o->bf16_burst = o->fp8_burst = o->bf16_clock = o->fp8_clock = -1.0;
    measure_memory(s, warm_s, o);
    if (!c->ok) snprintf(o->bf16_why, sizeof o->bf16_why, "cuBLAS not loaded: %s", c->why);
    if (!c->lt_ok) snprintf(o->fp8_why, sizeof o->fp8_why, "cuBLASLt not loaded: %s", c->lt_why);
    if (!c->ok && !c->lt_ok) return;
    const size_t n = 8192, bytes = n * n * sizeof(__nv_bfloat16);
    void *a = NULL, *b = NULL, *d = NULL;
    cudaError_t e = cudaMalloc(&a, bytes);
    if (e == cudaSuccess) e = cudaMalloc(&b, bytes);
    if (e == cudaSuccess) e = cudaMalloc(&d, bytes);
    if (e != cudaSuccess) {
        moe_cu_fail(e, "dense ceiling buffers");
        cudaGetLastError();
        if (c->ok) why_status(o->bf16_why, sizeof o->bf16_why);
        if (c->lt_ok) why_status(o->fp8_why, sizeof o->fp8_why);
    } else {
        if (c->ok) {
            o->bf16_tflops = o->bf16_burst = 0.0;
            if (moe_bg_fill_bf16((__nv_bfloat16 *)a, n * n, 0xB16A, 1.0f, s) ||
                moe_bg_fill_bf16((__nv_bfloat16 *)b, n * n, 0xB16B, 1.0f, s) ||
                measure_bf16(c, a, b, d, s, warm_s, o)) {
                why_status(o->bf16_why, sizeof o->bf16_why);
                o->bf16_4096 = o->bf16_8192 = o->bf16_tflops = o->bf16_burst = o->bf16_clock = -1.0;
            }
        }
        if (c->lt_ok && measure_fp8(c, a, b, d, s, warm_s, o)) {
            why_status(o->fp8_why, sizeof o->fp8_why);
            o->fp8_tflops = o->fp8_burst = o->fp8_clock = -1.0;
        }
    }
    cudaFree(a), cudaFree(b), cudaFree(d);
}
