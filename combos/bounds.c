/* The grouped-GEMM bound (derivation in include/moe/bounds.h). The
 * operands are rebuilt exactly as reference/gemm.c builds them (the same
 * dequantization calls on the same per-expert slices), then A = sum |x_k|
 * is summed in double per output element. */
#include "moe/bounds.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "moe/compare.h"
#include "moe/format.h"
#include "moe/slot_bound.h"

#define U_F32 0x1p-24

double moe_gamma(int64_t n, double u)
{
    double nu = (double)n * u;
    return n >= 0 && nu < 0.5 ? nu / (1.0 - nu) : INFINITY;
}

double moe_gamma_f32(int64_t n) { return moe_gamma(n, U_F32); }

/* expert e's slice of a tensor whose leading dimension is E (as the reference slices) */
static moe_tensor slice(const moe_tensor *t, int64_t e, int64_t E)
{
    moe_tensor v = *t;
    v.owns = 0, v.shape[0] = 1, v.nbytes = t->nbytes / (size_t)E;
    v.data = (uint8_t *)t->data + (size_t)e * v.nbytes;
    return v;
}

typedef struct {
    moe_gemm_numerics mode;
    moe_quant_spec ws, as;
    int64_t P, K, N, E, bk, bn, kt, nt;
} shape_info;

static moe_status check(const moe_gemm_args *g, shape_info *si)
{
    if (!g) return moe_fail(MOE_ERR_NULL, "gemm bound: g must not be NULL");
    moe_status s = moe_scheme_spec(g->scheme, MOE_OPERAND_WEIGHT, &si->ws);
    if (s || (s = moe_scheme_spec(g->scheme, MOE_OPERAND_ACT, &si->as))) return s;
    si->mode = moe_gemm_numerics_of(g->scheme);
    if ((s = moe_tensor_expect_host(g->a, "a", si->as.elem, 2)) || (s = moe_tensor_expect_host(g->w, "w", si->ws.elem, 3)) ||
        (s = moe_tensor_expect_host(g->row_expert, "row_expert", MOE_I32, 1)))
        return s;
    si->P = g->a->shape[0], si->K = g->a->shape[1], si->E = g->w->shape[0], si->N = g->w->shape[1];
    if (g->w->shape[2] != si->K)
        return moe_fail(MOE_ERR_SHAPE, "w: reduction dim %lld differs from a's %lld", (long long)g->w->shape[2],
                        (long long)si->K);
    if (g->row_expert->shape[0] != si->P)
        return moe_fail(MOE_ERR_SHAPE, "row_expert: %lld entries, a has %lld rows", (long long)g->row_expert->shape[0],
                        (long long)si->P);
    if (si->ws.gran != MOE_GRAN_NONE && !g->w_scale)
        return moe_fail(MOE_ERR_NULL, "w_scale: scheme %s needs it", moe_scheme_name(g->scheme));
    if (si->as.gran != MOE_GRAN_NONE && !g->a_scale)
        return moe_fail(MOE_ERR_NULL, "a_scale: scheme %s needs it", moe_scheme_name(g->scheme));
    if (g->bias && (s = moe_tensor_expect_host(g->bias, "bias", MOE_F32, 2))) return s;
    if (g->bias && (g->bias->shape[0] != si->E || g->bias->shape[1] != si->N))
        return moe_fail(MOE_ERR_SHAPE, "bias: shape [%lld, %lld], expected [E, N] = [%lld, %lld]",
                        (long long)g->bias->shape[0], (long long)g->bias->shape[1], (long long)si->E, (long long)si->N);
    si->bk = si->bn = 1, si->kt = si->nt = 0;
    if (si->mode == MOE_GEMM_BLOCK_TILES) {
        si->bk = si->as.group_k, si->bn = si->ws.block_n;
        if (si->bk < 1 || si->bn < 1) return moe_fail(MOE_ERR_INTERNAL, "gemm bound: block scheme without tile sizes");
        si->kt = (si->K + si->bk - 1) / si->bk, si->nt = (si->N + si->bn - 1) / si->bn;
        if ((s = moe_tensor_expect_host(g->a_scale, "a_scale", MOE_F32, -1)) ||
            (s = moe_tensor_expect_host(g->w_scale, "w_scale", MOE_F32, -1)))
            return s;
        if (moe_tensor_numel(g->a_scale) != si->P * si->kt || moe_tensor_numel(g->w_scale) != si->E * si->nt * si->kt)
            return moe_fail(MOE_ERR_SHAPE, "a_scale / w_scale: %lld / %lld scales, expected P*kt = %lld / E*nt*kt = %lld",
                            (long long)moe_tensor_numel(g->a_scale), (long long)moe_tensor_numel(g->w_scale),
                            (long long)(si->P * si->kt), (long long)(si->E * si->nt * si->kt));
    }
    const int32_t *re = g->row_expert->data;
    for (int64_t p = 0; p < si->P; p++)
        if (re[p] < -1 || re[p] >= si->E)
            return moe_fail(MOE_ERR_INVALID_ARG, "row_expert[%lld] = %d: must be -1 or an expert < %lld", (long long)p,
                            re[p], (long long)si->E);
    return MOE_OK;
}

static void counts_of(const moe_gemm_args *g, const shape_info *si, int64_t *m, int64_t *nodes)
{
    if (si->mode == MOE_GEMM_BLOCK_TILES) {
        int64_t L = si->K < si->bk ? si->K : si->bk;
        *m = L + 2 + (si->kt > 0 ? si->kt - 1 : 0), *nodes = si->K + 2 * si->kt;
    } else {
        *m = si->K, *nodes = si->K;
    }
    if (g->bias) *m += 1;
}

moe_status moe_gemm_bound_counts(const moe_gemm_args *g, int64_t *m, int64_t *nodes)
{
    shape_info si;
    moe_status s = check(g, &si);
    if (s) return s;
    if (!m || !nodes) return moe_fail(MOE_ERR_NULL, "gemm bound counts: m and nodes must not be NULL");
    counts_of(g, &si, m, nodes);
    return MOE_OK;
}

/* an operand as f32, as reference/gemm.c's to_f32: plain values for
 * unscaled storage, else the quant stage's dequantization */
static moe_status to_f32(const moe_quant_spec *spec, const moe_tensor *q, const moe_tensor *scale,
                         const moe_tensor *global, float *dst)
{
    int64_t n = moe_tensor_numel(q);
    if (spec->gran == MOE_GRAN_NONE) {
        for (int64_t i = 0; i < n; i++) dst[i] = (float)moe_tensor_value_at(q, i);
        return MOE_OK;
    }
    moe_tensor x;
    moe_status s = moe_tensor_wrap(&x, MOE_F32, q->ndim, q->shape, dst, (size_t)n * sizeof(float),
                                   (moe_device){MOE_DEVICE_HOST, 0});
    return s ? s : moe_ref_dequantize(spec, q, scale, global, &x);
}

/* the reference's act-dtype rounding of WEIGHT_TO_ACT (moe_s_round_to) */
static float round_to(moe_dtype d, float x)
{
    if (d != MOE_BF16 && d != MOE_F16) return x;
    uint32_t c = 0;
    float y = x;
    moe_encode(d, x, MOE_POLICY_IEEE_RNE, &c, NULL);
    moe_decode(d, c, &y);
    return y;
}

/* A = sum_k |x_k| (widened, see bounds.h) and the underflow term per
 * element of g's output [P, N]; rows of no expert get 0 and 0 */
moe_status moe_gemm_abs_sums(const moe_gemm_args *g, double *Aout, double *uout)
{
    shape_info si;
    moe_status s = check(g, &si);
    if (s) return s;
    int64_t P = si.P, K = si.K, N = si.N, E = si.E;
    if ((!Aout || !uout) && P * N > 0) return moe_fail(MOE_ERR_NULL, "gemm abs sums: A and under must not be NULL");
    int64_t m, nodes;
    counts_of(g, &si, &m, &nodes);
    const double widen = 1.0 + (double)(K + 4) * 0x1p-52, under = ldexp((double)nodes, -148);
    for (int64_t i = 0; i < P * N; i++) Aout[i] = 0.0, uout[i] = 0.0; /* rows of no expert: exact zeros */
    if (P == 0 || N == 0) return MOE_OK;

    float *a = malloc(sizeof(float) * (size_t)(P * K + 1)), *w = malloc(sizeof(float) * (size_t)(N * K + 1));
    int64_t *rows = malloc(sizeof(int64_t) * (size_t)P);
    if (!a || !w || !rows) {
        free(a), free(w), free(rows);
        return moe_fail(MOE_ERR_NOMEM, "gemm bound: operand buffers");
    }
    const int block = si.mode == MOE_GEMM_BLOCK_TILES;
    if (block)
        for (int64_t i = 0; i < P * K; i++) a[i] = (float)moe_tensor_value_at(g->a, i);
    else
        s = to_f32(&si.as, g->a, g->a_scale, g->a_global, a);
    const int32_t *re = g->row_expert->data;
    for (int64_t e = 0; e < E && s == MOE_OK; e++) {
        int64_t nrows = 0;
        for (int64_t p = 0; p < P; p++)
            if (re[p] == e) rows[nrows++] = p;
        if (!nrows) continue;
        moe_tensor we = slice(g->w, e, E);
        if (block) {
            for (int64_t i = 0; i < N * K; i++) w[i] = (float)moe_tensor_value_at(&we, i);
        } else {
            moe_tensor wsc, wgl;
            if (g->w_scale) wsc = slice(g->w_scale, e, E);
            if (g->w_global) wgl = slice(g->w_global, e, E);
            if ((s = to_f32(&si.ws, &we, g->w_scale ? &wsc : NULL, g->w_global ? &wgl : NULL, w))) break;
            if (si.mode == MOE_GEMM_WEIGHT_TO_ACT)
                for (int64_t i = 0; i < N * K; i++) w[i] = round_to(g->a->dtype, w[i]);
        }
        const float *sa = block ? g->a_scale->data : NULL;
        const float *sw = block ? (const float *)g->w_scale->data + e * si.nt * si.kt : NULL;
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < nrows; r++) {
            int64_t p = rows[r];
            for (int64_t n = 0; n < N; n++) {
                const float *ap = a + p * K, *wn = w + n * K;
                double A = 0.0, un = under;
                if (block) {
                    un = ldexp(2.0 * (double)si.kt, -148); /* the scale products */
                    for (int64_t t = 0; t < si.kt; t++) {
                        double part = 0.0, sv = fabs((double)sa[p * si.kt + t] * sw[(n / si.bn) * si.kt + t]);
                        int64_t k0 = t * si.bk, k1 = k0 + si.bk < K ? k0 + si.bk : K;
                        for (int64_t k = k0; k < k1; k++) part += fabs((double)ap[k] * wn[k]);
                        A += part * sv;
                        un += ldexp((double)(k1 - k0) * sv, -148) * widen; /* the tile's fmaf, scaled after */
                    }
                } else {
                    for (int64_t k = 0; k < K; k++) A += fabs((double)ap[k] * wn[k]);
                }
                Aout[p * N + n] = A * widen, uout[p * N + n] = un;
            }
        }
    }
    free(a), free(w), free(rows);
    return s;
}

moe_status moe_gemm_bound(const moe_gemm_args *g, const moe_tensor *ref_out, double *bound)
{
    shape_info si;
    moe_status s = check(g, &si);
    if (s) return s;
    if ((s = moe_tensor_expect_host(ref_out, "ref_out", ref_out ? ref_out->dtype : MOE_F32, 2))) return s;
    moe_dtype od = ref_out->dtype;
    if (od != MOE_F32 && od != MOE_BF16 && od != MOE_F16)
        return moe_fail(MOE_ERR_DTYPE, "ref_out: dtype %s, expected f32, bf16 or f16", moe_dtype_get(od)->name);
    int64_t P = si.P, N = si.N;
    if (ref_out->shape[0] != P || ref_out->shape[1] != N)
        return moe_fail(MOE_ERR_SHAPE, "ref_out: shape [%lld, %lld], expected [P, N] = [%lld, %lld]",
                        (long long)ref_out->shape[0], (long long)ref_out->shape[1], (long long)P, (long long)N);
    if (!bound && P * N > 0) return moe_fail(MOE_ERR_NULL, "bound: must not be NULL");
    if (P == 0 || N == 0) return MOE_OK;
    int64_t m, nodes;
    counts_of(g, &si, &m, &nodes);
    /* the reference's side and the backend's (bounds.h: round-to-nearest in
     * any order, or truncating tensor-core steps of >= 16 products) */
    const double gam = moe_gamma_f32(m), t = (double)((m + 15) / 16) * (0x1p-23 + 17 * 0x1p-24);
    const double gam_b = isinf(gam) ? gam : t * (1.0 + t) > gam ? t * (1.0 + t) : gam;
    double *un = malloc(sizeof(double) * (size_t)(P * N));
    if (!un) return moe_fail(MOE_ERR_NOMEM, "gemm bound: underflow terms");
    if ((s = moe_gemm_abs_sums(g, bound, un))) return free(un), s;
    const int32_t *re = g->row_expert->data;
    for (int64_t p = 0; p < P; p++) {
        if (re[p] < 0) continue; /* rows of no expert: exact zeros, bound 0 */
        for (int64_t n = 0; n < N; n++) {
            int64_t i = p * N + n;
            double b = g->bias ? fabs((double)((const float *)g->bias->data)[re[p] * N + n]) : 0.0;
            double D = (gam + gam_b) * bound[i] + 2.0 * U_F32 * b + un[i];
            double ref = moe_tensor_value_at(ref_out, i);
            double bd;
            if (!isfinite(ref) || !isfinite(D)) bd = INFINITY;
            else if (od == MOE_F32) bd = D;
            else {
                double hr = moe_half_ulp(od, ref);
                bd = D + hr + moe_half_ulp(od, fabs(ref) + hr + D);
            }
            bound[i] = bd;
        }
    }
    free(un);
    return MOE_OK;
}
