/* Quantization schemes and the reference quantize / dequantize stage
 * (DESIGN section 4, "quantize").
 *
 * Operands. Activations are [M, K] rows (M tokens, K the reduction dim).
 * Weights are [E, N, K]: E experts, N output features, K the reduction dim;
 * every weight scale is per expert (per-tensor = one scale per expert).
 * Inputs are f32 tensors; callers holding bf16 data pass its exact f32
 * value (upstream kernels read bf16 and widen it, which is exact).
 *
 * A scheme names a (weight spec, activation spec) pair. A spec is data: the
 * element format, the scale granularity, the scale's dtype and layout, and
 * a named scale rule whose every floor, epsilon and rounding is a field.
 * The scheme table in reference/quant_scheme.c says which upstream code
 * each row models; the rules are written out below, with the place of each
 * rounding. All arithmetic is f32 with round-to-nearest-even, one rounding
 * per written operation, in the order written; "/" is IEEE division,
 * "rcp(s)" is the f32 value of 1/s, "cvt" is the named conversion policy of
 * include/moe/format.h (E4M3_SAT_RNE, E2M1_SAT_RNE, int RNE with clamp).
 * Exponents come from float bits (frexpf), never from a libm logarithm.
 *
 * Scale rules (a = the group's amax under the spec's amax_nan policy):
 *   AMAX_QMAX    vLLM dynamic per-tensor scaled_fp8_quant: s = a / 448 (no
 *                floor: an all-zero tensor gets s = 0); q = cvt(clamp(x *
 *                rcp(s))). With s = 0, x * rcp(s) = 0 * Inf = NaN, which
 *                vLLM's fmin/fmax clamp turns into +448; dequant 448 * 0 = 0.
 *   VLLM_TOKEN   vLLM dynamic per-token (and per-channel weights, which its
 *                tests quantize with the per-token kernel): s = fmaxf(a /
 *                448, scale_floor = 1/(448*512)); q = cvt(clamp(x / s)).
 *                The optional scale_ub (min(amax, ub)) is not modelled.
 *   GROUP_EPS    vLLM per_token_group_quant_fp8 (1 x 128): a = fmaxf(eps =
 *                1e-10, max|x|); s = a / 448; with pow2_scale (UE8M0,
 *                DeepGEMM on Blackwell) s = ceil_pow2(fmaxf(s, pow2_floor =
 *                1e-10)); q = cvt(clamp(x / s)).
 *   BLOCK_FLOOR  vLLM test helper per_block_cast_to_fp8 (128 x 128 weight
 *                tiles, partial edge tiles allowed = zero padding):
 *                a = max(amax, amax_floor = 1e-4); q = cvt(x * (448 / a));
 *                stored s = a / 448. (The anchor paraphrases the element
 *                step as x * (1/s); the helper's code multiplies by 448/a,
 *                which can differ in the last bit, and that is modelled.)
 *   INT_TOKEN    vLLM per_token_quant_int8 / dynamic scaled_int8_quant:
 *                a = max(amax, amax_floor = 1e-10); q = i8_RNE(x * (127 /
 *                a)); stored s = a / 127.
 *   INT_MINMAX   vLLM quantize_weights (tests' GPTQ-style symmetric
 *                uint4b8 / uint8b128, no zero point): s = max(|max(x) /
 *                qmax|, |min(x) / qmin|) with signed max/min; q =
 *                clamp(RNE(x / s), qmin, qmax). s = 0 (all zero) gives
 *                x / 0 = NaN and the int conversion's NaN rule gives 0.
 *   MX_OCP_FLOOR OCP MX v1.0 6.3 / microxcaling: e = floor(log2 a) -
 *                emax_elem (8 for e4m3, 2 for e2m1), clamped below at -127;
 *                a = 0 gives -127; a Inf or NaN gives the NaN scale 0xFF.
 *                Clips on purpose: amax mantissas above 1.75 (e4m3) or 1.5
 *                (e2m1) saturate.
 *   MX_CEIL_POW2 NVIDIA (TRT-LLM quantizer, cuDNN): t = a / elem_max (448 or
 *                6), e = ceil(log2 t) clamped to [-127, 127]; never clips.
 *                Both MX rules: q = cvt(x * 2^-e) (exact), scale code e+127.
 *   NVFP4        two-level (vLLM ref_nvfp4_quant, TRT-LLM cvt_warp_fp16_to_
 *                fp4): global gs = 2688 / max(amax_tensor, 1e-12) (or the
 *                static scale); per 16: sf = e4m3_SAT_RNE(gs * (a *
 *                rcp(6))); out = rcp0(f32(sf) * rcp0(gs)) with rcp0(0) = 0;
 *                q = e2m1_SAT_RNE(x * out); dequant x = q * (f32(sf) / gs).
 *                Without a global scale gs is absent: sf = e4m3(a * rcp(6)),
 *                out = rcp0(sf), dequant q * sf.
 *   DEEPEP_LL    DeepEP low-latency dispatch FP8 cast per 128 channels:
 *                a = fmaxf(1e-4, max|x|). Default: scale_inv = a *
 *                rcp(448) (kFinfoAmaxInvE4M3 = 1/448.0f; the decimal
 *                0.0022321428f is one ULP lower), scale = 448 / a.
 *                round_scale: e = ceil(log2(a * rcp(448))) from the bits,
 *                scale = 2^-e, scale_inv = 2^e. q = cvt(x * scale); stored
 *                scale_inv (f32) or, with UE8M0, its exponent byte packed 4
 *                per int32.
 * Static scales (a caller-given s of the scale's shape) quantize every rule
 * that takes one as q = cvt(clamp(x / s)) (vLLM's static kernels); for
 * NVFP4 the static scale is the global scale gs.
 *
 * NaN and Inf, per spec field: amax_nan says whether a NaN element makes
 * the amax NaN (torch.amax) or is skipped (CUDA fmaxf reductions); clamp
 * says what the pre-cast clamp does with NaN (vLLM scaled_fp8_conversion's
 * fmax(-448, fmin(v, 448)) gives +448, per_token_group_quant's
 * fmin(fmax(v, -448), 448) gives -448, torch.clamp keeps NaN). A NaN made
 * by arithmetic is given a fixed sign (+, or the input's if the input was
 * NaN) before conversion, since IEEE 754 leaves it open.
 *
 * Known differences from upstream, each a deliberate exact choice:
 *   - GROUP_EPS UE8M0 uses the exact ceil(log2) of the f32 bits; vLLM's
 *     exp2f(ceilf(log2f(s))) can return 2^k instead of 2^(k+1) when s is
 *     within a few ULPs above 2^k (log2f rounds to the integer k).
 *   - INT_TOKEN rounds ties to even; vLLM's Triton per_token_quant_int8
 *     rounds them away from zero (libdevice.round); its CUDA kernel uses
 *     cvt.rni (even) and has no 1e-10 floor.
 *   - MX_OCP_FLOOR takes floor(log2 amax) exactly; microxcaling adds
 *     FP32_MIN_NORMAL first, which differs only for amax below 2^-101 within
 *     half an ULP of a power of two.
 *   - NVFP4 uses IEEE reciprocals; TRT-LLM's kernel uses rcp.approx.ftz.
 *   - E2M1 conversion of NaN gives +6 (the ONNX rule of format.h). */
#ifndef MOE_QUANT_H
#define MOE_QUANT_H

#include <stdint.h>
#include "moe/dtype.h"
#include "moe/status.h"
#include "moe/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MOE_SCHEME_F32 = 0,
    MOE_SCHEME_BF16,
    MOE_SCHEME_F16,
    MOE_SCHEME_FP8_WTENSOR_ATENSOR,
    MOE_SCHEME_FP8_WCHANNEL_ATENSOR,
    MOE_SCHEME_FP8_WCHANNEL_ATOKEN,
    MOE_SCHEME_FP8_WTENSOR_ATOKEN,
    MOE_SCHEME_FP8_WBLOCK128_AGROUP128,
    MOE_SCHEME_INT8_WCHANNEL_ATOKEN,
    MOE_SCHEME_W8A16_CHANNEL,
    MOE_SCHEME_W4A16_G32,
    MOE_SCHEME_W4A16_G64,
    MOE_SCHEME_W4A16_G128,
    MOE_SCHEME_W4AFP8_G128,
    MOE_SCHEME_MXFP8,
    MOE_SCHEME_MXFP4_W4A16,
    MOE_SCHEME_MXFP4_MXFP8,
    MOE_SCHEME_NVFP4,
    MOE_SCHEME_COUNT
} moe_scheme;

typedef enum { MOE_OPERAND_WEIGHT = 0, MOE_OPERAND_ACT = 1 } moe_operand;

/* Which elements share one scale. */
typedef enum {
    MOE_GRAN_NONE = 0, /* no scale: a plain cast (f32, bf16, f16) */
    MOE_GRAN_TENSOR,   /* one per activation tensor / one per expert */
    MOE_GRAN_ROW,      /* one per token row / per output channel (row of N) */
    MOE_GRAN_GROUP,    /* one per group_k consecutive elements along K */
    MOE_GRAN_BLOCK,    /* one per block_n x group_k tile (weights only) */
    MOE_GRAN_MX32,     /* OCP MX: 32 along K, E8M0 scale */
    MOE_GRAN_NV16,     /* NVFP4: 16 along K, E4M3 scale */
    MOE_GRAN_COUNT
} moe_scale_gran;

typedef enum {
    MOE_RULE_NONE = 0,
    MOE_RULE_AMAX_QMAX,
    MOE_RULE_VLLM_TOKEN,
    MOE_RULE_GROUP_EPS,
    MOE_RULE_BLOCK_FLOOR,
    MOE_RULE_INT_TOKEN,
    MOE_RULE_INT_MINMAX,
    MOE_RULE_MX_OCP_FLOOR,
    MOE_RULE_MX_CEIL_POW2,
    MOE_RULE_NVFP4,
    MOE_RULE_DEEPEP_LL,
    MOE_RULE_COUNT
} moe_scale_rule;

/* Where a scale lives in the scale tensor. */
typedef enum {
    MOE_SF_LINEAR = 0,   /* row-major [.., rows, groups] */
    MOE_SF_SWIZZLE_128X4,/* per matrix: padded to [round_up(rows,128), round_up(groups,4)],
                            stored in the 128x4 atom order (moe_sf_offset_128x4) */
    MOE_SF_UE8M0_PACK4,  /* DeepEP-LL UE8M0: int32 [rows, groups/4], byte j of word p
                            (value bits 8j..8j+7) is the code of group 4p+j */
    MOE_SF_COUNT
} moe_sf_layout;

/* What the clamp before an e4m3 cast does with NaN. */
typedef enum {
    MOE_NANCLAMP_KEEP = 0,  /* no separate clamp; the SAT cast keeps NaN (torch.clamp) */
    MOE_NANCLAMP_MIN_MAX,   /* fmaxf(-max, fminf(v, max)): NaN -> +max */
    MOE_NANCLAMP_MAX_MIN,   /* fminf(fmaxf(v, -max), max): NaN -> -max */
    MOE_NANCLAMP_COUNT
} moe_nan_clamp;

typedef enum {
    MOE_AMAX_NAN_PROPAGATE = 0, /* any NaN element makes amax NaN (torch.amax) */
    MOE_AMAX_NAN_IGNORE = 1     /* NaN elements are skipped (fmaxf reductions) */
} moe_amax_nan;

typedef enum { MOE_QOP_DIV = 0, MOE_QOP_MUL = 1 } moe_quant_op;

typedef struct {
    moe_operand operand;
    moe_dtype elem;        /* F32 BF16 F16 E4M3 I8 I4 E2M1 */
    moe_scale_gran gran;
    int group_k;           /* GROUP/MX32/NV16/BLOCK: elements per scale along K */
    int block_n;           /* BLOCK: rows of N per scale */
    moe_dtype scale_dtype; /* F32, E8M0 (MX), E4M3 (NVFP4); unused for NONE */
    moe_scale_rule rule;
    moe_sf_layout layout;
    moe_quant_op q_op;     /* dynamic element step: cvt(x / s) or cvt(x * m) */
    float qmax;            /* format max the rule targets: 448, 6, 127, 7 */
    float qmin;            /* INT_MINMAX: -8 or -128 (GPTQ's asymmetric range) */
    float amax_floor;      /* GROUP_EPS 1e-10, BLOCK_FLOOR 1e-4, INT_TOKEN 1e-10,
                              DEEPEP_LL 1e-4; 0 = none */
    float scale_floor;     /* VLLM_TOKEN: 1/(448*512); 0 = none */
    int pow2_scale;        /* GROUP_EPS: UE8M0 rounding; DEEPEP_LL: round_scale */
    float pow2_floor;      /* GROUP_EPS with pow2_scale: 1e-10 */
    int emax_elem;         /* MX_OCP_FLOOR: 8 (e4m3) or 2 (e2m1) */
    int use_global_scale;  /* NVFP4: fp32 global scale present */
    float global_numer;    /* NVFP4: 448 * 6 = 2688 */
    float global_amax_floor; /* NVFP4: 1e-12 (TRT-LLM dynamic global) */
    moe_amax_nan amax_nan;
    moe_nan_clamp clamp;
    int k_divisible;       /* 1: K must be a multiple of group_k (else partial groups) */
    int static_ok;         /* 1: a static scale may be given */
} moe_quant_spec;

typedef struct {
    moe_scheme scheme;
    const char *name;
    moe_quant_spec weight;
    moe_quant_spec act;
    const char *upstream; /* the upstream behaviour the row models */
} moe_scheme_info;

/* ---- names and the scheme table ------------------------------------ */
const char *moe_scheme_name(moe_scheme s);     /* "?" when out of range */
moe_status moe_scheme_from_name(const char *name, moe_scheme *out);
const moe_scheme_info *moe_scheme_get(moe_scheme s); /* NULL when out of range */
/* Copies the weight or activation spec of scheme s into *out. */
moe_status moe_scheme_spec(moe_scheme s, moe_operand op, moe_quant_spec *out);
const char *moe_scale_rule_name(moe_scale_rule r);
const char *moe_scale_gran_name(moe_scale_gran g);
const char *moe_sf_layout_name(moe_sf_layout l);

/* The DeepEP low-latency dispatch FP8 cast as an activation spec (group
 * 128). ue8m0 requires round_scale (DeepEP asserts it) and packs the
 * scales 4 per int32 (MOE_SF_UE8M0_PACK4). */
moe_status moe_quant_spec_deepep_ll(int round_scale, int ue8m0, moe_quant_spec *out);

/* Weight-only symmetric groupwise integer spec (INT_MINMAX) for int4 or
 * int8 elements and groups of 32, 64 or 128 along K. The int4 ones are the
 * w4a16_g* schemes' weight specs; int8 groupwise has no scheme name of its
 * own and is reached through this spec. */
moe_status moe_quant_spec_int_groupwise(moe_dtype elem, int group, moe_quant_spec *out);

/* MOE_OK when every field of spec is consistent with its rule. */
moe_status moe_quant_spec_check(const moe_quant_spec *spec);

/* ---- shapes ----------------------------------------------------------- */
typedef struct {
    moe_dtype q_dtype;
    int q_ndim;
    int64_t q_shape[MOE_MAX_DIMS];
    int has_scale;
    moe_dtype scale_dtype;     /* F32, E8M0, E4M3, or I32 for UE8M0_PACK4 */
    int scale_ndim;
    int64_t scale_shape[MOE_MAX_DIMS];
    int has_global;            /* NVFP4 with a global scale */
    int global_ndim;
    int64_t global_shape[MOE_MAX_DIMS];
} moe_quant_dims;

/* Shapes of the outputs for an input of `shape` (activation: ndim 2 [M, K];
 * weight: ndim 3 [E, N, K]). Scale shapes: TENSOR [1,1] / [E,1,1]; ROW
 * [M,1] / [E,N,1]; GROUP, MX32, NV16 [M, K/g] / [E, N, K/g]; BLOCK
 * [E, ceil(N/bn), ceil(K/bk)]; SWIZZLE_128X4 pads rows to 128 and groups to
 * 4; UE8M0_PACK4 [M, K/512] int32. Global scale: [1] / [E]. */
moe_status moe_quant_shapes(const moe_quant_spec *spec, int ndim, const int64_t *shape,
                            moe_quant_dims *out);

/* Allocates zeroed host outputs for an input of `shape` (scale and global
 * only when the spec has them; pass NULL for those it lacks, or always). */
moe_status moe_quant_alloc(const moe_quant_spec *spec, int ndim, const int64_t *shape,
                           moe_tensor *q, moe_tensor *scale, moe_tensor *global_scale);

/* Byte offset of scale (r, c) in one 128x4-swizzled scale matrix whose
 * logical width is sf_cols groups (vLLM nvfp4_utils):
 * (((r/128)*ceil(sf_cols/4) + c/4)*32 + r%32)*16 + ((r%128)/32)*4 + c%4.
 * -1 for negative arguments. */
int64_t moe_sf_offset_128x4(int64_t r, int64_t c, int64_t sf_cols);

/* ---- the stage ---------------------------------------------------------- */
/* Quantizes x (f32, host) under spec. static_scale: NULL for dynamic
 * scales, else an f32 tensor of the scale's linear shape (for NVFP4: the
 * global scale, [1] or [E]); rules with static_ok = 0 refuse it. q_out and
 * scale_out must have the shapes and dtypes moe_quant_shapes gives (scale_out
 * NULL when the spec has no scale). global_scale_out receives the NVFP4
 * global encode scale gs (may be NULL; must be NULL for other specs).
 * Dynamic per-tensor activation scales are taken over the whole tensor
 * passed in (vLLM's torch reference requantizes per expert, so it gets one
 * scale per expert: call once per expert's rows to model it). */
moe_status moe_ref_quantize(const moe_quant_spec *spec, const moe_tensor *x,
                            const moe_tensor *static_scale, moe_tensor *q_out,
                            moe_tensor *scale_out, moe_tensor *global_scale_out);

/* x_out (f32, shape of q) = decode(q) * scale per group, one f32 rounding;
 * NVFP4 with a global scale: decode(q) * (f32(sf) / gs). global_scale is
 * required exactly when the spec uses one. */
moe_status moe_ref_dequantize(const moe_quant_spec *spec, const moe_tensor *q,
                              const moe_tensor *scale, const moe_tensor *global_scale,
                              moe_tensor *x_out);

#ifdef __cplusplus
}
#endif

#endif
