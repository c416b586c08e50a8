/* CPU backend: row movement between token-major and expert layouts. Rows
 * are copied as bytes, so results are the reference's whatever the dtype.
 *   permute_rows, expand_trtllm   output rows in parallel (gathers)
 *   unpermute_rows                rows no entry names are zeroed and the
 *                                 named ones copied, in parallel (the check
 *                                 guarantees each destination once)
 *   batched_scatter               per expert, its tokens in ascending order
 *                                 (a token counted once however many of its
 *                                 slots name the expert): a counting sort
 *                                 over the token-major pairs, then the rows
 *                                 and the zero tails copied in parallel
 *   permute_grouped               the same counting sort over the flat pair
 *                                 index, padded segments, rows in parallel
 * An expert past max_tokens in batched_scatter goes to the reference, which
 * reports it (and leaves what it leaves); so does an output that overlaps
 * its input in the three gathers and scatters (the reference's serial row
 * order then decides the result). */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "cpu.h"
#include "cpu_internal.h"
#include "stage_checks.h"

static uint8_t *row_at(const moe_tensor *t, int64_t r, size_t rb) { return (uint8_t *)t->data + (size_t)r * rb; }

moe_status moe_cpu_permute_rows(const moe_tensor *x, const moe_tensor *src, moe_tensor *out)
{
    moe_status s = moe_ref_check_permute_rows(x, src, out);
    if (s != MOE_OK) return s;
    int64_t P = out->shape[0];
    size_t rb = moe_dtype_row_bytes(x->dtype, x->shape[1]);
    const int32_t *ix = src->data;
    if (cpu_overlap(out->data, out->nbytes, x->data, x->nbytes)) /* in place: the serial order matters */
        return moe_ref_permute_rows(x, src, out);
#pragma omp parallel for schedule(static) if ((int64_t)rb * P >= CPU_PAR_MIN * 4)
    for (int64_t p = 0; p < P; p++) {
        uint8_t *o = row_at(out, p, rb);
        if (ix[p] < 0) memset(o, 0, rb);
        else memcpy(o, row_at(x, ix[p], rb), rb);
    }
    return MOE_OK;
}

moe_status moe_cpu_unpermute_rows(const moe_tensor *y, const moe_tensor *dst, moe_tensor *out)
{
    moe_status s = moe_ref_check_unpermute_rows(y, dst, out);
    if (s != MOE_OK) return s;
    int64_t P = y->shape[0], T = out->shape[0];
    size_t rb = moe_dtype_row_bytes(y->dtype, y->shape[1]);
    const int32_t *ix = dst->data;
    if (cpu_overlap(out->data, out->nbytes, y->data, y->nbytes)) /* in place: the serial order matters */
        return moe_ref_unpermute_rows(y, dst, out);
    uint8_t *named = calloc((size_t)T + 1, 1);
    if (!named) return moe_fail(MOE_ERR_NOMEM, "unpermute: %lld flags", (long long)T);
    for (int64_t p = 0; p < P; p++)
        if (ix[p] >= 0) named[ix[p]] = 1;
    int par = (int64_t)rb * (P + T) >= CPU_PAR_MIN * 4;
#pragma omp parallel if (par)
    {
#pragma omp for schedule(static) nowait
        for (int64_t t = 0; t < T; t++)
            if (!named[t]) memset(row_at(out, t, rb), 0, rb);
#pragma omp for schedule(static)
        for (int64_t p = 0; p < P; p++)
            if (ix[p] >= 0) memcpy(row_at(out, ix[p], rb), row_at(y, p, rb), rb);
    }
    free(named);
    return MOE_OK;
}

moe_status moe_cpu_expand_trtllm(const moe_tensor *x, const moe_tensor *permuted_row_to_unpermuted_row, int topk, const moe_tensor *topk_weights, moe_tensor *out, moe_tensor *permuted_scales)
{
    moe_status s = moe_ref_check_expand_trtllm(x, permuted_row_to_unpermuted_row, topk, topk_weights, out,
                                               permuted_scales);
    if (s != MOE_OK) return s;
    int64_t T = x->shape[0], P = out->shape[0];
    const int32_t *u = permuted_row_to_unpermuted_row->data;
    size_t rb = moe_dtype_row_bytes(x->dtype, x->shape[1]);
    const float *w = topk_weights ? topk_weights->data : NULL;
    float *ps = permuted_scales ? permuted_scales->data : NULL;
    if (cpu_overlap(out->data, out->nbytes, x->data, x->nbytes)) /* in place: the serial order matters */
        return moe_ref_expand_trtllm(x, permuted_row_to_unpermuted_row, topk, topk_weights, out, permuted_scales);
#pragma omp parallel for schedule(static) if ((int64_t)rb * P >= CPU_PAR_MIN * 4)
    for (int64_t p = 0; p < P; p++) {
        int64_t t = u[p] % T, j = u[p] / T;
        memcpy(row_at(out, p, rb), row_at(x, t, rb), rb);
        if (ps) ps[p] = w ? w[t * topk + j] : 1.0f;
    }
    return MOE_OK;
}

moe_status moe_cpu_batched_scatter(const moe_tensor *x, const moe_tensor *topk_ids, int first_expert, moe_tensor *out, moe_tensor *counts)
{
    moe_status s = moe_ref_check_batched_scatter(x, topk_ids, first_expert, out, counts);
    if (s != MOE_OK) return s;
    int64_t L = out->shape[0], maxt = out->shape[1], T = x->shape[0], k = topk_ids->shape[1], n = T * k;
    size_t rb = moe_dtype_row_bytes(x->dtype, x->shape[1]);
    const int32_t *ids = topk_ids->data;
    int32_t *key = malloc((size_t)(n ? n : 1) * 2 * sizeof *key);
    int64_t *cnt = malloc((size_t)(L ? L : 1) * sizeof *cnt);
    if (!key || !cnt) {
        free(key), free(cnt);
        return moe_fail(MOE_ERR_NOMEM, "batched_scatter: work space");
    }
    int32_t *rank = key + n;
    cpu_local_expert_keys(ids, T, k, first_expert, L, key);
    s = cpu_bucket_rank(key, n, (int)L, rank, cnt);
    if (s != MOE_OK) {
        free(key), free(cnt);
        return s;
    }
    for (int64_t l = 0; l < L; l++)
        if (cnt[l] > maxt) { /* the reference reports the first such expert */
            free(key), free(cnt);
            return moe_ref_batched_scatter(x, topk_ids, first_expert, out, counts);
        }
    int32_t *c = counts->data;
    int par = (int64_t)rb * L * maxt >= CPU_PAR_MIN * 4;
#pragma omp parallel if (par)
    {
#pragma omp for schedule(static) nowait
        for (int64_t i = 0; i < n; i++)
            if (key[i] >= 0) memcpy(row_at(out, key[i] * maxt + rank[i], rb), row_at(x, i / k, rb), rb);
#pragma omp for schedule(static)
        for (int64_t l = 0; l < L; l++) {
            c[l] = (int32_t)cnt[l];
            if (maxt > cnt[l]) memset(row_at(out, l * maxt + cnt[l], rb), 0, (size_t)(maxt - cnt[l]) * rb);
        }
    }
    free(key), free(cnt);
    return MOE_OK;
}

moe_status moe_cpu_permute_grouped(const moe_tensor *x, const moe_tensor *topk_ids, int first_expert, int pad_multiple, moe_tensor *out, moe_tensor *row_src, moe_tensor *counts, moe_tensor *offsets)
{
    moe_status s = moe_ref_check_permute_grouped(x, topk_ids, first_expert, pad_multiple, out, row_src, counts,
                                                 offsets);
    if (s != MOE_OK) return s;
    int64_t L = counts->shape[0], T = x->shape[0], k = topk_ids->shape[1], n = T * k, R = out->shape[0];
    size_t rb = moe_dtype_row_bytes(x->dtype, x->shape[1]);
    const int32_t *ids = topk_ids->data;
    int32_t *key = malloc((size_t)(n ? n : 1) * 2 * sizeof *key);
    int64_t *cnt = malloc((size_t)L * 2 * sizeof *cnt);
    if (!key || !cnt) {
        free(key), free(cnt);
        return moe_fail(MOE_ERR_NOMEM, "permute_grouped: work space");
    }
    int32_t *rank = key + n;
    int64_t *start = cnt + L;
#pragma omp parallel for schedule(static) if (n >= CPU_PAR_IDX_MIN)
    for (int64_t i = 0; i < n; i++) {
        int64_t l = (int64_t)ids[i] - first_expert;
        key[i] = l >= 0 && l < L ? (int32_t)l : -1;
    }
    s = cpu_bucket_rank(key, n, (int)L, rank, cnt);
    if (s != MOE_OK) {
        free(key), free(cnt);
        return s;
    }
    int32_t *src = row_src->data, *c = counts->data, *off = offsets->data;
    int64_t pos = 0;
    for (int64_t l = 0; l < L; l++) {
        start[l] = pos;
        off[l] = (int32_t)pos;
        c[l] = (int32_t)cnt[l];
        pos += (cnt[l] + pad_multiple - 1) / pad_multiple * pad_multiple;
    }
    off[L] = (int32_t)pos;
    int par = (int64_t)rb * R >= CPU_PAR_MIN * 4;
#pragma omp parallel if (par)
    {
        /* pad rows and rows past the layout: zero, source -1 */
#pragma omp for schedule(static) nowait
        for (int64_t l = 0; l < L; l++) {
            int64_t a = start[l] + cnt[l], b = l + 1 < L ? start[l + 1] : pos;
            if (b > a) memset(row_at(out, a, rb), 0, (size_t)(b - a) * rb);
            for (int64_t r = a; r < b; r++) src[r] = -1;
        }
#pragma omp for schedule(static) nowait
        for (int64_t r = pos; r < R; r++) {
            memset(row_at(out, r, rb), 0, rb);
            src[r] = -1;
        }
#pragma omp for schedule(static)
        for (int64_t i = 0; i < n; i++) {
            if (key[i] < 0) continue;
            int64_t r = start[key[i]] + rank[i];
            memcpy(row_at(out, r, rb), row_at(x, i / k, rb), rb);
            src[r] = (int32_t)i;
        }
    }
    free(key), free(cnt);
    return MOE_OK;
}
