/* The tolerance table (DESIGN section 5): one row per stage x backend x
 * scheme with its exactness class, the bound formula (BOUNDED) and the
 * provenance of the class. The sweep, the replay and the golden verify
 * take every verdict's class from here; nothing else picks a tolerance.
 *
 * stage: an ops-table entry name ("route", "grouped_gemm", ...) or
 * "e2e/<comparison class>" for a modular-kernel forward against
 * moe_ref_forward (the classes of combos/sweep_class.c); a row for "e2e/any"
 * matches every e2e class and holds the backend to the same pair run on
 * the reference backend instead (EXACT). backend and scheme may be "*". Rows are searched in order; the first match wins, so
 * specific rows come before wildcards. */
#ifndef MOE_TOLERANCE_H
#define MOE_TOLERANCE_H

#include "moe/compare.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *id;          /* stable id, printed in every record */
    const char *stage, *backend, *scheme;
    moe_exact_class cls;
    const char *bound;       /* the formula (BOUNDED), "" otherwise */
    const char *provenance;  /* why this class: the anchor or the derivation */
} moe_tolerance_row;

int moe_tolerance_count(void);
const moe_tolerance_row *moe_tolerance_get(int i);

/* The first row matching (stage, backend, scheme), or NULL with
 * MOE_ERR_INVALID_ARG's message naming the triple: a stage without a row
 * is a harness defect, never a silent EXACT. */
const moe_tolerance_row *moe_tolerance_find(const char *stage, const char *backend, const char *scheme);

#ifdef __cplusplus
}
#endif

#endif
