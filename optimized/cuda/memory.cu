/* Memory entries of the CUDA tables: device memory from plain cudaMalloc
 * (zeroed, as the table's alloc promises); copy moves layout bytes between
 * host and device in either direction (cudaMemcpyDefault: unified
 * addressing tells them apart); synchronize waits for the calling
 * thread's default stream.
 *
 * Freed blocks are kept for reuse (power-of-two sizes from 512 bytes, up
 * to 8 GiB cached): cudaFree synchronizes the whole device, and the
 * harnesses allocate and free every staged copy of every stage call, from
 * many host threads at once (moe-sweep --jobs), which cudaFree serialized.
 * A block goes back to the cache only after the freeing thread's stream is
 * idle, so no pending kernel of that thread still uses it; a tensor is
 * used on the thread that made it (the staged view and the harnesses do
 * so). Blocks are found by address, so a tensor whose shape was changed
 * after allocation still returns its own block. */
#include <mutex>
#include <stdio.h>
#include <string.h>
#include <unordered_map>
#include <vector>
#include "cuda_internal.h"

namespace {
constexpr int MIN_LOG2 = 9, MAX_LOG2 = 48;
constexpr size_t CACHE_LIMIT = (size_t)8 << 30;

struct block_cache {
    std::mutex mu;
    std::vector<void *> free_list[MAX_LOG2 + 1];
    std::unordered_map<void *, int> size_log2; /* every live or cached block */
    size_t cached = 0;
};
block_cache &cache()
{
    static block_cache *c = new block_cache; /* never destroyed: blocks may be freed during exit */
    return *c;
}

int log2_ceil(size_t n)
{
    int b = MIN_LOG2;
    while (b < MAX_LOG2 && ((size_t)1 << b) < n) b++;
    return b;
}

/* cudaFree every cached block (an allocation failed: give memory back) */
void release_cached(block_cache &c)
{
    for (int b = 0; b <= MAX_LOG2; b++) {
        for (void *p : c.free_list[b]) {
            cudaFree(p);
            c.size_log2.erase(p);
        }
        c.free_list[b].clear();
    }
    c.cached = 0;
}

cudaError_t block_alloc(void **p, size_t n)
{
    block_cache &c = cache();
    int b = log2_ceil(n);
    if (((size_t)1 << b) < n) return cudaErrorMemoryAllocation; /* past 2^48 bytes */
    std::lock_guard<std::mutex> g(c.mu);
    if (!c.free_list[b].empty()) {
        *p = c.free_list[b].back();
        c.free_list[b].pop_back();
        c.cached -= (size_t)1 << b;
        return cudaSuccess;
    }
    cudaError_t e = cudaMalloc(p, (size_t)1 << b);
    if (e == cudaErrorMemoryAllocation && c.cached) {
        cudaGetLastError();
        release_cached(c);
        e = cudaMalloc(p, (size_t)1 << b);
    }
    if (e == cudaSuccess) c.size_log2[*p] = b;
    return e;
}

void block_free(void *p)
{
    block_cache &c = cache();
    cudaStreamSynchronize(cudaStreamPerThread);
    std::lock_guard<std::mutex> g(c.mu);
    auto it = c.size_log2.find(p);
    if (it == c.size_log2.end()) { /* not ours: a plain device allocation */
        cudaFree(p);
        return;
    }
    size_t sz = (size_t)1 << it->second;
    if (c.cached + sz > CACHE_LIMIT) {
        c.size_log2.erase(it);
        cudaFree(p);
        return;
    }
    c.free_list[it->second].push_back(p);
    c.cached += sz;
}
} // namespace

extern "C" moe_status moe_cuda_alloc(moe_tensor *t, moe_dtype dtype, int ndim, const int64_t *shape)
{
    if (!t) return moe_fail(MOE_ERR_NULL, "t: must not be NULL");
    memset(t, 0, sizeof *t);
    size_t nb;
    moe_status st = moe_tensor_layout(dtype, ndim, shape, &nb);
    if (st) return st;
    void *p = NULL;
    cudaError_t e = block_alloc(&p, nb ? nb : 1);
    if (e != cudaSuccess) return moe_cu_fail(e, "alloc: cudaMalloc");
    e = cudaMemsetAsync(p, 0, nb ? nb : 1, cudaStreamPerThread);
    if (e != cudaSuccess) {
        block_free(p);
        return moe_cu_fail(e, "alloc: cudaMemsetAsync");
    }
    st = moe_tensor_wrap(t, dtype, ndim, shape, p, nb ? nb : 1, (moe_device){MOE_DEVICE_CUDA, 0});
    if (st) {
        block_free(p);
        return st;
    }
    t->owns = 1;
    return MOE_OK;
}

extern "C" void moe_cuda_free(moe_tensor *t)
{
    if (!t) return;
    if (t->owns && t->device.kind == MOE_DEVICE_CUDA) block_free(t->data);
    else if (t->owns) moe_tensor_free(t);
    memset(t, 0, sizeof *t);
}

extern "C" moe_status moe_cuda_copy(moe_tensor *dst, const moe_tensor *src)
{
    if (!dst || !src) return moe_fail(MOE_ERR_NULL, "dst, src: must not be NULL");
    if (dst->dtype != src->dtype || dst->ndim != src->ndim)
        return moe_fail(MOE_ERR_SHAPE, "dst: dtype and rank must equal src's");
    for (int i = 0; i < src->ndim; i++)
        if (dst->shape[i] != src->shape[i])
            return moe_fail(MOE_ERR_SHAPE, "dst: shape[%d] = %lld, src has %lld", i, (long long)dst->shape[i],
                            (long long)src->shape[i]);
    size_t nb;
    moe_status st = moe_tensor_layout(src->dtype, src->ndim, src->shape, &nb);
    if (st) return st;
    if (nb && (!dst->data || !src->data)) return moe_fail(MOE_ERR_NULL, "dst, src: have no data");
    if (nb) MOE_CU(cudaMemcpy(dst->data, src->data, nb, cudaMemcpyDefault));
    return MOE_OK;
}

extern "C" moe_status moe_cuda_synchronize(void)
{
    MOE_CU(cudaStreamSynchronize(cudaStreamPerThread));
    return MOE_OK;
}

extern "C" int moe_cuda_describe(char *runtime, char *driver, char *gpu, size_t n)
{
    int rv = 0, dv = 0, dev = 0;
    cudaDeviceProp prop;
    if (moe_cuda_backend_devices() < 1 || cudaRuntimeGetVersion(&rv) != cudaSuccess ||
        cudaDriverGetVersion(&dv) != cudaSuccess || cudaGetDevice(&dev) != cudaSuccess ||
        cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    snprintf(runtime, n, "%d.%d", rv / 1000, rv % 1000 / 10);
    snprintf(driver, n, "%d.%d", dv / 1000, dv % 1000 / 10);
    snprintf(gpu, n, "%s (sm_%d%d, %d SMs)", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
    return 1;
}

extern "C" int moe_cuda_backend_devices(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

