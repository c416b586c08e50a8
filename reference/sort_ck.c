/* CK moe-sorting oracle. Section references are to
 * anchors/dispatch_sorting.md; the layout rules are summarised in
 * include/moe/sort_ck.h. */
#include <stdlib.h>
#include <string.h>
#include "moe/sort_ck.h"
#include "stage_checks.h"

/* B.2: the slot lives in bits 24..31 and the token in bits 0..23. */
#define MOCK_TOKEN_MAX 0xFFFFFF
#define MOCK_TOPK_MAX 255

static moe_status check_sizes(int64_t num_tokens, int topk, int num_experts, int unit_size)
{
    if (num_experts <= 0)
        return moe_fail(MOE_ERR_INVALID_ARG, "num_experts %d: must be > 0", num_experts);
    if (topk <= 0 || topk > num_experts)
        return moe_fail(MOE_ERR_INVALID_ARG, "topk %d: must be in 1..num_experts (%d)", topk,
                        num_experts);
    if (unit_size <= 0) return moe_fail(MOE_ERR_INVALID_ARG, "unit_size %d: must be > 0", unit_size);
    /* sorted_token_ids, the sentinel and num_tokens_post_padded are int32 */
    if (num_tokens < 0 || num_tokens > INT32_MAX)
        return moe_fail(MOE_ERR_INVALID_ARG, "num_tokens %lld: must be in 0..%d",
                        (long long)num_tokens, INT32_MAX);
    return MOE_OK;
}

moe_status moe_sort_ck_capacity(int64_t num_tokens, int topk, int num_experts, int unit_size,
                                moe_sort_ck_pad_formula formula,
                                int64_t *max_num_tokens_padded, int64_t *max_num_tiles)
{
    moe_status s = check_sizes(num_tokens, topk, num_experts, unit_size);
    if (s != MOE_OK) return s;
    if (!max_num_tokens_padded)
        return moe_fail(MOE_ERR_NULL, "max_num_tokens_padded: must not be NULL");
    int64_t pairs = num_tokens * topk, len; /* < 2^62: both factors < 2^31 */
    switch (formula) {
    case MOE_SORT_CK_PAD_UPDATED: len = pairs + (int64_t)num_experts * unit_size - topk; break;
    case MOE_SORT_CK_PAD_README: len = pairs + (int64_t)num_experts * (unit_size - 1); break;
    default:
        return moe_fail(MOE_ERR_INVALID_ARG, "formula %d: not a moe_sort_ck_pad_formula",
                        (int)formula);
    }
    if (len > INT32_MAX)
        return moe_fail(MOE_ERR_INVALID_ARG,
                        "num_tokens, topk, num_experts, unit_size: %lld padded entries exceed the "
                        "int32 range of num_tokens_post_padded",
                        (long long)len);
    *max_num_tokens_padded = len;
    if (max_num_tiles) *max_num_tiles = (len + unit_size - 1) / unit_size;
    return MOE_OK;
}

static moe_status check_params(const moe_sort_ck_params *p, int64_t T, int topk)
{
    if (!p) return moe_fail(MOE_ERR_NULL, "params: must not be NULL");
    moe_status s = check_sizes(T, topk, p->num_experts, p->unit_size);
    if (s != MOE_OK) return s;
    if (p->id_mode != MOE_SORT_CK_MOCK_ID && p->id_mode != MOE_SORT_CK_PLAIN_ID)
        return moe_fail(MOE_ERR_INVALID_ARG, "id_mode %d: not a moe_sort_ck_id_mode", (int)p->id_mode);
    if (p->empty_experts != MOE_SORT_CK_SKIP_EMPTY && p->empty_experts != MOE_SORT_CK_ONE_TILE_PER_EMPTY)
        return moe_fail(MOE_ERR_INVALID_ARG, "empty_experts %d: not a moe_sort_ck_empty_mode",
                        (int)p->empty_experts);
    /* B.2: with mock ids a token above 24 bits or a topk above 8 bits would
     * be masked off and alias another entry (or the sentinel) */
    if (p->id_mode == MOE_SORT_CK_MOCK_ID && T > MOCK_TOKEN_MAX)
        return moe_fail(MOE_ERR_INVALID_ARG, "topk_ids: %lld tokens, mock ids hold at most %d",
                        (long long)T, MOCK_TOKEN_MAX);
    if (p->id_mode == MOE_SORT_CK_MOCK_ID && topk > MOCK_TOPK_MAX)
        return moe_fail(MOE_ERR_INVALID_ARG, "topk %d: mock ids hold at most %d slots", topk,
                        MOCK_TOPK_MAX);
    if (p->local_expert_mask) {
        s = moe_tensor_expect_host(p->local_expert_mask, "local_expert_mask", MOE_I32, 1);
        if (s != MOE_OK) return s;
        if (p->local_expert_mask->shape[0] != p->num_experts)
            return moe_fail(MOE_ERR_SHAPE, "local_expert_mask: %lld entries, num_experts is %d",
                            (long long)p->local_expert_mask->shape[0], p->num_experts);
        const int32_t *m = p->local_expert_mask->data;
        for (int e = 0; e < p->num_experts; e++)
            if (m[e] != 0 && m[e] != 1)
                return moe_fail(MOE_ERR_INVALID_ARG, "local_expert_mask[%d] = %d: must be 0 or 1", e,
                                m[e]);
    }
    return MOE_OK;
}

static moe_status check_outputs(const moe_tensor *ids, const moe_tensor *w, const moe_tensor *tiles,
                                const moe_tensor *ntpp)
{
    moe_status s = moe_tensor_expect_host(ids, "sorted_token_ids", MOE_I32, 1);
    if (s == MOE_OK) s = moe_tensor_expect_host(w, "sorted_weights", MOE_F32, 1);
    if (s == MOE_OK) s = moe_tensor_expect_host(tiles, "sorted_expert_ids", MOE_I32, 1);
    if (s == MOE_OK) s = moe_tensor_expect_host(ntpp, "num_tokens_post_padded", MOE_I32, 1);
    if (s != MOE_OK) return s;
    if (w->shape[0] != ids->shape[0])
        return moe_fail(MOE_ERR_SHAPE, "sorted_weights: %lld entries, sorted_token_ids has %lld",
                        (long long)w->shape[0], (long long)ids->shape[0]);
    if (ntpp->shape[0] != 2)
        return moe_fail(MOE_ERR_SHAPE,
                        "num_tokens_post_padded: %lld entries, expected 2 (padded total, tokens)",
                        (long long)ntpp->shape[0]);
    return MOE_OK;
}

/* Counts pairs per expert into cnt[E] while refusing ids CK leaves
 * undefined (B.3): out-of-range ids index LDS or the mesh unchecked, and a
 * duplicate expert in one row collapses to one marker in the Ex/Mp kernels
 * while the count path may count it twice, so no single answer exists.
 * last[e] remembers the last row (plus one) that selected e. */
static moe_status count_pairs(const int32_t *id, int64_t T, int topk, int E, int64_t *cnt,
                              int64_t *last)
{
    for (int64_t t = 0; t < T; t++)
        for (int k = 0; k < topk; k++) {
            int32_t e = id[t * topk + k];
            if (e < 0 || e >= E)
                return moe_fail(MOE_ERR_INVALID_ARG,
                                "topk_ids[%lld][%d] = %d: expert ids must be in [0, num_experts = %d)",
                                (long long)t, k, (int)e, E);
            if (last[e] == t + 1) {
                int first = 0;
                while (id[t * topk + first] != e) first++;
                return moe_fail(MOE_ERR_INVALID_ARG,
                                "topk_ids: row %lld selects expert %d twice (slots %d and %d); CK "
                                "moe-sorting is undefined for duplicates, ids must be distinct per row",
                                (long long)t, (int)e, first, k);
            }
            last[e] = t + 1;
            cnt[e]++;
        }
    return MOE_OK;
}

moe_status moe_ref_check_sort_ck(const moe_tensor *topk_ids, const moe_tensor *topk_weights,
                                 const moe_sort_ck_params *params, const moe_tensor *sorted_token_ids,
                                 const moe_tensor *sorted_weights, const moe_tensor *sorted_expert_ids,
                                 const moe_tensor *num_tokens_post_padded)
{
    moe_status s = moe_tensor_expect_host(topk_ids, "topk_ids", MOE_I32, 2);
    if (s == MOE_OK) s = moe_tensor_expect_host(topk_weights, "topk_weights", MOE_F32, 2);
    if (s != MOE_OK) return s;
    int64_t T = topk_ids->shape[0];
    if (topk_ids->shape[1] > INT32_MAX)
        return moe_fail(MOE_ERR_INVALID_ARG, "topk %lld: too large", (long long)topk_ids->shape[1]);
    int topk = (int)topk_ids->shape[1];
    if (topk_weights->shape[0] != T || topk_weights->shape[1] != topk)
        return moe_fail(MOE_ERR_SHAPE, "topk_weights: shape [%lld, %lld], topk_ids is [%lld, %d]",
                        (long long)topk_weights->shape[0], (long long)topk_weights->shape[1],
                        (long long)T, topk);
    s = check_params(params, T, topk);
    if (s == MOE_OK)
        s = check_outputs(sorted_token_ids, sorted_weights, sorted_expert_ids, num_tokens_post_padded);
    return s;
}

moe_status moe_ref_sort_ck(const moe_tensor *topk_ids, const moe_tensor *topk_weights,
                           const moe_sort_ck_params *params, moe_tensor *sorted_token_ids,
                           moe_tensor *sorted_weights, moe_tensor *sorted_expert_ids,
                           moe_tensor *num_tokens_post_padded)
{
    moe_status s = moe_ref_check_sort_ck(topk_ids, topk_weights, params, sorted_token_ids, sorted_weights,
                                         sorted_expert_ids, num_tokens_post_padded);
    if (s != MOE_OK) return s;
    int64_t T = topk_ids->shape[0];
    int topk = (int)topk_ids->shape[1];
    const int E = params->num_experts;
    const int64_t unit = params->unit_size;
    const int32_t *mask = params->local_expert_mask ? params->local_expert_mask->data : NULL;
    int64_t *cnt = calloc(2 * (size_t)E, sizeof *cnt);
    if (!cnt) return moe_fail(MOE_ERR_NOMEM, "moe_ref_sort_ck: scratch for %d experts", E);
    int64_t *end = cnt + E; /* last-row stamps while counting, then segment ends */
    const int32_t *id = topk_ids->data;
    s = count_pairs(id, T, topk, E, cnt, end);
    if (s != MOE_OK) goto out;

    /* Segment sizes (B.3). cnt[e] becomes the segment start, end[e] its end. */
    int64_t total = 0;
    for (int e = 0; e < E; e++) {
        int64_t seg = 0;
        if (!mask || mask[e]) {
            seg = (cnt[e] + unit - 1) / unit * unit;
            if (cnt[e] == 0 && params->empty_experts == MOE_SORT_CK_ONE_TILE_PER_EMPTY) seg = unit;
        }
        cnt[e] = total;
        end[e] = total += seg;
        if (total > INT32_MAX) {
            s = moe_fail(MOE_ERR_INVALID_ARG,
                         "topk_ids: the padded total exceeds the int32 range of num_tokens_post_padded");
            goto out;
        }
    }
    /* Checked against this input's need, not a formula: the README formula
     * is short in one-tile mode and the updated one at T = 0 (sort_ck.h). */
    if (sorted_token_ids->shape[0] < total) {
        s = moe_fail(MOE_ERR_SHAPE,
                     "sorted_token_ids: %lld entries, this input needs %lld (see moe_sort_ck_capacity)",
                     (long long)sorted_token_ids->shape[0], (long long)total);
        goto out;
    }
    if (sorted_expert_ids->shape[0] < total / unit) {
        s = moe_fail(MOE_ERR_SHAPE, "sorted_expert_ids: %lld tiles, this input needs %lld",
                     (long long)sorted_expert_ids->shape[0], (long long)(total / unit));
        goto out;
    }

    const int mock = params->id_mode == MOE_SORT_CK_MOCK_ID;
    const uint32_t sentinel = mock ? (uint32_t)T | (uint32_t)topk << 24 : (uint32_t)T;
    uint32_t *out_id = sorted_token_ids->data;
    float *out_w = sorted_weights->data;
    const float *w = topk_weights->data;
    /* Token-major walk: each expert receives its tokens in ascending order,
     * the order every CK kernel produces (B.3). */
    for (int64_t t = 0; t < T; t++)
        for (int k = 0; k < topk; k++) {
            int32_t e = id[t * topk + k];
            if (mask && !mask[e]) continue;
            int64_t pos = cnt[e]++;
            out_id[pos] = mock ? (uint32_t)t | (uint32_t)k << 24 : (uint32_t)t;
            memcpy(&out_w[pos], &w[t * topk + k], sizeof(float)); /* bits, NaN payloads too */
        }
    int32_t *tile = sorted_expert_ids->data;
    int32_t local = 0; /* B.3: tiles carry the count of unmasked experts below e */
    int64_t start = 0;
    for (int e = 0; e < E; e++) {
        if (mask && !mask[e]) continue;
        for (int64_t pos = cnt[e]; pos < end[e]; pos++) {
            out_id[pos] = sentinel;
            out_w[pos] = 0.0f;
        }
        for (int64_t i = start / unit; i < end[e] / unit; i++) tile[i] = local;
        start = end[e];
        local++;
    }
    int32_t *ntpp = num_tokens_post_padded->data;
    ntpp[0] = (int32_t)total;
    ntpp[1] = (int32_t)T; /* the kernels store the token count, not the pair count */
out:
    free(cnt);
    return s;
}
