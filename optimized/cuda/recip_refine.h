/* 1 / d correctly rounded from any approximation rc within a few ulps of
 * it, for d in [1, 2^126): the reciprocal of fast_sigmoid.cuh's sigmoid,
 * which takes rc from rcp.approx.f32 (PTX: absolute error at most 2^-23 on
 * [1, 2), two ulps of the result). MOE_HD so that the host proves it.
 *
 * Steps: one Newton step, then one FMA correction from the residual of
 * the first (every FMA fused: fmaf is an FMA on both targets). For d whose
 * fraction is all ones, 2^(e+1) - ulp, the steps settle on the power of
 * two just below 1 / d, where the correction's sum is an exact tie that
 * rounds back down; there 1 / d = 2^-(e+1) (1 + 2^-24 + ...), so the
 * answer is the next float up, made from d's exponent (selected, no
 * branch). Both were found by trying every start within 16 ulps.
 *
 * Claimed: equal to the IEEE 1 / d for every d in [1, 2^126) and every rc
 * within 4 ulps of it; tests/check_math.c tries all 2^23 fractions in
 * [1, 2) and every binade up to 2^126 at a stride, the all-ones fraction
 * included (the steps scale exactly by powers of two in this range: every
 * intermediate is normal). check_gpu_fast sigmoid_fast_exhaustive tries
 * every d of the range with the device's rcp.approx. */
#ifndef MOE_OPTIMIZED_CUDA_RECIP_REFINE_H
#define MOE_OPTIMIZED_CUDA_RECIP_REFINE_H

#include <math.h>
#include <stdint.h>
#include "moe/portable.h"

MOE_HD MOE_INLINE float moe_recip_refine(float d, float rc)
{
    const float r1 = fmaf(rc, fmaf(-d, rc, 1.0f), rc);
    const float q = fmaf(fmaf(-r1, d, 1.0f), r1, r1);
    const uint32_t ud = moe_f32_as_u32(d);
    return (ud & 0x7FFFFFu) == 0x7FFFFFu ? moe_u32_as_f32(((253u - (ud >> 23)) << 23) + 1u) : q;
}

#endif
