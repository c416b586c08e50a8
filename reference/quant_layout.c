/* Where quantized elements and scales live: the operand's geometry, the
 * output shapes, and the scale layouts (linear, the 128x4 swizzled atom of
 * cuBLAS / CUTLASS / TRT-LLM NVFP4 and MX, DeepEP-LL's UE8M0 packing). */
#include <string.h>
#include "moe/format.h"
#include "quant_internal.h"

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t round_up(int64_t a, int64_t b) { return cdiv(a, b) * b; }

int64_t moe_sf_offset_128x4(int64_t r, int64_t c, int64_t sf_cols)
{
    if (r < 0 || c < 0 || sf_cols < 0) return -1;
    return moe_qc_sf_offset_128x4(r, c, sf_cols);
}

moe_status moe_q_geometry(const moe_quant_spec *spec, const char *arg, int ndim,
                          const int64_t *shape, moe_q_geom *g)
{
    moe_status st = moe_quant_spec_check(spec);
    if (st != MOE_OK) return st;
    int want = spec->operand == MOE_OPERAND_WEIGHT ? 3 : 2;
    const char *form = spec->operand == MOE_OPERAND_WEIGHT ? "[E, N, K]" : "[M, K]";
    if (ndim != want)
        return moe_fail(MOE_ERR_SHAPE, "%s: rank %d, %s are %s", arg, ndim,
                        spec->operand == MOE_OPERAND_WEIGHT ? "weights" : "activations", form);
    if (!shape) return moe_fail(MOE_ERR_NULL, "shape: must not be NULL");
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0 || shape[i] > ((int64_t)1 << 40))
            return moe_fail(MOE_ERR_SHAPE, "%s: shape[%d] = %lld out of range", arg, i,
                            (long long)shape[i]);
    memset(g, 0, sizeof *g);
    g->B = want == 3 ? shape[0] : 1;
    g->R = shape[want - 2];
    g->K = shape[want - 1];
    int64_t gk = spec->group_k;
    switch (spec->gran) {
    case MOE_GRAN_NONE:
        g->SR = g->SC = 0;
        return MOE_OK;
    case MOE_GRAN_TENSOR:
        g->SR = g->SC = 1;
        g->rh = g->R;
        g->cw = g->K;
        break;
    case MOE_GRAN_ROW:
        g->SR = g->R;
        g->SC = 1;
        g->rh = 1;
        g->cw = g->K;
        break;
    case MOE_GRAN_BLOCK:
        if (spec->k_divisible && (g->K % gk || g->R % spec->block_n))
            return moe_fail(MOE_ERR_SHAPE,
                            "%s: [N, K] = [%lld, %lld] is not a multiple of the %d x %lld block "
                            "(rule k_divisible)",
                            arg, (long long)g->R, (long long)g->K, spec->block_n, (long long)gk);
        g->SR = cdiv(g->R, spec->block_n);
        g->SC = cdiv(g->K, gk);
        g->rh = spec->block_n;
        g->cw = gk;
        break;
    default: /* GROUP, MX32, NV16 */
        if (spec->k_divisible && g->K % gk)
            return moe_fail(MOE_ERR_SHAPE,
                            "%s: K = %lld is not a multiple of %lld (rule k_divisible: %s "
                            "groups of %lld never straddle rows)",
                            arg, (long long)g->K, (long long)gk, moe_scale_gran_name(spec->gran),
                            (long long)gk);
        g->SR = g->R;
        g->SC = cdiv(g->K, gk);
        g->rh = 1;
        g->cw = gk;
        break;
    }
    if (spec->layout == MOE_SF_UE8M0_PACK4 && g->SC % 4)
        return moe_fail(MOE_ERR_SHAPE,
                        "%s: K = %lld gives %lld scale groups; UE8M0 packing needs a multiple "
                        "of 4 (K %% 512 == 0, as DeepEP requires for FP8)",
                        arg, (long long)g->K, (long long)g->SC);
    if (spec->layout == MOE_SF_SWIZZLE_128X4)
        g->per_b = round_up(g->SR, 128) * round_up(g->SC, 4);
    else if (spec->layout == MOE_SF_UE8M0_PACK4)
        g->per_b = g->SR * (g->SC / 4);
    else
        g->per_b = g->SR * g->SC;
    return MOE_OK;
}

int64_t moe_q_scale_index(const moe_quant_spec *spec, const moe_q_geom *g, int64_t b,
                          int64_t sr, int64_t sc, int *byte)
{
    return moe_qc_scale_index(spec, g, b, sr, sc, byte);
}

moe_status moe_quant_shapes(const moe_quant_spec *spec, int ndim, const int64_t *shape,
                            moe_quant_dims *out)
{
    if (!out) return moe_fail(MOE_ERR_NULL, "out: must not be NULL");
    moe_q_geom g;
    moe_status st = moe_q_geometry(spec, "shape", ndim, shape, &g);
    if (st != MOE_OK) return st;
    memset(out, 0, sizeof *out);
    for (int i = 0; i < MOE_MAX_DIMS; i++) out->q_shape[i] = out->scale_shape[i] = 1;
    for (int i = 0; i < MOE_MAX_DIMS; i++) out->global_shape[i] = 1;
    out->q_dtype = spec->elem;
    out->q_ndim = ndim;
    for (int i = 0; i < ndim; i++) out->q_shape[i] = shape[i];
    if (spec->gran == MOE_GRAN_NONE) return MOE_OK;
    out->has_scale = 1;
    out->scale_dtype = spec->layout == MOE_SF_UE8M0_PACK4 ? MOE_I32 : spec->scale_dtype;
    int64_t rows = g.SR, cols = g.SC;
    if (spec->layout == MOE_SF_SWIZZLE_128X4) {
        rows = round_up(rows, 128);
        cols = round_up(cols, 4);
    } else if (spec->layout == MOE_SF_UE8M0_PACK4) {
        cols /= 4;
    }
    int i = 0;
    if (spec->operand == MOE_OPERAND_WEIGHT) out->scale_shape[i++] = g.B;
    out->scale_shape[i++] = rows;
    out->scale_shape[i++] = cols;
    out->scale_ndim = i;
    if (spec->use_global_scale) {
        out->has_global = 1;
        out->global_ndim = 1;
        out->global_shape[0] = spec->operand == MOE_OPERAND_WEIGHT ? g.B : 1;
    }
    return MOE_OK;
}

moe_status moe_quant_alloc(const moe_quant_spec *spec, int ndim, const int64_t *shape,
                           moe_tensor *q, moe_tensor *scale, moe_tensor *global_scale)
{
    moe_quant_dims d;
    moe_status st = moe_quant_shapes(spec, ndim, shape, &d);
    if (st != MOE_OK) return st;
    if (!q) return moe_fail(MOE_ERR_NULL, "q: must not be NULL");
    if (d.has_scale && !scale)
        return moe_fail(MOE_ERR_NULL, "scale: the spec has scales; must not be NULL");
    if (d.has_global && !global_scale)
        return moe_fail(MOE_ERR_NULL,
                        "global_scale: the spec has a global scale; must not be NULL");
    if (scale) memset(scale, 0, sizeof *scale);
    if (global_scale) memset(global_scale, 0, sizeof *global_scale);
    st = moe_tensor_alloc(q, d.q_dtype, d.q_ndim, d.q_shape);
    if (st == MOE_OK && d.has_scale)
        st = moe_tensor_alloc(scale, d.scale_dtype, d.scale_ndim, d.scale_shape);
    if (st == MOE_OK && d.has_global)
        st = moe_tensor_alloc(global_scale, MOE_F32, d.global_ndim, d.global_shape);
    if (st != MOE_OK) {
        moe_tensor_free(q);
        moe_tensor_free(scale);
        moe_tensor_free(global_scale);
    }
    return st;
}

float moe_q_scale_at(const moe_quant_spec *spec, const moe_q_geom *g, const void *scale, int64_t b, int64_t sr,
                     int64_t sc, float gs)
{
    int lane;
    int64_t i = moe_q_scale_index(spec, g, b, sr, sc, &lane);
    if (spec->layout == MOE_SF_UE8M0_PACK4) {
        uint32_t w;
        memcpy(&w, (const uint8_t *)scale + i * 4, 4);
        return moe_s_decode_e8m0((uint8_t)(w >> (8 * lane)));
    }
    if (spec->scale_dtype == MOE_F32) {
        float f;
        memcpy(&f, (const uint8_t *)scale + i * 4, 4);
        return f;
    }
    return moe_qc_code_scale(spec, ((const uint8_t *)scale)[i], gs);
}
