#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "elem.h"
#include "moe/reduce.h"
#include "reduce_core.h"
#include "stage_checks.h"

const char *moe_war_name(moe_war_kind w)
{
    static const char *const n[MOE_WAR_COUNT] = {"noop", "contiguous", "naive_batched", "delegate"};
    return (unsigned)w < MOE_WAR_COUNT ? n[w] : "unknown";
}

static moe_status expect_weights(const moe_tensor *w, int64_t m, int64_t k)
{
    moe_status s = moe_tensor_expect(w, "topk_weights", MOE_F32, 2);
    if (s != MOE_OK) return s;
    if (w->shape[0] != m || w->shape[1] != k)
        return moe_fail(MOE_ERR_SHAPE, "topk_weights: shape [%lld, %lld], expected [%lld, %lld]",
                        (long long)w->shape[0], (long long)w->shape[1], (long long)m, (long long)k);
    return MOE_OK;
}

static moe_status expect_out(const moe_tensor *out, int64_t m, int64_t K)
{
    moe_status s = moe_s_expect_storage(out, "out", 2);
    if (s != MOE_OK) return s;
    if (out->shape[0] != m || out->shape[1] != K)
        return moe_fail(MOE_ERR_SHAPE, "out: shape [%lld, %lld], expected [%lld, %lld]", (long long)out->shape[0],
                        (long long)out->shape[1], (long long)m, (long long)K);
    return MOE_OK;
}

moe_status moe_ref_check_war_contiguous(const moe_tensor *fused, const moe_tensor *topk_weights,
                                        int weights_on_input, moe_sum_variant sum, const moe_tensor *out)
{
    (void)weights_on_input;
    moe_status s = moe_s_expect_storage(fused, "fused", -1);
    if (s != MOE_OK) return s;
    if ((s = moe_s_expect_storage(out, "out", 2))) return s;
    if (!topk_weights) return moe_fail(MOE_ERR_NULL, "topk_weights: must not be NULL");
    int64_t M = out->shape[0], K = out->shape[1], k = topk_weights->ndim == 2 ? topk_weights->shape[1] : 0;
    if ((s = expect_weights(topk_weights, M, k))) return s;
    int shape_ok = (fused->ndim == 2 && fused->shape[0] == M * k && fused->shape[1] == K) ||
                   (fused->ndim == 3 && fused->shape[0] == M && fused->shape[1] == k && fused->shape[2] == K);
    if (!shape_ok)
        return moe_fail(MOE_ERR_SHAPE, "fused: must be [M*k, K] or [M, k, K] with M=%lld k=%lld K=%lld",
                        (long long)M, (long long)k, (long long)K);
    if (sum != MOE_SUM_AUTO && sum != MOE_SUM_FP32 && sum != MOE_SUM_STORAGE_PER_ADD)
        return moe_fail(MOE_ERR_INVALID_ARG, "sum %d: not a moe_sum_variant", (int)sum);
    return MOE_OK;
}

moe_status moe_ref_war_contiguous(const moe_tensor *fused, const moe_tensor *topk_weights, int weights_on_input,
                                  moe_sum_variant sum, moe_tensor *out)
{
    moe_status s = moe_ref_check_war_contiguous(fused, topk_weights, weights_on_input, sum, out);
    if (s != MOE_OK) return s;
    int64_t M = out->shape[0], K = out->shape[1], k = topk_weights->shape[1];
    if (sum == MOE_SUM_AUTO) sum = (k >= 2 && k <= 4) ? MOE_SUM_STORAGE_PER_ADD : MOE_SUM_FP32;
    const float *w = topk_weights->data;
    moe_dtype fd = fused->dtype;
    for (int64_t t = 0; t < M; t++) {
        for (int64_t c = 0; c < K; c++) {
            float acc = moe_war_contiguous_elem(fd, fused->data, w, t, c, k, K, weights_on_input, sum);
            moe_s_store(out->dtype, out->data, t * K + c, acc);
        }
    }
    return MOE_OK;
}

moe_status moe_ref_check_war_noop(const moe_tensor *fused, const moe_tensor *out)
{
    moe_status s = moe_s_expect_storage(fused, "fused", 2);
    if (s != MOE_OK) return s;
    return expect_out(out, fused->shape[0], fused->shape[1]);
}

moe_status moe_ref_war_noop(const moe_tensor *fused, moe_tensor *out)
{
    moe_status s = moe_ref_check_war_noop(fused, out);
    if (s != MOE_OK) return s;
    int64_t n = fused->shape[0] * fused->shape[1];
    if (fused->dtype == out->dtype) {
        memmove(out->data, fused->data, out->nbytes);
        return MOE_OK;
    }
    for (int64_t i = 0; i < n; i++) moe_s_store(out->dtype, out->data, i, moe_s_load(fused->dtype, fused->data, i));
    return MOE_OK;
}

moe_status moe_ref_check_war_naive_batched(const moe_tensor *fused, const moe_tensor *topk_ids,
                                           const moe_tensor *topk_weights, int first_expert,
                                           int weights_on_input, const moe_tensor *out)
{
    moe_status s = moe_s_expect_storage(fused, "fused", 3);
    if (s != MOE_OK) return s;
    if ((s = moe_tensor_expect(topk_ids, "topk_ids", MOE_I32, 2))) return s;
    int64_t M = topk_ids->shape[0], k = topk_ids->shape[1], K = fused->shape[2];
    if ((s = expect_out(out, M, K))) return s;
    if (!weights_on_input && (s = expect_weights(topk_weights, M, k))) return s;
    if (first_expert < 0) return moe_fail(MOE_ERR_INVALID_ARG, "first_expert %d: must be >= 0", first_expert);
    return MOE_OK;
}

moe_status moe_ref_war_naive_batched(const moe_tensor *fused, const moe_tensor *topk_ids,
                                     const moe_tensor *topk_weights, int first_expert, int weights_on_input,
                                     moe_tensor *out)
{
    moe_status s = moe_ref_check_war_naive_batched(fused, topk_ids, topk_weights, first_expert, weights_on_input,
                                                   out);
    if (s != MOE_OK) return s;
    int64_t M = topk_ids->shape[0], k = topk_ids->shape[1], L = fused->shape[0], maxt = fused->shape[1],
            K = fused->shape[2];
    const int32_t *ids = topk_ids->data;
    const float *w = weights_on_input ? NULL : topk_weights->data;
    memset(out->data, 0, out->nbytes);
    for (int64_t l = 0; l < L; l++) {
        int64_t n = 0;
        for (int64_t t = 0; t < M; t++) {
            int64_t slot = -1;
            for (int64_t j = 0; j < k && slot < 0; j++)
                if (ids[t * k + j] == first_expert + l) slot = j;
            if (slot < 0) continue;
            if (n == maxt)
                return moe_fail(MOE_ERR_SHAPE, "fused: expert %lld has more than max_tokens = %lld tokens",
                                (long long)(first_expert + l), (long long)maxt);
            float wt = w ? w[t * k + slot] : 1.0f;
            for (int64_t c = 0; c < K; c++) {
                float y = moe_s_load(fused->dtype, fused->data, (l * maxt + n) * K + c);
                float o = moe_s_load(out->dtype, out->data, t * K + c);
                moe_s_store(out->dtype, out->data, t * K + c, o + y * wt);
            }
            n++;
        }
    }
    return MOE_OK;
}

moe_status moe_ref_check_finalize_trtllm(const moe_tensor *y, const moe_tensor *map, const moe_tensor *topk_ids,
                                         const moe_tensor *topk_weights, const moe_tensor *bias, int first_expert,
                                         int num_local_experts, const moe_tensor *out)
{
    moe_status s = moe_s_expect_storage(y, "y", 2);
    if (s != MOE_OK) return s;
    if ((s = moe_tensor_expect(topk_ids, "topk_ids", MOE_I32, 2))) return s;
    int64_t T = topk_ids->shape[0], k = topk_ids->shape[1], P = y->shape[0], K = y->shape[1];
    if ((s = expect_out(out, T, K))) return s;
    if ((s = moe_tensor_expect(map, "unpermuted_row_to_permuted_row", MOE_I32, 1))) return s;
    if (map->shape[0] != T * k)
        return moe_fail(MOE_ERR_SHAPE, "unpermuted_row_to_permuted_row: %lld entries, expected k*T = %lld",
                        (long long)map->shape[0], (long long)(T * k));
    if (topk_weights && (s = expect_weights(topk_weights, T, k))) return s;
    if (first_expert < 0 || num_local_experts <= 0)
        return moe_fail(MOE_ERR_INVALID_ARG, "first_expert %d, num_local_experts %d: need >= 0 and > 0",
                        first_expert, num_local_experts);
    if (bias) {
        if ((s = moe_tensor_expect(bias, "bias", MOE_F32, 2))) return s;
        if (bias->shape[0] != num_local_experts || bias->shape[1] != K)
            return moe_fail(MOE_ERR_SHAPE, "bias: shape [%lld, %lld], expected [%d, %lld]", (long long)bias->shape[0],
                            (long long)bias->shape[1], num_local_experts, (long long)K);
    }
    const int32_t *ids = topk_ids->data, *pr = map->data;
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < k; j++) {
            int e = ids[t * k + j] - first_expert;
            if (e < 0 || e >= num_local_experts) continue;
            int32_t p = pr[j * T + t];
            if (p < 0 || p >= P)
                return moe_fail(MOE_ERR_INVALID_ARG,
                                "unpermuted_row_to_permuted_row[%lld] = %d: a local slot needs a row of y (< %lld)",
                                (long long)(j * T + t), p, (long long)P);
        }
    return MOE_OK;
}

moe_status moe_ref_finalize_trtllm(const moe_tensor *y, const moe_tensor *map, const moe_tensor *topk_ids,
                                   const moe_tensor *topk_weights, const moe_tensor *bias, int first_expert,
                                   int num_local_experts, moe_tensor *out)
{
    moe_status s = moe_ref_check_finalize_trtllm(y, map, topk_ids, topk_weights, bias, first_expert,
                                                 num_local_experts, out);
    if (s != MOE_OK) return s;
    int64_t T = topk_ids->shape[0], k = topk_ids->shape[1], K = y->shape[1];
    const int32_t *ids = topk_ids->data, *pr = map->data;
    const float *w = topk_weights ? topk_weights->data : NULL, *b = bias ? bias->data : NULL;
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < K; c++) {
            float acc = moe_finalize_trtllm_elem(y->dtype, y->data, ids, pr, w, b, t, c, T, k, K, first_expert,
                                                 num_local_experts);
            moe_s_store(out->dtype, out->data, t * K + c, acc);
        }
    return MOE_OK;
}
