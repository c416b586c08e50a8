/* The sweep's fused records (combos/sweep_internal.h): a backend's fused
 * experts path (include/moe/fused_run.h) run on the case's own problem and
 * judged stage by stage (include/moe/fused_judge.h), both combines: the
 * deterministic one as "fused.<stage>", the atomic one as
 * "fused-atomic.<stage>", each under its "any.fused.<stage>" row. */
#include <stdio.h>
#include <string.h>
#include "moe/tolerance.h"
#include "sweep_internal.h"

static const char *const VARIANT[2] = {"fused", "fused-atomic"};

/* one judged stage as a record under its tolerance row */
static moe_status stage_record(const moe_sweep_case *c, const char *bname, int atomic, const moe_fused_stage *st,
                               const char *desc, sweep_recs *l)
{
    char name[40];
    snprintf(name, sizeof name, "%s.%s", VARIANT[atomic], st->stage + strlen("fused."));
    moe_sweep_record *r = sweep_rec_new(l, bname, name);
    if (!r) return moe_fail(MOE_ERR_NOMEM, "sweep records");
    const moe_tolerance_row *row = moe_tolerance_find(st->stage, bname, moe_scheme_name(c->scheme));
    if (!row || row->cls != st->cls) {
        r->verdict = MOE_VERDICT_ERROR;
        snprintf(r->reason, sizeof r->reason, "%s", row ? "the tolerance row's class is not the judge's" : moe_last_error());
        return MOE_OK;
    }
    r->cls = row->cls, r->tolerance = row->id, r->bound = row->cls == MOE_CLASS_BOUNDED ? row->bound : NULL;
    r->has_metrics = 1;
    moe_cmp_init(&r->m);
    r->m.n = st->n, r->m.max_abs = st->max_abs;
    if (st->cls == MOE_CLASS_BOUNDED) r->m.bound_failures = st->failures, r->m.share = st->share;
    else r->m.mismatches = st->failures;
    r->verdict = st->failures ? MOE_VERDICT_FAIL : MOE_VERDICT_PASS;
    if (st->failures)
        snprintf(r->reason, sizeof r->reason, "%lld of %lld elements %s; first: %s (%s)", (long long)st->failures,
                 (long long)st->n, st->cls == MOE_CLASS_BOUNDED ? "outside the bound" : "differ", st->where, desc);
    else snprintf(r->reason, sizeof r->reason, "%s", desc);
    return MOE_OK;
}

/* a "<variant>" record for a run that gave no trace: skipped or in error */
static moe_status no_trace(const char *bname, int atomic, moe_status st, const char *why, sweep_recs *l)
{
    moe_sweep_record *r = sweep_rec_new(l, bname, VARIANT[atomic]);
    if (!r) return moe_fail(MOE_ERR_NOMEM, "sweep records");
    r->verdict = st == MOE_ERR_UNSUPPORTED ? MOE_VERDICT_SKIPPED : MOE_VERDICT_ERROR;
    snprintf(r->reason, sizeof r->reason, "%s%s: %s", st == MOE_ERR_UNSUPPORTED ? "not taken by the fused path: " : "",
             moe_status_str(st), why);
    return MOE_OK;
}

moe_status sweep_fused_records(const moe_sweep_case *c, const moe_sweep_options *o, const sweep_problem *p,
                               const char *bname, sweep_recs *l)
{
    const moe_fused_path *fp = moe_fused_path_find(bname, c->pf, c->experts);
    if (!fp || c->world != 1 || (o->inject && !o->inject_fused)) return MOE_OK;
    const moe_fused_runner run = o->inject ? o->inject_fused : fp->run;
    const moe_fused_inputs in = {&p->x, &p->ids, &p->w, &p->q1, p->s1.data ? &p->s1 : NULL,
                                 &p->q2, p->s2.data ? &p->s2 : NULL};
    for (int atomic = 0; atomic < 2; atomic++) {
        moe_status s;
        if (p->xd != MOE_BF16) { /* the judge's inputs (fused_judge.h) */
            char why[96];
            snprintf(why, sizeof why, "the fused judge takes bf16 x; scheme %s has %s x", moe_scheme_name(c->scheme),
                     moe_dtype_get(p->xd)->name);
            if ((s = no_trace(bname, atomic, MOE_ERR_UNSUPPORTED, why, l))) return s;
            continue;
        }
        const moe_fused_problem fpr = {c->M, c->E, c->k, c->H, c->I, c->scheme,
                                       moe_act_defaults(c->act, MOE_LAYOUT_GATE_UP), atomic};
        moe_fused_trace_store t;
        moe_fused_model m;
        memset(&t, 0, sizeof t);
        char desc[160] = "";
        const int first = l->n;
        double t0 = sweep_now_ms();
        moe_status rs = run(&fpr, &in, &t, &m, desc, sizeof desc);
        moe_fused_verdict v;
        if (rs == MOE_OK) rs = moe_fused_judge(&fpr, &m, &in, &t.tr, &v);
        if (rs == MOE_OK) {
            for (int i = 0; i < v.n; i++)
                if ((s = stage_record(c, bname, atomic, &v.st[i], desc, l))) return moe_fused_trace_store_free(&t), s;
            if (l->n > first) l->v[first].time_ms = sweep_now_ms() - t0; /* the run and its judge, on the first stage */
        } else if ((s = no_trace(bname, atomic, rs, moe_last_error(), l))) {
            return moe_fused_trace_store_free(&t), s;
        }
        moe_fused_trace_store_free(&t);
    }
    return MOE_OK;
}
