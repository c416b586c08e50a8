/* Compatibility rules: one row per rule (id, kind, one-line reason,
 * anchor) and one predicate per row, evaluated in table order. The
 * predicate fills `d` with the values that made it fire. */
#include <stdio.h>
#include <string.h>
#include "moe/compat.h"

typedef int (*rule_fn)(const moe_pf_info *, const moe_experts_info *, const moe_compat_query *,
                       const moe_quant_spec *w, const moe_quant_spec *a, char *d, size_t n);

#define RULE(name) \
    static int name(const moe_pf_info *pf, const moe_experts_info *ex, const moe_compat_query *q, \
                    const moe_quant_spec *w, const moe_quant_spec *a, char *d, size_t n)
#define UNUSED (void)pf, (void)ex, (void)q, (void)w, (void)a

RULE(format_mismatch)
{
    UNUSED;
    if (ex->formats & (1u << pf->format)) return 0;
    snprintf(d, n, "%s produces %s rows; %s does not accept them", pf->name, moe_act_format_name(pf->format),
             ex->name);
    return 1;
}

RULE(scheme_pf)
{
    UNUSED;
    if (pf->schemes & MOE_SCHEME_BIT(q->scheme)) return 0;
    snprintf(d, n, "%s does not move %s", pf->name, moe_scheme_name(q->scheme));
    return 1;
}

RULE(scheme_experts)
{
    UNUSED;
    if (ex->schemes & MOE_SCHEME_BIT(q->scheme)) return 0;
    snprintf(d, n, "%s has no %s kernel", ex->name, moe_scheme_name(q->scheme));
    return 1;
}

RULE(block_quant)
{
    UNUSED;
    if (w->gran != MOE_GRAN_BLOCK || (pf->block_quant && ex->block_quant)) return 0;
    snprintf(d, n, "%s block quantization: %s %s, %s %s", moe_scheme_name(q->scheme), pf->name,
             pf->block_quant ? "yes" : "no", ex->name, ex->block_quant ? "yes" : "no");
    return 1;
}

/* Triton's fused kernels want per-token activations and per-channel
 * weights together or not at all (vLLM is_nyi_config). */
RULE(matching_quant)
{
    UNUSED;
    int tok = a->gran == MOE_GRAN_ROW, ch = w->gran == MOE_GRAN_ROW;
    if (!ex->matching_quant || tok == ch) return 0;
    snprintf(d, n, "%s: per-token activations %s, per-channel weights %s", moe_scheme_name(q->scheme),
             tok ? "yes" : "no", ch ? "yes" : "no");
    return 1;
}

RULE(expert_map)
{
    UNUSED;
    if (!q->expert_map || ex->expert_map) return 0;
    snprintf(d, n, "%s has no expert-map support", ex->name);
    return 1;
}

RULE(chunking)
{
    UNUSED;
    if (q->chunk_size <= 0 || ex->chunking) return 0;
    snprintf(d, n, "chunk %d requested; %s does not chunk", q->chunk_size, ex->name);
    return 1;
}

RULE(woi_topk)
{
    UNUSED;
    if (!q->weight_on_input || q->topk == 1) return 0;
    snprintf(d, n, "weight on input with topk %d", q->topk);
    return 1;
}

RULE(woi_pf)
{
    UNUSED;
    if (!q->weight_on_input || pf->weight_on_input) return 0;
    snprintf(d, n, "%s passes router weights through to the experts", pf->name);
    return 1;
}

RULE(world)
{
    UNUSED;
    if (q->world_size == 1 || pf->expert_parallel) return 0;
    snprintf(d, n, "world %d; %s runs on one rank", q->world_size, pf->name);
    return 1;
}

RULE(ep_divisible)
{
    UNUSED;
    if (q->world_size == 1 || q->num_experts % q->world_size == 0) return 0;
    snprintf(d, n, "E = %d over %d ranks", q->num_experts, q->world_size);
    return 1;
}

RULE(invalid_ids)
{
    UNUSED;
    if (!q->invalid_ids || pf->accepts_invalid_ids) return 0;
    snprintf(d, n, "%s needs every top-k id valid", pf->name);
    return 1;
}

RULE(topk_limit)
{
    UNUSED;
    if (!pf->max_topk || q->topk <= pf->max_topk) return 0;
    snprintf(d, n, "topk %d > %d", q->topk, pf->max_topk);
    return 1;
}

RULE(hidden_size)
{
    UNUSED;
    if (!pf->hidden_sizes || q->hidden == 0) return 0;
    for (const int *h = pf->hidden_sizes; *h; h++)
        if (*h == q->hidden) return 0;
    snprintf(d, n, "hidden %d not in %s's supported list", q->hidden, pf->name);
    return 1;
}

RULE(topk_experts)
{
    UNUSED;
    if (q->topk <= q->num_experts) return 0;
    snprintf(d, n, "topk %d > E = %d", q->topk, q->num_experts);
    return 1;
}

static const struct {
    moe_compat_rule rule;
    rule_fn fn;
} rules[] = {
    {{"format-mismatch", MOE_RULE_STRUCTURAL, "the experts do not accept the prepare/finalize's activation format",
      "vllm_modular.md 1.7 rule 1, 2.4 step 1"}, format_mismatch},
    {{"scheme-unsupported-pf", MOE_RULE_STRUCTURAL, "the prepare/finalize cannot carry this quantization scheme",
      "vllm_modular.md 1.7 rule 3"}, scheme_pf},
    {{"scheme-unsupported-experts", MOE_RULE_STRUCTURAL, "the experts have no kernel for this quantization scheme",
      "vllm_modular.md 1.7 rules 3-4"}, scheme_experts},
    {{"block-quant-unsupported", MOE_RULE_STRUCTURAL, "block quantization needs support on both sides",
      "vllm_modular.md 1.7 rule 5"}, block_quant},
    {{"matching-quant", MOE_RULE_NYI, "these experts need per-token activations and per-channel weights together",
      "vllm_modular.md 1.7 (is_nyi_config)"}, matching_quant},
    {{"expert-map-unsupported", MOE_RULE_NYI, "the experts cannot skip non-local experts through an expert map",
      "vllm_modular.md 1.7 (is_nyi_config), 1.4"}, expert_map},
    {{"chunking-unsupported", MOE_RULE_STRUCTURAL, "the experts cannot run the tokens in chunks",
      "vllm_modular.md 2.5"}, chunking},
    {{"weight-on-input-topk", MOE_RULE_STRUCTURAL, "applying the router weight on the input needs topk 1",
      "vllm_modular.md 2.7 (NoDPEP asserts), 7 step 2"}, woi_topk},
    {{"weight-on-input-unsupported", MOE_RULE_STRUCTURAL, "the prepare/finalize cannot apply router weights on the input",
      "vllm_modular.md 1.3"}, woi_pf},
    {{"world-unsupported", MOE_RULE_STRUCTURAL, "the prepare/finalize is single-rank",
      "vllm_modular.md 1.3 (single- vs multi-GPU lists)"}, world},
    {{"ep-experts-divisible", MOE_RULE_STRUCTURAL, "experts are owned contiguously: E must divide by the world size",
      "dispatch_sorting.md A.2; DESIGN 4"}, ep_divisible},
    {{"invalid-ids-refused", MOE_RULE_STRUCTURAL, "the dispatcher refuses -1 expert ids",
      "dispatch_sorting.md D, E (pplx uint32 ids)"}, invalid_ids},
    {{"topk-limit", MOE_RULE_STRUCTURAL, "the dispatcher supports a limited top-k",
      "dispatch_sorting.md E (DeepEP LL K <= 11)"}, topk_limit},
    {{"hidden-size-unsupported", MOE_RULE_STRUCTURAL, "the dispatcher is compiled for a fixed list of hidden sizes",
      "vLLM DeepEPLLPrepareAndFinalize.SUPPORTED_HIDDEN_SIZES"}, hidden_size},
    {{"topk-exceeds-experts", MOE_RULE_STRUCTURAL, "top-k cannot exceed the number of experts",
      "vllm_modular.md 9"}, topk_experts},
};

#define NRULES ((int)(sizeof rules / sizeof rules[0]))

int moe_compat_rule_count(void) { return NRULES; }
const moe_compat_rule *moe_compat_rule_get(int i) { return i >= 0 && i < NRULES ? &rules[i].rule : NULL; }

const moe_compat_rule *moe_compat_rule_find(const char *id)
{
    for (int i = 0; id && i < NRULES; i++)
        if (strcmp(rules[i].rule.id, id) == 0) return &rules[i].rule;
    return NULL;
}

moe_compat_query moe_compat_query_default(void)
{
    moe_compat_query q;
    memset(&q, 0, sizeof q);
    q.scheme = MOE_SCHEME_BF16, q.topk = 2, q.num_experts = 8, q.world_size = 1;
    return q;
}

moe_status moe_compat_check(const moe_pf_info *pf, const moe_experts_info *ex, const moe_compat_query *q,
                            moe_compat_verdict *v)
{
    if (!pf || !ex || !q || !v) return moe_fail(MOE_ERR_NULL, "pf, experts, query, verdict: must not be NULL");
    moe_quant_spec w, a;
    if (moe_scheme_spec(q->scheme, MOE_OPERAND_WEIGHT, &w) != MOE_OK ||
        moe_scheme_spec(q->scheme, MOE_OPERAND_ACT, &a) != MOE_OK)
        return moe_fail(MOE_ERR_INVALID_ARG, "query.scheme %d: not a moe_scheme", (int)q->scheme);
    if (q->topk < 1) return moe_fail(MOE_ERR_INVALID_ARG, "query.topk %d: must be >= 1", q->topk);
    if (q->num_experts < 1) return moe_fail(MOE_ERR_INVALID_ARG, "query.num_experts %d: must be >= 1", q->num_experts);
    if (q->world_size != 1 && q->world_size != 2 && q->world_size != 4 && q->world_size != 8)
        return moe_fail(MOE_ERR_INVALID_ARG, "query.world_size %d: must be 1, 2, 4 or 8", q->world_size);
    if (q->hidden < 0 || q->tokens < 0 || q->chunk_size < 0)
        return moe_fail(MOE_ERR_INVALID_ARG, "query.hidden, tokens, chunk_size: must be >= 0");
    memset(v, 0, sizeof *v);
    for (int i = 0; i < NRULES && v->nfail < MOE_COMPAT_MAX_FAIL; i++) {
        if (!rules[i].fn(pf, ex, q, &w, &a, v->detail[v->nfail], sizeof v->detail[0])) continue;
        v->fail[v->nfail++] = &rules[i].rule;
        if (rules[i].rule.kind == MOE_RULE_NYI) v->nyi++;
        else v->structural++;
    }
    v->compatible = v->nfail == 0;
    return MOE_OK;
}
