/* moe-bench: a smoke run at the tiny shape (every stage the pair runs
 * timed on cpu and ref, the sgemm ceiling, the JSON written atomically)
 * and every usage error of its command line. Times are not asserted. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli_run.h"
#include "moe/cli.h"
#include "moe/stage_timer.h"

static int bench(const char *args) { return cli_run(moe_cli_bench, "moe-bench", args); }

START_TEST(smoke_run_tiny)
{
    char path[64], args[256];
    snprintf(path, sizeof path, "/tmp/moe_bench_%d.json", (int)getpid());
    snprintf(args, sizeof args, "--shape tiny --m 5,16 --scheme bf16,fp8_wblock128_agroup128 --reps 1 --warmup 0 "
                                "--json %s", path);
    ck_assert_msg(bench(args) == 0, "%s", err_buf);
    HAS(out_buf, "tiny M=5 bf16");
    HAS(out_buf, "tiny M=16 fp8_wblock128_agroup128");
    HAS(out_buf, "grouped_gemm");
    HAS(out_buf, "sgemm");
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    remove(path);
    ck_assert_ptr_nonnull(strstr(text, "{\"type\":\"bench\""));
    ck_assert_ptr_nonnull(strstr(text, "\"backend\":\"cpu\",\"stage\":\"e2e\""));
    ck_assert_ptr_nonnull(strstr(text, "\"backend\":\"ref\",\"stage\":\"grouped_gemm\""));
    ck_assert_ptr_nonnull(strstr(text, "\"backend\":\"sgemm\""));
    ck_assert_ptr_nonnull(strstr(text, "\"speedup_vs_ref\""));
    /* an unbuilt backend is reported as skipped, the run goes on */
    ck_assert_int_eq(bench("--shape tiny --m 3 --backend cuda-fast,cpu --reps 1"), 0);
    HAS(out_buf, "backend cuda-fast: skipped (not built)");
}
END_TEST

START_TEST(usage_errors)
{
    ck_assert_int_eq(bench("--help"), 0);
    HAS(out_buf, "usage: moe-bench");
    ck_assert_int_eq(bench("--bogus 1"), 2);
    HAS(err_buf, "unknown option '--bogus'");
    ck_assert_int_eq(bench("--reps"), 2);
    HAS(err_buf, "missing the value of '--reps'");
    ck_assert_int_eq(bench("--reps 0"), 2);
    HAS(err_buf, "must be an integer in [1, 1000]");
    ck_assert_int_eq(bench("--shape llama"), 2);
    HAS(err_buf, "--shape: unknown");
    ck_assert_int_eq(bench("--scheme fp9"), 2);
    HAS(err_buf, "--scheme: unknown scheme 'fp9'");
    ck_assert_int_eq(bench("--backend gpu"), 2);
    HAS(err_buf, "unknown backend 'gpu'");
    ck_assert_int_eq(bench("--m 0"), 2);
    HAS(err_buf, "--m: token counts");
    ck_assert_int_eq(bench("--m ,"), 2);
    HAS(err_buf, "at least one entry");
    ck_assert_int_eq(bench("--pair noep"), 2);
    HAS(err_buf, "--pair must be PF:EXPERTS");
    ck_assert_int_eq(bench("--pair noep:fast"), 2);
    HAS(err_buf, "unknown experts type");
    HAS(err_buf, "'fast'");
    ck_assert_int_eq(bench("--pair nope:ref"), 2);
    HAS(err_buf, "unknown prepare/finalize type");
    HAS(err_buf, "'nope'");
    ck_assert_int_eq(bench("--seed -3"), 2);
    HAS(err_buf, "--seed must be a non-negative integer");
    /* an incompatible pair fails the run with the constructor's message */
    ck_assert_int_eq(bench("--shape tiny --m 3 --pair noep:batched_masked --backend cpu --reps 1"), 1);
    HAS(err_buf, "format-mismatch");
    /* the stage timer refuses a missing backend or timer */
    moe_stage_timer t;
    ck_assert_int_eq(moe_stage_timer_begin(NULL, &t), MOE_ERR_NULL);
    ck_assert_int_eq(moe_stage_timer_begin(&moe_ops_ref, NULL), MOE_ERR_NULL);
    ck_assert_int_eq(moe_stage_timer_count(), 29);
    ck_assert_str_eq(moe_stage_timer_name(0), "route");
    ck_assert_ptr_null(moe_stage_timer_name(29));
    /* weights that cannot fit: refused before any allocation */
    ck_assert_int_eq(bench("--shape deepseek-v3"), 1);
    HAS(err_buf, "use a smaller shape");
    /* an unwritable JSON path: nothing left behind */
    ck_assert_int_eq(bench("--shape tiny --json /nonexistent/dir/b.json"), 2);
    HAS(err_buf, "--json: cannot write");
    ck_assert_int_ne(access("/nonexistent/dir/b.json", F_OK), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("bench");
    TCase *tc = tcase_create("bench");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, smoke_run_tiny);
    tcase_add_test(tc, usage_errors);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
