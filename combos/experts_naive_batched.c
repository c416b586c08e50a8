/* naive_batched experts [vLLM NaiveBatchedExperts, anchors vllm_modular.md
 * 2.8], Batched format, WAR Delegate (the batched PF picks NaiveBatched).
 * For each local expert l with n = count[l] > 0 rows, on views of its
 * rows: GEMM1 (ops->grouped_gemm with every row's expert l, its own
 * activation scales from prepare, + b1) to x's dtype -> ops->activation
 * -> requantization of the n rows on their own (dynamic per-tensor: one
 * scale per expert) -> GEMM2 (+ b2) to x's dtype into fused_out[l, 0..n).
 * Rows past n stay zero. One deliberate difference from vLLM's class: it
 * keeps the intermediate in 16 bits for quantized schemes (dequantized
 * fp32 matmuls); here GEMM2 reads the scheme's activation elements, as
 * BatchedTritonExperts and torch_experts do, so that the pair is a
 * composition of the shared GEMM op.
 * Workspaces: ws13 [max_tokens, N1], ws2 [max_tokens, I], fused_out
 * [L, max_tokens, H]. */
#include <stdlib.h>
#include <string.h>
#include "moe/modular.h"

static moe_status nb_ws(const moe_mk *mk, int64_t m, int64_t M, const moe_mk_prep *prep, moe_mk_shape *ws13,
                        moe_mk_shape *ws2, moe_mk_shape *out)
{
    (void)m, (void)M;
    int64_t T = prep->max_tokens, L = prep->num_local_experts;
    *ws13 = (moe_mk_shape){prep->x_dtype, 2, {T, mk->n1, 1, 1}};
    *ws2 = (moe_mk_shape){prep->x_dtype, 2, {T, mk->cfg.inter, 1, 1}};
    *out = (moe_mk_shape){prep->x_dtype, 3, {L, T, mk->cfg.hidden, 1}};
    return MOE_OK;
}

static const moe_tensor *opt(const moe_tensor *t) { return t && t->ndim ? t : NULL; }

static moe_status nb_apply(const moe_mk *mk, const moe_mk_apply_args *a)
{
    MOE_MK_NEED(mk, grouped_gemm);
    MOE_MK_NEED(mk, activation);
    const moe_mk_prep *pp = a->prep;
    const moe_mk_weights *w = a->w;
    int64_t L = pp->num_local_experts, H = mk->cfg.hidden, I = mk->cfg.inter, N1 = mk->n1;
    moe_dtype xd = pp->x_dtype;
    const int32_t *cnt = pp->counts.data;
    int32_t *rows = malloc(sizeof(int32_t) * (size_t)pp->max_tokens + 4);
    if (!rows) return moe_fail(MOE_ERR_NOMEM, "naive_batched: indices");
    moe_status st = MOE_OK;
    for (int64_t l = 0; l < L && st == MOE_OK; l++) {
        int64_t n = cnt[l];
        if (n == 0) continue;
        for (int64_t r = 0; r < n; r++) rows[r] = (int32_t)l;
        moe_tensor re, ain, h1, h2, q, s, g, y;
        memset(&re, 0, sizeof re), memset(&q, 0, sizeof q), memset(&s, 0, sizeof s), memset(&g, 0, sizeof g);
        if ((st = moe_mk_index(mk, &re, rows, n)) || (st = moe_mk_rows(&pp->a1q, l, 1, &ain)) ||
            (st = moe_mk_view(&ain, 0, ain.dtype, 2, (int64_t[2]){n, H}, &ain)) ||
            (st = moe_mk_view(a->ws13, 0, xd, 2, (int64_t[2]){n, N1}, &h1)) ||
            (st = moe_mk_view(a->ws2, 0, xd, 2, (int64_t[2]){n, I}, &h2)) ||
            (st = moe_mk_rows(a->fused_out, l, 1, &y)) ||
            (st = moe_mk_view(&y, 0, xd, 2, (int64_t[2]){n, H}, &y)))
            goto next;
        moe_gemm_args g1 = {mk->cfg.scheme, &ain, opt(pp->ex_scale ? &pp->ex_scale[l] : NULL),
                            opt(pp->ex_global ? &pp->ex_global[l] : NULL), w->w1, w->w1_scale, w->w1_global, &re,
                            w->b1};
        if ((st = mk->ops->grouped_gemm(&g1, &h1)) || (st = mk->ops->activation(&h1, &re, &mk->cfg.act, &h2)) ||
            (st = moe_mk_quantize(mk, &h2, &q, &s, &g)))
            goto next;
        moe_gemm_args g2 = {mk->cfg.scheme, &q, opt(&s), opt(&g), w->w2, w->w2_scale, w->w2_global, &re, w->b2};
        st = mk->ops->grouped_gemm(&g2, &y);
    next:
        moe_mk_free(mk, &re), moe_mk_free(mk, &q), moe_mk_free(mk, &s), moe_mk_free(mk, &g);
    }
    free(rows);
    return st;
}

static moe_war_kind nb_war(const moe_mk *mk)
{
    (void)mk;
    return MOE_WAR_DELEGATE;
}

const moe_mk_experts_type moe_mk_experts_naive_batched = {"naive_batched", nb_ws, nb_apply, nb_war};
