/* CPU backend: the activation between the GEMMs. Rows in parallel (static
 * chunks); each row's gate and up halves are widened to f32 once, the
 * activation runs over the row with the choice of formula hoisted out of
 * the element loop (silu and sigmoid four lanes at a time, cpu_vmath.h),
 * and the row is rounded to the output dtype once. Every
 * element is reference/act.c's expression, in its order, with the
 * canonical math of reference/math.h; the conversions are cpu_internal.h's
 * (the reference's codes). */
#include <omp.h>
#include <stdlib.h>
#include "cpu.h"
#include "cpu_internal.h"
#include "cpu_vmath.h"
#include "math.h"
#include "stage_checks.h"

static float clampf(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }

/* y = silu(x) / sigmoid(x) over a row: four lanes at a time (cpu_vmath.h,
 * the reference's bits), the tail by the scalar functions. */
static void silu_row(const float *x, float *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) cpu_vstore(y + i, cpu_vsiluf(cpu_vload(x + i)));
    for (; i < n; i++) y[i] = moe_siluf(x[i]);
}

static void sigmoid_row(const float *x, float *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) cpu_vstore(y + i, cpu_vsigmoidf(cpu_vload(x + i)));
    for (; i < n; i++) y[i] = moe_sigmoidf(x[i]);
}

/* v[i] = act(g[i]) * u[i] (gated) or act(g[i]) (u NULL), over one row;
 * t is scratch of I floats. */
static void act_row(const moe_act_params *p, moe_dtype xd, int e, const float *va, const float *vb, const float *vl,
                    const float *g, const float *u, float *v, float *t, int64_t I)
{
    switch (p->act) {
    case MOE_ACT_RELU2:
        for (int64_t i = 0; i < I; i++) {
            float a = g[i] > 0.0f || g[i] != g[i] ? g[i] : 0.0f; /* NaN stays NaN, as the reference */
            v[i] = a * a;
        }
        return;
    case MOE_ACT_SILU_NOMUL:
        silu_row(g, v, I);
        return;
    case MOE_ACT_GELU_NOMUL:
        for (int64_t i = 0; i < I; i++) v[i] = moe_gelu_erff(g[i]);
        return;
    case MOE_ACT_IDENTITY:
        for (int64_t i = 0; i < I; i++) v[i] = g[i];
        return;
    case MOE_ACT_SWIGLUOAI: { /* (u' + 1) * (g' * sigmoid(g' * alpha)) */
        float L = p->limit, al = p->alpha;
        for (int64_t i = 0; i < I; i++) {
            float gc = g[i] < L ? g[i] : L;
            if (g[i] != g[i]) gc = g[i];
            t[i] = gc * al;
        }
        sigmoid_row(t, v, I);
        for (int64_t i = 0; i < I; i++) {
            float gc = g[i] < L ? g[i] : L;
            if (g[i] != g[i]) gc = g[i];
            float uc = clampf(u[i], -L, L);
            v[i] = (uc + 1.0f) * (gc * v[i]);
        }
        return;
    }
    case MOE_ACT_SWIGLU_CLAMP: { /* silu(g') * clamp(u) */
        float L = p->limit;
        for (int64_t i = 0; i < I; i++) {
            float gc = g[i] < L ? g[i] : L;
            if (g[i] != g[i]) gc = g[i];
            t[i] = gc;
        }
        silu_row(t, v, I);
        for (int64_t i = 0; i < I; i++) v[i] = v[i] * clampf(u[i], -L, L);
        return;
    }
    case MOE_ACT_SWIGLU_BIAS: { /* g' * sigmoid(alpha * g') * (clamp(u) + beta) */
        float al = va ? va[e] : 1.0f, be = vb ? vb[e] : 0.0f, L = vl ? vl[e] : 1.0f / 0.0f;
        for (int64_t i = 0; i < I; i++) {
            float gc = g[i] < L ? g[i] : L;
            if (g[i] != g[i]) gc = g[i];
            t[i] = al * gc;
        }
        sigmoid_row(t, v, I);
        for (int64_t i = 0; i < I; i++) {
            float gc = g[i] < L ? g[i] : L;
            if (g[i] != g[i]) gc = g[i];
            v[i] = gc * v[i] * (clampf(u[i], -L, L) + be);
        }
        return;
    }
    default: { /* silu, gelu, gelu_tanh: act(g), optionally rounded, times u */
        int rnd = p->round_act_to_storage;
        if (p->act == MOE_ACT_SILU)
            silu_row(g, v, I);
        else if (p->act == MOE_ACT_GELU)
            for (int64_t i = 0; i < I; i++) v[i] = moe_gelu_erff(g[i]);
        else
            for (int64_t i = 0; i < I; i++) v[i] = moe_gelu_tanhf(g[i]);
        if (rnd)
            for (int64_t i = 0; i < I; i++) v[i] = cpu_round_to(xd, v[i]);
        for (int64_t i = 0; i < I; i++) v[i] = v[i] * u[i];
        return;
    }
    }
}

moe_status moe_cpu_activation(const moe_tensor *x, const moe_tensor *row_expert, const moe_act_params *p, moe_tensor *out)
{
    moe_status s = moe_ref_check_activation(x, row_expert, p, out);
    if (s != MOE_OK) return s;
    int gated = moe_act_is_gated(p->act);
    int64_t P = x->shape[0], I = out->shape[1];
    const float *va = p->swiglu_alpha ? p->swiglu_alpha->data : NULL;
    const float *vb = p->swiglu_beta ? p->swiglu_beta->data : NULL;
    const float *vl = p->swiglu_limit ? p->swiglu_limit->data : NULL;
    const int32_t *re = row_expert ? row_expert->data : NULL;
    moe_dtype xd = x->dtype, od = out->dtype;
    if (cpu_overlap(out->data, out->nbytes, x->data, x->nbytes)) /* in place: the serial order matters */
        return moe_ref_activation(x, row_expert, p, out);
    int failed = 0;
#pragma omp parallel if (P * I >= CPU_PAR_MIN / 4)
    {
        float *buf = malloc((size_t)(I ? I : 1) * 4 * sizeof *buf);
        if (!buf) {
#pragma omp atomic write
            failed = 1;
        }
        float *g = buf, *u = buf + I, *v = buf + 2 * I, *t = buf + 3 * I;
#pragma omp for schedule(static)
        for (int64_t r = 0; r < P; r++) {
            if (!buf) continue;
            int e = re ? re[r] : 0;
            if (e < 0) {
                for (int64_t i = 0; i < I; i++) v[i] = 0.0f;
            } else if (!gated) {
                cpu_load_row(xd, x->data, r * I, I, g);
                act_row(p, xd, e, va, vb, vl, g, NULL, v, t, I);
            } else {
                int64_t base = r * 2 * I;
                if (p->layout == MOE_LAYOUT_GATE_UP) {
                    cpu_load_row(xd, x->data, base, I, g);
                    cpu_load_row(xd, x->data, base + I, I, u);
                } else if (p->layout == MOE_LAYOUT_UP_GATE) {
                    cpu_load_row(xd, x->data, base, I, u);
                    cpu_load_row(xd, x->data, base + I, I, g);
                } else {
                    for (int64_t i = 0; i < I; i++) {
                        g[i] = cpu_load(xd, x->data, base + 2 * i);
                        u[i] = cpu_load(xd, x->data, base + 2 * i + 1);
                    }
                }
                act_row(p, xd, e, va, vb, vl, g, u, v, t, I);
            }
            cpu_store_row(od, out->data, r * I, I, v);
        }
        free(buf);
    }
    if (failed) return moe_fail(MOE_ERR_NOMEM, "activation: per-thread row buffers");
    return MOE_OK;
}
