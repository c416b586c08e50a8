/* The argument checks of the reference stages, exported so that another
 * backend of the ops table (optimized/cpu/) refuses bad input with the
 * reference's own code: the same status, the same message, in the same
 * order. Each moe_ref_check_<entry> takes the stage's arguments and runs
 * every check the reference stage runs before it writes anything; the
 * stage itself begins by calling it. Checks the reference can only make
 * while it computes (a count past a capacity, a bad handle found while
 * rebuilding an index) stay in the stage: a backend that finds such an
 * input calls the reference stage, which reports it.
 *
 * Private to the project (reference/ is on the quote path only); not part
 * of the public API in include/moe/. */
#ifndef MOE_REFERENCE_STAGE_CHECKS_H
#define MOE_REFERENCE_STAGE_CHECKS_H

#include "moe/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* routing (includes the num_expert_group <= 1024 limit) */
moe_status moe_ref_check_route(const moe_tensor *logits, const moe_route_params *p, const moe_tensor *topk_ids,
                               const moe_tensor *topk_weights);

/* align / sort / maps. align_block_size includes the id range scan; sort_ck
 * stops before counting (ids out of range or repeated in a row, the padded
 * total and the output sizes it needs are found by the stage). */
moe_status moe_ref_check_align_block_size(const moe_tensor *topk_ids, const moe_align_params *p,
                                          const moe_tensor *sorted_token_ids, const moe_tensor *expert_ids,
                                          const moe_tensor *num_tokens_post_pad);
moe_status moe_ref_check_align_batched(const moe_tensor *expert_num_tokens, int max_tokens, int block_size,
                                       const moe_tensor *sorted_token_ids, const moe_tensor *expert_ids,
                                       const moe_tensor *num_tokens_post_pad);
moe_status moe_ref_check_sort_ck(const moe_tensor *topk_ids, const moe_tensor *topk_weights,
                                 const moe_sort_ck_params *params, const moe_tensor *sorted_token_ids,
                                 const moe_tensor *sorted_weights, const moe_tensor *sorted_expert_ids,
                                 const moe_tensor *num_tokens_post_padded);
moe_status moe_ref_check_maps_trtllm(const moe_tensor *token_selected_experts,
                                     const moe_maps_trtllm_params *params,
                                     const moe_tensor *permuted_row_to_unpermuted_row,
                                     const moe_tensor *unpermuted_row_to_permuted_row,
                                     const moe_tensor *expert_first_token_offset,
                                     const moe_tensor *permuted_token_selected_experts);

/* quantization (quantize includes the static scale's positivity scan) */
moe_status moe_ref_check_quantize(const moe_quant_spec *spec, const moe_tensor *x,
                                  const moe_tensor *static_scale, const moe_tensor *q_out,
                                  const moe_tensor *scale_out, const moe_tensor *global_scale_out);
moe_status moe_ref_check_dequantize(const moe_quant_spec *spec, const moe_tensor *q,
                                    const moe_tensor *scale, const moe_tensor *global_scale,
                                    const moe_tensor *x_out);

/* permutation. batched_scatter stops before placing rows (an expert past
 * max_tokens is found by the stage). */
moe_status moe_ref_check_permute_rows(const moe_tensor *x, const moe_tensor *src, const moe_tensor *out);
moe_status moe_ref_check_unpermute_rows(const moe_tensor *y, const moe_tensor *dst, const moe_tensor *out);
moe_status moe_ref_check_expand_trtllm(const moe_tensor *x, const moe_tensor *permuted_row_to_unpermuted_row,
                                       int topk, const moe_tensor *topk_weights, const moe_tensor *out,
                                       const moe_tensor *permuted_scales);
moe_status moe_ref_check_batched_scatter(const moe_tensor *x, const moe_tensor *topk_ids, int first_expert,
                                         const moe_tensor *out, const moe_tensor *counts);
moe_status moe_ref_check_permute_grouped(const moe_tensor *x, const moe_tensor *topk_ids, int first_expert,
                                         int pad_multiple, const moe_tensor *out, const moe_tensor *row_src,
                                         const moe_tensor *counts, const moe_tensor *offsets);

/* activation (includes the row_expert scan) */
moe_status moe_ref_check_activation(const moe_tensor *x, const moe_tensor *row_expert, const moe_act_params *p,
                                    const moe_tensor *out);

/* weight and reduce. naive_batched stops before the rows (an expert past
 * max_tokens is found by the stage); finalize includes the map scan. */
moe_status moe_ref_check_war_contiguous(const moe_tensor *fused, const moe_tensor *topk_weights,
                                        int weights_on_input, moe_sum_variant sum, const moe_tensor *out);
moe_status moe_ref_check_war_noop(const moe_tensor *fused, const moe_tensor *out);
moe_status moe_ref_check_war_naive_batched(const moe_tensor *fused, const moe_tensor *topk_ids,
                                           const moe_tensor *topk_weights, int first_expert,
                                           int weights_on_input, const moe_tensor *out);
moe_status moe_ref_check_finalize_trtllm(const moe_tensor *y, const moe_tensor *unpermuted_row_to_permuted_row,
                                         const moe_tensor *topk_ids, const moe_tensor *topk_weights,
                                         const moe_tensor *bias, int first_expert, int num_local_experts,
                                         const moe_tensor *out);

/* dispatch / combine. Left to the stages: DeepEP dispatch's received rows
 * past N; DeepEP combine's is_token_in_rank bytes and rows past N; the
 * LL and pplx combines' handles (src_info / layout_range, num_tokens /
 * src); Hybrid-EP dispatch's rows past N in blocking mode. Hybrid-EP
 * combine's row_id_map scan is part of its check. */
moe_status moe_ref_check_ep_allgather_dispatch(int world_size, int num_experts, const moe_tensor *x,
                                               const moe_tensor *x_scales, const moe_tensor *topk_ids,
                                               const moe_tensor *topk_weights, const moe_tensor *gathered_x,
                                               const moe_tensor *gathered_scales, const moe_tensor *gathered_ids,
                                               const moe_tensor *gathered_weights);
moe_status moe_ref_check_ep_reduce_scatter_combine(int world_size, const moe_tensor *partial,
                                                   const moe_tensor *out);
moe_status moe_ref_check_deepep_layout(const moe_deepep_config *cfg, const moe_tensor *topk_ids,
                                       const moe_deepep_layout *out);
moe_status moe_ref_check_deepep_dispatch(const moe_deepep_config *cfg, const moe_tensor *x,
                                         const moe_tensor *x_scales, const moe_tensor *topk_ids,
                                         const moe_tensor *topk_weights, const moe_deepep_recv *out);
moe_status moe_ref_check_deepep_combine(const moe_deepep_config *cfg, const moe_tensor *x,
                                        const moe_tensor *topk_weights, const moe_tensor *is_token_in_rank,
                                        const moe_tensor *bias0, const moe_tensor *bias1,
                                        const moe_tensor *combined_x, const moe_tensor *combined_topk_weights);
moe_status moe_ref_check_deepep_ll_dispatch(const moe_deepep_ll_config *cfg, const moe_tensor *x,
                                            const moe_tensor *topk_ids, const moe_deepep_ll_recv *out);
moe_status moe_ref_check_deepep_ll_combine(const moe_deepep_ll_config *cfg, const moe_tensor *y,
                                           const moe_tensor *src_info, const moe_tensor *layout_range,
                                           const moe_tensor *topk_ids, const moe_tensor *topk_weights,
                                           const moe_tensor *out);
moe_status moe_ref_check_pplx_dispatch(const moe_pplx_config *cfg, const moe_tensor *x,
                                       const moe_tensor *x_scales, const moe_tensor *topk_ids,
                                       const moe_pplx_recv *out);
moe_status moe_ref_check_pplx_combine(const moe_pplx_config *cfg, const moe_tensor *expert_y,
                                      const moe_tensor *num_tokens, const moe_tensor *src,
                                      const moe_tensor *topk_ids, const moe_tensor *topk_weights,
                                      const moe_tensor *out);
moe_status moe_ref_check_hep_dispatch_with_permute(const moe_hep_config *cfg, const moe_tensor *x,
                                                   const moe_tensor *x_scales, const moe_tensor *topk_ids,
                                                   const moe_tensor *topk_weights, const moe_hep_permuted *out);
moe_status moe_ref_check_hep_combine_with_unpermute(const moe_hep_config *cfg, const moe_tensor *y,
                                                    const moe_tensor *row_id_map, const moe_tensor *probs,
                                                    const moe_tensor *out, const moe_tensor *out_probs);

#ifdef __cplusplus
}
#endif

#endif
