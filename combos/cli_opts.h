/* Option tables and parsing shared by the moe-compat subcommands
 * (internal to combos/). */
#ifndef MOE_COMBOS_CLI_OPTS_H
#define MOE_COMBOS_CLI_OPTS_H

#include <stddef.h>
#include <stdio.h>

typedef enum { O_INT, O_FLAG, O_DTYPE, O_ACT, O_CHOICE, O_NAMES } okind;
typedef struct {
    const char *name;
    okind kind;
    long long lo, hi;           /* O_INT range */
    int required;
    const char *const *choices; /* O_CHOICE, NULL-terminated */
    const char *(*name_at)(int i); /* O_NAMES: the i-th valid name */
    int (*count)(void);            /* O_NAMES: how many */
} opt_spec;
typedef struct {
    int set;
    long long v; /* O_INT value; the index of an O_DTYPE/O_ACT/O_CHOICE/O_NAMES name */
} opt_val;

/* Prints "moe-compat: <message>" and the help hint; returns 2. */
int cli_usage_error(FILE *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The closest of n names by edit distance (entries may be NULL). */
const char *cli_closest(const char *s, const char *const *names, size_t n);
size_t cli_choice_count(const opt_spec *o);
const char *cli_choice_name(const opt_spec *o, size_t i);
/* Parses argv[2..] against spec; sets *json, *help; 0 or an exit status. */
int cli_parse_opts(int argc, char **argv, const opt_spec *spec, size_t n, opt_val *val, int *json, int *help,
                   FILE *err);
void cli_json_str(FILE *out, const char *s);

#endif
