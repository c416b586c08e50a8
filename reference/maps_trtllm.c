/* TensorRT-LLM routing-prologue oracle. Section references are to
 * anchors/trtllm_moe.md; the contract is in include/moe/maps_trtllm.h. */
#include <stdlib.h>
#include "moe/maps_trtllm.h"
#include "stage_checks.h"

static moe_status expect_vec(const moe_tensor *t, const char *name, moe_dtype dtype, int64_t n,
                             const char *rule)
{
    moe_status s = moe_tensor_expect_host(t, name, dtype, 1);
    if (s != MOE_OK) return s;
    if (t->shape[0] != n)
        return moe_fail(MOE_ERR_SHAPE, "%s: %lld entries, expected %lld (%s)", name,
                        (long long)t->shape[0], (long long)n, rule);
    return MOE_OK;
}

static moe_status check_params(const moe_maps_trtllm_params *p, int64_t topk)
{
    if (!p) return moe_fail(MOE_ERR_NULL, "params: must not be NULL");
    if (p->variant != MOE_MAPS_TRTLLM_FUSED_SINGLE_BLOCK && p->variant != MOE_MAPS_TRTLLM_THREE_STEP)
        return moe_fail(MOE_ERR_INVALID_ARG, "variant %d: not a moe_maps_trtllm_variant",
                        (int)p->variant);
    if (p->num_experts <= 0)
        return moe_fail(MOE_ERR_INVALID_ARG, "num_experts %d: must be > 0", p->num_experts);
    if (p->num_local_experts <= 0)
        return moe_fail(MOE_ERR_INVALID_ARG, "num_local_experts %d: must be > 0",
                        p->num_local_experts);
    if (p->start_expert < 0)
        return moe_fail(MOE_ERR_INVALID_ARG, "start_expert %d: must be >= 0", p->start_expert);
    if ((int64_t)p->start_expert + p->num_local_experts > p->num_experts)
        return moe_fail(MOE_ERR_INVALID_ARG,
                        "start_expert %d, num_local_experts %d: the range must end at or before "
                        "num_experts (%d)",
                        p->start_expert, p->num_local_experts, p->num_experts);
    if (topk <= 0 || topk > p->num_experts)
        return moe_fail(MOE_ERR_INVALID_ARG, "topk %lld: must be in 1..num_experts (%d)",
                        (long long)topk, p->num_experts);
    return MOE_OK;
}

moe_status moe_ref_check_maps_trtllm(const moe_tensor *token_selected_experts,
                                     const moe_maps_trtllm_params *params,
                                     const moe_tensor *permuted_row_to_unpermuted_row,
                                     const moe_tensor *unpermuted_row_to_permuted_row,
                                     const moe_tensor *expert_first_token_offset,
                                     const moe_tensor *permuted_token_selected_experts)
{
    moe_status s = moe_tensor_expect_host(token_selected_experts, "token_selected_experts", MOE_I32, 2);
    if (s != MOE_OK) return s;
    const int64_t T = token_selected_experts->shape[0], k = token_selected_experts->shape[1];
    s = check_params(params, k);
    if (s != MOE_OK) return s;
    /* row indices u = j*T + t and p are int32 upstream */
    if (T > INT32_MAX / k)
        return moe_fail(MOE_ERR_INVALID_ARG,
                        "token_selected_experts: %lld x %lld expanded rows exceed int32 row indices",
                        (long long)T, (long long)k);
    const int64_t rows = T * k;
    const int El = params->num_local_experts;
    s = expect_vec(permuted_row_to_unpermuted_row, "permuted_row_to_unpermuted_row", MOE_I32, rows,
                   "k*T");
    if (s == MOE_OK)
        s = expect_vec(unpermuted_row_to_permuted_row, "unpermuted_row_to_permuted_row", MOE_I32,
                       rows, "k*T");
    if (s == MOE_OK)
        s = expect_vec(expert_first_token_offset, "expert_first_token_offset", MOE_I64,
                       (int64_t)El + 1, "num_local_experts + 1");
    if (s == MOE_OK && permuted_token_selected_experts)
        s = expect_vec(permuted_token_selected_experts, "permuted_token_selected_experts", MOE_I32,
                       rows, "k*T");
    return s;
}

moe_status moe_ref_maps_trtllm(const moe_tensor *token_selected_experts,
                               const moe_maps_trtllm_params *params,
                               moe_tensor *permuted_row_to_unpermuted_row,
                               moe_tensor *unpermuted_row_to_permuted_row,
                               moe_tensor *expert_first_token_offset,
                               moe_tensor *permuted_token_selected_experts)
{
    moe_status s = moe_ref_check_maps_trtllm(token_selected_experts, params, permuted_row_to_unpermuted_row,
                                             unpermuted_row_to_permuted_row, expert_first_token_offset,
                                             permuted_token_selected_experts);
    if (s != MOE_OK) return s;
    const int64_t T = token_selected_experts->shape[0], k = token_selected_experts->shape[1];
    const int El = params->num_local_experts;

    /* bins 0..El-1 are local experts, bin El collects every other id (1.2) */
    int64_t *cnt = calloc(2 * (size_t)El + 1, sizeof *cnt);
    if (!cnt) return moe_fail(MOE_ERR_NOMEM, "moe_ref_maps_trtllm: scratch for %d experts", El);
    int64_t *seen = cnt + El + 1; /* three-step: last token (plus one) matched per expert */
    const int32_t *id = token_selected_experts->data;
    const int64_t start = params->start_expert;
    const int fused = params->variant == MOE_MAPS_TRTLLM_FUSED_SINGLE_BLOCK;

    /* Both walks go token-major, slot-minor: the fused path ranks keys
     * stably over a blocked arrangement (thread = token, items = slots), and
     * the three-step path scans tokens in order per expert (1.2, 1.3). */
    for (int pass = 0; pass < 2; pass++) {
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < k; j++) {
                int64_t e = (int64_t)id[t * k + j] - start;
                int local = e >= 0 && e < El;
                if (!local) {
                    /* 1.2: the fused kernel still writes non-local slots,
                     * after all local rows; 1.3: three-step never sees them */
                    if (!fused) continue;
                    e = El;
                } else if (!fused) {
                    /* 1.3/1.4: blockExpertPrefixSumKernel keeps a token's
                     * first slot for an expert and breaks, so a repeated
                     * expert adds no row (its inverse entry stays stale) */
                    if (seen[e] == t + 1) continue;
                    seen[e] = t + 1;
                }
                if (pass == 0) {
                    cnt[e]++;
                    continue;
                }
                int64_t p = cnt[e]++, u = j * T + t;
                ((int32_t *)permuted_row_to_unpermuted_row->data)[p] = (int32_t)u;
                ((int32_t *)unpermuted_row_to_permuted_row->data)[u] = (int32_t)p;
                if (!fused && permuted_token_selected_experts)
                    ((int32_t *)permuted_token_selected_experts->data)[p] = (int32_t)e;
            }
        if (pass == 0) {
            /* exclusive prefix: bin starts double as the write cursors and,
             * for bins 0..El, are expert_first_token_offset (the start of
             * the non-local bin is num_valid) */
            int64_t *off = expert_first_token_offset->data, run = 0;
            for (int e = 0; e <= El; e++) {
                int64_t c = cnt[e];
                off[e] = cnt[e] = run;
                run += c;
            }
            for (int e = 0; e < El; e++) seen[e] = 0;
        }
    }
    free(cnt);
    return MOE_OK;
}

moe_status moe_maps_trtllm_select(const moe_trtllm_prologue_query *q, moe_trtllm_prologue_choice *c)
{
    if (!q) return moe_fail(MOE_ERR_NULL, "query: must not be NULL");
    if (!c) return moe_fail(MOE_ERR_NULL, "choice: must not be NULL");
    if (q->num_tokens < 0)
        return moe_fail(MOE_ERR_INVALID_ARG, "num_tokens %lld: must be >= 0", (long long)q->num_tokens);
    if (q->experts_per_token <= 0)
        return moe_fail(MOE_ERR_INVALID_ARG, "experts_per_token %d: must be > 0", q->experts_per_token);
    if (q->num_experts_per_node <= 0)
        return moe_fail(MOE_ERR_INVALID_ARG, "num_experts_per_node %d: must be > 0",
                        q->num_experts_per_node);
    if (q->gate != MOE_TRTLLM_GATE_NOT_WFP4A16 && q->gate != MOE_TRTLLM_GATE_NOT_W4_GROUPWISE)
        return moe_fail(MOE_ERR_INVALID_ARG, "gate %d: not a moe_trtllm_prologue_gate", (int)q->gate);

    /* the radix ranks keys 0..E_local+1 (local, non-local, padding thread),
     * so it needs floor(log2(E_local + 1)) + 1 bits, instantiated up to 9 */
    int expert_log = 0;
    for (int64_t v = (int64_t)q->num_experts_per_node + 1; v; v >>= 1) expert_log++;
    int64_t T = q->num_tokens;
    int block = T <= 32 ? 32 : T <= 64 ? 64 : T <= 128 ? 128 : T <= 256 ? 256 : 0;
    int k = q->experts_per_token;

    moe_trtllm_fallback_reason r = MOE_TRTLLM_FUSED_OK;
    int w4 = q->gate == MOE_TRTLLM_GATE_NOT_WFP4A16 ? q->use_wfp4a16 != 0
                                                     : (q->use_wfp4a16 || q->use_w4afp8);
    if (w4) r = MOE_TRTLLM_FALLBACK_W4_GATE;
    else if (T > 256) r = MOE_TRTLLM_FALLBACK_TOO_MANY_TOKENS; /* one block of <= 256 threads */
    else if (k != 1 && k != 2 && k != 4 && k != 6 && k != 8) r = MOE_TRTLLM_FALLBACK_TOPK;
    else if (expert_log > 9) r = MOE_TRTLLM_FALLBACK_EXPERT_LOG;
    else if (q->radix_smem_exceeds) r = MOE_TRTLLM_FALLBACK_SMEM;

    c->variant = r == MOE_TRTLLM_FUSED_OK ? MOE_MAPS_TRTLLM_FUSED_SINGLE_BLOCK
                                          : MOE_MAPS_TRTLLM_THREE_STEP;
    c->reason = r;
    c->expert_log = expert_log;
    c->block_size = block;
    return MOE_OK;
}
