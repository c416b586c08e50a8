/* CUDA conformance backend: row movement between the token-major layout and
 * the expert layouts (reference/permute.c). Rows are bytes, so every output
 * is the reference's whatever the dtype; the only thing to get right is
 * where each row lands.
 *
 *   row copies      every stage ends in one gather (moe_cu_gather_rows,
 *                   rows.cuh): out[o] = x[src(o)] or a zero row. Scatters
 *                   (unpermute) are turned into gathers by inverting the
 *                   index first, which the check makes race-free (each
 *                   destination at most once).
 *   placement       batched_scatter and permute_grouped place a pair at its
 *                   rank among the earlier pairs of its expert in flat index
 *                   order (the reference's loops): moe_cu_stable_rank
 *                   (rank.cuh).
 *   in place        an output overlapping its input in the three gathers
 *                   (permute_rows, unpermute_rows, expand_trtllm) makes the
 *                   reference's serial row order part of the result, as in
 *                   the CPU backend: the reference runs on one host copy of
 *                   the overlapping bytes, which is copied back.
 *   capacity        batched_scatter's expert past max_tokens is flagged on
 *                   the device; the reference then runs on host copies and
 *                   its status and message are returned.
 */
#include <stdlib.h>
#include <string.h>
#include "cuda_internal.h"
#include "moe/permute.h"
#include "rank.cuh"
#include "rows.cuh"
/* stage_checks.h declares C functions without a C++ guard */
extern "C" {
#include "reference/stage_checks.h"
}

/* ---- shared host plumbing ------------------------------------------------------- */

static int overlaps(const moe_tensor *a, const moe_tensor *b)
{
    if (!a || !b || !a->data || !b->data || !a->nbytes || !b->nbytes) return 0;
    uintptr_t a0 = (uintptr_t)a->data, b0 = (uintptr_t)b->data;
    return a0 < b0 + b->nbytes && b0 < a0 + a->nbytes;
}

/* The reference on one host copy of the bytes two overlapping device
 * tensors share (a read, b written), copied back on success; run gets the
 * host views. */
template <typename F>
static moe_status ref_in_place(const moe_tensor *a, moe_tensor *b, F run)
{
    uintptr_t a0 = (uintptr_t)a->data, b0 = (uintptr_t)b->data;
    uintptr_t lo = a0 < b0 ? a0 : b0, hi = a0 + a->nbytes > b0 + b->nbytes ? a0 + a->nbytes : b0 + b->nbytes;
    size_t nb = (size_t)(hi - lo);
    MOE_CU(cudaStreamSynchronize(cudaStreamPerThread));
    uint8_t *buf = (uint8_t *)malloc(nb);
    if (!buf) return moe_fail(MOE_ERR_NOMEM, "in-place rows: %zu bytes", nb);
    cudaError_t e = cudaMemcpy(buf, (const void *)lo, nb, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
        free(buf);
        return moe_cu_fail(e, "in-place rows: copy to the host");
    }
    moe_tensor ha = *a, hb = *b;
    ha.data = buf + (a0 - lo), hb.data = buf + (b0 - lo);
    ha.device = hb.device = moe_device{MOE_DEVICE_HOST, 0};
    ha.owns = hb.owns = 0;
    moe_status st = run(&ha, &hb);
    if (st == MOE_OK) {
        e = cudaMemcpy((void *)lo, buf, nb, cudaMemcpyHostToDevice);
        if (e != cudaSuccess) st = moe_cu_fail(e, "in-place rows: copy to the device");
    }
    free(buf);
    return st;
}

/* ---- permute_rows / unpermute_rows / expand_trtllm ------------------------------ */

extern "C" moe_status moe_cuda_permute_rows(const moe_tensor *x, const moe_tensor *src, moe_tensor *out)
{
    moe_status st;
    if ((st = moe_cu_expect_dev(x, "x")) || (st = moe_cu_expect_dev(src, "src")) ||
        (st = moe_cu_expect_dev(out, "out")))
        return st;
    moe_tensor mx, ms, mo;
    st = MOE_OK;
    const moe_tensor *hx = moe_cu_mirror(x, &mx, 0, &st), *hs = moe_cu_mirror(src, &ms, 1, &st),
                     *ho = moe_cu_mirror(out, &mo, 0, &st);
    if (st == MOE_OK) st = moe_ref_check_permute_rows(hx, hs, ho);
    if (st == MOE_OK && overlaps(x, out))
        st = ref_in_place(x, out, [&](const moe_tensor *a, moe_tensor *b) { return moe_ref_permute_rows(a, hs, b); });
    else if (st == MOE_OK)
        st = moe_cu_gather_rows(x->data, out->data, out->shape[0], moe_dtype_row_bytes(x->dtype, x->shape[1]),
                                (const int32_t *)src->data, 1, 0);
    moe_cu_mirror_free(&ms);
    return st;
}

static __global__ void invert_kernel(const int32_t *__restrict__ dst, int64_t P, int32_t *inv)
{
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < P; p += (int64_t)gridDim.x * blockDim.x)
        if (dst[p] >= 0) inv[dst[p]] = (int32_t)p;
}

extern "C" moe_status moe_cuda_unpermute_rows(const moe_tensor *y, const moe_tensor *dst, moe_tensor *out)
{
    moe_status st;
    if ((st = moe_cu_expect_dev(y, "y")) || (st = moe_cu_expect_dev(dst, "dst")) ||
        (st = moe_cu_expect_dev(out, "out")))
        return st;
    moe_tensor my, md, mo;
    st = MOE_OK;
    const moe_tensor *hy = moe_cu_mirror(y, &my, 0, &st), *hd = moe_cu_mirror(dst, &md, 1, &st),
                     *ho = moe_cu_mirror(out, &mo, 0, &st);
    if (st == MOE_OK) st = moe_ref_check_unpermute_rows(hy, hd, ho);
    if (st == MOE_OK && overlaps(y, out)) {
        st = ref_in_place(y, out, [&](const moe_tensor *a, moe_tensor *b) { return moe_ref_unpermute_rows(a, hd, b); });
    } else if (st == MOE_OK && out->shape[0] > 0) {
        /* each destination is named at most once (checked), so the inverse
         * index is written without races and the scatter becomes a gather
         * that also zeroes the rows nobody names */
        int64_t P = y->shape[0], T = out->shape[0];
        int32_t *inv = (int32_t *)moe_cu_scratch((size_t)T * sizeof(int32_t), &st);
        if (inv) {
            cudaError_t e = cudaMemsetAsync(inv, 0xFF, (size_t)T * sizeof(int32_t), cudaStreamPerThread);
            if (e != cudaSuccess) st = moe_cu_fail(e, "unpermute: cudaMemsetAsync");
        }
        if (st == MOE_OK && P > 0) {
            invert_kernel<<<moe_cu_blocks(P, 256), 256>>>((const int32_t *)dst->data, P, inv);
            st = moe_cu_launched("invert_kernel");
        }
        if (st == MOE_OK)
            st = moe_cu_gather_rows(y->data, out->data, T, moe_dtype_row_bytes(y->dtype, y->shape[1]), inv, 1, 0);
    }
    moe_cu_mirror_free(&md);
    return st;
}

static __global__ void expand_scales_kernel(const int32_t *__restrict__ u, int64_t P, int64_t T, int topk,
                                            const float *__restrict__ w, float *ps)
{
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < P; p += (int64_t)gridDim.x * blockDim.x) {
        int64_t t = u[p] % T, j = u[p] / T;
        ps[p] = w ? w[t * topk + j] : 1.0f;
    }
}

extern "C" moe_status moe_cuda_expand_trtllm(const moe_tensor *x, const moe_tensor *permuted_row_to_unpermuted_row,
                                             int topk, const moe_tensor *topk_weights, moe_tensor *out,
                                             moe_tensor *permuted_scales)
{
    const moe_tensor *map = permuted_row_to_unpermuted_row;
    moe_status st;
    if ((st = moe_cu_expect_dev(x, "x")) || (st = moe_cu_expect_dev(map, "permuted_row_to_unpermuted_row")) ||
        (st = moe_cu_expect_dev(topk_weights, "topk_weights")) || (st = moe_cu_expect_dev(out, "out")) ||
        (st = moe_cu_expect_dev(permuted_scales, "permuted_scales")))
        return st;
    moe_tensor mx, mm, mw, mo, mp;
    st = MOE_OK;
    const moe_tensor *hx = moe_cu_mirror(x, &mx, 0, &st), *hm = moe_cu_mirror(map, &mm, 1, &st),
                     *hw = moe_cu_mirror(topk_weights, &mw, 0, &st), *ho = moe_cu_mirror(out, &mo, 0, &st),
                     *hp = moe_cu_mirror(permuted_scales, &mp, 0, &st);
    if (st == MOE_OK) st = moe_ref_check_expand_trtllm(hx, hm, topk, hw, ho, hp);
    if (st == MOE_OK && overlaps(x, out)) {
        /* the reference wants host weights and scales too */
        moe_tensor tw, tp;
        st = moe_cu_to_host(topk_weights, &tw);
        if (st == MOE_OK && (st = moe_cu_to_host(permuted_scales, &tp)) != MOE_OK) moe_tensor_free(&tw);
        if (st == MOE_OK) {
            st = ref_in_place(x, out, [&](const moe_tensor *a, moe_tensor *b) {
                return moe_ref_expand_trtllm(a, hm, topk, topk_weights ? &tw : NULL, b,
                                             permuted_scales ? &tp : NULL);
            });
            if (st == MOE_OK && permuted_scales) st = moe_cu_to_dev(&tp, permuted_scales);
            moe_tensor_free(&tw);
            moe_tensor_free(&tp);
        }
    } else if (st == MOE_OK) {
        int64_t T = x->shape[0], P = out->shape[0];
        /* x[u % T]: the k-major expanded index u = j*T + t */
        st = moe_cu_gather_rows(x->data, out->data, P, moe_dtype_row_bytes(x->dtype, x->shape[1]),
                                (const int32_t *)map->data, 1, T);
        if (st == MOE_OK && permuted_scales && P > 0) {
            expand_scales_kernel<<<moe_cu_blocks(P, 256), 256>>>(
                (const int32_t *)map->data, P, T, topk, topk_weights ? (const float *)topk_weights->data : NULL,
                (float *)permuted_scales->data);
            st = moe_cu_launched("expand_scales_kernel");
        }
    }
    moe_cu_mirror_free(&mm);
    return st;
}

/* ---- batched_scatter ------------------------------------------------------------ */

/* Key of pair (t, j): its local expert, unless an earlier slot of the row
 * names the same expert (the reference counts a token once per expert). */
static __global__ void batched_keys_kernel(const int32_t *__restrict__ ids, int64_t T, int64_t k, int first,
                                           int64_t L, int32_t *keys)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < T * k;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t t = i / k, j = i % k, l = (int64_t)ids[i] - first;
        int32_t key = l >= 0 && l < L ? (int32_t)l : -1;
        for (int64_t q = 0; q < j && key >= 0; q++)
            if (ids[t * k + q] == ids[i]) key = -1;
        keys[i] = key;
    }
}

/* tok_of[l*maxt + n] = the token of expert l's n-th row (rows past the
 * capacity are the error the caller reports) */
static __global__ void batched_place_kernel(const int32_t *__restrict__ keys, const int32_t *__restrict__ rank,
                                            int64_t n, int64_t k, int64_t maxt, int32_t *tok_of)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        if (keys[i] >= 0 && rank[i] < maxt) tok_of[keys[i] * maxt + rank[i]] = (int32_t)(i / k);
}

/* The reference on host copies of the inputs; returns its status (an error
 * the device flagged). Its outputs are discarded. */
static moe_status batched_scatter_ref(const moe_tensor *x, const moe_tensor *topk_ids, int first_expert,
                                      const moe_tensor *out, const moe_tensor *counts)
{
    moe_tensor hx, hi, ho, hc;
    memset(&ho, 0, sizeof ho), memset(&hc, 0, sizeof hc);
    moe_status st = moe_cu_to_host(x, &hx);
    if (st) return st;
    if ((st = moe_cu_to_host(topk_ids, &hi)) == MOE_OK &&
        (st = moe_tensor_alloc(&ho, out->dtype, out->ndim, out->shape)) == MOE_OK &&
        (st = moe_tensor_alloc(&hc, counts->dtype, counts->ndim, counts->shape)) == MOE_OK) {
        st = moe_ref_batched_scatter(&hx, &hi, first_expert, &ho, &hc);
        if (st == MOE_OK)
            st = moe_fail(MOE_ERR_INTERNAL, "batched_scatter: the device flagged an expert past max_tokens, the "
                                             "reference found none");
    }
    moe_tensor_free(&hx), moe_tensor_free(&hi), moe_tensor_free(&ho), moe_tensor_free(&hc);
    return st;
}

extern "C" moe_status moe_cuda_batched_scatter(const moe_tensor *x, const moe_tensor *topk_ids, int first_expert,
                                               moe_tensor *out, moe_tensor *counts)
{
    moe_status st;
    if ((st = moe_cu_expect_dev(x, "x")) || (st = moe_cu_expect_dev(topk_ids, "topk_ids")) ||
        (st = moe_cu_expect_dev(out, "out")) || (st = moe_cu_expect_dev(counts, "counts")))
        return st;
    moe_tensor mx, mi, mo, mc;
    st = MOE_OK;
    const moe_tensor *hx = moe_cu_mirror(x, &mx, 0, &st), *hi = moe_cu_mirror(topk_ids, &mi, 1, &st),
                     *ho = moe_cu_mirror(out, &mo, 0, &st), *hc = moe_cu_mirror(counts, &mc, 0, &st);
    if (st == MOE_OK) st = moe_ref_check_batched_scatter(hx, hi, first_expert, ho, hc);
    moe_cu_mirror_free(&mi);
    if (st) return st;
    int64_t L = out->shape[0], maxt = out->shape[1], T = x->shape[0], k = topk_ids->shape[1], n = T * k;
    if (L == 0) return MOE_OK;
    size_t b_keys = moe_cu_align256((size_t)n * 4), b_hist = moe_cu_align256(moe_cu_stable_rank_bytes(n, (int)L));
    size_t b_tok = moe_cu_align256((size_t)(L * maxt) * 4);
    uint8_t *ws = (uint8_t *)moe_cu_scratch(2 * b_keys + b_hist + b_tok, &st);
    int32_t *flags = ws ? moe_cu_flags(&st) : NULL;
    if (!ws || !flags) return st;
    int32_t *keys = (int32_t *)ws, *rank = (int32_t *)(ws + b_keys), *hist = (int32_t *)(ws + 2 * b_keys);
    int32_t *tok_of = (int32_t *)(ws + 2 * b_keys + b_hist);
    if (L * maxt > 0) MOE_CU(cudaMemsetAsync(tok_of, 0xFF, (size_t)(L * maxt) * 4, cudaStreamPerThread));
    if (n > 0) {
        batched_keys_kernel<<<moe_cu_blocks(n, 256), 256>>>((const int32_t *)topk_ids->data, T, k, first_expert, L,
                                                            keys);
        if ((st = moe_cu_launched("batched_keys_kernel"))) return st;
    }
    st = moe_cu_stable_rank(keys, n, (int)L, rank, (int32_t *)counts->data, maxt, flags, hist);
    if (st) return st;
    if (n > 0) {
        batched_place_kernel<<<moe_cu_blocks(n, 256), 256>>>(keys, rank, n, k, maxt, tok_of);
        if ((st = moe_cu_launched("batched_place_kernel"))) return st;
    }
    int32_t hf[64];
    if ((st = moe_cu_flags_get(flags, hf))) return st;
    if (hf[0]) return batched_scatter_ref(x, topk_ids, first_expert, out, counts);
    /* every row of out is written: tokens, then zero rows past each count */
    return moe_cu_gather_rows(x->data, out->data, L * maxt, moe_dtype_row_bytes(x->dtype, x->shape[1]), tok_of, 1, 0);
}

/* ---- permute_grouped ------------------------------------------------------------ */

static __global__ void grouped_keys_kernel(const int32_t *__restrict__ ids, int64_t n, int first, int64_t L,
                                           int32_t *keys)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t l = (int64_t)ids[i] - first;
        keys[i] = l >= 0 && l < L ? (int32_t)l : -1;
    }
}

/* offsets = exclusive scan of the padded counts, one block: each thread
 * sums a run of consecutive experts, thread 0 scans the (<= 1024) run sums,
 * then each thread writes its run. */
static __global__ void grouped_offsets_kernel(const int32_t *__restrict__ cnt, int64_t L, int64_t pad, int32_t *off)
{
    __shared__ int64_t part[1024];
    int64_t per = (L + blockDim.x - 1) / blockDim.x;
    int64_t lo = (int64_t)threadIdx.x * per, hi = lo + per < L ? lo + per : L;
    int64_t s = 0;
    for (int64_t l = lo; l < hi; l++) s += ((int64_t)cnt[l] + pad - 1) / pad * pad;
    part[threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        int64_t run = 0;
        for (unsigned i = 0; i < blockDim.x; i++) {
            int64_t v = part[i];
            part[i] = run;
            run += v;
        }
    }
    __syncthreads();
    int64_t pos = part[threadIdx.x];
    for (int64_t l = lo; l < hi; l++) {
        off[l] = (int32_t)pos;
        pos += ((int64_t)cnt[l] + pad - 1) / pad * pad;
    }
    if (threadIdx.x == blockDim.x - 1) off[L] = (int32_t)(part[threadIdx.x] + s);
}

static __global__ void grouped_place_kernel(const int32_t *__restrict__ keys, const int32_t *__restrict__ rank,
                                            int64_t n, const int32_t *__restrict__ off, int32_t *row_src)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        if (keys[i] >= 0) row_src[(int64_t)off[keys[i]] + rank[i]] = (int32_t)i;
}

extern "C" moe_status moe_cuda_permute_grouped(const moe_tensor *x, const moe_tensor *topk_ids, int first_expert,
                                               int pad_multiple, moe_tensor *out, moe_tensor *row_src,
                                               moe_tensor *counts, moe_tensor *offsets)
{
    moe_status st;
    if ((st = moe_cu_expect_dev(x, "x")) || (st = moe_cu_expect_dev(topk_ids, "topk_ids")) ||
        (st = moe_cu_expect_dev(out, "out")) || (st = moe_cu_expect_dev(row_src, "row_src")) ||
        (st = moe_cu_expect_dev(counts, "counts")) || (st = moe_cu_expect_dev(offsets, "offsets")))
        return st;
    moe_tensor mx, mi, mo, mr, mc, mf;
    st = MOE_OK;
    const moe_tensor *hx = moe_cu_mirror(x, &mx, 0, &st), *hi = moe_cu_mirror(topk_ids, &mi, 1, &st),
                     *ho = moe_cu_mirror(out, &mo, 0, &st), *hr = moe_cu_mirror(row_src, &mr, 0, &st),
                     *hc = moe_cu_mirror(counts, &mc, 0, &st), *hf = moe_cu_mirror(offsets, &mf, 0, &st);
    if (st == MOE_OK) st = moe_ref_check_permute_grouped(hx, hi, first_expert, pad_multiple, ho, hr, hc, hf);
    moe_cu_mirror_free(&mi);
    if (st) return st;
    int64_t L = counts->shape[0], T = x->shape[0], k = topk_ids->shape[1], n = T * k, R = out->shape[0];
    size_t b_keys = moe_cu_align256((size_t)n * 4), b_hist = moe_cu_align256(moe_cu_stable_rank_bytes(n, (int)L));
    uint8_t *ws = (uint8_t *)moe_cu_scratch(2 * b_keys + b_hist, &st);
    if (!ws) return st;
    int32_t *keys = (int32_t *)ws, *rank = (int32_t *)(ws + b_keys), *hist = (int32_t *)(ws + 2 * b_keys);
    int32_t *src = (int32_t *)row_src->data, *off = (int32_t *)offsets->data;
    if (n > 0) {
        grouped_keys_kernel<<<moe_cu_blocks(n, 256), 256>>>((const int32_t *)topk_ids->data, n, first_expert, L,
                                                            keys);
        if ((st = moe_cu_launched("grouped_keys_kernel"))) return st;
    }
    if ((st = moe_cu_stable_rank(keys, n, (int)L, rank, (int32_t *)counts->data, -1, NULL, hist))) return st;
    grouped_offsets_kernel<<<1, 1024>>>((const int32_t *)counts->data, L, pad_multiple, off);
    if ((st = moe_cu_launched("grouped_offsets_kernel"))) return st;
    if (R > 0) MOE_CU(cudaMemsetAsync(src, 0xFF, (size_t)R * 4, cudaStreamPerThread)); /* pads: -1 */
    if (n > 0) {
        grouped_place_kernel<<<moe_cu_blocks(n, 256), 256>>>(keys, rank, n, off, src);
        if ((st = moe_cu_launched("grouped_place_kernel"))) return st;
    }
    /* row r holds x[row_src[r] / k], pads and rows past the layout zero */
    return moe_cu_gather_rows(x->data, out->data, R, moe_dtype_row_bytes(x->dtype, x->shape[1]), src, k, 0);
}
