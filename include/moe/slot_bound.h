/* The rounding-count bound of a modular-kernel forward against
 * moe_ref_forward (the sweep's BOUNDED e2e classes, tolerance rows
 * "e2e.*"). Every experts type computes the oracle's per-slot expert
 * outputs Y_j bit for bit (the same rows, the same scales: the sweep picks
 * the oracle's quantization domains to match the type); only the weighting
 * and the reduction over the k slots of a token differ.
 *
 * Notation (per output element of a token): w_j the f32 router weight of
 * slot j, Y_j its expert's GEMM2 output element rounded to x's storage
 * dtype X, a_j the f32 GEMM2 accumulator it was rounded from
 * (|a_j - Y_j| <= h(Y_j)), u = 2^-p (X's unit roundoff, p its precision),
 * v = 2^-24 (f32), s = 2^(emin - p) (half X's least subnormal, >= f32's
 * 2^-150), h(x) half an X ulp at |x| (s below X's least normal).
 *
 * Read-back: with the weight 1.0 on slot j and 0.0 on every other slot,
 * moe_ref_forward returns rX(fl32(1 * Y_j) + zeros) = Y_j exactly (the
 * other slots add +-0; activation scales do not depend on the router
 * weights), so Y_j comes from the oracle itself (moe_slot_read).
 *
 * Bound. Any path that computes sum_j w_j y_j with a tree of products,
 * sums (f32 adds, fmaf) and roundings to X obeys the standard model
 * fl(z) = z (1 + e) + n, |e| <= v or u, |n| <= s (e n = 0), so the
 * computed value is sum_j w_j y_j P_j + N, P_j the product of the (1 + e)
 * on term j's path, N the n's times the later factors (< 2 here). If
 * every term's path meets at most nf f32 and nb X roundings,
 *   |computed - sum_j w_j y_j| <= G(nf, nb) sum_j |w_j y_j| + N,
 *   G(nf, nb) = (1 + v)^nf (1 + u)^nb - 1,  N <= 2 s L (nf + nb),
 * L the number of leaves. Comparing a path X (nf_x, nb_x, L_x; acc = 1
 * when it weighs the f32 accumulator a_j instead of Y_j) with the oracle
 * O (nf_o, nb_o over its k leaves w_j Y_j) through sum w_j Y_j:
 *   |X - O| <= G(nf_x, nb_x) A_x + G(nf_o, nb_o) A + acc Hs + eta,
 *   A = sum |w_j Y_j|, A_x = A, or (acc) sum |w_j| (|Y_j| + h(Y_j)),
 *   Hs = sum |w_j| h(Y_j) (>= |sum w_j a_j - sum w_j Y_j|),
 *   eta = 2 s [L_x (nf_x + nb_x) + k (nf_o + nb_o)]. */
#ifndef MOE_SLOT_BOUND_H
#define MOE_SLOT_BOUND_H

#include "moe/forward.h"
#include "moe/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Half an ulp of storage dtype d (f32, bf16, f16) at |x|. */
double moe_half_ulp(moe_dtype d, double x);
/* u and s of d above. */
double moe_unit_roundoff(moe_dtype d);
double moe_half_min_subnormal(moe_dtype d);

typedef struct {
    int nf, nb;  /* most f32 / X roundings on one term's path */
    int leaves;  /* leaves of the tree */
    int acc;     /* the path weighs the f32 accumulator a_j, not Y_j */
} moe_slot_path;

typedef struct {
    double A, Aacc, Hs;
} moe_slot_sums;

/* y[0..k): slot j's expert output Y_j [M, H] in x's dtype, read back from
 * moe_ref_forward with base's ids and the one-hot weight 1.0 on slot j
 * (base->topk_weights is ignored). y[j] allocated here (moe_tensor_free). */
moe_status moe_slot_read(const moe_forward_args *base, const moe_tensor *x, int k, moe_tensor *y);

/* The slot sums of element (t, h): w f32 [M, k], y[k] [M, H]. */
moe_slot_sums moe_slot_sums_at(const moe_tensor *w, const moe_tensor *y, int k, int64_t t, int64_t h);

/* The same from moe_forward_args.slot_rows ([M*k, H], row t*k + j): one
 * oracle run instead of k read-backs (check_forward shows both agree). */
moe_slot_sums moe_slot_sums_rows(const moe_tensor *w, const moe_tensor *rows, int k, int64_t t, int64_t h);

/* The bound on |X - O| above, X's storage dtype d. */
double moe_slot_bound(moe_dtype d, const moe_slot_path *x, const moe_slot_path *o, const moe_slot_sums *s);

#ifdef __cplusplus
}
#endif

#endif
