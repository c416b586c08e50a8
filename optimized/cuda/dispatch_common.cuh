/* Shared by the dispatch .cu files (CUDA C++ only): scratch carving, the
 * two parallel building blocks every layout here is made of, and (through
 * rows.cuh) warp-wide row movement.
 *
 *   moe_cu_scan_cols     exclusive prefix sums of several int32 columns
 *                        (tile sums, a scan of the tile sums, tile scans);
 *   moe_cu_stable_rank   (rank.cuh) the stable rank of each key among the
 *                        earlier equal keys, i.e. the position a sequential
 *                        walk `pos[p] = next[key[p]]++` gives (the
 *                        reference's placement rule).
 * Counts may come from atomics (integers are order-free); positions never
 * do, except in the _atomic variants that model upstream's atomics. */
#ifndef MOE_OPTIMIZED_CUDA_DISPATCH_COMMON_CUH
#define MOE_OPTIMIZED_CUDA_DISPATCH_COMMON_CUH

#include <stddef.h>
#include <stdint.h>
#include "cuda_internal.h"
#include "moe/dispatch.h"
#include "rank.cuh"
#include "rows.cuh"

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

/* layout(cv) twice: once to add up the bytes, then on the calling thread's
 * scratch of that size, handing out the pieces. */
template <class F>
static moe_status moe_cu_carve_scratch(F layout)
{
    moe_cu_carve cv = {nullptr, 0};
    layout(cv);
    moe_status st = MOE_OK;
    cv.base = (char *)moe_cu_scratch(cv.off, &st);
    if (st) return st;
    cv.off = 0;
    layout(cv);
    return MOE_OK;
}

/* int32 temporaries moe_cu_scan_cols needs for `cols` columns of `len`. */
size_t moe_cu_scan_cols_tmp(int64_t len, int cols);
/* out[c*len + i] = sum of in[c*len + i'] for i' < i; totals[c] = the
 * column's sum (totals may be NULL). in == out is allowed. */
moe_status moe_cu_scan_cols(const int32_t *in, int32_t *out, int32_t *totals, int64_t len, int cols,
                            int32_t *tmp);

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

/* The reference on host copies, for an error found on the device: the
 * inputs in[0..nin) copied to the host, the outputs out[0..nout) as host
 * tensors of their shapes (NULL stays NULL), run(hi, ho) on them, and on
 * success the outputs copied back. At most 8 of each. */
template <class F>
static moe_status moe_cu_ref_on_host(const moe_tensor *const *in, int nin, moe_tensor *const *out, int nout, F run)
{
    moe_status st = MOE_OK;
    moe_tensor hin[8], hout[8];
    moe_tensor *hi[8], *ho[8];
    for (int i = 0; i < nin; i++) hi[i] = moe_cu_host_copy(in[i], &hin[i], &st);
    for (int i = 0; i < nout; i++) ho[i] = moe_cu_host_like(out[i], &hout[i], &st);
    if (!st) {
        st = run(hi, ho);
        for (int i = 0; i < nout && !st; i++) st = moe_cu_back_to_dev(ho[i], out[i]);
    }
    for (int i = 0; i < nin; i++) moe_tensor_free(&hin[i]);
    for (int i = 0; i < nout; i++) moe_tensor_free(&hout[i]);
    return st;
}

#endif
