/* The 8-bit activation quantization's e4m3 encoding in hardware:
 * cvt.rn.satfinite.e4m3x2.f32 rounds to nearest even and takes finite
 * overflow and Inf to +-448, which is the reference's E4M3_SAT_RNE
 * (moe_s_round_pack_e4m3 with MOE_SAT) for every non-NaN f32:
 * check_gpu_fast's e4m3_encode_exhaustive compares the two on all 2^32
 * inputs. NaN keeps its sign, as the reference's does (the hardware's NaN
 * is one code). Why: the reference's round-and-pack in software is about a
 * hundred integer instructions an element, and the quantization of x took
 * 12 us of a 16-token forward (ncu: 2 000 instructions a warp, fetch
 * stalls; NOTES.md v17). */
#ifndef MOE_OPTIMIZED_CUDA_FAST_E4M3_CUH
#define MOE_OPTIMIZED_CUDA_FAST_E4M3_CUH

#include <cuda_fp8.h>
#include <stdint.h>

namespace fx {

/* codes of a (low byte) and b (high byte) */
__device__ __forceinline__ uint32_t e4m3x2(float a, float b)
{
    uint32_t c = (uint32_t)__nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
    if (a != a) c = (c & 0xFF00u) | ((__float_as_uint(a) >> 24) & 0x80u) | 0x7Fu;
    if (b != b) c = (c & 0x00FFu) | (((__float_as_uint(b) >> 24) & 0x80u) | 0x7Fu) << 8;
    return c;
}

} // namespace fx

#endif
