/* CPU backend: pplx_dispatch, pplx_combine. */
#include "cpu.h"

moe_status moe_cpu_pplx_dispatch(const moe_pplx_config *cfg, const moe_tensor *x, const moe_tensor *x_scales, const moe_tensor *topk_ids, const moe_pplx_recv *out)
{
    /* DELEGATES to the reference: not optimized yet */
    return moe_ref_pplx_dispatch(cfg, x, x_scales, topk_ids, out);
}

moe_status moe_cpu_pplx_combine(const moe_pplx_config *cfg, const moe_tensor *expert_y, const moe_tensor *num_tokens, const moe_tensor *src, const moe_tensor *topk_ids, const moe_tensor *topk_weights, moe_tensor *out)
{
    /* DELEGATES to the reference: not optimized yet */
    return moe_ref_pplx_combine(cfg, expert_y, num_tokens, src, topk_ids, topk_weights, out);
}
