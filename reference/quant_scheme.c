/* The quantization schemes as data: one row per scheme with its weight and
 * activation specs and the upstream behaviour it models, plus a rule table
 * that says which fields each scale rule accepts (moe_quant_spec_check). */
#include <math.h>
#include <string.h>
#include "quant_internal.h"

#define FP8_MAX 448.0f
#define NVFP4_GLOBAL (448.0f * 6.0f)

/* ---- spec builders (compile-time rows) ----------------------------------
 * Unnamed fields are zero: scale_dtype MOE_F32, layout MOE_SF_LINEAR, q_op
 * MOE_QOP_DIV, amax_nan PROPAGATE, clamp KEEP, every floor 0 (none). */
#define BASE(opnd, dt) .operand = (opnd), .elem = (dt)
/* a plain cast: f32, bf16, f16 (and the 16-bit side of weight-only schemes) */
#define CAST(opnd, dt) {BASE(opnd, dt), .gran = MOE_GRAN_NONE, .rule = MOE_RULE_NONE}
/* vLLM scaled_fp8_quant, dynamic per-tensor (per expert for weights) */
#define FP8_TENSOR(opnd)                                                              \
    {BASE(opnd, MOE_E4M3), .gran = MOE_GRAN_TENSOR, .rule = MOE_RULE_AMAX_QMAX,        \
     .q_op = MOE_QOP_MUL, .qmax = FP8_MAX, .amax_nan = MOE_AMAX_NAN_IGNORE,            \
     .clamp = MOE_NANCLAMP_MIN_MAX, .static_ok = 1}
/* vLLM dynamic_per_token_scaled_fp8_quant (tokens, or output channels) */
#define FP8_ROW(opnd)                                                                 \
    {BASE(opnd, MOE_E4M3), .gran = MOE_GRAN_ROW, .rule = MOE_RULE_VLLM_TOKEN,          \
     .qmax = FP8_MAX, .scale_floor = 1.0f / (FP8_MAX * 512.0f),                        \
     .amax_nan = MOE_AMAX_NAN_IGNORE, .clamp = MOE_NANCLAMP_MIN_MAX, .static_ok = 1}
/* vLLM per_token_group_quant_fp8, 1 x 128 */
#define FP8_GROUP128                                                                  \
    {BASE(MOE_OPERAND_ACT, MOE_E4M3), .gran = MOE_GRAN_GROUP, .group_k = 128,         \
     .rule = MOE_RULE_GROUP_EPS, .qmax = FP8_MAX, .amax_floor = 1e-10f,               \
     .pow2_floor = 1e-10f, .amax_nan = MOE_AMAX_NAN_IGNORE,                           \
     .clamp = MOE_NANCLAMP_MAX_MIN, .k_divisible = 1, .static_ok = 1}
/* vLLM tests' per_block_cast_to_fp8, 128 x 128 */
#define FP8_BLOCK128                                                                  \
    {BASE(MOE_OPERAND_WEIGHT, MOE_E4M3), .gran = MOE_GRAN_BLOCK, .group_k = 128,      \
     .block_n = 128, .rule = MOE_RULE_BLOCK_FLOOR, .q_op = MOE_QOP_MUL,               \
     .qmax = FP8_MAX, .amax_floor = 1e-4f, .amax_nan = MOE_AMAX_NAN_PROPAGATE,        \
     .clamp = MOE_NANCLAMP_KEEP, .static_ok = 1}
/* vLLM per_token_quant_int8 / dynamic scaled_int8_quant */
#define INT8_ROW(opnd)                                                                \
    {BASE(opnd, MOE_I8), .gran = MOE_GRAN_ROW, .rule = MOE_RULE_INT_TOKEN,             \
     .q_op = MOE_QOP_MUL, .qmax = 127.0f, .amax_floor = 1e-10f,                        \
     .amax_nan = MOE_AMAX_NAN_IGNORE, .static_ok = 1}
/* vLLM quantize_weights, symmetric (uint8b128 / uint4b8 ranges), no zero point */
#define INT_MINMAX_W(dt, gr, g, hi, lo)                                               \
    {BASE(MOE_OPERAND_WEIGHT, dt), .gran = (gr), .group_k = (g),                      \
     .rule = MOE_RULE_INT_MINMAX, .qmax = (hi), .qmin = (lo),                          \
     .amax_nan = MOE_AMAX_NAN_PROPAGATE, .k_divisible = 1, .static_ok = 1}
#define W4_GROUP(g) INT_MINMAX_W(MOE_I4, MOE_GRAN_GROUP, g, 7.0f, -8.0f)
/* OCP MX, 32 along K, E8M0 scale; rule ceil_pow2 (NVIDIA) by default */
#define MX(opnd, dt, mx, emax)                                                        \
    {BASE(opnd, dt), .gran = MOE_GRAN_MX32, .group_k = 32, .scale_dtype = MOE_E8M0,   \
     .rule = MOE_RULE_MX_CEIL_POW2, .q_op = MOE_QOP_MUL, .qmax = (mx),                 \
     .emax_elem = (emax), .amax_nan = MOE_AMAX_NAN_PROPAGATE,                          \
     .clamp = MOE_NANCLAMP_KEEP, .k_divisible = 1}
/* NVFP4: 16 along K, E4M3 scale, fp32 global, 128x4 swizzled scales */
#define NV(opnd)                                                                      \
    {BASE(opnd, MOE_E2M1), .gran = MOE_GRAN_NV16, .group_k = 16,                      \
     .scale_dtype = MOE_E4M3, .rule = MOE_RULE_NVFP4, .layout = MOE_SF_SWIZZLE_128X4,  \
     .q_op = MOE_QOP_MUL, .qmax = 6.0f, .use_global_scale = 1,                         \
     .global_numer = NVFP4_GLOBAL, .global_amax_floor = 1e-12f,                        \
     .amax_nan = MOE_AMAX_NAN_PROPAGATE, .clamp = MOE_NANCLAMP_KEEP,                   \
     .k_divisible = 1, .static_ok = 1}

#define W MOE_OPERAND_WEIGHT
#define A MOE_OPERAND_ACT

static const moe_scheme_info schemes[MOE_SCHEME_COUNT] = {
    {MOE_SCHEME_F32, "f32", CAST(W, MOE_F32), CAST(A, MOE_F32),
     "unquantized f32 (TRT-LLM float MoE); quantize is a copy"},
    {MOE_SCHEME_BF16, "bf16", CAST(W, MOE_BF16), CAST(A, MOE_BF16),
     "vLLM MK_QUANT_CONFIGS #0 (16-bit); cast f32->bf16 IEEE RNE"},
    {MOE_SCHEME_F16, "f16", CAST(W, MOE_F16), CAST(A, MOE_F16),
     "16-bit half (TRT-LLM half MoE); cast f32->f16 IEEE RNE"},
    {MOE_SCHEME_FP8_WTENSOR_ATENSOR, "fp8_wtensor_atensor", FP8_TENSOR(W), FP8_TENSOR(A),
     "vLLM MK config #3: scaled_fp8_quant per-tensor W (per expert) and A"},
    {MOE_SCHEME_FP8_WCHANNEL_ATENSOR, "fp8_wchannel_atensor", FP8_ROW(W), FP8_TENSOR(A),
     "vLLM MK config #1: per-channel W via the per-token kernel, per-tensor A"},
    {MOE_SCHEME_FP8_WCHANNEL_ATOKEN, "fp8_wchannel_atoken", FP8_ROW(W), FP8_ROW(A),
     "vLLM MK config #2: per-channel W, dynamic per-token A (floor 1/(448*512))"},
    {MOE_SCHEME_FP8_WTENSOR_ATOKEN, "fp8_wtensor_atoken", FP8_TENSOR(W), FP8_ROW(A),
     "vLLM MK config #4: per-tensor W, dynamic per-token A"},
    {MOE_SCHEME_FP8_WBLOCK128_AGROUP128, "fp8_wblock128_agroup128", FP8_BLOCK128,
     FP8_GROUP128,
     "vLLM MK config #5 / DeepSeek-V3: per_block_cast_to_fp8 W, per_token_group_quant_fp8 A"},
    {MOE_SCHEME_INT8_WCHANNEL_ATOKEN, "int8_wchannel_atoken", INT8_ROW(W), INT8_ROW(A),
     "vLLM int8_w8a8: scaled_int8_quant per-channel W, per_token_quant_int8 A"},
    {MOE_SCHEME_W8A16_CHANNEL, "w8a16_channel",
     INT_MINMAX_W(MOE_I8, MOE_GRAN_ROW, 0, 127.0f, -128.0f), CAST(A, MOE_BF16),
     "vLLM int8_w8a16 / TRT-LLM weight-only int8 per-channel; symmetric"},
    {MOE_SCHEME_W4A16_G32, "w4a16_g32", W4_GROUP(32), CAST(A, MOE_BF16),
     "vLLM int4_w4a16 (GPTQ uint4b8, symmetric) group 32"},
    {MOE_SCHEME_W4A16_G64, "w4a16_g64", W4_GROUP(64), CAST(A, MOE_BF16),
     "vLLM int4_w4a16 (GPTQ uint4b8, symmetric) group 64"},
    {MOE_SCHEME_W4A16_G128, "w4a16_g128", W4_GROUP(128), CAST(A, MOE_BF16),
     "vLLM int4_w4a16 (GPTQ uint4b8, symmetric) group 128"},
    {MOE_SCHEME_W4AFP8_G128, "w4afp8_g128", W4_GROUP(128), FP8_TENSOR(A),
     "TRT-LLM W4A8-AWQ: int4 group-128 W, per-tensor fp8 A (AWQ prequant left to the caller)"},
    {MOE_SCHEME_MXFP8, "mxfp8", MX(W, MOE_E4M3, FP8_MAX, 8), MX(A, MOE_E4M3, FP8_MAX, 8),
     "TRT-LLM MXFP8xMXFP8 / vLLM mxfp8: E8M0 = ceil_pow2(amax/448)"},
    {MOE_SCHEME_MXFP4_W4A16, "mxfp4_w4a16", MX(W, MOE_E2M1, 6.0f, 2), CAST(A, MOE_BF16),
     "TRT-LLM W4A16 MXFP4 (use_wfp4a16) / vLLM mxfp4_w4a16: E8M0 = ceil_pow2(amax/6)"},
    {MOE_SCHEME_MXFP4_MXFP8, "mxfp4_mxfp8", MX(W, MOE_E2M1, 6.0f, 2),
     MX(A, MOE_E4M3, FP8_MAX, 8), "TRT-LLM MXFP8xMXFP4 (mxfp8_mxfp4)"},
    {MOE_SCHEME_NVFP4, "nvfp4", NV(W), NV(A),
     "vLLM MK config #6 / TRT-LLM NVFP4: E4M3 per 16, fp32 global 2688/amax, swizzled"},
};

const char *moe_scheme_name(moe_scheme s)
{
    return (unsigned)s < MOE_SCHEME_COUNT ? schemes[s].name : "?";
}

const moe_scheme_info *moe_scheme_get(moe_scheme s)
{
    return (unsigned)s < MOE_SCHEME_COUNT ? &schemes[s] : NULL;
}

moe_status moe_scheme_from_name(const char *name, moe_scheme *out)
{
    if (!name) return moe_fail(MOE_ERR_NULL, "scheme name: must not be NULL");
    if (!out) return moe_fail(MOE_ERR_NULL, "out: must not be NULL");
    for (int i = 0; i < MOE_SCHEME_COUNT; i++) {
        if (strcmp(schemes[i].name, name) == 0) {
            *out = (moe_scheme)i;
            return MOE_OK;
        }
    }
    char list[512];
    size_t n = 0;
    for (int i = 0; i < MOE_SCHEME_COUNT && n + 1 < sizeof list; i++) {
        size_t len = strlen(schemes[i].name);
        if (n + len + 2 > sizeof list) break;
        if (n) list[n++] = ' ';
        memcpy(list + n, schemes[i].name, len);
        n += len;
    }
    list[n] = '\0';
    return moe_fail(MOE_ERR_INVALID_ARG, "scheme '%s': not one of %s", name, list);
}

moe_status moe_scheme_spec(moe_scheme s, moe_operand op, moe_quant_spec *out)
{
    if (!out) return moe_fail(MOE_ERR_NULL, "out: must not be NULL");
    if ((unsigned)s >= MOE_SCHEME_COUNT)
        return moe_fail(MOE_ERR_INVALID_ARG, "scheme %d: not a moe_scheme", (int)s);
    if (op != MOE_OPERAND_WEIGHT && op != MOE_OPERAND_ACT)
        return moe_fail(MOE_ERR_INVALID_ARG, "operand %d: not weight or act", (int)op);
    *out = op == MOE_OPERAND_WEIGHT ? schemes[s].weight : schemes[s].act;
    return MOE_OK;
}

moe_status moe_quant_spec_int_groupwise(moe_dtype elem, int group, moe_quant_spec *out)
{
    if (!out) return moe_fail(MOE_ERR_NULL, "out: must not be NULL");
    if (elem != MOE_I4 && elem != MOE_I8)
        return moe_fail(MOE_ERR_DTYPE, "elem: must be int4 or int8 for weight-only groupwise");
    if (group != 32 && group != 64 && group != 128)
        return moe_fail(MOE_ERR_INVALID_ARG, "group %d: must be 32, 64 or 128", group);
    moe_quant_spec s = INT_MINMAX_W(elem, MOE_GRAN_GROUP, group, elem == MOE_I4 ? 7.0f : 127.0f,
                                    elem == MOE_I4 ? -8.0f : -128.0f);
    *out = s;
    return MOE_OK;
}

moe_status moe_quant_spec_deepep_ll(int round_scale, int ue8m0, moe_quant_spec *out)
{
    if (!out) return moe_fail(MOE_ERR_NULL, "out: must not be NULL");
    if (ue8m0 && !round_scale)
        return moe_fail(MOE_ERR_INVALID_ARG,
                        "ue8m0: requires round_scale (DeepEP asserts use_ue8m0 => round_scale)");
    moe_quant_spec s = {BASE(MOE_OPERAND_ACT, MOE_E4M3), .gran = MOE_GRAN_GROUP,
                        .group_k = 128, .rule = MOE_RULE_DEEPEP_LL, .q_op = MOE_QOP_MUL,
                        .qmax = FP8_MAX, .amax_floor = 1e-4f, .pow2_scale = round_scale != 0,
                        .amax_nan = MOE_AMAX_NAN_IGNORE, .clamp = MOE_NANCLAMP_KEEP,
                        .k_divisible = 1};
    if (ue8m0) {
        s.scale_dtype = MOE_E8M0;
        s.layout = MOE_SF_UE8M0_PACK4;
    }
    *out = s;
    return MOE_OK;
}

/* ---- names -------------------------------------------------------------- */
static const char *const rule_names[MOE_RULE_COUNT] = {
    "none", "amax_qmax", "vllm_token", "group_eps", "block_floor", "int_token",
    "int_minmax", "mx_ocp_floor", "mx_ceil_pow2", "nvfp4", "deepep_ll"};
static const char *const gran_names[MOE_GRAN_COUNT] = {"none", "tensor", "row", "group",
                                                       "block", "mx32", "nv16"};
static const char *const layout_names[MOE_SF_COUNT] = {"linear", "swizzle_128x4",
                                                       "ue8m0_pack4"};

const char *moe_scale_rule_name(moe_scale_rule r)
{
    return (unsigned)r < MOE_RULE_COUNT ? rule_names[r] : "?";
}
const char *moe_scale_gran_name(moe_scale_gran g)
{
    return (unsigned)g < MOE_GRAN_COUNT ? gran_names[g] : "?";
}
const char *moe_sf_layout_name(moe_sf_layout l)
{
    return (unsigned)l < MOE_SF_COUNT ? layout_names[l] : "?";
}

/* ---- what each rule accepts (data, checked by moe_quant_spec_check) ----- */
#define BIT(x) (1u << (unsigned)(x))
typedef struct {
    unsigned elems, grans, layouts, operands;
    moe_dtype scale_dtype;
    moe_quant_op q_op;
    int static_ok, pow2_ok, nan_clamp_ok;
} rule_caps;

static const rule_caps caps[MOE_RULE_COUNT] = {
    [MOE_RULE_NONE] = {BIT(MOE_F32) | BIT(MOE_BF16) | BIT(MOE_F16), BIT(MOE_GRAN_NONE),
                       BIT(MOE_SF_LINEAR), 3, MOE_F32, MOE_QOP_DIV, 0, 0, 0},
    [MOE_RULE_AMAX_QMAX] = {BIT(MOE_E4M3), BIT(MOE_GRAN_TENSOR), BIT(MOE_SF_LINEAR), 3,
                            MOE_F32, MOE_QOP_MUL, 1, 0, 1},
    [MOE_RULE_VLLM_TOKEN] = {BIT(MOE_E4M3), BIT(MOE_GRAN_ROW), BIT(MOE_SF_LINEAR), 3,
                             MOE_F32, MOE_QOP_DIV, 1, 0, 1},
    [MOE_RULE_GROUP_EPS] = {BIT(MOE_E4M3), BIT(MOE_GRAN_GROUP), BIT(MOE_SF_LINEAR), 3,
                            MOE_F32, MOE_QOP_DIV, 1, 1, 1},
    [MOE_RULE_BLOCK_FLOOR] = {BIT(MOE_E4M3), BIT(MOE_GRAN_BLOCK), BIT(MOE_SF_LINEAR),
                              BIT(MOE_OPERAND_WEIGHT), MOE_F32, MOE_QOP_MUL, 1, 0, 1},
    [MOE_RULE_INT_TOKEN] = {BIT(MOE_I8), BIT(MOE_GRAN_ROW), BIT(MOE_SF_LINEAR), 3, MOE_F32,
                            MOE_QOP_MUL, 1, 0, 0},
    [MOE_RULE_INT_MINMAX] = {BIT(MOE_I8) | BIT(MOE_I4), BIT(MOE_GRAN_ROW) | BIT(MOE_GRAN_GROUP),
                             BIT(MOE_SF_LINEAR), 3, MOE_F32, MOE_QOP_DIV, 1, 0, 0},
    [MOE_RULE_MX_OCP_FLOOR] = {BIT(MOE_E4M3) | BIT(MOE_E2M1), BIT(MOE_GRAN_MX32),
                               BIT(MOE_SF_LINEAR) | BIT(MOE_SF_SWIZZLE_128X4), 3, MOE_E8M0,
                               MOE_QOP_MUL, 0, 0, 1},
    [MOE_RULE_MX_CEIL_POW2] = {BIT(MOE_E4M3) | BIT(MOE_E2M1), BIT(MOE_GRAN_MX32),
                               BIT(MOE_SF_LINEAR) | BIT(MOE_SF_SWIZZLE_128X4), 3, MOE_E8M0,
                               MOE_QOP_MUL, 0, 0, 1},
    [MOE_RULE_NVFP4] = {BIT(MOE_E2M1), BIT(MOE_GRAN_NV16),
                        BIT(MOE_SF_LINEAR) | BIT(MOE_SF_SWIZZLE_128X4), 3, MOE_E4M3,
                        MOE_QOP_MUL, 1, 0, 0},
    [MOE_RULE_DEEPEP_LL] = {BIT(MOE_E4M3), BIT(MOE_GRAN_GROUP),
                            BIT(MOE_SF_LINEAR) | BIT(MOE_SF_UE8M0_PACK4), BIT(MOE_OPERAND_ACT),
                            MOE_F32, MOE_QOP_MUL, 0, 1, 1},
};

static float format_max(moe_dtype d)
{
    switch (d) {
    case MOE_E4M3: return FP8_MAX;
    case MOE_E2M1: return 6.0f;
    case MOE_I8: return 127.0f;
    case MOE_I4: return 7.0f;
    default: return 0.0f;
    }
}

static int bad_floor(float v) { return !(v >= 0.0f) || isinf(v); }

moe_status moe_quant_spec_check(const moe_quant_spec *s)
{
    if (!s) return moe_fail(MOE_ERR_NULL, "spec: must not be NULL");
    if ((unsigned)s->rule >= MOE_RULE_COUNT)
        return moe_fail(MOE_ERR_INVALID_ARG, "spec.rule %d: not a moe_scale_rule", (int)s->rule);
    const rule_caps *c = &caps[s->rule];
    const char *rn = rule_names[s->rule];
    if (s->operand != MOE_OPERAND_WEIGHT && s->operand != MOE_OPERAND_ACT)
        return moe_fail(MOE_ERR_INVALID_ARG, "spec.operand %d: not weight or act", (int)s->operand);
    if (!(c->operands & BIT(s->operand)))
        return moe_fail(MOE_ERR_UNSUPPORTED, "spec.operand: rule %s is not defined for %s",
                        rn, s->operand == MOE_OPERAND_ACT ? "activations" : "weights");
    if ((unsigned)s->elem >= MOE_DTYPE_COUNT || !(c->elems & BIT(s->elem)))
        return moe_fail(MOE_ERR_DTYPE, "spec.elem %s: not an element type of rule %s",
                        moe_dtype_get(s->elem) ? moe_dtype_get(s->elem)->name : "?", rn);
    if ((unsigned)s->gran >= MOE_GRAN_COUNT || !(c->grans & BIT(s->gran)))
        return moe_fail(MOE_ERR_INVALID_ARG, "spec.gran %s: not a granularity of rule %s",
                        moe_scale_gran_name(s->gran), rn);
    if ((unsigned)s->layout >= MOE_SF_COUNT || !(c->layouts & BIT(s->layout)))
        return moe_fail(MOE_ERR_INVALID_ARG, "spec.layout %s: not a scale layout of rule %s",
                        moe_sf_layout_name(s->layout), rn);
    moe_dtype sdt = s->layout == MOE_SF_UE8M0_PACK4 ? MOE_E8M0 : c->scale_dtype;
    if (s->rule != MOE_RULE_NONE && s->scale_dtype != sdt)
        return moe_fail(MOE_ERR_DTYPE, "spec.scale_dtype: rule %s with layout %s stores %s scales",
                        rn, moe_sf_layout_name(s->layout), moe_dtype_get(sdt)->name);
    if (s->rule != MOE_RULE_NONE && s->q_op != c->q_op)
        return moe_fail(MOE_ERR_INVALID_ARG, "spec.q_op: rule %s quantizes with x %s s", rn,
                        c->q_op == MOE_QOP_MUL ? "*" : "/");
    if (s->rule != MOE_RULE_NONE && s->qmax != format_max(s->elem))
        return moe_fail(MOE_ERR_INVALID_ARG, "spec.qmax %g: must be the %s maximum %g",
                        (double)s->qmax, moe_dtype_get(s->elem)->name,
                        (double)format_max(s->elem));
    if (s->rule == MOE_RULE_INT_MINMAX && s->qmin != -s->qmax - 1.0f)
        return moe_fail(MOE_ERR_INVALID_ARG, "spec.qmin %g: must be %g (two's complement range)",
                        (double)s->qmin, (double)(-s->qmax - 1.0f));
    int grouped = s->gran == MOE_GRAN_GROUP || s->gran == MOE_GRAN_BLOCK ||
                  s->gran == MOE_GRAN_MX32 || s->gran == MOE_GRAN_NV16;
    if (grouped && s->group_k <= 0)
        return moe_fail(MOE_ERR_INVALID_ARG, "spec.group_k %d: must be > 0 for %s scales",
                        s->group_k, gran_names[s->gran]);
    if (s->gran == MOE_GRAN_BLOCK && s->block_n <= 0)
        return moe_fail(MOE_ERR_INVALID_ARG, "spec.block_n %d: must be > 0 for block scales",
                        s->block_n);
    if (s->gran == MOE_GRAN_MX32 && s->group_k != 32)
        return moe_fail(MOE_ERR_INVALID_ARG, "spec.group_k %d: MX blocks are 32 elements",
                        s->group_k);
    if (s->gran == MOE_GRAN_NV16 && s->group_k != 16)
        return moe_fail(MOE_ERR_INVALID_ARG, "spec.group_k %d: NVFP4 blocks are 16 elements",
                        s->group_k);
    if (s->rule == MOE_RULE_DEEPEP_LL && s->group_k != 128)
        return moe_fail(MOE_ERR_INVALID_ARG, "spec.group_k %d: DeepEP-LL casts 128 channels",
                        s->group_k);
    if ((s->gran == MOE_GRAN_MX32 || s->gran == MOE_GRAN_NV16 || s->gran == MOE_GRAN_GROUP) &&
        !s->k_divisible)
        return moe_fail(MOE_ERR_INVALID_ARG,
                        "spec.k_divisible: %s scales need K divisible by group_k",
                        gran_names[s->gran]);
    if (bad_floor(s->amax_floor) || bad_floor(s->scale_floor) || bad_floor(s->pow2_floor) ||
        bad_floor(s->global_amax_floor))
        return moe_fail(MOE_ERR_INVALID_ARG, "spec floors: must be finite and >= 0");
    if (s->pow2_scale && !c->pow2_ok)
        return moe_fail(MOE_ERR_INVALID_ARG, "spec.pow2_scale: rule %s has no power-of-two option",
                        rn);
    if (s->layout == MOE_SF_UE8M0_PACK4 && !s->pow2_scale)
        return moe_fail(MOE_ERR_INVALID_ARG, "spec.layout: UE8M0 packing requires round_scale");
    if (s->rule == MOE_RULE_MX_OCP_FLOOR && s->emax_elem != (s->elem == MOE_E4M3 ? 8 : 2))
        return moe_fail(MOE_ERR_INVALID_ARG, "spec.emax_elem %d: %s has emax %d", s->emax_elem,
                        moe_dtype_get(s->elem)->name, s->elem == MOE_E4M3 ? 8 : 2);
    if (s->use_global_scale && s->rule != MOE_RULE_NVFP4)
        return moe_fail(MOE_ERR_INVALID_ARG, "spec.use_global_scale: only NVFP4 has one");
    if (s->use_global_scale && !(s->global_numer > 0.0f && !isinf(s->global_numer)))
        return moe_fail(MOE_ERR_INVALID_ARG, "spec.global_numer: must be finite and > 0");
    if ((unsigned)s->clamp >= MOE_NANCLAMP_COUNT ||
        (s->clamp != MOE_NANCLAMP_KEEP && !c->nan_clamp_ok))
        return moe_fail(MOE_ERR_INVALID_ARG, "spec.clamp: rule %s has no NaN clamp option", rn);
    if (s->amax_nan != MOE_AMAX_NAN_PROPAGATE && s->amax_nan != MOE_AMAX_NAN_IGNORE)
        return moe_fail(MOE_ERR_INVALID_ARG, "spec.amax_nan %d: not a moe_amax_nan",
                        (int)s->amax_nan);
    if (s->static_ok && !c->static_ok)
        return moe_fail(MOE_ERR_INVALID_ARG, "spec.static_ok: rule %s takes no static scale", rn);
    if (s->rule == MOE_RULE_NVFP4 && s->static_ok && !s->use_global_scale)
        return moe_fail(MOE_ERR_INVALID_ARG,
                        "spec.static_ok: NVFP4's static scale is the global scale; none is used");
    return MOE_OK;
}
