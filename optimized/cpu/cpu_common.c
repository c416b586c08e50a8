/* Shared helpers of the CPU backend (cpu_internal.h): row conversions, the
 * deterministic parallel counting sort, parallel copies. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include "cpu_internal.h"

/* Every code's f32 bits, written out from the reference decoders
 * (moe_e4m3_to_f32, moe_e2m1_to_f32); tests/check_cpu_stages.c compares
 * each entry with them. */
const uint32_t cpu_e4m3_bits[256] = {
    0x00000000u, 0x3B000000u, 0x3B800000u, 0x3BC00000u, 0x3C000000u, 0x3C200000u, 0x3C400000u, 0x3C600000u,
    0x3C800000u, 0x3C900000u, 0x3CA00000u, 0x3CB00000u, 0x3CC00000u, 0x3CD00000u, 0x3CE00000u, 0x3CF00000u,
    0x3D000000u, 0x3D100000u, 0x3D200000u, 0x3D300000u, 0x3D400000u, 0x3D500000u, 0x3D600000u, 0x3D700000u,
    0x3D800000u, 0x3D900000u, 0x3DA00000u, 0x3DB00000u, 0x3DC00000u, 0x3DD00000u, 0x3DE00000u, 0x3DF00000u,
    0x3E000000u, 0x3E100000u, 0x3E200000u, 0x3E300000u, 0x3E400000u, 0x3E500000u, 0x3E600000u, 0x3E700000u,
    0x3E800000u, 0x3E900000u, 0x3EA00000u, 0x3EB00000u, 0x3EC00000u, 0x3ED00000u, 0x3EE00000u, 0x3EF00000u,
    0x3F000000u, 0x3F100000u, 0x3F200000u, 0x3F300000u, 0x3F400000u, 0x3F500000u, 0x3F600000u, 0x3F700000u,
    0x3F800000u, 0x3F900000u, 0x3FA00000u, 0x3FB00000u, 0x3FC00000u, 0x3FD00000u, 0x3FE00000u, 0x3FF00000u,
    0x40000000u, 0x40100000u, 0x40200000u, 0x40300000u, 0x40400000u, 0x40500000u, 0x40600000u, 0x40700000u,
    0x40800000u, 0x40900000u, 0x40A00000u, 0x40B00000u, 0x40C00000u, 0x40D00000u, 0x40E00000u, 0x40F00000u,
    0x41000000u, 0x41100000u, 0x41200000u, 0x41300000u, 0x41400000u, 0x41500000u, 0x41600000u, 0x41700000u,
    0x41800000u, 0x41900000u, 0x41A00000u, 0x41B00000u, 0x41C00000u, 0x41D00000u, 0x41E00000u, 0x41F00000u,
    0x42000000u, 0x42100000u, 0x42200000u, 0x42300000u, 0x42400000u, 0x42500000u, 0x42600000u, 0x42700000u,
    0x42800000u, 0x42900000u, 0x42A00000u, 0x42B00000u, 0x42C00000u, 0x42D00000u, 0x42E00000u, 0x42F00000u,
    0x43000000u, 0x43100000u, 0x43200000u, 0x43300000u, 0x43400000u, 0x43500000u, 0x43600000u, 0x43700000u,
    0x43800000u, 0x43900000u, 0x43A00000u, 0x43B00000u, 0x43C00000u, 0x43D00000u, 0x43E00000u, 0x7FC00000u,
    0x80000000u, 0xBB000000u, 0xBB800000u, 0xBBC00000u, 0xBC000000u, 0xBC200000u, 0xBC400000u, 0xBC600000u,
    0xBC800000u, 0xBC900000u, 0xBCA00000u, 0xBCB00000u, 0xBCC00000u, 0xBCD00000u, 0xBCE00000u, 0xBCF00000u,
    0xBD000000u, 0xBD100000u, 0xBD200000u, 0xBD300000u, 0xBD400000u, 0xBD500000u, 0xBD600000u, 0xBD700000u,
    0xBD800000u, 0xBD900000u, 0xBDA00000u, 0xBDB00000u, 0xBDC00000u, 0xBDD00000u, 0xBDE00000u, 0xBDF00000u,
    0xBE000000u, 0xBE100000u, 0xBE200000u, 0xBE300000u, 0xBE400000u, 0xBE500000u, 0xBE600000u, 0xBE700000u,
    0xBE800000u, 0xBE900000u, 0xBEA00000u, 0xBEB00000u, 0xBEC00000u, 0xBED00000u, 0xBEE00000u, 0xBEF00000u,
    0xBF000000u, 0xBF100000u, 0xBF200000u, 0xBF300000u, 0xBF400000u, 0xBF500000u, 0xBF600000u, 0xBF700000u,
    0xBF800000u, 0xBF900000u, 0xBFA00000u, 0xBFB00000u, 0xBFC00000u, 0xBFD00000u, 0xBFE00000u, 0xBFF00000u,
    0xC0000000u, 0xC0100000u, 0xC0200000u, 0xC0300000u, 0xC0400000u, 0xC0500000u, 0xC0600000u, 0xC0700000u,
    0xC0800000u, 0xC0900000u, 0xC0A00000u, 0xC0B00000u, 0xC0C00000u, 0xC0D00000u, 0xC0E00000u, 0xC0F00000u,
    0xC1000000u, 0xC1100000u, 0xC1200000u, 0xC1300000u, 0xC1400000u, 0xC1500000u, 0xC1600000u, 0xC1700000u,
    0xC1800000u, 0xC1900000u, 0xC1A00000u, 0xC1B00000u, 0xC1C00000u, 0xC1D00000u, 0xC1E00000u, 0xC1F00000u,
    0xC2000000u, 0xC2100000u, 0xC2200000u, 0xC2300000u, 0xC2400000u, 0xC2500000u, 0xC2600000u, 0xC2700000u,
    0xC2800000u, 0xC2900000u, 0xC2A00000u, 0xC2B00000u, 0xC2C00000u, 0xC2D00000u, 0xC2E00000u, 0xC2F00000u,
    0xC3000000u, 0xC3100000u, 0xC3200000u, 0xC3300000u, 0xC3400000u, 0xC3500000u, 0xC3600000u, 0xC3700000u,
    0xC3800000u, 0xC3900000u, 0xC3A00000u, 0xC3B00000u, 0xC3C00000u, 0xC3D00000u, 0xC3E00000u, 0xFFC00000u,
};
const uint32_t cpu_e2m1_bits[16] = {
    0x00000000u, 0x3F000000u, 0x3F800000u, 0x3FC00000u, 0x40000000u, 0x40400000u, 0x40800000u, 0x40C00000u,
    0x80000000u, 0xBF000000u, 0xBF800000u, 0xBFC00000u, 0xC0000000u, 0xC0400000u, 0xC0800000u, 0xC0C00000u,
};

int64_t cpu_par_min = 16384, cpu_par_idx_min = 262144;

void cpu_set_par_thresholds(int64_t work, int64_t index)
{
    cpu_par_min = work;
    cpu_par_idx_min = index;
}

void cpu_load_row(moe_dtype d, const void *p, int64_t first, int64_t n, float *dst)
{
    if (d == MOE_BF16) {
        const uint16_t *s = (const uint16_t *)p + first;
        for (int64_t i = 0; i < n; i++) dst[i] = cpu_dec_bf16(s[i]);
    } else if (d == MOE_F16) {
        const uint16_t *s = (const uint16_t *)p + first;
        for (int64_t i = 0; i < n; i++) dst[i] = cpu_dec_f16(s[i]);
    } else {
        memcpy(dst, (const float *)p + first, (size_t)n * sizeof *dst);
    }
}

void cpu_store_row(moe_dtype d, void *p, int64_t first, int64_t n, const float *src)
{
    if (d == MOE_BF16) {
        uint16_t *o = (uint16_t *)p + first;
        for (int64_t i = 0; i < n; i++) o[i] = cpu_enc_bf16(src[i]);
    } else if (d == MOE_F16) {
        uint16_t *o = (uint16_t *)p + first;
        for (int64_t i = 0; i < n; i++) o[i] = cpu_enc_f16(src[i]);
    } else {
        memcpy((float *)p + first, src, (size_t)n * sizeof *src);
    }
}

void cpu_local_expert_keys(const int32_t *ids, int64_t T, int64_t k, int first_expert, int64_t L, int32_t *key)
{
#pragma omp parallel for schedule(static) if (T * k >= CPU_PAR_IDX_MIN)
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < k; j++) {
            int64_t l = (int64_t)ids[t * k + j] - first_expert;
            int32_t b = l >= 0 && l < L ? (int32_t)l : -1;
            for (int64_t i = 0; i < j && b >= 0; i++)
                if (ids[t * k + i] == ids[t * k + j]) b = -1;
            key[t * k + j] = b;
        }
}

moe_status cpu_bucket_rank(const int32_t *key, int64_t n, int nb, int32_t *rank, int64_t *count)
{
    int maxt = omp_get_max_threads();
    if (n < CPU_PAR_IDX_MIN) maxt = 1;
    int64_t *hist = calloc((size_t)maxt * (size_t)(nb > 0 ? nb : 1), sizeof *hist);
    if (!hist) return moe_fail(MOE_ERR_NOMEM, "counting sort: %d x %d counters", maxt, nb);
    for (int b = 0; b < nb; b++) count[b] = 0;
#pragma omp parallel num_threads(maxt)
    {
        int nt = omp_get_num_threads(), me = omp_get_thread_num();
        int64_t lo, hi;
        cpu_chunk(n, me, nt, &lo, &hi);
        int64_t *h = hist + (size_t)me * (size_t)nb;
        for (int64_t i = lo; i < hi; i++)
            if (key[i] >= 0) h[key[i]]++;
#pragma omp barrier
#pragma omp single
        {
            /* thread t's items of bucket b follow those of threads < t */
            for (int b = 0; b < nb; b++) {
                int64_t run = 0;
                for (int t = 0; t < nt; t++) {
                    int64_t c = hist[(size_t)t * (size_t)nb + b];
                    hist[(size_t)t * (size_t)nb + b] = run;
                    run += c;
                }
                count[b] = run;
            }
        }
        for (int64_t i = lo; i < hi; i++) rank[i] = key[i] >= 0 ? (int32_t)h[key[i]]++ : -1;
    }
    free(hist);
    return MOE_OK;
}

void cpu_memcpy(void *dst, const void *src, size_t n)
{
    if ((int64_t)n < CPU_PAR_MIN * 64) {
        if (n) memcpy(dst, src, n);
        return;
    }
#pragma omp parallel
    {
        int64_t lo, hi;
        cpu_chunk((int64_t)n, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        if (hi > lo) memcpy((char *)dst + lo, (const char *)src + lo, (size_t)(hi - lo));
    }
}

void cpu_memzero(void *dst, size_t n)
{
    if ((int64_t)n < CPU_PAR_MIN * 64) {
        if (n) memset(dst, 0, n);
        return;
    }
#pragma omp parallel
    {
        int64_t lo, hi;
        cpu_chunk((int64_t)n, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        if (hi > lo) memset((char *)dst + lo, 0, (size_t)(hi - lo));
    }
}

/* fmaf is correctly rounded wherever it runs (libm in software, or one
 * FMA instruction), so the x86 FMA build below gives libm's bits on every
 * number. Which NaN comes out of several NaN operands is not fixed by IEEE
 * and differs between the instruction forms, so elements whose result is
 * NaN are recomputed with the libm fmaf the reference calls. The FMA build
 * only runs where the CPU reports AVX2 and FMA. */
__attribute__((noinline)) static float fma_libm(float a, float b, float c) { return fmaf(a, b, c); }

static float fma_ordered(float w, float v, float acc, int v_first)
{
    return v_first ? fma_libm(v, w, acc) : fma_libm(w, v, acc);
}

static void fma_row_generic(float *acc, float w, const float *v, int64_t n, int v_first)
{
    for (int64_t i = 0; i < n; i++) acc[i] = fma_ordered(w, v[i], acc[i], v_first);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"))) static void fma_row_fma(float *acc, float w, const float *v, int64_t n,
                                                             int v_first)
{
    float r[256];
    for (int64_t i0 = 0; i0 < n; i0 += 256) {
        int m = n - i0 < 256 ? (int)(n - i0) : 256, nan = 0;
        float *a = acc + i0;
        const float *x = v + i0;
#pragma omp simd reduction(| : nan)
        for (int i = 0; i < m; i++) {
            r[i] = __builtin_fmaf(w, x[i], a[i]);
            nan |= r[i] != r[i];
        }
        if (nan)
            for (int i = 0; i < m; i++)
                if (r[i] != r[i]) r[i] = fma_ordered(w, x[i], a[i], v_first);
        memcpy(a, r, (size_t)m * sizeof *r);
    }
}
#endif

void cpu_fma_row(float *acc, float w, const float *v, int64_t n, int v_first)
{
#if defined(__x86_64__) && defined(__GNUC__)
    static int have = -1; /* every thread computes the same value */
    int h = __atomic_load_n(&have, __ATOMIC_RELAXED);
    if (h < 0) {
        __builtin_cpu_init();
        h = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        __atomic_store_n(&have, h, __ATOMIC_RELAXED);
    }
    if (h) {
        fma_row_fma(acc, w, v, n, v_first);
        return;
    }
#endif
    fma_row_generic(acc, w, v, n, v_first);
}
