/* deepep_ll [vLLM DeepEPLLPrepareAndFinalize, anchors vllm_modular.md 2.6,
 * 2.7; DeepEP low-latency mode, dispatch_sorting.md section 0 facts 3-4,
 * A.5, A.6], Batched format, expert parallel with simulated ranks, async:
 * prepare: weights on the input (topk 1) as noep on each source rank
 *   (round(x * w) in x's dtype; the combine then gets weights of ones, as
 *   vLLM passes); ops->deepep_ll_dispatch with T_max = cfg.max_tokens (or
 *   T) into, per receiving rank j, [E_loc, R*T_max, H] rows with counts
 *   [E_loc] (each expert by ascending (source rank, token): the reference's
 *   fixed order for upstream's atomics). bf16: bit copies, no quantization
 *   (the registry admits bf16 and the block scheme only). The block scheme
 *   fp8_wblock128_agroup128 uses the LL kernel's own per-128 fp8 cast
 *   (use_fp8, default scales: amax floor 1e-4, q = e4m3(x * (448/amax)),
 *   scale_inv = amax * f32(1/448)) -- not the scheme's per_token_group
 *   rule (q = e4m3(x / (amax/448))); the two agree bit for bit whenever
 *   each group's amax is 448 * 2^m (then 448/amax and amax/448 are exact
 *   and f32(448 * f32(1/448)) = 1). Expert l's count[l] rows get the
 *   received f32 scale rows [count, H/128] (row-major here; upstream's
 *   strides are column-major, a layout detail).
 * experts: the batched types (naive_batched, batched_masked) on rank j's
 *   local weights, fused output [E_loc, R*T_max, H] in x's dtype.
 * finalize: Delegate resolves to the combine (vLLM asserts Delegate): the
 *   driver copies each rank's fused output, unweighted, into the combine
 *   input y [R, E_loc, R*T_max, H]; ops->deepep_ll_combine then gives
 *   out[r, t] = round(acc), acc = fmaf(y_k, w_k, acc) from +0 over k in
 *   slot order (A.6). Against the single-rank oracle (per slot fl32(w*y),
 *   f32 sum, one rounding): the same one final rounding; with top-1 the
 *   single fmaf from +0 is fl32(w*y), bit-exact; top-k differs only by the
 *   fma chain vs product-then-add roundings (tests derive the bound). */
#include <stdlib.h>
#include <string.h>
#include "moe/modular.h"

typedef struct {
    moe_deepep_ll_config cfg;
    moe_tensor xs, rx, rs, cnt, src, range, y, ones;
    const moe_tensor *ids, *wts; /* the caller's, alive until the combine */
} ll_state;

static void ll_release(const moe_mk *mk, void *p)
{
    ll_state *s = p;
    if (!s) return;
    moe_tensor *ts[] = {&s->xs, &s->rx, &s->rs, &s->cnt, &s->src, &s->range, &s->y, &s->ones};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) moe_mk_free(mk, ts[i]);
    free(s);
}

static moe_status ll_prepare(const moe_mk *mk, const moe_tensor *x, const moe_tensor *topk_ids,
                             const moe_tensor *topk_weights, moe_mk_rank *ranks, void **state)
{
    MOE_MK_NEED(mk, deepep_ll_dispatch);
    MOE_MK_NEED(mk, copy);
    int R = mk->cfg.world_size, E = mk->cfg.num_experts, El = E / R;
    int64_t T = x->shape[1], H = x->shape[2], k = topk_ids->shape[2];
    int64_t Tmax = mk->cfg.max_tokens ? mk->cfg.max_tokens : T;
    if (T > Tmax)
        return moe_fail(MOE_ERR_INVALID_ARG, "deepep_ll: T = %lld tokens per rank exceed cfg.max_tokens %lld "
                        "(num_max_dispatch_tokens_per_rank)", (long long)T, (long long)Tmax);
    if (x->dtype != MOE_BF16 && x->dtype != MOE_F32)
        return moe_fail(MOE_ERR_DTYPE, "deepep_ll: x must be bf16 (or f32), got %s", moe_dtype_get(x->dtype)->name);
    int fp8 = mk->act_spec.gran == MOE_GRAN_GROUP;
    if (mk->act_spec.gran != MOE_GRAN_NONE && !fp8)
        return moe_fail(MOE_ERR_UNSUPPORTED, "deepep_ll: scheme %s: only bf16 and the per-128 fp8 cast",
                        moe_scheme_name(mk->cfg.scheme));
    ll_state *s = calloc(1, sizeof *s);
    if (!s) return moe_fail(MOE_ERR_NOMEM, "deepep_ll: state");
    *state = s;
    s->cfg = (moe_deepep_ll_config){R, E, Tmax, fp8, 0, 0};
    s->ids = topk_ids, s->wts = topk_weights;
    moe_status st;
    const moe_tensor *xs = x;
    if (mk->cfg.weights_on_input) {
        if ((st = moe_mk_alloc(mk, &s->xs, x->dtype, 3, (int64_t[3]){R, T, H})) ||
            (st = moe_mk_ones(mk, &s->ones, R, T, k)))
            return st;
        for (int r = 0; r < R; r++) {
            moe_tensor xr, wr, dst, xw;
            memset(&xw, 0, sizeof xw);
            if ((st = moe_mk_rank_rows(x, r, T, &xr)) || (st = moe_mk_rank_rows(topk_weights, r, T, &wr)) ||
                (st = moe_mk_rank_rows(&s->xs, r, T, &dst)) || (st = moe_mk_weigh_input(mk, &xr, &wr, &xw)) ||
                (st = mk->ops->copy(&dst, &xw))) {
                moe_mk_free(mk, &xw);
                return st;
            }
            moe_mk_free(mk, &xw);
        }
        xs = &s->xs;
    }
    int64_t rows = moe_deepep_ll_rows(R, Tmax), S = H / MOE_DEEPEP_LL_GROUP;
    if (rows < 0) return moe_fail(MOE_ERR_INVALID_ARG, "deepep_ll: world %d, T_max %lld", R, (long long)Tmax);
    if ((st = moe_mk_alloc(mk, &s->rx, fp8 ? MOE_E4M3 : x->dtype, 4, (int64_t[4]){R, El, rows, H})) ||
        (fp8 && (st = moe_mk_alloc(mk, &s->rs, MOE_F32, 4, (int64_t[4]){R, El, rows, S}))) ||
        (st = moe_mk_alloc2(mk, &s->cnt, MOE_I32, R, El)) ||
        (st = moe_mk_alloc(mk, &s->src, MOE_I32, 3, (int64_t[3]){R, El, rows})) ||
        (st = moe_mk_alloc(mk, &s->range, MOE_I64, 3, (int64_t[3]){R, El, R})) ||
        (st = moe_mk_alloc(mk, &s->y, x->dtype, 4, (int64_t[4]){R, El, rows, H})))
        return st;
    moe_deepep_ll_recv rv = {&s->rx, fp8 ? &s->rs : NULL, &s->cnt, &s->src, &s->range};
    if ((st = mk->ops->deepep_ll_dispatch(&s->cfg, xs, topk_ids, &rv))) return st;
    return moe_mk_batched_rank_views(ranks, R, El, rows, H, x->dtype, &s->rx, &s->cnt, fp8 ? &s->rs : NULL, S, &s->y, "deepep_ll");
}

static moe_status ll_combine(const moe_mk *mk, void *p, moe_tensor *out)
{
    MOE_MK_NEED(mk, deepep_ll_combine);
    ll_state *s = p;
    const moe_tensor *wts = mk->cfg.weights_on_input ? &s->ones : s->wts;
    return mk->ops->deepep_ll_combine(&s->cfg, &s->y, &s->src, &s->range, s->ids, wts, out);
}

const moe_mk_pf_type moe_mk_pf_deepep_ll = {
    .name = "deepep_ll", .ep_prepare = ll_prepare, .ep_combine = ll_combine, .ep_release = ll_release};
