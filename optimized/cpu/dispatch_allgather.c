/* CPU backend: ep_allgather_dispatch, ep_reduce_scatter_combine. */
#include "cpu.h"

moe_status moe_cpu_ep_allgather_dispatch(int world_size, int num_experts, const moe_tensor *x, const moe_tensor *x_scales, const moe_tensor *topk_ids, const moe_tensor *topk_weights, moe_tensor *gathered_x, moe_tensor *gathered_scales, moe_tensor *gathered_ids, moe_tensor *gathered_weights)
{
    /* DELEGATES to the reference: not optimized yet */
    return moe_ref_ep_allgather_dispatch(world_size, num_experts, x, x_scales, topk_ids, topk_weights, gathered_x, gathered_scales, gathered_ids, gathered_weights);
}

moe_status moe_cpu_ep_reduce_scatter_combine(int world_size, const moe_tensor *partial, moe_tensor *out)
{
    /* DELEGATES to the reference: not optimized yet */
    return moe_ref_ep_reduce_scatter_combine(world_size, partial, out);
}
