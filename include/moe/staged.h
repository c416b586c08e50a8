/* A host view of a device backend. The modular kernel and the harnesses
 * around it (sweep, golden, bench) build index tensors and read counts on
 * the host between stages; a CUDA backend's stages take device tensors.
 * moe_staged_begin(backend, s) makes backend this thread's staged backend
 * and fills s->ops, a table on the host (the reference's memory entries,
 * device HOST, the backend's name) whose every stage entry
 *   (a) copies the call's host input tensors (params structs' tensors too)
 *       and its outputs' current contents (stages that accumulate or keep
 *       pads read them) to new tensors of the backend,
 *   (b) runs the backend's entry on those copies,
 *   (c) copies the outputs back into the caller's tensors on success, and
 *   (d) returns the backend's status and message.
 * So every stage still runs the backend's kernels on its inputs: only the
 * glue between stages lives on the host. It costs a round trip of every
 * input per call, so times measured through this table are not the
 * backend's stage times: put a stage timer between this table and the
 * backend (moe_staged_begin(&timer.ops, ...)) to time the stages alone.
 * A NULL entry of the backend stays NULL. One staged backend per thread,
 * as for the replay (the ops table has no user pointer). */
#ifndef MOE_STAGED_H
#define MOE_STAGED_H

#include "moe/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const moe_ops *backend;
    moe_ops ops;    /* the host table */
} moe_staged;

/* MOE_ERR_INVALID_ARG when this thread already has a staged backend. */
moe_status moe_staged_begin(const moe_ops *backend, moe_staged *s);
/* No effect when s is not this thread's active one. */
void moe_staged_end(moe_staged *s);

#ifdef __cplusplus
}
#endif

#endif
