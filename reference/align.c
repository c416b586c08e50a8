#include <stdlib.h>
#include "moe/align.h"
#include "stage_checks.h"

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

static moe_status check_params(const moe_align_params *p)
{
    if (!p) return moe_fail(MOE_ERR_NULL, "params: must not be NULL");
    if (p->block_size <= 0) return moe_fail(MOE_ERR_INVALID_ARG, "block_size %d: must be > 0", p->block_size);
    if (p->num_experts <= 0)
        return moe_fail(MOE_ERR_INVALID_ARG, "num_experts %d: must be > 0", p->num_experts);
    if (p->map_mode != MOE_ALIGN_MAP_KEEP_NONLOCAL && p->map_mode != MOE_ALIGN_MAP_IGNORE_INVALID)
        return moe_fail(MOE_ERR_INVALID_ARG, "map_mode %d: not a moe_align_map_mode", (int)p->map_mode);
    if (p->expert_map) {
        moe_status s = moe_tensor_expect(p->expert_map, "expert_map", MOE_I32, 1);
        if (s != MOE_OK) return s;
        if (p->expert_map->shape[0] != p->num_experts)
            return moe_fail(MOE_ERR_SHAPE, "expert_map: %lld entries, num_experts is %d",
                            (long long)p->expert_map->shape[0], p->num_experts);
        const int32_t *m = p->expert_map->data;
        for (int e = 0; e < p->num_experts; e++)
            if (m[e] < -1 || m[e] >= p->num_experts)
                return moe_fail(MOE_ERR_INVALID_ARG, "expert_map[%d] = %d: must be -1 or a local id < E", e, m[e]);
    }
    return MOE_OK;
}

moe_status moe_align_capacity(int64_t numel, const moe_align_params *p, int64_t *sorted_len,
                              int64_t *blocks)
{
    moe_status s = check_params(p);
    if (s != MOE_OK) return s;
    if (numel < 0) return moe_fail(MOE_ERR_INVALID_ARG, "numel %lld: must be >= 0", (long long)numel);
    if (!sorted_len || !blocks) return moe_fail(MOE_ERR_NULL, "sorted_len, blocks: must not be NULL");
    int64_t b = p->block_size, len = numel + (int64_t)p->num_experts * (b - 1);
    if (p->pad_sorted_ids) len = round_up(len, b);
    if (numel < p->num_experts && numel * b < len) len = numel * b;
    *sorted_len = len;
    *blocks = (len + b - 1) / b;
    return MOE_OK;
}

static moe_status check_out(const moe_tensor *t, const char *name, int64_t need)
{
    moe_status s = moe_tensor_expect(t, name, MOE_I32, 1);
    if (s != MOE_OK) return s;
    if (t->shape[0] < need)
        return moe_fail(MOE_ERR_SHAPE, "%s: %lld entries, at least %lld needed", name,
                        (long long)t->shape[0], (long long)need);
    return MOE_OK;
}

moe_status moe_ref_check_align_block_size(const moe_tensor *topk_ids, const moe_align_params *p,
                                          const moe_tensor *sorted_token_ids, const moe_tensor *expert_ids,
                                          const moe_tensor *num_tokens_post_pad)
{
    moe_status s = moe_tensor_expect(topk_ids, "topk_ids", MOE_I32, 2);
    if (s != MOE_OK) return s;
    s = check_params(p);
    if (s != MOE_OK) return s;
    int64_t numel = topk_ids->shape[0] * topk_ids->shape[1], len, nblocks;
    moe_align_capacity(numel, p, &len, &nblocks);
    if ((s = check_out(sorted_token_ids, "sorted_token_ids", len)) != MOE_OK ||
        (s = check_out(expert_ids, "expert_ids", nblocks)) != MOE_OK ||
        (s = check_out(num_tokens_post_pad, "num_tokens_post_pad", 1)) != MOE_OK)
        return s;
    const int32_t *ids = topk_ids->data;
    int E = p->num_experts;
    for (int64_t i = 0; i < numel; i++)
        if (ids[i] < 0 || ids[i] >= E)
            return moe_fail(MOE_ERR_INVALID_ARG, "topk_ids[%lld] = %d: expert ids must be in [0, %d)",
                            (long long)i, ids[i], E);
    return MOE_OK;
}

moe_status moe_ref_align_block_size(const moe_tensor *topk_ids, const moe_align_params *p,
                                    moe_tensor *sorted_token_ids, moe_tensor *expert_ids,
                                    moe_tensor *num_tokens_post_pad)
{
    moe_status s = moe_ref_check_align_block_size(topk_ids, p, sorted_token_ids, expert_ids, num_tokens_post_pad);
    if (s != MOE_OK) return s;
    int64_t numel = topk_ids->shape[0] * topk_ids->shape[1];
    const int32_t *ids = topk_ids->data;
    const int32_t *map = p->expert_map ? p->expert_map->data : NULL;
    int E = p->num_experts;
    int ignore = map && p->map_mode == MOE_ALIGN_MAP_IGNORE_INVALID;

    /* the bucket of a pair: its global id, or its local id when the map is
     * applied before counting (then -1 pairs are dropped) */
    int64_t *count = calloc((size_t)E, sizeof *count);
    if (!count) return moe_fail(MOE_ERR_NOMEM, "align: counts");
    for (int64_t i = 0; i < numel; i++) {
        int b = ignore ? map[ids[i]] : ids[i];
        if (b >= 0) count[b]++;
    }
    int32_t *sorted = sorted_token_ids->data, *eids = expert_ids->data;
    int64_t bs = p->block_size, pos = 0, blk = 0;
    for (int64_t k = 0; k < sorted_token_ids->shape[0]; k++) sorted[k] = (int32_t)numel;
    for (int64_t k = 0; k < expert_ids->shape[0]; k++) eids[k] = -1;
    for (int b = 0; b < E; b++) {
        if (count[b] == 0) continue; /* empty experts take no block */
        int64_t start = pos;
        for (int64_t i = 0; i < numel; i++) {
            int bi = ignore ? map[ids[i]] : ids[i];
            if (bi == b) sorted[pos++] = (int32_t)i;
        }
        pos = start + round_up(count[b], bs);
        int32_t id = (map && !ignore) ? map[b] : b;
        for (; blk < pos / bs; blk++) eids[blk] = id;
    }
    ((int32_t *)num_tokens_post_pad->data)[0] = (int32_t)pos;
    free(count);
    return MOE_OK;
}

moe_status moe_ref_check_align_batched(const moe_tensor *expert_num_tokens, int max_tokens, int block_size,
                                       const moe_tensor *sorted_token_ids, const moe_tensor *expert_ids,
                                       const moe_tensor *num_tokens_post_pad)
{
    moe_status s = moe_tensor_expect(expert_num_tokens, "expert_num_tokens", MOE_I32, 1);
    if (s != MOE_OK) return s;
    if (max_tokens <= 0) return moe_fail(MOE_ERR_INVALID_ARG, "max_tokens %d: must be > 0", max_tokens);
    if (block_size <= 0) return moe_fail(MOE_ERR_INVALID_ARG, "block_size %d: must be > 0", block_size);
    int64_t B = expert_num_tokens->shape[0], per = round_up(max_tokens, block_size);
    int64_t len = B * per;
    if ((s = check_out(sorted_token_ids, "sorted_token_ids", len)) != MOE_OK ||
        (s = check_out(expert_ids, "expert_ids", len / block_size)) != MOE_OK ||
        (s = check_out(num_tokens_post_pad, "num_tokens_post_pad", 1)) != MOE_OK)
        return s;
    const int32_t *n = expert_num_tokens->data;
    for (int64_t b = 0; b < B; b++)
        if (n[b] < 0 || n[b] > max_tokens)
            return moe_fail(MOE_ERR_INVALID_ARG, "expert_num_tokens[%lld] = %d: must be in [0, max_tokens=%d]",
                            (long long)b, n[b], max_tokens);
    return MOE_OK;
}

moe_status moe_ref_align_batched(const moe_tensor *expert_num_tokens, int max_tokens,
                                 int block_size, moe_tensor *sorted_token_ids,
                                 moe_tensor *expert_ids, moe_tensor *num_tokens_post_pad)
{
    moe_status s = moe_ref_check_align_batched(expert_num_tokens, max_tokens, block_size, sorted_token_ids,
                                               expert_ids, num_tokens_post_pad);
    if (s != MOE_OK) return s;
    int64_t B = expert_num_tokens->shape[0];
    const int32_t *n = expert_num_tokens->data;
    int32_t *sorted = sorted_token_ids->data, *eids = expert_ids->data;
    int32_t pad = (int32_t)(B * max_tokens);
    for (int64_t k = 0; k < sorted_token_ids->shape[0]; k++) sorted[k] = pad;
    for (int64_t k = 0; k < expert_ids->shape[0]; k++) eids[k] = -1;
    int64_t pos = 0;
    for (int64_t b = 0; b < B; b++) {
        int64_t seg = round_up(n[b], block_size);
        for (int64_t j = 0; j < n[b]; j++) sorted[pos + j] = (int32_t)(b * max_tokens + j);
        for (int64_t k = pos / block_size; k < (pos + seg) / block_size; k++) eids[k] = (int32_t)b;
        pos += seg;
    }
    ((int32_t *)num_tokens_post_pad->data)[0] = (int32_t)pos;
    return MOE_OK;
}
