/* The reference quantize / dequantize stage: argument checks, then one loop
 * over scale groups that asks quant_rules.c for each group's scale and
 * converts the group's elements with the step and encoders of quant_core.h
 * (shared with the CUDA build; the format policies of format.h).
 * Single-threaded, fixed order: the bits depend on nothing but the input. */
#include <math.h>
#include <string.h>
#include "moe/format.h"
#include "quant_internal.h"
#include "stage_checks.h"

/* ---- elements ------------------------------------------------------------- */
static void put_elem(moe_dtype d, void *base, int64_t row_elems, int64_t idx_row,
                     int64_t col, float v)
{
    uint8_t *p = (uint8_t *)base;
    switch (d) {
    case MOE_F32: memcpy(p + (idx_row * row_elems + col) * 4, &v, 4); return;
    case MOE_BF16: {
        uint16_t c = moe_f32_to_bf16(v, MOE_POLICY_IEEE_RNE, NULL);
        memcpy(p + (idx_row * row_elems + col) * 2, &c, 2);
        return;
    }
    case MOE_F16: {
        uint16_t c = moe_f32_to_f16(v, MOE_POLICY_IEEE_RNE, NULL);
        memcpy(p + (idx_row * row_elems + col) * 2, &c, 2);
        return;
    }
    case MOE_E4M3:
    case MOE_I8:
        p[idx_row * row_elems + col] = moe_qc_encode(d, v);
        return;
    default: { /* packed E2M1 / I4: low nibble first, rows padded to a byte */
        uint8_t c = moe_qc_encode(d, v);
        uint8_t *b = p + idx_row * ((row_elems + 1) / 2) + col / 2;
        if (col & 1) *b = (uint8_t)((*b & 0x0F) | ((c & 0xF) << 4));
        else *b = (uint8_t)((*b & 0xF0) | (c & 0xF));
        return;
    }
    }
}

static float get_elem(moe_dtype d, const void *base, int64_t row_elems, int64_t idx_row,
                      int64_t col)
{
    const uint8_t *p = (const uint8_t *)base;
    uint16_t h;
    float f;
    switch (d) {
    case MOE_F32: memcpy(&f, p + (idx_row * row_elems + col) * 4, 4); return f;
    case MOE_BF16: memcpy(&h, p + (idx_row * row_elems + col) * 2, 2); return moe_bf16_to_f32(h);
    case MOE_F16: memcpy(&h, p + (idx_row * row_elems + col) * 2, 2); return moe_f16_to_f32(h);
    case MOE_E4M3:
    case MOE_I8: return moe_qc_decode(d, p[idx_row * row_elems + col]);
    default: {
        uint8_t byte = p[idx_row * ((row_elems + 1) / 2) + col / 2];
        return moe_qc_decode(d, (col & 1) ? (uint8_t)(byte >> 4) : (uint8_t)(byte & 0xF));
    }
    }
}

static float xval(const moe_tensor *x, int64_t row, int64_t col)
{
    return ((const float *)x->data)[row * x->shape[x->ndim - 1] + col];
}

/* ---- argument checks -------------------------------------------------------- */
static moe_status expect_shape(const moe_tensor *t, const char *arg, moe_dtype dt, int ndim,
                               const int64_t *shape)
{
    moe_status st = moe_tensor_expect_host(t, arg, dt, ndim);
    if (st != MOE_OK) return st;
    for (int i = 0; i < ndim; i++)
        if (t->shape[i] != shape[i])
            return moe_fail(MOE_ERR_SHAPE, "%s: shape[%d] = %lld, expected %lld", arg, i,
                            (long long)t->shape[i], (long long)shape[i]);
    return MOE_OK;
}

static moe_status check_positive(const moe_tensor *t, const char *arg)
{
    const float *v = (const float *)t->data;
    int64_t n = moe_tensor_numel(t);
    for (int64_t i = 0; i < n; i++)
        if (!(v[i] > 0.0f) || isinf(v[i]))
            return moe_fail(MOE_ERR_INVALID_ARG, "%s[%lld] = %g: scales must be finite and > 0",
                            arg, (long long)i, (double)v[i]);
    return MOE_OK;
}

/* Shared checks of the scale-side tensors. */
static moe_status check_scales(const moe_quant_spec *spec, const moe_quant_dims *d,
                               const moe_tensor *scale, const char *scale_arg,
                               const moe_tensor *global, const char *global_arg,
                               int global_required)
{
    moe_status st;
    if (d->has_scale) {
        if (!scale) return moe_fail(MOE_ERR_NULL, "%s: scheme has %s scales; must not be NULL",
                                    scale_arg, moe_scale_rule_name(spec->rule));
        st = expect_shape(scale, scale_arg, d->scale_dtype, d->scale_ndim, d->scale_shape);
        if (st != MOE_OK) return st;
    } else if (scale) {
        return moe_fail(MOE_ERR_INVALID_ARG, "%s: the spec has no scale; pass NULL", scale_arg);
    }
    if (d->has_global) {
        if (!global) {
            if (global_required)
                return moe_fail(MOE_ERR_NULL,
                                "%s: NVFP4 with a global scale needs it; must not be NULL",
                                global_arg);
            return MOE_OK;
        }
        return expect_shape(global, global_arg, MOE_F32, d->global_ndim, d->global_shape);
    }
    if (global)
        return moe_fail(MOE_ERR_INVALID_ARG,
                        "%s: only NVFP4 with a global scale has one; pass NULL", global_arg);
    return MOE_OK;
}

/* ---- quantize ------------------------------------------------------------------ */
static void group_stats(const moe_tensor *x, const moe_q_geom *g, int64_t b, int64_t r0,
                        int64_t r1, int64_t c0, int64_t c1, moe_q_stats *st)
{
    float ap = 0.0f, ai = 0.0f, mx = 0.0f, mn = 0.0f;
    int any = 0, nan = 0;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t c = c0; c < c1; c++) {
            float v = xval(x, b * g->R + r, c);
            if (isnan(v)) {
                nan = 1;
                continue;
            }
            float a = fabsf(v);
            if (a > ai) ai = a;
            if (!any || v > mx) mx = v;
            if (!any || v < mn) mn = v;
            any = 1;
        }
    ap = ai;
    if (nan) ap = mx = mn = moe_q_canon_nan(NAN, 0.0f);
    st->amax_prop = ap;
    st->amax_ign = ai;
    st->vmax = mx;
    st->vmin = mn;
}

void moe_q_store_scale(const moe_quant_spec *s, const moe_q_geom *g, moe_tensor *scale, int64_t b, int64_t sr,
                       int64_t sc, const moe_q_group *grp)
{
    int lane;
    int64_t i = moe_q_scale_index(s, g, b, sr, sc, &lane);
    if (s->layout == MOE_SF_UE8M0_PACK4) {
        uint32_t w;
        memcpy(&w, (uint8_t *)scale->data + i * 4, 4);
        w |= (uint32_t)grp->code << (8 * lane);
        memcpy((uint8_t *)scale->data + i * 4, &w, 4);
    } else if (s->scale_dtype == MOE_F32) {
        ((float *)scale->data)[i] = moe_q_canon_nan(grp->scale, 0.0f);
    } else {
        ((uint8_t *)scale->data)[i] = grp->code;
    }
}

moe_status moe_ref_check_quantize(const moe_quant_spec *spec, const moe_tensor *x,
                                  const moe_tensor *static_scale, const moe_tensor *q_out,
                                  const moe_tensor *scale_out, const moe_tensor *global_scale_out)
{
    moe_status st = moe_quant_spec_check(spec);
    if (st != MOE_OK) return st;
    st = moe_tensor_expect_host(x, "x", MOE_F32, -1);
    if (st != MOE_OK) return st;
    moe_q_geom g;
    moe_quant_dims d;
    if ((st = moe_q_geometry(spec, "x", x->ndim, x->shape, &g)) != MOE_OK) return st;
    if ((st = moe_quant_shapes(spec, x->ndim, x->shape, &d)) != MOE_OK) return st;
    if (!q_out) return moe_fail(MOE_ERR_NULL, "q_out: must not be NULL");
    if ((st = expect_shape(q_out, "q_out", d.q_dtype, d.q_ndim, d.q_shape)) != MOE_OK) return st;
    st = check_scales(spec, &d, scale_out, "scale_out", global_scale_out, "global_scale_out", 0);
    if (st != MOE_OK) return st;
    if (static_scale) {
        if (!spec->static_ok)
            return moe_fail(MOE_ERR_UNSUPPORTED,
                            "static_scale: rule %s computes its scales; pass NULL",
                            moe_scale_rule_name(spec->rule));
        if (spec->rule == MOE_RULE_NVFP4)
            st = expect_shape(static_scale, "static_scale", MOE_F32, d.global_ndim, d.global_shape);
        else
            st = expect_shape(static_scale, "static_scale", MOE_F32, d.scale_ndim, d.scale_shape);
        if (st == MOE_OK) st = check_positive(static_scale, "static_scale");
        if (st != MOE_OK) return st;
    }
    return MOE_OK;
}

moe_status moe_ref_quantize(const moe_quant_spec *spec, const moe_tensor *x,
                            const moe_tensor *static_scale, moe_tensor *q_out,
                            moe_tensor *scale_out, moe_tensor *global_scale_out)
{
    moe_status st = moe_ref_check_quantize(spec, x, static_scale, q_out, scale_out, global_scale_out);
    if (st != MOE_OK) return st;
    moe_q_geom g;
    moe_q_geometry(spec, "x", x->ndim, x->shape, &g);
    if (q_out->nbytes) memset(q_out->data, 0, q_out->nbytes);
    if (spec->gran == MOE_GRAN_NONE) { /* a plain cast under IEEE RNE */
        for (int64_t r = 0; r < g.B * g.R; r++)
            for (int64_t c = 0; c < g.K; c++)
                put_elem(spec->elem, q_out->data, g.K, r, c, xval(x, r, c));
        return MOE_OK;
    }
    if (scale_out->nbytes) memset(scale_out->data, 0, scale_out->nbytes); /* zero padding */
    const float *stat = static_scale ? (const float *)static_scale->data : NULL;
    for (int64_t b = 0; b < g.B; b++) {
        float gs = 1.0f;
        if (spec->use_global_scale) {
            if (stat) {
                gs = stat[b];
            } else {
                moe_q_stats t;
                group_stats(x, &g, b, 0, g.R, 0, g.K, &t);
                gs = moe_q_nvfp4_global(spec, t.amax_prop);
            }
            gs = moe_q_canon_nan(gs, 0.0f);
            if (global_scale_out) ((float *)global_scale_out->data)[b] = gs;
        }
        for (int64_t sr = 0; sr < g.SR; sr++)
            for (int64_t sc = 0; sc < g.SC; sc++) {
                int64_t r0 = sr * g.rh, c0 = sc * g.cw;
                int64_t r1 = r0 + g.rh < g.R ? r0 + g.rh : g.R;
                int64_t c1 = c0 + g.cw < g.K ? c0 + g.cw : g.K;
                moe_q_group grp;
                if (stat && spec->rule != MOE_RULE_NVFP4) {
                    moe_qc_rule_static(stat[(b * g.SR + sr) * g.SC + sc], &grp);
                } else {
                    moe_q_stats t;
                    group_stats(x, &g, b, r0, r1, c0, c1, &t);
                    moe_q_rule_dynamic(spec, &t, gs, &grp);
                }
                moe_q_store_scale(spec, &g, scale_out, b, sr, sc, &grp);
                for (int64_t r = r0; r < r1; r++)
                    for (int64_t c = c0; c < c1; c++) {
                        float v = moe_qc_step(spec, &grp, xval(x, b * g.R + r, c));
                        put_elem(spec->elem, q_out->data, g.K, b * g.R + r, c, v);
                    }
            }
    }
    return MOE_OK;
}

/* ---- dequantize ---------------------------------------------------------------- */
moe_status moe_ref_check_dequantize(const moe_quant_spec *spec, const moe_tensor *q,
                                    const moe_tensor *scale, const moe_tensor *global_scale,
                                    const moe_tensor *x_out)
{
    moe_status st = moe_quant_spec_check(spec);
    if (st != MOE_OK) return st;
    if (!q) return moe_fail(MOE_ERR_NULL, "q: must not be NULL");
    moe_q_geom g;
    moe_quant_dims d;
    if ((st = moe_q_geometry(spec, "q", q->ndim, q->shape, &g)) != MOE_OK) return st;
    if ((st = moe_quant_shapes(spec, q->ndim, q->shape, &d)) != MOE_OK) return st;
    if ((st = expect_shape(q, "q", d.q_dtype, d.q_ndim, d.q_shape)) != MOE_OK) return st;
    st = check_scales(spec, &d, scale, "scale", global_scale, "global_scale", 1);
    if (st != MOE_OK) return st;
    if (!x_out) return moe_fail(MOE_ERR_NULL, "x_out: must not be NULL");
    return expect_shape(x_out, "x_out", MOE_F32, d.q_ndim, d.q_shape);
}

moe_status moe_ref_dequantize(const moe_quant_spec *spec, const moe_tensor *q,
                              const moe_tensor *scale, const moe_tensor *global_scale,
                              moe_tensor *x_out)
{
    moe_status st = moe_ref_check_dequantize(spec, q, scale, global_scale, x_out);
    if (st != MOE_OK) return st;
    moe_q_geom g;
    moe_q_geometry(spec, "q", q->ndim, q->shape, &g);
    float *out = (float *)x_out->data;
    if (spec->gran == MOE_GRAN_NONE) {
        for (int64_t r = 0; r < g.B * g.R; r++)
            for (int64_t c = 0; c < g.K; c++)
                out[r * g.K + c] = get_elem(spec->elem, q->data, g.K, r, c);
        return MOE_OK;
    }
    for (int64_t b = 0; b < g.B; b++) {
        float gs = spec->use_global_scale ? ((const float *)global_scale->data)[b] : 1.0f;
        for (int64_t sr = 0; sr < g.SR; sr++)
            for (int64_t sc = 0; sc < g.SC; sc++) {
                float s = moe_q_scale_at(spec, &g, scale->data, b, sr, sc, gs);
                int64_t r0 = sr * g.rh, c0 = sc * g.cw;
                int64_t r1 = r0 + g.rh < g.R ? r0 + g.rh : g.R;
                int64_t c1 = c0 + g.cw < g.K ? c0 + g.cw : g.K;
                for (int64_t r = r0; r < r1; r++)
                    for (int64_t c = c0; c < c1; c++) {
                        int64_t row = b * g.R + r;
                        out[row * g.K + c] = get_elem(spec->elem, q->data, g.K, row, c) * s;
                    }
            }
    }
    return MOE_OK;
}
