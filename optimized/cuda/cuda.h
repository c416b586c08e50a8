/* The CUDA conformance backend's stages (optimized/cuda/, the same file
 * names as reference/): one moe_cuda_<entry> per ops-table entry, the same
 * signature and the same argument checks (status codes and messages) as
 * moe_ref_<entry>. Tensors are CUDA device memory (the table's alloc);
 * every stage is bit-identical to the reference (DESIGN section 5: the
 * canonical math and format headers, --fmad=false, the reference's
 * accumulation order). C linkage, so the C side (combos/) links them.
 *
 * Stages run on the calling host thread's default stream (the tree is
 * built with --default-stream per-thread) and may return before the GPU
 * finishes; ops.synchronize waits. Errors the reference finds only while
 * it computes are found on the device and reported with the reference's
 * own status and message. No stage keeps state between calls, so several
 * host threads may call stages at once. */
#ifndef MOE_OPTIMIZED_CUDA_H
#define MOE_OPTIMIZED_CUDA_H

#include "moe/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

moe_status moe_cuda_route(const moe_tensor *logits, const moe_route_params *p, moe_tensor *topk_ids, moe_tensor *topk_weights);
moe_status moe_cuda_align_block_size(const moe_tensor *topk_ids, const moe_align_params *p, moe_tensor *sorted_token_ids, moe_tensor *expert_ids, moe_tensor *num_tokens_post_pad);
moe_status moe_cuda_align_batched(const moe_tensor *expert_num_tokens, int max_tokens, int block_size, moe_tensor *sorted_token_ids, moe_tensor *expert_ids, moe_tensor *num_tokens_post_pad);
moe_status moe_cuda_sort_ck(const moe_tensor *topk_ids, const moe_tensor *topk_weights, const moe_sort_ck_params *params, moe_tensor *sorted_token_ids, moe_tensor *sorted_weights, moe_tensor *sorted_expert_ids, moe_tensor *num_tokens_post_padded);
moe_status moe_cuda_maps_trtllm(const moe_tensor *token_selected_experts, const moe_maps_trtllm_params *params, moe_tensor *permuted_row_to_unpermuted_row, moe_tensor *unpermuted_row_to_permuted_row, moe_tensor *expert_first_token_offset, moe_tensor *permuted_token_selected_experts);
moe_status moe_cuda_quantize(const moe_quant_spec *spec, const moe_tensor *x, const moe_tensor *static_scale, moe_tensor *q_out, moe_tensor *scale_out, moe_tensor *global_scale_out);
moe_status moe_cuda_dequantize(const moe_quant_spec *spec, const moe_tensor *q, const moe_tensor *scale, const moe_tensor *global_scale, moe_tensor *x_out);
moe_status moe_cuda_permute_rows(const moe_tensor *x, const moe_tensor *src, moe_tensor *out);
moe_status moe_cuda_unpermute_rows(const moe_tensor *y, const moe_tensor *dst, moe_tensor *out);
moe_status moe_cuda_expand_trtllm(const moe_tensor *x, const moe_tensor *permuted_row_to_unpermuted_row, int topk, const moe_tensor *topk_weights, moe_tensor *out, moe_tensor *permuted_scales);
moe_status moe_cuda_batched_scatter(const moe_tensor *x, const moe_tensor *topk_ids, int first_expert, moe_tensor *out, moe_tensor *counts);
moe_status moe_cuda_permute_grouped(const moe_tensor *x, const moe_tensor *topk_ids, int first_expert, int pad_multiple, moe_tensor *out, moe_tensor *row_src, moe_tensor *counts, moe_tensor *offsets);
moe_status moe_cuda_grouped_gemm(const moe_gemm_args *g, moe_tensor *out);
moe_status moe_cuda_activation(const moe_tensor *x, const moe_tensor *row_expert, const moe_act_params *p, moe_tensor *out);
moe_status moe_cuda_war_contiguous(const moe_tensor *fused, const moe_tensor *topk_weights, int weights_on_input, moe_sum_variant sum, moe_tensor *out);
moe_status moe_cuda_war_noop(const moe_tensor *fused, moe_tensor *out);
moe_status moe_cuda_war_naive_batched(const moe_tensor *fused, const moe_tensor *topk_ids, const moe_tensor *topk_weights, int first_expert, int weights_on_input, moe_tensor *out);
moe_status moe_cuda_finalize_trtllm(const moe_tensor *y, const moe_tensor *unpermuted_row_to_permuted_row, const moe_tensor *topk_ids, const moe_tensor *topk_weights, const moe_tensor *bias, int first_expert, int num_local_experts, moe_tensor *out);
moe_status moe_cuda_ep_allgather_dispatch(int world_size, int num_experts, const moe_tensor *x, const moe_tensor *x_scales, const moe_tensor *topk_ids, const moe_tensor *topk_weights, moe_tensor *gathered_x, moe_tensor *gathered_scales, moe_tensor *gathered_ids, moe_tensor *gathered_weights);
moe_status moe_cuda_ep_reduce_scatter_combine(int world_size, const moe_tensor *partial, moe_tensor *out);
moe_status moe_cuda_deepep_layout(const moe_deepep_config *cfg, const moe_tensor *topk_ids, const moe_deepep_layout *out);
moe_status moe_cuda_deepep_dispatch(const moe_deepep_config *cfg, const moe_tensor *x, const moe_tensor *x_scales, const moe_tensor *topk_ids, const moe_tensor *topk_weights, const moe_deepep_recv *out);
moe_status moe_cuda_deepep_combine(const moe_deepep_config *cfg, const moe_tensor *x, const moe_tensor *topk_weights, const moe_tensor *is_token_in_rank, const moe_tensor *bias0, const moe_tensor *bias1, moe_tensor *combined_x, moe_tensor *combined_topk_weights);
moe_status moe_cuda_deepep_ll_dispatch(const moe_deepep_ll_config *cfg, const moe_tensor *x, const moe_tensor *topk_ids, const moe_deepep_ll_recv *out);
moe_status moe_cuda_deepep_ll_combine(const moe_deepep_ll_config *cfg, const moe_tensor *y, const moe_tensor *src_info, const moe_tensor *layout_range, const moe_tensor *topk_ids, const moe_tensor *topk_weights, moe_tensor *out);
moe_status moe_cuda_pplx_dispatch(const moe_pplx_config *cfg, const moe_tensor *x, const moe_tensor *x_scales, const moe_tensor *topk_ids, const moe_pplx_recv *out);
moe_status moe_cuda_pplx_combine(const moe_pplx_config *cfg, const moe_tensor *expert_y, const moe_tensor *num_tokens, const moe_tensor *src, const moe_tensor *topk_ids, const moe_tensor *topk_weights, moe_tensor *out);
moe_status moe_cuda_hep_dispatch_with_permute(const moe_hep_config *cfg, const moe_tensor *x, const moe_tensor *x_scales, const moe_tensor *topk_ids, const moe_tensor *topk_weights, const moe_hep_permuted *out);
moe_status moe_cuda_hep_combine_with_unpermute(const moe_hep_config *cfg, const moe_tensor *y, const moe_tensor *row_id_map, const moe_tensor *probs, moe_tensor *out, moe_tensor *out_probs);

/* Upstream's atomic kernels, beside the deterministic ones above: the
 * same outputs up to the order rows land in (SET in the tolerance table):
 * vLLM's align large path (rows of an expert in atomic order), DeepEP-LL
 * and pplx dispatch (received rows in atomic order). */
moe_status moe_cuda_align_block_size_atomic(const moe_tensor *topk_ids, const moe_align_params *p, moe_tensor *sorted_token_ids, moe_tensor *expert_ids, moe_tensor *num_tokens_post_pad);
moe_status moe_cuda_deepep_ll_dispatch_atomic(const moe_deepep_ll_config *cfg, const moe_tensor *x, const moe_tensor *topk_ids, const moe_deepep_ll_recv *out);
/* The fast backend's grouped GEMM (fast_gemm.cu): tensor cores for
 * unscaled bf16 / f16, BOUNDED; the conformance kernel otherwise. */
moe_status moe_cuda_fast_grouped_gemm(const moe_gemm_args *g, moe_tensor *out);
moe_status moe_cuda_pplx_dispatch_atomic(const moe_pplx_config *cfg, const moe_tensor *x, const moe_tensor *x_scales, const moe_tensor *topk_ids, const moe_pplx_recv *out);

/* memory entries (memory.cu) */
moe_status moe_cuda_alloc(moe_tensor *t, moe_dtype dtype, int ndim, const int64_t *shape);
void moe_cuda_free(moe_tensor *t);
moe_status moe_cuda_copy(moe_tensor *dst, const moe_tensor *src);
moe_status moe_cuda_synchronize(void);

/* Number of CUDA devices this process can use; 0 when the runtime finds
 * none (no GPU, no driver). combos/backends.c asks it before handing out a
 * CUDA table. */
int moe_cuda_backend_devices(void);
/* The CUDA runtime and driver versions ("13.0") and the device's name;
 * 0 (strings untouched) without a device. */
int moe_cuda_describe(char *runtime, char *driver, char *gpu, size_t n);

#ifdef __cplusplus
}
#endif

#endif
