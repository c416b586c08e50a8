/* The counter-based generator: Random123 known answers, addressing by
 * (seed, stream, index), independence from thread count and order. */
#include <check.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "moe/rng.h"

/* Random123's kat_vectors for Philox4x32-10. */
START_TEST(philox_known_answers)
{
    static const uint32_t kat[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
         0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
         0x94fdcceb, 0x5001e420, 0x24126ea1},
    };
    for (int i = 0; i < 3; i++) {
        uint32_t out[4];
        moe_philox4x32_10(kat[i], kat[i][4], kat[i][5], out);
        for (int j = 0; j < 4; j++)
            ck_assert_msg(out[j] == kat[i][6 + j], "vector %d word %d: %08x != %08x", i, j, out[j],
                          kat[i][6 + j]);
    }
}
END_TEST

/* Pinned values: if any of these change, every golden vector changes. */
START_TEST(stream_is_pinned)
{
    ck_assert_uint_eq(moe_rng_stream_id(""), 0xCBF29CE484222325ull);
    ck_assert_uint_eq(moe_rng_stream_id("a"), 0xAF63DC4C8601EC8Cull);
    ck_assert_uint_eq(moe_rng_u32(0, 0, 0), 0x6627e8d5u);
    uint32_t c[4] = {5, 0, 0x3, 0}, o[4];
    moe_philox4x32_10(c, 42, 0, o);
    ck_assert_uint_eq(moe_rng_u32(42, 3, 5), o[0]);
    float u = moe_rng_uniform(42, 3, 5);
    ck_assert(u == (float)(o[0] >> 8) * 0x1p-24f);
    /* the normal generator's bits, identical under gcc -O2 and clang -O0 */
    static const uint32_t normal_bits[4] = {0xBEAC0724u, 0xBE7C1FF2u, 0xBF953B85u, 0xBF9D5285u};
    for (int i = 0; i < 4; i++) {
        float x = moe_rng_normal(1, 2, (uint64_t)i);
        uint32_t b;
        memcpy(&b, &x, 4);
        ck_assert_msg(b == normal_bits[i], "normal %d: %08X", i, b);
    }
}
END_TEST

START_TEST(uniform_range_and_fill)
{
    float v[4096];
    ck_assert_int_eq(moe_rng_fill_uniform(v, 4096, 7, 1, 0, -2.0f, 3.0f), MOE_OK);
    double sum = 0;
    for (int i = 0; i < 4096; i++) {
        ck_assert(v[i] >= -2.0f && v[i] < 3.0f);
        sum += v[i];
    }
    ck_assert(fabs(sum / 4096 - 0.5) < 0.1);
    /* element i is the same whether filled alone or in a block */
    float one;
    ck_assert_int_eq(moe_rng_fill_uniform(&one, 1, 7, 1, 1234, -2.0f, 3.0f), MOE_OK);
    ck_assert(one == v[1234]);
    ck_assert_int_eq(moe_rng_fill_uniform(NULL, 4, 7, 1, 0, 0.0f, 1.0f), MOE_ERR_NULL);
    ck_assert_int_eq(moe_rng_fill_uniform(v, 4, 7, 1, 0, 1.0f, 1.0f), MOE_ERR_INVALID_ARG);
    ck_assert_int_eq(moe_rng_fill_uniform(v, 4, 7, 1, 0, NAN, 1.0f), MOE_ERR_INVALID_ARG);
    ck_assert_int_eq(moe_rng_fill_uniform(v, 4, 7, 1, 0, -3e38f, 3e38f), MOE_ERR_INVALID_ARG);
}
END_TEST

START_TEST(normal_moments_and_errors)
{
    enum { N = 200000 };
    float *v = malloc(N * sizeof *v);
    ck_assert_int_eq(moe_rng_fill_normal(v, N, 11, moe_rng_stream_id("x"), 0, 0.0f, 1.0f), MOE_OK);
    double m = 0, m2 = 0, m4 = 0;
    for (int i = 0; i < N; i++) {
        ck_assert(isfinite(v[i]));
        m += v[i];
    }
    m /= N;
    for (int i = 0; i < N; i++) {
        double d = v[i] - m;
        m2 += d * d;
        m4 += d * d * d * d;
    }
    m2 /= N;
    m4 /= N;
    /* standard errors at N = 2e5: mean 0.0022, variance 0.0032, kurtosis 0.011 */
    ck_assert_msg(fabs(m) < 0.01, "mean %g", m);
    ck_assert_msg(fabs(m2 - 1.0) < 0.015, "variance %g", m2);
    ck_assert_msg(fabs(m4 / (m2 * m2) - 3.0) < 0.06, "kurtosis %g", m4 / (m2 * m2));
    free(v);
    ck_assert_int_eq(moe_rng_fill_normal(NULL, 1, 0, 0, 0, 0.0f, 1.0f), MOE_ERR_NULL);
    float x;
    ck_assert_int_eq(moe_rng_fill_normal(&x, 1, 0, 0, 0, 0.0f, -1.0f), MOE_ERR_INVALID_ARG);
    ck_assert_int_eq(moe_rng_fill_normal(&x, 1, 0, 0, 0, INFINITY, 1.0f), MOE_ERR_INVALID_ARG);
}
END_TEST

/* Any thread count, any order: the same bits. */
START_TEST(thread_count_independent)
{
    enum { N = 100000 };
    float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    uint64_t st = moe_rng_stream_id("moe.case.x");
    for (int i = 0; i < N; i++) a[i] = moe_rng_normal(3, st, (uint64_t)i);
    for (int threads = 1; threads <= 4; threads++) {
#pragma omp parallel for num_threads(threads) schedule(dynamic, 97)
        for (int i = N - 1; i >= 0; i--) b[i] = moe_rng_normal(3, st, (uint64_t)i);
        for (int i = 0; i < N; i++) ck_assert_msg(a[i] == b[i], "threads %d index %d", threads, i);
    }
    /* the fills, which run over threads at this size (rng.c), against the one-value functions; the
     * uniform fill's elements as lo + (hi - lo) u, the normal's as mean + stddev z */
    const int was = omp_get_max_threads();
    for (int threads = 1; threads <= 4; threads++) {
        omp_set_num_threads(threads);
        ck_assert_int_eq(moe_rng_fill_normal(b, N, 3, st, 0, 0.0f, 1.0f), MOE_OK);
        for (int i = 0; i < N; i++) ck_assert_msg(a[i] == b[i], "fill_normal threads %d index %d", threads, i);
        ck_assert_int_eq(moe_rng_fill_normal(b, N, 3, st, 17, 0.5f, 0.25f), MOE_OK);
        for (int i = 0; i < N; i++)
            ck_assert_msg(b[i] == 0.5f + 0.25f * moe_rng_normal(3, st, (uint64_t)i + 17), "fill_normal threads %d index %d",
                          threads, i);
        ck_assert_int_eq(moe_rng_fill_uniform(b, N, 3, st, 5, -2.0f, 3.0f), MOE_OK);
        for (int i = 0; i < N; i++)
            ck_assert_msg(b[i] == -2.0f + 5.0f * moe_rng_uniform(3, st, (uint64_t)i + 5), "fill_uniform threads %d index %d",
                          threads, i);
    }
    omp_set_num_threads(was);
    free(a);
    free(b);
}
END_TEST

static Suite *rng_suite(void)
{
    Suite *s = suite_create("rng");
    TCase *tc = tcase_create("philox");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, philox_known_answers);
    tcase_add_test(tc, stream_is_pinned);
    tcase_add_test(tc, uniform_range_and_fill);
    tcase_add_test(tc, normal_moments_and_errors);
    tcase_add_test(tc, thread_count_independent);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(rng_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
