/* ref experts [vLLM torch_experts, anchors vllm_modular.md 7], Standard
 * format, WAR NoOp. The stage ops in moe_ref_forward's order, so that
 * noep + ref equals moe_ref_forward bit for bit:
 *   1. replicate: row p = t*k + j takes token t's quantized row
 *      (ops->permute_rows; per-row / per-group scales move with their rows,
 *      a per-tensor scale is shared). Quantizing the M token rows and then
 *      replicating equals quantizing the replicated rows, since every
 *      dynamic rule depends on a row's values or on the tensor's amax only.
 *   2. GEMM1 (ops->grouped_gemm, row_expert = topk_ids, + b1) to x's dtype;
 *   3. ops->activation to x's dtype;
 *   4. requantization: per expert for per-tensor activation specs (its
 *      rows gathered expert-major with ops->permute_rows, quantized on their
 *      own, GEMM2 per expert, rows put back with ops->permute_rows), else
 *      once over all rows; GEMM2 (+ b2) to x's dtype;
 *   5. combine: the GEMM2 rows widened to f32 (exact) and reduced by
 *      ops->war_contiguous with MOE_SUM_FP32: per slot fl32(w * y), summed
 *      in f32 in slot order, one rounding to x's dtype (with weights on the
 *      input: the plain f32 sum), which is moe_ref_forward's step 8.
 * Workspaces: ws13 [m*k, max(N1, H)] (GEMM1 output, then GEMM2 output),
 * ws2 [m*k, I] (activation), fused_out [M, H]. Index tensors, quantized
 * copies and the f32 rows are allocated inside apply. */
#include <stdlib.h>
#include <string.h>
#include "moe/modular.h"

static moe_status ref_ws(const moe_mk *mk, int64_t m, int64_t M, const moe_mk_prep *prep, moe_mk_shape *ws13,
                         moe_mk_shape *ws2, moe_mk_shape *out)
{
    int64_t P = m * mk->cfg.topk, H = mk->cfg.hidden;
    *ws13 = (moe_mk_shape){prep->x_dtype, 2, {P, mk->n1 > H ? mk->n1 : H, 1, 1}};
    *ws2 = (moe_mk_shape){prep->x_dtype, 2, {P, mk->cfg.inter, 1, 1}};
    *out = (moe_mk_shape){prep->x_dtype, 2, {M, H, 1, 1}};
    return MOE_OK;
}

moe_status moe_mk_gather_scale(const moe_mk *mk, const moe_tensor *scale, const moe_tensor *src, moe_tensor *out)
{
    memset(out, 0, sizeof *out);
    if (scale->ndim == 0) return MOE_OK;
    if (mk->act_spec.gran == MOE_GRAN_TENSOR) return moe_mk_view(scale, 0, scale->dtype, scale->ndim, scale->shape, out);
    MOE_MK_NEED(mk, permute_rows);
    moe_status st = moe_mk_alloc2(mk, out, scale->dtype, src->shape[0], scale->shape[1]);
    if (st != MOE_OK) return st;
    return mk->ops->permute_rows(scale, src, out);
}

static const moe_tensor *opt(const moe_tensor *t) { return t->ndim ? t : NULL; }

/* Step 4 for per-tensor activation specs: each expert's rows on their own. */
static moe_status gemm2_per_expert(const moe_mk *mk, const moe_mk_weights *w, const moe_tensor *h2,
                                   const int32_t *re, moe_tensor *y)
{
    int64_t P = h2->shape[0], H = mk->cfg.hidden, I = h2->shape[1], E = mk->cfg.num_experts;
    int32_t *order = malloc(sizeof(int32_t) * (size_t)P * 3 + 4);
    if (!order) return moe_fail(MOE_ERR_NOMEM, "ref experts: row order");
    int32_t *inv = order + P, *rs = inv + P;
    int64_t n = 0;
    for (int64_t e = 0; e < E; e++)
        for (int64_t p = 0; p < P; p++)
            if (re[p] == e) inv[p] = (int32_t)n, rs[n] = (int32_t)e, order[n++] = (int32_t)p;
    moe_tensor to, ti, tr, hs, ys;
    memset(&to, 0, sizeof to), memset(&ti, 0, sizeof ti), memset(&tr, 0, sizeof tr);
    memset(&hs, 0, sizeof hs), memset(&ys, 0, sizeof ys);
    moe_status st;
    if ((st = moe_mk_index(mk, &to, order, P)) || (st = moe_mk_index(mk, &ti, inv, P)) ||
        (st = moe_mk_index(mk, &tr, rs, P)) || (st = moe_mk_alloc2(mk, &hs, h2->dtype, P, I)) ||
        (st = moe_mk_alloc2(mk, &ys, y->dtype, P, H)) || (st = mk->ops->permute_rows(h2, &to, &hs)))
        goto done;
    for (int64_t o = 0; o < P;) {
        int64_t c = 1;
        while (o + c < P && rs[o + c] == rs[o]) c++;
        moe_tensor sub, sre, sy, q, s, g;
        memset(&q, 0, sizeof q), memset(&s, 0, sizeof s), memset(&g, 0, sizeof g);
        if ((st = moe_mk_rows(&hs, o, c, &sub)) || (st = moe_mk_rows(&tr, o, c, &sre)) ||
            (st = moe_mk_rows(&ys, o, c, &sy)) || (st = moe_mk_quantize(mk, &sub, &q, &s, &g))) {
            moe_mk_free(mk, &q), moe_mk_free(mk, &s), moe_mk_free(mk, &g);
            goto done;
        }
        moe_gemm_args g2 = {mk->cfg.scheme, &q, opt(&s), opt(&g), w->w2, w->w2_scale, w->w2_global, &sre, w->b2};
        st = mk->ops->grouped_gemm(&g2, &sy);
        moe_mk_free(mk, &q), moe_mk_free(mk, &s), moe_mk_free(mk, &g);
        if (st != MOE_OK) goto done;
        o += c;
    }
    st = mk->ops->permute_rows(&ys, &ti, y);
done:
    free(order);
    moe_mk_free(mk, &to), moe_mk_free(mk, &ti), moe_mk_free(mk, &tr), moe_mk_free(mk, &hs), moe_mk_free(mk, &ys);
    return st;
}

static moe_status ref_apply(const moe_mk *mk, const moe_mk_apply_args *a)
{
    MOE_MK_NEED(mk, permute_rows);
    MOE_MK_NEED(mk, grouped_gemm);
    MOE_MK_NEED(mk, activation);
    MOE_MK_NEED(mk, war_contiguous);
    const moe_mk_prep *pp = a->prep;
    int64_t m = a->topk_ids->shape[0], k = a->topk_ids->shape[1], P = m * k, H = mk->cfg.hidden;
    int64_t I = mk->cfg.inter, N1 = mk->n1;
    moe_dtype xd = pp->x_dtype;
    const int32_t *ids = a->topk_ids->data;
    int32_t *src = malloc(sizeof(int32_t) * (size_t)P + 4);
    if (!src) return moe_fail(MOE_ERR_NOMEM, "ref experts: indices");
    for (int64_t p = 0; p < P; p++) src[p] = (int32_t)(p / k);
    moe_tensor tsrc, tre, ar, sr, h1, h2, y, q, s, g, yf;
    moe_tensor *all[] = {&tsrc, &tre, &ar, &sr, &h1, &h2, &y, &q, &s, &g, &yf};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) memset(all[i], 0, sizeof(moe_tensor));
    moe_status st;
    /* 1. replicate */
    if ((st = moe_mk_index(mk, &tsrc, src, P)) || (st = moe_mk_index(mk, &tre, ids, P)) ||
        (st = moe_mk_alloc2(mk, &ar, pp->a1q.dtype, P, H)) || (st = mk->ops->permute_rows(&pp->a1q, &tsrc, &ar)) ||
        (st = moe_mk_gather_scale(mk, &pp->a1q_scale, &tsrc, &sr)))
        goto done;
    /* 2. GEMM1 */
    if ((st = moe_mk_view(a->ws13, 0, xd, 2, (int64_t[2]){P, N1}, &h1))) goto done;
    moe_gemm_args g1 = {mk->cfg.scheme, &ar, opt(&sr), opt(&pp->a1q_global), a->w->w1, a->w->w1_scale,
                        a->w->w1_global, &tre, a->w->b1};
    if ((st = mk->ops->grouped_gemm(&g1, &h1))) goto done;
    /* 3. activation */
    if ((st = moe_mk_view(a->ws2, 0, xd, 2, (int64_t[2]){P, I}, &h2)) ||
        (st = mk->ops->activation(&h1, &tre, &mk->cfg.act, &h2)))
        goto done;
    /* 4. requantize, GEMM2 (y overwrites GEMM1's output, consumed above) */
    if ((st = moe_mk_view(a->ws13, 0, xd, 2, (int64_t[2]){P, H}, &y))) goto done;
    if (mk->act_spec.gran == MOE_GRAN_TENSOR) {
        if ((st = gemm2_per_expert(mk, a->w, &h2, ids, &y))) goto done;
    } else {
        if ((st = moe_mk_quantize(mk, &h2, &q, &s, &g))) goto done;
        moe_gemm_args g2 = {mk->cfg.scheme, &q, opt(&s), opt(&g), a->w->w2, a->w->w2_scale, a->w->w2_global,
                            &tre, a->w->b2};
        if ((st = mk->ops->grouped_gemm(&g2, &y))) goto done;
    }
    /* 5. combine in f32, one rounding */
    if ((st = moe_mk_widen(mk, &y, &yf))) goto done;
    st = mk->ops->war_contiguous(&yf, a->topk_weights, mk->cfg.weights_on_input, MOE_SUM_FP32, a->fused_out);
done:
    free(src);
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) moe_mk_free(mk, all[i]);
    return st;
}

static moe_war_kind ref_war(const moe_mk *mk)
{
    (void)mk;
    return MOE_WAR_NOOP;
}

const moe_mk_experts_type moe_mk_experts_ref = {"ref", ref_ws, ref_apply, ref_war};
