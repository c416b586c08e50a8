/* The stage-by-stage replay (DESIGN section 3): every stage a backend runs
 * is compared with the reference stage run on that backend's own inputs,
 * so a failure names the stage, not just "the MoE output differs".
 *
 * moe_replay_begin(backend, r) makes r this thread's active replay and
 * builds an interposer ops table (moe_replay_ops()) with the backend's
 * name, device and memory entries (passed straight through). Each of its
 * stage entries
 *   (a) copies the call's input tensors (params structs' tensors too) to
 *       host tensors and snapshots its output tensors (some stages read
 *       their outputs: accumulation, kept zero pads), through the backend's
 *       copy, host backends included;
 *   (b) calls the backend's entry with the caller's arguments, untouched;
 *   (c) copies the backend's outputs to host;
 *   (d) runs moe_ops_ref's entry on the host inputs into host outputs that
 *       start from the snapshots (NULL optional outputs stay NULL);
 *   (e) compares every output (each tensor of the dispatch output structs)
 *       and adds the metrics to the entry's statistics: EXACT always; for
 *       grouped_gemm also BOUNDED with moe_gemm_bound (include/moe/bounds.h);
 *       for align_block_size, deepep_ll_dispatch and pplx_dispatch also SET
 *       (below);
 *   (f) returns the backend's status and leaves its moe_last_error message.
 *       A backend failure is counted (backend_errors, first_error gets the
 *       message) and nothing is compared; a backend success on which the
 *       reference fails, or on which the replay itself cannot stage the
 *       call (a copy or an allocation), counts as ref_errors.
 * A NULL entry of the backend stays NULL in the interposer table (callers
 * treat NULL as unsupported).
 *
 * SET (deepep_ll_dispatch, pplx_dispatch: rows land in atomic order
 * upstream). Both results are put in a canonical order before an EXACT
 * comparison: within each (rank, local expert), the received rows are
 * sorted by their identity from the handle -- (source rank from
 * layout_range, src_info) for DeepEP-LL, src for pplx -- and every row
 * buffer (x, x_scales, src_info / src) is permuted with them; DeepEP-LL's
 * layout_range begins (atomic-order offsets) become the prefix sums of the
 * counts when the ranges tile [0, count). Counts compare as they are. So
 * a row must come back with its own handle entry: a backend pairing a
 * row's data with another token's src_info fails, which comparing each
 * buffer as a multiset separately would accept. align_block_size (vLLM's
 * large path places rows with atomics): within each run of blocks with one
 * expert id (the reference's expert_ids), the flat indices sorted
 * ascending; every other output compares as it is.
 *
 * Context: the ops table has no user pointer, so the entries find the
 * active replay through a _Thread_local pointer that begin sets and end
 * clears. Call the interposer table from the thread that called begin;
 * on another thread (or after end) its stage entries fail with
 * MOE_ERR_INVALID_ARG without calling the backend. One active replay per
 * thread. The backend's own entries may use threads freely.
 *
 * Cost: every call copies its inputs (weights included) to host and runs
 * the reference stage: the replay is a diagnosis tool, not a fast path. */
#ifndef MOE_REPLAY_H
#define MOE_REPLAY_H

#include <stdint.h>
#include "moe/compare.h"
#include "moe/ops.h"
#include "moe/tolerance.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The stage entries of the ops table, in table order. */
#define MOE_REPLAY_STAGE_COUNT 29

typedef struct {
    const char *name;           /* the ops entry ("activation", ...), also its tolerance-table stage */
    int64_t calls;              /* calls of the entry (failed ones included) */
    moe_cmp_metrics exact;      /* EXACT over every output of every compared call */
    int has_set;                /* SET metrics computed (align_block_size, deepep_ll_dispatch, pplx_dispatch) */
    moe_cmp_metrics set;        /* EXACT after the canonical order above */
    int has_bound;              /* BOUNDED metrics computed (grouped_gemm) */
    moe_cmp_metrics bounded;    /* against moe_gemm_bound */
    int64_t backend_errors;     /* calls the backend refused */
    int64_t ref_errors;         /* backend ok, the reference (or the replay) failed */
    char first_error[256];      /* "backend: <status>: <message>", "reference: ..." or "replay: ..." */
    const char *exact_where, *set_where, *bounded_where; /* output holding the first mismatch, or NULL */
} moe_replay_stage;

typedef struct moe_replay {
    const moe_ops *backend;
    moe_ops ops;                                       /* the interposer table */
    moe_replay_stage stage[MOE_REPLAY_STAGE_COUNT];    /* table order */
} moe_replay;

/* Starts recording into r (zeroed here) for backend, which must pass
 * moe_ops_check. MOE_ERR_INVALID_ARG when this thread already has an
 * active replay. */
moe_status moe_replay_begin(const moe_ops *backend, moe_replay *r);

/* The active replay's interposer table, NULL when this thread has none. */
const moe_ops *moe_replay_ops(void);

/* Stops recording (r stays readable). No effect when r is not active. */
void moe_replay_end(moe_replay *r);

/* The entries that were called, in table order. */
int moe_replay_stage_count(const moe_replay *r);
const moe_replay_stage *moe_replay_stage_get(const moe_replay *r, int i);
/* The entry named `name` if it was called, else NULL. */
const moe_replay_stage *moe_replay_stage_find(const moe_replay *r, const char *name);

/* The verdict of one entry for (backend, scheme) under the tolerance table:
 * 1 = pass, 0 = fail. *cls and *row (each may be NULL) get the row's class
 * and the row (NULL, and fail, when the table has no row: its message is
 * moe_last_error). Fails on any backend or reference error; else EXACT:
 * the exact metrics pass; SET: the set metrics (the exact ones where none
 * were computed: EXACT implies SET); BOUNDED: the bounded metrics (the
 * exact ones where no bound was computed). */
int moe_replay_verdict(const moe_replay_stage *s, const char *backend, const char *scheme, moe_exact_class *cls,
                       const moe_tolerance_row **row);

/* One line: "<name> calls N exact <m>/<n> [set ..] [bounded share x] [errors]". */
void moe_replay_describe(const moe_replay_stage *s, char *buf, size_t n);

#ifdef __cplusplus
}
#endif

#endif
