/* Runs a CLI library function (moe_cli_*) in-process on a space-separated
 * argument string, capturing its two streams. */
#ifndef MOE_TEST_CLI_RUN_H
#define MOE_TEST_CLI_RUN_H

#include <check.h>
#include <stdio.h>
#include <string.h>

static char out_buf[1 << 16], err_buf[4096];

typedef int (*cli_fn)(int argc, char **argv, FILE *out, FILE *err);

static inline int cli_run(cli_fn fn, const char *prog, const char *args)
{
    char copy[1024];
    char *argv[64];
    int argc = 0;
    snprintf(copy, sizeof copy, "%s", args);
    argv[argc++] = (char *)prog;
    for (char *tok = strtok(copy, " "); tok && argc < 63; tok = strtok(NULL, " ")) argv[argc++] = tok;
    argv[argc] = NULL;
    FILE *o = tmpfile(), *e = tmpfile();
    int rc = fn(argc, argv, o, e);
    rewind(o);
    rewind(e);
    size_t n = fread(out_buf, 1, sizeof out_buf - 1, o);
    out_buf[n] = '\0';
    n = fread(err_buf, 1, sizeof err_buf - 1, e);
    err_buf[n] = '\0';
    fclose(o);
    fclose(e);
    return rc;
}

#define HAS(buf, s) ck_assert_msg(strstr(buf, s) != NULL, "'%s' not in: %s", s, buf)

#endif
