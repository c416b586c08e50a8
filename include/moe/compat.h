/* Capabilities of the prepare/finalize and experts types, and the
 * compatibility rules between them (DESIGN sections 6-7). Capabilities are
 * data (combos/registry.c, one row per type, modelled on vLLM's
 * mk_objects.py registry, anchors vllm_modular.md 1.2-1.4); rules are
 * small named predicates with an id, a one-line reason and the anchor they
 * come from (combos/rules.c). A rule is either STRUCTURAL (the pair cannot
 * work) or NYI (a legitimate pair upstream does not run yet), kept apart
 * as vLLM keeps is_valid() and is_nyi_config() apart. moe-compat answers
 * from these tables, and the modular kernel constructor (later) refuses a
 * pair with the same rule ids. */
#ifndef MOE_COMPAT_H
#define MOE_COMPAT_H

#include <stdint.h>
#include "moe/quant.h"
#include "moe/reduce.h"
#include "moe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MOE_FMT_STANDARD = 0, /* token-major rows + top-k ids/weights */
    MOE_FMT_BATCHED,      /* [E_loc, max_tokens, K] + per-expert counts */
    MOE_FMT_GROUPED,      /* expert-contiguous rows padded to a multiple + counts */
    MOE_FMT_COUNT
} moe_act_format;

const char *moe_act_format_name(moe_act_format f);

/* How an experts type's output relates to the reference (DESIGN 5). */
typedef enum { MOE_DET_EXACT = 0, MOE_DET_SET, MOE_DET_BOUNDED, MOE_DET_COUNT } moe_determinism;
const char *moe_determinism_name(moe_determinism d);

#define MOE_SCHEME_BIT(s) (1u << (s))

typedef struct {
    const char *name;
    moe_act_format format;
    uint32_t schemes;          /* MOE_SCHEME_BIT set */
    int block_quant;           /* fp8_wblock128_agroup128 */
    int topk_id_bits;          /* 32, or 64 where upstream wants int64 ids (DeepEP) */
    int expert_parallel;       /* runs with world size > 1 */
    int max_tokens_per_rank;   /* batched buffers: tokens a rank may send; 0 = unbounded */
    int num_dispatchers;       /* 1, or 0 = the world size */
    int async;                 /* prepare_async */
    int weight_on_input;       /* apply_router_weight_on_input */
    int accepts_invalid_ids;   /* -1 in topk_ids */
    int max_topk;              /* 0 = none */
    const int *hidden_sizes;   /* NULL = any; else a 0-terminated list */
    const char *anchor;
} moe_pf_info;

typedef struct {
    const char *name;
    uint32_t formats;          /* (1 << moe_act_format) set */
    uint32_t schemes;
    int block_quant;
    int expert_map;            /* supports_expert_map */
    int chunking;              /* supports_chunking */
    int matching_quant;        /* per-token act <=> per-channel weight (Triton) */
    moe_determinism determinism;
    moe_war_kind war;          /* finalize_weight_and_reduce_impl */
    const char *anchor;
} moe_experts_info;

int moe_pf_count(void);
const moe_pf_info *moe_pf_get(int i);
const moe_pf_info *moe_pf_find(const char *name); /* NULL if unknown */
int moe_experts_count(void);
const moe_experts_info *moe_experts_get(int i);
const moe_experts_info *moe_experts_find(const char *name);

/* The problem a pair is asked to run. */
typedef struct {
    moe_scheme scheme;
    int topk;
    int num_experts;       /* global E */
    int world_size;        /* 1 = no expert parallelism */
    int hidden;            /* H; 0 = not given */
    int tokens;            /* M per rank; 0 = not given */
    int chunk_size;        /* 0 = no chunking */
    int expert_map;        /* an expert map is used */
    int weight_on_input;
    int invalid_ids;       /* topk_ids may contain -1 */
} moe_compat_query;

/* Defaults: bf16, topk 2, E 8, world 1, nothing else set. */
moe_compat_query moe_compat_query_default(void);

typedef enum { MOE_RULE_STRUCTURAL = 0, MOE_RULE_NYI = 1 } moe_rule_kind;

typedef struct {
    const char *id;
    moe_rule_kind kind;
    const char *reason;
    const char *anchor;
} moe_compat_rule;

int moe_compat_rule_count(void);
const moe_compat_rule *moe_compat_rule_get(int i);
const moe_compat_rule *moe_compat_rule_find(const char *id);

#define MOE_COMPAT_MAX_FAIL 24

typedef struct {
    int compatible;            /* no rule fired */
    int nfail;
    const moe_compat_rule *fail[MOE_COMPAT_MAX_FAIL]; /* in rule-table order */
    char detail[MOE_COMPAT_MAX_FAIL][96];             /* the values that made each fire */
    int structural, nyi;       /* how many of each kind fired */
} moe_compat_verdict;

/* Evaluates every rule for (pf, experts, q). MOE_ERR_NULL / INVALID_ARG on
 * a malformed query (names the field); the verdict otherwise. */
moe_status moe_compat_check(const moe_pf_info *pf, const moe_experts_info *ex, const moe_compat_query *q,
                            moe_compat_verdict *v);

#ifdef __cplusplus
}
#endif

#endif
