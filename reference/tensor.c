#include <stdlib.h>
#include <string.h>
#include "moe/tensor.h"

moe_status moe_tensor_layout(moe_dtype dtype, int ndim, const int64_t *shape, size_t *nbytes)
{
    const moe_dtype_info *info = moe_dtype_get(dtype);
    if (!info) return moe_fail(MOE_ERR_DTYPE, "dtype %d: not a moe_dtype", (int)dtype);
    if (ndim < 0 || ndim > MOE_MAX_DIMS)
        return moe_fail(MOE_ERR_SHAPE, "ndim %d: must be in 0..%d", ndim, MOE_MAX_DIMS);
    if (ndim > 0 && !shape) return moe_fail(MOE_ERR_NULL, "shape: must not be NULL");
    uint64_t rows = 1;
    int64_t cols = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return moe_fail(MOE_ERR_SHAPE, "shape[%d] = %lld: extents must be >= 0", i,
                            (long long)shape[i]);
        if (shape[i] > (int64_t)1 << 40)
            return moe_fail(MOE_ERR_NOMEM, "shape[%d] = %lld: extent too large", i,
                            (long long)shape[i]);
    }
    for (int i = 0; i + 1 < ndim; i++) {
        if (shape[i] && rows > UINT64_MAX / (uint64_t)shape[i])
            return moe_fail(MOE_ERR_NOMEM, "shape: element count overflows");
        rows *= (uint64_t)shape[i];
    }
    if (ndim > 0) cols = shape[ndim - 1];
    uint64_t row_bytes = moe_dtype_row_bytes(dtype, cols);
    if (row_bytes && rows > (uint64_t)SIZE_MAX / row_bytes)
        return moe_fail(MOE_ERR_NOMEM, "shape: byte size overflows size_t");
    if (nbytes) *nbytes = (size_t)(rows * row_bytes);
    return MOE_OK;
}

static void fill(moe_tensor *t, moe_dtype dtype, int ndim, const int64_t *shape)
{
    memset(t, 0, sizeof *t);
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < MOE_MAX_DIMS; i++) t->shape[i] = i < ndim ? shape[i] : 1;
}

moe_status moe_tensor_alloc(moe_tensor *t, moe_dtype dtype, int ndim, const int64_t *shape)
{
    if (!t) return moe_fail(MOE_ERR_NULL, "t: must not be NULL");
    memset(t, 0, sizeof *t);
    size_t nb;
    moe_status s = moe_tensor_layout(dtype, ndim, shape, &nb);
    if (s != MOE_OK) return s;
    void *p = calloc(nb ? nb : 1, 1);
    if (!p) return moe_fail(MOE_ERR_NOMEM, "moe_tensor_alloc: %zu bytes not available", nb);
    fill(t, dtype, ndim, shape);
    t->data = p;
    t->nbytes = nb;
    t->owns = 1;
    return MOE_OK;
}

moe_status moe_tensor_wrap(moe_tensor *t, moe_dtype dtype, int ndim, const int64_t *shape,
                           void *data, size_t nbytes, moe_device device)
{
    if (!t) return moe_fail(MOE_ERR_NULL, "t: must not be NULL");
    memset(t, 0, sizeof *t);
    size_t need;
    moe_status s = moe_tensor_layout(dtype, ndim, shape, &need);
    if (s != MOE_OK) return s;
    if (need && !data) return moe_fail(MOE_ERR_NULL, "data: must not be NULL");
    if (nbytes < need)
        return moe_fail(MOE_ERR_SHAPE, "nbytes %zu: the shape needs %zu bytes", nbytes, need);
    if (device.kind != MOE_DEVICE_HOST && device.kind != MOE_DEVICE_CUDA)
        return moe_fail(MOE_ERR_INVALID_ARG, "device.kind %d: not host or cuda", (int)device.kind);
    fill(t, dtype, ndim, shape);
    t->data = data;
    t->nbytes = need;
    t->device = device;
    return MOE_OK;
}

void moe_tensor_free(moe_tensor *t)
{
    if (!t) return;
    if (t->owns && t->device.kind == MOE_DEVICE_HOST) free(t->data);
    memset(t, 0, sizeof *t);
}

int64_t moe_tensor_numel(const moe_tensor *t)
{
    if (!t) return 0;
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

moe_status moe_tensor_expect(const moe_tensor *t, const char *arg, moe_dtype dtype, int ndim)
{
    if (!t) return moe_fail(MOE_ERR_NULL, "%s: must not be NULL", arg);
    if (!t->data && t->nbytes) return moe_fail(MOE_ERR_NULL, "%s: has no data", arg);
    if (t->dtype != dtype) {
        const moe_dtype_info *a = moe_dtype_get(t->dtype), *b = moe_dtype_get(dtype);
        return moe_fail(MOE_ERR_DTYPE, "%s: dtype %s, expected %s", arg, a ? a->name : "?",
                        b ? b->name : "?");
    }
    if (ndim >= 0 && t->ndim != ndim)
        return moe_fail(MOE_ERR_SHAPE, "%s: rank %d, expected %d", arg, t->ndim, ndim);
    return MOE_OK;
}

moe_status moe_tensor_expect_host(const moe_tensor *t, const char *arg, moe_dtype dtype, int ndim)
{
    moe_status s = moe_tensor_expect(t, arg, dtype, ndim);
    if (s != MOE_OK) return s;
    if (t->device.kind != MOE_DEVICE_HOST)
        return moe_fail(MOE_ERR_UNSUPPORTED, "%s: must be a host tensor (the reference runs on the CPU)", arg);
    return MOE_OK;
}
