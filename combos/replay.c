/* The replay's bookkeeping (include/moe/replay.h): the active replay per
 * thread, the staged call (inputs to host, output snapshots, the
 * backend's outputs to host, the EXACT comparison), the statistics and the
 * verdict. The entry wrappers are in replay_entries.c, the SET and
 * BOUNDED comparisons in replay_set.c. */
#include <stdio.h>
#include <string.h>
#include "replay_internal.h"

/* The ops table has no user pointer: the entries find their replay here. */
static _Thread_local moe_replay *g_active;

const char *const rp_stage_names[RP_NSTAGES] = {
    "route", "align_block_size", "align_batched", "sort_ck", "maps_trtllm", "quantize", "dequantize",
    "permute_rows", "unpermute_rows", "expand_trtllm", "batched_scatter", "permute_grouped", "grouped_gemm",
    "activation", "war_contiguous", "war_noop", "war_naive_batched", "finalize_trtllm", "ep_allgather_dispatch",
    "ep_reduce_scatter_combine", "deepep_layout", "deepep_dispatch", "deepep_combine", "deepep_ll_dispatch",
    "deepep_ll_combine", "pplx_dispatch", "pplx_combine", "hep_dispatch_with_permute", "hep_combine_with_unpermute",
};

_Static_assert(RP_NSTAGES == MOE_REPLAY_STAGE_COUNT, "replay.h's stage count must match the entry list");

/* ---- the active replay -------------------------------------------------- */

moe_status moe_replay_begin(const moe_ops *backend, moe_replay *r)
{
    if (!r) return moe_fail(MOE_ERR_NULL, "replay: r must not be NULL");
    moe_status s = moe_ops_check(backend);
    if (s) return s;
    if (g_active)
        return moe_fail(MOE_ERR_INVALID_ARG, "replay: this thread already replays '%s'; call moe_replay_end first",
                        g_active->backend->name ? g_active->backend->name : "?");
    memset(r, 0, sizeof *r);
    r->backend = backend;
    for (int i = 0; i < RP_NSTAGES; i++) r->stage[i].name = rp_stage_names[i];
    rp_build_table(backend, &r->ops);
    g_active = r;
    return MOE_OK;
}

const moe_ops *moe_replay_ops(void) { return g_active ? &g_active->ops : NULL; }

void moe_replay_end(moe_replay *r)
{
    if (r && g_active == r) g_active = NULL;
}

/* ---- statistics --------------------------------------------------------- */

int moe_replay_stage_count(const moe_replay *r)
{
    int n = 0;
    for (int i = 0; r && i < RP_NSTAGES; i++) n += r->stage[i].calls > 0;
    return n;
}

const moe_replay_stage *moe_replay_stage_get(const moe_replay *r, int i)
{
    for (int j = 0; r && i >= 0 && j < RP_NSTAGES; j++)
        if (r->stage[j].calls > 0 && i-- == 0) return &r->stage[j];
    return NULL;
}

const moe_replay_stage *moe_replay_stage_find(const moe_replay *r, const char *name)
{
    for (int j = 0; r && name && j < RP_NSTAGES; j++)
        if (r->stage[j].calls > 0 && !strcmp(r->stage[j].name, name)) return &r->stage[j];
    return NULL;
}

int moe_replay_verdict(const moe_replay_stage *s, const char *backend, const char *scheme, moe_exact_class *cls,
                       const moe_tolerance_row **row)
{
    if (row) *row = NULL;
    if (!s) {
        moe_fail(MOE_ERR_NULL, "replay verdict: s must not be NULL");
        return 0;
    }
    const moe_tolerance_row *t = moe_tolerance_find(s->name, backend, scheme);
    if (row) *row = t;
    if (!t) return 0;
    if (cls) *cls = t->cls;
    if (s->backend_errors || s->ref_errors) return 0;
    switch (t->cls) {
    case MOE_CLASS_SET: return s->has_set ? moe_cmp_pass(&s->set, MOE_CLASS_SET) : moe_cmp_pass(&s->exact, MOE_CLASS_EXACT);
    case MOE_CLASS_BOUNDED:
        return s->has_bound ? moe_cmp_pass(&s->bounded, MOE_CLASS_BOUNDED) : moe_cmp_pass(&s->exact, MOE_CLASS_EXACT);
    default: return moe_cmp_pass(&s->exact, MOE_CLASS_EXACT);
    }
}

static size_t put_metrics(char *buf, size_t n, const char *what, const moe_cmp_metrics *m, const char *where,
                          int bounded)
{
    int k = snprintf(buf, n, ", %s %lld/%lld differ", what, (long long)m->mismatches, (long long)m->n);
    if (k < 0 || (size_t)k >= n) return n;
    size_t at = (size_t)k;
    if (m->class_mismatches) at += (size_t)snprintf(buf + at, n - at, " (%lld by class)", (long long)m->class_mismatches);
    if (at < n && bounded)
        at += (size_t)snprintf(buf + at, n - at, ", share %.3g, %lld over", m->share, (long long)m->bound_failures);
    else if (at < n && m->mismatches)
        at += (size_t)snprintf(buf + at, n - at, ", max |d| %.3g, max ulp %.0f", m->max_abs, m->max_ulp);
    if (at < n && m->nfirst)
        at += (size_t)snprintf(buf + at, n - at, ", first %s[%lld] got %s want %s", where ? where : "?",
                               (long long)m->first[0].index, m->first[0].got_hex, m->first[0].want_hex);
    return at < n ? at : n;
}

void moe_replay_describe(const moe_replay_stage *s, char *buf, size_t n)
{
    if (!buf || !n) return;
    if (!s) {
        snprintf(buf, n, "(no stage)");
        return;
    }
    size_t at = (size_t)snprintf(buf, n, "%s: %lld calls", s->name, (long long)s->calls);
    if (at < n) at += put_metrics(buf + at, n - at, "exact", &s->exact, s->exact_where, 0);
    if (at < n && s->has_set) at += put_metrics(buf + at, n - at, "set", &s->set, s->set_where, 0);
    if (at < n && s->has_bound) at += put_metrics(buf + at, n - at, "bounded", &s->bounded, s->bounded_where, 1);
    if (at < n && (s->backend_errors || s->ref_errors))
        snprintf(buf + at, n - at, ", %lld backend / %lld reference errors, first: %s", (long long)s->backend_errors,
                 (long long)s->ref_errors, s->first_error);
}

/* ---- one staged call ------------------------------------------------------ */

int rp_open(rp_call *c, int stage, moe_status *st)
{
    memset(c, 0, sizeof *c);
    if (!g_active) {
        *st = moe_fail(MOE_ERR_INVALID_ARG,
                       "replay: %s called with no active replay on this thread (moe_replay_begin / moe_replay_end)",
                       rp_stage_names[stage]);
        return 0;
    }
    c->s = &g_active->stage[stage];
    c->b = g_active->backend;
    c->s->calls++;
    return 1;
}

const moe_tensor *rp_in(rp_call *c, const moe_tensor *t, const char *name)
{
    if (!t) return NULL;
    if (c->nin == RP_MAXT) {
        c->failed = 1, snprintf(c->why, sizeof c->why, "more than %d inputs", RP_MAXT);
        return NULL;
    }
    c->in_arg[c->nin] = t, c->in_name[c->nin] = name;
    return &c->in_copy[c->nin++];
}

moe_tensor *rp_out(rp_call *c, moe_tensor *t, const char *name)
{
    if (!t) return NULL;
    if (c->nout == RP_MAXT) {
        c->failed = 1, snprintf(c->why, sizeof c->why, "more than %d outputs", RP_MAXT);
        return NULL;
    }
    c->out_arg[c->nout] = t, c->out_name[c->nout] = name;
    return &c->ref[c->nout++];
}

int rp_out_index(const rp_call *c, const char *name)
{
    for (int i = 0; i < c->nout; i++)
        if (!strcmp(c->out_name[i], name)) return i;
    return -1;
}

/* src (on the host or the backend's device) into a new host tensor of its
 * layout; only the layout's bytes travel (a view may describe more) */
static moe_status to_host(const moe_ops *b, const moe_tensor *src, moe_tensor *dst)
{
    size_t nb;
    moe_status s = moe_tensor_layout(src->dtype, src->ndim, src->shape, &nb);
    if (s || (s = moe_tensor_alloc(dst, src->dtype, src->ndim, src->shape))) return s;
    moe_tensor v = *src;
    v.owns = 0;
    if (v.nbytes > nb) v.nbytes = nb;
    return b->copy(dst, &v);
}

/* a host tensor into a new tensor of the backend (staged calls); a tensor
 * without data stays one (the backend judges it as it would the caller's) */
static moe_status to_backend(const moe_ops *b, const moe_tensor *src, moe_tensor *dst)
{
    if (!src->data) {
        *dst = *src, dst->owns = 0, dst->device = (moe_device){b->device, 0};
        return MOE_OK;
    }
    moe_status s = b->alloc(dst, src->dtype, src->ndim, src->shape);
    if (s) return s;
    moe_tensor v = *src;
    v.owns = 0;
    return b->copy(dst, &v);
}

static void stage_fail(rp_call *c, moe_status s, const char *what, const char *name)
{
    c->failed = 1, c->fail_st = s;
    snprintf(c->why, sizeof c->why, "%s %s: %s", what, name, moe_last_error());
}

void rp_stage(rp_call *c)
{
    moe_status (*move)(const moe_ops *, const moe_tensor *, moe_tensor *) = c->staged ? to_backend : to_host;
    moe_status s;
    for (int i = 0; i < c->nin && !c->failed; i++)
        if ((s = move(c->b, c->in_arg[i], &c->in_copy[i])))
            stage_fail(c, s, c->staged ? "input to the backend:" : "input to host:", c->in_name[i]);
    for (int i = 0; i < c->nout && !c->failed; i++)
        if ((s = move(c->b, c->out_arg[i], &c->ref[i])))
            stage_fail(c, s, c->staged ? "output to the backend:" : "snapshot of output", c->out_name[i]);
}

void rp_note_error(moe_replay_stage *s, const char *who, moe_status st, const char *msg)
{
    if (!s->first_error[0]) snprintf(s->first_error, sizeof s->first_error, "%s: %s: %s", who, moe_status_str(st), msg);
}

int rp_after(rp_call *c, moe_status st)
{
    if (st != MOE_OK) {
        c->s->backend_errors++;
        rp_note_error(c->s, "backend", st, moe_last_error());
        return 0;
    }
    if (c->failed) {
        c->s->ref_errors++;
        rp_note_error(c->s, "replay", MOE_ERR_INTERNAL, c->why);
        return 0;
    }
    for (int i = 0; i < c->nout; i++) {
        moe_status s = to_host(c->b, c->out_arg[i], &c->got[i]);
        if (s) {
            char why[200];
            snprintf(why, sizeof why, "output %s to host: %s", c->out_name[i], moe_last_error());
            c->s->ref_errors++;
            rp_note_error(c->s, "replay", s, why);
            return 0;
        }
    }
    return 1;
}

int rp_compare(rp_call *c, moe_status ref_status)
{
    if (ref_status != MOE_OK) {
        c->s->ref_errors++;
        rp_note_error(c->s, "reference", ref_status, moe_last_error());
        return 0;
    }
    for (int i = 0; i < c->nout; i++) {
        moe_cmp_metrics m;
        moe_cmp_init(&m);
        moe_status s = moe_compare_exact(&c->got[i], &c->ref[i], &m);
        if (s) {
            c->s->ref_errors++;
            rp_note_error(c->s, "replay", s, moe_last_error());
            return 0;
        }
        if (!c->s->exact_where && (m.mismatches || m.class_mismatches)) c->s->exact_where = c->out_name[i];
        moe_cmp_merge(&c->s->exact, &m);
    }
    return 1;
}

void rp_free(rp_call *c)
{
    for (int i = 0; i < RP_MAXT; i++) {
        if (c->staged) {
            if (c->in_copy[i].owns) c->b->free(&c->in_copy[i]);
            if (c->ref[i].owns) c->b->free(&c->ref[i]);
            continue;
        }
        moe_tensor_free(&c->in_copy[i]);
        moe_tensor_free(&c->ref[i]);
        moe_tensor_free(&c->got[i]);
    }
}
