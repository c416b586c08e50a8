/* Moving token rows between the token-major layout and the expert layouts
 * the experts' GEMMs read: gather by index (expand / vLLM-style gathered
 * rows), scatter back (unpermute), TensorRT-LLM's expand with permuted
 * router scales, the batched [E_loc, max_tokens, H] layout
 * (BatchedPrepareAndFinalize) and the padded expert-grouped layout
 * (DeepGEMM contiguous, Hybrid-EP style). Rows are moved as bytes, so any
 * dtype works, packed ones included. */
#ifndef MOE_PERMUTE_H
#define MOE_PERMUTE_H

#include <stdint.h>
#include "moe/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out[p] = x[src[p]] for src[p] in [0, T); src[p] == -1 gives a zero row.
 * x [T, H], src int32 [P], out [P, H] of x's dtype. */
moe_status moe_ref_permute_rows(const moe_tensor *x, const moe_tensor *src, moe_tensor *out);

/* out[dst[p]] = y[p] for dst[p] >= 0 (each destination at most once);
 * rows no p names are zero. y [P, H], dst int32 [P], out [T, H]. */
moe_status moe_ref_unpermute_rows(const moe_tensor *y, const moe_tensor *dst, moe_tensor *out);

/* TensorRT-LLM expandInputRowsKernel (anchors trtllm_moe.md section 2):
 * for p < P, u = permuted_row_to_unpermuted_row[p] (k-major u = j*T + t,
 * in [0, T*topk)): out[p] = x[u % T], permuted_scales[p] =
 * topk_weights[u % T, u / T]. x [T, H], map int32 [P], topk_weights f32
 * [T, topk] (NULL: scales 1.0), out [P, H], permuted_scales f32 [P] (NULL:
 * not written). */
moe_status moe_ref_expand_trtllm(const moe_tensor *x, const moe_tensor *permuted_row_to_unpermuted_row,
                                 int topk, const moe_tensor *topk_weights, moe_tensor *out,
                                 moe_tensor *permuted_scales);

/* BatchedPrepareAndFinalize's layout (anchors vllm_modular.md 2.7): for
 * each local expert l (global first_expert + l), the tokens whose topk_ids
 * row contains it, in ascending token order, packed into out[l, 0..n_l).
 * x [T, H], topk_ids int32 [T, k], out [E_loc, max_tokens, H] (rows past
 * n_l are zeroed), counts int32 [E_loc]. A count above max_tokens is an
 * error (the upstream buffer would overflow). */
moe_status moe_ref_batched_scatter(const moe_tensor *x, const moe_tensor *topk_ids,
                                   int first_expert, moe_tensor *out, moe_tensor *counts);

/* Padded expert-grouped layout: local experts in ascending order, each
 * one's rows in ascending flat index t*k + j, padded with zero rows to a
 * multiple of pad_multiple. row_src int32 [cap] gets t*k + j or -1 for
 * pads; counts int32 [E_loc] the unpadded rows; offsets int32 [E_loc+1]
 * the padded start of each expert. Pairs whose expert is outside
 * [first_expert, first_expert + E_loc) take no row. */
moe_status moe_grouped_capacity(int64_t pairs, int num_local_experts, int pad_multiple, int64_t *cap);
moe_status moe_ref_permute_grouped(const moe_tensor *x, const moe_tensor *topk_ids, int first_expert,
                                   int pad_multiple, moe_tensor *out, moe_tensor *row_src,
                                   moe_tensor *counts, moe_tensor *offsets);

#ifdef __cplusplus
}
#endif

#endif
