/* The independent cross-check (reports/crosscheck.py, issue 9 item 6): a
 * numpy re-implementation, written from the anchors and the header
 * contracts, must agree with every golden case it covers, must cover at
 * least MIN_COVERED of them, and must fail, naming the case, when a stored
 * output is corrupted (else agreement would prove nothing).
 *
 * Needs python3 with numpy (reports/requirements.txt); without them the
 * suite exits 77 (skip). Scratch copies of cases go to a mkdtemp directory
 * that the suite removes. */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "test_shell.h"

/* 246 of the 295 cases are covered (every layout, routing, quantize,
 * dequantize and activation case, 7 forward cases, and every permute_rows,
 * unpermute_rows, expand_trtllm, batched_scatter, permute_grouped, war_noop,
 * war_contiguous, war_naive_batched, finalize_trtllm, ep_allgather_dispatch,
 * ep_reduce_scatter_combine and grouped_gemm case); a drop below this means
 * a handler stopped matching its cases. */
#define MIN_COVERED 246

#define HAS(buf, s) ck_assert_msg(strstr(buf, s) != NULL, "'%s' not in: %.3000s", s, buf)

static char tmpdir[256]; /* mkdtemp under /tmp: short, so derived paths fit */
static char out_text[1 << 18];

/* Runs the script with args; stdout+stderr land in out_text. */
static int run_xcheck(const char *args)
{
    char log[PATH_MAX];
    snprintf(log, sizeof log, "%s/out.txt", tmpdir);
    int rc = shf("python3 reports/crosscheck.py %s > '%s' 2>&1", args, log);
    FILE *f = fopen(log, "rb");
    size_t n = f ? fread(out_text, 1, sizeof out_text - 1, f) : 0;
    if (f) fclose(f);
    out_text[n] = '\0';
    return rc;
}

/* Copies golden/<name> into a fresh golden-like directory and XORs the last
 * byte of its file `file` (the last element of the .npy data) with 0x01. */
static void corrupt_copy(const char *root, const char *name, const char *file)
{
    ck_assert_int_eq(shf("rm -rf '%s/%s' && mkdir -p '%s/%s' && cp -r 'golden/%s' '%s/%s/'",
                         tmpdir, root, tmpdir, root, name, tmpdir, root), 0);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s/%s/%s", tmpdir, root, name, file);
    FILE *f = fopen(path, "r+b");
    ck_assert_msg(f != NULL, "cannot open %s: %s", path, strerror(errno));
    ck_assert_int_eq(fseek(f, -1, SEEK_END), 0);
    int c = fgetc(f);
    ck_assert_int_ne(c, EOF);
    ck_assert_int_eq(fseek(f, -1, SEEK_END), 0);
    ck_assert_int_ne(fputc(c ^ 0x01, f), EOF);
    ck_assert_int_eq(fclose(f), 0);
}

START_TEST(test_all_covered_cases_agree)
{
    int rc = run_xcheck("--golden golden --quiet");
    ck_assert_msg(rc == 0, "crosscheck exit %d:\n%.6000s", rc, out_text);
    const char *s = strstr(out_text, "crosscheck summary:");
    ck_assert_msg(s != NULL, "no summary in: %.3000s", out_text);
    int cases = 0, covered = 0, agree = 0, dis = 0, new_dis = 0;
    ck_assert_int_eq(sscanf(s, "crosscheck summary: %d cases, %d covered: %d agree, %d disagree (%d new",
                            &cases, &covered, &agree, &dis, &new_dis), 5);
    ck_assert_int_eq(new_dis, 0);
    ck_assert_msg(covered >= MIN_COVERED, "only %d cases covered (need %d)", covered, MIN_COVERED);
    ck_assert_int_ge(agree, MIN_COVERED - 1);
}
END_TEST

/* One corrupted output per class: EXACT quantization codes and scales,
 * EXACT layouts, BOUNDED activation, routing weights and forward output,
 * EXACT dequantized f32, EXACT fixed-order reduction (war_contiguous),
 * BOUNDED grouped GEMM. */
static const struct {
    const char *name, *file;
} corrupt_cases[] = {
    {"stage.quantize.mxfp8.act", "out_q.npy"},
    {"stage.quantize.nvfp4.act", "out_global_scale.npy"},
    {"stage.align_block_size.basic", "out_expert_ids.npy"},
    {"stage.sort_ck.mock_id", "out_sorted_token_ids.npy"},
    {"stage.activation.silu.gate_up", "out_out.npy"},
    {"stage.dequantize.nvfp4.act", "out_x.npy"},
    {"stage.route.softmax_topk.renorm", "out_topk_weights.npy"},
    {"e2e.forward.bf16", "out_out.npy"},
    {"stage.war_contiguous.storage_per_add", "out_out.npy"},
    {"stage.grouped_gemm.w4a16_g32", "out_out.npy"},
};

START_TEST(test_corrupted_output_fails)
{
    const char *name = corrupt_cases[_i].name;
    corrupt_copy("bad", name, corrupt_cases[_i].file);
    char args[PATH_MAX + 64];
    snprintf(args, sizeof args, "--golden '%s/bad'", tmpdir);
    int rc = run_xcheck(args);
    ck_assert_msg(rc == 1, "%s corrupted: exit %d, expected 1:\n%.3000s", name, rc, out_text);
    char line[512];
    snprintf(line, sizeof line, "%s", name);
    HAS(out_text, line);
    HAS(out_text, "DISAGREE");
    HAS(out_text, "1 disagree (1 new");
}
END_TEST

/* The untouched copy passes: the failure above is the corruption's. */
START_TEST(test_clean_copy_passes)
{
    ck_assert_int_eq(shf("rm -rf '%s/good' && mkdir -p '%s/good' && cp -r golden/stage.quantize.mxfp8.act "
                         "golden/stage.activation.silu.gate_up '%s/good/'", tmpdir, tmpdir, tmpdir), 0);
    char args[PATH_MAX + 64];
    snprintf(args, sizeof args, "--golden '%s/good'", tmpdir);
    int rc = run_xcheck(args);
    ck_assert_msg(rc == 0, "exit %d:\n%.3000s", rc, out_text);
    HAS(out_text, "2 covered: 2 agree");
}
END_TEST

START_TEST(test_usage_and_bad_directory)
{
    ck_assert_int_eq(run_xcheck("--no-such-flag"), 2);
    HAS(out_text, "--no-such-flag");
    char args[PATH_MAX + 64];
    snprintf(args, sizeof args, "--golden '%s/does-not-exist'", tmpdir);
    ck_assert_int_eq(run_xcheck(args), 3);
    HAS(out_text, "cannot read golden directory");
    ck_assert_int_eq(run_xcheck("--golden golden --filter no.such.case"), 3);
    HAS(out_text, "no golden case");
}
END_TEST

int main(void)
{
    if (system("python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
        fprintf(stderr, "check_crosscheck: python3 with numpy not available, skipping\n");
        return 77;
    }
    snprintf(tmpdir, sizeof tmpdir, "/tmp/moe_xcheck_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        fprintf(stderr, "check_crosscheck: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    Suite *s = suite_create("crosscheck");
    TCase *tc = tcase_create("golden");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_all_covered_cases_agree);
    tcase_add_loop_test(tc, test_corrupted_output_fails, 0,
                        (int)(sizeof corrupt_cases / sizeof corrupt_cases[0]));
    tcase_add_test(tc, test_clean_copy_passes);
    tcase_add_test(tc, test_usage_and_bad_directory);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "check_crosscheck: could not remove %s\n", tmpdir);
    return failed ? 1 : 0;
}
