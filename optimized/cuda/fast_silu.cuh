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
 *   e^-g = y * 2^k by moe_expf's steps (moe_m_exp_split, moe_m_expm1_core)
 *        with eight of them fused into FMAs (NOTES.md v53): t = x log2e +
 *        1.5 * 2^23, both Cody-Waite subtractions, the polynomial's first
 *        four Horner steps; its last step and r + r^2 p stay two roundings
 *        each (fusing the last step alone changes 12 of the 86 054 inputs'
 *        results, fusing r + r^2 p 123 or 128, by a host emulation with
 *        fmaf). The fused form is not the reference's arithmetic: it
 *        is claimed only because the exhaustive test below finds it equal
 *        on every input this function takes, all of them bf16 or f16
 *        values;
 *   2^k from t's bits: t = 1.5 * 2^23 + k, so its low bits are k, and
 *        k << 23 plus 1.0's bits is 2^k (|k| <= 116: y * 2^k is normal,
 *        the product exact, as moe_ldexpf's); no float-to-int conversion;
 *   1 + y * 2^k as one FMA (the product is exact, so one rounding either
 *        way);
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
    /* -g not clamped to [-80, 80]: a g outside it (or NaN) is flagged or
     * answered by the select at the end; the q computed for it on the way
     * (Inf or NaN, no trap on the GPU) is not used */
    const float t = __fmaf_rn(-g, MOE_M_LOG2E, MOE_M_ROUND_MAGIC), kf = __fsub_rn(t, MOE_M_ROUND_MAGIC);
    const float r = __fmaf_rn(-kf, MOE_M_LN2_LO, __fmaf_rn(-kf, MOE_M_LN2_HI, -g));
    float pp = __fmaf_rn(MOE_M_EXPM1_P5, r, MOE_M_EXPM1_P4);
    pp = __fmaf_rn(pp, r, MOE_M_EXPM1_P3);
    pp = __fmaf_rn(pp, r, MOE_M_EXPM1_P2);
    pp = __fmaf_rn(pp, r, MOE_M_EXPM1_P1);
    pp = __fadd_rn(__fmul_rn(pp, r), MOE_M_EXPM1_P0);
    const float y = __fadd_rn(1.0f, __fadd_rn(r, __fmul_rn(__fmul_rn(r, r), pp)));
    const float d = __fmaf_rn(y, moe_m_pow2_of_round(t), 1.0f);
    float rc;
    asm("rcp.approx.f32 %0, %1;" : "=f"(rc) : "f"(d));
    rc = __fmaf_rn(rc, __fmaf_rn(-d, rc, 1.0f), rc);
    const float q0 = __fmul_rn(g, rc);
    const float q = __fmaf_rn(__fmaf_rn(-q0, d, g), rc, q0);
    return g > 80.0f || g == 0.0f ? g : q;
}

} // namespace fx

#endif
