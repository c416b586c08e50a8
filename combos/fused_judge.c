/* The stage-by-stage judge of a fused experts forward (derivation in
 * include/moe/fused_judge.h). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "moe/bounds.h"
#include "moe/format.h"
#include "fused_internal.h"

#define U32 0x1p-24
#define WIDEN_ACT 0x1p-20 /* f32 roundings of act's product between the evaluated grid points */
#define TINY 0x1p-146     /* a few f32 subnormal steps */

static moe_fused_stage *stage(moe_fused_verdict *v, const char *name, moe_exact_class cls)
{
    moe_fused_stage *st = &v->st[v->n++];
    memset(st, 0, sizeof *st);
    st->stage = name, st->cls = cls;
    return st;
}

static void fail_at(moe_fused_stage *st, const char *fmt, ...)
{
    if (st->failures++) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->where, sizeof st->where, fmt, ap);
    va_end(ap);
}

/* got against [lo, hi] around ref: share and failure */
static int judge_elem(moe_fused_stage *st, double got, double ref, double lo, double hi)
{
    st->n++;
    if (!isfinite(lo) || !isfinite(hi) || !isfinite(ref)) /* no finite bound: the same value or class */
        return got == ref || (got != got && ref != ref) || (isinf(got) && got == ref);
    if (got != got) return 0;
    double d = fabs(got - ref);
    if (d > st->max_abs) st->max_abs = d;
    if (got < lo || got > hi) return st->share = INFINITY, 0;
    if (d > 0) {
        double w = got > ref ? hi - ref : ref - lo, sh = w > 0 ? d / w : INFINITY;
        if (sh > st->share) st->share = sh;
    }
    return 1;
}

/* |S_fast - S_ref| for one GEMM element (fused_judge.h) */
static double gemm_D(const moe_fused_model *m, double dev, int64_t K, int64_t m_r, double A, double under)
{
    double tc = 0.0;
    if (!m->exact) {
        int64_t chain = m->promote_k > 0 && m->promote_k < K ? m->promote_k : K;
        int64_t steps = (chain + m->k_step - 1) / m->k_step;
        tc = (double)steps * (ldexp(1.0, 1 - m->acc_bits) + (double)(m->k_step + 1) * U32);
    }
    double r = (1.0 + dev) / (1.0 - dev);
    return (moe_gamma_f32(m_r) + (tc * (1.0 + tc) + moe_gamma_f32((K + 127) / 128 + 2)) * r + dev / (1.0 - dev)) * A +
           2.0 * under;
}

/* the minimum of the gate function f (fused_judge.h): f decreases before it */
static double gate_min(const moe_act_params *a)
{
    switch (a->act) {
    case MOE_ACT_SILU:
    case MOE_ACT_SWIGLU_CLAMP: return -1.2784645; /* silu'(x) = 0 */
    case MOE_ACT_SWIGLUOAI: return -1.2784645 / a->alpha;
    case MOE_ACT_GELU:
    case MOE_ACT_GELU_TANH: return -0.7517916; /* Phi(x) + x phi(x) = 0 */
    default: return NAN;
    }
}

/* the bf16 value next to v (a bf16 value) towards dir */
static float bf16_next(float v, int dir)
{
    unsigned c = moe_f32_to_bf16(v, MOE_POLICY_IEEE_RNE, NULL);
    if (v == 0.0f) c = dir > 0 ? 0x0001u : 0x8001u;
    else if ((v > 0.0f) == (dir > 0)) c++;
    else c--;
    return moe_bf16_to_f32((uint16_t)c);
}

enum { NG = 5, NPT = 2 * NG + 1 }; /* gate points x up points, plus the reference's own (g, u) */

static void put_bf16(uint16_t *d, float v) { *d = moe_f32_to_bf16(v, MOE_POLICY_IEEE_RNE, NULL); }

/* fused.gemm1_act: h of every slot's row within the act range of its g / u box */
static moe_status judge_gemm1(const moe_fused_problem *p, const moe_fused_model *m, double dev, const fj_info *fi,
                              const moe_fused_inputs *in, const moe_fused_trace *tr, const moe_tensor *xq,
                              const moe_tensor *sx, moe_fused_stage *st)
{
    const int64_t P = fi->P, I = p->I, N = 2 * I, E = P * I;
    int64_t *tok = malloc(sizeof(int64_t) * (size_t)P), m_r = 0;
    moe_tensor a, as, S, pts, vals;
    memset(&a, 0, sizeof a), memset(&as, 0, sizeof as), memset(&S, 0, sizeof S), memset(&pts, 0, sizeof pts);
    memset(&vals, 0, sizeof vals);
    double *A = NULL, *un = NULL;
    moe_status s = tok ? MOE_OK : moe_fail(MOE_ERR_NOMEM, "fused judge: token map");
    for (int64_t i = 0; !s && i < P; i++) tok[i] = i / p->topk;
    if (!s) s = fj_gather(fi->q8 ? xq : in->x, tok, P, 0, &a);
    if (!s && fi->q8) s = fj_gather(sx, tok, P, fi->as.gran == MOE_GRAN_TENSOR, &as);
    if (!s) s = fj_gemm(p, 0, in, &a, fi->q8 ? &as : NULL, &S, &A, &un, &m_r);
    if (!s) s = moe_tensor_alloc(&pts, MOE_BF16, 2, (int64_t[2]){E * NPT, 2});
    if (!s) s = moe_tensor_alloc(&vals, MOE_F32, 2, (int64_t[2]){E * NPT, 1});
    if (s) goto done;
    const float *Sv = S.data;
    const double gs = gate_min(&p->act);
    uint16_t *pt = pts.data;
    for (int64_t e = 0; e < E; e++) {
        const int64_t sl = e / I, i = e % I, gi = sl * N + i, ui = sl * N + I + i;
        const double Dg = gemm_D(m, dev, p->H, m_r, A[gi], un[gi]), Du = gemm_D(m, dev, p->H, m_r, A[ui], un[ui]);
        const float glo = fj_bf16(Sv[gi] - Dg), ghi = fj_bf16(Sv[gi] + Dg);
        const float ulo = fj_bf16(Sv[ui] - Du), uhi = fj_bf16(Sv[ui] + Du);
        float g[NG] = {glo, ghi, glo, glo, glo};
        if (gs == gs) {
            const float c = fj_bf16(gs), nb[3] = {c, bf16_next(c, -1), bf16_next(c, 1)};
            for (int q = 0; q < 3; q++)
                if (nb[q] >= glo && nb[q] <= ghi) g[2 + q] = nb[q];
        }
        uint16_t *row = pt + e * NPT * 2;
        for (int q = 0; q < NG; q++) put_bf16(row + 4 * q, g[q]), put_bf16(row + 4 * q + 1, ulo),
                                     put_bf16(row + 4 * q + 2, g[q]), put_bf16(row + 4 * q + 3, uhi);
        put_bf16(row + 4 * NG, fj_bf16(Sv[gi])), put_bf16(row + 4 * NG + 1, fj_bf16(Sv[ui]));
    }
    moe_act_params act = p->act;
    act.layout = MOE_LAYOUT_GATE_UP;
    if ((s = moe_ref_activation(&pts, NULL, &act, &vals))) goto done;
    const float *v = vals.data;
    for (int64_t e = 0; e < E; e++) {
        const int64_t sl = e / I, i = e % I;
        double lo = INFINITY, hi = -INFINITY;
        for (int q = 0; q < 2 * NG; q++) {
            double x = v[e * NPT + q];
            if (x != x) lo = hi = NAN;
            if (x < lo) lo = x;
            if (x > hi) hi = x;
        }
        lo -= WIDEN_ACT * fabs(lo) + TINY, hi += WIDEN_ACT * fabs(hi) + TINY;
        const int r = tr->row_of_slot[sl];
        const double got = fj_bf16_at(tr->h, (int64_t)r * I + i), ref = fj_bf16(v[e * NPT + 2 * NG]);
        if (!judge_elem(st, got, ref, fj_bf16(lo), fj_bf16(hi)))
            fail_at(st, "slot %lld (token %lld, row %d), column %lld: h %.9g outside [%.9g, %.9g] (reference %.9g)",
                    (long long)sl, (long long)(sl / p->topk), r, (long long)i, got, fj_bf16(lo), fj_bf16(hi), ref);
    }
done:
    free(tok), free(A), free(un);
    moe_tensor_free(&a), moe_tensor_free(&as), moe_tensor_free(&S), moe_tensor_free(&pts), moe_tensor_free(&vals);
    return s;
}

/* byte-exact comparison of a trace tensor with the reference's */
static void judge_bytes(moe_fused_stage *st, const char *what, const moe_tensor *got, const moe_tensor *want,
                        const int64_t *map, int64_t rows, int whole)
{
    int64_t R = want->shape[0], cols = R ? moe_tensor_numel(want) / R : 0;
    size_t eb = moe_dtype_get(want->dtype)->bits / 8; /* byte-sized codes and f32 scales */
    if (!got || got->dtype != want->dtype || moe_tensor_numel(got) < (map ? 0 : moe_tensor_numel(want))) {
        st->n++;
        fail_at(st, "%s: missing, or not %s with %lld elements", what, moe_dtype_get(want->dtype)->name,
                (long long)moe_tensor_numel(want));
        return;
    }
    int64_t gcols = got->shape[0] ? moe_tensor_numel(got) / got->shape[0] : 0;
    for (int64_t r = 0; r < (map ? rows : R); r++) {
        int64_t gr = map ? map[r] : r;
        if (whole) gr = 0; /* one per-tensor scale */
        for (int64_t c = 0; c < cols; c++) {
            st->n++;
            const uint8_t *a = (const uint8_t *)got->data + (size_t)(gr * gcols + c) * eb;
            const uint8_t *b = (const uint8_t *)want->data + (size_t)(r * cols + c) * eb;
            if (memcmp(a, b, eb)) {
                double d = fabs(moe_tensor_value_at(got, gr * gcols + c) - moe_tensor_value_at(want, r * cols + c));
                if (d > st->max_abs) st->max_abs = d;
                fail_at(st, "%s row %lld (trace row %lld), element %lld: %.9g, the reference %.9g", what, (long long)r,
                        (long long)gr, (long long)c, moe_tensor_value_at(got, gr * gcols + c),
                        moe_tensor_value_at(want, r * cols + c));
            }
        }
        if (whole) break;
    }
}

/* GEMM2 with the router weight, and the combine */
static moe_status judge_gemm2(const moe_fused_problem *p, const moe_fused_model *m, double dev, const fj_info *fi,
                              const moe_fused_inputs *in, const moe_fused_trace *tr, const int64_t *rows,
                              moe_fused_verdict *v)
{
    const int64_t P = fi->P, H = p->H;
    moe_tensor a, as, S;
    memset(&a, 0, sizeof a), memset(&as, 0, sizeof as), memset(&S, 0, sizeof S);
    double *A = NULL, *un = NULL;
    int64_t m_r = 0;
    moe_status s = fj_gather(fi->q8 ? tr->hq : tr->h, rows, P, 0, &a);
    if (!s && fi->q8) s = fj_gather(tr->sh, rows, P, fi->as.gran == MOE_GRAN_TENSOR, &as);
    if (!s) s = fj_gemm(p, 1, in, &a, fi->q8 ? &as : NULL, &S, &A, &un, &m_r);
    if (s) goto done;
    const float *Sv = S.data, *w = in->topk_w->data;
    if (!p->atomic) {
        moe_fused_stage *st = stage(v, "fused.gemm2_weight", MOE_CLASS_BOUNDED);
        for (int64_t sl = 0; sl < P; sl++)
            for (int64_t n = 0; n < H; n++) {
                const int64_t e = sl * H + n;
                const double D = gemm_D(m, dev, p->I, m_r, A[e], un[e]);
                double x0 = w[sl] * ((double)Sv[e] - D), x1 = w[sl] * ((double)Sv[e] + D);
                double lo = fmin(x0, x1), hi = fmax(x0, x1);
                lo -= U32 * fabs(lo) + TINY, hi += U32 * fabs(hi) + TINY;
                const double got = fj_bf16_at(tr->y, rows[sl] * H + n), ref = fj_bf16(w[sl] * Sv[e]);
                if (!judge_elem(st, got, ref, fj_bf16(lo), fj_bf16(hi)))
                    fail_at(st, "slot %lld (row %lld), column %lld: y %.9g outside [%.9g, %.9g] (reference %.9g)",
                            (long long)sl, (long long)rows[sl], (long long)n, got, fj_bf16(lo), fj_bf16(hi), ref);
            }
        st = stage(v, "fused.combine", MOE_CLASS_EXACT);
        for (int64_t t = 0; t < p->M; t++)
            for (int64_t n = 0; n < H; n++) {
                float acc = 0.0f;
                for (int j = 0; j < p->topk; j++) acc = acc + fj_bf16_at(tr->y, rows[t * p->topk + j] * H + n);
                const double got = fj_bf16_at(tr->out, t * H + n), ref = fj_bf16(acc);
                st->n++;
                if (got != ref && !(got != got && ref != ref)) {
                    if (fabs(got - ref) > st->max_abs) st->max_abs = fabs(got - ref);
                    fail_at(st, "token %lld, column %lld: out %.9g, the sum of its rows %.9g", (long long)t,
                            (long long)n, got, ref);
                }
            }
        goto done;
    }
    moe_fused_stage *st = stage(v, "fused.gemm2_combine", MOE_CLASS_BOUNDED);
    for (int64_t t = 0; t < p->M; t++)
        for (int64_t n = 0; n < H; n++) {
            double lo = 0.0, hi = 0.0, mag = 0.0;
            float acc = 0.0f;
            for (int j = 0; j < p->topk; j++) {
                const int64_t sl = t * p->topk + j, e = sl * H + n;
                const double D = gemm_D(m, dev, p->I, m_r, A[e], un[e]);
                double x0 = w[sl] * ((double)Sv[e] - D), x1 = w[sl] * ((double)Sv[e] + D);
                double l = fmin(x0, x1), h = fmax(x0, x1);
                l -= U32 * fabs(l) + TINY, h += U32 * fabs(h) + TINY;
                lo += l, hi += h, mag += fmax(fabs(l), fabs(h));
                acc = acc + w[sl] * Sv[e];
            }
            const double slack = moe_gamma_f32(p->topk) * mag * (1.0 + 0x1p-40) + p->topk * TINY;
            const double got = fj_bf16_at(tr->out, t * H + n), ref = fj_bf16(acc);
            if (!judge_elem(st, got, ref, fj_bf16(lo - slack), fj_bf16(hi + slack)))
                fail_at(st, "token %lld, column %lld: out %.9g outside [%.9g, %.9g] (reference %.9g)", (long long)t,
                        (long long)n, got, fj_bf16(lo - slack), fj_bf16(hi + slack), ref);
        }
done:
    free(A), free(un);
    moe_tensor_free(&a), moe_tensor_free(&as), moe_tensor_free(&S);
    return s;
}

static moe_status check_trace(const moe_fused_problem *p, const fj_info *fi, const moe_fused_trace *tr)
{
    if (!tr || !tr->row_of_slot) return moe_fail(MOE_ERR_NULL, "fused trace: the trace and row_of_slot must not be NULL");
    const moe_tensor *need[] = {tr->h, tr->out, p->atomic ? tr->out : tr->y, fi->q8 ? tr->xq : tr->out,
                                fi->q8 ? tr->sx : tr->out, fi->q8 ? tr->hq : tr->out, fi->q8 ? tr->sh : tr->out};
    static const char *const names[] = {"h", "out", "y", "xq", "sx", "hq", "sh"};
    for (int i = 0; i < 7; i++)
        if (!need[i] || !need[i]->data || need[i]->device.kind != MOE_DEVICE_HOST)
            return moe_fail(MOE_ERR_NULL, "fused trace: %s must be a host tensor for scheme %s, %s combine", names[i],
                            moe_scheme_name(p->scheme), p->atomic ? "atomic" : "deterministic");
    moe_status s = moe_tensor_expect_host(tr->h, "trace h", MOE_BF16, 2);
    if (!s && (tr->h->shape[0] != tr->cap || tr->h->shape[1] != p->I))
        s = moe_fail(MOE_ERR_SHAPE, "trace h: shape [%lld, %lld], expected [cap, I] = [%d, %d]", (long long)tr->h->shape[0],
                     (long long)tr->h->shape[1], tr->cap, p->I);
    if (!s && (s = moe_tensor_expect_host(tr->out, "trace out", MOE_BF16, 2)) == MOE_OK &&
        (tr->out->shape[0] != p->M || tr->out->shape[1] != p->H))
        s = moe_fail(MOE_ERR_SHAPE, "trace out: shape [%lld, %lld], expected [M, H] = [%d, %d]",
                     (long long)tr->out->shape[0], (long long)tr->out->shape[1], p->M, p->H);
    if (!s && !p->atomic && (s = moe_tensor_expect_host(tr->y, "trace y", MOE_BF16, 2)) == MOE_OK &&
        (tr->y->shape[0] != tr->cap || tr->y->shape[1] != p->H))
        s = moe_fail(MOE_ERR_SHAPE, "trace y: shape [%lld, %lld], expected [cap, H] = [%d, %d]", (long long)tr->y->shape[0],
                     (long long)tr->y->shape[1], tr->cap, p->H);
    if (!s && fi->q8 && (tr->hq->ndim != 2 || tr->hq->shape[0] != tr->cap || tr->hq->shape[1] != p->I))
        s = moe_fail(MOE_ERR_SHAPE, "trace hq: expected [cap, I] = [%d, %d]", tr->cap, p->I);
    return s;
}

moe_status moe_fused_judge(const moe_fused_problem *p, const moe_fused_model *m, const moe_fused_inputs *in,
                           const moe_fused_trace *tr, moe_fused_verdict *v)
{
    if (!m || !v) return moe_fail(MOE_ERR_NULL, "fused judge: model and verdict must not be NULL");
    if (!m->exact && (m->k_step < 1 || m->acc_bits < 2 || m->acc_bits > 53 || m->promote_k < 0 || !(m->dev >= 0.0) ||
                      m->dev >= 0.5))
        return moe_fail(MOE_ERR_INVALID_ARG, "fused model: k_step %d >= 1, acc_bits %d in [2, 53], promote_k %d >= 0 and "
                        "dev %g in [0, 0.5) are the rules", m->k_step, m->acc_bits, m->promote_k, m->dev);
    memset(v, 0, sizeof *v);
    fj_info fi;
    moe_status s = fj_info_of(p, in, &fi);
    if (s || (s = check_trace(p, &fi, tr))) return s;
    /* the fast path multiplies codes and scales the sums; the reference
     * rounds each dequantized operand (gemm.h DEQUANT_F32) */
    const double dev = m->dev + (fi.q8 && moe_gemm_numerics_of(p->scheme) == MOE_GEMM_DEQUANT_F32 ? moe_gamma_f32(2) : 0.0);
    const int64_t P = fi.P;
    const int tensor = fi.as.gran == MOE_GRAN_TENSOR;
    int64_t *rows = malloc(sizeof(int64_t) * (size_t)P);
    uint8_t *seen = calloc((size_t)(tr->cap > 0 ? tr->cap : 1), 1);
    moe_tensor xq, sx, hq, sh, hr;
    memset(&xq, 0, sizeof xq), memset(&sx, 0, sizeof sx), memset(&hq, 0, sizeof hq), memset(&sh, 0, sizeof sh);
    memset(&hr, 0, sizeof hr);
    if (!rows || !seen) {
        free(rows), free(seen);
        return moe_fail(MOE_ERR_NOMEM, "fused judge: row maps");
    }
    moe_fused_stage *st = stage(v, "fused.layout", MOE_CLASS_EXACT);
    for (int64_t sl = 0; sl < P; sl++) {
        const int r = tr->row_of_slot[sl];
        st->n++;
        rows[sl] = r;
        if (r < 0 || r >= tr->cap || seen[r])
            fail_at(st, "slot %lld: row %d %s", (long long)sl, r, r < 0 || r >= tr->cap ? "outside [0, cap)" : "taken twice");
        else seen[r] = 1;
    }
    if (st->failures) goto done;
    if (fi.q8) {
        st = stage(v, "fused.quant_x", MOE_CLASS_EXACT);
        if ((s = fj_quant(&fi.as, in->x, &xq, &sx))) goto done;
        judge_bytes(st, "x codes", tr->xq, &xq, NULL, 0, 0);
        judge_bytes(st, "x scales", tr->sx, &sx, NULL, 0, tensor);
    }
    st = stage(v, "fused.gemm1_act", MOE_CLASS_BOUNDED);
    if ((s = judge_gemm1(p, m, dev, &fi, in, tr, &xq, &sx, st))) goto done;
    if (fi.q8) { /* the trace's h rows of the slots, quantized by the reference */
        st = stage(v, "fused.quant_h", MOE_CLASS_EXACT);
        if ((s = fj_gather(tr->h, rows, P, 0, &hr)) || (s = fj_quant(&fi.as, &hr, &hq, &sh))) goto done;
        judge_bytes(st, "h codes", tr->hq, &hq, rows, P, 0);
        judge_bytes(st, "h scales", tr->sh, &sh, rows, P, tensor);
    }
    s = judge_gemm2(p, m, dev, &fi, in, tr, rows, v);
done:
    v->pass = 1;
    for (int i = 0; i < v->n; i++)
        if (v->st[i].failures) v->pass = 0;
    free(rows), free(seen);
    moe_tensor_free(&xq), moe_tensor_free(&sx), moe_tensor_free(&hq), moe_tensor_free(&sh), moe_tensor_free(&hr);
    return s;
}
