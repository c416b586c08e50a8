/* batched [vLLM BatchedPrepareAndFinalize, anchors vllm_modular.md 2.7]:
 * Batched format, one rank, L = E local experts.
 * prepare: weights on the input as noep (topk 1); ops->batched_scatter
 *   packs, for each expert, the tokens whose top-k row holds it, in
 *   ascending token order, into [L, max_tokens, H] (max_tokens = cfg, or
 *   the token count) with counts [L]; each expert's sub-batch of count[l]
 *   rows is then quantized on its own (ops->quantize on a view of its
 *   rows, so a dynamic per-tensor spec yields one scale per expert, as
 *   vLLM does). Unquantized and weight-only schemes keep the rows.
 * finalize: Delegate -> NaiveBatched (ops->war_naive_batched, rank 0),
 *   as BatchedPrepareAndFinalize picks; NoOp / Contiguous as noep. */
#include <stdlib.h>
#include <string.h>
#include "moe/modular.h"


static moe_status batched_prepare(const moe_mk *mk, const moe_tensor *x, const moe_tensor *topk_ids,
                                  const moe_tensor *topk_weights, moe_mk_prep *out)
{
    MOE_MK_NEED(mk, batched_scatter);
    memset(out, 0, sizeof *out);
    int64_t M = x->shape[0], H = x->shape[1], L = mk->cfg.num_experts;
    int64_t T = mk->cfg.max_tokens ? mk->cfg.max_tokens : M;
    out->format = MOE_FMT_BATCHED, out->x_dtype = x->dtype;
    out->num_local_experts = (int)L, out->max_tokens = (int)T;
    moe_tensor xw, xb;
    memset(&xw, 0, sizeof xw), memset(&xb, 0, sizeof xb);
    const moe_tensor *a = x;
    moe_status st;
    int64_t sb[3] = {L, T, H};
    if (mk->cfg.weights_on_input) {
        if ((st = moe_mk_weigh_input(mk, x, topk_weights, &xw))) goto done;
        a = &xw;
    }
    if ((st = moe_mk_alloc(mk, &out->counts, MOE_I32, 1, &L)) || (st = moe_mk_alloc(mk, &xb, x->dtype, 3, sb)) ||
        (st = mk->ops->batched_scatter(a, topk_ids, 0, &xb, &out->counts)))
        goto done;
    if (mk->act_spec.gran == MOE_GRAN_NONE) {
        out->a1q = xb;
        memset(&xb, 0, sizeof xb);
        goto done;
    }
    moe_quant_dims d;
    if ((st = moe_quant_shapes(&mk->act_spec, 2, (int64_t[2]){T, H}, &d))) goto done;
    if ((st = moe_mk_alloc(mk, &out->a1q, d.q_dtype, 3, sb))) goto done;
    out->ex_scale = calloc((size_t)L, sizeof(moe_tensor));
    out->ex_global = calloc((size_t)L, sizeof(moe_tensor));
    if (!out->ex_scale || !out->ex_global) {
        st = moe_fail(MOE_ERR_NOMEM, "batched: scale lists");
        goto done;
    }
    const int32_t *cnt = out->counts.data;
    for (int64_t l = 0; l < L; l++) {
        if (cnt[l] == 0) continue;
        moe_tensor rows, q;
        if ((st = moe_mk_rows(&xb, l, 1, &rows)) ||
            (st = moe_mk_view(&rows, 0, x->dtype, 2, (int64_t[2]){cnt[l], H}, &rows)) ||
            (st = moe_mk_rows(&out->a1q, l, 1, &q)) ||
            (st = moe_mk_view(&q, 0, q.dtype, 2, (int64_t[2]){cnt[l], H}, &q)) ||
            (st = moe_mk_quantize(mk, &rows, &q, &out->ex_scale[l], &out->ex_global[l])))
            goto done;
    }
done:
    moe_mk_free(mk, &xw), moe_mk_free(mk, &xb);
    return st;
}

static moe_status batched_finalize(const moe_mk *mk, const moe_tensor *fused, const moe_tensor *topk_ids,
                                   const moe_tensor *topk_weights, moe_war_kind war, moe_tensor *out)
{
    if (war == MOE_WAR_DELEGATE || war == MOE_WAR_NAIVE_BATCHED) {
        MOE_MK_NEED(mk, war_naive_batched);
        return mk->ops->war_naive_batched(fused, topk_ids, topk_weights, 0, mk->cfg.weights_on_input, out);
    }
    return moe_mk_finalize_standard(mk, fused, topk_weights, war, out);
}

const moe_mk_pf_type moe_mk_pf_batched = {.name = "batched", .prepare = batched_prepare, .finalize = batched_finalize};
