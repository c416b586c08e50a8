/* CPU backend: TensorRT-LLM routing-prologue maps. Small inputs go to the
 * reference (see the comment in moe_cpu_maps_trtllm). Large ones: a counting sort of the
 * (token, slot) pairs in token-major order by bin (local expert, or, for
 * the fused variant, one bin after them for every other id): per-thread
 * histograms over static chunks, an ordered prefix, each thread placing
 * its chunk in order, so every bin lists its pairs in (t, j) order as the
 * reference's serial walk does, for any thread count. The three-step
 * variant keeps only a token's first slot per local expert (a per-thread
 * stamp per expert, as the reference), so its repeated slots take no row
 * and their entries stay untouched. */
#include <omp.h>
#include <stdlib.h>
#include "cpu.h"
#include "cpu_internal.h"
#include "stage_checks.h"

moe_status moe_cpu_maps_trtllm(const moe_tensor *token_selected_experts, const moe_maps_trtllm_params *params, moe_tensor *permuted_row_to_unpermuted_row, moe_tensor *unpermuted_row_to_permuted_row, moe_tensor *expert_first_token_offset, moe_tensor *permuted_token_selected_experts)
{
    moe_status s = moe_ref_check_maps_trtllm(token_selected_experts, params, permuted_row_to_unpermuted_row,
                                             unpermuted_row_to_permuted_row, expert_first_token_offset,
                                             permuted_token_selected_experts);
    if (s != MOE_OK) return s;
    const int64_t T = token_selected_experts->shape[0], k = token_selected_experts->shape[1], rows = T * k;
    const int El = params->num_local_experts;
    const int64_t start = params->start_expert;
    const int fused = params->variant == MOE_MAPS_TRTLLM_FUSED_SINGLE_BLOCK;
    const int32_t *id = token_selected_experts->data;
    /* DELEGATES below the parallel threshold (CPU_PAR_IDX_MIN rows, 262144
     * by default): the reference is already the right serial algorithm
     * there, a counting pass and a placing pass, O(k*T + E_local), faster
     * than the extra passes and scratch of the parallel sort below. */
    if (rows + El < CPU_PAR_IDX_MIN)
        return moe_ref_maps_trtllm(token_selected_experts, params, permuted_row_to_unpermuted_row,
                                   unpermuted_row_to_permuted_row, expert_first_token_offset,
                                   permuted_token_selected_experts);
    int32_t *key = malloc((size_t)(rows ? rows : 1) * 2 * sizeof *key);
    int64_t *cnt = malloc(((size_t)El + 1) * sizeof *cnt);
    if (!key || !cnt) {
        free(key), free(cnt);
        return moe_fail(MOE_ERR_NOMEM, "moe_cpu_maps_trtllm: scratch for %d experts", El);
    }
    int32_t *rank = key + rows;
    int failed = 0;
#pragma omp parallel if (rows >= CPU_PAR_IDX_MIN)
    {
        int64_t *seen = fused ? NULL : calloc((size_t)El, sizeof *seen);
        if (!fused && !seen) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (int64_t t = 0; t < T; t++) {
            if (!fused && !seen) continue;
            for (int64_t j = 0; j < k; j++) {
                int64_t e = (int64_t)id[t * k + j] - start;
                int32_t b;
                if (e < 0 || e >= El) {
                    b = fused ? El : -1; /* 1.2: fused rows after the local ones; 1.3: none */
                } else if (fused) {
                    b = (int32_t)e;
                } else if (seen[e] == t + 1) {
                    b = -1; /* 1.3/1.4: a repeated expert adds no row */
                } else {
                    seen[e] = t + 1;
                    b = (int32_t)e;
                }
                key[t * k + j] = b;
            }
        }
        free(seen);
    }
    if (failed) {
        free(key), free(cnt);
        return moe_fail(MOE_ERR_NOMEM, "moe_cpu_maps_trtllm: per-thread stamps");
    }
    s = cpu_bucket_rank(key, rows, El + 1, rank, cnt);
    if (s != MOE_OK) {
        free(key), free(cnt);
        return s;
    }
    int64_t *off = expert_first_token_offset->data, run = 0;
    for (int e = 0; e <= El; e++) {
        off[e] = run;
        run += cnt[e];
    }
    int32_t *perm = permuted_row_to_unpermuted_row->data, *inv = unpermuted_row_to_permuted_row->data;
    int32_t *pte = !fused && permuted_token_selected_experts ? permuted_token_selected_experts->data : NULL;
#pragma omp parallel for schedule(static) if (rows >= CPU_PAR_IDX_MIN)
    for (int64_t i = 0; i < rows; i++) {
        int32_t b = key[i];
        if (b < 0) continue;
        int64_t p = off[b] + rank[i], t = i / k, j = i % k, u = j * T + t;
        perm[p] = (int32_t)u;
        inv[u] = (int32_t)p;
        if (pte) pte[p] = b;
    }
    free(key), free(cnt);
    return MOE_OK;
}
