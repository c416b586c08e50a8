/* DeepEP normal (high-throughput) mode: get_dispatch_layout, dispatch and
 * combine (anchors/dispatch_sorting.md A.2-A.4, section 0 facts 1-2).
 * Everything here is deterministic upstream, so every output is EXACT. */
#include <stdlib.h>
#include <string.h>
#include "dispatch_core.h"
#include "elem.h"
#include "moe/dispatch.h"
#include "stage_checks.h"

static moe_status check_cfg(const moe_deepep_config *cfg, int *E_loc, int *nodes)
{
    if (!cfg) return moe_fail(MOE_ERR_NULL, "cfg: must not be NULL");
    moe_status s = moe_ep_check_world(cfg->world_size, cfg->num_experts, E_loc);
    if (s != MOE_OK) return s;
    return moe_ep_check_nodes(cfg->world_size, cfg->num_ranks_per_node, nodes);
}

/* -1 means "no expert" in DeepEP (A.2 ignores it, A.3 forwards it as -1);
 * a repeated expert is legal and counted once per (t, k) pair (A.2). */
static moe_status check_ids(const moe_deepep_config *cfg, const moe_tensor *topk_ids, int64_t T,
                            int *K)
{
    return moe_ep_check_ids(topk_ids, "topk_ids", cfg->world_size, T, cfg->num_experts, NULL, NULL,
                            K);
}

moe_status moe_ref_check_deepep_layout(const moe_deepep_config *cfg, const moe_tensor *topk_ids,
                                       const moe_deepep_layout *out)
{
    int E_loc, nodes, K;
    moe_status s = check_cfg(cfg, &E_loc, &nodes);
    if (s != MOE_OK) return s;
    if ((s = check_ids(cfg, topk_ids, -1, &K)) != MOE_OK) return s;
    if (!out) return moe_fail(MOE_ERR_NULL, "out: must not be NULL");
    int R = cfg->world_size, E = cfg->num_experts;
    int64_t T = topk_ids->shape[1];
    const int64_t pe[2] = {R, E}, pr[2] = {R, R}, pn[2] = {R, nodes}, in[3] = {R, T, R};
    s = moe_ep_expect(out->num_tokens_per_expert, "num_tokens_per_expert", MOE_I32, 2, pe,
                      "[R, E]");
    if (s != MOE_OK) return s;
    s = moe_ep_expect(out->num_tokens_per_rank, "num_tokens_per_rank", MOE_I32, 2, pr, "[R, R]");
    if (s != MOE_OK) return s;
    s = moe_ep_expect(out->is_token_in_rank, "is_token_in_rank", MOE_BOOL, 3, in, "[R, T, R]");
    if (s != MOE_OK) return s;
    if (out->num_tokens_per_node) {
        s = moe_ep_expect(out->num_tokens_per_node, "num_tokens_per_node", MOE_I32, 2, pn,
                          "[R, R/num_ranks_per_node]");
        if (s != MOE_OK) return s;
    }
    return MOE_OK;
}

moe_status moe_ref_deepep_layout(const moe_deepep_config *cfg, const moe_tensor *topk_ids,
                                 const moe_deepep_layout *out)
{
    moe_status s = moe_ref_check_deepep_layout(cfg, topk_ids, out);
    if (s != MOE_OK) return s;
    int R = cfg->world_size, E = cfg->num_experts, rpn = cfg->num_ranks_per_node;
    int E_loc = E / R, nodes = R / rpn, K = (int)topk_ids->shape[2];
    int64_t T = topk_ids->shape[1];
    const int32_t *ids = (const int32_t *)topk_ids->data;
    int32_t *per_e = (int32_t *)out->num_tokens_per_expert->data;
    int32_t *per_r = (int32_t *)out->num_tokens_per_rank->data;
    int32_t *per_n = out->num_tokens_per_node ? (int32_t *)out->num_tokens_per_node->data : NULL;
    uint8_t *in_rank = (uint8_t *)out->is_token_in_rank->data;
    memset(per_e, 0, (size_t)R * (size_t)E * sizeof *per_e);
    memset(per_r, 0, (size_t)R * (size_t)R * sizeof *per_r);
    if (per_n) memset(per_n, 0, (size_t)R * (size_t)nodes * sizeof *per_n);
    for (int64_t src = 0; src < R; src++)
        for (int64_t t = 0; t < T; t++) {
            const int32_t *row = ids + (src * T + t) * K;
            for (int k = 0; k < K; k++)
                if (row[k] >= 0) per_e[src * E + row[k]]++;
            /* per rank and per node a token counts once, however many of
             * its experts live there (A.2) */
            for (int j = 0; j < R; j++) {
                int hit = moe_ep_token_in_rank(row, K, E_loc, j);
                in_rank[(src * T + t) * R + j] = (uint8_t)hit;
                per_r[src * R + j] += hit;
            }
            for (int n = 0; per_n && n < nodes; n++)
                for (int j = n * rpn; j < (n + 1) * rpn; j++)
                    if (in_rank[(src * T + t) * R + j]) {
                        per_n[src * nodes + n]++;
                        break;
                    }
        }
    return MOE_OK;
}

/* Tokens rank j receives: distinct tokens, not pairs (A.3 "Size"). */
static void recv_counts(const int32_t *ids, int R, int64_t T, int K, int E_loc, int64_t *n_recv)
{
    for (int j = 0; j < R; j++) {
        n_recv[j] = 0;
        for (int64_t g = 0; g < R * T; g++)
            n_recv[j] += moe_ep_token_in_rank(ids + g * K, K, E_loc, j);
    }
}

moe_status moe_deepep_dispatch_capacity(const moe_deepep_config *cfg, const moe_tensor *topk_ids,
                                        int64_t *rows)
{
    int E_loc, K;
    moe_status s = check_cfg(cfg, &E_loc, NULL);
    if (s != MOE_OK) return s;
    if ((s = check_ids(cfg, topk_ids, -1, &K)) != MOE_OK) return s;
    if (!rows) return moe_fail(MOE_ERR_NULL, "rows: must not be NULL");
    int64_t n_recv[8];
    recv_counts((const int32_t *)topk_ids->data, cfg->world_size, topk_ids->shape[1], K, E_loc,
                n_recv);
    *rows = 0;
    for (int j = 0; j < cfg->world_size; j++)
        if (n_recv[j] > *rows) *rows = n_recv[j];
    return MOE_OK;
}

moe_status moe_ref_check_deepep_dispatch(const moe_deepep_config *cfg, const moe_tensor *x,
                                         const moe_tensor *x_scales, const moe_tensor *topk_ids,
                                         const moe_tensor *topk_weights, const moe_deepep_recv *out)
{
    int E_loc, K;
    moe_status s = check_cfg(cfg, &E_loc, NULL);
    if (s != MOE_OK) return s;
    int R = cfg->world_size;
    if (cfg->expert_alignment < 1)
        return moe_fail(MOE_ERR_INVALID_ARG, "expert_alignment %d: must be >= 1",
                        cfg->expert_alignment);
    const int64_t xs[3] = {R, -1, -1};
    if ((s = moe_ep_expect(x, "x", -1, 3, xs, "[R, T, H]")) != MOE_OK) return s;
    int64_t T = x->shape[1], H = x->shape[2], S = 0;
    if ((s = check_ids(cfg, topk_ids, T, &K)) != MOE_OK) return s;
    const int64_t ws[3] = {R, T, K};
    if ((s = moe_ep_expect(topk_weights, "topk_weights", MOE_F32, 3, ws, "[R, T, K]")) != MOE_OK)
        return s;
    if (x_scales) {
        const int64_t ss[3] = {R, T, -1};
        if ((s = moe_ep_expect(x_scales, "x_scales", -1, 3, ss, "[R, T, S]")) != MOE_OK) return s;
        if (x_scales->dtype != MOE_F32 && x_scales->dtype != MOE_I32)
            return moe_fail(MOE_ERR_DTYPE,
                            "x_scales: dtype %s, expected f32 or int32 (UE8M0 packed)",
                            moe_dtype_get(x_scales->dtype)->name);
        S = x_scales->shape[2];
    }
    if (!out) return moe_fail(MOE_ERR_NULL, "out: must not be NULL");
    const int64_t rs[3] = {R, -1, H};
    if ((s = moe_ep_expect(out->x, "recv x", x->dtype, 3, rs, "[R, N, H]")) != MOE_OK) return s;
    int64_t N = out->x->shape[1];
    const int64_t rk[3] = {R, N, K}, rn[2] = {R, N}, r1[1] = {R}, re[2] = {R, E_loc};
    if ((s = moe_ep_expect(out->topk_ids, "recv topk_ids", MOE_I32, 3, rk, "[R, N, K]")) != MOE_OK)
        return s;
    s = moe_ep_expect(out->topk_weights, "recv topk_weights", MOE_F32, 3, rk, "[R, N, K]");
    if (s != MOE_OK) return s;
    if ((s = moe_ep_expect(out->src_idx, "recv src_idx", MOE_I32, 2, rn, "[R, N]")) != MOE_OK)
        return s;
    if ((s = moe_ep_expect(out->num_recv, "num_recv", MOE_I32, 1, r1, "[R]")) != MOE_OK) return s;
    s = moe_ep_expect(out->num_recv_per_expert, "num_recv_per_expert", MOE_I32, 2, re,
                      "[R, E_loc]");
    if (s != MOE_OK) return s;
    if (!x_scales != !out->x_scales)
        return moe_fail(MOE_ERR_NULL, "recv x_scales: must be given exactly when x_scales is");
    if (x_scales) {
        const int64_t rsc[3] = {R, N, S};
        s = moe_ep_expect(out->x_scales, "recv x_scales", x_scales->dtype, 3, rsc, "[R, N, S]");
        if (s != MOE_OK) return s;
    }
    if (out->rank_prefix_matrix) {
        const int64_t rr[2] = {R, R};
        s = moe_ep_expect(out->rank_prefix_matrix, "rank_prefix_matrix", MOE_I32, 2, rr, "[R, R]");
        if (s != MOE_OK) return s;
    }
    return MOE_OK;
}

moe_status moe_ref_deepep_dispatch(const moe_deepep_config *cfg, const moe_tensor *x,
                                   const moe_tensor *x_scales, const moe_tensor *topk_ids,
                                   const moe_tensor *topk_weights, const moe_deepep_recv *out)
{
    moe_status s = moe_ref_check_deepep_dispatch(cfg, x, x_scales, topk_ids, topk_weights, out);
    if (s != MOE_OK) return s;
    int R = cfg->world_size, E_loc = cfg->num_experts / R, K = (int)topk_ids->shape[2];
    int64_t T = x->shape[1], H = x->shape[2], S = x_scales ? x_scales->shape[2] : 0, N = out->x->shape[1];
    const int32_t *ids = (const int32_t *)topk_ids->data;
    const float *w = (const float *)topk_weights->data;
    int64_t n_recv[8];
    recv_counts(ids, R, T, K, E_loc, n_recv);
    for (int j = 0; j < R; j++)
        if (n_recv[j] > N)
            return moe_fail(MOE_ERR_SHAPE,
                            "recv x: %lld rows per rank, but rank %d receives %lld tokens "
                            "(moe_deepep_dispatch_capacity)",
                            (long long)N, j, (long long)n_recv[j]);

    size_t xrow = moe_dtype_row_bytes(x->dtype, H), srow = x_scales ? (size_t)S * 4 : 0;
    int32_t *rids = (int32_t *)out->topk_ids->data, *src_idx = (int32_t *)out->src_idx->data;
    float *rw = (float *)out->topk_weights->data;
    int32_t *per_e = (int32_t *)out->num_recv_per_expert->data;
    int32_t *prefix = out->rank_prefix_matrix ? (int32_t *)out->rank_prefix_matrix->data : NULL;
    /* tail rows as num_worst_tokens leaves them: ids -1 (A.3); the rest,
     * uninitialized upstream, zero here */
    if (out->x->nbytes) memset(out->x->data, 0, out->x->nbytes);
    if (out->x_scales && out->x_scales->nbytes)
        memset(out->x_scales->data, 0, out->x_scales->nbytes);
    for (int64_t i = 0; i < R * N * K; i++) {
        rids[i] = -1;
        rw[i] = 0.0f;
    }
    for (int64_t i = 0; i < R * N; i++) src_idx[i] = -1;
    for (int j = 0; j < R; j++) {
        int64_t row = 0;
        for (int e = 0; e < E_loc; e++) per_e[j * E_loc + e] = 0;
        /* row position = tokens from lower source ranks + earlier tokens of
         * this source: (source rank, source token) ascending, whatever the
         * channel split (A.3 "Order of received rows") */
        for (int64_t src = 0; src < R; src++) {
            for (int64_t t = 0; t < T; t++) {
                const int32_t *trow = ids + (src * T + t) * K;
                if (!moe_ep_token_in_rank(trow, K, E_loc, j)) continue;
                int64_t o = j * N + row++;
                memcpy((char *)out->x->data + (size_t)o * xrow,
                       (const char *)x->data + (size_t)(src * T + t) * xrow, xrow);
                if (x_scales)
                    memcpy((char *)out->x_scales->data + (size_t)o * srow,
                           (const char *)x_scales->data + (size_t)(src * T + t) * srow, srow);
                src_idx[o] = (int32_t)t;
                for (int k = 0; k < K; k++) {
                    int32_t e = trow[k];
                    /* not on this rank (or -1): id -1, weight 0.0f (A.3) */
                    if (e < 0 || e / E_loc != j) continue;
                    rids[o * K + k] = e - j * E_loc;
                    rw[o * K + k] = w[(src * T + t) * K + k];
                    per_e[j * E_loc + (e - j * E_loc)]++;
                }
            }
            if (prefix) prefix[src * R + j] = (int32_t)row;
        }
        ((int32_t *)out->num_recv->data)[j] = (int32_t)row;
        /* counts are pairs rounded up to expert_alignment (A.3) */
        int a = cfg->expert_alignment;
        for (int e = 0; e < E_loc; e++)
            per_e[j * E_loc + e] = (per_e[j * E_loc + e] + a - 1) / a * a;
    }
    return MOE_OK;
}

moe_status moe_ref_check_deepep_combine(const moe_deepep_config *cfg, const moe_tensor *x,
                                        const moe_tensor *topk_weights, const moe_tensor *is_token_in_rank,
                                        const moe_tensor *bias0, const moe_tensor *bias1,
                                        const moe_tensor *combined_x, const moe_tensor *combined_topk_weights)
{
    int nodes;
    moe_status s = check_cfg(cfg, NULL, &nodes);
    if (s != MOE_OK) return s;
    int R = cfg->world_size;
    const int64_t xs[3] = {R, -1, -1};
    if ((s = moe_ep_expect(x, "x", -1, 3, xs, "[R, N, H]")) != MOE_OK) return s;
    /* upstream combine is bf16 only; f32 is our extension (no rounding) */
    if (x->dtype != MOE_BF16 && x->dtype != MOE_F32)
        return moe_fail(MOE_ERR_DTYPE, "x: dtype %s, expected bf16 or f32",
                        moe_dtype_get(x->dtype)->name);
    int64_t N = x->shape[1], H = x->shape[2], K = 0;
    const int64_t is[3] = {R, -1, R};
    if ((s = moe_ep_expect(is_token_in_rank, "is_token_in_rank", MOE_BOOL, 3, is, "[R, T, R]")) !=
        MOE_OK)
        return s;
    int64_t T = is_token_in_rank->shape[1];
    const int64_t bs[3] = {R, T, H};
    if (bias0 && (s = moe_ep_expect(bias0, "bias0", x->dtype, 3, bs, "[R, T, H]")) != MOE_OK)
        return s;
    if (bias1 && (s = moe_ep_expect(bias1, "bias1", x->dtype, 3, bs, "[R, T, H]")) != MOE_OK)
        return s;
    if ((s = moe_ep_expect(combined_x, "combined_x", x->dtype, 3, bs, "[R, T, H]")) != MOE_OK)
        return s;
    if (!topk_weights != !combined_topk_weights)
        return moe_fail(MOE_ERR_NULL,
                        "combined_topk_weights: must be given exactly when topk_weights is");
    if (topk_weights) {
        const int64_t ws[3] = {R, N, -1};
        s = moe_ep_expect(topk_weights, "topk_weights", MOE_F32, 3, ws, "[R, N, K]");
        if (s != MOE_OK) return s;
        K = topk_weights->shape[2];
        const int64_t cs[3] = {R, T, K};
        s = moe_ep_expect(combined_topk_weights, "combined_topk_weights", MOE_F32, 3, cs,
                          "[R, T, K]");
        if (s != MOE_OK) return s;
    }
    return MOE_OK;
}

moe_status moe_ref_deepep_combine(const moe_deepep_config *cfg, const moe_tensor *x,
                                  const moe_tensor *topk_weights,
                                  const moe_tensor *is_token_in_rank, const moe_tensor *bias0,
                                  const moe_tensor *bias1, moe_tensor *combined_x,
                                  moe_tensor *combined_topk_weights)
{
    moe_status s = moe_ref_check_deepep_combine(cfg, x, topk_weights, is_token_in_rank, bias0, bias1, combined_x,
                                                combined_topk_weights);
    if (s != MOE_OK) return s;
    int R = cfg->world_size, rpn = cfg->num_ranks_per_node;
    int64_t N = x->shape[1], H = x->shape[2], K = topk_weights ? topk_weights->shape[2] : 0;
    int64_t T = is_token_in_rank->shape[1];
    /* the handle gives each (source token, rank) its received row, in the
     * dispatch order (source rank, source token) ascending */
    const uint8_t *in_rank = (const uint8_t *)is_token_in_rank->data;
    int32_t *row_of = malloc((size_t)(R * T * R > 0 ? R * T * R : 1) * sizeof *row_of);
    if (!row_of) return moe_fail(MOE_ERR_NOMEM, "combine: row map not available");
    for (int j = 0; j < R; j++) {
        int64_t row = 0;
        for (int64_t g = 0; g < R * T; g++) {
            uint8_t b = in_rank[g * R + j];
            if (b > 1) {
                free(row_of);
                return moe_fail(MOE_ERR_INVALID_ARG, "is_token_in_rank: byte %u is not a bool",
                                (unsigned)b);
            }
            row_of[g * R + j] = b ? (int32_t)row++ : -1;
        }
        if (row > N) {
            free(row_of);
            return moe_fail(MOE_ERR_SHAPE,
                            "x: %lld rows per rank, but is_token_in_rank sends %lld tokens to "
                            "rank %d",
                            (long long)N, (long long)row, j);
        }
    }
    moe_dtype d = x->dtype;
    for (int64_t g = 0; g < R * T; g++) {
        const int32_t *rows = row_of + g * R;
        /* biases, then ranks (one node) or node partials (several), in the
         * order of dispatch_core.h, shared with CUDA */
        for (int64_t c = 0; c < H; c++)
            moe_s_store(d, combined_x->data, g * H + c,
                        moe_deepep_combine_channel(d, x->data, bias0 ? bias0->data : NULL,
                                                   bias1 ? bias1->data : NULL, rows, R, rpn, N, H,
                                                   g, c));
        for (int64_t k = 0; k < K; k++)
            ((float *)combined_topk_weights->data)[g * K + k] = moe_deepep_combine_weight(
                (const float *)topk_weights->data, rows, R, rpn, N, K, k);
    }
    free(row_of);
    return MOE_OK;
}
