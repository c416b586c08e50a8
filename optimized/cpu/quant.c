/* CPU backend: quantize / dequantize for every scheme's spec.
 *
 * The scale of each group comes from the reference itself: the group's
 * statistics (amax with and without NaN, signed max and min, in the
 * reference's comparison rules) go to moe_q_rule_dynamic of
 * reference/quant_rules.c, the NVFP4 global scale to moe_q_nvfp4_global,
 * stored codes through moe_q_scale_index (reference/quant_layout.c). What
 * changes is the loop around them:
 *   - rows (token rows; weight output channels) in parallel for the row,
 *     group, MX32 and NV16 granularities: a row's groups never leave it,
 *     and a row's packed bytes and UE8M0 words belong to it alone;
 *   - 128 x 128 weight tiles in parallel for the block granularity;
 *   - a per-tensor group (and the NVFP4 global amax) as a parallel
 *     reduction over static row chunks, merged in chunk order: the amax is
 *     a maximum (order-free), and the signed max / min keep the first
 *     element that attains them, as the serial walk does;
 *   - the amax of a group four lanes at a time (cpu_vmath.h) for every
 *     rule but INT_MINMAX, the one that reads the signed max / min;
 *   - elements converted with the step the reference writes (x / f or
 *     x * f, the NaN sign rule, the NaN clamp of the spec) and the
 *     encoders of cpu_internal.h / cpu_vmath.h (the reference's codes),
 *     e4m3 and e2m1 four lanes at a time.
 * Dequantize: rows in parallel, decode(q) * scale with the reference's
 * scale of each group (moe_q_code_scale for E8M0 / E4M3 codes), e4m3 and
 * e2m1 codes decoded by table. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "cpu.h"
#include "cpu_internal.h"
#include "cpu_vmath.h"
#include "formats/e8m0.h"
#include "quant_internal.h"
#include "stage_checks.h"

/* ---- group statistics ------------------------------------------------------ */
typedef struct {
    float ai, mx, mn;
    int any, nan;
} stats_acc;

static void stats_init(stats_acc *a)
{
    a->ai = a->mx = a->mn = 0.0f;
    a->any = a->nan = 0;
}

/* amax without NaN and the NaN flag only (every rule but INT_MINMAX):
 * four lanes at a time; a maximum of magnitudes is the same value in any
 * order, and a NaN never wins (x > NaN and NaN > x are false). */
static void stats_add_amax(stats_acc *a, const float *v, int64_t n)
{
    cpu_v4f ai4 = CPU_V4(a->ai);
    cpu_v4i nan4 = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        cpu_v4f x = cpu_vload(v + i), ab = (cpu_v4f)((cpu_v4u)x & 0x7FFFFFFFu);
        ai4 = cpu_vsel(ab > ai4, ab, ai4);
        nan4 |= x != x;
    }
    float ai = a->ai;
    int nan = a->nan | ((nan4[0] | nan4[1] | nan4[2] | nan4[3]) != 0);
    for (int l = 0; l < 4; l++)
        if (ai4[l] > ai) ai = ai4[l];
    for (; i < n; i++) {
        float x = v[i], ab = moe_u32_as_f32(moe_f32_as_u32(x) & 0x7FFFFFFFu);
        if (x != x) nan = 1;
        else if (ab > ai) ai = ab;
    }
    a->ai = ai, a->nan = nan;
}

static void stats_add(stats_acc *a, const float *v, int64_t n)
{
    float ai = a->ai, mx = a->mx, mn = a->mn;
    int any = a->any, nan = a->nan;
    for (int64_t i = 0; i < n; i++) {
        float x = v[i];
        if (x != x) {
            nan = 1;
            continue;
        }
        float ab = moe_u32_as_f32(moe_f32_as_u32(x) & 0x7FFFFFFFu);
        if (ab > ai) ai = ab;
        if (!any || x > mx) mx = x;
        if (!any || x < mn) mn = x;
        any = 1;
    }
    a->ai = ai, a->mx = mx, a->mn = mn, a->any = any, a->nan = nan;
}

/* b follows a in the walk: the result the serial walk over a then b gives */
static void stats_merge(stats_acc *a, const stats_acc *b)
{
    if (b->ai > a->ai) a->ai = b->ai;
    if (b->any) {
        if (!a->any || b->mx > a->mx) a->mx = b->mx;
        if (!a->any || b->mn < a->mn) a->mn = b->mn;
        a->any = 1;
    }
    a->nan |= b->nan;
}

static void stats_final(const stats_acc *a, moe_q_stats *st)
{
    st->amax_prop = a->ai;
    st->amax_ign = a->ai;
    st->vmax = a->mx;
    st->vmin = a->mn;
    if (a->nan) st->amax_prop = st->vmax = st->vmin = moe_q_canon_nan(NAN, 0.0f);
}

/* Statistics of rows [r0, r1) x columns [c0, c1) of the f32 matrix x
 * (row length K), in parallel over row chunks when large. */
static void stats_rows(const float *x, int64_t K, int64_t r0, int64_t r1, int64_t c0, int64_t c1, int full,
                       moe_q_stats *st)
{
    int maxt = omp_get_max_threads();
    if ((r1 - r0) * (c1 - c0) < CPU_PAR_MIN || r1 - r0 < 2) maxt = 1;
    if (maxt > 256) maxt = 256;
    stats_acc part[256];
    int used = 1;
#pragma omp parallel num_threads(maxt)
    {
        int nt = omp_get_num_threads(), me = omp_get_thread_num();
        int64_t lo, hi;
        cpu_chunk(r1 - r0, me, nt, &lo, &hi);
        stats_acc a;
        stats_init(&a);
        for (int64_t r = r0 + lo; r < r0 + hi; r++) {
            if (full) stats_add(&a, x + r * K + c0, c1 - c0);
            else stats_add_amax(&a, x + r * K + c0, c1 - c0);
        }
        part[me] = a;
#pragma omp single
        used = nt;
    }
    stats_acc all;
    stats_init(&all);
    for (int t = 0; t < used; t++) stats_merge(&all, &part[t]);
    stats_final(&all, st);
}

/* ---- elements ------------------------------------------------------------------ */

/* the reference's step: q = cvt(clamp(canon(x / f or x * f))) before the
 * cast, canon being the reference's moe_qc_canon_nan (quant_core.h) */

/* fmaxf(-m, fminf(v, m)) and fminf(fmaxf(v, -m), m) for m = qmax > 0: a
 * NaN v gives +m and -m; no signed-zero tie can arise against +-m. */
MOE_INLINE float clamp_spec(moe_nan_clamp c, float m, float v)
{
    if (c == MOE_NANCLAMP_MIN_MAX) {
        float t = v != v ? m : (v < m ? v : m);
        return t > -m ? t : -m;
    }
    if (c == MOE_NANCLAMP_MAX_MIN) {
        float t = v != v ? -m : (v > -m ? v : -m);
        return t < m ? t : m;
    }
    return v;
}

static void put_group_nibbles(const moe_quant_spec *s, const moe_q_group *grp, const float *x, int64_t n, void *qrow,
                              int64_t c0);

/* Quantizes n elements x[0..n) of one group into row `qrow` (of the q
 * tensor's storage) at column c0. */
static void put_group(const moe_quant_spec *s, const moe_q_group *grp, const float *x, int64_t n, void *qrow,
                      int64_t c0)
{
    const float f = grp->f;
    const int div = grp->op == MOE_QOP_DIV;
    const moe_nan_clamp cl = s->clamp;
    const float m = s->qmax;
    switch (s->elem) {
    case MOE_E4M3: { /* four lanes at a time, the same steps per lane */
        uint8_t *o = (uint8_t *)qrow + c0;
        int64_t i = 0;
        const cpu_v4f f4 = CPU_V4(f), m4 = CPU_V4(m), nm4 = CPU_V4(-m);
        for (; i + 4 <= n; i += 4) {
            cpu_v4f xv = cpu_vload(x + i), v = div ? xv / f4 : xv * f4;
            cpu_v4i vn = v != v, xn = xv != xv;
            /* canon_nan: the input's NaN quieted, else +NaN */
            cpu_v4f cn = cpu_vsel(xn, (cpu_v4f)((cpu_v4u)xv | 0x00400000u), (cpu_v4f)CPU_V4U(0x7FC00000u));
            v = cpu_vsel(vn, cn, v);
            if (cl == MOE_NANCLAMP_MIN_MAX) {
                cpu_v4f t = cpu_vsel(vn, m4, cpu_vsel(v < m4, v, m4));
                v = cpu_vsel(t > nm4, t, nm4);
            } else if (cl == MOE_NANCLAMP_MAX_MIN) {
                cpu_v4f t = cpu_vsel(vn, nm4, cpu_vsel(v > nm4, v, nm4));
                v = cpu_vsel(t < m4, t, m4);
            }
            cpu_v4u c = cpu_venc_e4m3(v);
            o[i] = (uint8_t)c[0], o[i + 1] = (uint8_t)c[1], o[i + 2] = (uint8_t)c[2], o[i + 3] = (uint8_t)c[3];
        }
        for (; i < n; i++) {
            float xv = x[i], v = div ? xv / f : xv * f;
            o[i] = cpu_enc_e4m3(clamp_spec(cl, m, moe_qc_canon_nan(v, xv)));
        }
        return;
    }
    case MOE_I8: {
        int8_t *o = (int8_t *)qrow + c0;
        for (int64_t i = 0; i < n; i++) {
            float xv = x[i], v = div ? xv / f : xv * f;
            o[i] = cpu_enc_i8(clamp_spec(cl, m, moe_qc_canon_nan(v, xv)));
        }
        return;
    }
    case MOE_E2M1:
        /* four lanes, two bytes at a time. canon_nan, and a MIN_MAX clamp to
         * +-6, do not change an e2m1 code (NaN and +6 are both 0x7, the
         * encoder saturates); a MAX_MIN clamp would turn NaN into -6 */
        if ((c0 & 1) == 0 && cl != MOE_NANCLAMP_MAX_MIN) {
            uint8_t *o = (uint8_t *)qrow + c0 / 2;
            int64_t i = 0;
            const cpu_v4f f4 = CPU_V4(f);
            for (; i + 4 <= n; i += 4) {
                cpu_v4f xv = cpu_vload(x + i), v = div ? xv / f4 : xv * f4;
                cpu_v4u c = cpu_venc_e2m1(v);
                o[i / 2] = (uint8_t)(c[0] | c[1] << 4);
                o[i / 2 + 1] = (uint8_t)(c[2] | c[3] << 4);
            }
            if (i < n) put_group_nibbles(s, grp, x + i, n - i, qrow, c0 + i);
            return;
        }
        put_group_nibbles(s, grp, x, n, qrow, c0);
        return;
    default: /* I4 */
        put_group_nibbles(s, grp, x, n, qrow, c0);
        return;
    }
}

/* E2M1 / I4, one element at a time, low nibble first; the row's bytes start zeroed */
static void put_group_nibbles(const moe_quant_spec *s, const moe_q_group *grp, const float *x, int64_t n, void *qrow,
                              int64_t c0)
{
    const float f = grp->f;
    const int div = grp->op == MOE_QOP_DIV;
    const moe_nan_clamp cl = s->clamp;
    const float m = s->qmax;
    {
        uint8_t *o = (uint8_t *)qrow;
        for (int64_t i = 0; i < n; i++) {
            float xv = x[i], v = div ? xv / f : xv * f;
            v = clamp_spec(cl, m, moe_qc_canon_nan(v, xv));
            uint8_t c = s->elem == MOE_E2M1 ? cpu_enc_e2m1(v) : (uint8_t)cpu_enc_i4(v);
            int64_t col = c0 + i;
            uint8_t *b = o + col / 2;
            if (col & 1) *b = (uint8_t)((*b & 0x0F) | ((c & 0xF) << 4));
            else *b = (uint8_t)((*b & 0xF0) | (c & 0xF));
        }
    }
}


/* the group's step: a static scale (x / s) or the rule's dynamic one */
static void group_step(const moe_quant_spec *s, const float *stat, int64_t si, const moe_q_stats *st, float gs,
                       moe_q_group *grp)
{
    if (stat && s->rule != MOE_RULE_NVFP4) {
        grp->op = MOE_QOP_DIV;
        grp->f = grp->scale = stat[si];
        grp->code = 0;
    } else {
        moe_q_rule_dynamic(s, st, gs, grp);
    }
}

static void stats_of(const float *v, int64_t n, int full, moe_q_stats *st)
{
    stats_acc a;
    stats_init(&a);
    if (full) stats_add(&a, v, n);
    else stats_add_amax(&a, v, n);
    stats_final(&a, st);
}

moe_status moe_cpu_quantize(const moe_quant_spec *spec, const moe_tensor *x, const moe_tensor *static_scale, moe_tensor *q_out, moe_tensor *scale_out, moe_tensor *global_scale_out)
{
    moe_status st = moe_ref_check_quantize(spec, x, static_scale, q_out, scale_out, global_scale_out);
    if (st != MOE_OK) return st;
    moe_q_geom g;
    moe_q_geometry(spec, "x", x->ndim, x->shape, &g);
    const float *xd = x->data;
    const int64_t K = g.K, rows = g.B * g.R;
    const size_t qrb = moe_dtype_row_bytes(spec->elem, K);
    uint8_t *q = q_out->data;
    const int par = rows * K >= CPU_PAR_MIN;
    if (spec->gran == MOE_GRAN_NONE) { /* a plain cast under IEEE RNE */
        moe_dtype d = spec->elem;
#pragma omp parallel for schedule(static) if (par)
        for (int64_t r = 0; r < rows; r++) cpu_store_row(d, q, r * K, K, xd + r * K);
        return MOE_OK;
    }
    if (scale_out->nbytes) memset(scale_out->data, 0, scale_out->nbytes); /* zero padding */
    const int full = spec->rule == MOE_RULE_INT_MINMAX; /* the only rule reading the signed max / min */
    const float *stat = static_scale ? (const float *)static_scale->data : NULL;
    for (int64_t b = 0; b < g.B; b++) {
        const float *xb = xd + b * g.R * K;
        uint8_t *qb = q + (size_t)(b * g.R) * qrb;
        float gs = 1.0f;
        if (spec->use_global_scale) {
            if (stat) {
                gs = stat[b];
            } else {
                moe_q_stats t;
                stats_rows(xb, K, 0, g.R, 0, K, 0, &t);
                gs = moe_q_nvfp4_global(spec, t.amax_prop);
            }
            gs = moe_qc_canon_nan(gs, 0.0f);
            if (global_scale_out) ((float *)global_scale_out->data)[b] = gs;
        }
        if (spec->gran == MOE_GRAN_TENSOR) {
            moe_q_stats t = {0.0f, 0.0f, 0.0f, 0.0f};
            moe_q_group grp;
            if (!stat || spec->rule == MOE_RULE_NVFP4) stats_rows(xb, K, 0, g.R, 0, K, full, &t);
            group_step(spec, stat, b, &t, gs, &grp);
            moe_q_store_scale(spec, &g, scale_out, b, 0, 0, &grp);
#pragma omp parallel for schedule(static) if (par)
            for (int64_t r = 0; r < g.R; r++) put_group(spec, &grp, xb + r * K, K, qb + (size_t)r * qrb, 0);
        } else if (spec->gran == MOE_GRAN_BLOCK) {
            int64_t tiles = g.SR * g.SC;
#pragma omp parallel for schedule(static) if (par)
            for (int64_t i = 0; i < tiles; i++) {
                int64_t sr = i / g.SC, sc = i % g.SC;
                int64_t r0 = sr * g.rh, c0 = sc * g.cw;
                int64_t r1 = r0 + g.rh < g.R ? r0 + g.rh : g.R, c1 = c0 + g.cw < K ? c0 + g.cw : K;
                moe_q_stats t = {0.0f, 0.0f, 0.0f, 0.0f};
                moe_q_group grp;
                if (!stat) {
                    stats_acc a;
                    stats_init(&a);
                    for (int64_t r = r0; r < r1; r++) {
                        if (full) stats_add(&a, xb + r * K + c0, c1 - c0);
                        else stats_add_amax(&a, xb + r * K + c0, c1 - c0);
                    }
                    stats_final(&a, &t);
                }
                group_step(spec, stat, (b * g.SR + sr) * g.SC + sc, &t, gs, &grp);
                moe_q_store_scale(spec, &g, scale_out, b, sr, sc, &grp);
                for (int64_t r = r0; r < r1; r++)
                    put_group(spec, &grp, xb + r * K + c0, c1 - c0, qb + (size_t)r * qrb, c0);
            }
        } else { /* one row per scale row: ROW, GROUP, MX32, NV16 */
#pragma omp parallel for schedule(static) if (par)
            for (int64_t r = 0; r < g.R; r++) {
                uint8_t *qr = qb + (size_t)r * qrb;
                if (spec->elem == MOE_E2M1 || spec->elem == MOE_I4) memset(qr, 0, qrb);
                for (int64_t sc = 0; sc < g.SC; sc++) {
                    int64_t c0 = sc * g.cw, c1 = c0 + g.cw < K ? c0 + g.cw : K;
                    moe_q_stats t = {0.0f, 0.0f, 0.0f, 0.0f};
                    moe_q_group grp;
                    if (!stat || spec->rule == MOE_RULE_NVFP4) stats_of(xb + r * K + c0, c1 - c0, full, &t);
                    group_step(spec, stat, (b * g.SR + r) * g.SC + sc, &t, gs, &grp);
                    moe_q_store_scale(spec, &g, scale_out, b, r, sc, &grp);
                    put_group(spec, &grp, xb + r * K + c0, c1 - c0, qr, c0);
                }
            }
        }
    }
    return MOE_OK;
}

/* ---- dequantize ----------------------------------------------------------------- */

/* out[i] = decode(q element c0 + i of the row) * s, for n elements */
static void get_group(moe_dtype d, const uint8_t *qrow, int64_t c0, int64_t n, float s, float *out)
{
    switch (d) {
    case MOE_F32: {
        const float *p = (const float *)qrow + c0;
        for (int64_t i = 0; i < n; i++) out[i] = p[i] * s;
        return;
    }
    case MOE_BF16: {
        const uint16_t *p = (const uint16_t *)qrow + c0;
        for (int64_t i = 0; i < n; i++) out[i] = cpu_dec_bf16(p[i]) * s;
        return;
    }
    case MOE_F16: {
        const uint16_t *p = (const uint16_t *)qrow + c0;
        for (int64_t i = 0; i < n; i++) out[i] = cpu_dec_f16(p[i]) * s;
        return;
    }
    case MOE_E4M3: {
        const uint8_t *p = qrow + c0;
        for (int64_t i = 0; i < n; i++) out[i] = cpu_dec_e4m3(p[i]) * s;
        return;
    }
    case MOE_I8: {
        const int8_t *p = (const int8_t *)qrow + c0;
        for (int64_t i = 0; i < n; i++) out[i] = (float)p[i] * s;
        return;
    }
    case MOE_E2M1:
        for (int64_t i = 0; i < n; i++) {
            int64_t col = c0 + i;
            uint8_t byte = qrow[col / 2];
            out[i] = cpu_dec_e2m1((col & 1) ? (uint8_t)(byte >> 4) : byte) * s;
        }
        return;
    default: /* I4 */
        for (int64_t i = 0; i < n; i++) {
            int64_t col = c0 + i;
            uint8_t byte = qrow[col / 2];
            uint8_t c = (col & 1) ? (uint8_t)(byte >> 4) : (uint8_t)(byte & 0xF);
            out[i] = (float)((int)c - ((c & 8) ? 16 : 0)) * s;
        }
        return;
    }
}

moe_status moe_cpu_dequantize(const moe_quant_spec *spec, const moe_tensor *q, const moe_tensor *scale, const moe_tensor *global_scale, moe_tensor *x_out)
{
    moe_status st = moe_ref_check_dequantize(spec, q, scale, global_scale, x_out);
    if (st != MOE_OK) return st;
    moe_q_geom g;
    moe_q_geometry(spec, "q", q->ndim, q->shape, &g);
    float *out = x_out->data;
    const int64_t K = g.K, rows = g.B * g.R;
    const size_t qrb = moe_dtype_row_bytes(spec->elem, K);
    const uint8_t *qd = q->data;
    const int par = rows * K >= CPU_PAR_MIN;
    if (spec->gran == MOE_GRAN_NONE) {
        moe_dtype d = spec->elem;
        if (d == MOE_BF16 || d == MOE_F16 || d == MOE_F32) {
#pragma omp parallel for schedule(static) if (par)
            for (int64_t r = 0; r < rows; r++) cpu_load_row(d, qd, r * K, K, out + r * K);
        } else {
#pragma omp parallel for schedule(static) if (par)
            for (int64_t r = 0; r < rows; r++) get_group(d, qd + (size_t)r * qrb, 0, K, 1.0f, out + r * K);
        }
        return MOE_OK;
    }
#pragma omp parallel for schedule(static) if (par)
    for (int64_t row = 0; row < rows; row++) {
        int64_t b = row / g.R, r = row % g.R, sr = r / g.rh;
        float gs = spec->use_global_scale ? ((const float *)global_scale->data)[b] : 1.0f;
        for (int64_t sc = 0; sc < g.SC; sc++) {
            float s = moe_q_scale_at(spec, &g, scale->data, b, sr, sc, gs);
            int64_t c0 = sc * g.cw, c1 = c0 + g.cw < K ? c0 + g.cw : K;
            get_group(spec->elem, qd + (size_t)row * qrb, c0, c1 - c0, s, out + row * K + c0);
        }
    }
    return MOE_OK;
}
