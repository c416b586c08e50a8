/* ROCm composable_kernel (ck_tile) moe-sorting: (token, slot) pairs grouped
 * by expert into unit_size tiles for the fused-MoE GEMMs (anchors
 * dispatch_sorting.md sections B.1-B.6 and E).
 *
 * Layout, as upstream's Ex/Mp kernels and host reference produce it:
 *   - experts in ascending id; inside an expert, tokens in ascending id;
 *   - each expert's segment is ceil(cnt/unit)*unit entries, the tail padded
 *     with the sentinel (weight 0);
 *   - an empty expert takes 0 entries (skip-empty, CK's default) or one
 *     all-sentinel tile (the legacy kernel);
 *   - with a local expert mask, masked experts take nothing, their pairs
 *     vanish, and tiles carry compact local ids.
 *
 * Entries of sorted_token_ids / sorted_weights at positions >=
 * num_tokens_post_padded[0], and tiles >= num_tokens_post_padded[0]/unit of
 * sorted_expert_ids, are left untouched: the CK kernel does not write them
 * (B.3), so a harness that pre-fills both buffers with the same canary can
 * compare them whole. On any error no output is written. */
#ifndef MOE_SORT_CK_H
#define MOE_SORT_CK_H

#include <stdint.h>
#include "moe/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Entry encoding. Zero is CK's default (CK_TILE_REFERENCE_MOE_SORTING_MOCK_ID
 * = 1, B.2). */
typedef enum {
    /* token | (slot << 24) as a uint32 bit pattern; sentinel
     * num_tokens | (topk << 24). Needs num_tokens <= 0xFFFFFF, topk <= 255. */
    MOE_SORT_CK_MOCK_ID = 0,
    /* the token id alone; sentinel num_tokens */
    MOE_SORT_CK_PLAIN_ID = 1
} moe_sort_ck_id_mode;

/* Empty (unmasked) experts. Zero is the Ex/Mp kernels' default
 * (SkipExpertsWithZeroTokens = true, B.1/B.3). */
typedef enum {
    MOE_SORT_CK_SKIP_EMPTY = 0,
    MOE_SORT_CK_ONE_TILE_PER_EMPTY = 1
} moe_sort_ck_empty_mode;

/* The two documented max_num_tokens_padded formulas (B.4). */
typedef enum {
    /* topk*T + E*unit - topk: kernel header, reference_fused_moe, example
     * main.cpp. Enough for either empty mode when T >= 1 (distinct ids give
     * at least topk non-empty experts); at T = 0 in one-tile mode the need is
     * E*unit, topk more than this formula. */
    MOE_SORT_CK_PAD_UPDATED = 0,
    /* T*topk + E*(unit-1): README and kernel comments. Enough for
     * skip-empty only; one-tile mode can need up to E - topk more. */
    MOE_SORT_CK_PAD_README = 1
} moe_sort_ck_pad_formula;

typedef struct {
    int num_experts;                     /* E (global), > 0 */
    int unit_size;                       /* block_m, > 0 */
    moe_sort_ck_id_mode id_mode;
    moe_sort_ck_empty_mode empty_experts;
    const moe_tensor *local_expert_mask; /* int32 [E] of 0/1, or NULL: all local */
} moe_sort_ck_params;

/* Buffer sizes by `formula`: *max_num_tokens_padded entries for
 * sorted_token_ids and sorted_weights, *max_num_tiles (may be NULL) =
 * ceil(max_num_tokens_padded / unit) for sorted_expert_ids. */
moe_status moe_sort_ck_capacity(int64_t num_tokens, int topk, int num_experts, int unit_size,
                                moe_sort_ck_pad_formula formula,
                                int64_t *max_num_tokens_padded, int64_t *max_num_tiles);

/* topk_ids int32 [T, topk], ids in [0, E), distinct within a row;
 * topk_weights f32 [T, topk]. Outputs (caller-allocated, 1-D, host):
 *   sorted_token_ids int32 [L] (uint32 bit patterns, see id_mode),
 *   sorted_weights f32 [L] (same L; weights copied bit for bit, pads 0),
 *   sorted_expert_ids int32 [tiles] (local expert id per tile),
 *   num_tokens_post_padded int32 [2] = {padded total, T}.
 * L and tiles must hold this input's padded total (checked; the formulas of
 * moe_sort_ck_capacity give safe sizes except where noted there). */
moe_status moe_ref_sort_ck(const moe_tensor *topk_ids, const moe_tensor *topk_weights,
                           const moe_sort_ck_params *params, moe_tensor *sorted_token_ids,
                           moe_tensor *sorted_weights, moe_tensor *sorted_expert_ids,
                           moe_tensor *num_tokens_post_padded);

#ifdef __cplusplus
}
#endif

#endif
