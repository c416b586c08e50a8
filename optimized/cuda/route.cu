/* CUDA conformance backend: route. One thread per token, running the
 * reference's own token (moe_route_row_ref, reference/route_row.h, MOE_HD):
 * the scores with the canonical math, the softmax sum in expert order, the
 * argmax walk (ties to the lower id, the reference's NaN rule), the group
 * scores and the renormalization in slot order are all sequential per
 * token in the reference, so a token's arithmetic stays in one thread and
 * the tokens are the parallel dimension. Each thread has its own work rows
 * (4E floats, E + G bytes), reused across the tokens of its grid-stride
 * loop: in shared memory, one warp a block, when 32 rows fit (E <= ~270),
 * else in device scratch (bounded by the thread count, not M).
 * Routing finds no errors while it computes: the reference's checks are
 * the only failures. */
#include "cuda_internal.h"
#include "reference/elem.h"
#include "reference/route_row.h"
/* stage_checks.h declares C functions without a C++ guard */
extern "C" {
#include "reference/stage_checks.h"
}

namespace {

constexpr int kThreads = 64;     /* global-memory work rows: small blocks spread M = 4096 over every SM */
constexpr int kSmemThreads = 32; /* shared-memory work rows: one warp a block */
constexpr size_t kSmemMax = 160u << 10;

/* Where thread `me` of a block keeps its work rows: prob, sel, gscore,
 * xbuf (E floats each) at a float stride fs, ok and gok (E + G bytes) at a
 * byte stride bs. In shared memory the strides are odd in 4-byte words, so
 * the 32 threads of a warp, each at the same e of its own row, hit 32
 * different banks. */
struct rows {
    float *f;
    unsigned char *b;
    int64_t fs, bs;
};

/* p: a copy of the caller's params; its correction_bias pointer is a host
 * address and is never read here (the steps take bias). */
__device__ void route_token_loop(const moe_route_params &p, const float *bias, moe_dtype ld, const void *logits,
                                 int64_t M, int E, rows r, int64_t me, int64_t first, int64_t step, int32_t *ids,
                                 float *w)
{
    float *prob = r.f + me * r.fs, *sel = prob + E, *gscore = sel + E, *xbuf = gscore + E;
    unsigned char *ok = r.b + me * r.bs, *gok = ok + E;
    for (int64_t t = first; t < M; t += step) {
        const float *x;
        if (ld == MOE_F32) {
            x = (const float *)logits + t * E;
        } else { /* the reference converts the row to f32 first, the same decode */
            for (int e = 0; e < E; e++) xbuf[e] = moe_s_load(ld, logits, t * E + e);
            x = xbuf;
        }
        moe_route_row_ref(&p, bias, x, E, prob, sel, gscore, ok, gok, ids + t * p.topk, w + t * p.topk);
    }
}

__global__ void route_tokens_global(moe_route_params p, const float *bias, moe_dtype ld, const void *logits,
                                    int64_t M, int E, rows r, int32_t *ids, float *w)
{
    int64_t me = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    route_token_loop(p, bias, ld, logits, M, E, r, me, me, (int64_t)gridDim.x * blockDim.x, ids, w);
}

__global__ void route_tokens_shared(moe_route_params p, const float *bias, moe_dtype ld, const void *logits,
                                    int64_t M, int E, int64_t fs, int64_t bs, int32_t *ids, float *w)
{
    extern __shared__ float smem[];
    rows r = {smem, (unsigned char *)(smem + fs * blockDim.x), fs, bs};
    int64_t first = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    route_token_loop(p, bias, ld, logits, M, E, r, threadIdx.x, first, (int64_t)gridDim.x * blockDim.x, ids, w);
}

} // namespace

extern "C" moe_status moe_cuda_route(const moe_tensor *logits, const moe_route_params *p, moe_tensor *topk_ids,
                                     moe_tensor *topk_weights)
{
    moe_status st;
    if ((st = moe_cu_expect_dev(logits, "logits")) || (p && (st = moe_cu_expect_dev(p->correction_bias, "correction_bias"))) ||
        (st = moe_cu_expect_dev(topk_ids, "topk_ids")) || (st = moe_cu_expect_dev(topk_weights, "topk_weights")))
        return st;
    /* the check scans the bias for finiteness: its bytes come to the host */
    moe_tensor ml, mi, mw, mb;
    moe_route_params hp;
    const moe_tensor *l_m = moe_cu_mirror(logits, &ml, 0, &st);
    const moe_tensor *i_m = moe_cu_mirror(topk_ids, &mi, 0, &st);
    const moe_tensor *w_m = moe_cu_mirror(topk_weights, &mw, 0, &st);
    memset(&mb, 0, sizeof mb);
    if (p) {
        hp = *p;
        hp.correction_bias = moe_cu_mirror(p->correction_bias, &mb, 1, &st);
    }
    if (st == MOE_OK) st = moe_ref_check_route(l_m, p ? &hp : NULL, i_m, w_m);
    moe_cu_mirror_free(&mb);
    if (st != MOE_OK) return st;

    int64_t M = logits->shape[0];
    int E = (int)logits->shape[1];
    if (M == 0) return MOE_OK;
    int G = p->method == MOE_ROUTE_GROUPED_TOPK ? p->num_expert_group : 0;
    const float *bias = p->correction_bias ? (const float *)p->correction_bias->data : nullptr;
    int32_t *ids = (int32_t *)topk_ids->data;
    float *w = (float *)topk_weights->data;

    int64_t fs = 4 * (int64_t)E + 1, bs = ((int64_t)E + G + 3) / 4 * 4;
    if ((bs / 4) % 2 == 0) bs += 4;
    size_t smem = (size_t)kSmemThreads * (size_t)(fs * 4 + bs);
    if (smem <= kSmemMax) {
        MOE_CU(cudaFuncSetAttribute(route_tokens_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        route_tokens_shared<<<moe_cu_blocks(M, kSmemThreads), kSmemThreads, smem>>>(*p, bias, logits->dtype,
                                                                                  logits->data, M, E, fs, bs, ids, w);
        return moe_cu_launched("route_tokens_shared");
    }
    /* many experts: the work rows in device scratch, one per thread,
     * capped near 64 MiB */
    size_t per = (size_t)E * 4 * sizeof(float) + (size_t)(E + G);
    int64_t nthr = M, cap = (int64_t)((64u << 20) / per);
    if (cap < 512) cap = 512;
    if (nthr > cap) nthr = cap;
    unsigned blocks = (unsigned)((nthr + kThreads - 1) / kThreads);
    nthr = (int64_t)blocks * kThreads;
    size_t fbytes = (size_t)nthr * E * 4 * sizeof(float);
    char *scratch = (char *)moe_cu_scratch(fbytes + (size_t)nthr * (E + G), &st);
    if (!scratch) return st;
    rows r = {(float *)scratch, (unsigned char *)scratch + fbytes, 4 * (int64_t)E, (int64_t)E + G};
    route_tokens_global<<<blocks, kThreads>>>(*p, bias, logits->dtype, logits->data, M, E, r, ids, w);
    return moe_cu_launched("route_tokens_global");
}
