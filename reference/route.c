#include <stdlib.h>
#include "elem.h"
#include "math.h"
#include "moe/route.h"
#include "route_row.h"
#include "stage_checks.h"

const char *moe_route_method_name(moe_route_method m)
{
    static const char *const n[MOE_ROUTE_COUNT] = {"softmax_topk", "sigmoid_topk", "grouped_topk", "llama4_top1"};
    return (unsigned)m < MOE_ROUTE_COUNT ? n[m] : "unknown";
}

static int finite(float x) { return moe_route_finite(x); }

static moe_status check(const moe_tensor *logits, const moe_route_params *p, const moe_tensor *ids,
                        const moe_tensor *w)
{
    moe_status s = moe_s_expect_storage(logits, "logits", 2);
    if (s != MOE_OK) return s;
    if (!p) return moe_fail(MOE_ERR_NULL, "params: must not be NULL");
    int64_t M = logits->shape[0], E = logits->shape[1];
    if ((unsigned)p->method >= MOE_ROUTE_COUNT)
        return moe_fail(MOE_ERR_INVALID_ARG, "method %d: not a moe_route_method", (int)p->method);
    if (E <= 0) return moe_fail(MOE_ERR_SHAPE, "logits: E = %lld, need at least one expert", (long long)E);
    if (p->topk <= 0 || p->topk > E)
        return moe_fail(MOE_ERR_INVALID_ARG, "topk %d: must be in [1, E = %lld]", p->topk, (long long)E);
    if (p->method == MOE_ROUTE_LLAMA4_TOP1 && p->topk != 1)
        return moe_fail(MOE_ERR_INVALID_ARG, "topk %d: llama4_top1 routes to exactly one expert", p->topk);
    if (!(p->routed_scaling_factor > 0.0f) || !finite(p->routed_scaling_factor))
        return moe_fail(MOE_ERR_INVALID_ARG, "routed_scaling_factor: must be finite and > 0");
    if (p->method == MOE_ROUTE_GROUPED_TOPK) {
        int G = p->num_expert_group;
        if (G <= 0 || E % G != 0 || E <= G)
            return moe_fail(MOE_ERR_INVALID_ARG, "num_expert_group %d: must divide E = %lld and be smaller", G,
                            (long long)E);
        if (p->topk_group <= 0 || p->topk_group > G)
            return moe_fail(MOE_ERR_INVALID_ARG, "topk_group %d: must be in [1, num_expert_group = %d]",
                            p->topk_group, G);
        if (p->topk > p->topk_group * (E / G))
            return moe_fail(MOE_ERR_INVALID_ARG, "topk %d: more than the %lld experts of the kept groups", p->topk,
                            (long long)(p->topk_group * (E / G)));
        if (p->correction_bias && E / G < 2)
            return moe_fail(MOE_ERR_INVALID_ARG, "num_expert_group %d: the top-2 group score needs 2 experts a group", G);
        if (p->score != MOE_SCORE_SOFTMAX && p->score != MOE_SCORE_SIGMOID)
            return moe_fail(MOE_ERR_INVALID_ARG, "score %d: not a moe_score_func", (int)p->score);
    }
    if (p->correction_bias) {
        if ((s = moe_tensor_expect(p->correction_bias, "correction_bias", MOE_F32, 1))) return s;
        if (p->correction_bias->shape[0] != E)
            return moe_fail(MOE_ERR_SHAPE, "correction_bias: %lld entries, E = %lld",
                            (long long)p->correction_bias->shape[0], (long long)E);
        const float *b = p->correction_bias->data;
        for (int64_t e = 0; e < E; e++)
            if (!finite(b[e])) return moe_fail(MOE_ERR_INVALID_ARG, "correction_bias[%lld]: must be finite", (long long)e);
    }
    if ((s = moe_tensor_expect(ids, "topk_ids", MOE_I32, 2)) || (s = moe_tensor_expect(w, "topk_weights", MOE_F32, 2)))
        return s;
    if (ids->shape[0] != M || ids->shape[1] != p->topk || w->shape[0] != M || w->shape[1] != p->topk)
        return moe_fail(MOE_ERR_SHAPE, "topk_ids, topk_weights: must both be [M = %lld, topk = %d]", (long long)M,
                        p->topk);
    return MOE_OK;
}

/* One token with the CPU backend's plug-ins (route_row.h): the steps of
 * moe_route_row_ref, with the scores and the top-k search replaceable. */
void moe_route_row(const moe_route_params *p, const float *x, int E, float *prob, float *sel, float *gscore,
                   unsigned char *ok, int32_t *ids, float *w, moe_route_scores_fn score_fn, moe_route_topk_fn topk_fn)
{
    const float *bias = p->correction_bias ? p->correction_bias->data : NULL;
    int k = p->topk;
    for (int e = 0; e < E; e++) ok[e] = 1;
    if (p->method == MOE_ROUTE_LLAMA4_TOP1) {
        moe_route_llama4(x, E, sel, ok, ids, w);
    } else {
        unsigned char gok[1024];
        score_fn(x, E, moe_route_score_of(p), prob, sel);
        moe_route_select_values(p, bias, prob, E, sel, gscore, gok, ok);
        if (topk_fn && topk_fn(sel, ok, E, k, ids, gscore)) { /* gscore is free again: k values */
            for (int j = 0; j < k; j++) w[j] = prob[ids[j]];
        } else {
            moe_route_topk_walk(sel, prob, ok, E, k, ids, w);
        }
    }
    moe_route_weights_finish(p, w);
}

moe_status moe_ref_check_route(const moe_tensor *logits, const moe_route_params *p, const moe_tensor *topk_ids,
                               const moe_tensor *topk_weights)
{
    moe_status s = check(logits, p, topk_ids, topk_weights);
    if (s != MOE_OK) return s;
    if (p->method == MOE_ROUTE_GROUPED_TOPK && p->num_expert_group > 1024)
        return moe_fail(MOE_ERR_UNSUPPORTED, "num_expert_group %d: at most 1024", p->num_expert_group);
    return MOE_OK;
}

moe_status moe_ref_route(const moe_tensor *logits, const moe_route_params *p, moe_tensor *topk_ids,
                         moe_tensor *topk_weights)
{
    moe_status s = moe_ref_check_route(logits, p, topk_ids, topk_weights);
    if (s != MOE_OK) return s;
    int64_t M = logits->shape[0];
    int E = (int)logits->shape[1];
    const float *bias = p->correction_bias ? p->correction_bias->data : NULL;
    int failed = 0;
#pragma omp parallel
    {
        float *buf = malloc(sizeof(float) * (size_t)E * 4);
        unsigned char *ok = malloc((size_t)E), gok[1024];
        if (!buf || !ok) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (int64_t t = 0; t < M; t++) {
            if (!buf || !ok) continue;
            float *x = buf + 3 * (size_t)E;
            for (int e = 0; e < E; e++) x[e] = moe_s_load(logits->dtype, logits->data, t * E + e);
            moe_route_row_ref(p, bias, x, E, buf, buf + E, buf + 2 * (size_t)E, ok, gok,
                              (int32_t *)topk_ids->data + t * p->topk, (float *)topk_weights->data + t * p->topk);
        }
        free(buf);
        free(ok);
    }
    if (failed) return moe_fail(MOE_ERR_NOMEM, "route: per-thread buffers");
    return MOE_OK;
}
