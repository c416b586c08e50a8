/* ck_fused experts [ROCm composable_kernel ck_tile fused MoE, anchors
 * dispatch_sorting.md B.1-B.7], Standard format, WAR NoOp:
 *   1. ops->sort_ck (unit 32 = block_m, mock ids token | slot << 24,
 *      skip-empty, all experts local): (token, slot) pairs grouped by
 *      expert ascending, tokens ascending, each expert padded to a tile
 *      with the sentinel (weight 0); the router weights travel with them
 *      (sorted_weights). -1 ids (slots of experts on other ranks) go
 *      through CK's local_expert_mask: a -1 in slot j is read as expert
 *      E + j of E + k (distinct within a row), masked off, so the pair
 *      takes no entry and its (token, slot) row stays a zero row (the
 *      unpermute writes zeros), adding exactly 0 in step 5;
 *   2. sorted rows: entry i takes token (id & 0xFFFFFF)'s quantized row
 *      (ops->permute_rows, sentinels -> zero rows) with its tile's expert
 *      (sentinels -> -1: zero rows);
 *   3. GEMM1 (+ b1) to x's dtype -> ops->activation to x's dtype ->
 *      requantization once over the sorted rows (int8 per token: a per-row
 *      rule) -> GEMM2 (+ b2) to f32 (the accumulator acc1);
 *   4. acc1 *= sorted weight in f32, the product rounded once to x's dtype
 *      (the fused kernel's epilogue; ops->war_contiguous over [U, 1, H]
 *      with the [U, 1] sorted weights, a one-term sum); with weights on
 *      the input GEMM2 rounds to x's dtype directly;
 *   5. accumulation of the k slot terms into the zeroed output row.
 *      Upstream does this with atomic adds in x's dtype (each add rounded,
 *      B.5), in whatever order the tiles finish, so its output is not
 *      bit-deterministic (registry class BOUNDED). This composition FIXES
 *      THE ORDER to ascending slot j (the terms are put back at t*k + j
 *      with ops->unpermute_rows, then ops->war_contiguous, weights already
 *      applied, MOE_SUM_STORAGE_PER_ADD: acc = round(acc + z_j), j = 0..k-1,
 *      for every topk): one of the orders the device may take, and the
 *      order of CK's host reference_fused_moe reduction (B.7; which sums
 *      in f32 and rounds once, where the device rounds per add). The
 *      bound of the test covers every order.
 * So the GEMM2 accumulators equal moe_ref_forward's per slot (same rows,
 * same scales for bf16/f16 and int8 per token); steps 4-5 differ.
 * Workspaces: ws13 [L, max(N1, H)], ws2 [L, I] with L = the sorted
 * capacity k*m + E*32 - k (CK's updated formula), fused_out [M, H]. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "moe/modular.h"

#define CK_UNIT 32

static moe_status ck_ws(const moe_mk *mk, int64_t m, int64_t M, const moe_mk_prep *prep, moe_mk_shape *ws13,
                        moe_mk_shape *ws2, moe_mk_shape *out)
{
    int64_t cap, H = mk->cfg.hidden;
    moe_status st =
        moe_sort_ck_capacity(m, mk->cfg.topk, mk->cfg.num_experts, CK_UNIT, MOE_SORT_CK_PAD_UPDATED, &cap, NULL);
    if (st != MOE_OK) return st;
    *ws13 = (moe_mk_shape){prep->x_dtype, 2, {cap, mk->n1 > H ? mk->n1 : H, 1, 1}};
    *ws2 = (moe_mk_shape){prep->x_dtype, 2, {cap, mk->cfg.inter, 1, 1}};
    *out = (moe_mk_shape){prep->x_dtype, 2, {M, H, 1, 1}};
    return MOE_OK;
}

static const moe_tensor *opt(const moe_tensor *t) { return t->ndim ? t : NULL; }

static moe_status ck_apply(const moe_mk *mk, const moe_mk_apply_args *a)
{
    MOE_MK_NEED(mk, sort_ck);
    MOE_MK_NEED(mk, permute_rows);
    MOE_MK_NEED(mk, unpermute_rows);
    MOE_MK_NEED(mk, grouped_gemm);
    MOE_MK_NEED(mk, activation);
    MOE_MK_NEED(mk, war_contiguous);
    const moe_mk_prep *pp = a->prep;
    const moe_mk_weights *w = a->w;
    if (pp->format != MOE_FMT_STANDARD)
        return moe_fail(MOE_ERR_UNSUPPORTED, "experts 'ck_fused': needs Standard-format rows, got %s",
                        moe_act_format_name(pp->format));
    int64_t m = a->topk_ids->shape[0], k = a->topk_ids->shape[1], P = m * k, H = mk->cfg.hidden;
    int64_t I = mk->cfg.inter, N1 = mk->n1, E = mk->cfg.num_experts, cap, tiles, two = 2;
    moe_dtype xd = pp->x_dtype;
    int woi = mk->cfg.weights_on_input;
    moe_sort_ck_params sp = {(int)E, CK_UNIT, MOE_SORT_CK_MOCK_ID, MOE_SORT_CK_SKIP_EMPTY, NULL};
    moe_tensor sid, swt, seid, ntp, tsrc, tdst, tre, ag, sg, h1, h2, q, s, g, yg, wv, z, zf, mids, mask;
    moe_tensor *all[] = {&sid, &swt, &seid, &ntp, &tsrc, &tdst, &tre, &ag, &sg,
                         &h1, &h2, &q, &s, &g, &yg, &wv, &z, &zf, &mids, &mask};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) memset(all[i], 0, sizeof(moe_tensor));
    int32_t *idx = NULL;
    const moe_tensor *sort_ids = a->topk_ids;
    const int32_t *tid = a->topk_ids->data;
    int64_t nneg = 0;
    moe_status st = MOE_OK;
    for (int64_t i = 0; i < P; i++) nneg += tid[i] < 0;
    if (nneg) { /* -1 slots (experts on other ranks): CK's local_expert_mask -- ids over E + k experts, a
                   -1 in slot j -> E + j (distinct per row, as moe-sorting needs), masked off, so those
                   pairs take no entry; their (token, slot) rows stay zero rows */
        int32_t *v = malloc(sizeof(int32_t) * (size_t)(P + E + k));
        if (!v) return moe_fail(MOE_ERR_NOMEM, "ck_fused: local expert mask");
        for (int64_t i = 0; i < P; i++) v[i] = tid[i] < 0 ? (int32_t)(E + i % k) : tid[i];
        for (int64_t e = 0; e < E + k; e++) v[P + e] = e < E;
        st = moe_mk_index2(mk, &mids, v, m, k);
        if (st == MOE_OK) st = moe_mk_index(mk, &mask, v + P, E + k);
        free(v);
        if (st != MOE_OK) goto done;
        sp.num_experts = (int)(E + k), sp.local_expert_mask = &mask;
        sort_ids = &mids;
    }
    if ((st = moe_sort_ck_capacity(m, (int)k, sp.num_experts, CK_UNIT, MOE_SORT_CK_PAD_UPDATED, &cap, &tiles)))
        goto done;
    /* 1. sort */
    if ((st = moe_mk_alloc(mk, &sid, MOE_I32, 1, &cap)) || (st = moe_mk_alloc(mk, &swt, MOE_F32, 1, &cap)) ||
        (st = moe_mk_alloc(mk, &seid, MOE_I32, 1, &tiles)) || (st = moe_mk_alloc(mk, &ntp, MOE_I32, 1, &two)) ||
        (st = mk->ops->sort_ck(sort_ids, a->topk_weights, &sp, &sid, &swt, &seid, &ntp)))
        goto done;
    /* 2. sorted-row indices over the used region */
    int64_t U = ((const int32_t *)ntp.data)[0], valid = 0;
    if (!(idx = malloc(sizeof(int32_t) * (size_t)U * 3 + 4))) {
        st = moe_fail(MOE_ERR_NOMEM, "ck_fused: indices");
        goto done;
    }
    int32_t *src = idx, *dst = idx + U, *rx = idx + 2 * U;
    const int32_t *si = sid.data, *te = seid.data;
    for (int64_t i = 0; i < U; i++) {
        uint32_t id = (uint32_t)si[i];
        int64_t t = id & 0xFFFFFFu, j = id >> 24;
        int ok = t < m && j < k;
        src[i] = ok ? (int32_t)t : -1;
        dst[i] = ok ? (int32_t)(t * k + j) : -1;
        rx[i] = ok ? te[i / CK_UNIT] : -1;
        valid += ok;
    }
    if (valid != P - nneg) {
        st = moe_fail(MOE_ERR_INTERNAL, "ck_fused: sorting kept %lld of %lld (token, slot) pairs", (long long)valid,
                      (long long)(P - nneg));
        goto done;
    }
    if ((st = moe_mk_index(mk, &tsrc, src, U)) || (st = moe_mk_index(mk, &tdst, dst, U)) ||
        (st = moe_mk_index(mk, &tre, rx, U)) || (st = moe_mk_alloc2(mk, &ag, pp->a1q.dtype, U, H)) ||
        (st = mk->ops->permute_rows(&pp->a1q, &tsrc, &ag)) ||
        (st = moe_mk_gather_scale(mk, &pp->a1q_scale, &tsrc, &sg)))
        goto done;
    /* 3. GEMM1 -> activation -> requantization -> GEMM2 (f32 accumulator) */
    if ((st = moe_mk_view(a->ws13, 0, xd, 2, (int64_t[2]){U, N1}, &h1))) goto done;
    moe_gemm_args g1 = {mk->cfg.scheme, &ag, opt(&sg), opt(&pp->a1q_global), w->w1, w->w1_scale, w->w1_global,
                        &tre, w->b1};
    if ((st = mk->ops->grouped_gemm(&g1, &h1)) ||
        (st = moe_mk_view(a->ws2, 0, xd, 2, (int64_t[2]){U, I}, &h2)) ||
        (st = mk->ops->activation(&h1, &tre, &mk->cfg.act, &h2)) || (st = moe_mk_quantize(mk, &h2, &q, &s, &g)) ||
        (st = moe_mk_alloc2(mk, &yg, woi ? xd : MOE_F32, U, H)))
        goto done;
    moe_gemm_args g2 = {mk->cfg.scheme, &q, opt(&s), opt(&g), w->w2, w->w2_scale, w->w2_global, &tre, w->b2};
    if ((st = mk->ops->grouped_gemm(&g2, &yg))) goto done;
    /* 4. weight in f32, one rounding to x's dtype */
    const moe_tensor *terms = &yg;
    if (!woi) {
        if ((st = moe_mk_view(&swt, 0, MOE_F32, 2, (int64_t[2]){U, 1}, &wv)) ||
            (st = moe_mk_view(a->ws13, 0, xd, 2, (int64_t[2]){U, H}, &z)) ||
            (st = mk->ops->war_contiguous(&yg, &wv, 0, MOE_SUM_FP32, &z)))
            goto done;
        terms = &z;
    }
    /* 5. slot terms back to t*k + j, accumulated in slot order, per-add rounding */
    if ((st = moe_mk_alloc2(mk, &zf, xd, P, H)) || (st = mk->ops->unpermute_rows(terms, &tdst, &zf))) goto done;
    st = mk->ops->war_contiguous(&zf, a->topk_weights, 1, MOE_SUM_STORAGE_PER_ADD, a->fused_out);
done:
    free(idx);
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) moe_mk_free(mk, all[i]);
    return st;
}

static moe_war_kind ck_war(const moe_mk *mk)
{
    (void)mk;
    return MOE_WAR_NOOP;
}

const moe_mk_experts_type moe_mk_experts_ck_fused = {"ck_fused", ck_ws, ck_apply, ck_war};
