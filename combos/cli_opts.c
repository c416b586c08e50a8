/* The option machinery of moe-compat: one table of options per
 * subcommand, one parser, usage errors that name the argument and suggest
 * the closest valid name. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "cli_opts.h"
#include "moe/plan_trtllm.h"

int cli_usage_error(FILE *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(err, "moe-compat: ");
    vfprintf(err, fmt, ap);
    fprintf(err, "\n(moe-compat --help for usage)\n");
    va_end(ap);
    return 2;
}

static size_t edit_distance(const char *a, const char *b)
{
    size_t n = strlen(b), row[65];
    if (n > 64) n = 64;
    for (size_t j = 0; j <= n; j++) row[j] = j;
    for (size_t i = 1; a[i - 1] && i <= 64; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= n; j++) {
            size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[n];
}

/* The closest of `n` names (entries may be NULL). */
const char *cli_closest(const char *s, const char *const *names, size_t n)
{
    const char *best = NULL;
    size_t bd = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        if (!names[i]) continue;
        /* a name the user typed the start of beats any edit distance */
        size_t d = strncmp(names[i], s, strlen(s)) == 0 ? 0 : edit_distance(s, names[i]);
        if (d < bd) bd = d, best = names[i];
    }
    return best;
}

size_t cli_choice_count(const opt_spec *o)
{
    if (o->kind == O_DTYPE) return MOE_TRTLLM_DTYPE_COUNT;
    if (o->kind == O_ACT) return MOE_TRTLLM_ACT_COUNT;
    if (o->kind == O_NAMES) return (size_t)o->count();
    size_t n = 0;
    while (o->choices[n]) n++;
    return n;
}

const char *cli_choice_name(const opt_spec *o, size_t i)
{
    if (o->kind == O_DTYPE) return moe_trtllm_dtype_name((moe_trtllm_dtype)i);
    if (o->kind == O_ACT) return moe_trtllm_activation_name((moe_trtllm_activation)i);
    if (o->kind == O_NAMES) return o->name_at((int)i);
    return o->choices[i];
}

static int parse_name(const opt_spec *o, const char *s, opt_val *v, FILE *err)
{
    moe_trtllm_dtype d;
    if (o->kind == O_DTYPE && moe_trtllm_dtype_from_name(s, &d)) return v->v = d, 0;
    size_t n = cli_choice_count(o);
    const char *names[64];
    for (size_t i = 0; i < n && i < 64; i++) {
        names[i] = cli_choice_name(o, i);
        if (strcmp(s, names[i]) == 0) return v->v = (long long)i, 0;
    }
    return cli_usage_error(err, "%s '%s': unknown name (did you mean '%s'?)", o->name, s,
                       cli_closest(s, names, n < 64 ? n : 64));
}

static int parse_int(const opt_spec *o, const char *s, opt_val *v, FILE *err)
{
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (end == s || *end) return cli_usage_error(err, "%s '%s': not an integer", o->name, s);
    if (errno == ERANGE || x < o->lo || x > o->hi)
        return cli_usage_error(err, "%s %s: out of range %lld..%lld", o->name, s, o->lo, o->hi);
    v->v = x;
    return 0;
}

/* Parses argv[2..]; sets *json and *help. Returns 0 or the exit status. */
int cli_parse_opts(int argc, char **argv, const opt_spec *spec, size_t n, opt_val *val,
                      int *json, int *help, FILE *err)
{
    memset(val, 0, n * sizeof *val);
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--json") == 0) { *json = 1; continue; }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) { *help = 1; return 0; }
        size_t k = 0;
        while (k < n && strcmp(a, spec[k].name)) k++;
        if (k == n) {
            const char *names[40];
            size_t m = 0;
            for (; m < n && m < 38; m++) names[m] = spec[m].name;
            names[m++] = "--json";
            names[m++] = "--help";
            return cli_usage_error(err, "%s: unknown option '%s' (did you mean '%s'?)", argv[1], a,
                               cli_closest(a, names, m));
        }
        const opt_spec *o = &spec[k];
        val[k].set = 1;
        if (o->kind == O_FLAG) continue;
        if (i + 1 >= argc) return cli_usage_error(err, "%s: needs a value", a);
        const char *s = argv[++i];
        int rc = o->kind == O_INT ? parse_int(o, s, &val[k], err) : parse_name(o, s, &val[k], err);
        if (rc) return rc;
    }
    for (size_t k = 0; k < n; k++)
        if (spec[k].required && !val[k].set)
            return cli_usage_error(err, "%s: missing %s", argv[1], spec[k].name);
    return 0;
}

void cli_json_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fprintf(out, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) fprintf(out, "\\u%04x", (unsigned char)*s);
        else fputc(*s, out);
    }
    fputc('"', out);
}

