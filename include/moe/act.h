/* The activation between the two GEMMs (anchors vllm_modular.md section 6,
 * trtllm_moe.md section 3.2). Input rows hold GEMM1's output in a storage
 * dtype (f32, bf16, f16); all math is f32 with reference/math.h; the
 * output is rounded once to its dtype (RNE).
 *
 * Gated activations read a gate half g and an up ("linear") half u of each
 * row of 2*I values:
 *   gate_up      g = row[0, I), u = row[I, 2I)   (vLLM, CK)
 *   up_gate      u = row[0, I), g = row[I, 2I)   (TensorRT-LLM [linear | gate])
 *   interleaved  g = row[2i], u = row[2i+1]      (gpt-oss / swigluoai)
 * Formulas:
 *   silu, gelu, gelu_tanh   act(g) * u, act computed in f32; with
 *                           round_act_to_storage, act(g) is first rounded to
 *                           the input dtype (vLLM's kernel casts it before the
 *                           multiply)
 *   swigluoai               g' = min(g, limit), u' = clamp(u, -limit, limit),
 *                           out = (u' + 1) * (g' * sigmoid(g' * alpha));
 *                           defaults alpha 1.702, limit 7 (vLLM)
 *   swiglu_clamp            silu(min(g, limit)) * clamp(u, -limit, limit)
 *                           (vLLM swiglu_limit_func)
 *   swiglu_bias             TensorRT-LLM SwigluBias, per local expert alpha,
 *                           beta, limit (defaults 1, 0, +Inf):
 *                           g' = min(g, L), out = g' * sigmoid(alpha * g') *
 *                           (clamp(u, -L, L) + beta)
 * Non-gated (rows of I values): relu2 = relu(x)^2 (relu as torch's: NaN
 * stays NaN), silu_nomul, gelu_nomul, identity. */
#ifndef MOE_ACT_H
#define MOE_ACT_H

#include "moe/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MOE_ACT_SILU = 0,
    MOE_ACT_GELU,
    MOE_ACT_GELU_TANH,
    MOE_ACT_SWIGLUOAI,
    MOE_ACT_SWIGLU_CLAMP,
    MOE_ACT_SWIGLU_BIAS,
    MOE_ACT_RELU2,
    MOE_ACT_SILU_NOMUL,
    MOE_ACT_GELU_NOMUL,
    MOE_ACT_IDENTITY,
    MOE_ACT_COUNT
} moe_act;

typedef enum { MOE_LAYOUT_GATE_UP = 0, MOE_LAYOUT_UP_GATE, MOE_LAYOUT_INTERLEAVED, MOE_LAYOUT_COUNT } moe_act_layout;

typedef struct {
    moe_act act;
    moe_act_layout layout;
    float alpha;                 /* swigluoai (1.702) */
    float limit;                 /* swigluoai (7), swiglu_clamp */
    const moe_tensor *swiglu_alpha, *swiglu_beta, *swiglu_limit; /* swiglu_bias: f32 [E_loc] or NULL */
    int round_act_to_storage;    /* vLLM: act(g) rounded to the input dtype before * u */
} moe_act_params;

const char *moe_act_name(moe_act a);
moe_status moe_act_from_name(const char *name, moe_act *out);
const char *moe_act_layout_name(moe_act_layout l);
moe_status moe_act_layout_from_name(const char *name, moe_act_layout *out);
int moe_act_is_gated(moe_act a);

/* Defaults: alpha 1.702, limit 7, no per-expert tensors, no rounding. */
moe_act_params moe_act_defaults(moe_act a, moe_act_layout layout);

/* x [P, 2I] (gated) or [P, I]; out [P, I]; row_expert int32 [P] gives each
 * row's local expert for swiglu_bias (-1 rows give zeros; NULL: expert 0). */
moe_status moe_ref_activation(const moe_tensor *x, const moe_tensor *row_expert, const moe_act_params *p,
                              moe_tensor *out);

#ifdef __cplusplus
}
#endif

#endif
