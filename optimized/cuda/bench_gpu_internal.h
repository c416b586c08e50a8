/* Shared by bench_gpu.cu, bench_gpu_ceilings.cu, bench_gpu_cublas.cu and
 * bench_gpu_report.cu (CUDA C++ only): cuBLAS / cuBLASLt loaded at run
 * time, event timing, device fills, the ceilings, the cuBLAS peer pipeline
 * and the output. */
#ifndef MOE_OPTIMIZED_CUDA_BENCH_GPU_INTERNAL_H
#define MOE_OPTIMIZED_CUDA_BENCH_GPU_INTERNAL_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include "cuda_internal.h"
#include "bench_gpu.h"
#include "fast.h"
#include "moe/act.h"

/* cuBLAS through dlopen: the tools link and run where it is absent, and
 * then report the peer and the dense ceilings as skipped. Only the entry
 * points used here; types come from the headers. cublasGemmEx is
 * overloaded in C++ (a cudaDataType wrapper), so its type is spelled out. */
typedef cublasStatus_t (*moe_bg_gemm_ex_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                            const void *, const void *, cudaDataType, int, const void *, cudaDataType,
                                            int, const void *, void *, cudaDataType, int, cublasComputeType_t,
                                            cublasGemmAlgo_t);
typedef struct {
    void *lib, *lt_lib;
    cublasHandle_t h;
    cublasLtHandle_t lt;
    int ok, lt_ok;
    char why[256], lt_why[256], version[32];
    decltype(&cublasCreate_v2) create;
    decltype(&cublasDestroy_v2) destroy;
    decltype(&cublasSetStream_v2) set_stream;
    decltype(&cublasGetProperty) get_property;
    moe_bg_gemm_ex_fn gemm_ex;
    decltype(&cublasGemmGroupedBatchedEx) gemm_grouped;
    decltype(&cublasLtCreate) lt_create;
    decltype(&cublasLtDestroy) lt_destroy;
    decltype(&cublasLtMatmulDescCreate) lt_desc_create;
    decltype(&cublasLtMatmulDescDestroy) lt_desc_destroy;
    decltype(&cublasLtMatmulDescSetAttribute) lt_desc_set;
    decltype(&cublasLtMatrixLayoutCreate) lt_layout_create;
    decltype(&cublasLtMatrixLayoutDestroy) lt_layout_destroy;
    decltype(&cublasLtMatmulPreferenceCreate) lt_pref_create;
    decltype(&cublasLtMatmulPreferenceDestroy) lt_pref_destroy;
    decltype(&cublasLtMatmulPreferenceSetAttribute) lt_pref_set;
    decltype(&cublasLtMatmulAlgoGetHeuristic) lt_heuristic;
    decltype(&cublasLtMatmul) lt_matmul;
} moe_bg_cublas;

/* Loads both libraries and makes handles bound to s; what fails is left
 * in why / lt_why with ok / lt_ok = 0 (never an error: the run goes on). */
void moe_bg_cublas_load(moe_bg_cublas *c, cudaStream_t s);
void moe_bg_cublas_unload(moe_bg_cublas *c);
/* MOE_ERR_DEVICE naming the call and the cuBLAS status. */
moe_status moe_bg_cublas_fail(cublasStatus_t st, const char *what);

#define MOE_BG_BLAS(call)                                                                                   \
    do {                                                                                                    \
        cublasStatus_t b_ = (call);                                                                         \
        if (b_ != CUBLAS_STATUS_SUCCESS) return moe_bg_cublas_fail(b_, #call);                             \
    } while (0)

/* Times `run` (one call per repetition; rep counts from 0 over the timed
 * ones) with a CUDA event pair around each call on s: untimed calls for
 * warm_s seconds, then `warmup` untimed calls (none of either when warmup
 * is 0), then up to `reps` timed ones, fewer when they would take more
 * than budget_s (estimated from the last warm-up call, or the first timed
 * one). Median and min in microseconds, the timed count in *done.
 *
 * Why warm_s: the H200 holds its 700 W cap by lowering the SM clock within
 * 0.1-0.2 s of a heavy kernel's start (clock event reason "SW power cap",
 * sampled every 50 ms), from 1980 MHz to 1300-1600 under dense MMA work,
 * and its clock and temperature come back within about a second of idle.
 * A short timing window therefore measures whatever the previous second
 * left: the same forward took 5.19 ms alone and 5.8-6.4 ms right after the
 * cuBLAS peer (NOTES.md, "the one point behind"; the cause, v40). warm_s = 0.5 s of the
 * implementation's own runs puts every timing, ours, the peers' and the
 * dense ceilings', at its own sustained state. */
typedef moe_status (*moe_bg_run_fn)(void *ctx, int rep, cudaStream_t s);
moe_status moe_bg_time(moe_bg_run_fn run, void *ctx, cudaStream_t s, double warm_s, int warmup, int reps,
                       double budget_s, double *median_us, double *min_us, int *done, double *clock_mhz);

/* The SM clock (bench_gpu_clock.cu): moe_bg_clock_open loads NVML once a
 * run (0; -1 with why: the points then carry none), moe_bg_clock_mhz
 * samples the current device's SM clock (0: none). moe_bg_time's
 * clock_mhz (NULL: not sampled) is the median of samples taken at most
 * every millisecond while the timed runs execute, -1 without one. */
int moe_bg_clock_open(char *why, size_t n);
unsigned moe_bg_clock_mhz(void);

/* Device fills from the bench hash (mix64 of seed ^ index): uniform in
 * [-scale, scale) rounded to bf16, to e4m3, or raw 32-bit words. */
moe_status moe_bg_fill_bf16(__nv_bfloat16 *p, size_t n, uint64_t seed, float scale, cudaStream_t s);
moe_status moe_bg_fill_e4m3(void *p, size_t n, uint64_t seed, float scale, cudaStream_t s);
moe_status moe_bg_fill_u32(uint32_t *p, size_t n, uint64_t seed, cudaStream_t s);

/* The ceilings (a negative value: not measured, the reason in *_why),
 * each timed after warm_s of its own runs as the points are; the dense
 * peaks also as bursts (3 warm-up runs only, the clocks an idle GPU
 * starts at), kept beside them for the reader, never divided by. */
typedef struct {
    double read_tbs, copy_tbs, bf16_4096, bf16_8192, bf16_tflops, fp8_tflops;
    double bf16_burst, fp8_burst;
    double bf16_clock, fp8_clock; /* the sustained dense timings' median SM clock (MHz), -1: none */
    char read_why[320], copy_why[320], bf16_why[320], fp8_why[320];
} moe_bg_ceilings;
void moe_bg_ceilings_measure(moe_bg_cublas *c, cudaStream_t s, double warm_s, moe_bg_ceilings *out);

/* The cuBLAS peer on one problem: align (bm = 1), counts to the host and
 * a stream sync, the group arrays, gather, grouped GEMM1, activation,
 * grouped GEMM2, combine. nsets input sets share its buffers. */
enum { MOE_BG_SETS = 4 };
typedef struct {
    const moe_bg_cublas *c;
    int M, E, k, H, I;
    moe_act_params act;
    const __nv_bfloat16 *w1, *w2;
    const __nv_bfloat16 *x[MOE_BG_SETS];
    const int32_t *ids[MOE_BG_SETS];
    const float *w[MOE_BG_SETS];
    __nv_bfloat16 *out;
    /* owned */
    void *lay;
    moe_cuda_fx_layout L;
    __nv_bfloat16 *xs, *y1, *h, *y2;
    int32_t *h_counts;        /* pinned [E] */
    void **h_ptrs, **d_ptrs;  /* pinned / device [sets][6][E]: A1 B1 C1 A2 B2 C2 */
    int *n_rows;              /* [sets][E] rows of each group */
    int ngroups[MOE_BG_SETS];
    void *consts;             /* host arrays the same for every group */
} moe_bg_peer;

/* after the inputs above are filled; frees what it made on failure */
moe_status moe_bg_peer_init(moe_bg_peer *p);
void moe_bg_peer_free(moe_bg_peer *p);
/* the whole pipeline on set rep % sets (a moe_bg_run_fn) */
moe_status moe_bg_peer_forward(void *peer, int rep, cudaStream_t s);
/* a set's groups and pointers, ready for moe_bg_peer_gemms */
moe_status moe_bg_peer_prepare(moe_bg_peer *p, int set, cudaStream_t s);
/* the two grouped GEMMs only, set rep % sets (a moe_bg_run_fn) */
moe_status moe_bg_peer_gemms(void *peer, int rep, cudaStream_t s);

/* ---- points (bench_gpu_report.cu) ---- */
#define MOE_BG_BUDGET_S 2.0   /* timed seconds per implementation and point at most (reps cut, never below one) */
#define MOE_BG_CHECK_TOL 2e-2 /* bf16 outputs of two f32-accumulating pipelines differ by about 1e-3 */

typedef struct {
    FILE *out, *err, *json;
    const moe_bench_gpu_opts *o;
    moe_bg_ceilings ceil;
    int npoints, failed;
    char clock_why[256]; /* why the points carry no SM clock, "" when they do */
} moe_bg_run;

typedef struct {
    const moe_shape *sh;
    int M, touched, reps;
    moe_scheme scheme;
    const char *impl, *status; /* "ok", "skipped", "failed" */
    char why[640], note[256];
    double bytes, flops, median_us, min_us;
    double clock_mhz; /* the median SM clock while timed (moe_bg_time), <= 0: none */
    int has_check;
    double check; /* relative L2 against the cuBLAS pipeline; < 0: null */
    char check_why[640];
} moe_bg_point;

/* status and why = fmt with msg */
void moe_bg_point_set(moe_bg_point *p, const char *status, const char *fmt, const char *msg);
/* the table row and the JSON record (R->failed set by a failed point) */
void moe_bg_emit(moe_bg_run *R, moe_bg_point *p);
/* the run's first lines and the JSON up to the points array */
void moe_bg_header(moe_bg_run *R, const moe_bg_cublas *cb);

#endif
