/* silu of a bf16- or f16-valued g without branches, for the gated
 * epilogues (fast_gemm.cuh; NOTES.md v24).
 *
 * Why: GEMM1's epilogue evaluates moe_siluf(g) * u on g already rounded to
 * the output type. moe_siluf's own code has a NaN test, moe_ldexpf's range
 * branches and the IEEE division's slow-path check for every value, and
 * across those branches the compiler evaluates one value after another:
 * the epilogue ran at 0.17 instructions a cycle a warp and held 40% of the
 * consumer warps' samples at Mixtral-8x7B M = 16384 fp8 (ncu source
 * counters), while the tile's tensor cores waited.
 *
 * Form, for finite g >= -80 with g == 0 or |g| >= 2^-60:
 *   e^-g = y * 2^k, y and k by moe_expf's own steps (moe_m_exp_split), 2^k
 *        from its bits (|k| <= 116: y * 2^k is normal, the product exact,
 *        as moe_ldexpf's);
 *   g / (1 + e^-g) by the reciprocal approximation, one Newton step on it
 *        and one FMA correction of the quotient (the quotient, 2^-61 or
 *        more in magnitude, is normal);
 *   g > 80 gives g (e^-80 < 2^-115: 1 + e^-g rounds to 1), and so does
 *   g = +-0 (the correction's sums would turn -0 into +0; moe_siluf
 *   gives -0 / 2 = -0: the exhaustive test found it).
 * Any other g (below -80, tiny, NaN, -Inf) sets `bad`; the caller then
 * takes moe_siluf for the values it evaluated.
 *
 * Claimed: equal to moe_siluf bit for bit on every bf16 and every f16
 * value it does not flag; check_gpu_fast silu_fast_exhaustive compares all
 * 65 536 patterns of each with the host's moe_siluf, and checks which
 * are flagged. Not claimed for other inputs (f32 g never reaches it). */
#ifndef MOE_OPTIMIZED_CUDA_FAST_SILU_CUH
#define MOE_OPTIMIZED_CUDA_FAST_SILU_CUH

#include "reference/math.h"

namespace fx {

__device__ __forceinline__ float silu_fast(float g, bool &bad)
{
    const float a = fabsf(g);
    bad |= !(g >= -80.0f) || (a < 0x1p-60f && a != 0.0f);
    float kf;
    const float y = moe_m_exp_split(fminf(fmaxf(-g, -80.0f), 80.0f), &kf);
    const float d = 1.0f + y * __int_as_float(((int)kf + 127) << 23);
    float rc;
    asm("rcp.approx.f32 %0, %1;" : "=f"(rc) : "f"(d));
    rc = __fmaf_rn(rc, __fmaf_rn(-d, rc, 1.0f), rc);
    const float q0 = __fmul_rn(g, rc);
    const float q = __fmaf_rn(__fmaf_rn(-q0, d, g), rc, q0);
    return g > 80.0f || g == 0.0f ? g : q;
}

} // namespace fx

#endif
