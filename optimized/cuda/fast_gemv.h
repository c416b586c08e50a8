/* The fast path's one-token forward (fast.h plan.gemv, fast_gemv.cu): two
 * matrix-vector kernels in place of the quantization, GEMM and combine
 * kernels of the M = 1 slot layout. Internal to the CUDA tree: fast.cu
 * fills the two GEMMs' parameters as for its tiles and calls gemv_forward. */
#ifndef MOE_OPTIMIZED_CUDA_FAST_GEMV_H
#define MOE_OPTIMIZED_CUDA_FAST_GEMV_H

#include <cuda_runtime.h>
#include <stdint.h>
#include "moe/quant.h"
#include "fast_gemm.cuh"
#include "fast_plan.h" /* GV_* kinds and limits, fx_gemv_fits: the plan rule checks them without CUDA */

namespace fx {

/* what gemv_forward needs beyond the GEMMs' parameters: x as given (bf16
 * [1, H]), the 8-bit schemes' activation spec and where x's and h's codes
 * and scales go (the workspace's pieces, fast.h, for the trace) */
struct gemv_io {
    const void *x;
    int kind;              /* GV_BF16, GV_FP8 (scales in the epilogue), GV_FP8_BLOCK, GV_I8, GV_W4 (int4, g128), GV_MX4 */
    moe_quant_spec as;     /* 8-bit: the activation spec (x and h) */
    uint8_t *xq, *hq;      /* 8-bit: x's codes [H], h's codes at row j * slot_bm [cap, I] */
    float *sx, *sh;        /* 8-bit: their scales, laid out as the forward's (one, one a row, one a 128-group) */
    int atomic;            /* the atomic variant: out without y */
    void *out;             /* [1, H] bf16 */
};
/* raises the kernels' shared-memory limit (plan_make: not a stream operation) */
cudaError_t gemv_prepare(const gemv_io &io);

/* GEMV1 (g1 as the GATED GEMM1 of the slot layout: w, w_scale and its
 * geometry, act, slot_ids, row_of_slot, slot_bm, E, topk; out = h) then
 * GEMV2 (g2: a = h (bf16), w2, w_scale, topk_w, out = y or NULL) as its
 * programmatic dependent, writing io.out */
cudaError_t gemv_forward(const gemm_params &g1, const gemm_params &g2, const gemv_io &io, cudaStream_t s);

} // namespace fx

#endif
