/* The slot rounding-count bound (derivation in include/moe/slot_bound.h). */
#include "moe/slot_bound.h"
#include <math.h>
#include <string.h>
#include "moe/compare.h"

static int precision(moe_dtype d) { return d == MOE_F32 ? 24 : d == MOE_F16 ? 11 : 8; }
static int emin(moe_dtype d) { return d == MOE_F16 ? -14 : -126; }

double moe_unit_roundoff(moe_dtype d) { return ldexp(1.0, -precision(d)); }
double moe_half_min_subnormal(moe_dtype d) { return ldexp(1.0, emin(d) - precision(d)); }

/* rounding never leaves x's binade except to the next power of two, whose
 * half ulp is the larger, so evaluating at the rounded value covers it */
double moe_half_ulp(moe_dtype d, double x)
{
    x = fabs(x);
    if (x < ldexp(1.0, emin(d))) return moe_half_min_subnormal(d);
    int e;
    frexp(x, &e); /* x = f 2^e, f in [0.5, 1): ulp 2^(e - p) */
    return ldexp(1.0, e - precision(d) - 1);
}

moe_status moe_slot_read(const moe_forward_args *base, const moe_tensor *x, int k, moe_tensor *y)
{
    for (int j = 0; j < k; j++) memset(&y[j], 0, sizeof y[j]);
    if (!base || !x || !y || k < 1) return moe_fail(MOE_ERR_NULL, "moe_slot_read: base, x, y and k >= 1 are needed");
    int64_t M = x->shape[0], H = x->shape[1];
    moe_tensor oh;
    moe_status st = moe_tensor_alloc(&oh, MOE_F32, 2, (int64_t[2]){M, k});
    if (st) return st;
    moe_forward_args a = *base;
    a.topk_weights = &oh, a.weights_on_input = 0;
    for (int j = 0; j < k && st == MOE_OK; j++) {
        memset(oh.data, 0, oh.nbytes);
        for (int64_t t = 0; t < M; t++) ((float *)oh.data)[t * k + j] = 1.0f;
        if ((st = moe_tensor_alloc(&y[j], x->dtype, 2, (int64_t[2]){M, H}))) break;
        st = moe_ref_forward(&a, x, &y[j]);
    }
    moe_tensor_free(&oh);
    return st;
}

moe_slot_sums moe_slot_sums_at(const moe_tensor *w, const moe_tensor *y, int k, int64_t t, int64_t h)
{
    moe_slot_sums s = {0.0, 0.0, 0.0};
    int64_t H = y[0].shape[1];
    for (int j = 0; j < k; j++) {
        double wj = fabs((double)((const float *)w->data)[t * k + j]), yj = moe_tensor_value_at(&y[j], t * H + h);
        double hj = moe_half_ulp(y[0].dtype, yj);
        s.A += wj * fabs(yj), s.Aacc += wj * (fabs(yj) + hj), s.Hs += wj * hj;
    }
    return s;
}

moe_slot_sums moe_slot_sums_rows(const moe_tensor *w, const moe_tensor *rows, int k, int64_t t, int64_t h)
{
    moe_slot_sums s = {0.0, 0.0, 0.0};
    int64_t H = rows->shape[1];
    for (int j = 0; j < k; j++) {
        double wj = fabs((double)((const float *)w->data)[t * k + j]);
        double yj = moe_tensor_value_at(rows, (t * k + j) * H + h), hj = moe_half_ulp(rows->dtype, yj);
        s.A += wj * fabs(yj), s.Aacc += wj * (fabs(yj) + hj), s.Hs += wj * hj;
    }
    return s;
}

/* G(nf, nb); the harness asks for the same counts element after element,
 * so the last value per thread is kept */
static double round_gamma(moe_dtype d, int nf, int nb)
{
    static _Thread_local struct {
        moe_dtype d;
        int nf, nb, valid;
        double g;
    } memo[2];
    for (int i = 0; i < 2; i++)
        if (memo[i].valid && memo[i].d == d && memo[i].nf == nf && memo[i].nb == nb) return memo[i].g;
    double g = pow(1.0 + ldexp(1.0, -24), nf) * pow(1.0 + moe_unit_roundoff(d), nb) - 1.0;
    memo[1] = memo[0];
    memo[0].d = d, memo[0].nf = nf, memo[0].nb = nb, memo[0].valid = 1, memo[0].g = g;
    return g;
}

double moe_slot_bound(moe_dtype d, const moe_slot_path *x, const moe_slot_path *o, const moe_slot_sums *s)
{
    double Ax = x->acc ? s->Aacc : s->A, sub = moe_half_min_subnormal(d);
    double eta = 2.0 * sub * (x->leaves * (x->nf + x->nb) + o->leaves * (o->nf + o->nb));
    return round_gamma(d, x->nf, x->nb) * Ax + round_gamma(d, o->nf, o->nb) * s->A + (x->acc ? s->Hs : 0.0) + eta;
}
