/* Naive DP/EP: all-gather dispatch, reduce-scatter combine (vLLM
 * NaiveDPEP, anchors/vllm_modular.md 2.7). Every rank sees every token
 * and runs only its own experts (expert_map); finalize reduces the
 * weighted partial outputs across ranks and keeps its own slice. */
#include <string.h>
#include "elem.h"
#include "moe/dispatch.h"
#include "stage_checks.h"

static void copy_bytes(moe_tensor *dst, const moe_tensor *src)
{
    if (dst->nbytes) memcpy(dst->data, src->data, dst->nbytes);
}

moe_status moe_ref_check_ep_allgather_dispatch(int world_size, int num_experts, const moe_tensor *x,
                                               const moe_tensor *x_scales, const moe_tensor *topk_ids,
                                               const moe_tensor *topk_weights, const moe_tensor *gathered_x,
                                               const moe_tensor *gathered_scales, const moe_tensor *gathered_ids,
                                               const moe_tensor *gathered_weights)
{
    int R = world_size, K;
    moe_status s = moe_ep_check_world(world_size, num_experts, NULL);
    if (s != MOE_OK) return s;
    const int64_t xs[3] = {R, -1, -1};
    if ((s = moe_ep_expect(x, "x", -1, 3, xs, "[R, T, H]")) != MOE_OK) return s;
    int64_t T = x->shape[1], H = x->shape[2];
    /* the gathered ids index expert_map, so they must be real experts */
    s = moe_ep_check_ids(topk_ids, "topk_ids", R, T, num_experts,
                         "the gathered ids index expert_map and must name an expert", NULL, &K);
    if (s != MOE_OK) return s;
    const int64_t ws[3] = {R, T, K};
    if ((s = moe_ep_expect(topk_weights, "topk_weights", MOE_F32, 3, ws, "[R, T, K]")) != MOE_OK)
        return s;
    const int64_t gx[2] = {R * T, H}, gk[2] = {R * T, K};
    if ((s = moe_ep_expect(gathered_x, "gathered_x", x->dtype, 2, gx, "[R*T, H]")) != MOE_OK)
        return s;
    if ((s = moe_ep_expect(gathered_ids, "gathered_ids", MOE_I32, 2, gk, "[R*T, K]")) != MOE_OK)
        return s;
    s = moe_ep_expect(gathered_weights, "gathered_weights", MOE_F32, 2, gk, "[R*T, K]");
    if (s != MOE_OK) return s;
    if (!x_scales != !gathered_scales)
        return moe_fail(MOE_ERR_NULL, "gathered_scales: must be given exactly when x_scales is");
    if (x_scales) {
        const int64_t ss[3] = {R, T, -1};
        if ((s = moe_ep_expect(x_scales, "x_scales", -1, 3, ss, "[R, T, S]")) != MOE_OK) return s;
        const int64_t gs[2] = {R * T, x_scales->shape[2]};
        s = moe_ep_expect(gathered_scales, "gathered_scales", x_scales->dtype, 2, gs, "[R*T, S]");
        if (s != MOE_OK) return s;
    }
    return MOE_OK;
}

moe_status moe_ref_ep_allgather_dispatch(int world_size, int num_experts, const moe_tensor *x,
                                         const moe_tensor *x_scales, const moe_tensor *topk_ids,
                                         const moe_tensor *topk_weights, moe_tensor *gathered_x,
                                         moe_tensor *gathered_scales, moe_tensor *gathered_ids,
                                         moe_tensor *gathered_weights)
{
    moe_status s = moe_ref_check_ep_allgather_dispatch(world_size, num_experts, x, x_scales, topk_ids,
                                                       topk_weights, gathered_x, gathered_scales, gathered_ids,
                                                       gathered_weights);
    if (s != MOE_OK) return s;
    /* [R, T, ...] row-major is already rank-major [R*T, ...]: the gather
     * is the identity on bytes */
    copy_bytes(gathered_x, x);
    copy_bytes(gathered_ids, topk_ids);
    copy_bytes(gathered_weights, topk_weights);
    if (x_scales) copy_bytes(gathered_scales, x_scales);
    return MOE_OK;
}

moe_status moe_ref_check_ep_reduce_scatter_combine(int world_size, const moe_tensor *partial,
                                                   const moe_tensor *out)
{
    int R = world_size;
    /* only R matters here: check it as a world that owns R experts */
    moe_status s = moe_ep_check_world(world_size, world_size, NULL);
    if (s != MOE_OK) return s;
    if (!partial) return moe_fail(MOE_ERR_NULL, "partial: must not be NULL");
    if (!moe_s_is_storage(partial->dtype))
        return moe_fail(MOE_ERR_DTYPE, "partial: dtype %s, expected f32, bf16 or f16",
                        moe_dtype_get(partial->dtype) ? moe_dtype_get(partial->dtype)->name : "?");
    const int64_t ps[3] = {R, -1, -1};
    if ((s = moe_ep_expect(partial, "partial", partial->dtype, 3, ps, "[R, R*T, H]")) != MOE_OK)
        return s;
    if (partial->shape[1] % R)
        return moe_fail(MOE_ERR_SHAPE, "partial: shape[1] = %lld must be R*T (a multiple of %d)",
                        (long long)partial->shape[1], R);
    int64_t T = partial->shape[1] / R, H = partial->shape[2];
    const int64_t os[3] = {R, T, H};
    return moe_ep_expect(out, "out", partial->dtype, 3, os, "[R, T, H]");
}

moe_status moe_ref_ep_reduce_scatter_combine(int world_size, const moe_tensor *partial,
                                             moe_tensor *out)
{
    int R = world_size;
    moe_status s = moe_ref_check_ep_reduce_scatter_combine(world_size, partial, out);
    if (s != MOE_OK) return s;
    int64_t T = partial->shape[1] / R, H = partial->shape[2];
    /* f32 over source ranks ascending, one rounding: our fixed order for
     * NCCL's unspecified one */
    for (int64_t r = 0; r < R; r++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t c = 0; c < H; c++) {
                float acc = 0.0f;
                for (int64_t j = 0; j < R; j++)
                    acc += moe_s_load(partial->dtype, partial->data, ((j * R + r) * T + t) * H + c);
                moe_s_store(out->dtype, out->data, (r * T + t) * H + c, acc);
            }
    return MOE_OK;
}
