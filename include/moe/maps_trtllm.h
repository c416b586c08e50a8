/* TensorRT-LLM CUTLASS MoE routing prologue: token_selected_experts ->
 * permutation maps (anchors trtllm_moe.md sections 1 and 6; seed 001 for the
 * fused-vs-three-step selection).
 *
 * Expanded ("unpermuted") rows are k-major: u = j*T + t for token t, slot j.
 * Permuted rows are grouped by local expert ascending, then token ascending,
 * then slot ascending (1.1). Ids outside [start_expert, start_expert +
 * num_local_experts) -- other ranks' experts, negatives, ids >= E -- are
 * "not on this rank", never an error (1.1).
 *
 * Both upstream algorithms are reproduced, including where they differ
 * (1.4):
 *   FUSED_SINGLE_BLOCK  every slot of every token gets a row: non-local
 *                       rows follow the local ones (positions >= num_valid)
 *                       in (t, j) order, so both maps are full permutations
 *                       of [0, k*T); a token that picks an expert twice
 *                       gets two rows. permuted_token_selected_experts is
 *                       not written.
 *   THREE_STEP          for each local expert a token contributes only its
 *                       first matching slot. Entries upstream never writes
 *                       are left untouched here: permuted_row_to_unpermuted_row
 *                       at p >= num_valid, unpermuted_row_to_permuted_row for
 *                       non-local slots and for repeated slots of a
 *                       duplicated expert. permuted_token_selected_experts
 *                       (local id) is written for p < num_valid.
 * Without duplicates the two agree on every local row and on the offsets. */
#ifndef MOE_MAPS_TRTLLM_H
#define MOE_MAPS_TRTLLM_H

#include <stdint.h>
#include "moe/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MOE_MAPS_TRTLLM_FUSED_SINGLE_BLOCK = 0, /* fusedBuildExpertMapsSortFirstToken */
    MOE_MAPS_TRTLLM_THREE_STEP = 1          /* threeStepBuildExpertMapsSortFirstToken */
} moe_maps_trtllm_variant;

typedef struct {
    moe_maps_trtllm_variant variant;
    int num_experts;       /* global E, > 0; topk <= E */
    int start_expert;      /* first expert of this rank, >= 0 */
    int num_local_experts; /* E_local, > 0, start_expert + E_local <= E */
} moe_maps_trtllm_params;

/* token_selected_experts int32 [T, k]. Outputs (caller-allocated, 1-D, host):
 *   permuted_row_to_unpermuted_row int32 [k*T],
 *   unpermuted_row_to_permuted_row int32 [k*T],
 *   expert_first_token_offset int64 [E_local + 1] (exclusive prefix counts;
 *     the last entry is num_valid, the number of local rows),
 *   permuted_token_selected_experts int32 [k*T] or NULL.
 * On any error no output is written. */
moe_status moe_ref_maps_trtllm(const moe_tensor *token_selected_experts,
                               const moe_maps_trtllm_params *params,
                               moe_tensor *permuted_row_to_unpermuted_row,
                               moe_tensor *unpermuted_row_to_permuted_row,
                               moe_tensor *expert_first_token_offset,
                               moe_tensor *permuted_token_selected_experts);

/* Which prologue runMoe attempts first: the gate on the weight scheme. */
typedef enum {
    /* newest runner ([K] @ 296138db) and seed 001: fused unless wfp4a16 */
    MOE_TRTLLM_GATE_NOT_WFP4A16 = 0,
    /* [OLD] @ ac73e311: fused unless w4 groupwise (W4AFP8 or wfp4a16) */
    MOE_TRTLLM_GATE_NOT_W4_GROUPWISE = 1
} moe_trtllm_prologue_gate;

/* The inputs of the selection (section 6 row 1, seed 001). Zero-initialised
 * fields are the common case: no W4 scheme, radix storage fits, newest gate. */
typedef struct {
    int64_t num_tokens;       /* T >= 0 */
    int experts_per_token;    /* k > 0 */
    int num_experts_per_node; /* E_local > 0 */
    int use_wfp4a16;
    int use_w4afp8;
    /* 1 when sizeof(cub::BlockRadixRank<block, expert_log>::TempStorage) >=
     * the device's opt-in shared memory per block. C cannot see cub's
     * layout, so the caller states it. */
    int radix_smem_exceeds;
    moe_trtllm_prologue_gate gate;
} moe_trtllm_prologue_query;

/* Why upstream falls back, the first failing condition in seed 001's order. */
typedef enum {
    MOE_TRTLLM_FUSED_OK = 0,
    MOE_TRTLLM_FALLBACK_W4_GATE,      /* the gate above refuses the scheme */
    MOE_TRTLLM_FALLBACK_TOO_MANY_TOKENS, /* T > 256 */
    MOE_TRTLLM_FALLBACK_TOPK,         /* k not in {1, 2, 4, 6, 8} */
    MOE_TRTLLM_FALLBACK_EXPERT_LOG,   /* floor(log2(E_local + 1)) + 1 > 9 */
    MOE_TRTLLM_FALLBACK_SMEM          /* radix_smem_exceeds */
} moe_trtllm_fallback_reason;

typedef struct {
    moe_maps_trtllm_variant variant;
    moe_trtllm_fallback_reason reason;
    int expert_log;  /* floor(log2(E_local + 1)) + 1, the radix bits */
    int block_size;  /* fused block: smallest of 32/64/128/256 >= T; 0 if T > 256 */
} moe_trtllm_prologue_choice;

moe_status moe_maps_trtllm_select(const moe_trtllm_prologue_query *query,
                                  moe_trtllm_prologue_choice *choice);

#ifdef __cplusplus
}
#endif

#endif
