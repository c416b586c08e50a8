/* Pieces shared by the fused judge (fused_judge.c) and the reference
 * composition it is judged against (fused_trace.c): both build the same
 * per-slot GEMM operands and quantize the same way. */
#ifndef MOE_COMBOS_FUSED_INTERNAL_H
#define MOE_COMBOS_FUSED_INTERNAL_H

#include "moe/fused_judge.h"
#include "moe/gemm.h"

typedef struct {
    int q8;                 /* x and h quantized to 8-bit codes */
    moe_quant_spec as;      /* the activation spec (q8) */
    int64_t P;              /* slots: M * topk */
} fj_info;

moe_status fj_info_of(const moe_fused_problem *p, const moe_fused_inputs *in, fj_info *fi);

/* dst [P, cols] = src rows map[i] (src [R, cols] of any byte-sized dtype,
 * cols = numel / shape[0]); whole: src is one per-tensor scale, copied as
 * [1, 1] */
moe_status fj_gather(const moe_tensor *src, const int64_t *map, int64_t P, int whole, moe_tensor *dst);

/* codes and scales of rows [R, K] (a bf16 tensor, read as f32) under the
 * activation spec, over all R rows for a per-tensor scale */
moe_status fj_quant(const moe_quant_spec *as, const moe_tensor *rows, moe_tensor *q, moe_tensor *s);

/* S f32 [P, N] = the reference GEMM of the slots' rows a (and a_scale)
 * with w / w_scale (GEMM1: w1, N = 2I; GEMM2: w2, N = H); with A and
 * under non-NULL also moe_gemm_abs_sums (malloc'd, P * N) and *m_r */
moe_status fj_gemm(const moe_fused_problem *p, int second, const moe_fused_inputs *in, const moe_tensor *a,
                   const moe_tensor *a_scale, moe_tensor *S, double **A, double **under, int64_t *m_r);

/* round to bf16 (RNE) through f32: monotone */
float fj_bf16(double v);
float fj_bf16_at(const moe_tensor *t, int64_t i);

#endif
