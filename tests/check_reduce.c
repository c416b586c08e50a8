/* Top-k weight-and-reduce variants and TensorRT-LLM finalize. */
#include <check.h>
#include <stdlib.h>
#include "moe/format.h"
#include "moe/reduce.h"
#include "test_tensors.h"

static uint16_t bf(float x) { return moe_f32_to_bf16(x, MOE_POLICY_IEEE_RNE, NULL); }
static float fb(uint16_t c) { return moe_bf16_to_f32(c); }

/* bf16 has 8 significant bits: 1 + 2^-8 ties back to 1, so a per-add bf16
 * sum of {1, 2^-8, 2^-8} stays 1 while the fp32 sum is 1 + 2^-7. */
START_TEST(contiguous_sum_variants)
{
    moe_tensor fused = tt_new(MOE_BF16, 3, 1, 3, 1), w = tt_new(MOE_F32, 2, 1, 3, 0), out = tt_new(MOE_BF16, 2, 1, 1, 0);
    uint16_t *f = fused.data;
    f[0] = bf(1.0f), f[1] = bf(0x1p-8f), f[2] = bf(0x1p-8f);
    float *wv = w.data;
    wv[0] = wv[1] = wv[2] = 1.0f;
    ck_assert_int_eq(moe_ref_war_contiguous(&fused, &w, 0, MOE_SUM_STORAGE_PER_ADD, &out), MOE_OK);
    ck_assert(fb(((uint16_t *)out.data)[0]) == 1.0f);
    ck_assert_int_eq(moe_ref_war_contiguous(&fused, &w, 0, MOE_SUM_FP32, &out), MOE_OK);
    ck_assert(fb(((uint16_t *)out.data)[0]) == 1.0f + 0x1p-7f);
    ck_assert_int_eq(moe_ref_war_contiguous(&fused, &w, 0, MOE_SUM_AUTO, &out), MOE_OK); /* k=3: per-add */
    ck_assert(fb(((uint16_t *)out.data)[0]) == 1.0f);
    /* weights multiply first, rounding to bf16: 3 * 0.1 -> bf16(0.3f) */
    wv[0] = 0.1f, wv[1] = 0.0f, wv[2] = 0.0f;
    f[0] = bf(3.0f);
    ck_assert_int_eq(moe_ref_war_contiguous(&fused, &w, 0, MOE_SUM_FP32, &out), MOE_OK);
    ck_assert(fb(((uint16_t *)out.data)[0]) == fb(bf(3.0f * 0.1f)));
    ck_assert_int_eq(moe_ref_war_contiguous(&fused, &w, 1, MOE_SUM_FP32, &out), MOE_OK); /* weights on input */
    ck_assert(fb(((uint16_t *)out.data)[0]) == fb(bf(3.0f + 0x1p-7f)));
    ck_assert_int_eq(moe_ref_war_contiguous(&fused, &w, 0, (moe_sum_variant)7, &out), MOE_ERR_INVALID_ARG);
    moe_tensor bad = tt_new(MOE_BF16, 2, 2, 1, 0);
    ck_assert_int_eq(moe_ref_war_contiguous(&bad, &w, 0, MOE_SUM_FP32, &out), MOE_ERR_SHAPE);
    moe_tensor i8 = tt_new(MOE_I8, 3, 1, 3, 1);
    ck_assert_int_eq(moe_ref_war_contiguous(&i8, &w, 0, MOE_SUM_FP32, &out), MOE_ERR_DTYPE);
    ck_assert_int_eq(moe_ref_war_contiguous(&fused, NULL, 0, MOE_SUM_FP32, &out), MOE_ERR_NULL);
    moe_tensor_free(&fused), moe_tensor_free(&w), moe_tensor_free(&out), moe_tensor_free(&bad), moe_tensor_free(&i8);
}
END_TEST

START_TEST(noop_copies)
{
    const float v[4] = {1.0f, 1.00390625f, -2.0f, 3.0f};
    moe_tensor f = tt_2d(MOE_F32, v, 2, 2), o = tt_new(MOE_F32, 2, 2, 2, 0), ob = tt_new(MOE_BF16, 2, 2, 2, 0);
    ck_assert_int_eq(moe_ref_war_noop(&f, &o), MOE_OK);
    ck_assert_int_eq(memcmp(o.data, v, sizeof v), 0);
    ck_assert_int_eq(moe_ref_war_noop(&f, &ob), MOE_OK);
    ck_assert(fb(((uint16_t *)ob.data)[1]) == 1.0f); /* RNE tie to even */
    moe_tensor wrong = tt_new(MOE_F32, 2, 3, 2, 0);
    ck_assert_int_eq(moe_ref_war_noop(&f, &wrong), MOE_ERR_SHAPE);
    moe_tensor_free(&f), moe_tensor_free(&o), moe_tensor_free(&ob), moe_tensor_free(&wrong);
}
END_TEST

START_TEST(naive_batched_example)
{
    /* M=3, k=2, rank 1 owns experts 2, 3; expert 2 serves tokens 0, 2; expert 3 token 2 */
    const int32_t iv[6] = {2, 0, 1, 0, 3, 2};
    const float wv[6] = {0.5f, 0.5f, 1.0f, 0.0f, 0.25f, 2.0f};
    moe_tensor ids = tt_2d(MOE_I32, iv, 3, 2), w = tt_2d(MOE_F32, wv, 3, 2);
    moe_tensor fused = tt_new(MOE_F32, 3, 2, 2, 1), out = tt_new(MOE_F32, 2, 3, 1, 0);
    float *f = fused.data;
    f[0] = 10.0f, f[1] = 20.0f; /* expert 2: token 0, token 2 */
    f[2] = 40.0f;               /* expert 3: token 2 */
    ck_assert_int_eq(moe_ref_war_naive_batched(&fused, &ids, &w, 2, 0, &out), MOE_OK);
    const float want[3] = {5.0f, 0.0f, 20.0f * 2.0f + 40.0f * 0.25f};
    ck_assert_int_eq(memcmp(out.data, want, sizeof want), 0);
    ck_assert_int_eq(moe_ref_war_naive_batched(&fused, &ids, NULL, 2, 1, &out), MOE_OK);
    ck_assert(((float *)out.data)[2] == 60.0f);
    ck_assert_int_eq(moe_ref_war_naive_batched(&fused, &ids, NULL, 2, 0, &out), MOE_ERR_NULL);
    moe_tensor small = tt_new(MOE_F32, 3, 2, 1, 1);
    ck_assert_int_eq(moe_ref_war_naive_batched(&small, &ids, &w, 2, 0, &out), MOE_ERR_SHAPE);
    moe_tensor_free(&ids), moe_tensor_free(&w), moe_tensor_free(&fused), moe_tensor_free(&out), moe_tensor_free(&small);
}
END_TEST

START_TEST(finalize_trtllm_example)
{
    /* T=2, k=2, local experts [4, 6): token 0 -> e4 (slot 0), e9 (not local);
     * token 1 -> e5, e4. Permuted rows: 0 = (t0,j0), 1 = (t1,j1), 2 = (t1,j0). */
    const int32_t iv[4] = {4, 9, 5, 4};
    const float wv[4] = {0.5f, 0.5f, 2.0f, 1.0f + 0x1p-12f};
    const int32_t mv[4] = {0, 2, -1, 1}; /* k-major: j*T + t */
    moe_tensor ids = tt_2d(MOE_I32, iv, 2, 2), w = tt_2d(MOE_F32, wv, 2, 2), map = tt_i32(mv, 4);
    moe_tensor y = tt_new(MOE_F32, 2, 3, 1, 0), out = tt_new(MOE_F32, 2, 2, 1, 0), bias = tt_new(MOE_F32, 2, 2, 1, 0);
    float *yv = y.data;
    yv[0] = 8.0f, yv[1] = 1.0f + 0x1p-12f, yv[2] = -0.5f;
    ck_assert_int_eq(moe_ref_finalize_trtllm(&y, &map, &ids, &w, NULL, 4, 2, &out), MOE_OK);
    ck_assert(((float *)out.data)[0] == 4.0f);
    /* token 1: acc = fmaf(2, -0.5, 0) = -1, then fmaf(1+2^-12, 1+2^-12, -1)
     * = 2^-11 + 2^-24 exactly; a separate multiply would have rounded the
     * product to 1 + 2^-11 and given 2^-11 */
    ck_assert(((float *)out.data)[1] == 0x1.0008p-11f);
    float *b = bias.data;
    b[0] = 1.0f, b[1] = 0.5f; /* e4, e5 */
    ck_assert_int_eq(moe_ref_finalize_trtllm(&y, &map, &ids, &w, &bias, 4, 2, &out), MOE_OK);
    ck_assert(((float *)out.data)[0] == 4.5f);
    /* no local expert: zeros */
    ck_assert_int_eq(moe_ref_finalize_trtllm(&y, &map, &ids, &w, NULL, 100, 2, &out), MOE_OK);
    ck_assert(((float *)out.data)[0] == 0.0f && ((float *)out.data)[1] == 0.0f);
    ck_assert_int_eq(moe_ref_finalize_trtllm(&y, &map, &ids, NULL, NULL, 4, 2, &out), MOE_OK);
    ck_assert(((float *)out.data)[0] == 8.0f);
    ck_assert(((float *)out.data)[1] == 0.5f + 0x1p-12f); /* -0.5 + (1 + 2^-12) */
    ((int32_t *)map.data)[0] = 3;
    ck_assert_int_eq(moe_ref_finalize_trtllm(&y, &map, &ids, &w, NULL, 4, 2, &out), MOE_ERR_INVALID_ARG);
    ck_assert_int_eq(moe_ref_finalize_trtllm(&y, &map, &ids, &w, NULL, 4, 0, &out), MOE_ERR_INVALID_ARG);
    moe_tensor bad_bias = tt_new(MOE_F32, 2, 3, 1, 0);
    ((int32_t *)map.data)[0] = 0;
    ck_assert_int_eq(moe_ref_finalize_trtllm(&y, &map, &ids, &w, &bad_bias, 4, 2, &out), MOE_ERR_SHAPE);
    moe_tensor_free(&ids), moe_tensor_free(&w), moe_tensor_free(&map), moe_tensor_free(&y);
    moe_tensor_free(&out), moe_tensor_free(&bias), moe_tensor_free(&bad_bias);
}
END_TEST

START_TEST(names)
{
    ck_assert_str_eq(moe_war_name(MOE_WAR_CONTIGUOUS), "contiguous");
    ck_assert_str_eq(moe_war_name(MOE_WAR_COUNT), "unknown");
}
END_TEST

static Suite *reduce_suite(void)
{
    Suite *s = suite_create("reduce");
    TCase *tc = tcase_create("war");
    tcase_add_test(tc, contiguous_sum_variants);
    tcase_add_test(tc, noop_copies);
    tcase_add_test(tc, naive_batched_example);
    tcase_add_test(tc, finalize_trtllm_example);
    tcase_add_test(tc, names);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(reduce_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
