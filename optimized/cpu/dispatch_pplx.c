/* CPU backend: pplx-kernels all-to-all.
 *   dispatch  each pair's row in its expert by a counting sort over the
 *             pairs in the reference's walk (DP groups, sending ranks
 *             g*dp_size + i, their tokens i, i+dp_size, ...); then the pairs
 *             in parallel copy their rows and scales; rows past each
 *             expert's count are zeroed in parallel
 *   combine   the handle (num_tokens, src) is checked and indexed per
 *             expert in parallel, as the reference builds it; the weighted
 *             fmaf combine runs tokens in parallel
 * A handle the reference refuses goes to the reference, which reports it. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "cpu.h"
#include "cpu_internal.h"
#include "stage_checks.h"

moe_status moe_cpu_pplx_dispatch(const moe_pplx_config *cfg, const moe_tensor *x, const moe_tensor *x_scales, const moe_tensor *topk_ids, const moe_pplx_recv *out)
{
    moe_status s = moe_ref_check_pplx_dispatch(cfg, x, x_scales, topk_ids, out);
    if (s != MOE_OK) return s;
    int R = cfg->world_size, E = cfg->num_experts, num_dp = R / cfg->dp_size;
    int K = (int)topk_ids->shape[2];
    int64_t T = x->shape[1], H = x->shape[2], S = x_scales ? x_scales->shape[2] : 0, rows = moe_pplx_rows(cfg);
    int64_t n = num_dp * T * K;
    const int32_t *ids = (const int32_t *)topk_ids->data;
    int32_t *pos = malloc((size_t)(n ? n : 1) * sizeof *pos);
    int64_t *count = malloc((size_t)E * sizeof *count);
    if (!pos || !count) {
        free(pos), free(count);
        return moe_fail(MOE_ERR_NOMEM, "pplx dispatch: work space not available");
    }
    s = cpu_ep_batched_positions(ids, num_dp, T, K, cfg->dp_size, E, pos, count);
    if (s != MOE_OK) {
        free(pos), free(count);
        return s;
    }
    size_t xrow = moe_dtype_row_bytes(x->dtype, H), srow = (size_t)S * sizeof(float);
    char *ox = (char *)out->x->data, *os = out->x_scales ? (char *)out->x_scales->data : NULL;
    int32_t *src = (int32_t *)out->src->data;
#pragma omp parallel if ((int64_t)E * rows * (int64_t)(xrow + 1) >= CPU_PAR_MIN * 4)
    {
#pragma omp for schedule(static) nowait
        for (int64_t o = 0; o < E * rows; o++) {
            if (o % rows < count[o / rows]) continue;
            memset(ox + (size_t)o * xrow, 0, xrow);
            if (os) memset(os + (size_t)o * srow, 0, srow);
            src[o] = -1;
        }
#pragma omp for schedule(static)
        for (int64_t i = 0; i < n; i++) {
            int64_t gt = i / K, o = (int64_t)ids[i] * rows + pos[i];
            memcpy(ox + (size_t)o * xrow, (const char *)x->data + (size_t)gt * xrow, xrow);
            if (os) memcpy(os + (size_t)o * srow, (const char *)x_scales->data + (size_t)gt * srow, srow);
            src[o] = (int32_t)gt;
        }
    }
    for (int e = 0; e < E; e++) ((int32_t *)out->num_tokens->data)[e] = (int32_t)count[e];
    free(pos), free(count);
    return MOE_OK;
}

moe_status moe_cpu_pplx_combine(const moe_pplx_config *cfg, const moe_tensor *expert_y, const moe_tensor *num_tokens, const moe_tensor *src, const moe_tensor *topk_ids, const moe_tensor *topk_weights, moe_tensor *out)
{
    moe_status s = moe_ref_check_pplx_combine(cfg, expert_y, num_tokens, src, topk_ids, topk_weights, out);
    if (s != MOE_OK) return s;
    int R = cfg->world_size, E = cfg->num_experts, num_dp = R / cfg->dp_size;
    int64_t rows = moe_pplx_rows(cfg), T = topk_ids->shape[1], GT = num_dp * T;
    size_t n = (size_t)E * (size_t)GT;
    int32_t *row_of = malloc((n ? n : 1) * sizeof *row_of);
    if (!row_of) return moe_fail(MOE_ERR_NOMEM, "pplx combine: row index not available");
    const int32_t *cnt = (const int32_t *)num_tokens->data, *sv = (const int32_t *)src->data;
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad) if ((int64_t)E * (rows + GT) >= CPU_PAR_IDX_MIN)
    for (int e = 0; e < E; e++) {
        int32_t *ro = row_of + (int64_t)e * GT;
        for (int64_t i = 0; i < GT; i++) ro[i] = -1;
        if (cnt[e] < 0 || cnt[e] > rows) {
            bad = 1;
            continue;
        }
        for (int64_t i = 0; i < cnt[e]; i++) {
            int32_t g = sv[e * rows + i];
            if (g < 0 || g >= GT || ro[g] >= 0) {
                bad = 1;
                break;
            }
            ro[g] = (int32_t)i;
        }
    }
    int done = bad ? 0 : cpu_ep_combine_weighted(expert_y, row_of, topk_ids, topk_weights, out);
    free(row_of);
    if (done < 0) return moe_fail(MOE_ERR_NOMEM, "pplx combine: work space not available");
    if (!done) /* a bad handle: the reference names it */
        return moe_ref_pplx_combine(cfg, expert_y, num_tokens, src, topk_ids, topk_weights, out);
    return MOE_OK;
}
