/* CPU backend: maps_trtllm. */
#include "cpu.h"

moe_status moe_cpu_maps_trtllm(const moe_tensor *token_selected_experts, const moe_maps_trtllm_params *params, moe_tensor *permuted_row_to_unpermuted_row, moe_tensor *unpermuted_row_to_permuted_row, moe_tensor *expert_first_token_offset, moe_tensor *permuted_token_selected_experts)
{
    /* DELEGATES to the reference: not optimized yet */
    return moe_ref_maps_trtllm(token_selected_experts, params, permuted_row_to_unpermuted_row, unpermuted_row_to_permuted_row, expert_first_token_offset, permuted_token_selected_experts);
}
