/* The dispatch files' shared pieces (dispatch_common.cuh): column scans
 * and the host copies of the error path. */
#include <string.h>
#include "dispatch_common.cuh"

namespace {

constexpr int SCAN_THREADS = 256, SCAN_ITEMS = 4, SCAN_TILE = SCAN_THREADS * SCAN_ITEMS;
constexpr int SCAN_TOP = 1024; /* threads of the tile-sum scan */

/* rank.cuh's block scan on ints (the sums are int32 counts; the narrowing
 * wraps exactly as int arithmetic would). */
__device__ int block_excl_scan(int v, int *total)
{
    __shared__ long long ws[32];
    long long t, r = moe_cu_block_exscan(v, ws, &t);
    *total = (int)t;
    return (int)r;
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
