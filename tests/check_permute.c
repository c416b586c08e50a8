/* Row movement between token-major and expert layouts. */
#include <check.h>
#include <stdlib.h>
#include "moe/permute.h"
#include "moe/rng.h"
#include "test_tensors.h"

START_TEST(permute_rows_example)
{
    const float xv[6] = {1, 2, 3, 4, 5, 6};
    moe_tensor x = tt_2d(MOE_F32, xv, 3, 2);
    const int32_t sv[4] = {2, -1, 0, 2};
    moe_tensor src = tt_i32(sv, 4), out = tt_new(MOE_F32, 2, 4, 2, 0);
    ck_assert_int_eq(moe_ref_permute_rows(&x, &src, &out), MOE_OK);
    const float want[8] = {5, 6, 0, 0, 1, 2, 5, 6};
    ck_assert_int_eq(memcmp(out.data, want, sizeof want), 0);
    /* packed rows move as bytes: e2m1 [3, 3] is 2 bytes per row */
    moe_tensor xp = tt_new(MOE_E2M1, 2, 3, 3, 0), op = tt_new(MOE_E2M1, 2, 4, 3, 0);
    for (int i = 0; i < 6; i++) ((uint8_t *)xp.data)[i] = (uint8_t)(0x11 * (i + 1));
    ck_assert_int_eq(moe_ref_permute_rows(&xp, &src, &op), MOE_OK);
    const uint8_t wp[8] = {0x55, 0x66, 0, 0, 0x11, 0x22, 0x55, 0x66};
    ck_assert_int_eq(memcmp(op.data, wp, 8), 0);
    moe_tensor_free(&x), moe_tensor_free(&src), moe_tensor_free(&out), moe_tensor_free(&xp), moe_tensor_free(&op);
}
END_TEST

START_TEST(permute_unpermute_identity)
{
    enum { T = 37, H = 5 };
    moe_tensor x = tt_new(MOE_BF16, 2, T, H, 0), y = tt_new(MOE_BF16, 2, T, H, 0), back = tt_new(MOE_BF16, 2, T, H, 0);
    for (int i = 0; i < T * H; i++) ((uint16_t *)x.data)[i] = (uint16_t)moe_rng_u32(1, 2, (uint64_t)i);
    int32_t perm[T];
    for (int i = 0; i < T; i++) perm[i] = i;
    for (int i = T - 1; i > 0; i--) { /* Fisher-Yates with the project RNG */
        int j = (int)(moe_rng_u32(3, 4, (uint64_t)i) % (uint32_t)(i + 1)), tmp = perm[i];
        perm[i] = perm[j], perm[j] = tmp;
    }
    moe_tensor idx = tt_i32(perm, T);
    ck_assert_int_eq(moe_ref_permute_rows(&x, &idx, &y), MOE_OK);
    ck_assert_int_eq(moe_ref_unpermute_rows(&y, &idx, &back), MOE_OK);
    ck_assert_int_eq(memcmp(back.data, x.data, x.nbytes), 0);
    moe_tensor_free(&x), moe_tensor_free(&y), moe_tensor_free(&back), moe_tensor_free(&idx);
}
END_TEST

START_TEST(unpermute_zero_fill_and_duplicates)
{
    const float yv[4] = {7, 8, 9, 10};
    moe_tensor y = tt_2d(MOE_F32, yv, 2, 2), out = tt_new(MOE_F32, 2, 3, 2, 0);
    const int32_t dv[2] = {2, -1};
    moe_tensor dst = tt_i32(dv, 2);
    ((float *)out.data)[0] = 99.0f;
    ck_assert_int_eq(moe_ref_unpermute_rows(&y, &dst, &out), MOE_OK);
    const float want[6] = {0, 0, 0, 0, 7, 8};
    ck_assert_int_eq(memcmp(out.data, want, sizeof want), 0);
    ((int32_t *)dst.data)[1] = 2;
    ck_assert_int_eq(moe_ref_unpermute_rows(&y, &dst, &out), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "dst[1] = 2"));
    ((int32_t *)dst.data)[1] = 3;
    ck_assert_int_eq(moe_ref_unpermute_rows(&y, &dst, &out), MOE_ERR_INVALID_ARG);
    moe_tensor_free(&y), moe_tensor_free(&out), moe_tensor_free(&dst);
}
END_TEST

START_TEST(expand_trtllm_example)
{
    /* T=3, k=2; permuted rows in expert order hold k-major u = j*T + t */
    const float xv[3] = {10, 20, 30}, wv[6] = {0.5f, 0.25f, 0.75f, 0.125f, 1.0f, 2.0f};
    moe_tensor x = tt_2d(MOE_F32, xv, 3, 1), w = tt_2d(MOE_F32, wv, 3, 2);
    const int32_t mv[5] = {3, 1, 5, 0, 2}; /* u=3: t=0 j=1; u=1: t=1 j=0; u=5: t=2 j=1 ... */
    moe_tensor map = tt_i32(mv, 5), out = tt_new(MOE_F32, 2, 5, 1, 0), sc = tt_new(MOE_F32, 1, 5, 0, 0);
    ck_assert_int_eq(moe_ref_expand_trtllm(&x, &map, 2, &w, &out, &sc), MOE_OK);
    const float wo[5] = {10, 20, 30, 10, 30}, ws[5] = {0.25f, 0.75f, 2.0f, 0.5f, 1.0f};
    ck_assert_int_eq(memcmp(out.data, wo, sizeof wo), 0);
    ck_assert_int_eq(memcmp(sc.data, ws, sizeof ws), 0);
    ck_assert_int_eq(moe_ref_expand_trtllm(&x, &map, 2, NULL, &out, &sc), MOE_OK);
    ck_assert(((float *)sc.data)[2] == 1.0f);
    ((int32_t *)map.data)[4] = 6;
    ck_assert_int_eq(moe_ref_expand_trtllm(&x, &map, 2, &w, &out, &sc), MOE_ERR_INVALID_ARG);
    ck_assert_int_eq(moe_ref_expand_trtllm(&x, &map, 0, &w, &out, &sc), MOE_ERR_INVALID_ARG);
    ck_assert_int_eq(moe_ref_expand_trtllm(&x, &map, 3, &w, &out, &sc), MOE_ERR_SHAPE);
    moe_tensor_free(&x), moe_tensor_free(&w), moe_tensor_free(&map), moe_tensor_free(&out), moe_tensor_free(&sc);
}
END_TEST

START_TEST(batched_scatter_example)
{
    const float xv[4] = {1, 2, 3, 4};
    const int32_t iv[8] = {2, 0, 1, 2, 2, 3, 0, 1}; /* T=4, k=2 */
    moe_tensor x = tt_2d(MOE_F32, xv, 4, 1), ids = tt_2d(MOE_I32, iv, 4, 2);
    moe_tensor out = tt_new(MOE_F32, 3, 2, 3, 1), cnt = tt_new(MOE_I32, 1, 2, 0, 0);
    /* rank 1 of 2 with E=4 owns experts 2, 3 */
    ck_assert_int_eq(moe_ref_batched_scatter(&x, &ids, 2, &out, &cnt), MOE_OK);
    const float want[6] = {1, 2, 3, 3, 0, 0};
    ck_assert_int_eq(memcmp(out.data, want, sizeof want), 0);
    ck_assert_int_eq(((int32_t *)cnt.data)[0], 3);
    ck_assert_int_eq(((int32_t *)cnt.data)[1], 1);
    moe_tensor small = tt_new(MOE_F32, 3, 2, 2, 1);
    ck_assert_int_eq(moe_ref_batched_scatter(&x, &ids, 2, &small, &cnt), MOE_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "max_tokens"));
    ck_assert_int_eq(moe_ref_batched_scatter(&x, &ids, -1, &out, &cnt), MOE_ERR_INVALID_ARG);
    moe_tensor_free(&x), moe_tensor_free(&ids), moe_tensor_free(&out), moe_tensor_free(&cnt), moe_tensor_free(&small);
}
END_TEST

START_TEST(grouped_example)
{
    const float xv[3] = {1, 2, 3};
    const int32_t iv[6] = {1, 0, 0, 5, 1, 0}; /* T=3, k=2; local experts 0, 1 (5 is elsewhere) */
    moe_tensor x = tt_2d(MOE_F32, xv, 3, 1), ids = tt_2d(MOE_I32, iv, 3, 2);
    int64_t cap;
    ck_assert_int_eq(moe_grouped_capacity(6, 2, 4, &cap), MOE_OK);
    ck_assert_int_eq(cap, 12);
    moe_tensor out = tt_new(MOE_F32, 2, cap, 1, 0), src = tt_new(MOE_I32, 1, cap, 0, 0);
    moe_tensor cnt = tt_new(MOE_I32, 1, 2, 0, 0), off = tt_new(MOE_I32, 1, 3, 0, 0);
    ck_assert_int_eq(moe_ref_permute_grouped(&x, &ids, 0, 4, &out, &src, &cnt, &off), MOE_OK);
    const float wo[8] = {1, 2, 3, 0, 1, 3, 0, 0};
    ck_assert_int_eq(memcmp(out.data, wo, sizeof wo), 0);
    const int32_t ws[8] = {1, 2, 5, -1, 0, 4, -1, -1};
    ck_assert_int_eq(memcmp(src.data, ws, sizeof ws), 0);
    ck_assert_int_eq(((int32_t *)cnt.data)[0], 3);
    ck_assert_int_eq(((int32_t *)cnt.data)[1], 2);
    const int32_t wf[3] = {0, 4, 8};
    ck_assert_int_eq(memcmp(off.data, wf, sizeof wf), 0);
    ck_assert_int_eq(moe_ref_permute_grouped(&x, &ids, 0, 0, &out, &src, &cnt, &off), MOE_ERR_INVALID_ARG);
    moe_tensor tiny = tt_new(MOE_F32, 2, 5, 1, 0);
    ck_assert_int_eq(moe_ref_permute_grouped(&x, &ids, 0, 4, &tiny, &src, &cnt, &off), MOE_ERR_SHAPE);
    moe_tensor_free(&x), moe_tensor_free(&ids), moe_tensor_free(&out), moe_tensor_free(&src);
    moe_tensor_free(&cnt), moe_tensor_free(&off), moe_tensor_free(&tiny);
}
END_TEST

START_TEST(argument_errors)
{
    moe_tensor x = tt_new(MOE_F32, 2, 2, 3, 0), out = tt_new(MOE_BF16, 2, 2, 3, 0), o2 = tt_new(MOE_F32, 2, 2, 4, 0);
    const int32_t sv[2] = {0, 1};
    moe_tensor src = tt_i32(sv, 2), src3 = tt_i32(sv, 1);
    ck_assert_int_eq(moe_ref_permute_rows(NULL, &src, &out), MOE_ERR_NULL);
    ck_assert_int_eq(moe_ref_permute_rows(&x, &src, &out), MOE_ERR_DTYPE);
    ck_assert_int_eq(moe_ref_permute_rows(&x, &src, &o2), MOE_ERR_SHAPE);
    ck_assert_int_eq(moe_ref_permute_rows(&x, &src3, &x), MOE_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "src"));
    ((int32_t *)src.data)[0] = 2;
    ck_assert_int_eq(moe_ref_permute_rows(&x, &src, &x), MOE_ERR_INVALID_ARG);
    ck_assert_int_eq(moe_ref_unpermute_rows(&x, NULL, &x), MOE_ERR_NULL);
    moe_tensor_free(&x), moe_tensor_free(&out), moe_tensor_free(&o2), moe_tensor_free(&src), moe_tensor_free(&src3);
}
END_TEST

static Suite *permute_suite(void)
{
    Suite *s = suite_create("permute");
    TCase *tc = tcase_create("rows");
    tcase_add_test(tc, permute_rows_example);
    tcase_add_test(tc, permute_unpermute_identity);
    tcase_add_test(tc, unpermute_zero_fill_and_duplicates);
    tcase_add_test(tc, expand_trtllm_example);
    tcase_add_test(tc, batched_scatter_example);
    tcase_add_test(tc, grouped_example);
    tcase_add_test(tc, argument_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(permute_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
