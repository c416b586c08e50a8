/* CPU backend: deepep_ll_dispatch, deepep_ll_combine. */
#include "cpu.h"

moe_status moe_cpu_deepep_ll_dispatch(const moe_deepep_ll_config *cfg, const moe_tensor *x, const moe_tensor *topk_ids, const moe_deepep_ll_recv *out)
{
    /* DELEGATES to the reference: not optimized yet */
    return moe_ref_deepep_ll_dispatch(cfg, x, topk_ids, out);
}

moe_status moe_cpu_deepep_ll_combine(const moe_deepep_ll_config *cfg, const moe_tensor *y, const moe_tensor *src_info, const moe_tensor *layout_range, const moe_tensor *topk_ids, const moe_tensor *topk_weights, moe_tensor *out)
{
    /* DELEGATES to the reference: not optimized yet */
    return moe_ref_deepep_ll_combine(cfg, y, src_info, layout_range, topk_ids, topk_weights, out);
}
