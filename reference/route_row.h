/* One token's routing (reference/route.c), shared with the CPU backend and
 * the CUDA conformance build.
 *
 * moe_route_row_ref is the reference's token, MOE_HD so the CUDA build
 * runs the same code per token (one thread per token) and gets the same
 * bits. It is assembled from the steps below, each MOE_HD: the scores, the
 * selection values (bias, group mask), the top-k walk, the weights'
 * renormalization and scaling.
 *
 * moe_route_row is the same token with two plug-ins, used by the CPU
 * backend, which plugs in vectorized scores and a one-pass top-k that give
 * the same bits: scores(x, E, f, prob, scratch) writes the E scores
 * (scratch: E floats it may use); topk(sel, ok, E, k, ids, vals) writes
 * the k best allowed selection values' ids in the reference's order
 * (descending, ties to the lower id) and returns 1, or returns 0 to leave
 * the choice to the reference's walk (NaN selection values); NULL = the
 * walk.
 *
 * The steps take the correction bias as a plain pointer (bias data, or
 * NULL) and never read p->correction_bias, so a device copy of the params
 * works with the bias in device memory. */
#ifndef MOE_REFERENCE_ROUTE_ROW_H
#define MOE_REFERENCE_ROUTE_ROW_H

#include <stdint.h>
#include "math.h"
#include "moe/portable.h"
#include "moe/route.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*moe_route_scores_fn)(const float *x, int E, moe_score_func f, float *prob, float *scratch);
typedef int (*moe_route_topk_fn)(const float *sel, const unsigned char *ok, int E, int k, int32_t *ids, float *vals);

/* prob, sel, gscore: E floats each; ok: E bytes; ids, w: k entries. */
void moe_route_row(const moe_route_params *p, const float *x, int E, float *prob, float *sel, float *gscore,
                   unsigned char *ok, int32_t *ids, float *w, moe_route_scores_fn scores, moe_route_topk_fn topk);

#ifdef __cplusplus
}
#endif

MOE_HD MOE_INLINE int moe_route_finite(float x) { return x - x == 0.0f; }

/* Index of the largest val[e] among allowed, not yet taken experts; ties to
 * the lower id; -1 if none is left. NaN never wins. */
MOE_HD MOE_INLINE int moe_route_argmax(const float *val, const unsigned char *ok, int E)
{
    int best = -1;
    for (int e = 0; e < E; e++)
        if (ok[e] && (best < 0 || val[e] > val[best])) best = e;
    return best;
}

/* The reference's scores: sigmoid, or softmax with max subtraction and a
 * multiply by 1/sum (the sum in expert order); non-finite scores become 0. */
MOE_HD MOE_INLINE void moe_route_scores_ref(const float *x, int E, moe_score_func f, float *p)
{
    if (f == MOE_SCORE_SIGMOID) {
        for (int e = 0; e < E; e++) p[e] = moe_sigmoidf(x[e]);
    } else {
        float m = x[0];
        for (int e = 1; e < E; e++)
            if (x[e] > m || m != m) m = x[e];
        float sum = 0.0f;
        for (int e = 0; e < E; e++) {
            p[e] = moe_expf(x[e] - m);
            sum = sum + p[e];
        }
        float r = 1.0f / sum;
        for (int e = 0; e < E; e++) p[e] = p[e] * r;
    }
    for (int e = 0; e < E; e++)
        if (!moe_route_finite(p[e])) p[e] = 0.0f;
}

MOE_HD MOE_INLINE moe_score_func moe_route_score_of(const moe_route_params *p)
{
    return p->method == MOE_ROUTE_SIGMOID_TOPK ? MOE_SCORE_SIGMOID
           : p->method == MOE_ROUTE_GROUPED_TOPK ? p->score
                                                 : MOE_SCORE_SOFTMAX;
}

/* Llama-4 top-1: the largest logit (every logit NaN: expert 0), weight
 * sigmoid(logit), 0 if not finite. sel: E floats; ok all 1. */
MOE_HD MOE_INLINE void moe_route_llama4(const float *x, int E, float *sel, const unsigned char *ok, int32_t *ids,
                                        float *w)
{
    for (int e = 0; e < E; e++) sel[e] = x[e];
    int best = moe_route_argmax(sel, ok, E);
    if (best < 0) best = 0; /* every logit NaN */
    ids[0] = best;
    w[0] = moe_sigmoidf(x[best]);
    if (!moe_route_finite(w[0])) w[0] = 0.0f;
}

/* Selection values sel = prob (+ bias); for grouped top-k the group scores
 * (gscore, G floats) choose topk_group groups and ok keeps only their
 * experts. gok: G bytes of scratch (G <= 1024, checked). */
MOE_HD MOE_INLINE void moe_route_select_values(const moe_route_params *p, const float *bias, const float *prob, int E,
                                               float *sel, float *gscore, unsigned char *gok, unsigned char *ok)
{
    for (int e = 0; e < E; e++) sel[e] = bias ? prob[e] + bias[e] : prob[e];
    if (p->method != MOE_ROUTE_GROUPED_TOPK) return;
    int G = p->num_expert_group, per = E / G;
    for (int g = 0; g < G; g++) {
        const float *s = sel + g * per;
        int i1 = 0;
        for (int i = 1; i < per; i++)
            if (s[i] > s[i1]) i1 = i;
        if (bias) { /* DeepSeek-V3: sum of the group's top-2 biased scores */
            int i2 = -1;
            for (int i = 0; i < per; i++)
                if (i != i1 && (i2 < 0 || s[i] > s[i2])) i2 = i;
            gscore[g] = s[i1] + s[i2];
        } else {
            gscore[g] = s[i1];
        }
    }
    /* gok: groups still to choose from; a kept group is one taken (gok 0) */
    for (int g = 0; g < G; g++) gok[g] = 1;
    for (int r = 0; r < p->topk_group; r++) {
        int g = moe_route_argmax(gscore, gok, G);
        gok[g] = 0;
    }
    for (int e = 0; e < E; e++) ok[e] = !gok[e / per];
}

/* The reference's top-k: the argmax of the allowed, untaken experts k
 * times; weights the unbiased scores. */
MOE_HD MOE_INLINE void moe_route_topk_walk(const float *sel, const float *prob, unsigned char *ok, int E, int k,
                                           int32_t *ids, float *w)
{
    for (int j = 0; j < k; j++) {
        int best = moe_route_argmax(sel, ok, E);
        if (best < 0) { /* only possible with NaN selection values: take the lowest free id */
            for (best = 0; !ok[best]; best++) {}
        }
        ids[j] = best;
        w[j] = prob[best];
        ok[best] = 0;
    }
}

/* renormalize (sum in slot order; divide by 1 if not > 0), then scale. */
MOE_HD MOE_INLINE void moe_route_weights_finish(const moe_route_params *p, float *w)
{
    int k = p->topk;
    if (p->renormalize) {
        float sum = 0.0f;
        for (int j = 0; j < k; j++) sum = sum + w[j];
        float d = sum > 0.0f ? sum : 1.0f;
        for (int j = 0; j < k; j++) w[j] = w[j] / d;
    }
    if (p->routed_scaling_factor != 1.0f)
        for (int j = 0; j < k; j++) w[j] = w[j] * p->routed_scaling_factor;
}

/* The reference's token. x: logits as f32; bias: correction bias data or
 * NULL; prob, sel, gscore: E floats each; ok: E bytes; gok: G bytes
 * (grouped top-k only); ids, w: k entries. */
MOE_HD MOE_INLINE void moe_route_row_ref(const moe_route_params *p, const float *bias, const float *x, int E,
                                         float *prob, float *sel, float *gscore, unsigned char *ok,
                                         unsigned char *gok, int32_t *ids, float *w)
{
    for (int e = 0; e < E; e++) ok[e] = 1;
    if (p->method == MOE_ROUTE_LLAMA4_TOP1) {
        moe_route_llama4(x, E, sel, ok, ids, w);
    } else {
        moe_route_scores_ref(x, E, moe_route_score_of(p), prob);
        moe_route_select_values(p, bias, prob, E, sel, gscore, gok, ok);
        moe_route_topk_walk(sel, prob, ok, E, p->topk, ids, w);
    }
    moe_route_weights_finish(p, w);
}

#endif
