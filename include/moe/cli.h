/* Command-line tools as library functions: each takes argv and two
 * streams and returns the exit status (0 ok, 1 a check failed or a
 * combination is incompatible, 2 usage error, 3 bad input file), so the
 * tests drive them in-process. */
#ifndef MOE_CLI_H
#define MOE_CLI_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

int moe_cli_fmt(int argc, char **argv, FILE *out, FILE *err);
int moe_cli_compat(int argc, char **argv, FILE *out, FILE *err);
int moe_cli_sweep(int argc, char **argv, FILE *out, FILE *err);
int moe_cli_bench(int argc, char **argv, FILE *out, FILE *err);

#ifdef __cplusplus
}
#endif

#endif
