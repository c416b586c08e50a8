/* Canonical math (DESIGN section 5): the one definition of the
 * transcendental functions for the reference and for the CUDA conformance
 * build, so element-wise stages are bit-identical on CPU and GPU.
 * Included as "math.h" from reference/ (the build puts reference/ on the
 * quote path only, -iquote, so <math.h> stays the system header) and as
 * "reference/math.h" from CUDA sources (-I.).
 *
 * How the bits stay identical: every function is IEEE binary32 +, -, *, /
 * (each correctly rounded, to nearest even), comparisons, integer and bit
 * operations, in the order written. No libm, no builtins, no double.
 * That holds with contraction off (-ffp-contract=off; nvcc --fmad=false,
 * without which nvcc fuses the polynomial steps into FMAs), IEEE
 * division (nvcc --prec-div=true), subnormals kept (no fast-math, nvcc
 * --ftz=false) and SSE arithmetic on x86 (-mfpmath=sse): the Makefile's
 * REFFLAGS and NVCCFLAGS. Checked: gcc -O0/-O2/-O3 -march=native and
 * clang -O0/-O2/-O3 -march=native give the same bits (tests/check_math.c
 * pins them), and so did an H200 (sm_90a, NVCCFLAGS) for every function
 * and all 2^32 inputs, NaNs compared by class.
 *
 * Accuracy, measured over ALL 2^32 float inputs against double-precision
 * glibc: the largest error in ULPs of the exact value (Inf counted as
 * 2^128), so a correctly rounded function would score at most 0.5; the
 * maxima are rounded up in the third decimal. tests/check_math.c
 * re-measures every 61st bit pattern and asserts these numbers
 * (MOE_MATH_EXHAUSTIVE=1: all of them).
 *
 *   moe_exp2f      0.959 ULP   monotone
 *   moe_expf       0.952 ULP   monotone
 *   moe_log2f      0.883 ULP   monotone
 *   moe_logf       0.826 ULP   monotone
 *   moe_tanhf      1.057 ULP   monotone, odd (bit for bit)
 *   moe_erff       1.094 ULP   monotone, odd (bit for bit)
 *   moe_sigmoidf   2.481 ULP   monotone
 *   moe_recipf     0.5   ULP   correctly rounded (one IEEE division)
 *   moe_ldexpf, moe_fabsf, moe_fminf, moe_fmaxf: exact
 *   moe_siluf      2.404 ULP for x >= -88.5; 1.493 ULPs of x everywhere
 *   moe_gelu_erff  1.464 ULPs of x
 *   moe_gelu_tanhf 1.570 ULPs of x
 * The activations are defined by upstream's float expressions (below);
 * where those cancel (1 + erf, 1 + tanh for x << 0) or overflow (e^-x in
 * silu below -88.72, giving -0) their error relative to the result is
 * unbounded, so it is given in ULPs of the input instead: |f(x) - exact|
 * <= that many times the spacing of floats at x.
 *
 * Special values: NaN in gives NaN out; which NaN (sign, payload) is not
 * specified, since x86 and CUDA make different ones, so NaNs compare by
 * class (DESIGN section 5). Every other input has a defined result, given
 * with each function and tabulated in tests/check_math.c.
 */
#ifndef MOE_REFERENCE_MATH_H
#define MOE_REFERENCE_MATH_H

#include <stdint.h>
#include <string.h>
#include "moe/portable.h"

/* ---- bits ---------------------------------------------------------------- */

/* 2^e for -126 <= e <= 127, built from its exponent field. */
MOE_HD MOE_INLINE float moe_m_pow2i(int e)
{
    return moe_u32_as_f32((uint32_t)(e + 127) << 23);
}

/* |mag| with the sign of sgn. */
MOE_HD MOE_INLINE float moe_m_copysign(float mag, float sgn)
{
    return moe_u32_as_f32((moe_f32_as_u32(mag) & 0x7FFFFFFFu) | (moe_f32_as_u32(sgn) & 0x80000000u));
}

#define MOE_M_INF moe_u32_as_f32(0x7F800000u)
#define MOE_M_NAN moe_u32_as_f32(0x7FC00000u)

/* ---- exact helpers -------------------------------------------------------- */

MOE_HD MOE_INLINE float moe_fabsf(float x)
{
    return moe_u32_as_f32(moe_f32_as_u32(x) & 0x7FFFFFFFu);
}

/* C's fmin/fmax rule for NaN: a NaN operand is ignored, both NaN gives
 * NaN. Signed zeros are ordered (-0 < +0), which C leaves open; fixing it
 * makes the result independent of operand order on every target. */
MOE_HD MOE_INLINE float moe_fminf(float a, float b)
{
    if (a != a) return b;
    if (b != b) return a;
    if (a == b) return (moe_f32_as_u32(a) & 0x80000000u) ? a : b;
    return a < b ? a : b;
}

MOE_HD MOE_INLINE float moe_fmaxf(float a, float b)
{
    if (a != a) return b;
    if (b != b) return a;
    if (a == b) return (moe_f32_as_u32(a) & 0x80000000u) ? b : a;
    return a > b ? a : b;
}

/* x * 2^n, correctly rounded (so exact unless the result is subnormal,
 * zero or infinite), for any x and n. A single multiply by 2^n works when
 * 2^n is a normal float; otherwise the scale goes in two or three steps.
 * Going down, each intermediate step is exact whenever the final result
 * can be nonzero, so a subnormal result is rounded only once (no double
 * rounding): if x * 2^-102 is inexact, |x| < 2^-24 and the final result is
 * below 2^-151, which rounds to zero either way. Beyond |n| = 300 nothing
 * changes (2^-149 * 2^278 overflows, 2^128 * 2^-278 underflows), so n is
 * clamped first, which keeps the exponent arithmetic far from overflow. */
MOE_HD MOE_INLINE float moe_ldexpf(float x, int n)
{
    if (n > 300) n = 300;
    if (n < -300) n = -300;
    if (n > 127) {
        x *= 0x1p127f;
        n -= 127;
        if (n > 127) {
            x *= 0x1p127f;
            n -= 127;
        }
    } else if (n < -126) {
        x *= 0x1p-102f;
        n += 102;
        if (n < -126) {
            x *= 0x1p-102f;
            n += 102;
        }
    }
    return x * moe_m_pow2i(n);
}

/* Correctly rounded: one IEEE division on both targets (PTX rcp.rn.f32
 * under nvcc's default --prec-div=true; --use_fast_math would make it an
 * approximation). Named so that stages say "reciprocal" and mean this. */
MOE_HD MOE_INLINE float moe_recipf(float x)
{
    return 1.0f / x;
}

/* ---- exp2, exp --------------------------------------------------------------
 * Both reduce to 2^k * p with k an integer and p the exponential of a
 * small reduced argument, then scale with moe_ldexpf, which gives the
 * correctly rounded subnormal, zero or Inf at the ends of the range.
 *
 * Rounding to an integer uses the 1.5 * 2^23 trick: adding it leaves no
 * fraction bits, so (v + 0x1.8p23f) - 0x1.8p23f is v rounded to nearest
 * (ties to even), exactly, for |v| < 2^22. No floorf/rintf needed, and
 * no float-to-int conversion of an out-of-range value. */
#define MOE_M_ROUND_MAGIC 0x1.8p23f

/* 2^k from t = k + 1.5 * 2^23 (the rounding sum above, before the magic
 * is taken off), for k in [-126, 127]: t's low bits are k, so k << 23
 * plus 1.0's bits is 2^k's; no float-to-int conversion (the GPU's
 * branch-free silu and sigmoid, optimized/cuda/fast_silu.cuh and
 * fast_sigmoid.cuh) */
MOE_HD MOE_INLINE float moe_m_pow2_of_round(float t)
{
    return moe_u32_as_f32((moe_f32_as_u32(t) << 23) + 0x3F800000u);
}

/* e^r - 1 for |r| <= ln2/2 + 5e-4, as r + r^2 * p(r), p a degree-5
 * minimax fit of (e^r - 1 - r)/r^2 (fitting error 1.4e-9, Remez exchange
 * in 50-digit arithmetic, coefficients rounded to float). The caller adds
 * 1 last, so r itself leads and only the small r^2 term carries the
 * polynomial's rounding; that also keeps exp and exp2 monotone (checked
 * over all floats). */
#define MOE_M_EXPM1_P5 0x1.a17f00p-13f /* p's coefficients, highest degree first */
#define MOE_M_EXPM1_P4 0x1.6d43f8p-10f
#define MOE_M_EXPM1_P3 0x1.1110aap-7f
#define MOE_M_EXPM1_P2 0x1.5554e8p-5f
#define MOE_M_EXPM1_P1 0x1.555556p-3f
#define MOE_M_EXPM1_P0 0x1.000000p-1f

MOE_HD MOE_INLINE float moe_m_expm1_core(float r)
{
    float p = MOE_M_EXPM1_P5;
    p = p * r + MOE_M_EXPM1_P4;
    p = p * r + MOE_M_EXPM1_P3;
    p = p * r + MOE_M_EXPM1_P2;
    p = p * r + MOE_M_EXPM1_P1;
    p = p * r + MOE_M_EXPM1_P0;
    return r + (r * r) * p;
}

/* 2^x. x = k + f with k = round(x), |f| <= 1/2, f exact; 2^f = e^r with
 * r = f * ln2 (one rounding, so r is monotone in f). A polynomial in f
 * directly (1 + f * q(f)) is as accurate but not monotone: the rounding
 * of q moves f * q against f. Clamping x keeps k within [-151, 129]:
 * 2^129 overflows and 2^-151 rounds to zero, so the clamp changes no
 * result. */
#define MOE_M_LN2 0x1.62e430p-1f /* 0.693147182, ln2 rounded */

MOE_HD MOE_INLINE float moe_exp2f(float x)
{
    if (x != x) return x + x;
    if (x > 129.0f) x = 129.0f;
    if (x < -151.0f) x = -151.0f;
    float kf = (x + MOE_M_ROUND_MAGIC) - MOE_M_ROUND_MAGIC;
    float r = (x - kf) * MOE_M_LN2;
    return moe_ldexpf(1.0f + moe_m_expm1_core(r), (int)kf);
}

/* e^x. k = round(x * log2(e)); r = x - k*ln2 by Cody and Waite's two
 * constants: LN2_HI is ln2 cut to 16 bits, so k * LN2_HI is exact for
 * |k| <= 151 and x - k * LN2_HI is exact (the operands are close); LN2_LO
 * is the next 24 bits of ln2. |r| <= ln2/2 + 6e-6 (the product x * log2e
 * rounds). The clamp: e^89 overflows, e^-104 < 2^-150 rounds to zero. */
#define MOE_M_LN2_HI 0x1.62e4p-1f      /* 0.693145751953125 */
#define MOE_M_LN2_LO 0x1.7f7d1cp-20f   /* ln2 - LN2_HI = 1.42860682e-06 */
#define MOE_M_LOG2E 0x1.715476p+0f     /* 1.44269502, log2(e) rounded */

/* e^x = y * 2^kf for x within the clamps below, y = 1 + (e^r - 1) in
 * [0.70, 1.42]: moe_expf's steps before the power of two (the GPU's
 * branch-free silu, optimized/cuda/fast_silu.cuh, takes the same steps
 * with some of them fused, proven equal on its bf16 and f16 inputs) */
MOE_HD MOE_INLINE float moe_m_exp_split(float x, float *kfp)
{
    float kf = (x * MOE_M_LOG2E + MOE_M_ROUND_MAGIC) - MOE_M_ROUND_MAGIC;
    float r = (x - kf * MOE_M_LN2_HI) - kf * MOE_M_LN2_LO;
    *kfp = kf;
    return 1.0f + moe_m_expm1_core(r);
}

MOE_HD MOE_INLINE float moe_expf(float x)
{
    if (x != x) return x + x;
    if (x > 89.0f) x = 89.0f;
    if (x < -104.0f) x = -104.0f;
    float kf;
    float y = moe_m_exp_split(x, &kf);
    return moe_ldexpf(y, (int)kf);
}

/* ---- log2, log --------------------------------------------------------------
 * x = 2^k * (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)), so f is exact
 * (Sterbenz) and |f| <= 0.4143. With s = f / (2 + f),
 *   ln(1 + f) = 2 atanh(s) = 2s + s * R,  R = s^2 * l(s^2),
 * l a degree-3 minimax fit of (2 atanh(s)/s - 2)/s^2 on s^2 <= 0.0295
 * (error 1.1e-9; the Taylor coefficients are 2/3, 2/5, 2/7, 2/9). The sum
 * is arranged so the exact f is the leading term and only a correction of
 * at most ~f/4 carries rounding error:
 *   ln(1 + f) = f - (h - s * (h + R)),  h = f * f / 2.
 * Returns (in *hp, *lop) the pieces hi = f - h cut to 12 bits and lo, with
 * ln(1 + f) ~ hi + lo: a 12-bit hi times a 12-bit constant is exact, which
 * is what lets log2 multiply by log2(e) without losing the low bits. */
MOE_HD MOE_INLINE float moe_m_log_reduce(float x, float *hp, float *lop)
{
    uint32_t ix = moe_f32_as_u32(x);
    int k = 0;
    if (ix < 0x00800000u) { /* subnormal: make it normal first */
        ix = moe_f32_as_u32(x * 0x1p25f);
        k = -25;
    }
    k += (int)(ix >> 23) - 127;
    ix = (ix & 0x007FFFFFu) | 0x3F800000u; /* 1 + f in [1, 2) */
    if (ix > 0x3FB504F3u) {                /* above sqrt(2): halve */
        ix -= 0x00800000u;
        k++;
    }
    float f = moe_u32_as_f32(ix) - 1.0f;
    float s = f / (2.0f + f);
    float z = s * s;
    float l = 0x1.ddde50p-3f;
    l = l * z + 0x1.245bf2p-2f;
    l = l * z + 0x1.9999ecp-2f;
    l = l * z + 0x1.555556p-1f;
    float big_r = z * l;
    float h = 0.5f * f * f;
    float hi = moe_u32_as_f32(moe_f32_as_u32(f - h) & 0xFFFFF000u);
    *hp = hi;
    *lop = ((f - hi) - h) + s * (h + big_r);
    return (float)k;
}

/* log2(x): x < 0 and NaN give NaN, +-0 gives -Inf, +Inf gives +Inf.
 * log2(1 + f) = (hi + lo) * log2(e) with log2(e) = IH + IL, IH 12 bits;
 * hi * IH is exact and the small products are added first, k last. */
#define MOE_M_LOG2E_HI 0x1.714p+0f     /* 1.4423828125 */
#define MOE_M_LOG2E_LO 0x1.47652cp-12f /* log2(e) - LOG2E_HI */

MOE_HD MOE_INLINE float moe_log2f(float x)
{
    if (x != x) return x + x;
    if (x == 0.0f) return -MOE_M_INF;
    if (x < 0.0f) return MOE_M_NAN;
    if (x == MOE_M_INF) return x;
    float hi, lo;
    float k = moe_m_log_reduce(x, &hi, &lo);
    return (((hi + lo) * MOE_M_LOG2E_LO + lo * MOE_M_LOG2E_HI) + hi * MOE_M_LOG2E_HI) + k;
}

/* ln(x), same special values. k * LN2_HI is exact (16-bit constant). */
MOE_HD MOE_INLINE float moe_logf(float x)
{
    if (x != x) return x + x;
    if (x == 0.0f) return -MOE_M_INF;
    if (x < 0.0f) return MOE_M_NAN;
    if (x == MOE_M_INF) return x;
    float hi, lo;
    float k = moe_m_log_reduce(x, &hi, &lo);
    return ((k * MOE_M_LN2_LO + lo) + hi) + k * MOE_M_LN2_HI;
}

/* ---- tanh, sigmoid ----------------------------------------------------------
 * tanh is odd: computed on |x|, sign put back, so tanh(-x) = -tanh(x)
 * bit for bit. Below 0.75, tanh(a) = a + a^3 * t(a^2), t a degree-7
 * minimax fit of (tanh(a) - a)/a^3 on a^2 <= 0.5625 (error 2.9e-11).
 * Above, 1 - 2/(e^(2a) + 1): no cancellation there since the result is at
 * least 0.63 and the subtracted term at most 0.37. (0.75 balances the two
 * sides' rounding errors: measured, a lower or higher split does worse.)
 * From 9.02 on, tanh(a) is within 2^-25 of 1 (the threshold is 9.0109),
 * so it rounds to 1. */
MOE_HD MOE_INLINE float moe_tanhf(float x)
{
    if (x != x) return x + x;
    float a = moe_fabsf(x), y;
    if (a < 0.75f) {
        float z = a * a;
        float t = 0x1.0bd34cp-12f;
        t = t * z + -0x1.3ae4dcp-10f;
        t = t * z + 0x1.c8636ep-9f;
        t = t * z + -0x1.218892p-7f;
        t = t * z + 0x1.663f84p-6f;
        t = t * z + -0x1.ba1b18p-5f;
        t = t * z + 0x1.111110p-3f;
        t = t * z + -0x1.555556p-2f;
        y = a + (a * z) * t;
    } else if (a < 9.02f) {
        y = 1.0f - 2.0f / (moe_expf(2.0f * a) + 1.0f);
    } else {
        y = 1.0f;
    }
    return moe_m_copysign(y, x);
}

/* 1 / (1 + e^-x) as written, which is monotone: e^-x is (checked), and
 * adding 1 and taking the reciprocal, each correctly rounded, keep the
 * order. That matters for routing: top-k of sigmoid scores picks the same
 * experts as top-k of the logits. (The textbook
 * e^x / (1 + e^x) for x < 0 is not: 1 + e^x rounds in bigger steps than
 * e^x, and the quotient steps back.) Below -87, e^-x would overflow
 * (from -88.72 on) while the true value is a small normal or subnormal;
 * there 1 + e^-x rounds to e^-x, so the value is e^x, computed directly.
 * Monotone across the switch too (checked over all floats).
 * sigmoid(+Inf) = 1, sigmoid(-Inf) = 0. */
MOE_HD MOE_INLINE float moe_sigmoidf(float x)
{
    /* the same two cases with one exp and no branch: its argument and the
     * result are selected (the fused CUDA GEMM1 epilogue evaluates 64 of
     * these a thread and interleaves them only as straight code) */
    const int small = x < -87.0f;
    const float t = moe_expf(small ? x : -x);
    return small ? t : 1.0f / (1.0f + t);
}

/* ---- erf ---------------------------------------------------------------------
 * Odd, computed on |x| like tanh. Below 0.875, erf(a) = a + a * e(a^2), e
 * a degree-6 minimax fit of erf(a)/a - 1 on a^2 <= 0.765625 (error 2e-10
 * relative): the exact a leads, the correction is at most 13% of it.
 * From 0.875 on, erf(a) >= 0.78, so its ULP is 2^-24 and an ABSOLUTE error
 * well below that is enough: erf(a) = 1 - g(a - c), g a degree-8 minimax
 * fit of erfc (absolute error <= 1.5e-10) on each of five intervals, in
 * powers of t = a - c around a point c inside it (exact, by Sterbenz).
 * Five short intervals rather than two long ones keep |t| and so the
 * Horner partial sums small: with two, their rounding noise exceeded the
 * step between neighbouring results and erf was not monotone. From 3.92
 * on, erfc(a) < 2^-25 (the threshold is 3.91921), so erf rounds to 1.
 * This needs no exp and no exact a^2. */
MOE_HD MOE_INLINE float moe_m_poly8(float t, float c0, float c1, float c2, float c3, float c4,
                                    float c5, float c6, float c7, float c8)
{
    float g = c8;
    g = g * t + c7;
    g = g * t + c6;
    g = g * t + c5;
    g = g * t + c4;
    g = g * t + c3;
    g = g * t + c2;
    g = g * t + c1;
    return g * t + c0;
}

MOE_HD MOE_INLINE float moe_erff(float x)
{
    if (x != x) return x + x;
    float a = moe_fabsf(x), y;
    if (a < 0.875f) {
        float z = a * a;
        float e = 0x1.6cdc76p-14f;
        e = e * z + -0x1.aec8a2p-11f;
        e = e * z + 0x1.5542a4p-8f;
        e = e * z + -0x1.b81a72p-6f;
        e = e * z + 0x1.ce2e8ep-4f;
        e = e * z + -0x1.812744p-2f;
        e = e * z + 0x1.06eba8p-3f;
        y = a + a * e;
    } else if (a < 1.25f) {
        float t = a - 1.0625f;
        y = 1.0f - moe_m_poly8(t,
            0x1.1043c2p-3f, -0x1.75a91ap-2f, 0x1.8d03acp-2f,
            -0x1.395474p-3f, -0x1.88e116p-5f, 0x1.0f79a8p-4f,
            -0x1.5e00dep-7f, -0x1.97f044p-7f, 0x1.688ed6p-8f);
    } else if (a < 1.75f) {
        float t = a - 1.5f;
        y = 1.0f - moe_m_poly8(t,
            0x1.15aaa8p-5f, -0x1.e72372p-4f, 0x1.6d5a96p-3f,
            -0x1.1c2a1cp-3f, 0x1.6d5aa2p-5f, 0x1.e78028p-7f,
            -0x1.3ca770p-6f, 0x1.274f4ep-8f, 0x1.37953ap-9f);
    } else if (a < 2.5f) {
        float t = a - 2.125f;
        y = 1.0f - moe_m_poly8(t,
            0x1.5bde72p-9f, -0x1.946256p-7f, 0x1.ada86ap-6f,
            -0x1.0ea3c2p-5f, 0x1.afe6f0p-6f, -0x1.99bcfap-7f,
            0x1.dbb5dcp-10f, 0x1.002b54p-9f, -0x1.5ddfb2p-10f);
    } else if (a < 3.125f) {
        float t = a - 2.8125f;
        y = 1.0f - moe_m_poly8(t,
            0x1.2422eep-14f, -0x1.b23a64p-12f, 0x1.315112p-10f,
            -0x1.0c2390p-9f, 0x1.462e90p-9f, -0x1.1e9c28p-9f,
            0x1.6b8d5cp-10f, -0x1.32072ap-11f, 0x1.c5dd8ep-14f);
    } else if (a < 3.92f) {
        float t = a - 3.5f;
        y = 1.0f - moe_m_poly8(t,
            0x1.8ef1ecp-21f, -0x1.6a545ep-18f, 0x1.3d1418p-16f,
            -0x1.63034ep-15f, 0x1.1bd1eep-14f, -0x1.55eedap-14f,
            0x1.484b06p-14f, -0x1.09e6dap-14f, 0x1.164c96p-15f);
    } else {
        y = 1.0f;
    }
    return moe_m_copysign(y, x);
}

/* ---- activations ----------------------------------------------------------
 * Each is defined as the exact expression written, in the order written,
 * the same expression vLLM's CUDA kernels evaluate (csrc/activation_kernels.cu),
 * with this file's exp/erf/tanh in place of CUDA's. Non-finite cases are
 * whatever that expression gives: silu(-Inf) = -Inf/Inf = NaN, gelu(-Inf)
 * = -Inf * 0 = NaN, as upstream. */

/* silu(x) = x / (1 + e^-x): vLLM's form, not x * sigmoid(x) (the two can
 * differ in the last bit). Large negative x: e^-x = Inf, x / Inf = -0. */
MOE_HD MOE_INLINE float moe_siluf(float x)
{
    return x / (1.0f + moe_expf(-x));
}

/* gelu(x) = 0.5 x (1 + erf(x / sqrt 2)), as (x * 0.5) * (1 + erf(x * M_SQRT1_2)). */
#define MOE_M_SQRT1_2 0x1.6a09e6p-1f /* 0.707106769, M_SQRT1_2 rounded */

MOE_HD MOE_INLINE float moe_gelu_erff(float x)
{
    return (x * 0.5f) * (1.0f + moe_erff(x * MOE_M_SQRT1_2));
}

/* The tanh approximation of gelu:
 *   0.5 x (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))),
 * evaluated as vLLM and PyTorch do: x3 = (x * x) * x, inner =
 * BETA * (x + KAPPA * x3), then (0.5 * x) * (1 + tanh(inner)). */
#define MOE_M_GELU_BETA 0x1.988454p-1f  /* 0.797884583, sqrt(2/pi) rounded */
#define MOE_M_GELU_KAPPA 0x1.6e4e26p-5f /* 0.0447149985, 0.044715 rounded */

MOE_HD MOE_INLINE float moe_gelu_tanhf(float x)
{
    float x3 = (x * x) * x;
    float inner = MOE_M_GELU_BETA * (x + MOE_M_GELU_KAPPA * x3);
    return (0.5f * x) * (1.0f + moe_tanhf(inner));
}

#endif
