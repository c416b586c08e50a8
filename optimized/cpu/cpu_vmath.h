/* Four-lane versions of reference/math.h's moe_expf, moe_sigmoidf and
 * moe_siluf (GCC / clang vector extensions: SSE2 on x86-64, NEON on Arm,
 * plain scalar code elsewhere). Every lane performs the scalar function's
 * IEEE binary32 operations in the scalar function's order; a branch of the
 * scalar code becomes a select between lanes, and where the scalar code
 * skips a scaling step a lane multiplies by 1.0f instead, which is exact.
 * So each lane returns the scalar function's bits: compared over all 2^32
 * inputs when written, and over a sweep of patterns by
 * tests/check_cpu_stages.c. Which NaN comes out is the scalar code's too
 * (a single NaN operand propagates, as there). */
#ifndef MOE_OPTIMIZED_CPU_VMATH_H
#define MOE_OPTIMIZED_CPU_VMATH_H

#include <stdint.h>
#include <string.h>
#include "math.h"

typedef float cpu_v4f __attribute__((vector_size(16)));
typedef int32_t cpu_v4i __attribute__((vector_size(16)));

typedef uint32_t cpu_v4u __attribute__((vector_size(16)));

#define CPU_V4(x) ((cpu_v4f){(x), (x), (x), (x)})
#define CPU_V4U(x) ((cpu_v4u){(x), (x), (x), (x)})

MOE_INLINE cpu_v4f cpu_vsel(cpu_v4i m, cpu_v4f a, cpu_v4f b)
{
    return (cpu_v4f)(((cpu_v4i)a & m) | ((cpu_v4i)b & ~m));
}

MOE_INLINE cpu_v4f cpu_vload(const float *p)
{
    cpu_v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}

MOE_INLINE void cpu_vstore(float *p, cpu_v4f v) { memcpy(p, &v, sizeof v); }

/* moe_m_expm1_core */
MOE_INLINE cpu_v4f cpu_vexpm1_core(cpu_v4f r)
{
    cpu_v4f p = CPU_V4(0x1.a17f00p-13f);
    p = p * r + CPU_V4(0x1.6d43f8p-10f);
    p = p * r + CPU_V4(0x1.1110aap-7f);
    p = p * r + CPU_V4(0x1.5554e8p-5f);
    p = p * r + CPU_V4(0x1.555556p-3f);
    p = p * r + CPU_V4(0x1.000000p-1f);
    return r + (r * r) * p;
}

/* moe_ldexpf(y, n) for n in [-300, 300] (moe_expf's n is in [-150, 128]) */
MOE_INLINE cpu_v4f cpu_vldexp(cpu_v4f y, cpu_v4i n)
{
    for (int step = 0; step < 2; step++) {
        cpu_v4i up = n > 127, down = (n < -126) & ~up;
        y = y * cpu_vsel(up, CPU_V4(0x1p127f), cpu_vsel(down, CPU_V4(0x1p-102f), CPU_V4(1.0f)));
        n = n + ((up & -127) | (down & 102));
    }
    return y * (cpu_v4f)((n + 127) << 23);
}

/* moe_expf */
MOE_INLINE cpu_v4f cpu_vexpf(cpu_v4f x)
{
    cpu_v4i nan = x != x;
    cpu_v4f c = cpu_vsel(x > CPU_V4(89.0f), CPU_V4(89.0f), x);
    c = cpu_vsel(c < CPU_V4(-104.0f), CPU_V4(-104.0f), c);
    c = cpu_vsel(nan, CPU_V4(0.0f), c); /* NaN lanes take x + x below */
    cpu_v4f kf = (c * CPU_V4(MOE_M_LOG2E) + CPU_V4(MOE_M_ROUND_MAGIC)) - CPU_V4(MOE_M_ROUND_MAGIC);
    cpu_v4f r = (c - kf * CPU_V4(MOE_M_LN2_HI)) - kf * CPU_V4(MOE_M_LN2_LO);
    cpu_v4f y = cpu_vldexp(CPU_V4(1.0f) + cpu_vexpm1_core(r), __builtin_convertvector(kf, cpu_v4i));
    return cpu_vsel(nan, x + x, y);
}

/* moe_sigmoidf: e^x below -87, else 1 / (1 + e^-x) */
MOE_INLINE cpu_v4f cpu_vsigmoidf(cpu_v4f x)
{
    cpu_v4i low = x < CPU_V4(-87.0f);
    cpu_v4f e = cpu_vexpf(cpu_vsel(low, x, -x));
    return cpu_vsel(low, e, CPU_V4(1.0f) / (CPU_V4(1.0f) + e));
}

/* moe_siluf: x / (1 + e^-x) */
MOE_INLINE cpu_v4f cpu_vsiluf(cpu_v4f x) { return x / (CPU_V4(1.0f) + cpu_vexpf(-x)); }

/* f32 -> e4m3 SAT RNE for four lanes (cpu_enc_e4m3's rules without a
 * fallback): |x| >= 2^-6 rounds in the bits and saturates at 0x7E (Inf
 * and every finite value past 464 included), smaller |x| round to a
 * multiple of 2^-9 by the 1.5 * 2^23 trick, NaN gives S.1111.111. The
 * codes come back in the low byte of each lane. */
MOE_INLINE cpu_v4u cpu_venc_e4m3(cpu_v4f x)
{
    cpu_v4u u = (cpu_v4u)x, a = u & 0x7FFFFFFFu, sign = (u >> 24) & 0x80u;
    cpu_v4u r = (a + 0x7FFFFu + ((a >> 20) & 1u)) >> 20;
    cpu_v4i big = r > 960u + 0x7Eu;
    cpu_v4u c = (r - 960u) & (cpu_v4u)~big;
    c |= 0x7Eu & (cpu_v4u)big;
    cpu_v4u sub = (cpu_v4u)((cpu_v4f)a * CPU_V4(512.0f) + CPU_V4(0x1.8p23f)) & 0xFu;
    cpu_v4i small = a < 0x3C800000u, nan = a > 0x7F800000u;
    c = (c & (cpu_v4u)~small) | (sub & (cpu_v4u)small);
    c = (c & (cpu_v4u)~nan) | (0x7Fu & (cpu_v4u)nan);
    return sign | c;
}

/* f32 -> e2m1 SAT RNE for four lanes (cpu_enc_e2m1's rule): the number
 * of midpoints |x| passes, ties to the even code, the sign on top; Inf
 * saturates to +-6 (0x7 with the sign) and NaN gives +6 (0x7), the ONNX
 * rule of the reference. Codes in the low nibble of each lane. */
MOE_INLINE cpu_v4u cpu_venc_e2m1(cpu_v4f x)
{
    cpu_v4u u = (cpu_v4u)x, a = u & 0x7FFFFFFFu;
    cpu_v4f v = (cpu_v4f)a;
    cpu_v4i c = -((v > CPU_V4(0.25f)) + (v >= CPU_V4(0.75f)) + (v > CPU_V4(1.25f)) + (v >= CPU_V4(1.75f)) +
                  (v > CPU_V4(2.5f)) + (v >= CPU_V4(3.5f)) + (v > CPU_V4(5.0f)));
    cpu_v4u r = ((u >> 28) & 0x8u) | (cpu_v4u)c;
    cpu_v4i nan = a > 0x7F800000u;
    return (r & (cpu_v4u)~nan) | (0x7u & (cpu_v4u)nan);
}

#endif
