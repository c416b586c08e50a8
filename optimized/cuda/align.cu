/* vLLM moe_align_block_size and batched_moe_align_block_size on the GPU
 * (reference/align.c is the oracle).
 *
 * align_block_size: the reference is a counting sort whose experts hold
 * their pairs in ascending flat index t*topk + k (vLLM's small-input path
 * and its golden test's stable sort). Here the stable bucket ranking of
 * rank.cuh: per-chunk counts, a scan per expert over chunks, a block
 * scan of the padded expert sizes, then each warp places its chunk in
 * flat order. Pads (numel) and block ids are filled one thread per entry;
 * a block finds its expert by binary search over the padded starts.
 *
 * align_block_size_atomic models vLLM's large-input path
 * (count_and_sort_expert_tokens_kernel): counts, the padded cumsum and
 * expert_ids as above, but each pair takes its slot with an atomicAdd on
 * its expert's cursor, so the order inside an expert is arrival order
 * (SET against the reference).
 *
 * align_batched: one block scans the batches' padded sizes; every entry
 * of sorted_token_ids and expert_ids is then computed independently. */
#include <string.h>
#include "cuda_internal.h"
#include "rank.cuh"
/* stage_checks.h has no C++ guards of its own */
extern "C" {
#include "reference/stage_checks.h"
}

namespace {

struct align_key {
    const int32_t *ids, *map; /* map only in IGNORE_INVALID mode */
    __device__ int operator()(int64_t i) const
    {
        int e = ids[i]; /* in [0, E): the reference check scanned the ids */
        return map ? map[e] : e; /* -1: a non-local pair takes no slot */
    }
};

struct align_place {
    int32_t *sorted;
    __device__ void operator()(int64_t i, int, int64_t pos) const { sorted[pos] = (int32_t)i; }
};

/* Padded starts: start[b] = sum over b' < b of round_up(cnt[b'], bs) (an
 * empty expert or batch takes no block), start[E] = the used length, also
 * written to ntpp. align_block_size's experts and align_batched's batches. */
__global__ void align_starts_kernel(int E, const int32_t *cnt, int64_t bs, int64_t *start, int32_t *ntpp)
{
    __shared__ long long ws[32];
    long long carry = 0;
    for (int base = 0; base < E; base += blockDim.x) {
        int b = base + threadIdx.x;
        long long v = b < E ? ((long long)cnt[b] + bs - 1) / bs * bs : 0, sum;
        long long ex = moe_cu_block_exscan(v, ws, &sum);
        if (b < E) start[b] = carry + ex;
        carry += sum;
    }
    if (threadIdx.x == 0) {
        start[E] = carry;
        ntpp[0] = (int32_t)carry;
    }
}

/* Every sorted entry starts as the pad (numel); a block's expert id is the
 * expert whose padded segment holds it (remapped by the expert map in
 * KEEP_NONLOCAL mode), -1 past the used length. */
__global__ void align_fill_kernel(int64_t len, int64_t nblk, int32_t pad, int E, int64_t bs,
                                  const int64_t *start, const int32_t *keep_map, int32_t *sorted, int32_t *eids)
{
    int64_t n = len > nblk ? len : nblk, used = start[E];
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x) {
        if (k < len) sorted[k] = pad;
        if (k < nblk) {
            int32_t id = -1;
            if (k * bs < used) {
                int b = moe_cu_upper_bound(start, E + 1, k * bs) - 1;
                id = keep_map ? keep_map[b] : b;
            }
            eids[k] = id;
        }
    }
}

/* vLLM's large path: order-free counts, then a slot per pair by atomicAdd
 * on its expert's cursor (arrival order). */
__global__ void align_atomic_count_kernel(int64_t n, align_key key, int32_t *cnt)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int b = key(i);
        if (b >= 0) atomicAdd(&cnt[b], 1);
    }
}

__global__ void align_atomic_place_kernel(int64_t n, align_key key, int32_t *cur, const int64_t *start,
                                          int32_t *sorted)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int b = key(i);
        if (b >= 0) sorted[start[b] + atomicAdd(&cur[b], 1)] = (int32_t)i;
    }
}

/* Device checks and the reference's own checks (they scan the ids and the
 * map, so those two are mirrored with their data). */
moe_status align_checks(const moe_tensor *topk_ids, const moe_align_params *p, moe_tensor *sorted_token_ids,
                        moe_tensor *expert_ids, moe_tensor *num_tokens_post_pad)
{
    moe_status st;
    if ((st = moe_cu_expect_dev(topk_ids, "topk_ids")) || (p && (st = moe_cu_expect_dev(p->expert_map, "expert_map"))) ||
        (st = moe_cu_expect_dev(sorted_token_ids, "sorted_token_ids")) ||
        (st = moe_cu_expect_dev(expert_ids, "expert_ids")) ||
        (st = moe_cu_expect_dev(num_tokens_post_pad, "num_tokens_post_pad")))
        return st;
    moe_tensor m_ids, m_map, m_sorted, m_eids, m_ntpp;
    moe_status cst = MOE_OK;
    moe_align_params hp;
    const moe_align_params *hpp = NULL;
    const moe_tensor *ids = moe_cu_mirror(topk_ids, &m_ids, 1, &cst);
    memset(&m_map, 0, sizeof m_map);
    if (p) {
        hp = *p;
        hp.expert_map = moe_cu_mirror(p->expert_map, &m_map, 1, &cst);
        hpp = &hp;
    }
    const moe_tensor *so = moe_cu_mirror(sorted_token_ids, &m_sorted, 0, &cst);
    const moe_tensor *eo = moe_cu_mirror(expert_ids, &m_eids, 0, &cst);
    const moe_tensor *no = moe_cu_mirror(num_tokens_post_pad, &m_ntpp, 0, &cst);
    st = cst != MOE_OK ? cst : moe_ref_check_align_block_size(ids, hpp, so, eo, no);
    moe_cu_mirror_free(&m_ids);
    moe_cu_mirror_free(&m_map);
    return st;
}

/* The reference on host copies, its outputs copied back: for inputs past
 * the int32 ranks of the device path (more than 2^31 - 1 pairs). */
moe_status align_on_host(const moe_tensor *topk_ids, const moe_align_params *p, moe_tensor *sorted_token_ids,
                         moe_tensor *expert_ids, moe_tensor *num_tokens_post_pad)
{
    moe_tensor h[5];
    moe_status st = MOE_OK;
    memset(h, 0, sizeof h);
    moe_align_params hp = *p;
    if (!(st = moe_cu_to_host(topk_ids, &h[0])) && !(st = moe_cu_to_host(p->expert_map, &h[1])) &&
        !(st = moe_cu_to_host(sorted_token_ids, &h[2])) && !(st = moe_cu_to_host(expert_ids, &h[3])) &&
        !(st = moe_cu_to_host(num_tokens_post_pad, &h[4]))) {
        hp.expert_map = p->expert_map ? &h[1] : NULL;
        st = moe_ref_align_block_size(&h[0], &hp, &h[2], &h[3], &h[4]);
        if (st == MOE_OK && !(st = moe_cu_to_dev(&h[2], sorted_token_ids)) && !(st = moe_cu_to_dev(&h[3], expert_ids)))
            st = moe_cu_to_dev(&h[4], num_tokens_post_pad);
    }
    for (int i = 0; i < 5; i++) moe_tensor_free(&h[i]);
    return st;
}

moe_status align_run(const moe_tensor *topk_ids, const moe_align_params *p, moe_tensor *sorted_token_ids,
                     moe_tensor *expert_ids, moe_tensor *num_tokens_post_pad, int atomic)
{
    moe_status st = align_checks(topk_ids, p, sorted_token_ids, expert_ids, num_tokens_post_pad);
    if (st != MOE_OK) return st;
    const int64_t numel = topk_ids->shape[0] * topk_ids->shape[1];
    if (numel > INT32_MAX) return align_on_host(topk_ids, p, sorted_token_ids, expert_ids, num_tokens_post_pad);
    const int E = p->num_experts;
    const int32_t *map = p->expert_map ? (const int32_t *)p->expert_map->data : NULL;
    const int ignore = map && p->map_mode == MOE_ALIGN_MAP_IGNORE_INVALID;
    align_key key = {(const int32_t *)topk_ids->data, ignore ? map : NULL};
    int32_t *sorted = (int32_t *)sorted_token_ids->data, *eids = (int32_t *)expert_ids->data;
    int32_t *ntpp = (int32_t *)num_tokens_post_pad->data;
    const int64_t len = sorted_token_ids->shape[0], nblk = expert_ids->shape[0];

    moe_cu_rank_plan pl = moe_cu_rank_plan_make(numel, E);
    size_t o_cnt = moe_cu_align256(pl.mat_bytes), o_start = o_cnt + moe_cu_align256((size_t)E * 2 * sizeof(int32_t));
    char *scr = (char *)moe_cu_scratch(o_start + (size_t)(E + 1) * sizeof(int64_t), &st);
    if (!scr) return st;
    int32_t *mat = (int32_t *)scr, *cnt = (int32_t *)(scr + o_cnt), *cur = cnt + E;
    int64_t *start = (int64_t *)(scr + o_start);

    if (atomic) {
        MOE_CU(cudaMemsetAsync(cnt, 0, (size_t)E * 2 * sizeof(int32_t), cudaStreamPerThread));
        if (numel > 0) {
            align_atomic_count_kernel<<<moe_cu_blocks(numel, 256), 256>>>(numel, key, cnt);
            if ((st = moe_cu_launched("align_atomic_count_kernel"))) return st;
        }
    } else if ((st = moe_cu_rank_count(pl, key, mat, cnt))) {
        return st;
    }
    align_starts_kernel<<<1, 1024>>>(E, cnt, p->block_size, start, ntpp);
    if ((st = moe_cu_launched("align_starts_kernel"))) return st;
    if (len > 0 || nblk > 0) {
        align_fill_kernel<<<moe_cu_blocks(len > nblk ? len : nblk, 256), 256>>>(
            len, nblk, (int32_t)numel, E, p->block_size, start, (map && !ignore) ? map : NULL, sorted, eids);
        if ((st = moe_cu_launched("align_fill_kernel"))) return st;
    }
    if (atomic) {
        if (numel == 0) return MOE_OK;
        align_atomic_place_kernel<<<moe_cu_blocks(numel, 256), 256>>>(numel, key, cur, start, sorted);
        return moe_cu_launched("align_atomic_place_kernel");
    }
    return moe_cu_rank_place(pl, key, mat, start, align_place{sorted});
}

__global__ void batched_fill_kernel(int64_t len, int64_t nblk, int B, const int32_t *n, int64_t max_tokens,
                                    int64_t bs, const int64_t *start, int32_t *sorted, int32_t *eids)
{
    int64_t all = len > nblk ? len : nblk, used = start[B];
    int32_t pad = (int32_t)(B * max_tokens);
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < all; k += (int64_t)gridDim.x * blockDim.x) {
        if (k < len) {
            int32_t v = pad;
            if (k < used) {
                int b = moe_cu_upper_bound(start, B + 1, k) - 1;
                int64_t j = k - start[b];
                if (j < n[b]) v = (int32_t)(b * max_tokens + j);
            }
            sorted[k] = v;
        }
        if (k < nblk) eids[k] = k * bs < used ? moe_cu_upper_bound(start, B + 1, k * bs) - 1 : -1;
    }
}

} // namespace

extern "C" moe_status moe_cuda_align_block_size(const moe_tensor *topk_ids, const moe_align_params *p,
                                                moe_tensor *sorted_token_ids, moe_tensor *expert_ids,
                                                moe_tensor *num_tokens_post_pad)
{
    return align_run(topk_ids, p, sorted_token_ids, expert_ids, num_tokens_post_pad, 0);
}

extern "C" moe_status moe_cuda_align_block_size_atomic(const moe_tensor *topk_ids, const moe_align_params *p,
                                                       moe_tensor *sorted_token_ids, moe_tensor *expert_ids,
                                                       moe_tensor *num_tokens_post_pad)
{
    return align_run(topk_ids, p, sorted_token_ids, expert_ids, num_tokens_post_pad, 1);
}

extern "C" moe_status moe_cuda_align_batched(const moe_tensor *expert_num_tokens, int max_tokens, int block_size,
                                             moe_tensor *sorted_token_ids, moe_tensor *expert_ids,
                                             moe_tensor *num_tokens_post_pad)
{
    moe_status st;
    if ((st = moe_cu_expect_dev(expert_num_tokens, "expert_num_tokens")) ||
        (st = moe_cu_expect_dev(sorted_token_ids, "sorted_token_ids")) ||
        (st = moe_cu_expect_dev(expert_ids, "expert_ids")) ||
        (st = moe_cu_expect_dev(num_tokens_post_pad, "num_tokens_post_pad")))
        return st;
    /* the check scans the batch sizes: the one input mirrored with data */
    moe_tensor m_n, m_s, m_e, m_p;
    moe_status cst = MOE_OK;
    const moe_tensor *hn = moe_cu_mirror(expert_num_tokens, &m_n, 1, &cst);
    const moe_tensor *hs = moe_cu_mirror(sorted_token_ids, &m_s, 0, &cst);
    const moe_tensor *he = moe_cu_mirror(expert_ids, &m_e, 0, &cst);
    const moe_tensor *hp = moe_cu_mirror(num_tokens_post_pad, &m_p, 0, &cst);
    st = cst != MOE_OK ? cst : moe_ref_check_align_batched(hn, max_tokens, block_size, hs, he, hp);
    moe_cu_mirror_free(&m_n);
    if (st != MOE_OK) return st;

    const int B = (int)expert_num_tokens->shape[0];
    const int64_t len = sorted_token_ids->shape[0], nblk = expert_ids->shape[0];
    int64_t *start = (int64_t *)moe_cu_scratch((size_t)(B + 1) * sizeof(int64_t), &st);
    if (!start) return st;
    const int32_t *n = (const int32_t *)expert_num_tokens->data;
    align_starts_kernel<<<1, 1024>>>(B, n, block_size, start, (int32_t *)num_tokens_post_pad->data);
    if ((st = moe_cu_launched("align_starts_kernel"))) return st;
    if (len == 0 && nblk == 0) return MOE_OK;
    batched_fill_kernel<<<moe_cu_blocks(len > nblk ? len : nblk, 256), 256>>>(
        len, nblk, B, n, max_tokens, block_size, start, (int32_t *)sorted_token_ids->data,
        (int32_t *)expert_ids->data);
    return moe_cu_launched("batched_fill_kernel");
}
