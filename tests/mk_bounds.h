/* Shared pieces of the modular-kernel bound checks (tests/check_modular*.c):
 * the one-hot read-back of each slot's expert output y_j from
 * moe_ref_forward, the per-element sums over the slots (A = sum |w_j y_j|
 * and its variants), and the bound formulas.
 *
 * Notation (per output element of a token): w_j the f32 router weight of
 * slot j, Y_j its expert's GEMM2 row element rounded to x's dtype (bf16),
 * a_j the f32 GEMM2 accumulator it was rounded from (|a_j - Y_j| <= h(Y_j)),
 * u = 2^-8 (bf16 unit roundoff), v = 2^-24 (f32), d = 2^-150 (half the
 * least f32 subnormal), s = 2^-134 (half the least bf16 subnormal),
 * h(x) half a bf16 ulp at |x| (s below 2^-126), g_n(r) = n r / (1 - n r).
 *
 * Read-back: with the weight 1.0 on slot j and 0.0 on every other slot,
 * moe_ref_forward returns rb(fl32(1 * Y_j) + zeros) = Y_j exactly (the
 * other slots add +-0; row-wise activation scales make Y_j independent of
 * the weights), so Y_j comes from the oracle itself.
 *
 * Rounding-count bound (mkb_bound). Any path that computes sum_j w_j y_j
 * with a tree of products, sums (fl32 adds, fmaf) and roundings to bf16
 * obeys the standard model fl(z) = z (1 + e) + n, |e| <= v or u, |n| <= d
 * or s (e n = 0), so the computed value is sum_j w_j y_j P_j + N, where
 * P_j is the product of the (1 + e) of the nodes on term j's path and N
 * collects the n's, each times the later factors (< 2 for the short paths
 * here). If every term's path meets at most nf f32 and nb bf16 roundings,
 *   |computed - sum_j w_j y_j| <= G(nf, nb) sum_j |w_j y_j| + N,
 *   G(nf, nb) = (1 + v)^nf (1 + u)^nb - 1,
 * and N <= 2 s L (nf + nb), L the number of leaves (every rounding node
 * lies on some leaf's path; s >= d). Comparing a path X (counts nf_x, nb_x,
 * L_x leaves, leaves w_j a_j when it weighs the f32 accumulator, acc = 1,
 * else w_j Y_j) with the oracle O (counts nf_o, nb_o over the k leaves
 * w_j Y_j), through sum w_j Y_j (triangle inequality):
 *   |X - O| <= G(nf_x, nb_x) A_x + G(nf_o, nb_o) A + acc * Hs + eta,
 *   A = sum |w_j Y_j|, A_x = A or (acc) sum |w_j| (|Y_j| + h(Y_j)),
 *   Hs = sum |w_j| h(Y_j) (>= |sum w_j a_j - sum w_j Y_j|),
 *   eta = 2 s [L_x (nf_x + nb_x) + k (nf_o + nb_o)].
 * Each test states the counts of its comparison classes. */
#ifndef MOE_TESTS_MK_BOUNDS_H
#define MOE_TESTS_MK_BOUNDS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "moe/format.h"
#include "moe/forward.h"
#include "moe/tensor.h"

#define MKB_U ldexp(1.0, -8)
#define MKB_V ldexp(1.0, -24)
#define MKB_D ldexp(1.0, -150)
#define MKB_S ldexp(1.0, -134)

/* half a bf16 ulp at |x|: rounding to bf16 never leaves x's binade except
 * to the next power of two, whose half ulp is the larger, so evaluating
 * it at the rounded value covers the error */
static inline double mkb_hulp(double x)
{
    x = fabs(x);
    if (x < ldexp(1.0, -126)) return MKB_S;
    int e;
    frexp(x, &e); /* x = f 2^e, f in [0.5, 1): ulp 2^(e-8) */
    return ldexp(1.0, e - 9);
}

static inline double mkb_gam(int n, double r) { return n * r / (1.0 - n * r); }

/* G(nf, nb) above */
static inline double mkb_round_gamma(int nf, int nb) { return pow(1.0 + MKB_V, nf) * pow(1.0 + MKB_U, nb) - 1.0; }

/* element i of a bf16, f32 (or other decodable) tensor */
static inline double mkb_ld(const moe_tensor *t, int64_t i)
{
    if (t->dtype == MOE_BF16) return moe_bf16_to_f32(((const uint16_t *)t->data)[i]);
    if (t->dtype == MOE_F32) return ((const float *)t->data)[i];
    float v = 0.0f;
    moe_decode_array(t->dtype, (const uint8_t *)t->data + (size_t)i * moe_dtype_row_bytes(t->dtype, 1), 1, &v);
    return v;
}

/* y[0..k): slot j's expert output Y_j [M, H] in out_dtype, read back from
 * moe_ref_forward with base's routing ids (base->topk_ids [M, k]) and the
 * one-hot weight 1.0 on slot j. base->topk_weights is ignored; y[j] is
 * allocated here (free with moe_tensor_free). */
static inline moe_status mkb_read_slots(const moe_forward_args *base, const moe_tensor *x, int k, moe_dtype out_dtype,
                                        moe_tensor *y)
{
    int64_t M = x->shape[0], H = x->shape[1];
    moe_tensor oh;
    moe_status st = moe_tensor_alloc(&oh, MOE_F32, 2, (int64_t[2]){M, k});
    if (st) return st;
    moe_forward_args a = *base;
    a.topk_weights = &oh, a.weights_on_input = 0;
    for (int j = 0; j < k; j++) memset(&y[j], 0, sizeof y[j]);
    for (int j = 0; j < k && st == MOE_OK; j++) {
        memset(oh.data, 0, oh.nbytes);
        for (int64_t t = 0; t < M; t++) ((float *)oh.data)[t * k + j] = 1.0f;
        if ((st = moe_tensor_alloc(&y[j], out_dtype, 2, (int64_t[2]){M, H}))) break;
        st = moe_ref_forward(&a, x, &y[j]);
    }
    moe_tensor_free(&oh);
    return st;
}

/* The slot sums of element (t, h): A, A with the accumulator widening,
 * Hs (see above). w f32 [M, k], y[k] [M, H]. */
typedef struct {
    double A, Aacc, Hs;
} mkb_sums;

static inline mkb_sums mkb_slot_sums(const moe_tensor *w, const moe_tensor *y, int k, int64_t t, int64_t h)
{
    mkb_sums s = {0.0, 0.0, 0.0};
    int64_t H = y[0].shape[1];
    for (int j = 0; j < k; j++) {
        double wj = fabs((double)((const float *)w->data)[t * k + j]), yj = mkb_ld(&y[j], t * H + h);
        s.A += wj * fabs(yj), s.Aacc += wj * (fabs(yj) + mkb_hulp(yj)), s.Hs += wj * mkb_hulp(yj);
    }
    return s;
}

/* The rounding-count bound on |X - O| (see above). */
typedef struct {
    int nf, nb;  /* most f32 / bf16 roundings on one term's path */
    int leaves;  /* leaves of the tree (slots, times ranks where every rank sees every slot) */
    int acc;     /* the path weighs the f32 accumulator a_j, not Y_j */
} mkb_path;

static inline double mkb_bound(const mkb_path *x, const mkb_path *o, const mkb_sums *s)
{
    double Ax = x->acc ? s->Aacc : s->A;
    double eta = 2.0 * MKB_S * (x->leaves * (x->nf + x->nb) + o->leaves * (o->nf + o->nb));
    return mkb_round_gamma(x->nf, x->nb) * Ax + mkb_round_gamma(o->nf, o->nb) * s->A + (x->acc ? s->Hs : 0.0) + eta;
}

#endif
