/* pplx-kernels all-to-all: dispatch into [E_loc, max_num_tokens*num_dp, H]
 * with per-expert counts, and the weighted combine
 * (anchors/dispatch_sorting.md D, section 0 fact 8). Upstream places rows
 * with atomics, so dispatch rows are SET-comparable per expert; counts and
 * the combine (given its FMA) are EXACT. */
#include <stdlib.h>
#include <string.h>
#include "elem.h"
#include "moe/dispatch.h"
#include "stage_checks.h"

static moe_status check_cfg(const moe_pplx_config *cfg, int *E_loc, int *num_dp)
{
    if (!cfg) return moe_fail(MOE_ERR_NULL, "cfg: must not be NULL");
    moe_status s = moe_ep_check_world(cfg->world_size, cfg->num_experts, E_loc);
    if (s != MOE_OK) return s;
    if (cfg->dp_size < 1 || cfg->world_size % cfg->dp_size)
        return moe_fail(MOE_ERR_INVALID_ARG, "dp_size %d: must divide world_size %d", cfg->dp_size,
                        cfg->world_size);
    if (cfg->max_num_tokens < 0)
        return moe_fail(MOE_ERR_INVALID_ARG, "max_num_tokens %lld: must be >= 0",
                        (long long)cfg->max_num_tokens);
    if (num_dp) *num_dp = cfg->world_size / cfg->dp_size;
    return MOE_OK;
}

int64_t moe_pplx_rows(const moe_pplx_config *cfg)
{
    int num_dp;
    if (check_cfg(cfg, NULL, &num_dp) != MOE_OK) return -1;
    return cfg->max_num_tokens * num_dp;
}

/* indices are uint32 and the combine waits for all K contributions (D) */
static const char *const pplx_no_neg1 =
    "pplx has no -1: indices are uint32 and every one of the K slots must name an expert";
/* out_expert_x holds max_num_tokens*num_dp rows per expert, one per token */
static const char *const pplx_distinct =
    "an expert holds one row per token (max_num_tokens*num_dp rows); ids in a row must be distinct";

static moe_status check_ids(const moe_pplx_config *cfg, const moe_tensor *ids, int num_dp,
                            int64_t T, int *K)
{
    moe_status s = moe_ep_check_ids(ids, "topk_ids", num_dp, T, cfg->num_experts, pplx_no_neg1,
                                    pplx_distinct, K);
    if (s != MOE_OK) return s;
    if (ids->shape[1] > cfg->max_num_tokens)
        return moe_fail(MOE_ERR_SHAPE,
                        "topk_ids: %lld tokens per DP group exceed max_num_tokens %lld",
                        (long long)ids->shape[1], (long long)cfg->max_num_tokens);
    return MOE_OK;
}

moe_status moe_ref_check_pplx_dispatch(const moe_pplx_config *cfg, const moe_tensor *x,
                                       const moe_tensor *x_scales, const moe_tensor *topk_ids,
                                       const moe_pplx_recv *out)
{
    int E_loc, num_dp, K;
    moe_status s = check_cfg(cfg, &E_loc, &num_dp);
    if (s != MOE_OK) return s;
    int R = cfg->world_size;
    const int64_t xs[3] = {num_dp, -1, -1};
    if ((s = moe_ep_expect(x, "x", -1, 3, xs, "[num_dp, T, H]")) != MOE_OK) return s;
    int64_t T = x->shape[1], H = x->shape[2], S = 0, rows = moe_pplx_rows(cfg);
    if ((s = check_ids(cfg, topk_ids, num_dp, T, &K)) != MOE_OK) return s;
    if (x_scales) {
        const int64_t ss[3] = {num_dp, T, -1};
        s = moe_ep_expect(x_scales, "x_scales", MOE_F32, 3, ss, "[num_dp, T, S]");
        if (s != MOE_OK) return s;
        S = x_scales->shape[2];
    }
    if (!out) return moe_fail(MOE_ERR_NULL, "out: must not be NULL");
    const int64_t ox[4] = {R, E_loc, rows, H}, os[4] = {R, E_loc, rows, S};
    const int64_t on[2] = {R, E_loc}, oi[3] = {R, E_loc, rows};
    const char *lx = "[R, E_loc, max_num_tokens*num_dp, H]";
    if ((s = moe_ep_expect(out->x, "out x", x->dtype, 4, ox, lx)) != MOE_OK) return s;
    if (!x_scales != !out->x_scales)
        return moe_fail(MOE_ERR_NULL, "out x_scales: must be given exactly when x_scales is");
    if (x_scales && (s = moe_ep_expect(out->x_scales, "out x_scales", MOE_F32, 4, os,
                                       "[R, E_loc, max_num_tokens*num_dp, S]")) != MOE_OK)
        return s;
    if ((s = moe_ep_expect(out->num_tokens, "num_tokens", MOE_I32, 2, on, "[R, E_loc]")) != MOE_OK)
        return s;
    return moe_ep_expect(out->src, "src", MOE_I32, 3, oi, "[R, E_loc, max_num_tokens*num_dp]");
}

moe_status moe_ref_pplx_dispatch(const moe_pplx_config *cfg, const moe_tensor *x,
                                 const moe_tensor *x_scales, const moe_tensor *topk_ids,
                                 const moe_pplx_recv *out)
{
    moe_status s = moe_ref_check_pplx_dispatch(cfg, x, x_scales, topk_ids, out);
    if (s != MOE_OK) return s;
    int R = cfg->world_size, E = cfg->num_experts, E_loc = E / R, num_dp = R / cfg->dp_size;
    int K = (int)topk_ids->shape[2];
    int64_t T = x->shape[1], H = x->shape[2], S = x_scales ? x_scales->shape[2] : 0, rows = moe_pplx_rows(cfg);
    const int32_t *ids = (const int32_t *)topk_ids->data;
    size_t n_pos = (size_t)(num_dp * T * K);
    int32_t *pos = malloc((n_pos ? n_pos : 1) * sizeof *pos);
    int64_t *count = malloc((size_t)E * sizeof *count);
    if (!pos || !count) {
        free(pos), free(count);
        return moe_fail(MOE_ERR_NOMEM, "pplx dispatch: work space not available");
    }
    /* DP rank i of group g sends the group's tokens i, i+dp_size, ...
     * (intranode_dispatch.cu:97); rows go in ascending (sending rank,
     * token) order, our fixed choice for upstream's atomics */
    moe_ep_batched_positions(ids, num_dp, T, K, cfg->dp_size, E, pos, count);
    if (out->x->nbytes) memset(out->x->data, 0, out->x->nbytes);
    if (out->x_scales && out->x_scales->nbytes)
        memset(out->x_scales->data, 0, out->x_scales->nbytes);
    int32_t *src = (int32_t *)out->src->data;
    for (int64_t i = 0; i < R * E_loc * rows; i++) src[i] = -1;
    size_t xrow = moe_dtype_row_bytes(x->dtype, H), srow = (size_t)S * sizeof(float);
    for (int64_t gt = 0; gt < num_dp * T; gt++)
        for (int k = 0; k < K; k++) {
            int64_t o = (int64_t)ids[gt * K + k] * rows + pos[gt * K + k];
            memcpy((char *)out->x->data + o * (int64_t)xrow,
                   (const char *)x->data + gt * (int64_t)xrow, xrow);
            if (x_scales)
                memcpy((char *)out->x_scales->data + o * (int64_t)srow,
                       (const char *)x_scales->data + gt * (int64_t)srow, srow);
            src[o] = (int32_t)gt;
        }
    for (int e = 0; e < E; e++) ((int32_t *)out->num_tokens->data)[e] = (int32_t)count[e];
    free(pos), free(count);
    return MOE_OK;
}

moe_status moe_ref_check_pplx_combine(const moe_pplx_config *cfg, const moe_tensor *expert_y,
                                      const moe_tensor *num_tokens, const moe_tensor *src,
                                      const moe_tensor *topk_ids, const moe_tensor *topk_weights,
                                      const moe_tensor *out)
{
    int E_loc, num_dp, K;
    moe_status s = check_cfg(cfg, &E_loc, &num_dp);
    if (s != MOE_OK) return s;
    int R = cfg->world_size;
    int64_t rows = moe_pplx_rows(cfg);
    const int64_t ys[4] = {R, E_loc, rows, -1};
    if ((s = moe_ep_expect(expert_y, "expert_y", -1, 4, ys,
                           "[R, E_loc, max_num_tokens*num_dp, H]")) != MOE_OK)
        return s;
    if (!moe_s_is_storage(expert_y->dtype))
        return moe_fail(MOE_ERR_DTYPE, "expert_y: dtype %s, expected f32, bf16 or f16",
                        moe_dtype_get(expert_y->dtype)->name);
    int64_t H = expert_y->shape[3];
    const int64_t ns[2] = {R, E_loc}, is[3] = {R, E_loc, rows};
    if ((s = moe_ep_expect(num_tokens, "num_tokens", MOE_I32, 2, ns, "[R, E_loc]")) != MOE_OK)
        return s;
    if ((s = moe_ep_expect(src, "src", MOE_I32, 3, is, "[R, E_loc, max_num_tokens*num_dp]")) !=
        MOE_OK)
        return s;
    if ((s = check_ids(cfg, topk_ids, num_dp, -1, &K)) != MOE_OK) return s;
    int64_t T = topk_ids->shape[1];
    const int64_t ws[3] = {num_dp, T, K}, os[3] = {num_dp, T, H};
    s = moe_ep_expect(topk_weights, "topk_weights", MOE_F32, 3, ws, "[num_dp, T, K]");
    if (s != MOE_OK) return s;
    if ((s = moe_ep_expect(out, "out", -1, 3, os, "[num_dp, T, H]")) != MOE_OK) return s;
    /* upstream writes bf16 or f16; f32 output is our extension */
    if (!moe_s_is_storage(out->dtype))
        return moe_fail(MOE_ERR_DTYPE, "out: dtype %s, expected bf16, f16 or f32",
                        moe_dtype_get(out->dtype)->name);
    return MOE_OK;
}

moe_status moe_ref_pplx_combine(const moe_pplx_config *cfg, const moe_tensor *expert_y,
                                const moe_tensor *num_tokens, const moe_tensor *src,
                                const moe_tensor *topk_ids, const moe_tensor *topk_weights,
                                moe_tensor *out)
{
    moe_status s = moe_ref_check_pplx_combine(cfg, expert_y, num_tokens, src, topk_ids, topk_weights, out);
    if (s != MOE_OK) return s;
    int R = cfg->world_size, E = cfg->num_experts, E_loc = E / R, num_dp = R / cfg->dp_size;
    int64_t rows = moe_pplx_rows(cfg), T = topk_ids->shape[1];

    /* rebuild (expert, DP-group token) -> row from the handle, so any
     * dispatch order combines the same */
    size_t n = (size_t)E * (size_t)(num_dp * T);
    int32_t *row_of = malloc((n ? n : 1) * sizeof *row_of);
    if (!row_of) return moe_fail(MOE_ERR_NOMEM, "pplx combine: row index not available");
    for (size_t i = 0; i < n; i++) row_of[i] = -1;
    const int32_t *cnt = (const int32_t *)num_tokens->data, *sv = (const int32_t *)src->data;
    s = MOE_OK;
    for (int e = 0; e < E && s == MOE_OK; e++) {
        if (cnt[e] < 0 || cnt[e] > rows) {
            s = moe_fail(MOE_ERR_INVALID_ARG, "num_tokens[%d][%d] = %d: must be in [0, %lld]",
                         e / E_loc, e % E_loc, (int)cnt[e], (long long)rows);
            break;
        }
        for (int64_t i = 0; i < cnt[e]; i++) {
            int32_t g = sv[e * rows + i];
            if (g < 0 || g >= num_dp * T || row_of[(int64_t)e * num_dp * T + g] >= 0) {
                s = moe_fail(MOE_ERR_INVALID_ARG, "src[%d][%d][%lld] = %d: %s", e / E_loc,
                             e % E_loc, (long long)i, (int)g,
                             (g < 0 || g >= num_dp * T) ? "not a token index in [0, num_dp*T)"
                                                        : "token appears twice for one expert");
                break;
            }
            row_of[(int64_t)e * num_dp * T + g] = (int32_t)i;
        }
    }
    if (s == MOE_OK)
        s = moe_ep_combine_weighted(expert_y, row_of, topk_ids, topk_weights, out, "src");
    free(row_of);
    return s;
}
