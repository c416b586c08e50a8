/* pplx [vLLM PplxPrepareAndFinalize; pplx-kernels all_to_all,
 * dispatch_sorting.md section 0 fact 8, D, E], Batched format, expert
 * parallel with simulated ranks (dp_size 1: every rank is its own DP
 * group, num_dp = R), async:
 * prepare: weights on the input (topk 1) as noep on each source rank (the
 *   combine then gets weights of ones); quantized schemes quantize each
 *   source rank's rows before the dispatch with the scheme's dynamic spec
 *   (pplx moves bytes plus optional f32 scale rows [T, S]; per-token and
 *   per-group specs; per-tensor is refused for R > 1 by the constructor
 *   and here for any R); ops->pplx_dispatch with max_num_tokens =
 *   cfg.max_tokens (or T) into, per rank j, [E_loc, R*T_max, H] rows with
 *   counts [E_loc] (each expert by ascending (source rank, token): the
 *   reference's fixed order for upstream's atomics). Expert l's count[l]
 *   rows get their received scale rows [count, S].
 * ids: every id must be a valid expert (uint32 indices, combine waits for
 *   all K): -1 is refused by the compatibility rule invalid-ids-refused at
 *   construction (cfg.invalid_ids) and by the forward, naming the rule.
 * experts: the batched types on rank j's local weights.
 * finalize: Delegate resolves to the combine: the driver copies each
 *   rank's fused output unweighted into y [R, E_loc, R*T_max, H];
 *   ops->pplx_combine overwrites out[r, t] = round(acc), acc = fmaf(y_k,
 *   w_k, acc) from +0 over k ascending (D). Against the single-rank oracle
 *   this is DeepEP-LL's combine: top-1 bit-exact, top-k bounded. */
#include <stdlib.h>
#include <string.h>
#include "moe/modular.h"

typedef struct {
    moe_pplx_config cfg;
    moe_tensor xs, ss, rx, rs, cnt, src, y, ones;
    const moe_tensor *ids, *wts;
} pplx_state;

static void pplx_release(const moe_mk *mk, void *p)
{
    pplx_state *s = p;
    if (!s) return;
    moe_tensor *ts[] = {&s->xs, &s->ss, &s->rx, &s->rs, &s->cnt, &s->src, &s->y, &s->ones};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) moe_mk_free(mk, ts[i]);
    free(s);
}

static moe_status pplx_prepare(const moe_mk *mk, const moe_tensor *x, const moe_tensor *topk_ids,
                               const moe_tensor *topk_weights, moe_mk_rank *ranks, void **state)
{
    MOE_MK_NEED(mk, pplx_dispatch);
    MOE_MK_NEED(mk, copy);
    int R = mk->cfg.world_size, E = mk->cfg.num_experts, El = E / R;
    int64_t T = x->shape[1], H = x->shape[2], k = topk_ids->shape[2];
    int64_t Tmax = mk->cfg.max_tokens ? mk->cfg.max_tokens : T;
    if (T > Tmax)
        return moe_fail(MOE_ERR_INVALID_ARG, "pplx: T = %lld tokens per rank exceed cfg.max_tokens %lld "
                        "(max_num_tokens)", (long long)T, (long long)Tmax);
    pplx_state *s = calloc(1, sizeof *s);
    if (!s) return moe_fail(MOE_ERR_NOMEM, "pplx: state");
    *state = s;
    s->cfg = (moe_pplx_config){R, 1, E, Tmax};
    s->ids = topk_ids, s->wts = topk_weights;
    moe_status st;
    int q = mk->act_spec.gran != MOE_GRAN_NONE;
    moe_quant_dims d;
    memset(&d, 0, sizeof d);
    if (q) {
        if ((st = moe_quant_shapes(&mk->act_spec, 2, (int64_t[2]){T, H}, &d))) return st;
        if (d.has_global || !d.has_scale || d.scale_ndim != 2 || d.scale_shape[0] != T || d.scale_dtype != MOE_F32)
            return moe_fail(MOE_ERR_UNSUPPORTED, "pplx, scheme %s: the activation scales must be f32 rows [T, S] "
                            "(per-token or per-group)", moe_scheme_name(mk->cfg.scheme));
    }
    int64_t S = q ? d.scale_shape[1] : 0;
    moe_dtype sd = q ? d.q_dtype : x->dtype;
    /* the rows each source rank sends */
    if (q || mk->cfg.weights_on_input) {
        if ((st = moe_mk_alloc(mk, &s->xs, sd, 3, (int64_t[3]){R, T, H}))) return st;
        if (S && (st = moe_mk_alloc(mk, &s->ss, MOE_F32, 3, (int64_t[3]){R, T, S}))) return st;
        for (int r = 0; r < R; r++) {
            moe_tensor xr, dst, xw, qs, sc, g;
            memset(&xw, 0, sizeof xw), memset(&sc, 0, sizeof sc), memset(&g, 0, sizeof g);
            if ((st = moe_mk_rank_rows(x, r, T, &xr)) || (st = moe_mk_rank_rows(&s->xs, r, T, &dst))) return st;
            const moe_tensor *a = &xr;
            if (mk->cfg.weights_on_input) {
                moe_tensor wr;
                if ((st = moe_mk_rank_rows(topk_weights, r, T, &wr)) || (st = moe_mk_weigh_input(mk, &xr, &wr, &xw)))
                    goto next;
                a = &xw;
            }
            if (q) {
                if ((st = moe_mk_quantize(mk, a, &dst, &sc, &g)) || (st = moe_mk_rank_rows(&s->ss, r, T, &qs)) ||
                    (st = mk->ops->copy(&qs, &sc)))
                    goto next;
            } else {
                st = mk->ops->copy(&dst, a);
            }
        next:
            moe_mk_free(mk, &xw), moe_mk_free(mk, &sc), moe_mk_free(mk, &g);
            if (st != MOE_OK) return st;
        }
    }
    if (mk->cfg.weights_on_input && (st = moe_mk_ones(mk, &s->ones, R, T, k))) return st;
    const moe_tensor *xs = q || mk->cfg.weights_on_input ? &s->xs : x;
    int64_t rows = moe_pplx_rows(&s->cfg);
    if (rows < 0) return moe_fail(MOE_ERR_INVALID_ARG, "pplx: world %d, max_num_tokens %lld", R, (long long)Tmax);
    if ((st = moe_mk_alloc(mk, &s->rx, sd, 4, (int64_t[4]){R, El, rows, H})) ||
        (S && (st = moe_mk_alloc(mk, &s->rs, MOE_F32, 4, (int64_t[4]){R, El, rows, S}))) ||
        (st = moe_mk_alloc2(mk, &s->cnt, MOE_I32, R, El)) ||
        (st = moe_mk_alloc(mk, &s->src, MOE_I32, 3, (int64_t[3]){R, El, rows})) ||
        (st = moe_mk_alloc(mk, &s->y, x->dtype, 4, (int64_t[4]){R, El, rows, H})))
        return st;
    moe_pplx_recv rv = {&s->rx, S ? &s->rs : NULL, &s->cnt, &s->src};
    if ((st = mk->ops->pplx_dispatch(&s->cfg, xs, S ? &s->ss : NULL, topk_ids, &rv))) return st;
    return moe_mk_batched_rank_views(ranks, R, El, rows, H, x->dtype, &s->rx, &s->cnt, S ? &s->rs : NULL, S, &s->y, "pplx");
}

static moe_status pplx_combine(const moe_mk *mk, void *p, moe_tensor *out)
{
    MOE_MK_NEED(mk, pplx_combine);
    pplx_state *s = p;
    const moe_tensor *wts = mk->cfg.weights_on_input ? &s->ones : s->wts;
    return mk->ops->pplx_combine(&s->cfg, &s->y, &s->cnt, &s->src, s->ids, wts, out);
}

const moe_mk_pf_type moe_mk_pf_pplx = {
    .name = "pplx", .ep_prepare = pplx_prepare, .ep_combine = pplx_combine, .ep_release = pplx_release};
