/* One output element of the activation stage (reference/act.c), MOE_HD so
 * the CUDA conformance build computes each element with the reference's
 * own expressions (one thread per element there, a row loop here). */
#ifndef MOE_REFERENCE_ACT_CORE_H
#define MOE_REFERENCE_ACT_CORE_H

#include <stdint.h>
#include "elem.h"
#include "math.h"
#include "moe/act.h"
#include "moe/portable.h"

MOE_HD MOE_INLINE float moe_act_clampf(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }

/* A gated activation of one (gate, up) pair, as loaded from a row of
 * dtype xd (xd only matters for round_act_to_storage). Shared by
 * moe_act_elem and the fused GEMM epilogue of the fast CUDA path. Always
 * inlined: a NaN's sign out of these products depends on which operand
 * the compiler puts first, and out of line (the sanitizer build did not
 * inline it) the reference wrote +NaN where golden/ holds -NaN (the case
 * edge.activation.swigluoai.nonfinite); inlined, every build computes
 * what it computed before the function was split out. */
#if defined(__GNUC__) || defined(__clang__)
#define MOE_ACT_ALWAYS_INLINE __attribute__((always_inline))
#else
#define MOE_ACT_ALWAYS_INLINE
#endif
/* swigluoai of one pair (gpt-oss), alone: the fused GEMM epilogue calls it
 * written out, as it does silu (optimized/cuda/NOTES.md v21) */
/* the gate of the clamped gated activations: min(g, limit), a NaN gate
 * stays NaN */
MOE_HD MOE_INLINE float moe_act_gate_limit(float g, float limit)
{
    float gc = g < limit ? g : limit;
    if (g != g) gc = g;
    return gc;
}

MOE_HD MOE_INLINE MOE_ACT_ALWAYS_INLINE float moe_act_swigluoai(float g, float u, float alpha, float limit)
{
    float gc = moe_act_gate_limit(g, limit);
    float uc = moe_act_clampf(u, -limit, limit);
    return (uc + 1.0f) * (gc * moe_sigmoidf(gc * alpha));
}

MOE_HD MOE_INLINE MOE_ACT_ALWAYS_INLINE float moe_act_gated(const moe_act_params *p, moe_dtype xd, float g, float u, int e, const float *va,
                                      const float *vb, const float *vl)
{
    float v, a;
    switch (p->act) {
    case MOE_ACT_SWIGLUOAI: v = moe_act_swigluoai(g, u, p->alpha, p->limit); break;
    case MOE_ACT_SWIGLU_CLAMP: {
        float gc = moe_act_gate_limit(g, p->limit);
        v = moe_siluf(gc) * moe_act_clampf(u, -p->limit, p->limit);
        break;
    }
    case MOE_ACT_SWIGLU_BIAS: {
        float al = va ? va[e] : 1.0f, be = vb ? vb[e] : 0.0f, L = vl ? vl[e] : MOE_M_INF;
        float gc = moe_act_gate_limit(g, L);
        v = gc * moe_sigmoidf(al * gc) * (moe_act_clampf(u, -L, L) + be);
        break;
    }
    default:
        a = p->act == MOE_ACT_SILU ? moe_siluf(g) : p->act == MOE_ACT_GELU ? moe_gelu_erff(g) : moe_gelu_tanhf(g);
        if (p->round_act_to_storage) a = moe_s_round_to(xd, a);
        v = a * u;
        break;
    }
    return v;
}

/* out[r, i] before its store. x: the input rows (dtype xd); gated: p's
 * activation reads 2I values a row; e: the row's local expert (>= 0; a -1
 * row is zeros, the caller's case); va, vb, vl: the swiglu_bias vectors'
 * data or NULL. Only p's scalar fields are read, never its tensors. */
MOE_HD MOE_INLINE float moe_act_elem(const moe_act_params *p, int gated, moe_dtype xd, const void *x, int64_t r,
                                     int64_t i, int64_t I, int e, const float *va, const float *vb, const float *vl)
{
    if (!gated) {
        float a = moe_s_load(xd, x, r * I + i), v;
        switch (p->act) {
        /* torch's relu keeps NaN (relu(x)^2 in vLLM and TensorRT-LLM) */
        case MOE_ACT_RELU2: a = a > 0.0f || a != a ? a : 0.0f, v = a * a; break;
        case MOE_ACT_SILU_NOMUL: v = moe_siluf(a); break;
        case MOE_ACT_GELU_NOMUL: v = moe_gelu_erff(a); break;
        default: v = a; break; /* identity */
        }
        return v;
    }
    int64_t gi, ui, base = r * 2 * I;
    if (p->layout == MOE_LAYOUT_GATE_UP) gi = base + i, ui = base + I + i;
    else if (p->layout == MOE_LAYOUT_UP_GATE) ui = base + i, gi = base + I + i;
    else gi = base + 2 * i, ui = base + 2 * i + 1;
    return moe_act_gated(p, xd, moe_s_load(xd, x, gi), moe_s_load(xd, x, ui), e, va, vb, vl);
}

#endif
