/* The comparison class of a cell (tolerance rows "e2e.*"): which oracle
 * the cell is held to and the rounding counts of its weighting and
 * reduction (include/moe/slot_bound.h). As data: each experts type's
 * weighting/reduction path and the domain of its dynamic per-tensor a2
 * scale; each PF's a1 domain and what its finalize or combine adds.
 *
 * The per-slot rows Y_j of every type equal the oracle's when the oracle
 * quantizes over the type's domains (rows and scales are otherwise the
 * same, the GEMM op row-wise), which is what the domains below record:
 *   TritonExperts, DeepGEMM contiguous and CK fused requantize GEMM1's
 *   activations once over all their rows; torch_experts, the TRT-LLM
 *   grouped path and the batched experts once per expert;
 *   BatchedPrepareAndFinalize quantizes each expert's batch on its own.
 * Counts (nf f32, nb x-dtype roundings on one term's path; L leaves;
 * acc: the weight multiplies the f32 GEMM2 accumulator):
 *   oracle   p_j = fl32(w_j Y_j), f32 sum from +0, one rounding: (k+1, 1)
 *   fmaf     TRT-LLM finalize / DeepEP-LL / pplx combine: fmaf chain from
 *            +0, one rounding: (k, 1)
 *   slot     each slot rounded after its weight, then moe_sum or CK's
 *            per-add rounded atomics: (k+1, k+1)
 *   acc      NaiveBatched: o = round(o + w_j Y_j) expert by expert: (k+1, k)
 *   hybrid   prob-weighted rows rounded, the rank's f32 unpermute sum,
 *            the home rank's f32 sum of R partials: (1+k+R, 3)
 *   +ep      allgather_rs / deepep_ht: each rank's partial rounded, the
 *            combine's f32 sum of R partials, one rounding: + (R, 1), and
 *            every rank may see every slot: L = R k. */
#include <string.h>
#include "moe/compat.h"
#include "sweep_internal.h"

typedef enum { P_ORACLE, P_FMAF, P_SLOT, P_ACC, P_HYBRID } path_kind;
typedef enum { C_NONE, C_EP_SUM, C_FMAF, C_ACC, C_HYBRID } combine_kind;

typedef struct {
    const char *name;
    path_kind path;
    int acc;
    moe_qdomain a2;
} experts_row;

static const experts_row EXPERTS[] = {
    {"ref", P_ORACLE, 0, MOE_QDOM_PER_EXPERT},
    {"triton_like", P_SLOT, 1, MOE_QDOM_ALL_ROWS},
    {"permute_grouped", P_FMAF, 0, MOE_QDOM_PER_EXPERT},
    {"naive_batched", P_ACC, 0, MOE_QDOM_PER_EXPERT},
    {"batched_masked", P_ACC, 0, MOE_QDOM_PER_EXPERT},
    {"grouped_contig", P_SLOT, 0, MOE_QDOM_ALL_ROWS},
    {"ck_fused", P_SLOT, 1, MOE_QDOM_ALL_ROWS},
};

typedef struct {
    const char *name;
    combine_kind combine;
    moe_qdomain a1;
} pf_row;

static const pf_row PFS[] = {
    {"noep", C_NONE, MOE_QDOM_ALL_ROWS},       {"batched", C_ACC, MOE_QDOM_PER_EXPERT},
    {"allgather_rs", C_EP_SUM, MOE_QDOM_ALL_ROWS}, {"deepep_ht", C_EP_SUM, MOE_QDOM_ALL_ROWS},
    {"deepep_ll", C_FMAF, MOE_QDOM_ALL_ROWS},  {"pplx", C_FMAF, MOE_QDOM_ALL_ROWS},
    {"hybrid_ep", C_HYBRID, MOE_QDOM_ALL_ROWS},
};


static const experts_row *find_experts(const char *n)
{
    for (size_t i = 0; i < sizeof EXPERTS / sizeof EXPERTS[0]; i++)
        if (!strcmp(EXPERTS[i].name, n)) return &EXPERTS[i];
    return NULL;
}

static const pf_row *find_pf(const char *n)
{
    for (size_t i = 0; i < sizeof PFS / sizeof PFS[0]; i++)
        if (!strcmp(PFS[i].name, n)) return &PFS[i];
    return NULL;
}

moe_status sweep_classify(const moe_sweep_case *c, sweep_class *out)
{
    const experts_row *ex = find_experts(c->experts);
    const pf_row *pf = find_pf(c->pf);
    if (!ex || !pf)
        return moe_fail(MOE_ERR_INTERNAL, "sweep class: no row for pf '%s' / experts '%s' (add it to sweep_class.c)",
                        c->pf, c->experts);
    memset(out, 0, sizeof *out);
    int k = c->k, R = c->world;
    moe_slot_path *x = &out->x;
    out->o = (moe_slot_path){k + 1, 1, k, 0};
    out->a1 = pf->a1, out->a2 = ex->a2;
    x->leaves = k;
    path_kind p = pf->combine == C_FMAF ? P_FMAF : pf->combine == C_ACC ? P_ACC
                : pf->combine == C_HYBRID ? P_HYBRID : ex->path;
    static const char *const NAMES[] = {"e2e/exact", "e2e/fmaf", "e2e/slot", "e2e/acc", "e2e/hybrid"};
    static const char *const EP_NAMES[] = {"e2e/f32-sum", "e2e/fmaf-ep", "e2e/slot-ep", NULL, NULL};
    switch (p) {
    case P_ORACLE: x->nf = k + 1, x->nb = 1; break;
    case P_FMAF: x->nf = k, x->nb = 1; break;
    case P_SLOT: x->nf = k + 1, x->nb = k + 1, x->acc = ex->acc; break;
    case P_ACC: x->nf = k + 1, x->nb = k; break;
    case P_HYBRID: x->nf = 1 + k + R, x->nb = 3; break;
    }
    out->tol_stage = NAMES[p];
    if (pf->combine == C_EP_SUM) {
        if (!EP_NAMES[p]) return moe_fail(MOE_ERR_INTERNAL, "sweep class: %s x %s has no EP class", c->pf, c->experts);
        out->tol_stage = EP_NAMES[p];
        x->nf += R, x->nb += 1, x->leaves = R * k;
    }
    moe_quant_spec as;
    moe_status st = moe_scheme_spec(c->scheme, MOE_OPERAND_ACT, &as);
    if (st) return st;
    out->matched = !strcmp(c->pf, "deepep_ll") && as.gran == MOE_GRAN_GROUP;
    return MOE_OK;
}
