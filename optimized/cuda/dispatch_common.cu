/* The dispatch files' shared pieces (dispatch_common.cuh): column scans,
 * the stable bucket rank, and the host copies of the error path. */
#include <string.h>
#include "dispatch_common.cuh"

namespace {

constexpr int SCAN_THREADS = 256, SCAN_ITEMS = 4, SCAN_TILE = SCAN_THREADS * SCAN_ITEMS;
constexpr int SCAN_TOP = 1024; /* threads of the tile-sum scan */
constexpr int RANK_TILE = 512; /* keys per block of the bucket rank */

/* Exclusive scan of one int per thread over the block (blockDim.x a
 * multiple of 32); *total gets the block's sum. Integer sums: any order
 * gives the same bits. */
__device__ int block_excl_scan(int v, int *total)
{
    __shared__ int warp_sums[32];
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    int x = v;
    for (int o = 1; o < 32; o <<= 1) {
        int y = __shfl_up_sync(0xFFFFFFFFu, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) warp_sums[w] = x;
    __syncthreads();
    if (w == 0) {
        int s = lane < nw ? warp_sums[lane] : 0;
        for (int o = 1; o < 32; o <<= 1) {
            int y = __shfl_up_sync(0xFFFFFFFFu, s, o);
            if (lane >= o) s += y;
        }
        warp_sums[lane] = s; /* inclusive */
    }
    __syncthreads();
    int r = (w ? warp_sums[w - 1] : 0) + x - v;
    *total = warp_sums[nw - 1];
    __syncthreads(); /* warp_sums is reused by the next call */
    return r;
}

__global__ void scan_tile_sums(const int32_t *in, int64_t len, int cols, int64_t ntile, int32_t *tsum)
{
    for (int c = blockIdx.y; c < cols; c += gridDim.y) {
        int64_t base = (int64_t)c * len + (int64_t)blockIdx.x * SCAN_TILE;
        int64_t lim = len - (int64_t)blockIdx.x * SCAN_TILE;
        int s = 0;
        for (int q = 0; q < SCAN_ITEMS; q++) {
            int64_t i = (int64_t)q * SCAN_THREADS + threadIdx.x; /* coalesced; a sum is order-free */
            if (i < lim) s += in[base + i];
        }
        int tot;
        block_excl_scan(s, &tot);
        if (threadIdx.x == 0) tsum[(int64_t)c * ntile + blockIdx.x] = tot;
    }
}

__global__ void scan_tile_offsets(int32_t *tsum, int64_t ntile, int cols, int32_t *totals)
{
    for (int c = blockIdx.x; c < cols; c += gridDim.x) {
        int32_t *t = tsum + (int64_t)c * ntile;
        int carry = 0;
        for (int64_t b = 0; b < ntile; b += SCAN_TOP) {
            int64_t i = b + threadIdx.x;
            int v = i < ntile ? t[i] : 0, tot;
            int x = block_excl_scan(v, &tot);
            if (i < ntile) t[i] = carry + x;
            carry += tot;
        }
        if (totals && threadIdx.x == 0) totals[c] = carry;
    }
}

__global__ void scan_tiles(const int32_t *in, int32_t *out, int64_t len, int cols, int64_t ntile,
                           const int32_t *toff)
{
    for (int c = blockIdx.y; c < cols; c += gridDim.y) {
        int64_t base = (int64_t)c * len + (int64_t)blockIdx.x * SCAN_TILE;
        int64_t lim = len - (int64_t)blockIdx.x * SCAN_TILE;
        int v[SCAN_ITEMS], s = 0;
        for (int q = 0; q < SCAN_ITEMS; q++) {
            int64_t i = (int64_t)threadIdx.x * SCAN_ITEMS + q; /* a thread's items are consecutive */
            v[q] = i < lim ? in[base + i] : 0;
            s += v[q];
        }
        int tot;
        int run = toff[(int64_t)c * ntile + blockIdx.x] + block_excl_scan(s, &tot);
        for (int q = 0; q < SCAN_ITEMS; q++) {
            int64_t i = (int64_t)threadIdx.x * SCAN_ITEMS + q;
            if (i < lim) out[base + i] = run;
            run += v[q];
        }
    }
}

/* hist[k*ntile + tile] += keys k in the tile; one atomic per group of
 * equal keys in a warp. */
__global__ void rank_hist(const int32_t *key, int64_t n, int nb, int64_t ntile, int32_t *hist)
{
    int64_t p = (int64_t)blockIdx.x * RANK_TILE + threadIdx.x;
    int lane = threadIdx.x & 31;
    int k = p < n ? key[p] : -1;
    int valid = k >= 0 && k < nb;
    unsigned peers = __match_any_sync(0xFFFFFFFFu, valid ? k : -1);
    if (valid && lane == __ffs(peers) - 1) atomicAdd(&hist[(int64_t)k * ntile + blockIdx.x], __popc(peers));
}

/* run[k*ntile + tile] starts as the keys k before the tile; the warps of
 * the tile take their ranks in index order, each advancing run[k] by its
 * own keys k, so rank = the sequential walk's position. */
__global__ void rank_tiles(const int32_t *key, int64_t n, int nb, int64_t ntile, int32_t *run, int32_t *rank)
{
    int64_t p = (int64_t)blockIdx.x * RANK_TILE + threadIdx.x;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int k = p < n ? key[p] : -1;
    int valid = k >= 0 && k < nb;
    unsigned peers = __match_any_sync(0xFFFFFFFFu, valid ? k : -1);
    int within = __popc(peers & ((1u << lane) - 1u));
    volatile int32_t *slot = valid ? run + (int64_t)k * ntile + blockIdx.x : nullptr;
    for (int w = 0; w < RANK_TILE / 32; w++) {
        if (w == warp) { /* warp-uniform */
            int base = valid ? *slot : 0;
            __syncwarp();
            if (valid && lane == __ffs(peers) - 1) *slot = base + __popc(peers);
            if (p < n) rank[p] = valid ? base + within : -1;
        }
        __syncthreads(); /* the next warp reads the advanced counters */
    }
}

} // namespace

size_t moe_cu_scan_cols_tmp(int64_t len, int cols)
{
    int64_t ntile = (len + SCAN_TILE - 1) / SCAN_TILE;
    return (size_t)(ntile > 0 ? ntile : 1) * (size_t)(cols > 0 ? cols : 1);
}

moe_status moe_cu_scan_cols(const int32_t *in, int32_t *out, int32_t *totals, int64_t len, int cols,
                            int32_t *tmp)
{
    if (cols <= 0) return MOE_OK;
    if (len <= 0) {
        if (totals) MOE_CU(cudaMemsetAsync(totals, 0, (size_t)cols * sizeof *totals, cudaStreamPerThread));
        return MOE_OK;
    }
    int64_t ntile = (len + SCAN_TILE - 1) / SCAN_TILE;
    dim3 grid((unsigned)ntile, (unsigned)(cols < 65535 ? cols : 65535));
    scan_tile_sums<<<grid, SCAN_THREADS>>>(in, len, cols, ntile, tmp);
    moe_status st = moe_cu_launched("scan_tile_sums");
    if (st) return st;
    scan_tile_offsets<<<(unsigned)(cols < 65535 ? cols : 65535), SCAN_TOP>>>(tmp, ntile, cols, totals);
    if ((st = moe_cu_launched("scan_tile_offsets"))) return st;
    scan_tiles<<<grid, SCAN_THREADS>>>(in, out, len, cols, ntile, tmp);
    return moe_cu_launched("scan_tiles");
}

size_t moe_cu_bucket_rank_tmp(int64_t n, int nb)
{
    int64_t ntile = (n + RANK_TILE - 1) / RANK_TILE;
    if (ntile < 1) ntile = 1;
    size_t hist = (size_t)ntile * (size_t)(nb > 0 ? nb : 1);
    /* the histogram, 64-int padding, the scan's tile sums */
    return hist + 64 + moe_cu_scan_cols_tmp(ntile, nb);
}

moe_status moe_cu_bucket_rank(const int32_t *key, int64_t n, int nb, int32_t *rank, int32_t *count,
                              int32_t *tmp)
{
    if (nb > 0) MOE_CU(cudaMemsetAsync(count, 0, (size_t)nb * sizeof *count, cudaStreamPerThread));
    if (n <= 0 || nb <= 0) {
        if (n > 0) MOE_CU(cudaMemsetAsync(rank, 0xFF, (size_t)n * sizeof *rank, cudaStreamPerThread));
        return MOE_OK;
    }
    int64_t ntile = (n + RANK_TILE - 1) / RANK_TILE;
    size_t hist_n = (size_t)ntile * (size_t)nb;
    int32_t *hist = tmp, *stmp = tmp + hist_n + 64;
    MOE_CU(cudaMemsetAsync(hist, 0, hist_n * sizeof *hist, cudaStreamPerThread));
    rank_hist<<<(unsigned)ntile, RANK_TILE>>>(key, n, nb, ntile, hist);
    moe_status st = moe_cu_launched("rank_hist");
    if (st) return st;
    /* each key's column of tile counts becomes its tile offsets */
    if ((st = moe_cu_scan_cols(hist, hist, count, ntile, nb, stmp))) return st;
    rank_tiles<<<(unsigned)ntile, RANK_TILE>>>(key, n, nb, ntile, hist, rank);
    return moe_cu_launched("rank_tiles");
}

moe_tensor *moe_cu_host_like(const moe_tensor *dev, moe_tensor *h, moe_status *st)
{
    memset(h, 0, sizeof *h);
    if (!dev) return nullptr;
    moe_status s = moe_tensor_alloc(h, dev->dtype, dev->ndim, dev->shape);
    if (s && !*st) *st = s;
    return h;
}

moe_tensor *moe_cu_host_copy(const moe_tensor *dev, moe_tensor *h, moe_status *st)
{
    memset(h, 0, sizeof *h);
    if (!dev) return nullptr;
    moe_status s = moe_cu_to_host(dev, h);
    if (s && !*st) *st = s;
    return h;
}

moe_status moe_cu_back_to_dev(const moe_tensor *h, moe_tensor *dev)
{
    if (!h || !dev) return MOE_OK;
    return moe_cu_to_dev(h, dev);
}
