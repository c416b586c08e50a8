/* moe_cu_gather_rows (rows.cuh): a group of 32..256 threads per output row,
 * the group growing with the row so long rows keep every thread busy. */
#include "rows.cuh"

static __global__ void gather_rows_kernel(const char *__restrict__ x, char *__restrict__ out, int64_t rows,
                                          size_t rb, const int32_t *__restrict__ idx, int64_t div, int64_t mod,
                                          int tpr)
{
    int rpb = (int)blockDim.x / tpr, lane = (int)threadIdx.x % tpr;
    for (int64_t o = (int64_t)blockIdx.x * rpb + (int64_t)threadIdx.x / tpr; o < rows;
         o += (int64_t)gridDim.x * rpb) {
        int64_t s = idx ? (int64_t)idx[o] : o;
        if (s >= 0) {
            s /= div;
            if (mod) s %= mod;
        }
        char *d = out + o * (int64_t)rb;
        if (s < 0) moe_cu_group_zero(d, rb, lane, tpr);
        else moe_cu_group_copy(d, x + s * (int64_t)rb, rb, lane, tpr);
    }
}

moe_status moe_cu_gather_rows(const void *x, void *out, int64_t rows, size_t rb, const int32_t *idx, int64_t div,
                              int64_t mod)
{
    if (rows <= 0 || rb == 0) return MOE_OK;
    int64_t nvec = (int64_t)((rb + 15) / 16);
    int tpr = 32;
    while (tpr < 256 && tpr < nvec) tpr *= 2;
    const int threads = 256;
    gather_rows_kernel<<<moe_cu_blocks(rows, threads / tpr), threads>>>((const char *)x, (char *)out, rows, rb, idx,
                                                                        div, mod, tpr);
    return moe_cu_launched("gather_rows_kernel");
}
