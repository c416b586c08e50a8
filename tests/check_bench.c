/* moe-bench: a smoke run at the tiny shape (every stage the pair runs
 * timed on cpu and ref, the sgemm ceiling, the JSON written atomically)
 * and every usage error of its command line; the device grid's options,
 * its routing generator, and the tool's answer without a GPU. Times are
 * not asserted. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli_run.h"
#include "moe/cli.h"
#include "moe/stage_timer.h"
#include "../optimized/cuda/bench_gpu.h"
#include "moe_git_rev.h" /* MOE_GIT_REV (the Makefile writes it) */

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
    char want[128]; /* the build's revision, as the sweep's meta names it (check_sweep) */
    snprintf(want, sizeof want, "\"git_rev\":\"%s\"", MOE_GIT_REV);
    ck_assert_msg(strstr(text, want) != NULL, "no %s in the meta", want);
}
END_TEST

/* --backend cuda-fast, the device grid. This program does not link the
 * CUDA library: the grid is "not built", says so, and writes no JSON. */
START_TEST(device_grid_not_built)
{
    char path[64], args[256];
    snprintf(path, sizeof path, "/tmp/moe_bench_gpu_%d.json", (int)getpid());
    snprintf(args, sizeof args, "--backend cuda-fast --shape tiny --m 3 --reps 1 --json %s", path);
    ck_assert_int_eq(bench(args), 0);
    HAS(out_buf, "backend cuda-fast: skipped (not built)");
    ck_assert_int_ne(access(path, F_OK), 0);
    ck_assert_int_eq(bench("--backend cuda-fast --shape all --peers none --skew --seed 3 --warmup 0"), 0);
    HAS(out_buf, "backend cuda-fast: skipped (not built)");
}
END_TEST

START_TEST(device_grid_usage_errors)
{
    /* cuda-fast runs alone */
    ck_assert_int_eq(bench("--backend cuda-fast,cpu --shape tiny --m 3"), 2);
    HAS(err_buf, "--backend: cuda-fast runs alone");
    HAS(err_buf, "'cpu'");
    ck_assert_int_eq(bench("--backend ref,cuda-fast"), 2);
    HAS(err_buf, "cuda-fast runs alone");
    HAS(err_buf, "'ref'");
    /* --peers: cublas or none, and only with cuda-fast */
    ck_assert_int_eq(bench("--backend cuda-fast --peers torch"), 2);
    HAS(err_buf, "--peers must be cublas or none, not 'torch'");
    ck_assert_int_eq(bench("--backend cpu --peers none"), 2);
    HAS(err_buf, "--peers applies to --backend cuda-fast only");
    ck_assert_int_eq(bench("--peers cublas"), 2);
    HAS(err_buf, "--peers applies to --backend cuda-fast only");
    ck_assert_int_eq(bench("--backend cuda-fast --peers"), 2);
    HAS(err_buf, "missing the value of '--peers'");
    /* the modular-kernel options do not apply */
    ck_assert_int_eq(bench("--backend cuda-fast --pair noep:triton_like"), 2);
    HAS(err_buf, "it takes no '--pair'");
    ck_assert_int_eq(bench("--backend cuda-fast --ref-reps 2"), 2);
    HAS(err_buf, "it takes no '--ref-reps'");
    /* shapes, token counts, schemes */
    ck_assert_int_eq(bench("--backend cuda-fast --shape deepseek-v3,llama"), 2);
    HAS(err_buf, "--shape: unknown");
    HAS(err_buf, "'llama'");
    ck_assert_int_eq(bench("--backend cuda-fast --shape ,"), 2);
    HAS(err_buf, "--shape needs at least one entry");
    ck_assert_int_eq(bench("--backend cuda-fast --m 1,0"), 2);
    HAS(err_buf, "--m: token counts must be integers in [1, 2^20], not '0'");
    ck_assert_int_eq(bench("--backend cuda-fast --m ,"), 2);
    HAS(err_buf, "at least one entry");
    ck_assert_int_eq(bench("--backend cuda-fast --scheme bf16,fp9"), 2);
    HAS(err_buf, "--scheme: unknown scheme 'fp9'");
    ck_assert_int_eq(bench("--backend cuda-fast --reps 0"), 2);
    HAS(err_buf, "must be an integer in [1, 1000]");
    ck_assert_int_eq(bench("--backend cuda-fast --seed x"), 2);
    HAS(err_buf, "--seed must be a non-negative integer");
    /* --warm-ms: milliseconds in [0, 10000], and only with cuda-fast */
    ck_assert_int_eq(bench("--backend cuda-fast --warm-ms 10001"), 2);
    HAS(err_buf, "--warm-ms must be an integer number of milliseconds in [0, 10000], not '10001'");
    ck_assert_int_eq(bench("--backend cuda-fast --warm-ms -1"), 2);
    HAS(err_buf, "not '-1'");
    ck_assert_int_eq(bench("--backend cuda-fast --warm-ms 5x"), 2);
    HAS(err_buf, "not '5x'");
    ck_assert_int_eq(bench("--backend cuda-fast --warm-ms 2.5"), 2);
    HAS(err_buf, "not '2.5'");
    ck_assert_int_eq(bench("--backend cpu --warm-ms 100"), 2);
    HAS(err_buf, "--warm-ms applies to --backend cuda-fast only, not to 'cpu'");
    ck_assert_int_eq(bench("--help"), 0);
    HAS(out_buf, "--warm-ms 500"); /* the default, as both producers' */
    ck_assert_int_eq(bench("--backend cuda-fast --shape tiny --m 3 --warm-ms 0"), 0);
    HAS(out_buf, "backend cuda-fast: skipped (not built)");
    /* usage errors come before the availability check: nothing written */
    ck_assert_int_eq(bench("--backend cuda-fast --peers x --json /tmp/moe_bench_never.json"), 2);
    ck_assert_int_ne(access("/tmp/moe_bench_never.json", F_OK), 0);
}
END_TEST

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* The routing both producers implement (bench_gpu.h; reports/torch_peer.py
 * routing(), which gave these values). */
START_TEST(device_grid_routing)
{
    ck_assert_uint_eq(moe_bench_mix64(0), 0xe220a8397b1dcdafull); /* splitmix64's first output for seed 0 */
    ck_assert_uint_eq(moe_bench_mix64(1), 0x910a2dec89025cc1ull);
    int32_t ids[4 * 8];
    float w[4 * 8];
    static const int32_t want_ids[3][8] = {{30, 107, 3, 99, 215, 242, 178, 217},
                                           {44, 175, 81, 17, 5, 183, 25, 80},
                                           {118, 112, 97, 235, 238, 12, 11, 46}};
    static const uint32_t want_w[3][8] = {
        {0x3f69c1f8, 0x3f29fb78, 0x3d7486cd, 0x3f3166ed, 0x3ec20c74, 0x3dafb1ae, 0x3eb0ce82, 0x3f27c2df},
        {0x3f7fdbec, 0x3f803e81, 0x3ec1d4ec, 0x3e0c492f, 0x3f7b5441, 0x3e63a1cb, 0x3ea0b0fe, 0x3e45c96b},
        {0x3d89c45e, 0x3f4d4511, 0x3e4f410b, 0x3f727720, 0x3f3620d6, 0x3d6e634d, 0x3ead3ec6, 0x3f71ebb4}};
    moe_bench_routing(1, 0, 3, 256, 8, ids, w);
    for (int t = 0; t < 3; t++)
        for (int j = 0; j < 8; j++) {
            ck_assert_int_eq(ids[t * 8 + j], want_ids[t][j]);
            ck_assert_uint_eq(bits(w[t * 8 + j]), want_w[t][j]);
        }
    /* skewed: even tokens choose expert 0 first, the rest drawn after it */
    static const int32_t want_skew[4][2] = {{0, 4}, {0, 5}, {0, 4}, {4, 3}};
    static const uint32_t want_skew_w[4][2] = {
        {0x3f37ef0f, 0x3d52120d}, {0x3e2d53c7, 0x3d677d6d}, {0x3e55f2a7, 0x3d8f3a3e}, {0x3f538b85, 0x3ec95d2e}};
    moe_bench_routing(2, 1, 4, 8, 2, ids, w);
    for (int t = 0; t < 4; t++)
        for (int j = 0; j < 2; j++) {
            ck_assert_int_eq(ids[t * 2 + j], want_skew[t][j]);
            ck_assert_uint_eq(bits(w[t * 2 + j]), want_skew_w[t][j]);
        }
    /* distinct and in range on a dense draw (k = E) */
    moe_bench_routing(7, 1, 4, 8, 8, ids, w);
    for (int t = 0; t < 4; t++) {
        int seen = 0;
        for (int j = 0; j < 8; j++) {
            ck_assert(ids[t * 8 + j] >= 0 && ids[t * 8 + j] < 8);
            seen |= 1 << ids[t * 8 + j];
            ck_assert(w[t * 8 + j] >= 0.05f && w[t * 8 + j] < 1.05f);
        }
        ck_assert_int_eq(seen, 0xff);
    }
}
END_TEST

/* The tool itself, when built ($MOE_BUILD/moe-bench, linked with the CUDA
 * library where nvcc exists): on a machine without a GPU it reports the
 * backend as skipped and writes no JSON; on one with a GPU it runs the
 * tiny grid and writes a bench-gpu document. */
START_TEST(device_grid_tool)
{
    const char *b = getenv("MOE_BUILD");
    char tool[512], path[128], cmd[1024];
    if (!b || !*b) return; /* run outside make run-tests: which build is meant is unknown */
    snprintf(tool, sizeof tool, "%s/moe-bench", b);
    if (access(tool, X_OK) != 0) return; /* not built: the in-process tests cover the options */
    snprintf(path, sizeof path, "/tmp/moe_bench_tool_%d.json", (int)getpid());
    snprintf(cmd, sizeof cmd, "%s --backend cuda-fast --shape tiny --m 5 --scheme bf16 --reps 2 --warmup 1 --json %s",
             tool, path);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, p);
    text[n] = 0;
    int rc = pclose(p);
    if (strstr(text, "backend cuda-fast: skipped")) {
        ck_assert_int_eq(rc, 0);
        ck_assert_msg(strstr(text, "(not built)") || strstr(text, "(no CUDA device)"), "%s", text);
        ck_assert_int_ne(access(path, F_OK), 0);
        return;
    }
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "no JSON from: %s", text);
    n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    remove(path);
    ck_assert_ptr_nonnull(strstr(text, "{\"type\":\"bench-gpu\""));
    ck_assert_ptr_nonnull(strstr(text, "\"impl\":\"cuda-fast\""));
    ck_assert_ptr_nonnull(strstr(text, "\"read_tbs\""));
    char want[128];
    snprintf(want, sizeof want, "\"git_rev\":\"%s\"", MOE_GIT_REV);
    ck_assert_msg(strstr(text, want) != NULL, "no %s in the meta", want);
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
    tcase_add_test(tc, device_grid_not_built);
    tcase_add_test(tc, device_grid_usage_errors);
    tcase_add_test(tc, device_grid_routing);
    tcase_add_test(tc, device_grid_tool);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? 0 : 1;
}
