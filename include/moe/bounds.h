/* The BOUNDED comparison of a grouped GEMM (tolerance rows cpu.grouped_gemm
 * and cuda-fast.grouped_gemm): a per-element bound on |got - ref| where ref
 * is moe_ref_grouped_gemm's output and got a backend's output for the same
 * arguments, computed in another summation order.
 *
 * Model (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed.,
 * sections 2.2 and 3.1). f32 arithmetic obeys fl(z) = z (1 + d) + n with
 * |d| <= u = 2^-24, |n| <= 2^-150 and d n = 0; n is non-zero only when a
 * product or an fmaf underflows (an add or subtract whose result is
 * subnormal is exact). A value built from terms x_i by products, fmaf and
 * adds in any tree is sum_i x_i P_i + N, where P_i is the product of the
 * (1 + d) on term i's path. If every path meets at most m roundings,
 * |P_i - 1| <= gamma_m = m u / (1 - m u) (Lemma 3.1), so
 *   |computed - sum_i x_i| <= gamma_m A + |N|,   A = sum_i |x_i|,
 * and |N| <= 2^-149 * (the rounding nodes that can underflow), each n being
 * scaled by later factors (1 + u)^m < 2 (m u < 1/2 is required; beyond,
 * the bound is +inf).
 *
 * Terms, as the reference defines the operands for the scheme (gemm.h):
 *   DEQUANT_F32    x_k = a_k w_k, a and w the reference's f32 dequantized
 *                  operands (decode(q) * scale rounded once; plain values
 *                  for unscaled storage). Reference path: fmaf chain from 0,
 *                  k ascending; term k meets its own fmaf and every later
 *                  one: at most m = K roundings; K fmaf nodes may underflow.
 *   WEIGHT_TO_ACT  the same with w = round_to_act_dtype(dequantized w) and
 *                  a as stored: m = K.
 *   BLOCK_TILES    x_k = a_k w_k s_t v_t for k in tile t (128 wide along K),
 *                  a_k, w_k the decoded elements, s_t = a_scale[p, t],
 *                  v_t = w_scale[e, n/128, t] (f32, exact). Reference path
 *                  per term: the tile's fmaf chain from 0 (L = min(128, K)
 *                  products: at most L roundings), one rounding of
 *                  part * s_t, one of (part s_t) * v_t, then the adds into
 *                  acc of tiles max(t, 1) .. kt-1 (the add of tile 0 to
 *                  +0 is exact): at most kt - 1. m = L + 2 + (kt - 1) =
 *                  L + kt + 1, kt = ceil(K / 128); K + 2 kt nodes may
 *                  underflow, and the n of a tile's fmaf is then scaled
 *                  by s_t v_t: it counts |s_t v_t| (times the tile's
 *                  length) instead of 1. (Decoded e4m3 products are
 *                  multiples of 2^-18, so these sums never underflow;
 *                  the term costs nothing and keeps the bound general.)
 *   bias           acc + bias[e, n] in f32: one more rounding on every
 *                  term's path (m + 1) and |b| u for the bias itself.
 *
 * Two computations. The backend is assumed to compute the same sum from the
 * same operands either with at most m roundings on any term's path (any
 * order, blocking, split-K, products fused or rounded: within gamma_m A of
 * the exact value), or as a chain of tensor-core steps of 16 or more
 * products each, aligned to the largest with truncation into an f32-wide
 * accumulator (include/moe/fused_judge.h's step model, measured on an
 * H200 for mma.sync bf16 m16n8k16 by check_gpu_fast's
 * mma_steps_within_model: a step errs by at most 2^-23 + 17 2^-24 of its
 * absolute sum, so the chain by t (1 + t) A with t = ceil(m / 16) (2^-23 +
 * 17 2^-24), about 1.19 gamma_m; round-to-nearest's gamma_m is exceeded).
 * With gamma_b = max(gamma_m, t (1 + t)):
 *   D = (gamma_m + gamma_b) A + 2 u |b| + 2^-148 * nodes   (|c_b - c_r| <= D)
 * (nodes weighted by |s_t v_t| for BLOCK_TILES as above).
 * The sum of both is not slack: two orders can err in opposite directions.
 * Output rounding (f32 out: none; bf16 / f16: RNE once):
 *   |rnd(c_r) - c_r| <= h(ref)   (half an ulp of out's dtype at |ref|:
 *       rounding leaves the binade only up to a power of two, whose half
 *       ulp is the larger; moe_half_ulp in slot_bound.h),
 *   |rnd(c_b) - c_b| <= h(|ref| + h(ref) + D)   (h is non-decreasing in
 *       |x| and |c_b| <= |c_r| + D <= |ref| + h(ref) + D),
 * so bound = D + h(ref) + h(|ref| + h(ref) + D). Both output roundings
 * count: two accumulators a hair apart on either side of a rounding
 * midpoint give outputs a whole ulp apart, which "gamma_K A + half an
 * ulp" (one computation against the exact value) would call a failure.
 *
 * A is summed in double: products of two f32 are exact there, the four-
 * factor BLOCK_TILES products and the sum err by at most (K + 3) 2^-53
 * relatively; A is scaled by 1 + (K + 4) 2^-52 to stay an upper bound.
 * Rows with row_expert -1 are zero in the reference: bound 0. A non-finite
 * ref or A: +inf (the comparison checks the class of non-finite values).
 *
 * Not covered: accumulators narrower than f32 (Hopper fp8 tensor-core
 * accumulation keeps fewer mantissa bits than f32 between promotions: the
 * fused path's e4m3 wgmma tiles, judged by fused_judge.h instead), and
 * backends that dequantize differently from the scheme's definition (e.g.
 * scales applied in an epilogue where the reference dequantizes first):
 * those need their own rows with their own counts. */
#ifndef MOE_BOUNDS_H
#define MOE_BOUNDS_H

#include <stdint.h>
#include "moe/gemm.h"
#include "moe/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* gamma_n = n u / (1 - n u) with u = 2^-24; +inf when n u >= 1/2. */
/* gamma_n = n u / (1 - n u) (Higham 3.1) for unit roundoff u; +inf when
 * n u >= 1/2 or n < 0. moe_gamma_f32: u = 2^-24. */
double moe_gamma(int64_t n, double u);
double moe_gamma_f32(int64_t n);

/* The counts above for g: m (most roundings on one term's path, bias
 * included) and the nodes that can underflow, per output element. */
moe_status moe_gemm_bound_counts(const moe_gemm_args *g, int64_t *m, int64_t *nodes);

/* bound[p * N + n] for every element of ref_out [P, N] (f32, bf16 or f16:
 * moe_ref_grouped_gemm's output for g). g's tensors and ref_out are host
 * tensors; bound holds P * N doubles. Bad arguments: the status and a
 * message naming the argument, as moe_ref_grouped_gemm would. */
moe_status moe_gemm_bound(const moe_gemm_args *g, const moe_tensor *ref_out, double *bound);

/* The pieces of that bound per output element p * N + n: A (sum |x_k| over
 * the scheme's terms, widened to stay an upper bound) and the underflow
 * term (2^-148 * nodes, BLOCK_TILES-weighted); rows with row_expert -1: 0.
 * For derivations whose second computation has other counts (the fused
 * path's judge, include/moe/fused_judge.h). A and under hold P * N. */
moe_status moe_gemm_abs_sums(const moe_gemm_args *g, double *A, double *under);

#ifdef __cplusplus
}
#endif

#endif
