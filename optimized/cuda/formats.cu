/* Format conversion kernels: one thread per output byte (two elements for
 * the packed formats). The arithmetic is the reference's, included from
 * reference/formats/, compiled with --fmad=false. */
#include <cuda_runtime.h>
#include "moe/cuda_formats.h"
#include "cuda_internal.h"
#include "reference/formats/bf16.h"
#include "reference/formats/e2m1.h"
#include "reference/formats/e4m3.h"
#include "reference/formats/e5m2.h"
#include "reference/formats/e8m0.h"
#include "reference/formats/f16.h"
#include "reference/formats/int_round.h"

static __device__ uint32_t enc_one(moe_dtype d, float x, moe_policy p, unsigned *f)
{
    switch (d) {
    case MOE_F16: return moe_s_round_pack_f16(x, p, f);
    case MOE_BF16: return moe_s_round_pack_bf16(x, p, f);
    case MOE_E4M3: return moe_s_round_pack_e4m3(x, p, f);
    case MOE_E5M2: return moe_s_round_pack_e5m2(x, p, f);
    case MOE_E2M1: return moe_s_round_pack_e2m1(x, p, f);
    case MOE_E8M0: return moe_s_round_pack_e8m0(x, p, f);
    case MOE_I8: return (uint8_t)moe_s_round_to_int(x, p.rnd, -128, 127, f);
    case MOE_I4: return (uint32_t)moe_s_round_to_int(x, p.rnd, -8, 7, f) & 0xFu;
    default: return (uint8_t)moe_s_round_to_int(x, p.rnd, 0, 255, f); /* MOE_U8 */
    }
}

static __device__ float dec_one(moe_dtype d, uint32_t c)
{
    switch (d) {
    case MOE_F16: return moe_s_decode_f16((uint16_t)c);
    case MOE_BF16: return moe_s_decode_bf16((uint16_t)c);
    case MOE_E4M3: return moe_s_decode_e4m3((uint8_t)c);
    case MOE_E5M2: return moe_s_decode_e5m2((uint8_t)c);
    case MOE_E2M1: return moe_s_decode_e2m1((uint8_t)c);
    case MOE_E8M0: return moe_s_decode_e8m0((uint8_t)c);
    case MOE_I8: return (float)(int8_t)(uint8_t)c;
    case MOE_I4: return (float)((int)(c & 0xFu) - ((c & 0x8u) ? 16 : 0));
    default: return (float)(uint8_t)c;
    }
}

static __global__ void encode_kernel(moe_dtype d, const float *src, size_t n, moe_policy p,
                                     void *dst, unsigned *flags)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    unsigned f = 0;
    if (d == MOE_E2M1 || d == MOE_I4) {
        size_t k = 2 * i;
        if (k < n) {
            uint32_t lo = enc_one(d, src[k], p, &f);
            uint32_t hi = k + 1 < n ? enc_one(d, src[k + 1], p, &f) : 0u;
            ((uint8_t *)dst)[i] = (uint8_t)(lo | (hi << 4));
        }
    } else if (i < n) {
        uint32_t c = enc_one(d, src[i], p, &f);
        if (d == MOE_F16 || d == MOE_BF16) ((uint16_t *)dst)[i] = (uint16_t)c;
        else ((uint8_t *)dst)[i] = (uint8_t)c;
    }
    /* one atomic per warp: the flags are an OR over all elements */
    unsigned w = __reduce_or_sync(0xFFFFFFFFu, f);
    if (w && (threadIdx.x & 31) == 0) atomicOr(flags, w);
}

static __global__ void decode_kernel(moe_dtype d, const void *src, size_t n, float *dst)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    uint32_t c;
    if (d == MOE_E2M1 || d == MOE_I4) c = (((const uint8_t *)src)[i / 2] >> ((i & 1) * 4)) & 0xFu;
    else if (d == MOE_F16 || d == MOE_BF16) c = ((const uint16_t *)src)[i];
    else c = ((const uint8_t *)src)[i];
    dst[i] = dec_one(d, c);
}

extern "C" moe_status moe_cuda_device_count(int *n)
{
    if (!n) return moe_fail(MOE_ERR_NULL, "n: must not be NULL");
    *n = 0;
    cudaError_t e = cudaGetDeviceCount(n);
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) {
        *n = 0;
        cudaGetLastError();
        return MOE_OK;
    }
    if (e != cudaSuccess) return moe_cu_fail(e, "cudaGetDeviceCount");
    return MOE_OK;
}

extern "C" moe_status moe_cuda_encode_array(moe_dtype d, const float *src, size_t n, moe_policy p,
                                            void *dst, unsigned *flags)
{
    if (n && (!src || !dst)) return moe_fail(MOE_ERR_NULL, "src, dst: must not be NULL");
    moe_status s = moe_policy_check(d, p);
    if (s != MOE_OK) return s;
    if (n == 0) return MOE_OK;
    unsigned *dflags;
    cudaError_t e = cudaMalloc(&dflags, sizeof *dflags);
    if (e != cudaSuccess) return moe_cu_fail(e, "cudaMalloc(flags)");
    e = cudaMemset(dflags, 0, sizeof *dflags);
    size_t items = (d == MOE_E2M1 || d == MOE_I4) ? (n + 1) / 2 : n;
    unsigned threads = 256;
    size_t blocks = (items + threads - 1) / threads;
    if (e == cudaSuccess) {
        encode_kernel<<<(unsigned)blocks, threads>>>(d, src, n, p, dst, dflags);
        e = cudaGetLastError();
    }
    unsigned hf = 0;
    if (e == cudaSuccess) e = cudaMemcpy(&hf, dflags, sizeof hf, cudaMemcpyDeviceToHost);
    cudaFree(dflags);
    if (e != cudaSuccess) return moe_cu_fail(e, "moe_cuda_encode_array");
    if (flags) *flags |= hf;
    return MOE_OK;
}

extern "C" moe_status moe_cuda_decode_array(moe_dtype d, const void *src, size_t n, float *dst)
{
    if (n && (!src || !dst)) return moe_fail(MOE_ERR_NULL, "src, dst: must not be NULL");
    float probe;
    moe_status s = moe_decode(d, 0, &probe); /* rejects non-conversion dtypes */
    if (s != MOE_OK) return s;
    if (n == 0) return MOE_OK;
    unsigned threads = 256;
    decode_kernel<<<(unsigned)((n + threads - 1) / threads), threads>>>(d, src, n, dst);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) return moe_cu_fail(e, "moe_cuda_decode_array");
    return MOE_OK;
}
