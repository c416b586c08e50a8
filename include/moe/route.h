/* Routing: router logits [M, E] to top-k expert ids int32 [M, k] and
 * weights f32 [M, k] (anchors vllm_modular.md section 9).
 *
 * Shared rules: scores are computed in f32 with the canonical math of
 * reference/math.h; a NaN or Inf score becomes 0 (vLLM topk_softmax);
 * selection takes the largest remaining value k times, ties to the lower
 * expert id; weights are the unbiased scores of the chosen experts, in
 * selection order. renormalize divides each weight by their sum (summed in
 * slot order), or by 1 if that sum is not > 0; then a routed scaling
 * factor other than 1 multiplies them. */
#ifndef MOE_ROUTE_H
#define MOE_ROUTE_H

#include "moe/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MOE_ROUTE_SOFTMAX_TOPK = 0, /* vLLM fused_topk / topk_softmax: softmax with max
                                   subtraction, multiply by 1/sum */
    MOE_ROUTE_SIGMOID_TOPK,     /* scoring_func="sigmoid": 1/(1+exp(-x)) */
    MOE_ROUTE_GROUPED_TOPK,     /* DeepSeek-V2/V3 grouped_topk */
    MOE_ROUTE_LLAMA4_TOP1,      /* Llama-4: top-1 on the logits, weight sigmoid(logit) */
    MOE_ROUTE_COUNT
} moe_route_method;

typedef enum { MOE_SCORE_SOFTMAX = 0, MOE_SCORE_SIGMOID = 1 } moe_score_func;

typedef struct {
    moe_route_method method;
    int topk;
    int renormalize;
    moe_score_func score;              /* GROUPED_TOPK only */
    int num_expert_group;              /* GROUPED_TOPK: E divisible by it, E > it */
    int topk_group;                    /* GROUPED_TOPK: groups kept */
    float routed_scaling_factor;       /* 1 = none; must be finite and > 0 */
    const moe_tensor *correction_bias; /* f32 [E], finite; selection only; NULL = none */
} moe_route_params;

const char *moe_route_method_name(moe_route_method m);

/* logits [M, E] (f32, bf16 or f16) -> topk_ids int32 [M, k], topk_weights
 * f32 [M, k]. M = 0 is an empty problem. */
moe_status moe_ref_route(const moe_tensor *logits, const moe_route_params *p, moe_tensor *topk_ids,
                         moe_tensor *topk_weights);

#ifdef __cplusplus
}
#endif

#endif
