/* libFuzzer target: the argument parsers of every CLI (include/moe/cli.h:
 * moe-fmt, moe-compat, moe-sweep, moe-bench; and moe-golden).
 *
 * Input: newline-separated arguments; the first line names the tool (fmt,
 * compat, sweep, bench, golden; anything else picks one by its first
 * byte). Properties: no crash or sanitizer report, and the exit status is
 * one DESIGN section 11 allows (0..3).
 *
 * Guards, so that fuzzing exercises parsing and not real work, and never
 * writes into the repository:
 *   - every argument has '/' replaced by '_' and ".." spelled "_.": paths
 *     stay inside the current directory, which is a scratch directory
 *     while a tool runs (chdir, restored after);
 *   - moe-sweep gets --list as its first argument (the case list, no run,
 *     no --out); first, because a trailing one was taken as the value of
 *     a fuzzed "--out" and the whole quick tier ran (188 s);
 *   - moe-bench gets a trailing "--shape deepseek-v3" (or gpt-oss-120b):
 *     its weights exceed the tool's memory cap, so it stops with status 1
 *     after validating every other argument and before any work or --json
 *     (should a fuzzed option take "--shape" as its value, the shape name
 *     is then an unknown option: a usage error, no work either);
 *   - moe-golden runs on a table of two small routing cases. */
#include <fcntl.h>
#include <sys/stat.h>
#include "fuzz_util.h"
#include "moe/cli.h"
#include "moe/golden.h"

#define MAX_ARGS 48

static const char *const TOOLS[] = {"fmt", "compat", "sweep", "bench", "golden"};
#define NTOOLS 5

static const moe_golden_table *small_table(void)
{
    static const moe_golden_case *cases[2];
    static moe_golden_table t = {cases, 0};
    if (t.n == 0) {
        const moe_golden_table *b = moe_golden_builtin();
        for (int i = 0; i < b->n && t.n < 2; i++)
            if (!strncmp(b->cases[i]->name, "stage.route.", 12) && !b->cases[i]->digest_only) cases[t.n++] = b->cases[i];
        FUZZ_REQUIRE(t.n == 2, "fewer than two stage.route cases in the built-in table");
    }
    return &t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0 || size > 4096) return 0;
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *argv[MAX_ARGS + 4];
    int argc = 0;
    for (char *p = buf, *nl; argc < MAX_ARGS && p; p = nl ? nl + 1 : NULL) {
        nl = memchr(p, '\n', (size_t)(buf + size - p));
        if (nl) *nl = '\0';
        argv[argc++] = p;
    }
    int tool = 0;
    while (tool < NTOOLS && strcmp(argv[0], TOOLS[tool])) tool++;
    if (tool == NTOOLS) tool = (unsigned char)buf[0] % NTOOLS;
    static char prog[5][16];
    snprintf(prog[tool], sizeof prog[tool], "moe-%s", TOOLS[tool]);
    argv[0] = prog[tool];
    for (int i = 1; i < argc; i++) {
        for (char *c = argv[i]; *c; c++)
            if (*c == '/') *c = '_';
        if (!strcmp(argv[i], "..")) argv[i][0] = '_';
    }
    char shape[] = "deepseek-v3", big2[] = "gpt-oss-120b", dshape[] = "--shape", list[] = "--list";
    if (tool == 2) {
        memmove(argv + 2, argv + 1, (size_t)(argc - 1) * sizeof *argv);
        argv[1] = list, argc++;
    }
    if (tool == 3) argv[argc++] = dshape, argv[argc++] = (size & 1) ? shape : big2;
    argv[argc] = NULL;

    FILE *devnull = fopen("/dev/null", "w");
    FUZZ_REQUIRE(devnull != NULL, "no /dev/null");
    int here = open(".", O_RDONLY | O_DIRECTORY);
    FUZZ_REQUIRE(here >= 0 && chdir(fuzz_scratch_dir()) == 0, "cannot enter the scratch directory");
    int rc;
    switch (tool) {
    case 0: rc = moe_cli_fmt(argc, argv, devnull, devnull); break;
    case 1: rc = moe_cli_compat(argc, argv, devnull, devnull); break;
    case 2: rc = moe_cli_sweep(argc, argv, devnull, devnull); break;
    case 3: rc = moe_cli_bench(argc, argv, devnull, devnull); break;
    default: rc = moe_golden_cli(argc, argv, small_table(), devnull, devnull); break;
    }
    FUZZ_REQUIRE(fchdir(here) == 0, "cannot return from the scratch directory");
    close(here);
    fclose(devnull);
    FUZZ_REQUIRE(rc >= 0 && rc <= 3, "%s exits %d", prog[tool], rc);
    free(buf);
    return 0;
}
