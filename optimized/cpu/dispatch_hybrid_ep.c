/* CPU backend: hep_dispatch_with_permute, hep_combine_with_unpermute. */
#include "cpu.h"

moe_status moe_cpu_hep_dispatch_with_permute(const moe_hep_config *cfg, const moe_tensor *x, const moe_tensor *x_scales, const moe_tensor *topk_ids, const moe_tensor *topk_weights, const moe_hep_permuted *out)
{
    /* DELEGATES to the reference: not optimized yet */
    return moe_ref_hep_dispatch_with_permute(cfg, x, x_scales, topk_ids, topk_weights, out);
}

moe_status moe_cpu_hep_combine_with_unpermute(const moe_hep_config *cfg, const moe_tensor *y, const moe_tensor *row_id_map, const moe_tensor *probs, moe_tensor *out, moe_tensor *out_probs)
{
    /* DELEGATES to the reference: not optimized yet */
    return moe_ref_hep_combine_with_unpermute(cfg, y, row_id_map, probs, out, out_probs);
}
