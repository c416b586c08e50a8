/* The activation quantization's element step for a group (a row, or a
 * 128-group) with no NaN and no infinity: its codes equal the reference's
 * (quant_core.h moe_qc_step, then moe_qc_encode) with a handful of
 * instructions an element, where the reference's step written out for the
 * GPU took 66 (fp8 per token) to 97 (block fp8) warp instructions an
 * element and h's quantization 26-32 us of Mixtral-8x7B's M = 256 decode
 * forward (ncu, NOTES.md v23): an IEEE division behind a range check, the
 * NaN cases of the clamp and of the code, each a branch.
 *
 * Why the codes are the same bits, when qstep_make accepts the group:
 *  - every x is finite (the group's max |x| is finite and no x is NaN), the
 *    scale rule's f is finite, and for a division f and y = 1/f are normal,
 *    so v is never NaN: the clamp's NaN rules and canon_nan do nothing, and
 *    a clamp of a non-NaN v to [-qmax, qmax] is fminf(fmaxf(v, -qmax), qmax)
 *    in either order;
 *  - x / f is q = x * y and one remainder step r = x - q f (exact by the
 *    fused multiply-add), q + r y. Enumerated on the host for every bf16
 *    amax, every f the two division rules (VLLM_TOKEN, GROUP_EPS) give it
 *    and every bf16 |x| <= amax while this was written: the f32 quotient
 *    is IEEE x / f's wherever that is
 *    normal and |x| >= 2^-100; below that the remainder underflows, or the
 *    quotient is subnormal, and q can be one unit off. Such a quotient is
 *    under 2^-36 (|x| < 2^-100 and f >= 2^-64, which qstep_make requires)
 *    or under 2^-126, far below every code's first rounding point (e4m3
 *    2^-10, int8 0.5), and keeps x's sign. r = 0 keeps q, which carries the
 *    sign of x = -0;
 *  - e4m3: the hardware conversion is moe_s_round_pack_e4m3 on every non-NaN
 *    f32 (fast_e4m3.cuh, e4m3_encode_exhaustive); int8: cvt.rni is round to
 *    nearest even, then the saturation to [-128, 127] of moe_s_round_to_int.
 * check_gpu_fast's qstep_exhaustive runs every bf16 x of every bf16 amax
 * through both, for each 8-bit scheme's activation spec. */
#ifndef MOE_OPTIMIZED_CUDA_FAST_QSTEP_CUH
#define MOE_OPTIMIZED_CUDA_FAST_QSTEP_CUH

#include <cuda_fp8.h>
#include <stdint.h>
#include "moe/quant.h"
#include "reference/quant_core.h"

namespace fx {

struct qstep {
    float f, y;      /* the group's factor (moe_q_group.f) and, for a division, 1 / f */
    float lo, hi;    /* the clamp: -qmax, qmax (no clamp: -inf, +inf) */
};

/* 1 (and o set) when the group's elements may take qstep_value: no NaN, the
 * max |x| finite, the factor finite (for a division at least 2^-64, with a
 * normal reciprocal) and the clamp's bound a positive number */
__device__ __forceinline__ int qstep_make(const moe_quant_spec &s, const moe_q_group &g, float amax_ign, int nan, qstep &o)
{
    if (nan || !(amax_ign <= 3.4028235e38f) || !(fabsf(g.f) <= 3.4028235e38f)) return 0;
    if (s.q_op == MOE_QOP_DIV) {
        o.y = 1.0f / g.f;
        if (!(g.f >= 0x1p-64f) || !(o.y >= 1.17549435e-38f) || !(o.y <= 3.4028235e38f)) return 0;
    }
    o.f = g.f;
    if (s.clamp == MOE_NANCLAMP_MIN_MAX || s.clamp == MOE_NANCLAMP_MAX_MIN) {
        if (!(s.qmax > 0.0f)) return 0;
        o.lo = -s.qmax, o.hi = s.qmax;
    } else {
        o.lo = -INFINITY, o.hi = INFINITY;
    }
    return 1;
}

/* x / f (DIV) or x * f, clamped; DIV a compile-time choice so the loop
 * holds one form */
template <bool DIV> __device__ __forceinline__ float qstep_value(const qstep &q, float x)
{
    float v;
    if (DIV) {
        const float p = __fmul_rn(x, q.y), r = __fmaf_rn(-p, q.f, x);
        v = r == 0.0f ? p : __fmaf_rn(r, q.y, p);
    } else {
        v = __fmul_rn(x, q.f);
    }
    return fminf(fmaxf(v, q.lo), q.hi);
}

/* the codes of two non-NaN values (a: low byte) */
template <bool E4> __device__ __forceinline__ uint32_t qstep_code2(float a, float b)
{
    if (E4) return (uint32_t)__nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
    const int ia = max(-128, min(127, __float2int_rn(a))), ib = max(-128, min(127, __float2int_rn(b)));
    return ((uint32_t)ia & 0xFFu) | ((uint32_t)ib & 0xFFu) << 8;
}

} // namespace fx

#endif
