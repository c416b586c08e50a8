/* CPU backend: vLLM align_block_size and batched align.
 *
 * align_block_size is a counting sort: the reference scans every pair once
 * per expert (O(E * numel)); here per-thread histograms over static chunks
 * of the flat index, an ordered prefix over (expert, thread), then each
 * thread places its chunk in ascending flat index, so every expert holds
 * its pairs in ascending t*topk + k as in the reference, for any thread
 * count. Pad entries and unused blocks are filled in parallel.
 * align_batched fills each batch's segment in parallel (segment starts by
 * a serial prefix over the B batches). */
#include <omp.h>
#include <stdlib.h>
#include "cpu.h"
#include "cpu_internal.h"
#include "stage_checks.h"

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

moe_status moe_cpu_align_block_size(const moe_tensor *topk_ids, const moe_align_params *p, moe_tensor *sorted_token_ids, moe_tensor *expert_ids, moe_tensor *num_tokens_post_pad)
{
    moe_status s = moe_ref_check_align_block_size(topk_ids, p, sorted_token_ids, expert_ids, num_tokens_post_pad);
    if (s != MOE_OK) return s;
    int64_t numel = topk_ids->shape[0] * topk_ids->shape[1];
    const int32_t *ids = topk_ids->data;
    const int32_t *map = p->expert_map ? p->expert_map->data : NULL;
    int E = p->num_experts, ignore = map && p->map_mode == MOE_ALIGN_MAP_IGNORE_INVALID;
    int32_t *key = malloc((size_t)(numel ? numel : 1) * 2 * sizeof *key);
    int64_t *count = malloc((size_t)E * 2 * sizeof *count);
    if (!key || !count) {
        free(key), free(count);
        return moe_fail(MOE_ERR_NOMEM, "align: work space");
    }
    int32_t *rank = key + numel;
    int64_t *start = count + E;
#pragma omp parallel for schedule(static) if (numel >= CPU_PAR_IDX_MIN)
    for (int64_t i = 0; i < numel; i++) key[i] = ignore ? map[ids[i]] : ids[i];
    s = cpu_bucket_rank(key, numel, E, rank, count);
    if (s != MOE_OK) {
        free(key), free(count);
        return s;
    }
    int32_t *sorted = sorted_token_ids->data, *eids = expert_ids->data;
    int64_t bs = p->block_size, pos = 0, len = sorted_token_ids->shape[0], nblk = expert_ids->shape[0];
    for (int b = 0; b < E; b++) {
        start[b] = pos;
        if (count[b]) pos += round_up(count[b], bs);
    }
    int64_t used = pos;
#pragma omp parallel if (len >= CPU_PAR_IDX_MIN)
    {
        /* pads (entries no pair takes) hold numel, unused blocks -1 */
#pragma omp for schedule(static) nowait
        for (int64_t k = 0; k < len; k++) sorted[k] = (int32_t)numel;
#pragma omp for schedule(static) nowait
        for (int64_t k = used / bs; k < nblk; k++) eids[k] = -1;
#pragma omp for schedule(static) nowait
        for (int b = 0; b < E; b++) {
            if (!count[b]) continue;
            int32_t id = (map && !ignore) ? map[b] : b;
            for (int64_t k = start[b] / bs; k < (start[b] + round_up(count[b], bs)) / bs; k++) eids[k] = id;
        }
#pragma omp barrier
#pragma omp for schedule(static)
        for (int64_t i = 0; i < numel; i++)
            if (key[i] >= 0) sorted[start[key[i]] + rank[i]] = (int32_t)i;
    }
    ((int32_t *)num_tokens_post_pad->data)[0] = (int32_t)used;
    free(key), free(count);
    return MOE_OK;
}

moe_status moe_cpu_align_batched(const moe_tensor *expert_num_tokens, int max_tokens, int block_size, moe_tensor *sorted_token_ids, moe_tensor *expert_ids, moe_tensor *num_tokens_post_pad)
{
    moe_status s = moe_ref_check_align_batched(expert_num_tokens, max_tokens, block_size, sorted_token_ids,
                                               expert_ids, num_tokens_post_pad);
    if (s != MOE_OK) return s;
    int64_t B = expert_num_tokens->shape[0], len = sorted_token_ids->shape[0], nblk = expert_ids->shape[0];
    const int32_t *n = expert_num_tokens->data;
    int32_t *sorted = sorted_token_ids->data, *eids = expert_ids->data;
    int32_t pad = (int32_t)(B * max_tokens);
    int64_t *start = malloc((size_t)(B + 1) * sizeof *start);
    if (!start) return moe_fail(MOE_ERR_NOMEM, "align_batched: %lld offsets", (long long)B);
    int64_t pos = 0;
    for (int64_t b = 0; b < B; b++) {
        start[b] = pos;
        pos += round_up(n[b], block_size);
    }
    start[B] = pos;
#pragma omp parallel if (len >= CPU_PAR_IDX_MIN)
    {
#pragma omp for schedule(static) nowait
        for (int64_t k = pos; k < len; k++) sorted[k] = pad;
#pragma omp for schedule(static) nowait
        for (int64_t k = pos / block_size; k < nblk; k++) eids[k] = -1;
#pragma omp for schedule(static)
        for (int64_t b = 0; b < B; b++) {
            int32_t *o = sorted + start[b];
            for (int64_t j = 0; j < n[b]; j++) o[j] = (int32_t)(b * max_tokens + j);
            for (int64_t j = n[b]; j < start[b + 1] - start[b]; j++) o[j] = pad;
            for (int64_t k = start[b] / block_size; k < start[b + 1] / block_size; k++) eids[k] = (int32_t)b;
        }
    }
    ((int32_t *)num_tokens_post_pad->data)[0] = (int32_t)pos;
    free(start);
    return MOE_OK;
}
