/* combos/compare.c: the comparisons under the exactness classes (EXACT,
 * SET, BOUNDED), their metrics (counts, max |delta|, ULP distance on the
 * ordered code line, share of the bound, first mismatches with
 * TestFloat-style hex), merge, the class names, and the refusals of bad
 * arguments with messages naming the argument. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "moe/compare.h"
#include "moe/format.h"
#include "test_tensors.h"
#include "test_util.h"

/* a 1-D f32 tensor from bit patterns */
static moe_tensor f32_bits(const uint32_t *b, int64_t n)
{
    moe_tensor t = tt_new(MOE_F32, 1, n, 0, 0);
    memcpy(t.data, b, (size_t)n * 4);
    return t;
}

/* a 1-D tensor of a 16-bit or 8-bit dtype from codes */
static moe_tensor codes(moe_dtype d, const uint32_t *c, int64_t n)
{
    moe_tensor t = tt_new(d, 1, n, 0, 0);
    for (int64_t i = 0; i < n; i++) {
        if (moe_dtype_get(d)->npy_itemsize == 2) ((uint16_t *)t.data)[i] = (uint16_t)c[i];
        else ((uint8_t *)t.data)[i] = (uint8_t)c[i];
    }
    return t;
}

static moe_cmp_metrics exact(const moe_tensor *g, const moe_tensor *w)
{
    moe_cmp_metrics m;
    moe_cmp_init(&m);
    ck_assert_msg(moe_compare_exact(g, w, &m) == MOE_OK, "%s", moe_last_error());
    return m;
}

static moe_cmp_metrics bounded(const moe_tensor *g, const moe_tensor *w, const double *b)
{
    moe_cmp_metrics m;
    moe_cmp_init(&m);
    ck_assert_msg(moe_compare_bounded(g, w, b, &m, NULL) == MOE_OK, "%s", moe_last_error());
    return m;
}

START_TEST(exact_equal_and_unequal)
{
    float a[5] = {1.0f, -2.5f, 0.0f, 3e-40f, 1e30f}, b[5];
    memcpy(b, a, sizeof a);
    moe_tensor g = tt_new(MOE_F32, 2, 1, 5, 0), w = tt_new(MOE_F32, 2, 1, 5, 0);
    memcpy(g.data, a, sizeof a), memcpy(w.data, b, sizeof b);
    moe_cmp_metrics m = exact(&g, &w);
    ck_assert(m.n == 5 && m.mismatches == 0 && m.class_mismatches == 0 && m.nfirst == 0 && m.max_abs == 0.0);
    ck_assert(moe_cmp_pass(&m, MOE_CLASS_EXACT) && moe_cmp_pass(&m, MOE_CLASS_SET) && moe_cmp_pass(&m, MOE_CLASS_BOUNDED));
    ((float *)g.data)[1] = nextafterf(-2.5f, -INFINITY); /* one ulp away from zero */
    ((float *)g.data)[4] = 2e30f;
    m = exact(&g, &w);
    ck_assert(m.mismatches == 2 && m.class_mismatches == 0 && !moe_cmp_pass(&m, MOE_CLASS_EXACT));
    ck_assert(m.nfirst == 2 && m.first[0].index == 1 && m.first[1].index == 4);
    ck_assert(m.first[0].got == (double)nextafterf(-2.5f, -INFINITY) && m.first[0].want == -2.5);
    ck_assert(m.max_abs == (double)2e30f - (double)1e30f && m.max_ulp > 1.0);
    /* f32 values decode to themselves (the codec has no f32 row) */
    ck_assert(moe_tensor_value_at(&w, 0) == 1.0 && moe_tensor_value_at(&w, 3) == (double)3e-40f);
    /* accumulation: a second comparison adds up */
    m = exact(&g, &w);
    moe_compare_exact(&g, &w, &m);
    ck_assert(m.n == 10 && m.mismatches == 4);
    moe_tensor_free(&g), moe_tensor_free(&w);
}
END_TEST

START_TEST(signed_zeros)
{
    uint32_t gb[2] = {0x00000000u, 0x3f800000u}, wb[2] = {0x80000000u, 0x3f800000u};
    moe_tensor g = f32_bits(gb, 2), w = f32_bits(wb, 2);
    moe_cmp_metrics m = exact(&g, &w);
    ck_assert(m.mismatches == 1 && m.class_mismatches == 0 && m.max_abs == 0.0 && m.max_ulp == 0.0);
    ck_assert(!moe_cmp_pass(&m, MOE_CLASS_EXACT));
    ck_assert_str_eq(m.first[0].got_hex, "+00.000000");
    ck_assert_str_eq(m.first[0].want_hex, "-00.000000");
    double zero[2] = {0.0, 0.0};
    m = bounded(&g, &w, zero); /* within any bound, even 0 */
    ck_assert(m.mismatches == 0 && m.bound_failures == 0 && m.share == 0.0 && moe_cmp_pass(&m, MOE_CLASS_BOUNDED));
    m = bounded(&g, &w, NULL);
    ck_assert(moe_cmp_pass(&m, MOE_CLASS_BOUNDED));
    uint32_t gc[1] = {0x0000}, wc[1] = {0x8000};
    moe_tensor g16 = codes(MOE_BF16, gc, 1), w16 = codes(MOE_BF16, wc, 1);
    m = exact(&g16, &w16);
    ck_assert(m.mismatches == 1 && !moe_cmp_pass(&m, MOE_CLASS_EXACT));
    m = bounded(&g16, &w16, NULL);
    ck_assert(moe_cmp_pass(&m, MOE_CLASS_BOUNDED));
    moe_tensor_free(&g), moe_tensor_free(&w), moe_tensor_free(&g16), moe_tensor_free(&w16);
}
END_TEST

START_TEST(nans_compare_by_class)
{
    /* quiet / signalling / other-sign / other-payload NaNs all match */
    uint32_t gb[4] = {0x7fc00000u, 0x7fa00000u, 0xffc00000u, 0x7fc00001u},
             wb[4] = {0x7fc00001u, 0x7fc00000u, 0x7fc00000u, 0x7fffffffu};
    moe_tensor g = f32_bits(gb, 4), w = f32_bits(wb, 4);
    moe_cmp_metrics m = exact(&g, &w);
    ck_assert(m.n == 4 && m.mismatches == 0 && m.class_mismatches == 0 && moe_cmp_pass(&m, MOE_CLASS_EXACT));
    m = bounded(&g, &w, NULL);
    ck_assert(m.mismatches == 0 && moe_cmp_pass(&m, MOE_CLASS_BOUNDED));
    int64_t seg[2] = {0, 4};
    moe_cmp_init(&m);
    ck_assert_int_eq(moe_compare_set_rows(&g, &w, seg, 1, &m), MOE_OK);
    ck_assert(moe_cmp_pass(&m, MOE_CLASS_SET));
    /* e4m3: S.1111.111 either sign; bf16 payloads */
    uint32_t e1[2] = {0x7f, 0xff}, e2[2] = {0xff, 0x7f}, h1[2] = {0x7fc0, 0xffc1}, h2[2] = {0x7fc1, 0x7f81};
    moe_tensor ge = codes(MOE_E4M3, e1, 2), we = codes(MOE_E4M3, e2, 2), gh = codes(MOE_BF16, h1, 2),
               wh = codes(MOE_BF16, h2, 2);
    ck_assert(moe_cmp_pass((moe_cmp_metrics[]){exact(&ge, &we)}, MOE_CLASS_EXACT));
    ck_assert(moe_cmp_pass((moe_cmp_metrics[]){exact(&gh, &wh)}, MOE_CLASS_EXACT));
    moe_tensor *ts[] = {&g, &w, &ge, &we, &gh, &wh};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) moe_tensor_free(ts[i]);
}
END_TEST

START_TEST(class_mismatches)
{
    /* NaN vs finite, +Inf vs max finite, +Inf vs -Inf, -Inf vs -max */
    uint32_t gb[4] = {0x7fc00000u, 0x7f800000u, 0x7f800000u, 0xff800000u},
             wb[4] = {0x3f800000u, 0x7f7fffffu, 0xff800000u, 0xff7fffffu};
    moe_tensor g = f32_bits(gb, 4), w = f32_bits(wb, 4);
    moe_cmp_metrics m = exact(&g, &w);
    ck_assert(m.mismatches == 4 && m.class_mismatches == 4 && m.max_abs == 0.0);
    ck_assert(!moe_cmp_pass(&m, MOE_CLASS_EXACT) && !moe_cmp_pass(&m, MOE_CLASS_SET));
    ck_assert(isnan(m.first[0].got) && m.first[0].want == 1.0);
    ck_assert_str_eq(m.first[0].got_hex, "+FF.400000");
    double big[4] = {INFINITY, INFINITY, INFINITY, INFINITY}, share[4];
    moe_cmp_init(&m);
    ck_assert_int_eq(moe_compare_bounded(&g, &w, big, &m, share), MOE_OK);
    ck_assert(m.class_mismatches == 4 && m.bound_failures == 0 && isinf(m.share) && !moe_cmp_pass(&m, MOE_CLASS_BOUNDED));
    ck_assert(isinf(share[0]) && isinf(share[3]) && m.nfirst == 4);
    /* bf16 and e5m2: Inf vs max finite */
    uint32_t hb[1] = {0x7f80}, hw[1] = {0x7f7f}, fb[1] = {0x7c}, fw[1] = {0x7b};
    moe_tensor gh = codes(MOE_BF16, hb, 1), wh = codes(MOE_BF16, hw, 1), g5 = codes(MOE_E5M2, fb, 1),
               w5 = codes(MOE_E5M2, fw, 1);
    ck_assert_int_eq(exact(&gh, &wh).class_mismatches, 1);
    ck_assert_int_eq(exact(&g5, &w5).class_mismatches, 1);
    moe_tensor *ts[] = {&g, &w, &gh, &wh, &g5, &w5};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) moe_tensor_free(ts[i]);
}
END_TEST

START_TEST(ulp_distances)
{
    /* f32 across zero: +min subnormal vs -min subnormal is 2 codes apart; 1 vs its successor 1 */
    uint32_t gb[1] = {0x00000001u}, wb[1] = {0x80000001u};
    moe_tensor g = f32_bits(gb, 1), w = f32_bits(wb, 1);
    ck_assert(exact(&g, &w).max_ulp == 2.0);
    ((uint32_t *)g.data)[0] = 0x3f800001u, ((uint32_t *)w.data)[0] = 0x3f800000u;
    ck_assert(exact(&g, &w).max_ulp == 1.0);
    ((uint32_t *)g.data)[0] = 0x00800000u, ((uint32_t *)w.data)[0] = 0x007fffffu; /* min normal vs max subnormal */
    ck_assert(exact(&g, &w).max_ulp == 1.0);
    /* bf16 */
    uint32_t h1[2] = {0x3f81, 0x0001}, h2[2] = {0x3f80, 0x8001};
    moe_tensor gh = codes(MOE_BF16, h1, 2), wh = codes(MOE_BF16, h2, 2);
    moe_cmp_metrics m = exact(&gh, &wh);
    ck_assert(m.mismatches == 2 && m.max_ulp == 2.0);
    ck_assert_str_eq(m.first[0].got_hex, "+7F.01");
    ck_assert_str_eq(m.first[0].want_hex, "+7F.00");
    /* e4m3: 1.0 (0x38) vs 1.25 (0x3a); +min sub vs -min sub */
    uint32_t e1[2] = {0x3a, 0x01}, e2[2] = {0x38, 0x81};
    moe_tensor ge = codes(MOE_E4M3, e1, 2), we = codes(MOE_E4M3, e2, 2);
    m = exact(&ge, &we);
    ck_assert(m.max_ulp == 2.0 && m.max_abs == 0.25);
    ck_assert_str_eq(m.first[0].got_hex, "+7.2");
    ck_assert_str_eq(m.first[1].want_hex, "-0.1");
    /* e2m1 packed [2, 3] (rows padded to 2 bytes): element (1, 2) is row 1's
     * second byte, low nibble; 6 (0x7) vs 3 (0x5) is 2 codes; 0.5 vs -0.5 too */
    moe_tensor g4 = tt_new(MOE_E2M1, 2, 2, 3, 0), w4 = tt_new(MOE_E2M1, 2, 2, 3, 0);
    ck_assert_int_eq(g4.nbytes, 4);
    uint8_t *pg = g4.data, *pw = w4.data;
    pg[3] = 0x07, pw[3] = 0x05; /* element (1, 2) */
    pg[0] = 0x10, pw[0] = 0x90; /* element (0, 1): 0.5 vs -0.5 */
    m = exact(&g4, &w4);
    ck_assert(m.mismatches == 2 && m.max_ulp == 2.0 && m.max_abs == 3.0);
    ck_assert(m.first[0].index == 1 && m.first[0].got == 0.5 && m.first[0].want == -0.5);
    ck_assert(m.first[1].index == 5 && m.first[1].got == 6.0 && m.first[1].want == 3.0);
    ck_assert_str_eq(m.first[1].got_hex, "+3.1");
    ck_assert(moe_tensor_code_at(&g4, 5) == 0x7 && moe_tensor_code_at(&g4, 1) == 0x1);
    /* int4 (packed, signed) and int32 distances are value distances */
    moe_tensor gi = tt_new(MOE_I4, 1, 2, 0, 0), wi = tt_new(MOE_I4, 1, 2, 0, 0);
    ((uint8_t *)gi.data)[0] = 0x87, ((uint8_t *)wi.data)[0] = 0x07; /* element 1: -8 vs 0 */
    m = exact(&gi, &wi);
    ck_assert(m.mismatches == 1 && m.max_ulp == 8.0 && m.first[0].got == -8.0);
    moe_tensor *ts[] = {&g, &w, &gh, &wh, &ge, &we, &g4, &w4, &gi, &wi};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) moe_tensor_free(ts[i]);
}
END_TEST

START_TEST(bounded_share_and_failures)
{
    const double u = 0x1p-23;
    float wv[4] = {1.0f, 2.0f, -3.0f, 0.5f};
    float gv[4] = {1.0f + 0x1p-23f, 2.0f, -3.0f - 0x1p-22f, 0.5f + 0x1p-24f};
    moe_tensor g = tt_new(MOE_F32, 1, 4, 0, 0), w = tt_new(MOE_F32, 1, 4, 0, 0);
    memcpy(g.data, gv, sizeof gv), memcpy(w.data, wv, sizeof wv);
    /* element 0 exactly at its bound, element 2 at half, element 3 at a quarter */
    double b[4] = {u, 1.0, 4 * u, 4 * 0x1p-24}, share[4];
    moe_cmp_metrics m;
    moe_cmp_init(&m);
    ck_assert_int_eq(moe_compare_bounded(&g, &w, b, &m, share), MOE_OK);
    ck_assert(m.mismatches == 3 && m.bound_failures == 0 && m.share == 1.0 && moe_cmp_pass(&m, MOE_CLASS_BOUNDED));
    ck_assert(share[0] == 1.0 && share[1] == 0.0 && share[2] == 0.5 && share[3] == 0.25);
    ck_assert(m.nfirst == 0); /* BOUNDED lists the elements over their bound */
    /* one ulp over fails */
    ((float *)g.data)[0] = 1.0f + 0x1p-22f;
    moe_cmp_init(&m);
    ck_assert_int_eq(moe_compare_bounded(&g, &w, b, &m, share), MOE_OK);
    ck_assert(m.bound_failures == 1 && m.share == 2.0 && !moe_cmp_pass(&m, MOE_CLASS_BOUNDED));
    ck_assert(m.nfirst == 1 && m.first[0].index == 0);
    /* a zero bound admits no difference; a NaN bound admits none either */
    double z[4] = {0.0, 0.0, 0.0, NAN};
    m = bounded(&g, &w, z);
    ck_assert(m.bound_failures == 3 && isinf(m.share) && !moe_cmp_pass(&m, MOE_CLASS_BOUNDED));
    m = bounded(&g, &w, NULL);
    ck_assert(m.bound_failures == 3);
    moe_tensor_free(&g), moe_tensor_free(&w);
}
END_TEST

START_TEST(set_rows)
{
    const int32_t want[4][2] = {{1, 2}, {3, 4}, {5, 6}, {7, 8}};
    const int32_t perm[4][2] = {{3, 4}, {1, 2}, {7, 8}, {5, 6}};   /* within segments */
    const int32_t cross[4][2] = {{5, 6}, {3, 4}, {1, 2}, {7, 8}};  /* across segments */
    const int32_t change[4][2] = {{3, 4}, {1, 2}, {7, 9}, {5, 6}}; /* one row changed */
    moe_tensor w = tt_2d(MOE_I32, want, 4, 2), gp = tt_2d(MOE_I32, perm, 4, 2), gx = tt_2d(MOE_I32, cross, 4, 2),
               gc = tt_2d(MOE_I32, change, 4, 2);
    int64_t seg[3] = {0, 2, 4};
    moe_cmp_metrics m;
    moe_cmp_init(&m);
    ck_assert_int_eq(moe_compare_set_rows(&gp, &w, seg, 2, &m), MOE_OK);
    ck_assert(m.n == 8 && m.mismatches == 0 && moe_cmp_pass(&m, MOE_CLASS_SET));
    ck_assert(!moe_cmp_pass((moe_cmp_metrics[]){exact(&gp, &w)}, MOE_CLASS_EXACT));
    moe_cmp_init(&m);
    ck_assert_int_eq(moe_compare_set_rows(&gx, &w, seg, 2, &m), MOE_OK);
    ck_assert(m.mismatches > 0 && !moe_cmp_pass(&m, MOE_CLASS_SET));
    moe_cmp_init(&m);
    ck_assert_int_eq(moe_compare_set_rows(&gc, &w, seg, 2, &m), MOE_OK);
    ck_assert(m.mismatches == 1 && m.max_ulp == 1.0 && !moe_cmp_pass(&m, MOE_CLASS_SET));
    ck_assert_str_eq(m.first[0].got_hex, "0x9");
    /* rows past the last segment compare EXACT: one segment {0, 2} */
    int64_t seg1[2] = {0, 2};
    moe_cmp_init(&m);
    ck_assert_int_eq(moe_compare_set_rows(&gp, &w, seg1, 1, &m), MOE_OK);
    ck_assert(m.mismatches == 4); /* rows 2 and 3 swapped, compared in place */
    /* bad segments */
    int64_t bad[3] = {0, 3, 2};
    moe_cmp_init(&m);
    ck_assert_int_eq(moe_compare_set_rows(&gp, &w, bad, 2, &m), MOE_ERR_INVALID_ARG);
    ck_assert(strstr(moe_last_error(), "seg"));
    ck_assert_int_eq(moe_compare_set_rows(&gp, &w, NULL, 1, &m), MOE_ERR_INVALID_ARG);
    int64_t past[2] = {0, 5};
    ck_assert_int_eq(moe_compare_set_rows(&gp, &w, past, 1, &m), MOE_ERR_INVALID_ARG);
    moe_tensor *ts[] = {&w, &gp, &gx, &gc};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) moe_tensor_free(ts[i]);
}
END_TEST

START_TEST(first_mismatch_hex)
{
    /* bf16, f32, int32, int64 and bool text */
    uint32_t hb[1] = {0xbfc0}, hw[1] = {0x3f80};
    moe_tensor gh = codes(MOE_BF16, hb, 1), wh = codes(MOE_BF16, hw, 1);
    moe_cmp_metrics m = exact(&gh, &wh);
    ck_assert_str_eq(m.first[0].got_hex, "-7F.40");
    ck_assert_str_eq(m.first[0].want_hex, "+7F.00");
    ck_assert(m.first[0].got == -1.5 && m.first[0].want == 1.0 && m.max_abs == 2.5);
    uint32_t fb[1] = {0xc0490fdbu}, fw[1] = {0x00000001u};
    moe_tensor gf = f32_bits(fb, 1), wf = f32_bits(fw, 1);
    m = exact(&gf, &wf);
    ck_assert_str_eq(m.first[0].got_hex, "-80.490FDB");
    ck_assert_str_eq(m.first[0].want_hex, "+00.000001");
    int32_t iv[2] = {-1, 7}, jv[2] = {-1, 9};
    moe_tensor gi = tt_i32(iv, 2), wi = tt_i32(jv, 2);
    m = exact(&gi, &wi);
    ck_assert(m.first[0].index == 1 && m.max_ulp == 2.0 && m.max_abs == 2.0);
    ck_assert_str_eq(m.first[0].got_hex, "0x7");
    ck_assert_str_eq(m.first[0].want_hex, "0x9");
    iv[1] = -1;
    moe_tensor gn = tt_i32(iv, 2);
    m = exact(&gn, &wi);
    ck_assert_str_eq(m.first[0].got_hex, "0xffffffff");
    /* int64: a difference in the high half counts under every class */
    moe_tensor g64 = tt_new(MOE_I64, 1, 2, 0, 0), w64 = tt_new(MOE_I64, 1, 2, 0, 0);
    ((int64_t *)g64.data)[1] = (int64_t)1 << 40;
    m = exact(&g64, &w64);
    ck_assert(m.mismatches == 1 && m.max_abs == 0x1p40);
    ck_assert_str_eq(m.first[0].got_hex, "0x0000010000000000");
    m = bounded(&g64, &w64, NULL);
    ck_assert(m.bound_failures == 1 && !moe_cmp_pass(&m, MOE_CLASS_BOUNDED));
    moe_cmp_init(&m);
    ck_assert_int_eq(moe_compare_set_rows(&g64, &w64, (int64_t[2]){0, 2}, 1, &m), MOE_OK);
    ck_assert(m.mismatches == 1);
    /* at most MOE_CMP_FIRST first mismatches, in index order */
    moe_tensor ga = tt_new(MOE_F32, 1, 20, 0, 0), wa = tt_new(MOE_F32, 1, 20, 0, 0);
    for (int i = 0; i < 20; i++) ((float *)ga.data)[i] = (float)i;
    m = exact(&ga, &wa);
    ck_assert(m.mismatches == 19 && m.nfirst == MOE_CMP_FIRST && m.first[0].index == 1 &&
              m.first[MOE_CMP_FIRST - 1].index == MOE_CMP_FIRST && m.max_abs == 19.0);
    moe_tensor *ts[] = {&gh, &wh, &gf, &wf, &gi, &wi, &gn, &g64, &w64, &ga, &wa};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) moe_tensor_free(ts[i]);
}
END_TEST

START_TEST(merge)
{
    moe_cmp_metrics a, b;
    moe_cmp_init(&a), moe_cmp_init(&b);
    a.n = 10, a.mismatches = 2, a.class_mismatches = 1, a.bound_failures = 1, a.max_abs = 0.5, a.max_ulp = 3,
    a.share = 0.25, a.nfirst = 6;
    b.n = 5, b.mismatches = 4, b.class_mismatches = 0, b.bound_failures = 2, b.max_abs = 0.1, b.max_ulp = 9,
    b.share = 2.0, b.nfirst = 4;
    for (int i = 0; i < 6; i++) a.first[i].index = i;
    for (int i = 0; i < 4; i++) b.first[i].index = 100 + i;
    moe_cmp_merge(&a, &b);
    ck_assert(a.n == 15 && a.mismatches == 6 && a.class_mismatches == 1 && a.bound_failures == 3);
    ck_assert(a.max_abs == 0.5 && a.max_ulp == 9 && a.share == 2.0);
    ck_assert(a.nfirst == MOE_CMP_FIRST && a.first[5].index == 5 && a.first[6].index == 100 && a.first[7].index == 101);
}
END_TEST

START_TEST(class_names)
{
    moe_exact_class c;
    ck_assert_int_eq(moe_exact_class_from_name("bounded", &c), MOE_OK);
    ck_assert_int_eq(c, MOE_CLASS_BOUNDED);
    ck_assert_int_eq(moe_exact_class_from_name("Set", &c), MOE_OK);
    ck_assert_int_eq(c, MOE_CLASS_SET);
    ck_assert_int_eq(moe_exact_class_from_name("EXACT", &c), MOE_OK);
    ck_assert_int_eq(c, MOE_CLASS_EXACT);
    ck_assert_int_eq(moe_exact_class_from_name("EXACTLY", &c), MOE_ERR_INVALID_ARG);
    ck_assert(strstr(moe_last_error(), "EXACTLY"));
    ck_assert_int_eq(moe_exact_class_from_name("EXAC", &c), MOE_ERR_INVALID_ARG);
    ck_assert_int_eq(moe_exact_class_from_name(NULL, &c), MOE_ERR_NULL);
    ck_assert_str_eq(moe_exact_class_name(MOE_CLASS_SET), "SET");
    ck_assert_str_eq(moe_exact_class_name((moe_exact_class)7), "?");
}
END_TEST

START_TEST(bad_arguments)
{
    moe_tensor f = tt_new(MOE_F32, 2, 2, 3, 0), h = tt_new(MOE_BF16, 2, 2, 3, 0), f23 = tt_new(MOE_F32, 2, 3, 2, 0),
               f1 = tt_new(MOE_F32, 1, 6, 0, 0);
    moe_cmp_metrics m;
    moe_cmp_init(&m);
    ck_assert_int_eq(moe_compare_exact(&f, &h, &m), MOE_ERR_DTYPE);
    ck_assert_msg(strstr(moe_last_error(), "got is f32, want is bf16"), "%s", moe_last_error());
    ck_assert_int_eq(moe_compare_bounded(&h, &f, NULL, &m, NULL), MOE_ERR_DTYPE);
    ck_assert_int_eq(moe_compare_exact(&f, &f23, &m), MOE_ERR_SHAPE);
    ck_assert_msg(strstr(moe_last_error(), "dim 0 is 2 in got, 3 in want"), "%s", moe_last_error());
    ck_assert_int_eq(moe_compare_exact(&f, &f1, &m), MOE_ERR_SHAPE);
    ck_assert_msg(strstr(moe_last_error(), "rank"), "%s", moe_last_error());
    ck_assert_int_eq(moe_compare_exact(NULL, &f, &m), MOE_ERR_NULL);
    ck_assert_msg(strstr(moe_last_error(), "got must not be NULL"), "%s", moe_last_error());
    ck_assert_int_eq(moe_compare_exact(&f, NULL, &m), MOE_ERR_NULL);
    ck_assert_msg(strstr(moe_last_error(), "want must not be NULL"), "%s", moe_last_error());
    ck_assert_int_eq(moe_compare_exact(&f, &f, NULL), MOE_ERR_NULL);
    ck_assert_msg(strstr(moe_last_error(), "metrics"), "%s", moe_last_error());
    int64_t seg[2] = {0, 2};
    ck_assert_int_eq(moe_compare_set_rows(&f, NULL, seg, 1, &m), MOE_ERR_NULL);
    /* a device tensor: named, nothing read */
    moe_tensor dev = f;
    dev.device.kind = MOE_DEVICE_CUDA;
    ck_assert_int_eq(moe_compare_exact(&f, &dev, &m), MOE_ERR_INVALID_ARG);
    ck_assert_msg(strstr(moe_last_error(), "want is a device tensor"), "%s", moe_last_error());
    ck_assert_int_eq(moe_compare_bounded(&dev, &f, NULL, &m, NULL), MOE_ERR_INVALID_ARG);
    ck_assert_msg(strstr(moe_last_error(), "got is a device tensor"), "%s", moe_last_error());
    /* no data, data shorter than the layout */
    moe_tensor nod = f;
    nod.data = NULL;
    ck_assert_int_eq(moe_compare_exact(&nod, &f, &m), MOE_ERR_NULL);
    ck_assert_msg(strstr(moe_last_error(), "got has no data"), "%s", moe_last_error());
    moe_tensor shortt = f;
    shortt.nbytes = 8;
    ck_assert_int_eq(moe_compare_exact(&f, &shortt, &m), MOE_ERR_SHAPE);
    ck_assert_msg(strstr(moe_last_error(), "want holds 8 bytes"), "%s", moe_last_error());
    ck_assert(m.n == 0); /* nothing was counted */
    /* empty tensors compare fine */
    moe_tensor e0 = tt_new(MOE_F32, 2, 0, 3, 0), e1 = tt_new(MOE_F32, 2, 0, 3, 0);
    ck_assert_int_eq(moe_compare_exact(&e0, &e1, &m), MOE_OK);
    ck_assert(m.n == 0 && moe_cmp_pass(&m, MOE_CLASS_EXACT));
    moe_tensor *ts[] = {&f, &h, &f23, &f1, &e0, &e1};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) moe_tensor_free(ts[i]);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("compare");
    TCase *t = tcase_create("classes");
    tcase_add_test(t, exact_equal_and_unequal);
    tcase_add_test(t, signed_zeros);
    tcase_add_test(t, nans_compare_by_class);
    tcase_add_test(t, class_mismatches);
    tcase_add_test(t, ulp_distances);
    tcase_add_test(t, bounded_share_and_failures);
    tcase_add_test(t, set_rows);
    suite_add_tcase(s, t);
    t = tcase_create("metrics");
    tcase_add_test(t, first_mismatch_hex);
    tcase_add_test(t, merge);
    tcase_add_test(t, class_names);
    tcase_add_test(t, bad_arguments);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
