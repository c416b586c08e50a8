/* Per-stage wall time of a backend: moe_stage_timer_begin(backend, t)
 * fills t->ops, a table that runs the backend's entries and adds each
 * call's time (after the backend's synchronize) to t->seconds[entry]; run
 * the modular kernel (or anything) with it; moe_stage_timer_end stops.
 * The table has no user pointer, so the active timer is per thread:
 * call the table from the thread that began it. moe-bench uses it. */
#ifndef MOE_STAGE_TIMER_H
#define MOE_STAGE_TIMER_H

#include <stdint.h>
#include "moe/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MOE_STAGE_TIMER_MAX 32

typedef struct {
    moe_ops ops;                              /* the timing table */
    double seconds[MOE_STAGE_TIMER_MAX];      /* per entry, table order */
    int64_t calls[MOE_STAGE_TIMER_MAX];
} moe_stage_timer;

moe_status moe_stage_timer_begin(const moe_ops *backend, moe_stage_timer *t);
void moe_stage_timer_end(moe_stage_timer *t);
/* the stage entries in table order and their names */
int moe_stage_timer_count(void);
const char *moe_stage_timer_name(int i);

#ifdef __cplusplus
}
#endif

#endif
