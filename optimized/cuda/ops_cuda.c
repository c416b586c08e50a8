/* The CUDA conformance tables. moe_ops_cuda_conform: every stage entry is
 * its moe_cuda_* function (optimized/cuda/<the reference's file name>.cu),
 * EXACT against the reference. moe_ops_cuda_atomic: the same table with
 * upstream's atomic kernels where upstream uses atomics to place rows
 * (vLLM's align large path, DeepEP-LL and pplx dispatch): those three
 * stages are SET in the tolerance table, everything else and the forward
 * stay EXACT (a row's data never depends on where it lands), so the sweep
 * shows the difference atomics make. moe_ops_cuda_fast: the conformance
 * table with the tensor-core grouped GEMM (fast_gemm.cu, BOUNDED); its
 * fused experts forward (fast.h) has no ops-table entry and is timed by
 * moe-bench. Memory entries: memory.cu. Plain C,
 * so the designated initializers check every entry's signature. */
#include "cuda.h"

#define CUDA_COMMON_ENTRIES                                                                                 \
    .abi_version = MOE_OPS_ABI_VERSION, .device = MOE_DEVICE_CUDA, .alloc = moe_cuda_alloc,                 \
    .free = moe_cuda_free, .copy = moe_cuda_copy, .synchronize = moe_cuda_synchronize,                      \
    .route = moe_cuda_route, .align_batched = moe_cuda_align_batched, .sort_ck = moe_cuda_sort_ck,          \
    .maps_trtllm = moe_cuda_maps_trtllm, .quantize = moe_cuda_quantize, .dequantize = moe_cuda_dequantize,  \
    .permute_rows = moe_cuda_permute_rows, .unpermute_rows = moe_cuda_unpermute_rows,                       \
    .expand_trtllm = moe_cuda_expand_trtllm, .batched_scatter = moe_cuda_batched_scatter,                   \
    .permute_grouped = moe_cuda_permute_grouped,                                                      \
    .activation = moe_cuda_activation, .war_contiguous = moe_cuda_war_contiguous,                           \
    .war_noop = moe_cuda_war_noop, .war_naive_batched = moe_cuda_war_naive_batched,                         \
    .finalize_trtllm = moe_cuda_finalize_trtllm, .ep_allgather_dispatch = moe_cuda_ep_allgather_dispatch,   \
    .ep_reduce_scatter_combine = moe_cuda_ep_reduce_scatter_combine, .deepep_layout = moe_cuda_deepep_layout, \
    .deepep_dispatch = moe_cuda_deepep_dispatch, .deepep_combine = moe_cuda_deepep_combine,                 \
    .deepep_ll_combine = moe_cuda_deepep_ll_combine, .pplx_combine = moe_cuda_pplx_combine,                 \
    .hep_dispatch_with_permute = moe_cuda_hep_dispatch_with_permute,                                        \
    .hep_combine_with_unpermute = moe_cuda_hep_combine_with_unpermute

const moe_ops moe_ops_cuda_conform = {
    CUDA_COMMON_ENTRIES,
    .name = "cuda-conform",
    .grouped_gemm = moe_cuda_grouped_gemm,
    .align_block_size = moe_cuda_align_block_size,
    .deepep_ll_dispatch = moe_cuda_deepep_ll_dispatch,
    .pplx_dispatch = moe_cuda_pplx_dispatch,
};

const moe_ops moe_ops_cuda_atomic = {
    CUDA_COMMON_ENTRIES,
    .name = "cuda-atomic",
    .grouped_gemm = moe_cuda_grouped_gemm,
    .align_block_size = moe_cuda_align_block_size_atomic,
    .deepep_ll_dispatch = moe_cuda_deepep_ll_dispatch_atomic,
    .pplx_dispatch = moe_cuda_pplx_dispatch_atomic,
};

const moe_ops moe_ops_cuda_fast = {
    CUDA_COMMON_ENTRIES,
    .name = "cuda-fast",
    .grouped_gemm = moe_cuda_fast_grouped_gemm,
    .align_block_size = moe_cuda_align_block_size,
    .deepep_ll_dispatch = moe_cuda_deepep_ll_dispatch,
    .pplx_dispatch = moe_cuda_pplx_dispatch,
};
