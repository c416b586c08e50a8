/* The ops table: one C signature per MoE stage, and a struct of function
 * pointers a backend exports (DESIGN section 3). moe_ops_ref is the
 * reference; the CPU and CUDA backends fill the same table, and a
 * third-party backend will be a shared library exporting one. So the table
 * is plain C, versioned, and uses only the public types of include/moe/.
 *
 * Tensors carry a device tag; a backend's stages accept tensors on its
 * device (alloc/free/copy move data there and back). Every stage returns a
 * moe_status and leaves a message (moe_last_error) naming the argument and
 * the rule it broke. A NULL entry means the backend does not implement the
 * stage; callers must check and report it as unsupported. */
#ifndef MOE_OPS_H
#define MOE_OPS_H

#include <stdint.h>
#include "moe/act.h"
#include "moe/align.h"
#include "moe/dispatch.h"
#include "moe/gemm.h"
#include "moe/maps_trtllm.h"
#include "moe/permute.h"
#include "moe/quant.h"
#include "moe/reduce.h"
#include "moe/route.h"
#include "moe/sort_ck.h"
#include "moe/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever an entry is added, removed or changes signature. */
#define MOE_OPS_ABI_VERSION 1u

typedef struct moe_ops {
    uint32_t abi_version;      /* MOE_OPS_ABI_VERSION of the backend's build */
    const char *name;          /* "ref", "cpu", "cuda-conform", "cuda-fast", ... */
    moe_device_kind device;    /* where its tensors live */

    /* memory */
    moe_status (*alloc)(moe_tensor *t, moe_dtype dtype, int ndim, const int64_t *shape); /* zeroed */
    void (*free)(moe_tensor *t);
    /* dst and src of equal dtype and shape, each on the host or the backend's device */
    moe_status (*copy)(moe_tensor *dst, const moe_tensor *src);
    moe_status (*synchronize)(void);

    /* routing */
    moe_status (*route)(const moe_tensor *logits, const moe_route_params *p, moe_tensor *topk_ids,
                        moe_tensor *topk_weights);

    /* align / sort / maps */
    moe_status (*align_block_size)(const moe_tensor *topk_ids, const moe_align_params *p,
                                   moe_tensor *sorted_token_ids, moe_tensor *expert_ids,
                                   moe_tensor *num_tokens_post_pad);
    moe_status (*align_batched)(const moe_tensor *expert_num_tokens, int max_tokens, int block_size,
                                moe_tensor *sorted_token_ids, moe_tensor *expert_ids,
                                moe_tensor *num_tokens_post_pad);
    moe_status (*sort_ck)(const moe_tensor *topk_ids, const moe_tensor *topk_weights,
                          const moe_sort_ck_params *params, moe_tensor *sorted_token_ids,
                          moe_tensor *sorted_weights, moe_tensor *sorted_expert_ids,
                          moe_tensor *num_tokens_post_padded);
    moe_status (*maps_trtllm)(const moe_tensor *token_selected_experts, const moe_maps_trtllm_params *params,
                              moe_tensor *permuted_row_to_unpermuted_row,
                              moe_tensor *unpermuted_row_to_permuted_row,
                              moe_tensor *expert_first_token_offset,
                              moe_tensor *permuted_token_selected_experts);

    /* quantization */
    moe_status (*quantize)(const moe_quant_spec *spec, const moe_tensor *x, const moe_tensor *static_scale,
                           moe_tensor *q_out, moe_tensor *scale_out, moe_tensor *global_scale_out);
    moe_status (*dequantize)(const moe_quant_spec *spec, const moe_tensor *q, const moe_tensor *scale,
                             const moe_tensor *global_scale, moe_tensor *x_out);

    /* permutation */
    moe_status (*permute_rows)(const moe_tensor *x, const moe_tensor *src, moe_tensor *out);
    moe_status (*unpermute_rows)(const moe_tensor *y, const moe_tensor *dst, moe_tensor *out);
    moe_status (*expand_trtllm)(const moe_tensor *x, const moe_tensor *permuted_row_to_unpermuted_row, int topk,
                                const moe_tensor *topk_weights, moe_tensor *out, moe_tensor *permuted_scales);
    moe_status (*batched_scatter)(const moe_tensor *x, const moe_tensor *topk_ids, int first_expert,
                                  moe_tensor *out, moe_tensor *counts);
    moe_status (*permute_grouped)(const moe_tensor *x, const moe_tensor *topk_ids, int first_expert,
                                  int pad_multiple, moe_tensor *out, moe_tensor *row_src, moe_tensor *counts,
                                  moe_tensor *offsets);

    /* experts */
    moe_status (*grouped_gemm)(const moe_gemm_args *g, moe_tensor *out);
    moe_status (*activation)(const moe_tensor *x, const moe_tensor *row_expert, const moe_act_params *p,
                             moe_tensor *out);

    /* weight and reduce */
    moe_status (*war_contiguous)(const moe_tensor *fused, const moe_tensor *topk_weights, int weights_on_input,
                                 moe_sum_variant sum, moe_tensor *out);
    moe_status (*war_noop)(const moe_tensor *fused, moe_tensor *out);
    moe_status (*war_naive_batched)(const moe_tensor *fused, const moe_tensor *topk_ids,
                                    const moe_tensor *topk_weights, int first_expert, int weights_on_input,
                                    moe_tensor *out);
    moe_status (*finalize_trtllm)(const moe_tensor *y, const moe_tensor *unpermuted_row_to_permuted_row,
                                  const moe_tensor *topk_ids, const moe_tensor *topk_weights,
                                  const moe_tensor *bias, int first_expert, int num_local_experts,
                                  moe_tensor *out);

    /* dispatch / combine, ranks simulated in one process */
    moe_status (*ep_allgather_dispatch)(int world_size, int num_experts, const moe_tensor *x,
                                        const moe_tensor *x_scales, const moe_tensor *topk_ids,
                                        const moe_tensor *topk_weights, moe_tensor *gathered_x,
                                        moe_tensor *gathered_scales, moe_tensor *gathered_ids,
                                        moe_tensor *gathered_weights);
    moe_status (*ep_reduce_scatter_combine)(int world_size, const moe_tensor *partial, moe_tensor *out);
    moe_status (*deepep_layout)(const moe_deepep_config *cfg, const moe_tensor *topk_ids,
                                const moe_deepep_layout *out);
    moe_status (*deepep_dispatch)(const moe_deepep_config *cfg, const moe_tensor *x, const moe_tensor *x_scales,
                                  const moe_tensor *topk_ids, const moe_tensor *topk_weights,
                                  const moe_deepep_recv *out);
    moe_status (*deepep_combine)(const moe_deepep_config *cfg, const moe_tensor *x, const moe_tensor *topk_weights,
                                 const moe_tensor *is_token_in_rank, const moe_tensor *bias0,
                                 const moe_tensor *bias1, moe_tensor *combined_x,
                                 moe_tensor *combined_topk_weights);
    moe_status (*deepep_ll_dispatch)(const moe_deepep_ll_config *cfg, const moe_tensor *x,
                                     const moe_tensor *topk_ids, const moe_deepep_ll_recv *out);
    moe_status (*deepep_ll_combine)(const moe_deepep_ll_config *cfg, const moe_tensor *y,
                                    const moe_tensor *src_info, const moe_tensor *layout_range,
                                    const moe_tensor *topk_ids, const moe_tensor *topk_weights, moe_tensor *out);
    moe_status (*pplx_dispatch)(const moe_pplx_config *cfg, const moe_tensor *x, const moe_tensor *x_scales,
                                const moe_tensor *topk_ids, const moe_pplx_recv *out);
    moe_status (*pplx_combine)(const moe_pplx_config *cfg, const moe_tensor *expert_y,
                               const moe_tensor *num_tokens, const moe_tensor *src, const moe_tensor *topk_ids,
                               const moe_tensor *topk_weights, moe_tensor *out);
    moe_status (*hep_dispatch_with_permute)(const moe_hep_config *cfg, const moe_tensor *x,
                                            const moe_tensor *x_scales, const moe_tensor *topk_ids,
                                            const moe_tensor *topk_weights, const moe_hep_permuted *out);
    moe_status (*hep_combine_with_unpermute)(const moe_hep_config *cfg, const moe_tensor *y,
                                             const moe_tensor *row_id_map, const moe_tensor *probs,
                                             moe_tensor *out, moe_tensor *out_probs);
} moe_ops;

/* The reference backend: plain C on the host, the oracle. */
extern const moe_ops moe_ops_ref;

/* MOE_OK when ops is usable by this build: non-NULL, the ABI version
 * matches, the memory entries exist. Names the problem otherwise. */
moe_status moe_ops_check(const moe_ops *ops);

#ifdef __cplusplus
}
#endif

#endif
