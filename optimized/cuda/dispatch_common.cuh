/* Shared by the dispatch .cu files (CUDA C++ only): scratch carving, the
 * two parallel building blocks every layout here is made of, and warp-wide
 * row movement.
 *
 *   moe_cu_scan_cols     exclusive prefix sums of several int32 columns
 *                        (tile sums, a scan of the tile sums, tile scans);
 *   moe_cu_bucket_rank   the stable rank of each key among the earlier
 *                        equal keys, i.e. the position a sequential walk
 *                        `pos[p] = next[key[p]]++` gives (the reference's
 *                        placement rule): per-tile histograms, a scan of
 *                        each key's tile counts, then within a tile the
 *                        warps in index order, each lane ranked among its
 *                        warp's equal keys with __match_any_sync.
 * Counts may come from atomics (integers are order-free); positions never
 * do, except in the _atomic variants that model upstream's atomics. */
#ifndef MOE_OPTIMIZED_CUDA_DISPATCH_COMMON_CUH
#define MOE_OPTIMIZED_CUDA_DISPATCH_COMMON_CUH

#include <stddef.h>
#include <stdint.h>
#include "cuda_internal.h"
#include "moe/dispatch.h"

/* Carves one scratch region: a first pass with base NULL only adds up the
 * bytes (every piece 256-byte aligned), a second hands out the pieces. */
struct moe_cu_carve {
    char *base;
    size_t off;
    template <class T> T *take(size_t count)
    {
        size_t a = (off + 255) & ~(size_t)255;
        off = a + count * sizeof(T);
        return base ? (T *)(base + a) : nullptr;
    }
};

/* int32 temporaries moe_cu_scan_cols needs for `cols` columns of `len`. */
size_t moe_cu_scan_cols_tmp(int64_t len, int cols);
/* out[c*len + i] = sum of in[c*len + i'] for i' < i; totals[c] = the
 * column's sum (totals may be NULL). in == out is allowed. */
moe_status moe_cu_scan_cols(const int32_t *in, int32_t *out, int32_t *totals, int64_t len, int cols,
                            int32_t *tmp);

/* int32 temporaries moe_cu_bucket_rank needs. */
size_t moe_cu_bucket_rank_tmp(int64_t n, int nb);
/* For keys in [0, nb): rank[p] = #{p' < p : key[p'] == key[p]}; other
 * keys (-1 ids) get rank -1. count[k] = occurrences of k. */
moe_status moe_cu_bucket_rank(const int32_t *key, int64_t n, int nb, int32_t *rank, int32_t *count,
                              int32_t *tmp);

/* Launch geometry of the warp-per-row kernels. */
enum { MOE_CU_ROW_WARPS = 8, MOE_CU_ROW_THREADS = 32 * MOE_CU_ROW_WARPS };

static inline unsigned moe_cu_row_blocks(int64_t rows) { return moe_cu_blocks(rows, MOE_CU_ROW_WARPS); }

/* Bytes of a row moved by one warp: 16-byte words when both ends and the
 * length allow (the common case: rows of bf16 x 8k), else 4-byte words,
 * else bytes. Token movement is a bit copy, never a conversion. */
static __device__ __forceinline__ void moe_cu_warp_copy(void *dst, const void *src, size_t nbytes, int lane)
{
    uintptr_t a = (uintptr_t)dst | (uintptr_t)src | (uintptr_t)nbytes;
    if ((a & 15) == 0) {
        uint4 *d = (uint4 *)dst;
        const uint4 *s = (const uint4 *)src;
        for (size_t i = lane; i < nbytes / 16; i += 32) d[i] = s[i];
    } else if ((a & 3) == 0) {
        uint32_t *d = (uint32_t *)dst;
        const uint32_t *s = (const uint32_t *)src;
        for (size_t i = lane; i < nbytes / 4; i += 32) d[i] = s[i];
    } else {
        uint8_t *d = (uint8_t *)dst;
        const uint8_t *s = (const uint8_t *)src;
        for (size_t i = lane; i < nbytes; i += 32) d[i] = s[i];
    }
}

static __device__ __forceinline__ void moe_cu_warp_zero(void *dst, size_t nbytes, int lane)
{
    uintptr_t a = (uintptr_t)dst | (uintptr_t)nbytes;
    if ((a & 15) == 0) {
        uint4 *d = (uint4 *)dst;
        for (size_t i = lane; i < nbytes / 16; i += 32) d[i] = make_uint4(0, 0, 0, 0);
    } else if ((a & 3) == 0) {
        uint32_t *d = (uint32_t *)dst;
        for (size_t i = lane; i < nbytes / 4; i += 32) d[i] = 0;
    } else {
        uint8_t *d = (uint8_t *)dst;
        for (size_t i = lane; i < nbytes; i += 32) d[i] = 0;
    }
}

/* ---- host-side helpers for the argument checks and the error path -------- */

/* moe_cu_mirror for a struct field (the output structs hold non-const
 * pointers). */
static inline moe_tensor *moe_cu_mirror_field(const moe_tensor *dev, moe_tensor *m, int with_data, moe_status *st)
{
    return (moe_tensor *)moe_cu_mirror(dev, m, with_data, st);
}

/* A host tensor of dev's dtype and shape (NULL dev: NULL, *h empty). */
moe_tensor *moe_cu_host_like(const moe_tensor *dev, moe_tensor *h, moe_status *st);
/* A host copy of dev's bytes (NULL dev: NULL). */
moe_tensor *moe_cu_host_copy(const moe_tensor *dev, moe_tensor *h, moe_status *st);
/* After a reference run on host copies succeeded: its outputs to the device. */
moe_status moe_cu_back_to_dev(const moe_tensor *h, moe_tensor *dev);

#endif
