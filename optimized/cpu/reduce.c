/* CPU backend: war_contiguous, war_noop, war_naive_batched, finalize_trtllm. */
#include "cpu.h"

moe_status moe_cpu_war_contiguous(const moe_tensor *fused, const moe_tensor *topk_weights, int weights_on_input, moe_sum_variant sum, moe_tensor *out)
{
    /* DELEGATES to the reference: not optimized yet */
    return moe_ref_war_contiguous(fused, topk_weights, weights_on_input, sum, out);
}

moe_status moe_cpu_war_noop(const moe_tensor *fused, moe_tensor *out)
{
    /* DELEGATES to the reference: not optimized yet */
    return moe_ref_war_noop(fused, out);
}

moe_status moe_cpu_war_naive_batched(const moe_tensor *fused, const moe_tensor *topk_ids, const moe_tensor *topk_weights, int first_expert, int weights_on_input, moe_tensor *out)
{
    /* DELEGATES to the reference: not optimized yet */
    return moe_ref_war_naive_batched(fused, topk_ids, topk_weights, first_expert, weights_on_input, out);
}

moe_status moe_cpu_finalize_trtllm(const moe_tensor *y, const moe_tensor *unpermuted_row_to_permuted_row, const moe_tensor *topk_ids, const moe_tensor *topk_weights, const moe_tensor *bias, int first_expert, int num_local_experts, moe_tensor *out)
{
    /* DELEGATES to the reference: not optimized yet */
    return moe_ref_finalize_trtllm(y, unpermuted_row_to_permuted_row, topk_ids, topk_weights, bias, first_expert, num_local_experts, out);
}
