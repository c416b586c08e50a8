/* The tolerance table as data (include/moe/tolerance.h). Provenance:
 * DESIGN section 5 names what is EXACT everywhere (movement, selection,
 * quantization, element-wise stages with the canonical math, fixed-order
 * reductions) and that the CUDA conformance build is EXACT for every
 * stage; the BOUNDED rows carry the derivation of their bound
 * (tests/mk_bounds.h and combos/sweep_class.c for the e2e classes). */
#include "moe/tolerance.h"
#include <string.h>

#define EXACT_ALL(stage) \
    {"ref." stage, stage, "ref", "*", MOE_CLASS_EXACT, "", "the oracle itself"}, \
    {"cuda-conform." stage, stage, "cuda-conform", "*", MOE_CLASS_EXACT, "", \
     "DESIGN 5: the conformance build keeps the reference's order and math"}, \
    {"cuda-atomic." stage, stage, "cuda-atomic", "*", MOE_CLASS_EXACT, "", \
     "DESIGN 5: the conformance build keeps the reference's order and math"}

/* cuda-atomic: upstream's atomic placement (optimized/cuda/ops_cuda.c) */
#define ATOMIC_SET(stage, why) {"cuda-atomic." stage, stage, "cuda-atomic", "*", MOE_CLASS_SET, "", why}

#define EXACT_MOVE(stage, why) \
    EXACT_ALL(stage), {"any." stage, stage, "*", "*", MOE_CLASS_EXACT, "", why}

/* the fp32 dot-product bound of a GEMM whose summation order differs:
 * moe_gemm_bound (include/moe/bounds.h has the derivation) */
#define GEMM_BOUND \
    "moe_gemm_bound: D + h(ref) + h(|ref| + h(ref) + D), D = (gamma_m + gamma_b) sum_k |a_k b_k| + 2 u |bias| + " \
    "underflow, gamma_b = max(gamma_m, t (1 + t)), t = ceil(m / 16) (2^-23 + 17 2^-24) (truncating tensor-core " \
    "steps); m = K (block tiles: min(128, K) + kt + 1), +1 with bias; h = half an ulp of out's dtype (0 for f32)"

/* a fused path's GEMM element against the reference's (fused_judge.h) */
#define FUSED_BOUND \
    "fused_judge.h: |S_fast - S_ref| <= [g(m_r) + (tc (1 + tc) + g(mx)) (1 + d) / (1 - d) + d / (1 - d)] A + 2 under, " \
    "tc = steps (2^(1 - acc_bits) + (k_step + 1) 2^-24)"

static const moe_tolerance_row ROWS[] = {
    EXACT_MOVE("route", "DESIGN 5: routing is selection, EXACT everywhere"),
    ATOMIC_SET("align_block_size", "vLLM's align large path places an expert's rows with atomics (align.cu)"),
    EXACT_MOVE("align_block_size", "DESIGN 5: align/sort/maps are EXACT (the atomic align variant is SET)"),
    EXACT_MOVE("align_batched", "DESIGN 5: index arithmetic"),
    EXACT_MOVE("sort_ck", "DESIGN 5: align/sort/maps are EXACT"),
    EXACT_MOVE("maps_trtllm", "DESIGN 5: align/sort/maps are EXACT"),
    EXACT_MOVE("quantize", "DESIGN 5: quantization and scale selection are EXACT"),
    EXACT_MOVE("dequantize", "DESIGN 5: one rounding of decode(q) * scale"),
    EXACT_MOVE("permute_rows", "DESIGN 5: permutation moves bits"),
    EXACT_MOVE("unpermute_rows", "DESIGN 5: permutation moves bits"),
    EXACT_MOVE("expand_trtllm", "DESIGN 5: permutation moves bits"),
    EXACT_MOVE("batched_scatter", "DESIGN 5: permutation moves bits"),
    EXACT_MOVE("permute_grouped", "DESIGN 5: permutation moves bits"),
    EXACT_ALL("grouped_gemm"),
    {"cpu.grouped_gemm", "grouped_gemm", "cpu", "*", MOE_CLASS_BOUNDED, GEMM_BOUND,
     "OpenBLAS changes the summation order: Higham 3.1, gamma_K = K u / (1 - K u), u = 2^-24"},
    {"cuda-fast.grouped_gemm", "grouped_gemm", "cuda-fast", "*", MOE_CLASS_BOUNDED, GEMM_BOUND,
     "tensor-core accumulation: Higham 3.1 and the truncating step model measured on H200 (bounds.h)"},
    EXACT_MOVE("activation", "DESIGN 5: element-wise with the canonical math header"),
    EXACT_MOVE("war_contiguous", "DESIGN 5: fixed-order reductions are EXACT"),
    EXACT_MOVE("war_noop", "DESIGN 5: movement"),
    EXACT_MOVE("war_naive_batched", "DESIGN 5: fixed-order reductions are EXACT"),
    EXACT_MOVE("finalize_trtllm", "DESIGN 5: fixed-order reductions are EXACT"),
    EXACT_MOVE("ep_allgather_dispatch", "DESIGN 5: dispatch/combine movement is EXACT"),
    EXACT_MOVE("ep_reduce_scatter_combine", "DESIGN 5: fixed rank order"),
    EXACT_MOVE("deepep_layout", "DESIGN 5: index arithmetic"),
    EXACT_MOVE("deepep_dispatch", "DESIGN 5: dispatch/combine movement is EXACT"),
    EXACT_MOVE("deepep_combine", "DESIGN 5: fixed rank order"),
    ATOMIC_SET("deepep_ll_dispatch", "DeepEP-LL receive rows land in atomic order (dispatch_sorting.md)"),
    EXACT_ALL("deepep_ll_dispatch"),
    {"any.deepep_ll_dispatch", "deepep_ll_dispatch", "*", "*", MOE_CLASS_SET, "",
     "DESIGN 5: DeepEP-LL receive rows land in atomic order upstream (dispatch_sorting.md)"},
    EXACT_MOVE("deepep_ll_combine", "DESIGN 5: fixed slot order"),
    ATOMIC_SET("pplx_dispatch", "pplx receive rows land in atomic order (dispatch_sorting.md)"),
    EXACT_ALL("pplx_dispatch"),
    {"any.pplx_dispatch", "pplx_dispatch", "*", "*", MOE_CLASS_SET, "",
     "DESIGN 5: pplx receive rows land in atomic order upstream (dispatch_sorting.md)"},
    EXACT_MOVE("pplx_combine", "DESIGN 5: fixed slot order"),
    EXACT_MOVE("hep_dispatch_with_permute", "DESIGN 5: dispatch/combine movement is EXACT"),
    EXACT_MOVE("hep_combine_with_unpermute", "DESIGN 5: fixed order"),

    /* a fused experts path judged stage by stage on its own intermediates
     * (include/moe/fused_judge.h has the derivation; fused_run.h the paths) */
    {"any.fused.layout", "fused.layout", "*", "*", MOE_CLASS_EXACT, "",
     "every slot has a padded row of its own (DESIGN 5: align/sort/maps are EXACT)"},
    {"any.fused.quant_x", "fused.quant_x", "*", "*", MOE_CLASS_EXACT, "",
     "DESIGN 5: quantization and scale selection are EXACT (x's codes and scales)"},
    {"any.fused.gemm1_act", "fused.gemm1_act", "*", "*", MOE_CLASS_BOUNDED, FUSED_BOUND "; h in rnd(act over the g x u box)",
     "tensor-core accumulation of GEMM1, the gated activation in its epilogue"},
    {"any.fused.quant_h", "fused.quant_h", "*", "*", MOE_CLASS_EXACT, "",
     "DESIGN 5: quantization is EXACT (the trace's h rows by the reference's rule)"},
    {"any.fused.gemm2_weight", "fused.gemm2_weight", "*", "*", MOE_CLASS_BOUNDED, FUSED_BOUND "; y in rnd(w [S - D, S + D]) widened by u",
     "tensor-core accumulation of GEMM2, the router weight in its epilogue"},
    {"any.fused.combine", "fused.combine", "*", "*", MOE_CLASS_EXACT, "",
     "DESIGN 5: fixed-order reduction (the k slots' y in slot order from +0, f32, one rounding)"},
    {"any.fused.gemm2_combine", "fused.gemm2_combine", "*", "*", MOE_CLASS_BOUNDED,
     FUSED_BOUND "; the k slots' f32 terms in any order: + gamma_k of their absolute sum",
     "atomic combine: GEMM2's weighted rows added into f32 in arrival order"},

    /* A modular-kernel forward against moe_ref_forward. Every type computes
     * the oracle's per-slot expert outputs Y_j bit for bit (same rows, same
     * row-wise scales; combos/sweep_class.c says when that holds); only the
     * weighting and the reduction over the k slots differ, so the bound is
     * the rounding-count bound of include/moe/bounds.h with the path counts
     * (nf f32, nb x-dtype roundings per term) of each class. */
    /* a backend that keeps the reference's order is held to the same pair
     * run on the reference backend, bit for bit, whatever the pair's class */
    {"cuda-conform.e2e", "e2e/any", "cuda-conform", "*", MOE_CLASS_EXACT, "",
     "DESIGN 5: the conformance build is EXACT end to end (against the pair on the reference backend)"},
    /* atomic placement moves rows, never changes them: every consumer finds
     * a row through the layout or its handle, so the forward is still EXACT */
    {"cuda-atomic.e2e", "e2e/any", "cuda-atomic", "*", MOE_CLASS_EXACT, "",
     "rows placed in atomic order reach the same slots through the layout / handles: EXACT against the pair on ref"},
    /* a backend whose GEMMs reorder sums: BOUNDED stages compose through the
     * activation and the requantization (a code flip of a quantized
     * intermediate), which no end-to-end bound here models; so the forward
     * passes when every stage the replay saw is within its own row, and its
     * difference from the oracle is reported */
    {"cpu.e2e", "e2e/any", "cpu", "*", MOE_CLASS_BOUNDED, "every replayed stage within its row (GEMM: moe_gemm_bound)",
     "stage-wise: bounded GEMMs composed with requantization have no derived end-to-end bound (README Claims)"},
    {"cuda-fast.e2e", "e2e/any", "cuda-fast", "*", MOE_CLASS_BOUNDED,
     "every replayed stage within its row (GEMM: moe_gemm_bound)",
     "stage-wise: bounded GEMMs composed with requantization have no derived end-to-end bound (README Claims)"},
    {"e2e.exact", "e2e/exact", "*", "*", MOE_CLASS_EXACT, "",
     "noep x ref runs the oracle's own stages in the oracle's order"},
    {"e2e.f32-sum", "e2e/f32-sum", "*", "*", MOE_CLASS_BOUNDED, "G(k+1+R, 2) A + G(k+1, 1) A + eta",
     "ref experts per rank (oracle path) + the combine's f32 sum of R partials and one rounding"},
    {"e2e.fmaf", "e2e/fmaf", "*", "*", MOE_CLASS_BOUNDED, "G(k, 1) A + G(k+1, 1) A + eta",
     "finalize_trtllm / DeepEP-LL / pplx combine: fmaf chain from +0, one rounding"},
    {"e2e.fmaf-ep", "e2e/fmaf-ep", "*", "*", MOE_CLASS_BOUNDED, "G(k+R, 2) A + G(k+1, 1) A + eta",
     "fmaf finalize per rank + the combine's f32 sum of R partials"},
    {"e2e.slot", "e2e/slot", "*", "*", MOE_CLASS_BOUNDED, "G(k+1, k+1) Ax + G(k+1, 1) A + acc Hs + eta",
     "each slot rounded to x's dtype after its weight, then moe_sum / atomic adds, one rounding each"},
    {"e2e.slot-ep", "e2e/slot-ep", "*", "*", MOE_CLASS_BOUNDED, "G(k+1+R, k+2) Ax + G(k+1, 1) A + acc Hs + eta",
     "slot class per rank + the combine's f32 sum of R partials"},
    {"e2e.acc", "e2e/acc", "*", "*", MOE_CLASS_BOUNDED, "G(k+1, k) A + G(k+1, 1) A + eta",
     "NaiveBatched: o = round(o + w_j Y_j), one expert at a time"},
    {"e2e.hybrid", "e2e/hybrid", "*", "*", MOE_CLASS_BOUNDED, "G(1+k+R, 3) A + G(k+1, 1) A + eta",
     "Hybrid-EP: prob-weighted rows rounded, per-rank f32 unpermute sum, home-rank f32 sum of R partials"},
};

enum { NROWS = sizeof ROWS / sizeof ROWS[0] };

int moe_tolerance_count(void) { return NROWS; }

const moe_tolerance_row *moe_tolerance_get(int i) { return i >= 0 && i < NROWS ? &ROWS[i] : NULL; }

static int match(const char *pat, const char *s) { return !strcmp(pat, "*") || (s && !strcmp(pat, s)); }

const moe_tolerance_row *moe_tolerance_find(const char *stage, const char *backend, const char *scheme)
{
    int n = moe_tolerance_count();
    for (int i = 0; i < n; i++) {
        const moe_tolerance_row *r = moe_tolerance_get(i);
        int st = stage && (!strcmp(r->stage, stage) || (!strcmp(r->stage, "e2e/any") && !strncmp(stage, "e2e/", 4)));
        if (st && match(r->backend, backend) && match(r->scheme, scheme)) return r;
    }
    moe_fail(MOE_ERR_INVALID_ARG, "tolerance table: no row for stage '%s', backend '%s', scheme '%s'",
             stage ? stage : "(null)", backend ? backend : "(null)", scheme ? scheme : "(null)");
    return NULL;
}
