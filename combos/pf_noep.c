/* noep [vLLM MoEPrepareAndFinalizeNoDPEP, anchors vllm_modular.md 2.7]:
 * Standard format, one rank.
 * prepare: with weights on the input (topk 1) x = round(x * w) in x's
 *   dtype (ops->war_contiguous over [M, 1, H] with the [M, 1] weights: one
 *   f32 product rounded to the storage type, then a one-term fp32 sum,
 *   which keeps it; a -0 product becomes +0, which no later stage can
 *   tell from -0 because every GEMM sums from +0); then the M token rows
 *   are quantized once with the scheme's activation spec (dynamic: one
 *   per-tensor scale over the M rows, or per token, per group) through
 *   ops->quantize. Unquantized and weight-only schemes pass x through.
 * finalize: NoOp -> ops->war_noop; Contiguous, or Delegate (the PF picks
 *   Contiguous, as NoDPEP does) -> ops->war_contiguous with MOE_SUM_AUTO
 *   (vLLM's moe_sum). */
#include <string.h>
#include "moe/modular.h"

moe_status moe_mk_weigh_input(const moe_mk *mk, const moe_tensor *x, const moe_tensor *topk_weights,
                              moe_tensor *xw)
{
    MOE_MK_NEED(mk, war_contiguous);
    if (topk_weights->shape[1] != 1)
        return moe_fail(MOE_ERR_INVALID_ARG, "weights_on_input: needs topk 1, topk is %lld",
                        (long long)topk_weights->shape[1]);
    moe_status st = moe_mk_alloc(mk, xw, x->dtype, 2, x->shape);
    if (st != MOE_OK) return st;
    return mk->ops->war_contiguous(x, topk_weights, 0, MOE_SUM_FP32, xw);
}

static moe_status noep_prepare(const moe_mk *mk, const moe_tensor *x, const moe_tensor *topk_ids,
                               const moe_tensor *topk_weights, moe_mk_prep *out)
{
    (void)topk_ids;
    memset(out, 0, sizeof *out);
    out->format = MOE_FMT_STANDARD, out->x_dtype = x->dtype;
    moe_tensor xw;
    memset(&xw, 0, sizeof xw);
    const moe_tensor *a = x;
    moe_status st;
    if (mk->cfg.weights_on_input) {
        if ((st = moe_mk_weigh_input(mk, x, topk_weights, &xw))) return st;
        a = &xw;
    }
    if (mk->act_spec.gran == MOE_GRAN_NONE && a == &xw) {
        out->a1q = xw; /* hand the weighted copy over */
        return MOE_OK;
    }
    st = moe_mk_quantize(mk, a, &out->a1q, &out->a1q_scale, &out->a1q_global);
    moe_mk_free(mk, &xw);
    return st;
}

moe_status moe_mk_finalize_standard(const moe_mk *mk, const moe_tensor *fused, const moe_tensor *topk_weights,
                                    moe_war_kind war, moe_tensor *out)
{
    if (war == MOE_WAR_NOOP) {
        MOE_MK_NEED(mk, war_noop);
        return mk->ops->war_noop(fused, out);
    }
    if (war == MOE_WAR_CONTIGUOUS || war == MOE_WAR_DELEGATE) {
        MOE_MK_NEED(mk, war_contiguous);
        return mk->ops->war_contiguous(fused, topk_weights, mk->cfg.weights_on_input, MOE_SUM_AUTO, out);
    }
    return moe_fail(MOE_ERR_UNSUPPORTED, "pf '%s': weight-and-reduce %s needs batched rows", mk->pf->name,
                    moe_war_name(war));
}

static moe_status noep_finalize(const moe_mk *mk, const moe_tensor *fused, const moe_tensor *topk_ids,
                                const moe_tensor *topk_weights, moe_war_kind war, moe_tensor *out)
{
    (void)topk_ids;
    return moe_mk_finalize_standard(mk, fused, topk_weights, war, out);
}

const moe_mk_pf_type moe_mk_pf_noep = {.name = "noep", .prepare = noep_prepare, .finalize = noep_finalize};
