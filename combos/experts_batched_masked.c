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

/* The per-expert loop is naive_batched's: in the reference composition the
 * two upstream kernels compute the same thing in the same order, and only
 * their workspaces differ (above). naive_batched's apply works on views at
 * the start of each workspace, which these larger buffers also provide. */
static moe_status bm_apply(const moe_mk *mk, const moe_mk_apply_args *a)
{
    if (a->prep->format != MOE_FMT_BATCHED)
        return moe_fail(MOE_ERR_UNSUPPORTED, "experts 'batched_masked': needs Batched-format rows, got %s",
                        moe_act_format_name(a->prep->format));
    return moe_mk_experts_naive_batched.apply(mk, a);
}

static moe_war_kind bm_war(const moe_mk *mk)
{
    (void)mk;
    return MOE_WAR_DELEGATE;
}

const moe_mk_experts_type moe_mk_experts_batched_masked = {"batched_masked", bm_ws, bm_apply, bm_war};
