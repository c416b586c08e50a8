/* Stable bucket ranking on the GPU (CUDA C++ only): the one implementation
 * of "position of each item among the earlier items of its key, in index
 * order" -- the reference's counting sorts and `pos[p] = next[key[p]]++`
 * placements. align.cu, sort_ck.cu and maps_trtllm.cu drive the templated
 * steps below with their own key and placement functors;
 * moe_cu_stable_rank (rank.cu) runs them on an int32 key array for
 * permute.cu and the dispatch files.
 *
 * Every index stage of the reference is a counting sort that visits the
 * (token, slot) pairs in ascending flat index and appends each to its
 * bucket, so a pair's place is bucket_start[b] + (pairs of bucket b before
 * it). The GPU reproduces that order without a serial walk:
 *
 *   1. the flat range is cut into chunks of `ch` pairs, one warp per chunk;
 *      the warp walks its chunk in tiles of 32 consecutive pairs (coalesced)
 *      and adds each tile's per-bucket counts (__match_any_sync groups the
 *      lanes of one bucket) into mat[b * nch + c];
 *   2. one block per bucket scans its row of mat exclusively (chunk order is
 *      flat order), leaving the pairs of b in chunks before c, and writes
 *      the bucket's total;
 *   3. (the stage's own) one block scans the bucket totals, with the
 *      stage's padding, into bucket starts;
 *   4. each warp walks its chunk again: a lane's rank is the number of
 *      lower lanes of its bucket in the tile, and the tile's group size is
 *      added to the warp's private cursor mat[b * nch + c] after use, so a
 *      pair lands at start[b] + cursor + rank -- ascending flat index inside
 *      every bucket, for any grid.
 *
 * Counts are integers, so the atomics of step 1 are order-free; placement
 * never depends on arrival order. Keys are evaluated by a functor
 * (__device__ int operator()(int64_t i) const: bucket, or -1 to drop the
 * pair), placement by another (operator()(int64_t i, int b, int64_t pos)).
 * Ranks are int32: callers keep n <= INT32_MAX. */
#ifndef MOE_OPTIMIZED_CUDA_RANK_CUH
#define MOE_OPTIMIZED_CUDA_RANK_CUH

#include <stdint.h>
#include "cuda_internal.h"

#define MOE_CU_FULL_MASK 0xffffffffu

/* Inactive lanes of a partial tile carry this key: it never equals a real
 * bucket (>= 0) or a dropped pair (-1), so they form their own group. */
#define MOE_CU_KEY_NONE (-2)

/* Per-tile bookkeeping of one warp: its group, rank inside the group and
 * the group's leader (lowest lane). */
struct moe_cu_tile_rank {
    unsigned peers;
    int rank, leader;
};

static __device__ __forceinline__ moe_cu_tile_rank moe_cu_tile_rank_of(int key)
{
    moe_cu_tile_rank r;
    unsigned lane = threadIdx.x & 31u;
    r.peers = __match_any_sync(MOE_CU_FULL_MASK, key);
    r.rank = __popc(r.peers & ((1u << lane) - 1u));
    r.leader = __ffs(r.peers) - 1;
    return r;
}

/* Step 1 for one warp and its chunk [lo, hi): per-bucket counts added to
 * cnt[b * stride] (global or shared memory). */
template <class Key>
static __device__ void moe_cu_warp_count(int64_t lo, int64_t hi, const Key &key, int32_t *cnt, int64_t stride)
{
    unsigned lane = threadIdx.x & 31u;
    for (int64_t base = lo; base < hi; base += 32) {
        int64_t i = base + lane;
        int k = i < hi ? key(i) : MOE_CU_KEY_NONE;
        moe_cu_tile_rank r = moe_cu_tile_rank_of(k);
        if (k >= 0 && (int)lane == r.leader) atomicAdd(&cnt[(int64_t)k * stride], __popc(r.peers));
    }
}

/* Step 4 for one warp: cur[b * stride] is this warp's cursor of bucket b
 * (pairs of b before the current tile, relative to the bucket start). The
 * leader's atomicAdd returns the cursor before the tile; its result is
 * broadcast before the next tile is looked at, so tiles apply in order. */
template <class Key, class Place>
static __device__ void moe_cu_warp_place(int64_t lo, int64_t hi, const Key &key, int32_t *cur, int64_t stride,
                                         const int64_t *start, const Place &place)
{
    unsigned lane = threadIdx.x & 31u;
    for (int64_t base = lo; base < hi; base += 32) {
        int64_t i = base + lane;
        int k = i < hi ? key(i) : MOE_CU_KEY_NONE;
        moe_cu_tile_rank r = moe_cu_tile_rank_of(k);
        int before = 0;
        if (k >= 0 && (int)lane == r.leader) before = atomicAdd(&cur[(int64_t)k * stride], __popc(r.peers));
        before = __shfl_sync(MOE_CU_FULL_MASK, before, r.leader);
        if (k >= 0) place(i, k, start[k] + (int64_t)before + r.rank);
    }
}

/* Exclusive scan of v over the whole block (blockDim.x a multiple of 32);
 * *total gets the block's sum. ws: 32 shared slots. Every thread calls it. */
static __device__ long long moe_cu_block_exscan(long long v, long long *ws, long long *total)
{
    unsigned lane = threadIdx.x & 31u, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    long long x = v;
    for (int o = 1; o < 32; o <<= 1) {
        long long y = __shfl_up_sync(MOE_CU_FULL_MASK, x, o);
        if ((int)lane >= o) x += y;
    }
    if (lane == 31) ws[wid] = x;
    __syncthreads();
    if (wid == 0) {
        long long s = lane < nw ? ws[lane] : 0;
        for (int o = 1; o < 32; o <<= 1) {
            long long y = __shfl_up_sync(MOE_CU_FULL_MASK, s, o);
            if ((int)lane >= o) s += y;
        }
        ws[lane] = s;
    }
    __syncthreads();
    long long before = wid ? ws[wid - 1] : 0;
    *total = ws[nw - 1];
    __syncthreads(); /* ws is reused by the next call */
    return before + x - v;
}

/* Geometry of one ranking: n pairs, nb buckets, nch chunks of ch pairs. */
struct moe_cu_rank_plan {
    int64_t n, nch;
    int nb, ch;
    size_t mat_bytes; /* nb * nch int32 */
};

/* Chunks of 256 pairs (8 tiles per warp) keep many warps busy; the chunk
 * doubles while the count matrix would pass 2^24 entries (huge E). */
static inline moe_cu_rank_plan moe_cu_rank_plan_make(int64_t n, int nb)
{
    moe_cu_rank_plan p;
    p.n = n, p.nb = nb, p.ch = 256;
    p.nch = (n + p.ch - 1) / p.ch;
    while ((int64_t)nb * p.nch > ((int64_t)1 << 24) && p.ch < (1 << 30)) {
        p.ch *= 2;
        p.nch = (n + p.ch - 1) / p.ch;
    }
    p.mat_bytes = (size_t)nb * (size_t)p.nch * sizeof(int32_t);
    return p;
}

template <class Key>
static __global__ void moe_cu_rank_count_kernel(int64_t n, int64_t nch, int ch, Key key, int32_t *mat)
{
    int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t c = warp; c < nch; c += nwarps) {
        int64_t lo = c * ch, hi = lo + ch < n ? lo + ch : n;
        moe_cu_warp_count(lo, hi, key, mat + c, nch);
    }
}

/* Step 2: one block per bucket, its row of mat scanned in place. */
static __global__ void moe_cu_rank_rows_kernel(int nb, int64_t nch, int32_t *mat, int32_t *tot)
{
    __shared__ long long ws[32];
    for (int b = blockIdx.x; b < nb; b += gridDim.x) {
        int32_t *row = mat + (int64_t)b * nch;
        long long carry = 0;
        for (int64_t base = 0; base < nch; base += blockDim.x) {
            int64_t c = base + threadIdx.x;
            long long v = c < nch ? row[c] : 0, sum;
            long long ex = moe_cu_block_exscan(v, ws, &sum);
            if (c < nch) row[c] = (int32_t)(carry + ex);
            carry += sum;
        }
        if (threadIdx.x == 0) tot[b] = (int32_t)carry;
    }
}

template <class Key, class Place>
static __global__ void moe_cu_rank_place_kernel(int64_t n, int64_t nch, int ch, Key key, int32_t *mat,
                                                const int64_t *start, Place place)
{
    int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t c = warp; c < nch; c += nwarps) {
        int64_t lo = c * ch, hi = lo + ch < n ? lo + ch : n;
        moe_cu_warp_place(lo, hi, key, mat + c, nch, start, place);
    }
}

/* Steps 1 and 2: mat (pl.mat_bytes) ends as per-chunk cursors, tot[nb] as
 * bucket totals. */
template <class Key>
static moe_status moe_cu_rank_count(const moe_cu_rank_plan &pl, const Key &key, int32_t *mat, int32_t *tot)
{
    if (pl.mat_bytes) MOE_CU(cudaMemsetAsync(mat, 0, pl.mat_bytes, cudaStreamPerThread));
    if (pl.nch > 0) {
        moe_cu_rank_count_kernel<<<moe_cu_blocks(pl.nch * 32, 256), 256>>>(pl.n, pl.nch, pl.ch, key, mat);
        moe_status st = moe_cu_launched("rank_count_kernel");
        if (st != MOE_OK) return st;
    }
    unsigned g = pl.nb < 65535 ? (unsigned)pl.nb : 65535u;
    moe_cu_rank_rows_kernel<<<g, 256>>>(pl.nb, pl.nch, mat, tot);
    return moe_cu_launched("rank_rows_kernel");
}

/* Step 4, after the caller's bucket starts are on the device. */
template <class Key, class Place>
static moe_status moe_cu_rank_place(const moe_cu_rank_plan &pl, const Key &key, int32_t *mat, const int64_t *start,
                                    const Place &place)
{
    if (pl.nch == 0) return MOE_OK;
    moe_cu_rank_place_kernel<<<moe_cu_blocks(pl.nch * 32, 256), 256>>>(pl.n, pl.nch, pl.ch, key, mat, start, place);
    return moe_cu_launched("rank_place_kernel");
}

/* First index j in [0, n] with a[j] > x (a ascending). */
static __device__ __forceinline__ int moe_cu_upper_bound(const int64_t *a, int n, int64_t x)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = (lo + hi) >> 1;
        if (a[mid] > x) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* Scratch carving: 256-byte aligned pieces of one moe_cu_scratch region. */
static inline size_t moe_cu_align256(size_t b) { return (b + 255) & ~(size_t)255; }

/* ---- on a key array ---------------------------------------------------- */

/* Scratch bytes moe_cu_stable_rank needs (256-byte aligned pieces). */
size_t moe_cu_stable_rank_bytes(int64_t n, int nb);

/* For keys in [0, nb): rank[i] = #{i' < i : keys[i'] == keys[i]}; any other
 * key (-1: no key) gets rank -1. count[b] (may be NULL) = keys equal to b,
 * zero for every b when n is 0. cap >= 0: flags[0] |= 1 when a count
 * exceeds cap (cap < 0: no limit, flags may be NULL). tmp:
 * moe_cu_stable_rank_bytes(n, nb) bytes, 256-byte aligned. */
moe_status moe_cu_stable_rank(const int32_t *keys, int64_t n, int nb, int32_t *rank, int32_t *count, int64_t cap,
                              int32_t *flags, void *tmp);

#endif
