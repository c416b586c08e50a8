#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "elem.h"
#include "moe/format.h"
#include "moe/gemm.h"
#include "quant_internal.h"

/* Where each scheme's scales enter the product (see gemm.h). */
static const moe_gemm_numerics numerics[MOE_SCHEME_COUNT] = {
    [MOE_SCHEME_F32] = MOE_GEMM_DEQUANT_F32,
    [MOE_SCHEME_BF16] = MOE_GEMM_DEQUANT_F32,
    [MOE_SCHEME_F16] = MOE_GEMM_DEQUANT_F32,
    [MOE_SCHEME_FP8_WTENSOR_ATENSOR] = MOE_GEMM_DEQUANT_F32,
    [MOE_SCHEME_FP8_WCHANNEL_ATENSOR] = MOE_GEMM_DEQUANT_F32,
    [MOE_SCHEME_FP8_WCHANNEL_ATOKEN] = MOE_GEMM_DEQUANT_F32,
    [MOE_SCHEME_FP8_WTENSOR_ATOKEN] = MOE_GEMM_DEQUANT_F32,
    [MOE_SCHEME_FP8_WBLOCK128_AGROUP128] = MOE_GEMM_BLOCK_TILES,
    [MOE_SCHEME_INT8_WCHANNEL_ATOKEN] = MOE_GEMM_DEQUANT_F32,
    [MOE_SCHEME_W8A16_CHANNEL] = MOE_GEMM_WEIGHT_TO_ACT,
    [MOE_SCHEME_W4A16_G32] = MOE_GEMM_WEIGHT_TO_ACT,
    [MOE_SCHEME_W4A16_G64] = MOE_GEMM_WEIGHT_TO_ACT,
    [MOE_SCHEME_W4A16_G128] = MOE_GEMM_WEIGHT_TO_ACT,
    [MOE_SCHEME_W4AFP8_G128] = MOE_GEMM_DEQUANT_F32,
    [MOE_SCHEME_MXFP8] = MOE_GEMM_DEQUANT_F32,
    [MOE_SCHEME_MXFP4_W4A16] = MOE_GEMM_WEIGHT_TO_ACT,
    [MOE_SCHEME_MXFP4_MXFP8] = MOE_GEMM_DEQUANT_F32,
    [MOE_SCHEME_NVFP4] = MOE_GEMM_DEQUANT_F32,
};

moe_gemm_numerics moe_gemm_numerics_of(moe_scheme s)
{
    return (unsigned)s < MOE_SCHEME_COUNT ? numerics[s] : MOE_GEMM_NUMERICS_COUNT;
}

const char *moe_gemm_numerics_name(moe_gemm_numerics n)
{
    static const char *const names[] = {"dequant_f32", "block_tiles", "weight_to_act"};
    return (unsigned)n < MOE_GEMM_NUMERICS_COUNT ? names[n] : "unknown";
}

/* A view of expert e's slice of a tensor whose leading dimension is E. */
static moe_tensor slice_expert(const moe_tensor *t, int64_t e, int64_t E)
{
    moe_tensor v = *t;
    v.owns = 0;
    v.shape[0] = 1;
    v.nbytes = t->nbytes / (size_t)E;
    v.data = (uint8_t *)t->data + (size_t)e * v.nbytes;
    return v;
}

static moe_status check_operand(const moe_tensor *t, const char *arg, const moe_quant_spec *spec, int ndim)
{
    moe_status s = moe_tensor_expect(t, arg, spec->elem, ndim);
    if (s != MOE_OK) return s;
    return MOE_OK;
}

/* Operand as f32: a plain load for unscaled storage types, else the
 * quant stage's dequantization. */
static moe_status to_f32(const moe_quant_spec *spec, const moe_tensor *q, const moe_tensor *scale,
                         const moe_tensor *global, float *dst)
{
    int64_t n = 1;
    for (int i = 0; i < q->ndim; i++) n *= q->shape[i];
    if (spec->gran == MOE_GRAN_NONE) {
        for (int64_t i = 0; i < n; i++) dst[i] = moe_s_load(q->dtype, q->data, i);
        return MOE_OK;
    }
    moe_tensor x;
    moe_status s = moe_tensor_wrap(&x, MOE_F32, q->ndim, q->shape, dst, (size_t)n * sizeof(float),
                                   (moe_device){MOE_DEVICE_HOST, 0});
    if (s != MOE_OK) return s;
    return moe_ref_dequantize(spec, q, scale, global, &x);
}

static moe_status check_args(const moe_gemm_args *g, const moe_tensor *out, moe_quant_spec *ws, moe_quant_spec *as)
{
    if (!g) return moe_fail(MOE_ERR_NULL, "args: must not be NULL");
    moe_status s = moe_scheme_spec(g->scheme, MOE_OPERAND_WEIGHT, ws);
    if (s != MOE_OK) return s;
    if ((s = moe_scheme_spec(g->scheme, MOE_OPERAND_ACT, as))) return s;
    if ((s = check_operand(g->a, "a", as, 2)) || (s = check_operand(g->w, "w", ws, 3))) return s;
    if ((s = moe_s_expect_storage(out, "out", 2))) return s;
    if ((s = moe_tensor_expect(g->row_expert, "row_expert", MOE_I32, 1))) return s;
    int64_t P = g->a->shape[0], K = g->a->shape[1], E = g->w->shape[0], N = g->w->shape[1];
    if (g->w->shape[2] != K)
        return moe_fail(MOE_ERR_SHAPE, "w: reduction dim %lld differs from a's %lld", (long long)g->w->shape[2],
                        (long long)K);
    if (g->row_expert->shape[0] != P)
        return moe_fail(MOE_ERR_SHAPE, "row_expert: %lld entries, a has %lld rows",
                        (long long)g->row_expert->shape[0], (long long)P);
    if (out->shape[0] != P || out->shape[1] != N)
        return moe_fail(MOE_ERR_SHAPE, "out: shape [%lld, %lld], expected [%lld, %lld]", (long long)out->shape[0],
                        (long long)out->shape[1], (long long)P, (long long)N);
    if (g->bias) {
        if ((s = moe_tensor_expect(g->bias, "bias", MOE_F32, 2))) return s;
        if (g->bias->shape[0] != E || g->bias->shape[1] != N)
            return moe_fail(MOE_ERR_SHAPE, "bias: shape [%lld, %lld], expected [%lld, %lld]",
                            (long long)g->bias->shape[0], (long long)g->bias->shape[1], (long long)E, (long long)N);
    }
    if (ws->gran != MOE_GRAN_NONE && !g->w_scale) return moe_fail(MOE_ERR_NULL, "w_scale: scheme %s needs it", moe_scheme_name(g->scheme));
    if (as->gran != MOE_GRAN_NONE && !g->a_scale) return moe_fail(MOE_ERR_NULL, "a_scale: scheme %s needs it", moe_scheme_name(g->scheme));
    if (g->w_scale && g->w_scale->ndim >= 1 && g->w_scale->shape[0] != E)
        return moe_fail(MOE_ERR_SHAPE, "w_scale: leading dim %lld, expected E = %lld", (long long)g->w_scale->shape[0],
                        (long long)E);
    if (g->w_global && g->w_global->shape[0] != E)
        return moe_fail(MOE_ERR_SHAPE, "w_global: %lld entries, expected E = %lld", (long long)g->w_global->shape[0],
                        (long long)E);
    const int32_t *re = g->row_expert->data;
    for (int64_t p = 0; p < P; p++)
        if (re[p] < -1 || re[p] >= E)
            return moe_fail(MOE_ERR_INVALID_ARG, "row_expert[%lld] = %d: must be -1 or an expert < %lld", (long long)p,
                            re[p], (long long)E);
    return MOE_OK;
}

/* moe_ref_dequantize's argument checks (reference/quant.c, in its order:
 * geometry, q, the scale, the global scale), the tensors named as the GEMM
 * names them. */
static moe_status expect_dims(const moe_tensor *t, const char *arg, moe_dtype dt, int ndim, const int64_t *shape)
{
    moe_status s = moe_tensor_expect_host(t, arg, dt, ndim);
    if (s != MOE_OK) return s;
    for (int i = 0; i < ndim; i++)
        if (t->shape[i] != shape[i])
            return moe_fail(MOE_ERR_SHAPE, "%s: shape[%d] = %lld, expected %lld", arg, i, (long long)t->shape[i],
                            (long long)shape[i]);
    return MOE_OK;
}

static moe_status check_dequant(const moe_quant_spec *spec, const moe_tensor *q, const char *q_arg,
                                const moe_tensor *scale, const char *scale_arg, const moe_tensor *global,
                                const char *global_arg)
{
    moe_q_geom geo;
    moe_quant_dims d;
    moe_status s = moe_q_geometry(spec, q_arg, q->ndim, q->shape, &geo);
    if (s || (s = moe_quant_shapes(spec, q->ndim, q->shape, &d))) return s;
    if ((s = expect_dims(q, q_arg, d.q_dtype, d.q_ndim, d.q_shape))) return s;
    if (d.has_scale) {
        if (!scale) return moe_fail(MOE_ERR_NULL, "%s: scheme has %s scales; must not be NULL", scale_arg,
                                    moe_scale_rule_name(spec->rule));
        if ((s = expect_dims(scale, scale_arg, d.scale_dtype, d.scale_ndim, d.scale_shape))) return s;
    } else if (scale) {
        return moe_fail(MOE_ERR_INVALID_ARG, "%s: the spec has no scale; pass NULL", scale_arg);
    }
    if (d.has_global) {
        if (!global) return moe_fail(MOE_ERR_NULL, "%s: NVFP4 with a global scale needs it; must not be NULL", global_arg);
        return expect_dims(global, global_arg, MOE_F32, d.global_ndim, d.global_shape);
    }
    if (global) return moe_fail(MOE_ERR_INVALID_ARG, "%s: only NVFP4 with a global scale has one; pass NULL", global_arg);
    return MOE_OK;
}

/* BLOCK_TILES reads its f32 scales directly: a_scale [P, kt], w_scale
 * [E, nt, kt] (any rank with that many values). */
static moe_status check_tile_scales(const moe_gemm_args *g, const moe_quant_spec *ws, const moe_quant_spec *as)
{
    int64_t P = g->a->shape[0], K = g->a->shape[1], E = g->w->shape[0], N = g->w->shape[1];
    int64_t bk = as->group_k, bn = ws->block_n, kt = (K + bk - 1) / bk, nt = (N + bn - 1) / bn;
    moe_status s = moe_tensor_expect(g->a_scale, "a_scale", MOE_F32, -1);
    if (s || (s = moe_tensor_expect(g->w_scale, "w_scale", MOE_F32, -1))) return s;
    if (moe_tensor_numel(g->a_scale) != P * kt)
        return moe_fail(MOE_ERR_SHAPE, "a_scale: %lld scales, expected P * ceil(K/%lld) = %lld",
                        (long long)moe_tensor_numel(g->a_scale), (long long)bk, (long long)(P * kt));
    if (moe_tensor_numel(g->w_scale) != E * nt * kt)
        return moe_fail(MOE_ERR_SHAPE, "w_scale: %lld scales, expected E * ceil(N/%lld) * ceil(K/%lld) = %lld",
                        (long long)moe_tensor_numel(g->w_scale), (long long)bn, (long long)bk,
                        (long long)(E * nt * kt));
    return MOE_OK;
}

static moe_status check_all(const moe_gemm_args *g, const moe_tensor *out, moe_quant_spec *ws, moe_quant_spec *as)
{
    moe_status s = check_args(g, out, ws, as);
    if (s != MOE_OK) return s;
    int64_t P = g->a->shape[0], E = g->w->shape[0], N = g->w->shape[1];
    if (P == 0 || N == 0) return MOE_OK; /* nothing is dequantized */
    if (numerics[g->scheme] == MOE_GEMM_BLOCK_TILES) return check_tile_scales(g, ws, as);
    if (as->gran != MOE_GRAN_NONE && (s = check_dequant(as, g->a, "a", g->a_scale, "a_scale", g->a_global, "a_global")))
        return s;
    if (ws->gran == MOE_GRAN_NONE) return MOE_OK;
    const int32_t *re = g->row_expert->data;
    int64_t e = -1;
    for (int64_t p = 0; p < P && e < 0; p++) e = re[p];
    if (e < 0) return MOE_OK; /* no expert has rows: no weight is read */
    moe_tensor we = slice_expert(g->w, e, E), wsc, wgl;
    if (g->w_scale) wsc = slice_expert(g->w_scale, e, E);
    if (g->w_global) wgl = slice_expert(g->w_global, e, E);
    return check_dequant(ws, &we, "w", g->w_scale ? &wsc : NULL, "w_scale", g->w_global ? &wgl : NULL, "w_global");
}

moe_status moe_gemm_check(const moe_gemm_args *g, const moe_tensor *out)
{
    moe_quant_spec ws, as;
    return check_all(g, out, &ws, &as);
}

/* BLOCK_TILES: decoded elements, scales per 128-k tile (linear f32 scales:
 * a_scale [P, K/bk], w_scale [E, ceil(N/bn), ceil(K/bk)]). */
static void block_rows(const moe_gemm_args *g, const moe_quant_spec *ws, const moe_quant_spec *as,
                       const float *a, const float *w, int64_t e, const int64_t *rows, int64_t nrows,
                       moe_tensor *out)
{
    int64_t K = g->a->shape[1], N = g->w->shape[1], bk = as->group_k, bn = ws->block_n;
    int64_t kt = (K + bk - 1) / bk, nt = (N + bn - 1) / bn;
    const float *sa = g->a_scale->data, *sw = (const float *)g->w_scale->data + e * nt * kt;
    const float *bias = g->bias ? (const float *)g->bias->data + e * N : NULL;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < nrows; r++) {
        int64_t p = rows[r];
        for (int64_t n = 0; n < N; n++) {
            float acc = 0.0f;
            for (int64_t t = 0; t < kt; t++) {
                float part = 0.0f;
                for (int64_t k = t * bk; k < K && k < (t + 1) * bk; k++)
                    part = fmaf(a[p * K + k], w[n * K + k], part);
                acc = acc + (part * sa[p * kt + t]) * sw[(n / bn) * kt + t];
            }
            if (bias) acc = acc + bias[n];
            moe_s_store(out->dtype, out->data, p * N + n, acc);
        }
    }
}

static void plain_rows(const moe_gemm_args *g, const float *a, const float *w, int64_t e, const int64_t *rows,
                       int64_t nrows, moe_tensor *out)
{
    int64_t K = g->a->shape[1], N = g->w->shape[1];
    const float *bias = g->bias ? (const float *)g->bias->data + e * N : NULL;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < nrows; r++) {
        int64_t p = rows[r];
        for (int64_t n = 0; n < N; n++) {
            float acc = 0.0f;
            const float *ap = a + p * K, *wn = w + n * K;
            for (int64_t k = 0; k < K; k++) acc = fmaf(ap[k], wn[k], acc);
            if (bias) acc = acc + bias[n];
            moe_s_store(out->dtype, out->data, p * N + n, acc);
        }
    }
}

moe_status moe_ref_grouped_gemm(const moe_gemm_args *g, moe_tensor *out)
{
    moe_quant_spec ws, as;
    moe_status s = check_all(g, out, &ws, &as);
    if (s != MOE_OK) return s;
    moe_gemm_numerics mode = numerics[g->scheme];
    int64_t P = g->a->shape[0], K = g->a->shape[1], E = g->w->shape[0], N = g->w->shape[1];
    memset(out->data, 0, out->nbytes);
    if (P == 0 || N == 0) return MOE_OK;
    float *a = malloc(sizeof(float) * (size_t)(P * K + 1)), *w = malloc(sizeof(float) * (size_t)(N * K + 1));
    int64_t *rows = malloc(sizeof(int64_t) * (size_t)P);
    if (!a || !w || !rows) {
        free(a), free(w), free(rows);
        return moe_fail(MOE_ERR_NOMEM, "grouped_gemm: operand buffers");
    }
    /* activations: decoded only (BLOCK_TILES scales per tile), else dequantized */
    if (mode == MOE_GEMM_BLOCK_TILES) s = moe_decode_array(g->a->dtype, g->a->data, (size_t)(P * K), a);
    else s = to_f32(&as, g->a, g->a_scale, g->a_global, a);
    const int32_t *re = g->row_expert->data;
    for (int64_t e = 0; e < E && s == MOE_OK; e++) {
        int64_t nrows = 0;
        for (int64_t p = 0; p < P; p++)
            if (re[p] == e) rows[nrows++] = p;
        if (nrows == 0) continue; /* untouched experts cost nothing */
        moe_tensor we = slice_expert(g->w, e, E);
        if (mode == MOE_GEMM_BLOCK_TILES) {
            s = moe_decode_array(we.dtype, we.data, (size_t)(N * K), w);
            if (s == MOE_OK) block_rows(g, &ws, &as, a, w, e, rows, nrows, out);
            continue;
        }
        moe_tensor wsc, wgl;
        if (g->w_scale) wsc = slice_expert(g->w_scale, e, E);
        if (g->w_global) wgl = slice_expert(g->w_global, e, E);
        s = to_f32(&ws, &we, g->w_scale ? &wsc : NULL, g->w_global ? &wgl : NULL, w);
        if (s != MOE_OK) break;
        if (mode == MOE_GEMM_WEIGHT_TO_ACT)
            for (int64_t i = 0; i < N * K; i++) w[i] = moe_s_round_to(g->a->dtype, w[i]);
        plain_rows(g, a, w, e, rows, nrows, out);
    }
    free(a), free(w), free(rows);
    return s;
}
