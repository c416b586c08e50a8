/* hybrid_ep [DeepEP Hybrid-EP dispatch_with_permute / combine_with_unpermute,
 * dispatch_sorting.md section 0 item 5, A.7; seed 002], Grouped format,
 * expert parallel with simulated ranks (one NVLink domain: ranks_per_node
 * = R), blocking mode (no drops), async:
 * prepare: Hybrid-EP never quantizes, so the block scheme
 *   fp8_wblock128_agroup128 quantizes each source rank's rows with the
 *   scheme's per-128 group rule before the dispatch and ships e4m3 bytes +
 *   f32 group scales [T, H/128] (moved as raw bits); bf16 ships x's rows as
 *   they are (the registry admits only these two). No weight on the input
 *   (registry: rule weight-on-input-unsupported). ops->hep_dispatch_with_
 *   permute with pad_multiple 128 (DeepGEMM contiguous's M alignment) and
 *   N = moe_hep_permute_capacity: rank j gets expert-major rows, each
 *   local expert's rows in ascending (source rank, token) order, padded
 *   to a multiple of 128 with zero rows (prob 0.0f, scales 0.0f), the
 *   probs (the router weights, passed through, never applied by the
 *   dispatch) per row and tokens_per_expert; the experts get rank j's
 *   first n_j = sum of padded counts rows (moe_mk_prep GROUPED).
 * experts (grouped_contig): GEMM1 -> activation -> requantization -> GEMM2
 *   on the padded rows, then each row times its prob (f32, one rounding
 *   to x's dtype): the expert MLP applies the probs in Hybrid-EP (A.7).
 *   The driver copies the [n_j, H] rows into y[j].
 * finalize: ops->hep_combine_with_unpermute, unweighted: per rank j and
 *   token, round(f32 sum of its rows over local experts ascending) (pads
 *   never read), then on the token's home rank round(f32 sum of the ranks'
 *   partials in rank order 0..R-1) -- RNE casts to x's dtype (bf16, or f32
 *   where the rounding is the identity).
 * Against the single-rank oracle (per slot fl32(w*y), f32 sum from +0, one
 * rounding): top-1 gives round(round(round(fl32(w*y)))) = round(fl32(w*y))
 * (rounding is idempotent and +0 + v = v), bit for bit; top-k adds the
 * per-slot rounding of w*y and the per-rank partial rounding (tests derive
 * the bound). */
#include <stdlib.h>
#include <string.h>
#include "moe/dispatch.h"
#include "moe/modular.h"

#define HEP_PAD 128

typedef struct {
    moe_hep_config cfg;
    moe_tensor xs, ss;                                 /* sent rows (fp8: quantized), scales */
    moe_tensor rx, rp, rs, tpe, ptpe, map, ovf, y;     /* permuted rows, handle, combine input */
} hep_state;

static void hep_release(const moe_mk *mk, void *p)
{
    hep_state *s = p;
    if (!s) return;
    moe_tensor *ts[] = {&s->xs, &s->ss, &s->rx, &s->rp, &s->rs, &s->tpe, &s->ptpe, &s->map, &s->ovf, &s->y};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) moe_mk_free(mk, ts[i]);
    free(s);
}

static moe_status hep_prepare(const moe_mk *mk, const moe_tensor *x, const moe_tensor *topk_ids,
                              const moe_tensor *topk_weights, moe_mk_rank *ranks, void **state)
{
    MOE_MK_NEED(mk, hep_dispatch_with_permute);
    MOE_MK_NEED(mk, copy);
    int R = mk->cfg.world_size, E = mk->cfg.num_experts, El = E / R;
    int64_t T = x->shape[1], H = x->shape[2];
    if (mk->cfg.weights_on_input) /* the constructor refuses it first (registry row) */
        return moe_fail(MOE_ERR_INVALID_ARG, "hybrid_ep: probs pass through to the experts, never onto the input "
                        "(rule weight-on-input-unsupported)");
    if (x->dtype != MOE_BF16 && x->dtype != MOE_F32)
        return moe_fail(MOE_ERR_DTYPE, "hybrid_ep: x must be bf16 (or f32), got %s (the combine takes 16-bit rows "
                        "upstream)", moe_dtype_get(x->dtype)->name);
    int pre = mk->act_spec.gran == MOE_GRAN_GROUP;
    if (mk->act_spec.gran != MOE_GRAN_NONE && !pre)
        return moe_fail(MOE_ERR_UNSUPPORTED, "hybrid_ep: scheme %s: only bf16 and per-128 fp8 groups travel",
                        moe_scheme_name(mk->cfg.scheme));
    hep_state *s = calloc(1, sizeof *s);
    if (!s) return moe_fail(MOE_ERR_NOMEM, "hybrid_ep: state");
    *state = s;
    s->cfg = (moe_hep_config){R, E, R, HEP_PAD, 0, 0};
    moe_status st;
    moe_quant_dims d;
    memset(&d, 0, sizeof d);
    if (pre) {
        if ((st = moe_quant_shapes(&mk->act_spec, 2, (int64_t[2]){T, H}, &d))) return st;
        if (d.has_global || !d.has_scale || d.scale_ndim != 2 || d.scale_dtype != MOE_F32)
            return moe_fail(MOE_ERR_UNSUPPORTED, "hybrid_ep: group scales must be f32 [T, S], no global scale");
    }
    moe_dtype sd = pre ? d.q_dtype : x->dtype;
    int64_t S = pre ? d.scale_shape[1] : 0;
    const moe_tensor *xs = x;
    if (pre) { /* quantize each source rank's rows before the dispatch */
        if ((st = moe_mk_alloc(mk, &s->xs, sd, 3, (int64_t[3]){R, T, H})) ||
            (st = moe_mk_alloc(mk, &s->ss, MOE_F32, 3, (int64_t[3]){R, T, S})))
            return st;
        for (int r = 0; r < R; r++) {
            moe_tensor xr, q, sc, g, dst;
            memset(&sc, 0, sizeof sc), memset(&g, 0, sizeof g);
            if ((st = moe_mk_rank_rows(x, r, T, &xr)) || (st = moe_mk_rank_rows(&s->xs, r, T, &q))) return st;
            if ((st = moe_mk_quantize(mk, &xr, &q, &sc, &g)) == MOE_OK &&
                (st = moe_mk_rank_rows(&s->ss, r, T, &dst)) == MOE_OK)
                st = mk->ops->copy(&dst, &sc);
            moe_mk_free(mk, &sc), moe_mk_free(mk, &g);
            if (st != MOE_OK) return st;
        }
        xs = &s->xs;
    }
    int64_t N;
    if ((st = moe_hep_permute_capacity(&s->cfg, topk_ids, &N))) return st;
    if (N < 1) N = 1;
    if ((st = moe_mk_alloc(mk, &s->rx, sd, 3, (int64_t[3]){R, N, H})) ||
        (st = moe_mk_alloc2(mk, &s->rp, MOE_F32, R, N)) ||
        (S && (st = moe_mk_alloc(mk, &s->rs, MOE_F32, 3, (int64_t[3]){R, N, S}))) ||
        (st = moe_mk_alloc2(mk, &s->tpe, MOE_I32, R, El)) || (st = moe_mk_alloc2(mk, &s->ptpe, MOE_I64, R, El)) ||
        (st = moe_mk_alloc(mk, &s->map, MOE_I32, 3, (int64_t[3]){R, R * T, El})) ||
        (st = moe_mk_alloc(mk, &s->ovf, MOE_I32, 1, (int64_t[1]){R})) ||
        (st = moe_mk_alloc(mk, &s->y, x->dtype, 3, (int64_t[3]){R, N, H})))
        return st;
    moe_hep_permuted pv = {&s->rx, &s->rp, S ? &s->rs : NULL, &s->tpe, &s->ptpe, &s->map, &s->ovf, NULL};
    if ((st = mk->ops->hep_dispatch_with_permute(&s->cfg, xs, S ? &s->ss : NULL, topk_ids, topk_weights, &pv)))
        return st;
    const int64_t *pad = s->ptpe.data;
    for (int j = 0; j < R; j++) {
        moe_mk_rank *rk = &ranks[j];
        moe_mk_prep *pp = &rk->prep;
        pp->format = MOE_FMT_GROUPED, pp->x_dtype = x->dtype;
        pp->num_local_experts = El, pp->pad_multiple = HEP_PAD;
        int64_t n = 0;
        for (int l = 0; l < El; l++) n += pad[j * El + l];
        moe_tensor v;
        if ((st = moe_mk_rank_rows(&s->rx, j, n, &pp->a1q)) || (S && (st = moe_mk_rank_rows(&s->rs, j, n, &pp->a1q_scale))) ||
            (st = moe_mk_rows(&s->rp, j, 1, &v)) || (st = moe_mk_view(&v, 0, MOE_F32, 1, (int64_t[1]){n}, &pp->probs)) ||
            (st = moe_mk_rows(&s->tpe, j, 1, &v)) || (st = moe_mk_view(&v, 0, MOE_I32, 1, (int64_t[1]){El}, &pp->counts)) ||
            (st = moe_mk_rank_rows(&s->y, j, n, &rk->partial)))
            return st;
    }
    return MOE_OK;
}

static moe_status hep_combine(const moe_mk *mk, void *p, moe_tensor *out)
{
    MOE_MK_NEED(mk, hep_combine_with_unpermute);
    hep_state *s = p;
    return mk->ops->hep_combine_with_unpermute(&s->cfg, &s->y, &s->map, NULL, out, NULL);
}

const moe_mk_pf_type moe_mk_pf_hybrid_ep = {
    .name = "hybrid_ep", .ep_prepare = hep_prepare, .ep_combine = hep_combine, .ep_release = hep_release};
