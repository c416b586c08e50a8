/* The sweep harness (moe-sweep): every prepare/finalize x experts x scheme
 * x activation x shape x world cell, asked of the registry, run on each
 * requested backend and compared with the reference (DESIGN sections 5-7).
 *
 * A case is one cell at one shape. Its record(s) (reports/SCHEMA.md):
 *  - incompatible: moe_mk_create must refuse it with MOE_ERR_INCOMPATIBLE
 *    and the registry's first rule id (verdict refused-as-expected; a run
 *    or another status fails the case);
 *  - compatible: per backend, the end-to-end forward against
 *    moe_ref_forward under the cell's tolerance row (stage "e2e"), and for
 *    every backend other than ref the stage-by-stage replay (one record per
 *    ops entry called, include/moe/replay.h: the forward runs through the
 *    replay's interposer table); a backend that is not built or has no device, or a
 *    cell the modular kernel reports MOE_ERR_UNSUPPORTED (a known gap of
 *    this build), is skipped with the reason, never passed;
 *  - compatible, on one rank, for a backend with a fused experts path for
 *    the cell's pair (include/moe/fused_run.h): that path's forward on the
 *    same problem judged stage by stage (include/moe/fused_judge.h) with
 *    each combine, one record per stage ("fused.layout", ... for the
 *    deterministic combine, "fused-atomic.layout", ... for the atomic
 *    one), or one "fused" / "fused-atomic" record skipped with the path's
 *    reason (a scheme, size or activation it does not take). Such a pair's
 *    single-rank cells are enumerated at 1, 64, 256 and 512 tokens too (where
 *    tokens x top-k <= 1024), where the path's plan takes its other kernels
 *    (combos/sweep_cases.c).
 * Verdicts depend only on the case list and the seed (never on --jobs). */
#ifndef MOE_SWEEP_H
#define MOE_SWEEP_H

#include <stdint.h>
#include <stdio.h>
#include "moe/act.h"
#include "moe/compare.h"
#include "moe/fused_run.h"
#include "moe/ops.h"
#include "moe/quant.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { MOE_TIER_QUICK = 0, MOE_TIER_STANDARD, MOE_TIER_FULL, MOE_TIER_COUNT } moe_sweep_tier;
const char *moe_sweep_tier_name(moe_sweep_tier t);
moe_status moe_sweep_tier_from_name(const char *name, moe_sweep_tier *out);

typedef struct {
    const char *pf, *experts;  /* registry names */
    moe_scheme scheme;
    moe_act act;
    int E, k, M, H, I, world;  /* M: tokens per rank */
    const char *shape;         /* the shape row it came from */
    uint64_t seed;
} moe_sweep_case;

/* "moe.<pf>.<experts>.<scheme>.<act>.E<E>.k<k>.M<M>.H<H>.I<I>.w<R>" */
void moe_sweep_case_name(const moe_sweep_case *c, char *buf, size_t n);

/* The cases of a tier, in a fixed order (grouped so that cases sharing
 * weights are adjacent); *cases is malloc'd. */
moe_status moe_sweep_enumerate(moe_sweep_tier tier, uint64_t seed, moe_sweep_case **cases, int *n);

/* Verdicts of a record. */
typedef enum {
    MOE_VERDICT_PASS = 0,
    MOE_VERDICT_FAIL,
    MOE_VERDICT_REFUSED,  /* refused-as-expected */
    MOE_VERDICT_SKIPPED,
    MOE_VERDICT_ERROR,
    MOE_VERDICT_COUNT
} moe_verdict;
const char *moe_verdict_name(moe_verdict v);

#define MOE_SWEEP_HEAT_MAX 64

/* One (case, backend, stage) record. */
typedef struct {
    char stage[40];              /* "e2e" or an ops entry */
    char backend[16];
    moe_verdict verdict;
    moe_exact_class cls;
    const char *tolerance;       /* row id, or NULL */
    const char *bound;           /* formula, or NULL */
    char reason[320];
    const char *rules[8];        /* refused: the registry's rule ids */
    int nrules;
    int has_metrics;
    moe_cmp_metrics m;
    int calls;                   /* replay: calls aggregated */
    int stagewise;               /* e2e of a backend whose GEMMs reorder sums: the verdict is the
                                    replay's (every stage within its row); the metrics are the
                                    difference from the oracle, reported, not bounded */
    int64_t cols;                /* for first-mismatch indices [row, col] */
    /* BOUNDED e2e: max share per (expert, token block), histogram */
    int heat_rows, heat_cols, heat_block;
    float *heat;                 /* heat_rows * heat_cols, malloc'd */
    int64_t hist[5];             /* share in [0, 1/8), [1/8, 1/4), [1/4, 1/2), [1/2, 1], > 1 */
    double time_ms;
} moe_sweep_record;

typedef struct {
    const char *backends[8];     /* requested backend names */
    int nbackends;
    /* tests: run this table instead, under the tolerance rows of backend
     * inject_as (e.g. a deliberately wrong "cuda-conform" stage) */
    const moe_ops *inject;
    const char *inject_as;
    /* tests: with inject, the fused path of inject_as (fused_run.h) runs
     * this runner instead; without it an injected run has no fused records */
    moe_fused_runner inject_fused;
} moe_sweep_options;

/* Runs one case on every requested backend; *recs (malloc'd, *nrec of
 * them) gets its records. Only internal failures return non-OK. */
moe_status moe_sweep_run_case(const moe_sweep_case *c, const moe_sweep_options *o, moe_sweep_record **recs,
                              int *nrec);
void moe_sweep_records_free(moe_sweep_record *recs, int n);

/* One JSON Lines record (reports/SCHEMA.md), newline included; timings
 * only when with_time (the determinism check drops them). */
void moe_sweep_write_record(FILE *f, const moe_sweep_case *c, const moe_sweep_record *r, int with_time);

/* Data for DeepEP-LL's own per-128 cast: every 128-channel group gets
 * amax 1.75 = 448 * 2^-8 (the others clamped to |x| <= 1.5), where the LL
 * cast and the scheme's per-128 rule give the same bytes and scales. */
void moe_sweep_matched_groups(float *f, int64_t n);

/* Frees the calling thread's cached weights (call from every thread that
 * ran cases, at the end). */
void moe_sweep_cache_release(void);

#ifdef __cplusplus
}
#endif

#endif
