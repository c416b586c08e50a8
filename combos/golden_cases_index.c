/* Golden cases of the index stages: routing (every method the reference
 * has, the NaN/Inf and tie rules), vLLM align (both expert-map modes,
 * padding, the numel < E sizing rule) and batched align, CK moe-sorting
 * (both id encodings, both empty-expert modes, the local mask), and both
 * TensorRT-LLM map builders, including their divergence on duplicates.
 * Layout edges: empty experts, one token, all tokens to one expert, an
 * expert-parallel rank that receives nothing. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "golden_internal.h"
#include "moe/rng.h"

static moe_status fill_ids(const moe_golden_case *c, moe_tensor *t, int mode) { return gk_ids_pattern(c, t, mode); }

static moe_status describe_ids(const moe_golden_case *c, cJSON *p, int mode)
{
    (void)c;
    return gk_json_str(p, "topk_ids", gk_ids_pattern_name(mode));
}

/* ---- route ------------------------------------------------------------------------ */

typedef struct {
    moe_route_method method;
    int renorm;
    moe_score_func score;
    int groups, topk_group;
    float scaling;
    int bias;         /* a correction bias (selection only) */
    moe_dtype logits; /* f32, bf16, f16 */
    int specials;     /* rows of ties, NaN, +-Inf and huge logits */
} route_arg;

static moe_status route_make(const moe_golden_case *c, moe_golden_set *in)
{
    const route_arg *a = c->arg;
    int64_t M = c->dims.M, E = c->dims.E;
    moe_tensor f;
    moe_status st = moe_tensor_alloc(&f, MOE_F32, 2, GK_SH(M, E));
    if (st != MOE_OK) return st;
    st = gk_normal(c, &f, "logits", 2.0f);
    float *v = f.data;
    if (a->specials && M >= 6) {
        /* ties go to the lower expert id; a NaN or Inf score becomes 0;
         * softmax subtracts the max, so 1e30 stays finite */
        for (int64_t e = 0; e < E; e++) v[0 * E + e] = 0.5f;
        v[1 * E + 2] = NAN, v[1 * E + 5] = NAN;
        v[2 * E + 3] = INFINITY;
        v[3 * E + 0] = -INFINITY, v[3 * E + 7] = -INFINITY;
        for (int64_t e = 0; e < E; e++) v[4 * E + e] = NAN;
        v[5 * E + 1] = 1e30f, v[5 * E + 4] = -1e30f;
    }
    /* bf16 / f16 logits: the same values rounded RNE */
    moe_tensor *lg = gk_new(in, &st, "logits", a->logits, 2, GK_SH(M, E));
    if (st == MOE_OK) st = gk_store_f32(lg, v, M * E);
    moe_tensor_free(&f);
    moe_tensor *b = a->bias ? gk_new(in, &st, "correction_bias", MOE_F32, 1, GK_SH(E)) : NULL;
    if (st == MOE_OK && b) st = gk_normal(c, b, "correction_bias", 0.5f);
    return st;
}

static moe_status route_run(const moe_golden_case *c, const moe_ops *ops, const moe_golden_set *in, moe_golden_set *out)
{
    const route_arg *a = c->arg;
    gk_run r;
    gk_begin(&r, ops, in, out);
    moe_route_params p;
    memset(&p, 0, sizeof p);
    p.method = a->method, p.topk = (int)c->dims.k, p.renormalize = a->renorm, p.score = a->score;
    p.num_expert_group = a->groups, p.topk_group = a->topk_group, p.routed_scaling_factor = a->scaling;
    const moe_tensor *lg = gk_in(&r, "logits");
    p.correction_bias = gk_opt(&r, "correction_bias");
    moe_tensor *ids = gk_out(&r, "topk_ids", MOE_I32, 2, GK_SH(c->dims.M, c->dims.k));
    moe_tensor *w = gk_out(&r, "topk_weights", MOE_F32, 2, GK_SH(c->dims.M, c->dims.k));
    return gk_done(&r, r.st ? r.st : ops->route(lg, &p, ids, w));
}

static moe_status route_describe(const moe_golden_case *c, cJSON *p)
{
    const route_arg *a = c->arg;
    moe_status st = gk_json_str(p, "method", moe_route_method_name(a->method));
    if (st == MOE_OK) st = gk_json_num(p, "renormalize", a->renorm);
    if (st == MOE_OK && a->method == MOE_ROUTE_GROUPED_TOPK) {
        st = gk_json_str(p, "score", a->score == MOE_SCORE_SIGMOID ? "sigmoid" : "softmax");
        if (st == MOE_OK) st = gk_json_num(p, "num_expert_group", a->groups);
        if (st == MOE_OK) st = gk_json_num(p, "topk_group", a->topk_group);
    }
    if (st == MOE_OK) st = gk_json_num(p, "routed_scaling_factor", a->scaling);
    if (st == MOE_OK) st = gk_json_num(p, "correction_bias", a->bias);
    if (st == MOE_OK) st = gk_json_str(p, "logits_dtype", moe_dtype_get(a->logits)->name);
    if (st == MOE_OK) st = gk_json_str(p, "nonfinite_score", "0 (vLLM topk_softmax)");
    if (st == MOE_OK) st = gk_json_str(p, "ties", "lower expert id");
    if (st == MOE_OK) st = gk_json_str(p, "math", "reference/math.h canonical exp/sigmoid");
    return st;
}

static const route_arg R_SOFTMAX = {MOE_ROUTE_SOFTMAX_TOPK, 0, MOE_SCORE_SOFTMAX, 0, 0, 1.0f, 0, MOE_F32, 0};
static const route_arg R_SOFTMAX_RENORM = {MOE_ROUTE_SOFTMAX_TOPK, 1, MOE_SCORE_SOFTMAX, 0, 0, 1.0f, 0, MOE_F32, 0};
static const route_arg R_SOFTMAX_SCALED = {MOE_ROUTE_SOFTMAX_TOPK, 0, MOE_SCORE_SOFTMAX, 0, 0, 2.5f, 0, MOE_F32, 0};
static const route_arg R_SIGMOID = {MOE_ROUTE_SIGMOID_TOPK, 1, MOE_SCORE_SIGMOID, 0, 0, 1.0f, 0, MOE_F32, 0};
static const route_arg R_GROUPED_SOFTMAX = {MOE_ROUTE_GROUPED_TOPK, 1, MOE_SCORE_SOFTMAX, 4, 2, 1.0f, 0, MOE_F32, 0};
static const route_arg R_GROUPED_BIAS = {MOE_ROUTE_GROUPED_TOPK, 1, MOE_SCORE_SIGMOID, 4, 2, 2.5f, 1, MOE_F32, 0};
static const route_arg R_LLAMA4 = {MOE_ROUTE_LLAMA4_TOP1, 0, MOE_SCORE_SOFTMAX, 0, 0, 1.0f, 0, MOE_F32, 0};
static const route_arg R_SPECIALS = {MOE_ROUTE_SOFTMAX_TOPK, 1, MOE_SCORE_SOFTMAX, 0, 0, 1.0f, 0, MOE_F32, 1};
static const route_arg R_SPECIALS_SIG = {MOE_ROUTE_SIGMOID_TOPK, 0, MOE_SCORE_SIGMOID, 0, 0, 1.0f, 0, MOE_F32, 1};
static const route_arg R_BF16 = {MOE_ROUTE_SOFTMAX_TOPK, 1, MOE_SCORE_SOFTMAX, 0, 0, 1.0f, 0, MOE_BF16, 0};
static const route_arg R_F16 = {MOE_ROUTE_GROUPED_TOPK, 1, MOE_SCORE_SIGMOID, 4, 2, 1.0f, 0, MOE_F16, 0};

#define ROUTE(nm, seed, M, E, k, arg, note) \
    {nm, "route", "*", seed, {M, E, k, 0, 0, 0}, {0}, &arg, 0, note, route_make, route_run, route_describe, NULL, NULL}

/* ---- align_block_size --------------------------------------------------------------- */

/* v[0] block size, v[1] ids pattern, v[2] expert map (0 none, 1 keep
 * non-local, 2 ignore invalid), v[3] pad_sorted_ids */
static moe_status align_make(const moe_golden_case *c, moe_golden_set *in)
{
    moe_status st = MOE_OK;
    moe_tensor *ids = gk_new(in, &st, "topk_ids", MOE_I32, 2, GK_SH(c->dims.M, c->dims.k));
    if (st == MOE_OK) st = fill_ids(c, ids, c->v[1]);
    if (st != MOE_OK || !c->v[2]) return st;
    /* this rank owns the upper half of the experts, as local ids 0.. */
    int64_t E = c->dims.E;
    moe_tensor *map = gk_new(in, &st, "expert_map", MOE_I32, 1, GK_SH(E));
    for (int64_t e = 0; st == MOE_OK && e < E; e++) ((int32_t *)map->data)[e] = e < E / 2 ? -1 : (int32_t)(e - E / 2);
    return st;
}

static void align_params(const moe_golden_case *c, moe_align_params *p)
{
    memset(p, 0, sizeof *p);
    p->block_size = c->v[0], p->num_experts = (int)c->dims.E, p->pad_sorted_ids = c->v[3];
    p->map_mode = c->v[2] == 2 ? MOE_ALIGN_MAP_IGNORE_INVALID : MOE_ALIGN_MAP_KEEP_NONLOCAL;
}

static moe_status align_run(const moe_golden_case *c, const moe_ops *ops, const moe_golden_set *in, moe_golden_set *out)
{
    gk_run r;
    gk_begin(&r, ops, in, out);
    moe_align_params p;
    align_params(c, &p);
    int64_t len = 0, blocks = 0;
    moe_status st = moe_align_capacity(c->dims.M * c->dims.k, &p, &len, &blocks);
    if (st != MOE_OK) return gk_done(&r, st);
    const moe_tensor *ids = gk_in(&r, "topk_ids");
    p.expert_map = gk_opt(&r, "expert_map");
    moe_tensor *s = gk_out(&r, "sorted_token_ids", MOE_I32, 1, GK_SH(len));
    moe_tensor *e = gk_out(&r, "expert_ids", MOE_I32, 1, GK_SH(blocks));
    moe_tensor *n = gk_out(&r, "num_tokens_post_pad", MOE_I32, 1, GK_SH(1));
    return gk_done(&r, r.st ? r.st : ops->align_block_size(ids, &p, s, e, n));
}

static moe_status align_describe(const moe_golden_case *c, cJSON *p)
{
    static const char *const MAP[] = {"none", "keep_nonlocal (upper half local)", "ignore_invalid (upper half local)"};
    moe_status st = gk_json_num(p, "block_size", c->v[0]);
    if (st == MOE_OK) st = gk_json_str(p, "expert_map", MAP[c->v[2]]);
    if (st == MOE_OK) st = gk_json_num(p, "pad_sorted_ids", c->v[3]);
    if (st == MOE_OK) st = gk_json_str(p, "order", "ascending flat index t*topk+k; pad = M*topk; unused expert_ids -1");
    if (st == MOE_OK) st = describe_ids(c, p, c->v[1]);
    return st;
}

/* SET (an atomic align, tolerance row cuda-atomic.align_block_size): the
 * entries of each expert's run of blocks as a multiset, the rest exact */
static moe_status align_set(const moe_golden_case *c, const moe_golden_set *got, const moe_golden_set *want,
                            moe_cmp_metrics *m)
{
    const moe_tensor *ws = moe_golden_set_find(want, "sorted_token_ids"), *we = moe_golden_set_find(want, "expert_ids");
    const moe_tensor *gs = moe_golden_set_find(got, "sorted_token_ids"), *ge = moe_golden_set_find(got, "expert_ids");
    const moe_tensor *gn = moe_golden_set_find(got, "num_tokens_post_pad"),
                     *wn = moe_golden_set_find(want, "num_tokens_post_pad");
    if (!ws || !we || !gs || !ge || !gn || !wn) return moe_fail(MOE_ERR_INVALID_ARG, "%s: align outputs missing", c->name);
    int64_t *seg = malloc(sizeof *seg * (size_t)(moe_tensor_numel(we) + 1));
    if (!seg) return moe_fail(MOE_ERR_NOMEM, "%s: segments", c->name);
    int n = moe_align_set_segments(we, c->v[0], moe_tensor_numel(ws), seg);
    moe_tensor g1 = *gs, w1 = *ws; /* entries as rows of one element */
    g1.ndim = w1.ndim = 2, g1.shape[1] = w1.shape[1] = 1;
    moe_status st = moe_compare_set_rows(&g1, &w1, seg, n, m);
    free(seg);
    if (st == MOE_OK) st = moe_compare_exact(ge, we, m);
    if (st == MOE_OK) st = moe_compare_exact(gn, wn, m);
    return st;
}

#define ALIGN(nm, seed, M, E, k, block, ids, map, pad, note) \
    {nm, "align_block_size", "*", seed, {M, E, k, 0, 0, 0}, {block, ids, map, pad}, NULL, 0, note, align_make, \
     align_run, align_describe, align_set, NULL}

/* ---- align_batched ------------------------------------------------------------------- */

/* dims.E batches, v[0] max_tokens, v[1] block size, v[2] 1: empty batches */
static moe_status batched_make(const moe_golden_case *c, moe_golden_set *in)
{
    moe_status st = MOE_OK;
    moe_tensor *n = gk_new(in, &st, "expert_num_tokens", MOE_I32, 1, GK_SH(c->dims.E));
    for (int64_t b = 0; st == MOE_OK && b < c->dims.E; b++) {
        uint32_t u = moe_rng_u32(c->seed, gk_stream(c, "expert_num_tokens"), (uint64_t)b);
        int32_t v = (int32_t)(u % (uint32_t)(c->v[0] + 1));
        if (c->v[2]) v = b % 2 ? (b == 1 ? c->v[0] : 1) : 0; /* 0, max, 0, 1, ... */
        ((int32_t *)n->data)[b] = v;
    }
    return st;
}

static moe_status batched_run(const moe_golden_case *c, const moe_ops *ops, const moe_golden_set *in,
                              moe_golden_set *out)
{
    gk_run r;
    gk_begin(&r, ops, in, out);
    int64_t B = c->dims.E, mt = c->v[0], bs = c->v[1], len = B * ((mt + bs - 1) / bs * bs);
    const moe_tensor *n = gk_in(&r, "expert_num_tokens");
    moe_tensor *s = gk_out(&r, "sorted_token_ids", MOE_I32, 1, GK_SH(len));
    moe_tensor *e = gk_out(&r, "expert_ids", MOE_I32, 1, GK_SH(len / bs));
    moe_tensor *p = gk_out(&r, "num_tokens_post_pad", MOE_I32, 1, GK_SH(1));
    return gk_done(&r, r.st ? r.st : ops->align_batched(n, c->v[0], c->v[1], s, e, p));
}

static moe_status batched_describe(const moe_golden_case *c, cJSON *p)
{
    moe_status st = gk_json_num(p, "max_tokens", c->v[0]);
    if (st == MOE_OK) st = gk_json_num(p, "block_size", c->v[1]);
    if (st == MOE_OK) st = gk_json_str(p, "counts", c->v[2] ? "0, max, 0, 1 (empty batches)" : "seeded in [0, max]");
    return st;
}

#define BATCHED(nm, seed, B, max_tokens, block, empty, note) \
    {nm, "align_batched", "*", seed, {0, B, 0, 0, 0, 0}, {max_tokens, block, empty, 0}, NULL, 0, note, \
     batched_make, batched_run, batched_describe, NULL, NULL}

/* ---- sort_ck --------------------------------------------------------------------------- */

/* v[0] unit size, v[1] ids pattern, v[2] id mode, v[3] empty mode; arg
 * non-NULL: a local expert mask (the even experts) */
static const int MASK_EVEN = 1;

static moe_status sort_make(const moe_golden_case *c, moe_golden_set *in)
{
    moe_status st = MOE_OK;
    int64_t M = c->dims.M, k = c->dims.k, E = c->dims.E;
    moe_tensor *ids = gk_new(in, &st, "topk_ids", MOE_I32, 2, GK_SH(M, k));
    moe_tensor *w = gk_new(in, &st, "topk_weights", MOE_F32, 2, GK_SH(M, k));
    if (st == MOE_OK) st = fill_ids(c, ids, c->v[1]);
    if (st == MOE_OK) st = gk_uniform(c, w, "topk_weights", 0.0f, 1.0f);
    if (st != MOE_OK || !c->arg) return st;
    moe_tensor *m = gk_new(in, &st, "local_expert_mask", MOE_I32, 1, GK_SH(E));
    for (int64_t e = 0; st == MOE_OK && e < E; e++) ((int32_t *)m->data)[e] = e % 2 == 0;
    return st;
}

static moe_status sort_run(const moe_golden_case *c, const moe_ops *ops, const moe_golden_set *in, moe_golden_set *out)
{
    gk_run r;
    gk_begin(&r, ops, in, out);
    moe_sort_ck_params p;
    memset(&p, 0, sizeof p);
    p.num_experts = (int)c->dims.E, p.unit_size = c->v[0];
    p.id_mode = (moe_sort_ck_id_mode)c->v[2], p.empty_experts = (moe_sort_ck_empty_mode)c->v[3];
    int64_t len = 0, tiles = 0;
    moe_status st = moe_sort_ck_capacity(c->dims.M, (int)c->dims.k, p.num_experts, p.unit_size,
                                         MOE_SORT_CK_PAD_UPDATED, &len, &tiles);
    if (st != MOE_OK) return gk_done(&r, st);
    const moe_tensor *ids = gk_in(&r, "topk_ids"), *w = gk_in(&r, "topk_weights");
    p.local_expert_mask = gk_opt(&r, "local_expert_mask");
    moe_tensor *s = gk_out(&r, "sorted_token_ids", MOE_I32, 1, GK_SH(len));
    moe_tensor *sw = gk_out(&r, "sorted_weights", MOE_F32, 1, GK_SH(len));
    moe_tensor *se = gk_out(&r, "sorted_expert_ids", MOE_I32, 1, GK_SH(tiles));
    moe_tensor *n = gk_out(&r, "num_tokens_post_padded", MOE_I32, 1, GK_SH(2));
    return gk_done(&r, r.st ? r.st : ops->sort_ck(ids, w, &p, s, sw, se, n));
}

static moe_status sort_describe(const moe_golden_case *c, cJSON *p)
{
    moe_status st = gk_json_num(p, "unit_size", c->v[0]);
    if (st == MOE_OK) st = gk_json_str(p, "id_mode", c->v[2] ? "plain" : "mock (token | slot << 24)");
    if (st == MOE_OK) st = gk_json_str(p, "empty_experts", c->v[3] ? "one_tile" : "skip");
    if (st == MOE_OK) st = gk_json_str(p, "local_expert_mask", c->arg ? "even experts" : "none");
    if (st == MOE_OK) st = gk_json_str(p, "capacity", "PAD_UPDATED: topk*T + E*unit - topk; untouched tail stays 0");
    if (st == MOE_OK) st = describe_ids(c, p, c->v[1]);
    return st;
}

#define SORT(nm, seed, M, E, k, unit, ids, id_mode, empty, mask, note) \
    {nm, "sort_ck", "*", seed, {M, E, k, 0, 0, 0}, {unit, ids, id_mode, empty}, mask, 0, note, sort_make, \
     sort_run, sort_describe, NULL, NULL}

/* ---- maps_trtllm ------------------------------------------------------------------------- */

/* v[0] variant, v[1] ids pattern, v[2] start_expert, v[3] local experts (0: all) */
static moe_status maps_make(const moe_golden_case *c, moe_golden_set *in)
{
    moe_status st = MOE_OK;
    moe_tensor *ids = gk_new(in, &st, "token_selected_experts", MOE_I32, 2, GK_SH(c->dims.M, c->dims.k));
    if (st == MOE_OK) st = fill_ids(c, ids, c->v[1]);
    if (st == MOE_OK && c->v[1] == IDS_DUPLICATES) {
        /* make sure some rows really repeat an expert */
        int32_t *v = ids->data;
        for (int64_t t = 0; t < c->dims.M; t += 3) v[t * c->dims.k + 1] = v[t * c->dims.k];
    }
    return st;
}

static moe_status maps_run(const moe_golden_case *c, const moe_ops *ops, const moe_golden_set *in, moe_golden_set *out)
{
    gk_run r;
    gk_begin(&r, ops, in, out);
    int64_t P = c->dims.M * c->dims.k;
    moe_maps_trtllm_params p = {(moe_maps_trtllm_variant)c->v[0], (int)c->dims.E, c->v[2],
                                c->v[3] ? c->v[3] : (int)c->dims.E};
    const moe_tensor *ids = gk_in(&r, "token_selected_experts");
    moe_tensor *p2u = gk_out(&r, "permuted_row_to_unpermuted_row", MOE_I32, 1, GK_SH(P));
    moe_tensor *u2p = gk_out(&r, "unpermuted_row_to_permuted_row", MOE_I32, 1, GK_SH(P));
    moe_tensor *off = gk_out(&r, "expert_first_token_offset", MOE_I64, 1, GK_SH(p.num_local_experts + 1));
    moe_tensor *pe = p.variant == MOE_MAPS_TRTLLM_THREE_STEP
                         ? gk_out(&r, "permuted_token_selected_experts", MOE_I32, 1, GK_SH(P))
                         : NULL;
    return gk_done(&r, r.st ? r.st : ops->maps_trtllm(ids, &p, p2u, u2p, off, pe));
}

static moe_status maps_describe(const moe_golden_case *c, cJSON *p)
{
    moe_status st = gk_json_str(p, "variant", c->v[0] ? "three_step" : "fused_single_block");
    if (st == MOE_OK) st = gk_json_num(p, "start_expert", c->v[2]);
    if (st == MOE_OK) st = gk_json_num(p, "num_local_experts", c->v[3] ? c->v[3] : (double)c->dims.E);
    if (st == MOE_OK) st = gk_json_str(p, "expanded_index", "k-major u = j*T + t; unwritten entries stay 0");
    if (st == MOE_OK) st = describe_ids(c, p, c->v[1]);
    return st;
}

#define MAPS(nm, seed, M, E, k, variant, ids, start, local, note) \
    {nm, "maps_trtllm", "*", seed, {M, E, k, 0, 0, 0}, {variant, ids, start, local}, NULL, 0, note, maps_make, \
     maps_run, maps_describe, NULL, NULL}

/* ---- the table ------------------------------------------------------------------------------ */

enum { FUSED = MOE_MAPS_TRTLLM_FUSED_SINGLE_BLOCK, THREE = MOE_MAPS_TRTLLM_THREE_STEP };
enum { KEEP_NONLOCAL = 1, IGNORE_INVALID = 2 };

static const moe_golden_case CASES[] = {
    ROUTE("stage.route.softmax_topk", 101, 12, 16, 4, R_SOFTMAX, "softmax top-k, no renormalization"),
    ROUTE("stage.route.softmax_topk.renorm", 102, 12, 16, 4, R_SOFTMAX_RENORM, "softmax top-k, renormalized"),
    ROUTE("stage.route.softmax_topk.scaled", 103, 12, 16, 4, R_SOFTMAX_SCALED, "routed scaling factor 2.5"),
    ROUTE("stage.route.sigmoid_topk", 104, 12, 16, 4, R_SIGMOID, "sigmoid scores, renormalized"),
    ROUTE("stage.route.grouped_topk.softmax", 105, 12, 16, 4, R_GROUPED_SOFTMAX,
          "DeepSeek-V2 grouped top-k: 4 groups, 2 kept, group score = max"),
    ROUTE("stage.route.grouped_topk.sigmoid_bias", 106, 12, 16, 4, R_GROUPED_BIAS,
          "DeepSeek-V3: sigmoid, correction bias for selection only, top-2-sum group score, scaling 2.5"),
    ROUTE("stage.route.llama4_top1", 107, 12, 16, 1, R_LLAMA4, "Llama-4 top-1, weight sigmoid(logit)"),
    ROUTE("stage.route.softmax_topk.logits_bf16", 108, 12, 16, 4, R_BF16, "bf16 logits widened exactly"),
    ROUTE("stage.route.grouped_topk.logits_f16", 109, 12, 16, 4, R_F16, "f16 logits, grouped sigmoid"),
    ROUTE("edge.route.nonfinite_and_ties", 110, 8, 16, 4, R_SPECIALS,
          "rows of equal logits (ties -> lower id), NaN, +Inf, -Inf, all-NaN and +-1e30 logits"),
    ROUTE("edge.route.nonfinite_and_ties.sigmoid", 111, 8, 16, 4, R_SPECIALS_SIG, "the same rows under sigmoid"),
    ROUTE("edge.route.one_token", 112, 1, 16, 4, R_SOFTMAX_RENORM, "M = 1"),

    ALIGN("stage.align_block_size.basic", 201, 10, 8, 2, 4, IDS_DISTINCT, 0, 0, "vLLM moe_align_block_size"),
    ALIGN("stage.align_block_size.pad_sorted_ids", 202, 10, 8, 2, 4, IDS_DISTINCT, 0, 1,
          "buffer length rounded up to the block"),
    ALIGN("stage.align_block_size.expert_map_keep_nonlocal", 203, 10, 8, 2, 4, IDS_DISTINCT, KEEP_NONLOCAL, 0,
          "legacy map mode: non-local blocks stay with expert id -1"),
    ALIGN("stage.align_block_size.expert_map_ignore_invalid", 204, 10, 8, 2, 4, IDS_DISTINCT, IGNORE_INVALID, 0,
          "ignore_invalid_experts: non-local pairs take no slot"),
    ALIGN("stage.align_block_size.empty_experts", 205, 10, 8, 2, 4, IDS_SUBSET, 0, 0,
          "six of eight experts empty: 0 blocks each"),
    ALIGN("stage.align_block_size.numel_below_experts", 206, 2, 8, 2, 4, IDS_DISTINCT, 0, 0,
          "numel < E caps the buffer at numel*block"),
    ALIGN("edge.align_block_size.one_token", 207, 1, 8, 2, 4, IDS_DISTINCT, 0, 0, "M = 1"),
    ALIGN("edge.align_block_size.all_to_one_expert", 208, 10, 8, 1, 4, IDS_ONE_EXPERT, 0, 0,
          "every token to expert 3"),
    ALIGN("edge.align_block_size.rank_without_tokens", 209, 10, 8, 2, 4, IDS_LOW_HALF, IGNORE_INVALID, 0,
          "expert map owning experts 4..7 while every token picks 0..3: nothing aligned"),

    BATCHED("stage.align_batched.basic", 301, 4, 6, 4, 0, "batched_moe_align_block_size, seeded counts"),
    BATCHED("edge.align_batched.empty_batches", 302, 4, 6, 4, 1, "empty and full batches"),

    SORT("stage.sort_ck.mock_id", 401, 10, 8, 3, 4, IDS_DISTINCT, MOE_SORT_CK_MOCK_ID, MOE_SORT_CK_SKIP_EMPTY, NULL,
         "CK moe-sorting, mock ids, skip empty experts"),
    SORT("stage.sort_ck.plain_id", 402, 10, 8, 3, 4, IDS_DISTINCT, MOE_SORT_CK_PLAIN_ID, MOE_SORT_CK_SKIP_EMPTY, NULL,
         "plain token ids, sentinel T"),
    SORT("stage.sort_ck.one_tile_per_empty", 403, 10, 8, 2, 4, IDS_SUBSET, MOE_SORT_CK_MOCK_ID,
         MOE_SORT_CK_ONE_TILE_PER_EMPTY, NULL, "legacy kernel: one sentinel tile per empty expert"),
    SORT("stage.sort_ck.local_expert_mask", 404, 10, 8, 3, 4, IDS_DISTINCT, MOE_SORT_CK_MOCK_ID,
         MOE_SORT_CK_SKIP_EMPTY, &MASK_EVEN, "masked experts take nothing; tiles carry compact local ids"),
    SORT("edge.sort_ck.empty_experts", 405, 10, 8, 2, 4, IDS_SUBSET, MOE_SORT_CK_MOCK_ID, MOE_SORT_CK_SKIP_EMPTY, NULL,
         "six empty experts skipped"),
    SORT("edge.sort_ck.one_token", 406, 1, 8, 3, 4, IDS_DISTINCT, MOE_SORT_CK_MOCK_ID, MOE_SORT_CK_SKIP_EMPTY, NULL,
         "T = 1"),
    SORT("edge.sort_ck.all_to_one_expert", 407, 10, 8, 1, 4, IDS_ONE_EXPERT, MOE_SORT_CK_PLAIN_ID,
         MOE_SORT_CK_ONE_TILE_PER_EMPTY, NULL, "every token to expert 3, the others one sentinel tile each"),

    MAPS("stage.maps_trtllm.fused_single_block", 501, 9, 8, 2, FUSED, IDS_DISTINCT, 0, 0,
         "fusedBuildExpertMapsSortFirstToken"),
    MAPS("stage.maps_trtllm.three_step", 502, 9, 8, 2, THREE, IDS_DISTINCT, 0, 0,
         "threeStepBuildExpertMapsSortFirstToken"),
    MAPS("stage.maps_trtllm.fused_single_block.ep_rank", 503, 9, 8, 2, FUSED, IDS_DISTINCT, 4, 4,
         "rank owning experts 4..7: non-local rows after the local ones"),
    MAPS("stage.maps_trtllm.three_step.ep_rank", 504, 9, 8, 2, THREE, IDS_DISTINCT, 4, 4,
         "rank owning experts 4..7: non-local slots unwritten"),
    MAPS("edge.maps_trtllm.duplicates.fused_single_block", 505, 9, 8, 2, FUSED, IDS_DUPLICATES, 0, 0,
         "a token picking an expert twice gets two rows"),
    MAPS("edge.maps_trtllm.duplicates.three_step", 506, 9, 8, 2, THREE, IDS_DUPLICATES, 0, 0,
         "a token picking an expert twice contributes its first slot only"),
    MAPS("edge.maps_trtllm.all_to_one_expert", 507, 9, 8, 1, FUSED, IDS_ONE_EXPERT, 0, 0, "every token to expert 3"),
    MAPS("edge.maps_trtllm.rank_without_tokens", 508, 9, 8, 2, THREE, IDS_LOW_HALF, 4, 4,
         "rank owning experts 4..7 while every token picks 0..3: no local rows"),
    MAPS("edge.maps_trtllm.one_token", 509, 1, 8, 2, FUSED, IDS_DISTINCT, 0, 0, "T = 1"),
};

gk_family gk_cases_index(void)
{
    gk_family f = {CASES, (int)(sizeof CASES / sizeof CASES[0])};
    return f;
}
