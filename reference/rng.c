#include <math.h> /* sqrt only: correctly rounded by IEEE 754, so deterministic */
#include "moe/rng.h"

/* The fills run over threads from this many values: element i is a pure function of (seed, stream,
 * first + i), so the bits do not depend on the thread count (check_rng). The GPU tests' host weights are
 * the reason: the gemv tcase's 2880-wide GEMM1 weights (8 experts x 5760 x 2880 normals, check_gpu_fast)
 * took 9.2 s on one core of the build machine, their quantization 4.8 s (NOTES.md v62) */
#define MOE_RNG_FILL_PAR 65536

static void mulhilo(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo)
{
    uint64_t p = (uint64_t)a * b;
    *hi = (uint32_t)(p >> 32);
    *lo = (uint32_t)p;
}

void moe_philox4x32_10(const uint32_t c[4], uint32_t k0, uint32_t k1, uint32_t out[4])
{
    uint32_t x0 = c[0], x1 = c[1], x2 = c[2], x3 = c[3];
    for (int r = 0; r < 10; r++) {
        uint32_t hi0, lo0, hi1, lo1;
        mulhilo(0xD2511F53u, x0, &hi0, &lo0);
        mulhilo(0xCD9E8D57u, x2, &hi1, &lo1);
        uint32_t y0 = hi1 ^ x1 ^ k0, y1 = lo1, y2 = hi0 ^ x3 ^ k1, y3 = lo0;
        x0 = y0;
        x1 = y1;
        x2 = y2;
        x3 = y3;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = x0;
    out[1] = x1;
    out[2] = x2;
    out[3] = x3;
}

/* Counter = (index lo, index hi, stream lo, stream hi); key = seed. */
static void block(uint64_t seed, uint64_t stream, uint64_t index, uint32_t out[4])
{
    uint32_t c[4] = {(uint32_t)index, (uint32_t)(index >> 32), (uint32_t)stream,
                     (uint32_t)(stream >> 32)};
    moe_philox4x32_10(c, (uint32_t)seed, (uint32_t)(seed >> 32), out);
}

uint32_t moe_rng_u32(uint64_t seed, uint64_t stream, uint64_t index)
{
    uint32_t o[4];
    block(seed, stream, index, o);
    return o[0];
}

float moe_rng_uniform(uint64_t seed, uint64_t stream, uint64_t index)
{
    return (float)(moe_rng_u32(seed, stream, index) >> 8) * 0x1p-24f;
}

/* ln(x) for x > 0 finite, in double: x = m * 2^k with m in [sqrt(1/2),
 * sqrt(2)), then ln m = 2 atanh(s), s = (m-1)/(m+1), |s| < 0.1716, as a
 * fixed 14-term series (truncation below 2^-60). Only +, *, / of IEEE
 * double, evaluated in a fixed order: identical on every platform built
 * without contraction (-ffp-contract=off). */
static double det_log(double x)
{
    int k = 0;
    while (x >= 1.4142135623730951) {
        x *= 0.5;
        k++;
    }
    while (x < 0.7071067811865476) {
        x *= 2.0;
        k--;
    }
    double s = (x - 1.0) / (x + 1.0), s2 = s * s, term = s, sum = 0.0;
    for (int i = 0; i < 14; i++) {
        sum += term / (double)(2 * i + 1);
        term *= s2;
    }
    return 2.0 * sum + (double)k * 0.6931471805599453;
}


float moe_rng_normal(uint64_t seed, uint64_t stream, uint64_t index)
{
    /* Each attempt draws one Philox block under a counter that mixes the
     * attempt number into the stream's high word, so element i never
     * depends on another element's rejections. */
    for (uint32_t attempt = 0;; attempt++) {
        uint32_t o[4];
        uint32_t c[4] = {(uint32_t)index, (uint32_t)(index >> 32), (uint32_t)stream,
                         (uint32_t)(stream >> 32) ^ (attempt * 0x9E3779B9u)};
        moe_philox4x32_10(c, (uint32_t)seed ^ 0x6E6F726Du, (uint32_t)(seed >> 32), o);
        double u = (double)(int32_t)o[0] * 0x1p-31; /* [-1, 1) */
        double v = (double)(int32_t)o[1] * 0x1p-31;
        double s = u * u + v * v;
        if (s > 0.0 && s < 1.0) return (float)(u * sqrt(-2.0 * det_log(s) / s));
    }
}

moe_status moe_rng_fill_uniform(float *dst, size_t n, uint64_t seed, uint64_t stream,
                                uint64_t first, float lo, float hi)
{
    if (n && !dst) return moe_fail(MOE_ERR_NULL, "dst: must not be NULL");
    if (!(lo < hi)) return moe_fail(MOE_ERR_INVALID_ARG, "lo, hi: need lo < hi (finite)");
    float w = hi - lo;
    if (!(w < __builtin_inff())) return moe_fail(MOE_ERR_INVALID_ARG, "hi - lo: must be finite");
#pragma omp parallel for schedule(static) if (n >= MOE_RNG_FILL_PAR)
    for (int64_t i = 0; i < (int64_t)n; i++) dst[i] = lo + w * moe_rng_uniform(seed, stream, first + (uint64_t)i);
    return MOE_OK;
}

moe_status moe_rng_fill_normal(float *dst, size_t n, uint64_t seed, uint64_t stream,
                               uint64_t first, float mean, float stddev)
{
    if (n && !dst) return moe_fail(MOE_ERR_NULL, "dst: must not be NULL");
    if (!(stddev >= 0.0f) || !(stddev < __builtin_inff()))
        return moe_fail(MOE_ERR_INVALID_ARG, "stddev: must be finite and >= 0");
    if (!(mean - mean == 0.0f)) return moe_fail(MOE_ERR_INVALID_ARG, "mean: must be finite");
#pragma omp parallel for schedule(static) if (n >= MOE_RNG_FILL_PAR)
    for (int64_t i = 0; i < (int64_t)n; i++) dst[i] = mean + stddev * moe_rng_normal(seed, stream, first + (uint64_t)i);
    return MOE_OK;
}

uint64_t moe_rng_stream_id(const char *name)
{
    uint64_t h = 0xCBF29CE484222325ull;
    if (!name) return h;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        h ^= *p;
        h *= 0x100000001B3ull;
    }
    return h;
}
