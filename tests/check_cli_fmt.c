/* moe-fmt, driven in-process: answers at the classic boundaries of every
 * format and policy, the three commands, --json, and every usage error. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli_run.h"
#include "moe/cli.h"

/* Runs moe-fmt with a space-separated argument string. */
static int run(const char *args) { return cli_run(moe_cli_fmt, "moe-fmt", args); }

/* (arguments, substrings the JSON answer must contain) */
static const struct { const char *args, *code, *flags; } boundary[] = {
    /* e4m3: max, tie, first overflow, Inf, NaN, -0, subnormal edges */
    {"encode e4m3 448", "\"code\": \"0x7e\"", "\"flags\": \".....\""},
    {"encode e4m3 464", "\"code\": \"0x7e\"", "\"flags\": \"....x\""},
    {"encode e4m3 465 --policy nonsat", "\"code\": \"0x7f\"", "\"flags\": \"..o.x\""},
    {"encode e4m3 465 --policy sat", "\"code\": \"0x7e\"", "\"flags\": \"..o.x\""},
    {"encode e4m3 -inf --policy sat", "\"code\": \"0xfe\"", "\"flags\": \"..o..\""},
    {"encode e4m3 inf --policy nonsat", "\"code\": \"0x7f\"", "\"flags\": \"v....\""},
    {"encode e4m3 nan", "\"code\": \"0x7f\"", "\"flags\": \".....\""},
    {"encode e4m3 -0", "\"code\": \"0x80\"", "\"flags\": \".....\""},
    {"encode e4m3 0x1p-9", "\"code\": \"0x01\"", "\"flags\": \".....\""},
    {"encode e4m3 0x1p-10", "\"code\": \"0x00\"", "\"flags\": \"...ux\""},
    {"encode e4m3 500 --policy nonsat --round rz", "\"code\": \"0x7e\"", "\"flags\": \"..o.x\""},
    /* e5m2 */
    {"encode e5m2 57344", "\"code\": \"0x7b\"", "\"flags\": \".....\""},
    {"encode e5m2 61440", "\"code\": \"0x7c\"", "\"flags\": \"..o.x\""},
    {"encode e5m2 61440 --policy sat", "\"code\": \"0x7b\"", "\"flags\": \"..o.x\""},
    {"encode e5m2 inf", "\"code\": \"0x7c\"", "\"flags\": \".....\""},
    {"encode e5m2 0x1p-17", "\"code\": \"0x00\"", "\"flags\": \"...ux\""},
    /* e2m1 */
    {"encode e2m1 6", "\"code\": \"0x7\"", "\"flags\": \".....\""},
    {"encode e2m1 -7", "\"code\": \"0xf\"", "\"flags\": \"..o.x\""},
    {"encode e2m1 5", "\"code\": \"0x6\"", "\"flags\": \"....x\""},
    {"encode e2m1 nan", "\"code\": \"0x7\"", "\"flags\": \"v....\""},
    {"encode e2m1 0.25", "\"code\": \"0x0\"", "\"flags\": \"...ux\""},
    /* e8m0 */
    {"encode e8m0 1", "\"code\": \"0x7f\"", "\"flags\": \".....\""},
    {"encode e8m0 0x1p127", "\"code\": \"0xfe\"", "\"flags\": \".....\""},
    {"encode e8m0 0x1.9p127 --policy nonsat", "\"code\": \"0xff\"", "\"flags\": \"..o.x\""},
    {"encode e8m0 0", "\"code\": \"0x00\"", "\"flags\": \"...ux\""},
    {"encode e8m0 -1", "\"code\": \"0xff\"", "\"flags\": \"v....\""},
    /* f16, bf16 (IEEE) */
    {"encode f16 65504", "\"code\": \"0x7bff\"", "\"flags\": \".....\""},
    {"encode f16 65520", "\"code\": \"0x7c00\"", "\"flags\": \"..o.x\""},
    {"encode f16 0x1p-24", "\"code\": \"0x0001\"", "\"flags\": \".....\""},
    {"encode f16 bits:0x7FA00000", "\"code\": \"0x7e00\"", "\"flags\": \"v....\""},
    {"encode bf16 1.00390625", "\"code\": \"0x3f80\"", "\"flags\": \"....x\""},
    {"encode bf16 bits:0x7F7FFFFF", "\"code\": \"0x7f80\"", "\"flags\": \"..o.x\""},
    {"encode bf16 -0", "\"code\": \"0x8000\"", "\"flags\": \".....\""},
    /* integers */
    {"encode int8 2.5", "\"code\": \"0x02\"", "\"flags\": \"....x\""},
    {"encode int8 -129", "\"code\": \"0x80\"", "\"flags\": \"..o.x\""},
    {"encode int8 nan", "\"code\": \"0x00\"", "\"flags\": \"v....\""},
    {"encode int4 -8.5", "\"code\": \"0x8\"", "\"flags\": \"....x\""},
    {"encode int4 7.5", "\"code\": \"0x7\"", "\"flags\": \"..o.x\""},
};

START_TEST(encode_boundaries)
{
    char args[256];
    snprintf(args, sizeof args, "%s --json", boundary[_i].args);
    ck_assert_int_eq(run(args), 0);
    HAS(out_buf, boundary[_i].code);
    HAS(out_buf, boundary[_i].flags);
    ck_assert_str_eq(err_buf, "");
}
END_TEST

START_TEST(text_forms)
{
    ck_assert_int_eq(run("encode e4m3 465 --policy nonsat"), 0);
    HAS(out_buf, "code    0x7f  +F.7");
    HAS(out_buf, "value   nan");
    HAS(out_buf, "flags   ..o.x (overflow inexact)");
    ck_assert_int_eq(run("decode e4m3 0x7e"), 0);
    HAS(out_buf, "code    0x7e  +F.6");
    HAS(out_buf, "value   448");
    HAS(out_buf, "class   normal");
    ck_assert_int_eq(run("decode e5m2 0x7c --json"), 0);
    HAS(out_buf, "\"value\": \"inf\", \"class\": \"inf\"");
    ck_assert_int_eq(run("decode e4m3 0x01"), 0);
    HAS(out_buf, "value   0.001953125");
    HAS(out_buf, "class   subnormal");
    ck_assert_int_eq(run("decode e8m0 0"), 0);
    HAS(out_buf, "value   5.87747175e-39");
    ck_assert_int_eq(run("decode int4 0x8"), 0);
    HAS(out_buf, "value   -8");
    ck_assert_int_eq(run("decode bf16 0xff80"), 0);
    HAS(out_buf, "value   -inf");
}
END_TEST

START_TEST(tables)
{
    ck_assert_int_eq(run("table e2m1"), 0);
    HAS(out_buf, "0x7  +3.1    6");
    HAS(out_buf, "0xf  -3.1    -6");
    int lines = 0;
    for (char *p = out_buf; *p; p++) lines += *p == '\n';
    ck_assert_int_eq(lines, 16);
    ck_assert_int_eq(run("table e4m3 --json"), 0);
    lines = 0;
    for (char *p = out_buf; *p; p++) lines += *p == '\n';
    ck_assert_int_eq(lines, 256);
    HAS(out_buf, "{\"op\": \"table\", \"format\": \"e4m3\", \"code\": \"0x7f\", \"fields\": \"+F.7\", \"value\": \"nan\"");
    ck_assert_int_eq(run("table e8m0"), 0);
    HAS(out_buf, "0xff  FF      nan");
    ck_assert_int_eq(run("table int8"), 0);
    HAS(out_buf, "0x80  0x80    -128");
}
END_TEST

START_TEST(help)
{
    ck_assert_int_eq(run("--help"), 0);
    HAS(out_buf, "usage: moe-fmt encode FORMAT VALUE");
    ck_assert_int_eq(run("encode -h"), 0);
}
END_TEST

/* Usage errors: exit 2 and a message naming the argument. */
static const struct { const char *args, *needle; } usage[] = {
    {"", "missing command"},
    {"convert e4m3 1", "command 'convert'"},
    {"encode", "missing FORMAT"},
    {"encode e9m9 1", "FORMAT 'e9m9'"},
    {"encode f32 1", "FORMAT 'f32'"},
    {"encode e4m3", "missing VALUE"},
    {"encode e4m3 abc", "VALUE 'abc'"},
    {"encode e4m3 1.5x", "VALUE '1.5x'"},
    {"encode e4m3 bits:0x1FFFFFFFF", "VALUE 'bits:0x1FFFFFFFF'"},
    {"encode e4m3 bits:zz", "VALUE 'bits:zz'"},
    {"encode e4m3 1 2", "unexpected argument '2'"},
    {"encode e4m3 1 --policy", "--policy: needs a value"},
    {"encode e4m3 1 --policy clamp", "--policy 'clamp'"},
    {"encode e4m3 1 --round up", "--round 'up'"},
    {"encode e2m1 1 --policy nonsat", "e2m1 has no Inf or NaN"},
    {"encode int8 1 --policy nonsat", "always clamps"},
    {"encode e4m3 1 --frobnicate", "unknown option '--frobnicate'"},
    {"decode e4m3 0x100", "CODE '0x100'"},
    {"decode e4m3 -1", "CODE '-1'"},
    {"decode e4m3 0xzz", "CODE '0xzz'"},
    {"decode e2m1 0x10", "CODE '0x10'"},
    {"decode e4m3 0x7e --policy sat", "apply to encode only"},
    {"table bf16", "table FORMAT 'bf16'"},
    {"table f16", "table FORMAT 'f16'"},
    {"table", "missing FORMAT"},
};

START_TEST(usage_errors)
{
    ck_assert_int_eq(run(usage[_i].args), 2);
    HAS(err_buf, usage[_i].needle);
    HAS(err_buf, "moe-fmt --help");
    ck_assert_str_eq(out_buf, "");
}
END_TEST

static Suite *cli_suite(void)
{
    Suite *s = suite_create("cli_fmt");
    TCase *tc = tcase_create("moe-fmt");
    tcase_add_loop_test(tc, encode_boundaries, 0, (int)(sizeof boundary / sizeof boundary[0]));
    tcase_add_test(tc, text_forms);
    tcase_add_test(tc, tables);
    tcase_add_test(tc, help);
    tcase_add_loop_test(tc, usage_errors, 0, (int)(sizeof usage / sizeof usage[0]));
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(cli_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
