/* The ops table: the reference backend fills every entry, the ABI check,
 * and the memory entries' error paths. */
#include <check.h>
#include <stdlib.h>
#include "moe/ops.h"
#include "test_tensors.h"

START_TEST(reference_fills_every_entry)
{
    ck_assert_int_eq(moe_ops_check(&moe_ops_ref), MOE_OK);
    ck_assert_str_eq(moe_ops_ref.name, "ref");
    ck_assert_int_eq(moe_ops_ref.device, MOE_DEVICE_HOST);
    /* every pointer after the three header fields is set */
    const void *const *p = (const void *const *)&moe_ops_ref.alloc;
    const void *const *end = (const void *const *)(&moe_ops_ref + 1);
    int n = 0;
    for (; p < end; p++, n++) ck_assert_msg(*p != NULL, "entry %d of moe_ops_ref is NULL", n);
    ck_assert_int_ge(n, 30);
}
END_TEST

START_TEST(abi_and_memory_errors)
{
    moe_ops bad = moe_ops_ref;
    bad.abi_version = MOE_OPS_ABI_VERSION + 1;
    ck_assert_int_eq(moe_ops_check(&bad), MOE_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "ABI version"));
    bad = moe_ops_ref;
    bad.copy = NULL;
    ck_assert_int_eq(moe_ops_check(&bad), MOE_ERR_INVALID_ARG);
    ck_assert_int_eq(moe_ops_check(NULL), MOE_ERR_NULL);

    moe_tensor a, b, c;
    int64_t s[2] = {2, 3}, s2[2] = {3, 2};
    ck_assert_int_eq(moe_ops_ref.alloc(&a, MOE_F32, 2, s), MOE_OK);
    ck_assert_int_eq(moe_ops_ref.alloc(&b, MOE_F32, 2, s), MOE_OK);
    ck_assert_int_eq(moe_ops_ref.alloc(&c, MOE_F32, 2, s2), MOE_OK);
    for (int i = 0; i < 6; i++) ((float *)a.data)[i] = (float)i;
    ck_assert_int_eq(moe_ops_ref.copy(&b, &a), MOE_OK);
    ck_assert_int_eq(memcmp(a.data, b.data, a.nbytes), 0);
    ck_assert_int_eq(moe_ops_ref.copy(&c, &a), MOE_ERR_SHAPE);
    ck_assert_int_eq(moe_ops_ref.copy(NULL, &a), MOE_ERR_NULL);
    b.device.kind = MOE_DEVICE_CUDA;
    ck_assert_int_eq(moe_ops_ref.copy(&b, &a), MOE_ERR_UNSUPPORTED);
    b.device.kind = MOE_DEVICE_HOST;
    ck_assert_int_eq(moe_ops_ref.synchronize(), MOE_OK);
    moe_ops_ref.free(&a), moe_ops_ref.free(&b), moe_ops_ref.free(&c);
    ck_assert_int_eq(moe_ops_ref.alloc(&a, MOE_F32, 9, s), MOE_ERR_SHAPE);
}
END_TEST

static Suite *ops_suite(void)
{
    Suite *s = suite_create("ops");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, reference_fills_every_entry);
    tcase_add_test(tc, abi_and_memory_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(ops_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
