/* A dense tensor: logical dtype, up to 4 dimensions, contiguous row-major
 * data and a device tag. Packed dtypes (e2m1, int4) pack along the last
 * dimension, each row padded to a whole byte. Host memory is managed here;
 * device memory is allocated by a backend's ops table (DESIGN section 3),
 * which fills the same struct with a device tag. */
#ifndef MOE_TENSOR_H
#define MOE_TENSOR_H

#include <stddef.h>
#include <stdint.h>
#include "moe/dtype.h"
#include "moe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MOE_MAX_DIMS 4

typedef enum { MOE_DEVICE_HOST = 0, MOE_DEVICE_CUDA = 1 } moe_device_kind;

typedef struct {
    moe_device_kind kind;
    int index; /* GPU ordinal; 0 for the host */
} moe_device;

typedef struct {
    moe_dtype dtype;
    int ndim;                       /* 0 .. MOE_MAX_DIMS; 0 is a scalar */
    int64_t shape[MOE_MAX_DIMS];    /* unused trailing entries are 1 */
    moe_device device;
    void *data;
    size_t nbytes;
    int owns;                       /* 1 when moe_tensor_free must free data */
} moe_tensor;

/* Checks dtype, ndim and shape (no negative extent, byte size fits in
 * size_t) and returns the byte size the tensor needs in *nbytes. */
moe_status moe_tensor_layout(moe_dtype dtype, int ndim, const int64_t *shape, size_t *nbytes);

/* Allocates zeroed host memory. On error *t is left empty (data NULL). */
moe_status moe_tensor_alloc(moe_tensor *t, moe_dtype dtype, int ndim, const int64_t *shape);

/* Describes caller-owned memory of `nbytes` bytes, which must be at least
 * the layout's size; the tensor does not own it. */
moe_status moe_tensor_wrap(moe_tensor *t, moe_dtype dtype, int ndim, const int64_t *shape,
                           void *data, size_t nbytes, moe_device device);

/* Frees owned host memory and empties *t; safe on an empty or NULL tensor. */
void moe_tensor_free(moe_tensor *t);

/* Product of the extents (1 for a scalar). */
int64_t moe_tensor_numel(const moe_tensor *t);

/* Argument check for stage entry points: t non-NULL, data present, the
 * dtype and rank as expected (ndim < 0 accepts any rank). The error message
 * names `arg`. */
moe_status moe_tensor_expect(const moe_tensor *t, const char *arg, moe_dtype dtype, int ndim);

/* moe_tensor_expect, and the data must be host memory: the reference
 * stages read their tensors directly. */
moe_status moe_tensor_expect_host(const moe_tensor *t, const char *arg, moe_dtype dtype, int ndim);

#ifdef __cplusplus
}
#endif

#endif
