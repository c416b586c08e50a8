/* CUDA conformance backend: pplx-kernels all-to-all (reference/dispatch_pplx.c),
 * every rank simulated on one GPU.
 *   dispatch         the reference gives each pair (g, t, k) the next row of
 *                    its expert in the walk "DP groups ascending, sending
 *                    ranks g*dp_size + i ascending, their tokens i,
 *                    i + dp_size, ... ascending, slots ascending"
 *                    (moe_ep_batched_positions). Each pair's key (its
 *                    expert) is written at its walk position, and the
 *                    stable parallel rank (moe_cu_stable_rank, rank.cuh) gives
 *                    the row: the same rows as the reference, no atomics in
 *                    the placement. num_tokens are the rank's counts. src is
 *                    scattered from the pairs, then the rows and scales are
 *                    gathered by src (zero rows past the counts).
 *   dispatch_atomic  upstream's placement: one thread per pair takes
 *                    atomicAdd(&num_tokens[e], 1) as its row, so the rows of
 *                    an expert come in arrival order; src and the copied
 *                    rows are paired exactly as in the deterministic kernel
 *                    (SET against the reference).
 *   combine          the handle (num_tokens, src) is indexed into
 *                    row_of[e][g*T + t] by one thread per handle entry, a
 *                    compare-and-swap finding a token named twice; a bad
 *                    count, token index or a pair without a row is flagged,
 *                    and the reference then runs on host copies and reports
 *                    it. Otherwise one thread per output element (token,
 *                    channel) runs acc = fmaf(y_k, w_k, acc) over k = 0..K-1
 *                    from +0.0f (the reference's explicit fmaf, upstream's
 *                    contracted multiply-add) and rounds once. */
#include <string.h>
#include "cuda_internal.h"
#include "moe/dispatch.h"
#include "rank.cuh"
#include "reference/elem.h"
#include "rows.cuh"
/* stage_checks.h declares C functions without a C++ guard */
extern "C" {
#include "reference/stage_checks.h"
}

/* Walk position of flat pair p = (g*T + t)*K + k: within group g, sending
 * rank i = t % dp holds tokens i, i+dp, ...; ranks before it hold
 * ceil((T - i') / dp) tokens each. */
static __device__ __forceinline__ int64_t walk_of(int64_t p, int64_t T, int K, int dp)
{
    int64_t gt = p / K, k = p % K, g = gt / T, t = gt % T, i = t % dp, q = t / dp;
    for (int64_t j = 0; j < i; j++) q += (T - j + dp - 1) / dp;
    return (g * T + q) * K + k;
}

static __global__ void pplx_keys_kernel(const int32_t *__restrict__ ids, int64_t n, int64_t T, int K, int dp,
                                        int32_t *keys)
{
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < n; p += (int64_t)gridDim.x * blockDim.x)
        keys[walk_of(p, T, K, dp)] = ids[p];
}

static __global__ void pplx_place_kernel(const int32_t *__restrict__ ids, const int32_t *__restrict__ rank,
                                         int64_t n, int64_t T, int K, int dp, int64_t rows, int32_t *src)
{
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < n; p += (int64_t)gridDim.x * blockDim.x)
        src[(int64_t)ids[p] * rows + rank[walk_of(p, T, K, dp)]] = (int32_t)(p / K);
}

static __global__ void pplx_place_atomic_kernel(const int32_t *__restrict__ ids, int64_t n, int K, int64_t rows,
                                                int32_t *count, int32_t *src)
{
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < n; p += (int64_t)gridDim.x * blockDim.x) {
        int32_t e = ids[p];
        int32_t row = atomicAdd(&count[e], 1);
        src[(int64_t)e * rows + row] = (int32_t)(p / K);
    }
}

static moe_status pplx_dispatch(const moe_pplx_config *cfg, const moe_tensor *x, const moe_tensor *x_scales,
                                const moe_tensor *topk_ids, const moe_pplx_recv *out, int atomic)
{
    moe_status st;
    if ((st = moe_cu_expect_dev(x, "x")) || (st = moe_cu_expect_dev(x_scales, "x_scales")) ||
        (st = moe_cu_expect_dev(topk_ids, "topk_ids")))
        return st;
    if (out && ((st = moe_cu_expect_dev(out->x, "out x")) || (st = moe_cu_expect_dev(out->x_scales, "out x_scales")) ||
                (st = moe_cu_expect_dev(out->num_tokens, "num_tokens")) || (st = moe_cu_expect_dev(out->src, "src"))))
        return st;
    moe_tensor m[7];
    st = MOE_OK;
    /* the check scans the ids (no -1, distinct in a row); the rest is shape */
    const moe_tensor *hx = moe_cu_mirror(x, &m[0], 0, &st), *hs = moe_cu_mirror(x_scales, &m[1], 0, &st),
                     *hi = moe_cu_mirror(topk_ids, &m[2], 1, &st);
    moe_pplx_recv hr, *hrp = NULL;
    if (out) {
        hr.x = (moe_tensor *)moe_cu_mirror(out->x, &m[3], 0, &st);
        hr.x_scales = (moe_tensor *)moe_cu_mirror(out->x_scales, &m[4], 0, &st);
        hr.num_tokens = (moe_tensor *)moe_cu_mirror(out->num_tokens, &m[5], 0, &st);
        hr.src = (moe_tensor *)moe_cu_mirror(out->src, &m[6], 0, &st);
        hrp = &hr;
    }
    if (st == MOE_OK) st = moe_ref_check_pplx_dispatch(cfg, hx, hs, hi, hrp);
    moe_cu_mirror_free(&m[2]);
    if (st) return st;

    int R = cfg->world_size, E = cfg->num_experts, num_dp = R / cfg->dp_size, K = (int)topk_ids->shape[2];
    int64_t T = x->shape[1], H = x->shape[2], S = x_scales ? x_scales->shape[2] : 0, rows = moe_pplx_rows(cfg);
    int64_t n = num_dp * T * K, slots = (int64_t)E * rows;
    const int32_t *ids = (const int32_t *)topk_ids->data;
    int32_t *src = (int32_t *)out->src->data, *count = (int32_t *)out->num_tokens->data;
    if (slots > 0) MOE_CU(cudaMemsetAsync(src, 0xFF, (size_t)slots * 4, cudaStreamPerThread));
    if (atomic) {
        MOE_CU(cudaMemsetAsync(count, 0, (size_t)E * 4, cudaStreamPerThread));
        if (n > 0) {
            pplx_place_atomic_kernel<<<moe_cu_blocks(n, 256), 256>>>(ids, n, K, rows, count, src);
            if ((st = moe_cu_launched("pplx_place_atomic_kernel"))) return st;
        }
    } else {
        size_t b_keys = moe_cu_align256((size_t)n * 4);
        uint8_t *ws = (uint8_t *)moe_cu_scratch(2 * b_keys + moe_cu_stable_rank_bytes(n, E), &st);
        if (!ws) return st;
        int32_t *keys = (int32_t *)ws, *rank = (int32_t *)(ws + b_keys), *hist = (int32_t *)(ws + 2 * b_keys);
        if (n > 0) {
            pplx_keys_kernel<<<moe_cu_blocks(n, 256), 256>>>(ids, n, T, K, cfg->dp_size, keys);
            if ((st = moe_cu_launched("pplx_keys_kernel"))) return st;
        }
        /* every id names an expert and no token holds one twice (checked),
         * so no expert gets more than num_dp*T <= rows rows: no capacity */
        if ((st = moe_cu_stable_rank(keys, n, E, rank, count, -1, NULL, hist))) return st;
        if (n > 0) {
            pplx_place_kernel<<<moe_cu_blocks(n, 256), 256>>>(ids, rank, n, T, K, cfg->dp_size, rows, src);
            if ((st = moe_cu_launched("pplx_place_kernel"))) return st;
        }
    }
    /* rows and scales by src (x is [num_dp*T] rows), zero past the counts */
    st = moe_cu_gather_rows(x->data, out->x->data, slots, moe_dtype_row_bytes(x->dtype, H), src, 1, 0);
    if (st == MOE_OK && x_scales)
        st = moe_cu_gather_rows(x_scales->data, out->x_scales->data, slots, (size_t)S * sizeof(float), src, 1, 0);
    return st;
}

extern "C" moe_status moe_cuda_pplx_dispatch(const moe_pplx_config *cfg, const moe_tensor *x,
                                             const moe_tensor *x_scales, const moe_tensor *topk_ids,
                                             const moe_pplx_recv *out)
{
    return pplx_dispatch(cfg, x, x_scales, topk_ids, out, 0);
}

extern "C" moe_status moe_cuda_pplx_dispatch_atomic(const moe_pplx_config *cfg, const moe_tensor *x,
                                                    const moe_tensor *x_scales, const moe_tensor *topk_ids,
                                                    const moe_pplx_recv *out)
{
    return pplx_dispatch(cfg, x, x_scales, topk_ids, out, 1);
}

/* row_of[e*GT + g] = i for src[e][i] = g, i < num_tokens[e]; a count
 * outside [0, rows], a token index outside [0, GT) or a token named twice
 * for one expert sets flags[0] (the reference reports which). */
static __global__ void pplx_handle_kernel(const int32_t *__restrict__ cnt, const int32_t *__restrict__ src,
                                          int64_t E, int64_t rows, int64_t GT, int32_t *row_of, int32_t *flags)
{
    for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < E * rows;
         o += (int64_t)gridDim.x * blockDim.x) {
        int64_t e = o / rows, i = o % rows;
        int32_t c = cnt[e];
        if (c < 0 || c > rows) {
            if (i == 0) atomicOr(flags, 1);
            continue;
        }
        if (i >= c) continue;
        int32_t g = src[o];
        if (g < 0 || g >= GT || atomicCAS(&row_of[e * GT + g], -1, (int32_t)i) != -1) atomicOr(flags, 1);
    }
}

/* A pair whose expert holds no row for its token: flags[0]. */
static __global__ void pplx_pairs_kernel(const int32_t *__restrict__ ids, int64_t GT, int K,
                                         const int32_t *__restrict__ row_of, int32_t *flags)
{
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < GT * K; p += (int64_t)gridDim.x * blockDim.x) {
        int32_t e = ids[p];
        if (e >= 0 && row_of[(int64_t)e * GT + p / K] < 0) atomicOr(flags, 1);
    }
}

/* out[gt, c] = round(fmaf chain over k ascending), as moe_ep_combine_weighted.
 * Nothing is written when the handle was flagged (the reference, which
 * checks the whole handle first, writes nothing either). */
static __global__ void pplx_combine_kernel(moe_dtype yt, const void *__restrict__ y, int64_t rows, int64_t H,
                                           const int32_t *__restrict__ ids, const float *__restrict__ w,
                                           int64_t GT, int K, const int32_t *__restrict__ row_of, moe_dtype ot,
                                           void *out, const int32_t *flags)
{
    if (*(volatile const int32_t *)flags) return;
    for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < GT * H; o += (int64_t)gridDim.x * blockDim.x) {
        int64_t gt = o / H, c = o % H;
        float acc = 0.0f;
        for (int k = 0; k < K; k++) {
            int32_t e = ids[gt * K + k];
            if (e < 0) continue;
            int64_t base = ((int64_t)e * rows + row_of[(int64_t)e * GT + gt]) * H;
            acc = fmaf(moe_s_load(yt, y, base + c), w[gt * K + k], acc);
        }
        moe_s_store(ot, out, o, acc);
    }
}

extern "C" moe_status moe_cuda_pplx_combine(const moe_pplx_config *cfg, const moe_tensor *expert_y,
                                            const moe_tensor *num_tokens, const moe_tensor *src,
                                            const moe_tensor *topk_ids, const moe_tensor *topk_weights,
                                            moe_tensor *out)
{
    moe_status st;
    if ((st = moe_cu_expect_dev(expert_y, "expert_y")) || (st = moe_cu_expect_dev(num_tokens, "num_tokens")) ||
        (st = moe_cu_expect_dev(src, "src")) || (st = moe_cu_expect_dev(topk_ids, "topk_ids")) ||
        (st = moe_cu_expect_dev(topk_weights, "topk_weights")) || (st = moe_cu_expect_dev(out, "out")))
        return st;
    moe_tensor m[6];
    st = MOE_OK;
    /* the check scans the ids; the handle is the stage's to judge */
    const moe_tensor *hy = moe_cu_mirror(expert_y, &m[0], 0, &st), *hn = moe_cu_mirror(num_tokens, &m[1], 0, &st),
                     *hs = moe_cu_mirror(src, &m[2], 0, &st), *hi = moe_cu_mirror(topk_ids, &m[3], 1, &st),
                     *hw = moe_cu_mirror(topk_weights, &m[4], 0, &st), *ho = moe_cu_mirror(out, &m[5], 0, &st);
    if (st == MOE_OK) st = moe_ref_check_pplx_combine(cfg, hy, hn, hs, hi, hw, ho);
    moe_cu_mirror_free(&m[3]);
    if (st) return st;

    int E = cfg->num_experts, K = (int)topk_ids->shape[2];
    int64_t rows = moe_pplx_rows(cfg), GT = topk_ids->shape[0] * topk_ids->shape[1], H = expert_y->shape[3];
    size_t nro = (size_t)E * (size_t)GT;
    int32_t *row_of = (int32_t *)moe_cu_scratch(nro * 4, &st);
    int32_t *flags = row_of ? moe_cu_flags(&st) : NULL;
    if (!row_of || !flags) return st;
    if (nro) MOE_CU(cudaMemsetAsync(row_of, 0xFF, nro * 4, cudaStreamPerThread));
    if ((int64_t)E * rows > 0) {
        pplx_handle_kernel<<<moe_cu_blocks((int64_t)E * rows, 256), 256>>>(
            (const int32_t *)num_tokens->data, (const int32_t *)src->data, E, rows, GT, row_of, flags);
        if ((st = moe_cu_launched("pplx_handle_kernel"))) return st;
    }
    if (GT * K > 0) {
        pplx_pairs_kernel<<<moe_cu_blocks(GT * K, 256), 256>>>((const int32_t *)topk_ids->data, GT, K, row_of, flags);
        if ((st = moe_cu_launched("pplx_pairs_kernel"))) return st;
    }
    if (GT * H > 0) {
        pplx_combine_kernel<<<moe_cu_blocks(GT * H, 256), 256>>>(
            expert_y->dtype, expert_y->data, rows, H, (const int32_t *)topk_ids->data,
            (const float *)topk_weights->data, GT, K, row_of, out->dtype, out->data, flags);
        if ((st = moe_cu_launched("pplx_combine_kernel"))) return st;
    }
    int32_t hf[64];
    if ((st = moe_cu_flags_get(flags, hf))) return st;
    if (!hf[0]) return MOE_OK;
    /* a bad handle: the reference on host copies names it */
    moe_tensor h[5], ho2;
    memset(h, 0, sizeof h), memset(&ho2, 0, sizeof ho2);
    const moe_tensor *dv[5] = {expert_y, num_tokens, src, topk_ids, topk_weights};
    for (int i = 0; i < 5 && st == MOE_OK; i++) st = moe_cu_to_host(dv[i], &h[i]);
    if (st == MOE_OK && (st = moe_tensor_alloc(&ho2, out->dtype, out->ndim, out->shape)) == MOE_OK) {
        st = moe_ref_pplx_combine(cfg, &h[0], &h[1], &h[2], &h[3], &h[4], &ho2);
        if (st == MOE_OK)
            st = moe_fail(MOE_ERR_INTERNAL, "pplx combine: the device flagged the handle, the reference accepted it");
    }
    for (int i = 0; i < 5; i++) moe_tensor_free(&h[i]);
    moe_tensor_free(&ho2);
    return st;
}
