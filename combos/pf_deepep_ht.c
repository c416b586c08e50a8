/* deepep_ht [vLLM DeepEPHTPrepareAndFinalize, anchors vllm_modular.md 2.7;
 * DeepEP normal mode, dispatch_sorting.md A.2-A.4], Standard format,
 * expert parallel with simulated ranks (one node, expert_alignment 1):
 * prepare: weights on the input as noep (topk 1) on each source rank;
 *   block-quantized schemes (per-128 groups) quantize each source rank's
 *   rows before the dispatch and ship fp8 + group scales; every other
 *   scheme dispatches x's dtype and quantizes after the dispatch, on the
 *   receiving rank's rows. ops->deepep_layout (is_token_in_rank, the
 *   combine handle) and ops->deepep_dispatch with N = the exact capacity:
 *   rank j receives n_j = num_recv[j] rows, by (source rank, token)
 *   ascending, with local ids or -1 and the weight or 0.0f.
 *   Deviation from vLLM: vLLM hard-codes per_act_token_quant = False for
 *   the post-dispatch quantization (per-token schemes become per-tensor
 *   there, anchors 2.7 TODO); here the scheme's own spec is used (per-token
 *   rows quantize the same before or after the dispatch). Per-tensor
 *   schemes are refused for R > 1 by the constructor.
 * finalize, per rank j: the experts' weight-and-reduce (Delegate or
 *   Contiguous -> ops->war_contiguous with the received weights, 0 for -1
 *   slots; NoOp -> copy) into row i of y[j] (x's dtype); ranks with no rows
 *   are skipped (y stays zero); then ops->deepep_combine, unweighted:
 *   out[r, t] = round(f32 sum over ranks j ascending that hold the token
 *   of y[j, row]). Rounding against the single-rank oracle: the per-rank
 *   rounding of y before the combine's f32 sum (tests derive the bound);
 *   with top-1 one rank holds the token, the result is bit-exact. */
#include <stdlib.h>
#include <string.h>
#include "moe/modular.h"

typedef struct {
    moe_deepep_config cfg;
    moe_tensor xs, ss, tpe, tpr, in_rank;                       /* sent rows, layout */
    moe_tensor rx, rs, rids, rw, src, nrecv, nrecv_e, y;        /* received, combine input */
} ht_state;

static void ht_release(const moe_mk *mk, void *p)
{
    ht_state *s = p;
    if (!s) return;
    moe_tensor *ts[] = {&s->xs, &s->ss, &s->tpe, &s->tpr, &s->in_rank, &s->rx,
                        &s->rs, &s->rids, &s->rw, &s->src, &s->nrecv, &s->nrecv_e, &s->y};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) moe_mk_free(mk, ts[i]);
    free(s);
}

/* rows [0, n) of rank j of a [R, N, C] tensor, as [n, C] */
static moe_status rank_rows(const moe_tensor *t, int j, int64_t n, moe_tensor *v)
{
    moe_status st = moe_mk_rows(t, j, 1, v);
    if (st != MOE_OK) return st;
    return moe_mk_view(v, 0, t->dtype, 2, (int64_t[2]){n, t->shape[2]}, v);
}

static moe_status ht_prepare(const moe_mk *mk, const moe_tensor *x, const moe_tensor *topk_ids,
                             const moe_tensor *topk_weights, moe_mk_rank *ranks, void **state)
{
    MOE_MK_NEED(mk, deepep_layout);
    MOE_MK_NEED(mk, deepep_dispatch);
    MOE_MK_NEED(mk, copy);
    int R = mk->cfg.world_size, E = mk->cfg.num_experts, El = E / R;
    int64_t T = x->shape[1], H = x->shape[2], k = topk_ids->shape[2];
    ht_state *s = calloc(1, sizeof *s);
    if (!s) return moe_fail(MOE_ERR_NOMEM, "deepep_ht: state");
    *state = s;
    s->cfg = (moe_deepep_config){R, E, R, 1};
    moe_status st;
    int pre = mk->act_spec.gran == MOE_GRAN_GROUP; /* block fp8: quantize before the dispatch */
    moe_quant_dims d;
    memset(&d, 0, sizeof d);
    if (mk->act_spec.gran != MOE_GRAN_NONE) {
        if ((st = moe_quant_shapes(&mk->act_spec, 2, (int64_t[2]){T, H}, &d))) return st;
        if (d.has_global) return moe_fail(MOE_ERR_UNSUPPORTED, "deepep_ht: activation global scales");
        if (pre && (!d.has_scale || d.scale_ndim != 2))
            return moe_fail(MOE_ERR_UNSUPPORTED, "deepep_ht: group scales must be [T, S]");
    }
    moe_dtype sd = pre ? d.q_dtype : x->dtype;
    int64_t S = pre ? d.scale_shape[1] : 0;
    /* the rows each source rank sends */
    if ((st = moe_mk_alloc(mk, &s->xs, sd, 3, (int64_t[3]){R, T, H}))) return st;
    if (S && (st = moe_mk_alloc(mk, &s->ss, d.scale_dtype, 3, (int64_t[3]){R, T, S}))) return st;
    for (int r = 0; r < R; r++) {
        moe_tensor xr, xw, q, sc, g;
        memset(&xw, 0, sizeof xw), memset(&sc, 0, sizeof sc), memset(&g, 0, sizeof g);
        if ((st = rank_rows(x, r, T, &xr)) || (st = rank_rows(&s->xs, r, T, &q))) return st;
        const moe_tensor *a = &xr;
        if (mk->cfg.weights_on_input) {
            moe_tensor wr;
            if ((st = rank_rows(topk_weights, r, T, &wr)) || (st = moe_mk_weigh_input(mk, &xr, &wr, &xw))) goto next;
            a = &xw;
        }
        if (pre) {
            moe_tensor dst;
            if ((st = moe_mk_quantize(mk, a, &q, &sc, &g)) || (st = rank_rows(&s->ss, r, T, &dst)) ||
                (st = mk->ops->copy(&dst, &sc)))
                goto next;
        } else {
            st = mk->ops->copy(&q, a);
        }
    next:
        moe_mk_free(mk, &xw), moe_mk_free(mk, &sc), moe_mk_free(mk, &g);
        if (st != MOE_OK) return st;
    }
    /* layout + dispatch */
    int64_t N;
    if ((st = moe_mk_alloc2(mk, &s->tpe, MOE_I32, R, E)) || (st = moe_mk_alloc2(mk, &s->tpr, MOE_I32, R, R)) ||
        (st = moe_mk_alloc(mk, &s->in_rank, MOE_BOOL, 3, (int64_t[3]){R, T, R})))
        return st;
    moe_deepep_layout lay = {&s->tpe, &s->tpr, NULL, &s->in_rank};
    if ((st = mk->ops->deepep_layout(&s->cfg, topk_ids, &lay)) ||
        (st = moe_deepep_dispatch_capacity(&s->cfg, topk_ids, &N)))
        return st;
    if (N < 1) N = 1;
    if ((st = moe_mk_alloc(mk, &s->rx, sd, 3, (int64_t[3]){R, N, H})) ||
        (S && (st = moe_mk_alloc(mk, &s->rs, d.scale_dtype, 3, (int64_t[3]){R, N, S}))) ||
        (st = moe_mk_alloc(mk, &s->rids, MOE_I32, 3, (int64_t[3]){R, N, k})) ||
        (st = moe_mk_alloc(mk, &s->rw, MOE_F32, 3, (int64_t[3]){R, N, k})) ||
        (st = moe_mk_alloc2(mk, &s->src, MOE_I32, R, N)) || (st = moe_mk_alloc(mk, &s->nrecv, MOE_I32, 1, (int64_t[1]){R})) ||
        (st = moe_mk_alloc2(mk, &s->nrecv_e, MOE_I32, R, El)) ||
        (st = moe_mk_alloc(mk, &s->y, x->dtype, 3, (int64_t[3]){R, N, H})))
        return st;
    moe_deepep_recv rv = {&s->rx, S ? &s->rs : NULL, &s->rids, &s->rw, &s->src, &s->nrecv, &s->nrecv_e, NULL};
    if ((st = mk->ops->deepep_dispatch(&s->cfg, &s->xs, S ? &s->ss : NULL, topk_ids, topk_weights, &rv))) return st;
    /* each receiving rank's rows */
    const int32_t *nr = s->nrecv.data;
    for (int j = 0; j < R; j++) {
        moe_mk_rank *rk = &ranks[j];
        int64_t n = nr[j];
        rk->prep.format = MOE_FMT_STANDARD, rk->prep.x_dtype = x->dtype;
        moe_tensor rows;
        if ((st = rank_rows(&s->rx, j, n, &rows)) || (st = rank_rows(&s->rids, j, n, &rk->topk_ids)) ||
            (st = rank_rows(&s->rw, j, n, &rk->topk_weights)) || (st = rank_rows(&s->y, j, n, &rk->partial)))
            return st;
        if (n == 0) continue;
        if (pre) {
            if ((st = moe_mk_view(&rows, 0, rows.dtype, 2, rows.shape, &rk->prep.a1q)) ||
                (st = rank_rows(&s->rs, j, n, &rk->prep.a1q_scale)))
                return st;
        } else if ((st = moe_mk_quantize(mk, &rows, &rk->prep.a1q, &rk->prep.a1q_scale, &rk->prep.a1q_global))) {
            return st;
        }
    }
    return MOE_OK;
}

static moe_status ht_combine(const moe_mk *mk, void *p, moe_tensor *out)
{
    MOE_MK_NEED(mk, deepep_combine);
    ht_state *s = p;
    return mk->ops->deepep_combine(&s->cfg, &s->y, NULL, &s->in_rank, NULL, NULL, out, NULL);
}

const moe_mk_pf_type moe_mk_pf_deepep_ht = {
    .name = "deepep_ht", .ep_prepare = ht_prepare, .ep_combine = ht_combine, .ep_release = ht_release};
