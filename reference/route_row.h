/* One token's routing (reference/route.c), shared with the CPU backend,
 * which plugs in vectorized scores and a one-pass top-k that give the
 * same bits: scores(x, E, f, prob, scratch) writes the E scores (scratch:
 * E floats it may use); topk(sel, ok, E, k, ids, vals) writes the k best
 * allowed selection values' ids in the reference's order (descending,
 * ties to the lower id) and returns 1, or returns 0 to leave the choice to
 * the reference's walk (NaN selection values); NULL = the walk. */
#ifndef MOE_REFERENCE_ROUTE_ROW_H
#define MOE_REFERENCE_ROUTE_ROW_H

#include <stdint.h>
#include "moe/route.h"

typedef void (*moe_route_scores_fn)(const float *x, int E, moe_score_func f, float *prob, float *scratch);
typedef int (*moe_route_topk_fn)(const float *sel, const unsigned char *ok, int E, int k, int32_t *ids, float *vals);

/* prob, sel, gscore: E floats each; ok: E bytes; ids, w: k entries. */
void moe_route_row(const moe_route_params *p, const float *x, int E, float *prob, float *sel, float *gscore,
                   unsigned char *ok, int32_t *ids, float *w, moe_route_scores_fn scores, moe_route_topk_fn topk);

#endif
