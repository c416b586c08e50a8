/* The GPU check script (tests/gpu/gpu_check.sh, make gpu-check) on a
 * machine without a GPU, with stand-in suite binaries: its suites step runs
 * one step per tcase that check_gpu_fast's source registers (a fixed list
 * had drifted: the gemv and w4wg tcases never ran in make gpu-check), CASES
 * selects them (an entry that names no tcase fails), no suite binary at
 * all is a failure rather than a pass, and so is a run where the source
 * (the tcase list) cannot be read.
 * The tcase names are read here from the source independently of the
 * script's sed. Runs from the repository root, as make check does. */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "test_shell.h"

#define HAS(buf, s) ck_assert_msg(strstr(buf, s) != NULL, "'%s' not in: %.2000s", s, buf)

static char tmp[PATH_MAX - 64];

/* the tcase names of check_gpu_fast.cu's gpu_tcase(s, "name", ...) calls, space-separated */
static int source_tcases(char *names, size_t cap)
{
    static char src[1 << 18];
    slurp_into("tests/gpu/check_gpu_fast.cu", src, sizeof src);
    ck_assert_msg(src[0], "tests/gpu/check_gpu_fast.cu not readable from %s", getcwd(NULL, 0));
    int n = 0;
    names[0] = '\0';
    for (const char *p = strstr(src, "gpu_tcase(s, \""); p; p = strstr(p + 1, "gpu_tcase(s, \"")) {
        const char *b = p + strlen("gpu_tcase(s, \""), *e = strchr(b, '"');
        ck_assert_ptr_nonnull(e);
        const size_t len = strlen(names);
        ck_assert(len + (size_t)(e - b) + 2 < cap);
        snprintf(names + len, cap - len, "%.*s ", (int)(e - b), b);
        n++;
    }
    return n;
}

/* a build directory whose tests/gpu/check_gpu_fast only records CK_RUN_CASE in DIR/ran.txt */
static void stand_in(const char *dir)
{
    ck_assert_int_eq(shf("mkdir -p '%s/tests/gpu' && printf '#!/bin/sh\\necho \"$CK_RUN_CASE\" >> \"%s/ran.txt\"\\n' "
                         "> '%s/tests/gpu/check_gpu_fast' && chmod +x '%s/tests/gpu/check_gpu_fast'",
                         dir, dir, dir, dir),
                     0);
}

START_TEST(no_suite_binary_fails)
{
    char sum[4096], path[PATH_MAX + 32];
    const int rc = shf("BUILD='%s/empty' OUT='%s/o1' STEPS=suites sh tests/gpu/gpu_check.sh > /dev/null 2>&1", tmp, tmp);
    ck_assert_int_eq(rc, 1);
    snprintf(path, sizeof path, "%s/o1/summary.txt", tmp);
    slurp_into(path, sum, sizeof sum);
    HAS(sum, "no GPU suite binary");
    HAS(sum, "gpu-check: FAILED");
}
END_TEST

START_TEST(every_registered_tcase_runs)
{
    char names[1024], ran[4096], sum[8192], dir[PATH_MAX], path[PATH_MAX + 32];
    const int n = source_tcases(names, sizeof names);
    ck_assert_int_ge(n, 9);
    HAS(names, "gemv ");
    HAS(names, "w4wg ");
    snprintf(dir, sizeof dir, "%s/b", tmp);
    stand_in(dir);
    ck_assert_int_eq(shf("BUILD='%s' OUT='%s/o2' STEPS=suites sh tests/gpu/gpu_check.sh > /dev/null 2>&1", dir, tmp), 0);
    snprintf(path, sizeof path, "%s/ran.txt", dir);
    slurp_into(path, ran, sizeof ran);
    snprintf(path, sizeof path, "%s/o2/summary.txt", tmp);
    slurp_into(path, sum, sizeof sum);
    int lines = 0;
    for (const char *p = ran; (p = strchr(p, '\n')); p++) lines++;
    ck_assert_int_eq(lines, n);
    for (char *save = NULL, *t = strtok_r(names, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        char want[128];
        snprintf(want, sizeof want, "%s\n", t);
        HAS(ran, want);
        snprintf(want, sizeof want, "suite check_gpu_fast (%s): exit 0", t);
        HAS(sum, want);
    }
}
END_TEST

/* the suites step with CASES over a stand-in build TMP/SUB (output in TMP/SUB-out): its exit status, the
 * tcases the stand-in ran in ran (one a line) and the summary in sum */
static int run_cases(const char *sub, const char *cases, char *ran, size_t rcap, char *sum, size_t scap)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/%s", tmp, sub);
    stand_in(dir);
    const int rc = shf("BUILD='%s' OUT='%s-out' STEPS=suites CASES='%s' sh tests/gpu/gpu_check.sh > /dev/null 2>&1",
                       dir, dir, cases);
    snprintf(path, sizeof path, "%s/ran.txt", dir);
    slurp_into(path, ran, rcap);
    snprintf(path, sizeof path, "%s-out/summary.txt", dir);
    slurp_into(path, sum, scap);
    return rc;
}

START_TEST(cases_selects)
{
    char ran[1024], sum[4096];
    ck_assert_int_eq(run_cases("c", "slot gemv", ran, sizeof ran, sum, sizeof sum), 0);
    ck_assert_str_eq(ran, "slot\ngemv\n");
}
END_TEST

/* a CASES entry the suite does not register (Check would run nothing and exit 0) fails, naming it */
START_TEST(unknown_case_fails)
{
    char ran[1024], sum[4096];
    ck_assert_int_eq(run_cases("d", "slot gemw", ran, sizeof ran, sum, sizeof sum), 1);
    ck_assert_str_eq(ran, "slot\n");
    HAS(sum, "suite check_gpu_fast (gemw): CASES names no tcase of the suite");
    HAS(sum, "gpu-check: FAILED");
}
END_TEST

/* run where tests/gpu/check_gpu_fast.cu is not readable (not the repository root), the script has no tcase
 * list: the step fails and says why, and no tcase runs (a fallback list had drifted from the source) */
START_TEST(no_source_fails)
{
    char ran[1024], sum[4096], dir[PATH_MAX], path[PATH_MAX + 32], root[PATH_MAX];
    ck_assert_ptr_nonnull(getcwd(root, sizeof root));
    snprintf(dir, sizeof dir, "%s/e", tmp);
    stand_in(dir);
    const int rc = shf("cd '%s' && BUILD='%s' OUT='%s-out' STEPS=suites sh '%s/tests/gpu/gpu_check.sh' > /dev/null 2>&1", tmp,
                       dir, dir, root);
    ck_assert_int_eq(rc, 1);
    snprintf(path, sizeof path, "%s/ran.txt", dir);
    slurp_into(path, ran, sizeof ran);
    ck_assert_str_eq(ran, "");
    snprintf(path, sizeof path, "%s-out/summary.txt", dir);
    slurp_into(path, sum, sizeof sum);
    HAS(sum, "suite check_gpu_fast: no tcase list (tests/gpu/check_gpu_fast.cu not readable");
    HAS(sum, "gpu-check: FAILED");
}
END_TEST

/* the real suite, where this build has it (nvcc present): a CK_FX_SCHEME naming no scheme stops it before
 * anything runs, GPU or not, naming the variable and the schemes it takes */
START_TEST(fx_scheme_unknown_refused)
{
    char bin[PATH_MAX], err[4096], path[PATH_MAX + 32];
    snprintf(bin, sizeof bin, "%s/tests/gpu/check_gpu_fast", getenv("MOE_BUILD") ? getenv("MOE_BUILD") : "build");
    if (access(bin, X_OK) != 0) {
        printf("fx_scheme_unknown_refused: %s not built here (no nvcc); not run\n", bin);
        return;
    }
    snprintf(path, sizeof path, "%s/fxs.err", tmp);
    const int rc = shf("CK_FX_SCHEME=fp8_per_tensor '%s' > '%s/fxs.out' 2> '%s'", bin, tmp, path);
    ck_assert_int_eq(rc, 1);
    slurp_into(path, err, sizeof err);
    HAS(err, "CK_FX_SCHEME=fp8_per_tensor is not a scheme name; one of: ");
    HAS(err, " bf16 ");
    HAS(err, " fp8_wtensor_atensor ");
    snprintf(path, sizeof path, "%s/fxs.out", tmp);
    slurp_into(path, err, sizeof err);
    ck_assert_msg(!strstr(err, "Running suite"), "the suite ran: %s", err);
}
END_TEST

int main(void)
{
    snprintf(tmp, sizeof tmp, "%s/moe-gpu-script-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    Suite *s = suite_create("gpu_script");
    TCase *tc = tcase_create("gpu_check.sh");
    tcase_add_test(tc, no_suite_binary_fails);
    tcase_add_test(tc, every_registered_tcase_runs);
    tcase_add_test(tc, cases_selects);
    tcase_add_test(tc, unknown_case_fails);
    tcase_add_test(tc, no_source_fails);
    tcase_add_test(tc, fx_scheme_unknown_refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    char rm[PATH_MAX + 16];
    snprintf(rm, sizeof rm, "rm -rf '%s'", tmp);
    if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    return failed ? 1 : 0;
}
