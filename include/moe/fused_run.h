/* Fused experts paths as data: which backend has one, which modular pair's
 * semantics it implements (so which sweep cells judge it), and the runner
 * that gives one forward's trace for include/moe/fused_judge.h. The sweep
 * (include/moe/sweep.h) adds a backend's fused records to the cells of
 * its path's pair: one record per judged stage, "fused.layout" ...
 * "fused.combine", under the tolerance rows "any.fused.<stage>". */
#ifndef MOE_FUSED_RUN_H
#define MOE_FUSED_RUN_H

#include <stddef.h>
#include "moe/fused_judge.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One forward of p on host inputs: the intermediates copied to the host
 * (*t, free with moe_fused_trace_store_free) and the accumulation model of
 * the plan the path chose (*m); desc (n bytes, may be NULL) the plan in
 * words. A problem the path does not take (scheme, sizes, activation), or
 * a path not built into this program or without its device:
 * MOE_ERR_UNSUPPORTED (or the plan's MOE_ERR_INVALID_ARG) with a message. */
typedef moe_status (*moe_fused_runner)(const moe_fused_problem *p, const moe_fused_inputs *in,
                                       moe_fused_trace_store *t, moe_fused_model *m, char *desc, size_t n);

typedef struct {
    const char *backend;        /* the backend whose fused path it is */
    const char *pf, *experts;   /* the modular pair it implements, on one rank */
    moe_fused_runner run;
    const char *source;         /* where it lives, what upstream it models */
} moe_fused_path;

int moe_fused_path_count(void);
const moe_fused_path *moe_fused_path_get(int i);
/* the fused path of backend for the pair (pf, experts), or NULL */
const moe_fused_path *moe_fused_path_find(const char *backend, const char *pf, const char *experts);
/* 1 where some backend has a fused path for the pair (pf, experts), else 0
 * (also for a NULL name): the sweep's cells that take the fused M points */
int moe_fused_pair_has_path(const char *pf, const char *experts);

#ifdef __cplusplus
}
#endif

#endif
