/* moe-fmt: a conversion probe in TestFloat's vocabulary (hex sign.exp.frac,
 * "vioux" flags), for people checking one value at a time. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "moe/cli.h"
#include "moe/format.h"

static const char usage[] =
    "usage: moe-fmt encode FORMAT VALUE [--policy sat|nonsat] [--round rne|rz] [--json]\n"
    "       moe-fmt decode FORMAT CODE [--json]\n"
    "       moe-fmt table FORMAT [--json]\n"
    "       moe-fmt --help\n"
    "FORMAT: bf16 f16 e4m3 e5m2 e2m1 e8m0 int8 int4\n"
    "VALUE:  a decimal or hex float (1.5, -0, 0x1p-9, inf, nan), first rounded to f32\n"
    "        (RNE), or bits:0xHHHHHHHH for exact f32 bits (e.g. a signaling NaN)\n"
    "CODE:   the format's code, e.g. 0x7e\n"
    "Default policy: nonsat for f16, bf16 and e5m2 (IEEE), sat for the others;\n"
    "e2m1 and the integers only saturate. Default rounding: rne.\n"
    "Flags: v invalid, i infinite, o overflow/saturated, u underflow, x inexact.\n"
    "Exit: 0 ok, 2 usage error.\n";

static const char *const formats[] = {"bf16", "f16", "e4m3", "e5m2", "e2m1", "e8m0", "int8", "int4"};

static int usage_error(FILE *err, const char *fmt, const char *arg)
{
    fprintf(err, "moe-fmt: ");
    fprintf(err, fmt, arg);
    fprintf(err, "\n(moe-fmt --help for usage)\n");
    return 2;
}

static int parse_format(const char *s, moe_dtype *d)
{
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        if (strcmp(s, formats[i]) == 0) return moe_dtype_from_name(s, d) == MOE_OK;
    return 0;
}

/* A value as text; JSON gets numbers, or strings for the non-finite. */
static const char *value_str(float v, int json, char *buf, size_t n)
{
    if (isnan(v)) snprintf(buf, n, json ? "\"nan\"" : "nan");
    else if (isinf(v)) snprintf(buf, n, json ? "\"%sinf\"" : "%sinf", v < 0 ? "-" : "");
    else if (v == 0.0f && signbit(v)) snprintf(buf, n, "-0");
    else snprintf(buf, n, "%.9g", (double)v);
    return buf;
}

static void print_value(FILE *out, float v, int json)
{
    char b[48];
    fputs(value_str(v, json, b, sizeof b), out);
}

static void flag_words(FILE *out, unsigned f)
{
    static const struct { unsigned bit; const char *w; } names[] = {
        {MOE_FLAG_INVALID, "invalid"},     {MOE_FLAG_INFINITE, "infinite"},
        {MOE_FLAG_OVERFLOW, "overflow"},   {MOE_FLAG_UNDERFLOW, "underflow"},
        {MOE_FLAG_INEXACT, "inexact"}};
    int any = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (f & names[i].bit) fprintf(out, "%s%s", any++ ? " " : "", names[i].w);
    if (!any) fprintf(out, "exact");
}

/* One code's description: fields, value, class. */
static void describe(FILE *out, moe_dtype d, uint32_t code, int json)
{
    char hex[32];
    float v;
    moe_class c;
    moe_code_hex(d, code, hex, sizeof hex);
    moe_decode(d, code, &v);
    moe_code_class(d, code, &c);
    int width = (moe_dtype_get(d)->bits + 3) / 4;
    if (json) {
        fprintf(out, "\"code\": \"0x%0*x\", \"fields\": \"%s\", \"value\": ", width, code, hex);
        print_value(out, v, 1);
        fprintf(out, ", \"class\": \"%s\"", moe_class_str(c));
    } else {
        fprintf(out, "code    0x%0*x  %s\nvalue   ", width, code, hex);
        print_value(out, v, 0);
        fprintf(out, "\nclass   %s\n", moe_class_str(c));
    }
}

static int parse_value(const char *s, float *x)
{
    if (strncmp(s, "bits:", 5) == 0) {
        char *end;
        errno = 0;
        unsigned long long b = strtoull(s + 5, &end, 16);
        if (errno || end == s + 5 || *end || b > 0xFFFFFFFFull) return 0;
        uint32_t u = (uint32_t)b;
        memcpy(x, &u, 4);
        return 1;
    }
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (end == s || *end) return 0;
    *x = v; /* ERANGE still gives the correctly rounded Inf or subnormal */
    return 1;
}

static int cmd_encode(moe_dtype d, const char *fmtname, const char *val, int json,
                      const char *pol, const char *rnd, FILE *out, FILE *err)
{
    float x;
    if (!parse_value(val, &x))
        return usage_error(err, "VALUE '%s': not a number (decimal, hex float, inf, nan or bits:0xHHHHHHHH)", val);
    moe_policy p;
    int ieee = d == MOE_F16 || d == MOE_BF16 || d == MOE_E5M2;
    p.sat = ieee ? MOE_NONSAT : MOE_SAT;
    p.rnd = MOE_RND_RNE;
    if (pol) {
        if (strcmp(pol, "sat") == 0) p.sat = MOE_SAT;
        else if (strcmp(pol, "nonsat") == 0) p.sat = MOE_NONSAT;
        else return usage_error(err, "--policy '%s': must be sat or nonsat", pol);
    }
    if (rnd) {
        if (strcmp(rnd, "rne") == 0) p.rnd = MOE_RND_RNE;
        else if (strcmp(rnd, "rz") == 0) p.rnd = MOE_RND_RZ;
        else return usage_error(err, "--round '%s': must be rne or rz", rnd);
    }
    if (moe_policy_check(d, p) != MOE_OK) return usage_error(err, "--policy: %s", moe_last_error());
    uint32_t code;
    unsigned flags = 0;
    moe_encode(d, x, p, &code, &flags);
    char fl[6];
    moe_flags_str(flags, fl);
    uint32_t xb;
    memcpy(&xb, &x, 4);
    const char *pn = p.sat == MOE_SAT ? "sat" : "nonsat", *rn = p.rnd == MOE_RND_RNE ? "rne" : "rz";
    if (json) {
        fprintf(out, "{\"op\": \"encode\", \"format\": \"%s\", \"input\": ", fmtname);
        print_value(out, x, 1);
        fprintf(out, ", \"input_f32\": \"0x%08x\", \"policy\": \"%s\", \"round\": \"%s\", ", xb, pn, rn);
        describe(out, d, code, 1);
        fprintf(out, ", \"flags\": \"%s\"}\n", fl);
    } else {
        fprintf(out, "input   ");
        print_value(out, x, 0);
        fprintf(out, " (f32 0x%08x)\npolicy  %s %s %s\n", xb, fmtname, pn, rn);
        describe(out, d, code, 0);
        fprintf(out, "flags   %s (", fl);
        flag_words(out, flags);
        fprintf(out, ")\n");
    }
    return 0;
}

static int cmd_decode(moe_dtype d, const char *fmtname, const char *cs, int json, FILE *out, FILE *err)
{
    char *end;
    errno = 0;
    unsigned long long c = strtoull(cs, &end, 0);
    if (errno || end == cs || *end || cs[0] == '-')
        return usage_error(err, "CODE '%s': not a code (hex like 0x7e)", cs);
    if (c >> moe_dtype_get(d)->bits)
        return usage_error(err, "CODE '%s': wider than the format's bits", cs);
    if (json) {
        fprintf(out, "{\"op\": \"decode\", \"format\": \"%s\", ", fmtname);
        describe(out, d, (uint32_t)c, 1);
        fprintf(out, "}\n");
    } else {
        describe(out, d, (uint32_t)c, 0);
    }
    return 0;
}

static int cmd_table(moe_dtype d, const char *fmtname, int json, FILE *out, FILE *err)
{
    int bits = moe_dtype_get(d)->bits;
    if (bits > 8) return usage_error(err, "table FORMAT '%s': only 4- and 8-bit formats are listed", fmtname);
    for (uint32_t c = 0; c < (1u << bits); c++) {
        if (json) {
            fprintf(out, "{\"op\": \"table\", \"format\": \"%s\", ", fmtname);
            describe(out, d, c, 1);
            fprintf(out, "}\n");
        } else {
            char hex[32];
            float v;
            moe_class k;
            moe_code_hex(d, c, hex, sizeof hex);
            moe_decode(d, c, &v);
            moe_code_class(d, c, &k);
            char vb[48];
            fprintf(out, "0x%0*x  %-6s  %-14s  %s\n", (bits + 3) / 4, c, hex,
                    value_str(v, 0, vb, sizeof vb), moe_class_str(k));
        }
    }
    return 0;
}

int moe_cli_fmt(int argc, char **argv, FILE *out, FILE *err)
{
    const char *pos[3] = {NULL, NULL, NULL};
    const char *pol = NULL, *rnd = NULL;
    int npos = 0, json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage, out);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "--policy") == 0 || strcmp(a, "--round") == 0) {
            if (i + 1 >= argc) return usage_error(err, "%s: needs a value", a);
            if (a[2] == 'p') pol = argv[++i];
            else rnd = argv[++i];
        } else if (a[0] == '-' && a[1] == '-') {
            return usage_error(err, "unknown option '%s'", a);
        } else {
            if (npos == 3) return usage_error(err, "unexpected argument '%s'", a);
            pos[npos++] = a;
        }
    }
    if (npos == 0) return usage_error(err, "%s", "missing command (encode, decode or table)");
    const char *cmd = pos[0];
    int want = strcmp(cmd, "table") == 0 ? 2 : 3;
    if (strcmp(cmd, "encode") && strcmp(cmd, "decode") && strcmp(cmd, "table"))
        return usage_error(err, "command '%s': must be encode, decode or table", cmd);
    if (npos < 2) return usage_error(err, "%s: missing FORMAT", cmd);
    moe_dtype d;
    if (!parse_format(pos[1], &d))
        return usage_error(err, "FORMAT '%s': must be one of bf16 f16 e4m3 e5m2 e2m1 e8m0 int8 int4", pos[1]);
    if (npos < want) return usage_error(err, "%s: missing VALUE or CODE", cmd);
    if (npos > want) return usage_error(err, "unexpected argument '%s'", pos[want]);
    if ((pol || rnd) && strcmp(cmd, "encode") != 0)
        return usage_error(err, "%s: --policy and --round apply to encode only", cmd);
    if (strcmp(cmd, "encode") == 0) return cmd_encode(d, pos[1], pos[2], json, pol, rnd, out, err);
    if (strcmp(cmd, "decode") == 0) return cmd_decode(d, pos[1], pos[2], json, out, err);
    return cmd_table(d, pos[1], json, out, err);
}
