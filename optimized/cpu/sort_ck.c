/* CPU backend: CK moe-sorting. Small inputs go to the reference (see the
 * comment in moe_cpu_sort_ck). Large ones: a counting sort: rows are validated in
 * parallel (ids in range, distinct within the row: a per-thread stamp per
 * expert), pairs are ranked per expert by per-thread histograms over
 * static chunks of the token-major pair index and an ordered prefix, so
 * each expert receives its tokens in ascending order as in the reference;
 * entries, pads and tiles are then written in parallel. Inputs the
 * reference refuses only while it counts (a bad id, a repeated expert, a
 * padded total past int32, outputs too short for this input) are handed to
 * the reference, which reports them exactly and writes nothing. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "cpu.h"
#include "cpu_internal.h"
#include "stage_checks.h"

/* 1 when every row has ids in [0, E) and no expert twice. */
static int rows_valid(const int32_t *id, int64_t T, int topk, int E)
{
    int bad = 0;
#pragma omp parallel if (T * topk >= CPU_PAR_IDX_MIN) reduction(| : bad)
    {
        int64_t *last = calloc((size_t)E, sizeof *last);
        if (!last) bad = 1;
#pragma omp for schedule(static)
        for (int64_t t = 0; t < T; t++) {
            if (!last) continue;
            for (int k = 0; k < topk; k++) {
                int32_t e = id[t * topk + k];
                if (e < 0 || e >= E || last[e] == t + 1) {
                    bad = 1;
                    break;
                }
                last[e] = t + 1;
            }
        }
        free(last);
    }
    return !bad;
}

moe_status moe_cpu_sort_ck(const moe_tensor *topk_ids, const moe_tensor *topk_weights, const moe_sort_ck_params *params, moe_tensor *sorted_token_ids, moe_tensor *sorted_weights, moe_tensor *sorted_expert_ids, moe_tensor *num_tokens_post_padded)
{
    moe_status s = moe_ref_check_sort_ck(topk_ids, topk_weights, params, sorted_token_ids, sorted_weights,
                                         sorted_expert_ids, num_tokens_post_padded);
    if (s != MOE_OK) return s;
    const int64_t T = topk_ids->shape[0];
    const int topk = (int)topk_ids->shape[1], E = params->num_experts;
    const int64_t unit = params->unit_size, pairs = T * topk;
    const int32_t *id = topk_ids->data;
    const int32_t *mask = params->local_expert_mask ? params->local_expert_mask->data : NULL;
    /* DELEGATES below the parallel threshold (CPU_PAR_IDX_MIN pairs, 262144
     * by default: every routing up to 32768 tokens at top-8): the
     * reference is already the right serial algorithm there, one counting
     * pass and one placing pass, O(pairs + E), and its tens of
     * microseconds beat the extra passes and scratch of the parallel
     * sort below. */
    if (pairs + E < CPU_PAR_IDX_MIN)
        return moe_ref_sort_ck(topk_ids, topk_weights, params, sorted_token_ids, sorted_weights, sorted_expert_ids,
                               num_tokens_post_padded);
    if (!rows_valid(id, T, topk, E)) /* the reference names the first bad slot */
        return moe_ref_sort_ck(topk_ids, topk_weights, params, sorted_token_ids, sorted_weights, sorted_expert_ids,
                               num_tokens_post_padded);

    int32_t *key = malloc((size_t)(pairs ? pairs : 1) * 2 * sizeof *key);
    int64_t *cnt = malloc((size_t)E * 4 * sizeof *cnt);
    if (!key || !cnt) {
        free(key), free(cnt);
        return moe_fail(MOE_ERR_NOMEM, "moe_cpu_sort_ck: scratch for %d experts", E);
    }
    int32_t *rank = key + pairs;
    int64_t *start = cnt + E, *end = cnt + 2 * (size_t)E, *local = cnt + 3 * (size_t)E;
#pragma omp parallel for schedule(static) if (pairs >= CPU_PAR_IDX_MIN)
    for (int64_t i = 0; i < pairs; i++) key[i] = mask && !mask[id[i]] ? -1 : id[i];
    s = cpu_bucket_rank(key, pairs, E, rank, cnt);
    if (s != MOE_OK) goto out;
    int64_t total = 0, nlocal = 0;
    for (int e = 0; e < E; e++) {
        int64_t seg = 0;
        local[e] = nlocal; /* tiles carry the count of unmasked experts below e */
        if (!mask || mask[e]) {
            nlocal++;
            seg = (cnt[e] + unit - 1) / unit * unit;
            if (cnt[e] == 0 && params->empty_experts == MOE_SORT_CK_ONE_TILE_PER_EMPTY) seg = unit;
        }
        start[e] = total;
        end[e] = total += seg;
        if (total > INT32_MAX) break;
    }
    if (total > INT32_MAX || sorted_token_ids->shape[0] < total || sorted_expert_ids->shape[0] < total / unit) {
        free(key), free(cnt);
        return moe_ref_sort_ck(topk_ids, topk_weights, params, sorted_token_ids, sorted_weights, sorted_expert_ids,
                               num_tokens_post_padded);
    }
    {
        const int mock = params->id_mode == MOE_SORT_CK_MOCK_ID;
        const uint32_t sentinel = mock ? (uint32_t)T | (uint32_t)topk << 24 : (uint32_t)T;
        uint32_t *out_id = sorted_token_ids->data, *out_w = sorted_weights->data;
        const uint32_t *w = topk_weights->data; /* weights move as bits */
        int32_t *tile = sorted_expert_ids->data;
#pragma omp parallel if (pairs + total >= CPU_PAR_IDX_MIN)
        {
#pragma omp for schedule(static) nowait
            for (int64_t i = 0; i < pairs; i++) {
                if (key[i] < 0) continue;
                int64_t pos = start[key[i]] + rank[i], t = i / topk, k = i % topk;
                out_id[pos] = mock ? (uint32_t)t | (uint32_t)k << 24 : (uint32_t)t;
                out_w[pos] = w[i];
            }
#pragma omp for schedule(static)
            for (int e = 0; e < E; e++) {
                if (mask && !mask[e]) continue;
                for (int64_t pos = start[e] + cnt[e]; pos < end[e]; pos++) {
                    out_id[pos] = sentinel;
                    out_w[pos] = 0; /* +0.0f */
                }
                for (int64_t i = start[e] / unit; i < end[e] / unit; i++) tile[i] = (int32_t)local[e];
            }
        }
        int32_t *ntpp = num_tokens_post_padded->data;
        ntpp[0] = (int32_t)total;
        ntpp[1] = (int32_t)T;
    }
out:
    free(key), free(cnt);
    return s;
}
