/* Internals shared by the sweep's files (combos/sweep_*.c). */
#ifndef MOE_SWEEP_INTERNAL_H
#define MOE_SWEEP_INTERNAL_H

#include "moe/forward.h"
#include "moe/modular.h"
#include "moe/slot_bound.h"
#include "moe/sweep.h"

/* How a cell is compared with moe_ref_forward (combos/sweep_class.c). */
typedef struct {
    const char *tol_stage;    /* its tolerance-table stage, "e2e/<class>" */
    moe_slot_path x, o;       /* path counts of the cell and of the oracle */
    moe_qdomain a1, a2;       /* the oracle's quantization domains for it */
    int matched;              /* data with DeepEP-LL-matched 128-groups */
} sweep_class;

moe_status sweep_classify(const moe_sweep_case *c, sweep_class *out);

/* A seeded problem: global x [G, H] (G = world * M), routing, weights and
 * the oracle's output and slot rows (combos/sweep_problem.c). */
typedef struct {
    moe_dtype xd;
    int G;
    moe_tensor x, ids, w, out, slots;
    moe_tensor q1, s1, g1, q2, s2, g2;
    moe_mk_weights mw;
    moe_forward_args fa;
    int wpin;   /* 1 + the pinned weight entry (the thread's cached problem only), 0: none */
} sweep_problem;

moe_status sweep_problem_make(const moe_sweep_case *c, const sweep_class *k, sweep_problem *p);
void sweep_problem_free(sweep_problem *p);

/* The records of one case as they are made (combos/sweep_run.c). */
typedef struct {
    moe_sweep_record *v;
    int n, cap;
} sweep_recs;

/* the monotonic clock in milliseconds (records' time_ms) */
double sweep_now_ms(void);

/* a zeroed record for (backend, stage) appended to l, or NULL (no memory) */
moe_sweep_record *sweep_rec_new(sweep_recs *l, const char *backend, const char *stage);

/* The fused path of backend bname for the case's pair, judged stage by
 * stage on the case's problem (include/moe/fused_run.h; combos/sweep_fused.c):
 * nothing when the backend has no fused path for the pair or the case runs
 * on several ranks, else one record per judged stage, or one "fused" record
 * skipped / in error with the reason. Only running out of memory for the
 * records returns non-OK. */
moe_status sweep_fused_records(const moe_sweep_case *c, const moe_sweep_options *o, const sweep_problem *p,
                               const char *bname, sweep_recs *l);

#endif
