/* Judging a fused experts forward stage by stage (DESIGN section 3: a
 * fused kernel is one more op whose reference is the composition of the
 * unfused ops). A fused path (optimized/cuda/fast.h) runs align, GEMM1 +
 * activation, the 8-bit requantization of h, GEMM2 + router weight and
 * the combine without handing anything back; its workspace still holds
 * every intermediate. The judge takes those intermediates (the trace) and
 * checks each stage on the fast path's own inputs, so no bound has to
 * carry a requantization code flip through the next GEMM (the reason the
 * sweep's e2e rows for reordering backends are stage-wise: tolerance.c):
 *
 *   fused.layout         every slot has its own padded row          EXACT
 *   fused.quant_x        8-bit: x's codes and scales                 EXACT
 *   fused.gemm1_act      h[row of slot s] from x's row and w1        BOUNDED
 *   fused.quant_h        8-bit: h's codes and scales from the trace  EXACT
 *   fused.gemm2_weight   y[row] = rnd(w_s * (h row . w2))            BOUNDED
 *   fused.combine        out[t] = rnd(sum_j y[row of (t, j)]), f32,  EXACT
 *                        j ascending from +0 (deterministic variant)
 *   fused.gemm2_combine  atomic variant: out from h rows, w2, w      BOUNDED
 *
 * Bounds (BOUNDED stages). A GEMM element's f32 sum S: the reference
 * (moe_ref_grouped_gemm on the reference's operands, m_r roundings a
 * term, include/moe/bounds.h) and the fast path (tensor cores, model
 * below) are both near the exact sum, so
 *   |S_fast - S_ref| <= D = [g(m_r) + (tc (1 + tc) + g(mx)) (1 + d) / (1 - d)
 *                           + d / (1 - d)] A + 2 under,
 * A and under from moe_gemm_abs_sums, g(n) = gamma_n at u = 2^-24,
 * mx = ceil(K / 128) + 2 f32 roundings after the tensor cores (k-tile
 * promotions, the two scale products), d the relative distance between
 * the fast path's operands and the scheme's (dev below; gamma_2 for
 * DEQUANT_F32 8-bit schemes: the fast path multiplies codes and scales
 * the sum, the reference rounds q * s per operand), and
 *   tc = steps * (2^(1 - acc_bits) + (k_step + 1) 2^-24)
 * the tensor-core model: a step adds k_step products to the accumulator,
 * aligned to the largest with truncation (at most (k_step + 1) 2^-24 of
 * the step's absolute sum) and its result kept to acc_bits (truncated:
 * 2^(1 - acc_bits) of it); steps = promote_k / k_step when the path
 * promotes to f32 every promote_k products, else K / k_step; integer
 * accumulation is exact (tc = 0). Then a GEMM1 element g lies in
 * [rnd(S_ref - D), rnd(S_ref + D)] (rounding to x's dtype is monotone)
 * and h in rnd(range of act over the g x u box): gated activations are
 * f(g) m(u) with m non-decreasing and f decreasing then non-decreasing
 * (minimum at g*), so the range comes from the box's corners and the
 * grid neighbours of g*, evaluated with moe_ref_activation and widened by
 * 2^-20 relative (f32 roundings of the product between grid points). A
 * GEMM2 element y = rnd(fl(w * S)) lies in rnd(w [S_ref - D, S_ref + D])
 * widened by u; the atomic variant adds the k slots' f32 terms in any
 * order: gamma_k of their absolute sum more.
 *
 * Share of bound: |got - ref| / (the interval's extent from ref on got's
 * side), ref the reference's own value (its h, y or out on the same
 * inputs); <= 1 exactly when got is inside. */
#ifndef MOE_FUSED_JUDGE_H
#define MOE_FUSED_JUDGE_H

#include <stdint.h>
#include "moe/act.h"
#include "moe/compare.h"
#include "moe/quant.h"
#include "moe/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One fused experts problem: M tokens, E experts, top-k, hidden H,
 * intermediate I (per expert), the scheme, a gated activation (layout
 * gate_up: w1 rows are I gate rows, then I up rows) and the combine. */
typedef struct {
    int M, E, topk, H, I;
    moe_scheme scheme;
    moe_act_params act;
    int atomic;             /* 0: deterministic combine, 1: atomic f32 combine */
} moe_fused_problem;

/* Host tensors: x bf16 [M, H]; topk_ids int32 [M, topk]; topk_w f32
 * [M, topk]; w1 [E, 2I, H], w2 [E, H, I] in the scheme's weight elements
 * with their scales as moe_ref_quantize lays them out (NULL for bf16). */
typedef struct {
    const moe_tensor *x, *topk_ids, *topk_w;
    const moe_tensor *w1, *w1_scale, *w2, *w2_scale;
} moe_fused_inputs;

/* The intermediates of one forward (host copies). Rows are padded rows
 * (cap of them); only rows some slot maps to are judged. 8-bit schemes:
 * xq, sx are x's codes [M, H] and scales, hq, sh h's codes [cap, I] and
 * scales ([cap] per row, [cap, I / 128] per group, [1] per tensor),
 * dtypes as moe_ref_quantize gives; other schemes: NULL. y: bf16
 * [cap, H] (deterministic variant; NULL for atomic). */
typedef struct {
    int cap;
    const int32_t *row_of_slot; /* [M * topk] */
    const moe_tensor *h, *xq, *sx, *hq, *sh, *y, *out;
} moe_fused_trace;

/* The fast path's accumulation (see above). */
typedef struct {
    int k_step;     /* products a tensor-core step adds (16 for 16-bit operands, 32 for 8-bit where the
                     * hardware takes them natively: wgmma; sm_90 runs e4m3 mma.sync as f16 steps of 16) */
    int acc_bits;   /* precision a step's result keeps: 24 (f32 width), 14 (Hopper e4m3 wgmma, e8m13) */
    int promote_k;  /* products between f32 promotions; 0: one chain over K */
    int exact;      /* integer accumulation (s32): exact */
    double dev;     /* relative distance of the fast path's weight operand from the scheme's */
} moe_fused_model;

enum { MOE_FUSED_STAGES = 7 };

typedef struct {
    const char *stage;          /* "fused.layout", ... */
    moe_exact_class cls;        /* EXACT or BOUNDED */
    int64_t n, failures;        /* elements judged, elements wrong / outside */
    double share, max_abs;      /* BOUNDED: max share of bound; max |got - ref| (finite pairs) */
    char where[128];            /* the first failure, or "" */
} moe_fused_stage;

typedef struct {
    int n;                      /* stages judged (a failed layout stops the rest) */
    int pass;                   /* every judged stage within its class */
    moe_fused_stage st[MOE_FUSED_STAGES];
} moe_fused_verdict;

/* Judges tr (the fast path's forward of p on in) with the model m.
 * MOE_OK with v filled whether or not the stages pass; bad arguments:
 * the status and a message naming the argument and the rule. */
moe_status moe_fused_judge(const moe_fused_problem *p, const moe_fused_model *m, const moe_fused_inputs *in,
                           const moe_fused_trace *tr, moe_fused_verdict *v);

/* A trace that owns its tensors and row map (tr points into them): the
 * reference composition's below, or a backend's host copies
 * (include/moe/fused_run.h). Free with moe_fused_trace_store_free (also
 * after a failed make: it leaves the store zeroed). */
typedef struct {
    moe_fused_trace tr;
    int32_t *rows;
    moe_tensor h, xq, sx, hq, sh, y, out;
} moe_fused_trace_store;

/* The reference composition of the same forward (slot s on row s, cap =
 * M * topk): the reference's quantization, GEMMs (f32 sums, one rounding
 * to bf16), activation and the fast path's weighting and combine order. */
moe_status moe_fused_ref_trace_make(const moe_fused_problem *p, const moe_fused_inputs *in, moe_fused_trace_store *t);
void moe_fused_trace_store_free(moe_fused_trace_store *t);

#ifdef __cplusplus
}
#endif

#endif
