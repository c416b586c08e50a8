/* CPU backend: align_block_size, align_batched. */
#include "cpu.h"

moe_status moe_cpu_align_block_size(const moe_tensor *topk_ids, const moe_align_params *p, moe_tensor *sorted_token_ids, moe_tensor *expert_ids, moe_tensor *num_tokens_post_pad)
{
    /* DELEGATES to the reference: not optimized yet */
    return moe_ref_align_block_size(topk_ids, p, sorted_token_ids, expert_ids, num_tokens_post_pad);
}

moe_status moe_cpu_align_batched(const moe_tensor *expert_num_tokens, int max_tokens, int block_size, moe_tensor *sorted_token_ids, moe_tensor *expert_ids, moe_tensor *num_tokens_post_pad)
{
    /* DELEGATES to the reference: not optimized yet */
    return moe_ref_align_batched(expert_num_tokens, max_tokens, block_size, sorted_token_ids, expert_ids, num_tokens_post_pad);
}
