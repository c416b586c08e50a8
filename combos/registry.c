/* The prepare/finalize and experts types as data (DESIGN section 6). Rows
 * model vLLM's mk_objects.py registry (anchors vllm_modular.md 1.3-1.4)
 * and the dispatch systems of dispatch_sorting.md; each row names its
 * anchor. Where vLLM's registry flag and the class disagree, the comment
 * says which one the row follows. */
#include <string.h>
#include "moe/compat.h"

#define B(s) MOE_SCHEME_BIT(MOE_SCHEME_##s)
#define ALL_SCHEMES ((1u << MOE_SCHEME_COUNT) - 1u)
#define FP8_ALL (B(FP8_WTENSOR_ATENSOR) | B(FP8_WCHANNEL_ATENSOR) | B(FP8_WCHANNEL_ATOKEN) | \
                 B(FP8_WTENSOR_ATOKEN) | B(FP8_WBLOCK128_AGROUP128))
#define COMMON_FLOAT (B(F32) | B(BF16) | B(F16) | FP8_ALL) /* vLLM common_float_types */
#define W_ONLY_INT (B(W8A16_CHANNEL) | B(W4A16_G32) | B(W4A16_G64) | B(W4A16_G128))
#define F(x) (1u << MOE_FMT_##x)

/* vLLM DeepEPLLPrepareAndFinalize.SUPPORTED_HIDDEN_SIZES (upstream code
 * read through the public code search; not in the anchors, and the list
 * differs between versions). */
static const int deepep_ll_hidden[] = {2048, 2560, 3072, 4096, 5120, 6144, 7168, 8192, 0};

static const moe_pf_info pf_table[] = {
    /* NoDPEP quantizes locally with any scheme (moe_kernel_quantize_input)
     * and passes ids through; weight on input needs topk 1 */
    {"noep", MOE_FMT_STANDARD, ALL_SCHEMES, 1, 32, 0, 0, 1, 0, 1, 1, 0, NULL,
     "vllm_modular.md 1.3, 2.7 (MoEPrepareAndFinalizeNoDPEPModular)"},
    /* the single-GPU batched reference PF: rows per local expert in token
     * order, quantized per expert sub-batch */
    {"batched", MOE_FMT_BATCHED, ALL_SCHEMES, 1, 32, 0, 0, 1, 0, 1, 1, 0, NULL,
     "vllm_modular.md 2.7 (BatchedPrepareAndFinalize)"},
    /* naive DP/EP: quantize, all-gather, experts on all rows, reduce-scatter */
    {"allgather_rs", MOE_FMT_STANDARD, ALL_SCHEMES, 1, 32, 1, 0, 0, 0, 1, 1, 0, NULL,
     "vllm_modular.md 2.7 (NaiveDPEP); dispatch_sorting.md E"},
    /* DeepEP normal: bf16 or fp8 + scales on the wire, bf16-only combine,
     * int64 ids, -1 for non-local experts */
    {"deepep_ht", MOE_FMT_STANDARD, B(BF16) | FP8_ALL, 1, 64, 1, 0, 0, 1, 1, 1, 0, NULL,
     "vllm_modular.md 1.3, 2.7; dispatch_sorting.md A.2-A.4"},
    /* DeepEP low latency: bf16, or its own per-128 fp8 cast (block scales);
     * K <= 11; fixed hidden sizes */
    {"deepep_ll", MOE_FMT_BATCHED, B(BF16) | B(FP8_WBLOCK128_AGROUP128), 1, 64, 1, 0, 0, 1, 1, 1, 11,
     deepep_ll_hidden, "vllm_modular.md 1.3; dispatch_sorting.md A.5-A.6, E"},
    /* pplx: bytes plus optional fp32 scales; uint32 ids, every one valid */
    {"pplx", MOE_FMT_BATCHED, B(BF16) | B(F16) | FP8_ALL, 1, 32, 1, 0, 0, 1, 1, 0, 0, NULL,
     "dispatch_sorting.md D, E"},
    /* Hybrid-EP: expert-major padded rows, probs passed through to the
     * experts (no weight on input), bf16 or fp8 with per-128 scales; routing
     * is a map, so no -1 ids */
    {"hybrid_ep", MOE_FMT_GROUPED, B(BF16) | B(FP8_WBLOCK128_AGROUP128), 1, 32, 1, 0, 0, 1, 0, 0, 0, NULL,
     "dispatch_sorting.md A.7, E; seed 002"},
};

static const moe_experts_info ex_table[] = {
    /* the reference composition (moe_ref_forward's stages), weights and
     * reduction inside */
    {"ref", F(STANDARD), ALL_SCHEMES, 1, 1, 1, 0, MOE_DET_EXACT, MOE_WAR_NOOP,
     "DESIGN 6; vllm_modular.md 7 (torch_experts)"},
    /* TritonExperts: align -> gathered GEMMs, router weights in GEMM2,
     * moe_sum; needs matching quant */
    {"triton_like", F(STANDARD), COMMON_FLOAT | B(INT8_WCHANNEL_ATOKEN) | W_ONLY_INT, 1, 1, 1, 1, MOE_DET_EXACT,
     MOE_WAR_NOOP, "vllm_modular.md 1.4, 2.8 (TritonExperts)"},
    /* TensorRT-LLM CUTLASS: maps -> expand -> grouped GEMM -> finalize */
    {"permute_grouped", F(STANDARD),
     B(F32) | B(BF16) | B(F16) | B(FP8_WTENSOR_ATENSOR) | B(FP8_WBLOCK128_AGROUP128) | B(W8A16_CHANNEL) |
         B(W4A16_G128) | B(W4AFP8_G128) | B(MXFP8) | B(MXFP4_W4A16) | B(NVFP4),
     1, 1, 0, 0, MOE_DET_EXACT, MOE_WAR_NOOP, "trtllm_moe.md 1-6"},
    /* BatchedTritonExperts / DeepGEMM masked: per-expert batches, the PF
     * reduces (Delegate); needs matching quant; no expert map */
    {"batched_masked", F(BATCHED), COMMON_FLOAT, 1, 0, 0, 1, MOE_DET_EXACT, MOE_WAR_DELEGATE,
     "vllm_modular.md 1.4 (BatchedTritonExperts, BatchedDeepGemmExperts)"},
    /* DeepGEMM contiguous: expert-contiguous rows, block fp8 only */
    {"grouped_contig", F(STANDARD) | F(GROUPED), B(FP8_WBLOCK128_AGROUP128), 1, 1, 1, 0, MOE_DET_EXACT,
     MOE_WAR_NOOP, "vllm_modular.md 1.4 (DeepGemmExperts), 1.7 rule 6"},
    /* CK-tile fused MoE: sorting + fused GEMMs, atomic accumulation of the
     * k slots into the output */
    {"ck_fused", F(STANDARD), B(BF16) | B(F16) | B(INT8_WCHANNEL_ATOKEN), 0, 1, 0, 0, MOE_DET_BOUNDED, MOE_WAR_NOOP,
     "dispatch_sorting.md B.5, B.7"},
    /* NaiveBatchedExperts: the registry flag says expert maps work (the
     * class says no); the row follows the registry, which the vLLM test uses */
    {"naive_batched", F(BATCHED), COMMON_FLOAT | B(INT8_WCHANNEL_ATOKEN), 1, 1, 0, 0, MOE_DET_EXACT,
     MOE_WAR_DELEGATE, "vllm_modular.md 1.4 (NaiveBatchedExperts)"},
};

#define NPF ((int)(sizeof pf_table / sizeof pf_table[0]))
#define NEX ((int)(sizeof ex_table / sizeof ex_table[0]))

int moe_pf_count(void) { return NPF; }
const moe_pf_info *moe_pf_get(int i) { return i >= 0 && i < NPF ? &pf_table[i] : NULL; }
int moe_experts_count(void) { return NEX; }
const moe_experts_info *moe_experts_get(int i) { return i >= 0 && i < NEX ? &ex_table[i] : NULL; }

const moe_pf_info *moe_pf_find(const char *name)
{
    for (int i = 0; name && i < NPF; i++)
        if (strcmp(pf_table[i].name, name) == 0) return &pf_table[i];
    return NULL;
}

const moe_experts_info *moe_experts_find(const char *name)
{
    for (int i = 0; name && i < NEX; i++)
        if (strcmp(ex_table[i].name, name) == 0) return &ex_table[i];
    return NULL;
}

const char *moe_act_format_name(moe_act_format f)
{
    static const char *const n[MOE_FMT_COUNT] = {"standard", "batched", "grouped"};
    return (unsigned)f < MOE_FMT_COUNT ? n[f] : "unknown";
}

const char *moe_determinism_name(moe_determinism d)
{
    static const char *const n[MOE_DET_COUNT] = {"exact", "set", "bounded"};
    return (unsigned)d < MOE_DET_COUNT ? n[d] : "unknown";
}
