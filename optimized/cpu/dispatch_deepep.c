/* CPU backend: deepep_layout, deepep_dispatch, deepep_combine. */
#include "cpu.h"

moe_status moe_cpu_deepep_layout(const moe_deepep_config *cfg, const moe_tensor *topk_ids, const moe_deepep_layout *out)
{
    /* DELEGATES to the reference: not optimized yet */
    return moe_ref_deepep_layout(cfg, topk_ids, out);
}

moe_status moe_cpu_deepep_dispatch(const moe_deepep_config *cfg, const moe_tensor *x, const moe_tensor *x_scales, const moe_tensor *topk_ids, const moe_tensor *topk_weights, const moe_deepep_recv *out)
{
    /* DELEGATES to the reference: not optimized yet */
    return moe_ref_deepep_dispatch(cfg, x, x_scales, topk_ids, topk_weights, out);
}

moe_status moe_cpu_deepep_combine(const moe_deepep_config *cfg, const moe_tensor *x, const moe_tensor *topk_weights, const moe_tensor *is_token_in_rank, const moe_tensor *bias0, const moe_tensor *bias1, moe_tensor *combined_x, moe_tensor *combined_topk_weights)
{
    /* DELEGATES to the reference: not optimized yet */
    return moe_ref_deepep_combine(cfg, x, topk_weights, is_token_in_rank, bias0, bias1, combined_x, combined_topk_weights);
}
