/* permute_grouped experts [TensorRT-LLM CUTLASS MoE, CutlassMoeFCRunner::
 * runMoe, anchors trtllm_moe.md 1, 2, 5.1], Standard format, WAR NoOp (the
 * finalize kernel weights and reduces):
 *   1. ops->maps_trtllm with the prologue moe_maps_trtllm_select picks for
 *      (m, k, E) (fused single block when m <= 256 and k in {1,2,4,6,8},
 *      else three-step; the two agree on every local row when a token
 *      never picks an expert twice, 1.4): permuted rows grouped by expert
 *      ascending, token ascending; expanded rows are k-major u = j*m + t.
 *      -1 ids (slots of experts on other ranks) are non-local in the maps
 *      (1.1): they take no row below num_valid = offset[E]; the rows from
 *      there are zero rows (row expert -1) and finalize skips the slots;
 *   2. ops->expand_trtllm: permuted row p takes token u % m's quantized row
 *      (unfused finalize: no permuted router scales); per-row / per-group
 *      activation scales are gathered with their rows (ops->permute_rows),
 *      a per-tensor scale is shared;
 *   3. GEMM1 (ops->grouped_gemm, row expert from expert_first_token_offset,
 *      + b1) to x's dtype;
 *   4. ops->activation to x's dtype; requantization: per expert for
 *      per-tensor activation specs (each expert's rows are one contiguous
 *      segment of the permuted rows), else once over all rows;
 *   5. GEMM2 without bias to x's dtype (the GEMM output type, 5.1);
 *   6. ops->finalize_trtllm: acc = fmaf(w[t,j], y[p] + b2[e], acc) for
 *      j ascending, one rounding to x's dtype (w = 1 with weights on the
 *      input). b2 enters here, as upstream (rank 0 only), not in GEMM2.
 * So the GEMM2 rows equal the ref experts' rows for every spec whose
 * dynamic scales do not depend on the grouping of rows (none, per token,
 * per group; per tensor per expert like torch_experts); only step 6's
 * fused multiply-add chain differs from moe_ref_forward's step 8 (equal
 * for topk 1, where fmaf(w, y, 0) = fl32(w y)).
 * Workspaces: ws13 [m*k, max(N1, H)] (GEMM1, then GEMM2 output), ws2
 * [m*k, I], fused_out [M, H]. */
#include <stdlib.h>
#include <string.h>
#include "moe/modular.h"

static moe_status pg_ws(const moe_mk *mk, int64_t m, int64_t M, const moe_mk_prep *prep, moe_mk_shape *ws13,
                        moe_mk_shape *ws2, moe_mk_shape *out)
{
    int64_t P = m * mk->cfg.topk, H = mk->cfg.hidden;
    *ws13 = (moe_mk_shape){prep->x_dtype, 2, {P, mk->n1 > H ? mk->n1 : H, 1, 1}};
    *ws2 = (moe_mk_shape){prep->x_dtype, 2, {P, mk->cfg.inter, 1, 1}};
    *out = (moe_mk_shape){prep->x_dtype, 2, {M, H, 1, 1}};
    return MOE_OK;
}

static const moe_tensor *opt(const moe_tensor *t) { return t->ndim ? t : NULL; }

static moe_status pg_apply(const moe_mk *mk, const moe_mk_apply_args *a)
{
    MOE_MK_NEED(mk, maps_trtllm);
    MOE_MK_NEED(mk, expand_trtllm);
    MOE_MK_NEED(mk, permute_rows);
    MOE_MK_NEED(mk, grouped_gemm);
    MOE_MK_NEED(mk, activation);
    MOE_MK_NEED(mk, finalize_trtllm);
    const moe_mk_prep *pp = a->prep;
    const moe_mk_weights *w = a->w;
    if (pp->format != MOE_FMT_STANDARD)
        return moe_fail(MOE_ERR_UNSUPPORTED, "experts 'permute_grouped': needs Standard-format rows, got %s",
                        moe_act_format_name(pp->format));
    int64_t m = a->topk_ids->shape[0], k = a->topk_ids->shape[1], P = m * k, H = mk->cfg.hidden;
    int64_t I = mk->cfg.inter, N1 = mk->n1, E = mk->cfg.num_experts;
    moe_dtype xd = pp->x_dtype;
    moe_scheme sc = mk->cfg.scheme;
    moe_trtllm_prologue_query pq = {m, (int)k, (int)E, sc == MOE_SCHEME_MXFP4_W4A16, sc == MOE_SCHEME_W4AFP8_G128, 0,
                                    MOE_TRTLLM_GATE_NOT_WFP4A16};
    moe_trtllm_prologue_choice ch;
    moe_status st = moe_maps_trtllm_select(&pq, &ch);
    if (st != MOE_OK) return st;
    moe_maps_trtllm_params mp = {ch.variant, (int)E, 0, (int)E};
    moe_tensor p2u, u2p, off, pte, tsrc, tre, ax, sx, h1, h2, q, s, g, y;
    moe_tensor *all[] = {&p2u, &u2p, &off, &pte, &tsrc, &tre, &ax, &sx, &h1, &h2, &q, &s, &g, &y};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) memset(all[i], 0, sizeof(moe_tensor));
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)P * 2 + 4);
    if (!idx) return moe_fail(MOE_ERR_NOMEM, "permute_grouped: indices");
    int32_t *src = idx, *re = idx + P;
    int64_t E1 = E + 1;
    /* 1. maps */
    if ((st = moe_mk_alloc(mk, &p2u, MOE_I32, 1, &P)) || (st = moe_mk_alloc(mk, &u2p, MOE_I32, 1, &P)) ||
        (st = moe_mk_alloc(mk, &off, MOE_I64, 1, &E1)) || (st = moe_mk_alloc(mk, &pte, MOE_I32, 1, &P)) ||
        (st = mk->ops->maps_trtllm(a->topk_ids, &mp, &p2u, &u2p, &off, &pte)))
        goto done;
    const int64_t *of = off.data;
    const int32_t *tid = a->topk_ids->data;
    int64_t nneg = 0;
    for (int64_t i = 0; i < P; i++) nneg += tid[i] < 0;
    if (of[E] != P - nneg) { /* -1 (another rank's expert) is non-local; any other id must be local */
        st = moe_fail(MOE_ERR_INVALID_ARG, "topk_ids: %lld of %lld (token, slot) pairs that are not -1 name an "
                      "expert in [0, E = %lld)", (long long)of[E], (long long)(P - nneg), (long long)E);
        goto done;
    }
    const int32_t *pu = p2u.data;
    for (int64_t p = of[E]; p < P; p++) re[p] = -1, src[p] = -1; /* non-local rows: zero rows */
    for (int64_t e = 0; e < E; e++)
        for (int64_t p = of[e]; p < of[e + 1]; p++) re[p] = (int32_t)e, src[p] = (int32_t)(pu[p] % m);
    /* 2. expand, scales with their rows */
    if ((st = moe_mk_index(mk, &tsrc, src, P)) || (st = moe_mk_index(mk, &tre, re, P)) ||
        (st = moe_mk_alloc2(mk, &ax, pp->a1q.dtype, P, H)) ||
        (st = mk->ops->expand_trtllm(&pp->a1q, &p2u, (int)k, NULL, &ax, NULL)) ||
        (st = moe_mk_gather_scale(mk, &pp->a1q_scale, &tsrc, &sx)))
        goto done;
    /* 3. GEMM1 */
    if ((st = moe_mk_view(a->ws13, 0, xd, 2, (int64_t[2]){P, N1}, &h1))) goto done;
    moe_gemm_args g1 = {sc, &ax, opt(&sx), opt(&pp->a1q_global), w->w1, w->w1_scale, w->w1_global, &tre, w->b1};
    if ((st = mk->ops->grouped_gemm(&g1, &h1))) goto done;
    /* 4. activation */
    if ((st = moe_mk_view(a->ws2, 0, xd, 2, (int64_t[2]){P, I}, &h2)) ||
        (st = mk->ops->activation(&h1, &tre, &mk->cfg.act, &h2)))
        goto done;
    /* 4-5. requantization, GEMM2 (y overwrites GEMM1's output, consumed) */
    if ((st = moe_mk_view(a->ws13, 0, xd, 2, (int64_t[2]){P, H}, &y))) goto done;
    if (mk->act_spec.gran == MOE_GRAN_TENSOR) {
        for (int64_t e = 0; e < E && st == MOE_OK; e++) {
            int64_t n = of[e + 1] - of[e];
            if (n == 0) continue;
            moe_tensor sub, sre, sy, eq, es, eg;
            memset(&eq, 0, sizeof eq), memset(&es, 0, sizeof es), memset(&eg, 0, sizeof eg);
            if (!(st = moe_mk_rows(&h2, of[e], n, &sub)) && !(st = moe_mk_rows(&tre, of[e], n, &sre)) &&
                !(st = moe_mk_rows(&y, of[e], n, &sy)) && !(st = moe_mk_quantize(mk, &sub, &eq, &es, &eg))) {
                moe_gemm_args g2 = {sc, &eq, opt(&es), opt(&eg), w->w2, w->w2_scale, w->w2_global, &sre, NULL};
                st = mk->ops->grouped_gemm(&g2, &sy);
            }
            moe_mk_free(mk, &eq), moe_mk_free(mk, &es), moe_mk_free(mk, &eg);
        }
        if (st != MOE_OK) goto done;
    } else {
        if ((st = moe_mk_quantize(mk, &h2, &q, &s, &g))) goto done;
        moe_gemm_args g2 = {sc, &q, opt(&s), opt(&g), w->w2, w->w2_scale, w->w2_global, &tre, NULL};
        if ((st = mk->ops->grouped_gemm(&g2, &y))) goto done;
    }
    /* 6. finalize: fmaf chain in slot order, bias here, one rounding */
    st = mk->ops->finalize_trtllm(&y, &u2p, a->topk_ids, mk->cfg.weights_on_input ? NULL : a->topk_weights, w->b2, 0,
                                  (int)E, a->fused_out);
done:
    free(idx);
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) moe_mk_free(mk, all[i]);
    return st;
}

static moe_war_kind pg_war(const moe_mk *mk)
{
    (void)mk;
    return MOE_WAR_NOOP;
}

const moe_mk_experts_type moe_mk_experts_permute_grouped = {"permute_grouped", pg_ws, pg_apply, pg_war};
