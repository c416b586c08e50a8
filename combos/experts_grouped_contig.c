/* grouped_contig experts [vLLM DeepGemmExperts, DeepGEMM
 * m_grouped_fp8_gemm_nt_contiguous, anchors vllm_modular.md 1.4, 2.8],
 * Standard or Grouped format, WAR NoOp.
 * Standard:
 *   1. ops->permute_grouped (pad multiple 128, DeepGEMM's M alignment):
 *      local experts ascending, each expert's (token, slot) pairs in
 *      ascending flat index t*k + j, zero pad rows to a multiple of 128;
 *      per-row / per-group activation scales are gathered with their rows
 *      (pads: zero scale rows), a per-tensor scale is shared. -1 ids
 *      (slots of experts on other ranks) are outside the local range and
 *      take no row (as DeepGEMM contiguous layouts leave -1 rows out); the
 *      unpermute leaves their (token, slot) rows zero, adding exactly 0;
 *   2. GEMM1 (ops->grouped_gemm, row expert e for the count[e] rows from
 *      offsets[e], -1 for pads: zero rows) to x's dtype;
 *   3. ops->activation, requantization once over all padded rows (the
 *      scheme's spec is 1x128 groups, a per-row rule, so pad rows do not
 *      touch real rows' scales), GEMM2 (+ b2, pads -1) to x's dtype;
 *   4. ops->unpermute_rows to (token, slot) rows t*k + j (pads dropped);
 *   5. weights and sum as Contiguous (deepgemm_unpermute_and_reduce with
 *      the router weights, ones with weights on the input):
 *      ops->war_contiguous with MOE_SUM_AUTO: per slot bf16(fl32(w y)),
 *      then moe_sum (per-add rounding in x's dtype for topk 2..4, an f32
 *      sum with one rounding otherwise).
 * GEMM2's rows equal the ref experts' slot rows for the block-fp8 scheme
 * (row-wise dynamic scales); only step 5 differs from moe_ref_forward.
 * Workspaces: ws13 [cap, max(N1, H)] (GEMM1, then GEMM2 output), ws2
 * [cap, I], cap = m*k + E*127 (vLLM's M_sum bound), fused_out [M, H].
 * Grouped (hybrid_ep's dispatch_with_permute rows, moe_mk_prep GROUPED):
 * the rows are already expert-major and padded (pad_multiple must be a
 * multiple of 128, DeepGEMM's M alignment), so steps 1, 4 and 5 go:
 *   2'. GEMM1 on the N padded rows with row expert l for local expert l's
 *       counts[l] rows from its padded offset, -1 for pads (zero rows),
 *       the group scales travelling with the rows (pads: 0.0f);
 *   3'. activation, requantization over all N rows (per-row rule: pads do
 *       not touch real rows), GEMM2 (+ b2, pads -1) to x's dtype: rows
 *       equal the ref experts' slot rows as above;
 *   5'. each row times its prob (Hybrid-EP: the expert MLP applies the
 *       probs, A.7): round(fl32(p * y)) to x's dtype, one rounding
 *       (ops->war_contiguous with topk 1: [N, 1] weights, MOE_SUM_FP32);
 *       pads have prob 0 and stay zero. fused_out [N, H] in the permuted
 *       layout; the PF's combine unpermutes and sums.
 * Workspaces: ws13 [N, max(N1, H)], ws2 [N, I]. */
#include <stdlib.h>
#include <string.h>
#include "moe/modular.h"

#define GC_PAD 128

static moe_status gc_ws(const moe_mk *mk, int64_t m, int64_t M, const moe_mk_prep *prep, moe_mk_shape *ws13,
                        moe_mk_shape *ws2, moe_mk_shape *out)
{
    int64_t cap, H = mk->cfg.hidden;
    if (prep->format == MOE_FMT_GROUPED) { /* the PF's padded rows, output in their layout */
        cap = prep->a1q.shape[0], M = cap;
    } else {
        moe_status st = moe_grouped_capacity(m * mk->cfg.topk, mk->cfg.num_experts, GC_PAD, &cap);
        if (st != MOE_OK) return st;
    }
    *ws13 = (moe_mk_shape){prep->x_dtype, 2, {cap, mk->n1 > H ? mk->n1 : H, 1, 1}};
    *ws2 = (moe_mk_shape){prep->x_dtype, 2, {cap, mk->cfg.inter, 1, 1}};
    *out = (moe_mk_shape){prep->x_dtype, 2, {M, H, 1, 1}};
    return MOE_OK;
}

static const moe_tensor *opt(const moe_tensor *t) { return t->ndim ? t : NULL; }

/* Grouped-format rows (steps 2', 3', 5' above) */
static moe_status gc_apply_grouped(const moe_mk *mk, const moe_mk_apply_args *a)
{
    MOE_MK_NEED(mk, grouped_gemm);
    MOE_MK_NEED(mk, activation);
    MOE_MK_NEED(mk, war_contiguous);
    const moe_mk_prep *pp = a->prep;
    const moe_mk_weights *w = a->w;
    int64_t N = pp->a1q.ndim == 2 ? pp->a1q.shape[0] : -1, H = mk->cfg.hidden, I = mk->cfg.inter, N1 = mk->n1;
    int L = pp->num_local_experts, pad = pp->pad_multiple;
    moe_dtype xd = pp->x_dtype;
    if (pad < GC_PAD || pad % GC_PAD)
        return moe_fail(MOE_ERR_UNSUPPORTED, "experts 'grouped_contig': grouped rows padded to %d; DeepGEMM "
                        "contiguous needs each expert's rows aligned to %d", pad, GC_PAD);
    if (N < 0 || pp->a1q.shape[1] != H || pp->counts.ndim != 1 || pp->counts.shape[0] != L || pp->probs.ndim != 1 ||
        pp->probs.dtype != MOE_F32 || pp->probs.shape[0] != N || a->fused_out->shape[0] != N)
        return moe_fail(MOE_ERR_INTERNAL, "grouped_contig: grouped input must be a1q [N, H], counts [L], probs f32 "
                        "[N], fused_out [N, H]");
    int32_t *re = malloc(sizeof(int32_t) * (size_t)N + 4);
    if (!re) return moe_fail(MOE_ERR_NOMEM, "grouped_contig: row experts");
    const int32_t *cn = pp->counts.data; /* host backend (the constructor checks) */
    int64_t off = 0;
    for (int64_t r = 0; r < N; r++) re[r] = -1;
    moe_status st = MOE_OK;
    for (int l = 0; l < L && st == MOE_OK; l++) {
        int64_t c = cn[l], padded = (c + pad - 1) / pad * pad;
        if (c < 0 || off + padded > N) {
            st = moe_fail(MOE_ERR_INTERNAL, "grouped_contig: expert %d's %lld rows (padded %lld) from row %lld pass "
                          "N = %lld", l, (long long)c, (long long)padded, (long long)off, (long long)N);
            break;
        }
        for (int64_t r = off; r < off + c; r++) re[r] = l;
        off += padded;
    }
    moe_tensor tre, h1, h2, q, s, g, yg, pw;
    moe_tensor *all[] = {&tre, &h1, &h2, &q, &s, &g, &yg, &pw};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) memset(all[i], 0, sizeof(moe_tensor));
    if (st != MOE_OK) goto done;
    if (off != N) {
        st = moe_fail(MOE_ERR_INTERNAL, "grouped_contig: padded counts sum to %lld rows, a1q has %lld",
                      (long long)off, (long long)N);
        goto done;
    }
    if ((st = moe_mk_index(mk, &tre, re, N))) goto done;
    /* 2'. GEMM1 */
    if ((st = moe_mk_view(a->ws13, 0, xd, 2, (int64_t[2]){N, N1}, &h1))) goto done;
    moe_gemm_args g1 = {mk->cfg.scheme, &pp->a1q, opt(&pp->a1q_scale), opt(&pp->a1q_global), w->w1, w->w1_scale,
                        w->w1_global, &tre, w->b1};
    if ((st = mk->ops->grouped_gemm(&g1, &h1))) goto done;
    /* 3'. activation, requantization, GEMM2 */
    if ((st = moe_mk_view(a->ws2, 0, xd, 2, (int64_t[2]){N, I}, &h2)) ||
        (st = mk->ops->activation(&h1, &tre, &mk->cfg.act, &h2)) || (st = moe_mk_quantize(mk, &h2, &q, &s, &g)) ||
        (st = moe_mk_view(a->ws13, 0, xd, 2, (int64_t[2]){N, H}, &yg)))
        goto done;
    moe_gemm_args g2 = {mk->cfg.scheme, &q, opt(&s), opt(&g), w->w2, w->w2_scale, w->w2_global, &tre, w->b2};
    if ((st = mk->ops->grouped_gemm(&g2, &yg))) goto done;
    /* 5'. each row times its prob, one rounding to x's dtype */
    if ((st = moe_mk_view(&pp->probs, 0, MOE_F32, 2, (int64_t[2]){N, 1}, &pw))) goto done;
    st = mk->ops->war_contiguous(&yg, &pw, 0, MOE_SUM_FP32, a->fused_out);
done:
    free(re);
    moe_mk_free(mk, &tre), moe_mk_free(mk, &q), moe_mk_free(mk, &s), moe_mk_free(mk, &g);
    return st;
}

static moe_status gc_apply(const moe_mk *mk, const moe_mk_apply_args *a)
{
    if (a->prep->format == MOE_FMT_GROUPED) return gc_apply_grouped(mk, a);
    MOE_MK_NEED(mk, permute_grouped);
    MOE_MK_NEED(mk, permute_rows);
    MOE_MK_NEED(mk, unpermute_rows);
    MOE_MK_NEED(mk, grouped_gemm);
    MOE_MK_NEED(mk, activation);
    MOE_MK_NEED(mk, war_contiguous);
    const moe_mk_prep *pp = a->prep;
    const moe_mk_weights *w = a->w;
    if (pp->format != MOE_FMT_STANDARD)
        return moe_fail(MOE_ERR_UNSUPPORTED, "experts 'grouped_contig': %s-format input is not accepted",
                        moe_act_format_name(pp->format));
    int64_t m = a->topk_ids->shape[0], k = a->topk_ids->shape[1], P = m * k, H = mk->cfg.hidden;
    int64_t I = mk->cfg.inter, N1 = mk->n1, E = mk->cfg.num_experts, E1 = E + 1, cap;
    moe_dtype xd = pp->x_dtype;
    moe_status st = moe_grouped_capacity(P, (int)E, GC_PAD, &cap);
    if (st != MOE_OK) return st;
    moe_tensor agv, ag, rsrc, cnt, off, ttok, tre, sg, h1, h2, q, s, g, yg, y;
    moe_tensor *all[] = {&agv, &ag, &rsrc, &cnt, &off, &ttok, &tre, &sg, &h1, &h2, &q, &s, &g, &yg, &y};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) memset(all[i], 0, sizeof(moe_tensor));
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)cap * 2 + 4);
    if (!idx) return moe_fail(MOE_ERR_NOMEM, "grouped_contig: indices");
    int32_t *tok = idx, *re = idx + cap;
    /* 1. expert-contiguous rows, pad 128 */
    if ((st = moe_mk_alloc2(mk, &ag, pp->a1q.dtype, cap, H)) || (st = moe_mk_alloc(mk, &rsrc, MOE_I32, 1, &cap)) ||
        (st = moe_mk_alloc(mk, &cnt, MOE_I32, 1, &E)) || (st = moe_mk_alloc(mk, &off, MOE_I32, 1, &E1)) ||
        (st = mk->ops->permute_grouped(&pp->a1q, a->topk_ids, 0, GC_PAD, &ag, &rsrc, &cnt, &off)))
        goto done;
    const int32_t *rs = rsrc.data, *cn = cnt.data, *of = off.data;
    int64_t used = of[E], valid = 0;
    for (int64_t r = 0; r < cap; r++) tok[r] = rs[r] >= 0 ? (int32_t)(rs[r] / k) : -1, re[r] = -1;
    for (int64_t e = 0; e < E; e++) {
        for (int64_t r = of[e]; r < of[e] + cn[e]; r++) re[r] = (int32_t)e;
        valid += cn[e];
    }
    const int32_t *tid = a->topk_ids->data;
    int64_t nneg = 0;
    for (int64_t i = 0; i < P; i++) nneg += tid[i] < 0;
    if (valid != P - nneg) { /* -1 (another rank's expert) takes no row; any other id must be local */
        st = moe_fail(MOE_ERR_INVALID_ARG, "topk_ids: %lld of %lld (token, slot) pairs that are not -1 name an "
                      "expert in [0, E = %lld)", (long long)valid, (long long)(P - nneg), (long long)E);
        goto done;
    }
    /* only the used rows [0, of[E]) go through the GEMMs */
    if ((st = moe_mk_index(mk, &ttok, tok, used)) || (st = moe_mk_index(mk, &tre, re, used)) ||
        (st = moe_mk_rows(&ag, 0, used, &agv)) || (st = moe_mk_gather_scale(mk, &pp->a1q_scale, &ttok, &sg)))
        goto done;
    /* 2. GEMM1 */
    if ((st = moe_mk_view(a->ws13, 0, xd, 2, (int64_t[2]){used, N1}, &h1))) goto done;
    moe_gemm_args g1 = {mk->cfg.scheme, &agv, opt(&sg), opt(&pp->a1q_global), w->w1, w->w1_scale, w->w1_global,
                        &tre, w->b1};
    if ((st = mk->ops->grouped_gemm(&g1, &h1))) goto done;
    /* 3. activation, requantization, GEMM2 */
    if ((st = moe_mk_view(a->ws2, 0, xd, 2, (int64_t[2]){used, I}, &h2)) ||
        (st = mk->ops->activation(&h1, &tre, &mk->cfg.act, &h2)) || (st = moe_mk_quantize(mk, &h2, &q, &s, &g)) ||
        (st = moe_mk_view(a->ws13, 0, xd, 2, (int64_t[2]){used, H}, &yg)))
        goto done;
    moe_gemm_args g2 = {mk->cfg.scheme, &q, opt(&s), opt(&g), w->w2, w->w2_scale, w->w2_global, &tre, w->b2};
    if ((st = mk->ops->grouped_gemm(&g2, &yg))) goto done;
    /* 4. back to (token, slot) rows */
    moe_tensor dst;
    if ((st = moe_mk_rows(&rsrc, 0, used, &dst)) || (st = moe_mk_alloc2(mk, &y, xd, P, H)) ||
        (st = mk->ops->unpermute_rows(&yg, &dst, &y)))
        goto done;
    /* 5. Contiguous weight and reduce */
    st = mk->ops->war_contiguous(&y, a->topk_weights, mk->cfg.weights_on_input, MOE_SUM_AUTO, a->fused_out);
done:
    free(idx);
    moe_tensor *owned[] = {&ag, &rsrc, &cnt, &off, &ttok, &tre, &sg, &q, &s, &g, &y};
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) moe_mk_free(mk, owned[i]);
    return st;
}

static moe_war_kind gc_war(const moe_mk *mk)
{
    (void)mk;
    return MOE_WAR_NOOP;
}

const moe_mk_experts_type moe_mk_experts_grouped_contig = {"grouped_contig", gc_ws, gc_apply, gc_war};
