/* CPU backend: sort_ck. */
#include "cpu.h"

moe_status moe_cpu_sort_ck(const moe_tensor *topk_ids, const moe_tensor *topk_weights, const moe_sort_ck_params *params, moe_tensor *sorted_token_ids, moe_tensor *sorted_weights, moe_tensor *sorted_expert_ids, moe_tensor *num_tokens_post_padded)
{
    /* DELEGATES to the reference: not optimized yet */
    return moe_ref_sort_ck(topk_ids, topk_weights, params, sorted_token_ids, sorted_weights, sorted_expert_ids, num_tokens_post_padded);
}
