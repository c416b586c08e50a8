/* JSON Lines records of the sweep (reports/SCHEMA.md). Written by hand in
 * a fixed key order with fixed number formats, so the same run gives the
 * same bytes; non-finite numbers are the strings "inf", "-inf", "nan". */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "moe/sweep.h"

static void jstr(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

static void jnum(FILE *f, double v)
{
    if (isnan(v)) fputs("\"nan\"", f);
    else if (isinf(v)) fputs(v > 0 ? "\"inf\"" : "\"-inf\"", f);
    else fprintf(f, "%.9g", v);
}

static void metrics(FILE *f, const moe_sweep_record *r)
{
    const moe_cmp_metrics *m = &r->m;
    fprintf(f, ",\"metrics\":{\"n\":%lld,\"mismatches\":%lld,\"class_mismatches\":%lld,\"bound_failures\":%lld,",
            (long long)m->n, (long long)m->mismatches, (long long)m->class_mismatches, (long long)m->bound_failures);
    fputs("\"max_abs\":", f), jnum(f, m->max_abs);
    fputs(",\"max_ulp\":", f), jnum(f, m->max_ulp);
    fputs(",\"share\":", f), jnum(f, m->share);
    fprintf(f, ",\"calls\":%d,\"first\":[", r->calls ? r->calls : 1);
    for (int i = 0; i < m->nfirst; i++) {
        const moe_cmp_mismatch *x = &m->first[i];
        int64_t cols = r->cols > 0 ? r->cols : 1;
        fprintf(f, "%s{\"index\":[%lld,%lld],\"got\":", i ? "," : "", (long long)(x->index / cols),
                (long long)(x->index % cols));
        jnum(f, x->got), fputs(",\"want\":", f), jnum(f, x->want);
        fputs(",\"got_hex\":", f), jstr(f, x->got_hex), fputs(",\"want_hex\":", f), jstr(f, x->want_hex);
        fputc('}', f);
    }
    fputc(']', f);
    if (r->heat && m->mismatches) {
        fprintf(f, ",\"heat\":{\"row_label\":\"expert\",\"col_label\":\"token block\",\"block\":%d,\"values\":[",
                r->heat_block);
        for (int i = 0; i < r->heat_rows; i++) {
            fputs(i ? ",[" : "[", f);
            for (int j = 0; j < r->heat_cols; j++) {
                if (j) fputc(',', f);
                float v = r->heat[i * r->heat_cols + j];
                if (isinf(v)) fputs("\"inf\"", f);
                else fprintf(f, "%.3f", v);
            }
            fputc(']', f);
        }
        fputs("]}", f);
    }
    if (r->cls == MOE_CLASS_BOUNDED && !strcmp(r->stage, "e2e"))
        fprintf(f, ",\"hist\":{\"edges\":[0,0.125,0.25,0.5,1],\"counts\":[%lld,%lld,%lld,%lld,%lld]}",
                (long long)r->hist[0], (long long)r->hist[1], (long long)r->hist[2], (long long)r->hist[3],
                (long long)r->hist[4]);
    fputc('}', f);
}

void moe_sweep_write_record(FILE *f, const moe_sweep_case *c, const moe_sweep_record *r, int with_time)
{
    char name[256];
    moe_sweep_case_name(c, name, sizeof name);
    fputs("{\"type\":\"case\",\"case\":", f), jstr(f, name);
    fputs(",\"pf\":", f), jstr(f, c->pf), fputs(",\"experts\":", f), jstr(f, c->experts);
    fputs(",\"scheme\":", f), jstr(f, moe_scheme_name(c->scheme)), fputs(",\"act\":", f), jstr(f, moe_act_name(c->act));
    fprintf(f, ",\"E\":%d,\"k\":%d,\"M\":%d,\"H\":%d,\"I\":%d,\"world\":%d,\"shape\":", c->E, c->k, c->M, c->H, c->I,
            c->world);
    jstr(f, c->shape);
    fputs(",\"backend\":", f), jstr(f, r->backend), fputs(",\"stage\":", f), jstr(f, r->stage);
    fputs(",\"verdict\":", f), jstr(f, moe_verdict_name(r->verdict));
    if (r->tolerance) {
        fputs(",\"class\":", f), jstr(f, moe_exact_class_name(r->cls));
        fputs(",\"tolerance\":", f), jstr(f, r->tolerance);
    }
    if (r->bound) fputs(",\"bound\":", f), jstr(f, r->bound);
    fputs(",\"reason\":", f), jstr(f, r->reason);
    fputs(",\"rules\":[", f);
    for (int i = 0; i < r->nrules; i++) {
        if (i) fputc(',', f);
        jstr(f, r->rules[i]);
    }
    fputc(']', f);
    if (r->has_metrics) metrics(f, r);
    if (with_time) fprintf(f, ",\"time_ms\":%.3f", r->time_ms);
    fputs("}\n", f);
}
