/* Canonical math (reference/math.h): accuracy against double-precision
 * libm, special values with exact expected bits, odd symmetry,
 * monotonicity, and pinned output bits.
 *
 * The accuracy bounds below are the maxima recorded at the top of
 * reference/math.h, which were measured over all 2^32 inputs; change the
 * two together. make check re-measures every 61st bit pattern (a prime
 * stride, so every low-bit residue is hit) and checks monotonicity in
 * windows and around every branch point; MOE_MATH_EXHAUSTIVE=1 makes both
 * cover all 2^32 inputs (the slow tier: 12 minutes on 2 cores). */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <math.h>  /* the system header: libm's double functions are the references */
#include "math.h"  /* reference/math.h, found through -iquote reference */
#include "../optimized/cuda/recip_refine.h"

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static int exhaustive(void)
{
    const char *e = getenv("MOE_MATH_EXHAUSTIVE");
    return e && *e && strcmp(e, "0") != 0;
}

enum fn_id {
    F_EXP2,
    F_EXP,
    F_LOG2,
    F_LOG,
    F_TANH,
    F_ERF,
    F_SIGMOID,
    F_SILU,
    F_GELU_ERF,
    F_GELU_TANH,
    F_RECIP,
    F_FABS,
    F_COUNT
};

static const char *const fn_name[F_COUNT] = {
    "moe_exp2f",    "moe_expf",  "moe_log2f",     "moe_logf",       "moe_tanhf",  "moe_erff",
    "moe_sigmoidf", "moe_siluf", "moe_gelu_erff", "moe_gelu_tanhf", "moe_recipf", "moe_fabsf",
};

static float call(int f, float x)
{
    switch (f) {
    case F_EXP2: return moe_exp2f(x);
    case F_EXP: return moe_expf(x);
    case F_LOG2: return moe_log2f(x);
    case F_LOG: return moe_logf(x);
    case F_TANH: return moe_tanhf(x);
    case F_ERF: return moe_erff(x);
    case F_SIGMOID: return moe_sigmoidf(x);
    case F_SILU: return moe_siluf(x);
    case F_GELU_ERF: return moe_gelu_erff(x);
    case F_GELU_TANH: return moe_gelu_tanhf(x);
    case F_RECIP: return moe_recipf(x);
    case F_FABS: return moe_fabsf(x);
    }
    return 0.0f;
}

/* ---- accuracy ---------------------------------------------------------------
 * The references are glibc's double functions (within an ULP or so of
 * double, 2^-29 of a float ULP) or short, cancellation-free double
 * formulas built on them. */

static double ref_sigmoid(double x)
{
    return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
}

static double ref_silu(double x)
{
    return x * ref_sigmoid(x);
}

static double ref_gelu_erf(double x)
{
    return 0.5 * x * erfc(-x * 0.70710678118654752440); /* erfc: no cancellation for x < 0 */
}

/* The tanh formula with exact constants, using 1 + tanh(u) = 2 / (1 + e^-2u). */
static double ref_gelu_tanh(double x)
{
    double u = 0.79788456080286535588 * (x + 0.044715 * x * x * x);
    return x / (1.0 + exp(-2.0 * u));
}

/* A float ULP at magnitude a (the spacing of floats in a's binade). */
static double ulp_at(double a)
{
    a = fabs(a);
    if (a < 0x1p-126) return 0x1p-149;
    int e;
    frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    return ldexp(1.0, e - 24);
}

/* Error of got against the exact ref in ULPs of ref (or of x, for the
 * activations, whose relative error is unbounded where upstream's formula
 * cancels). Inf counts as 2^128, the next float past the largest finite
 * one; NaN against non-NaN is infinitely wrong. */
static double err_ulps(float got, double ref, float x, int per_input)
{
    if (isnan(ref) || isnan(got)) return (isnan(ref) && isnan(got)) ? 0.0 : INFINITY;
    double g = got;
    if (isinf(got)) {
        if (fabs(ref) >= 0x1p128 && signbit(ref) == signbit(g)) return 0.0;
        g = copysign(0x1p128, g);
    }
    if (isinf(ref)) return INFINITY;
    if (g == ref) return 0.0;
    return fabs(g - ref) / ulp_at(per_input ? (double)x : ref);
}

typedef struct {
    int fn;
    double (*ref)(double);
    int per_input; /* error in ULPs of x rather than of the result */
    float lo;      /* inputs below lo are left out */
    double bound;  /* the maximum recorded in reference/math.h */
    int odd;       /* also check f(-x) == -f(x) bit for bit */
} sweep_case;

static const sweep_case sweeps[] = {
    {F_EXP2, exp2, 0, -INFINITY, 0.959, 0},
    {F_EXP, exp, 0, -INFINITY, 0.952, 0},
    {F_LOG2, log2, 0, -INFINITY, 0.883, 0},
    {F_LOG, log, 0, -INFINITY, 0.826, 0},
    {F_TANH, tanh, 0, -INFINITY, 1.057, 1},
    {F_ERF, erf, 0, -INFINITY, 1.094, 1},
    {F_SIGMOID, ref_sigmoid, 0, -INFINITY, 2.481, 0},
    {F_SILU, ref_silu, 0, -88.5f, 2.404, 0},
    {F_SILU, ref_silu, 1, -INFINITY, 1.493, 0},
    {F_GELU_ERF, ref_gelu_erf, 1, -INFINITY, 1.464, 0},
    {F_GELU_TANH, ref_gelu_tanh, 1, -INFINITY, 1.570, 0},
};
enum { N_SWEEPS = sizeof sweeps / sizeof sweeps[0] };

START_TEST(accuracy_sweep)
{
    const sweep_case *c = &sweeps[_i];
    const int64_t stride = exhaustive() ? 1 : 61;
    const int64_t n = (int64_t)((0x100000000ll + stride - 1) / stride);
    double worst = 0.0;
    uint32_t worst_at = 0;
    long asym = 0;
    uint32_t asym_at = 0;
#pragma omp parallel
    {
        double my_worst = 0.0;
        uint32_t my_at = 0;
        long my_asym = 0;
        uint32_t my_asym_at = 0;
#pragma omp for schedule(dynamic, 1 << 16)
        for (int64_t j = 0; j < n; j++) {
            uint32_t u = (uint32_t)(j * stride);
            float x = float_of(u);
            if (x < c->lo) continue;
            float y = call(c->fn, x);
            double e = err_ulps(y, c->ref((double)x), x, c->per_input);
            if (e > my_worst) {
                my_worst = e;
                my_at = u;
            }
            if (c->odd && bits_of(call(c->fn, -x)) != (bits_of(y) ^ 0x80000000u) && y == y) {
                if (!my_asym) my_asym_at = u;
                my_asym++;
            }
        }
#pragma omp critical
        {
            if (my_worst > worst || (my_worst == worst && my_at < worst_at)) {
                worst = my_worst;
                worst_at = my_at;
            }
            if (my_asym && (!asym || my_asym_at < asym_at)) asym_at = my_asym_at;
            asym += my_asym;
        }
    }
    const char *unit = c->per_input ? "ULPs of x" : "ULP";
    printf("   %-15s max %.4f %s (recorded %.3f) at input 0x%08X, stride %lld\n", fn_name[c->fn],
           worst, unit, c->bound, (unsigned)worst_at, (long long)stride);
    fflush(stdout);
    ck_assert_msg(worst <= c->bound, "%s: %.4f %s at input 0x%08X (%a) exceeds the recorded %.3f",
                  fn_name[c->fn], worst, unit, (unsigned)worst_at, (double)float_of(worst_at),
                  c->bound);
    ck_assert_msg(asym == 0, "%s: f(-x) != -f(x) for %ld inputs, first 0x%08X", fn_name[c->fn],
                  asym, (unsigned)asym_at);
}
END_TEST

/* ---- monotonicity -------------------------------------------------------------
 * exp2, exp, log2, log, tanh, erf and sigmoid never step backwards between
 * neighbouring floats (verified over all floats). Walks go in value order
 * over "ordered" integers: o >= 0 is the float with bits o, o < 0 the
 * negative float with magnitude bits -o. */

static float float_of_ordered(int64_t o)
{
    return float_of(o >= 0 ? (uint32_t)o : 0x80000000u | (uint32_t)(-o));
}

static int64_t ordered_of(float x)
{
    uint32_t u = bits_of(x);
    return (u & 0x80000000u) ? -(int64_t)(u & 0x7FFFFFFFu) : (int64_t)u;
}

#define ORD_MAX 0x7F800000ll /* +Inf */

/* Backward steps of f on ordered [lo, hi]; *first gets the first one. */
static long backward_steps(int f, int64_t lo, int64_t hi, int64_t *first)
{
    if (lo < -ORD_MAX) lo = -ORD_MAX;
    if (hi > ORD_MAX) hi = ORD_MAX;
    long bad = 0;
    float prev = call(f, float_of_ordered(lo));
    for (int64_t o = lo + 1; o <= hi; o++) {
        float y = call(f, float_of_ordered(o));
        if (y < prev) {
            if (!bad) *first = o;
            bad++;
        }
        prev = y;
    }
    return bad;
}

/* Points where a function switches branch or reduction interval. */
static int branch_points(int f, float *pt, int cap)
{
    int n = 0;
#define ADD(v)                         \
    do {                               \
        if (n < cap) pt[n++] = (v);    \
    } while (0)
    switch (f) {
    case F_EXP:
    case F_SIGMOID:
        for (int k = -152; k <= 129; k++) { /* round(x * log2 e) changes */
            ADD((float)((k + 0.5) * 0.69314718055994531));
            if (f == F_SIGMOID) ADD((float)(-(k + 0.5) * 0.69314718055994531));
        }
        if (f == F_SIGMOID) ADD(-87.0f);
        break;
    case F_EXP2:
        for (int k = -152; k <= 129; k++) ADD((float)k + 0.5f);
        break;
    case F_LOG2:
    case F_LOG:
        for (uint32_t e = 1; e < 255; e++) ADD(float_of(e << 23 | 0x3504F3u)); /* sqrt(2) * 2^k */
        ADD(float_of(0x00800000u));
        break;
    case F_TANH:
        ADD(0.75f);
        ADD(9.02f);
        for (int k = 0; k <= 26; k++) ADD((float)((k + 0.5) * 0.69314718055994531 / 2));
        break;
    case F_ERF: {
        static const float cut[] = {0.875f, 1.25f, 1.75f, 2.5f, 3.125f, 3.92f};
        for (int i = 0; i < 6; i++) ADD(cut[i]);
        break;
    }
    }
#undef ADD
    int m = n; /* the odd functions: the mirror images too */
    for (int i = 0; i < m && (f == F_TANH || f == F_ERF); i++)
        if (n < cap) pt[n++] = -pt[i];
    return n;
}

static const int mono_fns[] = {F_EXP2, F_EXP, F_LOG2, F_LOG, F_TANH, F_ERF, F_SIGMOID};

START_TEST(monotone)
{
    const int f = mono_fns[_i];
    long bad = 0;
    int64_t first = 0;
    if (exhaustive()) {
        /* Each thread walks one contiguous share; shares overlap by one. */
        const int64_t span = 2 * ORD_MAX;
#pragma omp parallel reduction(+ : bad)
        {
            int t = 0, nt = 1;
#ifdef _OPENMP
            t = omp_get_thread_num();
            nt = omp_get_num_threads();
#endif
            int64_t lo = -ORD_MAX + span * t / nt, hi = -ORD_MAX + span * (t + 1) / nt;
            int64_t my_first = 0;
            bad += backward_steps(f, lo, hi, &my_first);
#pragma omp critical
            if (my_first && (!first || my_first < first)) first = my_first;
        }
    } else {
        /* Windows of 512 neighbours every 2^16 floats, and 8192 neighbours
         * around every branch point. */
        enum { WIN = 512, GAP = 1 << 16, AROUND = 4096 };
#pragma omp parallel for reduction(+ : bad) schedule(dynamic, 64)
        for (int64_t w = -ORD_MAX; w < ORD_MAX; w += GAP) {
            int64_t my_first = 0;
            long b = backward_steps(f, w, w + WIN, &my_first);
            if (b) {
#pragma omp critical
                if (!first) first = my_first;
            }
            bad += b;
        }
        float pt[1024];
        int np = branch_points(f, pt, 1024);
        for (int i = 0; i < np; i++) {
            int64_t o = ordered_of(pt[i]), my_first = 0;
            long b = backward_steps(f, o - AROUND, o + AROUND, &my_first);
            if (b && !first) first = my_first;
            bad += b;
        }
    }
    ck_assert_msg(bad == 0, "%s steps backward %ld times, first at %a", fn_name[f], bad,
                  (double)float_of_ordered(first));
}
END_TEST

/* ---- special values ----------------------------------------------------------
 * Expected bits worked out from the mathematics (exact results, IEEE
 * rounding of values computed to 60 digits with mpmath), not from the
 * implementation. NAN_OUT means any NaN. */

#define NAN_OUT 0xFFFFFFFFu
#define QNAN 0x7FC00000u
#define SNAN 0x7F800001u
#define NEG_NAN 0xFFC00000u
#define PINF 0x7F800000u
#define NINF 0xFF800000u
#define ONE 0x3F800000u
#define MAXF 0x7F7FFFFFu

typedef struct {
    int fn;
    uint32_t in, out;
} special;

static const special specials[] = {
    /* exp: e^88.7228317 is finite, e^88.7228394 is past the rounding
     * threshold of FLT_MAX; 2^-150 lies between e^-103.972084 and
     * e^-103.9720764, so those give 0 and the smallest subnormal. */
    {F_EXP, QNAN, NAN_OUT}, {F_EXP, SNAN, NAN_OUT}, {F_EXP, NEG_NAN, NAN_OUT},
    {F_EXP, PINF, PINF}, {F_EXP, NINF, 0x00000000u}, {F_EXP, 0x00000000u, ONE},
    {F_EXP, 0x80000000u, ONE}, {F_EXP, 0x00000001u, ONE}, {F_EXP, MAXF, PINF},
    {F_EXP, 0xFF7FFFFFu, 0x00000000u}, {F_EXP, 0x42B17218u, PINF}, {F_EXP, 0x42B17217u, 0x7F7FFF84u},
    {F_EXP, 0xC2CFF1B5u, 0x00000000u}, {F_EXP, 0xC2CFF1B4u, 0x00000001u},
    {F_EXP, 0xC2CF0000u, 0x00000001u}, {F_EXP, 0xC2D10000u, 0x00000000u},
    {F_EXP, 0xC2AEAC50u, 0x007FFFE6u}, /* just below the smallest normal */
    /* exp2: integers are exact, 2^-150 is a tie and goes to even (zero) */
    {F_EXP2, QNAN, NAN_OUT}, {F_EXP2, PINF, PINF}, {F_EXP2, NINF, 0x00000000u},
    {F_EXP2, 0x00000000u, ONE}, {F_EXP2, 0x80000000u, ONE}, {F_EXP2, 0x3F800000u, 0x40000000u},
    {F_EXP2, 0xBF800000u, 0x3F000000u}, {F_EXP2, 0x42FE0000u, 0x7F000000u},
    {F_EXP2, 0x43000000u, PINF}, {F_EXP2, 0xC2FC0000u, 0x00800000u},
    {F_EXP2, 0xC2FE0000u, 0x00400000u}, {F_EXP2, 0xC3150000u, 0x00000001u},
    {F_EXP2, 0xC3160000u, 0x00000000u}, {F_EXP2, 0xC3158000u, 0x00000001u},
    {F_EXP2, 0xC3168000u, 0x00000000u}, {F_EXP2, 0xC3170000u, 0x00000000u},
    {F_EXP2, 0x3F000000u, 0x3FB504F3u}, {F_EXP2, 0x42FFFFFFu, 0x7F7FFFA7u}, {F_EXP2, MAXF, PINF},
    /* log2 */
    {F_LOG2, QNAN, NAN_OUT}, {F_LOG2, NEG_NAN, NAN_OUT}, {F_LOG2, 0xBF800000u, NAN_OUT},
    {F_LOG2, NINF, NAN_OUT}, {F_LOG2, 0x80000001u, NAN_OUT}, {F_LOG2, 0x00000000u, NINF},
    {F_LOG2, 0x80000000u, NINF}, {F_LOG2, PINF, PINF}, {F_LOG2, ONE, 0x00000000u},
    {F_LOG2, 0x40000000u, ONE}, {F_LOG2, 0x3F000000u, 0xBF800000u},
    {F_LOG2, 0x00000001u, 0xC3150000u}, {F_LOG2, 0x00800000u, 0xC2FC0000u},
    {F_LOG2, 0x007FFFFFu, 0xC2FC0000u}, {F_LOG2, 0x7F000000u, 0x42FE0000u},
    {F_LOG2, MAXF, 0x43000000u}, {F_LOG2, 0x40400000u, 0x3FCAE00Du},
    /* log */
    {F_LOG, QNAN, NAN_OUT}, {F_LOG, 0xBF800000u, NAN_OUT}, {F_LOG, NINF, NAN_OUT},
    {F_LOG, 0x00000000u, NINF}, {F_LOG, 0x80000000u, NINF}, {F_LOG, PINF, PINF},
    {F_LOG, ONE, 0x00000000u}, {F_LOG, 0x00000001u, 0xC2CE8ED0u}, {F_LOG, MAXF, 0x42B17218u},
    {F_LOG, 0x41200000u, 0x40135D8Eu},
    /* tanh: tanh(9) is still below 1 - 2^-25, tanh(9.0199165) is not */
    {F_TANH, QNAN, NAN_OUT}, {F_TANH, 0x00000000u, 0x00000000u},
    {F_TANH, 0x80000000u, 0x80000000u}, {F_TANH, PINF, ONE}, {F_TANH, NINF, 0xBF800000u},
    {F_TANH, MAXF, ONE}, {F_TANH, 0x41100000u, 0x3F7FFFFFu}, {F_TANH, 0x41105194u, ONE},
    {F_TANH, 0xC1100000u, 0xBF7FFFFFu}, {F_TANH, 0x00000001u, 0x00000001u},
    {F_TANH, 0x80000001u, 0x80000001u}, {F_TANH, 0x00800000u, 0x00800000u},
    {F_TANH, 0x3F400000u, 0x3F22991Fu},
    /* erf: erf(3.9) is below 1 - 2^-25, erf(3.92) is not; tiny inputs
     * scale by 2/sqrt(pi) = 1.128 (4 units of 2^-149 give 4.51, so 5) */
    {F_ERF, QNAN, NAN_OUT}, {F_ERF, 0x00000000u, 0x00000000u}, {F_ERF, 0x80000000u, 0x80000000u},
    {F_ERF, PINF, ONE}, {F_ERF, NINF, 0xBF800000u}, {F_ERF, MAXF, ONE},
    {F_ERF, 0x40799999u, 0x3F7FFFFFu}, {F_ERF, 0x407AE148u, ONE},
    {F_ERF, 0x00000001u, 0x00000001u}, {F_ERF, 0x00000002u, 0x00000002u},
    {F_ERF, 0x00000004u, 0x00000005u}, {F_ERF, 0x80000004u, 0x80000005u},
    {F_ERF, 0x3F5FFFFFu, 0x3F48B924u},
    /* sigmoid */
    {F_SIGMOID, QNAN, NAN_OUT}, {F_SIGMOID, 0x00000000u, 0x3F000000u},
    {F_SIGMOID, 0x80000000u, 0x3F000000u}, {F_SIGMOID, PINF, ONE},
    {F_SIGMOID, NINF, 0x00000000u}, {F_SIGMOID, MAXF, ONE}, {F_SIGMOID, 0xFF7FFFFFu, 0x00000000u},
    {F_SIGMOID, 0x41800000u, 0x3F7FFFFEu}, {F_SIGMOID, 0x41900000u, ONE},
    {F_SIGMOID, 0xC2C80000u, 0x0000001Bu}, {F_SIGMOID, 0xC2D00000u, 0x00000000u},
    {F_SIGMOID, 0xC2CFCCCDu, 0x00000001u}, {F_SIGMOID, 0xC2AE0000u, 0x00B33687u},
    /* silu = x / (1 + e^-x), upstream's expression: -Inf / Inf is NaN, and
     * where e^-x overflows (x < -88.72) the quotient is -0 */
    {F_SILU, QNAN, NAN_OUT}, {F_SILU, 0x00000000u, 0x00000000u}, {F_SILU, 0x80000000u, 0x80000000u},
    {F_SILU, PINF, PINF}, {F_SILU, NINF, NAN_OUT}, {F_SILU, 0xC2C80000u, 0x80000000u},
    {F_SILU, 0x41A00000u, 0x41A00000u}, {F_SILU, MAXF, MAXF},
    /* gelu: (x * 0.5) * (1 + erf(x / sqrt 2)); -Inf * 0 is NaN */
    {F_GELU_ERF, QNAN, NAN_OUT}, {F_GELU_ERF, 0x00000000u, 0x00000000u},
    {F_GELU_ERF, 0x80000000u, 0x80000000u}, {F_GELU_ERF, PINF, PINF},
    {F_GELU_ERF, NINF, NAN_OUT}, {F_GELU_ERF, 0xC1200000u, 0x80000000u},
    {F_GELU_ERF, 0x41200000u, 0x41200000u}, {F_GELU_ERF, MAXF, MAXF},
    /* gelu_tanh: x^3 overflows from |x| = 6.98e12, which is harmless */
    {F_GELU_TANH, QNAN, NAN_OUT}, {F_GELU_TANH, 0x00000000u, 0x00000000u},
    {F_GELU_TANH, 0x80000000u, 0x80000000u}, {F_GELU_TANH, PINF, PINF},
    {F_GELU_TANH, NINF, NAN_OUT}, {F_GELU_TANH, 0xC1200000u, 0x80000000u},
    {F_GELU_TANH, 0x41200000u, 0x41200000u}, {F_GELU_TANH, 0x551184E7u, 0x551184E7u},
    {F_GELU_TANH, 0xD51184E7u, 0x80000000u}, {F_GELU_TANH, MAXF, MAXF},
    /* recip */
    {F_RECIP, QNAN, NAN_OUT}, {F_RECIP, 0x00000000u, PINF}, {F_RECIP, 0x80000000u, NINF},
    {F_RECIP, PINF, 0x00000000u}, {F_RECIP, NINF, 0x80000000u}, {F_RECIP, 0x40400000u, 0x3EAAAAABu},
    {F_RECIP, MAXF, 0x00200000u}, {F_RECIP, 0x00000001u, PINF}, {F_RECIP, 0x00200000u, 0x7F800000u},
    {F_RECIP, 0x00400000u, 0x7F000000u},
    /* fabs: a bit operation, so even a NaN's payload survives */
    {F_FABS, 0x80000000u, 0x00000000u}, {F_FABS, NINF, PINF}, {F_FABS, 0xFFC00001u, 0x7FC00001u},
    {F_FABS, 0xBF800000u, ONE},
};

static int same_class_or_bits(uint32_t got, uint32_t want)
{
    if (want == NAN_OUT) return (got & 0x7FFFFFFFu) > 0x7F800000u;
    return got == want;
}

START_TEST(special_values)
{
    int bad = 0;
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) {
        const special *s = &specials[i];
        uint32_t got = bits_of(call(s->fn, float_of(s->in)));
        if (!same_class_or_bits(got, s->out)) {
            printf("   %s(0x%08X) = 0x%08X, want %s0x%08X\n", fn_name[s->fn], (unsigned)s->in,
                   (unsigned)got, s->out == NAN_OUT ? "NaN, e.g. " : "",
                   (unsigned)(s->out == NAN_OUT ? QNAN : s->out));
            bad++;
        }
    }
    fflush(stdout);
    ck_assert_msg(bad == 0, "%d special values wrong (listed above)", bad);
}
END_TEST

/* moe_ldexpf: one rounding even when the scale goes in steps. */
START_TEST(ldexp_values)
{
    static const struct {
        uint32_t in;
        int n;
        uint32_t out;
    } t[] = {
        {ONE, 0, ONE}, {ONE, 127, 0x7F000000u}, {ONE, 128, PINF}, {ONE, -126, 0x00800000u},
        {ONE, -149, 0x00000001u}, {ONE, -150, 0x00000000u},       /* tie: to even, zero */
        {0x3FC00000u, -150, 0x00000001u},                          /* 0.75 units */
        {0x3FC00000u, -149, 0x00000002u},                          /* 1.5: tie to even, 2 */
        {0x3F800001u, -150, 0x00000001u},                          /* just past the tie */
        {0x40400000u, -151, 0x00000001u},                          /* 0.75 units */
        {MAXF, -276, 0x00000002u},                                 /* (2 - 2^-23) units */
        {MAXF, -277, 0x00000001u},                                 /* (1 - 2^-24) units */
        {MAXF, -300, 0x00000000u}, {MAXF, 1, PINF}, {0x00000001u, 149, ONE},
        {0x00000001u, 276, 0x7F000000u}, {0x00000001u, 277, PINF}, {0x00000001u, 300, PINF},
        {0x00800000u, -1, 0x00400000u}, {0xBF800000u, -149, 0x80000001u},
        {0x80000000u, 100, 0x80000000u}, {PINF, -1000, PINF}, {NINF, 1000, NINF},
        {ONE, 2147483647, PINF}, {ONE, -2147483647 - 1, 0x00000000u},
        {0x00000001u, 2147483647, PINF}, {MAXF, -2147483647 - 1, 0x00000000u},
        {QNAN, 3, NAN_OUT},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        uint32_t got = bits_of(moe_ldexpf(float_of(t[i].in), t[i].n));
        if (!same_class_or_bits(got, t[i].out)) {
            printf("   moe_ldexpf(0x%08X, %d) = 0x%08X, want 0x%08X\n", (unsigned)t[i].in, t[i].n,
                   (unsigned)got, (unsigned)t[i].out);
            bad++;
        }
    }
    fflush(stdout);
    ck_assert_msg(bad == 0, "%d moe_ldexpf values wrong (listed above)", bad);
}
END_TEST

/* moe_fminf / moe_fmaxf: a NaN operand is ignored; -0 < +0 either way round. */
START_TEST(fmin_fmax_values)
{
    static const struct {
        uint32_t a, b, min, max;
    } t[] = {
        {ONE, 0x40000000u, ONE, 0x40000000u}, {0x40000000u, ONE, ONE, 0x40000000u},
        {QNAN, ONE, ONE, ONE}, {ONE, QNAN, ONE, ONE}, {NEG_NAN, NINF, NINF, NINF},
        {QNAN, QNAN, NAN_OUT, NAN_OUT}, {0x80000000u, 0x00000000u, 0x80000000u, 0x00000000u},
        {0x00000000u, 0x80000000u, 0x80000000u, 0x00000000u}, {NINF, PINF, NINF, PINF},
        {0xBF800000u, 0x00000001u, 0xBF800000u, 0x00000001u},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        uint32_t mn = bits_of(moe_fminf(float_of(t[i].a), float_of(t[i].b)));
        uint32_t mx = bits_of(moe_fmaxf(float_of(t[i].a), float_of(t[i].b)));
        if (!same_class_or_bits(mn, t[i].min) || !same_class_or_bits(mx, t[i].max)) {
            printf("   fmin/fmax(0x%08X, 0x%08X) = 0x%08X, 0x%08X\n", (unsigned)t[i].a,
                   (unsigned)t[i].b, (unsigned)mn, (unsigned)mx);
            bad++;
        }
    }
    fflush(stdout);
    ck_assert_msg(bad == 0, "%d fmin/fmax values wrong (listed above)", bad);
}
END_TEST

/* ---- pinned bits ----------------------------------------------------------------
 * Outputs of this implementation, one per branch of each function. They
 * are what the reference and the CUDA conformance build must produce; any
 * change to an operation, its order or a constant (or a build that
 * contracts or reassociates) moves some of them. Identical under gcc and
 * clang at -O0, -O2 and -O3 -march=native. */
static const special pinned[] = {
    {F_EXP2, 0x3E99999Au, 0x3F9D9624u}, /* 0.300000012 -> 1.23114443 */
    {F_EXP2, 0xC30C4CCDu, 0x000001A0u}, /* -140.300003 -> 5.82940161e-43 */
    {F_EXP2, 0x42C96666u, 0x71CFEFA9u}, /* 100.699997 -> 2.05930011e+30 */
    {F_EXP, 0xBE99999Au, 0x3F3DA643u}, /* -0.300000012 -> 0.740818202 */
    {F_EXP, 0x41280000u, 0x470DDB81u}, /* 10.5 -> 36315.5039 */
    {F_EXP, 0xC2C90000u, 0x00000010u}, /* -100.5 -> 2.24207754e-44 */
    {F_EXP, 0x42B10000u, 0x7F4CDCC4u}, /* 88.5 -> 2.72308792e+38 */
    {F_LOG2, 0x3F333333u, 0xBF03BB12u}, /* 0.699999988 -> -0.514573216 */
    {F_LOG2, 0x000116C2u, 0xC304E08Cu}, /* 9.9999461e-41 -> -132.877136 */
    {F_LOG2, 0x3FC00000u, 0x3F15C01Au}, /* 1.5 -> 0.584962487 */
    {F_LOG2, 0x7149F2CAu, 0x42C750D1u}, /* 1.00000002e+30 -> 99.6578445 */
    {F_LOG, 0x3F333333u, 0xBEB69E1Au}, /* 0.699999988 -> -0.356674969 */
    {F_LOG, 0x3F8020C5u, 0x3A83033Bu}, /* 1.00100005 -> 0.000999546959 */
    {F_LOG, 0x000116C2u, 0xC2B834F2u}, /* 9.9999461e-41 -> -92.1034088 */
    {F_TANH, 0x3F000000u, 0x3EEC9A9Fu}, /* 0.5 -> 0.462117165 */
    {F_TANH, 0x3F4CCCCDu, 0x3F29FE50u}, /* 0.800000012 -> 0.664036751 */
    {F_TANH, 0x40A00000u, 0x3F7FFA0Du}, /* 5 -> 0.999909222 */
    {F_ERF, 0x3F000000u, 0x3F053F7Bu}, /* 0.5 -> 0.520499885 */
    {F_ERF, 0x3F8CCCCDu, 0x3F61551Fu}, /* 1.10000002 -> 0.880205095 */
    {F_ERF, 0x3FCCCCCDu, 0x3F79F1F8u}, /* 1.60000002 -> 0.9763484 */
    {F_ERF, 0x400CCCCDu, 0x3F7F85EBu}, /* 2.20000005 -> 0.998137176 */
    {F_ERF, 0x40400000u, 0x3F7FFE8Du}, /* 3 -> 0.999977887 */
    {F_ERF, 0x40600000u, 0x3F7FFFF4u}, /* 3.5 -> 0.999999285 */
    {F_SIGMOID, 0xC0400000u, 0x3D4241A2u}, /* -3 -> 0.0474258736 */
    {F_SIGMOID, 0x40200000u, 0x3F6C948Fu}, /* 2.5 -> 0.924141824 */
    {F_SIGMOID, 0xC2B40000u, 0x0008EC28u}, /* -90 -> 8.19400869e-40 */
    {F_SILU, 0xC0000000u, 0xBE7420A9u}, /* -2 -> -0.238405839 */
    {F_SILU, 0x40400000u, 0x4036E4EDu}, /* 3 -> 2.85772252 */
    {F_SILU, 0xC2B00000u, 0x83354DDCu}, /* -88 -> -5.32804976e-37 */
    {F_GELU_ERF, 0xBFC00000u, 0xBDCD3B54u}, /* -1.5 -> -0.100210816 */
    {F_GELU_ERF, 0x3F333333u, 0x3F07D712u}, /* 0.699999988 -> 0.530625463 */
    {F_GELU_TANH, 0xBFC00000u, 0xBDCDAD6Cu}, /* -1.5 -> -0.100428432 */
    {F_GELU_TANH, 0x3F333333u, 0x3F07D372u}, /* 0.699999988 -> 0.530570149 */
    {F_RECIP, 0x40E00000u, 0x3E124925u}, /* 7 -> 0.142857149 */
};

START_TEST(pinned_bits)
{
    int bad = 0;
    for (size_t i = 0; i < sizeof pinned / sizeof pinned[0]; i++) {
        const special *p = &pinned[i];
        uint32_t got = bits_of(call(p->fn, float_of(p->in)));
        if (got != p->out) {
            printf("   %s(0x%08X) = 0x%08X, pinned 0x%08X\n", fn_name[p->fn], (unsigned)p->in,
                   (unsigned)got, (unsigned)p->out);
            bad++;
        }
    }
    fflush(stdout);
    ck_assert_msg(bad == 0, "%d pinned values changed (listed above)", bad);
}
END_TEST

/* A digest of each function's outputs at about a million inputs spread
 * over all bit patterns (FNV-1a; NaNs hashed as one value since their
 * payloads are not specified). Catches a change anywhere, not just at the
 * pinned points. */
static uint64_t digest(int f)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (uint64_t u = 1; u < 0x100000000ull; u += 4099) {
        uint32_t y = bits_of(call(f, float_of((uint32_t)u)));
        if ((y & 0x7FFFFFFFu) > 0x7F800000u) y = QNAN;
        for (int b = 0; b < 4; b++) {
            h ^= (y >> (8 * b)) & 0xFFu;
            h *= 0x100000001B3ull;
        }
    }
    return h;
}

START_TEST(pinned_digests)
{
    static const uint64_t want[F_COUNT] = {
        0x18A01958C002B8F1ull, /* F_EXP2 */
        0x4F44B85A8B5D595Eull, /* F_EXP */
        0xB774C0658DDCD5BCull, /* F_LOG2 */
        0x40B97F964DA38FD4ull, /* F_LOG */
        0xA667BA9EE166C485ull, /* F_TANH */
        0x3408E4A6CD143E6Eull, /* F_ERF */
        0xB0EE742E9DAF5C8Cull, /* F_SIGMOID */
        0x65D7BDC468529FDDull, /* F_SILU */
        0xEA8B649906E0B89Aull, /* F_GELU_ERF */
        0xAF3FE24485F691A4ull, /* F_GELU_TANH */
        0x344086F4088B596Aull, /* F_RECIP */
        0x31F3B4094283F4B7ull, /* F_FABS */
    };
    int bad = 0;
    for (int f = 0; f < F_COUNT; f++) {
        uint64_t h = digest(f);
        if (h != want[f]) {
            printf("   %s digest 0x%016llX, pinned 0x%016llX\n", fn_name[f], (unsigned long long)h,
                   (unsigned long long)want[f]);
            bad++;
        }
    }
    fflush(stdout);
    ck_assert_msg(bad == 0, "%d digests changed (listed above)", bad);
}
END_TEST

/* 2^k from the rounding sum's bits (moe_m_pow2_of_round), every k of its range: what the GPU's branch-free silu
 * and sigmoid multiply by, equal to libm's ldexpf */
START_TEST(pow2_of_round_values)
{
    for (int k = -126; k <= 127; k++) {
        const float t = (float)k + MOE_M_ROUND_MAGIC; /* exact */
        ck_assert_msg(bits_of(moe_m_pow2_of_round(t)) == bits_of(ldexpf(1.0f, k)), "k %d: 0x%08x", k,
                      bits_of(moe_m_pow2_of_round(t)));
    }
}
END_TEST

/* The GPU sigmoid's reciprocal refinement (optimized/cuda/recip_refine.h)
 * from every estimate within 4 ulps of 1 / d (rcp.approx.f32's bound is
 * 2 ulps): the IEEE quotient, for all 2^23 fractions in [1, 2) and, in
 * every binade up to 2^126, every 4093rd fraction and the all-ones one
 * (the case its select exists for: without it 4 of the 8 estimates off by
 * an ulp or more round to the power of two below) */
START_TEST(recip_refine_correctly_rounded)
{
    long long tried = 0, wrong = 0;
    uint32_t first = 0;
    for (uint32_t e = 127; e < 127 + 126; e++) {
        const uint32_t n = e == 127 ? 1u << 23 : 2050;
        for (uint32_t i = 0; i < n; i++) {
            const uint32_t m = e == 127 ? i : i + 1 == n ? 0x7FFFFFu : i * 4093u;
            const float d = float_of(e << 23 | m), want = 1.0f / d;
            for (int o = -4; o <= 4; o++, tried++)
                if (bits_of(moe_recip_refine(d, float_of(bits_of(want) + (uint32_t)o))) != bits_of(want) && !wrong++)
                    first = bits_of(d);
        }
    }
    printf("recip_refine: %lld estimates tried, %lld not the IEEE quotient\n", tried, wrong);
    ck_assert_msg(wrong == 0, "recip_refine: %lld of %lld wrong (first d 0x%08x)", wrong, tried, first);
}
END_TEST

static Suite *math_suite(void)
{
    Suite *s = suite_create("math");
    TCase *tc = tcase_create("values");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, special_values);
    tcase_add_test(tc, ldexp_values);
    tcase_add_test(tc, fmin_fmax_values);
    tcase_add_test(tc, pinned_bits);
    tcase_add_test(tc, pinned_digests);
    tcase_add_test(tc, recip_refine_correctly_rounded);
    tcase_add_test(tc, pow2_of_round_values);
    suite_add_tcase(s, tc);
    TCase *sw = tcase_create("sweeps");
    tcase_set_timeout(sw, exhaustive() ? 7200 : 120);
    tcase_add_loop_test(sw, accuracy_sweep, 0, N_SWEEPS);
    tcase_add_loop_test(sw, monotone, 0, (int)(sizeof mono_fns / sizeof mono_fns[0]));
    suite_add_tcase(s, sw);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(math_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
