/* The helpers of cuda_internal.h. */
#include <stdlib.h>
#include <string.h>
#include "cuda_internal.h"

moe_status moe_cu_fail(cudaError_t e, const char *what)
{
    return moe_fail(MOE_ERR_DEVICE, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

moe_status moe_cu_launched(const char *kernel)
{
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? MOE_OK : moe_cu_fail(e, kernel);
}

moe_status moe_cu_expect_dev(const moe_tensor *t, const char *arg)
{
    if (!t || !t->data) return MOE_OK;
    if (t->device.kind != MOE_DEVICE_CUDA)
        return moe_fail(MOE_ERR_INVALID_ARG, "%s: host memory; the cuda backends take CUDA device tensors (ops.alloc)",
                        arg);
    return MOE_OK;
}

moe_status moe_cu_to_host(const moe_tensor *dev, moe_tensor *h)
{
    memset(h, 0, sizeof *h);
    if (!dev) return MOE_OK;
    size_t nb;
    moe_status st = moe_tensor_layout(dev->dtype, dev->ndim, dev->shape, &nb);
    if (st || (st = moe_tensor_alloc(h, dev->dtype, dev->ndim, dev->shape))) return st;
    if (nb && dev->data) {
        cudaError_t e = cudaMemcpy(h->data, dev->data, nb, cudaMemcpyDefault);
        if (e != cudaSuccess) {
            moe_tensor_free(h);
            return moe_cu_fail(e, "copy to the host");
        }
    }
    return MOE_OK;
}

moe_status moe_cu_to_dev(const moe_tensor *h, moe_tensor *dev)
{
    size_t nb;
    moe_status st = moe_tensor_layout(h->dtype, h->ndim, h->shape, &nb);
    if (st) return st;
    if (nb) MOE_CU(cudaMemcpy(dev->data, h->data, nb, cudaMemcpyDefault));
    return MOE_OK;
}

const moe_tensor *moe_cu_mirror(const moe_tensor *dev, moe_tensor *m, int with_data, moe_status *st)
{
    memset(m, 0, sizeof *m);
    if (!dev) return NULL;
    if (!with_data || !dev->data) {
        *m = *dev;
        m->owns = 0;
        m->device = (moe_device){MOE_DEVICE_HOST, 0};
        return m;
    }
    moe_status s = moe_cu_to_host(dev, m);
    if (s) *st = s;
    return m;
}

void moe_cu_mirror_free(moe_tensor *m)
{
    if (m && m->owns) moe_tensor_free(m);
}

/* ---- per-thread scratch and flags ------------------------------------------- */
namespace {
struct thread_buffers {
    void *scratch = nullptr;
    size_t scratch_bytes = 0;
    int32_t *flags = nullptr;
    ~thread_buffers()
    {
        cudaFree(scratch);
        cudaFree(flags);
    }
};
thread_local thread_buffers tb;
} // namespace

void *moe_cu_scratch(size_t bytes, moe_status *st)
{
    if (bytes <= tb.scratch_bytes && tb.scratch) return tb.scratch;
    if (tb.scratch) {
        cudaError_t e = cudaStreamSynchronize(cudaStreamPerThread);
        if (e == cudaSuccess) e = cudaFree(tb.scratch);
        if (e != cudaSuccess) return *st = moe_cu_fail(e, "scratch: free"), nullptr;
        tb.scratch = nullptr, tb.scratch_bytes = 0;
    }
    size_t want = bytes < 1024 ? 1024 : bytes;
    cudaError_t e = cudaMalloc(&tb.scratch, want);
    if (e != cudaSuccess) {
        tb.scratch = nullptr;
        *st = moe_cu_fail(e, "scratch: cudaMalloc");
        return nullptr;
    }
    tb.scratch_bytes = want;
    return tb.scratch;
}

int32_t *moe_cu_flags(moe_status *st)
{
    if (!tb.flags) {
        cudaError_t e = cudaMalloc(&tb.flags, 64 * sizeof(int32_t));
        if (e != cudaSuccess) return tb.flags = nullptr, *st = moe_cu_fail(e, "flags: cudaMalloc"), nullptr;
    }
    cudaError_t e = cudaMemsetAsync(tb.flags, 0, 64 * sizeof(int32_t), cudaStreamPerThread);
    if (e != cudaSuccess) return *st = moe_cu_fail(e, "flags: cudaMemsetAsync"), nullptr;
    return tb.flags;
}

moe_status moe_cu_flags_get(const int32_t *dflags, int32_t host[64])
{
    MOE_CU(cudaMemcpy(host, dflags, 64 * sizeof(int32_t), cudaMemcpyDeviceToHost));
    return MOE_OK;
}
