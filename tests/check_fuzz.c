/* The fuzz corpora as regression tests: every tests/fuzz/<target>/ input
 * runs through its target via the standalone replay driver
 * ($MOE_BUILD/fuzz-replay/fuzz_<target>, tests/fuzz/replay_main.c; built
 * with this suite, under ASan by make check-asan), plus the regression
 * tests of the bugs the fuzzers found. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cli_run.h"
#include "moe/cli.h"
#include "moe/golden.h"
#include "moe/sha256.h"
#include "../combos/golden_internal.h"

static const char *build_dir(void)
{
    const char *b = getenv("MOE_BUILD");
    return b && *b ? b : "build";
}

static const char *srcdir(void)
{
    const char *s = getenv("MOE_SRCDIR");
    return s ? s : ".";
}

static long count_files(const char *dir)
{
    DIR *d = opendir(dir);
    long n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        char p[1400];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (e->d_name[0] != '.' && stat(p, &st) == 0 && S_ISREG(st.st_mode)) n++;
    }
    if (d) closedir(d);
    return n;
}

/* Runs the replay driver of target on args; its exit status, and the count
 * of inputs it reports in *ran (-1 when it printed none). */
static int replay(const char *target, const char *args, long *ran)
{
    char cmd[2048], line[256];
    snprintf(cmd, sizeof cmd, "%s/fuzz-replay/fuzz_%s -q %s", build_dir(), target, args);
    FILE *p = popen(cmd, "r");
    ck_assert_msg(p != NULL, "cannot run %s", cmd);
    *ran = -1;
    while (fgets(line, sizeof line, p)) sscanf(line, "replay: %ld inputs ran", ran);
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static const struct {
    const char *name;
    long min_inputs; /* the hand-made seeds alone */
} TARGETS[] = {{"npy", 30}, {"golden", 12}, {"cli", 20}, {"formats", 40}};

START_TEST(corpus_replays_clean)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/%s", srcdir(), TARGETS[_i].name);
    long files = count_files(dir), ran;
    ck_assert_msg(files >= TARGETS[_i].min_inputs, "%s holds %ld inputs, want at least %ld", dir, files,
                  TARGETS[_i].min_inputs);
    int rc = replay(TARGETS[_i].name, dir, &ran);
    ck_assert_msg(rc == 0, "replay of %s exits %d (a finding: rerun the driver on the directory to see it)", dir, rc);
    ck_assert_msg(ran == files, "replay of %s ran %ld of %ld inputs", dir, ran, files);
}
END_TEST

/* The driver itself: a missing or empty corpus fails, it is never a pass. */
START_TEST(replay_refuses_missing_or_empty_corpus)
{
    long ran;
    ck_assert_int_eq(replay("npy", "/nonexistent/corpus 2>/dev/null", &ran), 1);
    const char *t = getenv("TMPDIR");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/check_fuzz.XXXXXX", t && *t ? t : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char args[600];
    snprintf(args, sizeof args, "%s 2>/dev/null", dir);
    ck_assert_int_eq(replay("npy", args, &ran), 1);
    ck_assert_int_eq(ran, 0);
    rmdir(dir);
}
END_TEST

/* The cli target's guard: it appends "--shape deepseek-v3" (or
 * gpt-oss-120b) to every moe-bench argument list, counting on the tool to
 * refuse those shapes (weights over its memory cap) after parsing and
 * before any work or output file. Should that change, fuzzing would start
 * running benchmarks: fix tests/fuzz/fuzz_cli.c then. */
START_TEST(cli_target_bench_guard_holds)
{
    static const char *const shapes[] = {"deepseek-v3", "gpt-oss-120b"};
    const char *t = getenv("TMPDIR");
    for (int i = 0; i < 2; i++) {
        char args[600];
        snprintf(args, sizeof args, "--m 1 --json %s/check_fuzz_never.json --shape %s", t && *t ? t : "/tmp", shapes[i]);
        ck_assert_int_eq(cli_run(moe_cli_bench, "moe-bench", args), 1);
        HAS(err_buf, "use a smaller shape");
        ck_assert_msg(strstr(out_buf, "GFLOP") == NULL, "moe-bench ran a benchmark: %s", out_buf);
    }
}
END_TEST

/* ---- regression: moe-golden show on a case.json with a long shape --------
 * Fuzz finding (golden target): show_tensors summed snprintf's would-be
 * lengths into its 128-byte shape text, so a shape of many or long numbers
 * wrote past the buffer (and cast out-of-range doubles to long long). The
 * text now stops at the buffer with "...]". */
static const moe_golden_case fc = {.name = "case", .kind = "forward", .scheme = "*"};
static const moe_golden_case *const fc_cases[] = {&fc};
static const moe_golden_table fc_table = {fc_cases, 1};
static int show_fn(int argc, char **argv, FILE *out, FILE *err) { return moe_golden_cli(argc, argv, &fc_table, out, err); }

static void put(const char *dir, const char *name, const char *text, FILE *manifest)
{
    char p[1024], hex[65];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    moe_sha256_hex(text, strlen(text), hex);
    fprintf(manifest, "%s  %s\n", hex, name);
}

START_TEST(golden_show_long_shape)
{
    const char *t = getenv("TMPDIR");
    char root[512], dir[600], mp[700], args[700];
    snprintf(root, sizeof root, "%s/check_fuzz.XXXXXX", t && *t ? t : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(root));
    snprintf(dir, sizeof dir, "%s/case", root);
    ck_assert_int_eq(mkdir(dir, 0777), 0);
    snprintf(mp, sizeof mp, "%s/MANIFEST.sha256", dir);
    FILE *m = fopen(mp, "w");
    ck_assert_ptr_nonnull(m);
    put(dir, "case.json",
        "{\"format\": 1, \"inputs\": [{\"tensor\": \"x\", \"file\": \"in_x.npy\", \"dtype\": \"f32\", \"shape\": "
        "[123456789012345678, 123456789012345678, 123456789012345678, 123456789012345678, 123456789012345678, "
        "123456789012345678, 123456789012345678, 123456789012345678, 1e300, -1e300], \"bytes\": 1, "
        "\"stored\": true}], \"outputs\": []}",
        m);
    fclose(m);
    snprintf(args, sizeof args, "show case --dir %s", root);
    int rc = cli_run(show_fn, "moe-golden", args);
    ck_assert_int_eq(rc, 3); /* in_x.npy: in case.json, not in the manifest */
    HAS(out_buf, "in_x.npy");
    HAS(out_buf, "[1.2345678901234568e+17, ");
    HAS(out_buf, "...]");
    const char *line = strstr(out_buf, "in_x.npy"), *nl = line ? strchr(line, '\n') : NULL;
    ck_assert_ptr_nonnull(nl);
    ck_assert_int_lt(nl - line, 300); /* one bounded line */
    unlink(mp);
    snprintf(mp, sizeof mp, "%s/case.json", dir);
    unlink(mp);
    rmdir(dir);
    rmdir(root);
}
END_TEST

/* ---- regression: a manifest that fills the reader's file table ----------
 * Fuzz findings (golden target): gk_read_case keeps one record per file in
 * a table of GK_MAX_FILES. A manifest of GK_MAX_FILES - 1 names (not
 * case.json) left no record for case.json, which was then dereferenced as
 * NULL; one of GK_MAX_FILES names came back as MOE_ERR_INTERNAL, a program
 * error, for what is corrupt content. Both are now a non-OK verdict. */
static void manifest_of(int names, int with_case_json)
{
    const char *t = getenv("TMPDIR");
    char dir[512], p[700];
    snprintf(dir, sizeof dir, "%s/check_fuzz.XXXXXX", t && *t ? t : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(p, sizeof p, "%s/MANIFEST.sha256", dir);
    FILE *m = fopen(p, "w");
    ck_assert_ptr_nonnull(m);
    for (int i = 0; i < names; i++)
        if (with_case_json && i == 0) fprintf(m, "%064d  case.json\n", 0);
        else fprintf(m, "%064d  f%d\n", 0, i);
    fclose(m);
    gk_stored st;
    ck_assert_int_eq(gk_read_case(dir, 1, &st), MOE_OK);
    ck_assert_int_ne(st.status, GK_OK);
    ck_assert_msg(st.reason[0] != '\0', "a refused case names its problem");
    ck_assert_int_le(st.nfiles, GK_MAX_FILES);
    gk_stored_free(&st);
    unlink(p);
    rmdir(dir);
}

START_TEST(golden_manifest_fills_file_table)
{
    manifest_of(GK_MAX_FILES - 1, 0); /* crashed */
    manifest_of(GK_MAX_FILES, 0);     /* internal error */
    manifest_of(GK_MAX_FILES, 1);
    manifest_of(3, 0);                /* the ordinary missing files */
}
END_TEST

static Suite *fuzz_suite(void)
{
    Suite *s = suite_create("fuzz");
    TCase *tc = tcase_create("replay");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, corpus_replays_clean, 0, (int)(sizeof TARGETS / sizeof TARGETS[0]));
    tcase_add_test(tc, replay_refuses_missing_or_empty_corpus);
    tcase_add_test(tc, cli_target_bench_guard_holds);
    suite_add_tcase(s, tc);
    tc = tcase_create("regressions");
    tcase_add_test(tc, golden_show_long_shape);
    tcase_add_test(tc, golden_manifest_fills_file_table);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(fuzz_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
