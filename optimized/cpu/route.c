/* CPU backend: route. Tokens in parallel (static chunks), one per-thread
 * work buffer. Per token it runs the reference's own moe_route_row
 * (reference/route_row.h) with two plug-ins that give the same bits, so the
 * arithmetic is reference/route.c's, in its order: scores with the canonical math of reference/math.h, the biased
 * selection values, the group scores, renormalization and scaling. The
 * selection differs only in how it is found: the reference takes the
 * argmax of the remaining experts k times (ties to the lower id); here one
 * pass keeps the k best in a sorted list, inserting an expert only when it
 * is strictly greater than the list entry it passes, which is the same
 * order on finite values. Selection values can only be NaN for
 * llama4_top1 (logits taken as they are; softmax and sigmoid scores are
 * made finite, the bias is finite), which keeps the reference's argmax; a
 * NaN found anyway sends the token to the reference's k-pass walk. */
#include <omp.h>
#include <stdlib.h>
#include "cpu.h"
#include "cpu_internal.h"
#include "cpu_vmath.h"
#include "math.h"
#include "route_row.h"
#include "stage_checks.h"

static int finite(float x) { return x - x == 0.0f; }

/* reference/route.c's scores; the exponentials four lanes at a time
 * (cpu_vmath.h, the reference's bits), the sum in expert order. t: E
 * floats of scratch. */
static void scores(const float *x, int E, moe_score_func f, float *p, float *t)
{
    int e4 = E / 4 * 4;
    if (f == MOE_SCORE_SIGMOID) {
        for (int e = 0; e < e4; e += 4) cpu_vstore(p + e, cpu_vsigmoidf(cpu_vload(x + e)));
        for (int e = e4; e < E; e++) p[e] = moe_sigmoidf(x[e]);
    } else {
        /* the reference's "x[e] > m || m != m": a NaN m takes the next
         * value whatever it is, a number m only a larger one */
        float m = x[0];
        int e0 = 1;
        while (e0 < E && m != m) m = x[e0++];
        for (int e = e0; e < E; e++) m = x[e] > m ? x[e] : m;
        for (int e = 0; e < E; e++) t[e] = x[e] - m;
        for (int e = 0; e < e4; e += 4) cpu_vstore(p + e, cpu_vexpf(cpu_vload(t + e)));
        for (int e = e4; e < E; e++) p[e] = moe_expf(t[e]);
        float sum = 0.0f;
        for (int e = 0; e < E; e++) sum = sum + p[e];
        float r = 1.0f / sum;
        for (int e = 0; e < E; e++) p[e] = p[e] * r;
    }
    for (int e = 0; e < E; e++)
        if (!finite(p[e])) p[e] = 0.0f;
}

/* The k largest allowed sel values, descending, ties to the lower id, for
 * non-NaN sel. Returns 0 (nothing written) if a value is NaN (softmax and
 * sigmoid scores are made finite and the bias is finite, so it does not
 * happen; the reference's walk would then decide). vals: k floats. */
static int topk_insert(const float *sel, const unsigned char *ok, int E, int k, int32_t *ids, float *vals)
{
    int nan = 0, e4 = E / 4 * 4;
    cpu_v4i n4 = {0, 0, 0, 0};
    for (int e = 0; e < e4; e += 4) {
        cpu_v4f v = cpu_vload(sel + e);
        n4 |= v != v;
    }
    nan = (n4[0] | n4[1] | n4[2] | n4[3]) != 0;
    for (int e = e4; e < E; e++) nan |= sel[e] != sel[e];
    if (nan) return 0;
    int n = 0;
    for (int e = 0; e < E; e++) {
        float v = sel[e];
        if (!ok[e] || (n == k && !(v > vals[k - 1]))) continue;
        int i = n < k ? n++ : k - 1;
        while (i > 0 && v > vals[i - 1]) {
            ids[i] = ids[i - 1];
            vals[i] = vals[i - 1];
            i--;
        }
        ids[i] = e;
        vals[i] = v;
    }
    return n == k;
}

moe_status moe_cpu_route(const moe_tensor *logits, const moe_route_params *p, moe_tensor *topk_ids, moe_tensor *topk_weights)
{
    moe_status s = moe_ref_check_route(logits, p, topk_ids, topk_weights);
    if (s != MOE_OK) return s;
    int64_t M = logits->shape[0];
    int E = (int)logits->shape[1];
    int failed = 0;
#pragma omp parallel if (M * E >= CPU_PAR_MIN / 4)
    {
        float *buf = malloc(sizeof(float) * (size_t)E * 4);
        unsigned char *ok = malloc((size_t)E);
        if (!buf || !ok) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (int64_t t = 0; t < M; t++) {
            if (!buf || !ok) continue;
            float *x = buf + 3 * (size_t)E;
            cpu_load_row(logits->dtype, logits->data, t * E, E, x);
            moe_route_row(p, x, E, buf, buf + E, buf + 2 * (size_t)E, ok, (int32_t *)topk_ids->data + t * p->topk,
                          (float *)topk_weights->data + t * p->topk, scores, topk_insert);
        }
        free(buf);
        free(ok);
    }
    if (failed) return moe_fail(MOE_ERR_NOMEM, "route: per-thread buffers");
    return MOE_OK;
}
