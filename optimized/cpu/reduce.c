/* CPU backend: weight and reduce. Every output row is one token's, so
 * tokens run in parallel (static chunks); inside a token each column sees
 * the reference's operations in the reference's order:
 *   war_contiguous     slots j = 0..k-1: round(v * w) to the fused dtype
 *                      unless weights_on_input, acc + v, per-add rounding
 *                      for the storage-sum variant; one final store
 *   war_noop           a copy (parallel chunks), or a parallel dtype change
 *   war_naive_batched  the token's local experts in ascending order, each
 *                      its row in that expert's block (the token's rank among
 *                      the expert's tokens: a counting sort over the pairs),
 *                      out = round(out + y * w) per expert as the reference's
 *                      per-expert read-modify-write
 *   finalize_trtllm    acc = fmaf(w, y + bias, acc) over local slots in order
 * Inputs the reference refuses only while it writes (an expert past
 * max_tokens), and outputs that overlap their input (where its serial
 * order decides the result), go to the reference. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "cpu.h"
#include "cpu_internal.h"
#include "stage_checks.h"

moe_status moe_cpu_war_contiguous(const moe_tensor *fused, const moe_tensor *topk_weights, int weights_on_input, moe_sum_variant sum, moe_tensor *out)
{
    moe_status s = moe_ref_check_war_contiguous(fused, topk_weights, weights_on_input, sum, out);
    if (s != MOE_OK) return s;
    int64_t M = out->shape[0], K = out->shape[1], k = topk_weights->shape[1];
    if (sum == MOE_SUM_AUTO) sum = (k >= 2 && k <= 4) ? MOE_SUM_STORAGE_PER_ADD : MOE_SUM_FP32;
    if (cpu_overlap(out->data, out->nbytes, fused->data, fused->nbytes))
        return moe_ref_war_contiguous(fused, topk_weights, weights_on_input, sum, out);
    const float *w = topk_weights->data;
    moe_dtype fd = fused->dtype, od = out->dtype;
    int per_add = sum == MOE_SUM_STORAGE_PER_ADD, failed = 0;
#pragma omp parallel if (M * K * k >= CPU_PAR_MIN)
    {
        float *acc = malloc((size_t)(K ? K : 1) * 2 * sizeof *acc);
        if (!acc) {
#pragma omp atomic write
            failed = 1;
        }
        float *v = acc + K;
#pragma omp for schedule(static)
        for (int64_t t = 0; t < M; t++) {
            if (!acc) continue;
            for (int64_t c = 0; c < K; c++) acc[c] = 0.0f;
            for (int64_t j = 0; j < k; j++) {
                cpu_load_row(fd, fused->data, (t * k + j) * K, K, v);
                float wt = w[t * k + j];
                if (!weights_on_input)
                    for (int64_t c = 0; c < K; c++) v[c] = cpu_round_to(fd, v[c] * wt);
                if (per_add)
                    for (int64_t c = 0; c < K; c++) acc[c] = cpu_round_to(fd, acc[c] + v[c]);
                else
                    for (int64_t c = 0; c < K; c++) acc[c] = acc[c] + v[c];
            }
            cpu_store_row(od, out->data, t * K, K, acc);
        }
        free(acc);
    }
    if (failed) return moe_fail(MOE_ERR_NOMEM, "war_contiguous: per-thread rows");
    return MOE_OK;
}

moe_status moe_cpu_war_noop(const moe_tensor *fused, moe_tensor *out)
{
    moe_status s = moe_ref_check_war_noop(fused, out);
    if (s != MOE_OK) return s;
    if (cpu_overlap(out->data, out->nbytes, fused->data, fused->nbytes)) /* memmove or a serial walk */
        return moe_ref_war_noop(fused, out);
    if (fused->dtype == out->dtype) {
        cpu_memcpy(out->data, fused->data, out->nbytes);
        return MOE_OK;
    }
    int64_t n = fused->shape[0] * fused->shape[1];
    moe_dtype fd = fused->dtype, od = out->dtype;
#pragma omp parallel for schedule(static) if (n >= CPU_PAR_IDX_MIN)
    for (int64_t i = 0; i < n; i++) cpu_store(od, out->data, i, cpu_load(fd, fused->data, i));
    return MOE_OK;
}

moe_status moe_cpu_war_naive_batched(const moe_tensor *fused, const moe_tensor *topk_ids, const moe_tensor *topk_weights, int first_expert, int weights_on_input, moe_tensor *out)
{
    moe_status s = moe_ref_check_war_naive_batched(fused, topk_ids, topk_weights, first_expert, weights_on_input,
                                                   out);
    if (s != MOE_OK) return s;
    int64_t M = topk_ids->shape[0], k = topk_ids->shape[1], L = fused->shape[0], maxt = fused->shape[1],
            K = fused->shape[2], n = M * k;
    if (cpu_overlap(out->data, out->nbytes, fused->data, fused->nbytes))
        return moe_ref_war_naive_batched(fused, topk_ids, topk_weights, first_expert, weights_on_input, out);
    const int32_t *ids = topk_ids->data;
    const float *w = weights_on_input ? NULL : topk_weights->data;
    int32_t *key = malloc((size_t)(n ? n : 1) * 2 * sizeof *key);
    int64_t *cnt = malloc((size_t)(L ? L : 1) * sizeof *cnt);
    if (!key || !cnt) {
        free(key), free(cnt);
        return moe_fail(MOE_ERR_NOMEM, "war_naive_batched: work space");
    }
    int32_t *rank = key + n;
    cpu_local_expert_keys(ids, M, k, first_expert, L, key);
    s = cpu_bucket_rank(key, n, (int)L, rank, cnt);
    if (s == MOE_OK)
        for (int64_t l = 0; l < L; l++)
            if (cnt[l] > maxt) { /* the reference reports the first such expert */
                free(key), free(cnt);
                return moe_ref_war_naive_batched(fused, topk_ids, topk_weights, first_expert, weights_on_input,
                                                 out);
            }
    if (s != MOE_OK) {
        free(key), free(cnt);
        return s;
    }
    moe_dtype fd = fused->dtype, od = out->dtype;
    int failed = 0;
#pragma omp parallel if (n * K >= CPU_PAR_MIN)
    {
        float *acc = malloc((size_t)(K ? K : 1) * 2 * sizeof *acc);
        int64_t *slot = malloc((size_t)(k ? k : 1) * sizeof *slot);
        if (!acc || !slot) {
#pragma omp atomic write
            failed = 1;
        }
        float *y = acc + K;
#pragma omp for schedule(static)
        for (int64_t t = 0; t < M; t++) {
            if (!acc || !slot) continue;
            /* the token's keyed slots, by local expert ascending */
            int ns = 0;
            for (int64_t j = 0; j < k; j++) {
                if (key[t * k + j] < 0) continue;
                int i = ns++;
                while (i > 0 && key[t * k + slot[i - 1]] > key[t * k + j]) {
                    slot[i] = slot[i - 1];
                    i--;
                }
                slot[i] = j;
            }
            for (int64_t c = 0; c < K; c++) acc[c] = 0.0f;
            for (int i = 0; i < ns; i++) {
                int64_t j = slot[i], l = key[t * k + j];
                float wt = w ? w[t * k + j] : 1.0f;
                cpu_load_row(fd, fused->data, (l * maxt + rank[t * k + j]) * K, K, y);
                /* out = round(out + y * w): the value the reference stores and reads back */
                for (int64_t c = 0; c < K; c++) acc[c] = cpu_round_to(od, acc[c] + y[c] * wt);
            }
            cpu_store_row(od, out->data, t * K, K, acc);
        }
        free(acc);
        free(slot);
    }
    free(key), free(cnt);
    if (failed) return moe_fail(MOE_ERR_NOMEM, "war_naive_batched: per-thread rows");
    return MOE_OK;
}

moe_status moe_cpu_finalize_trtllm(const moe_tensor *y, const moe_tensor *unpermuted_row_to_permuted_row, const moe_tensor *topk_ids, const moe_tensor *topk_weights, const moe_tensor *bias, int first_expert, int num_local_experts, moe_tensor *out)
{
    moe_status s = moe_ref_check_finalize_trtllm(y, unpermuted_row_to_permuted_row, topk_ids, topk_weights, bias,
                                                 first_expert, num_local_experts, out);
    if (s != MOE_OK) return s;
    int64_t T = topk_ids->shape[0], k = topk_ids->shape[1], K = y->shape[1];
    if (cpu_overlap(out->data, out->nbytes, y->data, y->nbytes))
        return moe_ref_finalize_trtllm(y, unpermuted_row_to_permuted_row, topk_ids, topk_weights, bias, first_expert,
                                       num_local_experts, out);
    const int32_t *ids = topk_ids->data, *pr = unpermuted_row_to_permuted_row->data;
    const float *w = topk_weights ? topk_weights->data : NULL, *b = bias ? bias->data : NULL;
    moe_dtype yd = y->dtype, od = out->dtype;
    int failed = 0;
#pragma omp parallel if (T * K * k >= CPU_PAR_MIN)
    {
        float *acc = malloc((size_t)(K ? K : 1) * 2 * sizeof *acc);
        if (!acc) {
#pragma omp atomic write
            failed = 1;
        }
        float *v = acc + K;
#pragma omp for schedule(static)
        for (int64_t t = 0; t < T; t++) {
            if (!acc) continue;
            for (int64_t c = 0; c < K; c++) acc[c] = 0.0f;
            for (int64_t j = 0; j < k; j++) {
                int e = ids[t * k + j] - first_expert;
                if (e < 0 || e >= num_local_experts) continue;
                cpu_load_row(yd, y->data, (int64_t)pr[j * T + t] * K, K, v);
                if (b)
                    for (int64_t c = 0; c < K; c++) v[c] = v[c] + b[e * K + c];
                cpu_fma_row(acc, w ? w[t * k + j] : 1.0f, v, K, 0);
            }
            cpu_store_row(od, out->data, t * K, K, acc);
        }
        free(acc);
    }
    if (failed) return moe_fail(MOE_ERR_NOMEM, "finalize_trtllm: per-thread rows");
    return MOE_OK;
}
