/* CPU backend: permute_rows, unpermute_rows, expand_trtllm, batched_scatter, permute_grouped. */
#include "cpu.h"

moe_status moe_cpu_permute_rows(const moe_tensor *x, const moe_tensor *src, moe_tensor *out)
{
    /* DELEGATES to the reference: not optimized yet */
    return moe_ref_permute_rows(x, src, out);
}

moe_status moe_cpu_unpermute_rows(const moe_tensor *y, const moe_tensor *dst, moe_tensor *out)
{
    /* DELEGATES to the reference: not optimized yet */
    return moe_ref_unpermute_rows(y, dst, out);
}

moe_status moe_cpu_expand_trtllm(const moe_tensor *x, const moe_tensor *permuted_row_to_unpermuted_row, int topk, const moe_tensor *topk_weights, moe_tensor *out, moe_tensor *permuted_scales)
{
    /* DELEGATES to the reference: not optimized yet */
    return moe_ref_expand_trtllm(x, permuted_row_to_unpermuted_row, topk, topk_weights, out, permuted_scales);
}

moe_status moe_cpu_batched_scatter(const moe_tensor *x, const moe_tensor *topk_ids, int first_expert, moe_tensor *out, moe_tensor *counts)
{
    /* DELEGATES to the reference: not optimized yet */
    return moe_ref_batched_scatter(x, topk_ids, first_expert, out, counts);
}

moe_status moe_cpu_permute_grouped(const moe_tensor *x, const moe_tensor *topk_ids, int first_expert, int pad_multiple, moe_tensor *out, moe_tensor *row_src, moe_tensor *counts, moe_tensor *offsets)
{
    /* DELEGATES to the reference: not optimized yet */
    return moe_ref_permute_grouped(x, topk_ids, first_expert, pad_multiple, out, row_src, counts, offsets);
}
