/* moe_ops_ref: the reference stages behind the ops table. Assigning each
 * moe_ref_* function to its entry makes the compiler check that every
 * signature matches the table. */
#include <string.h>
#include "moe/ops.h"

static moe_status ref_alloc(moe_tensor *t, moe_dtype dtype, int ndim, const int64_t *shape)
{
    return moe_tensor_alloc(t, dtype, ndim, shape);
}

static moe_status ref_copy(moe_tensor *dst, const moe_tensor *src)
{
    if (!dst || !src) return moe_fail(MOE_ERR_NULL, "dst, src: must not be NULL");
    if (dst->device.kind != MOE_DEVICE_HOST || src->device.kind != MOE_DEVICE_HOST)
        return moe_fail(MOE_ERR_UNSUPPORTED, "copy: the reference backend only reaches host memory");
    if (dst->dtype != src->dtype || dst->ndim != src->ndim)
        return moe_fail(MOE_ERR_SHAPE, "dst: dtype and rank must equal src's");
    for (int i = 0; i < src->ndim; i++)
        if (dst->shape[i] != src->shape[i])
            return moe_fail(MOE_ERR_SHAPE, "dst: shape[%d] = %lld, src has %lld", i, (long long)dst->shape[i],
                            (long long)src->shape[i]);
    if (src->nbytes && (!dst->data || !src->data)) return moe_fail(MOE_ERR_NULL, "dst, src: have no data");
    if (src->nbytes) memmove(dst->data, src->data, src->nbytes);
    return MOE_OK;
}

static moe_status ref_synchronize(void) { return MOE_OK; }

const moe_ops moe_ops_ref = {
    .abi_version = MOE_OPS_ABI_VERSION,
    .name = "ref",
    .device = MOE_DEVICE_HOST,
    .alloc = ref_alloc,
    .free = moe_tensor_free,
    .copy = ref_copy,
    .synchronize = ref_synchronize,
    .route = moe_ref_route,
    .align_block_size = moe_ref_align_block_size,
    .align_batched = moe_ref_align_batched,
    .sort_ck = moe_ref_sort_ck,
    .maps_trtllm = moe_ref_maps_trtllm,
    .quantize = moe_ref_quantize,
    .dequantize = moe_ref_dequantize,
    .permute_rows = moe_ref_permute_rows,
    .unpermute_rows = moe_ref_unpermute_rows,
    .expand_trtllm = moe_ref_expand_trtllm,
    .batched_scatter = moe_ref_batched_scatter,
    .permute_grouped = moe_ref_permute_grouped,
    .grouped_gemm = moe_ref_grouped_gemm,
    .activation = moe_ref_activation,
    .war_contiguous = moe_ref_war_contiguous,
    .war_noop = moe_ref_war_noop,
    .war_naive_batched = moe_ref_war_naive_batched,
    .finalize_trtllm = moe_ref_finalize_trtllm,
    .ep_allgather_dispatch = moe_ref_ep_allgather_dispatch,
    .ep_reduce_scatter_combine = moe_ref_ep_reduce_scatter_combine,
    .deepep_layout = moe_ref_deepep_layout,
    .deepep_dispatch = moe_ref_deepep_dispatch,
    .deepep_combine = moe_ref_deepep_combine,
    .deepep_ll_dispatch = moe_ref_deepep_ll_dispatch,
    .deepep_ll_combine = moe_ref_deepep_ll_combine,
    .pplx_dispatch = moe_ref_pplx_dispatch,
    .pplx_combine = moe_ref_pplx_combine,
    .hep_dispatch_with_permute = moe_ref_hep_dispatch_with_permute,
    .hep_combine_with_unpermute = moe_ref_hep_combine_with_unpermute,
};

moe_status moe_ops_check(const moe_ops *ops)
{
    if (!ops) return moe_fail(MOE_ERR_NULL, "ops: must not be NULL");
    if (ops->abi_version != MOE_OPS_ABI_VERSION)
        return moe_fail(MOE_ERR_UNSUPPORTED, "ops '%s': ABI version %u, this build expects %u",
                        ops->name ? ops->name : "?", ops->abi_version, MOE_OPS_ABI_VERSION);
    if (!ops->alloc || !ops->free || !ops->copy || !ops->synchronize)
        return moe_fail(MOE_ERR_INVALID_ARG, "ops '%s': alloc, free, copy and synchronize are required",
                        ops->name ? ops->name : "?");
    return MOE_OK;
}
