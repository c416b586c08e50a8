/* Top-k weight-and-reduce: turning the experts' per-(token, slot) rows
 * into one row per token. Variants follow vLLM's TopKWeightAndReduce
 * (anchors vllm_modular.md 2.6) and TensorRT-LLM's finalize (trtllm_moe.md
 * 5.1). Storage dtypes are f32, bf16, f16; every store rounds RNE. */
#ifndef MOE_REDUCE_H
#define MOE_REDUCE_H

#include "moe/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MOE_WAR_NOOP = 0,          /* the experts already weighted and reduced: copy */
    MOE_WAR_CONTIGUOUS,        /* [M, k, K] rows: weight, then moe_sum */
    MOE_WAR_NAIVE_BATCHED,     /* [E_loc, max_tokens, K] rows back to tokens */
    MOE_WAR_DELEGATE,          /* marker: the prepare/finalize chooses; never applied */
    MOE_WAR_COUNT
} moe_war_kind;

const char *moe_war_name(moe_war_kind w);

/* vLLM's ops.moe_sum: for topk 2, 3, 4 the CUDA kernel accumulates in the
 * storage dtype (one rounding per add); other topk use an fp32 sum with one
 * rounding. Both are named so a combination can pick either; AUTO picks
 * what vLLM would for the given topk. */
typedef enum { MOE_SUM_AUTO = 0, MOE_SUM_FP32, MOE_SUM_STORAGE_PER_ADD } moe_sum_variant;

/* out[t] = sum over k of fused[t, k] (see moe_sum_variant), after, unless
 * weights_on_input, fused[t, k] = round(fused[t, k] * w[t, k]) (vLLM
 * multiplies in place, in fp32, rounding to the storage type).
 * fused [M*k, K] or [M, k, K]; topk_weights f32 [M, k]; out [M, K]. */
moe_status moe_ref_war_contiguous(const moe_tensor *fused, const moe_tensor *topk_weights,
                                  int weights_on_input, moe_sum_variant sum, moe_tensor *out);

/* out = fused (shapes and dtypes equal, or a dtype change with RNE). */
moe_status moe_ref_war_noop(const moe_tensor *fused, moe_tensor *out);

/* NaiveBatched(rank): out zeroed; for each local expert l (global
 * first_expert + l) in ascending order, its n tokens in ascending token
 * order take fused[l, 0..n): out[t] = round(out[t] + fused * w) (fp32
 * arithmetic, one rounding per expert; w = 1 when weights_on_input).
 * fused [E_loc, max_tokens, K]; topk_ids int32 [M, k]; out [M, K]. */
moe_status moe_ref_war_naive_batched(const moe_tensor *fused, const moe_tensor *topk_ids,
                                     const moe_tensor *topk_weights, int first_expert,
                                     int weights_on_input, moe_tensor *out);

/* TensorRT-LLM finalizeMoeRoutingKernel: for each token t and column c,
 * acc = 0; for j = 0..k-1 whose expert is local (first_expert <= e <
 * first_expert + E_loc): acc = fmaf(w[t,j], y[p] + bias[e_loc][c], acc)
 * with p = unpermuted_row_to_permuted_row[j*T + t]; out = round(acc). nvcc
 * contracts the multiply-add into an FMA, hence fmaf. Tokens with no local
 * expert get zeros (the filling kernel). bias f32 [E_loc, K] or NULL (pass
 * it on rank 0 only, as upstream does); topk_weights NULL means 1.
 * y [P, K]; map int32 [k*T]; topk_ids int32 [T, k]; out [T, K]. */
moe_status moe_ref_finalize_trtllm(const moe_tensor *y, const moe_tensor *unpermuted_row_to_permuted_row,
                                   const moe_tensor *topk_ids, const moe_tensor *topk_weights,
                                   const moe_tensor *bias, int first_expert, int num_local_experts,
                                   moe_tensor *out);

#ifdef __cplusplus
}
#endif

#endif
