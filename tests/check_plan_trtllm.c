/* The TensorRT-LLM path planner: every decision on both sides of each
 * threshold of seed 001 and anchors trtllm_moe.md 4.4, 5.4 and 6, and every
 * limit (dtype x SM, output type, MoeOOTB, forced tactic families). */
#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "moe/plan_trtllm.h"

/* Cases override BASE's fields; the later initializer wins, on purpose. */
#pragma GCC diagnostic ignored "-Woverride-init"
#define BASE                                                                                     \
    .sm = 90, .act_dtype = MOE_TRTLLM_BF16, .weight_dtype = MOE_TRTLLM_BF16,                     \
    .out_dtype = MOE_TRTLLM_BF16, .activation = MOE_TRTLLM_ACT_SWIGLU, .topk = 2, .tokens = 128, \
    .experts_per_node = 8, .hidden = 4096, .inter = 4096, .ep_size = 1
#define FP16 .act_dtype = MOE_TRTLLM_FP16, .weight_dtype = MOE_TRTLLM_FP16, .out_dtype = MOE_TRTLLM_FP16
#define W4A16 .act_dtype = MOE_TRTLLM_FP16, .weight_dtype = MOE_TRTLLM_INT4, .out_dtype = MOE_TRTLLM_FP16
#define FP8 .act_dtype = MOE_TRTLLM_FP8, .weight_dtype = MOE_TRTLLM_FP8
#define W4AFP8 .act_dtype = MOE_TRTLLM_FP8, .weight_dtype = MOE_TRTLLM_INT4
#define WFP4A16 .weight_dtype = MOE_TRTLLM_MXFP4, .frontend = MOE_TRTLLM_RUNNER
#define NVFP4 .act_dtype = MOE_TRTLLM_FP4, .weight_dtype = MOE_TRTLLM_FP4, .sm = 100
#define OLD .revision = MOE_TRTLLM_REV_OLD
#define NOTMA .tma_ws = MOE_TRTLLM_TMA_FORCE_OFF

enum { FRONT = MOE_TRTLLM_D_FRONTEND, GEMM = MOE_TRTLLM_D_GEMM_FAMILY,
       PRO = MOE_TRTLLM_D_PROLOGUE, EXP = MOE_TRTLLM_D_EXPAND, SCL = MOE_TRTLLM_D_EXPAND_SCALES,
       FC1P = MOE_TRTLLM_D_FC1_PREQUANT, FC2P = MOE_TRTLLM_D_FC2_PREQUANT,
       ACT = MOE_TRTLLM_D_FC1_ACTIVATION, FIN = MOE_TRTLLM_D_FINALIZE,
       RED = MOE_TRTLLM_D_REDUCTION, LORA = MOE_TRTLLM_D_LORA_BIAS };

/* (config, decision, expected path, a substring of the condition) */
static const struct {
    moe_trtllm_config c;
    int d;
    const char *path, *cond;
} ok[] = {
    /* fused prologue: T 256/257, k in {1,2,4,6,8} vs 3/5/7, expert_log 9/10, smem */
    {{BASE, .tokens = 256}, PRO, "fused-single-block", "T=256 <= 256 (block 256)"},
    {{BASE, .tokens = 257}, PRO, "three-step", "T=257 > 256"},
    {{BASE, .tokens = 0}, PRO, "fused-single-block", "T=0 <= 256 (block 32)"},
    {{BASE, .topk = 1}, PRO, "fused-single-block", "k=1 in"},
    {{BASE, .topk = 4}, PRO, "fused-single-block", "k=4 in"},
    {{BASE, .topk = 6}, PRO, "fused-single-block", "k=6 in"},
    {{BASE, .topk = 8}, PRO, "fused-single-block", "k=8 in"},
    {{BASE, .topk = 3}, PRO, "three-step", "k=3 not in {1,2,4,6,8}"},
    {{BASE, .topk = 5}, PRO, "three-step", "k=5 not in"},
    {{BASE, .topk = 7}, PRO, "three-step", "k=7 not in"},
    {{BASE, .experts_per_node = 510}, PRO, "fused-single-block", "expert_log=9 <= 9"},
    {{BASE, .experts_per_node = 511}, PRO, "three-step", "E_local=511 + 1)) + 1 = 10 > 9"},
    {{BASE, .radix_smem_exceeds = 1}, PRO, "three-step", "radix sort smem"},
    /* the gate: seed/[K] !use_wfp4a16 vs [OLD] !use_w4_groupwise */
    {{BASE, WFP4A16}, PRO, "three-step", "use_wfp4a16=1 fails the !use_wfp4a16 gate"},
    {{BASE, WFP4A16, OLD}, PRO, "three-step", "[OLD] !use_w4_groupwise"},
    {{BASE, W4AFP8}, PRO, "fused-single-block", "!use_wfp4a16 passes"},
    {{BASE, W4AFP8, OLD}, PRO, "three-step", "use_w4afp8=1 fails the [OLD]"},
    /* GEMM family: SM 89/90/100/120, forced off */
    {{BASE, .sm = 89}, GEMM, "sm80-style", "sm=89: no TMA-WS for bf16"},
    {{BASE, .sm = 90}, GEMM, "tma-ws", "sm=90 supportsTmaWarpSpecialized"},
    {{BASE, .sm = 100}, GEMM, "tma-ws", "sm=100"},
    {{BASE, .sm = 120}, GEMM, "sm80-style", "sm=120: no TMA-WS for bf16"},
    {{BASE, NOTMA}, GEMM, "sm80-style", "forced off"},
    {{BASE, FP8, .sm = 89}, GEMM, "sm89-kernels", "sm=89"},
    {{BASE, FP8, .sm = 120}, GEMM, "sm89-kernels", "sm=120"},
    {{BASE, .act_dtype = MOE_TRTLLM_FP32, .weight_dtype = MOE_TRTLLM_FP32, .out_dtype = MOE_TRTLLM_FP32}, GEMM, "simt", "fp32"},
    /* expand variants, AWQ prequant only for W4AFP8 */
    {{BASE}, EXP, "plain-copy", "(bf16)"},
    {{BASE, W4AFP8, .awq = 1}, EXP, "awq-prequant-fp8", "use_w4afp8 && !use_fp8_input"},
    {{BASE, NVFP4}, EXP, "nvfp4-quantize", "act=fp4"},
    {{BASE, FP8}, EXP, "plain-copy", "(fp8)"},
    /* FC1 AWQ prequant kernel (#5) */
    {{BASE, W4A16, .sm = 80, .awq = 1}, FC1P, "apply-per-channel-scale", "T=fp16 != W=int4"},
    {{BASE, W4A16, .sm = 80}, FC1P, "none", "use_awq=0"},
    {{BASE, W4AFP8, .awq = 1}, FC1P, "none", "W4AFP8 applies"},
    {{BASE, .awq = 1}, FC1P, "none", "T == W"},
    {{BASE, WFP4A16, .awq = 1}, FC1P, "none", "wfp4a16 excludes AWQ"},
    /* FC2 prequant fused into the FC1 activation: AWQ and gated, [K] only */
    {{BASE, W4A16, .sm = 80, .awq = 1}, FC2P, "fused-into-fc1-activation", "swiglu is gated"},
    {{BASE, W4A16, .sm = 80, .awq = 1, .activation = MOE_TRTLLM_ACT_RELU}, FC2P, "separate-before-gemm2", "relu is not gated"},
    {{BASE, W4A16, .sm = 80}, FC2P, "none", "use_awq=0"},
    {{BASE, W4A16, .sm = 80, .awq = 1, OLD}, FC2P, "separate-before-gemm2", "[OLD] has no"},
    {{BASE, WFP4A16, .awq = 1}, FC2P, "none", "use_awq=0"},
    /* FC1 activation: SM 79/80, hidden/inter % 64, T == W, non-TMA */
    {{BASE, .sm = 80}, ACT, "sm80-fused-gated", "sm=80 >= 80"},
    {{BASE, FP16, .sm = 79}, ACT, "identity-then-doGatedActivation", "sm=79 < 80"},
    {{BASE, FP16, .sm = 75}, ACT, "identity-then-doGatedActivation", "sm=75 < 80"},
    {{BASE, .sm = 80, .activation = MOE_TRTLLM_ACT_GEGLU}, ACT, "sm80-fused-gated", "geglu"},
    {{BASE, .sm = 80, .activation = MOE_TRTLLM_ACT_SWIGLU_BIAS}, ACT, "identity-then-doGatedActivation", "swiglu_bias not in"},
    {{BASE, .sm = 80, .hidden = 4032}, ACT, "sm80-fused-gated", "hidden=4032"},
    {{BASE, .sm = 80, .hidden = 4000}, ACT, "identity-then-doGatedActivation", "hidden=4000 % 64 != 0"},
    {{BASE, .sm = 80, .inter = 4000}, ACT, "identity-then-doGatedActivation", "inter=4000 % 64 != 0"},
    {{BASE, W4A16, .sm = 80}, ACT, "identity-then-doGatedActivation", "T=fp16 != W=int4"},
    {{BASE, .act_dtype = MOE_TRTLLM_FP32, .weight_dtype = MOE_TRTLLM_FP32, .out_dtype = MOE_TRTLLM_FP32}, ACT, "identity-then-doGatedActivation", "T=fp32"},
    {{BASE}, ACT, "separate-doActivation", "TMA-WS GEMM1"},
    {{BASE, NOTMA}, ACT, "sm80-fused-gated", "sm=90 >= 80"},
    {{BASE, .sm = 80, .activation = MOE_TRTLLM_ACT_RELU}, ACT, "epilogue-fused", "moeGemmBiasAct"},
    {{BASE, FP8, .sm = 89}, ACT, "separate-doActivation", "use_fp8"},
    /* finalize fusion: k < 3 vs deterministic, env, LoRA, TMA-WS, W4 gate */
    {{BASE, .deterministic = 1}, FIN, "fused-gemm2-epilogue", "k=2 < 3"},
    {{BASE, .topk = 3, .deterministic = 1}, FIN, "finalizeMoeRoutingKernel", "k=3 >= 3 with deterministic"},
    {{BASE, .topk = 3}, FIN, "fused-gemm2-epilogue", "k=3, not deterministic"},
    {{BASE, .disable_finalize_fusion = 1}, FIN, "finalizeMoeRoutingKernel", "DISABLE_FINALIZE_FUSION"},
    {{BASE, .lora = 1}, FIN, "finalizeMoeRoutingKernel", "LoRA"},
    {{BASE, .sm = 89}, FIN, "finalizeMoeRoutingKernel", "not TMA-WS on sm=89"},
    {{BASE, .sm = 100}, FIN, "fused-gemm2-epilogue", "sm=100"},
    {{BASE, NOTMA}, FIN, "finalizeMoeRoutingKernel", "not TMA-WS"},
    {{BASE, .sm = 89, .ep_size = 2, .enable_alltoall = 1}, FIN, "finalizeMoeRoutingNoFillingKernel", "ep_size=2 > 1 with alltoall"},
    {{BASE, .sm = 89, .ep_size = 2}, FIN, "finalizeMoeRoutingKernel", "ep_size=2"},
    {{BASE, WFP4A16}, FIN, "finalizeMoeRoutingKernel", "use_wfp4a16=1"},
    {{BASE, W4AFP8}, FIN, "fused-gemm2-epilogue", "!use_wfp4a16"},
    {{BASE, W4AFP8, OLD}, FIN, "finalizeMoeRoutingKernel", "[OLD] !use_w4_groupwise"},
    {{BASE}, SCL, "permuted", "finalize fused"},
    {{BASE, .sm = 89}, SCL, "not-permuted", "unfused"},
    /* reduction determinism of the fused epilogue (anchor 5.3) */
    {{BASE, .topk = 1}, RED, "plain-store", "k=1"},
    {{BASE}, RED, "atomic-add-deterministic", "k=2"},
    {{BASE, .topk = 4}, RED, "atomic-add-order-dependent", "k=4 >= 3"},
    {{BASE, .topk = 4, .deterministic = 1}, RED, "fp32-fixed-order", "unfused"},
    /* LoRA FC2 bias (#13) */
    {{BASE}, LORA, "n/a", "no LoRA"},
    {{BASE, .sm = 80, .lora = 1}, LORA, "fused-gemm2-bias", "!(use_fp8 || tma_ws)"},
    {{BASE, .lora = 1}, LORA, "doActivation-identity-bias", "TMA-WS"},
    /* frontends */
    {{BASE}, FRONT, "plugin", "MixtureOfExperts plugin"},
    {{BASE, .frontend = MOE_TRTLLM_OOTB, .sm = 99}, FRONT, "ootb", "MoeOOTB"},
    {{BASE, .frontend = MOE_TRTLLM_OOTB}, PRO, "n/a", "runMoe is not used"},
    {{BASE, WFP4A16}, FRONT, "runner", "no TRT plugin limits"},
    /* dtype x SM limits on their passing side */
    {{BASE, FP8, .sm = 89}, FRONT, "plugin", ""},
    {{BASE, FP8, .out_dtype = MOE_TRTLLM_FP16}, FRONT, "plugin", ""},
    {{BASE, NVFP4, .sm = 120}, GEMM, "tma-ws", "sm=120"},
    {{BASE, FP16, .sm = 75}, GEMM, "sm80-style", "sm=75"},
    {{BASE, W4AFP8, .sm = 89}, GEMM, "sm89-kernels", "sm=89"},
};

START_TEST(decisions)
{
    moe_trtllm_plan p;
    moe_status s = moe_trtllm_plan_compute(&ok[_i].c, &p);
    ck_assert_msg(s == MOE_OK, "case %d: %s", _i, moe_last_error());
    const moe_trtllm_decision *d = &p.d[ok[_i].d];
    ck_assert_msg(strcmp(d->path, ok[_i].path) == 0, "case %d %s: path %s, want %s (%s)", _i, d->id,
                  d->path, ok[_i].path, d->condition);
    ck_assert_msg(strstr(d->condition, ok[_i].cond), "case %d %s: '%s' not in '%s'", _i, d->id,
                  ok[_i].cond, d->condition);
    for (int i = 0; i < MOE_TRTLLM_D_COUNT; i++)
        ck_assert_msg(p.d[i].id && p.d[i].path && p.d[i].anchor && p.d[i].anchor[0] &&
                          p.d[i].condition[0], "case %d: decision %d incomplete", _i, i);
}
END_TEST

/* (config, status, limit id, a substring of the message) */
static const struct {
    moe_trtllm_config c;
    moe_status s;
    const char *limit, *msg;
} bad[] = {
    {{BASE, .frontend = MOE_TRTLLM_OOTB, W4A16}, MOE_ERR_UNSUPPORTED, "ootb-weight-only", "weight-only"},
    {{BASE, .frontend = MOE_TRTLLM_OOTB, .act_dtype = MOE_TRTLLM_BF16, .weight_dtype = MOE_TRTLLM_INT8}, MOE_ERR_UNSUPPORTED, "ootb-weight-only", "weight=int8"},
    {{BASE, .frontend = MOE_TRTLLM_OOTB, .sm = 100}, MOE_ERR_UNSUPPORTED, "ootb-sm100", "sm=100"},
    {{BASE, FP8, .out_dtype = MOE_TRTLLM_FP8}, MOE_ERR_UNSUPPORTED, "out-fp8-fp4", "fp8"},
    {{BASE, NVFP4, .out_dtype = MOE_TRTLLM_FP4}, MOE_ERR_UNSUPPORTED, "out-fp8-fp4", "fp4"},
    {{BASE, .out_dtype = MOE_TRTLLM_FP16}, MOE_ERR_UNSUPPORTED, "out-type", "fp16 != act dtype bf16"},
    {{BASE, FP8, .sm = 88}, MOE_ERR_UNSUPPORTED, "fp8-sm", "SM >= 89 (sm=88)"},
    {{BASE, FP8, .sm = 80}, MOE_ERR_UNSUPPORTED, "fp8-sm", "sm=80"},
    {{BASE, NVFP4, .sm = 90}, MOE_ERR_UNSUPPORTED, "fp4-sm", "SM >= 100 (sm=90)"},
    {{BASE, NVFP4, .sm = 99}, MOE_ERR_UNSUPPORTED, "fp4-sm", "sm=99"},
    {{BASE, .weight_dtype = MOE_TRTLLM_FP16}, MOE_ERR_UNSUPPORTED, "act-weight", "act=bf16 weight=fp16"},
    {{BASE, .act_dtype = MOE_TRTLLM_FP32, .out_dtype = MOE_TRTLLM_FP32}, MOE_ERR_UNSUPPORTED, "act-weight", "act=fp32 weight=bf16"},
    {{BASE, .act_dtype = MOE_TRTLLM_FP8, .weight_dtype = MOE_TRTLLM_MXFP4, .sm = 100}, MOE_ERR_UNSUPPORTED, "act-weight", "not modelled"},
    {{BASE, FP8, .out_dtype = MOE_TRTLLM_FP32}, MOE_ERR_UNSUPPORTED, "out-backbone", "fp32"},
    {{BASE, .weight_dtype = MOE_TRTLLM_MXFP4}, MOE_ERR_UNSUPPORTED, "plugin-instantiation", "wfp4a16"},
    {{BASE, .sm = 79}, MOE_ERR_UNSUPPORTED, "arch", "bf16 (act=bf16) on sm=79"},
    {{BASE, W4AFP8, .sm = 100}, MOE_ERR_UNSUPPORTED, "arch", "w4afp8"},
    {{BASE, WFP4A16, .sm = 100}, MOE_ERR_UNSUPPORTED, "arch", "wfp4a16"},
    {{BASE, .sm = 89, .tma_ws = MOE_TRTLLM_TMA_FORCE_ON}, MOE_ERR_INCOMPATIBLE, "tma-ws-forced-on", "sm=89"},
    {{BASE, .sm = 120, .tma_ws = MOE_TRTLLM_TMA_FORCE_ON}, MOE_ERR_INCOMPATIBLE, "tma-ws-forced-on", "sm=120"},
    {{BASE, FP8, NOTMA}, MOE_ERR_INCOMPATIBLE, "tma-ws-forced-off", "no SM80-style fallback on sm=90"},
    {{BASE, NVFP4, NOTMA}, MOE_ERR_INCOMPATIBLE, "tma-ws-forced-off", "nvfp4"},
    {{BASE, .hidden = 4100}, MOE_ERR_INCOMPATIBLE, "alignment", "128/bits(bf16) = 8"},
    {{BASE, W4A16, .sm = 80, .inter = 4112}, MOE_ERR_INCOMPATIBLE, "alignment", "= 32"},
    {{BASE, NVFP4, .lora = 1}, MOE_ERR_UNSUPPORTED, "lora-fp4", "LoRA"},
};

START_TEST(limits)
{
    moe_trtllm_plan p;
    moe_status s = moe_trtllm_plan_compute(&bad[_i].c, &p);
    ck_assert_msg(s == bad[_i].s, "case %d: status %s (%s)", _i, moe_status_str(s), moe_last_error());
    ck_assert_str_eq(p.limit, bad[_i].limit);
    ck_assert_msg(strstr(moe_last_error(), bad[_i].limit) && strstr(moe_last_error(), bad[_i].msg),
                  "case %d: '%s'", _i, moe_last_error());
    ck_assert_msg(strstr(moe_last_error(), p.limit_anchor) != NULL, "anchor not in message");
}
END_TEST

START_TEST(invalid_args)
{
    moe_trtllm_plan p;
    moe_trtllm_config c;
    moe_trtllm_config_default(&c);
    ck_assert_int_eq(moe_trtllm_plan_compute(&c, &p), MOE_OK);
    ck_assert_int_eq(moe_trtllm_plan_compute(NULL, &p), MOE_ERR_NULL);
    ck_assert_int_eq(moe_trtllm_plan_compute(&c, NULL), MOE_ERR_NULL);
    static const struct { size_t off; int64_t v; int wide; const char *needle; } f[] = {
        {offsetof(moe_trtllm_config, sm), 74, 0, "sm 74: must be in 75..121"},
        {offsetof(moe_trtllm_config, sm), 122, 0, "sm 122"},
        {offsetof(moe_trtllm_config, topk), 0, 0, "topk 0"},
        {offsetof(moe_trtllm_config, tokens), -1, 1, "tokens -1"},
        {offsetof(moe_trtllm_config, experts_per_node), 0, 0, "experts_per_node 0"},
        {offsetof(moe_trtllm_config, hidden), 0, 1, "hidden 0"},
        {offsetof(moe_trtllm_config, ep_size), 0, 0, "ep_size 0"},
        {offsetof(moe_trtllm_config, act_dtype), MOE_TRTLLM_DTYPE_COUNT, 0, "act_dtype"},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        moe_trtllm_config b = c;
        if (f[i].wide) *(int64_t *)((char *)&b + f[i].off) = f[i].v;
        else *(int *)((char *)&b + f[i].off) = (int)f[i].v;
        ck_assert_int_eq(moe_trtllm_plan_compute(&b, &p), MOE_ERR_INVALID_ARG);
        ck_assert_msg(strstr(moe_last_error(), f[i].needle), "'%s'", moe_last_error());
    }
}
END_TEST

START_TEST(names)
{
    moe_trtllm_dtype d;
    moe_trtllm_activation a;
    for (int i = 0; i < MOE_TRTLLM_DTYPE_COUNT; i++) {
        ck_assert(moe_trtllm_dtype_from_name(moe_trtllm_dtype_name((moe_trtllm_dtype)i), &d));
        ck_assert_int_eq(d, i);
    }
    ck_assert(moe_trtllm_dtype_from_name("e4m3", &d) && d == MOE_TRTLLM_FP8);
    ck_assert(moe_trtllm_dtype_from_name("nvfp4", &d) && d == MOE_TRTLLM_FP4);
    ck_assert(!moe_trtllm_dtype_from_name("fp6", &d));
    for (int i = 0; i < MOE_TRTLLM_ACT_COUNT; i++) {
        ck_assert(moe_trtllm_activation_from_name(moe_trtllm_activation_name((moe_trtllm_activation)i), &a));
        ck_assert_int_eq(a, i);
    }
    ck_assert_ptr_null(moe_trtllm_dtype_name(MOE_TRTLLM_DTYPE_COUNT));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("plan_trtllm");
    TCase *tc = tcase_create("plan");
    tcase_add_loop_test(tc, decisions, 0, (int)(sizeof ok / sizeof ok[0]));
    tcase_add_loop_test(tc, limits, 0, (int)(sizeof bad / sizeof bad[0]));
    tcase_add_test(tc, invalid_args);
    tcase_add_test(tc, names);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
