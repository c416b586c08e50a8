/* TensorRT-LLM MoE path planner: for one layer configuration, every path
 * decision the TRT engine build and CutlassMoeFCRunner::runMoe take (seed
 * 001, anchors trtllm_moe.md sections 4.4, 5.4 and 6), as a table of named
 * decisions, or the first limit the configuration violates (DESIGN 7).
 *
 * Where the sources disagree the revision is an input, never a silent pick:
 * MOE_TRTLLM_REV_NEWEST is runner [K] @ 296138db, which seed 001 agrees
 * with (fused prologue gated on !use_wfp4a16, FC2 prequant fused into the
 * FC1 activation); MOE_TRTLLM_REV_OLD is [OLD] @ ac73e311 (prologue and
 * finalize gated on !use_w4_groupwise, no FC2 prequant fusion). */
#ifndef MOE_PLAN_TRTLLM_H
#define MOE_PLAN_TRTLLM_H

#include <stdint.h>
#include "moe/maps_trtllm.h"
#include "moe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element types as the plugin and runner name them (anchor 4.1). FP8 is
 * e4m3; FP4 is NVFP4 (e2m1, E4M3 scales per 16); MXFP4 is e2m1 with UE8M0
 * scales per 32, the weight of W4A16-MXFP4 (use_wfp4a16). */
typedef enum {
    MOE_TRTLLM_FP32 = 0,
    MOE_TRTLLM_FP16,
    MOE_TRTLLM_BF16,
    MOE_TRTLLM_FP8,
    MOE_TRTLLM_INT8,
    MOE_TRTLLM_INT4,
    MOE_TRTLLM_FP4,
    MOE_TRTLLM_MXFP4,
    MOE_TRTLLM_DTYPE_COUNT
} moe_trtllm_dtype;

/* ActivationType values the runner handles (anchor 3.1, section 6 #10/#11). */
typedef enum {
    MOE_TRTLLM_ACT_RELU = 0,
    MOE_TRTLLM_ACT_GELU, /* tanh-approximate FtGelu */
    MOE_TRTLLM_ACT_SILU,
    MOE_TRTLLM_ACT_IDENTITY,
    MOE_TRTLLM_ACT_RELU2,
    MOE_TRTLLM_ACT_SWIGLU,
    MOE_TRTLLM_ACT_GEGLU,
    MOE_TRTLLM_ACT_SWIGLU_BIAS,
    MOE_TRTLLM_ACT_COUNT
} moe_trtllm_activation;

typedef enum {
    MOE_TRTLLM_PLUGIN = 0, /* --moe_plugin auto/dtype: MixtureOfExperts plugin (seed 1.1) */
    MOE_TRTLLM_OOTB,       /* --moe_plugin disable: MoeOOTB from TRT layers (seed 1.1) */
    MOE_TRTLLM_RUNNER      /* the runner as the PyTorch op drives it: no plugin limits */
} moe_trtllm_frontend;

typedef enum { MOE_TRTLLM_REV_NEWEST = 0, MOE_TRTLLM_REV_OLD = 1 } moe_trtllm_revision;

typedef enum {
    MOE_TRTLLM_TMA_AUTO = 0, /* TMA-WS when the arch supports the combination */
    MOE_TRTLLM_TMA_FORCE_ON, /* the profiler picked a TMA-WS tactic (error if none) */
    MOE_TRTLLM_TMA_FORCE_OFF /* the profiler picked an SM80-style tactic (error if none) */
} moe_trtllm_tma;

/* Accepted ranges (the CLI reports its usage errors with the same ones). */
/* anchor 4.4's table spans SM75 .. SM121 */
#define MOE_TRTLLM_SM_MIN 75
#define MOE_TRTLLM_SM_MAX 121
#define MOE_TRTLLM_TOPK_MAX 256
#define MOE_TRTLLM_EXPERTS_MAX 65536
#define MOE_TRTLLM_DIM_MAX (1 << 20)
#define MOE_TRTLLM_EP_MAX 1024

typedef struct {
    int sm;                     /* 10*major + minor, MOE_TRTLLM_SM_MIN..MAX */
    moe_trtllm_dtype act_dtype; /* the plugin's `type` (FP4/FP8: quantized in expand or given) */
    moe_trtllm_dtype weight_dtype;
    moe_trtllm_dtype out_dtype;
    moe_trtllm_activation activation;
    int topk;               /* k, 1..MOE_TRTLLM_TOPK_MAX */
    int64_t tokens;         /* T, 0..INT32_MAX */
    int experts_per_node;   /* E_local, 1..MOE_TRTLLM_EXPERTS_MAX */
    int64_t hidden, inter;  /* 1..MOE_TRTLLM_DIM_MAX */
    int deterministic;      /* mUseDeterministicKernels (force_determinism) */
    int disable_finalize_fusion; /* TRTLLM_MOE_DISABLE_FINALIZE_FUSION */
    int lora;
    int awq;                /* groupwise fc1 and fc2 act_scales (AWQ pre-quant) given */
    moe_trtllm_tma tma_ws;
    moe_trtllm_frontend frontend;
    moe_trtllm_revision revision;
    int ep_size;            /* 1..MOE_TRTLLM_EP_MAX */
    int enable_alltoall;
    int radix_smem_exceeds; /* see moe_trtllm_prologue_query */
} moe_trtllm_config;

/* Decision ids, in runMoe order; every plan has all of them. */
typedef enum {
    MOE_TRTLLM_D_FRONTEND = 0,
    MOE_TRTLLM_D_GEMM_FAMILY,
    MOE_TRTLLM_D_PROLOGUE,
    MOE_TRTLLM_D_EXPAND,
    MOE_TRTLLM_D_EXPAND_SCALES,
    MOE_TRTLLM_D_FC1_PREQUANT,
    MOE_TRTLLM_D_FC2_PREQUANT,
    MOE_TRTLLM_D_FC1_ACTIVATION,
    MOE_TRTLLM_D_FINALIZE,
    MOE_TRTLLM_D_REDUCTION,
    MOE_TRTLLM_D_LORA_BIAS,
    MOE_TRTLLM_D_COUNT
} moe_trtllm_decision_id;

typedef struct {
    const char *id;      /* stable name, e.g. "prologue" */
    const char *path;    /* the path taken, e.g. "three-step" */
    char condition[192]; /* the deciding values, e.g. "T=300 > 256" */
    const char *anchor;  /* seed / anchor sections */
} moe_trtllm_decision;

typedef struct {
    moe_trtllm_decision d[MOE_TRTLLM_D_COUNT];
    /* on MOE_ERR_UNSUPPORTED / MOE_ERR_INCOMPATIBLE: the violated limit's id
     * and anchor ("" otherwise); moe_last_error() has the full message */
    const char *limit;
    const char *limit_anchor;
} moe_trtllm_plan;

/* The config with the common defaults: SM90, bf16 everywhere, swiglu, k=2,
 * T=128, E_local=8, hidden=inter=4096, plugin, newest revision, ep 1. */
void moe_trtllm_config_default(moe_trtllm_config *cfg);

/* MOE_OK with every decision filled; MOE_ERR_INVALID_ARG for an argument
 * out of range; MOE_ERR_UNSUPPORTED (no kernel / the path refuses it) or
 * MOE_ERR_INCOMPATIBLE (a forced choice the config cannot meet) naming the
 * first violated limit, plan->limit set. */
moe_status moe_trtllm_plan_compute(const moe_trtllm_config *cfg, moe_trtllm_plan *plan);

/* Names: "fp32" ... "mxfp4"; "relu" ... "swiglu_bias". NULL when out of range. */
const char *moe_trtllm_dtype_name(moe_trtllm_dtype d);
const char *moe_trtllm_activation_name(moe_trtllm_activation a);
/* Accepts the names above and the aliases e4m3 (fp8) and nvfp4 (fp4). */
int moe_trtllm_dtype_from_name(const char *s, moe_trtllm_dtype *d);
int moe_trtllm_activation_from_name(const char *s, moe_trtllm_activation *a);

#ifdef __cplusplus
}
#endif

#endif
