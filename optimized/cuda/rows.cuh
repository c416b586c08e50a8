/* Row movement on the GPU (CUDA C++ only): rows are bytes, copied bit for
 * bit whatever the dtype, never converted.
 *
 *   moe_cu_group_copy/zero  one row moved by a group of threads (a warp in
 *                           the dispatch kernels, 32..256 threads in the
 *                           gather): 16-byte words when both ends and the
 *                           length allow (the common case: rows of bf16 x
 *                           8k), else 4-byte words, else bytes;
 *   moe_cu_gather_rows      out[o] = x[src(o)] or a zero row, for the
 *                           stages whose output rows are each named by an
 *                           index (permute.cu, dispatch_pplx.cu). */
#ifndef MOE_OPTIMIZED_CUDA_ROWS_CUH
#define MOE_OPTIMIZED_CUDA_ROWS_CUH

#include <stddef.h>
#include <stdint.h>
#include "cuda_internal.h"

/* nbytes from src to dst by the `group` threads of lane 0..group-1. */
static __device__ __forceinline__ void moe_cu_group_copy(void *dst, const void *src, size_t nbytes, int lane,
                                                         int group)
{
    uintptr_t a = (uintptr_t)dst | (uintptr_t)src | (uintptr_t)nbytes;
    if ((a & 15) == 0) {
        uint4 *d = (uint4 *)dst;
        const uint4 *s = (const uint4 *)src;
        for (size_t i = lane; i < nbytes / 16; i += group) d[i] = s[i];
    } else if ((a & 3) == 0) {
        uint32_t *d = (uint32_t *)dst;
        const uint32_t *s = (const uint32_t *)src;
        for (size_t i = lane; i < nbytes / 4; i += group) d[i] = s[i];
    } else {
        uint8_t *d = (uint8_t *)dst;
        const uint8_t *s = (const uint8_t *)src;
        for (size_t i = lane; i < nbytes; i += group) d[i] = s[i];
    }
}

static __device__ __forceinline__ void moe_cu_group_zero(void *dst, size_t nbytes, int lane, int group)
{
    uintptr_t a = (uintptr_t)dst | (uintptr_t)nbytes;
    if ((a & 15) == 0) {
        uint4 *d = (uint4 *)dst;
        for (size_t i = lane; i < nbytes / 16; i += group) d[i] = make_uint4(0, 0, 0, 0);
    } else if ((a & 3) == 0) {
        uint32_t *d = (uint32_t *)dst;
        for (size_t i = lane; i < nbytes / 4; i += group) d[i] = 0;
    } else {
        uint8_t *d = (uint8_t *)dst;
        for (size_t i = lane; i < nbytes; i += group) d[i] = 0;
    }
}

/* One warp per row (lane = threadIdx.x & 31). */
static __device__ __forceinline__ void moe_cu_warp_copy(void *dst, const void *src, size_t nbytes, int lane)
{
    moe_cu_group_copy(dst, src, nbytes, lane, 32);
}

static __device__ __forceinline__ void moe_cu_warp_zero(void *dst, size_t nbytes, int lane)
{
    moe_cu_group_zero(dst, nbytes, lane, 32);
}

/* Output row o of a dispatch: token g's bytes (xrow) and, with os, its
 * scales (srow), or zeros for both where g < 0. */
static __device__ __forceinline__ void moe_cu_warp_token_row(char *ox, char *os, const char *x, const char *xs,
                                                             size_t xrow, size_t srow, int64_t o, int64_t g, int lane)
{
    if (g < 0) {
        moe_cu_warp_zero(ox + o * xrow, xrow, lane);
        if (os) moe_cu_warp_zero(os + o * srow, srow, lane);
    } else {
        moe_cu_warp_copy(ox + o * xrow, x + g * xrow, xrow, lane);
        if (os) moe_cu_warp_copy(os + o * srow, xs + g * srow, srow, lane);
    }
}

/* Launch geometry of the warp-per-row kernels. */
enum { MOE_CU_ROW_WARPS = 8, MOE_CU_ROW_THREADS = 32 * MOE_CU_ROW_WARPS };

static inline unsigned moe_cu_row_blocks(int64_t rows) { return moe_cu_blocks(rows, MOE_CU_ROW_WARPS); }

/* out[o] (rb bytes, o < rows) = x[s] with s = idx[o] (o when idx is NULL)
 * mapped by (s / div) % mod (mod 0: no modulo); s < 0 gives a zero row. */
moe_status moe_cu_gather_rows(const void *x, void *out, int64_t rows, size_t rb, const int32_t *idx, int64_t div,
                              int64_t mod);

#endif
