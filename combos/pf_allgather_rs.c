/* allgather_rs [vLLM NaiveDPEP (AllGather/ReduceScatter), anchors
 * vllm_modular.md 2.7, dispatch_sorting.md E], Standard format, expert
 * parallel with simulated ranks (moe_mk_forward_ranks, R = world size,
 * El = E/R experts per rank):
 * prepare, per source rank r on its own T rows: weights on the input as
 *   noep (topk 1), then the activation spec's dynamic quantization of the
 *   T rows (per token / per group: row scales [T, S]; per-tensor specs are
 *   refused for R > 1 by the constructor, since NaiveDPEP does not gather
 *   scalar scales); then ops->ep_allgather_dispatch: every rank receives
 *   the R*T rows rank-major (row r*T + t), their scales, global ids and
 *   weights (bit copies). Rank j's experts see the R*T gathered rows with
 *   local ids id - j*El where j owns id, else -1 (vLLM's expert_map: a
 *   zero row), and the gathered weights.
 * finalize, per rank j: the experts' weight-and-reduce (Delegate or
 *   Contiguous -> ops->war_contiguous, NoOp -> copy) into the rank's
 *   partial [R*T, H] in x's dtype (the ref experts round their f32 sum of
 *   local slots once, so a token's partial on rank j is
 *   round(sum of its local slots)); then
 *   ops->ep_reduce_scatter_combine: out[r, t] = round(f32 sum over j
 *   ascending of partial[j, r*T + t]).
 * Rounding against the single-rank oracle: each rank's partial is rounded
 * to x's dtype before the cross-rank f32 sum (tests/check_modular_ep.c
 * derives the bound); with top-1 exactly one rank holds a nonzero slot,
 * the others add +0, so the result equals the single-rank one bit for
 * bit. */
#include <stdlib.h>
#include <string.h>
#include "moe/modular.h"

typedef struct {
    moe_tensor a1q, scale, gx, gs, gids, gw, partial;
} ag_state;

static void ag_release(const moe_mk *mk, void *p)
{
    ag_state *s = p;
    if (!s) return;
    moe_tensor *ts[] = {&s->a1q, &s->scale, &s->gx, &s->gs, &s->gids, &s->gw, &s->partial};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) moe_mk_free(mk, ts[i]);
    free(s);
}

static moe_status ag_prepare(const moe_mk *mk, const moe_tensor *x, const moe_tensor *topk_ids,
                             const moe_tensor *topk_weights, moe_mk_rank *ranks, void **state)
{
    MOE_MK_NEED(mk, ep_allgather_dispatch);
    MOE_MK_NEED(mk, copy);
    int R = mk->cfg.world_size, E = mk->cfg.num_experts, El = E / R;
    int64_t T = x->shape[1], H = x->shape[2], k = topk_ids->shape[2];
    ag_state *s = calloc(1, sizeof *s);
    if (!s) return moe_fail(MOE_ERR_NOMEM, "allgather_rs: state");
    *state = s;
    moe_status st = MOE_OK;
    moe_quant_dims d;
    memset(&d, 0, sizeof d);
    int quant = mk->act_spec.gran != MOE_GRAN_NONE;
    if (quant) {
        if ((st = moe_quant_shapes(&mk->act_spec, 2, (int64_t[2]){T, H}, &d))) return st;
        if (d.has_global)
            return moe_fail(MOE_ERR_UNSUPPORTED, "allgather_rs: activation global scales are not gathered");
        if (d.has_scale && (d.scale_ndim != 2 || d.scale_shape[0] != T))
            return moe_fail(MOE_ERR_UNSUPPORTED, "allgather_rs: activation scales must be row scales [T, S]");
    }
    moe_dtype qd = quant ? d.q_dtype : x->dtype;
    int64_t S = quant && d.has_scale ? d.scale_shape[1] : 0;
    if ((st = moe_mk_alloc(mk, &s->a1q, qd, 3, (int64_t[3]){R, T, H}))) return st;
    if (S && (st = moe_mk_alloc(mk, &s->scale, d.scale_dtype, 3, (int64_t[3]){R, T, S}))) return st;
    /* quantize on each source rank */
    for (int r = 0; r < R; r++) {
        moe_tensor xr, xw, q, sc, g;
        memset(&xw, 0, sizeof xw), memset(&sc, 0, sizeof sc), memset(&g, 0, sizeof g);
        if ((st = moe_mk_rows(x, r, 1, &xr)) || (st = moe_mk_view(&xr, 0, x->dtype, 2, (int64_t[2]){T, H}, &xr)) ||
            (st = moe_mk_rows(&s->a1q, r, 1, &q)) || (st = moe_mk_view(&q, 0, qd, 2, (int64_t[2]){T, H}, &q)))
            return st;
        const moe_tensor *a = &xr;
        if (mk->cfg.weights_on_input) {
            moe_tensor wr;
            if ((st = moe_mk_rows(topk_weights, r, 1, &wr)) ||
                (st = moe_mk_view(&wr, 0, MOE_F32, 2, (int64_t[2]){T, k}, &wr)) ||
                (st = moe_mk_weigh_input(mk, &xr, &wr, &xw)))
                goto next;
            a = &xw;
        }
        if ((st = moe_mk_quantize(mk, a, &q, &sc, &g))) goto next;
        if (S) {
            moe_tensor dst;
            if ((st = moe_mk_rows(&s->scale, r, 1, &dst)) ||
                (st = moe_mk_view(&dst, 0, d.scale_dtype, 2, (int64_t[2]){T, S}, &dst)) ||
                (st = mk->ops->copy(&dst, &sc)))
                goto next;
        }
    next:
        moe_mk_free(mk, &xw), moe_mk_free(mk, &sc), moe_mk_free(mk, &g);
        if (st != MOE_OK) return st;
    }
    /* all-gather */
    int64_t G = (int64_t)R * T;
    if ((st = moe_mk_alloc2(mk, &s->gx, qd, G, H)) || (S && (st = moe_mk_alloc2(mk, &s->gs, d.scale_dtype, G, S))) ||
        (st = moe_mk_alloc2(mk, &s->gids, MOE_I32, G, k)) || (st = moe_mk_alloc2(mk, &s->gw, MOE_F32, G, k)) ||
        (st = mk->ops->ep_allgather_dispatch(R, E, &s->a1q, S ? &s->scale : NULL, topk_ids, topk_weights, &s->gx,
                                             S ? &s->gs : NULL, &s->gids, &s->gw)) ||
        (st = moe_mk_alloc(mk, &s->partial, x->dtype, 3, (int64_t[3]){R, G, H})))
        return st;
    /* per receiving rank: the gathered rows with local ids */
    const int32_t *gid = s->gids.data;
    int32_t *loc = malloc(sizeof(int32_t) * (size_t)(G * k) + 4);
    if (!loc) return moe_fail(MOE_ERR_NOMEM, "allgather_rs: local ids");
    for (int j = 0; j < R && st == MOE_OK; j++) {
        moe_mk_rank *rk = &ranks[j];
        for (int64_t i = 0; i < G * k; i++)
            loc[i] = gid[i] >= j * El && gid[i] < (j + 1) * El ? gid[i] - j * El : -1;
        rk->prep.format = MOE_FMT_STANDARD, rk->prep.x_dtype = x->dtype;
        if ((st = moe_mk_view(&s->gx, 0, qd, 2, s->gx.shape, &rk->prep.a1q)) ||
            (S && (st = moe_mk_view(&s->gs, 0, d.scale_dtype, 2, s->gs.shape, &rk->prep.a1q_scale))) ||
            (st = moe_mk_index2(mk, &rk->topk_ids, loc, G, k)) ||
            (st = moe_mk_view(&s->gw, 0, MOE_F32, 2, s->gw.shape, &rk->topk_weights)) ||
            (st = moe_mk_rows(&s->partial, j, 1, &rk->partial)) ||
            (st = moe_mk_view(&rk->partial, 0, x->dtype, 2, (int64_t[2]){G, H}, &rk->partial)))
            break;
    }
    free(loc);
    return st;
}

static moe_status ag_combine(const moe_mk *mk, void *p, moe_tensor *out)
{
    MOE_MK_NEED(mk, ep_reduce_scatter_combine);
    ag_state *s = p;
    return mk->ops->ep_reduce_scatter_combine(mk->cfg.world_size, &s->partial, out);
}

const moe_mk_pf_type moe_mk_pf_allgather_rs = {
    .name = "allgather_rs", .ep_prepare = ag_prepare, .ep_combine = ag_combine, .ep_release = ag_release};
