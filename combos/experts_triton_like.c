/* triton_like experts [vLLM TritonExperts, anchors vllm_modular.md 2.8],
 * Standard format, WAR NoOp (it weights and reduces itself):
 *   1. ops->align_block_size (block 16, all experts local): sorted flat
 *      indices t*k + j per expert, padded per block (pad = m*k). -1 ids
 *      (slots of experts on other ranks, from the expert-parallel PFs) go
 *      through vLLM's expert map with ignore_invalid_experts: the ids are
 *      read over E + 1 experts with -1 -> E, the map [E + 1] sends E to -1,
 *      so those pairs take no slot; their flat rows stay zero rows (GEMM,
 *      activation and unpermute write zeros for them) and add exactly 0
 *      to the sum;
 *   2. gathered rows: position q of the used region takes token
 *      sorted[q] / k's quantized row (ops->permute_rows, pads -> zero
 *      rows), its expert from expert_ids[q / 16];
 *   3. GEMM1 on the gathered rows to x's dtype, written back to flat order
 *      (ops->unpermute_rows: Triton writes each row at its flat index);
 *   4. ops->activation over the m*k flat rows, then requantization once
 *      over all m*k rows (dynamic per-tensor: one scale for all of them,
 *      unlike the ref experts' per-expert scales);
 *   5. GEMM2 on the gathered rows in f32 (the accumulator), back to flat
 *      order; the router weight is applied to the accumulator and the
 *      product rounded once to x's dtype (Triton's MUL_ROUTED_WEIGHT
 *      before the cast): ops->war_contiguous over [m*k, 1, H] with the
 *      [m*k, 1] weights, a one-term sum. With weights on the input GEMM2
 *      rounds to x's dtype directly;
 *   6. moe_sum: ops->war_contiguous (weights already applied) with
 *      MOE_SUM_AUTO: per-add rounding in x's dtype for topk 2..4, an f32
 *      sum with one rounding otherwise.
 * Workspaces: ws13 [m*k, max(N1, H)] (GEMM1 output, then the weighted
 * GEMM2 rows), ws2 [m*k, I], fused_out [M, H]. */
#include <stdlib.h>
#include <string.h>
#include "moe/modular.h"

#define TL_BLOCK 16


static moe_status tl_ws(const moe_mk *mk, int64_t m, int64_t M, const moe_mk_prep *prep, moe_mk_shape *ws13,
                        moe_mk_shape *ws2, moe_mk_shape *out)
{
    int64_t P = m * mk->cfg.topk, H = mk->cfg.hidden;
    *ws13 = (moe_mk_shape){prep->x_dtype, 2, {P, mk->n1 > H ? mk->n1 : H, 1, 1}};
    *ws2 = (moe_mk_shape){prep->x_dtype, 2, {P, mk->cfg.inter, 1, 1}};
    *out = (moe_mk_shape){prep->x_dtype, 2, {M, H, 1, 1}};
    return MOE_OK;
}

static const moe_tensor *opt(const moe_tensor *t) { return t->ndim ? t : NULL; }

static moe_status tl_apply(const moe_mk *mk, const moe_mk_apply_args *a)
{
    MOE_MK_NEED(mk, align_block_size);
    MOE_MK_NEED(mk, permute_rows);
    MOE_MK_NEED(mk, unpermute_rows);
    MOE_MK_NEED(mk, grouped_gemm);
    MOE_MK_NEED(mk, activation);
    MOE_MK_NEED(mk, war_contiguous);
    const moe_mk_prep *pp = a->prep;
    const moe_mk_weights *w = a->w;
    int64_t m = a->topk_ids->shape[0], k = a->topk_ids->shape[1], P = m * k, H = mk->cfg.hidden;
    int64_t I = mk->cfg.inter, N1 = mk->n1;
    moe_dtype xd = pp->x_dtype;
    int woi = mk->cfg.weights_on_input;
    int E = mk->cfg.num_experts;
    moe_align_params ap = {TL_BLOCK, E, NULL, MOE_ALIGN_MAP_KEEP_NONLOCAL, 0};
    moe_tensor sorted, eids, ntp, tsrc, tdst, trx, tre, ag, sg, h1g, h1, h2, q, s, g, qg, sg2, yg, y, z, wv, mids, emap;
    moe_tensor *all[] = {&sorted, &eids, &ntp, &tsrc, &tdst, &trx, &tre, &ag, &sg, &h1g, &h1,
                         &h2, &q, &s, &g, &qg, &sg2, &yg, &y, &z, &wv, &mids, &emap};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) memset(all[i], 0, sizeof(moe_tensor));
    int32_t *idx = NULL;
    const moe_tensor *align_ids = a->topk_ids;
    const int32_t *tid = a->topk_ids->data;
    int64_t S, B, nneg = 0;
    moe_status st = MOE_OK;
    for (int64_t i = 0; i < P; i++) nneg += tid[i] < 0;
    if (nneg) { /* -1 slots (experts on other ranks): vLLM's expert map with ignore_invalid_experts -- ids
                   over E + 1 "global" experts, -1 -> E, the map sends E to -1, so those pairs take no
                   slot; every row they would fill stays a zero row */
        int32_t *v = malloc(sizeof(int32_t) * (size_t)(P + E + 1));
        if (!v) return moe_fail(MOE_ERR_NOMEM, "triton_like: expert map");
        for (int64_t i = 0; i < P; i++) v[i] = tid[i] < 0 ? E : tid[i];
        for (int e = 0; e <= E; e++) v[P + e] = e < E ? e : -1;
        st = moe_mk_index2(mk, &mids, v, m, k);
        if (st == MOE_OK) st = moe_mk_index(mk, &emap, v + P, E + 1);
        free(v);
        if (st != MOE_OK) goto done;
        ap.num_experts = E + 1, ap.expert_map = &emap, ap.map_mode = MOE_ALIGN_MAP_IGNORE_INVALID;
        align_ids = &mids;
    }
    if ((st = moe_align_capacity(P, &ap, &S, &B))) goto done;
    /* 1. align */
    if ((st = moe_mk_alloc(mk, &sorted, MOE_I32, 1, &S)) || (st = moe_mk_alloc(mk, &eids, MOE_I32, 1, &B)) ||
        (st = moe_mk_alloc(mk, &ntp, MOE_I32, 1, (int64_t[1]){1})) ||
        (st = mk->ops->align_block_size(align_ids, &ap, &sorted, &eids, &ntp)))
        goto done;
    /* 2. gathered-row indices over the used region */
    int64_t U = ((const int32_t *)ntp.data)[0];
    const int32_t *sid = sorted.data, *eid = eids.data;
    if (!(idx = malloc(sizeof(int32_t) * (size_t)U * 3 + 4))) {
        st = moe_fail(MOE_ERR_NOMEM, "triton_like: indices");
        goto done;
    }
    int32_t *src = idx, *dst = idx + U, *rx = idx + 2 * U;
    for (int64_t i = 0; i < U; i++) {
        int valid = sid[i] >= 0 && sid[i] < P;
        src[i] = valid ? (int32_t)(sid[i] / k) : -1;
        dst[i] = valid ? sid[i] : -1;
        rx[i] = valid ? eid[i / TL_BLOCK] : -1;
    }
    if ((st = moe_mk_index(mk, &tsrc, src, U)) || (st = moe_mk_index(mk, &tdst, dst, U)) ||
        (st = moe_mk_index(mk, &trx, rx, U)) || (st = moe_mk_index(mk, &tre, a->topk_ids->data, P)) ||
        (st = moe_mk_alloc2(mk, &ag, pp->a1q.dtype, U, H)) || (st = mk->ops->permute_rows(&pp->a1q, &tsrc, &ag)) ||
        (st = moe_mk_gather_scale(mk, &pp->a1q_scale, &tsrc, &sg)))
        goto done;
    /* 3. GEMM1, back to flat order */
    if ((st = moe_mk_alloc2(mk, &h1g, xd, U, N1))) goto done;
    moe_gemm_args g1 = {mk->cfg.scheme, &ag, opt(&sg), opt(&pp->a1q_global), w->w1, w->w1_scale, w->w1_global,
                        &trx, w->b1};
    if ((st = mk->ops->grouped_gemm(&g1, &h1g)) || (st = moe_mk_view(a->ws13, 0, xd, 2, (int64_t[2]){P, N1}, &h1)) ||
        (st = mk->ops->unpermute_rows(&h1g, &tdst, &h1)))
        goto done;
    /* 4. activation, requantization over all rows */
    if ((st = moe_mk_view(a->ws2, 0, xd, 2, (int64_t[2]){P, I}, &h2)) ||
        (st = mk->ops->activation(&h1, &tre, &mk->cfg.act, &h2)) || (st = moe_mk_quantize(mk, &h2, &q, &s, &g)))
        goto done;
    /* 5. GEMM2 on gathered rows (the flat rows named by dst) */
    if ((st = moe_mk_alloc2(mk, &qg, q.dtype, U, I)) || (st = mk->ops->permute_rows(&q, &tdst, &qg)) ||
        (st = moe_mk_gather_scale(mk, &s, &tdst, &sg2)) ||
        (st = moe_mk_alloc2(mk, &yg, woi ? xd : MOE_F32, U, H)))
        goto done;
    moe_gemm_args g2 = {mk->cfg.scheme, &qg, opt(&sg2), opt(&g), w->w2, w->w2_scale, w->w2_global, &trx, w->b2};
    if ((st = mk->ops->grouped_gemm(&g2, &yg))) goto done;
    if ((st = moe_mk_view(a->ws13, 0, xd, 2, (int64_t[2]){P, H}, &z))) goto done;
    if (woi) {
        if ((st = mk->ops->unpermute_rows(&yg, &tdst, &z))) goto done;
    } else {
        if ((st = moe_mk_alloc2(mk, &y, MOE_F32, P, H)) || (st = mk->ops->unpermute_rows(&yg, &tdst, &y)) ||
            (st = moe_mk_view(a->topk_weights, 0, MOE_F32, 2, (int64_t[2]){P, 1}, &wv)) ||
            (st = mk->ops->war_contiguous(&y, &wv, 0, MOE_SUM_FP32, &z)))
            goto done;
    }
    /* 6. moe_sum */
    st = mk->ops->war_contiguous(&z, a->topk_weights, 1, MOE_SUM_AUTO, a->fused_out);
done:
    free(idx);
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) moe_mk_free(mk, all[i]);
    return st;
}

static moe_war_kind tl_war(const moe_mk *mk)
{
    (void)mk;
    return MOE_WAR_NOOP;
}

const moe_mk_experts_type moe_mk_experts_triton_like = {"triton_like", tl_ws, tl_apply, tl_war};
