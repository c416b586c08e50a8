/* Status codes, error messages and the dtype table. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "moe/dtype.h"
#include "moe/sha256.h"
#include "moe/status.h"

START_TEST(status_names)
{
    ck_assert_str_eq(moe_status_str(MOE_OK), "ok");
    ck_assert_str_eq(moe_status_str(MOE_ERR_FORMAT), "malformed-file");
    ck_assert_str_eq(moe_status_str((moe_status)-1), "unknown-status");
    ck_assert_str_eq(moe_status_str(MOE_STATUS_COUNT), "unknown-status");
    for (int s = 0; s < MOE_STATUS_COUNT; s++) {
        const char *n = moe_status_str((moe_status)s);
        ck_assert_msg(n && *n && strcmp(n, "unknown-status"), "status %d has no name", s);
        for (int t = 0; t < s; t++) ck_assert_str_ne(n, moe_status_str((moe_status)t));
    }
}
END_TEST

START_TEST(last_error_message)
{
    moe_clear_error();
    ck_assert_str_eq(moe_last_error(), "");
    ck_assert_int_eq(moe_fail(MOE_ERR_SHAPE, "w1: %d experts", 4), MOE_ERR_SHAPE);
    ck_assert_str_eq(moe_last_error(), "w1: 4 experts");
    /* a message may wrap the previous one */
    moe_fail(MOE_ERR_IO, "file.npy: %s", moe_last_error());
    ck_assert_str_eq(moe_last_error(), "file.npy: w1: 4 experts");
    char big[1000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    moe_fail(MOE_ERR_IO, "%s", big);
    ck_assert_uint_eq(strlen(moe_last_error()), 511);
}
END_TEST

START_TEST(dtype_table)
{
    moe_dtype d;
    static const char *names[] = {"f32", "f16", "bf16", "e4m3", "e5m2", "e2m1", "e8m0",
                                  "int8", "int4", "uint8", "int32", "int64", "bool"};
    for (int i = 0; i < MOE_DTYPE_COUNT; i++) {
        ck_assert_int_eq(moe_dtype_from_name(names[i], &d), MOE_OK);
        ck_assert_int_eq(d, i);
        ck_assert_str_eq(moe_dtype_get(d)->name, names[i]);
    }
    ck_assert_int_eq(moe_dtype_from_name("fp8", &d), MOE_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(moe_last_error(), "dtype 'fp8'"));
    ck_assert_int_eq(moe_dtype_from_name(NULL, &d), MOE_ERR_NULL);
    ck_assert_int_eq(moe_dtype_from_name("f32", NULL), MOE_ERR_NULL);
    ck_assert_ptr_null(moe_dtype_get(MOE_DTYPE_COUNT));
    ck_assert_ptr_null(moe_dtype_get((moe_dtype)-3));
    ck_assert_int_eq(moe_dtype_get(MOE_E4M3)->bias, 7);
    ck_assert_int_eq(moe_dtype_get(MOE_E2M1)->bits, 4);
    ck_assert(moe_dtype_is_packed(MOE_E2M1) && moe_dtype_is_packed(MOE_I4));
    ck_assert(!moe_dtype_is_packed(MOE_E4M3));
    ck_assert_uint_eq(moe_dtype_row_bytes(MOE_E2M1, 7), 4);
    ck_assert_uint_eq(moe_dtype_row_bytes(MOE_I4, 8), 4);
    ck_assert_uint_eq(moe_dtype_row_bytes(MOE_BF16, 7), 14);
    ck_assert_uint_eq(moe_dtype_row_bytes(MOE_I64, 3), 24);
    ck_assert_uint_eq(moe_dtype_row_bytes(MOE_F32, -1), 0);
    ck_assert_uint_eq(moe_dtype_row_bytes(MOE_DTYPE_COUNT, 4), 0);
}
END_TEST

/* FIPS 180-4 vectors, and chunked updates equal one update. */
START_TEST(sha256_vectors)
{
    char hex[65];
    moe_sha256_hex("", 0, hex);
    ck_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    moe_sha256_hex("abc", 3, hex);
    ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    char a[1000];
    memset(a, 'a', sizeof a);
    moe_sha256_hex(a, sizeof a, hex);
    ck_assert_str_eq(hex, "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
    moe_sha256 s;
    uint8_t d1[32], d2[32];
    moe_sha256_init(&s);
    for (size_t i = 0; i < sizeof a; i += 7) moe_sha256_update(&s, a + i, i + 7 <= sizeof a ? 7 : sizeof a - i);
    moe_sha256_final(&s, d1);
    moe_sha256_init(&s);
    moe_sha256_update(&s, a, sizeof a);
    moe_sha256_final(&s, d2);
    ck_assert_int_eq(memcmp(d1, d2, 32), 0);
}
END_TEST

static Suite *core_suite(void)
{
    Suite *s = suite_create("core");
    TCase *tc = tcase_create("status_dtype");
    tcase_add_test(tc, status_names);
    tcase_add_test(tc, last_error_message);
    tcase_add_test(tc, dtype_table);
    tcase_add_test(tc, sha256_vectors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(core_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
