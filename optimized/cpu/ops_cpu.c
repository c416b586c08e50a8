/* moe_ops_cpu: the CPU backend (OpenBLAS + OpenMP). Host memory, so the
 * memory entries are the reference's; every stage entry is its moe_cpu_*
 * function (optimized/cpu/<the reference's file name>). */
#include "cpu.h"

static moe_status cpu_alloc(moe_tensor *t, moe_dtype dtype, int ndim, const int64_t *shape)
{
    return moe_ops_ref.alloc(t, dtype, ndim, shape);
}
static void cpu_free(moe_tensor *t) { moe_ops_ref.free(t); }
static moe_status cpu_copy(moe_tensor *dst, const moe_tensor *src) { return moe_ops_ref.copy(dst, src); }
static moe_status cpu_synchronize(void) { return MOE_OK; }

const moe_ops moe_ops_cpu = {
    .abi_version = MOE_OPS_ABI_VERSION,
    .name = "cpu",
    .device = MOE_DEVICE_HOST,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .copy = cpu_copy,
    .synchronize = cpu_synchronize,
    .route = moe_cpu_route,
    .align_block_size = moe_cpu_align_block_size,
    .align_batched = moe_cpu_align_batched,
    .sort_ck = moe_cpu_sort_ck,
    .maps_trtllm = moe_cpu_maps_trtllm,
    .quantize = moe_cpu_quantize,
    .dequantize = moe_cpu_dequantize,
    .permute_rows = moe_cpu_permute_rows,
    .unpermute_rows = moe_cpu_unpermute_rows,
    .expand_trtllm = moe_cpu_expand_trtllm,
    .batched_scatter = moe_cpu_batched_scatter,
    .permute_grouped = moe_cpu_permute_grouped,
    .grouped_gemm = moe_cpu_grouped_gemm,
    .activation = moe_cpu_activation,
    .war_contiguous = moe_cpu_war_contiguous,
    .war_noop = moe_cpu_war_noop,
    .war_naive_batched = moe_cpu_war_naive_batched,
    .finalize_trtllm = moe_cpu_finalize_trtllm,
    .ep_allgather_dispatch = moe_cpu_ep_allgather_dispatch,
    .ep_reduce_scatter_combine = moe_cpu_ep_reduce_scatter_combine,
    .deepep_layout = moe_cpu_deepep_layout,
    .deepep_dispatch = moe_cpu_deepep_dispatch,
    .deepep_combine = moe_cpu_deepep_combine,
    .deepep_ll_dispatch = moe_cpu_deepep_ll_dispatch,
    .deepep_ll_combine = moe_cpu_deepep_ll_combine,
    .pplx_dispatch = moe_cpu_pplx_dispatch,
    .pplx_combine = moe_cpu_pplx_combine,
    .hep_dispatch_with_permute = moe_cpu_hep_dispatch_with_permute,
    .hep_combine_with_unpermute = moe_cpu_hep_combine_with_unpermute,
};
