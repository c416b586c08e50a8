/* The 8-bit activation quantization's device pieces, shared by the
 * quantization kernel (fast.cu's quant_rows_kernel) and the M = 1
 * matrix-vector kernels that quantize x and h in their own CTAs
 * (fast_gemv.cu): the statistics of a scale group, the reference's rule
 * (reference/quant_core.h) and the element encoding, so both give the
 * reference's codes and scales bit for bit. */
#ifndef MOE_OPTIMIZED_CUDA_FAST_QUANT_CUH
#define MOE_OPTIMIZED_CUDA_FAST_QUANT_CUH

#include <stdint.h>
#include <type_traits>
#include "reference/quant_core.h"
#include "fast_e4m3.cuh"
#include "fast_qstep.cuh"

namespace fx {

/* the reference's statistics of one scale group from its reductions
 * (max |x| over the non-NaN elements, signed max / min, a NaN flag; maxima
 * are exact in any order) */
__device__ __forceinline__ moe_q_stats group_stats(float ai, float mx, float mn, int nan)
{
    moe_q_stats st;
    st.amax_prop = st.amax_ign = ai, st.vmax = mx, st.vmin = mn;
    if (nan) st.amax_prop = st.vmax = st.vmin = moe_u32_as_f32(0x7FC00000u);
    return st;
}

/* the statistics reduced over aligned groups of L lanes (a warp by default) */
template <int L = 32> __device__ __forceinline__ void warp_stats(float &ai, float &mx, float &mn, int &nan)
{
    for (int o = L / 2; o > 0; o >>= 1) {
        ai = fmaxf(ai, __shfl_xor_sync(0xffffffffu, ai, o));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        mn = fminf(mn, __shfl_xor_sync(0xffffffffu, mn, o));
        nan |= __shfl_xor_sync(0xffffffffu, nan, o);
    }
}

/* fmaxf / fminf skip a NaN operand, so no branch a NaN */
__device__ __forceinline__ void stats_add(float v, float &ai, float &mx, float &mn, int &nan)
{
    nan |= v != v;
    ai = fmaxf(ai, fabsf(v)), mx = fmaxf(mx, v), mn = fminf(mn, v);
}

/* eight bf16 values of a 16-byte chunk as f32 (exact) */
__device__ __forceinline__ void bf16x8_f32(const uint4 &v, float *f)
{
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) f[2 * i] = __uint_as_float(w[i] << 16), f[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
}

/* the code of a value after the reference's step (moe_qc_step): e4m3 in
 * hardware (fast_e4m3.cuh), int8 the reference's */
template <bool E4> __device__ __forceinline__ uint32_t ref_code(float v)
{
    return E4 ? e4m3x2(v, 0.0f) & 0xFFu : (uint32_t)moe_qc_encode(MOE_I8, v);
}

/* two codes by the reference's step, and its call out of line: the rare form (a group
 * with a NaN, an infinity or a factor off qstep_make's range). Inlined, each
 * row chunk carried eight copies of it beside the fast step, and int8's
 * GEMV1 / GEMV2 (96.5 / 94.3 KB of code) stalled on instruction fetch twice
 * as often as fp8's (NOTES.md v57); out of line they were 63.6 / 61.3 KB and
 * Qwen3-30B-A3B's M = 1 forward 1.08x faster in int8 (v59; GEMV2 3.2-4.2
 * KiB longer again since v61's held third chunk) */
template <bool E4>
__device__ __forceinline__ uint32_t ref_codes2(const moe_quant_spec &spec, const moe_q_group &grp, float x, float y)
{
    return ref_code<E4>(moe_qc_step(&spec, &grp, x)) | ref_code<E4>(moe_qc_step(&spec, &grp, y)) << 8;
}
template <bool E4>
__device__ __noinline__ uint32_t ref_codes2_call(const moe_quant_spec &spec, const moe_q_group &grp, float x, float y)
{
    return ref_codes2<E4>(spec, grp, x, y);
}

/* the codes of N elements (even N), packed low byte first: the fast step
 * (fast_qstep.cuh) or, for a group with a NaN or an infinity, the
 * reference's */
template <int N, bool E4, bool DIV, bool FAST>
__device__ __forceinline__ void codes_of(const float *f, const qstep &qs, const moe_quant_spec &spec,
                                         const moe_q_group &grp, uint32_t *w)
{
#pragma unroll
    for (int i = 0; i < N; i += 2) {
        uint32_t c;
        if (FAST) {
            c = qstep_code2<E4>(qstep_value<DIV>(qs, f[i]), qstep_value<DIV>(qs, f[i + 1]));
        } else {
            /* four codes a lane (group128_codes a warp a group: the row kernel's 128-groups at M > 1) keep
             * the step inline: with the call, the block scheme's GEMVs measured 1-2% slower when they held
             * that form (v59; since v60 they hold sixteen codes a lane) */
            c = N >= 8 ? ref_codes2_call<E4>(spec, grp, f[i], f[i + 1]) : ref_codes2<E4>(spec, grp, f[i], f[i + 1]);
        }
        w[i >> 2] |= c << (8 * (i & 3));
    }
}

/* calls f(div, fast) with the group's form of the element step as
 * compile-time constants (std::true_type / false_type), so a loop holds
 * one form */
template <class F> __device__ __forceinline__ void with_form(bool fast, bool div, F f)
{
    if (fast && div) f(std::true_type(), std::true_type());
    else if (fast) f(std::false_type(), std::true_type());
    else f(std::false_type(), std::false_type());
}


/* one 128-group held by L aligned lanes (L = 32: a warp, four adjacent bf16
 * values a lane; L = 8: sixteen), v the lane's bf16 words: the group's
 * statistics over its lanes, the reference's rule and the lane's 128 / L
 * codes (low byte first, the fast step where the group allows it); the
 * group's scale in *scale (every lane of the group). With 8 lanes a group a
 * warp holds four groups and runs their latency chains (the shuffles, the
 * rule's divisions, qstep_make) once for all four: the one-token GEMVs
 * quantize a few groups a warp, one after another with L = 32 (NOTES.md v60) */
template <bool E4, int L = 32>
__device__ __forceinline__ void group128_codes(const uint32_t (&v)[64 / L], const moe_quant_spec &spec, float *scale,
                                               uint32_t (&code)[32 / L])
{
    constexpr int N = 128 / L;
    float f[N];
#pragma unroll
    for (int i = 0; i < N / 2; i++)
        f[2 * i] = __uint_as_float(v[i] << 16), f[2 * i + 1] = __uint_as_float(v[i] & 0xFFFF0000u);
    float ai = 0.0f, mx = -MOE_M_INF, mn = MOE_M_INF;
    int nan = 0;
#pragma unroll
    for (int i = 0; i < N; i++) stats_add(f[i], ai, mx, mn, nan);
    warp_stats<L>(ai, mx, mn, nan);
    const moe_q_stats st = group_stats(ai, mx, mn, nan);
    moe_q_group grp;
    moe_qc_rule_dynamic(&spec, &st, 1.0f, &grp);
    *scale = grp.scale;
    qstep qs;
    const bool fast = qstep_make(spec, grp, ai, nan, qs);
#pragma unroll
    for (int i = 0; i < N / 4; i++) code[i] = 0;
    with_form(fast, spec.q_op == MOE_QOP_DIV, [&](auto div, auto fst) {
        codes_of<N, E4, decltype(div)::value, decltype(fst)::value>(f, qs, spec, grp, code);
    });
}

} // namespace fx

#endif
