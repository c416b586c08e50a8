/* moe-bench's cuBLAS pieces: the libraries loaded at run time, and the
 * peer pipeline people build today around cublasGemmGroupedBatchedEx
 * (anchors perf_anchors.md section 3(d)): group sizes must be on the host,
 * so every forward pays a device-to-host copy and a stream sync, then
 * builds the group arrays and copies the pointer arrays back. Our align,
 * gather, activation and combine kernels (fast.h) do the rest, so the
 * peer differs from cuda-fast only where the GEMMs do. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench_gpu_internal.h"

moe_status moe_bg_cublas_fail(cublasStatus_t st, const char *what)
{
    return moe_fail(MOE_ERR_DEVICE, "%s: cuBLAS status %d", what, (int)st);
}

/* The soname first (LD_LIBRARY_PATH, the loader cache), then the toolkit's
 * usual place, where the GPU machines keep it without a cache entry. */
static void *open_lib(const char *soname, char *why, size_t n)
{
    void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
    snprintf(why, n, "%s", dlerror());
    char alt[256];
    const char *home = getenv("CUDA_HOME");
    snprintf(alt, sizeof alt, "%s/lib64/%s", home && *home ? home : "/usr/local/cuda", soname);
    if ((h = dlopen(alt, RTLD_NOW | RTLD_LOCAL))) why[0] = 0;
    return h;
}

#define BG_SYM(lib, field, name, whybuf)                                                                    \
    do {                                                                                                    \
        *(void **)&c->field = dlsym(lib, name);                                                             \
        if (!c->field) {                                                                                    \
            snprintf(whybuf, sizeof whybuf, "symbol %s not found", name);                                \
            return;                                                                                         \
        }                                                                                                   \
    } while (0)

static void load_blas(moe_bg_cublas *c, cudaStream_t s)
{
    if (!(c->lib = open_lib("libcublas.so.13", c->why, sizeof c->why))) return;
    BG_SYM(c->lib, create, "cublasCreate_v2", c->why);
    BG_SYM(c->lib, destroy, "cublasDestroy_v2", c->why);
    BG_SYM(c->lib, set_stream, "cublasSetStream_v2", c->why);
    BG_SYM(c->lib, get_property, "cublasGetProperty", c->why);
    BG_SYM(c->lib, gemm_ex, "cublasGemmEx", c->why);
    BG_SYM(c->lib, gemm_grouped, "cublasGemmGroupedBatchedEx", c->why);
    cublasStatus_t st = c->create(&c->h);
    if (st != CUBLAS_STATUS_SUCCESS) {
        snprintf(c->why, sizeof c->why, "cublasCreate: status %d", (int)st);
        c->h = NULL;
        return;
    }
    if ((st = c->set_stream(c->h, s)) != CUBLAS_STATUS_SUCCESS) {
        snprintf(c->why, sizeof c->why, "cublasSetStream: status %d", (int)st);
        return;
    }
    int v[3] = {0, 0, 0};
    c->get_property(MAJOR_VERSION, &v[0]), c->get_property(MINOR_VERSION, &v[1]), c->get_property(PATCH_LEVEL, &v[2]);
    snprintf(c->version, sizeof c->version, "%d.%d.%d", v[0], v[1], v[2]);
    c->ok = 1;
}

static void load_lt(moe_bg_cublas *c)
{
    if (!(c->lt_lib = open_lib("libcublasLt.so.13", c->lt_why, sizeof c->lt_why))) return;
    BG_SYM(c->lt_lib, lt_create, "cublasLtCreate", c->lt_why);
    BG_SYM(c->lt_lib, lt_destroy, "cublasLtDestroy", c->lt_why);
    BG_SYM(c->lt_lib, lt_desc_create, "cublasLtMatmulDescCreate", c->lt_why);
    BG_SYM(c->lt_lib, lt_desc_destroy, "cublasLtMatmulDescDestroy", c->lt_why);
    BG_SYM(c->lt_lib, lt_desc_set, "cublasLtMatmulDescSetAttribute", c->lt_why);
    BG_SYM(c->lt_lib, lt_layout_create, "cublasLtMatrixLayoutCreate", c->lt_why);
    BG_SYM(c->lt_lib, lt_layout_destroy, "cublasLtMatrixLayoutDestroy", c->lt_why);
    BG_SYM(c->lt_lib, lt_pref_create, "cublasLtMatmulPreferenceCreate", c->lt_why);
    BG_SYM(c->lt_lib, lt_pref_destroy, "cublasLtMatmulPreferenceDestroy", c->lt_why);
    BG_SYM(c->lt_lib, lt_pref_set, "cublasLtMatmulPreferenceSetAttribute", c->lt_why);
    BG_SYM(c->lt_lib, lt_heuristic, "cublasLtMatmulAlgoGetHeuristic", c->lt_why);
    BG_SYM(c->lt_lib, lt_matmul, "cublasLtMatmul", c->lt_why);
    cublasStatus_t st = c->lt_create(&c->lt);
    if (st != CUBLAS_STATUS_SUCCESS) {
        snprintf(c->lt_why, sizeof c->lt_why, "cublasLtCreate: status %d", (int)st);
        c->lt = NULL;
        return;
    }
    c->lt_ok = 1;
}

void moe_bg_cublas_load(moe_bg_cublas *c, cudaStream_t s)
{
    memset(c, 0, sizeof *c);
    load_blas(c, s);
    load_lt(c);
}

void moe_bg_cublas_unload(moe_bg_cublas *c)
{
    if (c->h && c->destroy) c->destroy(c->h);
    if (c->lt && c->lt_destroy) c->lt_destroy(c->lt);
    /* the libraries stay mapped: cuBLAS registers exit handlers */
    memset(c, 0, sizeof *c);
}

/* ---- the peer pipeline ---------------------------------------------------------- */

/* The arrays that are the same for every group of a GEMM: one problem per
 * group, row-major MoE through column-major cuBLAS (transa = T, transb =
 * N, m = N_out, n = rows, k = K, lda = ldb = K, ldc = N_out). */
typedef struct {
    cublasOperation_t *ta, *tb;
    int *m1, *k1, *m2, *k2, *one;
    float *alpha, *beta;
} peer_consts;

static moe_status consts_make(moe_bg_peer *p)
{
    size_t E = (size_t)p->E;
    peer_consts *c = (peer_consts *)calloc(1, sizeof *c);
    if (!c) return moe_fail(MOE_ERR_NOMEM, "bench: cuBLAS peer arrays");
    p->consts = c;
    c->ta = (cublasOperation_t *)malloc(E * sizeof *c->ta), c->tb = (cublasOperation_t *)malloc(E * sizeof *c->tb);
    c->m1 = (int *)malloc(E * sizeof(int)), c->k1 = (int *)malloc(E * sizeof(int));
    c->m2 = (int *)malloc(E * sizeof(int)), c->k2 = (int *)malloc(E * sizeof(int)), c->one = (int *)malloc(E * sizeof(int));
    c->alpha = (float *)malloc(E * sizeof(float)), c->beta = (float *)malloc(E * sizeof(float));
    if (!c->ta || !c->tb || !c->m1 || !c->k1 || !c->m2 || !c->k2 || !c->one || !c->alpha || !c->beta)
        return moe_fail(MOE_ERR_NOMEM, "bench: cuBLAS peer arrays");
    for (size_t g = 0; g < E; g++) {
        c->ta[g] = CUBLAS_OP_T, c->tb[g] = CUBLAS_OP_N;
        c->m1[g] = 2 * p->I, c->k1[g] = p->H, c->m2[g] = p->H, c->k2[g] = p->I, c->one[g] = 1;
        c->alpha[g] = 1.0f, c->beta[g] = 0.0f;
    }
    return MOE_OK;
}

static void consts_free(peer_consts *c)
{
    if (!c) return;
    free(c->ta), free(c->tb), free(c->m1), free(c->k1), free(c->m2), free(c->k2), free(c->one), free(c->alpha),
        free(c->beta), free(c);
}

void moe_bg_peer_free(moe_bg_peer *p)
{
    cudaFree(p->lay), cudaFree(p->xs), cudaFree(p->y1), cudaFree(p->h), cudaFree(p->y2), cudaFree(p->d_ptrs);
    cudaFreeHost(p->h_counts), cudaFreeHost(p->h_ptrs);
    free(p->n_rows);
    consts_free((peer_consts *)p->consts);
    p->lay = p->xs = p->y1 = p->h = p->y2 = NULL, p->d_ptrs = p->h_ptrs = NULL, p->h_counts = NULL, p->n_rows = NULL;
    p->consts = NULL;
}

static moe_status peer_alloc(moe_bg_peer *p)
{
    size_t rows = (size_t)p->M * p->k, E = (size_t)p->E, bf = sizeof(__nv_bfloat16);
    MOE_CU(cudaMalloc(&p->lay, moe_cuda_fx_layout_bytes(p->M, p->k, p->E, 1)));
    moe_cuda_fx_layout_carve(p->lay, p->M, p->k, p->E, 1, &p->L);
    MOE_CU(cudaMalloc((void **)&p->xs, rows * p->H * bf));
    MOE_CU(cudaMalloc((void **)&p->y1, rows * 2 * p->I * bf));
    MOE_CU(cudaMalloc((void **)&p->h, rows * p->I * bf));
    MOE_CU(cudaMalloc((void **)&p->y2, rows * p->H * bf));
    MOE_CU(cudaMalloc((void **)&p->d_ptrs, MOE_BG_SETS * 6 * E * sizeof(void *)));
    MOE_CU(cudaMallocHost((void **)&p->h_ptrs, MOE_BG_SETS * 6 * E * sizeof(void *)));
    MOE_CU(cudaMallocHost((void **)&p->h_counts, E * sizeof(int32_t)));
    if (!(p->n_rows = (int *)calloc(MOE_BG_SETS * E, sizeof(int))))
        return moe_fail(MOE_ERR_NOMEM, "bench: cuBLAS peer group sizes");
    return consts_make(p);
}

moe_status moe_bg_peer_init(moe_bg_peer *p)
{
    p->lay = NULL, p->xs = p->y1 = p->h = p->y2 = NULL, p->d_ptrs = p->h_ptrs = NULL, p->h_counts = NULL;
    p->n_rows = NULL, p->consts = NULL;
    memset(p->ngroups, 0, sizeof p->ngroups);
    if (!p->c || !p->c->ok) return moe_fail(MOE_ERR_UNSUPPORTED, "bench: cuBLAS not loaded");
    moe_status st = peer_alloc(p);
    if (st) moe_bg_peer_free(p);
    return st;
}

/* align, counts to the host (the sync this peer cannot avoid), the groups
 * and their pointers, copied to the device on s */
static moe_status peer_groups(moe_bg_peer *p, int set, cudaStream_t s)
{
    moe_status st = moe_cuda_fx_align(p->ids[set], p->M, p->k, p->E, 1, &p->L, s);
    if (st) return st;
    MOE_CU(cudaMemcpyAsync(p->h_counts, p->L.counts, (size_t)p->E * sizeof(int32_t), cudaMemcpyDeviceToHost, s));
    MOE_CU(cudaStreamSynchronize(s));
    size_t E = (size_t)p->E, H = (size_t)p->H, I = (size_t)p->I;
    void **a1 = p->h_ptrs + (size_t)set * 6 * E, **b1 = a1 + E, **c1 = b1 + E, **a2 = c1 + E, **b2 = a2 + E,
         **c2 = b2 + E;
    int *n = p->n_rows + (size_t)set * E, g = 0;
    size_t row = 0;
    for (size_t e = 0; e < E; e++) {
        int ne = p->h_counts[e];
        if (ne <= 0) continue;
        a1[g] = (void *)(p->w1 + e * 2 * I * H), b1[g] = p->xs + row * H, c1[g] = p->y1 + row * 2 * I;
        a2[g] = (void *)(p->w2 + e * H * I), b2[g] = p->h + row * I, c2[g] = p->y2 + row * H;
        n[g++] = ne, row += (size_t)ne;
    }
    p->ngroups[set] = g;
    if (row != (size_t)p->M * p->k)
        return moe_fail(MOE_ERR_INTERNAL, "bench: counts sum to %zu, expected %d", row, p->M * p->k);
    MOE_CU(cudaMemcpyAsync(p->d_ptrs + (size_t)set * 6 * E, a1, 6 * E * sizeof(void *), cudaMemcpyHostToDevice, s));
    return MOE_OK;
}

static moe_status peer_gemm(const moe_bg_peer *p, int set, int second)
{
    const peer_consts *k = (const peer_consts *)p->consts;
    size_t E = (size_t)p->E;
    void **d = p->d_ptrs + (size_t)set * 6 * E + (second ? 3 * E : 0);
    const int *m = second ? k->m2 : k->m1, *kk = second ? k->k2 : k->k1, *n = p->n_rows + (size_t)set * E;
    MOE_BG_BLAS(p->c->gemm_grouped(p->c->h, k->ta, k->tb, m, n, kk, k->alpha, (const void *const *)d, CUDA_R_16BF, kk,
                                   (const void *const *)(d + E), CUDA_R_16BF, kk, k->beta, d + 2 * E, CUDA_R_16BF, m,
                                   p->ngroups[set], k->one, CUBLAS_COMPUTE_32F));
    return MOE_OK;
}

moe_status moe_bg_peer_forward(void *peer, int rep, cudaStream_t s)
{
    moe_bg_peer *p = (moe_bg_peer *)peer;
    int set = rep % MOE_BG_SETS, rows = p->M * p->k;
    moe_status st;
    if ((st = peer_groups(p, set, s)) ||
        (st = moe_cuda_fx_gather(p->x[set], MOE_BF16, p->H, p->k, &p->L, rows, p->xs, s)) ||
        (st = peer_gemm(p, set, 0)) || (st = moe_cuda_fx_act_rows(p->y1, rows, p->I, &p->act, MOE_BF16, p->h, s)) ||
        (st = peer_gemm(p, set, 1)))
        return st;
    return moe_cuda_fx_combine(p->y2, &p->L, p->w[set], p->M, p->k, p->H, MOE_BF16, p->out, s);
}

moe_status moe_bg_peer_prepare(moe_bg_peer *p, int set, cudaStream_t s) { return peer_groups(p, set, s); }

moe_status moe_bg_peer_gemms(void *peer, int rep, cudaStream_t s)
{
    (void)s; /* the handle is bound to the bench's stream */
    moe_bg_peer *p = (moe_bg_peer *)peer;
    moe_status st = peer_gemm(p, rep % MOE_BG_SETS, 0);
    return st ? st : peer_gemm(p, rep % MOE_BG_SETS, 1);
}
