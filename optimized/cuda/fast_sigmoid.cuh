/* sigmoid without branches, for gpt-oss's swigluoai in the gated epilogues
 * (fast_gemm.cuh; NOTES.md v54).
 *
 * Why: moe_sigmoidf is branch-free at its top (v21), but inside it
 * moe_expf still tests NaN and moe_ldexpf its range, and the IEEE
 * reciprocal keeps a slow-path check; across those branches the compiler
 * evaluates one value after another (silu's case, fast_silu.cuh, v24).
 * Unlike silu's g, swigluoai's argument x = min(g, limit) * alpha is not a
 * 16-bit value, so no fused step can be proven by trying every input;
 * this form takes moe_sigmoidf's own steps and changes only how they are
 * issued.
 *
 * Form, for |x| <= 87 (otherwise, and for NaN, `bad` is set and the
 * caller takes moe_sigmoidf for the values it evaluated):
 *   e^-x = y * 2^k by moe_m_exp_split (the build's --fmad=false keeps its
 *        steps apart, as in moe_expf); moe_expf's clamps (89, -104) do
 *        not bind, and k = round(-x log2e) is in [-126, 126], where
 *        moe_ldexpf is one multiply by 2^k: so is this, 2^k made from
 *        the bits of kf + 1.5 * 2^23 (exact; its low bits are k), no
 *        float-to-int conversion;
 *   1 / (1 + e^-x) by recip_fast: 1 + e^-x is in [1, 2^126), where
 *        recip_refine.h turns rcp.approx's estimate into the IEEE
 *        quotient (proven on the host from any estimate within 4 ulps).
 *
 * Claimed: sigmoid_fast equals moe_sigmoidf bit for bit for every float x
 * it does not flag, and flags exactly |x| > 87 and NaN; recip_fast equals
 * the IEEE 1 / d for every d in [1, 2^126). check_gpu_fast tcase encode
 * tries all 2^32 x and every such d (sigmoid_fast_exhaustive; 0 differ on
 * an H100, NOTES.md v54). */
#ifndef MOE_OPTIMIZED_CUDA_FAST_SIGMOID_CUH
#define MOE_OPTIMIZED_CUDA_FAST_SIGMOID_CUH

#include "reference/act_core.h"
#include "reference/math.h"
#include "recip_refine.h"

namespace fx {

/* 1 / d for d in [1, 2^126): the reciprocal approximation refined
 * (recip_refine.h; the quotient is normal, no slow path) */
__device__ __forceinline__ float recip_fast(float d)
{
    float rc;
    asm("rcp.approx.f32 %0, %1;" : "=f"(rc) : "f"(d));
    return moe_recip_refine(d, rc);
}

__device__ __forceinline__ float sigmoid_fast(float x, bool &bad)
{
    bad |= !(fabsf(x) <= 87.0f);
    float kf;
    const float y = moe_m_exp_split(-x, &kf);
    const float t = y * moe_m_pow2_of_round(kf + MOE_M_ROUND_MAGIC);
    return recip_fast(1.0f + t);
}

/* moe_act_swigluoai with sigmoid_fast: the same bits where it flags nothing */
__device__ __forceinline__ float swigluoai_fast(float g, float u, float alpha, float limit, bool &bad)
{
    const float gc = moe_act_gate_limit(g, limit), uc = moe_act_clampf(u, -limit, limit);
    return (uc + 1.0f) * (gc * sigmoid_fast(gc * alpha, bad));
}

} // namespace fx

#endif
