/* Rules and loops the dispatch reference files share (include/moe/dispatch.h):
 * world and node checks, argument checks, the batched placement of
 * DeepEP-LL and pplx, and their common weighted combine. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dispatch_core.h"
#include "elem.h"
#include "moe/dispatch.h"

moe_status moe_ep_check_world(int world_size, int num_experts, int *experts_per_rank)
{
    if (world_size != 1 && world_size != 2 && world_size != 4 && world_size != 8)
        return moe_fail(MOE_ERR_INVALID_ARG, "world_size %d: must be 1, 2, 4 or 8", world_size);
    if (num_experts <= 0)
        return moe_fail(MOE_ERR_INVALID_ARG, "num_experts %d: must be > 0", num_experts);
    /* DeepEP asserts E % R == 0 and every backend here owns contiguously (A.1) */
    if (num_experts % world_size)
        return moe_fail(MOE_ERR_INVALID_ARG,
                        "num_experts %d: must be divisible by world_size %d (E/R experts per rank)",
                        num_experts, world_size);
    if (experts_per_rank) *experts_per_rank = num_experts / world_size;
    return MOE_OK;
}

moe_status moe_ep_check_nodes(int world_size, int num_ranks_per_node, int *num_nodes)
{
    if (num_ranks_per_node < 1 || num_ranks_per_node > world_size ||
        world_size % num_ranks_per_node)
        return moe_fail(MOE_ERR_INVALID_ARG,
                        "num_ranks_per_node %d: must divide world_size %d (whole nodes)",
                        num_ranks_per_node, world_size);
    if (num_nodes) *num_nodes = world_size / num_ranks_per_node;
    return MOE_OK;
}

static void shape_str(char *buf, size_t n, int ndim, const int64_t *shape)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < ndim && used < n; i++) {
        int w = shape[i] < 0
                    ? snprintf(buf + used, n - used, "%s*", i ? ", " : "")
                    : snprintf(buf + used, n - used, "%s%lld", i ? ", " : "", (long long)shape[i]);
        if (w < 0) return;
        used += (size_t)w;
    }
}

moe_status moe_ep_expect(const moe_tensor *t, const char *arg, int dtype, int ndim,
                         const int64_t *shape, const char *layout)
{
    if (!t) return moe_fail(MOE_ERR_NULL, "%s: must not be NULL", arg);
    if (t->device.kind != MOE_DEVICE_HOST)
        return moe_fail(MOE_ERR_UNSUPPORTED,
                        "%s: a device tensor; the reference reads host tensors", arg);
    if (dtype >= 0) {
        moe_status s = moe_tensor_expect(t, arg, (moe_dtype)dtype, ndim);
        if (s != MOE_OK) return s;
    } else {
        if (!moe_dtype_get(t->dtype) || moe_dtype_is_packed(t->dtype))
            return moe_fail(MOE_ERR_DTYPE,
                            "%s: dtype %s: rows move as whole elements, packed "
                            "dtypes are not accepted",
                            arg, moe_dtype_get(t->dtype) ? moe_dtype_get(t->dtype)->name : "?");
        if (t->ndim != ndim)
            return moe_fail(MOE_ERR_SHAPE, "%s: rank %d, expected %d", arg, t->ndim, ndim);
    }
    for (int i = 0; i < ndim; i++) {
        if (shape[i] >= 0 && t->shape[i] != shape[i]) {
            char got[96], want[96];
            shape_str(got, sizeof got, ndim, t->shape);
            shape_str(want, sizeof want, ndim, shape);
            return moe_fail(MOE_ERR_SHAPE, "%s: shape [%s], expected %s = [%s]", arg, got, layout,
                            want);
        }
    }
    if (!t->data && moe_tensor_numel(t) > 0) return moe_fail(MOE_ERR_NULL, "%s: has no data", arg);
    return MOE_OK;
}

moe_status moe_ep_check_ids(const moe_tensor *ids, const char *arg, int64_t d0, int64_t T,
                            int num_experts, const char *no_neg1, const char *distinct, int *topk)
{
    const int64_t shape[3] = {d0, T, -1};
    moe_status s = moe_ep_expect(ids, arg, MOE_I32, 3, shape, "[R, T, K]");
    if (s != MOE_OK) return s;
    int64_t K = ids->shape[2];
    if (K < 1 || K > num_experts)
        return moe_fail(MOE_ERR_SHAPE, "%s: topk %lld (shape[2]): must be in 1..num_experts (%d)",
                        arg, (long long)K, num_experts);
    const int32_t *v = (const int32_t *)ids->data;
    int64_t rows = ids->shape[0] * ids->shape[1];
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t k = 0; k < K; k++) {
            int32_t e = v[r * K + k];
            long long a = (long long)(r / ids->shape[1]), b = (long long)(r % ids->shape[1]);
            if (e == -1 && no_neg1)
                return moe_fail(MOE_ERR_INVALID_ARG, "%s[%lld][%lld][%lld] = -1: %s", arg, a, b,
                                (long long)k, no_neg1);
            if (e < -1 || e >= num_experts)
                return moe_fail(MOE_ERR_INVALID_ARG,
                                "%s[%lld][%lld][%lld] = %d: expert ids must be in [0, %d)%s", arg,
                                a, b, (long long)k, (int)e, num_experts,
                                no_neg1 ? "" : " or -1 (no expert)");
            if (distinct && e >= 0) {
                for (int64_t j = 0; j < k; j++) {
                    if (v[r * K + j] == e)
                        return moe_fail(MOE_ERR_INVALID_ARG,
                                        "%s[%lld][%lld]: expert %d in slots %lld and %lld: %s", arg,
                                        a, b, (int)e, (long long)j, (long long)k, distinct);
                }
            }
        }
    }
    *topk = (int)K;
    return MOE_OK;
}

int moe_ep_token_in_rank(const int32_t *ids, int K, int experts_per_rank, int rank)
{
    return moe_ep_in_rank_core(ids, K, experts_per_rank, rank);
}

void moe_ep_batched_positions(const int32_t *ids, int64_t G, int64_t T, int K, int dp,
                              int num_experts, int32_t *pos, int64_t *count)
{
    memset(count, 0, (size_t)num_experts * sizeof *count);
    /* sending rank g*dp + i holds tokens i, i+dp, ... of group g (pplx DP
     * groups, D); DeepEP-LL is dp = 1. Ranks ascending, then tokens. */
    for (int64_t g = 0; g < G; g++)
        for (int i = 0; i < dp; i++)
            for (int64_t t = i; t < T; t += dp)
                for (int k = 0; k < K; k++) {
                    int64_t p = (g * T + t) * K + k;
                    int32_t e = ids[p];
                    pos[p] = e < 0 ? -1 : (int32_t)count[e]++;
                }
}

moe_status moe_ep_combine_weighted(const moe_tensor *y, const int32_t *row_of,
                                   const moe_tensor *topk_ids, const moe_tensor *topk_weights,
                                   moe_tensor *out, const char *handle)
{
    int64_t rows = y->shape[2], H = y->shape[3];
    int64_t G = topk_ids->shape[0], T = topk_ids->shape[1];
    int K = (int)topk_ids->shape[2];
    const int32_t *ids = (const int32_t *)topk_ids->data;
    const float *w = (const float *)topk_weights->data;
    /* check the whole handle first so an error leaves no half-written token */
    for (int64_t gt = 0; gt < G * T; gt++)
        for (int k = 0; k < K; k++) {
            int32_t e = ids[gt * K + k];
            if (e >= 0 && row_of[e * G * T + gt] < 0)
                return moe_fail(MOE_ERR_INVALID_ARG,
                                "%s: token %lld of group %lld selects expert %d (slot %d) but "
                                "the handle holds no row for it",
                                handle, (long long)(gt % T), (long long)(gt / T), (int)e, k);
        }
    /* each channel: k = 0..K-1 in order (dispatch_core.h, shared with CUDA) */
    for (int64_t gt = 0; gt < G * T; gt++)
        for (int64_t c = 0; c < H; c++)
            moe_s_store(out->dtype, out->data, gt * H + c,
                        moe_ep_combine_weighted_channel(y->dtype, y->data, rows, H, ids, w, K,
                                                        row_of, G * T, gt, c));
    return MOE_OK;
}
