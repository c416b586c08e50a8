#include <stdlib.h>
#include <string.h>
#include "moe/permute.h"
#include "stage_checks.h"

static moe_status expect_rows(const moe_tensor *t, const char *arg)
{
    if (!t) return moe_fail(MOE_ERR_NULL, "%s: must not be NULL", arg);
    return moe_tensor_expect(t, arg, t->dtype, 2);
}

static moe_status expect_index(const moe_tensor *t, const char *arg, int64_t n)
{
    moe_status s = moe_tensor_expect(t, arg, MOE_I32, 1);
    if (s != MOE_OK) return s;
    if (t->shape[0] != n)
        return moe_fail(MOE_ERR_SHAPE, "%s: %lld entries, expected %lld", arg, (long long)t->shape[0],
                        (long long)n);
    return MOE_OK;
}

static moe_status same_row_type(const moe_tensor *a, const char *an, const moe_tensor *b, const char *bn)
{
    if (a->dtype != b->dtype)
        return moe_fail(MOE_ERR_DTYPE, "%s: dtype %s differs from %s's %s", bn, moe_dtype_get(b->dtype)->name,
                        an, moe_dtype_get(a->dtype)->name);
    if (a->shape[a->ndim - 1] != b->shape[b->ndim - 1])
        return moe_fail(MOE_ERR_SHAPE, "%s: row length %lld differs from %s's %lld", bn,
                        (long long)b->shape[b->ndim - 1], an, (long long)a->shape[a->ndim - 1]);
    return MOE_OK;
}

moe_status moe_ref_check_permute_rows(const moe_tensor *x, const moe_tensor *src, const moe_tensor *out)
{
    moe_status s;
    if ((s = expect_rows(x, "x")) || (s = expect_rows(out, "out")) || (s = same_row_type(x, "x", out, "out")) ||
        (s = expect_index(src, "src", out->shape[0])))
        return s;
    int64_t T = x->shape[0], P = out->shape[0];
    const int32_t *ix = src->data;
    for (int64_t p = 0; p < P; p++)
        if (ix[p] < -1 || ix[p] >= T)
            return moe_fail(MOE_ERR_INVALID_ARG, "src[%lld] = %d: must be -1 or a row of x (< %lld)",
                            (long long)p, ix[p], (long long)T);
    return MOE_OK;
}

moe_status moe_ref_permute_rows(const moe_tensor *x, const moe_tensor *src, moe_tensor *out)
{
    moe_status s = moe_ref_check_permute_rows(x, src, out);
    if (s != MOE_OK) return s;
    int64_t P = out->shape[0];
    size_t rb = moe_dtype_row_bytes(x->dtype, x->shape[1]);
    const int32_t *ix = src->data;
    for (int64_t p = 0; p < P; p++) {
        uint8_t *o = (uint8_t *)out->data + (size_t)p * rb;
        if (ix[p] < 0) memset(o, 0, rb);
        else memcpy(o, (const uint8_t *)x->data + (size_t)ix[p] * rb, rb);
    }
    return MOE_OK;
}

moe_status moe_ref_check_unpermute_rows(const moe_tensor *y, const moe_tensor *dst, const moe_tensor *out)
{
    moe_status s;
    if ((s = expect_rows(y, "y")) || (s = expect_rows(out, "out")) || (s = same_row_type(y, "y", out, "out")) ||
        (s = expect_index(dst, "dst", y->shape[0])))
        return s;
    int64_t P = y->shape[0], T = out->shape[0];
    const int32_t *ix = dst->data;
    for (int64_t p = 0; p < P; p++)
        if (ix[p] < -1 || ix[p] >= T)
            return moe_fail(MOE_ERR_INVALID_ARG, "dst[%lld] = %d: must be -1 or a row of out (< %lld)",
                            (long long)p, ix[p], (long long)T);
    /* a destination named twice would make the result order-dependent */
    uint8_t *seen = calloc((size_t)T + 1, 1);
    if (!seen) return moe_fail(MOE_ERR_NOMEM, "unpermute: %lld flags", (long long)T);
    for (int64_t p = 0; p < P; p++) {
        if (ix[p] < 0) continue;
        if (seen[ix[p]]++) {
            free(seen);
            return moe_fail(MOE_ERR_INVALID_ARG, "dst[%lld] = %d: row already named by an earlier entry",
                            (long long)p, ix[p]);
        }
    }
    free(seen);
    return MOE_OK;
}

moe_status moe_ref_unpermute_rows(const moe_tensor *y, const moe_tensor *dst, moe_tensor *out)
{
    moe_status s = moe_ref_check_unpermute_rows(y, dst, out);
    if (s != MOE_OK) return s;
    int64_t P = y->shape[0];
    size_t rb = moe_dtype_row_bytes(y->dtype, y->shape[1]);
    const int32_t *ix = dst->data;
    memset(out->data, 0, out->nbytes);
    for (int64_t p = 0; p < P; p++)
        if (ix[p] >= 0)
            memcpy((uint8_t *)out->data + (size_t)ix[p] * rb, (const uint8_t *)y->data + (size_t)p * rb, rb);
    return MOE_OK;
}

static moe_status expect_topk(const moe_tensor *ids, int64_t T)
{
    moe_status s = moe_tensor_expect(ids, "topk_ids", MOE_I32, 2);
    if (s != MOE_OK) return s;
    if (ids->shape[0] != T)
        return moe_fail(MOE_ERR_SHAPE, "topk_ids: %lld rows, x has %lld", (long long)ids->shape[0], (long long)T);
    return MOE_OK;
}

moe_status moe_ref_check_expand_trtllm(const moe_tensor *x, const moe_tensor *map, int topk,
                                       const moe_tensor *topk_weights, const moe_tensor *out,
                                       const moe_tensor *permuted_scales)
{
    moe_status s;
    if ((s = expect_rows(x, "x")) || (s = expect_rows(out, "out")) || (s = same_row_type(x, "x", out, "out")) ||
        (s = expect_index(map, "permuted_row_to_unpermuted_row", out->shape[0])))
        return s;
    if (topk <= 0) return moe_fail(MOE_ERR_INVALID_ARG, "topk %d: must be > 0", topk);
    int64_t T = x->shape[0], P = out->shape[0];
    if (topk_weights) {
        if ((s = moe_tensor_expect(topk_weights, "topk_weights", MOE_F32, 2))) return s;
        if (topk_weights->shape[0] != T || topk_weights->shape[1] != topk)
            return moe_fail(MOE_ERR_SHAPE, "topk_weights: shape [%lld, %lld], expected [%lld, %d]",
                            (long long)topk_weights->shape[0], (long long)topk_weights->shape[1], (long long)T, topk);
    }
    if (permuted_scales) {
        if ((s = moe_tensor_expect(permuted_scales, "permuted_scales", MOE_F32, 1))) return s;
        if (permuted_scales->shape[0] != P)
            return moe_fail(MOE_ERR_SHAPE, "permuted_scales: %lld entries, out has %lld rows",
                            (long long)permuted_scales->shape[0], (long long)P);
    }
    const int32_t *u = map->data;
    for (int64_t p = 0; p < P; p++)
        if (u[p] < 0 || u[p] >= T * topk)
            return moe_fail(MOE_ERR_INVALID_ARG, "permuted_row_to_unpermuted_row[%lld] = %d: must be in [0, T*topk = %lld)",
                            (long long)p, u[p], (long long)(T * topk));
    return MOE_OK;
}

moe_status moe_ref_expand_trtllm(const moe_tensor *x, const moe_tensor *map, int topk,
                                 const moe_tensor *topk_weights, moe_tensor *out, moe_tensor *permuted_scales)
{
    moe_status s = moe_ref_check_expand_trtllm(x, map, topk, topk_weights, out, permuted_scales);
    if (s != MOE_OK) return s;
    int64_t T = x->shape[0], P = out->shape[0];
    const int32_t *u = map->data;
    size_t rb = moe_dtype_row_bytes(x->dtype, x->shape[1]);
    for (int64_t p = 0; p < P; p++) {
        int64_t t = u[p] % T, j = u[p] / T;
        memcpy((uint8_t *)out->data + (size_t)p * rb, (const uint8_t *)x->data + (size_t)t * rb, rb);
        if (permuted_scales)
            ((float *)permuted_scales->data)[p] = topk_weights ? ((const float *)topk_weights->data)[t * topk + j] : 1.0f;
    }
    return MOE_OK;
}

static moe_status check_experts(const moe_tensor *ids, int first)
{
    if (first < 0) return moe_fail(MOE_ERR_INVALID_ARG, "first_expert %d: must be >= 0", first);
    const int32_t *d = ids->data;
    int64_t n = ids->shape[0] * ids->shape[1];
    for (int64_t i = 0; i < n; i++)
        if (d[i] < -1)
            return moe_fail(MOE_ERR_INVALID_ARG, "topk_ids[%lld] = %d: must be >= -1", (long long)i, d[i]);
    return MOE_OK;
}

moe_status moe_ref_check_batched_scatter(const moe_tensor *x, const moe_tensor *topk_ids, int first_expert,
                                         const moe_tensor *out, const moe_tensor *counts)
{
    moe_status s;
    if ((s = expect_rows(x, "x")) || (s = expect_topk(topk_ids, x->shape[0]))) return s;
    if (!out) return moe_fail(MOE_ERR_NULL, "out: must not be NULL");
    if ((s = moe_tensor_expect(out, "out", x->dtype, 3))) return s;
    if (out->shape[2] != x->shape[1])
        return moe_fail(MOE_ERR_SHAPE, "out: row length %lld differs from x's %lld", (long long)out->shape[2],
                        (long long)x->shape[1]);
    int64_t L = out->shape[0];
    if ((s = expect_index(counts, "counts", L)) || (s = check_experts(topk_ids, first_expert))) return s;
    return MOE_OK;
}

moe_status moe_ref_batched_scatter(const moe_tensor *x, const moe_tensor *topk_ids, int first_expert,
                                   moe_tensor *out, moe_tensor *counts)
{
    moe_status s = moe_ref_check_batched_scatter(x, topk_ids, first_expert, out, counts);
    if (s != MOE_OK) return s;
    int64_t L = out->shape[0], maxt = out->shape[1], T = x->shape[0], k = topk_ids->shape[1];
    size_t rb = moe_dtype_row_bytes(x->dtype, x->shape[1]);
    const int32_t *ids = topk_ids->data;
    int32_t *cnt = counts->data;
    memset(out->data, 0, out->nbytes);
    for (int64_t l = 0; l < L; l++) {
        int64_t n = 0;
        for (int64_t t = 0; t < T; t++) {
            int hit = 0;
            for (int64_t j = 0; j < k; j++) hit |= ids[t * k + j] == first_expert + l;
            if (!hit) continue;
            if (n == maxt)
                return moe_fail(MOE_ERR_SHAPE, "out: expert %lld receives more than max_tokens = %lld rows",
                                (long long)(first_expert + l), (long long)maxt);
            memcpy((uint8_t *)out->data + ((size_t)l * maxt + n) * rb, (const uint8_t *)x->data + (size_t)t * rb, rb);
            n++;
        }
        cnt[l] = (int32_t)n;
    }
    return MOE_OK;
}

moe_status moe_grouped_capacity(int64_t pairs, int num_local_experts, int pad_multiple, int64_t *cap)
{
    if (!cap) return moe_fail(MOE_ERR_NULL, "cap: must not be NULL");
    if (pairs < 0) return moe_fail(MOE_ERR_INVALID_ARG, "pairs %lld: must be >= 0", (long long)pairs);
    if (num_local_experts <= 0)
        return moe_fail(MOE_ERR_INVALID_ARG, "num_local_experts %d: must be > 0", num_local_experts);
    if (pad_multiple <= 0) return moe_fail(MOE_ERR_INVALID_ARG, "pad_multiple %d: must be > 0", pad_multiple);
    *cap = pairs + (int64_t)num_local_experts * (pad_multiple - 1);
    return MOE_OK;
}

moe_status moe_ref_check_permute_grouped(const moe_tensor *x, const moe_tensor *topk_ids, int first_expert,
                                         int pad_multiple, const moe_tensor *out, const moe_tensor *row_src,
                                         const moe_tensor *counts, const moe_tensor *offsets)
{
    moe_status s;
    if ((s = expect_rows(x, "x")) || (s = expect_topk(topk_ids, x->shape[0]))) return s;
    if (!counts) return moe_fail(MOE_ERR_NULL, "counts: must not be NULL");
    if ((s = moe_tensor_expect(counts, "counts", MOE_I32, 1))) return s;
    int64_t L = counts->shape[0], T = x->shape[0], k = topk_ids->shape[1], cap;
    if ((s = moe_grouped_capacity(T * k, (int)L, pad_multiple, &cap))) return s;
    if ((s = expect_rows(out, "out")) || (s = same_row_type(x, "x", out, "out"))) return s;
    if (out->shape[0] < cap)
        return moe_fail(MOE_ERR_SHAPE, "out: %lld rows, the layout may need %lld", (long long)out->shape[0],
                        (long long)cap);
    if ((s = expect_index(row_src, "row_src", out->shape[0])) || (s = expect_index(offsets, "offsets", L + 1)) ||
        (s = check_experts(topk_ids, first_expert)))
        return s;
    return MOE_OK;
}

moe_status moe_ref_permute_grouped(const moe_tensor *x, const moe_tensor *topk_ids, int first_expert,
                                   int pad_multiple, moe_tensor *out, moe_tensor *row_src, moe_tensor *counts,
                                   moe_tensor *offsets)
{
    moe_status s = moe_ref_check_permute_grouped(x, topk_ids, first_expert, pad_multiple, out, row_src, counts,
                                                 offsets);
    if (s != MOE_OK) return s;
    int64_t L = counts->shape[0], T = x->shape[0], k = topk_ids->shape[1];
    size_t rb = moe_dtype_row_bytes(x->dtype, x->shape[1]);
    const int32_t *ids = topk_ids->data;
    int32_t *src = row_src->data, *cnt = counts->data, *off = offsets->data;
    memset(out->data, 0, out->nbytes);
    for (int64_t r = 0; r < out->shape[0]; r++) src[r] = -1;
    int64_t pos = 0;
    for (int64_t l = 0; l < L; l++) {
        off[l] = (int32_t)pos;
        int64_t n = 0;
        for (int64_t i = 0; i < T * k; i++) {
            if (ids[i] != first_expert + l) continue;
            memcpy((uint8_t *)out->data + (size_t)(pos + n) * rb, (const uint8_t *)x->data + (size_t)(i / k) * rb, rb);
            src[pos + n] = (int32_t)i;
            n++;
        }
        cnt[l] = (int32_t)n;
        pos += (n + pad_multiple - 1) / pad_multiple * pad_multiple;
    }
    off[L] = (int32_t)pos;
    return MOE_OK;
}
