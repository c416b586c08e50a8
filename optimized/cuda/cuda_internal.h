/* Shared by the .cu files of optimized/cuda/ (CUDA C++ only): CUDA error -> moe_status,
 * host mirrors for the reference's argument checks, per-thread scratch and
 * launch geometry. Each stage file follows one pattern:
 *
 *   1. moe_cu_expect_dev on every tensor argument (device memory only);
 *   2. the reference's own check, moe_ref_check_<entry> (stage_checks.h),
 *      on host mirrors: moe_cu_mirror(t, &m, 0) copies only the tensor's
 *      description (its data pointer must not be read on the host), with
 *      with_data = 1 the tensor's bytes too, for the inputs the check
 *      scans (ids, maps, static scales);
 *   3. kernels on the calling thread's default stream, each launch checked
 *      with moe_cu_launched;
 *   4. an error the reference finds only while it computes is flagged on
 *      the device (moe_cu_flags) and reported by running the reference
 *      stage on host copies (moe_cu_to_host), whose status and message are
 *      returned.
 * Nothing is static and mutable except the per-thread scratch, so host
 * threads may run stages at once. */
#ifndef MOE_OPTIMIZED_CUDA_INTERNAL_H
#define MOE_OPTIMIZED_CUDA_INTERNAL_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include "cuda.h"
#include "moe/status.h"
#include "moe/tensor.h"

/* MOE_ERR_DEVICE naming the call and the runtime's message. */
moe_status moe_cu_fail(cudaError_t e, const char *what);

#define MOE_CU(call)                                                                                        \
    do {                                                                                                    \
        cudaError_t e_ = (call);                                                                            \
        if (e_ != cudaSuccess) return moe_cu_fail(e_, #call);                                              \
    } while (0)

/* After a launch: the launch error (bad geometry, no device) as a status. */
moe_status moe_cu_launched(const char *kernel);

/* NULL or an empty tensor passes (the reference check judges those);
 * otherwise t must be CUDA device memory. */
moe_status moe_cu_expect_dev(const moe_tensor *t, const char *arg);

/* A host tensor describing dev for the reference's checks. with_data = 0:
 * the description only (same dtype, shape, nbytes; data is dev's pointer,
 * never to be read on the host). with_data = 1: a new host tensor with
 * the layout's bytes copied (free it with moe_cu_mirror_free). dev NULL
 * gives *m empty and returns NULL; otherwise returns m. On a copy error
 * *st is set (unchanged otherwise). */
const moe_tensor *moe_cu_mirror(const moe_tensor *dev, moe_tensor *m, int with_data, moe_status *st);
void moe_cu_mirror_free(moe_tensor *m);

/* dev's layout bytes into a new host tensor of its layout (NULL dev: *h
 * empty); and a host tensor's bytes into an existing device tensor. */
moe_status moe_cu_to_host(const moe_tensor *dev, moe_tensor *h);
moe_status moe_cu_to_dev(const moe_tensor *h, moe_tensor *dev);

/* The calling thread's device scratch, at least `bytes` (grown, never
 * shrunk; contents undefined). One region per call: carve it up. The
 * stream order makes reuse by the next stage on this thread safe. */
void *moe_cu_scratch(size_t bytes, moe_status *st);

/* 64 device int32 error flags for the calling thread, zeroed on the
 * calling thread's stream before returning; read them back with
 * moe_cu_flags_get (synchronizes the stream). */
int32_t *moe_cu_flags(moe_status *st);
moe_status moe_cu_flags_get(const int32_t *dflags, int32_t host[64]);

/* grouped_gemm's device placement and reference checks (gemm.cu); on
 * MOE_OK *row_expert holds row_expert's bytes on the host (free with
 * moe_cu_mirror_free). */
moe_status moe_cu_gemm_checked(const moe_gemm_args *g, const moe_tensor *out, moe_tensor *row_expert);

/* Blocks for n work items at `threads` per block, at least 1, capped so a
 * grid-stride loop covers the rest. */
static inline unsigned moe_cu_blocks(int64_t n, int threads)
{
    int64_t b = (n + threads - 1) / threads;
    if (b < 1) b = 1;
    if (b > 65535 * 16) b = 65535 * 16;
    return (unsigned)b;
}

#endif
