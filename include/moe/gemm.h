/* The grouped GEMM of the experts: row p of the activations times the
 * weight matrix of its expert, with the dequantization of every scheme.
 *
 * Accumulation is fp32 from 0, k ascending, one fmaf per product; the
 * scheme decides where the scales enter (moe_gemm_numerics_of):
 *   DEQUANT_F32   both operands dequantized to f32 first (moe_ref_dequantize:
 *                 decode(q) * scale, one rounding), then the dot product:
 *                 vLLM's torch reference for per-tensor / per-token / channel
 *                 fp8 and int8 (tests/kernels/utils.py torch_experts), and
 *                 the emulation references of MX and NVFP4.
 *   BLOCK_TILES   per 128-wide k tile: t = dot of decoded elements from 0,
 *                 acc = acc + (t * a_scale[p, tile]) * w_scale[e, n/128,
 *                 tile]: vLLM's native_w8a8_block_matmul and Triton's
 *                 block-fp8 loop (fp8_wblock128_agroup128).
 *   WEIGHT_TO_ACT weight-only schemes: w = round_to_act_dtype(decode(q) *
 *                 scale), Triton's (b * scale).to(compute_type); the
 *                 activations are used as stored.
 * The result is acc (+ bias[e, n] in f32) rounded once to out's dtype. */
#ifndef MOE_GEMM_H
#define MOE_GEMM_H

#include "moe/quant.h"
#include "moe/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MOE_GEMM_DEQUANT_F32 = 0,
    MOE_GEMM_BLOCK_TILES,
    MOE_GEMM_WEIGHT_TO_ACT,
    MOE_GEMM_NUMERICS_COUNT
} moe_gemm_numerics;

moe_gemm_numerics moe_gemm_numerics_of(moe_scheme s);
const char *moe_gemm_numerics_name(moe_gemm_numerics n);

typedef struct {
    moe_scheme scheme;
    const moe_tensor *a;          /* [P, K]: the scheme's activation elements */
    const moe_tensor *a_scale;    /* its scales for these P rows (NULL if none) */
    const moe_tensor *a_global;   /* NVFP4 global scale of the activations, or NULL */
    const moe_tensor *w;          /* [E, N, K]: the scheme's weight elements */
    const moe_tensor *w_scale;    /* [E, ...] weight scales (NULL if none) */
    const moe_tensor *w_global;   /* NVFP4 [E] global scales, or NULL */
    const moe_tensor *row_expert; /* int32 [P]: row's expert in [0, E), -1: zero row */
    const moe_tensor *bias;       /* f32 [E, N] or NULL */
} moe_gemm_args;

/* out [P, N] (f32, bf16 or f16) = the rows' products, as described above. */
moe_status moe_ref_grouped_gemm(const moe_gemm_args *g, moe_tensor *out);

/* The argument checks of moe_ref_grouped_gemm, shared by every backend's
 * grouped GEMM so that bad input gets the same status and message on all
 * of them: MOE_OK exactly when moe_ref_grouped_gemm would return MOE_OK
 * (barring allocation failure), else its status. In order: the arguments'
 * dtypes, ranks and shapes, bias, the scale tensors' presence and leading
 * dims, row_expert's range; then, when P > 0 and N > 0, the operands'
 * dequantization arguments as moe_ref_dequantize checks them (activations
 * first; the weights of one expert's slice when some row has an expert),
 * or for BLOCK_TILES the f32 tile scales (a_scale P * ceil(K/128) values,
 * w_scale E * ceil(N/128) * ceil(K/128)). Reads row_expert, no other data. */
moe_status moe_gemm_check(const moe_gemm_args *g, const moe_tensor *out);

#ifdef __cplusplus
}
#endif

#endif
