/* Block alignment of routed (token, slot) pairs for gathered-GEMM experts:
 * vLLM's moe_align_block_size and batched_moe_align_block_size (anchors
 * vllm_modular.md section 4, dispatch_sorting.md section C).
 *
 * Upstream leaves the order inside an expert unspecified (the large-input
 * CUDA path places entries with atomicAdd; vLLM's own test compares
 * per-expert sets). The reference fixes it to ascending flat index
 * t*topk + k, the order of vLLM's small-input path and of its golden test's
 * stable sort; consumers compare the atomic upstream kernel as sets. */
#ifndef MOE_ALIGN_H
#define MOE_ALIGN_H

#include <stdint.h>
#include "moe/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    /* every global expert is counted and aligned; with an expert map the
     * blocks of non-local experts stay and get expert id -1 (vLLM's legacy
     * path: ids are remapped after the kernel, GEMMs write zeros) */
    MOE_ALIGN_MAP_KEEP_NONLOCAL = 0,
    /* the map is applied before counting: non-local pairs take no slot and
     * expert_ids hold local ids (ignore_invalid_experts=True) */
    MOE_ALIGN_MAP_IGNORE_INVALID = 1
} moe_align_map_mode;

typedef struct {
    int block_size;                /* > 0 */
    int num_experts;               /* global E */
    const moe_tensor *expert_map;  /* int32 [E], local id or -1; NULL: all local */
    moe_align_map_mode map_mode;
    int pad_sorted_ids;            /* round the buffer length up to block_size */
} moe_align_params;

/* Length of sorted_token_ids: numel + E*(block-1), rounded up to block when
 * pad_sorted_ids, and at most numel*block when numel < E (vLLM's sizing);
 * expert_ids has ceil(len/block) entries. */
moe_status moe_align_capacity(int64_t numel, const moe_align_params *p, int64_t *sorted_len,
                              int64_t *blocks);

/* topk_ids int32 [M, topk] with ids in [0, E). Outputs (caller-allocated,
 * int32, 1-D): sorted_token_ids [sorted_len] (flat indices, pad = M*topk),
 * expert_ids [blocks] (-1 past the used region), num_tokens_post_pad [1]. */
moe_status moe_ref_align_block_size(const moe_tensor *topk_ids, const moe_align_params *p,
                                    moe_tensor *sorted_token_ids, moe_tensor *expert_ids,
                                    moe_tensor *num_tokens_post_pad);

/* Batched layout: expert_num_tokens int32 [B] (each <= max_tokens).
 * sorted_token_ids [B*round_up(max_tokens, block)] holds b*max_tokens + j,
 * pad B*max_tokens; expert_ids [that/block] the batch of each block, -1
 * after; num_tokens_post_pad [1] = sum_b round_up(n_b, block). */
moe_status moe_ref_align_batched(const moe_tensor *expert_num_tokens, int max_tokens,
                                 int block_size, moe_tensor *sorted_token_ids,
                                 moe_tensor *expert_ids, moe_tensor *num_tokens_post_pad);

#ifdef __cplusplus
}
#endif

#endif
