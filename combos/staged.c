/* The staged host view of a device backend (include/moe/staged.h): the
 * active backend per thread and the ends of a staged call. The entries
 * are replay_entries.inc in staged mode (staged_entries.c); the copies
 * are made by rp_stage (replay.c). */
#include <stdio.h>
#include <string.h>
#include "moe/staged.h"
#include "replay_internal.h"

static _Thread_local moe_staged *g_staged;

moe_status moe_staged_begin(const moe_ops *backend, moe_staged *s)
{
    if (!s) return moe_fail(MOE_ERR_NULL, "staged: s must not be NULL");
    moe_status st = moe_ops_check(backend);
    if (st) return st;
    if (g_staged)
        return moe_fail(MOE_ERR_INVALID_ARG, "staged: this thread already stages '%s'; call moe_staged_end first",
                        g_staged->backend->name ? g_staged->backend->name : "?");
    memset(s, 0, sizeof *s);
    s->backend = backend;
    st_build_table(backend, &s->ops);
    s->ops.device = MOE_DEVICE_HOST;
    s->ops.alloc = moe_ops_ref.alloc, s->ops.free = moe_ops_ref.free;
    s->ops.copy = moe_ops_ref.copy, s->ops.synchronize = moe_ops_ref.synchronize;
    g_staged = s;
    return MOE_OK;
}

void moe_staged_end(moe_staged *s)
{
    if (s && g_staged == s) g_staged = NULL;
}

int st_open(rp_call *c, int stage, moe_status *st)
{
    memset(c, 0, sizeof *c);
    if (!g_staged) {
        *st = moe_fail(MOE_ERR_INVALID_ARG,
                       "staged: %s called with no staged backend on this thread (moe_staged_begin / moe_staged_end)",
                       rp_stage_names[stage]);
        return 0;
    }
    c->b = g_staged->backend;
    c->staged = 1;
    return 1;
}

moe_status st_staging_error(const rp_call *c)
{
    return moe_fail(c->fail_st ? c->fail_st : MOE_ERR_INTERNAL, "staged '%s': %s", c->b->name ? c->b->name : "?",
                    c->why);
}

moe_status st_finish(rp_call *c, moe_status backend_status)
{
    if (backend_status != MOE_OK) return backend_status;
    moe_status s = c->b->synchronize();
    for (int i = 0; i < c->nout && s == MOE_OK; i++) {
        if (!c->out_arg[i]->data) continue;
        if ((s = c->b->copy(c->out_arg[i], &c->ref[i])))
            s = moe_fail(s, "staged '%s': output %s back to the host: %s", c->b->name ? c->b->name : "?",
                         c->out_name[i], moe_last_error());
    }
    return s;
}
