/* TensorRT-LLM MoE path planner. "seed" is seeds/001 (pre-move line
 * numbers), "anchor" is anchors/trtllm_moe.md; rules are cited where they
 * are encoded. The prologue rule itself lives in moe_maps_trtllm_select. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "moe/plan_trtllm.h"

static const char *const dtype_names[MOE_TRTLLM_DTYPE_COUNT] = {
    "fp32", "fp16", "bf16", "fp8", "int8", "int4", "fp4", "mxfp4"};
static const char *const act_names[MOE_TRTLLM_ACT_COUNT] = {
    "relu", "gelu", "silu", "identity", "relu2", "swiglu", "geglu", "swiglu_bias"};

const char *moe_trtllm_dtype_name(moe_trtllm_dtype d)
{
    return (unsigned)d < MOE_TRTLLM_DTYPE_COUNT ? dtype_names[d] : NULL;
}

const char *moe_trtllm_activation_name(moe_trtllm_activation a)
{
    return (unsigned)a < MOE_TRTLLM_ACT_COUNT ? act_names[a] : NULL;
}

int moe_trtllm_dtype_from_name(const char *s, moe_trtllm_dtype *d)
{
    if (!s || !d) return 0;
    if (strcmp(s, "e4m3") == 0) return *d = MOE_TRTLLM_FP8, 1;
    if (strcmp(s, "nvfp4") == 0) return *d = MOE_TRTLLM_FP4, 1;
    for (int i = 0; i < MOE_TRTLLM_DTYPE_COUNT; i++)
        if (strcmp(s, dtype_names[i]) == 0) return *d = (moe_trtllm_dtype)i, 1;
    return 0;
}

int moe_trtllm_activation_from_name(const char *s, moe_trtllm_activation *a)
{
    if (!s || !a) return 0;
    for (int i = 0; i < MOE_TRTLLM_ACT_COUNT; i++)
        if (strcmp(s, act_names[i]) == 0) return *a = (moe_trtllm_activation)i, 1;
    return 0;
}

void moe_trtllm_config_default(moe_trtllm_config *c)
{
    memset(c, 0, sizeof *c);
    c->sm = 90;
    c->act_dtype = c->weight_dtype = c->out_dtype = MOE_TRTLLM_BF16;
    c->activation = MOE_TRTLLM_ACT_SWIGLU;
    c->topk = 2;
    c->tokens = 128;
    c->experts_per_node = 8;
    c->hidden = c->inter = 4096;
    c->ep_size = 1;
}

/* ------------------------------------------------------------------ */
/* The (activation, weight) schemes the runner instantiates and where each
 * has kernels: anchor 4.4 (from [TR] is*Specialisation, [D] dispatchToArch
 * and getAmpereConfigs). Arch classes: */
enum { C75 = 1, C80 = 2, C89 = 4, C90 = 8, C100 = 16, C120 = 32, ALL = 63, FROM80 = 62 };
/* TMA-WS arches, supportsTmaWarpSpecialized (anchor 5.4(3)) */
enum { T_HOP = 1, T_BW = 2, T_120 = 4 };

typedef struct {
    moe_trtllm_dtype act, weight;
    const char *name;
    int plugin;   /* the TRT plugin instantiates it */
    int non_tma;  /* arch classes with an SM80-style (or SIMT / SM89) kernel */
    int tma;      /* TMA-WS arches whose validity traits accept it */
} scheme;

static const scheme schemes[] = {
    /* fp32 TMA-WS configs are unverified (anchor 4.4): not claimed */
    {MOE_TRTLLM_FP32, MOE_TRTLLM_FP32, "fp32", 1, ALL, 0},
    {MOE_TRTLLM_FP16, MOE_TRTLLM_FP16, "fp16", 1, ALL, T_HOP | T_BW},
    {MOE_TRTLLM_BF16, MOE_TRTLLM_BF16, "bf16", 1, FROM80, T_HOP | T_BW},
    /* weight-only: not a Hopper/Blackwell specialisation, SM80 configs only */
    {MOE_TRTLLM_FP16, MOE_TRTLLM_INT8, "weight-only int8", 1, ALL, 0},
    {MOE_TRTLLM_FP16, MOE_TRTLLM_INT4, "weight-only int4", 1, ALL, 0},
    {MOE_TRTLLM_BF16, MOE_TRTLLM_INT8, "weight-only int8", 1, FROM80, 0},
    {MOE_TRTLLM_BF16, MOE_TRTLLM_INT4, "weight-only int4", 1, FROM80, 0},
    /* no SM80 FP8 fallback on SM90/100; SM120 is redirected to SM89 kernels */
    {MOE_TRTLLM_FP8, MOE_TRTLLM_FP8, "fp8 per-tensor", 1, C89 | C120, T_HOP | T_BW},
    /* getAmpereConfigs allows w4afp8 only on sm == 89; not Blackwell-valid */
    {MOE_TRTLLM_FP8, MOE_TRTLLM_INT4, "w4afp8 (W4A8-AWQ)", 1, C89, T_HOP},
    /* a PyTorch-op scheme; the TRT plugin does not instantiate it */
    {MOE_TRTLLM_FP16, MOE_TRTLLM_MXFP4, "wfp4a16 (W4A16-MXFP4)", 0, 0, T_HOP},
    {MOE_TRTLLM_BF16, MOE_TRTLLM_MXFP4, "wfp4a16 (W4A16-MXFP4)", 0, 0, T_HOP},
    {MOE_TRTLLM_FP4, MOE_TRTLLM_FP4, "nvfp4", 1, 0, T_BW | T_120},
};

static int sm_class(int sm)
{
    return sm < 80 ? C75 : sm < 89 ? C80 : sm == 89 ? C89 : sm < 100 ? C90 : sm < 120 ? C100 : C120;
}

static int tma_arch(int sm)
{
    return sm == 90 ? T_HOP : (sm >= 100 && sm < 120) ? T_BW : (sm == 120 || sm == 121) ? T_120 : 0;
}

static int is_16bit(moe_trtllm_dtype d) { return d == MOE_TRTLLM_FP16 || d == MOE_TRTLLM_BF16; }

/* ------------------------------------------------------------------ */
/* Everything the decisions read, derived once. */
typedef struct {
    const moe_trtllm_config *c;
    const scheme *s;
    /* anchor 4.1 type-derived modes */
    int use_fp8, use_w4afp8, use_wfp4a16, use_fp4, weight_only, use_awq, gated;
    int tma_valid, non_tma_valid, tma; /* tma: the GEMM family chosen */
    int plugin_fused_finalize;         /* use_fused_finalize_ (anchor 5.4(1)) */
    int fused_finalize;
    moe_trtllm_prologue_choice pro;
} ctx;

static int weight_bits(moe_trtllm_dtype w)
{
    switch (w) {
    case MOE_TRTLLM_FP32: return 32;
    case MOE_TRTLLM_FP16: case MOE_TRTLLM_BF16: return 16;
    case MOE_TRTLLM_FP8: case MOE_TRTLLM_INT8: return 8;
    default: return 4;
    }
}

/* ------------------------------------------------------------------ */
/* Limits, checked in this order; the first violated one is the answer.
 * check() returns 1 and fills msg when violated. */
typedef struct {
    const char *id;
    const char *anchor;
    moe_status status;
    int (*check)(const ctx *x, char *msg, size_t n);
} limit;

#define DN(d) dtype_names[d]

static int lim_ootb_wo(const ctx *x, char *m, size_t n)
{
    const moe_trtllm_config *c = x->c;
    int wo = !is_16bit(c->weight_dtype) && c->weight_dtype != MOE_TRTLLM_FP32 &&
             (is_16bit(c->act_dtype) || c->act_dtype == MOE_TRTLLM_FP32);
    if (c->frontend != MOE_TRTLLM_OOTB || !wo) return 0;
    snprintf(m, n, "MoeOOTB does not support weight-only quantization (act=%s, weight=%s)",
             DN(c->act_dtype), DN(c->weight_dtype));
    return 1;
}

static int lim_ootb_sm(const ctx *x, char *m, size_t n)
{
    if (x->c->frontend != MOE_TRTLLM_OOTB || x->c->sm < 100) return 0;
    snprintf(m, n, "MoeOOTB does not support SM >= 100 (sm=%d)", x->c->sm);
    return 1;
}

static int lim_out_quant(const ctx *x, char *m, size_t n)
{
    moe_trtllm_dtype o = x->c->out_dtype;
    if (o != MOE_TRTLLM_FP8 && o != MOE_TRTLLM_FP4 && o != MOE_TRTLLM_INT8 &&
        o != MOE_TRTLLM_INT4 && o != MOE_TRTLLM_MXFP4)
        return 0;
    snprintf(m, n, "output dtype %s: FP8/FP4 (quantized) output is not supported, finalize "
             "would need an FP8 reduction", DN(o));
    return 1;
}

static int lim_out_type(const ctx *x, char *m, size_t n)
{
    const moe_trtllm_config *c = x->c;
    if (c->act_dtype == MOE_TRTLLM_FP8 || c->act_dtype == MOE_TRTLLM_FP4 ||
        c->out_dtype == c->act_dtype)
        return 0;
    snprintf(m, n, "output dtype %s != act dtype %s: a different output type is allowed only "
             "for FP8/FP4 input", DN(c->out_dtype), DN(c->act_dtype));
    return 1;
}

static int lim_fp8_sm(const ctx *x, char *m, size_t n)
{
    if (x->c->act_dtype != MOE_TRTLLM_FP8 || x->c->sm >= 89) return 0;
    snprintf(m, n, "FP8 needs SM >= 89 (sm=%d)", x->c->sm);
    return 1;
}

static int lim_fp4_sm(const ctx *x, char *m, size_t n)
{
    if (x->c->act_dtype != MOE_TRTLLM_FP4 || x->c->sm >= 100) return 0;
    snprintf(m, n, "FP4 needs SM >= 100 (sm=%d)", x->c->sm);
    return 1;
}

static int lim_pair(const ctx *x, char *m, size_t n)
{
    const moe_trtllm_config *c = x->c;
    if (x->s) return 0;
    if (c->act_dtype == MOE_TRTLLM_FP8 && c->weight_dtype == MOE_TRTLLM_MXFP4)
        snprintf(m, n, "act=fp8 weight=mxfp4 (WFP4AFP8 / MXFP8xMXFP4) is not modelled by this "
                 "planner");
    else if (c->act_dtype == MOE_TRTLLM_BF16 && c->weight_dtype == MOE_TRTLLM_FP8)
        snprintf(m, n, "act=bf16 weight=fp8 (DeepSeek FP8 block scaling) is not modelled by "
                 "this planner");
    else
        snprintf(m, n, "no runner instantiation for act=%s weight=%s", DN(c->act_dtype),
                 DN(c->weight_dtype));
    return 1;
}

static int lim_out_backbone(const ctx *x, char *m, size_t n)
{
    const moe_trtllm_config *c = x->c;
    if (is_16bit(c->out_dtype) || c->out_dtype == c->act_dtype) return 0;
    snprintf(m, n, "output dtype %s with act=%s: FP8/FP4 layers output fp16 or bf16",
             DN(c->out_dtype), DN(c->act_dtype));
    return 1;
}

static int lim_plugin_inst(const ctx *x, char *m, size_t n)
{
    if (x->c->frontend != MOE_TRTLLM_PLUGIN || x->s->plugin) return 0;
    snprintf(m, n, "the TRT MoE plugin does not instantiate %s (a PyTorch-op scheme; use the "
             "runner frontend)", x->s->name);
    return 1;
}

static int lim_arch(const ctx *x, char *m, size_t n)
{
    if (x->tma_valid || x->non_tma_valid) return 0;
    snprintf(m, n, "no kernel for %s (act=%s) on sm=%d", x->s->name, DN(x->c->act_dtype), x->c->sm);
    return 1;
}

static int lim_tma_on(const ctx *x, char *m, size_t n)
{
    if (x->c->tma_ws != MOE_TRTLLM_TMA_FORCE_ON || x->tma_valid) return 0;
    snprintf(m, n, "TMA-WS forced on, but supportsTmaWarpSpecialized is false for %s on sm=%d",
             x->s->name, x->c->sm);
    return 1;
}

static int lim_tma_off(const ctx *x, char *m, size_t n)
{
    if (x->c->tma_ws != MOE_TRTLLM_TMA_FORCE_OFF || x->non_tma_valid) return 0;
    snprintf(m, n, "TMA-WS forced off, but %s has no SM80-style fallback on sm=%d", x->s->name,
             x->c->sm);
    return 1;
}

static int lim_align(const ctx *x, char *m, size_t n)
{
    int64_t a = 128 / weight_bits(x->c->weight_dtype);
    if (x->c->hidden % a == 0 && x->c->inter % a == 0) return 0;
    snprintf(m, n, "hidden=%lld and inter=%lld must be multiples of 128/bits(%s) = %lld",
             (long long)x->c->hidden, (long long)x->c->inter, DN(x->c->weight_dtype), (long long)a);
    return 1;
}

static int lim_lora_fp4(const ctx *x, char *m, size_t n)
{
    if (!x->c->lora || x->c->act_dtype != MOE_TRTLLM_FP4) return 0;
    snprintf(m, n, "LoRA is forbidden with FP4 activations");
    return 1;
}

static const limit ootb_limits[] = {
    {"ootb-weight-only", "seed 001 §1.2; anchor §6 Python TRT flow", MOE_ERR_UNSUPPORTED, lim_ootb_wo},
    {"ootb-sm100", "seed 001 §1.2; anchor §6 Python TRT flow", MOE_ERR_UNSUPPORTED, lim_ootb_sm},
};

static const limit runner_limits[] = {
    {"out-fp8-fp4", "seed 001 §2.3; anchor §6 plugin constraints, §4.1", MOE_ERR_UNSUPPORTED, lim_out_quant},
    {"out-type", "seed 001 §2.1; anchor §6 plugin constraints", MOE_ERR_UNSUPPORTED, lim_out_type},
    {"fp8-sm", "seed 001 §2.2; anchor §6 plugin constraints", MOE_ERR_UNSUPPORTED, lim_fp8_sm},
    {"fp4-sm", "seed 001 §2.2; anchor §6 plugin constraints", MOE_ERR_UNSUPPORTED, lim_fp4_sm},
    {"act-weight", "anchor §4.1, §4.4", MOE_ERR_UNSUPPORTED, lim_pair},
    {"out-backbone", "anchor §4.1 (OutputType == BackBoneType), §4.4", MOE_ERR_UNSUPPORTED, lim_out_backbone},
    {"plugin-instantiation", "anchor §4.4 (TRT plugin instantiates?)", MOE_ERR_UNSUPPORTED, lim_plugin_inst},
    {"arch", "anchor §4.4", MOE_ERR_UNSUPPORTED, lim_arch},
    {"tma-ws-forced-on", "anchor §5.4(3), §4.4", MOE_ERR_INCOMPATIBLE, lim_tma_on},
    {"tma-ws-forced-off", "anchor §4.4 (no SM80 fallback)", MOE_ERR_INCOMPATIBLE, lim_tma_off},
    {"alignment", "anchor §4.4 alignment checks in runMoe", MOE_ERR_INCOMPATIBLE, lim_align},
    {"lora-fp4", "anchor §4.4 alignment checks in runMoe", MOE_ERR_UNSUPPORTED, lim_lora_fp4},
};

/* ------------------------------------------------------------------ */
/* Decisions. Each fills path and condition from the derived context. */

static void cond(moe_trtllm_decision *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void cond(moe_trtllm_decision *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->condition, sizeof d->condition, fmt, ap);
    va_end(ap);
}

static void d_frontend(const ctx *x, moe_trtllm_decision *d)
{
    static const char *const p[] = {"plugin", "ootb", "runner"};
    static const char *const why[] = {
        "moe_plugin=auto (or a dtype): MOE layer kept, MixtureOfExperts plugin",
        "moe_plugin=disable -> None -> use_ootb_moe: MOE replaced by MoeOOTB",
        "runner driven directly (PyTorch op): no TRT plugin limits"};
    d->path = p[x->c->frontend];
    cond(d, "%s", why[x->c->frontend]);
}

static void d_gemm_family(const ctx *x, moe_trtllm_decision *d)
{
    const moe_trtllm_config *c = x->c;
    if (x->tma) {
        d->path = "tma-ws";
        cond(d, "sm=%d supportsTmaWarpSpecialized for %s%s", c->sm, x->s->name,
             c->tma_ws == MOE_TRTLLM_TMA_FORCE_ON ? " (forced on)" : "");
        return;
    }
    d->path = c->act_dtype == MOE_TRTLLM_FP32 ? "simt"
              : x->use_fp8 || x->use_w4afp8   ? "sm89-kernels"
                                              : "sm80-style";
    if (x->tma_valid)
        cond(d, "TMA-WS forced off (an SM80-style tactic won) on sm=%d", c->sm);
    else
        cond(d, "sm=%d: no TMA-WS for %s (TMA-WS only at sm 90, 100-119, 120/121 when valid)",
             c->sm, x->s->name);
}

static void d_prologue(const ctx *x, moe_trtllm_decision *d)
{
    const moe_trtllm_config *c = x->c;
    const moe_trtllm_prologue_choice *p = &x->pro;
    d->path = p->variant == MOE_MAPS_TRTLLM_FUSED_SINGLE_BLOCK ? "fused-single-block" : "three-step";
    int old = c->revision == MOE_TRTLLM_REV_OLD;
    switch (p->reason) {
    case MOE_TRTLLM_FUSED_OK:
        cond(d, "%s passes, T=%lld <= 256 (block %d), k=%d in {1,2,4,6,8}, expert_log=%d <= 9, "
             "radix smem fits", old ? "!use_w4_groupwise" : "!use_wfp4a16", (long long)c->tokens,
             p->block_size, c->topk, p->expert_log);
        break;
    case MOE_TRTLLM_FALLBACK_W4_GATE:
        if (x->use_wfp4a16) cond(d, "use_wfp4a16=1 fails the %s gate", old ? "[OLD] !use_w4_groupwise" : "!use_wfp4a16");
        else cond(d, "use_w4afp8=1 fails the [OLD] !use_w4_groupwise gate");
        break;
    case MOE_TRTLLM_FALLBACK_TOO_MANY_TOKENS: cond(d, "T=%lld > 256", (long long)c->tokens); break;
    case MOE_TRTLLM_FALLBACK_TOPK: cond(d, "k=%d not in {1,2,4,6,8}", c->topk); break;
    case MOE_TRTLLM_FALLBACK_EXPERT_LOG:
        cond(d, "expert_log=floor(log2(E_local=%d + 1)) + 1 = %d > 9", c->experts_per_node,
             p->expert_log);
        break;
    case MOE_TRTLLM_FALLBACK_SMEM: cond(d, "radix sort smem >= opt-in max"); break;
    }
    d->anchor = old ? "anchor §6 #1 ([OLD] gate), §1.2-1.3"
                    : "seed 001 §3.1; anchor §6 #1 ([K] gate), §1.2-1.3";
}

static void d_expand(const ctx *x, moe_trtllm_decision *d)
{
    const moe_trtllm_config *c = x->c;
    if (x->use_fp4) {
        d->path = "nvfp4-quantize";
        cond(d, "act=fp4: input arrives as %s, quantized to NVFP4 in expand (per-expert FC1 act "
             "scale allowed, NVFP4 only)", DN(c->out_dtype));
    } else if (x->use_w4afp8) {
        /* the plugin hands W4AFP8 input in the output type, so !use_fp8_input */
        d->path = "awq-prequant-fp8";
        cond(d, "use_w4afp8 && !use_fp8_input (input %s): x * fc1.act_scales, then e4m3",
             DN(c->out_dtype));
    } else {
        d->path = "plain-copy";
        cond(d, "input dtype == expanded dtype (%s)", DN(c->act_dtype));
    }
}

static void d_expand_scales(const ctx *x, moe_trtllm_decision *d)
{
    d->path = x->fused_finalize ? "permuted" : "not-permuted";
    cond(d, x->fused_finalize ? "finalize fused into GEMM2: router scales gathered per permuted row"
                              : "unfused finalize reads token_final_scales itself");
}

static void d_fc1_prequant(const ctx *x, moe_trtllm_decision *d)
{
    const moe_trtllm_config *c = x->c;
    d->path = "none";
    if (!x->use_awq)
        cond(d, x->use_wfp4a16 && c->awq ? "use_awq=0: wfp4a16 excludes AWQ"
                                         : "use_awq=0 (no act_scales)");
    else if (x->use_w4afp8) cond(d, "W4AFP8 applies the FC1 prequant scale in expand");
    else if (c->act_dtype == c->weight_dtype) cond(d, "T == W (%s)", DN(c->act_dtype));
    else {
        d->path = "apply-per-channel-scale";
        cond(d, "use_awq && !use_w4afp8 && T=%s != W=%s", DN(c->act_dtype), DN(c->weight_dtype));
    }
}

static void d_fc2_prequant(const ctx *x, moe_trtllm_decision *d)
{
    const moe_trtllm_config *c = x->c;
    if (!x->use_awq) {
        d->path = "none";
        cond(d, "use_awq=0");
    } else if (c->revision == MOE_TRTLLM_REV_OLD) {
        d->path = "separate-before-gemm2";
        cond(d, "use_awq=1; [OLD] has no FC2 prequant fusion");
    } else if (x->gated) {
        d->path = "fused-into-fc1-activation";
        cond(d, "use_awq=1 && activation=%s is gated", act_names[c->activation]);
    } else {
        d->path = "separate-before-gemm2";
        cond(d, "use_awq=1 but activation=%s is not gated", act_names[c->activation]);
    }
}

static void d_fc1_activation(const ctx *x, moe_trtllm_decision *d)
{
    const moe_trtllm_config *c = x->c;
    const char *a = act_names[c->activation];
    if (x->tma) {
        d->path = "separate-doActivation";
        cond(d, "TMA-WS GEMM1 fuses only NONE/FINALIZE (ACTIVATION throws); %s runs after", a);
    } else if (x->use_fp8) {
        d->path = "separate-doActivation";
        cond(d, "use_fp8 on SM89 kernels: GEMM with alpha = dequant_fc1, then %s", a);
    } else if (!x->gated) {
        d->path = "epilogue-fused";
        cond(d, "activation=%s non-gated, non-TMA: moeGemmBiasAct epilogue", a);
    } else {
        /* isFusedGatedActivation ([D]); gemm_k = hidden, gemm_n = inter */
        d->path = "identity-then-doGatedActivation";
        if (c->activation != MOE_TRTLLM_ACT_SWIGLU && c->activation != MOE_TRTLLM_ACT_GEGLU)
            cond(d, "activation=%s not in {swiglu, geglu}", a);
        else if (c->act_dtype != c->weight_dtype)
            cond(d, "T=%s != W=%s", DN(c->act_dtype), DN(c->weight_dtype));
        else if (c->act_dtype == MOE_TRTLLM_FP32) cond(d, "T=fp32");
        else if (c->sm < 80) cond(d, "sm=%d < 80", c->sm);
        else if (c->hidden % 64) cond(d, "hidden=%lld %% 64 != 0", (long long)c->hidden);
        else if (c->inter % 64) cond(d, "inter=%lld %% 64 != 0", (long long)c->inter);
        else {
            d->path = "sm80-fused-gated";
            cond(d, "%s, T == W = %s, sm=%d >= 80, hidden=%lld and inter=%lld %% 64 == 0, "
                 "non-TMA tactic", a, DN(c->act_dtype), c->sm, (long long)c->hidden,
                 (long long)c->inter);
        }
    }
}

static void d_finalize(const ctx *x, moe_trtllm_decision *d)
{
    const moe_trtllm_config *c = x->c;
    int old = c->revision == MOE_TRTLLM_REV_OLD;
    if (x->fused_finalize) {
        d->path = "fused-gemm2-epilogue";
        cond(d, "k=%d%s, fusion enabled, no LoRA, TMA-WS on sm=%d, %s; taken when the GEMM2 "
             "tactic is a FINALIZE copy", c->topk, c->topk < 3 ? " < 3" : ", not deterministic",
             c->sm, old ? "!use_w4_groupwise" : "!use_wfp4a16");
        return;
    }
    int nofill = c->ep_size > 1 && c->enable_alltoall;
    d->path = nofill ? "finalizeMoeRoutingNoFillingKernel" : "finalizeMoeRoutingKernel";
    char why[128];
    if (c->topk >= 3 && c->deterministic)
        snprintf(why, sizeof why, "k=%d >= 3 with deterministic kernels", c->topk);
    else if (c->disable_finalize_fusion) snprintf(why, sizeof why, "TRTLLM_MOE_DISABLE_FINALIZE_FUSION set");
    else if (c->lora) snprintf(why, sizeof why, "LoRA (hasLora)");
    else if (!x->tma) snprintf(why, sizeof why, "GEMM2 is not TMA-WS on sm=%d", c->sm);
    else if (x->use_wfp4a16) snprintf(why, sizeof why, "use_wfp4a16=1");
    else snprintf(why, sizeof why, "use_w4afp8=1 fails the [OLD] !use_w4_groupwise gate");
    cond(d, "%s; ep_size=%d%s", why, c->ep_size, nofill ? " > 1 with alltoall" : "");
}

static void d_reduction(const ctx *x, moe_trtllm_decision *d)
{
    int k = x->c->topk;
    if (!x->fused_finalize) {
        d->path = "fp32-fixed-order";
        cond(d, "unfused finalize: fp32 sum over slots ascending, one rounding");
    } else if (k == 1) {
        d->path = "plain-store";
        cond(d, "k=1: use_reduction = (T*k > T) is false");
    } else if (k == 2) {
        d->path = "atomic-add-deterministic";
        cond(d, "k=2: two rounded adds onto an exact 0 commute");
    } else {
        d->path = "atomic-add-order-dependent";
        cond(d, "k=%d >= 3: rounded atomic adds in CTA order", k);
    }
}

static void d_lora_bias(const ctx *x, moe_trtllm_decision *d)
{
    if (!x->c->lora) {
        d->path = "n/a";
        cond(d, "no LoRA");
    } else if (!(x->use_fp8 || x->tma)) {
        d->path = "fused-gemm2-bias";
        cond(d, "use_lora && !(use_fp8 || tma_ws)");
    } else {
        d->path = "doActivation-identity-bias";
        cond(d, "use_lora with %s", x->use_fp8 ? "use_fp8" : "a TMA-WS GEMM");
    }
}

static const struct {
    const char *id;
    const char *anchor;
    void (*fill)(const ctx *, moe_trtllm_decision *);
} decisions[MOE_TRTLLM_D_COUNT] = {
    {"frontend", "seed 001 §1.1", d_frontend},
    {"gemm-family", "anchor §4.4, §5.4(3)", d_gemm_family},
    {"prologue", "", d_prologue},
    {"expand", "seed 001 §3.2; anchor §6 #3, §2", d_expand},
    {"expand-scales", "anchor §2 (permuted router scales)", d_expand_scales},
    {"fc1-prequant", "anchor §6 #5, §4.2 use_awq", d_fc1_prequant},
    {"fc2-prequant", "seed 001 §3.4; anchor §6 #6", d_fc2_prequant},
    {"fc1-activation", "seed 001 §3.3; anchor §6 #8-#11", d_fc1_activation},
    {"finalize", "seed 001 §3.5, §4; anchor §5.4, §6 #12", d_finalize},
    {"reduction", "anchor §5.1, §5.3", d_reduction},
    {"lora-bias", "anchor §6 #13", d_lora_bias},
};

/* ------------------------------------------------------------------ */

static moe_status check_range(const moe_trtllm_config *c)
{
#define RANGE(v, lo, hi, name)                                                                  \
    if ((v) < (lo) || (v) > (hi))                                                               \
        return moe_fail(MOE_ERR_INVALID_ARG, name " %lld: must be in %lld..%lld", (long long)(v), \
                        (long long)(lo), (long long)(hi));
    RANGE(c->sm, MOE_TRTLLM_SM_MIN, MOE_TRTLLM_SM_MAX, "sm");
    RANGE((int)c->act_dtype, 0, MOE_TRTLLM_DTYPE_COUNT - 1, "act_dtype");
    RANGE((int)c->weight_dtype, 0, MOE_TRTLLM_DTYPE_COUNT - 1, "weight_dtype");
    RANGE((int)c->out_dtype, 0, MOE_TRTLLM_DTYPE_COUNT - 1, "out_dtype");
    RANGE((int)c->activation, 0, MOE_TRTLLM_ACT_COUNT - 1, "activation");
    RANGE(c->topk, 1, MOE_TRTLLM_TOPK_MAX, "topk");
    RANGE(c->tokens, 0, INT32_MAX, "tokens");
    RANGE(c->experts_per_node, 1, MOE_TRTLLM_EXPERTS_MAX, "experts_per_node");
    RANGE(c->hidden, 1, MOE_TRTLLM_DIM_MAX, "hidden");
    RANGE(c->inter, 1, MOE_TRTLLM_DIM_MAX, "inter");
    RANGE((int)c->tma_ws, 0, 2, "tma_ws");
    RANGE((int)c->frontend, 0, 2, "frontend");
    RANGE((int)c->revision, 0, 1, "revision");
    RANGE(c->ep_size, 1, MOE_TRTLLM_EP_MAX, "ep_size");
#undef RANGE
    return MOE_OK;
}

static moe_status first_violation(const limit *t, size_t n, const ctx *x, moe_trtllm_plan *plan)
{
    char msg[256];
    for (size_t i = 0; i < n; i++)
        if (t[i].check(x, msg, sizeof msg)) {
            plan->limit = t[i].id;
            plan->limit_anchor = t[i].anchor;
            return moe_fail(t[i].status, "%s: %s [%s]", t[i].id, msg, t[i].anchor);
        }
    return MOE_OK;
}

moe_status moe_trtllm_plan_compute(const moe_trtllm_config *c, moe_trtllm_plan *plan)
{
    if (!c) return moe_fail(MOE_ERR_NULL, "cfg: must not be NULL");
    if (!plan) return moe_fail(MOE_ERR_NULL, "plan: must not be NULL");
    moe_status s = check_range(c);
    if (s != MOE_OK) return s;
    memset(plan, 0, sizeof *plan);
    plan->limit = plan->limit_anchor = "";

    ctx x = {.c = c};
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
        if (schemes[i].act == c->act_dtype && schemes[i].weight == c->weight_dtype) x.s = &schemes[i];
    if (c->frontend == MOE_TRTLLM_OOTB) {
        s = first_violation(ootb_limits, sizeof ootb_limits / sizeof ootb_limits[0], &x, plan);
        if (s != MOE_OK) return s;
        for (int i = 0; i < MOE_TRTLLM_D_COUNT; i++) {
            moe_trtllm_decision *d = &plan->d[i];
            d->id = decisions[i].id;
            d->anchor = decisions[i].anchor;
            d->path = "n/a";
            cond(d, "MoeOOTB builds the layer from TRT ops; runMoe is not used");
        }
        plan->d[MOE_TRTLLM_D_PROLOGUE].anchor = "seed 001 §3.1; anchor §6 #1";
        d_frontend(&x, &plan->d[MOE_TRTLLM_D_FRONTEND]);
        return MOE_OK;
    }

    if (x.s) {
        x.tma_valid = (x.s->tma & tma_arch(c->sm)) != 0;
        x.non_tma_valid = (x.s->non_tma & sm_class(c->sm)) != 0;
    }
    s = first_violation(runner_limits, sizeof runner_limits / sizeof runner_limits[0], &x, plan);
    if (s != MOE_OK) return s;

    moe_trtllm_dtype T = c->act_dtype, W = c->weight_dtype;
    x.tma = x.tma_valid && c->tma_ws != MOE_TRTLLM_TMA_FORCE_OFF;
    x.use_fp8 = T == MOE_TRTLLM_FP8 && W != MOE_TRTLLM_INT4;
    x.use_w4afp8 = T == MOE_TRTLLM_FP8 && W == MOE_TRTLLM_INT4;
    x.use_wfp4a16 = W == MOE_TRTLLM_MXFP4 && is_16bit(T);
    x.use_fp4 = T == MOE_TRTLLM_FP4;
    x.use_awq = c->awq && !x.use_wfp4a16; /* moe_kernels.h use_awq */
    x.gated = c->activation == MOE_TRTLLM_ACT_SWIGLU || c->activation == MOE_TRTLLM_ACT_GEGLU ||
              c->activation == MOE_TRTLLM_ACT_SWIGLU_BIAS;
    int w4_groupwise = x.use_w4afp8 || x.use_wfp4a16;
    /* plugin init (anchor 5.4(1)); the runner then needs TMA-WS on SM >= 90
     * and the revision's W4 gate (5.4(2), (4)) */
    x.plugin_fused_finalize = (c->topk < 3 || !c->deterministic) && !c->disable_finalize_fusion &&
                              !c->lora;
    x.fused_finalize = x.plugin_fused_finalize && x.tma && c->sm >= 90 &&
                       !(c->revision == MOE_TRTLLM_REV_OLD ? w4_groupwise : x.use_wfp4a16);

    moe_trtllm_prologue_query q = {
        .num_tokens = c->tokens, .experts_per_token = c->topk,
        .num_experts_per_node = c->experts_per_node, .use_wfp4a16 = x.use_wfp4a16,
        .use_w4afp8 = x.use_w4afp8, .radix_smem_exceeds = c->radix_smem_exceeds,
        .gate = c->revision == MOE_TRTLLM_REV_OLD ? MOE_TRTLLM_GATE_NOT_W4_GROUPWISE
                                                  : MOE_TRTLLM_GATE_NOT_WFP4A16};
    if ((s = moe_maps_trtllm_select(&q, &x.pro)) != MOE_OK) return s;

    for (int i = 0; i < MOE_TRTLLM_D_COUNT; i++) {
        plan->d[i].id = decisions[i].id;
        plan->d[i].anchor = decisions[i].anchor;
        decisions[i].fill(&x, &plan->d[i]);
    }
    return MOE_OK;
}
