/* Loops the CPU dispatch files share (reference/dispatch_common.c's
 * counterparts): the batched placement of DeepEP-LL and pplx as a
 * counting sort, and their weighted combine with tokens in parallel. */
#include <omp.h>
#include <stdlib.h>
#include "cpu_internal.h"

moe_status cpu_ep_batched_positions(const int32_t *ids, int64_t G, int64_t T, int K, int dp, int num_experts,
                                    int32_t *pos, int64_t *count)
{
    int64_t n = G * T * K;
    if (dp == 1) /* the walk is the flat (g, t, k) order: rank the ids themselves */
        return cpu_bucket_rank(ids, n, num_experts, pos, count);
    /* sending rank g*dp + i holds tokens i, i+dp, ... of group g: list the
     * pairs in that walk order, rank them, and scatter the ranks back */
    int64_t *ord = malloc((size_t)(n ? n : 1) * sizeof *ord);
    int32_t *key = malloc((size_t)(n ? n : 1) * 2 * sizeof *key);
    if (!ord || !key) {
        free(ord), free(key);
        return moe_fail(MOE_ERR_NOMEM, "batched positions: %lld pairs", (long long)n);
    }
    int32_t *rk = key + n;
    int64_t m = 0;
    for (int64_t g = 0; g < G; g++)
        for (int i = 0; i < dp; i++)
            for (int64_t t = i; t < T; t += dp)
                for (int k = 0; k < K; k++) ord[m++] = (g * T + t) * K + k;
#pragma omp parallel for schedule(static) if (n >= CPU_PAR_IDX_MIN)
    for (int64_t j = 0; j < n; j++) key[j] = ids[ord[j]];
    moe_status s = cpu_bucket_rank(key, n, num_experts, rk, count);
    if (s == MOE_OK) {
#pragma omp parallel for schedule(static) if (n >= CPU_PAR_IDX_MIN)
        for (int64_t j = 0; j < n; j++) pos[ord[j]] = rk[j];
    }
    free(ord), free(key);
    return s;
}

int cpu_ep_combine_weighted(const moe_tensor *y, const int32_t *row_of, const moe_tensor *topk_ids,
                            const moe_tensor *topk_weights, moe_tensor *out)
{
    int64_t rows = y->shape[2], H = y->shape[3];
    int64_t G = topk_ids->shape[0], T = topk_ids->shape[1];
    int K = (int)topk_ids->shape[2];
    const int32_t *ids = (const int32_t *)topk_ids->data;
    const float *w = (const float *)topk_weights->data;
    int missing = 0;
#pragma omp parallel for schedule(static) reduction(| : missing) if (G * T * K >= CPU_PAR_IDX_MIN)
    for (int64_t gt = 0; gt < G * T; gt++)
        for (int k = 0; k < K; k++) {
            int32_t e = ids[gt * K + k];
            if (e >= 0 && row_of[e * G * T + gt] < 0) missing = 1;
        }
    if (missing) return 0;
    int failed = 0;
#pragma omp parallel if (G * T * H >= CPU_PAR_MIN)
    {
        float *acc = malloc((size_t)(H > 0 ? H : 1) * 2 * sizeof *acc);
        if (!acc) {
#pragma omp atomic write
            failed = 1;
        }
        float *v = acc + H;
#pragma omp for schedule(static)
        for (int64_t gt = 0; gt < G * T; gt++) {
            if (!acc) continue;
            for (int64_t c = 0; c < H; c++) acc[c] = 0.0f;
            /* each channel sees k = 0..K-1 in order: acc = fmaf(y, w, acc) */
            for (int k = 0; k < K; k++) {
                int32_t e = ids[gt * K + k];
                if (e < 0) continue;
                cpu_load_row(y->dtype, y->data, ((int64_t)e * rows + row_of[e * G * T + gt]) * H, H, v);
                cpu_fma_row(acc, w[gt * K + k], v, H, 1);
            }
            cpu_store_row(out->dtype, out->data, gt * H, H, acc);
        }
        free(acc);
    }
    return failed ? -1 : 1;
}
