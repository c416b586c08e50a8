/* moe_ref_forward: the whole MoE layer as straight-line code, the
 * end-to-end oracle. It follows vLLM's torch reference (torch_experts,
 * anchors vllm_modular.md section 7), with every rounding point fixed:
 *  1. routing: the given topk_ids / topk_weights, or moe_ref_route on the
 *     router logits;
 *  2. weights on input (topk 1 only): x = round(x * w) in x's dtype;
 *  3. the input is replicated to M*topk rows (row t*topk + j) and quantized
 *     once with the scheme's activation spec over all rows (a static a1
 *     scale if given);
 *  4. GEMM1 per row with its expert's w1 (moe_ref_grouped_gemm, + b1),
 *     rounded to x's dtype;
 *  5. the activation, rounded to x's dtype;
 *  6. requantization with the activation spec, per expert for per-tensor
 *     scales (torch_experts computes a dynamic scale over each expert's
 *     rows), or with a static a2 scale;
 *     steps 3 and 6 take a dynamic per-tensor scale over the domain the
 *     args name (a1_domain, a2_domain below): the defaults are
 *     torch_experts'; the other domains are the ones the modular kernel's
 *     types use upstream (one scale over all rows in TritonExperts' a2,
 *     one per expert batch in BatchedPrepareAndFinalize's a1), so each
 *     type has a reference with its own quantization points. Row-wise
 *     scales (per token, per group) do not depend on the domain;
 *  7. GEMM2 with w2 (+ b2), rounded to x's dtype;
 *  8. combine: out[t] = round(sum_j (w[t,j] * y[t*topk+j])) in f32, slot
 *     order, one rounding (or y itself when weights were on the input).
 * Slots whose expert is outside [first_expert, first_expert +
 * num_local_experts) contribute nothing: that is one expert-parallel rank's
 * partial result; the default range is all experts. */
#ifndef MOE_FORWARD_H
#define MOE_FORWARD_H

#include "moe/act.h"
#include "moe/quant.h"
#include "moe/route.h"
#include "moe/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The rows one dynamic per-tensor activation scale covers. */
typedef enum {
    MOE_QDOM_DEFAULT = 0,  /* a1: all rows; a2: per expert (torch_experts) */
    MOE_QDOM_ALL_ROWS,     /* one scale over every row of the step */
    MOE_QDOM_PER_EXPERT,   /* one scale per expert's rows */
    MOE_QDOM_COUNT
} moe_qdomain;

typedef struct {
    moe_scheme scheme;
    moe_act_params act;
    /* routing: topk_ids int32 [M, k] + topk_weights f32 [M, k], or route +
     * router_logits [M, E] when the ids are NULL */
    const moe_tensor *topk_ids, *topk_weights;
    const moe_route_params *route;
    const moe_tensor *router_logits;
    /* experts: w1 [E, N1, H] (N1 = 2I gated, I otherwise), w2 [E, H, I], in
     * the scheme's weight elements, with their scales / global scales */
    const moe_tensor *w1, *w1_scale, *w1_global;
    const moe_tensor *w2, *w2_scale, *w2_global;
    const moe_tensor *b1, *b2;             /* f32 [E, N1], [E, H] or NULL */
    const moe_tensor *a1_scale, *a2_scale; /* static activation scales, or NULL (dynamic) */
    int weights_on_input;
    int first_expert, num_local_experts;   /* 0, 0: all experts */
    moe_qdomain a1_domain, a2_domain;      /* dynamic per-tensor scales only */
    /* optional output: x's dtype [M*k, H] receives step 7's rows (row
     * t*k + j: slot j of token t; rows of non-local experts zero), the
     * per-slot expert outputs the harness's bounds are built from */
    moe_tensor *slot_rows;
} moe_forward_args;

/* x [M, H] (f32, bf16 or f16; the scheme's activation dtype for unquantized
 * and weight-only schemes) -> out [M, H] of x's dtype. */
moe_status moe_ref_forward(const moe_forward_args *args, const moe_tensor *x, moe_tensor *out);

#ifdef __cplusplus
}
#endif

#endif
