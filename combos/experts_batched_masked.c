/* batched_masked experts [vLLM BatchedTritonExperts / BatchedDeepGemmExperts
 * (DeepGEMM masked), anchors vllm_modular.md 1.4, 2.8], Batched format, WAR
 * Delegate (the batched PF picks NaiveBatched). The masked kernels run over
 * the whole [L, max_tokens] buffer and touch only each expert's first
 * count[l] rows (expert_num_tokens is the mask); here, for each local
 * expert l with n = count[l] > 0, on views of its rows inside the batched
 * workspaces:
 *   GEMM1 (ops->grouped_gemm, every row's expert l, its own activation
 *   scales from prepare, + b1) into ws13[l, 0..n) in x's dtype ->
 *   ops->activation into ws2[l, 0..n) -> requantization of the n valid rows
 *   on their own (batched_moe_kernel_quantize_input: dynamic per-tensor
 *   gives one scale per expert, per-token / per-group scales per row) ->
 *   GEMM2 (+ b2) in x's dtype into fused_out[l, 0..n).
 * Rows past n stay zero (fused_out is allocated zeroed and never written
 * there; upstream zero-fills its GEMM1 and activation caches for the same
 * reason). The rounding points are those of naive_batched in this project
 * (which requantizes like BatchedTritonExperts), so the two types agree bit
 * for bit; they differ in the workspaces (batched per expert here, as
 * BatchedTritonExperts' (L, maxT, max(K, N)) and (L, maxT, N_act)).
 * Workspaces: ws13 [L, max_tokens, N1], ws2 [L, max_tokens, I], fused_out
 * [L, max_tokens, H]. */
#include <stdlib.h>
#include <string.h>
#include "moe/modular.h"

static moe_status bm_ws(const moe_mk *mk, int64_t m, int64_t M, const moe_mk_prep *prep, moe_mk_shape *ws13,
                        moe_mk_shape *ws2, moe_mk_shape *out)
{
    (void)m, (void)M;
    int64_t T = prep->max_tokens, L = prep->num_local_experts;
    *ws13 = (moe_mk_shape){prep->x_dtype, 3, {L, T, mk->n1, 1}};
    *ws2 = (moe_mk_shape){prep->x_dtype, 3, {L, T, mk->cfg.inter, 1}};
    *out = (moe_mk_shape){prep->x_dtype, 3, {L, T, mk->cfg.hidden, 1}};
    return MOE_OK;
}

static const moe_tensor *opt(const moe_tensor *t) { return t && t->ndim ? t : NULL; }

/* rows [0, n) of expert l of a [L, T, C] buffer as an [n, C] view */
static moe_status expert_rows(const moe_tensor *b, int64_t l, int64_t n, moe_tensor *v)
{
    moe_status st = moe_mk_rows(b, l, 1, v);
    if (st != MOE_OK) return st;
    return moe_mk_view(v, 0, b->dtype, 2, (int64_t[2]){n, b->shape[2]}, v);
}

static moe_status bm_apply(const moe_mk *mk, const moe_mk_apply_args *a)
{
    MOE_MK_NEED(mk, grouped_gemm);
    MOE_MK_NEED(mk, activation);
    const moe_mk_prep *pp = a->prep;
    const moe_mk_weights *w = a->w;
    if (pp->format != MOE_FMT_BATCHED)
        return moe_fail(MOE_ERR_UNSUPPORTED, "experts 'batched_masked': needs Batched-format rows, got %s",
                        moe_act_format_name(pp->format));
    int64_t L = pp->num_local_experts, T = pp->max_tokens;
    const int32_t *cnt = pp->counts.data;
    for (int64_t l = 0; l < L; l++)
        if (cnt[l] < 0 || cnt[l] > T)
            return moe_fail(MOE_ERR_INVALID_ARG, "expert_num_tokens[%lld] = %d: must be in [0, max_tokens = %lld]",
                            (long long)l, cnt[l], (long long)T);
    int32_t *rows = malloc(sizeof(int32_t) * (size_t)T + 4);
    if (!rows) return moe_fail(MOE_ERR_NOMEM, "batched_masked: indices");
    moe_status st = MOE_OK;
    for (int64_t l = 0; l < L && st == MOE_OK; l++) {
        int64_t n = cnt[l];
        if (n == 0) continue;
        for (int64_t r = 0; r < n; r++) rows[r] = (int32_t)l;
        moe_tensor re, ain, h1, h2, q, s, g, y;
        memset(&re, 0, sizeof re), memset(&q, 0, sizeof q), memset(&s, 0, sizeof s), memset(&g, 0, sizeof g);
        if ((st = moe_mk_index(mk, &re, rows, n)) || (st = expert_rows(&pp->a1q, l, n, &ain)) ||
            (st = expert_rows(a->ws13, l, n, &h1)) || (st = expert_rows(a->ws2, l, n, &h2)) ||
            (st = expert_rows(a->fused_out, l, n, &y)))
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

static moe_war_kind bm_war(const moe_mk *mk)
{
    (void)mk;
    return MOE_WAR_DELEGATE;
}

const moe_mk_experts_type moe_mk_experts_batched_masked = {"batched_masked", bm_ws, bm_apply, bm_war};
