/* CK-tile moe-sorting on the GPU (reference/sort_ck.c is the oracle).
 *
 * Layout: experts ascending, tokens ascending inside an expert, segments
 * padded to unit_size with the sentinel (weight 0), masked experts absent,
 * tiles carrying compact local ids. The pair order is the reference's
 * token-major walk, i.e. ascending flat index t*topk + k per expert, which
 * the stable bucket ranking of rank.cuh reproduces: per-chunk counts,
 * a scan per expert over chunks, one block scanning the padded segment
 * sizes (and the local ids of unmasked experts), then each warp places its
 * chunk in flat order. Sentinels and tile ids are written one thread per
 * entry, each entry finding its expert by binary search over the segment
 * starts; entries past the padded total stay untouched, as in CK.
 *
 * The reference finds bad ids (out of range, repeated in a row), a padded
 * total past int32 and outputs too short for this input only while it
 * counts. Here they set device flags; every writing kernel is gated on the
 * flags (so, as in the reference, nothing is written on error), and the
 * host reads them after the kernels and, if one is set, runs the reference
 * on host copies for its status and message. */
#include <string.h>
#include "cuda_internal.h"
#include "rank.cuh"
/* stage_checks.h has no C++ guards of its own */
extern "C" {
#include "reference/stage_checks.h"
}

namespace {

enum { F_IDS = 0, F_TOTAL = 1, F_SIZE = 2 };

__device__ __forceinline__ bool sck_failed(const int32_t *flags)
{
    return (flags[F_IDS] | flags[F_TOTAL] | flags[F_SIZE]) != 0;
}

/* Masked experts' pairs vanish (-1); an id outside [0, E) is flagged. */
struct sck_key {
    const int32_t *ids, *mask;
    int E;
    int32_t *flags;
    __device__ int operator()(int64_t i) const
    {
        int e = ids[i];
        if (e < 0 || e >= E) {
            flags[F_IDS] = 1;
            return -1;
        }
        return mask && !mask[e] ? -1 : e;
    }
};

struct sck_place {
    uint32_t *out_id, *out_w;
    const uint32_t *w;
    int topk, mock;
    const int32_t *flags;
    __device__ void operator()(int64_t i, int, int64_t pos) const
    {
        if (sck_failed(flags)) return;
        uint32_t t = (uint32_t)(i / topk), k = (uint32_t)(i % topk);
        out_id[pos] = mock ? t | k << 24 : t;
        out_w[pos] = w[i]; /* bits, NaN payloads too */
    }
};

/* A row selecting one expert twice: one thread per pair, looking back
 * over the earlier slots of its row. */
__global__ void sck_dup_kernel(int64_t n, int topk, const int32_t *ids, int32_t *flags)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int32_t e = ids[i];
        for (int64_t r = i - i % topk; r < i; r++)
            if (ids[r] == e) flags[F_IDS] = 1;
    }
}

/* Segment starts (B.3) and the local id of every expert (the unmasked
 * experts below it), then the totals the reference checks. */
__global__ void sck_starts_kernel(int E, const int32_t *cnt, const int32_t *mask, int64_t unit, int one_tile,
                                  int64_t len_ids, int64_t len_tiles, int32_t T, int64_t *start, int32_t *local,
                                  int32_t *ntpp, int32_t *flags)
{
    __shared__ long long ws[32];
    if (flags[F_IDS]) return; /* the whole block leaves together */
    long long carry = 0, carry_l = 0;
    for (int base = 0; base < E; base += blockDim.x) {
        int e = base + threadIdx.x;
        long long seg = 0, on = 0, sum, sum_l;
        if (e < E && (!mask || mask[e])) {
            on = 1;
            seg = ((long long)cnt[e] + unit - 1) / unit * unit;
            if (cnt[e] == 0 && one_tile) seg = unit;
        }
        long long ex = moe_cu_block_exscan(seg, ws, &sum);
        long long ex_l = moe_cu_block_exscan(on, ws, &sum_l);
        if (e < E) {
            start[e] = carry + ex;
            local[e] = (int32_t)(carry_l + ex_l);
        }
        carry += sum;
        carry_l += sum_l;
    }
    if (threadIdx.x == 0) {
        start[E] = carry;
        if (carry > INT32_MAX) flags[F_TOTAL] = 1;
        else if (len_ids < carry || len_tiles < carry / unit) flags[F_SIZE] = 1;
        else ntpp[0] = (int32_t)carry, ntpp[1] = T;
    }
}

/* Pads of each segment (past its count) and the tile ids. */
__global__ void sck_fill_kernel(int E, const int64_t *start, const int32_t *cnt, const int32_t *local, int64_t unit,
                                uint32_t sentinel, uint32_t *out_id, uint32_t *out_w, int32_t *tile,
                                const int32_t *flags)
{
    if (sck_failed(flags)) return;
    int64_t total = start[E], step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < total; p += step) {
        int e = moe_cu_upper_bound(start, E + 1, p) - 1;
        if (p - start[e] >= cnt[e]) {
            out_id[p] = sentinel;
            out_w[p] = 0u; /* 0.0f */
        }
        if (p % unit == 0) tile[p / unit] = local[e];
    }
}

/* The reference on host copies (inputs and the outputs' current bytes);
 * its outputs go back only if it succeeds. */
moe_status sck_on_host(const moe_tensor *topk_ids, const moe_tensor *topk_weights, const moe_sort_ck_params *params,
                       moe_tensor *sorted_token_ids, moe_tensor *sorted_weights, moe_tensor *sorted_expert_ids,
                       moe_tensor *num_tokens_post_padded)
{
    moe_tensor h[7];
    moe_tensor *dev_out[4] = {sorted_token_ids, sorted_weights, sorted_expert_ids, num_tokens_post_padded};
    memset(h, 0, sizeof h);
    moe_sort_ck_params hp = *params;
    moe_status st;
    if (!(st = moe_cu_to_host(topk_ids, &h[0])) && !(st = moe_cu_to_host(topk_weights, &h[1])) &&
        !(st = moe_cu_to_host(params->local_expert_mask, &h[2])) && !(st = moe_cu_to_host(dev_out[0], &h[3])) &&
        !(st = moe_cu_to_host(dev_out[1], &h[4])) && !(st = moe_cu_to_host(dev_out[2], &h[5])) &&
        !(st = moe_cu_to_host(dev_out[3], &h[6]))) {
        hp.local_expert_mask = params->local_expert_mask ? &h[2] : NULL;
        st = moe_ref_sort_ck(&h[0], &h[1], &hp, &h[3], &h[4], &h[5], &h[6]);
        for (int i = 0; i < 4 && st == MOE_OK; i++) st = moe_cu_to_dev(&h[3 + i], dev_out[i]);
    }
    for (int i = 0; i < 7; i++) moe_tensor_free(&h[i]);
    return st;
}

} // namespace

extern "C" moe_status moe_cuda_sort_ck(const moe_tensor *topk_ids, const moe_tensor *topk_weights,
                                       const moe_sort_ck_params *params, moe_tensor *sorted_token_ids,
                                       moe_tensor *sorted_weights, moe_tensor *sorted_expert_ids,
                                       moe_tensor *num_tokens_post_padded)
{
    moe_status st;
    if ((st = moe_cu_expect_dev(topk_ids, "topk_ids")) || (st = moe_cu_expect_dev(topk_weights, "topk_weights")) ||
        (params && (st = moe_cu_expect_dev(params->local_expert_mask, "local_expert_mask"))) ||
        (st = moe_cu_expect_dev(sorted_token_ids, "sorted_token_ids")) ||
        (st = moe_cu_expect_dev(sorted_weights, "sorted_weights")) ||
        (st = moe_cu_expect_dev(sorted_expert_ids, "sorted_expert_ids")) ||
        (st = moe_cu_expect_dev(num_tokens_post_padded, "num_tokens_post_padded")))
        return st;
    {
        /* the check reads the mask's entries only; the ids are the stage's */
        moe_tensor m[7];
        moe_status cst = MOE_OK;
        moe_sort_ck_params hp;
        const moe_sort_ck_params *hpp = NULL;
        memset(&m[2], 0, sizeof m[2]);
        if (params) {
            hp = *params;
            hp.local_expert_mask = moe_cu_mirror(params->local_expert_mask, &m[2], 1, &cst);
            hpp = &hp;
        }
        const moe_tensor *a = moe_cu_mirror(topk_ids, &m[0], 0, &cst);
        const moe_tensor *b = moe_cu_mirror(topk_weights, &m[1], 0, &cst);
        const moe_tensor *c = moe_cu_mirror(sorted_token_ids, &m[3], 0, &cst);
        const moe_tensor *d = moe_cu_mirror(sorted_weights, &m[4], 0, &cst);
        const moe_tensor *e = moe_cu_mirror(sorted_expert_ids, &m[5], 0, &cst);
        const moe_tensor *f = moe_cu_mirror(num_tokens_post_padded, &m[6], 0, &cst);
        st = cst != MOE_OK ? cst : moe_ref_check_sort_ck(a, b, hpp, c, d, e, f);
        moe_cu_mirror_free(&m[2]);
        if (st != MOE_OK) return st;
    }
    const int64_t T = topk_ids->shape[0];
    const int topk = (int)topk_ids->shape[1], E = params->num_experts;
    const int64_t n = T * topk;
    /* past the int32 ranks the padded total overflows anyway: the
     * reference reports it */
    if (n > INT32_MAX)
        return sck_on_host(topk_ids, topk_weights, params, sorted_token_ids, sorted_weights, sorted_expert_ids,
                           num_tokens_post_padded);
    const int32_t *ids = (const int32_t *)topk_ids->data;
    const int32_t *mask = params->local_expert_mask ? (const int32_t *)params->local_expert_mask->data : NULL;
    const int mock = params->id_mode == MOE_SORT_CK_MOCK_ID;
    const uint32_t sentinel = mock ? (uint32_t)T | (uint32_t)topk << 24 : (uint32_t)T;
    uint32_t *out_id = (uint32_t *)sorted_token_ids->data, *out_w = (uint32_t *)sorted_weights->data;

    int32_t *flags = moe_cu_flags(&st);
    if (!flags) return st;
    moe_cu_rank_plan pl = moe_cu_rank_plan_make(n, E);
    size_t o_cnt = moe_cu_align256(pl.mat_bytes), o_start = o_cnt + moe_cu_align256((size_t)E * 2 * sizeof(int32_t));
    char *scr = (char *)moe_cu_scratch(o_start + (size_t)(E + 1) * sizeof(int64_t), &st);
    if (!scr) return st;
    int32_t *mat = (int32_t *)scr, *cnt = (int32_t *)(scr + o_cnt), *local = cnt + E;
    int64_t *start = (int64_t *)(scr + o_start);
    sck_key key = {ids, mask, E, flags};

    if (n > 0) {
        sck_dup_kernel<<<moe_cu_blocks(n, 256), 256>>>(n, topk, ids, flags);
        if ((st = moe_cu_launched("sck_dup_kernel"))) return st;
    }
    if ((st = moe_cu_rank_count(pl, key, mat, cnt))) return st;
    sck_starts_kernel<<<1, 1024>>>(E, cnt, mask, params->unit_size,
                                   params->empty_experts == MOE_SORT_CK_ONE_TILE_PER_EMPTY, sorted_token_ids->shape[0],
                                   sorted_expert_ids->shape[0], (int32_t)T, start, local,
                                   (int32_t *)num_tokens_post_padded->data, flags);
    if ((st = moe_cu_launched("sck_starts_kernel"))) return st;
    if (sorted_token_ids->shape[0] > 0) {
        sck_fill_kernel<<<moe_cu_blocks(sorted_token_ids->shape[0], 256), 256>>>(
            E, start, cnt, local, params->unit_size, sentinel, out_id, out_w, (int32_t *)sorted_expert_ids->data,
            flags);
        if ((st = moe_cu_launched("sck_fill_kernel"))) return st;
    }
    sck_place place = {out_id, out_w, (const uint32_t *)topk_weights->data, topk, mock, flags};
    if ((st = moe_cu_rank_place(pl, key, mat, start, place))) return st;

    int32_t hf[64];
    if ((st = moe_cu_flags_get(flags, hf))) return st;
    if (hf[F_IDS] | hf[F_TOTAL] | hf[F_SIZE])
        return sck_on_host(topk_ids, topk_weights, params, sorted_token_ids, sorted_weights, sorted_expert_ids,
                           num_tokens_post_padded);
    return MOE_OK;
}
