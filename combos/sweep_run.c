/* Running one sweep case (include/moe/sweep.h): the registry's verdict,
 * the constructor's refusal of an incompatible cell, and each backend's
 * forward against the oracle under the cell's tolerance row. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "moe/backends.h"
#include "moe/compat.h"
#include "moe/replay.h"
#include "moe/tolerance.h"
#include "sweep_internal.h"

static const char *const VERDICTS[MOE_VERDICT_COUNT] = {"pass", "fail", "refused-as-expected", "skipped", "error"};
const char *moe_verdict_name(moe_verdict v) { return (unsigned)v < MOE_VERDICT_COUNT ? VERDICTS[v] : "?"; }

moe_sweep_record *sweep_rec_new(sweep_recs *l, const char *backend, const char *stage)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 8;
        moe_sweep_record *v = realloc(l->v, sizeof *v * (size_t)cap);
        if (!v) return NULL;
        l->v = v, l->cap = cap;
    }
    moe_sweep_record *r = &l->v[l->n++];
    memset(r, 0, sizeof *r);
    snprintf(r->backend, sizeof r->backend, "%s", backend);
    snprintf(r->stage, sizeof r->stage, "%s", stage);
    return r;
}

void moe_sweep_records_free(moe_sweep_record *recs, int n)
{
    for (int i = 0; recs && i < n; i++) free(recs[i].heat);
    free(recs);
}

double sweep_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static moe_mk_config mk_config(const moe_sweep_case *c, const moe_ops *ops)
{
    moe_mk_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.scheme = c->scheme, cfg.act = moe_act_defaults(c->act, MOE_LAYOUT_GATE_UP);
    cfg.num_experts = c->E, cfg.topk = c->k, cfg.hidden = c->H, cfg.inter = c->I, cfg.world_size = c->world;
    cfg.ops = ops;
    return cfg;
}

/* An incompatible cell: the constructor must refuse it naming every rule
 * the registry fired (its message lists them in rule-table order). */
static void check_refusal(const moe_sweep_case *c, const moe_compat_verdict *v, moe_sweep_record *r)
{
    moe_mk_config cfg = mk_config(c, &moe_ops_ref);
    moe_mk *mk = NULL;
    moe_status st = moe_mk_create(c->pf, c->experts, &cfg, &mk, NULL);
    for (int i = 0; i < v->nfail && r->nrules < 8; i++) r->rules[r->nrules++] = v->fail[i]->id;
    r->verdict = MOE_VERDICT_REFUSED;
    if (st == MOE_OK) {
        r->verdict = MOE_VERDICT_FAIL;
        snprintf(r->reason, sizeof r->reason, "the constructor built a pair the registry refuses");
        moe_mk_destroy(mk);
        return;
    }
    if (st != MOE_ERR_INCOMPATIBLE) {
        r->verdict = MOE_VERDICT_FAIL;
        snprintf(r->reason, sizeof r->reason, "the constructor returned %s, not incompatible: %s", moe_status_str(st),
                 moe_last_error());
        return;
    }
    for (int i = 0; i < v->nfail; i++)
        if (!strstr(moe_last_error(), v->fail[i]->id)) {
            r->verdict = MOE_VERDICT_FAIL;
            snprintf(r->reason, sizeof r->reason, "the constructor's refusal does not name rule %s: %s",
                     v->fail[i]->id, moe_last_error());
            return;
        }
}

/* heat over (expert bin, token block) and the share histogram */
static void shares_to_heat(const moe_sweep_case *c, const sweep_problem *p, const double *share, moe_sweep_record *r)
{
    int G = p->G, H = c->H, k = c->k;
    int rows = c->E < 32 ? c->E : 32, cols = G < 16 ? G : 16;
    int ebin = (c->E + rows - 1) / rows, block = (G + cols - 1) / cols;
    r->heat_rows = rows, r->heat_cols = cols, r->heat_block = block;
    r->heat = calloc((size_t)(rows * cols), sizeof(float));
    for (int t = 0; t < G; t++)
        for (int h = 0; h < H; h++) {
            double s = share[(int64_t)t * H + h];
            r->hist[s < 0.125 ? 0 : s < 0.25 ? 1 : s < 0.5 ? 2 : s <= 1.0 ? 3 : 4]++; /* 1.0 is within */
            if (!r->heat) continue;
            for (int j = 0; j < k; j++) {
                float *cell = &r->heat[(((const int32_t *)p->ids.data)[t * k + j] / ebin) * cols + t / block];
                if (s > *cell) *cell = (float)s;
            }
        }
}

static void compare_e2e(const moe_sweep_case *c, const sweep_class *k, const sweep_problem *p,
                        const moe_tensor *out, moe_sweep_record *r)
{
    moe_status st;
    moe_cmp_init(&r->m);
    r->has_metrics = 1, r->cols = c->H;
    if (r->cls != MOE_CLASS_BOUNDED || r->stagewise) {
        st = moe_compare_exact(out, &p->out, &r->m);
    } else {
        int64_t n = (int64_t)p->G * c->H;
        double *bound = malloc(sizeof(double) * (size_t)(n + 1)), *share = malloc(sizeof(double) * (size_t)(n + 1));
        if (!bound || !share) {
            free(bound), free(share);
            r->verdict = MOE_VERDICT_ERROR, r->has_metrics = 0;
            snprintf(r->reason, sizeof r->reason, "out of memory for the bound of %lld elements", (long long)n);
            return;
        }
        for (int64_t t = 0; t < p->G; t++)
            for (int64_t h = 0; h < c->H; h++) {
                moe_slot_sums s = moe_slot_sums_rows(&p->w, &p->slots, c->k, t, h);
                bound[t * c->H + h] = moe_slot_bound(p->xd, &k->x, &k->o, &s);
            }
        st = moe_compare_bounded(out, &p->out, bound, &r->m, share);
        if (st == MOE_OK) shares_to_heat(c, p, share, r);
        free(bound), free(share);
    }
    if (st) {
        r->verdict = MOE_VERDICT_ERROR, r->has_metrics = 0;
        snprintf(r->reason, sizeof r->reason, "compare: %s", moe_last_error());
        return;
    }
    if (r->stagewise) { /* the replay's records decide (replay_records) */
        r->verdict = MOE_VERDICT_PASS;
        return;
    }
    r->verdict = moe_cmp_pass(&r->m, r->cls) ? MOE_VERDICT_PASS : MOE_VERDICT_FAIL;
    if (r->verdict == MOE_VERDICT_FAIL)
        snprintf(r->reason, sizeof r->reason, "%lld of %lld elements %s", (long long)(r->cls == MOE_CLASS_BOUNDED
                 ? r->m.bound_failures + r->m.class_mismatches : r->m.mismatches), (long long)r->m.n,
                 r->cls == MOE_CLASS_BOUNDED ? "over the bound" : "differ");
}

/* rank-major [R, M, ..] view of a [G, ..] tensor */
static moe_status ranks_view(const moe_tensor *t, int R, moe_tensor *v)
{
    int64_t sh[3] = {R, t->shape[0] / R, t->shape[1]};
    return moe_tensor_wrap(v, t->dtype, 3, sh, t->data, t->nbytes, t->device);
}

/* the pair's forward on the problem (rank-major views for EP PFs) */
static moe_status forward(const moe_sweep_case *c, moe_mk *mk, const sweep_problem *p, moe_tensor *out)
{
    if (!moe_pf_find(c->pf)->expert_parallel) return moe_mk_forward(mk, &p->mw, &p->x, &p->ids, &p->w, out);
    moe_tensor x3, i3, w3, o3;
    moe_status st;
    if ((st = ranks_view(&p->x, c->world, &x3)) || (st = ranks_view(&p->ids, c->world, &i3)) ||
        (st = ranks_view(&p->w, c->world, &w3)) || (st = ranks_view(out, c->world, &o3)))
        return st;
    return moe_mk_forward_ranks(mk, &p->mw, &x3, &i3, &w3, &o3);
}

/* one record per ops entry the replay saw */
static moe_status replay_records(const moe_sweep_case *c, const moe_replay *rp, const char *bname, sweep_recs *l)
{
    for (int i = 0; i < moe_replay_stage_count(rp); i++) {
        const moe_replay_stage *s = moe_replay_stage_get(rp, i);
        moe_sweep_record *r = sweep_rec_new(l, bname, s->name);
        if (!r) return moe_fail(MOE_ERR_NOMEM, "sweep records");
        moe_exact_class cls = MOE_CLASS_EXACT;
        const moe_tolerance_row *row = NULL;
        int pass = moe_replay_verdict(s, bname, moe_scheme_name(c->scheme), &cls, &row);
        r->calls = (int)s->calls;
        if (!row) {
            r->verdict = MOE_VERDICT_ERROR;
            snprintf(r->reason, sizeof r->reason, "%s", moe_last_error());
            continue;
        }
        r->cls = cls, r->tolerance = row->id, r->bound = cls == MOE_CLASS_BOUNDED ? row->bound : NULL;
        r->has_metrics = 1;
        r->m = cls == MOE_CLASS_SET && s->has_set ? s->set : cls == MOE_CLASS_BOUNDED && s->has_bound ? s->bounded
             : s->exact;
        r->verdict = pass ? MOE_VERDICT_PASS : MOE_VERDICT_FAIL;
        if (s->backend_errors || s->ref_errors) {
            r->verdict = MOE_VERDICT_FAIL;
            snprintf(r->reason, sizeof r->reason, "%s", s->first_error);
        } else if (!pass) {
            const char *where = cls == MOE_CLASS_SET && s->has_set ? s->set_where
                              : cls == MOE_CLASS_BOUNDED && s->has_bound ? s->bounded_where : s->exact_where;
            snprintf(r->reason, sizeof r->reason, "stage %s differs from the reference on its own inputs%s%s",
                     s->name, where ? ": first in " : "", where ? where : "");
        } else if (cls == MOE_CLASS_SET && s->has_set && s->exact.mismatches) {
            /* what the atomics change: the order, which the SET class allows */
            snprintf(r->reason, sizeof r->reason,
                     "same multiset of rows; %lld of %lld elements in another order than the reference's (first in %s)",
                     (long long)s->exact.mismatches, (long long)s->exact.n, s->exact_where ? s->exact_where : "?");
        }
    }
    return MOE_OK;
}

static void run_backend(const moe_sweep_case *c, const sweep_class *k, const sweep_problem *p, const char *bname,
                        const moe_ops *ops, moe_sweep_record *r, moe_replay *rp)
{
    const moe_tolerance_row *row = moe_tolerance_find(k->tol_stage, bname, moe_scheme_name(c->scheme));
    if (!row) {
        r->verdict = MOE_VERDICT_ERROR;
        snprintf(r->reason, sizeof r->reason, "%s", moe_last_error());
        return;
    }
    r->cls = row->cls, r->tolerance = row->id, r->bound = row->cls == MOE_CLASS_BOUNDED ? row->bound : NULL;
    /* a device backend runs its stages on copies of the host tensors the
     * modular kernel works on (staged.h); the replay sits above that view */
    moe_staged sg;
    moe_status st = moe_backend_host_begin(ops, &sg, &ops);
    if (st == MOE_OK && rp && (st = moe_replay_begin(ops, rp)) == MOE_OK) ops = moe_replay_ops();
    moe_mk_config cfg = mk_config(c, ops);
    moe_mk *mk = NULL;
    if (st == MOE_OK) st = moe_mk_create(c->pf, c->experts, &cfg, &mk, NULL);
    moe_tensor out;
    memset(&out, 0, sizeof out);
    if (st == MOE_OK) st = moe_tensor_alloc(&out, p->xd, 2, (int64_t[2]){p->G, c->H});
    if (st == MOE_OK) {
        memset(out.data, 0xA5, out.nbytes); /* every element must be written */
        double t0 = sweep_now_ms();
        st = forward(c, mk, p, &out);
        r->time_ms = sweep_now_ms() - t0;
    }
    if (rp) moe_replay_end(rp);
    moe_backend_host_end(&sg);
    /* an "e2e/any" row: the reference is the same pair on the reference backend */
    sweep_problem pk = *p;
    int any = !strcmp(row->stage, "e2e/any");
    int vs_kernel = st == MOE_OK && any && row->cls == MOE_CLASS_EXACT;
    r->stagewise = any && row->cls == MOE_CLASS_BOUNDED && rp; /* metrics: the difference from the oracle */
    if (vs_kernel) {
        moe_mk_config rc = mk_config(c, &moe_ops_ref);
        moe_mk *rk = NULL;
        memset(&pk.out, 0, sizeof pk.out);
        if ((st = moe_mk_create(c->pf, c->experts, &rc, &rk, NULL)) == MOE_OK &&
            (st = moe_tensor_alloc(&pk.out, p->xd, 2, (int64_t[2]){p->G, c->H})) == MOE_OK)
            st = forward(c, rk, p, &pk.out);
        moe_mk_destroy(rk);
    }
    if (st == MOE_ERR_UNSUPPORTED) {
        r->verdict = MOE_VERDICT_SKIPPED;
        snprintf(r->reason, sizeof r->reason, "not supported by this build: %s", moe_last_error());
    } else if (st) {
        r->verdict = MOE_VERDICT_ERROR;
        snprintf(r->reason, sizeof r->reason, "%s: %s", moe_status_str(st), moe_last_error());
    } else {
        compare_e2e(c, k, &pk, &out, r);
    }
    if (vs_kernel) moe_tensor_free(&pk.out);
    moe_mk_destroy(mk);
    moe_tensor_free(&out);
}

moe_status moe_sweep_run_case(const moe_sweep_case *c, const moe_sweep_options *o, moe_sweep_record **recs,
                              int *nrec)
{
    if (!c || !o || !recs || !nrec) return moe_fail(MOE_ERR_NULL, "moe_sweep_run_case: arguments must not be NULL");
    sweep_recs l = {NULL, 0, 0};
    const moe_pf_info *pf = moe_pf_find(c->pf);
    const moe_experts_info *ex = moe_experts_find(c->experts);
    if (!pf || !ex) return moe_fail(MOE_ERR_INVALID_ARG, "case: unknown pf '%s' or experts '%s'", c->pf, c->experts);
    moe_compat_query q = moe_compat_query_default();
    q.scheme = c->scheme, q.topk = c->k, q.num_experts = c->E, q.world_size = c->world, q.hidden = c->H;
    q.tokens = c->M;
    moe_compat_verdict v;
    moe_status st = moe_compat_check(pf, ex, &q, &v);
    if (st) return st;
    if (!v.compatible) {
        moe_sweep_record *r = sweep_rec_new(&l, "any", "e2e");
        if (!r) return moe_fail(MOE_ERR_NOMEM, "sweep records");
        check_refusal(c, &v, r);
        *recs = l.v, *nrec = l.n;
        return MOE_OK;
    }
    sweep_class k;
    sweep_problem p;
    memset(&p, 0, sizeof p);
    moe_status pst = sweep_classify(c, &k);
    if (pst == MOE_OK) pst = sweep_problem_make(c, &k, &p);
    char why[256];
    snprintf(why, sizeof why, "%s", pst ? moe_last_error() : "");
    int nb = o->inject ? 1 : o->nbackends;
    for (int b = 0; b < nb; b++) {
        const char *bname = o->inject ? "inject" : o->backends[b];
        moe_sweep_record *r = sweep_rec_new(&l, bname, "e2e");
        if (!r) return moe_sweep_records_free(l.v, l.n - 1), moe_fail(MOE_ERR_NOMEM, "sweep records");
        const moe_ops *ops = o->inject;
        const char *why_not = NULL;
        if (o->inject) bname = o->inject_as ? o->inject_as : "inject", snprintf(r->backend, sizeof r->backend, "%s", bname);
        if (!ops && moe_backend_lookup(bname, &ops, &why_not) != MOE_OK) {
            r->verdict = why_not ? MOE_VERDICT_SKIPPED : MOE_VERDICT_ERROR;
            snprintf(r->reason, sizeof r->reason, "%s", why_not ? why_not : moe_last_error());
            continue;
        }
        if (pst) {
            r->verdict = MOE_VERDICT_ERROR;
            snprintf(r->reason, sizeof r->reason, "building the problem and its oracle: %s", why);
            continue;
        }
        /* the reference needs no replay against itself */
        moe_replay *rp = ops == &moe_ops_ref ? NULL : malloc(sizeof *rp);
        if (ops != &moe_ops_ref && !rp) return moe_sweep_records_free(l.v, l.n), moe_fail(MOE_ERR_NOMEM, "replay");
        run_backend(c, &k, &p, bname, ops, r, rp);
        int e2e = l.n - 1, stagewise = r->stagewise;
        moe_status rs = rp ? replay_records(c, rp, bname, &l) : MOE_OK;
        if (rs == MOE_OK && stagewise && l.v[e2e].verdict == MOE_VERDICT_PASS) /* every stage within its row */
            for (int i = e2e + 1; i < l.n; i++)
                if (l.v[i].verdict != MOE_VERDICT_PASS) {
                    l.v[e2e].verdict = MOE_VERDICT_FAIL;
                    snprintf(l.v[e2e].reason, sizeof l.v[e2e].reason, "stage %s fails its row on its own inputs",
                             l.v[i].stage);
                    break;
                }
        free(rp);
        if (rs == MOE_OK) rs = sweep_fused_records(c, o, &p, bname, &l);
        if (rs) return moe_sweep_records_free(l.v, l.n), sweep_problem_free(&p), rs;
    }
    sweep_problem_free(&p);
    *recs = l.v, *nrec = l.n;
    return MOE_OK;
}
