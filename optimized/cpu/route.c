/* CPU backend: route. */
#include "cpu.h"

moe_status moe_cpu_route(const moe_tensor *logits, const moe_route_params *p, moe_tensor *topk_ids, moe_tensor *topk_weights)
{
    /* DELEGATES to the reference: not optimized yet */
    return moe_ref_route(logits, p, topk_ids, topk_weights);
}
