/* CUDA conformance backend: weight and reduce.
 *
 * Every output element (token t, column c) is a fixed-order sum in the
 * reference: over the top-k slots (contiguous, finalize) or over the local
 * experts in ascending order (naive batched). Each such sum stays in one
 * thread, in the reference's order and with its roundings, and the threads
 * run over the output elements (grid-stride, consecutive threads on
 * consecutive columns, so loads and stores are coalesced). The per-element
 * code of war_contiguous and finalize_trtllm is the reference's own
 * (reference/reduce_core.h, MOE_HD).
 *
 * Naive batched needs, for each (local expert l, token t), the rank n of t
 * among the tokens routed to l (the reference walks tokens in ascending
 * order and takes fused[l, n]). That rank is a stable count: one block per
 * expert scans the tokens in order (ballot + warp totals), so it is
 * deterministic; an expert past max_tokens is flagged on the device and the
 * reference reports it. */
#include "cuda_internal.h"
#include "reference/elem.h"
#include "reference/reduce_core.h"
/* stage_checks.h declares C functions without a C++ guard */
extern "C" {
#include "reference/stage_checks.h"
}

namespace {

constexpr int kThreads = 256;

__global__ void contiguous_kernel(moe_dtype fd, const void *fused, const float *w, int64_t M, int64_t k, int64_t K,
                                  int weights_on_input, moe_sum_variant sum, moe_dtype od, void *out)
{
    int64_t n = M * K, step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < n; o += step) {
        int64_t t = o / K, c = o - t * K;
        moe_s_store(od, out, o, moe_war_contiguous_elem(fd, fused, w, t, c, k, K, weights_on_input, sum));
    }
}

__global__ void convert_kernel(moe_dtype fd, const void *src, int64_t n, moe_dtype od, void *dst)
{
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += step)
        moe_s_store(od, dst, i, moe_s_load(fd, src, i));
}

/* Naive batched, step 1: for local expert l (blocks, grid-stride), the
 * tokens holding global expert first_expert + l (in the first slot that
 * holds it, as the reference's slot search) get their rank n among those
 * tokens, written to nidx[t*k + slot]; slots not written stay -1. A rank
 * past max_tokens sets flags[0] and is not written. */
__global__ void naive_rank_kernel(const int32_t *ids, int64_t M, int64_t k, int64_t L, int first_expert, int64_t maxt,
                                  int32_t *nidx, int32_t *flags)
{
    __shared__ int wsum[kThreads / 32];
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    for (int64_t l = blockIdx.x; l < L; l += gridDim.x) {
        int64_t want = first_expert + l, count = 0;
        for (int64_t base = 0; base < M; base += blockDim.x) {
            int64_t t = base + threadIdx.x, slot = -1;
            if (t < M)
                for (int64_t j = 0; j < k && slot < 0; j++)
                    if (ids[t * k + j] == want) slot = j;
            unsigned bal = __ballot_sync(0xFFFFFFFFu, slot >= 0);
            if (lane == 0) wsum[wid] = __popc(bal);
            __syncthreads();
            int off = 0, total = 0;
            for (int i = 0; i < kThreads / 32; i++) {
                off += i < wid ? wsum[i] : 0;
                total += wsum[i];
            }
            if (slot >= 0) {
                int64_t n = count + off + __popc(bal & ((1u << lane) - 1u));
                if (n >= maxt) atomicOr(flags, 1);
                else nidx[t * k + slot] = (int32_t)n;
            }
            count += total;
            __syncthreads(); /* wsum is rewritten next round */
        }
    }
}

/* Step 2, a thread per token: its ranked slots ordered by expert
 * (ascending; each expert once), the reference's accumulation order.
 * ord[t*k + i] = slot, -1 after the last. */
__global__ void naive_order_kernel(const int32_t *ids, const int32_t *nidx, int64_t M, int64_t k, int32_t *ord)
{
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < M; t += step) {
        const int32_t *id = ids + t * k, *nx = nidx + t * k;
        int32_t *od = ord + t * k;
        int64_t cnt = 0;
        for (int64_t j = 0; j < k; j++) {
            if (nx[j] < 0) continue;
            int64_t i = cnt++; /* insertion by expert id; ids of ranked slots are distinct */
            while (i > 0 && id[od[i - 1]] > id[j]) {
                od[i] = od[i - 1];
                i--;
            }
            od[i] = (int32_t)j;
        }
        for (int64_t i = cnt; i < k; i++) od[i] = -1;
    }
}

/* Step 3, a thread per output element: out = round(out + y * w) per
 * expert in ascending order, starting from the reference's zeroed out; the
 * store-then-load of each partial result is a rounding to out's dtype. */
__global__ void naive_reduce_kernel(moe_dtype fd, const void *fused, const int32_t *ids, const float *w,
                                    const int32_t *nidx, const int32_t *ord, int64_t M, int64_t k, int64_t K,
                                    int first_expert, int64_t maxt, moe_dtype od, void *out)
{
    int64_t n = M * K, step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < n; o += step) {
        int64_t t = o / K, c = o - t * K;
        float acc = 0.0f;
        for (int64_t i = 0; i < k; i++) {
            int32_t j = ord[t * k + i];
            if (j < 0) break;
            int64_t l = ids[t * k + j] - (int64_t)first_expert, row = nidx[t * k + j];
            float wt = w ? w[t * k + j] : 1.0f;
            float y = moe_s_load(fd, fused, (l * maxt + row) * K + c);
            acc = moe_s_round_to(od, acc + y * wt);
        }
        moe_s_store(od, out, o, acc);
    }
}

__global__ void finalize_kernel(moe_dtype yd, const void *y, const int32_t *ids, const int32_t *pr, const float *w,
                                const float *b, int64_t T, int64_t k, int64_t K, int first_expert, int nle,
                                moe_dtype od, void *out)
{
    int64_t n = T * K, step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < n; o += step) {
        int64_t t = o / K, c = o - t * K;
        moe_s_store(od, out, o, moe_finalize_trtllm_elem(yd, y, ids, pr, w, b, t, c, T, k, K, first_expert, nle));
    }
}

const void *data_of(const moe_tensor *t) { return t ? t->data : nullptr; }

} // namespace

extern "C" moe_status moe_cuda_war_contiguous(const moe_tensor *fused, const moe_tensor *topk_weights,
                                              int weights_on_input, moe_sum_variant sum, moe_tensor *out)
{
    moe_status st;
    /* with weights on the input the weights' data is never read (only
     * their shape, which a host description gives as well) */
    if ((st = moe_cu_expect_dev(fused, "fused")) ||
        (!weights_on_input && (st = moe_cu_expect_dev(topk_weights, "topk_weights"))) ||
        (st = moe_cu_expect_dev(out, "out")))
        return st;
    moe_tensor mf, mw, mo;
    const moe_tensor *f_m = moe_cu_mirror(fused, &mf, 0, &st), *w_m = moe_cu_mirror(topk_weights, &mw, 0, &st),
                     *o_m = moe_cu_mirror(out, &mo, 0, &st);
    if (st == MOE_OK) st = moe_ref_check_war_contiguous(f_m, w_m, weights_on_input, sum, o_m);
    if (st != MOE_OK) return st;
    int64_t M = out->shape[0], K = out->shape[1], k = topk_weights->shape[1];
    if (sum == MOE_SUM_AUTO) sum = (k >= 2 && k <= 4) ? MOE_SUM_STORAGE_PER_ADD : MOE_SUM_FP32; /* the reference's pick */
    if (M * K == 0) return MOE_OK;
    contiguous_kernel<<<moe_cu_blocks(M * K, kThreads), kThreads>>>(fused->dtype, fused->data,
                                                                    (const float *)topk_weights->data, M, k, K,
                                                                    weights_on_input, sum, out->dtype, out->data);
    return moe_cu_launched("contiguous_kernel");
}

extern "C" moe_status moe_cuda_war_noop(const moe_tensor *fused, moe_tensor *out)
{
    moe_status st;
    if ((st = moe_cu_expect_dev(fused, "fused")) || (st = moe_cu_expect_dev(out, "out"))) return st;
    moe_tensor mf, mo;
    const moe_tensor *f_m = moe_cu_mirror(fused, &mf, 0, &st), *o_m = moe_cu_mirror(out, &mo, 0, &st);
    if (st == MOE_OK) st = moe_ref_check_war_noop(f_m, o_m);
    if (st != MOE_OK) return st;
    int64_t n = fused->shape[0] * fused->shape[1];
    if (n == 0) return MOE_OK;
    if (fused->dtype == out->dtype) { /* the reference's memmove: the same bytes */
        size_t nb;
        if ((st = moe_tensor_layout(out->dtype, out->ndim, out->shape, &nb))) return st;
        if (out->data != fused->data)
            MOE_CU(cudaMemcpyAsync(out->data, fused->data, nb, cudaMemcpyDeviceToDevice, cudaStreamPerThread));
        return MOE_OK;
    }
    convert_kernel<<<moe_cu_blocks(n, kThreads), kThreads>>>(fused->dtype, fused->data, n, out->dtype, out->data);
    return moe_cu_launched("convert_kernel");
}

/* The reference on host copies, for an input it rejects while computing:
 * its status and message. */
static moe_status naive_on_host(const moe_tensor *fused, const moe_tensor *topk_ids, const moe_tensor *topk_weights,
                                int first_expert, int weights_on_input, const moe_tensor *out)
{
    moe_tensor hf, hi, hw, ho;
    memset(&ho, 0, sizeof ho);
    moe_status st = moe_cu_to_host(fused, &hf);
    if (st == MOE_OK) st = moe_cu_to_host(topk_ids, &hi);
    else memset(&hi, 0, sizeof hi);
    if (st == MOE_OK) st = moe_cu_to_host(weights_on_input ? NULL : topk_weights, &hw);
    else memset(&hw, 0, sizeof hw);
    if (st == MOE_OK) st = moe_tensor_alloc(&ho, out->dtype, out->ndim, out->shape);
    if (st == MOE_OK)
        st = moe_ref_war_naive_batched(&hf, &hi, weights_on_input ? NULL : &hw, first_expert, weights_on_input, &ho);
    moe_tensor_free(&hf);
    moe_tensor_free(&hi);
    moe_tensor_free(&hw);
    moe_tensor_free(&ho);
    return st;
}

extern "C" moe_status moe_cuda_war_naive_batched(const moe_tensor *fused, const moe_tensor *topk_ids,
                                                 const moe_tensor *topk_weights, int first_expert,
                                                 int weights_on_input, moe_tensor *out)
{
    moe_status st;
    if ((st = moe_cu_expect_dev(fused, "fused")) || (st = moe_cu_expect_dev(topk_ids, "topk_ids")) ||
        (!weights_on_input && (st = moe_cu_expect_dev(topk_weights, "topk_weights"))) ||
        (st = moe_cu_expect_dev(out, "out")))
        return st;
    moe_tensor mf, mi, mw, mo;
    const moe_tensor *f_m = moe_cu_mirror(fused, &mf, 0, &st), *i_m = moe_cu_mirror(topk_ids, &mi, 0, &st),
                     *w_m = moe_cu_mirror(topk_weights, &mw, 0, &st), *o_m = moe_cu_mirror(out, &mo, 0, &st);
    if (st == MOE_OK) st = moe_ref_check_war_naive_batched(f_m, i_m, w_m, first_expert, weights_on_input, o_m);
    if (st != MOE_OK) return st;
    int64_t M = topk_ids->shape[0], k = topk_ids->shape[1], L = fused->shape[0], maxt = fused->shape[1],
            K = fused->shape[2];
    if (M == 0) return MOE_OK;
    if (k == 0 || L == 0) { /* no token has a local expert: the reference's zeroed out */
        MOE_CU(cudaMemsetAsync(out->data, 0, out->nbytes, cudaStreamPerThread));
        return MOE_OK;
    }
    size_t slots = (size_t)(M * k);
    int32_t *nidx = (int32_t *)moe_cu_scratch(2 * slots * sizeof(int32_t), &st);
    if (!nidx) return st;
    int32_t *ord = nidx + slots;
    int32_t *flags = moe_cu_flags(&st);
    if (!flags) return st;
    MOE_CU(cudaMemsetAsync(nidx, 0xFF, slots * sizeof(int32_t), cudaStreamPerThread));
    unsigned lb = (unsigned)(L < 65535 * 16 ? L : 65535 * 16);
    naive_rank_kernel<<<lb, kThreads>>>((const int32_t *)topk_ids->data, M, k, L, first_expert, maxt, nidx, flags);
    if ((st = moe_cu_launched("naive_rank_kernel"))) return st;
    int32_t hf[64];
    if ((st = moe_cu_flags_get(flags, hf))) return st;
    if (hf[0]) return naive_on_host(fused, topk_ids, topk_weights, first_expert, weights_on_input, out);
    naive_order_kernel<<<moe_cu_blocks(M, kThreads), kThreads>>>((const int32_t *)topk_ids->data, nidx, M, k, ord);
    if ((st = moe_cu_launched("naive_order_kernel"))) return st;
    if (M * K == 0) return MOE_OK;
    naive_reduce_kernel<<<moe_cu_blocks(M * K, kThreads), kThreads>>>(
        fused->dtype, fused->data, (const int32_t *)topk_ids->data,
        weights_on_input ? nullptr : (const float *)topk_weights->data, nidx, ord, M, k, K, first_expert, maxt,
        out->dtype, out->data);
    return moe_cu_launched("naive_reduce_kernel");
}

extern "C" moe_status moe_cuda_finalize_trtllm(const moe_tensor *y, const moe_tensor *unpermuted_row_to_permuted_row,
                                               const moe_tensor *topk_ids, const moe_tensor *topk_weights,
                                               const moe_tensor *bias, int first_expert, int num_local_experts,
                                               moe_tensor *out)
{
    moe_status st;
    const moe_tensor *map = unpermuted_row_to_permuted_row;
    if ((st = moe_cu_expect_dev(y, "y")) || (st = moe_cu_expect_dev(map, "unpermuted_row_to_permuted_row")) ||
        (st = moe_cu_expect_dev(topk_ids, "topk_ids")) || (st = moe_cu_expect_dev(topk_weights, "topk_weights")) ||
        (st = moe_cu_expect_dev(bias, "bias")) || (st = moe_cu_expect_dev(out, "out")))
        return st;
    /* the check scans the ids and the map (every local slot needs a row of
     * y): their bytes come to the host */
    moe_tensor my, mm, mi, mw, mb, mo;
    const moe_tensor *y_m = moe_cu_mirror(y, &my, 0, &st), *m_m = moe_cu_mirror(map, &mm, 1, &st),
                     *i_m = moe_cu_mirror(topk_ids, &mi, 1, &st), *w_m = moe_cu_mirror(topk_weights, &mw, 0, &st),
                     *b_m = moe_cu_mirror(bias, &mb, 0, &st), *o_m = moe_cu_mirror(out, &mo, 0, &st);
    if (st == MOE_OK)
        st = moe_ref_check_finalize_trtllm(y_m, m_m, i_m, w_m, b_m, first_expert, num_local_experts, o_m);
    moe_cu_mirror_free(&mm);
    moe_cu_mirror_free(&mi);
    if (st != MOE_OK) return st;
    int64_t T = topk_ids->shape[0], k = topk_ids->shape[1], K = y->shape[1];
    if (T * K == 0) return MOE_OK;
    finalize_kernel<<<moe_cu_blocks(T * K, kThreads), kThreads>>>(
        y->dtype, y->data, (const int32_t *)topk_ids->data, (const int32_t *)map->data,
        (const float *)data_of(topk_weights), (const float *)data_of(bias), T, k, K, first_expert, num_local_experts,
        out->dtype, out->data);
    return moe_cu_launched("finalize_kernel");
}
